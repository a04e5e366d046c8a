/* SPDX-License-Identifier: MIT */
/*
 * test_dict_ops.c - whole-dict operations: copy/clone/empty, update and
 * update_inplace, select/exclude, flatten/unflatten, apply, elementwise
 * arithmetic, zero, equality.
 */
#include "td_test.h"

static const int64_t B34[] = { 3, 4 };

static void put_full(td_dict *d, const char *key, td_dtype dt, int ndim, const int64_t *shape,
	double v)
{
	td_tensor t;

	td_cr_assert_ok(td_tensor_full(&t, dt, ndim, shape, td_scalar_float(v)));
	td_cr_assert_ok(td_dict_set_tensor_take(d, key, &t));
}

/* d[name] = t, under the one key component `name`, which may hold '.'. */
static void set_flat_tensor(td_dict *d, const char *name, const td_tensor *t)
{
	td_key *k = td_test_key(&name, 1);

	td_cr_assert_ok(td_dict_set_tensor_key(d, k, t));
	td_key_free(k);
}

/* d[name] = the string `utf8`, under the one key component `name`. */
static void set_flat_string(td_dict *d, const char *name, const char *utf8)
{
	td_key *k = td_test_key(&name, 1);

	td_cr_assert_ok(td_dict_set_string_key(d, k, utf8));
	td_key_free(k);
}

static double val(const td_dict *d, const char *key)
{
	const td_tensor *t;
	td_scalar s;
	int64_t zero[TD_MAX_DIMS] = { 0 };

	td_cr_assert_ok(td_dict_get_tensor(&t, d, key));
	td_cr_assert_ok(td_tensor_get(&s, t, zero));
	switch (s.kind) {
	case TD_SCALAR_BOOL:
		return s.v.b;
	case TD_SCALAR_INT:
		return (double)s.v.i;
	case TD_SCALAR_UINT:
		return (double)s.v.u;
	default:
		return s.v.f;
	}
}

/* {a: f32[3,4,5]=1, b: {b1: f32[3,4,5]=2}, s: "text"} */
static td_dict *fixture(void)
{
	int64_t s[] = { 3, 4, 5 };
	td_dict *d;

	td_cr_assert_ok(td_dict_new(&d, 2, B34));
	put_full(d, "a", TD_DTYPE_F32, 3, s, 1);
	put_full(d, "b.b1", TD_DTYPE_F32, 3, s, 2);
	td_cr_assert_ok(td_dict_set_string(d, "s", "text"));
	return d;
}

static const td_tensor *tensor(const td_dict *d, const char *key)
{
	const td_tensor *t;

	td_cr_assert_ok(td_dict_get_tensor(&t, d, key));
	return t;
}

Test(dict_ops, copy_shares_buffers_and_clone_copies_them)
{
	td_dict *d = fixture(), *c, *k, *fail = (td_dict *)0x1;

	td_cr_assert_ok(td_dict_lock(d));
	td_cr_assert_ok(td_dict_copy(&c, d));
	td_cr_assert_ok(td_dict_clone(&k, d));
	cr_assert_eq(tensor(c, "b.b1")->buffer, tensor(d, "b.b1")->buffer);
	cr_assert_neq(tensor(k, "b.b1")->buffer, tensor(d, "b.b1")->buffer);
	cr_assert_not(td_dict_is_locked(c));
	cr_assert_eq(td_dict_equal(c, d), 1);
	cr_assert_eq(td_dict_equal(k, d), 1);
	td_cr_assert_ok(td_tensor_fill((td_tensor *)tensor(k, "a"), td_scalar_float(9)));
	cr_assert_eq(val(d, "a"), 1.0, "the clone is independent");
	cr_assert_eq(td_dict_equal(k, d), 0);
	td_cr_assert_err(td_dict_copy(NULL, d), TD_EINVAL);
	td_cr_assert_err(td_dict_clone(&fail, NULL), TD_EINVAL);
	cr_assert_null(fail, "a failed call sets *out to NULL");
	td_dict_free(c);
	td_dict_free(k);
	td_dict_free(d);
}

Test(dict_ops, empty_keeps_the_batch_and_optionally_the_structure)
{
	td_dict *d = fixture(), *e;

	td_cr_assert_ok(td_dict_empty(&e, d, false));
	cr_assert_eq(td_dict_len(e), 0);
	cr_assert_eq(td_dict_batch_numel(e), 12);
	td_dict_free(e);
	td_cr_assert_ok(td_dict_empty(&e, d, true));
	cr_assert_eq(td_dict_len(e), 1);
	cr_assert_eq(td_dict_contains(e, "b", 0), 1);
	cr_assert_eq(td_dict_contains(e, "b.b1", 0), 0);
	td_dict_free(e);
	td_cr_assert_err(td_dict_empty(NULL, d, true), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_ops, update_merges_nested_dicts_and_shares_leaves)
{
	td_dict *d = fixture(), *o;
	int64_t s[] = { 3, 4, 5 };

	td_cr_assert_ok(td_dict_new(&o, 2, B34));
	put_full(o, "b.b2", TD_DTYPE_F32, 3, s, 7);
	put_full(o, "a", TD_DTYPE_I64, 2, B34, 5);
	put_full(o, "c.d", TD_DTYPE_F32, 2, B34, 6);
	td_cr_assert_ok(td_dict_update(d, o));
	cr_assert_eq(td_dict_contains(d, "b.b1", 0), 1);
	cr_assert_eq(td_dict_contains(d, "b.b2", 0), 1);
	cr_assert_eq(tensor(d, "a")->dtype, TD_DTYPE_I64);
	cr_assert_eq(tensor(d, "a")->buffer, tensor(o, "a")->buffer);
	cr_assert_eq(val(d, "c.d"), 6);
	td_cr_assert_ok(td_dict_update(d, d));
	td_cr_assert_err(td_dict_update(NULL, o), TD_EINVAL);
	td_dict_free(o);
	td_dict_free(d);
}

Test(dict_ops, update_into_a_locked_dict_writes_existing_leaves_in_place)
{
	td_dict *d = fixture(), *o;
	int64_t s[] = { 3, 4, 5 };
	td_buffer *before;

	td_cr_assert_ok(td_dict_new(&o, 2, B34));
	put_full(o, "a", TD_DTYPE_F32, 3, s, 4);
	before = tensor(d, "a")->buffer;
	td_cr_assert_ok(td_dict_lock(d));
	td_cr_assert_ok(td_dict_update(d, o));
	cr_assert_eq(tensor(d, "a")->buffer, before);
	cr_assert_eq(val(d, "a"), 4);
	put_full(o, "new", TD_DTYPE_F32, 2, B34, 1);
	td_cr_assert_err(td_dict_update(d, o), TD_ELOCKED);
	td_dict_free(o);
	td_dict_free(d);
}

Test(dict_ops, update_inplace_copies_and_checks_everything_first)
{
	td_dict *d = fixture(), *o;
	int64_t s5[] = { 5 };

	td_cr_assert_ok(td_dict_new(&o, 0, NULL));
	put_full(o, "a", TD_DTYPE_I32, 1, s5, 3);
	put_full(o, "b.b1", TD_DTYPE_F64, 1, s5, 8);
	td_cr_assert_ok(td_dict_update_inplace(d, o));
	cr_assert_eq(val(d, "a"), 3);
	cr_assert_eq(val(d, "b.b1"), 8);
	cr_assert_eq(tensor(d, "a")->dtype, TD_DTYPE_F32);
	put_full(o, "a", TD_DTYPE_I32, 1, s5, 100);
	put_full(o, "missing", TD_DTYPE_I32, 1, s5, 1);
	td_cr_assert_err(td_dict_update_inplace(d, o), TD_ENOTFOUND);
	cr_assert_eq(val(d, "a"), 3, "nothing was written");
	td_cr_assert_ok(td_dict_del(o, "missing"));
	td_cr_assert_ok(td_dict_set_string(o, "b", "not a dict"));
	td_cr_assert_err(td_dict_update_inplace(d, o), TD_ETYPE);
	td_dict_free(o);
	td_cr_assert_ok(td_dict_new(&o, 0, NULL));
	{
		int64_t s7[] = { 7 };
		put_full(o, "a", TD_DTYPE_F32, 1, s7, 1);
		td_cr_assert_err(td_dict_update_inplace(d, o), TD_ETYPE);
	}
	td_dict_free(o);
	td_dict_free(d);
}

Test(dict_ops, select_keeps_order_and_nested_paths)
{
	td_dict *d = fixture(), *s;
	const char *keys[] = { "s", "b.b1", "zzz" };
	const char *out[4];

	td_cr_assert_ok(td_dict_select(&s, d, keys, 3, false));
	cr_assert_eq(td_dict_items(out, NULL, 4, s), 2);
	cr_assert_str_eq(out[0], "b");
	cr_assert_str_eq(out[1], "s");
	cr_assert_eq(tensor(s, "b.b1")->buffer, tensor(d, "b.b1")->buffer);
	td_dict_free(s);
	td_cr_assert_err(td_dict_select(&s, d, keys, 3, true), TD_ENOTFOUND);
	cr_assert_null(s);
	cr_assert(strstr(td_error_last()->message, "zzz") != NULL);
	td_cr_assert_err(td_dict_select(&s, d, (const char *[]){ "a.x" }, 1, true), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_select(&s, d, (const char *[]){ "a..x" }, 1, false), TD_EINVAL);
	td_cr_assert_ok(td_dict_select(&s, d, NULL, 0, true));
	cr_assert_eq(td_dict_len(s), 0);
	td_dict_free(s);
	td_dict_free(d);
}

Test(dict_ops, select_and_exclude_with_key_handles)
{
	td_dict *d = fixture(), *s;
	td_key *k;

	td_cr_assert_ok(td_key_new(&k, "b.b1"));
	td_cr_assert_ok(td_dict_select_keys(&s, d, (const td_key *const *)&k, 1, true));
	cr_assert_eq(td_dict_len(s), 1);
	td_dict_free(s);
	td_cr_assert_ok(td_dict_exclude_keys(&s, d, (const td_key *const *)&k, 1));
	cr_assert_eq(td_dict_contains(s, "b", 0), 1, "an emptied sub-dict stays");
	cr_assert_eq(td_dict_contains(s, "b.b1", 0), 0);
	cr_assert_eq(td_dict_contains(s, "a", 0), 1);
	td_dict_free(s);
	td_cr_assert_err(td_dict_select_keys(&s, d, NULL, 1, true), TD_EINVAL);
	{
		const td_key *nullkey = NULL;
		td_cr_assert_err(td_dict_exclude_keys(&s, d, &nullkey, 1), TD_EINVAL);
	}
	td_key_free(k);
	td_dict_free(d);
}

Test(dict_ops, exclude_drops_whole_subtrees)
{
	td_dict *d = fixture(), *e;
	const char *keys[] = { "b", "nope.x" };

	td_cr_assert_ok(td_dict_exclude(&e, d, keys, 2));
	cr_assert_eq(td_dict_len(e), 2);
	cr_assert_eq(td_dict_contains(e, "b", 0), 0);
	td_dict_free(e);
	td_dict_free(d);
}

Test(dict_ops, flatten_and_unflatten_round_trip)
{
	td_dict *d = fixture(), *f, *u;
	const char *keys[4];
	td_key *k;

	td_cr_assert_ok(td_dict_flatten_keys(&f, d, "."));
	cr_assert_eq(td_dict_items(keys, NULL, 4, f), 3);
	cr_assert_str_eq(keys[0], "a");
	cr_assert_str_eq(keys[1], "b.b1");
	cr_assert_str_eq(keys[2], "s");
	k = td_test_key((const char *[]){ "b.b1" }, 1);
	cr_assert_eq(td_dict_contains_key(f, k, 0), 1);
	td_key_free(k);
	td_cr_assert_ok(td_dict_unflatten_keys(&u, f, "."));
	cr_assert_eq(td_dict_equal(u, d), 1);
	td_dict_free(u);
	td_dict_free(f);
	td_cr_assert_ok(td_dict_flatten_keys(&f, d, "::"));
	cr_assert_eq(td_dict_contains(f, "b::b1", 0), 1);
	td_cr_assert_ok(td_dict_unflatten_keys(&u, f, "::"));
	cr_assert_eq(td_dict_equal(u, d), 1);
	td_dict_free(u);
	td_dict_free(f);
	td_dict_free(d);
}

Test(dict_ops, flatten_and_unflatten_report_collisions)
{
	td_dict *d, *f;

	td_cr_assert_ok(td_dict_new(&d, 2, B34));
	put_full(d, "a.b", TD_DTYPE_F32, 2, B34, 1);
	set_flat_tensor(d, "a.b", tensor(d, "a.b"));
	td_cr_assert_err(td_dict_flatten_keys(&f, d, "."), TD_EEXISTS);
	cr_assert_null(f);
	td_cr_assert_err(td_dict_unflatten_keys(&f, d, "."), TD_EEXISTS);
	td_cr_assert_err(td_dict_flatten_keys(&f, d, ""), TD_EINVAL);
	td_cr_assert_err(td_dict_unflatten_keys(&f, d, NULL), TD_EINVAL);
	td_dict_free(d);
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	set_flat_string(d, "x..y", "v");
	td_cr_assert_err(td_dict_unflatten_keys(&f, d, "."), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_ops, unflatten_merges_prefixes_into_one_dict)
{
	td_dict *d, *u;
	const char *keys[4];

	td_cr_assert_ok(td_dict_new(&d, 2, B34));
	set_flat_string(d, "a.x", "1");
	td_cr_assert_ok(td_dict_set_string(d, "b", "2"));
	set_flat_string(d, "a.y.z", "3");
	td_cr_assert_ok(td_dict_unflatten_keys(&u, d, "."));
	cr_assert_eq(td_dict_items(keys, NULL, 4, u), 2);
	cr_assert_str_eq(keys[0], "a");
	cr_assert_str_eq(keys[1], "b");
	cr_assert_eq(td_dict_contains(u, "a.y.z", 0), 1);
	td_dict_free(u);
	td_dict_free(d);
}

static int times_two(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	int *calls = payload;

	(*calls)++;
	cr_assert_str_eq(item->key, item->path[item->depth - 1]);
	if (strcmp(item->key, "b1") == 0)
		cr_assert_str_eq(item->path[0], "b");
	return td_tensor_binary_scalar(out, in, td_scalar_int(2), TD_OP_MUL);
}

static int drop_a(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	(void)payload;
	if (strcmp(item->key, "a") == 0)
		return 1;
	td_tensor_ref(out, in);
	return 0;
}

static int fails(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	(void)out;
	(void)in;
	(void)item;
	(void)payload;
	return TD_EIO;
}

static int wrong_shape(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	int64_t s[] = { 2 };
	(void)in;
	(void)item;
	(void)payload;
	return td_tensor_zeros(out, TD_DTYPE_F32, 1, s);
}

Test(dict_ops, apply_maps_every_tensor_leaf)
{
	td_dict *d = fixture(), *r;
	int calls = 0;

	td_cr_assert_ok(td_dict_apply(&r, d, times_two, &calls));
	cr_assert_eq(calls, 2);
	cr_assert_eq(val(r, "a"), 2);
	cr_assert_eq(val(r, "b.b1"), 4);
	cr_assert_eq(td_dict_contains(r, "s", 0), 1, "non-tensor leaves are carried over");
	td_dict_free(r);
	td_cr_assert_ok(td_dict_apply(&r, d, drop_a, NULL));
	cr_assert_eq(td_dict_contains(r, "a", 0), 0);
	cr_assert_eq(td_dict_contains(r, "b.b1", 0), 1);
	td_dict_free(r);
	td_cr_assert_err(td_dict_apply(&r, d, fails, NULL), TD_EIO);
	cr_assert_null(r);
	td_cr_assert_err(td_dict_apply(&r, d, wrong_shape, NULL), TD_ETYPE);
	td_cr_assert_err(td_dict_apply(&r, d, NULL, NULL), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_ops, apply_inplace_writes_results_into_the_leaves)
{
	td_dict *d = fixture();
	int calls = 0;

	td_cr_assert_ok(td_dict_apply_inplace(d, times_two, &calls));
	cr_assert_eq(val(d, "a"), 2);
	cr_assert_eq(val(d, "b.b1"), 4);
	td_cr_assert_err(td_dict_apply_inplace(d, fails, NULL), TD_EIO);
	td_cr_assert_err(td_dict_apply_inplace(NULL, fails, NULL), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_ops, binary_ops_pair_leaves_by_key)
{
	td_dict *a = fixture(), *b = fixture(), *r;

	td_cr_assert_ok(td_dict_binary(&r, a, b, TD_OP_ADD));
	cr_assert_eq(val(r, "a"), 2);
	cr_assert_eq(val(r, "b.b1"), 4);
	cr_assert_eq(td_dict_contains(r, "s", 0), 1);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_binary(&r, a, b, TD_OP_EQ));
	cr_assert_eq(tensor(r, "a")->dtype, TD_DTYPE_BOOL);
	cr_assert_eq(val(r, "b.b1"), 1);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_binary_scalar(&r, a, td_scalar_float(0.5), TD_OP_MUL));
	cr_assert_eq(val(r, "b.b1"), 1);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_del(b, "a"));
	td_cr_assert_err(td_dict_binary(&r, a, b, TD_OP_ADD), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_binary(&r, b, a, TD_OP_ADD), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_binary(&r, a, a, (td_binop)99), TD_EINVAL);
	td_cr_assert_err(td_dict_binary_scalar(&r, a, td_scalar_int(1), (td_binop)99), TD_EINVAL);
	td_dict_free(a);
	td_dict_free(b);
}

Test(dict_ops, binary_inplace_checks_all_leaves_before_writing)
{
	td_dict *a = fixture(), *b = fixture();

	td_cr_assert_ok(td_dict_binary_inplace(a, b, TD_OP_ADD));
	cr_assert_eq(val(a, "b.b1"), 4);
	td_cr_assert_ok(td_dict_binary_scalar_inplace(a, td_scalar_int(1), TD_OP_SUB));
	cr_assert_eq(val(a, "a"), 1);
	/* An integer leaf cannot receive a float result: nothing is written. */
	put_full(a, "i", TD_DTYPE_I32, 2, B34, 5);
	put_full(b, "i", TD_DTYPE_I32, 2, B34, 5);
	td_cr_assert_err(td_dict_binary_scalar_inplace(a, td_scalar_float(0.5), TD_OP_ADD), TD_ETYPE);
	cr_assert_eq(val(a, "a"), 1);
	td_cr_assert_err(td_dict_binary_inplace(a, b, TD_OP_DIV), TD_ETYPE);
	cr_assert_eq(val(a, "a"), 1);
	td_cr_assert_err(td_dict_binary_inplace(a, b, TD_OP_EQ), TD_EINVAL);
	td_cr_assert_ok(td_dict_binary_scalar_inplace(a, td_scalar_int(2), TD_OP_MUL));
	cr_assert_eq(val(a, "i"), 10);
	td_dict_free(a);
	td_dict_free(b);
}

Test(dict_ops, zero_and_equality)
{
	td_dict *a = fixture(), *b = fixture();

	cr_assert_eq(td_dict_equal(a, b), 1);
	cr_assert_eq(td_dict_allclose(a, b, 1e-5, 1e-8, false), 1);
	td_cr_assert_ok(td_dict_zero(b));
	cr_assert_eq(val(b, "b.b1"), 0);
	cr_assert_eq(td_dict_equal(a, b), 0);
	cr_assert_eq(td_dict_allclose(a, b, 0, 2.5, false), 1);
	td_cr_assert_ok(td_dict_set_string(b, "s", "other"));
	cr_assert_eq(td_dict_allclose(a, b, 0, 2.5, false), 0);
	td_cr_assert_err(td_dict_equal(a, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_allclose(a, b, -1, 0, false), TD_EINVAL);
	td_cr_assert_err(td_dict_zero(NULL), TD_EINVAL);
	td_dict_free(a);
	td_dict_free(b);
}

Test(dict_ops, read_only_leaves_refuse_in_place_operations_untouched)
{
	td_dict *d = fixture();
	td_buffer *ro;
	td_tensor t;
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	static float data[12];

	o.flags = TD_BUFFER_READONLY;
	td_cr_assert_ok(td_buffer_wrap(&ro, data, sizeof(data), &o));
	td_cr_assert_ok(td_tensor_from_buffer(&t, ro, TD_DTYPE_F32, 2, B34, NULL, 0));
	td_buffer_unref(ro);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "ro", &t));
	td_cr_assert_err(td_dict_zero(d), TD_EREADONLY);
	cr_assert_eq(val(d, "a"), 1, "nothing was written");
	td_cr_assert_err(td_dict_binary_scalar_inplace(d, td_scalar_int(1), TD_OP_ADD), TD_EREADONLY);
	cr_assert_eq(val(d, "a"), 1);
	td_dict_free(d);
}

/* ---- update ---- */

Test(dict_ops, update_replaces_a_nested_dict_by_a_leaf)
{
	td_dict *d = fixture(), *o;

	td_cr_assert_ok(td_dict_new(&o, 2, B34));
	put_full(o, "b", TD_DTYPE_I32, 2, B34, 3);
	td_cr_assert_ok(td_dict_update(d, o));
	cr_assert_eq(tensor(d, "b")->dtype, TD_DTYPE_I32, "a leaf replaces a dict, as tensordict");
	td_cr_assert_ok(td_dict_lock(d));
	td_cr_assert_ok(td_dict_del(o, "b"));
	put_full(o, "n.x", TD_DTYPE_F32, 2, B34, 1);
	td_cr_assert_err(td_dict_update(d, o), TD_ELOCKED);
	cr_assert_eq(td_dict_contains(d, "n", 0), 0);
	td_cr_assert_err(td_dict_update(d, NULL), TD_EINVAL);
	td_dict_free(o);
	td_dict_free(d);
}

/* dict.h: where a dict of `other` meets a leaf of `d`, the dict replaces it
 * (tensordict's update() raises TypeError there instead). */
Test(dict_ops, update_replaces_a_leaf_by_a_dict_as_documented)
{
	td_dict *d = fixture(), *o;

	td_cr_assert_ok(td_dict_new(&o, 2, B34));
	put_full(o, "a.inner", TD_DTYPE_F32, 2, B34, 5);
	put_full(o, "s.inner", TD_DTYPE_F32, 2, B34, 6);
	td_cr_assert_ok(td_dict_update(d, o));
	cr_assert_eq(val(d, "a.inner"), 5);
	cr_assert_eq(val(d, "s.inner"), 6, "a string is replaced too");
	td_cr_assert_ok(td_dict_lock(d));
	put_full(o, "b", TD_DTYPE_F32, 2, B34, 1);
	td_cr_assert_err(td_dict_update(d, o), TD_ELOCKED);
	td_dict_free(o);
	td_dict_free(d);
}

Test(dict_ops, update_refuses_leaves_with_the_wrong_batch)
{
	td_dict *d = fixture(), *o;
	int64_t b3[] = { 3 };

	td_cr_assert_ok(td_dict_new(&o, 1, b3));
	put_full(o, "x", TD_DTYPE_F32, 1, b3, 1);
	td_cr_assert_err(td_dict_update(d, o), TD_ETYPE);
	cr_assert_eq(td_dict_contains(d, "x", 0), 0);
	td_dict_free(o);
	td_dict_free(d);
}

Test(dict_ops, update_inplace_replaces_non_tensor_values)
{
	td_dict *d = fixture(), *o;
	const char *data;
	size_t len;

	td_cr_assert_ok(td_dict_new(&o, 0, NULL));
	/* Bytes do not replace a string: the kinds must match. */
	td_cr_assert_ok(td_dict_set_bytes(o, "s", "raw", 3));
	td_cr_assert_err(td_dict_update_inplace(d, o), TD_ETYPE);
	td_cr_assert_ok(td_dict_set_string(o, "s", "raw"));
	td_cr_assert_ok(td_dict_lock(d));
	td_cr_assert_ok(td_dict_update_inplace(d, o));
	td_cr_assert_ok(td_dict_get_blob(&data, &len, d, "s"));
	cr_assert_eq(len, 3);
	cr_assert_eq(memcmp(data, "raw", 3), 0);
	td_cr_assert_ok(td_dict_update_inplace(d, d));
	/* Kinds must match: a dict for a leaf, a leaf for a dict, a blob for a tensor. */
	td_cr_assert_ok(td_dict_set_string(o, "a", "not a tensor"));
	td_cr_assert_err(td_dict_update_inplace(d, o), TD_ETYPE);
	td_cr_assert_ok(td_dict_del(o, "a"));
	put_full(o, "s", TD_DTYPE_F32, 0, NULL, 1);
	td_cr_assert_err(td_dict_update_inplace(d, o), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "'s' is not a tensor") != NULL, "%s",
		td_error_last()->message);
	td_cr_assert_ok(td_dict_del(o, "s"));
	put_full(o, "a.x", TD_DTYPE_F32, 0, NULL, 1);
	td_cr_assert_err(td_dict_update_inplace(d, o), TD_ETYPE);
	td_cr_assert_ok(td_dict_del(o, "a"));
	put_full(o, "b.missing", TD_DTYPE_F32, 0, NULL, 1);
	td_cr_assert_err(td_dict_update_inplace(d, o), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_update_inplace(NULL, o), TD_EINVAL);
	td_cr_assert_err(td_dict_update_inplace(d, NULL), TD_EINVAL);
	cr_assert_eq(val(d, "a"), 1, "nothing was written");
	td_dict_free(o);
	td_dict_free(d);
}

/* update(root, root.a) replaces root.a by its own leaf "a": the source must
 * survive its own replacement (checked by the sanitizer build). */
Test(dict_ops, update_from_a_dict_inside_the_target)
{
	td_dict *d, *a;
	td_buffer *inner;

	td_cr_assert_ok(td_dict_new(&d, 2, B34));
	put_full(d, "a.a", TD_DTYPE_F32, 2, B34, 1);
	put_full(d, "a.x", TD_DTYPE_F32, 2, B34, 2);
	inner = tensor(d, "a.a")->buffer;
	td_cr_assert_ok(td_dict_get_dict(&a, d, "a"));
	td_cr_assert_ok(td_dict_update(d, a));
	cr_assert_eq(tensor(d, "a")->buffer, inner, "the leaf replaced its dict");
	cr_assert_eq(val(d, "x"), 2);
	cr_assert_eq(td_dict_len(d), 2);
	td_dict_free(d);
	/* The other way round: a dict updated from its root. */
	td_cr_assert_ok(td_dict_new(&d, 2, B34));
	put_full(d, "a.y", TD_DTYPE_F32, 2, B34, 1);
	put_full(d, "z", TD_DTYPE_F32, 2, B34, 3);
	td_cr_assert_ok(td_dict_get_dict(&a, d, "a"));
	td_cr_assert_ok(td_dict_update(a, d));
	cr_assert_eq(val(d, "a.z"), 3);
	cr_assert_eq(td_dict_contains(d, "a.a.y", 0), 1, "a copy of 'a' as it was");
	td_dict_free(d);
}

typedef struct alias_ctx {
	td_dict *src, *out;
} alias_ctx;

static int alias_body(void *arg)
{
	alias_ctx *c = arg;
	td_dict *b;
	int rc;

	rc = td_dict_clone(&c->out, c->src);
	if (rc == 0)
		rc = td_dict_get_dict(&b, c->out, "b");
	if (rc == 0)
		rc = td_dict_update(c->out, b);
	if (rc < 0) {
		td_dict_free(c->out);
		c->out = NULL;
	}
	return rc;
}

static void alias_cleanup(void *arg)
{
	alias_ctx *c = arg;

	cr_assert_eq(val(c->out, "b1"), 2);
	td_dict_free(c->out);
}

Test(dict_ops, update_from_inside_the_target_leaks_nothing_on_allocation_failures)
{
	alias_ctx c;

	c.src = fixture();
	c.out = NULL;
	td_test_enomem_sweep(alias_body, alias_cleanup, &c);
	td_dict_free(c.src);
}

/* ---- select and exclude ---- */

Test(dict_ops, select_drops_dicts_where_nothing_was_selected)
{
	td_dict *d = fixture(), *s;
	const char *keys[] = { "b.nope", "a.x", "s.x" };

	td_cr_assert_ok(td_dict_select(&s, d, keys, 3, false));
	cr_assert_eq(td_dict_len(s), 0, "'b' held nothing selected, 'a' and 's' are leaves");
	td_dict_free(s);
	td_cr_assert_err(td_dict_select(&s, d, keys, 3, true), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_select(NULL, d, keys, 1, false), TD_EINVAL);
	td_cr_assert_err(td_dict_select(&s, NULL, keys, 1, false), TD_EINVAL);
	td_cr_assert_err(td_dict_select(&s, d, NULL, 1, false), TD_EINVAL);
	td_cr_assert_err(td_dict_select(&s, d, (const char *[]){ NULL }, 1, false), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_ops, exclude_with_overlapping_paths_drops_the_outer_one)
{
	td_dict *d = fixture(), *e;
	const char *keys[] = { "b.b1", "b", "a.x" };
	td_key *k[2];

	td_cr_assert_ok(td_dict_exclude(&e, d, keys, 3));
	cr_assert_eq(td_dict_len(e), 2);
	cr_assert_eq(td_dict_contains(e, "b", 0), 0);
	cr_assert_eq(td_dict_contains(e, "a", TD_LEAVES_ONLY), 1, "a path through a leaf");
	td_dict_free(e);
	td_cr_assert_ok(td_dict_exclude(&e, d, NULL, 0));
	cr_assert_eq(td_dict_equal(e, d), 1);
	td_dict_free(e);
	td_cr_assert_ok(td_key_new(&k[0], "b"));
	td_cr_assert_ok(td_key_new(&k[1], "b.b1"));
	td_cr_assert_ok(td_dict_exclude_keys(&e, d, (const td_key *const *)k, 2));
	cr_assert_eq(td_dict_contains(e, "b", 0), 0);
	td_dict_free(e);
	td_cr_assert_err(td_dict_exclude_keys(&e, d, NULL, 1), TD_EINVAL);
	td_cr_assert_err(td_dict_exclude_keys(NULL, d, (const td_key *const *)k, 1), TD_EINVAL);
	td_cr_assert_err(td_dict_exclude(&e, NULL, keys, 1), TD_EINVAL);
	td_key_free(k[0]);
	td_key_free(k[1]);
	td_dict_free(d);
}

/* A path inside an entry that another path selects whole is found (tensordict:
 * td.select("b", ("b", "b1"), strict=True)); one that does not exist is not. */
Test(dict_ops, strict_select_with_overlapping_paths)
{
	td_dict *d = fixture(), *s;
	const char *both[] = { "b", "b.b1" };
	const char *reversed[] = { "b.b1", "b" };
	const char *missing_inside[] = { "b", "b.nope" };
	const char *through_leaf[] = { "a", "a.x" };
	td_key *k[2];

	td_cr_assert_ok(td_dict_select(&s, d, both, 2, true));
	cr_assert_eq(td_dict_len(s), 1);
	cr_assert_eq(td_dict_contains(s, "b.b1", 0), 1);
	td_dict_free(s);
	td_cr_assert_ok(td_dict_select(&s, d, reversed, 2, true));
	cr_assert_eq(td_dict_contains(s, "b.b1", 0), 1);
	td_dict_free(s);
	td_cr_assert_err(td_dict_select(&s, d, missing_inside, 2, true), TD_ENOTFOUND);
	cr_assert(strstr(td_error_last()->message, "b.nope") != NULL, "%s", td_error_last()->message);
	td_cr_assert_err(td_dict_select(&s, d, through_leaf, 2, true), TD_ENOTFOUND);
	td_cr_assert_ok(td_dict_select(&s, d, missing_inside, 2, false));
	cr_assert_eq(td_dict_contains(s, "b.b1", 0), 1);
	td_dict_free(s);
	td_cr_assert_ok(td_key_new(&k[0], "b"));
	td_cr_assert_ok(td_key_new(&k[1], "b.b1"));
	td_cr_assert_ok(td_dict_select_keys(&s, d, (const td_key *const *)k, 2, true));
	cr_assert_eq(td_dict_contains(s, "b.b1", 0), 1);
	td_dict_free(s);
	td_key_free(k[0]);
	td_key_free(k[1]);
	td_dict_free(d);
}

/* ---- flatten and unflatten ---- */

Test(dict_ops, flatten_with_a_long_separator_and_keys_holding_it)
{
	td_dict *d, *f, *u;
	const char *keys[4];

	td_cr_assert_ok(td_dict_new(&d, 2, B34));
	put_full(d, "a.b", TD_DTYPE_F32, 2, B34, 1);
	td_cr_assert_ok(td_dict_set_string(d, "a.x--y", "v"));
	{
		td_dict *e;
		td_cr_assert_ok(td_dict_new(&e, 2, B34));
		td_cr_assert_ok(td_dict_set_dict_take(d, "empty", e));
	}
	td_cr_assert_ok(td_dict_flatten_keys(&f, d, "--"));
	cr_assert_eq(td_dict_items(keys, NULL, 4, f), 2, "the empty nested dict disappears");
	cr_assert_str_eq(keys[0], "a--b");
	cr_assert_str_eq(keys[1], "a--x--y");
	/* Splitting on "--" cuts the key that held the separator. */
	td_cr_assert_ok(td_dict_unflatten_keys(&u, f, "--"));
	cr_assert_eq(td_dict_contains(u, "a.x.y", 0), 1);
	cr_assert_eq(td_dict_contains(u, "a.b", 0), 1);
	td_dict_free(u);
	/* A longer separator that only partly matches is no separator. */
	td_dict_free(f);
	td_cr_assert_ok(td_dict_new(&f, 0, NULL));
	td_cr_assert_ok(td_dict_set_string(f, "a-b", "1"));
	td_cr_assert_ok(td_dict_set_string(f, "a---b", "2"));
	td_cr_assert_ok(td_dict_unflatten_keys(&u, f, "--"));
	cr_assert_eq(td_dict_contains(u, "a-b", 0), 1);
	cr_assert_eq(td_dict_contains(u, "a.-b", 0), 1);
	td_dict_free(u);
	td_dict_free(f);
	td_cr_assert_err(td_dict_flatten_keys(NULL, d, "."), TD_EINVAL);
	td_cr_assert_err(td_dict_flatten_keys(&f, NULL, "."), TD_EINVAL);
	td_cr_assert_err(td_dict_flatten_keys(&f, d, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_unflatten_keys(&f, d, ""), TD_EINVAL);
	td_cr_assert_err(td_dict_unflatten_keys(NULL, d, "."), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_ops, flattened_keys_may_be_long)
{
	td_dict *d, *f;
	const char *keys[2];
	size_t len;
	td_key *k;
	char *longkey = malloc(40001);

	memset(longkey, 'k', 40000);
	longkey[40000] = '\0';
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	k = td_test_key((const char *[]){ longkey, longkey }, 2);
	td_cr_assert_ok(td_dict_set_string_key(d, k, "v"));
	td_key_free(k);
	td_cr_assert_ok(td_dict_set_string(d, "short", "w"));
	td_cr_assert_ok(td_dict_flatten_keys(&f, d, "::"));
	cr_assert_eq(td_dict_items(keys, NULL, 2, f), 2);
	len = strlen(keys[0]);
	cr_assert_eq(len, 80002);
	cr_assert_eq(memcmp(keys[0] + 40000, "::k", 3), 0);
	cr_assert_str_eq(keys[1], "short");
	td_dict_free(f);
	td_dict_free(d);
	free(longkey);
}

Test(dict_ops, unflatten_merges_nested_dicts_with_split_keys)
{
	td_dict *d, *u, *n;

	/* {"a.b": 1, "a": {"c": 2, "x.y": 3}, "a.x.z": 4} */
	td_cr_assert_ok(td_dict_new(&d, 2, B34));
	set_flat_string(d, "a.b", "1");
	td_cr_assert_ok(td_dict_new(&n, 2, B34));
	td_cr_assert_ok(td_dict_set_string(n, "c", "2"));
	set_flat_string(n, "x.y", "3");
	td_cr_assert_ok(td_dict_set_dict_take(d, "a", n));
	set_flat_string(d, "a.x.z", "4");
	td_cr_assert_ok(td_dict_unflatten_keys(&u, d, "."));
	cr_assert_eq(td_dict_len(u), 1);
	cr_assert_eq(td_dict_contains(u, "a.b", TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains(u, "a.c", TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains(u, "a.x.y", TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains(u, "a.x.z", TD_LEAVES_ONLY), 1);
	td_dict_free(u);
	/* A leaf meeting a prefix, in either order and at any depth. */
	td_cr_assert_ok(td_dict_set_string(n, "b", "collides"));
	td_cr_assert_err(td_dict_unflatten_keys(&u, d, "."), TD_EEXISTS);
	cr_assert_null(u);
	td_cr_assert_ok(td_dict_del(n, "b"));
	td_cr_assert_ok(td_dict_set_string(n, "x", "leaf"));
	td_cr_assert_err(td_dict_unflatten_keys(&u, d, "."), TD_EEXISTS);
	td_dict_free(d);
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_dict_set_string(d, "a", "leaf"));
	set_flat_string(d, "a.b", "under a leaf");
	td_cr_assert_err(td_dict_unflatten_keys(&u, d, "."), TD_EEXISTS);
	cr_assert(strstr(td_error_last()->message, "a.b") != NULL, "%s", td_error_last()->message);
	td_dict_free(d);
}

Test(dict_ops, unflatten_refuses_keys_deeper_than_the_limit)
{
	td_dict *d, *u;
	char key[2 * TD_KEY_MAX_DEPTH + 2];
	int i;

	for (i = 0; i <= TD_KEY_MAX_DEPTH; i++) {
		key[2 * i] = 'k';
		key[2 * i + 1] = '/';
	}
	key[2 * TD_KEY_MAX_DEPTH + 1] = '\0';
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_dict_set_string(d, key, "v"));
	td_cr_assert_err(td_dict_unflatten_keys(&u, d, "/"), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "deeper") != NULL, "%s", td_error_last()->message);
	td_cr_assert_ok(td_dict_del(d, key));
	key[2 * TD_KEY_MAX_DEPTH - 1] = '\0';
	td_cr_assert_ok(td_dict_set_string(d, key, "v"));
	td_cr_assert_ok(td_dict_unflatten_keys(&u, d, "/"));
	td_dict_free(u);
	td_dict_free(d);
}

/* ---- apply ---- */

/* Skip leaves named "skip", fail with TD_ERANGE... on "bad", add one elsewhere. */
static int picky(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	int *calls = payload;

	if (calls)
		(*calls)++;
	if (strcmp(item->key, "skip") == 0) {
		/* A result left behind with a skip is released by the caller. */
		td_tensor_ref(out, in);
		return 1;
	}
	if (strcmp(item->key, "bad") == 0)
		return TD_EINDEX;
	if (strcmp(item->key, "none") == 0)
		return 0;
	return td_tensor_binary_scalar(out, in, td_scalar_int(1), TD_OP_ADD);
}

/* {x: 1, n (batch [3,4,2]): {skip: 1, y: 1, m: {skip: 1}}} */
static td_dict *nested_fixture(void)
{
	int64_t b342[] = { 3, 4, 2 };
	td_dict *d, *n;

	td_cr_assert_ok(td_dict_new(&d, 2, B34));
	put_full(d, "x", TD_DTYPE_F32, 2, B34, 1);
	td_cr_assert_ok(td_dict_new(&n, 3, b342));
	put_full(n, "skip", TD_DTYPE_F32, 3, b342, 1);
	put_full(n, "y", TD_DTYPE_F32, 3, b342, 1);
	put_full(n, "m.skip", TD_DTYPE_F32, 3, b342, 1);
	td_cr_assert_ok(td_dict_set_dict_take(d, "n", n));
	return d;
}

Test(dict_ops, apply_skips_and_fails_in_nested_dicts)
{
	td_dict *d = nested_fixture(), *r;
	const td_dict *parent;
	int calls = 0;

	td_cr_assert_ok(td_dict_apply(&r, d, picky, &calls));
	cr_assert_eq(calls, 4);
	cr_assert_eq(val(r, "x"), 2);
	cr_assert_eq(val(r, "n.y"), 2);
	cr_assert_eq(td_dict_contains(r, "n.skip", 0), 0);
	cr_assert_eq(td_dict_contains(r, "n.m", 0), 1, "a dict whose leaves were all skipped stays");
	cr_assert_eq(td_dict_contains(r, "n.m.skip", 0), 0);
	cr_assert_eq(td_dict_batch_ndim(r), 2);
	{
		td_dict *rn;
		td_cr_assert_ok(td_dict_get_dict(&rn, r, "n"));
		cr_assert_eq(td_dict_batch_ndim(rn), 3, "the nested batch keeps its extra dim");
		parent = td_dict_parent(rn);
		cr_assert_eq(parent, r);
	}
	td_dict_free(r);
	td_cr_assert_ok(td_dict_apply_inplace(d, picky, NULL));
	cr_assert_eq(val(d, "n.skip"), 1, "skipped leaves are not written");
	cr_assert_eq(val(d, "n.y"), 2);
	cr_assert_eq(val(d, "x"), 2);
	td_cr_assert_err(td_dict_apply(NULL, d, picky, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_apply(&r, NULL, picky, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_apply_inplace(d, NULL, NULL), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_ops, apply_errors_deep_inside_stop_everything)
{
	td_dict *d = nested_fixture(), *r;
	int64_t b342[] = { 3, 4, 2 };

	/* The callback's code comes back, with a message naming the leaf. */
	put_full(d, "n.m.bad", TD_DTYPE_F32, 3, b342, 1);
	td_cr_assert_err(td_dict_apply(&r, d, picky, NULL), TD_EINDEX);
	cr_assert(strstr(td_error_last()->message, "'bad'") != NULL, "%s", td_error_last()->message);
	cr_assert_null(r);
	td_cr_assert_err(td_dict_apply_inplace(d, picky, NULL), TD_EINDEX);
	td_cr_assert_ok(td_dict_del(d, "n.m.bad"));
	/* A callback that returns 0 without a result gives a bad result. */
	put_full(d, "n.none", TD_DTYPE_F32, 3, b342, 1);
	td_cr_assert_err(td_dict_apply(&r, d, picky, NULL), TD_EINVAL);
	cr_assert_null(r);
	td_cr_assert_err(td_dict_apply_inplace(d, picky, NULL), TD_EINVAL);
	td_dict_free(d);
}

/* Results drop the last batch dim of the nested dict: refused. */
static int shrink(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	(void)payload;
	if (item->depth == 1) {
		td_tensor_ref(out, in);
		return 0;
	}
	return td_tensor_select(out, in, in->ndim - 1, 0);
}

Test(dict_ops, apply_results_must_keep_the_nested_batch)
{
	td_dict *d = nested_fixture(), *r;

	td_cr_assert_err(td_dict_apply(&r, d, shrink, NULL), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "[3, 4, 2]") != NULL, "%s",
		td_error_last()->message);
	td_cr_assert_err(td_dict_apply_inplace(d, shrink, NULL), TD_ETYPE);
	td_dict_free(d);
}

/* ---- elementwise ---- */

Test(dict_ops, binary_ops_keep_longer_nested_batches)
{
	td_dict *a = nested_fixture(), *b = nested_fixture(), *r, *n;
	int64_t s345[] = { 3, 4, 5 }, s341[] = { 3, 4, 1 };

	td_cr_assert_ok(td_dict_binary(&r, a, b, TD_OP_MUL));
	td_cr_assert_ok(td_dict_get_dict(&n, r, "n"));
	cr_assert_eq(td_dict_batch_ndim(n), 3);
	cr_assert_eq(val(r, "n.m.skip"), 1);
	td_dict_free(r);
	/* b's leaf broadcasts to a's. */
	put_full(a, "w", TD_DTYPE_F32, 3, s345, 1);
	put_full(b, "w", TD_DTYPE_F32, 3, s341, 3);
	td_cr_assert_ok(td_dict_binary(&r, a, b, TD_OP_SUB));
	cr_assert_eq(val(r, "w"), -2);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_binary_inplace(a, b, TD_OP_ADD));
	cr_assert_eq(val(a, "w"), 4);
	cr_assert_eq(val(a, "n.y"), 2);
	td_cr_assert_err(td_dict_binary_inplace(b, a, TD_OP_ADD), TD_ETYPE);
	cr_assert_eq(val(b, "n.y"), 1, "nothing was written");
	/* Kinds must match. */
	td_cr_assert_ok(td_dict_set_string(b, "x", "a string"));
	td_cr_assert_err(td_dict_binary(&r, a, b, TD_OP_ADD), TD_ETYPE);
	td_cr_assert_err(td_dict_binary_inplace(a, b, TD_OP_ADD), TD_ETYPE);
	td_cr_assert_ok(td_dict_del(b, "x"));
	put_full(b, "x.inner", TD_DTYPE_F32, 2, B34, 1);
	td_cr_assert_err(td_dict_binary(&r, a, b, TD_OP_ADD), TD_ETYPE);
	td_cr_assert_ok(td_dict_del(b, "x"));
	td_cr_assert_err(td_dict_binary(&r, a, b, TD_OP_ADD), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_binary(NULL, a, b, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_dict_binary(&r, a, NULL, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_dict_binary_scalar(NULL, a, td_scalar_int(1), TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_dict_binary_scalar(&r, a, (td_scalar){ .kind = 42 }, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_dict_binary_inplace(NULL, b, TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_dict_binary_inplace(a, b, (td_binop)99), TD_EINVAL);
	td_cr_assert_err(td_dict_binary_scalar_inplace(NULL, td_scalar_int(1), TD_OP_ADD), TD_EINVAL);
	td_cr_assert_err(td_dict_binary_scalar_inplace(a, td_scalar_int(1), TD_OP_NE), TD_EINVAL);
	td_cr_assert_err(td_dict_binary_scalar_inplace(a, (td_scalar){ .kind = 42 }, TD_OP_ADD),
		TD_EINVAL);
	td_dict_free(a);
	td_dict_free(b);
}

Test(dict_ops, binary_results_must_keep_the_batch)
{
	td_dict *a, *b, *r;
	int64_t b31[] = { 3, 1 }, s311[] = { 3, 1, 1 };

	/* [3, 1] with [3, 1, 1] broadcasts to [3, 3, 1]: not a [3, 1] batch. */
	td_cr_assert_ok(td_dict_new(&a, 2, b31));
	td_cr_assert_ok(td_dict_new(&b, 2, b31));
	put_full(a, "x", TD_DTYPE_F32, 2, b31, 1);
	put_full(b, "x", TD_DTYPE_F32, 3, s311, 1);
	td_cr_assert_err(td_dict_binary(&r, a, b, TD_OP_ADD), TD_ETYPE);
	cr_assert_null(r);
	td_cr_assert_err(td_dict_binary_inplace(a, b, TD_OP_ADD), TD_ETYPE);
	td_cr_assert_err(td_dict_binary(&r, b, a, TD_OP_ADD), TD_ETYPE);
	td_cr_assert_err(td_dict_binary_inplace(b, a, TD_OP_ADD), TD_ETYPE);
	td_dict_free(a);
	td_dict_free(b);
}

Test(dict_ops, in_place_arithmetic_follows_torchs_casting_rules)
{
	td_dict *a, *b;

	td_cr_assert_ok(td_dict_new(&a, 2, B34));
	put_full(a, "f", TD_DTYPE_F32, 2, B34, 1);
	put_full(a, "flag", TD_DTYPE_BOOL, 2, B34, 1);
	td_cr_assert_ok(td_dict_set_string(a, "s", "carried"));
	td_cr_assert_ok(td_dict_del(a, "s")); /* leaves a hole */
	/* bool - anything and anything - bool are refused, before any write. */
	td_cr_assert_err(td_dict_binary_scalar_inplace(a, td_scalar_int(1), TD_OP_SUB), TD_ETYPE);
	td_cr_assert_err(td_dict_binary_scalar_inplace(a, td_scalar_complex(1, 1), TD_OP_ADD),
		TD_ETYPE);
	cr_assert_eq(val(a, "f"), 1);
	td_cr_assert_ok(td_dict_binary_scalar_inplace(a, td_scalar_bool(true), TD_OP_MUL));
	cr_assert_eq(val(a, "flag"), 1);
	td_cr_assert_ok(td_dict_new(&b, 2, B34));
	put_full(b, "f", TD_DTYPE_BOOL, 2, B34, 1);
	put_full(b, "flag", TD_DTYPE_BOOL, 2, B34, 1);
	td_cr_assert_err(td_dict_binary_inplace(a, b, TD_OP_SUB), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "subtraction") != NULL, "%s",
		td_error_last()->message);
	td_cr_assert_ok(td_dict_binary_inplace(a, b, TD_OP_ADD));
	cr_assert_eq(val(a, "f"), 2);
	td_dict_free(b);
	td_dict_free(a);
}

/* td_tensor_binary_inplace() refuses an expanded (stride 0) destination; the
 * dict's check pass must refuse it too, before any leaf is written. */
Test(dict_ops, in_place_arithmetic_with_another_dict_refuses_expanded_leaves)
{
	td_dict *a, *b;
	td_tensor row, wide;

	td_cr_assert_ok(td_dict_new(&a, 2, B34));
	put_full(a, "first", TD_DTYPE_F32, 2, B34, 1);
	td_cr_assert_ok(td_tensor_full(&row, TD_DTYPE_F32, 2, (int64_t[]){ 3, 1 }, td_scalar_float(1)));
	td_cr_assert_ok(td_tensor_expand(&wide, &row, 2, B34));
	td_cr_assert_ok(td_dict_set_tensor_take(a, "expanded", &wide));
	td_tensor_release(&row);
	td_cr_assert_err(td_dict_binary_scalar_inplace(a, td_scalar_int(1), TD_OP_ADD), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "expanded") != NULL, "%s", td_error_last()->message);
	cr_assert_eq(val(a, "first"), 1, "nothing was written");
	td_cr_assert_ok(td_dict_copy(&b, a));
	td_cr_assert_err(td_dict_binary_inplace(a, b, TD_OP_MUL), TD_EINVAL);
	cr_assert_eq(val(a, "first"), 1, "nothing was written");
	/* Out of place, the result is a new tensor: fine. */
	td_dict_free(b);
	td_cr_assert_ok(td_dict_binary_scalar(&b, a, td_scalar_int(1), TD_OP_ADD));
	cr_assert_eq(val(b, "expanded"), 2);
	td_dict_free(b);
	td_dict_free(a);
}

Test(dict_ops, equality_compares_batches_keys_kinds_and_shapes)
{
	td_dict *a = fixture(), *b = fixture(), *c;
	int64_t b3[] = { 3 };

	td_cr_assert_ok(td_dict_new(&c, 1, b3));
	cr_assert_eq(td_dict_equal(a, c), 0, "batch shapes differ");
	td_dict_free(c);
	put_full(b, "extra", TD_DTYPE_F32, 2, B34, 1);
	cr_assert_eq(td_dict_equal(a, b), 0, "key counts differ");
	put_full(a, "other", TD_DTYPE_F32, 2, B34, 1);
	cr_assert_eq(td_dict_equal(a, b), 0, "a key is missing");
	td_cr_assert_ok(td_dict_del(a, "other"));
	td_cr_assert_ok(td_dict_set_string(a, "extra", "x"));
	cr_assert_eq(td_dict_equal(a, b), 0, "kinds differ");
	td_cr_assert_ok(td_dict_del(a, "extra"));
	td_cr_assert_ok(td_dict_del(b, "extra"));
	cr_assert_eq(td_dict_equal(a, b), 1, "holes do not matter");
	put_full(b, "b.b1", TD_DTYPE_F32, 2, B34, 2);
	cr_assert_eq(td_dict_equal(a, b), 0, "leaf shapes differ");
	cr_assert_eq(td_dict_allclose(a, b, 1, 1, false), 0, "leaf shapes differ");
	td_cr_assert_err(td_dict_allclose(NULL, b, 0, 0, false), TD_EINVAL);
	td_cr_assert_err(td_dict_allclose(a, b, 0, 0.0 / 0.0, false), TD_EINVAL);
	td_cr_assert_err(td_dict_equal(NULL, b), TD_EINVAL);
	td_dict_free(a);
	td_dict_free(b);
}

Test(dict_ops, copies_refuse_null_arguments)
{
	td_dict *d = fixture(), *r;

	td_cr_assert_err(td_dict_copy(NULL, d), TD_EINVAL);
	td_cr_assert_err(td_dict_copy(&r, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_clone(NULL, d), TD_EINVAL);
	td_cr_assert_err(td_dict_clone(&r, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_empty(&r, NULL, false), TD_EINVAL);
	td_dict_free(d);
}

/* ---- holes left by deletions ---- */

/* nested_fixture() with a deleted entry in the middle of the root and of "n". */
static td_dict *holey_fixture(void)
{
	td_dict *d = nested_fixture();
	int64_t b342[] = { 3, 4, 2 };

	td_cr_assert_ok(td_dict_del(d, "x"));
	put_full(d, "x", TD_DTYPE_F32, 2, B34, 1);
	td_cr_assert_ok(td_dict_del(d, "n.skip"));
	put_full(d, "n.skip", TD_DTYPE_F32, 3, b342, 1);
	return d;
}

Test(dict_ops, every_operation_skips_holes)
{
	td_dict *a = holey_fixture(), *b = holey_fixture(), *r, *o;

	td_cr_assert_ok(td_dict_apply(&r, a, picky, NULL));
	cr_assert_eq(val(r, "x"), 2);
	td_dict_free(r);
	td_cr_assert_ok(td_dict_binary(&r, a, b, TD_OP_ADD));
	cr_assert_eq(val(r, "n.skip"), 2);
	td_dict_free(r);
	cr_assert_eq(td_dict_equal(a, b), 1);
	td_cr_assert_ok(td_dict_binary_inplace(a, b, TD_OP_ADD));
	td_cr_assert_ok(td_dict_binary_scalar_inplace(a, td_scalar_int(1), TD_OP_ADD));
	cr_assert_eq(val(a, "n.y"), 3);
	td_cr_assert_ok(td_dict_update_inplace(a, b));
	cr_assert_eq(val(a, "n.y"), 1);
	td_cr_assert_ok(td_dict_zero(b));
	cr_assert_eq(val(b, "x"), 0);
	td_cr_assert_ok(td_dict_flatten_keys(&r, a, "."));
	cr_assert_eq(td_dict_len(r), 4);
	td_cr_assert_ok(td_dict_unflatten_keys(&o, r, "."));
	/* Nested dicts come back with their parent's batch (as tensordict). */
	cr_assert_eq(td_dict_contains(o, "n.m.skip", TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains(o, "n.skip", TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_batch_ndim(o), 2);
	td_dict_free(o);
	td_dict_free(r);
	td_dict_free(a);
	td_dict_free(b);
}

Test(dict_ops, unflatten_merges_dicts_met_at_several_levels)
{
	td_dict *d, *n, *u;

	/* {"a.x.z": 1, "a": {"x": {"y": 2}}}: 'a' and then 'a.x' meet twice. */
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	set_flat_string(d, "a.x.z", "1");
	td_cr_assert_ok(td_dict_new(&n, 0, NULL));
	td_cr_assert_ok(td_dict_set_string(n, "x.y", "2"));
	td_cr_assert_ok(td_dict_set_dict_take(d, "a", n));
	td_cr_assert_ok(td_dict_unflatten_keys(&u, d, "."));
	cr_assert_eq(td_dict_contains(u, "a.x.y", TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains(u, "a.x.z", TD_LEAVES_ONLY), 1);
	td_dict_free(u);
	/* ... and collide below. */
	td_cr_assert_ok(td_dict_set_string(n, "x.z", "3"));
	td_cr_assert_err(td_dict_unflatten_keys(&u, d, "."), TD_EEXISTS);
	cr_assert(strstr(td_error_last()->message, "'z'") != NULL, "%s", td_error_last()->message);
	td_dict_free(d);
}

/* ---- allocation failures ---- */

typedef struct ops_ctx {
	td_dict *src, *out[6];
} ops_ctx;

static int ops_body(void *arg)
{
	ops_ctx *c = arg;
	const char *keys[] = { "b.b1", "s" };
	int rc, i;

	for (i = 0; i < 6; i++)
		c->out[i] = NULL;
	rc = td_dict_clone(&c->out[0], c->src);
	if (rc == 0)
		rc = td_dict_select(&c->out[1], c->src, keys, 2, true);
	if (rc == 0)
		rc = td_dict_exclude(&c->out[2], c->src, keys, 1);
	if (rc == 0)
		rc = td_dict_flatten_keys(&c->out[3], c->src, ".");
	if (rc == 0)
		rc = td_dict_unflatten_keys(&c->out[4], c->out[3], ".");
	if (rc == 0)
		rc = td_dict_binary_scalar(&c->out[5], c->src, td_scalar_int(3), TD_OP_ADD);
	if (rc < 0)
		for (i = 0; i < 6; i++)
			td_dict_free(c->out[i]);
	return rc;
}

static void ops_cleanup(void *arg)
{
	ops_ctx *c = arg;
	int i;

	for (i = 0; i < 6; i++)
		td_dict_free(c->out[i]);
}

Test(dict_ops, allocation_failures_are_reported_and_leak_nothing)
{
	ops_ctx c;

	c.src = fixture();
	td_test_enomem_sweep(ops_body, ops_cleanup, &c);
	td_dict_free(c.src);
}

Test(dict_ops, in_place_arithmetic_refuses_expanded_leaves_before_writing)
{
	td_dict *d = fixture();
	td_tensor one, wide;
	int64_t s1[] = { 1 }, s34[] = { 3, 4 };

	td_cr_assert_ok(td_tensor_zeros(&one, TD_DTYPE_F32, 1, s1));
	td_cr_assert_ok(td_tensor_expand(&wide, &one, 2, s34));
	td_tensor_release(&one);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "z_expanded", &wide));
	td_cr_assert_err(td_dict_binary_scalar_inplace(d, td_scalar_float(1), TD_OP_ADD), TD_EINVAL);
	cr_assert_eq(val(d, "a"), 1, "the leaves before the expanded one are unchanged");
	cr_assert_eq(val(d, "b.b1"), 2);
	td_dict_free(d);
}

Test(dict_ops, renaming_a_key_to_itself_changes_nothing)
{
	td_dict *d = fixture();
	const char *keys[4];

	td_cr_assert_ok(td_dict_rename(d, "b.b1", "b.b1"));
	cr_assert_eq(td_dict_contains(d, "b.b1", 0), 1);
	td_cr_assert_ok(td_dict_rename(d, "a", "a"));
	cr_assert_eq(td_dict_items(keys, NULL, 4, d), 3);
	cr_assert_str_eq(keys[0], "a");
	td_dict_free(d);
}

typedef struct more_ops_ctx {
	td_dict *src, *out[8];
	td_key *keys[2];
} more_ops_ctx;

static int more_ops_body(void *arg)
{
	more_ops_ctx *c = arg;
	int calls = 0, rc, i;

	for (i = 0; i < 8; i++)
		c->out[i] = NULL;
	rc = td_dict_copy(&c->out[0], c->src);
	if (rc == 0)
		rc = td_dict_empty(&c->out[1], c->src, true);
	if (rc == 0)
		rc = td_dict_apply(&c->out[2], c->src, picky, &calls);
	if (rc == 0)
		rc = td_dict_binary(&c->out[3], c->src, c->out[0], TD_OP_ADD);
	if (rc == 0)
		rc = td_dict_select_keys(&c->out[4], c->src, (const td_key *const *)c->keys, 2, true);
	if (rc == 0)
		rc = td_dict_exclude_keys(&c->out[5], c->src, (const td_key *const *)c->keys, 2);
	if (rc == 0)
		rc = td_dict_flatten_keys(&c->out[6], c->src, "--");
	/* Update a fresh copy (the sweep must not free what existed before it). */
	if (rc == 0)
		rc = td_dict_empty(&c->out[7], c->src, false);
	if (rc == 0)
		rc = td_dict_update(c->out[7], c->src);
	if (rc == 0)
		rc = td_dict_update(c->out[7], c->out[2]);
	if (rc == 0)
		rc = td_dict_apply_inplace(c->out[7], picky, NULL);
	if (rc == 0)
		rc = td_dict_binary_inplace(c->out[7], c->out[7], TD_OP_MUL);
	if (rc < 0)
		for (i = 0; i < 8; i++)
			td_dict_free(c->out[i]);
	return rc;
}

static void more_ops_cleanup(void *arg)
{
	more_ops_ctx *c = arg;
	int i;

	cr_assert_eq(td_dict_len(c->out[6]), 4);
	cr_assert_eq(val(c->out[7], "x"), 9, "x: 1 + 1 = 2, then + 1, then squared");
	for (i = 0; i < 8; i++)
		td_dict_free(c->out[i]);
}

Test(dict_ops, more_allocation_failures_are_reported_and_leak_nothing)
{
	more_ops_ctx c;

	c.src = nested_fixture();
	td_cr_assert_ok(td_key_new(&c.keys[0], "n.y"));
	td_cr_assert_ok(td_key_new(&c.keys[1], "x"));
	td_test_enomem_sweep(more_ops_body, more_ops_cleanup, &c);
	td_key_free(c.keys[0]);
	td_key_free(c.keys[1]);
	td_dict_free(c.src);
}

typedef struct unflatten_ctx {
	td_dict *src, *out;
} unflatten_ctx;

static int unflatten_body(void *arg)
{
	unflatten_ctx *c = arg;

	c->out = NULL;
	return td_dict_unflatten_keys(&c->out, c->src, ".");
}

static void unflatten_cleanup(void *arg)
{
	unflatten_ctx *c = arg;

	cr_assert_eq(td_dict_contains(c->out, "a.x.z", 0), 1);
	cr_assert_eq(td_dict_contains(c->out, "p.n.leaf", 0), 1);
	td_dict_free(c->out);
}

Test(dict_ops, unflatten_merges_leak_nothing_on_allocation_failures)
{
	unflatten_ctx c;
	td_dict *n;

	td_cr_assert_ok(td_dict_new(&c.src, 2, B34));
	set_flat_string(c.src, "a.b", "1");
	td_cr_assert_ok(td_dict_new(&n, 2, B34));
	td_cr_assert_ok(td_dict_set_string(n, "c", "2"));
	set_flat_string(n, "x.y", "3");
	put_full(n, "t", TD_DTYPE_F32, 2, B34, 1);
	td_cr_assert_ok(td_dict_set_dict_take(c.src, "a", n));
	set_flat_string(c.src, "a.x.z", "4");
	/* A dict value stored into a dict the split keys made (which must grow). */
	set_flat_string(c.src, "p.a", "5");
	td_cr_assert_ok(td_dict_new(&n, 2, B34));
	td_cr_assert_ok(td_dict_set_string(n, "leaf", "6"));
	td_cr_assert_ok(td_dict_set_dict_take(c.src, "p.n", n));
	td_test_enomem_sweep(unflatten_body, unflatten_cleanup, &c);
	td_dict_free(c.src);
}
