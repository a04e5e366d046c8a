/* SPDX-License-Identifier: MIT */
/*
 * tdbench.c - the benchmark program that mirrors tensordict's CI benchmark
 * table (CPU run): every row, measured or n/a, in the seed's order, and the
 * memory per leaf of big_td and big_nested_td. See bench/README.md.
 */
#include "config.h"

#include "bench.h"
#include "bench_fixtures.h"
#include "bench_suites.h"

static const bench_suite *const suites[] = {
	&bench_core_suite,
	&bench_memmap_suite,
	&bench_pytree_suite,
	&bench_distributed_suite,
	&bench_nn_suite,
	&bench_tensorclass_suite,
};

static const bench_program tdbench = { "tdbench", suites, sizeof(suites) / sizeof(suites[0]), true,
	fix_memory };

int main(int argc, char **argv)
{
	return bench_main(&tdbench, argc, argv);
}
