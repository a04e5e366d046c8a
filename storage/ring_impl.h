/* SPDX-License-Identifier: MIT */
/*
 * ring_impl.h - internals of ring buffers (ring.c, ring_io.c, ring_prio.c,
 * ring_handle.c): the layout of the ring file `.tdstore-ring`
 * (doc/format.md, section 5 "Ring file"), mirrored field by field with
 * static asserts, the sequence word encoding and the handle. Never
 * installed.
 */
#ifndef TD_RING_IMPL_H
#define TD_RING_IMPL_H

#include "store_impl.h"

#include <stdatomic.h>

#define TD_RING_NAME ".tdstore-ring"
#define TD_RING_MAGIC "TDSRING\0"
#define TD_RING_VERSION 1u
#define TD_RING_HEADER_SIZE 128u
#define TD_RING_WRITERS_OFFSET 4096u
#define TD_RING_WRITER_SLOTS 256u
#define TD_RING_WRITER_SIZE 64u
#define TD_RING_SEQ_OFFSET (TD_RING_WRITERS_OFFSET + TD_RING_WRITER_SLOTS * TD_RING_WRITER_SIZE)
/** Header flag bit 0: the file has a sum-tree. The other bits are reserved (0). */
#define TD_RING_F_PRIORITIZED 0x1u
/** Largest capacity (2^40 rows): every offset computed from it fits 64 bits. */
#define TD_RING_MAX_CAPACITY ((uint64_t)1 << 40)
/** Largest ticket: (ticket + 1) << 2 must fit a sequence word. */
#define TD_RING_MAX_TICKET (((uint64_t)1 << 62) - 2)

/*
 * Sequence words (one per slot, doc/format.md 5.4): bits 0-1 the state,
 * bits 2-63 the ticket + 1 of the row the state is about (0: none yet).
 */
#define TD_SEQ_EMPTY 0u
#define TD_SEQ_WRITING 1u
#define TD_SEQ_PUBLISHED 2u

static inline uint64_t td__seq_make(uint64_t ticket, unsigned state)
{
	return ((ticket + 1) << 2) | state;
}

static inline unsigned td__seq_state(uint64_t w)
{
	return (unsigned)(w & 3u);
}

/** The ticket + 1 a word is about (0 for a slot never written). */
static inline uint64_t td__seq_tf(uint64_t w)
{
	return w >> 2;
}

/** Static header at offset 0, written once at creation (little-endian). */
typedef struct td__ring_header {
	char magic[8];           /* "TDSRING\0" */
	uint32_t version;        /* TD_RING_VERSION */
	uint32_t header_size;    /* TD_RING_HEADER_SIZE */
	uint32_t flags;          /* TD_RING_F_*; other bits 0 */
	uint32_t nleaves;        /* tensor leaves of a row */
	uint64_t capacity;       /* rows, 1 .. TD_RING_MAX_CAPACITY */
	uint64_t row_bytes;      /* sum of the leaves' row sizes */
	uint64_t schema_hash;    /* doc/format.md 5.2 */
	uint32_t writer_slots;   /* TD_RING_WRITER_SLOTS */
	uint32_t reserved0;      /* 0 */
	uint64_t writers_offset; /* TD_RING_WRITERS_OFFSET */
	uint64_t seq_offset;     /* TD_RING_SEQ_OFFSET */
	uint64_t tree_offset;    /* 0 without a sum-tree */
	uint64_t tree_leaves;    /* P, a power of two >= capacity; 0 without a sum-tree */
	uint64_t file_size;      /* bytes */
	uint8_t reserved[24];    /* 0 */
	uint64_t checksum;       /* XXH64 of bytes 0..119, seed 0 */
} td__ring_header;

/** Live counters, each 64-bit word atomic, on their own cache lines. */
typedef struct td__ring_live {
	_Atomic uint64_t cursor;    /* offset 128: next ticket to reserve */
	uint8_t pad0[56];
	_Atomic uint64_t cleared;   /* offset 192: tickets below are cleared */
	_Atomic uint64_t reclaimed; /* offset 200: rows taken back from dead writers */
	_Atomic uint64_t dropped;   /* offset 208: rows writers could not store */
	uint8_t pad1[40];
} td__ring_live;

/** One writer slot (doc/format.md 5.3). */
typedef struct td__ring_writer {
	_Atomic uint64_t owner; /* 0: free; else pid (bits 0-31) | nonce << 32 */
	_Atomic uint64_t lo;    /* tickets [lo, hi) the writer may hold */
	_Atomic uint64_t hi;
	uint8_t reserved[40];
} td__ring_writer;

_Static_assert(sizeof(td__ring_header) == TD_RING_HEADER_SIZE, "ring header size");
_Static_assert(offsetof(td__ring_header, capacity) == 24, "capacity offset");
_Static_assert(offsetof(td__ring_header, schema_hash) == 40, "schema_hash offset");
_Static_assert(offsetof(td__ring_header, writer_slots) == 48, "writer_slots offset");
_Static_assert(offsetof(td__ring_header, writers_offset) == 56, "writers_offset offset");
_Static_assert(offsetof(td__ring_header, tree_offset) == 72, "tree_offset offset");
_Static_assert(offsetof(td__ring_header, file_size) == 88, "file_size offset");
_Static_assert(offsetof(td__ring_header, checksum) == 120, "checksum offset");
_Static_assert(sizeof(td__ring_live) == 128, "live part size");
_Static_assert(offsetof(td__ring_live, cleared) == 64, "cleared at file offset 192");
_Static_assert(offsetof(td__ring_live, dropped) == 80, "dropped at file offset 208");
_Static_assert(sizeof(td__ring_writer) == TD_RING_WRITER_SIZE, "writer slot size");
_Static_assert(sizeof(_Atomic uint64_t) == 8, "64-bit atomics");

/** One tensor leaf of a row. */
typedef struct td__ring_leaf {
	td_key *key;            /* its path, to find it in callers' dicts */
	char *base;             /* the mapped leaf: slot s at base + s * row_bytes */
	size_t row_bytes;
	td_dtype dtype;
	int row_ndim;
	int64_t row_shape[TD_MAX_DIMS];
	td_tensor whole;        /* the store's leaf (a reference), for strided copies */
} td__ring_leaf;

struct td_ring {
	td_store *store;
	bool writable;
	int fd;                       /* the ring file (its flock guards the sum-tree) */
	unsigned char *map;
	size_t map_len;
	const td__ring_header *hdr;
	td__ring_live *live;
	td__ring_writer *writers;
	_Atomic uint64_t *seq;        /* capacity words */
	_Atomic uint64_t *tree;       /* 2P words holding doubles, or NULL */
	uint64_t capacity;
	uint64_t tree_leaves;
	td__ring_leaf *leaves;
	size_t nleaves;
	char **ptrs;                  /* nleaves data pointers, per call scratch */
	const td_tensor **tens;       /* nleaves tensors of the caller's dict, per call */
	int wslot;                    /* this handle's writer slot, -1 when none */
	uint64_t owner;               /* the value in that slot */
	uint64_t epoch;               /* td__ring_epoch() of the process the handle is set up for */
	uint64_t seed_epoch;          /* td__ring_epoch() when the generator was last seeded */
	uint64_t rng[4];
	uint64_t *set;                /* without-replacement hash set (slot + 1), grown once */
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
