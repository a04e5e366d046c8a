/* SPDX-License-Identifier: MIT */
/* test_dtype.c - the dtype table, name parsing, DLPack codes, promotion, 16-bit floats. */
#include "td_test.h"

#include <math.h>

Test(dtype, sizes_and_names_of_every_dtype)
{
	static const struct {
		td_dtype d;
		size_t size;
		const char *name, *torch, *numpy, *st;
	} t[] = {
		{ TD_DTYPE_BOOL, 1, "bool", "torch.bool", "|b1", "BOOL" },
		{ TD_DTYPE_U8, 1, "uint8", "torch.uint8", "|u1", "U8" },
		{ TD_DTYPE_I8, 1, "int8", "torch.int8", "|i1", "I8" },
		{ TD_DTYPE_I16, 2, "int16", "torch.int16", "<i2", "I16" },
		{ TD_DTYPE_I32, 4, "int32", "torch.int32", "<i4", "I32" },
		{ TD_DTYPE_I64, 8, "int64", "torch.int64", "<i8", "I64" },
		{ TD_DTYPE_U16, 2, "uint16", "torch.uint16", "<u2", "U16" },
		{ TD_DTYPE_U32, 4, "uint32", "torch.uint32", "<u4", "U32" },
		{ TD_DTYPE_U64, 8, "uint64", "torch.uint64", "<u8", "U64" },
		{ TD_DTYPE_F16, 2, "float16", "torch.float16", "<f2", "F16" },
		{ TD_DTYPE_BF16, 2, "bfloat16", "torch.bfloat16", NULL, "BF16" },
		{ TD_DTYPE_F32, 4, "float32", "torch.float32", "<f4", "F32" },
		{ TD_DTYPE_F64, 8, "float64", "torch.float64", "<f8", "F64" },
		{ TD_DTYPE_C64, 8, "complex64", "torch.complex64", "<c8", "C64" },
		{ TD_DTYPE_C128, 16, "complex128", "torch.complex128", "<c16", NULL },
	};
	size_t i;

	cr_assert_eq(sizeof(t) / sizeof(t[0]), TD_DTYPE_COUNT);
	for (i = 0; i < TD_DTYPE_COUNT; i++) {
		td_dtype back;
		cr_assert(td_dtype_is_valid(t[i].d));
		cr_assert_eq(td_dtype_size(t[i].d), t[i].size, "%s", t[i].name);
		cr_assert_str_eq(td_dtype_name(t[i].d), t[i].name);
		cr_assert_str_eq(td_dtype_torch_name(t[i].d), t[i].torch);
		if (t[i].numpy) {
			cr_assert_str_eq(td_dtype_numpy_name(t[i].d), t[i].numpy);
			td_cr_assert_ok(td_dtype_from_name(&back, t[i].numpy));
			cr_assert_eq(back, t[i].d);
		} else {
			cr_assert_null(td_dtype_numpy_name(t[i].d));
		}
		if (t[i].st) {
			cr_assert_str_eq(td_dtype_safetensors_name(t[i].d), t[i].st);
			td_cr_assert_ok(td_dtype_from_name(&back, t[i].st));
			cr_assert_eq(back, t[i].d);
		} else {
			cr_assert_null(td_dtype_safetensors_name(t[i].d));
		}
		td_cr_assert_ok(td_dtype_from_name(&back, t[i].name));
		cr_assert_eq(back, t[i].d);
		td_cr_assert_ok(td_dtype_from_name(&back, t[i].torch));
		cr_assert_eq(back, t[i].d);
	}
}

Test(dtype, invalid_dtype_is_reported_not_crashed)
{
	cr_assert_not(td_dtype_is_valid(-1));
	cr_assert_not(td_dtype_is_valid(TD_DTYPE_COUNT));
	cr_assert_eq(td_dtype_size((td_dtype)99), 0);
	cr_assert_str_eq(td_dtype_name((td_dtype)99), "invalid");
	cr_assert_null(td_dtype_torch_name((td_dtype)99));
	cr_assert_null(td_dtype_numpy_name((td_dtype)-3));
	cr_assert_null(td_dtype_safetensors_name((td_dtype)99));
	cr_assert_eq(td_dtype_promote((td_dtype)99, TD_DTYPE_F32), (td_dtype)99);
}

Test(dtype, aliases_and_native_byte_order_are_accepted)
{
	td_dtype d;

	td_cr_assert_ok(td_dtype_from_name(&d, "torch.float"));
	cr_assert_eq(d, TD_DTYPE_F32);
	td_cr_assert_ok(td_dtype_from_name(&d, "double"));
	cr_assert_eq(d, TD_DTYPE_F64);
	td_cr_assert_ok(td_dtype_from_name(&d, "torch.long"));
	cr_assert_eq(d, TD_DTYPE_I64);
	td_cr_assert_ok(td_dtype_from_name(&d, "torch.half"));
	cr_assert_eq(d, TD_DTYPE_F16);
	td_cr_assert_ok(td_dtype_from_name(&d, "=f4"));
	cr_assert_eq(d, TD_DTYPE_F32);
	td_cr_assert_ok(td_dtype_from_name(&d, "<b1"));
	cr_assert_eq(d, TD_DTYPE_BOOL);
}

Test(dtype, unknown_and_unsupported_names_fail_cleanly)
{
	td_dtype d;

	td_cr_assert_err(td_dtype_from_name(&d, ""), TD_EINVAL);
	td_cr_assert_err(td_dtype_from_name(&d, "float31"), TD_EINVAL);
	td_cr_assert_err(td_dtype_from_name(&d, "torch."), TD_EINVAL);
	td_cr_assert_err(td_dtype_from_name(&d, ">f4"), TD_ENOTSUP);
	td_cr_assert_err(td_dtype_from_name(&d, "torch.complex32"), TD_ENOTSUP);
	td_cr_assert_err(td_dtype_from_name(&d, "torch.qint8"), TD_ENOTSUP);
	td_cr_assert_err(td_dtype_from_name(&d, "F8_E4M3"), TD_ENOTSUP);
	td_cr_assert_err(td_dtype_from_name(NULL, "float32"), TD_EINVAL);
	td_cr_assert_err(td_dtype_from_name(&d, NULL), TD_EINVAL);
}

Test(dtype, dlpack_codes_round_trip)
{
	int i;
	uint8_t code, bits;
	td_dtype d;

	for (i = 0; i < TD_DTYPE_COUNT; i++) {
		td_cr_assert_ok(td_dtype_to_dlpack(&code, &bits, (td_dtype)i));
		td_cr_assert_ok(td_dtype_from_dlpack(&d, code, bits, 1));
		cr_assert_eq(d, (td_dtype)i);
	}
	td_cr_assert_ok(td_dtype_to_dlpack(&code, &bits, TD_DTYPE_BF16));
	cr_assert_eq(code, 4);
	cr_assert_eq(bits, 16);
	td_cr_assert_ok(td_dtype_to_dlpack(&code, &bits, TD_DTYPE_BOOL));
	cr_assert_eq(code, 6);
	td_cr_assert_err(td_dtype_from_dlpack(&d, 2, 32, 4), TD_ENOTSUP);
	td_cr_assert_err(td_dtype_from_dlpack(&d, 2, 24, 1), TD_ENOTSUP);
	td_cr_assert_err(td_dtype_from_dlpack(NULL, 2, 32, 1), TD_EINVAL);
	td_cr_assert_err(td_dtype_to_dlpack(&code, &bits, (td_dtype)77), TD_EINVAL);
	td_cr_assert_err(td_dtype_to_dlpack(NULL, &bits, TD_DTYPE_F32), TD_EINVAL);
}

Test(dtype, promotion_follows_torch)
{
	cr_assert_eq(td_dtype_promote(TD_DTYPE_F32, TD_DTYPE_F32), TD_DTYPE_F32);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_I64, TD_DTYPE_F16), TD_DTYPE_F16);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_F16, TD_DTYPE_BF16), TD_DTYPE_F32);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_BF16, TD_DTYPE_F16), TD_DTYPE_F32);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_U8, TD_DTYPE_I8), TD_DTYPE_I16);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_I8, TD_DTYPE_U8), TD_DTYPE_I16);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_U8, TD_DTYPE_I32), TD_DTYPE_I32);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_U32, TD_DTYPE_I32), TD_DTYPE_I64);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_U64, TD_DTYPE_I64), TD_DTYPE_I64);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_BOOL, TD_DTYPE_U8), TD_DTYPE_U8);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_BOOL, TD_DTYPE_BOOL), TD_DTYPE_BOOL);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_I32, TD_DTYPE_I64), TD_DTYPE_I64);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_F32, TD_DTYPE_F64), TD_DTYPE_F64);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_C64, TD_DTYPE_F32), TD_DTYPE_C64);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_C64, TD_DTYPE_F64), TD_DTYPE_C128);
	cr_assert_eq(td_dtype_promote(TD_DTYPE_I64, TD_DTYPE_C64), TD_DTYPE_C64);
	cr_assert_eq(td_dtype_category(TD_DTYPE_U16), TD_CATEGORY_UINT);
	cr_assert_eq(td_dtype_category(TD_DTYPE_BF16), TD_CATEGORY_FLOAT);
}

static uint32_t fbits(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	return x;
}

static float bitsf(uint32_t x)
{
	float f;
	memcpy(&f, &x, 4);
	return f;
}

/* Reference float -> half using double arithmetic and explicit rounding. */
static uint16_t ref_f16(float f)
{
	double a = fabs((double)f), m;
	uint16_t sign = signbit(f) ? 0x8000 : 0;
	int e;

	if (isnan(f))
		return 0;
	if (isinf(f) || a >= 65520.0)
		return sign | 0x7c00;
	if (a < 6.103515625e-05) { /* subnormal: units of 2^-24 */
		m = nearbyint(a * 16777216.0);
		return sign | (uint16_t)m;
	}
	e = ilogb(a);
	m = nearbyint(ldexp(a, 10 - e)); /* 1024..2048 */
	if (m >= 2048) {
		m /= 2;
		e++;
	}
	if (e > 15)
		return sign | 0x7c00;
	return sign | (uint16_t)(((e + 15) << 10) | ((int)m - 1024));
}

Test(dtype, float16_round_trips_every_half_and_rounds_to_even)
{
	uint32_t h;
	uint64_t seed = 1;
	int i;

	for (h = 0; h < 65536; h++) {
		float f = td_f16_to_float((uint16_t)h);
		if (isnan(f)) {
			cr_assert(isnan(td_f16_to_float(td_float_to_f16(f))));
			continue;
		}
		cr_assert_eq(td_float_to_f16(f), h, "half 0x%04x -> %g -> 0x%04x", h, f,
			td_float_to_f16(f));
	}
	/* Random floats against the reference rounding (default FE_TONEAREST). */
	for (i = 0; i < 200000; i++) {
		float f = bitsf((uint32_t)td_test_rand(&seed));
		if (isnan(f))
			continue;
		cr_assert_eq(td_float_to_f16(f), ref_f16(f), "float %a (0x%08x)", f, fbits(f));
	}
	/* Ties: 1 + 2^-11 is halfway between 1 and the next half; rounds to even (1). */
	cr_assert_eq(td_float_to_f16(1.0f + 0x1p-11f), 0x3c00);
	cr_assert_eq(td_float_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
	cr_assert_eq(td_float_to_f16(65504.0f), 0x7bff);
	cr_assert_eq(td_float_to_f16(65520.0f), 0x7c00);
	cr_assert_eq(td_float_to_f16(0x1p-25f), 0x0000);
	cr_assert_eq(td_float_to_f16(0x1.000002p-25f), 0x0001);
}

Test(dtype, bfloat16_rounds_to_nearest_even_and_keeps_nan)
{
	cr_assert_eq(td_float_to_bf16(1.0f), 0x3f80);
	cr_assert_eq(td_bf16_to_float(0x3f80), 1.0f);
	/* 1 + 2^-8 is a tie between 0x3f80 and 0x3f81: even wins. */
	cr_assert_eq(td_float_to_bf16(bitsf(0x3f808000u)), 0x3f80);
	cr_assert_eq(td_float_to_bf16(bitsf(0x3f818000u)), 0x3f82);
	cr_assert_eq(td_float_to_bf16(bitsf(0x3f808001u)), 0x3f81);
	cr_assert(isnan(td_bf16_to_float(td_float_to_bf16(NAN))));
	cr_assert(isinf(td_bf16_to_float(td_float_to_bf16(INFINITY))));
	cr_assert_eq(td_float_to_bf16(bitsf(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to inf */
	{
		uint32_t b;
		for (b = 0; b < 65536; b++) {
			float f = td_bf16_to_float((uint16_t)b);
			if (!isnan(f))
				cr_assert_eq(td_float_to_bf16(f), b);
		}
	}
}
