/* SPDX-License-Identifier: MIT */
/*
 * bench_core.c - the rows of tensordict's benchmarks/common/common_ops_test.py
 * in C: each row builds the Python fixture (bench_fixtures.c) and times the
 * td_dict call that does what the Python statement does, including making
 * and releasing the objects the Python statement makes and drops.
 */
#include "config.h"

#include "bench.h"
#include "bench_fixtures.h"
#include "bench_suites.h"

#include <tdstore.h>

#include <stdlib.h>
#include <string.h>

enum fixture {
	FIX_NONE = 0,
	FIX_TD,        /* {"a": a, "b": {"b1": b}} */
	FIX_TD_FLAT,   /* {"a": a, "b": b} (test_update) */
	FIX_BIG,       /* big_td */
	FIX_NESTED,    /* big_nested_td */
	FIX_STACKED,   /* big_nested_stacked_td */
	FIX_LAZY,      /* the same, stacked lazily (LazyStackedTensorDict) */
	FIX_NESTED_320 /* big_nested_td(size=(3, 20)) */
};

enum { COLLECT_KEYS = 1, COLLECT_VALUES = 2, COLLECT_ITEMS = 3 };

/* Entries of big_nested_td seen by keys(True): 19 leaves and 19 dicts. */
#define NESTED_ENTRIES (2 * FIX_NESTED_LEAVES)
/* Room for collected nested keys: every path component of every entry. */
#define KEY_POOL 1024

typedef struct core core;

/* What a row builds and does; the fields a row does not use stay 0. */
typedef struct core_arg {
	enum fixture fixture;
	bool lock;               /* lock the fixture once built */
	bool per_call;           /* no shared fixture: prepare() makes one per call */
	unsigned flags;          /* TD_ITER_* / TD_LEAVES_ONLY */
	int collect;             /* COLLECT_* */
	const char *key;         /* a dotted key */
	const char *const *path; /* a key path ... */
	size_t depth;            /* ... of this many components */
	int expect;              /* expected answer or count */
	const td_index *idx;     /* an index expression ... */
	size_t nidx;             /* ... of this many elements */
	int dim;
	size_t count; /* keys to create; sizes; pieces */
	bool recurse;
	int (*extra)(core *s); /* more untimed setup */
} core_arg;

struct core {
	const core_arg *arg;
	td_dict *td;           /* the fixture */
	td_dict *other;        /* a second dict: update source, setitem value */
	td_tensor a, b, c, t;  /* loose tensors */
	td_tensor many[100];   /* test_creation_many_keys */
	const char *keys[128]; /* collected keys (flat) */
	const td_value *values[128];
	const char *pool[KEY_POOL]; /* collected nested keys, back to back */
	size_t ends[128];           /* where each nested key ends in `pool` */
	td_dict **fresh;            /* a fresh fixture per call (lock / unlock) */
	size_t nfresh;
	/*
	 * Python's tuple keys hold strings whose hashes Python caches after the
	 * first use; their C counterpart is a precompiled td_key, made once
	 * untimed (the rows note it).
	 */
	td_key *k_arg; /* arg->path */
	td_key *k_k20, *k_leaf, *k_node;
};

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */
/* ------------------------------------------------------------------------ */

/* TensorDict({"a": a, "b": b}, [3, 4]) */
static int build_flat_ab(td_dict **out, const td_tensor *a, const td_tensor *b)
{
	td_dict *d = NULL;
	int rc;

	rc = td_dict_new(&d, 2, fix_b34);
	if (rc >= 0)
		rc = td_dict_set_tensor(d, "a", a);
	if (rc >= 0)
		rc = td_dict_set_tensor(d, "b", b);
	if (rc < 0) {
		td_dict_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

static int build_fixture(core *s)
{
	switch (s->arg->fixture) {
	case FIX_TD:
		return fix_build_td(&s->td, &s->a, &s->b);
	case FIX_TD_FLAT:
		return build_flat_ab(&s->td, &s->a, &s->b);
	case FIX_BIG:
		return fix_big_td(&s->td);
	case FIX_NESTED:
		return fix_big_nested_td(&s->td, fix_b34);
	case FIX_STACKED:
		return fix_big_nested_stacked_td(&s->td);
	case FIX_LAZY:
		return fix_big_nested_lazy_td(&s->td);
	case FIX_NESTED_320:
		return fix_big_nested_td(&s->td, fix_b320);
	default:
		return 0;
	}
}

/* The tensor test_plain_set_* stores: zeros of the fixture's batch shape. */
static int make_plain_tensor(core *s)
{
	if (!s->td)
		return td_tensor_zeros(&s->t, TD_DTYPE_F32, 2, fix_b34);
	return td_tensor_zeros(&s->t, TD_DTYPE_F32, td_dict_batch_ndim(s->td),
		td_dict_batch_shape(s->td));
}

static void core_teardown(void *state)
{
	core *s = state;

	if (!s)
		return;
	td_dict_free(s->td);
	td_dict_free(s->other);
	td_tensor_release(&s->a);
	td_tensor_release(&s->b);
	td_tensor_release(&s->c);
	td_tensor_release(&s->t);
	fix_release(s->many, 100);
	td_key_free(s->k_arg);
	td_key_free(s->k_k20);
	td_key_free(s->k_leaf);
	td_key_free(s->k_node);
	free(s);
}

static int core_setup(void **state, const void *arg)
{
	core *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return bench_fail("out of memory");
	*state = s;
	s->arg = arg;
	rc = td_tensor_zeros(&s->a, TD_DTYPE_F32, 3, fix_s345);
	if (rc >= 0)
		rc = td_tensor_zeros(&s->b, TD_DTYPE_F32, 3, fix_s345);
	if (rc >= 0)
		rc = td_tensor_zeros(&s->c, TD_DTYPE_F32, 3, fix_s345);
	if (rc >= 0 && s->arg->path)
		rc = td_key_from_path(&s->k_arg, s->arg->path, s->arg->depth);
	if (rc >= 0)
		rc = td_key_from_path(&s->k_k20, fix_k20, 20);
	if (rc >= 0)
		rc = td_key_from_path(&s->k_leaf, fix_leaf, 20);
	if (rc >= 0)
		rc = td_key_from_path(&s->k_node, fix_leaf, 19);
	if (rc >= 0 && !s->arg->per_call)
		rc = build_fixture(s);
	if (rc >= 0)
		rc = make_plain_tensor(s);
	if (rc >= 0 && s->arg->lock && !s->arg->per_call)
		rc = td_dict_lock(s->td);
	if (rc >= 0 && s->arg->extra)
		rc = s->arg->extra(s);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------------------------ */
/* Set, iterate, look up                                                     */
/* ------------------------------------------------------------------------ */

/* td.set(K20, t): the first call makes 19 nested dicts, later ones replace the leaf. */
static int run_set_k20(void *state, size_t i)
{
	core *s = state;

	(void)i;
	return td_dict_set_tensor_key(s->td, s->k_k20, &s->t);
}

static int extra_set_k20(core *s)
{
	return run_set_k20(s, 0);
}

/* td.set(K20, t, inplace=True) */
static int run_set_k20_inplace(void *state, size_t i)
{
	core *s = state;

	(void)i;
	return td_dict_set_tensor_inplace_key(s->td, s->k_k20, &s->t);
}

/* list(td.items() / keys() / values()) on big_td */
static int run_items_flat(void *state, size_t i)
{
	core *s = state;
	int c = s->arg->collect;
	size_t n;

	(void)i;
	n = td_dict_items((c & COLLECT_KEYS) ? s->keys : NULL, (c & COLLECT_VALUES) ? s->values : NULL,
		128, s->td);
	if (n != (size_t)s->arg->expect)
		return bench_fail("td_dict_items gave %zu entries, expected %d", n, s->arg->expect);
	return 0;
}

/* One nested entry: its key (a path, copied as Python builds a tuple) and/or its value. */
static int collect_item(core *s, const td_item *item, size_t n, size_t *used)
{
	if (n >= 128 || *used + item->depth > KEY_POOL)
		return bench_fail("more nested entries than the row expects");
	if (s->arg->collect & COLLECT_KEYS) {
		memcpy(&s->pool[*used], item->path, item->depth * sizeof(*item->path));
		*used += item->depth;
		s->ends[n] = *used;
	}
	if (s->arg->collect & COLLECT_VALUES)
		s->values[n] = item->value;
	return 0;
}

/* list(td.items(True[, True])) and the keys / values variants */
static int run_items_nested(void *state, size_t i)
{
	core *s = state;
	td_dict_iter *it;
	td_item item;
	size_t n = 0, used = 0;
	int rc;

	(void)i;
	rc = td_dict_iter_new(&it, s->td, s->arg->flags);
	if (rc < 0)
		return rc;
	while ((rc = td_dict_iter_next(&item, it)) == 1) {
		rc = collect_item(s, &item, n++, &used);
		if (rc < 0)
			break;
	}
	td_dict_iter_free(it);
	if (rc < 0)
		return rc;
	if (n != (size_t)s->arg->expect)
		return bench_fail("iteration gave %zu entries, expected %d", n, s->arg->expect);
	return 0;
}

/* key in td.keys(...) */
static int run_contains(void *state, size_t i)
{
	core *s = state;
	const core_arg *a = s->arg;
	int r;

	(void)i;
	if (a->key)
		r = td_dict_contains(s->td, a->key, a->flags);
	else
		r = td_dict_contains_key(s->td, s->k_arg, a->flags);
	if (r < 0)
		return r;
	if (r != a->expect)
		return bench_fail("contains answered %d, expected %d", r, a->expect);
	return 0;
}

/* td.get(key) */
static int run_get(void *state, size_t i)
{
	core *s = state;
	const td_value *v;
	int rc;

	(void)i;
	rc = td_dict_get_key(&v, s->td, s->k_arg);
	BENCH_USE(v);
	return rc;
}

/* td[LEAF]: a typed tensor lookup */
static int run_getitem_leaf(void *state, size_t i)
{
	core *s = state;
	const td_tensor *t;
	int rc;

	(void)i;
	rc = td_dict_get_tensor_key(&t, s->td, s->k_leaf);
	BENCH_USE(t);
	return rc;
}

/* td[NODE]: a typed dict lookup */
static int run_getitem_node(void *state, size_t i)
{
	core *s = state;
	const td_value *v;
	int rc;

	(void)i;
	rc = td_dict_get_key(&v, s->td, s->k_node);
	if (rc >= 0 && v->kind != TD_VALUE_DICT)
		return bench_fail("td[NODE] is not a dict");
	BENCH_USE(v);
	return rc;
}

/* td.get(LEAF) / td[LEAF] on a lazy stack: a stacked copy, dropped */
static int run_lazy_get_leaf(void *state, size_t i)
{
	core *s = state;
	td_tensor t;
	int rc;

	(void)i;
	rc = td_lazy_get_tensor_key(&t, s->td, s->arg->path ? s->k_arg : s->k_leaf);
	if (rc >= 0)
		td_tensor_release(&t);
	return rc;
}

/* td.get(NODE) / td[NODE] on a lazy stack: a lazy stack of the sub-dicts, dropped */
static int run_lazy_get_node(void *state, size_t i)
{
	core *s = state;
	td_dict *d = NULL;
	int rc;

	(void)i;
	rc = td_lazy_get_dict_key(&d, s->td, s->arg->path ? s->k_arg : s->k_node);
	td_dict_free(d);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Lock / unlock: a fresh fixture per call (pytest's pedantic setup)         */
/* ------------------------------------------------------------------------ */

static void unprepare_fresh(void *state, size_t k)
{
	core *s = state;
	size_t i;

	(void)k;
	for (i = 0; i < s->nfresh; i++)
		td_dict_free(s->fresh[i]);
	free(s->fresh);
	s->fresh = NULL;
	s->nfresh = 0;
}

static int prepare_fresh(void *state, size_t k)
{
	core *s = state;
	int rc = 0;

	s->fresh = calloc(k, sizeof(*s->fresh));
	if (!s->fresh)
		return bench_fail("out of memory for %zu fixtures", k);
	for (s->nfresh = 0; s->nfresh < k && rc >= 0; s->nfresh++) {
		td_dict **d = &s->fresh[s->nfresh];

		if (s->arg->fixture == FIX_STACKED)
			rc = fix_big_nested_stacked_td(d);
		else if (s->arg->fixture == FIX_LAZY)
			rc = fix_big_nested_lazy_td(d);
		else
			rc = fix_big_nested_td(d, fix_b34);
		if (rc >= 0 && s->arg->lock)
			rc = td_dict_lock(*d);
	}
	return rc < 0 ? rc : 0;
}

/* list(td): iterating a tensordict yields its slices along dim 0 */
static int unbind_and_drop(const td_dict *d, size_t expect)
{
	td_dict **parts;
	size_t n;
	int rc;

	rc = td_dict_unbind(&parts, &n, d, 0);
	if (rc < 0)
		return rc;
	td_dict_array_free(parts, n);
	if (n != expect)
		return bench_fail("unbind gave %zu dicts, expected %zu", n, expect);
	return 0;
}

/* list(td.lock_()) */
static int run_lock(void *state, size_t i)
{
	core *s = state;
	int rc;

	rc = td_dict_lock(s->fresh[i]);
	return rc < 0 ? rc : unbind_and_drop(s->fresh[i], 3);
}

/* list(td.unlock_()) */
static int run_unlock(void *state, size_t i)
{
	core *s = state;
	int rc;

	rc = td_dict_unlock(s->fresh[i]);
	return rc < 0 ? rc : unbind_and_drop(s->fresh[i], 3);
}

/* ------------------------------------------------------------------------ */
/* Whole-dict operations                                                     */
/* ------------------------------------------------------------------------ */

/*
 * Free what a call made. Takes the address: with drop(f(&out), out) C
 * would be free to read `out` before f() runs (argument evaluation order
 * is unspecified), and GCC does, which leaked every result.
 */
static int drop(int rc, td_dict **out)
{
	td_dict_free(*out);
	return rc;
}

/* td.flatten_keys() */
static int run_flatten(void *state, size_t i)
{
	core *s = state;
	td_dict *out = NULL;

	(void)i;
	return drop(td_dict_flatten_keys(&out, s->td, "."), &out);
}

static int extra_flatten(core *s)
{
	return td_dict_flatten_keys(&s->other, s->td, ".");
}

/* flat.unflatten_keys() */
static int run_unflatten(void *state, size_t i)
{
	core *s = state;
	td_dict *out = NULL;

	(void)i;
	return drop(td_dict_unflatten_keys(&out, s->other, "."), &out);
}

/* td.clone() */
static int run_clone(void *state, size_t i)
{
	core *s = state;
	td_dict *out = NULL;

	(void)i;
	return drop(td_dict_clone(&out, s->td), &out);
}

/* td.select(LEAF) */
static int run_select_nested(void *state, size_t i)
{
	core *s = state;
	const td_key *keys[1] = { s->k_leaf };
	td_dict *out = NULL;

	(void)i;
	return drop(td_dict_select_keys(&out, s->td, keys, 1, true), &out);
}

/* td.exclude(LEAF) */
static int run_exclude_nested(void *state, size_t i)
{
	core *s = state;
	const td_key *keys[1] = { s->k_leaf };
	td_dict *out = NULL;

	(void)i;
	return drop(td_dict_exclude_keys(&out, s->td, keys, 1), &out);
}

/* td.empty(recurse=...) */
static int run_empty(void *state, size_t i)
{
	core *s = state;
	td_dict *out = NULL;

	(void)i;
	return drop(td_dict_empty(&out, s->td, s->arg->recurse), &out);
}

/* td.unbind(dim) / td.split(2, dim) / td.chunk(10, dim): views, then dropped */
static int run_pieces(void *state, size_t i, int which)
{
	core *s = state;
	const core_arg *a = s->arg;
	td_dict **parts = NULL;
	size_t n = 0;
	int rc;

	(void)i;
	if (which == 0)
		rc = td_dict_unbind(&parts, &n, s->td, a->dim);
	else if (which == 1)
		rc = td_dict_split(&parts, &n, s->td, 2, a->dim);
	else
		rc = td_dict_chunk(&parts, &n, s->td, 10, a->dim);
	if (rc < 0)
		return rc;
	td_dict_array_free(parts, n);
	if (n != a->count)
		return bench_fail("%zu pieces, expected %zu", n, a->count);
	return 0;
}

static int run_unbind(void *state, size_t i)
{
	return run_pieces(state, i, 0);
}

static int run_split(void *state, size_t i)
{
	return run_pieces(state, i, 1);
}

static int run_chunk(void *state, size_t i)
{
	return run_pieces(state, i, 2);
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */
/* ------------------------------------------------------------------------ */

/* TensorDict({}, [3, 4]) */
static int run_creation(void *state, size_t i)
{
	td_dict *d = NULL;

	(void)state;
	(void)i;
	return drop(td_dict_new(&d, 2, fix_b34), &d);
}

/* TensorDict({"a": a, "b": b}, [3, 4]) */
static int run_creation_empty(void *state, size_t i)
{
	core *s = state;
	td_dict *d = NULL;

	(void)i;
	return drop(build_flat_ab(&d, &s->a, &s->b), &d);
}

/* TensorDict({"a": a, ("b", "b1"): b}, [3, 4]) */
static int run_creation_nested_1(void *state, size_t i)
{
	core *s = state;
	td_dict *d = NULL;
	int rc;

	(void)i;
	rc = td_dict_new(&d, 2, fix_b34);
	if (rc >= 0)
		rc = td_dict_set_tensor(d, "a", &s->a);
	if (rc >= 0)
		rc = td_dict_set_tensor(d, "b.b1", &s->b);
	return drop(rc, &d);
}

/* TensorDict({"a": a, "b": {"b1": b}}, [3, 4]) */
static int run_creation_nested_2(void *state, size_t i)
{
	core *s = state;
	td_dict *d = NULL;

	(void)i;
	return drop(fix_build_td(&d, &s->a, &s->b), &d);
}

static int extra_many(core *s)
{
	size_t i;

	for (i = 0; i < s->arg->count; i++) {
		int rc = td_tensor_zeros(&s->many[i], TD_DTYPE_F32, 3, fix_s345);

		if (rc < 0)
			return rc;
	}
	return 0;
}

static int set_many(td_dict *d, const td_tensor *many, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		int rc = td_dict_set_tensor(d, fix_key(i), &many[i]);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* TensorDict({str(i): zeros(3, 4, 5) for i in range(N)}, [3, 4]) */
static int run_creation_many(void *state, size_t i)
{
	core *s = state;
	td_dict *d = NULL;
	int rc;

	(void)i;
	rc = td_dict_new(&d, 2, fix_b34);
	if (rc >= 0)
		rc = set_many(d, s->many, s->arg->count);
	return drop(rc, &d);
}

/* The same N keys, plus "nested": the same N keys again */
static int run_creation_nested_many(void *state, size_t i)
{
	core *s = state;
	td_dict *d = NULL, *child = NULL;
	int rc;

	(void)i;
	rc = td_dict_new(&d, 2, fix_b34);
	if (rc >= 0)
		rc = set_many(d, s->many, s->arg->count);
	if (rc >= 0)
		rc = td_dict_new(&child, 2, fix_b34);
	if (rc >= 0)
		rc = set_many(child, s->many, s->arg->count);
	if (rc >= 0 && (rc = td_dict_set_dict_take(d, "nested", child)) >= 0)
		child = NULL;
	td_dict_free(child);
	return drop(rc, &d);
}

/* ------------------------------------------------------------------------ */
/* Indexing, set, update, select on td                                       */
/* ------------------------------------------------------------------------ */

/* td[index] */
static int run_getitem(void *state, size_t i)
{
	core *s = state;
	td_dict *out = NULL;

	(void)i;
	return drop(td_dict_index(&out, s->td, s->arg->idx, s->arg->nidx), &out);
}

/* The value of test_setitem_dim: td[index].clone().zero_(), made once (it
 * is not changed by the assignment). */
static int extra_setitem_value(core *s)
{
	td_dict *view = NULL;
	int rc;

	rc = td_dict_index(&view, s->td, s->arg->idx, s->arg->nidx);
	if (rc >= 0)
		rc = td_dict_clone(&s->other, view);
	td_dict_free(view);
	return rc < 0 ? rc : td_dict_zero(s->other);
}

/* td[index] = td_index */
static int run_setitem_dim(void *state, size_t i)
{
	core *s = state;

	(void)i;
	return td_dict_index_put(s->td, s->arg->idx, s->arg->nidx, s->other);
}

/* tdc = td.clone(); tdc[key] = tensor (a dotted key); the clone dropped */
static int clone_and_set(core *s, const char *key, const td_tensor *t, td_dict **keep)
{
	td_dict *c = NULL;
	int rc;

	rc = td_dict_clone(&c, s->td);
	if (rc >= 0)
		rc = td_dict_set_tensor(c, key, t);
	if (rc >= 0 && keep) {
		*keep = c;
		return 0;
	}
	return drop(rc, &c);
}

/* The tuple keys ("b", "b1") and ("c", "c", "c"), dotted. */
static const char key_b_b1[] = "b.b1";
static const char key_c_c_c[] = "c.c.c";

/* test_setitem / test_set: tdc = td.clone(); tdc["c"] = c */
static int run_clone_set_c(void *state, size_t i)
{
	core *s = state;

	td_dict *c = NULL;
	int rc;

	(void)i;
	rc = td_dict_clone(&c, s->td);
	if (rc >= 0)
		rc = td_dict_set_tensor(c, "c", &s->c);
	return drop(rc, &c);
}

/* tdc = td.clone(); tdc["b", "b1"] = b */
static int run_set_nested(void *state, size_t i)
{
	core *s = state;

	(void)i;
	return clone_and_set(s, key_b_b1, &s->b, NULL);
}

/* tdc = td.clone(); tdc["c", "c", "c"] = c */
static int run_set_nested_new(void *state, size_t i)
{
	core *s = state;

	(void)i;
	return clone_and_set(s, key_c_c_c, &s->c, NULL);
}

/* ...then tdc.select("a", "z", ("c", "c", "c"), strict=False) */
static int run_select(void *state, size_t i)
{
	static const char *const keys[3] = { "a", "z", "c.c.c" };
	core *s = state;
	td_dict *c = NULL, *sel = NULL;
	int rc;

	(void)i;
	rc = clone_and_set(s, key_c_c_c, &s->c, &c);
	if (rc >= 0)
		rc = td_dict_select(&sel, c, keys, 3, false);
	td_dict_free(sel);
	return drop(rc, &c);
}

static int extra_clone_other(core *s)
{
	return td_dict_clone(&s->other, s->td);
}

/* tdc = td.clone(); tdc.update(td2) or tdc.update_(td2) */
static int run_update(void *state, size_t i)
{
	core *s = state;
	td_dict *c = NULL;
	int rc;

	(void)i;
	rc = td_dict_clone(&c, s->td);
	if (rc >= 0)
		rc = s->arg->flags ? td_dict_update_inplace(c, s->other) : td_dict_update(c, s->other);
	return drop(rc, &c);
}

/* ------------------------------------------------------------------------ */
/* test_common_ops: main() of common_ops_test.py                             */
/* ------------------------------------------------------------------------ */

/*
 * The sequence of main(), step by step. Each "x = torch.zeros(3, 4, 5)" is a
 * fresh tensor here too, and each dict is dropped when Python would drop it
 * (rebinding `td`, `td2`, `tdc`). One deviation: the "set shared" step's
 * tdc.share_memory_() has no C counterpart yet (shared-memory buffers belong
 * to the storage layer), so that step does the clone only.
 */
typedef struct ops_ctx {
	td_tensor a, b, c;
	td_dict *td, *td2, *tdc;
} ops_ctx;

static int fresh_zeros(td_tensor *t)
{
	td_tensor_release(t);
	return td_tensor_zeros(t, TD_DTYPE_F32, 3, fix_s345);
}

static int fresh_ab(ops_ctx *x)
{
	int rc = fresh_zeros(&x->a);

	return rc < 0 ? rc : fresh_zeros(&x->b);
}

/* td = TensorDict({"a": a, "b": {"b1": b}}, [3, 4]); tdc = td.clone() */
static int nested_and_clone(ops_ctx *x)
{
	int rc;

	td_dict_free(x->td);
	x->td = NULL;
	rc = fix_build_td(&x->td, &x->a, &x->b);
	if (rc < 0)
		return rc;
	td_dict_free(x->tdc);
	x->tdc = NULL;
	return td_dict_clone(&x->tdc, x->td);
}

/* creation, creation empty, creation nested 1 and 2 */
static int ops_creation(ops_ctx *x)
{
	td_dict *d = NULL;
	int rc;

	rc = drop(td_dict_new(&d, 2, fix_b34), &d);
	if (rc >= 0 && (rc = fresh_ab(x)) >= 0) {
		d = NULL;
		rc = drop(build_flat_ab(&d, &x->a, &x->b), &d);
	}
	if (rc >= 0 && (rc = fresh_ab(x)) >= 0) {
		d = NULL;
		rc = td_dict_new(&d, 2, fix_b34);
		if (rc >= 0 && (rc = td_dict_set_tensor(d, "a", &x->a)) >= 0)
			rc = td_dict_set_tensor(d, key_b_b1, &x->b);
		rc = drop(rc, &d);
	}
	if (rc >= 0 && (rc = fresh_ab(x)) >= 0) {
		d = NULL;
		rc = drop(fix_build_td(&d, &x->a, &x->b), &d);
	}
	return rc;
}

/* clone, __setitem__, set, set shared */
static int ops_clone_set(ops_ctx *x)
{
	int rc;

	if ((rc = fresh_ab(x)) < 0 || (rc = nested_and_clone(x)) < 0)
		return rc;
	if ((rc = fresh_ab(x)) < 0 || (rc = fresh_zeros(&x->c)) < 0 || (rc = nested_and_clone(x)) < 0 ||
		(rc = td_dict_set_tensor(x->tdc, "c", &x->c)) < 0)
		return rc;
	if ((rc = fresh_zeros(&x->c)) < 0 || (rc = nested_and_clone(x)) < 0 ||
		(rc = td_dict_set_tensor(x->tdc, "c", &x->c)) < 0)
		return rc;
	if ((rc = fresh_ab(x)) < 0 || (rc = nested_and_clone(x)) < 0)
		return rc;
	return 0;
}

/* update (flat), update nested */
static int ops_update(ops_ctx *x)
{
	int rc;

	if ((rc = fresh_ab(x)) < 0)
		return rc;
	td_dict_free(x->td);
	x->td = NULL;
	if ((rc = build_flat_ab(&x->td, &x->a, &x->b)) < 0)
		return rc;
	td_dict_free(x->td2);
	x->td2 = NULL;
	td_dict_free(x->tdc);
	x->tdc = NULL;
	if ((rc = td_dict_clone(&x->td2, x->td)) < 0 || (rc = td_dict_clone(&x->tdc, x->td)) < 0 ||
		(rc = td_dict_update(x->tdc, x->td2)) < 0)
		return rc;
	if ((rc = fresh_ab(x)) < 0 || (rc = nested_and_clone(x)) < 0)
		return rc;
	td_dict_free(x->td2);
	x->td2 = NULL;
	if ((rc = td_dict_clone(&x->td2, x->td)) < 0)
		return rc;
	return td_dict_update(x->tdc, x->td2);
}

/* set nested, set nested new, select (main() stops before the select call) */
static int ops_set_nested(ops_ctx *x)
{
	int rc;

	if ((rc = fresh_ab(x)) < 0 || (rc = nested_and_clone(x)) < 0 ||
		(rc = td_dict_set_tensor(x->tdc, key_b_b1, &x->b)) < 0)
		return rc;
	if ((rc = fresh_ab(x)) < 0 || (rc = fresh_zeros(&x->c)) < 0 || (rc = nested_and_clone(x)) < 0 ||
		(rc = td_dict_set_tensor(x->tdc, key_c_c_c, &x->c)) < 0)
		return rc;
	if ((rc = fresh_ab(x)) < 0 || (rc = fresh_zeros(&x->c)) < 0 || (rc = nested_and_clone(x)) < 0)
		return rc;
	return td_dict_set_tensor(x->tdc, key_c_c_c, &x->c);
}

static int run_common_ops(void *state, size_t i)
{
	ops_ctx x;
	int rc;

	(void)state;
	(void)i;
	memset(&x, 0, sizeof(x));
	rc = ops_creation(&x);
	if (rc >= 0)
		rc = ops_clone_set(&x);
	if (rc >= 0)
		rc = ops_update(&x);
	if (rc >= 0)
		rc = ops_set_nested(&x);
	td_dict_free(x.td);
	td_dict_free(x.td2);
	td_dict_free(x.tdc);
	td_tensor_release(&x.a);
	td_tensor_release(&x.b);
	td_tensor_release(&x.c);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* The rows, in the order of the seed table                                  */
/* ------------------------------------------------------------------------ */

#define ARG(...) (&(const core_arg){ __VA_ARGS__ })
#define ROW(nm, fn, n, ...) \
	{ \
		.name = nm, .setup = core_setup, .run = fn, .teardown = core_teardown, .entries = n, \
		.arg = ARG(__VA_ARGS__) \
	}
#define ROW_NOTE(nm, fn, n, note_, ...) \
	{ \
		.name = nm, .setup = core_setup, .run = fn, .teardown = core_teardown, .entries = n, \
		.note = note_, .arg = ARG(__VA_ARGS__) \
	}
#define ROW_FRESH(nm, fn, ...) \
	{ \
		.name = nm, .setup = core_setup, .run = fn, .teardown = core_teardown, \
		.prepare = prepare_fresh, .unprepare = unprepare_fresh, .entries = 4 * NESTED_ENTRIES, \
		.note = NOTE_FRESH, .arg = ARG(__VA_ARGS__) \
	}
#define ROW_NA(nm, why) \
	{ \
		.name = nm, .note = why \
	}

#define NESTED TD_ITER_NESTED
#define LEAVES (TD_ITER_NESTED | TD_ITER_LEAVES_ONLY)

#define NOTE_FRESH \
	"a fresh fixture per call, built untimed (pedantic setup); " \
	"list(td) is td_dict_unbind(dim 0), then the 3 views are freed"
#define NOTE_KEY \
	"the tuple key is a td_key made once, untimed: Python caches the hashes " \
	"of the tuple's strings, a td_key holds them precomputed"
#define NOTE_LAZY_SET \
	"td_key made once, untimed; the tensor is sliced along the stack " \
	"dim into each of the 10 children"
#define NOTE_LAZY_ITER \
	"values are made by the iterator: a stacked copy per leaf, a lazy " \
	"stack per sub-dict, freed at the next step"
#define NOTE_LAZY_GET \
	"td_key made once, untimed; a leaf is a new stacked copy " \
	"(td_lazy_get_tensor_key), a node a new lazy stack (td_lazy_get_dict_key), both freed"
#define NOTE_SETITEM \
	"the value td[index].clone().zero_() is made once, untimed: " \
	"the assignment does not change it"

static const char *const key_a[1] = { "a" };
static const char *const key_0_t[2] = { "0", "t" };
static const int64_t list_0_1[2] = { 0, 1 };

static const td_index idx_int[1] = { { .kind = TD_INDEX_INT, .start = 1, .step = 1 } };
static const td_index idx_slice_int[2] = {
	{ .kind = TD_INDEX_SLICE, .start = TD_SLICE_NONE, .stop = TD_SLICE_NONE, .step = 1 },
	{ .kind = TD_INDEX_INT, .start = 1, .step = 1 }
};
static const td_index idx_range[1] = {
	{ .kind = TD_INDEX_RANGE, .start = 0, .stop = 2, .step = 1 }
};
static const td_index idx_tuple[2] = { { .kind = TD_INDEX_INT, .start = 2, .step = 1 },
	{ .kind = TD_INDEX_INT, .start = 1, .step = 1 } };
static const td_index idx_list[1] = {
	{ .kind = TD_INDEX_LIST, .list = list_0_1, .count = 2, .step = 1 }
};

static const bench_row core_rows[] = {
	ROW_NOTE("test_plain_set_nested", run_set_k20, 0, NOTE_KEY, .fixture = FIX_NESTED),
	ROW_NOTE("test_plain_set_stack_nested", run_set_k20, 0, NOTE_KEY, .fixture = FIX_STACKED),
	ROW_NOTE("test_plain_set_nested_inplace", run_set_k20_inplace, 0, NOTE_KEY,
		.fixture = FIX_NESTED, .extra = extra_set_k20),
	ROW_NOTE("test_plain_set_stack_nested_inplace", run_set_k20_inplace, 0, NOTE_KEY,
		.fixture = FIX_STACKED, .extra = extra_set_k20),
	ROW("test_items", run_items_flat, 100, .fixture = FIX_BIG, .collect = COLLECT_ITEMS,
		.expect = 100),
	ROW("test_items_nested", run_items_nested, NESTED_ENTRIES, .fixture = FIX_NESTED,
		.flags = NESTED, .collect = COLLECT_ITEMS, .expect = NESTED_ENTRIES),
	ROW("test_items_nested_locked", run_items_nested, NESTED_ENTRIES, .fixture = FIX_NESTED,
		.lock = true, .flags = NESTED, .collect = COLLECT_ITEMS, .expect = NESTED_ENTRIES),
	ROW("test_items_nested_leaf", run_items_nested, FIX_NESTED_LEAVES, .fixture = FIX_NESTED,
		.flags = LEAVES, .collect = COLLECT_ITEMS, .expect = FIX_NESTED_LEAVES),
	ROW("test_items_stack_nested", run_items_nested, NESTED_ENTRIES, .fixture = FIX_STACKED,
		.flags = NESTED, .collect = COLLECT_ITEMS, .expect = NESTED_ENTRIES),
	ROW("test_items_stack_nested_leaf", run_items_nested, FIX_NESTED_LEAVES, .fixture = FIX_STACKED,
		.flags = LEAVES, .collect = COLLECT_ITEMS, .expect = FIX_NESTED_LEAVES),
	ROW("test_items_stack_nested_locked", run_items_nested, NESTED_ENTRIES, .fixture = FIX_STACKED,
		.lock = true, .flags = NESTED, .collect = COLLECT_ITEMS, .expect = NESTED_ENTRIES),
	ROW("test_keys", run_items_flat, 100, .fixture = FIX_BIG, .collect = COLLECT_KEYS,
		.expect = 100),
	ROW("test_keys_nested", run_items_nested, NESTED_ENTRIES, .fixture = FIX_NESTED,
		.flags = NESTED, .collect = COLLECT_KEYS, .expect = NESTED_ENTRIES),
	ROW("test_keys_nested_locked", run_items_nested, NESTED_ENTRIES, .fixture = FIX_NESTED,
		.lock = true, .flags = NESTED, .collect = COLLECT_KEYS, .expect = NESTED_ENTRIES),
	ROW("test_keys_nested_leaf", run_items_nested, FIX_NESTED_LEAVES, .fixture = FIX_NESTED,
		.flags = LEAVES, .collect = COLLECT_KEYS, .expect = FIX_NESTED_LEAVES),
	ROW("test_keys_stack_nested", run_items_nested, NESTED_ENTRIES, .fixture = FIX_STACKED,
		.flags = NESTED, .collect = COLLECT_KEYS, .expect = NESTED_ENTRIES),
	ROW("test_keys_stack_nested_leaf", run_items_nested, FIX_NESTED_LEAVES, .fixture = FIX_STACKED,
		.flags = LEAVES, .collect = COLLECT_KEYS, .expect = FIX_NESTED_LEAVES),
	ROW("test_keys_stack_nested_locked", run_items_nested, NESTED_ENTRIES, .fixture = FIX_STACKED,
		.lock = true, .flags = NESTED, .collect = COLLECT_KEYS, .expect = NESTED_ENTRIES),
	ROW("test_values", run_items_flat, 100, .fixture = FIX_BIG, .collect = COLLECT_VALUES,
		.expect = 100),
	ROW("test_values_nested", run_items_nested, NESTED_ENTRIES, .fixture = FIX_NESTED,
		.flags = NESTED, .collect = COLLECT_VALUES, .expect = NESTED_ENTRIES),
	ROW("test_values_nested_locked", run_items_nested, NESTED_ENTRIES, .fixture = FIX_NESTED,
		.lock = true, .flags = NESTED, .collect = COLLECT_VALUES, .expect = NESTED_ENTRIES),
	ROW("test_values_nested_leaf", run_items_nested, FIX_NESTED_LEAVES, .fixture = FIX_NESTED,
		.flags = LEAVES, .collect = COLLECT_VALUES, .expect = FIX_NESTED_LEAVES),
	ROW("test_values_stack_nested", run_items_nested, NESTED_ENTRIES, .fixture = FIX_STACKED,
		.flags = NESTED, .collect = COLLECT_VALUES, .expect = NESTED_ENTRIES),
	ROW("test_values_stack_nested_leaf", run_items_nested, FIX_NESTED_LEAVES,
		.fixture = FIX_STACKED, .flags = LEAVES, .collect = COLLECT_VALUES,
		.expect = FIX_NESTED_LEAVES),
	ROW("test_values_stack_nested_locked", run_items_nested, NESTED_ENTRIES, .fixture = FIX_STACKED,
		.lock = true, .flags = NESTED, .collect = COLLECT_VALUES, .expect = NESTED_ENTRIES),
	ROW("test_membership", run_contains, 0, .fixture = FIX_BIG, .key = "a", .expect = 0),
	ROW_NOTE("test_membership_nested", run_contains, 0, NOTE_KEY, .fixture = FIX_NESTED,
		.path = key_a, .depth = 1, .expect = 0),
	ROW_NOTE("test_membership_nested_leaf", run_contains, 0, NOTE_KEY, .fixture = FIX_NESTED,
		.path = key_a, .depth = 1, .flags = TD_LEAVES_ONLY, .expect = 0),
	ROW_NOTE("test_membership_stacked_nested", run_contains, 0, NOTE_KEY, .fixture = FIX_STACKED,
		.path = key_a, .depth = 1, .expect = 0),
	ROW_NOTE("test_membership_stacked_nested_leaf", run_contains, 0, NOTE_KEY,
		.fixture = FIX_STACKED, .path = key_a, .depth = 1, .flags = TD_LEAVES_ONLY, .expect = 0),
	ROW_NOTE("test_membership_nested_last", run_contains, 0, NOTE_KEY, .fixture = FIX_NESTED,
		.path = key_0_t, .depth = 2, .expect = 1),
	ROW_NOTE("test_membership_nested_leaf_last", run_contains, 0, NOTE_KEY, .fixture = FIX_NESTED,
		.path = key_0_t, .depth = 2, .flags = TD_LEAVES_ONLY, .expect = 1),
	ROW_NOTE("test_membership_stacked_nested_last", run_contains, 0, NOTE_KEY,
		.fixture = FIX_STACKED, .path = key_0_t, .depth = 2, .expect = 1),
	ROW_NOTE("test_membership_stacked_nested_leaf_last", run_contains, 0, NOTE_KEY,
		.fixture = FIX_STACKED, .path = key_0_t, .depth = 2, .flags = TD_LEAVES_ONLY, .expect = 1),
	ROW_NOTE("test_nested_getleaf", run_get, 0, NOTE_KEY, .fixture = FIX_NESTED, .path = fix_leaf,
		.depth = 20),
	ROW_NOTE("test_nested_get", run_get, 0, NOTE_KEY, .fixture = FIX_NESTED, .path = fix_leaf,
		.depth = 19),
	ROW_NOTE("test_stacked_getleaf", run_get, 0, NOTE_KEY, .fixture = FIX_STACKED, .path = fix_leaf,
		.depth = 20),
	ROW_NOTE("test_stacked_get", run_get, 0, NOTE_KEY, .fixture = FIX_STACKED, .path = fix_leaf,
		.depth = 19),
	ROW_NOTE("test_nested_getitemleaf", run_getitem_leaf, 0, NOTE_KEY, .fixture = FIX_NESTED),
	ROW_NOTE("test_nested_getitem", run_getitem_node, 0, NOTE_KEY, .fixture = FIX_NESTED),
	ROW_NOTE("test_stacked_getitemleaf", run_getitem_leaf, 0, NOTE_KEY, .fixture = FIX_STACKED),
	ROW_NOTE("test_stacked_getitem", run_getitem_node, 0, NOTE_KEY, .fixture = FIX_STACKED),
	ROW_FRESH("test_lock_nested", run_lock, .fixture = FIX_NESTED, .per_call = true),
	ROW_FRESH("test_lock_stack_nested", run_lock, .fixture = FIX_STACKED, .per_call = true),
	ROW_FRESH("test_unlock_nested", run_unlock, .fixture = FIX_NESTED, .per_call = true,
		.lock = true),
	ROW_FRESH("test_unlock_stack_nested", run_unlock, .fixture = FIX_STACKED, .per_call = true,
		.lock = true),
	ROW("test_flatten_speed", run_flatten, NESTED_ENTRIES, .fixture = FIX_NESTED),
	ROW("test_unflatten_speed", run_unflatten, NESTED_ENTRIES, .fixture = FIX_NESTED,
		.extra = extra_flatten),
	ROW_NOTE("test_common_ops", run_common_ops, 0,
		"the share_memory_() step of main() "
		"is left out (shared-memory buffers are the storage layer's); its clone is kept",
		.fixture = FIX_NONE),
	ROW("test_creation", run_creation, 0, .fixture = FIX_NONE),
	ROW("test_creation_empty", run_creation_empty, 0, .fixture = FIX_NONE),
	ROW("test_creation_nested_1", run_creation_nested_1, 0, .fixture = FIX_NONE),
	ROW("test_creation_nested_2", run_creation_nested_2, 0, .fixture = FIX_NONE),
	ROW("test_creation_many_keys[10]", run_creation_many, 10, .count = 10, .extra = extra_many),
	ROW("test_creation_many_keys[50]", run_creation_many, 50, .count = 50, .extra = extra_many),
	ROW("test_creation_many_keys[100]", run_creation_many, 100, .count = 100, .extra = extra_many),
	ROW("test_creation_nested_many_keys[10]", run_creation_nested_many, 21, .count = 10,
		.extra = extra_many),
	ROW("test_creation_nested_many_keys[50]", run_creation_nested_many, 101, .count = 50,
		.extra = extra_many),
	ROW("test_clone", run_clone, 0, .fixture = FIX_TD),
	ROW("test_getitem[int]", run_getitem, 0, .fixture = FIX_TD, .idx = idx_int, .nidx = 1),
	ROW("test_getitem[slice_int]", run_getitem, 0, .fixture = FIX_TD, .idx = idx_slice_int,
		.nidx = 2),
	ROW_NOTE("test_getitem[range]", run_getitem, 0,
		"range(2) is a basic index in tdstore "
		"(views); torch turns it into an index tensor (copies)",
		.fixture = FIX_TD, .idx = idx_range, .nidx = 1),
	ROW("test_getitem[tuple]", run_getitem, 0, .fixture = FIX_TD, .idx = idx_tuple, .nidx = 2),
	ROW("test_getitem[list]", run_getitem, 0, .fixture = FIX_TD, .idx = idx_list, .nidx = 1),
	ROW_NOTE("test_setitem_dim[int]", run_setitem_dim, 0, NOTE_SETITEM, .fixture = FIX_TD,
		.idx = idx_int, .nidx = 1, .extra = extra_setitem_value),
	ROW_NOTE("test_setitem_dim[slice_int]", run_setitem_dim, 0, NOTE_SETITEM, .fixture = FIX_TD,
		.idx = idx_slice_int, .nidx = 2, .extra = extra_setitem_value),
	ROW_NOTE("test_setitem_dim[range]", run_setitem_dim, 0, NOTE_SETITEM, .fixture = FIX_TD,
		.idx = idx_range, .nidx = 1, .extra = extra_setitem_value),
	ROW_NOTE("test_setitem_dim[tuple]", run_setitem_dim, 0, NOTE_SETITEM, .fixture = FIX_TD,
		.idx = idx_tuple, .nidx = 2, .extra = extra_setitem_value),
	ROW("test_setitem", run_clone_set_c, 0, .fixture = FIX_TD),
	ROW("test_set", run_clone_set_c, 0, .fixture = FIX_TD),
	ROW_NA("test_set_shared",
		"clone().share_memory_(): moving leaves to shared memory "
		"needs the storage layer's shared-memory buffers (storage issue)"),
	ROW("test_update", run_update, 0, .fixture = FIX_TD_FLAT, .extra = extra_clone_other),
	ROW("test_update_nested", run_update, 0, .fixture = FIX_TD, .extra = extra_clone_other),
	ROW("test_update__nested", run_update, 0, .fixture = FIX_TD, .flags = 1,
		.extra = extra_clone_other),
	ROW("test_set_nested", run_set_nested, 0, .fixture = FIX_TD),
	ROW("test_set_nested_new", run_set_nested_new, 0, .fixture = FIX_TD),
	ROW("test_select", run_select, 0, .fixture = FIX_TD),
	ROW_NOTE("test_select_nested", run_select_nested, 0, NOTE_KEY, .fixture = FIX_NESTED),
	ROW_NOTE("test_exclude_nested", run_exclude_nested, 0, NOTE_KEY, .fixture = FIX_NESTED),
	ROW("test_empty[True]", run_empty, 0, .fixture = FIX_NESTED, .recurse = true),
	ROW("test_empty[False]", run_empty, 0, .fixture = FIX_NESTED, .recurse = false),
	ROW_NA("test_to", "td.to(\"cuda:0\"): GPU only (gpu/ transfer benchmarks)"),
	ROW_NA("test_to_nonblocking",
		"td.to(\"cuda:0\", non_blocking=True): GPU only "
		"(gpu/ transfer benchmarks)"),
	ROW("test_unbind_speed", run_unbind, 3 * NESTED_ENTRIES, .fixture = FIX_NESTED, .dim = 0,
		.count = 3),
	ROW("test_unbind_speed_stack0", run_unbind, 3 * NESTED_ENTRIES, .fixture = FIX_STACKED,
		.dim = 0, .count = 3),
	ROW("test_unbind_speed_stack1", run_unbind, 10 * NESTED_ENTRIES, .fixture = FIX_STACKED,
		.dim = 1, .count = 10),
	/* The stacked rows again, on the lazily stacked fixture. */
	ROW_NOTE("test_plain_set_stack_nested[lazy]", run_set_k20, 0, NOTE_LAZY_SET,
		.fixture = FIX_LAZY),
	ROW_NOTE("test_plain_set_stack_nested_inplace[lazy]", run_set_k20_inplace, 0, NOTE_LAZY_SET,
		.fixture = FIX_LAZY, .extra = extra_set_k20),
	ROW_NOTE("test_items_stack_nested[lazy]", run_items_nested, NESTED_ENTRIES, NOTE_LAZY_ITER,
		.fixture = FIX_LAZY, .flags = NESTED, .collect = COLLECT_ITEMS, .expect = NESTED_ENTRIES),
	ROW_NOTE("test_items_stack_nested_leaf[lazy]", run_items_nested, FIX_NESTED_LEAVES,
		NOTE_LAZY_ITER, .fixture = FIX_LAZY, .flags = LEAVES, .collect = COLLECT_ITEMS,
		.expect = FIX_NESTED_LEAVES),
	ROW_NOTE("test_items_stack_nested_locked[lazy]", run_items_nested, NESTED_ENTRIES,
		NOTE_LAZY_ITER, .fixture = FIX_LAZY, .lock = true, .flags = NESTED,
		.collect = COLLECT_ITEMS, .expect = NESTED_ENTRIES),
	ROW("test_keys_stack_nested[lazy]", run_items_nested, NESTED_ENTRIES, .fixture = FIX_LAZY,
		.flags = NESTED | TD_ITER_KEYS_ONLY, .collect = COLLECT_KEYS, .expect = NESTED_ENTRIES),
	ROW("test_keys_stack_nested_leaf[lazy]", run_items_nested, FIX_NESTED_LEAVES,
		.fixture = FIX_LAZY, .flags = LEAVES | TD_ITER_KEYS_ONLY, .collect = COLLECT_KEYS,
		.expect = FIX_NESTED_LEAVES),
	ROW("test_keys_stack_nested_locked[lazy]", run_items_nested, NESTED_ENTRIES,
		.fixture = FIX_LAZY, .lock = true, .flags = NESTED | TD_ITER_KEYS_ONLY,
		.collect = COLLECT_KEYS, .expect = NESTED_ENTRIES),
	ROW_NOTE("test_values_stack_nested[lazy]", run_items_nested, NESTED_ENTRIES, NOTE_LAZY_ITER,
		.fixture = FIX_LAZY, .flags = NESTED, .collect = COLLECT_VALUES, .expect = NESTED_ENTRIES),
	ROW_NOTE("test_values_stack_nested_leaf[lazy]", run_items_nested, FIX_NESTED_LEAVES,
		NOTE_LAZY_ITER, .fixture = FIX_LAZY, .flags = LEAVES, .collect = COLLECT_VALUES,
		.expect = FIX_NESTED_LEAVES),
	ROW_NOTE("test_values_stack_nested_locked[lazy]", run_items_nested, NESTED_ENTRIES,
		NOTE_LAZY_ITER, .fixture = FIX_LAZY, .lock = true, .flags = NESTED,
		.collect = COLLECT_VALUES, .expect = NESTED_ENTRIES),
	ROW_NOTE("test_membership_stacked_nested[lazy]", run_contains, 0, NOTE_KEY, .fixture = FIX_LAZY,
		.path = key_a, .depth = 1, .expect = 0),
	ROW_NOTE("test_membership_stacked_nested_leaf[lazy]", run_contains, 0, NOTE_KEY,
		.fixture = FIX_LAZY, .path = key_a, .depth = 1, .flags = TD_LEAVES_ONLY, .expect = 0),
	ROW_NOTE("test_membership_stacked_nested_last[lazy]", run_contains, 0, NOTE_KEY,
		.fixture = FIX_LAZY, .path = key_0_t, .depth = 2, .expect = 1),
	ROW_NOTE("test_membership_stacked_nested_leaf_last[lazy]", run_contains, 0, NOTE_KEY,
		.fixture = FIX_LAZY, .path = key_0_t, .depth = 2, .flags = TD_LEAVES_ONLY, .expect = 1),
	ROW_NOTE("test_stacked_getleaf[lazy]", run_lazy_get_leaf, 0, NOTE_LAZY_GET, .fixture = FIX_LAZY,
		.path = fix_leaf, .depth = 20),
	ROW_NOTE("test_stacked_get[lazy]", run_lazy_get_node, 0, NOTE_LAZY_GET, .fixture = FIX_LAZY,
		.path = fix_leaf, .depth = 19),
	ROW_NOTE("test_stacked_getitemleaf[lazy]", run_lazy_get_leaf, 0, NOTE_LAZY_GET,
		.fixture = FIX_LAZY),
	ROW_NOTE("test_stacked_getitem[lazy]", run_lazy_get_node, 0, NOTE_LAZY_GET,
		.fixture = FIX_LAZY),
	ROW_FRESH("test_lock_stack_nested[lazy]", run_lock, .fixture = FIX_LAZY, .per_call = true),
	ROW_FRESH("test_unlock_stack_nested[lazy]", run_unlock, .fixture = FIX_LAZY, .per_call = true,
		.lock = true),
	ROW("test_unbind_speed_stack0[lazy]", run_unbind, 3 * NESTED_ENTRIES, .fixture = FIX_LAZY,
		.dim = 0, .count = 3),
	ROW("test_unbind_speed_stack1[lazy]", run_unbind, 10 * NESTED_ENTRIES, .fixture = FIX_LAZY,
		.dim = 1, .count = 10),
	ROW("test_split", run_split, 10 * NESTED_ENTRIES, .fixture = FIX_NESTED_320, .dim = 1,
		.count = 10),
	ROW("test_chunk", run_chunk, 10 * NESTED_ENTRIES, .fixture = FIX_NESTED_320, .dim = 1,
		.count = 10),
};

const bench_suite bench_core_suite = { "benchmarks/common/common_ops_test.py", core_rows,
	sizeof(core_rows) / sizeof(core_rows[0]) };
