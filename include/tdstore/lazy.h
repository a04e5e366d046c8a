/* SPDX-License-Identifier: MIT */
/*
 * tdstore/lazy.h - lazy stacks: a kind of td_dict that stacks N dicts along
 * a new batch dim without copying them (tensordict's LazyStackedTensorDict).
 *
 * A lazy stack is a td_dict: td_dict_is_lazy() tells it apart, and the
 * generic td_dict functions apply to it where they can:
 *  - batch shape, td_dict_len(), td_dict_contains*(), iteration
 *    (td_dict_iter_*(), td_dict_items()), td_dict_lock() / unlock(),
 *    td_dict_index() / index_put() / index_fill(), td_dict_unbind() /
 *    split() / split_sizes() / chunk() (the pieces index the stack: lazy
 *    stacks of views), td_dict_copy() / clone(), td_dict_set_tensor*()
 *    (plain and in place), td_dict_set_string() / set_bytes(),
 *    td_dict_del*(), td_dict_free();
 *  - per-leaf operations, child by child as tensordict's
 *    LazyStackedTensorDict does: td_dict_apply() (the callback sees each
 *    child's leaves, keys only some children have included; the result is
 *    a new stack at the same dim owning the children's results, whose
 *    leaves must start with the children's batch shape),
 *    td_dict_apply_inplace(), td_dict_binary_scalar() / _inplace() and
 *    td_dict_zero() (the in-place ones check every child before writing,
 *    except apply_inplace, whose callback runs child after child; a child
 *    that appears twice in the stack is visited twice);
 *  - structure operations, child by child into a new stack at the same
 *    dim: td_dict_select() / exclude() (strict: every child must hold the
 *    keys), td_dict_flatten_keys() / unflatten_keys(), td_dict_empty();
 *  - td_dict_update() / update_inplace() with a stack on either side: a
 *    stack on the left has each child updated with its slice of the right
 *    side along the stack dim (whose leaves must start with the stack's
 *    batch shape), a stack on the right is read in its dense form
 *    (td_lazy_densify(): TD_ETYPE for ragged leaves). On failure the
 *    children already updated stay updated, as for td_dict_update();
 *    update_inplace checks every child before writing;
 *  - td_dict_equal() / allclose() compare by value through the dense form
 *    (td_lazy_densify(): TD_ETYPE for ragged leaves), with a stack or a
 *    dense dict on either side;
 *  - the borrowed lookups td_dict_get*() return TD_ENOTSUP: a leaf of a
 *    lazy stack is not stored anywhere, it is made by stacking the
 *    children's leaves. Use td_lazy_get_tensor() and td_lazy_get_dict();
 *  - every other td_dict function returns TD_ENOTSUP with a message; make
 *    a dense dict with td_lazy_densify() first.
 *
 * Nested in a dense dict (tensordict's TensorDict({"z": lazy_stack})): a
 * lazy stack is stored as a dict value by td_dict_set_dict_take() (the
 * dict takes the stack; a stack that borrows its children still borrows
 * them) or td_dict_set_dict() (a stack of shallow copies of the children),
 * when its batch shape starts with the dict's. Its height (one level above
 * its children) counts towards TD_KEY_MAX_DEPTH. Then:
 *  - td_dict_get() / get_dict() of its own key return the stack itself;
 *    the borrowed lookups of a key inside it ("z.a") return TD_ENOTSUP
 *    (nothing is stored there): td_lazy_get_tensor() and the other
 *    td_lazy_get_*() functions accept the dense dict with such a path and
 *    stack, as on the stack itself; td_dict_contains*() answers for it;
 *  - td_dict_set_*() (tensors, plain and in place, strings, arrays of
 *    strings, bytes) and td_dict_del*() with a path into it write through
 *    the stack into its children; renames into or out of it: TD_ENOTSUP;
 *  - td_dict_free(), lock / unlock, iteration (nested walks go into it:
 *    its values are made as when iterating the stack, valid until the
 *    next step; the iterator allocates one for the stack's walk),
 *    td_dict_copy() / clone() (the copy holds a new stack), td_dict_index()
 *    (the stack is indexed by td_dict_index() rules on the stack),
 *    td_dict_unbind() / split*() / chunk(), td_dict_apply() /
 *    apply_inplace() and td_dict_binary_scalar*() (child by child, as on
 *    the stack), td_dict_empty() (with recursion: a stack of the
 *    children's empty forms), td_dict_zero(), td_dict_equal() /
 *    allclose() (by value, through the dense form: TD_ETYPE for ragged
 *    leaves), select / exclude of whole keys, td_dict_update() /
 *    update_inplace() (a stack meeting a dict or a stack merges as
 *    above), and td_lazy_maybe_dense_stack() (which then stacks lazily)
 *    handle it;
 *  - everything else that would have to reach into it returns TD_ENOTSUP
 *    naming its key, leaving the dict unchanged: reshape / view /
 *    unsqueeze / squeeze / permute, flatten / unflatten_keys, operations
 *    on two dicts (td_dict_binary*() with a dict), td_dict_stack() /
 *    cat(), td_dict_index_put() / index_fill(), select / exclude of keys
 *    inside it, and td_shm_dict().
 *
 * Keys: the stack's keys are those every child has (with a dict in every
 * child or a leaf in every child), in the order of the first child. A key
 * only some children have stays reachable through td_lazy_child().
 *
 * Shapes: the children must have the same batch shape B; the stack's batch
 * shape is B with N inserted at the stack dim. Leaves may differ between
 * children beyond the batch dims (ragged): stacking them is then an error
 * (TD_ETYPE, naming the key and the shapes) unless the caller asks for a
 * list (td_lazy_get_list()), a padded tensor (td_lazy_get_padded()) or the
 * nested form (td_lazy_get_nested()).
 *
 * Ownership: a stack made with TD_LAZY_TAKE owns its children (they become
 * its nested dicts and are freed with it); otherwise it borrows them, and
 * they must outlive it. Stacks returned by td_lazy_get_dict() borrow the
 * children's sub-dicts: valid until one of those children changes
 * structurally (a key added, deleted or renamed) or is freed. Stacks made by
 * indexing, unbind, copy and clone own what they hold.
 *
 * Stacks of lazy stacks are lazy stacks whose children are lazy stacks.
 *
 * Caching: a stack of dense children caches its key schema (the shared
 * keys of every level, with each child's entry) when first read, and
 * rebuilds it after any structural change of a child, however it is made
 * (through the stack or directly on a child, at any depth). Replacing a
 * tensor leaf by another tensor keeps the schema. The schema also
 * remembers what the last key handles (td_key) looked up in the stack
 * resolve to. It caches structure only, never tensor data or metadata.
 * Readers may share a stack across threads as they may a dict; a thread
 * changing a child structurally modifies the stack (see dict.h). Iterating
 * a stack yields its sub-dicts as lazy stacks owned by the cache: valid
 * until the next step, like the stacked leaves (whose buffer the next leaf
 * may reuse unless the caller took a reference with td_tensor_ref()).
 */
#ifndef TDSTORE_LAZY_H
#define TDSTORE_LAZY_H

#include "common.h"
#include "tensor.h"
#include "dict.h"

TD_BEGIN_DECLS

/** td_lazy_stack() flag: the stack takes ownership of the (root) children. */
#define TD_LAZY_TAKE 0x1u

/** td_lazy_get_padded() flag: pad at the start of each dim instead of the end. */
#define TD_PAD_LEFT 0x1u

/* ------------------------------------------------------------------------ */
/* Building and walking                                                      */
/* ------------------------------------------------------------------------ */

/**
 * Stack `n` dicts lazily along a new batch dim `dim` (tensordict's
 * lazy_stack()). Nothing is copied.
 *
 * @param[out] out  receives the stack; owned by the caller, release with
 *                  td_dict_free(); set to NULL on failure
 * @param dicts  `n` >= 1 dicts (dense or lazy) of identical batch shape.
 *               Borrowed (they must outlive the stack; a dict may appear
 *               more than once) unless `flags` has TD_LAZY_TAKE: then each
 *               must be a distinct root dict and, on success only, belongs
 *               to the stack (td_dict_parent() of each is the stack, and
 *               td_dict_free() on it does nothing)
 * @param dim    the new dim, 0..B (B = the children's batch ndim), or
 *               negative counting from the end (-1 is B)
 * @param flags  0 or TD_LAZY_TAKE
 * @return TD_OK; TD_EINVAL (NULL, n == 0, dim out of range, too many dims,
 *         unknown flags, with TD_LAZY_TAKE a child that is not a root or
 *         appears twice); TD_ETYPE (batch shapes differ); TD_EOVERFLOW;
 *         TD_ENOMEM
 */
TD_API int td_lazy_stack(td_dict **out, td_dict *const *dicts, size_t n, int dim, unsigned flags);

/** @return true if `d` is a lazy stack (false for NULL). */
TD_API bool td_dict_is_lazy(const td_dict *d);

/** @return the number of children of a lazy stack; 0 for a dense dict or NULL. */
TD_API size_t td_lazy_count(const td_dict *d);

/** @return the stack dim of a lazy stack (a batch dim of it); -1 for a dense dict or NULL. */
TD_API int td_lazy_stack_dim(const td_dict *d);

/**
 * @return child `i` of a lazy stack (borrowed: valid while the stack
 *         holds it, and as long as the caller's own borrowed child lives);
 *         NULL for a dense dict, NULL or `i` out of range. The child may be
 *         modified through this pointer (its batch shape must stay).
 */
TD_API td_dict *td_lazy_child(const td_dict *d, size_t i);

/* ------------------------------------------------------------------------ */
/* Reading leaves and sub-dicts                                              */
/* ------------------------------------------------------------------------ */

/*
 * Every reader comes in the two key forms: a dotted key, and with the
 * suffix `_key` a key handle (NULL: TD_EINVAL), which also reaches keys
 * whose components hold '.' or are empty (td_key_from_path()).
 */

/**
 * The leaf under `key`, stacked: a new contiguous tensor (tensordict's
 * `get`), whose shape is the children's leaf shape with N inserted at the
 * stack dim. Writing it does not reach the children. Dtypes are promoted
 * as td_tensor_stack() does.
 *
 * @param[out] out  receives the tensor; owned by the caller, release with
 *                  td_tensor_release()
 * @param key    a dotted key (td_lazy_get_tensor_key(): a key handle, for
 *               components holding '.')
 * @return TD_OK; TD_EINVAL (NULL, not a lazy stack, malformed key);
 *         TD_ENOTFOUND (a child lacks the key: the message names it);
 *         TD_ETYPE (not a tensor in some child; ragged leaves: the message
 *         names two shapes and the alternatives); TD_ENOMEM
 */
TD_API int td_lazy_get_tensor(td_tensor *out, const td_dict *d, const char *key);
TD_API int td_lazy_get_tensor_key(td_tensor *out, const td_dict *d, const td_key *key);

/**
 * Stack the leaf under `key` into the caller's tensor `dst`, whose shape
 * must be the stacked shape (dtype converted as td_tensor_copy() does).
 *
 * @param dst  the caller's tensor, written in place
 * @param key  a dotted key (td_lazy_get_tensor_into_key(): a key handle)
 * @return as td_lazy_get_tensor(); TD_ETYPE (dst has another shape);
 *         TD_EREADONLY. On failure, `dst` may be partly written.
 */
TD_API int td_lazy_get_tensor_into(td_tensor *dst, const td_dict *d, const char *key);
TD_API int td_lazy_get_tensor_into_key(td_tensor *dst, const td_dict *d, const td_key *key);

/**
 * The children's leaves under `key` as a list, without stacking
 * (tensordict's `get(key, as_list=True)`): element i is a new reference to
 * child i's leaf (a view sharing its buffer; for a lazy child, a stacked
 * copy). Shapes may differ.
 *
 * @param[out] tensors_out  receives an array of `*count_out` tensors;
 *                          owned by the caller, release with
 *                          td_tensor_array_free()
 * @param[out] count_out    receives the number of children
 * @param key               a dotted key (td_lazy_get_list_key(): a key handle)
 * @return TD_OK; TD_EINVAL; TD_ENOTFOUND; TD_ETYPE; TD_ENOMEM
 */
TD_API int td_lazy_get_list(td_tensor **tensors_out, size_t *count_out, const td_dict *d,
	const char *key);
TD_API int td_lazy_get_list_key(td_tensor **tensors_out, size_t *count_out, const td_dict *d,
	const td_key *key);

/**
 * The leaf under `key` stacked after padding (tensordict's
 * `get(key, as_padded_tensor=True, padding_value=pad, padding_side=...)`):
 * the leaves must have the same ndim; each dim gets the largest size over
 * the children, and every child's leaf is padded with `pad` at the end of
 * each dim (or at the start with TD_PAD_LEFT). Equal shapes give the plain
 * stacked tensor.
 *
 * @param[out] out  receives a new tensor (owned; td_tensor_release())
 * @param key       a dotted key (td_lazy_get_padded_key(): a key handle)
 * @param flags     0 or TD_PAD_LEFT
 * @return TD_OK; TD_EINVAL (also unknown flags, an invalid scalar);
 *         TD_ENOTFOUND; TD_ETYPE (leaves of different ndim); TD_ENOMEM
 */
TD_API int td_lazy_get_padded(td_tensor *out, const td_dict *d, const char *key, td_scalar pad,
	unsigned flags);
TD_API int td_lazy_get_padded_key(td_tensor *out, const td_dict *d, const td_key *key,
	td_scalar pad, unsigned flags);

/**
 * The leaf under `key` in the nested (jagged) form of
 * torch.nested.as_nested_tensor(layout=torch.jagged): `values` is the
 * children's leaves concatenated along their first dim and `offsets` (int64,
 * N + 1 entries) says where each child's rows start: child i is
 * values[offsets[i]:offsets[i + 1]]. The leaves may differ in their first
 * dim only.
 *
 * @param[out] values_out   receives a new tensor (owned; td_tensor_release())
 * @param[out] offsets_out  receives a new int64 tensor of shape [N + 1] (owned)
 * @param key               a dotted key (td_lazy_get_nested_key(): a key handle)
 * @return TD_OK; TD_EINVAL; TD_ENOTFOUND; TD_ETYPE (a 0-d leaf; leaves that
 *         differ beyond their first dim); TD_ENOTSUP (the stack dim is not 0,
 *         as in tensordict's get_nestedtensor()); TD_ENOMEM
 */
TD_API int td_lazy_get_nested(td_tensor *values_out, td_tensor *offsets_out, const td_dict *d,
	const char *key);
TD_API int td_lazy_get_nested_key(td_tensor *values_out, td_tensor *offsets_out, const td_dict *d,
	const td_key *key);

/**
 * The sub-dict under `key`: a new lazy stack, at the same stack dim, of the
 * children's sub-dicts (tensordict's `get` of a nested key). Nothing is
 * copied; writes through it reach the children.
 *
 * @param[out] out  receives the stack; owned by the caller, release with
 *                  td_dict_free(). It borrows the children's sub-dicts: valid
 *                  until one of the children changes structurally or is freed
 * @param key       a dotted key (td_lazy_get_dict_key(): a key handle)
 * @return TD_OK; TD_EINVAL; TD_ENOTFOUND; TD_ETYPE (not a dict in some
 *         child; the sub-dicts' batch shapes differ); TD_ENOMEM
 */
TD_API int td_lazy_get_dict(td_dict **out, const td_dict *d, const char *key);
TD_API int td_lazy_get_dict_key(td_dict **out, const td_dict *d, const td_key *key);

/* ------------------------------------------------------------------------ */
/* Dense forms                                                               */
/* ------------------------------------------------------------------------ */

/**
 * A dense dict with the stack's batch shape and keys: every leaf stacked
 * (a copy), every sub-dict densified (tensordict's contiguous() /
 * to_tensordict()). A non-tensor leaf must be equal in every child. Keys
 * that only some children have are left out.
 *
 * @param[out] out  receives a new root dict (owned; td_dict_free())
 * @return TD_OK; TD_EINVAL (NULL, not a lazy stack); TD_ETYPE (ragged leaves,
 *         unequal non-tensor values); TD_ENOMEM
 */
TD_API int td_lazy_densify(td_dict **out, const td_dict *d);

/**
 * Stack `n` dicts along a new batch dim `dim`: densely (td_dict_stack())
 * when they are all dense with the same keys and leaf shapes, lazily
 * otherwise (tensordict's maybe_dense_stack). The lazy result owns shallow
 * copies of the inputs (td_dict_copy()), which stay the caller's.
 *
 * @param[out] out  receives a new root dict, dense or lazy (owned;
 *                  td_dict_free())
 * @return TD_OK; TD_EINVAL (NULL, n == 0, dim out of range); TD_ETYPE (batch
 *         shapes differ: a lazy stack needs equal ones); TD_ENOMEM
 */
TD_API int td_lazy_maybe_dense_stack(td_dict **out, const td_dict *const *dicts, size_t n, int dim);

TD_END_DECLS

#endif /* TDSTORE_LAZY_H */
