/* SPDX-License-Identifier: MIT */
/*
 * test_shm_arena.c - the shared-memory arena behind small anonymous shared
 * tensors: blocks of shared chunks, reuse after release, zeroing, chunk
 * unmapping and trimming, the size limit and its tuning (API and
 * environment), exported blocks, descriptor passing, fork in both
 * directions, and threads. Criterion runs each test in a fresh process, so
 * each starts with an untouched arena.
 */
#include "td_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void init(void)
{
	/* The arena reads the variable at its first use: the default, here. */
	unsetenv("TDSTORE_SHM_ARENA_MAX");
}

TestSuite(shm_arena, .init = init, .timeout = 60);

/* 240 bytes, as MemoryMappedTensor.empty((3, 4, 5)): a 256-byte block. */
static const int64_t s345[] = { 3, 4, 5 };
/* 8 KiB: a chunk holds 32 of them. */
static const int64_t s1024[] = { 1024 };
#define BLOCKS_8K 32

static td_shm_arena_stats stats(void)
{
	td_shm_arena_stats st = { .version = TD_SHM_ARENA_STATS_VERSION };

	td_cr_assert_ok(td_shm_arena_stat(&st));
	return st;
}

static uint64_t offset_of(const td_tensor *t, int *fd_out)
{
	uint64_t off = UINT64_MAX;
	int fd = -1;

	td_cr_assert_ok(td_shm_tensor_fd(&fd, &off, t));
	cr_assert_geq(fd, 0);
	if (fd_out)
		*fd_out = fd;
	return off;
}

/* Every element of `t` equals `value` (raw reads for contiguous f32 and u8). */
static bool all_equal(const td_tensor *t, double value)
{
	int64_t i, n = td_tensor_numel(t);
	bool raw = td_tensor_is_contiguous(t);

	if (raw && t->dtype == TD_DTYPE_F32) {
		const float *f = td_tensor_data(t);

		for (i = 0; i < n; i++)
			if (f[i] != (float)value)
				return false;
		return true;
	}
	if (raw && t->dtype == TD_DTYPE_U8) {
		const uint8_t *b = td_tensor_data(t);

		for (i = 0; i < n; i++)
			if (b[i] != (uint8_t)value)
				return false;
		return true;
	}
	for (i = 0; i < n; i++)
		if (td_test_element(t, i) != value)
			return false;
	return true;
}

static void wait_ok(pid_t pid)
{
	int status;

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
}

/* ---- blocks, reuse, zeroing ---- */

Test(shm_arena, small_tensors_are_aligned_blocks_of_one_chunk)
{
	td_tensor t[3];
	uint64_t off[3];
	int fd[3], i;
	td_shm_arena_stats st;

	td_cr_assert_ok(td_mmap_tensor_empty(&t[0], NULL, TD_DTYPE_F32, 3, s345, NULL));
	td_cr_assert_ok(td_mmap_tensor_zeros(&t[1], NULL, TD_DTYPE_F32, 3, s345, NULL));
	td_cr_assert_ok(
		td_mmap_tensor_full(&t[2], NULL, TD_DTYPE_F32, 3, s345, td_scalar_float(2), NULL));
	for (i = 0; i < 3; i++) {
		cr_assert_eq(td_buffer_memory(t[i].buffer), TD_MEMORY_SHM);
		cr_assert_eq(td_buffer_size(t[i].buffer), 240);
		cr_assert_eq((uintptr_t)td_tensor_data(&t[i]) % 64, 0);
		off[i] = offset_of(&t[i], &fd[i]);
		cr_assert_eq(off[i] % 64, 0, "offset %llu", (unsigned long long)off[i]);
		cr_assert_eq(fd[i], fd[0], "tensor %d is in another memfd", i);
		cr_assert(fcntl(fd[i], F_GETFD) & FD_CLOEXEC);
	}
	cr_assert(off[0] != off[1] && off[1] != off[2] && off[0] != off[2]);
	for (i = 0; i < 3; i++)
		td_cr_assert_ok(td_tensor_fill(&t[i], td_scalar_int(10 + i)));
	for (i = 0; i < 3; i++)
		cr_assert(all_equal(&t[i], 10 + i), "tensor %d was overwritten", i);
	st = stats();
	cr_assert_eq(st.max_bytes, TD_SHM_ARENA_MAX_DEFAULT);
	cr_assert_eq(st.chunks, 1);
	cr_assert_eq(st.blocks, 3);
	cr_assert_eq(st.cached_chunks, 0);
	cr_assert_geq(st.chunk_bytes, 3 * 256);
	for (i = 0; i < 3; i++)
		td_tensor_release(&t[i]);
	st = stats();
	cr_assert_eq(st.blocks, 0);
	cr_assert_eq(st.chunks, 1, "the empty chunk is kept for the next tensor");
	cr_assert_eq(st.cached_chunks, 1);
}

Test(shm_arena, a_released_block_is_reused_and_zeros_clears_it)
{
	td_tensor t, src;
	void *p;

	td_cr_assert_ok(td_mmap_tensor_empty(&t, NULL, TD_DTYPE_F32, 3, s345, NULL));
	td_cr_assert_ok(td_tensor_fill(&t, td_scalar_float(7)));
	p = td_tensor_data(&t);
	td_tensor_release(&t);
	/* The same block comes back, holding 7s until zeroed. */
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_F32, 3, s345, NULL));
	cr_assert_eq(td_tensor_data(&t), p, "the released block was not reused");
	cr_assert(all_equal(&t, 0.0), "zeros() left an earlier tensor's bytes");
	td_cr_assert_ok(td_tensor_fill(&t, td_scalar_float(7)));
	td_tensor_release(&t);
	td_cr_assert_ok(
		td_mmap_tensor_full(&t, NULL, TD_DTYPE_F32, 3, s345, td_scalar_float(-3), NULL));
	cr_assert_eq(td_tensor_data(&t), p);
	cr_assert(all_equal(&t, -3.0));
	td_tensor_release(&t);
	td_test_arange(&src, TD_DTYPE_F32, 3, s345);
	td_cr_assert_ok(td_mmap_tensor_from_tensor(&t, NULL, &src, NULL));
	cr_assert_eq(td_tensor_data(&t), p);
	cr_assert_eq(td_tensor_equal(&t, &src), 1);
	td_tensor_release(&t);
	td_tensor_release(&src);
	cr_assert_eq(stats().blocks, 0);
}

Test(shm_arena, the_last_release_unmaps_all_but_one_empty_chunk_and_trim_unmaps_it)
{
	td_tensor t[BLOCKS_8K + 8];
	td_shm_arena_stats st;
	int i, fd;

	for (i = 0; i < BLOCKS_8K + 8; i++)
		td_cr_assert_ok(td_mmap_tensor_zeros(&t[i], NULL, TD_DTYPE_F64, 1, s1024, NULL));
	st = stats();
	cr_assert_eq(st.chunks, 2);
	cr_assert_eq(st.blocks, BLOCKS_8K + 8);
	cr_assert_eq(st.chunk_bytes, 2 * BLOCKS_8K * 8192);
	td_cr_assert_ok(td_shm_tensor_fd(&fd, NULL, &t[0]));
	for (i = 0; i < BLOCKS_8K + 8; i++)
		td_tensor_release(&t[i]);
	st = stats();
	cr_assert_eq(st.blocks, 0);
	cr_assert_eq(st.chunks, 1, "one empty chunk is kept, the other unmapped");
	cr_assert_eq(st.cached_chunks, 1);
	td_shm_arena_trim();
	st = stats();
	cr_assert_eq(st.chunks, 0);
	cr_assert_eq(st.cached_chunks, 0);
	cr_assert_eq(st.chunk_bytes, 0);
	cr_assert_eq(fcntl(fd, F_GETFD), -1, "the chunks' memfds are closed");
	/* The arena still works after a trim. */
	td_cr_assert_ok(td_mmap_tensor_zeros(&t[0], NULL, TD_DTYPE_F64, 1, s1024, NULL));
	cr_assert_eq(stats().chunks, 1);
	td_tensor_release(&t[0]);
}

Test(shm_arena, a_view_keeps_the_block_after_the_tensor_goes)
{
	td_tensor t, v;

	td_cr_assert_ok(td_mmap_tensor_full(&t, NULL, TD_DTYPE_I32, 3, s345, td_scalar_int(4), NULL));
	td_cr_assert_ok(td_tensor_narrow(&v, &t, 2, 1, 3));
	td_tensor_release(&t);
	td_shm_arena_trim();
	cr_assert_eq(stats().blocks, 1);
	cr_assert(all_equal(&v, 4.0));
	td_tensor_release(&v);
	cr_assert_eq(stats().blocks, 0);
}

/* ---- size limit and tuning ---- */

Test(shm_arena, tensors_above_the_maximum_get_a_memfd_of_their_own)
{
	const int64_t at_max[] = { (int64_t)TD_SHM_ARENA_MAX_DEFAULT };
	const int64_t above[] = { (int64_t)TD_SHM_ARENA_MAX_DEFAULT + 1 };
	td_tensor small, big, edge;
	td_shm_arena_stats st;
	int fd_small, fd_big;

	td_cr_assert_ok(td_mmap_tensor_zeros(&small, NULL, TD_DTYPE_F32, 3, s345, NULL));
	td_cr_assert_ok(td_mmap_tensor_zeros(&big, NULL, TD_DTYPE_U8, 1, above, NULL));
	offset_of(&small, &fd_small);
	cr_assert_eq(offset_of(&big, &fd_big), 0);
	cr_assert_neq(fd_big, fd_small);
	cr_assert_eq(td_buffer_memory(big.buffer), TD_MEMORY_SHM);
	cr_assert_eq(td_buffer_size(big.buffer), TD_SHM_ARENA_MAX_DEFAULT + 1);
	cr_assert(all_equal(&big, 0.0));
	st = stats();
	cr_assert_eq(st.blocks, 1);
	cr_assert_eq(st.chunks, 1);
	td_cr_assert_ok(td_mmap_tensor_zeros(&edge, NULL, TD_DTYPE_U8, 1, at_max, NULL));
	cr_assert_eq(stats().blocks, 2, "a tensor of exactly max_bytes comes from the arena");
	td_tensor_release(&edge);
	td_tensor_release(&big);
	td_tensor_release(&small);
}

Test(shm_arena, set_max_tunes_and_turns_off_the_arena)
{
	const int64_t limit[] = { (int64_t)TD_SHM_ARENA_MAX_LIMIT };
	td_shm_arena_stats st = { .version = 0 };
	td_tensor t;

	td_cr_assert_err(td_shm_arena_stat(NULL), TD_EINVAL);
	td_cr_assert_err(td_shm_arena_stat(&st), TD_EINVAL);
	td_cr_assert_ok(td_shm_arena_set_max(0));
	cr_assert_eq(stats().max_bytes, 0);
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_F32, 3, s345, NULL));
	cr_assert_eq(offset_of(&t, NULL), 0);
	st = stats();
	cr_assert_eq(st.blocks, 0);
	cr_assert_eq(st.chunks, 0);
	td_tensor_release(&t);

	td_cr_assert_err(td_shm_arena_set_max(TD_SHM_ARENA_MAX_LIMIT + 1), TD_EINVAL);
	cr_assert_eq(stats().max_bytes, 0, "a refused value changes nothing");
	td_cr_assert_ok(td_shm_arena_set_max(TD_SHM_ARENA_MAX_LIMIT));
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_U8, 1, limit, NULL));
	st = stats();
	cr_assert_eq(st.blocks, 1);
	cr_assert_geq(st.chunk_bytes, TD_SHM_ARENA_MAX_LIMIT);
	cr_assert(all_equal(&t, 0.0));
	td_tensor_release(&t);
	/* Lowering the maximum leaves the cached chunk until a trim. */
	td_cr_assert_ok(td_shm_arena_set_max(64));
	cr_assert_eq(stats().chunks, 1);
	td_shm_arena_trim();
	cr_assert_eq(stats().chunks, 0);
}

/* In a child that has not used the arena: the maximum set by `value`. */
static size_t env_max_in_child(const char *value)
{
	int fds[2];
	size_t got = 0;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		td_shm_arena_stats st = { .version = TD_SHM_ARENA_STATS_VERSION };

		setenv("TDSTORE_SHM_ARENA_MAX", value, 1);
		if (td_shm_arena_stat(&st) < 0 ||
			write(fds[1], &st.max_bytes, sizeof(st.max_bytes)) != sizeof(st.max_bytes))
			_exit(1);
		_exit(0);
	}
	wait_ok(pid);
	cr_assert_eq(read(fds[0], &got, sizeof(got)), (ssize_t)sizeof(got));
	close(fds[0]);
	close(fds[1]);
	return got;
}

Test(shm_arena, the_environment_sets_the_initial_maximum)
{
	cr_assert_eq(env_max_in_child("100"), 100);
	cr_assert_eq(env_max_in_child("0"), 0);
	cr_assert_eq(env_max_in_child("1048576"), TD_SHM_ARENA_MAX_LIMIT);
	cr_assert_eq(env_max_in_child("99999999999999999999999"), TD_SHM_ARENA_MAX_LIMIT);
	cr_assert_eq(env_max_in_child("12k"), TD_SHM_ARENA_MAX_DEFAULT);
	cr_assert_eq(env_max_in_child("-5"), TD_SHM_ARENA_MAX_DEFAULT);
	cr_assert_eq(env_max_in_child(""), TD_SHM_ARENA_MAX_DEFAULT);
}

Test(shm_arena, an_allocation_failure_gives_the_block_back)
{
	td_tensor t;

	td_test_poison(&t);
	td_test_alloc_install(0);
	td_cr_assert_err(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_F32, 3, s345, NULL), TD_ENOMEM);
	td_test_alloc_uninstall();
	td_test_assert_poisoned(&t);
	cr_assert_eq(stats().blocks, 0);
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_F32, 3, s345, NULL));
	cr_assert_eq(stats().blocks, 1);
	td_tensor_release(&t);
}

/* ---- sharing with other processes ---- */

Test(shm_arena, exported_blocks_are_never_handed_out_again)
{
	td_tensor t[BLOCKS_8K], u;
	void *p;
	int i;

	td_cr_assert_ok(td_mmap_tensor_zeros(&t[0], NULL, TD_DTYPE_F32, 3, s345, NULL));
	p = td_tensor_data(&t[0]);
	offset_of(&t[0], NULL);
	td_tensor_release(&t[0]);
	td_cr_assert_ok(td_mmap_tensor_zeros(&u, NULL, TD_DTYPE_F32, 3, s345, NULL));
	cr_assert_neq(td_tensor_data(&u), p);
	td_tensor_release(&u);

	/* A chunk left with nothing but exported blocks is unmapped, not cached. */
	for (i = 0; i < BLOCKS_8K; i++) {
		td_cr_assert_ok(td_mmap_tensor_zeros(&t[i], NULL, TD_DTYPE_F64, 1, s1024, NULL));
		offset_of(&t[i], NULL);
	}
	cr_assert_eq(stats().chunks, 2);
	for (i = 0; i < BLOCKS_8K; i++)
		td_tensor_release(&t[i]);
	cr_assert_eq(stats().chunks, 1);
}

Test(shm_arena, a_receiver_maps_the_block_at_the_given_offset)
{
	static const int64_t one[] = { 1 };
	td_tensor before, t, u;
	td_shm_arena_stats st;
	uint64_t off;
	int fd;

	td_cr_assert_ok(td_mmap_tensor_zeros(&before, NULL, TD_DTYPE_F32, 3, s345, NULL));
	td_cr_assert_ok(td_mmap_tensor_zeros(&t, NULL, TD_DTYPE_F32, 3, s345, NULL));
	off = offset_of(&t, &fd);
	cr_assert_gt(off, 0);
	td_cr_assert_ok(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_F32, 3, s345, off, td_test_mmap_rw()));
	td_cr_assert_ok(td_tensor_fill(&u, td_scalar_float(9.5)));
	cr_assert(all_equal(&t, 9.5));
	cr_assert(all_equal(&before, 0.0));
	td_tensor_release(&u);
	/* The memfd is the chunk: it ends at the chunk's end. */
	st = stats();
	cr_assert_eq(st.chunks, 1);
	td_cr_assert_ok(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_F32, 1, one, st.chunk_bytes - 4, NULL));
	td_tensor_release(&u);
	td_cr_assert_err(td_shm_tensor_from_fd(&u, fd, TD_DTYPE_F32, 1, one, st.chunk_bytes, NULL),
		TD_ECORRUPT);
	td_tensor_release(&t);
	td_tensor_release(&before);
}

/* Child side: map the received block and write into it. */
static int child_map_and_write(int sock)
{
	uint64_t off;
	td_tensor t;
	int fd = td_test_recv_fd(sock), ok;

	if (fd < 0 || read(sock, &off, sizeof(off)) != (ssize_t)sizeof(off))
		return 1;
	if (td_shm_tensor_from_fd(&t, fd, TD_DTYPE_F32, 3, s345, off, td_test_mmap_rw()) < 0)
		return 1;
	close(fd);
	ok = all_equal(&t, 1.0) && td_tensor_fill(&t, td_scalar_float(-8)) == 0;
	td_tensor_release(&t);
	return ok ? 0 : 1;
}

Test(shm_arena, a_descriptor_passed_over_a_socket_shares_the_block)
{
	td_tensor before, t;
	uint64_t off;
	int sv[2], fd;
	pid_t pid;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		_exit(child_map_and_write(sv[1]));
	}
	close(sv[1]);
	td_cr_assert_ok(
		td_mmap_tensor_full(&before, NULL, TD_DTYPE_F32, 3, s345, td_scalar_float(3), NULL));
	td_cr_assert_ok(td_mmap_tensor_full(&t, NULL, TD_DTYPE_F32, 3, s345, td_scalar_float(1), NULL));
	off = offset_of(&t, &fd);
	td_test_send_fd(sv[0], fd);
	cr_assert_eq(write(sv[0], &off, sizeof(off)), (ssize_t)sizeof(off));
	wait_ok(pid);
	close(sv[0]);
	cr_assert(all_equal(&t, -8.0));
	cr_assert(all_equal(&before, 3.0), "the receiver wrote outside its tensor");
	td_tensor_release(&t);
	td_tensor_release(&before);
}

/* One byte through a pipe; false when the other side is gone. */
static bool put_byte(int fd)
{
	char c = 'x';

	return write(fd, &c, 1) == 1;
}

static bool get_byte(int fd)
{
	char c;

	return read(fd, &c, 1) == 1;
}

/*
 * Child side of the fork test. `t`, `x` and `y` were made before the
 * fork; the parent has meanwhile released its `t` and made a new tensor.
 */
static int fork_child(td_tensor *t, td_tensor *x, td_tensor *y, int from_parent, int to_parent)
{
	td_tensor u;
	int ok;

	if (!get_byte(from_parent))
		return 2;
	/* The parent's new tensor did not land in t's block. */
	ok = all_equal(t, 1.0) && all_equal(x, 5.0);
	ok = ok && td_tensor_fill(y, td_scalar_float(6)) == 0;
	/* Neither x's released block nor any other of the parent's is reused. */
	td_tensor_release(x);
	ok = ok && td_mmap_tensor_full(&u, NULL, TD_DTYPE_F32, 3, s345, td_scalar_float(4), NULL) == 0;
	/* Wait for the parent's checks (or its end) before releasing. */
	if (put_byte(to_parent))
		get_byte(from_parent);
	td_tensor_release(&u);
	td_tensor_release(t);
	td_tensor_release(y);
	return ok ? 0 : 1;
}

Test(shm_arena, after_fork_neither_process_reuses_a_shared_block)
{
	int p2c[2], c2p[2];
	td_tensor t, x, y, w;
	pid_t pid;

	cr_assert_eq(pipe(p2c), 0);
	cr_assert_eq(pipe(c2p), 0);
	td_cr_assert_ok(td_mmap_tensor_full(&t, NULL, TD_DTYPE_F32, 3, s345, td_scalar_float(1), NULL));
	td_cr_assert_ok(td_mmap_tensor_full(&x, NULL, TD_DTYPE_F32, 3, s345, td_scalar_float(5), NULL));
	td_cr_assert_ok(td_mmap_tensor_zeros(&y, NULL, TD_DTYPE_F32, 3, s345, NULL));
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* Only the ends it uses: a parent that fails gives it EOF. */
		close(p2c[1]);
		close(c2p[0]);
		_exit(fork_child(&t, &x, &y, p2c[0], c2p[1]));
	}
	close(p2c[0]);
	close(c2p[1]);
	/* t's block is free here now, but the child still uses it. */
	td_tensor_release(&t);
	td_cr_assert_ok(td_mmap_tensor_full(&w, NULL, TD_DTYPE_F32, 3, s345, td_scalar_float(2), NULL));
	cr_assert(put_byte(p2c[1]));
	cr_assert(get_byte(c2p[0]), "the child ended early");
	cr_assert(all_equal(&y, 6.0), "the child's write is not shared");
	cr_assert(all_equal(&x, 5.0), "the child reused the parent's block");
	cr_assert(all_equal(&w, 2.0), "the child's tensor landed in the parent's");
	close(p2c[1]);
	close(c2p[0]);
	wait_ok(pid);
	td_tensor_release(&x);
	td_tensor_release(&y);
	td_tensor_release(&w);
	/* Chunks from before the fork went with their last tensor. */
	td_shm_arena_trim();
	cr_assert_eq(stats().chunks, 0);
}

/* ---- threads ---- */

#define THREADS 4
#define ROUNDS 600
#define SLOTS 8

static void *thread_body(void *arg)
{
	/* Blocks of 64 bytes to 16 KiB, and one size above the arena's maximum. */
	static const int64_t sizes[][1] = { { 4 }, { 60 }, { 250 }, { 1300 }, { 4000 }, { 16 }, { 100 },
		{ 16400 } };
	uintptr_t id = (uintptr_t)arg;
	td_tensor slot[SLOTS];
	bool used[SLOTS] = { false };
	double value[SLOTS];
	uint64_t rng = id + 1;
	int r, i, bad = 0;

	for (r = 0; r < ROUNDS; r++) {
		i = (int)(td_test_rand(&rng) % SLOTS);
		if (used[i]) {
			bad |= !all_equal(&slot[i], value[i]);
			td_tensor_release(&slot[i]);
		}
		value[i] = (double)(id * 100000 + (uintptr_t)r);
		used[i] = td_mmap_tensor_full(&slot[i], NULL, TD_DTYPE_F32, 1,
					  sizes[td_test_rand(&rng) % 8], td_scalar_float(value[i]), NULL) == 0;
		bad |= !used[i];
	}
	for (i = 0; i < SLOTS; i++) {
		if (used[i]) {
			bad |= !all_equal(&slot[i], value[i]);
			td_tensor_release(&slot[i]);
		}
	}
	return (void *)(uintptr_t)bad;
}

Test(shm_arena, threads_make_and_release_tensors_without_overlap)
{
	pthread_t th[THREADS];
	void *bad;
	uintptr_t i;

	for (i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, thread_body, (void *)i), 0);
	for (i = 0; i < THREADS; i++) {
		cr_assert_eq(pthread_join(th[i], &bad), 0);
		cr_assert_null(bad, "thread %u saw another thread's bytes", (unsigned)i);
	}
	cr_assert_eq(stats().blocks, 0);
}

/* ---- dicts ---- */

Test(shm_arena, a_small_shm_dict_takes_one_block)
{
	static const int64_t b[] = { 3 };
	td_dict *src, *d;
	td_tensor t;
	const td_tensor *a, *c;
	uint64_t oa, oc;
	int fa, fc;

	td_cr_assert_ok(td_dict_new(&src, 1, b));
	td_test_arange(&t, TD_DTYPE_F32, 1, b);
	td_cr_assert_ok(td_dict_set_tensor_take(src, "a", &t));
	td_test_arange(&t, TD_DTYPE_I64, 1, b);
	td_cr_assert_ok(td_dict_set_tensor_take(src, "c", &t));
	td_cr_assert_ok(td_shm_dict(&d, src));
	cr_assert_eq(stats().blocks, 1);
	td_cr_assert_ok(td_dict_get_tensor(&a, d, "a"));
	td_cr_assert_ok(td_dict_get_tensor(&c, d, "c"));
	oa = offset_of(a, &fa);
	oc = offset_of(c, &fc);
	cr_assert_eq(fa, fc);
	cr_assert_eq(oc, oa + 64);
	cr_assert_eq(td_dict_equal(d, src), 1);
	td_dict_free(d);
	td_dict_free(src);
	cr_assert_eq(stats().blocks, 0);
}
