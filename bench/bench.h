/* SPDX-License-Identifier: MIT */
/*
 * bench.h - the harness behind tdstore's benchmark programs: tables of rows
 * named after tensordict's pytest-benchmark tests, calibration and timing in
 * the manner of pytest-benchmark, comparison with the seed CPU table
 * (bench/seed_cpu.tsv), table and JSON output, and a counting allocator for
 * memory-per-leaf figures. Benchmarks are library users: public API only.
 */
#ifndef TD_BENCH_H
#define TD_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define BENCH_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define BENCH_PRINTF(fmt, args)
#endif

/** Returned by a row function whose result contradicts its fixture (see bench_fail()). */
#define BENCH_EUNEXPECTED (-1000)

/**
 * One benchmark row. `name` is the seed's test name, spelled exactly. A row
 * whose `run` is NULL has no C analogue: it is listed as "n/a" with `note`
 * as the reason.
 *
 * Per row the harness calls setup(&state, arg) once (untimed), then times
 * rounds of k calls run(state, 0..k-1), then teardown(state). With
 * `prepare`, each round first calls prepare(state, k) and afterwards
 * unprepare(state, k), both untimed: the C form of pytest-benchmark's
 * pedantic `setup=` (a fresh fixture per call, e.g. for lock_()). Every
 * function returns 0 or a negative td_status / BENCH_EUNEXPECTED.
 */
typedef struct bench_row {
	const char *name;
	int (*setup)(void **state, const void *arg);
	int (*run)(void *state, size_t i);
	void (*teardown)(void *state);
	int (*prepare)(void *state, size_t k);
	void (*unprepare)(void *state, size_t k);
	const void *arg;
	/** Entries (keys, values, dicts) one call walks or makes; 0: not reported per entry. */
	size_t entries;
	/** n/a rows: why. Measured rows: how the C operation differs, or NULL. */
	const char *note;
} bench_row;

/** The rows that mirror one Python benchmark file. */
typedef struct bench_suite {
	const char *file;
	const bench_row *rows;
	size_t count;
} bench_suite;

/** Memory taken by one fixture, measured with the counting allocator. */
typedef struct bench_memory {
	const char *fixture;    /**< e.g. "big_td" */
	size_t leaves;          /**< tensor leaves */
	size_t dicts;           /**< nested dicts (the root not counted) */
	uint64_t dict_bytes;    /**< bytes the dict structure holds (tensors given) */
	uint64_t dict_allocs;   /**< live allocations behind them */
	uint64_t dict_peak;     /**< peak bytes while building the dict */
	uint64_t tensor_bytes;  /**< bytes of the tensor buffers (headers + data) */
	uint64_t tensor_allocs; /**< allocations behind them */
	uint64_t data_bytes;    /**< numel * itemsize over all leaves */
	int64_t leaked_bytes;   /**< bytes still allocated after everything was freed */
} bench_memory;

/** A benchmark program: its suites and optional memory measurements. */
typedef struct bench_program {
	const char *name;
	const bench_suite *const *suites;
	size_t nsuites;
	/** List seed rows that no suite names (so that none is silently dropped). */
	bool check_seed_coverage;
	/**
	 * Fill up to `cap` records and return how many, or a negative status.
	 * Called when no tdstore object is alive; it brackets its work with
	 * bench_count_begin() / bench_count_end(). May be NULL.
	 */
	int (*memory)(bench_memory *out, size_t cap);
} bench_program;

/** One row of the seed table, generated from bench/seed_cpu.tsv (seed_cpu.c). */
typedef struct bench_seed {
	const char *name;
	double ops_per_s;
} bench_seed;

extern const bench_seed bench_seed_cpu[];
extern const size_t bench_seed_cpu_count;

/** Parse options, run the selected rows, print the report. @return the exit status. */
int bench_main(const bench_program *prog, int argc, char **argv);

/**
 * Record why a row's result is wrong (printed with the row) and return
 * BENCH_EUNEXPECTED.
 */
int bench_fail(const char *fmt, ...) BENCH_PRINTF(1, 2);

/** Keep a result alive so that the compiler cannot drop the work behind it. */
extern volatile uintptr_t bench_sink;
#define BENCH_USE(x) (bench_sink += (uintptr_t)(x))

/* ------------------------------------------------------------------------ */
/* Counting allocator                                                        */
/* ------------------------------------------------------------------------ */

/** Counters of the counting allocator. */
typedef struct bench_alloc_stats {
	uint64_t allocs;     /**< blocks allocated (a realloc counts as one) */
	uint64_t frees;      /**< blocks released */
	uint64_t bytes;      /**< bytes requested in total */
	int64_t live;        /**< bytes currently allocated */
	int64_t live_blocks; /**< blocks currently allocated */
	uint64_t peak;       /**< highest `live` since the last reset */
} bench_alloc_stats;

/**
 * Install the counting allocator (td_set_allocator()) with zeroed
 * counters. Call it only when no tdstore object is alive.
 */
int bench_count_begin(void);

/** The counters now. */
void bench_count_stats(bench_alloc_stats *out);

/** Reset the peak to the current live byte count. */
void bench_count_reset_peak(void);

/**
 * Restore the C library allocator.
 *
 * @return the bytes still allocated under the counting allocator (0 unless
 *         something leaked). Leaked blocks are unreachable, so switching
 *         allocators under them is safe: nothing will free them.
 */
int64_t bench_count_end(void);

#endif /* TD_BENCH_H */
