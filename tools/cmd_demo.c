/* SPDX-License-Identifier: MIT */
/*
 * cmd_demo.c - `tdstore demo`: build tensordict's benchmark fixtures and a
 * batch of replay-buffer transitions, run the core operations on them and
 * verify each result, then fill a ring buffer from actor processes while a
 * learner samples it, one line per step (see tools/demo.h). Exits 1 at the
 * first failure, so the demo doubles as a smoke test.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <tdstore.h>

#include "cmd.h"
#include "demo.h"

/* The steps, in the order they run. Later steps use the fixtures. */
static const demo_step steps[] = {
	/* Fixtures (tools/demo_fixtures.c). */
	{ "td", "build td = {a, b: {b1}}, batch [3,4]", demo_step_td },
	{ "big_td", "build big_td: 100 keys \"0\"..\"99\" = zeros(3,4) + i", demo_step_big_td },
	{ "big_nested_td", "build big_nested_td: the 19-level chain \"0.1.(...).18.t\"",
		demo_step_big_nested_td },
	{ "transitions", "build replay-buffer transitions: obs, action, reward, done, next.obs",
		demo_step_transitions },
	/* Access (tools/demo_access.c). */
	{ "get", "nested get by dotted key and td_key (from a string or an array); membership",
		demo_step_get },
	{ "set", "nested set by dotted key and td_key (from a string or an array); set in place",
		demo_step_set },
	{ "iterate", "iterate keys: top level, nested, leaves only", demo_step_iterate },
	{ "index", "batch indexing with an int, slices, a list and a mask", demo_step_index },
	{ "index_put", "write a row with index_put and read it back; index_fill", demo_step_index_put },
	/* Shapes and keys (tools/demo_shape.c). */
	{ "unbind/stack", "unbind, compare the parts, stack back", demo_step_unbind_stack },
	{ "split/cat", "split, split_sizes and chunk, cat back", demo_step_split_cat },
	{ "reshape", "reshape (a view) and back, unsqueeze and squeeze", demo_step_reshape },
	{ "permute", "permute and back; view of a permuted dict refused", demo_step_permute },
	{ "select", "select and exclude keys", demo_step_select_exclude },
	{ "flatten", "flatten_keys and unflatten_keys", demo_step_flatten },
	/* Whole-dict operations (tools/demo_ops.c). */
	{ "apply", "apply (normalize obs) and apply_ in place", demo_step_apply },
	{ "arith", "elementwise ops with a scalar and between dicts", demo_step_arith },
	{ "equal", "equality, allclose, elementwise == and !=", demo_step_equal },
	{ "lock", "lock and unlock: what a locked dict refuses", demo_step_lock },
	{ "clone/copy", "clone (new buffers) against copy (shared buffers)", demo_step_clone_copy },
	{ "dtype", "float16 and bfloat16 round trips", demo_step_dtype },
	{ "non-tensor", "string and bytes leaves", demo_step_non_tensor },
	/* Storage (tools/demo_store.c). */
	{ "store", "save the transitions into a store, reopen, add and remove a leaf",
		demo_step_store },
	/* Replay buffer (tools/demo_ring.c). */
	{ "ring",
		"4 actor processes fill a shared ring buffer while a learner samples it; "
		"reopen and verify",
		demo_step_ring },
};

#define N_STEPS (sizeof(steps) / sizeof(steps[0]))

static void print_help(void)
{
	size_t i;

	printf("usage: tdstore demo [--quiet]\n\n"
		   "Build the fixtures of tensordict's benchmarks and a batch of replay-buffer\n"
		   "transitions, run the core operations on them, save them in a store, then\n"
		   "let actor processes fill a ring buffer while a learner samples it; verify\n"
		   "every result and print one line per step. Exits 1 at the first failed\n"
		   "check, 0 when all pass.\n\n"
		   "options:\n"
		   "  -q, --quiet   print only the summary line\n"
		   "  -h, --help    print this help\n\n"
		   "steps:\n");
	for (i = 0; i < N_STEPS; i++)
		printf("  %-15s %s\n", steps[i].name, steps[i].summary);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Run every step; on a failure return -1 with *failed set to its index. */
static int run_steps(demo *d, bool quiet, size_t *failed)
{
	size_t i;

	for (i = 0; i < N_STEPS; i++) {
		d->len = 0;
		d->line[0] = '\0';
		if (steps[i].run(d) < 0) {
			*failed = i;
			return -1;
		}
		if (!quiet)
			printf("[%2zu/%zu] %-14s %s\n", i + 1, N_STEPS, steps[i].name, d->line);
	}
	return 0;
}

int cmd_demo(int argc, char **argv)
{
	demo d;
	bool quiet = false;
	size_t failed = 0;
	double t0;
	int i, rc;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0) {
			quiet = true;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			print_help();
			return TOOL_EXIT_OK;
		} else {
			fprintf(stderr, "tdstore demo: unknown option '%s'\n", argv[i]);
			return tool_usage_error(tool_find_cmd("demo"));
		}
	}
	memset(&d, 0, sizeof(d));
	if (!quiet)
		printf("tdstore demo: libtdstore %s, %zu steps\n", td_version(NULL, NULL, NULL), N_STEPS);
	t0 = now_ms();
	rc = run_steps(&d, quiet, &failed);
	demo_free(&d);
	if (rc < 0) {
		fflush(stdout);
		fprintf(stderr, "tdstore demo: step %zu/%zu '%s' FAILED: %s\n", failed + 1, N_STEPS,
			steps[failed].name, d.failure);
		return TOOL_EXIT_FAIL;
	}
	printf("tdstore demo: OK, %zu steps, %u checks passed in %.1f ms\n", N_STEPS, d.checks,
		now_ms() - t0);
	return TOOL_EXIT_OK;
}
