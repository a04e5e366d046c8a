/* SPDX-License-Identifier: MIT */
/*
 * test_tensor_index_internal.c - the internal indexing helpers td_dict
 * builds on (lib/tensor_impl.h): td__index_shape(), prepared expressions
 * (td__index_expr_prepare()) and the td__tensor_index*() variants that
 * report the caller's name. Linked against a static copy of the library.
 */
#include "td_test.h"
#include "tensor_impl.h"

/* The shape and view flag td__index_shape() gives must match td_tensor_index(). */
static void check_shape(const td_tensor *t, const td_index *idx, size_t n)
{
	int64_t shape[TD_MAX_DIMS];
	td_tensor v;
	bool view;
	int ndim, d;

	td_cr_assert_ok(
		td__index_shape(&ndim, shape, &view, t->ndim, td_tensor_shape(t), idx, n, "test"));
	td_cr_assert_ok(td_tensor_index(&v, t, idx, n));
	cr_assert_eq(ndim, v.ndim);
	for (d = 0; d < ndim; d++)
		cr_assert_eq(shape[d], td_tensor_shape(&v)[d], "dim %d", d);
	cr_assert_eq(view, v.buffer == t->buffer);
	td_tensor_release(&v);
}

Test(tensor_index_internal, index_shape_matches_td_tensor_index)
{
	int64_t shape[4] = { 3, 4, 5, 2 }, l1[2] = { 0, -1 }, l2[1] = { 2 }, mshape[2] = { 4, 5 };
	bool m1[3] = { true, false, true };
	td_tensor t, m;

	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 4, shape));
	td_cr_assert_ok(td_tensor_zeros(&m, TD_DTYPE_BOOL, 2, mshape));
	td_cr_assert_ok(td_tensor_set(&m, (int64_t[]){ 1, 1 }, td_scalar_bool(true)));
	{
		td_index x[] = { td_index_int(1), td_index_slice(1, TD_SLICE_NONE, 2), td_index_newaxis() };
		check_shape(&t, x, 3);
	}
	{
		td_index x[] = { td_index_list(l1, 2), td_index_all(), td_index_list(l2, 1) };
		check_shape(&t, x, 3);
	}
	{
		td_index x[] = { td_index_mask(m1, 3), td_index_tensor(&m) };
		check_shape(&t, x, 2);
	}
	{
		td_index x[] = { td_index_ellipsis(), td_index_list(l1, 2) };
		check_shape(&t, x, 2);
	}
	check_shape(&t, NULL, 0);
	td_tensor_release(&m);
	td_tensor_release(&t);
}

Test(tensor_index_internal, index_shape_reports_the_errors_of_td_tensor_index)
{
	int64_t shape[2] = { 3, 4 }, out[TD_MAX_DIMS], bad[1] = { 3 }, l2[2] = { 0, 1 };
	int64_t l3[3] = { 0, 1, 2 };
	bool m2[2] = { true, false };
	int ndim;

	{
		td_index x[] = { td_index_list(bad, 1) };
		td_cr_assert_err(td__index_shape(&ndim, out, NULL, 2, shape, x, 1, "test"), TD_EINDEX);
	}
	{
		td_index x[] = { td_index_mask(m2, 2) };
		td_cr_assert_err(td__index_shape(&ndim, out, NULL, 2, shape, x, 1, "test"), TD_EINDEX);
	}
	{
		td_index x[] = { td_index_list(l2, 2), td_index_list(l3, 3) };
		td_cr_assert_err(td__index_shape(&ndim, out, NULL, 2, shape, x, 2, "test"), TD_ETYPE);
	}
	{
		td_index x[] = { td_index_ellipsis(), td_index_ellipsis() };
		td_cr_assert_err(td__index_shape(&ndim, out, NULL, 2, shape, x, 2, "test"), TD_EINVAL);
	}
	td_cr_assert_err(td__index_shape(&ndim, out, NULL, TD_MAX_DIMS + 1, shape, NULL, 0, "test"),
		TD_EINVAL);
	td_cr_assert_err(td__index_shape(&ndim, out, NULL, 2, (int64_t[]){ 3, -1 }, NULL, 0, "test"),
		TD_EINVAL);
}

/* Same shape, dtype and element bytes. */
static void assert_same(const td_tensor *a, const td_tensor *b)
{
	size_t isz = td_dtype_size(a->dtype);
	int64_t f, n = td_tensor_numel(a), idx[TD_MAX_DIMS];
	int d;

	cr_assert_eq(a->dtype, b->dtype);
	cr_assert_eq(a->ndim, b->ndim);
	for (d = 0; d < a->ndim; d++)
		cr_assert_eq(td_tensor_shape(a)[d], td_tensor_shape(b)[d], "dim %d", d);
	for (f = 0; f < n; f++) {
		int64_t oa = 0, ob = 0, r = f;
		for (d = a->ndim - 1; d >= 0; d--) {
			idx[d] = r % td_tensor_shape(a)[d];
			r /= td_tensor_shape(a)[d];
			oa += idx[d] * td_tensor_strides(a)[d];
			ob += idx[d] * td_tensor_strides(b)[d];
		}
		cr_assert(memcmp((char *)td_tensor_data(a) + oa * (int64_t)isz,
					  (char *)td_tensor_data(b) + ob * (int64_t)isz, isz) == 0,
			"element %lld", (long long)f);
	}
}

/* leaf[prepared] must equal leaf[reference] for a leaf with extra dims. */
static void check_leaf(const td__index_expr *e, const td_tensor *leaf, const td_index *want,
	size_t nwant)
{
	td_tensor a, b;

	td_cr_assert_ok(td__tensor_index(&a, leaf, e->idx, e->n, "test"));
	td_cr_assert_ok(td_tensor_index(&b, leaf, want, nwant));
	assert_same(&a, &b);
	cr_assert_eq(a.buffer == leaf->buffer, e->basic);
	td_tensor_release(&a);
	td_tensor_release(&b);
}

Test(tensor_index_internal, prepared_masks_become_positions_once)
{
	int64_t batch[2] = { 3, 4 }, leaf_shape[3] = { 3, 4, 5 }, mshape[2] = { 3, 4 };
	bool m1[4] = { false, true, true, false };
	td__index_expr e;
	td_tensor leaf, m, leaf2;
	size_t i;

	td_test_arange(&leaf, TD_DTYPE_I32, 3, leaf_shape);
	td_test_arange(&leaf2, TD_DTYPE_F64, 2, batch);
	td_cr_assert_ok(td_tensor_zeros(&m, TD_DTYPE_BOOL, 2, mshape));
	td_cr_assert_ok(td_tensor_set(&m, (int64_t[]){ 0, 3 }, td_scalar_bool(true)));
	td_cr_assert_ok(td_tensor_set(&m, (int64_t[]){ 2, 0 }, td_scalar_bool(true)));
	td_cr_assert_ok(td_tensor_set(&m, (int64_t[]){ 2, 2 }, td_scalar_bool(true)));
	{
		td_index x[] = { td_index_tensor(&m) };
		td_cr_assert_ok(td__index_expr_prepare(&e, x, 1, 2, batch, "test"));
		cr_assert_eq(e.n, 2);
		cr_assert_eq(e.npositions, 2);
		cr_assert(!e.basic);
		cr_assert_eq(e.ndim, 1);
		cr_assert_eq(e.shape[0], 3);
		for (i = 0; i < e.n; i++) {
			cr_assert_eq(e.idx[i].kind, TD_INDEX_TENSOR);
			cr_assert_eq(e.idx[i].tensor->dtype, TD_DTYPE_I64);
		}
		cr_assert_eq(((int64_t *)td_tensor_data(e.idx[0].tensor))[2], 2);
		cr_assert_eq(((int64_t *)td_tensor_data(e.idx[1].tensor))[2], 2);
		check_leaf(&e, &leaf, x, 1);
		check_leaf(&e, &leaf2, x, 1);
		td__index_expr_release(&e);
	}
	{
		td_index x[] = { td_index_ellipsis(), td_index_mask(m1, 4) };
		td_index want[] = { td_index_all(), td_index_mask(m1, 4) };
		td_cr_assert_ok(td__index_expr_prepare(&e, x, 2, 2, batch, "test"));
		cr_assert_eq(e.n, 2);
		cr_assert_eq(e.idx[0].kind, TD_INDEX_SLICE);
		check_leaf(&e, &leaf, want, 2); /* the ellipsis covers batch dims only */
		td__index_expr_release(&e);
	}
	td_tensor_release(&m);
	td_tensor_release(&leaf2);
	td_tensor_release(&leaf);
}

Test(tensor_index_internal, prepared_basic_and_list_elements_are_kept)
{
	int64_t batch[3] = { 2, 3, 4 }, leaf_shape[4] = { 2, 3, 4, 2 }, l[2] = { 1, -1 };
	td__index_expr e;
	td_tensor leaf, b0;

	td_test_arange(&leaf, TD_DTYPE_U8, 4, leaf_shape);
	td_cr_assert_ok(td_tensor_full(&b0, TD_DTYPE_BOOL, 0, NULL, td_scalar_bool(true)));
	{
		td_index x[] = { td_index_newaxis(), td_index_ellipsis(), td_index_int(-1) };
		td_index want[] = { td_index_newaxis(), td_index_all(), td_index_all(), td_index_int(-1) };
		td_cr_assert_ok(td__index_expr_prepare(&e, x, 3, 3, batch, "test"));
		cr_assert(e.basic);
		cr_assert_eq(e.n, 4);
		cr_assert_null(e.positions);
		cr_assert_eq(e.ndim, 3);
		check_leaf(&e, &leaf, want, 4);
		td__index_expr_release(&e);
	}
	{
		td_index x[] = { td_index_list(l, 2), td_index_tensor(&b0), td_index_slice(0, 2, 1) };
		td_cr_assert_ok(td__index_expr_prepare(&e, x, 3, 3, batch, "test"));
		cr_assert_eq(e.n, 3);
		cr_assert_eq(e.idx[0].list, l);
		cr_assert_eq(e.idx[1].tensor, &b0);
		check_leaf(&e, &leaf, x, 3);
		td__index_expr_release(&e);
	}
	td__index_expr_release(NULL);
	td_tensor_release(&b0);
	td_tensor_release(&leaf);
}

Test(tensor_index_internal, prepare_checks_against_the_batch_shape)
{
	int64_t batch[2] = { 3, 4 };
	bool m4[4] = { true, true, true, true };
	td__index_expr e;

	memset(&e, 0, sizeof(e));
	{
		td_index x[] = { td_index_mask(m4, 4) }; /* dim 0 has size 3 */
		td_cr_assert_err(td__index_expr_prepare(&e, x, 1, 2, batch, "td_dict_index"), TD_EINDEX);
		cr_assert(strstr(td_error_last()->message, "td_dict_index") != NULL);
	}
	{
		td_index x[] = { td_index_int(0), td_index_int(0), td_index_int(0) };
		td_cr_assert_err(td__index_expr_prepare(&e, x, 3, 2, batch, "test"), TD_EINDEX);
	}
	{
		td_index x[] = { td_index_int(5) };
		td_cr_assert_err(td__index_expr_prepare(&e, x, 1, 2, batch, "test"), TD_EINDEX);
	}
	td_cr_assert_err(td__index_expr_prepare(NULL, NULL, 0, 2, batch, "test"), TD_EINVAL);
	cr_assert_null(e.idx);
}

Test(tensor_index_internal, internal_variants_report_the_callers_name)
{
	int64_t n = 3;
	td_index x[] = { td_index_int(7) };
	td_tensor t, v;

	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I8, 1, &n));
	td_cr_assert_err(td__tensor_index(&v, &t, x, 1, "td_dict_index"), TD_EINDEX);
	cr_assert(strncmp(td_error_last()->message, "td_dict_index:", 14) == 0);
	td_cr_assert_err(td__tensor_index_fill(&t, x, 1, td_scalar_int(1), "td_dict_index_fill"),
		TD_EINDEX);
	cr_assert(strncmp(td_error_last()->message, "td_dict_index_fill:", 19) == 0);
	td_cr_assert_err(td__tensor_index_put(&t, x, 1, &t, "td_dict_index_put"), TD_EINDEX);
	cr_assert(strncmp(td_error_last()->message, "td_dict_index_put:", 18) == 0);
	td_tensor_release(&t);
}

typedef struct prep_ctx {
	td__index_expr e;
	td_index idx[3];
	int64_t batch[2];
} prep_ctx;

static int prep_body(void *p)
{
	prep_ctx *c = p;

	return td__index_expr_prepare(&c->e, c->idx, 3, 2, c->batch, "test");
}

static void prep_cleanup(void *p)
{
	td__index_expr_release(&((prep_ctx *)p)->e);
}

Test(tensor_index_internal, prepare_survives_allocation_failures)
{
	static const bool m1[3] = { true, false, true };
	int64_t mshape[1] = { 4 };
	prep_ctx c;
	td_tensor m;

	td_cr_assert_ok(td_tensor_zeros(&m, TD_DTYPE_BOOL, 1, mshape));
	td_cr_assert_ok(td_tensor_set(&m, (int64_t[]){ 1 }, td_scalar_bool(true)));
	td_cr_assert_ok(td_tensor_set(&m, (int64_t[]){ 3 }, td_scalar_bool(true)));
	c.batch[0] = 3;
	c.batch[1] = 4;
	c.idx[0] = td_index_mask(m1, 3);
	c.idx[1] = td_index_tensor(&m);
	c.idx[2] = td_index_ellipsis();
	td_test_enomem_sweep(prep_body, prep_cleanup, &c);
	td_tensor_release(&m);
}
