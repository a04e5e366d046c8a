/* SPDX-License-Identifier: MIT */
/*
 * lazy_set.c - writes through a lazy stack into its children: a tensor
 * sliced along the stack dim (plain and in place), an array of strings
 * cut the same way, a string or bytes stored in every child, and
 * deletions, checked in every child first.
 */
#include "td_internal.h"
#include "dict_impl.h"
#include "lazy_impl.h"
#include "buffer_impl.h"

/* ------------------------------------------------------------------------ */
/* Writes through the stack                                                  */
/* ------------------------------------------------------------------------ */

static int check_new_key(const td_dict *d, const td__kref *parts, size_t n, const td_key *handle,
	const char *fn)
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
		if (td_tensor_shape(t)[i] != p->batch_shape[j++])
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

	if (t->ndim < d->batch_ndim ||
		!td__shape_eq(td_tensor_shape(t), d->batch_shape, d->batch_ndim)) {
		td__kpath_format(key, sizeof(key), parts, n);
		return td__dict_check_batch(d, t->ndim, td_tensor_shape(t), key, fn);
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
		if (t->ndim - 1 >= p0->batch_ndim && !td__dims_ext(t->ndim - 1) &&
			slice_fits(t, z->dim, p0)) {
			/*
			 * Slices with inline dims: nothing below can fail. They
			 * differ only in their offset: the first is made once and
			 * copied into every leaf whole.
			 */
			const int64_t stride = td_tensor_strides(t)[z->dim];
			const size_t m = z->n;
			const td__entry *const *ent = k->ent;
			td_tensor view;

			(void)td__lz_select_borrowed(&view, t, z->dim, 0, fn);
			td__buffer_ref_n(t->buffer, m);
			for (i = 0; i < m; i++) {
				td_tensor *leaf = (td_tensor *)&ent[i]->value.tensor;
				td_buffer *old = leaf->buffer;

				td__dims_unref(leaf); /* t holds its own dims: it keeps them */
				td__tensor_copy_view(leaf, &view);
				leaf->offset = view.offset + (int64_t)i * stride;
				td__buffer_unref(old);
			}
			return TD_OK;
		}
	}
	if (k && k->all_tensor) {
		/* Every child holds a tensor there: replace the entries directly. */
		for (i = 0; i < z->n; i++) {
			td_value v;
			int rc;

			v.kind = TD_VALUE_TENSOR;
			TD_TRY(td__lz_select_borrowed(&v.tensor, t, z->dim, (int64_t)i, fn));
			rc = td__dict_set_entry(node->dicts[i], (td__entry *)k->ent[i], &parts[n - 1], &v, fn);
			td__dims_unref(&v.tensor);
			TD_TRY(rc);
		}
		return TD_OK;
	}
	TD_TRY(check_new_key(d, parts, n, handle, fn));
	for (i = 0; i < z->n; i++) {
		td_dict *c = z->child[i];
		td_value v;
		int rc;

		v.kind = TD_VALUE_TENSOR;
		TD_TRY(td__lz_select_borrowed(&v.tensor, t, z->dim, (int64_t)i, fn));
		if (c->lazy)
			rc = td__lazy_set_tensor(c, parts, n, handle, &v.tensor, fn);
		else
			rc = td__dict_set_value(c, parts, n, &v, fn);
		td__dims_unref(&v.tensor);
		TD_TRY(rc);
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

/* Copy `view` into the stored leaf `dst` (a leaf every child holds). */
static inline __attribute__((always_inline)) int copy_into_leaf(td_tensor *dst,
	const td_tensor *view, bool src_host, const char *fn)
{
	/*
	 * A stored leaf and a slice of the checked `t` are valid tensors: of
	 * td_tensor_copy()'s checks only memory and write access are left
	 * (~250 instructions a child through it).
	 */
	if (src_host && td__buffer_host(dst->buffer) && !(dst->buffer->flags & TD_BUFFER_READONLY)) {
		if (td__same_view(dst, view))
			return TD_OK;
		if (!td__tensor_overlap(dst, view))
			return td__copy_unchecked(dst, view, fn);
	}
	return td_tensor_copy(dst, view);
}

/* set(..., inplace=True) of `view` (child i's slice) in child c. */
static int set_inplace_child(td_dict *c, size_t i, const td__kref *parts, size_t n,
	const td_key *handle, const td_tensor *view, const char *fn)
{
	char key[512];
	td__entry *e;

	if (c->lazy)
		return td__lazy_set_inplace(c, parts, n, handle, view, fn);
	e = td__dict_lookup_quiet(c, parts, n, NULL);
	if (!e)
		return td__lz_not_found(parts, n, i, fn);
	if (e->value.kind != TD_VALUE_TENSOR) {
		td__kpath_format(key, sizeof(key), parts, n);
		return td__error(TD_ETYPE, "%s: '%s' is not a tensor in child %zu", fn, key, i);
	}
	return td_tensor_copy(&e->value.tensor, view);
}

int td__lazy_set_inplace(td_dict *d, const td__kref *parts, size_t n, const td_key *handle,
	const td_tensor *t, const char *fn)
{
	const td__lazy *z = d->lazy;
	const td__lz_schema *schema;
	const td__lz_key *k;
	char key[512];
	size_t i;

	if (t->ndim < d->batch_ndim ||
		!td__shape_eq(td_tensor_shape(t), d->batch_shape, d->batch_ndim)) {
		td__kpath_format(key, sizeof(key), parts, n);
		return td__dict_check_batch(d, t->ndim, td_tensor_shape(t), key, fn);
	}
	schema = td__lz_get(d);
	if (schema && (k = td__lz_find_key(schema, parts, n, handle, NULL)) != NULL && k->all_tensor) {
		const bool src_host = td__buffer_host(t->buffer);
		const int64_t stride = td_tensor_strides(t)[z->dim];
		const size_t m = z->n;
		const td__entry *const *ent = k->ent;
		td_tensor view;
		int64_t offset;
		int rc = TD_OK;

		/* The slices differ only in their offset: one view, moved along. */
		TD_TRY(td__lz_select_borrowed(&view, t, z->dim, 0, fn));
		offset = view.offset;
		for (i = 0; i < m && rc == TD_OK; i++) {
			view.offset = offset + (int64_t)i * stride;
			rc = copy_into_leaf((td_tensor *)&ent[i]->value.tensor, &view, src_host, fn);
		}
		td__dims_unref(&view);
		return rc;
	}
	for (i = 0; i < z->n; i++) {
		td_tensor view;
		int rc;

		TD_TRY(td__lz_select_borrowed(&view, t, z->dim, (int64_t)i, fn));
		rc = set_inplace_child(z->child[i], i, parts, n, handle, &view, fn);
		td__dims_unref(&view);
		TD_TRY(rc);
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
		return td__error(TD_ELOCKED, "%s: cannot delete '%s': the lazy stack is locked", fn, key);
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
			return td__lz_not_found(parts, n, i, fn);
		if (do_it) {
			td__dict_remove_slot(parent, (uint32_t)(e - parent->entries));
		} else if (parent->locked) {
			td__kpath_format(key, sizeof(key), parts, n);
			return td__error(TD_ELOCKED, "%s: cannot delete '%s': child %zu is locked", fn, key, i);
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
/* Any value (td_dict_set_*() on a stack)                                    */
/* ------------------------------------------------------------------------ */

static int select_leaf(td_tensor *out, const td_tensor *in, void *ctx)
{
	const int64_t *at = ctx; /* { dim, index } */

	return td_tensor_select(out, in, (int)at[0], at[1]);
}

/*
 * An array of strings stored in a lazy stack: each child gets its part, the
 * array indexed at the stack dim (a single string where no dim is left), as
 * a tensor is sliced into the children.
 */
static int lazy_set_strings(td_dict *d, const td__kref *parts, size_t n, const td_value *v,
	const char *fn)
{
	const td__lazy *z = d->lazy;
	const td_strings *s = v->strings;
	char key[512];
	int64_t at[2];
	size_t i;

	if (s->ndim < d->batch_ndim || !td__shape_eq(s->shape, d->batch_shape, d->batch_ndim)) {
		td__kpath_format(key, sizeof(key), parts, n);
		return td__dict_check_batch(d, s->ndim, s->shape, key, fn);
	}
	if (d->locked && !td__lazy_kind(d, parts, n, NULL)) {
		td__kpath_format(key, sizeof(key), parts, n);
		return td__error(TD_ELOCKED, "%s: cannot add '%s': the lazy stack is locked", fn, key);
	}
	at[0] = z->dim;
	for (i = 0; i < z->n; i++) {
		td_dict *c = z->child[i];
		td_value part;
		int rc;

		at[1] = (int64_t)i;
		TD_TRY(td__strings_transform(&part, v, select_leaf, at, fn));
		if (c->lazy && part.kind == TD_VALUE_STRINGS)
			rc = lazy_set_strings(c, parts, n, &part, fn);
		else if (c->lazy)
			rc = td__lazy_set_blob(c, parts, n, &part, fn);
		else
			rc = td__dict_set_value(c, parts, n, &part, fn);
		td__value_release(&part);
		TD_TRY(rc);
	}
	return TD_OK;
}

int td__lazy_set_value(td_dict *d, const td__kref *parts, size_t n, const td_key *handle,
	const td_value *v, const char *fn)
{
	if (v->kind == TD_VALUE_TENSOR)
		return td__lazy_set_tensor(d, parts, n, handle, &v->tensor, fn);
	if (v->kind == TD_VALUE_DICT)
		return td__error(TD_ENOTSUP,
			"%s: a dict cannot be stored in a lazy stack; "
			"store its leaves",
			fn);
	if (v->kind == TD_VALUE_STRINGS)
		return lazy_set_strings(d, parts, n, v, fn);
	return td__lazy_set_blob(d, parts, n, v, fn);
}
