/* SPDX-License-Identifier: MIT */
/*
 * test_dict.c - the td_dict map: creation, batch shapes, the three key
 * forms, set/get/delete/rename, locking, non-tensor values, iteration
 * order, index growth and holes, and allocation failures.
 */
#include "td_test.h"

#include <stdio.h>

static const int64_t B34[] = { 3, 4 };

static td_dict *new34(void)
{
	td_dict *d;

	td_cr_assert_ok(td_dict_new(&d, 2, B34));
	return d;
}

static void zeros(td_tensor *t, int ndim, const int64_t *shape)
{
	td_cr_assert_ok(td_tensor_zeros(t, TD_DTYPE_F32, ndim, shape));
}

static void put(td_dict *d, const char *key, int ndim, const int64_t *shape)
{
	td_tensor t;

	zeros(&t, ndim, shape);
	td_cr_assert_ok(td_dict_set_tensor_take(d, key, &t));
	cr_assert_null(t.buffer);
}

Test(dict, new_dict_is_empty_with_its_batch_shape)
{
	td_dict *d = new34();

	cr_assert_eq(td_dict_len(d), 0);
	cr_assert_eq(td_dict_batch_ndim(d), 2);
	cr_assert_eq(td_dict_batch_shape(d)[0], 3);
	cr_assert_eq(td_dict_batch_shape(d)[1], 4);
	cr_assert_eq(td_dict_batch_numel(d), 12);
	cr_assert_null(td_dict_parent(d));
	cr_assert_not(td_dict_is_locked(d));
	td_dict_free(d);
	td_dict_free(NULL);
}

Test(dict, new_rejects_bad_batch_shapes)
{
	td_dict *d = (td_dict *)0x1;
	int64_t neg[] = { 3, -1 };
	int64_t big[TD_MAX_DIMS + 1] = { 0 };

	td_cr_assert_err(td_dict_new(NULL, 0, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_new(&d, 2, neg), TD_EINVAL);
	cr_assert_null(d);
	td_cr_assert_err(td_dict_new(&d, TD_MAX_DIMS + 1, big), TD_EINVAL);
	td_cr_assert_err(td_dict_new(&d, -1, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_new(&d, 2, NULL), TD_EINVAL);
}

Test(dict, set_shares_the_buffer_and_get_returns_it)
{
	td_dict *d = new34();
	int64_t s[] = { 3, 4, 5 };
	const td_tensor *got;
	td_tensor t;

	zeros(&t, 3, s);
	td_cr_assert_ok(td_dict_set_tensor(d, "obs", &t));
	cr_assert_eq(td_buffer_refcount(t.buffer), 2);
	td_cr_assert_ok(td_dict_get_tensor(d, "obs", &got));
	cr_assert_eq(got->buffer, t.buffer);
	cr_assert_eq(got->ndim, 3);
	cr_assert_eq(td_dict_len(d), 1);
	td_dict_free(d);
	cr_assert_eq(td_buffer_refcount(t.buffer), 1);
	td_tensor_release(&t);
}

Test(dict, set_rejects_shapes_not_starting_with_the_batch)
{
	td_dict *d = new34();
	int64_t s1[] = { 4, 3 }, s2[] = { 3 }, s3[] = { 3, 4, 2 };
	td_tensor t;

	zeros(&t, 2, s1);
	td_cr_assert_err(td_dict_set_tensor(d, "x", &t), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "[4, 3]") != NULL, "%s",
		td_error_last()->message);
	td_tensor_release(&t);
	zeros(&t, 1, s2);
	td_cr_assert_err(td_dict_set_tensor(d, "x", &t), TD_ETYPE);
	td_cr_assert_err(td_dict_set_tensor_take(d, "x", &t), TD_ETYPE);
	cr_assert_not_null(t.buffer, "a failed take leaves the tensor with the caller");
	td_tensor_release(&t);
	zeros(&t, 3, s3);
	td_cr_assert_ok(td_dict_set_tensor(d, "x", &t));
	td_tensor_release(&t);
	cr_assert_eq(td_dict_len(d), 1);
	td_dict_free(d);
}

Test(dict, bad_arguments_are_refused)
{
	td_dict *d = new34();
	td_tensor t = TD_TENSOR_INIT;
	const td_tensor *got;
	const td_value *v;

	td_cr_assert_err(td_dict_set_tensor(d, "x", &t), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor(d, "x", NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor(NULL, "x", &t), TD_EINVAL);
	td_cr_assert_err(td_dict_get_tensor(d, NULL, &got), TD_EINVAL);
	td_cr_assert_err(td_dict_get_tensor(d, "x", NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_get(NULL, "x", &v), TD_EINVAL);
	td_cr_assert_err(td_dict_get(d, "", &v), TD_EINVAL);
	td_cr_assert_err(td_dict_get(d, "a..b", &v), TD_EINVAL);
	td_cr_assert_err(td_dict_get(d, ".a", &v), TD_EINVAL);
	td_cr_assert_err(td_dict_get(d, "a.", &v), TD_EINVAL);
	td_cr_assert_err(td_dict_get_path(d, NULL, 1, &v), TD_EINVAL);
	td_cr_assert_err(td_dict_get_path(d, (const char *[]){ "a" }, 0, &v), TD_EINVAL);
	td_cr_assert_err(td_dict_get_path(d, (const char *[]){ NULL }, 1, &v), TD_EINVAL);
	td_cr_assert_err(td_dict_get_key(d, NULL, &v), TD_EINVAL);
	td_cr_assert_err(td_dict_contains(NULL, "a", 0), TD_EINVAL);
	td_cr_assert_err(td_dict_contains(d, "a", 0x100), TD_EINVAL);
	td_dict_free(d);
}

Test(dict, missing_keys_are_reported_by_component)
{
	td_dict *d = new34();
	const td_value *v;
	int64_t s[] = { 3, 4 };

	put(d, "a.b", 2, s);
	td_cr_assert_err(td_dict_get(d, "zzz", &v), TD_ENOTFOUND);
	cr_assert(strstr(td_error_last()->message, "zzz") != NULL);
	td_cr_assert_err(td_dict_get(d, "a.c", &v), TD_ENOTFOUND);
	cr_assert(strstr(td_error_last()->message, "'c' is missing") != NULL, "%s",
		td_error_last()->message);
	td_cr_assert_err(td_dict_get(d, "a.b.c", &v), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "'b' is not a dict") != NULL, "%s",
		td_error_last()->message);
	cr_assert_eq(td_dict_contains(d, "a.b.c", 0), 0);
	td_dict_free(d);
}

Test(dict, nested_set_creates_intermediate_dicts_with_the_parent_batch)
{
	td_dict *d = new34(), *a, *b;
	int64_t s[] = { 3, 4, 7 };
	const td_tensor *got;

	put(d, "a.b.c", 3, s);
	td_cr_assert_ok(td_dict_get_dict(d, "a", &a));
	td_cr_assert_ok(td_dict_get_dict(d, "a.b", &b));
	cr_assert_eq(td_dict_parent(a), d);
	cr_assert_eq(td_dict_parent(b), a);
	cr_assert_eq(td_dict_batch_ndim(b), 2);
	cr_assert_eq(td_dict_batch_shape(b)[1], 4);
	td_cr_assert_ok(td_dict_get_tensor_path(d, (const char *[]){ "a", "b", "c" }, 3, &got));
	cr_assert_eq(got->shape[2], 7);
	cr_assert_eq(td_dict_contains(d, "a.b", 0), 1);
	cr_assert_eq(td_dict_contains(d, "a.b", TD_LEAVES_ONLY), 0);
	cr_assert_eq(td_dict_contains(d, "a.b.c", TD_LEAVES_ONLY), 1);
	td_dict_free(a); /* a child belongs to its parent: this does nothing */
	td_cr_assert_ok(td_dict_get_dict(d, "a", &a));
	td_dict_free(d);
}

Test(dict, failed_nested_set_leaves_no_intermediate_dicts)
{
	td_dict *d = new34();
	int64_t bad[] = { 5 };
	td_tensor t;

	zeros(&t, 1, bad);
	td_cr_assert_err(td_dict_set_tensor(d, "x.y.z", &t), TD_ETYPE);
	cr_assert_eq(td_dict_len(d), 0);
	cr_assert_eq(td_dict_contains(d, "x", 0), 0);
	td_tensor_release(&t);
	td_dict_free(d);
}

Test(dict, path_components_may_hold_dots_and_be_empty)
{
	td_dict *d = new34();
	const char *p[] = { "a.b", "" };
	const td_value *v;
	td_tensor t;

	zeros(&t, 2, B34);
	td_cr_assert_ok(td_dict_set_tensor_path(d, p, 2, &t));
	td_cr_assert_ok(td_dict_get_path(d, p, 2, &v));
	cr_assert_eq(v->kind, TD_VALUE_TENSOR);
	cr_assert_eq(td_dict_contains(d, "a", 0), 0);
	cr_assert_eq(td_dict_contains_path(d, p, 1, 0), 1);
	td_tensor_release(&t);
	td_dict_free(d);
}

Test(dict, key_handles_reach_the_same_entries)
{
	td_dict *d = new34();
	td_key *k, *k2;
	const char *parts[] = { "next", "obs" };
	const td_tensor *got;
	td_tensor t;

	td_cr_assert_ok(td_key_new(&k, "next.obs"));
	cr_assert_eq(td_key_depth(k), 2);
	cr_assert_str_eq(td_key_part(k, 0), "next");
	cr_assert_str_eq(td_key_part(k, 1), "obs");
	cr_assert_null(td_key_part(k, 2));
	td_cr_assert_ok(td_key_from_path(&k2, parts, 2));
	zeros(&t, 2, B34);
	td_cr_assert_ok(td_dict_set_tensor_key(d, k, &t));
	td_cr_assert_ok(td_dict_get_tensor_key(d, k2, &got));
	cr_assert_eq(got->buffer, t.buffer);
	cr_assert_eq(td_dict_contains_key(d, k2, TD_LEAVES_ONLY), 1);
	td_cr_assert_ok(td_dict_set_tensor_inplace_key(d, k, &t));
	td_key_free(k);
	td_key_free(k2);
	td_key_free(NULL);
	cr_assert_eq(td_key_depth(NULL), 0);
	td_cr_assert_err(td_key_new(&k, "a..b"), TD_EINVAL);
	cr_assert_null(k);
	td_cr_assert_err(td_key_new(NULL, "a"), TD_EINVAL);
	td_cr_assert_err(td_key_from_path(&k, parts, 0), TD_EINVAL);
	td_cr_assert_err(td_key_from_path(&k, parts, TD_KEY_MAX_DEPTH + 1), TD_EINVAL);
	td_tensor_release(&t);
	td_dict_free(d);
}

Test(dict, replacing_a_value_releases_the_old_one)
{
	td_dict *d = new34();
	td_tensor a, b;
	const td_tensor *got;

	zeros(&a, 2, B34);
	zeros(&b, 2, B34);
	td_cr_assert_ok(td_dict_set_tensor(d, "x", &a));
	td_cr_assert_ok(td_dict_set_tensor(d, "x", &b));
	cr_assert_eq(td_buffer_refcount(a.buffer), 1);
	td_cr_assert_ok(td_dict_get_tensor(d, "x", &got));
	cr_assert_eq(got->buffer, b.buffer);
	td_cr_assert_ok(td_dict_set_string(d, "x", "now a string"));
	cr_assert_eq(td_buffer_refcount(b.buffer), 1);
	td_tensor_release(&a);
	td_tensor_release(&b);
	td_dict_free(d);
}

Test(dict, set_inplace_copies_with_broadcast_and_conversion)
{
	td_dict *d = new34();
	int64_t s1[] = { 4 };
	const td_tensor *got;
	td_tensor src, t;
	td_scalar v;
	int64_t at[] = { 2, 3 };

	zeros(&t, 2, B34);
	td_cr_assert_ok(td_dict_set_tensor(d, "x", &t));
	td_cr_assert_ok(td_tensor_full(&src, TD_DTYPE_I64, 1, s1, td_scalar_int(7)));
	td_cr_assert_ok(td_dict_set_tensor_inplace(d, "x", &src));
	td_cr_assert_ok(td_dict_get_tensor(d, "x", &got));
	cr_assert_eq(got->buffer, t.buffer, "in place keeps the stored buffer");
	td_cr_assert_ok(td_tensor_get(got, at, &v));
	cr_assert_float_eq(v.v.f, 7.0, 0);
	td_cr_assert_err(td_dict_set_tensor_inplace(d, "missing", &src), TD_ENOTFOUND);
	td_cr_assert_ok(td_dict_set_string(d, "s", "x"));
	td_cr_assert_err(td_dict_set_tensor_inplace(d, "s", &src), TD_ETYPE);
	td_cr_assert_ok(td_dict_set_tensor_inplace_path(d, (const char *[]){ "x" }, 1, &src));
	td_tensor_release(&src);
	td_tensor_release(&t);
	td_dict_free(d);
}

Test(dict, locked_dict_refuses_new_keys_and_deletions_but_writes_in_place)
{
	td_dict *d = new34(), *a;
	const td_tensor *got;
	td_tensor t, u;
	int64_t at[] = { 0, 0 };
	td_scalar v;

	put(d, "a.x", 2, B34);
	zeros(&t, 2, B34);
	td_cr_assert_ok(td_tensor_fill(&t, td_scalar_float(3.0)));
	td_cr_assert_ok(td_dict_lock(d));
	td_cr_assert_ok(td_dict_get_dict(d, "a", &a));
	cr_assert(td_dict_is_locked(a), "locking is recursive");
	td_cr_assert_err(td_dict_set_tensor(d, "new", &t), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_tensor(d, "b.c", &t), TD_ELOCKED);
	cr_assert_eq(td_dict_contains(d, "b", 0), 0);
	td_cr_assert_err(td_dict_del(d, "a.x"), TD_ELOCKED);
	td_cr_assert_err(td_dict_del(d, "a"), TD_ELOCKED);
	td_cr_assert_err(td_dict_rename(d, "a.x", "a.y"), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_string(d, "a", "s"), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_batch_shape(d, 1, B34), TD_ELOCKED);
	/* An existing tensor is overwritten in place. */
	td_cr_assert_ok(td_dict_get_tensor(d, "a.x", &got));
	u = *got;
	td_cr_assert_ok(td_dict_set_tensor(d, "a.x", &t));
	td_cr_assert_ok(td_dict_get_tensor(d, "a.x", &got));
	cr_assert_eq(got->buffer, u.buffer);
	td_cr_assert_ok(td_tensor_get(got, at, &v));
	cr_assert_float_eq(v.v.f, 3.0, 0);
	td_cr_assert_err(td_dict_unlock(a), TD_ELOCKED);
	td_cr_assert_ok(td_dict_unlock(d));
	cr_assert_not(td_dict_is_locked(a));
	td_cr_assert_ok(td_dict_del(d, "a.x"));
	td_cr_assert_err(td_dict_lock(NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_unlock(NULL), TD_EINVAL);
	td_tensor_release(&t);
	td_dict_free(d);
}

Test(dict, strings_and_bytes_are_stored_as_non_tensor_leaves)
{
	td_dict *d = new34();
	const char *data;
	size_t len;
	const td_value *v;
	const char raw[] = { 0, 1, 2, (char)0xff };

	td_cr_assert_ok(td_dict_set_string(d, "name", "caf\xc3\xa9"));
	td_cr_assert_ok(td_dict_get_blob(d, "name", &data, &len));
	cr_assert_str_eq(data, "caf\xc3\xa9");
	cr_assert_eq(len, 5);
	td_cr_assert_ok(td_dict_set_bytes(d, "raw", raw, sizeof(raw)));
	td_cr_assert_ok(td_dict_get(d, "raw", &v));
	cr_assert_eq(v->kind, TD_VALUE_BYTES);
	cr_assert_eq(v->u.blob.length, 4);
	cr_assert_eq(memcmp(v->u.blob.data, raw, 4), 0);
	td_cr_assert_ok(td_dict_set_bytes(d, "empty", NULL, 0));
	td_cr_assert_ok(td_dict_set_string_path(d, (const char *[]){ "n", "s" }, 2, ""));
	td_cr_assert_ok(td_dict_set_bytes_path(d, (const char *[]){ "n", "b" }, 2, "ab", 2));
	td_cr_assert_err(td_dict_set_string(d, "bad", "\xc3"), TD_EINVAL);
	td_cr_assert_err(td_dict_set_string(d, "bad", "\xc0\xaf"), TD_EINVAL); /* overlong */
	td_cr_assert_err(td_dict_set_string(d, "bad", "\xed\xa0\x80"), TD_EINVAL); /* surrogate */
	td_cr_assert_err(td_dict_set_string(d, "bad", "\xf4\x90\x80\x80"), TD_EINVAL);
	td_cr_assert_err(td_dict_set_string(d, "bad", NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_bytes(d, "bad", NULL, 3), TD_EINVAL);
	td_cr_assert_err(td_dict_get_blob(d, "n", &data, NULL), TD_ETYPE);
	cr_assert_eq(td_dict_contains(d, "bad", 0), 0);
	td_dict_free(d);
}

Test(dict, set_dict_copies_shallowly_and_take_adopts)
{
	td_dict *d = new34(), *c, *got;
	int64_t s[] = { 3, 4, 2 };
	const td_tensor *t1, *t2;

	td_cr_assert_ok(td_dict_new(&c, 2, B34));
	put(c, "x", 3, s);
	td_cr_assert_ok(td_dict_set_dict(d, "copy", c));
	td_cr_assert_ok(td_dict_get_dict(d, "copy", &got));
	cr_assert_neq(got, c);
	td_cr_assert_ok(td_dict_get_tensor(c, "x", &t1));
	td_cr_assert_ok(td_dict_get_tensor(got, "x", &t2));
	cr_assert_eq(t1->buffer, t2->buffer, "a shallow copy shares buffers");
	td_cr_assert_ok(td_dict_set_dict_take(d, "own", c));
	td_cr_assert_ok(td_dict_get_dict(d, "own", &got));
	cr_assert_eq(got, c);
	cr_assert_eq(td_dict_parent(c), d);
	td_cr_assert_err(td_dict_set_dict_take(d, "again", c), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict(d, "self", d), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict(c, "parent", d), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict(d, "x", NULL), TD_EINVAL);
	td_dict_free(d);
}

Test(dict, set_dict_checks_the_batch_shape)
{
	td_dict *d = new34(), *c;
	int64_t b4[] = { 4 };

	td_cr_assert_ok(td_dict_new(&c, 1, b4));
	td_cr_assert_err(td_dict_set_dict(d, "c", c), TD_ETYPE);
	td_cr_assert_err(td_dict_set_dict_take(d, "c", c), TD_ETYPE);
	cr_assert_null(td_dict_parent(c));
	td_dict_free(c);
	td_dict_free(d);
}

Test(dict, set_dict_into_a_locked_dict_locks_the_copy)
{
	td_dict *d = new34(), *c, *got;

	td_cr_assert_ok(td_dict_new(&c, 2, B34));
	td_cr_assert_ok(td_dict_lock(d));
	td_cr_assert_err(td_dict_set_dict(d, "c", c), TD_ELOCKED);
	td_cr_assert_ok(td_dict_unlock(d));
	td_cr_assert_ok(td_dict_set_dict(d, "c", c));
	td_cr_assert_ok(td_dict_lock(d));
	td_cr_assert_ok(td_dict_get_dict(d, "c", &got));
	cr_assert(td_dict_is_locked(got));
	td_dict_free(c);
	td_dict_free(d);
}

Test(dict, nesting_deeper_than_the_key_depth_is_refused)
{
	td_dict *d = new34();
	const char *parts[TD_KEY_MAX_DEPTH];
	td_tensor t;
	int i;

	for (i = 0; i < TD_KEY_MAX_DEPTH; i++)
		parts[i] = "k";
	zeros(&t, 2, B34);
	td_cr_assert_ok(td_dict_set_tensor_path(d, parts, TD_KEY_MAX_DEPTH, &t));
	td_dict_free(d);
	d = new34();
	{
		td_dict *inner;
		td_cr_assert_ok(td_dict_new(&inner, 2, B34));
		td_cr_assert_ok(td_dict_set_tensor_path(inner, parts, TD_KEY_MAX_DEPTH, &t));
		td_cr_assert_err(td_dict_set_dict_take(d, "deeper", inner), TD_EINVAL);
		td_dict_free(inner);
	}
	td_tensor_release(&t);
	td_dict_free(d);
}

Test(dict, delete_removes_entries_and_keeps_order)
{
	td_dict *d = new34();
	const char *keys[8];
	size_t n;

	put(d, "a", 2, B34);
	put(d, "b", 2, B34);
	put(d, "c.d", 2, B34);
	td_cr_assert_ok(td_dict_del(d, "b"));
	td_cr_assert_ok(td_dict_del_path(d, (const char *[]){ "c", "d" }, 2));
	td_cr_assert_err(td_dict_del(d, "b"), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_del(d, "c.d"), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_del(NULL, "a"), TD_EINVAL);
	put(d, "e", 2, B34);
	n = td_dict_items(d, keys, NULL, 8);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(keys[0], "a");
	cr_assert_str_eq(keys[1], "c");
	cr_assert_str_eq(keys[2], "e");
	td_cr_assert_ok(td_dict_del(d, "c"));
	cr_assert_eq(td_dict_len(d), 2);
	td_dict_free(d);
}

Test(dict, many_keys_grow_the_index_and_survive_deletions)
{
	td_dict *d = new34();
	char key[32];
	int i;

	for (i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put(d, key, 2, B34);
	}
	cr_assert_eq(td_dict_len(d), 1000);
	for (i = 0; i < 1000; i += 2) {
		snprintf(key, sizeof(key), "k%d", i);
		td_cr_assert_ok(td_dict_del(d, key));
	}
	for (i = 1000; i < 1600; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put(d, key, 2, B34);
	}
	cr_assert_eq(td_dict_len(d), 1100);
	for (i = 0; i < 1600; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(td_dict_contains(d, key, 0), (i >= 1000 || i % 2 == 1), "%s", key);
	}
	{
		/* Order: the odd survivors, then the new keys. */
		const char **keys = calloc(1100, sizeof(*keys));
		size_t n = td_dict_items(d, keys, NULL, 1100);
		cr_assert_eq(n, 1100);
		cr_assert_str_eq(keys[0], "k1");
		cr_assert_str_eq(keys[499], "k999");
		cr_assert_str_eq(keys[500], "k1000");
		cr_assert_str_eq(keys[1099], "k1599");
		free(keys);
	}
	td_dict_free(d);
}

Test(dict, rename_keeps_position_or_moves_across_dicts)
{
	td_dict *d = new34();
	const char *keys[8];
	const td_tensor *t1, *t2;

	put(d, "a", 2, B34);
	put(d, "b", 2, B34);
	put(d, "c", 2, B34);
	td_cr_assert_ok(td_dict_get_tensor(d, "b", &t1));
	td_cr_assert_ok(td_dict_rename(d, "b", "z"));
	cr_assert_eq(td_dict_items(d, keys, NULL, 8), 3);
	cr_assert_str_eq(keys[1], "z");
	td_cr_assert_ok(td_dict_get_tensor(d, "z", &t2));
	cr_assert_eq(t1->buffer, t2->buffer);
	cr_assert_eq(td_dict_contains(d, "b", 0), 0);
	td_cr_assert_ok(td_dict_rename(d, "z", "n.m.z"));
	cr_assert_eq(td_dict_contains(d, "n.m.z", TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains(d, "z", 0), 0);
	td_cr_assert_ok(td_dict_rename(d, "n", "moved"));
	cr_assert_eq(td_dict_contains(d, "moved.m.z", 0), 1);
	td_cr_assert_ok(td_dict_rename_path(d, (const char *[]){ "moved", "m", "z" }, 3,
		(const char *[]){ "back" }, 1));
	cr_assert_eq(td_dict_contains(d, "back", 0), 1);
	td_cr_assert_err(td_dict_rename(d, "a", "c"), TD_EEXISTS);
	td_cr_assert_err(td_dict_rename(d, "nope", "x"), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_rename(d, "moved", "moved.m.inside"), TD_EINVAL);
	td_cr_assert_err(td_dict_rename(d, "a", "c.x"), TD_ETYPE);
	cr_assert_eq(td_dict_contains(d, "a", 0), 1);
	td_dict_free(d);
}

Test(dict, rename_into_a_dict_with_a_different_batch_is_refused)
{
	td_dict *d = new34(), *c;
	int64_t b345[] = { 3, 4, 5 };

	td_cr_assert_ok(td_dict_new(&c, 3, b345));
	td_cr_assert_ok(td_dict_set_dict_take(d, "c", c));
	put(d, "x", 2, B34);
	td_cr_assert_err(td_dict_rename(d, "x", "c.x"), TD_ETYPE);
	cr_assert_eq(td_dict_contains(d, "x", 0), 1);
	td_dict_free(d);
}

Test(dict, set_batch_shape_checks_every_entry)
{
	td_dict *d = new34();
	int64_t b3[] = { 3 }, b5[] = { 5 }, s[] = { 3, 4, 2 };

	put(d, "x", 3, s);
	td_cr_assert_ok(td_dict_set_batch_shape(d, 3, s));
	td_cr_assert_ok(td_dict_set_batch_shape(d, 1, b3));
	td_cr_assert_err(td_dict_set_batch_shape(d, 1, b5), TD_ETYPE);
	cr_assert_eq(td_dict_batch_shape(d)[0], 3);
	td_cr_assert_ok(td_dict_set_batch_shape(d, 0, NULL));
	td_cr_assert_err(td_dict_set_batch_shape(d, -1, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_batch_shape(NULL, 0, NULL), TD_EINVAL);
	td_dict_free(d);
}

/* ---- iteration ---- */

/* {a, n: {x, m: {y}, z}, b} */
static td_dict *tree(void)
{
	td_dict *d = new34();

	put(d, "a", 2, B34);
	put(d, "n.x", 2, B34);
	put(d, "n.m.y", 2, B34);
	put(d, "n.z", 2, B34);
	put(d, "b", 2, B34);
	return d;
}

static void expect_iter(const td_dict *d, unsigned flags, const char *expected)
{
	td_dict_iter *it;
	td_item item;
	char buf[256] = "";
	int rc;

	td_cr_assert_ok(td_dict_iter_new(&it, d, flags));
	while ((rc = td_dict_iter_next(it, &item)) == 1) {
		size_t i;
		if (buf[0])
			strcat(buf, " ");
		for (i = 0; i < item.depth; i++) {
			if (i)
				strcat(buf, "/");
			strcat(buf, item.path[i]);
		}
		cr_assert_str_eq(item.key, item.path[item.depth - 1]);
	}
	cr_assert_eq(rc, 0);
	cr_assert_str_eq(buf, expected, "flags %u", flags);
	/* After a reset the same sequence comes again. */
	td_dict_iter_reset(it);
	cr_assert_eq(td_dict_iter_next(it, &item), expected[0] ? 1 : 0);
	td_dict_iter_free(it);
}

Test(dict, iteration_follows_tensordicts_orders)
{
	td_dict *d = tree();

	expect_iter(d, 0, "a n b");
	expect_iter(d, TD_ITER_LEAVES_ONLY, "a b");
	expect_iter(d, TD_ITER_NESTED, "a n/x n/m/y n/m n/z n b");
	expect_iter(d, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY, "a n/x n/m/y n/z b");
	td_dict_free(d);
}

Test(dict, iteration_skips_deleted_entries_and_handles_empty_dicts)
{
	td_dict *d = tree(), *e;

	td_cr_assert_ok(td_dict_del(d, "n.m.y"));
	td_cr_assert_ok(td_dict_del(d, "a"));
	expect_iter(d, TD_ITER_NESTED, "n/x n/m n/z n b");
	td_cr_assert_ok(td_dict_new(&e, 0, NULL));
	expect_iter(e, TD_ITER_NESTED, "");
	td_dict_free(e);
	td_dict_free(d);
}

Test(dict, iterator_rejects_bad_arguments)
{
	td_dict *d = new34();
	td_dict_iter *it;
	td_item item;

	td_cr_assert_err(td_dict_iter_new(NULL, d, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_iter_new(&it, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_iter_new(&it, d, 0x80), TD_EINVAL);
	td_cr_assert_ok(td_dict_iter_new(&it, d, 0));
	td_cr_assert_err(td_dict_iter_next(it, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_iter_next(NULL, &item), TD_EINVAL);
	td_dict_iter_free(it);
	td_dict_iter_free(NULL);
	td_dict_iter_reset(NULL);
	td_dict_free(d);
}

Test(dict, items_fills_parallel_arrays_up_to_capacity)
{
	td_dict *d = tree();
	const char *keys[2];
	const td_value *vals[2];

	cr_assert_eq(td_dict_items(d, keys, vals, 2), 3);
	cr_assert_str_eq(keys[0], "a");
	cr_assert_str_eq(keys[1], "n");
	cr_assert_eq(vals[0]->kind, TD_VALUE_TENSOR);
	cr_assert_eq(vals[1]->kind, TD_VALUE_DICT);
	cr_assert_eq(td_dict_items(d, NULL, NULL, 0), 3);
	cr_assert_eq(td_dict_items(NULL, keys, vals, 2), 0);
	td_dict_free(d);
}

/* ---- allocation failures ---- */

typedef struct build_ctx {
	td_dict *d;
} build_ctx;

static int build_body(void *arg)
{
	build_ctx *c = arg;
	td_tensor t = TD_TENSOR_INIT;
	char key[32];
	int rc, i;

	c->d = NULL;
	rc = td_dict_new(&c->d, 2, B34);
	for (i = 0; rc == 0 && i < 20; i++) {
		snprintf(key, sizeof(key), "g%d.k%d", i % 3, i);
		rc = td_tensor_zeros(&t, TD_DTYPE_F32, 2, B34);
		if (rc == 0) {
			rc = td_dict_set_tensor(c->d, key, &t);
			td_tensor_release(&t);
		}
	}
	if (rc == 0)
		rc = td_dict_set_string(c->d, "s", "text");
	if (rc == 0)
		rc = td_dict_rename(c->d, "g1.k1", "moved.here");
	if (rc < 0) {
		td_dict_free(c->d);
		c->d = NULL;
	}
	return rc;
}

static void build_cleanup(void *arg)
{
	build_ctx *c = arg;

	cr_assert_eq(td_dict_len(c->d), 5);
	td_dict_free(c->d);
}

Test(dict, every_allocation_failure_is_reported_and_leaks_nothing)
{
	build_ctx c;

	td_test_enomem_sweep(build_body, build_cleanup, &c);
}
