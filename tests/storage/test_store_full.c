/* SPDX-License-Identifier: MIT */
/*
 * test_store_full.c - a full disk is an error, not a crash, and loses no
 * data: stores, packed files, rings and memory-mapped tensors on a real
 * filesystem that fills up (a small tmpfs mounted in the test process's own
 * mount namespace). Saves, adds and growths that do not fit fail with
 * TD_ENOSPC and leave the store as it was; space reserved for a mapping is
 * really there, so writing through the mapping once the disk is full does
 * not fault (SIGBUS). Skipped where a mount namespace cannot be made.
 */
#define _GNU_SOURCE
#include "td_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(store_full, .init = td_test_tmpdir_init, .fini = td_test_tmpdir_fini);

/* A tmpfs of `kib` KiB at <tmpdir>/fs, private to this test's process; the path. */
static const char *small_fs(unsigned kib)
{
	static char mnt[4200];
	char opts[32];

	if (unshare(CLONE_NEWNS) != 0)
		cr_skip_test("no private mount namespace here (%s)", strerror(errno));
	/* Keep the mount from propagating to the namespace the test came from. */
	cr_assert_eq(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL), 0, "%s", strerror(errno));
	snprintf(mnt, sizeof(mnt), "%s", td_test_path("fs"));
	cr_assert_eq(mkdir(mnt, 0777), 0);
	snprintf(opts, sizeof(opts), "size=%uk", kib);
	if (mount("tdtest", mnt, "tmpfs", 0, opts) != 0)
		cr_skip_test("cannot mount a tmpfs here (%s)", strerror(errno));
	return mnt;
}

/* <mnt>/<name> (static). */
static const char *in(const char *mnt, const char *name)
{
	static char path[4400];

	snprintf(path, sizeof(path), "%s/%s", mnt, name);
	return path;
}

/* Fill the filesystem: write a file until the disk is full. @return bytes written. */
static size_t fill(const char *mnt)
{
	static char block[4096];
	int fd = open(in(mnt, "filler"), O_WRONLY | O_CREAT | O_APPEND, 0644);
	size_t total = 0;

	cr_assert(fd >= 0);
	memset(block, 0x5a, sizeof(block));
	for (;;) {
		ssize_t n = write(fd, block, sizeof(block));

		if (n <= 0) {
			cr_assert(n < 0 && errno == ENOSPC, "filling: %s", strerror(errno));
			break;
		}
		total += (size_t)n;
	}
	close(fd);
	return total;
}

/* No temporary file is left anywhere under `dir`. */
static void assert_no_temporaries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		char sub[4400];
		struct stat sb;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		cr_assert(strncmp(e->d_name, ".tdstore-tmp", 12) != 0, "%s/%s left behind", dir, e->d_name);
		snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
		if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
			assert_no_temporaries(sub);
	}
	closedir(d);
}

/* A dict of batch [rows] with one uint8 leaf of `cols` bytes per row, filled with 7. */
static td_dict *rows_dict(int64_t rows, int64_t cols)
{
	const int64_t shape[2] = { rows, cols };
	td_tensor t;
	td_dict *d;

	td_cr_assert_ok(td_dict_new(&d, 1, shape));
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_U8, 2, shape, td_scalar_int(7)));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "x", &t));
	return d;
}

/* Write every byte of every tensor of the store's dict through its mapping, and sync. */
static void write_through(td_store *st, int value)
{
	td_dict_iter *it;
	td_item item;

	td_cr_assert_ok(td_dict_iter_new(&it, td_store_dict(st), TD_ITER_NESTED | TD_ITER_LEAVES_ONLY));
	while (td_dict_iter_next(&item, it) == 1)
		if (item.value->kind == TD_VALUE_TENSOR)
			memset(td_tensor_data(&item.value->tensor), value,
				td_tensor_nbytes(&item.value->tensor));
	td_dict_iter_free(it);
	td_cr_assert_ok(td_store_sync(st));
}

static void check_full_disk(td_placement placement)
{
	const char *mnt = small_fs(1024);
	char store[4400], meta[4400];
	td_dict *huge = rows_dict(4, 512 * 1024), *small = rows_dict(4, 32 * 1024), *d;
	td_store *st = (td_store *)0x1, *ro;
	td_tensor t;
	int rc;

	snprintf(store, sizeof(store), "%s", in(mnt, placement ? "s.tds" : "s"));
	snprintf(meta, sizeof(meta), "%s", in(mnt, "s/meta.json"));
	/* A save that does not fit: TD_ENOSPC, nothing left. */
	td_error_clear();
	rc = td_store_memmap(&st, huge, store, td_test_memmap(placement, 0));
	cr_assert_eq(rc, TD_ENOSPC, "save: %d (%s)", rc, td_error_last()->message);
	cr_assert_null(st);
	cr_assert_not(td_test_exists(placement ? store : meta));
	cr_assert_not(td_test_exists(store), "a failed save into a new path leaves nothing there");
	assert_no_temporaries(mnt);

	/* One that fits, then an add and a growth that do not. */
	td_cr_assert_ok(td_store_memmap(&st, small, store, td_test_memmap(placement, 0)));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_U8, 2, (const int64_t[]){ 4, 512 * 1024 }));
	td_cr_assert_err(td_store_add_tensor(st, "big", &t), TD_ENOSPC);
	td_tensor_release(&t);
	td_cr_assert_err(td_store_grow(st, 400), TD_ENOSPC);
	cr_assert_eq(td_dict_batch_shape(td_store_dict(st))[0], 4);
	td_store_close(st);
	assert_no_temporaries(mnt);
	td_cr_assert_ok(td_store_open(&ro, store, NULL));
	cr_assert_eq(td_dict_equal(td_store_dict(ro), small), 1, "the store is as it was");
	td_store_close(ro);

	/* With the disk full, writing every byte of the mapped data does not fault. */
	td_cr_assert_ok(td_store_open(&st, store, td_test_rw()));
	fill(mnt);
	write_through(st, 9);
	td_store_close(st);
	td_cr_assert_ok(td_store_open(&ro, store, NULL));
	d = rows_dict(4, 32 * 1024);
	td_cr_assert_ok(td_dict_binary_scalar_inplace(d, td_scalar_int(2), TD_OP_ADD));
	cr_assert_eq(td_dict_equal(td_store_dict(ro), d), 1, "every byte written reached the file");
	td_store_close(ro);
	td_dict_free(d);
	td_dict_free(small);
	td_dict_free(huge);
}

Test(store_full, a_directory_store_on_a_full_disk)
{
	check_full_disk(TD_PLACEMENT_DIRECTORY);
}

Test(store_full, a_packed_store_on_a_full_disk)
{
	check_full_disk(TD_PLACEMENT_PACKED);
}

Test(store_full, space_for_files_sized_but_not_written_is_reserved)
{
	const char *mnt = small_fs(1024);
	td_dict *d = rows_dict(4, 64 * 1024);
	td_store *st;
	td_tensor t;
	int i;

	/* memmap_like: the files are sized and reserved, not written. */
	for (i = 0; i < 2; i++) {
		td_cr_assert_ok(td_store_memmap(&st, d, in(mnt, i ? "like.tds" : "like"),
			td_test_memmap(i ? TD_PLACEMENT_PACKED : TD_PLACEMENT_DIRECTORY, TD_TEST_LIKE)));
		td_store_close(st);
	}
	/* A memory-mapped tensor on its own, sized but not written. */
	td_cr_assert_ok(td_mmap_tensor_empty(&t, in(mnt, "t.memmap"), TD_DTYPE_U8, 1,
		(const int64_t[]){ 128 * 1024 }, NULL));
	fill(mnt);
	memset(td_tensor_data(&t), 3, td_tensor_nbytes(&t));
	td_tensor_release(&t);
	for (i = 0; i < 2; i++) {
		td_cr_assert_ok(td_store_open(&st, in(mnt, i ? "like.tds" : "like"), td_test_rw()));
		write_through(st, 1);
		td_store_close(st);
	}
	/* And a tensor that does not fit is refused. */
	td_cr_assert_err(td_mmap_tensor_empty(&t, in(mnt, "no.memmap"), TD_DTYPE_U8, 1,
						 (const int64_t[]){ 1 << 20 }, NULL),
		TD_ENOSPC);
	td_dict_free(d);
}

Test(store_full, a_ring_that_does_not_fit_is_refused)
{
	const char *mnt = small_fs(512);
	const int64_t row[1] = { 4096 };
	td_dict *tmpl;
	td_ring *r = (td_ring *)0x1;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&tmpl, 0, NULL));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_U8, 1, row));
	td_cr_assert_ok(td_dict_set_tensor_take(tmpl, "obs", &t));
	td_cr_assert_err(td_ring_create(&r, in(mnt, "ring"), tmpl, 1024, NULL), TD_ENOSPC);
	cr_assert_null(r);
	td_cr_assert_ok(td_ring_create(&r, in(mnt, "ring2"), tmpl, 16, NULL));
	td_ring_close(r);
	td_dict_free(tmpl);
}
