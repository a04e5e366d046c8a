/* SPDX-License-Identifier: MIT */
/*
 * bench_pytree.c - the rows of tensordict's
 * benchmarks/common/pytree_benchmarks_test.py. The `_td` rows time
 * TensorDict batch operations on a small nested dict and have C
 * counterparts; the `_pytree` rows time torch's tree_map over a plain Python
 * dict, a Python-only baseline, and are n/a.
 */
#include "config.h"

#include "bench.h"
#include "bench_fixtures.h"
#include "bench_suites.h"

#include <tdstore.h>

/* nested_td: 3 leaves and 2 nested dicts. */
#define PYTREE_ENTRIES 5

enum pytree_op { OP_RESHAPE, OP_VIEW, OP_UNBIND, OP_SPLIT, OP_ADD };

static const int64_t s341[3] = { 3, 4, 1 };
static const int64_t s3456[4] = { 3, 4, 5, 6 };

/*
 * TensorDict({"a": {"b": randn(3, 4, 1), "c": {"d": rand(3, 4, 5, 6)}},
 * "c": rand(3, 4, 1)}, [3, 4]). The values are constants here: none of the
 * timed operations depends on them.
 */
static int pytree_setup(void **state, const void *arg)
{
	td_tensor t[3] = { TD_TENSOR_INIT, TD_TENSOR_INIT, TD_TENSOR_INIT };
	td_dict *d = NULL;
	int rc;

	(void)arg;
	rc = fix_full(&t[0], 3, s341, 0.5);
	if (rc >= 0)
		rc = fix_full(&t[1], 4, s3456, 0.25);
	if (rc >= 0)
		rc = fix_full(&t[2], 3, s341, 0.75);
	if (rc >= 0)
		rc = td_dict_new(&d, 2, fix_b34);
	if (rc >= 0)
		rc = td_dict_set_tensor(d, "a.b", &t[0]);
	if (rc >= 0)
		rc = td_dict_set_tensor(d, "a.c.d", &t[1]);
	if (rc >= 0)
		rc = td_dict_set_tensor(d, "c", &t[2]);
	fix_release(t, 3);
	if (rc < 0) {
		td_dict_free(d);
		return rc;
	}
	*state = d;
	return 0;
}

static void pytree_teardown(void *state)
{
	td_dict_free(state);
}

static int add_one(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	(void)item;
	(void)payload;
	return td_tensor_binary_scalar(out, in, td_scalar_int(1), TD_OP_ADD);
}

static int pieces(const td_dict *d, bool split)
{
	static const int64_t sizes[2] = { 1, 2 };
	td_dict **parts = NULL;
	size_t n = 0;
	int rc;

	if (split)
		rc = td_dict_split_sizes(&parts, &n, d, sizes, 2, 0);
	else
		rc = td_dict_unbind(&parts, &n, d, 0);
	if (rc < 0)
		return rc;
	td_dict_array_free(parts, n);
	if (n != (split ? 2u : 3u))
		return bench_fail("%zu pieces, expected %u", n, split ? 2u : 3u);
	return 0;
}

static int run_op(const td_dict *d, enum pytree_op op)
{
	static const int64_t twelve[1] = { 12 };
	td_dict *out = NULL;
	int rc;

	switch (op) {
	case OP_RESHAPE:
		rc = td_dict_reshape(&out, d, 1, twelve);
		break;
	case OP_VIEW:
		rc = td_dict_view(&out, d, 1, twelve);
		break;
	case OP_ADD:
		rc = td_dict_apply(&out, d, add_one, NULL);
		break;
	default:
		return pieces(d, op == OP_SPLIT);
	}
	td_dict_free(out);
	return rc;
}

/* nested_td.reshape(12) */
static int run_reshape(void *state, size_t i)
{
	(void)i;
	return run_op(state, OP_RESHAPE);
}

/* nested_td.view(12) */
static int run_view(void *state, size_t i)
{
	(void)i;
	return run_op(state, OP_VIEW);
}

/* nested_td.unbind(0) */
static int run_unbind(void *state, size_t i)
{
	(void)i;
	return run_op(state, OP_UNBIND);
}

/* nested_td.split([1, 2], 0) */
static int run_split(void *state, size_t i)
{
	(void)i;
	return run_op(state, OP_SPLIT);
}

/* nested_td.apply(lambda x: x + 1) */
static int run_add(void *state, size_t i)
{
	(void)i;
	return run_op(state, OP_ADD);
}

#define ROW(nm, fn, n) \
	{ \
		.name = nm, .setup = pytree_setup, .run = fn, .teardown = pytree_teardown, .entries = n \
	}
#define ROW_NA(nm, what) \
	{ \
		.name = nm, \
		.note = "torch.utils._pytree.tree_map(" what \
				") over a plain Python dict: the Python baseline of the _td row, no tdstore call" \
	}

static const bench_row pytree_rows[] = {
	ROW_NA("test_reshape_pytree", "reshape"),
	ROW("test_reshape_td", run_reshape, 0),
	ROW_NA("test_view_pytree", "view"),
	ROW("test_view_td", run_view, 0),
	ROW_NA("test_unbind_pytree", "unbind"),
	ROW("test_unbind_td", run_unbind, 3 * PYTREE_ENTRIES),
	ROW_NA("test_split_pytree", "split"),
	ROW("test_split_td", run_split, 2 * PYTREE_ENTRIES),
	ROW_NA("test_add_pytree", "x + 1"),
	ROW("test_add_td", run_add, 0),
};

const bench_suite bench_pytree_suite = { "benchmarks/common/pytree_benchmarks_test.py", pytree_rows,
	sizeof(pytree_rows) / sizeof(pytree_rows[0]) };
