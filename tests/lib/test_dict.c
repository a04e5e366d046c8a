/* SPDX-License-Identifier: MIT */
/*
 * test_dict.c - the td_dict map: creation, batch shapes, the two key
 * forms (dotted and key handles), set/get/delete/rename, locking, non-tensor values, iteration
 * order, index growth and holes, and allocation failures.
 */
#include "td_test.h"

#include <stdio.h>

static const int64_t B34[] = { 3, 4 };

/* A key handle of the components listed (owned: td_key_free()). */
#define KEY(...) \
	td_test_key((const char *const[]){ __VA_ARGS__ }, \
		sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(const char *))

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
	td_cr_assert_ok(td_dict_get_tensor(&got, d, "obs"));
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
	cr_assert(strstr(td_error_last()->message, "[4, 3]") != NULL, "%s", td_error_last()->message);
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
	td_cr_assert_err(td_dict_get_tensor(&got, d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_get_tensor(NULL, d, "x"), TD_EINVAL);
	td_cr_assert_err(td_dict_get(&v, NULL, "x"), TD_EINVAL);
	td_cr_assert_err(td_dict_get(&v, d, ""), TD_EINVAL);
	td_cr_assert_err(td_dict_get(&v, d, "a..b"), TD_EINVAL);
	td_cr_assert_err(td_dict_get(&v, d, ".a"), TD_EINVAL);
	td_cr_assert_err(td_dict_get(&v, d, "a."), TD_EINVAL);
	td_cr_assert_err(td_dict_get_key(&v, d, NULL), TD_EINVAL);
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
	td_cr_assert_err(td_dict_get(&v, d, "zzz"), TD_ENOTFOUND);
	cr_assert(strstr(td_error_last()->message, "zzz") != NULL);
	td_cr_assert_err(td_dict_get(&v, d, "a.c"), TD_ENOTFOUND);
	cr_assert(strstr(td_error_last()->message, "'c' is missing") != NULL, "%s",
		td_error_last()->message);
	td_cr_assert_err(td_dict_get(&v, d, "a.b.c"), TD_ETYPE);
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
	td_key *k;

	put(d, "a.b.c", 3, s);
	td_cr_assert_ok(td_dict_get_dict(&a, d, "a"));
	td_cr_assert_ok(td_dict_get_dict(&b, d, "a.b"));
	cr_assert_eq(td_dict_parent(a), d);
	cr_assert_eq(td_dict_parent(b), a);
	cr_assert_eq(td_dict_batch_ndim(b), 2);
	cr_assert_eq(td_dict_batch_shape(b)[1], 4);
	k = KEY("a", "b", "c");
	td_cr_assert_ok(td_dict_get_tensor_key(&got, d, k));
	td_key_free(k);
	cr_assert_eq(td_tensor_shape(got)[2], 7);
	cr_assert_eq(td_dict_contains(d, "a.b", 0), 1);
	cr_assert_eq(td_dict_contains(d, "a.b", TD_LEAVES_ONLY), 0);
	cr_assert_eq(td_dict_contains(d, "a.b.c", TD_LEAVES_ONLY), 1);
	td_dict_free(a); /* a child belongs to its parent: this does nothing */
	td_cr_assert_ok(td_dict_get_dict(&a, d, "a"));
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

Test(dict, key_components_may_hold_dots_and_be_empty)
{
	td_dict *d = new34();
	td_key *k = KEY("a.b", ""), *k1 = KEY("a.b");
	const td_value *v;
	td_tensor t;

	zeros(&t, 2, B34);
	td_cr_assert_ok(td_dict_set_tensor_key(d, k, &t));
	td_cr_assert_ok(td_dict_get_key(&v, d, k));
	cr_assert_eq(v->kind, TD_VALUE_TENSOR);
	cr_assert_eq(td_dict_contains(d, "a", 0), 0);
	cr_assert_eq(td_dict_contains_key(d, k1, 0), 1);
	td_key_free(k1);
	td_key_free(k);
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
	td_cr_assert_ok(td_dict_get_tensor_key(&got, d, k2));
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
	td_cr_assert_ok(td_dict_get_tensor(&got, d, "x"));
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
	td_key *k;
	int64_t at[] = { 2, 3 };

	zeros(&t, 2, B34);
	td_cr_assert_ok(td_dict_set_tensor(d, "x", &t));
	td_cr_assert_ok(td_tensor_full(&src, TD_DTYPE_I64, 1, s1, td_scalar_int(7)));
	td_cr_assert_ok(td_dict_set_tensor_inplace(d, "x", &src));
	td_cr_assert_ok(td_dict_get_tensor(&got, d, "x"));
	cr_assert_eq(got->buffer, t.buffer, "in place keeps the stored buffer");
	td_cr_assert_ok(td_tensor_get(&v, got, at));
	cr_assert_float_eq(v.v.f, 7.0, 0);
	td_cr_assert_err(td_dict_set_tensor_inplace(d, "missing", &src), TD_ENOTFOUND);
	td_cr_assert_ok(td_dict_set_string(d, "s", "x"));
	td_cr_assert_err(td_dict_set_tensor_inplace(d, "s", &src), TD_ETYPE);
	k = KEY("x");
	td_cr_assert_ok(td_dict_set_tensor_inplace_key(d, k, &src));
	td_key_free(k);
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
	td_cr_assert_ok(td_dict_get_dict(&a, d, "a"));
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
	td_cr_assert_ok(td_dict_get_tensor(&got, d, "a.x"));
	u = *got;
	td_cr_assert_ok(td_dict_set_tensor(d, "a.x", &t));
	td_cr_assert_ok(td_dict_get_tensor(&got, d, "a.x"));
	cr_assert_eq(got->buffer, u.buffer);
	td_cr_assert_ok(td_tensor_get(&v, got, at));
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
	td_key *k;
	const char raw[] = { 0, 1, 2, (char)0xff };

	td_cr_assert_ok(td_dict_set_string(d, "name", "caf\xc3\xa9"));
	td_cr_assert_ok(td_dict_get_blob(&data, &len, d, "name"));
	cr_assert_str_eq(data, "caf\xc3\xa9");
	cr_assert_eq(len, 5);
	td_cr_assert_ok(td_dict_set_bytes(d, "raw", raw, sizeof(raw)));
	td_cr_assert_ok(td_dict_get(&v, d, "raw"));
	cr_assert_eq(v->kind, TD_VALUE_BYTES);
	cr_assert_eq(v->blob.length, 4);
	cr_assert_eq(memcmp(v->blob.data, raw, 4), 0);
	td_cr_assert_ok(td_dict_set_bytes(d, "empty", NULL, 0));
	k = KEY("n", "s");
	td_cr_assert_ok(td_dict_set_string_key(d, k, ""));
	td_key_free(k);
	k = KEY("n", "b");
	td_cr_assert_ok(td_dict_set_bytes_key(d, k, "ab", 2));
	td_key_free(k);
	td_cr_assert_err(td_dict_set_string(d, "bad", "\xc3"), TD_EINVAL);
	td_cr_assert_err(td_dict_set_string(d, "bad", "\xc0\xaf"), TD_EINVAL);     /* overlong */
	td_cr_assert_err(td_dict_set_string(d, "bad", "\xed\xa0\x80"), TD_EINVAL); /* surrogate */
	td_cr_assert_err(td_dict_set_string(d, "bad", "\xf4\x90\x80\x80"), TD_EINVAL);
	td_cr_assert_err(td_dict_set_string(d, "bad", NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_bytes(d, "bad", NULL, 3), TD_EINVAL);
	td_cr_assert_err(td_dict_get_blob(&data, NULL, d, "n"), TD_ETYPE);
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
	td_cr_assert_ok(td_dict_get_dict(&got, d, "copy"));
	cr_assert_neq(got, c);
	td_cr_assert_ok(td_dict_get_tensor(&t1, c, "x"));
	td_cr_assert_ok(td_dict_get_tensor(&t2, got, "x"));
	cr_assert_eq(t1->buffer, t2->buffer, "a shallow copy shares buffers");
	td_cr_assert_ok(td_dict_set_dict_take(d, "own", c));
	td_cr_assert_ok(td_dict_get_dict(&got, d, "own"));
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
	td_cr_assert_ok(td_dict_get_dict(&got, d, "c"));
	cr_assert(td_dict_is_locked(got));
	td_dict_free(c);
	td_dict_free(d);
}

Test(dict, nesting_deeper_than_the_key_depth_is_refused)
{
	td_dict *d = new34();
	const char *parts[TD_KEY_MAX_DEPTH];
	td_tensor t;
	td_key *k;
	int i;

	for (i = 0; i < TD_KEY_MAX_DEPTH; i++)
		parts[i] = "k";
	zeros(&t, 2, B34);
	k = td_test_key(parts, TD_KEY_MAX_DEPTH);
	td_cr_assert_ok(td_dict_set_tensor_key(d, k, &t));
	td_dict_free(d);
	d = new34();
	{
		td_dict *inner;
		td_cr_assert_ok(td_dict_new(&inner, 2, B34));
		td_cr_assert_ok(td_dict_set_tensor_key(inner, k, &t));
		td_cr_assert_err(td_dict_set_dict_take(d, "deeper", inner), TD_EINVAL);
		td_dict_free(inner);
	}
	td_key_free(k);
	td_tensor_release(&t);
	td_dict_free(d);
}

Test(dict, delete_removes_entries_and_keeps_order)
{
	td_dict *d = new34();
	const char *keys[8];
	td_key *k;
	size_t n;

	put(d, "a", 2, B34);
	put(d, "b", 2, B34);
	put(d, "c.d", 2, B34);
	td_cr_assert_ok(td_dict_del(d, "b"));
	k = KEY("c", "d");
	td_cr_assert_ok(td_dict_del_key(d, k));
	td_key_free(k);
	td_cr_assert_err(td_dict_del(d, "b"), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_del(d, "c.d"), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_del(NULL, "a"), TD_EINVAL);
	put(d, "e", 2, B34);
	n = td_dict_items(keys, NULL, 8, d);
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
		size_t n = td_dict_items(keys, NULL, 1100, d);
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
	td_key *k1, *k2;

	put(d, "a", 2, B34);
	put(d, "b", 2, B34);
	put(d, "c", 2, B34);
	td_cr_assert_ok(td_dict_get_tensor(&t1, d, "b"));
	td_cr_assert_ok(td_dict_rename(d, "b", "z"));
	cr_assert_eq(td_dict_items(keys, NULL, 8, d), 3);
	cr_assert_str_eq(keys[1], "z");
	td_cr_assert_ok(td_dict_get_tensor(&t2, d, "z"));
	cr_assert_eq(t1->buffer, t2->buffer);
	cr_assert_eq(td_dict_contains(d, "b", 0), 0);
	td_cr_assert_ok(td_dict_rename(d, "z", "n.m.z"));
	cr_assert_eq(td_dict_contains(d, "n.m.z", TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains(d, "z", 0), 0);
	td_cr_assert_ok(td_dict_rename(d, "n", "moved"));
	cr_assert_eq(td_dict_contains(d, "moved.m.z", 0), 1);
	k1 = KEY("moved", "m", "z");
	k2 = KEY("back");
	td_cr_assert_ok(td_dict_rename_key(d, k1, k2));
	td_key_free(k1);
	td_key_free(k2);
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
	while ((rc = td_dict_iter_next(&item, it)) == 1) {
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
	cr_assert_eq(td_dict_iter_next(&item, it), expected[0] ? 1 : 0);
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
	td_cr_assert_err(td_dict_iter_next(NULL, it), TD_EINVAL);
	td_cr_assert_err(td_dict_iter_next(&item, NULL), TD_EINVAL);
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

	cr_assert_eq(td_dict_items(keys, vals, 2, d), 3);
	cr_assert_str_eq(keys[0], "a");
	cr_assert_str_eq(keys[1], "n");
	cr_assert_eq(vals[0]->kind, TD_VALUE_TENSOR);
	cr_assert_eq(vals[1]->kind, TD_VALUE_DICT);
	cr_assert_eq(td_dict_items(NULL, NULL, 0, d), 3);
	cr_assert_eq(td_dict_items(keys, vals, 2, NULL), 0);
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

/* ---- key handles ---- */

Test(dict, key_handles_report_every_malformed_key)
{
	const char *parts[TD_KEY_MAX_DEPTH];
	td_key *k = (td_key *)0x1;
	char deep[2 * TD_KEY_MAX_DEPTH];
	int i;

	td_cr_assert_err(td_key_new(&k, NULL), TD_EINVAL);
	cr_assert_null(k);
	td_cr_assert_err(td_key_new(&k, ""), TD_EINVAL);
	td_cr_assert_err(td_key_new(&k, ".a"), TD_EINVAL);
	td_cr_assert_err(td_key_new(&k, "a."), TD_EINVAL);
	td_cr_assert_err(td_key_from_path(NULL, parts, 1), TD_EINVAL);
	td_cr_assert_err(td_key_from_path(&k, NULL, 1), TD_EINVAL);
	td_cr_assert_err(td_key_from_path(&k, (const char *[]){ "a", NULL }, 2), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "component 1") != NULL, "%s",
		td_error_last()->message);
	/* The deepest key allowed: TD_KEY_MAX_DEPTH components, in both forms. */
	for (i = 0; i < TD_KEY_MAX_DEPTH; i++) {
		parts[i] = "k";
		deep[2 * i] = 'k';
		deep[2 * i + 1] = '.';
	}
	deep[2 * TD_KEY_MAX_DEPTH - 1] = '\0';
	td_cr_assert_ok(td_key_new(&k, deep));
	cr_assert_eq(td_key_depth(k), TD_KEY_MAX_DEPTH);
	cr_assert_str_eq(td_key_part(k, TD_KEY_MAX_DEPTH - 1), "k");
	cr_assert_null(td_key_part(k, TD_KEY_MAX_DEPTH));
	td_key_free(k);
	td_cr_assert_ok(td_key_from_path(&k, parts, TD_KEY_MAX_DEPTH));
	cr_assert_eq(td_key_depth(k), TD_KEY_MAX_DEPTH);
	td_key_free(k);
	cr_assert_null(td_key_part(NULL, 0));
}

Test(dict, key_handle_components_may_hold_dots_and_be_empty)
{
	td_dict *d = new34();
	const char *parts[] = { "a.b", "" };
	const td_value *v;
	td_key *k;
	td_tensor t;

	td_cr_assert_ok(td_key_from_path(&k, parts, 2));
	cr_assert_str_eq(td_key_part(k, 0), "a.b");
	cr_assert_str_eq(td_key_part(k, 1), "");
	zeros(&t, 2, B34);
	td_cr_assert_ok(td_dict_set_tensor_key(d, k, &t));
	td_cr_assert_ok(td_dict_get_key(&v, d, k));
	cr_assert_eq(v->kind, TD_VALUE_TENSOR);
	cr_assert_eq(v->tensor.buffer, t.buffer);
	cr_assert_eq(td_dict_contains(d, "a", 0), 0);
	td_key_free(k);
	td_tensor_release(&t);
	td_dict_free(d);
}

Test(dict, key_functions_refuse_null_handles_and_report_lookups)
{
	td_dict *d = new34();
	const td_tensor *got;
	const td_value *v;
	td_key *k, *miss, *through;
	td_tensor t;

	put(d, "a.x", 2, B34);
	td_cr_assert_ok(td_key_new(&k, "a.x"));
	td_cr_assert_ok(td_key_new(&miss, "a.nope"));
	td_cr_assert_ok(td_key_new(&through, "a.x.y"));
	zeros(&t, 2, B34);
	td_cr_assert_err(td_dict_contains_key(d, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_contains_key(NULL, k, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_contains_key(d, k, 0x40), TD_EINVAL);
	td_cr_assert_err(td_dict_get_key(&v, d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_get_key(NULL, d, k), TD_EINVAL);
	td_cr_assert_err(td_dict_get_key(&v, NULL, k), TD_EINVAL);
	td_cr_assert_err(td_dict_get_tensor_key(&got, d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_key(d, NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_key(NULL, k, &t), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_inplace_key(d, NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_inplace_key(d, k, NULL), TD_EINVAL);
	cr_assert_eq(td_dict_contains_key(d, k, 0), 1);
	cr_assert_eq(td_dict_contains_key(d, miss, 0), 0);
	cr_assert_eq(td_dict_contains_key(d, through, 0), 0);
	td_cr_assert_err(td_dict_get_key(&v, d, miss), TD_ENOTFOUND);
	cr_assert(strstr(td_error_last()->message, "a.nope") != NULL, "%s", td_error_last()->message);
	td_cr_assert_err(td_dict_get_tensor_key(&got, d, through), TD_ETYPE);
	td_cr_assert_err(td_dict_set_tensor_inplace_key(d, miss, &t), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_set_tensor_key(d, through, &t), TD_ETYPE);
	td_key_free(k);
	td_key_free(miss);
	td_key_free(through);
	td_cr_assert_ok(td_key_new(&k, "a"));
	td_cr_assert_err(td_dict_get_tensor_key(&got, d, k), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "holds a dict") != NULL, "%s",
		td_error_last()->message);
	td_cr_assert_err(td_dict_set_tensor_inplace_key(d, k, &t), TD_ETYPE);
	cr_assert_eq(td_dict_contains_key(d, k, TD_LEAVES_ONLY), 0);
	td_key_free(k);
	td_tensor_release(&t);
	td_dict_free(d);
}

/*
 * The `_key` twins that came with the two key forms: a key whose
 * components hold '.' (which no dotted key can spell) reaches its entry; a
 * NULL handle is TD_EINVAL, a missing key TD_ENOTFOUND, a value of another
 * kind (or a path through a leaf) TD_ETYPE.
 */
Test(dict, key_twins_reach_dotted_components_and_report_failures)
{
	static const char *const texts[] = { "p", "q", "r", "s" };
	static const int64_t s4[] = { 4 };
	td_key *kt = KEY("n.1", "t.x"), *ks = KEY("n.1", "s.x"), *kl = KEY("n.1", "l.x"),
		   *kb = KEY("b.x"), *kn = KEY("n.1"), *kc = KEY("c.x"), *kk = KEY("k.x"), *km = KEY("m.y"),
		   *miss = KEY("n.1", "zz"), *through = KEY("b.x", "y");
	td_dict *d, *child, *other, *sub;
	const td_strings *l;
	const char *data;
	size_t len = 0;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	/* Setters: every value lands under components that hold '.'. */
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, s4));
	td_cr_assert_ok(td_dict_set_tensor_take_key(d, kt, &t));
	cr_assert_null(t.buffer);
	td_cr_assert_ok(td_dict_set_string_key(d, ks, "text"));
	td_cr_assert_ok(td_dict_set_strings_key(d, kl, 1, s4, texts));
	td_cr_assert_ok(td_dict_set_bytes_key(d, kb, "\x00\x01", 2));
	td_cr_assert_ok(td_dict_new(&child, 0, NULL));
	td_cr_assert_ok(td_dict_set_string(child, "x", "y"));
	td_cr_assert_ok(td_dict_set_dict_key(d, kc, child));
	td_cr_assert_ok(td_dict_set_dict_take_key(d, kk, child));
	cr_assert_eq(td_dict_len(d), 4, "\"n.1\", \"b.x\", \"c.x\" and \"k.x\"");
	cr_assert_eq(td_dict_contains(d, "n", 0), 0, "nothing split the components");

	/* Lookups. */
	td_cr_assert_ok(td_dict_get_dict_key(&sub, d, kn));
	cr_assert_eq(td_dict_len(sub), 3);
	td_cr_assert_ok(td_dict_get_dict_key(&sub, d, kk));
	cr_assert_eq(sub, child, "a take stores the dict itself");
	td_cr_assert_ok(td_dict_get_dict_key(&sub, d, kc));
	cr_assert_neq(sub, child, "a set stores a copy");
	td_cr_assert_ok(td_dict_get_blob_key(&data, &len, d, ks));
	cr_assert_str_eq(data, "text");
	cr_assert_eq(len, 4);
	td_cr_assert_ok(td_dict_get_blob_key(&data, NULL, d, kb));
	cr_assert_eq(data[1], 1);
	td_cr_assert_ok(td_dict_get_strings_key(&l, d, kl));
	cr_assert_eq(l->numel, 4);
	cr_assert_str_eq(td_strings_at(NULL, l, 3), "s");

	/* A NULL key handle. */
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, s4));
	td_cr_assert_ok(td_dict_new(&other, 0, NULL));
	td_cr_assert_err(td_dict_get_dict_key(&sub, d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_get_blob_key(&data, &len, d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_get_strings_key(&l, d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_take_key(d, NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict_key(d, NULL, other), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict_take_key(d, NULL, other), TD_EINVAL);
	td_cr_assert_err(td_dict_set_string_key(d, NULL, "z"), TD_EINVAL);
	td_cr_assert_err(td_dict_set_strings_key(d, NULL, 1, s4, texts), TD_EINVAL);
	td_cr_assert_err(td_dict_set_bytes_key(d, NULL, "z", 1), TD_EINVAL);
	td_cr_assert_err(td_dict_del_key(d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_rename_key(d, NULL, km), TD_EINVAL);
	td_cr_assert_err(td_dict_rename_key(d, kb, NULL), TD_EINVAL);

	/* A missing key. */
	td_cr_assert_err(td_dict_get_dict_key(&sub, d, miss), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_get_blob_key(&data, &len, d, miss), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_get_strings_key(&l, d, miss), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_del_key(d, miss), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_rename_key(d, miss, km), TD_ENOTFOUND);

	/* A value of another kind, or a path through a leaf. */
	td_cr_assert_err(td_dict_get_dict_key(&sub, d, kt), TD_ETYPE);
	td_cr_assert_err(td_dict_get_blob_key(&data, &len, d, kl), TD_ETYPE);
	td_cr_assert_err(td_dict_get_strings_key(&l, d, ks), TD_ETYPE);
	td_cr_assert_err(td_dict_set_tensor_take_key(d, through, &t), TD_ETYPE);
	cr_assert_not_null(t.buffer, "a failed take leaves the tensor with the caller");
	td_cr_assert_err(td_dict_set_dict_key(d, through, other), TD_ETYPE);
	td_cr_assert_err(td_dict_set_dict_take_key(d, through, other), TD_ETYPE);
	cr_assert_null(td_dict_parent(other), "a failed take leaves the dict with the caller");
	td_cr_assert_err(td_dict_set_string_key(d, through, "z"), TD_ETYPE);
	td_cr_assert_err(td_dict_set_strings_key(d, through, 1, s4, texts), TD_ETYPE);
	td_cr_assert_err(td_dict_set_bytes_key(d, through, "z", 1), TD_ETYPE);
	td_cr_assert_err(td_dict_del_key(d, through), TD_ETYPE);
	td_cr_assert_err(td_dict_rename_key(d, ks, through), TD_ETYPE);
	cr_assert_eq(td_dict_len(d), 4, "no refused call changed the dict");

	/* Renames and deletions by handle. */
	td_cr_assert_ok(td_dict_rename_key(d, kt, km));
	cr_assert_eq(td_dict_contains_key(d, km, TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains_key(d, kt, 0), 0);
	td_cr_assert_ok(td_dict_del_key(d, km));
	td_cr_assert_ok(td_dict_del_key(d, kn));
	cr_assert_eq(td_dict_len(d), 3);

	td_tensor_release(&t);
	td_dict_free(other);
	td_key_free(kt);
	td_key_free(ks);
	td_key_free(kl);
	td_key_free(kb);
	td_key_free(kn);
	td_key_free(kc);
	td_key_free(kk);
	td_key_free(km);
	td_key_free(miss);
	td_key_free(through);
	td_dict_free(d);
}

/* ---- lookups and their failures ---- */

Test(dict, getters_refuse_values_of_the_wrong_kind)
{
	td_dict *d = new34(), *sub;
	td_key *kn = KEY("n"), *kt = KEY("t"), *kny = KEY("n", "y"), *knx = KEY("n", "x");
	const td_tensor *got;
	const char *data;
	size_t len = 99;

	put(d, "t", 2, B34);
	put(d, "n.x", 2, B34);
	td_cr_assert_ok(td_dict_set_bytes(d, "b", "xy", 2));
	td_cr_assert_err(td_dict_get_tensor(&got, d, "n"), TD_ETYPE);
	td_cr_assert_err(td_dict_get_tensor(&got, d, "b"), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "holds bytes") != NULL, "%s",
		td_error_last()->message);
	td_cr_assert_err(td_dict_get_dict(&sub, d, "t"), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "holds a tensor") != NULL, "%s",
		td_error_last()->message);
	td_cr_assert_err(td_dict_get_dict(NULL, d, "n"), TD_EINVAL);
	td_cr_assert_err(td_dict_get_dict(&sub, NULL, "n"), TD_EINVAL);
	td_cr_assert_err(td_dict_get_dict(&sub, d, "zz"), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_get_blob(&data, &len, d, "t"), TD_ETYPE);
	cr_assert_eq(len, 99, "a failed lookup writes nothing");
	td_cr_assert_err(td_dict_get_blob(NULL, &len, d, "b"), TD_EINVAL);
	td_cr_assert_err(td_dict_get_blob(&data, &len, NULL, "b"), TD_EINVAL);
	td_cr_assert_err(td_dict_get_blob(&data, &len, d, "zz"), TD_ENOTFOUND);
	td_cr_assert_ok(td_dict_get_blob(&data, NULL, d, "b"));
	cr_assert_eq(memcmp(data, "xy", 2), 0);
	td_cr_assert_ok(td_dict_get_dict_key(&sub, d, kn));
	cr_assert_eq(td_dict_len(sub), 1);
	td_cr_assert_err(td_dict_get_dict_key(&sub, d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_get_dict_key(&sub, d, kt), TD_ETYPE);
	td_cr_assert_err(td_dict_get_dict_key(NULL, d, kn), TD_EINVAL);
	td_cr_assert_err(td_dict_get_tensor_key(&got, d, kny), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_get_tensor_key(NULL, d, knx), TD_EINVAL);
	td_key_free(kn);
	td_key_free(kt);
	td_key_free(kny);
	td_key_free(knx);
	td_dict_free(d);
}

Test(dict, long_keys_are_found_and_told_apart)
{
	td_dict *d = new34();
	const char *k1 = "a_rather_long_key_name_number_one";
	const char *k2 = "a_rather_long_key_name_number_two";
	const td_tensor *a, *b;

	put(d, k1, 2, B34);
	put(d, k2, 2, B34);
	td_cr_assert_ok(td_dict_get_tensor(&a, d, k1));
	td_cr_assert_ok(td_dict_get_tensor(&b, d, k2));
	cr_assert_neq(a->buffer, b->buffer);
	cr_assert_eq(td_dict_contains(d, "a_rather_long_key_name_number_six", 0), 0);
	td_dict_free(d);
}

Test(dict, contains_follows_paths_and_refuses_bad_arguments)
{
	td_dict *d = new34();
	td_key *kab = KEY("a", "b"), *ka = KEY("a");

	put(d, "a.b", 2, B34);
	cr_assert_eq(td_dict_contains(d, "a", 0), 1);
	cr_assert_eq(td_dict_contains(d, "a", TD_LEAVES_ONLY), 0);
	cr_assert_eq(td_dict_contains(d, "a.b", TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains(d, "a.c", 0), 0);
	cr_assert_eq(td_dict_contains(d, "z", 0), 0);
	cr_assert_eq(td_dict_contains_key(d, kab, TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains_key(d, ka, TD_LEAVES_ONLY), 0);
	td_cr_assert_err(td_dict_contains(d, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_contains(d, "", 0), TD_EINVAL);
	td_cr_assert_err(td_dict_contains(d, "a..b", 0), TD_EINVAL);
	td_cr_assert_err(td_dict_contains_key(d, NULL, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_contains_key(NULL, ka, 0), TD_EINVAL);
	td_cr_assert_err(td_dict_contains_key(d, ka, 0x8), TD_EINVAL);
	td_key_free(kab);
	td_key_free(ka);
	td_dict_free(d);
}

/* ---- setters: NULL arguments and key handles ---- */

Test(dict, key_setters_refuse_null_keys_and_arguments)
{
	td_dict *d = new34(), *c;
	td_key *k = KEY("x"), *kxb = KEY("x", "b"), *none;
	const char *p[] = { "x" };
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&c, 2, B34));
	zeros(&t, 2, B34);
	td_cr_assert_err(td_dict_set_tensor_key(d, NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_key_from_path(&none, p, 0), TD_EINVAL); /* no handle of no path */
	cr_assert_null(none);
	td_cr_assert_err(td_dict_set_tensor_key(NULL, k, &t), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_inplace_key(d, NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_inplace(NULL, "x", &t), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_inplace(d, "x", NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_take(d, "x", NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_take(d, NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_take_key(d, NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_take_key(d, k, NULL), TD_EINVAL);
	cr_assert_not_null(t.buffer, "a failed take leaves the tensor with the caller");
	td_cr_assert_err(td_dict_set_dict_key(d, NULL, c), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict_key(d, k, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict(NULL, "x", c), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict(d, NULL, c), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict_take(d, "x", NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict_take(NULL, "x", c), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict_take(d, "a..b", c), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict_take_key(d, NULL, c), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict_take_key(d, k, NULL), TD_EINVAL);
	cr_assert_null(td_dict_parent(c), "a failed take leaves the dict with the caller");
	td_cr_assert_err(td_dict_set_string_key(d, NULL, "s"), TD_EINVAL);
	td_cr_assert_err(td_dict_set_string_key(d, k, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_string_key(d, k, "\xff"), TD_EINVAL);
	td_cr_assert_err(td_dict_set_string(NULL, "x", "s"), TD_EINVAL);
	td_cr_assert_err(td_dict_set_string(d, NULL, "s"), TD_EINVAL);
	td_cr_assert_err(td_dict_set_bytes_key(d, NULL, "b", 1), TD_EINVAL);
	td_cr_assert_err(td_dict_set_bytes_key(d, k, NULL, 1), TD_EINVAL);
	td_cr_assert_err(td_dict_set_bytes(NULL, "x", "b", 1), TD_EINVAL);
	td_cr_assert_err(td_dict_set_strings_key(d, NULL, 2, B34, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_del_key(d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_del_key(NULL, k), TD_EINVAL);
	td_cr_assert_err(td_dict_del(d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_del(d, "a..b"), TD_EINVAL);
	cr_assert_eq(td_dict_len(d), 0, "no refused call added anything");
	td_cr_assert_ok(td_dict_set_dict_key(d, k, c));
	td_cr_assert_ok(td_dict_set_bytes_key(d, kxb, NULL, 0));
	td_cr_assert_ok(td_dict_del_key(d, kxb));
	td_cr_assert_ok(td_dict_del_key(d, k));
	cr_assert_eq(td_dict_len(d), 0);
	td_key_free(kxb);
	td_key_free(k);
	td_tensor_release(&t);
	td_dict_free(c);
	td_dict_free(d);
}

Test(dict, utf8_validation_accepts_every_well_formed_sequence)
{
	td_dict *d = new34();
	static const char *const good[] = {
		"",
		"plain ascii",
		"\xc2\x80",
		"\xdf\xbf",
		"\xe0\xa0\x80",
		"\xef\xbf\xbf",
		"\xed\x9f\xbf",
		"\xee\x80\x80",
		"\xf0\x90\x80\x80",
		"\xf4\x8f\xbf\xbf",
	};
	static const char *const bad[] = {
		"\x80",
		"\xbf",
		"\xc1\xbf",
		"\xc2",
		"\xc2\x41",
		"\xe0\x9f\xbf",
		"\xe0\xa0",
		"\xed\xbf\xbf",
		"\xf0\x8f\xbf\xbf",
		"\xf4\x90\x80\x80",
		"\xf5\x80\x80\x80",
		"\xf0\x90\x80",
		"\xf0\x90\x41\x80",
		"\xff",
		"ok\xc3",
	};
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		td_cr_assert_ok(td_dict_set_string(d, "s", good[i]));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		td_cr_assert_err(td_dict_set_string(d, "bad", bad[i]), TD_EINVAL);
		cr_assert(strstr(td_error_last()->message, "UTF-8") != NULL, "sequence %zu", i);
	}
	cr_assert_eq(td_dict_contains(d, "bad", 0), 0);
	td_dict_free(d);
}

Test(dict, nested_set_through_a_leaf_is_refused_and_undone)
{
	td_dict *d = new34();
	td_tensor t;

	put(d, "leaf", 2, B34);
	zeros(&t, 2, B34);
	td_cr_assert_err(td_dict_set_tensor(d, "leaf.x", &t), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "'leaf' is not a dict") != NULL, "%s",
		td_error_last()->message);
	put(d, "n.leaf", 2, B34);
	td_cr_assert_err(td_dict_set_string(d, "n.leaf.x", "s"), TD_ETYPE);
	td_cr_assert_err(td_dict_del(d, "n.nope"), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_del(d, "leaf.x"), TD_ETYPE);
	cr_assert_eq(td_dict_len(d), 2);
	td_tensor_release(&t);
	td_dict_free(d);
}

/* ---- the index: growth, tombstones, renames, copies of large dicts ---- */

/* Every key k<i> for i in [0, n) is found exactly when present(i). */
static void expect_keys(const td_dict *d, int n, bool (*present)(int i))
{
	char key[32];
	int i;

	for (i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(td_dict_contains(d, key, 0), present(i), "%s", key);
	}
}

static bool odd(int i)
{
	return i % 2 == 1;
}

static bool all(int i)
{
	(void)i;
	return true;
}

Test(dict, renames_in_an_indexed_dict_keep_every_key_reachable)
{
	td_dict *d = new34();
	const char *keys[32];
	char key[32], to[32];
	int i;

	for (i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put(d, key, 2, B34);
	}
	/* Tombstones: delete the even keys. */
	for (i = 0; i < 20; i += 2) {
		snprintf(key, sizeof(key), "k%d", i);
		td_cr_assert_ok(td_dict_del(d, key));
	}
	expect_keys(d, 20, odd);
	/* Rename each odd key away and back: it keeps its position. */
	for (i = 1; i < 20; i += 2) {
		snprintf(key, sizeof(key), "k%d", i);
		snprintf(to, sizeof(to), "renamed%d", i);
		td_cr_assert_ok(td_dict_rename(d, key, to));
		cr_assert_eq(td_dict_contains(d, key, 0), 0);
		cr_assert_eq(td_dict_contains(d, to, 0), 1);
	}
	cr_assert_eq(td_dict_items(keys, NULL, 32, d), 10);
	cr_assert_str_eq(keys[0], "renamed1");
	cr_assert_str_eq(keys[9], "renamed19");
	for (i = 1; i < 20; i += 2) {
		snprintf(key, sizeof(key), "k%d", i);
		snprintf(to, sizeof(to), "renamed%d", i);
		td_cr_assert_ok(td_dict_rename(d, to, key));
	}
	expect_keys(d, 20, odd);
	td_cr_assert_err(td_dict_rename(d, "k1", "k3"), TD_EEXISTS);
	td_cr_assert_ok(td_dict_rename(d, "k1", "k1")); /* to itself: nothing to do */
	/* Refill the holes and check everything again. */
	for (i = 0; i < 20; i += 2) {
		snprintf(key, sizeof(key), "k%d", i);
		put(d, key, 2, B34);
	}
	expect_keys(d, 20, all);
	cr_assert_eq(td_dict_len(d), 20);
	td_dict_free(d);
}

Test(dict, copies_of_large_dicts_are_indexed)
{
	td_dict *d = new34(), *c, *e;
	char key[32];
	int i;

	for (i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put(d, key, 2, B34);
	}
	for (i = 0; i < 40; i += 2) {
		snprintf(key, sizeof(key), "k%d", i);
		td_cr_assert_ok(td_dict_del(d, key));
	}
	td_cr_assert_ok(td_dict_copy(&c, d));
	td_cr_assert_ok(td_dict_clone(&e, d));
	expect_keys(c, 40, odd);
	expect_keys(e, 40, odd);
	cr_assert_eq(td_dict_equal(c, e), 1);
	/* The copies grow, shrink and rename like any dict. */
	for (i = 0; i < 40; i += 2) {
		snprintf(key, sizeof(key), "k%d", i);
		put(c, key, 2, B34);
	}
	expect_keys(c, 40, all);
	for (i = 1; i < 40; i += 2) {
		snprintf(key, sizeof(key), "k%d", i);
		td_cr_assert_ok(td_dict_del(e, key));
	}
	cr_assert_eq(td_dict_len(e), 0);
	put(e, "k1", 2, B34);
	td_cr_assert_ok(td_dict_rename(c, "k39", "last"));
	td_cr_assert_ok(td_dict_rename(c, "k0", "n.first"));
	cr_assert_eq(td_dict_contains(c, "n.first", 0), 1);
	cr_assert_eq(td_dict_contains(c, "last", 0), 1);
	cr_assert_eq(td_dict_len(c), 40);
	td_dict_free(e);
	td_dict_free(c);
	td_dict_free(d);
}

Test(dict, items_skips_holes_in_both_arrays)
{
	td_dict *d = new34();
	const char *keys[4];
	const td_value *vals[4];

	put(d, "a", 2, B34);
	td_cr_assert_ok(td_dict_set_string(d, "b", "x"));
	put(d, "c", 2, B34);
	td_cr_assert_ok(td_dict_del(d, "b"));
	cr_assert_eq(td_dict_items(keys, vals, 4, d), 2);
	cr_assert_str_eq(keys[1], "c");
	cr_assert_eq(vals[1]->kind, TD_VALUE_TENSOR);
	cr_assert_eq(td_dict_items(NULL, vals, 1, d), 2);
	cr_assert_eq(vals[0]->kind, TD_VALUE_TENSOR);
	cr_assert_eq(td_dict_items(keys, NULL, 1, d), 2);
	cr_assert_str_eq(keys[0], "a");
	td_dict_free(d);
}

/* ---- accessors and NULL ---- */

Test(dict, accessors_accept_null)
{
	cr_assert_eq(td_dict_batch_ndim(NULL), 0);
	cr_assert_null(td_dict_batch_shape(NULL));
	cr_assert_eq(td_dict_batch_numel(NULL), 0);
	cr_assert_null(td_dict_parent(NULL));
	cr_assert_eq(td_dict_len(NULL), 0);
	cr_assert_not(td_dict_is_locked(NULL));
	td_dict_array_free(NULL, 3);
	td_dict_free(NULL);
}

Test(dict, scalar_and_empty_batches)
{
	td_dict *d;
	int64_t zero[] = { 0, 5 };
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	cr_assert_eq(td_dict_batch_numel(d), 1);
	td_dict_free(d);
	td_cr_assert_ok(td_dict_new(&d, 2, zero));
	cr_assert_eq(td_dict_batch_numel(d), 0);
	zeros(&t, 2, zero);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "x", &t));
	td_dict_free(d);
}

/* ---- batch shapes ---- */

Test(dict, set_batch_shape_checks_nested_dicts_and_the_parent)
{
	td_dict *d = new34(), *c, *n;
	int64_t b3[] = { 3 }, b345[] = { 3, 4, 5 }, b4[] = { 4 }, b45[] = { 4, 5 };

	td_cr_assert_ok(td_dict_new(&c, 3, b345));
	td_cr_assert_ok(td_dict_set_dict_take(d, "c", c));
	td_cr_assert_ok(td_dict_set_batch_shape(d, 3, b345));
	td_cr_assert_ok(td_dict_set_batch_shape(d, 1, b3));
	td_cr_assert_err(td_dict_set_batch_shape(d, 1, b4), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "'c'") != NULL, "%s", td_error_last()->message);
	/* A nested dict's batch must keep starting with its parent's. */
	td_cr_assert_err(td_dict_set_batch_shape(c, 2, b45), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "[3]") != NULL, "%s", td_error_last()->message);
	td_cr_assert_ok(td_dict_set_batch_shape(c, 1, b3));
	td_cr_assert_err(td_dict_set_batch_shape(c, 0, NULL), TD_ETYPE);
	td_cr_assert_err(td_dict_set_batch_shape(d, 1, (int64_t[]){ -3 }), TD_EINVAL);
	td_cr_assert_err(td_dict_set_batch_shape(d, 1, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_batch_shape(d, TD_MAX_DIMS + 1, b345), TD_EINVAL);
	cr_assert_eq(td_dict_batch_ndim(d), 1);
	/* The nested dict locked alone refuses too. */
	td_cr_assert_ok(td_dict_get_dict(&n, d, "c"));
	td_cr_assert_ok(td_dict_lock(n));
	td_cr_assert_err(td_dict_set_batch_shape(n, 1, b3), TD_ELOCKED);
	td_dict_free(d);
}

/* ---- dict values ---- */

Test(dict, set_dict_take_refuses_cycles_and_owned_dicts)
{
	td_dict *d = new34(), *a, *other;

	put(d, "a.x", 2, B34);
	td_cr_assert_ok(td_dict_get_dict(&a, d, "a"));
	td_cr_assert_err(td_dict_set_dict_take(a, "loop", d), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "cannot contain itself") != NULL, "%s",
		td_error_last()->message);
	td_cr_assert_err(td_dict_set_dict_take(d, "self", d), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict_take(d, "again", a), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict(a, "up", d), TD_EINVAL);
	cr_assert_eq(td_dict_len(a), 1);
	cr_assert_null(td_dict_parent(d));
	/* A copy of a dict may go beside it, not inside it. */
	td_cr_assert_err(td_dict_set_dict(a, "copy_of_a", a), TD_EINVAL);
	td_cr_assert_ok(td_dict_set_dict(d, "copy_of_a", a));
	cr_assert_eq(td_dict_contains(d, "copy_of_a.x", 0), 1);
	/* Replacing a dict by another releases the old one. */
	td_cr_assert_ok(td_dict_new(&other, 2, B34));
	put(other, "y", 2, B34);
	td_cr_assert_ok(td_dict_set_dict_take(d, "a", other));
	cr_assert_eq(td_dict_contains(d, "a.y", 0), 1);
	cr_assert_eq(td_dict_contains(d, "a.x", 0), 0);
	cr_assert_eq(td_dict_parent(other), d);
	td_dict_free(d);
}

/* ---- renames: failures undo what they created ---- */

Test(dict, failed_renames_leave_the_dict_as_it_was)
{
	td_dict *d = new34(), *c, *n;
	td_key *kt = KEY("t"), *ku = KEY("u"), *kdotted = KEY("n", "t.dotted");
	int64_t b345[] = { 3, 4, 5 };
	const char *keys[8];

	put(d, "n.x", 2, B34);
	put(d, "t", 2, B34);
	td_cr_assert_ok(td_dict_new(&c, 3, b345));
	td_cr_assert_ok(td_dict_set_dict_take(d, "c", c));
	/* Moving a dict below itself: the dicts made for the new path are removed. */
	td_cr_assert_err(td_dict_rename(d, "n", "n.made.inside"), TD_EINVAL);
	cr_assert_eq(td_dict_contains(d, "n.made", 0), 0);
	/* A leaf that does not fit the batch of its new dict. */
	td_cr_assert_err(td_dict_rename(d, "t", "c.sub.t"), TD_ETYPE);
	cr_assert_eq(td_dict_contains(d, "c.sub", 0), 0);
	td_cr_assert_err(td_dict_rename(d, "t", "t.x"), TD_ETYPE);
	td_cr_assert_err(td_dict_rename(d, "nope.x", "y"), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_rename(d, "t", "n"), TD_EEXISTS);
	td_cr_assert_err(td_dict_rename(d, "t", "n.x"), TD_EEXISTS);
	/* A locked destination, locked on its own. */
	td_cr_assert_ok(td_dict_get_dict(&n, d, "n"));
	td_cr_assert_ok(td_dict_lock(n));
	td_cr_assert_err(td_dict_rename(d, "t", "n.t"), TD_ELOCKED);
	td_cr_assert_err(td_dict_rename(d, "t", "n.sub.t"), TD_ELOCKED);
	td_cr_assert_err(td_dict_rename(d, "n.x", "y"), TD_ELOCKED);
	td_cr_assert_ok(td_dict_unlock(n));
	/* Bad arguments. */
	td_cr_assert_err(td_dict_rename(NULL, "t", "u"), TD_EINVAL);
	td_cr_assert_err(td_dict_rename(d, NULL, "u"), TD_EINVAL);
	td_cr_assert_err(td_dict_rename(d, "t", NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_rename(d, "t", "u..v"), TD_EINVAL);
	td_cr_assert_err(td_dict_rename_key(NULL, kt, ku), TD_EINVAL);
	td_cr_assert_err(td_dict_rename_key(d, NULL, ku), TD_EINVAL);
	td_cr_assert_err(td_dict_rename_key(d, kt, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_rename_key(d, ku, kt), TD_ENOTFOUND);
	/* Nothing moved. */
	cr_assert_eq(td_dict_items(keys, NULL, 8, d), 3);
	cr_assert_str_eq(keys[0], "n");
	cr_assert_str_eq(keys[1], "t");
	cr_assert_str_eq(keys[2], "c");
	cr_assert_eq(td_dict_len(n), 1);
	cr_assert_eq(td_dict_len(c), 0);
	/* Renames by key handle may use components with dots. */
	td_cr_assert_ok(td_dict_rename_key(d, kt, kdotted));
	cr_assert_eq(td_dict_contains_key(d, kdotted, 0), 1);
	cr_assert_eq(td_dict_contains(d, "t", 0), 0);
	td_key_free(kdotted);
	td_key_free(ku);
	td_key_free(kt);
	td_dict_free(d);
}

Test(dict, renames_that_would_nest_too_deep_are_refused)
{
	td_dict *d = new34();
	const char *parts[TD_KEY_MAX_DEPTH];
	td_tensor t;
	td_key *k;
	int i;

	for (i = 0; i < TD_KEY_MAX_DEPTH; i++)
		parts[i] = "k";
	zeros(&t, 2, B34);
	k = td_test_key(parts, TD_KEY_MAX_DEPTH);
	td_cr_assert_ok(td_dict_set_tensor_key(d, k, &t));
	td_key_free(k);
	td_tensor_release(&t);
	td_cr_assert_err(td_dict_rename(d, "k", "z.k"), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "nest deeper") != NULL, "%s",
		td_error_last()->message);
	cr_assert_eq(td_dict_contains(d, "z", 0), 0);
	cr_assert_eq(td_dict_len(d), 1);
	/* The same dict moved within the root is fine. */
	td_cr_assert_ok(td_dict_rename(d, "k", "top"));
	cr_assert_eq(td_dict_len(d), 1);
	/* Adding a dict below the deepest one is refused too. */
	{
		const char *deeper[TD_KEY_MAX_DEPTH + 1];
		td_dict *leafdict;
		for (i = 0; i < TD_KEY_MAX_DEPTH - 1; i++)
			deeper[i] = i ? "k" : "top";
		deeper[TD_KEY_MAX_DEPTH - 1] = "more";
		td_cr_assert_ok(td_dict_new(&leafdict, 2, B34));
		k = td_test_key(deeper, TD_KEY_MAX_DEPTH);
		td_cr_assert_err(td_dict_set_dict_key(d, k, leafdict), TD_EINVAL);
		td_key_free(k);
		td_dict_free(leafdict);
		/* From the deepest dict itself, no new dict may be made below it. */
		k = td_test_key(deeper, TD_KEY_MAX_DEPTH - 1);
		td_cr_assert_ok(td_dict_get_dict_key(&leafdict, d, k));
		td_key_free(k);
		zeros(&t, 2, B34);
		td_cr_assert_err(td_dict_set_tensor(leafdict, "new.x", &t), TD_EINVAL);
		cr_assert_eq(td_dict_contains(leafdict, "new", 0), 0);
		td_cr_assert_ok(td_dict_set_tensor(leafdict, "x", &t));
		td_tensor_release(&t);
	}
	td_dict_free(d);
}

/* ---- a locked dict through every mutating function ---- */

static int64_t first_f32(const td_dict *d, const char *key)
{
	const td_tensor *t;
	int64_t zero[TD_MAX_DIMS] = { 0 };
	td_scalar s;

	td_cr_assert_ok(td_dict_get_tensor(&t, d, key));
	td_cr_assert_ok(td_tensor_get(&s, t, zero));
	return (int64_t)s.v.f;
}

static const td_tensor *leafp(const td_dict *d, const char *key)
{
	const td_tensor *t;

	td_cr_assert_ok(td_dict_get_tensor(&t, d, key));
	return t;
}

static int plus_one(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	(void)item;
	(void)payload;
	return td_tensor_binary_scalar(out, in, td_scalar_int(1), TD_OP_ADD);
}

Test(dict, locked_dicts_refuse_every_structural_change)
{
	td_dict *d = new34(), *snapshot, *v, *c;
	td_key *knew = KEY("new"), *kab = KEY("a", "b"), *kax = KEY("a", "x"), *kt = KEY("t"),
		   *kat = KEY("a", "t");
	td_index idx[] = { td_index_int(0) };
	int64_t b4[] = { 4 };
	td_tensor t;

	put(d, "a.x", 2, B34);
	put(d, "t", 2, B34);
	td_cr_assert_ok(td_dict_set_string(d, "s", "text"));
	td_cr_assert_ok(td_dict_clone(&snapshot, d));
	td_cr_assert_ok(td_dict_lock(d));
	zeros(&t, 2, B34);
	td_cr_assert_ok(td_dict_new(&c, 2, B34));
	td_cr_assert_err(td_dict_set_tensor_key(d, knew, &t), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_tensor(d, "a.new", &t), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_string(d, "s", "other"), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_string(d, "new", "other"), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_bytes(d, "new", "b", 1), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_bytes_key(d, kab, "b", 1), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_dict(d, "a", c), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_dict_key(d, knew, c), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_dict_take(d, "new", c), TD_ELOCKED);
	cr_assert_null(td_dict_parent(c), "a refused take leaves the dict with the caller");
	td_cr_assert_err(td_dict_set_tensor(d, "s", &t), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_tensor(d, "a", &t), TD_ELOCKED);
	td_cr_assert_err(td_dict_del_key(d, kax), TD_ELOCKED);
	td_cr_assert_err(td_dict_del(d, "s"), TD_ELOCKED);
	td_cr_assert_err(td_dict_rename(d, "t", "u"), TD_ELOCKED);
	td_cr_assert_err(td_dict_rename_key(d, kt, kat), TD_ELOCKED);
	td_key_free(knew);
	td_key_free(kab);
	td_key_free(kax);
	td_key_free(kt);
	td_key_free(kat);
	td_cr_assert_err(td_dict_set_batch_shape(d, 0, NULL), TD_ELOCKED);
	td_cr_assert_ok(td_dict_new(&v, 1, b4));
	put(v, "brand_new", 1, b4);
	td_cr_assert_err(td_dict_index_put(d, idx, 1, v), TD_ELOCKED);
	td_dict_free(v);
	td_cr_assert_ok(td_dict_new(&v, 2, B34));
	put(v, "brand_new", 2, B34);
	td_cr_assert_err(td_dict_update(d, v), TD_ELOCKED);
	td_dict_free(v);
	cr_assert_eq(td_dict_equal(d, snapshot), 1, "nothing changed");
	/* Writes into existing tensors are allowed. */
	td_cr_assert_ok(td_tensor_fill(&t, td_scalar_float(2)));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "t", &t));
	cr_assert_null(t.buffer, "the take consumed the caller's reference");
	cr_assert_eq(first_f32(d, "t"), 2);
	td_cr_assert_ok(td_dict_apply_inplace(d, plus_one, NULL));
	cr_assert_eq(first_f32(d, "t"), 3);
	cr_assert_eq(first_f32(d, "a.x"), 1);
	td_cr_assert_ok(td_dict_binary_scalar_inplace(d, td_scalar_int(2), TD_OP_MUL));
	cr_assert_eq(first_f32(d, "t"), 6);
	td_cr_assert_ok(td_dict_index_fill(d, idx, 1, td_scalar_int(5)));
	cr_assert_eq(first_f32(d, "a.x"), 5);
	td_cr_assert_ok(td_dict_update_inplace(d, snapshot));
	cr_assert_eq(td_dict_equal(d, snapshot), 1);
	td_cr_assert_ok(td_dict_zero(d));
	cr_assert_eq(first_f32(d, "t"), 0);
	td_cr_assert_ok(td_dict_set_tensor_inplace(snapshot, "t", leafp(d, "a.x")));
	td_cr_assert_ok(td_dict_binary_scalar_inplace(snapshot, td_scalar_int(4), TD_OP_ADD));
	{
		/* Only tensors can be written: a string would have to be replaced. */
		const char *keys[] = { "t", "a" };
		td_dict *tensors;
		td_cr_assert_ok(td_dict_select(&tensors, snapshot, keys, 2, true));
		td_cr_assert_ok(td_dict_update(d, tensors));
		cr_assert_eq(first_f32(d, "t"), 4, "update wrote into the stored tensor");
		td_dict_free(tensors);
	}
	td_cr_assert_err(td_dict_update(d, snapshot), TD_ELOCKED);
	{
		td_dict *e;
		td_cr_assert_ok(td_dict_copy(&e, d));
		cr_assert_not(td_dict_is_locked(e), "a copy is unlocked");
		td_cr_assert_ok(td_dict_set_string(e, "new", "x"));
		td_dict_free(e);
	}
	td_dict_free(c);
	td_dict_free(snapshot);
	td_dict_free(d);
}

/* ---- allocation failures in the other allocating functions ---- */

typedef struct more_ctx {
	td_dict *d;
	td_key *k1, *k2;
	td_dict_iter *it;
} more_ctx;

static int more_fail(more_ctx *c, int rc)
{
	td_dict_free(c->d);
	td_key_free(c->k1);
	td_key_free(c->k2);
	td_dict_iter_free(c->it);
	c->d = NULL;
	c->k1 = c->k2 = NULL;
	c->it = NULL;
	return rc;
}

static int more_body(void *arg)
{
	more_ctx *c = arg;
	td_dict *child = NULL;
	td_tensor t = TD_TENSOR_INIT;
	char key[32];
	int rc, i;

	c->d = NULL;
	c->k1 = c->k2 = NULL;
	c->it = NULL;
	rc = td_key_new(&c->k1, "g.h");
	if (rc == 0)
		rc = td_key_from_path(&c->k2, (const char *[]){ "p", "q.r" }, 2);
	if (rc == 0)
		rc = td_dict_new(&c->d, 2, B34);
	for (i = 0; rc == 0 && i < 12; i++) {
		snprintf(key, sizeof(key), "b%d", i);
		rc = td_dict_set_bytes(c->d, key, "bytes", 5);
	}
	if (rc == 0)
		rc = td_dict_rename(c->d, "b3", "renamed_in_place");
	if (rc == 0)
		rc = td_dict_rename(c->d, "b4", "n.m.b4");
	if (rc == 0)
		rc = td_dict_del(c->d, "b5");
	if (rc == 0)
		rc = td_tensor_zeros(&t, TD_DTYPE_F32, 2, B34);
	if (rc == 0)
		rc = td_dict_set_tensor_key(c->d, c->k1, &t);
	if (rc == 0)
		rc = td_dict_set_tensor_key(c->d, c->k2, &t);
	td_tensor_release(&t);
	if (rc == 0)
		rc = td_dict_new(&child, 2, B34);
	if (rc == 0)
		rc = td_dict_set_bytes(child, "x", "x", 1);
	if (rc == 0)
		rc = td_dict_set_dict(c->d, "copies.one", child);
	if (rc == 0)
		rc = td_dict_set_dict(c->d, "copies.two", child);
	if (rc == 0)
		rc = td_dict_set_dict_take(c->d, "taken.here", child);
	/* "copies" holds two entries in two slots: the move makes it grow. */
	if (rc == 0)
		rc = td_dict_rename(c->d, "b6", "copies.b6");
	if (rc == 0)
		rc = td_dict_rename(c->d, "copies.b6", "b6");
	if (rc < 0) {
		td_dict_free(child);
		return more_fail(c, rc);
	}
	rc = td_dict_iter_new(&c->it, c->d, TD_ITER_NESTED);
	if (rc < 0)
		return more_fail(c, rc);
	/* A copy of a dict of more than 8 entries is made with its index. */
	rc = td_dict_copy(&child, c->d);
	if (rc < 0)
		return more_fail(c, rc);
	td_dict_free(child);
	return TD_OK;
}

static void more_cleanup(void *arg)
{
	more_ctx *c = arg;
	td_item item;
	int n = 0;

	while (td_dict_iter_next(&item, c->it) == 1)
		n++;
	/* b0..b11 less b5, n{m{b4}}, g{h}, p{q.r}, copies{one{x}, two{x}}, taken{here{x}} */
	cr_assert_eq(n, 10 + 3 + 2 + 2 + 5 + 3, "%d items", n);
	more_fail(c, 0);
}

Test(dict, allocation_failures_in_keys_values_renames_and_iterators)
{
	more_ctx c;

	td_test_enomem_sweep(more_body, more_cleanup, &c);
}

/* ---- holes: growth by compaction, tombstone clean-up ---- */

Test(dict, a_full_dict_with_many_holes_is_compacted_instead_of_grown)
{
	td_dict *d = new34();
	const char *keys[16];
	char key[32];
	int i;

	for (i = 0; i < 16; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put(d, key, 2, B34);
	}
	for (i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		td_cr_assert_ok(td_dict_del(d, key));
	}
	put(d, "new", 2, B34);
	cr_assert_eq(td_dict_items(keys, NULL, 16, d), 9);
	cr_assert_str_eq(keys[0], "k8");
	cr_assert_str_eq(keys[8], "new");
	for (i = 8; i < 16; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(td_dict_contains(d, key, 0), 1, "%s", key);
	}
	td_dict_free(d);
}

Test(dict, tombstones_of_deleted_last_entries_are_cleaned_up)
{
	td_dict *d = new34();
	char key[32];
	int i;

	for (i = 0; i < 9; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put(d, key, 2, B34);
	}
	/* Deleting the last entry frees its slot: each cycle leaves a tombstone in the
	 * index and takes a new cell, until the index is rebuilt. */
	for (i = 9; i < 200; i++) {
		snprintf(key, sizeof(key), "k%d", i - 1);
		td_cr_assert_ok(td_dict_del(d, key));
		snprintf(key, sizeof(key), "k%d", i);
		put(d, key, 2, B34);
		cr_assert_eq(td_dict_contains(d, key, 0), 1);
		cr_assert_eq(td_dict_contains(d, "missing", 0), 0);
	}
	cr_assert_eq(td_dict_len(d), 9);
	for (i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		cr_assert_eq(td_dict_contains(d, key, 0), 1, "%s", key);
	}
	cr_assert_eq(td_dict_contains(d, "k199", 0), 1);
	td_dict_free(d);
}

Test(dict, renames_move_nested_dicts_between_dicts)
{
	td_dict *d = new34(), *n, *o;

	put(d, "n.x", 2, B34);
	put(d, "o.y", 2, B34);
	td_cr_assert_ok(td_dict_get_dict(&n, d, "n"));
	td_cr_assert_ok(td_dict_rename(d, "n", "o.n"));
	td_cr_assert_ok(td_dict_get_dict(&o, d, "o"));
	cr_assert_eq(td_dict_parent(n), o, "the moved dict is the same dict, now in 'o'");
	cr_assert_eq(td_dict_contains(d, "o.n.x", 0), 1);
	cr_assert_eq(td_dict_contains(d, "n", 0), 0);
	td_cr_assert_ok(td_dict_rename(d, "o.n", "n"));
	cr_assert_eq(td_dict_parent(n), d);
	td_dict_free(d);
}

Test(dict, non_tensor_values_take_no_part_in_batch_checks)
{
	td_dict *d = new34();
	int64_t b5[] = { 5 };

	td_cr_assert_ok(td_dict_set_string(d, "s", "text"));
	td_cr_assert_ok(td_dict_set_bytes(d, "b", "\x00\x01", 2));
	td_cr_assert_ok(td_dict_set_batch_shape(d, 1, b5));
	cr_assert_eq(td_dict_batch_shape(d)[0], 5);
	td_cr_assert_err(td_dict_set_bytes(d, "huge", "x", SIZE_MAX), TD_EOVERFLOW);
	td_dict_free(d);
}

/*
 * Each rename in an indexed dict leaves a tombstone and may take an empty
 * index cell. The index must stay within its load bound, or a lookup of a
 * missing key (which every rename makes) never finds an empty cell.
 */
Test(dict, many_renames_in_an_indexed_dict_keep_lookups_finite, .timeout = 20)
{
	td_dict *d = new34();
	char from[32], to[32];
	int i, j;

	for (i = 0; i < 9; i++) {
		snprintf(from, sizeof(from), "k%d", i);
		put(d, from, 2, B34);
	}
	snprintf(from, sizeof(from), "k0");
	for (i = 0; i < 500; i++) {
		snprintf(to, sizeof(to), "r%d", i);
		td_cr_assert_ok(td_dict_rename(d, from, to));
		cr_assert_eq(td_dict_contains(d, "missing", 0), 0);
		strcpy(from, to);
	}
	cr_assert_eq(td_dict_contains(d, from, 0), 1);
	for (j = 1; j < 9; j++) {
		snprintf(to, sizeof(to), "k%d", j);
		cr_assert_eq(td_dict_contains(d, to, 0), 1, "%s", to);
	}
	/* Appends after all those renames still find room. */
	for (i = 0; i < 50; i++) {
		snprintf(to, sizeof(to), "n%d", i);
		put(d, to, 2, B34);
	}
	cr_assert_eq(td_dict_len(d), 59);
	td_dict_free(d);
}

/* A dotted key one component too deep is refused before anything is written past
 * the TD_KEY_MAX_DEPTH components of a path (checked by the sanitizer build). */
Test(dict, dotted_keys_deeper_than_the_limit_are_refused_in_every_function)
{
	char key[4 * TD_KEY_MAX_DEPTH];
	const char *keys[1] = { key };
	td_dict *d = new34(), *out;
	const td_value *v;
	td_key *k;
	td_tensor t;
	size_t depth;

	zeros(&t, 2, B34);
	for (depth = TD_KEY_MAX_DEPTH + 1; depth <= TD_KEY_MAX_DEPTH + 20; depth += 19) {
		size_t i;
		for (i = 0; i < depth; i++) {
			key[2 * i] = 'k';
			key[2 * i + 1] = '.';
		}
		key[2 * depth - 1] = '\0';
		td_cr_assert_err(td_key_new(&k, key), TD_EINVAL);
		cr_assert(strstr(td_error_last()->message, "deeper") != NULL, "%s",
			td_error_last()->message);
		td_cr_assert_err(td_dict_get(&v, d, key), TD_EINVAL);
		td_cr_assert_err(td_dict_contains(d, key, 0), TD_EINVAL);
		td_cr_assert_err(td_dict_set_tensor(d, key, &t), TD_EINVAL);
		td_cr_assert_err(td_dict_rename(d, "x", key), TD_EINVAL);
		td_cr_assert_err(td_dict_select(&out, d, keys, 1, false), TD_EINVAL);
		td_cr_assert_err(td_dict_exclude(&out, d, keys, 1), TD_EINVAL);
	}
	td_tensor_release(&t);
	td_dict_free(d);
}

/* A batch shape whose element count does not fit in int64 is refused like a
 * tensor shape (TD_EOVERFLOW), so td_dict_batch_numel() never overflows. */
Test(dict, batch_shapes_with_too_many_elements_are_refused)
{
	int64_t huge[] = { INT64_MAX, 2 }, big[] = { (int64_t)1 << 32, (int64_t)1 << 31 };
	int64_t fits[] = { (int64_t)1 << 32, ((int64_t)1 << 31) - 1 }, zero[] = { 0, INT64_MAX };
	td_dict *d = (td_dict *)0x1, *r;
	const td_dict *four[4];

	td_cr_assert_err(td_dict_new(&d, 2, huge), TD_EOVERFLOW);
	cr_assert_null(d);
	td_cr_assert_err(td_dict_new(&d, 2, big), TD_EOVERFLOW);
	td_cr_assert_ok(td_dict_new(&d, 2, fits));
	cr_assert_eq(td_dict_batch_numel(d), ((int64_t)1 << 32) * (((int64_t)1 << 31) - 1));
	td_cr_assert_err(td_dict_set_batch_shape(d, 2, big), TD_EOVERFLOW);
	cr_assert_eq(td_dict_batch_shape(d)[1], ((int64_t)1 << 31) - 1);
	/* Stacking four empty dicts of 2^62 elements would make 2^64. */
	td_cr_assert_ok(td_dict_set_batch_shape(d, 1, (int64_t[]){ (int64_t)1 << 62 }));
	four[0] = four[1] = four[2] = four[3] = d;
	td_cr_assert_err(td_dict_stack(&r, four, 4, 0), TD_EOVERFLOW);
	td_cr_assert_ok(td_dict_stack(&r, four, 1, 0));
	td_dict_free(r);
	/* Concatenating two [2^31, 2^31] dicts would make [2^32, 2^31]. */
	td_cr_assert_ok(
		td_dict_set_batch_shape(d, 2, (int64_t[]){ (int64_t)1 << 31, (int64_t)1 << 31 }));
	td_cr_assert_err(td_dict_cat(&r, four, 2, 0), TD_EOVERFLOW);
	td_cr_assert_ok(td_dict_cat(&r, four, 1, 0));
	td_dict_free(r);
	/* A position list that repeats rows can grow the batch too. */
	{
		int64_t rows[] = { 0, 1, 0, 1 };
		td_index idx[] = { td_index_list(rows, 4) };
		td_cr_assert_ok(td_dict_set_batch_shape(d, 2, (int64_t[]){ 2, (int64_t)1 << 61 }));
		td_cr_assert_err(td_dict_index(&r, d, idx, 1), TD_EOVERFLOW);
		cr_assert_null(r);
		idx[0] = td_index_list(rows, 2);
		td_cr_assert_ok(td_dict_index(&r, d, idx, 1));
		td_dict_free(r);
	}
	td_dict_free(d);
	td_cr_assert_ok(td_dict_new(&d, 2, zero));
	cr_assert_eq(td_dict_batch_numel(d), 0);
	td_dict_free(d);
}

/* Keys up to 15 bytes live in the entry, longer ones are shared strings:
 * both kinds, and the boundary, through every path that makes or moves keys. */
Test(dict, short_boundary_and_long_keys_behave_alike)
{
	static const char *names[] = {
		"k",
		"key_of_15_bytes",
		"key_of_16_bytesx",
		"a_much_longer_key_that_needs_a_shared_string_of_its_own_to_live_in",
	};
	td_dict *d = new34(), *c, *f, *u, **parts;
	const char *keys[8];
	size_t n, i, k;
	td_tensor t;

	cr_assert_eq(strlen(names[1]), 15);
	cr_assert_eq(strlen(names[2]), 16);
	for (k = 0; k < 4; k++) {
		char path[256];
		snprintf(path, sizeof(path), "%s.%s", names[k], names[3 - k]);
		td_test_arange(&t, TD_DTYPE_I32, 2, B34);
		td_cr_assert_ok(td_dict_set_tensor_take(d, path, &t));
	}
	cr_assert_eq(td_dict_items(keys, NULL, 8, d), 4);
	for (k = 0; k < 4; k++)
		cr_assert_str_eq(keys[k], names[k]);
	/* Views share or copy the keys: unbind, then stack back. */
	td_cr_assert_ok(td_dict_unbind(&parts, &n, d, 0));
	td_cr_assert_ok(td_dict_stack(&c, (const td_dict *const *)parts, n, 0));
	cr_assert_eq(td_dict_equal(c, d), 1);
	td_dict_array_free(parts, n);
	/* Long keys outlive the dict they came from. */
	td_dict_free(d);
	d = c;
	td_cr_assert_ok(td_dict_flatten_keys(&f, d, "/"));
	td_cr_assert_ok(td_dict_unflatten_keys(&u, f, "/"));
	cr_assert_eq(td_dict_equal(u, d), 1);
	td_dict_free(f);
	td_dict_free(u);
	/* Renames across the boundary, in place and across dicts. */
	for (k = 0; k < 4; k++) {
		char from[256], to[256];
		snprintf(from, sizeof(from), "%s.%s", names[k], names[3 - k]);
		snprintf(to, sizeof(to), "%s.%s", names[k], names[k]);
		td_cr_assert_ok(td_dict_rename(d, from, to));
		cr_assert_eq(td_dict_contains(d, to, TD_LEAVES_ONLY), 1);
		cr_assert_eq(td_dict_contains(d, from, 0), k == 3 - k);
	}
	td_cr_assert_ok(td_dict_rename(d, names[3], "moved.here"));
	td_cr_assert_ok(td_dict_rename(d, "moved.here", "back_at_the_top_under_a_long_name"));
	cr_assert_eq(td_dict_contains(d, "back_at_the_top_under_a_long_name", 0), 1);
	cr_assert_eq(td_dict_contains(d, "moved", 0), 1);
	td_cr_assert_ok(td_dict_del(d, "back_at_the_top_under_a_long_name"));
	td_cr_assert_ok(td_dict_del(d, "moved"));
	for (i = 0; i < 3; i++)
		td_cr_assert_ok(td_dict_del(d, names[i]));
	cr_assert_eq(td_dict_len(d), 0);
	td_dict_free(d);
}

Test(dict, take_key_setters_adopt_values_under_keys_with_dots_or_empty)
{
	static const int64_t b[] = { 2 };
	td_key *dotted = KEY("a.b"), *empty = KEY(""), *nested = KEY("sub.x", ""), *knew = KEY("new");
	td_dict *d, *child, *other;
	const td_value *v;
	td_tensor t, keep;

	td_cr_assert_ok(td_dict_new(&d, 1, b));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, b));
	td_cr_assert_ok(td_dict_set_tensor_take_key(d, dotted, &t));
	cr_assert_null(t.buffer);
	td_cr_assert_ok(td_dict_get_key(&v, d, dotted));
	cr_assert_eq(v->kind, TD_VALUE_TENSOR);
	cr_assert_eq(td_buffer_refcount(v->tensor.buffer), 1);

	td_cr_assert_ok(td_dict_new(&child, 1, b));
	td_cr_assert_ok(td_dict_set_dict_take_key(d, empty, child));
	td_cr_assert_ok(td_dict_get_key(&v, d, empty));
	cr_assert_eq(v->dict, child);
	cr_assert_eq(td_dict_parent(child), d);
	/* Intermediate dicts are created; the empty last component is a key too. */
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I8, 1, b));
	td_cr_assert_ok(td_dict_set_tensor_take_key(d, nested, &t));
	td_cr_assert_ok(td_dict_get_key(&v, d, nested));

	/* Failures leave the caller's reference and dict alone. */
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, (const int64_t[]){ 3 }));
	td_tensor_ref(&keep, &t);
	td_cr_assert_err(td_dict_set_tensor_take_key(d, dotted, &t), TD_ETYPE);
	cr_assert_eq(t.buffer, keep.buffer);
	td_cr_assert_err(td_dict_set_tensor_take_key(d, NULL, &t), TD_EINVAL);
	td_cr_assert_err(td_dict_set_tensor_take_key(NULL, dotted, &t), TD_EINVAL);
	cr_assert_eq(td_buffer_refcount(t.buffer), 2);
	td_tensor_release(&t);
	td_tensor_release(&keep);
	td_cr_assert_err(td_dict_set_dict_take_key(d, dotted, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_set_dict_take_key(d, dotted, child), TD_EINVAL);
	td_cr_assert_ok(td_dict_new(&other, 1, (const int64_t[]){ 5 }));
	td_cr_assert_err(td_dict_set_dict_take_key(d, empty, other), TD_ETYPE);
	cr_assert_null(td_dict_parent(other));
	td_dict_free(other);
	td_cr_assert_ok(td_dict_lock(d));
	td_cr_assert_ok(td_dict_new(&other, 1, b));
	td_cr_assert_err(td_dict_set_dict_take_key(d, knew, other), TD_ELOCKED);
	td_dict_free(other);
	td_key_free(dotted);
	td_key_free(empty);
	td_key_free(nested);
	td_key_free(knew);
	td_dict_free(d);
}
