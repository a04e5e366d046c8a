/* SPDX-License-Identifier: MIT */
/*
 * dict_batch.c - operations over the batch dimensions of a dict: indexing
 * and indexed writes, unbind / split / chunk, stack / cat, reshape / view,
 * unsqueeze / squeeze / permute. Each applies the same tensor operation to
 * every leaf (td__dict_transform) and computes the new batch shape once.
 */
#include "td_internal.h"
#include "dict_impl.h"

/* ------------------------------------------------------------------------ */
/* Index expressions over batch dims                                         */
/* ------------------------------------------------------------------------ */

/* Most elements of an index expression over a dict. */
#define MAX_INDEX (TD_MAX_DIMS * 4)

typedef struct batch_index {
	td_index idx[MAX_INDEX]; /* ellipsis expanded into full slices over batch dims */
	size_t n;
	int ndim;                 /* resulting batch ndim */
	int64_t shape[TD_MAX_DIMS];
} batch_index;

/* A one-byte, never-freed buffer: index expressions are probed on a
 * zero-stride view of it to learn the resulting batch shape. */
static unsigned char probe_byte;
static struct td_buffer probe_buffer = {
	(1u << 30), TD_BUFFER_EXTERNAL, TD_BUFFER_READONLY, -1, &probe_byte, 1, NULL, NULL
};

static int dims_consumed(const td_index *x, int *out, const char *fn)
{
	switch (x->kind) {
	case TD_INDEX_NEWAXIS:
	case TD_INDEX_ELLIPSIS:
		*out = 0;
		return TD_OK;
	case TD_INDEX_TENSOR:
		if (!x->tensor)
			return td__error(TD_EINVAL, "%s: NULL index tensor", fn);
		*out = x->tensor->dtype == TD_DTYPE_BOOL ? x->tensor->ndim : 1;
		return TD_OK;
	case TD_INDEX_INT:
	case TD_INDEX_SLICE:
	case TD_INDEX_RANGE:
	case TD_INDEX_LIST:
	case TD_INDEX_MASK:
		*out = 1;
		return TD_OK;
	default:
		return td__error(TD_EINVAL, "%s: invalid index kind %d", fn, (int)x->kind);
	}
}

static int prepare_index(batch_index *bi, const td_dict *d, const td_index *idx, size_t n,
	const char *fn)
{
	int consumed = 0, c = 0;
	size_t i, ellipsis = SIZE_MAX;
	td_tensor probe, res;

	if (n && !idx)
		return td__error(TD_EINVAL, "%s: NULL index", fn);
	if (n > MAX_INDEX / 2)
		return td__error(TD_EINVAL, "%s: %zu index elements is too many", fn, n);
	for (i = 0; i < n; i++) {
		TD_TRY(dims_consumed(&idx[i], &c, fn));
		consumed += c;
		if (idx[i].kind == TD_INDEX_ELLIPSIS) {
			if (ellipsis != SIZE_MAX)
				return td__error(TD_EINVAL, "%s: an index can hold only one ellipsis", fn);
			ellipsis = i;
		}
	}
	if (consumed > d->batch_ndim)
		return td__error(TD_EINDEX, "%s: %d indices for a batch of %d dims", fn, consumed,
			(int)d->batch_ndim);
	bi->n = 0;
	for (i = 0; i < n; i++) {
		if (i == ellipsis) {
			for (c = 0; c < d->batch_ndim - consumed; c++)
				bi->idx[bi->n++] = td_index_all();
			continue;
		}
		bi->idx[bi->n++] = idx[i];
	}
	/* Probe: a zero-stride view with the batch shape gives the result's shape. */
	probe.buffer = &probe_buffer;
	probe.offset = 0;
	probe.dtype = TD_DTYPE_BOOL;
	probe.ndim = d->batch_ndim;
	memcpy(probe.shape, d->batch_shape, (size_t)d->batch_ndim * sizeof(int64_t));
	memset(probe.strides, 0, sizeof(probe.strides));
	TD_TRY(td_tensor_index(&res, &probe, bi->idx, bi->n));
	bi->ndim = res.ndim;
	memcpy(bi->shape, res.shape, (size_t)res.ndim * sizeof(int64_t));
	td_tensor_release(&res);
	return TD_OK;
}

static int leaf_index(td_tensor *out, const td_tensor *in, void *ctx)
{
	const batch_index *bi = ctx;

	return td_tensor_index(out, in, bi->idx, bi->n);
}

int td_dict_index(td_dict **out, const td_dict *d, const td_index *idx, size_t n)
{
	static const char fn[] = "td_dict_index";
	batch_index bi;

	if (!out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	TD_TRY(prepare_index(&bi, d, idx, n, fn));
	return td__dict_transform(out, d, bi.ndim, bi.shape, leaf_index, &bi, fn);
}

/* ------------------------------------------------------------------------ */
/* Indexed writes                                                            */
/* ------------------------------------------------------------------------ */

/*
 * Check (write == false) or perform the write of `v` into `d` at the index.
 * `root_v` is the batch ndim of the value's root and `root_d` of d's root:
 * a leaf of shape (value batch, rest) lands in (d batch, rest).
 */
static int put_rec(td_dict *d, const td_dict *v, const batch_index *bi, int root_d, int root_v,
	bool write, const char *fn)
{
	uint32_t i;

	for (i = 0; i < v->used; i++) {
		const td__entry *ev = &v->entries[i];
		td__entry *e;

		if (!ev->key)
			continue;
		e = td__dict_find(d, ev->key->data, ev->key->len, ev->key->hash);
		if (!e && d->locked)
			return td__error(TD_ELOCKED, "%s: cannot add '%s': the dict is locked", fn,
				ev->key->data);
		if (!e && !write)
			continue;
		if (!e) {
			/* Create the missing leaf or dict with d's batch, then write into it. */
			int64_t shape[TD_MAX_DIMS];
			const int64_t *src;
			int nd, extra;
			td__kref k = { ev->key->data, ev->key->len, ev->key->hash };
			td_value nv;
			int rc;

			if (ev->value.kind == TD_VALUE_TENSOR) {
				src = ev->value.u.tensor.shape;
				nd = ev->value.u.tensor.ndim;
			} else if (ev->value.kind == TD_VALUE_DICT) {
				src = ev->value.u.dict->batch_shape;
				nd = ev->value.u.dict->batch_ndim;
			} else {
				TD_TRY(td__dict_set_value(d, &k, 1, &ev->value, fn));
				continue;
			}
			extra = nd - root_v;
			if (root_d + extra > TD_MAX_DIMS)
				return td__error(TD_EINVAL, "%s: '%s' would exceed %d dims", fn,
					ev->key->data, TD_MAX_DIMS);
			memcpy(shape, d->batch_shape, (size_t)root_d * sizeof(int64_t));
			memcpy(shape + root_d, src + root_v, (size_t)extra * sizeof(int64_t));
			nv.kind = ev->value.kind;
			if (nv.kind == TD_VALUE_TENSOR)
				rc = td_tensor_zeros(&nv.u.tensor, ev->value.u.tensor.dtype, root_d + extra,
					shape);
			else
				rc = td__dict_alloc(&nv.u.dict, root_d + extra, shape, 4, fn);
			if (rc < 0)
				return rc;
			rc = td__dict_set_value(d, &k, 1, &nv, fn);
			if (nv.kind == TD_VALUE_TENSOR || rc < 0)
				td__value_release(&nv);
			TD_TRY(rc);
			e = td__dict_find(d, ev->key->data, ev->key->len, ev->key->hash);
		}
		if (ev->value.kind == TD_VALUE_DICT) {
			if (e->value.kind != TD_VALUE_DICT)
				return td__error(TD_ETYPE, "%s: '%s' is a dict in the value only", fn,
					ev->key->data);
			TD_TRY(put_rec(e->value.u.dict, ev->value.u.dict, bi, root_d, root_v, write, fn));
		} else if (ev->value.kind == TD_VALUE_TENSOR) {
			if (e->value.kind != TD_VALUE_TENSOR)
				return td__error(TD_ETYPE, "%s: '%s' is a tensor in the value only", fn,
					ev->key->data);
			if (write)
				TD_TRY(td_tensor_index_put(&e->value.u.tensor, bi->idx, bi->n,
					&ev->value.u.tensor));
			else
				TD_TRY(td__tensor_check_write(&e->value.u.tensor, fn, ev->key->data));
		} else if (e->value.kind != ev->value.kind ||
			   e->value.u.blob.length != ev->value.u.blob.length ||
			   memcmp(e->value.u.blob.data, ev->value.u.blob.data,
				   e->value.u.blob.length) != 0) {
			return td__error(TD_ETYPE, "%s: '%s': a non-tensor value cannot be written at "
				"an index", fn, ev->key->data);
		}
	}
	return TD_OK;
}

int td_dict_index_put(td_dict *d, const td_index *idx, size_t n, const td_dict *value)
{
	static const char fn[] = "td_dict_index_put";
	batch_index bi;

	if (!d || !value)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	TD_TRY(prepare_index(&bi, d, idx, n, fn));
	if (value->batch_ndim != bi.ndim ||
	    memcmp(value->batch_shape, bi.shape, (size_t)bi.ndim * sizeof(int64_t)) != 0) {
		char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
		return td__error(TD_ETYPE, "%s: the value's batch shape %s is not the indexed "
			"batch shape %s", fn,
			td__format_shape(s1, sizeof(s1), value->batch_ndim, value->batch_shape),
			td__format_shape(s2, sizeof(s2), bi.ndim, bi.shape));
	}
	TD_TRY(put_rec(d, value, &bi, d->batch_ndim, value->batch_ndim, false, fn));
	return put_rec(d, value, &bi, d->batch_ndim, value->batch_ndim, true, fn);
}

static int fill_rec(td_dict *d, const batch_index *bi, td_scalar s, bool write, const char *fn)
{
	uint32_t i;

	for (i = 0; i < d->used; i++) {
		td__entry *e = &d->entries[i];

		if (!e->key)
			continue;
		if (e->value.kind == TD_VALUE_DICT)
			TD_TRY(fill_rec(e->value.u.dict, bi, s, write, fn));
		else if (e->value.kind == TD_VALUE_TENSOR && write)
			TD_TRY(td_tensor_index_fill(&e->value.u.tensor, bi->idx, bi->n, s));
		else if (e->value.kind == TD_VALUE_TENSOR)
			TD_TRY(td__tensor_check_write(&e->value.u.tensor, fn, e->key->data));
	}
	return TD_OK;
}

int td_dict_index_fill(td_dict *d, const td_index *idx, size_t n, td_scalar s)
{
	static const char fn[] = "td_dict_index_fill";
	batch_index bi;

	if (!d)
		return td__error(TD_EINVAL, "%s: NULL dict", fn);
	TD_TRY(td__scalar_check(s, fn));
	TD_TRY(prepare_index(&bi, d, idx, n, fn));
	TD_TRY(fill_rec(d, &bi, s, false, fn));
	return fill_rec(d, &bi, s, true, fn);
}

/* ------------------------------------------------------------------------ */
/* unbind, split, chunk                                                      */
/* ------------------------------------------------------------------------ */

typedef struct slice_ctx {
	int dim;
	int64_t start, length; /* length < 0: select `start` and drop the dim */
} slice_ctx;

static int leaf_slice(td_tensor *out, const td_tensor *in, void *ctx)
{
	const slice_ctx *c = ctx;

	if (c->length < 0)
		return td_tensor_select(out, in, c->dim, c->start);
	return td_tensor_narrow(out, in, c->dim, c->start, c->length);
}

static int batch_dim(const td_dict *d, int dim, int *out, const char *fn)
{
	if (d->batch_ndim == 0)
		return td__error(TD_EINVAL, "%s: the dict has no batch dims", fn);
	return td__wrap_dim(dim, d->batch_ndim, out, fn);
}

/* Cut d along `dim` into pieces [starts[i], starts[i] + lengths[i]). */
static int pieces(td_dict ***out, size_t *count_out, const td_dict *d, int dim,
	const int64_t *lengths, size_t n, bool drop, const char *fn)
{
	int64_t shape[TD_MAX_DIMS];
	td_dict **arr;
	slice_ctx c;
	size_t i;
	int k, ndim;

	arr = td__calloc(n ? n : 1, sizeof(*arr));
	if (!arr)
		return td__error_nomem(n * sizeof(*arr));
	c.dim = dim;
	c.start = 0;
	for (i = 0; i < n; i++) {
		int rc;
		ndim = 0;
		for (k = 0; k < d->batch_ndim; k++) {
			if (k == dim && drop)
				continue;
			shape[ndim++] = k == dim ? lengths[i] : d->batch_shape[k];
		}
		c.length = drop ? -1 : lengths[i];
		rc = td__dict_transform(&arr[i], d, ndim, shape, leaf_slice, &c, fn);
		if (rc < 0) {
			td_dict_array_free(arr, i);
			return rc;
		}
		c.start += drop ? 1 : lengths[i];
	}
	*out = arr;
	*count_out = n;
	return TD_OK;
}

int td_dict_unbind(td_dict ***dicts_out, size_t *count_out, const td_dict *d, int dim)
{
	static const char fn[] = "td_dict_unbind";
	int64_t *ones;
	size_t n;
	int dd, rc;

	if (!dicts_out || !count_out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	TD_TRY(batch_dim(d, dim, &dd, fn));
	n = (size_t)d->batch_shape[dd];
	ones = td__calloc(n ? n : 1, sizeof(int64_t));
	if (!ones)
		return td__error_nomem(n * sizeof(int64_t));
	rc = pieces(dicts_out, count_out, d, dd, ones, n, true, fn);
	td__free(ones);
	return rc;
}

int td_dict_split_sizes(td_dict ***dicts_out, size_t *count_out, const td_dict *d,
	const int64_t *sizes, size_t nsizes, int dim)
{
	static const char fn[] = "td_dict_split_sizes";
	int64_t total = 0;
	size_t i;
	int dd;

	if (!dicts_out || !count_out || !d || (nsizes && !sizes))
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	TD_TRY(batch_dim(d, dim, &dd, fn));
	for (i = 0; i < nsizes; i++) {
		if (sizes[i] < 0 || !td__add_i64(total, sizes[i], &total))
			return td__error(TD_EINVAL, "%s: invalid size %lld", fn, (long long)sizes[i]);
	}
	if (total != d->batch_shape[dd])
		return td__error(TD_EINVAL, "%s: sizes add up to %lld, dim %d has %lld", fn,
			(long long)total, dim, (long long)d->batch_shape[dd]);
	return pieces(dicts_out, count_out, d, dd, sizes, nsizes, false, fn);
}

/* Pieces of `size` along a dim of `n` (the last may be shorter; one empty piece if n == 0). */
static int even_pieces(td_dict ***out, size_t *count_out, const td_dict *d, int dd,
	int64_t size, const char *fn)
{
	int64_t n = d->batch_shape[dd], k, count = n == 0 ? 1 : (n + size - 1) / size;
	int64_t *lengths;
	int rc;

	lengths = td__calloc((size_t)count, sizeof(int64_t));
	if (!lengths)
		return td__error_nomem((size_t)count * sizeof(int64_t));
	for (k = 0; k < count; k++)
		lengths[k] = n - k * size < size ? n - k * size : size;
	rc = pieces(out, count_out, d, dd, lengths, (size_t)count, false, fn);
	td__free(lengths);
	return rc;
}

int td_dict_split(td_dict ***dicts_out, size_t *count_out, const td_dict *d, int64_t split_size,
	int dim)
{
	static const char fn[] = "td_dict_split";
	int dd;

	if (!dicts_out || !count_out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	if (split_size <= 0)
		return td__error(TD_EINVAL, "%s: split size %lld must be positive", fn,
			(long long)split_size);
	TD_TRY(batch_dim(d, dim, &dd, fn));
	return even_pieces(dicts_out, count_out, d, dd, split_size, fn);
}

int td_dict_chunk(td_dict ***dicts_out, size_t *count_out, const td_dict *d, size_t chunks,
	int dim)
{
	static const char fn[] = "td_dict_chunk";
	int64_t n, size;
	int dd;

	if (!dicts_out || !count_out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	if (chunks == 0 || chunks > (size_t)INT64_MAX)
		return td__error(TD_EINVAL, "%s: the number of chunks must be positive", fn);
	TD_TRY(batch_dim(d, dim, &dd, fn));
	n = d->batch_shape[dd];
	size = n == 0 ? 1 : (n + (int64_t)chunks - 1) / (int64_t)chunks;
	return even_pieces(dicts_out, count_out, d, dd, size, fn);
}

/* ------------------------------------------------------------------------ */
/* reshape, view, unsqueeze, squeeze, permute                                */
/* ------------------------------------------------------------------------ */

typedef struct shape_ctx {
	int old_ndim;              /* batch ndim of the root being reshaped */
	int ndim;                  /* new batch ndim */
	const int64_t *shape;      /* new batch shape */
	int dim;                   /* unsqueeze / squeeze */
	int perm[TD_MAX_DIMS];     /* permute */
	bool view_only;
} shape_ctx;

static int leaf_reshape(td_tensor *out, const td_tensor *in, void *ctx)
{
	const shape_ctx *c = ctx;
	int64_t shape[TD_MAX_DIMS];
	int rest = in->ndim - c->old_ndim;

	if (c->ndim + rest > TD_MAX_DIMS)
		return td__error(TD_EINVAL, "td_dict_reshape: a leaf would exceed %d dims",
			TD_MAX_DIMS);
	memcpy(shape, c->shape, (size_t)c->ndim * sizeof(int64_t));
	memcpy(shape + c->ndim, in->shape + c->old_ndim, (size_t)rest * sizeof(int64_t));
	if (c->view_only)
		return td_tensor_view(out, in, c->ndim + rest, shape);
	return td_tensor_reshape(out, in, c->ndim + rest, shape);
}

static int reshape_impl(td_dict **out, const td_dict *d, int ndim, const int64_t *shape,
	bool view_only, const char *fn)
{
	int64_t resolved[TD_MAX_DIMS], known = 1, numel;
	shape_ctx c;
	int i, infer = -1;

	if (!out || !d || (ndim > 0 && !shape))
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	if (ndim < 0 || ndim > TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: ndim %d is outside 0..%d", fn, ndim, TD_MAX_DIMS);
	numel = td__numel(d->batch_ndim, d->batch_shape);
	for (i = 0; i < ndim; i++) {
		if (shape[i] == -1 && infer < 0) {
			infer = i;
			continue;
		}
		if (shape[i] < 0 || !td__mul_i64(known, shape[i], &known))
			return td__error(TD_EINVAL, "%s: invalid size %lld at dim %d", fn,
				(long long)shape[i], i);
		resolved[i] = shape[i];
	}
	if (infer >= 0)
		resolved[infer] = known ? numel / known : 0;
	if ((infer >= 0 ? known * resolved[infer] : known) != numel) {
		char s[TD_SHAPE_STR_LEN];
		return td__error(TD_ETYPE, "%s: batch shape %s does not hold %lld elements", fn,
			td__format_shape(s, sizeof(s), ndim, shape), (long long)numel);
	}
	c.old_ndim = d->batch_ndim;
	c.ndim = ndim;
	c.shape = resolved;
	c.view_only = view_only;
	return td__dict_transform(out, d, ndim, resolved, leaf_reshape, &c, fn);
}

int td_dict_reshape(td_dict **out, const td_dict *d, int ndim, const int64_t *shape)
{
	return reshape_impl(out, d, ndim, shape, false, "td_dict_reshape");
}

int td_dict_view(td_dict **out, const td_dict *d, int ndim, const int64_t *shape)
{
	return reshape_impl(out, d, ndim, shape, true, "td_dict_view");
}

static int leaf_unsqueeze(td_tensor *out, const td_tensor *in, void *ctx)
{
	return td_tensor_unsqueeze(out, in, ((const shape_ctx *)ctx)->dim);
}

static int leaf_squeeze(td_tensor *out, const td_tensor *in, void *ctx)
{
	return td_tensor_squeeze(out, in, ((const shape_ctx *)ctx)->dim);
}

static int leaf_permute(td_tensor *out, const td_tensor *in, void *ctx)
{
	const shape_ctx *c = ctx;
	int dims[TD_MAX_DIMS], i;

	for (i = 0; i < in->ndim; i++)
		dims[i] = i < c->old_ndim ? c->perm[i] : i;
	return td_tensor_permute(out, in, dims);
}

int td_dict_unsqueeze(td_dict **out, const td_dict *d, int dim)
{
	static const char fn[] = "td_dict_unsqueeze";
	int64_t shape[TD_MAX_DIMS];
	shape_ctx c;
	int i, k = 0;

	if (!out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	if (d->batch_ndim >= TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: the batch already has %d dims", fn, TD_MAX_DIMS);
	TD_TRY(td__wrap_dim(dim, d->batch_ndim + 1, &c.dim, fn));
	for (i = 0; i <= d->batch_ndim; i++)
		shape[i] = i == c.dim ? 1 : d->batch_shape[k++];
	return td__dict_transform(out, d, d->batch_ndim + 1, shape, leaf_unsqueeze, &c, fn);
}

int td_dict_squeeze(td_dict **out, const td_dict *d, int dim)
{
	static const char fn[] = "td_dict_squeeze";
	int64_t shape[TD_MAX_DIMS];
	shape_ctx c;
	int i, k = 0;

	if (!out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	TD_TRY(batch_dim(d, dim, &c.dim, fn));
	if (d->batch_shape[c.dim] != 1)
		return td__dict_copy(out, d, fn);
	for (i = 0; i < d->batch_ndim; i++)
		if (i != c.dim)
			shape[k++] = d->batch_shape[i];
	return td__dict_transform(out, d, k, shape, leaf_squeeze, &c, fn);
}

int td_dict_permute(td_dict **out, const td_dict *d, const int *dims)
{
	static const char fn[] = "td_dict_permute";
	bool seen[TD_MAX_DIMS] = { false };
	int64_t shape[TD_MAX_DIMS];
	shape_ctx c;
	int i;

	if (!out || !d || (!dims && d->batch_ndim > 0))
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	for (i = 0; i < d->batch_ndim; i++) {
		TD_TRY(td__wrap_dim(dims[i], d->batch_ndim, &c.perm[i], fn));
		if (seen[c.perm[i]])
			return td__error(TD_EINVAL, "%s: dim %d appears twice", fn, dims[i]);
		seen[c.perm[i]] = true;
		shape[i] = d->batch_shape[c.perm[i]];
	}
	c.old_ndim = d->batch_ndim;
	return td__dict_transform(out, d, d->batch_ndim, shape, leaf_permute, &c, fn);
}
