/* SPDX-License-Identifier: MIT */
/*
 * tensor_index.c - `t[idx...]` with numpy/torch semantics: basic elements
 * (int, slice, range, new axis, ellipsis) give views, advanced elements
 * (position lists, masks, index tensors) gather into new tensors; the
 * matching scatters (index_put, index_fill); and the prepared expressions
 * td_dict uses to apply one expression to many leaves.
 *
 * An expression is applied in two stages, as torch does. The walk applies
 * the basic elements to a working view W and marks the W dims that advanced
 * elements index (a k-d bool mask marks k dims, a 0-d bool mask marks an
 * inserted size-1 dim). The index arrays are then broadcast to a shape B,
 * and the result has dims [A, B, C]: when the indexed W dims are adjacent,
 * A holds the unindexed W dims before them and C those after; otherwise A
 * is empty and C holds every unindexed dim. Integers are applied during the
 * walk, so an integer between advanced indices does not separate them.
 */
#include "td_internal.h"
#include "tensor_impl.h"

/* Room for the working view: input dims plus new axes and 0-d masks. */
#define W_MAX (2 * TD_MAX_DIMS)

/* The working view after the basic elements, with its indexed dims marked. */
typedef struct walk {
	int64_t offset; /* first element, in elements */
	int ndim;
	int nadv; /* dims indexed by advanced elements */
	int64_t shape[W_MAX];
	int64_t strides[W_MAX]; /* elements */
	int elem[W_MAX];        /* advanced element indexing the dim, or -1 */
	int8_t comp[W_MAX];     /* which dim of a bool tensor mask it is */
	int8_t src[W_MAX];      /* input dim, -1 for an inserted dim */
} walk;

/* One index array: positions along one W dim. */
typedef struct adv {
	const char *data; /* first position */
	td_dtype dtype;   /* an integer dtype */
	int ndim;
	int wdim;     /* the W dim it indexes */
	int elem;     /* its expression element */
	int mask;     /* first dim of a mask: the mask's ndim (MASK: 1); else 0 */
	bool trusted; /* positions known to be in range (made from a mask) */
	int64_t shape[TD_MAX_DIMS];
	int64_t strides[TD_MAX_DIMS]; /* elements */
} adv;

/* Everything an advanced expression needs, resolved against one tensor. */
typedef struct plan {
	const walk *w;
	int nadv;
	int na, nb, nc;             /* the result's dims: [A, B, C] */
	int64_t shape[TD_MAX_DIMS]; /* the result's shape */
	int64_t astr[TD_MAX_DIMS];  /* W strides (elements) of the A dims */
	int64_t cstr[TD_MAX_DIMS];  /* W strides (elements) of the C dims */
	int64_t *pos;               /* owned: positions made from masks or copied indices */
	adv a[W_MAX];
} plan;

/* The position every 0-d mask and empty mask points at. */
static const int64_t zero_pos = 0;

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

/* Read a position of integer dtype `dt`; unsigned values past INT64_MAX clamp to it. */
static inline int64_t load_pos(const char *p, td_dtype dt)
{
	switch (dt) {
	case TD_DTYPE_I64: {
		int64_t v;
		memcpy(&v, p, sizeof(v));
		return v;
	}
	case TD_DTYPE_I32: {
		int32_t v;
		memcpy(&v, p, sizeof(v));
		return v;
	}
	case TD_DTYPE_I16: {
		int16_t v;
		memcpy(&v, p, sizeof(v));
		return v;
	}
	case TD_DTYPE_I8:
		return *(const int8_t *)p;
	case TD_DTYPE_U8:
		return *(const uint8_t *)p;
	case TD_DTYPE_U16: {
		uint16_t v;
		memcpy(&v, p, sizeof(v));
		return v;
	}
	case TD_DTYPE_U32: {
		uint32_t v;
		memcpy(&v, p, sizeof(v));
		return v;
	}
	default: {
		uint64_t v;
		memcpy(&v, p, sizeof(v));
		return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
	}
	}
}

/* Step the C-order multi-index `i` over `shape`, moving `*p` by byte strides. */
static inline bool odo_next(int ndim, const int64_t *shape, const int64_t *bstrides, int64_t *i,
	const char **p)
{
	int d;

	for (d = ndim - 1; d >= 0; d--) {
		if (++i[d] < shape[d]) {
			*p += bstrides[d];
			return true;
		}
		*p -= bstrides[d] * (shape[d] - 1);
		i[d] = 0;
	}
	return false;
}

static inline void copy_bytes(char *dst, const char *src, size_t n)
{
	switch (n) {
	case 1:
		*dst = *src;
		break;
	case 2:
		memcpy(dst, src, 2);
		break;
	case 4:
		memcpy(dst, src, 4);
		break;
	case 8:
		memcpy(dst, src, 8);
		break;
	case 16:
		memcpy(dst, src, 16);
		break;
	default:
		memcpy(dst, src, n);
		break;
	}
}

static bool is_bool_tensor(const td_index *x)
{
	return x->kind == TD_INDEX_TENSOR && x->tensor->dtype == TD_DTYPE_BOOL;
}

/* Number of true elements of a bool tensor. */
static int64_t tensor_count_true(const td_tensor *m)
{
	int64_t i[TD_MAX_DIMS] = { 0 }, n = 0;
	const char *p = td__tensor_ptr(m);

	if (td__numel(m->ndim, td_tensor_shape(m)) == 0)
		return 0;
	do
		n += *p != 0;
	while (odo_next(m->ndim, td_tensor_shape(m), td_tensor_strides(m), i, &p));
	return n;
}

static int64_t count_true(const td_index *x)
{
	int64_t i, n = 0;

	if (x->kind == TD_INDEX_TENSOR)
		return tensor_count_true(x->tensor);
	for (i = 0; i < x->count; i++)
		n += x->mask[i] ? 1 : 0;
	return n;
}

/*
 * Write the positions of the `nnz` true elements of a mask element: k rows
 * of nnz positions for a k-d mask, row j holding the dim-j coordinates.
 */
static void mask_positions(const td_index *x, int64_t nnz, int64_t *pos)
{
	int64_t i[TD_MAX_DIMS] = { 0 }, c = 0;
	const td_tensor *m = x->tensor;
	const char *p;
	int j;

	if (x->kind == TD_INDEX_MASK) {
		for (c = 0; c < x->count; c++)
			if (x->mask[c])
				*pos++ = c;
		return;
	}
	if (nnz == 0)
		return;
	p = td__tensor_ptr(m);
	do {
		if (*p != 0) {
			for (j = 0; j < m->ndim; j++)
				pos[j * nnz + c] = i[j];
			c++;
		}
	} while (odo_next(m->ndim, td_tensor_shape(m), td_tensor_strides(m), i, &p));
}

/* ------------------------------------------------------------------------ */
/* Expression checks                                                         */
/* ------------------------------------------------------------------------ */

static int tensor_element_check(const td_index *x, size_t i, int *consumed, const char *fn)
{
	td_category c;

	TD_TRY(td__tensor_check_read(x->tensor, fn, "an index tensor"));
	c = td_dtype_category(x->tensor->dtype);
	if (c == TD_CATEGORY_BOOL) {
		*consumed += x->tensor->ndim;
		return TD_OK;
	}
	if (c != TD_CATEGORY_INT && c != TD_CATEGORY_UINT)
		return td__error(TD_EINVAL,
			"%s: index tensor (element %zu) has dtype %s; positions "
			"need an integer dtype, masks bool",
			fn, i, td_dtype_name(x->tensor->dtype));
	(*consumed)++;
	return TD_OK;
}

/* Check element `i` on its own; count the input dims it names. */
static int element_check(const td_index *x, size_t i, int *consumed, int *ellipses, const char *fn)
{
	switch (x->kind) {
	case TD_INDEX_INT:
	case TD_INDEX_SLICE:
	case TD_INDEX_RANGE:
		(*consumed)++;
		return TD_OK;
	case TD_INDEX_NEWAXIS:
		return TD_OK;
	case TD_INDEX_ELLIPSIS:
		if (++*ellipses > 1)
			return td__error(TD_EINVAL,
				"%s: element %zu is a second ellipsis; at most one "
				"is allowed",
				fn, i);
		return TD_OK;
	case TD_INDEX_LIST:
	case TD_INDEX_MASK:
		if (x->count < 0 || (x->count > 0 && (x->kind == TD_INDEX_LIST ? !x->list : !x->mask)))
			return td__error(TD_EINVAL, "%s: element %zu: %s of %lld entries without data", fn, i,
				x->kind == TD_INDEX_LIST ? "list" : "mask", (long long)x->count);
		(*consumed)++;
		return TD_OK;
	case TD_INDEX_TENSOR:
		return tensor_element_check(x, i, consumed, fn);
	}
	return td__error(TD_EINVAL, "%s: element %zu has unknown kind %d", fn, i, (int)x->kind);
}

/* Check the whole expression against `ndim` dims; `*consumed` gets the dims it names. */
static int expr_check(const td_index *idx, size_t n, int ndim, int *consumed, const char *fn)
{
	int ellipses = 0;
	size_t i;

	*consumed = 0;
	if (n > 0 && !idx)
		return td__error(TD_EINVAL, "%s: NULL index expression of %zu elements", fn, n);
	for (i = 0; i < n; i++) {
		TD_TRY(element_check(&idx[i], i, consumed, &ellipses, fn));
		if (*consumed > ndim)
			return td__error(TD_EINDEX,
				"%s: too many indices: element %zu names dim %d of "
				"a %d-d tensor",
				fn, i, *consumed - 1, ndim);
	}
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* The walk: basic elements                                                  */
/* ------------------------------------------------------------------------ */

/* What the walk reads of the tensor indexed: its offset and dims. */
typedef struct wsrc {
	int ndim;
	int64_t offset;
	const int64_t *shape;
	const int64_t *strides;
} wsrc;

static wsrc wsrc_of(const td_tensor *t)
{
	wsrc r;

	r.ndim = t->ndim;
	r.offset = t->offset;
	td__dims_get(t, &r.shape, &r.strides);
	return r;
}

static int wpush(walk *w, int64_t size, int64_t stride, int src, const char *fn)
{
	if (w->ndim == W_MAX)
		return td__error(TD_EINVAL, "%s: the expression makes more than %d dims", fn, W_MAX);
	w->shape[w->ndim] = size;
	w->strides[w->ndim] = stride;
	w->elem[w->ndim] = -1;
	w->comp[w->ndim] = 0;
	w->src[w->ndim] = (int8_t)src;
	w->ndim++;
	return TD_OK;
}

static int out_of_range(int64_t i, int dim, int64_t size, const char *fn)
{
	return td__error(TD_EINDEX, "%s: index %lld is out of range for dim %d of size %lld", fn,
		(long long)i, dim, (long long)size);
}

static int walk_int(walk *w, const wsrc *t, int d, int64_t i, const char *fn)
{
	int64_t size = t->shape[d], k = i < 0 ? i + size : i;

	if (k < 0 || k >= size)
		return out_of_range(i, d, size, fn);
	w->offset += k * t->strides[d];
	return TD_OK;
}

/* A slice bound with Python's rules: omitted gives `dflt`, negatives wrap, then clamp. */
static int64_t slice_bound(int64_t b, int64_t size, int64_t dflt)
{
	if (b == TD_SLICE_NONE)
		return dflt;
	if (b < 0) {
		b += size;
		return b < 0 ? 0 : b;
	}
	return b > size ? size : b;
}

static int walk_slice(walk *w, const wsrc *t, int d, const td_index *x, const char *fn)
{
	int64_t size = t->shape[d], step = x->step == TD_SLICE_NONE ? 1 : x->step;
	int64_t start, stop, len;

	if (step == 0)
		return td__error(TD_EINVAL, "%s: slice step is zero (dim %d)", fn, d);
	if (step < 0)
		return td__error(TD_EINVAL,
			"%s: slice step %lld is negative (dim %d); views cannot "
			"have negative strides, index with a reversed position list instead",
			fn, (long long)step, d);
	start = slice_bound(x->start, size, 0);
	stop = slice_bound(x->stop, size, size);
	len = stop > start ? (stop - start - 1) / step + 1 : 0;
	if (len > 0)
		w->offset += start * t->strides[d];
	return wpush(w, len, len > 1 ? t->strides[d] * step : t->strides[d], d, fn);
}

static int walk_range(walk *w, const wsrc *t, int d, const td_index *x, const char *fn)
{
	int64_t size = t->shape[d], len = 0, span;

	if (x->step <= 0)
		return td__error(TD_EINVAL, "%s: range step %lld is not positive (dim %d)", fn,
			(long long)x->step, d);
	if (x->stop > x->start) {
		if (__builtin_sub_overflow(x->stop, x->start, &span) || x->start < 0 || x->start >= size)
			goto out_of_range;
		len = (span - 1) / x->step + 1;
		if (x->start + (len - 1) * x->step >= size)
			goto out_of_range;
		w->offset += x->start * t->strides[d];
	}
	return wpush(w, len, len > 1 ? t->strides[d] * x->step : t->strides[d], d, fn);
out_of_range:
	return td__error(TD_EINDEX,
		"%s: range(%lld, %lld, %lld) reaches outside dim %d of size "
		"%lld",
		fn, (long long)x->start, (long long)x->stop, (long long)x->step, d, (long long)size);
}

/* Mark the W dims of an advanced element: k-d bool masks mark k, 0-d ones a new dim. */
static int walk_advanced(walk *w, const wsrc *t, int *d, const td_index *x, size_t i,
	const char *fn)
{
	int k, nd = is_bool_tensor(x) ? x->tensor->ndim : 1;

	if (nd == 0) {
		TD_TRY(wpush(w, 1, 0, -1, fn));
		w->elem[w->ndim - 1] = (int)i;
		w->nadv++;
		return TD_OK;
	}
	for (k = 0; k < nd; k++, (*d)++) {
		TD_TRY(wpush(w, t->shape[*d], t->strides[*d], *d, fn));
		w->elem[w->ndim - 1] = (int)i;
		w->comp[w->ndim - 1] = (int8_t)k;
		w->nadv++;
	}
	return TD_OK;
}

static int walk_element(walk *w, const wsrc *t, int *d, const td_index *x, size_t i, int fill,
	const char *fn)
{
	int k;

	switch (x->kind) {
	case TD_INDEX_INT:
		return walk_int(w, t, (*d)++, x->start, fn);
	case TD_INDEX_SLICE:
		return walk_slice(w, t, (*d)++, x, fn);
	case TD_INDEX_RANGE:
		return walk_range(w, t, (*d)++, x, fn);
	case TD_INDEX_NEWAXIS:
		return wpush(w, 1, 0, -1, fn);
	case TD_INDEX_ELLIPSIS:
		for (k = 0; k < fill; k++, (*d)++)
			TD_TRY(wpush(w, t->shape[*d], t->strides[*d], *d, fn));
		return TD_OK;
	default:
		return walk_advanced(w, t, d, x, i, fn);
	}
}

/* Check the expression and apply its basic elements to `t`. */
static int walk_expr(walk *w, const wsrc *t, const td_index *idx, size_t n, const char *fn)
{
	int consumed, d = 0;
	size_t i;

	TD_TRY(expr_check(idx, n, t->ndim, &consumed, fn));
	w->offset = t->offset;
	w->ndim = 0;
	w->nadv = 0;
	for (i = 0; i < n; i++)
		TD_TRY(walk_element(w, t, &d, &idx[i], i, t->ndim - consumed, fn));
	for (; d < t->ndim; d++)
		TD_TRY(wpush(w, t->shape[d], t->strides[d], d, fn));
	return TD_OK;
}

static int too_many_dims(int ndim, const char *fn)
{
	return td__error(TD_EINVAL, "%s: the result would have %d dims; at most %d are allowed", fn,
		ndim, TD_MAX_DIMS);
}

/*
 * The view a basic expression gives, without a buffer reference (its dims
 * are its own: drop them with td__dims_unref()); `out` must not alias `t`.
 */
static int walk_view(td_tensor *out, const td_tensor *t, const walk *w, const char *fn)
{
	if (w->ndim > TD_MAX_DIMS)
		return too_many_dims(w->ndim, fn);
	if (TD_LIKELY(!td__dims_ext(w->ndim))) {
		/* The walk's arrays hold W_MAX entries: the inline dims are copied whole. */
		out->ndim = w->ndim;
		memcpy(td__ishape_w(out), w->shape, TD_TENSOR_INLINE_DIMS * sizeof(int64_t));
		memcpy(td__istrides_w(out), w->strides, TD_TENSOR_INLINE_DIMS * sizeof(int64_t));
	} else {
		TD_TRY(td__tensor_set_dims(out, w->ndim, w->shape, w->strides, fn));
	}
	out->buffer = t->buffer;
	out->offset = w->offset;
	out->dtype = t->dtype;
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Plans: advanced elements                                                  */
/* ------------------------------------------------------------------------ */

static int mask_mismatch(const plan *p, const td_tensor *m, int k, const char *fn)
{
	char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];

	return td__error(TD_EINDEX,
		"%s: bool mask of shape %s does not match the shape %s of "
		"dims %d..%d",
		fn, td__format_shape(s1, sizeof(s1), m->ndim, td_tensor_shape(m)),
		td__format_shape(s2, sizeof(s2), m->ndim, p->w->shape + k), p->w->src[k],
		p->w->src[k] + m->ndim - 1);
}

static int describe_tensor(const plan *p, adv *a, const td_index *x, int k, const char *fn)
{
	const td_tensor *m = x->tensor;
	int j;

	if (m->dtype != TD_DTYPE_BOOL) {
		a->data = td__tensor_ptr(m);
		a->dtype = m->dtype;
		a->ndim = m->ndim;
		a->trusted = false;
		memcpy(a->shape, td_tensor_shape(m), (size_t)m->ndim * sizeof(int64_t));
		memcpy(a->strides, td_tensor_strides(m), (size_t)m->ndim * sizeof(int64_t));
		return TD_OK;
	}
	if (m->ndim == 0) {
		/* `t[True]` indexes a new size-1 dim with [0], `t[False]` with []. */
		a->shape[0] = *td__tensor_ptr(m) != 0 ? 1 : 0;
		a->strides[0] = 0;
		return TD_OK;
	}
	if (p->w->comp[k] > 0) {
		a->shape[0] = a[-1].shape[0]; /* the mask's first dim, described just before */
		return TD_OK;
	}
	for (j = 0; j < m->ndim; j++)
		if (td_tensor_shape(m)[j] != p->w->shape[k + j])
			return mask_mismatch(p, m, k, fn);
	a->mask = m->ndim;
	a->shape[0] = tensor_count_true(m);
	return TD_OK;
}

/* Describe the index array of W dim `k` (mask positions are made later). */
static int describe(const plan *p, adv *a, const td_index *x, int k, const char *fn)
{
	a->data = (const char *)&zero_pos;
	a->dtype = TD_DTYPE_I64;
	a->ndim = 1;
	a->wdim = k;
	a->elem = p->w->elem[k];
	a->mask = 0;
	a->trusted = true;
	a->strides[0] = 1;
	switch (x->kind) {
	case TD_INDEX_LIST:
		a->data = (const char *)x->list;
		a->shape[0] = x->count;
		a->trusted = false;
		return TD_OK;
	case TD_INDEX_MASK:
		if (x->count != p->w->shape[k])
			return td__error(TD_EINDEX, "%s: mask of %lld entries for dim %d of size %lld", fn,
				(long long)x->count, p->w->src[k], (long long)p->w->shape[k]);
		a->mask = 1;
		a->shape[0] = count_true(x);
		return TD_OK;
	default:
		return describe_tensor(p, a, x, k, fn);
	}
}

/* Broadcast the index arrays and lay out the result dims [A, B, C]. */
static int layout(plan *p, const char *fn)
{
	int64_t b[TD_MAX_DIMS], tmp[TD_MAX_DIMS], cshape[TD_MAX_DIMS];
	int nb = 0, j, k, first = p->a[0].wdim;
	bool adjacent = p->a[p->nadv - 1].wdim - first + 1 == p->nadv;

	for (j = 0; j < p->nadv; j++) {
		TD_TRY(td__broadcast_shapes(nb, b, p->a[j].ndim, p->a[j].shape, &nb, tmp, fn));
		memcpy(b, tmp, (size_t)nb * sizeof(int64_t));
	}
	if (p->w->ndim - p->nadv + nb > TD_MAX_DIMS)
		return too_many_dims(p->w->ndim - p->nadv + nb, fn);
	p->na = p->nc = 0;
	p->nb = nb;
	for (k = 0; k < p->w->ndim; k++) {
		if (p->w->elem[k] >= 0)
			continue;
		if (adjacent && k < first) {
			p->shape[p->na] = p->w->shape[k];
			p->astr[p->na++] = p->w->strides[k];
		} else {
			cshape[p->nc] = p->w->shape[k];
			p->cstr[p->nc++] = p->w->strides[k];
		}
	}
	memcpy(p->shape + p->na, b, (size_t)nb * sizeof(int64_t));
	memcpy(p->shape + p->na + nb, cshape, (size_t)p->nc * sizeof(int64_t));
	return TD_OK;
}

static int validate_one(const adv *a, int64_t size, int dim, const char *fn)
{
	int64_t i[TD_MAX_DIMS] = { 0 }, bstr[TD_MAX_DIMS], v, k;
	size_t isz = td__itemsize(a->dtype);
	const char *p = a->data;
	int d;

	if (td__numel(a->ndim, a->shape) == 0)
		return TD_OK;
	if (a->ndim == 1 && a->dtype == TD_DTYPE_I64) { /* lists: the common case */
		for (k = 0; k < a->shape[0]; k++, p += a->strides[0] * 8) {
			memcpy(&v, p, sizeof(v));
			if (v < -size || v >= size)
				return out_of_range(v, dim, size, fn);
		}
		return TD_OK;
	}
	for (d = 0; d < a->ndim; d++)
		bstr[d] = a->strides[d] * (int64_t)isz;
	do {
		v = load_pos(p, a->dtype);
		if (v < -size || v >= size)
			return out_of_range(v, dim, size, fn);
	} while (odo_next(a->ndim, a->shape, bstr, i, &p));
	return TD_OK;
}

static int validate(const plan *p, const char *fn)
{
	int j;

	for (j = 0; j < p->nadv; j++) {
		const adv *a = &p->a[j];
		if (!a->trusted)
			TD_TRY(validate_one(a, p->w->shape[a->wdim], p->w->src[a->wdim], fn));
	}
	return TD_OK;
}

/* Copy an index tensor's positions into `pos` as contiguous int64 (the copy is `a`'s now). */
static void materialize(adv *a, int64_t *pos)
{
	int64_t i[TD_MAX_DIMS] = { 0 }, bstr[TD_MAX_DIMS], c = 0;
	size_t isz = td__itemsize(a->dtype);
	const char *p = a->data;
	int d;

	for (d = 0; d < a->ndim; d++)
		bstr[d] = a->strides[d] * (int64_t)isz;
	if (td__numel(a->ndim, a->shape) > 0)
		do
			pos[c++] = load_pos(p, a->dtype);
		while (odo_next(a->ndim, a->shape, bstr, i, &p));
	a->data = (const char *)pos;
	a->dtype = TD_DTYPE_I64;
	td__contiguous_strides(a->ndim, a->shape, a->strides);
}

/* Positions `a` needs in the scratch block: a mask's, or a copy of indices `dst` overlaps. */
static int64_t scratch_need(const adv *a, const td_index *x, const td_tensor *dst)
{
	if (a->mask)
		return a->shape[0] * a->mask;
	if (dst && x->kind == TD_INDEX_TENSOR && x->tensor->dtype != TD_DTYPE_BOOL &&
		td__tensor_overlap(dst, x->tensor))
		return td__numel(a->ndim, a->shape);
	return 0;
}

/*
 * Make the positions of every mask, and (when `dst`, the tensor about to be
 * written, is given) private copies of index tensors that overlap it.
 */
static int make_positions(plan *p, const td_index *idx, const td_tensor *dst, const char *fn)
{
	size_t total = 0, bytes;
	int64_t *pos;
	int j, c;

	for (j = 0; j < p->nadv; j++) {
		int64_t need = scratch_need(&p->a[j], &idx[p->a[j].elem], dst);
		if (!td__add_size(total, (size_t)need, &total))
			return td__error(TD_EOVERFLOW, "%s: too many mask positions", fn);
	}
	if (total == 0)
		return TD_OK;
	if (!td__mul_size(total, sizeof(int64_t), &bytes))
		return td__error(TD_EOVERFLOW, "%s: too many mask positions", fn);
	pos = td__malloc(bytes);
	if (!pos)
		return td__error_nomem(bytes);
	p->pos = pos;
	for (j = 0; j < p->nadv; j++) {
		adv *a = &p->a[j];
		int64_t need = scratch_need(a, &idx[a->elem], dst);
		if (need == 0)
			continue;
		if (!a->mask) {
			materialize(a, pos);
		} else {
			mask_positions(&idx[a->elem], a->shape[0], pos);
			for (c = 0; c < a->mask; c++)
				a[c].data = (const char *)(pos + c * a->shape[0]);
		}
		pos += need;
	}
	return TD_OK;
}

static void plan_release(plan *p)
{
	td__free(p->pos);
	p->pos = NULL;
}

/* Describe and lay out the advanced part; positions are neither made nor checked. */
static int plan_shape(plan *p, const walk *w, const td_index *idx, const char *fn)
{
	int k;

	p->w = w;
	p->pos = NULL;
	p->nadv = 0;
	for (k = 0; k < w->ndim; k++) {
		if (w->elem[k] < 0)
			continue;
		TD_TRY(describe(p, &p->a[p->nadv], &idx[w->elem[k]], k, fn));
		p->nadv++;
	}
	return layout(p, fn);
}

/* plan_shape() plus the positions, checked; release with plan_release(). */
static int plan_make(plan *p, const walk *w, const td_index *idx, const td_tensor *dst,
	const char *fn)
{
	int rc;

	TD_TRY(plan_shape(p, w, idx, fn));
	rc = make_positions(p, idx, dst, fn);
	if (rc == 0)
		rc = validate(p, fn);
	if (rc < 0)
		plan_release(p);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Gather / scatter kernel                                                   */
/* ------------------------------------------------------------------------ */

/*
 * Moves elements between t (through W) and the other side: the new result
 * (gather) or the value (scatter), both laid out over the result dims
 * [A, B, C]. For each (a, b) the C block is copied with one memcpy when
 * both sides are contiguous there, else with the strided iterator.
 */
typedef struct kernel {
	char *tbase, *obase; /* first element of W / of the other side */
	size_t isz;          /* t's element size */
	int na, nb, nadv;
	bool scatter, memcpy_block;
	size_t block_bytes;
	td_dtype dt, st; /* block copy dtypes (dst, src) */
	int64_t ashape[TD_MAX_DIMS], at[TD_MAX_DIMS], ao[TD_MAX_DIMS]; /* byte strides */
	int64_t bshape[TD_MAX_DIMS], bo[TD_MAX_DIMS];
	const char *ip[W_MAX]; /* per index array: first position */
	td_dtype idt[W_MAX];
	int64_t isize[W_MAX], istr[W_MAX]; /* size and byte stride of the indexed W dim */
	int64_t ib[W_MAX][TD_MAX_DIMS];    /* byte strides of each index array over B */
	td__iter c;                        /* the C block: op 0 destination, op 1 source */
} kernel;

static void kernel_adv(kernel *k, int j, const adv *a, const plan *p)
{
	int64_t sz = (int64_t)td__itemsize(a->dtype);
	int d;

	k->ip[j] = a->data;
	k->idt[j] = a->dtype;
	k->isize[j] = p->w->shape[a->wdim];
	k->istr[j] = p->w->strides[a->wdim] * (int64_t)k->isz;
	for (d = 0; d < k->nb; d++) {
		int ia = a->ndim - k->nb + d;
		k->ib[j][d] = ia < 0 || a->shape[ia] == 1 ? 0 : a->strides[ia] * sz;
	}
}

/* `ostr`: the other side's element strides over the result dims. */
static void kernel_init(kernel *k, const plan *p, const td_tensor *t, char *obase,
	const int64_t *ostr, td_dtype odt, bool scatter)
{
	int64_t osz = (int64_t)td__itemsize(odt);
	char *base[2] = { NULL, NULL };
	const int64_t *cs[2];
	size_t sizes[2];
	int d, j;

	k->isz = td__itemsize(t->dtype);
	k->tbase = (char *)t->buffer->data + (size_t)p->w->offset * k->isz;
	k->obase = obase;
	k->na = p->na;
	k->nb = p->nb;
	k->nadv = p->nadv;
	k->scatter = scatter;
	for (d = 0; d < p->na; d++) {
		k->ashape[d] = p->shape[d];
		k->at[d] = p->astr[d] * (int64_t)k->isz;
		k->ao[d] = ostr[d] * osz;
	}
	for (d = 0; d < p->nb; d++) {
		k->bshape[d] = p->shape[p->na + d];
		k->bo[d] = ostr[p->na + d] * osz;
	}
	for (j = 0; j < p->nadv; j++)
		kernel_adv(k, j, &p->a[j], p);
	cs[scatter ? 0 : 1] = p->cstr;
	cs[scatter ? 1 : 0] = ostr + p->na + p->nb;
	sizes[scatter ? 0 : 1] = k->isz;
	sizes[scatter ? 1 : 0] = (size_t)osz;
	k->dt = scatter ? t->dtype : odt;
	k->st = scatter ? odt : t->dtype;
	td__iter_init(&k->c, p->nc, p->shape + p->na + p->nb, 2, base, cs, sizes);
	k->memcpy_block = k->dt == k->st && k->c.ndim == 1 && k->c.strides[0][0] == (int64_t)k->isz &&
		k->c.strides[1][0] == (int64_t)k->isz;
	k->block_bytes = (size_t)k->c.shape[0] * k->isz;
}

static void block_loop(char *const *p, const int64_t *s, int64_t n, void *ctx)
{
	const kernel *k = ctx;

	td__convert(p[0], s[0], k->dt, p[1], s[1], k->st, n);
}

static void kernel_block(kernel *k, char *t, char *o)
{
	char *dst = k->scatter ? t : o, *src = k->scatter ? o : t;

	if (k->memcpy_block) {
		copy_bytes(dst, src, k->block_bytes);
		return;
	}
	k->c.base[0] = dst;
	k->c.base[1] = src;
	td__iter_run(&k->c, block_loop, k);
}

/* Every position of B for one A position. */
static void kernel_b(kernel *k, char *t, char *o)
{
	int64_t bi[TD_MAX_DIMS] = { 0 };
	const char *ip[W_MAX];
	int d, j;

	memcpy(ip, k->ip, (size_t)k->nadv * sizeof(ip[0]));
	for (;;) {
		int64_t off = 0;
		for (j = 0; j < k->nadv; j++) {
			int64_t v = load_pos(ip[j], k->idt[j]);
			off += (v < 0 ? v + k->isize[j] : v) * k->istr[j];
		}
		kernel_block(k, t + off, o);
		for (d = k->nb - 1; d >= 0; d--) {
			if (++bi[d] < k->bshape[d]) {
				o += k->bo[d];
				for (j = 0; j < k->nadv; j++)
					ip[j] += k->ib[j][d];
				break;
			}
			o -= k->bo[d] * (k->bshape[d] - 1);
			for (j = 0; j < k->nadv; j++)
				ip[j] -= k->ib[j][d] * (k->bshape[d] - 1);
			bi[d] = 0;
		}
		if (d < 0)
			return;
	}
}

/* The replay-buffer case: one 1-d index over whole contiguous rows. */
static void kernel_rows(const kernel *k)
{
	const char *ip = k->ip[0];
	char *o = k->obase;
	int64_t i, n = k->bshape[0], is = k->ib[0][0], os = k->bo[0];
	int64_t size = k->isize[0], ts = k->istr[0];
	size_t bytes = k->block_bytes;

	if (k->idt[0] == TD_DTYPE_I64 && !k->scatter) {
		for (i = 0; i < n; i++, ip += is, o += os) {
			int64_t v;
			memcpy(&v, ip, sizeof(v));
			copy_bytes(o, k->tbase + (v < 0 ? v + size : v) * ts, bytes);
		}
		return;
	}
	for (i = 0; i < n; i++, ip += is, o += os) {
		int64_t v = load_pos(ip, k->idt[0]);
		char *t = k->tbase + (v < 0 ? v + size : v) * ts;
		if (k->scatter)
			copy_bytes(t, o, bytes);
		else
			copy_bytes(o, t, bytes);
	}
}

/* Run the kernel over the whole result (which must not be empty). */
static void kernel_run(kernel *k)
{
	int64_t ai[TD_MAX_DIMS] = { 0 };
	char *t = k->tbase, *o = k->obase;
	int d;

	if (k->nadv == 1 && k->nb == 1 && k->na == 0 && k->memcpy_block) {
		kernel_rows(k);
		return;
	}
	for (;;) {
		kernel_b(k, t, o);
		for (d = k->na - 1; d >= 0; d--) {
			if (++ai[d] < k->ashape[d]) {
				t += k->at[d];
				o += k->ao[d];
				break;
			}
			t -= k->at[d] * (k->ashape[d] - 1);
			o -= k->ao[d] * (k->ashape[d] - 1);
			ai[d] = 0;
		}
		if (d < 0)
			return;
	}
}

/* ------------------------------------------------------------------------ */
/* Index, put, fill                                                          */
/* ------------------------------------------------------------------------ */

/* Whether `out` is one of the expression's index tensors (then it is an input too). */
static bool aliases_index(const td_tensor *out, const td_index *idx, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (idx[i].kind == TD_INDEX_TENSOR && idx[i].tensor == out)
			return true;
	return false;
}

static int index_gather(td_tensor *out, const td_tensor *t, const td_index *idx, size_t n,
	const walk *w, const char *fn)
{
	td_tensor tmp;
	kernel k;
	plan p;
	int rc, nd;

	TD_TRY(td__tensor_check_read(t, fn, "the tensor"));
	TD_TRY(plan_make(&p, w, idx, NULL, fn));
	nd = p.na + p.nb + p.nc;
	rc = td__tensor_alloc(&tmp, t->dtype, nd, p.shape, false, fn);
	if (rc == 0 && td__numel(nd, p.shape) > 0) {
		kernel_init(&k, &p, t, td__tensor_ptr(&tmp), td_tensor_strides(&tmp), t->dtype, false);
		kernel_run(&k);
	}
	plan_release(&p);
	if (rc < 0)
		return rc;
	if (out != t && aliases_index(out, idx, n))
		td_tensor_release(out);
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

int td__tensor_index(td_tensor *out, const td_tensor *t, const td_index *idx, size_t n,
	const char *fn)
{
	td_tensor tmp;
	wsrc src;
	walk w;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	src = wsrc_of(t);
	TD_TRY(walk_expr(&w, &src, idx, n, fn));
	if (w.nadv > 0)
		return index_gather(out, t, idx, n, &w, fn);
	TD_TRY(walk_view(&tmp, t, &w, fn));
	td_buffer_ref(tmp.buffer);
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

int td_tensor_index(td_tensor *out, const td_tensor *t, const td_index *idx, size_t n)
{
	return td__tensor_index(out, t, idx, n, "td_tensor_index");
}

static int put_basic(const td_tensor *t, const walk *w, const td_tensor *value, const char *fn)
{
	td_tensor view;
	int rc;

	TD_TRY(walk_view(&view, t, w, fn));
	if (!td__tensor_overlap(&view, value)) {
		rc = td__copy_unchecked(&view, value, fn);
	} else {
		td_tensor tmp;

		rc = td_tensor_clone(&tmp, value);
		if (rc == TD_OK) {
			rc = td__copy_unchecked(&view, &tmp, fn);
			td_tensor_release(&tmp);
		}
	}
	td__dims_unref(&view);
	return rc;
}

static int put_advanced(const td_tensor *t, const td_index *idx, const walk *w,
	const td_tensor *value, const char *fn)
{
	td_tensor own = TD_TENSOR_INIT;
	const td_tensor *v = value;
	int64_t vstr[TD_MAX_DIMS];
	kernel k;
	plan p;
	int rc, nd;

	TD_TRY(plan_make(&p, w, idx, t, fn));
	nd = p.na + p.nb + p.nc;
	rc = td__shape_check(nd, p.shape, t->dtype, NULL, NULL, fn);
	if (rc == 0)
		rc = td__broadcast_strides(value, nd, p.shape, vstr, fn);
	if (rc == 0 && td__tensor_overlap(t, value)) {
		/* The value is part of t: read it from a private copy. */
		rc = td_tensor_clone(&own, value);
		v = &own;
		if (rc == 0)
			rc = td__broadcast_strides(v, nd, p.shape, vstr, fn);
	}
	if (rc == 0 && td__numel(nd, p.shape) > 0) {
		kernel_init(&k, &p, t, td__tensor_ptr(v), vstr, v->dtype, true);
		kernel_run(&k);
	}
	td_tensor_release(&own);
	plan_release(&p);
	return rc;
}

int td__tensor_index_put(td_tensor *t, const td_index *idx, size_t n, const td_tensor *value,
	const char *fn)
{
	wsrc src;
	walk w;

	TD_TRY(td__tensor_check_write(t, fn, "the tensor"));
	TD_TRY(td__tensor_check_read(value, fn, "the value"));
	src = wsrc_of(t);
	TD_TRY(walk_expr(&w, &src, idx, n, fn));
	if (w.nadv == 0)
		return put_basic(t, &w, value, fn);
	return put_advanced(t, idx, &w, value, fn);
}

int td_tensor_index_put(td_tensor *t, const td_index *idx, size_t n, const td_tensor *value)
{
	return td__tensor_index_put(t, idx, n, value, "td_tensor_index_put");
}

static int fill_advanced(const td_tensor *t, const td_index *idx, const walk *w, td_scalar value,
	const char *fn)
{
	static const int64_t zeros[TD_MAX_DIMS];
	td__cf64 cell; /* the value in t's dtype; every stride 0 */
	kernel k;
	plan p;
	int rc, nd;

	TD_TRY(plan_make(&p, w, idx, t, fn));
	nd = p.na + p.nb + p.nc;
	rc = td__shape_check(nd, p.shape, t->dtype, NULL, NULL, fn);
	if (rc == 0 && td__numel(nd, p.shape) > 0) {
		td__scalar_store(&cell, t->dtype, value);
		kernel_init(&k, &p, t, (char *)&cell, zeros, t->dtype, true);
		kernel_run(&k);
	}
	plan_release(&p);
	return rc;
}

int td__tensor_index_fill(td_tensor *t, const td_index *idx, size_t n, td_scalar value,
	const char *fn)
{
	td_tensor view;
	wsrc src;
	walk w;
	int rc;

	TD_TRY(td__tensor_check_write(t, fn, "the tensor"));
	TD_TRY(td__scalar_check(value, fn));
	src = wsrc_of(t);
	TD_TRY(walk_expr(&w, &src, idx, n, fn));
	if (w.nadv > 0)
		return fill_advanced(t, idx, &w, value, fn);
	TD_TRY(walk_view(&view, t, &w, fn));
	rc = td__fill_unchecked(&view, value);
	td__dims_unref(&view);
	return rc;
}

int td_tensor_index_fill(td_tensor *t, const td_index *idx, size_t n, td_scalar value)
{
	return td__tensor_index_fill(t, idx, n, value, "td_tensor_index_fill");
}

/* ------------------------------------------------------------------------ */
/* Shapes and prepared expressions (for td_dict)                             */
/* ------------------------------------------------------------------------ */

/* Walk the expression over a shape (no data); plan the advanced part if any. */
static int shape_walk(walk *w, plan *p, int ndim, const int64_t *shape, const td_index *idx,
	size_t n, const char *fn)
{
	static const int64_t zeros[TD_MAX_DIMS];
	wsrc t;
	int d;

	p->nadv = 0;
	p->pos = NULL;
	if (ndim < 0 || ndim > TD_MAX_DIMS || (ndim > 0 && !shape))
		return td__error(TD_EINVAL, "%s: bad shape (%d dims)", fn, ndim);
	for (d = 0; d < ndim; d++)
		if (shape[d] < 0)
			return td__error(TD_EINVAL, "%s: negative size at dim %d", fn, d);
	t.ndim = ndim;
	t.offset = 0;
	t.shape = shape;
	t.strides = zeros;
	TD_TRY(walk_expr(w, &t, idx, n, fn));
	if (w->nadv > 0) {
		TD_TRY(plan_shape(p, w, idx, fn));
		return validate(p, fn);
	}
	return w->ndim > TD_MAX_DIMS ? too_many_dims(w->ndim, fn) : TD_OK;
}

int td__index_shape(int *ndim_out, int64_t *shape_out, bool *view_out, int ndim,
	const int64_t *shape, const td_index *idx, size_t n, const char *fn)
{
	walk w;
	plan p;

	TD_TRY(shape_walk(&w, &p, ndim, shape, idx, n, fn));
	if (view_out)
		*view_out = w.nadv == 0;
	if (w.nadv == 0) {
		*ndim_out = w.ndim;
		memcpy(shape_out, w.shape, (size_t)w.ndim * sizeof(int64_t));
	} else {
		*ndim_out = p.na + p.nb + p.nc;
		memcpy(shape_out, p.shape, (size_t)*ndim_out * sizeof(int64_t));
	}
	return TD_OK;
}

/* The index array of the first dim of mask element `i`. */
static const adv *mask_adv(const plan *p, size_t i)
{
	int j;

	for (j = 0; j < p->nadv; j++)
		if (p->a[j].elem == (int)i && p->a[j].mask)
			return &p->a[j];
	return NULL;
}

/* Fill the prepared expression (arrays allocated, positions buffer in `buf`). */
static void expr_fill(td__index_expr *e, const plan *p, const td_index *idx, size_t n, int fill,
	td_buffer *buf)
{
	int64_t *pos = buf ? td_buffer_data(buf) : NULL;
	size_t i, o = 0, nt = 0;
	int k;

	for (i = 0; i < n; i++) {
		const adv *a = idx[i].kind == TD_INDEX_ELLIPSIS ? NULL : mask_adv(p, i);
		if (idx[i].kind == TD_INDEX_ELLIPSIS) {
			for (k = 0; k < fill; k++)
				e->idx[o++] = td_index_all();
		} else if (!a) {
			e->idx[o++] = idx[i];
		} else {
			mask_positions(&idx[i], a->shape[0], pos);
			for (k = 0; k < a->mask; k++, nt++) {
				td_tensor *pt = &e->positions[nt];
				*pt = (td_tensor)TD_TENSOR_INIT;
				pt->buffer = td_buffer_ref(buf);
				pt->offset = pos - (int64_t *)td_buffer_data(buf) + k * a->shape[0];
				pt->dtype = TD_DTYPE_I64;
				pt->ndim = 1; /* inline dims */
				td__shape_w(pt)[0] = a->shape[0];
				td__strides_w(pt)[0] = 1;
				e->idx[o++] = td_index_tensor(pt);
			}
			pos += a->shape[0] * a->mask;
		}
	}
	e->n = o;
	e->npositions = nt;
}

static int expr_alloc(td__index_expr *e, size_t count, size_t nt, size_t npos, td_buffer **buf,
	const char *fn)
{
	size_t bytes;
	int rc;

	*buf = NULL;
	e->positions = NULL;
	if (!td__mul_size(npos, sizeof(int64_t), &bytes))
		return td__error(TD_EOVERFLOW, "%s: too many mask positions", fn);
	e->idx = td__malloc((count ? count : 1) * sizeof(td_index));
	if (!e->idx)
		return td__error_nomem(count * sizeof(td_index));
	if (nt == 0)
		return TD_OK;
	e->positions = td__malloc(nt * sizeof(td_tensor));
	rc = e->positions ? td_buffer_new(buf, bytes, 0) : td__error_nomem(nt * sizeof(td_tensor));
	if (rc < 0) {
		td__free(e->positions);
		td__free(e->idx);
	}
	return rc;
}

int td__index_expr_prepare(td__index_expr *out, const td_index *idx, size_t n, int ndim,
	const int64_t *shape, const char *fn)
{
	size_t i, count = 0, nt = 0, npos = 0;
	int consumed = 0, j;
	td__index_expr e;
	td_buffer *buf;
	walk w;
	plan p;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(shape_walk(&w, &p, ndim, shape, idx, n, fn));
	TD_TRY(expr_check(idx, n, ndim, &consumed, fn));
	for (i = 0; i < n; i++)
		count += idx[i].kind == TD_INDEX_ELLIPSIS ? (size_t)(ndim - consumed) : 1;
	for (j = 0; j < p.nadv; j++) {
		if (!p.a[j].mask)
			continue;
		nt += (size_t)p.a[j].mask;
		count += (size_t)p.a[j].mask - 1; /* a k-d mask becomes k elements */
		npos += (size_t)(p.a[j].shape[0] * p.a[j].mask);
	}
	TD_TRY(expr_alloc(&e, count, nt, npos, &buf, fn));
	expr_fill(&e, &p, idx, n, ndim - consumed, buf);
	td_buffer_unref(buf); /* the position tensors hold their own references */
	e.basic = w.nadv == 0;
	e.ndim = e.basic ? w.ndim : p.na + p.nb + p.nc;
	memcpy(e.shape, e.basic ? w.shape : p.shape, (size_t)e.ndim * sizeof(int64_t));
	*out = e;
	return TD_OK;
}

void td__index_expr_release(td__index_expr *e)
{
	if (!e)
		return;
	td_tensor_array_free(e->positions, e->npositions);
	td__free(e->idx);
	e->idx = NULL;
	e->positions = NULL;
	e->n = e->npositions = 0;
}
