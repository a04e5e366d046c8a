/* SPDX-License-Identifier: MIT */
/*
 * tensor_shape.c - view operations: select, narrow, reshape/view,
 * unsqueeze/squeeze, permute/transpose, expand and unbind. None of them
 * copies data except td_tensor_reshape() when no view is possible.
 */
#include "td_internal.h"
#include "tensor_impl.h"

int td_tensor_select(td_tensor *out, const td_tensor *t, int dim, int64_t index)
{
	static const char fn[] = "td_tensor_select";
	td_tensor tmp;
	int d;
	int64_t k;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	TD_TRY(td__wrap_dim(dim, t->ndim, &d, fn));
	k = index < 0 ? index + td_tensor_shape(t)[d] : index;
	if (k < 0 || k >= td_tensor_shape(t)[d])
		return td__error(TD_EINDEX, "%s: index %lld is out of range for dim %d of size %lld", fn,
			(long long)index, dim, (long long)td_tensor_shape(t)[d]);
	TD_TRY(td__view_select(&tmp, t, d, k, fn));
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

int td_tensor_narrow(td_tensor *out, const td_tensor *t, int dim, int64_t start, int64_t length)
{
	static const char fn[] = "td_tensor_narrow";
	td_tensor tmp;
	int d;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	TD_TRY(td__wrap_dim(dim, t->ndim, &d, fn));
	if (start < 0 || length < 0 || start > td_tensor_shape(t)[d] ||
		length > td_tensor_shape(t)[d] - start)
		return td__error(TD_EINDEX, "%s: [%lld, %lld + %lld) is outside dim %d of size %lld", fn,
			(long long)start, (long long)start, (long long)length, dim,
			(long long)td_tensor_shape(t)[d]);
	TD_TRY(td__view_narrow(&tmp, t, d, start, length, fn));
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

/*
 * Store in `out` the view of t's buffer at t's offset with dims sh/st
 * (ndim): it takes its references, and when `out` is `t` the references t
 * held are dropped. TD_ENOMEM only for more than TD_TENSOR_INLINE_DIMS dims.
 */
static int make_view(td_tensor *out, const td_tensor *t, int ndim, const int64_t *sh,
	const int64_t *st, const char *fn)
{
	td_tensor tmp;

	tmp.buffer = t->buffer;
	tmp.offset = t->offset;
	tmp.dtype = t->dtype;
	TD_TRY(td__tensor_set_dims(&tmp, ndim, sh, st, fn));
	td_buffer_ref(tmp.buffer);
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

/* Resolve a requested shape (one -1 allowed) against `numel` elements. */
static int infer_shape(int ndim, const int64_t *shape, int64_t numel, int64_t *out, const char *fn)
{
	int64_t known = 1;
	int infer = -1, i;

	if (ndim < 0 || ndim > TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: ndim %d is outside 0..%d", fn, ndim, TD_MAX_DIMS);
	if (ndim > 0 && !shape)
		return td__error(TD_EINVAL, "%s: NULL shape", fn);
	for (i = 0; i < ndim; i++) {
		if (shape[i] == -1) {
			if (infer >= 0)
				return td__error(TD_EINVAL, "%s: only one size may be -1", fn);
			infer = i;
			continue;
		}
		if (shape[i] < 0)
			return td__error(TD_EINVAL, "%s: invalid size %lld at dim %d", fn, (long long)shape[i],
				i);
		if (!td__mul_i64(known, shape[i], &known))
			return td__error(TD_EOVERFLOW, "%s: shape is too large", fn);
		out[i] = shape[i];
	}
	if (infer >= 0) {
		if (known == 0 || numel % known != 0) {
			char s[TD_SHAPE_STR_LEN];
			return td__error(TD_ETYPE, "%s: shape %s is invalid for %lld elements", fn,
				td__format_shape(s, sizeof(s), ndim, shape), (long long)numel);
		}
		out[infer] = numel / known;
		known = numel;
	}
	if (known != numel) {
		char s[TD_SHAPE_STR_LEN];
		return td__error(TD_ETYPE, "%s: shape %s is invalid for %lld elements", fn,
			td__format_shape(s, sizeof(s), ndim, shape), (long long)numel);
	}
	return TD_OK;
}

/*
 * Strides that view (oshape, ostrides) as nshape, following torch's
 * computeStride: dims are grouped into chunks that are contiguous among
 * themselves, and each chunk must be split or merged exactly.
 */
static bool view_strides(int ondim, const int64_t *oshape, const int64_t *ostrides, int nndim,
	const int64_t *nshape, int64_t *nstrides)
{
	int64_t one_shape[1] = { 1 }, one_stride[1] = { 1 };
	int64_t chunk_base, tensor_numel = 1, view_numel = 1;
	int td_, vd = nndim - 1;

	if (td__numel(nndim, nshape) == 0) {
		td__contiguous_strides(nndim, nshape, nstrides);
		return true;
	}
	if (ondim == 0) {
		ondim = 1;
		oshape = one_shape;
		ostrides = one_stride;
	}
	chunk_base = ostrides[ondim - 1];
	for (td_ = ondim - 1; td_ >= 0; td_--) {
		tensor_numel *= oshape[td_];
		if (td_ == 0 || (oshape[td_ - 1] != 1 && ostrides[td_ - 1] != tensor_numel * chunk_base)) {
			while (vd >= 0 && (view_numel < tensor_numel || nshape[vd] == 1)) {
				nstrides[vd] = view_numel * chunk_base;
				view_numel *= nshape[vd];
				vd--;
			}
			if (view_numel != tensor_numel)
				return false;
			if (td_ > 0) {
				chunk_base = ostrides[td_ - 1];
				tensor_numel = 1;
				view_numel = 1;
			}
		}
	}
	return vd == -1;
}

static int reshape_impl(td_tensor *out, const td_tensor *t, int ndim, const int64_t *shape,
	bool allow_copy, const char *fn)
{
	int64_t nshape[TD_MAX_DIMS], nstrides[TD_MAX_DIMS];
	td_tensor copy, tmp;
	int rc;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	TD_TRY(infer_shape(ndim, shape, td__numel(t->ndim, td_tensor_shape(t)), nshape, fn));
	if (view_strides(t->ndim, td_tensor_shape(t), td_tensor_strides(t), ndim, nshape, nstrides))
		return make_view(out, t, ndim, nshape, nstrides, fn);
	if (!allow_copy) {
		char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
		return td__error(TD_ETYPE,
			"%s: a tensor of shape %s with these strides cannot be viewed as %s; "
			"use td_tensor_reshape()",
			fn, td__format_shape(s1, sizeof(s1), t->ndim, td_tensor_shape(t)),
			td__format_shape(s2, sizeof(s2), ndim, nshape));
	}
	TD_TRY(td_tensor_clone(&copy, t));
	td__contiguous_strides(ndim, nshape, nstrides);
	rc = make_view(&tmp, &copy, ndim, nshape, nstrides, fn);
	td_tensor_release(&copy);
	if (rc < 0)
		return rc;
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

int td_tensor_reshape(td_tensor *out, const td_tensor *t, int ndim, const int64_t *shape)
{
	return reshape_impl(out, t, ndim, shape, true, "td_tensor_reshape");
}

int td_tensor_view(td_tensor *out, const td_tensor *t, int ndim, const int64_t *shape)
{
	return reshape_impl(out, t, ndim, shape, false, "td_tensor_view");
}

int td_tensor_unsqueeze(td_tensor *out, const td_tensor *t, int dim)
{
	static const char fn[] = "td_tensor_unsqueeze";
	int64_t sh[TD_MAX_DIMS], st[TD_MAX_DIMS];
	const int64_t *tsh, *tst;
	int64_t stride = 1;
	int d, i;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	if (t->ndim >= TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: a tensor has at most %d dims", fn, TD_MAX_DIMS);
	TD_TRY(td__wrap_dim(dim, t->ndim + 1, &d, fn));
	tsh = td_tensor_shape(t);
	tst = td_tensor_strides(t);
	/*
	 * torch gives the new dim the stride size * stride of the dim it is
	 * inserted before. The stride of a size-1 dim never matters, so when
	 * that product overflows (a huge stride in a huge device buffer) 1 is
	 * used instead.
	 */
	if (d < t->ndim && !td__mul_i64(tsh[d], tst[d], &stride))
		stride = 1;
	for (i = 0; i < t->ndim; i++) {
		sh[i + (i >= d)] = tsh[i];
		st[i + (i >= d)] = tst[i];
	}
	sh[d] = 1;
	st[d] = stride;
	return make_view(out, t, t->ndim + 1, sh, st, fn);
}

int td_tensor_squeeze(td_tensor *out, const td_tensor *t, int dim)
{
	static const char fn[] = "td_tensor_squeeze";
	int64_t sh[TD_MAX_DIMS], st[TD_MAX_DIMS];
	int d, i, n = 0;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	if (t->ndim == 0 && (dim == 0 || dim == -1))
		return make_view(out, t, 0, NULL, NULL, fn);
	TD_TRY(td__wrap_dim(dim, t->ndim, &d, fn));
	for (i = 0; i < t->ndim; i++) {
		if (i == d && td_tensor_shape(t)[d] == 1)
			continue;
		sh[n] = td_tensor_shape(t)[i];
		st[n++] = td_tensor_strides(t)[i];
	}
	return make_view(out, t, n, sh, st, fn);
}

int td_tensor_squeeze_all(td_tensor *out, const td_tensor *t)
{
	static const char fn[] = "td_tensor_squeeze_all";
	int64_t sh[TD_MAX_DIMS], st[TD_MAX_DIMS];
	int i, n = 0;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	for (i = 0; i < t->ndim; i++) {
		if (td_tensor_shape(t)[i] == 1)
			continue;
		sh[n] = td_tensor_shape(t)[i];
		st[n++] = td_tensor_strides(t)[i];
	}
	return make_view(out, t, n, sh, st, fn);
}

int td_tensor_permute(td_tensor *out, const td_tensor *t, const int *dims)
{
	static const char fn[] = "td_tensor_permute";
	int64_t sh[TD_MAX_DIMS], st[TD_MAX_DIMS];
	bool seen[TD_MAX_DIMS] = { false };
	int i;

	if (!out || (!dims && t && t->ndim > 0))
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	for (i = 0; i < t->ndim; i++) {
		int d;
		TD_TRY(td__wrap_dim(dims[i], t->ndim, &d, fn));
		if (seen[d])
			return td__error(TD_EINVAL, "%s: dim %d appears twice", fn, dims[i]);
		seen[d] = true;
		sh[i] = td_tensor_shape(t)[d];
		st[i] = td_tensor_strides(t)[d];
	}
	return make_view(out, t, t->ndim, sh, st, fn);
}

int td_tensor_transpose(td_tensor *out, const td_tensor *t, int dim0, int dim1)
{
	static const char fn[] = "td_tensor_transpose";
	int64_t sh[TD_MAX_DIMS], st[TD_MAX_DIMS];
	int d0, d1, n;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	TD_TRY(td__wrap_dim(dim0, t->ndim, &d0, fn));
	TD_TRY(td__wrap_dim(dim1, t->ndim, &d1, fn));
	n = t->ndim;
	memcpy(sh, td_tensor_shape(t), (size_t)n * sizeof(int64_t));
	memcpy(st, td_tensor_strides(t), (size_t)n * sizeof(int64_t));
	sh[d0] = td_tensor_shape(t)[d1];
	st[d0] = td_tensor_strides(t)[d1];
	sh[d1] = td_tensor_shape(t)[d0];
	st[d1] = td_tensor_strides(t)[d0];
	return make_view(out, t, n, sh, st, fn);
}

int td_tensor_expand(td_tensor *out, const td_tensor *t, int ndim, const int64_t *shape)
{
	static const char fn[] = "td_tensor_expand";
	int64_t sh[TD_MAX_DIMS], st[TD_MAX_DIMS];
	const int64_t *tsh, *tst;
	int i, lead;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	if (ndim < t->ndim || ndim > TD_MAX_DIMS || (ndim > 0 && !shape))
		return td__error(TD_EINVAL, "%s: cannot expand %d dims to %d", fn, (int)t->ndim, ndim);
	tsh = td_tensor_shape(t);
	tst = td_tensor_strides(t);
	lead = ndim - t->ndim;
	for (i = 0; i < ndim; i++) {
		int it = i - lead;
		if (it < 0) {
			if (shape[i] < 0)
				return td__error(TD_EINVAL, "%s: size %lld for new dim %d", fn, (long long)shape[i],
					i);
			sh[i] = shape[i];
			st[i] = 0;
		} else if (shape[i] == -1 || shape[i] == tsh[it]) {
			sh[i] = tsh[it];
			st[i] = tst[it];
		} else if (tsh[it] == 1 && shape[i] >= 0) {
			sh[i] = shape[i];
			st[i] = 0;
		} else {
			char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
			return td__error(TD_ETYPE, "%s: shape %s cannot expand to %s", fn,
				td__format_shape(s1, sizeof(s1), t->ndim, tsh),
				td__format_shape(s2, sizeof(s2), ndim, shape));
		}
	}
	TD_TRY(td__shape_check(ndim, sh, t->dtype, NULL, NULL, fn));
	return make_view(out, t, ndim, sh, st, fn);
}

int td_tensor_unbind(td_tensor **tensors_out, size_t *count_out, const td_tensor *t, int dim)
{
	static const char fn[] = "td_tensor_unbind";
	td_tensor *arr;
	int64_t n, k;
	int d;

	if (!tensors_out || !count_out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	TD_TRY(td__wrap_dim(dim, t->ndim, &d, fn));
	n = td_tensor_shape(t)[d];
	arr = td__calloc(n ? (size_t)n : 1, sizeof(*arr));
	if (!arr)
		return td__error_nomem((size_t)n * sizeof(*arr));
	/* The views differ only in their offset: one set of dims (a block shared by all). */
	if (n > 0) {
		int rc = td__view_select(&arr[0], t, d, 0, fn);

		if (rc < 0) {
			td__free(arr);
			return rc;
		}
		td__dims_ref_n(&arr[0], (size_t)n - 1);
	}
	for (k = 1; k < n; k++) {
		td__tensor_copy_meta(&arr[k], &arr[0]);
		arr[k].offset += k * td_tensor_strides(t)[d];
		td_buffer_ref(arr[k].buffer);
	}
	*tensors_out = arr;
	*count_out = (size_t)n;
	return TD_OK;
}
