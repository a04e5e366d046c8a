/* SPDX-License-Identifier: MIT */
/*
 * lazy_get.c - reading a lazy stack: a leaf stacked (straight from the
 * cached schema's entries when it can), into a caller's tensor, as a list,
 * padded or in the nested (jagged) form, and sub-dicts as lazy stacks of
 * the children's sub-dicts. The public td_lazy_get_*() functions also take
 * a dense dict with a path that leads into a lazy stack nested in it. Each
 * comes in the two key forms: the dotted one and its `_key` twin, thin
 * entry points over one implementation that resolves either form and
 * reroutes a path into a nested stack once (lazy_args()).
 */
#include "td_internal.h"
#include "dict_impl.h"
#include "lazy_impl.h"
#include "buffer_impl.h"

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
		return td__lz_not_found(parts, n, 0, fn);
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
				rc = td__lz_not_found(parts, n, i, fn);
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
		td__tensor_copy_meta(&L->t[i], &e->value.tensor);
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
		if (t->ndim == t0->ndim && td__shape_eq(td_tensor_shape(t), td_tensor_shape(t0), t0->ndim))
			continue;
		td__kpath_format(key, sizeof(key), parts, n);
		return td__error(TD_ETYPE,
			"%s: '%s' is ragged (child 0 has shape %s, child %zu "
			"%s) and cannot be stacked: ask for a list (td_lazy_get_list), a padded "
			"tensor (td_lazy_get_padded) or the nested form (td_lazy_get_nested)",
			fn, key, td__format_shape(s1, sizeof(s1), t0->ndim, td_tensor_shape(t0)), i,
			td__format_shape(s2, sizeof(s2), t->ndim, td_tensor_shape(t)));
	}
	return TD_OK;
}

int td__lz_get_tensor(td_tensor *out, const td_dict *d, const td__lz_key *k, const td__kref *parts,
	size_t n, td_buffer **spare, const char *fn)
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
	t0 = &ent[0]->value.tensor;
	nd = t0->ndim;
	host = t0->buffer;
	/* The stacked leaf has its dims inline (td__lz_stack()); more go the general way. */
	if (!td__buffer_host(host) || td__dims_ext(nd + 1))
		return td__lazy_get_tensor(out, d, parts, n, fn);
	if (even)
		step = ent[1]->value.tensor.offset - t0->offset;
	prev = t0->offset;
	for (i = 1; i < count; i++) {
		const td_tensor *x = &ent[i]->value.tensor;
		int64_t diff = (int64_t)(x->dtype ^ t0->dtype) | (x->ndim ^ nd), sdiff = 0;

		if (diff)
			return td__lazy_get_tensor(out, d, parts, n, fn);
		if (nd == 1) { /* the common leaf of a stack of chains: no loop */
			diff |= td__ishape(x)[0] ^ td__ishape(t0)[0];
			sdiff |= td__istrides(x)[0] ^ td__istrides(t0)[0];
		} else {
			for (j = 0; j < nd; j++) {
				diff |= td__ishape(x)[j] ^ td__ishape(t0)[j];
				sdiff |= td__istrides(x)[j] ^ td__istrides(t0)[j];
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

/* TD_EINVAL for a NULL key handle passed to `fn`. */
static int null_handle(const char *fn)
{
	return td__error(TD_EINVAL, "%s: NULL key handle", fn);
}

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
		return td__error(TD_EINVAL,
			"%s: the dict is not a lazy stack, nor does the key lead "
			"into one nested in it",
			fn);
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
	static const char fn[] = "td_lazy_get_tensor_key";

	if (!key)
		return null_handle(fn);
	return get_tensor(out, d, NULL, key, fn);
}

static int get_tensor_into(td_tensor *dst, const td_dict *d, const char *dotted, const td_key *key,
	const char *fn)
{
	char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
	int64_t shape[TD_MAX_DIMS];
	td__kpath p;
	bool rerouted;
	leaves L;
	size_t i;
	int k, j, rc, dim;

	TD_TRY(lazy_args(&p, &d, dotted, key, dst, &rerouted, fn));
	TD_TRY(td__tensor_check(dst, fn, "the destination"));
	TD_TRY(leaves_collect(&L, d, p.part, p.n, fn));
	dim = d->lazy->dim;
	rc = leaves_check_same(&L, p.part, p.n, fn);
	if (rc == TD_OK && L.t[0].ndim >= TD_MAX_DIMS)
		rc = td__error(TD_EINVAL, "%s: the stacked leaf would exceed %d dims", fn, TD_MAX_DIMS);
	if (rc == TD_OK) {
		for (k = 0, j = 0; k <= L.t[0].ndim; k++)
			shape[k] = k == dim ? (int64_t)L.n : td_tensor_shape(&L.t[0])[j++];
		if (dst->ndim != L.t[0].ndim + 1 || !td__shape_eq(td_tensor_shape(dst), shape, dst->ndim))
			rc = td__error(TD_ETYPE,
				"%s: the destination has shape %s, the stacked leaf "
				"%s",
				fn, td__format_shape(s1, sizeof(s1), dst->ndim, td_tensor_shape(dst)),
				td__format_shape(s2, sizeof(s2), L.t[0].ndim + 1, shape));
	}
	for (i = 0; rc == TD_OK && i < L.n; i++) {
		td_tensor view;

		rc = td__lz_select_borrowed(&view, dst, dim, (int64_t)i, fn);
		if (rc == TD_OK) {
			rc = td_tensor_copy(&view, &L.t[i]);
			td__dims_unref(&view);
		}
	}
	leaves_release(&L);
	return rc;
}

int td_lazy_get_tensor_into(td_tensor *dst, const td_dict *d, const char *key)
{
	return get_tensor_into(dst, d, key, NULL, "td_lazy_get_tensor_into");
}

int td_lazy_get_tensor_into_key(td_tensor *dst, const td_dict *d, const td_key *key)
{
	static const char fn[] = "td_lazy_get_tensor_into_key";

	if (!key)
		return null_handle(fn);
	return get_tensor_into(dst, d, NULL, key, fn);
}

static int get_list(td_tensor **tensors_out, size_t *count_out, const td_dict *d,
	const char *dotted, const td_key *key, const char *fn)
{
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
	TD_TRY(lazy_args(&p, &d, dotted, key, tensors_out, &rerouted, fn));
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

int td_lazy_get_list(td_tensor **tensors_out, size_t *count_out, const td_dict *d, const char *key)
{
	return get_list(tensors_out, count_out, d, key, NULL, "td_lazy_get_list");
}

int td_lazy_get_list_key(td_tensor **tensors_out, size_t *count_out, const td_dict *d,
	const td_key *key)
{
	static const char fn[] = "td_lazy_get_list_key";

	if (tensors_out)
		*tensors_out = NULL;
	if (count_out)
		*count_out = 0;
	if (!key)
		return null_handle(fn);
	return get_list(tensors_out, count_out, d, NULL, key, fn);
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

static int pad_into(const td_tensor *out, const leaves *L, int dim, bool left, const char *fn)
{
	size_t i;
	int k, rc;

	for (i = 0; i < L->n; i++) {
		const td_tensor *t = &L->t[i];
		td_tensor view;

		TD_TRY(td__lz_select_borrowed(&view, out, dim, (int64_t)i, fn));
		for (k = 0; k < t->ndim; k++) {
			if (left && td_tensor_shape(t)[k] > 0)
				view.offset += (td_tensor_shape(&view)[k] - td_tensor_shape(t)[k]) *
					td_tensor_strides(&view)[k];
			td__shape_w(&view)[k] = td_tensor_shape(t)[k];
		}
		rc = td_tensor_copy(&view, t);
		td__dims_unref(&view);
		TD_TRY(rc);
	}
	return TD_OK;
}

static int get_padded(td_tensor *out, const td_dict *d, const char *dotted, const td_key *key,
	td_scalar pad, unsigned flags, const char *fn)
{
	char name[512], s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
	int64_t shape[TD_MAX_DIMS], maxs[TD_MAX_DIMS];
	td_tensor tmp;
	td__kpath p;
	bool rerouted;
	leaves L;
	size_t i;
	int k, j, rc = TD_OK, nd, dim;

	TD_TRY(lazy_args(&p, &d, dotted, key, out, &rerouted, fn));
	if (flags & ~(unsigned)TD_PAD_LEFT)
		return td__error(TD_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	TD_TRY(td__scalar_check(pad, fn));
	TD_TRY(leaves_collect(&L, d, p.part, p.n, fn));
	dim = d->lazy->dim;
	nd = L.t[0].ndim;
	memcpy(maxs, td_tensor_shape(&L.t[0]), (size_t)nd * sizeof(int64_t));
	for (i = 1; rc == TD_OK && i < L.n; i++) {
		if (L.t[i].ndim != nd) {
			td__kpath_format(name, sizeof(name), p.part, p.n);
			rc = td__error(TD_ETYPE,
				"%s: '%s' has shape %s in child 0 and %s in child %zu: "
				"padding needs leaves of one ndim",
				fn, name, td__format_shape(s1, sizeof(s1), nd, td_tensor_shape(&L.t[0])),
				td__format_shape(s2, sizeof(s2), L.t[i].ndim, td_tensor_shape(&L.t[i])), i);
			break;
		}
		for (k = 0; k < nd; k++)
			if (td_tensor_shape(&L.t[i])[k] > maxs[k])
				maxs[k] = td_tensor_shape(&L.t[i])[k];
	}
	if (rc == TD_OK && nd >= TD_MAX_DIMS)
		rc = td__error(TD_EINVAL, "%s: the padded leaf would exceed %d dims", fn, TD_MAX_DIMS);
	if (rc == TD_OK) {
		for (k = 0, j = 0; k <= nd; k++)
			shape[k] = k == dim ? (int64_t)L.n : maxs[j++];
		rc = td_tensor_full(&tmp, leaves_dtype(&L), nd + 1, shape, pad);
	}
	if (rc == TD_OK) {
		rc = pad_into(&tmp, &L, dim, flags & TD_PAD_LEFT, fn);
		if (rc == TD_OK)
			*out = tmp;
		else
			td_tensor_release(&tmp);
	}
	leaves_release(&L);
	return rc;
}

int td_lazy_get_padded(td_tensor *out, const td_dict *d, const char *key, td_scalar pad,
	unsigned flags)
{
	return get_padded(out, d, key, NULL, pad, flags, "td_lazy_get_padded");
}

int td_lazy_get_padded_key(td_tensor *out, const td_dict *d, const td_key *key, td_scalar pad,
	unsigned flags)
{
	static const char fn[] = "td_lazy_get_padded_key";

	if (!key)
		return null_handle(fn);
	return get_padded(out, d, NULL, key, pad, flags, fn);
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
			return td__error(TD_ETYPE,
				"%s: '%s' is 0-d in child %zu: the nested form "
				"needs a first dim",
				fn, key, i);
		}
		if (t->ndim != t0->ndim ||
			!td__shape_eq(td_tensor_shape(t) + 1, td_tensor_shape(t0) + 1, t0->ndim - 1)) {
			td__kpath_format(key, sizeof(key), parts, n);
			return td__error(TD_ETYPE,
				"%s: '%s' has shape %s in child 0 and %s in child "
				"%zu: the nested form allows the first dim only to differ",
				fn, key, td__format_shape(s1, sizeof(s1), t0->ndim, td_tensor_shape(t0)),
				td__format_shape(s2, sizeof(s2), t->ndim, td_tensor_shape(t)), i);
		}
	}
	return TD_OK;
}

static int get_nested(td_tensor *values_out, td_tensor *offsets_out, const td_dict *d,
	const char *dotted, const td_key *key, const char *fn)
{
	td_tensor values, offsets;
	int64_t count, *off;
	td__kpath p;
	bool rerouted;
	leaves L;
	size_t i;
	int rc;

	if (!offsets_out)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	TD_TRY(lazy_args(&p, &d, dotted, key, values_out, &rerouted, fn));
	if (d->lazy->dim != 0)
		return td__error(TD_ENOTSUP,
			"%s: the nested form needs stack dim 0 (this stack's "
			"is %d), as tensordict's get_nestedtensor()",
			fn, d->lazy->dim);
	TD_TRY(leaves_collect(&L, d, p.part, p.n, fn));
	rc = check_jagged(&L, p.part, p.n, fn);
	count = (int64_t)L.n + 1;
	if (rc == TD_OK)
		rc = td_tensor_empty(&offsets, TD_DTYPE_I64, 1, &count);
	if (rc == TD_OK) {
		off = td_tensor_data(&offsets);
		off[0] = 0;
		for (i = 0; i < L.n; i++)
			off[i + 1] = off[i] + td_tensor_shape(&L.t[i])[0];
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

int td_lazy_get_nested(td_tensor *values_out, td_tensor *offsets_out, const td_dict *d,
	const char *key)
{
	return get_nested(values_out, offsets_out, d, key, NULL, "td_lazy_get_nested");
}

int td_lazy_get_nested_key(td_tensor *values_out, td_tensor *offsets_out, const td_dict *d,
	const td_key *key)
{
	static const char fn[] = "td_lazy_get_nested_key";

	if (!key)
		return null_handle(fn);
	return get_nested(values_out, offsets_out, d, NULL, key, fn);
}

/* ------------------------------------------------------------------------ */
/* Sub-dicts                                                                 */
/* ------------------------------------------------------------------------ */

/* Child i's sub-dict at the path: borrowed from a dense child, a new stack for a lazy one. */
static int child_sub(td_dict **out, bool *owned, const td_dict *c, size_t i, const td__kref *parts,
	size_t n, const char *fn)
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
			return td__lz_not_found(parts, n, i, fn);
		*owned = true;
		return td__lazy_get_dict(out, nested, parts + used, n - used, NULL, fn);
	}
	if (e->value.kind != TD_VALUE_DICT) {
		td__kpath_format(key, sizeof(key), parts, n);
		return td__error(TD_ETYPE, "%s: '%s' is not a dict in child %zu", fn, key, i);
	}
	*out = e->value.dict;
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
		return td__lz_not_found(parts, n, 0, fn);
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
		rc = td__error(TD_ETYPE,
			"%s: '%s' has batch shape %s in child 0 and %s in child "
			"%zu: the sub-dicts cannot be stacked",
			fn, key,
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
	static const char fn[] = "td_lazy_get_dict_key";

	if (out)
		*out = NULL;
	if (!key)
		return null_handle(fn);
	return get_dict(out, d, NULL, key, fn);
}
