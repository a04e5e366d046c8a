/* SPDX-License-Identifier: MIT */
/*
 * tdstore/ring.h - replay buffers shared by processes: a circular buffer
 * of `capacity` rows over a directory store, filled by any number of
 * writer processes at once while others sample it.
 *
 * A ring is a store directory (tensordict's memmap layout, see store.h)
 * whose every leaf has `capacity` as its first dimension, plus a file
 * `.tdstore-ring` in that directory holding the live shared state: the
 * 64-bit reserve cursor, one sequence word per row and, for prioritized
 * rings, a sum-tree of priorities (doc/format.md, "Ring file").
 *
 * Rows and tickets: every row ever written gets a ticket, 0, 1, 2, ...,
 * from the shared cursor; ticket t lives in slot (row index) t % capacity,
 * so that when the ring wraps the oldest rows are overwritten. A writer
 * reserves tickets, marks their slots as being written, copies the data
 * into the mapped files and then publishes each row. Readers (sample, read)
 * take only published rows and check each row's sequence word before and
 * after copying it (a seqlock): a row that a writer starts to overwrite
 * during the copy is dropped and another one drawn, so no call ever returns
 * a half-written row or a mix of two rows.
 *
 * Crashes: a writer killed while it copies leaves the rows it marked
 * unpublished; they are never sampled, every other row stays intact, and
 * other writers carry on. Writers that meet such a row one lap later take
 * its slot over; td_ring_reclaim() finds and releases them at any time.
 *
 * Python: the directory stays loadable by tensordict's
 * TensorDict.load_memmap(): it sees every leaf with its full capacity as
 * first dimension, rows never written included (zeros), in slot order, and
 * ignores `.tdstore-ring` (`make interop-check` loads rings, wrapped and
 * not, with Python tensordict and compares every row).
 *
 * Threads and processes: a td_ring handle is used by one thread at a time;
 * any number of processes (or threads, each with its own handle) may open
 * the same ring and call every function concurrently, unless a function
 * says otherwise. A handle copied into a child by fork() becomes the
 * child's own at its first call there: a read-write copy takes a writer
 * slot for the child (the parent's stays registered to the parent, and
 * closing the copy never frees it) and a lock of its own on the sum-tree,
 * and the copy's generator is reseeded unless td_ring_seed() was called in
 * the child, so that parent and children never draw the same rows by
 * inheritance. That first call may then also fail with TD_EBUSY (no writer
 * slot free for the child) or TD_EIO (the ring file could not be reopened).
 */
#ifndef TDSTORE_RING_H
#define TDSTORE_RING_H

#include "common.h"
#include "dict.h"
#include "store.h"

TD_BEGIN_DECLS

typedef struct td_ring td_ring;

/** Current version of td_ring_create_opts; set `version` to it. */
#define TD_RING_CREATE_OPTS_VERSION 1

/** How td_ring_create() makes a ring. Fields are only appended. */
typedef struct td_ring_create_opts {
	unsigned version; /**< TD_RING_CREATE_OPTS_VERSION */
	/** keep a sum-tree of priorities (td_ring_sample_prioritized()); default false */
	bool prioritized;
	/** TD_SYNC_FULL (default): the new files are synced before the call returns */
	td_sync_mode sync;
} td_ring_create_opts;

/** Initializer for td_ring_create_opts: no priorities, every file synced. */
#define TD_RING_CREATE_OPTS_INIT \
	{ \
		TD_RING_CREATE_OPTS_VERSION, false, TD_SYNC_FULL \
	}

/** Current version of td_ring_open_opts; set `version` to it. */
#define TD_RING_OPEN_OPTS_VERSION 1

/** How td_ring_open() opens a ring. Fields are only appended. */
typedef struct td_ring_open_opts {
	unsigned version; /**< TD_RING_OPEN_OPTS_VERSION */
	/** open read-write (a writer: add, extend, clear, ...); default false: sample and read only */
	bool writable;
} td_ring_open_opts;

/** Initializer for td_ring_open_opts: read-only. */
#define TD_RING_OPEN_OPTS_INIT \
	{ \
		TD_RING_OPEN_OPTS_VERSION, false \
	}

/** td_ring_sample() flag: draw distinct rows (sampling without replacement). */
#define TD_RING_NO_REPLACEMENT 0x1u

/**
 * Create a ring in a new store directory and open it read-write.
 *
 * The rows are described by `row`, a dict of batch shape [] (one row): its
 * keys, nested dicts, dtypes and shapes (its data is not used). The store
 * gets, for each leaf of shape S, a file of shape [capacity] + S, filled
 * with zeros (allocated on disk, so that a full disk fails here rather than
 * later); nested dicts get batch shape [capacity] + their own. Then the
 * ring file is written under a temporary name and linked into place: the
 * ring exists once `.tdstore-ring` does.
 *
 * @param[out] out   receives the ring; release with td_ring_close(); NULL
 *                   on failure
 * @param path       the directory (created; its parent must exist)
 * @param row        one row's layout: tensors with at least one element and
 *                   nested dicts, batch shape []
 * @param capacity   rows, >= 1
 * @param opts       NULL for the defaults (TD_RING_CREATE_OPTS_INIT: no
 *                   priorities, every file synced), or options whose
 *                   `version` is TD_RING_CREATE_OPTS_VERSION
 * @return TD_OK;
 *         TD_EINVAL (NULL arguments, an unknown options version or `sync`
 *         mode, capacity < 1, a `row` with a batch shape, no tensor, an
 *         empty tensor, a string or bytes leaf, a lazy stack at any depth,
 *         or a reserved key);
 *         TD_EEXISTS (`path` already holds a store or a ring);
 *         TD_EOVERFLOW (the files would be too large);
 *         TD_ENOSPC; TD_EIO; TD_ENOMEM.
 *         On failure the files already written stay on disk, without a
 *         ring file.
 */
TD_API int td_ring_create(td_ring **out, const char *path, const td_dict *row, int64_t capacity,
	const td_ring_create_opts *opts);

/**
 * Open an existing ring. It carries on where it stopped: the cursor, the
 * published rows and the priorities are those in the files. Rows left
 * unpublished by writers that were killed stay unpublished (never sampled)
 * until td_ring_reclaim() or a writer takes their slots over.
 *
 * @param[out] out  receives the ring; release with td_ring_close()
 * @param path      the directory
 * @param opts      NULL for the defaults (TD_RING_OPEN_OPTS_INIT:
 *                  read-only, sample and read only), or options whose
 *                  `version` is TD_RING_OPEN_OPTS_VERSION
 * @return TD_OK;
 *         TD_EINVAL (NULL arguments, an unknown options version);
 *         TD_ENOTFOUND (no such directory, or no `.tdstore-ring` in it);
 *         TD_ECORRUPT (a ring file that is too short, has a bad magic,
 *         header size, checksum, reserved field or layout, or that does not
 *         match the store's leaves; a store holding a lazy stack; and the
 *         errors of td_store_open());
 *         TD_EVERSION (a ring file version this library does not read);
 *         TD_EBUSY (writable: every writer slot is held by a live
 *         process);
 *         TD_EREADONLY; TD_EIO; TD_ENOMEM
 */
TD_API int td_ring_open(td_ring **out, const char *path, const td_ring_open_opts *opts);

/**
 * Close a ring: its writer slot is released and its store closed. Nothing
 * is synced: the rows written are in the files' pages (every process
 * mapping them sees them) and reach the disk when the kernel writes them
 * back; call td_ring_sync() first to make them durable against a crash of
 * the machine. Cannot fail; NULL is accepted.
 */
TD_API void td_ring_close(td_ring *ring);

/**
 * Flush the ring's data and state to disk (msync and fsync of the leaf
 * files and the ring file). td_ring_close() does not call it.
 *
 * @return TD_OK (also for a read-only ring); TD_EINVAL for NULL; TD_EIO
 */
TD_API int td_ring_sync(td_ring *ring);

/**
 * The ring's store: its dict holds every leaf with all `capacity` rows, as
 * Python sees it. Borrowed: valid until td_ring_close(). Rows read through
 * it directly are not protected against concurrent writers (use
 * td_ring_read() for that).
 *
 * @return the store; NULL for NULL
 */
TD_API td_store *td_ring_store(td_ring *ring);

/** @return the ring's capacity in rows; 0 for NULL. */
TD_API int64_t td_ring_capacity(const td_ring *ring);

/**
 * The number of rows the ring holds: the tickets reserved since the last
 * td_ring_clear(), at most the capacity. Rows still being written and rows
 * left unpublished by killed writers are counted until their slots are
 * overwritten or reclaimed; sampling skips them.
 *
 * @return the length; 0 for NULL
 */
TD_API int64_t td_ring_len(const td_ring *ring);

/** What td_ring_stat() reports. */
typedef struct td_ring_stats {
	int64_t capacity;   /**< rows */
	uint64_t head;      /**< tickets reserved so far (the shared cursor) */
	uint64_t cleared;   /**< tickets below this were cleared by td_ring_clear() */
	uint64_t oldest;    /**< oldest ticket that may be present: max(cleared, head - capacity) */
	int64_t len;        /**< td_ring_len() */
	int64_t published;  /**< slots holding a published row not cleared (counted) */
	int64_t writing;    /**< slots being written, or left so by killed writers (counted) */
	uint64_t reclaimed; /**< rows taken back from killed writers, since creation */
	uint64_t dropped;   /**< rows writers could not store (slot still held one lap later) */
	int writers;        /**< writer handles registered (read-write opens, live or dead) */
	bool prioritized;   /**< the ring keeps a sum-tree */
} td_ring_stats;

/**
 * Describe the ring. `published` and `writing` come from a scan of every
 * sequence word (O(capacity)); with writers running they are a snapshot.
 *
 * @param[out] out  receives the figures
 * @param ring      the ring
 * @return TD_OK; TD_EINVAL for NULL
 */
TD_API int td_ring_stat(td_ring_stats *out, const td_ring *ring);

/**
 * Allocate a dict for `n` rows of the ring: batch shape [n], the ring's
 * keys, contiguous heap tensors filled with zeros. It is what td_ring_sample()
 * and td_ring_read() fill, and what td_ring_extend() takes.
 *
 * @param[out] out  receives the dict; release with td_dict_free()
 * @param n         rows, >= 0
 * @return TD_OK; TD_EINVAL (NULL arguments, n < 0); TD_EOVERFLOW; TD_ENOMEM
 */
TD_API int td_ring_batch_new(td_dict **out, const td_ring *ring, int64_t n);

/**
 * Append rows: `rows` has batch shape [n] and, for every leaf of the ring,
 * a tensor of the same dtype and shape [n] + the row's shape (any strides;
 * extra keys are ignored). The rows get consecutive tickets from the shared
 * cursor and are visible to readers once published, when the call returns.
 * When n exceeds the capacity all n tickets are reserved but only the last
 * `capacity` rows are written (the others would be overwritten at once).
 *
 * A row is not stored (it is counted as dropped) when its slot is still
 * being written by a live writer a whole lap behind; a slot left unpublished
 * by a killed writer is taken over.
 *
 * @param[out] first_out  receives the first row's ticket; may be NULL
 * @param ring       a read-write ring
 * @param rows       the rows
 * @return the number of rows stored (n, or less as said above);
 *         TD_EINVAL (NULL arguments, `rows` without batch shape [n]);
 *         TD_ENOTFOUND (a leaf of the ring is missing from `rows`);
 *         TD_ETYPE (a leaf of another dtype or shape);
 *         TD_EREADONLY (a read-only ring);
 *         TD_EOVERFLOW (the cursor would pass 2^62)
 */
TD_API int64_t td_ring_extend(uint64_t *first_out, td_ring *ring, const td_dict *rows);

/**
 * Append one row: as td_ring_extend() with a dict of batch shape [] whose
 * leaves have the row's shapes.
 *
 * @param[out] ticket_out  receives the row's ticket; may be NULL
 * @param ring             a read-write ring
 * @param row              the row
 * @return 1 when stored, 0 when dropped; the errors of td_ring_extend()
 */
TD_API int td_ring_add(uint64_t *ticket_out, td_ring *ring, const td_dict *row);

/**
 * Seed the handle's generator (xoshiro256**, per handle and so per
 * process). A handle starts seeded from its process id, the time and its
 * address, and a copy made by fork() is reseeded so in the child unless
 * this was called there; the same seed on a ring that does not change
 * gives the same draws, in any process.
 */
TD_API void td_ring_seed(td_ring *ring, uint64_t seed);

/**
 * Draw n rows uniformly among the published rows and copy them into `dst`
 * (batch shape [n], tensors as td_ring_batch_new() makes: the ring's
 * dtypes and row shapes, contiguous, writable). Nothing is allocated,
 * except, once per handle, scratch space for sampling without replacement
 * when n grows. Each row is copied whole from one publication: a row being
 * overwritten during its copy is drawn again.
 *
 * @param[out] dst        receives the rows
 * @param[out] index_out  n slots (row indices in the store's leaves)
 *                        receive the rows drawn; may be NULL
 * @param ring            the ring (read-only or read-write)
 * @param flags           TD_RING_NO_REPLACEMENT for distinct rows, or 0
 * @return TD_OK;
 *         TD_EINVAL (NULL arguments, unknown flags, `dst` without batch
 *         shape [n]);
 *         TD_ENOTFOUND (a leaf missing from `dst`; no published row, or
 *         without replacement fewer than n);
 *         TD_ETYPE (a leaf of another dtype or shape, not contiguous, or
 *         read-only);
 *         TD_ENOMEM (scratch space).
 *         On failure rows of `dst` may have been written.
 */
TD_API int td_ring_sample(td_dict *dst, int64_t *index_out, td_ring *ring, unsigned flags);

/**
 * Read published rows in ticket order (oldest first), for iteration and
 * range reads: from ticket `pos` (raised to the oldest ticket present when
 * lower) up to the cursor, at most n rows into `dst` (as for
 * td_ring_sample(), batch shape [n]). Tickets whose row is not published
 * (being written, left by a killed writer, overwritten during the read)
 * are skipped. `*next_out` receives the ticket after the last one
 * examined: passing it as the next call's `pos` until 0 rows are read
 * visits every row once. `next_out` may point to the caller's `pos`
 * variable, the usual loop:
 *
 *     uint64_t pos = 0;
 *     while ((n = td_ring_read(dst, NULL, &pos, ring, pos)) > 0)
 *             ...
 *
 * @param[out] dst         receives the rows
 * @param[out] index_out   n slots receive the tickets of the rows read;
 *                         may be NULL
 * @param[out] next_out    receives the ticket to pass next (written only on
 *                         success); may be NULL
 * @param ring             the ring (read-only or read-write)
 * @param pos              the first ticket to examine
 * @return the number of rows read (0 at the end); the errors of
 *         td_ring_sample()
 */
TD_API int64_t td_ring_read(td_dict *dst, uint64_t *index_out, uint64_t *next_out, td_ring *ring,
	uint64_t pos);

/**
 * Empty the ring: every ticket reserved so far is cleared (never sampled
 * or read again), len becomes 0, the priorities go back to 0, and writers
 * carry on. Rows being written during the call are cleared too. The data
 * files are not touched.
 *
 * @return TD_OK; TD_EINVAL for NULL; TD_EREADONLY; TD_EIO (the tree lock)
 */
TD_API int td_ring_clear(td_ring *ring);

/**
 * Release what killed writers left: every slot marked as being written by
 * a process that no longer exists becomes empty (never sampled, free for
 * the next writer), and dead processes' writer slots are freed. Safe while
 * other writers run. A process counts as existing until it is reaped
 * (waitpid) by its parent.
 *
 * @param[out] reclaimed_out  receives the number of rows released (0 on
 *                            failure); may be NULL
 * @param ring                a read-write ring
 * @return TD_OK; TD_EINVAL for NULL; TD_EREADONLY
 */
TD_API int td_ring_reclaim(int64_t *reclaimed_out, td_ring *ring);

/**
 * Draw n rows with probability proportional to their priority (a ring
 * created with the option `prioritized`), as td_ring_sample() with
 * replacement. New rows get the largest priority ever set (1.0 at first).
 *
 * @param[out] dst        receives the rows
 * @param[out] index_out  n slots receive the rows drawn; may be NULL
 * @param[out] prob_out   n slots receive each row's probability
 *                        (priority / sum of priorities); may be NULL
 * @param ring            the ring
 * @return TD_OK; the errors of td_ring_sample(); TD_ENOTSUP (a ring without
 *         priorities); TD_ENOTFOUND (every priority is 0)
 */
TD_API int td_ring_sample_prioritized(td_dict *dst, int64_t *index_out, double *prob_out,
	td_ring *ring);

/**
 * Set the priority of rows by slot (as td_ring_sample_prioritized()
 * returns them). The sum-tree is updated under the ring file's lock, so
 * that concurrent updates from several processes add up.
 *
 * @param index     n slots, each in [0, capacity)
 * @param priority  n priorities, finite and >= 0
 * @return TD_OK; TD_EINVAL (NULL arguments, a bad priority); TD_EINDEX (a
 *         slot out of range); TD_ENOTSUP (a ring without priorities);
 *         TD_EREADONLY; TD_EIO (the lock). Nothing is changed on failure.
 */
TD_API int td_ring_update_priority(td_ring *ring, const int64_t *index, const double *priority,
	size_t n);

TD_END_DECLS

#endif /* TDSTORE_RING_H */
