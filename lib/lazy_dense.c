/* SPDX-License-Identifier: MIT */
/*
 * lazy_dense.c - the dense forms of lazy stacks: td_lazy_densify() (every
 * leaf stacked, every sub-dict densified, non-tensor values that agree),
 * td_lazy_maybe_dense_stack(), and update with a lazy stack on either side
 * (a stack on the right is read in its dense form; one on the left has each
 * child updated with its piece of the right side).
 */
#include "td_internal.h"
#include "dict_impl.h"
#include "lazy_impl.h"

/* A non-tensor leaf that every child holds with the same bytes. */
static int common_blob(const td_value **out, const td_dict *d, const td__kref *k, const char *fn)
{
	const td__lazy *z = d->lazy;
	const td_value *first = NULL;
	size_t i;

	if (!z) {
		const td__entry *e = td__dict_find(d, k->s, k->len, k->hash);
		if (!e || (e->value.kind != TD_VALUE_STRING && e->value.kind != TD_VALUE_BYTES))
			return td__error(TD_ETYPE, "%s: '%.*s' is not a string or bytes in every child", fn,
				(int)k->len, k->s);
		*out = &e->value;
		return TD_OK;
	}
	for (i = 0; i < z->n; i++) {
		const td_value *v;

		TD_TRY(common_blob(&v, z->child[i], k, fn));
		if (first &&
			(v->kind != first->kind || v->blob.length != first->blob.length ||
				memcmp(v->blob.data, first->blob.data, v->blob.length) != 0))
			return td__error(TD_ETYPE,
				"%s: '%.*s' differs between the children: a dense "
				"dict holds one non-tensor value per key",
				fn, (int)k->len, k->s);
		if (!first)
			first = v;
	}
	if (!first)
		return td__error(TD_ENOTFOUND, "%s: '%.*s': the stack has no children", fn, (int)k->len,
			k->s);
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
				v.dict->parent = nd;
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
static int densify_value(td_value *v, const td_dict *d, const td__kref *k, int kind, const char *fn)
{
	const td_value *blob;
	td_dict *sub;
	int rc;

	v->kind = (td_value_kind)kind;
	if (kind == TD_VALUE_TENSOR)
		return td__lazy_get_tensor(&v->tensor, d, k, 1, fn);
	if (kind == TD_VALUE_DICT) {
		TD_TRY(td__lazy_get_dict(&sub, d, k, 1, NULL, fn));
		rc = densify(&v->dict, sub, fn);
		td_dict_free(sub);
		return rc;
	}
	TD_TRY(common_blob(&blob, d, k, fn));
	*v = *blob;
	td_buffer_ref(v->blob.buffer);
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

int td__lazy_dense_form(td_dict **tmp, const td_dict **d)
{
	*tmp = NULL;
	if (!(*d)->lazy)
		return TD_OK;
	TD_TRY(td_lazy_densify(tmp, *d));
	*d = *tmp;
	return TD_OK;
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

/* ------------------------------------------------------------------------ */
/* Update                                                                    */
/* ------------------------------------------------------------------------ */

/* Which piece of the right side of an update goes to child `i` of `stack`. */
typedef struct piece_ctx {
	const td_dict *stack;
	int64_t i;
	const char *fn;
} piece_ctx;

static int select_piece(td_tensor *out, const td_tensor *in, void *ctx)
{
	const piece_ctx *p = ctx;
	const td_dict *d = p->stack;

	if (in->ndim < d->batch_ndim ||
		!td__shape_eq(td_tensor_shape(in), d->batch_shape, d->batch_ndim))
		return td__error(TD_ETYPE,
			"%s: a value of %d dims does not start with the lazy "
			"stack's batch shape (%d dims)",
			p->fn, in->ndim, d->batch_ndim);
	return td__view_select(out, in, d->lazy->dim, p->i, p->fn);
}

/*
 * `o` cut into the n pieces that go to the children of the lazy stack d:
 * piece i holds o's structure at the children's batch shape, each leaf
 * its view at index i of the stack dim (every leaf must start with d's
 * batch shape: TD_ETYPE). o's own batch shape may be shorter than d's, as
 * for a dense update. The pieces share o's buffers.
 */
static int stack_pieces(td_dict ***pieces, size_t *np, const td_dict *d, const td_dict *o,
	const char *fn)
{
	const td__lazy *z = d->lazy;
	int64_t cshape[TD_MAX_DIMS];
	td_dict **arr;
	piece_ctx p;
	size_t i;
	int k, j, rc = TD_OK;

	for (k = 0, j = 0; k < d->batch_ndim; k++)
		if (k != z->dim)
			cshape[j++] = d->batch_shape[k];
	arr = td__calloc(z->n, sizeof(*arr));
	if (!arr)
		return td__error_nomem(z->n * sizeof(*arr));
	p.stack = d;
	p.fn = fn;
	for (i = 0; rc == TD_OK && i < z->n; i++) {
		p.i = (int64_t)i;
		rc = td__dict_transform(&arr[i], o, j, cshape, select_piece, &p, NULL, fn);
	}
	if (rc < 0) {
		td_dict_array_free(arr, z->n);
		return rc;
	}
	*pieces = arr;
	*np = z->n;
	return TD_OK;
}

int td__lazy_update(td_dict *d, const td_dict *o, bool inplace, bool write, const char *fn)
{
	td_dict *dense, **pieces = NULL;
	size_t np = 0, i;
	int rc;

	TD_TRY(td__lazy_dense_form(&dense, &o));
	if (!d->lazy) {
		rc = td__dict_update_any(d, o, inplace, write, fn);
	} else {
		rc = stack_pieces(&pieces, &np, d, o, fn);
		for (i = 0; rc == TD_OK && i < np; i++)
			rc = td__dict_update_any(d->lazy->child[i], pieces[i], inplace, write, fn);
		td_dict_array_free(pieces, np);
	}
	td_dict_free(dense);
	return rc;
}
