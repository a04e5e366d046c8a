/* SPDX-License-Identifier: MIT */
/*
 * tdstore/dict.h - td_dict: an ordered map from keys to tensors, nested
 * dicts and non-tensor values (UTF-8 strings, bytes) sharing leading batch
 * dimensions - the C counterpart of tensordict's TensorDict.
 *
 * Keys keep insertion order; lookup is O(1). Every tensor's shape and every
 * nested dict's batch shape starts with the dict's batch shape. A locked
 * dict refuses new keys and deletions, recursively.
 *
 * Every call that takes a key comes in two forms:
 *  - a dotted string, "next.obs", for convenience;
 *  - a precompiled key handle, td_key (the `_key` functions), for hot
 *    loops and for keys a dotted string cannot spell: td_key_from_path()
 *    makes one from an array of components, {"next", "obs"}.
 * A single key may be any NUL-terminated string; through a dotted string it
 * may not be empty or contain '.'. A NULL key handle is TD_EINVAL.
 *
 * Ownership and lifetimes:
 *  - A dict made by td_dict_new() or returned through `**out` is a root,
 *    owned by the caller: release it with td_dict_free().
 *  - Nested dicts belong to their parent. Pointers to them, and every
 *    `const td_value *`, `const td_tensor *` and key string obtained from a
 *    dict, are borrowed: valid until that entry is replaced or removed, or
 *    the dict is changed structurally (a key added, deleted or renamed),
 *    or freed. Writing tensor data in place does not invalidate them.
 *  - Storing a tensor shares its buffer (no data copy), as tensordict does.
 *
 * Threads: concurrent readers are safe; a dict being modified must not be
 * used by any other thread at the same time (as a Python dict). A
 * structural change of a nested dict (a key added, deleted or renamed, a
 * value of another kind or another nested dict stored) counts as a
 * modification of its ancestors too, and of every lazy stack holding one
 * of them: it updates their bookkeeping (a generation count that lazy
 * stacks read to know whether their cached key schema still holds).
 *
 * Batch operations (indexing, unbind, reshape, ...) apply to the batch
 * dimensions only; a nested dict whose batch is longer than its parent's
 * keeps its extra dimensions.
 *
 * Limits: dicts nest at most TD_KEY_MAX_DEPTH levels (so that every leaf
 * has a key path of at most TD_KEY_MAX_DEPTH components); a nested dict's
 * batch shape always starts with its parent's.
 */
#ifndef TDSTORE_DICT_H
#define TDSTORE_DICT_H

#include "common.h"
#include "tensor.h"

TD_BEGIN_DECLS

typedef struct td_dict td_dict;
typedef struct td_key td_key;
typedef struct td_dict_iter td_dict_iter;

/** What an entry of a dict holds. */
typedef enum td_value_kind {
	TD_VALUE_TENSOR = 1, /**< a td_tensor */
	TD_VALUE_DICT = 2,   /**< a nested td_dict */
	TD_VALUE_STRING = 3, /**< UTF-8 text, tensordict's NonTensorData(str) */
	TD_VALUE_BYTES = 4,  /**< raw bytes, tensordict's NonTensorData(bytes) */
	TD_VALUE_STRINGS = 5 /**< an n-d array of UTF-8 strings, tensordict's NonTensorStack */
} td_value_kind;

/**
 * An n-d array of UTF-8 strings: tensordict's NonTensorStack of strings (a
 * list of strings stored in a dict, one per batch element). Its shape starts
 * with the batch shape of its dict, like a tensor's, and batch operations
 * (indexing, unbind, stack, reshape, ...) apply to it as to a tensor; an
 * integer index that leaves no dimension gives a single string
 * (TD_VALUE_STRING), as tensordict gives a NonTensorData.
 *
 * The value is immutable and shared by reference between copies of a dict;
 * writing at a batch index (td_dict_index_put()) gives the entry a new
 * array. The struct itself lives at the start of its buffer: a td_value
 * points to it, and it stays valid as long as `buffer` is referenced.
 * Element i, counted in C order over `shape`, is the NUL-terminated
 * text at `bytes + offsets[i]`, of `offsets[i + 1] - offsets[i] - 1` bytes
 * (td_strings_at() reads it). No element holds a NUL byte.
 */
typedef struct td_strings {
	td_buffer *buffer;       /**< holds this struct, `offsets` and `bytes` */
	const uint64_t *offsets; /**< numel + 1 ascending offsets into `bytes` */
	const char *bytes;       /**< the texts, each followed by a NUL */
	int64_t numel;           /**< the number of strings: the product of `shape` */
	int32_t ndim;            /**< 1..TD_MAX_DIMS */
	int64_t shape[TD_MAX_DIMS];
} td_strings;

/** The bytes of a string or bytes value (TD_VALUE_STRING, TD_VALUE_BYTES). */
typedef struct td_blob {
	td_buffer *buffer; /**< holds the bytes */
	const char *data;  /**< the bytes; for STRING also NUL-terminated */
	size_t length;     /**< in bytes, without the terminating NUL */
} td_blob;

/**
 * The value of one entry: `kind` says which member of the anonymous union
 * holds it (`v->tensor`, `v->dict`, `v->blob`, `v->strings`). Borrowed from
 * its dict (see the lifetime rules above).
 */
typedef struct td_value {
	td_value_kind kind;
	union {
		td_tensor tensor;          /**< TD_VALUE_TENSOR */
		td_dict *dict;             /**< TD_VALUE_DICT */
		td_blob blob;              /**< TD_VALUE_STRING and TD_VALUE_BYTES */
		const td_strings *strings; /**< TD_VALUE_STRINGS (held through its `buffer`) */
	};
} td_value;

/* ------------------------------------------------------------------------ */
/* Key handles                                                               */
/* ------------------------------------------------------------------------ */

/**
 * Precompile a dotted key ("next.obs") for the `_key` functions: the path
 * is split and hashed once.
 *
 * @param[out] out  receives the handle; owned by the caller, release with
 *                  td_key_free()
 * @param dotted    the key; components must be non-empty
 * @return TD_OK; TD_EINVAL (NULL, empty component, deeper than
 *         TD_KEY_MAX_DEPTH); TD_ENOMEM
 */
TD_API int td_key_new(td_key **out, const char *dotted);

/** Most components a key path may have. */
#define TD_KEY_MAX_DEPTH 64

/**
 * Precompile a key path given as an array (components may hold '.', and
 * may be empty).
 *
 * @param parts  `n` NUL-terminated strings, 1 <= n <= TD_KEY_MAX_DEPTH
 * @return as td_key_new()
 */
TD_API int td_key_from_path(td_key **out, const char *const *parts, size_t n);

/** Release a key handle. NULL is accepted. */
TD_API void td_key_free(td_key *key);

/** @return the number of components; 0 for NULL. */
TD_API size_t td_key_depth(const td_key *key);

/** @return component `i` (borrowed, valid until td_key_free()); NULL when out of range. */
TD_API const char *td_key_part(const td_key *key, size_t i);

/* ------------------------------------------------------------------------ */
/* Creation, batch shape, locking                                            */
/* ------------------------------------------------------------------------ */

/**
 * A new empty dict.
 *
 * @param[out] out  receives the dict; owned by the caller, release with
 *                  td_dict_free(); set to NULL on failure
 * @param batch_ndim   number of batch dims, 0..TD_MAX_DIMS
 * @param batch_shape  their sizes (>= 0); may be NULL when batch_ndim is 0
 * @return TD_OK; TD_EINVAL; TD_EOVERFLOW (the batch's element count does
 *         not fit in int64); TD_ENOMEM
 */
TD_API int td_dict_new(td_dict **out, int batch_ndim, const int64_t *batch_shape);

/**
 * Release a root dict with everything it holds (tensor references, nested
 * dicts). NULL is accepted. A nested dict belongs to its parent: calling
 * this on one does nothing.
 */
TD_API void td_dict_free(td_dict *d);

/** Free `count` dicts and then the array (from td_dict_unbind() and friends). NULL is accepted. */
TD_API void td_dict_array_free(td_dict **dicts, size_t count);

/** @return the number of batch dims. */
TD_API int td_dict_batch_ndim(const td_dict *d);

/** @return the batch shape (borrowed; valid until the batch shape changes or the dict is freed). */
TD_API const int64_t *td_dict_batch_shape(const td_dict *d);

/** @return the product of the batch sizes (1 for an empty batch shape). */
TD_API int64_t td_dict_batch_numel(const td_dict *d);

/**
 * Change the batch shape; every entry must start with the new shape.
 *
 * @return TD_OK; TD_EINVAL; TD_EOVERFLOW (element count); TD_ETYPE (an
 *         entry does not match: the message names it); TD_ELOCKED
 */
TD_API int td_dict_set_batch_shape(td_dict *d, int batch_ndim, const int64_t *batch_shape);

/** @return the dict that holds `d`, or NULL for a root (borrowed). */
TD_API td_dict *td_dict_parent(const td_dict *d);

/** @return the number of top-level entries. */
TD_API size_t td_dict_len(const td_dict *d);

/** Lock `d` and every nested dict: new keys and deletions are refused. */
TD_API int td_dict_lock(td_dict *d);

/**
 * Unlock `d` and every nested dict.
 *
 * @return TD_OK; TD_ELOCKED when an ancestor of `d` is locked (unlock the
 *         ancestor instead, as tensordict requires)
 */
TD_API int td_dict_unlock(td_dict *d);

/** @return true if `d` is locked. */
TD_API bool td_dict_is_locked(const td_dict *d);

/* ------------------------------------------------------------------------ */
/* Lookup                                                                    */
/* ------------------------------------------------------------------------ */

/** td_dict_contains() flag: only a leaf (tensor or non-tensor) counts, not a nested dict. */
#define TD_LEAVES_ONLY 0x2u

/**
 * Whether the key is present (nested paths are followed).
 *
 * @param key    a dotted key (td_dict_contains_key(): a key handle)
 * @param flags  0 or TD_LEAVES_ONLY
 * @return 1 if present, 0 if not, TD_EINVAL for NULL arguments, unknown
 *         flags or a malformed dotted key
 */
TD_API int td_dict_contains(const td_dict *d, const char *key, unsigned flags);
TD_API int td_dict_contains_key(const td_dict *d, const td_key *key, unsigned flags);

/**
 * Look up any value.
 *
 * @param[out] out  receives the value (borrowed)
 * @param key       a dotted key (td_dict_get_key(): a key handle)
 * @return TD_OK; TD_ENOTFOUND (the message names the missing component);
 *         TD_ETYPE (a path component is not a dict); TD_EINVAL (NULL
 *         arguments, a malformed dotted key);
 *         TD_ENOTSUP (the path goes on into a lazy stack nested in the
 *         dict, whose values are made by stacking: td_lazy_get_tensor()
 *         and td_lazy_get_dict() read them)
 */
TD_API int td_dict_get(const td_value **out, const td_dict *d, const char *key);
TD_API int td_dict_get_key(const td_value **out, const td_dict *d, const td_key *key);

/**
 * Look up a tensor.
 *
 * @param[out] out  receives the tensor (borrowed; take your own reference
 *                  with td_tensor_ref() to keep it)
 * @param key       a dotted key (td_dict_get_tensor_key(): a key handle)
 * @return as td_dict_get(), plus TD_ETYPE when the value is not a tensor
 */
TD_API int td_dict_get_tensor(const td_tensor **out, const td_dict *d, const char *key);
TD_API int td_dict_get_tensor_key(const td_tensor **out, const td_dict *d, const td_key *key);

/**
 * Look up a nested dict.
 *
 * @param[out] out  receives it (borrowed; it may be modified through this
 *                  pointer)
 * @param key       a dotted key (td_dict_get_dict_key(): a key handle)
 * @return as td_dict_get(), plus TD_ETYPE when the value is not a dict
 */
TD_API int td_dict_get_dict(td_dict **out, const td_dict *d, const char *key);
TD_API int td_dict_get_dict_key(td_dict **out, const td_dict *d, const td_key *key);

/**
 * Look up a non-tensor value (a string or bytes).
 *
 * @param[out] data_out    receives the bytes (borrowed; NUL-terminated for strings)
 * @param[out] length_out  receives their length (may be NULL)
 * @param key              a dotted key (td_dict_get_blob_key(): a key handle)
 * @return as td_dict_get(), plus TD_ETYPE when the value is neither a
 *         string nor bytes
 */
TD_API int td_dict_get_blob(const char **data_out, size_t *length_out, const td_dict *d,
	const char *key);
TD_API int td_dict_get_blob_key(const char **data_out, size_t *length_out, const td_dict *d,
	const td_key *key);

/**
 * Look up an array of strings (tensordict's NonTensorStack).
 *
 * @param[out] out  receives it (borrowed, as every value of a dict; read
 *                  its elements with td_strings_at())
 * @param key       a dotted key (td_dict_get_strings_key(): a key handle)
 * @return as td_dict_get(), plus TD_ETYPE when the value is not an array of
 *         strings
 */
TD_API int td_dict_get_strings(const td_strings **out, const td_dict *d, const char *key);
TD_API int td_dict_get_strings_key(const td_strings **out, const td_dict *d, const td_key *key);

/**
 * Element `i` of an array of strings, counted in C order over its shape.
 *
 * @param[out] length_out  receives its length in bytes, without the NUL (may
 *                         be NULL)
 * @param s                the array
 * @param i                0 <= i < s->numel
 * @return the NUL-terminated text (borrowed from `s`); NULL when `s` is NULL
 *         or `i` is out of range (no error is recorded)
 */
TD_API const char *td_strings_at(size_t *length_out, const td_strings *s, int64_t i);

/* ------------------------------------------------------------------------ */
/* Setting and removing                                                      */
/* ------------------------------------------------------------------------ */

/*
 * Every setter comes in the two key forms: a dotted key, and with the
 * suffix `_key` a key handle (NULL: TD_EINVAL), which also reaches keys
 * whose components hold '.' or are empty.
 */

/**
 * Store a tensor (sharing its buffer; no copy). Missing intermediate dicts
 * of a nested key are created with their parent's batch shape. An existing
 * value under the key is replaced. On a locked dict, a new key is refused
 * and an existing tensor is overwritten in place (copied into), as
 * tensordict does.
 *
 * @param key  a dotted key (td_dict_set_tensor_key(): a key handle)
 * @param t    a tensor whose shape starts with the batch shape of the dict
 *             that receives it
 * @return TD_OK; TD_EINVAL; TD_ETYPE (shape does not start with the batch
 *         shape; a path component is not a dict); TD_ELOCKED; TD_ENOMEM
 */
TD_API int td_dict_set_tensor(td_dict *d, const char *key, const td_tensor *t);
TD_API int td_dict_set_tensor_key(td_dict *d, const td_key *key, const td_tensor *t);

/**
 * As td_dict_set_tensor() (and td_dict_set_tensor_key()), but takes over
 * the caller's reference: on success `*t` is reset to TD_TENSOR_INIT; on
 * failure it is left untouched.
 */
TD_API int td_dict_set_tensor_take(td_dict *d, const char *key, td_tensor *t);
TD_API int td_dict_set_tensor_take_key(td_dict *d, const td_key *key, td_tensor *t);

/**
 * Copy `t` into the existing tensor under `key` (tensordict's
 * `set(..., inplace=True)`): `t` is broadcast and converted as in
 * td_tensor_copy(). Allowed on locked dicts.
 *
 * @return TD_OK; TD_ENOTFOUND; TD_ETYPE (not a tensor, shape does not
 *         broadcast); TD_EREADONLY; TD_EINVAL
 */
TD_API int td_dict_set_tensor_inplace(td_dict *d, const char *key, const td_tensor *t);
TD_API int td_dict_set_tensor_inplace_key(td_dict *d, const td_key *key, const td_tensor *t);

/**
 * Store a nested dict: a shallow copy of `child` (new dict nodes, tensors
 * sharing their buffers). Its batch shape must start with the batch shape of
 * the dict that receives it. A locked receiver refuses it (a new key or a
 * replaced value). `child` may be a lazy stack: the copy is a stack of
 * shallow copies of its children (see lazy.h for what reaches into a lazy
 * stack nested in a dict); a lazy stack `d` refuses any dict (TD_ENOTSUP).
 *
 * @return as td_dict_set_tensor(); TD_EINVAL if `child` is `d` or one of
 *         its ancestors, or the tree would nest deeper than TD_KEY_MAX_DEPTH
 */
TD_API int td_dict_set_dict(td_dict *d, const char *key, const td_dict *child);
TD_API int td_dict_set_dict_key(td_dict *d, const td_key *key, const td_dict *child);

/**
 * Store a root dict without copying: `child` becomes owned by `d` and the
 * pointer stays valid as a borrowed nested dict. A lazy stack is taken
 * too (the children it borrows stay borrowed: they must outlive `d`).
 *
 * @return as td_dict_set_dict(); TD_EINVAL if `child` already has a parent.
 *         On failure the caller still owns `child`.
 */
TD_API int td_dict_set_dict_take(td_dict *d, const char *key, td_dict *child);
TD_API int td_dict_set_dict_take_key(td_dict *d, const td_key *key, td_dict *child);

/**
 * Store a UTF-8 string (tensordict's NonTensorData). It applies to every
 * batch element: indexing the dict keeps it.
 *
 * @return as td_dict_set_tensor(); TD_EINVAL if `utf8` is NULL or not valid
 *         UTF-8
 */
TD_API int td_dict_set_string(td_dict *d, const char *key, const char *utf8);
TD_API int td_dict_set_string_key(td_dict *d, const td_key *key, const char *utf8);

/**
 * Store an array of UTF-8 strings (tensordict's NonTensorStack, as a list of
 * strings assigned to a dict gives): `utf8` holds prod(shape) strings in C
 * order, which are copied. The shape must start with the batch shape of the
 * dict that receives it.
 *
 * @param ndim   1..TD_MAX_DIMS
 * @param shape  sizes (>= 0)
 * @param utf8   prod(shape) NUL-terminated strings (may be NULL when that is 0)
 * @return as td_dict_set_tensor(); TD_EINVAL (NULL string, a string that is
 *         not valid UTF-8, bad ndim or a negative size); TD_EOVERFLOW (the
 *         element count or the total size does not fit)
 */
TD_API int td_dict_set_strings(td_dict *d, const char *key, int ndim, const int64_t *shape,
	const char *const *utf8);
TD_API int td_dict_set_strings_key(td_dict *d, const td_key *key, int ndim, const int64_t *shape,
	const char *const *utf8);

/** Store `length` raw bytes (copied). As td_dict_set_string(). */
TD_API int td_dict_set_bytes(td_dict *d, const char *key, const void *data, size_t length);
TD_API int td_dict_set_bytes_key(td_dict *d, const td_key *key, const void *data, size_t length);

/**
 * Remove an entry (a whole nested dict for a dict value).
 *
 * @param key  a dotted key (td_dict_del_key(): a key handle)
 * @return TD_OK; TD_ENOTFOUND; TD_ELOCKED; TD_EINVAL
 */
TD_API int td_dict_del(td_dict *d, const char *key);
TD_API int td_dict_del_key(td_dict *d, const td_key *key);

/**
 * Rename an entry. Within one dict the entry keeps its position; moved to
 * another nested dict it goes last there (missing dicts are created).
 * Renaming a key to itself does nothing.
 *
 * @param old_key  the entry's key: dotted (td_dict_rename_key(): a handle)
 * @param new_key  its new key, in the same form
 * @return TD_OK; TD_ENOTFOUND (old key); TD_EEXISTS (new key present);
 *         TD_ETYPE (batch shapes differ); TD_ELOCKED; TD_EINVAL (moving a
 *         dict into itself; a NULL or malformed key); TD_ENOTSUP (a lazy
 *         stack, or a path into one)
 */
TD_API int td_dict_rename(td_dict *d, const char *old_key, const char *new_key);
TD_API int td_dict_rename_key(td_dict *d, const td_key *old_key, const td_key *new_key);

/* ------------------------------------------------------------------------ */
/* Iteration                                                                 */
/* ------------------------------------------------------------------------ */

/**
 * Fill arrays with the top-level entries in insertion order (tensordict's
 * keys() / values() / items()); no allocation.
 *
 * On a lazy stack the keys are the stack's keys and every value written is
 * NULL (its leaves are made by stacking: see td_lazy_get_tensor()).
 *
 * @param[out] keys_out    `cap` slots for key strings (borrowed), or NULL
 * @param[out] values_out  `cap` slots for values (borrowed), or NULL
 * @param cap              capacity of the arrays
 * @param d                the dict
 * @return the number of entries (which may exceed `cap`: only `cap` are
 *         written)
 */
TD_API size_t td_dict_items(const char **keys_out, const td_value **values_out, size_t cap,
	const td_dict *d);

/** td_dict_iter flag: descend into nested dicts (keys(include_nested=True)). */
#define TD_ITER_NESTED 0x1u
/** td_dict_iter flag: yield leaves only, not nested dicts themselves. */
#define TD_ITER_LEAVES_ONLY TD_LEAVES_ONLY
/**
 * td_dict_iter flag: yield keys only (tensordict's keys()): td_item.value is
 * NULL. Over a lazy stack this spares stacking every leaf.
 */
#define TD_ITER_KEYS_ONLY 0x4u

/** One step of an iteration. All pointers are borrowed from the dict and the iterator. */
typedef struct td_item {
	const char *const *path; /**< the key path from the iterated dict, `depth` components */
	size_t depth;            /**< >= 1 */
	const char *key;         /**< the last component, path[depth - 1] */
	const td_value *value;   /**< the value; NULL with TD_ITER_KEYS_ONLY */
} td_item;

/**
 * Start an iteration. With TD_ITER_NESTED, a nested dict is yielded after
 * its own entries (tensordict's order), unless TD_ITER_LEAVES_ONLY. The
 * dict must not change structurally while iterated.
 *
 * Over a lazy stack (td_dict_is_lazy()) the keys are the stack's keys, and
 * the iterator makes the values: a leaf's value is a stacked copy, a
 * sub-dict's a lazy stack of the children's sub-dicts, a non-tensor leaf's
 * the first child's value; each is owned by the iterator and valid until
 * the next call, which may write the next stacked leaf into the same buffer
 * unless the caller took a reference (td_tensor_ref()); pass
 * TD_ITER_KEYS_ONLY to make none. A nested walk of a dense dict goes into
 * the lazy stacks nested in it the same way (their items' paths start
 * with the stack's key), and yields a stack's own entry after them.
 *
 * @param[out] out  receives the iterator; owned by the caller, release
 *                  with td_dict_iter_free()
 * @param flags     TD_ITER_NESTED, TD_ITER_LEAVES_ONLY, TD_ITER_KEYS_ONLY, or 0
 * @return TD_OK; TD_EINVAL; TD_ENOMEM
 */
TD_API int td_dict_iter_new(td_dict_iter **out, const td_dict *d, unsigned flags);

/**
 * Advance. No allocation on a dense dict, unless it holds a lazy stack
 * that the walk enters (its values are made as the stack's).
 *
 * @param[out] out  receives the next entry (valid until the next call)
 * @param it        the iterator
 * @return 1 when an item was produced, 0 at the end, TD_EINVAL for NULL
 *         arguments; over a lazy stack also TD_ETYPE (a ragged leaf, which
 *         is then skipped: the next call goes on after it) or TD_ENOMEM
 */
TD_API int td_dict_iter_next(td_item *out, td_dict_iter *it);

/** Restart the iteration from the first entry. */
TD_API void td_dict_iter_reset(td_dict_iter *it);

/** Release an iterator. NULL is accepted. */
TD_API void td_dict_iter_free(td_dict_iter *it);

/* ------------------------------------------------------------------------ */
/* Whole-dict operations                                                     */
/* ------------------------------------------------------------------------ */

/**
 * Merge `other` into `d`: each leaf of `other` is stored in `d` (sharing
 * buffers), nested dicts are merged recursively (tensordict's update()).
 * Where a dict of `other` meets a leaf of `d` (or the reverse), the value of
 * `other` replaces it. A lazy stack on either side (or nested) merges as
 * <tdstore/lazy.h> says: child by child on the left, densely on the right.
 *
 * @return TD_OK; TD_ETYPE (a value whose shape does not start with the
 *         batch shape); TD_ELOCKED (a key new to a locked dict, or a value
 *         other than a tensor over a tensor in a locked dict: there existing
 *         tensors are written in place, and nothing else can be replaced);
 *         TD_ENOMEM. On failure, the entries already merged stay merged.
 */
TD_API int td_dict_update(td_dict *d, const td_dict *other);

/**
 * Copy every tensor of `other` into the existing tensor of `d` under the
 * same key (tensordict's update_()); a non-tensor value replaces the
 * existing non-tensor value. Every key of `other` must exist in `d` with a
 * value of the same kind; this is checked before anything is written.
 * Allowed on locked dicts.
 *
 * @return TD_OK; TD_ENOTFOUND; TD_ETYPE; TD_EREADONLY
 */
TD_API int td_dict_update_inplace(td_dict *d, const td_dict *other);

/**
 * A new dict with only the given keys (and the dicts leading to them), in
 * `d`'s order. With `strict`, a missing key is an error; otherwise it is
 * skipped.
 *
 * @param keys  `n` dotted keys
 * @return TD_OK; TD_ENOTFOUND (strict); TD_EINVAL; TD_ENOMEM
 */
TD_API int td_dict_select(td_dict **out, const td_dict *d, const char *const *keys, size_t n,
	bool strict);
/** td_dict_select() with key handles. */
TD_API int td_dict_select_keys(td_dict **out, const td_dict *d, const td_key *const *keys, size_t n,
	bool strict);

/** A new dict without the given keys (missing keys are ignored). */
TD_API int td_dict_exclude(td_dict **out, const td_dict *d, const char *const *keys, size_t n);
/** td_dict_exclude() with key handles. */
TD_API int td_dict_exclude_keys(td_dict **out, const td_dict *d, const td_key *const *keys,
	size_t n);

/** A deep copy: new dict nodes and contiguous copies of every tensor. */
TD_API int td_dict_clone(td_dict **out, const td_dict *d);

/** A shallow copy: new dict nodes, tensors sharing their buffers. The copy is unlocked. */
TD_API int td_dict_copy(td_dict **out, const td_dict *d);

/**
 * A dict with `d`'s batch shape and no leaves; with `recurse`, nested dicts
 * are kept (empty) with their batch shapes.
 */
TD_API int td_dict_empty(td_dict **out, const td_dict *d, bool recurse);

/**
 * Flatten nested keys: {"a": {"b": t}} becomes {"a<sep>b": t}. Nested
 * dicts that hold no leaves disappear.
 *
 * @param sep  separator, non-empty (tensordict's default is ".")
 * @return TD_OK; TD_EEXISTS (two paths give the same flat key); TD_EINVAL
 */
TD_API int td_dict_flatten_keys(td_dict **out, const td_dict *d, const char *sep);

/**
 * The inverse of td_dict_flatten_keys(): split keys on `sep` and nest.
 * New nested dicts get the batch shape of their parent.
 *
 * @return TD_OK; TD_EEXISTS (a key is both a leaf and a prefix);
 *         TD_EINVAL (empty component)
 */
TD_API int td_dict_unflatten_keys(td_dict **out, const td_dict *d, const char *sep);

/**
 * Callback of td_dict_apply(): compute `*out` from the leaf `in` (e.g. with
 * td_tensor_binary_scalar()).
 *
 * @param[out] out   receives the result tensor (it is taken over)
 * @param in         the leaf (borrowed)
 * @param item       where the leaf is (path, key)
 * @param payload    the caller's payload
 * @return TD_OK to keep `*out`; a positive value to leave the key out of
 *         the result; a negative td_status to stop (returned by the apply
 *         call)
 */
typedef int (*td_apply_fn)(td_tensor *out, const td_tensor *in, const td_item *item, void *payload);

/**
 * A new dict with `fn` applied to every tensor leaf. Non-tensor leaves are
 * carried over; nested structure is kept (a nested dict whose leaves were
 * all skipped stays, empty). The results must start with the batch shape.
 * A lazy stack (the dict itself or nested in it) is applied child by child
 * into a new lazy stack (<tdstore/lazy.h>).
 *
 * @return TD_OK; the callback's error; TD_ETYPE (a result does not match
 *         the batch shape); TD_ENOMEM
 */
TD_API int td_dict_apply(td_dict **out, const td_dict *d, td_apply_fn fn, void *payload);

/**
 * Apply `fn` to every tensor leaf and copy each result into the leaf in
 * place (tensordict's apply_()). A positive callback return skips the leaf.
 */
TD_API int td_dict_apply_inplace(td_dict *d, td_apply_fn fn, void *payload);

/**
 * `a <op> b` leaf by leaf into a new dict. Both must hold the same keys
 * (nested) and broadcastable leaves; non-tensor leaves are taken from `a`.
 *
 * @return TD_OK; TD_ENOTFOUND (a key missing from `b`); TD_ETYPE; TD_ENOMEM
 */
TD_API int td_dict_binary(td_dict **out, const td_dict *a, const td_dict *b, td_binop op);
/** `a <op> s` for every tensor leaf, into a new dict. */
TD_API int td_dict_binary_scalar(td_dict **out, const td_dict *a, td_scalar s, td_binop op);
/** `a <op>= b` leaf by leaf, in place. Keys are checked before anything is written. */
TD_API int td_dict_binary_inplace(td_dict *a, const td_dict *b, td_binop op);
/** `a <op>= s` for every tensor leaf, in place. */
TD_API int td_dict_binary_scalar_inplace(td_dict *a, td_scalar s, td_binop op);

/** Set every tensor leaf to zero (tensordict's zero_()). */
TD_API int td_dict_zero(td_dict *d);

/**
 * Whether two dicts are equal: same batch shape, same keys (order is
 * ignored), equal tensors (td_tensor_equal()), equal non-tensor values.
 *
 * @return 1, 0, or a negative td_status
 */
TD_API int td_dict_equal(const td_dict *a, const td_dict *b);

/** As td_dict_equal() with td_tensor_allclose() for tensors. */
TD_API int td_dict_allclose(const td_dict *a, const td_dict *b, double rtol, double atol,
	bool equal_nan);

/* ------------------------------------------------------------------------ */
/* Batch operations                                                          */
/* ------------------------------------------------------------------------ */

/**
 * `d[idx...]` over the batch dims: every index kind of td_tensor_index();
 * an ellipsis stands for batch dims only; masks and index tensors cover
 * batch dims. Basic expressions give views (sharing buffers), advanced ones
 * copies. Non-tensor values are carried over.
 *
 * @param[out] out  receives a new root dict
 * @return TD_OK; TD_EINDEX (more indices than batch dims, out of range);
 *         TD_EINVAL; TD_ETYPE; TD_ENOMEM
 */
TD_API int td_dict_index(td_dict **out, const td_dict *d, const td_index *idx, size_t n);

/**
 * `d[idx...] = value`: write every leaf of `value` into the indexed part of
 * the leaf of `d` with the same key. `value`'s batch shape must be the
 * indexed batch shape. Keys of `value` missing from `d` are created as
 * zero tensors of the full batch shape first (refused on a locked dict).
 *
 * @return TD_OK; TD_ETYPE; TD_EINDEX; TD_ELOCKED; TD_EREADONLY; TD_ENOMEM
 */
TD_API int td_dict_index_put(td_dict *d, const td_index *idx, size_t n, const td_dict *value);

/** `d[idx...] = s` for every tensor leaf. */
TD_API int td_dict_index_fill(td_dict *d, const td_index *idx, size_t n, td_scalar s);

/**
 * Views of `d` at each position of batch dim `dim`, which is removed.
 *
 * @param[out] dicts_out  receives an array of `*count_out` root dicts;
 *                        owned by the caller, release with td_dict_array_free()
 * @param[out] count_out  receives the size of dim `dim`
 * @return TD_OK; TD_EINVAL (dim not a batch dim); TD_ENOMEM
 */
TD_API int td_dict_unbind(td_dict ***dicts_out, size_t *count_out, const td_dict *d, int dim);

/**
 * Views of consecutive pieces of `split_size` along batch dim `dim` (the
 * last may be shorter), as tensordict's split(int).
 */
TD_API int td_dict_split(td_dict ***dicts_out, size_t *count_out, const td_dict *d,
	int64_t split_size, int dim);

/** Views of pieces of the given sizes, which must add up to the size of `dim`. */
TD_API int td_dict_split_sizes(td_dict ***dicts_out, size_t *count_out, const td_dict *d,
	const int64_t *sizes, size_t nsizes, int dim);

/**
 * At most `chunks` views of (nearly) equal size along `dim`, as
 * tensordict's chunk (torch.chunk for a nonzero size; a dim of size 0 gives
 * one empty piece).
 */
TD_API int td_dict_chunk(td_dict ***dicts_out, size_t *count_out, const td_dict *d, size_t chunks,
	int dim);

/**
 * Stack dicts with identical structure and shapes along a new batch dim
 * (a dense copy of every leaf). Non-tensor values must be equal in all
 * dicts.
 *
 * @param dicts  `n` >= 1 dicts
 * @return TD_OK; TD_ETYPE (batch shapes, keys or leaf shapes differ, unequal
 *         non-tensor values); TD_EINVAL; TD_ENOMEM
 */
TD_API int td_dict_stack(td_dict **out, const td_dict *const *dicts, size_t n, int dim);

/** Concatenate dicts along existing batch dim `dim` (a copy). Other dims must agree. */
TD_API int td_dict_cat(td_dict **out, const td_dict *const *dicts, size_t n, int dim);

/**
 * Reshape the batch dims (views when possible, copies otherwise); one size
 * may be -1 (not together with a size 0, as torch: TD_ETYPE).
 */
TD_API int td_dict_reshape(td_dict **out, const td_dict *d, int ndim, const int64_t *shape);

/** As td_dict_reshape() but never copies: TD_ETYPE when a leaf cannot be viewed. */
TD_API int td_dict_view(td_dict **out, const td_dict *d, int ndim, const int64_t *shape);

/** Insert a batch dim of size 1 at `dim` (0 <= dim <= batch ndim, or negative). */
TD_API int td_dict_unsqueeze(td_dict **out, const td_dict *d, int dim);

/**
 * Remove batch dim `dim` if its size is 1 (otherwise an unchanged view). A
 * dict without batch dims accepts dim 0 or -1 and gives a shallow copy, as
 * td_tensor_squeeze() of a 0-d tensor.
 */
TD_API int td_dict_squeeze(td_dict **out, const td_dict *d, int dim);

/** Reorder the batch dims: result batch dim i is input batch dim `dims[i]`. */
TD_API int td_dict_permute(td_dict **out, const td_dict *d, const int *dims);

TD_END_DECLS

#endif /* TDSTORE_DICT_H */
