/* SPDX-License-Identifier: MIT */
/*
 * test_lazy.c - lazy stacks: every operation against a dense reference
 * (the children are the reference unbound along the stack dim, so the lazy
 * stack must behave as the reference itself), ragged leaves, keys only some
 * children have, stacks of stacks, and every failure path.
 */
#include "td_test.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The reference: td_test_lazy_ref() (batch [3, 2], or [2, 3] for stack dim 1). */

typedef struct fixture {
	td_dict *ref;    /* dense reference */
	td_dict **parts; /* its unbind along sd: the children */
	size_t n;
	td_dict *lazy; /* lazy stack of the parts (borrowed) */
} fixture;

static void fixture_make(fixture *f, int sd)
{
	f->ref = td_test_lazy_ref(sd);
	td_cr_assert_ok(td_dict_unbind(&f->parts, &f->n, f->ref, sd));
	td_cr_assert_ok(td_lazy_stack(&f->lazy, f->parts, f->n, sd, 0));
}

static void fixture_free(fixture *f)
{
	td_dict_free(f->lazy);
	td_dict_array_free(f->parts, f->n);
	td_dict_free(f->ref);
}

/* Dense reference equals the densified lazy result. */
static void assert_same(const td_dict *dense, const td_dict *lazy)
{
	td_dict *dl = NULL;

	if (td_dict_is_lazy(lazy)) {
		td_cr_assert_ok(td_lazy_densify(&dl, lazy));
		lazy = dl;
	}
	cr_assert_eq(td_dict_equal(dense, lazy), 1, "lazy result differs from the reference");
	td_dict_free(dl);
}

static void assert_tensor_eq(const td_tensor *a, const td_tensor *b)
{
	cr_assert_eq(td_tensor_equal(a, b), 1, "tensors differ");
}

/* ------------------------------------------------------------------------ */
/* Building and walking                                                      */
/* ------------------------------------------------------------------------ */

Test(lazy, shape_walk_and_dense_equivalence)
{
	for (int sd = 0; sd < 3; sd++) {
		fixture f;
		f.ref = td_test_lazy_ref(sd == 2 ? 0 : sd);
		td_cr_assert_ok(td_dict_unbind(&f.parts, &f.n, f.ref, sd == 2 ? 0 : sd));
		if (sd == 2) {
			/* stacking at the end: compare with the dense stack at dim 2 */
			td_dict *dense;
			td_cr_assert_ok(td_lazy_stack(&f.lazy, f.parts, f.n, -1, 0));
			cr_assert_eq(td_lazy_stack_dim(f.lazy), 1);
			td_cr_assert_ok(td_dict_stack(&dense, (const td_dict *const *)f.parts, f.n, 1));
			assert_same(dense, f.lazy);
			td_dict_free(dense);
			fixture_free(&f);
			continue;
		}
		td_cr_assert_ok(td_lazy_stack(&f.lazy, f.parts, f.n, sd, 0));
		cr_assert(td_dict_is_lazy(f.lazy));
		cr_assert(!td_dict_is_lazy(f.ref));
		cr_assert_eq(td_lazy_count(f.lazy), f.n);
		cr_assert_eq(td_lazy_stack_dim(f.lazy), sd);
		cr_assert_eq(td_lazy_child(f.lazy, 1), f.parts[1]);
		cr_assert_null(td_lazy_child(f.lazy, f.n));
		cr_assert_eq(td_dict_batch_ndim(f.lazy), 2);
		cr_assert_arr_eq(td_dict_batch_shape(f.lazy), td_dict_batch_shape(f.ref),
			2 * sizeof(int64_t));
		cr_assert_eq(td_dict_batch_numel(f.lazy), 6);
		cr_assert_eq(td_dict_len(f.lazy), 3);
		assert_same(f.ref, f.lazy);
		fixture_free(&f);
	}
	cr_assert_eq(td_lazy_count(NULL), 0);
	cr_assert_eq(td_lazy_stack_dim(NULL), -1);
	cr_assert_null(td_lazy_child(NULL, 0));
	cr_assert(!td_dict_is_lazy(NULL));
}

Test(lazy, take_owns_children)
{
	td_dict *c[2], *s;

	td_cr_assert_ok(td_dict_new(&c[0], 0, NULL));
	td_cr_assert_ok(td_dict_new(&c[1], 0, NULL));
	td_cr_assert_ok(td_lazy_stack(&s, c, 2, 0, TD_LAZY_TAKE));
	cr_assert_eq(td_dict_parent(c[0]), s);
	td_dict_free(c[0]); /* owned by the stack: does nothing */
	cr_assert_eq(td_lazy_child(s, 0), c[0]);
	td_dict_free(s);
}

Test(lazy, construction_failures)
{
	td_dict *a, *b, *s = (td_dict *)1, *arr[2];
	int64_t b2 = 2, b3 = 3;

	td_cr_assert_ok(td_dict_new(&a, 1, &b2));
	td_cr_assert_ok(td_dict_new(&b, 1, &b3));
	arr[0] = a;
	arr[1] = b;
	td_cr_assert_err(td_lazy_stack(&s, arr, 2, 0, 0), TD_ETYPE);
	cr_assert_null(s);
	td_cr_assert_err(td_lazy_stack(NULL, arr, 2, 0, 0), TD_EINVAL);
	td_cr_assert_err(td_lazy_stack(&s, NULL, 2, 0, 0), TD_EINVAL);
	td_cr_assert_err(td_lazy_stack(&s, arr, 0, 0, 0), TD_EINVAL);
	td_cr_assert_err(td_lazy_stack(&s, arr, 1, 0, 0x10), TD_EINVAL);
	td_cr_assert_err(td_lazy_stack(&s, arr, 1, 2, 0), TD_EINVAL);
	td_cr_assert_err(td_lazy_stack(&s, arr, 1, -3, 0), TD_EINVAL);
	arr[1] = NULL;
	td_cr_assert_err(td_lazy_stack(&s, arr, 2, 0, 0), TD_EINVAL);
	arr[1] = a; /* twice: fine when borrowed, refused when taken */
	td_cr_assert_ok(td_lazy_stack(&s, arr, 2, 0, 0));
	td_dict_free(s);
	td_cr_assert_err(td_lazy_stack(&s, arr, 2, 0, TD_LAZY_TAKE), TD_EINVAL);
	td_cr_assert_ok(td_dict_set_dict_take(b, "x", NULL) == TD_EINVAL ? 0 : -1);
	{
		td_dict *child, *nested;
		td_cr_assert_ok(td_dict_new(&child, 1, &b3));
		td_cr_assert_ok(td_dict_set_dict_take(b, "x", child));
		td_cr_assert_ok(td_dict_get_dict(&nested, b, "x"));
		td_cr_assert_err(td_lazy_stack(&s, &nested, 1, 0, TD_LAZY_TAKE), TD_EINVAL);
	}
	td_dict_free(a);
	td_dict_free(b);
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                      */
/* ------------------------------------------------------------------------ */

Test(lazy, keys_are_shared_ones_and_others_stay_reachable)
{
	td_dict *c[2], *s;
	td_tensor t;
	const char *keys[4];
	const td_value *vals[4];
	int64_t b = 2;

	for (int i = 0; i < 2; i++) {
		td_cr_assert_ok(td_dict_new(&c[i], 1, &b));
		td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, &b));
		td_cr_assert_ok(td_dict_set_tensor(c[i], "shared", &t));
		td_cr_assert_ok(td_dict_set_tensor(c[i], i ? "only1" : "only0", &t));
		td_cr_assert_ok(td_dict_set_tensor(c[i], "mixed.x", &t));
		if (i)
			td_cr_assert_ok(td_dict_del(c[i], "mixed"));
		if (i)
			td_cr_assert_ok(td_dict_set_tensor(c[i], "mixed", &t));
		td_tensor_release(&t);
	}
	td_cr_assert_ok(td_lazy_stack(&s, c, 2, 0, TD_LAZY_TAKE));
	cr_assert_eq(td_dict_len(s), 1);
	cr_assert_eq(td_dict_items(keys, vals, 4, s), 1);
	cr_assert_str_eq(keys[0], "shared");
	cr_assert_null(vals[0]);
	cr_assert_eq(td_dict_contains(s, "shared", 0), 1);
	cr_assert_eq(td_dict_contains(s, "shared", TD_LEAVES_ONLY), 1);
	cr_assert_eq(td_dict_contains(s, "only0", 0), 0);
	cr_assert_eq(td_dict_contains(s, "mixed", 0), 0); /* a dict in one, a leaf in the other */
	cr_assert_eq(td_dict_contains(s, "mixed.x", 0), 0);
	cr_assert_eq(td_dict_contains(td_lazy_child(s, 0), "only0", 0), 1);
	td_cr_assert_err(td_dict_contains(s, "a..b", 0), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_tensor(&t, s, "only0"), TD_ENOTFOUND);
	td_dict_free(s);
}

Test(lazy, nested_membership_and_iteration_match_dense)
{
	for (int sd = 0; sd < 2; sd++) {
		fixture f;
		td_dict_iter *il, *id;
		td_item a, b;
		const char *const path[3] = { "n", "m", "c" };
		td_key *k;
		int rl, rd, count = 0;

		fixture_make(&f, sd);
		td_cr_assert_ok(td_key_from_path(&k, path, 3));
		cr_assert_eq(td_dict_contains_key(f.lazy, k, TD_LEAVES_ONLY), 1);
		td_key_free(k);
		k = td_test_key(path, 2);
		cr_assert_eq(td_dict_contains_key(f.lazy, k, TD_LEAVES_ONLY), 0);
		cr_assert_eq(td_dict_contains_key(f.lazy, k, 0), 1);
		td_key_free(k);
		td_cr_assert_ok(td_dict_iter_new(&il, f.lazy, TD_ITER_NESTED));
		td_cr_assert_ok(td_dict_iter_new(&id, f.ref, TD_ITER_NESTED));
		for (;;) {
			td_cr_assert_ok(rl = td_dict_iter_next(&a, il));
			td_cr_assert_ok(rd = td_dict_iter_next(&b, id));
			cr_assert_eq(rl, rd);
			if (!rl)
				break;
			count++;
			cr_assert_eq(a.depth, b.depth);
			for (size_t i = 0; i < a.depth; i++)
				cr_assert_str_eq(a.path[i], b.path[i]);
			cr_assert_eq(a.value->kind, b.value->kind);
			if (a.value->kind == TD_VALUE_TENSOR)
				assert_tensor_eq(&a.value->tensor, &b.value->tensor);
			else if (a.value->kind == TD_VALUE_DICT)
				assert_same(b.value->dict, a.value->dict);
			else
				cr_assert_str_eq(a.value->blob.data, b.value->blob.data);
		}
		cr_assert_eq(count, 6);
		td_dict_iter_free(id);
		td_dict_iter_free(il);
		/* keys only, leaves only, restart mid-way */
		td_cr_assert_ok(td_dict_iter_new(&il, f.lazy,
			TD_ITER_NESTED | TD_ITER_LEAVES_ONLY | TD_ITER_KEYS_ONLY));
		td_cr_assert_ok(td_dict_iter_next(&a, il));
		td_cr_assert_ok(td_dict_iter_next(&a, il));
		td_dict_iter_reset(il);
		count = 0;
		while (td_dict_iter_next(&a, il) == 1) {
			cr_assert_null(a.value);
			count++;
		}
		cr_assert_eq(count, 4);
		td_dict_iter_free(il);
		fixture_free(&f);
	}
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

Test(lazy, get_matches_dense)
{
	for (int sd = 0; sd < 2; sd++) {
		fixture f;
		const td_tensor *ref;
		td_tensor got, into;
		td_dict *sub;
		td_key *k;

		fixture_make(&f, sd);
		td_cr_assert_ok(td_dict_get_tensor(&ref, f.ref, "n.m.c"));
		td_cr_assert_ok(td_lazy_get_tensor(&got, f.lazy, "n.m.c"));
		assert_tensor_eq(&got, ref);
		td_tensor_release(&got);
		td_cr_assert_ok(td_key_new(&k, "a"));
		td_cr_assert_ok(td_dict_get_tensor(&ref, f.ref, "a"));
		td_cr_assert_ok(td_lazy_get_tensor_key(&got, f.lazy, k));
		assert_tensor_eq(&got, ref);
		td_tensor_release(&got);
		/* fill the caller's tensor, with a dtype conversion */
		td_cr_assert_ok(td_tensor_zeros(&into, TD_DTYPE_F64, ref->ndim, td_tensor_shape(ref)));
		td_cr_assert_ok(td_lazy_get_tensor_into(&into, f.lazy, "a"));
		cr_assert_eq(td_tensor_allclose(&into, ref, 0, 0, false), 1);
		td_tensor_release(&into);
		td_cr_assert_ok(td_tensor_zeros(&into, TD_DTYPE_F32, 1, td_tensor_shape(ref)));
		td_cr_assert_err(td_lazy_get_tensor_into(&into, f.lazy, "a"), TD_ETYPE);
		td_tensor_release(&into);
		/* sub-dict: a lazy stack of the children's sub-dicts */
		td_cr_assert_ok(td_lazy_get_dict_key(&sub, f.lazy, k) == TD_ETYPE ? 0 : -1);
		td_cr_assert_ok(td_lazy_get_dict(&sub, f.lazy, "n"));
		cr_assert(td_dict_is_lazy(sub));
		cr_assert_eq(td_lazy_stack_dim(sub), sd);
		{
			td_dict *rsub;
			td_cr_assert_ok(td_dict_get_dict(&rsub, f.ref, "n"));
			assert_same(rsub, sub);
		}
		td_dict_free(sub);
		td_key_free(k);
		/* the borrowed lookups do not apply */
		{
			const td_value *v;
			td_dict *dd;
			const char *data;
			td_cr_assert_err(td_dict_get(&v, f.lazy, "a"), TD_ENOTSUP);
			td_cr_assert_err(td_dict_get_tensor(&ref, f.lazy, "a"), TD_ENOTSUP);
			td_cr_assert_err(td_dict_get_dict(&dd, f.lazy, "n"), TD_ENOTSUP);
			td_cr_assert_err(td_dict_get_blob(&data, NULL, f.lazy, "s"), TD_ENOTSUP);
		}
		fixture_free(&f);
	}
}

Test(lazy, get_failures)
{
	fixture f;
	td_tensor t, *list;
	td_dict *sub;
	size_t n;

	fixture_make(&f, 0);
	td_cr_assert_err(td_lazy_get_tensor(&t, f.lazy, "n"), TD_ETYPE);
	td_cr_assert_err(td_lazy_get_tensor(&t, f.lazy, "zz"), TD_ENOTFOUND);
	td_cr_assert_err(td_lazy_get_tensor(&t, f.ref, "a"), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_tensor(NULL, f.lazy, "a"), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_tensor(&t, f.lazy, NULL), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_tensor_key(&t, f.lazy, NULL), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_tensor(&t, f.lazy, "a..b"), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_dict(&sub, f.lazy, "a"), TD_ETYPE);
	td_cr_assert_err(td_lazy_get_dict(&sub, f.lazy, "zz"), TD_ENOTFOUND);
	td_cr_assert_err(td_lazy_get_dict(&sub, f.ref, "n"), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_dict_key(&sub, f.lazy, NULL), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_list(&list, NULL, f.lazy, "a"), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_list(&list, &n, f.lazy, "s"), TD_ETYPE);
	td_cr_assert_err(td_lazy_get_padded(&t, f.lazy, "a", td_scalar_int(0), 0x8), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_nested(&t, NULL, f.lazy, "a"), TD_EINVAL);
	td_cr_assert_err(td_lazy_densify(&sub, f.ref), TD_EINVAL);
	td_cr_assert_err(td_lazy_densify(NULL, f.lazy), TD_EINVAL);
	fixture_free(&f);
}

/* Two children of batch [] whose "x" has 2 and 3 elements: ragged. */
static td_dict *ragged_stack(int dim_of_x_ndim2)
{
	td_dict *c[2], *s;
	td_tensor t;
	int64_t len[2] = { 2, 3 };

	for (int i = 0; i < 2; i++) {
		int64_t shape[2] = { len[i], 2 };
		td_cr_assert_ok(td_dict_new(&c[i], 0, NULL));
		td_test_arange(&t, TD_DTYPE_F32, dim_of_x_ndim2 ? 2 : 1, shape);
		td_cr_assert_ok(td_dict_set_tensor_take(c[i], "x", &t));
	}
	td_cr_assert_ok(td_lazy_stack(&s, c, 2, 0, TD_LAZY_TAKE));
	return s;
}

static double at(const td_tensor *t, int64_t i, int64_t j, int64_t k)
{
	int64_t idx[3] = { i, j, k };
	td_scalar s;

	td_cr_assert_ok(td_tensor_get(&s, t, idx));
	return s.v.f;
}

Test(lazy, ragged_leaves)
{
	td_dict *s = ragged_stack(0);
	td_tensor t, *list, values, offsets;
	const int64_t *off;
	size_t n;

	td_cr_assert_err(td_lazy_get_tensor(&t, s, "x"), TD_ETYPE);
	cr_assert(strstr(td_error_last()->message, "ragged") != NULL);
	td_cr_assert_ok(td_lazy_get_list(&list, &n, s, "x"));
	cr_assert_eq(n, 2);
	cr_assert_eq(td_tensor_shape(&list[0])[0], 2);
	cr_assert_eq(td_tensor_shape(&list[1])[0], 3);
	td_tensor_array_free(list, n);
	/* padded right and left with -1 */
	td_cr_assert_ok(td_lazy_get_padded(&t, s, "x", td_scalar_float(-1), 0));
	cr_assert_eq(t.ndim, 2);
	cr_assert_eq(td_tensor_shape(&t)[1], 3);
	cr_assert_float_eq(at(&t, 0, 1, 0), 1.0, 0);
	cr_assert_float_eq(at(&t, 0, 2, 0), -1.0, 0);
	cr_assert_float_eq(at(&t, 1, 2, 0), 2.0, 0);
	td_tensor_release(&t);
	td_cr_assert_ok(td_lazy_get_padded(&t, s, "x", td_scalar_float(-1), TD_PAD_LEFT));
	cr_assert_float_eq(at(&t, 0, 0, 0), -1.0, 0);
	cr_assert_float_eq(at(&t, 0, 1, 0), 0.0, 0);
	cr_assert_float_eq(at(&t, 0, 2, 0), 1.0, 0);
	td_tensor_release(&t);
	/* nested: values [5], offsets [0, 2, 5] */
	td_cr_assert_ok(td_lazy_get_nested(&values, &offsets, s, "x"));
	cr_assert_eq(td_tensor_shape(&values)[0], 5);
	cr_assert_eq(offsets.dtype, TD_DTYPE_I64);
	off = td_tensor_data(&offsets);
	cr_assert(off[0] == 0 && off[1] == 2 && off[2] == 5);
	cr_assert_float_eq(td_test_element(&values, 4), 2.0, 0);
	td_tensor_release(&values);
	td_tensor_release(&offsets);
	/* densify refuses ragged leaves; the iterator reports and skips them */
	{
		td_dict *d;
		td_dict_iter *it;
		td_item item;
		td_cr_assert_err(td_lazy_densify(&d, s), TD_ETYPE);
		td_cr_assert_ok(td_dict_iter_new(&it, s, 0));
		td_cr_assert_err(td_dict_iter_next(&item, it), TD_ETYPE);
		cr_assert_eq(td_dict_iter_next(&item, it), 0);
		td_dict_iter_free(it);
	}
	td_dict_free(s);
}

Test(lazy, ragged_failures)
{
	td_dict *s = ragged_stack(1), *t1;
	td_tensor t, o;
	td_dict *c[2];

	/* [2,2] vs [3,2]: first dim differs only: nested works, stack does not */
	td_cr_assert_ok(td_lazy_get_nested(&t, &o, s, "x"));
	cr_assert_eq(td_tensor_shape(&t)[0], 5);
	td_tensor_release(&t);
	td_tensor_release(&o);
	td_dict_free(s);
	/* different ndim: padding refused; a 0-d leaf: nested refused */
	for (int i = 0; i < 2; i++) {
		int64_t shape[1] = { 2 };
		td_cr_assert_ok(td_dict_new(&c[i], 0, NULL));
		td_test_arange(&t, TD_DTYPE_F32, i, shape);
		td_cr_assert_ok(td_dict_set_tensor_take(c[i], "x", &t));
	}
	td_cr_assert_ok(td_lazy_stack(&s, c, 2, 0, TD_LAZY_TAKE));
	td_cr_assert_err(td_lazy_get_padded(&t, s, "x", td_scalar_int(0), 0), TD_ETYPE);
	td_cr_assert_err(td_lazy_get_nested(&t, &o, s, "x"), TD_ETYPE);
	td_dict_free(s);
	/* nested needs stack dim 0 */
	{
		fixture f;
		fixture_make(&f, 1);
		td_cr_assert_err(td_lazy_get_nested(&t, &o, f.lazy, "a"), TD_ENOTSUP);
		fixture_free(&f);
	}
	/* [2,3] vs [2,4]: nested refused (beyond the first dim) */
	for (int i = 0; i < 2; i++) {
		int64_t shape[2] = { 2, 3 + i };
		td_cr_assert_ok(td_dict_new(&c[i], 0, NULL));
		td_test_arange(&t, TD_DTYPE_F32, 2, shape);
		td_cr_assert_ok(td_dict_set_tensor_take(c[i], "x", &t));
	}
	td_cr_assert_ok(td_lazy_stack(&t1, c, 2, 0, TD_LAZY_TAKE));
	td_cr_assert_err(td_lazy_get_nested(&t, &o, t1, "x"), TD_ETYPE);
	td_dict_free(t1);
}

/*
 * Two children of batch [] holding the dict "n.x" with "y" (2 and 3 rows
 * of 2: ragged) and "z" ([2] in both), and the string "s.t": keys that
 * only a key handle can spell.
 */
static td_dict *dotted_stack(void)
{
	td_key *kn = td_test_key((const char *[]){ "n.x" }, 1);
	td_key *ks = td_test_key((const char *[]){ "s.t" }, 1);
	td_dict *c[2], *n, *s;
	td_tensor t;

	for (int i = 0; i < 2; i++) {
		int64_t shape[2] = { 2 + i, 2 };

		td_cr_assert_ok(td_dict_new(&c[i], 0, NULL));
		td_cr_assert_ok(td_dict_new(&n, 0, NULL));
		td_test_arange(&t, TD_DTYPE_F32, 2, shape);
		td_cr_assert_ok(td_dict_set_tensor_take(n, "y", &t));
		td_test_arange(&t, TD_DTYPE_I32, 1, shape + 1);
		td_cr_assert_ok(td_dict_set_tensor_take(n, "z", &t));
		td_cr_assert_ok(td_dict_set_dict_take_key(c[i], kn, n));
		td_cr_assert_ok(td_dict_set_string_key(c[i], ks, "text"));
	}
	td_cr_assert_ok(td_lazy_stack(&s, c, 2, 0, TD_LAZY_TAKE));
	td_key_free(kn);
	td_key_free(ks);
	return s;
}

/*
 * The `_key` twins of the readers (into, list, padded, nested): a key whose
 * components hold '.' reads what no dotted key reaches, in the stack and
 * through a dense dict holding it; a NULL handle is TD_EINVAL, a missing
 * key TD_ENOTFOUND, a leaf that is not a tensor TD_ETYPE.
 */
Test(lazy, reader_key_twins_reach_dotted_components_and_report_failures)
{
	td_key *ky = td_test_key((const char *[]){ "n.x", "y" }, 2);
	td_key *kz = td_test_key((const char *[]){ "n.x", "z" }, 2);
	td_key *miss = td_test_key((const char *[]){ "n.x", "nope" }, 2);
	td_key *kstr = td_test_key((const char *[]){ "s.t" }, 1);
	td_key *kw = td_test_key((const char *[]){ "w.v" }, 1);
	td_key *deep = td_test_key((const char *[]){ "w.v", "n.x", "y" }, 3);
	td_dict *s = dotted_stack(), *d;
	td_tensor dst, t, o, *list;
	const int64_t *off;
	size_t n = 9;

	/* Success: each reader under components holding '.'. */
	td_cr_assert_ok(td_tensor_zeros(&dst, TD_DTYPE_I64, 2, (const int64_t[]){ 2, 2 }));
	td_cr_assert_ok(td_lazy_get_tensor_into_key(&dst, s, kz));
	cr_assert_float_eq(td_test_element(&dst, 3), 1.0, 0);
	td_cr_assert_ok(td_lazy_get_list_key(&list, &n, s, ky));
	cr_assert(n == 2 && td_tensor_shape(&list[0])[0] == 2 && td_tensor_shape(&list[1])[0] == 3);
	td_tensor_array_free(list, n);
	td_cr_assert_ok(td_lazy_get_padded_key(&t, s, ky, td_scalar_float(-1), TD_PAD_LEFT));
	cr_assert(t.ndim == 3 && td_tensor_shape(&t)[1] == 3);
	cr_assert_float_eq(td_test_element(&t, 0), -1.0, 0);
	td_tensor_release(&t);
	td_cr_assert_ok(td_lazy_get_nested_key(&t, &o, s, ky));
	off = td_tensor_data(&o);
	cr_assert(td_tensor_shape(&t)[0] == 5 && off[1] == 2 && off[2] == 5);
	td_tensor_release(&t);
	td_tensor_release(&o);

	/* A NULL key handle. */
	td_cr_assert_err(td_lazy_get_tensor_into_key(&dst, s, NULL), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_list_key(&list, &n, s, NULL), TD_EINVAL);
	cr_assert(list == NULL && n == 0, "a failed list writes NULL and 0");
	td_cr_assert_err(td_lazy_get_padded_key(&t, s, NULL, td_scalar_int(0), 0), TD_EINVAL);
	td_cr_assert_err(td_lazy_get_nested_key(&t, &o, s, NULL), TD_EINVAL);
	/* A missing key. */
	td_cr_assert_err(td_lazy_get_tensor_into_key(&dst, s, miss), TD_ENOTFOUND);
	td_cr_assert_err(td_lazy_get_list_key(&list, &n, s, miss), TD_ENOTFOUND);
	td_cr_assert_err(td_lazy_get_padded_key(&t, s, miss, td_scalar_int(0), 0), TD_ENOTFOUND);
	td_cr_assert_err(td_lazy_get_nested_key(&t, &o, s, miss), TD_ENOTFOUND);
	/* A leaf that is not a tensor. */
	td_cr_assert_err(td_lazy_get_tensor_into_key(&dst, s, kstr), TD_ETYPE);
	td_cr_assert_err(td_lazy_get_list_key(&list, &n, s, kstr), TD_ETYPE);
	td_cr_assert_err(td_lazy_get_padded_key(&t, s, kstr, td_scalar_int(0), 0), TD_ETYPE);
	td_cr_assert_err(td_lazy_get_nested_key(&t, &o, s, kstr), TD_ETYPE);

	/* Through a dense dict holding the stack under "w.v". */
	td_cr_assert_ok(td_dict_new(&d, 0, NULL));
	td_cr_assert_ok(td_dict_set_dict_take_key(d, kw, s));
	td_cr_assert_ok(td_lazy_get_list_key(&list, &n, d, deep));
	cr_assert(n == 2 && td_tensor_shape(&list[1])[0] == 3);
	td_tensor_array_free(list, n);
	td_cr_assert_ok(td_lazy_get_nested_key(&t, &o, d, deep));
	cr_assert_eq(td_tensor_shape(&t)[0], 5);
	td_tensor_release(&t);
	td_tensor_release(&o);
	td_cr_assert_ok(td_lazy_get_padded_key(&t, d, deep, td_scalar_int(0), 0));
	cr_assert_eq(td_tensor_shape(&t)[1], 3);
	td_tensor_release(&t);
	td_cr_assert_err(td_lazy_get_tensor_into_key(&dst, d, deep), TD_ETYPE); /* ragged */

	td_tensor_release(&dst);
	td_dict_free(d);
	td_key_free(ky);
	td_key_free(kz);
	td_key_free(miss);
	td_key_free(kstr);
	td_key_free(kw);
	td_key_free(deep);
}

/* ------------------------------------------------------------------------ */
/* Indexing                                                                  */
/* ------------------------------------------------------------------------ */

static void check_index(const fixture *f, const td_index *idx, size_t n)
{
	td_dict *dense, *lazy;

	td_cr_assert_ok(td_dict_index(&dense, f->ref, idx, n));
	td_cr_assert_ok(td_dict_index(&lazy, f->lazy, idx, n));
	assert_same(dense, lazy);
	td_dict_free(dense);
	td_dict_free(lazy);
}

Test(lazy, index_matches_dense)
{
	static const int64_t list[3] = { 2, 0, -1 }, list2[2] = { 1, 0 };
	static const bool mask3[3] = { true, false, true }, mask2[2] = { false, true };
	for (int sd = 0; sd < 2; sd++) {
		fixture f;
		int64_t sz = sd == 0 ? 3 : 2; /* size of the first batch dim */
		fixture_make(&f, sd);
		const td_index *lst = NULL;
		td_index e[][3] = {
			{ td_index_int(1) },
			{ td_index_int(-1), td_index_int(0) },
			{ td_index_slice(0, 2, 1) },
			{ td_index_all(), td_index_slice(1, TD_SLICE_NONE, 1) },
			{ td_index_range(0, sz, 2), td_index_int(1) },
			{ td_index_newaxis(), td_index_all(), td_index_int(0) },
			{ td_index_ellipsis(), td_index_int(1) },
			{ td_index_ellipsis(), td_index_slice(1, 1, 1) },
			{ sd == 0 ? td_index_list(list, 3) : td_index_list(list2, 2) },
			{ td_index_all(), sd == 0 ? td_index_list(list2, 2) : td_index_list(list, 3) },
			{ sd == 0 ? td_index_mask(mask3, 3) : td_index_mask(mask2, 2) },
			{ td_index_all(), sd == 0 ? td_index_mask(mask2, 2) : td_index_mask(mask3, 3) },
		};
		size_t ne[] = { 1, 2, 1, 2, 2, 3, 2, 2, 1, 2, 1, 2 };
		(void)lst;
		for (size_t i = 0; i < TD_TEST_ARRAY_LEN(ne); i++)
			check_index(&f, e[i], ne[i]);
		/* an int at the stack dim gives that child's view */
		{
			td_index x[2] = { td_index_all(), td_index_all() };
			td_dict *c;
			x[sd] = td_index_int(1);
			td_cr_assert_ok(td_dict_index(&c, f.lazy, x, 2));
			cr_assert(!td_dict_is_lazy(c));
			cr_assert_eq(td_dict_equal(c, f.parts[1]), 1);
			td_dict_free(c);
		}
		fixture_free(&f);
	}
}

Test(lazy, index_failures)
{
	fixture f;
	td_dict *out;
	static const int64_t l2[2] = { 0, 1 };
	td_index bad[3];

	fixture_make(&f, 0);
	bad[0] = td_index_int(5);
	td_cr_assert_err(td_dict_index(&out, f.lazy, bad, 1), TD_EINDEX);
	bad[0] = td_index_all();
	bad[1] = td_index_all();
	bad[2] = td_index_all();
	td_cr_assert_err(td_dict_index(&out, f.lazy, bad, 3), TD_EINDEX);
	/* a list at the stack dim together with another list */
	bad[0] = td_index_list(l2, 2);
	bad[1] = td_index_list(l2, 2);
	td_cr_assert_err(td_dict_index(&out, f.lazy, bad, 2), TD_ENOTSUP);
	td_cr_assert_err(td_dict_index(&out, f.lazy, NULL, 1), TD_EINVAL);
	fixture_free(&f);
	/* a slice at the stack dim between two lists */
	{
		int64_t b[3] = { 2, 2, 2 }, sh[3] = { 2, 2, 2 };
		td_dict *d, **parts, *s;
		td_tensor t;
		size_t n;
		td_cr_assert_ok(td_dict_new(&d, 3, b));
		td_test_arange(&t, TD_DTYPE_F32, 3, sh);
		td_cr_assert_ok(td_dict_set_tensor_take(d, "x", &t));
		td_cr_assert_ok(td_dict_unbind(&parts, &n, d, 1));
		td_cr_assert_ok(td_lazy_stack(&s, parts, n, 1, 0));
		bad[0] = td_index_list(l2, 2);
		bad[1] = td_index_all();
		bad[2] = td_index_list(l2, 2);
		td_cr_assert_err(td_dict_index(&out, s, bad, 3), TD_ENOTSUP);
		td_dict_free(s);
		td_dict_array_free(parts, n);
		td_dict_free(d);
	}
}

/* ------------------------------------------------------------------------ */
/* Writes                                                                    */
/* ------------------------------------------------------------------------ */

Test(lazy, setitem_and_fill_reach_children)
{
	for (int sd = 0; sd < 2; sd++) {
		fixture f;
		td_dict *val;
		td_index x[2] = { td_index_slice(0, 2, 1), td_index_int(1) };
		static const int64_t list[2] = { 1, 0 };

		fixture_make(&f, sd);
		/* the value: ref[x] + 100, written into both */
		td_cr_assert_ok(td_dict_index(&val, f.ref, x, 2));
		{
			td_dict *v2;
			td_cr_assert_ok(td_dict_clone(&v2, val));
			td_cr_assert_ok(td_dict_binary_scalar_inplace(v2, td_scalar_int(100), TD_OP_ADD));
			td_dict_free(val);
			val = v2;
		}
		td_cr_assert_ok(td_dict_index_put(f.lazy, x, 2, val));
		td_cr_assert_ok(td_dict_index_put(f.ref, x, 2, val));
		assert_same(f.ref, f.lazy); /* the children are views of ref: check both ways */
		td_dict_free(val);
		/* fill through a list at the first dim */
		x[0] = td_index_list(list, 2);
		x[1] = td_index_all();
		td_cr_assert_ok(td_dict_index_fill(f.lazy, x, 2, td_scalar_int(-7)));
		{
			const td_tensor *a;
			td_tensor g;
			td_cr_assert_ok(td_dict_get_tensor(&a, f.ref, "a"));
			td_cr_assert_ok(td_lazy_get_tensor(&g, f.lazy, "a"));
			assert_tensor_eq(&g, a);
			cr_assert_float_eq(at(a, 1, 0, 0), -7.0, 0);
			td_tensor_release(&g);
		}
		/* failures: wrong value shape; int at the stack dim writes one child */
		{
			td_dict *wrong;
			td_cr_assert_ok(td_dict_new(&wrong, 0, NULL));
			td_cr_assert_err(td_dict_index_put(f.lazy, x, 2, wrong), TD_ETYPE);
			td_dict_free(wrong);
		}
		fixture_free(&f);
	}
}

Test(lazy, set_through_to_children)
{
	fixture f;
	td_tensor t, g;
	const td_tensor *ct;
	const int64_t *b;

	fixture_make(&f, 1);
	b = td_dict_batch_shape(f.lazy);
	td_test_arange(&t, TD_DTYPE_F32, 2, b);
	/* plain set: each child gets its slice (a view of t) */
	td_cr_assert_ok(td_dict_set_tensor(f.lazy, "new.deep", &t));
	td_cr_assert_ok(td_dict_get_tensor(&ct, f.parts[2], "new.deep"));
	cr_assert_eq(ct->buffer, t.buffer);
	cr_assert_float_eq(td_test_element(ct, 1), 5.0, 0);
	td_cr_assert_ok(td_lazy_get_tensor(&g, f.lazy, "new.deep"));
	assert_tensor_eq(&g, &t);
	td_tensor_release(&g);
	/* in place: copied into the existing leaves */
	td_cr_assert_ok(td_tensor_fill(&t, td_scalar_int(3)));
	{
		td_tensor z;
		td_cr_assert_ok(td_tensor_zeros(&z, TD_DTYPE_F32, 2, b));
		td_cr_assert_ok(td_dict_set_tensor_inplace(f.lazy, "new.deep", &z));
		cr_assert_float_eq(td_test_element(&t, 1), 0.0, 0); /* t is what children hold */
		td_tensor_release(&z);
	}
	/* strings go to every child; deletion from every child */
	td_cr_assert_ok(td_dict_set_string(f.lazy, "s2", "x"));
	cr_assert_eq(td_dict_contains(f.parts[0], "s2", 0), 1);
	td_cr_assert_ok(td_dict_del(f.lazy, "new"));
	cr_assert_eq(td_dict_contains(f.parts[1], "new", 0), 0);
	/* failures */
	td_cr_assert_err(td_dict_del(f.lazy, "new"), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_set_tensor_inplace(f.lazy, "zz", &t), TD_ENOTFOUND);
	td_cr_assert_err(td_dict_set_tensor_inplace(f.lazy, "n", &t), TD_ETYPE);
	{
		int64_t wrong[2] = { 5, 5 };
		td_tensor w;
		td_cr_assert_ok(td_tensor_zeros(&w, TD_DTYPE_F32, 2, wrong));
		td_cr_assert_err(td_dict_set_tensor(f.lazy, "w", &w), TD_ETYPE);
		td_cr_assert_err(td_dict_set_tensor_inplace(f.lazy, "a", &w), TD_ETYPE);
		td_tensor_release(&w);
	}
	td_cr_assert_err(td_dict_set_dict(f.lazy, "d", f.ref), TD_ENOTSUP);
	/* A dense dict takes a copy of the stack (test_lazy_nested.c tests the rest). */
	{
		td_dict *held;
		td_cr_assert_ok(td_dict_set_dict(f.ref, "d", f.lazy));
		td_cr_assert_ok(td_dict_get_dict(&held, f.ref, "d"));
		cr_assert(td_dict_is_lazy(held));
		cr_assert_neq(held, f.lazy);
		td_cr_assert_ok(td_dict_del(f.ref, "d"));
	}
	td_tensor_release(&t);
	fixture_free(&f);
}

Test(lazy, lock_and_unlock)
{
	fixture f;
	td_tensor t;

	fixture_make(&f, 0);
	td_cr_assert_ok(td_dict_lock(f.lazy));
	cr_assert(td_dict_is_locked(f.lazy));
	cr_assert(td_dict_is_locked(f.parts[0]));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 2, td_dict_batch_shape(f.lazy)));
	td_cr_assert_err(td_dict_set_tensor(f.lazy, "new", &t), TD_ELOCKED);
	td_cr_assert_err(td_dict_del(f.lazy, "a"), TD_ELOCKED);
	td_cr_assert_err(td_dict_set_string(f.lazy, "new", "x"), TD_ELOCKED);
	td_cr_assert_ok(td_dict_unlock(f.lazy));
	cr_assert(!td_dict_is_locked(f.parts[2]));
	td_cr_assert_ok(td_dict_set_tensor(f.lazy, "new", &t));
	/* a child locked on its own refuses the deletion before anything is deleted */
	td_cr_assert_ok(td_dict_lock(f.parts[1]));
	td_cr_assert_err(td_dict_del(f.lazy, "new"), TD_ELOCKED);
	cr_assert_eq(td_dict_contains(f.parts[0], "new", 0), 1);
	td_cr_assert_ok(td_dict_unlock(f.parts[1]));
	td_tensor_release(&t);
	fixture_free(&f);
}

/* ------------------------------------------------------------------------ */
/* unbind, copies, stacks of stacks, dense forms                             */
/* ------------------------------------------------------------------------ */

Test(lazy, unbind_matches_dense)
{
	for (int sd = 0; sd < 2; sd++) {
		fixture f;
		fixture_make(&f, sd);
		for (int dim = -2; dim < 2; dim++) {
			td_dict **dp, **lp;
			size_t dn, ln;
			td_cr_assert_ok(td_dict_unbind(&dp, &dn, f.ref, dim));
			td_cr_assert_ok(td_dict_unbind(&lp, &ln, f.lazy, dim));
			cr_assert_eq(dn, ln);
			for (size_t i = 0; i < dn; i++)
				assert_same(dp[i], lp[i]);
			td_dict_array_free(dp, dn);
			td_dict_array_free(lp, ln);
		}
		{
			td_dict **lp;
			size_t ln;
			td_cr_assert_err(td_dict_unbind(&lp, &ln, f.lazy, 2), TD_EINVAL);
		}
		fixture_free(&f);
	}
}

Test(lazy, copy_clone_and_unsupported)
{
	fixture f;
	td_dict *c, *out, **arr;
	size_t n;
	int64_t shape[1] = { 6 };

	fixture_make(&f, 0);
	td_cr_assert_ok(td_dict_copy(&c, f.lazy));
	cr_assert(td_dict_is_lazy(c));
	assert_same(f.ref, c);
	td_dict_free(c);
	td_cr_assert_ok(td_dict_clone(&c, f.lazy));
	assert_same(f.ref, c);
	td_dict_free(c);
	td_cr_assert_err(td_dict_reshape(&out, f.lazy, 1, shape), TD_ENOTSUP);
	td_cr_assert_err(td_dict_view(&out, f.lazy, 1, shape), TD_ENOTSUP);
	td_cr_assert_err(td_dict_unsqueeze(&out, f.lazy, 0), TD_ENOTSUP);
	td_cr_assert_err(td_dict_squeeze(&out, f.lazy, 0), TD_ENOTSUP);
	td_cr_assert_err(td_dict_rename(f.lazy, "a", "b"), TD_ENOTSUP);
	td_cr_assert_err(td_dict_set_batch_shape(f.lazy, 1, shape), TD_ENOTSUP);
	td_cr_assert_err(td_dict_binary(&out, f.lazy, f.ref, TD_OP_ADD), TD_ENOTSUP);
	td_cr_assert_err(td_dict_binary_inplace(f.lazy, f.ref, TD_OP_ADD), TD_ENOTSUP);
	td_cr_assert_err(td_dict_stack(&out, (const td_dict *const *)&f.lazy, 1, 0), TD_ENOTSUP);
	(void)arr;
	(void)n;
	fixture_free(&f);
}

/* ---- per-leaf operations: each child on its own ---- */

static int times_k(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	(void)item;
	return td_tensor_binary_scalar(out, in, td_scalar_int(*(const int *)payload), TD_OP_MUL);
}

/* A deep copy of a lazy stack, to write into. */
static td_dict *clone_of(const td_dict *d)
{
	td_dict *c;

	td_cr_assert_ok(td_dict_clone(&c, d));
	return c;
}

Test(lazy, apply_and_elementwise_operations_match_dense)
{
	for (int sd = 0; sd < 2; sd++) {
		fixture f;
		td_dict *got, *want, *c, *cref;
		int k = 3;

		fixture_make(&f, sd);
		/* apply: a new stack at the same dim, each child's leaves mapped */
		td_cr_assert_ok(td_dict_apply(&want, f.ref, times_k, &k));
		td_cr_assert_ok(td_dict_apply(&got, f.lazy, times_k, &k));
		cr_assert(td_dict_is_lazy(got));
		cr_assert_eq(td_lazy_stack_dim(got), sd);
		cr_assert_eq(td_dict_parent(td_lazy_child(got, 1)), got);
		assert_same(want, got);
		td_dict_free(got);
		td_dict_free(want);
		/* arithmetic with a scalar */
		td_cr_assert_ok(td_dict_binary_scalar(&want, f.ref, td_scalar_int(7), TD_OP_ADD));
		td_cr_assert_ok(td_dict_binary_scalar(&got, f.lazy, td_scalar_int(7), TD_OP_ADD));
		cr_assert(td_dict_is_lazy(got));
		assert_same(want, got);
		td_dict_free(got);
		td_dict_free(want);
		/* in place, on deep copies: apply_inplace, binary_scalar_inplace, zero */
		c = clone_of(f.lazy);
		cref = clone_of(f.ref);
		td_cr_assert_ok(td_dict_apply_inplace(c, times_k, &k));
		td_cr_assert_ok(td_dict_apply_inplace(cref, times_k, &k));
		assert_same(cref, c);
		td_cr_assert_ok(td_dict_binary_scalar_inplace(c, td_scalar_int(2), TD_OP_SUB));
		td_cr_assert_ok(td_dict_binary_scalar_inplace(cref, td_scalar_int(2), TD_OP_SUB));
		assert_same(cref, c);
		/* the source is untouched */
		assert_same(f.ref, f.lazy);
		cr_assert_eq(td_dict_equal(c, f.lazy), 0);
		td_cr_assert_ok(td_dict_zero(c));
		td_cr_assert_ok(td_dict_zero(cref));
		assert_same(cref, c);
		td_dict_free(c);
		td_dict_free(cref);
		fixture_free(&f);
	}
}

Test(lazy, equality_compares_by_value)
{
	fixture f;
	td_dict *c, *other;
	td_tensor one;
	int64_t b1 = 2;

	fixture_make(&f, 0);
	cr_assert_eq(td_dict_equal(f.lazy, f.ref), 1);
	cr_assert_eq(td_dict_equal(f.ref, f.lazy), 1);
	cr_assert_eq(td_dict_equal(f.lazy, f.lazy), 1);
	cr_assert_eq(td_dict_allclose(f.lazy, f.ref, 0, 0, false), 1);
	c = clone_of(f.lazy);
	cr_assert_eq(td_dict_equal(c, f.lazy), 1);
	/* one element of one child changed */
	td_cr_assert_ok(td_tensor_full(&one, TD_DTYPE_I64, 1, &b1, td_scalar_int(-5)));
	td_cr_assert_ok(td_dict_set_tensor_inplace(td_lazy_child(c, 2), "n.b", &one));
	td_tensor_release(&one);
	cr_assert_eq(td_dict_equal(c, f.lazy), 0);
	cr_assert_eq(td_dict_equal(f.ref, c), 0);
	cr_assert_eq(td_dict_allclose(c, f.ref, 0, 10, false), 1);
	cr_assert_eq(td_dict_allclose(c, f.ref, 0, 1, false), 0);
	td_cr_assert_err(td_dict_allclose(c, f.ref, -1, 0, false), TD_EINVAL);
	td_dict_free(c);
	/* another stack dim: another batch shape, not equal */
	td_cr_assert_ok(td_lazy_stack(&other, f.parts, f.n, 1, 0));
	cr_assert_eq(td_dict_equal(other, f.lazy), 0);
	td_dict_free(other);
	fixture_free(&f);
}

Test(lazy, split_and_chunk_match_dense)
{
	for (int sd = 0; sd < 2; sd++) {
		for (int dim = 0; dim < 2; dim++) {
			fixture f;
			td_dict **a, **b, *snap;
			int64_t sizes[3];
			size_t na, nb, i;

			fixture_make(&f, sd);
			/* 1, 0 and the rest of the dim's rows */
			sizes[0] = 1;
			sizes[1] = 0;
			sizes[2] = td_dict_batch_shape(f.ref)[dim] - 1;
			td_cr_assert_ok(td_dict_split(&a, &na, f.ref, 2, dim));
			td_cr_assert_ok(td_dict_split(&b, &nb, f.lazy, 2, dim));
			cr_assert_eq(na, nb);
			for (i = 0; i < na; i++) {
				cr_assert(td_dict_is_lazy(b[i]), "sd %d dim %d piece %zu", sd, dim, i);
				assert_same(a[i], b[i]);
			}
			td_dict_array_free(a, na);
			td_dict_array_free(b, nb);
			td_cr_assert_ok(td_dict_chunk(&a, &na, f.ref, 2, dim));
			td_cr_assert_ok(td_dict_chunk(&b, &nb, f.lazy, 2, dim));
			cr_assert_eq(na, nb);
			for (i = 0; i < na; i++)
				assert_same(a[i], b[i]);
			td_dict_array_free(a, na);
			td_dict_array_free(b, nb);
			td_cr_assert_ok(td_dict_split_sizes(&a, &na, f.ref, sizes, 3, dim));
			td_cr_assert_ok(td_dict_split_sizes(&b, &nb, f.lazy, sizes, 3, dim));
			cr_assert_eq(na, 3);
			cr_assert_eq(nb, 3);
			for (i = 0; i < na; i++) {
				cr_assert_eq(td_dict_batch_shape(b[i])[dim], sizes[i]);
				assert_same(a[i], b[i]);
			}
			/* views: a write into a piece reaches the children (views of ref) */
			snap = clone_of(f.ref);
			td_cr_assert_ok(td_dict_zero(b[2]));
			cr_assert_eq(td_dict_equal(f.lazy, snap), 0, "sd %d dim %d", sd, dim);
			cr_assert_eq(td_dict_equal(f.lazy, f.ref), 1);
			td_dict_free(snap);
			td_dict_array_free(a, na);
			td_dict_array_free(b, nb);
			td_cr_assert_err(td_dict_split(&b, &nb, f.lazy, 0, dim), TD_EINVAL);
			td_cr_assert_err(td_dict_split_sizes(&b, &nb, f.lazy, sizes, 2, dim), TD_EINVAL);
			td_cr_assert_err(td_dict_chunk(&b, &nb, f.lazy, 2, 5), TD_EINVAL);
			fixture_free(&f);
		}
	}
}

/* Structure operations child by child: select / exclude, flatten /
 * unflatten, empty. Each gives a new stack equal to the reference's result. */
Test(lazy, selection_flatten_and_empty_match_dense)
{
	static const char *const keep[2] = { "a", "n.m" };
	static const char *const missing[2] = { "a", "nope" };
	for (int sd = 0; sd < 2; sd++) {
		fixture f;
		td_dict *want, *got, *back;

		fixture_make(&f, sd);
		td_cr_assert_ok(td_dict_select(&want, f.ref, keep, 2, true));
		td_cr_assert_ok(td_dict_select(&got, f.lazy, keep, 2, true));
		cr_assert(td_dict_is_lazy(got));
		cr_assert_eq(td_lazy_stack_dim(got), sd);
		assert_same(want, got);
		td_dict_free(want);
		td_dict_free(got);
		td_cr_assert_ok(td_dict_exclude(&want, f.ref, keep, 2));
		td_cr_assert_ok(td_dict_exclude(&got, f.lazy, keep, 2));
		assert_same(want, got);
		td_dict_free(want);
		td_dict_free(got);
		/* strict: a key no child has */
		got = (td_dict *)1;
		td_cr_assert_err(td_dict_select(&got, f.lazy, missing, 2, true), TD_ENOTFOUND);
		cr_assert_null(got);
		td_cr_assert_ok(td_dict_select(&got, f.lazy, missing, 2, false));
		cr_assert_eq(td_dict_len(got), 1u);
		td_dict_free(got);
		/* flatten and back */
		td_cr_assert_ok(td_dict_flatten_keys(&want, f.ref, "/"));
		td_cr_assert_ok(td_dict_flatten_keys(&got, f.lazy, "/"));
		cr_assert(td_dict_is_lazy(got));
		cr_assert_eq(td_dict_contains(got, "n/m/c", 0), 1);
		assert_same(want, got);
		td_cr_assert_ok(td_dict_unflatten_keys(&back, got, "/"));
		assert_same(f.ref, back);
		td_dict_free(back);
		td_cr_assert_err(td_dict_flatten_keys(&back, f.lazy, ""), TD_EINVAL);
		cr_assert_null(back);
		td_dict_free(want);
		td_dict_free(got);
		/* empty, with and without the nested structure */
		td_cr_assert_ok(td_dict_empty(&want, f.ref, true));
		td_cr_assert_ok(td_dict_empty(&got, f.lazy, true));
		cr_assert(td_dict_is_lazy(got));
		cr_assert_eq(td_dict_contains(got, "n.m", 0), 1);
		assert_same(want, got);
		td_dict_free(want);
		td_dict_free(got);
		td_cr_assert_ok(td_dict_empty(&got, f.lazy, false));
		cr_assert_eq(td_dict_len(got), 0u);
		cr_assert_eq(td_dict_batch_ndim(got), 2);
		td_dict_free(got);
		fixture_free(&f);
	}
}

/* The other side of the update tests: "a" (existing, new values), "n.new"
 * (a new leaf in an existing dict), "w.x" (a new dict, which must have the
 * batch dims: not when `batchless`), "s" (a string), at the batch shape of
 * the reference, or with no batch dims at all. */
static td_dict *update_source(const td_dict *ref, bool batchless)
{
	const td_tensor *a;
	int64_t sx[3];
	td_tensor t;
	td_dict *o;

	td_cr_assert_ok(td_dict_new(&o, batchless ? 0 : 2, td_dict_batch_shape(ref)));
	td_cr_assert_ok(td_dict_get_tensor(&a, ref, "a"));
	td_cr_assert_ok(td_tensor_full(&t, a->dtype, a->ndim, td_tensor_shape(a), td_scalar_int(9)));
	td_cr_assert_ok(td_dict_set_tensor_take(o, "a", &t));
	memcpy(sx, td_dict_batch_shape(ref), 2 * sizeof(int64_t));
	sx[2] = 3;
	td_test_arange(&t, TD_DTYPE_I32, 3, sx);
	td_cr_assert_ok(td_dict_set_tensor_take(o, "n.new", &t));
	td_test_arange(&t, TD_DTYPE_F64, 2, sx);
	if (batchless)
		td_tensor_release(&t);
	else
		td_cr_assert_ok(td_dict_set_tensor_take(o, "w.x", &t));
	td_cr_assert_ok(td_dict_set_string(o, "s", "updated"));
	return o;
}

/* update with a stack on either side, as tensordict: each child gets its
 * slice of the other dict; a stack on the right is read densely. */
Test(lazy, update_reaches_every_child)
{
	for (int sd = 0; sd < 2; sd++) {
		for (int batchless = 0; batchless < 2; batchless++) {
			fixture f;
			td_dict *lz, *ref, *o, *d;
			const char *s;

			fixture_make(&f, sd);
			/* deep copies: the fixture's children are views of its reference */
			lz = clone_of(f.lazy);
			ref = clone_of(f.ref);
			o = update_source(ref, batchless);
			td_cr_assert_ok(td_dict_update(ref, o));
			td_cr_assert_ok(td_dict_update(lz, o));
			cr_assert_eq(td_dict_contains(lz, "w.x", 0), !batchless);
			cr_assert_eq(td_dict_contains(lz, "n.new", 0), 1);
			td_cr_assert_ok(td_dict_get_blob(&s, NULL, td_lazy_child(lz, 1), "s"));
			cr_assert_str_eq(s, "updated");
			assert_same(ref, lz);
			/* a stack on the right: its dense form */
			td_cr_assert_ok(td_dict_new(&d, 0, NULL));
			td_cr_assert_ok(td_dict_update(d, lz));
			cr_assert_eq(td_dict_is_lazy(d), false);
			cr_assert_eq(td_dict_equal(d, ref), 0); /* batch shape [] against [3, 2] */
			td_cr_assert_ok(td_dict_set_batch_shape(d, 2, td_dict_batch_shape(ref)));
			assert_same(d, lz);
			td_dict_free(d);
			td_dict_free(o);
			/* in place: only what exists, written into every child */
			o = update_source(ref, batchless);
			td_cr_assert_ok(td_dict_binary_scalar_inplace(ref, td_scalar_int(1), TD_OP_ADD));
			td_cr_assert_ok(td_dict_update_inplace(ref, o));
			td_cr_assert_ok(td_dict_binary_scalar_inplace(lz, td_scalar_int(1), TD_OP_ADD));
			td_cr_assert_ok(td_dict_update_inplace(lz, o));
			assert_same(ref, lz);
			td_dict_free(o);
			td_dict_free(lz);
			td_dict_free(ref);
			fixture_free(&f);
		}
	}
}

Test(lazy, update_failures)
{
	fixture f;
	td_dict *lz, *snap, *o;
	td_tensor t;
	int64_t bad[2] = { 4, 4 }, b = 3;

	fixture_make(&f, 0);
	lz = clone_of(f.lazy);
	snap = clone_of(f.ref);
	/* values off the stack's batch shape */
	td_cr_assert_ok(td_dict_new(&o, 0, NULL));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 2, bad));
	td_cr_assert_ok(td_dict_set_tensor_take(o, "a", &t));
	td_cr_assert_err(td_dict_update(lz, o), TD_ETYPE);
	td_cr_assert_err(td_dict_update_inplace(lz, o), TD_ETYPE);
	assert_same(snap, lz);
	td_dict_free(o);
	/* in place: a key the stack lacks, checked before anything is written */
	o = update_source(f.ref, false);
	td_cr_assert_err(td_dict_update_inplace(lz, o), TD_ENOTFOUND);
	assert_same(snap, lz);
	/* locked: no new keys */
	td_cr_assert_ok(td_dict_lock(lz));
	td_cr_assert_err(td_dict_update(lz, o), TD_ELOCKED);
	td_cr_assert_ok(td_dict_unlock(lz));
	td_dict_free(o);
	/* a batch that does not start with the stack's, with a leaf of that batch
	 * (the locked update wrote the existing leaves in place: a new snapshot) */
	td_dict_free(snap);
	snap = clone_of(lz);
	td_cr_assert_ok(td_dict_new(&o, 1, &b));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, &b));
	td_cr_assert_ok(td_dict_set_tensor_take(o, "v", &t));
	td_cr_assert_err(td_dict_update(lz, o), TD_ETYPE);
	td_dict_free(o);
	assert_same(snap, lz);
	td_cr_assert_err(td_dict_update(NULL, lz), TD_EINVAL);
	td_cr_assert_ok(td_dict_update(lz, lz));
	td_dict_free(snap);
	td_dict_free(lz);
	fixture_free(&f);
}

/* Ragged children and keys only some children have: apply reaches them all. */
Test(lazy, apply_reaches_ragged_and_partial_children)
{
	int64_t b = 2, s0[2] = { 2, 3 }, s1[2] = { 2, 5 };
	td_dict *kids[2], *lz, *out;
	const td_tensor *t;
	td_tensor x;
	int k = 10;

	td_cr_assert_ok(td_dict_new(&kids[0], 1, &b));
	td_cr_assert_ok(td_dict_new(&kids[1], 1, &b));
	td_test_arange(&x, TD_DTYPE_F32, 2, s0);
	td_cr_assert_ok(td_dict_set_tensor_take(kids[0], "a", &x));
	td_test_arange(&x, TD_DTYPE_F32, 2, s1);
	td_cr_assert_ok(td_dict_set_tensor_take(kids[1], "a", &x));
	td_test_arange(&x, TD_DTYPE_I32, 1, &b);
	td_cr_assert_ok(td_dict_set_tensor_take(kids[1], "only1", &x));
	td_cr_assert_ok(td_lazy_stack(&lz, kids, 2, 0, TD_LAZY_TAKE));
	td_cr_assert_ok(td_dict_apply(&out, lz, times_k, &k));
	td_cr_assert_ok(td_dict_get_tensor(&t, td_lazy_child(out, 0), "a"));
	cr_assert_eq(td_tensor_shape(t)[1], 3);
	cr_assert_eq(td_test_element(t, 5), 50.0);
	td_cr_assert_ok(td_dict_get_tensor(&t, td_lazy_child(out, 1), "a"));
	cr_assert_eq(td_tensor_shape(t)[1], 5);
	cr_assert_eq(td_test_element(t, 9), 90.0);
	td_cr_assert_ok(td_dict_get_tensor(&t, td_lazy_child(out, 1), "only1"));
	cr_assert_eq(td_dict_contains(out, "only1", 0), 0);
	/* ragged leaves have no dense form to compare */
	td_cr_assert_err(td_dict_equal(out, lz), TD_ETYPE);
	td_dict_free(out);
	td_dict_free(lz);
}

static int fail_on_second(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	int *calls = payload;

	(void)item;
	if (++*calls == 2)
		return TD_EIO;
	return td_tensor_clone(out, in);
}

/* A result of shape [7]: not under the batch, and not broadcastable into any leaf. */
static int drop_batch(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	int64_t seven = 7;

	(void)item;
	(void)payload;
	return td_tensor_full(out, in->dtype, 1, &seven, td_scalar_int(0));
}

Test(lazy, apply_failures_leave_nothing)
{
	fixture f;
	td_dict *out = (td_dict *)1;
	int calls = 0;

	fixture_make(&f, 0);
	/* the callback fails in the first child: nothing is left, the code is the callback's */
	td_cr_assert_err(td_dict_apply(&out, f.lazy, fail_on_second, &calls), TD_EIO);
	cr_assert_null(out);
	/* a result without the child's batch dims */
	td_cr_assert_err(td_dict_apply(&out, f.lazy, drop_batch, NULL), TD_ETYPE);
	cr_assert_null(out);
	td_cr_assert_err(td_dict_apply_inplace(f.lazy, drop_batch, NULL), TD_ETYPE);
	assert_same(f.ref, f.lazy);
	td_cr_assert_err(td_dict_apply(&out, f.lazy, NULL, NULL), TD_EINVAL);
	td_cr_assert_err(td_dict_binary_scalar(&out, f.lazy, td_scalar_int(1), (td_binop)99),
		TD_EINVAL);
	td_cr_assert_err(td_dict_binary_scalar_inplace(f.lazy, td_scalar_int(1), TD_OP_EQ), TD_EINVAL);
	assert_same(f.ref, f.lazy);
	fixture_free(&f);
}

Test(lazy, stack_of_lazy_stacks)
{
	fixture f[2];
	td_dict *outer, *dense, *refs[2], *sub;
	td_tensor g;
	const td_tensor *r;

	fixture_make(&f[0], 0);
	fixture_make(&f[1], 0);
	refs[0] = f[0].ref;
	refs[1] = f[1].ref;
	td_dict *inner[2] = { f[0].lazy, f[1].lazy };
	td_cr_assert_ok(td_lazy_stack(&outer, inner, 2, 1, 0));
	td_cr_assert_ok(td_dict_stack(&dense, (const td_dict *const *)refs, 2, 1));
	cr_assert_eq(td_dict_batch_shape(outer)[1], 2);
	td_cr_assert_ok(td_dict_get_tensor(&r, dense, "n.m.c"));
	td_cr_assert_ok(td_lazy_get_tensor(&g, outer, "n.m.c"));
	assert_tensor_eq(&g, r);
	td_tensor_release(&g);
	td_cr_assert_ok(td_lazy_get_dict(&sub, outer, "n.m"));
	cr_assert(td_dict_is_lazy(td_lazy_child(sub, 0)));
	td_dict_free(sub);
	assert_same(dense, outer);
	{
		td_index x[2] = { td_index_int(2), td_index_slice(0, 1, 1) };
		td_dict *dl, *dd;
		td_cr_assert_ok(td_dict_index(&dl, outer, x, 2));
		td_cr_assert_ok(td_dict_index(&dd, dense, x, 2));
		assert_same(dd, dl);
		td_dict_free(dl);
		td_dict_free(dd);
	}
	/* unbind beside the stack dim cuts the lazy children through their own unbind
	 * (dim 0 is their stack dim: they give dense copies; dim 2 lazy pieces) */
	for (int dim = 0; dim < 3; dim += 2) {
		td_dict **dp, **lp;
		size_t dn, ln;
		td_cr_assert_ok(td_dict_unbind(&dp, &dn, dense, dim));
		td_cr_assert_ok(td_dict_unbind(&lp, &ln, outer, dim));
		cr_assert_eq(dn, ln);
		for (size_t i = 0; i < dn; i++) {
			cr_assert_eq(td_dict_is_lazy(td_lazy_child(lp[i], 1)), dim == 2);
			assert_same(dp[i], lp[i]);
		}
		td_dict_array_free(dp, dn);
		td_dict_array_free(lp, ln);
	}
	td_dict_free(dense);
	td_dict_free(outer);
	fixture_free(&f[0]);
	fixture_free(&f[1]);
}

Test(lazy, maybe_dense_stack)
{
	fixture f;
	td_dict *out, *other, *mixed[2];
	td_tensor t;
	int64_t b3 = 3;

	fixture_make(&f, 0);
	td_cr_assert_ok(td_lazy_maybe_dense_stack(&out, (const td_dict *const *)f.parts, f.n, 0));
	cr_assert(!td_dict_is_lazy(out));
	cr_assert_eq(td_dict_equal(out, f.ref), 1);
	td_dict_free(out);
	/* keys differ: lazy, owning copies */
	td_cr_assert_ok(td_dict_copy(&other, f.parts[1]));
	td_cr_assert_ok(td_dict_del(other, "a"));
	mixed[0] = f.parts[0];
	mixed[1] = other;
	td_cr_assert_ok(td_lazy_maybe_dense_stack(&out, (const td_dict *const *)mixed, 2, 0));
	cr_assert(td_dict_is_lazy(out));
	cr_assert_eq(td_dict_contains(out, "a", 0), 0);
	cr_assert_eq(td_dict_contains(out, "n.b", 0), 1);
	td_dict_free(out);
	/* a lazy input gives a lazy result */
	mixed[1] = f.lazy;
	mixed[0] = f.lazy;
	td_cr_assert_ok(td_lazy_maybe_dense_stack(&out, (const td_dict *const *)mixed, 2, 0));
	cr_assert(td_dict_is_lazy(out));
	td_dict_free(out);
	/* failures */
	td_dict_free(other);
	td_cr_assert_ok(td_dict_new(&other, 1, &b3));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, &b3));
	td_cr_assert_ok(td_dict_set_tensor_take(other, "a", &t));
	mixed[0] = f.parts[0];
	mixed[1] = other;
	td_cr_assert_err(td_lazy_maybe_dense_stack(&out, (const td_dict *const *)mixed, 2, 0),
		TD_ETYPE);
	td_cr_assert_err(td_lazy_maybe_dense_stack(&out, (const td_dict *const *)mixed, 0, 0),
		TD_EINVAL);
	td_cr_assert_err(td_lazy_maybe_dense_stack(NULL, (const td_dict *const *)mixed, 2, 0),
		TD_EINVAL);
	td_dict_free(other);
	fixture_free(&f);
}

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

typedef struct sweep_ctx {
	fixture f;
	td_tensor t;
	td_dict *out, *dense;
	td_dict **arr;
	size_t n;
} sweep_ctx;

static int sweep_body(void *p)
{
	sweep_ctx *c = p;
	td_index x[1] = { td_index_slice(0, 2, 1) };
	int rc;

	c->t.buffer = NULL;
	c->out = c->dense = NULL;
	c->arr = NULL;
	rc = td_lazy_get_tensor(&c->t, c->f.lazy, "n.m.c");
	if (rc >= 0)
		rc = td_dict_index(&c->out, c->f.lazy, x, 1);
	if (rc >= 0)
		rc = td_lazy_get_dict(&c->dense, c->f.lazy, "n");
	/* unbind beside the stack dim: the dense children are cut in place */
	if (rc >= 0)
		rc = td_dict_unbind(&c->arr, &c->n, c->f.lazy, 1);
	/* per-leaf operations and cuts made child by child, freed at once */
	if (rc >= 0) {
		td_dict *r = NULL, **pieces = NULL;
		size_t np = 0;
		int k = 2;

		rc = td_dict_apply(&r, c->f.lazy, times_k, &k);
		td_dict_free(r);
		r = NULL;
		if (rc >= 0)
			rc = td_dict_binary_scalar(&r, c->f.lazy, td_scalar_int(1), TD_OP_ADD);
		if (rc >= 0)
			rc = td_dict_equal(r, c->f.lazy);
		td_dict_free(r);
		if (rc >= 0)
			rc = td_dict_split(&pieces, &np, c->f.lazy, 2, 0);
		td_dict_array_free(pieces, np);
		pieces = NULL;
		np = 0;
		if (rc >= 0)
			rc = td_dict_chunk(&pieces, &np, c->f.lazy, 2, 1);
		td_dict_array_free(pieces, np);
		r = NULL;
		if (rc >= 0)
			rc = td_dict_select(&r, c->f.lazy, (const char *const[]){ "n.b" }, 1, true);
		td_dict_free(r);
		r = NULL;
		if (rc >= 0)
			rc = td_dict_flatten_keys(&r, c->f.lazy, ".");
		td_dict_free(r);
		r = NULL;
		if (rc >= 0)
			rc = td_dict_empty(&r, c->f.lazy, true);
		td_dict_free(r);
		/* an update of a copy: each child gets its slice of the reference */
		r = NULL;
		if (rc >= 0)
			rc = td_dict_clone(&r, c->f.lazy);
		if (rc >= 0)
			rc = td_dict_update(r, c->f.ref);
		if (rc >= 0)
			rc = td_dict_update_inplace(r, c->f.ref);
		td_dict_free(r);
		if (rc >= 0)
			rc = TD_OK;
		if (rc < 0)
			td_dict_array_free(c->arr, c->n);
	}
	if (rc < 0) {
		td_tensor_release(&c->t);
		td_dict_free(c->out);
		td_dict_free(c->dense);
	}
	return rc;
}

static void sweep_cleanup(void *p)
{
	sweep_ctx *c = p;

	td_tensor_release(&c->t);
	td_dict_free(c->out);
	td_dict_free(c->dense);
	td_dict_array_free(c->arr, c->n);
}

Test(lazy, allocation_failures_leak_nothing)
{
	sweep_ctx c;

	memset(&c, 0, sizeof(c));
	fixture_make(&c.f, 0);
	td_test_enomem_sweep(sweep_body, sweep_cleanup, &c);
	fixture_free(&c.f);
}

/*
 * The cached schema follows every structural change of a child, at any
 * depth: borrowed children (the sum of their generations) and children the
 * stack owns (its own generation, which theirs reach as its descendants).
 */
static void schema_follows_children(unsigned flags)
{
	td_dict *c[3], *s, *sub, *nested;
	td_tensor t, got, one;
	const td_value *v;
	td_dict_iter *it;
	td_item item;
	int64_t b = 2, shape2[2] = { 3, 2 };
	size_t count;

	for (int i = 0; i < 3; i++) {
		td_cr_assert_ok(td_dict_new(&c[i], 1, &b));
		td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_F32, 1, &b, td_scalar_float(i)));
		td_cr_assert_ok(td_dict_set_tensor(c[i], "a.b.x", &t));
		td_cr_assert_ok(td_dict_set_tensor(c[i], "y", &t));
		td_tensor_release(&t);
	}
	td_cr_assert_ok(td_lazy_stack(&s, c, 3, 0, flags));
	/* Cache the schema, then change one child deep down. */
	cr_assert_eq(td_dict_contains(s, "a.b.x", 0), 1);
	cr_assert_eq(td_dict_contains(s, "a.b.z", 0), 0);
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, &b));
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(td_dict_contains(s, "a.b.z", 0), 0, "key in %d of 3 children", i);
		td_cr_assert_ok(td_dict_set_tensor(c[i], "a.b.z", &t));
	}
	cr_assert_eq(td_dict_contains(s, "a.b.z", 0), 1);
	cr_assert_eq(td_dict_len(s), 2);
	/* A deletion deep in one child drops the key; a rename too. */
	td_cr_assert_ok(td_lazy_get_tensor(&got, s, "a.b.z"));
	td_tensor_release(&got);
	td_cr_assert_ok(td_dict_del(c[1], "a.b.z"));
	cr_assert_eq(td_dict_contains(s, "a.b.z", 0), 0);
	td_cr_assert_err(td_lazy_get_tensor(&got, s, "a.b.z"), TD_ENOTFOUND);
	td_cr_assert_ok(td_dict_rename(c[2], "y", "w"));
	cr_assert_eq(td_dict_contains(s, "y", 0), 0);
	cr_assert_eq(td_dict_len(s), 1);
	td_cr_assert_ok(td_dict_rename(c[2], "w", "y"));
	cr_assert_eq(td_dict_len(s), 2);
	/* A leaf that becomes a dict in one child is no key of the stack. */
	td_cr_assert_ok(td_dict_del(c[0], "y"));
	td_cr_assert_ok(td_dict_set_tensor(c[0], "y.q", &t));
	cr_assert_eq(td_dict_contains(s, "y", 0), 0);
	td_cr_assert_ok(td_dict_del(c[0], "y"));
	td_cr_assert_ok(td_dict_set_tensor(c[0], "y", &t));
	cr_assert_eq(td_dict_contains(s, "y", TD_LEAVES_ONLY), 1);
	/* Replacing a nested dict by another (set_dict) is seen through the stack. */
	td_cr_assert_ok(td_dict_new(&nested, 1, &b));
	td_cr_assert_ok(td_tensor_full(&one, TD_DTYPE_F32, 1, &b, td_scalar_float(7)));
	td_cr_assert_ok(td_dict_set_tensor(nested, "x", &one));
	td_cr_assert_ok(td_dict_set_dict(c[1], "a.b", nested));
	td_dict_free(nested);
	td_cr_assert_ok(td_lazy_get_tensor(&got, s, "a.b.x"));
	cr_assert_eq(((float *)td_tensor_data(&got))[2], 7.0f);
	cr_assert_eq(((float *)td_tensor_data(&got))[0], 0.0f);
	td_tensor_release(&got);
	/* A set of an existing leaf through the stack reaches the children, and a
	 * tensor replaced by one of another shape is stacked with its new shape. */
	td_cr_assert_ok(td_tensor_zeros(&got, TD_DTYPE_F32, 2, shape2));
	td_cr_assert_ok(td_dict_set_tensor(s, "y", &got));
	td_tensor_release(&got);
	for (int i = 0; i < 3; i++) {
		td_tensor big;
		int64_t bs[2] = { 2, 5 };
		td_cr_assert_ok(td_tensor_zeros(&big, TD_DTYPE_F32, 2, bs));
		td_cr_assert_ok(td_dict_set_tensor(c[i], "y", &big));
		td_tensor_release(&big);
	}
	td_cr_assert_ok(td_lazy_get_tensor(&got, s, "y"));
	cr_assert_eq(got.ndim, 3);
	cr_assert_eq(td_tensor_shape(&got)[0], 3);
	cr_assert_eq(td_tensor_shape(&got)[2], 5);
	td_tensor_release(&got);
	/* Sub-stacks and iteration see the current structure. */
	td_cr_assert_ok(td_lazy_get_dict(&sub, s, "a.b"));
	cr_assert_eq(td_dict_contains(sub, "x", 0), 1);
	td_dict_free(sub);
	td_cr_assert_ok(td_dict_set_tensor(c[0], "a.extra", &t));
	td_cr_assert_ok(td_dict_set_tensor(c[1], "a.extra", &t));
	td_cr_assert_ok(td_dict_set_tensor(c[2], "a.extra", &t));
	td_cr_assert_ok(td_dict_iter_new(&it, s, TD_ITER_NESTED));
	count = 0;
	while (td_dict_iter_next(&item, it) == 1) {
		count++;
		cr_assert_not_null(item.value);
		if (strcmp(item.key, "extra") == 0)
			cr_assert_eq(item.value->kind, TD_VALUE_TENSOR);
	}
	td_dict_iter_free(it);
	cr_assert_eq(count, 5); /* a.b.x, a.b, a.extra, a, y */
	(void)v;
	td_tensor_release(&one);
	td_tensor_release(&t);
	td_dict_free(s); /* and the children it owns */
	for (int i = 0; i < 3 && !(flags & TD_LAZY_TAKE); i++)
		td_dict_free(c[i]);
}

Test(lazy, schema_cache_follows_changes_of_the_children)
{
	schema_follows_children(0);
}

Test(lazy, schema_cache_of_a_stack_owning_its_children_follows_their_changes)
{
	schema_follows_children(TD_LAZY_TAKE);
}

/* The pieces of one unbind. */
typedef struct unbound {
	td_dict **arr;
	size_t n;
} unbound;

typedef struct outer_ctx {
	td_dict *outer;
	unbound by_dim[2];
} outer_ctx;

static void outer_cleanup(void *p)
{
	outer_ctx *c = p;

	for (int k = 0; k < 2; k++) {
		td_dict_array_free(c->by_dim[k].arr, c->by_dim[k].n);
		c->by_dim[k] = (unbound){ NULL, 0 };
	}
}

/* unbind along dims 0 and 2 (beside the stack dim 1); a failed unbind leaves NULL. */
static int outer_body(void *p)
{
	static const int dims[2] = { 0, 2 };
	outer_ctx *c = p;
	int rc = TD_OK;

	for (int k = 0; k < 2; k++)
		c->by_dim[k] = (unbound){ NULL, 0 };
	for (int k = 0; k < 2 && rc >= 0; k++)
		rc = td_dict_unbind(&c->by_dim[k].arr, &c->by_dim[k].n, c->outer, dims[k]);
	if (rc < 0)
		outer_cleanup(c);
	return rc;
}

/* unbind beside the stack dim of a stack of lazy stacks, memory failing anywhere. */
Test(lazy, unbind_of_a_stack_of_stacks_leaks_nothing_without_memory)
{
	fixture f[2];
	outer_ctx c;

	fixture_make(&f[0], 0);
	fixture_make(&f[1], 0);
	td_dict *inner[2] = { f[0].lazy, f[1].lazy };
	td_cr_assert_ok(td_lazy_stack(&c.outer, inner, 2, 1, 0));
	td_test_enomem_sweep(outer_body, outer_cleanup, &c);
	td_dict_free(c.outer);
	fixture_free(&f[0]);
	fixture_free(&f[1]);
}

/* ------------------------------------------------------------------------ */
/* Stacked leaves: the gather of the cached-schema path                      */
/* ------------------------------------------------------------------------ */

/*
 * Stack n dicts whose batch shape is their leaf "x"'s whole shape lazily at
 * `sd`: the stacked leaf (the schema's gather) must equal td_tensor_stack()
 * of the leaves and own a new buffer.
 */
static void check_gather(const td_tensor *leaves, size_t n, int sd)
{
	td_dict *c[8], *s;
	td_tensor got, ref;
	size_t i;

	cr_assert_leq(n, 8);
	for (i = 0; i < n; i++) {
		td_cr_assert_ok(td_dict_new(&c[i], leaves[i].ndim, td_tensor_shape(&leaves[i])));
		td_cr_assert_ok(td_dict_set_tensor(c[i], "x", &leaves[i]));
	}
	td_cr_assert_ok(td_lazy_stack(&s, c, n, sd, 0));
	td_cr_assert_ok(td_tensor_stack(&ref, leaves, n, sd));
	td_cr_assert_ok(td_lazy_get_tensor(&got, s, "x"));
	cr_assert_eq(td_tensor_equal(&got, &ref), 1, "gather differs (%zu leaves at dim %d)", n, sd);
	cr_assert(td_tensor_is_contiguous(&got));
	for (i = 0; i < n; i++)
		cr_assert_neq(got.buffer, leaves[i].buffer, "the stacked leaf is a copy");
	td_tensor_release(&got);
	td_tensor_release(&ref);
	td_dict_free(s);
	for (i = 0; i < n; i++)
		td_dict_free(c[i]);
}

/* The pieces of t along `dim`, stacked back at every possible dim. */
static void check_unbind_gather(const td_tensor *t, int dim)
{
	td_tensor *pieces;
	size_t n;

	td_cr_assert_ok(td_tensor_unbind(&pieces, &n, t, dim));
	for (int sd = 0; sd < t->ndim; sd++)
		check_gather(pieces, n, sd);
	td_tensor_array_free(pieces, n);
}

Test(lazy, stacked_leaves_equal_the_general_stack_for_every_layout)
{
	static const td_dtype dtypes[] = { TD_DTYPE_U8, TD_DTYPE_I16, TD_DTYPE_F32, TD_DTYPE_F64,
		TD_DTYPE_C128 };
	int64_t s345[3] = { 3, 4, 5 }, s43[2] = { 4, 3 }, s03[2] = { 0, 3 };
	td_tensor t, tt, leaves[4];

	/* Evenly spaced views of one buffer (unbind pieces), every dtype size,
	 * stacked at their own dim (one memcpy) and at the others (one block). */
	for (size_t k = 0; k < TD_TEST_ARRAY_LEN(dtypes); k++) {
		td_test_arange(&t, dtypes[k], 3, s345);
		for (int dim = 0; dim < 3; dim++)
			check_unbind_gather(&t, dim);
		td_tensor_release(&t);
	}
	/* The pieces of a transposed tensor: strided children. */
	td_test_arange(&t, TD_DTYPE_F32, 3, s345);
	td_cr_assert_ok(td_tensor_transpose(&tt, &t, 0, 2));
	for (int dim = 0; dim < 3; dim++)
		check_unbind_gather(&tt, dim);
	/* One buffer, uneven offsets: rows 0, 1 and 3. */
	td_cr_assert_ok(td_tensor_select(&leaves[0], &t, 1, 0));
	td_cr_assert_ok(td_tensor_select(&leaves[1], &t, 1, 1));
	td_cr_assert_ok(td_tensor_select(&leaves[2], &t, 1, 3));
	check_gather(leaves, 3, 0);
	check_gather(leaves, 3, 2);
	/* The same view twice (a step of 0), then a child of its own buffer. */
	td_tensor_release(&leaves[1]);
	td_tensor_ref(&leaves[1], &leaves[0]);
	check_gather(leaves, 2, 1);
	td_tensor_release(&leaves[2]);
	td_cr_assert_ok(td_tensor_clone(&leaves[2], &leaves[0]));
	check_gather(leaves, 3, 1);
	/* Children of different strides: a contiguous one, then a transposed one. */
	for (int i = 0; i < 3; i++)
		td_tensor_release(&leaves[i]);
	td_test_arange(&leaves[0], TD_DTYPE_F64, 2, s43);
	td_test_arange(&leaves[2], TD_DTYPE_F64, 2, (int64_t[]){ 3, 4 });
	td_cr_assert_ok(td_tensor_transpose(&leaves[1], &leaves[2], 0, 1));
	td_tensor_release(&leaves[2]);
	td_test_arange(&leaves[2], TD_DTYPE_F64, 2, s43);
	check_gather(leaves, 3, 0);
	check_gather(leaves, 3, 1);
	check_gather(leaves, 3, 2);
	for (int i = 0; i < 3; i++)
		td_tensor_release(&leaves[i]);
	/* No elements, and 0-d leaves. */
	td_cr_assert_ok(td_tensor_zeros(&leaves[0], TD_DTYPE_F32, 2, s03));
	td_cr_assert_ok(td_tensor_zeros(&leaves[1], TD_DTYPE_F32, 2, s03));
	check_gather(leaves, 2, 1);
	td_tensor_release(&leaves[0]);
	td_tensor_release(&leaves[1]);
	for (int i = 0; i < 4; i++)
		td_cr_assert_ok(td_tensor_full(&leaves[i], TD_DTYPE_I64, 0, NULL, td_scalar_int(i)));
	check_gather(leaves, 4, 0);
	for (int i = 0; i < 4; i++)
		td_tensor_release(&leaves[i]);
	td_tensor_release(&tt);
	td_tensor_release(&t);
}

/* The iterator writes a stacked leaf into the buffer of the one it yielded
 * before when nobody else holds that one; a leaf the caller keeps a
 * reference to is never overwritten. */
Test(lazy, iteration_reuses_only_buffers_nobody_else_holds)
{
	td_dict *c[3], *s;
	td_tensor t, kept, want;
	td_dict_iter *it;
	td_item item;
	const td_buffer *prev = NULL;
	int64_t b = 4;
	char key[4];
	int i, n = 0, reused = 0;

	for (i = 0; i < 3; i++) {
		td_cr_assert_ok(td_dict_new(&c[i], 1, &b));
		for (int k = 0; k < 5; k++) {
			snprintf(key, sizeof(key), "k%d", k);
			td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_F32, 1, &b, td_scalar_float(10 * k + i)));
			td_cr_assert_ok(td_dict_set_tensor_take(c[i], key, &t));
		}
	}
	td_cr_assert_ok(td_lazy_stack(&s, c, 3, 0, 0));
	kept.buffer = NULL;
	td_cr_assert_ok(td_dict_iter_new(&it, s, 0));
	while (td_dict_iter_next(&item, it) == 1) {
		const td_tensor *v = &item.value->tensor;

		td_cr_assert_ok(td_lazy_get_tensor(&want, s, item.key));
		assert_tensor_eq(v, &want);
		td_tensor_release(&want);
		reused += v->buffer == prev;
		cr_assert_neq(v->buffer, kept.buffer, "a kept leaf is not written again");
		prev = v->buffer;
		if (n++ == 1) {
			td_tensor_ref(&kept, v); /* keep k1 */
			prev = NULL;
		}
	}
	td_dict_iter_free(it);
	cr_assert_eq(n, 5);
	cr_assert_geq(reused, 2, "unshared buffers are reused");
	td_cr_assert_ok(td_lazy_get_tensor(&want, s, "k1"));
	assert_tensor_eq(&kept, &want);
	td_tensor_release(&want);
	td_tensor_release(&kept);
	td_dict_free(s);
	for (i = 0; i < 3; i++)
		td_dict_free(c[i]);
}

/* ------------------------------------------------------------------------ */
/* Key handles remembered by the schema                                      */
/* ------------------------------------------------------------------------ */

static const char *const memo_paths[] = { "a", "n.b", "n.m.c", "n", "n.m", "s", "zz", "n.zz", "a.x",
	"n.m.c.q", "n.b", "a", "n.m" };
#define MEMO_KEYS TD_TEST_ARRAY_LEN(memo_paths)

/* Every lookup through handle k answers as the same lookup through its dotted key. */
static void assert_handle_as_dotted(td_dict *lz, const td_key *k, const char *dotted)
{
	td_tensor a, b;
	td_dict *x = NULL, *y = NULL;
	int ra, rb;

	cr_assert_eq(td_dict_contains_key(lz, k, 0), td_dict_contains(lz, dotted, 0), "%s", dotted);
	cr_assert_eq(td_dict_contains_key(lz, k, TD_LEAVES_ONLY),
		td_dict_contains(lz, dotted, TD_LEAVES_ONLY), "%s", dotted);
	ra = td_lazy_get_tensor_key(&a, lz, k);
	rb = td_lazy_get_tensor(&b, lz, dotted);
	cr_assert_eq(ra, rb, "%s: %d != %d", dotted, ra, rb);
	if (ra == TD_OK) {
		assert_tensor_eq(&a, &b);
		td_tensor_release(&a);
		td_tensor_release(&b);
	}
	ra = td_lazy_get_dict_key(&x, lz, k);
	rb = td_lazy_get_dict(&y, lz, dotted);
	cr_assert_eq(ra, rb, "%s: %d != %d", dotted, ra, rb);
	if (ra == TD_OK) {
		td_dict *dx, *dy;
		td_cr_assert_ok(td_lazy_densify(&dx, x));
		td_cr_assert_ok(td_lazy_densify(&dy, y));
		cr_assert_eq(td_dict_equal(dx, dy), 1, "%s", dotted);
		td_dict_free(dx);
		td_dict_free(dy);
	}
	td_dict_free(x);
	td_dict_free(y);
}

/* More handles than the memo holds, repeated, freed and made again, across
 * a structural change and writes: always the answer of the dotted key. */
static void handles_resolve_as_dotted(unsigned flags)
{
	td_dict *ref = td_test_lazy_ref(0), **parts, *lz;
	td_key *k[MEMO_KEYS];
	td_tensor t, got;
	int64_t b[2] = { 3, 2 };
	size_t n, i;

	td_cr_assert_ok(td_dict_unbind(&parts, &n, ref, 0));
	td_cr_assert_ok(td_lazy_stack(&lz, parts, n, 0, flags));
	for (i = 0; i < MEMO_KEYS; i++)
		td_cr_assert_ok(td_key_new(&k[i], memo_paths[i]));
	for (int round = 0; round < 3; round++)
		for (i = 0; i < MEMO_KEYS; i++)
			assert_handle_as_dotted(lz, k[i], memo_paths[i]);
	/* Handles freed and made again (ids are never reused). */
	for (int round = 0; round < 20; round++) {
		i = (size_t)round % MEMO_KEYS;
		td_key_free(k[i]);
		td_cr_assert_ok(td_key_new(&k[i], memo_paths[(i + 3) % MEMO_KEYS]));
		assert_handle_as_dotted(lz, k[i], memo_paths[(i + 3) % MEMO_KEYS]);
	}
	for (i = 0; i < MEMO_KEYS; i++) {
		td_key_free(k[i]);
		td_cr_assert_ok(td_key_new(&k[i], memo_paths[i]));
		assert_handle_as_dotted(lz, k[i], memo_paths[i]);
	}
	/* A key added to every child is seen through a handle that missed it. */
	cr_assert_eq(td_dict_contains_key(lz, k[6], 0), 0);
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_F32, 1, b + 1, td_scalar_float(5)));
	for (i = 0; i < n; i++)
		td_cr_assert_ok(td_dict_set_tensor(td_lazy_child(lz, i), "zz", &t));
	td_tensor_release(&t);
	for (i = 0; i < MEMO_KEYS; i++)
		assert_handle_as_dotted(lz, k[i], memo_paths[i]);
	cr_assert_eq(td_dict_contains_key(lz, k[6], TD_LEAVES_ONLY), 1);
	/* Writes through handles land where the dotted keys read. */
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_F32, 2, b, td_scalar_float(9)));
	td_cr_assert_ok(td_dict_set_tensor_key(lz, k[6], &t));
	td_cr_assert_ok(td_lazy_get_tensor(&got, lz, "zz"));
	assert_tensor_eq(&got, &t);
	td_tensor_release(&got);
	td_tensor_release(&t);
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_I64, 2, b, td_scalar_int(-4)));
	td_cr_assert_ok(td_dict_set_tensor_inplace_key(lz, k[1], &t));
	td_cr_assert_ok(td_lazy_get_tensor(&got, lz, "n.b"));
	assert_tensor_eq(&got, &t);
	td_tensor_release(&got);
	td_tensor_release(&t);
	for (i = 0; i < MEMO_KEYS; i++)
		td_key_free(k[i]);
	td_dict_free(lz);
	if (flags & TD_LAZY_TAKE)
		td_free(parts);
	else
		td_dict_array_free(parts, n);
	td_dict_free(ref);
}

Test(lazy, key_handles_resolve_as_their_dotted_keys)
{
	handles_resolve_as_dotted(0);
	handles_resolve_as_dotted(TD_LAZY_TAKE);
}

typedef struct memo_race {
	td_dict *lz;
	td_key **k;
	int ok;
} memo_race;

static void *memo_reader(void *arg)
{
	memo_race *r = arg;
	td_tensor t;

	r->ok = 1;
	for (int round = 0; round < 300; round++) {
		for (size_t i = 0; i < MEMO_KEYS; i++) {
			int want = strcmp(memo_paths[i], "a") == 0 || strcmp(memo_paths[i], "n.b") == 0 ||
				strcmp(memo_paths[i], "n.m.c") == 0 || strcmp(memo_paths[i], "s") == 0;
			if (td_dict_contains_key(r->lz, r->k[i], TD_LEAVES_ONLY) != want)
				r->ok = 0;
			if (strcmp(memo_paths[i], "n.m.c") == 0) {
				if (td_lazy_get_tensor_key(&t, r->lz, r->k[i]) != TD_OK || t.ndim != 3 ||
					((double *)td_tensor_data(&t))[5] != 5.0)
					r->ok = 0;
				td_tensor_release(&t);
			}
		}
	}
	return NULL;
}

/* Readers sharing a stack fill and read its memo of handles concurrently. */
Test(lazy, concurrent_readers_share_the_memo_of_handles)
{
	td_dict *ref = td_test_lazy_ref(0), **parts, *lz;
	td_key *k[MEMO_KEYS];
	memo_race r[4];
	pthread_t th[4];
	size_t n, i;

	td_cr_assert_ok(td_dict_unbind(&parts, &n, ref, 0));
	td_cr_assert_ok(td_lazy_stack(&lz, parts, n, 0, 0));
	for (i = 0; i < MEMO_KEYS; i++)
		td_cr_assert_ok(td_key_new(&k[i], memo_paths[i]));
	for (int t = 0; t < 4; t++) {
		r[t].lz = lz;
		r[t].k = k;
		cr_assert_eq(pthread_create(&th[t], NULL, memo_reader, &r[t]), 0);
	}
	for (int t = 0; t < 4; t++) {
		cr_assert_eq(pthread_join(th[t], NULL), 0);
		cr_assert_eq(r[t].ok, 1, "reader %d saw a wrong answer", t);
	}
	for (i = 0; i < MEMO_KEYS; i++)
		td_key_free(k[i]);
	td_dict_free(lz);
	td_dict_array_free(parts, n);
	td_dict_free(ref);
}

/* ------------------------------------------------------------------------ */
/* Freeing many trees at once                                                */
/* ------------------------------------------------------------------------ */

/* A dict of batch [2] with `wide` sub-dicts, each a chain `deep` levels down
 * holding a leaf, a string and a key longer than fits inline at every level. */
static td_dict *wide_tree(int wide, int deep)
{
	int64_t b = 2;
	char path[512];
	td_tensor t;
	td_dict *d;

	td_cr_assert_ok(td_dict_new(&d, 1, &b));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, &b));
	for (int w = 0; w < wide; w++) {
		int len = snprintf(path, sizeof(path), "w%d", w);
		for (int k = 0; k < deep; k++) {
			snprintf(path + len, sizeof(path) - (size_t)len, ".t");
			td_cr_assert_ok(td_dict_set_tensor(d, path, &t));
			snprintf(path + len, sizeof(path) - (size_t)len,
				".a_key_longer_than_twenty_three_bytes");
			td_cr_assert_ok(td_dict_set_string(d, path, "x"));
			len += snprintf(path + len, sizeof(path) - (size_t)len, ".l%d", k);
		}
	}
	td_tensor_release(&t);
	return d;
}

/*
 * A stack owning a lazy stack (of an empty dict and wide_tree(2, 3), the
 * `tree`) and a dense dict, all of batch [2, 2] or [2]; the parts are given
 * back borrowed when asked for.
 */
static td_dict *stack_with_a_lazy_child(td_dict **inner, td_dict **dense, td_dict **tree)
{
	td_dict *two[2], *pair[2], *outer;
	int64_t b = 2;

	td_cr_assert_ok(td_dict_new(&two[0], 1, &b));
	two[1] = wide_tree(2, 3);
	td_cr_assert_ok(td_lazy_stack(&pair[0], two, 2, 0, TD_LAZY_TAKE));
	td_cr_assert_ok(td_dict_new(&pair[1], 2, (int64_t[]){ 2, 2 }));
	td_cr_assert_ok(td_lazy_stack(&outer, pair, 2, 0, TD_LAZY_TAKE));
	if (inner)
		*inner = pair[0];
	if (dense)
		*dense = pair[1];
	if (tree)
		*tree = two[1];
	return outer;
}

/* An array for td_dict_array_free(), from the library's allocator. */
static td_dict **array_for_free(size_t n)
{
	td_dict **arr = NULL;
	td_tensor t;
	size_t count;
	int64_t b = (int64_t)n;
	td_dict *d;

	/* td_dict_unbind() hands out such an array; its pieces are replaced. */
	td_cr_assert_ok(td_dict_new(&d, 1, &b));
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 1, &b));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "x", &t));
	td_cr_assert_ok(td_dict_unbind(&arr, &count, d, 0));
	cr_assert_eq(count, n);
	for (size_t i = 0; i < n; i++)
		td_dict_free(arr[i]);
	td_dict_free(d);
	return arr;
}

/* Trees are freed a level at a time across a batch: wider levels than a
 * batch, more owned children than a batch, lazy children among dense ones;
 * a counting allocator sees every block returned. */
Test(lazy, freeing_many_trees_at_once_returns_every_block)
{
	td_dict *c[40], *s;

	td_test_alloc_install(-1);
	td_dict_free(wide_tree(40, 5)); /* 40 sub-dicts on one level: beyond a batch */
	for (int i = 0; i < 40; i++)
		c[i] = wide_tree(i % 3, 7);
	td_cr_assert_ok(td_lazy_stack(&s, c, 40, 0, TD_LAZY_TAKE));
	td_dict_free(s); /* 40 owned children: more than a batch */
	td_dict_free(stack_with_a_lazy_child(NULL, NULL, NULL)); /* a lazy child, a dense one */
	/* An array of stacks and dicts: the stacks' children join the walk. */
	{
		td_dict **arr = array_for_free(3), *kids[35];

		for (int i = 0; i < 35; i++)
			kids[i] = wide_tree(1, 4);
		td_cr_assert_ok(td_lazy_stack(&arr[0], kids, 5, 0, TD_LAZY_TAKE));
		arr[1] = wide_tree(3, 2);
		td_cr_assert_ok(td_lazy_stack(&arr[2], kids + 5, 30, 0, TD_LAZY_TAKE));
		td_dict_array_free(arr, 3);
	}
	cr_assert_eq(td_test_alloc_live(), 0, "every block is returned");
	td_test_alloc_uninstall();
}

/* Every dict nested in dense dict d has lock state `locked`; returns how many. */
static int count_locked_state(const td_dict *d, bool locked)
{
	td_dict_iter *it;
	td_item item;
	int n = 0;

	cr_assert_eq(td_dict_is_locked(d), locked);
	td_cr_assert_ok(td_dict_iter_new(&it, d, TD_ITER_NESTED));
	while (td_dict_iter_next(&item, it) == 1) {
		if (item.value->kind != TD_VALUE_DICT)
			continue;
		cr_assert_eq(td_dict_is_locked(item.value->dict), locked, "%s", item.key);
		n++;
	}
	td_dict_iter_free(it);
	return n;
}

/* Locking walks trees a level at a time: levels wider than a batch, stacks
 * of more children than a batch, a lazy child; every dict is reached. */
Test(lazy, lock_and_unlock_reach_every_nested_dict)
{
	td_dict *w = wide_tree(40, 4), *c[40], *s, *inner, *outer, *dense, *tree;

	td_cr_assert_ok(td_dict_lock(w));
	cr_assert_eq(count_locked_state(w, true), 160);
	td_cr_assert_ok(td_dict_unlock(w));
	cr_assert_eq(count_locked_state(w, false), 160);
	td_dict_free(w);
	for (int i = 0; i < 40; i++)
		c[i] = wide_tree(2, 3);
	td_cr_assert_ok(td_lazy_stack(&s, c, 40, 0, TD_LAZY_TAKE));
	td_cr_assert_ok(td_dict_lock(s));
	for (int i = 0; i < 40; i++)
		cr_assert_eq(count_locked_state(c[i], true), 6);
	td_cr_assert_ok(td_dict_unlock(s));
	for (int i = 0; i < 40; i++)
		cr_assert_eq(count_locked_state(c[i], false), 6);
	td_dict_free(s);
	outer = stack_with_a_lazy_child(&inner, &dense, &tree);
	td_cr_assert_ok(td_dict_lock(outer));
	cr_assert(td_dict_is_locked(inner));
	cr_assert_eq(count_locked_state(tree, true), 6);
	cr_assert(td_dict_is_locked(dense));
	td_cr_assert_ok(td_dict_unlock(outer));
	cr_assert(!td_dict_is_locked(inner));
	cr_assert_eq(count_locked_state(tree, false), 6);
	td_dict_free(outer);
}

/* ------------------------------------------------------------------------ */
/* Writes through the cached schema                                          */
/* ------------------------------------------------------------------------ */

/* Three children of batch [2] (stacked at dim 0: [3, 2]) whose leaf "x" is
 * child i's slice of `whole` [3, 2, ...]. */
static td_dict *stack_of_slices(const td_tensor *whole, td_dict **c)
{
	int64_t b = 2;
	td_dict *s;

	for (int i = 0; i < 3; i++) {
		td_tensor v;
		td_cr_assert_ok(td_dict_new(&c[i], 1, &b));
		td_cr_assert_ok(td_tensor_select(&v, whole, 0, i));
		td_cr_assert_ok(td_dict_set_tensor_take(c[i], "x", &v));
	}
	td_cr_assert_ok(td_lazy_stack(&s, c, 3, 0, 0));
	cr_assert_eq(td_dict_contains(s, "x", 0), 1); /* the schema is built */
	return s;
}

/* A plain or in-place set of a 3-d f64 tensor of `shape` at `key` is refused (TD_ETYPE). */
static void assert_set_refused(td_dict *s, const char *key, const int64_t *shape, bool inplace)
{
	td_tensor t;

	td_test_arange(&t, TD_DTYPE_F64, 3, shape);
	if (inplace)
		td_cr_assert_err(td_dict_set_tensor_inplace(s, key, &t), TD_ETYPE);
	else
		td_cr_assert_err(td_dict_set_tensor(s, key, &t), TD_ETYPE);
	td_tensor_release(&t);
}

static void free_stack(td_dict *s, td_dict **c)
{
	td_dict_free(s);
	for (int i = 0; i < 3; i++)
		td_dict_free(c[i]);
}

/* set(inplace=True) through the schema's entries: what td_tensor_copy() of
 * each slice into each child's leaf gives, for every kind of pair. */
Test(lazy, inplace_sets_through_the_schema_copy_as_td_tensor_copy)
{
	int64_t s324[3] = { 3, 2, 4 }, s3210[3] = { 3, 2, 10 }, s321[3] = { 3, 2, 1 };
	td_tensor whole, t, ref, got, big, lo, hi;
	td_dict *c[3], *s;
	td_index last[3] = { td_index_all(), td_index_all(), td_index_all() };

	/* Another buffer: a plain strided copy into the children's leaves. */
	td_cr_assert_ok(td_tensor_zeros(&whole, TD_DTYPE_F32, 3, s324));
	s = stack_of_slices(&whole, c);
	td_test_arange(&t, TD_DTYPE_F32, 3, s324);
	td_cr_assert_ok(td_dict_set_tensor_inplace(s, "x", &t));
	assert_tensor_eq(&whole, &t);
	/* The same views: nothing to copy. */
	td_cr_assert_ok(td_dict_set_tensor_inplace(s, "x", &whole));
	assert_tensor_eq(&whole, &t);
	/* A dtype conversion, and a source broadcast along the leaf's dim. */
	td_tensor_release(&t);
	td_test_arange(&t, TD_DTYPE_I64, 3, s321);
	td_cr_assert_ok(td_dict_set_tensor_inplace(s, "x", &t));
	td_cr_assert_ok(td_tensor_expand(&ref, &t, 3, s324));
	td_cr_assert_ok(td_tensor_to_dtype(&got, &ref, TD_DTYPE_F32));
	assert_tensor_eq(&whole, &got);
	td_tensor_release(&got);
	td_tensor_release(&ref);
	td_tensor_release(&t);
	/* A source that cannot broadcast: the error of td_tensor_copy(). */
	assert_set_refused(s, "x", (int64_t[]){ 3, 2, 3 }, true);
	free_stack(s, c);
	td_tensor_release(&whole);
	/* Overlapping views of one buffer, the destination after the source (a
	 * forward element copy would smear): as if through a temporary. */
	td_test_arange(&big, TD_DTYPE_F64, 3, s3210);
	last[2] = td_index_slice(0, 8, 2);
	td_cr_assert_ok(td_tensor_index(&lo, &big, last, 3));
	last[2] = td_index_slice(2, 10, 2);
	td_cr_assert_ok(td_tensor_index(&hi, &big, last, 3));
	td_cr_assert_ok(td_tensor_clone(&ref, &lo));
	s = stack_of_slices(&hi, c);
	td_cr_assert_ok(td_dict_set_tensor_inplace(s, "x", &lo));
	assert_tensor_eq(&hi, &ref);
	free_stack(s, c);
	td_tensor_release(&ref);
	td_tensor_release(&lo);
	td_tensor_release(&hi);
	td_tensor_release(&big);
	/* A read-only leaf is refused. */
	{
		static float mem[24];
		td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
		td_buffer *rb;

		o.flags = TD_BUFFER_READONLY;
		td_cr_assert_ok(td_buffer_wrap(&rb, mem, sizeof(mem), &o));
		td_cr_assert_ok(td_tensor_from_buffer(&whole, rb, TD_DTYPE_F32, 3, s324, NULL, 0));
		td_buffer_unref(rb);
		s = stack_of_slices(&whole, c);
		td_test_arange(&t, TD_DTYPE_F32, 3, s324);
		td_cr_assert_err(td_dict_set_tensor_inplace(s, "x", &t), TD_EREADONLY);
		td_tensor_release(&t);
		free_stack(s, c);
		td_tensor_release(&whole);
	}
}

/* Plain sets through the schema: each child's leaf becomes its slice of the
 * value (a view), references counted; a locked child copies into its leaf;
 * a level with more batch dims checks them. */
Test(lazy, plain_sets_through_the_schema_store_slices_as_td_dict_set_tensor)
{
	int64_t s324[3] = { 3, 2, 4 }, s23[2] = { 2, 3 }, s3235[4] = { 3, 2, 3, 5 };
	td_tensor whole, t, got, deep;
	const td_tensor *leaf;
	td_buffer *old;
	td_dict *c[3], *s, *sub;
	uint32_t refs;

	td_cr_assert_ok(td_tensor_zeros(&whole, TD_DTYPE_F32, 3, s324));
	s = stack_of_slices(&whole, c);
	old = whole.buffer;
	refs = td_buffer_refcount(old);
	td_test_arange(&t, TD_DTYPE_F32, 3, s324);
	td_cr_assert_ok(td_dict_set_tensor(s, "x", &t));
	cr_assert_eq(td_buffer_refcount(t.buffer), 4, "the value and its 3 slices");
	cr_assert_eq(td_buffer_refcount(old), refs - 3, "the old leaves are released");
	for (int i = 0; i < 3; i++) {
		td_tensor want;
		td_cr_assert_ok(td_dict_get_tensor(&leaf, c[i], "x"));
		cr_assert_eq(leaf->buffer, t.buffer, "child %d holds a view of the value", i);
		td_cr_assert_ok(td_tensor_select(&want, &t, 0, i));
		assert_tensor_eq(leaf, &want);
		td_tensor_release(&want);
	}
	/* Again with the same value: the references stay counted. */
	td_cr_assert_ok(td_dict_set_tensor(s, "x", &t));
	cr_assert_eq(td_buffer_refcount(t.buffer), 4);
	/* A locked child copies the slice into its own leaf. */
	td_tensor_release(&t);
	td_cr_assert_ok(td_tensor_full(&t, TD_DTYPE_F32, 3, s324, td_scalar_float(2)));
	{
		td_tensor mine;
		td_cr_assert_ok(td_tensor_zeros(&mine, TD_DTYPE_F32, 2, (int64_t[]){ 2, 4 }));
		td_cr_assert_ok(td_dict_set_tensor_take(c[1], "x", &mine));
	}
	td_cr_assert_ok(td_dict_get_tensor(&leaf, c[1], "x"));
	old = leaf->buffer;
	td_cr_assert_ok(td_dict_lock(c[1]));
	td_cr_assert_ok(td_dict_set_tensor(s, "x", &t));
	td_cr_assert_ok(td_dict_get_tensor(&leaf, c[1], "x"));
	cr_assert_eq(leaf->buffer, old, "a locked child keeps its leaf's buffer");
	td_cr_assert_ok(td_lazy_get_tensor(&got, s, "x"));
	assert_tensor_eq(&got, &t);
	td_tensor_release(&got);
	td_cr_assert_ok(td_dict_unlock(c[1]));
	td_tensor_release(&t);
	/* A level whose dicts have a longer batch: the slices must fit it. */
	for (int i = 0; i < 3; i++) {
		td_tensor z;
		td_cr_assert_ok(td_dict_new(&sub, 2, s23));
		td_cr_assert_ok(td_tensor_zeros(&z, TD_DTYPE_F64, 3, (int64_t[]){ 2, 3, 5 }));
		td_cr_assert_ok(td_dict_set_tensor_take(sub, "y", &z));
		td_cr_assert_ok(td_dict_set_dict_take(c[i], "sub", sub));
	}
	cr_assert_eq(td_dict_contains(s, "sub.y", 0), 1);
	td_test_arange(&deep, TD_DTYPE_F64, 4, s3235);
	td_cr_assert_ok(td_dict_set_tensor(s, "sub.y", &deep));
	td_cr_assert_ok(td_lazy_get_tensor(&got, s, "sub.y"));
	assert_tensor_eq(&got, &deep);
	td_tensor_release(&got);
	td_tensor_release(&deep);
	assert_set_refused(s, "sub.y", (int64_t[]){ 3, 2, 4 }, false);
	free_stack(s, c);
	td_tensor_release(&whole);
}

/* ------------------------------------------------------------------------ */
/* unbind beside the stack dim: children of one layout are cut together     */
/* ------------------------------------------------------------------------ */

#define LONG_KEY "a_key_longer_than_the_inline_bytes"

/* A dense dict of batch [3, 2] with leaves, nested levels, an empty one, a long key. */
static td_dict *layout_dict(int64_t seed)
{
	int64_t b[2] = { 3, 2 }, s4[3] = { 3, 2, 4 }, s5[3] = { 3, 2, 5 };
	td_dict *d, *empty;
	td_tensor t;

	td_cr_assert_ok(td_dict_new(&d, 2, b));
	td_test_arange(&t, TD_DTYPE_F32, 3, s4);
	td_test_random_fill(&t, (uint64_t)seed);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "a", &t));
	td_test_arange(&t, TD_DTYPE_I64, 2, b);
	td_test_random_fill(&t, (uint64_t)seed + 1);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "nested.b", &t));
	td_test_arange(&t, TD_DTYPE_I32, 3, s5);
	td_test_random_fill(&t, (uint64_t)seed + 2);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "nested.deeper.c", &t));
	td_cr_assert_ok(td_dict_new(&empty, 2, b));
	td_cr_assert_ok(td_dict_set_dict_take(d, "nested.empty", empty));
	td_test_arange(&t, TD_DTYPE_F64, 2, b);
	td_test_random_fill(&t, (uint64_t)seed + 3);
	td_cr_assert_ok(td_dict_set_tensor_take(d, LONG_KEY, &t));
	return d;
}

/* The nested keys of d, in order, as one string ("a,nested.b,..."). */
static void key_order(char *buf, size_t size, const td_dict *d)
{
	td_dict_iter *it;
	td_item item;
	size_t len = 0;

	buf[0] = '\0';
	td_cr_assert_ok(td_dict_iter_new(&it, d, TD_ITER_NESTED | TD_ITER_KEYS_ONLY));
	while (td_dict_iter_next(&item, it) == 1) {
		for (size_t k = 0; k < item.depth; k++)
			len += (size_t)snprintf(buf + len, size - len, "%s%s", k ? "." : "", item.path[k]);
		len += (size_t)snprintf(buf + len, size - len, ",");
		cr_assert_lt(len, size);
	}
	td_dict_iter_free(it);
}

/*
 * unbind of the stack s (children c[0..n-1], stacked at sd) along every dim
 * beside sd: piece k holds, as child i, what td_dict_unbind() of c[i] gives
 * as piece k, with the same keys in the same order.
 */
static void check_unbind_beside(td_dict *s, td_dict *const *c, size_t n, int sd)
{
	char ka[1024], kb[1024];

	for (int dim = 0; dim < td_dict_batch_ndim(s); dim++) {
		td_dict **lp, **dp;
		size_t ln, dn;
		int cd = dim < sd ? dim : dim - 1;

		if (dim == sd)
			continue;
		td_cr_assert_ok(td_dict_unbind(&lp, &ln, s, dim));
		cr_assert_eq(ln, (size_t)td_dict_batch_shape(s)[dim]);
		for (size_t i = 0; i < n; i++) {
			td_cr_assert_ok(td_dict_unbind(&dp, &dn, c[i], cd));
			cr_assert_eq(dn, ln);
			for (size_t k = 0; k < ln; k++) {
				const td_dict *got = td_lazy_child(lp[k], i);

				cr_assert(td_dict_is_lazy(lp[k]));
				cr_assert_eq(td_lazy_count(lp[k]), n);
				cr_assert_eq(td_dict_is_lazy(got), td_dict_is_lazy(dp[k]));
				cr_assert_eq(td_dict_equal(got, dp[k]), 1, "dim %d child %zu piece %zu", dim, i, k);
				key_order(ka, sizeof(ka), got);
				key_order(kb, sizeof(kb), dp[k]);
				cr_assert_str_eq(ka, kb, "dim %d child %zu piece %zu", dim, i, k);
			}
			td_dict_array_free(dp, dn);
		}
		td_dict_array_free(lp, ln);
	}
}

enum layout_variant {
	SAME,        /* one layout (children share the leaves' buffers) */
	OWN_BUFFERS, /* one layout, every child its own buffers */
	HOLE_ALL,    /* a deleted key in every child: a dead slot in one layout */
	HOLE_ONE,    /* a deleted key in one child */
	ORDER,       /* one child has its keys in another order */
	EXTRA,       /* one child has a key more, deep down */
	KIND,        /* a leaf in one child is a dict in another */
	SUB_SHAPE,   /* a sub-dict's batch shape differs */
	LAZY_SUB,    /* a lazy stack nested in every child */
	STRING,      /* a string value in every child */
	MANY_KEYS,   /* a level with an index (more keys than a scan) */
	KIND_LATE,   /* same slot counts; the last slot a leaf in one child, a dict in another */
	DEAD_MIX,    /* same slot counts; a slot dead in one child, live in another */
	MANY_DIMS,   /* leaves of 5 and 6 dims (out-of-line dims) in every child */
	VARIANTS
};

/* n children (batch [3, 2]) in layout variant v. */
static void layout_children(td_dict **c, size_t n, int v)
{
	int64_t b[2] = { 3, 2 }, b3[3] = { 3, 2, 5 };
	td_dict *ref, **parts, *sub, *kids[2];
	size_t got;
	td_tensor t;
	char key[16];

	if (v == OWN_BUFFERS) {
		for (size_t i = 0; i < n; i++)
			c[i] = layout_dict((int64_t)i * 10);
	} else {
		/* Unbind of one dict: the children's leaves are views of its buffers. */
		int64_t rb[3] = { (int64_t)n, 3, 2 }, s[4] = { (int64_t)n, 3, 2, 4 };

		td_cr_assert_ok(td_dict_new(&ref, 3, rb));
		td_test_arange(&t, TD_DTYPE_F32, 4, s);
		td_cr_assert_ok(td_dict_set_tensor_take(ref, "a", &t));
		td_test_arange(&t, TD_DTYPE_I64, 3, rb);
		td_cr_assert_ok(td_dict_set_tensor_take(ref, "nested.b", &t));
		td_test_arange(&t, TD_DTYPE_I64, 3, rb);
		td_cr_assert_ok(td_dict_set_tensor_take(ref, "nested.deeper.c", &t));
		td_test_arange(&t, TD_DTYPE_F64, 3, rb);
		td_cr_assert_ok(td_dict_set_tensor_take(ref, LONG_KEY, &t));
		td_cr_assert_ok(td_dict_unbind(&parts, &got, ref, 0));
		cr_assert_eq(got, n);
		for (size_t i = 0; i < n; i++)
			td_cr_assert_ok(td_dict_copy(&c[i], parts[i]));
		td_dict_array_free(parts, got);
		td_dict_free(ref);
	}
	switch (v) {
	case HOLE_ALL:
		for (size_t i = 0; i < n; i++)
			td_cr_assert_ok(td_dict_del(c[i], "nested.b"));
		break;
	case HOLE_ONE:
		td_cr_assert_ok(td_dict_del(c[n - 1], "nested.b"));
		break;
	case ORDER: {
		const td_tensor *a;

		td_cr_assert_ok(td_dict_get_tensor(&a, c[1], "a"));
		td_tensor_ref(&t, a);
		td_cr_assert_ok(td_dict_del(c[1], "a"));
		td_cr_assert_ok(td_dict_set_tensor_take(c[1], "a", &t));
		break;
	}
	case EXTRA:
		td_test_arange(&t, TD_DTYPE_F32, 2, b);
		td_cr_assert_ok(td_dict_set_tensor_take(c[n - 1], "nested.deeper.extra", &t));
		break;
	case KIND:
		td_cr_assert_ok(td_dict_new(&sub, 2, b));
		td_test_arange(&t, TD_DTYPE_F32, 2, b);
		td_cr_assert_ok(td_dict_set_tensor_take(sub, "leaf", &t));
		td_cr_assert_ok(td_dict_del(c[1], "nested.b"));
		td_cr_assert_ok(td_dict_set_dict_take(c[1], "nested.b", sub));
		break;
	case SUB_SHAPE:
		td_cr_assert_ok(td_dict_new(&sub, 3, b3));
		td_test_arange(&t, TD_DTYPE_I64, 3, b3);
		td_cr_assert_ok(td_dict_set_tensor_take(sub, "c", &t));
		td_cr_assert_ok(td_dict_del(c[1], "nested.deeper"));
		td_cr_assert_ok(td_dict_set_dict_take(c[1], "nested.deeper", sub));
		break;
	case LAZY_SUB:
		for (size_t i = 0; i < n; i++) {
			int64_t b1 = 3;

			for (int k = 0; k < 2; k++) {
				td_cr_assert_ok(td_dict_new(&kids[k], 1, &b1));
				td_test_arange(&t, TD_DTYPE_F32, 1, &b1);
				td_test_random_fill(&t, (uint64_t)(i * 2 + (size_t)k));
				td_cr_assert_ok(td_dict_set_tensor_take(kids[k], "x", &t));
			}
			td_cr_assert_ok(td_lazy_stack(&sub, kids, 2, 1, TD_LAZY_TAKE));
			td_cr_assert_ok(td_dict_set_dict_take(c[i], "nested.lz", sub));
		}
		break;
	case STRING:
		for (size_t i = 0; i < n; i++)
			td_cr_assert_ok(td_dict_set_string(c[i], "nested.name", "value"));
		break;
	case MANY_KEYS:
		for (size_t i = 0; i < n; i++)
			for (int k = 0; k < 12; k++) {
				snprintf(key, sizeof(key), "k%d", k);
				td_test_arange(&t, TD_DTYPE_I32, 2, b);
				td_cr_assert_ok(td_dict_set_tensor_take(c[i], key, &t));
			}
		break;
	case KIND_LATE:
		/* nested: b deleted and set again last, a dict in child 1 only */
		for (size_t i = 0; i < n; i++) {
			td_cr_assert_ok(td_dict_del(c[i], "nested.b"));
			if (i != 1) {
				td_test_arange(&t, TD_DTYPE_F32, 2, b);
				td_cr_assert_ok(td_dict_set_tensor_take(c[i], "nested.b", &t));
				continue;
			}
			td_cr_assert_ok(td_dict_new(&sub, 2, b));
			td_cr_assert_ok(td_dict_set_dict_take(c[i], "nested.b", sub));
		}
		break;
	case DEAD_MIX:
		/* root: [dead, nested, long, z] in child 0, [a, nested, long, dead] in the others */
		for (size_t i = 0; i < n; i++) {
			td_test_arange(&t, TD_DTYPE_F32, 2, b);
			td_cr_assert_ok(td_dict_set_tensor_take(c[i], "z", &t));
			td_cr_assert_ok(td_dict_del(c[i], i == 0 ? "a" : "z"));
		}
		break;
	case MANY_DIMS:
		for (size_t i = 0; i < n; i++) {
			int64_t s5[5] = { 3, 2, 2, 1, 3 }, s6[6] = { 3, 2, 2, 1, 2, 3 };

			td_test_arange(&t, TD_DTYPE_F32, 6, s6);
			td_test_random_fill(&t, (uint64_t)i + 100);
			td_cr_assert_ok(td_dict_set_tensor_take(c[i], "nested.six", &t));
			td_test_arange(&t, TD_DTYPE_I32, 5, s5);
			td_test_random_fill(&t, (uint64_t)i + 200);
			td_cr_assert_ok(td_dict_set_tensor_take(c[i], "five", &t));
		}
		break;
	default:
		break;
	}
}

/* Every layout, stacked at each dim, 3 children and 12 (more pieces than fit on the stack). */
Test(lazy, unbind_beside_the_stack_dim_matches_each_childs_unbind)
{
	static const size_t counts[2] = { 3, 12 };
	td_dict *c[12], *s;

	for (int v = 0; v < VARIANTS; v++)
		for (int ci = 0; ci < 2; ci++)
			for (int sd = 0; sd < 3; sd++) {
				size_t n = counts[ci];

				layout_children(c, n, v);
				td_cr_assert_ok(td_lazy_stack(&s, c, n, sd, 0));
				check_unbind_beside(s, c, n, sd);
				td_dict_free(s);
				for (size_t i = 0; i < n; i++)
					td_dict_free(c[i]);
			}
}

/* A stack of no children, and pieces of size zero. */
Test(lazy, unbind_beside_the_stack_dim_of_empty_stacks)
{
	int64_t b0[2] = { 0, 2 }, b1[1] = { 3 };
	td_dict *c[2], *s, **p;
	size_t n;

	td_cr_assert_ok(td_dict_new(&c[0], 2, b0));
	td_cr_assert_ok(td_dict_new(&c[1], 2, b0));
	td_cr_assert_ok(td_lazy_stack(&s, c, 2, 0, 0));
	td_cr_assert_ok(td_dict_unbind(&p, &n, s, 1)); /* a dim of size 0: no piece */
	cr_assert_eq(n, 0);
	td_dict_array_free(p, n);
	td_cr_assert_ok(td_dict_unbind(&p, &n, s, 2)); /* two stacks of two empty dicts */
	cr_assert_eq(n, 2);
	for (size_t k = 0; k < n; k++) {
		cr_assert_eq(td_lazy_count(p[k]), 2);
		cr_assert_eq(td_dict_batch_shape(p[k])[1], 0);
	}
	td_dict_array_free(p, n);
	td_dict_free(s);
	td_dict_free(c[0]);
	td_dict_free(c[1]);
	/* Dicts without entries, nested: every level empty. */
	td_cr_assert_ok(td_dict_new(&c[0], 1, b1));
	td_cr_assert_ok(td_dict_new(&c[1], 1, b1));
	td_cr_assert_ok(td_lazy_stack(&s, c, 2, 1, 0));
	check_unbind_beside(s, c, 2, 1);
	td_dict_free(s);
	td_dict_free(c[0]);
	td_dict_free(c[1]);
}

typedef struct beside_ctx {
	td_dict *s;
	td_dict **p;
	size_t n;
} beside_ctx;

static int beside_body(void *arg)
{
	beside_ctx *x = arg;

	x->p = NULL;
	x->n = 0;
	return td_dict_unbind(&x->p, &x->n, x->s, 1);
}

static void beside_cleanup(void *arg)
{
	beside_ctx *x = arg;

	td_dict_array_free(x->p, x->n);
	x->p = NULL;
	x->n = 0;
}

/* Memory failing anywhere in the cut of children of one layout, or of mixed ones. */
Test(lazy, unbind_beside_the_stack_dim_leaks_nothing_without_memory)
{
	static const int variants[] = { SAME, HOLE_ONE, LAZY_SUB, KIND_LATE, MANY_DIMS };
	td_dict *c[12];
	beside_ctx x;

	for (size_t vi = 0; vi < sizeof(variants) / sizeof(variants[0]); vi++)
		for (size_t n = 3; n <= 12; n += 9) {
			layout_children(c, n, variants[vi]);
			td_cr_assert_ok(td_lazy_stack(&x.s, c, n, 0, 0));
			td_test_enomem_sweep(beside_body, beside_cleanup, &x);
			td_dict_free(x.s);
			for (size_t i = 0; i < n; i++)
				td_dict_free(c[i]);
		}
}

/* ------------------------------------------------------------------------ */
/* Leaves of more than TD_TENSOR_INLINE_DIMS dims                            */
/* ------------------------------------------------------------------------ */

/* Three children of batch [2] with leaves a i32 [2,1,3,2] (4 dims: 5 stacked) and b f32
 * [2,1,2,1,2] (5 dims), stacked lazily at dim 0; `ref` is their dense stack. */
static void many_dims_children(td_dict *kids[3], td_dict **lazy, td_dict **ref)
{
	int64_t b[] = { 2 }, sa[] = { 2, 1, 3, 2 }, sb[] = { 2, 1, 2, 1, 2 };
	td_tensor t;
	int i;

	for (i = 0; i < 3; i++) {
		td_cr_assert_ok(td_dict_new(&kids[i], 1, b));
		td_test_arange(&t, TD_DTYPE_I32, 4, sa);
		td_cr_assert_ok(td_tensor_binary_scalar_inplace(&t, td_scalar_int(100 * i), TD_OP_ADD));
		td_cr_assert_ok(td_dict_set_tensor_take(kids[i], "a", &t));
		td_test_arange(&t, TD_DTYPE_F32, 5, sb);
		td_cr_assert_ok(td_tensor_binary_scalar_inplace(&t, td_scalar_int(-i), TD_OP_ADD));
		td_cr_assert_ok(td_dict_set_tensor_take(kids[i], "b", &t));
	}
	td_cr_assert_ok(td_dict_stack(ref, (const td_dict *const *)kids, 3, 0));
	td_cr_assert_ok(td_lazy_stack(lazy, kids, 3, 0, 0));
}

Test(lazy, leaves_of_many_dims_are_stacked_sliced_and_written)
{
	td_dict *kids[3], *lazy, *ref, **parts;
	td_tensor s, v, w, dst;
	const td_tensor *r;
	size_t n, i;
	int k;

	many_dims_children(kids, &lazy, &ref);
	/* Reads: stacked copies of 5 and 6 dims, and into a destination. */
	for (k = 0; k < 2; k++) {
		const char *key = k ? "b" : "a";

		td_cr_assert_ok(td_lazy_get_tensor(&s, lazy, key));
		td_cr_assert_ok(td_dict_get_tensor(&r, ref, key));
		cr_assert_eq(s.ndim, r->ndim);
		assert_tensor_eq(&s, r);
		td_cr_assert_ok(td_tensor_zeros_like(&dst, r));
		td_cr_assert_ok(td_lazy_get_tensor_into(&dst, lazy, key));
		assert_tensor_eq(&dst, r);
		td_tensor_release(&dst);
		td_tensor_release(&s);
	}
	assert_same(ref, lazy);
	/* An unbind beside the stack dim cuts every child. */
	td_cr_assert_ok(td_dict_unbind(&parts, &n, lazy, 1));
	cr_assert_eq(n, 2);
	for (i = 0; i < n; i++) {
		td_dict *rp;
		td_index idx[2] = { td_index_all(), td_index_int((int64_t)i) };

		td_cr_assert_ok(td_dict_index(&rp, ref, idx, 2));
		assert_same(rp, parts[i]);
		td_dict_free(rp);
	}
	td_dict_array_free(parts, n);
	/* Writes: slices of 5 dims (out of line) and 4 dims (inline) into every child. */
	td_cr_assert_ok(td_dict_get_tensor(&r, ref, "b"));
	td_cr_assert_ok(td_tensor_clone(&v, r));
	td_cr_assert_ok(td_tensor_binary_scalar_inplace(&v, td_scalar_int(1000), TD_OP_ADD));
	td_cr_assert_ok(td_dict_set_tensor(lazy, "b", &v));     /* existing key */
	td_cr_assert_ok(td_dict_set_tensor(lazy, "new.b", &v)); /* new keys */
	td_cr_assert_ok(td_dict_get_tensor(&r, ref, "a"));
	td_cr_assert_ok(td_tensor_clone(&w, r));
	td_cr_assert_ok(td_dict_set_tensor(lazy, "a", &w));
	for (i = 0; i < 3; i++) {
		td_tensor sl;
		const td_tensor *c;

		td_cr_assert_ok(td_tensor_select(&sl, &v, 0, (int64_t)i));
		td_cr_assert_ok(td_dict_get_tensor(&c, kids[i], "b"));
		assert_tensor_eq(c, &sl);
		cr_assert_eq(c->buffer, v.buffer, "a view of the value");
		td_cr_assert_ok(td_dict_get_tensor(&c, kids[i], "new.b"));
		assert_tensor_eq(c, &sl);
		td_tensor_release(&sl);
		td_cr_assert_ok(td_tensor_select(&sl, &w, 0, (int64_t)i));
		td_cr_assert_ok(td_dict_get_tensor(&c, kids[i], "a"));
		assert_tensor_eq(c, &sl);
		td_tensor_release(&sl);
	}
	/* In place: the values are copied into the children's leaves. */
	td_cr_assert_ok(td_tensor_binary_scalar_inplace(&v, td_scalar_int(1), TD_OP_ADD));
	td_cr_assert_ok(td_dict_set_tensor_inplace(lazy, "new.b", &v));
	td_cr_assert_ok(td_lazy_get_tensor(&s, lazy, "new.b"));
	assert_tensor_eq(&s, &v);
	td_tensor_release(&s);
	td_tensor_release(&v);
	td_tensor_release(&w);
	td_dict_free(lazy);
	td_dict_free(ref);
	for (i = 0; i < 3; i++)
		td_dict_free(kids[i]);
}

Test(lazy, padded_leaves_of_many_dims)
{
	int64_t b[] = { 1 }, s0[] = { 1, 1, 2, 1, 3 }, s1[] = { 1, 1, 1, 1, 2 };
	td_dict *kids[2], *lazy;
	td_tensor t, p;
	const int64_t at[6] = { 1, 0, 0, 0, 0, 1 };
	td_scalar x;
	int i;

	for (i = 0; i < 2; i++) {
		td_cr_assert_ok(td_dict_new(&kids[i], 1, b));
		td_test_arange(&t, TD_DTYPE_I64, 5, i ? s1 : s0);
		td_cr_assert_ok(td_dict_set_tensor_take(kids[i], "r", &t));
	}
	td_cr_assert_ok(td_lazy_stack(&lazy, kids, 2, 0, TD_LAZY_TAKE));
	td_cr_assert_ok(td_lazy_get_padded(&p, lazy, "r", td_scalar_int(-1), 0));
	cr_assert_eq(p.ndim, 6);
	cr_assert_eq(td_tensor_shape(&p)[3], 2);
	cr_assert_eq(td_tensor_shape(&p)[5], 3);
	td_cr_assert_ok(td_tensor_get(&x, &p, at));
	cr_assert_eq(x.v.i, 1, "child 1 element (0, 0, 0, 0, 1)");
	td_tensor_release(&p);
	td_dict_free(lazy);
}
