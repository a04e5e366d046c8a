/* SPDX-License-Identifier: MIT */
/*
 * demo_fixtures.c - the fixtures of tensordict's benchmark table
 * (common_ops_test.py: td, big_td, big_nested_td) and a replay-buffer-like
 * batch of transitions, and the demo steps that build and check them.
 */
#include <stdio.h>
#include <string.h>

#include "demo.h"

static const int64_t batch34[2] = { 3, 4 };
static const int64_t shape345[3] = { 3, 4, 5 };

/* Leaves of big_nested_td, keys of big_td. */
#define NESTED_LEAVES 19
#define BIG_KEYS 100

/* zeros(shape) + value, float32, stored under the path `parts`. */
static int set_full(td_dict *d, const char *const *parts, size_t n, int ndim, const int64_t *shape,
	double value)
{
	td_tensor t = TD_TENSOR_INIT;
	td_key *key = NULL;
	int rc = td_tensor_full(&t, TD_DTYPE_F32, ndim, shape, td_scalar_float(value));

	if (rc >= 0)
		rc = td_key_from_path(&key, parts, n);
	if (rc >= 0)
		rc = td_dict_set_tensor_key(d, key, &t);
	td_key_free(key);
	td_tensor_release(&t);
	return rc;
}

/* {"a": a, "b": {"b1": b}}: the nested dict is built and handed over, as
 * TensorDict does with a nested Python dict. */
int demo_fixture_td(td_dict **out)
{
	static const char *const a[1] = { "a" }, *const b1[1] = { "b1" };
	td_dict *d = NULL, *child = NULL;
	int rc = td_dict_new(&d, 2, batch34);

	if (rc >= 0)
		rc = set_full(d, a, 1, 3, shape345, 0);
	if (rc >= 0)
		rc = td_dict_new(&child, 2, batch34);
	if (rc >= 0)
		rc = set_full(child, b1, 1, 3, shape345, 0);
	if (rc >= 0 && (rc = td_dict_set_dict_take(d, "b", child)) >= 0)
		child = NULL;
	td_dict_free(child);
	if (rc < 0) {
		td_dict_free(d);
		return rc;
	}
	*out = d;
	return TD_OK;
}

int demo_fixture_big_td(td_dict **out)
{
	td_dict *d = NULL;
	char name[8];
	const char *parts[1] = { name };
	int i, rc = td_dict_new(&d, 2, batch34);

	for (i = 0; rc >= 0 && i < BIG_KEYS; i++) {
		snprintf(name, sizeof(name), "%d", i);
		rc = set_full(d, parts, 1, 2, batch34, i);
	}
	if (rc < 0) {
		td_dict_free(d);
		return rc;
	}
	*out = d;
	return TD_OK;
}

/* Leaf k (1..19) goes to ("0", ..., str(k - 1), "t") with value k: setting
 * them in order creates each level just after the "t" of its parent, the
 * order unflatten_keys(".") gives in tensordict. */
int demo_fixture_big_nested_td(td_dict **out)
{
	char names[NESTED_LEAVES][4];
	const char *path[NESTED_LEAVES + 1];
	td_dict *d = NULL;
	int k, rc = td_dict_new(&d, 2, batch34);

	for (k = 1; rc >= 0 && k <= NESTED_LEAVES; k++) {
		snprintf(names[k - 1], sizeof(names[k - 1]), "%d", k - 1);
		path[k - 1] = names[k - 1];
		path[k] = "t";
		rc = set_full(d, path, (size_t)k + 1, 2, batch34, k);
	}
	if (rc < 0) {
		td_dict_free(d);
		return rc;
	}
	*out = d;
	return TD_OK;
}

/* A new float32/int64/bool tensor of `rows` x `cols` (cols 0: [rows]), filled
 * by row i and column j with `value(i, j)`. */
static int make_column(td_tensor *t, td_dtype dtype, int64_t rows, int64_t cols,
	double (*value)(int64_t i, int64_t j))
{
	const int64_t shape[2] = { rows, cols };
	int64_t i, j, w = cols > 0 ? cols : 1;
	unsigned char *p;
	int rc = td_tensor_empty(t, dtype, cols > 0 ? 2 : 1, shape);

	if (rc < 0)
		return rc;
	p = td_tensor_data(t);
	for (i = 0; i < rows; i++) {
		for (j = 0; j < w; j++) {
			double v = value(i, j);
			size_t at = (size_t)(i * w + j);

			if (dtype == TD_DTYPE_F32)
				((float *)(void *)p)[at] = (float)v;
			else if (dtype == TD_DTYPE_I64)
				((int64_t *)(void *)p)[at] = (int64_t)v;
			else
				((bool *)(void *)p)[at] = v != 0;
		}
	}
	return TD_OK;
}

static double obs_value(int64_t i, int64_t j)
{
	return (double)i + (double)j / DEMO_OBS;
}

static double next_obs_value(int64_t i, int64_t j)
{
	return obs_value(i + 1, j);
}

static double action_value(int64_t i, int64_t j)
{
	return (double)(i % 4);
}

static double reward_value(int64_t i, int64_t j)
{
	return (double)(i % 4) / 2;
}

static double done_value(int64_t i, int64_t j)
{
	return i % 4 == 3;
}

/* One leaf of the transition fixture. */
typedef struct column {
	const char *key;
	td_dtype dtype;
	int64_t cols;
	double (*value)(int64_t i, int64_t j);
} column;

static const column columns[] = {
	{ "obs", TD_DTYPE_F32, DEMO_OBS, obs_value },
	{ "action", TD_DTYPE_I64, 0, action_value },
	{ "reward", TD_DTYPE_F32, 0, reward_value },
	{ "done", TD_DTYPE_BOOL, 0, done_value },
	{ "next.obs", TD_DTYPE_F32, DEMO_OBS, next_obs_value },
};

int demo_fixture_transitions(td_dict **out, int64_t rows)
{
	td_dict *d = NULL;
	size_t i;
	int rc = td_dict_new(&d, 1, &rows);

	for (i = 0; rc >= 0 && i < sizeof(columns) / sizeof(columns[0]); i++) {
		td_tensor t = TD_TENSOR_INIT;

		rc = make_column(&t, columns[i].dtype, rows, columns[i].cols, columns[i].value);
		if (rc >= 0)
			rc = td_dict_set_tensor_take(d, columns[i].key, &t);
		td_tensor_release(&t);
	}
	if (rc < 0) {
		td_dict_free(d);
		return rc;
	}
	*out = d;
	return TD_OK;
}

void demo_free(demo *d)
{
	td_dict_free(d->td);
	td_dict_free(d->big);
	td_dict_free(d->nested);
	td_dict_free(d->rb);
	d->td = d->big = d->nested = d->rb = NULL;
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                     */
/* ------------------------------------------------------------------------ */

int demo_step_td(demo *d)
{
	const td_tensor *a, *b1;
	demo_stats s;
	int rc;

	DEMO_CALL(d, demo_fixture_td(&d->td));
	DEMO_CALL(d, td_dict_get_tensor(&a, d->td, "a"));
	DEMO_CALL(d, td_dict_get_tensor(&b1, d->td, "b.b1"));
	DEMO_CALL(d, demo_dict_stats(d->td, &s));
	DEMO_CHECK(d, s.leaves == 2 && s.dicts == 1 && s.sum == 0 && s.numel == 120,
		"td has %zu leaves, %zu dicts, sum %g, %lld elements; expected 2, 1, 0, 120", s.leaves,
		s.dicts, s.sum, (long long)s.numel);
	demo_say(d, "batch %s: a %s, b.b1 %s; %zu leaves, %zu nested dict, sum %g", demo_batch(d->td),
		demo_tensor(a), demo_tensor(b1), s.leaves, s.dicts, s.sum);
out:
	return rc;
}

int demo_step_big_td(demo *d)
{
	const td_tensor *t;
	demo_stats s;
	int rc;

	DEMO_CALL(d, demo_fixture_big_td(&d->big));
	DEMO_CALL(d, td_dict_get_tensor(&t, d->big, "99"));
	DEMO_CALL(d, demo_dict_stats(d->big, &s));
	/* 12 elements per leaf, leaf i holding i: 12 * (0 + ... + 99). */
	DEMO_CHECK(d, s.leaves == BIG_KEYS && s.dicts == 0 && s.sum == 12 * 4950,
		"big_td has %zu leaves, %zu dicts, sum %g; expected 100, 0, 59400", s.leaves, s.dicts,
		s.sum);
	demo_say(d, "batch %s: %zu leaves \"0\"..\"99\" %s = i, sum %g", demo_batch(d->big), s.leaves,
		demo_tensor(t), s.sum);
out:
	return rc;
}

int demo_step_big_nested_td(demo *d)
{
	demo_stats s;
	int rc;

	DEMO_CALL(d, demo_fixture_big_nested_td(&d->nested));
	DEMO_CALL(d, demo_dict_stats(d->nested, &s));
	/* Leaf k holds k: 12 * (1 + ... + 19). */
	DEMO_CHECK(d,
		s.leaves == NESTED_LEAVES && s.dicts == NESTED_LEAVES && s.max_depth == NESTED_LEAVES + 1 &&
			s.sum == 12 * 190,
		"big_nested_td has %zu leaves, %zu dicts, depth %zu, sum %g; "
		"expected 19, 19, 20, 2280",
		s.leaves, s.dicts, s.max_depth, s.sum);
	demo_say(d,
		"batch %s: chain \"0.t\" .. \"0.1.(...).18.t\", %zu leaves, %zu dicts, keys "
		"up to %zu deep, sum %g",
		demo_batch(d->nested), s.leaves, s.dicts, s.max_depth, s.sum);
out:
	return rc;
}

int demo_step_transitions(demo *d)
{
	const td_tensor *obs, *act, *rew, *done, *next;
	double ndone;
	demo_stats s;
	int rc;

	DEMO_CALL(d, demo_fixture_transitions(&d->rb, DEMO_ROWS));
	DEMO_CALL(d, td_dict_get_tensor(&obs, d->rb, "obs"));
	DEMO_CALL(d, td_dict_get_tensor(&act, d->rb, "action"));
	DEMO_CALL(d, td_dict_get_tensor(&rew, d->rb, "reward"));
	DEMO_CALL(d, td_dict_get_tensor(&done, d->rb, "done"));
	DEMO_CALL(d, td_dict_get_tensor(&next, d->rb, "next.obs"));
	DEMO_CALL(d, demo_tensor_sum(done, &ndone));
	DEMO_CALL(d, demo_dict_stats(d->rb, &s));
	DEMO_CHECK(d, s.leaves == 5 && s.dicts == 1 && ndone == DEMO_ROWS / 4,
		"transitions have %zu leaves, %zu dicts, %g done; expected 5, 1, %d", s.leaves, s.dicts,
		ndone, DEMO_ROWS / 4);
	demo_say(d,
		"batch %s: obs %s, action %s, reward %s, done %s (%g set), next.obs %s; "
		"%zu B",
		demo_batch(d->rb), demo_tensor(obs), demo_tensor(act), demo_tensor(rew), demo_tensor(done),
		ndone, demo_tensor(next), s.nbytes);
out:
	return rc;
}
