/* SPDX-License-Identifier: MIT */
/*
 * test_store_schema.c - schema changes in open stores shared by processes:
 * adding and removing leaves, the generation and td_store_refresh, views
 * held across a refresh, processes racing schema changes, and writers
 * killed (SIGKILL) at random points while they change the schema.
 */
#include "td_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(store_schema, .init = td_test_tmpdir_init, .fini = td_test_tmpdir_fini);

static const int64_t B4[] = { 4 };

static td_store *new_store(const char *name)
{
	td_dict *d;
	td_store *st;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 1, B4));
	td_test_arange(&t, TD_DTYPE_I32, 1, B4);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "base", &t));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path(name), NULL));
	td_dict_free(d);
	return st;
}

static bool exists(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0;
}

/* A [4] int64 tensor filled with `v`. */
static void filled(td_tensor *t, int64_t v)
{
	td_cr_assert_ok(td_tensor_full(t, TD_DTYPE_I64, 1, B4, td_scalar_int(v)));
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

Test(store_schema, leaves_are_added_and_removed_on_disk)
{
	const char *x[] = { "x" }, *deep[] = { "a", "b.c", "y" };
	static const int64_t s43[] = { 4, 3 };
	td_store *st = new_store("s"), *ro;
	uint64_t g0 = td_store_generation(st);
	td_key *kdeep = td_test_key(deep, 3);
	const td_value *v;
	td_key *dk;
	td_tensor t;

	cr_assert(g0 >= 1);
	filled(&t, 42);
	td_cr_assert_ok(td_store_add_tensor(st, "x", &t));
	td_tensor_release(&t);
	cr_assert_eq(first_i64(td_store_dict(st), x, 1), 42);
	cr_assert(td_dict_is_locked(td_store_dict(st)));
	cr_assert_eq(td_store_generation(st), g0 + 1);
	/* Intermediate dicts are created, with their own directory and meta.json;
	 * a component holding '.' is named through a key handle. */
	td_cr_assert_ok(td_key_from_path(&dk, deep, 3));
	td_cr_assert_ok(td_store_add_empty_key(st, dk, TD_DTYPE_F16, 2, s43));
	td_key_free(dk);
	cr_assert(exists(td_test_path("s/a/b.c/meta.json")));
	cr_assert(exists(td_test_path("s/a/b.c/y.memmap")));
	td_cr_assert_ok(td_dict_get_key(&v, td_store_dict(st), kdeep));
	cr_assert_eq(v->tensor.dtype, TD_DTYPE_F16);
	cr_assert_eq(td_tensor_numel(&v->tensor), 12);
	td_store_close(st);

	ro = NULL;
	td_cr_assert_ok(td_store_open(&ro, td_test_path("s"), NULL));
	cr_assert_eq(first_i64(td_store_dict(ro), x, 1), 42);
	td_cr_assert_ok(td_dict_get_key(&v, td_store_dict(ro), kdeep));
	td_key_free(kdeep);
	cr_assert_eq(((const uint16_t *)td_tensor_data(&v->tensor))[11], 0);
	/* A read-only store refuses schema changes. */
	filled(&t, 1);
	td_cr_assert_err(td_store_add_tensor(ro, "z", &t), TD_EREADONLY);
	td_cr_assert_err(td_store_remove(ro, "x"), TD_EREADONLY);
	td_store_close(ro);

	td_cr_assert_ok(td_store_open(&st, td_test_path("s"), td_test_rw()));
	td_cr_assert_err(td_store_add_tensor(st, "x", &t), TD_EEXISTS);
	td_cr_assert_err(td_store_add_tensor(st, "base.q", &t), TD_ETYPE);
	td_cr_assert_err(td_store_add_tensor(st, "shape", &t), TD_EINVAL);
	td_cr_assert_err(td_store_add_tensor(st, "a._class", &t), TD_EINVAL);
	td_cr_assert_err(td_store_add_empty(st, "z", TD_DTYPE_I8, 1, (const int64_t[]){ 5 }), TD_ETYPE);
	td_cr_assert_err(td_store_add_tensor(st, "", &t), TD_EINVAL);
	td_cr_assert_err(td_store_add_tensor(st, NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_store_add_tensor(st, "z", NULL), TD_EINVAL);
	td_cr_assert_err(td_store_add_tensor(NULL, "z", &t), TD_EINVAL);
	cr_assert_not(exists(td_test_path("s/z.memmap")));
	td_tensor_release(&t);
	/* Failed changes leave the dict as committed. */
	cr_assert_eq(td_dict_len(td_store_dict(st)), 3);

	td_cr_assert_ok(td_store_remove(st, "x"));
	cr_assert_not(exists(td_test_path("s/x.memmap")));
	td_cr_assert_err(td_dict_get(&v, td_store_dict(st), "x"), TD_ENOTFOUND);
	td_cr_assert_ok(td_store_remove(st, "a"));
	cr_assert_not(exists(td_test_path("s/a")));
	td_cr_assert_err(td_store_remove(st, "x"), TD_ENOTFOUND);
	td_cr_assert_err(td_store_remove(st, "no.x"), TD_ENOTFOUND);
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&st, td_test_path("s"), NULL));
	cr_assert_eq(td_dict_len(td_store_dict(st)), 1);
	td_store_close(st);
}

Test(store_schema, keys_come_dotted_or_as_handles)
{
	static const char *const dotted[] = { "cfg", "lr.0" }, *const empty[] = { "e", "" },
							 *const reserved[] = { "a", "shape" };
	static const int64_t s3[] = { 3 };
	const char *deep[TD_KEY_MAX_DEPTH];
	char longkey[2 * TD_KEY_MAX_DEPTH];
	td_key *dk, *ek, *rk, *xk, *deepk;
	td_store *st, *ro;
	const td_value *v;
	td_dict *d;
	td_tensor t;
	size_t i;

	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("k"), NULL));
	td_dict_free(d);
	td_cr_assert_ok(td_key_from_path(&dk, dotted, 2));
	td_cr_assert_ok(td_key_from_path(&ek, empty, 2));
	td_cr_assert_ok(td_key_from_path(&rk, reserved, 2));
	td_cr_assert_ok(td_key_new(&xk, "cfg.x"));

	/* A component holding '.': only a handle names it. */
	filled(&t, 5);
	td_cr_assert_ok(td_store_add_tensor_key(st, dk, &t));
	td_tensor_release(&t);
	cr_assert(exists(td_test_path("k/cfg/lr.0.memmap")));
	td_cr_assert_ok(td_dict_get_key(&v, td_store_dict(st), dk));
	cr_assert_eq(((const int64_t *)td_tensor_data(&v->tensor))[3], 5);
	td_cr_assert_err(td_store_remove(st, "cfg.lr.0"), TD_ENOTFOUND);
	/* A dotted key and a handle made from it name the same entry. */
	td_cr_assert_ok(td_store_add_empty_key(st, xk, TD_DTYPE_F32, 1, s3));
	td_cr_assert_err(td_store_add_empty(st, "cfg.x", TD_DTYPE_F32, 1, s3), TD_EEXISTS);
	td_cr_assert_ok(td_store_grow_leaf_key(st, xk, 5));
	td_cr_assert_ok(td_dict_get_key(&v, td_store_dict(st), xk));
	cr_assert_eq(td_tensor_shape(&v->tensor)[0], 5);
	td_cr_assert_ok(td_store_grow_leaf(st, "cfg.x", 7));
	td_cr_assert_ok(td_dict_get_key(&v, td_store_dict(st), xk));
	cr_assert_eq(td_tensor_shape(&v->tensor)[0], 7);
	td_cr_assert_ok(td_store_grow_leaf_key(st, dk, 6));
	td_cr_assert_ok(td_dict_get_key(&v, td_store_dict(st), dk));
	cr_assert_eq(td_tensor_shape(&v->tensor)[0], 6);
	cr_assert_eq(((const int64_t *)td_tensor_data(&v->tensor))[3], 5);
	/* An empty component, through a handle; the dotted form refuses it. */
	td_cr_assert_ok(td_store_add_empty_key(st, ek, TD_DTYPE_U8, 1, s3));
	cr_assert(exists(td_test_path("k/e/%.memmap")));
	td_cr_assert_err(td_store_add_empty(st, "e.", TD_DTYPE_U8, 1, s3), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "empty component") != NULL, "%s",
		td_error_last()->message);
	td_cr_assert_err(td_store_remove(st, ".cfg"), TD_EINVAL);
	td_cr_assert_ok(td_store_remove_key(st, ek));
	cr_assert_not(exists(td_test_path("k/e/%.memmap")));
	td_cr_assert_ok(td_store_remove(st, "e"));
	td_cr_assert_ok(td_store_remove_key(st, dk));
	td_cr_assert_err(td_store_remove_key(st, dk), TD_ENOTFOUND);
	td_cr_assert_ok(td_store_remove(st, "cfg"));
	td_cr_assert_err(td_store_remove_key(st, xk), TD_ENOTFOUND);

	/* NULL arguments, a reserved component, keys of 64 components or more. */
	filled(&t, 1);
	td_cr_assert_err(td_store_add_tensor_key(st, NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_store_add_tensor_key(NULL, xk, &t), TD_EINVAL);
	td_cr_assert_err(td_store_add_tensor_key(st, xk, NULL), TD_EINVAL);
	td_cr_assert_err(td_store_add_tensor_key(st, rk, &t), TD_EINVAL);
	td_cr_assert_err(td_store_add_empty_key(st, NULL, TD_DTYPE_U8, 1, s3), TD_EINVAL);
	td_cr_assert_err(td_store_add_empty_key(NULL, xk, TD_DTYPE_U8, 1, s3), TD_EINVAL);
	td_cr_assert_err(td_store_add_empty_key(st, xk, (td_dtype)99, 1, s3), TD_EINVAL);
	td_cr_assert_err(td_store_remove_key(st, NULL), TD_EINVAL);
	td_cr_assert_err(td_store_remove_key(NULL, xk), TD_EINVAL);
	td_cr_assert_err(td_store_remove_key(st, rk), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf_key(st, NULL, 4), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf_key(NULL, xk, 4), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf_key(st, xk, -1), TD_EINVAL);
	td_cr_assert_err(td_store_grow_leaf_key(st, xk, 4), TD_ENOTFOUND);
	for (i = 0; i < TD_KEY_MAX_DEPTH; i++) {
		deep[i] = "d";
		longkey[2 * i] = 'd';
		longkey[2 * i + 1] = '.';
	}
	longkey[2 * TD_KEY_MAX_DEPTH - 1] = '\0';
	td_cr_assert_ok(td_key_from_path(&deepk, deep, TD_KEY_MAX_DEPTH));
	td_cr_assert_err(td_store_add_tensor_key(st, deepk, &t), TD_EINVAL);
	td_cr_assert_err(td_store_add_tensor(st, longkey, &t), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "components") != NULL, "%s",
		td_error_last()->message);
	cr_assert_eq(td_dict_len(td_store_dict(st)), 0);
	td_store_close(st);

	/* A read-only store refuses every form. */
	td_cr_assert_ok(td_store_open(&ro, td_test_path("k"), NULL));
	td_cr_assert_err(td_store_add_tensor_key(ro, xk, &t), TD_EREADONLY);
	td_cr_assert_err(td_store_add_empty_key(ro, xk, TD_DTYPE_U8, 1, s3), TD_EREADONLY);
	td_cr_assert_err(td_store_remove_key(ro, xk), TD_EREADONLY);
	td_cr_assert_err(td_store_grow_leaf_key(ro, xk, 9), TD_EREADONLY);
	td_store_close(ro);
	td_tensor_release(&t);
	td_key_free(deepk);
	td_key_free(xk);
	td_key_free(rk);
	td_key_free(ek);
	td_key_free(dk);
}

/*
 * A component holding '.' is looked up through a key made on the fly: when
 * that allocation fails the call reports TD_ENOMEM, never "no key" (nor
 * "already exists" for an add), and the store keeps its leaf.
 */
Test(store_schema, out_of_memory_naming_a_dotted_component_is_not_a_missing_key)
{
	static const char *const dotted[] = { "lr.0" };
	td_store *st, *ro;
	const td_value *v;
	td_dict *d;
	td_key *dk;
	td_tensor t;
	long k;
	int rc;

	/* No batch dims: a leaf grows alone. */
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_store_memmap(&st, d, td_test_path("m"), NULL));
	td_dict_free(d);
	td_cr_assert_ok(td_key_from_path(&dk, dotted, 1));
	filled(&t, 5);
	td_cr_assert_ok(td_store_add_tensor_key(st, dk, &t));
	td_tensor_release(&t);
	for (k = 0;; k++) {
		td_test_alloc_install(k);
		rc = td_store_grow_leaf_key(st, dk, 6);
		td_test_alloc_uninstall();
		if (rc == TD_OK)
			break;
		cr_assert_eq(rc, TD_ENOMEM, "grow, allocation %ld: %d (%s)", k, rc,
			td_error_last()->message);
		/* The old rows stay readable, also when the growth was committed but not reloaded. */
		cr_assert_eq(first_i64(td_store_dict(st), dotted, 1), 5, "after failed grow %ld", k);
		td_cr_assert_ok(td_store_refresh(NULL, st));
		cr_assert_eq(first_i64(td_store_dict(st), dotted, 1), 5, "refreshed, grow %ld", k);
	}
	td_cr_assert_ok(td_store_open(&ro, td_test_path("m"), NULL));
	td_cr_assert_ok(td_dict_get_key(&v, td_store_dict(ro), dk));
	cr_assert_eq(td_tensor_shape(&v->tensor)[0], 6);
	td_store_close(ro);
	td_cr_assert_ok(td_dict_get_key(&v, td_store_dict(st), dk));
	cr_assert_eq(td_tensor_shape(&v->tensor)[0], 6);
	cr_assert_eq(first_i64(td_store_dict(st), dotted, 1), 5);
	for (k = 0;; k++) {
		filled(&t, 7);
		td_test_alloc_install(k);
		rc = td_store_add_tensor_key(st, dk, &t);
		td_test_alloc_uninstall();
		td_tensor_release(&t);
		cr_assert(rc == TD_EEXISTS || rc == TD_ENOMEM, "add, allocation %ld: %d (%s)", k, rc,
			td_error_last()->message);
		if (rc == TD_EEXISTS)
			break;
	}
	for (k = 0;; k++) {
		td_test_alloc_install(k);
		rc = td_store_remove_key(st, dk);
		td_test_alloc_uninstall();
		if (rc == TD_OK)
			break;
		cr_assert_eq(rc, TD_ENOMEM, "remove, allocation %ld: %d (%s)", k, rc,
			td_error_last()->message);
		cr_assert_eq(first_i64(td_store_dict(st), dotted, 1), 5);
	}
	cr_assert_not(exists(td_test_path("m/lr.0.memmap")));
	td_key_free(dk);
	td_store_close(st);
}

Test(store_schema, other_handles_see_changes_after_refresh_and_keep_their_views)
{
	const char *x[] = { "x" };
	td_store *a = new_store("r"), *b = NULL;
	const td_value *v;
	td_tensor held, t;
	bool changed = true;

	td_cr_assert_ok(td_store_open(&b, td_test_path("r"), NULL));
	td_cr_assert_ok(td_store_refresh(&changed, b));
	cr_assert_not(changed);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(b), "base"));
	td_tensor_ref(&held, &v->tensor);

	filled(&t, 7);
	td_cr_assert_ok(td_store_add_tensor(a, "x", &t));
	td_tensor_release(&t);
	cr_assert_eq(td_store_generation(b), td_store_generation(a));
	td_cr_assert_err(td_dict_get(&v, td_store_dict(b), "x"), TD_ENOTFOUND);
	td_cr_assert_ok(td_store_refresh(&changed, b));
	cr_assert(changed);
	cr_assert_eq(first_i64(td_store_dict(b), x, 1), 7);
	/* The view taken before the refresh still reads the same file pages. */
	cr_assert_eq(((const int32_t *)td_tensor_data(&held))[3], 3);
	td_cr_assert_ok(td_dict_get(&v, td_store_dict(a), "base"));
	((int32_t *)td_tensor_data(&v->tensor))[3] = 99;
	cr_assert_eq(((const int32_t *)td_tensor_data(&held))[3], 99);
	/* Removing a leaf another handle still views: its pages stay readable there. */
	td_cr_assert_ok(td_store_remove(a, "base"));
	td_cr_assert_ok(td_store_refresh(NULL, b));
	cr_assert_eq(((const int32_t *)td_tensor_data(&held))[3], 99);
	td_tensor_release(&held);
	td_cr_assert_err(td_store_refresh(NULL, NULL), TD_EINVAL);
	changed = true;
	td_cr_assert_err(td_store_refresh(&changed, NULL), TD_EINVAL);
	cr_assert_not(changed, "a failed refresh reports no change");
	cr_assert_eq(td_store_generation(NULL), 0);
	td_store_close(b);
	td_store_close(a);
}

Test(store_schema, a_python_directory_gets_a_coordination_file_on_first_write)
{
	const char *x[] = { "x" };
	td_store *a = new_store("p"), *ro = NULL;
	char coord[4200];
	td_tensor t;

	td_store_close(a);
	snprintf(coord, sizeof(coord), "%s", td_test_path("p/.tdstore-coord"));
	cr_assert_eq(unlink(coord), 0); /* as if Python had written the directory */
	td_cr_assert_ok(td_store_open(&ro, td_test_path("p"), NULL));
	cr_assert_eq(td_store_generation(ro), 0);
	cr_assert_not(exists(coord));
	td_cr_assert_ok(td_store_open(&a, td_test_path("p"), td_test_rw()));
	cr_assert(exists(coord));
	filled(&t, 5);
	td_cr_assert_ok(td_store_add_tensor(a, "x", &t));
	td_tensor_release(&t);
	td_cr_assert_ok(td_store_refresh(NULL, ro));
	cr_assert_eq(first_i64(td_store_dict(ro), x, 1), 5);
	td_store_close(ro);
	td_store_close(a);
}

Test(store_schema, a_bad_coordination_file_is_refused)
{
	td_store *a = new_store("c"), *b = (td_store *)0x1;
	FILE *f;

	td_store_close(a);
	f = fopen(td_test_path("c/.tdstore-coord"), "r+b");
	cr_assert_not_null(f);
	cr_assert_eq(fputs("XXXX", f) >= 0, 1);
	fclose(f);
	td_cr_assert_err(td_store_open(&b, td_test_path("c"), NULL), TD_ECORRUPT);
	cr_assert_null(b);
	cr_assert_eq(truncate(td_test_path("c/.tdstore-coord"), 100), 0);
	td_cr_assert_err(td_store_open(&b, td_test_path("c"), td_test_rw()), TD_ECORRUPT);
}

Test(store_schema, a_coordination_file_a_crash_left_empty_or_zeroed_is_made_again)
{
	static char zeros[4096];
	const char *x[] = { "x" };
	td_store *a = new_store("z"), *ro;
	char coord[4200];
	td_tensor t;
	int i, fd;

	td_store_close(a);
	snprintf(coord, sizeof(coord), "%s", td_test_path("z/.tdstore-coord"));
	for (i = 0; i < 2; i++) {
		/* Created but never synced: after a crash it may be empty, or its size without its bytes. */
		fd = open(coord, O_WRONLY | O_TRUNC);
		cr_assert(fd >= 0);
		if (i == 1)
			cr_assert_eq(write(fd, zeros, sizeof(zeros)), (ssize_t)sizeof(zeros));
		close(fd);
		td_cr_assert_ok(td_store_open(&ro, td_test_path("z"), NULL));
		cr_assert_eq(td_store_generation(ro), 0);
		td_cr_assert_ok(td_store_open(&a, td_test_path("z"), td_test_rw()));
		filled(&t, 7 + i);
		x[0] = i ? "y" : "x";
		td_cr_assert_ok(td_store_add_tensor(a, x[0], &t));
		td_tensor_release(&t);
		cr_assert_eq(td_store_generation(a), 1);
		td_cr_assert_ok(td_store_refresh(NULL, ro));
		cr_assert_eq(first_i64(td_store_dict(ro), x, 1), 7 + i);
		td_store_close(ro);
		td_store_close(a);
	}
}

/* ---- processes ---- */

#define RACERS 4
#define PER_RACER 12

/* Every third add, the racer refreshes its view of the others' changes. */
static int refresh_now_and_then(td_store *mine, int racer, int j)
{
	(void)racer;
	return j % 3 == 2 ? td_store_refresh(NULL, mine) : TD_OK;
}

Test(store_schema, processes_racing_schema_changes_lose_nothing)
{
	td_store *st = new_store("race");

	td_store_close(st);
	st = td_test_race_adds(td_test_path("race"), RACERS, PER_RACER, refresh_now_and_then);
	td_store_close(st);
}

/*
 * Two processes remove and add again the same key, over and over: a
 * removal deletes the leaf's file under the writer lock, so it never
 * deletes the file of the leaf the other process has just added. After
 * every change of its own, each checks that the store opens (every leaf
 * its meta.json names has its file) and holds the value it wrote.
 */
Test(store_schema, a_removal_never_deletes_a_leaf_added_again_by_another_process)
{
	td_store *st = new_store("flip");
	pid_t pids[2];
	int i, status;

	td_store_close(st);
	for (i = 0; i < 2; i++) {
		pids[i] = fork();
		cr_assert(pids[i] >= 0);
		if (pids[i] == 0) {
			td_store *mine, *check;
			int rc = td_store_open(&mine, td_test_path("flip"), td_test_rw()), j;

			for (j = 0; rc == 0 && j < 60; j++) {
				td_tensor t;

				rc = td_tensor_full(&t, TD_DTYPE_I64, 1, B4, td_scalar_int(j));
				if (rc == 0) {
					rc = td_store_add_tensor(mine, "k", &t);
					if (rc == TD_EEXISTS)
						rc = td_store_remove(mine, "k");
					if (rc == TD_ENOTFOUND) /* the other one removed it first */
						rc = 0;
				}
				td_tensor_release(&t);
				if (rc == 0)
					rc = td_store_open(&check, td_test_path("flip"), NULL);
				if (rc == 0)
					td_store_close(check);
			}
			if (rc < 0)
				fprintf(stderr, "flipper %d: %s\n", i, td_error_last()->message);
			td_store_close(mine);
			_exit(rc < 0);
		}
	}
	for (i = 0; i < 2; i++) {
		cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "flipper %d failed", i);
	}
	td_cr_assert_ok(td_store_open(&st, td_test_path("flip"), NULL));
	cr_assert(td_store_generation(st) > 60, "most changes committed");
	td_store_close(st);
}

/* The killed writer: add leaves k<n> holding n, and remove every third, until killed. */
static void adding_writer(void *arg)
{
	td_store *w;
	int k, rc = td_store_open(&w, td_test_path("kill"), td_test_rw());

	for (k = *(const int *)arg * 100000; rc == 0; k++) {
		char key[32];
		td_tensor t;

		snprintf(key, sizeof(key), "k%d", k);
		rc = td_tensor_full(&t, TD_DTYPE_I64, 1, B4, td_scalar_int(k));
		if (rc == 0)
			rc = td_store_add_tensor(w, key, &t);
		td_tensor_release(&t);
		if (rc == 0 && k % 3 == 0)
			rc = td_store_remove(w, key);
	}
}

Test(store_schema, writers_killed_at_random_points_leave_a_store_that_opens_intact)
{
	enum { ITERATIONS = 200 };
	td_store *st = new_store("kill"), *watch = NULL;
	uint64_t seed = 12345;
	int it;

	td_store_close(st);
	/* A read-only handle watches the generation: each writer commits before it is killed. */
	td_cr_assert_ok(td_store_open(&watch, td_test_path("kill"), NULL));
	for (it = 0; it < ITERATIONS; it++) {
		td_dict_iter *iter;
		td_item item;

		td_test_kill_writer(watch, adding_writer, &it, NULL, (long)(td_test_rand(&seed) % 4000000));
		/* Every reopen succeeds and every committed leaf holds its value. */
		td_cr_assert_ok(td_store_open(&st, td_test_path("kill"), NULL));
		td_cr_assert_ok(td_dict_iter_new(&iter, td_store_dict(st), 0));
		while (td_dict_iter_next(&item, iter) == 1) {
			const int64_t *p = td_tensor_data(&item.value->tensor);
			int k;

			if (!strcmp(item.key, "base"))
				continue;
			cr_assert_eq(sscanf(item.key, "k%d", &k), 1, "key %s", item.key);
			cr_assert_eq(p[0], k, "%s holds %lld", item.key, (long long)p[0]);
			cr_assert_eq(p[3], k);
		}
		td_dict_iter_free(iter);
		td_store_close(st);
	}
	td_store_close(watch);
}
