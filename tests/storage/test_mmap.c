/* SPDX-License-Identifier: MIT */
/*
 * test_mmap.c - memory-mapped tensors on their own (empty / zeros / full /
 * from a tensor / from a file, existsok) and anonymous shared memory:
 * tensors and dicts in memfds, shared with forked children and passed to
 * another process over a Unix socket (SCM_RIGHTS).
 */
#include "td_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(mmap, .init = td_test_tmpdir_init, .fini = td_test_tmpdir_fini, .timeout = 30);

/* ---- helpers ---- */

/* The memfd of a shared-memory tensor (asserted), and its offset when `off` is not NULL. */
static int shm_fd(const td_tensor *t, uint64_t *off)
{
	int fd = -1;

	td_cr_assert_ok(td_shm_tensor_fd(&fd, off, t));
	cr_assert_geq(fd, 0);
	return fd;
}

/* Options of a version no library knows. */
static const td_mmap_opts bad_version = { TD_MMAP_OPTS_VERSION + 1, false, false };

static char path_buf[4][4200];

/* A path in the test directory that survives later td_test_path() calls. */
static const char *tpath(int slot, const char *name)
{
	snprintf(path_buf[slot], sizeof(path_buf[slot]), "%s", td_test_path(name));
	return path_buf[slot];
}

static void write_bytes(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f, "cannot create %s", path);
	cr_assert_eq(fwrite(data, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

static void read_bytes(const char *path, void *data, size_t n)
{
	FILE *f = fopen(path, "rb");

	cr_assert_not_null(f, "cannot open %s", path);
	cr_assert_eq(fread(data, 1, n, f), n);
	fclose(f);
}

static void assert_all(const td_tensor *t, double value)
{
	int64_t i, n = td_tensor_numel(t);

	for (i = 0; i < n; i++)
		cr_assert_eq(td_test_element(t, i), value, "element %lld is %g, expected %g", (long long)i,
			td_test_element(t, i), value);
}

static void assert_equal(const td_tensor *a, const td_tensor *b)
{
	int eq = td_tensor_equal(a, b);

	cr_assert_eq(eq, 1, "tensors differ (%d): %s", eq, td_error_last()->message);
}

/* Wait for a child and require that it exited with status 0. */
static void wait_ok(pid_t pid)
{
	int status;

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
}

/* ---- creating files ---- */

Test(mmap, empty_zeros_and_full_make_files_of_the_tensor_size)
{
	static const td_dtype dtypes[] = { TD_DTYPE_BOOL, TD_DTYPE_U8, TD_DTYPE_I16, TD_DTYPE_I32,
		TD_DTYPE_I64, TD_DTYPE_F16, TD_DTYPE_BF16, TD_DTYPE_F32, TD_DTYPE_F64, TD_DTYPE_C64 };
	static const int64_t shape[] = { 3, 5 };
	size_t i;

	for (i = 0; i < TD_TEST_ARRAY_LEN(dtypes); i++) {
		size_t nbytes = 15 * td_dtype_size(dtypes[i]);
		double v = dtypes[i] == TD_DTYPE_BOOL ? 1.0 : 7.0;
		char name[64];
		td_tensor t;

		snprintf(name, sizeof(name), "z%zu", i);
		td_cr_assert_ok(td_mmap_tensor_zeros(&t, td_test_path(name), dtypes[i], 2, shape, NULL));
		cr_assert_eq(td_test_file_size(td_test_path(name)), (int64_t)nbytes);
		cr_assert_eq(td_buffer_memory(t.buffer), TD_MEMORY_FILE);
		cr_assert_eq(td_buffer_flags(t.buffer), 0u);
		cr_assert(td_tensor_is_contiguous(&t));
		cr_assert_eq(t.ndim, 2);
		cr_assert_eq(td_tensor_shape(&t)[1], 5);
		assert_all(&t, 0.0);
		td_tensor_release(&t);

		snprintf(name, sizeof(name), "f%zu", i);
		td_cr_assert_ok(td_mmap_tensor_full(&t, td_test_path(name), dtypes[i], 2, shape,
			td_scalar_float(v), NULL));
		assert_all(&t, v);
		td_tensor_release(&t);
		/* The values reached the file. */
		td_cr_assert_ok(
			td_mmap_tensor_from_file(&t, td_test_path(name), dtypes[i], 2, shape, NULL));
		assert_all(&t, v);
		td_tensor_release(&t);

		snprintf(name, sizeof(name), "e%zu", i);
		td_cr_assert_ok(td_mmap_tensor_empty(&t, td_test_path(name), dtypes[i], 1, shape, NULL));
		cr_assert_eq(td_test_file_size(td_test_path(name)),
			(int64_t)(3 * td_dtype_size(dtypes[i])));
		td_tensor_release(&t);
	}
}

Test(mmap, tensors_of_many_dims_map_files_and_memfds)
{
	static const int64_t shape[6] = { 2, 1, 3, 1, 2, 2 };
	const int64_t last[6] = { 1, 0, 2, 0, 1, 1 };
	td_tensor t, a, c;
	td_scalar x;
	int k;

	td_cr_assert_ok(
		td_mmap_tensor_full(&t, td_test_path("six"), TD_DTYPE_I16, 6, shape, td_scalar_int(5), 0));
	td_cr_assert_ok(td_mmap_tensor_zeros(&a, NULL, TD_DTYPE_I16, 6, shape, 0));
	for (k = 0; k < 2; k++) {
		const td_tensor *m = k ? &a : &t;

		cr_assert_eq(m->ndim, 6);
		cr_assert_eq(td_tensor_numel(m), 24);
		cr_assert_eq(td_tensor_strides(m)[0], 12);
		cr_assert(td_tensor_is_contiguous(m));
		td_cr_assert_ok(td_tensor_get(&x, m, last));
		cr_assert_eq(x.v.i, k ? 0 : 5);
	}
	td_cr_assert_ok(td_mmap_tensor_from_tensor(&c, NULL, &t, 0));
	cr_assert_eq(td_tensor_equal(&c, &t), 1);
	td_tensor_release(&c);
	td_tensor_release(&a);
	td_tensor_release(&t);
	cr_assert_eq(td_test_file_size(td_test_path("six")), 48);
}

Test(mmap, writes_through_a_file_tensor_reach_the_file)
{
	static const int64_t shape[] = { 4 };
	int32_t raw[4];
	td_tensor t;

	td_cr_assert_ok(td_mmap_tensor_empty(&t, td_test_path("w"), TD_DTYPE_I32, 1, shape, NULL));
	td_cr_assert_ok(td_tensor_fill(&t, td_scalar_int(-3)));
	td_cr_assert_ok(td_tensor_set(&t, (const int64_t[]){ 2 }, td_scalar_int(9)));
	td_tensor_release(&t);
	read_bytes(td_test_path("w"), raw, sizeof(raw));
	cr_assert(raw[0] == -3 && raw[1] == -3 && raw[2] == 9 && raw[3] == -3);
}

Test(mmap, creation_refuses_bad_arguments_and_makes_nothing)
{
	static const int64_t shape[] = { 2 }, negative[] = { -1 }, huge[] = { INT64_MAX / 2, 4 };
	const char *p = tpath(0, "bad");
	td_tensor t, src;

	td_test_poison(&t);
	td_cr_assert_err(td_mmap_tensor_empty(NULL, p, TD_DTYPE_F32, 1, shape, NULL), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_zeros(NULL, NULL, TD_DTYPE_F32, 1, shape, NULL), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_full(NULL, p, TD_DTYPE_F32, 1, shape, td_scalar_int(1), NULL),
		TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_empty(&t, p, TD_DTYPE_F32, 1, shape, &bad_version), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_zeros(&t, p, TD_DTYPE_F32, 1, shape, &bad_version), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_full(&t, p, TD_DTYPE_F32, 1, shape, td_scalar_int(1),
						 &bad_version),
		TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_empty(&t, p, (td_dtype)99, 1, shape, NULL), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_empty(&t, p, TD_DTYPE_F32, TD_MAX_DIMS + 1, shape, NULL),
		TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_empty(&t, p, TD_DTYPE_F32, 1, NULL, NULL), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_zeros(&t, p, TD_DTYPE_F32, 1, negative, NULL), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_full(&t, p, TD_DTYPE_F32, 2, huge, td_scalar_int(1), NULL),
		TD_EOVERFLOW);
	td_cr_assert_err(td_mmap_tensor_empty(&t, NULL, TD_DTYPE_F64, 2, huge, NULL), TD_EOVERFLOW);
	td_cr_assert_err(td_mmap_tensor_empty(&t, td_test_path("no/such/dir"), TD_DTYPE_F32, 1, shape,
						 NULL),
		TD_ENOTFOUND);
	td_test_assert_poisoned(&t);
	cr_assert_not(td_test_exists(p));

	/* from_tensor: src checked before any file is made. */
	td_cr_assert_err(td_mmap_tensor_from_tensor(&t, p, NULL, NULL), TD_EINVAL);
	src = (td_tensor)TD_TENSOR_INIT;
	td_cr_assert_err(td_mmap_tensor_from_tensor(&t, p, &src, NULL), TD_EINVAL);
	td_test_arange(&src, TD_DTYPE_F32, 1, shape);
	td_cr_assert_err(td_mmap_tensor_from_tensor(NULL, p, &src, NULL), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_from_tensor(&t, p, &src, &bad_version), TD_EINVAL);
	td_tensor_release(&src);
	td_test_assert_poisoned(&t);
	cr_assert_not(td_test_exists(p));
}

Test(mmap, a_failed_fill_removes_the_file_it_created)
{
	static const int64_t shape[] = { 4 };
	td_scalar bad = td_scalar_int(1);
	td_tensor t;

	bad.kind = (td_scalar_kind)7;
	td_cr_assert_err(td_mmap_tensor_full(&t, td_test_path("gone"), TD_DTYPE_F32, 1, shape, bad,
						 NULL),
		TD_EINVAL);
	cr_assert_not(td_test_exists(td_test_path("gone")));
	td_cr_assert_err(td_mmap_tensor_full(&t, NULL, TD_DTYPE_F32, 1, shape, bad, NULL), TD_EINVAL);
}

Test(mmap, existing_files_need_existsok_and_are_never_truncated)
{
	static const int64_t shape[] = { 4 };
	static const int32_t old[2] = { 11, 22 };
	const char *p = tpath(0, "x");
	char junk[64];
	td_tensor t;

	write_bytes(p, old, sizeof(old));
	td_cr_assert_err(td_mmap_tensor_empty(&t, p, TD_DTYPE_I32, 1, shape, NULL), TD_EEXISTS);
	td_cr_assert_err(td_mmap_tensor_zeros(&t, p, TD_DTYPE_I32, 1, shape, NULL), TD_EEXISTS);
	cr_assert_eq(td_test_file_size(p), 8);
	/* empty + existsok: grown to 16 bytes, the old bytes kept. */
	td_cr_assert_ok(td_mmap_tensor_empty(&t, p, TD_DTYPE_I32, 1, shape, td_test_mmap_existsok()));
	cr_assert_eq(td_test_file_size(p), 16);
	cr_assert_eq(td_test_element(&t, 0), 11.0);
	cr_assert_eq(td_test_element(&t, 1), 22.0);
	cr_assert_eq(td_test_element(&t, 3), 0.0);
	td_tensor_release(&t);
	/* zeros + existsok overwrites; full + existsok fills. */
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, p, TD_DTYPE_I32, 1, shape, td_test_mmap_existsok()));
	assert_all(&t, 0.0);
	td_tensor_release(&t);
	td_cr_assert_ok(td_mmap_tensor_full(&t, p, TD_DTYPE_I32, 1, shape, td_scalar_int(5),
		td_test_mmap_existsok()));
	assert_all(&t, 5.0);
	td_tensor_release(&t);
	/* A longer file keeps its length. */
	memset(junk, 0x7f, sizeof(junk));
	write_bytes(p, junk, sizeof(junk));
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, p, TD_DTYPE_I32, 1, shape, td_test_mmap_existsok()));
	td_tensor_release(&t);
	cr_assert_eq(td_test_file_size(p), 64);
	read_bytes(p, junk, sizeof(junk));
	cr_assert(junk[15] == 0 && junk[16] == 0x7f);
}

Test(mmap, options_apply_where_they_say_and_are_ignored_elsewhere)
{
	static const int64_t shape[] = { 4 };
	static const int32_t old[4] = { 1, 2, 3, 4 };
	td_mmap_opts o = TD_MMAP_OPTS_INIT;
	const char *p = tpath(0, "o"), *q = tpath(1, "q");
	td_tensor t, u;
	int fd;

	cr_assert_eq(o.version, TD_MMAP_OPTS_VERSION);
	cr_assert_not(o.exist_ok);
	cr_assert_not(o.writable);
	write_bytes(p, old, sizeof(old));
	/* Making a file: the initializer is NULL's defaults; `writable` does not apply. */
	td_cr_assert_err(td_mmap_tensor_empty(&t, p, TD_DTYPE_I32, 1, shape, &o), TD_EEXISTS);
	o.writable = true;
	td_cr_assert_err(td_mmap_tensor_zeros(&t, p, TD_DTYPE_I32, 1, shape, &o), TD_EEXISTS);
	o.writable = false;
	td_cr_assert_ok(td_mmap_tensor_full(&t, q, TD_DTYPE_I32, 1, shape, td_scalar_int(6), &o));
	cr_assert_eq(td_buffer_flags(t.buffer), 0u, "a new tensor is writable");
	td_tensor_release(&t);
	o.exist_ok = true;
	td_cr_assert_ok(td_mmap_tensor_empty(&t, p, TD_DTYPE_I32, 1, shape, &o));
	cr_assert_eq(td_test_element(&t, 2), 3.0);
	td_tensor_release(&t);
	/* Mapping a file: `exist_ok` does not apply; `writable` does. */
	td_cr_assert_ok(td_mmap_tensor_from_file(&t, p, TD_DTYPE_I32, 1, shape, &o));
	cr_assert_eq(td_buffer_flags(t.buffer), TD_BUFFER_READONLY);
	td_tensor_release(&t);
	o.writable = true;
	td_cr_assert_ok(td_mmap_tensor_from_file(&t, p, TD_DTYPE_I32, 1, shape, &o));
	cr_assert_eq(td_buffer_flags(t.buffer), 0u);
	td_tensor_release(&t);
	/* A descriptor: the same. */
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_I32, 1, shape, NULL));
	fd = shm_fd(&t, NULL);
	o = (td_mmap_opts)TD_MMAP_OPTS_INIT;
	o.exist_ok = true;
	td_cr_assert_ok(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_I32, 1, shape, 0, &o));
	cr_assert_eq(td_buffer_flags(u.buffer), TD_BUFFER_READONLY);
	td_tensor_release(&u);
	o.writable = true;
	td_cr_assert_ok(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_I32, 1, shape, 0, &o));
	cr_assert_eq(td_buffer_flags(u.buffer), 0u);
	td_tensor_release(&u);
	/* Version 0, or one from a newer header: TD_EINVAL, with a message that says so. */
	o.version = 0;
	td_cr_assert_err(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_I32, 1, shape, 0, &o), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "version") != NULL);
	td_cr_assert_err(td_mmap_tensor_from_file(&u, p, TD_DTYPE_I32, 1, shape, &o), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_empty(&u, NULL, TD_DTYPE_I32, 1, shape, &bad_version),
		TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "version") != NULL);
	td_tensor_release(&t);
}

Test(mmap, symbolic_links_and_special_files_are_refused)
{
	static const int64_t shape[] = { 4 };
	const char *victim = tpath(0, "victim"), *link = tpath(1, "link"), *fifo = tpath(2, "fifo");
	td_tensor t;

	write_bytes(victim, "abc", 3);
	cr_assert_eq(symlink(victim, link), 0);
	td_cr_assert_err(td_mmap_tensor_zeros(&t, link, TD_DTYPE_I32, 1, shape, NULL), TD_EEXISTS);
	td_cr_assert_err(td_mmap_tensor_zeros(&t, link, TD_DTYPE_I32, 1, shape,
						 td_test_mmap_existsok()),
		TD_ECORRUPT);
	td_cr_assert_err(td_mmap_tensor_from_file(&t, link, TD_DTYPE_U8, 1, (int64_t[]){ 3 }, NULL),
		TD_ECORRUPT);
	cr_assert_eq(td_test_file_size(victim), 3);
	cr_assert(td_test_exists(link));
	cr_assert_eq(mkfifo(fifo, 0666), 0);
	td_cr_assert_err(td_mmap_tensor_empty(&t, fifo, TD_DTYPE_I32, 1, shape,
						 td_test_mmap_existsok()),
		TD_ECORRUPT);
	td_cr_assert_err(td_mmap_tensor_from_file(&t, fifo, TD_DTYPE_I32, 1, shape, NULL), TD_ECORRUPT);
	td_cr_assert_err(td_mmap_tensor_from_file(&t, td_test_tmpdir(), TD_DTYPE_I32, 1, shape, NULL),
		TD_ECORRUPT);
	cr_assert(td_test_exists(fifo));
}

Test(mmap, zero_element_tensors_map_nothing)
{
	static const int64_t shape[] = { 0, 3 };
	td_tensor t;
	uint64_t off = 1;

	td_cr_assert_ok(td_mmap_tensor_zeros(&t, td_test_path("z"), TD_DTYPE_F32, 2, shape, NULL));
	cr_assert_eq(td_test_file_size(td_test_path("z")), 0);
	cr_assert_eq(td_tensor_numel(&t), 0);
	cr_assert_eq(td_buffer_memory(t.buffer), TD_MEMORY_FILE);
	td_tensor_release(&t);
	/* Again without existsok: the empty file exists. */
	td_cr_assert_err(td_mmap_tensor_zeros(&t, td_test_path("z"), TD_DTYPE_F32, 2, shape, NULL),
		TD_EEXISTS);
	/* from_file needs no file for no elements. */
	td_cr_assert_ok(td_mmap_tensor_from_file(&t, td_test_path("none"), TD_DTYPE_F32, 2, shape,
		td_test_mmap_rw()));
	cr_assert_eq(td_tensor_numel(&t), 0);
	td_tensor_release(&t);
	/* Anonymous: a memfd of zero bytes, which can still be passed on. */
	td_cr_assert_ok(td_mmap_tensor_full(&t, NULL, TD_DTYPE_F32, 2, shape, td_scalar_int(1), NULL));
	cr_assert_eq(td_buffer_memory(t.buffer), TD_MEMORY_SHM);
	shm_fd(&t, &off);
	cr_assert_eq(off, 0);
	td_tensor_release(&t);
}

/* ---- from a tensor ---- */

Test(mmap, from_tensor_writes_strided_sources_in_c_order)
{
	static const int64_t shape[] = { 3, 4 };
	const char *p = tpath(0, "ft");
	td_tensor src, tr, t, back;
	int32_t raw[12];
	int i, j;

	td_test_arange(&src, TD_DTYPE_I32, 2, shape);
	td_cr_assert_ok(td_tensor_transpose(&tr, &src, 0, 1));
	cr_assert_not(td_tensor_is_contiguous(&tr));
	td_cr_assert_ok(td_mmap_tensor_from_tensor(&t, p, &tr, NULL));
	assert_equal(&t, &tr);
	cr_assert(td_tensor_is_contiguous(&t));
	cr_assert_eq(td_tensor_shape(&t)[0], 4);
	read_bytes(p, raw, sizeof(raw));
	for (i = 0; i < 4; i++)
		for (j = 0; j < 3; j++)
			cr_assert_eq(raw[i * 3 + j], j * 4 + i);
	/* Round trip through from_file. */
	td_cr_assert_ok(td_mmap_tensor_from_file(&back, p, TD_DTYPE_I32, 2, td_tensor_shape(&t), NULL));
	assert_equal(&back, &tr);
	td_tensor_release(&back);
	td_tensor_release(&t);
	/* Existing file: existsok. */
	td_cr_assert_err(td_mmap_tensor_from_tensor(&t, p, &tr, NULL), TD_EEXISTS);
	td_cr_assert_ok(td_mmap_tensor_from_tensor(&t, p, &src, td_test_mmap_existsok()));
	assert_equal(&t, &src);
	td_tensor_release(&t);
	/* Anonymous shared memory, and `out` aliasing `src`. */
	td_cr_assert_ok(td_mmap_tensor_from_tensor(&tr, NULL, &tr, NULL));
	cr_assert_eq(td_buffer_memory(tr.buffer), TD_MEMORY_SHM);
	cr_assert_eq(td_test_element(&tr, 1), 4.0);
	td_tensor_release(&tr);
	td_tensor_release(&src);
}

Test(mmap, from_tensor_refuses_device_memory_before_making_a_file)
{
	static const int64_t shape[] = { 4 };
	td_buffer_wrap_opts opts = TD_BUFFER_WRAP_OPTS_INIT;
	static char fake[16];
	td_buffer *buf;
	td_tensor dev, t;

	opts.memory = TD_MEMORY_DEVICE;
	opts.device = 0;
	td_cr_assert_ok(td_buffer_wrap(&buf, fake, sizeof(fake), &opts));
	td_cr_assert_ok(td_tensor_from_buffer(&dev, buf, TD_DTYPE_F32, 1, shape, NULL, 0));
	td_buffer_unref(buf);
	td_cr_assert_err(td_mmap_tensor_from_tensor(&t, td_test_path("dev"), &dev, NULL), TD_ENOTSUP);
	cr_assert_not(td_test_exists(td_test_path("dev")));
	td_tensor_release(&dev);
}

/* ---- from a file ---- */

Test(mmap, from_file_maps_read_only_or_read_write)
{
	static const int64_t shape[] = { 2, 2 };
	static const float data[5] = { 1, 2, 3, 4, 5 };
	const char *p = tpath(0, "rf");
	td_tensor t;
	float raw[5];

	write_bytes(p, data, sizeof(data)); /* longer than the tensor: fine */
	td_cr_assert_ok(td_mmap_tensor_from_file(&t, p, TD_DTYPE_F32, 2, shape, NULL));
	cr_assert_eq(td_buffer_memory(t.buffer), TD_MEMORY_FILE);
	cr_assert_eq(td_buffer_flags(t.buffer), TD_BUFFER_READONLY);
	cr_assert_eq(td_test_element(&t, 3), 4.0);
	td_cr_assert_err(td_tensor_fill(&t, td_scalar_int(0)), TD_EREADONLY);
	td_tensor_release(&t);
	td_cr_assert_ok(td_mmap_tensor_from_file(&t, p, TD_DTYPE_F32, 2, shape, td_test_mmap_rw()));
	td_cr_assert_ok(td_tensor_fill(&t, td_scalar_float(-1)));
	td_tensor_release(&t);
	read_bytes(p, raw, sizeof(raw));
	cr_assert(raw[0] == -1 && raw[3] == -1 && raw[4] == 5);
	cr_assert_eq(td_test_file_size(p), (int64_t)sizeof(data));
}

Test(mmap, from_file_checks_arguments_and_bounds)
{
	static const int64_t shape[] = { 4 }, big[] = { 5 }, huge[] = { INT64_MAX / 2, 4 };
	static const int32_t data[4] = { 1, 2, 3, 4 };
	const char *p = tpath(0, "b");
	td_tensor t;

	write_bytes(p, data, sizeof(data));
	td_test_poison(&t);
	td_cr_assert_err(td_mmap_tensor_from_file(NULL, p, TD_DTYPE_I32, 1, shape, NULL), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_from_file(&t, NULL, TD_DTYPE_I32, 1, shape, NULL), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_from_file(&t, p, TD_DTYPE_I32, 1, shape, &bad_version),
		TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_from_file(&t, p, (td_dtype)99, 1, shape, NULL), TD_EINVAL);
	td_cr_assert_err(td_mmap_tensor_from_file(&t, p, TD_DTYPE_I32, 1, big, NULL), TD_ECORRUPT);
	td_cr_assert_err(td_mmap_tensor_from_file(&t, p, TD_DTYPE_I64, 1, shape, NULL), TD_ECORRUPT);
	td_cr_assert_err(td_mmap_tensor_from_file(&t, p, TD_DTYPE_I32, 2, huge, NULL), TD_EOVERFLOW);
	td_cr_assert_err(td_mmap_tensor_from_file(&t, td_test_path("missing"), TD_DTYPE_I32, 1, shape,
						 NULL),
		TD_ENOTFOUND);
	if (geteuid() != 0) {
		cr_assert_eq(chmod(p, 0444), 0);
		td_cr_assert_err(td_mmap_tensor_from_file(&t, p, TD_DTYPE_I32, 1, shape, td_test_mmap_rw()),
			TD_EREADONLY);
		td_cr_assert_err(td_mmap_tensor_zeros(&t, p, TD_DTYPE_I32, 1, shape,
							 td_test_mmap_existsok()),
			TD_EREADONLY);
	}
	td_test_assert_poisoned(&t);
}

/* ---- anonymous shared memory ---- */

Test(mmap, anonymous_tensors_live_in_a_memfd)
{
	static const int64_t shape[] = { 8 };
	td_tensor t, v;
	uint64_t off, base;
	int fd, fd2;

	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_F64, 1, shape, NULL));
	cr_assert_eq(td_buffer_memory(t.buffer), TD_MEMORY_SHM);
	assert_all(&t, 0.0);
	fd = -1;
	base = UINT64_MAX;
	td_cr_assert_ok(td_shm_tensor_fd(&fd, &base, &t));
	cr_assert_geq(fd, 0);
	cr_assert_eq(base % 64, 0);
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	/* A view: the same descriptor, its own offset; the offset may be left out. */
	td_cr_assert_ok(td_tensor_narrow(&v, &t, 0, 3, 2));
	fd2 = -1;
	td_cr_assert_ok(td_shm_tensor_fd(&fd2, &off, &v));
	cr_assert_eq(fd2, fd);
	cr_assert_eq(off, base + 24);
	fd2 = -1;
	td_cr_assert_ok(td_shm_tensor_fd(&fd2, NULL, &v));
	cr_assert_eq(fd2, fd);
	/* The view keeps the memfd open after the tensor goes. */
	td_tensor_release(&t);
	cr_assert_geq(fcntl(fd, F_GETFD), 0);
	td_tensor_release(&v);

	td_cr_assert_ok(
		td_mmap_tensor_empty(&t, NULL, TD_DTYPE_I16, 1, shape, td_test_mmap_existsok()));
	td_tensor_release(&t);
	td_cr_assert_ok(td_mmap_tensor_full(&t, NULL, TD_DTYPE_I16, 1, shape, td_scalar_int(-2), NULL));
	assert_all(&t, -2.0);
	td_tensor_release(&t);
}

Test(mmap, shm_tensor_fd_refuses_other_tensors)
{
	static const int64_t shape[] = { 2 };
	td_tensor t = TD_TENSOR_INIT;
	uint64_t off = 7;
	int fd = 7;

	/* On failure *fd_out is -1 and *offset_out 0. */
	td_cr_assert_err(td_shm_tensor_fd(&fd, &off, NULL), TD_EINVAL);
	cr_assert_eq(fd, -1);
	cr_assert_eq(off, 0);
	td_cr_assert_err(td_shm_tensor_fd(&fd, NULL, &t), TD_EINVAL);
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, shape));
	fd = 7;
	off = 7;
	td_cr_assert_err(td_shm_tensor_fd(&fd, &off, &t), TD_EINVAL);
	cr_assert_eq(fd, -1);
	cr_assert_eq(off, 0);
	td_tensor_release(&t);
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, td_test_path("f"), TD_DTYPE_F32, 1, shape, NULL));
	td_cr_assert_err(td_shm_tensor_fd(&fd, NULL, &t), TD_EINVAL);
	td_tensor_release(&t);
	/* fd_out is required; offset_out is not. */
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_F32, 1, shape, NULL));
	off = 7;
	td_cr_assert_err(td_shm_tensor_fd(NULL, &off, &t), TD_EINVAL);
	cr_assert_eq(off, 0);
	td_cr_assert_ok(td_shm_tensor_fd(&fd, NULL, &t));
	cr_assert_geq(fd, 0);
	td_tensor_release(&t);
}

Test(mmap, from_fd_maps_the_same_memory)
{
	static const int64_t shape[] = { 16 }, two[] = { 2 };
	td_tensor t, u;
	uint64_t off, base;
	int fd, fd2;

	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_I32, 1, shape, NULL));
	fd = shm_fd(&t, &base);
	td_cr_assert_ok(
		td_shm_tensor_from_fd(&u, fd, TD_DTYPE_I32, 1, two, base + 8, td_test_mmap_rw()));
	cr_assert_eq(td_buffer_memory(u.buffer), TD_MEMORY_SHM);
	cr_assert_neq(u.buffer, t.buffer);
	td_cr_assert_ok(td_tensor_fill(&u, td_scalar_int(42)));
	cr_assert_eq(td_test_element(&t, 1), 0.0);
	cr_assert_eq(td_test_element(&t, 2), 42.0);
	cr_assert_eq(td_test_element(&t, 3), 42.0);
	cr_assert_eq(td_test_element(&t, 4), 0.0);
	/* u holds its own descriptor: it outlives t and its fd. */
	fd2 = shm_fd(&u, &off);
	cr_assert_neq(fd2, fd);
	cr_assert_eq(off, base + 8);
	td_tensor_release(&t);
	cr_assert_eq(td_test_element(&u, 1), 42.0);
	td_tensor_release(&u);
	cr_assert_eq(fcntl(fd2, F_GETFD), -1);

	/* Read-only mapping. */
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_I32, 1, shape, NULL));
	fd = shm_fd(&t, &base);
	td_cr_assert_ok(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_I32, 1, shape, base, NULL));
	cr_assert_eq(td_buffer_flags(u.buffer), TD_BUFFER_READONLY);
	td_cr_assert_err(td_tensor_fill(&u, td_scalar_int(1)), TD_EREADONLY);
	td_tensor_release(&u);
	td_tensor_release(&t);
}

Test(mmap, from_fd_checks_the_descriptor_and_the_range)
{
	static const int64_t shape[] = { 4 }, five[] = { 5 }, huge[] = { INT64_MAX / 2, 4 };
	td_tensor t, u;
	int fd, pipes[2], ro;

	/* A memfd of the tensor's own size (no arena chunk): the range checks
	 * below need the memory to end where the tensor ends. */
	td_cr_assert_ok(td_shm_arena_set_max(0));
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_I32, 1, shape, NULL));
	fd = shm_fd(&t, NULL);
	td_test_poison(&u);
	td_cr_assert_err(td_shm_tensor_from_fd(NULL, fd, TD_DTYPE_I32, 1, shape, 0, NULL), TD_EINVAL);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, -1, TD_DTYPE_I32, 1, shape, 0, NULL), TD_EINVAL);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, 4000, TD_DTYPE_I32, 1, shape, 0, NULL), TD_EINVAL);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_I32, 1, shape, 0, &bad_version),
		TD_EINVAL);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_I32, 1, shape, 2, NULL), TD_EINVAL);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, fd, (td_dtype)99, 1, shape, 0, NULL), TD_EINVAL);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_I32, 1, five, 0, NULL), TD_ECORRUPT);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_I32, 1, shape, 4, NULL), TD_ECORRUPT);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_I32, 2, huge, 0, NULL), TD_EOVERFLOW);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_I32, 1, shape, UINT64_MAX - 3, NULL),
		TD_EOVERFLOW);
	cr_assert_eq(pipe(pipes), 0);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, pipes[0], TD_DTYPE_I32, 1, shape, 0, NULL),
		TD_ECORRUPT);
	close(pipes[0]);
	close(pipes[1]);
	write_bytes(td_test_path("ro"), "0123456789abcdef", 16);
	ro = open(td_test_path("ro"), O_RDONLY);
	cr_assert_geq(ro, 0);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, ro, TD_DTYPE_I32, 1, shape, 0, td_test_mmap_rw()),
		TD_EREADONLY);
	td_test_assert_poisoned(&u);
	/* A regular file's descriptor maps too; no elements need no bytes. */
	td_cr_assert_ok(td_shm_tensor_from_fd(&u, ro, TD_DTYPE_U8, 1, shape, 12, NULL));
	cr_assert_eq(td_test_element(&u, 0), 'c');
	td_tensor_release(&u);
	td_cr_assert_ok(td_shm_tensor_from_fd(&u, ro, TD_DTYPE_U8, 1, (int64_t[]){ 0 }, 64, NULL));
	cr_assert_eq(td_tensor_numel(&u), 0);
	td_tensor_release(&u);
	close(ro);
	td_tensor_release(&t);
}

/* ---- dicts in one memfd ---- */

static td_dict *sample_dict(void)
{
	static const int64_t b[] = { 3 }, s34[] = { 3, 4 }, s0[] = { 3, 0 }, s35[] = { 5, 3 };
	td_dict *d, *sub;
	td_tensor t, tr;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	td_test_arange(&t, TD_DTYPE_U8, 1, b);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "u8", &t));
	td_test_arange(&t, TD_DTYPE_F64, 2, s34);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "f64", &t));
	td_test_arange(&t, TD_DTYPE_I32, 2, s0);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "empty", &t));
	td_cr_assert_ok(td_dict_new(&sub, 1, b));
	td_test_arange(&t, TD_DTYPE_I16, 2, s35);
	td_cr_assert_ok(td_tensor_transpose(&tr, &t, 0, 1)); /* strided */
	td_tensor_release(&t);
	td_cr_assert_ok(td_dict_set_tensor_take(sub, "obs", &tr));
	td_cr_assert_ok(td_dict_set_string(sub, "label", "hello"));
	td_cr_assert_ok(td_dict_set_dict_take(d, "sub", sub));
	return d;
}

static const td_tensor *leaf(const td_dict *d, const char *dotted)
{
	const td_tensor *t;
	td_key *k;

	td_cr_assert_ok(td_key_new(&k, dotted));
	td_cr_assert_ok(td_dict_get_tensor_key(&t, d, k));
	td_key_free(k);
	return t;
}

Test(mmap, shm_dict_puts_every_tensor_in_one_memfd)
{
	static const char *keys[] = { "u8", "f64", "empty", "sub.obs" };
	td_dict *src = sample_dict(), *d;
	uint64_t off, prev = 0;
	size_t i;
	int fd = -1, eq;

	td_cr_assert_ok(td_shm_dict(&d, src));
	eq = td_dict_equal(d, src);
	cr_assert_eq(eq, 1, "dicts differ (%d): %s", eq, td_error_last()->message);
	for (i = 0; i < TD_TEST_ARRAY_LEN(keys); i++) {
		const td_tensor *t = leaf(d, keys[i]);
		int f = shm_fd(t, &off);

		if (fd < 0)
			fd = f;
		cr_assert_eq(f, fd, "%s is in another memfd", keys[i]);
		cr_assert_eq(off % 64, 0, "%s at offset %llu", keys[i], (unsigned long long)off);
		cr_assert(i == 0 || off >= prev);
		prev = off;
		cr_assert(td_tensor_is_contiguous(t));
		cr_assert_eq(td_buffer_memory(t->buffer), TD_MEMORY_SHM);
	}
	/* The source is untouched: its leaves are not in shared memory. */
	td_cr_assert_err(td_shm_tensor_fd(&fd, NULL, leaf(src, "f64")), TD_EINVAL);
	td_dict_free(src);
	td_dict_free(d);
}

Test(mmap, shm_dict_tensors_outlive_the_dict)
{
	td_dict *src = sample_dict(), *d;
	td_tensor t;

	td_cr_assert_ok(td_shm_dict(&d, src));
	td_tensor_ref(&t, leaf(d, "f64"));
	td_dict_free(d);
	td_dict_free(src);
	cr_assert_eq(td_test_element(&t, 5), 5.0);
	cr_assert_geq(fcntl(shm_fd(&t, NULL), F_GETFD), 0);
	td_tensor_release(&t);
}

Test(mmap, shm_dict_of_an_empty_dict_and_bad_arguments)
{
	static const int64_t shape[] = { 4 };
	td_buffer_wrap_opts opts = TD_BUFFER_WRAP_OPTS_INIT;
	static char fake[16];
	td_dict *src, *d = (td_dict *)0x1;
	td_buffer *buf;
	td_tensor dev;

	td_cr_assert_ok(td_dict_new(&src, 0, NULL));
	td_cr_assert_ok(td_shm_dict(&d, src));
	cr_assert_eq(td_dict_len(d), 0);
	td_dict_free(d);
	td_cr_assert_err(td_shm_dict(NULL, src), TD_EINVAL);
	td_cr_assert_err(td_shm_dict(&d, NULL), TD_EINVAL);
	cr_assert_null(d);
	opts.memory = TD_MEMORY_DEVICE;
	opts.device = 0;
	td_cr_assert_ok(td_buffer_wrap(&buf, fake, sizeof(fake), &opts));
	td_cr_assert_ok(td_tensor_from_buffer(&dev, buf, TD_DTYPE_F32, 1, shape, NULL, 0));
	td_buffer_unref(buf);
	td_cr_assert_ok(td_dict_set_tensor_take(src, "dev", &dev));
	d = (td_dict *)0x1;
	td_cr_assert_err(td_shm_dict(&d, src), TD_ENOTSUP);
	cr_assert_null(d);
	td_dict_free(src);
}

/* ---- across processes ---- */

/*
 * Child side of the fork test: write through the inherited mappings, then
 * release what the child inherited (so that valgrind finds no leak in it).
 */
static int child_write(td_tensor *t, td_dict *d, td_dict *src)
{
	static const int64_t at[] = { 2, 3 };
	const td_tensor *obs = NULL, *f64 = NULL;
	td_key *k1 = NULL, *k2 = NULL;
	int ok;

	ok = td_tensor_fill(t, td_scalar_int(77)) == 0 && td_key_new(&k1, "sub.obs") == 0 &&
		td_key_new(&k2, "f64") == 0 && td_dict_get_tensor_key(&obs, d, k1) == 0 &&
		td_dict_get_tensor_key(&f64, d, k2) == 0 &&
		td_tensor_fill((td_tensor *)obs, td_scalar_int(-5)) == 0 &&
		td_tensor_set((td_tensor *)f64, at, td_scalar_float(0.5)) == 0;
	td_key_free(k1);
	td_key_free(k2);
	td_tensor_release(t);
	td_dict_free(d);
	td_dict_free(src);
	return ok ? 0 : 1;
}

Test(mmap, a_forked_child_writes_what_the_parent_sees)
{
	static const int64_t shape[] = { 4 };
	td_dict *src = sample_dict(), *d;
	td_tensor t;
	pid_t pid;

	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_I64, 1, shape, NULL));
	td_cr_assert_ok(td_shm_dict(&d, src));
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(child_write(&t, d, src));
	wait_ok(pid);
	assert_all(&t, 77.0);
	assert_all(leaf(d, "sub.obs"), -5.0);
	cr_assert_eq(td_test_element(leaf(d, "f64"), 11), 0.5);
	cr_assert_eq(td_test_element(leaf(d, "f64"), 10), 10.0);
	cr_assert_eq(td_test_element(leaf(d, "u8"), 2), 2.0);
	td_tensor_release(&t);
	td_dict_free(d);
	td_dict_free(src);
}

/* Child side of the fd-passing test: map both descriptors and write. */
static int child_receive_and_write(int sock)
{
	static const int64_t shape[] = { 6 }, s34[] = { 3, 4 };
	uint64_t off;
	td_tensor t, f;
	uint64_t toff;
	int fd = td_test_recv_fd(sock), dfd, ok;

	if (fd < 0 || read(sock, &toff, sizeof(toff)) != (ssize_t)sizeof(toff) ||
		read(sock, &off, sizeof(off)) != (ssize_t)sizeof(off))
		return 1;
	dfd = td_test_recv_fd(sock);
	if (dfd < 0 ||
		td_shm_tensor_from_fd(&t, fd, TD_DTYPE_F32, 1, shape, toff, td_test_mmap_rw()) < 0)
		return 1;
	close(fd);
	if (td_shm_tensor_from_fd(&f, dfd, TD_DTYPE_F64, 2, s34, off, td_test_mmap_rw()) < 0)
		return 1;
	close(dfd);
	ok = td_test_element(&f, 7) == 7.0 && td_tensor_fill(&t, td_scalar_float(2.5)) == 0 &&
		td_tensor_fill(&f, td_scalar_float(-1.0)) == 0;
	td_tensor_release(&t);
	td_tensor_release(&f);
	return ok ? 0 : 1;
}

Test(mmap, a_descriptor_passed_over_a_socket_shares_the_memory)
{
	static const int64_t shape[] = { 6 };
	td_dict *src, *d;
	td_tensor t;
	uint64_t off;
	int sv[2];
	pid_t pid;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* Fork first: the child inherits no mapping, only the socket. */
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		_exit(child_receive_and_write(sv[1]));
	}
	close(sv[1]);
	src = sample_dict();
	td_cr_assert_ok(td_shm_dict(&d, src));
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_F32, 1, shape, NULL));
	td_test_send_fd(sv[0], shm_fd(&t, &off));
	cr_assert_eq(write(sv[0], &off, sizeof(off)), (ssize_t)sizeof(off));
	shm_fd(leaf(d, "f64"), &off);
	cr_assert_eq(write(sv[0], &off, sizeof(off)), (ssize_t)sizeof(off));
	td_test_send_fd(sv[0], shm_fd(leaf(d, "f64"), NULL));
	wait_ok(pid);
	close(sv[0]);
	assert_all(&t, 2.5);
	assert_all(leaf(d, "f64"), -1.0);
	cr_assert_eq(td_test_element(leaf(d, "u8"), 1), 1.0);
	td_tensor_release(&t);
	td_dict_free(d);
	td_dict_free(src);
}
