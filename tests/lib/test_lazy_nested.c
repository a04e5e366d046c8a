/* SPDX-License-Identifier: MIT */
/*
 * test_lazy_nested.c - lazy stacks stored as values of dense dicts
 * (tensordict's TensorDict({"z": LazyStackedTensorDict(...)})). Every
 * operation is checked against a dense reference: the same dict whose "z"
 * is td_lazy_densify() of the stack. Operations that do not reach into a
 * nested stack must refuse with TD_ENOTSUP and leave the dict unchanged.
 */
#include "td_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The stack (of td_test_lazy_ref(0)): children of batch [2] (sd 0) stacked at dim 0 to [3, 2], or
 * children of batch [3] stacked at dim 1 to [3, 2] (sd 1); leaves "a" f32
 * [3, 2, 4], "n.b" i64 [3, 2], "n.m.c" f64 [3, 2, 2] and the string "s".
 * The dict: batch [3], "t" i32 [3, 5], "u.v" f32 [3] and "z" the stack.
 */
typedef struct fixture {
	td_dict *inner; /* the dense form of the stack */
	td_dict *dict;  /* holds the stack under "z" */
	td_dict *ref;   /* holds td_lazy_densify() of it under "z" */
	int sd;
} fixture;

/* A lazy stack of (owned) pieces of `inner` along sd, equal to it. */
static td_dict *make_stack(const td_dict *inner, int sd)
{
	td_dict **parts, **copies, *s;
	size_t n, i;

	td_cr_assert_ok(td_dict_unbind(&parts, &n, inner, sd));
	copies = calloc(n, sizeof(*copies));
	cr_assert(copies);
	for (i = 0; i < n; i++)
		td_cr_assert_ok(td_dict_clone(&copies[i], parts[i]));
	td_cr_assert_ok(td_lazy_stack(&s, copies, n, sd, TD_LAZY_TAKE));
	free(copies);
	td_dict_array_free(parts, n);
	return s;
}

static td_dict *make_outer(void)
{
	int64_t b = 3, st[2] = { 3, 5 };
	td_tensor t, v;
	td_dict *d;

	td_cr_assert_ok(td_dict_new(&d, 1, &b));
	td_test_arange(&t, TD_DTYPE_I32, 2, st);
	td_test_arange(&v, TD_DTYPE_F32, 1, &b);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "t", &t));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "u.v", &v));
	return d;
}

static void fixture_make(fixture *f, int sd)
{
	td_dict *dense, *stack;

	f->sd = sd;
	f->inner = td_test_lazy_ref(0);
	stack = make_stack(f->inner, sd);
	cr_assert(td_dict_is_lazy(stack));
	f->dict = make_outer();
	f->ref = make_outer();
	td_cr_assert_ok(td_dict_set_dict_take(f->dict, "z", stack));
	td_cr_assert_ok(td_lazy_densify(&dense, stack));
	td_cr_assert_ok(td_dict_set_dict_take(f->ref, "z", dense));
}

static void fixture_free(fixture *f)
{
	td_dict_free(f->dict);
	td_dict_free(f->ref);
	td_dict_free(f->inner);
}

static td_dict *get_z(const td_dict *d)
{
	td_dict *z = NULL;

	td_cr_assert_ok(td_dict_get_dict(&z, d, "z"));
	return z;
}

/* The leaf at `key` of the reference (borrowed) equals the stacked one of the dict. */
static void assert_leaf(const fixture *f, const char *key)
{
	const td_tensor *want;
	td_tensor got = TD_TENSOR_INIT;

	td_cr_assert_ok(td_dict_get_tensor(&want, f->ref, key));
	td_cr_assert_ok(td_lazy_get_tensor(&got, f->dict, key));
	cr_assert_eq(td_tensor_equal(&got, want), 1, "'%s' differs from the reference", key);
	td_tensor_release(&got);
}

/* A dict (dense, possibly holding stacks) equals a dense one, and not a changed copy. */
static void assert_same(const td_dict *dense, const td_dict *d)
{
	cr_assert_eq(td_dict_equal(dense, d), 1, "the result differs from the reference");
	cr_assert_eq(td_dict_equal(d, dense), 1, "equality is not symmetric");
}

static const char *last_message(void)
{
	return td_error_last()->message;
}

/* ------------------------------------------------------------------------ */

Test(lazy_nested, stored_as_a_value)
{
	for (int sd = 0; sd < 2; sd++) {
		fixture f;
		td_dict *z;
		const td_value *v;

		fixture_make(&f, sd);
		z = get_z(f.dict);
		cr_assert(td_dict_is_lazy(z));
		cr_assert_eq(td_dict_parent(z), f.dict);
		cr_assert_eq(td_lazy_count(z), sd == 0 ? 3u : 2u);
		cr_assert_eq(td_lazy_stack_dim(z), sd);
		td_cr_assert_ok(td_dict_get(&v, f.dict, "z"));
		cr_assert_eq(v->kind, TD_VALUE_DICT);
		cr_assert_eq(v->dict, z);
		cr_assert_eq(td_dict_len(f.dict), 3u);
		/* td_dict_free() of a stack that belongs to a dict does nothing. */
		td_dict_free(z);
		cr_assert(td_dict_is_lazy(get_z(f.dict)));
		assert_same(f.ref, f.dict);
		fixture_free(&f);
	}
}

Test(lazy_nested, set_dict_copies_the_stack)
{
	fixture f;
	td_dict *d, *z, *z2;
	int64_t b = 3;

	fixture_make(&f, 0);
	z = get_z(f.dict);
	td_cr_assert_ok(td_dict_new(&d, 1, &b));
	td_cr_assert_ok(td_dict_set_dict(d, "w.z", z));
	td_cr_assert_ok(td_dict_get_dict(&z2, d, "w.z"));
	cr_assert(td_dict_is_lazy(z2));
	cr_assert_neq(z2, z);
	/* A shallow copy: a new child key does not reach the original. */
	td_cr_assert_ok(td_dict_set_string(z2, "extra", "x"));
	cr_assert_eq(td_dict_contains(z2, "extra", 0), 1);
	cr_assert_eq(td_dict_contains(z, "extra", 0), 0);
	td_dict_free(d);
	fixture_free(&f);
}

Test(lazy_nested, batch_shape_must_start_with_the_parent)
{
	td_dict *inner = td_test_lazy_ref(0), *stack = make_stack(inner, 0), *d;
	int64_t b = 2, b2[2] = { 3, 3 };

	/* The stack is [3, 2]: a parent of batch [2] does not fit it. */
	td_cr_assert_ok(td_dict_new(&d, 1, &b));
	td_cr_assert_err(td_dict_set_dict_take(d, "z", stack), TD_ETYPE);
	td_cr_assert_err(td_dict_set_dict(d, "z", stack), TD_ETYPE);
	cr_assert_eq(td_dict_len(d), 0u);
	td_dict_free(d);
	td_cr_assert_ok(td_dict_new(&d, 2, b2));
	td_cr_assert_err(td_dict_set_dict_take(d, "z", stack), TD_ETYPE);
	td_dict_free(d);
	/* A stack cannot be stored inside a lazy stack (its leaves can). */
	td_cr_assert_err(td_dict_set_dict(stack, "q", inner), TD_ENOTSUP);
	/* The stack was not taken by the failed calls. */
	cr_assert_null(td_dict_parent(stack));
	td_dict_free(stack);
	td_dict_free(inner);
}

Test(lazy_nested, dotted_reads_stack_like_the_reference)
{
	for (int sd = 0; sd < 2; sd++) {
		fixture f;
		td_dict *sub = NULL, *dn = NULL, *want;
		const td_tensor *t;
		td_tensor *list = NULL, got = TD_TENSOR_INIT;
		size_t count = 0;
		td_key *k;

		fixture_make(&f, sd);
		assert_leaf(&f, "z.a");
		assert_leaf(&f, "z.n.b");
		assert_leaf(&f, "z.n.m.c");
		/* A key handle names the same leaf. */
		td_cr_assert_ok(td_key_new(&k, "z.n.m.c"));
		td_cr_assert_ok(td_lazy_get_tensor_key(&got, f.dict, k));
		td_cr_assert_ok(td_dict_get_tensor(&t, f.ref, "z.n.m.c"));
		cr_assert_eq(td_tensor_equal(&got, t), 1);
		td_tensor_release(&got);
		td_key_free(k);
		/* The sub-dict of the stack, as a stack. */
		td_cr_assert_ok(td_lazy_get_dict(&sub, f.dict, "z.n"));
		cr_assert(td_dict_is_lazy(sub));
		td_cr_assert_ok(td_lazy_densify(&dn, sub));
		td_cr_assert_ok(td_dict_get_dict(&want, f.ref, "z.n"));
		cr_assert_eq(td_dict_equal(dn, want), 1);
		td_dict_free(dn);
		td_dict_free(sub);
		/* The list form: one leaf per child. */
		td_cr_assert_ok(td_lazy_get_list(&list, &count, f.dict, "z.a"));
		cr_assert_eq(count, td_lazy_count(get_z(f.dict)));
		td_tensor_array_free(list, count);
		/* Borrowed lookups cannot lend a stacked leaf: refused, pointing the way. */
		td_cr_assert_err(td_dict_get_tensor(&t, f.dict, "z.a"), TD_ENOTSUP);
		cr_assert(strstr(last_message(), "td_lazy_get_tensor") != NULL, "%s", last_message());
		td_cr_assert_err(td_dict_get_dict(&sub, f.dict, "z.n"), TD_ENOTSUP);
		/* Missing keys are still reported as missing. */
		td_cr_assert_err(td_lazy_get_tensor(&got, f.dict, "z.nope"), TD_ENOTFOUND);
		/* A path that does not lead into a stack is not one. */
		td_cr_assert_err(td_lazy_get_tensor(&got, f.dict, "u.v"), TD_EINVAL);
		td_cr_assert_err(td_lazy_get_tensor(&got, f.dict, "t"), TD_EINVAL);
		fixture_free(&f);
	}
}

Test(lazy_nested, contains_reaches_into_the_stack)
{
	fixture f;
	const char *const path[3] = { "z", "n", "m" };
	td_key *k;

	fixture_make(&f, 0);
	cr_assert_eq(td_dict_contains(f.dict, "z", 0), 1);
	cr_assert_eq(td_dict_contains(f.dict, "z", TD_LEAVES_ONLY), 0);
	cr_assert_eq(td_dict_contains(f.dict, "z.a", TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains(f.dict, "z.n.m.c", 0), 1);
	cr_assert_eq(td_dict_contains(f.dict, "z.n", TD_LEAVES_ONLY), 0);
	cr_assert_eq(td_dict_contains(f.dict, "z.n", 0), 1);
	cr_assert_eq(td_dict_contains(f.dict, "z.q", 0), 0);
	k = td_test_key(path, 3);
	cr_assert_eq(td_dict_contains_key(f.dict, k, 0), 1);
	td_key_free(k);
	td_cr_assert_ok(td_key_new(&k, "z.n.b"));
	cr_assert_eq(td_dict_contains_key(f.dict, k, TD_LEAVES_ONLY), 1);
	td_key_free(k);
	fixture_free(&f);
}

Test(lazy_nested, writes_go_through_the_stack)
{
	for (int sd = 0; sd < 2; sd++) {
		fixture f;
		int64_t shape[3] = { 3, 2, 7 };
		td_tensor t, got = TD_TENSOR_INIT, ones;
		const td_tensor *r;
		const char *const path[2] = { "z", "w" };
		td_key *k;

		fixture_make(&f, sd);
		td_test_arange(&t, TD_DTYPE_F64, 3, shape);
		td_cr_assert_ok(td_dict_set_tensor(f.dict, "z.new.x", &t));
		td_cr_assert_ok(td_dict_set_tensor(f.ref, "z.new.x", &t));
		assert_leaf(&f, "z.new.x");
		k = td_test_key(path, 2);
		td_cr_assert_ok(td_dict_set_tensor_key(f.dict, k, &t));
		td_key_free(k);
		td_cr_assert_ok(td_dict_set_tensor(f.ref, "z.w", &t));
		td_cr_assert_ok(td_key_new(&k, "z.kk"));
		td_cr_assert_ok(td_dict_set_tensor_key(f.dict, k, &t));
		td_cr_assert_ok(td_dict_set_tensor_key(f.ref, k, &t));
		td_key_free(k);
		assert_same(f.ref, f.dict);
		/* In place: the children's leaves are written. */
		td_cr_assert_ok(td_tensor_full(&ones, TD_DTYPE_F64, 3, shape, td_scalar_float(1.0)));
		td_cr_assert_ok(td_dict_set_tensor_inplace(f.dict, "z.new.x", &ones));
		td_cr_assert_ok(td_dict_set_tensor_inplace(f.ref, "z.new.x", &ones));
		assert_leaf(&f, "z.new.x");
		td_cr_assert_ok(td_lazy_get_tensor(&got, f.dict, "z.new.x"));
		td_cr_assert_ok(td_dict_get_tensor(&r, f.ref, "z.new.x"));
		cr_assert_eq(td_tensor_equal(&got, &ones), 1);
		td_tensor_release(&got);
		/* Non-tensor leaves. */
		td_cr_assert_ok(td_dict_set_string(f.dict, "z.str", "hi"));
		td_cr_assert_ok(td_dict_set_string(f.ref, "z.str", "hi"));
		assert_same(f.ref, f.dict);
		/* A batch that does not fit the stack is refused. */
		shape[1] = 5;
		td_tensor_release(&t);
		td_test_arange(&t, TD_DTYPE_F64, 3, shape);
		td_cr_assert_err(td_dict_set_tensor(f.dict, "z.bad", &t), TD_ETYPE);
		cr_assert_eq(td_dict_contains(f.dict, "z.bad", 0), 0);
		/* Deleting. */
		td_cr_assert_ok(td_dict_del(f.dict, "z.new.x"));
		td_cr_assert_ok(td_dict_del(f.ref, "z.new.x"));
		cr_assert_eq(td_dict_contains(f.dict, "z.new.x", 0), 0);
		td_cr_assert_err(td_dict_del(f.dict, "z.new.x"), TD_ENOTFOUND);
		assert_same(f.ref, f.dict);
		/* Renames do not reach into the stack. */
		td_cr_assert_err(td_dict_rename(f.dict, "z.a", "z.a2"), TD_ENOTSUP);
		td_cr_assert_err(td_dict_rename(f.dict, "t", "z.t"), TD_ENOTSUP);
		assert_same(f.ref, f.dict);
		/* The stack itself can be renamed or deleted as a value. */
		td_cr_assert_ok(td_dict_rename(f.dict, "z", "y"));
		td_cr_assert_ok(td_dict_rename(f.ref, "z", "y"));
		assert_same(f.ref, f.dict);
		td_cr_assert_ok(td_dict_del(f.dict, "y"));
		cr_assert_eq(td_dict_len(f.dict), 2u);
		td_tensor_release(&t);
		td_tensor_release(&ones);
		fixture_free(&f);
	}
}

Test(lazy_nested, lock_reaches_the_children)
{
	fixture f;
	int64_t shape[2] = { 3, 2 };
	td_tensor t;
	td_dict *z;

	fixture_make(&f, 0);
	td_test_arange(&t, TD_DTYPE_I64, 2, shape);
	td_cr_assert_ok(td_dict_lock(f.dict));
	z = get_z(f.dict);
	cr_assert(td_dict_is_locked(z));
	cr_assert(td_dict_is_locked(td_lazy_child(z, 1)));
	td_cr_assert_err(td_dict_set_tensor(f.dict, "z.fresh", &t), TD_ELOCKED);
	td_cr_assert_err(td_dict_del(f.dict, "z.a"), TD_ELOCKED);
	/* An existing leaf is written in place, as in a locked dense dict. */
	td_cr_assert_ok(td_dict_set_tensor(f.dict, "z.n.b", &t));
	td_cr_assert_ok(td_dict_unlock(f.dict));
	cr_assert(!td_dict_is_locked(td_lazy_child(z, 1)));
	td_cr_assert_ok(td_dict_set_tensor(f.ref, "z.n.b", &t));
	assert_same(f.ref, f.dict);
	td_tensor_release(&t);
	fixture_free(&f);
}

/* The leaves of a nested walk, as "key=sum" strings in order. */
static size_t walk(const td_dict *d, unsigned flags, char out[][64], size_t cap)
{
	td_dict_iter *it;
	td_item item;
	size_t n = 0;
	int rc;

	td_cr_assert_ok(td_dict_iter_new(&it, d, flags));
	while ((rc = td_dict_iter_next(&item, it)) == 1) {
		char key[48] = "";
		size_t i;

		for (i = 0; i < item.depth; i++) {
			if (i)
				strcat(key, ".");
			strncat(key, item.path[i], sizeof(key) - strlen(key) - 2);
		}
		cr_assert_str_eq(item.key, item.path[item.depth - 1]);
		cr_assert_lt(n, cap);
		if (item.value && item.value->kind == TD_VALUE_TENSOR) {
			td_tensor c = TD_TENSOR_INIT;
			const double *x;
			double v = 0;
			int64_t j, numel;

			/* A contiguous float64 copy, summed with position weights. */
			td_cr_assert_ok(td_tensor_to_dtype(&c, &item.value->tensor, TD_DTYPE_F64));
			cr_assert(td_tensor_is_contiguous(&c));
			x = td_tensor_data(&c);
			numel = td_tensor_numel(&c);
			for (j = 0; j < numel; j++)
				v += x[j] * (double)(j + 1);
			snprintf(out[n], 64, "%s=%g", key, v);
			td_tensor_release(&c);
		} else {
			snprintf(out[n], 64, "%s", key);
		}
		n++;
	}
	cr_assert_eq(rc, 0);
	td_dict_iter_free(it);
	return n;
}

Test(lazy_nested, iteration_reaches_the_leaves)
{
	static const unsigned flags[] = { TD_ITER_NESTED | TD_ITER_LEAVES_ONLY, TD_ITER_NESTED,
		TD_ITER_NESTED | TD_ITER_KEYS_ONLY, 0 };

	for (int sd = 0; sd < 2; sd++) {
		for (size_t fi = 0; fi < TD_TEST_ARRAY_LEN(flags); fi++) {
			char a[32][64], b[32][64];
			size_t na, nb, i;
			fixture f;

			fixture_make(&f, sd);
			na = walk(f.ref, flags[fi], a, 32);
			nb = walk(f.dict, flags[fi], b, 32);
			cr_assert_eq(na, nb, "flags 0x%x: %zu items, the reference %zu", flags[fi], nb, na);
			for (i = 0; i < na; i++)
				cr_assert_str_eq(b[i], a[i], "flags 0x%x, item %zu", flags[fi], i);
			if (flags[fi] == (TD_ITER_NESTED | TD_ITER_LEAVES_ONLY))
				cr_assert_eq(na, 6u); /* t, u.v, z.a, z.n.b, z.n.m.c, z.s */
			fixture_free(&f);
		}
	}
}

Test(lazy_nested, iterator_reset_and_early_free)
{
	fixture f;
	td_dict_iter *it;
	td_item item;

	fixture_make(&f, 0);
	td_cr_assert_ok(td_dict_iter_new(&it, f.dict, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY));
	/* Into the stack, then reset, then freed inside it: nothing leaks. */
	for (int i = 0; i < 3; i++)
		cr_assert_eq(td_dict_iter_next(&item, it), 1);
	cr_assert_eq(item.depth, 2u);
	cr_assert_str_eq(item.path[0], "z");
	cr_assert_str_eq(item.key, "a");
	td_dict_iter_reset(it);
	cr_assert_eq(td_dict_iter_next(&item, it), 1);
	cr_assert_str_eq(item.key, "t");
	for (int i = 0; i < 3; i++)
		cr_assert_eq(td_dict_iter_next(&item, it), 1);
	td_dict_iter_free(it);
	fixture_free(&f);
}

Test(lazy_nested, copy_and_clone)
{
	fixture f;
	td_dict *c, *k, *z;
	int64_t shape[3] = { 3, 2, 4 };
	td_tensor zero;

	fixture_make(&f, 1);
	td_cr_assert_ok(td_dict_copy(&c, f.dict));
	td_cr_assert_ok(td_dict_clone(&k, f.dict));
	z = get_z(c);
	cr_assert(td_dict_is_lazy(z));
	cr_assert(td_dict_is_lazy(get_z(k)));
	cr_assert_neq(z, get_z(f.dict));
	assert_same(f.ref, c);
	assert_same(f.ref, k);
	/* The copy shares the leaves, the clone does not. */
	td_cr_assert_ok(td_tensor_zeros(&zero, TD_DTYPE_F32, 3, shape));
	td_cr_assert_ok(td_dict_set_tensor_inplace(f.dict, "z.a", &zero));
	cr_assert_eq(td_dict_equal(f.ref, k), 1);
	cr_assert_eq(td_dict_equal(f.ref, c), 0);
	cr_assert_eq(td_dict_equal(f.ref, f.dict), 0);
	cr_assert_eq(td_dict_equal(c, f.dict), 1);
	td_tensor_release(&zero);
	td_dict_free(c);
	td_dict_free(k);
	fixture_free(&f);
}

Test(lazy_nested, equality_compares_by_value)
{
	fixture f, g;
	td_dict *z;
	td_tensor t;
	int64_t shape[2] = { 3, 2 };

	fixture_make(&f, 0);
	fixture_make(&g, 1); /* the same values, stacked along another dim */
	assert_same(f.ref, f.dict);
	cr_assert_eq(td_dict_equal(f.dict, g.dict), 1);
	cr_assert_eq(td_dict_allclose(f.dict, f.ref, 0, 0, false), 1);
	/* A leaf changed in one child only. */
	z = get_z(g.dict);
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I64, 1, &shape[0]));
	td_cr_assert_ok(td_dict_set_tensor_inplace(td_lazy_child(z, 1), "n.b", &t));
	cr_assert_eq(td_dict_equal(f.dict, g.dict), 0);
	cr_assert_eq(td_dict_equal(g.ref, g.dict), 0);
	td_tensor_release(&t);
	/* A key only one side has. */
	td_tensor_release(&t);
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I64, 2, shape));
	td_cr_assert_ok(td_dict_set_tensor(f.dict, "z.extra", &t));
	cr_assert_eq(td_dict_equal(f.ref, f.dict), 0);
	cr_assert_eq(td_dict_equal(f.dict, f.ref), 0);
	td_tensor_release(&t);
	fixture_free(&f);
	fixture_free(&g);
}

Test(lazy_nested, ragged_stack_compares_with_an_error)
{
	td_dict *c[2], *s, *d, *e;
	int64_t b = 2, s0[2] = { 2, 3 }, s1[2] = { 2, 4 };
	td_tensor t0, t1;

	td_cr_assert_ok(td_dict_new(&c[0], 1, &b));
	td_cr_assert_ok(td_dict_new(&c[1], 1, &b));
	td_test_arange(&t0, TD_DTYPE_F32, 2, s0);
	td_test_arange(&t1, TD_DTYPE_F32, 2, s1);
	td_cr_assert_ok(td_dict_set_tensor_take(c[0], "x", &t0));
	td_cr_assert_ok(td_dict_set_tensor_take(c[1], "x", &t1));
	td_cr_assert_ok(td_lazy_stack(&s, c, 2, 0, TD_LAZY_TAKE));
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_dict_set_dict_take(d, "r", s));
	td_cr_assert_ok(td_dict_copy(&e, d));
	/* Ragged leaves have no dense form to compare: the error says so. */
	td_cr_assert_err(td_dict_equal(d, e), TD_ETYPE);
	td_cr_assert_err(td_lazy_get_tensor(&t0, d, "r.x"), TD_ETYPE);
	td_dict_free(d);
	td_dict_free(e);
}

Test(lazy_nested, indexing_like_the_reference)
{
	for (int sd = 0; sd < 2; sd++) {
		td_index cases[][3] = {
			{ td_index_int(1) },
			{ td_index_int(-1) },
			{ td_index_slice(0, 2, 1) },
			{ td_index_slice(TD_SLICE_NONE, TD_SLICE_NONE, 2) },
			{ td_index_newaxis(), td_index_slice(1, 3, 1) },
			{ td_index_ellipsis(), td_index_int(2) },
			{ td_index_range(0, 3, 2) },
		};
		size_t nidx[] = { 1, 1, 1, 1, 2, 2, 1 };
		int64_t pos[2] = { 2, 0 };
		bool mask[3] = { true, false, true };
		td_index adv[2];
		fixture f;
		size_t i;

		adv[0] = td_index_list(pos, 2);
		adv[1] = td_index_mask(mask, 3);
		fixture_make(&f, sd);
		for (i = 0; i < TD_TEST_ARRAY_LEN(cases) + 2; i++) {
			const td_index *idx = i < TD_TEST_ARRAY_LEN(cases) ? cases[i] :
																 &adv[i - TD_TEST_ARRAY_LEN(cases)];
			size_t n = i < TD_TEST_ARRAY_LEN(cases) ? nidx[i] : 1;
			td_dict *got, *want;

			td_cr_assert_ok(td_dict_index(&want, f.ref, idx, n));
			td_cr_assert_ok(td_dict_index(&got, f.dict, idx, n));
			cr_assert_eq(td_dict_equal(want, got), 1, "sd %d, index case %zu", sd, i);
			cr_assert_eq(td_dict_batch_ndim(got), td_dict_batch_ndim(want));
			td_dict_free(got);
			td_dict_free(want);
		}
		fixture_free(&f);
	}
}

Test(lazy_nested, unbind_split_like_the_reference)
{
	for (int sd = 0; sd < 2; sd++) {
		td_dict **a, **b;
		size_t na, nb, i;
		int64_t sizes[2] = { 1, 2 };
		fixture f;

		fixture_make(&f, sd);
		td_cr_assert_ok(td_dict_unbind(&a, &na, f.ref, 0));
		td_cr_assert_ok(td_dict_unbind(&b, &nb, f.dict, 0));
		cr_assert_eq(na, nb);
		for (i = 0; i < na; i++)
			cr_assert_eq(td_dict_equal(a[i], b[i]), 1, "sd %d, unbind piece %zu", sd, i);
		/* The pieces stack lazily again, and read like the reference. */
		{
			td_dict *s, *ds;
			td_tensor got = TD_TENSOR_INIT;
			const td_tensor *want;

			td_cr_assert_ok(td_lazy_stack(&s, b, nb, 0, 0));
			td_cr_assert_ok(td_lazy_get_tensor(&got, s, "z.n.m.c"));
			td_cr_assert_ok(td_dict_get_tensor(&want, f.ref, "z.n.m.c"));
			cr_assert_eq(td_tensor_equal(&got, want), 1);
			td_tensor_release(&got);
			cr_assert_eq(td_dict_contains(s, "z.a", TD_LEAVES_ONLY), 1);
			td_cr_assert_ok(td_lazy_densify(&ds, s));
			cr_assert_eq(td_dict_equal(ds, f.ref), 1);
			td_dict_free(ds);
			td_dict_free(s);
		}
		td_dict_array_free(a, na);
		td_dict_array_free(b, nb);
		td_cr_assert_ok(td_dict_split_sizes(&a, &na, f.ref, sizes, 2, 0));
		td_cr_assert_ok(td_dict_split_sizes(&b, &nb, f.dict, sizes, 2, 0));
		cr_assert_eq(na, nb);
		for (i = 0; i < na; i++)
			cr_assert_eq(td_dict_equal(a[i], b[i]), 1, "sd %d, split piece %zu", sd, i);
		td_dict_array_free(a, na);
		td_dict_array_free(b, nb);
		fixture_free(&f);
	}
}

Test(lazy_nested, elementwise_like_the_reference)
{
	fixture f;
	td_dict *got, *want;

	fixture_make(&f, 0);
	td_cr_assert_ok(td_dict_binary_scalar(&want, f.ref, td_scalar_int(3), TD_OP_MUL));
	td_cr_assert_ok(td_dict_binary_scalar(&got, f.dict, td_scalar_int(3), TD_OP_MUL));
	cr_assert(td_dict_is_lazy(get_z(got)));
	assert_same(want, got);
	td_dict_free(got);
	td_dict_free(want);
	td_cr_assert_ok(td_dict_binary_scalar_inplace(f.ref, td_scalar_int(2), TD_OP_ADD));
	td_cr_assert_ok(td_dict_binary_scalar_inplace(f.dict, td_scalar_int(2), TD_OP_ADD));
	assert_same(f.ref, f.dict);
	td_cr_assert_ok(td_dict_zero(f.ref));
	td_cr_assert_ok(td_dict_zero(f.dict));
	assert_same(f.ref, f.dict);
	fixture_free(&f);
}

Test(lazy_nested, maybe_dense_stack_falls_back_to_lazy)
{
	fixture f;
	const td_dict *in[2];
	td_dict *out;
	td_tensor got = TD_TENSOR_INIT;

	fixture_make(&f, 0);
	in[0] = f.dict;
	in[1] = f.dict;
	td_cr_assert_err(td_dict_stack(&out, in, 2, 0), TD_ENOTSUP);
	td_cr_assert_ok(td_lazy_maybe_dense_stack(&out, in, 2, 0));
	cr_assert(td_dict_is_lazy(out));
	td_cr_assert_ok(td_lazy_get_tensor(&got, out, "z.a"));
	cr_assert_eq(got.ndim, 4);
	cr_assert_eq(td_tensor_shape(&got)[0], 2);
	td_tensor_release(&got);
	td_dict_free(out);
	fixture_free(&f);
}

/* Snapshot: a copy to compare with after a refused operation. */
static void assert_unchanged(const fixture *f)
{
	assert_same(f->ref, f->dict);
}

static int apply_id(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	(void)item;
	(void)payload;
	return td_tensor_clone(out, in);
}

/* The callback of the apply tests: times *payload, and the dotted key of each leaf seen. */
typedef struct apply_log {
	int k;
	size_t calls;
	char keys[64][32];
} apply_log;

static int apply_times(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	apply_log *log = payload;
	char *key = log->keys[log->calls < 64 ? log->calls : 63];
	size_t i, len = 0;

	for (i = 0; i + 1 < item->depth; i++)
		len += (size_t)snprintf(key + len, 32 - len, "%s.", item->path[i]);
	snprintf(key + len, 32 - len, "%s", item->key);
	log->calls++;
	return td_tensor_binary_scalar(out, in, td_scalar_int(log->k), TD_OP_MUL);
}

/* How many of the logged calls were on `key`. */
static size_t calls_on(const apply_log *log, const char *key)
{
	size_t i, n = 0;

	for (i = 0; i < log->calls && i < 64; i++)
		n += strcmp(log->keys[i], key) == 0;
	return n;
}

/* apply reaches into the stack child by child (tensordict's
 * LazyStackedTensorDict.apply()): the result holds a stack, equal to the
 * reference's result, and the callback sees the children's keys. */
Test(lazy_nested, apply_reaches_every_child_of_the_stack)
{
	static const char *const keys[] = { "t", "u.v", "z.a", "z.n.b", "z.n.m.c" };
	for (int sd = 0; sd < 2; sd++) {
		apply_log want_log = { 3, 0, { { 0 } } }, got_log = { 3, 0, { { 0 } } };
		size_t kids = sd == 0 ? 3 : 2, i;
		fixture f;
		td_dict *got, *want;

		fixture_make(&f, sd);
		td_cr_assert_ok(td_dict_apply(&want, f.ref, apply_times, &want_log));
		td_cr_assert_ok(td_dict_apply(&got, f.dict, apply_times, &got_log));
		cr_assert(td_dict_is_lazy(get_z(got)));
		cr_assert_eq(td_dict_parent(get_z(got)), got);
		assert_same(want, got);
		for (i = 0; i < 5; i++) {
			size_t per = i < 2 ? 1 : kids;
			cr_assert_eq(calls_on(&want_log, keys[i]), 1, "sd %d: '%s'", sd, keys[i]);
			cr_assert_eq(calls_on(&got_log, keys[i]), per, "sd %d: '%s' seen %zu times", sd,
				keys[i], calls_on(&got_log, keys[i]));
		}
		cr_assert_eq(got_log.calls, 2 + 3 * kids);
		td_dict_free(got);
		td_dict_free(want);
		/* In place: every child's leaves, written through. */
		want_log.k = got_log.k = 5;
		td_cr_assert_ok(td_dict_apply_inplace(f.ref, apply_times, &want_log));
		td_cr_assert_ok(td_dict_apply_inplace(f.dict, apply_times, &got_log));
		assert_same(f.ref, f.dict);
		fixture_free(&f);
	}
}

/* A dict (or stack) merging into the nested stack: each child gets its slice. */
Test(lazy_nested, update_merges_into_the_nested_stack)
{
	for (int sd = 0; sd < 2; sd++) {
		fixture f;
		td_dict *o, *back;

		fixture_make(&f, sd);
		td_cr_assert_ok(td_dict_clone(&o, f.ref));
		td_cr_assert_ok(td_dict_binary_scalar_inplace(o, td_scalar_int(4), TD_OP_ADD));
		td_cr_assert_ok(td_dict_set_string(o, "z.s", "merged"));
		td_cr_assert_ok(td_dict_update(f.ref, o));
		td_cr_assert_ok(td_dict_update(f.dict, o));
		cr_assert(td_dict_is_lazy(get_z(f.dict)));
		assert_same(f.ref, f.dict);
		td_cr_assert_ok(td_dict_binary_scalar_inplace(o, td_scalar_int(2), TD_OP_MUL));
		td_cr_assert_ok(td_dict_update_inplace(f.ref, o));
		td_cr_assert_ok(td_dict_update_inplace(f.dict, o));
		assert_same(f.ref, f.dict);
		/* the stack on the right: merged in its dense form */
		td_cr_assert_ok(td_dict_clone(&back, f.ref));
		td_cr_assert_ok(td_dict_zero(back));
		td_cr_assert_ok(td_dict_update(back, f.dict));
		assert_same(f.ref, back);
		td_dict_free(back);
		td_dict_free(o);
		fixture_free(&f);
	}
}

Test(lazy_nested, refused_operations)
{
	fixture f;
	td_dict *out = (td_dict *)1, **arr = NULL;
	const td_dict *two[2];
	int64_t shape[1] = { 3 };
	int perm[1] = { 0 };
	td_index idx = td_index_int(0);
	size_t n = 0;

	fixture_make(&f, 0);
	two[0] = f.dict;
	two[1] = f.dict;
#define REFUSED(expr) \
	do { \
		td_cr_assert_err(expr, TD_ENOTSUP); \
		cr_assert(strstr(last_message(), "lazy") != NULL, "%s: %s", #expr, last_message()); \
		assert_unchanged(&f); \
	} while (0)
	REFUSED(td_dict_reshape(&out, f.dict, 1, shape));
	cr_assert_null(out);
	REFUSED(td_dict_view(&out, f.dict, 1, shape));
	REFUSED(td_dict_unsqueeze(&out, f.dict, 0));
	REFUSED(td_dict_permute(&out, f.dict, perm));
	REFUSED(td_dict_flatten_keys(&out, f.dict, "."));
	REFUSED(td_dict_binary(&out, f.dict, f.dict, TD_OP_ADD));
	REFUSED(td_dict_binary(&out, f.ref, f.dict, TD_OP_ADD));
	REFUSED(td_dict_binary_inplace(f.ref, f.dict, TD_OP_ADD));
	assert_same(f.ref, f.dict);
	REFUSED(td_dict_stack(&out, two, 2, 0));
	REFUSED(td_dict_cat(&out, two, 2, 0));
	REFUSED(td_dict_index_fill(f.dict, &idx, 1, td_scalar_int(0)));
	{
		td_dict *row;
		td_cr_assert_ok(td_dict_index(&row, f.ref, &idx, 1));
		REFUSED(td_dict_index_put(f.dict, &idx, 1, row));
		td_dict_free(row);
		/* A value holding a stack, written into a dense dict. */
		td_index sl = td_index_slice(0, 1, 1);
		td_cr_assert_ok(td_dict_index(&row, f.dict, &sl, 1));
		cr_assert(td_dict_is_lazy(get_z(row)));
		REFUSED(td_dict_index_put(f.ref, &sl, 1, row));
		td_dict_free(row);
	}
	{
		const char *const keys[1] = { "z.a" };
		REFUSED(td_dict_select(&out, f.dict, keys, 1, true));
		REFUSED(td_dict_exclude(&out, f.dict, keys, 1));
	}
	(void)arr;
	(void)n;
	/* Whole values: an empty dict without recursion, update with a new key, selection. */
	td_cr_assert_ok(td_dict_empty(&out, f.dict, false));
	cr_assert_eq(td_dict_len(out), 0u);
	td_dict_free(out);
	/* With recursion the stack becomes a stack of the children's empty forms. */
	{
		td_dict *want;
		td_cr_assert_ok(td_dict_empty(&out, f.dict, true));
		td_cr_assert_ok(td_dict_empty(&want, f.ref, true));
		cr_assert(td_dict_is_lazy(get_z(out)));
		assert_same(want, out);
		td_dict_free(want);
		td_dict_free(out);
	}
	{
		const char *const keys[2] = { "z", "t" };
		td_dict *want;
		td_cr_assert_ok(td_dict_select(&out, f.dict, keys, 2, true));
		td_cr_assert_ok(td_dict_select(&want, f.ref, keys, 2, true));
		cr_assert(td_dict_is_lazy(get_z(out)));
		assert_same(want, out);
		td_dict_free(out);
		td_dict_free(want);
		td_cr_assert_ok(td_dict_exclude(&out, f.dict, keys, 1));
		cr_assert_eq(td_dict_contains(out, "z", 0), 0);
		td_dict_free(out);
	}
	{
		int64_t b = 3;
		td_dict *d;
		td_cr_assert_ok(td_dict_new(&d, 1, &b));
		td_cr_assert_ok(td_dict_update(d, f.dict));
		assert_same(f.ref, d);
		td_dict_free(d);
	}
#undef REFUSED
	fixture_free(&f);
}

Test(lazy_nested, nesting_depth_counts_the_stack)
{
	/*
	 * The stack is one level above its children, whose own height is 3
	 * (the child, "n", "n.m"): height 4. Under a parent at depth p it fits
	 * while p + 4 < TD_KEY_MAX_DEPTH.
	 */
	const char *parts[TD_KEY_MAX_DEPTH];
	td_dict *inner = td_test_lazy_ref(0), *stack = make_stack(inner, 0), *d, *at;
	int64_t b = 3;
	td_tensor t;
	td_key *k;
	size_t i, deep = TD_KEY_MAX_DEPTH - 4;

	for (i = 0; i < TD_KEY_MAX_DEPTH; i++)
		parts[i] = "x";
	td_cr_assert_ok(td_dict_new(&d, 1, &b));
	td_test_arange(&t, TD_DTYPE_I32, 1, &b);
	k = td_test_key(parts, deep + 1);
	td_cr_assert_ok(td_dict_set_tensor_key(d, k, &t));
	td_key_free(k);
	td_tensor_release(&t);
	k = td_test_key(parts, deep);
	td_cr_assert_ok(td_dict_get_dict_key(&at, d, k));
	td_key_free(k);
	td_cr_assert_err(td_dict_set_dict_take(at, "z", stack), TD_EINVAL);
	cr_assert_null(td_dict_parent(stack)); /* still the caller's */
	k = td_test_key(parts, deep - 1);
	td_cr_assert_ok(td_dict_get_dict_key(&at, d, k));
	td_key_free(k);
	td_cr_assert_ok(td_dict_set_dict_take(at, "z", stack));
	td_dict_free(d);
	td_dict_free(inner);
}

/* ---- allocation failures ---- */

typedef struct sweep {
	const td_dict *src;
	td_dict *out;
} sweep;

/* Every handled operation on a dict holding a stack; each failure is returned whole. */
static int sweep_body(void *ctx)
{
	sweep *c = ctx;
	int64_t shape[2] = { 3, 2 };
	td_index sl = td_index_slice(1, 3, 1), at = td_index_int(1);
	td_dict *a = NULL, *r = NULL, **pieces = NULL;
	td_dict_iter *it = NULL;
	td_tensor t = TD_TENSOR_INIT, got = TD_TENSOR_INIT;
	td_item item;
	size_t n = 0;
	int rc;

	rc = td_dict_clone(&a, c->src);
	if (rc == TD_OK)
		rc = td_tensor_zeros(&t, TD_DTYPE_I64, 2, shape);
	if (rc == TD_OK)
		rc = td_dict_set_tensor(a, "z.fresh.q", &t);
	if (rc == TD_OK)
		rc = td_dict_set_string(a, "z.str", "s");
	if (rc == TD_OK)
		rc = td_lazy_get_tensor(&got, a, "z.n.m.c");
	if (rc == TD_OK)
		rc = td_dict_index(&r, a, &sl, 1);
	td_dict_free(r);
	r = NULL;
	if (rc == TD_OK)
		rc = td_dict_index(&r, a, &at, 1);
	td_dict_free(r);
	r = NULL;
	if (rc == TD_OK)
		rc = td_dict_unbind(&pieces, &n, a, 0);
	td_dict_array_free(pieces, n);
	if (rc == TD_OK)
		rc = td_dict_binary_scalar(&r, a, td_scalar_int(2), TD_OP_MUL);
	if (rc == TD_OK) {
		rc = td_dict_equal(r, a);
		rc = rc < 0 ? rc : TD_OK;
	}
	td_dict_free(r);
	r = NULL;
	if (rc == TD_OK)
		rc = td_dict_copy(&r, a);
	td_dict_free(r);
	r = NULL;
	if (rc == TD_OK)
		rc = td_dict_apply(&r, a, apply_id, NULL);
	td_dict_free(r);
	if (rc == TD_OK)
		rc = td_dict_iter_new(&it, a, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY);
	while (rc == TD_OK && (rc = td_dict_iter_next(&item, it)) == 1)
		rc = TD_OK;
	td_dict_iter_free(it);
	if (rc == TD_OK)
		rc = td_dict_del(a, "z.fresh.q");
	td_tensor_release(&t);
	td_tensor_release(&got);
	if (rc < 0) {
		td_dict_free(a);
		return rc;
	}
	c->out = a;
	return TD_OK;
}

static void sweep_cleanup(void *ctx)
{
	sweep *c = ctx;

	td_dict_free(c->out);
	c->out = NULL;
}

Test(lazy_nested, allocation_failures_leave_nothing_behind)
{
	fixture f;
	sweep c;

	fixture_make(&f, 1);
	c.src = f.dict;
	c.out = NULL;
	td_test_enomem_sweep(sweep_body, sweep_cleanup, &c);
	fixture_free(&f);
}

Test(lazy_nested, stacks_of_dicts_holding_stacks_deeper_down_leak_nothing)
{
	/*
	 * A lazy stack of dicts that hold a stack two levels down ("p.z"): its
	 * key schema stops at the nested stack, and the sub-stack it made for
	 * "p" on the way is freed with it.
	 */
	td_dict *inner = td_test_lazy_ref(0), *kids[2], *outer;
	td_tensor got = TD_TENSOR_INIT;
	const td_tensor *want;
	int64_t b = 3;
	int i;

	td_test_alloc_install(-1);
	for (i = 0; i < 2; i++) {
		td_dict *p;

		td_cr_assert_ok(td_dict_new(&kids[i], 1, &b));
		td_cr_assert_ok(td_dict_new(&p, 1, &b));
		td_cr_assert_ok(td_dict_set_dict_take(p, "z", make_stack(inner, 0)));
		td_cr_assert_ok(td_dict_set_dict_take(kids[i], "p", p));
	}
	td_cr_assert_ok(td_lazy_stack(&outer, kids, 2, 0, TD_LAZY_TAKE));
	td_cr_assert_ok(td_lazy_get_tensor(&got, outer, "p.z.n.m.c"));
	cr_assert_eq(got.ndim, 4);
	cr_assert_eq(td_tensor_shape(&got)[0], 2);
	td_cr_assert_ok(td_dict_get_tensor(&want, inner, "n.m.c"));
	{
		td_tensor row = TD_TENSOR_INIT;
		td_cr_assert_ok(td_tensor_select(&row, &got, 0, 1));
		cr_assert_eq(td_tensor_equal(&row, want), 1);
		td_tensor_release(&row);
	}
	td_tensor_release(&got);
	cr_assert_eq(td_dict_contains(outer, "p.z.a", TD_LEAVES_ONLY), 1);
	td_dict_free(outer);
	cr_assert_eq(td_test_alloc_live(), 0, "%ld allocations left", td_test_alloc_live());
	td_test_alloc_uninstall();
	td_dict_free(inner);
}
