/* SPDX-License-Identifier: MIT */
/*
 * lazy_impl.h - the layout of a lazy stack and what the sources of lazy
 * stacks (lazy*.c) share among themselves: the cached key schema, the
 * helpers that read and build stacks. Only lazy*.c include it: the dense
 * sources reach a stack through the entry points declared at the end of
 * dict_impl.h, and the compiler keeps them from reading its fields.
 * Never installed.
 */
#ifndef TD_LAZY_IMPL_H
#define TD_LAZY_IMPL_H

#include "td_internal.h"
#include "dict_impl.h"

/* ---- the layout (lazy.c) ---- */

/*
 * A lazy stack: `n` children of identical batch shape, stacked along the
 * new batch dim `dim` of the stack (0 <= dim <= the children's batch ndim).
 * Lives in the same allocation as its td_dict. A child owned by the stack
 * (own[i]) has the stack as parent and is freed with it; a borrowed child
 * must outlive the stack.
 */
struct td__lz_schema;

typedef struct td__lazy {
	size_t n;
	int dim;
	td_dict **child; /* n children */
	bool *own;       /* n flags */
	/*
	 * The cached schema (lazy_schema.c): valid while `stamp` equals the sum
	 * of the children's generations (or, for a stack that owns all its
	 * children, its own generation: see STAMP_OWN). Built by the first
	 * reader that finds it stale, under `building`; readers that see a
	 * matching stamp (acquire) read `schema` without a lock.
	 */
	_Atomic uint64_t stamp;
	struct td__lz_schema *schema;
	atomic_flag building;
} td__lazy;

/* ---- the cached key schema (lazy_schema.c) ---- */

/*
 * The schema of a lazy stack of dense children: its keys (those every
 * child has, in child 0's order), each with the n children's entries, and
 * for sub-dicts the same one level down plus a ready lazy stack of the
 * sub-dicts. Everything points into the children: valid until a structural
 * change of one of them (then the stack's stamp no longer matches).
 */
typedef struct td__lz_node td__lz_node;

typedef struct td__lz_key {
	const td__entry *src;  /* child 0's entry: the key and its hash */
	const td__entry **ent; /* the n children's entries */
	td__lz_node *sub;      /* a dict in every child: the level below */
	int kind;              /* child 0's value kind */
	bool all_tensor;       /* a tensor in every child */
} td__lz_key;

struct td__lz_node {
	size_t nkeys;
	td__lz_key *keys;
	td_dict *const *dicts; /* the n dicts of this level (children at the root) */
	td_dict *stack;        /* a lazy stack of dicts[] (NULL at the root) */
};

/*
 * What a key handle resolved to in a schema. A slot is claimed once (id
 * from 0 to the handle's id, by compare-and-swap), filled, then published
 * (ready, release); it never changes afterwards, so readers that see it
 * ready (acquire) read key and node without a lock.
 */
typedef struct td__lz_memo {
	_Atomic uint64_t id; /* 0: free */
	_Atomic bool ready;
	const td__lz_key *key;   /* NULL: the handle names no key of the stack */
	const td__lz_node *node; /* the level holding key */
} td__lz_memo;

#define TD_LZ_MEMO 8

typedef struct td__lz_schema {
	td__lz_node root;
	struct td__lz_chunk *chunks; /* the memory of the nodes, keys and arrays */
	size_t nstacks;              /* the sub-stacks made, freed with the schema */
	td_dict **stacks;
	/* The key handles looked up last (a cache in a schema readers share). */
	td__lz_memo memo[TD_LZ_MEMO];
} td__lz_schema;

/**
 * The schema of a lazy stack, built (or rebuilt) when its children changed
 * structurally since it was made; NULL when the stack has a lazy child, the
 * sub-dicts of some key disagree on their batch shape, or memory runs out:
 * callers then take the general path. Records no error. Thread-safe for
 * concurrent readers of the stack.
 */
const td__lz_schema *td__lz_get(const td_dict *d);
/** Release a stack's cached schema (td_dict_free of the stack). */
void td__lz_free(td__lz_schema *s);
/**
 * The schema key at a path, or NULL when some component is missing (or a
 * component before the last is not a dict in every child). With `node_out`,
 * the level that holds the key.
 */
const td__lz_key *td__lz_find(const td__lz_schema *s, const td__kref *parts, size_t n,
	const td__lz_node **node_out);
/**
 * td__lz_find() of the path `parts`/`n`, which is the components of the key
 * handle `key` when that is non-NULL: then answered from the schema's memo
 * of handles when it holds `key`, and remembered there when a slot is free.
 * Thread-safe for concurrent readers.
 */
const td__lz_key *td__lz_find_key(const td__lz_schema *s, const td__kref *parts, size_t n,
	const td_key *key, const td__lz_node **node_out);
/** Find key `k` at one level of a schema; NULL if absent. */
static inline const td__lz_key *td__lz_node_find(const td__lz_node *node, const td__kref *k)
{
	size_t i;

	for (i = 0; i < node->nkeys; i++)
		if (td__key_eq(node->keys[i].src, k->s, k->len, k->hash))
			return &node->keys[i];
	return NULL;
}
/**
 * Stack the tensors of the n tensor entries `ent` (same dtype and shape, in
 * host memory: checked by the caller) along `dim` into a new contiguous
 * tensor, whose dims must fit inline (at most TD_TENSOR_INLINE_DIMS: the
 * leaves' are read without a test of ndim). `step` non-NULL: the leaves are
 * views of one buffer with the same strides whose offsets advance by *step.
 * `spare` non-NULL: *spare may hold a heap buffer nobody else references,
 * taken (and *spare set to NULL) when its size is the result's.
 */
int td__lz_stack(td_tensor *out, const td__entry *const *ent, size_t n, int dim,
	const int64_t *step, td_buffer **spare, const char *fn);
/**
 * The stacked leaf of schema key `k` of stack `d` (reached by parts[0..n-1]
 * from d): stacked straight from the entries when the leaves agree in dtype
 * and shape, else by td__lazy_get_tensor() (promotion, errors). `spare` as
 * for td__lz_stack() (NULL: none).
 */
int td__lz_get_tensor(td_tensor *out, const td_dict *d, const td__lz_key *k, const td__kref *parts,
	size_t n, td_buffer **spare, const char *fn);
/* ---- reading (lazy.c, lazy_get.c), writing (lazy_set.c), building (lazy.c) ---- */

/**
 * The dense dict whose entry order gives a lazy stack's key order (its first
 * child, or that child's first child, ...); NULL when a stack on the way
 * has no children.
 */
const td_dict *td__lazy_key_source(const td_dict *d);
/** A stacked copy of the leaf at the path (TD_ETYPE for ragged leaves, naming them). */
int td__lazy_get_tensor(td_tensor *out, const td_dict *d, const td__kref *parts, size_t n,
	const char *fn);
/** A new lazy stack of the children's sub-dicts at the path. */
int td__lazy_get_dict(td_dict **out, const td_dict *d, const td__kref *parts, size_t n,
	const td_key *handle, const char *fn);
/** Plain set through a lazy stack: slice `t` along the stack dim into every child. */
int td__lazy_set_tensor(td_dict *d, const td__kref *parts, size_t n, const td_key *handle,
	const td_tensor *t, const char *fn);
/** Set a non-tensor value (a blob in `v`) in every child. */
int td__lazy_set_blob(td_dict *d, const td__kref *parts, size_t n, const td_value *v,
	const char *fn);
/**
 * A new empty lazy stack for `n` children (all slots NULL, not owned) of
 * batch shape `cshape` (cndim dims), stacked at `dim`. The caller fills
 * child[] and own[] (and sets the parent of owned children).
 */
int td__lazy_alloc(td_dict **out, size_t n, int dim, int cndim, const int64_t *cshape,
	const char *fn);
/** td__lazy_alloc() of a stack with the children count, dim and batch shape of `stack`. */
int td__lazy_alloc_like(td_dict **out, const td_dict *stack, const char *fn);
/** Make the root dict `child` slot i of `stack`, owned by it. */
void td__lazy_adopt(td_dict *stack, size_t i, td_dict *child);

/** TD_ENOTFOUND naming the path and the child `i` of the lazy stack that lacks it. */
int td__lz_not_found(const td__kref *parts, size_t n, size_t i, const char *fn);

/*
 * The view t[..., k, ...] at dim `dim`, borrowing t's buffer (no
 * reference); its dims are its own: drop them with td__dims_unref().
 * TD_ENOMEM only for more than TD_TENSOR_INLINE_DIMS dims left.
 */
static inline int td__lz_select_borrowed(td_tensor *out, const td_tensor *t, int dim, int64_t k,
	const char *fn)
{
	return td__view_select_dims(out, t, dim, k, fn);
}

#endif /* TD_LAZY_IMPL_H */
