/* SPDX-License-Identifier: MIT */
/*
 * dtype.c - the dtype table (sizes; tensordict, numpy, safetensors and
 * DLPack names), promotion, and exact float16/bfloat16 conversions.
 */
#include "td_internal.h"
#include "tensor_impl.h"

typedef struct dtype_info {
	const char *name;
	const char *torch;
	const char *numpy;
	const char *safetensors;
	uint8_t size;
	uint8_t category;
	uint8_t dl_code;
	uint8_t dl_bits;
} dtype_info;

/* DLPack type codes (dlpack.h, DLDataTypeCode). */
enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BFLOAT = 4, DL_COMPLEX = 5, DL_BOOL = 6 };

static const dtype_info dtypes[TD_DTYPE_COUNT] = {
	[TD_DTYPE_BOOL] = { "bool", "torch.bool", "|b1", "BOOL", 1, TD_CATEGORY_BOOL, DL_BOOL, 8 },
	[TD_DTYPE_U8] = { "uint8", "torch.uint8", "|u1", "U8", 1, TD_CATEGORY_UINT, DL_UINT, 8 },
	[TD_DTYPE_I8] = { "int8", "torch.int8", "|i1", "I8", 1, TD_CATEGORY_INT, DL_INT, 8 },
	[TD_DTYPE_I16] = { "int16", "torch.int16", "<i2", "I16", 2, TD_CATEGORY_INT, DL_INT, 16 },
	[TD_DTYPE_I32] = { "int32", "torch.int32", "<i4", "I32", 4, TD_CATEGORY_INT, DL_INT, 32 },
	[TD_DTYPE_I64] = { "int64", "torch.int64", "<i8", "I64", 8, TD_CATEGORY_INT, DL_INT, 64 },
	[TD_DTYPE_U16] = { "uint16", "torch.uint16", "<u2", "U16", 2, TD_CATEGORY_UINT, DL_UINT, 16 },
	[TD_DTYPE_U32] = { "uint32", "torch.uint32", "<u4", "U32", 4, TD_CATEGORY_UINT, DL_UINT, 32 },
	[TD_DTYPE_U64] = { "uint64", "torch.uint64", "<u8", "U64", 8, TD_CATEGORY_UINT, DL_UINT, 64 },
	[TD_DTYPE_F16] = { "float16", "torch.float16", "<f2", "F16", 2, TD_CATEGORY_FLOAT, DL_FLOAT,
		16 },
	[TD_DTYPE_BF16] = { "bfloat16", "torch.bfloat16", NULL, "BF16", 2, TD_CATEGORY_FLOAT, DL_BFLOAT,
		16 },
	[TD_DTYPE_F32] = { "float32", "torch.float32", "<f4", "F32", 4, TD_CATEGORY_FLOAT, DL_FLOAT,
		32 },
	[TD_DTYPE_F64] = { "float64", "torch.float64", "<f8", "F64", 8, TD_CATEGORY_FLOAT, DL_FLOAT,
		64 },
	[TD_DTYPE_C64] = { "complex64", "torch.complex64", "<c8", "C64", 8, TD_CATEGORY_COMPLEX,
		DL_COMPLEX, 64 },
	[TD_DTYPE_C128] = { "complex128", "torch.complex128", "<c16", NULL, 16, TD_CATEGORY_COMPLEX,
		DL_COMPLEX, 128 },
};

/* Accepted aliases (torch attribute names and their "torch." forms). */
static const struct {
	const char *name;
	td_dtype dtype;
} aliases[] = {
	{ "float", TD_DTYPE_F32 },
	{ "double", TD_DTYPE_F64 },
	{ "half", TD_DTYPE_F16 },
	{ "long", TD_DTYPE_I64 },
	{ "int", TD_DTYPE_I32 },
	{ "short", TD_DTYPE_I16 },
	{ "cfloat", TD_DTYPE_C64 },
	{ "cdouble", TD_DTYPE_C128 },
};

/* Known types tdstore deliberately does not support. */
static const char *const unsupported[] = {
	"complex32",
	"chalf",
	"qint8",
	"quint8",
	"qint32",
	"quint4x2",
	"quint2x4",
	"float8_e4m3fn",
	"float8_e5m2",
	"float8_e4m3fnuz",
	"float8_e5m2fnuz",
	"float8_e8m0fnu",
	"F8_E4M3",
	"F8_E5M2",
	"F8_E8M0",
	"F4",
	"F6_E2M3",
	"F6_E3M2",
};

bool td_dtype_is_valid(int dtype)
{
	return dtype >= 0 && dtype < TD_DTYPE_COUNT;
}

size_t td_dtype_size(td_dtype dtype)
{
	return td_dtype_is_valid((int)dtype) ? dtypes[dtype].size : 0;
}

td_category td_dtype_category(td_dtype dtype)
{
	return td_dtype_is_valid((int)dtype) ? (td_category)dtypes[dtype].category : TD_CATEGORY_BOOL;
}

const char *td_dtype_name(td_dtype dtype)
{
	return td_dtype_is_valid((int)dtype) ? dtypes[dtype].name : "invalid";
}

const char *td_dtype_torch_name(td_dtype dtype)
{
	return td_dtype_is_valid((int)dtype) ? dtypes[dtype].torch : NULL;
}

const char *td_dtype_numpy_name(td_dtype dtype)
{
	return td_dtype_is_valid((int)dtype) ? dtypes[dtype].numpy : NULL;
}

const char *td_dtype_safetensors_name(td_dtype dtype)
{
	return td_dtype_is_valid((int)dtype) ? dtypes[dtype].safetensors : NULL;
}

static int match_numpy(td_dtype *out, const char *name)
{
	int i;

	/* "<f4" is canonical; "=f4" (native) and "|u1" are the same on little-endian. */
	if (name[0] != '<' && name[0] != '=' && name[0] != '|')
		return 0;
	for (i = 0; i < TD_DTYPE_COUNT; i++) {
		const char *np = dtypes[i].numpy;
		if (np && strcmp(np + 1, name + 1) == 0) {
			*out = (td_dtype)i;
			return 1;
		}
	}
	return 0;
}

int td_dtype_from_name(td_dtype *out, const char *name)
{
	const char *bare;
	size_t i;

	if (!out || !name)
		return td__error(TD_EINVAL, "td_dtype_from_name: NULL argument");
	bare = strncmp(name, "torch.", 6) == 0 ? name + 6 : name;
	for (i = 0; i < TD_DTYPE_COUNT; i++) {
		if (strcmp(bare, dtypes[i].name) == 0 ||
			(bare == name && dtypes[i].safetensors && strcmp(name, dtypes[i].safetensors) == 0)) {
			*out = (td_dtype)i;
			return TD_OK;
		}
	}
	for (i = 0; i < TD_ARRAY_SIZE(aliases); i++) {
		if (strcmp(bare, aliases[i].name) == 0) {
			*out = aliases[i].dtype;
			return TD_OK;
		}
	}
	if (bare == name && match_numpy(out, name))
		return TD_OK;
	if (name[0] == '>' && name[1] != '\0' && strcmp(name + 1, "b1") != 0)
		return td__error(TD_ENOTSUP, "dtype '%s': big-endian data is not supported", name);
	for (i = 0; i < TD_ARRAY_SIZE(unsupported); i++)
		if (strcmp(bare, unsupported[i]) == 0)
			return td__error(TD_ENOTSUP, "dtype '%s' is not supported", name);
	return td__error(TD_EINVAL, "unknown dtype '%s'", name);
}

int td_dtype_to_dlpack(uint8_t *code_out, uint8_t *bits_out, td_dtype dtype)
{
	if (!td_dtype_is_valid((int)dtype) || !code_out || !bits_out)
		return td__error(TD_EINVAL, "td_dtype_to_dlpack: invalid dtype or NULL output");
	*code_out = dtypes[dtype].dl_code;
	*bits_out = dtypes[dtype].dl_bits;
	return TD_OK;
}

int td_dtype_from_dlpack(td_dtype *out, uint8_t code, uint8_t bits, uint16_t lanes)
{
	int i;

	if (!out)
		return td__error(TD_EINVAL, "td_dtype_from_dlpack: NULL output");
	if (lanes != 1)
		return td__error(TD_ENOTSUP, "DLPack type with %u lanes is not supported", lanes);
	for (i = 0; i < TD_DTYPE_COUNT; i++) {
		if (dtypes[i].dl_code == code && dtypes[i].dl_bits == bits) {
			*out = (td_dtype)i;
			return TD_OK;
		}
	}
	/* Older producers describe bool as an 8-bit unsigned integer. */
	return td__error(TD_ENOTSUP, "DLPack type code %u with %u bits is not supported", code, bits);
}

static td_dtype int_of_size(size_t size)
{
	switch (size) {
	case 1:
		return TD_DTYPE_I8;
	case 2:
		return TD_DTYPE_I16;
	case 4:
		return TD_DTYPE_I32;
	default:
		return TD_DTYPE_I64;
	}
}

td_dtype td_dtype_promote(td_dtype a, td_dtype b)
{
	td_category ca, cb;

	if (!td_dtype_is_valid((int)a) || !td_dtype_is_valid((int)b))
		return a;
	if (a == b)
		return a;
	ca = (td_category)dtypes[a].category;
	cb = (td_category)dtypes[b].category;
	if (ca < cb || (ca == cb && dtypes[a].size < dtypes[b].size)) {
		td_dtype t = a;
		a = b;
		b = t;
		ca = (td_category)dtypes[a].category;
		cb = (td_category)dtypes[b].category;
	}
	/* Now a is the "higher" type. */
	switch (ca) {
	case TD_CATEGORY_COMPLEX:
		/* complex64 with float64 needs complex128 to keep the precision. */
		if (a == TD_DTYPE_C64 && b == TD_DTYPE_F64)
			return TD_DTYPE_C128;
		return a;
	case TD_CATEGORY_FLOAT:
		if ((a == TD_DTYPE_F16 && b == TD_DTYPE_BF16) || (a == TD_DTYPE_BF16 && b == TD_DTYPE_F16))
			return TD_DTYPE_F32;
		return a;
	case TD_CATEGORY_INT:
		if (cb == TD_CATEGORY_UINT && dtypes[b].size >= dtypes[a].size)
			return int_of_size(dtypes[b].size * 2);
		return a;
	default:
		return a;
	}
}

/* ------------------------------------------------------------------------ */
/* 16-bit floats                                                             */
/* ------------------------------------------------------------------------ */

static inline uint32_t float_bits(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
	return x;
}

static inline float bits_float(uint32_t x)
{
	float f;
	memcpy(&f, &x, sizeof(f));
	return f;
}

float td_f16_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;

	if (exp == 0) {
		if (man == 0)
			return bits_float(sign);
		/* Subnormal: normalize into a float32 normal number. */
		exp = 113;
		while (!(man & 0x400u)) {
			man <<= 1;
			exp--;
		}
		man &= 0x3ffu;
		return bits_float(sign | (exp << 23) | (man << 13));
	}
	if (exp == 31)
		return bits_float(sign | 0x7f800000u | (man << 13));
	return bits_float(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t td_float_to_f16(float f)
{
	uint32_t x = float_bits(f);
	uint32_t sign = (x >> 16) & 0x8000u;
	uint32_t absx = x & 0x7fffffffu;
	uint32_t r, rem;

	if (absx >= 0x7f800000u) {
		if (absx > 0x7f800000u) /* NaN: keep it quiet and keep top payload bits */
			return (uint16_t)(sign | 0x7e00u | ((absx >> 13) & 0x3ffu));
		return (uint16_t)(sign | 0x7c00u);
	}
	if (absx >= 0x477ff000u) /* >= 65520 rounds to infinity */
		return (uint16_t)(sign | 0x7c00u);
	if (absx < 0x38800000u) { /* below 2^-14: a half subnormal or zero */
		uint32_t e = absx >> 23, m, shift, half;

		if (absx < 0x33000000u) /* below 2^-25: rounds to zero */
			return (uint16_t)sign;
		m = (absx & 0x7fffffu) | 0x800000u;
		shift = 126 - e;
		r = m >> shift;
		rem = m & ((1u << shift) - 1);
		half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	r = (absx - 0x38000000u) >> 13;
	rem = absx & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (r & 1)))
		r++;
	return (uint16_t)(sign | r);
}

float td_bf16_to_float(uint16_t b)
{
	return bits_float((uint32_t)b << 16);
}

uint16_t td_float_to_bf16(float f)
{
	uint32_t x = float_bits(f);

	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u);
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

const uint8_t td__dtype_sizes[TD_DTYPE_COUNT] = {
	[TD_DTYPE_BOOL] = 1,
	[TD_DTYPE_U8] = 1,
	[TD_DTYPE_I8] = 1,
	[TD_DTYPE_I16] = 2,
	[TD_DTYPE_I32] = 4,
	[TD_DTYPE_I64] = 8,
	[TD_DTYPE_U16] = 2,
	[TD_DTYPE_U32] = 4,
	[TD_DTYPE_U64] = 8,
	[TD_DTYPE_F16] = 2,
	[TD_DTYPE_BF16] = 2,
	[TD_DTYPE_F32] = 4,
	[TD_DTYPE_F64] = 8,
	[TD_DTYPE_C64] = 8,
	[TD_DTYPE_C128] = 16,
};
