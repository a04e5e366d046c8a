/* SPDX-License-Identifier: MIT */
/*
 * demo_ring.c - the replay-buffer step of `tdstore demo`: actor processes
 * write transitions (obs float32[64], action int64, reward float32, done
 * bool, a nested "next" dict and the step number) into a ring shared
 * through a store directory, while a learner process samples batches of
 * 256 and checks that every sampled row is whole. Then the ring is
 * reopened and every row it holds verified.
 *
 * Every leaf of a transition derives from its step number, so a row mixed
 * from two transitions, or half written, fails the check.
 */
#define _GNU_SOURCE
#include "demo.h"

#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RING_CAPACITY 65536
#define RING_ACTORS 4
#define RING_ACTOR_ROWS 250000 /* at most, per actor */
#define RING_SECONDS 1.0       /* actors stop after this long */
#define RING_BATCH 64          /* rows per td_ring_extend */
#define RING_SAMPLE 256        /* rows per td_ring_sample */

/* What the processes report, in a shared anonymous mapping. */
typedef struct ring_shared {
	_Atomic int actors_done;
	_Atomic int64_t rows;
	_Atomic int64_t writer_ns; /* the slowest actor's time */
	_Atomic int64_t samples;
	_Atomic int64_t sample_ns;
	_Atomic int64_t bad;
} ring_shared;

typedef struct transition {
	float *obs, *reward, *next_obs, *next_reward;
	int64_t *action, *step;
	bool *done, *next_done;
} transition;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *data_of(const td_dict *d, const char *key)
{
	const td_tensor *t;

	return td_dict_get_tensor(&t, d, key) == TD_OK ? td_tensor_data(t) : NULL;
}

static transition view_of(const td_dict *d)
{
	transition v;

	v.obs = data_of(d, "obs");
	v.action = data_of(d, "action");
	v.reward = data_of(d, "reward");
	v.done = data_of(d, "done");
	v.next_obs = data_of(d, "next.obs");
	v.next_reward = data_of(d, "next.reward");
	v.next_done = data_of(d, "next.done");
	v.step = data_of(d, "step");
	return v;
}

static float obs_at(int64_t step, int j)
{
	return (float)((step * DEMO_OBS + j) & 0xFFFFFF);
}

static void fill(const transition *v, int64_t i, int64_t step)
{
	int j;

	for (j = 0; j < DEMO_OBS; j++) {
		v->obs[i * DEMO_OBS + j] = obs_at(step, j);
		v->next_obs[i * DEMO_OBS + j] = obs_at(step + 1, j);
	}
	v->action[i] = step % 18;
	v->reward[i] = (float)(step % 7) * 0.5f;
	v->done[i] = step % 100 == 99;
	v->next_reward[i] = (float)((step + 1) % 7) * 0.5f;
	v->next_done[i] = (step + 1) % 100 == 99;
	v->step[i] = step;
}

static bool consistent(const transition *v, int64_t i)
{
	int64_t step = v->step[i];
	int j;

	if (v->action[i] != step % 18 || v->reward[i] != (float)(step % 7) * 0.5f ||
		v->done[i] != (step % 100 == 99) || v->next_reward[i] != (float)((step + 1) % 7) * 0.5f ||
		v->next_done[i] != ((step + 1) % 100 == 99))
		return false;
	for (j = 0; j < DEMO_OBS; j++)
		if (v->obs[i * DEMO_OBS + j] != obs_at(step, j) ||
			v->next_obs[i * DEMO_OBS + j] != obs_at(step + 1, j))
			return false;
	return true;
}

static int add_leaf(td_dict *d, const char *key, td_dtype dtype, int ndim)
{
	static const int64_t obs[1] = { DEMO_OBS };
	td_tensor t;
	int rc = td_tensor_zeros(&t, dtype, ndim, obs);

	return rc < 0 ? rc : td_dict_set_tensor_take(d, key, &t);
}

/* One row's layout: the transition without its batch dimension. */
static int row_template(td_dict **out)
{
	td_dict *row = NULL, *next = NULL;
	int rc;

	if ((rc = td_dict_new(&row, 0, NULL)) < 0 || (rc = td_dict_new(&next, 0, NULL)) < 0 ||
		(rc = add_leaf(row, "obs", TD_DTYPE_F32, 1)) < 0 ||
		(rc = add_leaf(row, "action", TD_DTYPE_I64, 0)) < 0 ||
		(rc = add_leaf(row, "reward", TD_DTYPE_F32, 0)) < 0 ||
		(rc = add_leaf(row, "done", TD_DTYPE_BOOL, 0)) < 0 ||
		(rc = add_leaf(next, "obs", TD_DTYPE_F32, 1)) < 0 ||
		(rc = add_leaf(next, "reward", TD_DTYPE_F32, 0)) < 0 ||
		(rc = add_leaf(next, "done", TD_DTYPE_BOOL, 0)) < 0 ||
		(rc = add_leaf(row, "step", TD_DTYPE_I64, 0)) < 0 ||
		(rc = td_dict_set_dict_take(row, "next", next)) < 0) {
		td_dict_free(next);
		td_dict_free(row);
		return rc;
	}
	*out = row;
	return TD_OK;
}

/* An actor: write batches of transitions until its rows or its time are up. */
static int actor(const char *dir, int a, ring_shared *sh)
{
	td_ring_open_opts rw = TD_RING_OPEN_OPTS_INIT;
	td_ring *r = NULL;
	td_dict *b = NULL;
	transition v;
	int64_t t0 = now_ns(), step = (int64_t)a * 100000000, done = 0, ns, prev;

	rw.writable = true;
	if (td_ring_open(&r, dir, &rw) < 0 || td_ring_batch_new(&b, r, RING_BATCH) < 0)
		return 1;
	v = view_of(b);
	while (done < RING_ACTOR_ROWS && now_ns() - t0 < (int64_t)(RING_SECONDS * 1e9)) {
		int64_t i, got;

		for (i = 0; i < RING_BATCH; i++)
			fill(&v, i, step + i);
		got = td_ring_extend(NULL, r, b);
		if (got < 0)
			return 1;
		step += RING_BATCH;
		done += RING_BATCH;
	}
	ns = now_ns() - t0;
	atomic_fetch_add(&sh->rows, done);
	prev = atomic_load(&sh->writer_ns);
	while (prev < ns && !atomic_compare_exchange_weak(&sh->writer_ns, &prev, ns))
		;
	td_dict_free(b);
	/*
	 * A scratch ring: the rows stay in the page cache, where every process
	 * sees them, until the kernel writes them back. A ring whose rows must
	 * survive a crash of the machine calls td_ring_sync() before closing.
	 */
	td_ring_close(r);
	return 0;
}

/* The learner: sample batches and check every row until the actors are done. */
static int learner(const char *dir, ring_shared *sh)
{
	td_ring *r = NULL;
	td_dict *b = NULL;
	transition v;
	int64_t n = 0, t0, i;
	bool last = false;

	if (td_ring_open(&r, dir, NULL) < 0 || td_ring_batch_new(&b, r, RING_SAMPLE) < 0)
		return 1;
	v = view_of(b);
	td_ring_seed(r, 2024);
	t0 = now_ns();
	while (!last) {
		int rc;

		last = atomic_load(&sh->actors_done) != 0;
		rc = td_ring_sample(b, NULL, r, 0);
		if (rc == TD_ENOTFOUND && !last)
			continue; /* nothing published yet */
		if (rc < 0)
			return 1;
		for (i = 0; i < RING_SAMPLE; i++)
			if (!consistent(&v, i))
				atomic_fetch_add(&sh->bad, 1);
		n += RING_SAMPLE;
	}
	atomic_store(&sh->sample_ns, now_ns() - t0);
	atomic_store(&sh->samples, n);
	td_dict_free(b);
	td_ring_close(r);
	return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Run the actors and the learner; @return 0 when every process exited 0. */
static int run_processes(demo *d, const char *dir, ring_shared *sh)
{
	pid_t pids[RING_ACTORS + 1];
	int i, status, failed = 0;

	fflush(NULL);
	for (i = 0; i <= RING_ACTORS; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			failed = 1;
			break;
		}
		if (pids[i] == 0)
			_exit(i == RING_ACTORS ? learner(dir, sh) : actor(dir, i, sh));
	}
	for (int k = 0; k < i; k++) {
		if (k == RING_ACTORS)
			atomic_store(&sh->actors_done, 1);
		if (waitpid(pids[k], &status, 0) != pids[k] || !WIFEXITED(status) ||
			WEXITSTATUS(status) != 0)
			failed = 1;
		if (k == RING_ACTORS - 1)
			atomic_store(&sh->actors_done, 1);
	}
	return demo_check(d, !failed, "%d actor processes and a learner ran and exited 0", RING_ACTORS);
}

/* Reopen the ring and check every row it holds. */
static int verify_reopened(demo *d, const char *dir, const ring_shared *sh, td_ring_stats *st,
	int64_t *verified)
{
	td_ring *r = NULL;
	td_dict *b = NULL;
	transition v;
	uint64_t pos = 0;
	int64_t got, i, bad = 0;
	const td_tensor *t;
	int rc;

	*verified = 0;
	DEMO_CALL(d, td_ring_open(&r, dir, NULL));
	DEMO_CALL(d, td_ring_stat(st, r));
	DEMO_CHECK(d, st->head == (uint64_t)atomic_load(&sh->rows),
		"the reopened ring's cursor (%llu) counts every row written (%lld)",
		(unsigned long long)st->head, (long long)atomic_load(&sh->rows));
	DEMO_CHECK(d, st->writing == 0 && st->writers == 0,
		"no row is left being written and every writer closed");
	DEMO_CALL(d, td_ring_batch_new(&b, r, 4096));
	v = view_of(b);
	while ((got = td_ring_read(b, NULL, &pos, r, pos)) > 0) {
		for (i = 0; i < got; i++)
			bad += !consistent(&v, i);
		*verified += got;
	}
	DEMO_CALL(d, (int)got);
	/* A slot whose newest row was dropped (its writer fell a lap behind) still
	 * holds the previous lap's row: published, but not the ticket read asks. */
	DEMO_CHECK(d,
		bad == 0 && *verified <= st->published && *verified + (int64_t)st->dropped >= st->published,
		"all %lld rows read back whole (%lld bad; %lld published, %llu dropped)",
		(long long)*verified, (long long)bad, (long long)st->published,
		(unsigned long long)st->dropped);
	/* What Python's TensorDict.load_memmap sees: every leaf at full capacity. */
	DEMO_CALL(d, td_dict_get_tensor(&t, td_store_dict(td_ring_store(r)), "next.obs"));
	DEMO_CHECK(d,
		t->ndim == 2 && td_tensor_shape(t)[0] == RING_CAPACITY && td_tensor_shape(t)[1] == DEMO_OBS,
		"the store's next.obs is [%d, %d]", RING_CAPACITY, DEMO_OBS);
out:
	td_dict_free(b);
	td_ring_close(r);
	return rc;
}

int demo_step_ring(demo *d)
{
	char dir[256];
	td_dict *row = NULL;
	td_ring *r = NULL;
	ring_shared *sh;
	td_ring_create_opts opts = TD_RING_CREATE_OPTS_INIT;
	td_ring_stats st;
	size_t row_bytes;
	int64_t verified = 0;
	double wsec, ssec;
	int rc;

	snprintf(dir, sizeof(dir), "%s/tdstore-ring.XXXXXX",
		getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return demo_fail(d, "mkdtemp %s failed", dir);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		rmdir(dir);
		return demo_fail(d, "mmap of the shared counters failed");
	}
	memset(sh, 0, sizeof(*sh));
	DEMO_CALL(d, row_template(&row));
	opts.sync = TD_SYNC_NONE; /* a scratch ring: durability buys nothing */
	DEMO_CALL(d, td_ring_create(&r, dir, row, RING_CAPACITY, &opts));
	row_bytes = (size_t)(DEMO_OBS * 4 * 2 + 8 + 4 + 1 + 4 + 1 + 8);
	td_ring_close(r);
	r = NULL;
	DEMO_TRY(run_processes(d, dir, sh));
	DEMO_CHECK(d, atomic_load(&sh->bad) == 0, "the learner sampled %lld rows, %lld torn",
		(long long)atomic_load(&sh->samples), (long long)atomic_load(&sh->bad));
	DEMO_TRY(verify_reopened(d, dir, sh, &st, &verified));
	wsec = (double)atomic_load(&sh->writer_ns) / 1e9;
	ssec = (double)atomic_load(&sh->sample_ns) / 1e9;
	demo_say(d,
		"%d actors wrote %lld transitions of %zu B (%.2f M rows/s, %.2f GB/s) while "
		"a learner sampled %lld in batches of %d (%.2f M samples/s, %.2f GB/s), every "
		"row consistent; reopened: %lld rows verified, %llu dropped",
		RING_ACTORS, (long long)atomic_load(&sh->rows), row_bytes,
		(double)atomic_load(&sh->rows) / wsec / 1e6,
		(double)atomic_load(&sh->rows) * (double)row_bytes / wsec / 1e9,
		(long long)atomic_load(&sh->samples), RING_SAMPLE,
		(double)atomic_load(&sh->samples) / ssec / 1e6,
		(double)atomic_load(&sh->samples) * (double)row_bytes / ssec / 1e9, (long long)verified,
		(unsigned long long)st.dropped);
out:
	td_ring_close(r);
	td_dict_free(row);
	munmap(sh, sizeof(*sh));
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}
