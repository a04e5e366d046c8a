/* SPDX-License-Identifier: MIT */
/*
 * bench_impl.h - what the harness files share: the run configuration, one
 * row's result, and the report printers (bench_report.c).
 */
#ifndef TD_BENCH_IMPL_H
#define TD_BENCH_IMPL_H

#include "bench.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Defaults: rounds of at least 50 us (well above the ~20-50 ns step of
 * CLOCK_MONOTONIC), 0.25 s of rounds per row, 10 ms of warm-up. */
#define BENCH_DEFAULT_MIN_TIME 50e-6
#define BENCH_DEFAULT_MAX_TIME 0.25
#define BENCH_DEFAULT_WARMUP 0.01
/* Passes over all rows; a row reports its pass with the lowest Mean. */
#define BENCH_DEFAULT_REPEAT 3

#define TD_BENCH_MAX_MEMORY 8

typedef struct bench_config {
	bool json;
	bool list;
	bool no_memory;
	double min_time; /* seconds, shortest round */
	double max_time; /* seconds of rounds per row */
	double warmup;   /* seconds per row */
	size_t rounds;   /* 0: planned from max_time */
	size_t calls;    /* calls per round; 0: calibrated from min_time */
	size_t repeat;   /* passes over the rows; each row keeps its best pass */
	const char **filters;
	size_t nfilters;
	uint64_t precision_ns;
} bench_config;

typedef enum bench_status {
	BENCH_PENDING = 0,
	BENCH_OK,
	BENCH_NA,      /* no C analogue: the row's note says why */
	BENCH_ERROR,   /* setup or run failed: `error` says why */
	BENCH_UNMAPPED /* a seed row that no suite names */
} bench_status;

typedef struct bench_result {
	const bench_row *row; /* NULL for unmapped seed rows */
	const char *name;
	const char *file;
	const char *note;
	bench_status status;
	size_t entries;
	size_t rounds;
	size_t iterations; /* calls per round */
	double mean_ns;    /* total time / total calls */
	double max_ns;     /* slowest round, per call */
	double min_ns;     /* fastest round, per call */
	double median_ns;
	double stddev_ns;
	double ops_per_s;      /* 1 / mean */
	double seed_ops_per_s; /* 0: not in the seed table */
	double ratio;          /* ours / seed; 0: none */
	char error[640];
} bench_result;

typedef struct bench_report {
	const char *program;
	bench_result *results;
	size_t count;
	bench_memory memory[TD_BENCH_MAX_MEMORY];
	size_t nmemory;
	bool memory_error;
	bench_result memory_failure; /* its `error` when memory_error */
	int name_width;
} bench_report;

uint64_t bench_now_ns(void);

void bench_report_begin(const bench_config *cfg, bench_report *rep);
void bench_report_row(const bench_config *cfg, bench_report *rep, const bench_result *r);
void bench_report_end(const bench_config *cfg, bench_report *rep);
void bench_report_list(const bench_config *cfg, const bench_report *rep);

#endif /* TD_BENCH_IMPL_H */
