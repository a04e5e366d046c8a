/* SPDX-License-Identifier: MIT */
/*
 * ring_impl.h - internals of ring buffers (ring.c, ring_io.c, ring_prio.c,
 * ring_handle.c): the handle. The layout of the ring file `.tdstore-ring`
 * and its sequence words (doc/format.md section 5) are in format.h. Never
 * installed.
 */
#ifndef TD_RING_IMPL_H
#define TD_RING_IMPL_H

#include "store_impl.h"

/** One tensor leaf of a row. */
typedef struct td__ring_leaf {
	td_key *key; /* its path, to find it in callers' dicts */
	char *base;  /* the mapped leaf: slot s at base + s * row_bytes */
	size_t row_bytes;
	td_dtype dtype;
	int row_ndim;
	int64_t row_shape[TD_MAX_DIMS];
	td_tensor whole; /* the store's leaf (a reference), for strided copies */
} td__ring_leaf;

struct td_ring {
	td_store *store;
	bool writable;
	int fd; /* the ring file (its flock guards the sum-tree) */
	unsigned char *map;
	size_t map_len;
	const td__ring_header *hdr;
	td__ring_live *live;
	td__ring_writer *writers;
	_Atomic uint64_t *seq;  /* capacity words */
	_Atomic uint64_t *tree; /* 2P words holding doubles, or NULL */
	uint64_t capacity;
	uint64_t tree_leaves;
	td__ring_leaf *leaves;
	size_t nleaves;
	char **ptrs;            /* nleaves data pointers, per call scratch */
	const td_tensor **tens; /* nleaves tensors of the caller's dict, per call */
	int wslot;              /* this handle's writer slot, -1 when none */
	uint64_t owner;         /* the value in that slot */
	uint64_t epoch;         /* td__ring_epoch() of the process the handle is set up for */
	uint64_t seed_epoch;    /* td__ring_epoch() when the generator was last seeded */
	uint64_t rng[4];
	uint64_t *set; /* without-replacement hash set (slot + 1), grown once */
	size_t set_cap;
};

/* ---- ring_handle.c ---- */

/** Set up a new handle for this process: its fork epoch and a default seed. */
int td__ring_own_init(td_ring *r);
/** Claim a free writer slot for this handle (TD_EBUSY when every slot is live). */
int td__ring_claim_slot(td_ring *r, const char *what);
/** Free the slots of writers whose process is gone. @return how many. */
int td__ring_free_dead_slots(td_ring *r);
/** Give this handle's writer slot back (none: nothing to do). */
void td__ring_release_slot(td_ring *r);
/** Is a live writer registered for ticket `t` (its range covers it)? */
bool td__ring_owner_alive(const td_ring *r, uint64_t t);
/** How many fork()s led to this process (a child adds one); see td__ring_own(). */
uint64_t td__ring_epoch(void);
/**
 * Make a handle inherited through fork() this process's own, at the first
 * call in the child: a read-write handle claims a writer slot for this
 * process (the parent's stays the parent's), and the generator is reseeded
 * unless td_ring_seed() was called in this process. A no-op otherwise (one
 * atomic load). `fn` names the caller in messages.
 * @return TD_OK; TD_EBUSY (no free writer slot); the errors of reopening
 *         the ring file (a prioritized read-write ring)
 */
int td__ring_own(td_ring *r, const char *fn);
uint64_t td__ring_next(td_ring *r);
/** A uniform integer in [0, n), n >= 1 (Lemire's method, unbiased). */
uint64_t td__ring_below(td_ring *r, uint64_t n);
/**
 * Find the ring's leaves in `d`, which holds n rows (batch shape [n]; with
 * `batched` false one row, batch shape [], leaves of the rows' shapes),
 * into r->tens and r->ptrs. A destination (`dst`) must be contiguous and
 * writable; a non-contiguous source gets a NULL pointer (copied through
 * td_tensor_copy). `fn` names the caller in messages.
 */
int td__ring_resolve(td_ring *r, const td_dict *d, int64_t n, bool batched, bool dst,
	const char *fn);
/** Copy slot `slot` into row `j` of the resolved destination. */
void td__ring_copy_out(td_ring *r, uint64_t slot, int64_t j);
/** Is the sequence word of a row that may be sampled (published, not cleared)? */
bool td__ring_sampleable(const td_ring *r, uint64_t w);

/* ---- ring_prio.c ---- */

int td__ring_tree_lock(td_ring *r);
void td__ring_tree_unlock(td_ring *r);
/** Set slot priorities to the largest one ever set; under the tree lock. */
void td__ring_prio_new_rows(td_ring *r, uint64_t first_slot, uint64_t n);
/** Zero every priority (td_ring_clear); under the tree lock. */
void td__ring_prio_zero(td_ring *r);
/** Initialize a new file's tree (the largest priority: 1.0). */
void td__ring_prio_init(unsigned char *file, uint64_t tree_offset);

#endif /* TD_RING_IMPL_H */
