/* SPDX-License-Identifier: MIT */
/*
 * test_tensor_shape.c - view operations (lib/tensor_shape.c): select,
 * narrow, reshape/view, unsqueeze/squeeze, permute/transpose, expand,
 * unbind. Random views of int64 buffers whose element p holds p are checked
 * element by element against a naive model of each operation.
 */
#include "td_test.h"

#include <string.h>

/* Whether two tensor values describe the same view (entries past ndim are unspecified). */
static bool same_view(const td_tensor *a, const td_tensor *b)
{
	return a->buffer == b->buffer && a->offset == b->offset && a->dtype == b->dtype &&
		a->ndim == b->ndim &&
		memcmp(td_tensor_shape(a), td_tensor_shape(b), sizeof(int64_t) * (size_t)a->ndim) == 0 &&
		memcmp(td_tensor_strides(a), td_tensor_strides(b), sizeof(int64_t) * (size_t)a->ndim) == 0;
}

static td_buffer *device_buffer(size_t nbytes)
{
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	td_buffer *b;

	o.memory = TD_MEMORY_DEVICE;
	o.device = 0;
	/* A fake device address: the library must never dereference it. */
	td_cr_assert_ok(td_buffer_wrap(&b, (void *)(uintptr_t)0xdead0000u, nbytes, &o));
	return b;
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	int i;

	for (i = 0; i < ndim; i++)
		n *= shape[i];
	return n;
}

/* A heap buffer of `n` int64 values whose element p holds p. */
static td_buffer *positions(int64_t n)
{
	td_buffer *b;
	int64_t i;

	td_cr_assert_ok(td_buffer_new(&b, (size_t)(n > 0 ? n : 1) * sizeof(int64_t), 0));
	for (i = 0; i < n; i++)
		((int64_t *)td_buffer_data(b))[i] = i;
	return b;
}

/* A contiguous int64 tensor of `shape` holding 0, 1, 2, ... */
static void arange(td_tensor *out, int ndim, const int64_t *shape)
{
	td_buffer *b = positions(numel_of(ndim, shape));

	td_cr_assert_ok(td_tensor_from_buffer(out, b, TD_DTYPE_I64, ndim, shape, NULL, 0));
	td_buffer_unref(b);
}

static uint64_t rnd(uint64_t *rng, uint64_t n)
{
	return td_test_rand(rng) % n;
}

/*
 * A random int64 view over a fresh buffer of positions: sizes 1..4 (0 now
 * and then when `allow_empty`), strides contiguous (mode 0), padded (1),
 * permuted (2) or arbitrary with overlaps and zeros (3), a small offset.
 */
static void random_view(td_tensor *out, uint64_t *rng, int ndim, bool allow_empty)
{
	int64_t shape[TD_MAX_DIMS], strides[TD_MAX_DIMS], extent, offset;
	int mode = (int)rnd(rng, 4), perm[TD_MAX_DIMS], i;
	td_buffer *b;

	for (i = 0; i < ndim; i++) {
		shape[i] = allow_empty && rnd(rng, 8) == 0 ? 0 : 1 + (int64_t)rnd(rng, 4);
		perm[i] = i;
	}
	if (mode == 3) {
		for (i = 0; i < ndim; i++)
			strides[i] = (int64_t)rnd(rng, 6);
	} else {
		int64_t s = 1;
		if (mode == 2) {
			for (i = ndim - 1; i > 0; i--) {
				int j = (int)rnd(rng, (uint64_t)i + 1), tmp = perm[i];
				perm[i] = perm[j];
				perm[j] = tmp;
			}
		}
		for (i = ndim - 1; i >= 0; i--) {
			int d = perm[i];
			strides[d] = s;
			s = s * (shape[d] > 1 ? shape[d] : 1) + (mode == 1 ? (int64_t)rnd(rng, 3) : 0);
		}
	}
	offset = (int64_t)rnd(rng, 3);
	extent = offset + 1;
	for (i = 0; i < ndim; i++)
		if (shape[i] > 0)
			extent += (shape[i] - 1) * strides[i];
	b = positions(extent);
	td_cr_assert_ok(td_tensor_from_buffer(out, b, TD_DTYPE_I64, ndim, shape, strides, offset));
	td_buffer_unref(b);
}

/* ------------------------------------------------------------------------ */
/* The naive model: where element `vidx` of the result comes from in `t`.    */
/* ------------------------------------------------------------------------ */

typedef struct map_ctx {
	const td_tensor *t;
	int d;                 /* select, narrow, unsqueeze, squeeze: the dim (wrapped) */
	int64_t k;             /* select: the index; narrow: the start */
	int dims[TD_MAX_DIMS]; /* permute: wrapped dims */
	int lead;              /* expand: number of new leading dims */
} map_ctx;

typedef void (*map_fn)(const map_ctx *c, const int64_t *vidx, int64_t *tidx);

static void map_select(const map_ctx *c, const int64_t *vidx, int64_t *tidx)
{
	int i;

	for (i = 0; i < c->t->ndim; i++)
		tidx[i] = i < c->d ? vidx[i] : i == c->d ? c->k : vidx[i - 1];
}

static void map_narrow(const map_ctx *c, const int64_t *vidx, int64_t *tidx)
{
	int i;

	for (i = 0; i < c->t->ndim; i++)
		tidx[i] = vidx[i] + (i == c->d ? c->k : 0);
}

static void map_permute(const map_ctx *c, const int64_t *vidx, int64_t *tidx)
{
	int i;

	for (i = 0; i < c->t->ndim; i++)
		tidx[c->dims[i]] = vidx[i];
}

static void map_unsqueeze(const map_ctx *c, const int64_t *vidx, int64_t *tidx)
{
	int i;

	for (i = 0; i < c->t->ndim; i++)
		tidx[i] = vidx[i < c->d ? i : i + 1];
}

static void map_squeeze_all(const map_ctx *c, const int64_t *vidx, int64_t *tidx)
{
	int i, n = 0;

	for (i = 0; i < c->t->ndim; i++)
		tidx[i] = td_tensor_shape(c->t)[i] == 1 ? 0 : vidx[n++];
}

static void map_expand(const map_ctx *c, const int64_t *vidx, int64_t *tidx)
{
	int i;

	for (i = 0; i < c->t->ndim; i++)
		tidx[i] = td_tensor_shape(c->t)[i] == 1 ? 0 : vidx[i + c->lead];
}

/* Check that every element of the view `v` is element map(vidx) of `c->t`. */
static void assert_view_maps(const td_tensor *v, const map_ctx *c, map_fn map, const char *what)
{
	int64_t n = numel_of(v->ndim, td_tensor_shape(v)), f;

	cr_assert_eq(v->buffer, c->t->buffer, "%s: not a view of the input", what);
	cr_assert_eq(v->dtype, c->t->dtype, "%s: dtype changed", what);
	for (f = 0; f < n; f++) {
		int64_t vidx[TD_MAX_DIMS], tidx[TD_MAX_DIMS];
		td_scalar s;

		td_test_unravel(v->ndim, td_tensor_shape(v), f, vidx);
		map(c, vidx, tidx);
		td_cr_assert_ok(td_tensor_get(&s, v, vidx));
		cr_assert_eq(s.v.i, td_test_elem_pos(c->t, tidx), "%s: element %lld is %lld, expected %lld",
			what, (long long)f, (long long)s.v.i, (long long)td_test_elem_pos(c->t, tidx));
	}
}

/* ------------------------------------------------------------------------ */
/* select, narrow, unbind                                                    */
/* ------------------------------------------------------------------------ */

Test(shape, select_matches_the_model_on_random_views)
{
	uint64_t rng = 1;
	int it;

	for (it = 0; it < 150; it++) {
		int ndim = 1 + (int)rnd(&rng, 5), dim;
		td_tensor t;

		random_view(&t, &rng, ndim, true);
		for (dim = -ndim; dim < ndim; dim++) {
			int d = dim < 0 ? dim + ndim : dim;
			int64_t k, size = td_tensor_shape(&t)[d];
			td_tensor v;

			for (k = -size; k < size; k++) {
				map_ctx c = { &t, d, k < 0 ? k + size : k, { 0 }, 0 };
				td_cr_assert_ok(td_tensor_select(&v, &t, dim, k));
				cr_assert_eq(v.ndim, ndim - 1);
				assert_view_maps(&v, &c, map_select, "select");
				td_tensor_release(&v);
			}
			td_test_poison(&v);
			td_cr_assert_err(td_tensor_select(&v, &t, dim, size), TD_EINDEX);
			td_cr_assert_err(td_tensor_select(&v, &t, dim, -size - 1), TD_EINDEX);
			td_test_assert_poisoned(&v);
		}
		cr_assert_eq(td_buffer_refcount(t.buffer), 1);
		td_tensor_release(&t);
	}
}

Test(shape, narrow_matches_the_model_on_random_views)
{
	uint64_t rng = 2;
	int it;

	for (it = 0; it < 150; it++) {
		int ndim = 1 + (int)rnd(&rng, 4), dim;
		td_tensor t;

		random_view(&t, &rng, ndim, true);
		for (dim = -ndim; dim < ndim; dim++) {
			int d = dim < 0 ? dim + ndim : dim;
			int64_t start, len, size = td_tensor_shape(&t)[d];
			td_tensor v;

			for (start = 0; start <= size; start++) {
				for (len = 0; start + len <= size; len++) {
					map_ctx c = { &t, d, start, { 0 }, 0 };
					td_cr_assert_ok(td_tensor_narrow(&v, &t, dim, start, len));
					cr_assert_eq(v.ndim, ndim);
					cr_assert_eq(td_tensor_shape(&v)[d], len);
					assert_view_maps(&v, &c, map_narrow, "narrow");
					td_tensor_release(&v);
				}
				td_cr_assert_err(td_tensor_narrow(&v, &t, dim, start, size - start + 1), TD_EINDEX);
			}
			td_cr_assert_err(td_tensor_narrow(&v, &t, dim, -1, 1), TD_EINDEX);
			td_cr_assert_err(td_tensor_narrow(&v, &t, dim, size + 1, 0), TD_EINDEX);
			td_cr_assert_err(td_tensor_narrow(&v, &t, dim, 0, -1), TD_EINDEX);
			td_cr_assert_err(td_tensor_narrow(&v, &t, dim, 1, INT64_MAX), TD_EINDEX);
		}
		td_tensor_release(&t);
	}
}

Test(shape, unbind_gives_every_select)
{
	uint64_t rng = 3;
	int it;

	for (it = 0; it < 100; it++) {
		int ndim = 1 + (int)rnd(&rng, 4), dim;
		td_tensor t;

		random_view(&t, &rng, ndim, true);
		for (dim = -ndim; dim < ndim; dim++) {
			int d = dim < 0 ? dim + ndim : dim;
			td_tensor *arr;
			size_t n, k;

			td_cr_assert_ok(td_tensor_unbind(&arr, &n, &t, dim));
			cr_assert_eq(n, (size_t)td_tensor_shape(&t)[d]);
			cr_assert_eq(td_buffer_refcount(t.buffer), 1 + n);
			for (k = 0; k < n; k++) {
				map_ctx c = { &t, d, (int64_t)k, { 0 }, 0 };
				td_tensor s;
				cr_assert_eq(arr[k].ndim, ndim - 1);
				assert_view_maps(&arr[k], &c, map_select, "unbind");
				td_cr_assert_ok(td_tensor_select(&s, &t, dim, (int64_t)k));
				cr_assert(same_view(&arr[k], &s));
				td_tensor_release(&s);
			}
			td_tensor_array_free(arr, n);
		}
		cr_assert_eq(td_buffer_refcount(t.buffer), 1);
		td_tensor_release(&t);
	}
}

Test(shape, select_narrow_and_unbind_refuse_bad_arguments)
{
	static const int64_t shape[2] = { 3, 4 };
	td_tensor t, out, released = TD_TENSOR_INIT, *arr = (td_tensor *)0x1;
	size_t n = 77;

	arange(&t, 2, shape);
	td_test_poison(&out);
	td_cr_assert_err(td_tensor_select(NULL, &t, 0, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_select(&out, NULL, 0, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_select(&out, &released, 0, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_select(&out, &t, 2, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_select(&out, &t, -3, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_narrow(NULL, &t, 0, 0, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_narrow(&out, NULL, 0, 0, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_narrow(&out, &released, 0, 0, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_narrow(&out, &t, 2, 0, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_narrow(&out, &t, -3, 0, 1), TD_EINVAL);
	td_test_assert_poisoned(&out);
	td_cr_assert_err(td_tensor_unbind(NULL, &n, &t, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_unbind(&arr, NULL, &t, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_unbind(&arr, &n, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_unbind(&arr, &n, &released, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_unbind(&arr, &n, &t, 2), TD_EINVAL);
	td_cr_assert_err(td_tensor_unbind(&arr, &n, &t, -3), TD_EINVAL);
	cr_assert_eq(arr, (td_tensor *)0x1);
	cr_assert_eq(n, 77);
	td_tensor_release(&t);

	/* A 0-d tensor has no dim to select, narrow or unbind. */
	arange(&t, 0, NULL);
	td_cr_assert_err(td_tensor_select(&out, &t, 0, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_narrow(&out, &t, 0, 0, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_unbind(&arr, &n, &t, 0), TD_EINVAL);
	td_test_assert_poisoned(&out);
	cr_assert_eq(td_buffer_refcount(t.buffer), 1);
	td_tensor_release(&t);
}

/* ------------------------------------------------------------------------ */
/* permute, transpose                                                        */
/* ------------------------------------------------------------------------ */

Test(shape, permute_matches_the_model_on_random_views)
{
	uint64_t rng = 4;
	int it;

	for (it = 0; it < 300; it++) {
		int ndim = (int)rnd(&rng, 6), dims[TD_MAX_DIMS], i;
		map_ctx c = { NULL, 0, 0, { 0 }, 0 };
		td_tensor t, v;

		random_view(&t, &rng, ndim, true);
		c.t = &t;
		for (i = 0; i < ndim; i++)
			c.dims[i] = i;
		for (i = ndim - 1; i > 0; i--) {
			int j = (int)rnd(&rng, (uint64_t)i + 1), tmp = c.dims[i];
			c.dims[i] = c.dims[j];
			c.dims[j] = tmp;
		}
		for (i = 0; i < ndim; i++)
			dims[i] = rnd(&rng, 2) ? c.dims[i] - ndim : c.dims[i];
		td_cr_assert_ok(td_tensor_permute(&v, &t, ndim ? dims : NULL));
		cr_assert_eq(v.ndim, ndim);
		for (i = 0; i < ndim; i++) {
			cr_assert_eq(td_tensor_shape(&v)[i], td_tensor_shape(&t)[c.dims[i]]);
			cr_assert_eq(td_tensor_strides(&v)[i], td_tensor_strides(&t)[c.dims[i]]);
		}
		cr_assert_eq(v.offset, t.offset);
		assert_view_maps(&v, &c, map_permute, "permute");
		td_tensor_release(&v);
		td_tensor_release(&t);
	}
}

Test(shape, transpose_matches_the_model_for_every_pair)
{
	uint64_t rng = 5;
	int it;

	for (it = 0; it < 60; it++) {
		int ndim = 1 + (int)rnd(&rng, 4), a, b, i;
		td_tensor t;

		random_view(&t, &rng, ndim, true);
		for (a = -ndim; a < ndim; a++) {
			for (b = -ndim; b < ndim; b++) {
				map_ctx c = { &t, 0, 0, { 0 }, 0 };
				int da = a < 0 ? a + ndim : a, db = b < 0 ? b + ndim : b;
				td_tensor v;

				for (i = 0; i < ndim; i++)
					c.dims[i] = i == da ? db : i == db ? da : i;
				td_cr_assert_ok(td_tensor_transpose(&v, &t, a, b));
				assert_view_maps(&v, &c, map_permute, "transpose");
				cr_assert_eq(td_tensor_strides(&v)[da], td_tensor_strides(&t)[db]);
				td_tensor_release(&v);
			}
		}
		td_tensor_release(&t);
	}
}

Test(shape, permute_and_transpose_refuse_bad_arguments)
{
	static const int64_t shape[3] = { 2, 3, 4 };
	static const int twice[3] = { 0, 1, -3 }, outside[3] = { 0, 1, 3 }, below[3] = { -4, 1, 2 };
	static const int ok[3] = { 2, 0, 1 };
	td_tensor t, out, released = TD_TENSOR_INIT;

	arange(&t, 3, shape);
	td_test_poison(&out);
	td_cr_assert_err(td_tensor_permute(NULL, &t, ok), TD_EINVAL);
	td_cr_assert_err(td_tensor_permute(&out, NULL, ok), TD_EINVAL);
	td_cr_assert_err(td_tensor_permute(&out, &released, ok), TD_EINVAL);
	td_cr_assert_err(td_tensor_permute(&out, &t, NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_permute(&out, &t, twice), TD_EINVAL);
	td_cr_assert_err(td_tensor_permute(&out, &t, outside), TD_EINVAL);
	td_cr_assert_err(td_tensor_permute(&out, &t, below), TD_EINVAL);
	td_cr_assert_err(td_tensor_transpose(NULL, &t, 0, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_transpose(&out, NULL, 0, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_transpose(&out, &released, 0, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_transpose(&out, &t, 0, 3), TD_EINVAL);
	td_cr_assert_err(td_tensor_transpose(&out, &t, -4, 0), TD_EINVAL);
	td_test_assert_poisoned(&out);
	cr_assert_eq(td_buffer_refcount(t.buffer), 1);
	td_tensor_release(&t);
}

Test(shape, permute_of_sixteen_dims)
{
	int64_t shape[TD_MAX_DIMS];
	int dims[TD_MAX_DIMS], i;
	td_tensor t, v;

	for (i = 0; i < TD_MAX_DIMS; i++) {
		shape[i] = i % 4 == 0 ? 2 : 1;
		dims[i] = TD_MAX_DIMS - 1 - i;
	}
	arange(&t, TD_MAX_DIMS, shape);
	td_cr_assert_ok(td_tensor_permute(&v, &t, dims));
	for (i = 0; i < TD_MAX_DIMS; i++) {
		cr_assert_eq(td_tensor_shape(&v)[i], td_tensor_shape(&t)[TD_MAX_DIMS - 1 - i]);
		cr_assert_eq(td_tensor_strides(&v)[i], td_tensor_strides(&t)[TD_MAX_DIMS - 1 - i]);
	}
	td_tensor_release(&v);
	td_tensor_release(&t);
}

/* ------------------------------------------------------------------------ */
/* unsqueeze, squeeze                                                        */
/* ------------------------------------------------------------------------ */

Test(shape, unsqueeze_matches_torch_strides_and_the_model)
{
	uint64_t rng = 6;
	int it;

	for (it = 0; it < 150; it++) {
		int ndim = (int)rnd(&rng, 5), dim;
		td_tensor t;

		random_view(&t, &rng, ndim, true);
		for (dim = -ndim - 1; dim <= ndim; dim++) {
			int d = dim < 0 ? dim + ndim + 1 : dim, i;
			map_ctx c = { &t, d, 0, { 0 }, 0 };
			td_tensor v;

			td_cr_assert_ok(td_tensor_unsqueeze(&v, &t, dim));
			cr_assert_eq(v.ndim, ndim + 1);
			cr_assert_eq(td_tensor_shape(&v)[d], 1);
			cr_assert_eq(td_tensor_strides(&v)[d],
				d < ndim ? td_tensor_shape(&t)[d] * td_tensor_strides(&t)[d] : 1,
				"unsqueeze(%d): stride %lld", dim, (long long)td_tensor_strides(&v)[d]);
			for (i = 0; i < ndim; i++) {
				cr_assert_eq(td_tensor_shape(&v)[i < d ? i : i + 1], td_tensor_shape(&t)[i]);
				cr_assert_eq(td_tensor_strides(&v)[i < d ? i : i + 1], td_tensor_strides(&t)[i]);
			}
			cr_assert_eq(td_tensor_is_contiguous(&v), td_tensor_is_contiguous(&t));
			assert_view_maps(&v, &c, map_unsqueeze, "unsqueeze");
			td_tensor_release(&v);
		}
		td_tensor_release(&t);
	}
}

Test(shape, squeeze_removes_only_size_one_dims)
{
	uint64_t rng = 7;
	int it;

	for (it = 0; it < 200; it++) {
		int ndim = 1 + (int)rnd(&rng, 5), dim, i, ones = 0;
		map_ctx c = { NULL, 0, 0, { 0 }, 0 };
		td_tensor t, v;

		random_view(&t, &rng, ndim, true);
		c.t = &t;
		for (dim = -ndim; dim < ndim; dim++) {
			int d = dim < 0 ? dim + ndim : dim;
			td_cr_assert_ok(td_tensor_squeeze(&v, &t, dim));
			if (td_tensor_shape(&t)[d] == 1) {
				/* Removing a size-1 dim is selecting its only position. */
				map_ctx u = { &t, d, 0, { 0 }, 0 };
				cr_assert_eq(v.ndim, ndim - 1);
				for (i = 0; i < ndim; i++) {
					if (i == d)
						continue;
					cr_assert_eq(td_tensor_shape(&v)[i < d ? i : i - 1], td_tensor_shape(&t)[i]);
					cr_assert_eq(td_tensor_strides(&v)[i < d ? i : i - 1],
						td_tensor_strides(&t)[i]);
				}
				assert_view_maps(&v, &u, map_select, "squeeze");
			} else {
				cr_assert_eq(v.ndim, ndim);
				cr_assert(same_view(&v, &t));
			}
			cr_assert_eq(v.offset, t.offset);
			cr_assert_eq(v.buffer, t.buffer);
			td_tensor_release(&v);
		}
		for (i = 0; i < ndim; i++)
			ones += td_tensor_shape(&t)[i] == 1;
		td_cr_assert_ok(td_tensor_squeeze_all(&v, &t));
		cr_assert_eq(v.ndim, ndim - ones);
		for (i = 0; i < v.ndim; i++)
			cr_assert_neq(td_tensor_shape(&v)[i], 1);
		assert_view_maps(&v, &c, map_squeeze_all, "squeeze_all");
		td_tensor_release(&v);
		td_tensor_release(&t);
	}
}

Test(shape, squeeze_and_unsqueeze_of_zero_dim_and_full_tensors)
{
	int64_t shape[TD_MAX_DIMS];
	td_tensor t, v;
	int i;

	arange(&t, 0, NULL);
	td_cr_assert_ok(td_tensor_squeeze(&v, &t, 0));
	cr_assert_eq(v.ndim, 0);
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_squeeze(&v, &t, -1));
	cr_assert_eq(v.ndim, 0);
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_squeeze_all(&v, &t));
	cr_assert_eq(v.ndim, 0);
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_unsqueeze(&v, &t, -1));
	cr_assert_eq(v.ndim, 1);
	cr_assert_eq(td_tensor_strides(&v)[0], 1);
	td_tensor_release(&v);
	td_test_poison(&v);
	td_cr_assert_err(td_tensor_squeeze(&v, &t, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_squeeze(&v, &t, -2), TD_EINVAL);
	td_cr_assert_err(td_tensor_unsqueeze(&v, &t, 2), TD_EINVAL);
	td_cr_assert_err(td_tensor_unsqueeze(&v, &t, -3), TD_EINVAL);
	td_test_assert_poisoned(&v);
	td_tensor_release(&t);

	/* 16 dims of size 1: squeeze_all gives 0-d; nothing more can be added. */
	for (i = 0; i < TD_MAX_DIMS; i++)
		shape[i] = 1;
	arange(&t, TD_MAX_DIMS, shape);
	td_cr_assert_err(td_tensor_unsqueeze(&v, &t, 0), TD_EINVAL);
	td_cr_assert_ok(td_tensor_squeeze_all(&v, &t));
	cr_assert_eq(v.ndim, 0);
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_squeeze(&v, &t, -1));
	cr_assert_eq(v.ndim, TD_MAX_DIMS - 1);
	td_cr_assert_ok(td_tensor_unsqueeze(&v, &v, 3));
	cr_assert_eq(v.ndim, TD_MAX_DIMS);
	td_tensor_release(&v);
	td_tensor_release(&t);
}

Test(shape, squeeze_family_refuses_bad_arguments)
{
	static const int64_t shape[2] = { 1, 3 };
	td_tensor t, out, released = TD_TENSOR_INIT;

	arange(&t, 2, shape);
	td_test_poison(&out);
	td_cr_assert_err(td_tensor_unsqueeze(NULL, &t, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_unsqueeze(&out, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_unsqueeze(&out, &released, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_unsqueeze(&out, &t, 3), TD_EINVAL);
	td_cr_assert_err(td_tensor_unsqueeze(&out, &t, -4), TD_EINVAL);
	td_cr_assert_err(td_tensor_squeeze(NULL, &t, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_squeeze(&out, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_squeeze(&out, &released, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_squeeze(&out, &t, 2), TD_EINVAL);
	td_cr_assert_err(td_tensor_squeeze(&out, &t, -3), TD_EINVAL);
	td_cr_assert_err(td_tensor_squeeze_all(NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_tensor_squeeze_all(&out, NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_squeeze_all(&out, &released), TD_EINVAL);
	td_test_assert_poisoned(&out);
	td_tensor_release(&t);
}

Test(shape, unsqueeze_of_a_huge_stride_does_not_overflow)
{
	static const int64_t shape[1] = { 2 }, strides[1] = { (int64_t)1 << 62 };
	td_buffer *b = device_buffer((size_t)1 << 63);
	td_tensor t, v;

	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_BOOL, 1, shape, strides, 0));
	td_cr_assert_ok(td_tensor_unsqueeze(&v, &t, 0));
	cr_assert_eq(v.ndim, 2);
	cr_assert_eq(td_tensor_shape(&v)[0], 1);
	cr_assert_eq(td_tensor_shape(&v)[1], 2);
	cr_assert_eq(td_tensor_strides(&v)[1], strides[0]);
	cr_assert_geq(td_tensor_strides(&v)[0], 0);
	td_tensor_release(&v);
	td_tensor_release(&t);
	td_buffer_unref(b);
}

/* ------------------------------------------------------------------------ */
/* expand                                                                    */
/* ------------------------------------------------------------------------ */

Test(shape, expand_matches_the_model_on_random_views)
{
	uint64_t rng = 8;
	int it;

	for (it = 0; it < 300; it++) {
		int ndim = (int)rnd(&rng, 5), lead = (int)rnd(&rng, 3), i;
		int64_t target[TD_MAX_DIMS];
		map_ctx c = { NULL, 0, 0, { 0 }, 0 };
		td_tensor t, v;

		random_view(&t, &rng, ndim, true);
		c.t = &t;
		c.lead = lead;
		for (i = 0; i < lead; i++)
			target[i] = (int64_t)rnd(&rng, 3);
		for (i = 0; i < ndim; i++) {
			static const int64_t grow[4] = { -1, 1, 0, 3 };
			if (td_tensor_shape(&t)[i] == 1)
				target[lead + i] = grow[rnd(&rng, 4)];
			else
				target[lead + i] = rnd(&rng, 2) ? -1 : td_tensor_shape(&t)[i];
		}
		td_cr_assert_ok(td_tensor_expand(&v, &t, lead + ndim, target));
		cr_assert_eq(v.ndim, lead + ndim);
		for (i = 0; i < lead + ndim; i++) {
			int it_ = i - lead;
			int64_t want = target[i] == -1 ? td_tensor_shape(&t)[it_] : target[i];
			cr_assert_eq(td_tensor_shape(&v)[i], want);
			if (it_ < 0 || (td_tensor_shape(&t)[it_] == 1 && want != 1))
				cr_assert_eq(td_tensor_strides(&v)[i], 0, "expanded dim %d has stride %lld", i,
					(long long)td_tensor_strides(&v)[i]);
			else
				cr_assert_eq(td_tensor_strides(&v)[i], td_tensor_strides(&t)[it_]);
		}
		assert_view_maps(&v, &c, map_expand, "expand");
		td_tensor_release(&v);
		td_tensor_release(&t);
	}
}

Test(shape, expand_refuses_bad_arguments)
{
	static const int64_t shape[2] = { 1, 3 };
	static const int64_t fewer[1] = { 3 }, mismatch[2] = { 2, 4 }, minus2[2] = { 1, -2 };
	static const int64_t new_minus1[3] = { -1, 1, 3 }, new_negative[3] = { -5, 1, 3 };
	static const int64_t huge[2] = { (int64_t)1 << 62, 3 };
	static const int64_t huge2[4] = { (int64_t)1 << 40, (int64_t)1 << 40, 1, 3 };
	int64_t shape17[TD_MAX_DIMS + 1];
	td_tensor t, out, released = TD_TENSOR_INIT;
	int i;

	for (i = 0; i <= TD_MAX_DIMS; i++)
		shape17[i] = 1;
	shape17[TD_MAX_DIMS] = 3;
	arange(&t, 2, shape);
	td_test_poison(&out);
	td_cr_assert_err(td_tensor_expand(NULL, &t, 2, shape), TD_EINVAL);
	td_cr_assert_err(td_tensor_expand(&out, NULL, 2, shape), TD_EINVAL);
	td_cr_assert_err(td_tensor_expand(&out, &released, 2, shape), TD_EINVAL);
	td_cr_assert_err(td_tensor_expand(&out, &t, 2, NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_expand(&out, &t, 1, fewer), TD_EINVAL);
	td_cr_assert_err(td_tensor_expand(&out, &t, TD_MAX_DIMS + 1, shape17), TD_EINVAL);
	td_cr_assert_err(td_tensor_expand(&out, &t, 3, new_minus1), TD_EINVAL);
	td_cr_assert_err(td_tensor_expand(&out, &t, 3, new_negative), TD_EINVAL);
	td_cr_assert_err(td_tensor_expand(&out, &t, 2, mismatch), TD_ETYPE);
	td_cr_assert_err(td_tensor_expand(&out, &t, 2, minus2), TD_ETYPE);
	td_cr_assert_err(td_tensor_expand(&out, &t, 2, huge), TD_EOVERFLOW);
	td_cr_assert_err(td_tensor_expand(&out, &t, 4, huge2), TD_EOVERFLOW);
	td_test_assert_poisoned(&out);
	cr_assert_eq(td_buffer_refcount(t.buffer), 1);
	td_tensor_release(&t);
}

/* ------------------------------------------------------------------------ */
/* reshape, view                                                             */
/* ------------------------------------------------------------------------ */

/*
 * The oracle: a view with shape `nshape` exists when the buffer position of
 * every element, taken in C order, is an affine function of its index in
 * `nshape` with non-negative strides. Derive each stride from the element
 * one step along that dim, then check every element.
 */
static bool view_possible(const td_tensor *t, int nn, const int64_t *nshape)
{
	int64_t numel = numel_of(t->ndim, td_tensor_shape(t)), strides[TD_MAX_DIMS], f;
	int64_t tidx[TD_MAX_DIMS], nidx[TD_MAX_DIMS];
	int j;

	if (numel == 0)
		return true;
	for (j = 0; j < nn; j++) {
		strides[j] = 0;
		if (nshape[j] == 1)
			continue;
		td_test_unravel(t->ndim, td_tensor_shape(t), numel_of(nn - j - 1, nshape + j + 1), tidx);
		strides[j] = td_test_elem_pos(t, tidx) - t->offset;
		if (strides[j] < 0)
			return false;
	}
	for (f = 0; f < numel; f++) {
		int64_t want = t->offset;
		td_test_unravel(nn, nshape, f, nidx);
		for (j = 0; j < nn; j++)
			want += nidx[j] * strides[j];
		td_test_unravel(t->ndim, td_tensor_shape(t), f, tidx);
		if (td_test_elem_pos(t, tidx) != want)
			return false;
	}
	return true;
}

/* A random shape of `numel` elements, one size -1 now and then. */
static int random_target(uint64_t *rng, int64_t numel, int64_t *shape)
{
	int64_t n = numel, p;
	int ndim, i;

	if (numel == 0) {
		ndim = 1 + (int)rnd(rng, 4);
		for (i = 0; i < ndim; i++)
			shape[i] = (int64_t)rnd(rng, 3) + 1;
		shape[rnd(rng, (uint64_t)ndim)] = 0;
		return ndim;
	}
	ndim = (int)rnd(rng, 6);
	if (ndim == 0 && numel != 1)
		ndim = 1;
	for (i = 0; i < ndim; i++)
		shape[i] = 1;
	for (p = 2; p * p <= n; p++) {
		while (n % p == 0) {
			shape[rnd(rng, (uint64_t)ndim)] *= p;
			n /= p;
		}
	}
	if (n > 1)
		shape[rnd(rng, (uint64_t)ndim)] *= n;
	if (ndim > 0 && rnd(rng, 4) == 0)
		shape[rnd(rng, (uint64_t)ndim)] = -1;
	return ndim;
}

/* Every element of `r`, in C order, equals the element of `t` at the same C-order position. */
static void assert_same_c_order(const td_tensor *r, const td_tensor *t)
{
	int64_t n = numel_of(t->ndim, td_tensor_shape(t)), f;

	cr_assert_eq(numel_of(r->ndim, td_tensor_shape(r)), n);
	for (f = 0; f < n; f++) {
		int64_t ridx[TD_MAX_DIMS], tidx[TD_MAX_DIMS];
		td_scalar s;

		td_test_unravel(r->ndim, td_tensor_shape(r), f, ridx);
		td_test_unravel(t->ndim, td_tensor_shape(t), f, tidx);
		td_cr_assert_ok(td_tensor_get(&s, r, ridx));
		cr_assert_eq(s.v.i, td_test_elem_pos(t, tidx), "element %lld", (long long)f);
	}
}

Test(shape, reshape_is_a_view_exactly_when_the_strides_allow_it)
{
	uint64_t rng = 9;
	int it, views = 0, copies = 0;

	for (it = 0; it < 3000; it++) {
		int64_t nshape[TD_MAX_DIMS], resolved[TD_MAX_DIMS], numel;
		int ndim = (int)rnd(&rng, 5), nn, i;
		td_tensor t, v, r;
		bool can_view;

		random_view(&t, &rng, ndim, rnd(&rng, 10) == 0);
		numel = td_tensor_numel(&t);
		nn = random_target(&rng, numel, nshape);
		for (i = 0; i < nn; i++) {
			int64_t known = 1;
			int j;
			if (nshape[i] != -1) {
				resolved[i] = nshape[i];
				continue;
			}
			for (j = 0; j < nn; j++)
				known *= j == i ? 1 : nshape[j];
			resolved[i] = numel / known;
		}
		can_view = view_possible(&t, nn, resolved);
		if (can_view) {
			td_cr_assert_ok(td_tensor_view(&v, &t, nn, nshape));
			cr_assert_eq(v.buffer, t.buffer);
			cr_assert_eq(v.ndim, nn);
			cr_assert_eq(memcmp(td_tensor_shape(&v), resolved, sizeof(int64_t) * (size_t)nn), 0);
			assert_same_c_order(&v, &t);
			td_tensor_release(&v);
			views++;
		} else {
			td_test_poison(&v);
			td_cr_assert_err(td_tensor_view(&v, &t, nn, nshape), TD_ETYPE);
			td_test_assert_poisoned(&v);
			copies++;
		}
		td_cr_assert_ok(td_tensor_reshape(&r, &t, nn, nshape));
		cr_assert_eq(r.ndim, nn);
		cr_assert_eq(memcmp(td_tensor_shape(&r), resolved, sizeof(int64_t) * (size_t)nn), 0);
		if (can_view) {
			cr_assert_eq(r.buffer, t.buffer, "reshape copied a viewable tensor");
			cr_assert_eq(td_buffer_refcount(t.buffer), 2);
		} else {
			cr_assert_neq(r.buffer, t.buffer, "reshape viewed a non-viewable tensor");
			cr_assert_eq(td_buffer_refcount(t.buffer), 1);
			cr_assert_eq(td_buffer_refcount(r.buffer), 1);
			cr_assert(td_tensor_is_contiguous(&r));
			cr_assert_eq(r.offset, 0);
		}
		assert_same_c_order(&r, &t);
		td_tensor_release(&r);
		td_tensor_release(&t);
	}
	/* Both outcomes must have been exercised many times. */
	cr_assert_gt(views, 300, "%d views", views);
	cr_assert_gt(copies, 300, "%d copies", copies);
}

Test(shape, reshape_of_a_transposed_tensor_copies_and_view_fails)
{
	static const int64_t shape[2] = { 3, 4 }, flat[1] = { 12 }, split[3] = { 2, 2, 3 };
	static const int64_t flat_minus1[1] = { -1 };
	td_tensor t, tt, v, r;
	int64_t i;

	arange(&t, 2, shape);
	td_cr_assert_ok(td_tensor_transpose(&tt, &t, 0, 1));
	td_test_poison(&v);
	td_cr_assert_err(td_tensor_view(&v, &tt, 1, flat), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "td_tensor_reshape") != NULL,
		"message should point to td_tensor_reshape(): %s", td_error_last()->message);
	td_test_assert_poisoned(&v);
	td_cr_assert_ok(td_tensor_reshape(&r, &tt, 1, flat_minus1));
	cr_assert_neq(r.buffer, t.buffer);
	cr_assert_eq(td_tensor_shape(&r)[0], 12);
	for (i = 0; i < 12; i++)
		cr_assert_eq(((int64_t *)td_tensor_data(&r))[i], (i % 3) * 4 + i / 3);
	td_tensor_release(&r);
	/* Splitting the transposed tensor's first dim is still a view. */
	td_cr_assert_ok(td_tensor_view(&v, &tt, 3, split));
	cr_assert_eq(v.buffer, t.buffer);
	cr_assert_eq(td_tensor_strides(&v)[0], 2);
	cr_assert_eq(td_tensor_strides(&v)[1], 1);
	cr_assert_eq(td_tensor_strides(&v)[2], 4);
	td_tensor_release(&v);
	td_tensor_release(&tt);
	td_tensor_release(&t);
}

Test(shape, reshape_handles_zero_dim_and_sixteen_dims)
{
	static const int64_t one[1] = { 1 }, minus1[1] = { -1 };
	int64_t ones[TD_MAX_DIMS + 1];
	td_tensor t, v;
	int i;

	for (i = 0; i <= TD_MAX_DIMS; i++)
		ones[i] = 1;
	arange(&t, 0, NULL);
	td_cr_assert_ok(td_tensor_reshape(&v, &t, TD_MAX_DIMS, ones));
	cr_assert_eq(v.ndim, TD_MAX_DIMS);
	cr_assert_eq(v.buffer, t.buffer);
	td_cr_assert_ok(td_tensor_view(&v, &v, 0, NULL));
	cr_assert_eq(v.ndim, 0);
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_view(&v, &t, 1, minus1));
	cr_assert_eq(td_tensor_shape(&v)[0], 1);
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_view(&v, &t, 1, one));
	td_tensor_release(&v);
	td_test_poison(&v);
	td_cr_assert_err(td_tensor_reshape(&v, &t, TD_MAX_DIMS + 1, ones), TD_EINVAL);
	td_test_assert_poisoned(&v);
	td_tensor_release(&t);
}

Test(shape, reshape_and_view_refuse_bad_shapes)
{
	static const int64_t shape[2] = { 3, 4 }, empty_shape[2] = { 0, 4 };
	static const int64_t two_infer[2] = { -1, -1 }, minus2[2] = { -2, -6 };
	static const int64_t wrong[2] = { 5, 2 }, not_divisible[2] = { 5, -1 };
	static const int64_t zero_infer[2] = { 0, -1 };
	static const int64_t huge[3] = { (int64_t)1 << 62, 4, -1 };
	td_tensor t, e, out, released = TD_TENSOR_INIT;
	int which;

	arange(&t, 2, shape);
	arange(&e, 2, empty_shape);
	td_test_poison(&out);
	for (which = 0; which < 2; which++) {
		int (*fn)(td_tensor *, const td_tensor *, int, const int64_t *) = which ? td_tensor_view :
																				  td_tensor_reshape;

		td_cr_assert_err(fn(NULL, &t, 2, shape), TD_EINVAL);
		td_cr_assert_err(fn(&out, NULL, 2, shape), TD_EINVAL);
		td_cr_assert_err(fn(&out, &released, 2, shape), TD_EINVAL);
		td_cr_assert_err(fn(&out, &t, -1, shape), TD_EINVAL);
		td_cr_assert_err(fn(&out, &t, 2, NULL), TD_EINVAL);
		td_cr_assert_err(fn(&out, &t, 2, two_infer), TD_EINVAL);
		td_cr_assert_err(fn(&out, &t, 2, minus2), TD_EINVAL);
		td_cr_assert_err(fn(&out, &t, 2, wrong), TD_ETYPE);
		td_cr_assert_err(fn(&out, &t, 2, not_divisible), TD_ETYPE);
		td_cr_assert_err(fn(&out, &t, 1, shape), TD_ETYPE);
		td_cr_assert_err(fn(&out, &e, 2, zero_infer), TD_ETYPE);
		td_cr_assert_err(fn(&out, &t, 3, huge), TD_EOVERFLOW);
	}
	td_test_assert_poisoned(&out);
	cr_assert_eq(td_buffer_refcount(t.buffer), 1);
	td_tensor_release(&t);
	td_tensor_release(&e);
}

/* ------------------------------------------------------------------------ */
/* out aliasing the input                                                    */
/* ------------------------------------------------------------------------ */

/* Run one view operation. */
static int view_op(int op, td_tensor *out, const td_tensor *t)
{
	static const int64_t flat[1] = { -1 }, grow[3] = { 5, 2, 3 };
	static const int perm[2] = { 1, 0 };

	switch (op) {
	case 0:
		return td_tensor_select(out, t, 0, 1);
	case 1:
		return td_tensor_narrow(out, t, 1, 1, 2);
	case 2:
		return td_tensor_reshape(out, t, 1, flat);
	case 3:
		return td_tensor_view(out, t, 1, flat);
	case 4:
		return td_tensor_unsqueeze(out, t, 1);
	case 5:
		return td_tensor_squeeze(out, t, 0);
	case 6:
		return td_tensor_squeeze_all(out, t);
	case 7:
		return td_tensor_permute(out, t, perm);
	case 8:
		return td_tensor_transpose(out, t, 0, 1);
	default:
		return td_tensor_expand(out, t, 3, grow);
	}
}

Test(shape, out_may_alias_the_input_and_its_reference_is_released)
{
	static const int64_t shape[2] = { 2, 3 };
	int op;

	for (op = 0; op < 10; op++) {
		td_tensor base, t, expect;

		arange(&base, 2, shape);
		td_tensor_ref(&t, &base);
		cr_assert_eq(td_buffer_refcount(base.buffer), 2);
		/* The same operation with a separate output gives the reference result. */
		td_cr_assert_ok(view_op(op, &expect, &base));
		cr_assert_eq(td_buffer_refcount(base.buffer), 3);
		td_cr_assert_ok(view_op(op, &t, &t));
		cr_assert_eq(td_buffer_refcount(base.buffer), 3, "op %d: refcount %u", op,
			td_buffer_refcount(base.buffer));
		cr_assert(same_view(&t, &expect), "op %d: result differs", op);
		td_tensor_release(&t);
		td_tensor_release(&expect);
		cr_assert_eq(td_buffer_refcount(base.buffer), 1);
		td_tensor_release(&base);
	}
}

Test(shape, reshape_copy_into_its_input_releases_the_old_buffer)
{
	static const int64_t shape[2] = { 3, 4 }, flat[1] = { 12 };
	td_tensor base, t;
	int64_t i;

	arange(&base, 2, shape);
	td_cr_assert_ok(td_tensor_transpose(&t, &base, 0, 1));
	cr_assert_eq(td_buffer_refcount(base.buffer), 2);
	td_cr_assert_ok(td_tensor_reshape(&t, &t, 1, flat));
	cr_assert_eq(td_buffer_refcount(base.buffer), 1);
	cr_assert_neq(t.buffer, base.buffer);
	for (i = 0; i < 12; i++)
		cr_assert_eq(((int64_t *)td_tensor_data(&t))[i], (i % 3) * 4 + i / 3);
	td_tensor_release(&t);
	td_tensor_release(&base);
}

Test(shape, failing_call_with_out_aliasing_the_input_leaves_it_intact)
{
	static const int64_t shape[2] = { 2, 3 }, wrong[1] = { 7 }, bad_expand[2] = { 4, 3 };
	static const int twice[2] = { 0, 0 };
	td_tensor t, saved;

	arange(&t, 2, shape);
	saved = t;
	td_cr_assert_err(td_tensor_select(&t, &t, 0, 2), TD_EINDEX);
	td_cr_assert_err(td_tensor_narrow(&t, &t, 1, 2, 2), TD_EINDEX);
	td_cr_assert_err(td_tensor_reshape(&t, &t, 1, wrong), TD_ETYPE);
	td_cr_assert_err(td_tensor_unsqueeze(&t, &t, 5), TD_EINVAL);
	td_cr_assert_err(td_tensor_squeeze(&t, &t, 5), TD_EINVAL);
	td_cr_assert_err(td_tensor_permute(&t, &t, twice), TD_EINVAL);
	td_cr_assert_err(td_tensor_transpose(&t, &t, 0, 2), TD_EINVAL);
	td_cr_assert_err(td_tensor_expand(&t, &t, 2, bad_expand), TD_ETYPE);
	cr_assert(same_view(&t, &saved));
	cr_assert_eq(td_buffer_refcount(t.buffer), 1);
	td_tensor_release(&t);
}

/* ------------------------------------------------------------------------ */
/* Device and read-only buffers                                              */
/* ------------------------------------------------------------------------ */

Test(shape, views_of_device_memory_work_but_copies_are_refused)
{
	static const int64_t shape[2] = { 4, 6 }, flat[1] = { 24 }, grow[3] = { 2, 4, 6 };
	static const int perm[2] = { 1, 0 };
	td_buffer *b = device_buffer(24 * sizeof(float));
	td_tensor t, v, tt, *arr;
	size_t n;

	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, shape, NULL, 0));
	td_cr_assert_ok(td_tensor_select(&v, &t, 0, 3));
	cr_assert_eq(v.offset, 18);
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_narrow(&v, &t, 1, 2, 3));
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_reshape(&v, &t, 1, flat));
	cr_assert_eq(v.buffer, b);
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_unsqueeze(&v, &t, 0));
	td_cr_assert_ok(td_tensor_squeeze(&v, &v, 0));
	td_cr_assert_ok(td_tensor_squeeze_all(&v, &v));
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_permute(&v, &t, perm));
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_expand(&v, &t, 3, grow));
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_unbind(&arr, &n, &t, 1));
	cr_assert_eq(n, 6);
	td_tensor_array_free(arr, n);
	td_cr_assert_ok(td_tensor_transpose(&tt, &t, 0, 1));
	td_test_poison(&v);
	td_cr_assert_err(td_tensor_reshape(&v, &tt, 1, flat), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_view(&v, &tt, 1, flat), TD_ETYPE);
	td_test_assert_poisoned(&v);
	td_tensor_release(&tt);
	td_tensor_release(&t);
	cr_assert_eq(td_buffer_refcount(b), 1);
	td_buffer_unref(b);
}

Test(shape, views_of_read_only_memory_stay_read_only)
{
	static const int64_t shape[2] = { 2, 3 }, flat[1] = { 6 };
	int32_t data[6] = { 0, 1, 2, 3, 4, 5 };
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	const int64_t i0[1] = { 0 };
	td_buffer *b;
	td_tensor t, v, tt;

	o.flags = TD_BUFFER_READONLY;
	td_cr_assert_ok(td_buffer_wrap(&b, data, sizeof(data), &o));
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_I32, 2, shape, NULL, 0));
	td_cr_assert_ok(td_tensor_select(&v, &t, 0, 1));
	td_cr_assert_err(td_tensor_set(&v, i0, td_scalar_int(9)), TD_EREADONLY);
	td_tensor_release(&v);
	/* A copy made by reshape is a fresh, writable heap tensor. */
	td_cr_assert_ok(td_tensor_transpose(&tt, &t, 0, 1));
	td_cr_assert_ok(td_tensor_reshape(&v, &tt, 1, flat));
	cr_assert_eq(td_buffer_memory(v.buffer), TD_MEMORY_HEAP);
	td_cr_assert_ok(td_tensor_set(&v, i0, td_scalar_int(9)));
	cr_assert_eq(data[0], 0);
	td_tensor_release(&v);
	td_tensor_release(&tt);
	td_tensor_release(&t);
	td_buffer_unref(b);
}

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

typedef struct sweep_ctx {
	td_tensor in;
	td_tensor out;
	td_tensor *arr;
	size_t n;
} sweep_ctx;

static int reshape_body(void *p)
{
	static const int64_t flat[1] = { -1 };
	sweep_ctx *c = p;
	int rc;

	td_test_poison(&c->out);
	rc = td_tensor_reshape(&c->out, &c->in, 1, flat);
	if (rc < 0)
		td_test_assert_poisoned(&c->out);
	return rc;
}

static void reshape_cleanup(void *p)
{
	sweep_ctx *c = p;

	cr_assert_neq(c->out.buffer, c->in.buffer);
	td_tensor_release(&c->out);
}

Test(shape, reshape_with_copy_reports_enomem_and_leaks_nothing)
{
	static const int64_t shape[3] = { 3, 4, 5 };
	sweep_ctx c;
	td_tensor t;

	arange(&t, 3, shape);
	td_cr_assert_ok(td_tensor_transpose(&c.in, &t, 0, 2));
	td_test_enomem_sweep(reshape_body, reshape_cleanup, &c);
	cr_assert_eq(td_buffer_refcount(t.buffer), 2);
	td_tensor_release(&c.in);
	td_tensor_release(&t);
}

static int unbind_body(void *p)
{
	sweep_ctx *c = p;
	int rc;

	c->arr = (td_tensor *)0x1;
	c->n = 99;
	rc = td_tensor_unbind(&c->arr, &c->n, &c->in, 1);
	if (rc < 0) {
		cr_assert_eq(c->arr, (td_tensor *)0x1);
		cr_assert_eq(c->n, 99);
		cr_assert_eq(td_buffer_refcount(c->in.buffer), 1);
	}
	return rc;
}

static void unbind_cleanup(void *p)
{
	sweep_ctx *c = p;

	cr_assert_eq(c->n, 4);
	td_tensor_array_free(c->arr, c->n);
}

Test(shape, unbind_reports_enomem_and_leaks_nothing)
{
	static const int64_t shape[2] = { 3, 4 };
	sweep_ctx c;

	arange(&c.in, 2, shape);
	td_test_enomem_sweep(unbind_body, unbind_cleanup, &c);
	cr_assert_eq(td_buffer_refcount(c.in.buffer), 1);
	td_tensor_release(&c.in);
}

/* ------------------------------------------------------------------------ */
/* Tensors of more than TD_TENSOR_INLINE_DIMS dims                           */
/* ------------------------------------------------------------------------ */

/* Whether the dims of `t` are held in the struct itself. */
static bool dims_inline(const td_tensor *t)
{
	const char *p = (const char *)td_tensor_shape(t);

	return p >= (const char *)t && p < (const char *)(t + 1);
}

/* The views of many_dims_op() on a tensor of shape {2, 3, 1, 2, 2}: they cross the boundary. */
#define MANY_OPS 12

static int many_dims_op(int op, td_tensor *out, const td_tensor *t)
{
	static const int64_t flat[1] = { -1 }, six[6] = { 2, 3, 1, 2, 1, 2 };
	static const int64_t grow[7] = { 3, 1, 2, 3, 1, 2, 2 };
	static const int rev[5] = { 4, 3, 2, 1, 0 };

	switch (op) {
	case 0:
		return td_tensor_select(out, t, 0, 1); /* 4 dims: inline again */
	case 1:
		return td_tensor_narrow(out, t, 1, 1, 2); /* 5 dims, a block of its own */
	case 2:
		return td_tensor_reshape(out, t, 1, flat);
	case 3:
		return td_tensor_view(out, t, 6, six);
	case 4:
		return td_tensor_unsqueeze(out, t, 1);
	case 5:
		return td_tensor_squeeze(out, t, 2); /* 4 dims */
	case 6:
		return td_tensor_squeeze_all(out, t);
	case 7:
		return td_tensor_permute(out, t, rev);
	case 8:
		return td_tensor_transpose(out, t, 0, 4);
	case 9:
		return td_tensor_expand(out, t, 7, grow);
	case 10:
		return td_tensor_squeeze(out, t, 0); /* size 2: unchanged */
	default:
		return td_tensor_contiguous(out, t); /* a new reference */
	}
}

Test(shape, views_across_the_inline_dims_boundary_match_and_alias_their_input)
{
	static const int64_t shape[5] = { 2, 3, 1, 2, 2 };
	int op;

	cr_assert_eq(TD_TENSOR_INLINE_DIMS, 4, "the shapes below cross the boundary at 4 dims");
	for (op = 0; op < MANY_OPS; op++) {
		td_tensor base, t, expect;
		int64_t f;

		arange(&base, 5, shape);
		cr_assert_not(dims_inline(&base));
		td_tensor_ref(&t, &base);
		td_cr_assert_ok(many_dims_op(op, &expect, &base));
		cr_assert_eq(dims_inline(&expect), expect.ndim <= TD_TENSOR_INLINE_DIMS);
		td_cr_assert_ok(many_dims_op(op, &t, &t));
		cr_assert(same_view(&t, &expect), "op %d: in place differs", op);
		cr_assert_eq(td_buffer_refcount(base.buffer), 3, "op %d", op);
		/* The result reads the elements the dims say (a copy compares them). */
		for (f = 0; f < td_tensor_numel(&t); f++) {
			int64_t idx[TD_MAX_DIMS];
			td_scalar a, b;

			td_test_unravel(t.ndim, td_tensor_shape(&t), f, idx);
			td_cr_assert_ok(td_tensor_get(&a, &t, idx));
			td_cr_assert_ok(td_tensor_get(&b, &expect, idx));
			cr_assert_eq(a.v.i, b.v.i);
		}
		td_tensor_release(&t);
		td_tensor_release(&expect);
		/* Released twice: nothing is dropped twice. */
		td_tensor_release(&t);
		cr_assert_eq(td_buffer_refcount(base.buffer), 1);
		td_tensor_release(&base);
	}
}

Test(shape, unsqueeze_in_place_moves_the_dims_out_of_the_struct_and_back)
{
	static const int64_t shape[4] = { 2, 1, 3, 2 };
	td_tensor t, saved;
	int k;

	arange(&t, 4, shape);
	saved = t;
	cr_assert(dims_inline(&t));
	for (k = 0; k < TD_MAX_DIMS - 4; k++) {
		td_cr_assert_ok(td_tensor_unsqueeze(&t, &t, 0));
		cr_assert_not(dims_inline(&t));
		cr_assert_eq(td_tensor_shape(&t)[k + 1], 2);
	}
	td_cr_assert_err(td_tensor_unsqueeze(&t, &t, 0), TD_EINVAL);
	td_cr_assert_ok(td_tensor_squeeze_all(&t, &t));
	cr_assert(dims_inline(&t));
	cr_assert_eq(t.ndim, 3);
	td_cr_assert_ok(td_tensor_unsqueeze(&t, &t, 1));
	cr_assert(same_view(&t, &saved));
	cr_assert_eq(td_buffer_refcount(t.buffer), 1);
	td_tensor_release(&t);
}

Test(shape, references_share_the_block_of_out_of_line_dims)
{
	static const int64_t shape[6] = { 1, 2, 1, 3, 1, 2 };
	td_tensor t, r, copy, *arr;
	size_t n, i;

	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 6, shape));
	td_tensor_ref(&r, &t);
	cr_assert_eq(td_tensor_shape(&r), td_tensor_shape(&t), "one block, shared");
	cr_assert_eq(td_tensor_strides(&r), td_tensor_shape(&t) + 6);
	copy = t; /* a borrowed alias */
	td_tensor_release(&t);
	cr_assert_eq(td_tensor_shape(&r)[3], 3, "the reference keeps the block");
	cr_assert_eq(td_tensor_shape(&copy), td_tensor_shape(&r));
	/* The views of an unbind differ only in their offsets: one block for all. */
	td_cr_assert_ok(td_tensor_unsqueeze(&r, &r, 0));
	td_cr_assert_ok(td_tensor_unbind(&arr, &n, &r, 4));
	cr_assert_eq(n, 3);
	for (i = 0; i < n; i++) {
		cr_assert_eq(arr[i].ndim, 6);
		cr_assert_eq(td_tensor_shape(&arr[i]), td_tensor_shape(&arr[0]));
		cr_assert_eq(arr[i].offset, (int64_t)i * 2);
	}
	td_tensor_release(&r);
	td_tensor_array_free(arr, n);
}

Test(shape, stack_and_cat_of_many_dims)
{
	static const int64_t shape[5] = { 2, 1, 3, 1, 2 };
	td_tensor parts[2], tp[2], s, c;
	int64_t f;
	int k;

	for (k = 0; k < 2; k++) {
		arange(&parts[k], 5, shape);
		/* Not contiguous: the strided path (a view per input) is taken. */
		td_cr_assert_ok(td_tensor_transpose(&tp[k], &parts[k], 0, 4));
	}
	td_cr_assert_ok(td_tensor_stack(&s, tp, 2, 2));
	cr_assert_eq(s.ndim, 6);
	td_cr_assert_ok(td_tensor_cat(&c, tp, 2, 4));
	cr_assert_eq(c.ndim, 5);
	cr_assert_eq(td_tensor_shape(&c)[4], 4);
	for (f = 0; f < td_tensor_numel(&tp[0]); f++) {
		int64_t idx[TD_MAX_DIMS], sidx[TD_MAX_DIMS];
		td_scalar a, b, x;

		td_test_unravel(5, td_tensor_shape(&tp[0]), f, idx);
		td_cr_assert_ok(td_tensor_get(&a, &tp[0], idx));
		memcpy(sidx, idx, 2 * sizeof(int64_t));
		sidx[2] = 1;
		memcpy(sidx + 3, idx + 2, 3 * sizeof(int64_t));
		td_cr_assert_ok(td_tensor_get(&b, &s, sidx));
		cr_assert_eq(a.v.i, b.v.i);
		idx[4] += 2;
		td_cr_assert_ok(td_tensor_get(&x, &c, idx));
		cr_assert_eq(a.v.i, x.v.i);
	}
	td_tensor_release(&s);
	td_tensor_release(&c);
	for (k = 0; k < 2; k++) {
		td_tensor_release(&tp[k]);
		td_tensor_release(&parts[k]);
	}
}

static int many_dims_body(void *p)
{
	sweep_ctx *c = p;
	int op = (int)c->n, rc;

	td_test_poison(&c->out);
	rc = many_dims_op(op, &c->out, &c->in);
	if (rc < 0) {
		td_test_assert_poisoned(&c->out);
		cr_assert_eq(td_buffer_refcount(c->in.buffer), 1);
	}
	return rc;
}

static void many_dims_cleanup(void *p)
{
	sweep_ctx *c = p;

	td_tensor_release(&c->out);
}

Test(shape, views_of_many_dims_report_enomem_and_leak_nothing)
{
	static const int64_t shape[5] = { 2, 3, 1, 2, 2 };
	sweep_ctx c;

	arange(&c.in, 5, shape);
	for (c.n = 0; c.n < MANY_OPS; c.n++)
		td_test_enomem_sweep(many_dims_body, many_dims_cleanup, &c);
	cr_assert_eq(td_buffer_refcount(c.in.buffer), 1);
	td_tensor_release(&c.in);
}

static int many_unbind_body(void *p)
{
	sweep_ctx *c = p;
	int rc;

	c->arr = (td_tensor *)0x1;
	rc = td_tensor_unbind(&c->arr, &c->n, &c->in, 1);
	if (rc < 0) {
		cr_assert_eq(c->arr, (td_tensor *)0x1);
		cr_assert_eq(td_buffer_refcount(c->in.buffer), 1);
	}
	return rc;
}

static void many_unbind_cleanup(void *p)
{
	sweep_ctx *c = p;

	cr_assert_eq(c->n, 3);
	td_tensor_array_free(c->arr, c->n);
}

Test(shape, unbind_of_many_dims_reports_enomem_and_leaks_nothing)
{
	static const int64_t shape[6] = { 2, 3, 1, 2, 2, 1 };
	sweep_ctx c;

	arange(&c.in, 6, shape);
	td_test_enomem_sweep(many_unbind_body, many_unbind_cleanup, &c);
	cr_assert_eq(td_buffer_refcount(c.in.buffer), 1);
	td_tensor_release(&c.in);
}
