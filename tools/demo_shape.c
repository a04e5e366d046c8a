/* SPDX-License-Identifier: MIT */
/*
 * demo_shape.c - demo steps that reshape dicts or their keys: unbind and
 * stack, split and cat, reshape, permute and friends, select and exclude,
 * flatten and unflatten keys. Each checks that the way back gives the
 * original.
 */
#include <stdio.h>
#include <string.h>

#include "demo.h"

/* LEAF of big_nested_td, dotted. */
static const char leaf_dotted[] = "0.1.2.3.4.5.6.7.8.9.10.11.12.13.14.15.16.17.18.t";

/* The batch shapes of `n` dicts, "[3] [3] [2]", into the report. */
static void say_batches(demo *d, td_dict *const *parts, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		demo_say(d, "%s%s", i ? " " : "", demo_batch(parts[i]));
}

/* Every part equals x[i] along batch dim 0. */
static int check_parts(demo *d, td_dict *const *parts, size_t n, const td_dict *x, const char *what)
{
	size_t i;
	int rc = 0;

	for (i = 0; rc == 0 && i < n; i++) {
		td_dict *row = NULL;
		td_index idx = td_index_int((int64_t)i);
		int eq;

		rc = demo_lib(d, td_dict_index(&row, x, &idx, 1), "td_dict_index");
		if (rc == 0 && (eq = td_dict_equal(parts[i], row)) != 1)
			rc = eq < 0 ? demo_lib(d, eq, "td_dict_equal") :
						  demo_fail(d,
							  "check failed: %s: part %zu differs from the original "
							  "row",
							  what, i);
		td_dict_free(row);
	}
	return rc < 0 ? rc : demo_check(d, true, "%s", what);
}

int demo_step_unbind_stack(demo *d)
{
	td_dict **rows = NULL, **cols = NULL, *st = NULL, *st2 = NULL;
	size_t nrows = 0, ncols = 0;
	int rc;

	DEMO_CALL(d, td_dict_unbind(&rows, &nrows, d->rb, 0));
	DEMO_CHECK(d, nrows == DEMO_ROWS && td_dict_batch_ndim(rows[0]) == 0,
		"unbind(rb, 0) gave %zu parts of batch %s", nrows, demo_batch(rows[0]));
	DEMO_TRY(check_parts(d, rows, nrows, d->rb, "unbind(rb, 0)"));
	DEMO_CALL(d, td_dict_stack(&st, (const td_dict *const *)rows, nrows, 0));
	DEMO_TRY(demo_check_equal(d, st, d->rb, 1, "stack(unbind(rb, 0), 0)"));
	DEMO_CALL(d, td_dict_unbind(&cols, &ncols, d->nested, 1));
	DEMO_CALL(d, td_dict_stack(&st2, (const td_dict *const *)cols, ncols, 1));
	DEMO_TRY(demo_check_equal(d, st2, d->nested, 1, "stack(unbind(big_nested_td, 1), 1)"));
	demo_say(d,
		"rb unbind(0) -> %zu x %s, each == rb[i], stack(0) -> %s == rb; "
		"big_nested_td unbind(1) -> %zu x %s, stack(1) -> %s == big_nested_td",
		nrows, demo_batch(rows[0]), demo_batch(st), ncols, demo_batch(cols[0]), demo_batch(st2));
out:
	td_dict_free(st2);
	td_dict_free(st);
	td_dict_array_free(cols, ncols);
	td_dict_array_free(rows, nrows);
	return rc;
}

/* cat(parts, dim) == x. */
static int check_cat(demo *d, td_dict *const *parts, size_t n, int dim, const td_dict *x,
	const char *what)
{
	td_dict *joined = NULL;
	int rc = demo_lib(d, td_dict_cat(&joined, (const td_dict *const *)parts, n, dim),
		"td_dict_cat");

	if (rc == 0)
		rc = demo_check_equal(d, joined, x, 1, what);
	td_dict_free(joined);
	return rc;
}

int demo_step_split_cat(demo *d)
{
	static const int64_t sizes[2] = { 5, 3 };
	td_dict **p = NULL, **q = NULL, **r = NULL;
	size_t np = 0, nq = 0, nr = 0;
	double first = 0;
	int rc;

	DEMO_CALL(d, td_dict_split(&p, &np, d->rb, 3, 0));
	DEMO_CALL(d, demo_at(p[np - 1], "obs", (const int64_t[]){ 0, 0 }, &first));
	DEMO_CHECK(d, np == 3 && td_dict_batch_shape(p[2])[0] == 2 && first == 6,
		"split(rb, 3) gave %zu pieces, the last starting at row %g", np, first);
	DEMO_TRY(check_cat(d, p, np, 0, d->rb, "cat(split(rb, 3), 0)"));
	DEMO_CALL(d, td_dict_split_sizes(&q, &nq, d->rb, sizes, 2, 0));
	DEMO_TRY(check_cat(d, q, nq, 0, d->rb, "cat(split(rb, [5, 3]), 0)"));
	DEMO_CALL(d, td_dict_chunk(&r, &nr, d->td, 2, 1));
	DEMO_TRY(check_cat(d, r, nr, 1, d->td, "cat(chunk(td, 2, 1), 1)"));
	demo_say(d, "split(rb, 3) -> ");
	say_batches(d, p, np);
	demo_say(d, ", split(rb, [5,3]) -> ");
	say_batches(d, q, nq);
	demo_say(d, ", chunk(td, 2, dim 1) -> ");
	say_batches(d, r, nr);
	demo_say(d, "; cat of each == its source");
out:
	td_dict_array_free(r, nr);
	td_dict_array_free(q, nq);
	td_dict_array_free(p, np);
	return rc;
}

int demo_step_reshape(demo *d)
{
	static const int64_t flat[1] = { 12 }, b34[2] = { 3, 4 };
	td_dict *r = NULL, *back = NULL, *u = NULL, *s = NULL;
	const td_tensor *a;
	int rc;

	DEMO_CALL(d, td_dict_reshape(&r, d->td, 1, flat));
	DEMO_CALL(d, td_dict_get_tensor(&a, r, "a"));
	DEMO_CHECK(d, demo_shares(r, d->td, "a"), "reshape(td, [12]) should be a view");
	DEMO_CALL(d, td_dict_reshape(&back, r, 2, b34));
	DEMO_TRY(demo_check_equal(d, back, d->td, 1, "reshape(reshape(td, [12]), [3, 4])"));
	DEMO_CALL(d, td_dict_unsqueeze(&u, d->rb, 0));
	DEMO_CALL(d, td_dict_squeeze(&s, u, 0));
	DEMO_TRY(demo_check_equal(d, s, d->rb, 1, "squeeze(unsqueeze(rb, 0), 0)"));
	demo_say(d, "td -> %s (view, a %s) -> %s == td; rb unsqueeze(0) -> %s, squeeze(0) == rb",
		demo_batch(r), demo_tensor(a), demo_batch(back), demo_batch(u));
out:
	td_dict_free(s);
	td_dict_free(u);
	td_dict_free(back);
	td_dict_free(r);
	return rc;
}

int demo_step_permute(demo *d)
{
	static const int64_t b24[2] = { 2, 4 }, flat[1] = { DEMO_ROWS };
	static const int swap[2] = { 1, 0 };
	td_dict *q = NULL, *p = NULL, *pp = NULL, *v = NULL;
	const td_tensor *obs;
	double x = 0;
	int rc;

	DEMO_CALL(d, td_dict_reshape(&q, d->rb, 2, b24));
	DEMO_CALL(d, td_dict_permute(&p, q, swap));
	DEMO_CALL(d, td_dict_get_tensor(&obs, p, "obs"));
	/* p[3, 1] is q[1, 3], row 1 * 4 + 3 of rb. */
	DEMO_CALL(d, demo_tensor_at(obs, (const int64_t[]){ 3, 1, 0 }, &x));
	DEMO_CHECK(d, x == 7, "permute(reshape(rb, [2, 4]), [1, 0])[3, 1] is row %g, not 7", x);
	DEMO_TRY(demo_check_code(d, td_dict_view(&v, p, 1, flat), TD_ETYPE, "view(permuted, [8])"));
	DEMO_CALL(d, td_dict_permute(&pp, p, swap));
	DEMO_TRY(demo_check_equal(d, pp, q, 1, "permute(permute(q, [1, 0]), [1, 0])"));
	demo_say(d,
		"rb reshape -> %s, permute(1,0) -> %s (obs %s, [3,1] is row %g); view as "
		"[%d] refused (%s); permute back == reshaped",
		demo_batch(q), demo_batch(p), demo_tensor(obs), x, DEMO_ROWS, td_strerror(TD_ETYPE));
out:
	td_dict_free(v);
	td_dict_free(pp);
	td_dict_free(p);
	td_dict_free(q);
	return rc;
}

int demo_step_select_exclude(demo *d)
{
	static const char *const sel[2] = { "obs", "next.obs" }, *const exc[2] = { "next", "done" };
	static const char *const missing[2] = { "obs", "z" };
	td_dict *s = NULL, *e = NULL, *loose = NULL, *strict = NULL, *ns = NULL, *ne = NULL;
	char skeys[64], ekeys[64];
	demo_stats a, b;
	int rc;

	DEMO_CALL(d, td_dict_select(&s, d->rb, sel, 2, true));
	DEMO_CALL(d, td_dict_exclude(&e, d->rb, exc, 2));
	DEMO_CALL(d, demo_dict_key_list(s, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY, skeys, 64));
	DEMO_CALL(d, demo_dict_key_list(e, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY, ekeys, 64));
	DEMO_CHECK(d,
		strcmp(skeys, "obs, next.obs") == 0 && strcmp(ekeys, "obs, action, reward") == 0 &&
			demo_shares(s, d->rb, "next.obs"),
		"select gave '%s', exclude '%s'", skeys, ekeys);
	DEMO_TRY(demo_check_code(d, td_dict_select(&strict, d->rb, missing, 2, true), TD_ENOTFOUND,
		"select(rb, [obs, z], strict)"));
	DEMO_CALL(d, td_dict_select(&loose, d->rb, missing, 2, false));
	DEMO_CALL(d, td_dict_select(&ns, d->nested, (const char *const[]){ leaf_dotted }, 1, true));
	DEMO_CALL(d, td_dict_exclude(&ne, d->nested, (const char *const[]){ leaf_dotted }, 1));
	DEMO_CALL(d, demo_dict_stats(ns, &a));
	DEMO_CALL(d, demo_dict_stats(ne, &b));
	DEMO_CHECK(d,
		td_dict_len(loose) == 1 && a.leaves == 1 && a.dicts == 19 && b.leaves == 18 &&
			b.dicts == 19,
		"select/exclude LEAF gave %zu and %zu leaves", a.leaves, b.leaves);
	demo_say(d,
		"rb select(obs, next.obs) -> %s (shared), exclude(next, done) -> %s; strict "
		"select of \"z\": %s, loose: %zu key; big_nested_td select(LEAF): %zu leaf, %zu "
		"dicts, exclude(LEAF): %zu leaves",
		skeys, ekeys, td_strerror(TD_ENOTFOUND), td_dict_len(loose), a.leaves, a.dicts, b.leaves);
out:
	td_dict_free(ne);
	td_dict_free(ns);
	td_dict_free(strict);
	td_dict_free(loose);
	td_dict_free(e);
	td_dict_free(s);
	return rc;
}

int demo_step_flatten(demo *d)
{
	static char before[4096], after[4096];
	td_dict *f = NULL, *u = NULL, *g = NULL, *v = NULL;
	const char *flat[19] = { NULL };
	char gkeys[64];
	demo_stats fs;
	int rc;

	DEMO_CALL(d, td_dict_flatten_keys(&f, d->nested, "."));
	DEMO_CALL(d, demo_dict_stats(f, &fs));
	DEMO_CHECK(d,
		fs.leaves == 19 && fs.dicts == 0 && td_dict_items(flat, NULL, 19, f) == 19 &&
			strcmp(flat[18], leaf_dotted) == 0,
		"flatten_keys(big_nested_td) has %zu leaves "
		"and %zu dicts, last key '%s'",
		fs.leaves, fs.dicts, flat[18] ? flat[18] : "(none)");
	DEMO_CALL(d, td_dict_unflatten_keys(&u, f, "."));
	DEMO_TRY(demo_check_equal(d, u, d->nested, 1, "unflatten_keys(flatten_keys(big_nested_td))"));
	DEMO_CALL(d, demo_dict_key_list(d->nested, TD_ITER_NESTED, before, sizeof(before)));
	DEMO_CALL(d, demo_dict_key_list(u, TD_ITER_NESTED, after, sizeof(after)));
	DEMO_CHECK(d, strcmp(before, after) == 0,
		"unflatten(flatten(big_nested_td)) iterates "
		"in another order: %s",
		after);
	DEMO_CALL(d, td_dict_flatten_keys(&g, d->td, "/"));
	DEMO_CALL(d, demo_dict_key_list(g, TD_ITER_NESTED, gkeys, sizeof(gkeys)));
	DEMO_CALL(d, td_dict_unflatten_keys(&v, g, "/"));
	DEMO_TRY(demo_check_equal(d, v, d->td, 1, "unflatten_keys(flatten_keys(td, \"/\"), \"/\")"));
	demo_say(d,
		"big_nested_td -> %zu flat keys, %zu dicts, last \"0.1.(...).18.t\"; "
		"unflatten == original, same key order; td with \"/\": %s -> back == td",
		fs.leaves, fs.dicts, gkeys);
out:
	td_dict_free(v);
	td_dict_free(g);
	td_dict_free(u);
	td_dict_free(f);
	return rc;
}
