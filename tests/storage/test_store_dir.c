/* SPDX-License-Identifier: MIT */
/*
 * test_store_dir.c - the directory placement (tensordict's memmap layout):
 * writing a dict, reopening it read-only and read-write, key encoding,
 * zero-element leaves, existsok / like, what lives on after close, and every
 * kind of bad directory: broken or hostile meta.json, short, missing and
 * symlinked files, overflowing shapes, unsupported content.
 */
#define _GNU_SOURCE /* SEEK_HOLE */
#include "td_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(store_dir, .init = td_test_tmpdir_init, .fini = td_test_tmpdir_fini);

/* ---- helpers ---- */

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f, "cannot create %s", path);
	cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
	cr_assert_eq(fclose(f), 0);
}

static void write_zeros(const char *path, size_t n)
{
	FILE *f = fopen(path, "wb");
	size_t i;

	cr_assert_not_null(f, "cannot create %s", path);
	for (i = 0; i < n; i++)
		cr_assert_eq(fputc(0, f), 0);
	cr_assert_eq(fclose(f), 0);
}

/* A symbolic link at `rel` to a file "victim" of `n` zeros: a leaf file that is refused. */
static void link_to_victim(const char *rel, size_t n)
{
	char victim[4200];

	snprintf(victim, sizeof(victim), "%s", td_test_path("victim"));
	write_zeros(victim, n);
	cr_assert_eq(symlink(victim, td_test_path(rel)), 0, "symlink %s", rel);
}

/* The whole file as a NUL-terminated string (static buffer). */
static const char *read_text(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "rb");
	size_t n;

	cr_assert_not_null(f, "cannot open %s", path);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static void put_arange(td_dict *d, const char *key, td_dtype dtype, int ndim, const int64_t *shape)
{
	td_tensor t;

	td_test_arange(&t, dtype, ndim, shape);
	td_cr_assert_ok(td_dict_set_tensor_take(d, key, &t));
}

/* A dict with every dtype, a nested dict with a longer batch, and strings. */
static td_dict *sample_dict(void)
{
	static const int64_t b[] = { 3, 4 }, s5[] = { 3, 4, 5 }, s345[] = { 3, 4, 5, 2 };
	td_dict *d, *sub;
	size_t i;

	td_cr_assert_ok(td_dict_new(&d, 2, b));
	for (i = 0; i < TD_DTYPE_COUNT; i++)
		put_arange(d, td_dtype_name(td_test_all_dtypes[i]), td_test_all_dtypes[i], 3, s5);
	td_cr_assert_ok(td_dict_new(&sub, 3, s5));
	put_arange(sub, "x", TD_DTYPE_I64, 4, s345);
	td_cr_assert_ok(td_dict_set_string(sub, "label", "héllo ✓"));
	td_cr_assert_ok(td_dict_set_dict_take(d, "sub", sub));
	td_cr_assert_ok(td_dict_set_string(d, "name", "hello"));
	return d;
}

static void assert_dicts_equal(const td_dict *a, const td_dict *b)
{
	int eq = td_dict_equal(a, b);

	cr_assert_eq(eq, 1, "dicts differ (%d): %s", eq, td_error_last()->message);
}

static td_store *open_ok(const char *path, const td_store_open_opts *opts)
{
	td_store *st = NULL;

	td_cr_assert_ok(td_store_open(&st, path, opts));
	cr_assert_not_null(st);
	return st;
}

/* A store directory holding only the given meta.json. */
static const char *dir_with_meta(const char *name, const char *meta)
{
	static char dir[4096];
	char path[4200];

	snprintf(dir, sizeof(dir), "%s", td_test_path(name));
	cr_assert_eq(mkdir(dir, 0777), 0);
	snprintf(path, sizeof(path), "%s/meta.json", dir);
	write_text(path, meta);
	return dir;
}

static void assert_open_fails(const char *path, const td_store_open_opts *opts, int code)
{
	td_store *st = (td_store *)0x1;

	td_cr_assert_err(td_store_open(&st, path, opts), code);
	cr_assert_null(st);
}

/* ---- writing and reading back ---- */

Test(store_dir, memmap_then_open_gives_the_same_dict)
{
	td_dict *d = sample_dict();
	td_store *st, *ro;
	const td_value *v;

	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("s"), NULL));
	cr_assert_str_eq(td_store_path(st), td_test_path("s"));
	cr_assert_eq(td_store_placement(st), TD_PLACEMENT_DIRECTORY);
	cr_assert(td_store_is_writable(st));
	cr_assert(td_dict_is_locked(td_store_dict(st)));
	assert_dicts_equal(td_store_dict(st), d);
	td_store_close(st);

	ro = open_ok(td_test_path("s"), NULL);
	assert_dicts_equal(td_store_dict(ro), d);
	cr_assert(td_dict_is_locked(td_store_dict(ro)));
	cr_assert_eq(td_store_placement(ro), TD_PLACEMENT_DIRECTORY);
	cr_assert_not(td_store_is_writable(ro));
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(ro), "float32"));
	cr_assert_eq(td_buffer_memory(v->tensor.buffer), TD_MEMORY_FILE);
	cr_assert_eq(td_buffer_flags(v->tensor.buffer), TD_BUFFER_READONLY);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(ro), "sub.label"));
	cr_assert_eq(v->kind, TD_VALUE_STRING);
	cr_assert_str_eq(v->blob.data, "héllo ✓");
	td_cr_assert_ok(td_store_sync(ro));
	td_store_close(ro);
	td_dict_free(d);
}

Test(store_dir, files_and_meta_json_follow_tensordicts_layout)
{
	static const int64_t b[] = { 3, 4 }, s5[] = { 3, 4, 5 }, s1[] = { 3, 4, 1 };
	td_dict *d;
	td_store *st;

	td_cr_assert_ok(td_dict_new(&d, 2, b));
	put_arange(d, "obs", TD_DTYPE_F32, 3, s5);
	put_arange(d, "action", TD_DTYPE_I64, 2, b);
	put_arange(d, "done", TD_DTYPE_BOOL, 3, s1);
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("p"), NULL));
	td_store_close(st);
	/* Byte for byte what Python's json.dumps writes for TensorDict.memmap. */
	cr_assert_str_eq(read_text(td_test_path("p/meta.json")),
		"{\"obs\": {\"device\": \"cpu\", \"shape\": [3, 4, 5], \"dtype\": \"torch.float32\", "
		"\"is_nested\": false}, \"action\": {\"device\": \"cpu\", \"shape\": [3, 4], "
		"\"dtype\": \"torch.int64\", \"is_nested\": false}, \"done\": {\"device\": \"cpu\", "
		"\"shape\": [3, 4, 1], \"dtype\": \"torch.bool\", \"is_nested\": false}, "
		"\"shape\": [3, 4], \"device\": \"cpu\", "
		"\"_type\": \"<class 'tensordict._td.TensorDict'>\", \"_format_version\": 1, "
		"\"_class\": \"tensordict:TensorDict\"}");
	cr_assert_eq(td_test_file_size(td_test_path("p/obs.memmap")), 240);
	cr_assert_eq(td_test_file_size(td_test_path("p/action.memmap")), 96);
	cr_assert_eq(td_test_file_size(td_test_path("p/done.memmap")), 12);
	td_dict_free(d);
}

Test(store_dir, nested_dicts_and_strings_get_their_own_directories)
{
	td_dict *d = sample_dict();
	td_store *st;

	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("n"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_NOSYNC)));
	td_store_close(st);
	cr_assert(
		strstr(read_text(td_test_path("n/meta.json")), "\"sub\": {\"type\": \"TensorDict\"}"));
	cr_assert(
		strstr(read_text(td_test_path("n/meta.json")), "\"name\": {\"type\": \"NonTensorData\"}"));
	cr_assert_str_eq(read_text(td_test_path("n/name/meta.json")),
		"{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", "
		"\"data\": \"hello\", \"_metadata\": null, \"_is_non_tensor\": true}");
	/* Non-ASCII text is escaped as Python's json.dumps does (ensure_ascii). */
	cr_assert(strstr(read_text(td_test_path("n/sub/label/meta.json")),
		"\"data\": \"h\\u00e9llo \\u2713\""));
	cr_assert(strstr(read_text(td_test_path("n/sub/meta.json")), "\"shape\": [3, 4, 5]"));
	cr_assert(td_test_exists(td_test_path("n/sub/x.memmap")));
	td_dict_free(d);
}

Test(store_dir, read_write_stores_write_through_to_the_files)
{
	static const int64_t b[] = { 4 };
	td_dict *d;
	td_store *a, *b2, *ro;
	const td_value *va, *vb;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	put_arange(d, "x", TD_DTYPE_F64, 1, b);
	td_cr_assert_ok(td_store_memmap(&a, d, td_test_path("w"), NULL));
	td_store_close(a);

	a = open_ok(td_test_path("w"), td_test_rw());
	b2 = open_ok(td_test_path("w"), td_test_rw());
	td_cr_assert_ok(td_dict_get(&va, td_store_dict(a), "x"));
	td_cr_assert_ok(td_dict_get(&vb, td_store_dict(b2), "x"));
	cr_assert_eq(td_buffer_flags(va->tensor.buffer), 0u);
	/* Two mappings of one file: a write through one is seen through the other. */
	td_cr_assert_ok(td_tensor_fill((td_tensor *)&va->tensor, td_scalar_float(7.5)));
	cr_assert_eq(((double *)td_tensor_data(&vb->tensor))[3], 7.5);
	td_cr_assert_ok(td_store_sync(a));
	td_store_close(a);
	td_store_close(b2);

	ro = open_ok(td_test_path("w"), NULL);
	td_cr_assert_ok(td_dict_get(&va, td_store_dict(ro), "x"));
	cr_assert_eq(((double *)td_tensor_data(&va->tensor))[0], 7.5);
	/* A read-only store refuses writes and leaves the data alone. */
	td_cr_assert_err(td_tensor_fill((td_tensor *)&va->tensor, td_scalar_float(1)), TD_EREADONLY);
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F64, 1, b));
	td_cr_assert_err(td_dict_set_tensor_inplace(td_store_dict(ro), "x", &t), TD_EREADONLY);
	cr_assert_eq(((double *)td_tensor_data(&va->tensor))[0], 7.5);
	/* The dict is locked: no new keys. */
	td_cr_assert_err(td_dict_set_tensor(td_store_dict(ro), "y", &t), TD_ELOCKED);
	td_tensor_release(&t);
	td_store_close(ro);
	td_dict_free(d);
}

Test(store_dir, tensors_taken_from_a_store_outlive_it)
{
	static const int64_t b[] = { 1000 };
	td_dict *d;
	td_store *st;
	const td_value *v;
	td_tensor keep;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	put_arange(d, "x", TD_DTYPE_I32, 1, b);
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("o"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_NOSYNC)));
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "x"));
	td_tensor_ref(&keep, &v->tensor);
	td_store_close(st);
	cr_assert_eq(((int32_t *)td_tensor_data(&keep))[999], 999);
	td_tensor_release(&keep);
	td_dict_free(d);
	td_store_close(NULL);
	cr_assert_null(td_store_dict(NULL));
	cr_assert_null(td_store_path(NULL));
	cr_assert_eq(td_store_placement(NULL), TD_PLACEMENT_DIRECTORY);
	cr_assert_not(td_store_is_writable(NULL));
	td_cr_assert_err(td_store_sync(NULL), TD_EINVAL);
}

Test(store_dir, syncing_many_leaves_flushes_the_file_system_once)
{
	static const int64_t b[] = { 16 };
	char key[16], moved[4200];
	td_dict *d;
	td_store *st, *ro;
	const td_value *v;
	int i;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	for (i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put_arange(d, key, TD_DTYPE_I32, 1, b);
	}
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("many"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_NOSYNC)));
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "k19"));
	((int32_t *)td_tensor_data(&v->tensor))[15] = -5;
	td_cr_assert_ok(td_store_sync(st)); /* 20 mappings: one syncfs */
	ro = open_ok(td_test_path("many"), NULL);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(ro), "k19"));
	cr_assert_eq(((const int32_t *)td_tensor_data(&v->tensor))[15], -5);
	td_cr_assert_ok(td_store_sync(ro)); /* read-only: nothing to do */
	td_store_close(ro);
	/* A store whose directory went away cannot be synced: an error, not a crash. */
	snprintf(moved, sizeof(moved), "%s", td_test_path("moved"));
	cr_assert_eq(rename(td_test_path("many"), moved), 0);
	td_cr_assert_err(td_store_sync(st), TD_ENOTFOUND);
	/* Closing does not sync, so it records no error, and it cannot fail. */
	td_error_clear();
	td_store_close(st);
	cr_assert_eq(td_error_last()->code, TD_OK, "%s", td_error_last()->message);
	td_dict_free(d);
}

Test(store_dir, strided_and_converted_sources_are_written_in_c_order)
{
	static const int64_t b[] = { 3 }, s43[] = { 4, 3 };
	static const int perm[] = { 1, 0 };
	td_tensor t, p, c;
	td_dict *d;
	td_store *st;
	const td_value *v;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	td_test_arange(&t, TD_DTYPE_I16, 2, s43);
	td_cr_assert_ok(td_tensor_permute(&p, &t, perm));
	td_cr_assert_ok(td_dict_set_tensor(d, "t", &p));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("c"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_NOSYNC)));
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "t"));
	cr_assert(td_tensor_is_contiguous(&v->tensor));
	cr_assert_eq(td_tensor_shape(&v->tensor)[0], 3);
	td_cr_assert_ok(td_tensor_contiguous(&c, &p));
	cr_assert_eq(memcmp(td_tensor_data(&v->tensor), td_tensor_data(&c), 24), 0);
	cr_assert_eq(td_tensor_equal(&v->tensor, &p), 1);
	td_tensor_release(&c);
	td_tensor_release(&p);
	td_tensor_release(&t);
	td_store_close(st);
	td_dict_free(d);
}

Test(store_dir, every_block_of_every_leaf_file_is_allocated)
{
	static const unsigned flags[] = { 0, TD_TEST_NOSYNC, TD_TEST_LIKE };
	static const int64_t s1[] = { 1250 }, s2[] = { 1 }, s3[] = { 700, 3 };
	static const char *const files[] = { "odd.memmap", "byte.memmap", "strided.memmap" };
	size_t i, k;

	for (i = 0; i < TD_TEST_ARRAY_LEN(flags); i++) {
		char dir[32], path[4200];
		td_dict *d;
		td_store *st;
		td_tensor t, tr;

		td_cr_assert_ok(td_dict_new(&d, 0, NULL));
		put_arange(d, "odd", TD_DTYPE_F32, 1, s1);
		put_arange(d, "byte", TD_DTYPE_U8, 1, s2);
		td_test_arange(&t, TD_DTYPE_F64, 2, s3);
		td_cr_assert_ok(td_tensor_transpose(&tr, &t, 0, 1));
		td_cr_assert_ok(td_dict_set_tensor(d, "strided", &tr));
		snprintf(dir, sizeof(dir), "a%zu", i);
		td_cr_assert_ok(td_store_memmap(&st, d, td_test_path(dir),
			td_test_memmap(TD_PLACEMENT_DIRECTORY, flags[i])));
		/* Written or fallocated, every block is reserved: no hole a mapping could fault on. */
		for (k = 0; k < TD_TEST_ARRAY_LEN(files); k++) {
			struct stat sb;
			int fd;

			snprintf(path, sizeof(path), "%s/%s", td_test_path(dir), files[k]);
			fd = open(path, O_RDONLY);
			cr_assert(fd >= 0, "%s", path);
			cr_assert_eq(fstat(fd, &sb), 0);
			cr_assert_geq((int64_t)sb.st_blocks * 512, (int64_t)sb.st_size,
				"%s, flags 0x%x: %lld blocks of 512 for %lld bytes", files[k], flags[i],
				(long long)sb.st_blocks, (long long)sb.st_size);
			if (!(flags[i] & TD_TEST_LIKE))
				cr_assert_eq(lseek(fd, 0, SEEK_HOLE), sb.st_size, "%s: a hole", files[k]);
			close(fd);
		}
		if (!(flags[i] & TD_TEST_LIKE)) {
			const td_value *v;

			td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "strided"));
			cr_assert_eq(td_tensor_equal(&v->tensor, &tr), 1);
		}
		td_store_close(st);
		td_tensor_release(&tr);
		td_tensor_release(&t);
		td_dict_free(d);
	}
}

Test(store_dir, zero_element_leaves_have_no_file)
{
	static const int64_t b0[] = { 0 }, s03[] = { 0, 3 }, b2[] = { 2 }, s20[] = { 2, 0 };
	td_dict *d, *e;
	td_store *st;
	const td_value *v;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 1, b0));
	td_cr_assert_ok(td_tensor_empty(&t, TD_DTYPE_F32, 2, s03));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "x", &t));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("z"), NULL));
	td_store_close(st);
	cr_assert_not(td_test_exists(td_test_path("z/x.memmap")));
	st = open_ok(td_test_path("z"), NULL);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "x"));
	cr_assert_eq(v->tensor.ndim, 2);
	cr_assert_eq(td_tensor_shape(&v->tensor)[1], 3);
	cr_assert_eq(td_tensor_numel(&v->tensor), 0);
	td_store_close(st);

	td_cr_assert_ok(td_dict_new(&e, 1, b2));
	td_cr_assert_ok(td_tensor_empty(&t, TD_DTYPE_U8, 2, s20));
	td_cr_assert_ok(td_dict_set_tensor_take(e, "y", &t));
	td_cr_assert_ok(td_store_memmap(&st, e, td_test_path("z2"), NULL));
	td_store_close(st);
	cr_assert_not(td_test_exists(td_test_path("z2/y.memmap")));
	st = open_ok(td_test_path("z2"), td_test_rw());
	assert_dicts_equal(td_store_dict(st), e);
	td_store_close(st);
	td_dict_free(d);
	td_dict_free(e);
}

/* ---- key encoding ---- */

Test(store_dir, keys_are_encoded_as_tensordict_encodes_them)
{
	static const struct {
		const char *key, *enc;
	} cases[] = {
		{ "", "%" },
		{ ".", "%2E" },
		{ "..", "%2E%2E" },
		{ "...", "..." },
		{ "a/b/c", "a%2Fb%2Fc" },
		{ "my key", "my%20key" },
		{ "50%", "50%25" },
		{ "a.b", "a.b" },
		{ "tab\there", "tab%09here" },
		{ "<>:\"|?*\\", "%3C%3E%3A%22%7C%3F%2A%5C" },
		{ "\x7f", "%7F" },
		{ "héllo", "héllo" },
		{ "plain_Key-1", "plain_Key-1" },
	};
	char buf[64];
	size_t i;

	for (i = 0; i < TD_TEST_ARRAY_LEN(cases); i++) {
		int n = td_store_encode_key(buf, sizeof(buf), cases[i].key);

		cr_assert_eq(n, (int)strlen(cases[i].enc), "key %zu", i);
		cr_assert_str_eq(buf, cases[i].enc);
		cr_assert_eq(td_store_encode_key(NULL, 0, cases[i].key), n);
	}
	/* Like snprintf: the full length is returned; only whole escapes are written. */
	cr_assert_eq(td_store_encode_key(buf, 4, "ab cd"), 7);
	cr_assert_str_eq(buf, "ab");
	cr_assert_eq(td_store_encode_key(buf, 4, "abcdef"), 6);
	cr_assert_str_eq(buf, "abc");
	cr_assert_eq(td_store_encode_key(buf, 2, ".."), 6);
	cr_assert_str_eq(buf, "%");
	td_cr_assert_err(td_store_encode_key(buf, 4, NULL), TD_EINVAL);
	td_cr_assert_err(td_store_encode_key(NULL, 4, "x"), TD_EINVAL);
}

Test(store_dir, keys_needing_encoding_round_trip)
{
	static const char *keys[] = { "a/b", "my key", "50%", "", ".", "..", "tab\there", "q?*" };
	static const int64_t b[] = { 2 };
	td_dict *d;
	td_store *st;
	size_t i;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	for (i = 0; i < TD_TEST_ARRAY_LEN(keys); i++) {
		td_key *k = td_test_key(&keys[i], 1);

		td_test_arange(&t, TD_DTYPE_I32, 1, b);
		td_cr_assert_ok(td_dict_set_tensor_key(d, k, &t));
		td_key_free(k);
		td_tensor_release(&t);
	}
	td_test_arange(&t, TD_DTYPE_U8, 1, b);
	td_cr_assert_ok(td_dict_set_tensor(d, "sub/dir.v", &t));
	td_tensor_release(&t);
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("k"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_NOSYNC)));
	td_store_close(st);
	cr_assert(td_test_exists(td_test_path("k/a%2Fb.memmap")));
	cr_assert(td_test_exists(td_test_path("k/my%20key.memmap")));
	cr_assert(td_test_exists(td_test_path("k/%.memmap")));
	cr_assert(td_test_exists(td_test_path("k/%2E%2E.memmap")));
	cr_assert(td_test_exists(td_test_path("k/sub%2Fdir/v.memmap")));
	st = open_ok(td_test_path("k"), NULL);
	assert_dicts_equal(td_store_dict(st), d);
	td_store_close(st);
	td_dict_free(d);
}

Test(store_dir, legacy_raw_file_names_are_found)
{
	static const int64_t b[] = { 2 };
	td_dict *d;
	td_store *st;
	char from[4200], to[4200];
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	td_test_arange(&t, TD_DTYPE_I64, 1, b);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "my key", &t));
	put_arange(d, "x", TD_DTYPE_I64, 1, b);
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("l"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_NOSYNC)));
	td_store_close(st);
	/* tensordict <= 0.10 wrote raw key names: found when the encoded one is absent. */
	snprintf(from, sizeof(from), "%s", td_test_path("l/my%20key.memmap"));
	snprintf(to, sizeof(to), "%s", td_test_path("l/my key.memmap"));
	cr_assert_eq(rename(from, to), 0);
	st = open_ok(td_test_path("l"), NULL);
	assert_dicts_equal(td_store_dict(st), d);
	td_store_close(st);
	/* Neither name: the leaf is missing, which is corruption. */
	cr_assert_eq(unlink(to), 0);
	assert_open_fails(td_test_path("l"), NULL, TD_ECORRUPT);
	td_dict_free(d);
}

/* ---- what td_store_memmap refuses ---- */

Test(store_dir, memmap_refuses_bad_arguments_and_writes_nothing)
{
	static const int64_t b[] = { 2 };
	td_store *st = (td_store *)0x1;
	td_dict *d, *sub;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	put_arange(d, "x", TD_DTYPE_F32, 1, b);
	td_cr_assert_err(td_store_memmap(NULL, d, td_test_path("a"), NULL), TD_EINVAL);
	td_cr_assert_err(td_store_memmap(&st, NULL, td_test_path("a"), NULL), TD_EINVAL);
	cr_assert_null(st);
	td_cr_assert_err(td_store_memmap(&st, d, NULL, NULL), TD_EINVAL);
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("a"),
						 &(td_store_memmap_opts){ 0, TD_PLACEMENT_DIRECTORY, false, false,
							 TD_SYNC_FULL }),
		TD_EINVAL);
	cr_assert_not(td_test_exists(td_test_path("a")));

	/* Keys meta.json reserves, at any depth; bytes leaves. Checked before writing. */
	td_test_arange(&t, TD_DTYPE_F32, 1, b);
	td_cr_assert_ok(td_dict_set_tensor(d, "sub.shape", &t));
	td_tensor_release(&t);
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("a"), NULL), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "reserved"));
	cr_assert_not(td_test_exists(td_test_path("a")));
	td_cr_assert_ok(td_dict_del(d, "sub.shape"));
	td_test_arange(&t, TD_DTYPE_F32, 1, b);
	td_cr_assert_ok(td_dict_set_tensor(d, "_class", &t));
	td_tensor_release(&t);
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("a"), NULL), TD_EINVAL);
	cr_assert_not(td_test_exists(td_test_path("a")));
	td_cr_assert_ok(td_dict_del(d, "_class"));
	td_cr_assert_ok(td_dict_get_dict(&sub, d, "sub"));
	td_cr_assert_ok(td_dict_set_bytes(sub, "raw", "\0\1", 2));
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("a"), NULL), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "bytes"));
	cr_assert_not(td_test_exists(td_test_path("a")));

	/* A path that is a file. */
	write_text(td_test_path("file"), "x");
	td_cr_assert_ok(td_dict_del(d, "sub"));
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("file"), NULL), TD_EEXISTS);
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("no/such/parent"), NULL), TD_ENOTFOUND);
	td_dict_free(d);
}

Test(store_dir, existing_leaf_files_need_existsok_and_are_never_truncated)
{
	static const int64_t b[] = { 4 };
	td_store *st;
	td_dict *d;
	const td_value *v;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	put_arange(d, "x", TD_DTYPE_I32, 1, b);
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("e"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_NOSYNC)));
	td_store_close(st);
	/* Without existsok an existing leaf file is an error, and it keeps its bytes. */
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("e"), NULL), TD_EEXISTS);
	/* A longer old file (tensordict's artifacts carry trailing bytes) keeps its length. */
	cr_assert_eq(truncate(td_test_path("e/x.memmap"), 64), 0);
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("e"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_EXISTSOK)));
	td_store_close(st);
	cr_assert_eq(td_test_file_size(td_test_path("e/x.memmap")), 64);
	st = open_ok(td_test_path("e"), NULL);
	assert_dicts_equal(td_store_dict(st), d);
	td_store_close(st);
	/* A shorter one is grown. */
	cr_assert_eq(truncate(td_test_path("e/x.memmap"), 2), 0);
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("e"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_EXISTSOK)));
	cr_assert_eq(td_test_file_size(td_test_path("e/x.memmap")), 16);
	td_store_close(st);

	/* memmap_like: files sized, data not copied. */
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("like"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_LIKE)));
	cr_assert_eq(td_test_file_size(td_test_path("like/x.memmap")), 16);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "x"));
	cr_assert_eq(((int32_t *)td_tensor_data(&v->tensor))[3], 0);
	td_store_close(st);
	td_dict_free(d);
}

Test(store_dir, options_choose_placement_reuse_copy_sync_and_writability)
{
	static const int64_t b[] = { 4 };
	td_store_open_opts oo = TD_STORE_OPEN_OPTS_INIT;
	td_store_memmap_opts mo = TD_STORE_MEMMAP_OPTS_INIT;
	td_store *st = (td_store *)0x1;
	td_dict *d, *zeros;
	td_tensor t;

	/* The defaults: read-only; a directory, nothing reused, the data copied, synced. */
	cr_assert_eq(oo.version, TD_STORE_OPEN_OPTS_VERSION);
	cr_assert_not(oo.writable);
	cr_assert_eq(mo.version, TD_STORE_MEMMAP_OPTS_VERSION);
	cr_assert_eq(mo.placement, TD_PLACEMENT_DIRECTORY);
	cr_assert_not(mo.exist_ok);
	cr_assert_not(mo.like);
	cr_assert_eq(mo.sync, TD_SYNC_FULL);
	td_cr_assert_ok(td_dict_new(&d, 1, b));
	put_arange(d, "x", TD_DTYPE_I32, 1, b);
	td_cr_assert_ok(td_dict_new(&zeros, 1, b));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I32, 1, b));
	td_cr_assert_ok(td_dict_set_tensor_take(zeros, "x", &t));

	/* td_store_memmap(): NULL and the initializer write a directory, open read-write. */
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("n"), NULL));
	cr_assert_eq(td_store_placement(st), TD_PLACEMENT_DIRECTORY);
	cr_assert(td_store_is_writable(st));
	cr_assert(td_test_exists(td_test_path("n/meta.json")));
	assert_dicts_equal(td_store_dict(st), d);
	td_store_close(st);
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("i"), &mo));
	cr_assert_eq(td_store_placement(st), TD_PLACEMENT_DIRECTORY);
	assert_dicts_equal(td_store_dict(st), d);
	td_store_close(st);
	/* placement: one packed file. */
	mo.placement = TD_PLACEMENT_PACKED;
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("p.tds"), &mo));
	cr_assert_eq(td_store_placement(st), TD_PLACEMENT_PACKED);
	cr_assert(td_store_is_writable(st));
	assert_dicts_equal(td_store_dict(st), d);
	td_store_close(st);
	mo.placement = TD_PLACEMENT_DIRECTORY;
	/* exist_ok: reuse the files of "n" in place, refused without it. */
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("n"), &mo), TD_EEXISTS);
	cr_assert_null(st);
	mo.exist_ok = true;
	td_cr_assert_ok(td_store_memmap(&st, zeros, td_test_path("n"), &mo));
	assert_dicts_equal(td_store_dict(st), zeros);
	td_store_close(st);
	/* like: files sized, the data not copied (a reused file keeps its bytes). */
	mo.like = true;
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("n"), &mo));
	assert_dicts_equal(td_store_dict(st), zeros);
	td_store_close(st);
	mo.exist_ok = false;
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("l"), &mo));
	assert_dicts_equal(td_store_dict(st), zeros);
	td_store_close(st);
	/* sync: TD_SYNC_NONE writes the same store. */
	mo.like = false;
	mo.sync = TD_SYNC_NONE;
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("s"), &mo));
	assert_dicts_equal(td_store_dict(st), d);
	td_store_close(st);

	/* td_store_open(): NULL and the initializer are read-only, `writable` is not. */
	st = open_ok(td_test_path("s"), NULL);
	cr_assert_not(td_store_is_writable(st));
	td_cr_assert_err(td_store_grow(st, 5), TD_EREADONLY);
	td_store_close(st);
	st = open_ok(td_test_path("s"), &oo);
	cr_assert_not(td_store_is_writable(st));
	td_cr_assert_err(td_store_add_empty(st, "y", TD_DTYPE_I32, 1, b), TD_EREADONLY);
	td_store_close(st);
	oo.writable = true;
	st = open_ok(td_test_path("s"), &oo);
	cr_assert(td_store_is_writable(st));
	td_cr_assert_ok(td_store_add_empty(st, "y", TD_DTYPE_I32, 1, b));
	td_store_close(st);
	st = open_ok(td_test_path("p.tds"), &oo);
	cr_assert_eq(td_store_placement(st), TD_PLACEMENT_PACKED);
	cr_assert(td_store_is_writable(st));
	td_store_close(st);

	/* Unknown versions, placements and sync modes: TD_EINVAL, and nothing written. */
	oo.version = 0;
	td_cr_assert_err(td_store_open(&st, td_test_path("s"), &oo), TD_EINVAL);
	cr_assert_null(st);
	cr_assert(strstr(td_error_last()->message, "version") != NULL);
	oo.version = TD_STORE_OPEN_OPTS_VERSION + 1;
	td_cr_assert_err(td_store_open(&st, td_test_path("s"), &oo), TD_EINVAL);
	mo = (td_store_memmap_opts)TD_STORE_MEMMAP_OPTS_INIT;
	mo.version = TD_STORE_MEMMAP_OPTS_VERSION + 1;
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("bad"), &mo), TD_EINVAL);
	cr_assert_null(st);
	cr_assert(strstr(td_error_last()->message, "version") != NULL);
	mo.version = TD_STORE_MEMMAP_OPTS_VERSION;
	mo.placement = (td_placement)2;
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("bad"), &mo), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "placement") != NULL);
	mo.placement = (td_placement)-1;
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("bad"), &mo), TD_EINVAL);
	mo.placement = TD_PLACEMENT_PACKED;
	mo.sync = (td_sync_mode)2;
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("bad"), &mo), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "sync") != NULL);
	cr_assert_null(st);
	cr_assert_not(td_test_exists(td_test_path("bad")));
	td_dict_free(zeros);
	td_dict_free(d);
}

Test(store_dir, symlinks_where_leaves_go_are_refused)
{
	static const int64_t b[] = { 4 };
	td_store *st;
	td_dict *d;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	put_arange(d, "x", TD_DTYPE_I32, 1, b);
	cr_assert_eq(mkdir(td_test_path("sl"), 0777), 0);
	link_to_victim("sl/x.memmap", 3);
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("sl"),
						 td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_EXISTSOK)),
		TD_ECORRUPT);
	cr_assert_eq(td_test_file_size(td_test_path("victim")), 3);
	td_dict_free(d);
}

Test(store_dir, a_failed_reservation_is_an_error_not_a_crash)
{
	static const int64_t b[] = { 1 << 20 };
	struct rlimit rl = { 1 << 16, 1 << 16 };
	td_store *st = (td_store *)0x1;
	td_dict *d;
	int rc;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	put_arange(d, "x", TD_DTYPE_U8, 1, b);
	/* A file size limit stands in for a full disk: the reservation fails up front. */
	signal(SIGXFSZ, SIG_IGN);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	td_error_clear();
	rc = td_store_memmap(&st, d, td_test_path("full"), NULL);
	cr_assert(rc == TD_ENOSPC || rc == TD_EIO || rc == TD_EOVERFLOW, "got %d: %s", rc,
		td_error_last()->message);
	cr_assert_null(st);
	cr_assert_not(td_test_exists(td_test_path("full/meta.json")));
	td_dict_free(d);
}

/* ---- bad directories ---- */

#define LEAF(k, dt, shp) \
	"\"" k "\": {\"device\": \"cpu\", \"shape\": " shp ", \"dtype\": \"" dt \
	"\", \"is_nested\": false}"
#define TAIL(shp) \
	"\"shape\": " shp ", \"device\": \"cpu\", \"_type\": \"<class 'tensordict._td.TensorDict'>\"}"

Test(store_dir, open_refuses_bad_arguments_and_missing_directories)
{
	td_store *st = (td_store *)0x1;

	td_cr_assert_err(td_store_open(NULL, td_test_path("x"), NULL), TD_EINVAL);
	td_cr_assert_err(td_store_open(&st, NULL, NULL), TD_EINVAL);
	cr_assert_null(st);
	td_cr_assert_err(td_store_open(&st, td_test_tmpdir(), &(td_store_open_opts){ 2, true }),
		TD_EINVAL);
	assert_open_fails(td_test_path("missing"), NULL, TD_ENOTFOUND);
	/* A regular file is opened as a packed store; this one is not. */
	write_text(td_test_path("f"), "{}");
	assert_open_fails(td_test_path("f"), NULL, TD_ECORRUPT);
	/* Neither a directory nor a regular file. */
	cr_assert_eq(mkfifo(td_test_path("fifo"), 0666), 0);
	assert_open_fails(td_test_path("fifo"), NULL, TD_EEXISTS);
	/* A directory without meta.json. */
	assert_open_fails(td_test_tmpdir(), NULL, TD_ENOTFOUND);
}

Test(store_dir, broken_meta_json_is_corrupt)
{
	static const struct {
		const char *meta;
		int code;
	} cases[] = {
		{ "", TD_ECORRUPT },
		{ "{", TD_ECORRUPT },
		{ "[1, 2]", TD_ECORRUPT },
		{ "{\"a\": 1, \"a\": 2}", TD_ECORRUPT },
		{ "{\"_type\": 5}", TD_ECORRUPT },
		{ "{\"shape\": 3}", TD_ECORRUPT },
		{ "{\"shape\": [-1]}", TD_ECORRUPT },
		{ "{\"shape\": [1.5]}", TD_ECORRUPT },
		{ "{\"shape\": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}", TD_ECORRUPT },
		{ "{" LEAF("x", "torch.float32", "[2]") ", " TAIL("[3]"), TD_ECORRUPT },
		{ "{" LEAF("x", "torch.nosuch", "[3]") ", " TAIL("[3]"), TD_ECORRUPT },
		{ "{" LEAF("x", "float32", "[3]") ", " TAIL("[3]"), TD_ECORRUPT },
		{ "{\"x\": {\"dtype\": 7, \"shape\": [3]}, " TAIL("[3]"), TD_ECORRUPT },
		{ "{\"x\": {\"dtype\": \"torch.int8\", \"shape\": [3], \"is_nested\": 1}, " TAIL("[3]"),
			TD_ECORRUPT },
		{ "{" LEAF("x", "torch.qint8", "[3]") ", " TAIL("[3]"), TD_ENOTSUP },
		{ "{" LEAF("x", "torch.complex32", "[3]") ", " TAIL("[3]"), TD_ENOTSUP },
		{ "{\"x\": {\"dtype\": \"torch.int8\", \"shape\": [3], \"is_nested\": true}, " TAIL("[3]"),
			TD_ENOTSUP },
		{ "{" LEAF("x", "torch.float64", "[3, 4611686018427387904]") ", " TAIL("[3]"),
			TD_EOVERFLOW },
		{ "{" LEAF("x", "torch.float64", "[9223372036854775807, 2]") ", " TAIL("[]"),
			TD_EOVERFLOW },
		/* A lazy stack without its child 0/. */
		{ "{\"_type\": \"<class 'tensordict._lazy.LazyStackedTensorDict'>\", \"stack_dim\": 0}",
			TD_ECORRUPT },
		{ "{\"_type\": \"<class 'my.Unknown'>\"}", TD_ENOTSUP },
	};
	char name[32];
	size_t i;

	for (i = 0; i < TD_TEST_ARRAY_LEN(cases); i++) {
		snprintf(name, sizeof(name), "m%zu", i);
		td_error_clear();
		assert_open_fails(dir_with_meta(name, cases[i].meta), NULL, cases[i].code);
	}
}

/* A lazy stack directory whose children have the meta.json texts given. */
static const char *lazy_dir(const char *name, const char *meta, const char *const *kids, size_t n)
{
	static char dir[4096];
	char path[4300];
	size_t i;

	snprintf(dir, sizeof(dir), "%s", dir_with_meta(name, meta));
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%zu", dir, i);
		cr_assert_eq(mkdir(path, 0777), 0);
		snprintf(path, sizeof(path), "%s/%zu/meta.json", dir, i);
		write_text(path, kids[i]);
	}
	return dir;
}

#define LAZY(dim) \
	"{\"_type\": \"<class 'tensordict._lazy.LazyStackedTensorDict'>\", " \
	"\"stack_dim\": " dim "}"

Test(store_dir, lazy_stacks_and_their_bad_forms)
{
	const char *two[2] = { "{" LEAF("x", "torch.int8", "[0]") ", " TAIL("[]"),
		"{" LEAF("y", "torch.int8", "[2, 0]") ", " TAIL("[]") };
	const char *b12[2] = { "{" TAIL("[1]"), "{" TAIL("[2]") };
	const char *bad[2] = { "{" TAIL("[1]"), "{" };
	char path[4300];
	td_store *st;

	/* Keys of their own per child; the stack's batch shape is [2]. */
	st = open_ok(lazy_dir("ok", LAZY("0"), two, 2), NULL);
	cr_assert(td_dict_is_lazy(td_store_dict(st)));
	cr_assert_eq(td_lazy_count(td_store_dict(st)), 2);
	cr_assert_eq(td_dict_batch_shape(td_store_dict(st))[0], 2);
	td_store_close(st);
	/* A negative stack_dim counts from the end. */
	st = open_ok(lazy_dir("neg", LAZY("-1"), two, 2), NULL);
	cr_assert_eq(td_lazy_stack_dim(td_store_dict(st)), 0);
	td_store_close(st);

	assert_open_fails(lazy_dir("dimtype", LAZY("\"0\""), two, 2), NULL, TD_ECORRUPT);
	assert_open_fails(lazy_dir("dimrange", LAZY("5"), two, 2), NULL, TD_ECORRUPT);
	assert_open_fails(lazy_dir("dimhuge", LAZY("99999999999"), two, 2), NULL, TD_ECORRUPT);
	assert_open_fails(lazy_dir("nodim",
						  "{\"_type\": \"<class "
						  "'tensordict._lazy.LazyStackedTensorDict'>\"}",
						  two, 2),
		NULL, TD_ECORRUPT);
	assert_open_fails(lazy_dir("batches", LAZY("0"), b12, 2), NULL, TD_ENOTSUP);
	assert_open_fails(lazy_dir("badkid", LAZY("0"), bad, 2), NULL, TD_ECORRUPT);
	/* A child that is a symbolic link. */
	snprintf(path, sizeof(path), "%s/1", lazy_dir("link", LAZY("0"), two, 1));
	cr_assert_eq(symlink("0", path), 0);
	assert_open_fails(td_test_path("link"), NULL, TD_ECORRUPT);
	/* Named inside a dict: without children it is corrupt, as at the top. */
	snprintf(path, sizeof(path), "%s/sub",
		dir_with_meta("inner", "{\"sub\": {\"type\": \"LazyStackedTensorDict\"}, " TAIL("[]")));
	cr_assert_eq(mkdir(path, 0777), 0);
	snprintf(path, sizeof(path), "%s/sub/meta.json", td_test_path("inner"));
	write_text(path, LAZY("0"));
	assert_open_fails(td_test_path("inner"), NULL, TD_ECORRUPT);
	/* With its children it opens as a value of the dict. */
	for (size_t i = 0; i < 2; i++) {
		char kid[4400];

		snprintf(kid, sizeof(kid), "%s/sub/%zu", td_test_path("inner"), i);
		cr_assert_eq(mkdir(kid, 0777), 0);
		snprintf(kid, sizeof(kid), "%s/sub/%zu/meta.json", td_test_path("inner"), i);
		write_text(kid, two[i]);
	}
	st = open_ok(td_test_path("inner"), NULL);
	{
		td_dict *sub;
		td_cr_assert_ok(td_dict_get_dict(&sub, td_store_dict(st), "sub"));
		cr_assert(td_dict_is_lazy(sub));
		cr_assert_eq(td_lazy_count(sub), 2);
		cr_assert_eq(td_dict_parent(sub), td_store_dict(st));
	}
	td_store_close(st);
	/* A stack of batch [2] does not fit under a parent of batch [3]. */
	snprintf(path, sizeof(path), "%s/meta.json", td_test_path("inner"));
	write_text(path, "{\"sub\": {\"type\": \"LazyStackedTensorDict\"}, " TAIL("[3]"));
	assert_open_fails(td_test_path("inner"), NULL, TD_ECORRUPT);
}

Test(store_dir, entries_tensordict_skips_are_skipped)
{
	td_store *st;
	const char *dir = dir_with_meta("skip",
		"{\"note\": 5, \"half\": {\"dtype\": \"torch.int8\"}, " TAIL("[2]"));

	st = open_ok(dir, NULL);
	cr_assert_eq(td_dict_len(td_store_dict(st)), 0);
	cr_assert_eq(td_dict_batch_shape(td_store_dict(st))[0], 2);
	td_store_close(st);
	/* No shape, no _type: an empty dict with batch (). */
	st = open_ok(dir_with_meta("bare", "{}"), NULL);
	cr_assert_eq(td_dict_batch_ndim(td_store_dict(st)), 0);
	td_store_close(st);
}

Test(store_dir, short_missing_and_special_leaf_files_are_corrupt)
{
	const char *meta = "{" LEAF("x", "torch.int32", "[4]") ", " TAIL("[4]");
	char dir[4096], path[4200];
	td_store *st;

	snprintf(dir, sizeof(dir), "%s", dir_with_meta("short", meta));
	assert_open_fails(dir, NULL, TD_ECORRUPT); /* missing */
	snprintf(path, sizeof(path), "%s/x.memmap", dir);
	write_zeros(path, 15);
	assert_open_fails(dir, NULL, TD_ECORRUPT); /* one byte short */
	cr_assert(strstr(td_error_last()->message, "shorter"));
	write_zeros(path, 17);
	st = open_ok(dir, NULL); /* trailing bytes are tolerated, as tensordict does */
	td_store_close(st);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(mkdir(path, 0777), 0);
	assert_open_fails(dir, NULL, TD_ECORRUPT); /* a directory */
	cr_assert_eq(rmdir(path), 0);
	write_zeros(td_test_path("target"), 16);
	cr_assert_eq(symlink(td_test_path("target"), path), 0);
	assert_open_fails(dir, NULL, TD_ECORRUPT); /* a symbolic link */
	cr_assert(strstr(td_error_last()->message, "symbolic link"));
}

Test(store_dir, symlinked_or_broken_sub_directories_are_refused)
{
	const char *meta = "{\"sub\": {\"type\": \"TensorDict\"}, " TAIL("[2]");
	char dir[4096], path[4200];

	snprintf(dir, sizeof(dir), "%s", dir_with_meta("sd", meta));
	assert_open_fails(dir, NULL, TD_ENOTFOUND); /* sub/ missing */
	cr_assert_eq(mkdir(td_test_path("elsewhere"), 0777), 0);
	write_text(td_test_path("elsewhere/meta.json"), "{" TAIL("[2]"));
	snprintf(path, sizeof(path), "%s/sub", dir);
	cr_assert_eq(symlink(td_test_path("elsewhere"), path), 0);
	assert_open_fails(dir, NULL, TD_ECORRUPT);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(mkdir(path, 0777), 0);
	snprintf(path, sizeof(path), "%s/sub/meta.json", dir);
	write_text(path, "{" TAIL("[3]")); /* batch does not extend the parent's */
	assert_open_fails(dir, NULL, TD_ECORRUPT);
	/* A NonTensorStack must fit the batch, like a tensor. */
	write_text(path,
		"{\"_type\": \"<class 'tensordict.tensorclass.NonTensorStack'>\", "
		"\"stack_dim\": 0, \"device\": null, \"data\": [\"a\", \"b\", \"c\"]}");
	assert_open_fails(dir, NULL, TD_ECORRUPT);
	write_text(path,
		"{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", "
		"\"data\": 3, \"_metadata\": null}");
	assert_open_fails(dir, NULL, TD_ENOTSUP);
	write_text(path,
		"{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", "
		"\"_metadata\": null}");
	assert_open_fails(dir, NULL, TD_ENOTSUP);
	write_text(path,
		"{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", "
		"\"data\": \"ok\", \"_metadata\": null}");
	td_store_close(open_ok(dir, NULL));
}

/* A store whose "obs" is a tensorclass (fields in obs/_tensordict/), batch [4]. */
static const char *tensorclass_store(const char *name)
{
	static char dir[4096];
	char path[4200];

	snprintf(dir, sizeof(dir), "%s",
		dir_with_meta(name, "{\"obs\": {\"type\": \"Obs\"}, " TAIL("[4]")));
	snprintf(path, sizeof(path), "%s/obs", dir);
	cr_assert_eq(mkdir(path, 0777), 0);
	snprintf(path, sizeof(path), "%s/obs/meta.json", dir);
	write_text(path, "{\"_type\": \"<class '__main__.Obs'>\"}");
	snprintf(path, sizeof(path), "%s/obs/_tensordict", dir);
	cr_assert_eq(mkdir(path, 0777), 0);
	snprintf(path, sizeof(path), "%s/obs/_tensordict/meta.json", dir);
	write_text(path, "{" LEAF("pixels", "torch.uint8", "[4, 3]") ", " TAIL("[4]"));
	snprintf(path, sizeof(path), "%s/obs/_tensordict/pixels.memmap", dir);
	write_zeros(path, 12);
	return dir;
}

Test(store_dir, tensorclass_fields_are_read_from_their_tensordict)
{
	td_store *st;
	const td_value *v;

	st = open_ok(tensorclass_store("tc"), NULL);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "obs.pixels"));
	cr_assert_eq(td_tensor_shape(&v->tensor)[1], 3);
	td_store_close(st);
}

Test(store_dir, read_only_files_cannot_be_opened_read_write)
{
	const char *meta = "{" LEAF("x", "torch.int32", "[4]") ", " TAIL("[4]");
	char dir[4096], path[4200];
	td_store *st;

	if (geteuid() == 0)
		cr_skip_test("root ignores file permissions");
	snprintf(dir, sizeof(dir), "%s", dir_with_meta("ro", meta));
	snprintf(path, sizeof(path), "%s/x.memmap", dir);
	write_zeros(path, 16);
	cr_assert_eq(chmod(path, 0444), 0);
	assert_open_fails(dir, td_test_rw(), TD_EREADONLY);
	st = open_ok(dir, NULL);
	td_store_close(st);
}

Test(store_dir, a_failed_save_keeps_the_old_meta_json_and_leaves_no_temporary_files)
{
	static const int64_t b[] = { 4 };
	char old_meta[8192];
	td_store *st;
	td_dict *d;
	DIR *dir;
	struct dirent *e;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	put_arange(d, "x", TD_DTYPE_I32, 1, b);
	td_cr_assert_ok(td_dict_set_string(d, "s", "text"));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("f"), NULL));
	td_store_close(st);
	snprintf(old_meta, sizeof(old_meta), "%s", read_text(td_test_path("f/meta.json")));
	/* A second save whose last leaf hits a symbolic link fails after writing others. */
	put_arange(d, "y", TD_DTYPE_I32, 1, b);
	link_to_victim("f/y.memmap", 16);
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("f"),
						 td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_EXISTSOK)),
		TD_ECORRUPT);
	cr_assert_str_eq(read_text(td_test_path("f/meta.json")), old_meta);
	dir = opendir(td_test_path("f"));
	cr_assert_not_null(dir);
	while ((e = readdir(dir)) != NULL)
		cr_assert_null(strstr(e->d_name, "tdstore-tmp"), "left behind: %s", e->d_name);
	closedir(dir);
	dir = opendir(td_test_path("f/s"));
	cr_assert_not_null(dir);
	while ((e = readdir(dir)) != NULL)
		cr_assert_null(strstr(e->d_name, "tdstore-tmp"), "left behind: s/%s", e->d_name);
	closedir(dir);
	/* The store still opens with its old content. */
	st = open_ok(td_test_path("f"), NULL);
	cr_assert_eq(td_dict_len(td_store_dict(st)), 2);
	td_store_close(st);
	td_dict_free(d);
}

/* ---- arrays of strings (NonTensorStack) ---- */

/* A store directory whose "lst" entry is a NonTensorStack with the given meta.json. */
static const char *dir_with_stack(const char *name, const char *batch, const char *stack)
{
	static char dir[4096];
	char meta[512], path[4200];

	snprintf(meta, sizeof(meta), "{\"lst\": {\"type\": \"NonTensorStack\"}, " TAIL("%s"), batch);
	snprintf(dir, sizeof(dir), "%s", dir_with_meta(name, meta));
	snprintf(path, sizeof(path), "%s/lst", dir);
	cr_assert_eq(mkdir(path, 0777), 0);
	snprintf(path, sizeof(path), "%s/lst/meta.json", dir);
	write_text(path, stack);
	return dir;
}

#define STACK(data) \
	"{\"_type\":\"<class 'tensordict.tensorclass.NonTensorStack'>\"," \
	"\"stack_dim\":0,\"device\":null,\"data\":" data "}"

Test(store_dir, non_tensor_stacks_open_by_the_shape_of_their_lists)
{
	const td_strings *s;
	td_store *st;

	st = open_ok(dir_with_stack("a", "[2]",
					 STACK("[[\"a\", \"b\", \"c\"], [\"d\", \"e\", \"f\"]]")),
		NULL);
	td_cr_assert_ok(td_dict_get_strings(&s, td_store_dict(st), "lst"));
	cr_assert_eq(s->ndim, 2);
	cr_assert_eq(s->shape[1], 3);
	cr_assert_str_eq(td_strings_at(NULL, s, 4), "e");
	td_store_close(st);
	/* Empty lists are dims of size 0. */
	st = open_ok(dir_with_stack("b", "[2]", STACK("[[], []]")), NULL);
	td_cr_assert_ok(td_dict_get_strings(&s, td_store_dict(st), "lst"));
	cr_assert_eq(s->ndim, 2);
	cr_assert_eq(s->numel, 0);
	td_store_close(st);
	st = open_ok(dir_with_stack("c", "[0]", STACK("[]")), NULL);
	td_cr_assert_ok(td_dict_get_strings(&s, td_store_dict(st), "lst"));
	cr_assert_eq(s->ndim, 1);
	cr_assert_eq(s->shape[0], 0);
	td_store_close(st);
	/* JSON escapes, stdlib and orjson spellings alike. */
	st = open_ok(dir_with_stack("d", "[2]", STACK("[\"h\\u00e9\", \"h\xc3\xa9\"]")), NULL);
	td_cr_assert_ok(td_dict_get_strings(&s, td_store_dict(st), "lst"));
	cr_assert_str_eq(td_strings_at(NULL, s, 0), td_strings_at(NULL, s, 1));
	td_store_close(st);
}

Test(store_dir, malformed_or_unsupported_non_tensor_stacks_are_refused)
{
	/* Lists of different lengths are lists held as values: not strings. */
	assert_open_fails(dir_with_stack("a", "[2]", STACK("[[\"a\"], [\"b\", \"c\"]]")), NULL,
		TD_ENOTSUP);
	assert_open_fails(dir_with_stack("b", "[2]", STACK("[\"a\", [\"b\"]]")), NULL, TD_ENOTSUP);
	assert_open_fails(dir_with_stack("c", "[2]", STACK("[1, 2]")), NULL, TD_ENOTSUP);
	assert_open_fails(dir_with_stack("d", "[2]", STACK("[null, \"x\"]")), NULL, TD_ENOTSUP);
	assert_open_fails(dir_with_stack("e", "[2]", STACK("\"pickle.pkl\"")), NULL, TD_ENOTSUP);
	cr_assert(strstr(td_error_last()->message, "pickle"), "%s", td_error_last()->message);
	assert_open_fails(dir_with_stack("f", "[2]", STACK("{\"a\": 1}")), NULL, TD_ECORRUPT);
	assert_open_fails(dir_with_stack("g", "[2]",
						  "{\"_type\":\"<class 'tensordict.tensorclass.NonTensorStack'>\"}"),
		NULL, TD_ENOTSUP);
	/* The stack's shape must start with the batch shape. */
	assert_open_fails(dir_with_stack("h", "[3]", STACK("[\"a\", \"b\"]")), NULL, TD_ECORRUPT);
	/* More nesting than a dict has dims. */
	assert_open_fails(dir_with_stack("i", "[1]",
						  STACK("[[[[[[[[[[[[[[[[[\"deep\"]]]]]]]]]]]]]]]]]")),
		NULL, TD_ENOTSUP);
	/* A NUL escaped in JSON is refused by the parser: corrupt. */
	assert_open_fails(dir_with_stack("j", "[1]", STACK("[\"a\\u0000b\"]")), NULL, TD_ECORRUPT);
}

Test(store_dir, arrays_of_strings_are_saved_as_tensordict_saves_them_and_grow)
{
	static const int64_t b2[] = { 2 }, s23[] = { 2, 3 };
	static const char *const grid[] = { "a", "b", "c", "d", "e", "\xc3\xa9" };
	char path[4200];
	const td_strings *s;
	td_store *st, *ro;
	td_dict *d, *sub;
	td_tensor t;
	int i;

	td_cr_assert_ok(td_dict_new(&d, 1, b2));
	td_cr_assert_ok(td_dict_set_strings(d, "grid", 2, s23, grid));
	td_cr_assert_ok(td_dict_new(&sub, 1, b2));
	td_cr_assert_ok(td_dict_set_strings(sub, "names", 1, b2, (const char *const[]){ "x", "y" }));
	td_cr_assert_ok(td_dict_set_dict_take(d, "sub", sub));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, b2));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "x", &t));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("s"), NULL));
	cr_assert_eq(td_dict_equal(td_store_dict(st), d), 1);
	snprintf(path, sizeof(path), "%s", td_test_path("s/grid/meta.json"));
	cr_assert_str_eq(read_text(path),
		"{\"_type\":\"<class 'tensordict.tensorclass.NonTensorStack'>\",\"_format_version\":1,"
		"\"_class\":\"tensordict:NonTensorStack\",\"stack_dim\":0,\"device\":null,"
		"\"data\":[[\"a\",\"b\",\"c\"],[\"d\",\"e\",\"\\u00e9\"]]}");
	cr_assert(
		strstr(read_text(td_test_path("s/meta.json")), "\"grid\": {\"type\": \"NonTensorStack\"}"));

	/* Growth pads every array with empty strings, in the same commit as the leaves. */
	td_cr_assert_ok(td_store_grow(st, 4));
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&ro, td_test_path("s"), NULL));
	td_cr_assert_ok(td_dict_get_strings(&s, td_store_dict(ro), "grid"));
	cr_assert_eq(s->shape[0], 4);
	cr_assert_eq(s->shape[1], 3);
	for (i = 0; i < 12; i++)
		cr_assert_str_eq(td_strings_at(NULL, s, i), i < 6 ? grid[i] : "");
	td_cr_assert_ok(td_dict_get_strings(&s, td_store_dict(ro), "sub.names"));
	cr_assert_eq(s->numel, 4);
	cr_assert_str_eq(td_strings_at(NULL, s, 1), "y");
	cr_assert_str_eq(td_strings_at(NULL, s, 3), "");
	td_store_close(ro);

	/* Removing one removes its directory. */
	td_cr_assert_ok(td_store_open(&st, td_test_path("s"), td_test_rw()));
	td_cr_assert_ok(td_store_remove(st, "grid"));
	td_store_close(st);
	cr_assert_neq(access(td_test_path("s/grid"), F_OK), 0);
	td_dict_free(d);
}

/* ---- schema changes in tensorclasses ---- */

Test(store_dir, adds_and_removes_inside_a_tensorclass_go_to_its_tensordict)
{
	static const int64_t b4[] = { 4 };
	char dir[4096], path[4200];
	td_store *st;
	td_tensor t;
	const td_value *v;

	snprintf(dir, sizeof(dir), "%s", tensorclass_store("tc"));
	st = open_ok(dir, td_test_rw());
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_I32, 1, b4, td_scalar_int(7)));
	td_cr_assert_ok(td_store_add_tensor(st, "obs.extra", &t));
	td_tensor_release(&t);
	td_store_close(st);
	/* The class's own meta.json is untouched; its fields' dict names the leaf. */
	snprintf(path, sizeof(path), "%s/obs/meta.json", dir);
	cr_assert_str_eq(read_text(path), "{\"_type\": \"<class '__main__.Obs'>\"}");
	snprintf(path, sizeof(path), "%s/obs/_tensordict/meta.json", dir);
	cr_assert(strstr(read_text(path), "\"extra\": {"), "%s", read_text(path));
	snprintf(path, sizeof(path), "%s/obs/_tensordict/extra.memmap", dir);
	cr_assert_eq(td_test_file_size(path), 16);
	snprintf(path, sizeof(path), "%s/obs/extra.memmap", dir);
	cr_assert_neq(access(path, F_OK), 0, "nothing lands beside the class's meta.json");
	st = open_ok(dir, NULL);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "obs.extra"));
	cr_assert_eq(td_test_element(&v->tensor, 3), 7.0);
	td_store_close(st);

	/* Removing the leaf, then the whole tensorclass, removes their files. */
	st = open_ok(dir, td_test_rw());
	td_cr_assert_ok(td_store_remove(st, "obs.extra"));
	snprintf(path, sizeof(path), "%s/obs/_tensordict/extra.memmap", dir);
	cr_assert_neq(access(path, F_OK), 0);
	td_cr_assert_ok(td_store_remove(st, "obs"));
	td_store_close(st);
	snprintf(path, sizeof(path), "%s/obs", dir);
	cr_assert_neq(access(path, F_OK), 0, "the tensorclass's directory is gone");
	st = open_ok(dir, NULL);
	cr_assert_eq(td_dict_len(td_store_dict(st)), 0);
	td_store_close(st);
}

Test(store_dir, a_store_whose_root_is_a_tensorclass_changes_in_its_tensordict)
{
	static const int64_t b4[] = { 4 };
	char dir[4096], path[4200];
	td_store *st;
	td_tensor t;

	snprintf(dir, sizeof(dir), "%s", tensorclass_store("root"));
	snprintf(path, sizeof(path), "%s/obs", dir); /* the tensorclass is the store */
	st = open_ok(path, td_test_rw());
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, b4));
	td_cr_assert_ok(td_store_add_tensor(st, "y", &t));
	td_tensor_release(&t);
	td_cr_assert_ok(td_store_grow(st, 6));
	td_store_close(st);
	snprintf(path, sizeof(path), "%s/obs/meta.json", dir);
	cr_assert_str_eq(read_text(path), "{\"_type\": \"<class '__main__.Obs'>\"}");
	snprintf(path, sizeof(path), "%s/obs/_tensordict/y.memmap", dir);
	cr_assert_eq(td_test_file_size(path), 24);
	snprintf(path, sizeof(path), "%s/obs", dir);
	st = open_ok(path, NULL);
	cr_assert_eq(td_dict_batch_shape(td_store_dict(st))[0], 6);
	cr_assert_eq(td_dict_len(td_store_dict(st)), 2);
	td_store_close(st);
}

/* Whether the directory `rel` (in the test directory) holds an entry whose name contains `part`. */
static bool dir_holds(const char *rel, const char *part)
{
	DIR *dir = opendir(td_test_path(rel));
	struct dirent *e;
	bool found = false;

	cr_assert_not_null(dir, "%s", rel);
	while ((e = readdir(dir)) != NULL)
		found = found || strstr(e->d_name, part) != NULL;
	closedir(dir);
	return found;
}

Test(store_dir, a_failed_save_into_a_new_directory_leaves_no_meta_json)
{
	static const int64_t b[] = { 4 };
	td_store *st;
	td_dict *d, *a, *z;

	/* "a" and the string are written (their meta.json in place) before "z/y" fails. */
	td_cr_assert_ok(td_dict_new(&d, 1, b));
	td_cr_assert_ok(td_dict_new(&a, 1, b));
	put_arange(a, "x", TD_DTYPE_I32, 1, b);
	td_cr_assert_ok(td_dict_set_dict_take(d, "a", a));
	td_cr_assert_ok(td_dict_set_string(d, "s", "text"));
	td_cr_assert_ok(td_dict_new(&z, 1, b));
	put_arange(z, "y", TD_DTYPE_I32, 1, b);
	td_cr_assert_ok(td_dict_set_dict_take(d, "z", z));
	cr_assert_eq(mkdir(td_test_path("n"), 0777), 0);
	cr_assert_eq(mkdir(td_test_path("n/z"), 0777), 0);
	link_to_victim("n/z/y.memmap", 16);
	td_cr_assert_err(td_store_memmap(&st, d, td_test_path("n"),
						 td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_EXISTSOK)),
		TD_ECORRUPT);
	cr_assert_not(td_test_exists(td_test_path("n/meta.json")));
	cr_assert_not(dir_holds("n", "tdstore-tmp"));
	/* What the failed save made is gone; what was there before stays. */
	cr_assert_not(td_test_exists(td_test_path("n/a")));
	cr_assert_not(td_test_exists(td_test_path("n/s")));
	cr_assert(td_test_exists(td_test_path("n/z")));
	/* Without the obstacle the same save succeeds, and a re-save that adds a dict too. */
	cr_assert_eq(unlink(td_test_path("n/z/y.memmap")), 0);
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("n"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_EXISTSOK)));
	td_store_close(st);
	td_cr_assert_ok(td_dict_new(&a, 1, b));
	put_arange(a, "w", TD_DTYPE_I64, 1, b);
	td_cr_assert_ok(td_dict_set_dict_take(d, "new", a));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("n"),
		td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_EXISTSOK)));
	td_store_close(st);
	cr_assert_not(dir_holds("n", "tdstore-tmp"));
	cr_assert_not(dir_holds("n", "tdstore-journal"));
	st = open_ok(td_test_path("n"), NULL);
	cr_assert_eq(td_dict_equal(td_store_dict(st), d), 1);
	td_store_close(st);
	td_dict_free(d);
}
