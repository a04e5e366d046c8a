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

static double val(const td_dict *d, const char *key)
{
	const td_tensor *t;
	td_scalar s;
	int64_t zero[TD_MAX_DIMS] = { 0 };

	td_cr_assert_ok(td_dict_get_tensor(d, key, &t));
	td_cr_assert_ok(td_tensor_get(t, zero, &s));
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

	td_cr_assert_ok(td_dict_get_tensor(d, key, &t));
	return t;
}

Test(dict_ops, copy_shares_buffers_and_clone_copies_them)
{
	td_dict *d = fixture(), *c, *k;

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
	td_cr_assert_err(td_dict_clone(&c, NULL), TD_EINVAL);
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
	cr_assert_eq(td_dict_items(s, out, NULL, 4), 2);
	cr_assert_str_eq(out[0], "b");
	cr_assert_str_eq(out[1], "s");
	cr_assert_eq(tensor(s, "b.b1")->buffer, tensor(d, "b.b1")->buffer);
	td_dict_free(s);
	td_cr_assert_err(td_dict_select(&s, d, keys, 3, true), TD_ENOTFOUND);
	cr_assert_null(s);
	cr_assert(strstr(td_error_last()->message, "zzz") != NULL);
	td_cr_assert_err(td_dict_select(&s, d, (const char *[]){ "a.x" }, 1, true),
		TD_ENOTFOUND);
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

	td_cr_assert_ok(td_dict_flatten_keys(&f, d, "."));
	cr_assert_eq(td_dict_items(f, keys, NULL, 4), 3);
	cr_assert_str_eq(keys[0], "a");
	cr_assert_str_eq(keys[1], "b.b1");
	cr_assert_str_eq(keys[2], "s");
	cr_assert_eq(td_dict_contains_path(f, (const char *[]){ "b.b1" }, 1, 0), 1);
	td_cr_assert_ok(td_dict_unflatten_keys(&u, f, "."));
	cr_assert_eq(td_dict_equal(u, d), 1);
	td_dict_free(u);
	td_dict_free(f);
	td_cr_assert_ok(td_dict_flatten_keys(&f, d, "::"));
	cr_assert_eq(td_dict_contains_path(f, (const char *[]){ "b::b1" }, 1, 0), 1);
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
	td_cr_assert_ok(td_dict_set_tensor_path(d, (const char *[]){ "a.b" }, 1,
		tensor(d, "a.b")));
	td_cr_assert_err(td_dict_flatten_keys(&f, d, "."), TD_EEXISTS);
	cr_assert_null(f);
	td_cr_assert_err(td_dict_unflatten_keys(&f, d, "."), TD_EEXISTS);
	td_cr_assert_err(td_dict_flatten_keys(&f, d, ""), TD_EINVAL);
	td_cr_assert_err(td_dict_unflatten_keys(&f, d, NULL), TD_EINVAL);
	td_dict_free(d);
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_dict_set_string_path(d, (const char *[]){ "x..y" }, 1, "v"));
	td_cr_assert_err(td_dict_unflatten_keys(&f, d, "."), TD_EINVAL);
	td_dict_free(d);
}

Test(dict_ops, unflatten_merges_prefixes_into_one_dict)
{
	td_dict *d, *u;
	const char *keys[4];

	td_cr_assert_ok(td_dict_new(&d, 2, B34));
	td_cr_assert_ok(td_dict_set_string_path(d, (const char *[]){ "a.x" }, 1, "1"));
	td_cr_assert_ok(td_dict_set_string_path(d, (const char *[]){ "b" }, 1, "2"));
	td_cr_assert_ok(td_dict_set_string_path(d, (const char *[]){ "a.y.z" }, 1, "3"));
	td_cr_assert_ok(td_dict_unflatten_keys(&u, d, "."));
	cr_assert_eq(td_dict_items(u, keys, NULL, 4), 2);
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
	td_cr_assert_err(td_dict_binary_scalar_inplace(a, td_scalar_float(0.5), TD_OP_ADD),
		TD_ETYPE);
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
	td_cr_assert_err(td_dict_binary_scalar_inplace(d, td_scalar_int(1), TD_OP_ADD),
		TD_EREADONLY);
	cr_assert_eq(val(d, "a"), 1);
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
	td_cr_assert_err(td_dict_binary_scalar_inplace(d, td_scalar_float(1), TD_OP_ADD),
		TD_EINVAL);
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
	cr_assert_eq(td_dict_items(d, keys, NULL, 4), 3);
	cr_assert_str_eq(keys[0], "a");
	td_dict_free(d);
}
