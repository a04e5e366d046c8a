/* SPDX-License-Identifier: MIT */
/*
 * ring_io.c - writing and reading rows of a ring (doc/format.md 5.4, the
 * publish protocol):
 *
 *   writer: t0 = fetch_add(cursor, n); record [t0, t0 + n) in its writer
 *           slot; per row, CAS the slot's sequence word from an older,
 *           not-being-written value to WRITING(t); release fence; copy the
 *           data; store PUBLISHED(t) with release order.
 *   reader: w1 = load-acquire(seq); require PUBLISHED; copy; acquire
 *           fence; w2 = load(seq); keep the copy only if w1 == w2.
 *
 * The ticket inside every word makes an overwrite after a wrap visible to a
 * reader even when the slot is published again before it checks (no ABA),
 * and the CAS gives each slot to one writer at a time, so that a published
 * row is never written by anyone but the next claimant.
 */
#include "ring_impl.h"

#include <math.h>

/* Rows claimed, copied and published together (one 64-bit mask). */
#define CHUNK 64
/* Failed draws in a row before a sampler counts what is left to draw from. */
#define MAX_MISSES 4096

static int batch_rows(const td_dict *d, int64_t *n, const char *fn)
{
	if (td_dict_batch_ndim(d) != 1)
		return td__error(TD_EINVAL, "%s: the dict must have batch shape [n]", fn);
	*n = td_dict_batch_shape(d)[0];
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * Give slot `s` to ticket `t`: true when this writer now holds it. A slot
 * already holding a later ticket (this writer is a lap behind) or being
 * written by a live writer is not taken (the row is dropped); a slot left
 * WRITING by a dead writer is taken over.
 */
static bool claim(td_ring *r, uint64_t s, uint64_t t)
{
	uint64_t w = atomic_load_explicit(&r->seq[s], memory_order_relaxed);
	uint64_t want = td__seq_make(t, TD_SEQ_WRITING);

	for (;;) {
		bool takeover = false;

		if (td__seq_tf(w) > t)
			return false;
		if (td__seq_state(w) == TD_SEQ_WRITING) {
			if (td__ring_owner_alive(r, td__seq_tf(w) - 1))
				return false;
			takeover = true;
		}
		if (atomic_compare_exchange_weak_explicit(&r->seq[s], &w, want, memory_order_acq_rel,
				memory_order_relaxed)) {
			if (takeover)
				atomic_fetch_add_explicit(&r->live->reclaimed, 1, memory_order_relaxed);
			return true;
		}
	}
}

/* Copy rows [i, i + k) of the source into slots starting at s (no wrap). */
static int copy_in(td_ring *r, int64_t i, uint64_t s, uint64_t k, bool batched)
{
	size_t l;

	for (l = 0; l < r->nleaves; l++) {
		const td__ring_leaf *lf = &r->leaves[l];
		td_tensor dv = TD_TENSOR_INIT, sv = TD_TENSOR_INIT;
		int rc;

		if (r->ptrs[l]) {
			memcpy(lf->base + s * lf->row_bytes, r->ptrs[l] + (size_t)i * lf->row_bytes,
				k * lf->row_bytes);
			continue;
		}
		/* A strided source: gathered through views. */
		rc = td_tensor_narrow(&dv, &lf->whole, 0, (int64_t)s, (int64_t)k);
		if (rc == TD_OK && batched)
			rc = td_tensor_narrow(&sv, r->tens[l], 0, i, (int64_t)k);
		if (rc == TD_OK && !batched)
			rc = td_tensor_unsqueeze(&sv, r->tens[l], 0);
		if (rc == TD_OK)
			rc = td_tensor_copy(&dv, &sv);
		td_tensor_release(&dv);
		td_tensor_release(&sv);
		if (rc < 0)
			return rc;
	}
	return TD_OK;
}

/*
 * Claim, copy and publish up to CHUNK rows: tickets [t, t + k), source rows
 * from `i`. @return the rows stored, or a negative status (rows claimed are
 * published all the same: the slot is never left held by a live writer).
 */
static int64_t write_chunk(td_ring *r, uint64_t t, int64_t i, uint64_t k, bool batched)
{
	uint64_t mask = 0, j, s0 = t % r->capacity;
	int64_t stored = 0;
	int rc = TD_OK;

	for (j = 0; j < k; j++)
		if (claim(r, (s0 + j) % r->capacity, t + j))
			mask |= (uint64_t)1 << j;
	/* The claims are visible before any byte of the data changes. */
	atomic_thread_fence(memory_order_release);
	if (mask == (k == 64 ? ~(uint64_t)0 : ((uint64_t)1 << k) - 1) && s0 + k <= r->capacity) {
		rc = copy_in(r, i, s0, k, batched);
	} else {
		for (j = 0; rc == TD_OK && j < k; j++)
			if (mask & ((uint64_t)1 << j))
				rc = copy_in(r, i + (int64_t)j, (s0 + j) % r->capacity, 1, batched);
	}
	for (j = 0; j < k; j++) {
		uint64_t s = (s0 + j) % r->capacity, w = td__seq_make(t + j, TD_SEQ_WRITING);

		if (!(mask & ((uint64_t)1 << j)))
			continue;
		/* A failed copy leaves the row empty rather than published half-done. */
		if (atomic_compare_exchange_strong_explicit(&r->seq[s], &w,
				td__seq_make(t + j, rc == TD_OK ? TD_SEQ_PUBLISHED : TD_SEQ_EMPTY),
				memory_order_release, memory_order_relaxed))
			stored++;
	}
	if (r->tree && rc == TD_OK && stored > 0) {
		rc = td__ring_tree_lock(r);
		if (rc == TD_OK) {
			for (j = 0; j < k; j++)
				if (mask & ((uint64_t)1 << j))
					td__ring_prio_new_rows(r, (s0 + j) % r->capacity, 1);
			td__ring_tree_unlock(r);
		}
	}
	if (stored < (int64_t)k)
		atomic_fetch_add_explicit(&r->live->dropped, k - (uint64_t)stored, memory_order_relaxed);
	return rc < 0 ? rc : stored;
}

static int64_t extend_impl(td_ring *r, const td_dict *rows, int64_t n, bool batched,
	uint64_t *first_out, const char *fn)
{
	td__ring_writer *ws;
	uint64_t t0, k, done = 0;
	int64_t skip = 0, stored = 0;

	if (!r->writable)
		return td__error(TD_EREADONLY, "%s: the ring is open read-only", fn);
	TD_TRY(td__ring_own(r, fn));
	TD_TRY(td__ring_resolve(r, rows, n, batched, false, fn));
	if (n == 0)
		return 0;
	ws = &r->writers[r->wslot];
	t0 = atomic_fetch_add_explicit(&r->live->cursor, (uint64_t)n, memory_order_relaxed);
	if (t0 > TD_RING_MAX_TICKET - (uint64_t)n)
		return td__error(TD_EOVERFLOW, "%s: the ring's cursor is exhausted", fn);
	if (first_out)
		*first_out = t0;
	/* More rows than slots: the first ones would be overwritten at once. */
	if ((uint64_t)n > r->capacity) {
		skip = n - (int64_t)r->capacity;
		n = (int64_t)r->capacity;
		t0 += (uint64_t)skip;
	}
	/* hi first, then lo: a reader loading lo then hi sees a superset (ring.c). */
	atomic_store_explicit(&ws->lo, UINT64_MAX, memory_order_relaxed);
	atomic_store_explicit(&ws->hi, t0 + (uint64_t)n, memory_order_release);
	atomic_store_explicit(&ws->lo, t0, memory_order_release);
	while (done < (uint64_t)n) {
		int64_t got;

		k = (uint64_t)n - done < CHUNK ? (uint64_t)n - done : CHUNK;
		got = write_chunk(r, t0 + done, skip + (int64_t)done, k, batched);
		if (got < 0) {
			stored = got;
			break;
		}
		stored += got;
		done += k;
	}
	/* Tickets that were never claimed stay as they were: nothing is held. */
	atomic_store_explicit(&ws->lo, 0, memory_order_release);
	atomic_store_explicit(&ws->hi, 0, memory_order_release);
	return stored;
}

int64_t td_ring_extend(uint64_t *first_out, td_ring *ring, const td_dict *rows)
{
	int64_t n = 0;

	if (!ring || !rows)
		return td__error(TD_EINVAL, "td_ring_extend: NULL %s", ring ? "rows" : "ring");
	TD_TRY(batch_rows(rows, &n, "td_ring_extend"));
	return extend_impl(ring, rows, n, true, first_out, "td_ring_extend");
}

int td_ring_add(uint64_t *ticket_out, td_ring *ring, const td_dict *row)
{
	if (!ring || !row)
		return td__error(TD_EINVAL, "td_ring_add: NULL %s", ring ? "row" : "ring");
	if (td_dict_batch_ndim(row) != 0)
		return td__error(TD_EINVAL, "td_ring_add: the row must have batch shape []");
	return (int)extend_impl(ring, row, 1, false, ticket_out, "td_ring_add");
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * Copy slot `s` into row j if it holds a row that `ok` accepts, checking
 * its sequence word before and after (the seqlock). @return whether the
 * copy is whole.
 */
static bool read_row(td_ring *r, uint64_t s, int64_t j, uint64_t want, bool exact)
{
	uint64_t w1 = atomic_load_explicit(&r->seq[s], memory_order_acquire), w2;

	if (exact ? w1 != want : !td__ring_sampleable(r, w1))
		return false;
	td__ring_copy_out(r, s, j);
	atomic_thread_fence(memory_order_acquire);
	w2 = atomic_load_explicit(&r->seq[s], memory_order_relaxed);
	return w1 == w2;
}

/* Without replacement: insert slot `s` into the set; false if present. */
static bool set_insert(td_ring *r, uint64_t s)
{
	size_t mask = r->set_cap - 1, h = (size_t)((s * 0x9E3779B97F4A7C15ull) >> 20) & mask;

	while (r->set[h]) {
		if (r->set[h] == s + 1)
			return false;
		h = (h + 1) & mask;
	}
	r->set[h] = s + 1;
	return true;
}

static void set_remove_last(td_ring *r, uint64_t s)
{
	/* Linear probing: delete by re-inserting the cluster after it. */
	size_t mask = r->set_cap - 1, h = (size_t)((s * 0x9E3779B97F4A7C15ull) >> 20) & mask;

	while (r->set[h] != s + 1)
		h = (h + 1) & mask;
	r->set[h] = 0;
	for (h = (h + 1) & mask; r->set[h]; h = (h + 1) & mask) {
		uint64_t v = r->set[h];

		r->set[h] = 0;
		set_insert(r, v - 1);
	}
}

static int set_prepare(td_ring *r, int64_t n)
{
	size_t want = 16, bytes;

	while (want < (size_t)n * 2)
		want <<= 1;
	if (want > r->set_cap) {
		uint64_t *p;

		if (!td__mul_size(want, sizeof(*p), &bytes) || !(p = td__malloc(bytes)))
			return td__error_nomem(want * sizeof(*p));
		td__free(r->set);
		r->set = p;
		r->set_cap = want;
	}
	memset(r->set, 0, r->set_cap * sizeof(*r->set));
	return TD_OK;
}

/*
 * Rows of the window [lo, lo + span) that may be sampled now (a scan of at
 * most `capacity` words); used when draws keep failing.
 */
static int64_t count_sampleable(const td_ring *r, uint64_t lo, uint64_t span)
{
	int64_t n = 0;
	uint64_t t;

	for (t = lo; t < lo + span; t++)
		if (td__ring_sampleable(r,
				atomic_load_explicit(&r->seq[t % r->capacity], memory_order_relaxed)))
			n++;
	return n;
}

static void span_of(const td_ring *r, uint64_t *lo, uint64_t *span)
{
	uint64_t h = atomic_load_explicit(&r->live->cursor, memory_order_acquire);
	uint64_t c = atomic_load_explicit(&r->live->cleared, memory_order_acquire);
	uint64_t o = h > r->capacity ? h - r->capacity : 0;

	*lo = c > o ? c : o;
	*span = *lo < h ? h - *lo : 0;
}

/* Draw row j: a slot uniformly among the sampleable ones. */
static int draw_one(td_ring *r, int64_t j, bool distinct, uint64_t *slot)
{
	uint64_t lo, span, misses = 0;

	span_of(r, &lo, &span);
	for (;;) {
		uint64_t s = 0;

		if (span == 0 || misses >= MAX_MISSES) {
			int64_t avail;

			span_of(r, &lo, &span);
			avail = count_sampleable(r, lo, span) - (distinct ? j : 0);
			if (avail <= 0)
				return td__error(TD_ENOTFOUND, "td_ring_sample: %s",
					distinct ? "fewer published rows than requested" : "no published row");
			misses = 0;
			continue;
		}
		s = (lo + td__ring_below(r, span)) % r->capacity;
		misses++;
		if (distinct && !set_insert(r, s))
			continue;
		if (read_row(r, s, j, 0, false)) {
			*slot = s;
			return TD_OK;
		}
		if (distinct)
			set_remove_last(r, s);
	}
}

/*
 * Sampling with replacement, PREFETCH rows at a time: their slots are drawn
 * first and their sequence words and first bytes prefetched, so that the
 * cache misses of small rows overlap. A draw that fails is redrawn by
 * draw_one(), which keeps the result uniform among sampleable rows.
 */
#define PREFETCH 8

static int sample_prefetched(td_ring *r, int64_t n, int64_t *index_out)
{
	uint64_t lo, span, slots[PREFETCH];
	int64_t j, g, k;
	size_t l;

	span_of(r, &lo, &span);
	for (j = 0; j < n; j += g) {
		g = n - j < PREFETCH ? n - j : PREFETCH;
		for (k = 0; k < g; k++) {
			uint64_t s = span ? (lo + td__ring_below(r, span)) % r->capacity : 0;

			slots[k] = s;
			__builtin_prefetch((const void *)&r->seq[s]);
			for (l = 0; l < r->nleaves; l++)
				__builtin_prefetch(r->leaves[l].base + s * r->leaves[l].row_bytes);
		}
		for (k = 0; k < g; k++) {
			uint64_t s = slots[k];

			if (!span || !read_row(r, s, j + k, 0, false))
				TD_TRY(draw_one(r, j + k, false, &s));
			if (index_out)
				index_out[j + k] = (int64_t)s;
		}
	}
	return TD_OK;
}

int td_ring_sample(td_dict *dst, int64_t *index_out, td_ring *ring, unsigned flags)
{
	bool distinct = (flags & TD_RING_NO_REPLACEMENT) != 0;
	int64_t n = 0, j;

	if (!ring || !dst)
		return td__error(TD_EINVAL, "td_ring_sample: NULL %s", ring ? "dst" : "ring");
	if (flags & ~TD_RING_NO_REPLACEMENT)
		return td__error(TD_EINVAL, "td_ring_sample: unknown flags 0x%x", flags);
	TD_TRY(batch_rows(dst, &n, "td_ring_sample"));
	TD_TRY(td__ring_own(ring, "td_ring_sample"));
	TD_TRY(td__ring_resolve(ring, dst, n, true, true, "td_ring_sample"));
	if (distinct) {
		if ((uint64_t)n > ring->capacity)
			return td__error(TD_ENOTFOUND,
				"td_ring_sample: %lld distinct rows from a "
				"ring of %llu",
				(long long)n, (unsigned long long)ring->capacity);
		TD_TRY(set_prepare(ring, n));
	}
	if (!distinct)
		return sample_prefetched(ring, n, index_out);
	for (j = 0; j < n; j++) {
		uint64_t s = 0;

		TD_TRY(draw_one(ring, j, distinct, &s));
		if (index_out)
			index_out[j] = (int64_t)s;
	}
	return TD_OK;
}

int64_t td_ring_read(td_dict *dst, uint64_t *index_out, uint64_t *next_out, td_ring *ring,
	uint64_t pos)
{
	uint64_t lo, span, head;
	int64_t n = 0, k = 0;

	if (!ring || !dst)
		return td__error(TD_EINVAL, "td_ring_read: NULL %s", ring ? "dst" : "ring");
	TD_TRY(batch_rows(dst, &n, "td_ring_read"));
	TD_TRY(td__ring_resolve(ring, dst, n, true, true, "td_ring_read"));
	span_of(ring, &lo, &span);
	head = lo + span;
	if (pos < lo)
		pos = lo;
	while (k < n && pos < head) {
		uint64_t t = pos++;

		if (t < atomic_load_explicit(&ring->live->cleared, memory_order_relaxed))
			continue;
		if (read_row(ring, t % ring->capacity, k, td__seq_make(t, TD_SEQ_PUBLISHED), true)) {
			if (index_out)
				index_out[k] = t;
			k++;
		}
	}
	if (next_out)
		*next_out = pos;
	return k;
}
