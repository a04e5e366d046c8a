/* SPDX-License-Identifier: MIT */
/*
 * test_store_grow.c - growing open stores along dim 0 (td_store_grow,
 * td_store_grow_leaf): values kept and new rows zero, files extended and
 * never truncated, failures that commit nothing, views held across the
 * remap (in this process and in another), growth seen by other processes,
 * processes racing growth and adds, and writers killed (SIGKILL) at random
 * points while they grow and add, after which every reopen succeeds and
 * every committed leaf is intact.
 */
#include "td_test.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(store_grow, .init = td_test_tmpdir_init, .fini = td_test_tmpdir_fini);

static const int64_t B4[] = { 4 };

/* The tensor at a key path (borrowed from d). */
static const td_tensor *leaf(const td_dict *d, const char *const *parts, size_t n)
{
	td_key *k = td_test_key(parts, n);
	const td_value *v;

	td_cr_assert_ok(td_dict_get_key(&v, d, k));
	td_key_free(k);
	cr_assert_eq(v->kind, TD_VALUE_TENSOR);
	return &v->tensor;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = calloc(1, 1 << 16);
	size_t n;

	cr_assert_not_null(f, "open %s", path);
	cr_assert_not_null(buf);
	n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/*
 * A store "name" of batch [4]: a int32 [4] (0..3), img float32 [4,2,3]
 * (0..23), sub (batch [4,5]) with x int64 [4,5] (0..19), a string s, and
 * e float32 [4,0] (no elements, no file).
 */
static td_store *new_store(const char *name)
{
	static const int64_t s423[] = { 4, 2, 3 }, s45[] = { 4, 5 }, s40[] = { 4, 0 };
	td_dict *d, *sub;
	td_store *st;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 1, B4));
	td_test_arange(&t, TD_DTYPE_I32, 1, B4);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "a", &t));
	td_test_arange(&t, TD_DTYPE_F32, 3, s423);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "img", &t));
	td_cr_assert_ok(td_dict_new(&sub, 2, s45));
	td_test_arange(&t, TD_DTYPE_I64, 2, s45);
	td_cr_assert_ok(td_dict_set_tensor_take(sub, "x", &t));
	td_cr_assert_ok(td_dict_set_dict_take(d, "sub", sub));
	td_cr_assert_ok(td_dict_set_string(d, "s", "hello"));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 2, s40));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "e", &t));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path(name), NULL));
	td_dict_free(d);
	return st;
}

/* The store built by new_store(), grown to `rows`: old values, then zeros. */
static void assert_grown(const td_dict *d, int64_t rows)
{
	const char *a[] = { "a" }, *img[] = { "img" }, *x[] = { "sub", "x" }, *e[] = { "e" };
	const td_tensor *t;
	const td_value *v;
	int64_t i;

	cr_assert_eq(td_dict_batch_shape(d)[0], rows);
	t = leaf(d, a, 1);
	cr_assert_eq(td_tensor_shape(t)[0], rows);
	for (i = 0; i < rows; i++)
		cr_assert_eq(((const int32_t *)td_tensor_data(t))[i], i < 4 ? i : 0, "a[%lld]",
			(long long)i);
	t = leaf(d, img, 1);
	cr_assert(t->ndim == 3 && td_tensor_shape(t)[0] == rows && td_tensor_shape(t)[1] == 2 &&
		td_tensor_shape(t)[2] == 3);
	for (i = 0; i < rows * 6; i++)
		cr_assert_eq(((const float *)td_tensor_data(t))[i], i < 24 ? (float)i : 0.0f);
	td_cr_assert_ok(td_dict_get(&v, d, "sub"));
	cr_assert_eq(td_dict_batch_ndim(v->dict), 2);
	cr_assert_eq(td_dict_batch_shape(v->dict)[0], rows);
	cr_assert_eq(td_dict_batch_shape(v->dict)[1], 5);
	t = leaf(d, x, 2);
	for (i = 0; i < rows * 5; i++)
		cr_assert_eq(((const int64_t *)td_tensor_data(t))[i], i < 20 ? i : 0);
	t = leaf(d, e, 1);
	cr_assert(td_tensor_shape(t)[0] == rows && td_tensor_shape(t)[1] == 0);
	td_cr_assert_ok(td_dict_get(&v, d, "s"));
	cr_assert_eq(v->kind, TD_VALUE_STRING);
	cr_assert_str_eq(v->blob.data, "hello");
}

Test(store_grow, every_dict_and_leaf_grows_and_keeps_its_values)
{
	td_store *st = new_store("g"), *ro = NULL;
	uint64_t g0 = td_store_generation(st);
	char *meta;
	FILE *f;

	/* Bytes past a leaf's declared size (tensordict writes some) become zero rows. */
	f = fopen(td_test_path("g/a.memmap"), "ab");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite("\xff\xff\xff\xff\xff\xff\xff\xff", 1, 8, f), 8);
	fclose(f);
	td_cr_assert_ok(td_store_grow(st, 10));
	cr_assert_eq(td_store_generation(st), g0 + 1);
	cr_assert(td_dict_is_locked(td_store_dict(st)));
	assert_grown(td_store_dict(st), 10);
	/* Files are extended to the new size; the zero-element leaf still has none. */
	cr_assert_eq(td_test_file_size(td_test_path("g/a.memmap")), 40);
	cr_assert_eq(td_test_file_size(td_test_path("g/img.memmap")), 10 * 6 * 4);
	cr_assert_eq(td_test_file_size(td_test_path("g/sub/x.memmap")), 10 * 5 * 8);
	cr_assert_not(td_test_exists(td_test_path("g/e.memmap")));
	cr_assert_not(td_test_exists(td_test_path("g/.tdstore-journal")));
	meta = slurp(td_test_path("g/sub/meta.json"));
	cr_assert_not_null(strstr(meta, "\"shape\": [10, 5], \"dtype\": \"torch.int64\""), "%s", meta);
	cr_assert_not_null(strstr(meta, "\"shape\": [10, 5], \"device\": \"cpu\""), "%s", meta);
	free(meta);
	meta = slurp(td_test_path("g/meta.json"));
	cr_assert_not_null(strstr(meta, "\"e\": {\"device\": \"cpu\", \"shape\": [10, 0]"), "%s", meta);
	free(meta);
	/* The grown store is usable: written, grown again, reopened. */
	((int32_t *)td_tensor_data(leaf(td_store_dict(st), (const char *[]){ "a" }, 1)))[9] = 9;
	td_cr_assert_ok(td_store_grow(st, 12));
	cr_assert_eq(((const int32_t *)td_tensor_data(
					 leaf(td_store_dict(st), (const char *[]){ "a" }, 1)))[9],
		9);
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&ro, td_test_path("g"), NULL));
	cr_assert_eq(td_dict_batch_shape(td_store_dict(ro))[0], 12);
	cr_assert_eq(td_tensor_numel(leaf(td_store_dict(ro), (const char *[]){ "sub", "x" }, 2)), 60);
	td_store_close(ro);
}

Test(store_grow, a_zero_row_store_gets_its_files_when_it_grows)
{
	static const int64_t b0[] = { 0 }, s03[] = { 0, 3 };
	const char *v[] = { "v" };
	td_store *st;
	td_dict *d;
	td_tensor t;
	int64_t i;

	td_cr_assert_ok(td_dict_new(&d, 1, b0));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I16, 2, s03));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "v", &t));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("z"), NULL));
	td_dict_free(d);
	cr_assert_not(td_test_exists(td_test_path("z/v.memmap")));
	/* A stale file under the leaf's name (an uncommitted earlier growth) is reused, zeroed. */
	{
		FILE *f = fopen(td_test_path("z/v.memmap"), "wb");

		cr_assert_not_null(f);
		cr_assert_eq(fwrite("garbage-garbage-garbage-", 1, 24, f), 24);
		fclose(f);
	}
	td_cr_assert_ok(td_store_grow(st, 5));
	cr_assert_eq(td_test_file_size(td_test_path("z/v.memmap")), 30);
	cr_assert_eq(td_tensor_shape(leaf(td_store_dict(st), v, 1))[0], 5);
	for (i = 0; i < 15; i++)
		cr_assert_eq(((const int16_t *)td_tensor_data(leaf(td_store_dict(st), v, 1)))[i], 0);
	td_store_close(st);
}

Test(store_grow, refused_growth_changes_nothing)
{
	static const int64_t s48[] = { 4, 8 };
	td_store *st = new_store("f"), *ro = NULL, *nb;
	uint64_t g0 = td_store_generation(st);
	td_dict *d;
	td_tensor t;

	td_cr_assert_err(td_store_grow(NULL, 5), TD_EINVAL);
	td_cr_assert_err(td_store_grow(st, -1), TD_EINVAL);
	td_cr_assert_err(td_store_grow(st, 3), TD_EINVAL);
	/* The same size is a no-op: nothing committed, no new generation. */
	td_cr_assert_ok(td_store_grow(st, 4));
	cr_assert_eq(td_store_generation(st), g0);
	/* A byte size that overflows is refused before any file is touched. */
	td_cr_assert_err(td_store_grow(st, INT64_MAX / 2), TD_EOVERFLOW);
	td_cr_assert_err(td_store_grow(st, INT64_MAX), TD_EOVERFLOW);
	cr_assert_eq(td_test_file_size(td_test_path("f/a.memmap")), 16);
	cr_assert_eq(td_store_generation(st), g0);
	assert_grown(td_store_dict(st), 4);
	cr_assert(td_dict_is_locked(td_store_dict(st)));
	td_cr_assert_ok(td_store_open(&ro, td_test_path("f"), NULL));
	td_cr_assert_err(td_store_grow(ro, 8), TD_EREADONLY);
	td_store_close(ro);
	td_store_close(st);

	/* A root without batch dims has no dim 0 to grow. */
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I64, 2, s48));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "w", &t));
	td_cr_assert_ok(td_store_memmap(&nb, d, td_test_path("nb"), NULL));
	td_dict_free(d);
	td_cr_assert_err(td_store_grow(nb, 8), TD_EINVAL);
	td_store_close(nb);
}

Test(store_grow, a_full_disk_fails_the_growth_and_commits_nothing)
{
	td_store *st = new_store("full");
	uint64_t g0 = td_store_generation(st);
	struct rlimit old, rl;
	int rc;

	/* A file size limit stands in for a full disk: the reservation fails. */
	cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	rl = old;
	rl.rlim_cur = 1 << 16;
	signal(SIGXFSZ, SIG_IGN);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	td_error_clear();
	rc = td_store_grow(st, 1 << 20);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	cr_assert(rc == TD_ENOSPC || rc == TD_EOVERFLOW, "got %d: %s", rc, td_error_last()->message);
	cr_assert_eq(td_store_generation(st), g0);
	assert_grown(td_store_dict(st), 4);
	cr_assert_not(td_test_exists(td_test_path("full/.tdstore-journal")));
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&st, td_test_path("full"), NULL));
	assert_grown(td_store_dict(st), 4);
	td_store_close(st);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fputs(text, f) >= 0, 1);
	fclose(f);
}

#define TAIL "\"device\": \"cpu\", \"_type\": \"<class 'tensordict._td.TensorDict'>\"}"

Test(store_grow, a_tensorclass_grows_in_its_tensordict_directory)
{
	static const char outer[] = "{\"_type\": \"<class '__main__.Obs'>\"}";
	const char *pixels[] = { "obs", "pixels" };
	td_store *st = NULL;
	char *meta;

	cr_assert_eq(mkdir(td_test_path("tc"), 0777), 0);
	write_text(td_test_path("tc/meta.json"),
		"{\"obs\": {\"type\": \"Obs\"}, \"shape\": [4], " TAIL);
	cr_assert_eq(mkdir(td_test_path("tc/obs"), 0777), 0);
	write_text(td_test_path("tc/obs/meta.json"), outer);
	cr_assert_eq(mkdir(td_test_path("tc/obs/_tensordict"), 0777), 0);
	write_text(td_test_path("tc/obs/_tensordict/meta.json"),
		"{\"pixels\": {\"device\": \"cpu\", \"shape\": [4, 3], \"dtype\": \"torch.uint8\", "
		"\"is_nested\": false}, \"shape\": [4], " TAIL);
	write_text(td_test_path("tc/obs/_tensordict/pixels.memmap"), "abcdefghijkl");
	td_cr_assert_ok(td_store_open(&st, td_test_path("tc"), td_test_rw()));
	td_cr_assert_ok(td_store_grow(st, 6));
	cr_assert_eq(td_tensor_shape(leaf(td_store_dict(st), pixels, 2))[0], 6);
	cr_assert_eq(((const char *)td_tensor_data(leaf(td_store_dict(st), pixels, 2)))[11], 'l');
	cr_assert_eq(((const char *)td_tensor_data(leaf(td_store_dict(st), pixels, 2)))[12], 0);
	td_store_close(st);
	/* The class's own meta.json is kept; its fields' dict records the growth. */
	meta = slurp(td_test_path("tc/obs/meta.json"));
	cr_assert_str_eq(meta, outer);
	free(meta);
	meta = slurp(td_test_path("tc/obs/_tensordict/meta.json"));
	cr_assert_not_null(strstr(meta, "\"shape\": [6, 3]"), "%s", meta);
	free(meta);
	cr_assert_eq(td_test_file_size(td_test_path("tc/obs/_tensordict/pixels.memmap")), 18);
	td_cr_assert_ok(td_store_open(&st, td_test_path("tc"), NULL));
	cr_assert_eq(td_tensor_shape(leaf(td_store_dict(st), pixels, 2))[0], 6);
	td_store_close(st);
}

/* ---- views across the remap ---- */

Test(store_grow, views_taken_before_a_growth_keep_sharing_the_first_rows)
{
	const char *a[] = { "a" };
	td_store *st = new_store("v"), *other = NULL;
	td_tensor held;
	int32_t *hp, *np;

	td_tensor_ref(&held, leaf(td_store_dict(st), a, 1));
	td_cr_assert_ok(td_store_grow(st, 6));
	/* The held view keeps its shape and its own mapping of the same file. */
	cr_assert_eq(td_tensor_shape(&held)[0], 4);
	hp = td_tensor_data(&held);
	np = td_tensor_data(leaf(td_store_dict(st), a, 1));
	hp[1] = 111;
	cr_assert_eq(np[1], 111);
	np[2] = 222;
	cr_assert_eq(hp[2], 222);
	np[5] = 555; /* a new row: only the new dict has it */
	cr_assert_eq(np[5], 555);
	/* Another handle, refreshed after the growth, shares both. */
	td_cr_assert_ok(td_store_open(&other, td_test_path("v"), NULL));
	cr_assert_eq(((const int32_t *)td_tensor_data(leaf(td_store_dict(other), a, 1)))[1], 111);
	cr_assert_eq(((const int32_t *)td_tensor_data(leaf(td_store_dict(other), a, 1)))[5], 555);
	td_store_close(other);
	td_store_close(st);
	/* The held view outlives the store. */
	cr_assert_eq(hp[2], 222);
	td_tensor_release(&held);
}

static void write_byte(int fd)
{
	char c = 'x';

	cr_assert_eq(write(fd, &c, 1), 1);
}

static void read_byte(int fd)
{
	char c;

	cr_assert_eq(read(fd, &c, 1), 1);
}

Test(store_grow, views_in_another_process_keep_sharing_the_first_rows)
{
	const char *a[] = { "a" };
	td_store *st = new_store("vp");
	int to_child[2], to_parent[2], status;
	int32_t *np;
	pid_t pid;

	cr_assert_eq(pipe(to_child), 0);
	cr_assert_eq(pipe(to_parent), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		td_store *mine;
		td_tensor held;
		bool changed = false, ok;
		char c;
		int32_t *hp, *cp;

		/* The child releases the parent's handle it inherited (so that valgrind sees no leak). */
		td_store_close(st);
		ok = td_store_open(&mine, td_test_path("vp"), td_test_rw()) == 0;
		if (ok) {
			td_tensor_ref(&held, leaf(td_store_dict(mine), a, 1));
			ok = write(to_parent[1], "r", 1) == 1 && read(to_child[0], &c, 1) == 1;
		}
		/* The parent grew the store and wrote rows 2 and 5. */
		ok = ok && td_store_refresh(&changed, mine) == 0 && changed;
		if (ok) {
			hp = td_tensor_data(&held);
			cp = td_tensor_data(leaf(td_store_dict(mine), a, 1));
			ok = td_tensor_shape(&held)[0] == 4 && hp[2] == 222 && cp[2] == 222 && cp[5] == 555 &&
				td_dict_batch_shape(td_store_dict(mine))[0] == 8;
			hp[1] = 111; /* through the view taken before the growth */
			cp[6] = 666; /* through the new dict */
			td_tensor_release(&held);
		}
		if (!ok)
			fprintf(stderr, "child: changed %d, error: %s\n", (int)changed,
				td_error_last()->message);
		td_store_close(mine);
		_exit(ok && write(to_parent[1], "d", 1) == 1 ? 0 : 1);
	}
	read_byte(to_parent[0]);
	td_cr_assert_ok(td_store_grow(st, 8));
	np = td_tensor_data(leaf(td_store_dict(st), a, 1));
	np[2] = 222;
	np[5] = 555;
	write_byte(to_child[1]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child saw something else");
	read_byte(to_parent[0]);
	cr_assert_eq(np[1], 111);
	cr_assert_eq(np[6], 666);
	td_store_close(st);
}

Test(store_grow, other_handles_see_the_growth_after_refresh)
{
	const char *x[] = { "sub", "x" };
	td_store *st = new_store("r"), *other = NULL;
	bool changed;

	td_cr_assert_ok(td_store_open(&other, td_test_path("r"), NULL));
	td_cr_assert_ok(td_store_grow(st, 7));
	cr_assert_eq(td_dict_batch_shape(td_store_dict(other))[0], 4);
	cr_assert_eq(td_store_generation(other), td_store_generation(st));
	td_cr_assert_ok(td_store_refresh(&changed, other));
	cr_assert(changed);
	assert_grown(td_store_dict(other), 7);
	cr_assert_eq(td_tensor_shape(leaf(td_store_dict(other), x, 2))[0], 7);
	td_store_close(other);
	td_store_close(st);
}

/* ---- growing one leaf ---- */

Test(store_grow, a_leaf_without_batch_dims_grows_alone)
{
	static const int64_t s32[] = { 3, 2 }, s02[] = { 0, 2 };
	const char *buf[] = { "buf" }, *deep[] = { "n", "d" }, *z[] = { "z" };
	td_store *st, *ro = NULL;
	td_dict *d;
	static const char first[] = "{\"buf\": {\"device\": \"cpu\", \"shape\": [7, 2]";
	td_tensor t;
	uint64_t g0;
	int64_t i;
	char *meta;

	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_test_arange(&t, TD_DTYPE_F64, 2, s32);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "buf", &t));
	td_cr_assert_ok(td_dict_set_string(d, "name", "n"));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_U8, 2, s02));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "z", &t));
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_I32, 0, NULL, td_scalar_int(3)));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "scalar", &t));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("l"), NULL));
	td_dict_free(d);
	td_test_arange(&t, TD_DTYPE_I8, 2, s32);
	td_cr_assert_ok(td_store_add_tensor(st, "n.d", &t));
	td_tensor_release(&t);
	g0 = td_store_generation(st);

	td_cr_assert_ok(td_store_grow_leaf(st, "buf", 7));
	cr_assert_eq(td_store_generation(st), g0 + 1);
	cr_assert_eq(td_tensor_shape(leaf(td_store_dict(st), buf, 1))[0], 7);
	cr_assert_eq(td_tensor_shape(leaf(td_store_dict(st), buf, 1))[1], 2);
	for (i = 0; i < 14; i++)
		cr_assert_eq(((const double *)td_tensor_data(leaf(td_store_dict(st), buf, 1)))[i],
			i < 6 ? (double)i : 0.0);
	cr_assert_eq(td_test_file_size(td_test_path("l/buf.memmap")), 14 * 8);
	/* The key keeps its place in meta.json. */
	meta = slurp(td_test_path("l/meta.json"));
	cr_assert_eq(strncmp(meta, first, strlen(first)), 0, "%s", meta);
	free(meta);
	td_cr_assert_ok(td_store_grow_leaf(st, "n.d", 4));
	cr_assert_eq(((const int8_t *)td_tensor_data(leaf(td_store_dict(st), deep, 2)))[5], 5);
	cr_assert_eq(((const int8_t *)td_tensor_data(leaf(td_store_dict(st), deep, 2)))[7], 0);
	/* A leaf without elements gets its file. */
	td_cr_assert_ok(td_store_grow_leaf(st, "z", 3));
	cr_assert_eq(td_test_file_size(td_test_path("l/z.memmap")), 6);
	/* The same size is a no-op. */
	g0 = td_store_generation(st);
	td_cr_assert_ok(td_store_grow_leaf(st, "buf", 7));
	cr_assert_eq(td_store_generation(st), g0);

	td_cr_assert_err(td_store_grow_leaf(st, "buf", 6), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf(st, "buf", -1), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf(st, "buf", INT64_MAX), TD_EOVERFLOW);
	td_cr_assert_err(td_store_grow_leaf(st, "scalar", 4), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf(st, "name", 4), TD_ETYPE);
	td_cr_assert_err(td_store_grow_leaf(st, "n", 4), TD_ETYPE);
	td_cr_assert_err(td_store_grow_leaf(st, "nope", 4), TD_ENOTFOUND);
	td_cr_assert_err(td_store_grow_leaf(st, "buf.x", 4), TD_ETYPE);
	td_cr_assert_err(td_store_grow_leaf(st, "shape", 4), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf(st, "", 4), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf(NULL, "buf", 4), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf(st, NULL, 4), TD_EINVAL);
	cr_assert_eq(td_tensor_shape(leaf(td_store_dict(st), buf, 1))[0], 7);
	td_store_close(st);

	td_cr_assert_ok(td_store_open(&ro, td_test_path("l"), NULL));
	cr_assert_eq(td_tensor_shape(leaf(td_store_dict(ro), buf, 1))[0], 7);
	cr_assert_eq(td_tensor_shape(leaf(td_store_dict(ro), z, 1))[0], 3);
	td_cr_assert_err(td_store_grow_leaf(ro, "buf", 9), TD_EREADONLY);
	td_store_close(ro);
}

Test(store_grow, a_leaf_whose_dim_0_is_a_batch_dim_is_refused)
{
	td_store *st = new_store("b");

	td_cr_assert_err(td_store_grow_leaf(st, "a", 8), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf(st, "sub.x", 8), TD_EINVAL);
	cr_assert_eq(td_test_file_size(td_test_path("b/a.memmap")), 16);
	assert_grown(td_store_dict(st), 4);
	td_store_close(st);
}

/* ---- processes ---- */

#define RACERS 4
#define PER_RACER 8

/* Racer i's target size at step j (each racer's targets increase). */
static int64_t race_target(int i, int j)
{
	return 4 + 3 * j + i;
}

Test(store_grow, processes_racing_growth_and_adds_lose_nothing)
{
	td_store *st = new_store("race");
	pid_t pids[RACERS];
	char key[32];
	int i, j, status;

	td_store_close(st);
	for (i = 0; i < RACERS; i++) {
		pids[i] = fork();
		cr_assert(pids[i] >= 0);
		if (pids[i] == 0) {
			td_store *mine;
			int rc = td_store_open(&mine, td_test_path("race"), td_test_rw());

			for (j = 0; rc == 0 && j < PER_RACER; j++) {
				/* Half the adds create a nested dict (a journaled commit). */
				snprintf(key, sizeof(key), "p%d_%d%s", i, j, (j % 2) ? ".v" : "");
				rc = td_test_add_filled(mine, key, i * 100 + j);
				if (rc == 0) {
					rc = td_store_grow(mine, race_target(i, j));
					/* Another racer may have grown past this target already. */
					if (rc == TD_EINVAL)
						rc = 0;
				}
			}
			if (rc < 0)
				fprintf(stderr, "racer %d: %s\n", i, td_error_last()->message);
			td_store_close(mine);
			_exit(rc < 0);
		}
	}
	for (i = 0; i < RACERS; i++) {
		cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "racer %d failed", i);
	}
	td_cr_assert_ok(td_store_open(&st, td_test_path("race"), NULL));
	/* The largest target won, and every leaf has that many rows. */
	cr_assert_eq(td_dict_batch_shape(td_store_dict(st))[0], race_target(RACERS - 1, PER_RACER - 1));
	assert_grown(td_store_dict(st), race_target(RACERS - 1, PER_RACER - 1));
	for (i = 0; i < RACERS; i++)
		for (j = 0; j < PER_RACER; j++) {
			const td_tensor *t;

			snprintf(key, sizeof(key), "p%d_%d", i, j);
			t = (j % 2) ? leaf(td_store_dict(st), (const char *[]){ key, "v" }, 2) :
						  leaf(td_store_dict(st), (const char *[]){ key }, 1);
			cr_assert_eq(td_tensor_shape(t)[0], race_target(RACERS - 1, PER_RACER - 1));
			cr_assert_eq(((const int64_t *)td_tensor_data(t))[0], i * 100 + j);
		}
	td_store_close(st);
}

/*
 * Every leaf of a store written by the killed writer below: "base" [rows],
 * "k<n>" or "d<n>"/"v", each holding n in the rows it had when it was
 * added and zeros in the rows a growth added after. Every nested dict has
 * the root's batch shape. Returns the number of rows.
 */
static int64_t check_killed_store(const td_dict *root, size_t *nleaves)
{
	int64_t rows = td_dict_batch_shape(root)[0];
	td_dict_iter *it;
	td_item item;

	*nleaves = 0;
	td_cr_assert_ok(td_dict_iter_new(&it, root, TD_ITER_NESTED));
	while (td_dict_iter_next(&item, it) == 1) {
		const int64_t *p;
		int64_t r;
		int k;

		if (item.value->kind == TD_VALUE_DICT) {
			cr_assert_eq(td_dict_batch_ndim(item.value->dict), 1);
			cr_assert_eq(td_dict_batch_shape(item.value->dict)[0], rows, "%s", item.key);
			continue;
		}
		cr_assert_eq(item.value->kind, TD_VALUE_TENSOR);
		cr_assert_eq(td_tensor_shape(&item.value->tensor)[0], rows, "%s", item.key);
		(*nleaves)++;
		if (!strcmp(item.key, "base"))
			continue;
		cr_assert(item.depth == 1 ?
				sscanf(item.key, "k%d", &k) == 1 :
				item.depth == 2 && !strcmp(item.key, "v") && sscanf(item.path[0], "d%d", &k) == 1,
			"key %s", item.key);
		p = td_tensor_data(&item.value->tensor);
		cr_assert_eq(p[0], k, "%s holds %lld", item.key, (long long)p[0]);
		for (r = 1; r < rows && p[r] == k; r++)
			;
		for (; r < rows; r++)
			cr_assert_eq(p[r], 0, "%s[%lld] holds %lld", item.key, (long long)r, (long long)p[r]);
	}
	td_dict_iter_free(it);
	return rows;
}

/* Remove what the killed writers added, so that the store stays small. */
static void remove_added(td_store *st)
{
	const char *keys[64];
	char copy[64][32];
	size_t n, i;

	n = td_dict_items(keys, NULL, TD_TEST_ARRAY_LEN(keys), td_store_dict(st));
	cr_assert(n <= TD_TEST_ARRAY_LEN(keys));
	/* Copied first: a removal changes the dict that the keys point into. */
	for (i = 0; i < n; i++)
		snprintf(copy[i], sizeof(copy[i]), "%s", keys[i]);
	for (i = 0; i < n; i++)
		if (copy[i][0] == 'k' || copy[i][0] == 'd')
			td_cr_assert_ok(td_store_remove(st, copy[i]));
}

Test(store_grow, writers_killed_while_growing_leave_a_store_that_reopens_intact, .timeout = 600)
{
	const int iterations = td_test_under_valgrind() ? 12 : 200;
	td_store *st = new_store("kill"), *watch = NULL, *rw = NULL;
	uint64_t seed = 4242;
	char journal_path[4200], path[4200];
	int it, journals_left = 0;

	td_store_close(st);
	{
		/*
		 * Start from a store of leaves named "base" as the checker expects:
		 * one at the root and one in each of a few nested dicts, so that
		 * every growth commits several directories through the journal.
		 */
		const char *names[] = { "a", "img", "sub", "s", "e" };
		char dname[8];
		size_t i;

		td_cr_assert_ok(td_store_open(&st, td_test_path("kill"), td_test_rw()));
		for (i = 0; i < TD_TEST_ARRAY_LEN(names); i++)
			td_cr_assert_ok(td_store_remove(st, names[i]));
		td_cr_assert_ok(td_test_add_filled(st, "base", 0));
		for (i = 0; i < 2; i++) {
			snprintf(dname, sizeof(dname), "n%zu.base", i);
			td_cr_assert_ok(td_test_add_filled(st, dname, 0));
		}
		td_store_close(st);
	}
	snprintf(journal_path, sizeof(journal_path), "%s", td_test_path("kill/.tdstore-journal"));
	snprintf(path, sizeof(path), "%s", td_test_path("kill"));
	td_cr_assert_ok(td_store_open(&watch, td_test_path("kill"), NULL));
	for (it = 0; it < iterations; it++) {
		long delay = (long)(td_test_rand(&seed) % 5000000);
		int64_t rows_ro, rows_rw;
		size_t n_ro, n_rw;
		int journal;

		/*
		 * Every other writer dies in the middle of a journaled commit (as
		 * soon as the journal appears, if it does within about a second);
		 * the others at a random point.
		 */
		td_test_writer w = { path, it * 100000 };

		td_test_kill_writer(watch, td_test_schema_writer, &w, it % 2 ? journal_path : NULL, delay);
		journal = td_test_exists(td_test_path("kill/.tdstore-journal"));
		journals_left += journal;
		/* A reader that cannot write sees a whole state (the journal's, if one is left)... */
		td_cr_assert_ok(td_store_open(&st, td_test_path("kill"), NULL));
		rows_ro = check_killed_store(td_store_dict(st), &n_ro);
		td_store_close(st);
		/* ...and the same one once a writer has recovered the store. */
		td_cr_assert_ok(td_store_open(&rw, td_test_path("kill"), td_test_rw()));
		cr_assert_not(td_test_exists(td_test_path("kill/.tdstore-journal")));
		rows_rw = check_killed_store(td_store_dict(rw), &n_rw);
		cr_assert_eq(rows_rw, rows_ro, "iteration %d", it);
		cr_assert_eq(n_rw, n_ro, "iteration %d", it);
		remove_added(rw);
		td_store_close(rw);
	}
	td_store_close(watch);
	/* The writers killed mid-commit made the readers and the recovery do their work. */
	cr_log_info("%d of %d writers left a journal", journals_left, iterations);
	if (!td_test_under_valgrind())
		cr_assert(journals_left > 0, "no writer was killed during a journaled commit");
}
