/* SPDX-License-Identifier: MIT */
/*
 * tdstore/dtype.h - element types, their names in tensordict, numpy,
 * safetensors and DLPack, type promotion, and the 16-bit float helpers.
 */
#ifndef TDSTORE_DTYPE_H
#define TDSTORE_DTYPE_H

#include "common.h"

TD_BEGIN_DECLS

/**
 * Element types. The values are stable (they are also the codes of the
 * on-disk format) and are never reused.
 */
typedef enum td_dtype {
	TD_DTYPE_BOOL = 0, /**< 1 byte, 0 or 1 */
	TD_DTYPE_U8 = 1,
	TD_DTYPE_I8 = 2,
	TD_DTYPE_I16 = 3,
	TD_DTYPE_I32 = 4,
	TD_DTYPE_I64 = 5,
	TD_DTYPE_U16 = 6,
	TD_DTYPE_U32 = 7,
	TD_DTYPE_U64 = 8,
	TD_DTYPE_F16 = 9,   /**< IEEE 754 binary16 */
	TD_DTYPE_BF16 = 10, /**< bfloat16: the upper 16 bits of a float32 */
	TD_DTYPE_F32 = 11,
	TD_DTYPE_F64 = 12,
	TD_DTYPE_C64 = 13,  /**< complex64: two float32, real then imaginary */
	TD_DTYPE_C128 = 14, /**< complex128: two float64 */
	TD_DTYPE_COUNT = 15
} td_dtype;

/** Broad families of element types, in promotion order. */
typedef enum td_category {
	TD_CATEGORY_BOOL = 0,
	TD_CATEGORY_UINT = 1,
	TD_CATEGORY_INT = 2,
	TD_CATEGORY_FLOAT = 3,
	TD_CATEGORY_COMPLEX = 4
} td_category;

/** @return true if `dtype` is one of the td_dtype values. */
TD_API bool td_dtype_is_valid(int dtype);

/** @return the size of one element in bytes, or 0 for an invalid dtype. */
TD_API size_t td_dtype_size(td_dtype dtype);

/** @return the category of `dtype`; TD_CATEGORY_BOOL for an invalid one. */
TD_API td_category td_dtype_category(td_dtype dtype);

/** @return the short name ("float32", "bfloat16", "bool"); "invalid" for an invalid dtype. */
TD_API const char *td_dtype_name(td_dtype dtype);

/** @return tensordict's spelling, str(torch.dtype) ("torch.float32"); NULL for an invalid dtype. */
TD_API const char *td_dtype_torch_name(td_dtype dtype);

/**
 * @return numpy's little-endian type string ("<f4", "|b1", "|u1"); NULL for
 *         bfloat16, which numpy does not define, and for an invalid dtype.
 */
TD_API const char *td_dtype_numpy_name(td_dtype dtype);

/** @return the safetensors dtype ("F32", "BF16", "BOOL"); NULL when safetensors has none (complex128). */
TD_API const char *td_dtype_safetensors_name(td_dtype dtype);

/**
 * Parse a dtype name in any of the spellings above: short ("float32"),
 * tensordict ("torch.float32"), numpy ("<f4", "=f4", "|u1") or
 * safetensors ("F32"). The common aliases "float", "double", "half",
 * "long", "int" (and their "torch." forms) are accepted too.
 *
 * @param[out] out  receives the dtype
 * @param name      NUL-terminated name
 * @return TD_OK; TD_EINVAL if `out` or `name` is NULL or the name is
 *         unknown; TD_ENOTSUP for a known but unsupported type (a
 *         big-endian numpy type, torch.complex32, quantized types)
 */
TD_API int td_dtype_from_name(td_dtype *out, const char *name);

/**
 * The DLPack type of a dtype (code from DLDataTypeCode, bits per lane,
 * one lane).
 *
 * @param[out] code_out  receives kDLInt (0), kDLUInt (1), kDLFloat (2),
 *                       kDLBfloat (4), kDLComplex (5) or kDLBool (6)
 * @param[out] bits_out  receives the number of bits (8 for bool)
 * @param dtype          the dtype
 * @return TD_OK; TD_EINVAL for an invalid dtype or NULL pointers
 */
TD_API int td_dtype_to_dlpack(uint8_t *code_out, uint8_t *bits_out, td_dtype dtype);

/**
 * The dtype of a DLPack type.
 *
 * @param[out] out  receives the dtype
 * @return TD_OK; TD_EINVAL if `out` is NULL; TD_ENOTSUP for a type tdstore
 *         does not have (lanes other than 1, unknown code/bits pairs)
 */
TD_API int td_dtype_from_dlpack(td_dtype *out, uint8_t code, uint8_t bits, uint16_t lanes);

/**
 * The dtype of the result of a binary operation on `a` and `b`, following
 * torch: the higher category wins; within a category the wider type wins;
 * float16 with bfloat16 gives float32; an unsigned integer with a signed one
 * gives the smallest signed type holding both (int64 for uint64, as torch
 * does not define uint64 promotion beyond that).
 *
 * @return the promoted dtype; `a` if either is invalid
 */
TD_API td_dtype td_dtype_promote(td_dtype a, td_dtype b);

/** Convert an IEEE binary16 bit pattern to float (exact). */
TD_API float td_f16_to_float(uint16_t h);
/** Convert a float to binary16, rounding to nearest even; overflow gives infinity, NaN stays NaN. */
TD_API uint16_t td_float_to_f16(float f);
/** Convert a bfloat16 bit pattern to float (exact). */
TD_API float td_bf16_to_float(uint16_t b);
/** Convert a float to bfloat16, rounding to nearest even; NaN stays NaN. */
TD_API uint16_t td_float_to_bf16(float f);

TD_END_DECLS

#endif /* TDSTORE_DTYPE_H */
