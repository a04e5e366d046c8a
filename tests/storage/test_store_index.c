/* SPDX-License-Identifier: MIT */
/*
 * test_store_index.c - the directory key index `.tdstore-index`
 * (doc/format.md section 7): opens through it build the dict the meta.json
 * files describe, for every kind of entry and for tensordict's own
 * directories; every save and schema change rewrites it; a meta.json
 * edited behind tdstore's back, a journal, or an index that is missing,
 * damaged or inconsistent makes the open read the meta.json files; writers
 * killed at random points leave an index that is either right or not
 * used; allocation failures. Linked against the library's convenience
 * archive, to see how each open used the index (st->dir.dix_state).
 */
#include "td_test.h"
#include "dirindex.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

TestSuite(store_index, .init = td_test_tmpdir_init, .fini = td_test_tmpdir_fini, .timeout = 300);

static const int64_t B3[] = { 3 };

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static void assert_same_dict(const td_dict *a, const td_dict *b, const char *where);

/* Two values equal to the byte: same kind, dtype, shape and contents. */
static void assert_same_value(const td_value *a, const td_value *b, const char *key)
{
	int64_t i;

	cr_assert_eq(a->kind, b->kind, "%s: kind %d and %d", key, a->kind, b->kind);
	switch (a->kind) {
	case TD_VALUE_TENSOR: {
		const td_tensor *x = &a->tensor, *y = &b->tensor;
		td_tensor cx, cy;

		cr_assert_eq(x->dtype, y->dtype, "%s: dtype", key);
		cr_assert_eq(x->ndim, y->ndim, "%s: ndim", key);
		cr_assert_arr_eq(td_tensor_shape(x), td_tensor_shape(y), (size_t)x->ndim * sizeof(int64_t),
			"%s: shape", key);
		if (td_tensor_nbytes(x) == 0)
			break;
		td_cr_assert_ok(td_tensor_contiguous(&cx, x));
		td_cr_assert_ok(td_tensor_contiguous(&cy, y));
		cr_assert(memcmp(td_tensor_data(&cx), td_tensor_data(&cy), td_tensor_nbytes(x)) == 0,
			"%s: bytes differ", key);
		td_tensor_release(&cx);
		td_tensor_release(&cy);
		break;
	}
	case TD_VALUE_DICT:
		assert_same_dict(a->dict, b->dict, key);
		break;
	case TD_VALUE_STRINGS:
		cr_assert_eq(a->strings->ndim, b->strings->ndim, "%s", key);
		cr_assert_arr_eq(a->strings->shape, b->strings->shape,
			(size_t)a->strings->ndim * sizeof(int64_t), "%s", key);
		for (i = 0; i < a->strings->numel; i++)
			cr_assert_str_eq(td_strings_at(NULL, a->strings, i), td_strings_at(NULL, b->strings, i),
				"%s[%lld]", key, (long long)i);
		break;
	default:
		cr_assert_eq(a->blob.length, b->blob.length, "%s", key);
		cr_assert(memcmp(a->blob.data, b->blob.data, a->blob.length) == 0, "%s", key);
		break;
	}
}

/* Two dicts equal as td_dict_equal() says, and with their keys in the same order. */
static void assert_same_dict(const td_dict *a, const td_dict *b, const char *where)
{
	size_t n = td_dict_len(a), i;
	const char **ka, **kb;
	const td_value **va, **vb;

	cr_assert_eq(td_dict_is_lazy(a), td_dict_is_lazy(b), "%s", where);
	if (td_dict_is_lazy(a)) {
		cr_assert_eq(td_lazy_count(a), td_lazy_count(b), "%s", where);
		cr_assert_eq(td_lazy_stack_dim(a), td_lazy_stack_dim(b), "%s", where);
		for (i = 0; i < td_lazy_count(a); i++)
			assert_same_dict(td_lazy_child(a, i), td_lazy_child(b, i), where);
		return;
	}
	cr_assert_eq(td_dict_batch_ndim(a), td_dict_batch_ndim(b), "%s: batch ndim", where);
	cr_assert_arr_eq(td_dict_batch_shape(a), td_dict_batch_shape(b),
		(size_t)td_dict_batch_ndim(a) * sizeof(int64_t), "%s: batch shape", where);
	cr_assert_eq(n, td_dict_len(b), "%s: %zu and %zu keys", where, n, td_dict_len(b));
	ka = calloc(n + 1, sizeof(*ka));
	kb = calloc(n + 1, sizeof(*kb));
	va = calloc(n + 1, sizeof(*va));
	vb = calloc(n + 1, sizeof(*vb));
	cr_assert(ka && kb && va && vb);
	td_dict_items(ka, va, n, a);
	td_dict_items(kb, vb, n, b);
	for (i = 0; i < n; i++) {
		cr_assert_str_eq(ka[i], kb[i], "%s: key %zu", where, i);
		assert_same_value(va[i], vb[i], ka[i]);
	}
	free(ka);
	free(kb);
	free(va);
	free(vb);
}

/* Open `path` with `flags` and check how the open used the index. */
static td_store *open_as(const char *path, const td_store_open_opts *opts, int state)
{
	td_store *st = NULL;

	td_cr_assert_ok(td_store_open(&st, path, opts));
	cr_assert_eq(st->dir.dix_state, state, "%s: index state %d, expected %d (status %d)", path,
		st->dir.dix_state, state, st->dir.dix_code);
	return st;
}

/* Open read-only from the meta.json files alone. */
static td_store *open_json(const char *path)
{
	td_store *st;

	cr_assert_eq(setenv("TDSTORE_DIR_INDEX", "0", 1), 0);
	st = open_as(path, NULL, TD_DIX_OFF);
	unsetenv("TDSTORE_DIR_INDEX");
	return st;
}

/* The index is used, and opens the dict that the meta.json files describe. */
static void assert_index_matches_json(const char *path)
{
	td_store *a = open_as(path, NULL, TD_DIX_USED), *b = open_json(path);

	assert_same_dict(td_store_dict(a), td_store_dict(b), path);
	td_store_close(a);
	td_store_close(b);
}

/* The index is not used (for the reason `state`) and the open matches the meta.json files. */
static void assert_falls_back(const char *path, int state, int code)
{
	td_store *a = open_as(path, NULL, state), *b = open_json(path);

	if (code)
		cr_assert_eq(a->dir.dix_code, code, "%s: status %d, expected %d", path, a->dir.dix_code,
			code);
	assert_same_dict(td_store_dict(a), td_store_dict(b), path);
	td_store_close(a);
	td_store_close(b);
}

/* tpath() into one of four buffers, so that a call can take two paths. */
static const char *tpath(const char *name)
{
	static char bufs[4][4400];
	static unsigned next;
	char *b = bufs[next++ % 4];

	snprintf(b, sizeof(bufs[0]), "%s", td_test_path(name));
	return b;
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, data, len), (ssize_t)len, "write %s", path);
	close(fd);
}

static void write_text(const char *path, const char *text)
{
	write_file(path, text, strlen(text));
}

/* A whole file in a malloc'ed block (NUL-terminated); its size in *len. */
static char *read_file(const char *path, size_t *len)
{
	struct stat sb;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert(fd >= 0 && fstat(fd, &sb) == 0, "open %s: %s", path, strerror(errno));
	buf = malloc((size_t)sb.st_size + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(read(fd, buf, (size_t)sb.st_size), sb.st_size);
	buf[sb.st_size] = '\0';
	close(fd);
	*len = (size_t)sb.st_size;
	return buf;
}

/* Replace the first `from` in file `path` by `to` (each once). */
static void edit_file(const char *path, const char *from, const char *to)
{
	size_t len;
	char *s = read_file(path, &len), *p = strstr(s, from), *out;

	cr_assert_not_null(p, "%s holds no %s", path, from);
	out = malloc(len + strlen(to) + 1);
	cr_assert_not_null(out);
	memcpy(out, s, (size_t)(p - s));
	strcpy(out + (p - s), to);
	strcat(out, p + strlen(from));
	write_text(path, out);
	free(out);
	free(s);
}

static void copy_tree(const char *from, const char *to)
{
	char cmd[9000];

	snprintf(cmd, sizeof(cmd), "cp -R '%s' '%s'", from, to);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static const char *index_path(const char *store)
{
	static char buf[4400];

	snprintf(buf, sizeof(buf), "%s/" TD_DIRINDEX_NAME, store);
	return buf;
}

/* The parsed index of `store` (asserted valid). */
static void parse_index(const char *store, td__dirindex *dx)
{
	size_t len;
	char *buf = read_file(index_path(store), &len);

	td_cr_assert_ok(td__dirindex_parse(dx, buf, len, "test"));
	free(buf);
}

/* Encode `dx` as the index of `store`. */
static void write_index(const char *store, const td__dirindex *dx)
{
	size_t len;
	void *buf;

	td_cr_assert_ok(td__dirindex_size(dx, &len));
	buf = malloc(len);
	cr_assert_not_null(buf);
	td__dirindex_encode(dx, buf, len);
	write_file(index_path(store), buf, len);
	free(buf);
}

/* A tensor of `dtype` and shape [3, ...] holding 0, 1, 2, ... */
static void put_arange(td_dict *d, const char *key, td_dtype dtype, int ndim, const int64_t *shape)
{
	td_key *k = td_test_key(&key, 1);
	td_tensor t;

	td_test_arange(&t, dtype, ndim, shape);
	td_cr_assert_ok(td_dict_set_tensor_take_key(d, k, &t));
	td_key_free(k);
}

/*
 * Batch [3]: a leaf of every dtype, keys that tensordict encodes (and one
 * UTF-8 key), a leaf and a nested dict without elements, a nested dict of
 * batch [3, 2] holding a dict of its own, strings and arrays of strings.
 */
static td_dict *rich_dict(void)
{
	static const char *const odd_keys[] = { "a/b", "my key", "50%", "", ".", "..", "tab\there",
		"colon:x", "q?*", "h\xc3\xa9llo" };
	static const int64_t s32[] = { 3, 2 }, s30[] = { 3, 0 }, s325[] = { 3, 2, 5 };
	static const char *const texts[] = { "x", "", "w\xc3\xb6rld", "d", "e", "f" };
	td_dict *d, *sub, *deeper, *empty;
	char key[32];
	size_t i;

	td_cr_assert_ok(td_dict_new(&d, 1, B3));
	for (i = 0; i < TD_DTYPE_COUNT; i++) {
		snprintf(key, sizeof(key), "t_%s", td_dtype_name(td_test_all_dtypes[i]));
		put_arange(d, key, td_test_all_dtypes[i], 2, s32);
	}
	for (i = 0; i < TD_TEST_ARRAY_LEN(odd_keys); i++)
		put_arange(d, odd_keys[i], TD_DTYPE_I16, 1, B3);
	put_arange(d, "none", TD_DTYPE_F32, 2, s30);
	td_cr_assert_ok(td_dict_set_string(d, "name", "h\xc3\xa9llo \xe2\x9c\x93"));
	td_cr_assert_ok(td_dict_set_strings(d, "words", 1, B3, texts));
	td_cr_assert_ok(td_dict_new(&sub, 2, s32));
	put_arange(sub, "x", TD_DTYPE_F64, 3, s325);
	td_cr_assert_ok(td_dict_set_strings(sub, "grid", 2, s32, texts));
	td_cr_assert_ok(td_dict_set_string(sub, "my label", "sub"));
	td_cr_assert_ok(td_dict_new(&deeper, 2, s32));
	put_arange(deeper, "y", TD_DTYPE_U8, 2, s32);
	td_cr_assert_ok(td_dict_set_dict_take(sub, "deeper/dir", deeper));
	td_cr_assert_ok(td_dict_set_dict_take(d, "sub", sub));
	td_cr_assert_ok(td_dict_new(&empty, 1, B3));
	td_cr_assert_ok(td_dict_set_dict_take(d, "empty", empty));
	return d;
}

/* td_store_memmap(d) into `name` in the test's directory; returns the path. */
static const char *save(const td_dict *d, const char *name, const td_store_memmap_opts *opts)
{
	static char path[4400];
	td_store *st;

	snprintf(path, sizeof(path), "%s", tpath(name));
	td_cr_assert_ok(td_store_memmap(&st, d, path, opts));
	td_store_close(st);
	return path;
}

static td_tensor filled(td_dtype dtype, int ndim, const int64_t *shape, double v)
{
	td_tensor t;

	td_cr_assert_ok(td_tensor_full(&t, dtype, ndim, shape, td_scalar_float(v)));
	return t;
}

/* ------------------------------------------------------------------------ */
/* Opens through the index give what the meta.json files give               */
/* ------------------------------------------------------------------------ */

Test(store_index, every_kind_of_entry_opens_from_the_index_as_from_the_meta_json_files)
{
	td_dict *d = rich_dict();
	const char *path = save(d, "rich", NULL);
	td_store *st;

	cr_assert(td_test_exists(index_path(path)));
	assert_index_matches_json(path);
	st = open_as(path, NULL, TD_DIX_USED);
	assert_same_dict(td_store_dict(st), d, "source");
	td_store_close(st);
	/* A read-write open maps the leaves writable, as the meta.json loader does. */
	st = open_as(path, td_test_rw(), TD_DIX_USED);
	{
		const td_value *v;

		td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "my key"));
		((int16_t *)td_tensor_data(&v->tensor))[2] = 1234;
	}
	td_store_close(st);
	st = open_json(path);
	{
		const td_value *v;

		td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), "my key"));
		cr_assert_eq(((const int16_t *)td_tensor_data(&v->tensor))[2], 1234);
	}
	td_store_close(st);
	td_dict_free(d);
}

Test(store_index, saves_of_every_shape_of_tree_write_an_index_that_opens)
{
	static const int64_t s0[] = { 0 }, s02[] = { 0, 2 };
	td_dict *d, *sub;
	td_tensor t;

	/* A dict without keys, batch []. */
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	assert_index_matches_json(save(d, "bare", NULL));
	/* Zero rows: no leaf has a file. */
	td_cr_assert_ok(td_dict_set_tensor_take(d, "r", (t = filled(TD_DTYPE_I8, 0, NULL, 7), &t)));
	td_dict_free(d);
	td_cr_assert_ok(td_dict_new(&d, 1, s0));
	put_arange(d, "z", TD_DTYPE_F32, 2, s02);
	td_cr_assert_ok(td_dict_new(&sub, 1, s0));
	put_arange(sub, "w", TD_DTYPE_I64, 1, s0);
	td_cr_assert_ok(td_dict_set_dict_take(d, "sub", sub));
	td_cr_assert_ok(td_dict_set_strings(d, "none", 1, s0, NULL));
	assert_index_matches_json(save(d, "zero", NULL));
	td_dict_free(d);
	/* 0-dim leaves; `like` and TD_SYNC_NONE saves. */
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "k", (t = filled(TD_DTYPE_I64, 0, NULL, 7), &t)));
	assert_index_matches_json(
		save(d, "scalar", td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_LIKE | TD_TEST_NOSYNC)));
	td_dict_free(d);
}

/* A tensordict fixture copied into the test's directory, whose index tdstore writes. */
static const char *fixture_copy(const char *name)
{
	static char path[4400];
	char src[4400];

	cr_assert_not_null(getenv("TD_TEST_DATA"), "TD_TEST_DATA is not set");
	snprintf(src, sizeof(src), "%s/tensordict/%s", getenv("TD_TEST_DATA"), name);
	snprintf(path, sizeof(path), "%s", tpath(name));
	copy_tree(src, path);
	return path;
}

/* A change that leaves the store as it was: adding a leaf and removing it. */
static void add_and_remove(td_store *st)
{
	td_tensor t = filled(TD_DTYPE_U8, td_dict_batch_ndim(td_store_dict(st)),
		td_dict_batch_shape(td_store_dict(st)), 1);

	td_cr_assert_ok(td_store_add_tensor(st, "tdstore_probe", &t));
	td_tensor_release(&t);
	td_cr_assert_ok(td_store_remove(st, "tdstore_probe"));
}

Test(store_index, tensordict_fixtures_open_from_the_index_tdstore_wrote_for_them)
{
	static const char *const fixtures[] = { "flat", "nested", "strings", "strings_nd",
		"encoded_keys", "zero_elem", "zero_elem_inner", "legacy_raw" };
	size_t i;

	for (i = 0; i < TD_TEST_ARRAY_LEN(fixtures); i++) {
		const char *path = fixture_copy(fixtures[i]);
		td_store *st, *ref;
		char src[4400];

		/* Read-only opens never write; read-write ones write at the first change. */
		st = open_as(path, NULL, TD_DIX_ABSENT);
		td_store_close(st);
		st = open_as(path, td_test_rw(), TD_DIX_ABSENT);
		cr_assert_not(td_test_exists(index_path(path)), "%s", fixtures[i]);
		add_and_remove(st);
		td_store_close(st);
		cr_assert(td_test_exists(index_path(path)), "%s", fixtures[i]);
		assert_index_matches_json(path);
		/* And it is the dict of the untouched fixture. */
		snprintf(src, sizeof(src), "%s/tensordict/%s", getenv("TD_TEST_DATA"), fixtures[i]);
		ref = open_as(src, NULL, TD_DIX_ABSENT);
		st = open_as(path, NULL, TD_DIX_USED);
		assert_same_dict(td_store_dict(st), td_store_dict(ref), fixtures[i]);
		td_store_close(st);
		td_store_close(ref);
		/* A read-write open through the index keeps it right at the next change. */
		st = open_as(path, td_test_rw(), TD_DIX_USED);
		add_and_remove(st);
		td_store_close(st);
		assert_index_matches_json(path);
	}
}

Test(store_index, the_legacy_raw_leaf_name_is_listed_and_checked)
{
	const char *path = fixture_copy("legacy_raw");
	char enc[4400];
	td__dirindex dx;
	td_store *st;

	st = open_as(path, td_test_rw(), TD_DIX_ABSENT);
	add_and_remove(st);
	td_store_close(st);
	parse_index(path, &dx);
	cr_assert_eq(dx.nraw, 1, "the raw name \"my key.memmap\" is listed");
	cr_assert_str_eq(dx.ix.recs[dx.raw[0]].key, "my key");
	td__dirindex_free(&dx);
	assert_index_matches_json(path);
	/* An encoded name beside the raw one is what a loader opens: the index is not used. */
	snprintf(enc, sizeof(enc), "%s/my%%20key.memmap", path);
	copy_tree(tpath("legacy_raw/my key.memmap"), enc);
	assert_falls_back(path, TD_DIX_STALE, TD_ECORRUPT);
}

/* A directory store written by hand: `files` is a list of (path, text) pairs. */
static const char *hand_made(const char *name, const char *const (*files)[2], size_t n)
{
	static char path[4400];
	char p[9000];
	size_t i;

	snprintf(path, sizeof(path), "%s", tpath(name));
	cr_assert_eq(mkdir(path, 0777), 0);
	for (i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "%s/%s", path, files[i][0]);
		if (!files[i][1])
			cr_assert_eq(mkdir(p, 0777), 0, "%s", p);
		else
			write_text(p, files[i][1]);
	}
	return path;
}

#define TAIL(shape) \
	"\"shape\": " shape ", \"device\": \"cpu\", " \
	"\"_type\": \"<class 'tensordict._td.TensorDict'>\"}"
#define LEAF(dtype, shape) \
	"{\"device\": \"cpu\", \"shape\": " shape ", \"dtype\": \"" dtype "\", \"is_nested\": false}"

/* A tensorclass at the root and one nested, legacy raw directory names, as tensordict wrote them. */
static const char *tensorclass_store(void)
{
	static const char *const files[][2] = {
		{ "meta.json", "{\"_type\": \"<class '__main__.Outer'>\"}" },
		{ "_tensordict", NULL },
		{ "_tensordict/meta.json",
			"{\"obs\": {\"type\": \"Obs\"}, \"my sub\": {\"type\": "
			"\"TensorDict\"}, \"my s\": {\"type\": \"NonTensorData\"}, " TAIL("[4]") },
		{ "_tensordict/obs", NULL },
		{ "_tensordict/obs/meta.json", "{\"_type\": \"<class '__main__.Obs'>\"}" },
		{ "_tensordict/obs/_tensordict", NULL },
		{ "_tensordict/obs/_tensordict/meta.json",
			"{\"pixels\": " LEAF("torch.uint8", "[4, 3]") ", " TAIL("[4]") },
		{ "_tensordict/obs/_tensordict/pixels.memmap", "abcdefghijkl" },
		{ "_tensordict/my sub", NULL },
		{ "_tensordict/my sub/meta.json", "{\"v\": " LEAF("torch.int8", "[4]") ", " TAIL("[4]") },
		{ "_tensordict/my sub/v.memmap", "wxyz" },
		{ "_tensordict/my s", NULL },
		{ "_tensordict/my s/meta.json",
			"{\"_type\": \"<class 'tensordict.tensorclass."
			"NonTensorData'>\", \"data\": \"text\", \"_metadata\": null, \"_is_non_tensor\": "
			"true}" },
	};

	return hand_made("tc", files, TD_TEST_ARRAY_LEN(files));
}

Test(store_index, tensorclasses_and_raw_directory_names_open_from_the_index)
{
	const char *path = tensorclass_store();
	td__dirindex dx;
	td_store *st;
	uint32_t k, shells = 0, raws = 0;
	td_tensor t;

	st = open_as(path, td_test_rw(), TD_DIX_ABSENT);
	t = filled(TD_DTYPE_F32, 1, (const int64_t[]){ 4 }, 2.5);
	td_cr_assert_ok(td_store_add_tensor(st, "obs.added", &t)); /* into obs/_tensordict/ */
	td_tensor_release(&t);
	td_store_close(st);
	cr_assert(td_test_exists(tpath("tc/_tensordict/obs/_tensordict/added.memmap")));
	parse_index(path, &dx);
	for (k = 0; k < dx.ndirs; k++) {
		shells += dx.dirs[k].role == TD_DIRINDEX_SHELL;
		raws += (dx.dirs[k].flags & TD_DIRINDEX_DIR_RAW) != 0;
	}
	cr_assert_eq(shells, 2, "the root and obs are tensorclasses");
	cr_assert_eq(raws, 2, "\"my sub\" and \"my s\" have raw directory names");
	td__dirindex_free(&dx);
	assert_index_matches_json(path);
	/* The class's own meta.json is checked too: a class that becomes a TensorDict. */
	edit_file(tpath("tc/_tensordict/obs/meta.json"), "{\"_type\": \"<class '__main__.Obs'>\"}",
		"{\"pixels\": " LEAF("torch.uint8", "[4, 3]") ", " TAIL("[4]"));
	copy_tree(tpath("tc/_tensordict/obs/_tensordict/pixels.memmap"),
		tpath("tc/_tensordict/obs/pixels.memmap"));
	assert_falls_back(path, TD_DIX_STALE, TD_ECORRUPT);
	/* A raw directory name with the encoded one beside it. */
	st = open_as(path, td_test_rw(), TD_DIX_STALE);
	add_and_remove(st);
	td_store_close(st);
	assert_index_matches_json(path);
	copy_tree(tpath("tc/_tensordict/my sub"), tpath("tc/_tensordict/my%20sub"));
	assert_falls_back(path, TD_DIX_STALE, TD_ECORRUPT);
}

/* ------------------------------------------------------------------------ */
/* Every change rewrites the index                                           */
/* ------------------------------------------------------------------------ */

/* The index is the one written at the store's generation, and matches. */
static void assert_current(td_store *st)
{
	td__dirindex dx;
	td_store *ro;

	parse_index(td_store_path(st), &dx);
	cr_assert_eq(dx.generation, td_store_generation(st), "generation %llu, store at %llu",
		(unsigned long long)dx.generation, (unsigned long long)td_store_generation(st));
	td__dirindex_free(&dx);
	assert_index_matches_json(td_store_path(st));
	ro = open_as(td_store_path(st), NULL, TD_DIX_USED);
	assert_same_dict(td_store_dict(ro), td_store_dict(st), "the writer's dict");
	td_store_close(ro);
}

Test(store_index, every_schema_change_rewrites_the_index)
{
	static const int64_t s42[] = { 4, 2 }, s5[] = { 5 };
	td_dict *d, *free_dict;
	td_store *st;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 1, (const int64_t[]){ 4 }));
	put_arange(d, "base", TD_DTYPE_I32, 1, (const int64_t[]){ 4 });
	td_cr_assert_ok(td_dict_set_string(d, "s", "kept"));
	td_cr_assert_ok(td_store_memmap(&st, d, tpath("s"), NULL));
	td_dict_free(d);
	assert_current(st);

	t = filled(TD_DTYPE_F16, 2, s42, 1);
	td_cr_assert_ok(td_store_add_tensor(st, "x", &t));
	td_tensor_release(&t);
	assert_current(st);
	td_cr_assert_ok(td_store_add_empty(st, "a.b c.y", TD_DTYPE_U16, 1, (const int64_t[]){ 4 }));
	assert_current(st);
	td_cr_assert_ok(td_store_grow(st, 6));
	assert_current(st);
	td_cr_assert_ok(td_store_remove(st, "x"));
	assert_current(st);
	td_cr_assert_ok(td_store_remove(st, "a.b c"));
	assert_current(st);
	td_cr_assert_ok(td_store_remove(st, "s"));
	assert_current(st);
	td_store_close(st);

	/* td_store_grow_leaf: a leaf of a dict without batch dims. */
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	put_arange(d, "v", TD_DTYPE_I64, 1, (const int64_t[]){ 3 });
	td_cr_assert_ok(td_dict_new(&free_dict, 0, NULL));
	put_arange(free_dict, "v", TD_DTYPE_I64, 1, (const int64_t[]){ 3 });
	td_cr_assert_ok(td_dict_set_dict_take(d, "free", free_dict));
	td_cr_assert_ok(td_store_memmap(&st, d, tpath("g"), NULL));
	td_dict_free(d);
	td_cr_assert_ok(td_store_grow_leaf(st, "free.v", 5));
	assert_current(st);
	td_cr_assert_ok(td_store_grow_leaf(st, "v", s5[0]));
	assert_current(st);
	td_store_close(st);
}

Test(store_index, other_handles_reload_through_the_index_a_writer_rewrote)
{
	td_dict *d = rich_dict();
	const char *path = save(d, "shared", NULL);
	td_store *w = open_as(path, td_test_rw(), TD_DIX_USED);
	td_store *r = open_as(path, NULL, TD_DIX_USED);
	td_store *w2 = open_as(path, td_test_rw(), TD_DIX_USED);
	td_tensor t = filled(TD_DTYPE_I8, 1, B3, 3);
	bool changed;

	td_cr_assert_ok(td_store_add_tensor(w, "k", &t));
	td_tensor_release(&t);
	td_cr_assert_ok(td_store_refresh(&changed, r));
	cr_assert(changed);
	cr_assert_eq(r->dir.dix_state, TD_DIX_USED);
	assert_same_dict(td_store_dict(r), td_store_dict(w), "refreshed");
	/* The second writer reloads through the index before its own change. */
	td_cr_assert_ok(td_store_remove(w2, "k"));
	cr_assert_eq(w2->dir.dix_state, TD_DIX_USED);
	assert_current(w2);
	td_store_close(w);
	td_store_close(w2);
	td_store_close(r);
	td_dict_free(d);
}

/* A lazy stack of two dicts of batch [], "x" int64 of 2 and 3 elements (ragged). */
static td_dict *small_stack(void)
{
	td_dict *kids[2], *lazy;
	int i;

	for (i = 0; i < 2; i++) {
		td_cr_assert_ok(td_dict_new(&kids[i], 0, NULL));
		put_arange(kids[i], "x", TD_DTYPE_I64, 1, (const int64_t[]){ 2 + i });
	}
	td_cr_assert_ok(td_lazy_stack(&lazy, kids, 2, 0, TD_LAZY_TAKE));
	return lazy;
}

Test(store_index, lazy_stacks_are_read_from_their_meta_json_files)
{
	td_dict *lazy, *d;
	const char *path;
	td_store *st;

	/* A plain store with its index, then a lazy stack saved over it. */
	d = rich_dict();
	path = save(d, "lz", NULL);
	td_dict_free(d);
	cr_assert(td_test_exists(index_path(path)));
	lazy = small_stack();
	td_cr_assert_ok(
		td_store_memmap(&st, lazy, path, td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_EXISTSOK)));
	td_store_close(st);
	cr_assert_not(td_test_exists(index_path(path)), "the stale index was removed");
	assert_falls_back(path, TD_DIX_ABSENT, TD_ENOTFOUND);
	assert_falls_back(fixture_copy("lazy_stack"), TD_DIX_ABSENT, TD_ENOTFOUND);
	td_dict_free(lazy);
}

Test(store_index, lazy_stacks_nested_in_dicts_are_read_from_their_meta_json_files)
{
	td_dict *lazy, *d;
	const char *path;
	td_store *st;

	/* A plain store with its index, then a dict holding a lazy stack saved over it. */
	d = rich_dict();
	path = save(d, "lzn", NULL);
	cr_assert(td_test_exists(index_path(path)));
	lazy = small_stack();
	td_dict_free(d);
	td_cr_assert_ok(td_dict_new(&d, 1, (const int64_t[]){ 2 }));
	td_cr_assert_ok(td_dict_set_dict_take(d, "inner.lz", lazy));
	td_cr_assert_ok(
		td_store_memmap(&st, d, path, td_test_memmap(TD_PLACEMENT_DIRECTORY, TD_TEST_EXISTSOK)));
	td_store_close(st);
	cr_assert_not(td_test_exists(index_path(path)), "the stale index was removed");
	assert_falls_back(path, TD_DIX_ABSENT, TD_ENOTFOUND);
	/* A read-write open writes none either. */
	td_cr_assert_ok(td_store_open(&st, path, td_test_rw()));
	td_store_close(st);
	cr_assert_not(td_test_exists(index_path(path)));
	assert_falls_back(fixture_copy("lazy_nested"), TD_DIX_ABSENT, TD_ENOTFOUND);
	td_dict_free(d);
}

Test(store_index, the_environment_variable_turns_the_index_off_for_reads_and_writes)
{
	td_dict *d = rich_dict();
	const char *path;
	td_store *st;
	td_tensor t;
	size_t len0, len1;
	char *before, *after;

	cr_assert_eq(setenv("TDSTORE_DIR_INDEX", "off", 1), 0);
	path = save(d, "off", NULL);
	cr_assert_not(td_test_exists(index_path(path)));
	unsetenv("TDSTORE_DIR_INDEX");
	td_dict_free(d);
	st = open_as(path, td_test_rw(), TD_DIX_ABSENT);
	add_and_remove(st);
	td_store_close(st);
	before = read_file(index_path(path), &len0);
	cr_assert_eq(setenv("TDSTORE_DIR_INDEX", "0", 1), 0);
	st = open_as(path, td_test_rw(), TD_DIX_OFF);
	t = filled(TD_DTYPE_I8, 1, B3, 3);
	td_cr_assert_ok(td_store_add_tensor(st, "k", &t));
	td_tensor_release(&t);
	td_store_close(st);
	unsetenv("TDSTORE_DIR_INDEX");
	after = read_file(index_path(path), &len1);
	cr_assert(len0 == len1 && memcmp(before, after, len0) == 0, "the index was not written");
	/* Left as it was, it no longer matches the meta.json files and is not used. */
	assert_falls_back(path, TD_DIX_STALE, TD_ECORRUPT);
	free(before);
	free(after);
}

/* ------------------------------------------------------------------------ */
/* meta.json files edited behind tdstore's back                              */
/* ------------------------------------------------------------------------ */

/* A store of batch [3]: leaves a (float32 [3, 2]) and b, dict sub with c, string s. */
static const char *small_store(const char *name)
{
	static const int64_t s32[] = { 3, 2 };
	td_dict *d, *sub;
	const char *path;

	td_cr_assert_ok(td_dict_new(&d, 1, B3));
	put_arange(d, "a", TD_DTYPE_F32, 2, s32);
	put_arange(d, "b", TD_DTYPE_I64, 1, B3);
	td_cr_assert_ok(td_dict_new(&sub, 1, B3));
	put_arange(sub, "c", TD_DTYPE_I32, 1, B3);
	td_cr_assert_ok(td_dict_set_dict_take(d, "sub", sub));
	td_cr_assert_ok(td_dict_set_string(d, "s", "hello"));
	path = save(d, name, NULL);
	td_dict_free(d);
	assert_index_matches_json(path);
	return path;
}

static const td_value *get(td_store *st, const char *const *parts, size_t n)
{
	td_key *k = td_test_key(parts, n);
	const td_value *v;

	td_cr_assert_ok(td_dict_get_key(&v, td_store_dict(st), k));
	td_key_free(k);
	return v;
}

Test(store_index, a_meta_json_changed_in_place_with_the_same_size_is_detected)
{
	const char *path = small_store("same");
	const char *a[] = { "a" }, *c[] = { "sub", "c" }, *s[] = { "s" };
	td_store *st;

	/* Same length: float32 -> int32 (two spaces fill in). */
	edit_file(tpath("same/meta.json"), "\"dtype\": \"torch.float32\"",
		"\"dtype\":   \"torch.int32\"");
	assert_falls_back(path, TD_DIX_STALE, TD_ECORRUPT);
	st = open_as(path, NULL, TD_DIX_STALE);
	cr_assert_eq(get(st, a, 1)->tensor.dtype, TD_DTYPE_I32);
	td_store_close(st);

	/* A nested dict's, of another size: its leaf's dtype. */
	path = small_store("nested");
	edit_file(tpath("nested/sub/meta.json"), "torch.int32", "torch.float32");
	st = open_as(path, NULL, TD_DIX_STALE);
	cr_assert_eq(get(st, c, 2)->tensor.dtype, TD_DTYPE_F32);
	td_store_close(st);

	/* A string's: its text, same length. */
	path = small_store("str");
	edit_file(tpath("str/s/meta.json"), "hello", "jello");
	st = open_as(path, NULL, TD_DIX_STALE);
	cr_assert_str_eq(get(st, s, 1)->blob.data, "jello");
	td_store_close(st);
}

Test(store_index, a_meta_json_rewritten_by_python_is_detected)
{
	const char *path = small_store("py");
	const char *b[] = { "b" }, *n[] = { "new" };
	char *text;
	size_t len;
	td_store *st;

	/*
	 * As tensordict rewrites a directory: a new meta.json (compact, another
	 * key order) renamed over the old one, and a new leaf file.
	 */
	write_text(tpath("py/meta.json.tmp"),
		"{\"new\":{\"device\":\"cpu\",\"shape\":[3],\"dtype\":\"torch.int8\",\"is_nested\":false},"
		"\"b\":{\"device\":\"cpu\",\"shape\":[3],\"dtype\":\"torch.int64\",\"is_nested\":false},"
		"\"sub\":{\"type\":\"TensorDict\"},\"shape\":[3],\"device\":\"cpu\"}");
	write_text(tpath("py/new.memmap"), "xyz");
	cr_assert_eq(rename(tpath("py/meta.json.tmp"), tpath("py/meta.json")), 0);
	assert_falls_back(path, TD_DIX_STALE, TD_ECORRUPT);
	st = open_as(path, NULL, TD_DIX_STALE);
	cr_assert_eq(td_dict_len(td_store_dict(st)), 3);
	cr_assert_eq(((const char *)td_tensor_data(&get(st, n, 1)->tensor))[2], 'z');
	cr_assert_eq(get(st, b, 1)->tensor.dtype, TD_DTYPE_I64);
	td_store_close(st);

	/* The same bytes written again (a new file, renamed over): still the same store. */
	path = small_store("again");
	text = read_file(tpath("again/sub/meta.json"), &len);
	write_file(tpath("again/sub/meta.json.tmp"), text, len);
	cr_assert_eq(rename(tpath("again/sub/meta.json.tmp"), tpath("again/sub/meta.json")), 0);
	free(text);
	assert_index_matches_json(path);
	/* A directory removed, a meta.json removed, a file where a directory was. */
	cr_assert_eq(unlink(tpath("again/s/meta.json")), 0);
	cr_assert_eq(rmdir(tpath("again/s")), 0);
	edit_file(tpath("again/meta.json"), "\"s\": {\"type\": \"NonTensorData\"}, ", "");
	assert_falls_back(path, TD_DIX_STALE, TD_ECORRUPT);
}

Test(store_index, leaf_files_are_still_checked_with_the_index)
{
	const char *path = small_store("leaves");
	td_store *st = NULL;

	/* A shorter file: both ways refuse it. */
	cr_assert_eq(truncate(tpath("leaves/b.memmap"), 8), 0);
	td_cr_assert_err(td_store_open(&st, path, NULL), TD_ECORRUPT);
	/* A symbolic link. */
	cr_assert_eq(unlink(tpath("leaves/b.memmap")), 0);
	cr_assert_eq(symlink("a.memmap", tpath("leaves/b.memmap")), 0);
	td_cr_assert_err(td_store_open(&st, path, NULL), TD_ECORRUPT);
	/* A directory. */
	cr_assert_eq(unlink(tpath("leaves/b.memmap")), 0);
	cr_assert_eq(mkdir(tpath("leaves/b.memmap"), 0777), 0);
	td_cr_assert_err(td_store_open(&st, path, NULL), TD_ECORRUPT);
	/* Missing. */
	cr_assert_eq(rmdir(tpath("leaves/b.memmap")), 0);
	td_cr_assert_err(td_store_open(&st, path, NULL), TD_ECORRUPT);
	/* A longer file is accepted, as the meta.json loader accepts it. */
	write_text(tpath("leaves/b.memmap"), "0123456789abcdefghijklmnopqrstuvwxyz");
	assert_index_matches_json(path);
	/* A meta.json that is a symbolic link to an identical file. */
	cr_assert_eq(rename(tpath("leaves/sub/meta.json"), tpath("leaves/m.json")), 0);
	cr_assert_eq(symlink("../m.json", tpath("leaves/sub/meta.json")), 0);
	td_cr_assert_err(td_store_open(&st, path, NULL), TD_ECORRUPT);
}

/* ------------------------------------------------------------------------ */
/* Indexes that are missing, damaged or inconsistent                         */
/* ------------------------------------------------------------------------ */

/* Recompute the checksums of an index's bytes: the key index's, then the file's. */
static void reseal(uint8_t *b, size_t len)
{
	uint64_t ilen = td__le64(b + 32);
	uint8_t *ix = b + 64;

	if (len >= 128 && ilen >= 64 && ilen <= len - 64)
		td__put_le64(ix + 56, XXH64(ix + 64, (size_t)ilen - 64, XXH64(ix, 56, 0)));
	if (len >= 64)
		td__put_le64(b + 56, XXH64(b + 64, len - 64, XXH64(b, 56, 0)));
}

/* The store's index bytes, edited by `patch` at `off` (and resealed when asked). */
static void patch_index(const char *store, const uint8_t *orig, size_t len, size_t off,
	const void *patch, size_t n, bool seal)
{
	uint8_t *b = malloc(len);

	cr_assert_not_null(b);
	memcpy(b, orig, len);
	memcpy(b + off, patch, n);
	if (seal)
		reseal(b, len);
	write_file(index_path(store), b, len);
	free(b);
}

/* What td__dirindex_parse says of the store's index file. */
static int parse_status(const char *store)
{
	td__dirindex dx;
	size_t len;
	char *buf = read_file(index_path(store), &len);
	int rc = td__dirindex_parse(&dx, buf, len, "test");

	td__dirindex_free(&dx);
	free(buf);
	return rc;
}

/* The file is refused with `code` by the parser, and the open reads the meta.json files. */
static void assert_refused(const char *store, int code)
{
	cr_assert_eq(parse_status(store), code, "parse: %d, expected %d (%s)", parse_status(store),
		code, td_error_last()->message);
	assert_falls_back(store, TD_DIX_REFUSED, code);
}

Test(store_index, missing_truncated_and_damaged_index_files_are_refused)
{
	static const uint8_t v2[4] = { 2 }, one[4] = { 1 }, big[4] = { 0, 0, 0, 0x40 }, zero8[8];
	static const struct {
		size_t offset;
		const void *bytes;
		size_t n;
		bool seal;
		int code;
	} fields[] = {
		{ 0, "TDSDIRIY", 8, true, TD_ECORRUPT }, { 8, v2, 4, true, TD_EVERSION },
		{ 12, one, 4, true, TD_ECORRUPT },    /* header_size */
		{ 16, one, 4, true, TD_ENOTSUP },     /* flags */
		{ 28, one, 4, true, TD_ECORRUPT },    /* reserved0 */
		{ 48, one, 4, true, TD_ECORRUPT },    /* reserved1 */
		{ 56, zero8, 8, false, TD_ECORRUPT }, /* checksum */
		{ 20, big, 4, true, TD_ECORRUPT },    /* dir_count: 2^30 */
		{ 24, one, 4, true, TD_ECORRUPT },    /* raw_count */
		{ 32, big, 4, true, TD_ECORRUPT },    /* index_length */
	};
	const char *path = small_store("bad");
	uint8_t *good;
	size_t len, cut, i;

	good = (uint8_t *)read_file(index_path(path), &len);
	/* Missing; empty; a directory; a symbolic link. */
	cr_assert_eq(unlink(index_path(path)), 0);
	assert_falls_back(path, TD_DIX_ABSENT, TD_ENOTFOUND);
	write_file(index_path(path), "", 0);
	assert_refused(path, TD_ECORRUPT);
	cr_assert_eq(unlink(index_path(path)), 0);
	cr_assert_eq(mkdir(index_path(path), 0777), 0);
	assert_falls_back(path, TD_DIX_REFUSED, 0);
	cr_assert_eq(rmdir(index_path(path)), 0);
	write_file(tpath("bad/copy"), good, len);
	cr_assert_eq(symlink("copy", index_path(path)), 0);
	assert_falls_back(path, TD_DIX_REFUSED, TD_ECORRUPT);
	cr_assert_eq(unlink(index_path(path)), 0);
	/* Truncated anywhere (a torn write): the checksum or a size fails. */
	for (cut = 0; cut < len; cut += cut < 80 ? 7 : 61) {
		write_file(index_path(path), good, cut);
		assert_refused(path, TD_ECORRUPT);
	}
	/* Garbled: any byte flipped, sealed or not. */
	for (i = 0; i < len; i += 1 + i / 16) {
		uint8_t x = good[i] ^ 0x5a;

		patch_index(path, good, len, i, &x, 1, false);
		cr_assert_neq(parse_status(path), TD_OK, "byte %zu flipped", i);
		assert_falls_back(path, TD_DIX_REFUSED, 0);
	}
	/* Header fields: magic, version, header size, flags, reserved, checksum, counts, lengths. */
	for (i = 0; i < TD_TEST_ARRAY_LEN(fields); i++) {
		patch_index(path, good, len, fields[i].offset, fields[i].bytes, fields[i].n,
			fields[i].seal);
		assert_refused(path, fields[i].code);
	}
	free(good);
}

/* A mutation of a parsed index, re-encoded and sealed (a well-formed file that lies). */
typedef void (*mutation)(td__dirindex *dx);

/* The index of record `key` (of any parent). */
static uint32_t rec_of(const td__dirindex *dx, const char *key)
{
	uint32_t i;

	for (i = 0; i < dx->ix.n; i++)
		if (!strcmp(dx->ix.recs[i].key, key))
			return i;
	cr_assert_fail("no record %s", key);
	return 0;
}

/* The first directory entry of record `r`. */
static td__dirent *dir_of(td__dirindex *dx, uint32_t r)
{
	uint32_t k;

	for (k = 0; k < dx->ndirs; k++)
		if (dx->dirs[k].record == r)
			return &dx->dirs[k];
	cr_assert_fail("record %u has no directory", (unsigned)r);
	return NULL;
}

static void set_key(td__dirindex *dx, uint32_t r, const char *key)
{
	td__keyrec *rec = &dx->ix.recs[r];

	td__free(rec->key);
	rec->key = td__strndup(key, strlen(key));
	rec->key_len = strlen(key);
}

static void m_drop_last_dir(td__dirindex *dx)
{
	dx->ndirs--;
}
static void m_dir_for_a_tensor(td__dirindex *dx)
{
	dir_of(dx, rec_of(dx, "sub"))->record = rec_of(dx, "b");
}
static void m_swap_dirs(td__dirindex *dx)
{
	td__dirent t = dx->dirs[0];

	dx->dirs[0] = dx->dirs[1];
	dx->dirs[1] = t;
}
static void m_raw_root(td__dirindex *dx)
{
	dx->dirs[0].flags = TD_DIRINDEX_DIR_RAW;
}
static void m_raw_plain_key(td__dirindex *dx)
{
	dir_of(dx, rec_of(dx, "sub"))->flags = TD_DIRINDEX_DIR_RAW;
}
static void m_raw_slash_key(td__dirindex *dx)
{
	uint32_t r = rec_of(dx, "sub");

	set_key(dx, r, "../up");
	dir_of(dx, r)->flags = TD_DIRINDEX_DIR_RAW;
}
static void m_raw_dotdot_key(td__dirindex *dx)
{
	uint32_t r = rec_of(dx, "sub");

	set_key(dx, r, "..");
	dir_of(dx, r)->flags = TD_DIRINDEX_DIR_RAW;
}
static void m_unknown_dir_flag(td__dirindex *dx)
{
	dx->dirs[0].flags = 0x80;
}
static void m_wrong_role(td__dirindex *dx)
{
	dir_of(dx, rec_of(dx, "s"))->role = TD_DIRINDEX_STRINGS;
}
static void m_shell_without_home(td__dirindex *dx)
{
	dx->dirs[0].role = TD_DIRINDEX_SHELL;
}
static void m_meta_length_zero(td__dirindex *dx)
{
	dx->dirs[0].meta_length = 0;
}
static void m_meta_length_huge(td__dirindex *dx)
{
	dx->dirs[0].meta_length = (64u << 20) + 1;
}
static void m_raw_for_a_dict(td__dirindex *dx)
{
	td__dirindex_push_raw(dx, rec_of(dx, "sub"));
}
static void m_raw_plain_leaf(td__dirindex *dx)
{
	td__dirindex_push_raw(dx, rec_of(dx, "a"));
}
static void m_raw_out_of_range(td__dirindex *dx)
{
	td__dirindex_push_raw(dx, 1000);
}
static void m_duplicate_key(td__dirindex *dx)
{
	set_key(dx, rec_of(dx, "b"), "a");
}
static void m_reserved_key(td__dirindex *dx)
{
	set_key(dx, rec_of(dx, "b"), "shape");
}
static void m_non_utf8_key(td__dirindex *dx)
{
	set_key(dx, rec_of(dx, "b"), "\xff\xfe");
}
static void m_not_preorder(td__dirindex *dx)
{
	/* The string after the nested dict's leaf moves before it: parent order breaks. */
	uint32_t s = rec_of(dx, "s"), c = rec_of(dx, "c");
	td__keyrec t = dx->ix.recs[s];

	cr_assert(s == c + 1, "the fixture's order");
	dx->ix.recs[s] = dx->ix.recs[c];
	dx->ix.recs[c] = t;
	dx->dirs[dx->ndirs - 1].record = c;
}
static void m_extent(td__dirindex *dx)
{
	td__keyrec *r = &dx->ix.recs[rec_of(dx, "a")];

	r->offset = 4096;
	r->capacity = 4096;
}
static void m_packed_index(td__dirindex *dx)
{
	dx->ix.flags = 0;
}
static void m_generation(td__dirindex *dx)
{
	dx->ix.generation++;
}
static void m_length(td__dirindex *dx)
{
	dx->ix.recs[rec_of(dx, "a")].length += 4;
}

Test(store_index, well_sealed_but_inconsistent_indexes_are_refused)
{
	static const struct {
		const char *name;
		mutation m;
		int code;
	} cases[] = {
		{ "a dir count that lies (an entry missing)", m_drop_last_dir, TD_ECORRUPT },
		{ "a directory for a tensor", m_dir_for_a_tensor, TD_ECORRUPT },
		{ "entries out of record order", m_swap_dirs, TD_ECORRUPT },
		{ "a raw name for the root", m_raw_root, TD_ECORRUPT },
		{ "a raw name for a key that encodes to itself", m_raw_plain_key, TD_ECORRUPT },
		{ "a raw directory name with a /", m_raw_slash_key, TD_ECORRUPT },
		{ "a raw directory name ..", m_raw_dotdot_key, TD_ECORRUPT },
		{ "unknown entry flags", m_unknown_dir_flag, TD_ECORRUPT },
		{ "a string's directory as an array's", m_wrong_role, TD_ECORRUPT },
		{ "a shell without its home", m_shell_without_home, TD_ECORRUPT },
		{ "an empty meta.json", m_meta_length_zero, TD_ECORRUPT },
		{ "a meta.json over 64 MiB", m_meta_length_huge, TD_ECORRUPT },
		{ "a raw file name for a dict", m_raw_for_a_dict, TD_ECORRUPT },
		{ "a raw file name for a key that encodes to itself", m_raw_plain_leaf, TD_ECORRUPT },
		{ "a raw file name for no record", m_raw_out_of_range, TD_ECORRUPT },
		{ "duplicate keys", m_duplicate_key, TD_ECORRUPT },
		{ "a key meta.json keeps for the dict", m_reserved_key, TD_ECORRUPT },
		{ "a key that is not UTF-8", m_non_utf8_key, TD_ECORRUPT },
		{ "records not in depth-first order", m_not_preorder, TD_ECORRUPT },
		{ "a tensor extent", m_extent, TD_ECORRUPT },
		{ "the index of a packed store", m_packed_index, TD_ECORRUPT },
		{ "the key index of another generation", m_generation, TD_ECORRUPT },
		{ "a length that is not the shape's", m_length, TD_ECORRUPT },
	};
	const char *path = small_store("lies");
	size_t i;

	for (i = 0; i < TD_TEST_ARRAY_LEN(cases); i++) {
		td__dirindex dx;

		parse_index(path, &dx);
		cases[i].m(&dx);
		write_index(path, &dx);
		td__dirindex_free(&dx);
		cr_assert_eq(parse_status(path), cases[i].code, "%s: parse gives %d (%s)", cases[i].name,
			parse_status(path), td_error_last()->message);
		assert_falls_back(path, TD_DIX_REFUSED, cases[i].code);
		/* Put the good index back (the next change writes it). */
		{
			td_store *st = open_as(path, td_test_rw(), TD_DIX_REFUSED);

			add_and_remove(st);
			td_store_close(st);
		}
		assert_index_matches_json(path);
	}
}

Test(store_index, dicts_nested_deeper_than_a_loader_reads_are_refused)
{
	td__dirindex dx;
	td__keyrec r;
	const char *path = small_store("deep");
	uint32_t i, parent = 0;

	parse_index(path, &dx);
	/* 64 nested dicts under the root (records appended in preorder): one too many. */
	for (i = 0; i < TD_KEY_MAX_DEPTH; i++) {
		td__dirent e = { 0, TD_DIRINDEX_HOME, 0, 10, 0 };

		memset(&r, 0, sizeof(r));
		r.kind = TD_KEYINDEX_KIND_DICT;
		r.ndim = 1;
		r.shape[0] = 3;
		r.parent = parent;
		r.key = (char *)"n";
		r.key_len = 1;
		td_cr_assert_ok(td__keyindex_push(&dx.ix, &r, &parent));
		e.record = parent;
		td_cr_assert_ok(td__dirindex_push_dir(&dx, &e));
	}
	write_index(path, &dx);
	td__dirindex_free(&dx);
	cr_assert_eq(parse_status(path), TD_ECORRUPT, "%s", td_error_last()->message);
	cr_assert_not_null(strstr(td_error_last()->message, "too deep"), "%s",
		td_error_last()->message);
}

Test(store_index, a_journal_left_by_a_crashed_commit_means_the_meta_json_files_are_read)
{
	const char *path = small_store("journal");
	char jpath[4400];
	td_store *st;

	/* An unsealed journal (a writer died writing it) and a sealed one alike. */
	snprintf(jpath, sizeof(jpath), "%s/.tdstore-journal", path);
	write_text(jpath, "TDSJOURN torn");
	assert_falls_back(path, TD_DIX_JOURNAL, TD_EBUSY);
	/* A read-write open recovers (drops) it; the index is then used again. */
	st = open_as(path, td_test_rw(), TD_DIX_USED);
	cr_assert_not(td_test_exists(jpath));
	td_store_close(st);
	assert_index_matches_json(path);
}

/* The smallest index, the worked example of doc/format.md 7.10, is what tdstore writes. */
Test(store_index, the_worked_example_of_the_spec_is_what_tdstore_writes)
{
	char src[4400];
	td__dirindex dx;
	td_dict *d;
	const char *path;
	size_t len, got_len, meta_len;
	char *example, *got, *meta;

	cr_assert_not_null(getenv("TD_SRCDIR"), "TD_SRCDIR is not set");
	snprintf(src, sizeof(src), "%s/tests/fuzz/corpus/store_index/example", getenv("TD_SRCDIR"));
	example = read_file(src, &len);
	cr_assert_eq(len, 200);
	td_cr_assert_ok(td__dirindex_parse(&dx, example, len, "example"));
	cr_assert_eq(dx.generation, 1);
	cr_assert_eq(dx.ix.n, 1);
	cr_assert_eq(dx.ix.recs[0].kind, TD_KEYINDEX_KIND_DICT);
	cr_assert_eq(dx.ndirs, 1);
	cr_assert_eq(dx.nraw, 0);
	cr_assert_eq(dx.dirs[0].role, TD_DIRINDEX_HOME);
	/* An empty dict of batch [], saved into a new directory (generation 1). */
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	path = save(d, "example", NULL);
	td_dict_free(d);
	meta = read_file(tpath("example/meta.json"), &meta_len);
	cr_assert_eq(dx.dirs[0].meta_length, meta_len);
	cr_assert_eq(dx.dirs[0].meta_hash, XXH3_64bits(meta, meta_len));
	got = read_file(index_path(path), &got_len);
	cr_assert(got_len == len && memcmp(got, example, len) == 0,
		"the example is not what "
		"td_store_memmap writes");
	assert_index_matches_json(path);
	td__dirindex_free(&dx);
	free(meta);
	free(got);
	free(example);
}

/* ------------------------------------------------------------------------ */
/* Writers killed at random points                                           */
/* ------------------------------------------------------------------------ */

/* Any open of `path` (the index used or not) gives what the meta.json files say. */
static int assert_reopens_as_json(const char *path, const td_store_open_opts *opts)
{
	td_store *a = NULL, *b = open_json(path);
	int state;

	td_cr_assert_ok(td_store_open(&a, path, opts));
	state = a->dir.dix_state;
	assert_same_dict(td_store_dict(a), td_store_dict(b), path);
	td_store_close(a);
	td_store_close(b);
	return state;
}

Test(store_index, writers_killed_at_random_points_leave_an_index_that_is_right_or_unused)
{
	const int iterations = td_test_under_valgrind() ? 12 : 200;
	const char *path;
	char journal[4400];
	td_store *st, *watch;
	td_dict *d, *sub;
	uint64_t seed = 777;
	int it, used = 0, stale = 0, journals = 0;

	td_cr_assert_ok(td_dict_new(&d, 1, (const int64_t[]){ 2 }));
	put_arange(d, "base", TD_DTYPE_I64, 1, (const int64_t[]){ 2 });
	td_cr_assert_ok(td_dict_new(&sub, 1, (const int64_t[]){ 2 }));
	put_arange(sub, "base", TD_DTYPE_I64, 1, (const int64_t[]){ 2 });
	td_cr_assert_ok(td_dict_set_dict_take(d, "sub", sub));
	path = save(d, "kill", NULL);
	td_dict_free(d);
	snprintf(journal, sizeof(journal), "%s/.tdstore-journal", path);
	watch = open_as(path, NULL, TD_DIX_USED);
	for (it = 0; it < iterations; it++) {
		td_test_writer w = { path, it * 100000 };
		int state;

		/* A third die as a journaled commit starts, the others anywhere. */
		td_test_kill_writer(watch, td_test_schema_writer, &w, it % 3 == 0 ? journal : NULL,
			(long)(td_test_rand(&seed) % 6000000));
		journals += td_test_exists(journal);
		/* Read-only: the index is used only when it matches; else the meta.json files. */
		state = assert_reopens_as_json(path, NULL);
		used += state == TD_DIX_USED;
		stale += state == TD_DIX_STALE;
		cr_assert(state == TD_DIX_USED || state == TD_DIX_STALE || state == TD_DIX_JOURNAL ||
				state == TD_DIX_ABSENT,
			"iteration %d: state %d", it, state);
		/* A writer recovers the store; its next change leaves a right index. */
		td_cr_assert_ok(td_store_open(&st, path, td_test_rw()));
		cr_assert_not(td_test_exists(journal));
		td_cr_assert_ok(td_test_add_filled(st, "probe", it));
		td_cr_assert_ok(td_store_remove(st, "probe"));
		td_store_close(st);
		cr_assert_eq(assert_reopens_as_json(path, NULL), TD_DIX_USED, "iteration %d", it);
	}
	td_store_close(watch);
	cr_log_info("after %d kills: index used %d times, stale %d, %d journals left", iterations, used,
		stale, journals);
	if (!td_test_under_valgrind()) {
		cr_assert(used > 0, "no kill left a usable index");
		cr_assert(stale + journals > 0, "no kill left the index behind the meta.json files");
	}
}

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

typedef struct sweep_ctx {
	const char *path;
	const char *bytes;
	size_t len;
	const td_store_open_opts *opts;
	td__dirindex dx;
	td_store *st;
} sweep_ctx;

static int parse_body(void *arg)
{
	sweep_ctx *c = arg;

	return td__dirindex_parse(&c->dx, c->bytes, c->len, "sweep");
}

static void parse_cleanup(void *arg)
{
	td__dirindex_free(&((sweep_ctx *)arg)->dx);
}

static int open_body(void *arg)
{
	sweep_ctx *c = arg;

	return td_store_open(&c->st, c->path, c->opts);
}

static void open_cleanup(void *arg)
{
	sweep_ctx *c = arg;

	cr_assert_eq(c->st->dir.dix_state, TD_DIX_USED, "the open that succeeded used the index");
	td_store_close(c->st);
}

Test(store_index, allocation_failures_in_parse_and_open_release_everything)
{
	td_dict *d = rich_dict();
	sweep_ctx c = { 0 };
	char *bytes;

	c.path = save(d, "nomem", NULL);
	td_dict_free(d);
	bytes = read_file(index_path(c.path), &c.len);
	c.bytes = bytes;
	td_test_enomem_sweep(parse_body, parse_cleanup, &c);
	c.opts = NULL;
	td_test_enomem_sweep(open_body, open_cleanup, &c);
	c.opts = td_test_rw();
	td_test_enomem_sweep(open_body, open_cleanup, &c);
	free(bytes);
}

Test(store_index, allocation_failures_in_a_change_leave_an_index_that_is_right_or_absent)
{
	td_dict *d = rich_dict();
	const char *path = save(d, "nomem", NULL);
	long k;

	td_dict_free(d);
	/* Fail the k-th allocation of an add (its commit, then its index), for every k. */
	for (k = 0;; k++) {
		td_store *st = NULL;
		td_tensor t = filled(TD_DTYPE_I32, 1, B3, (double)k);
		int rc, state;

		td_cr_assert_ok(td_store_open(&st, path, td_test_rw()));
		td_test_alloc_install(k);
		rc = td_store_add_tensor(st, "probe", &t);
		td_test_alloc_uninstall();
		td_tensor_release(&t);
		cr_assert(rc == TD_OK || rc == TD_ENOMEM, "allocation %ld: %d (%s)", k, rc,
			td_error_last()->message);
		td_store_close(st);
		state = assert_reopens_as_json(path, NULL);
		cr_assert(state == TD_DIX_USED || state == TD_DIX_ABSENT || state == TD_DIX_STALE,
			"allocation %ld: state %d", k, state);
		if (rc == TD_OK && state == TD_DIX_USED)
			break;
		/* Back to the store without the probe, with its index. */
		td_cr_assert_ok(td_store_open(&st, path, td_test_rw()));
		if (rc == TD_OK)
			td_cr_assert_ok(td_store_remove(st, "probe"));
		else
			add_and_remove(st);
		td_store_close(st);
		cr_assert(k < 100000, "the change never succeeded with its index");
	}
}
