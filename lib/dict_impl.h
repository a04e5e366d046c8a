/* SPDX-License-Identifier: MIT */
/*
 * dict_impl.h - the layout of td_dict and the internal API shared by the
 * dict sources (dict.c: the map; dict_key.c: key paths and handles;
 * dict_access.c: get / set / delete; dict_iter.c: iteration; dict_ops.c,
 * dict_apply.c, dict_flatten.c: whole-dict operations; dict_batch.c,
 * dict_join.c: batch operations) and the lazy stack sources (lazy*.c).
 * Never installed.
 *
 * A dict keeps its entries in an array in insertion order. Deleting leaves
 * a hole (key == NULL) that compaction removes later, as CPython's dict
 * does. Lookups scan the array for small dicts and use an open-addressing
 * index of entry positions for larger ones. Keys are immutable,
 * reference-counted strings with their hash, so copies of a dict (views,
 * batch indexing, shallow copies) share them without allocating.
 *
 * Two kinds, one dispatch. A td_dict is dense (the map above) or a lazy
 * stack (lazy*.c: N children stacked along a new batch dim, no entries of
 * its own; `lazy` non-NULL, td__dict_is_lazy()). The dense sources ask
 * the kind in three places only, so that the dense code below them never
 * asks again:
 *  - at the top of each public function that can meet a lazy stack, once:
 *    a stack goes to its lazy implementation, a td__lazy_* function
 *    declared at the end of this file and defined in lazy*.c, or is
 *    refused there with TD_ENOTSUP (TD_DENSE_ONLY() and a few refusals
 *    with their own message). Where an operation recurses into nested
 *    dicts, the entry point and the recursion share one dispatch function
 *    (apply_any(), zero_any(), equal_any(), td__dict_update_any(),
 *    td__dict_map_tensors(), td__dict_cut(), td__dict_height(), ...), so
 *    a nested stack meets the same dispatch as a stack passed in;
 *  - where a walk of a dense dict meets a lazy stack nested as a value and
 *    refuses it, naming its key (td__value_is_stack(): set_dict, put,
 *    fill, flatten, select / exclude through it, stack / cat, operations
 *    on two dicts), or hands it to a walk of its own (iteration, the level
 *    walks of free and lock);
 *  - in the key path walks (td__dict_walk(), td__dict_lookup(),
 *    td__dict_lazy_prefix()), which refuse or reroute a path that goes on
 *    into a nested stack.
 * It is one direct call per entry point, not a table of operations: there
 * is one lazy implementation, and a dense dict pays a load of a field in
 * the header it has just read and a predicted branch. An iterator is the
 * exception: it keeps its walk as a function pointer (`next`), chosen from
 * the kind when it is made, because td_dict_iter_next() is called per step.
 * The stack's layout is in lazy_impl.h, which only lazy*.c include: the
 * compiler keeps the dense sources from reaching into a stack.
 */
#ifndef TD_DICT_IMPL_H
#define TD_DICT_IMPL_H

#include "td_internal.h"
#include "tensor_impl.h"

/** An immutable key string with its length and hash, shared by reference. */
typedef struct td__kstr {
	_Atomic uint32_t refs;
	uint32_t len;
	uint64_t hash;
	char data[]; /* NUL-terminated */
} td__kstr;

/*
 * Keys of up to TD_KEY_INLINE bytes (nearly all of them: "observation",
 * "sample_log_prob") are stored in the entry itself: building, copying and
 * dropping them allocates nothing and touches no shared reference count,
 * and a probe compares them in the cache line that holds the hash. Longer
 * keys are shared td__kstr strings. 15 (not 23) makes an entry 128 bytes
 * with a td_value of 96: entries are indexed by a shift and each spans two
 * whole cache lines.
 */
#define TD_KEY_INLINE 15
#define TD_SLOT_DEAD UINT32_MAX /* klen of a deleted slot */

typedef struct td__entry {
	uint64_t hash; /* the key's hash */
	uint32_t klen; /* the key's length; TD_SLOT_DEAD for a deleted slot */
	uint32_t pad_;
	union {
		char inl[TD_KEY_INLINE + 1]; /* klen <= TD_KEY_INLINE: the key, NUL-terminated */
		td__kstr *heap;              /* longer keys */
	} k;
	td_value value;
} td__entry;

_Static_assert(sizeof(td__entry) == 128, "an entry is two cache lines: indexed by a shift");

static inline bool td__entry_live(const td__entry *e)
{
	return e->klen != TD_SLOT_DEAD;
}

/* Dicts with at most this many slots are searched without an index. */
#define TD_DICT_SCAN_MAX 8

struct td_dict {
	td__entry *entries;  /* `used` slots in insertion order, holes included */
	uint32_t *index;     /* 0: empty, TD_DICT_TOMB: deleted, else slot + 1; NULL if small */
	uint32_t used;       /* slots used in entries[] */
	uint32_t count;      /* live entries */
	uint32_t cap;        /* capacity of entries[] */
	uint32_t index_mask; /* index size - 1 (index size is a power of two) */
	uint32_t index_fill; /* index cells that are not empty (live + tombstones) */
	bool locked;
	bool entries_inline; /* entries[] lives in the same allocation as the dict */
	int16_t batch_ndim;  /* 0..TD_MAX_DIMS; 16 bits leave room for `gen` in 192 bytes */
	uint32_t block_cap;  /* entries allocated with the dict (its block's size) */
	/*
	 * Structure generation: bumped (td__dict_touch()) on this dict and every
	 * ancestor when a key is added, deleted or renamed, the entry array
	 * moves, a value changes kind or a nested dict is replaced, or the
	 * batch shape changes. Replacing a tensor by a tensor does not bump it.
	 * Lazy stacks compare the sum over their children to know whether their
	 * cached schema (lazy_schema.c) still holds. 32 bits keep the header
	 * at three cache lines (entries stored inline start line-aligned;
	 * 64 bits made dense iteration ~1.5x slower in an A/B); a stale schema
	 * could only be taken for valid if one child saw exactly a multiple of
	 * 2^32 structural changes between two reads of the stack.
	 */
	uint32_t gen;
	td_dict *parent;
	/*
	 * The kind: NULL for a dense dict; for a lazy stack, its part (laid
	 * out in lazy_impl.h, in the same block after the header). A lazy
	 * stack has no entries of its own (used == count == 0, so code that
	 * walks entries sees an empty dict, and a probe into it misses):
	 * public functions dispatch on this field first (td__dict_is_lazy()).
	 */
	struct td__lazy *lazy;
	int64_t batch_shape[TD_MAX_DIMS];
};

_Static_assert(sizeof(struct td_dict) == 64 + TD_MAX_DIMS * sizeof(int64_t),
	"td_dict's header stays one cache line: inline entries start line-aligned");

/** Whether `d` is a lazy stack: the kind of a dict (see the top of this file). */
static inline bool td__dict_is_lazy(const td_dict *d)
{
	return d->lazy != NULL;
}

/** Whether `v` is a lazy stack nested as a value in a dense dict (a walker meeting one). */
static inline bool td__value_is_stack(const td_value *v)
{
	return v->kind == TD_VALUE_DICT && td__dict_is_lazy(v->dict);
}

#define TD_DICT_TOMB UINT32_MAX

/** Record a structural change of `d`: bump its generation and its ancestors'. */
static inline void td__dict_touch(td_dict *d)
{
	for (; d; d = d->parent)
		d->gen++;
}

/* One component of a key path: borrowed bytes plus hash. */
typedef struct td__kref {
	const char *s;
	uint32_t len;
	uint64_t hash;
} td__kref;

struct td_key {
	size_t n;
	/*
	 * Unique among the handles this process makes (a 64-bit counter: never
	 * reused), so that a lazy stack's schema can remember what a handle
	 * resolved to (td__lz_find_key()) without mistaking a later handle made
	 * at the same address for it.
	 */
	uint64_t id;
	char *strings; /* the components, NUL-separated */
	td__kref part[];
};

/** A key path: a dotted key split into components, or a copy of a handle's (borrowed strings). */
typedef struct td__kpath {
	size_t n;
	td__kref part[TD_KEY_MAX_DEPTH];
} td__kpath;

/* ---- keys (dict_key.c) ---- */

/*
 * Keys are short (a few to a few dozen bytes), so a byte-at-a-time FNV-1a
 * that runs in the same pass as the search for '.' beats a block hash
 * (measured with callgrind: about 60 instructions fewer per lookup of a
 * 1-byte key than XXH3). The final mix (MurmurHash3's fmix64) spreads the
 * bits into the low ones that index the table.
 */
#define TD_HASH_INIT 0xcbf29ce484222325ull

static inline uint64_t td__hash_step(uint64_t h, unsigned char c)
{
	return (h ^ c) * 0x100000001b3ull;
}

static inline uint64_t td__hash_finish(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/**
 * Read one component of a dotted key starting at `s` into `out` (length
 * and hash; the length must then be checked by the caller) and return
 * where it ends: at '.' or at the terminating NUL.
 */
static inline const char *td__kref_scan(const char *s, td__kref *out)
{
	uint64_t h = TD_HASH_INIT;
	const char *c;

	for (c = s; *c && *c != '.'; c++)
		h = td__hash_step(h, (unsigned char)*c);
	out->s = s;
	out->len = (uint32_t)(c - s);
	out->hash = td__hash_finish(h);
	return c;
}

uint64_t td__hash(const char *s, size_t len);
/** A new key string (one reference). NULL on allocation failure (no error recorded). */
td__kstr *td__kstr_new(const char *s, size_t len, uint64_t hash);
static inline td__kstr *td__kstr_ref(td__kstr *k)
{
	atomic_fetch_add_explicit(&k->refs, 1, memory_order_relaxed);
	return k;
}
void td__kstr_unref(td__kstr *k);

/** The key of a live entry (borrowed: it moves with the entry). */
static inline const char *td__entry_key(const td__entry *e)
{
	return e->klen <= TD_KEY_INLINE ? e->k.inl : e->k.heap->data;
}

/** The key of a live entry as a path component (borrowed). */
static inline td__kref td__entry_kref(const td__entry *e)
{
	td__kref r;

	r.s = td__entry_key(e);
	r.len = e->klen;
	r.hash = e->hash;
	return r;
}

/** Give entry `e` the key `k`: inline or a new shared string (false: no memory). */
static inline bool td__entry_set_key(td__entry *e, const td__kref *k)
{
	if (k->len <= TD_KEY_INLINE) {
		memcpy(e->k.inl, k->s, k->len);
		e->k.inl[k->len] = '\0';
	} else {
		e->k.heap = td__kstr_new(k->s, k->len, k->hash);
		if (!e->k.heap)
			return false;
	}
	e->klen = k->len;
	e->hash = k->hash;
	return true;
}

/** Give entry `dst` the key of live entry `src` (a copy or one more reference). */
static inline void td__entry_copy_key(td__entry *dst, const td__entry *src)
{
	if (src->klen <= TD_KEY_INLINE)
		memcpy(dst->k.inl, src->k.inl, sizeof(dst->k.inl));
	else
		dst->k.heap = td__kstr_ref(src->k.heap);
	dst->klen = src->klen;
	dst->hash = src->hash;
}

/** Drop entry e's key and mark the slot deleted. */
static inline void td__entry_drop_key(td__entry *e)
{
	if (e->klen != TD_SLOT_DEAD && e->klen > TD_KEY_INLINE)
		td__kstr_unref(e->k.heap);
	e->klen = TD_SLOT_DEAD;
}

/** Split a dotted key into a path (TD_EINVAL for empty components or too deep). */
int td__kpath_dotted(td__kpath *p, const char *dotted, const char *fn);
/** A path from an array of components. */
int td__kpath_parts(td__kpath *p, const char *const *parts, size_t n, const char *fn);
/** A path from a key handle (the handle must outlive the path). */
int td__kpath_key(td__kpath *p, const td_key *key, const char *fn);
/** Write "a.b.c" (components 0..n-1) into buf for messages. @return buf. */
char *td__kpath_format(char *buf, size_t len, const td__kref *parts, size_t n);

/* ---- the map (dict.c) ---- */

/** Copy a value. No references taken. */
static inline void td__value_assign(td_value *dst, const td_value *src)
{
	*dst = *src;
}

/** TD_EOVERFLOW (with a message) unless the product of the batch sizes fits in int64. */
int td__batch_check_numel(int ndim, const int64_t *shape, const char *fn);
/**
 * A new empty dict with room for `cap` entries (entries inline). The batch
 * shape is not checked: callers pass a valid one.
 */
int td__dict_alloc(td_dict **out, int batch_ndim, const int64_t *batch_shape, uint32_t cap,
	const char *fn);
/**
 * Set up an empty dict at `d`, a block of sizeof(td_dict) + cap entries,
 * without an index (td__dict_alloc() adds one above TD_DICT_SCAN_MAX
 * entries). Inline for the operations that make many small dicts.
 */
static inline void td__dict_init(td_dict *d, int batch_ndim, const int64_t *batch_shape,
	uint32_t cap)
{
	int i;

	d->entries = cap ? (td__entry *)(d + 1) : NULL;
	d->index = NULL;
	d->used = 0;
	d->count = 0;
	d->cap = cap;
	d->index_mask = 0;
	d->index_fill = 0;
	d->locked = false;
	d->entries_inline = cap > 0;
	d->batch_ndim = (int16_t)batch_ndim;
	d->block_cap = cap;
	d->gen = 1;
	d->parent = NULL;
	d->lazy = NULL;
	for (i = 0; i < batch_ndim; i++)
		d->batch_shape[i] = batch_shape[i];
}

/**
 * Prefetch what a walk over dict d reads first: its header and the values
 * of its first two inline entries, at fixed offsets so that nothing waits
 * for the header (a prefetch never faults, whatever is there). Walks over
 * many trees a level at a time issue these for a whole level at once.
 */
static inline void td__dict_prefetch(const td_dict *d)
{
	const td__entry *e = (const td__entry *)(d + 1);

	__builtin_prefetch(d);
	__builtin_prefetch(&e[0].value);
	__builtin_prefetch(&e[1].value);
}

/** Whether the live entry `e` holds the key (s, len, hash); the hash is checked first. */
static inline bool td__key_eq(const td__entry *e, const char *s, uint32_t len, uint64_t hash)
{
	uint32_t i;

	/* A deleted slot has klen TD_SLOT_DEAD, which no key length equals. */
	if (e->hash != hash || e->klen != len)
		return false;
	if (TD_UNLIKELY(len > TD_KEY_INLINE))
		return memcmp(e->k.heap->data, s, len) == 0;
	/* Inline keys (the usual case): in the entry's first line, no call. */
	for (i = 0; i < len; i++)
		if (e->k.inl[i] != s[i])
			return false;
	return true;
}

/** td__dict_find() on a dict that has an index. */
td__entry *td__dict_find_indexed(const td_dict *d, const char *key, uint32_t len, uint64_t hash);

/**
 * Find the entry for a key, or NULL. Inline: path walks probe one small
 * dict per level, where a call's prologue and epilogue would cost as much
 * as the probe itself (measured with callgrind on 20-level keys).
 */
static inline td__entry *td__dict_find(const td_dict *d, const char *key, uint32_t len,
	uint64_t hash)
{
	uint32_t i;

	if (TD_UNLIKELY(d->index != NULL))
		return td__dict_find_indexed(d, key, len, hash);
	/* Indexed, not pointer-bounded: an empty dict may have no entry array. */
	for (i = 0; i < d->used; i++)
		if (td__key_eq(&d->entries[i], key, len, hash))
			return &d->entries[i];
	return NULL;
}
/**
 * Append a new entry under key `k` (which must be absent), taking over
 * `value`'s references. On failure (no memory for a long key, or for
 * growth) nothing is taken.
 */
int td__dict_append(td_dict *d, const td__kref *k, const td_value *value, const char *fn);
/**
 * Commit the entry the caller wrote in place at d->entries[d->used] (there
 * must be room: d->used < d->cap) under the key of live entry `src` (of
 * another dict). Used to build dicts of known size without copying values
 * around; cannot fail.
 */
void td__dict_push(td_dict *d, const td__entry *src);
/** td__dict_push() of an entry written whole, key included, at d->entries[d->used]. */
void td__dict_commit(td_dict *d);
/** td__dict_append() under the key of live entry `src` (copied whole, or shared). */
int td__dict_append_entry(td_dict *d, const td__entry *src, const td_value *value, const char *fn);
/**
 * Destroy the n dicts (roots: no parent; dense or lazy) and all they hold,
 * one level of their trees at a time (their memory fetched together).
 */
void td__dict_destroy_many(td_dict *const *dicts, size_t n);
/** Release a value's references (tensor buffer, nested dict, blob buffer). */
void td__value_release(td_value *v);
/** A new reference to a value: tensors and blobs are shared, dicts shallow-copied. */
int td__value_share(td_value *out, const td_value *v, const char *fn);
/** Remove the entry at slot `i`. */
void td__dict_remove_slot(td_dict *d, uint32_t i);
/**
 * Give the entry at slot `i` the new key `k` (absent from d), releasing the
 * old key; the entry keeps its position. TD_ENOMEM for a long key.
 */
int td__dict_rekey(td_dict *d, uint32_t i, const td__kref *k);
/** Height of the dict tree (1 for a dict without nested dicts). */
size_t td__dict_height(const td_dict *d);
/** Depth of d below its root (0 for a root). */
size_t td__dict_depth(const td_dict *d);
/** Whether `shape` starts with d's batch shape; TD_ETYPE with a message naming `key` if not. */
int td__dict_check_batch(const td_dict *d, int ndim, const int64_t *shape, const char *key,
	const char *fn);
/** Set `locked` on d and every nested dict. */
void td__dict_set_locked(td_dict *d, bool locked);
/** td__dict_set_locked() of n trees together, a level at a time (prefetched). */
void td__dict_set_locked_many(td_dict *const *dicts, size_t n, bool locked);

/** Where td__dict_walk() created its first new dict, to undo it on failure. */
typedef struct td__undo {
	td_dict *dict; /* NULL when nothing was created */
	uint32_t slot;
} td__undo;

/**
 * Walk all but the last of `n` components from `d`. With `undo` non-NULL,
 * missing dicts are created with their parent's batch shape (refused when
 * locked) and the first creation is recorded in *undo. On success
 * *parent_out is the dict that holds (or will hold) the last component.
 */
int td__dict_walk(td_dict *d, const td__kref *parts, size_t n, td__undo *undo, td_dict **parent_out,
	const char *fn);
/**
 * If the path parts[0..n-1] from the dense dict d reaches a lazy stack with
 * components left (a nested lazy stack, not d itself), return that stack
 * and set *used to the number of components that lead to it (1..n-1); else
 * NULL. Records no error.
 */
const td_dict *td__dict_lazy_prefix(const td_dict *d, const td__kref *parts, size_t n,
	size_t *used);
/** Undo what td__dict_walk() created. */
void td__dict_undo(td__undo *undo);
/** Find the entry named by a path, or NULL; records no error (for membership tests). */
td__entry *td__dict_lookup_quiet(const td_dict *d, const td__kref *parts, size_t n,
	td_dict **parent_out);
/** As td__dict_lookup_quiet() but reports TD_ENOTFOUND / TD_ETYPE with a message. */
int td__dict_lookup(const td_dict *d, const td__kref *parts, size_t n, td__entry **out,
	td_dict **parent_out, const char *fn);
/**
 * Store a value under a path: tensors and blobs get a new reference; a dict
 * value must be a root and is adopted on success. On a locked dict an
 * existing tensor is overwritten in place instead.
 */
int td__dict_set_value(td_dict *d, const td__kref *parts, size_t n, const td_value *v,
	const char *fn);
/**
 * Store `v` (a tensor, blob or root dict) in the existing entry `e` of
 * `parent` under key `last`, with td__dict_set_value()'s checks and rules.
 */
int td__dict_set_entry(td_dict *parent, td__entry *e, const td__kref *last, const td_value *v,
	const char *fn);

/* ---- whole-dict helpers (dict_ops.c, dict_batch.c) ---- */

/** Shallow copy: new dict nodes, tensors and blobs shared. The copy is an unlocked root. */
int td__dict_copy(td_dict **out, const td_dict *d, const char *fn);

/**
 * Merge `o` into `d` (td_dict_update()), or with `inplace` check (`write`
 * false) or copy (`write` true) its leaves into d's (td_dict_update_inplace()):
 * the dispatch, on the kinds of both, that nested dicts and the children of
 * lazy stacks go through too.
 */
int td__dict_update_any(td_dict *d, const td_dict *o, bool inplace, bool write, const char *fn);

/** Per-leaf function of td__dict_transform(): compute `out` from `in`. */
typedef int (*td__leaf_fn)(td_tensor *out, const td_tensor *in, void *ctx);

/** The result of a batch operation for a lazy stack nested in the dict (ctx as the leaf fn's). */
typedef int (*td__lazy_fn)(td_dict **out, const td_dict *stack, void *ctx);

/**
 * A new dict with d's structure whose batch shape is `ndim`/`shape` and whose
 * tensors are fn(leaf): a batch operation. A nested dict with batch (d's
 * batch + extra dims) gets (new batch + extra dims). Arrays of strings go
 * through the same operation (td__strings_transform()); strings and bytes
 * are shared. A nested lazy stack gets lz(stack) (whose batch shape must
 * start with the new one); with `lz` NULL, TD_ENOTSUP naming its key.
 */
int td__dict_transform(td_dict **out, const td_dict *d, int ndim, const int64_t *shape,
	td__leaf_fn fn, void *ctx, td__lazy_fn lz, const char *fn_name);

/**
 * A new dict with d's structure and batch shape whose tensors are fn(leaf),
 * an operation on the elements (clone, arithmetic); every non-tensor value
 * is shared. A nested lazy stack becomes a new lazy stack (at the same dim,
 * owning them) of its children mapped the same way.
 */
int td__dict_map_tensors(td_dict **out, const td_dict *d, td__leaf_fn fn, void *ctx,
	const char *fn_name);

/* ---- iteration (dict_iter.c; a lazy stack's walk: lazy_iter.c) ---- */

struct td__lazy_iter;

struct td_dict_iter {
	const td_dict *root;
	unsigned flags;
	/* The walk, chosen by td_dict_iter_new() from the dict's kind: dense or lazy_iter.c's. */
	int (*next)(td_dict_iter *it, td_item *item);
	struct td__lazy_iter *lz; /* a lazy stack's walk; NULL for a dense dict */
	/*
	 * A nested walk of a dense dict that meets a lazy stack nested in it
	 * walks the stack with an iterator of its own (made then, freed when
	 * done), whose items get the path to the stack as prefix; the stack's
	 * entry itself comes after them (post-order), as a dict's does.
	 */
	td_dict_iter *sub;
	int sub_depth;                         /* the level of the stack's entry */
	int depth;                             /* index of the current level */
	const td_dict *dict[TD_KEY_MAX_DEPTH]; /* the dict iterated at each level */
	uint32_t pos[TD_KEY_MAX_DEPTH];        /* next slot at each level */
	const char *path[TD_KEY_MAX_DEPTH];
};

/* Yield the live entry `e` at level `depth`: its key and path, and its value unless keys only. */
static inline void td__iter_emit(td_dict_iter *it, td_item *item, const td__entry *e, int depth)
{
	it->path[depth] = td__entry_key(e);
	item->path = it->path;
	item->depth = (size_t)depth + 1;
	item->key = td__entry_key(e);
	item->value = (it->flags & TD_ITER_KEYS_ONLY) ? NULL : &e->value;
}

/* ---- strings, bytes and arrays of strings (strings.c) ---- */

/** A TD_VALUE_STRING (`string`) or TD_VALUE_BYTES value holding a copy of data[0..length). */
int td__blob_make(td_value *v, const void *data, size_t length, bool string, const char *fn);

/**
 * A TD_VALUE_STRINGS value of shape (ndim, shape) holding copies of
 * `texts` (C order; `lengths` may be NULL for NUL-terminated texts). Every
 * text is checked: not NULL, no NUL byte, valid UTF-8.
 */
int td__strings_new(td_value *out, int ndim, const int64_t *shape, const char *const *texts,
	const size_t *lengths, const char *fn);

/**
 * The numbers of the strings of `v` (strings.c explains them), plus `base`:
 * for an array, an int64 tensor of its shape holding base..base+numel-1; for
 * a single string (TD_VALUE_STRING), `base` expanded to (ndim, shape).
 * TD_ETYPE for bytes.
 */
int td__strings_numbers(td_tensor *out, const td_value *v, int ndim, const int64_t *shape,
	int64_t base, const char *fn);

/**
 * The value whose element j is string number numbers[j], strings being
 * numbered across `srcs` in order (an array counts its elements, a single
 * string counts one): an array of the shape of `numbers`, or a single
 * string when `numbers` has no dimension.
 */
int td__strings_gather(td_value *out, const td_value *const *srcs, size_t nsrc,
	const td_tensor *numbers, const char *fn);

/** Apply a batch operation on tensors (a td__leaf_fn) to the array of strings `in`. */
int td__strings_transform(td_value *out, const td_value *in, td__leaf_fn fn, void *ctx,
	const char *name);

/**
 * Equality of two non-tensor values: equal bytes of one kind, equal arrays
 * (shape and elements), or an array whose every element is the string.
 */
bool td__text_values_equal(const td_value *a, const td_value *b);

static inline bool td__is_text(const td_value *v)
{
	return v->kind == TD_VALUE_STRING || v->kind == TD_VALUE_STRINGS;
}

/**
 * Cut the dense dict `d` along its batch dim `dim` (validated) into `n`
 * pieces written to out[0..n-1], owned roots whose leaves are views: with
 * `lengths` NULL, piece i is index i of the dim, which is dropped (unbind,
 * n == the dim's size); else piece i holds lengths[i] rows, starting after
 * the rows of the pieces before it (split; the lengths add up to the
 * dim's size); with `dim` -1 (and no lengths), each piece is a shallow copy
 * of d (arrays of strings shared, as td__dict_map_tensors() shares them).
 * Otherwise arrays of strings are cut as tensors are. On failure nothing is
 * left to free and out[] is all NULL.
 */
int td__dict_cut(td_dict **out, const td_dict *d, int dim, const int64_t *lengths, size_t n,
	const char *fn);

/* ---- lazy stacks: what the dispatch hands them (lazy*.c) ---- */

/*
 * The entry points of the lazy implementation, one per operation that the
 * dense code dispatches a lazy stack to (see the top of this file). The
 * stack's layout and what the lazy sources share among themselves are in
 * lazy_impl.h, which only they include.
 */

/** Report that `fn` does not apply to a lazy stack (TD_ENOTSUP) and return the code. */
int td__lazy_notsup(const char *fn);

/** Return TD_ENOTSUP from the caller when `d` is a lazy stack: the dispatch of a refusal. */
#define TD_DENSE_ONLY(d, fn) \
	do { \
		if (TD_UNLIKELY((d) != NULL && td__dict_is_lazy(d))) \
			return td__lazy_notsup(fn); \
	} while (0)

/** Release a lazy stack and the children it owns. */
void td__lazy_destroy(td_dict *d);
/**
 * Free the lazy stack d itself (schema, memory) and hand over the children
 * it owns, detached (roots now): kids[*m] onwards while *m < room, the
 * others destroyed here. A walk destroying many trees a level at a time
 * takes the children into its next level.
 */
void td__lazy_release(td_dict *d, td_dict **kids, size_t *m, size_t room);
/**
 * td__dict_height() of a lazy stack: one level above its highest child.
 * Pure, as td__dict_height() is: its loop keeps d's fields in registers
 * across the recursive calls.
 */
size_t td__lazy_height(const td_dict *d) __attribute__((pure));
/** Set the lock flag of a lazy stack and of every child. */
void td__lazy_set_locked(td_dict *d, bool locked);
/**
 * The kind (TD_VALUE_*) the path has in every child of `d` (lazy or
 * dense), or 0 when a child lacks it or the children disagree on dict
 * versus leaf. Records no error. Here and below, `handle` is the key
 * handle whose components `parts` are, or NULL (td__lz_find_key()).
 */
int td__lazy_kind(const td_dict *d, const td__kref *parts, size_t n, const td_key *handle);
/**
 * td_dict_contains() of the path in the lazy stack `d`: whether its kind in
 * every child (td__lazy_kind()) answers a test with `flags`. Inline: the
 * membership rows are a few dozen instructions.
 */
static inline int td__lazy_contains(const td_dict *d, const td__kref *parts, size_t n,
	const td_key *handle, unsigned flags)
{
	int kind = td__lazy_kind(d, parts, n, handle);

	return kind != 0 && (!(flags & TD_LEAVES_ONLY) || kind != TD_VALUE_DICT);
}
/** The number of keys a lazy stack shares over all its children. */
size_t td__lazy_len(const td_dict *d);
/** td_dict_iter_new() of a lazy stack (flags checked). */
int td__lazy_iter_new(td_dict_iter **out, const td_dict *d, unsigned flags);
/** td_dict_iter_next() of an iterator made by td__lazy_iter_new() (its `next`). */
int td__lazy_iter_next(td_dict_iter *it, td_item *item);
/** What td_dict_iter_reset() does for such an iterator besides the common fields. */
void td__lazy_iter_reset(td_dict_iter *it);
/** td_dict_iter_free() of such an iterator (its walk into a nested stack freed already). */
void td__lazy_iter_free(td_dict_iter *it);
/** td_dict_items() on a lazy stack: keys of the stack, NULL values. */
size_t td__lazy_items(const td_dict *d, const char **keys_out, const td_value **values_out,
	size_t cap);
/**
 * td_dict_set_*() on the lazy stack `d`: a tensor is sliced along the stack
 * dim into every child, an array of strings cut the same way, a string or
 * bytes stored in every child; a dict is refused (TD_ENOTSUP).
 */
int td__lazy_set_value(td_dict *d, const td__kref *parts, size_t n, const td_key *handle,
	const td_value *v, const char *fn);
/** set(..., inplace=True) through a lazy stack. */
int td__lazy_set_inplace(td_dict *d, const td__kref *parts, size_t n, const td_key *handle,
	const td_tensor *t, const char *fn);
/** Delete the key from every child (checked in all children first). */
int td__lazy_del(td_dict *d, const td__kref *parts, size_t n, const char *fn);
/** A lazy stack of shallow copies (deep == false) or clones of the children. */
int td__lazy_copy(td_dict **out, const td_dict *d, bool deep, const char *fn);
/** td_dict_index() of a lazy stack. */
int td__lazy_index(td_dict **out, const td_dict *d, const td_index *idx, size_t n);
/** td_dict_index_put() / td_dict_index_fill() (value == NULL) of a lazy stack. */
int td__lazy_index_put(td_dict *d, const td_index *idx, size_t n, const td_dict *value,
	const td_scalar *fill, const char *fn);
/**
 * td__dict_cut() of the lazy stack `z` (the dict cut, or a stack nested in
 * it), into out[0..n-1]: shallow copies (dim -1), or the stack indexed at
 * the cut dim (an int for unbind, a slice of the piece's rows for split).
 * On failure nothing is left.
 */
int td__lazy_cut(td_dict **out, const td_dict *z, int dim, const int64_t *lengths, size_t n,
	const char *fn);
/** td_dict_unbind() of a lazy stack. */
int td__lazy_unbind(td_dict ***dicts_out, size_t *count_out, const td_dict *d, int dim);
/** What td__lazy_map_children() makes of each child: a new root dict of its batch shape. */
typedef int (*td__child_fn)(td_dict **out, const td_dict *child, void *ctx);
/**
 * A new stack shaped like `stack` (same dim, owning its children) whose
 * child i is fn(child i): the operations tensordict's LazyStackedTensorDict
 * does child by child. On failure nothing is left.
 */
int td__lazy_map_children(td_dict **out, const td_dict *stack, td__child_fn fn, void *ctx,
	const char *name);
/** What td__lazy_each_child() does to each child (dense or lazy) in place. */
typedef int (*td__child_do_fn)(td_dict *child, void *ctx);
/** fn(child) for every child of `stack` in order, up to the first error (returned). */
int td__lazy_each_child(td_dict *stack, td__child_do_fn fn, void *ctx);
/**
 * td__dict_update_any() where `d` or `o` is a lazy stack, as tensordict
 * does it: a stack on the right is read in its dense form (td_lazy_densify():
 * TD_ETYPE for ragged leaves), a stack on the left has each child updated
 * with its piece of the right side along the stack dim (whose leaves must
 * start with the stack's batch shape: TD_ETYPE).
 */
int td__lazy_update(td_dict *d, const td_dict *o, bool inplace, bool write, const char *fn);
/**
 * The dense form of *d: for a lazy stack, td_lazy_densify() into *tmp (owned
 * by the caller, td_dict_free()), which *d then points to; for a dense dict,
 * *d itself (*tmp NULL).
 */
int td__lazy_dense_form(td_dict **tmp, const td_dict **d);

#endif /* TD_DICT_IMPL_H */
