/* SPDX-License-Identifier: MIT */
/*
 * dict_iter.c - iteration over a dict: bulk top-level items, and an
 * iterator for nested walks (tensordict's keys(include_nested,
 * leaves_only) order: a nested dict is yielded after its own entries).
 * Nothing is allocated after td_dict_iter_new() for a dense dict; over a
 * lazy stack the iterator makes each leaf it yields (a stacked copy) and
 * frees it at the next step; sub-dicts are yielded as lazy stacks, those of
 * the stack's cached schema (lazy_schema.c) when it has one, else made and
 * freed like leaves.
 */
#include "td_internal.h"
#include "dict_impl.h"
#include "buffer_impl.h"

size_t td_dict_items(const td_dict *d, const char **keys_out, const td_value **values_out,
	size_t cap)
{
	size_t n = 0;
	uint32_t i;

	if (!d)
		return 0;
	if (TD_UNLIKELY(d->lazy != NULL))
		return td__lazy_items(d, keys_out, values_out, cap);
	if (d->used == d->count) {
		/* No holes: one straight pass writing what was asked for. */
		const td__entry *e = d->entries;
		const td__entry *end = e + (d->count < cap ? d->count : cap);

		/* Unrolled: these loops are the whole cost of keys()/values()/items(). */
		if (keys_out && values_out) {
#pragma GCC unroll 4
			for (; e < end; e++) {
				*keys_out++ = td__entry_key(e);
				*values_out++ = &e->value;
			}
		} else if (keys_out) {
#pragma GCC unroll 4
			for (; e < end; e++)
				*keys_out++ = td__entry_key(e);
		} else if (values_out) {
#pragma GCC unroll 4
			for (; e < end; e++)
				*values_out++ = &e->value;
		}
		return d->count;
	}
	for (i = 0; i < d->used; i++) {
		const td__entry *e = &d->entries[i];
		if (!td__entry_live(e))
			continue;
		if (n < cap) {
			if (keys_out)
				keys_out[n] = td__entry_key(e);
			if (values_out)
				values_out[n] = &e->value;
		}
		n++;
	}
	return n;
}

/* What an iteration over a lazy stack adds: the values it makes. */
typedef struct lazy_iter {
	/*
	 * The stack's schema, when it has one: the walk then follows its nodes
	 * (node[]), sub-dicts are yielded as the schema's ready sub-stacks and
	 * nothing but the stacked leaves is made. Otherwise the fields below.
	 */
	const td__lz_schema *schema;
	const td__lz_node *node[TD_KEY_MAX_DEPTH];
	const td_dict *src[TD_KEY_MAX_DEPTH]; /* each level's key source (td__lazy_key_source) */
	td_dict *own[TD_KEY_MAX_DEPTH];       /* the sub-stack iterated at each level (level > 0) */
	td_value cur;                         /* the value yielded last */
	bool cur_tensor;                      /* cur holds a stacked copy (owned) */
	td_dict *dead;                        /* a popped sub-stack yielded last: freed next step */
	/*
	 * The buffer of a stacked leaf yielded earlier whose only reference was
	 * the iterator's (the caller took none): the next stacked leaf of the
	 * same byte size is written into it instead of a new allocation.
	 */
	td_buffer *spare;
} lazy_iter;

struct td_dict_iter {
	const td_dict *root;
	unsigned flags;
	lazy_iter *lz;                          /* NULL for a dense dict */
	/*
	 * A nested walk of a dense dict that meets a lazy stack nested in it
	 * walks the stack with an iterator of its own (made then, freed when
	 * done), whose items get the path to the stack as prefix; the stack's
	 * entry itself comes after them (post-order), as a dict's does.
	 */
	td_dict_iter *sub;
	int sub_depth;                          /* the level of the stack's entry */
	int depth;                              /* index of the current level */
	const td_dict *dict[TD_KEY_MAX_DEPTH];  /* the dict iterated at each level */
	uint32_t pos[TD_KEY_MAX_DEPTH];         /* next slot at each level */
	const char *path[TD_KEY_MAX_DEPTH];
};

/* The iterator's block: the iterator, then for a lazy stack its lazy_iter. */
static size_t iter_bytes(bool lazy)
{
	return sizeof(td_dict_iter) + (lazy ? sizeof(lazy_iter) : 0);
}

int td_dict_iter_new(td_dict_iter **out, const td_dict *d, unsigned flags)
{
	td_dict_iter *it;
	bool lazy;

	if (out)
		*out = NULL;
	if (!out || !d)
		return td__error(TD_EINVAL, "td_dict_iter_new: NULL argument");
	*out = NULL;
	if (flags & ~(unsigned)(TD_ITER_NESTED | TD_ITER_LEAVES_ONLY | TD_ITER_KEYS_ONLY))
		return td__error(TD_EINVAL, "td_dict_iter_new: unknown flags 0x%x", flags);
	/* One small block (a few KiB: above glibc's own per-thread cache). */
	lazy = d->lazy != NULL;
	it = td__alloc_small(iter_bytes(lazy));
	if (!it)
		return td__error_nomem(iter_bytes(lazy));
	it->root = d;
	it->flags = flags;
	it->lz = NULL;
	it->sub = NULL;
	it->depth = 0;
	if (TD_UNLIKELY(lazy)) {
		it->lz = (lazy_iter *)(it + 1);
		memset(it->lz->own, 0, sizeof(it->lz->own));
		it->lz->schema = NULL;
		it->lz->cur_tensor = false;
		it->lz->dead = NULL;
		it->lz->spare = NULL;
	}
	td_dict_iter_reset(it);
	*out = it;
	return TD_OK;
}

/* Free what the last step of a lazy iteration made (a stacked leaf's buffer may be kept). */
static void lazy_drop_current(lazy_iter *lz)
{
	if (lz->cur_tensor) {
		td_buffer *b = lz->cur.u.tensor.buffer;

		/* acquire: a reference the caller took and dropped meanwhile is done with. */
		if (!lz->spare && b->kind == TD_MEMORY_HEAP &&
		    atomic_load_explicit(&b->refs, memory_order_acquire) == 1)
			lz->spare = b;
		else
			td__buffer_unref(b);
	}
	lz->cur_tensor = false;
	td_dict_free(lz->dead);
	lz->dead = NULL;
}

void td_dict_iter_reset(td_dict_iter *it)
{
	if (!it)
		return;
	td_dict_iter_free(it->sub);
	it->sub = NULL;
	if (it->lz) {
		lazy_drop_current(it->lz);
		for (; it->depth > 0; it->depth--) {
			td_dict_free(it->lz->own[it->depth]);
			it->lz->own[it->depth] = NULL;
		}
		it->lz->src[0] = td__lazy_key_source(it->root);
		it->lz->schema = td__lz_get(it->root);
		if (it->lz->schema)
			it->lz->node[0] = &it->lz->schema->root;
	}
	it->depth = 0;
	it->dict[0] = it->root;
	it->pos[0] = 0;
}

static void emit(td_dict_iter *it, td_item *item, const td__entry *e, int depth)
{
	it->path[depth] = td__entry_key(e);
	item->path = it->path;
	item->depth = (size_t)depth + 1;
	item->key = td__entry_key(e);
	item->value = (it->flags & TD_ITER_KEYS_ONLY) ? NULL : &e->value;
}

/* Yield the entry `e` of a lazy level: its key, and the value made for it. */
static int lazy_emit(td_dict_iter *it, td_item *item, const td__entry *e, int kind,
	td_dict *sub, const td_dict *d)
{
	static const char fn[] = "td_dict_iter_next";
	lazy_iter *lz = it->lz;

	emit(it, item, e, it->depth);
	if (it->flags & TD_ITER_KEYS_ONLY) {
		td_dict_free(sub);
		return 1;
	}
	if (kind == TD_VALUE_DICT) {
		if (!sub) {
			td__kref k = td__entry_kref(e);
			TD_TRY(td__lazy_get_dict(&sub, d, &k, 1, NULL, fn));
		}
		lz->cur.kind = TD_VALUE_DICT;
		lz->cur.u.dict = sub;
		lz->dead = sub;
		item->value = &lz->cur;
	} else if (kind == TD_VALUE_TENSOR) {
		td__kref k = td__entry_kref(e);
		TD_TRY(td__lazy_get_tensor(&lz->cur.u.tensor, d, &k, 1, fn));
		lz->cur.kind = TD_VALUE_TENSOR;
		lz->cur_tensor = true;
		item->value = &lz->cur;
	}
	/* A non-tensor leaf: the first child's value (item->value as emitted). */
	return 1;
}

/* Yield schema key `k` at level `depth` (node `node`: the level's stack is node->stack or the root). */
static int schema_emit(td_dict_iter *it, td_item *item, const td__lz_node *node,
	const td__lz_key *k, int depth)
{
	static const char fn[] = "td_dict_iter_next";
	lazy_iter *lz = it->lz;

	emit(it, item, k->src, depth);
	if (it->flags & TD_ITER_KEYS_ONLY)
		return 1;
	if (k->sub) {
		/* The schema's sub-stack: lives as long as the schema, nothing made. */
		lz->cur.kind = TD_VALUE_DICT;
		lz->cur.u.dict = k->sub->stack;
		item->value = &lz->cur;
	} else if (k->kind == TD_VALUE_TENSOR) {
		td__kref kr = td__entry_kref(k->src);
		TD_TRY(td__lz_get_tensor(&lz->cur.u.tensor, node->stack ? node->stack : it->root,
			k, &kr, 1, &lz->spare, fn));
		lz->cur.kind = TD_VALUE_TENSOR;
		lz->cur_tensor = true;
		item->value = &lz->cur;
	}
	/* A non-tensor leaf: the first child's value (item->value as emitted). */
	return 1;
}

static int schema_next(td_dict_iter *it, td_item *item)
{
	bool nested = it->flags & TD_ITER_NESTED, leaves = it->flags & TD_ITER_LEAVES_ONLY;
	lazy_iter *lz = it->lz;

	lazy_drop_current(lz);
	while (it->depth >= 0) {
		const td__lz_node *node = lz->node[it->depth];
		const td__lz_key *k;

		if (it->pos[it->depth] >= node->nkeys) {
			/* Level done: yield the sub-stack that held it (post-order). */
			if (--it->depth < 0)
				return 0;
			node = lz->node[it->depth];
			k = &node->keys[it->pos[it->depth]++];
			if (!leaves)
				return schema_emit(it, item, node, k, it->depth);
			continue;
		}
		k = &node->keys[it->pos[it->depth]];
		if (k->sub && nested && it->depth + 1 < TD_KEY_MAX_DEPTH) {
			it->path[it->depth] = td__entry_key(k->src);
			it->depth++;
			lz->node[it->depth] = k->sub;
			it->pos[it->depth] = 0;
			continue;
		}
		it->pos[it->depth]++;
		if (leaves && k->kind == TD_VALUE_DICT)
			continue;
		return schema_emit(it, item, node, k, it->depth);
	}
	return 0;
}

static int lazy_next(td_dict_iter *it, td_item *item)
{
	static const char fn[] = "td_dict_iter_next";
	bool nested = it->flags & TD_ITER_NESTED, leaves = it->flags & TD_ITER_LEAVES_ONLY;
	lazy_iter *lz = it->lz;

	if (lz->schema)
		return schema_next(it, item);
	lazy_drop_current(lz);
	while (it->depth >= 0) {
		const td_dict *d = it->dict[it->depth], *src = lz->src[it->depth];
		const td__entry *e;
		td__kref k;
		td_dict *sub;
		int kind;

		if (!src || it->pos[it->depth] >= src->used) {
			/* Level done: yield the sub-stack that held it (post-order). */
			sub = lz->own[it->depth];
			lz->own[it->depth] = NULL;
			if (--it->depth < 0)
				return 0;
			e = &lz->src[it->depth]->entries[it->pos[it->depth]++];
			if (!leaves)
				return lazy_emit(it, item, e, TD_VALUE_DICT, sub, it->dict[it->depth]);
			td_dict_free(sub);
			continue;
		}
		e = &src->entries[it->pos[it->depth]];
		k = td__entry_kref(e);
		kind = td__entry_live(e) ? td__lazy_kind(d, &k, 1, NULL) : 0;
		if (!kind) {
			it->pos[it->depth]++;
			continue;
		}
		if (kind == TD_VALUE_DICT && nested && it->depth + 1 < TD_KEY_MAX_DEPTH) {
			TD_TRY(td__lazy_get_dict(&sub, d, &k, 1, NULL, fn));
			it->path[it->depth] = td__entry_key(e);
			it->depth++;
			it->dict[it->depth] = sub;
			lz->own[it->depth] = sub;
			lz->src[it->depth] = td__lazy_key_source(sub);
			it->pos[it->depth] = 0;
			continue;
		}
		it->pos[it->depth]++;
		if (leaves && kind == TD_VALUE_DICT)
			continue;
		return lazy_emit(it, item, e, kind, NULL, d);
	}
	return 0;
}

/*
 * The next item of the walk of the lazy stack nested at it->sub_depth: 1
 * with its path prefixed, or 0 when the walk is done (the stack's own
 * entry is then yielded unless only leaves are wanted).
 */
static int sub_next(td_dict_iter *it, td_item *item)
{
	int d = it->sub_depth, rc = td_dict_iter_next(it->sub, item);
	size_t i;

	if (rc == 1) {
		/* Nesting is bounded by TD_KEY_MAX_DEPTH (the stack's height counts). */
		if ((size_t)d + item->depth > TD_KEY_MAX_DEPTH)
			return td__error(TD_ERROR, "td_dict_iter_next: a key nested in a lazy stack "
				"is deeper than %d levels", TD_KEY_MAX_DEPTH);
		for (i = 0; i < item->depth; i++)
			it->path[(size_t)d + i] = item->path[i];
		item->path = it->path;
		item->depth += (size_t)d;
		return 1;
	}
	if (rc < 0)
		return rc;
	td_dict_iter_free(it->sub);
	it->sub = NULL;
	return 0;
}

int td_dict_iter_next(td_dict_iter *it, td_item *item)
{
	bool nested, leaves;

	if (!it || !item)
		return td__error(TD_EINVAL, "td_dict_iter_next: NULL argument");
	if (TD_UNLIKELY(it->lz != NULL))
		return lazy_next(it, item);
	nested = it->flags & TD_ITER_NESTED;
	leaves = it->flags & TD_ITER_LEAVES_ONLY;
	if (TD_UNLIKELY(it->sub != NULL)) {
		const td__entry *e;
		int rc = sub_next(it, item);

		if (rc != 0)
			return rc;
		/* The stack's walk is done: its own entry, post-order. */
		e = &it->dict[it->depth]->entries[it->pos[it->depth]++];
		if (!leaves) {
			emit(it, item, e, it->depth);
			return 1;
		}
	}
	while (it->depth >= 0) {
		const td_dict *d = it->dict[it->depth];
		const td__entry *e;

		if (it->pos[it->depth] >= d->used) {
			/* Level done: yield the dict that held it (post-order). */
			if (--it->depth < 0)
				return 0;
			e = &it->dict[it->depth]->entries[it->pos[it->depth]++];
			if (!leaves) {
				emit(it, item, e, it->depth);
				return 1;
			}
			continue;
		}
		e = &d->entries[it->pos[it->depth]];
		if (!td__entry_live(e)) {
			it->pos[it->depth]++;
			continue;
		}
		if (e->value.kind == TD_VALUE_DICT && nested && TD_UNLIKELY(e->value.u.dict->lazy) &&
		    it->depth + 1 < TD_KEY_MAX_DEPTH) {
			/* A nested lazy stack: walked by an iterator of its own. */
			int rc = td_dict_iter_new(&it->sub, e->value.u.dict, it->flags);

			if (rc < 0)
				return rc;
			it->path[it->depth] = td__entry_key(e);
			it->sub_depth = it->depth + 1;
			return td_dict_iter_next(it, item);
		}
		if (e->value.kind == TD_VALUE_DICT && nested &&
		    it->depth + 1 < TD_KEY_MAX_DEPTH) {
			it->path[it->depth] = td__entry_key(e);
			it->depth++;
			it->dict[it->depth] = e->value.u.dict;
			it->pos[it->depth] = 0;
			continue;
		}
		it->pos[it->depth]++;
		if (leaves && e->value.kind == TD_VALUE_DICT)
			continue;
		emit(it, item, e, it->depth);
		return 1;
	}
	return 0;
}

void td_dict_iter_free(td_dict_iter *it)
{
	if (!it)
		return;
	td_dict_iter_free(it->sub);
	it->sub = NULL;
	if (it->lz) {
		td_dict_iter_reset(it);
		td_buffer_unref(it->lz->spare);
	}
	td__free_small(it, iter_bytes(it->lz != NULL));
}
