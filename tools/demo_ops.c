/* SPDX-License-Identifier: MIT */
/*
 * demo_ops.c - demo steps on whole dicts: apply (normalizing observations),
 * elementwise arithmetic, equality, locking, clone against copy, dtype
 * conversion and non-tensor (string, bytes) leaves.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "demo.h"

/* ------------------------------------------------------------------------ */
/* apply                                                                     */
/* ------------------------------------------------------------------------ */

/* td_apply_fn: (x - mean) / std for leaves named "obs", the leaf itself
 * (shared) for the others. */
static int normalize_obs(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	td_tensor centered = TD_TENSOR_INIT;
	double mean, std;
	int rc;

	if (strcmp(item->key, "obs") != 0) {
		td_tensor_ref(out, in);
		return TD_OK;
	}
	rc = demo_tensor_moments(in, &mean, &std);
	if (rc >= 0)
		rc = td_tensor_binary_scalar(&centered, in, td_scalar_float(mean), TD_OP_SUB);
	if (rc >= 0)
		rc = td_tensor_binary_scalar(out, &centered, td_scalar_float(std > 0 ? 1 / std : 1),
			TD_OP_MUL);
	td_tensor_release(&centered);
	return rc;
}

/* td_apply_fn: reward * 10; every other leaf is skipped (left as it is). */
static int scale_reward(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	if (strcmp(item->key, "reward") != 0)
		return 1;
	return td_tensor_binary_scalar(out, in, td_scalar_float(10), TD_OP_MUL);
}

int demo_step_apply(demo *d)
{
	td_dict *n = NULL, *c = NULL;
	const td_tensor *obs, *nobs, *nrm, *nnrm;
	double m0, s0, m1, s1, nm, ns, r0 = 0, r1 = 0;
	int rc;

	DEMO_CALL(d, td_dict_apply(&n, d->rb, normalize_obs, NULL));
	DEMO_CALL(d, td_dict_get_tensor(&obs, d->rb, "obs"));
	DEMO_CALL(d, td_dict_get_tensor(&nrm, n, "obs"));
	DEMO_CALL(d, td_dict_get_tensor(&nobs, d->rb, "next.obs"));
	DEMO_CALL(d, td_dict_get_tensor(&nnrm, n, "next.obs"));
	DEMO_CALL(d, demo_tensor_moments(obs, &m0, &s0));
	DEMO_CALL(d, demo_tensor_moments(nrm, &m1, &s1));
	DEMO_CALL(d, demo_tensor_moments(nnrm, &nm, &ns));
	DEMO_CHECK(d,
		fabs(m1) < 1e-5 && fabs(s1 - 1) < 1e-5 && fabs(nm) < 1e-5 && fabs(ns - 1) < 1e-5 &&
			nobs->buffer != nnrm->buffer,
		"normalized obs has mean %g std %g, next.obs mean %g std %g", m1, s1, nm, ns);
	DEMO_CHECK(d,
		demo_shares(n, d->rb, "action") && demo_shares(n, d->rb, "reward") &&
			demo_shares(n, d->rb, "done"),
		"apply should share the leaves it returns as is");
	DEMO_CALL(d, td_dict_clone(&c, d->rb));
	DEMO_CALL(d, demo_sum(c, "reward", &r0));
	DEMO_CALL(d, td_dict_apply_inplace(c, scale_reward, NULL));
	DEMO_CALL(d, demo_sum(c, "reward", &r1));
	DEMO_CHECK(d, r1 == 10 * r0, "apply_(reward * 10): reward sum %g -> %g", r0, r1);
	demo_say(d,
		"normalize rb obs: mean %.3f std %.3f -> %.3f %.3f (next.obs -> %.3f %.3f), "
		"other leaves shared; apply_(reward * 10) on a clone: reward sum %g -> %g",
		m0, s0, fabs(m1), s1, fabs(nm), ns, r0, r1);
out:
	td_dict_free(c);
	td_dict_free(n);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Arithmetic and equality                                                   */
/* ------------------------------------------------------------------------ */

/* The sum of every tensor of `x` into *sum. */
static int dict_sum(demo *d, const td_dict *x, double *sum)
{
	demo_stats s;
	int rc = demo_lib(d, demo_dict_stats(x, &s), "demo_dict_stats");

	*sum = s.sum;
	return rc;
}

/* td + 1, (td + 1) * 2, and back. */
static int arith_td(demo *d, double *s1, double *s2)
{
	td_dict *p = NULL, *q = NULL, *h = NULL, *back = NULL;
	int rc;

	DEMO_CALL(d, td_dict_binary_scalar(&p, d->td, td_scalar_int(1), TD_OP_ADD));
	DEMO_CALL(d, td_dict_binary_scalar(&q, p, td_scalar_int(2), TD_OP_MUL));
	DEMO_CALL(d, td_dict_binary_scalar(&h, q, td_scalar_int(2), TD_OP_DIV));
	DEMO_CALL(d, td_dict_binary_scalar(&back, h, td_scalar_int(1), TD_OP_SUB));
	DEMO_TRY(demo_check_equal(d, back, d->td, 1, "(td + 1) * 2 / 2 - 1"));
	DEMO_TRY(dict_sum(d, p, s1));
	DEMO_TRY(dict_sum(d, q, s2));
	DEMO_CHECK(d, *s1 == 120 && *s2 == 240, "td + 1 sums to %g, * 2 to %g", *s1, *s2);
out:
	td_dict_free(back);
	td_dict_free(h);
	td_dict_free(q);
	td_dict_free(p);
	return rc;
}

/* big + big == big * 2, big - big == 0, in-place += and -=. */
static int arith_big(demo *d, double *twice, double *diff, double *inplace)
{
	td_dict *sum = NULL, *dbl = NULL, *zero = NULL, *c = NULL;
	int rc;

	DEMO_CALL(d, td_dict_binary(&sum, d->big, d->big, TD_OP_ADD));
	DEMO_CALL(d, td_dict_binary_scalar(&dbl, d->big, td_scalar_float(2), TD_OP_MUL));
	DEMO_TRY(demo_check_equal(d, sum, dbl, 1, "big_td + big_td against big_td * 2"));
	DEMO_CALL(d, td_dict_binary(&zero, d->big, d->big, TD_OP_SUB));
	DEMO_CALL(d, td_dict_clone(&c, d->big));
	DEMO_CALL(d, td_dict_binary_scalar_inplace(c, td_scalar_int(1), TD_OP_ADD));
	DEMO_CALL(d, td_dict_binary_inplace(c, d->big, TD_OP_SUB));
	DEMO_TRY(dict_sum(d, sum, twice));
	DEMO_TRY(dict_sum(d, zero, diff));
	DEMO_TRY(dict_sum(d, c, inplace));
	DEMO_CHECK(d, *twice == 2 * 59400 && *diff == 0 && *inplace == 1200,
		"big_td sums: twice %g, difference %g, (clone + 1) - big_td %g", *twice, *diff, *inplace);
out:
	td_dict_free(c);
	td_dict_free(zero);
	td_dict_free(dbl);
	td_dict_free(sum);
	return rc;
}

int demo_step_arith(demo *d)
{
	td_dict *h = NULL;
	const td_tensor *act, *done;
	double s1 = 0, s2 = 0, twice = 0, diff = 0, inplace = 0;
	int rc;

	DEMO_TRY(arith_td(d, &s1, &s2));
	DEMO_TRY(arith_big(d, &twice, &diff, &inplace));
	DEMO_CALL(d, td_dict_binary_scalar(&h, d->rb, td_scalar_float(0.5), TD_OP_ADD));
	DEMO_CALL(d, td_dict_get_tensor(&act, h, "action"));
	DEMO_CALL(d, td_dict_get_tensor(&done, h, "done"));
	DEMO_CHECK(d, act->dtype == TD_DTYPE_F32 && done->dtype == TD_DTYPE_F32,
		"rb + 0.5 gave action %s, done %s; expected float32", td_dtype_name(act->dtype),
		td_dtype_name(done->dtype));
	demo_say(d,
		"td + 1: sum %g, * 2: %g, / 2 - 1 == td; big_td + big_td == big_td * 2 "
		"(sum %g), - big_td: %g; clone += 1, -= big_td: %g; rb + 0.5: int64, bool -> %s",
		s1, s2, twice, diff, inplace, td_dtype_name(act->dtype));
out:
	td_dict_free(h);
	return rc;
}

/* Add `delta` to element (1, 2) of leaf `key` of `x`, in place. */
static int nudge(td_dict *x, const char *key, double delta)
{
	static const int64_t at[2] = { 1, 2 };
	const td_tensor *t;
	td_tensor own = TD_TENSOR_INIT;
	td_scalar v;
	int rc = td_dict_get_tensor(&t, x, key);

	if (rc < 0)
		return rc;
	td_tensor_ref(&own, t);
	rc = td_tensor_get(&v, &own, at);
	if (rc >= 0)
		rc = td_tensor_set(&own, at, td_scalar_float(v.v.f + delta));
	td_tensor_release(&own);
	return rc;
}

int demo_step_equal(demo *d)
{
	static const char *const swapped_keys[2] = { "b", "a" };
	td_dict *c = NULL, *eq = NULL, *ne = NULL, *sw = NULL;
	int rc, close3 = 0, close5 = 0;
	double neq = 0, nne = 0;
	size_t i;

	DEMO_CALL(d, td_dict_clone(&c, d->big));
	DEMO_TRY(demo_check_equal(d, c, d->big, 1, "clone(big_td) against big_td"));
	DEMO_CALL(d, nudge(c, "42", 1e-4));
	DEMO_TRY(demo_check_equal(d, c, d->big, 0, "big_td with one element moved by 1e-4"));
	DEMO_CALL(d, close3 = td_dict_allclose(c, d->big, 0, 1e-3, false));
	DEMO_CALL(d, close5 = td_dict_allclose(c, d->big, 0, 1e-5, false));
	DEMO_CALL(d, td_dict_binary(&eq, c, d->big, TD_OP_EQ));
	DEMO_CALL(d, td_dict_binary(&ne, c, d->big, TD_OP_NE));
	DEMO_TRY(dict_sum(d, eq, &neq));
	DEMO_TRY(dict_sum(d, ne, &nne));
	DEMO_CHECK(d, close3 == 1 && close5 == 0 && neq == 1199 && nne == 1,
		"allclose(atol 1e-3) %d, allclose(atol 1e-5) %d, %g equal and %g unequal elements", close3,
		close5, neq, nne);
	/* Keys in another order: td_dict_equal ignores the order. */
	DEMO_CALL(d, td_dict_new(&sw, 2, td_dict_batch_shape(d->td)));
	for (i = 0; i < 2; i++) {
		const td_value *v;

		DEMO_CALL(d, td_dict_get(&v, d->td, swapped_keys[i]));
		DEMO_CALL(d,
			v->kind == TD_VALUE_DICT ? td_dict_set_dict(sw, swapped_keys[i], v->dict) :
									   td_dict_set_tensor(sw, swapped_keys[i], &v->tensor));
	}
	DEMO_TRY(demo_check_equal(d, sw, d->td, 1, "td with its keys in another order"));
	demo_say(d,
		"clone(big_td) == big_td; one element + 1e-4: equal 0, allclose atol 1e-3: "
		"%d, 1e-5: %d; elementwise == %g/1200, != %g; key order ignored",
		close3, close5, neq, nne);
out:
	td_dict_free(sw);
	td_dict_free(ne);
	td_dict_free(eq);
	td_dict_free(c);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Locking, clone and copy                                                   */
/* ------------------------------------------------------------------------ */

/* How many of `x` and its nested dicts are locked. */
static int count_locked(const td_dict *x, size_t *locked)
{
	td_dict_iter *it = NULL;
	td_item item;
	int rc = td_dict_iter_new(&it, x, TD_ITER_NESTED);

	*locked = td_dict_is_locked(x);
	while (rc >= 0 && (rc = td_dict_iter_next(&item, it)) == 1) {
		if (item.value->kind == TD_VALUE_DICT && td_dict_is_locked(item.value->dict))
			(*locked)++;
	}
	td_dict_iter_free(it);
	return rc < 0 ? rc : TD_OK;
}

/* While locked: a new key and a deletion are refused, an existing tensor is
 * written in place, a nested dict cannot be unlocked on its own. */
static int locked_rules(demo *d, td_dict *c, double *now)
{
	const td_tensor *before, *after;
	td_tensor five = TD_TENSOR_INIT;
	td_dict *child;
	int rc;

	DEMO_CALL(d,
		td_tensor_full(&five, TD_DTYPE_F32, 2, td_dict_batch_shape(c), td_scalar_float(5)));
	DEMO_TRY(demo_check_code(d, td_dict_set_tensor(c, "x", &five), TD_ELOCKED,
		"set of a new key on a locked dict"));
	DEMO_TRY(demo_check_code(d, td_dict_del(c, "0.t"), TD_ELOCKED, "del on a locked dict"));
	DEMO_CALL(d, td_dict_get_tensor(&before, c, "0.t"));
	DEMO_CALL(d, td_dict_set_tensor(c, "0.t", &five));
	DEMO_CALL(d, td_dict_get_tensor(&after, c, "0.t"));
	DEMO_CALL(d, demo_tensor_at(after, (const int64_t[]){ 0, 0 }, now));
	DEMO_CHECK(d, after->buffer == before->buffer && after->buffer != five.buffer && *now == 5,
		"set of an existing key on a locked dict should copy in place (value %g)", *now);
	DEMO_CALL(d, td_dict_get_dict(&child, c, "0"));
	DEMO_TRY(demo_check_code(d, td_dict_unlock(child), TD_ELOCKED,
		"unlock of a dict inside a locked one"));
out:
	td_tensor_release(&five);
	return rc;
}

int demo_step_lock(demo *d)
{
	td_dict *c = NULL;
	td_tensor t = TD_TENSOR_INIT;
	size_t locked = 0, unlocked = 0;
	double now = 0;
	int rc;

	DEMO_CALL(d, td_dict_clone(&c, d->nested));
	DEMO_CALL(d, td_dict_lock(c));
	DEMO_CALL(d, count_locked(c, &locked));
	DEMO_CHECK(d, locked == 20, "lock locked %zu of 20 dicts", locked);
	DEMO_TRY(locked_rules(d, c, &now));
	DEMO_CALL(d, td_dict_unlock(c));
	DEMO_CALL(d, count_locked(c, &unlocked));
	DEMO_CALL(d, td_tensor_zeros(&t, TD_DTYPE_F32, 2, td_dict_batch_shape(c)));
	DEMO_CALL(d, td_dict_set_tensor(c, "x", &t));
	DEMO_CALL(d, td_dict_del(c, "x"));
	DEMO_CHECK(d, unlocked == 0 && td_dict_len(c) == 1,
		"after unlock: %zu dicts locked, "
		"%zu keys",
		unlocked, td_dict_len(c));
	demo_say(d,
		"clone(big_nested_td) locked (%zu dicts): new key, del, unlock of child "
		"refused (%s); existing \"0.t\" written in place = %g; unlock: %zu locked, key "
		"added and deleted",
		locked, td_strerror(TD_ELOCKED), now, unlocked);
out:
	td_tensor_release(&t);
	td_dict_free(c);
	return rc;
}

int demo_step_clone_copy(demo *d)
{
	td_dict *cp = NULL, *cl = NULL, *lk = NULL, *cp2 = NULL;
	const td_tensor *a;
	uint32_t refs0, refs1, refs2;
	double shared = 0, cloned = 0, restored = 0;
	int rc;

	DEMO_CALL(d, td_dict_get_tensor(&a, d->td, "a"));
	refs0 = td_buffer_refcount(a->buffer);
	DEMO_CALL(d, td_dict_copy(&cp, d->td));
	refs1 = td_buffer_refcount(a->buffer);
	DEMO_CALL(d, td_dict_clone(&cl, d->td));
	refs2 = td_buffer_refcount(a->buffer);
	DEMO_CHECK(d,
		demo_shares(cp, d->td, "a") && demo_shares(cp, d->td, "b.b1") &&
			!demo_shares(cl, d->td, "a") && !demo_shares(cl, d->td, "b.b1") && refs1 == refs0 + 1 &&
			refs2 == refs1,
		"copy should share buffers, clone not "
		"(refcounts %u, %u, %u)",
		refs0, refs1, refs2);
	DEMO_CALL(d, td_dict_binary_scalar_inplace(cp, td_scalar_int(1), TD_OP_ADD));
	DEMO_TRY(dict_sum(d, d->td, &shared));
	DEMO_TRY(dict_sum(d, cl, &cloned));
	DEMO_CALL(d, td_dict_binary_scalar_inplace(cp, td_scalar_int(1), TD_OP_SUB));
	DEMO_TRY(dict_sum(d, d->td, &restored));
	DEMO_CALL(d, td_dict_set_string(cp, "extra", "only in the copy"));
	DEMO_CHECK(d,
		shared == 120 && cloned == 0 && restored == 0 && td_dict_contains(d->td, "extra", 0) == 0,
		"after copy += 1: td sum %g, clone %g; "
		"after -= 1: %g",
		shared, cloned, restored);
	DEMO_CALL(d, td_dict_clone(&lk, d->td));
	DEMO_CALL(d, td_dict_lock(lk));
	DEMO_CALL(d, td_dict_copy(&cp2, lk));
	DEMO_CHECK(d, !td_dict_is_locked(cp2), "a copy of a locked dict should be unlocked");
	demo_say(d,
		"copy(td) shares a, b.b1 (a refs %u -> %u), clone none (%u); copy += 1: td "
		"sum 0 -> %g, clone %g; -= 1: %g; copy's new key not in td; copy of locked unlocked",
		refs0, refs1, refs2, shared, cloned, restored);
out:
	td_dict_free(cp2);
	td_dict_free(lk);
	td_dict_free(cl);
	td_dict_free(cp);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* dtypes and non-tensor leaves                                              */
/* ------------------------------------------------------------------------ */

/* td_apply_fn: floating leaves converted to *(td_dtype *)payload, others shared. */
static int to_dtype(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	if (td_dtype_category(in->dtype) != TD_CATEGORY_FLOAT) {
		td_tensor_ref(out, in);
		return TD_OK;
	}
	return td_tensor_to_dtype(out, in, *(const td_dtype *)payload);
}

/* rb converted to `dtype` and back to float32; the size of the converted
 * dict and the largest error of the round trip. */
static int round_trip(demo *d, td_dtype dtype, size_t *nbytes, double *err, int *close)
{
	td_dtype f32 = TD_DTYPE_F32;
	td_dict *low = NULL, *back = NULL;
	const td_tensor *obs;
	demo_stats s;
	int rc;

	DEMO_CALL(d, td_dict_apply(&low, d->rb, to_dtype, &dtype));
	DEMO_CALL(d, td_dict_get_tensor(&obs, low, "obs"));
	DEMO_CHECK(d, obs->dtype == dtype, "obs converted to %s is %s", td_dtype_name(dtype),
		td_dtype_name(obs->dtype));
	DEMO_CALL(d, demo_dict_stats(low, &s));
	DEMO_CALL(d, td_dict_apply(&back, low, to_dtype, &f32));
	DEMO_CALL(d, demo_dict_max_abs_diff(back, d->rb, err));
	/* bfloat16 keeps 8 significant bits: rounding errs by at most 2^-8 relative. */
	DEMO_CALL(d, *close = td_dict_allclose(back, d->rb, 1.0 / 256, 0, false));
	*nbytes = s.nbytes;
out:
	td_dict_free(back);
	td_dict_free(low);
	return rc;
}

int demo_step_dtype(demo *d)
{
	size_t b32, b16, bbf;
	double e16 = 0, ebf = 0;
	demo_stats s;
	int rc, c16 = 0, cbf = 0;

	DEMO_CALL(d, demo_dict_stats(d->rb, &s));
	b32 = s.nbytes;
	DEMO_TRY(round_trip(d, TD_DTYPE_F16, &b16, &e16, &c16));
	DEMO_TRY(round_trip(d, TD_DTYPE_BF16, &bbf, &ebf, &cbf));
	/* Every value i + j/64 (i < 9) fits float16's 11 bits, not bfloat16's 8. */
	DEMO_CHECK(d, e16 == 0 && ebf > 0 && ebf <= 1.0 / 32 && cbf == 1 && b16 < b32 && b16 == bbf,
		"round trips: float16 error %g, bfloat16 error %g (allclose %d), "
		"bytes %zu -> %zu / %zu",
		e16, ebf, cbf, b32, b16, bbf);
	demo_say(d,
		"rb floats -> float16: %zu -> %zu B, back to float32 max |err| %g (exact); "
		"-> bfloat16: %zu B, back max |err| %g, allclose(rtol 2^-8) %d",
		b32, b16, e16, bbf, ebf, cbf);
out:
	return rc;
}

/* The string "info.env" and the bytes "seed" of `x` are `env` and `seed`. */
static bool blobs_are(const td_dict *x, const char *env, const unsigned char *seed, size_t n)
{
	const char *s, *b;
	size_t slen, blen;

	if (td_dict_get_blob(&s, &slen, x, "info.env") < 0 ||
		td_dict_get_blob(&b, &blen, x, "seed") < 0)
		return false;
	return slen == strlen(env) && strcmp(s, env) == 0 && blen == n && memcmp(b, seed, n) == 0;
}

/* Index, clone, unbind + stack keep the non-tensor leaves. */
static int blobs_travel(demo *d, const td_dict *c, const unsigned char *seed, size_t n)
{
	td_dict *row = NULL, *cl = NULL, *st = NULL, **parts = NULL;
	td_index idx = td_index_int(2);
	size_t np = 0;
	int rc;

	DEMO_CALL(d, td_dict_index(&row, c, &idx, 1));
	DEMO_CALL(d, td_dict_clone(&cl, c));
	DEMO_CALL(d, td_dict_unbind(&parts, &np, c, 0));
	DEMO_CALL(d, td_dict_stack(&st, (const td_dict *const *)parts, np, 0));
	DEMO_CHECK(d,
		blobs_are(row, "CartPole-v1", seed, n) && blobs_are(cl, "CartPole-v1", seed, n) &&
			blobs_are(st, "CartPole-v1", seed, n),
		"indexing, clone or unbind + stack lost a non-tensor leaf");
	DEMO_TRY(demo_check_equal(d, st, c, 1, "stack(unbind(rb with non-tensors))"));
	DEMO_CALL(d, td_dict_set_string(cl, "info.env", "Pendulum-v1"));
	DEMO_TRY(demo_check_equal(d, cl, c, 0, "dicts with different strings"));
out:
	td_dict_array_free(parts, np);
	td_dict_free(st);
	td_dict_free(cl);
	td_dict_free(row);
	return rc;
}

/*
 * An array of strings, one per row ("info.task", tensordict's
 * NonTensorStack): rb[2] gives row 2's string, rb[1:3] an array of two,
 * and unbind + stack gives the array back.
 */
static int strings_travel(demo *d, const td_dict *c)
{
	td_dict *row = NULL, *part = NULL, *st = NULL, **parts = NULL;
	td_index two = td_index_int(2), mid = td_index_slice(1, 3, 1);
	const td_strings *arr;
	const td_value *v;
	size_t np = 0;
	int rc;

	DEMO_CALL(d, td_dict_index(&row, c, &two, 1));
	DEMO_CALL(d, td_dict_get(&v, row, "info.task"));
	DEMO_CHECK(d, v->kind == TD_VALUE_STRING && strcmp(v->blob.data, "task-2") == 0,
		"rb[2] holds row 2's string");
	DEMO_CALL(d, td_dict_index(&part, c, &mid, 1));
	DEMO_CALL(d, td_dict_get_strings(&arr, part, "info.task"));
	DEMO_CHECK(d, arr->numel == 2 && strcmp(td_strings_at(NULL, arr, 1), "task-2") == 0,
		"rb[1:3] holds rows 1 and 2's strings");
	DEMO_CALL(d, td_dict_unbind(&parts, &np, c, 0));
	DEMO_CALL(d, td_dict_stack(&st, (const td_dict *const *)parts, np, 0));
	DEMO_TRY(demo_check_equal(d, st, c, 1, "stack(unbind(rb with an array of strings))"));
out:
	td_dict_array_free(parts, np);
	td_dict_free(st);
	td_dict_free(part);
	td_dict_free(row);
	return rc;
}

int demo_set_tasks(demo *d, td_dict *c)
{
	static const int64_t rows[1] = { DEMO_ROWS };
	char names[DEMO_ROWS][16];
	const char *texts[DEMO_ROWS];
	int i, rc;

	for (i = 0; i < DEMO_ROWS; i++) {
		snprintf(names[i], sizeof(names[i]), "task-%d", i);
		texts[i] = names[i];
	}
	DEMO_CALL(d, td_dict_set_strings(c, "info.task", 1, rows, texts));
out:
	return rc;
}

int demo_step_non_tensor(demo *d)
{
	static const unsigned char seed[6] = { 0xde, 0xad, 0x00, 0xbe, 0xef, 0x01 };
	td_dict *c = NULL;
	const td_value *v;
	size_t env_len = 0;
	demo_stats s;
	int rc;

	DEMO_CALL(d, td_dict_copy(&c, d->rb));
	DEMO_CALL(d, td_dict_set_string(c, "info.env", "CartPole-v1"));
	DEMO_CALL(d, td_dict_set_bytes(c, "seed", seed, sizeof(seed)));
	DEMO_CALL(d, td_dict_get(&v, c, "info.env"));
	DEMO_CALL(d, demo_dict_stats(c, &s));
	DEMO_CHECK(d,
		v->kind == TD_VALUE_STRING && s.blobs == 2 &&
			blobs_are(c, "CartPole-v1", seed, sizeof(seed)),
		"non-tensor leaves read back wrong (%zu found)", s.blobs);
	env_len = v->blob.length;
	DEMO_TRY(blobs_travel(d, c, seed, sizeof(seed)));
	DEMO_TRY(demo_set_tasks(d, c));
	DEMO_TRY(strings_travel(d, c));
	DEMO_TRY(demo_check_code(d, td_dict_set_string(c, "bad", "\xff\xfe"), TD_EINVAL,
		"set_string of invalid UTF-8"));
	demo_say(d,
		"\"info.env\" = \"CartPole-v1\" (%zu B), \"seed\" = %zu bytes with a NUL; "
		"kept by rb[2], clone, unbind+stack; other string: equal 0; bad UTF-8: %s; "
		"\"info.task\", one string per row: rb[2] -> \"task-2\", rb[1:3] -> 2 strings, "
		"unbind+stack -> the array",
		env_len, sizeof(seed), td_strerror(TD_EINVAL));
out:
	td_dict_free(c);
	return rc;
}
