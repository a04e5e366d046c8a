/* SPDX-License-Identifier: MIT */
/*
 * tensor_ops.c - elementwise arithmetic and comparisons (add, sub, mul, true
 * division, eq, ne: tensor with tensor, tensor with scalar, in place) and
 * the whole-tensor predicates equal and allclose, with torch's broadcasting
 * and type promotion. One typed kernel per (op, compute dtype) is generated
 * by macros; operands of another dtype are converted chunk by chunk into
 * stack buffers, so the same-dtype case runs a tight loop and nothing is
 * allocated beyond the result. float16/bfloat16 compute in float32 and
 * round once; integer arithmetic wraps, done in unsigned types.
 */
#include "td_internal.h"
#include "tensor_impl.h"

#include <math.h>

/* Elements per chunk when operands need converting (16-byte elements max). */
#define CHUNK 256

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * A kernel computes n elements: p[0] = p[1] <op> p[2], operand k advancing
 * s[k] bytes per element. Inputs have the kernel's compute dtype; the output
 * has it too, or bool for EQ/NE. Loads and stores go through memcpy so that
 * wrapped buffers need no alignment.
 */
typedef void (*kernel_fn)(char *const *p, const int64_t *s, int64_t n);

#define DEF_LDST(N, T) \
	static inline T ld_##N(const char *p) \
	{ \
		T v; \
		memcpy(&v, p, sizeof(v)); \
		return v; \
	} \
	static inline void st_##N(char *p, T v) \
	{ \
		memcpy(p, &v, sizeof(v)); \
	}

DEF_LDST(BOOL, uint8_t)
DEF_LDST(U8, uint8_t)
DEF_LDST(I8, int8_t)
DEF_LDST(I16, int16_t)
DEF_LDST(I32, int32_t)
DEF_LDST(I64, int64_t)
DEF_LDST(U16, uint16_t)
DEF_LDST(U32, uint32_t)
DEF_LDST(U64, uint64_t)
DEF_LDST(F32, float)
DEF_LDST(F64, double)
DEF_LDST(C64, td__cf32)
DEF_LDST(C128, td__cf64)

/*
 * Kernel NAME over inputs of dtype N (C type T) with output ON (C type OT),
 * each element computing EXPR from x and y. Contiguous operands and a
 * broadcast second operand (a scalar) get loops of their own.
 */
#define DEF_KERNEL(NAME, N, T, ON, OT, EXPR) \
	static void NAME(char *const *p, const int64_t *s, int64_t n) \
	{ \
		const int64_t so = (int64_t)sizeof(OT), si = (int64_t)sizeof(T); \
		const int64_t s0 = s[0], s1 = s[1], s2 = s[2]; \
		const char *a = p[1], *b = p[2]; \
		char *o = p[0]; \
		int64_t i; \
		if (s0 == so && s1 == si && s2 == si) { \
			for (i = 0; i < n; i++) { \
				const T x = ld_##N(a + i * si), y = ld_##N(b + i * si); \
				st_##ON(o + i * so, EXPR); \
			} \
		} else if (s0 == so && s1 == si && s2 == 0) { \
			const T y = ld_##N(b); \
			for (i = 0; i < n; i++) { \
				const T x = ld_##N(a + i * si); \
				st_##ON(o + i * so, EXPR); \
			} \
		} else { \
			for (i = 0; i < n; i++) { \
				const T x = ld_##N(a + i * s1), y = ld_##N(b + i * s2); \
				st_##ON(o + i * s0, EXPR); \
			} \
		} \
	}

/* bool: ADD is logical or, MUL logical and (torch); any nonzero byte is true. */
DEF_KERNEL(add_BOOL, BOOL, uint8_t, BOOL, uint8_t, (uint8_t)((x | y) != 0))
DEF_KERNEL(mul_BOOL, BOOL, uint8_t, BOOL, uint8_t, (uint8_t)(x != 0 && y != 0))
DEF_KERNEL(eq_BOOL, BOOL, uint8_t, BOOL, uint8_t, (uint8_t)((x != 0) == (y != 0)))
DEF_KERNEL(ne_BOOL, BOOL, uint8_t, BOOL, uint8_t, (uint8_t)((x != 0) != (y != 0)))

/*
 * Integers wrap: the arithmetic is done in the unsigned type UT (at least as
 * wide as unsigned int, so nothing is promoted to a signed int) and the
 * result converted back, which GCC and Clang define as modulo 2^width.
 */
#define INT_KERNELS(N, T, UT) \
	DEF_KERNEL(add_##N, N, T, N, T, (T)((UT)x + (UT)y)) \
	DEF_KERNEL(sub_##N, N, T, N, T, (T)((UT)x - (UT)y)) \
	DEF_KERNEL(mul_##N, N, T, N, T, (T)((UT)x * (UT)y)) \
	DEF_KERNEL(eq_##N, N, T, BOOL, uint8_t, (uint8_t)(x == y)) \
	DEF_KERNEL(ne_##N, N, T, BOOL, uint8_t, (uint8_t)(x != y))

INT_KERNELS(U8, uint8_t, uint32_t)
INT_KERNELS(I8, int8_t, uint32_t)
INT_KERNELS(I16, int16_t, uint32_t)
INT_KERNELS(I32, int32_t, uint32_t)
INT_KERNELS(I64, int64_t, uint64_t)
INT_KERNELS(U16, uint16_t, uint32_t)
INT_KERNELS(U32, uint32_t, uint32_t)
INT_KERNELS(U64, uint64_t, uint64_t)

#define REAL_KERNELS(N, T) \
	DEF_KERNEL(add_##N, N, T, N, T, x + y) \
	DEF_KERNEL(sub_##N, N, T, N, T, x - y) \
	DEF_KERNEL(mul_##N, N, T, N, T, x *y) \
	DEF_KERNEL(div_##N, N, T, N, T, x / y) \
	DEF_KERNEL(eq_##N, N, T, BOOL, uint8_t, (uint8_t)(x == y)) \
	DEF_KERNEL(ne_##N, N, T, BOOL, uint8_t, (uint8_t)(x != y))

REAL_KERNELS(F32, float)
REAL_KERNELS(F64, double)

/*
 * Complex division as torch's c10::complex: scaled by the larger part of
 * the divisor (Smith's method), so that |y|^2 never overflows or underflows;
 * division by zero gives x.re/0 and x.im/0 (infinities or NaN).
 */
static td__cf64 cdiv(td__cf64 x, td__cf64 y)
{
	double ac = fabs(y.re), ad = fabs(y.im), rat, scl;
	td__cf64 r;

	if (ac >= ad) {
		if (ac == 0) {
			r.re = x.re / ac;
			r.im = x.im / ad;
			return r;
		}
		rat = y.im / y.re;
		scl = 1.0 / (y.re + y.im * rat);
		r.re = (x.re + x.im * rat) * scl;
		r.im = (x.im - x.re * rat) * scl;
	} else {
		rat = y.re / y.im;
		scl = 1.0 / (y.im + y.re * rat);
		r.re = (x.re * rat + x.im) * scl;
		r.im = (x.im * rat - x.re) * scl;
	}
	return r;
}

#define COMPLEX_HELPERS(N, CT) \
	static inline CT cadd_##N(CT x, CT y) \
	{ \
		CT r; \
		r.re = x.re + y.re; \
		r.im = x.im + y.im; \
		return r; \
	} \
	static inline CT csub_##N(CT x, CT y) \
	{ \
		CT r; \
		r.re = x.re - y.re; \
		r.im = x.im - y.im; \
		return r; \
	} \
	static inline CT cmul_##N(CT x, CT y) \
	{ \
		CT r; \
		r.re = x.re * y.re - x.im * y.im; \
		r.im = x.re * y.im + x.im * y.re; \
		return r; \
	} \
	static inline CT cdiv_##N(CT x, CT y) \
	{ \
		td__cf64 xd = { x.re, x.im }, yd = { y.re, y.im }, rd = cdiv(xd, yd); \
		CT r; \
		r.re = rd.re; \
		r.im = rd.im; \
		return r; \
	}

/* complex64 division runs in double precision: same cost, one rounding. */
COMPLEX_HELPERS(C64, td__cf32)
COMPLEX_HELPERS(C128, td__cf64)

#define COMPLEX_KERNELS(N, T) \
	DEF_KERNEL(add_##N, N, T, N, T, cadd_##N(x, y)) \
	DEF_KERNEL(sub_##N, N, T, N, T, csub_##N(x, y)) \
	DEF_KERNEL(mul_##N, N, T, N, T, cmul_##N(x, y)) \
	DEF_KERNEL(div_##N, N, T, N, T, cdiv_##N(x, y)) \
	DEF_KERNEL(eq_##N, N, T, BOOL, uint8_t, (uint8_t)(x.re == y.re && x.im == y.im)) \
	DEF_KERNEL(ne_##N, N, T, BOOL, uint8_t, (uint8_t)(x.re != y.re || x.im != y.im))

COMPLEX_KERNELS(C64, td__cf32)
COMPLEX_KERNELS(C128, td__cf64)

#define INT_ENTRIES(OP) \
	[TD_DTYPE_U8] = OP##_U8, [TD_DTYPE_I8] = OP##_I8, [TD_DTYPE_I16] = OP##_I16, \
	[TD_DTYPE_I32] = OP##_I32, [TD_DTYPE_I64] = OP##_I64, [TD_DTYPE_U16] = OP##_U16, \
	[TD_DTYPE_U32] = OP##_U32, [TD_DTYPE_U64] = OP##_U64
#define FLOAT_ENTRIES(OP) \
	[TD_DTYPE_F32] = OP##_F32, [TD_DTYPE_F64] = OP##_F64, [TD_DTYPE_C64] = OP##_C64, \
	[TD_DTYPE_C128] = OP##_C128

/*
 * Kernels by op and compute dtype. The gaps are never reached: float16 and
 * bfloat16 compute in float32, integer and bool DIV in float32, bool SUB is
 * refused.
 */
static const kernel_fn kernels[TD_OP_NE + 1][TD_DTYPE_COUNT] = {
	[TD_OP_ADD] = { [TD_DTYPE_BOOL] = add_BOOL, INT_ENTRIES(add), FLOAT_ENTRIES(add) },
	[TD_OP_SUB] = { INT_ENTRIES(sub), FLOAT_ENTRIES(sub) },
	[TD_OP_MUL] = { [TD_DTYPE_BOOL] = mul_BOOL, INT_ENTRIES(mul), FLOAT_ENTRIES(mul) },
	[TD_OP_DIV] = { FLOAT_ENTRIES(div) },
	[TD_OP_EQ] = { [TD_DTYPE_BOOL] = eq_BOOL, INT_ENTRIES(eq), FLOAT_ENTRIES(eq) },
	[TD_OP_NE] = { [TD_DTYPE_BOOL] = ne_BOOL, INT_ENTRIES(ne), FLOAT_ENTRIES(ne) },
};

/* ------------------------------------------------------------------------ */
/* Running a kernel over strided, broadcast, mixed-dtype operands            */
/* ------------------------------------------------------------------------ */

typedef struct plan {
	kernel_fn kern;
	td_dtype ct, ot;     /* the kernel's input and output dtypes */
	td_dtype dt, at, bt; /* destination and operand dtypes */
} plan;

/* One operand of an elementwise loop, described over the destination's shape. */
typedef struct operand {
	char *base;
	const int64_t *strides; /* in elements; 0 on broadcast dims */
	td_dtype dtype;
} operand;

/*
 * `m` elements of dtype `t` at `p` (byte stride `s`) as dtype `ct`: `p`
 * itself when the dtypes agree, else converted into `buf` (one element when
 * the operand is broadcast). Sets *stride to the result's byte stride.
 */
static char *stage(char *buf, int64_t *stride, td_dtype ct, char *p, int64_t s, td_dtype t,
	int64_t m)
{
	int64_t cs = (int64_t)td__itemsize(ct);

	if (t == ct) {
		*stride = s;
		return p;
	}
	if (s == 0) {
		td__convert(buf, 0, ct, p, 0, t, 1);
		*stride = 0;
		return buf;
	}
	td__convert(buf, cs, ct, p, s, t, m);
	*stride = cs;
	return buf;
}

static void binary_loop(char *const *p, const int64_t *s, int64_t n, void *ctx)
{
	const plan *pl = ctx;
	td__cf64 ba[CHUNK], bb[CHUNK], bo[CHUNK];
	int64_t i, os = (int64_t)td__itemsize(pl->ot);

	if (pl->at == pl->ct && pl->bt == pl->ct && pl->dt == pl->ot) {
		pl->kern(p, s, n);
		return;
	}
	for (i = 0; i < n; i += CHUNK) {
		int64_t m = n - i < CHUNK ? n - i : CHUNK, cs[3];
		char *cp[3];

		cp[1] = stage((char *)ba, &cs[1], pl->ct, p[1] + i * s[1], s[1], pl->at, m);
		cp[2] = stage((char *)bb, &cs[2], pl->ct, p[2] + i * s[2], s[2], pl->bt, m);
		if (pl->dt == pl->ot) {
			cp[0] = p[0] + i * s[0];
			cs[0] = s[0];
			pl->kern(cp, cs, m);
		} else {
			cp[0] = (char *)bo;
			cs[0] = os;
			pl->kern(cp, cs, m);
			td__convert(p[0] + i * s[0], s[0], pl->dt, (char *)bo, os, pl->ot, m);
		}
	}
}

/*
 * The byte stride of an operand walked as one flat row over `shape`: its
 * item size when it is C-contiguous, 0 when it is broadcast along every
 * dim, -1 when neither (the n-d iterator is needed).
 */
static int64_t flat_stride(int nd, const int64_t *shape, const int64_t *strides, size_t size)
{
	bool broadcast = true;
	int i;

	for (i = 0; i < nd; i++)
		if (shape[i] > 1 && strides[i] != 0)
			broadcast = false;
	if (broadcast)
		return 0;
	return td__is_contiguous(nd, shape, strides) ? (int64_t)size : -1;
}

/* dst = a <op> b elementwise, computing in `ct`; a and b are over dst's shape. */
static void run_binary(const td_tensor *dst, const operand *a, const operand *b, td_binop op,
	td_dtype ct)
{
	char *base[3] = { td__tensor_ptr(dst), a->base, b->base };
	const int64_t *strides[3] = { td_tensor_strides(dst), a->strides, b->strides };
	size_t sizes[3] = { td__itemsize(dst->dtype), td__itemsize(a->dtype), td__itemsize(b->dtype) };
	int64_t flat[3], n = td__numel(dst->ndim, td_tensor_shape(dst));
	td__iter it;
	plan pl;
	int k;

	pl.kern = kernels[op][ct];
	pl.ct = ct;
	pl.ot = op >= TD_OP_EQ ? TD_DTYPE_BOOL : ct;
	pl.dt = dst->dtype;
	pl.at = a->dtype;
	pl.bt = b->dtype;
	/* Fast path, the common case: contiguous operands (or a scalar) in one row. */
	for (k = 0; k < 3; k++)
		flat[k] = flat_stride(dst->ndim, td_tensor_shape(dst), strides[k], sizes[k]);
	if (flat[0] >= 0 && flat[1] >= 0 && flat[2] >= 0) {
		if (n > 0)
			binary_loop(base, flat, n, &pl);
		return;
	}
	td__iter_init(&it, dst->ndim, td_tensor_shape(dst), 3, base, strides, sizes);
	td__iter_run(&it, binary_loop, &pl);
}

/* ------------------------------------------------------------------------ */
/* Type rules                                                                */
/* ------------------------------------------------------------------------ */

/* torch's categories: bool < integral (signed or not) < floating < complex. */
static int torch_category(td_dtype d)
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

static int op_check(td_binop op, const char *fn)
{
	if ((unsigned)op > (unsigned)TD_OP_NE)
		return td__error(TD_EINVAL, "%s: invalid operation %d", fn, (int)op);
	return TD_OK;
}

/* The dtype kernels compute in for values of dtype `d`. */
static td_dtype compute_dtype(td_dtype d)
{
	return d == TD_DTYPE_F16 || d == TD_DTYPE_BF16 ? TD_DTYPE_F32 : d;
}

/*
 * From the promoted dtype `pd` of the operands, the result dtype `*rt` and
 * the compute dtype `*ct` of `op`. `has_bool`: an operand is bool.
 */
static int op_dtypes(td_dtype pd, td_binop op, bool has_bool, td_dtype *rt, td_dtype *ct,
	const char *fn)
{
	if (op == TD_OP_SUB && has_bool)
		return td__error(TD_ETYPE,
			"%s: subtraction with a bool operand is not supported "
			"(as in torch)",
			fn);
	if (op == TD_OP_DIV && torch_category(pd) <= 1)
		pd = TD_DTYPE_F32;
	*ct = compute_dtype(pd);
	*rt = op >= TD_OP_EQ ? TD_DTYPE_BOOL : pd;
	return TD_OK;
}

/*
 * The promoted dtype of a tensor of dtype `t` with scalar `s` (torch): the
 * scalar counts only when its category is higher, as its default dtype
 * (int64, uint64, float32, complex64).
 */
static td_dtype scalar_promote(td_dtype t, const td_scalar *s)
{
	static const td_dtype defaults[] = {
		[TD_SCALAR_BOOL] = TD_DTYPE_BOOL,
		[TD_SCALAR_INT] = TD_DTYPE_I64,
		[TD_SCALAR_UINT] = TD_DTYPE_U64,
		[TD_SCALAR_FLOAT] = TD_DTYPE_F32,
		[TD_SCALAR_COMPLEX] = TD_DTYPE_C64,
	};
	td_dtype sd = defaults[s->kind];

	if (torch_category(sd) <= torch_category(t))
		return t;
	return td_dtype_promote(t, sd);
}

/* ------------------------------------------------------------------------ */
/* Out of place                                                              */
/* ------------------------------------------------------------------------ */

int td_tensor_binary(td_tensor *out, const td_tensor *a, const td_tensor *b, td_binop op)
{
	static const char fn[] = "td_tensor_binary";
	int64_t shape[TD_MAX_DIMS], as[TD_MAX_DIMS], bs[TD_MAX_DIMS];
	td_dtype rt, ct;
	operand oa, ob;
	td_tensor tmp;
	int nd;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check_read(a, fn, "a"));
	TD_TRY(td__tensor_check_read(b, fn, "b"));
	TD_TRY(op_check(op, fn));
	TD_TRY(op_dtypes(td_dtype_promote(a->dtype, b->dtype), op,
		a->dtype == TD_DTYPE_BOOL || b->dtype == TD_DTYPE_BOOL, &rt, &ct, fn));
	TD_TRY(td__broadcast_shapes(a->ndim, td_tensor_shape(a), b->ndim, td_tensor_shape(b), &nd,
		shape, fn));
	TD_TRY(td__broadcast_strides(a, nd, shape, as, fn));
	TD_TRY(td__broadcast_strides(b, nd, shape, bs, fn));
	TD_TRY(td__tensor_alloc(&tmp, rt, nd, shape, false, fn));
	oa.base = td__tensor_ptr(a);
	oa.strides = as;
	oa.dtype = a->dtype;
	ob.base = td__tensor_ptr(b);
	ob.strides = bs;
	ob.dtype = b->dtype;
	run_binary(&tmp, &oa, &ob, op, ct);
	/* `out` may be a or b: they were only read above. */
	if (out == a || out == b)
		td_tensor_release(out);
	td__tensor_copy_meta(out, &tmp);
	return TD_OK;
}

/* The scalar as an operand of dtype `ct` broadcast over every dim. */
static void scalar_operand(operand *o, td__cf64 *storage, const int64_t *zeros, td_dtype ct,
	td_scalar s)
{
	td__scalar_store(storage, ct, s);
	o->base = (char *)storage;
	o->strides = zeros;
	o->dtype = ct;
}

int td_tensor_binary_scalar(td_tensor *out, const td_tensor *a, td_scalar s, td_binop op)
{
	static const char fn[] = "td_tensor_binary_scalar";
	static const int64_t zeros[TD_MAX_DIMS];
	td__cf64 storage;
	td_dtype rt, ct;
	operand oa, ob;
	td_tensor tmp;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check_read(a, fn, "a"));
	TD_TRY(td__scalar_check(s, fn));
	TD_TRY(op_check(op, fn));
	TD_TRY(op_dtypes(scalar_promote(a->dtype, &s), op,
		a->dtype == TD_DTYPE_BOOL || s.kind == TD_SCALAR_BOOL, &rt, &ct, fn));
	TD_TRY(td__tensor_alloc_like(&tmp, a, rt, fn));
	oa.base = td__tensor_ptr(a);
	oa.strides = td_tensor_strides(a);
	oa.dtype = a->dtype;
	scalar_operand(&ob, &storage, zeros, ct, s);
	run_binary(&tmp, &oa, &ob, op, ct);
	td__tensor_assign(out, a, &tmp);
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* In place                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * Checks common to the in-place forms once the result dtype `rt` is known:
 * it must cast to a's dtype (torch's canCast: no float into an integer
 * tensor, no complex into a real one, nothing but bool into bool), and no
 * element of `a` may be written twice (an expanded, stride-0 dim).
 */
static int inplace_check(const td_tensor *a, td_dtype rt, const char *fn)
{
	int i;

	if (torch_category(rt) > torch_category(a->dtype))
		return td__error(TD_ETYPE,
			"%s: the %s result cannot be stored in place into a %s "
			"tensor",
			fn, td_dtype_name(rt), td_dtype_name(a->dtype));
	for (i = 0; i < a->ndim; i++)
		if (td_tensor_shape(a)[i] > 1 && td_tensor_strides(a)[i] == 0)
			return td__error(TD_EINVAL,
				"%s: a is expanded along dim %d (stride 0): several "
				"elements share one memory location",
				fn, i);
	return TD_OK;
}

static int inplace_op_check(td_binop op, const char *fn)
{
	TD_TRY(op_check(op, fn));
	if (op >= TD_OP_EQ)
		return td__error(TD_EINVAL, "%s: comparison %d gives bool and cannot run in place", fn,
			(int)op);
	return TD_OK;
}

/*
 * Whether b (with strides `bs` over a's shape) reads memory that writing a
 * could change before b reads it: any overlap except b being exactly a,
 * element for element.
 */
static bool inplace_needs_copy(const td_tensor *a, const td_tensor *b, const int64_t *bs)
{
	int i;

	if (!td__tensor_overlap(a, b))
		return false;
	if (b->dtype != a->dtype || b->offset != a->offset)
		return true;
	for (i = 0; i < a->ndim; i++)
		if (td_tensor_shape(a)[i] > 1 && bs[i] != td_tensor_strides(a)[i])
			return true;
	return false;
}

int td__binary_inplace_check(const td_tensor *a, const td_tensor *b, const td_scalar *s,
	td_binop op, const char *fn)
{
	int64_t bs[TD_MAX_DIMS];
	td_dtype rt, ct;

	TD_TRY(td__tensor_check_write(a, fn, "a"));
	TD_TRY(inplace_op_check(op, fn));
	if (b) {
		TD_TRY(td__tensor_check_read(b, fn, "b"));
		TD_TRY(op_dtypes(td_dtype_promote(a->dtype, b->dtype), op,
			a->dtype == TD_DTYPE_BOOL || b->dtype == TD_DTYPE_BOOL, &rt, &ct, fn));
	} else {
		TD_TRY(td__scalar_check(*s, fn));
		TD_TRY(op_dtypes(scalar_promote(a->dtype, s), op,
			a->dtype == TD_DTYPE_BOOL || s->kind == TD_SCALAR_BOOL, &rt, &ct, fn));
	}
	TD_TRY(inplace_check(a, rt, fn));
	if (b)
		TD_TRY(td__broadcast_strides(b, a->ndim, td_tensor_shape(a), bs, fn));
	return TD_OK;
}

int td_tensor_binary_inplace(td_tensor *a, const td_tensor *b, td_binop op)
{
	static const char fn[] = "td_tensor_binary_inplace";
	td_tensor copy = TD_TENSOR_INIT;
	int64_t bs[TD_MAX_DIMS];
	td_dtype rt, ct;
	operand oa, ob;

	TD_TRY(td__tensor_check_write(a, fn, "a"));
	TD_TRY(td__tensor_check_read(b, fn, "b"));
	TD_TRY(inplace_op_check(op, fn));
	TD_TRY(op_dtypes(td_dtype_promote(a->dtype, b->dtype), op,
		a->dtype == TD_DTYPE_BOOL || b->dtype == TD_DTYPE_BOOL, &rt, &ct, fn));
	TD_TRY(inplace_check(a, rt, fn));
	TD_TRY(td__broadcast_strides(b, a->ndim, td_tensor_shape(a), bs, fn));
	if (inplace_needs_copy(a, b, bs)) {
		TD_TRY(td_tensor_clone(&copy, b));
		b = &copy;
		td__broadcast_strides(b, a->ndim, td_tensor_shape(a), bs, fn);
	}
	oa.base = td__tensor_ptr(a);
	oa.strides = td_tensor_strides(a);
	oa.dtype = a->dtype;
	ob.base = td__tensor_ptr(b);
	ob.strides = bs;
	ob.dtype = b->dtype;
	run_binary(a, &oa, &ob, op, ct);
	td_tensor_release(&copy);
	return TD_OK;
}

int td_tensor_binary_scalar_inplace(td_tensor *a, td_scalar s, td_binop op)
{
	static const char fn[] = "td_tensor_binary_scalar_inplace";
	static const int64_t zeros[TD_MAX_DIMS];
	td__cf64 storage;
	td_dtype rt, ct;
	operand oa, ob;

	TD_TRY(td__tensor_check_write(a, fn, "a"));
	TD_TRY(td__scalar_check(s, fn));
	TD_TRY(inplace_op_check(op, fn));
	TD_TRY(op_dtypes(scalar_promote(a->dtype, &s), op,
		a->dtype == TD_DTYPE_BOOL || s.kind == TD_SCALAR_BOOL, &rt, &ct, fn));
	TD_TRY(inplace_check(a, rt, fn));
	oa.base = td__tensor_ptr(a);
	oa.strides = td_tensor_strides(a);
	oa.dtype = a->dtype;
	scalar_operand(&ob, &storage, zeros, ct, s);
	run_binary(a, &oa, &ob, op, ct);
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* equal and allclose                                                        */
/* ------------------------------------------------------------------------ */

typedef struct reduce_ctx reduce_ctx;

/* Whether a chunk of m elements (in ct, byte strides sa/sb) passes the test. */
typedef bool (*chunk_test_fn)(const reduce_ctx *c, const char *a, int64_t sa, const char *b,
	int64_t sb, int64_t m);

struct reduce_ctx {
	chunk_test_fn test;
	td_dtype ct, at, bt;
	double rtol, atol;
	bool equal_nan;
	bool ok; /* every chunk so far passed */
};

static void reduce_loop(char *const *p, const int64_t *s, int64_t n, void *ctx)
{
	reduce_ctx *c = ctx;
	td__cf64 ba[CHUNK], bb[CHUNK];
	int64_t i;

	for (i = 0; i < n && c->ok; i += CHUNK) {
		int64_t m = n - i < CHUNK ? n - i : CHUNK, sa, sb;
		const char *pa, *pb;

		pa = stage((char *)ba, &sa, c->ct, p[0] + i * s[0], s[0], c->at, m);
		pb = stage((char *)bb, &sb, c->ct, p[1] + i * s[1], s[1], c->bt, m);
		c->ok = c->test(c, pa, sa, pb, sb, m);
	}
}

/* Run c->test over a and b, broadcast to `shape`; the answer is c->ok. */
static void run_reduce(reduce_ctx *c, const td_tensor *a, const td_tensor *b, int nd,
	const int64_t *shape)
{
	int64_t as[TD_MAX_DIMS], bs[TD_MAX_DIMS];
	char *base[2] = { td__tensor_ptr(a), td__tensor_ptr(b) };
	const int64_t *strides[2] = { as, bs };
	size_t sizes[2] = { td__itemsize(a->dtype), td__itemsize(b->dtype) };
	td__iter it;

	/* The shapes were checked to broadcast: these cannot fail. */
	td__broadcast_strides(a, nd, shape, as, "td_tensor_ops");
	td__broadcast_strides(b, nd, shape, bs, "td_tensor_ops");
	c->at = a->dtype;
	c->bt = b->dtype;
	c->ok = true;
	td__iter_init(&it, nd, shape, 2, base, strides, sizes);
	td__iter_run(&it, reduce_loop, c);
}

static bool test_equal(const reduce_ctx *c, const char *a, int64_t sa, const char *b, int64_t sb,
	int64_t m)
{
	uint8_t ne[CHUNK];
	char *p[3] = { (char *)ne, (char *)a, (char *)b };
	int64_t s[3] = { 1, sa, sb }, i;
	uint8_t any = 0;

	kernels[TD_OP_NE][c->ct](p, s, m);
	for (i = 0; i < m; i++)
		any |= ne[i];
	return !any;
}

int td_tensor_equal(const td_tensor *a, const td_tensor *b)
{
	static const char fn[] = "td_tensor_equal";
	reduce_ctx c;

	TD_TRY(td__tensor_check_read(a, fn, "a"));
	TD_TRY(td__tensor_check_read(b, fn, "b"));
	if (a->ndim != b->ndim ||
		memcmp(td_tensor_shape(a), td_tensor_shape(b), (size_t)a->ndim * sizeof(int64_t)) != 0)
		return 0;
	memset(&c, 0, sizeof(c));
	c.test = test_equal;
	c.ct = compute_dtype(td_dtype_promote(a->dtype, b->dtype));
	run_reduce(&c, a, b, a->ndim, td_tensor_shape(a));
	return c.ok ? 1 : 0;
}

/* torch.isclose for one pair: |x - y| (finite) <= atol + rtol * |y|. */
static bool close_enough(double x, double y, const reduce_ctx *c)
{
	double diff = fabs(x - y);

	return isfinite(diff) && diff <= c->atol + c->rtol * fabs(y);
}

static bool test_close_real(const reduce_ctx *c, const char *a, int64_t sa, const char *b,
	int64_t sb, int64_t m)
{
	int64_t i;

	for (i = 0; i < m; i++) {
		double x = ld_F64(a + i * sa), y = ld_F64(b + i * sb);

		if (x == y || (c->equal_nan && isnan(x) && isnan(y)))
			continue;
		if (!close_enough(x, y, c))
			return false;
	}
	return true;
}

static bool test_close_complex(const reduce_ctx *c, const char *a, int64_t sa, const char *b,
	int64_t sb, int64_t m)
{
	int64_t i;

	for (i = 0; i < m; i++) {
		td__cf64 x = ld_C128(a + i * sa), y = ld_C128(b + i * sb);
		double diff, allowed;

		if (x.re == y.re && x.im == y.im)
			continue;
		if (c->equal_nan && (isnan(x.re) || isnan(x.im)) && (isnan(y.re) || isnan(y.im)))
			continue;
		diff = hypot(x.re - y.re, x.im - y.im);
		allowed = c->atol + c->rtol * hypot(y.re, y.im);
		if (!(isfinite(diff) && diff <= allowed))
			return false;
	}
	return true;
}

int td_tensor_allclose(const td_tensor *a, const td_tensor *b, double rtol, double atol,
	bool equal_nan)
{
	static const char fn[] = "td_tensor_allclose";
	int64_t shape[TD_MAX_DIMS];
	reduce_ctx c;
	int nd;

	TD_TRY(td__tensor_check_read(a, fn, "a"));
	TD_TRY(td__tensor_check_read(b, fn, "b"));
	if (!(rtol >= 0) || !(atol >= 0))
		return td__error(TD_EINVAL, "%s: rtol %g and atol %g must be >= 0", fn, rtol, atol);
	TD_TRY(td__broadcast_shapes(a->ndim, td_tensor_shape(a), b->ndim, td_tensor_shape(b), &nd,
		shape, fn));
	memset(&c, 0, sizeof(c));
	if (td_dtype_category(td_dtype_promote(a->dtype, b->dtype)) == TD_CATEGORY_COMPLEX) {
		c.test = test_close_complex;
		c.ct = TD_DTYPE_C128;
	} else {
		c.test = test_close_real;
		c.ct = TD_DTYPE_F64;
	}
	c.rtol = rtol;
	c.atol = atol;
	c.equal_nan = equal_nan;
	run_reduce(&c, a, b, nd, shape);
	return c.ok ? 1 : 0;
}
