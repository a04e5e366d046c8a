/* SPDX-License-Identifier: MIT */
/*
 * test_tensor_copy.c - dtype conversion and everything built on it
 * (lib/tensor_copy.c, lib/tensor_iter.c): every (source, destination) dtype
 * pair against a reference of the documented rules, scalar load/store,
 * strided and broadcast copies, overlapping copies, fill/zero,
 * contiguous/clone/to_dtype, stack and cat.
 */
#include "td_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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

static td_buffer *readonly_buffer(void *data, size_t nbytes)
{
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	td_buffer *b;

	o.flags = TD_BUFFER_READONLY;
	td_cr_assert_ok(td_buffer_wrap(&b, data, nbytes, &o));
	return b;
}

/* Address of element `idx`, computed naively from the buffer. */
static char *elem_ptr(const td_tensor *t, const int64_t *idx)
{
	int64_t size = (int64_t)td_dtype_size(t->dtype);

	return (char *)td_buffer_data(t->buffer) + td_test_elem_pos(t, idx) * size;
}

static uint64_t rnd(uint64_t *rng, uint64_t n)
{
	return td_test_rand(rng) % n;
}

/* ------------------------------------------------------------------------ */
/* The reference: values, decoding and the documented conversion rules       */
/* ------------------------------------------------------------------------ */

/* An exact value: unsigned, signed, real or complex. */
typedef enum vkind { VU, VI, VF, VC } vkind;
typedef struct val {
	vkind k;
	uint64_t u;
	int64_t i;
	double re, im;
} val;

#define U(x) \
	{ \
		VU, (x), 0, 0.0, 0.0 \
	}
#define I(x) \
	{ \
		VI, 0, (x), 0.0, 0.0 \
	}
#define F(x) \
	{ \
		VF, 0, 0, (x), 0.0 \
	}
#define C(a, b) \
	{ \
		VC, 0, 0, (a), (b) \
	}

static const val interesting[] = {
	F(0.0),
	F(-0.0),
	F(1),
	F(-1),
	F(0.5),
	F(-0.5),
	F(1.5),
	F(2.5),
	F(-2.5),
	F(127),
	F(128),
	F(-128),
	F(-129),
	F(255),
	F(256),
	F(257),
	F(259),
	F(2049),
	F(2051),
	F(32767),
	F(32768),
	F(-32769),
	F(65504),
	F(65519),
	F(65520),
	F(65536),
	F(2147483647.0),
	F(2147483648.0),
	F(-2147483649.0),
	F(4294967296.0),
	F(1e10),
	F(-1e10),
	F(9007199254740991.0),
	F(9007199254740992.0),
	F(9007199254740994.0),
	F(9223372036854775808.0),
	F(-9223372036854775808.0),
	F(18446744073709551616.0),
	F(1e20),
	F(-1e20),
	F(3e38),
	F(1e39),
	F(1e300),
	F(-1e300),
	F(1e-5),
	F(1e-8),
	F(1e-40),
	F(1e-310),
	F(INFINITY),
	F(-INFINITY),
	F(NAN),
	I(0),
	I(1),
	I(-1),
	I(127),
	I(-128),
	I(255),
	I(256),
	I(-129),
	I(65535),
	I(65536),
	I(-32769),
	I(16777217),
	I(INT32_MAX),
	I(INT32_MIN),
	I(9007199254740993LL),
	I(-9007199254740993LL),
	I(INT64_MAX),
	I(INT64_MIN),
	I(INT64_MAX - 1),
	I(0x123456789abcdef0LL),
	U(0),
	U(1),
	U(255),
	U(256),
	U(UINT32_MAX),
	U(9223372036854775808ULL),
	U(9223372036854775809ULL),
	U(UINT64_MAX),
	U(18446744073709549568ULL),
	C(1, 2),
	C(0, 1),
	C(-0.5, 3),
	C(NAN, 0),
	C(0, NAN),
	C(INFINITY, -INFINITY),
	C(1e10, -1e10),
	C(-0.0, 0),
	C(65520, 1),
};
#define N_INTERESTING TD_TEST_ARRAY_LEN(interesting)

typedef union raw {
	uint8_t u8;
	int8_t i8;
	int16_t i16;
	int32_t i32;
	int64_t i64;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	float f32;
	double f64;
	float c64[2];
	double c128[2];
	unsigned char bytes[16];
} raw;

static val decode(const void *p, td_dtype d)
{
	raw x;
	val v = U(0);

	memcpy(&x, p, td_dtype_size(d));
	switch (d) {
	case TD_DTYPE_BOOL:
		v.u = x.u8 != 0;
		break;
	case TD_DTYPE_U8:
		v.u = x.u8;
		break;
	case TD_DTYPE_U16:
		v.u = x.u16;
		break;
	case TD_DTYPE_U32:
		v.u = x.u32;
		break;
	case TD_DTYPE_U64:
		v.u = x.u64;
		break;
	case TD_DTYPE_I8:
		v.k = VI;
		v.i = x.i8;
		break;
	case TD_DTYPE_I16:
		v.k = VI;
		v.i = x.i16;
		break;
	case TD_DTYPE_I32:
		v.k = VI;
		v.i = x.i32;
		break;
	case TD_DTYPE_I64:
		v.k = VI;
		v.i = x.i64;
		break;
	case TD_DTYPE_F16:
		v.k = VF;
		v.re = td_f16_to_float(x.u16);
		break;
	case TD_DTYPE_BF16:
		v.k = VF;
		v.re = td_bf16_to_float(x.u16);
		break;
	case TD_DTYPE_F32:
		v.k = VF;
		v.re = x.f32;
		break;
	case TD_DTYPE_F64:
		v.k = VF;
		v.re = x.f64;
		break;
	case TD_DTYPE_C64:
		v.k = VC;
		v.re = x.c64[0];
		v.im = x.c64[1];
		break;
	default:
		v.k = VC;
		v.re = x.c128[0];
		v.im = x.c128[1];
		break;
	}
	return v;
}

/* Float to a signed integer type of range [lo, hi]: NaN gives 0, truncate toward zero, saturate. */
static int64_t ref_f2i(double x, double lo, double hi, int64_t ilo, int64_t ihi)
{
	double t;

	if (isnan(x))
		return 0;
	t = trunc(x);
	if (t <= lo)
		return ilo;
	if (t >= hi)
		return ihi;
	return (int64_t)t;
}

/* Float to an unsigned integer type: NaN and negatives give 0, saturate at the top. */
static uint64_t ref_f2u(double x, double hi, uint64_t uhi)
{
	double t;

	if (isnan(x))
		return 0;
	t = trunc(x);
	if (t <= 0)
		return 0;
	if (t >= hi)
		return uhi;
	return (uint64_t)t;
}

#define TWO63 9223372036854775808.0
#define TWO64 18446744073709551616.0

/*
 * The documented rules: to bool, nonzero (either part; NaN too) is true;
 * integer to integer keeps the low bits (wraps); float to integer truncates
 * toward zero, NaN gives 0, out of range saturates; complex to real drops
 * the imaginary part; float16/bfloat16 round to nearest even from float32.
 */
static void encode(void *out, td_dtype d, val v)
{
	bool isint = v.k == VU || v.k == VI;
	uint64_t bits = v.k == VU ? v.u : (uint64_t)v.i;
	double re = v.re, im = v.k == VC ? v.im : 0.0;
	float f32 = v.k == VU ? (float)v.u : v.k == VI ? (float)v.i : (float)re;
	double f64 = v.k == VU ? (double)v.u : v.k == VI ? (double)v.i : re;
	raw x;

	memset(&x, 0, sizeof(x));
	switch (d) {
	case TD_DTYPE_BOOL:
		x.u8 = isint ? bits != 0 : (re != 0 || im != 0);
		break;
	case TD_DTYPE_U8:
		x.u8 = isint ? (uint8_t)bits : (uint8_t)ref_f2u(re, 255.0, 255);
		break;
	case TD_DTYPE_U16:
		x.u16 = isint ? (uint16_t)bits : (uint16_t)ref_f2u(re, 65535.0, 65535);
		break;
	case TD_DTYPE_U32:
		x.u32 = isint ? (uint32_t)bits : (uint32_t)ref_f2u(re, 4294967295.0, UINT32_MAX);
		break;
	case TD_DTYPE_U64:
		x.u64 = isint ? bits : ref_f2u(re, TWO64, UINT64_MAX);
		break;
	case TD_DTYPE_I8:
		x.i8 = isint ? (int8_t)bits : (int8_t)ref_f2i(re, -128.0, 127.0, INT8_MIN, INT8_MAX);
		break;
	case TD_DTYPE_I16:
		x.i16 = isint ? (int16_t)bits :
						(int16_t)ref_f2i(re, -32768.0, 32767.0, INT16_MIN, INT16_MAX);
		break;
	case TD_DTYPE_I32:
		x.i32 = isint ? (int32_t)bits :
						(int32_t)ref_f2i(re, -2147483648.0, 2147483647.0, INT32_MIN, INT32_MAX);
		break;
	case TD_DTYPE_I64:
		x.i64 = isint ? (int64_t)bits : ref_f2i(re, -TWO63, TWO63, INT64_MIN, INT64_MAX);
		break;
	case TD_DTYPE_F16:
		x.u16 = td_float_to_f16(f32);
		break;
	case TD_DTYPE_BF16:
		x.u16 = td_float_to_bf16(f32);
		break;
	case TD_DTYPE_F32:
		x.f32 = f32;
		break;
	case TD_DTYPE_F64:
		x.f64 = f64;
		break;
	case TD_DTYPE_C64:
		x.c64[0] = f32;
		x.c64[1] = (float)im;
		break;
	default:
		x.c128[0] = f64;
		x.c128[1] = im;
		break;
	}
	memcpy(out, &x, td_dtype_size(d));
}

static bool same_double(double a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	return a == b && signbit(a) == signbit(b);
}

/* Bitwise equality, except that any NaN equals any NaN. */
static bool same_element(const void *got, const void *want, td_dtype d)
{
	val a, b;

	if (memcmp(got, want, td_dtype_size(d)) == 0)
		return true;
	if (td_dtype_category(d) < TD_CATEGORY_FLOAT)
		return false;
	a = decode(got, d);
	b = decode(want, d);
	return same_double(a.re, b.re) && same_double(a.im, b.im);
}

static bool same_val(val a, val b)
{
	if (a.k != b.k)
		return false;
	switch (a.k) {
	case VU:
		return a.u == b.u;
	case VI:
		return a.i == b.i;
	case VF:
		return same_double(a.re, b.re);
	default:
		return same_double(a.re, b.re) && same_double(a.im, b.im);
	}
}

static const char *hex(const void *p, size_t n)
{
	static char buf[4][40];
	static int which;
	char *s = buf[which++ & 3];
	size_t i;

	for (i = 0; i < n; i++)
		snprintf(s + 2 * i, 3, "%02x", ((const unsigned char *)p)[n - 1 - i]);
	return s;
}

static const char *show(val v)
{
	static char buf[4][80];
	static int which;
	char *s = buf[which++ & 3];

	switch (v.k) {
	case VU:
		snprintf(s, 80, "uint %llu", (unsigned long long)v.u);
		break;
	case VI:
		snprintf(s, 80, "int %lld", (long long)v.i);
		break;
	case VF:
		snprintf(s, 80, "float %.17g", v.re);
		break;
	default:
		snprintf(s, 80, "complex (%.17g, %.17g)", v.re, v.im);
		break;
	}
	return s;
}

/* A 1-d tensor of dtype `d` holding every interesting value converted (by the reference) to `d`. */
static void interesting_tensor(td_tensor *out, td_dtype d)
{
	const int64_t n = (int64_t)N_INTERESTING;
	unsigned char bytes[N_INTERESTING * 16];
	size_t i, size = td_dtype_size(d);

	for (i = 0; i < N_INTERESTING; i++)
		encode(bytes + i * size, d, interesting[i]);
	td_cr_assert_ok(td_tensor_from_data(out, d, 1, &n, bytes));
}

static td_scalar scalar_of(val v)
{
	switch (v.k) {
	case VU:
		return td_scalar_uint(v.u);
	case VI:
		return td_scalar_int(v.i);
	case VF:
		return td_scalar_float(v.re);
	default:
		return td_scalar_complex(v.re, v.im);
	}
}

/* ------------------------------------------------------------------------ */
/* Conversion                                                                */
/* ------------------------------------------------------------------------ */

Test(copy, every_dtype_pair_follows_the_documented_conversion_rules)
{
	size_t si, di, i;

	for (si = 0; si < TD_DTYPE_COUNT; si++) {
		td_dtype s = td_test_all_dtypes[si];
		td_tensor src;

		interesting_tensor(&src, s);
		for (di = 0; di < TD_DTYPE_COUNT; di++) {
			td_dtype d = td_test_all_dtypes[di];
			size_t ss = td_dtype_size(s), ds = td_dtype_size(d);
			td_tensor out;

			td_cr_assert_ok(td_tensor_to_dtype(&out, &src, d));
			cr_assert_eq(out.dtype, d);
			cr_assert_eq(out.buffer == src.buffer, s == d,
				"to_dtype %s -> %s: a new tensor exactly when the dtype changes", td_dtype_name(s),
				td_dtype_name(d));
			for (i = 0; i < N_INTERESTING; i++) {
				const char *sp = (const char *)td_tensor_data(&src) + i * ss;
				const char *got = (const char *)td_tensor_data(&out) + i * ds;
				unsigned char want[16];

				if (s == d)
					memcpy(want, sp, ds);
				else
					encode(want, d, decode(sp, s));
				cr_assert(same_element(got, want, d),
					"%s -> %s of %s (stored as %s): got %s, want %s", td_dtype_name(s),
					td_dtype_name(d), show(decode(sp, s)), hex(sp, ss), hex(got, ds),
					hex(want, ds));
			}
			td_tensor_release(&out);
		}
		td_tensor_release(&src);
	}
}

Test(copy, strided_copy_converts_every_dtype_pair)
{
	const int64_t n = (int64_t)N_INTERESTING, sstride = 2, dstride = 3;
	size_t si, di;
	int64_t i;

	for (si = 0; si < TD_DTYPE_COUNT; si++) {
		td_dtype s = td_test_all_dtypes[si];
		size_t ss = td_dtype_size(s);
		td_buffer *sb;
		td_tensor src;

		/* Source: the values at odd positions, 0xee filler between them. */
		td_cr_assert_ok(td_buffer_new(&sb, (size_t)(2 * n + 1) * ss, 0));
		memset(td_buffer_data(sb), 0xee, td_buffer_size(sb));
		td_cr_assert_ok(td_tensor_from_buffer(&src, sb, s, 1, &n, &sstride, 1));
		for (i = 0; i < n; i++)
			encode((char *)td_tensor_data(&src) + i * sstride * (int64_t)ss, s, interesting[i]);
		for (di = 0; di < TD_DTYPE_COUNT; di++) {
			td_dtype d = td_test_all_dtypes[di];
			size_t ds = td_dtype_size(d);
			td_buffer *db;
			td_tensor dst;
			size_t b;

			td_cr_assert_ok(td_buffer_new(&db, (size_t)(3 * n + 2) * ds, TD_BUFFER_ZEROED));
			td_cr_assert_ok(td_tensor_from_buffer(&dst, db, d, 1, &n, &dstride, 2));
			td_cr_assert_ok(td_tensor_copy(&dst, &src));
			for (i = 0; i < n; i++) {
				const char *sp = (const char *)td_tensor_data(&src) + i * sstride * (int64_t)ss;
				const char *got = (const char *)td_tensor_data(&dst) + i * dstride * (int64_t)ds;
				unsigned char want[16];

				if (s == d)
					memcpy(want, sp, ds);
				else
					encode(want, d, decode(sp, s));
				cr_assert(same_element(got, want, d), "%s -> %s element %lld: got %s want %s",
					td_dtype_name(s), td_dtype_name(d), (long long)i, hex(got, ds), hex(want, ds));
			}
			/* Nothing between the destination's elements was written. */
			for (b = 0; b < td_buffer_size(db); b++)
				if ((b / ds) % 3 != 2)
					cr_assert_eq(((unsigned char *)td_buffer_data(db))[b], 0,
						"%s -> %s wrote byte %zu outside the view", td_dtype_name(s),
						td_dtype_name(d), b);
			td_tensor_release(&dst);
			td_buffer_unref(db);
		}
		td_tensor_release(&src);
		td_buffer_unref(sb);
	}
}

Test(copy, conversion_spot_checks)
{
	static const struct {
		td_dtype s;
		val in;
		td_dtype d;
		val want;
	} t[] = {
		{ TD_DTYPE_F64, F(1e10), TD_DTYPE_I32, I(INT32_MAX) },
		{ TD_DTYPE_F64, F(-1e10), TD_DTYPE_U8, U(0) },
		{ TD_DTYPE_F64, F(NAN), TD_DTYPE_I64, I(0) },
		{ TD_DTYPE_F64, F(NAN), TD_DTYPE_BOOL, U(1) },
		{ TD_DTYPE_F64, F(-0.0), TD_DTYPE_BOOL, U(0) },
		{ TD_DTYPE_F32, F(-0.5), TD_DTYPE_I8, I(0) },
		{ TD_DTYPE_F64, F(1.5), TD_DTYPE_I32, I(1) },
		{ TD_DTYPE_F64, F(-1.5), TD_DTYPE_I16, I(-1) },
		{ TD_DTYPE_F64, F(INFINITY), TD_DTYPE_U64, U(UINT64_MAX) },
		{ TD_DTYPE_F64, F(-INFINITY), TD_DTYPE_I64, I(INT64_MIN) },
		{ TD_DTYPE_F64, F(9223372036854775808.0), TD_DTYPE_I64, I(INT64_MAX) },
		{ TD_DTYPE_F64, F(1e20), TD_DTYPE_U64, U(UINT64_MAX) },
		{ TD_DTYPE_F32, F(3e38), TD_DTYPE_I16, I(32767) },
		{ TD_DTYPE_F16, F(NAN), TD_DTYPE_I32, I(0) },
		{ TD_DTYPE_BF16, F(-1.5), TD_DTYPE_U8, U(0) },
		{ TD_DTYPE_I64, I(-1), TD_DTYPE_U8, U(255) },
		{ TD_DTYPE_I64, I(256), TD_DTYPE_U8, U(0) },
		{ TD_DTYPE_I64, I(-129), TD_DTYPE_I8, I(127) },
		{ TD_DTYPE_U8, U(200), TD_DTYPE_I8, I(-56) },
		{ TD_DTYPE_I16, I(-1), TD_DTYPE_U32, U(UINT32_MAX) },
		{ TD_DTYPE_I8, I(-1), TD_DTYPE_U64, U(UINT64_MAX) },
		{ TD_DTYPE_U64, U(UINT64_MAX), TD_DTYPE_I64, I(-1) },
		{ TD_DTYPE_I64, I(INT64_MAX), TD_DTYPE_F64, F(9223372036854775808.0) },
		{ TD_DTYPE_I64, I(9007199254740993LL), TD_DTYPE_F64, F(9007199254740992.0) },
		{ TD_DTYPE_I64, I(16777217), TD_DTYPE_F32, F(16777216.0) },
		{ TD_DTYPE_I64, I(INT64_MIN), TD_DTYPE_F16, F(-INFINITY) },
		{ TD_DTYPE_C128, C(1, 2), TD_DTYPE_F32, F(1) },
		{ TD_DTYPE_C64, C(0, 1), TD_DTYPE_BOOL, U(1) },
		{ TD_DTYPE_C128, C(0, 1), TD_DTYPE_I32, I(0) },
		{ TD_DTYPE_C128, C(2.75, -1), TD_DTYPE_U16, U(2) },
		{ TD_DTYPE_F32, F(2.5), TD_DTYPE_C128, C(2.5, 0) },
		{ TD_DTYPE_BOOL, U(1), TD_DTYPE_F16, F(1) },
		{ TD_DTYPE_BOOL, U(1), TD_DTYPE_C64, C(1, 0) },
		{ TD_DTYPE_F64, F(65504), TD_DTYPE_F16, F(65504) },
		{ TD_DTYPE_F64, F(65520), TD_DTYPE_F16, F(INFINITY) },
		{ TD_DTYPE_F64, F(2049), TD_DTYPE_F16, F(2048) },
		{ TD_DTYPE_F64, F(2051), TD_DTYPE_F16, F(2052) },
		{ TD_DTYPE_F32, F(3e38), TD_DTYPE_F16, F(INFINITY) },
		{ TD_DTYPE_F32, F(257), TD_DTYPE_BF16, F(256) },
		{ TD_DTYPE_F32, F(259), TD_DTYPE_BF16, F(260) },
		{ TD_DTYPE_F16, F(65504), TD_DTYPE_BF16, F(65536) },
		{ TD_DTYPE_F64, F(1e300), TD_DTYPE_F32, F(INFINITY) },
		{ TD_DTYPE_U32, U(16777217), TD_DTYPE_BF16, F(16777216) },
	};
	size_t i;

	for (i = 0; i < TD_TEST_ARRAY_LEN(t); i++) {
		unsigned char in[16];
		td_tensor a, b;
		val got;

		encode(in, t[i].s, t[i].in);
		td_cr_assert_ok(td_tensor_from_data(&a, t[i].s, 0, NULL, in));
		td_cr_assert_ok(td_tensor_to_dtype(&b, &a, t[i].d));
		got = decode(td_tensor_data(&b), t[i].d);
		cr_assert(same_val(got, t[i].want), "case %zu: %s %s -> %s gave %s, want %s", i,
			td_dtype_name(t[i].s), show(t[i].in), td_dtype_name(t[i].d), show(got),
			show(t[i].want));
		td_tensor_release(&a);
		td_tensor_release(&b);
	}
}

/* ------------------------------------------------------------------------ */
/* Scalars: td_tensor_set/get, fill, full                                    */
/* ------------------------------------------------------------------------ */

/* What td_tensor_get() must return for an element holding `want` (decoded). */
static void assert_scalar_is(td_scalar s, td_dtype d, val want)
{
	switch (td_dtype_category(d)) {
	case TD_CATEGORY_BOOL:
		cr_assert_eq(s.kind, TD_SCALAR_BOOL);
		cr_assert_eq(s.v.b, want.u != 0);
		break;
	case TD_CATEGORY_INT:
		cr_assert_eq(s.kind, TD_SCALAR_INT, "%s", td_dtype_name(d));
		cr_assert_eq(s.v.i, want.i, "%s: %lld, want %lld", td_dtype_name(d), (long long)s.v.i,
			(long long)want.i);
		break;
	case TD_CATEGORY_UINT:
		cr_assert_eq(s.kind, TD_SCALAR_UINT, "%s", td_dtype_name(d));
		cr_assert_eq(s.v.u, want.u, "%s", td_dtype_name(d));
		break;
	case TD_CATEGORY_FLOAT:
		cr_assert_eq(s.kind, TD_SCALAR_FLOAT, "%s", td_dtype_name(d));
		cr_assert(same_double(s.v.f, want.re), "%s: %.17g, want %.17g", td_dtype_name(d), s.v.f,
			want.re);
		break;
	case TD_CATEGORY_COMPLEX:
		cr_assert_eq(s.kind, TD_SCALAR_COMPLEX, "%s", td_dtype_name(d));
		cr_assert(same_double(s.v.c[0], want.re) && same_double(s.v.c[1], want.im),
			"%s: (%.17g, %.17g)", td_dtype_name(d), s.v.c[0], s.v.c[1]);
		break;
	}
}

Test(copy, set_and_get_convert_every_scalar_kind_for_every_dtype)
{
	size_t di, i;

	for (di = 0; di < TD_DTYPE_COUNT; di++) {
		td_dtype d = td_test_all_dtypes[di];
		size_t ds = td_dtype_size(d);
		td_tensor t;

		td_cr_assert_ok(td_tensor_zeros(&t, d, 0, NULL));
		for (i = 0; i < N_INTERESTING + 2; i++) {
			val v = i < N_INTERESTING ? interesting[i] : (val)U(i - N_INTERESTING);
			td_scalar s = i < N_INTERESTING ? scalar_of(v) : td_scalar_bool(v.u != 0);
			unsigned char want[16];
			td_scalar back;

			encode(want, d, v);
			td_cr_assert_ok(td_tensor_set(&t, NULL, s));
			cr_assert(same_element(td_tensor_data(&t), want, d),
				"set %s into %s stored %s, want %s", show(v), td_dtype_name(d),
				hex(td_tensor_data(&t), ds), hex(want, ds));
			td_cr_assert_ok(td_tensor_get(&back, &t, NULL));
			assert_scalar_is(back, d, decode(want, d));
		}
		td_tensor_release(&t);
	}
}

Test(copy, fill_and_full_store_every_scalar_kind_in_every_dtype)
{
	static const int64_t shape[2] = { 3, 5 };
	size_t di, i;

	for (di = 0; di < TD_DTYPE_COUNT; di++) {
		td_dtype d = td_test_all_dtypes[di];
		size_t ds = td_dtype_size(d);
		td_tensor t, f;

		td_cr_assert_ok(td_tensor_empty(&t, d, 2, shape));
		for (i = 0; i < N_INTERESTING; i++) {
			unsigned char want[16];
			int64_t k;

			encode(want, d, interesting[i]);
			td_cr_assert_ok(td_tensor_fill(&t, scalar_of(interesting[i])));
			td_cr_assert_ok(td_tensor_full(&f, d, 2, shape, scalar_of(interesting[i])));
			for (k = 0; k < 15; k++) {
				const char *a = (const char *)td_tensor_data(&t) + k * (int64_t)ds;
				const char *b = (const char *)td_tensor_data(&f) + k * (int64_t)ds;
				cr_assert(same_element(a, want, d), "fill %s into %s: element %lld is %s",
					show(interesting[i]), td_dtype_name(d), (long long)k, hex(a, ds));
				cr_assert(same_element(b, want, d), "full %s of %s: element %lld is %s",
					show(interesting[i]), td_dtype_name(d), (long long)k, hex(b, ds));
			}
			td_tensor_release(&f);
		}
		td_cr_assert_ok(td_tensor_fill(&t, td_scalar_bool(true)));
		{
			unsigned char want[16];
			val one = U(1);
			encode(want, d, one);
			cr_assert(same_element(td_tensor_data(&t), want, d), "fill true into %s",
				td_dtype_name(d));
		}
		td_tensor_release(&t);
	}
}

/* A random layout of `shape` (C order, padded or permuted) over a fresh zeroed buffer. */
static void random_layout(td_tensor *out, uint64_t *rng, td_dtype d, int ndim, const int64_t *shape)
{
	int64_t strides[TD_MAX_DIMS], extent, offset, s = 1;
	int mode = (int)rnd(rng, 3), perm[TD_MAX_DIMS], i;
	td_buffer *b;

	for (i = 0; i < ndim; i++)
		perm[i] = i;
	if (mode == 2) {
		for (i = ndim - 1; i > 0; i--) {
			int j = (int)rnd(rng, (uint64_t)i + 1), tmp = perm[i];
			perm[i] = perm[j];
			perm[j] = tmp;
		}
	}
	for (i = ndim - 1; i >= 0; i--) {
		int k = perm[i];
		strides[k] = s;
		s = s * (shape[k] > 1 ? shape[k] : 1) + (mode == 1 ? (int64_t)rnd(rng, 3) : 0);
	}
	offset = (int64_t)rnd(rng, 3);
	extent = offset + 1;
	for (i = 0; i < ndim; i++)
		if (shape[i] > 0)
			extent += (shape[i] - 1) * strides[i];
	td_cr_assert_ok(td_buffer_new(&b, (size_t)extent * td_dtype_size(d), TD_BUFFER_ZEROED));
	td_cr_assert_ok(td_tensor_from_buffer(out, b, d, ndim, shape, strides, offset));
	td_buffer_unref(b);
}

Test(copy, fill_and_zero_touch_only_the_view)
{
	static const int64_t shape[2] = { 6, 6 }, bshape[2] = { 4, 3 };
	size_t di;

	for (di = 0; di < TD_DTYPE_COUNT; di++) {
		td_dtype d = td_test_all_dtypes[di];
		size_t ds = td_dtype_size(d);
		unsigned char seven[16], zero[16] = { 0 };
		td_tensor base, v, e, col;
		int64_t idx[2], k;

		encode(seven, d, (val)I(7));
		td_cr_assert_ok(td_tensor_zeros(&base, d, 2, shape));
		/* v = base[1:5, 1:4].T: a non-contiguous 3x4 view. */
		td_cr_assert_ok(td_tensor_narrow(&v, &base, 0, 1, 4));
		td_cr_assert_ok(td_tensor_narrow(&v, &v, 1, 1, 3));
		td_cr_assert_ok(td_tensor_transpose(&v, &v, 0, 1));
		td_cr_assert_ok(td_tensor_fill(&v, td_scalar_int(7)));
		for (idx[0] = 0; idx[0] < 6; idx[0]++) {
			for (idx[1] = 0; idx[1] < 6; idx[1]++) {
				bool inside = idx[0] >= 1 && idx[0] < 5 && idx[1] >= 1 && idx[1] < 4;
				cr_assert(same_element(elem_ptr(&base, idx), inside ? seven : zero, d),
					"%s fill (%lld, %lld)", td_dtype_name(d), (long long)idx[0], (long long)idx[1]);
			}
		}
		/* zero() of the strided view clears exactly it again. */
		td_cr_assert_ok(td_tensor_fill(&base, td_scalar_float(-0.0)));
		td_cr_assert_ok(td_tensor_fill(&v, td_scalar_int(7)));
		td_cr_assert_ok(td_tensor_zero(&v));
		for (k = 0; k < 36; k++) {
			int64_t i0 = k / 6, i1 = k % 6;
			bool inside = i0 >= 1 && i0 < 5 && i1 >= 1 && i1 < 4;
			unsigned char want[16];
			idx[0] = i0;
			idx[1] = i1;
			encode(want, d, (val)F(-0.0));
			cr_assert(same_element(elem_ptr(&base, idx), inside ? zero : want, d),
				"%s zero (%lld, %lld): %s", td_dtype_name(d), (long long)i0, (long long)i1,
				hex(elem_ptr(&base, idx), ds));
		}
		/* zero() of a contiguous tensor gives all-zero bytes (+0.0, not -0.0). */
		td_cr_assert_ok(td_tensor_zero(&base));
		for (k = 0; k < (int64_t)(36 * ds); k++)
			cr_assert_eq(((unsigned char *)td_tensor_data(&base))[k], 0);
		/* An expanded view writes its one underlying column. */
		td_cr_assert_ok(td_tensor_narrow(&col, &base, 1, 2, 1));
		td_cr_assert_ok(td_tensor_narrow(&col, &col, 0, 0, 4));
		td_cr_assert_ok(td_tensor_expand(&e, &col, 2, bshape));
		td_cr_assert_ok(td_tensor_fill(&e, td_scalar_int(7)));
		for (k = 0; k < 36; k++) {
			idx[0] = k / 6;
			idx[1] = k % 6;
			cr_assert(same_element(elem_ptr(&base, idx), idx[1] == 2 && idx[0] < 4 ? seven : zero,
						  d),
				"%s expanded fill", td_dtype_name(d));
		}
		td_cr_assert_ok(td_tensor_zero(&e));
		for (k = 0; k < (int64_t)(36 * ds); k++)
			cr_assert_eq(((unsigned char *)td_tensor_data(&base))[k], 0);
		td_tensor_release(&e);
		td_tensor_release(&col);
		td_tensor_release(&v);
		td_tensor_release(&base);
	}
}

Test(copy, fill_and_zero_refuse_bad_arguments)
{
	static const int64_t shape[1] = { 4 };
	int32_t data[4] = { 1, 2, 3, 4 };
	td_buffer *ro = readonly_buffer(data, sizeof(data));
	td_buffer *dev = device_buffer(64);
	td_tensor t, r, d, released = TD_TENSOR_INIT;
	td_scalar bad = td_scalar_int(1);

	bad.kind = (td_scalar_kind)5;
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_I32, 1, shape, td_scalar_int(9)));
	td_cr_assert_ok(td_tensor_from_buffer(&r, ro, TD_DTYPE_I32, 1, shape, NULL, 0));
	td_cr_assert_ok(td_tensor_from_buffer(&d, dev, TD_DTYPE_I32, 1, shape, NULL, 0));
	td_cr_assert_err(td_tensor_fill(NULL, td_scalar_int(1)), TD_EINVAL);
	td_cr_assert_err(td_tensor_zero(NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_fill(&released, td_scalar_int(1)), TD_EINVAL);
	td_cr_assert_err(td_tensor_zero(&released), TD_EINVAL);
	td_cr_assert_err(td_tensor_fill(&t, bad), TD_EINVAL);
	cr_assert_eq(((int32_t *)td_tensor_data(&t))[0], 9);
	td_cr_assert_err(td_tensor_fill(&r, td_scalar_int(1)), TD_EREADONLY);
	td_cr_assert_err(td_tensor_zero(&r), TD_EREADONLY);
	cr_assert_eq(data[0], 1);
	cr_assert_eq(data[3], 4);
	td_cr_assert_err(td_tensor_fill(&d, td_scalar_int(1)), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_zero(&d), TD_ENOTSUP);
	td_tensor_release(&t);
	td_tensor_release(&r);
	td_tensor_release(&d);
	td_buffer_unref(ro);
	td_buffer_unref(dev);
}

/* ------------------------------------------------------------------------ */
/* td_tensor_copy: broadcasting, iteration, overlap                          */
/* ------------------------------------------------------------------------ */

/* Check dst[idx] == convert(src[idx broadcast]) for every element. */
static void assert_copied(const td_tensor *dst, const td_tensor *src)
{
	int64_t n = td_tensor_numel(dst), f;
	size_t ds = td_dtype_size(dst->dtype);

	for (f = 0; f < n; f++) {
		int64_t didx[TD_MAX_DIMS], sidx[TD_MAX_DIMS];
		unsigned char want[16];
		const char *sp, *got;
		int i, lead = dst->ndim - src->ndim;

		td_test_unravel(dst->ndim, td_tensor_shape(dst), f, didx);
		for (i = 0; i < src->ndim; i++)
			sidx[i] = td_tensor_shape(src)[i] == 1 ? 0 : didx[i + lead];
		sp = elem_ptr(src, sidx);
		got = elem_ptr(dst, didx);
		if (src->dtype == dst->dtype)
			memcpy(want, sp, ds);
		else
			encode(want, dst->dtype, decode(sp, src->dtype));
		cr_assert(same_element(got, want, dst->dtype), "%s -> %s element %lld: %s, want %s",
			td_dtype_name(src->dtype), td_dtype_name(dst->dtype), (long long)f, hex(got, ds),
			hex(want, ds));
	}
}

/* Buffer positions covered by `t`, as flags over [0, extent). */
static void mark_positions(const td_tensor *t, bool *mark, int64_t extent)
{
	int64_t n = td_tensor_numel(t), f;

	memset(mark, 0, (size_t)extent);
	for (f = 0; f < n; f++) {
		int64_t idx[TD_MAX_DIMS];
		td_test_unravel(t->ndim, td_tensor_shape(t), f, idx);
		mark[td_test_elem_pos(t, idx)] = true;
	}
}

static void random_fill_any(td_tensor *t, uint64_t *rng)
{
	int64_t n = td_tensor_numel(t), f;

	for (f = 0; f < n; f++) {
		int64_t idx[TD_MAX_DIMS];
		val v = interesting[rnd(rng, N_INTERESTING)];
		td_test_unravel(t->ndim, td_tensor_shape(t), f, idx);
		encode(elem_ptr(t, idx), t->dtype, v);
	}
}

/* Every byte of t's buffer outside the view t is still zero. */
static void assert_zero_outside(const td_tensor *t)
{
	size_t ds = td_dtype_size(t->dtype);
	int64_t extent = (int64_t)(td_buffer_size(t->buffer) / ds), i;
	const unsigned char *bytes = td_buffer_data(t->buffer);
	bool mark[4096];

	cr_assert_leq(extent, 4096);
	mark_positions(t, mark, extent);
	for (i = 0; i < extent; i++) {
		size_t b;
		if (mark[i])
			continue;
		for (b = 0; b < ds; b++)
			cr_assert_eq(bytes[(size_t)i * ds + b], 0,
				"a byte outside the destination view was written");
	}
}

/*
 * 1,500 copies between random layouts (permuted, padded, offset) checked
 * element by element, the destination's bytes outside its view left zero:
 * with `same` the source has the destination's dtype and shape (the block
 * copy), else a random dtype and a shape that broadcasts.
 */
static void copies_on_random_layouts(uint64_t rng, bool same)
{
	int it;

	for (it = 0; it < 1500; it++) {
		int ndim = (int)rnd(&rng, 5), sndim, lead, i;
		int64_t shape[TD_MAX_DIMS], sshape[TD_MAX_DIMS];
		td_dtype dt = td_test_all_dtypes[rnd(&rng, TD_DTYPE_COUNT)];
		td_dtype st = same ? dt : td_test_all_dtypes[rnd(&rng, TD_DTYPE_COUNT)];
		td_tensor dst, src;

		for (i = 0; i < ndim; i++)
			shape[i] = rnd(&rng, 12) == 0 ? 0 : 1 + (int64_t)rnd(&rng, same ? 4 : 3);
		lead = ndim && !same ? (int)rnd(&rng, (uint64_t)ndim + 1) : 0;
		sndim = ndim - lead;
		for (i = 0; i < sndim; i++)
			sshape[i] = !same && rnd(&rng, 3) == 0 ? 1 : shape[i + lead];
		random_layout(&dst, &rng, dt, ndim, shape);
		random_layout(&src, &rng, st, sndim, sshape);
		random_fill_any(&src, &rng);
		td_cr_assert_ok(td_tensor_copy(&dst, &src));
		assert_copied(&dst, &src);
		assert_zero_outside(&dst);
		td_tensor_release(&dst);
		td_tensor_release(&src);
	}
}

Test(copy, copy_broadcasts_and_converts_on_random_layouts)
{
	copies_on_random_layouts(12, false);
}

/* Copies between views of one dtype and shape go as one block copy (dims
 * merged, rows memcpy'd where dense): every layout, every dtype size, and
 * an expanded destination (written more than once) keeps the general path. */
Test(copy, copies_of_one_dtype_and_shape_on_random_layouts)
{
	copies_on_random_layouts(21, true);
	{
		/* An expanded destination: the last element copied is kept, as the
		 * general path gives. */
		int64_t s3[1] = { 3 }, z[1] = { 0 };
		td_buffer *b;
		td_tensor e, src;
		float *v;

		td_cr_assert_ok(td_buffer_new(&b, sizeof(float), TD_BUFFER_ZEROED));
		td_cr_assert_ok(td_tensor_from_buffer(&e, b, TD_DTYPE_F32, 1, s3, z, 0));
		td_buffer_unref(b);
		td_test_arange(&src, TD_DTYPE_F32, 1, s3);
		td_cr_assert_ok(td_tensor_copy(&e, &src));
		v = td_tensor_data(&e);
		cr_assert_eq(v[0], 2.0f);
		td_tensor_release(&e);
		td_tensor_release(&src);
	}
}

Test(copy, iterator_walks_sixteen_dim_views)
{
	uint64_t rng = 13;
	int it;

	for (it = 0; it < 20; it++) {
		int64_t shape[TD_MAX_DIMS], sshape[TD_MAX_DIMS];
		td_tensor dst, src;
		int i;

		for (i = 0; i < TD_MAX_DIMS; i++) {
			shape[i] = 1 + (int64_t)rnd(&rng, 2);
			/* Broadcast some source dims (stride 0 in the iteration). */
			sshape[i] = rnd(&rng, 5) == 0 ? 1 : shape[i];
		}
		if (it == 0) {
			for (i = 0; i < TD_MAX_DIMS; i++)
				shape[i] = sshape[i] = i < 12 ? 2 : 1;
		}
		random_layout(&dst, &rng, it % 2 ? TD_DTYPE_F64 : TD_DTYPE_I32, TD_MAX_DIMS, shape);
		random_layout(&src, &rng, it % 3 ? TD_DTYPE_I32 : TD_DTYPE_I16, TD_MAX_DIMS, sshape);
		random_fill_any(&src, &rng);
		td_cr_assert_ok(td_tensor_copy(&dst, &src));
		assert_copied(&dst, &src);
		td_tensor_release(&dst);
		td_tensor_release(&src);
	}
}

Test(copy, copy_of_empty_and_zero_dim_tensors)
{
	static const int64_t empty[3] = { 2, 0, 3 }, row[1] = { 3 };
	td_tensor a, b, s;

	td_cr_assert_ok(td_tensor_zeros(&a, TD_DTYPE_F32, 3, empty));
	td_cr_assert_ok(td_tensor_full(&b, TD_DTYPE_I8, 1, row, td_scalar_int(4)));
	td_cr_assert_ok(td_tensor_copy(&a, &b));
	td_tensor_release(&b);
	/* A 0-d source broadcasts to every element. */
	td_cr_assert_ok(td_tensor_full(&s, TD_DTYPE_F64, 0, NULL, td_scalar_float(2.5)));
	td_cr_assert_ok(td_tensor_empty(&b, TD_DTYPE_I32, 1, row));
	td_cr_assert_ok(td_tensor_copy(&b, &s));
	cr_assert_eq(((int32_t *)td_tensor_data(&b))[0], 2);
	cr_assert_eq(((int32_t *)td_tensor_data(&b))[2], 2);
	td_tensor_release(&a);
	td_tensor_release(&b);
	td_tensor_release(&s);
}

Test(copy, overlapping_source_and_destination_copy_as_if_through_a_temporary)
{
	static const int64_t eight[1] = { 8 }, ten[1] = { 10 }, sq[2] = { 4, 4 };
	td_tensor base, dst, src, tt;
	int32_t *p;
	int64_t i, j;

	/* Shift right by two within one buffer. */
	td_test_arange(&base, TD_DTYPE_I32, 1, ten);
	p = td_tensor_data(&base);
	td_cr_assert_ok(td_tensor_narrow(&dst, &base, 0, 2, 8));
	td_cr_assert_ok(td_tensor_narrow(&src, &base, 0, 0, 8));
	td_cr_assert_ok(td_tensor_copy(&dst, &src));
	for (i = 0; i < 10; i++)
		cr_assert_eq(p[i], i < 2 ? i : i - 2, "right shift: [%lld] = %d", (long long)i, p[i]);
	td_tensor_release(&dst);
	td_tensor_release(&src);
	td_tensor_release(&base);

	/* Shift left by two. */
	td_test_arange(&base, TD_DTYPE_I32, 1, ten);
	p = td_tensor_data(&base);
	td_cr_assert_ok(td_tensor_narrow(&dst, &base, 0, 0, 8));
	td_cr_assert_ok(td_tensor_narrow(&src, &base, 0, 2, 8));
	td_cr_assert_ok(td_tensor_copy(&dst, &src));
	for (i = 0; i < 10; i++)
		cr_assert_eq(p[i], i < 8 ? i + 2 : i, "left shift: [%lld] = %d", (long long)i, p[i]);
	td_tensor_release(&dst);
	td_tensor_release(&src);
	td_tensor_release(&base);

	/* In-place transpose: t = t.T. */
	td_test_arange(&base, TD_DTYPE_I32, 2, sq);
	p = td_tensor_data(&base);
	td_cr_assert_ok(td_tensor_transpose(&tt, &base, 0, 1));
	td_cr_assert_ok(td_tensor_copy(&base, &tt));
	for (i = 0; i < 4; i++)
		for (j = 0; j < 4; j++)
			cr_assert_eq(p[i * 4 + j], j * 4 + i);
	td_tensor_release(&tt);

	/* Broadcast of row 0 over the whole matrix, row 0 included. */
	td_cr_assert_ok(td_tensor_select(&src, &base, 0, 0));
	td_cr_assert_ok(td_tensor_copy(&base, &src));
	for (i = 0; i < 4; i++)
		for (j = 0; j < 4; j++)
			cr_assert_eq(p[i * 4 + j], j * 4);
	td_tensor_release(&src);

	/* A copy onto itself (or onto an identical view) changes nothing and,
	 * as torch's copy_, does no work: not even a temporary is allocated. */
	td_tensor_ref(&tt, &base);
	td_test_alloc_install(0);
	td_cr_assert_ok(td_tensor_copy(&base, &base));
	td_cr_assert_ok(td_tensor_copy(&tt, &base));
	cr_assert_eq(td_test_alloc_attempts(), 0, "a self-copy allocated");
	td_test_alloc_uninstall();
	cr_assert_eq(p[5], 4);
	td_tensor_release(&tt);
	td_tensor_release(&base);

	/* Two dtypes over the same bytes: the int16 source is read before int32 writes land. */
	{
		int32_t words[12];
		td_buffer *b = NULL;
		td_tensor d32, s16;
		int16_t orig[8];
		td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;

		for (i = 0; i < 12; i++)
			words[i] = (int32_t)(0x00010001 * (i + 1));
		memcpy(orig, words, sizeof(orig));
		td_cr_assert_ok(td_buffer_wrap(&b, words, sizeof(words), &o));
		td_cr_assert_ok(td_tensor_from_buffer(&s16, b, TD_DTYPE_I16, 1, eight, NULL, 0));
		td_cr_assert_ok(td_tensor_from_buffer(&d32, b, TD_DTYPE_I32, 1, eight, NULL, 1));
		td_cr_assert_ok(td_tensor_copy(&d32, &s16));
		for (i = 0; i < 8; i++)
			cr_assert_eq(words[1 + i], orig[i], "[%lld] = %d, want %d", (long long)i, words[1 + i],
				orig[i]);
		td_tensor_release(&d32);
		td_tensor_release(&s16);
		td_buffer_unref(b);
	}
}

Test(copy, copy_refuses_bad_arguments)
{
	static const int64_t s23[2] = { 2, 3 }, s32[2] = { 3, 2 }, s123[3] = { 1, 2, 3 };
	static const int64_t s223[3] = { 2, 2, 3 }, s13[2] = { 1, 3 };
	int32_t data[6] = { 0 };
	td_buffer *ro = readonly_buffer(data, sizeof(data));
	td_buffer *dev = device_buffer(64);
	td_tensor dst, src, r, d, big, bcast, released = TD_TENSOR_INIT;

	td_cr_assert_ok(td_tensor_full(&dst, TD_DTYPE_I32, 2, s23, td_scalar_int(5)));
	td_cr_assert_ok(td_tensor_zeros(&src, TD_DTYPE_I32, 2, s32));
	td_cr_assert_ok(td_tensor_zeros(&big, TD_DTYPE_I32, 3, s223));
	td_cr_assert_ok(td_tensor_zeros(&bcast, TD_DTYPE_I32, 3, s123));
	td_cr_assert_ok(td_tensor_from_buffer(&r, ro, TD_DTYPE_I32, 2, s23, NULL, 0));
	td_cr_assert_ok(td_tensor_from_buffer(&d, dev, TD_DTYPE_I32, 2, s23, NULL, 0));
	td_cr_assert_err(td_tensor_copy(NULL, &src), TD_EINVAL);
	td_cr_assert_err(td_tensor_copy(&dst, NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_copy(&released, &src), TD_EINVAL);
	td_cr_assert_err(td_tensor_copy(&dst, &released), TD_EINVAL);
	td_cr_assert_err(td_tensor_copy(&dst, &src), TD_ETYPE);
	td_cr_assert_err(td_tensor_copy(&dst, &big), TD_ETYPE);
	/* As torch: the source may not have more dims than the destination, even of size 1. */
	td_cr_assert_err(td_tensor_copy(&dst, &bcast), TD_ETYPE);
	td_tensor_release(&bcast);
	td_cr_assert_ok(td_tensor_full(&bcast, TD_DTYPE_I32, 2, s13, td_scalar_int(3)));
	td_cr_assert_ok(td_tensor_copy(&dst, &bcast));
	cr_assert_eq(((int32_t *)td_tensor_data(&dst))[5], 3);
	td_cr_assert_err(td_tensor_copy(&r, &dst), TD_EREADONLY);
	td_cr_assert_err(td_tensor_copy(&d, &dst), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_copy(&dst, &d), TD_ENOTSUP);
	cr_assert_eq(data[0], 0);
	/* A read-only source is fine. */
	data[4] = 42;
	td_cr_assert_ok(td_tensor_copy(&dst, &r));
	cr_assert_eq(((int32_t *)td_tensor_data(&dst))[4], 42);
	td_tensor_release(&dst);
	td_tensor_release(&src);
	td_tensor_release(&big);
	td_tensor_release(&bcast);
	td_tensor_release(&r);
	td_tensor_release(&d);
	td_buffer_unref(ro);
	td_buffer_unref(dev);
}

/* ------------------------------------------------------------------------ */
/* contiguous, clone, to_dtype                                               */
/* ------------------------------------------------------------------------ */

Test(copy, contiguous_shares_contiguous_input_and_copies_otherwise)
{
	static const int64_t shape[3] = { 3, 1, 4 }, odd[3] = { 4, 9, 1 };
	static const int64_t empty[2] = { 0, 3 }, empty_strides[2] = { 1, 7 };
	double data[32];
	td_buffer *b;
	td_tensor t, c, tt, e;
	int64_t i, idx[3];

	for (i = 0; i < 32; i++)
		data[i] = (double)i;
	{
		td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
		td_cr_assert_ok(td_buffer_wrap(&b, data, sizeof(data), &o));
	}
	/* Contiguous with an offset and an odd stride on a size-1 dim: shared. */
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F64, 3, shape, odd, 3));
	td_cr_assert_ok(td_tensor_contiguous(&c, &t));
	cr_assert_eq(c.buffer, b);
	cr_assert_eq(c.offset, 3);
	cr_assert_eq(td_buffer_refcount(b), 3);
	td_tensor_release(&c);
	td_cr_assert_ok(td_tensor_contiguous(&t, &t)); /* aliasing: a no-op */
	cr_assert_eq(td_buffer_refcount(b), 2);
	/* Transposed: a contiguous copy with the same elements. */
	td_cr_assert_ok(td_tensor_transpose(&tt, &t, 0, 2));
	td_cr_assert_ok(td_tensor_contiguous(&c, &tt));
	cr_assert_neq(c.buffer, b);
	cr_assert(td_tensor_is_contiguous(&c));
	cr_assert_eq(c.offset, 0);
	cr_assert_eq(td_buffer_refcount(c.buffer), 1);
	for (idx[0] = 0; idx[0] < 4; idx[0]++)
		for (idx[1] = 0; idx[1] < 1; idx[1]++)
			for (idx[2] = 0; idx[2] < 3; idx[2]++)
				cr_assert(same_element(elem_ptr(&c, idx), elem_ptr(&tt, idx), TD_DTYPE_F64));
	td_tensor_release(&c);
	/* Aliasing with a copy releases the view's reference. */
	td_cr_assert_ok(td_tensor_contiguous(&tt, &tt));
	cr_assert_eq(td_buffer_refcount(b), 2);
	cr_assert(td_tensor_is_contiguous(&tt));
	td_tensor_release(&tt);
	/* Empty tensors are contiguous whatever their strides. */
	td_cr_assert_ok(td_tensor_from_buffer(&e, b, TD_DTYPE_F64, 2, empty, empty_strides, 0));
	td_cr_assert_ok(td_tensor_contiguous(&c, &e));
	cr_assert_eq(c.buffer, b);
	td_tensor_release(&c);
	td_tensor_release(&e);
	td_tensor_release(&t);
	td_buffer_unref(b);
}

Test(copy, clone_always_copies_into_a_writable_heap_tensor)
{
	static const int64_t shape[2] = { 2, 3 };
	int16_t data[6] = { 1, 2, 3, 4, 5, 6 };
	td_buffer *ro = readonly_buffer(data, sizeof(data));
	const int64_t idx[2] = { 1, 2 };
	td_tensor r, c, tt;

	td_cr_assert_ok(td_tensor_from_buffer(&r, ro, TD_DTYPE_I16, 2, shape, NULL, 0));
	td_cr_assert_ok(td_tensor_clone(&c, &r));
	cr_assert_neq(c.buffer, ro);
	cr_assert_eq(td_buffer_memory(c.buffer), TD_MEMORY_HEAP);
	cr_assert_eq(memcmp(td_tensor_data(&c), data, sizeof(data)), 0);
	td_cr_assert_ok(td_tensor_set(&c, idx, td_scalar_int(-1)));
	cr_assert_eq(data[5], 6);
	td_tensor_release(&c);
	td_cr_assert_ok(td_tensor_transpose(&tt, &r, 0, 1));
	td_cr_assert_ok(td_tensor_clone(&tt, &tt));
	cr_assert_eq(td_buffer_refcount(ro), 2);
	cr_assert_eq(((int16_t *)td_tensor_data(&tt))[1], 4);
	td_tensor_release(&tt);
	td_tensor_release(&r);
	td_buffer_unref(ro);
}

Test(copy, to_dtype_shares_the_same_dtype_and_converts_otherwise)
{
	static const int64_t shape[2] = { 2, 2 };
	td_tensor t, o, v;

	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_F32, 2, shape, td_scalar_float(-2.75)));
	td_cr_assert_ok(td_tensor_to_dtype(&o, &t, TD_DTYPE_F32));
	cr_assert_eq(o.buffer, t.buffer);
	cr_assert_eq(td_buffer_refcount(t.buffer), 2);
	td_tensor_release(&o);
	td_cr_assert_ok(td_tensor_transpose(&v, &t, 0, 1));
	td_cr_assert_ok(td_tensor_to_dtype(&v, &v, TD_DTYPE_I8));
	cr_assert_eq(td_buffer_refcount(t.buffer), 1);
	cr_assert_eq(v.dtype, TD_DTYPE_I8);
	cr_assert(td_tensor_is_contiguous(&v));
	cr_assert_eq(((int8_t *)td_tensor_data(&v))[3], -2);
	td_tensor_release(&v);
	td_tensor_release(&t);
}

Test(copy, contiguous_clone_and_to_dtype_refuse_bad_arguments)
{
	static const int64_t shape[2] = { 4, 4 };
	td_buffer *dev = device_buffer(64);
	td_tensor d, dt, t, out, released = TD_TENSOR_INIT;

	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 2, shape));
	td_cr_assert_ok(td_tensor_from_buffer(&d, dev, TD_DTYPE_F32, 2, shape, NULL, 0));
	td_cr_assert_ok(td_tensor_transpose(&dt, &d, 0, 1));
	td_test_poison(&out);
	td_cr_assert_err(td_tensor_contiguous(NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_tensor_contiguous(&out, NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_contiguous(&out, &released), TD_EINVAL);
	td_cr_assert_err(td_tensor_contiguous(&out, &dt), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_clone(NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_tensor_clone(&out, NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_clone(&out, &released), TD_EINVAL);
	td_cr_assert_err(td_tensor_clone(&out, &d), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_to_dtype(NULL, &t, TD_DTYPE_F64), TD_EINVAL);
	td_cr_assert_err(td_tensor_to_dtype(&out, NULL, TD_DTYPE_F64), TD_EINVAL);
	td_cr_assert_err(td_tensor_to_dtype(&out, &released, TD_DTYPE_F64), TD_EINVAL);
	td_cr_assert_err(td_tensor_to_dtype(&out, &t, (td_dtype)-1), TD_EINVAL);
	td_cr_assert_err(td_tensor_to_dtype(&out, &t, (td_dtype)TD_DTYPE_COUNT), TD_EINVAL);
	td_cr_assert_err(td_tensor_to_dtype(&out, &d, TD_DTYPE_F64), TD_ENOTSUP);
	td_test_assert_poisoned(&out);
	/* Without a copy, device tensors need no CPU access. */
	td_cr_assert_ok(td_tensor_contiguous(&out, &d));
	cr_assert_eq(out.buffer, dev);
	td_tensor_release(&out);
	td_cr_assert_ok(td_tensor_to_dtype(&out, &dt, TD_DTYPE_F32));
	cr_assert_eq(out.buffer, dev);
	td_tensor_release(&out);
	td_tensor_release(&dt);
	td_tensor_release(&d);
	td_tensor_release(&t);
	td_buffer_unref(dev);
}

/* ------------------------------------------------------------------------ */
/* stack, cat                                                                */
/* ------------------------------------------------------------------------ */

/* `n` random tensors of `shape` (non-contiguous now and then) with dtypes drawn from `dtypes`. */
static void join_inputs(td_tensor *ts, size_t n, int ndim, const int64_t *shape,
	const td_dtype *dtypes, size_t ndtypes, uint64_t *rng)
{
	size_t k;

	for (k = 0; k < n; k++) {
		random_layout(&ts[k], rng, dtypes[rnd(rng, ndtypes)], ndim, shape);
		random_fill_any(&ts[k], rng);
	}
}

static td_dtype promoted(const td_tensor *ts, size_t n)
{
	td_dtype d = ts[0].dtype;
	size_t k;

	for (k = 1; k < n; k++)
		d = td_dtype_promote(d, ts[k].dtype);
	return d;
}

/* Element `idx` of `out` must be the converted element `sidx` of `src`. */
static void assert_element_from(const td_tensor *out, const int64_t *idx, const td_tensor *src,
	const int64_t *sidx)
{
	size_t ds = td_dtype_size(out->dtype);
	unsigned char want[16];
	const char *got = elem_ptr(out, idx), *sp = elem_ptr(src, sidx);

	if (src->dtype == out->dtype)
		memcpy(want, sp, ds);
	else
		encode(want, out->dtype, decode(sp, src->dtype));
	cr_assert(same_element(got, want, out->dtype), "%s element of %s: %s, want %s",
		td_dtype_name(src->dtype), td_dtype_name(out->dtype), hex(got, ds), hex(want, ds));
}

static const td_dtype join_dtypes[] = {
	TD_DTYPE_BOOL,
	TD_DTYPE_U8,
	TD_DTYPE_I16,
	TD_DTYPE_I64,
	TD_DTYPE_U32,
	TD_DTYPE_F16,
	TD_DTYPE_BF16,
	TD_DTYPE_F32,
	TD_DTYPE_F64,
	TD_DTYPE_C64,
};

Test(copy, stack_along_every_dim_matches_the_model)
{
	uint64_t rng = 14;
	int it;

	for (it = 0; it < 200; it++) {
		int ndim = (int)rnd(&rng, 4), dim, i;
		size_t n = 1 + (size_t)rnd(&rng, 4), k;
		int64_t shape[TD_MAX_DIMS];
		td_tensor ts[4];
		bool mixed = rnd(&rng, 2);

		for (i = 0; i < ndim; i++)
			shape[i] = rnd(&rng, 10) == 0 ? 0 : 1 + (int64_t)rnd(&rng, 3);
		join_inputs(ts, n, ndim, shape, join_dtypes, mixed ? TD_TEST_ARRAY_LEN(join_dtypes) : 1,
			&rng);
		for (dim = -ndim - 1; dim <= ndim; dim++) {
			int d = dim < 0 ? dim + ndim + 1 : dim;
			td_tensor out;
			int64_t f;

			td_cr_assert_ok(td_tensor_stack(&out, ts, n, dim));
			cr_assert_eq(out.dtype, promoted(ts, n));
			cr_assert_eq(out.ndim, ndim + 1);
			cr_assert_eq(td_tensor_shape(&out)[d], (int64_t)n);
			cr_assert(td_tensor_is_contiguous(&out));
			for (i = 0; i < ndim; i++)
				cr_assert_eq(td_tensor_shape(&out)[i < d ? i : i + 1], shape[i]);
			for (f = 0; f < td_tensor_numel(&out); f++) {
				int64_t idx[TD_MAX_DIMS], sidx[TD_MAX_DIMS];
				td_test_unravel(out.ndim, td_tensor_shape(&out), f, idx);
				for (i = 0; i < ndim; i++)
					sidx[i] = idx[i < d ? i : i + 1];
				assert_element_from(&out, idx, &ts[idx[d]], sidx);
			}
			td_tensor_release(&out);
		}
		for (k = 0; k < n; k++) {
			cr_assert_eq(td_buffer_refcount(ts[k].buffer), 1);
			td_tensor_release(&ts[k]);
		}
	}
}

Test(copy, cat_along_every_dim_matches_the_model)
{
	uint64_t rng = 15;
	int it;

	for (it = 0; it < 200; it++) {
		int ndim = 1 + (int)rnd(&rng, 3), dim, i;
		size_t n = 1 + (size_t)rnd(&rng, 4), k;
		int64_t shape[TD_MAX_DIMS];
		td_tensor ts[4];

		for (i = 0; i < ndim; i++)
			shape[i] = rnd(&rng, 10) == 0 ? 0 : 1 + (int64_t)rnd(&rng, 3);
		for (dim = -ndim; dim < ndim; dim++) {
			int d = dim < 0 ? dim + ndim : dim;
			int64_t total = 0, f, starts[5];
			td_tensor out;

			/* Pieces differ along `d`, empty ones included. */
			for (k = 0; k < n; k++) {
				int64_t pshape[TD_MAX_DIMS];
				memcpy(pshape, shape, sizeof(pshape));
				pshape[d] = (int64_t)rnd(&rng, 4);
				starts[k] = total;
				total += pshape[d];
				join_inputs(&ts[k], 1, ndim, pshape, join_dtypes,
					rnd(&rng, 2) ? TD_TEST_ARRAY_LEN(join_dtypes) : 1, &rng);
			}
			starts[n] = total;
			td_cr_assert_ok(td_tensor_cat(&out, ts, n, dim));
			cr_assert_eq(out.dtype, promoted(ts, n));
			cr_assert_eq(out.ndim, ndim);
			cr_assert_eq(td_tensor_shape(&out)[d], total);
			for (i = 0; i < ndim; i++)
				if (i != d)
					cr_assert_eq(td_tensor_shape(&out)[i], shape[i]);
			for (f = 0; f < td_tensor_numel(&out); f++) {
				int64_t idx[TD_MAX_DIMS], sidx[TD_MAX_DIMS];
				td_test_unravel(out.ndim, td_tensor_shape(&out), f, idx);
				for (k = 0; idx[d] >= starts[k + 1]; k++)
					;
				memcpy(sidx, idx, sizeof(sidx));
				sidx[d] -= starts[k];
				assert_element_from(&out, idx, &ts[k], sidx);
			}
			td_tensor_release(&out);
			for (k = 0; k < n; k++)
				td_tensor_release(&ts[k]);
		}
	}
}

Test(copy, stack_and_cat_of_zero_dim_and_sixteen_dim_tensors)
{
	int64_t shape[TD_MAX_DIMS];
	td_tensor ts[3], out;
	int i;

	for (i = 0; i < 3; i++)
		td_cr_assert_ok(td_tensor_full(&ts[i], TD_DTYPE_I32, 0, NULL, td_scalar_int(i + 1)));
	td_cr_assert_ok(td_tensor_stack(&out, ts, 3, 0));
	cr_assert_eq(out.ndim, 1);
	cr_assert_eq(td_tensor_shape(&out)[0], 3);
	cr_assert_eq(((int32_t *)td_tensor_data(&out))[2], 3);
	td_tensor_release(&out);
	td_cr_assert_ok(td_tensor_stack(&out, ts, 3, -1));
	td_tensor_release(&out);
	td_test_poison(&out);
	td_cr_assert_err(td_tensor_stack(&out, ts, 3, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_stack(&out, ts, 3, -2), TD_EINVAL);
	td_cr_assert_err(td_tensor_cat(&out, ts, 3, 0), TD_EINVAL);
	for (i = 0; i < 3; i++)
		td_tensor_release(&ts[i]);
	for (i = 0; i < TD_MAX_DIMS; i++)
		shape[i] = 1;
	for (i = 0; i < 2; i++)
		td_cr_assert_ok(td_tensor_zeros(&ts[i], TD_DTYPE_U8, TD_MAX_DIMS, shape));
	td_cr_assert_err(td_tensor_stack(&out, ts, 2, 0), TD_EINVAL);
	td_test_assert_poisoned(&out);
	td_cr_assert_ok(td_tensor_cat(&out, ts, 2, TD_MAX_DIMS - 1));
	cr_assert_eq(td_tensor_shape(&out)[TD_MAX_DIMS - 1], 2);
	td_tensor_release(&out);
	for (i = 0; i < 2; i++)
		td_tensor_release(&ts[i]);
}

Test(copy, stack_and_cat_refuse_bad_arguments)
{
	static const int64_t s23[2] = { 2, 3 }, s24[2] = { 2, 4 }, s34[2] = { 3, 4 };
	static const int64_t s2[1] = { 2 }, s1[1] = { 1 };
	static const int64_t huge[1] = { (int64_t)1 << 62 };
	td_buffer *dev = device_buffer(64);
	td_tensor a, b, c, v, d, big[2], ts[2], out, released = TD_TENSOR_INIT;

	td_cr_assert_ok(td_tensor_zeros(&a, TD_DTYPE_F32, 2, s23));
	td_cr_assert_ok(td_tensor_zeros(&b, TD_DTYPE_F32, 2, s24));
	td_cr_assert_ok(td_tensor_zeros(&c, TD_DTYPE_F32, 2, s34));
	td_cr_assert_ok(td_tensor_zeros(&v, TD_DTYPE_F32, 1, s2));
	td_cr_assert_ok(td_tensor_from_buffer(&d, dev, TD_DTYPE_F32, 2, s23, NULL, 0));
	td_test_poison(&out);
	ts[0] = a;
	td_cr_assert_err(td_tensor_stack(NULL, &a, 1, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_cat(NULL, &a, 1, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_stack(&out, NULL, 1, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_cat(&out, NULL, 1, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_stack(&out, &a, 0, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_cat(&out, &a, 0, 0), TD_EINVAL);
	ts[1] = released;
	td_cr_assert_err(td_tensor_stack(&out, ts, 2, 0), TD_EINVAL);
	td_cr_assert_err(td_tensor_cat(&out, ts, 2, 0), TD_EINVAL);
	ts[1] = d;
	td_cr_assert_err(td_tensor_stack(&out, ts, 2, 0), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_cat(&out, ts, 2, 0), TD_ENOTSUP);
	ts[1] = b; /* [2, 3] and [2, 4] */
	td_cr_assert_err(td_tensor_stack(&out, ts, 2, 0), TD_ETYPE);
	td_cr_assert_err(td_tensor_cat(&out, ts, 2, 0), TD_ETYPE);
	td_cr_assert_ok(td_tensor_cat(&out, ts, 2, 1));
	cr_assert_eq(td_tensor_shape(&out)[1], 7);
	td_tensor_release(&out);
	td_test_poison(&out);
	ts[1] = c; /* [2, 3] and [3, 4] */
	td_cr_assert_err(td_tensor_cat(&out, ts, 2, 0), TD_ETYPE);
	td_cr_assert_err(td_tensor_cat(&out, ts, 2, 1), TD_ETYPE);
	ts[1] = v; /* different ndim */
	td_cr_assert_err(td_tensor_stack(&out, ts, 2, 0), TD_ETYPE);
	td_cr_assert_err(td_tensor_cat(&out, ts, 2, 0), TD_ETYPE);
	ts[1] = a;
	td_cr_assert_err(td_tensor_stack(&out, ts, 2, 3), TD_EINVAL);
	td_cr_assert_err(td_tensor_stack(&out, ts, 2, -4), TD_EINVAL);
	td_cr_assert_err(td_tensor_cat(&out, ts, 2, 2), TD_EINVAL);
	td_cr_assert_err(td_tensor_cat(&out, ts, 2, -3), TD_EINVAL);
	/* Results too large to describe: expanded views of 2^62 elements each. */
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_zeros(&v, TD_DTYPE_BOOL, 1, s1));
	td_cr_assert_ok(td_tensor_expand(&big[0], &v, 1, huge));
	td_tensor_ref(&big[1], &big[0]);
	td_cr_assert_err(td_tensor_cat(&out, big, 2, 0), TD_EOVERFLOW);
	td_cr_assert_err(td_tensor_stack(&out, big, 2, 0), TD_EOVERFLOW);
	td_test_assert_poisoned(&out);
	td_tensor_release(&big[0]);
	td_tensor_release(&big[1]);
	td_tensor_release(&a);
	td_tensor_release(&b);
	td_tensor_release(&c);
	td_tensor_release(&v);
	td_tensor_release(&d);
	td_buffer_unref(dev);
}

Test(copy, stack_and_cat_out_may_alias_any_input)
{
	static const int64_t shape[1] = { 3 };
	int which, pos;

	for (which = 0; which < 2; which++) {
		for (pos = 0; pos < 3; pos++) {
			td_tensor ts[3], keep[3];
			int k;

			for (k = 0; k < 3; k++) {
				td_cr_assert_ok(td_tensor_full(&ts[k], TD_DTYPE_I16, 1, shape, td_scalar_int(k)));
				td_tensor_ref(&keep[k], &ts[k]);
			}
			if (which)
				td_cr_assert_ok(td_tensor_cat(&ts[pos], ts, 3, 0));
			else
				td_cr_assert_ok(td_tensor_stack(&ts[pos], ts, 3, 0));
			for (k = 0; k < 3; k++) {
				/* Only the aliased input lost its reference. */
				cr_assert_eq(td_buffer_refcount(keep[k].buffer), k == pos ? 1 : 2,
					"%s into input %d: input %d has %u references", which ? "cat" : "stack", pos, k,
					td_buffer_refcount(keep[k].buffer));
			}
			cr_assert_eq(td_tensor_numel(&ts[pos]), 9);
			for (k = 0; k < 9; k++)
				cr_assert_eq(((int16_t *)td_tensor_data(&ts[pos]))[k], k / 3);
			for (k = 0; k < 3; k++) {
				td_tensor_release(&ts[k]);
				td_tensor_release(&keep[k]);
			}
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

typedef struct sweep_ctx {
	int which;
	td_tensor in[3];
	td_tensor out;
} sweep_ctx;

static int sweep_body(void *p)
{
	sweep_ctx *c = p;
	int rc;

	td_test_poison(&c->out);
	switch (c->which) {
	case 0:
		rc = td_tensor_clone(&c->out, &c->in[0]);
		break;
	case 1:
		rc = td_tensor_contiguous(&c->out, &c->in[1]);
		break;
	case 2:
		rc = td_tensor_to_dtype(&c->out, &c->in[0], TD_DTYPE_C128);
		break;
	case 3:
		rc = td_tensor_stack(&c->out, c->in, 3, 1);
		break;
	case 4:
		rc = td_tensor_cat(&c->out, c->in, 3, -1);
		break;
	default: {
		/* An overlapping copy goes through a temporary. */
		td_tensor dst, src;
		td_cr_assert_ok(td_tensor_narrow(&dst, &c->in[2], 1, 1, 3));
		td_cr_assert_ok(td_tensor_narrow(&src, &c->in[2], 1, 0, 3));
		rc = td_tensor_copy(&dst, &src);
		td_tensor_release(&dst);
		td_tensor_release(&src);
		return rc;
	}
	}
	if (rc < 0)
		td_test_assert_poisoned(&c->out);
	return rc;
}

static void sweep_cleanup(void *p)
{
	sweep_ctx *c = p;

	if (c->which < 5) {
		cr_assert_neq(c->out.buffer, c->in[0].buffer);
		cr_assert_neq(c->out.buffer, c->in[1].buffer);
		td_tensor_release(&c->out);
	}
}

Test(copy, copying_functions_report_enomem_and_leak_nothing)
{
	static const int64_t shape[2] = { 3, 4 }, wide[2] = { 3, 8 };
	sweep_ctx c;
	td_tensor w;
	int k;

	td_test_arange(&c.in[0], TD_DTYPE_F32, 2, shape);
	td_test_arange(&c.in[2], TD_DTYPE_I64, 2, shape);
	/* in[1]: a non-contiguous uint8 view of shape [3, 4]. */
	td_test_arange(&w, TD_DTYPE_U8, 2, wide);
	td_cr_assert_ok(td_tensor_narrow(&c.in[1], &w, 1, 2, 4));
	td_tensor_release(&w);
	cr_assert_not(td_tensor_is_contiguous(&c.in[1]));
	for (c.which = 0; c.which < 6; c.which++)
		td_test_enomem_sweep(sweep_body, sweep_cleanup, &c);
	/* The overlapping copy shifted row elements right by one. */
	cr_assert_eq(((int64_t *)td_tensor_data(&c.in[2]))[1], 0);
	cr_assert_eq(((int64_t *)td_tensor_data(&c.in[2]))[3], 2);
	for (k = 0; k < 3; k++)
		td_tensor_release(&c.in[k]);
}
