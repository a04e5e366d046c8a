/* SPDX-License-Identifier: MIT */
/*
 * dict_iter.c - iteration over a dict: bulk top-level items, and an
 * iterator for nested walks (tensordict's keys(include_nested,
 * leaves_only) order: a nested dict is yielded after its own entries).
 * Nothing is allocated after td_dict_iter_new() for a dense dict. The walk
 * of a lazy stack (the values it makes) is in lazy_iter.c; a nested walk of
 * a dense dict enters a stack nested in it with an iterator of its own.
 */
#include "td_internal.h"
#include "dict_impl.h"

size_t td_dict_items(const char **keys_out, const td_value **values_out, size_t cap,
	const td_dict *d)
{
	size_t n = 0;
	uint32_t i;

	if (!d)
		return 0;
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
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

static int dense_next(td_dict_iter *it, td_item *item);

int td_dict_iter_new(td_dict_iter **out, const td_dict *d, unsigned flags)
{
	td_dict_iter *it;

	if (out)
		*out = NULL;
	if (!out || !d)
		return td__error(TD_EINVAL, "td_dict_iter_new: NULL argument");
	*out = NULL;
	if (flags & ~(unsigned)(TD_ITER_NESTED | TD_ITER_LEAVES_ONLY | TD_ITER_KEYS_ONLY))
		return td__error(TD_EINVAL, "td_dict_iter_new: unknown flags 0x%x", flags);
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_iter_new(out, d, flags);
	/* One small block (a few KiB: above glibc's own per-thread cache). */
	it = td__alloc_small(sizeof(*it));
	if (!it)
		return td__error_nomem(sizeof(*it));
	it->root = d;
	it->flags = flags;
	it->next = dense_next;
	it->lz = NULL;
	it->sub = NULL;
	it->depth = 0;
	td_dict_iter_reset(it);
	*out = it;
	return TD_OK;
}

void td_dict_iter_reset(td_dict_iter *it)
{
	if (!it)
		return;
	td_dict_iter_free(it->sub);
	it->sub = NULL;
	if (TD_UNLIKELY(it->lz != NULL))
		td__lazy_iter_reset(it);
	it->depth = 0;
	it->dict[0] = it->root;
	it->pos[0] = 0;
}

/*
 * The next item of the walk of the lazy stack nested at it->sub_depth: 1
 * with its path prefixed, or 0 when the walk is done (the stack's own
 * entry is then yielded unless only leaves are wanted).
 */
static int sub_next(td_dict_iter *it, td_item *item)
{
	int d = it->sub_depth, rc = td_dict_iter_next(item, it->sub);
	size_t i;

	if (rc == 1) {
		/* Nesting is bounded by TD_KEY_MAX_DEPTH (the stack's height counts). */
		if ((size_t)d + item->depth > TD_KEY_MAX_DEPTH)
			return td__error(TD_ERROR,
				"td_dict_iter_next: a key nested in a lazy stack "
				"is deeper than %d levels",
				TD_KEY_MAX_DEPTH);
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

/* td_dict_iter_next() of the walk of a dense dict (it->next). */
static int dense_next(td_dict_iter *it, td_item *item)
{
	bool nested, leaves;

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
			td__iter_emit(it, item, e, it->depth);
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
				td__iter_emit(it, item, e, it->depth);
				return 1;
			}
			continue;
		}
		e = &d->entries[it->pos[it->depth]];
		if (!td__entry_live(e)) {
			it->pos[it->depth]++;
			continue;
		}
		if (e->value.kind == TD_VALUE_DICT && nested &&
			TD_UNLIKELY(td__dict_is_lazy(e->value.dict)) && it->depth + 1 < TD_KEY_MAX_DEPTH) {
			/* A nested lazy stack: walked by an iterator of its own. */
			int rc = td_dict_iter_new(&it->sub, e->value.dict, it->flags);

			if (rc < 0)
				return rc;
			it->path[it->depth] = td__entry_key(e);
			it->sub_depth = it->depth + 1;
			return td_dict_iter_next(item, it);
		}
		if (e->value.kind == TD_VALUE_DICT && nested && it->depth + 1 < TD_KEY_MAX_DEPTH) {
			it->path[it->depth] = td__entry_key(e);
			it->depth++;
			it->dict[it->depth] = e->value.dict;
			it->pos[it->depth] = 0;
			continue;
		}
		it->pos[it->depth]++;
		if (leaves && e->value.kind == TD_VALUE_DICT)
			continue;
		td__iter_emit(it, item, e, it->depth);
		return 1;
	}
	return 0;
}

/*
 * The walk the iterator was made for (it->next, set by td_dict_iter_new()
 * from the dict's kind), as a tail call: no frame here (the dense walk
 * inline, its register saves were ~26 instructions a step of a lazy walk).
 */
int td_dict_iter_next(td_item *out, td_dict_iter *it)
{
	if (!it || !out)
		return td__error(TD_EINVAL, "td_dict_iter_next: NULL argument");
	return it->next(it, out);
}

void td_dict_iter_free(td_dict_iter *it)
{
	if (!it)
		return;
	td_dict_iter_free(it->sub);
	it->sub = NULL;
	if (TD_UNLIKELY(it->lz != NULL))
		td__lazy_iter_free(it);
	else
		td__free_small(it, sizeof(*it));
}
