/* SPDX-License-Identifier: MIT */
/*
 * scalar.c - typed readers of a td_scalar (td_scalar_as_bool() and the
 * others): a scalar of any kind converted to one C type by the conversion
 * rules of td_tensor_to_dtype(), through the same kernel (td__scalar_store).
 */
#include "td_internal.h"
#include "tensor_impl.h"

/* A scalar of an unknown kind reads as zero: these readers cannot fail. */
static bool valid(td_scalar s)
{
	return (unsigned)s.kind <= TD_SCALAR_COMPLEX;
}

bool td_scalar_as_bool(td_scalar s)
{
	uint8_t b = 0;

	if (valid(s))
		td__scalar_store(&b, TD_DTYPE_BOOL, s);
	return b != 0;
}

int64_t td_scalar_as_int64(td_scalar s)
{
	int64_t v = 0;

	if (valid(s))
		td__scalar_store(&v, TD_DTYPE_I64, s);
	return v;
}

uint64_t td_scalar_as_uint64(td_scalar s)
{
	uint64_t v = 0;

	if (valid(s))
		td__scalar_store(&v, TD_DTYPE_U64, s);
	return v;
}

double td_scalar_as_double(td_scalar s)
{
	double v = 0.0;

	if (valid(s))
		td__scalar_store(&v, TD_DTYPE_F64, s);
	return v;
}
