/* SPDX-License-Identifier: MIT */
/*
 * dict_iter.c - iteration over a dict: bulk top-level items, and an
 * iterator for nested walks (tensordict's keys(include_nested,
 * leaves_only) order: a nested dict is yielded after its own entries).
 * Nothing is allocated after td_dict_iter_new().
 */
#include "td_internal.h"
#include "dict_impl.h"

size_t td_dict_items(const td_dict *d, const char **keys_out, const td_value **values_out,
	size_t cap)
{
	size_t n = 0;
	uint32_t i;

	if (!d)
		return 0;
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

struct td_dict_iter {
	const td_dict *root;
	unsigned flags;
	int depth;                              /* index of the current level */
	const td_dict *dict[TD_KEY_MAX_DEPTH];  /* the dict iterated at each level */
	uint32_t pos[TD_KEY_MAX_DEPTH];         /* next slot at each level */
	const char *path[TD_KEY_MAX_DEPTH];
};

int td_dict_iter_new(td_dict_iter **out, const td_dict *d, unsigned flags)
{
	td_dict_iter *it;

	if (out)
		*out = NULL;
	if (!out || !d)
		return td__error(TD_EINVAL, "td_dict_iter_new: NULL argument");
	*out = NULL;
	if (flags & ~(unsigned)(TD_ITER_NESTED | TD_ITER_LEAVES_ONLY))
		return td__error(TD_EINVAL, "td_dict_iter_new: unknown flags 0x%x", flags);
	it = td__malloc(sizeof(*it));
	if (!it)
		return td__error_nomem(sizeof(*it));
	it->root = d;
	it->flags = flags;
	td_dict_iter_reset(it);
	*out = it;
	return TD_OK;
}

void td_dict_iter_reset(td_dict_iter *it)
{
	if (!it)
		return;
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
	item->value = &e->value;
}

int td_dict_iter_next(td_dict_iter *it, td_item *item)
{
	bool nested, leaves;

	if (!it || !item)
		return td__error(TD_EINVAL, "td_dict_iter_next: NULL argument");
	nested = it->flags & TD_ITER_NESTED;
	leaves = it->flags & TD_ITER_LEAVES_ONLY;
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
	td__free(it);
}
