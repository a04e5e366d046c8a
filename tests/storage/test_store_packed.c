/* SPDX-License-Identifier: MIT */
/*
 * test_store_packed.c - the packed placement (doc/format.md sections 3-4):
 * one file with a header page, two commit slots, the key index and 4096-byte
 * aligned extents. Round trips of every dtype and shape, the golden files of
 * format version 1 (opened, and rewritten byte for byte), schema changes
 * seen by other handles and processes, index-area reuse, every kind of
 * damaged file, processes racing schema changes, and writers killed at
 * random points.
 */
#define _GNU_SOURCE /* SEEK_HOLE */
#include "td_test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

TestSuite(store_packed, .init = td_test_tmpdir_init, .fini = td_test_tmpdir_fini);

static const int64_t B3[] = { 3 };
static const int64_t B4[] = { 4 };

/* ---- helpers ---- */

static void put_arange(td_dict *d, const char *const *parts, size_t n, td_dtype dtype, int ndim,
	const int64_t *shape)
{
	td_key *k = td_test_key(parts, n);
	td_tensor t;

	td_test_arange(&t, dtype, ndim, shape);
	td_cr_assert_ok(td_dict_set_tensor_take_key(d, k, &t));
	td_key_free(k);
}

/*
 * The dict of the golden files: batch [3]; every dtype as a [3, 5] leaf; a
 * nested dict with a [3, 2] leaf and a string; a zero-element leaf; keys
 * that a directory would have to encode.
 */
static td_dict *golden_dict(void)
{
	static const int64_t s35[] = { 3, 5 }, s32[] = { 3, 2 }, s30[] = { 3, 0 };
	td_dict *d, *n;
	size_t i;

	td_cr_assert_ok(td_dict_new(&d, 1, B3));
	for (i = 0; i < TD_DTYPE_COUNT; i++) {
		const char *p[1] = { td_dtype_name(td_test_all_dtypes[i]) };

		put_arange(d, p, 1, td_test_all_dtypes[i], 2, s35);
	}
	td_cr_assert_ok(td_dict_new(&n, 1, B3));
	{
		const char *p[1] = { "a/b .." };

		put_arange(n, p, 1, TD_DTYPE_F32, 2, s32);
	}
	td_cr_assert_ok(td_dict_set_string(n, "text", "h\xc3\xa9llo"));
	td_cr_assert_ok(td_dict_set_dict_take(d, "nested", n));
	{
		const char *p[1] = { "empty" };

		put_arange(d, p, 1, TD_DTYPE_I64, 2, s30);
	}
	return d;
}

/*
 * The dict of v1-strings.tds: golden_dict() plus arrays of strings (index
 * flag 1): "names" [3] (one non-ASCII, one empty) and "nested.grid" [3, 2].
 */
static td_dict *golden_strings_dict(void)
{
	static const char *const names[] = { "alpha", "b\xc3\xa9ta", "" };
	static const char *const grid[] = { "a", "b", "c", "d", "e", "f" };
	static const int64_t s32[] = { 3, 2 };
	td_dict *d = golden_dict(), *n;

	td_cr_assert_ok(td_dict_set_strings(d, "names", 1, B3, names));
	td_cr_assert_ok(td_dict_get_dict(&n, d, "nested"));
	td_cr_assert_ok(td_dict_set_strings(n, "grid", 2, s32, grid));
	return d;
}

static bool dicts_equal(const td_dict *a, const td_dict *b)
{
	int rc = td_dict_equal(a, b);

	cr_assert(rc >= 0, "td_dict_equal: %s", td_error_last()->message);
	return rc == 1;
}

static void *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long n;
	void *buf;

	cr_assert_not_null(f, "cannot open %s", path);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	cr_assert(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Overwrite `len` bytes at `off` of a file. */
static void patch(const char *path, off_t off, const void *bytes, size_t len)
{
	int fd = open(path, O_WRONLY);

	cr_assert(fd >= 0);
	cr_assert_eq(pwrite(fd, bytes, len, off), (ssize_t)len);
	close(fd);
}

static uint64_t get_le64(const char *path, off_t off)
{
	uint8_t b[8];
	uint64_t v = 0;
	int fd = open(path, O_RDONLY), i;

	cr_assert(fd >= 0);
	cr_assert_eq(pread(fd, b, 8, off), 8);
	close(fd);
	for (i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static void flip_byte(const char *path, off_t off)
{
	uint8_t b;
	int fd = open(path, O_RDWR);

	cr_assert(fd >= 0);
	cr_assert_eq(pread(fd, &b, 1, off), 1);
	b ^= 0x5a;
	cr_assert_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

/* Recompute the header checksum (bytes 0..55) after a patch. */
static void reseal_slot(const char *path, off_t off);

static void reseal_header(const char *path)
{
	reseal_slot(path, 0); /* the same rule: XXH64 of bytes 0..55 at 56 */
}

/* Recompute the checksum of the commit slot at `off` after a patch. */
static void reseal_slot(const char *path, off_t off)
{
	uint8_t b[56], c[8];
	uint64_t h;
	int fd = open(path, O_RDWR), i;

	cr_assert(fd >= 0);
	cr_assert_eq(pread(fd, b, 56, off), 56);
	h = XXH64(b, 56, 0);
	for (i = 0; i < 8; i++)
		c[i] = (uint8_t)(h >> (8 * i));
	cr_assert_eq(pwrite(fd, c, 8, off + 56), 8);
	close(fd);
}

/* Recompute the checksum of the index at `off` (doc/format.md 3.1) after a patch. */
static void reseal_index(const char *path, off_t off)
{
	uint8_t head[64], c[8], *body;
	uint64_t blen, h;
	int fd = open(path, O_RDWR), i;

	cr_assert(fd >= 0);
	cr_assert_eq(pread(fd, head, 64, off), 64);
	blen = 0;
	for (i = 7; i >= 0; i--)
		blen = blen << 8 | head[24 + i];
	body = malloc(blen ? blen : 1);
	cr_assert_not_null(body);
	cr_assert_eq(pread(fd, body, blen, off + 64), (ssize_t)blen);
	h = XXH64(body, blen, XXH64(head, 56, 0));
	free(body);
	for (i = 0; i < 8; i++)
		c[i] = (uint8_t)(h >> (8 * i));
	cr_assert_eq(pwrite(fd, c, 8, off + 56), 8);
	close(fd);
}

static void put_le64(const char *path, off_t off, uint64_t v)
{
	uint8_t b[8];
	int i;

	for (i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	patch(path, off, b, 8);
}

static void copy_file(const char *from, const char *to)
{
	size_t len;
	void *buf = read_file(from, &len);
	FILE *f = fopen(to, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(buf, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
	free(buf);
}

static const char *golden_path(const char *name)
{
	static char path[4096];
	const char *data = getenv("TD_TEST_DATA");

	cr_assert_not_null(data, "TD_TEST_DATA is not set");
	snprintf(path, sizeof(path), "%s/packed/%s", data, name);
	return path;
}

static int64_t first_i64(const td_dict *d, const char *const *parts, size_t n)
{
	td_key *k = td_test_key(parts, n);
	const td_value *v;

	td_cr_assert_ok(td_dict_get_key(&v, d, k));
	td_key_free(k);
	cr_assert_eq(v->kind, TD_VALUE_TENSOR);
	return ((const int64_t *)td_tensor_data(&v->tensor))[3];
}

static void filled(td_tensor *t, int64_t v)
{
	td_cr_assert_ok(td_tensor_full(t, TD_DTYPE_I64, 1, B4, td_scalar_int(v)));
}

static td_store *small_store(const char *name)
{
	td_dict *d;
	td_store *st;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 1, B4));
	td_test_arange(&t, TD_DTYPE_I32, 1, B4);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "base", &t));
	td_cr_assert_ok(
		td_store_memmap(&st, d, td_test_path(name), td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	td_dict_free(d);
	return st;
}

/* ---- round trips ---- */

Test(store_packed, every_dtype_nested_dicts_strings_and_empty_leaves_round_trip)
{
	td_dict *d = golden_dict();
	td_store *st, *ro;
	td_dict_iter *it;
	td_item item;
	const char *path = td_test_path("g.tds");

	td_cr_assert_ok(td_store_memmap(&st, d, path, td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	cr_assert(dicts_equal(td_store_dict(st), d));
	cr_assert_eq(td_store_placement(st), TD_PLACEMENT_PACKED);
	cr_assert(td_store_is_writable(st));
	cr_assert(td_dict_is_locked(td_store_dict(st)));
	cr_assert_eq(td_store_generation(st), 1);
	td_store_close(st);

	td_cr_assert_ok(td_store_open(&ro, path, NULL));
	cr_assert(dicts_equal(td_store_dict(ro), d));
	cr_assert_eq(td_store_placement(ro), TD_PLACEMENT_PACKED);
	cr_assert_not(td_store_is_writable(ro));
	/* Keys keep their order; every leaf with elements is 4096-byte aligned. */
	td_cr_assert_ok(td_dict_iter_new(&it, td_store_dict(ro), TD_ITER_NESTED));
	cr_assert_eq(td_dict_iter_next(&item, it), 1);
	cr_assert_str_eq(item.key, "bool");
	do {
		if (item.value->kind == TD_VALUE_TENSOR && td_tensor_numel(&item.value->tensor))
			cr_assert_eq((uintptr_t)td_tensor_data(&item.value->tensor) % 4096, 0, "%s", item.key);
	} while (td_dict_iter_next(&item, it) == 1);
	td_dict_iter_free(it);
	/* A read-only store is mapped read-only. */
	{
		const td_value *v;

		td_cr_assert_ok(td_dict_get(&v, td_store_dict(ro), "float32"));
		cr_assert(td_buffer_flags(v->tensor.buffer) & TD_BUFFER_READONLY);
	}
	td_store_close(ro);
	td_dict_free(d);
}

Test(store_packed, strided_and_expanded_sources_are_gathered)
{
	static const int64_t s43[] = { 4, 3 }, s34[] = { 3, 4 }, s4x[] = { 4, 1000 };
	td_dict *d, *want;
	td_tensor base, tr, one, ex;
	td_store *st;
	const int perm[2] = { 1, 0 };

	td_cr_assert_ok(td_dict_new(&d, 1, B4));
	td_test_arange(&base, TD_DTYPE_F64, 2, s34);
	td_cr_assert_ok(td_tensor_permute(&tr, &base, perm));
	cr_assert_eq(td_tensor_shape(&tr)[0], s43[0]);
	td_cr_assert_ok(td_dict_set_tensor(d, "t", &tr));
	td_cr_assert_ok(td_tensor_full(&one, TD_DTYPE_I16, 0, NULL, td_scalar_int(7)));
	td_cr_assert_ok(td_tensor_expand(&ex, &one, 2, s4x));
	td_cr_assert_ok(td_dict_set_tensor(d, "x", &ex));
	td_cr_assert_ok(
		td_store_memmap(&st, d, td_test_path("s.tds"), td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	td_cr_assert_ok(td_dict_clone(&want, d));
	cr_assert(dicts_equal(td_store_dict(st), want));
	td_store_close(st);
	td_dict_free(want);
	td_dict_free(d);
	td_tensor_release(&base);
	td_tensor_release(&tr);
	td_tensor_release(&one);
	td_tensor_release(&ex);
}

Test(store_packed, existsok_replaces_and_like_allocates_zeros)
{
	td_dict *d = golden_dict(), *z;
	td_store *st;
	const char *path = td_test_path("e.tds");

	td_cr_assert_ok(
		td_store_memmap(&st, d, path, td_test_memmap(TD_PLACEMENT_PACKED, TD_TEST_NOSYNC)));
	td_store_close(st);
	td_cr_assert_err(td_store_memmap(&st, d, path, td_test_memmap(TD_PLACEMENT_PACKED, 0)),
		TD_EEXISTS);
	cr_assert_null(st);
	/* No temporary file is left behind by the refused save. */
	{
		size_t len;
		void *buf = read_file(path, &len);

		free(buf);
	}
	td_cr_assert_ok(td_store_memmap(&st, d, path,
		td_test_memmap(TD_PLACEMENT_PACKED, TD_TEST_EXISTSOK | TD_TEST_LIKE)));
	td_cr_assert_ok(td_dict_clone(&z, d));
	td_cr_assert_ok(td_dict_unlock(z));
	td_cr_assert_ok(td_dict_zero(z));
	cr_assert(dicts_equal(td_store_dict(st), z));
	td_store_close(st);
	td_dict_free(z);
	td_dict_free(d);
}

Test(store_packed, writes_through_a_read_write_store_reach_the_file)
{
	td_store *st = small_store("w.tds"), *ro;
	const td_value *v;

	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "base"));
	((int32_t *)td_tensor_data(&v->tensor))[2] = 99;
	td_cr_assert_ok(td_store_sync(st));
	td_cr_assert_ok(td_store_open(&ro, td_test_path("w.tds"), NULL));
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(ro), "base"));
	cr_assert_eq(((const int32_t *)td_tensor_data(&v->tensor))[2], 99);
	td_store_close(ro);
	td_store_close(st);
}

/* ---- golden files of format version 1 (tests/data/packed) ---- */

/* The second golden file: the first plus one add and one remove (both slots used). */
static void golden_changes(td_store *st)
{
	td_tensor t;

	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_I64, 1, B3, td_scalar_int(5)));
	td_cr_assert_ok(td_store_add_tensor(st, "nested.added", &t));
	td_tensor_release(&t);
	td_cr_assert_ok(td_store_remove(st, "uint8"));
}

Test(store_packed, golden_files_of_version_1_open_and_are_written_byte_for_byte)
{
	const char *names[3] = { "v1.tds", "v1-two-slots.tds", "v1-strings.tds" };
	const char *regen = getenv("TD_WRITE_GOLDEN");
	int i;

	for (i = 0; i < 3; i++) {
		td_dict *d = i == 2 ? golden_strings_dict() : golden_dict();
		td_store *st, *ro;
		const char *mine = td_test_path(names[i]);
		size_t a_len, b_len;
		void *a, *b;

		td_cr_assert_ok(td_store_memmap(&st, d, mine, td_test_memmap(TD_PLACEMENT_PACKED, 0)));
		if (i == 1)
			golden_changes(st);
		td_store_close(st);
		if (regen && strcmp(regen, "1") == 0) {
			/* Only when adding a format version: the committed files are never regenerated. */
			copy_file(mine, golden_path(names[i]));
		}
		td_cr_assert_ok(td_store_open(&ro, golden_path(names[i]), NULL));
		if (i != 1) {
			cr_assert(dicts_equal(td_store_dict(ro), d));
			cr_assert_eq(td_store_generation(ro), 1);
		} else {
			const td_value *v;

			td_cr_assert_ok(td_dict_get(&v, td_store_dict(ro), "nested.added"));
			cr_assert_eq(td_tensor_shape(&v->tensor)[0], 3);
			cr_assert_eq(td_test_element(&v->tensor, 2), 5.0);
			td_cr_assert_err(td_dict_get(&v, td_store_dict(ro), "uint8"), TD_ENOTFOUND);
			cr_assert_eq(td_store_generation(ro), 3);
		}
		td_store_close(ro);
		/* Today's writer produces the same bytes. */
		a = read_file(mine, &a_len);
		b = read_file(golden_path(names[i]), &b_len);
		cr_assert_eq(a_len, b_len, "%s: %zu bytes, golden %zu", names[i], a_len, b_len);
		cr_assert(memcmp(a, b, a_len) == 0, "%s differs from the golden file", names[i]);
		free(a);
		free(b);
		td_dict_free(d);
	}
}

/*
 * The smallest packed file, the worked example of doc/format.md 4.6 (the fuzz
 * corpus holds it), is what tdstore writes for an empty dict, and opens.
 */
Test(store_packed, the_worked_example_of_the_spec_is_what_tdstore_writes)
{
	const char *src = getenv("TD_SRCDIR"), *mine = td_test_path("example.tds");
	char path[4200];
	td_dict *d;
	td_store *st, *ro;
	size_t a_len, b_len;
	uint8_t *a, *b;

	cr_assert_not_null(src, "TD_SRCDIR is not set");
	snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/store_packed/example", src);
	b = read_file(path, &b_len);
	cr_assert_eq(b_len, 8192);
	/* The fields doc/format.md 4.6 reads out of it. */
	cr_assert_eq(memcmp(b, "TDSPACKD", 8), 0);
	cr_assert_eq(XXH64(b, 56, 0), 0x93a35f18d33509b6ull);
	cr_assert_eq(XXH64(b + 512, 56, 0), 0xba74f8cabc9efb26ull);
	for (size_t i = 1024; i < 1024 + 64; i++)
		cr_assert_eq(b[i], 0, "slot B is not empty");
	cr_assert_eq(memcmp(b + 4096, "TDSINDEX", 8), 0);
	cr_assert_eq(XXH64(b + 4096 + 64, 48, XXH64(b + 4096, 56, 0)), 0x36c0c7937a2896f5ull);
	td_cr_assert_ok(td_store_open(&ro, path, NULL));
	cr_assert_eq(td_dict_len(td_store_dict(ro)), 0);
	cr_assert_eq(td_dict_batch_ndim(td_store_dict(ro)), 0);
	cr_assert_eq(td_store_generation(ro), 1);
	td_store_close(ro);
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_store_memmap(&st, d, mine, td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	td_store_close(st);
	td_dict_free(d);
	a = read_file(mine, &a_len);
	cr_assert(a_len == b_len && memcmp(a, b, a_len) == 0,
		"the example is not what td_store_memmap writes");
	free(a);
	free(b);
}

/* ---- schema changes ---- */

Test(store_packed, adds_and_removes_are_seen_by_other_handles)
{
	const char *x[1] = { "x" }, *deep[3] = { "a", "b.c", "y" };
	static const int64_t s43[] = { 4, 3 };
	td_store *st = small_store("s.tds"), *ro;
	td_key *kdeep = td_test_key(deep, 3);
	td_tensor held, t;
	const td_value *v;
	td_key *dk;
	bool changed;

	td_cr_assert_ok(td_store_open(&ro, td_test_path("s.tds"), NULL));
	/* A view held across changes stays valid and shares the file's pages. */
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(ro), "base"));
	td_tensor_ref(&held, &v->tensor);

	filled(&t, 42);
	td_cr_assert_ok(td_store_add_tensor(st, "x", &t));
	td_tensor_release(&t);
	cr_assert_eq(td_store_generation(st), 2);
	cr_assert_eq(td_store_generation(ro), 2);
	td_cr_assert_ok(td_store_refresh(&changed, ro));
	cr_assert(changed);
	cr_assert_eq(first_i64(td_store_dict(ro), x, 1), 42);
	td_cr_assert_ok(td_store_refresh(&changed, ro));
	cr_assert_not(changed);

	/* A component holding '.' is named through a key handle. */
	td_cr_assert_ok(td_key_from_path(&dk, deep, 3));
	td_cr_assert_ok(td_store_add_empty_key(st, dk, TD_DTYPE_F16, 2, s43));
	td_key_free(dk);
	td_cr_assert_ok(td_dict_get_key(&v, td_store_dict(st), kdeep));
	cr_assert_eq(td_tensor_shape(&v->tensor)[1], 3);
	cr_assert_eq(td_dict_batch_ndim(td_store_dict(st)), 1);
	td_cr_assert_ok(td_store_remove(st, "x"));
	td_cr_assert_ok(td_store_refresh(&changed, ro));
	cr_assert(changed);
	td_cr_assert_err(td_dict_get(&v, td_store_dict(ro), "x"), TD_ENOTFOUND);
	td_cr_assert_ok(td_dict_get_key(&v, td_store_dict(ro), kdeep));

	/* Writes through the writer's new dict show in the view taken before. */
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "base"));
	((int32_t *)td_tensor_data(&v->tensor))[1] = -5;
	cr_assert_eq(((const int32_t *)td_tensor_data(&held))[1], -5);
	td_tensor_release(&held);

	/* Removing a nested dict removes what is under it. */
	td_cr_assert_ok(td_store_remove(st, "a"));
	td_cr_assert_err(td_dict_get_key(&v, td_store_dict(st), kdeep), TD_ENOTFOUND);
	td_key_free(kdeep);
	td_store_close(ro);
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&ro, td_test_path("s.tds"), NULL));
	cr_assert_eq(td_dict_len(td_store_dict(ro)), 1);
	td_store_close(ro);
}

Test(store_packed, schema_change_errors_leave_the_store_as_it_was)
{
	static const int64_t s5[] = { 5 };
	td_store *st = small_store("s.tds"), *ro;
	uint64_t g;
	td_tensor t;

	g = td_store_generation(st);
	filled(&t, 1);
	td_cr_assert_ok(td_store_add_tensor(st, "x", &t));
	td_cr_assert_err(td_store_add_tensor(st, "x", &t), TD_EEXISTS);
	td_cr_assert_err(td_store_add_tensor(st, "base.y", &t), TD_ETYPE);
	td_tensor_release(&t);
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I64, 1, s5));
	td_cr_assert_err(td_store_add_tensor(st, "nope", &t), TD_ETYPE);
	td_tensor_release(&t);
	td_cr_assert_err(td_store_remove(st, "nope"), TD_ENOTFOUND);
	td_cr_assert_err(td_store_remove(st, "base.y"), TD_ETYPE);
	cr_assert_eq(td_store_generation(st), g + 1);

	td_cr_assert_ok(td_store_open(&ro, td_test_path("s.tds"), NULL));
	filled(&t, 1);
	td_cr_assert_err(td_store_add_tensor(ro, "nope", &t), TD_EREADONLY);
	td_tensor_release(&t);
	td_cr_assert_err(td_store_remove(ro, "x"), TD_EREADONLY);
	td_store_close(ro);
	td_store_close(st);
}

/* Whether the test directory holds an uncommitted temporary file. */
static bool has_temporary(void)
{
	DIR *dir = opendir(td_test_tmpdir());
	struct dirent *e;
	bool found = false;

	cr_assert_not_null(dir);
	while ((e = readdir(dir)) != NULL)
		found = found || strncmp(e->d_name, ".tdstore-tmp.", 13) == 0;
	closedir(dir);
	return found;
}

Test(store_packed, every_block_of_a_saved_file_is_allocated)
{
	static const unsigned flags[] = { 0, TD_TEST_NOSYNC, TD_TEST_LIKE };
	static const int64_t s1[] = { 1250 }, s2[] = { 1 }, s3[] = { 700, 3 };
	size_t i;

	for (i = 0; i < TD_TEST_ARRAY_LEN(flags); i++) {
		const char *p[1];
		char name[32];
		td_dict *d;
		td_store *st;
		td_tensor t, tr;
		struct stat sb;
		int fd;

		td_cr_assert_ok(td_dict_new(&d, 0, NULL));
		p[0] = "odd"; /* 5000 bytes: an extent of 8192 */
		put_arange(d, p, 1, TD_DTYPE_F32, 1, s1);
		p[0] = "byte";
		put_arange(d, p, 1, TD_DTYPE_U8, 1, s2);
		td_test_arange(&t, TD_DTYPE_F64, 2, s3);
		td_cr_assert_ok(td_tensor_transpose(&tr, &t, 0, 1));
		td_cr_assert_ok(td_dict_set_tensor(d, "strided", &tr));
		snprintf(name, sizeof(name), "a%zu.tds", i);
		td_cr_assert_ok(td_store_memmap(&st, d, td_test_path(name),
			td_test_memmap(TD_PLACEMENT_PACKED, flags[i])));
		/* Written or fallocated, every block is reserved: no hole a mapping could fault on. */
		fd = open(td_test_path(name), O_RDONLY);
		cr_assert(fd >= 0);
		cr_assert_eq(fstat(fd, &sb), 0);
		cr_assert_geq((int64_t)sb.st_blocks * 512, (int64_t)sb.st_size,
			"flags 0x%x: %lld blocks of 512 for %lld bytes", flags[i], (long long)sb.st_blocks,
			(long long)sb.st_size);
		if (!(flags[i] & TD_TEST_LIKE))
			cr_assert_eq(lseek(fd, 0, SEEK_HOLE), sb.st_size, "flags 0x%x: a hole", flags[i]);
		close(fd);
		if (!(flags[i] & TD_TEST_LIKE)) {
			td_dict *want;

			td_cr_assert_ok(td_dict_clone(&want, d));
			cr_assert(dicts_equal(td_store_dict(st), want));
			td_dict_free(want);
		}
		td_store_close(st);
		td_tensor_release(&tr);
		td_tensor_release(&t);
		td_dict_free(d);
	}
}

Test(store_packed, a_save_or_add_that_cannot_write_leaves_nothing_behind)
{
	static const int64_t big[] = { 1 << 20 };
	struct rlimit rl = { 1 << 16, 1 << 16 };
	const char *x[1] = { "x" };
	td_store *st = (td_store *)0x1, *small = small_store("s.tds"), *ro;
	td_dict *d;
	td_tensor t;
	int rc;

	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	put_arange(d, x, 1, TD_DTYPE_U8, 1, big);
	/* A file size limit stands in for a full disk: the write fails part-way. */
	signal(SIGXFSZ, SIG_IGN);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	td_error_clear();
	rc = td_store_memmap(&st, d, td_test_path("full.tds"), td_test_memmap(TD_PLACEMENT_PACKED, 0));
	cr_assert(rc == TD_ENOSPC || rc == TD_EIO || rc == TD_EOVERFLOW, "got %d: %s", rc,
		td_error_last()->message);
	cr_assert_null(st);
	cr_assert_not(td_test_exists(td_test_path("full.tds")));
	cr_assert_not(has_temporary());
	/* An add that cannot write its extent commits nothing. */
	td_test_arange(&t, TD_DTYPE_U8, 1, big);
	rc = td_store_add_tensor(small, "x", &t);
	cr_assert_lt(rc, 0);
	td_tensor_release(&t);
	td_store_close(small);
	td_cr_assert_ok(td_store_open(&ro, td_test_path("s.tds"), NULL));
	cr_assert_eq(td_store_generation(ro), 1);
	cr_assert_eq(td_dict_len(td_store_dict(ro)), 1);
	td_store_close(ro);
	td_dict_free(d);
}

Test(store_packed, index_areas_are_reused_so_the_file_stays_small)
{
	td_store *st = small_store("r.tds");
	int64_t size_after_warmup = 0;
	td_tensor t;
	int i;

	filled(&t, 3);
	for (i = 0; i < 60; i++) {
		td_cr_assert_ok(td_store_add_tensor(st, "x", &t));
		td_cr_assert_ok(td_store_remove(st, "x"));
		if (i == 4)
			size_after_warmup = td_test_file_size(td_test_path("r.tds"));
	}
	td_tensor_release(&t);
	/* Each add appends one 4 KiB data extent; the index areas do not grow the file. */
	cr_assert_eq(td_test_file_size(td_test_path("r.tds")), size_after_warmup + 55 * 4096);
	cr_assert_eq(td_store_generation(st), 121);
	td_store_close(st);
}

/* ---- bad files ---- */

/* A file with both slots in use: generation 2 in slot B, 1 in slot A. */
static const char *two_slots(const char *name)
{
	td_store *st = small_store(name);
	td_tensor t;

	filled(&t, 8);
	td_cr_assert_ok(td_store_add_tensor(st, "x", &t));
	td_tensor_release(&t);
	td_store_close(st);
	cr_assert_eq(get_le64(td_test_path(name), 1024), 2);
	cr_assert_eq(get_le64(td_test_path(name), 512), 1);
	return td_test_path(name);
}

Test(store_packed, damaged_headers_and_slots_are_refused_or_survived)
{
	char path[4096], work[4096];
	const char *x[1] = { "x" };
	td_store *st;
	const td_value *v;
	uint32_t v2 = 2, flag = 2;       /* bit 1: unknown in the header */
	uint32_t iflag = 8, dirflag = 2; /* index bit 3: unknown; bit 1: the directory placement */

	snprintf(path, sizeof(path), "%s", two_slots("f.tds"));
	snprintf(work, sizeof(work), "%s", td_test_path("w.tds"));

	copy_file(path, work);
	patch(work, 0, "TDSPACKX", 8);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	copy_file(path, work);
	patch(work, 8, &v2, 4);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_EVERSION);

	copy_file(path, work);
	flip_byte(work, 30); /* a reserved byte: the header checksum fails */
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	copy_file(path, work);
	flip_byte(work, 2000); /* outside the slots: must be zero */
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	/* Unknown flags: a bad checksum first; with a valid one, unsupported. */
	copy_file(path, work);
	patch(work, 20, &flag, 4);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);
	reseal_header(work);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ENOTSUP);
	/* Index flags likewise. */
	copy_file(path, work);
	patch(work, (off_t)get_le64(work, 1024 + 8) + 20, &iflag, 4);
	reseal_index(work, (off_t)get_le64(work, 1024 + 8));
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ENOTSUP);
	/* The index of a directory store (no extents) has no place in a packed file. */
	copy_file(path, work);
	patch(work, (off_t)get_le64(work, 1024 + 8) + 20, &dirflag, 4);
	reseal_index(work, (off_t)get_le64(work, 1024 + 8));
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	/* A torn newer slot: the older state opens. */
	copy_file(path, work);
	flip_byte(work, 1024 + 20);
	td_cr_assert_ok(td_store_open(&st, work, NULL));
	cr_assert_eq(td_store_generation(st), 1);
	td_cr_assert_err(td_dict_get(&v, td_store_dict(st), "x"), TD_ENOTFOUND);
	td_store_close(st);

	/* A damaged older slot, or a damaged older index: the newer state opens. */
	copy_file(path, work);
	flip_byte(work, 512 + 3);
	td_cr_assert_ok(td_store_open(&st, work, NULL));
	cr_assert_eq(td_store_generation(st), 2);
	td_store_close(st);
	copy_file(path, work);
	flip_byte(work, (off_t)get_le64(work, 512 + 8) + 70);
	td_cr_assert_ok(td_store_open(&st, work, td_test_rw()));
	cr_assert_eq(first_i64(td_store_dict(st), x, 1), 8);
	/* ... and a writer does not reuse its area for the next index. */
	td_cr_assert_ok(td_store_remove(st, "x"));
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&st, work, NULL));
	cr_assert_eq(td_store_generation(st), 3);
	td_store_close(st);

	/* A damaged newer index is corruption, not a reason to go back silently. */
	copy_file(path, work);
	flip_byte(work, (off_t)get_le64(work, 1024 + 8) + 70);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	/* Both slots damaged. */
	copy_file(path, work);
	flip_byte(work, 512 + 60);
	flip_byte(work, 1024 + 60);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	/* Truncated files. */
	copy_file(path, work);
	cr_assert_eq(truncate(work, 100), 0);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);
	copy_file(path, work);
	cr_assert_eq(truncate(work, td_test_file_size(work) - 4096), 0);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);
	copy_file(path, work);
	cr_assert_eq(truncate(work, 0), 0);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);
}

/*
 * Damage with valid checksums (what a buggy writer or a forger makes):
 * extents outside the file or overlapping, shapes that overflow or that do
 * not start with the batch shape.
 */
Test(store_packed, well_sealed_but_inconsistent_indexes_are_refused)
{
	char path[4096], work[4096];
	td_store *st;
	off_t ix, base, x;

	snprintf(path, sizeof(path), "%s", two_slots("f.tds"));
	snprintf(work, sizeof(work), "%s", td_test_path("w.tds"));
	ix = (off_t)get_le64(path, 1024 + 8);
	/* Records: the root (48 + 8 = 56 bytes), "base" (48 + 8 + 4 -> 64), "x" (48 + 8 + 1 -> 64). */
	base = ix + 64 + 56;
	x = base + 64;
	cr_assert_eq(get_le64(path, base + 24), 16); /* base: 4 int32 */
	cr_assert_eq(get_le64(path, x + 24), 32);    /* x: 4 int64 */

	copy_file(path, work);
	put_le64(work, x + 16, get_le64(path, base + 16));
	reseal_index(work, ix);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	copy_file(path, work);
	put_le64(work, x + 16, (uint64_t)1 << 40);
	reseal_index(work, ix);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	copy_file(path, work);
	put_le64(work, x + 16, 4096 + 2048); /* not aligned */
	reseal_index(work, ix);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	copy_file(path, work);
	put_le64(work, x + 24, 33); /* length is not the byte size of the shape */
	reseal_index(work, ix);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	copy_file(path, work);
	put_le64(work, x + 48, 5); /* x's dim 0 is not the batch size 4 */
	reseal_index(work, ix);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	copy_file(path, work);
	put_le64(work, ix + 64 + 48, (uint64_t)1 << 62); /* batch and leaves of 2^62 rows */
	put_le64(work, base + 48, (uint64_t)1 << 62);
	put_le64(work, x + 48, (uint64_t)1 << 62);
	reseal_index(work, ix);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_EOVERFLOW);

	copy_file(path, work);
	patch(work, x + 4, "\x07\0\0\0", 4); /* a parent that comes after it */
	reseal_index(work, ix);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	copy_file(path, work);
	patch(work, x + 57, "\1", 1); /* padding after the key */
	reseal_index(work, ix);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	copy_file(path, work);
	patch(work, x + 56, "\0", 1); /* a NUL in a key */
	reseal_index(work, ix);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);

	/* A sealed newer slot whose fields are wrong is corruption too. */
	copy_file(path, work);
	put_le64(work, 1024 + 32, get_le64(path, 1024 + 32) + 4096 * 100); /* past the end */
	reseal_slot(work, 1024);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);
	copy_file(path, work);
	put_le64(work, 1024 + 8, 4096 + 100); /* an unaligned index */
	reseal_slot(work, 1024);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);
	copy_file(path, work);
	put_le64(work, 1024, 1); /* both slots of generation 1 */
	reseal_slot(work, 1024);
	td_cr_assert_err(td_store_open(&st, work, NULL), TD_ECORRUPT);
}

Test(store_packed, bad_arguments_and_paths)
{
	td_dict *d = golden_dict(), *b;
	td_store *st;
	static const uint8_t bytes[2] = { 1, 2 };

	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("no/such/dir/x.tds"),
						 td_test_memmap(TD_PLACEMENT_PACKED, 0)),
		TD_ENOTFOUND);
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("x.tds/"),
						 td_test_memmap(TD_PLACEMENT_PACKED, 0)),
		TD_EINVAL);
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("x.tds"),
						 &(td_store_memmap_opts){ 0, TD_PLACEMENT_PACKED, false, false,
							 TD_SYNC_FULL }),
		TD_EINVAL);
	td_cr_assert_ok(td_dict_new(&b, 0, NULL));
	td_cr_assert_ok(td_dict_set_bytes(b, "raw", bytes, sizeof(bytes)));
	td_cr_assert_err(td_store_memmap(&st, b, td_test_path("b.tds"),
						 td_test_memmap(TD_PLACEMENT_PACKED, 0)),
		TD_EINVAL);
	cr_assert_not(td_test_exists(td_test_path("b.tds")));
	td_dict_free(b);
	td_cr_assert_ok(td_dict_new(&b, 0, NULL));
	td_cr_assert_ok(td_dict_set_string(b, "shape", "reserved"));
	td_cr_assert_err(td_store_memmap(&st, b, td_test_path("b.tds"),
						 td_test_memmap(TD_PLACEMENT_PACKED, 0)),
		TD_EINVAL);
	td_dict_free(b);
	/* A directory where the file goes. */
	cr_assert_eq(mkdir(td_test_path("dir.tds"), 0777), 0);
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("dir.tds"),
						 td_test_memmap(TD_PLACEMENT_PACKED, TD_TEST_EXISTSOK)),
		TD_EEXISTS);
	/* A file that is not a store. */
	{
		FILE *f = fopen(td_test_path("junk"), "wb");

		cr_assert_not_null(f);
		for (int i = 0; i < 5000; i++)
			fputc('j', f);
		fclose(f);
	}
	td_cr_assert_err(td_store_open(&st, td_test_path("junk"), NULL), TD_ECORRUPT);
	td_dict_free(d);
}

/* ---- processes ---- */

#define RACERS 4
#define PER_RACER 12

/* Between its adds, each racer writes its slot of "base" through the mapping. */
static int write_base(td_store *mine, int racer, int j)
{
	const td_value *v;
	int rc = td_dict_get(&v, td_store_dict(mine), "base");

	if (rc == 0)
		((int32_t *)td_tensor_data(&v->tensor))[racer] = j;
	return rc;
}

Test(store_packed, processes_racing_schema_changes_lose_nothing)
{
	td_store *st = small_store("race.tds");
	const td_value *v;
	int i;

	td_store_close(st);
	st = td_test_race_adds(td_test_path("race.tds"), RACERS, PER_RACER, write_base);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "base"));
	for (i = 0; i < RACERS; i++)
		cr_assert_eq(((const int32_t *)td_tensor_data(&v->tensor))[i], PER_RACER - 1);
	td_store_close(st);
}

Test(store_packed, writers_killed_at_random_points_leave_a_file_that_opens_intact)
{
	enum { ITERATIONS = 200 };
	td_store *st = small_store("kill.tds"), *watch = NULL;
	uint64_t seed = 777;
	int it;

	td_store_close(st);
	td_cr_assert_ok(td_store_open(&watch, td_test_path("kill.tds"), NULL));
	for (it = 0; it < ITERATIONS; it++) {
		struct timespec delay = { 0, (long)(td_test_rand(&seed) % 3000000) };
		struct timespec poll = { 0, 100000 };
		uint64_t g0 = td_store_generation(watch);
		td_dict_iter *iter;
		td_item item;
		int64_t last;
		int status, waited;
		pid_t pid = fork();

		cr_assert(pid >= 0);
		if (pid == 0) {
			td_store *w;
			int k, rc = td_store_open(&w, td_test_path("kill.tds"), td_test_rw());

			/* Add leaves k<n> holding n, and remove every third, until killed. */
			for (k = it * 100000; rc == 0; k++) {
				char key[32];
				td_tensor t;

				snprintf(key, sizeof(key), "k%d", k);
				rc = td_tensor_full(&t, TD_DTYPE_I64, 1, td_dict_batch_shape(td_store_dict(w)),
					td_scalar_int(k));
				if (rc == 0)
					rc = td_store_add_tensor(w, key, &t);
				td_tensor_release(&t);
				if (rc == 0 && k % 3 == 0)
					rc = td_store_remove(w, key);
				/* Growth relocates every leaf past its extent's room now and then. */
				if (rc == 0 && k % 7 == 0)
					rc = td_store_grow(w, td_dict_batch_shape(td_store_dict(w))[0] + 300);
			}
			_exit(1);
		}
		for (waited = 0; td_store_generation(watch) == g0 && waited < 600000; waited++)
			nanosleep(&poll, NULL);
		nanosleep(&delay, NULL);
		kill(pid, SIGKILL);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(td_store_generation(watch) > g0, "iteration %d: the writer committed nothing",
			it);
		/* Every reopen succeeds and every committed leaf holds its value. */
		td_cr_assert_ok(td_store_open(&st, td_test_path("kill.tds"), it % 2 ? td_test_rw() : NULL));
		td_cr_assert_ok(td_dict_iter_new(&iter, td_store_dict(st), 0));
		while (td_dict_iter_next(&item, iter) == 1) {
			const int64_t *p = td_tensor_data(&item.value->tensor);
			int k;

			if (!strcmp(item.key, "base"))
				continue;
			cr_assert_eq(sscanf(item.key, "k%d", &k), 1, "key %s", item.key);
			cr_assert_eq(p[0], k, "%s holds %lld", item.key, (long long)p[0]);
			cr_assert_eq(p[3], k);
			/* Rows past the leaf's first size are its value or zero (grown). */
			last = p[td_tensor_shape(&item.value->tensor)[0] - 1];
			cr_assert(last == k || last == 0, "%s ends with %lld", item.key, (long long)last);
		}
		td_dict_iter_free(iter);
		td_store_close(st);
	}
	td_store_close(watch);
}

/* ---- growth along dim 0 ---- */

Test(store_packed, growth_keeps_values_zeroes_new_rows_and_is_seen_by_others)
{
	static const int64_t s43[] = { 4, 3 }, s4k[] = { 4, 1024 };
	td_store *st = small_store("g.tds"), *ro;
	td_tensor t, held_small, held_big;
	const td_value *v;
	bool changed;
	int i;

	td_test_arange(&t, TD_DTYPE_F32, 2, s4k); /* 16 KiB: exactly its extent */
	td_cr_assert_ok(td_store_add_tensor(st, "big", &t));
	td_tensor_release(&t);
	td_test_arange(&t, TD_DTYPE_F64, 2, s43);
	td_cr_assert_ok(td_store_add_tensor(st, "n.m", &t));
	td_tensor_release(&t);
	td_cr_assert_ok(td_store_open(&ro, td_test_path("g.tds"), NULL));
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "base"));
	td_tensor_ref(&held_small, &v->tensor);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "big"));
	td_tensor_ref(&held_big, &v->tensor);

	td_cr_assert_err(td_store_grow(st, 3), TD_EINVAL);
	td_cr_assert_err(td_store_grow(ro, 10), TD_EREADONLY);
	td_cr_assert_ok(td_store_grow(st, 4)); /* no change, no commit */
	cr_assert_eq(td_store_generation(st), 3);
	td_cr_assert_ok(td_store_grow(st, 10));
	cr_assert_eq(td_store_generation(st), 4);
	cr_assert_eq(td_dict_batch_shape(td_store_dict(st))[0], 10);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "n.m"));
	cr_assert_eq(td_tensor_shape(&v->tensor)[0], 10);
	cr_assert_eq(td_tensor_shape(&v->tensor)[1], 3);
	for (i = 0; i < 30; i++)
		cr_assert_eq(td_test_element(&v->tensor, i), i < 12 ? (double)i : 0.0, "%d", i);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "big"));
	for (i = 0; i < 10 * 1024; i += 511)
		cr_assert_eq(td_test_element(&v->tensor, i), i < 4096 ? (double)i : 0.0, "%d", i);
	/* A leaf grown in place still shares its pages with views taken before... */
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "base"));
	((int32_t *)td_tensor_data(&v->tensor))[1] = 77;
	cr_assert_eq(((const int32_t *)td_tensor_data(&held_small))[1], 77);
	/* ... one moved to a larger extent leaves them on its old bytes. */
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "big"));
	((float *)td_tensor_data(&v->tensor))[1] = 5.5f;
	cr_assert_eq(((const float *)td_tensor_data(&held_big))[1], 1.0f);
	td_tensor_release(&held_small);
	td_tensor_release(&held_big);

	td_cr_assert_ok(td_store_refresh(&changed, ro));
	cr_assert(changed);
	cr_assert_eq(td_dict_batch_shape(td_store_dict(ro))[0], 10);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(ro), "big"));
	cr_assert_eq(((const float *)td_tensor_data(&v->tensor))[1], 5.5f);
	td_store_close(ro);
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&ro, td_test_path("g.tds"), NULL));
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(ro), "base"));
	cr_assert_eq(((const int32_t *)td_tensor_data(&v->tensor))[1], 77);
	cr_assert_eq(((const int32_t *)td_tensor_data(&v->tensor))[9], 0);
	td_cr_assert_err(td_store_grow_leaf(ro, "base", 20), TD_EREADONLY);
	td_store_close(ro);
}

/* The offset of the first `needle` (of `len` bytes) in the file at or after `from`. */
static off_t find_bytes(const char *path, off_t from, const void *needle, size_t len)
{
	size_t flen;
	char *buf = read_file(path, &flen);
	size_t i;

	for (i = (size_t)from; i + len <= flen; i++)
		if (memcmp(buf + i, needle, len) == 0) {
			free(buf);
			return (off_t)i;
		}
	free(buf);
	cr_assert_fail("%.*s not found in %s", (int)len, (const char *)needle, path);
	return -1;
}

/* Forge field `off` of a record (8 bytes), reseal, and expect `want` from an open. */
static void forge64(const char *good, const char *work, off_t ix, off_t at, uint64_t v, int want,
	const char *why)
{
	td_store *st;
	int rc;

	copy_file(good, work);
	put_le64(work, at, v);
	reseal_index(work, ix);
	rc = td_store_open(&st, work, NULL);
	if (rc == TD_OK)
		td_store_close(st);
	cr_assert_eq(rc, want, "%s: got %d (%s)", why, rc, td_error_last()->message);
}

/*
 * A lazy stack record at `rec` given `n` children, its stack dim's size in
 * its batch shape (rec + 48 + 8) made to agree: the open must still refuse
 * it (the records present do not match).
 */
static void forge_child_count(const char *good, const char *work, off_t ix, off_t rec, uint64_t n)
{
	td_store *st;
	int rc;

	copy_file(good, work);
	put_le64(work, rec + 24, n);
	put_le64(work, rec + 48 + 8, n);
	reseal_index(work, ix);
	rc = td_store_open(&st, work, NULL);
	if (rc == TD_OK)
		td_store_close(st);
	cr_assert_eq(rc, TD_ECORRUPT, "%llu children: got %d (%s)", (unsigned long long)n, rc,
		td_error_last()->message);
}

static void forge_bytes(const char *good, const char *work, off_t ix, off_t at, const void *bytes,
	size_t len, int want, const char *why)
{
	td_store *st;
	int rc;

	copy_file(good, work);
	patch(work, at, bytes, len);
	reseal_index(work, ix);
	rc = td_store_open(&st, work, NULL);
	if (rc == TD_OK)
		td_store_close(st);
	cr_assert_eq(rc, want, "%s: got %d (%s)", why, rc, td_error_last()->message);
}

Test(store_packed, arrays_of_strings_round_trip_grow_and_bad_records_are_refused)
{
	static const char *const want[] = { "alpha", "b\xc3\xa9ta", "" };
	char path[4096], work[4096];
	td_dict *d = golden_strings_dict();
	const td_strings *s;
	td_store *st, *ro;
	off_t ix, rec;
	int i;

	snprintf(path, sizeof(path), "%s", td_test_path("s.tds"));
	snprintf(work, sizeof(work), "%s", td_test_path("w.tds"));
	td_cr_assert_ok(td_store_memmap(&st, d, path, td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	cr_assert(dicts_equal(td_store_dict(st), d));
	td_store_close(st);
	ix = (off_t)get_le64(path, 512 + 8); /* a new file commits in slot A */
	cr_assert_eq(get_le64(path, ix + 16) >> 32, 1, "index flag 1: arrays of strings");
	/* The record of "names": kind 4, one dim, key, then the texts with their NULs. */
	rec = find_bytes(path, ix, "names", 5) - 48 - 8;
	copy_file(path, work);

	/* Growth: the new rows are empty strings, also after a reopen. */
	td_cr_assert_ok(td_store_open(&st, path, td_test_rw()));
	td_cr_assert_ok(td_store_grow(st, 5));
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&ro, path, NULL));
	td_cr_assert_ok(td_dict_get_strings(&s, td_store_dict(ro), "names"));
	cr_assert_eq(s->numel, 5);
	for (i = 0; i < 5; i++)
		cr_assert_str_eq(td_strings_at(NULL, s, i), i < 3 ? want[i] : "");
	{
		td_cr_assert_ok(td_dict_get_strings(&s, td_store_dict(ro), "nested.grid"));
		cr_assert_eq(s->shape[0], 5);
		cr_assert_eq(s->shape[1], 2);
		cr_assert_str_eq(td_strings_at(NULL, s, 5), "f");
		cr_assert_str_eq(td_strings_at(NULL, s, 9), "");
	}
	td_store_close(ro);

	/* Without the index flag, a record of kind 4 is corrupt. */
	snprintf(path, sizeof(path), "%s", td_test_path("bad.tds"));
	forge_bytes(work, path, ix, ix + 20, "\0\0\0\0", 4, TD_ECORRUPT, "kind 4, flag clear");
	/* A text's NUL replaced: one text fewer than the shape has elements. */
	forge_bytes(work, path, ix, find_bytes(work, rec, "alpha", 6) + 5, "x", 1, TD_ECORRUPT,
		"a NUL missing");
	/* A shape that does not start with the batch shape. */
	forge64(work, path, ix, rec + 48, 2, TD_ECORRUPT, "shape against the batch");
	/* An array of strings without dims. */
	forge_bytes(work, path, ix, rec + 2, "\0", 1, TD_ECORRUPT, "no dims");
	/* Text that is not UTF-8. */
	forge_bytes(work, path, ix, find_bytes(work, rec, "alpha", 6), "\xff", 1, TD_ECORRUPT,
		"not UTF-8");
	/* The file as written still opens. */
	td_cr_assert_ok(td_store_open(&st, work, NULL));
	td_store_close(st);
	td_dict_free(d);
}

Test(store_packed, a_leaf_of_a_dict_without_batch_dims_grows_alone)
{
	static const int64_t s5[] = { 5 };
	td_dict *d, *sub;
	td_store *st;
	td_tensor t;
	const td_value *v;
	int i;

	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_test_arange(&t, TD_DTYPE_I16, 1, s5);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "x", &t));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I16, 0, NULL));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "scalar", &t));
	td_cr_assert_ok(td_dict_set_string(d, "s", "text"));
	td_cr_assert_ok(td_dict_new(&sub, 1, s5));
	td_cr_assert_ok(td_dict_set_dict_take(d, "n", sub));
	td_cr_assert_ok(
		td_store_memmap(&st, d, td_test_path("l.tds"), td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	td_dict_free(d);

	td_cr_assert_err(td_store_grow(st, 8), TD_EINVAL); /* no batch dims */
	td_cr_assert_ok(td_store_grow_leaf(st, "x", 3000));
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "x"));
	cr_assert_eq(td_tensor_shape(&v->tensor)[0], 3000);
	for (i = 0; i < 3000; i += 7)
		cr_assert_eq(td_test_element(&v->tensor, i), i < 5 ? (double)i : 0.0);
	td_cr_assert_err(td_store_grow_leaf(st, "x", 10), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf(st, "s", 10), TD_ETYPE);
	td_cr_assert_err(td_store_grow_leaf(st, "n", 10), TD_ETYPE);
	td_cr_assert_err(td_store_grow_leaf(st, "nope", 10), TD_ENOTFOUND);
	td_cr_assert_err(td_store_grow_leaf(st, "scalar", 10), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf(st, "x", INT64_MAX), TD_EOVERFLOW);
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&st, td_test_path("l.tds"), NULL));
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "x"));
	cr_assert_eq(td_tensor_shape(&v->tensor)[0], 3000);
	cr_assert_eq(td_test_element(&v->tensor, 4), 4.0);
	td_store_close(st);
}

/* ---- lazy stacks ---- */

/* Equal trees, lazy stacks included (ragged ones, which td_dict_equal() would densify). */
static bool trees_equal(const td_dict *a, const td_dict *b)
{
	const char *ka[64], *kb[64];
	const td_value *va[64], *vb[64];
	size_t n, i;

	if (td_dict_batch_ndim(a) != td_dict_batch_ndim(b) ||
		memcmp(td_dict_batch_shape(a), td_dict_batch_shape(b),
			(size_t)td_dict_batch_ndim(a) * sizeof(int64_t)) != 0)
		return false;
	if (td_dict_is_lazy(a) || td_dict_is_lazy(b)) {
		if (!td_dict_is_lazy(a) || !td_dict_is_lazy(b) || td_lazy_count(a) != td_lazy_count(b) ||
			td_lazy_stack_dim(a) != td_lazy_stack_dim(b))
			return false;
		for (i = 0; i < td_lazy_count(a); i++)
			if (!trees_equal(td_lazy_child(a, i), td_lazy_child(b, i)))
				return false;
		return true;
	}
	n = td_dict_items(ka, va, 64, a);
	if (n > 64 || n != td_dict_items(kb, vb, 64, b))
		return false;
	for (i = 0; i < n; i++) {
		if (strcmp(ka[i], kb[i]) != 0 || va[i]->kind != vb[i]->kind)
			return false;
		switch (va[i]->kind) {
		case TD_VALUE_DICT:
			if (!trees_equal(va[i]->dict, vb[i]->dict))
				return false;
			break;
		case TD_VALUE_TENSOR:
			if (va[i]->tensor.dtype != vb[i]->tensor.dtype ||
				td_tensor_equal(&va[i]->tensor, &vb[i]->tensor) != 1)
				return false;
			break;
		case TD_VALUE_STRINGS:
			if (va[i]->strings->numel != vb[i]->strings->numel ||
				va[i]->strings->ndim != vb[i]->strings->ndim ||
				memcmp(va[i]->strings->bytes, vb[i]->strings->bytes,
					(size_t)va[i]->strings->offsets[va[i]->strings->numel]) != 0)
				return false;
			break;
		default:
			if (va[i]->blob.length != vb[i]->blob.length ||
				memcmp(va[i]->blob.data, vb[i]->blob.data, va[i]->blob.length))
				return false;
			break;
		}
	}
	return true;
}

/* A child of batch [2]: "x" [2, w] float32 from `base`, and what `extra` says. */
static td_dict *lazy_child(int64_t w, int extra)
{
	static const char *const names[] = { "n\xc3\xb8", "" };
	const int64_t sx[] = { 2, w };
	static const int64_t B2[] = { 2 };
	const char *x[1] = { "x" }, *y[2] = { "sub", "y" };
	td_dict *d;

	td_cr_assert_ok(td_dict_new(&d, 1, B2));
	put_arange(d, x, 1, TD_DTYPE_F32, 2, sx);
	if (extra == 1)
		put_arange(d, y, 2, TD_DTYPE_I32, 1, B2);
	if (extra == 2) {
		td_cr_assert_ok(td_dict_set_strings(d, "names", 1, B2, names));
		td_cr_assert_ok(td_dict_set_string(d, "s", "two"));
	}
	return d;
}

/*
 * The dict of v1-lazy.tds (index flag 4): batch [2]; "a" [2, 3] int64; a
 * ragged lazy stack "stack" along dim 1 of three children (leaves of
 * different widths, keys of their own, strings in one); "after" [2] uint8.
 */
static td_dict *golden_lazy_dict(void)
{
	static const int64_t B2[] = { 2 }, s23[] = { 2, 3 };
	const char *a[1] = { "a" }, *after[1] = { "after" };
	td_dict *d, *kids[3], *stack;

	td_cr_assert_ok(td_dict_new(&d, 1, B2));
	put_arange(d, a, 1, TD_DTYPE_I64, 2, s23);
	kids[0] = lazy_child(4, 0);
	kids[1] = lazy_child(5, 1);
	kids[2] = lazy_child(1, 2);
	td_cr_assert_ok(td_lazy_stack(&stack, kids, 3, 1, TD_LAZY_TAKE));
	td_cr_assert_ok(td_dict_set_dict_take(d, "stack", stack));
	put_arange(d, after, 1, TD_DTYPE_U8, 1, B2);
	return d;
}

/* A root lazy stack along dim 0 of two stacks (along dim 1) of two children each. */
static td_dict *stack_of_stacks(void)
{
	td_dict *inner[2], *outer, *k[2];
	int i;

	for (i = 0; i < 2; i++) {
		k[0] = lazy_child(2 + i, i);
		k[1] = lazy_child(3, 2);
		td_cr_assert_ok(td_lazy_stack(&inner[i], k, 2, 1, TD_LAZY_TAKE));
	}
	td_cr_assert_ok(td_lazy_stack(&outer, inner, 2, 0, TD_LAZY_TAKE));
	return outer;
}

static void check_round_trip(const td_dict *d, const char *name)
{
	td_store *st, *ro;

	td_cr_assert_ok(
		td_store_memmap(&st, d, td_test_path(name), td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	cr_assert_eq(td_dict_is_lazy(td_store_dict(st)), td_dict_is_lazy(d));
	cr_assert(trees_equal(td_store_dict(st), d), "%s: the written store", name);
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&ro, td_test_path(name), NULL));
	cr_assert_eq(td_dict_is_lazy(td_store_dict(ro)), td_dict_is_lazy(d));
	cr_assert(trees_equal(td_store_dict(ro), d), "%s: the reopened store", name);
	td_store_close(ro);
}

Test(store_packed, lazy_stacks_root_nested_ragged_and_stacked_round_trip)
{
	td_dict *d = golden_lazy_dict(), *root, *kids[2], *s;
	const td_value *v;
	td_store *ro;

	check_round_trip(d, "nested.tds");
	/* The nested stack is a lazy stack again, in its place among the keys. */
	td_cr_assert_ok(td_store_open(&ro, td_test_path("nested.tds"), NULL));
	{
		const char *keys[3];

		cr_assert_eq(td_dict_items(keys, NULL, 3, td_store_dict(ro)), 3);
		cr_assert_str_eq(keys[1], "stack");
	}
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(ro), "stack"));
	cr_assert_eq(v->kind, TD_VALUE_DICT);
	cr_assert(td_dict_is_lazy(v->dict));
	cr_assert_eq(td_lazy_count(v->dict), 3);
	cr_assert_eq(td_lazy_stack_dim(v->dict), 1);
	td_store_close(ro);
	td_dict_free(d);

	/* A root stack (along dim 0, ragged), and a stack of stacks. */
	kids[0] = lazy_child(4, 1);
	kids[1] = lazy_child(6, 2);
	td_cr_assert_ok(td_lazy_stack(&root, kids, 2, 0, TD_LAZY_TAKE));
	check_round_trip(root, "root.tds");
	td_dict_free(root);
	s = stack_of_stacks();
	check_round_trip(s, "stacks.tds");
	td_dict_free(s);
	/* A one-child stack along the last dim. */
	kids[0] = lazy_child(3, 0);
	td_cr_assert_ok(td_lazy_stack(&root, kids, 1, -1, TD_LAZY_TAKE));
	check_round_trip(root, "one.tds");
	td_dict_free(root);
}

Test(store_packed, a_store_holding_a_lazy_stack_writes_data_but_refuses_schema_changes)
{
	td_dict *d = golden_lazy_dict();
	td_store *st;
	td_tensor t, got;
	const td_value *v;

	td_cr_assert_ok(
		td_store_memmap(&st, d, td_test_path("w.tds"), td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_I64, 1, B3, td_scalar_int(1)));
	td_cr_assert_err(td_store_add_tensor(st, "stack.a", &t), TD_ENOTSUP);
	td_cr_assert_err(td_store_remove(st, "a"), TD_ENOTSUP);
	td_cr_assert_err(td_store_grow(st, 4), TD_ENOTSUP);
	td_tensor_release(&t);
	td_store_close(st);

	/* Writes through the views reach the file: a leaf of the root, one of a child. */
	td_cr_assert_ok(td_store_open(&st, td_test_path("w.tds"), td_test_rw()));
	td_cr_assert_err(td_store_grow(st, 4), TD_ENOTSUP);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "a"));
	((int64_t *)td_tensor_data(&v->tensor))[4] = -7;
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "stack"));
	{
		td_dict *kid = td_lazy_child(v->dict, 1);
		const td_value *y;

		td_cr_assert_ok(td_dict_get(&y, kid, "sub.y"));
		((int32_t *)td_tensor_data(&y->tensor))[1] = 99;
	}
	td_cr_assert_ok(td_store_sync(st));
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&st, td_test_path("w.tds"), NULL));
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "a"));
	cr_assert_eq(((const int64_t *)td_tensor_data(&v->tensor))[4], -7);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "stack"));
	{
		const td_value *y;

		td_cr_assert_ok(td_dict_get(&y, td_lazy_child(v->dict, 1), "sub.y"));
		cr_assert_eq(((const int32_t *)td_tensor_data(&y->tensor))[1], 99);
		cr_assert_eq(((const int32_t *)td_tensor_data(&y->tensor))[0], 0);
	}
	(void)got;
	td_store_close(st);
	td_dict_free(d);
}

Test(store_packed, well_sealed_but_bad_lazy_stack_records_are_refused)
{
	char good[4096], work[4096];
	td_dict *d = golden_lazy_dict();
	td_store *st;
	off_t ix, rec, kid;

	snprintf(good, sizeof(good), "%s", td_test_path("lazy.tds"));
	snprintf(work, sizeof(work), "%s", td_test_path("w.tds"));
	td_cr_assert_ok(td_store_memmap(&st, d, good, td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	td_store_close(st);
	ix = (off_t)get_le64(good, 512 + 8);
	cr_assert_eq(get_le64(good, ix + 16) >> 32, 5, "index flags 1 (strings) and 4 (lazy stacks)");
	/* The stack's record: kind 5, two dims [2, 3], key "stack" (48 + 16 + 5 -> 72). */
	rec = find_bytes(good, ix, "stack", 5) - 48 - 16;
	cr_assert_eq(get_le64(good, rec) & 0xff, 5);
	cr_assert_eq(get_le64(good, rec + 16), 1, "stack dim");
	cr_assert_eq(get_le64(good, rec + 24), 3, "children");
	kid = rec + 72; /* its first child: a dict of batch [2], no key */
	cr_assert_eq(get_le64(good, kid) & 0xff, 1);

	/* Child count against the records present, and against the stack dim's size. */
	forge64(good, work, ix, rec + 24, 4, TD_ECORRUPT, "count 4, stack dim of 3");
	forge_child_count(good, work, ix, rec, 4);
	forge_child_count(good, work, ix, rec, 2);
	/* No children; more than 2^20; a count that would overflow. */
	forge_child_count(good, work, ix, rec, 0);
	forge_child_count(good, work, ix, rec, ((uint64_t)1 << 20) + 1);
	forge64(good, work, ix, rec + 24, UINT64_MAX, TD_ECORRUPT, "count 2^64 - 1");
	/* The stack dim: past the batch dims, or another dim (of size 2, not 3). */
	forge64(good, work, ix, rec + 16, 2, TD_ECORRUPT, "stack dim 2 of 2 dims");
	forge64(good, work, ix, rec + 16, UINT64_MAX, TD_ECORRUPT, "stack dim 2^64 - 1");
	forge64(good, work, ix, rec + 16, 0, TD_ECORRUPT, "stack dim 0");
	/* The stack's batch shape not starting with its dict's. */
	forge64(good, work, ix, rec + 48, 3, TD_ECORRUPT, "stack batch [3, 3] in a [2] dict");
	/* A child's batch shape that is not the stack's without the stack dim. */
	forge64(good, work, ix, kid + 48, 3, TD_ECORRUPT, "child of batch [3]");
	forge_bytes(good, work, ix, kid + 2, "\0", 1, TD_ECORRUPT, "child without batch dims");
	/* A child that is not a dict (a string: no dims, no fields). */
	forge_bytes(good, work, ix, kid, "\3", 1, TD_ECORRUPT, "child of kind string");
	/* A child after a parent that does not come before it. */
	forge_bytes(good, work, ix, kid + 4, "\xff\xff\0\0", 4, TD_ECORRUPT, "child's parent after it");
	/* Unused fields of the stack record. */
	forge64(good, work, ix, rec + 32, 4096, TD_ECORRUPT, "stack with a capacity");
	forge_bytes(good, work, ix, rec + 1, "\5", 1, TD_ECORRUPT, "stack with a dtype");
	/* The stack record without its index flag; with the directory flag. */
	forge_bytes(good, work, ix, ix + 20, "\1\0\0\0", 4, TD_ECORRUPT, "lazy record, flag clear");
	forge_bytes(good, work, ix, ix + 20, "\7\0\0\0", 4, TD_ECORRUPT,
		"lazy flag in a directory index");
	/* A flag bit beyond this build: unsupported. */
	forge_bytes(good, work, ix, ix + 20, "\x0d\0\0\0", 4, TD_ENOTSUP, "flag bit 3");
	/* The file as written opens. */
	td_cr_assert_ok(td_store_open(&st, good, NULL));
	td_store_close(st);
	td_dict_free(d);
}

Test(store_packed, the_golden_lazy_file_opens_and_is_written_byte_for_byte)
{
	const char *mine = td_test_path("v1-lazy.tds"), *regen = getenv("TD_WRITE_GOLDEN");
	td_dict *d = golden_lazy_dict();
	td_store *st, *ro;
	const td_value *v;
	size_t a_len, b_len;
	void *a, *b;

	td_cr_assert_ok(td_store_memmap(&st, d, mine, td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	td_store_close(st);
	if (regen && strcmp(regen, "lazy") == 0) {
		/* Made once, when lazy stacks entered the format: never regenerated. */
		copy_file(mine, golden_path("v1-lazy.tds"));
	}
	td_cr_assert_ok(td_store_open(&ro, golden_path("v1-lazy.tds"), NULL));
	cr_assert(trees_equal(td_store_dict(ro), d));
	cr_assert_eq(td_store_generation(ro), 1);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(ro), "stack"));
	cr_assert(td_dict_is_lazy(v->dict));
	{
		const td_value *y, *x;

		td_cr_assert_ok(td_dict_get(&y, td_lazy_child(v->dict, 1), "sub.y"));
		cr_assert_eq(td_test_element(&y->tensor, 1), 1.0);
		td_cr_assert_ok(td_dict_get(&x, td_lazy_child(v->dict, 2), "x"));
		cr_assert_eq(td_tensor_shape(&x->tensor)[1], 1);
	}
	td_store_close(ro);
	a = read_file(mine, &a_len);
	b = read_file(golden_path("v1-lazy.tds"), &b_len);
	cr_assert_eq(a_len, b_len, "%zu bytes, golden %zu", a_len, b_len);
	cr_assert(memcmp(a, b, a_len) == 0, "v1-lazy.tds differs from the golden file");
	free(a);
	free(b);
	td_dict_free(d);
}

Test(store_packed, an_index_nested_past_64_levels_is_refused)
{
	char good[4096], work[4096];
	td_dict *root, *chain, *z, *w;
	td_store *st;
	off_t ix, zrec;
	int i;

	/* "a" holds 62 nested dicts (the deepest at depth 62); "z" holds "w". */
	td_cr_assert_ok(td_dict_new(&chain, 0, NULL));
	for (i = 0; i < 61; i++) {
		td_dict *up;

		td_cr_assert_ok(td_dict_new(&up, 0, NULL));
		td_cr_assert_ok(td_dict_set_dict_take(up, "a", chain));
		chain = up;
	}
	td_cr_assert_ok(td_dict_new(&root, 0, NULL));
	td_cr_assert_ok(td_dict_set_dict_take(root, "a", chain));
	td_cr_assert_ok(td_dict_new(&z, 0, NULL));
	td_cr_assert_ok(td_dict_new(&w, 0, NULL));
	td_cr_assert_ok(td_dict_set_dict_take(z, "w", w));
	td_cr_assert_ok(td_dict_set_dict_take(root, "z", z));
	snprintf(good, sizeof(good), "%s", td_test_path("deep.tds"));
	snprintf(work, sizeof(work), "%s", td_test_path("w.tds"));
	td_cr_assert_ok(td_store_memmap(&st, root, good, td_test_memmap(TD_PLACEMENT_PACKED, 0)));
	td_store_close(st);
	ix = (off_t)get_le64(good, 512 + 8);
	/* Records: the root (48 bytes), 62 of "a" (56 each), "z", "w". */
	zrec = ix + 64 + 48 + 56 * 62;
	cr_assert_eq(get_le64(good, zrec + 8) & 0xffffffff, 1, "z's key length");
	cr_assert_eq(get_le64(good, zrec + 48) & 0xff, 'z');
	/* "z" moved under the deepest "a" (record 62): "w" is 64 levels down. */
	forge_bytes(good, work, ix, zrec + 4, "\x3e\0\0\0", 4, TD_ECORRUPT, "w at depth 64");
	cr_assert_not_null(strstr(td_error_last()->message, "too deep"), "%s",
		td_error_last()->message);
	/* Under the one above (record 61): "w" is at depth 63, which opens. */
	copy_file(good, work);
	patch(work, zrec + 4, "\x3d\0\0\0", 4);
	reseal_index(work, ix);
	td_cr_assert_ok(td_store_open(&st, work, NULL));
	td_store_close(st);
	td_dict_free(root);
}
