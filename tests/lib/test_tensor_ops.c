/* SPDX-License-Identifier: MIT */
/*
 * test_tensor_ops.c - elementwise add/sub/mul/div/eq/ne (tensor, scalar, in
 * place), equal and allclose: every op on every dtype pair and layout,
 * checked against a reference computed here with doubles; promotion,
 * wraparound, division by zero, overlap, failure paths, allocation failure.
 */
#include "td_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

#define NDTYPES LEN(td_test_all_dtypes)

static const td_binop all_ops[] = {
	TD_OP_ADD,
	TD_OP_SUB,
	TD_OP_MUL,
	TD_OP_DIV,
	TD_OP_EQ,
	TD_OP_NE,
};
static const char *const op_names[] = { "add", "sub", "mul", "div", "eq", "ne" };

/* ------------------------------------------------------------------------ */
/* Reference model                                                           */
/* ------------------------------------------------------------------------ */

typedef struct cval {
	double re, im;
} cval;

static cval cv(double re, double im)
{
	cval c = { re, im };
	return c;
}

/* torch's categories: bool 0, integers 1, floats 2, complex 3. */
static int tcat(td_dtype d)
{
	switch (td_dtype_category(d)) {
	case TD_CATEGORY_BOOL:
		return 0;
	case TD_CATEGORY_UINT:
	case TD_CATEGORY_INT:
		return 1;
	case TD_CATEGORY_FLOAT:
		return 2;
	default:
		return 3;
	}
}

static bool is_complex(td_dtype d)
{
	return d == TD_DTYPE_C64 || d == TD_DTYPE_C128;
}

/* The exact integer `v` wrapped into integer dtype `d`. */
static double wrap_int(td_dtype d, double v)
{
	uint64_t u = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;

	switch (d) {
	case TD_DTYPE_U8:
		return (uint8_t)u;
	case TD_DTYPE_I8:
		return (int8_t)(uint8_t)u;
	case TD_DTYPE_I16:
		return (int16_t)(uint16_t)u;
	case TD_DTYPE_I32:
		return (int32_t)(uint32_t)u;
	case TD_DTYPE_I64:
		return (double)(int64_t)u;
	case TD_DTYPE_U16:
		return (uint16_t)u;
	case TD_DTYPE_U32:
		return (uint32_t)u;
	default:
		return (double)u;
	}
}

static double round_real(td_dtype d, double v)
{
	switch (d) {
	case TD_DTYPE_F16:
		return td_f16_to_float(td_float_to_f16((float)v));
	case TD_DTYPE_BF16:
		return td_bf16_to_float(td_float_to_bf16((float)v));
	case TD_DTYPE_F32:
	case TD_DTYPE_C64:
		return (float)v;
	default:
		return v;
	}
}

/* `v` converted to dtype `d` (values in the tests stay in range). */
static cval cast_to(td_dtype d, cval v)
{
	switch (tcat(d)) {
	case 0:
		return cv(v.re != 0 || v.im != 0, 0);
	case 1:
		return cv(wrap_int(d, v.re), 0);
	case 2:
		return cv(round_real(d, v.re), 0);
	default:
		return cv(round_real(d, v.re), round_real(d, v.im));
	}
}

/* `x <op> y` in double precision; complex division as torch (Smith, x/0 per part). */
static cval ref_op(td_binop op, cval x, cval y, bool cplx)
{
	double den;

	switch (op) {
	case TD_OP_ADD:
		return cv(x.re + y.re, x.im + y.im);
	case TD_OP_SUB:
		return cv(x.re - y.re, x.im - y.im);
	case TD_OP_MUL:
		return cv(x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re);
	case TD_OP_DIV:
		if (!cplx)
			return cv(x.re / y.re, 0);
		if (y.re == 0 && y.im == 0)
			return cv(x.re / fabs(y.re), x.im / fabs(y.im));
		den = y.re * y.re + y.im * y.im;
		return cv((x.re * y.re + x.im * y.im) / den, (x.im * y.re - x.re * y.im) / den);
	case TD_OP_EQ:
		return cv(x.re == y.re && x.im == y.im, 0);
	default:
		return cv(x.re != y.re || x.im != y.im, 0);
	}
}

/*
 * Operand `v` as the kernel sees it in compute dtype `ct`. Integer
 * arithmetic keeps the exact value: wrapping commutes with add, sub and mul,
 * and doubles cannot hold a wrapped uint64 exactly.
 */
static cval operand_to(td_dtype ct, cval v, td_binop op)
{
	if (tcat(ct) == 1 && op <= TD_OP_MUL)
		return v;
	return cast_to(ct, v);
}

/* A result computed as dtype `rt`, stored into dtype `into`. */
static cval store_to(td_dtype into, td_dtype rt, cval v)
{
	if (tcat(into) == 1 && tcat(rt) == 1)
		return cast_to(into, v); /* one wrap: `into` is never wider than `rt` */
	return cast_to(into, cast_to(rt, v));
}

/* torch's result dtype of `a <op> b` for tensors. */
static td_dtype expect_dtype(td_dtype a, td_dtype b, td_binop op)
{
	td_dtype p = td_dtype_promote(a, b);

	if (op == TD_OP_EQ || op == TD_OP_NE)
		return TD_DTYPE_BOOL;
	if (op == TD_OP_DIV && tcat(p) <= 1)
		return TD_DTYPE_F32;
	return p;
}

/* The dtype the library computes `op` in for promoted dtype `p`. */
static td_dtype compute_of(td_dtype p, td_binop op)
{
	if (op == TD_OP_DIV && tcat(p) <= 1)
		return TD_DTYPE_F32;
	if (p == TD_DTYPE_F16 || p == TD_DTYPE_BF16)
		return TD_DTYPE_F32;
	return p;
}

static double tolerance(td_dtype d)
{
	switch (d) {
	case TD_DTYPE_F16:
		return 2e-3;
	case TD_DTYPE_BF16:
		return 1.6e-2;
	case TD_DTYPE_F32:
	case TD_DTYPE_C64:
		return 1e-6;
	case TD_DTYPE_F64:
	case TD_DTYPE_C128:
		return 1e-12;
	default:
		return 0;
	}
}

static bool same_part(double got, double exp, double tol)
{
	if (isnan(exp))
		return isnan(got);
	if (isinf(exp))
		return got == exp;
	return fabs(got - exp) <= tol * fmax(1.0, fabs(exp));
}

static bool same_value(cval got, cval exp, td_dtype d)
{
	double tol = tolerance(d);

	return same_part(got.re, exp.re, tol) && same_part(got.im, exp.im, tol);
}

/* ------------------------------------------------------------------------ */
/* Tensor helpers                                                            */
/* ------------------------------------------------------------------------ */

/* Position of element `flat` (C order over `shape`) in a tensor broadcast to it. */
static void unravel(const td_tensor *t, int nd, const int64_t *shape, int64_t flat, int64_t *idx)
{
	int d;

	for (d = nd - 1; d >= 0; d--) {
		int64_t k = flat % shape[d];
		int td = t->ndim - nd + d;

		flat /= shape[d];
		if (td >= 0)
			idx[td] = td_tensor_shape(t)[td] == 1 ? 0 : k;
	}
}

static cval scalar_value(td_scalar s)
{
	switch (s.kind) {
	case TD_SCALAR_BOOL:
		return cv(s.v.b ? 1 : 0, 0);
	case TD_SCALAR_INT:
		return cv((double)s.v.i, 0);
	case TD_SCALAR_UINT:
		return cv((double)s.v.u, 0);
	case TD_SCALAR_FLOAT:
		return cv(s.v.f, 0);
	default:
		return cv(s.v.c[0], s.v.c[1]);
	}
}

/* Element `flat` of `t` broadcast to `shape`, as a complex double. */
static cval get_at(const td_tensor *t, int nd, const int64_t *shape, int64_t flat)
{
	int64_t idx[TD_MAX_DIMS];
	td_scalar s;

	unravel(t, nd, shape, flat, idx);
	td_cr_assert_ok(td_tensor_get(&s, t, idx));
	return scalar_value(s);
}

static cval get(const td_tensor *t, int64_t flat)
{
	return get_at(t, t->ndim, td_tensor_shape(t), flat);
}

/* Small values that every dtype holds exactly, zeros included. */
static td_scalar small_value(td_dtype d, uint64_t *state)
{
	uint64_t r = td_test_rand(state);

	switch (td_dtype_category(d)) {
	case TD_CATEGORY_BOOL:
		return td_scalar_bool(r & 1);
	case TD_CATEGORY_UINT:
		return td_scalar_int((int64_t)(r % 13));
	case TD_CATEGORY_INT:
		return td_scalar_int((int64_t)(r % 25) - 12);
	case TD_CATEGORY_FLOAT:
		return td_scalar_float(((int)(r % 41) - 20) / 4.0);
	default:
		return td_scalar_complex(((int)(r % 41) - 20) / 4.0, ((int)((r >> 16) % 41) - 20) / 4.0);
	}
}

static void fill_small(td_tensor *t, uint64_t seed)
{
	int64_t i, n = td_tensor_numel(t), idx[TD_MAX_DIMS];

	for (i = 0; i < n; i++) {
		unravel(t, t->ndim, td_tensor_shape(t), i, idx);
		td_cr_assert_ok(td_tensor_set(t, idx, small_value(t->dtype, &seed)));
	}
}

static void make(td_tensor *t, td_dtype d, int nd, const int64_t *shape, uint64_t seed)
{
	td_cr_assert_ok(td_tensor_empty(t, d, nd, shape));
	fill_small(t, seed);
}

static void make_f64(td_tensor *t, int nd, const int64_t *shape, const double *v)
{
	td_cr_assert_ok(td_tensor_from_data(t, TD_DTYPE_F64, nd, shape, v));
}

/* A [3, 4] view with every stride nontrivial: a transposed [4, 3] tensor. */
static void make_transposed(td_tensor *t, td_dtype d, uint64_t seed)
{
	const int64_t shape[2] = { 4, 3 };
	td_tensor base;

	make(&base, d, 2, shape, seed);
	td_cr_assert_ok(td_tensor_transpose(t, &base, 0, 1));
	td_tensor_release(&base);
}

/* A [3, 4] view of every other column of a [3, 9] tensor, starting at column 1. */
static void make_stepped(td_tensor *t, td_dtype d, uint64_t seed)
{
	const int64_t shape[2] = { 3, 9 }, vshape[2] = { 3, 4 }, vstrides[2] = { 9, 2 };
	td_tensor base;

	make(&base, d, 2, shape, seed);
	td_cr_assert_ok(td_tensor_from_buffer(t, base.buffer, d, 2, vshape, vstrides, 1));
	td_tensor_release(&base);
}

/* A [3, 4] expansion of a [3, 1] tensor (stride 0 along dim 1). */
static void make_expanded(td_tensor *t, td_dtype d, uint64_t seed)
{
	const int64_t shape[2] = { 3, 1 }, eshape[2] = { 3, 4 };
	td_tensor base;

	make(&base, d, 2, shape, seed);
	td_cr_assert_ok(td_tensor_expand(t, &base, 2, eshape));
	td_tensor_release(&base);
}

/* A host buffer of `kind` (TD_MEMORY_DEVICE or read-only external) viewed as float32 [4]. */
static void make_wrapped(td_tensor *t, float *data, td_memory kind, unsigned flags)
{
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	const int64_t shape[1] = { 4 };
	td_buffer *buf;

	o.memory = kind;
	o.flags = flags;
	o.device = kind == TD_MEMORY_DEVICE ? 0 : -1;
	td_cr_assert_ok(td_buffer_wrap(&buf, data, 4 * sizeof(float), &o));
	td_cr_assert_ok(td_tensor_from_buffer(t, buf, TD_DTYPE_F32, 1, shape, NULL, 0));
	td_buffer_unref(buf);
}

/* ------------------------------------------------------------------------ */
/* Checks against the reference                                              */
/* ------------------------------------------------------------------------ */

/* Run td_tensor_binary(a, b, op) and compare every element with the reference. */
static void check_binary(const td_tensor *a, const td_tensor *b, td_binop op)
{
	td_dtype rt = expect_dtype(a->dtype, b->dtype, op);
	td_dtype ct = compute_of(td_dtype_promote(a->dtype, b->dtype), op);
	int64_t shape[TD_MAX_DIMS], i, n = 1;
	int nd = a->ndim > b->ndim ? a->ndim : b->ndim, d;
	td_tensor out = TD_TENSOR_INIT;

	if (op == TD_OP_SUB && (a->dtype == TD_DTYPE_BOOL || b->dtype == TD_DTYPE_BOOL)) {
		td_cr_assert_err(td_tensor_binary(&out, a, b, op), TD_ETYPE);
		cr_assert_null(out.buffer);
		return;
	}
	td_cr_assert_ok(td_tensor_binary(&out, a, b, op));
	for (d = 0; d < nd; d++) {
		int ia = a->ndim - nd + d, ib = b->ndim - nd + d;
		int64_t sa = ia >= 0 ? td_tensor_shape(a)[ia] : 1,
				sb = ib >= 0 ? td_tensor_shape(b)[ib] : 1;
		shape[d] = sa == 1 ? sb : sa;
		n *= shape[d];
	}
	cr_assert_eq(out.dtype, rt, "%s %s %s: dtype %s, expected %s", td_dtype_name(a->dtype),
		op_names[op], td_dtype_name(b->dtype), td_dtype_name(out.dtype), td_dtype_name(rt));
	cr_assert_eq(out.ndim, nd);
	cr_assert_arr_eq(td_tensor_shape(&out), shape, (size_t)nd * sizeof(int64_t));
	cr_assert(td_tensor_is_contiguous(&out));
	for (i = 0; i < n; i++) {
		cval x = cast_to(ct, get_at(a, nd, shape, i)), y = cast_to(ct, get_at(b, nd, shape, i));
		cval exp = cast_to(rt, ref_op(op, x, y, is_complex(ct))), got = get(&out, i);
		cr_assert(same_value(got, exp, rt),
			"%s %s %s [%lld]: (%g, %g) %s (%g, %g) gave (%g, %g), expected (%g, %g)",
			td_dtype_name(a->dtype), op_names[op], td_dtype_name(b->dtype), (long long)i, x.re,
			x.im, op_names[op], y.re, y.im, got.re, got.im, exp.re, exp.im);
	}
	td_tensor_release(&out);
}

/* Whether `a <op>= (dtype b)` is allowed: no bool SUB, the result casts to a's dtype. */
static bool inplace_allowed(td_dtype a, td_dtype b, td_binop op)
{
	if (op == TD_OP_SUB && (a == TD_DTYPE_BOOL || b == TD_DTYPE_BOOL))
		return false;
	return tcat(expect_dtype(a, b, op)) <= tcat(a);
}

/* Run td_tensor_binary_inplace(a, b, op) and compare a with the reference. */
static void check_inplace(td_tensor *a, const td_tensor *b, td_binop op)
{
	td_dtype rt = expect_dtype(a->dtype, b->dtype, op);
	td_dtype ct = compute_of(td_dtype_promote(a->dtype, b->dtype), op);
	td_tensor a0, b0;
	int64_t i, n = td_tensor_numel(a);

	if (!inplace_allowed(a->dtype, b->dtype, op)) {
		td_cr_assert_err(td_tensor_binary_inplace(a, b, op), TD_ETYPE);
		return;
	}
	td_cr_assert_ok(td_tensor_clone(&a0, a));
	td_cr_assert_ok(td_tensor_clone(&b0, b));
	td_cr_assert_ok(td_tensor_binary_inplace(a, b, op));
	for (i = 0; i < n; i++) {
		cval x = cast_to(ct, get(&a0, i)),
			 y = cast_to(ct, get_at(&b0, a->ndim, td_tensor_shape(a), i));
		cval exp = store_to(a->dtype, rt, ref_op(op, x, y, is_complex(ct)));
		cval got = get(a, i);
		cr_assert(same_value(got, exp, a->dtype),
			"%s %s= %s [%lld]: (%g, %g), (%g, %g) gave (%g, %g), expected (%g, %g)",
			td_dtype_name(a->dtype), op_names[op], td_dtype_name(b->dtype), (long long)i, x.re,
			x.im, y.re, y.im, got.re, got.im, exp.re, exp.im);
	}
	td_tensor_release(&a0);
	td_tensor_release(&b0);
}

/*
 * torch's dtype of `tensor <op> scalar`: the scalar counts only when its
 * category is higher, as int64 / uint64 / float32 / complex64.
 */
static td_dtype scalar_promoted(td_dtype t, td_scalar s)
{
	static const td_dtype defaults[] = { TD_DTYPE_BOOL, TD_DTYPE_I64, TD_DTYPE_U64, TD_DTYPE_F32,
		TD_DTYPE_C64 };
	td_dtype sd = defaults[s.kind];

	return tcat(sd) <= tcat(t) ? t : td_dtype_promote(t, sd);
}

static td_dtype expect_scalar_dtype(td_dtype t, td_scalar s, td_binop op)
{
	td_dtype p = scalar_promoted(t, s);

	if (op == TD_OP_EQ || op == TD_OP_NE)
		return TD_DTYPE_BOOL;
	if (op == TD_OP_DIV && tcat(p) <= 1)
		return TD_DTYPE_F32;
	return p;
}

/* Expected element i of `a <op> s` stored into dtype `into`. */
static cval scalar_expect(const td_tensor *a, int64_t i, td_scalar s, td_binop op, td_dtype into)
{
	td_dtype rt = expect_scalar_dtype(a->dtype, s, op);
	td_dtype ct = compute_of(scalar_promoted(a->dtype, s), op);
	cval x = cast_to(ct, get(a, i)), y = operand_to(ct, scalar_value(s), op);

	return store_to(into, rt, ref_op(op, x, y, is_complex(ct)));
}

static bool scalar_sub_refused(td_dtype t, td_scalar s, td_binop op)
{
	return op == TD_OP_SUB && (t == TD_DTYPE_BOOL || s.kind == TD_SCALAR_BOOL);
}

static void check_scalar(const td_tensor *a, td_scalar s, td_binop op)
{
	td_dtype rt = expect_scalar_dtype(a->dtype, s, op);
	td_tensor out = TD_TENSOR_INIT;
	int64_t i, n = td_tensor_numel(a);

	if (scalar_sub_refused(a->dtype, s, op)) {
		td_cr_assert_err(td_tensor_binary_scalar(&out, a, s, op), TD_ETYPE);
		return;
	}
	td_cr_assert_ok(td_tensor_binary_scalar(&out, a, s, op));
	cr_assert_eq(out.dtype, rt, "%s %s scalar kind %d: dtype %s, expected %s",
		td_dtype_name(a->dtype), op_names[op], (int)s.kind, td_dtype_name(out.dtype),
		td_dtype_name(rt));
	cr_assert_eq(out.ndim, a->ndim);
	cr_assert_arr_eq(td_tensor_shape(&out), td_tensor_shape(a), (size_t)a->ndim * sizeof(int64_t));
	for (i = 0; i < n; i++) {
		cval exp = scalar_expect(a, i, s, op, rt), got = get(&out, i);
		cr_assert(same_value(got, exp, rt),
			"%s %s scalar kind %d [%lld]: (%g, %g), "
			"expected (%g, %g)",
			td_dtype_name(a->dtype), op_names[op], (int)s.kind, (long long)i, got.re, got.im,
			exp.re, exp.im);
	}
	td_tensor_release(&out);
}

static void check_scalar_inplace(td_tensor *a, td_scalar s, td_binop op)
{
	td_dtype rt = expect_scalar_dtype(a->dtype, s, op);
	int64_t i, n = td_tensor_numel(a);
	td_tensor a0;

	if (scalar_sub_refused(a->dtype, s, op) || tcat(rt) > tcat(a->dtype)) {
		td_cr_assert_err(td_tensor_binary_scalar_inplace(a, s, op), TD_ETYPE);
		return;
	}
	td_cr_assert_ok(td_tensor_clone(&a0, a));
	td_cr_assert_ok(td_tensor_binary_scalar_inplace(a, s, op));
	for (i = 0; i < n; i++) {
		cval exp = scalar_expect(&a0, i, s, op, a->dtype), got = get(a, i);
		cr_assert(same_value(got, exp, a->dtype),
			"%s %s= scalar kind %d [%lld]: (%g, %g), "
			"expected (%g, %g)",
			td_dtype_name(a->dtype), op_names[op], (int)s.kind, (long long)i, got.re, got.im,
			exp.re, exp.im);
	}
	td_tensor_release(&a0);
}

/* ------------------------------------------------------------------------ */
/* Every op on every dtype pair and layout                                   */
/* ------------------------------------------------------------------------ */

Test(tensor_ops, every_op_and_dtype_pair_matches_the_reference_with_broadcasting)
{
	const int64_t sa[2] = { 3, 4 }, sb[1] = { 4 };
	size_t i, j, k;

	for (i = 0; i < NDTYPES; i++) {
		for (j = 0; j < NDTYPES; j++) {
			td_tensor a, b;

			make(&a, td_test_all_dtypes[i], 2, sa, 1 + i);
			make(&b, td_test_all_dtypes[j], 1, sb, 100 + j);
			for (k = 0; k < LEN(all_ops); k++) {
				check_binary(&a, &b, all_ops[k]);
				check_binary(&b, &a, all_ops[k]);
			}
			td_tensor_release(&a);
			td_tensor_release(&b);
		}
	}
}

Test(tensor_ops, non_contiguous_operands_match_the_reference)
{
	const int64_t srow[2] = { 1, 4 };
	size_t i, j, k;

	for (i = 0; i < NDTYPES; i++) {
		for (j = 0; j < NDTYPES; j++) {
			td_tensor tr, st, ex, row;

			make_transposed(&tr, td_test_all_dtypes[i], 7 + i);
			make_stepped(&st, td_test_all_dtypes[j], 70 + j);
			make_expanded(&ex, td_test_all_dtypes[j], 700 + j);
			make(&row, td_test_all_dtypes[i], 2, srow, 7000 + i);
			for (k = 0; k < LEN(all_ops); k++) {
				check_binary(&tr, &st, all_ops[k]);
				check_binary(&ex, &tr, all_ops[k]);
				check_binary(&st, &row, all_ops[k]);
			}
			td_tensor_release(&tr);
			td_tensor_release(&st);
			td_tensor_release(&ex);
			td_tensor_release(&row);
		}
	}
}

Test(tensor_ops, long_rows_cross_conversion_chunks)
{
	const int64_t s[1] = { 1000 }, s2[2] = { 1000, 3 };
	static const td_dtype pairs[][2] = {
		{ TD_DTYPE_F32, TD_DTYPE_F32 },
		{ TD_DTYPE_F16, TD_DTYPE_I32 },
		{ TD_DTYPE_BF16, TD_DTYPE_BF16 },
		{ TD_DTYPE_U8, TD_DTYPE_I8 },
		{ TD_DTYPE_C64, TD_DTYPE_F64 },
		{ TD_DTYPE_BOOL, TD_DTYPE_I64 },
	};
	size_t i, k;

	for (i = 0; i < LEN(pairs); i++) {
		td_tensor a, b, big, col;

		make(&a, pairs[i][0], 1, s, 11 + i);
		make(&b, pairs[i][1], 1, s, 22 + i);
		make(&big, pairs[i][1], 2, s2, 33 + i);
		td_cr_assert_ok(td_tensor_select(&col, &big, 1, 1)); /* stride 3 */
		for (k = 0; k < LEN(all_ops); k++) {
			check_binary(&a, &b, all_ops[k]);
			check_binary(&col, &a, all_ops[k]);
		}
		check_inplace(&a, &col, TD_OP_MUL);
		td_tensor_release(&a);
		td_tensor_release(&b);
		td_tensor_release(&big);
		td_tensor_release(&col);
	}
}

Test(tensor_ops, zero_dim_and_empty_tensors)
{
	const int64_t s0[2] = { 0, 3 }, s3[1] = { 3 };
	td_tensor a, b, e, out;

	make(&a, TD_DTYPE_F32, 0, NULL, 1);
	make(&b, TD_DTYPE_I32, 1, s3, 2);
	check_binary(&a, &a, TD_OP_MUL);
	check_binary(&a, &b, TD_OP_ADD);
	check_binary(&b, &a, TD_OP_DIV);
	td_cr_assert_ok(td_tensor_empty(&e, TD_DTYPE_F16, 2, s0));
	td_cr_assert_ok(td_tensor_binary(&out, &e, &b, TD_OP_ADD));
	cr_assert_eq(out.ndim, 2);
	cr_assert_eq(td_tensor_shape(&out)[0], 0);
	cr_assert_eq(td_tensor_shape(&out)[1], 3);
	cr_assert_eq(out.dtype, TD_DTYPE_F16);
	td_tensor_release(&out);
	td_cr_assert_ok(td_tensor_binary_inplace(&e, &b, TD_OP_SUB));
	td_cr_assert_ok(td_tensor_binary_scalar_inplace(&e, td_scalar_int(3), TD_OP_MUL));
	cr_assert_eq(td_tensor_equal(&e, &e), 1);
	td_tensor_release(&a);
	td_tensor_release(&b);
	td_tensor_release(&e);
}

/* ------------------------------------------------------------------------ */
/* Promotion                                                                 */
/* ------------------------------------------------------------------------ */

Test(tensor_ops, result_dtypes_follow_torch)
{
	static const struct {
		td_dtype a, b;
		td_binop op;
		td_dtype r;
	} t[] = {
		{ TD_DTYPE_I32, TD_DTYPE_F16, TD_OP_ADD, TD_DTYPE_F16 },
		{ TD_DTYPE_U8, TD_DTYPE_I8, TD_OP_ADD, TD_DTYPE_I16 },
		{ TD_DTYPE_U8, TD_DTYPE_U8, TD_OP_MUL, TD_DTYPE_U8 },
		{ TD_DTYPE_BOOL, TD_DTYPE_BOOL, TD_OP_ADD, TD_DTYPE_BOOL },
		{ TD_DTYPE_BOOL, TD_DTYPE_BOOL, TD_OP_DIV, TD_DTYPE_F32 },
		{ TD_DTYPE_BOOL, TD_DTYPE_I8, TD_OP_MUL, TD_DTYPE_I8 },
		{ TD_DTYPE_I64, TD_DTYPE_I64, TD_OP_DIV, TD_DTYPE_F32 },
		{ TD_DTYPE_F16, TD_DTYPE_F16, TD_OP_DIV, TD_DTYPE_F16 },
		{ TD_DTYPE_BF16, TD_DTYPE_BF16, TD_OP_DIV, TD_DTYPE_BF16 },
		{ TD_DTYPE_F16, TD_DTYPE_BF16, TD_OP_ADD, TD_DTYPE_F32 },
		{ TD_DTYPE_F32, TD_DTYPE_F64, TD_OP_SUB, TD_DTYPE_F64 },
		{ TD_DTYPE_C64, TD_DTYPE_F64, TD_OP_MUL, TD_DTYPE_C128 },
		{ TD_DTYPE_C64, TD_DTYPE_I64, TD_OP_DIV, TD_DTYPE_C64 },
		{ TD_DTYPE_F64, TD_DTYPE_F64, TD_OP_EQ, TD_DTYPE_BOOL },
		{ TD_DTYPE_C128, TD_DTYPE_U8, TD_OP_NE, TD_DTYPE_BOOL },
		{ TD_DTYPE_U64, TD_DTYPE_I8, TD_OP_ADD, TD_DTYPE_I64 },
	};
	const int64_t s[1] = { 2 };
	size_t i;

	for (i = 0; i < LEN(t); i++) {
		td_tensor a, b, out;

		make(&a, t[i].a, 1, s, i);
		make(&b, t[i].b, 1, s, i + 50);
		td_cr_assert_ok(td_tensor_binary(&out, &a, &b, t[i].op));
		cr_assert_eq(out.dtype, t[i].r, "row %zu: %s, expected %s", i, td_dtype_name(out.dtype),
			td_dtype_name(t[i].r));
		td_tensor_release(&out);
		td_tensor_release(&a);
		td_tensor_release(&b);
	}
}

Test(tensor_ops, scalar_result_dtypes_follow_torch)
{
	static const struct {
		td_dtype a;
		td_scalar s;
		td_binop op;
		td_dtype r;
	} t[] = {
		{ TD_DTYPE_I32, { TD_SCALAR_INT, { .i = 5 } }, TD_OP_ADD, TD_DTYPE_I32 },
		{ TD_DTYPE_U8, { TD_SCALAR_INT, { .i = -1 } }, TD_OP_ADD, TD_DTYPE_U8 },
		{ TD_DTYPE_I8, { TD_SCALAR_UINT, { .u = 3 } }, TD_OP_MUL, TD_DTYPE_I8 },
		{ TD_DTYPE_F16, { TD_SCALAR_FLOAT, { .f = 2.5 } }, TD_OP_MUL, TD_DTYPE_F16 },
		{ TD_DTYPE_BF16, { TD_SCALAR_INT, { .i = 2 } }, TD_OP_DIV, TD_DTYPE_BF16 },
		{ TD_DTYPE_BOOL, { TD_SCALAR_INT, { .i = 1 } }, TD_OP_ADD, TD_DTYPE_I64 },
		{ TD_DTYPE_BOOL, { TD_SCALAR_BOOL, { .b = true } }, TD_OP_ADD, TD_DTYPE_BOOL },
		{ TD_DTYPE_BOOL, { TD_SCALAR_FLOAT, { .f = 1 } }, TD_OP_MUL, TD_DTYPE_F32 },
		{ TD_DTYPE_I32, { TD_SCALAR_FLOAT, { .f = 2.5 } }, TD_OP_MUL, TD_DTYPE_F32 },
		{ TD_DTYPE_I64, { TD_SCALAR_INT, { .i = 2 } }, TD_OP_DIV, TD_DTYPE_F32 },
		{ TD_DTYPE_F64, { TD_SCALAR_FLOAT, { .f = 1 } }, TD_OP_ADD, TD_DTYPE_F64 },
		{ TD_DTYPE_F32, { TD_SCALAR_COMPLEX, { .c = { 1, 1 } } }, TD_OP_ADD, TD_DTYPE_C64 },
		{ TD_DTYPE_F64, { TD_SCALAR_COMPLEX, { .c = { 1, 1 } } }, TD_OP_ADD, TD_DTYPE_C128 },
		{ TD_DTYPE_I16, { TD_SCALAR_COMPLEX, { .c = { 1, 1 } } }, TD_OP_MUL, TD_DTYPE_C64 },
		{ TD_DTYPE_C128, { TD_SCALAR_FLOAT, { .f = 1 } }, TD_OP_SUB, TD_DTYPE_C128 },
		{ TD_DTYPE_I32, { TD_SCALAR_FLOAT, { .f = 1 } }, TD_OP_EQ, TD_DTYPE_BOOL },
	};
	const int64_t s[1] = { 3 };
	size_t i;

	for (i = 0; i < LEN(t); i++) {
		td_tensor a, out;

		make(&a, t[i].a, 1, s, i);
		td_cr_assert_ok(td_tensor_binary_scalar(&out, &a, t[i].s, t[i].op));
		cr_assert_eq(out.dtype, t[i].r, "row %zu: %s, expected %s", i, td_dtype_name(out.dtype),
			td_dtype_name(t[i].r));
		td_tensor_release(&out);
		td_tensor_release(&a);
	}
}

/* ------------------------------------------------------------------------ */
/* Scalars                                                                   */
/* ------------------------------------------------------------------------ */

static td_scalar test_scalars[] = {
	{ TD_SCALAR_BOOL, { .b = true } },
	{ TD_SCALAR_BOOL, { .b = false } },
	{ TD_SCALAR_INT, { .i = -3 } },
	{ TD_SCALAR_INT, { .i = 0 } },
	{ TD_SCALAR_UINT, { .u = 7 } },
	{ TD_SCALAR_FLOAT, { .f = 2.5 } },
	{ TD_SCALAR_FLOAT, { .f = -0.75 } },
	{ TD_SCALAR_COMPLEX, { .c = { 1.5, -2 } } },
};

Test(tensor_ops, every_scalar_kind_with_every_dtype_matches_the_reference)
{
	const int64_t s[2] = { 3, 4 };
	size_t i, j, k;

	for (i = 0; i < NDTYPES; i++) {
		td_tensor a, tr;

		make(&a, td_test_all_dtypes[i], 2, s, 3 + i);
		make_transposed(&tr, td_test_all_dtypes[i], 30 + i);
		for (j = 0; j < LEN(test_scalars); j++) {
			for (k = 0; k < LEN(all_ops); k++) {
				check_scalar(&a, test_scalars[j], all_ops[k]);
				check_scalar(&tr, test_scalars[j], all_ops[k]);
			}
		}
		td_tensor_release(&a);
		td_tensor_release(&tr);
	}
}

Test(tensor_ops, scalar_in_place_on_every_dtype_matches_the_reference)
{
	const int64_t s[2] = { 3, 4 };
	size_t i, j, k;

	for (i = 0; i < NDTYPES; i++) {
		for (j = 0; j < LEN(test_scalars); j++) {
			for (k = 0; k < 4; k++) {
				td_tensor a, st;

				make(&a, td_test_all_dtypes[i], 2, s, 5 + i);
				make_stepped(&st, td_test_all_dtypes[i], 50 + i);
				check_scalar_inplace(&a, test_scalars[j], all_ops[k]);
				check_scalar_inplace(&st, test_scalars[j], all_ops[k]);
				td_tensor_release(&a);
				td_tensor_release(&st);
			}
		}
	}
}

Test(tensor_ops, half_precision_scalar_is_not_rounded_before_the_operation)
{
	const int64_t s[1] = { 1 };
	const float one = 1.0f;
	td_tensor f, h, out;
	td_scalar v;
	int64_t i0 = 0;

	/* 1 + 2049 = 2050 in float32; 2049 rounded to float16 first would give 2048. */
	td_cr_assert_ok(td_tensor_from_data(&f, TD_DTYPE_F32, 1, s, &one));
	td_cr_assert_ok(td_tensor_to_dtype(&h, &f, TD_DTYPE_F16));
	td_cr_assert_ok(td_tensor_binary_scalar(&out, &h, td_scalar_float(2049.0), TD_OP_ADD));
	td_cr_assert_ok(td_tensor_get(&v, &out, &i0));
	cr_assert_eq(out.dtype, TD_DTYPE_F16);
	cr_assert_eq(v.v.f, 2050.0);
	td_tensor_release(&out);
	td_cr_assert_ok(td_tensor_binary_scalar_inplace(&h, td_scalar_int(2049), TD_OP_ADD));
	td_cr_assert_ok(td_tensor_get(&v, &h, &i0));
	cr_assert_eq(v.v.f, 2050.0);
	td_tensor_release(&h);
	td_tensor_release(&f);
}

/* ------------------------------------------------------------------------ */
/* Integer wraparound and division by zero                                   */
/* ------------------------------------------------------------------------ */

static void expect_int_op(td_dtype d, int64_t x, int64_t y, td_binop op, int64_t r)
{
	const int64_t s[1] = { 1 }, i0 = 0;
	td_tensor a, b, out;
	td_scalar v;

	td_cr_assert_ok(td_tensor_empty(&a, d, 1, s));
	td_cr_assert_ok(td_tensor_empty(&b, d, 1, s));
	td_cr_assert_ok(td_tensor_fill(&a, td_scalar_int(x)));
	td_cr_assert_ok(td_tensor_fill(&b, td_scalar_int(y)));
	td_cr_assert_ok(td_tensor_binary(&out, &a, &b, op));
	td_cr_assert_ok(td_tensor_get(&v, &out, &i0));
	cr_assert_eq(v.v.i, r, "%s: %lld %s %lld gave %lld, expected %lld", td_dtype_name(d),
		(long long)x, op_names[op], (long long)y, (long long)v.v.i, (long long)r);
	td_tensor_release(&out);
	td_tensor_release(&a);
	td_tensor_release(&b);
}

static void expect_uint_op(td_dtype d, uint64_t x, uint64_t y, td_binop op, uint64_t r)
{
	const int64_t s[1] = { 1 }, i0 = 0;
	td_tensor a, b, out;
	td_scalar v;

	td_cr_assert_ok(td_tensor_empty(&a, d, 1, s));
	td_cr_assert_ok(td_tensor_empty(&b, d, 1, s));
	td_cr_assert_ok(td_tensor_fill(&a, td_scalar_uint(x)));
	td_cr_assert_ok(td_tensor_fill(&b, td_scalar_uint(y)));
	td_cr_assert_ok(td_tensor_binary(&out, &a, &b, op));
	td_cr_assert_ok(td_tensor_get(&v, &out, &i0));
	cr_assert_eq(v.v.u, r, "%s: %llu %s %llu gave %llu, expected %llu", td_dtype_name(d),
		(unsigned long long)x, op_names[op], (unsigned long long)y, (unsigned long long)v.v.u,
		(unsigned long long)r);
	td_tensor_release(&out);
	td_tensor_release(&a);
	td_tensor_release(&b);
}

Test(tensor_ops, integer_arithmetic_wraps_around)
{
	expect_int_op(TD_DTYPE_I8, 127, 1, TD_OP_ADD, -128);
	expect_int_op(TD_DTYPE_I8, -128, 1, TD_OP_SUB, 127);
	expect_int_op(TD_DTYPE_I8, -128, -1, TD_OP_MUL, -128);
	expect_int_op(TD_DTYPE_I16, 32767, 2, TD_OP_MUL, -2);
	expect_int_op(TD_DTYPE_I16, -32768, 1, TD_OP_SUB, 32767);
	expect_int_op(TD_DTYPE_I32, INT32_MAX, 1, TD_OP_ADD, INT32_MIN);
	expect_int_op(TD_DTYPE_I32, 65536, 65536, TD_OP_MUL, 0);
	expect_int_op(TD_DTYPE_I32, INT32_MIN, -1, TD_OP_MUL, INT32_MIN);
	expect_int_op(TD_DTYPE_I64, INT64_MAX, 1, TD_OP_ADD, INT64_MIN);
	expect_int_op(TD_DTYPE_I64, INT64_MIN, 1, TD_OP_SUB, INT64_MAX);
	expect_int_op(TD_DTYPE_I64, INT64_MIN, -1, TD_OP_MUL, INT64_MIN);
	expect_int_op(TD_DTYPE_I64, INT64_MAX, INT64_MAX, TD_OP_MUL, 1);
	expect_uint_op(TD_DTYPE_U8, 0, 1, TD_OP_SUB, 255);
	expect_uint_op(TD_DTYPE_U8, 200, 100, TD_OP_ADD, 44);
	expect_uint_op(TD_DTYPE_U8, 16, 16, TD_OP_MUL, 0);
	/* 65535 * 65535 overflows int if uint16 is promoted to int: must be done unsigned. */
	expect_uint_op(TD_DTYPE_U16, 65535, 65535, TD_OP_MUL, 1);
	expect_uint_op(TD_DTYPE_U16, 0, 1, TD_OP_SUB, 65535);
	expect_uint_op(TD_DTYPE_U32, UINT32_MAX, UINT32_MAX, TD_OP_MUL, 1);
	expect_uint_op(TD_DTYPE_U32, 0, 1, TD_OP_SUB, UINT32_MAX);
	expect_uint_op(TD_DTYPE_U64, 0, 1, TD_OP_SUB, UINT64_MAX);
	expect_uint_op(TD_DTYPE_U64, UINT64_MAX, UINT64_MAX, TD_OP_MUL, 1);
}

Test(tensor_ops, scalar_and_in_place_arithmetic_wraps_around)
{
	const int64_t s[1] = { 1 }, i0 = 0;
	td_tensor a, out;
	td_scalar v;

	td_cr_assert_ok(td_tensor_full(&a, TD_DTYPE_U8, 1, s, td_scalar_int(5)));
	td_cr_assert_ok(td_tensor_binary_scalar(&out, &a, td_scalar_int(-6), TD_OP_ADD));
	cr_assert_eq(out.dtype, TD_DTYPE_U8);
	td_cr_assert_ok(td_tensor_get(&v, &out, &i0));
	cr_assert_eq(v.v.u, 255);
	td_tensor_release(&out);
	td_tensor_release(&a);
	td_cr_assert_ok(td_tensor_full(&a, TD_DTYPE_I32, 1, s, td_scalar_int(INT32_MAX)));
	td_cr_assert_ok(td_tensor_binary_scalar_inplace(&a, td_scalar_int(INT64_MAX), TD_OP_MUL));
	td_cr_assert_ok(td_tensor_get(&v, &a, &i0));
	/* The scalar wraps to int32 first: (int32)INT64_MAX is -1. */
	cr_assert_eq(v.v.i, -INT32_MAX);
	td_tensor_release(&a);
}

Test(tensor_ops, division_by_zero_gives_infinities_and_nan)
{
	const int64_t s[1] = { 3 };
	const double num[3] = { 1, -1, 0 }, zero[3] = { 0, 0, 0 };
	static const td_dtype dts[] = { TD_DTYPE_BOOL, TD_DTYPE_U8, TD_DTYPE_I8, TD_DTYPE_I32,
		TD_DTYPE_I64, TD_DTYPE_U64, TD_DTYPE_F16, TD_DTYPE_BF16, TD_DTYPE_F32, TD_DTYPE_F64 };
	td_tensor n64, z64;
	size_t i;

	make_f64(&n64, 1, s, num);
	make_f64(&z64, 1, s, zero);
	for (i = 0; i < LEN(dts); i++) {
		td_tensor n, z, out;
		int64_t k;

		td_cr_assert_ok(td_tensor_to_dtype(&n, &n64, dts[i]));
		td_cr_assert_ok(td_tensor_to_dtype(&z, &z64, dts[i]));
		td_cr_assert_ok(td_tensor_binary(&out, &n, &z, TD_OP_DIV));
		for (k = 0; k < 3; k++) {
			double x = get(&n, k).re, r = get(&out, k).re;

			/* -1 converts to true (bool) or 0 (unsigned, saturating). */
			if (x == 0)
				cr_assert(isnan(r), "%s: 0/0 gave %g", td_dtype_name(dts[i]), r);
			else
				cr_assert(isinf(r) && (r > 0) == (x > 0), "%s: %g/0 gave %g", td_dtype_name(dts[i]),
					x, r);
		}
		cr_assert_eq(get(&n, 0).re, 1);
		cr_assert_eq(get(&n, 2).re, 0);
		td_tensor_release(&out);
		td_cr_assert_ok(td_tensor_binary_scalar(&out, &n, td_scalar_int(0), TD_OP_DIV));
		cr_assert(isinf(get(&out, 0).re) && isnan(get(&out, 2).re));
		td_tensor_release(&out);
		td_tensor_release(&n);
		td_tensor_release(&z);
	}
	td_tensor_release(&n64);
	td_tensor_release(&z64);
}

Test(tensor_ops, complex_division_is_robust_and_handles_zero)
{
	const int64_t s[1] = { 4 };
	const double x[8] = { 1e300, 1e300, 1e-300, 1e-300, 1, 1, 0, 0 };
	const double y[8] = { 1e300, 1e300, 1e-300, 1e-300, 0, 0, 0, 0 };
	td_tensor a, b, out;
	cval r;

	td_cr_assert_ok(td_tensor_from_data(&a, TD_DTYPE_C128, 1, s, x));
	td_cr_assert_ok(td_tensor_from_data(&b, TD_DTYPE_C128, 1, s, y));
	td_cr_assert_ok(td_tensor_binary(&out, &a, &b, TD_OP_DIV));
	r = get(&out, 0); /* |y|^2 overflows a naive division */
	cr_assert(fabs(r.re - 1) < 1e-15 && r.im == 0, "(%g, %g)", r.re, r.im);
	r = get(&out, 1); /* |y|^2 underflows a naive division */
	cr_assert(fabs(r.re - 1) < 1e-15 && r.im == 0, "(%g, %g)", r.re, r.im);
	r = get(&out, 2);
	cr_assert(isinf(r.re) && isinf(r.im), "(%g, %g)", r.re, r.im);
	r = get(&out, 3);
	cr_assert(isnan(r.re) && isnan(r.im), "(%g, %g)", r.re, r.im);
	td_tensor_release(&out);
	td_cr_assert_ok(td_tensor_binary_scalar(&out, &a, td_scalar_complex(0, 2), TD_OP_DIV));
	r = get(&out, 1); /* (1e-300 + 1e-300i) / 2i */
	cr_assert(r.re == 0.5e-300 && r.im == -0.5e-300, "(%g, %g)", r.re, r.im);
	td_tensor_release(&out);
	td_tensor_release(&a);
	td_tensor_release(&b);
}

/* ------------------------------------------------------------------------ */
/* In place                                                                  */
/* ------------------------------------------------------------------------ */

Test(tensor_ops, in_place_every_dtype_pair_matches_the_reference_or_is_refused)
{
	const int64_t sa[2] = { 3, 4 }, sb[1] = { 4 };
	size_t i, j, k;

	for (i = 0; i < NDTYPES; i++) {
		for (j = 0; j < NDTYPES; j++) {
			for (k = 0; k < 4; k++) {
				td_tensor a, b, tr, ex;

				make(&a, td_test_all_dtypes[i], 2, sa, 9 + i);
				make(&b, td_test_all_dtypes[j], 1, sb, 90 + j);
				make_transposed(&tr, td_test_all_dtypes[i], 900 + i);
				make_expanded(&ex, td_test_all_dtypes[j], 9000 + j);
				check_inplace(&a, &b, all_ops[k]);
				check_inplace(&tr, &ex, all_ops[k]);
				td_tensor_release(&a);
				td_tensor_release(&b);
				td_tensor_release(&tr);
				td_tensor_release(&ex);
			}
		}
	}
}

Test(tensor_ops, in_place_with_itself_reads_before_writing)
{
	static const td_dtype dts[] = { TD_DTYPE_I32, TD_DTYPE_F16, TD_DTYPE_F32, TD_DTYPE_C64,
		TD_DTYPE_BOOL };
	const int64_t s[2] = { 3, 5 };
	size_t i, k;

	for (i = 0; i < LEN(dts); i++) {
		for (k = 0; k < 4; k++) {
			td_tensor a, alias;

			make(&a, dts[i], 2, s, 4 + i);
			check_inplace(&a, &a, all_ops[k]);
			td_tensor_ref(&alias, &a); /* another handle of the same view */
			check_inplace(&a, &alias, all_ops[k]);
			td_tensor_release(&alias);
			td_tensor_release(&a);
		}
	}
}

Test(tensor_ops, in_place_with_an_overlapping_view_uses_the_old_values)
{
	const int64_t s1[1] = { 10 }, s2[2] = { 4, 4 }, s3[2] = { 3, 4 };
	td_tensor a, head, tail, sq, sqt, m, row;

	/* a[1:] += a[:-1]: a running loop without a copy would compute prefix sums. */
	make(&a, TD_DTYPE_I32, 1, s1, 1);
	td_cr_assert_ok(td_tensor_narrow(&tail, &a, 0, 1, 9));
	td_cr_assert_ok(td_tensor_narrow(&head, &a, 0, 0, 9));
	check_inplace(&tail, &head, TD_OP_ADD);
	check_inplace(&head, &tail, TD_OP_MUL);
	td_tensor_release(&head);
	td_tensor_release(&tail);
	td_tensor_release(&a);

	/* sq += sq.T */
	make(&sq, TD_DTYPE_F32, 2, s2, 2);
	td_cr_assert_ok(td_tensor_transpose(&sqt, &sq, 0, 1));
	check_inplace(&sq, &sqt, TD_OP_ADD);
	check_inplace(&sqt, &sq, TD_OP_SUB);
	td_tensor_release(&sqt);

	/* m += m[0], broadcast over the rows: row 0 changes first. */
	make(&m, TD_DTYPE_F64, 2, s3, 3);
	td_cr_assert_ok(td_tensor_select(&row, &m, 0, 0));
	check_inplace(&m, &row, TD_OP_MUL);
	td_tensor_release(&row);
	td_tensor_release(&m);
	td_tensor_release(&sq);
}

Test(tensor_ops, in_place_with_a_reinterpreting_view_of_the_same_bytes)
{
	const int64_t s[1] = { 600 };
	td_tensor a, bytes;

	/*
	 * b is the first 600 bytes of a as uint8: longer than one conversion
	 * chunk, so a loop without a copy would read bytes it already wrote.
	 */
	make(&a, TD_DTYPE_I32, 1, s, 8);
	td_cr_assert_ok(td_tensor_from_buffer(&bytes, a.buffer, TD_DTYPE_U8, 1, s, NULL, 0));
	check_inplace(&a, &bytes, TD_OP_ADD);
	td_tensor_release(&bytes);
	td_tensor_release(&a);
}

Test(tensor_ops, in_place_ops_without_harmful_overlap_allocate_nothing)
{
	const int64_t s[2] = { 3, 4 }, s1[1] = { 4 };
	td_tensor a, b, f;

	make(&a, TD_DTYPE_F32, 2, s, 1);
	make(&b, TD_DTYPE_I16, 1, s1, 2);
	make(&f, TD_DTYPE_F16, 2, s, 3);
	td_test_alloc_install(0); /* every allocation fails */
	td_cr_assert_ok(td_tensor_binary_inplace(&a, &b, TD_OP_MUL));
	td_cr_assert_ok(td_tensor_binary_inplace(&a, &a, TD_OP_ADD));
	td_cr_assert_ok(td_tensor_binary_inplace(&f, &f, TD_OP_DIV));
	td_cr_assert_ok(td_tensor_binary_scalar_inplace(&a, td_scalar_float(1.5), TD_OP_SUB));
	td_cr_assert_ok(td_tensor_binary_scalar_inplace(&f, td_scalar_int(3), TD_OP_ADD));
	cr_assert_eq(td_test_alloc_attempts(), 0);
	td_test_alloc_uninstall();
	td_tensor_release(&a);
	td_tensor_release(&b);
	td_tensor_release(&f);
}

/* ------------------------------------------------------------------------ */
/* Aliasing of out                                                           */
/* ------------------------------------------------------------------------ */

Test(tensor_ops, out_may_be_an_input)
{
	const int64_t s[1] = { 3 };
	const double va[3] = { 1, 2, 3 }, vb[3] = { 10, 20, 30 };
	td_tensor a, b, keep;
	td_buffer *old;

	make_f64(&a, 1, s, va);
	make_f64(&b, 1, s, vb);
	td_tensor_ref(&keep, &a);
	old = a.buffer;
	cr_assert_eq(td_buffer_refcount(old), 2);
	td_cr_assert_ok(td_tensor_binary(&a, &a, &b, TD_OP_ADD));
	cr_assert_eq(td_buffer_refcount(old), 1, "the input's reference was not released");
	cr_assert_eq(get(&a, 2).re, 33);
	td_cr_assert_ok(td_tensor_binary(&b, &a, &b, TD_OP_SUB));
	cr_assert_eq(get(&b, 1).re, 2);
	td_cr_assert_ok(td_tensor_binary_scalar(&b, &b, td_scalar_int(2), TD_OP_MUL));
	cr_assert_eq(get(&b, 0).re, 2);
	cr_assert_eq(get(&keep, 0).re, 1, "the input was modified");
	td_tensor_release(&keep);
	td_tensor_release(&a);
	td_tensor_release(&b);
}

/* ------------------------------------------------------------------------ */
/* equal and allclose                                                        */
/* ------------------------------------------------------------------------ */

Test(tensor_ops, equal_compares_shape_and_promoted_values)
{
	const int64_t s[2] = { 2, 3 }, s1[2] = { 1, 3 }, s3[1] = { 3 }, st[2] = { 3, 2 };
	const double v[6] = { 0, 1, -2, 3, 4, 5 }, w[6] = { 0, 1, -2, 3, 4, 6 };
	const double nz[6] = { -0.0, 1, -2, 3, 4, 5 };
	td_tensor a, b, c, i32, f16, tr, trt, cc, r1, r3, nan;
	size_t i;

	make_f64(&a, 2, s, v);
	make_f64(&b, 2, s, w);
	make_f64(&c, 2, s, nz);
	cr_assert_eq(td_tensor_equal(&a, &a), 1);
	cr_assert_eq(td_tensor_equal(&a, &b), 0);
	cr_assert_eq(td_tensor_equal(&a, &c), 1, "-0.0 equals 0.0");
	td_cr_assert_ok(td_tensor_to_dtype(&i32, &a, TD_DTYPE_I32));
	td_cr_assert_ok(td_tensor_to_dtype(&f16, &a, TD_DTYPE_F16));
	cr_assert_eq(td_tensor_equal(&a, &i32), 1);
	cr_assert_eq(td_tensor_equal(&f16, &i32), 1);
	cr_assert_eq(td_tensor_equal(&f16, &b), 0);
	/* The same values through a transposed view. */
	make_f64(&tr, 2, st, v);
	td_cr_assert_ok(td_tensor_transpose(&trt, &tr, 0, 1));
	cr_assert_eq(td_tensor_equal(&trt, &a), 0);
	td_cr_assert_ok(td_tensor_contiguous(&cc, &trt));
	cr_assert(td_tensor_is_contiguous(&cc));
	cr_assert_eq(td_tensor_equal(&trt, &cc), 1);
	cr_assert_eq(td_tensor_equal(&cc, &trt), 1);
	/* Shapes that only broadcast are not equal. */
	make(&r1, TD_DTYPE_F32, 2, s1, 1);
	td_cr_assert_ok(td_tensor_reshape(&r3, &r1, 1, s3));
	cr_assert_eq(td_tensor_equal(&r1, &r3), 0);
	/* NaN is not equal to itself. */
	td_cr_assert_ok(td_tensor_full(&nan, TD_DTYPE_F32, 1, s3, td_scalar_float(NAN)));
	cr_assert_eq(td_tensor_equal(&nan, &nan), 0);
	/* Every dtype equals itself and its own clone. */
	for (i = 0; i < NDTYPES; i++) {
		td_tensor x, y;

		make(&x, td_test_all_dtypes[i], 2, s, i);
		td_cr_assert_ok(td_tensor_clone(&y, &x));
		cr_assert_eq(td_tensor_equal(&x, &y), 1, "%s", td_dtype_name(td_test_all_dtypes[i]));
		td_cr_assert_ok(td_tensor_binary_scalar_inplace(&y, td_scalar_bool(true), TD_OP_ADD));
		if (td_test_all_dtypes[i] != TD_DTYPE_BOOL)
			cr_assert_eq(td_tensor_equal(&x, &y), 0, "%s", td_dtype_name(td_test_all_dtypes[i]));
		td_tensor_release(&x);
		td_tensor_release(&y);
	}
	td_tensor_release(&a);
	td_tensor_release(&b);
	td_tensor_release(&c);
	td_tensor_release(&i32);
	td_tensor_release(&f16);
	td_tensor_release(&tr);
	td_tensor_release(&trt);
	td_tensor_release(&cc);
	td_tensor_release(&r1);
	td_tensor_release(&r3);
	td_tensor_release(&nan);
}

Test(tensor_ops, equal_sees_imaginary_parts_and_bool_values)
{
	const int64_t s[1] = { 2 };
	const double x[4] = { 1, 2, 3, 4 }, y[4] = { 1, 2, 3, 5 };
	const uint8_t b1[2] = { 1, 0 }, b2[2] = { 1, 1 };
	td_tensor a, b, ba, bb, u8;

	td_cr_assert_ok(td_tensor_from_data(&a, TD_DTYPE_C128, 1, s, x));
	td_cr_assert_ok(td_tensor_from_data(&b, TD_DTYPE_C128, 1, s, y));
	cr_assert_eq(td_tensor_equal(&a, &b), 0);
	td_cr_assert_ok(td_tensor_from_data(&ba, TD_DTYPE_BOOL, 1, s, b1));
	td_cr_assert_ok(td_tensor_from_data(&bb, TD_DTYPE_BOOL, 1, s, b2));
	td_cr_assert_ok(td_tensor_from_data(&u8, TD_DTYPE_U8, 1, s, b1));
	cr_assert_eq(td_tensor_equal(&ba, &bb), 0);
	cr_assert_eq(td_tensor_equal(&ba, &u8), 1);
	td_tensor_release(&a);
	td_tensor_release(&b);
	td_tensor_release(&ba);
	td_tensor_release(&bb);
	td_tensor_release(&u8);
}

Test(tensor_ops, allclose_follows_torch)
{
	const int64_t s[1] = { 4 }, s2[2] = { 2, 4 };
	const double x[4] = { 1, 2, 3, 4 }, y[4] = { 1.0001, 2, 3, 4.0004 };
	const double inf[4] = { INFINITY, -INFINITY, 1, NAN };
	const double inf2[4] = { INFINITY, INFINITY, 1, NAN };
	const double big[4] = { INFINITY, -INFINITY, 1, 1e308 };
	const double m[8] = { 1, 2, 3, 4, 1, 2, 3, 4.1 };
	td_tensor a, b, i1, i2, bg, mm, i16;

	make_f64(&a, 1, s, x);
	make_f64(&b, 1, s, y);
	cr_assert_eq(td_tensor_allclose(&a, &b, 1e-5, 1e-8, false), 0);
	cr_assert_eq(td_tensor_allclose(&a, &b, 1e-4, 1e-8, false), 1);
	cr_assert_eq(td_tensor_allclose(&a, &b, 0, 1e-3, false), 1);
	cr_assert_eq(td_tensor_allclose(&a, &b, 0, 0, false), 0);
	cr_assert_eq(td_tensor_allclose(&a, &a, 0, 0, false), 1);
	/* Infinities: equal only to the same infinity; NaN only with equal_nan. */
	make_f64(&i1, 1, s, inf);
	make_f64(&i2, 1, s, inf2);
	make_f64(&bg, 1, s, big);
	cr_assert_eq(td_tensor_allclose(&i1, &i1, 1e-5, 1e-8, false), 0);
	cr_assert_eq(td_tensor_allclose(&i1, &i1, 1e-5, 1e-8, true), 1);
	cr_assert_eq(td_tensor_allclose(&i1, &i2, 1e-5, 1e-8, true), 0);
	cr_assert_eq(td_tensor_allclose(&bg, &bg, 0, 0, false), 1);
	cr_assert_eq(td_tensor_allclose(&i1, &bg, INFINITY, INFINITY, true), 0);
	/* Broadcasting: [2, 4] against [4]; mixed dtypes. */
	make_f64(&mm, 2, s2, m);
	cr_assert_eq(td_tensor_allclose(&mm, &a, 0, 0.1, false), 1);
	cr_assert_eq(td_tensor_allclose(&mm, &a, 0, 0.05, false), 0);
	td_cr_assert_ok(td_tensor_to_dtype(&i16, &a, TD_DTYPE_I16));
	cr_assert_eq(td_tensor_allclose(&i16, &a, 0, 0, false), 1);
	cr_assert_eq(td_tensor_allclose(&i16, &b, 1e-4, 0, false), 1);
	td_tensor_release(&a);
	td_tensor_release(&b);
	td_tensor_release(&i1);
	td_tensor_release(&i2);
	td_tensor_release(&bg);
	td_tensor_release(&mm);
	td_tensor_release(&i16);
}

Test(tensor_ops, allclose_uses_complex_magnitudes)
{
	const int64_t s[1] = { 1 };
	const double x[2] = { 3, 4 }, y[2] = { 3, 4.5 }, z[2] = { NAN, 0 }, w[2] = { 0, NAN };
	td_tensor a, b, na, nb, f;

	td_cr_assert_ok(td_tensor_from_data(&a, TD_DTYPE_C128, 1, s, x));
	td_cr_assert_ok(td_tensor_from_data(&b, TD_DTYPE_C128, 1, s, y));
	/* |a - b| = 0.5; |b| = sqrt(29.25) = 5.408... */
	cr_assert_eq(td_tensor_allclose(&a, &b, 0, 0.5, false), 1);
	cr_assert_eq(td_tensor_allclose(&a, &b, 0, 0.49, false), 0);
	cr_assert_eq(td_tensor_allclose(&a, &b, 0.093, 0, false), 1);
	cr_assert_eq(td_tensor_allclose(&a, &b, 0.092, 0, false), 0);
	td_cr_assert_ok(td_tensor_from_data(&na, TD_DTYPE_C128, 1, s, z));
	td_cr_assert_ok(td_tensor_from_data(&nb, TD_DTYPE_C128, 1, s, w));
	cr_assert_eq(td_tensor_allclose(&na, &nb, 0, 0, false), 0);
	cr_assert_eq(td_tensor_allclose(&na, &nb, 0, 0, true), 1);
	td_cr_assert_ok(td_tensor_full(&f, TD_DTYPE_F32, 1, s, td_scalar_float(5)));
	cr_assert_eq(td_tensor_allclose(&a, &f, 0, 4.5, false), 1); /* |3+4i - 5| = 4.47 */
	td_tensor_release(&a);
	td_tensor_release(&b);
	td_tensor_release(&na);
	td_tensor_release(&nb);
	td_tensor_release(&f);
}

/* ------------------------------------------------------------------------ */
/* Failure paths                                                             */
/* ------------------------------------------------------------------------ */

Test(tensor_ops, bad_arguments_are_refused)
{
	const int64_t s3[1] = { 3 }, s4[1] = { 4 }, s34[2] = { 3, 4 };
	td_tensor a, b, a34, bl, out = TD_TENSOR_INIT, released = TD_TENSOR_INIT;
	td_scalar bad = td_scalar_int(1);

	make(&a, TD_DTYPE_F32, 1, s3, 1);
	make(&b, TD_DTYPE_F32, 1, s4, 2);
	make(&a34, TD_DTYPE_I32, 2, s34, 3);
	make(&bl, TD_DTYPE_BOOL, 1, s3, 4);
	bad.kind = (td_scalar_kind)9;
	td_cr_assert_err(td_tensor_binary(NULL, &a, &a, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary(&out, NULL, &a, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary(&out, &a, NULL, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary(&out, &released, &a, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary(&out, &a, &a, (td_binop)6), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary(&out, &a, &a, (td_binop)-1), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary(&out, &a, &b, TD_OP_ADD), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary(&out, &a34, &a, TD_OP_MUL), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary(&out, &bl, &bl, TD_OP_SUB), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary(&out, &a, &bl, TD_OP_SUB), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_scalar(NULL, &a, td_scalar_int(1), TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_scalar(&out, NULL, td_scalar_int(1), TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_scalar(&out, &a, bad, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_scalar(&out, &a, td_scalar_int(1), (td_binop)7), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_scalar(&out, &bl, td_scalar_int(1), TD_OP_SUB), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_scalar(&out, &a, td_scalar_bool(true), TD_OP_SUB), TD_ETYPE);
	cr_assert_null(out.buffer, "out was written by a failing call");
	td_cr_assert_err(td_tensor_equal(NULL, &a), TD_EINVAL);
	td_cr_assert_err(td_tensor_equal(&a, &released), TD_EINVAL);
	td_cr_assert_err(td_tensor_allclose(&a, NULL, 0, 0, false), TD_EINVAL);
	td_cr_assert_err(td_tensor_allclose(&a, &b, 1e-5, 1e-8, false), TD_ETYPE);
	td_cr_assert_err(td_tensor_allclose(&a, &a, -1, 0, false), TD_EINVAL);
	td_cr_assert_err(td_tensor_allclose(&a, &a, 0, NAN, false), TD_EINVAL);
	td_tensor_release(&a);
	td_tensor_release(&b);
	td_tensor_release(&a34);
	td_tensor_release(&bl);
}

Test(tensor_ops, in_place_refusals)
{
	const int64_t s3[1] = { 3 }, s4[1] = { 4 }, s34[2] = { 3, 4 }, s31[2] = { 3, 1 };
	td_tensor f, i, bl, c, f4, f34, col, ex, keep;
	td_scalar bad = td_scalar_int(1);

	make(&f, TD_DTYPE_F32, 1, s3, 1);
	make(&i, TD_DTYPE_I32, 1, s3, 2);
	make(&bl, TD_DTYPE_BOOL, 1, s3, 3);
	make(&c, TD_DTYPE_C64, 1, s3, 4);
	make(&f4, TD_DTYPE_F32, 1, s4, 5);
	make(&f34, TD_DTYPE_F32, 2, s34, 6);
	make(&col, TD_DTYPE_F32, 2, s31, 7);
	td_cr_assert_ok(td_tensor_expand(&ex, &col, 2, s34));
	td_cr_assert_ok(td_tensor_clone(&keep, &i));
	bad.kind = (td_scalar_kind)-1;
	td_cr_assert_err(td_tensor_binary_inplace(NULL, &f, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_inplace(&f, NULL, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_inplace(&f, &f, (td_binop)6), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_inplace(&f, &f, TD_OP_EQ), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_inplace(&f, &f, TD_OP_NE), TD_EINVAL);
	/* b must broadcast to a's shape, not the other way. */
	td_cr_assert_err(td_tensor_binary_inplace(&f, &f34, TD_OP_ADD), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_inplace(&f, &f4, TD_OP_ADD), TD_ETYPE);
	/* The result must fit a's category. */
	td_cr_assert_err(td_tensor_binary_inplace(&i, &f, TD_OP_ADD), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_inplace(&i, &i, TD_OP_DIV), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_inplace(&f, &c, TD_OP_MUL), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_inplace(&bl, &i, TD_OP_ADD), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_inplace(&bl, &bl, TD_OP_SUB), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_inplace(&i, &bl, TD_OP_SUB), TD_ETYPE);
	/* An expanded destination would write one element several times. */
	td_cr_assert_err(td_tensor_binary_inplace(&ex, &f34, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(&ex, td_scalar_int(1), TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(NULL, td_scalar_int(1), TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(&f, bad, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(&f, td_scalar_int(1), (td_binop)9), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(&f, td_scalar_int(1), TD_OP_EQ), TD_EINVAL);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(&i, td_scalar_float(2.5), TD_OP_ADD),
		TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(&i, td_scalar_int(2), TD_OP_DIV), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(&f, td_scalar_complex(1, 1), TD_OP_ADD),
		TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(&bl, td_scalar_int(1), TD_OP_ADD), TD_ETYPE);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(&bl, td_scalar_bool(true), TD_OP_SUB),
		TD_ETYPE);
	cr_assert_eq(td_tensor_equal(&i, &keep), 1, "a refused call modified its tensor");
	td_tensor_release(&f);
	td_tensor_release(&i);
	td_tensor_release(&bl);
	td_tensor_release(&c);
	td_tensor_release(&f4);
	td_tensor_release(&f34);
	td_tensor_release(&col);
	td_tensor_release(&ex);
	td_tensor_release(&keep);
}

Test(tensor_ops, read_only_buffers_are_read_but_never_written)
{
	float data[4] = { 1, 2, 3, 4 };
	td_tensor ro, rw, out;

	make_wrapped(&ro, data, TD_MEMORY_EXTERNAL, TD_BUFFER_READONLY);
	td_cr_assert_ok(td_tensor_clone(&rw, &ro));
	td_cr_assert_err(td_tensor_binary_inplace(&ro, &rw, TD_OP_ADD), TD_EREADONLY);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(&ro, td_scalar_int(1), TD_OP_MUL),
		TD_EREADONLY);
	cr_assert_eq(data[0], 1);
	td_cr_assert_ok(td_tensor_binary(&out, &ro, &rw, TD_OP_ADD));
	cr_assert_eq(get(&out, 3).re, 8);
	td_tensor_release(&out);
	td_cr_assert_ok(td_tensor_binary_scalar(&out, &ro, td_scalar_int(1), TD_OP_SUB));
	cr_assert_eq(get(&out, 3).re, 3);
	td_tensor_release(&out);
	td_cr_assert_ok(td_tensor_binary_inplace(&rw, &ro, TD_OP_MUL));
	cr_assert_eq(get(&rw, 3).re, 16);
	cr_assert_eq(td_tensor_equal(&ro, &ro), 1);
	cr_assert_eq(td_tensor_allclose(&ro, &rw, 0, 12, false), 1);
	td_tensor_release(&ro);
	td_tensor_release(&rw);
}

Test(tensor_ops, device_buffers_are_not_supported)
{
	float data[4] = { 1, 2, 3, 4 };
	td_tensor dev, host, out = TD_TENSOR_INIT;

	make_wrapped(&dev, data, TD_MEMORY_DEVICE, 0);
	make_wrapped(&host, data, TD_MEMORY_EXTERNAL, 0);
	td_cr_assert_err(td_tensor_binary(&out, &dev, &host, TD_OP_ADD), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_binary(&out, &host, &dev, TD_OP_ADD), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_binary_scalar(&out, &dev, td_scalar_int(1), TD_OP_ADD), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_binary_inplace(&dev, &host, TD_OP_ADD), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_binary_inplace(&host, &dev, TD_OP_ADD), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_binary_scalar_inplace(&dev, td_scalar_int(1), TD_OP_ADD),
		TD_ENOTSUP);
	td_cr_assert_err(td_tensor_equal(&dev, &host), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_allclose(&host, &dev, 0, 0, false), TD_ENOTSUP);
	cr_assert_null(out.buffer);
	td_tensor_release(&dev);
	td_tensor_release(&host);
}

Test(tensor_ops, misaligned_wrapped_data_is_handled)
{
	double storage[8];
	char *bytes = (char *)storage + 1; /* float32 elements at an odd address */
	const int64_t s[1] = { 5 };
	const float v[5] = { 1, 2, 3, 4, 5 };
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	td_tensor a, out;
	td_buffer *buf;

	memcpy(bytes, v, sizeof(v));
	td_cr_assert_ok(td_buffer_wrap(&buf, bytes, sizeof(v), &o));
	td_cr_assert_ok(td_tensor_from_buffer(&a, buf, TD_DTYPE_F32, 1, s, NULL, 0));
	td_buffer_unref(buf);
	td_cr_assert_ok(td_tensor_binary(&out, &a, &a, TD_OP_MUL));
	cr_assert_eq(get(&out, 4).re, 25);
	td_tensor_release(&out);
	td_cr_assert_ok(td_tensor_binary_scalar_inplace(&a, td_scalar_float(0.5), TD_OP_ADD));
	cr_assert_eq(get(&a, 0).re, 1.5);
	td_tensor_release(&a);
}

/* ------------------------------------------------------------------------ */
/* Allocation failure                                                        */
/* ------------------------------------------------------------------------ */

typedef struct sweep_ctx {
	td_tensor a, b, out;
	td_binop op;
} sweep_ctx;

static int sweep_binary(void *p)
{
	sweep_ctx *c = p;

	return td_tensor_binary(&c->out, &c->a, &c->b, c->op);
}

static int sweep_scalar(void *p)
{
	sweep_ctx *c = p;

	return td_tensor_binary_scalar(&c->out, &c->a, td_scalar_float(1.5), c->op);
}

static int sweep_inplace_overlap(void *p)
{
	sweep_ctx *c = p;

	/* b is a transposed view of a: the library must copy it first. */
	return td_tensor_binary_inplace(&c->a, &c->b, c->op);
}

static void sweep_release_out(void *p)
{
	sweep_ctx *c = p;

	td_tensor_release(&c->out);
}

static void sweep_nothing(void *p)
{
	(void)p;
}

Test(tensor_ops, allocation_failures_give_enomem_and_leak_nothing)
{
	const int64_t s[2] = { 4, 4 }, s1[1] = { 4 };
	sweep_ctx c;

	memset(&c, 0, sizeof(c));
	make(&c.a, TD_DTYPE_F16, 2, s, 1);
	make(&c.b, TD_DTYPE_I32, 1, s1, 2);
	c.op = TD_OP_DIV;
	td_test_enomem_sweep(sweep_binary, sweep_release_out, &c);
	c.op = TD_OP_EQ;
	td_test_enomem_sweep(sweep_binary, sweep_release_out, &c);
	c.op = TD_OP_MUL;
	td_test_enomem_sweep(sweep_scalar, sweep_release_out, &c);
	td_tensor_release(&c.b);
	td_cr_assert_ok(td_tensor_transpose(&c.b, &c.a, 0, 1));
	c.op = TD_OP_ADD;
	td_test_enomem_sweep(sweep_inplace_overlap, sweep_nothing, &c);
	td_tensor_release(&c.a);
	td_tensor_release(&c.b);
}
