/* SPDX-License-Identifier: MIT */
/*
 * test_dict_batch.c - batch operations on dicts: indexing with every index
 * kind, indexed writes, unbind/split/chunk, stack/cat, reshape/view,
 * unsqueeze/squeeze/permute. Leaves are checked against the same tensor
 * operation applied leaf by leaf; nested dicts with longer batches keep
 * their extra dims.
 */
#include "td_test.h"

#include <stdio.h>

static const int64_t B34[] = { 3, 4 };

/* {a: arange f32[3,4,5], b: {b1: arange i64[3,4], c: {t: arange f32[3,4,2,2]} (batch
 * [3,4,2])}, s: "text"} */
static td_dict *fixture(void)
{
	int64_t sa[] = { 3, 4, 5 }, sc[] = { 3, 4, 2 }, st[] = { 3, 4, 2, 2 };
	td_dict *d, *c;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 2, B34));
	td_test_arange(&t, TD_DTYPE_F32, 3, sa);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "a", &t));
	td_test_arange(&t, TD_DTYPE_I64, 2, B34);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "b.b1", &t));
	td_cr_assert_ok(td_dict_new(&c, 3, sc));
	td_test_arange(&t, TD_DTYPE_F32, 4, st);
	td_cr_assert_ok(td_dict_set_tensor_take(c, "t", &t));
	{
		td_dict *b;
		td_cr_assert_ok(td_dict_get_dict(&b, d, "b"));
		td_cr_assert_ok(td_dict_set_dict_take(b, "c", c));
	}
	td_cr_assert_ok(td_dict_set_string(d, "s", "text"));
	return d;
}

static const td_tensor *leaf(const td_dict *d, const char *key)
{
	const td_tensor *t;

	td_cr_assert_ok(td_dict_get_tensor(&t, d, key));
	return t;
}

static void expect_shape(const td_tensor *t, int ndim, const int64_t *shape)
{
	int i;

	cr_assert_eq(t->ndim, ndim);
	for (i = 0; i < ndim; i++)
		cr_assert_eq(td_tensor_shape(t)[i], shape[i], "dim %d: %lld != %lld", i,
			(long long)td_tensor_shape(t)[i], (long long)shape[i]);
}

static void expect_batch(const td_dict *d, int ndim, const int64_t *shape)
{
	int i;

	cr_assert_eq(td_dict_batch_ndim(d), ndim);
	for (i = 0; i < ndim; i++)
		cr_assert_eq(td_dict_batch_shape(d)[i], shape[i]);
}

/* Every leaf of `got` equals the tensor op applied to the matching leaf of `src`. */
static void expect_leaves(const td_dict *got, const td_dict *src, const td_index *idx, size_t n)
{
	static const char *keys[] = { "a", "b.b1", "b.c.t" };
	size_t k;

	for (k = 0; k < 3; k++) {
		td_tensor ref;
		td_cr_assert_ok(td_tensor_index(&ref, leaf(src, keys[k]), idx, n));
		cr_assert_eq(td_tensor_equal(leaf(got, keys[k]), &ref), 1, "leaf %s", keys[k]);
		td_tensor_release(&ref);
	}
}

Test(dict_batch, int_index_drops_the_first_batch_dim)
{
	td_dict *d = fixture(), *r, *c;
	td_index idx[] = { td_index_int(1) };
	int64_t b4[] = { 4 }, b42[] = { 4, 2 }, s45[] = { 4, 5 };

	td_cr_assert_ok(td_dict_index(&r, d, idx, 1));
	expect_batch(r, 1, b4);
	expect_shape(leaf(r, "a"), 2, s45);
	td_cr_assert_ok(td_dict_get_dict(&c, r, "b.c"));
	expect_batch(c, 2, b42);
	cr_assert_eq(leaf(r, "a")->buffer, leaf(d, "a")->buffer, "a basic index is a view");
	cr_assert_eq(td_dict_contains(r, "s", 0), 1);
	expect_leaves(r, d, idx, 1);
	td_dict_free(r);
	td_dict_free(d);
}

Test(dict_batch, ellipsis_stands_for_batch_dims_only)
{
	td_dict *d = fixture(), *r;
	td_index idx[] = { td_index_ellipsis(), td_index_int(-1) };
	td_index explicit_idx[] = { td_index_all(), td_index_int(-1) };
	int64_t b3[] = { 3 }, s35[] = { 3, 5 };

	td_cr_assert_ok(td_dict_index(&r, d, idx, 2));
	expect_batch(r, 1, b3);
	expect_shape(leaf(r, "a"), 2, s35);
	expect_leaves(r, d, explicit_idx, 2);
	td_dict_free(r);
	td_dict_free(d);
}

Test(dict_batch, every_index_kind_applies_to_every_leaf)
{
	td_dict *d = fixture(), *r;
	int64_t list[] = { 2, 0, 2 };
	bool mask[] = { true, false, true, true };
	bool mask2d[12] = { true, false, false, true, false, true, false, false, true, true, true,
		false };
	td_tensor mt, it;
	int64_t list2[] = { 1, 2 };
	int64_t ishape[] = { 2 };
	size_t k;

	td_cr_assert_ok(td_tensor_from_data(&mt, TD_DTYPE_BOOL, 2, B34, mask2d));
	td_cr_assert_ok(td_tensor_from_data(&it, TD_DTYPE_I64, 1, ishape, list2));
	{
		struct {
			td_index idx[3];
			size_t n;
		} cases[] = {
			{ { td_index_slice(0, TD_SLICE_NONE, 2) }, 1 },
			{ { td_index_all(), td_index_slice(1, 3, 1) }, 2 },
			{ { td_index_range(0, 2, 1) }, 1 },
			{ { td_index_newaxis(), td_index_int(2) }, 2 },
			{ { td_index_int(0), td_index_int(3) }, 2 },
			{ { td_index_list(list, 3) }, 1 },
			{ { td_index_all(), td_index_mask(mask, 4) }, 2 },
			{ { td_index_tensor(&mt) }, 1 },
			{ { td_index_tensor(&it), td_index_list(list2, 2) }, 2 },
			{ { td_index_list(list, 3), td_index_int(1) }, 2 },
		};
		for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
			td_cr_assert_ok(td_dict_index(&r, d, cases[k].idx, cases[k].n));
			expect_leaves(r, d, cases[k].idx, cases[k].n);
			td_dict_free(r);
		}
	}
	td_tensor_release(&mt);
	td_tensor_release(&it);
	td_dict_free(d);
}

Test(dict_batch, bad_index_expressions_are_refused)
{
	td_dict *d = fixture(), *r;
	td_index three[] = { td_index_int(0), td_index_int(0), td_index_int(0) };
	td_index two_ell[] = { td_index_ellipsis(), td_index_ellipsis() };
	td_index oob[] = { td_index_int(3) };
	bool mask[] = { true, false };
	td_index badmask[] = { td_index_mask(mask, 2) };

	td_cr_assert_err(td_dict_index(&r, d, three, 3), TD_EINDEX);
	cr_assert_null(r);
	td_cr_assert_err(td_dict_index(&r, d, two_ell, 2), TD_EINVAL);
	td_cr_assert_err(td_dict_index(&r, d, oob, 1), TD_EINDEX);
	td_cr_assert_err(td_dict_index(&r, d, badmask, 1), TD_EINDEX);
	td_cr_assert_err(td_dict_index(&r, d, NULL, 1), TD_EINVAL);
	td_cr_assert_err(td_dict_index(NULL, d, oob, 1), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_batch, index_put_writes_a_dict_at_an_index)
{
	td_dict *d = fixture(), *v, *r;
	td_index idx[] = { td_index_int(1) };

	td_cr_assert_ok(td_dict_index(&v, d, idx, 1));
	td_cr_assert_ok(td_dict_clone(&r, v));
	td_cr_assert_ok(td_dict_zero(r));
	td_cr_assert_ok(td_dict_index_put(d, idx, 1, r));
	td_dict_free(v);
	td_cr_assert_ok(td_dict_index(&v, d, idx, 1));
	cr_assert_eq(td_dict_equal(v, r), 1);
	td_dict_free(v);
	{
		/* Other rows are untouched. */
		td_index row0[] = { td_index_int(0) };
		td_dict *fresh = fixture(), *a, *b;
		td_cr_assert_ok(td_dict_index(&a, d, row0, 1));
		td_cr_assert_ok(td_dict_index(&b, fresh, row0, 1));
		cr_assert_eq(td_dict_equal(a, b), 1);
		td_dict_free(a);
		td_dict_free(b);
		td_dict_free(fresh);
	}
	td_dict_free(r);
	td_dict_free(d);
}

Test(dict_batch, index_put_creates_missing_keys_and_checks_shapes)
{
	td_dict *d = fixture(), *v;
	int64_t b4[] = { 4 }, s47[] = { 4, 7 }, s347[] = { 3, 4, 7 }, b5[] = { 5 };
	td_index idx[] = { td_index_int(2) };
	td_tensor t;
	td_scalar s;
	int64_t at[] = { 2, 1, 6 }, at0[] = { 0, 1, 6 };

	td_cr_assert_ok(td_dict_new(&v, 1, b4));
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_I32, 2, s47, td_scalar_int(9)));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "new.x", &t));
	td_cr_assert_ok(td_dict_index_put(d, idx, 1, v));
	expect_shape(leaf(d, "new.x"), 3, s347);
	td_cr_assert_ok(td_tensor_get(&s, leaf(d, "new.x"), at));
	cr_assert_eq(s.v.i, 9);
	td_cr_assert_ok(td_tensor_get(&s, leaf(d, "new.x"), at0));
	cr_assert_eq(s.v.i, 0);
	td_dict_free(v);
	td_cr_assert_ok(td_dict_new(&v, 1, b5));
	td_cr_assert_err(td_dict_index_put(d, idx, 1, v), TD_ETYPE);
	td_dict_free(v);
	td_cr_assert_ok(td_dict_new(&v, 1, b4));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, b4));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "other", &t));
	td_cr_assert_ok(td_dict_lock(d));
	td_cr_assert_err(td_dict_index_put(d, idx, 1, v), TD_ELOCKED);
	td_cr_assert_ok(td_dict_unlock(d));
	td_cr_assert_ok(td_dict_set_bytes(v, "s", "different", 9));
	td_cr_assert_err(td_dict_index_put(d, idx, 1, v), TD_ETYPE);
	cr_assert_eq(td_dict_contains(d, "other", 0), 0, "a refused write adds nothing");
	td_cr_assert_err(td_dict_index_put(d, idx, 1, NULL), TD_EINVAL);
	td_dict_free(v);
	td_dict_free(d);
}

Test(dict_batch, index_fill_sets_every_leaf_at_the_index)
{
	td_dict *d = fixture();
	td_index idx[] = { td_index_all(), td_index_int(0) };
	td_scalar s;
	int64_t a0[] = { 2, 0, 3 }, a1[] = { 2, 1, 3 }, t0[] = { 1, 0, 1, 1 };

	td_cr_assert_ok(td_dict_index_fill(d, idx, 2, td_scalar_float(-1)));
	td_cr_assert_ok(td_tensor_get(&s, leaf(d, "a"), a0));
	cr_assert_eq(s.v.f, -1);
	td_cr_assert_ok(td_tensor_get(&s, leaf(d, "a"), a1));
	cr_assert_neq(s.v.f, -1);
	td_cr_assert_ok(td_tensor_get(&s, leaf(d, "b.c.t"), t0));
	cr_assert_eq(s.v.f, -1);
	td_cr_assert_err(td_dict_index_fill(d, idx, 2, (td_scalar){ .kind = 42 }), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_batch, unbind_gives_views_along_a_batch_dim)
{
	td_dict *d = fixture(), **parts;
	size_t n, i;
	int64_t b3[] = { 3 };

	td_cr_assert_ok(td_dict_unbind(&parts, &n, d, 1));
	cr_assert_eq(n, 4);
	for (i = 0; i < n; i++) {
		td_index idx[] = { td_index_all(), td_index_int((int64_t)i) };
		expect_batch(parts[i], 1, b3);
		expect_leaves(parts[i], d, idx, 2);
		cr_assert_eq(leaf(parts[i], "a")->buffer, leaf(d, "a")->buffer);
	}
	td_dict_array_free(parts, n);
	td_cr_assert_err(td_dict_unbind(&parts, &n, d, 2), TD_EINVAL);
	{
		td_dict *e;
		td_cr_assert_ok(td_dict_new(&e, 0, NULL));
		td_cr_assert_err(td_dict_unbind(&parts, &n, e, 0), TD_EINVAL);
		td_dict_free(e);
	}
	td_dict_array_free(NULL, 0);
	td_dict_free(d);
}

Test(dict_batch, split_and_chunk_follow_torch)
{
	td_dict *d = fixture(), **parts;
	size_t n;
	int64_t sizes[] = { 1, 3 };

	td_cr_assert_ok(td_dict_split(&parts, &n, d, 3, 1));
	cr_assert_eq(n, 2);
	cr_assert_eq(td_dict_batch_shape(parts[0])[1], 3);
	cr_assert_eq(td_dict_batch_shape(parts[1])[1], 1);
	{
		td_index idx[] = { td_index_all(), td_index_slice(3, 4, 1) };
		expect_leaves(parts[1], d, idx, 2);
	}
	td_dict_array_free(parts, n);
	td_cr_assert_ok(td_dict_chunk(&parts, &n, d, 3, 0));
	cr_assert_eq(n, 3);
	td_dict_array_free(parts, n);
	td_cr_assert_ok(td_dict_chunk(&parts, &n, d, 3, 1)); /* 4 over 3 chunks: 2 + 2 */
	cr_assert_eq(n, 2);
	td_dict_array_free(parts, n);
	td_cr_assert_ok(td_dict_split_sizes(&parts, &n, d, sizes, 2, -1));
	cr_assert_eq(n, 2);
	cr_assert_eq(td_dict_batch_shape(parts[1])[1], 3);
	td_dict_array_free(parts, n);
	td_cr_assert_err(td_dict_split_sizes(&parts, &n, d, sizes, 1, 1), TD_EINVAL);
	td_cr_assert_err(td_dict_split(&parts, &n, d, 0, 1), TD_EINVAL);
	td_cr_assert_err(td_dict_chunk(&parts, &n, d, 0, 1), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_batch, stack_and_cat_join_dicts)
{
	td_dict *d = fixture(), *e = fixture(), *r, **parts;
	const td_dict *two[2];
	size_t n;
	int64_t b234[] = { 2, 3, 4 }, b64[] = { 6, 4 }, b342[] = { 3, 4, 2 };

	two[0] = d;
	two[1] = e;
	td_cr_assert_ok(td_dict_stack(&r, two, 2, 0));
	expect_batch(r, 3, b234);
	td_cr_assert_ok(td_dict_unbind(&parts, &n, r, 0));
	cr_assert_eq(td_dict_equal(parts[1], e), 1);
	td_dict_array_free(parts, n);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_stack(&r, two, 2, -1));
	expect_batch(r, 3, b342);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_cat(&r, two, 2, 0));
	expect_batch(r, 2, b64);
	{
		td_index idx[] = { td_index_slice(3, 6, 1) };
		td_dict *tail;
		td_cr_assert_ok(td_dict_index(&tail, r, idx, 1));
		cr_assert_eq(td_dict_equal(tail, e), 1);
		td_dict_free(tail);
	}
	td_dict_free(r);
	/* Strings that differ stack into an array (tensordict's NonTensorStack). */
	td_cr_assert_ok(td_dict_set_string(e, "s", "different"));
	td_cr_assert_ok(td_dict_stack(&r, two, 2, 0));
	{
		const td_strings *st;

		td_cr_assert_ok(td_dict_get_strings(&st, r, "s"));
		cr_assert_eq(st->ndim, 3);
		cr_assert_str_eq(td_strings_at(NULL, st, 12), "different");
	}
	td_dict_free(r);
	/* Bytes that differ do not. */
	td_cr_assert_ok(td_dict_set_bytes(e, "s", "different", 9));
	td_cr_assert_err(td_dict_stack(&r, two, 2, 0), TD_ETYPE);
	td_cr_assert_ok(td_dict_del(e, "s"));
	td_cr_assert_err(td_dict_stack(&r, two, 2, 0), TD_ETYPE);
	td_cr_assert_err(td_dict_stack(&r, two, 0, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_stack(&r, two, 2, 5), TD_EINVAL);
	td_dict_free(d);
	td_dict_free(e);
}

Test(dict_batch, reshape_view_unsqueeze_squeeze_permute)
{
	td_dict *d = fixture(), *r, *r2, *c;
	int64_t b12[] = { 12 }, b26[] = { 2, -1 }, b134[] = { 1, 3, 4 }, b43[] = { 4, 3 };
	int64_t s125[] = { 12, 5 }, s4352[] = { 4, 3, 2, 2 };
	int perm[] = { 1, 0 };

	td_cr_assert_ok(td_dict_reshape(&r, d, 1, b12));
	expect_shape(leaf(r, "a"), 2, s125);
	td_cr_assert_ok(td_dict_get_dict(&c, r, "b.c"));
	cr_assert_eq(td_dict_batch_ndim(c), 2);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_view(&r, d, 2, b26));
	cr_assert_eq(td_dict_batch_shape(r)[1], 6);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_unsqueeze(&r, d, 0));
	expect_batch(r, 3, b134);
	td_cr_assert_ok(td_dict_squeeze(&r2, r, 0));
	cr_assert_eq(td_dict_equal(r2, d), 1);
	td_dict_free(r2);
	td_cr_assert_ok(td_dict_squeeze(&r2, r, 1)); /* size 3: unchanged */
	cr_assert_eq(td_dict_equal(r2, r), 1);
	td_dict_free(r2);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_permute(&r, d, perm));
	expect_batch(r, 2, b43);
	expect_shape(leaf(r, "b.c.t"), 4, s4352);
	/* A permuted dict cannot be viewed flat, but can be reshaped (copied). */
	td_cr_assert_err(td_dict_view(&r2, r, 1, b12), TD_ETYPE);
	td_cr_assert_ok(td_dict_reshape(&r2, r, 1, b12));
	td_dict_free(r2);
	td_dict_free(r);
	td_cr_assert_err(td_dict_reshape(&r, d, 1, (int64_t[]){ 5 }), TD_ETYPE);
	td_cr_assert_err(td_dict_permute(&r, d, (int[]){ 0, 0 }), TD_EINVAL);
	td_cr_assert_err(td_dict_unsqueeze(&r, d, 4), TD_EINVAL);
	td_dict_free(d);
}

/* Random batch shapes and basic/advanced index expressions against per-leaf indexing. */
Test(dict_batch, random_index_expressions_match_leaf_indexing)
{
	uint64_t seed = 42;
	int iter;

	for (iter = 0; iter < 300; iter++) {
		int64_t batch[3], shape[5];
		int bn = 1 + (int)(td_test_rand(&seed) % 3), i, extra;
		td_index idx[4];
		int64_t lists[4][3];
		size_t n = 0;
		td_dict *d, *r;
		td_tensor t, ref;

		for (i = 0; i < bn; i++)
			batch[i] = 1 + (int64_t)(td_test_rand(&seed) % 4);
		extra = (int)(td_test_rand(&seed) % 3);
		memcpy(shape, batch, (size_t)bn * sizeof(int64_t));
		for (i = 0; i < extra; i++)
			shape[bn + i] = 1 + (int64_t)(td_test_rand(&seed) % 3);
		td_cr_assert_ok(td_dict_new(&d, bn, batch));
		td_test_arange(&t, TD_DTYPE_I32, bn + extra, shape);
		td_cr_assert_ok(td_dict_set_tensor_take(d, "x.y", &t));
		for (i = 0; i < bn; i++) {
			uint64_t r2 = td_test_rand(&seed) % 4;
			int64_t sz = batch[i];
			if (r2 == 0)
				idx[n++] = td_index_int((int64_t)(td_test_rand(&seed) % (uint64_t)sz));
			else if (r2 == 1)
				idx[n++] = td_index_slice((int64_t)(td_test_rand(&seed) % (uint64_t)sz),
					TD_SLICE_NONE, 1 + (int64_t)(td_test_rand(&seed) % 2));
			else if (r2 == 2) {
				int k;
				for (k = 0; k < 3; k++)
					lists[n][k] = (int64_t)(td_test_rand(&seed) % (uint64_t)sz);
				idx[n] = td_index_list(lists[n], 3);
				n++;
			} else
				idx[n++] = td_index_all();
		}
		td_cr_assert_ok(td_dict_index(&r, d, idx, n));
		{
			const td_tensor *src, *got;
			td_cr_assert_ok(td_dict_get_tensor(&src, d, "x.y"));
			td_cr_assert_ok(td_tensor_index(&ref, src, idx, n));
			td_cr_assert_ok(td_dict_get_tensor(&got, r, "x.y"));
			cr_assert_eq(td_tensor_equal(got, &ref), 1, "iteration %d", iter);
			cr_assert_eq(td_dict_batch_ndim(r), ref.ndim - extra);
			td_tensor_release(&ref);
		}
		td_dict_free(r);
		td_dict_free(d);
	}
}

/* ---- indexing with masks, lists and ellipses on nested dicts ---- */

Test(dict_batch, masks_and_lists_with_an_ellipsis_index_batch_dims_only)
{
	td_dict *d = fixture(), *r, *c;
	bool mask[] = { true, false, true, true };
	int64_t list[] = { 2, 0 };
	td_index ell_mask[] = { td_index_ellipsis(), td_index_mask(mask, 4) };
	td_index exp_mask[] = { td_index_all(), td_index_mask(mask, 4) };
	td_index ell_list[] = { td_index_list(list, 2), td_index_ellipsis() };
	td_index exp_list[] = { td_index_list(list, 2), td_index_all() };
	int64_t b33[] = { 3, 3 }, b332[] = { 3, 3, 2 }, b24[] = { 2, 4 };

	td_cr_assert_ok(td_dict_index(&r, d, ell_mask, 2));
	expect_batch(r, 2, b33);
	td_cr_assert_ok(td_dict_get_dict(&c, r, "b.c"));
	expect_batch(c, 3, b332);
	expect_leaves(r, d, exp_mask, 2);
	cr_assert_neq(leaf(r, "a")->buffer, leaf(d, "a")->buffer, "a mask gives a copy");
	td_dict_free(r);
	td_cr_assert_ok(td_dict_index(&r, d, ell_list, 2));
	expect_batch(r, 2, b24);
	expect_leaves(r, d, exp_list, 2);
	td_dict_free(r);
	td_dict_free(d);
}

Test(dict_batch, index_put_with_masks_and_lists_reaches_nested_leaves)
{
	td_dict *d = fixture(), *v, *got;
	bool mask[] = { true, false, true };
	int64_t list[] = { 3, 1 };
	td_index by_mask[] = { td_index_mask(mask, 3) };
	td_index by_list[] = { td_index_ellipsis(), td_index_list(list, 2) };

	/* A mask over dim 0 selects rows 0 and 2. */
	td_cr_assert_ok(td_dict_index(&v, d, by_mask, 1));
	td_cr_assert_ok(td_dict_zero(v));
	td_cr_assert_ok(td_dict_index_put(d, by_mask, 1, v));
	td_cr_assert_ok(td_dict_index(&got, d, by_mask, 1));
	cr_assert_eq(td_dict_equal(got, v), 1);
	td_dict_free(got);
	td_dict_free(v);
	{
		/* Row 1 kept its values. */
		td_dict *fresh = fixture(), *a, *b;
		td_index row1[] = { td_index_int(1) };
		td_cr_assert_ok(td_dict_index(&a, d, row1, 1));
		td_cr_assert_ok(td_dict_index(&b, fresh, row1, 1));
		cr_assert_eq(td_dict_equal(a, b), 1);
		td_dict_free(a);
		td_dict_free(b);
		td_dict_free(fresh);
	}
	/* A list after an ellipsis indexes the last batch dim, not a leaf dim. */
	td_cr_assert_ok(td_dict_index(&v, d, by_list, 2));
	td_cr_assert_ok(td_dict_binary_scalar_inplace(v, td_scalar_int(100), TD_OP_ADD));
	td_cr_assert_ok(td_dict_index_put(d, by_list, 2, v));
	td_cr_assert_ok(td_dict_index(&got, d, by_list, 2));
	cr_assert_eq(td_dict_equal(got, v), 1);
	td_dict_free(got);
	td_dict_free(v);
	td_cr_assert_ok(td_dict_index_fill(d, by_mask, 1, td_scalar_int(-7)));
	{
		td_scalar s;
		int64_t at[] = { 2, 3, 1, 1 };
		td_cr_assert_ok(td_tensor_get(&s, leaf(d, "b.c.t"), at));
		cr_assert_eq(s.v.f, -7);
	}
	td_cr_assert_err(td_dict_index_fill(NULL, by_mask, 1, td_scalar_int(0)), TD_EINVAL);
	td_cr_assert_err(td_dict_index_fill(d, NULL, 1, td_scalar_int(0)), TD_EINVAL);
	td_cr_assert_err(td_dict_index_put(NULL, by_mask, 1, d), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_batch, index_put_creates_nested_dicts_and_non_tensor_values)
{
	td_dict *d = fixture(), *v, *n, *made;
	int64_t b4[] = { 4 }, b42[] = { 4, 2 }, s423[] = { 4, 2, 3 }, s3423[] = { 3, 4, 2, 3 };
	td_index idx[] = { td_index_int(0) };
	td_tensor t;

	/* A nested dict with a longer batch, a string, and a new leaf. */
	td_cr_assert_ok(td_dict_new(&v, 1, b4));
	td_cr_assert_ok(td_dict_new(&n, 2, b42));
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_I16, 3, s423, td_scalar_int(5)));
	td_cr_assert_ok(td_dict_set_tensor_take(n, "deep", &t));
	td_cr_assert_ok(td_dict_set_dict_take(v, "made", n));
	td_cr_assert_ok(td_dict_set_string(v, "note", "hello"));
	td_cr_assert_ok(td_dict_set_string(v, "s", "text"));
	td_cr_assert_ok(td_dict_index_put(d, idx, 1, v));
	td_cr_assert_ok(td_dict_get_dict(&made, d, "made"));
	cr_assert_eq(td_dict_batch_ndim(made), 3, "the created dict has d's batch + extra dims");
	cr_assert_eq(td_dict_batch_shape(made)[2], 2);
	expect_shape(leaf(d, "made.deep"), 4, s3423);
	cr_assert_eq(leaf(d, "made.deep")->dtype, TD_DTYPE_I16);
	{
		td_scalar s;
		int64_t row0[] = { 0, 3, 1, 2 }, row1[] = { 1, 3, 1, 2 };
		td_cr_assert_ok(td_tensor_get(&s, leaf(d, "made.deep"), row0));
		cr_assert_eq(s.v.i, 5);
		td_cr_assert_ok(td_tensor_get(&s, leaf(d, "made.deep"), row1));
		cr_assert_eq(s.v.i, 0);
	}
	cr_assert_eq(td_dict_contains(d, "note", TD_LEAVES_ONLY), 1);
	td_dict_free(v);
	td_dict_free(d);
}

Test(dict_batch, index_put_refuses_values_of_another_kind)
{
	td_dict *d = fixture(), *v, *snapshot;
	int64_t b4[] = { 4 };
	td_index idx[] = { td_index_int(0) };
	td_tensor t;

	td_cr_assert_ok(td_dict_clone(&snapshot, d));
	/* A dict where d holds a tensor. */
	td_cr_assert_ok(td_dict_new(&v, 1, b4));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, b4));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "a.inner", &t));
	td_cr_assert_err(td_dict_index_put(d, idx, 1, v), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "dict in the value only") != NULL, "%s",
		td_error_last()->message);
	td_dict_free(v);
	/* A tensor where d holds a dict. */
	td_cr_assert_ok(td_dict_new(&v, 1, b4));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, b4));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "b", &t));
	td_cr_assert_err(td_dict_index_put(d, idx, 1, v), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "tensor in the value only") != NULL, "%s",
		td_error_last()->message);
	td_dict_free(v);
	/* A string where d holds a tensor. */
	td_cr_assert_ok(td_dict_new(&v, 1, b4));
	td_cr_assert_ok(td_dict_set_string(v, "a", "x"));
	td_cr_assert_err(td_dict_index_put(d, idx, 1, v), TD_ETYPE);
	td_dict_free(v);
	/* The indexed batch is [4]: a value of batch [3] does not fit. */
	td_cr_assert_ok(td_dict_new(&v, 1, (int64_t[]){ 3 }));
	td_cr_assert_err(td_dict_index_put(d, idx, 1, v), TD_ETYPE);
	td_cr_assert_err(td_dict_index_put(d, (td_index[]){ td_index_int(9) }, 1, v), TD_EINDEX);
	td_dict_free(v);
	cr_assert_eq(td_dict_equal(d, snapshot), 1, "nothing was written");
	td_dict_free(snapshot);
	td_dict_free(d);
}

/* index_put checks every leaf before writing any: a value leaf that does not
 * broadcast to its indexed region leaves d untouched, new keys included. */
Test(dict_batch, index_put_checks_every_shape_before_writing)
{
	td_dict *d = fixture(), *v, *snapshot;
	int64_t b4[] = { 4 }, s45[] = { 4, 5 }, s4227[] = { 4, 2, 2, 7 }, s47[] = { 4, 7 };
	td_index idx[] = { td_index_int(0) };
	td_tensor t;

	td_cr_assert_ok(td_dict_clone(&snapshot, d));
	td_cr_assert_ok(td_dict_new(&v, 1, b4));
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_F32, 2, s45, td_scalar_int(9)));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "a", &t));
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_F32, 2, s47, td_scalar_int(9)));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "new", &t));
	/* b.c has batch [3, 4, 2]; its leaf t is [3, 4, 2, 2]: [4, 2, 2, 7] does not fit. */
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_F32, 4, s4227, td_scalar_int(9)));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "b.c.t", &t));
	td_cr_assert_err(td_dict_index_put(d, idx, 1, v), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "[4, 2, 2, 7]") != NULL, "%s",
		td_error_last()->message);
	cr_assert_eq(td_dict_contains(d, "new", 0), 0, "no key was created");
	cr_assert_eq(td_dict_equal(d, snapshot), 1, "no leaf was written");
	/* With a value that broadcasts ([4, 1, 2, 1] to [4, 2, 2]), everything is written. */
	td_cr_assert_ok(td_dict_del(v, "b"));
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_I64, 3, (int64_t[]){ 4, 1, 2 }, td_scalar_int(7)));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "b.c.t", &t));
	td_cr_assert_ok(td_dict_index_put(d, idx, 1, v));
	cr_assert_eq(td_dict_contains(d, "new", 0), 1);
	{
		td_scalar s;
		int64_t at[] = { 0, 3, 1, 1 };
		td_cr_assert_ok(td_tensor_get(&s, leaf(d, "b.c.t"), at));
		cr_assert_eq(s.v.f, 7);
	}
	td_dict_free(v);
	td_dict_free(snapshot);
	td_dict_free(d);
}

Test(dict_batch, index_put_refuses_leaves_that_would_exceed_the_dims)
{
	td_dict *d, *v;
	int64_t shape[TD_MAX_DIMS];
	td_index idx[] = { td_index_int(0) };
	td_tensor t;
	int i;

	/* d[0] drops one of d's two batch dims: a new 16-dim leaf of the value
	 * would need 17 dims in d. */
	for (i = 0; i < TD_MAX_DIMS; i++)
		shape[i] = 1;
	shape[0] = 2;
	td_cr_assert_ok(td_dict_new(&d, 2, (int64_t[]){ 2, 2 }));
	td_cr_assert_ok(td_dict_new(&v, 1, (int64_t[]){ 2 }));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, TD_MAX_DIMS, shape));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "x", &t));
	td_cr_assert_err(td_dict_index_put(d, idx, 1, v), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "'x'") != NULL, "%s", td_error_last()->message);
	cr_assert_eq(td_dict_len(d), 0);
	/* One dim fewer fits. */
	td_cr_assert_ok(td_dict_del(v, "x"));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, TD_MAX_DIMS - 1, shape));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "x", &t));
	td_cr_assert_ok(td_dict_index_put(d, idx, 1, v));
	cr_assert_eq(leaf(d, "x")->ndim, TD_MAX_DIMS);
	td_dict_free(v);
	/* d[None] on a 16-dim leaf would have 17 dims: an existing leaf is refused too. */
	{
		td_index na[] = { td_index_newaxis() };
		td_cr_assert_ok(td_dict_new(&v, 3, (int64_t[]){ 1, 2, 2 }));
		td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 3, (int64_t[]){ 1, 2, 2 }));
		td_cr_assert_ok(td_dict_set_tensor_take(v, "x", &t));
		td_cr_assert_err(td_dict_index_put(d, na, 1, v), TD_EINVAL);
		td_dict_free(v);
	}
	td_dict_free(d);
}

/* ---- unbind, split, chunk on edge sizes ---- */

Test(dict_batch, split_sizes_may_hold_zeros)
{
	td_dict *d = fixture(), **parts;
	int64_t sizes[] = { 0, 3, 0, 1, 0 };
	size_t n;

	td_cr_assert_ok(td_dict_split_sizes(&parts, &n, d, sizes, 5, 1));
	cr_assert_eq(n, 5);
	cr_assert_eq(td_dict_batch_shape(parts[0])[1], 0);
	cr_assert_eq(td_dict_batch_shape(parts[1])[1], 3);
	cr_assert_eq(td_dict_batch_shape(parts[3])[1], 1);
	cr_assert_eq(td_tensor_shape(leaf(parts[2], "b.c.t"))[1], 0);
	{
		td_index idx[] = { td_index_all(), td_index_slice(3, 4, 1) };
		expect_leaves(parts[3], d, idx, 2);
	}
	td_dict_array_free(parts, n);
	td_cr_assert_err(td_dict_split_sizes(&parts, &n, d, (int64_t[]){ 5, -1 }, 2, 1), TD_EINVAL);
	td_cr_assert_err(td_dict_split_sizes(&parts, &n, d, (int64_t[]){ INT64_MAX, INT64_MAX }, 2, 1),
		TD_EINVAL);
	td_cr_assert_err(td_dict_split_sizes(&parts, &n, d, NULL, 2, 1), TD_EINVAL);
	td_cr_assert_err(td_dict_split_sizes(NULL, &n, d, sizes, 5, 1), TD_EINVAL);
	td_cr_assert_err(td_dict_split_sizes(&parts, &n, d, sizes, 5, 2), TD_EINVAL);
	td_cr_assert_ok(td_dict_split_sizes(&parts, &n, d, (int64_t[]){ 3 }, 1, 0));
	cr_assert_eq(n, 1);
	td_dict_array_free(parts, n);
	td_dict_free(d);
}

Test(dict_batch, splitting_a_dim_of_size_zero)
{
	td_dict *d, **parts;
	int64_t b03[] = { 0, 3 };
	td_tensor t;
	size_t n = 99;

	td_cr_assert_ok(td_dict_new(&d, 2, b03));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 2, b03));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "x.y", &t));
	/* As tensordict: one empty piece. */
	td_cr_assert_ok(td_dict_chunk(&parts, &n, d, 4, 0));
	cr_assert_eq(n, 1);
	cr_assert_eq(td_dict_batch_shape(parts[0])[0], 0);
	td_dict_array_free(parts, n);
	td_cr_assert_ok(td_dict_split(&parts, &n, d, 2, 0));
	cr_assert_eq(n, 1);
	td_dict_array_free(parts, n);
	td_cr_assert_ok(td_dict_unbind(&parts, &n, d, 0));
	cr_assert_eq(n, 0);
	td_dict_array_free(parts, n);
	td_cr_assert_ok(td_dict_split_sizes(&parts, &n, d, NULL, 0, 0));
	cr_assert_eq(n, 0);
	td_dict_array_free(parts, n);
	/* Chunks of the other dim. */
	td_cr_assert_ok(td_dict_chunk(&parts, &n, d, 2, -1));
	cr_assert_eq(n, 2);
	cr_assert_eq(td_dict_batch_shape(parts[1])[1], 1);
	td_dict_array_free(parts, n);
	td_cr_assert_err(td_dict_chunk(NULL, &n, d, 2, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_chunk(&parts, NULL, d, 2, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_chunk(&parts, &n, d, SIZE_MAX, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_split(&parts, &n, NULL, 1, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_split(&parts, &n, d, -1, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_unbind(NULL, &n, d, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_unbind(&parts, &n, d, -3), TD_EINVAL);
	td_dict_free(d);
}

/* Huge split sizes and chunk counts are valid: one piece, or one per element. */
Test(dict_batch, huge_split_sizes_and_chunk_counts_do_not_overflow)
{
	td_dict *d = fixture(), **parts;
	size_t n;

	td_cr_assert_ok(td_dict_split(&parts, &n, d, INT64_MAX, 0));
	cr_assert_eq(n, 1);
	cr_assert_eq(td_dict_batch_shape(parts[0])[0], 3);
	td_dict_array_free(parts, n);
	td_cr_assert_ok(td_dict_split(&parts, &n, d, INT64_MAX - 1, 1));
	cr_assert_eq(n, 1);
	cr_assert_eq(td_dict_batch_shape(parts[0])[1], 4);
	td_dict_array_free(parts, n);
	td_cr_assert_ok(td_dict_chunk(&parts, &n, d, (size_t)INT64_MAX, 0));
	cr_assert_eq(n, 3);
	cr_assert_eq(td_dict_batch_shape(parts[2])[0], 1);
	td_dict_array_free(parts, n);
	td_cr_assert_ok(td_dict_chunk(&parts, &n, d, 5, 1));
	cr_assert_eq(n, 4);
	td_dict_array_free(parts, n);
	td_dict_free(d);
}

#define LONG_KEY "a_key_longer_than_twenty_three_bytes"

/* Batch [20, 2]: k0..k9 f32 [20, 2, 3] (more than 8 keys: the dict has an
 * index), LONG_KEY: {x: i64 [20, 2], s: "deep"}, s: "text", names: an array
 * of strings [20, 2]. */
static td_dict *many_fixture(void)
{
	int64_t b[] = { 20, 2 }, sk[] = { 20, 2, 3 };
	char key[8];
	td_dict *d;
	td_tensor t;
	int i;

	td_cr_assert_ok(td_dict_new(&d, 2, b));
	for (i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		td_test_arange(&t, TD_DTYPE_F32, 3, sk);
		td_cr_assert_ok(td_dict_set_tensor_take(d, key, &t));
	}
	td_test_arange(&t, TD_DTYPE_I64, 2, b);
	td_cr_assert_ok(td_dict_set_tensor_take(d, LONG_KEY ".x", &t));
	td_cr_assert_ok(td_dict_set_string(d, LONG_KEY ".s", "deep"));
	td_cr_assert_ok(td_dict_set_string(d, "s", "text"));
	{
		static char texts[40][8];
		const char *ptrs[40];
		for (i = 0; i < 40; i++) {
			snprintf(texts[i], sizeof(texts[i]), "w%d", i);
			ptrs[i] = texts[i];
		}
		td_cr_assert_ok(td_dict_set_strings(d, "names", 2, b, ptrs));
	}
	return d;
}

/* Each piece equals the dict indexed with idx (dim 0 or 1 named by `dim`). */
static void expect_piece(const td_dict *piece, const td_dict *d, int dim, td_index x)
{
	td_index idx[2] = { td_index_all(), td_index_all() };
	td_dict *ref;

	idx[dim] = x;
	td_cr_assert_ok(td_dict_index(&ref, d, idx, 2));
	cr_assert_eq(td_dict_equal(piece, ref), 1, "a piece differs from the indexed dict");
	cr_assert_eq(td_dict_batch_ndim(piece), td_dict_batch_ndim(ref));
	cr_assert_arr_eq(td_dict_batch_shape(piece), td_dict_batch_shape(ref),
		(size_t)td_dict_batch_ndim(ref) * sizeof(int64_t));
	cr_assert_eq(td_dict_len(piece), td_dict_len(ref));
	td_dict_free(ref);
}

/* All pieces are cut in one pass over the dict: many pieces (more than fit
 * on the stack), indexed dicts, long keys and strings give what indexing
 * gives, and every view holds its own buffer reference. */
Test(dict_batch, unbind_and_split_into_many_pieces_equal_indexing)
{
	td_dict *d = many_fixture(), **parts;
	const td_tensor *k3;
	uint32_t refs;
	size_t n, i;

	k3 = leaf(d, "k3");
	refs = td_buffer_refcount(k3->buffer);
	td_cr_assert_ok(td_dict_unbind(&parts, &n, d, 0));
	cr_assert_eq(n, 20);
	cr_assert_eq(td_buffer_refcount(k3->buffer), refs + 20);
	for (i = 0; i < n; i++) {
		const char *s;
		expect_piece(parts[i], d, 0, td_index_int((int64_t)i));
		td_cr_assert_ok(td_dict_get_blob(&s, NULL, parts[i], LONG_KEY ".s"));
		cr_assert_str_eq(s, "deep");
	}
	td_dict_array_free(parts, n);
	cr_assert_eq(td_buffer_refcount(k3->buffer), refs);
	td_cr_assert_ok(td_dict_unbind(&parts, &n, d, 1));
	cr_assert_eq(n, 2);
	for (i = 0; i < n; i++)
		expect_piece(parts[i], d, 1, td_index_int((int64_t)i));
	td_dict_array_free(parts, n);
	td_cr_assert_ok(td_dict_split(&parts, &n, d, 3, 0));
	cr_assert_eq(n, 7);
	for (i = 0; i < n; i++) {
		int64_t a = 3 * (int64_t)i, b = a + 3 < 20 ? a + 3 : 20;
		expect_piece(parts[i], d, 0, td_index_slice(a, b, 1));
	}
	td_dict_array_free(parts, n);
	cr_assert_eq(td_buffer_refcount(k3->buffer), refs);
	td_dict_free(d);
}

typedef struct cut_ctx {
	td_dict *src;
	td_dict **parts[2];
	size_t n[2];
} cut_ctx;

static int cut_body(void *arg)
{
	cut_ctx *c = arg;
	int rc;

	c->parts[0] = c->parts[1] = NULL;
	c->n[0] = c->n[1] = 0;
	rc = td_dict_unbind(&c->parts[0], &c->n[0], c->src, 0);
	if (rc == 0)
		rc = td_dict_split(&c->parts[1], &c->n[1], c->src, 3, 0);
	if (rc < 0)
		td_dict_array_free(c->parts[0], c->n[0]);
	return rc;
}

static void cut_cleanup(void *arg)
{
	cut_ctx *c = arg;

	td_dict_array_free(c->parts[0], c->n[0]);
	td_dict_array_free(c->parts[1], c->n[1]);
}

Test(dict_batch, cutting_into_many_pieces_fails_cleanly_without_memory)
{
	cut_ctx c;

	c.src = many_fixture();
	td_test_enomem_sweep(cut_body, cut_cleanup, &c);
	td_dict_free(c.src);
}

/*
 * small_fixture: a dict of batch [20, 2] whose levels all have at most 8
 * entries (cut without an index), with long keys at every level, arrays of
 * strings, blobs and a deleted slot: {a, LONG_KEY: {t, LONG_KEY2: {u, names},
 * b: bytes}, s: "text"}, "gone" deleted.
 */
#define LONG_KEY2 "another_key_longer_than_twenty_three"

static td_dict *small_fixture(void)
{
	int64_t b[] = { 20, 2 }, sk[] = { 20, 2, 3 };
	static char texts[40][8];
	const char *ptrs[40];
	td_dict *d;
	td_tensor t;
	int i;

	td_cr_assert_ok(td_dict_new(&d, 2, b));
	td_test_arange(&t, TD_DTYPE_F32, 3, sk);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "gone", &t));
	td_test_arange(&t, TD_DTYPE_F32, 3, sk);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "a", &t));
	td_test_arange(&t, TD_DTYPE_I64, 2, b);
	td_cr_assert_ok(td_dict_set_tensor_take(d, LONG_KEY ".t", &t));
	td_test_arange(&t, TD_DTYPE_I32, 3, sk);
	td_cr_assert_ok(td_dict_set_tensor_take(d, LONG_KEY "." LONG_KEY2 ".u", &t));
	for (i = 0; i < 40; i++) {
		snprintf(texts[i], sizeof(texts[i]), "w%d", i);
		ptrs[i] = texts[i];
	}
	td_cr_assert_ok(td_dict_set_strings(d, LONG_KEY "." LONG_KEY2 ".names", 2, b, ptrs));
	td_cr_assert_ok(td_dict_set_bytes(d, LONG_KEY ".b", "\x01\x02", 2));
	td_cr_assert_ok(td_dict_set_string(d, "s", "text"));
	td_cr_assert_ok(td_dict_del(d, "gone"));
	return d;
}

/* Levels of at most 8 entries are cut on their own path: the same results,
 * long keys shared by every piece, holes skipped. */
Test(dict_batch, cutting_small_levels_with_long_keys_equals_indexing)
{
	static const int64_t sizes[] = { 5, 0, 15 };
	td_dict *d = small_fixture(), **parts;
	const td_tensor *a;
	uint32_t refs;
	size_t n, i;
	int64_t start = 0;

	a = leaf(d, "a");
	refs = td_buffer_refcount(a->buffer);
	td_cr_assert_ok(td_dict_unbind(&parts, &n, d, 0));
	cr_assert_eq(n, 20);
	cr_assert_eq(td_buffer_refcount(a->buffer), refs + 20);
	for (i = 0; i < n; i++) {
		const char *s;
		const td_value *v;

		expect_piece(parts[i], d, 0, td_index_int((int64_t)i));
		cr_assert_eq(td_dict_contains(parts[i], "gone", 0), 0);
		td_cr_assert_ok(td_dict_get_blob(&s, NULL, parts[i], "s"));
		cr_assert_str_eq(s, "text");
		td_cr_assert_ok(td_dict_get(&v, parts[i], LONG_KEY "." LONG_KEY2 ".names"));
		cr_assert_eq(v->kind, TD_VALUE_STRINGS);
		cr_assert_eq(v->strings->ndim, 1);
	}
	td_dict_array_free(parts, n);
	cr_assert_eq(td_buffer_refcount(a->buffer), refs);
	td_cr_assert_ok(td_dict_unbind(&parts, &n, d, -1));
	cr_assert_eq(n, 2);
	for (i = 0; i < n; i++)
		expect_piece(parts[i], d, 1, td_index_int((int64_t)i));
	/* The pieces own their long keys: they outlive the source. */
	td_dict_free(d);
	d = small_fixture();
	for (i = 0; i < n; i++)
		expect_piece(parts[i], d, 1, td_index_int((int64_t)i));
	td_dict_array_free(parts, n);
	td_cr_assert_ok(td_dict_split_sizes(&parts, &n, d, sizes, 3, 0));
	cr_assert_eq(n, 3);
	for (i = 0; i < n; i++) {
		expect_piece(parts[i], d, 0, td_index_slice(start, start + sizes[i], 1));
		start += sizes[i];
	}
	td_dict_array_free(parts, n);
	td_dict_free(d);
}

Test(dict_batch, cutting_small_levels_fails_cleanly_without_memory)
{
	cut_ctx c;

	c.src = small_fixture();
	td_test_enomem_sweep(cut_body, cut_cleanup, &c);
	td_dict_free(c.src);
}

/* ---- stack and cat ---- */

Test(dict_batch, stack_and_cat_with_nested_dicts_and_strings)
{
	td_dict *d = fixture(), *e = fixture(), *r, *c;
	const td_dict *two[2] = { d, e };
	int64_t b342[] = { 3, 4, 2 }, b2342[] = { 2, 3, 4, 2 }, b3842[] = { 3, 8, 2 };

	td_cr_assert_ok(td_dict_stack(&r, two, 2, 0));
	td_cr_assert_ok(td_dict_get_dict(&c, r, "b.c"));
	expect_batch(c, 4, b2342);
	cr_assert_eq(td_dict_contains(r, "s", TD_LEAVES_ONLY), 1);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_cat(&r, two, 2, -1));
	td_cr_assert_ok(td_dict_get_dict(&c, r, "b.c"));
	expect_batch(c, 3, b3842);
	{
		td_index idx[] = { td_index_all(), td_index_slice(4, 8, 1) };
		td_dict *tail;
		td_cr_assert_ok(td_dict_index(&tail, r, idx, 2));
		cr_assert_eq(td_dict_equal(tail, e), 1);
		td_dict_free(tail);
	}
	td_dict_free(r);
	/* Order of keys may differ; holes do not matter. */
	td_cr_assert_ok(td_dict_rename(e, "a", "tmp"));
	td_cr_assert_ok(td_dict_rename(e, "tmp", "n.x"));
	td_cr_assert_ok(td_dict_rename(e, "n.x", "a"));
	td_cr_assert_ok(td_dict_del(e, "n"));
	td_cr_assert_ok(td_dict_stack(&r, two, 2, 1));
	td_dict_free(r);
	/* A nested dict whose batch differs between the dicts. */
	{
		td_dict *c2;
		td_cr_assert_ok(td_dict_get_dict(&c2, e, "b.c"));
		td_cr_assert_ok(td_dict_del(c2, "t"));
		td_cr_assert_ok(td_dict_set_batch_shape(c2, 2, B34));
		td_cr_assert_err(td_dict_stack(&r, two, 2, 0), TD_ETYPE);
		td_cr_assert_err(td_dict_cat(&r, two, 2, 0), TD_ETYPE);
	}
	(void)b342;
	td_dict_free(d);
	td_dict_free(e);
}

Test(dict_batch, joins_refuse_mismatched_dicts)
{
	td_dict *d = fixture(), *e = fixture(), *r, *o;
	const td_dict *two[2] = { d, e };
	const td_dict *with_null[2] = { d, NULL };
	int64_t b35[] = { 3, 5 }, b54[] = { 5, 4 };

	/* Same count, another key. */
	td_cr_assert_ok(td_dict_rename(e, "a", "z"));
	td_cr_assert_err(td_dict_stack(&r, two, 2, 0), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "missing") != NULL, "%s", td_error_last()->message);
	td_cr_assert_ok(td_dict_rename(e, "z", "a"));
	/* A string in one, a tensor in the other. */
	td_cr_assert_ok(td_dict_del(e, "s"));
	td_cr_assert_ok(td_dict_set_bytes(e, "s", "text", 4));
	td_cr_assert_err(td_dict_stack(&r, two, 2, 0), TD_ETYPE);
	td_dict_free(e);
	e = fixture();
	two[1] = e;
	/* cat: only the cat dim may differ. */
	td_cr_assert_ok(td_dict_new(&o, 2, b35));
	two[1] = o;
	td_cr_assert_err(td_dict_cat(&r, two, 2, 0), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "[3, 5]") != NULL, "%s", td_error_last()->message);
	td_cr_assert_err(td_dict_stack(&r, two, 2, 0), TD_ETYPE);
	td_dict_free(o);
	td_cr_assert_ok(td_dict_new(&o, 2, b54));
	two[1] = o;
	td_cr_assert_err(td_dict_cat(&r, two, 2, 0), TD_ETYPE); /* keys differ */
	td_dict_free(o);
	td_cr_assert_err(td_dict_stack(&r, with_null, 2, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_cat(&r, NULL, 2, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_cat(NULL, two, 2, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_cat(&r, two, 2, 2), TD_EINVAL);
	{
		td_dict *s0, *s1;
		const td_dict *scalars[2];
		td_cr_assert_ok(td_dict_new(&s0, 0, NULL));
		td_cr_assert_ok(td_dict_new(&s1, 0, NULL));
		scalars[0] = s0;
		scalars[1] = s1;
		td_cr_assert_err(td_dict_cat(&r, scalars, 2, 0), TD_EINVAL);
		td_cr_assert_ok(td_dict_stack(&r, scalars, 2, 0));
		cr_assert_eq(td_dict_batch_shape(r)[0], 2);
		td_dict_free(r);
		td_dict_free(s0);
		td_dict_free(s1);
	}
	td_dict_free(d);
	td_dict_free(e);
}

Test(dict_batch, joins_respect_the_dim_limits)
{
	td_dict *full, *r;
	int64_t ones[TD_MAX_DIMS], huge[] = { INT64_MAX / 2 + 1 };
	const td_dict *two[2];
	int i;

	for (i = 0; i < TD_MAX_DIMS; i++)
		ones[i] = 1;
	td_cr_assert_ok(td_dict_new(&full, TD_MAX_DIMS, ones));
	two[0] = two[1] = full;
	td_cr_assert_err(td_dict_stack(&r, two, 2, 0), TD_EINVAL);
	td_cr_assert_ok(td_dict_cat(&r, two, 2, 0));
	cr_assert_eq(td_dict_batch_shape(r)[0], 2);
	td_dict_free(r);
	td_dict_free(full);
	td_cr_assert_ok(td_dict_new(&full, 1, huge));
	two[0] = two[1] = full;
	td_cr_assert_err(td_dict_cat(&r, two, 2, 0), TD_EOVERFLOW);
	td_dict_free(full);
}

/* ---- reshape, view, unsqueeze, squeeze, permute ---- */

Test(dict_batch, reshape_infers_a_size_and_keeps_nested_dims)
{
	td_dict *d = fixture(), *r, *c;
	int64_t m1[] = { -1 }, b2m1[] = { 2, -1, 3 }, b223[] = { 2, 2, 3 };
	int64_t s22322[] = { 2, 2, 3, 2, 2 };

	td_cr_assert_ok(td_dict_reshape(&r, d, 1, m1));
	cr_assert_eq(td_dict_batch_shape(r)[0], 12);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_reshape(&r, d, 3, b2m1));
	expect_batch(r, 3, b223);
	td_cr_assert_ok(td_dict_get_dict(&c, r, "b.c"));
	cr_assert_eq(td_dict_batch_ndim(c), 4);
	expect_shape(leaf(r, "b.c.t"), 5, s22322);
	cr_assert_eq(leaf(r, "a")->buffer, leaf(d, "a")->buffer, "a contiguous reshape is a view");
	td_dict_free(r);
	td_cr_assert_err(td_dict_reshape(&r, d, 2, (int64_t[]){ -1, -1 }), TD_EINVAL);
	td_cr_assert_err(td_dict_reshape(&r, d, 2, (int64_t[]){ -2, 6 }), TD_EINVAL);
	td_cr_assert_err(td_dict_reshape(&r, d, 2, (int64_t[]){ 5, -1 }), TD_ETYPE);
	td_cr_assert_err(td_dict_reshape(&r, d, 2, (int64_t[]){ INT64_MAX, 2 }), TD_EINVAL);
	td_cr_assert_err(td_dict_reshape(&r, d, -1, m1), TD_EINVAL);
	td_cr_assert_err(td_dict_reshape(&r, d, TD_MAX_DIMS + 1, m1), TD_EINVAL);
	td_cr_assert_err(td_dict_reshape(&r, d, 1, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_reshape(NULL, d, 1, m1), TD_EINVAL);
	td_cr_assert_err(td_dict_view(&r, NULL, 1, m1), TD_EINVAL);
	{
		/* 16 batch dims for a leaf with 2 more dims cannot be made. */
		int64_t ones[TD_MAX_DIMS];
		int i;
		for (i = 0; i < TD_MAX_DIMS; i++)
			ones[i] = 1;
		ones[0] = 12;
		td_cr_assert_err(td_dict_reshape(&r, d, TD_MAX_DIMS, ones), TD_EINVAL);
		cr_assert_null(r);
	}
	td_dict_free(d);
}

Test(dict_batch, reshape_of_an_empty_batch)
{
	td_dict *d, *r;
	int64_t b04[] = { 0, 4 };

	td_cr_assert_ok(td_dict_new(&d, 2, b04));
	td_cr_assert_ok(td_dict_reshape(&r, d, 1, (int64_t[]){ 0 }));
	cr_assert_eq(td_dict_batch_shape(r)[0], 0);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_reshape(&r, d, 3, (int64_t[]){ 2, 0, 5 }));
	td_dict_free(r);
	td_cr_assert_err(td_dict_reshape(&r, d, 0, NULL), TD_ETYPE);
	td_dict_free(d);
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_dict_reshape(&r, d, 2, (int64_t[]){ 1, -1 }));
	cr_assert_eq(td_dict_batch_shape(r)[1], 1);
	td_dict_free(r);
	td_dict_free(d);
}

Test(dict_batch, unsqueeze_and_squeeze_take_negative_dims)
{
	td_dict *d = fixture(), *r, *r2, *c;
	int64_t b341[] = { 3, 4, 1 }, b3412[] = { 3, 4, 1, 2 }, s3415[] = { 3, 4, 1, 5 };

	td_cr_assert_ok(td_dict_unsqueeze(&r, d, -1));
	expect_batch(r, 3, b341);
	expect_shape(leaf(r, "a"), 4, s3415);
	td_cr_assert_ok(td_dict_get_dict(&c, r, "b.c"));
	expect_batch(c, 4, b3412);
	td_cr_assert_ok(td_dict_squeeze(&r2, r, -1));
	cr_assert_eq(td_dict_equal(r2, d), 1);
	td_dict_free(r2);
	td_cr_assert_ok(td_dict_squeeze(&r2, r, -3)); /* size 3: an unchanged copy */
	cr_assert_eq(td_dict_equal(r2, r), 1);
	cr_assert_eq(leaf(r2, "a")->buffer, leaf(r, "a")->buffer);
	td_dict_free(r2);
	td_cr_assert_err(td_dict_squeeze(&r2, r, -4), TD_EINVAL);
	td_cr_assert_err(td_dict_squeeze(&r2, r, 3), TD_EINVAL);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_unsqueeze(&r, d, -3));
	cr_assert_eq(td_dict_batch_shape(r)[0], 1);
	td_dict_free(r);
	td_cr_assert_err(td_dict_unsqueeze(&r, d, -4), TD_EINVAL);
	td_cr_assert_err(td_dict_unsqueeze(NULL, d, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_squeeze(NULL, d, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_squeeze(&r, NULL, 0), TD_EINVAL);
	{
		td_dict *e;
		td_cr_assert_ok(td_dict_new(&e, 0, NULL));
		td_cr_assert_err(td_dict_squeeze(&r, e, 1), TD_EINVAL);
		td_cr_assert_ok(td_dict_unsqueeze(&r, e, -1));
		cr_assert_eq(td_dict_batch_ndim(r), 1);
		td_dict_free(r);
		td_dict_free(e);
	}
	td_dict_free(d);
}

Test(dict_batch, unsqueeze_refuses_batches_past_the_dim_limit)
{
	td_dict *d, *n, *r;
	int64_t ones[TD_MAX_DIMS];
	int i;

	for (i = 0; i < TD_MAX_DIMS; i++)
		ones[i] = 1;
	td_cr_assert_ok(td_dict_new(&d, TD_MAX_DIMS, ones));
	td_cr_assert_err(td_dict_unsqueeze(&r, d, 0), TD_EINVAL);
	td_dict_free(d);
	/* The root has room, its nested dict does not. */
	td_cr_assert_ok(td_dict_new(&d, 1, ones));
	td_cr_assert_ok(td_dict_new(&n, TD_MAX_DIMS, ones));
	td_cr_assert_ok(td_dict_set_dict_take(d, "n", n));
	td_cr_assert_err(td_dict_unsqueeze(&r, d, 0), TD_EINVAL);
	cr_assert_null(r);
	td_dict_free(d);
}

Test(dict_batch, permute_reorders_nested_batches_too)
{
	td_dict *d = fixture(), *r, *c;
	int64_t b43[] = { 4, 3 }, b432[] = { 4, 3, 2 }, s4352[] = { 4, 3, 5 };

	td_cr_assert_ok(td_dict_permute(&r, d, (int[]){ -1, 0 }));
	expect_batch(r, 2, b43);
	expect_shape(leaf(r, "a"), 3, s4352);
	td_cr_assert_ok(td_dict_get_dict(&c, r, "b.c"));
	expect_batch(c, 3, b432);
	{
		td_dict *back;
		td_cr_assert_ok(td_dict_permute(&back, r, (int[]){ 1, 0 }));
		cr_assert_eq(td_dict_equal(back, d), 1);
		td_dict_free(back);
	}
	td_dict_free(r);
	td_cr_assert_err(td_dict_permute(&r, d, (int[]){ 0, 2 }), TD_EINVAL);
	td_cr_assert_err(td_dict_permute(&r, d, (int[]){ -1, 1 }), TD_EINVAL);
	td_cr_assert_err(td_dict_permute(&r, d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_permute(NULL, d, (int[]){ 0, 1 }), TD_EINVAL);
	{
		td_dict *e;
		td_cr_assert_ok(td_dict_new(&e, 0, NULL));
		td_cr_assert_ok(td_dict_permute(&r, e, NULL));
		td_dict_free(r);
		td_dict_free(e);
	}
	td_dict_free(d);
}

/* ---- holes left by deletions ---- */

Test(dict_batch, indexed_writes_and_joins_skip_holes)
{
	td_dict *d = fixture(), *v, *r;
	const td_dict *two[2];
	td_index idx[] = { td_index_int(1) };
	td_tensor t;

	/* A hole in the middle of d and of the value. */
	td_cr_assert_ok(td_dict_del(d, "a"));
	td_test_arange(&t, TD_DTYPE_F32, 3, (int64_t[]){ 3, 4, 5 });
	td_cr_assert_ok(td_dict_set_tensor_take(d, "a", &t));
	td_cr_assert_ok(td_dict_index(&v, d, idx, 1));
	td_cr_assert_ok(td_dict_del(v, "b"));
	td_cr_assert_ok(td_dict_zero(v));
	td_cr_assert_ok(td_dict_index_put(d, idx, 1, v));
	td_cr_assert_ok(td_dict_index_fill(d, idx, 1, td_scalar_int(3)));
	two[0] = two[1] = d;
	td_cr_assert_ok(td_dict_stack(&r, two, 2, 0));
	cr_assert_eq(td_dict_len(r), 3);
	td_dict_free(r);
	td_dict_free(v);
	td_dict_free(d);
}

Test(dict_batch, a_zero_dim_bool_index_after_an_ellipsis_adds_a_batch_dim)
{
	td_dict *d = fixture(), *r;
	bool yes = true;
	td_tensor b;
	td_index idx[2], explicit_idx[3];

	td_cr_assert_ok(td_tensor_from_data(&b, TD_DTYPE_BOOL, 0, NULL, &yes));
	idx[0] = td_index_ellipsis();
	idx[1] = td_index_tensor(&b);
	explicit_idx[0] = td_index_all();
	explicit_idx[1] = td_index_all();
	explicit_idx[2] = td_index_tensor(&b);
	td_cr_assert_ok(td_dict_index(&r, d, idx, 2));
	cr_assert_eq(td_dict_batch_ndim(r), 3);
	cr_assert_eq(td_dict_batch_shape(r)[2], 1);
	expect_leaves(r, d, explicit_idx, 3);
	td_dict_free(r);
	td_tensor_release(&b);
	td_dict_free(d);
}

/* ---- allocation failures ---- */

typedef struct batch_ctx {
	td_dict *src, *out[4];
	td_dict **parts;
	size_t nparts;
} batch_ctx;

static int batch_body(void *arg)
{
	batch_ctx *c = arg;
	int64_t list[] = { 0, 2 };
	td_index adv[] = { td_index_list(list, 2) };
	td_index basic[] = { td_index_int(1) };
	const td_dict *two[2];
	int rc, i;

	for (i = 0; i < 4; i++)
		c->out[i] = NULL;
	c->parts = NULL;
	rc = td_dict_index(&c->out[0], c->src, adv, 1);
	if (rc == 0)
		rc = td_dict_index(&c->out[1], c->src, basic, 1);
	two[0] = two[1] = c->src;
	if (rc == 0)
		rc = td_dict_stack(&c->out[2], two, 2, 1);
	if (rc == 0)
		rc = td_dict_permute(&c->out[3], c->src, (int[]){ 1, 0 });
	if (rc == 0)
		rc = td_dict_unbind(&c->parts, &c->nparts, c->src, 1);
	if (rc < 0)
		for (i = 0; i < 4; i++)
			td_dict_free(c->out[i]);
	return rc;
}

static void batch_cleanup(void *arg)
{
	batch_ctx *c = arg;
	int i;

	for (i = 0; i < 4; i++)
		td_dict_free(c->out[i]);
	td_dict_array_free(c->parts, c->nparts);
}

Test(dict_batch, allocation_failures_are_reported_and_leak_nothing)
{
	batch_ctx c;

	c.src = fixture();
	td_test_enomem_sweep(batch_body, batch_cleanup, &c);
	td_dict_free(c.src);
}

Test(dict_batch, index_put_checks_every_leaf_before_writing)
{
	td_dict *d = fixture(), *v;
	td_index idx[] = { td_index_int(0) };
	int64_t b4[] = { 4 }, s45[] = { 4, 5 }, s47[] = { 4, 7 };
	td_tensor t;
	td_scalar s;
	int64_t at[] = { 0, 0, 0 };

	td_cr_assert_ok(td_dict_new(&v, 1, b4));
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_F32, 2, s45, td_scalar_float(7)));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "a", &t));
	/* b.b1 is [3,4] in d: indexed [4]; a [4,7] value does not broadcast to it. */
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 2, s47));
	td_cr_assert_ok(td_dict_set_tensor_take(v, "b.b1", &t));
	td_cr_assert_err(td_dict_index_put(d, idx, 1, v), TD_ETYPE);
	td_cr_assert_ok(td_tensor_get(&s, leaf(d, "a"), at));
	cr_assert_eq(s.v.f, 0, "the first leaf was not written");
	td_dict_free(v);
	td_dict_free(d);
}

Test(dict_batch, squeeze_of_a_dict_without_batch_dims_is_a_copy)
{
	td_dict *d, *r;

	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_dict_set_string(d, "s", "x"));
	td_cr_assert_ok(td_dict_squeeze(&r, d, 0));
	cr_assert_eq(td_dict_equal(r, d), 1);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_squeeze(&r, d, -1));
	td_dict_free(r);
	td_cr_assert_err(td_dict_squeeze(&r, d, 1), TD_EINVAL);
	td_dict_free(d);
}

typedef struct more_batch_ctx {
	td_dict *src, *out[8];
	td_dict **parts[3];
	size_t nparts[3];
} more_batch_ctx;

static void more_batch_free(more_batch_ctx *c)
{
	int i;

	for (i = 0; i < 8; i++)
		td_dict_free(c->out[i]);
	for (i = 0; i < 3; i++)
		td_dict_array_free(c->parts[i], c->nparts[i]);
}

static int more_batch_body(void *arg)
{
	more_batch_ctx *c = arg;
	bool mask[] = { true, false, true, true };
	int64_t sizes[] = { 1, 0, 2 };
	td_index by_mask[] = { td_index_ellipsis(), td_index_mask(mask, 4) };
	td_index row[] = { td_index_int(2) };
	const td_dict *two[2];
	int rc, i;

	for (i = 0; i < 8; i++)
		c->out[i] = NULL;
	for (i = 0; i < 3; i++) {
		c->parts[i] = NULL;
		c->nparts[i] = 0;
	}
	rc = td_dict_index(&c->out[0], c->src, by_mask, 2);
	two[0] = two[1] = c->src;
	if (rc == 0)
		rc = td_dict_cat(&c->out[1], two, 2, -1);
	if (rc == 0)
		rc = td_dict_view(&c->out[2], c->src, 1, (int64_t[]){ -1 });
	if (rc == 0)
		rc = td_dict_unsqueeze(&c->out[3], c->src, -1);
	if (rc == 0)
		rc = td_dict_squeeze(&c->out[4], c->out[3], -1);
	if (rc == 0)
		rc = td_dict_split(&c->parts[0], &c->nparts[0], c->src, 3, 1);
	if (rc == 0)
		rc = td_dict_split_sizes(&c->parts[1], &c->nparts[1], c->src, sizes, 3, 0);
	if (rc == 0)
		rc = td_dict_chunk(&c->parts[2], &c->nparts[2], c->src, 2, 0);
	/* Writes into a fresh clone: index_put creates a missing nested dict. */
	if (rc == 0)
		rc = td_dict_clone(&c->out[5], c->src);
	if (rc == 0)
		rc = td_dict_index(&c->out[6], c->src, row, 1);
	if (rc == 0)
		rc = td_dict_rename(c->out[6], "b", "fresh");
	if (rc == 0)
		rc = td_dict_index_put(c->out[5], row, 1, c->out[6]);
	if (rc == 0)
		rc = td_dict_index_put(c->out[5], by_mask, 2, c->out[0]);
	if (rc == 0)
		rc = td_dict_index_fill(c->out[5], by_mask, 2, td_scalar_int(1));
	if (rc < 0)
		more_batch_free(c);
	return rc;
}

static void more_batch_cleanup(void *arg)
{
	more_batch_ctx *c = arg;

	cr_assert_eq(td_dict_contains(c->out[5], "fresh.c.t", 0), 1);
	cr_assert_eq(c->nparts[1], 3);
	more_batch_free(c);
}

Test(dict_batch, more_allocation_failures_are_reported_and_leak_nothing)
{
	more_batch_ctx c;

	c.src = fixture();
	td_test_enomem_sweep(more_batch_body, more_batch_cleanup, &c);
	td_dict_free(c.src);
}

Test(dict_batch, reshape_with_minus_one_and_a_zero_size_is_ambiguous)
{
	td_dict *d, *r;
	int64_t b03[] = { 0, 3 }, bad[] = { 0, -1 }, ok[] = { -1, 3 };

	td_cr_assert_ok(td_dict_new(&d, 2, b03));
	td_cr_assert_err(td_dict_reshape(&r, d, 2, bad), TD_ETYPE);
	cr_assert_null(r);
	td_cr_assert_ok(td_dict_reshape(&r, d, 2, ok)); /* as torch: [-1, 3] of 0 is [0, 3] */
	cr_assert_eq(td_dict_batch_shape(r)[0], 0);
	td_dict_free(r);
	td_dict_free(d);
}

/* ------------------------------------------------------------------------ */
/* Leaves of more than TD_TENSOR_INLINE_DIMS dims                            */
/* ------------------------------------------------------------------------ */

static const char *const MANY_LEAVES[4] = { "x", "y", "w", "sub.z" };

/* Batch [4, 2]: x i32 [4,2,1,3,1,2] (6 dims), y f32 [4,2,3], w i64 [4,2,1,1,2] (5
 * dims: 4 once a batch dim is dropped), sub.z f64 [4,2,2,1,2] (sub: batch [4, 2, 2]). */
static td_dict *many_dims_fixture(void)
{
	int64_t b[] = { 4, 2 }, sx[] = { 4, 2, 1, 3, 1, 2 }, sy[] = { 4, 2, 3 };
	int64_t sw[] = { 4, 2, 1, 1, 2 }, sz[] = { 4, 2, 2, 1, 2 };
	td_dict *d, *sub;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 2, b));
	td_test_arange(&t, TD_DTYPE_I32, 6, sx);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "x", &t));
	td_test_arange(&t, TD_DTYPE_F32, 3, sy);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "y", &t));
	td_test_arange(&t, TD_DTYPE_I64, 5, sw);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "w", &t));
	td_cr_assert_ok(td_dict_new(&sub, 3, sz));
	td_test_arange(&t, TD_DTYPE_F64, 5, sz);
	td_cr_assert_ok(td_dict_set_tensor_take(sub, "z", &t));
	td_cr_assert_ok(td_dict_set_dict_take(d, "sub", sub));
	return d;
}

static void expect_same_view(const td_tensor *a, const td_tensor *b, const char *what)
{
	cr_assert(a->buffer == b->buffer && a->offset == b->offset && a->dtype == b->dtype &&
			a->ndim == b->ndim,
		"%s: another view", what);
	cr_assert_arr_eq(td_tensor_shape(a), td_tensor_shape(b), (size_t)a->ndim * sizeof(int64_t),
		"%s: shape", what);
	cr_assert_arr_eq(td_tensor_strides(a), td_tensor_strides(b), (size_t)a->ndim * sizeof(int64_t),
		"%s: strides", what);
}

Test(dict_batch, leaves_of_many_dims_are_cut_indexed_and_copied_as_views)
{
	static const int64_t sizes[2] = { 3, 1 };
	td_dict *d = many_dims_fixture(), **parts, *c, *r;
	uint32_t refs[4];
	td_tensor v;
	td_index idx[2];
	size_t n, i, k;
	int dim;

	for (k = 0; k < 4; k++)
		refs[k] = td_buffer_refcount(leaf(d, MANY_LEAVES[k])->buffer);
	for (dim = 0; dim < 2; dim++) {
		td_cr_assert_ok(td_dict_unbind(&parts, &n, d, dim));
		for (i = 0; i < n; i++)
			for (k = 0; k < 4; k++) {
				td_cr_assert_ok(td_tensor_select(&v, leaf(d, MANY_LEAVES[k]), dim, (int64_t)i));
				expect_same_view(leaf(parts[i], MANY_LEAVES[k]), &v, MANY_LEAVES[k]);
				td_tensor_release(&v);
			}
		/* The views of one leaf differ only in their offset: they share their dims. */
		cr_assert_eq(td_tensor_shape(leaf(parts[0], "x")), td_tensor_shape(leaf(parts[1], "x")));
		td_dict_array_free(parts, n);
	}
	td_cr_assert_ok(td_dict_split_sizes(&parts, &n, d, sizes, 2, 0));
	for (i = 0; i < n; i++)
		for (k = 0; k < 4; k++) {
			td_cr_assert_ok(td_tensor_narrow(&v, leaf(d, MANY_LEAVES[k]), 0, i ? 3 : 0, sizes[i]));
			expect_same_view(leaf(parts[i], MANY_LEAVES[k]), &v, MANY_LEAVES[k]);
			td_tensor_release(&v);
		}
	td_dict_array_free(parts, n);
	/* A copy shares the leaves, out-of-line dims included. */
	td_cr_assert_ok(td_dict_copy(&c, d));
	for (k = 0; k < 4; k++)
		expect_same_view(leaf(c, MANY_LEAVES[k]), leaf(d, MANY_LEAVES[k]), MANY_LEAVES[k]);
	cr_assert_eq(td_tensor_shape(leaf(c, "x")), td_tensor_shape(leaf(d, "x")));
	td_dict_free(c);
	/* Indexing: a view (a slice and a new axis) and a copy (a list). */
	idx[0] = td_index_slice(1, 3, 1);
	idx[1] = td_index_newaxis();
	td_cr_assert_ok(td_dict_index(&r, d, idx, 2));
	for (k = 0; k < 4; k++) {
		const td_tensor *rv = leaf(r, MANY_LEAVES[k]);

		/* The same view, but for the stride of the new axis (of size 1). */
		td_cr_assert_ok(td_tensor_index(&v, leaf(d, MANY_LEAVES[k]), idx, 2));
		cr_assert(rv->buffer == v.buffer && rv->offset == v.offset && rv->ndim == v.ndim);
		cr_assert_arr_eq(td_tensor_shape(rv), td_tensor_shape(&v),
			(size_t)v.ndim * sizeof(int64_t));
		cr_assert_eq(td_tensor_equal(rv, &v), 1);
		td_tensor_release(&v);
	}
	td_dict_free(r);
	{
		static const int64_t pos[3] = { 3, 0, 3 };

		idx[0] = td_index_list(pos, 3);
		td_cr_assert_ok(td_dict_index(&r, d, idx, 1));
		for (k = 0; k < 4; k++) {
			td_cr_assert_ok(td_tensor_index(&v, leaf(d, MANY_LEAVES[k]), idx, 1));
			cr_assert_eq(td_tensor_equal(leaf(r, MANY_LEAVES[k]), &v), 1);
			td_tensor_release(&v);
		}
		td_dict_free(r);
	}
	for (k = 0; k < 4; k++)
		cr_assert_eq(td_buffer_refcount(leaf(d, MANY_LEAVES[k])->buffer), refs[k]);
	td_dict_free(d);
}

static int many_dims_cut_body(void *arg)
{
	cut_ctx *c = arg;
	int rc;

	c->parts[0] = c->parts[1] = NULL;
	c->n[0] = c->n[1] = 0;
	rc = td_dict_unbind(&c->parts[0], &c->n[0], c->src, 1);
	if (rc == 0)
		rc = td_dict_split(&c->parts[1], &c->n[1], c->src, 3, 0);
	if (rc < 0)
		td_dict_array_free(c->parts[0], c->n[0]);
	return rc;
}

Test(dict_batch, cutting_leaves_of_many_dims_fails_cleanly_without_memory)
{
	cut_ctx c;

	c.src = many_dims_fixture();
	td_test_enomem_sweep(many_dims_cut_body, cut_cleanup, &c);
	td_dict_free(c.src);
}
