/* SPDX-License-Identifier: MIT */
/*
 * ring_prio.c - prioritized sampling: a sum-tree of row priorities in the
 * ring file (doc/format.md 5.6). Node 0 holds the largest priority ever
 * set, node 1 the sum, node i the sum of nodes 2i and 2i+1, and leaf
 * P + s the priority of slot s (P a power of two >= capacity). Nodes are
 * IEEE doubles kept in 64-bit atomic words. Updates take an exclusive
 * flock on the ring file, which the kernel drops if its holder dies, and
 * recompute every ancestor from its two children, so that the sums carry
 * no drift; samplers read without the lock and check what they land on.
 */
#include "ring_impl.h"

#include <errno.h>
#include <math.h>
#include <sys/file.h>

static double get(const td_ring *r, uint64_t i)
{
	uint64_t bits = atomic_load_explicit(&r->tree[i], memory_order_relaxed);
	double d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

static void put(td_ring *r, uint64_t i, double d)
{
	uint64_t bits;

	memcpy(&bits, &d, sizeof(bits));
	atomic_store_explicit(&r->tree[i], bits, memory_order_relaxed);
}

void td__ring_prio_init(unsigned char *file, uint64_t tree_offset)
{
	double one = 1.0;

	memcpy(file + tree_offset, &one, sizeof(one));
}

int td__ring_tree_lock(td_ring *r)
{
	while (flock(r->fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return td__error_os(TD_EIO, errno, "ring: locking the sum-tree");
	return TD_OK;
}

void td__ring_tree_unlock(td_ring *r)
{
	flock(r->fd, LOCK_UN);
}

static void set_leaf(td_ring *r, uint64_t slot, double p)
{
	uint64_t i = r->tree_leaves + slot;

	put(r, i, p);
	for (i >>= 1; i >= 1; i >>= 1)
		put(r, i, get(r, 2 * i) + get(r, 2 * i + 1));
	if (p > get(r, 0))
		put(r, 0, p);
}

void td__ring_prio_new_rows(td_ring *r, uint64_t first_slot, uint64_t n)
{
	double maxp = get(r, 0);
	uint64_t j;

	if (!(maxp > 0) || !isfinite(maxp))
		maxp = 1.0; /* a damaged node 0 must not hide new rows */
	for (j = 0; j < n; j++)
		set_leaf(r, (first_slot + j) % r->capacity, maxp);
}

void td__ring_prio_zero(td_ring *r)
{
	uint64_t i;

	for (i = 1; i < 2 * r->tree_leaves; i++)
		put(r, i, 0.0);
}

/* Descend from the root to the leaf holding prefix sum u. */
static uint64_t descend(const td_ring *r, double u)
{
	uint64_t i = 1;

	while (i < r->tree_leaves) {
		double left = get(r, 2 * i);

		if (u < left) {
			i = 2 * i;
		} else {
			u -= left;
			i = 2 * i + 1;
		}
	}
	return i - r->tree_leaves;
}

int td_ring_sample_prioritized(td_dict *dst, int64_t *index_out, double *prob_out, td_ring *ring)
{
	int64_t n, j;

	if (!ring || !dst)
		return td__error(TD_EINVAL, "td_ring_sample_prioritized: NULL %s", ring ? "dst" : "ring");
	if (!ring->tree)
		return td__error(TD_ENOTSUP,
			"td_ring_sample_prioritized: the ring was created "
			"without priorities (td_ring_create_opts.prioritized)");
	if (td_dict_batch_ndim(dst) != 1)
		return td__error(TD_EINVAL,
			"td_ring_sample_prioritized: the dict must have batch "
			"shape [n]");
	n = td_dict_batch_shape(dst)[0];
	TD_TRY(td__ring_own(ring, "td_ring_sample_prioritized"));
	TD_TRY(td__ring_resolve(ring, dst, n, true, true, "td_ring_sample_prioritized"));
	for (j = 0; j < n; j++) {
		unsigned misses = 0;

		for (;;) {
			double total = get(ring, 1), u, p;
			uint64_t s, w1, w2;

			if (!(total > 0) || !isfinite(total) || misses++ >= 64 * 1024)
				return td__error(TD_ENOTFOUND,
					"td_ring_sample_prioritized: no published "
					"row with a priority above 0");
			u = (double)(td__ring_next(ring) >> 11) * 0x1.0p-53 * total;
			s = descend(ring, u);
			if (s >= ring->capacity)
				continue;
			p = get(ring, ring->tree_leaves + s);
			w1 = atomic_load_explicit(&ring->seq[s], memory_order_acquire);
			if (!(p > 0) || !td__ring_sampleable(ring, w1))
				continue;
			td__ring_copy_out(ring, s, j);
			atomic_thread_fence(memory_order_acquire);
			w2 = atomic_load_explicit(&ring->seq[s], memory_order_relaxed);
			if (w1 != w2)
				continue;
			if (index_out)
				index_out[j] = (int64_t)s;
			if (prob_out)
				prob_out[j] = p / total;
			break;
		}
	}
	return TD_OK;
}

int td_ring_update_priority(td_ring *ring, const int64_t *index, const double *priority, size_t n)
{
	size_t j;

	if (!ring || (n && (!index || !priority)))
		return td__error(TD_EINVAL, "td_ring_update_priority: NULL argument");
	if (!ring->tree)
		return td__error(TD_ENOTSUP,
			"td_ring_update_priority: the ring was created "
			"without priorities (td_ring_create_opts.prioritized)");
	if (!ring->writable)
		return td__error(TD_EREADONLY, "td_ring_update_priority: the ring is open read-only");
	for (j = 0; j < n; j++) {
		if (index[j] < 0 || (uint64_t)index[j] >= ring->capacity)
			return td__error(TD_EINDEX, "td_ring_update_priority: slot %lld out of [0, %llu)",
				(long long)index[j], (unsigned long long)ring->capacity);
		if (!(priority[j] >= 0) || !isfinite(priority[j]))
			return td__error(TD_EINVAL,
				"td_ring_update_priority: priority %g is not "
				"finite and >= 0",
				priority[j]);
	}
	TD_TRY(td__ring_own(ring, "td_ring_update_priority"));
	TD_TRY(td__ring_tree_lock(ring));
	for (j = 0; j < n; j++)
		set_leaf(ring, (uint64_t)index[j], priority[j]);
	td__ring_tree_unlock(ring);
	return TD_OK;
}
