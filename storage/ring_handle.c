/* SPDX-License-Identifier: MIT */
/*
 * ring_handle.c - what every ring call does with its handle: the writer
 * slots that tell live writers from killed ones (doc/format.md 5.3), the
 * handle's life across fork(), the sampling generator, and the view of a
 * caller's dict as rows of the ring (its leaves found, slots copied out,
 * which rows may be sampled, 5.4). Creating and opening rings is ring.c,
 * writing and reading rows ring_io.c, the sum-tree ring_prio.c.
 */
#include "ring_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Writer slots                                                              */
/* ------------------------------------------------------------------------ */

static bool pid_alive(uint64_t owner)
{
	pid_t pid = (pid_t)(uint32_t)owner;

	if (pid <= 0)
		return false;
	return kill(pid, 0) == 0 || errno != ESRCH;
}

bool td__ring_owner_alive(const td_ring *r, uint64_t t)
{
	uint32_t i;

	for (i = 0; i < TD_RING_WRITER_SLOTS; i++) {
		const td__ring_writer *w = &r->writers[i];
		uint64_t owner = atomic_load_explicit(&w->owner, memory_order_acquire);
		uint64_t lo, hi;

		if (owner == 0)
			continue;
		/* lo is read first: a writer stores hi before lo (ring_io.c). */
		lo = atomic_load_explicit(&w->lo, memory_order_acquire);
		hi = atomic_load_explicit(&w->hi, memory_order_acquire);
		if (t >= lo && t < hi && pid_alive(owner))
			return true;
	}
	return false;
}

int td__ring_free_dead_slots(td_ring *r)
{
	uint32_t i;
	int n = 0;

	for (i = 0; i < TD_RING_WRITER_SLOTS; i++) {
		uint64_t owner = atomic_load_explicit(&r->writers[i].owner, memory_order_acquire);

		if (owner != 0 && owner != r->owner && !pid_alive(owner) &&
			atomic_compare_exchange_strong(&r->writers[i].owner, &owner, 0))
			n++;
	}
	return n;
}

/*
 * A writer slot's nonce: from the time, the process and the handle, not
 * from the handle's generator, whose draws only sampling consumes (the same
 * seed draws the same rows whether or not a slot was claimed meanwhile).
 */
static uint64_t slot_nonce(const td_ring *r)
{
	static _Atomic uint64_t counter;
	struct timespec ts;
	uint64_t z;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	z = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 40) ^
		(uint64_t)(uintptr_t)r ^ atomic_fetch_add(&counter, 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return (z ^ (z >> 31)) >> 32;
}

int td__ring_claim_slot(td_ring *r, const char *what)
{
	uint64_t nonce = slot_nonce(r), want;
	uint32_t i;
	int round;

	want = (nonce ? nonce : 1) << 32 | (uint32_t)getpid();
	for (round = 0; round < 2; round++) {
		for (i = 0; i < TD_RING_WRITER_SLOTS; i++) {
			uint64_t zero = 0;
			td__ring_writer *w = &r->writers[i];

			if (atomic_load_explicit(&w->owner, memory_order_relaxed) != 0)
				continue;
			atomic_store_explicit(&w->lo, 0, memory_order_relaxed);
			atomic_store_explicit(&w->hi, 0, memory_order_relaxed);
			if (atomic_compare_exchange_strong(&w->owner, &zero, want)) {
				r->wslot = (int)i;
				r->owner = want;
				return TD_OK;
			}
		}
		if (td__ring_free_dead_slots(r) == 0)
			break;
	}
	return td__error(TD_EBUSY, "%s: all %u writer slots are held by live processes", what,
		TD_RING_WRITER_SLOTS);
}

/* ------------------------------------------------------------------------ */
/* fork(): handles copied into a child                                       */
/* ------------------------------------------------------------------------ */

static _Atomic uint64_t fork_epoch;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static bool fork_handler;

static void on_fork_child(void)
{
	atomic_fetch_add_explicit(&fork_epoch, 1, memory_order_relaxed);
}

static void register_fork_handler(void)
{
	fork_handler = pthread_atfork(NULL, NULL, on_fork_child) == 0;
}

uint64_t td__ring_epoch(void)
{
	return atomic_load_explicit(&fork_epoch, memory_order_relaxed);
}

static void seed_default(td_ring *r)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	td_ring_seed(r,
		(uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_nsec ^
			((uint64_t)ts.tv_sec << 32) ^ (uint64_t)(uintptr_t)r);
}

int td__ring_own(td_ring *r, const char *fn)
{
	uint64_t now = td__ring_epoch();

	if (r->epoch == now)
		return TD_OK;
	/* The writer slot is the parent's (its pid): never used nor freed here. */
	r->wslot = -1;
	r->owner = 0;
	if (r->seed_epoch != now)
		seed_default(r);
	if (r->writable && r->tree) {
		/* The sum-tree's flock belongs to the open file description, which the
		 * copied descriptor shares with the parent's: take one of our own. */
		char self[64];
		int fd;

		snprintf(self, sizeof(self), "/proc/self/fd/%d", r->fd);
		fd = open(self, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return td__error_os(td__status_from_errno(errno), errno,
				"%s: reopening %s after fork()", fn, TD_RING_NAME);
		if (dup3(fd, r->fd, O_CLOEXEC) < 0) {
			int e = errno;

			close(fd);
			return td__error_os(TD_EIO, e, "%s: reopening %s after fork()", fn, TD_RING_NAME);
		}
		close(fd);
	}
	if (r->writable)
		TD_TRY(td__ring_claim_slot(r, fn));
	r->epoch = now;
	return TD_OK;
}

void td__ring_release_slot(td_ring *r)
{
	td__ring_writer *w;
	uint64_t mine = r->owner;

	if (r->wslot < 0)
		return;
	w = &r->writers[r->wslot];
	atomic_store_explicit(&w->lo, 0, memory_order_relaxed);
	atomic_store_explicit(&w->hi, 0, memory_order_relaxed);
	atomic_compare_exchange_strong(&w->owner, &mine, 0);
	r->wslot = -1;
}

int td__ring_own_init(td_ring *r)
{
	pthread_once(&fork_once, register_fork_handler);
	if (!fork_handler)
		return td__error(TD_ENOMEM, "ring: cannot register the fork handler");
	r->epoch = td__ring_epoch();
	seed_default(r);
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Generator: xoshiro256** seeded through splitmix64                         */
/* ------------------------------------------------------------------------ */

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t td__ring_next(td_ring *r)
{
	uint64_t *s = r->rng, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

uint64_t td__ring_below(td_ring *r, uint64_t n)
{
	unsigned __int128 m = (unsigned __int128)td__ring_next(r) * n;
	uint64_t l = (uint64_t)m;

	if (l < n) {
		uint64_t t = -n % n;

		while (l < t) {
			m = (unsigned __int128)td__ring_next(r) * n;
			l = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

void td_ring_seed(td_ring *ring, uint64_t seed)
{
	int i;

	if (!ring)
		return;
	ring->seed_epoch = td__ring_epoch();
	for (i = 0; i < 4; i++) {
		uint64_t z = (seed += 0x9E3779B97F4A7C15ull);

		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		ring->rng[i] = z ^ (z >> 31);
	}
}

/* ------------------------------------------------------------------------ */
/* The caller's dict                                                         */
/* ------------------------------------------------------------------------ */

static int check_leaf(const td__ring_leaf *l, const td_tensor *t, int64_t n, bool batched, bool dst,
	const char *fn)
{
	int lead = batched ? 1 : 0;

	if (t->dtype != l->dtype || t->ndim != l->row_ndim + lead ||
		(batched && td_tensor_shape(t)[0] != n) ||
		memcmp(td_tensor_shape(t) + lead, l->row_shape, sizeof(int64_t) * (size_t)l->row_ndim) != 0)
		return td__error(TD_ETYPE,
			"%s: leaf '%s' is %s[%d dims], the ring's rows hold %s "
			"[%s%d dims]",
			fn, td_key_part(l->key, td_key_depth(l->key) - 1), td_dtype_name(t->dtype), t->ndim,
			td_dtype_name(l->dtype), batched ? "n, " : "", l->row_ndim);
	if (dst &&
		(!td_tensor_is_contiguous(t) || (td_buffer_flags(t->buffer) & TD_BUFFER_READONLY) ||
			td_buffer_memory(t->buffer) == TD_MEMORY_DEVICE))
		return td__error(TD_ETYPE,
			"%s: leaf '%s' of the destination is not a contiguous, "
			"writable host tensor",
			fn, td_key_part(l->key, td_key_depth(l->key) - 1));
	return TD_OK;
}

int td__ring_resolve(td_ring *r, const td_dict *d, int64_t n, bool batched, bool dst,
	const char *fn)
{
	size_t i;

	for (i = 0; i < r->nleaves; i++) {
		const td_tensor *t;
		int rc = td_dict_get_tensor_key(&t, d, r->leaves[i].key);

		if (rc < 0)
			return rc;
		TD_TRY(check_leaf(&r->leaves[i], t, n, batched, dst, fn));
		r->tens[i] = t;
		r->ptrs[i] = n > 0 && td_tensor_is_contiguous(t) &&
				td_buffer_memory(t->buffer) != TD_MEMORY_DEVICE ?
			td_tensor_data(t) :
			NULL;
		if (!dst && !r->ptrs[i] && n > 0 && td_buffer_memory(t->buffer) == TD_MEMORY_DEVICE)
			return td__error(TD_EINVAL, "%s: leaf '%s' is in device memory", fn,
				td_key_part(r->leaves[i].key, td_key_depth(r->leaves[i].key) - 1));
	}
	return TD_OK;
}

void td__ring_copy_out(td_ring *r, uint64_t slot, int64_t j)
{
	size_t i;

	for (i = 0; i < r->nleaves; i++) {
		size_t rb = r->leaves[i].row_bytes;

		memcpy(r->ptrs[i] + (size_t)j * rb, r->leaves[i].base + slot * rb, rb);
	}
}

bool td__ring_sampleable(const td_ring *r, uint64_t w)
{
	uint64_t tf = td__seq_tf(w);

	return td__seq_state(w) == TD_SEQ_PUBLISHED && tf > 0 &&
		tf - 1 >= atomic_load_explicit(&r->live->cleared, memory_order_relaxed);
}
