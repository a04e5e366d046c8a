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
		return td__error(TD_EINDEX, "%s: index %lld is out of range for dim %d of size %lld",
			fn, (long long)index, dim, (long long)td_tensor_shape(t)[d]);
	td__view_select(&tmp, t, d, k);
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
	if (start < 0 || length < 0 || start > td_tensor_shape(t)[d] || length > td_tensor_shape(t)[d] - start)
		return td__error(TD_EINDEX, "%s: [%lld, %lld + %lld) is outside dim %d of size %lld",
			fn, (long long)start, (long long)start, (long long)length, dim,
			(long long)td_tensor_shape(t)[d]);
	td__view_narrow(&tmp, t, d, start, length);
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

/* Resolve a requested shape (one -1 allowed) against `numel` elements. */
static int infer_shape(int ndim, const int64_t *shape, int64_t numel, int64_t *out,
	const char *fn)
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
			return td__error(TD_EINVAL, "%s: invalid size %lld at dim %d", fn,
				(long long)shape[i], i);
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
		if (td_ == 0 || (oshape[td_ - 1] != 1 &&
				 ostrides[td_ - 1] != tensor_numel * chunk_base)) {
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
	td_tensor tmp;
	int i;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	TD_TRY(infer_shape(ndim, shape, td__numel(t->ndim, td_tensor_shape(t)), nshape, fn));
	if (view_strides(t->ndim, td_tensor_shape(t), td_tensor_strides(t), ndim, nshape, nstrides)) {
		tmp = *t;
		tmp.ndim = ndim;
		for (i = 0; i < ndim; i++) {
			tmp.shape[i] = nshape[i];
			tmp.strides[i] = nstrides[i];
		}
		td_buffer_ref(tmp.buffer);
		td__tensor_assign(out, t, &tmp);
		return TD_OK;
	}
	if (!allow_copy) {
		char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
		return td__error(TD_ETYPE,
			"%s: a tensor of shape %s with these strides cannot be viewed as %s; "
			"use td_tensor_reshape()", fn,
			td__format_shape(s1, sizeof(s1), t->ndim, td_tensor_shape(t)),
			td__format_shape(s2, sizeof(s2), ndim, nshape));
	}
	TD_TRY(td_tensor_clone(&tmp, t));
	tmp.ndim = ndim;
	for (i = 0; i < ndim; i++)
		tmp.shape[i] = nshape[i];
	td__contiguous_strides(ndim, td_tensor_shape(&tmp), tmp.strides);
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
	td_tensor tmp;
	int64_t stride = 1;
	int d, i;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	if (t->ndim >= TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: a tensor has at most %d dims", fn, TD_MAX_DIMS);
	TD_TRY(td__wrap_dim(dim, t->ndim + 1, &d, fn));
	/*
	 * torch gives the new dim the stride size * stride of the dim it is
	 * inserted before. The stride of a size-1 dim never matters, so when
	 * that product overflows (a huge stride in a huge device buffer) 1 is
	 * used instead.
	 */
	if (d < t->ndim && !td__mul_i64(td_tensor_shape(t)[d], td_tensor_strides(t)[d], &stride))
		stride = 1;
	tmp = *t;
	for (i = t->ndim; i > d; i--) {
		tmp.shape[i] = td_tensor_shape(t)[i - 1];
		tmp.strides[i] = td_tensor_strides(t)[i - 1];
	}
	tmp.shape[d] = 1;
	tmp.strides[d] = stride;
	tmp.ndim = t->ndim + 1;
	td_buffer_ref(tmp.buffer);
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

int td_tensor_squeeze(td_tensor *out, const td_tensor *t, int dim)
{
	static const char fn[] = "td_tensor_squeeze";
	td_tensor tmp;
	int d, i;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	if (t->ndim == 0 && (dim == 0 || dim == -1)) {
		td_tensor_ref(&tmp, t);
		td__tensor_assign(out, t, &tmp);
		return TD_OK;
	}
	TD_TRY(td__wrap_dim(dim, t->ndim, &d, fn));
	tmp = *t;
	if (td_tensor_shape(t)[d] == 1) {
		for (i = d; i < t->ndim - 1; i++) {
			tmp.shape[i] = td_tensor_shape(t)[i + 1];
			tmp.strides[i] = td_tensor_strides(t)[i + 1];
		}
		tmp.ndim = t->ndim - 1;
	}
	td_buffer_ref(tmp.buffer);
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

int td_tensor_squeeze_all(td_tensor *out, const td_tensor *t)
{
	static const char fn[] = "td_tensor_squeeze_all";
	td_tensor tmp;
	int i, n = 0;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	tmp = *t;
	for (i = 0; i < t->ndim; i++) {
		if (td_tensor_shape(t)[i] == 1)
			continue;
		tmp.shape[n] = td_tensor_shape(t)[i];
		tmp.strides[n] = td_tensor_strides(t)[i];
		n++;
	}
	tmp.ndim = n;
	td_buffer_ref(tmp.buffer);
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

int td_tensor_permute(td_tensor *out, const td_tensor *t, const int *dims)
{
	static const char fn[] = "td_tensor_permute";
	bool seen[TD_MAX_DIMS] = { false };
	td_tensor tmp;
	int i;

	if (!out || (!dims && t && t->ndim > 0))
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	tmp = *t;
	for (i = 0; i < t->ndim; i++) {
		int d;
		TD_TRY(td__wrap_dim(dims[i], t->ndim, &d, fn));
		if (seen[d])
			return td__error(TD_EINVAL, "%s: dim %d appears twice", fn, dims[i]);
		seen[d] = true;
		tmp.shape[i] = td_tensor_shape(t)[d];
		tmp.strides[i] = td_tensor_strides(t)[d];
	}
	td_buffer_ref(tmp.buffer);
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

int td_tensor_transpose(td_tensor *out, const td_tensor *t, int dim0, int dim1)
{
	static const char fn[] = "td_tensor_transpose";
	td_tensor tmp;
	int d0, d1;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	TD_TRY(td__wrap_dim(dim0, t->ndim, &d0, fn));
	TD_TRY(td__wrap_dim(dim1, t->ndim, &d1, fn));
	tmp = *t;
	tmp.shape[d0] = td_tensor_shape(t)[d1];
	tmp.strides[d0] = td_tensor_strides(t)[d1];
	tmp.shape[d1] = td_tensor_shape(t)[d0];
	tmp.strides[d1] = td_tensor_strides(t)[d0];
	td_buffer_ref(tmp.buffer);
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

int td_tensor_expand(td_tensor *out, const td_tensor *t, int ndim, const int64_t *shape)
{
	static const char fn[] = "td_tensor_expand";
	td_tensor tmp;
	int i, lead;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	if (ndim < t->ndim || ndim > TD_MAX_DIMS || (ndim > 0 && !shape))
		return td__error(TD_EINVAL, "%s: cannot expand %d dims to %d", fn, (int)t->ndim, ndim);
	lead = ndim - t->ndim;
	tmp = *t;
	tmp.ndim = ndim;
	for (i = 0; i < ndim; i++) {
		int it = i - lead;
		if (it < 0) {
			if (shape[i] < 0)
				return td__error(TD_EINVAL, "%s: size %lld for new dim %d", fn,
					(long long)shape[i], i);
			tmp.shape[i] = shape[i];
			tmp.strides[i] = 0;
		} else if (shape[i] == -1 || shape[i] == td_tensor_shape(t)[it]) {
			tmp.shape[i] = td_tensor_shape(t)[it];
			tmp.strides[i] = td_tensor_strides(t)[it];
		} else if (td_tensor_shape(t)[it] == 1 && shape[i] >= 0) {
			tmp.shape[i] = shape[i];
			tmp.strides[i] = 0;
		} else {
			char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
			return td__error(TD_ETYPE, "%s: shape %s cannot expand to %s", fn,
				td__format_shape(s1, sizeof(s1), t->ndim, td_tensor_shape(t)),
				td__format_shape(s2, sizeof(s2), ndim, shape));
		}
	}
	TD_TRY(td__shape_check(ndim, td_tensor_shape(&tmp), tmp.dtype, NULL, NULL, fn));
	td_buffer_ref(tmp.buffer);
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

int td_tensor_unbind(td_tensor **tensors_out, size_t *count_out, const td_tensor *t, int dim)
{
	static const char fn[] = "td_tensor_unbind";
	td_tensor *arr;
	int64_t n, k;
	int d, i;

	if (!tensors_out || !count_out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	TD_TRY(td__wrap_dim(dim, t->ndim, &d, fn));
	n = td_tensor_shape(t)[d];
	arr = td__calloc(n ? (size_t)n : 1, sizeof(*arr));
	if (!arr)
		return td__error_nomem((size_t)n * sizeof(*arr));
	for (k = 0; k < n; k++) {
		td_tensor *v = &arr[k];
		*v = *t;
		v->offset += k * td_tensor_strides(t)[d];
		for (i = d; i < t->ndim - 1; i++) {
			v->shape[i] = td_tensor_shape(t)[i + 1];
			v->strides[i] = td_tensor_strides(t)[i + 1];
		}
		v->ndim = t->ndim - 1;
		td_buffer_ref(v->buffer);
	}
	*tensors_out = arr;
	*count_out = (size_t)n;
	return TD_OK;
}
