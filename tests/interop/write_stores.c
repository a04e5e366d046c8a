/* SPDX-License-Identifier: MIT */
/*
 * write_stores.c - the write half of the tensordict interop check.
 *
 * Usage: write_stores OUTDIR
 *
 * Builds several dicts, writes each with td_store_memmap() into
 * OUTDIR/<store>/, and describes what was written in OUTDIR/expected.json:
 * every nested dict (key path, batch shape) and every leaf (key path, torch
 * dtype name, shape, raw little-endian C-order bytes as hex, or the string).
 * The description is taken from the store's own dict after writing, i.e.
 * from the mapped files, and each mapped tensor is first compared byte for
 * byte with the tensor it was written from.
 *
 * tests/interop/check_tensordict_roundtrip.py runs this program and loads
 * every store with Python tensordict's TensorDict.load_memmap(). Not part of
 * `make check`; see tests/interop/local.mk (`make interop-check`).
 *
 * Stores:
 *   flat          batch [3, 4], one leaf of each of the 15 dtypes
 *   nested        batch [2]; "sub" (batch [2, 5]) holding "deeper"
 *                 (batch [2, 5, 2]); ASCII and non-ASCII string leaves
 *   encoded_keys  keys the file-name encoding has to escape, and names that
 *                 meta.json files use for their own entries; set by path
 *   zero_elem     batch [0], a leaf [0, 3]
 *   zero_inner    batch [2], a leaf [2, 0] beside a normal leaf
 *   noncontig     batch [4], permuted, transposed, narrowed, stepped and
 *                 expanded (stride 0) source tensors
 *   grown         nested, grown from 2 to 7 rows with td_store_grow()
 *   string_lists  batch [3]: arrays of strings (NonTensorStack): "names"
 *                 [3] (one non-ASCII, one empty, one with quotes), "pairs"
 *                 [3, 2] (a dim past the batch), "sub.grid" in a nested dict
 *                 of batch [3, 2]; beside a tensor and a single string
 *   strings_grown string_lists grown from 3 to 5 rows: the new strings are ""
 *
 * Rings (td_ring_create(), then rows added with td_ring_extend() and
 * td_ring_add(), closed and reopened between batches): a nested row
 * template, every value of row `t` derived from its ticket t (ring_row()
 * below; check_tensordict_roundtrip.py recomputes them with torch).
 *   ring           capacity 5, 8 rows: wrapped, slots 0-2 overwritten;
 *                  prioritized (a sum-tree in .tdstore-ring)
 *   ring_unwrapped capacity 8, 5 rows: slots 5-7 never written (zeros)
 *   ring_lapped    capacity 4, one extend of 6 rows (only the last 4
 *                  stored) then one add
 * Their expected values are not read back from the ring: a reference dict
 * of `capacity` rows is built here, slot s holding the last ticket t with
 * t % capacity == s and zeros where no row was written, and the store's
 * mapped files are compared with it before they are described. The entry
 * "ring" of such a store gives the capacity and the number of tickets.
 */
#include <tdstore.h>

#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Exit 1 with tdstore's last error when `rc` is a failure. */
static void check(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "write_stores: %s: %s (%s)\n", what, td_error_last()->message,
			td_strerror(rc));
		exit(1);
	}
}

static void die(const char *what)
{
	fprintf(stderr, "write_stores: %s\n", what);
	exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p)
		die("out of memory");
	return p;
}

static json_t *jcheck(json_t *j)
{
	if (!j)
		die("cannot build JSON (out of memory or invalid UTF-8)");
	return j;
}

static void jappend(json_t *array, json_t *value)
{
	if (json_array_append_new(array, jcheck(value)) < 0)
		die("cannot build JSON array");
}

static void jset(json_t *object, const char *key, json_t *value)
{
	if (json_object_set_new(object, key, jcheck(value)) < 0)
		die("cannot build JSON object");
}

/* ---- building the source dicts ---- */

static td_dict *new_dict(int ndim, const int64_t *shape)
{
	td_dict *d;

	check(td_dict_new(&d, ndim, shape), "td_dict_new");
	return d;
}

/* A key handle of the path parts[0..n) (whose components may hold '.'; owned). */
static td_key *path_key(const char *const *parts, size_t n)
{
	td_key *k;

	check(td_key_from_path(&k, parts, n), "td_key_from_path");
	return k;
}

/* d[parts] = a copy of `data` (C order). */
static void put_path(td_dict *d, const char *const *parts, size_t n, td_dtype dtype, int ndim,
	const int64_t *shape, const void *data)
{
	td_key *k = path_key(parts, n);
	td_tensor t;

	check(td_tensor_from_data(&t, dtype, ndim, shape, data), "td_tensor_from_data");
	check(td_dict_set_tensor_take_key(d, k, &t), parts[n - 1]);
	td_key_free(k);
}

static void put(td_dict *d, const char *key, td_dtype dtype, int ndim, const int64_t *shape,
	const void *data)
{
	put_path(d, &key, 1, dtype, ndim, shape, data);
}

/* d[key] = float32 `data` converted to `dtype` (float16, bfloat16). */
static void put_converted(td_dict *d, const char *key, td_dtype dtype, int ndim,
	const int64_t *shape, const float *data)
{
	td_tensor f, t;

	check(td_tensor_from_data(&f, TD_DTYPE_F32, ndim, shape, data), "td_tensor_from_data");
	check(td_tensor_to_dtype(&t, &f, dtype), "td_tensor_to_dtype");
	td_tensor_release(&f);
	check(td_dict_set_tensor_take(d, key, &t), key);
}

static void put_string(td_dict *d, const char *key, const char *utf8)
{
	check(td_dict_set_string(d, key, utf8), key);
}

/* (a) batch [3, 4], every dtype; values exactly representable. */
static td_dict *make_flat(void)
{
	static const int64_t b[] = { 3, 4 }, b5[] = { 3, 4, 5 }, b1[] = { 3, 4, 1 };
	enum { N = 12 };
	bool vb[N * 1];
	uint8_t vu8[N];
	int8_t vi8[N];
	int16_t vi16[N];
	int32_t vi32[N];
	int64_t vi64[N];
	uint16_t vu16[N];
	uint32_t vu32[N];
	uint64_t vu64[N];
	float vf16[N], vbf16[N], vf32[N * 5], vc64[N * 2];
	double vf64[N], vc128[N * 2];
	td_dict *d = new_dict(2, b);
	int i;

	for (i = 0; i < N; i++) {
		vb[i] = i % 3 == 0;
		vu8[i] = (uint8_t)(i * 23);      /* 0 .. 253 */
		vi8[i] = (int8_t)(i * 23 - 128); /* -128 .. 125 */
		vi16[i] = (int16_t)(i * 5000 - 30000);
		vi32[i] = (int32_t)((int64_t)i * 300000000 - 1500000000);
		vi64[i] = (int64_t)(i - 6) * 1000000000000LL;
		vu16[i] = (uint16_t)(i * 5000);     /* up to 55000 > INT16_MAX */
		vu32[i] = (uint32_t)i * 390000000u; /* up to 4.29e9 > INT32_MAX */
		vu64[i] = (uint64_t)i * (UINT64_C(1) << 60) + (uint64_t)i;
		vf16[i] = (float)i * 0.25f - 1.0f;
		vbf16[i] = (float)i * 0.5f - 2.0f;
		vf64[i] = (double)i / 4.0 - 1.0;
		vc64[2 * i] = (float)i;
		vc64[2 * i + 1] = -(float)i * 0.5f;
		vc128[2 * i] = (double)i / 4.0;
		vc128[2 * i + 1] = (double)i - 100.0;
	}
	for (i = 0; i < N * 5; i++)
		vf32[i] = (float)i / 8.0f - 3.0f;
	/* Extremes and special values. */
	vi8[N - 1] = INT8_MAX;
	vi16[0] = INT16_MIN;
	vi16[N - 1] = INT16_MAX;
	vi32[0] = INT32_MIN;
	vi32[N - 1] = INT32_MAX;
	vi64[0] = INT64_MIN;
	vi64[N - 1] = INT64_MAX;
	vu8[N - 1] = UINT8_MAX;
	vu16[N - 1] = UINT16_MAX;
	vu32[N - 1] = UINT32_MAX;
	vu64[N - 1] = UINT64_MAX;
	vf32[1] = -0.0f;
	vf32[2] = INFINITY;
	vf32[3] = -INFINITY;
	vf32[4] = FLT_MIN / 4.0f; /* subnormal */
	vf32[5] = FLT_MAX;
	vf64[1] = -0.0;
	vf64[2] = DBL_MAX;
	vf64[3] = DBL_MIN / 8.0; /* subnormal */
	vf64[4] = -INFINITY;
	vf16[N - 1] = 65504.0f;  /* float16 max */
	vbf16[N - 1] = 0x1p100f; /* beyond float16, within bfloat16 */

	put(d, "bool", TD_DTYPE_BOOL, 3, b1, vb);
	put(d, "uint8", TD_DTYPE_U8, 2, b, vu8);
	put(d, "int8", TD_DTYPE_I8, 2, b, vi8);
	put(d, "int16", TD_DTYPE_I16, 2, b, vi16);
	put(d, "int32", TD_DTYPE_I32, 2, b, vi32);
	put(d, "int64", TD_DTYPE_I64, 2, b, vi64);
	put(d, "uint16", TD_DTYPE_U16, 2, b, vu16);
	put(d, "uint32", TD_DTYPE_U32, 2, b, vu32);
	put(d, "uint64", TD_DTYPE_U64, 2, b, vu64);
	put_converted(d, "float16", TD_DTYPE_F16, 2, b, vf16);
	put_converted(d, "bfloat16", TD_DTYPE_BF16, 2, b, vbf16);
	put(d, "float32", TD_DTYPE_F32, 3, b5, vf32);
	put(d, "float64", TD_DTYPE_F64, 2, b, vf64);
	put(d, "complex64", TD_DTYPE_C64, 2, b, vc64);
	put(d, "complex128", TD_DTYPE_C128, 2, b, vc128);
	return d;
}

/* (b) batch [2] > "sub" [2, 5] > "deeper" [2, 5, 2]; string leaves at each level. */
static td_dict *make_nested(void)
{
	static const int64_t b[] = { 2 }, bsub[] = { 2, 5 }, bdeep[] = { 2, 5, 2 };
	static const int64_t sa[] = { 2, 3 }, sx[] = { 2, 5 }, sy[] = { 2, 5, 2, 3 };
	float a[6];
	int64_t x[10];
	uint8_t y[60];
	td_dict *d = new_dict(1, b), *sub = new_dict(2, bsub), *deeper = new_dict(3, bdeep);
	int i;

	for (i = 0; i < 6; i++)
		a[i] = (float)i + 0.5f;
	for (i = 0; i < 10; i++)
		x[i] = i * 7 - 20;
	for (i = 0; i < 60; i++)
		y[i] = (uint8_t)(100 + i);

	put(deeper, "y", TD_DTYPE_U8, 4, sy, y);
	put_string(deeper, "emoji", "\xf0\x9f\x99\x82 4-byte UTF-8");
	put(sub, "x", TD_DTYPE_I64, 2, sx, x);
	put_string(sub, "label", "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac");
	check(td_dict_set_dict_take(sub, "deeper", deeper), "deeper");
	put(d, "a", TD_DTYPE_F32, 2, sa, a);
	put_string(d, "name", "top level");
	put_string(d, "quotes", "say \"hi\"\\ back\nnew line");
	put_string(d, "empty", "");
	check(td_dict_set_dict_take(d, "sub", sub), "sub");
	return d;
}

/* (c) keys with characters tensordict's file names escape (set by key handle: no splitting). */
static td_dict *make_encoded_keys(void)
{
	static const char *const keys[] = {
		"a/b",
		"my key",
		"50%",
		"",
		".",
		"..",
		"tab\there",
		"colon:x",
		"q?*",
		"dot.ted",
		"caf\xc3\xa9",
		/* Names meta.json files use in their own entries (those it uses for the
		 * dict itself, "shape", "device", "_type", "_format_version" and
		 * "_class", are refused). */
		"_names",
		"_metadata",
		"_is_non_tensor",
		"data",
		"type",
		"dtype",
		"is_nested",
	};
	static const int64_t b[] = { 2 }, s[] = { 2, 2 };
	static const char *const nested_x[] = { "sub/dir", "x y" };
	static const char *const nested_s[] = { "sub/dir", "s%" };
	int32_t v[4];
	td_dict *d = new_dict(1, b);
	td_key *k;
	size_t j;
	int i;

	for (j = 0; j < ARRAY_LEN(keys); j++) {
		for (i = 0; i < 4; i++)
			v[i] = (int32_t)(j * 10 + (size_t)i);
		put_path(d, &keys[j], 1, TD_DTYPE_I32, 2, s, v);
	}
	/* A nested dict and a string under encoded keys (created by the set). */
	put_path(d, nested_x, 2, TD_DTYPE_I32, 1, b, v);
	k = path_key(nested_s, 2);
	check(td_dict_set_string_key(d, k, "string under sub/dir"), "s%");
	td_key_free(k);
	return d;
}

/* (d) batch [0] with a leaf [0, 3]. */
static td_dict *make_zero_elem(void)
{
	static const int64_t b[] = { 0 }, s[] = { 0, 3 };
	td_dict *d = new_dict(1, b);

	put(d, "empty", TD_DTYPE_F32, 2, s, NULL);
	return d;
}

/* (d) batch [2] with a leaf [2, 0] beside a normal leaf. */
static td_dict *make_zero_inner(void)
{
	static const int64_t b[] = { 2 }, s0[] = { 2, 0 }, s2[] = { 2, 2 };
	static const int64_t v[] = { -1, 2, -3, 4 };
	td_dict *d = new_dict(1, b);

	put(d, "none", TD_DTYPE_I64, 2, s0, NULL);
	put(d, "some", TD_DTYPE_I64, 2, s2, v);
	return d;
}

/* (e) batch [4]: leaves whose source tensors are views, not C-contiguous. */
static td_dict *make_noncontig(void)
{
	static const int64_t b[] = { 4 };
	static const int64_t s234[] = { 2, 3, 4 }, s34[] = { 3, 4 }, s85[] = { 8, 5 };
	static const int64_t s46[] = { 4, 6 }, s13[] = { 1, 3 }, s43[] = { 4, 3 };
	static const int perm[] = { 2, 1, 0 };
	double f64[24];
	float f32[12];
	int32_t i32[40];
	int64_t i64[24];
	int16_t i16[3] = { -7, 0, 7 };
	td_tensor base, conv, view;
	td_index idx[2];
	td_dict *d = new_dict(1, b);
	int i;

	for (i = 0; i < 24; i++) {
		f64[i] = (double)i * 1.5 - 10.0;
		i64[i] = (int64_t)i * -3;
	}
	for (i = 0; i < 12; i++)
		f32[i] = (float)i - 5.5f;
	for (i = 0; i < 40; i++)
		i32[i] = i * 11 - 200;

	/* [2, 3, 4] permuted to [4, 3, 2]. */
	check(td_tensor_from_data(&base, TD_DTYPE_F64, 3, s234, f64), "td_tensor_from_data");
	check(td_tensor_permute(&view, &base, perm), "td_tensor_permute");
	td_tensor_release(&base);
	check(td_dict_set_tensor_take(d, "permuted", &view), "permuted");

	/* bfloat16 [3, 4] transposed to [4, 3]. */
	check(td_tensor_from_data(&base, TD_DTYPE_F32, 2, s34, f32), "td_tensor_from_data");
	check(td_tensor_to_dtype(&conv, &base, TD_DTYPE_BF16), "td_tensor_to_dtype");
	td_tensor_release(&base);
	check(td_tensor_transpose(&view, &conv, 0, 1), "td_tensor_transpose");
	td_tensor_release(&conv);
	check(td_dict_set_tensor_take(d, "transposed_bf16", &view), "transposed_bf16");

	/* Rows 2..5 of [8, 5]: a nonzero offset. */
	check(td_tensor_from_data(&base, TD_DTYPE_I32, 2, s85, i32), "td_tensor_from_data");
	check(td_tensor_narrow(&view, &base, 0, 2, 4), "td_tensor_narrow");
	td_tensor_release(&base);
	check(td_dict_set_tensor_take(d, "narrowed", &view), "narrowed");

	/* [4, 6][:, 1::2]: a step. */
	check(td_tensor_from_data(&base, TD_DTYPE_I64, 2, s46, i64), "td_tensor_from_data");
	idx[0] = td_index_slice(TD_SLICE_NONE, TD_SLICE_NONE, TD_SLICE_NONE);
	idx[1] = td_index_slice(1, TD_SLICE_NONE, 2);
	check(td_tensor_index(&view, &base, idx, 2), "td_tensor_index");
	td_tensor_release(&base);
	check(td_dict_set_tensor_take(d, "stepped", &view), "stepped");

	/* [1, 3] expanded to [4, 3]: stride 0. */
	check(td_tensor_from_data(&base, TD_DTYPE_I16, 2, s13, i16), "td_tensor_from_data");
	check(td_tensor_expand(&view, &base, 2, s43), "td_tensor_expand");
	td_tensor_release(&base);
	check(td_dict_set_tensor_take(d, "expanded", &view), "expanded");
	return d;
}

/* ---- describing a written store ---- */

static json_t *shape_json(int ndim, const int64_t *shape)
{
	json_t *a = jcheck(json_array());
	int i;

	for (i = 0; i < ndim; i++)
		jappend(a, json_integer(shape[i]));
	return a;
}

static json_t *path_json(const char *const *path, size_t depth)
{
	json_t *a = jcheck(json_array());
	size_t i;

	for (i = 0; i < depth; i++)
		jappend(a, json_string(path[i]));
	return a;
}

static char *hex_of(const void *data, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *p = data;
	char *s = xcalloc(2 * n + 1, 1);
	size_t i;

	for (i = 0; i < n; i++) {
		s[2 * i] = digits[p[i] >> 4];
		s[2 * i + 1] = digits[p[i] & 15];
	}
	return s;
}

/*
 * One tensor leaf of the store: its C-order bytes, after checking them
 * against the source tensor under the same path.
 */
static json_t *tensor_json(const td_item *it, const td_tensor *mapped, const td_dict *src)
{
	const td_tensor *orig;
	td_tensor mc, oc;
	size_t nbytes = td_tensor_nbytes(mapped);
	json_t *leaf = jcheck(json_object());
	char *hex;

	td_tensor stacked = TD_TENSOR_INIT;
	td_key *k = path_key(it->path, it->depth);
	int rc = td_dict_get_tensor_key(&orig, src, k);

	if (rc == TD_ENOTSUP) {
		/* A leaf inside a lazy stack nested in the source: stacked there too. */
		check(td_lazy_get_tensor_key(&stacked, src, k), it->key);
		orig = &stacked;
	} else {
		check(rc, it->key);
	}
	td_key_free(k);
	check(td_tensor_contiguous(&mc, mapped), "td_tensor_contiguous");
	check(td_tensor_contiguous(&oc, orig), "td_tensor_contiguous");
	td_tensor_release(&stacked);
	if (mc.dtype != oc.dtype || mc.ndim != oc.ndim ||
		memcmp(td_tensor_shape(&mc), td_tensor_shape(&oc), sizeof(int64_t) * (size_t)mc.ndim) !=
			0 ||
		td_tensor_nbytes(&oc) != nbytes ||
		(nbytes && memcmp(td_tensor_data(&mc), td_tensor_data(&oc), nbytes) != 0)) {
		fprintf(stderr, "write_stores: leaf '%s': the store does not hold what was written\n",
			it->key);
		exit(1);
	}
	hex = hex_of(nbytes ? td_tensor_data(&mc) : "", nbytes);
	jset(leaf, "path", path_json(it->path, it->depth));
	jset(leaf, "kind", json_string("tensor"));
	jset(leaf, "dtype", json_string(td_dtype_torch_name(mc.dtype)));
	jset(leaf, "shape", shape_json(mc.ndim, td_tensor_shape(&mc)));
	jset(leaf, "nbytes", json_integer((json_int_t)nbytes));
	jset(leaf, "hex", json_string(hex));
	free(hex);
	td_tensor_release(&mc);
	td_tensor_release(&oc);
	return leaf;
}

static json_t *string_json(const td_item *it, const td_dict *src)
{
	const char *orig;
	size_t orig_len;
	json_t *leaf = jcheck(json_object());
	const td_dict *parent = src;
	td_dict *sub;

	/* The source's string under the same path. */
	if (it->depth > 1) {
		td_key *k = path_key(it->path, it->depth - 1);

		check(td_dict_get_dict_key(&sub, src, k), it->key);
		td_key_free(k);
		parent = sub;
	}
	check(td_dict_get_blob(&orig, &orig_len, parent, it->key), it->key);
	if (orig_len != it->value->blob.length || memcmp(orig, it->value->blob.data, orig_len) != 0) {
		fprintf(stderr, "write_stores: string '%s': the store does not hold what was written\n",
			it->key);
		exit(1);
	}
	jset(leaf, "path", path_json(it->path, it->depth));
	jset(leaf, "kind", json_string("string"));
	jset(leaf, "value", json_stringn(it->value->blob.data, it->value->blob.length));
	return leaf;
}

/* Nested lists over s's shape from dim `dim` on, elements from *at (C order). */
static json_t *lists_json(const td_strings *s, int dim, int64_t *at)
{
	json_t *a = jcheck(json_array());
	int64_t i;

	for (i = 0; i < s->shape[dim]; i++) {
		if (dim + 1 < s->ndim) {
			jappend(a, lists_json(s, dim + 1, at));
		} else {
			size_t len;
			const char *t = td_strings_at(&len, s, (*at)++);

			jappend(a, json_stringn(t, len));
		}
	}
	return a;
}

static json_t *strings_json(const td_item *it, const td_dict *src)
{
	json_t *leaf = jcheck(json_object());
	const td_strings *mine = it->value->strings, *orig;
	int64_t at = 0, i;
	td_key *k = path_key(it->path, it->depth);

	/* The source's array under the same path. */
	check(td_dict_get_strings_key(&orig, src, k), it->key);
	td_key_free(k);
	if (orig->numel != mine->numel || orig->ndim != mine->ndim)
		die("an array of strings changed shape in the store");
	for (i = 0; i < mine->numel; i++)
		if (strcmp(td_strings_at(NULL, orig, i), td_strings_at(NULL, mine, i)) != 0)
			die("an array of strings does not hold what was written");
	jset(leaf, "path", path_json(it->path, it->depth));
	jset(leaf, "kind", json_string("string_list"));
	jset(leaf, "shape", shape_json(mine->ndim, mine->shape));
	jset(leaf, "value", lists_json(mine, 0, &at));
	return leaf;
}

static json_t *describe(td_store *store, const td_dict *src)
{
	td_dict *d = td_store_dict(store);
	json_t *node = jcheck(json_object()), *dicts = jcheck(json_array());
	json_t *leaves = jcheck(json_array());
	td_dict_iter *iter;
	td_item it;
	int rc;

	if (!d)
		die("td_store_dict returned NULL");
	check(td_dict_iter_new(&iter, d, TD_ITER_NESTED), "td_dict_iter_new");
	while ((rc = td_dict_iter_next(&it, iter)) == 1) {
		json_t *e;

		switch (it.value->kind) {
		case TD_VALUE_TENSOR:
			jappend(leaves, tensor_json(&it, &it.value->tensor, src));
			break;
		case TD_VALUE_STRING:
			jappend(leaves, string_json(&it, src));
			break;
		case TD_VALUE_STRINGS:
			jappend(leaves, strings_json(&it, src));
			break;
		case TD_VALUE_DICT:
			e = jcheck(json_object());
			jset(e, "path", path_json(it.path, it.depth));
			jset(e, "batch_size",
				shape_json(td_dict_batch_ndim(it.value->dict),
					td_dict_batch_shape(it.value->dict)));
			jappend(dicts, e);
			break;
		default:
			fprintf(stderr, "write_stores: leaf '%s': unexpected kind %d\n", it.key,
				(int)it.value->kind);
			exit(1);
		}
	}
	check(rc, "td_dict_iter_next");
	td_dict_iter_free(iter);
	jset(node, "batch_size", shape_json(td_dict_batch_ndim(d), td_dict_batch_shape(d)));
	jset(node, "dicts", dicts);
	jset(node, "leaves", leaves);
	return node;
}

/* ---- rings ---- */

static void put_zeros(td_dict *d, const char *key, td_dtype dtype, int ndim, const int64_t *shape)
{
	td_tensor t;

	check(td_tensor_zeros(&t, dtype, ndim, shape), "td_tensor_zeros");
	check(td_dict_set_tensor_take(d, key, &t), key);
}

/* A row: obs f32[3], action i64, next {obs f32[3], reward f32[1], done bool[1],
 * info {step i32}}, frames (batch [2]) {pixels u8[2, 4]}. */
static td_dict *ring_template(void)
{
	static const int64_t s3[] = { 3 }, s1[] = { 1 }, b2[] = { 2 }, s24[] = { 2, 4 };
	td_dict *row = new_dict(0, NULL), *next = new_dict(0, NULL), *info = new_dict(0, NULL);
	td_dict *frames = new_dict(1, b2);

	put_zeros(row, "obs", TD_DTYPE_F32, 1, s3);
	put_zeros(row, "action", TD_DTYPE_I64, 0, NULL);
	put_zeros(next, "obs", TD_DTYPE_F32, 1, s3);
	put_zeros(next, "reward", TD_DTYPE_F32, 1, s1);
	put_zeros(next, "done", TD_DTYPE_BOOL, 1, s1);
	put_zeros(info, "step", TD_DTYPE_I32, 0, NULL);
	check(td_dict_set_dict_take(next, "info", info), "info");
	check(td_dict_set_dict_take(row, "next", next), "next");
	put_zeros(frames, "pixels", TD_DTYPE_U8, 2, s24);
	check(td_dict_set_dict_take(row, "frames", frames), "frames");
	return row;
}

static void *ring_leaf(const td_dict *d, const char *key)
{
	const td_tensor *t;

	check(td_dict_get_tensor(&t, d, key), key);
	return td_tensor_data(t);
}

/*
 * Row j of `d` (batch [n], the ring's leaves, contiguous) := the row of
 * ticket t. Kept in step by hand with ring_reference() in
 * check_tensordict_roundtrip.py. No value is 0, so that a written row never
 * looks like an unwritten one.
 */
static void ring_row(td_dict *d, int64_t j, uint64_t t)
{
	float *obs = ring_leaf(d, "obs"), *nobs = ring_leaf(d, "next.obs");
	float *reward = ring_leaf(d, "next.reward");
	int64_t *action = ring_leaf(d, "action");
	bool *done = ring_leaf(d, "next.done");
	int32_t *step = ring_leaf(d, "next.info.step");
	uint8_t *pixels = ring_leaf(d, "frames.pixels");
	int k;

	for (k = 0; k < 3; k++) {
		obs[j * 3 + k] = (float)t + 0.25f * (float)k + 1.0f;
		nobs[j * 3 + k] = -(float)t - 0.5f * (float)k - 1.0f;
	}
	action[j] = 1000 * (int64_t)(t + 1) + 7;
	reward[j] = 1.5f * (float)(t + 1);
	done[j] = true;
	step[j] = (int32_t)(t + 1);
	for (k = 0; k < 2 * 4; k++)
		pixels[j * 8 + k] = (uint8_t)(t * 8 + (uint64_t)k + 1);
}

/* Tickets [first, first + n) as a batch of n rows. */
static td_dict *ring_rows(const td_ring *r, uint64_t first, int64_t n)
{
	td_dict *b;
	int64_t j;

	check(td_ring_batch_new(&b, r, n), "td_ring_batch_new");
	for (j = 0; j < n; j++)
		ring_row(b, j, first + (uint64_t)j);
	return b;
}

/* What the ring's leaves must hold: slot s the last ticket t < tickets with
 * t % capacity == s, zeros where none. */
static td_dict *ring_reference(const td_ring *r, uint64_t tickets)
{
	uint64_t cap = (uint64_t)td_ring_capacity(r), s;
	td_dict *ref;

	check(td_ring_batch_new(&ref, r, (int64_t)cap), "td_ring_batch_new");
	for (s = 0; s < cap && s < tickets; s++)
		ring_row(ref, (int64_t)s, s + (tickets - 1 - s) / cap * cap);
	return ref;
}

typedef struct ring_spec {
	const char *name;
	int64_t capacity;
	bool prioritized;
	/* Rows added, batch after batch (1 = td_ring_add); the ring is closed and
	 * reopened before each batch. */
	int64_t batches[4];
} ring_spec;

static const ring_spec rings[] = {
	{ "ring", 5, true, { 3, 1, 4 } },
	{ "ring_unwrapped", 8, false, { 2, 1, 2 } },
	{ "ring_lapped", 4, false, { 6, 1 } },
};

static void write_ring(const char *dir, const ring_spec *spec, json_t *all)
{
	td_ring_create_opts opts = TD_RING_CREATE_OPTS_INIT;
	td_ring_open_opts rw = TD_RING_OPEN_OPTS_INIT;
	td_dict *row = ring_template(), *src;
	uint64_t tickets = 0, first;
	json_t *node, *info;
	td_store *store;
	td_ring *r;
	size_t i;

	opts.prioritized = spec->prioritized;
	rw.writable = true;
	check(td_ring_create(&r, dir, row, spec->capacity, &opts), "td_ring_create");
	td_dict_free(row);
	for (i = 0; i < ARRAY_LEN(spec->batches) && spec->batches[i] > 0; i++) {
		int64_t n = spec->batches[i];
		td_dict *b = ring_rows(r, tickets, n), *one;
		int64_t stored;

		if (i > 0) {
			td_ring_close(r);
			check(td_ring_open(&r, dir, &rw), "td_ring_open");
		}
		if (n == 1) {
			check(td_dict_index(&one, b, (td_index[]){ td_index_int(0) }, 1), "td_dict_index");
			stored = td_ring_add(&first, r, one);
			td_dict_free(one);
		} else {
			stored = td_ring_extend(&first, r, b);
		}
		check((int)(stored < 0 ? stored : 0), "td_ring_extend");
		if (first != tickets || stored != (n < spec->capacity ? n : spec->capacity))
			die("a ring did not store the rows it was given");
		tickets += (uint64_t)n;
		td_dict_free(b);
	}
	if ((uint64_t)td_ring_len(r) !=
		(tickets < (uint64_t)spec->capacity ? tickets : (uint64_t)spec->capacity))
		die("a ring's length is wrong");
	src = ring_reference(r, tickets);
	td_ring_close(r);
	/* What is on disk now, opened as a plain store, as Python will. */
	check(td_store_open(&store, dir, NULL), dir);
	node = describe(store, src);
	info = jcheck(json_object());
	jset(info, "capacity", json_integer(spec->capacity));
	jset(info, "tickets", json_integer((json_int_t)tickets));
	jset(node, "ring", info);
	jset(all, spec->name, node);
	td_store_close(store);
	td_dict_free(src);
}

/* ---- main ---- */

struct store_spec {
	const char *name;
	td_dict *(*make)(void);
	int64_t grow_to; /* > 0: td_store_grow() the written store to this dim 0 */
};

/* (h) arrays of strings, tensordict's NonTensorStack. */
static td_dict *make_string_lists(void)
{
	static const int64_t b[] = { 3 }, s32[] = { 3, 2 };
	static const char *const names[] = { "h\xc3\xa9llo", "", "say \"hi\"" };
	static const char *const pairs[] = { "a", "b", "c", "d", "e", "f" };
	static const char *const grid[] = { "g0", "g1", "g2", "g3", "g4", "g5" };
	static const int64_t x[] = { 10, -20, 30 };
	td_dict *d = new_dict(1, b), *sub = new_dict(2, s32);

	put(d, "x", TD_DTYPE_I64, 1, b, x);
	check(td_dict_set_strings(d, "names", 1, b, names), "names");
	check(td_dict_set_strings(d, "pairs", 2, s32, pairs), "pairs");
	check(td_dict_set_strings(sub, "grid", 2, s32, grid), "grid");
	check(td_dict_set_dict_take(d, "sub", sub), "sub");
	put_string(d, "label", "one string for every row");
	return d;
}

/*
 * (i) lazy stacks as values (tensordict's TensorDict({"z": lazy_stack})):
 * "z" stacks two batch-[] dicts at dim 0, "sub.w" two batch-[2] dicts at
 * dim 1 (batch [2, 2]); equal shapes, so that tensordict can stack them.
 */
static td_dict *make_lazy_nested(void)
{
	static const int64_t b[] = { 2 }, s3[] = { 3 }, s22[] = { 2, 2 };
	static const int32_t a[] = { 5, 6 };
	static const float x0[] = { 1, 2, 3 }, x1[] = { 0, -2, -4 };
	static const int64_t y0[] = { 0, 1 }, y1[] = { 7, 8 };
	static const int16_t r0[] = { 1, 2, 3, 4 }, r1[] = { -1, -2, -3, -4 };
	static const double v[] = { 0.5, -0.25 };
	const char *const ny[] = { "n", "y" };
	td_dict *d = new_dict(1, b), *sub = new_dict(1, b), *kids[2], *z, *w;

	put(d, "a", TD_DTYPE_I32, 1, b, a);
	kids[0] = new_dict(0, NULL);
	kids[1] = new_dict(0, NULL);
	put(kids[0], "x", TD_DTYPE_F32, 1, s3, x0);
	put(kids[1], "x", TD_DTYPE_F32, 1, s3, x1);
	put_path(kids[0], ny, 2, TD_DTYPE_I64, 1, b, y0);
	put_path(kids[1], ny, 2, TD_DTYPE_I64, 1, b, y1);
	check(td_lazy_stack(&z, kids, 2, 0, TD_LAZY_TAKE), "td_lazy_stack z");
	check(td_dict_set_dict_take(d, "z", z), "z");
	kids[0] = new_dict(1, b);
	kids[1] = new_dict(1, b);
	put(kids[0], "r", TD_DTYPE_I16, 2, s22, r0);
	put(kids[1], "r", TD_DTYPE_I16, 2, s22, r1);
	check(td_lazy_stack(&w, kids, 2, 1, TD_LAZY_TAKE), "td_lazy_stack w");
	check(td_dict_set_dict_take(sub, "w", w), "sub.w");
	put(sub, "v", TD_DTYPE_F64, 1, b, v);
	check(td_dict_set_dict_take(d, "sub", sub), "sub");
	return d;
}

static const struct store_spec stores[] = {
	{ "flat", make_flat, 0 },
	{ "nested", make_nested, 0 },
	{ "encoded_keys", make_encoded_keys, 0 },
	{ "zero_elem", make_zero_elem, 0 },
	{ "zero_inner", make_zero_inner, 0 },
	{ "noncontig", make_noncontig, 0 },
	/* nested, then grown from 2 to 7 rows: meta.json of every level rewritten, new rows zero */
	{ "grown", make_nested, 7 },
	{ "string_lists", make_string_lists, 0 },
	{ "strings_grown", make_string_lists, 5 },
	{ "lazy_nested", make_lazy_nested, 0 },
};

static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *s = xcalloc(n, 1);

	snprintf(s, n, "%s/%s", dir, name);
	return s;
}

int main(int argc, char **argv)
{
	json_t *manifest, *all;
	char *path;
	size_t i;

	if (argc != 2) {
		fprintf(stderr, "usage: write_stores OUTDIR\n");
		return 2;
	}
	if (mkdir(argv[1], 0777) != 0 && errno != EEXIST) {
		perror(argv[1]);
		return 1;
	}
	manifest = jcheck(json_object());
	all = jcheck(json_object());
	jset(manifest, "format", json_integer(1));
	jset(manifest, "tdstore_version", json_string(td_version(NULL, NULL, NULL)));
	for (i = 0; i < ARRAY_LEN(stores); i++) {
		td_dict *src = stores[i].make();
		td_store *store;

		path = join(argv[1], stores[i].name);
		check(td_store_memmap(&store, src, path, NULL), path);
		if (stores[i].grow_to > 0) {
			/* What the store holds now is the reference: old rows plus zeros. */
			td_dict *grown;

			check(td_store_grow(store, stores[i].grow_to), "td_store_grow");
			check(td_dict_clone(&grown, td_store_dict(store)), "td_dict_clone");
			td_dict_free(src);
			src = grown;
		}
		jset(all, stores[i].name, describe(store, src));
		td_store_close(store);
		td_dict_free(src);
		free(path);
	}
	for (i = 0; i < ARRAY_LEN(rings); i++) {
		path = join(argv[1], rings[i].name);
		write_ring(path, &rings[i], all);
		free(path);
	}
	jset(manifest, "stores", all);
	path = join(argv[1], "expected.json");
	if (json_dump_file(manifest, path, JSON_INDENT(1) | JSON_PRESERVE_ORDER) != 0) {
		fprintf(stderr, "write_stores: cannot write %s\n", path);
		return 1;
	}
	printf("wrote %zu stores, %zu rings and %s\n", ARRAY_LEN(stores), ARRAY_LEN(rings), path);
	free(path);
	json_decref(manifest);
	return 0;
}
