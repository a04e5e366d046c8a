/* SPDX-License-Identifier: MIT */
/*
 * demo.h - `tdstore demo`: a list of steps run in order on shared state.
 * Each step does its work, verifies what it got and reports one line; a
 * failed library call or verification stops the demo with a message, so the
 * demo doubles as a smoke test.
 *
 * To add a step: write `int demo_step_<name>(demo *d)` in a tools/demo_*.c
 * file, declare it below and add one row to the step table in
 * tools/cmd_demo.c. A step returns 0, or -1 after recording why it failed
 * (DEMO_CALL, DEMO_CHECK and demo_fail() do the recording). What a step
 * builds for later steps goes into `demo` and is released by demo_free().
 */
#ifndef TD_TOOLS_DEMO_H
#define TD_TOOLS_DEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tdstore.h>

#define DEMO_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))

/* Rows of the transition fixture and the length of its observations. */
#define DEMO_ROWS 8
#define DEMO_OBS 64

/* What the steps share. */
typedef struct demo {
	/* Fixtures, built by the first steps (tools/demo_fixtures.c). */
	td_dict *td;     /* {"a": zeros(3,4,5), "b": {"b1": zeros(3,4,5)}}, batch [3,4] */
	td_dict *big;    /* big_td: "0".."99" = zeros(3,4) + i, batch [3,4] */
	td_dict *nested; /* big_nested_td: the 19-level chain, batch [3,4] */
	td_dict *rb;     /* transitions, batch [DEMO_ROWS] */
	unsigned checks; /* verifications passed so far */
	char line[1024]; /* the running step's report */
	size_t len;
	char failure[1024]; /* why the demo stopped */
} demo;

/* One row of the step table. */
typedef struct demo_step {
	const char *name;    /* short name, printed at the start of its line */
	const char *summary; /* what it does, for `tdstore demo --help` */
	int (*run)(demo *d);
} demo_step;

/* ------------------------------------------------------------------------ */
/* Reporting and verification (tools/demo_util.c)                            */
/* ------------------------------------------------------------------------ */

/* Append to the running step's report line. */
void demo_say(demo *d, const char *fmt, ...) DEMO_PRINTF(2, 3);

/* Record why the demo stops; returns -1. */
int demo_fail(demo *d, const char *fmt, ...) DEMO_PRINTF(2, 3);

/* A library call's status: 0 when `rc` >= 0, else -1 after recording
 * `what` with the library's error message. */
int demo_lib(demo *d, int rc, const char *what);

/* Count a passed verification (0), or record a failed one (-1). */
int demo_check(demo *d, bool ok, const char *fmt, ...) DEMO_PRINTF(3, 4);

/* Verify that a call failed with `expected` and said why. */
int demo_check_code(demo *d, int rc, int expected, const char *what);

/* Verify td_dict_equal(a, b) == `expect`; `what` names the comparison. */
int demo_check_equal(demo *d, const td_dict *a, const td_dict *b, int expect, const char *what);

/*
 * These macros need `int rc` and a label `out` in the calling function: on
 * failure they set rc to -1 and jump there. DEMO_CALL records a failed
 * library call (a negative td_status), DEMO_CHECK a false condition;
 * DEMO_TRY runs a demo helper that has recorded its own failure.
 */
#define DEMO_CALL(d, expr) \
	do { \
		if ((rc = demo_lib((d), (expr), #expr)) < 0) \
			goto out; \
	} while (0)
#define DEMO_TRY(expr) \
	do { \
		if ((rc = (expr)) < 0) \
			goto out; \
	} while (0)
#define DEMO_CHECK(d, ...) \
	do { \
		if ((rc = demo_check((d), __VA_ARGS__)) < 0) \
			goto out; \
	} while (0)

/* ------------------------------------------------------------------------ */
/* Formatting and measuring (tools/demo_util.c)                              */
/* ------------------------------------------------------------------------ */

/* "[3,4]". Results live in a few rotating static buffers: use them in one
 * printf call at a time. */
const char *demo_shape(int ndim, const int64_t *shape);
/* The batch shape of `d`, as demo_shape(). */
const char *demo_batch(const td_dict *d);
/* "float32[3,4,5]", as demo_shape(). */
const char *demo_tensor(const td_tensor *t);

/* What a dict holds, counted through nested dicts. */
typedef struct demo_stats {
	size_t leaves;    /* tensors */
	size_t blobs;     /* strings and bytes */
	size_t dicts;     /* nested dicts */
	size_t max_depth; /* components of the longest key */
	int64_t numel;    /* elements of all tensors */
	size_t nbytes;    /* bytes of all tensors */
	double sum;       /* sum of all tensor elements, as float64 */
} demo_stats;

/* These return a td_status, for DEMO_CALL. */
int demo_dict_stats(const td_dict *d, demo_stats *out);
int demo_tensor_sum(const td_tensor *t, double *sum);
int demo_tensor_moments(const td_tensor *t, double *mean, double *std);
/* Element `index` (t->ndim positions) of `t` as a double. */
int demo_tensor_at(const td_tensor *t, const int64_t *index, double *out);
/* Element `index` of tensor `key` of `d` as a double. */
int demo_at(const td_dict *d, const char *key, const int64_t *index, double *out);
/* The sum of tensor `key` of `d`. */
int demo_sum(const td_dict *d, const char *key, double *sum);
/* Largest |a - b| over the tensor leaves of `a` and the same keys of `b`. */
int demo_dict_max_abs_diff(const td_dict *a, const td_dict *b, double *out);
/* The paths of the leaves and nested dicts of `d` in iteration order,
 * joined as "a, b.b1, b" into `buf` (truncated to fit). */
int demo_dict_key_list(const td_dict *d, unsigned flags, char *buf, size_t cap);
/* Tensor `key` of `d` is a view of the same buffer as tensor `key` of `e`. */
bool demo_shares(const td_dict *d, const td_dict *e, const char *key);

/* ------------------------------------------------------------------------ */
/* Fixtures (tools/demo_fixtures.c)                                          */
/* ------------------------------------------------------------------------ */

/* These return a td_status; the dict is the caller's. */
int demo_fixture_td(td_dict **out);
int demo_fixture_big_td(td_dict **out);
int demo_fixture_big_nested_td(td_dict **out);
/* `rows` transitions: obs[i][j] = i + j/64, action i % 4, reward (i % 4) / 2,
 * done when i % 4 == 3, next.obs = obs + 1. */
int demo_fixture_transitions(td_dict **out, int64_t rows);

/* Release every fixture. */
void demo_free(demo *d);

/* ------------------------------------------------------------------------ */
/* Steps                                                                     */
/* ------------------------------------------------------------------------ */

/* tools/demo_fixtures.c */
int demo_step_td(demo *d);
int demo_step_big_td(demo *d);
int demo_step_big_nested_td(demo *d);
int demo_step_transitions(demo *d);
/* tools/demo_access.c */
int demo_step_get(demo *d);
int demo_step_set(demo *d);
int demo_step_iterate(demo *d);
int demo_step_index(demo *d);
int demo_step_index_put(demo *d);
/* tools/demo_shape.c */
int demo_step_unbind_stack(demo *d);
int demo_step_split_cat(demo *d);
int demo_step_reshape(demo *d);
int demo_step_permute(demo *d);
int demo_step_select_exclude(demo *d);
int demo_step_flatten(demo *d);
/* tools/demo_ops.c */
int demo_step_apply(demo *d);
int demo_step_arith(demo *d);
int demo_step_equal(demo *d);
int demo_step_lock(demo *d);
int demo_step_clone_copy(demo *d);
int demo_step_dtype(demo *d);
/** Give dict `c` (batch [DEMO_ROWS]) the array of strings "info.task": "task-<row>". */
int demo_set_tasks(demo *d, td_dict *c);
int demo_step_non_tensor(demo *d);

/* Storage (tools/demo_store.c). */
int demo_step_store(demo *d);

/* Replay buffer shared by processes (tools/demo_ring.c). */
int demo_step_ring(demo *d);

#endif /* TD_TOOLS_DEMO_H */
