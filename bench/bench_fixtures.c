/* SPDX-License-Identifier: MIT */
/*
 * bench_fixtures.c - tensordict's benchmark fixtures in C (common_ops_test.py
 * lines 15-83): td, big_td, big_nested_td, its stacked variant; and the
 * memory taken per leaf by big_td and big_nested_td, counted with a
 * counting allocator.
 */
#include "config.h"

#include "bench_fixtures.h"

#include <stdio.h>
#include <string.h>

const int64_t fix_b34[2] = { 3, 4 };
const int64_t fix_b310[2] = { 3, 10 };
const int64_t fix_b320[2] = { 3, 20 };
const int64_t fix_s345[3] = { 3, 4, 5 };

const char *const fix_k20[20] = { "20", "19", "18", "17", "16", "15", "14", "13", "12", "11", "10",
	"9", "8", "7", "6", "5", "4", "3", "2", "1" };

const char *const fix_leaf[20] = { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11",
	"12", "13", "14", "15", "16", "17", "18", "t" };

const char fix_leaf_dotted[] = "0.1.2.3.4.5.6.7.8.9.10.11.12.13.14.15.16.17.18.t";

const char *fix_key(size_t i)
{
	static char names[FIX_BIG_KEYS][4];

	if (i >= FIX_BIG_KEYS)
		return NULL;
	if (names[i][0] == '\0')
		snprintf(names[i], sizeof(names[i]), "%zu", i);
	return names[i];
}

int fix_full(td_tensor *t, int ndim, const int64_t *shape, double value)
{
	return td_tensor_full(t, TD_DTYPE_F32, ndim, shape, td_scalar_float(value));
}

int fix_leaves(td_tensor *out, size_t n, double first, int ndim, const int64_t *shape)
{
	size_t i;

	for (i = 0; i < n; i++) {
		int rc = fix_full(&out[i], ndim, shape, first + (double)i);

		if (rc < 0) {
			fix_release(out, i);
			return rc;
		}
	}
	return 0;
}

void fix_release(td_tensor *t, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		td_tensor_release(&t[i]);
}

/* {"a": a, "b": {"b1": b}}: the nested dict is built and handed over, as
 * TensorDict does with a nested Python dict. */
int fix_build_td(td_dict **out, const td_tensor *a, const td_tensor *b)
{
	td_dict *d = NULL, *child = NULL;
	int rc;

	rc = td_dict_new(&d, 2, fix_b34);
	if (rc >= 0)
		rc = td_dict_set_tensor(d, "a", a);
	if (rc >= 0)
		rc = td_dict_new(&child, 2, fix_b34);
	if (rc >= 0)
		rc = td_dict_set_tensor(child, "b1", b);
	if (rc >= 0 && (rc = td_dict_set_dict_take(d, "b", child)) >= 0)
		child = NULL;
	td_dict_free(child);
	if (rc < 0) {
		td_dict_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

int fix_build_big(td_dict **out, const td_tensor *leaves)
{
	td_dict *d;
	size_t i;
	int rc;

	rc = td_dict_new(&d, 2, fix_b34);
	if (rc < 0)
		return rc;
	for (i = 0; i < FIX_BIG_KEYS; i++) {
		rc = td_dict_set_tensor(d, fix_key(i), &leaves[i]);
		if (rc < 0) {
			td_dict_free(d);
			return rc;
		}
	}
	*out = d;
	return 0;
}

/* Leaf i (1..19) goes to ("0", ..., str(i - 1), "t"): setting them in order
 * creates each level just after the "t" of its parent, which is the order
 * unflatten_keys(".") gives in tensordict. */
int fix_build_nested(td_dict **out, const td_tensor *leaves, const int64_t *batch)
{
	char key[sizeof(fix_leaf_dotted)];
	size_t i, len = 0;
	td_dict *d;
	int rc;

	rc = td_dict_new(&d, 2, batch);
	if (rc < 0)
		return rc;
	for (i = 1; i <= FIX_NESTED_LEAVES; i++) {
		/* "0.1...<i - 1>.t": the key of leaf i - 1 with its "t" moved down a level */
		len += (size_t)sprintf(key + len, "%s.", fix_leaf[i - 1]);
		memcpy(key + len, "t", 2);
		rc = td_dict_set_tensor(d, key, &leaves[i - 1]);
		if (rc < 0) {
			td_dict_free(d);
			return rc;
		}
	}
	*out = d;
	return 0;
}

int fix_big_td(td_dict **out)
{
	td_tensor leaves[FIX_BIG_KEYS];
	int rc;

	rc = fix_leaves(leaves, FIX_BIG_KEYS, 0, 2, fix_b34);
	if (rc < 0)
		return rc;
	rc = fix_build_big(out, leaves);
	fix_release(leaves, FIX_BIG_KEYS);
	return rc;
}

int fix_big_nested_td(td_dict **out, const int64_t *batch)
{
	td_tensor leaves[FIX_NESTED_LEAVES];
	int rc;

	rc = fix_leaves(leaves, FIX_NESTED_LEAVES, 1, 2, batch);
	if (rc < 0)
		return rc;
	rc = fix_build_nested(out, leaves, batch);
	fix_release(leaves, FIX_NESTED_LEAVES);
	return rc;
}

int fix_big_nested_stacked_td(td_dict **out)
{
	td_dict *chain = NULL, **parts = NULL;
	size_t n = 0;
	int rc;

	rc = fix_big_nested_td(&chain, fix_b310);
	if (rc >= 0)
		rc = td_dict_unbind(&parts, &n, chain, 1);
	if (rc >= 0)
		rc = td_dict_stack(out, (const td_dict *const *)parts, n, 1);
	td_dict_array_free(parts, n);
	td_dict_free(chain);
	return rc;
}

int fix_big_nested_lazy_td(td_dict **out)
{
	td_dict *chain = NULL, **parts = NULL;
	size_t n = 0;
	int rc;

	rc = fix_big_nested_td(&chain, fix_b310);
	if (rc >= 0)
		rc = td_dict_unbind(&parts, &n, chain, 1);
	if (rc >= 0)
		rc = td_lazy_stack(out, parts, n, 1, TD_LAZY_TAKE);
	if (rc >= 0)
		td_free(parts); /* the pieces now belong to the stack */
	else
		td_dict_array_free(parts, n);
	td_dict_free(chain);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Memory per leaf                                                           */
/* ------------------------------------------------------------------------ */

typedef int (*build_fn)(td_dict **out, const td_tensor *leaves);

static int build_nested34(td_dict **out, const td_tensor *leaves)
{
	return fix_build_nested(out, leaves, fix_b34);
}

/* Make the leaves, then the dict from them, reading the counters between:
 * the dict's share is what building it added (the tensors are shared). */
static int count_fixture(bench_memory *m, build_fn build, size_t nleaves, double first)
{
	td_tensor leaves[FIX_BIG_KEYS];
	bench_alloc_stats s0, s1, s2;
	td_dict *d = NULL;
	int rc;

	rc = bench_count_begin();
	if (rc < 0)
		return rc;
	bench_count_stats(&s0);
	rc = fix_leaves(leaves, nleaves, first, 2, fix_b34);
	if (rc >= 0) {
		bench_count_stats(&s1);
		bench_count_reset_peak();
		rc = build(&d, leaves);
		bench_count_stats(&s2);
		td_dict_free(d);
		fix_release(leaves, nleaves);
		m->tensor_bytes = (uint64_t)(s1.live - s0.live);
		m->tensor_allocs = (uint64_t)(s1.live_blocks - s0.live_blocks);
		m->dict_bytes = (uint64_t)(s2.live - s1.live);
		m->dict_allocs = (uint64_t)(s2.live_blocks - s1.live_blocks);
		m->dict_peak = s2.peak - (uint64_t)s1.live;
		m->data_bytes = (uint64_t)nleaves * 12 * sizeof(float);
	}
	m->leaves = nleaves;
	m->leaked_bytes = bench_count_end();
	return rc;
}

int fix_memory(bench_memory *out, size_t cap)
{
	int rc;

	if (cap < 2)
		return bench_fail("fix_memory: room for %zu records, need 2", cap);
	memset(out, 0, 2 * sizeof(*out));
	out[0].fixture = "big_td";
	rc = count_fixture(&out[0], fix_build_big, FIX_BIG_KEYS, 0);
	if (rc < 0)
		return rc;
	out[1].fixture = "big_nested_td";
	out[1].dicts = FIX_NESTED_LEAVES;
	rc = count_fixture(&out[1], build_nested34, FIX_NESTED_LEAVES, 1);
	return rc < 0 ? rc : 2;
}
