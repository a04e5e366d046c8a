/* SPDX-License-Identifier: MIT */
/*
 * lazy.c - lazy stacks (tensordict's LazyStackedTensorDict): building and
 * releasing them, the walk API, keys resolved over the children, leaves
 * read stacked / into a caller's tensor / as a list / padded / nested,
 * sub-dicts as lazy stacks, writes through to the children, densify and
 * maybe_dense_stack. Batch operations are in lazy_batch.c.
 */
#include "td_internal.h"
#include "dict_impl.h"
#include "buffer_impl.h"

#include <stdio.h>
#include <stdlib.h>

int td__lazy_notsup(const char *fn)
{
	return td__error(TD_ENOTSUP, "%s: not supported on a lazy stack (td_lazy_densify() "
		"makes a dense dict)", fn);
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
		return td__error(TD_EINVAL, "%s: stacking dicts of %d batch dims would exceed %d "
			"dims", fn, cndim, TD_MAX_DIMS);
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

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(td_dict *const *)a, y = (uintptr_t)*(td_dict *const *)b;

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
			return td__error(TD_EINVAL, "%s: dict %zu belongs to another dict: only root "
				"dicts can be taken", fn, i);
	if (!td__mul_size(n, sizeof(*sorted), &bytes))
		return td__error(TD_EOVERFLOW, "%s: too many children", fn);
	sorted = td__malloc(bytes);
	if (!sorted)
		return td__error_nomem(bytes);
	memcpy(sorted, dicts, bytes);
	qsort(sorted, n, sizeof(*sorted), cmp_ptr);
	for (i = 1; i < n && rc == TD_OK; i++)
		if (sorted[i] == sorted[i - 1])
			rc = td__error(TD_EINVAL, "%s: a dict appears twice: it cannot be taken twice",
				fn);
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
			return td__error(TD_ETYPE, "%s: dict %zu has batch shape %s and dict 0 %s: the "
				"children of a lazy stack share one batch shape", fn, i,
				td__format_shape(s1, sizeof(s1), c->batch_ndim, c->batch_shape),
				td__format_shape(s2, sizeof(s2), c0->batch_ndim, c0->batch_shape));
	}
	if (c0->batch_ndim >= TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: stacking dicts of %d batch dims would exceed %d "
			"dims", fn, c0->batch_ndim, TD_MAX_DIMS);
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
/* Leaves                                                                    */
/* ------------------------------------------------------------------------ */

#define LOCAL_LEAVES 16

/*
 * The children's leaves at one path: dense children lend theirs (no
 * reference taken: valid during the call), lazy children give stacked
 * copies (owned).
 */
typedef struct leaves {
	size_t n;
	td_tensor *t;
	bool *owned;
	bool heap;
	td_tensor local[LOCAL_LEAVES];
	bool local_owned[LOCAL_LEAVES];
} leaves;

static void leaves_release(leaves *L)
{
	size_t i;

	for (i = 0; i < L->n; i++)
		if (L->owned[i])
			td_tensor_release(&L->t[i]);
	if (L->heap) {
		td__free(L->t);
		td__free(L->owned);
	}
	L->n = 0;
	L->heap = false;
}

static int not_found_in_child(const td__kref *parts, size_t n, size_t i, const char *fn)
{
	char key[512];

	td__kpath_format(key, sizeof(key), parts, n);
	return td__error(TD_ENOTFOUND, "%s: key '%s' not found in child %zu of the lazy stack", fn,
		key, i);
}

static int leaves_collect(leaves *L, const td_dict *d, const td__kref *parts, size_t n,
	const char *fn)
{
	const td__lazy *z = d->lazy;
	char key[512];
	size_t i, bytes;
	int rc;

	L->n = 0;
	L->heap = false;
	L->t = L->local;
	L->owned = L->local_owned;
	if (z->n == 0)
		return not_found_in_child(parts, n, 0, fn);
	if (z->n > LOCAL_LEAVES) {
		if (!td__mul_size(z->n, sizeof(td_tensor), &bytes))
			return td__error(TD_EOVERFLOW, "%s: too many children", fn);
		L->t = td__malloc(bytes);
		L->owned = td__malloc(z->n);
		L->heap = true;
		if (!L->t || !L->owned) {
			leaves_release(L);
			return td__error_nomem(bytes);
		}
	}
	for (i = 0; i < z->n; i++) {
		const td_dict *c = z->child[i];
		const td__entry *e;

		if (c->lazy) {
			rc = td__lazy_get_tensor(&L->t[i], c, parts, n, fn);
			if (rc < 0)
				goto fail;
			L->owned[i] = true;
			L->n = i + 1;
			continue;
		}
		e = td__dict_lookup_quiet(c, parts, n, NULL);
		if (!e) {
			/* A path into a lazy stack nested in the dense child: stacked there. */
			size_t used;
			const td_dict *nested = td__dict_lazy_prefix(c, parts, n, &used);

			if (!nested) {
				rc = not_found_in_child(parts, n, i, fn);
				goto fail;
			}
			rc = td__lazy_get_tensor(&L->t[i], nested, parts + used, n - used, fn);
			if (rc < 0)
				goto fail;
			L->owned[i] = true;
			L->n = i + 1;
			continue;
		}
		if (e->value.kind != TD_VALUE_TENSOR) {
			td__kpath_format(key, sizeof(key), parts, n);
			rc = td__error(TD_ETYPE, "%s: '%s' is not a tensor in child %zu", fn, key, i);
			goto fail;
		}
		td__tensor_copy_meta(&L->t[i], &e->value.u.tensor);
		L->owned[i] = false;
		L->n = i + 1;
	}
	return TD_OK;
fail:
	leaves_release(L);
	return rc;
}

/* TD_ETYPE naming the key and two shapes unless every leaf has the shape of the first. */
static int leaves_check_same(const leaves *L, const td__kref *parts, size_t n, const char *fn)
{
	char key[512], s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
	const td_tensor *t0 = &L->t[0];
	size_t i;

	for (i = 1; i < L->n; i++) {
		const td_tensor *t = &L->t[i];
		if (t->ndim == t0->ndim && td__shape_eq(t->shape, t0->shape, t0->ndim))
			continue;
		td__kpath_format(key, sizeof(key), parts, n);
		return td__error(TD_ETYPE, "%s: '%s' is ragged (child 0 has shape %s, child %zu "
			"%s) and cannot be stacked: ask for a list (td_lazy_get_list), a padded "
			"tensor (td_lazy_get_padded) or the nested form (td_lazy_get_nested)", fn, key,
			td__format_shape(s1, sizeof(s1), t0->ndim, t0->shape), i,
			td__format_shape(s2, sizeof(s2), t->ndim, t->shape));
	}
	return TD_OK;
}

int td__lz_get_tensor(td_tensor *out, const td_dict *d, const td__lz_key *k,
	const td__kref *parts, size_t n, td_buffer **spare, const char *fn)
{
	const td__entry *const *ent = k->ent;
	const td_tensor *t0;
	const td_buffer *host; /* the last buffer seen to be in host memory */
	size_t i, count = d->lazy->n;
	int64_t step = 0, prev;
	bool even = count >= 2;
	int j, nd;

	if (!k->all_tensor)
		return td__lazy_get_tensor(out, d, parts, n, fn);
	/*
	 * One pass: the leaves must agree in dtype and shape and be readable
	 * here (else the general path promotes, reports ragged leaves, refuses
	 * device memory); meanwhile see whether they are evenly spaced views of
	 * one buffer with the same strides (the children of a stack of unbind
	 * pieces). Differences are or-ed: one branch per child, not per dim.
	 */
	t0 = &ent[0]->value.u.tensor;
	nd = t0->ndim;
	host = t0->buffer;
	if (!td__buffer_host(host))
		return td__lazy_get_tensor(out, d, parts, n, fn);
	if (even)
		step = ent[1]->value.u.tensor.offset - t0->offset;
	prev = t0->offset;
	for (i = 1; i < count; i++) {
		const td_tensor *x = &ent[i]->value.u.tensor;
		int64_t diff = (int64_t)(x->dtype ^ t0->dtype) | (x->ndim ^ nd), sdiff = 0;

		if (diff)
			return td__lazy_get_tensor(out, d, parts, n, fn);
		if (nd == 1) { /* the common leaf of a stack of chains: no loop */
			diff |= x->shape[0] ^ t0->shape[0];
			sdiff |= x->strides[0] ^ t0->strides[0];
		} else {
			for (j = 0; j < nd; j++) {
				diff |= x->shape[j] ^ t0->shape[j];
				sdiff |= x->strides[j] ^ t0->strides[j];
			}
		}
		if (diff)
			return td__lazy_get_tensor(out, d, parts, n, fn);
		if (x->buffer != host) {
			if (!td__buffer_host(x->buffer))
				return td__lazy_get_tensor(out, d, parts, n, fn);
			host = x->buffer;
		}
		even = even && x->buffer == t0->buffer && sdiff == 0 && x->offset - prev == step;
		prev = x->offset;
	}
	return td__lz_stack(out, ent, count, d->lazy->dim, even ? &step : NULL, spare, fn);
}

int td__lazy_get_tensor(td_tensor *out, const td_dict *d, const td__kref *parts, size_t n,
	const char *fn)
{
	leaves L;
	int rc;

	TD_TRY(leaves_collect(&L, d, parts, n, fn));
	rc = leaves_check_same(&L, parts, n, fn);
	if (rc == TD_OK)
		rc = td_tensor_stack(out, L.t, L.n, d->lazy->dim);
	leaves_release(&L);
	return rc;
}

/* The view t[..., k, ...] at dim `dim`, borrowing t's buffer (no reference). */
static void select_borrowed(td_tensor *out, const td_tensor *t, int dim, int64_t k)
{
	int i, j = 0;

	out->buffer = t->buffer;
	out->offset = t->offset + k * t->strides[dim];
	out->dtype = t->dtype;
	for (i = 0; i < t->ndim; i++) {
		if (i == dim)
			continue;
		out->shape[j] = t->shape[i];
		out->strides[j++] = t->strides[i];
	}
	out->ndim = t->ndim - 1;
}

/* Resolve a dotted key or a key handle and check the stack argument. */
/*
 * Resolve a dotted key or a key handle and check the stack argument *dp: a
 * lazy stack, or a dense dict whose path leads into a lazy stack nested in
 * it; then *dp becomes that stack, `p` holds the rest of the path and
 * *rerouted is set (the handle no longer names the path).
 */
static int lazy_args(td__kpath *p, const td_dict **dp, const char *dotted, const td_key *key,
	const void *out, bool *rerouted, const char *fn)
{
	const td_dict *d = *dp, *z;
	size_t used;

	*rerouted = false;
	if (!d || !out || (!dotted && !key))
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	if (key)
		TD_TRY(td__kpath_key(p, key, fn));
	else
		TD_TRY(td__kpath_dotted(p, dotted, fn));
	if (d->lazy)
		return TD_OK;
	z = td__dict_lazy_prefix(d, p->part, p->n, &used);
	if (!z)
		return td__error(TD_EINVAL, "%s: the dict is not a lazy stack, nor does the key lead "
			"into one nested in it", fn);
	p->n -= used;
	memmove(p->part, p->part + used, p->n * sizeof(p->part[0]));
	*dp = z;
	*rerouted = true;
	return TD_OK;
}

/* lazy_args() that leaves a key handle's components where they are (*parts, *n). */
static int lazy_key_args(td__kpath *p, const td__kref **parts, size_t *n, const td_dict **dp,
	const char *dotted, const td_key **key, const void *out, const char *fn)
{
	bool rerouted;

	if (*key && *dp && out && (*dp)->lazy) {
		*parts = (*key)->part;
		*n = (*key)->n;
		return TD_OK;
	}
	TD_TRY(lazy_args(p, dp, dotted, *key, out, &rerouted, fn));
	if (rerouted)
		*key = NULL;
	*parts = p->part;
	*n = p->n;
	return TD_OK;
}

static int get_tensor(td_tensor *out, const td_dict *d, const char *dotted, const td_key *key,
	const char *fn)
{
	const td__lz_schema *s;
	const td__lz_key *k;
	const td__kref *parts;
	td__kpath p;
	size_t n;

	TD_TRY(lazy_key_args(&p, &parts, &n, &d, dotted, &key, out, fn));
	s = td__lz_get(d);
	if (s && (k = td__lz_find_key(s, parts, n, key, NULL)) != NULL && k->all_tensor)
		return td__lz_get_tensor(out, d, k, parts, n, NULL, fn);
	return td__lazy_get_tensor(out, d, parts, n, fn);
}

int td_lazy_get_tensor(td_tensor *out, const td_dict *d, const char *key)
{
	return get_tensor(out, d, key, NULL, "td_lazy_get_tensor");
}

int td_lazy_get_tensor_key(td_tensor *out, const td_dict *d, const td_key *key)
{
	if (!key)
		return td__error(TD_EINVAL, "td_lazy_get_tensor_key: NULL key handle");
	return get_tensor(out, d, NULL, key, "td_lazy_get_tensor_key");
}

int td_lazy_get_tensor_into(td_tensor *dst, const td_dict *d, const char *key)
{
	static const char fn[] = "td_lazy_get_tensor_into";
	char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
	int64_t shape[TD_MAX_DIMS];
	td__kpath p;
	bool rerouted;
	leaves L;
	size_t i;
	int k, j, rc, dim;

	TD_TRY(lazy_args(&p, &d, key, NULL, dst, &rerouted, fn));
	TD_TRY(td__tensor_check(dst, fn, "the destination"));
	TD_TRY(leaves_collect(&L, d, p.part, p.n, fn));
	dim = d->lazy->dim;
	rc = leaves_check_same(&L, p.part, p.n, fn);
	if (rc == TD_OK && L.t[0].ndim >= TD_MAX_DIMS)
		rc = td__error(TD_EINVAL, "%s: the stacked leaf would exceed %d dims", fn,
			TD_MAX_DIMS);
	if (rc == TD_OK) {
		for (k = 0, j = 0; k <= L.t[0].ndim; k++)
			shape[k] = k == dim ? (int64_t)L.n : L.t[0].shape[j++];
		if (dst->ndim != L.t[0].ndim + 1 || !td__shape_eq(dst->shape, shape, dst->ndim))
			rc = td__error(TD_ETYPE, "%s: the destination has shape %s, the stacked leaf "
				"%s", fn, td__format_shape(s1, sizeof(s1), dst->ndim, dst->shape),
				td__format_shape(s2, sizeof(s2), L.t[0].ndim + 1, shape));
	}
	for (i = 0; rc == TD_OK && i < L.n; i++) {
		td_tensor view;
		select_borrowed(&view, dst, dim, (int64_t)i);
		rc = td_tensor_copy(&view, &L.t[i]);
	}
	leaves_release(&L);
	return rc;
}

int td_lazy_get_list(td_tensor **tensors_out, size_t *count_out, const td_dict *d,
	const char *key)
{
	static const char fn[] = "td_lazy_get_list";
	td_tensor *arr;
	td__kpath p;
	bool rerouted;
	leaves L;
	size_t i;

	if (tensors_out)
		*tensors_out = NULL;
	if (count_out)
		*count_out = 0;
	if (!count_out)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	TD_TRY(lazy_args(&p, &d, key, NULL, tensors_out, &rerouted, fn));
	TD_TRY(leaves_collect(&L, d, p.part, p.n, fn));
	arr = td__calloc(L.n, sizeof(*arr));
	if (!arr) {
		leaves_release(&L);
		return td__error_nomem(L.n * sizeof(*arr));
	}
	for (i = 0; i < L.n; i++) {
		if (L.owned[i]) {
			arr[i] = L.t[i]; /* moved: the list takes the copy */
			L.owned[i] = false;
		} else {
			td_tensor_ref(&arr[i], &L.t[i]);
		}
	}
	*count_out = L.n;
	leaves_release(&L);
	*tensors_out = arr;
	return TD_OK;
}

/* The promoted dtype of the leaves. */
static td_dtype leaves_dtype(const leaves *L)
{
	td_dtype dt = L->t[0].dtype;
	size_t i;

	for (i = 1; i < L->n; i++)
		dt = td_dtype_promote(dt, L->t[i].dtype);
	return dt;
}

static int pad_into(const td_tensor *out, const leaves *L, int dim, bool left)
{
	size_t i;
	int k;

	for (i = 0; i < L->n; i++) {
		const td_tensor *t = &L->t[i];
		td_tensor view;

		select_borrowed(&view, out, dim, (int64_t)i);
		for (k = 0; k < t->ndim; k++) {
			if (left && t->shape[k] > 0)
				view.offset += (view.shape[k] - t->shape[k]) * view.strides[k];
			view.shape[k] = t->shape[k];
		}
		TD_TRY(td_tensor_copy(&view, t));
	}
	return TD_OK;
}

int td_lazy_get_padded(td_tensor *out, const td_dict *d, const char *key, td_scalar pad,
	unsigned flags)
{
	static const char fn[] = "td_lazy_get_padded";
	char name[512], s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
	int64_t shape[TD_MAX_DIMS], maxs[TD_MAX_DIMS];
	td_tensor tmp;
	td__kpath p;
	bool rerouted;
	leaves L;
	size_t i;
	int k, j, rc = TD_OK, nd, dim;

	TD_TRY(lazy_args(&p, &d, key, NULL, out, &rerouted, fn));
	if (flags & ~(unsigned)TD_PAD_LEFT)
		return td__error(TD_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	TD_TRY(td__scalar_check(pad, fn));
	TD_TRY(leaves_collect(&L, d, p.part, p.n, fn));
	dim = d->lazy->dim;
	nd = L.t[0].ndim;
	memcpy(maxs, L.t[0].shape, (size_t)nd * sizeof(int64_t));
	for (i = 1; rc == TD_OK && i < L.n; i++) {
		if (L.t[i].ndim != nd) {
			td__kpath_format(name, sizeof(name), p.part, p.n);
			rc = td__error(TD_ETYPE, "%s: '%s' has shape %s in child 0 and %s in child %zu: "
				"padding needs leaves of one ndim", fn, name,
				td__format_shape(s1, sizeof(s1), nd, L.t[0].shape),
				td__format_shape(s2, sizeof(s2), L.t[i].ndim, L.t[i].shape), i);
			break;
		}
		for (k = 0; k < nd; k++)
			if (L.t[i].shape[k] > maxs[k])
				maxs[k] = L.t[i].shape[k];
	}
	if (rc == TD_OK && nd >= TD_MAX_DIMS)
		rc = td__error(TD_EINVAL, "%s: the padded leaf would exceed %d dims", fn,
			TD_MAX_DIMS);
	if (rc == TD_OK) {
		for (k = 0, j = 0; k <= nd; k++)
			shape[k] = k == dim ? (int64_t)L.n : maxs[j++];
		rc = td_tensor_full(&tmp, leaves_dtype(&L), nd + 1, shape, pad);
	}
	if (rc == TD_OK) {
		rc = pad_into(&tmp, &L, dim, flags & TD_PAD_LEFT);
		if (rc == TD_OK)
			*out = tmp;
		else
			td_tensor_release(&tmp);
	}
	leaves_release(&L);
	return rc;
}

/* TD_ETYPE unless the leaves have >= 1 dim and agree beyond their first. */
static int check_jagged(const leaves *L, const td__kref *parts, size_t n, const char *fn)
{
	char key[512], s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
	const td_tensor *t0 = &L->t[0];
	size_t i;

	for (i = 0; i < L->n; i++) {
		const td_tensor *t = &L->t[i];
		if (t->ndim == 0) {
			td__kpath_format(key, sizeof(key), parts, n);
			return td__error(TD_ETYPE, "%s: '%s' is 0-d in child %zu: the nested form "
				"needs a first dim", fn, key, i);
		}
		if (t->ndim != t0->ndim || !td__shape_eq(t->shape + 1, t0->shape + 1, t0->ndim - 1)) {
			td__kpath_format(key, sizeof(key), parts, n);
			return td__error(TD_ETYPE, "%s: '%s' has shape %s in child 0 and %s in child "
				"%zu: the nested form allows the first dim only to differ", fn, key,
				td__format_shape(s1, sizeof(s1), t0->ndim, t0->shape),
				td__format_shape(s2, sizeof(s2), t->ndim, t->shape), i);
		}
	}
	return TD_OK;
}

int td_lazy_get_nested(td_tensor *values_out, td_tensor *offsets_out, const td_dict *d,
	const char *key)
{
	static const char fn[] = "td_lazy_get_nested";
	td_tensor values, offsets;
	int64_t count, *off;
	td__kpath p;
	bool rerouted;
	leaves L;
	size_t i;
	int rc;

	if (!offsets_out)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	TD_TRY(lazy_args(&p, &d, key, NULL, values_out, &rerouted, fn));
	if (d->lazy->dim != 0)
		return td__error(TD_ENOTSUP, "%s: the nested form needs stack dim 0 (this stack's "
			"is %d), as tensordict's get_nestedtensor()", fn, d->lazy->dim);
	TD_TRY(leaves_collect(&L, d, p.part, p.n, fn));
	rc = check_jagged(&L, p.part, p.n, fn);
	count = (int64_t)L.n + 1;
	if (rc == TD_OK)
		rc = td_tensor_empty(&offsets, TD_DTYPE_I64, 1, &count);
	if (rc == TD_OK) {
		off = td_tensor_data(&offsets);
		off[0] = 0;
		for (i = 0; i < L.n; i++)
			off[i + 1] = off[i] + L.t[i].shape[0];
		rc = td_tensor_cat(&values, L.t, L.n, 0);
		if (rc < 0)
			td_tensor_release(&offsets);
	}
	leaves_release(&L);
	if (rc < 0)
		return rc;
	*values_out = values;
	*offsets_out = offsets;
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Sub-dicts                                                                 */
/* ------------------------------------------------------------------------ */

/* Child i's sub-dict at the path: borrowed from a dense child, a new stack for a lazy one. */
static int child_sub(td_dict **out, bool *owned, const td_dict *c, size_t i,
	const td__kref *parts, size_t n, const char *fn)
{
	const td__entry *e;
	char key[512];

	if (c->lazy) {
		*owned = true;
		return td__lazy_get_dict(out, c, parts, n, NULL, fn);
	}
	*owned = false;
	e = td__dict_lookup_quiet(c, parts, n, NULL);
	if (!e) {
		/* A path into a lazy stack nested in the dense child. */
		size_t used;
		const td_dict *nested = td__dict_lazy_prefix(c, parts, n, &used);

		if (!nested)
			return not_found_in_child(parts, n, i, fn);
		*owned = true;
		return td__lazy_get_dict(out, nested, parts + used, n - used, NULL, fn);
	}
	if (e->value.kind != TD_VALUE_DICT) {
		td__kpath_format(key, sizeof(key), parts, n);
		return td__error(TD_ETYPE, "%s: '%s' is not a dict in child %zu", fn, key, i);
	}
	*out = e->value.u.dict;
	return TD_OK;
}

int td__lazy_get_dict(td_dict **out, const td_dict *d, const td__kref *parts, size_t n,
	const td_key *handle, const char *fn)
{
	char key[512], s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
	const td__lazy *z = d->lazy;
	const td__lz_schema *schema = td__lz_get(d);
	td_dict *s, *sub;
	bool owned;
	size_t i;
	int rc;

	if (schema) {
		const td__lz_key *k = td__lz_find_key(schema, parts, n, handle, NULL);

		if (k && k->sub) {
			/* Resolved once for all children: borrow the level's dicts. */
			const td_dict *s0 = k->sub->dicts[0];
			TD_TRY(td__lazy_alloc(&s, z->n, z->dim, s0->batch_ndim, s0->batch_shape, fn));
			memcpy(s->lazy->child, k->sub->dicts, z->n * sizeof(*s->lazy->child));
			*out = s;
			return TD_OK;
		}
	}
	if (z->n == 0)
		return not_found_in_child(parts, n, 0, fn);
	TD_TRY(child_sub(&sub, &owned, z->child[0], 0, parts, n, fn));
	rc = td__lazy_alloc(&s, z->n, z->dim, sub->batch_ndim, sub->batch_shape, fn);
	if (rc < 0) {
		if (owned)
			td_dict_free(sub);
		return rc;
	}
	for (i = 0;;) {
		s->lazy->child[i] = sub;
		s->lazy->own[i] = owned;
		if (owned)
			sub->parent = s;
		if (++i == z->n)
			break;
		rc = child_sub(&sub, &owned, z->child[i], i, parts, n, fn);
		if (rc < 0)
			goto fail;
		if (sub->batch_ndim == s->lazy->child[0]->batch_ndim &&
		    td__shape_eq(sub->batch_shape, s->lazy->child[0]->batch_shape, sub->batch_ndim))
			continue;
		td__kpath_format(key, sizeof(key), parts, n);
		rc = td__error(TD_ETYPE, "%s: '%s' has batch shape %s in child 0 and %s in child "
			"%zu: the sub-dicts cannot be stacked", fn, key,
			td__format_shape(s1, sizeof(s1), s->lazy->child[0]->batch_ndim,
				s->lazy->child[0]->batch_shape),
			td__format_shape(s2, sizeof(s2), sub->batch_ndim, sub->batch_shape), i);
		if (owned)
			td_dict_free(sub);
		goto fail;
	}
	*out = s;
	return TD_OK;
fail:
	td__lazy_destroy(s);
	return rc;
}

static int get_dict(td_dict **out, const td_dict *d, const char *dotted, const td_key *key,
	const char *fn)
{
	td__kpath p;

	const td__kref *parts;
	size_t n;

	if (out)
		*out = NULL;
	TD_TRY(lazy_key_args(&p, &parts, &n, &d, dotted, &key, out, fn));
	return td__lazy_get_dict(out, d, parts, n, key, fn);
}

int td_lazy_get_dict(td_dict **out, const td_dict *d, const char *key)
{
	return get_dict(out, d, key, NULL, "td_lazy_get_dict");
}

int td_lazy_get_dict_key(td_dict **out, const td_dict *d, const td_key *key)
{
	if (out)
		*out = NULL;
	if (!key)
		return td__error(TD_EINVAL, "td_lazy_get_dict_key: NULL key handle");
	return get_dict(out, d, NULL, key, "td_lazy_get_dict_key");
}

/* ------------------------------------------------------------------------ */
/* Writes through the stack                                                  */
/* ------------------------------------------------------------------------ */

static int check_new_key(const td_dict *d, const td__kref *parts, size_t n,
	const td_key *handle, const char *fn)
{
	char key[512];

	if (!d->locked || td__lazy_kind(d, parts, n, handle))
		return TD_OK;
	td__kpath_format(key, sizeof(key), parts, n);
	return td__error(TD_ELOCKED, "%s: cannot add '%s': the lazy stack is locked", fn, key);
}

/* Whether one of the n dicts is locked (a locked dict copies into its leaves instead). */
static bool any_locked(td_dict *const *dicts, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (dicts[i]->locked)
			return true;
	return false;
}

/* Whether the slices of t at `dim` start with the batch shape of dict p. */
static bool slice_fits(const td_tensor *t, int dim, const td_dict *p)
{
	int i, j = 0;

	for (i = 0; j < p->batch_ndim; i++) {
		if (i == dim)
			continue;
		if (t->shape[i] != p->batch_shape[j++])
			return false;
	}
	return true;
}

int td__lazy_set_tensor(td_dict *d, const td__kref *parts, size_t n, const td_key *handle,
	const td_tensor *t, const char *fn)
{
	const td__lazy *z = d->lazy;
	const td__lz_schema *schema;
	const td__lz_node *node = NULL;
	const td__lz_key *k = NULL;
	char key[512];
	size_t i;

	if (t->ndim < d->batch_ndim || !td__shape_eq(t->shape, d->batch_shape, d->batch_ndim)) {
		td__kpath_format(key, sizeof(key), parts, n);
		return td__dict_check_batch(d, t->ndim, t->shape, key, fn);
	}
	schema = td__lz_get(d);
	if (schema)
		k = td__lz_find_key(schema, parts, n, handle, &node);
	if (k && k->all_tensor && !any_locked(node->dicts, z->n)) {
		const td_dict *p0 = node->dicts[0];

		/*
		 * Every child holds a tensor there and may replace it: the dicts
		 * holding the leaf share one batch shape (the schema holds only
		 * such levels), so one check of the slices' shape serves all, and
		 * the n references to t's buffer are taken at once.
		 */
		if (t->ndim - 1 >= p0->batch_ndim && slice_fits(t, z->dim, p0)) {
			td__buffer_ref_n(t->buffer, z->n);
			for (i = 0; i < z->n; i++) {
				td_tensor *leaf = (td_tensor *)&k->ent[i]->value.u.tensor;
				td_buffer *old = leaf->buffer;

				select_borrowed(leaf, t, z->dim, (int64_t)i);
				td__buffer_unref(old);
			}
			return TD_OK;
		}
	}
	if (k && k->all_tensor) {
		/* Every child holds a tensor there: replace the entries directly. */
		for (i = 0; i < z->n; i++) {
			td_value v;

			v.kind = TD_VALUE_TENSOR;
			select_borrowed(&v.u.tensor, t, z->dim, (int64_t)i);
			TD_TRY(td__dict_set_entry(node->dicts[i], (td__entry *)k->ent[i],
				&parts[n - 1], &v, fn));
		}
		return TD_OK;
	}
	TD_TRY(check_new_key(d, parts, n, handle, fn));
	for (i = 0; i < z->n; i++) {
		td_dict *c = z->child[i];
		td_value v;

		v.kind = TD_VALUE_TENSOR;
		select_borrowed(&v.u.tensor, t, z->dim, (int64_t)i);
		if (c->lazy)
			TD_TRY(td__lazy_set_tensor(c, parts, n, handle, &v.u.tensor, fn));
		else
			TD_TRY(td__dict_set_value(c, parts, n, &v, fn));
	}
	return TD_OK;
}

int td__lazy_set_blob(td_dict *d, const td__kref *parts, size_t n, const td_value *v,
	const char *fn)
{
	const td__lazy *z = d->lazy;
	size_t i;

	TD_TRY(check_new_key(d, parts, n, NULL, fn));
	for (i = 0; i < z->n; i++) {
		td_dict *c = z->child[i];

		if (c->lazy)
			TD_TRY(td__lazy_set_blob(c, parts, n, v, fn));
		else
			TD_TRY(td__dict_set_value(c, parts, n, v, fn));
	}
	return TD_OK;
}

int td__lazy_set_inplace(td_dict *d, const td__kref *parts, size_t n, const td_key *handle,
	const td_tensor *t, const char *fn)
{
	const td__lazy *z = d->lazy;
	const td__lz_schema *schema;
	const td__lz_key *k;
	char key[512];
	size_t i;

	if (t->ndim < d->batch_ndim || !td__shape_eq(t->shape, d->batch_shape, d->batch_ndim)) {
		td__kpath_format(key, sizeof(key), parts, n);
		return td__dict_check_batch(d, t->ndim, t->shape, key, fn);
	}
	schema = td__lz_get(d);
	if (schema && (k = td__lz_find_key(schema, parts, n, handle, NULL)) != NULL &&
	    k->all_tensor) {
		bool src_host = td__buffer_host(t->buffer);

		for (i = 0; i < z->n; i++) {
			td_tensor *dst = (td_tensor *)&k->ent[i]->value.u.tensor;
			td_tensor view;

			select_borrowed(&view, t, z->dim, (int64_t)i);
			/*
			 * A stored leaf and a slice of the checked `t` are valid tensors:
			 * of td_tensor_copy()'s checks only memory and write access are
			 * left (~250 instructions a child through it).
			 */
			if (src_host && td__buffer_host(dst->buffer) &&
			    !(dst->buffer->flags & TD_BUFFER_READONLY)) {
				if (td__same_view(dst, &view))
					continue;
				if (!td__tensor_overlap(dst, &view)) {
					TD_TRY(td__copy_unchecked(dst, &view, fn));
					continue;
				}
			}
			TD_TRY(td_tensor_copy(dst, &view));
		}
		return TD_OK;
	}
	for (i = 0; i < z->n; i++) {
		td_dict *c = z->child[i];
		td_tensor view;
		td__entry *e;

		select_borrowed(&view, t, z->dim, (int64_t)i);
		if (c->lazy) {
			TD_TRY(td__lazy_set_inplace(c, parts, n, handle, &view, fn));
			continue;
		}
		e = td__dict_lookup_quiet(c, parts, n, NULL);
		if (!e)
			return not_found_in_child(parts, n, i, fn);
		if (e->value.kind != TD_VALUE_TENSOR) {
			td__kpath_format(key, sizeof(key), parts, n);
			return td__error(TD_ETYPE, "%s: '%s' is not a tensor in child %zu", fn, key, i);
		}
		TD_TRY(td_tensor_copy(&e->value.u.tensor, &view));
	}
	return TD_OK;
}

/* Check (do == false) or perform the deletion in every child. */
static int del_rec(td_dict *d, const td__kref *parts, size_t n, bool do_it, const char *fn)
{
	const td__lazy *z = d->lazy;
	char key[512];
	size_t i;

	if (!do_it && d->locked) {
		td__kpath_format(key, sizeof(key), parts, n);
		return td__error(TD_ELOCKED, "%s: cannot delete '%s': the lazy stack is locked", fn,
			key);
	}
	for (i = 0; i < z->n; i++) {
		td_dict *c = z->child[i], *parent;
		td__entry *e;

		if (c->lazy) {
			TD_TRY(del_rec(c, parts, n, do_it, fn));
			continue;
		}
		e = td__dict_lookup_quiet(c, parts, n, &parent);
		if (!e && do_it)
			continue; /* the same child twice: already deleted */
		if (!e)
			return not_found_in_child(parts, n, i, fn);
		if (do_it) {
			td__dict_remove_slot(parent, (uint32_t)(e - parent->entries));
		} else if (parent->locked) {
			td__kpath_format(key, sizeof(key), parts, n);
			return td__error(TD_ELOCKED, "%s: cannot delete '%s': child %zu is locked", fn,
				key, i);
		}
	}
	return TD_OK;
}

int td__lazy_del(td_dict *d, const td__kref *parts, size_t n, const char *fn)
{
	TD_TRY(del_rec(d, parts, n, false, fn));
	return del_rec(d, parts, n, true, fn);
}

/* ------------------------------------------------------------------------ */
/* Copies and dense forms                                                    */
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
		if (rc >= 0 && (c->parent || c->batch_ndim != z->child[i]->batch_ndim ||
		    !td__shape_eq(c->batch_shape, z->child[i]->batch_shape, c->batch_ndim))) {
			td_dict_free(c);
			rc = td__error(TD_ERROR, "%s: child %zu gave a result of another batch shape",
				name, i);
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

/* A non-tensor leaf that every child holds with the same bytes. */
static int common_blob(const td_value **out, const td_dict *d, const td__kref *k,
	const char *fn)
{
	const td__lazy *z = d->lazy;
	const td_value *first = NULL;
	size_t i;

	if (!z) {
		const td__entry *e = td__dict_find(d, k->s, k->len, k->hash);
		if (!e || (e->value.kind != TD_VALUE_STRING && e->value.kind != TD_VALUE_BYTES))
			return td__error(TD_ETYPE, "%s: '%.*s' is not a string or bytes in every child",
				fn, (int)k->len, k->s);
		*out = &e->value;
		return TD_OK;
	}
	for (i = 0; i < z->n; i++) {
		const td_value *v;

		TD_TRY(common_blob(&v, z->child[i], k, fn));
		if (first && (v->kind != first->kind || v->u.blob.length != first->u.blob.length ||
				     memcmp(v->u.blob.data, first->u.blob.data, v->u.blob.length) != 0))
			return td__error(TD_ETYPE, "%s: '%.*s' differs between the children: a dense "
				"dict holds one non-tensor value per key", fn, (int)k->len, k->s);
		if (!first)
			first = v;
	}
	if (!first)
		return td__error(TD_ENOTFOUND, "%s: '%.*s': the stack has no children", fn,
			(int)k->len, k->s);
	*out = first;
	return TD_OK;
}

static int densify_value(td_value *v, const td_dict *d, const td__kref *k, int kind,
	const char *fn);

static int densify(td_dict **out, const td_dict *d, const char *fn)
{
	const td_dict *src = td__lazy_key_source(d);
	td_dict *nd;
	uint32_t i;

	TD_TRY(td__dict_alloc(&nd, d->batch_ndim, d->batch_shape, src ? src->count : 0, fn));
	for (i = 0; src && i < src->used; i++) {
		const td__entry *e = &src->entries[i];
		td__kref k;
		td_value v;
		int kind, rc;

		if (!td__entry_live(e))
			continue;
		k = td__entry_kref(e);
		kind = td__lazy_kind(d, &k, 1, NULL);
		if (!kind)
			continue;
		rc = densify_value(&v, d, &k, kind, fn);
		if (rc == TD_OK) {
			rc = td__dict_append(nd, &k, &v, fn);
			if (rc < 0)
				td__value_release(&v);
			else if (v.kind == TD_VALUE_DICT)
				v.u.dict->parent = nd;
		}
		if (rc < 0) {
			td_dict_free(nd);
			return rc;
		}
	}
	*out = nd;
	return TD_OK;
}

/* The dense value of the stack key `k` (one component) with its own references. */
static int densify_value(td_value *v, const td_dict *d, const td__kref *k, int kind,
	const char *fn)
{
	const td_value *blob;
	td_dict *sub;
	int rc;

	v->kind = (td_value_kind)kind;
	if (kind == TD_VALUE_TENSOR)
		return td__lazy_get_tensor(&v->u.tensor, d, k, 1, fn);
	if (kind == TD_VALUE_DICT) {
		TD_TRY(td__lazy_get_dict(&sub, d, k, 1, NULL, fn));
		rc = densify(&v->u.dict, sub, fn);
		td_dict_free(sub);
		return rc;
	}
	TD_TRY(common_blob(&blob, d, k, fn));
	*v = *blob;
	td_buffer_ref(v->u.blob.buffer);
	return TD_OK;
}

int td_lazy_densify(td_dict **out, const td_dict *d)
{
	static const char fn[] = "td_lazy_densify";

	if (out)
		*out = NULL;
	if (!out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	if (!d->lazy)
		return td__error(TD_EINVAL, "%s: the dict is not a lazy stack", fn);
	return densify(out, d, fn);
}

int td_lazy_maybe_dense_stack(td_dict **out, const td_dict *const *dicts, size_t n, int dim)
{
	static const char fn[] = "td_lazy_maybe_dense_stack";
	td_dict **copies;
	bool lazy = false;
	size_t i, made;
	int rc;

	if (out)
		*out = NULL;
	if (!out || !dicts)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	if (n == 0)
		return td__error(TD_EINVAL, "%s: no dicts to stack", fn);
	for (i = 0; i < n; i++) {
		if (!dicts[i])
			return td__error(TD_EINVAL, "%s: dict %zu is NULL", fn, i);
		lazy = lazy || dicts[i]->lazy;
	}
	if (!lazy) {
		rc = td_dict_stack(out, dicts, n, dim);
		/* TD_ENOTSUP: a lazy stack nested in an input, which stacks lazily. */
		if (rc != TD_ETYPE && rc != TD_ENOTSUP)
			return rc;
	}
	/* Keys or leaf shapes differ (or an input is lazy): stack copies lazily. */
	copies = td__calloc(n, sizeof(*copies));
	if (!copies)
		return td__error_nomem(n * sizeof(*copies));
	rc = TD_OK;
	for (made = 0; made < n && rc == TD_OK; made++)
		rc = td_dict_copy(&copies[made], dicts[made]);
	if (rc == TD_OK)
		rc = td_lazy_stack(out, copies, n, dim, TD_LAZY_TAKE);
	if (rc < 0) {
		for (i = 0; i < made; i++)
			td_dict_free(copies[i]);
	} else {
		td_error_clear();
	}
	td__free(copies);
	return rc;
}
