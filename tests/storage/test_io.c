/* SPDX-License-Identifier: MIT */
/*
 * test_io.c - the shared write path (storage/io.c): spans, zeros and
 * tensors queued and written with pwritev, the bytes that land in the
 * file, how the pieces are batched, strided sources gathered through the
 * staging buffer (also when larger than it), and write failures (a full
 * device, a file size limit cutting a write short, a bad descriptor).
 * Linked against a static copy of the library.
 */
#include "td_test.h"
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(io, .init = td_test_tmpdir_init, .fini = td_test_tmpdir_fini, .timeout = 30);

static int create(const char *name)
{
	int fd = open(td_test_path(name), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);

	cr_assert(fd >= 0, "open %s: %s", name, strerror(errno));
	return fd;
}

/* The file's bytes (heap, caller frees); its size in *len. */
static unsigned char *slurp(int fd, size_t *len)
{
	struct stat sb;
	unsigned char *p;

	cr_assert_eq(fstat(fd, &sb), 0);
	*len = (size_t)sb.st_size;
	p = malloc(*len ? *len : 1);
	cr_assert_not_null(p);
	cr_assert_eq(pread(fd, p, *len, 0), (ssize_t)*len);
	return p;
}

Test(io, spans_and_zeros_land_at_their_offsets)
{
	static const char a[] = "header", b[] = "tail";
	int fd = create("f");
	td__writer w;
	unsigned char *p;
	size_t len, i;

	td_cr_assert_ok(td__writer_init(&w, fd, 0, "f"));
	td_cr_assert_ok(td__writer_put(&w, a, 6));
	td_cr_assert_ok(td__writer_zero_to(&w, 100000)); /* more than one zero block */
	td_cr_assert_ok(td__writer_put(&w, b, 4));
	td_cr_assert_ok(td__writer_zero(&w, 10));
	cr_assert_eq(w.pos, 100014);
	td_cr_assert_ok(td__writer_flush(&w));
	cr_assert_eq(w.calls, 1, "one pwritev for the whole run, not %llu",
		(unsigned long long)w.calls);
	/* A jump leaves a hole; writing continues at the new offset. */
	td_cr_assert_ok(td__writer_seek(&w, 200000));
	td_cr_assert_ok(td__writer_put(&w, b, 4));
	td_cr_assert_ok(td__writer_flush(&w));
	td__writer_free(&w);
	td__writer_free(&w); /* twice is harmless */

	p = slurp(fd, &len);
	cr_assert_eq(len, 200004);
	cr_assert(memcmp(p, "header", 6) == 0);
	for (i = 6; i < 100000; i++)
		cr_assert_eq(p[i], 0, "byte %zu", i);
	cr_assert(memcmp(p + 100000, "tail", 4) == 0);
	for (i = 100004; i < 200000; i++)
		cr_assert_eq(p[i], 0, "byte %zu", i);
	cr_assert(memcmp(p + 200000, "tail", 4) == 0);
	free(p);
	close(fd);
}

Test(io, adjacent_memory_is_one_piece_and_long_runs_take_few_calls)
{
	enum { N = 3000 };
	static unsigned char src[N * 3];
	int fd = create("f");
	td__writer w;
	unsigned char *p;
	size_t len, i;

	for (i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)(i * 7 + 1);
	td_cr_assert_ok(td__writer_init(&w, fd, 0, "f"));
	/* Pieces that continue each other in memory merge into one iovec. */
	for (i = 0; i < N; i++)
		td_cr_assert_ok(td__writer_put(&w, src + 3 * i, 3));
	cr_assert_eq(w.n, 1);
	/* Separate pieces: one pwritev per TD_IO_IOV_MAX of them. */
	for (i = 0; i < N; i++) {
		td_cr_assert_ok(td__writer_put(&w, src + 3 * i, 2));
		td_cr_assert_ok(td__writer_zero(&w, 1));
	}
	td_cr_assert_ok(td__writer_flush(&w));
	cr_assert_eq(w.calls, (1 + 2 * N + TD_IO_IOV_MAX - 1) / TD_IO_IOV_MAX);
	td__writer_free(&w);
	p = slurp(fd, &len);
	cr_assert_eq(len, 2 * sizeof(src));
	cr_assert(memcmp(p, src, sizeof(src)) == 0);
	for (i = 0; i < N; i++) {
		cr_assert_eq(p[sizeof(src) + 3 * i], src[3 * i]);
		cr_assert_eq(p[sizeof(src) + 3 * i + 1], src[3 * i + 1]);
		cr_assert_eq(p[sizeof(src) + 3 * i + 2], 0);
	}
	free(p);
	close(fd);
}

/* Write `t` alone into a new file and check the file holds its elements in C order. */
static void assert_tensor_written(const td_tensor *t, const char *name)
{
	int fd = create(name);
	size_t nbytes = td_tensor_nbytes(t), len;
	td_tensor c;
	td__writer w;
	unsigned char *p;

	td_cr_assert_ok(td__writer_init(&w, fd, 0, name));
	td_cr_assert_ok(td__writer_put_tensor(&w, t));
	td_cr_assert_ok(td__writer_flush(&w));
	td__writer_free(&w);
	td_cr_assert_ok(td_tensor_contiguous(&c, t));
	p = slurp(fd, &len);
	cr_assert_eq(len, nbytes, "%s: %zu bytes, expected %zu", name, len, nbytes);
	cr_assert(memcmp(p, td_tensor_data(&c), nbytes) == 0, "%s: bytes differ", name);
	free(p);
	td_tensor_release(&c);
	close(fd);
}

Test(io, strided_and_expanded_tensors_are_gathered_in_c_order)
{
	static const int64_t s34[] = { 3, 4 }, s1[] = { 5 }, e[] = { 6, 5 };
	td_tensor a, t, x, one;

	td_test_arange(&a, TD_DTYPE_F64, 2, s34);
	td_cr_assert_ok(td_tensor_transpose(&t, &a, 0, 1));
	cr_assert_not(td_tensor_is_contiguous(&t));
	assert_tensor_written(&t, "transposed");
	td_test_arange(&one, TD_DTYPE_I16, 1, s1);
	td_cr_assert_ok(td_tensor_expand(&x, &one, 2, e));
	assert_tensor_written(&x, "expanded");
	assert_tensor_written(&a, "contiguous");
	td_tensor_release(&x);
	td_tensor_release(&one);
	td_tensor_release(&t);
	td_tensor_release(&a);
}

Test(io, strided_tensors_larger_than_the_stage_are_gathered_in_slices)
{
	/* 3 rows of 400,000 float32: each row (1.6 MB, stride 3) is larger than the stage. */
	static const int64_t s[] = { 400000, 3 }, s2[] = { 700, 3, 300 };
	td_tensor a, t, b, u;

	cr_assert_lt(TD_IO_STAGE_BYTES, (size_t)1600000);
	td_test_arange(&a, TD_DTYPE_F32, 2, s);
	td_cr_assert_ok(td_tensor_transpose(&t, &a, 0, 1));
	assert_tensor_written(&t, "rows");
	/* Many rows, each smaller than the stage: several rows per slice. */
	td_test_arange(&b, TD_DTYPE_F64, 3, s2);
	td_cr_assert_ok(td_tensor_transpose(&u, &b, 1, 2));
	cr_assert_gt(td_tensor_nbytes(&u), TD_IO_STAGE_BYTES);
	assert_tensor_written(&u, "slices");
	td_tensor_release(&u);
	td_tensor_release(&b);
	td_tensor_release(&t);
	td_tensor_release(&a);
}

Test(io, small_strided_tensors_share_the_stage)
{
	static const int64_t s[] = { 5, 3 };
	int fd = create("f");
	td_tensor a[20], t[20], c;
	td__writer w;
	unsigned char *p;
	size_t len, i;

	td_cr_assert_ok(td__writer_init(&w, fd, 0, "f"));
	for (i = 0; i < 20; i++) {
		td_test_arange(&a[i], i % 2 ? TD_DTYPE_U8 : TD_DTYPE_F32, 2, s);
		td_cr_assert_ok(td_tensor_transpose(&t[i], &a[i], 0, 1));
		td_cr_assert_ok(td__writer_put_tensor(&w, &t[i]));
	}
	td_cr_assert_ok(td__writer_flush(&w));
	cr_assert_eq(w.calls, 1);
	td__writer_free(&w);
	p = slurp(fd, &len);
	len = 0;
	for (i = 0; i < 20; i++) {
		td_cr_assert_ok(td_tensor_contiguous(&c, &t[i]));
		cr_assert(memcmp(p + len, td_tensor_data(&c), td_tensor_nbytes(&c)) == 0, "tensor %zu", i);
		len += td_tensor_nbytes(&c);
		td_tensor_release(&c);
		td_tensor_release(&t[i]);
		td_tensor_release(&a[i]);
	}
	free(p);
	close(fd);
}

Test(io, a_full_device_fails_the_flush_with_enospc)
{
	static const char data[4096];
	int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	td__writer w;

	if (fd < 0)
		cr_skip_test("no /dev/full");
	td_cr_assert_ok(td__writer_init(&w, fd, 0, "full"));
	td_cr_assert_ok(td__writer_put(&w, data, sizeof(data)));
	td_cr_assert_err(td__writer_flush(&w), TD_ENOSPC);
	cr_assert(strstr(td_error_last()->message, "full") != NULL, "%s", td_error_last()->message);
	cr_assert_eq(w.n, 0, "the queue is dropped after a failure");
	td_cr_assert_err(td__pwrite_all(fd, data, sizeof(data), 0, "full"), TD_ENOSPC);
	td__writer_free(&w);
	close(fd);
}

Test(io, a_write_cut_short_by_a_size_limit_keeps_its_first_bytes_and_fails)
{
	static unsigned char src[20000];
	struct rlimit rl = { 10000, 10000 };
	int fd = create("f");
	td__writer w;
	unsigned char *p;
	size_t len, i;
	int rc;

	for (i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)(i % 251 + 1);
	td_cr_assert_ok(td__writer_init(&w, fd, 0, "f"));
	for (i = 0; i < 4; i++)
		td_cr_assert_ok(td__writer_put(&w, src + i * 5000, 4999));
	/* The first pwritev is cut at the limit; resuming inside a piece then fails. */
	signal(SIGXFSZ, SIG_IGN);
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	td_error_clear();
	rc = td__writer_flush(&w);
	cr_assert_lt(rc, 0);
	cr_assert_geq(w.calls, 2, "a short write is resumed before failing");
	td__writer_free(&w);
	p = slurp(fd, &len);
	cr_assert_eq(len, 10000);
	cr_assert(memcmp(p, src, 4999) == 0);
	cr_assert(memcmp(p + 4999, src + 5000, 4999) == 0);
	cr_assert_eq(p[9998], src[10000]);
	free(p);
	close(fd);
}

Test(io, bad_descriptors_and_backward_offsets_are_errors)
{
	static const char data[16];
	td__writer w;
	int rc;

	td_cr_assert_ok(td__writer_init(&w, -1, 0, "nothing"));
	td_cr_assert_ok(td__writer_put(&w, data, sizeof(data)));
	td_error_clear();
	rc = td__writer_flush(&w);
	cr_assert_lt(rc, 0);
	cr_assert_eq(td_error_last()->sys_errno, EBADF);
	/* Zeros up to an offset behind the writer: a caller's bug, refused. */
	td__writer_reset(&w, -1, 100, "nothing");
	td_cr_assert_err(td__writer_zero_to(&w, 50), TD_EINVAL);
	/* Nothing queued: a flush has nothing to write, even to a bad descriptor. */
	td_cr_assert_ok(td__writer_flush(&w));
	td__writer_free(&w);
}

/* A strided source (made before the sweep) queued into a new writer: the stage is allocated. */
static int init_body(void *ctx)
{
	const td_tensor *t = ctx;
	td__writer w;
	int rc = td__writer_init(&w, -1, 0, "x");

	if (rc == TD_OK)
		rc = td__writer_put_tensor(&w, t);
	td__writer_free(&w);
	return rc;
}

static void init_cleanup(void *ctx)
{
	(void)ctx;
}

Test(io, out_of_memory_fails_cleanly)
{
	static const int64_t s[] = { 3, 4 };
	td_tensor a, t;

	td_test_arange(&a, TD_DTYPE_I32, 2, s);
	td_cr_assert_ok(td_tensor_transpose(&t, &a, 0, 1));
	td_test_enomem_sweep(init_body, init_cleanup, &t);
	td_tensor_release(&t);
	td_tensor_release(&a);
}
