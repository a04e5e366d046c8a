/* SPDX-License-Identifier: MIT */
/*
 * lazy.c - lazy stacks (tensordict's LazyStackedTensorDict): building and
 * releasing them, the walk API, keys resolved over the children, and the
 * operations made child by child (copies, maps). Reading leaves and
 * sub-dicts is in lazy_get.c, writes through the stack in lazy_set.c,
 * dense forms in lazy_dense.c, batch operations in lazy_batch.c and the
 * cached key schema in lazy_schema.c.
 */
#include "td_internal.h"
#include "dict_impl.h"
#include "lazy_impl.h"

#include <stdio.h>
#include <stdlib.h>

int td__lazy_notsup(const char *fn)
{
	return td__error(TD_ENOTSUP,
		"%s: not supported on a lazy stack (td_lazy_densify() "
		"makes a dense dict)",
		fn);
}

int td__lz_not_found(const td__kref *parts, size_t n, size_t i, const char *fn)
{
	char key[512];

	td__kpath_format(key, sizeof(key), parts, n);
	return td__error(TD_ENOTFOUND, "%s: key '%s' not found in child %zu of the lazy stack", fn, key,
		i);
}

/* ------------------------------------------------------------------------ */
/* Building and releasing                                                    */
/* ------------------------------------------------------------------------ */

/* The bytes of a lazy stack of n children: dict, td__lazy, child[], own[] (size checked). */
static size_t lazy_bytes(size_t n)
{
	return sizeof(td_dict) + sizeof(td__lazy) + n * sizeof(td_dict *) + n;
}

int td__lazy_alloc(td_dict **out, size_t n, int dim, int cndim, const int64_t *cshape,
	const char *fn)
{
	size_t size, ptrs;
	td__lazy *z;
	td_dict *d;
	int i, k, rc;

	if (cndim + 1 > TD_MAX_DIMS)
		return td__error(TD_EINVAL,
			"%s: stacking dicts of %d batch dims would exceed %d "
			"dims",
			fn, cndim, TD_MAX_DIMS);
	if (n > (size_t)INT64_MAX || !td__mul_size(n, sizeof(td_dict *), &ptrs) ||
		!td__add_size(sizeof(*d) + sizeof(*z), ptrs, &size) || !td__add_size(size, n, &size))
		return td__error(TD_EOVERFLOW, "%s: too many children (%zu)", fn, n);
	/* A small block (the stacks made by gets, indexing and unbind are many). */
	d = td__alloc_small(size);
	if (!d)
		return td__error_nomem(size);
	d->entries = NULL;
	d->index = NULL;
	d->used = d->count = d->cap = 0;
	d->index_mask = d->index_fill = 0;
	d->locked = false;
	d->entries_inline = false;
	d->block_cap = 0;
	d->gen = 1;
	d->parent = NULL;
	z = (td__lazy *)(d + 1);
	z->n = n;
	z->dim = dim;
	z->child = (td_dict **)(z + 1);
	z->own = (bool *)(z->child + n);
	atomic_init(&z->stamp, UINT64_MAX);
	z->schema = NULL;
	atomic_flag_clear(&z->building);
	memset(z->child, 0, ptrs);
	memset(z->own, 0, n);
	d->lazy = z;
	d->batch_ndim = (int16_t)(cndim + 1);
	for (i = 0, k = 0; i <= cndim; i++)
		d->batch_shape[i] = i == dim ? (int64_t)n : cshape[k++];
	rc = td__batch_check_numel(d->batch_ndim, d->batch_shape, fn);
	if (rc < 0) {
		td__free_small(d, size);
		return rc;
	}
	*out = d;
	return TD_OK;
}

void td__lazy_release(td_dict *d, td_dict **kids, size_t *m, size_t room)
{
	td__lazy *z = d->lazy;
	size_t i, left = 0;

	/* The owned children are detached; those beyond `room` are gathered in
	 * place at the front of child[] (which dies with the stack). */
	for (i = 0; i < z->n; i++) {
		if (!z->own[i] || !z->child[i])
			continue;
		z->child[i]->parent = NULL;
		if (*m < room)
			kids[(*m)++] = z->child[i];
		else
			z->child[left++] = z->child[i];
	}
	td__dict_destroy_many(z->child, left);
	td__lz_free(z->schema);
	td__free_small(d, lazy_bytes(z->n));
}

void td__lazy_destroy(td_dict *d)
{
	size_t m = 0;

	/* All its owned children destroyed together, a level at a time. */
	td__lazy_release(d, NULL, &m, 0);
}

void td__lazy_set_locked(td_dict *d, bool locked)
{
	td__lazy *z = d->lazy;

	d->locked = locked;
	td__dict_set_locked_many(z->child, z->n, locked);
}

size_t td__lazy_height(const td_dict *d)
{
	const td__lazy *z = d->lazy;
	size_t h = 0, i;

	/* A lazy stack is a level above its children (whose keys it shares). */
	for (i = 0; i < z->n; i++) {
		size_t c = td__dict_height(z->child[i]);
		if (c > h)
			h = c;
	}
	return h + 1;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (td_dict *const *)a, y = (uintptr_t) * (td_dict *const *)b;

	return x < y ? -1 : x > y;
}

/* With TD_LAZY_TAKE: every child a root, none twice. */
static int check_take(td_dict *const *dicts, size_t n, const char *fn)
{
	td_dict **sorted;
	size_t i, bytes;
	int rc = TD_OK;

	for (i = 0; i < n; i++)
		if (dicts[i]->parent)
			return td__error(TD_EINVAL,
				"%s: dict %zu belongs to another dict: only root "
				"dicts can be taken",
				fn, i);
	if (!td__mul_size(n, sizeof(*sorted), &bytes))
		return td__error(TD_EOVERFLOW, "%s: too many children", fn);
	sorted = td__malloc(bytes);
	if (!sorted)
		return td__error_nomem(bytes);
	memcpy(sorted, dicts, bytes);
	qsort(sorted, n, sizeof(*sorted), cmp_ptr);
	for (i = 1; i < n && rc == TD_OK; i++)
		if (sorted[i] == sorted[i - 1])
			rc = td__error(TD_EINVAL, "%s: a dict appears twice: it cannot be taken twice", fn);
	td__free(sorted);
	return rc;
}

int td_lazy_stack(td_dict **out, td_dict *const *dicts, size_t n, int dim, unsigned flags)
{
	static const char fn[] = "td_lazy_stack";
	char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
	const td_dict *c0;
	td_dict *d;
	size_t i;
	int dd;

	if (out)
		*out = NULL;
	if (!out || !dicts)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	if (flags & ~(unsigned)TD_LAZY_TAKE)
		return td__error(TD_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	if (n == 0)
		return td__error(TD_EINVAL, "%s: no dicts to stack", fn);
	for (i = 0; i < n; i++)
		if (!dicts[i])
			return td__error(TD_EINVAL, "%s: dict %zu is NULL", fn, i);
	c0 = dicts[0];
	for (i = 1; i < n; i++) {
		const td_dict *c = dicts[i];
		if (c->batch_ndim != c0->batch_ndim ||
			!td__shape_eq(c->batch_shape, c0->batch_shape, c0->batch_ndim))
			return td__error(TD_ETYPE,
				"%s: dict %zu has batch shape %s and dict 0 %s: the "
				"children of a lazy stack share one batch shape",
				fn, i, td__format_shape(s1, sizeof(s1), c->batch_ndim, c->batch_shape),
				td__format_shape(s2, sizeof(s2), c0->batch_ndim, c0->batch_shape));
	}
	if (c0->batch_ndim >= TD_MAX_DIMS)
		return td__error(TD_EINVAL,
			"%s: stacking dicts of %d batch dims would exceed %d "
			"dims",
			fn, c0->batch_ndim, TD_MAX_DIMS);
	TD_TRY(td__wrap_dim(dim, c0->batch_ndim + 1, &dd, fn));
	if (flags & TD_LAZY_TAKE)
		TD_TRY(check_take(dicts, n, fn));
	TD_TRY(td__lazy_alloc(&d, n, dd, c0->batch_ndim, c0->batch_shape, fn));
	for (i = 0; i < n; i++) {
		d->lazy->child[i] = dicts[i];
		if (flags & TD_LAZY_TAKE) {
			d->lazy->own[i] = true;
			dicts[i]->parent = d;
		}
	}
	*out = d;
	return TD_OK;
}

bool td_dict_is_lazy(const td_dict *d)
{
	return d && d->lazy;
}

size_t td_lazy_count(const td_dict *d)
{
	return d && d->lazy ? d->lazy->n : 0;
}

int td_lazy_stack_dim(const td_dict *d)
{
	return d && d->lazy ? d->lazy->dim : -1;
}

td_dict *td_lazy_child(const td_dict *d, size_t i)
{
	if (!d || !d->lazy || i >= d->lazy->n)
		return NULL;
	return d->lazy->child[i];
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                      */
/* ------------------------------------------------------------------------ */

int td__lazy_kind(const td_dict *d, const td__kref *parts, size_t n, const td_key *handle)
{
	const td__lazy *z = d->lazy;
	const td__lz_schema *s;
	int kind = 0;
	size_t i;

	if (!z) {
		const td__entry *e = td__dict_lookup_quiet(d, parts, n, NULL);
		const td_dict *nested;
		size_t used;

		if (e)
			return (int)e->value.kind;
		/* A path into a lazy stack nested in the dense child. */
		nested = td__dict_lazy_prefix(d, parts, n, &used);
		return nested ? td__lazy_kind(nested, parts + used, n - used, NULL) : 0;
	}
	s = td__lz_get(d);
	if (s) {
		const td__lz_key *k = td__lz_find_key(s, parts, n, handle, NULL);
		return k ? k->kind : 0;
	}
	for (i = 0; i < z->n; i++) {
		int k = td__lazy_kind(z->child[i], parts, n, handle);

		if (k == 0)
			return 0;
		if (i == 0)
			kind = k;
		else if ((k == TD_VALUE_DICT) != (kind == TD_VALUE_DICT))
			return 0;
	}
	return kind;
}

const td_dict *td__lazy_key_source(const td_dict *d)
{
	while (d->lazy) {
		if (d->lazy->n == 0)
			return NULL;
		d = d->lazy->child[0];
	}
	return d;
}

size_t td__lazy_items(const td_dict *d, const char **keys_out, const td_value **values_out,
	size_t cap)
{
	const td_dict *src = td__lazy_key_source(d);
	const td__lz_schema *s = td__lz_get(d);
	size_t count = 0;
	uint32_t i;

	if (s) {
		const td__lz_node *root = &s->root;
		for (i = 0; i < root->nkeys && i < cap; i++) {
			if (keys_out)
				keys_out[i] = td__entry_key(root->keys[i].src);
			if (values_out)
				values_out[i] = NULL;
		}
		return root->nkeys;
	}
	if (!src)
		return 0;
	for (i = 0; i < src->used; i++) {
		const td__entry *e = &src->entries[i];
		td__kref k;

		if (!td__entry_live(e))
			continue;
		k = td__entry_kref(e);
		if (!td__lazy_kind(d, &k, 1, NULL))
			continue;
		if (count < cap) {
			if (keys_out)
				keys_out[count] = td__entry_key(e);
			if (values_out)
				values_out[count] = NULL;
		}
		count++;
	}
	return count;
}

size_t td__lazy_len(const td_dict *d)
{
	return td__lazy_items(d, NULL, NULL, 0);
}

/* ------------------------------------------------------------------------ */
/* Copies and maps, child by child                                           */
/* ------------------------------------------------------------------------ */

int td__lazy_alloc_like(td_dict **out, const td_dict *stack, const char *fn)
{
	const td__lazy *z = stack->lazy;
	int64_t cshape[TD_MAX_DIMS];
	int k, j;

	for (k = 0, j = 0; k < stack->batch_ndim; k++)
		if (k != z->dim)
			cshape[j++] = stack->batch_shape[k];
	return td__lazy_alloc(out, z->n, z->dim, stack->batch_ndim - 1, cshape, fn);
}

void td__lazy_adopt(td_dict *stack, size_t i, td_dict *child)
{
	child->parent = stack;
	stack->lazy->child[i] = child;
	stack->lazy->own[i] = true;
}

int td__lazy_map_children(td_dict **out, const td_dict *stack, td__child_fn fn, void *ctx,
	const char *name)
{
	const td__lazy *z = stack->lazy;
	td_dict *s, *c;
	size_t i;
	int rc;

	TD_TRY(td__lazy_alloc_like(&s, stack, name));
	for (i = 0; i < z->n; i++) {
		c = NULL;
		rc = fn(&c, z->child[i], ctx);
		/* The result must be a root of the child's batch shape: never silently wrong. */
		if (rc >= 0 &&
			(c->parent || c->batch_ndim != z->child[i]->batch_ndim ||
				!td__shape_eq(c->batch_shape, z->child[i]->batch_shape, c->batch_ndim))) {
			td_dict_free(c);
			rc = td__error(TD_ERROR, "%s: child %zu gave a result of another batch shape", name, i);
		}
		if (rc < 0) {
			td__lazy_destroy(s);
			return rc;
		}
		td__lazy_adopt(s, i, c);
	}
	*out = s;
	return TD_OK;
}

int td__lazy_each_child(td_dict *stack, td__child_do_fn fn, void *ctx)
{
	const td__lazy *z = stack->lazy;
	size_t i;

	for (i = 0; i < z->n; i++)
		TD_TRY(fn(z->child[i], ctx));
	return TD_OK;
}

int td__lazy_copy(td_dict **out, const td_dict *d, bool deep, const char *fn)
{
	const td__lazy *z = d->lazy;
	td_dict *s;
	size_t i;

	TD_TRY(td__lazy_alloc_like(&s, d, fn));
	for (i = 0; i < z->n; i++) {
		td_dict *c;
		int rc = deep ? td_dict_clone(&c, z->child[i]) : td_dict_copy(&c, z->child[i]);

		if (rc < 0) {
			td__lazy_destroy(s);
			return rc;
		}
		td__lazy_adopt(s, i, c);
	}
	*out = s;
	return TD_OK;
}
