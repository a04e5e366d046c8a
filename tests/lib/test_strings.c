/* SPDX-License-Identifier: MIT */
/*
 * test_strings.c - arrays of strings in dicts (TD_VALUE_STRINGS,
 * tensordict's NonTensorStack): set and get, shape rules, every batch
 * operation (index with each index form, unbind, split, reshape, permute,
 * squeeze, stack and cat with single strings, indexed writes), copies,
 * equality, update, lazy stacks, failures and allocation failures.
 */
#include "td_test.h"

static const char *const ABC[] = { "alpha", "beta", "gamma" };

/* A dict of batch [3] holding "lst" = ["alpha", "beta", "gamma"] and a tensor. */
static td_dict *abc_dict(void)
{
	const int64_t b3[] = { 3 };
	td_tensor t;
	td_dict *d;

	td_cr_assert_ok(td_dict_new(&d, 1, b3));
	td_cr_assert_ok(td_dict_set_strings(d, "lst", 1, b3, ABC));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I64, 1, b3));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "x", &t));
	return d;
}

/* Assert that value `key` of `d` is an array of `shape` holding `want` (C order). */
static void assert_strings(const td_dict *d, const char *key, int ndim, const int64_t *shape,
	const char *const *want)
{
	const td_strings *s;
	int64_t numel = 1, i;
	int k;

	td_cr_assert_ok(td_dict_get_strings(&s, d, key));
	cr_assert_eq(s->ndim, ndim, "%s: ndim %d, expected %d", key, s->ndim, ndim);
	for (k = 0; k < ndim; k++) {
		cr_assert_eq(s->shape[k], shape[k], "%s: dim %d is %lld", key, k, (long long)s->shape[k]);
		numel *= shape[k];
	}
	cr_assert_eq(s->numel, numel);
	for (i = 0; i < numel; i++) {
		size_t len;
		const char *t = td_strings_at(&len, s, i);

		cr_assert_not_null(t);
		cr_assert_str_eq(t, want[i], "%s[%lld]", key, (long long)i);
		cr_assert_eq(len, strlen(want[i]));
	}
}

static void assert_string(const td_dict *d, const char *key, const char *want)
{
	const td_value *v;

	td_cr_assert_ok(td_dict_get(&v, d, key));
	cr_assert_eq(v->kind, TD_VALUE_STRING, "%s: kind %d", key, v->kind);
	cr_assert_str_eq(v->blob.data, want);
}

Test(strings, set_get_and_read_each_element)
{
	td_dict *d = abc_dict();
	const int64_t b3[] = { 3 };
	const td_strings *s;
	const td_value *v;
	size_t len = 99;

	assert_strings(d, "lst", 1, b3, ABC);
	td_cr_assert_ok(td_dict_get(&v, d, "lst"));
	cr_assert_eq(v->kind, TD_VALUE_STRINGS);
	s = v->strings;
	cr_assert_null(td_strings_at(&len, s, -1));
	cr_assert_null(td_strings_at(&len, s, 3));
	cr_assert_null(td_strings_at(&len, NULL, 0));
	cr_assert_eq(len, 99, "a miss leaves the length alone");
	cr_assert_str_eq(td_strings_at(NULL, s, 1), "beta");
	/* Other getters refuse it; its getter refuses other kinds. */
	{
		const td_tensor *t;
		const char *data;

		td_cr_assert_err(td_dict_get_tensor(&t, d, "lst"), TD_ETYPE);
		td_cr_assert_err(td_dict_get_blob(&data, NULL, d, "lst"), TD_ETYPE);
		td_cr_assert_err(td_dict_get_strings(&s, d, "x"), TD_ETYPE);
		td_cr_assert_err(td_dict_get_strings(&s, d, "nope"), TD_ENOTFOUND);
		td_cr_assert_err(td_dict_get_strings(NULL, d, "lst"), TD_EINVAL);
	}
	td_dict_free(d);
}

Test(strings, key_forms_and_nested_dicts)
{
	const int64_t b2[] = { 2 }, s23[] = { 2, 3 };
	const char *const six[] = { "a", "b", "c", "d", "e", "f" };
	const char *const path[] = { "sub", "names.with.dots" };
	td_key *k = td_test_key(path, 2);
	const td_strings *s;
	td_dict *d;

	td_cr_assert_ok(td_dict_new(&d, 1, b2));
	td_cr_assert_ok(td_dict_set_strings_key(d, k, 2, s23, six));
	td_cr_assert_ok(td_dict_get_strings_key(&s, d, k));
	cr_assert_eq(s->ndim, 2);
	cr_assert_str_eq(td_strings_at(NULL, s, 5), "f");
	td_cr_assert_err(td_dict_set_strings_key(d, NULL, 2, s23, six), TD_EINVAL);
	td_cr_assert_err(td_dict_get_strings_key(&s, d, NULL), TD_EINVAL);
	td_key_free(k);
	td_dict_free(d);
}

Test(strings, bad_arguments_are_refused_and_change_nothing)
{
	const int64_t b3[] = { 3 }, b4[] = { 4 }, neg[] = { -1 }, s0[] = { 0 };
	const int64_t huge[] = { INT64_MAX, 2 };
	const char *const with_null[] = { "a", NULL, "c" };
	const char *const bad_utf8[] = { "a", "\xc3\x28", "c" };
	const td_strings *s;
	td_dict *d = abc_dict();

	td_cr_assert_err(td_dict_set_strings(d, "y", 1, b4,
						 (const char *const[]){ "a", "b", "c", "d" }),
		TD_ETYPE);
	td_cr_assert_err(td_dict_set_strings(d, "y", 0, b3, ABC), TD_EINVAL);
	td_cr_assert_err(td_dict_set_strings(d, "y", TD_MAX_DIMS + 1, b3, ABC), TD_EINVAL);
	td_cr_assert_err(td_dict_set_strings(d, "y", 1, NULL, ABC), TD_EINVAL);
	td_cr_assert_err(td_dict_set_strings(d, "y", 1, neg, ABC), TD_EINVAL);
	td_cr_assert_err(td_dict_set_strings(d, "y", 2, huge, ABC), TD_EOVERFLOW);
	td_cr_assert_err(td_dict_set_strings(d, "y", 1, b3, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_strings(d, "y", 1, b3, with_null), TD_EINVAL);
	td_cr_assert_err(td_dict_set_strings(d, "y", 1, b3, bad_utf8), TD_EINVAL);
	td_cr_assert_err(td_dict_set_strings(NULL, "y", 1, b3, ABC), TD_EINVAL);
	cr_assert_eq(td_dict_len(d), 2, "nothing was added");
	/* An empty array is fine in a dict of batch [0]. */
	{
		td_dict *e;

		td_cr_assert_ok(td_dict_new(&e, 1, s0));
		td_cr_assert_ok(td_dict_set_strings(e, "none", 1, s0, NULL));
		td_cr_assert_ok(td_dict_get_strings(&s, e, "none"));
		cr_assert_eq(s->numel, 0);
		td_dict_free(e);
	}
	/* A locked dict refuses a new array and the replacement of one. */
	td_cr_assert_ok(td_dict_lock(d));
	td_cr_assert_err(td_dict_set_strings(d, "y", 1, b3, ABC), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_strings(d, "lst", 1, b3, ABC), TD_ELOCKED);
	td_dict_free(d);
}

Test(strings, batch_shape_must_keep_fitting)
{
	const int64_t b2[] = { 2 }, b3[] = { 3 }, b31[] = { 3, 1 };
	td_dict *d = abc_dict();

	td_cr_assert_err(td_dict_set_batch_shape(d, 1, b2), TD_ETYPE);
	td_cr_assert_ok(td_dict_set_batch_shape(d, 0, NULL));
	td_cr_assert_ok(td_dict_set_batch_shape(d, 1, b3));
	td_cr_assert_err(td_dict_set_batch_shape(d, 2, b31), TD_ETYPE);
	td_dict_free(d);
}

Test(strings, int_index_gives_a_single_string)
{
	td_dict *d = abc_dict(), *r;
	td_index i1 = td_index_int(1), im1 = td_index_int(-1);

	td_cr_assert_ok(td_dict_index(&r, d, &i1, 1));
	assert_string(r, "lst", "beta");
	td_dict_free(r);
	td_cr_assert_ok(td_dict_index(&r, d, &im1, 1));
	assert_string(r, "lst", "gamma");
	td_dict_free(r);
	td_dict_free(d);
}

Test(strings, slices_lists_masks_and_newaxis)
{
	td_dict *d = abc_dict(), *r;
	const int64_t list[] = { 2, 0, 2 }, s1[] = { 1 }, s2[] = { 2 }, s3[] = { 3 };
	const int64_t s13[] = { 1, 3 };
	const bool mask[] = { true, false, true };
	td_index idx[2];

	idx[0] = td_index_slice(1, TD_SLICE_NONE, 1);
	td_cr_assert_ok(td_dict_index(&r, d, idx, 1));
	assert_strings(r, "lst", 1, s2, (const char *const[]){ "beta", "gamma" });
	td_dict_free(r);

	idx[0] = td_index_slice(TD_SLICE_NONE, TD_SLICE_NONE, 2);
	td_cr_assert_ok(td_dict_index(&r, d, idx, 1));
	assert_strings(r, "lst", 1, s2, (const char *const[]){ "alpha", "gamma" });
	td_dict_free(r);

	idx[0] = td_index_list(list, 3);
	td_cr_assert_ok(td_dict_index(&r, d, idx, 1));
	assert_strings(r, "lst", 1, s3, (const char *const[]){ "gamma", "alpha", "gamma" });
	td_dict_free(r);

	idx[0] = td_index_mask(mask, 3);
	td_cr_assert_ok(td_dict_index(&r, d, idx, 1));
	assert_strings(r, "lst", 1, s2, (const char *const[]){ "alpha", "gamma" });
	td_dict_free(r);

	idx[0] = td_index_newaxis();
	td_cr_assert_ok(td_dict_index(&r, d, idx, 1));
	assert_strings(r, "lst", 2, s13, ABC);
	td_dict_free(r);

	idx[0] = td_index_range(2, 3, 1);
	td_cr_assert_ok(td_dict_index(&r, d, idx, 1));
	assert_strings(r, "lst", 1, s1, (const char *const[]){ "gamma" });
	td_dict_free(r);
	td_dict_free(d);
}

Test(strings, extra_dims_beyond_the_batch_stay)
{
	const int64_t b2[] = { 2 }, s23[] = { 2, 3 }, s3[] = { 3 };
	const char *const six[] = { "a", "b", "c", "d", "e", "f" };
	td_index i1 = td_index_int(1);
	td_dict *d, *r;

	td_cr_assert_ok(td_dict_new(&d, 1, b2));
	td_cr_assert_ok(td_dict_set_strings(d, "g", 2, s23, six));
	td_cr_assert_ok(td_dict_index(&r, d, &i1, 1));
	assert_strings(r, "g", 1, s3, six + 3);
	td_dict_free(r);
	td_dict_free(d);
}

Test(strings, unbind_split_and_stack_back)
{
	td_dict *d = abc_dict(), **parts, *back;
	const int64_t s1[] = { 1 }, s2[] = { 2 }, b3[] = { 3 };
	size_t n;

	td_cr_assert_ok(td_dict_unbind(&parts, &n, d, 0));
	cr_assert_eq(n, 3);
	assert_string(parts[0], "lst", "alpha");
	assert_string(parts[2], "lst", "gamma");
	/* Stacking strings that differ gives an array again (tensordict's NonTensorStack). */
	td_cr_assert_ok(td_dict_stack(&back, (const td_dict *const *)parts, n, 0));
	assert_strings(back, "lst", 1, b3, ABC);
	cr_assert_eq(td_dict_equal(back, d), 1);
	td_dict_free(back);
	td_dict_array_free(parts, n);

	td_cr_assert_ok(td_dict_split(&parts, &n, d, 2, 0));
	cr_assert_eq(n, 2);
	assert_strings(parts[0], "lst", 1, s2, ABC);
	assert_strings(parts[1], "lst", 1, s1, ABC + 2);
	td_cr_assert_ok(td_dict_cat(&back, (const td_dict *const *)parts, n, 0));
	assert_strings(back, "lst", 1, b3, ABC);
	td_dict_free(back);
	td_dict_array_free(parts, n);
	td_dict_free(d);
}

Test(strings, stack_and_cat_mix_strings_and_arrays)
{
	const int64_t b2[] = { 2 }, s4[] = { 4 }, s22[] = { 2, 2 };
	td_dict *a, *b, *r;
	const td_dict *two[2];

	td_cr_assert_ok(td_dict_new(&a, 1, b2));
	td_cr_assert_ok(td_dict_new(&b, 1, b2));
	td_cr_assert_ok(td_dict_set_string(a, "s", "same"));
	td_cr_assert_ok(td_dict_set_string(b, "s", "same"));
	td_cr_assert_ok(td_dict_set_string(a, "t", "x"));
	td_cr_assert_ok(td_dict_set_strings(b, "t", 1, b2, (const char *const[]){ "y", "z" }));
	two[0] = a;
	two[1] = b;
	/* Equal strings stay one string; a string beside an array is broadcast. */
	td_cr_assert_ok(td_dict_cat(&r, two, 2, 0));
	assert_string(r, "s", "same");
	assert_strings(r, "t", 1, s4, (const char *const[]){ "x", "x", "y", "z" });
	td_dict_free(r);
	td_cr_assert_ok(td_dict_stack(&r, two, 2, 1));
	assert_string(r, "s", "same");
	assert_strings(r, "t", 2, s22, (const char *const[]){ "x", "y", "x", "z" });
	td_dict_free(r);
	/* Bytes do not join with strings. */
	td_cr_assert_ok(td_dict_set_bytes(b, "s", "same", 4));
	td_cr_assert_err(td_dict_cat(&r, two, 2, 0), TD_ETYPE);
	cr_assert_null(r);
	td_dict_free(a);
	td_dict_free(b);
}

Test(strings, reshape_permute_squeeze_unsqueeze)
{
	const int64_t b23[] = { 2, 3 }, s6[] = { 6 }, s32[] = { 3, 2 }, s123[] = { 1, 2, 3 };
	const char *const six[] = { "a", "b", "c", "d", "e", "f" };
	const int perm[] = { 1, 0 };
	td_dict *d, *r, *r2;

	td_cr_assert_ok(td_dict_new(&d, 2, b23));
	td_cr_assert_ok(td_dict_set_strings(d, "g", 2, b23, six));
	td_cr_assert_ok(td_dict_reshape(&r, d, 1, s6));
	assert_strings(r, "g", 1, s6, six);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_permute(&r, d, perm));
	assert_strings(r, "g", 2, s32, (const char *const[]){ "a", "d", "b", "e", "c", "f" });
	td_dict_free(r);
	td_cr_assert_ok(td_dict_unsqueeze(&r, d, 0));
	assert_strings(r, "g", 3, s123, six);
	td_cr_assert_ok(td_dict_squeeze(&r2, r, 0));
	assert_strings(r2, "g", 2, b23, six);
	td_dict_free(r2);
	td_dict_free(r);
	td_dict_free(d);
}

Test(strings, index_put_replaces_the_array)
{
	const int64_t b3[] = { 3 }, b2[] = { 2 };
	td_dict *d = abc_dict(), *v, *copy;
	td_index idx = td_index_slice(0, 2, 1), one = td_index_int(2);

	td_cr_assert_ok(td_dict_copy(&copy, d));
	td_cr_assert_ok(td_dict_new(&v, 1, b2));
	td_cr_assert_ok(td_dict_set_strings(v, "lst", 1, b2, (const char *const[]){ "A", "B" }));
	td_cr_assert_ok(td_dict_index_put(d, &idx, 1, v));
	assert_strings(d, "lst", 1, b3, (const char *const[]){ "A", "B", "gamma" });
	/* The copy shared the old array: it is not changed. */
	assert_strings(copy, "lst", 1, b3, ABC);
	td_dict_free(v);

	/* A single string written at an int index; a broadcast string. */
	td_cr_assert_ok(td_dict_new(&v, 0, NULL));
	td_cr_assert_ok(td_dict_set_string(v, "lst", "C"));
	td_cr_assert_ok(td_dict_index_put(d, &one, 1, v));
	assert_strings(d, "lst", 1, b3, (const char *const[]){ "A", "B", "C" });
	td_dict_free(v);
	td_cr_assert_ok(td_dict_new(&v, 1, b2));
	td_cr_assert_ok(td_dict_set_string(v, "lst", "Z"));
	td_cr_assert_ok(td_dict_index_put(d, &idx, 1, v));
	assert_strings(d, "lst", 1, b3, (const char *const[]){ "Z", "Z", "C" });

	/* A single string in the dict becomes an array when one element changes. */
	td_cr_assert_ok(td_dict_set_string(copy, "name", "n"));
	td_cr_assert_ok(td_dict_set_string(v, "name", "m"));
	td_cr_assert_err(td_dict_get_strings(&(const td_strings *){ NULL }, copy, "name"), TD_ETYPE);
	td_cr_assert_ok(td_dict_index_put(copy, &idx, 1, v));
	assert_strings(copy, "name", 1, b3, (const char *const[]){ "m", "m", "n" });
	td_dict_free(v);
	td_dict_free(copy);
	td_dict_free(d);
}

Test(strings, index_put_creates_missing_arrays_and_respects_locks)
{
	const int64_t b3[] = { 3 }, b2[] = { 2 };
	td_dict *d = abc_dict(), *v;
	td_index idx = td_index_slice(1, 3, 1);

	td_cr_assert_ok(td_dict_new(&v, 1, b2));
	td_cr_assert_ok(td_dict_set_strings(v, "new", 1, b2, (const char *const[]){ "p", "q" }));
	td_cr_assert_ok(td_dict_index_put(d, &idx, 1, v));
	assert_strings(d, "new", 1, b3, (const char *const[]){ "", "p", "q" });
	/* Locked: an equal write is fine, a change is refused and changes nothing. */
	td_cr_assert_ok(td_dict_lock(d));
	td_cr_assert_ok(td_dict_index_put(d, &idx, 1, v));
	td_cr_assert_ok(td_dict_set_strings(v, "new", 1, b2, (const char *const[]){ "P", "Q" }));
	td_cr_assert_err(td_dict_index_put(d, &idx, 1, v), TD_ELOCKED);
	assert_strings(d, "new", 1, b3, (const char *const[]){ "", "p", "q" });
	/* A value array of the wrong shape. */
	td_cr_assert_ok(td_dict_unlock(d));
	{
		const int64_t s3[] = { 3 };
		td_dict *w;

		td_cr_assert_ok(td_dict_new(&w, 1, b2));
		td_cr_assert_ok(td_dict_set_strings(w, "lst", 2, (const int64_t[]){ 2, 3 },
			(const char *const[]){ "1", "2", "3", "4", "5", "6" }));
		td_cr_assert_err(td_dict_index_put(d, &idx, 1, w), TD_ETYPE);
		assert_strings(d, "lst", 1, s3, ABC);
		td_dict_free(w);
	}
	td_dict_free(v);
	td_dict_free(d);
}

Test(strings, copies_equality_update_select)
{
	const int64_t b3[] = { 3 }, b2[] = { 2 };
	td_dict *d = abc_dict(), *c, *o, *sel;
	const char *key = "lst";

	td_cr_assert_ok(td_dict_clone(&c, d));
	cr_assert_eq(td_dict_equal(c, d), 1);
	cr_assert_eq(td_dict_allclose(c, d, 1e-5, 1e-8, false), 1);
	td_cr_assert_ok(
		td_dict_set_strings(c, "lst", 1, b3, (const char *const[]){ "alpha", "beta", "delta" }));
	cr_assert_eq(td_dict_equal(c, d), 0);
	cr_assert_eq(td_dict_allclose(c, d, 1e-5, 1e-8, false), 0);

	/* update_inplace replaces the array; a shape change is refused. */
	td_cr_assert_ok(td_dict_update_inplace(d, c));
	assert_strings(d, "lst", 1, b3, (const char *const[]){ "alpha", "beta", "delta" });
	td_cr_assert_ok(td_dict_new(&o, 0, NULL));
	td_cr_assert_ok(td_dict_set_strings(o, "lst", 1, b2, ABC));
	td_cr_assert_err(td_dict_update_inplace(d, o), TD_ETYPE);
	td_dict_free(o);

	td_cr_assert_ok(td_dict_select(&sel, d, &key, 1, false));
	assert_strings(sel, "lst", 1, b3, (const char *const[]){ "alpha", "beta", "delta" });
	td_dict_free(sel);
	td_dict_free(c);
	td_dict_free(d);
}

Test(strings, a_copy_shares_the_array_and_keeps_it_after_the_original_is_freed)
{
	const int64_t b3[] = { 3 };
	td_dict *d = abc_dict(), *c;
	const td_strings *s, *sc;
	const td_value *v;

	td_cr_assert_ok(td_dict_get_strings(&s, d, "lst"));
	cr_assert_eq(td_buffer_refcount(s->buffer), 1);
	td_cr_assert_ok(td_dict_get(&v, d, "lst"));
	cr_assert_eq(v->strings, s, "the value points to the array td_dict_get_strings() gives");
	td_cr_assert_ok(td_dict_copy(&c, d));
	td_cr_assert_ok(td_dict_get_strings(&sc, c, "lst"));
	cr_assert_eq(sc, s, "a copy points to the same array");
	cr_assert_eq(td_buffer_refcount(s->buffer), 2);
	td_dict_free(d);
	/* The struct lives in its buffer, which the copy still references. */
	cr_assert_eq(td_buffer_refcount(sc->buffer), 1);
	assert_strings(c, "lst", 1, b3, ABC);
	td_dict_free(c);
}

Test(strings, apply_and_arithmetic_carry_arrays_over)
{
	const int64_t b3[] = { 3 };
	td_dict *d = abc_dict(), *r;

	td_cr_assert_ok(td_dict_binary_scalar(&r, d, td_scalar_int(1), TD_OP_ADD));
	assert_strings(r, "lst", 1, b3, ABC);
	td_dict_free(r);
	td_dict_free(d);
}

Test(strings, rename_keeps_the_shape_rule)
{
	const int64_t b3[] = { 3 }, b32[] = { 3, 2 };
	td_dict *d = abc_dict(), *sub;
	td_tensor t;

	td_cr_assert_ok(td_dict_rename(d, "lst", "moved.lst"));
	assert_strings(d, "moved.lst", 1, b3, ABC);
	td_cr_assert_ok(td_dict_new(&sub, 2, b32));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 2, b32));
	td_cr_assert_ok(td_dict_set_tensor_take(sub, "t", &t));
	td_cr_assert_ok(td_dict_set_dict_take(d, "deep", sub));
	td_cr_assert_err(td_dict_rename(d, "moved.lst", "deep.lst"), TD_ETYPE);
	td_dict_free(d);
}

Test(strings, lazy_stacks_slice_arrays_into_children)
{
	const int64_t b2[] = { 2 }, s3[] = { 3 };
	td_dict *c[2], *z;
	int i;

	for (i = 0; i < 2; i++)
		td_cr_assert_ok(td_dict_new(&c[i], 1, s3));
	td_cr_assert_ok(td_lazy_stack(&z, c, 2, 0, TD_LAZY_TAKE));
	/* An array of shape [2, 3] stored in the stack: child i gets row i. */
	td_cr_assert_ok(td_dict_set_strings(z, "names", 2, (const int64_t[]){ 2, 3 },
		(const char *const[]){ "a", "b", "c", "d", "e", "f" }));
	assert_strings(td_lazy_child(z, 0), "names", 1, s3, (const char *const[]){ "a", "b", "c" });
	assert_strings(td_lazy_child(z, 1), "names", 1, s3, (const char *const[]){ "d", "e", "f" });
	td_cr_assert_err(td_dict_set_strings(z, "bad", 1, s3, ABC), TD_ETYPE);
	td_cr_assert_ok(td_dict_lock(z));
	td_cr_assert_err(td_dict_set_strings(z, "new", 2, (const int64_t[]){ 2, 3 },
						 (const char *const[]){ "a", "b", "c", "d", "e", "f" }),
		TD_ELOCKED);
	td_dict_free(z);

	/* Children of batch []: an array of shape [2] gives each a single string. */
	for (i = 0; i < 2; i++)
		td_cr_assert_ok(td_dict_new(&c[i], 0, NULL));
	td_cr_assert_ok(td_lazy_stack(&z, c, 2, 0, TD_LAZY_TAKE));
	td_cr_assert_ok(td_dict_set_strings(z, "one", 1, b2, (const char *const[]){ "x", "y" }));
	assert_string(td_lazy_child(z, 0), "one", "x");
	assert_string(td_lazy_child(z, 1), "one", "y");
	td_dict_free(z);
}

/* ---- allocation failures ---- */

typedef struct sweep {
	td_dict *d, *out;
	td_dict **parts;
	size_t n;
} sweep;

static void cleanup_out(void *ctx);

static int body_set(void *ctx)
{
	sweep *s = ctx;
	const int64_t b3[] = { 3 };
	int rc = td_dict_new(&s->out, 1, b3);

	if (rc == TD_OK)
		rc = td_dict_set_strings(s->out, "new", 1, b3, ABC);
	if (rc < 0) {
		td_dict_free(s->out);
		s->out = NULL;
	}
	return rc;
}

static int body_index(void *ctx)
{
	sweep *s = ctx;
	const int64_t list[] = { 2, 1 };
	td_index idx = td_index_list(list, 2);

	return td_dict_index(&s->out, s->d, &idx, 1);
}

static void cleanup_out(void *ctx)
{
	sweep *s = ctx;

	td_dict_free(s->out);
	s->out = NULL;
}

static int body_unbind_stack(void *ctx)
{
	sweep *s = ctx;
	int rc = td_dict_unbind(&s->parts, &s->n, s->d, 0);

	if (rc < 0)
		return rc;
	rc = td_dict_stack(&s->out, (const td_dict *const *)s->parts, s->n, 0);
	td_dict_array_free(s->parts, s->n);
	s->parts = NULL;
	return rc;
}

static int body_put(void *ctx)
{
	sweep *s = ctx;
	td_index idx = td_index_int(0);
	td_dict *v;
	int rc;

	rc = td_dict_new(&v, 0, NULL);
	if (rc < 0)
		return rc;
	rc = td_dict_set_string(v, "lst", "changed");
	if (rc == TD_OK)
		rc = td_dict_index_put(s->d, &idx, 1, v);
	td_dict_free(v);
	return rc;
}

static void cleanup_none(void *ctx)
{
	(void)ctx;
}

Test(strings, allocation_failures_leave_nothing_behind)
{
	sweep s = { 0 };

	s.d = abc_dict();
	td_test_enomem_sweep(body_set, cleanup_out, &s);
	td_test_enomem_sweep(body_index, cleanup_out, &s);
	td_test_enomem_sweep(body_unbind_stack, cleanup_out, &s);
	td_test_enomem_sweep(body_put, cleanup_none, &s);
	td_cr_assert_ok(td_dict_get_strings(&(const td_strings *){ NULL }, s.d, "lst"));
	{
		const td_strings *st;

		td_cr_assert_ok(td_dict_get_strings(&st, s.d, "lst"));
		cr_assert_str_eq(td_strings_at(NULL, st, 0), "changed");
	}
	td_dict_free(s.d);
}
