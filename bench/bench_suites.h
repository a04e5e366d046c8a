/* SPDX-License-Identifier: MIT */
/*
 * bench_suites.h - the row tables of tdbench, one per Python benchmark file
 * of tensordict's seed table.
 */
#ifndef TD_BENCH_SUITES_H
#define TD_BENCH_SUITES_H

#include "bench.h"

/** benchmarks/common/common_ops_test.py (bench_core.c) */
extern const bench_suite bench_core_suite;
/** benchmarks/common/memmap_benchmarks_test.py (bench_memmap.c) */
extern const bench_suite bench_memmap_suite;
/** benchmarks/common/pytree_benchmarks_test.py (bench_pytree.c) */
extern const bench_suite bench_pytree_suite;
/** The seed's other files: nn, functorch, vmap, tensorclass, distributed (bench_na.c) */
extern const bench_suite bench_nn_suite;
extern const bench_suite bench_tensorclass_suite;
extern const bench_suite bench_distributed_suite;

#endif /* TD_BENCH_SUITES_H */
