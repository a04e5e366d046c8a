/* SPDX-License-Identifier: MIT */
/*
 * strings.c - arrays of strings (TD_VALUE_STRINGS, tensordict's
 * NonTensorStack) and the single-string and bytes values they relate to.
 *
 * An array lives in one heap buffer: its td_strings header (a value points
 * to it), numel + 1 offsets (uint64), its numbers (below), then the texts,
 * each followed by a NUL. It is immutable, so copies of a dict share it. A
 * batch operation on an array is the same tensor operation applied to its
 * *numbers*: an int64 tensor of the array's shape holding 0..numel-1, kept
 * in the buffer so that it is a view made in constant time (indexing one
 * row of a large array costs one row, not the array). The operation gives a tensor of numbers (a view, a gather, a
 * stack of the numbers of several arrays), and the result array is gathered
 * from it. Every tensor operation of the batch machinery thus applies to
 * strings without a string version of each.
 */
#include "td_internal.h"
#include "dict_impl.h"

/* ------------------------------------------------------------------------ */
/* Texts                                                                     */
/* ------------------------------------------------------------------------ */

bool td__utf8_valid(const unsigned char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned c = s[i];
		size_t n;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, cp = c & 0x07;
		else
			return false;
		if (len - i <= n)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
			(cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

int td__blob_make(td_value *v, const void *data, size_t length, bool string, const char *fn)
{
	td_buffer *b;

	if (length == SIZE_MAX)
		return td__error(TD_EOVERFLOW, "%s: value too long", fn);
	TD_TRY(td_buffer_new(&b, length + 1, 0));
	if (length)
		memcpy(td_buffer_data(b), data, length);
	((char *)td_buffer_data(b))[length] = '\0';
	v->kind = string ? TD_VALUE_STRING : TD_VALUE_BYTES;
	v->blob.buffer = b;
	v->blob.data = td_buffer_data(b);
	v->blob.length = length;
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Arrays                                                                    */
/* ------------------------------------------------------------------------ */

const char *td_strings_at(size_t *length_out, const td_strings *s, int64_t i)
{
	if (!s || i < 0 || i >= s->numel)
		return NULL;
	if (length_out)
		*length_out = (size_t)(s->offsets[i + 1] - s->offsets[i] - 1);
	return s->bytes + s->offsets[i];
}

/* Check a shape and compute its element count. */
static int check_shape(int ndim, const int64_t *shape, int64_t *numel, const char *fn)
{
	int64_t n = 1;
	int i;

	if (ndim < 1 || ndim > TD_MAX_DIMS || !shape)
		return td__error(TD_EINVAL, "%s: an array of strings has 1 to %d dims (got %d)", fn,
			TD_MAX_DIMS, ndim);
	for (i = 0; i < ndim; i++) {
		if (shape[i] < 0)
			return td__error(TD_EINVAL, "%s: negative size %lld at dim %d", fn, (long long)shape[i],
				i);
		if (!td__mul_i64(n, shape[i], &n))
			return td__error(TD_EOVERFLOW, "%s: the shape has too many elements", fn);
	}
	*numel = n;
	return TD_OK;
}

/*
 * An array of `numel` strings holding `text_bytes` bytes of text in all:
 * the buffer is made, the header and the numbers filled; the caller writes
 * offsets[0..numel] and the texts. The td_strings header is the start of
 * the buffer (the value points to it), so the buffer's references keep it.
 */
static int alloc_array(td_value *out, int ndim, const int64_t *shape, int64_t numel,
	size_t text_bytes, const char *fn)
{
	size_t head, total;
	td_buffer *b;
	td_strings *s;
	char *base;
	int64_t *num, i;

	_Static_assert(sizeof(td_strings) % sizeof(uint64_t) == 0,
		"the offsets after the header are aligned");
	/* header; offsets: numel + 1 words; numbers: numel words */
	if ((uint64_t)numel >= SIZE_MAX / (2 * sizeof(uint64_t)) ||
		!td__mul_size(2 * (size_t)numel + 1, sizeof(uint64_t), &head) ||
		!td__add_size(head, sizeof(td_strings) + text_bytes, &total))
		return td__error(TD_EOVERFLOW, "%s: %lld strings of %zu bytes do not fit in memory", fn,
			(long long)numel, text_bytes);
	TD_TRY(td_buffer_new(&b, total, 0));
	base = td_buffer_data(b);
	s = (td_strings *)(void *)base;
	base += sizeof(td_strings);
	s->buffer = b;
	s->offsets = (const uint64_t *)(void *)base;
	s->bytes = base + head;
	s->numel = numel;
	s->ndim = ndim;
	memcpy(s->shape, shape, (size_t)ndim * sizeof(int64_t));
	num = (int64_t *)(void *)base + numel + 1;
	for (i = 0; i < numel; i++)
		num[i] = i;
	out->kind = TD_VALUE_STRINGS;
	out->strings = s;
	return TD_OK;
}

int td__strings_new(td_value *out, int ndim, const int64_t *shape, const char *const *texts,
	const size_t *lengths, const char *fn)
{
	size_t bytes = 0, len;
	uint64_t *off;
	char *dst;
	int64_t numel, i;

	TD_TRY(check_shape(ndim, shape, &numel, fn));
	if (numel > 0 && !texts)
		return td__error(TD_EINVAL, "%s: NULL strings", fn);
	for (i = 0; i < numel; i++) {
		if (!texts[i])
			return td__error(TD_EINVAL, "%s: string %lld is NULL", fn, (long long)i);
		len = lengths ? lengths[i] : strlen(texts[i]);
		if (lengths && memchr(texts[i], '\0', len))
			return td__error(TD_EINVAL, "%s: string %lld holds a NUL byte", fn, (long long)i);
		if (!td__utf8_valid((const unsigned char *)texts[i], len))
			return td__error(TD_EINVAL, "%s: string %lld is not valid UTF-8", fn, (long long)i);
		if (!td__add_size(bytes, len, &bytes) || !td__add_size(bytes, 1, &bytes))
			return td__error(TD_EOVERFLOW, "%s: the strings do not fit in memory", fn);
	}
	TD_TRY(alloc_array(out, ndim, shape, numel, bytes, fn));
	off = (uint64_t *)out->strings->offsets;
	dst = (char *)out->strings->bytes;
	off[0] = 0;
	for (i = 0; i < numel; i++) {
		len = lengths ? lengths[i] : strlen(texts[i]);
		memcpy(dst + off[i], texts[i], len);
		dst[off[i] + len] = '\0';
		off[i + 1] = off[i] + len + 1;
	}
	return TD_OK;
}

/* How many strings a value contributes to a gather: an array its elements, a string one. */
static int64_t value_count(const td_value *v)
{
	return v->kind == TD_VALUE_STRINGS ? v->strings->numel : 1;
}

/* String `i` of value `v` (an array, or a single string for any i). */
static const char *value_text(const td_value *v, int64_t i, size_t *len)
{
	if (v->kind == TD_VALUE_STRINGS)
		return td_strings_at(len, v->strings, i);
	*len = v->blob.length;
	return v->blob.data;
}

int td__strings_numbers(td_tensor *out, const td_value *v, int ndim, const int64_t *shape,
	int64_t base, const char *fn)
{
	td_tensor scalar = TD_TENSOR_INIT;
	int64_t *p, i;
	int rc;

	if (v->kind == TD_VALUE_STRINGS) {
		const td_strings *s = v->strings;

		if (base == 0) /* a view of the numbers kept in the array's buffer */
			return td_tensor_from_buffer(out, s->buffer, TD_DTYPE_I64, s->ndim, s->shape, NULL,
				(int64_t)(sizeof(td_strings) / sizeof(int64_t)) + s->numel + 1);
		TD_TRY(td_tensor_empty(out, TD_DTYPE_I64, s->ndim, s->shape));
		p = td_tensor_data(out);
		for (i = 0; i < s->numel; i++)
			p[i] = base + i;
		return TD_OK;
	}
	if (v->kind != TD_VALUE_STRING)
		return td__error(TD_ETYPE, "%s: bytes cannot be joined with strings", fn);
	/* A single string stands for every element of `shape`. */
	TD_TRY(td_tensor_full(&scalar, TD_DTYPE_I64, 0, NULL, td_scalar_int(base)));
	rc = td_tensor_expand(out, &scalar, ndim, shape);
	td_tensor_release(&scalar);
	return rc;
}

/* The source whose numbers [base[k], base[k + 1]) hold `x`: a binary search. */
static size_t source_of(const int64_t *base, size_t nsrc, int64_t x)
{
	size_t lo = 0, hi = nsrc - 1;

	while (lo < hi) {
		size_t mid = lo + (hi - lo + 1) / 2;

		if (x >= base[mid])
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

int td__strings_gather(td_value *out, const td_value *const *srcs, size_t nsrc,
	const td_tensor *numbers, const char *fn)
{
	td_tensor flat = TD_TENSOR_INIT;
	int64_t total = 0, numel, i, *base = NULL;
	const int64_t *num;
	size_t bytes = 0, len, k;
	uint64_t *off;
	char *dst;
	int rc;

	if (nsrc == 0 || numbers->dtype != TD_DTYPE_I64)
		return td__error(TD_EINVAL, "%s: no strings to gather from", fn);
	base = td__malloc((nsrc + 1) * sizeof(*base));
	if (!base)
		return td__error_nomem((nsrc + 1) * sizeof(*base));
	for (k = 0; k < nsrc; k++) {
		base[k] = total;
		total += value_count(srcs[k]);
	}
	base[nsrc] = total;
	rc = td_tensor_contiguous(&flat, numbers);
	if (rc < 0)
		goto out;
	num = td_tensor_data(&flat);
	numel = td_tensor_numel(&flat);
	for (i = 0; i < numel; i++) {
		if (num[i] < 0 || num[i] >= total) {
			rc = td__error(TD_EINVAL, "%s: string number %lld out of range", fn, (long long)num[i]);
			goto out;
		}
	}
	for (i = 0; i < numel; i++) {
		k = source_of(base, nsrc, num[i]);
		value_text(srcs[k], num[i] - base[k], &len);
		if (!td__add_size(bytes, len + 1, &bytes)) {
			rc = td__error(TD_EOVERFLOW, "%s: the strings do not fit in memory", fn);
			goto out;
		}
	}
	if (flat.ndim == 0) {
		const char *s;

		k = source_of(base, nsrc, num[0]);
		s = value_text(srcs[k], num[0] - base[k], &len);
		rc = td__blob_make(out, s, len, true, fn);
		goto out;
	}
	rc = alloc_array(out, flat.ndim, td_tensor_shape(&flat), numel, bytes, fn);
	if (rc < 0)
		goto out;
	off = (uint64_t *)out->strings->offsets;
	dst = (char *)out->strings->bytes;
	off[0] = 0;
	for (i = 0; i < numel; i++) {
		const char *s;

		k = source_of(base, nsrc, num[i]);
		s = value_text(srcs[k], num[i] - base[k], &len);
		memcpy(dst + off[i], s, len + 1);
		off[i + 1] = off[i] + len + 1;
	}
out:
	td_tensor_release(&flat);
	td__free(base);
	return rc;
}

int td__strings_transform(td_value *out, const td_value *in, td__leaf_fn fn, void *ctx,
	const char *name)
{
	td_tensor num = TD_TENSOR_INIT, res = TD_TENSOR_INIT;
	int rc;

	TD_TRY(td__strings_numbers(&num, in, 0, NULL, 0, name));
	rc = fn(&res, &num, ctx);
	td_tensor_release(&num);
	if (rc < 0)
		return rc;
	rc = td__strings_gather(out, &in, 1, &res, name);
	td_tensor_release(&res);
	return rc;
}

/* Whether every element of array `a` equals the text s[0..len). */
static bool all_equal_to(const td_strings *a, const char *s, size_t len)
{
	int64_t i;
	size_t l;

	for (i = 0; i < a->numel; i++) {
		const char *t = td_strings_at(&l, a, i);
		if (l != len || memcmp(t, s, len) != 0)
			return false;
	}
	return true;
}

bool td__text_values_equal(const td_value *a, const td_value *b)
{
	const td_strings *x, *y;

	if (a->kind != TD_VALUE_STRINGS && b->kind != TD_VALUE_STRINGS)
		return a->kind == b->kind && a->blob.length == b->blob.length &&
			memcmp(a->blob.data, b->blob.data, a->blob.length) == 0;
	if (a->kind != TD_VALUE_STRINGS)
		return a->kind == TD_VALUE_STRING && all_equal_to(b->strings, a->blob.data, a->blob.length);
	if (b->kind != TD_VALUE_STRINGS)
		return b->kind == TD_VALUE_STRING && all_equal_to(a->strings, b->blob.data, b->blob.length);
	x = a->strings;
	y = b->strings;
	if (x->ndim != y->ndim || !td__shape_eq(x->shape, y->shape, x->ndim))
		return false;
	/* Equal offsets and equal bytes: the texts are laid out the same way. */
	return memcmp(x->offsets, y->offsets, ((size_t)x->numel + 1) * sizeof(uint64_t)) == 0 &&
		memcmp(x->bytes, y->bytes, (size_t)x->offsets[x->numel]) == 0;
}
