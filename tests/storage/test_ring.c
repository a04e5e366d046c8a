/* SPDX-License-Identifier: MIT */
/*
 * test_ring.c - ring buffers: create and reopen, extend / add / sample /
 * read / clear, wrapping, uniform sampling, errors, the ring file as
 * untrusted input (and its layout as doc/format.md gives it), rows left by
 * a crashed writer, prioritized sampling, and, across processes,
 * generators and handles inherited through fork(), stress tests (4
 * writers, 2 samplers checking every row they sample or read, on a plain
 * and a prioritized ring) and a kill test (writers SIGKILLed at random
 * points). Under valgrind (TD_VALGRIND set by check-valgrind.sh) the
 * process tests do less work.
 */
#include "td_test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TestSuite(ring, .init = td_test_tmpdir_init, .fini = td_test_tmpdir_fini, .timeout = 240);

/* Layout facts from doc/format.md section 5, checked against the files. */
#define RING_WRITERS_OFFSET 4096
#define RING_SEQ_OFFSET (4096 + 256 * 64)

static bool under_valgrind(void)
{
	return getenv("TD_VALGRIND") != NULL;
}

/* ---- rows that check themselves ----
 * Every leaf of row `id` derives from id: obs[j] and next.obs[j] encode
 * (id, j), action = id, reward = id, and "sum" is a checksum of the rest. */

#define OBS 64

static td_dict *row_template(void)
{
	static const int64_t obs[1] = { OBS };
	td_dict *row, *next;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&row, 0, NULL));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, obs));
	td_cr_assert_ok(td_dict_set_tensor_take(row, "obs", &t));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I64, 0, NULL));
	td_cr_assert_ok(td_dict_set_tensor_take(row, "action", &t));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 0, NULL));
	td_cr_assert_ok(td_dict_set_tensor_take(row, "reward", &t));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_BOOL, 0, NULL));
	td_cr_assert_ok(td_dict_set_tensor_take(row, "done", &t));
	td_cr_assert_ok(td_dict_new(&next, 0, NULL));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, obs));
	td_cr_assert_ok(td_dict_set_tensor_take(next, "obs", &t));
	td_cr_assert_ok(td_dict_set_dict_take(row, "next", next));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_U64, 0, NULL));
	td_cr_assert_ok(td_dict_set_tensor_take(row, "sum", &t));
	return row;
}

typedef struct rowptrs {
	float *obs, *next_obs, *reward;
	int64_t *action;
	bool *done;
	uint64_t *sum;
} rowptrs;

static void *leaf(const td_dict *d, const char *key)
{
	const td_tensor *t;
	int rc = td_dict_get_tensor(&t, d, key);

	return rc == 0 ? td_tensor_data(t) : NULL;
}

static rowptrs ptrs_of(const td_dict *d)
{
	rowptrs p;

	p.obs = leaf(d, "obs");
	p.next_obs = leaf(d, "next.obs");
	p.reward = leaf(d, "reward");
	p.action = leaf(d, "action");
	p.done = leaf(d, "done");
	p.sum = leaf(d, "sum");
	return p;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t row_sum(const rowptrs *p, int64_t i)
{
	uint64_t h = 1469598103934665603ull;
	uint32_t bits;
	int j;

	for (j = 0; j < OBS; j++) {
		memcpy(&bits, &p->obs[i * OBS + j], 4);
		h = mix(h, bits);
		memcpy(&bits, &p->next_obs[i * OBS + j], 4);
		h = mix(h, bits);
	}
	memcpy(&bits, &p->reward[i], 4);
	h = mix(h, bits);
	h = mix(h, (uint64_t)p->action[i]);
	return mix(h, p->done[i]);
}

/* Row i of the dict holds row `id`. */
static void fill_row(const rowptrs *p, int64_t i, int64_t id)
{
	int j;

	for (j = 0; j < OBS; j++) {
		p->obs[i * OBS + j] = (float)((id * 64 + j) & 0xFFFFFF);
		p->next_obs[i * OBS + j] = (float)((id * 64 + j + 1) & 0xFFFFFF);
	}
	p->action[i] = id;
	p->reward[i] = (float)(id & 0xFFFFFF);
	p->done[i] = (id % 7) == 0;
	p->sum[i] = row_sum(p, i);
}

/* Whether row i is row `action[i]` in every leaf, with a matching checksum. */
static bool row_ok(const rowptrs *p, int64_t i)
{
	int64_t id = p->action[i];
	int j;

	if (p->reward[i] != (float)(id & 0xFFFFFF) || p->done[i] != ((id % 7) == 0))
		return false;
	for (j = 0; j < OBS; j++)
		if (p->obs[i * OBS + j] != (float)((id * 64 + j) & 0xFFFFFF) ||
			p->next_obs[i * OBS + j] != (float)((id * 64 + j + 1) & 0xFFFFFF))
			return false;
	return p->sum[i] == row_sum(p, i);
}

static td_ring *new_ring(const char *name, int64_t cap, bool prioritized)
{
	td_dict *row = row_template();
	td_ring *r;

	td_cr_assert_ok(
		td_ring_create(&r, td_test_path(name), row, cap, td_test_ring_create(prioritized)));
	td_dict_free(row);
	return r;
}

/* Extend with rows first_id .. first_id + n - 1. @return rows stored. */
static int64_t put_rows(td_ring *r, int64_t first_id, int64_t n, uint64_t *first_ticket)
{
	td_dict *b;
	rowptrs p;
	int64_t i, got;

	td_cr_assert_ok(td_ring_batch_new(&b, r, n));
	p = ptrs_of(b);
	for (i = 0; i < n; i++)
		fill_row(&p, i, first_id + i);
	got = td_ring_extend(first_ticket, r, b);
	td_cr_assert_ok((int)(got < 0 ? got : 0));
	td_dict_free(b);
	return got;
}

/* ---- basics ---- */

Test(ring, create_writes_a_store_python_can_load_and_a_ring_file)
{
	td_ring *r = new_ring("r", 10, false);
	const td_tensor *t;
	td_ring_stats st;

	cr_assert(td_test_exists(td_test_path("r/meta.json")));
	cr_assert(td_test_exists(td_test_path("r/next/meta.json")));
	cr_assert(td_test_exists(td_test_path("r/.tdstore-ring")));
	cr_assert_eq(td_test_file_size(td_test_path("r/obs.memmap")), 10 * OBS * 4);
	td_cr_assert_ok(td_dict_get_tensor(&t, td_store_dict(td_ring_store(r)), "next.obs"));
	cr_assert_eq(t->ndim, 2);
	cr_assert_eq(td_tensor_shape(t)[0], 10);
	cr_assert_eq(td_ring_capacity(r), 10);
	cr_assert_eq(td_ring_len(r), 0);
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert_eq(st.capacity, 10);
	cr_assert_eq(st.head, 0);
	cr_assert_eq(st.published, 0);
	cr_assert_eq(st.writers, 1);
	cr_assert(!st.prioritized);
	/* The file is the size doc/format.md gives: 20480 + 8 * 10, rounded to 4096. */
	cr_assert_eq(td_test_file_size(td_test_path("r/.tdstore-ring")), 24576);
	td_ring_close(r);
	/* A plain store open sees the full capacity (as Python does). */
	{
		td_store *s;

		td_cr_assert_ok(td_store_open(&s, td_test_path("r"), NULL));
		td_cr_assert_ok(td_dict_get_tensor(&t, td_store_dict(s), "obs"));
		cr_assert_eq(td_tensor_shape(t)[0], 10);
		cr_assert_eq(td_tensor_shape(t)[1], OBS);
		td_store_close(s);
	}
}

Test(ring, extend_then_sample_and_read_return_whole_rows)
{
	td_ring *r = new_ring("r", 16, false);
	td_dict *out;
	rowptrs p;
	int64_t idx[64], i;
	uint64_t first = 99, pos = 0, tickets[8];

	cr_assert_eq(put_rows(r, 100, 5, &first), 5);
	cr_assert_eq(first, 0);
	cr_assert_eq(td_ring_len(r), 5);
	td_cr_assert_ok(td_ring_batch_new(&out, r, 64));
	p = ptrs_of(out);
	td_ring_seed(r, 42);
	td_cr_assert_ok(td_ring_sample(out, idx, r, 0));
	for (i = 0; i < 64; i++) {
		cr_assert(idx[i] >= 0 && idx[i] < 5, "slot %lld", (long long)idx[i]);
		cr_assert(row_ok(&p, i));
		cr_assert_eq(p.action[i], 100 + idx[i]);
	}
	td_dict_free(out);
	/* Read in ticket order, 3 then 2 then none. */
	td_cr_assert_ok(td_ring_batch_new(&out, r, 3));
	p = ptrs_of(out);
	cr_assert_eq(td_ring_read(out, tickets, &pos, r, pos), 3);
	cr_assert_eq(pos, 3);
	for (i = 0; i < 3; i++) {
		cr_assert_eq(tickets[i], (uint64_t)i);
		cr_assert_eq(p.action[i], 100 + i);
		cr_assert(row_ok(&p, i));
	}
	cr_assert_eq(td_ring_read(out, NULL, &pos, r, pos), 2);
	cr_assert_eq(p.action[1], 104);
	cr_assert_eq(td_ring_read(out, NULL, &pos, r, pos), 0);
	td_dict_free(out);
	td_ring_close(r);
}

Test(ring, read_hands_the_next_ticket_back_through_next_out)
{
	td_ring *r = new_ring("r", 8, false);
	td_dict *out, *bad;
	uint64_t pos = 1, next = 99, tickets[2] = { 77, 77 };
	int64_t got, total = 0;
	rowptrs p;

	put_rows(r, 0, 5, NULL);
	td_cr_assert_ok(td_ring_batch_new(&out, r, 2));
	p = ptrs_of(out);
	/* A separate next_out: pos is the caller's, and stays as it was. */
	cr_assert_eq(td_ring_read(out, tickets, &next, r, pos), 2);
	cr_assert_eq(pos, 1);
	cr_assert_eq(next, 3);
	cr_assert_eq(tickets[0], 1);
	cr_assert_eq(tickets[1], 2);
	cr_assert_eq(p.action[0], 1);
	/* No next_out: the rows are read all the same. */
	cr_assert_eq(td_ring_read(out, tickets, NULL, r, next), 2);
	cr_assert_eq(tickets[0], 3);
	cr_assert_eq(tickets[1], 4);
	cr_assert_eq(next, 3);
	/* next_out pointing at pos: the usual loop visits every row once. */
	pos = 0;
	while ((got = td_ring_read(out, NULL, &pos, r, pos)) > 0)
		total += got;
	cr_assert_eq(got, 0);
	cr_assert_eq(total, 5);
	cr_assert_eq(pos, 5);
	/* A pos below the oldest ticket present is raised to it (the ring wrapped). */
	put_rows(r, 5, 10, NULL);
	cr_assert_eq(td_ring_read(out, tickets, &next, r, 0), 2);
	cr_assert_eq(tickets[0], 7);
	cr_assert_eq(next, 9);
	/* Past the cursor: nothing read, and next is pos. */
	cr_assert_eq(td_ring_read(out, NULL, &next, r, 100), 0);
	cr_assert_eq(next, 100);
	/* On failure next_out is not written. */
	next = 42;
	td_cr_assert_err(td_ring_read(NULL, NULL, &next, r, 0), TD_EINVAL);
	td_cr_assert_err(td_ring_read(out, NULL, &next, NULL, 0), TD_EINVAL);
	td_cr_assert_ok(td_dict_new(&bad, 0, NULL));
	td_cr_assert_err(td_ring_read(bad, NULL, &next, r, 0), TD_EINVAL);
	cr_assert_eq(next, 42);
	td_dict_free(bad);
	td_dict_free(out);
	td_ring_close(r);
}

Test(ring, sampling_without_replacement_draws_distinct_rows)
{
	td_ring *r = new_ring("r", 16, false);
	td_dict *out;
	int64_t idx[6], i, j;

	put_rows(r, 0, 6, NULL);
	td_cr_assert_ok(td_ring_batch_new(&out, r, 6));
	for (int round = 0; round < 20; round++) {
		td_cr_assert_ok(td_ring_sample(out, idx, r, TD_RING_NO_REPLACEMENT));
		for (i = 0; i < 6; i++)
			for (j = 0; j < i; j++)
				cr_assert_neq(idx[i], idx[j]);
	}
	td_dict_free(out);
	td_cr_assert_ok(td_ring_batch_new(&out, r, 7));
	td_cr_assert_err(td_ring_sample(out, NULL, r, TD_RING_NO_REPLACEMENT), TD_ENOTFOUND);
	td_dict_free(out);
	td_ring_close(r);
}

Test(ring, the_same_seed_draws_the_same_rows)
{
	td_ring *r = new_ring("r", 32, false);
	td_dict *out;
	int64_t a[16], b[16];

	put_rows(r, 0, 32, NULL);
	td_cr_assert_ok(td_ring_batch_new(&out, r, 16));
	td_ring_seed(r, 7);
	td_cr_assert_ok(td_ring_sample(out, a, r, 0));
	td_ring_seed(r, 7);
	td_cr_assert_ok(td_ring_sample(out, b, r, 0));
	cr_assert_arr_eq(a, b, sizeof(a));
	td_ring_seed(r, 8);
	td_cr_assert_ok(td_ring_sample(out, b, r, 0));
	cr_assert(memcmp(a, b, sizeof(a)) != 0);
	td_dict_free(out);
	td_ring_close(r);
}

/* Pearson's chi-square of `counts` against equal expectations over k bins. */
static double chi_square(const int64_t *counts, int k, int64_t total)
{
	double e = (double)total / k, x = 0;
	int i;

	for (i = 0; i < k; i++)
		x += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
	return x;
}

/*
 * 16 published slots (the ring has wrapped: tickets 24..39), drawn with
 * and without replacement; then one slot left WRITING by a dead writer,
 * which is never drawn while the 15 others stay uniform. Seeded, so the
 * figures are fixed; the bound, 45 for 15 degrees of freedom, is far
 * above chance (p < 0.0001), far below a bias of a few percent per slot.
 */
static void crash_after_claim(const char *dir, uint64_t capacity);

Test(ring, sampling_is_uniform_over_the_published_rows)
{
	enum { CAP = 16, CALLS = 1000 };
	td_ring *r = new_ring("r", CAP, false);
	int64_t idx[CAP], counts[CAP], total, i, c;
	td_dict *out, *half;
	rowptrs p;

	put_rows(r, 0, 40, NULL); /* the last 16 stored */
	td_cr_assert_ok(td_ring_batch_new(&out, r, CAP));
	td_cr_assert_ok(td_ring_batch_new(&half, r, CAP / 2));
	td_ring_seed(r, 2024);
	/* With replacement: 16000 draws. */
	memset(counts, 0, sizeof(counts));
	p = ptrs_of(out);
	for (c = 0; c < CALLS; c++) {
		td_cr_assert_ok(td_ring_sample(out, idx, r, 0));
		for (i = 0; i < CAP; i++) {
			counts[idx[i]]++;
			cr_assert_eq(p.action[i], 24 + (idx[i] + 8) % CAP, "slot %lld holds ticket %lld",
				(long long)idx[i], (long long)p.action[i]);
		}
	}
	cr_assert(chi_square(counts, CAP, (int64_t)CALLS * CAP) < 45, "with replacement: %g",
		chi_square(counts, CAP, (int64_t)CALLS * CAP));
	/* Without replacement, 8 distinct of 16 per call: each slot in half the calls. */
	memset(counts, 0, sizeof(counts));
	for (c = 0; c < 2 * CALLS; c++) {
		td_cr_assert_ok(td_ring_sample(half, idx, r, TD_RING_NO_REPLACEMENT));
		for (i = 0; i < CAP / 2; i++)
			counts[idx[i]]++;
	}
	cr_assert(chi_square(counts, CAP, (int64_t)CALLS * CAP) < 45, "without replacement: %g",
		chi_square(counts, CAP, (int64_t)CALLS * CAP));
	/* A dead writer's slot (ticket 40, slot 8) is skipped; the 15 others stay uniform. */
	td_ring_close(r);
	crash_after_claim(td_test_path("r"), CAP);
	td_cr_assert_ok(td_ring_open(&r, td_test_path("r"), NULL));
	td_ring_seed(r, 99);
	memset(counts, 0, sizeof(counts));
	total = 0;
	for (c = 0; c < 2 * CALLS; c++) {
		bool distinct = c % 2 != 0;
		int64_t n = distinct ? CAP / 2 : CAP;

		td_cr_assert_ok(
			td_ring_sample(distinct ? half : out, idx, r, distinct ? TD_RING_NO_REPLACEMENT : 0));
		for (i = 0; i < n; i++, total++) {
			cr_assert_neq(idx[i], 8, "the unpublished slot was drawn");
			counts[idx[i] < 8 ? idx[i] : idx[i] - 1]++;
		}
	}
	cr_assert(chi_square(counts, CAP - 1, total) < 45, "around a dead writer's row: %g",
		chi_square(counts, CAP - 1, total));
	td_dict_free(half);
	td_dict_free(out);
	td_ring_close(r);
}

/* Indices drawn by processes, in a shared mapping. */
typedef struct draws {
	int64_t idx[4][32];
	_Atomic int writers_seen;
} draws;

static draws *draws_new(void)
{
	draws *d = mmap(NULL, sizeof(draws), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	cr_assert(d != MAP_FAILED);
	memset(d, 0, sizeof(*d));
	return d;
}

static void wait_ok(pid_t pid)
{
	int status;

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exited with %d",
		WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/*
 * In a child: 32 draws of one row each into d->idx[k], with `r` (the
 * parent's handle, copied by fork()) or, with `own`, a handle opened here
 * (the copy is closed first, unused); closed after.
 */
static int child_draws(td_ring *r, bool own, draws *d, int k, bool seed7)
{
	td_dict *b;
	int ok;

	if (own) {
		td_ring_close(r);
		if (td_ring_open(&r, td_test_path("r"), NULL) != 0)
			return 1;
	}
	if (seed7)
		td_ring_seed(r, 7);
	ok = td_ring_batch_new(&b, r, 32) == 0 && td_ring_sample(b, d->idx[k], r, 0) == 0;
	td_dict_free(b);
	td_ring_close(r);
	return ok ? 0 : 1;
}

Test(ring, every_process_draws_from_its_own_generator)
{
	td_ring *r = new_ring("r", 64, false);
	draws *d = draws_new();
	td_dict *b;
	int64_t mine[32];
	int k;
	pid_t pid;

	put_rows(r, 0, 64, NULL);
	/* Handles opened by two processes are seeded apart. */
	for (k = 0; k < 2; k++) {
		pid = fork();
		cr_assert(pid >= 0);
		if (pid == 0)
			_exit(child_draws(r, true, d, k, false));
		wait_ok(pid);
	}
	cr_assert(memcmp(d->idx[0], d->idx[1], sizeof(d->idx[0])) != 0);
	/* So are a handle and its copy in a child made by fork(): the child's copy
	 * is reseeded at its first call there... */
	for (k = 2; k < 4; k++) {
		pid = fork();
		cr_assert(pid >= 0);
		if (pid == 0)
			_exit(child_draws(r, false, d, k, false));
		wait_ok(pid);
	}
	td_cr_assert_ok(td_ring_batch_new(&b, r, 32));
	td_cr_assert_ok(td_ring_sample(b, mine, r, 0));
	cr_assert(memcmp(d->idx[2], d->idx[3], sizeof(d->idx[2])) != 0,
		"two children drew the same rows");
	cr_assert(memcmp(d->idx[2], mine, sizeof(mine)) != 0, "a child drew the parent's rows");
	/* ... unless seeded there: the same seed draws the same rows in any process. */
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0)
		_exit(child_draws(r, false, d, 0, true));
	wait_ok(pid);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0)
		_exit(child_draws(r, true, d, 1, true));
	wait_ok(pid);
	td_ring_seed(r, 7);
	td_cr_assert_ok(td_ring_sample(b, mine, r, 0));
	cr_assert_arr_eq(d->idx[0], mine, sizeof(mine));
	cr_assert_arr_eq(d->idx[1], mine, sizeof(mine));
	td_dict_free(b);
	munmap(d, sizeof(*d));
	td_ring_close(r);
}

Test(ring, a_handle_inherited_through_fork_writes_under_a_slot_of_its_own)
{
	td_ring *r = new_ring("r", 64, false);
	draws *d = draws_new();
	td_ring_stats st;
	td_dict *b;
	rowptrs p;
	uint64_t pos = 0;
	int64_t i;
	pid_t pid;

	put_rows(r, 0, 4, NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		td_ring_stats cst;
		uint64_t first = 0;
		int ok = put_rows(r, 100, 4, &first) == 4 && first == 4 && td_ring_stat(&cst, r) == 0;

		d->writers_seen = (int)cst.writers;
		/* Closing the copy frees the child's slot, never the parent's. */
		td_ring_close(r);
		_exit(ok ? 0 : 1);
	}
	wait_ok(pid);
	cr_assert_eq(d->writers_seen, 2, "the child writes under a slot of its own");
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert_eq(st.writers, 1, "the parent's slot is still registered");
	cr_assert_eq(st.head, 8);
	cr_assert_eq(st.published, 8);
	cr_assert_eq(put_rows(r, 8, 4, NULL), 4);
	td_cr_assert_ok(td_ring_batch_new(&b, r, 16));
	p = ptrs_of(b);
	cr_assert_eq(td_ring_read(b, NULL, &pos, r, pos), 12);
	for (i = 0; i < 12; i++) {
		cr_assert(row_ok(&p, i));
		cr_assert_eq(p.action[i], i >= 4 && i < 8 ? 96 + i : i);
	}
	td_dict_free(b);
	munmap(d, sizeof(*d));
	td_ring_close(r);
}

/* The descriptor of this process's (only) handle on the ring file `path`. */
static int handle_fd_of(const char *path)
{
	char link[64], target[4096];
	int fd, found = -1;

	for (fd = 0; fd < 1024; fd++) {
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strcmp(target, path) == 0) {
			cr_assert_eq(found, -1, "two descriptors on %s", path);
			found = fd;
		}
	}
	cr_assert(found >= 0, "no descriptor on %s", path);
	return found;
}

/*
 * The sum-tree's lock is an flock, which belongs to an open file
 * description: a child's copy of the handle must not share the parent's,
 * or both would hold the lock at once. Here the parent holds it through its
 * handle's descriptor; the child's update must wait until it is released.
 */
Test(ring, a_handle_inherited_through_fork_takes_the_tree_lock_apart)
{
	td_ring *r = new_ring("r", 8, true);
	struct timespec wait = { 0, 200 * 1000 * 1000 };
	char path[4096];
	draws *d = draws_new();
	int fd;
	pid_t pid;

	put_rows(r, 0, 8, NULL);
	cr_assert(realpath(td_test_path("r/.tdstore-ring"), path) != NULL);
	fd = handle_fd_of(path);
	cr_assert_eq(flock(fd, LOCK_EX), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int ok = td_ring_update_priority(r, (int64_t[]){ 1 }, (double[]){ 5 }, 1) == 0;

		d->writers_seen = 1;
		td_ring_close(r);
		_exit(ok ? 0 : 1);
	}
	/* However long this takes, the child cannot have updated while the lock is held. */
	nanosleep(&wait, NULL);
	cr_assert_eq(d->writers_seen, 0, "the child took the tree lock the parent holds");
	cr_assert_eq(flock(fd, LOCK_UN), 0);
	wait_ok(pid);
	cr_assert_eq(d->writers_seen, 1);
	{
		td_dict *b;
		double prob[64];
		int64_t idx[64], i;

		td_cr_assert_ok(td_ring_batch_new(&b, r, 64));
		td_cr_assert_ok(td_ring_sample_prioritized(b, idx, prob, r));
		for (i = 0; i < 64; i++)
			cr_assert_float_eq(prob[i], idx[i] == 1 ? 5.0 / 12.0 : 1.0 / 12.0, 1e-12);
		td_dict_free(b);
	}
	munmap(d, sizeof(*d));
	td_ring_close(r);
}

Test(ring, wrapping_overwrites_the_oldest_rows)
{
	td_ring *r = new_ring("r", 8, false);
	td_dict *out;
	rowptrs p;
	uint64_t pos = 0, tickets[8];
	int64_t i, idx[100];

	cr_assert_eq(put_rows(r, 0, 13, NULL), 8, "only the last 8 of 13");
	cr_assert_eq(put_rows(r, 13, 7, NULL), 7);
	cr_assert_eq(td_ring_len(r), 8);
	td_cr_assert_ok(td_ring_batch_new(&out, r, 8));
	p = ptrs_of(out);
	cr_assert_eq(td_ring_read(out, tickets, &pos, r, pos), 8);
	for (i = 0; i < 8; i++) {
		cr_assert_eq(tickets[i], (uint64_t)(12 + i));
		cr_assert_eq(p.action[i], 12 + i);
		cr_assert(row_ok(&p, i));
	}
	td_dict_free(out);
	/* A range: 3 rows from ticket 15, across the slot wrap (slots 7, 0, 1). */
	td_cr_assert_ok(td_ring_batch_new(&out, r, 3));
	p = ptrs_of(out);
	pos = 15;
	cr_assert_eq(td_ring_read(out, tickets, &pos, r, pos), 3);
	cr_assert_eq(pos, 18);
	for (i = 0; i < 3; i++) {
		cr_assert_eq(tickets[i], (uint64_t)(15 + i));
		cr_assert_eq(p.action[i], 15 + i);
		cr_assert(row_ok(&p, i));
	}
	td_dict_free(out);
	/* Slot s holds ticket 12..19 with s = t % 8, in the store's own rows. */
	cr_assert_eq(((int64_t *)leaf(td_store_dict(td_ring_store(r)), "action"))[3], 19);
	cr_assert_eq(((int64_t *)leaf(td_store_dict(td_ring_store(r)), "action"))[4], 12);
	/* More rows than the capacity: the last 8 are stored. */
	cr_assert_eq(put_rows(r, 1000, 20, NULL), 8);
	td_cr_assert_ok(td_ring_batch_new(&out, r, 100));
	p = ptrs_of(out);
	td_cr_assert_ok(td_ring_sample(out, idx, r, 0));
	for (i = 0; i < 100; i++) {
		cr_assert(p.action[i] >= 1012 && p.action[i] < 1020);
		cr_assert(row_ok(&p, i));
	}
	td_dict_free(out);
	td_ring_close(r);
}

Test(ring, add_stores_one_row_and_strided_sources_are_gathered)
{
	static const int64_t two[2] = { 3, 2 * OBS };
	td_ring *r = new_ring("r", 4, false);
	td_dict *row, *b, *out;
	td_tensor wide, view;
	rowptrs p;
	uint64_t ticket = 9, pos = 0;
	td_index idx[2];
	int64_t i;

	/* One row: batch [] and leaves of the rows' shapes. */
	td_cr_assert_ok(td_ring_batch_new(&b, r, 1));
	p = ptrs_of(b);
	fill_row(&p, 0, 77);
	td_cr_assert_ok(td_dict_index(&row, b, (td_index[]){ td_index_int(0) }, 1));
	cr_assert_eq(td_ring_add(&ticket, r, row), 1);
	cr_assert_eq(ticket, 0);
	td_dict_free(row);
	td_dict_free(b);
	/* Three rows whose obs is every other column of a wider tensor. */
	td_cr_assert_ok(td_ring_batch_new(&b, r, 3));
	p = ptrs_of(b);
	for (i = 0; i < 3; i++)
		fill_row(&p, i, 200 + i);
	td_cr_assert_ok(td_tensor_zeros(&wide, TD_DTYPE_F32, 2, two));
	for (i = 0; i < 3 * OBS; i++)
		((float *)td_tensor_data(&wide))[(i / OBS) * 2 * OBS + (i % OBS) * 2] = p.obs[i];
	idx[0] = td_index_slice(0, 3, 1);
	idx[1] = td_index_slice(0, 2 * OBS, 2);
	td_cr_assert_ok(td_tensor_index(&view, &wide, idx, 2));
	cr_assert(!td_tensor_is_contiguous(&view));
	td_cr_assert_ok(td_dict_set_tensor(b, "obs", &view));
	cr_assert_eq(td_ring_extend(NULL, r, b), 3);
	td_tensor_release(&view);
	td_tensor_release(&wide);
	td_dict_free(b);
	td_cr_assert_ok(td_ring_batch_new(&out, r, 4));
	p = ptrs_of(out);
	cr_assert_eq(td_ring_read(out, NULL, &pos, r, pos), 4);
	cr_assert_eq(p.action[0], 77);
	for (i = 0; i < 4; i++)
		cr_assert(row_ok(&p, i), "row %lld", (long long)i);
	td_dict_free(out);
	td_ring_close(r);
}

Test(ring, clear_empties_the_ring_and_writers_carry_on)
{
	td_ring *r = new_ring("r", 8, false);
	td_dict *out;
	rowptrs p;
	uint64_t pos = 0;
	int64_t i;

	put_rows(r, 0, 5, NULL);
	td_cr_assert_ok(td_ring_clear(r));
	cr_assert_eq(td_ring_len(r), 0);
	td_cr_assert_ok(td_ring_batch_new(&out, r, 4));
	td_cr_assert_err(td_ring_sample(out, NULL, r, 0), TD_ENOTFOUND);
	cr_assert_eq(td_ring_read(out, NULL, &pos, r, pos), 0);
	put_rows(r, 50, 2, NULL);
	cr_assert_eq(td_ring_len(r), 2);
	p = ptrs_of(out);
	td_cr_assert_ok(td_ring_sample(out, NULL, r, 0));
	for (i = 0; i < 4; i++)
		cr_assert(p.action[i] == 50 || p.action[i] == 51);
	td_dict_free(out);
	td_ring_close(r);
}

/*
 * Another process opens ring "r" read-write, adds rows first_id ..
 * first_id + n - 1, which must get tickets from `first_ticket` on (the
 * cursor carries on), and closes it.
 */
static void put_rows_in_child(int64_t first_id, int64_t n, uint64_t first_ticket)
{
	pid_t pid = fork();

	cr_assert(pid >= 0);
	if (pid == 0) {
		td_ring *c;
		uint64_t first = 0;
		int ok = td_ring_open(&c, td_test_path("r"), td_test_ring_rw()) == 0 &&
			put_rows(c, first_id, n, &first) == n && first == first_ticket;

		td_ring_close(c);
		_exit(ok ? 0 : 1);
	}
	wait_ok(pid);
}

Test(ring, a_ring_reopened_by_another_process_carries_on)
{
	td_ring *r = new_ring("r", 8, false);
	td_ring_stats st;
	td_dict *out;
	rowptrs p;
	uint64_t pos = 0;
	int64_t i;

	put_rows(r, 0, 3, NULL);
	/* Durable before the close, which does not sync (and cannot fail). */
	td_cr_assert_ok(td_ring_sync(r));
	td_ring_close(r);
	put_rows_in_child(3, 4, 3);
	td_cr_assert_ok(td_ring_open(&r, td_test_path("r"), NULL));
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert_eq(st.head, 7);
	cr_assert_eq(st.published, 7);
	cr_assert_eq(st.writers, 0, "closed writers free their slots");
	td_cr_assert_ok(td_ring_batch_new(&out, r, 8));
	p = ptrs_of(out);
	cr_assert_eq(td_ring_read(out, NULL, &pos, r, pos), 7);
	for (i = 0; i < 7; i++) {
		cr_assert_eq(p.action[i], i);
		cr_assert(row_ok(&p, i));
	}
	/* A read-only ring samples but does not write. */
	td_cr_assert_ok(td_ring_sample(out, NULL, r, 0));
	td_cr_assert_err(td_ring_extend(NULL, r, out), TD_EREADONLY);
	td_cr_assert_err(td_ring_clear(r), TD_EREADONLY);
	td_cr_assert_err(td_ring_reclaim(NULL, r), TD_EREADONLY);
	td_cr_assert_ok(td_ring_sync(r));
	td_dict_free(out);
	td_ring_close(r);
}

/* ---- errors ---- */

/* Write `text` to dir/name. */
static void put_text(const char *dir, const char *name, const char *text)
{
	char path[4400];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fputs(text, f) >= 0, 1);
	cr_assert_eq(fclose(f), 0);
}

Test(ring, lazy_stacks_are_refused_in_rows_and_in_ring_stores)
{
	static const char kid[] = "{\"shape\": [], \"device\": \"cpu\", "
							  "\"_type\": \"<class 'tensordict._td.TensorDict'>\"}";
	td_dict *row = row_template(), *kids[2], *lz;
	char dir[4400], path[4500], *meta;
	td_ring *r;
	FILE *f;
	long len;

	/* A row holding a lazy stack: its leaves are not one mapped tensor each. */
	td_cr_assert_ok(td_dict_new(&kids[0], 0, NULL));
	td_cr_assert_ok(td_dict_new(&kids[1], 0, NULL));
	td_cr_assert_ok(td_lazy_stack(&lz, kids, 2, 0, TD_LAZY_TAKE));
	{
		td_dict *bad;
		td_cr_assert_ok(td_dict_new(&bad, 1, (const int64_t[]){ 2 }));
		td_cr_assert_ok(td_dict_set_dict_take(bad, "lz", lz));
		td_cr_assert_ok(td_dict_new(&lz, 0, NULL));
		td_cr_assert_ok(td_dict_set_dict(lz, "in", bad));
		td_dict_free(bad);
	}
	td_cr_assert_err(td_ring_create(&r, td_test_path("x"), lz, 4, NULL), TD_EINVAL);
	td_dict_free(lz);
	/* A ring store whose meta.json gained a lazy stack: refused at open. */
	td_cr_assert_ok(td_ring_create(&r, td_test_path("lzr"), row, 2, td_test_ring_create(false)));
	td_ring_close(r);
	snprintf(dir, sizeof(dir), "%s", td_test_path("lzr"));
	snprintf(path, sizeof(path), "%s/meta.json", dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	cr_assert_gt(len, 1);
	rewind(f);
	{
		static const char pre[] = "{\"lz\": {\"type\": \"LazyStackedTensorDict\"}, ";
		char *buf = calloc(1, (size_t)len + 1);

		cr_assert_not_null(buf);
		cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
		cr_assert_eq(buf[0], '{');
		meta = calloc(1, sizeof(pre) + (size_t)len);
		cr_assert_not_null(meta);
		strcpy(meta, pre);
		strcat(meta, buf + 1); /* the original entries after its '{' */
		free(buf);
	}
	fclose(f);
	put_text(dir, "meta.json", meta);
	free(meta);
	snprintf(path, sizeof(path), "%s/lz", dir);
	cr_assert_eq(mkdir(path, 0777), 0);
	put_text(dir, "lz/meta.json",
		"{\"_type\": \"<class 'tensordict._lazy."
		"LazyStackedTensorDict'>\", \"stack_dim\": 0}");
	snprintf(path, sizeof(path), "%s/lz/0", dir);
	cr_assert_eq(mkdir(path, 0777), 0);
	snprintf(path, sizeof(path), "%s/lz/1", dir);
	cr_assert_eq(mkdir(path, 0777), 0);
	put_text(dir, "lz/0/meta.json", kid);
	put_text(dir, "lz/1/meta.json", kid);
	td_cr_assert_err(td_ring_open(&r, dir, NULL), TD_ECORRUPT);
	cr_assert(strstr(td_error_last()->message, "lazy") != NULL, "%s", td_error_last()->message);
	td_dict_free(row);
}

/* The rows of ring `r` may be extended (1) or not (TD_EREADONLY), as its open asked. */
static int64_t try_extend(td_ring *r)
{
	td_dict *b;
	int64_t got;

	td_cr_assert_ok(td_ring_batch_new(&b, r, 1));
	got = td_ring_extend(NULL, r, b);
	td_dict_free(b);
	return got;
}

Test(ring, options_choose_priorities_sync_and_writability)
{
	td_ring_create_opts co = TD_RING_CREATE_OPTS_INIT;
	td_ring_open_opts oo = TD_RING_OPEN_OPTS_INIT;
	td_dict *row = row_template();
	td_ring_stats st;
	td_ring *r;

	/* The defaults: no priorities, every file synced. */
	cr_assert_eq(co.version, TD_RING_CREATE_OPTS_VERSION);
	cr_assert(!co.prioritized);
	cr_assert_eq(co.sync, TD_SYNC_FULL);
	cr_assert_eq(oo.version, TD_RING_OPEN_OPTS_VERSION);
	cr_assert(!oo.writable);
	/* NULL options are the defaults; a created ring is open read-write. */
	td_cr_assert_ok(td_ring_create(&r, td_test_path("a"), row, 4, NULL));
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert(!st.prioritized);
	cr_assert_eq(try_extend(r), 1);
	td_ring_close(r);
	/* Every field: a prioritized ring, created without syncs. */
	co.prioritized = true;
	co.sync = TD_SYNC_NONE;
	td_cr_assert_ok(td_ring_create(&r, td_test_path("b"), row, 4, &co));
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert(st.prioritized);
	cr_assert_eq(try_extend(r), 1);
	td_ring_close(r);
	/* Opening: NULL and the initializer are read-only, `writable` a writer. */
	td_cr_assert_ok(td_ring_open(&r, td_test_path("b"), NULL));
	td_cr_assert_err((int)try_extend(r), TD_EREADONLY);
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert(st.prioritized);
	cr_assert_eq(st.head, 1);
	td_ring_close(r);
	td_cr_assert_ok(td_ring_open(&r, td_test_path("b"), &oo));
	td_cr_assert_err((int)try_extend(r), TD_EREADONLY);
	td_ring_close(r);
	oo.writable = true;
	td_cr_assert_ok(td_ring_open(&r, td_test_path("b"), &oo));
	cr_assert_eq(try_extend(r), 1);
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert_eq(st.writers, 1);
	td_ring_close(r);
	/* An unknown version or sync mode: TD_EINVAL, and nothing made. */
	co.version = TD_RING_CREATE_OPTS_VERSION + 1;
	td_cr_assert_err(td_ring_create(&r, td_test_path("c"), row, 4, &co), TD_EINVAL);
	cr_assert_null(r);
	cr_assert(strstr(td_error_last()->message, "version") != NULL);
	co.version = 0;
	td_cr_assert_err(td_ring_create(&r, td_test_path("c"), row, 4, &co), TD_EINVAL);
	co.version = TD_RING_CREATE_OPTS_VERSION;
	co.sync = (td_sync_mode)7;
	td_cr_assert_err(td_ring_create(&r, td_test_path("c"), row, 4, &co), TD_EINVAL);
	cr_assert_null(r);
	cr_assert(!td_test_exists(td_test_path("c")));
	oo.version = 0;
	td_cr_assert_err(td_ring_open(&r, td_test_path("b"), &oo), TD_EINVAL);
	cr_assert_null(r);
	cr_assert(strstr(td_error_last()->message, "version") != NULL);
	td_dict_free(row);
}

Test(ring, bad_arguments_are_refused)
{
	td_dict *row = row_template(), *bad, *out;
	td_ring *r, *r2;
	td_tensor t;
	static const int64_t b2[1] = { 2 };

	td_cr_assert_err(td_ring_create(NULL, "x", row, 4, NULL), TD_EINVAL);
	td_cr_assert_err(td_ring_create(&r, NULL, row, 4, NULL), TD_EINVAL);
	cr_assert_null(r);
	td_cr_assert_err(td_ring_create(&r, td_test_path("x"), NULL, 4, NULL), TD_EINVAL);
	td_cr_assert_err(td_ring_create(&r, td_test_path("x"), row, 0, NULL), TD_EINVAL);
	td_cr_assert_err(td_ring_create(&r, td_test_path("x"), row, 4,
						 &(td_ring_create_opts){ 0, false, TD_SYNC_FULL }),
		TD_EINVAL);
	td_cr_assert_ok(td_dict_new(&bad, 1, b2));
	td_cr_assert_err(td_ring_create(&r, td_test_path("x"), bad, 4, NULL), TD_EINVAL);
	td_dict_free(bad);
	td_cr_assert_ok(td_dict_new(&bad, 0, NULL));
	td_cr_assert_err(td_ring_create(&r, td_test_path("x"), bad, 4, NULL), TD_EINVAL);
	td_cr_assert_ok(td_dict_set_string(bad, "s", "text"));
	td_cr_assert_err(td_ring_create(&r, td_test_path("x"), bad, 4, NULL), TD_EINVAL);
	td_dict_free(bad);
	td_cr_assert_ok(td_dict_new(&bad, 0, NULL));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, (int64_t[]){ 0 }));
	td_cr_assert_ok(td_dict_set_tensor_take(bad, "empty", &t));
	td_cr_assert_err(td_ring_create(&r, td_test_path("x"), bad, 4, NULL), TD_EINVAL);
	td_dict_free(bad);
	td_cr_assert_err(td_ring_open(&r, td_test_path("nothing"), NULL), TD_ENOTFOUND);
	td_cr_assert_err(td_ring_open(&r, td_test_path("x"), &(td_ring_open_opts){ 2, true }),
		TD_EINVAL);
	td_cr_assert_err(td_ring_open(NULL, td_test_path("x"), NULL), TD_EINVAL);

	td_cr_assert_ok(td_ring_create(&r, td_test_path("r"), row, 4, td_test_ring_create(false)));
	td_cr_assert_err(td_ring_create(&r2, td_test_path("r"), row, 4, NULL), TD_EEXISTS);
	cr_assert_null(r2);
	td_ring_close(r);
	td_cr_assert_ok(td_ring_open(&r, td_test_path("r"), td_test_ring_rw()));
	/* A wrong dtype, a wrong row shape, a missing leaf, no batch dim. */
	td_cr_assert_ok(td_ring_batch_new(&bad, r, 2));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F64, 1, b2));
	td_cr_assert_ok(td_dict_set_tensor_take(bad, "reward", &t));
	td_cr_assert_err(td_ring_extend(NULL, r, bad), TD_ETYPE);
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 2, (int64_t[]){ 2, 3 }));
	td_cr_assert_ok(td_dict_set_tensor_take(bad, "reward", &t));
	td_cr_assert_err(td_ring_extend(NULL, r, bad), TD_ETYPE);
	td_cr_assert_ok(td_dict_del(bad, "reward"));
	td_cr_assert_err(td_ring_extend(NULL, r, bad), TD_ENOTFOUND);
	td_dict_free(bad);
	td_cr_assert_ok(td_dict_new(&bad, 0, NULL));
	td_cr_assert_err(td_ring_extend(NULL, r, bad), TD_EINVAL);
	td_cr_assert_err(td_ring_extend(NULL, NULL, bad), TD_EINVAL);
	td_cr_assert_err(td_ring_add(NULL, r, NULL), TD_EINVAL);
	td_dict_free(bad);
	td_cr_assert_ok(td_ring_batch_new(&out, r, 2));
	td_cr_assert_err(td_ring_add(NULL, r, out), TD_EINVAL);
	td_cr_assert_err(td_ring_sample(out, NULL, r, 0), TD_ENOTFOUND);
	td_cr_assert_err(td_ring_sample(out, NULL, r, 0x8), TD_EINVAL);
	td_cr_assert_err(td_ring_sample(out, NULL, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_ring_read(NULL, NULL, NULL, r, 0), TD_EINVAL);
	td_cr_assert_err(td_ring_read(out, NULL, NULL, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_ring_batch_new(&bad, r, -1), TD_EINVAL);
	td_cr_assert_err(td_ring_stat(NULL, r), TD_EINVAL);
	td_cr_assert_err(td_ring_sample_prioritized(out, NULL, NULL, r), TD_ENOTSUP);
	td_cr_assert_err(td_ring_update_priority(r, (int64_t[]){ 0 }, (double[]){ 1 }, 1), TD_ENOTSUP);
	put_rows(r, 0, 2, NULL);
	/* A destination that is not contiguous is refused. */
	{
		td_tensor wide, view;
		td_index ix[2] = { td_index_slice(0, 2, 1), td_index_slice(0, 2 * OBS, 2) };

		td_cr_assert_ok(td_tensor_zeros(&wide, TD_DTYPE_F32, 2, (int64_t[]){ 2, 2 * OBS }));
		td_cr_assert_ok(td_tensor_index(&view, &wide, ix, 2));
		td_cr_assert_ok(td_dict_set_tensor(out, "obs", &view));
		td_cr_assert_err(td_ring_sample(out, NULL, r, 0), TD_ETYPE);
		td_tensor_release(&view);
		td_tensor_release(&wide);
	}
	td_dict_free(out);
	cr_assert_eq(td_ring_len(NULL), 0);
	cr_assert_eq(td_ring_capacity(NULL), 0);
	cr_assert_null(td_ring_store(NULL));
	td_ring_close(NULL);
	td_ring_close(r);
	td_dict_free(row);
}

/* ---- the ring file as untrusted input ---- */

static void poke(const char *path, off_t off, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY);

	cr_assert(fd >= 0);
	cr_assert_eq(pwrite(fd, data, len, off), (ssize_t)len);
	close(fd);
}

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_TRUNC);
	ssize_t n;

	cr_assert(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		cr_assert_eq(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

Test(ring, a_damaged_ring_file_is_refused_never_trusted)
{
	td_ring *r = new_ring("r", 8, true);
	char path[4096];
	unsigned char hdr[128], b;
	uint32_t v;
	int i, fd, rc;

	td_ring_close(r);
	snprintf(path, sizeof(path), "%s", td_test_path("r/.tdstore-ring"));
	fd = open(path, O_RDONLY);
	cr_assert_eq(pread(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	close(fd);
	cr_assert_eq(memcmp(hdr, "TDSRING\0", 8), 0);
	/* Any changed header byte fails (checksum, magic, version). */
	for (i = 0; i < 128; i++) {
		b = hdr[i] ^ 0x5a;
		poke(path, i, &b, 1);
		td_error_clear();
		rc = td_ring_open(&r, td_test_path("r"), td_test_ring_rw());
		cr_assert(rc == TD_ECORRUPT || (i >= 8 && i < 12 && rc == TD_EVERSION), "byte %d: %d", i,
			rc);
		cr_assert_null(r);
		poke(path, i, &hdr[i], 1);
	}
	v = 2;
	poke(path, 8, &v, 4);
	td_cr_assert_err(td_ring_open(&r, td_test_path("r"), NULL), TD_EVERSION);
	poke(path, 8, &hdr[8], 4);
	/* Too short. */
	cr_assert_eq(truncate(path, 8192), 0);
	td_cr_assert_err(td_ring_open(&r, td_test_path("r"), NULL), TD_ECORRUPT);
	cr_assert_eq(truncate(path, 10), 0);
	td_cr_assert_err(td_ring_open(&r, td_test_path("r"), NULL), TD_ECORRUPT);
	/* A ring file of another ring with other leaves does not fit this store. */
	{
		td_dict *row;
		td_tensor t;
		td_ring *other;

		td_cr_assert_ok(td_dict_new(&row, 0, NULL));
		td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, (int64_t[]){ 3 }));
		td_cr_assert_ok(td_dict_set_tensor_take(row, "x", &t));
		td_cr_assert_ok(
			td_ring_create(&other, td_test_path("o"), row, 8, td_test_ring_create(true)));
		td_ring_close(other);
		td_dict_free(row);
		copy_file(td_test_path("o/.tdstore-ring"), path);
		td_cr_assert_err(td_ring_open(&r, td_test_path("r"), NULL), TD_ECORRUPT);
	}
	/* A symbolic link is not followed. */
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(symlink(td_test_path("o/.tdstore-ring"), path), 0);
	td_cr_assert_err(td_ring_open(&r, td_test_path("r"), NULL), TD_ECORRUPT);
	/* A store without a ring file is not a ring. */
	cr_assert_eq(unlink(path), 0);
	td_cr_assert_err(td_ring_open(&r, td_test_path("r"), NULL), TD_ENOTFOUND);
}

Test(ring, garbage_in_the_live_words_never_crashes_a_reader)
{
	td_ring *r = new_ring("r", 8, true);
	td_dict *out;
	uint64_t junk[8], pos = 0, seed = 99;
	int64_t got;
	int i, round;

	put_rows(r, 0, 8, NULL);
	td_cr_assert_ok(td_ring_batch_new(&out, r, 4));
	for (round = 0; round < 50; round++) {
		for (i = 0; i < 8; i++)
			junk[i] = td_test_rand(&seed);
		/* cursor, cleared, the sequence words, the sum-tree */
		poke(td_test_path("r/.tdstore-ring"), 128, &junk[0], 8);
		poke(td_test_path("r/.tdstore-ring"), 192, &junk[1], 8);
		poke(td_test_path("r/.tdstore-ring"), RING_SEQ_OFFSET + (round % 8) * 8, &junk[2], 8);
		poke(td_test_path("r/.tdstore-ring"), RING_SEQ_OFFSET + 64 + (round % 16) * 8, &junk[3], 8);
		got = td_ring_sample(out, NULL, r, 0);
		cr_assert(got == 0 || got == TD_ENOTFOUND);
		got = td_ring_sample_prioritized(out, NULL, NULL, r);
		cr_assert(got == 0 || got == TD_ENOTFOUND);
		pos = junk[4] % 64;
		got = td_ring_read(out, NULL, &pos, r, pos);
		cr_assert(got >= 0 && got <= 4);
	}
	td_dict_free(out);
	td_ring_close(r);
}

/* ---- a writer that died while writing ---- */

/*
 * A child reserves a ticket and marks its slot WRITING through the layout
 * of doc/format.md (writer slot, cursor, sequence word), as a writer
 * killed after its claim leaves it, then exits without closing.
 */
static void crash_after_claim(const char *dir, uint64_t capacity)
{
	pid_t pid = fork();
	int status;

	cr_assert(pid >= 0);
	if (pid == 0) {
		char path[4096];
		td_ring *r;
		unsigned char *m;
		uint64_t t, owner, lo, hi;
		int fd, slot;

		if (td_ring_open(&r, dir, td_test_ring_rw()) != 0)
			_exit(2);
		snprintf(path, sizeof(path), "%s/.tdstore-ring", dir);
		fd = open(path, O_RDWR);
		m = mmap(NULL, RING_SEQ_OFFSET + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			_exit(3);
		for (slot = 0; slot < 256; slot++) {
			memcpy(&owner, m + RING_WRITERS_OFFSET + slot * 64, 8);
			if ((uint32_t)owner == (uint32_t)getpid())
				break;
		}
		if (slot == 256)
			_exit(4);
		t = atomic_fetch_add((_Atomic uint64_t *)(void *)(m + 128), 1);
		hi = t + 1;
		lo = t;
		memcpy(m + RING_WRITERS_OFFSET + slot * 64 + 16, &hi, 8);
		memcpy(m + RING_WRITERS_OFFSET + slot * 64 + 8, &lo, 8);
		hi = ((t + 1) << 2) | 1; /* WRITING(t) */
		memcpy(m + RING_SEQ_OFFSET + (t % capacity) * 8, &hi, 8);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d", WEXITSTATUS(status));
}

Test(ring, rows_of_a_dead_writer_are_never_sampled_and_are_reclaimed)
{
	td_ring *r = new_ring("r", 8, false);
	td_ring_stats st;
	td_dict *out;
	rowptrs p;
	int64_t idx[200], got, i;
	uint64_t pos = 0;

	put_rows(r, 0, 3, NULL);
	crash_after_claim(td_test_path("r"), 8); /* ticket 3, slot 3 */
	put_rows(r, 4, 2, NULL);
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert_eq(st.head, 6);
	cr_assert_eq(st.published, 5);
	cr_assert_eq(st.writing, 1);
	cr_assert_eq(st.writers, 2, "the dead writer's slot is still registered");
	td_cr_assert_ok(td_ring_batch_new(&out, r, 200));
	p = ptrs_of(out);
	td_cr_assert_ok(td_ring_sample(out, idx, r, 0));
	for (i = 0; i < 200; i++) {
		cr_assert_neq(idx[i], 3);
		cr_assert(row_ok(&p, i));
	}
	cr_assert_eq(td_ring_read(out, NULL, &pos, r, pos), 5);
	td_cr_assert_ok(td_ring_reclaim(&got, r));
	cr_assert_eq(got, 1);
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert_eq(st.writing, 0);
	cr_assert_eq(st.reclaimed, 1);
	cr_assert_eq(st.writers, 1);
	td_cr_assert_ok(td_ring_reclaim(&got, r));
	cr_assert_eq(got, 0);
	/* Without reclaim, the next writer a lap later takes the slot over. */
	crash_after_claim(td_test_path("r"), 8); /* ticket 6, slot 6 */
	cr_assert_eq(put_rows(r, 7, 8, NULL), 8);
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert_eq(st.writing, 0);
	cr_assert_eq(st.published, 8);
	cr_assert_eq(st.reclaimed, 2);
	td_dict_free(out);
	td_ring_close(r);
}

Test(ring, a_live_writer_a_lap_behind_keeps_its_slot)
{
	td_ring *r = new_ring("r", 4, false), *slow;
	td_ring_stats st;
	unsigned char *m;
	uint64_t w;
	int fd;

	/* The slow writer (this process, another handle) holds slot 0 for ticket 0. */
	td_cr_assert_ok(td_ring_open(&slow, td_test_path("r"), td_test_ring_rw()));
	fd = open(td_test_path("r/.tdstore-ring"), O_RDWR);
	m = mmap(NULL, RING_SEQ_OFFSET + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert(m != MAP_FAILED);
	close(fd);
	{
		uint64_t owner, one = 1;

		/* Slot 1 is the second handle's: it now holds tickets [0, 1). */
		memcpy(&owner, m + RING_WRITERS_OFFSET + 64, 8);
		cr_assert_eq((uint32_t)owner, (uint32_t)getpid());
		memcpy(m + RING_WRITERS_OFFSET + 64 + 16, &one, 8);
	}
	atomic_fetch_add((_Atomic uint64_t *)(void *)(m + 128), 1);
	w = (1u << 2) | 1;
	memcpy(m + RING_SEQ_OFFSET, &w, 8);
	/* A lap later, ticket 4 finds slot 0 still held by a live writer: dropped. */
	cr_assert_eq(put_rows(r, 1, 4, NULL), 3);
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert_eq(st.dropped, 1);
	cr_assert_eq(st.writing, 1);
	td_cr_assert_ok(td_ring_reclaim(NULL, r));
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert_eq(st.writing, 1, "a live writer's row is not reclaimed");
	munmap(m, RING_SEQ_OFFSET + 4096);
	td_ring_close(slow);
	td_cr_assert_ok(td_ring_reclaim(NULL, r));
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert_eq(st.writing, 0, "a closed writer's row is");
	td_ring_close(r);
}

/* ---- prioritized sampling ---- */

Test(ring, prioritized_sampling_follows_the_priorities)
{
	td_ring *r = new_ring("r", 6, true);
	td_dict *out;
	rowptrs p;
	int64_t idx[4000], counts[6] = { 0 }, i;
	double prob[4000];
	td_ring_stats st;

	td_cr_assert_ok(td_ring_batch_new(&out, r, 4000));
	td_cr_assert_err(td_ring_sample_prioritized(out, NULL, NULL, r), TD_ENOTFOUND);
	put_rows(r, 0, 4, NULL);
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert(st.prioritized);
	/* New rows get priority 1: uniform. */
	td_ring_seed(r, 1);
	p = ptrs_of(out);
	td_cr_assert_ok(td_ring_sample_prioritized(out, idx, prob, r));
	for (i = 0; i < 4000; i++) {
		cr_assert(idx[i] >= 0 && idx[i] < 4);
		cr_assert_float_eq(prob[i], 0.25, 1e-12);
		cr_assert(row_ok(&p, i));
	}
	td_cr_assert_ok(
		td_ring_update_priority(r, (int64_t[]){ 0, 1, 2, 3 }, (double[]){ 0, 0, 1, 3 }, 4));
	td_cr_assert_ok(td_ring_sample_prioritized(out, idx, prob, r));
	for (i = 0; i < 4000; i++) {
		counts[idx[i]]++;
		cr_assert_float_eq(prob[i], idx[i] == 3 ? 0.75 : 0.25, 1e-12);
		cr_assert_eq(p.action[i], idx[i]);
	}
	cr_assert_eq(counts[0] + counts[1], 0);
	cr_assert(counts[3] > 2700 && counts[3] < 3300, "slot 3 drawn %lld times",
		(long long)counts[3]);
	/* New rows get the largest priority so far (3). */
	put_rows(r, 4, 1, NULL);
	td_cr_assert_ok(td_ring_sample_prioritized(out, idx, prob, r));
	for (i = 0; i < 4000; i++)
		if (idx[i] == 4)
			cr_assert_float_eq(prob[i], 3.0 / 7.0, 1e-12);
	/* Errors. */
	td_cr_assert_err(td_ring_update_priority(r, (int64_t[]){ 6 }, (double[]){ 1 }, 1), TD_EINDEX);
	td_cr_assert_err(td_ring_update_priority(r, (int64_t[]){ 1 }, (double[]){ -1 }, 1), TD_EINVAL);
	td_cr_assert_err(td_ring_update_priority(r, (int64_t[]){ 1 }, (double[]){ 0.0 / 0.0 }, 1),
		TD_EINVAL);
	td_cr_assert_err(td_ring_update_priority(r, NULL, NULL, 1), TD_EINVAL);
	td_cr_assert_ok(td_ring_clear(r));
	td_cr_assert_err(td_ring_sample_prioritized(out, NULL, NULL, r), TD_ENOTFOUND);
	td_dict_free(out);
	td_ring_close(r);
}

Test(ring, priorities_carry_on_after_a_reopen)
{
	td_ring *r = new_ring("r", 8, true);
	td_dict *out;
	int64_t idx[2000], counts[8] = { 0 }, i;
	double prob[2000];

	put_rows(r, 0, 4, NULL);
	td_cr_assert_ok(
		td_ring_update_priority(r, (int64_t[]){ 0, 1, 2, 3 }, (double[]){ 0, 0, 1, 3 }, 4));
	td_ring_close(r);
	/* Another process reopens it: the priorities, and the largest one (3) that
	 * new rows get, are those in the file. */
	put_rows_in_child(4, 1, 4);
	td_cr_assert_ok(td_ring_open(&r, td_test_path("r"), NULL));
	td_cr_assert_ok(td_ring_batch_new(&out, r, 2000));
	td_ring_seed(r, 5);
	td_cr_assert_ok(td_ring_sample_prioritized(out, idx, prob, r));
	for (i = 0; i < 2000; i++) {
		counts[idx[i]]++;
		cr_assert_float_eq(prob[i], idx[i] == 2 ? 1.0 / 7.0 : 3.0 / 7.0, 1e-12, "slot %lld",
			(long long)idx[i]);
	}
	cr_assert_eq(counts[0] + counts[1], 0);
	cr_assert(counts[2] > 200 && counts[3] > 700 && counts[4] > 700);
	td_dict_free(out);
	td_ring_close(r);
}

Test(ring, priority_updates_from_several_processes_add_up)
{
	enum { PROCS = 4, ROUNDS = 200 };
	td_ring *r = new_ring("r", 64, true);
	td_dict *out;
	int64_t idx[1000], i, counts[64] = { 0 };
	int k, status, rounds = under_valgrind() ? 20 : ROUNDS;
	pid_t pids[PROCS];

	put_rows(r, 0, 64, NULL);
	for (k = 0; k < PROCS; k++) {
		pids[k] = fork();
		cr_assert(pids[k] >= 0);
		if (pids[k] == 0) {
			td_ring *c;
			int ok = td_ring_open(&c, td_test_path("r"), td_test_ring_rw()) == 0, j;

			/* Process k owns slots k, k+4, ...; each ends at priority 0 or 2. */
			for (j = 0; ok && j < rounds; j++) {
				int64_t s = k + 4 * (j % 16);
				double pr = (j + 1 == rounds || j >= rounds - 16) ? (s % 8 == 0 ? 2.0 : 0.0) :
																	(double)(j % 5);

				ok = td_ring_update_priority(c, &s, &pr, 1) == 0;
			}
			td_ring_close(c);
			_exit(ok ? 0 : 1);
		}
	}
	for (k = 0; k < PROCS; k++) {
		cr_assert_eq(waitpid(pids[k], &status, 0), pids[k]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	/* Only slots 0, 8, ..., 56 keep a priority: the tree's sums agree. */
	td_cr_assert_ok(td_ring_batch_new(&out, r, 1000));
	td_cr_assert_ok(td_ring_sample_prioritized(out, idx, NULL, r));
	for (i = 0; i < 1000; i++)
		counts[idx[i]]++;
	for (i = 0; i < 64; i++)
		cr_assert(i % 8 == 0 ? counts[i] > 50 : counts[i] == 0, "slot %lld: %lld", (long long)i,
			(long long)counts[i]);
	td_dict_free(out);
	td_ring_close(r);
}

/* ---- processes: stress ---- */

typedef struct shared {
	_Atomic int writers_done;
	_Atomic int64_t stored;
	_Atomic int64_t sampled;
	_Atomic int64_t bad;
} shared;

static shared *shared_new(void)
{
	shared *sh = mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		0);

	cr_assert(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	return sh;
}

static int stress_writer(const char *dir, int w, int64_t rows, shared *sh)
{
	td_ring *r;
	td_dict *b = NULL;
	uint64_t seed = 1000 + (uint64_t)w;
	int64_t done = 0;

	if (td_ring_open(&r, dir, td_test_ring_rw()) != 0)
		return 1;
	while (done < rows) {
		int64_t n = 1 + (int64_t)(td_test_rand(&seed) % 48), i, got;
		rowptrs p;

		if (n > rows - done)
			n = rows - done;
		if (td_ring_batch_new(&b, r, n) != 0)
			return 1;
		p = ptrs_of(b);
		for (i = 0; i < n; i++)
			fill_row(&p, i, (int64_t)w * 1000000 + done + i);
		got = td_ring_extend(NULL, r, b);
		td_dict_free(b);
		if (got < 0)
			return 1;
		atomic_fetch_add(&sh->stored, got);
		done += n;
	}
	td_ring_close(r);
	return 0;
}

/*
 * A sampler racing the writers, each round one of: sampling with and
 * without replacement, reading in ticket order from where the last read
 * stopped (td_ring_read), and on a prioritized ring prioritized sampling;
 * the read-write sampler then also updates the priorities of the rows it
 * drew. Every row returned is checked whole, and reads return increasing
 * tickets.
 */
static int stress_sampler(const char *dir, int k, shared *sh)
{
	td_ring *r;
	td_dict *b;
	rowptrs p;
	td_ring_stats st;
	int64_t i, n = 0, round, idx[32];
	uint64_t pos = 0, tickets[32];
	double prio[32];
	bool last = false, writable = k % 2 == 0;

	if (td_ring_open(&r, dir, writable ? td_test_ring_rw() : NULL) != 0 ||
		td_ring_batch_new(&b, r, 32) != 0 || td_ring_stat(&st, r) != 0)
		return 1;
	p = ptrs_of(b);
	/* Sample until the writers are done, then once more. */
	for (round = 0; !last; round++) {
		int64_t got = 32;
		int rc = 0;

		last = atomic_load(&sh->writers_done) != 0;
		switch (round % 4) {
		case 0:
			rc = td_ring_sample(b, idx, r, 0);
			break;
		case 1:
			rc = td_ring_sample(b, idx, r, TD_RING_NO_REPLACEMENT);
			break;
		case 2:
			got = td_ring_read(b, tickets, &pos, r, pos);
			if (got < 0)
				return 1;
			for (i = 1; i < got; i++)
				if (tickets[i] <= tickets[i - 1])
					atomic_fetch_add(&sh->bad, 1);
			if (got == 0)
				pos = 0; /* at the cursor: start again from the oldest row */
			break;
		default:
			if (!st.prioritized) {
				rc = td_ring_sample(b, idx, r, 0);
				break;
			}
			rc = td_ring_sample_prioritized(b, idx, prio, r);
			for (i = 0; rc == 0 && writable && i < 32; i++)
				prio[i] = 0.5 + (double)((idx[i] + round) % 4);
			if (rc == 0 && writable && td_ring_update_priority(r, idx, prio, 32) != 0)
				return 1;
			break;
		}
		if (rc == TD_ENOTFOUND && !last)
			continue;
		if (rc != 0)
			return 1;
		for (i = 0; i < got; i++)
			if (!row_ok(&p, i))
				atomic_fetch_add(&sh->bad, 1);
		n += got;
	}
	atomic_fetch_add(&sh->sampled, n);
	td_dict_free(b);
	td_ring_close(r);
	return 0;
}

static void stress(bool prioritized)
{
	enum { WRITERS = 4, SAMPLERS = 2 };
	int64_t rows = under_valgrind() ? 300 : 20000, i, got;
	td_ring *r = new_ring("r", 256, prioritized);
	shared *sh = shared_new();
	pid_t w[WRITERS], s[SAMPLERS];
	td_ring_stats st;
	td_dict *b;
	rowptrs p;
	uint64_t pos = 0;
	int k, status;

	td_ring_close(r);
	for (k = 0; k < SAMPLERS; k++) {
		s[k] = fork();
		cr_assert(s[k] >= 0);
		if (s[k] == 0)
			_exit(stress_sampler(td_test_path("r"), k, sh));
	}
	for (k = 0; k < WRITERS; k++) {
		w[k] = fork();
		cr_assert(w[k] >= 0);
		if (w[k] == 0)
			_exit(stress_writer(td_test_path("r"), k, rows, sh));
	}
	for (k = 0; k < WRITERS; k++) {
		cr_assert_eq(waitpid(w[k], &status, 0), w[k]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", k);
	}
	atomic_store(&sh->writers_done, 1);
	for (k = 0; k < SAMPLERS; k++) {
		cr_assert_eq(waitpid(s[k], &status, 0), s[k]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "sampler %d failed", k);
	}
	cr_assert_eq(atomic_load(&sh->bad), 0, "%lld torn rows sampled or read",
		(long long)atomic_load(&sh->bad));
	cr_assert(atomic_load(&sh->sampled) >= 32 * SAMPLERS);
	/* Totals: every row reserved was stored (no writer fell a lap behind for
	 * good: dropped rows are counted), the ring holds the last 256. */
	td_cr_assert_ok(td_ring_open(&r, td_test_path("r"), NULL));
	td_cr_assert_ok(td_ring_stat(&st, r));
	cr_assert_eq(st.head, (uint64_t)(WRITERS * rows));
	cr_assert_eq((uint64_t)atomic_load(&sh->stored) + st.dropped, st.head);
	cr_assert_eq(st.writing, 0);
	cr_assert_eq(st.writers, 0);
	cr_assert_eq(st.len, 256);
	if (st.dropped == 0)
		cr_assert_eq(st.published, 256);
	td_cr_assert_ok(td_ring_batch_new(&b, r, 256));
	p = ptrs_of(b);
	got = td_ring_read(b, NULL, &pos, r, pos);
	cr_assert(got <= st.published && got >= 256 - (int64_t)st.dropped, "read %lld rows",
		(long long)got);
	for (i = 0; i < got; i++)
		cr_assert(row_ok(&p, i));
	if (prioritized) {
		/* The sum-tree, updated by writers and a sampler at once, still draws whole rows. */
		td_cr_assert_ok(td_ring_sample_prioritized(b, NULL, NULL, r));
		for (i = 0; i < 256; i++)
			cr_assert(row_ok(&p, i));
	}
	cr_log_info("stress: %d writers x %lld rows, %lld rows sampled or read, %llu dropped", WRITERS,
		(long long)rows, (long long)atomic_load(&sh->sampled), (unsigned long long)st.dropped);
	td_dict_free(b);
	td_ring_close(r);
	munmap(sh, sizeof(*sh));
}

Test(ring, four_writers_and_two_samplers_never_see_a_torn_row)
{
	stress(false);
}

Test(ring, four_writers_and_two_prioritized_samplers_never_see_a_torn_row)
{
	stress(true);
}

/* ---- processes: kill ---- */

Test(ring, writers_killed_at_random_points_leave_a_consistent_usable_ring)
{
	int iterations = under_valgrind() ? 10 : 120, it;
	td_ring *r = new_ring("r", 64, false);
	uint64_t seed = 4242, total_reclaimed = 0;
	td_dict *b;
	rowptrs p;

	td_cr_assert_ok(td_ring_batch_new(&b, r, 64));
	p = ptrs_of(b);
	for (it = 0; it < iterations; it++) {
		struct timespec delay = { 0, (long)(td_test_rand(&seed) % 2000000) };
		struct timespec poll = { 0, 50000 };
		td_ring_stats st;
		uint64_t head0, pos = 0, h;
		int64_t got, i;
		int status, waited;
		pid_t pid;

		td_cr_assert_ok(td_ring_stat(&st, r));
		head0 = st.head;
		pid = fork();
		cr_assert(pid >= 0);
		if (pid == 0) {
			td_ring *c;
			int64_t id = (int64_t)it * 1000000;

			if (td_ring_open(&c, td_test_path("r"), td_test_ring_rw()) != 0)
				_exit(1);
			for (;;) {
				td_dict *cb;
				rowptrs cp;
				int64_t n = 1 + id % 17, j;

				if (td_ring_batch_new(&cb, c, n) != 0)
					_exit(1);
				cp = ptrs_of(cb);
				for (j = 0; j < n; j++)
					fill_row(&cp, j, id + j);
				id += n;
				if (td_ring_extend(NULL, c, cb) < 0)
					_exit(1);
				td_dict_free(cb);
			}
		}
		/* Wait for the writer's first rows (up to 60 s under valgrind), then kill it
		 * at a random point of what it does next. */
		for (waited = 0; waited < 1200000; waited++) {
			td_cr_assert_ok(td_ring_stat(&st, r));
			if (st.head != head0)
				break;
			nanosleep(&poll, NULL);
		}
		nanosleep(&delay, NULL);
		kill(pid, SIGKILL);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFSIGNALED(status), "iteration %d: the writer exited on its own", it);
		/* Every published row is whole. */
		while ((got = td_ring_read(b, NULL, &pos, r, pos)) > 0)
			for (i = 0; i < got; i++)
				cr_assert(row_ok(&p, i), "iteration %d: a torn row", it);
		/* Half the time reclaim, half the time let the next lap take the slots over. */
		if (it % 2 == 0) {
			int64_t n;

			td_cr_assert_ok(td_ring_reclaim(&n, r));
			total_reclaimed += (uint64_t)n;
			td_cr_assert_ok(td_ring_stat(&st, r));
			cr_assert_eq(st.writing, 0);
			cr_assert_eq(st.writers, 1);
		}
		/* The ring stays usable: a full lap from this process. */
		td_cr_assert_ok(td_ring_stat(&st, r));
		h = st.head;
		for (i = 0; i < 64; i++)
			fill_row(&p, i, 900000000 + it);
		cr_assert_eq(td_ring_extend(NULL, r, b), 64);
		td_cr_assert_ok(td_ring_stat(&st, r));
		cr_assert_eq(st.head, h + 64);
		cr_assert_eq(st.writing, 0);
		cr_assert_eq(st.published, 64);
		td_cr_assert_ok(td_ring_sample(b, NULL, r, 0));
		for (i = 0; i < 64; i++)
			cr_assert(row_ok(&p, i));
	}
	td_dict_free(b);
	cr_log_info("kill test: %d iterations, %llu rows reclaimed by td_ring_reclaim", iterations,
		(unsigned long long)total_reclaimed);
	td_ring_close(r);
}
