/* SPDX-License-Identifier: MIT */
/*
 * bench_util.h - what the storage benchmark programs (tdstorebench,
 * ringbench) share: a monotonic clock, failing loudly with tdstore's last
 * error, and removing a directory tree. A program defines BENCH_PROG, its
 * name for messages, before including this header.
 */
#ifndef TD_BENCH_UTIL_H
#define TD_BENCH_UTIL_H

#include <tdstore.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#ifndef BENCH_PROG
#error "define BENCH_PROG before including bench_util.h"
#endif

/** Seconds on CLOCK_MONOTONIC. */
static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/** Print `what` with tdstore's last error (or errno) and exit 1. */
static inline void bench_die(const char *what)
{
	const td_error *e = td_error_last();

	fprintf(stderr, BENCH_PROG ": %s: %s\n", what, e->code ? e->message : strerror(errno));
	exit(1);
}

/** Exit through bench_die() when a tdstore call fails. */
#define BENCH_CHECK(expr) \
	do { \
		if ((expr) < 0) \
			bench_die(#expr); \
	} while (0)

static inline int bench_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/** Remove `path` and everything under it (errors ignored: a cleanup). */
static inline void bench_rm_rf(const char *path)
{
	nftw(path, bench_rm_entry, 32, FTW_DEPTH | FTW_PHYS);
}

#endif /* TD_BENCH_UTIL_H */
