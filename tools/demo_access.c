/* SPDX-License-Identifier: MIT */
/*
 * demo_access.c - demo steps that reach into dicts: nested get and set by
 * dotted key and td_key handle (made from a dotted key or an array of
 * components); iteration; batch indexing with an int, a slice, a list and
 * a mask; writing a row with index_put.
 */
#include <string.h>

#include "demo.h"

/* LEAF = ("0", ..., "18", "t") of big_nested_td, and the same dotted. */
static const char *const leaf_path[20] = { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10",
	"11", "12", "13", "14", "15", "16", "17", "18", "t" };
static const char leaf_dotted[] = "0.1.2.3.4.5.6.7.8.9.10.11.12.13.14.15.16.17.18.t";

/* K20 = ("20", "19", ..., "1"): 19 new dicts and a leaf. */
static const char *const k20_path[20] = { "20", "19", "18", "17", "16", "15", "14", "13", "12",
	"11", "10", "9", "8", "7", "6", "5", "4", "3", "2", "1" };
static const char k20_dotted[] = "20.19.18.17.16.15.14.13.12.11.10.9.8.7.6.5.4.3.2.1";

static const int64_t batch34[2] = { 3, 4 };

int demo_step_get(demo *d)
{
	static const char *const next_obs[2] = { "next", "obs" };
	const td_tensor *by_dot, *by_parts, *by_key, *n1, *n2;
	const td_value *v;
	const int64_t at[2] = { 2, 3 };
	td_key *key = NULL, *from_parts = NULL, *no = NULL;
	double x = 0;
	int rc, has_0t, has_a;

	DEMO_CALL(d, td_key_new(&key, leaf_dotted));
	DEMO_CALL(d, td_key_from_path(&from_parts, leaf_path, 20));
	DEMO_CALL(d, td_dict_get_tensor(&by_dot, d->nested, leaf_dotted));
	DEMO_CALL(d, td_dict_get_tensor_key(&by_parts, d->nested, from_parts));
	DEMO_CALL(d, td_dict_get_tensor_key(&by_key, d->nested, key));
	DEMO_CALL(d, demo_tensor_at(by_key, at, &x));
	DEMO_CHECK(d, by_dot == by_parts && by_parts == by_key && td_key_depth(key) == 20 && x == 19,
		"LEAF by dotted key, td_key_new and td_key_from_path: different tensors, "
		"or value %g != 19",
		x);
	DEMO_CALL(d, td_dict_get_tensor(&n1, d->rb, "next.obs"));
	DEMO_CALL(d, td_key_from_path(&no, next_obs, 2));
	DEMO_CALL(d, td_dict_get_tensor_key(&n2, d->rb, no));
	DEMO_CHECK(d, n1 == n2, "\"next.obs\" and {\"next\", \"obs\"} give different tensors");
	DEMO_CALL(d, has_0t = td_dict_contains(d->nested, "0.t", TD_LEAVES_ONLY));
	DEMO_CALL(d, has_a = td_dict_contains(d->nested, "a", 0));
	DEMO_CHECK(d, has_0t == 1 && has_a == 0, "\"0.t\" in: %d, \"a\" in: %d", has_0t, has_a);
	DEMO_TRY(demo_check_code(d, td_dict_get(&v, d->nested, "0.1.x"), TD_ENOTFOUND,
		"td_dict_get(\"0.1.x\")"));
	demo_say(d,
		"LEAF (%zu parts) by dotted key, td_key_new, td_key_from_path: same %s = "
		"%g; \"next.obs\" == {\"next\",\"obs\"}; \"0.t\" in %d, \"a\" in %d; "
		"\"0.1.x\": %s",
		td_key_depth(key), demo_tensor(by_key), x, has_0t, has_a, td_strerror(TD_ENOTFOUND));
out:
	td_key_free(no);
	td_key_free(from_parts);
	td_key_free(key);
	return rc;
}

int demo_step_set(demo *d)
{
	static const char *const b_b2[2] = { "b", "b2" };
	const td_tensor *got;
	td_dict *c = NULL, *n = NULL;
	td_tensor t = TD_TENSOR_INIT, z = TD_TENSOR_INIT, three = TD_TENSOR_INIT;
	demo_stats s0, s1, n0, n1;
	td_key *key = NULL, *kb2 = NULL;
	double sum = 0, x = 0;
	const int64_t at[2] = { 0, 0 };
	int rc;

	DEMO_CALL(d, td_dict_clone(&c, d->td));
	DEMO_CALL(d, demo_dict_stats(c, &s0));
	DEMO_CALL(d,
		td_tensor_full(&t, TD_DTYPE_F32, 3, (const int64_t[]){ 3, 4, 5 }, td_scalar_float(1)));
	DEMO_CALL(d, td_dict_set_tensor(c, "c.c.c", &t));
	DEMO_CALL(d, td_key_from_path(&kb2, b_b2, 2));
	DEMO_CALL(d, td_dict_set_tensor_key(c, kb2, &t));
	DEMO_CALL(d, demo_dict_stats(c, &s1));
	DEMO_CALL(d, td_dict_get_tensor(&got, c, "c.c.c"));
	DEMO_CALL(d, demo_tensor_sum(got, &sum));
	DEMO_CHECK(d, s1.leaves == s0.leaves + 2 && s1.dicts == s0.dicts + 2 && sum == 60,
		"after setting c.c.c and b.b2: %zu leaves, %zu dicts, c.c.c sum %g", s1.leaves, s1.dicts,
		sum);
	/* K20 on a shallow copy of big_nested_td, through a key handle. */
	DEMO_CALL(d, td_key_from_path(&key, k20_path, 20));
	DEMO_CALL(d, td_dict_copy(&n, d->nested));
	DEMO_CALL(d, td_tensor_zeros(&z, TD_DTYPE_F32, 2, batch34));
	DEMO_CALL(d, demo_dict_stats(n, &n0));
	DEMO_CALL(d, td_dict_set_tensor_key(n, key, &z));
	DEMO_CALL(d, td_dict_set_tensor_key(n, key, &z));
	DEMO_CALL(d, td_tensor_full(&three, TD_DTYPE_F32, 0, NULL, td_scalar_float(3)));
	DEMO_CALL(d, td_dict_set_tensor_inplace_key(n, key, &three));
	DEMO_CALL(d, demo_dict_stats(n, &n1));
	DEMO_CALL(d, demo_at(n, k20_dotted, at, &x));
	DEMO_CHECK(d, n1.dicts == n0.dicts + 19 && n1.leaves == n0.leaves + 1 && x == 3,
		"after setting K20 twice: %zu dicts, %zu leaves (before %zu, %zu), value %g != 3", n1.dicts,
		n1.leaves, n0.dicts, n0.leaves, x);
	demo_say(d,
		"clone(td) set \"c.c.c\", {\"b\",\"b2\"}: %zu -> %zu leaves, %zu -> %zu "
		"dicts; copy(big_nested_td) set K20 by td_key twice: %zu -> %zu dicts; "
		"set_inplace(0-d 3) reads %g",
		s0.leaves, s1.leaves, s0.dicts, s1.dicts, n0.dicts, n1.dicts, x);
out:
	td_key_free(kb2);
	td_key_free(key);
	td_tensor_release(&t);
	td_tensor_release(&z);
	td_tensor_release(&three);
	td_dict_free(n);
	td_dict_free(c);
	return rc;
}

/* Count the items of an iteration and keep the dotted path of the last. */
static int count_items(const td_dict *x, unsigned flags, size_t *count, char *last, size_t cap)
{
	td_dict_iter *it = NULL;
	td_item item;
	int rc = td_dict_iter_new(&it, x, flags);
	size_t i;

	*count = 0;
	while (rc >= 0 && (rc = td_dict_iter_next(&item, it)) == 1) {
		size_t len = 0;

		(*count)++;
		last[0] = '\0';
		for (i = 0; i < item.depth && len + strlen(item.path[i]) + 2 < cap; i++) {
			if (i > 0)
				last[len++] = '.';
			strcpy(last + len, item.path[i]);
			len += strlen(item.path[i]);
		}
	}
	td_dict_iter_free(it);
	return rc < 0 ? rc : TD_OK;
}

int demo_step_iterate(demo *d)
{
	char last[128], last_leaf[128], td_order[64], rb_leaves[128];
	size_t top, all, leaves;
	int rc;

	top = td_dict_items(NULL, NULL, 0, d->nested);
	DEMO_CALL(d, count_items(d->nested, TD_ITER_NESTED, &all, last, sizeof(last)));
	DEMO_CALL(d,
		count_items(d->nested, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY, &leaves, last_leaf,
			sizeof(last_leaf)));
	DEMO_CHECK(d, top == 1 && all == 38 && leaves == 19,
		"big_nested_td iterates %zu "
		"top-level, %zu nested, %zu leaves; expected 1, 38, 19",
		top, all, leaves);
	DEMO_CHECK(d, strcmp(last_leaf, leaf_dotted) == 0 && strcmp(last, "0") == 0,
		"last leaf '%s' (expected LEAF), last item '%s' (expected '0')", last_leaf, last);
	DEMO_CALL(d, demo_dict_key_list(d->td, TD_ITER_NESTED, td_order, sizeof(td_order)));
	DEMO_CHECK(d, strcmp(td_order, "a, b.b1, b") == 0, "td iterates as '%s'", td_order);
	DEMO_CALL(d,
		demo_dict_key_list(d->rb, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY, rb_leaves,
			sizeof(rb_leaves)));
	DEMO_CHECK(d, strcmp(rb_leaves, "obs, action, reward, done, next.obs") == 0,
		"transitions iterate as '%s'", rb_leaves);
	demo_say(d,
		"big_nested_td: %zu top-level key, %zu nested, %zu leaves, last leaf LEAF; "
		"td: %s; rb leaves: %s",
		top, all, leaves, td_order, rb_leaves);
out:
	return rc;
}

/* d[idx] with a check of its batch shape. */
static int index_to(demo *d, td_dict **out, const td_dict *x, const td_index *idx, size_t n,
	int ndim, const int64_t *batch, const char *what)
{
	int rc = demo_lib(d, td_dict_index(out, x, idx, n), what);

	if (rc < 0)
		return rc;
	return demo_check(d,
		td_dict_batch_ndim(*out) == ndim &&
			memcmp(td_dict_batch_shape(*out), batch, (size_t)ndim * sizeof(*batch)) == 0,
		"%s has batch %s, expected %s", what, demo_batch(*out), demo_shape(ndim, batch));
}

int demo_step_index(demo *d)
{
	static const int64_t rows02[2] = { 0, 2 }, b4[1] = { 4 }, b3[1] = { 3 }, b24[2] = { 2, 4 },
						 b2[1] = { 2 }, b0[1] = { 0 };
	td_dict *i1 = NULL, *col = NULL, *lst = NULL, *sl = NULL, *msk = NULL, *last = NULL;
	const td_tensor *done;
	td_index idx[2];
	double s0 = 0, s1 = 0, m0 = 0, m1 = 0, a = 0, nx = 0;
	int rc;

	idx[0] = td_index_int(1);
	DEMO_TRY(index_to(d, &i1, d->td, idx, 1, 1, b4, "td[1]"));
	idx[0] = td_index_all();
	idx[1] = td_index_int(1);
	DEMO_TRY(index_to(d, &col, d->td, idx, 2, 1, b3, "td[:, 1]"));
	idx[0] = td_index_list(rows02, 2);
	DEMO_TRY(index_to(d, &lst, d->td, idx, 1, 2, b24, "td[[0, 2]]"));
	DEMO_CHECK(d, demo_shares(i1, d->td, "a") && !demo_shares(lst, d->td, "a"),
		"td[1] should be a view of td and td[[0, 2]] a copy");
	idx[0] = td_index_slice(2, 6, 2);
	DEMO_TRY(index_to(d, &sl, d->rb, idx, 1, 1, b2, "rb[2:6:2]"));
	DEMO_CALL(d, td_dict_get_tensor(&done, d->rb, "done"));
	idx[0] = td_index_tensor(done);
	DEMO_TRY(index_to(d, &msk, d->rb, idx, 1, 1, b2, "rb[rb[\"done\"]]"));
	idx[0] = td_index_int(-1);
	DEMO_TRY(index_to(d, &last, d->rb, idx, 1, 0, b0, "rb[-1]"));
	DEMO_CALL(d, demo_at(sl, "obs", (const int64_t[]){ 0, 0 }, &s0));
	DEMO_CALL(d, demo_at(sl, "obs", (const int64_t[]){ 1, 0 }, &s1));
	DEMO_CALL(d, demo_at(msk, "obs", (const int64_t[]){ 0, 0 }, &m0));
	DEMO_CALL(d, demo_at(msk, "obs", (const int64_t[]){ 1, 0 }, &m1));
	DEMO_CALL(d, demo_sum(msk, "action", &a));
	DEMO_CALL(d, demo_at(last, "next.obs", (const int64_t[]){ 0 }, &nx));
	DEMO_CHECK(d, s0 == 2 && s1 == 4 && m0 == 3 && m1 == 7 && a == 6 && nx == DEMO_ROWS,
		"rows read back wrong: slice %g %g (2 4), mask %g %g (3 7), mask actions %g (6), "
		"last next.obs %g (%d)",
		s0, s1, m0, m1, a, nx, DEMO_ROWS);
	demo_say(d,
		"td[1] -> %s (view), td[:,1] -> %s, td[[0,2]] -> %s (copy); rb[2:6:2] -> "
		"%s (rows %g,%g), rb[rb[\"done\"]] -> %s (rows %g,%g), rb[-1] -> %s",
		demo_batch(i1), demo_batch(col), demo_batch(lst), demo_batch(sl), s0, s1, demo_batch(msk),
		m0, m1, demo_batch(last));
out:
	td_dict_free(i1);
	td_dict_free(col);
	td_dict_free(lst);
	td_dict_free(sl);
	td_dict_free(msk);
	td_dict_free(last);
	return rc;
}

/* A row of the transition dict (batch []) with recognisable values. */
static int make_row(td_dict **out)
{
	static const int64_t obs_shape[1] = { DEMO_OBS };
	static const struct {
		const char *key;
		td_dtype dtype;
		int ndim;
		double value;
	} leaves[] = {
		{ "obs", TD_DTYPE_F32, 1, -1 },
		{ "action", TD_DTYPE_I64, 0, 9 },
		{ "reward", TD_DTYPE_F32, 0, 2.5 },
		{ "done", TD_DTYPE_BOOL, 0, 1 },
		{ "next.obs", TD_DTYPE_F32, 1, -2 },
	};
	td_dict *row = NULL;
	size_t i;
	int rc = td_dict_new(&row, 0, NULL);

	for (i = 0; rc >= 0 && i < sizeof(leaves) / sizeof(leaves[0]); i++) {
		td_tensor t = TD_TENSOR_INIT;
		td_scalar v = leaves[i].dtype == TD_DTYPE_BOOL ? td_scalar_bool(leaves[i].value != 0) :
														 td_scalar_float(leaves[i].value);

		rc = td_tensor_full(&t, leaves[i].dtype, leaves[i].ndim, obs_shape, v);
		if (rc >= 0)
			rc = td_dict_set_tensor_take(row, leaves[i].key, &t);
		td_tensor_release(&t);
	}
	if (rc < 0)
		td_dict_free(row);
	else
		*out = row;
	return rc;
}

int demo_step_index_put(demo *d)
{
	static const int64_t first2[2] = { 0, 1 };
	td_dict *c = NULL, *row = NULL, *back = NULL, *rest_c = NULL, *rest_rb = NULL;
	td_dict *head = NULL;
	bool others[DEMO_ROWS];
	td_index idx;
	double done0 = 0, done1 = 0;
	demo_stats hs;
	int i, rc;

	for (i = 0; i < DEMO_ROWS; i++)
		others[i] = i != 5;
	DEMO_CALL(d, td_dict_clone(&c, d->rb));
	DEMO_CALL(d, make_row(&row));
	DEMO_CALL(d, demo_sum(c, "done", &done0));
	idx = td_index_int(5);
	DEMO_CALL(d, td_dict_index_put(c, &idx, 1, row));
	DEMO_CALL(d, td_dict_index(&back, c, &idx, 1));
	DEMO_TRY(demo_check_equal(d, back, row, 1, "clone(rb)[5] after clone(rb)[5] = row"));
	idx = td_index_mask(others, DEMO_ROWS);
	DEMO_CALL(d, td_dict_index(&rest_c, c, &idx, 1));
	DEMO_CALL(d, td_dict_index(&rest_rb, d->rb, &idx, 1));
	DEMO_TRY(demo_check_equal(d, rest_c, rest_rb, 1, "the rows index_put did not write"));
	DEMO_CALL(d, demo_sum(c, "done", &done1));
	idx = td_index_list(first2, 2);
	DEMO_CALL(d, td_dict_index_fill(c, &idx, 1, td_scalar_float(0)));
	DEMO_CALL(d, td_dict_index(&head, c, &idx, 1));
	DEMO_CALL(d, demo_dict_stats(head, &hs));
	DEMO_CHECK(d, done1 == done0 + 1 && hs.sum == 0,
		"done count %g -> %g (expected +1), "
		"rows 0-1 after fill: sum %g (expected 0)",
		done0, done1, hs.sum);
	demo_say(d,
		"rb[5] = {obs -1, action 9, reward 2.5, done 1, next.obs -2} (on a clone): "
		"reads back equal, %d other rows unchanged, done %g -> %g; [[0,1]] = 0: sum %g",
		DEMO_ROWS - 1, done0, done1, hs.sum);
out:
	td_dict_free(head);
	td_dict_free(rest_rb);
	td_dict_free(rest_c);
	td_dict_free(back);
	td_dict_free(row);
	td_dict_free(c);
	return rc;
}
