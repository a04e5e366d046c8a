/* SPDX-License-Identifier: MIT */
/*
 * lazy_iter.c - iteration over a lazy stack: the stack's keys, with values
 * the iterator makes (a stacked copy of each leaf, freed at the next step
 * or its buffer reused; sub-dicts as lazy stacks, those of the stack's
 * cached schema (lazy_schema.c) when it has one, else made and freed like
 * leaves). The dense walk and the public functions are in dict_iter.c.
 */
#include "td_internal.h"
#include "dict_impl.h"
#include "lazy_impl.h"
#include "buffer_impl.h"

/* What an iteration over a lazy stack adds: the values it makes. */
typedef struct td__lazy_iter {
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

/* The iterator's block: the iterator, then its lazy_iter. */
#define LAZY_ITER_BYTES (sizeof(td_dict_iter) + sizeof(lazy_iter))

/* Start the walk at the stack's first key: its key source and schema, level 0. */
static void lazy_iter_start(td_dict_iter *it)
{
	it->lz->src[0] = td__lazy_key_source(it->root);
	it->lz->schema = td__lz_get(it->root);
	if (it->lz->schema)
		it->lz->node[0] = &it->lz->schema->root;
	it->depth = 0;
	it->dict[0] = it->root;
	it->pos[0] = 0;
}

int td__lazy_iter_new(td_dict_iter **out, const td_dict *d, unsigned flags)
{
	td_dict_iter *it;

	/* One small block (a few KiB: above glibc's own per-thread cache). */
	it = td__alloc_small(LAZY_ITER_BYTES);
	if (!it)
		return td__error_nomem(LAZY_ITER_BYTES);
	it->root = d;
	it->flags = flags;
	it->next = td__lazy_iter_next;
	it->sub = NULL;
	it->depth = 0;
	it->lz = (lazy_iter *)(it + 1);
	memset(it->lz->own, 0, sizeof(it->lz->own));
	it->lz->schema = NULL;
	it->lz->cur_tensor = false;
	it->lz->dead = NULL;
	it->lz->spare = NULL;
	/* td_dict_iter_reset() of a new walk: nothing to free, the first level to find. */
	lazy_iter_start(it);
	*out = it;
	return TD_OK;
}

/* Free what the last step of a lazy iteration made (a stacked leaf's buffer may be kept). */
static void lazy_drop_current(lazy_iter *lz)
{
	if (lz->cur_tensor) {
		td_buffer *b;

		td__dims_unref(&lz->cur.tensor);
		b = lz->cur.tensor.buffer;
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

/* Free what the walk holds: the value yielded last and the sub-stacks it is in. */
static void lazy_iter_clear(td_dict_iter *it)
{
	lazy_drop_current(it->lz);
	for (; it->depth > 0; it->depth--) {
		td_dict_free(it->lz->own[it->depth]);
		it->lz->own[it->depth] = NULL;
	}
}

void td__lazy_iter_reset(td_dict_iter *it)
{
	lazy_iter_clear(it);
	lazy_iter_start(it);
}

void td__lazy_iter_free(td_dict_iter *it)
{
	/* Not a reset: the schema need not be looked up again for a walk that ends. */
	lazy_iter_clear(it);
	td_buffer_unref(it->lz->spare);
	td__free_small(it, LAZY_ITER_BYTES);
}

/* Yield the entry `e` of a lazy level: its key, and the value made for it. */
static int lazy_emit(td_dict_iter *it, td_item *item, const td__entry *e, int kind, td_dict *sub,
	const td_dict *d)
{
	static const char fn[] = "td_dict_iter_next";
	lazy_iter *lz = it->lz;

	td__iter_emit(it, item, e, it->depth);
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
		lz->cur.dict = sub;
		lz->dead = sub;
		item->value = &lz->cur;
	} else if (kind == TD_VALUE_TENSOR) {
		td__kref k = td__entry_kref(e);
		TD_TRY(td__lazy_get_tensor(&lz->cur.tensor, d, &k, 1, fn));
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

	td__iter_emit(it, item, k->src, depth);
	if (it->flags & TD_ITER_KEYS_ONLY)
		return 1;
	if (k->sub) {
		/* The schema's sub-stack: lives as long as the schema, nothing made. */
		lz->cur.kind = TD_VALUE_DICT;
		lz->cur.dict = k->sub->stack;
		item->value = &lz->cur;
	} else if (k->kind == TD_VALUE_TENSOR) {
		td__kref kr = td__entry_kref(k->src);
		TD_TRY(td__lz_get_tensor(&lz->cur.tensor, node->stack ? node->stack : it->root, k, &kr, 1,
			&lz->spare, fn));
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

int td__lazy_iter_next(td_dict_iter *it, td_item *item)
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
