/* SPDX-License-Identifier: MIT */
/*
 * tensor_copy.c - dtype conversion kernels and everything built on them:
 * strided copies with broadcasting, fill/zero, contiguous/clone/to_dtype,
 * stack and cat, scalar load/store.
 *
 * Conversion rules (documented in tensor.h): to bool, nonzero is true; float
 * to integer truncates toward zero, NaN gives 0 and out-of-range values
 * saturate (C leaves those undefined); integer to narrower integer wraps;
 * complex to real drops the imaginary part; float16/bfloat16 round to
 * nearest even through float32, as torch does.
 */
#include "td_internal.h"
#include "tensor_impl.h"

#include <math.h>
#include <stdio.h>

/* Every dtype: name, C storage type, class (B bool, U/I integer, H float16,
 * G bfloat16, F float32/64, C complex). */
#define TD_DTYPES(X) \
	X(BOOL, uint8_t, B) \
	X(U8, uint8_t, U) \
	X(I8, int8_t, I) \
	X(I16, int16_t, I) \
	X(I32, int32_t, I) \
	X(I64, int64_t, I) \
	X(U16, uint16_t, U) \
	X(U32, uint32_t, U) \
	X(U64, uint64_t, U) \
	X(F16, uint16_t, H) \
	X(BF16, uint16_t, G) \
	X(F32, float, F) \
	X(F64, double, F) \
	X(C64, td__cf32, C) \
	X(C128, td__cf64, C)

/* Saturating float-to-integer conversions (NaN gives 0). */
#define SAT_DEF(DN, DT, LO, HI) \
	static inline DT sat_##DN(double v) \
	{ \
		if (v != v) \
			return 0; \
		if (v <= (double)(LO)) \
			return (LO); \
		if (v >= (double)(HI)) \
			return (HI); \
		return (DT)v; \
	}
SAT_DEF(U8, uint8_t, 0, UINT8_MAX)
SAT_DEF(I8, int8_t, INT8_MIN, INT8_MAX)
SAT_DEF(I16, int16_t, INT16_MIN, INT16_MAX)
SAT_DEF(I32, int32_t, INT32_MIN, INT32_MAX)
SAT_DEF(I64, int64_t, INT64_MIN, INT64_MAX)
SAT_DEF(U16, uint16_t, 0, UINT16_MAX)
SAT_DEF(U32, uint32_t, 0, UINT32_MAX)
SAT_DEF(U64, uint64_t, 0, UINT64_MAX)

static inline td__cf32 mk_C64(double re, double im)
{
	td__cf32 c = { (float)re, (float)im };
	return c;
}

static inline td__cf64 mk_C128(double re, double im)
{
	td__cf64 c = { re, im };
	return c;
}

/* CV_<dest class>_<source class>(dest name, dest type, value) */
#define CV_B_B(DN, DT, v) (DT)((v) != 0)
#define CV_B_U(DN, DT, v) (DT)((v) != 0)
#define CV_B_I(DN, DT, v) (DT)((v) != 0)
#define CV_B_H(DN, DT, v) (DT)(td_f16_to_float(v) != 0.0f)
#define CV_B_G(DN, DT, v) (DT)(td_bf16_to_float(v) != 0.0f)
#define CV_B_F(DN, DT, v) (DT)((v) != 0)
#define CV_B_C(DN, DT, v) (DT)((v).re != 0 || (v).im != 0)

#define CV_I_B(DN, DT, v) (DT)((v) != 0)
#define CV_I_U(DN, DT, v) (DT)(v)
#define CV_I_I(DN, DT, v) (DT)(v)
#define CV_I_H(DN, DT, v) sat_##DN(td_f16_to_float(v))
#define CV_I_G(DN, DT, v) sat_##DN(td_bf16_to_float(v))
#define CV_I_F(DN, DT, v) sat_##DN((double)(v))
#define CV_I_C(DN, DT, v) sat_##DN((double)(v).re)
#define CV_U_B CV_I_B
#define CV_U_U CV_I_U
#define CV_U_I CV_I_I
#define CV_U_H CV_I_H
#define CV_U_G CV_I_G
#define CV_U_F CV_I_F
#define CV_U_C CV_I_C

#define CV_H_B(DN, DT, v) td_float_to_f16((v) ? 1.0f : 0.0f)
#define CV_H_U(DN, DT, v) td_float_to_f16((float)(v))
#define CV_H_I(DN, DT, v) td_float_to_f16((float)(v))
#define CV_H_H(DN, DT, v) (v)
#define CV_H_G(DN, DT, v) td_float_to_f16(td_bf16_to_float(v))
#define CV_H_F(DN, DT, v) td_float_to_f16((float)(v))
#define CV_H_C(DN, DT, v) td_float_to_f16((float)(v).re)

#define CV_G_B(DN, DT, v) td_float_to_bf16((v) ? 1.0f : 0.0f)
#define CV_G_U(DN, DT, v) td_float_to_bf16((float)(v))
#define CV_G_I(DN, DT, v) td_float_to_bf16((float)(v))
#define CV_G_H(DN, DT, v) td_float_to_bf16(td_f16_to_float(v))
#define CV_G_G(DN, DT, v) (v)
#define CV_G_F(DN, DT, v) td_float_to_bf16((float)(v))
#define CV_G_C(DN, DT, v) td_float_to_bf16((float)(v).re)

#define CV_F_B(DN, DT, v) (DT)((v) != 0)
#define CV_F_U(DN, DT, v) (DT)(v)
#define CV_F_I(DN, DT, v) (DT)(v)
#define CV_F_H(DN, DT, v) (DT) td_f16_to_float(v)
#define CV_F_G(DN, DT, v) (DT) td_bf16_to_float(v)
#define CV_F_F(DN, DT, v) (DT)(v)
#define CV_F_C(DN, DT, v) (DT)(v).re

#define CV_C_B(DN, DT, v) mk_##DN((v) != 0, 0)
#define CV_C_U(DN, DT, v) mk_##DN((double)(v), 0)
#define CV_C_I(DN, DT, v) mk_##DN((double)(v), 0)
#define CV_C_H(DN, DT, v) mk_##DN(td_f16_to_float(v), 0)
#define CV_C_G(DN, DT, v) mk_##DN(td_bf16_to_float(v), 0)
#define CV_C_F(DN, DT, v) mk_##DN((double)(v), 0)
#define CV_C_C(DN, DT, v) mk_##DN((v).re, (v).im)

/* The same list with the destination's parameters carried along. */
#define TD_SOURCES(X, DN, DT, DC) \
	X(DN, DT, DC, BOOL, uint8_t, B) \
	X(DN, DT, DC, U8, uint8_t, U) \
	X(DN, DT, DC, I8, int8_t, I) \
	X(DN, DT, DC, I16, int16_t, I) \
	X(DN, DT, DC, I32, int32_t, I) \
	X(DN, DT, DC, I64, int64_t, I) \
	X(DN, DT, DC, U16, uint16_t, U) \
	X(DN, DT, DC, U32, uint32_t, U) \
	X(DN, DT, DC, U64, uint64_t, U) \
	X(DN, DT, DC, F16, uint16_t, H) \
	X(DN, DT, DC, BF16, uint16_t, G) \
	X(DN, DT, DC, F32, float, F) \
	X(DN, DT, DC, F64, double, F) \
	X(DN, DT, DC, C64, td__cf32, C) \
	X(DN, DT, DC, C128, td__cf64, C)

/* One source case inside the kernel of destination DN. */
#define SRC_CASE(DN, DT, DC, SN, ST, SC) \
	case TD_DTYPE_##SN: { \
		int64_t i; \
		for (i = 0; i < n; i++) { \
			ST v; \
			DT w; \
			memcpy(&v, src + i * ss, sizeof(v)); \
			w = CV_##DC##_##SC(DN, DT, v); \
			memcpy(dst + i * ds, &w, sizeof(w)); \
		} \
		break; \
	}

/* The kernel converting any source dtype into destination DN. */
#define DST_KERNEL(DN, DT, DC) \
	static void convert_to_##DN(char *dst, int64_t ds, const char *src, int64_t ss, td_dtype st, \
		int64_t n) \
	{ \
		switch (st) { \
			TD_SOURCES(SRC_CASE, DN, DT, DC) \
		default: \
			break; \
		} \
	}

TD_DTYPES(DST_KERNEL)

typedef void (
	*convert_fn)(char *dst, int64_t ds, const char *src, int64_t ss, td_dtype st, int64_t n);

static const convert_fn convert_kernels[TD_DTYPE_COUNT] = {
	[TD_DTYPE_BOOL] = convert_to_BOOL,
	[TD_DTYPE_U8] = convert_to_U8,
	[TD_DTYPE_I8] = convert_to_I8,
	[TD_DTYPE_I16] = convert_to_I16,
	[TD_DTYPE_I32] = convert_to_I32,
	[TD_DTYPE_I64] = convert_to_I64,
	[TD_DTYPE_U16] = convert_to_U16,
	[TD_DTYPE_U32] = convert_to_U32,
	[TD_DTYPE_U64] = convert_to_U64,
	[TD_DTYPE_F16] = convert_to_F16,
	[TD_DTYPE_BF16] = convert_to_BF16,
	[TD_DTYPE_F32] = convert_to_F32,
	[TD_DTYPE_F64] = convert_to_F64,
	[TD_DTYPE_C64] = convert_to_C64,
	[TD_DTYPE_C128] = convert_to_C128,
};

/* Same-dtype strided copy of fixed-size elements. */
#define COPY_LOOP(T) \
	do { \
		int64_t i; \
		for (i = 0; i < n; i++) { \
			T v; \
			memcpy(&v, src + i * ss, sizeof(T)); \
			memcpy(dst + i * ds, &v, sizeof(T)); \
		} \
	} while (0)

static void copy_same(char *dst, int64_t ds, const char *src, int64_t ss, size_t size, int64_t n)
{
	if (ds == (int64_t)size && ss == (int64_t)size) {
		memmove(dst, src, (size_t)n * size);
		return;
	}
	switch (size) {
	case 1:
		COPY_LOOP(uint8_t);
		break;
	case 2:
		COPY_LOOP(uint16_t);
		break;
	case 4:
		COPY_LOOP(uint32_t);
		break;
	case 8:
		COPY_LOOP(uint64_t);
		break;
	default:
		COPY_LOOP(td__cf64);
		break;
	}
}

void td__convert(char *dst, int64_t ds, td_dtype dt, const char *src, int64_t ss, td_dtype st,
	int64_t n)
{
	if (dt == st) {
		copy_same(dst, ds, src, ss, td__itemsize(dt), n);
		return;
	}
	convert_kernels[dt](dst, ds, src, ss, st, n);
}

/* ------------------------------------------------------------------------ */
/* Scalars                                                                   */
/* ------------------------------------------------------------------------ */

static td_dtype scalar_dtype(const td_scalar *s)
{
	switch (s->kind) {
	case TD_SCALAR_BOOL:
		return TD_DTYPE_BOOL;
	case TD_SCALAR_INT:
		return TD_DTYPE_I64;
	case TD_SCALAR_UINT:
		return TD_DTYPE_U64;
	case TD_SCALAR_FLOAT:
		return TD_DTYPE_F64;
	default:
		return TD_DTYPE_C128;
	}
}

void td__scalar_store(void *out, td_dtype dtype, td_scalar s)
{
	uint8_t b = 0;
	const void *src = &s.v;

	if (s.kind == TD_SCALAR_BOOL) {
		b = s.v.b ? 1 : 0;
		src = &b;
	}

	td__convert(out, 0, dtype, src, 0, scalar_dtype(&s), 1);
}

td_scalar td__scalar_load(const void *p, td_dtype dtype)
{
	td_scalar s;
	uint8_t b;

	switch (td_dtype_category(dtype)) {
	case TD_CATEGORY_BOOL:
		td__convert((char *)&b, 0, TD_DTYPE_BOOL, p, 0, dtype, 1);
		return td_scalar_bool(b != 0);
	case TD_CATEGORY_INT:
		s.kind = TD_SCALAR_INT;
		td__convert((char *)&s.v.i, 0, TD_DTYPE_I64, p, 0, dtype, 1);
		return s;
	case TD_CATEGORY_UINT:
		s.kind = TD_SCALAR_UINT;
		td__convert((char *)&s.v.u, 0, TD_DTYPE_U64, p, 0, dtype, 1);
		return s;
	case TD_CATEGORY_FLOAT:
		s.kind = TD_SCALAR_FLOAT;
		td__convert((char *)&s.v.f, 0, TD_DTYPE_F64, p, 0, dtype, 1);
		return s;
	default:
		s.kind = TD_SCALAR_COMPLEX;
		td__convert((char *)s.v.c, 0, TD_DTYPE_C128, p, 0, dtype, 1);
		return s;
	}
}

int td__scalar_check(td_scalar s, const char *fn)
{
	if ((unsigned)s.kind > TD_SCALAR_COMPLEX)
		return td__error(TD_EINVAL, "%s: invalid scalar kind %d", fn, (int)s.kind);
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Strided copy                                                              */
/* ------------------------------------------------------------------------ */

typedef struct copy_ctx {
	td_dtype dt, st;
} copy_ctx;

static void copy_loop(char *const *p, const int64_t *s, int64_t n, void *ctx)
{
	const copy_ctx *c = ctx;

	td__convert(p[0], s[0], c->dt, p[1], s[1], c->st, n);
}

/*
 * Merge the dims of a block (sizes `shape`, byte strides `ss` and `ds` of
 * its source and destination) that are laid out one inside the other in
 * both, and drop dims of size 1: fewer and longer loops. Returns the dims
 * left.
 */
int td__coalesce_dims(int nd, int64_t *shape, int64_t *ss, int64_t *ds)
{
	int i, o = 0;

	for (i = 0; i < nd; i++) {
		if (shape[i] == 1)
			continue;
		if (o > 0 && ss[o - 1] == ss[i] * shape[i] && ds[o - 1] == ds[i] * shape[i]) {
			shape[o - 1] *= shape[i];
			ss[o - 1] = ss[i];
			ds[o - 1] = ds[i];
			continue;
		}
		shape[o] = shape[i];
		ss[o] = ss[i];
		ds[o] = ds[i];
		o++;
	}
	return o;
}

/*
 * Copy the `nd`-dim block of elements of `isz` bytes at `s` (byte strides
 * `ss`) to `d` (byte strides `ds`), an odometer over all but the last dim;
 * a last dim dense in both is one memcpy per row. Stacked leaves of lazy
 * stacks and writes into their children are usually strided views (unbind
 * slices) of a few elements: a plain loop of fixed-size moves beats the
 * general copy (iterator setup, dtype dispatch) by about 10x on them
 * (callgrind on test_stacked_getleaf[lazy]).
 */
void td__copy_block(char *d, const int64_t *ds, const char *s, const int64_t *ss,
	const int64_t *shape, int nd, size_t isz)
{
	int64_t idx[TD_MAX_DIMS], last, j;
	ptrdiff_t dl, sl;
	size_t row = 0;
	int k, outer;

	if (nd == 0) {
		memcpy(d, s, isz);
		return;
	}
	last = shape[nd - 1];
	dl = (ptrdiff_t)ds[nd - 1];
	sl = (ptrdiff_t)ss[nd - 1];
	if (dl == (ptrdiff_t)isz && sl == (ptrdiff_t)isz)
		row = (size_t)last * isz;
	outer = nd - 1;
	for (k = 0; k < outer; k++)
		idx[k] = 0;
	for (;;) {
		char *dp = d;
		const char *sp = s;

		if (row) {
			memcpy(dp, sp, row);
		} else if (isz == 4) {
			for (j = 0; j < last; j++, dp += dl, sp += sl)
				memcpy(dp, sp, 4);
		} else if (isz == 8) {
			for (j = 0; j < last; j++, dp += dl, sp += sl)
				memcpy(dp, sp, 8);
		} else {
			for (j = 0; j < last; j++, dp += dl, sp += sl)
				memcpy(dp, sp, isz);
		}
		for (k = outer - 1; k >= 0; k--) {
			s += ss[k];
			d += ds[k];
			if (++idx[k] < shape[k])
				break;
			s -= ss[k] * shape[k];
			d -= ds[k] * shape[k];
			idx[k] = 0;
		}
		if (k < 0)
			return;
	}
}

/* Whether a dim of size > 1 has stride 0 (expanded: its elements are written more than once). */
static bool has_zero_stride(const td_tensor *t)
{
	const int64_t *sh = td_tensor_shape(t), *st = td_tensor_strides(t);
	int i;

	for (i = 0; i < t->ndim; i++)
		if (st[i] == 0 && sh[i] > 1)
			return true;
	return false;
}

/* Copy between tensors of one dtype and shape (validated, not overlapping) as one block. */
static int copy_block_same(const td_tensor *dst, const td_tensor *src)
{
	int64_t shape[TD_MAX_DIMS], ds[TD_MAX_DIMS], ss[TD_MAX_DIMS];
	const int64_t *dsh = td_tensor_shape(dst), *dst_st = td_tensor_strides(dst);
	const int64_t *src_st = td_tensor_strides(src);
	size_t isz = td__itemsize(dst->dtype);
	int k, nd;

	if (td__numel(dst->ndim, dsh) == 0)
		return TD_OK;
	for (k = 0; k < dst->ndim; k++) {
		shape[k] = dsh[k];
		ds[k] = dst_st[k] * (int64_t)isz;
		ss[k] = src_st[k] * (int64_t)isz;
	}
	nd = td__coalesce_dims(dst->ndim, shape, ss, ds);
	td__copy_block(td__tensor_ptr(dst), ds, td__tensor_ptr(src), ss, shape, nd, isz);
	return TD_OK;
}

int td__copy_unchecked(const td_tensor *dst, const td_tensor *src, const char *fn)
{
	const int64_t *dsh, *dst_st, *ssh, *src_st;
	int64_t sstrides[TD_MAX_DIMS];
	const int64_t *strides[2];
	char *base[2];
	size_t sizes[2];
	copy_ctx ctx;
	td__iter it;

	td__dims_get(dst, &dsh, &dst_st);
	td__dims_get(src, &ssh, &src_st);
	/* Same dtype, same shape, both dense: one memcpy (most copies). */
	if (dst->dtype == src->dtype && dst->ndim == src->ndim &&
		memcmp(dsh, ssh, (size_t)dst->ndim * sizeof(int64_t)) == 0 &&
		td__is_contiguous(dst->ndim, dsh, dst_st) && td__is_contiguous(src->ndim, ssh, src_st)) {
		size_t bytes = (size_t)td__numel(dst->ndim, dsh) * td__itemsize(dst->dtype);
		if (bytes)
			memmove(td__tensor_ptr(dst), td__tensor_ptr(src), bytes);
		return TD_OK;
	}
	if (dst->dtype == src->dtype && dst->ndim == src->ndim && td__shape_eq(dsh, ssh, dst->ndim) &&
		!has_zero_stride(dst))
		return copy_block_same(dst, src);
	TD_TRY(td__broadcast_strides(src, dst->ndim, dsh, sstrides, fn));
	base[0] = td__tensor_ptr(dst);
	base[1] = td__tensor_ptr(src);
	strides[0] = dst_st;
	strides[1] = sstrides;
	sizes[0] = td__itemsize(dst->dtype);
	sizes[1] = td__itemsize(src->dtype);
	ctx.dt = dst->dtype;
	ctx.st = src->dtype;
	td__iter_init(&it, dst->ndim, dsh, 2, base, strides, sizes);
	td__iter_run(&it, copy_loop, &ctx);
	return TD_OK;
}

int td_tensor_copy(td_tensor *dst, const td_tensor *src)
{
	static const char fn[] = "td_tensor_copy";
	td_tensor tmp;
	int rc;

	TD_TRY(td__tensor_check_write(dst, fn, "the destination"));
	TD_TRY(td__tensor_check_read(src, fn, "the source"));
	/* A view copied onto itself changes nothing (torch's copy_ returns at once). */
	if (td__same_view(dst, src))
		return TD_OK;
	if (!td__tensor_overlap(dst, src))
		return td__copy_unchecked(dst, src, fn);
	/* Overlapping views of one buffer: go through a private copy. */
	TD_TRY(td_tensor_clone(&tmp, src));
	rc = td__copy_unchecked(dst, &tmp, fn);
	td_tensor_release(&tmp);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Fill                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct fill_ctx {
	unsigned char value[16];
	size_t size;
} fill_ctx;

#define FILL_LOOP(T) \
	do { \
		T v; \
		int64_t i; \
		memcpy(&v, c->value, sizeof(T)); \
		for (i = 0; i < n; i++) \
			memcpy(p[0] + i * s[0], &v, sizeof(T)); \
	} while (0)

static void fill_loop(char *const *p, const int64_t *s, int64_t n, void *ctx)
{
	const fill_ctx *c = ctx;

	switch (c->size) {
	case 1:
		if (s[0] == 1) {
			memset(p[0], c->value[0], (size_t)n);
			return;
		}
		FILL_LOOP(uint8_t);
		break;
	case 2:
		FILL_LOOP(uint16_t);
		break;
	case 4:
		FILL_LOOP(uint32_t);
		break;
	case 8:
		FILL_LOOP(uint64_t);
		break;
	default:
		FILL_LOOP(td__cf64);
		break;
	}
}

int td__fill_unchecked(const td_tensor *t, td_scalar value)
{
	const int64_t *strides[1] = { td_tensor_strides(t) };
	char *base[1] = { td__tensor_ptr(t) };
	size_t sizes[1] = { td__itemsize(t->dtype) };
	fill_ctx ctx;
	td__iter it;

	memset(&ctx, 0, sizeof(ctx));
	ctx.size = sizes[0];
	td__scalar_store(ctx.value, t->dtype, value);
	td__iter_init(&it, t->ndim, td_tensor_shape(t), 1, base, strides, sizes);
	td__iter_run(&it, fill_loop, &ctx);
	return TD_OK;
}

int td_tensor_fill(td_tensor *t, td_scalar value)
{
	TD_TRY(td__tensor_check_write(t, "td_tensor_fill", "the tensor"));
	TD_TRY(td__scalar_check(value, "td_tensor_fill"));
	return td__fill_unchecked(t, value);
}

int td_tensor_zero(td_tensor *t)
{
	TD_TRY(td__tensor_check_write(t, "td_tensor_zero", "the tensor"));
	if (td__is_contiguous(t->ndim, td_tensor_shape(t), td_tensor_strides(t))) {
		memset(td__tensor_ptr(t), 0,
			(size_t)td__numel(t->ndim, td_tensor_shape(t)) * td__itemsize(t->dtype));
		return TD_OK;
	}
	return td__fill_unchecked(t, td_scalar_int(0));
}

/* ------------------------------------------------------------------------ */
/* Contiguous, clone, to_dtype                                               */
/* ------------------------------------------------------------------------ */

static int copy_into_new(td_tensor *out, const td_tensor *t, td_dtype dtype, const char *fn)
{
	const int64_t *sh = td_tensor_shape(t);
	td_tensor tmp;

	TD_TRY(td__tensor_alloc_like(&tmp, t, dtype, fn));
	if (dtype == t->dtype && td__is_contiguous(t->ndim, sh, td_tensor_strides(t)))
		memcpy(td__tensor_ptr(&tmp), td__tensor_ptr(t),
			td__numel(t->ndim, sh) * td__itemsize(dtype));
	else
		td__copy_unchecked(&tmp, t, fn);
	td__tensor_assign(out, t, &tmp);
	return TD_OK;
}

int td_tensor_contiguous(td_tensor *out, const td_tensor *t)
{
	static const char fn[] = "td_tensor_contiguous";

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	/* A contiguous tensor is returned as is: only what the reference needs
	 * is checked (its data is not touched here). */
	if (TD_LIKELY(t && t->buffer && (unsigned)t->ndim <= TD_MAX_DIMS &&
			(unsigned)t->dtype < TD_DTYPE_COUNT && t->offset >= 0 &&
			(!td__dims_ext(t->ndim) || t->dims_.ext) &&
			td__is_contiguous(t->ndim, td_tensor_shape(t), td_tensor_strides(t)))) {
		if (out != t)
			td_tensor_ref(out, t);
		return TD_OK;
	}
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	TD_TRY(td__tensor_check_read(t, fn, "the tensor"));
	return copy_into_new(out, t, t->dtype, fn);
}

int td__tensor_clone_valid(td_tensor *out, const td_tensor *t, const char *fn)
{
	if (TD_UNLIKELY(!td__buffer_host(t->buffer)))
		return td__error(TD_ENOTSUP,
			"%s: a tensor is in device memory; the CPU cannot copy "
			"it",
			fn);
	return copy_into_new(out, t, t->dtype, fn);
}

int td_tensor_clone(td_tensor *out, const td_tensor *t)
{
	static const char fn[] = "td_tensor_clone";

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(td__tensor_check_read(t, fn, "the tensor"));
	return copy_into_new(out, t, t->dtype, fn);
}

int td_tensor_to_dtype(td_tensor *out, const td_tensor *t, td_dtype dtype)
{
	static const char fn[] = "td_tensor_to_dtype";

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	if (!td_dtype_is_valid((int)dtype))
		return td__error(TD_EINVAL, "%s: invalid dtype %d", fn, (int)dtype);
	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	if (dtype == t->dtype) {
		if (out != t)
			td_tensor_ref(out, t);
		return TD_OK;
	}
	TD_TRY(td__tensor_check_read(t, fn, "the tensor"));
	return copy_into_new(out, t, dtype, fn);
}

/* ------------------------------------------------------------------------ */
/* Stack and cat                                                             */
/* ------------------------------------------------------------------------ */

static int join_check(const td_tensor *tensors, size_t n, td_dtype *dtype, const char *fn)
{
	size_t i;

	if (!tensors || n == 0)
		return td__error(TD_EINVAL, "%s: no tensors to join", fn);
	for (i = 0; i < n; i++) {
		if (TD_UNLIKELY(td__tensor_check_read(&tensors[i], fn, "a tensor") < 0)) {
			/* Name the culprit: format only on this path. */
			char what[48];
			snprintf(what, sizeof(what), "tensor %zu", i);
			return td__tensor_check_read(&tensors[i], fn, what);
		}
		*dtype = i == 0 ? tensors[0].dtype : td_dtype_promote(*dtype, tensors[i].dtype);
	}
	return TD_OK;
}

static int shape_mismatch(const td_tensor *a, const td_tensor *b, size_t i, const char *fn)
{
	char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];

	return td__error(TD_ETYPE, "%s: tensor %zu has shape %s, tensor 0 has %s", fn, i,
		td__format_shape(s1, sizeof(s1), b->ndim, td_tensor_shape(b)),
		td__format_shape(s2, sizeof(s2), a->ndim, td_tensor_shape(a)));
}

/*
 * Store a joined result. `out` may alias any of the inputs (only read
 * before this point): that input's reference is then released.
 */
static void join_assign(td_tensor *out, const td_tensor *tensors, size_t n, td_tensor *tmp)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (out == &tensors[i]) {
			td_tensor_release(out);
			break;
		}
	}
	td__tensor_copy_meta(out, tmp);
}

/*
 * Join contiguous inputs of the result's dtype with memcpy: along dim d
 * the result is `outer` repetitions of each input's block of `inner[i]`
 * bytes side by side (stack and cat alike). False when an input does not
 * qualify; the strided path then does the work.
 */
static bool join_contiguous(const td_tensor *res, const td_tensor *tensors, size_t n, int d)
{
	size_t size = td__itemsize(res->dtype), i;
	const int64_t *sh, *st;
	int64_t outer = 1, o;
	char *dst = td__tensor_ptr(res);
	int k;

	for (i = 0; i < n; i++) {
		td__dims_get(&tensors[i], &sh, &st);
		if (tensors[i].dtype != res->dtype || !td__is_contiguous(tensors[i].ndim, sh, st))
			return false;
	}
	sh = td_tensor_shape(res);
	for (k = 0; k < d; k++)
		outer *= sh[k];
	for (o = 0; o < outer; o++) {
		for (i = 0; i < n; i++) {
			int64_t inner = 1;
			size_t bytes;

			sh = td_tensor_shape(&tensors[i]);
			for (k = d; k < tensors[i].ndim; k++)
				inner *= sh[k];
			bytes = (size_t)inner * size;
			if (bytes)
				memcpy(dst, td__tensor_ptr(&tensors[i]) + (size_t)o * bytes, bytes);
			dst += bytes;
		}
	}
	return true;
}

int td_tensor_stack(td_tensor *out, const td_tensor *tensors, size_t n, int dim)
{
	static const char fn[] = "td_tensor_stack";
	int64_t shape[TD_MAX_DIMS];
	const int64_t *sh0;
	td_tensor tmp, slot;
	td_dtype dtype;
	bool fast;
	size_t i;
	int d, k, rc;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(join_check(tensors, n, &dtype, fn));
	if (tensors[0].ndim >= TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: the result would exceed %d dims", fn, TD_MAX_DIMS);
	if (n > (size_t)INT64_MAX)
		return td__error(TD_EOVERFLOW, "%s: too many tensors", fn);
	TD_TRY(td__wrap_dim(dim, tensors[0].ndim + 1, &d, fn));
	sh0 = td_tensor_shape(&tensors[0]);
	for (i = 1; i < n; i++) {
		if (tensors[i].ndim != tensors[0].ndim ||
			!td__shape_eq(td_tensor_shape(&tensors[i]), sh0, tensors[0].ndim))
			return shape_mismatch(&tensors[0], &tensors[i], i, fn);
	}
	for (k = 0, i = 0; k <= tensors[0].ndim; k++)
		shape[k] = k == d ? (int64_t)n : sh0[i++];
	TD_TRY(td__tensor_alloc(&tmp, dtype, tensors[0].ndim + 1, shape, false, fn));
	fast = join_contiguous(&tmp, tensors, n, d);
	if (!fast) {
		/* Tensor i goes to tmp[..., i, ...]: one view moved along dim d. */
		rc = td__view_select(&slot, &tmp, d, 0, fn);
		if (rc < 0) {
			td_tensor_release(&tmp);
			return rc;
		}
		for (i = 0; i < n; i++) {
			slot.offset = (int64_t)i * td_tensor_strides(&tmp)[d];
			td__copy_unchecked(&slot, &tensors[i], fn);
		}
		td_tensor_release(&slot);
	}
	join_assign(out, tensors, n, &tmp);
	return TD_OK;
}

int td_tensor_cat(td_tensor *out, const td_tensor *tensors, size_t n, int dim)
{
	static const char fn[] = "td_tensor_cat";
	int64_t shape[TD_MAX_DIMS], total = 0, pos = 0;
	td_tensor tmp, slot;
	td_dtype dtype;
	bool fast;
	size_t i;
	int d, k, rc;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(join_check(tensors, n, &dtype, fn));
	if (tensors[0].ndim == 0)
		return td__error(TD_EINVAL, "%s: 0-d tensors cannot be concatenated", fn);
	TD_TRY(td__wrap_dim(dim, tensors[0].ndim, &d, fn));
	for (i = 0; i < n; i++) {
		const td_tensor *t = &tensors[i];
		if (t->ndim != tensors[0].ndim)
			return shape_mismatch(&tensors[0], t, i, fn);
		for (k = 0; k < t->ndim; k++)
			if (k != d && td_tensor_shape(t)[k] != td_tensor_shape(&tensors[0])[k])
				return shape_mismatch(&tensors[0], t, i, fn);
		if (!td__add_i64(total, td_tensor_shape(t)[d], &total))
			return td__error(TD_EOVERFLOW, "%s: result is too large", fn);
	}
	memcpy(shape, td_tensor_shape(&tensors[0]), (size_t)tensors[0].ndim * sizeof(int64_t));
	shape[d] = total;
	TD_TRY(td__tensor_alloc(&tmp, dtype, tensors[0].ndim, shape, false, fn));
	fast = join_contiguous(&tmp, tensors, n, d);
	if (!fast) {
		/* Tensor i goes to the rows of tmp along dim d after those of tensors 0..i-1. */
		slot = tmp;
		rc = td__tensor_dims_own(&slot, fn);
		if (rc < 0) {
			td_tensor_release(&tmp);
			return rc;
		}
		for (i = 0; i < n; i++) {
			td__shape_w(&slot)[d] = td_tensor_shape(&tensors[i])[d];
			slot.offset = pos * td_tensor_strides(&tmp)[d];
			pos += td_tensor_shape(&tensors[i])[d];
			if (td_tensor_shape(&slot)[d] > 0)
				td__copy_unchecked(&slot, &tensors[i], fn);
		}
		td__dims_unref(&slot);
	}
	join_assign(out, tensors, n, &tmp);
	return TD_OK;
}
