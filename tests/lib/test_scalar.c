/* SPDX-License-Identifier: MIT */
/*
 * test_scalar.c - the typed readers of td_scalar (td_scalar_as_bool and the
 * others): every kind into every C type, the conversion rules of
 * td_tensor_to_dtype() at their edges, and invalid kinds.
 */
#include "td_test.h"

#include <math.h>

Test(scalar, each_kind_reads_as_each_type)
{
	td_scalar b = td_scalar_bool(true), i = td_scalar_int(-7), u = td_scalar_uint(9),
			  f = td_scalar_float(2.75), c = td_scalar_complex(-1.5, 4.0);

	cr_assert(td_scalar_as_bool(b));
	cr_assert_eq(td_scalar_as_int64(b), 1);
	cr_assert_eq(td_scalar_as_uint64(b), 1u);
	cr_assert_eq(td_scalar_as_double(b), 1.0);

	cr_assert(td_scalar_as_bool(i));
	cr_assert_eq(td_scalar_as_int64(i), -7);
	cr_assert_eq(td_scalar_as_double(i), -7.0);
	/* Integer to integer of the other signedness wraps, as a cast does. */
	cr_assert_eq(td_scalar_as_uint64(i), (uint64_t)-7);

	cr_assert_eq(td_scalar_as_int64(u), 9);
	cr_assert_eq(td_scalar_as_uint64(u), 9u);
	cr_assert_eq(td_scalar_as_double(u), 9.0);

	cr_assert(td_scalar_as_bool(f));
	cr_assert_eq(td_scalar_as_int64(f), 2, "floats truncate toward zero");
	cr_assert_eq(td_scalar_as_uint64(f), 2u);
	cr_assert_eq(td_scalar_as_double(f), 2.75);

	/* A complex value reads as its real part. */
	cr_assert_eq(td_scalar_as_double(c), -1.5);
	cr_assert_eq(td_scalar_as_int64(c), -1);
	cr_assert(td_scalar_as_bool(c));
}

Test(scalar, zero_and_false_read_as_false)
{
	cr_assert_not(td_scalar_as_bool(td_scalar_bool(false)));
	cr_assert_not(td_scalar_as_bool(td_scalar_int(0)));
	cr_assert_not(td_scalar_as_bool(td_scalar_float(0.0)));
	cr_assert_not(td_scalar_as_bool(td_scalar_float(-0.0)));
	cr_assert(td_scalar_as_bool(td_scalar_float(0.25)));
	cr_assert(td_scalar_as_bool(td_scalar_float(NAN)), "NaN is nonzero");
}

Test(scalar, floats_saturate_and_nan_gives_zero)
{
	cr_assert_eq(td_scalar_as_int64(td_scalar_float(-2.9)), -2);
	cr_assert_eq(td_scalar_as_int64(td_scalar_float(1e300)), INT64_MAX);
	cr_assert_eq(td_scalar_as_int64(td_scalar_float(-1e300)), INT64_MIN);
	cr_assert_eq(td_scalar_as_int64(td_scalar_float(INFINITY)), INT64_MAX);
	cr_assert_eq(td_scalar_as_int64(td_scalar_float(NAN)), 0);
	cr_assert_eq(td_scalar_as_uint64(td_scalar_float(-5.0)), 0u);
	cr_assert_eq(td_scalar_as_uint64(td_scalar_float(1e300)), UINT64_MAX);
	cr_assert_eq(td_scalar_as_uint64(td_scalar_float(NAN)), 0u);
	cr_assert(isnan(td_scalar_as_double(td_scalar_float(NAN))));
	cr_assert_eq(td_scalar_as_double(td_scalar_int(INT64_MIN)), (double)INT64_MIN);
	cr_assert_eq(td_scalar_as_double(td_scalar_uint(UINT64_MAX)), (double)UINT64_MAX);
}

Test(scalar, invalid_kind_reads_as_zero)
{
	td_scalar bad = td_scalar_float(3.0);

	bad.kind = (td_scalar_kind)9;
	cr_assert_not(td_scalar_as_bool(bad));
	cr_assert_eq(td_scalar_as_int64(bad), 0);
	cr_assert_eq(td_scalar_as_uint64(bad), 0u);
	cr_assert_eq(td_scalar_as_double(bad), 0.0);
	bad.kind = (td_scalar_kind)-1;
	cr_assert_eq(td_scalar_as_double(bad), 0.0);
}

/* What td_tensor_get() returns, read back whatever the tensor's dtype. */
Test(scalar, reads_what_tensor_get_returns)
{
	static const td_dtype dtypes[] = { TD_DTYPE_BOOL, TD_DTYPE_U8, TD_DTYPE_I8, TD_DTYPE_I16,
		TD_DTYPE_I32, TD_DTYPE_I64, TD_DTYPE_U16, TD_DTYPE_U32, TD_DTYPE_U64, TD_DTYPE_F16,
		TD_DTYPE_BF16, TD_DTYPE_F32, TD_DTYPE_F64, TD_DTYPE_C64, TD_DTYPE_C128 };
	const int64_t shape[1] = { 2 }, at[1] = { 1 };
	size_t i;

	for (i = 0; i < TD_TEST_ARRAY_LEN(dtypes); i++) {
		td_tensor t = TD_TENSOR_INIT;
		td_scalar s;
		double want = dtypes[i] == TD_DTYPE_BOOL ? 1.0 : 3.0;

		td_cr_assert_ok(td_tensor_full(&t, dtypes[i], 1, shape, td_scalar_float(3.0)));
		td_cr_assert_ok(td_tensor_get(&s, &t, at));
		cr_assert_eq(td_scalar_as_double(s), want, "%s", td_dtype_name(dtypes[i]));
		cr_assert_eq(td_scalar_as_int64(s), (int64_t)want, "%s", td_dtype_name(dtypes[i]));
		cr_assert(td_scalar_as_bool(s));
		td_tensor_release(&t);
	}
}
