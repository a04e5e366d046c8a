/* SPDX-License-Identifier: MIT */
/*
 * dict_apply.c - per-leaf operations: apply (callbacks), elementwise
 * arithmetic with another dict or a scalar, zero, equality. In-place
 * variants check every leaf before writing any, so a refused operation
 * leaves the dict unchanged.
 */
#include "td_internal.h"
#include "dict_impl.h"

/* ------------------------------------------------------------------------ */
/* apply                                                                     */
/* ------------------------------------------------------------------------ */

/* TD_ENOTSUP: `what` does not reach into the lazy stack nested under entry e. */
static int lazy_refused(const td__entry *e, const char *fn, const char *what)
{
	return td__error(TD_ENOTSUP,
		"%s: '%s' is a lazy stack: %s do not reach into lazy stacks "
		"nested in a dict (td_lazy_densify() makes a dense copy)",
		fn, td__entry_key(e), what);
}

typedef struct apply_state {
	td_apply_fn fn;
	void *payload;
	const char *path[TD_KEY_MAX_DEPTH];
	const char *name;
} apply_state;

/* Run the callback on one leaf; *keep is false when it asked to skip the leaf. */
static int call_leaf(apply_state *st, const td__entry *e, size_t depth, td_tensor *r, bool *keep)
{
	td_item item;
	int rc;

	item.path = st->path;
	item.depth = depth + 1;
	item.key = td__entry_key(e);
	item.value = &e->value;
	/* As TD_TENSOR_INIT, but for the dims, unused at ndim 0 (clearing
	 * them, 256 bytes before they were compacted, was a fifth of a call
	 * on 30 leaves). */
	r->buffer = NULL;
	r->offset = 0;
	r->dtype = TD_DTYPE_F32;
	r->ndim = 0;
	rc = st->fn(r, &e->value.tensor, &item, st->payload);
	*keep = rc == 0;
	if (rc < 0 || rc > 0)
		td_tensor_release(r);
	if (rc < 0 && td_error_last()->code != rc)
		td__error(rc, "%s: the callback failed on '%s' with %d", st->name, td__entry_key(e), rc);
	return rc < 0 ? rc : TD_OK;
}

static int apply_rec(td_dict **out, const td_dict *d, apply_state *st, size_t depth);
static int apply_inplace_rec(td_dict *d, apply_state *st, size_t depth);

/* The callback's state and the depth at which the children of a lazy stack are applied. */
typedef struct apply_at {
	apply_state *st;
	size_t depth;
} apply_at;

static int apply_any(td_dict **out, const td_dict *d, apply_state *st, size_t depth);

static int apply_child(td_dict **out, const td_dict *child, void *ctx)
{
	apply_at *a = ctx;

	return apply_any(out, child, a->st, a->depth);
}

/*
 * apply_rec() of a dense dict, or of a lazy stack child by child (as
 * tensordict's LazyStackedTensorDict.apply()): a new stack at the same dim
 * owning the children's results. A child's results must start with the
 * child's batch shape; keys only some children have are applied too.
 */
static int apply_any(td_dict **out, const td_dict *d, apply_state *st, size_t depth)
{
	if (TD_UNLIKELY(td__dict_is_lazy(d))) {
		apply_at a = { st, depth };

		return td__lazy_map_children(out, d, apply_child, &a, st->name);
	}
	return apply_rec(out, d, st, depth);
}

static int apply_rec(td_dict **out, const td_dict *d, apply_state *st, size_t depth)
{
	td_dict *nd;
	uint32_t i;
	int rc = 0;

	TD_TRY(td__dict_alloc(&nd, d->batch_ndim, d->batch_shape, d->count, st->name));
	for (i = 0; i < d->used && rc == 0; i++) {
		const td__entry *e = &d->entries[i];
		bool keep = true;
		td_value v;

		if (!td__entry_live(e))
			continue;
		st->path[depth] = td__entry_key(e);
		v.kind = e->value.kind;
		if (e->value.kind == TD_VALUE_TENSOR) {
			/* Straight into the next entry (nd holds d->count of them):
			 * no copy of the result, then committed in place. */
			td_value *slot = &nd->entries[nd->used].value;
			td_tensor *r = &slot->tensor;

			rc = call_leaf(st, e, depth, r, &keep);
			if (rc == 0 && keep) {
				rc = td__tensor_check(r, st->name, "the callback's result");
				if (rc == 0)
					rc = td__dict_check_batch(nd, r->ndim, td_tensor_shape(r), td__entry_key(e),
						st->name);
				if (rc < 0) {
					td_tensor_release(r);
				} else {
					slot->kind = TD_VALUE_TENSOR;
					td__dict_push(nd, e);
				}
			}
			continue;
		} else if (e->value.kind == TD_VALUE_DICT) {
			rc = apply_any(&v.dict, e->value.dict, st, depth + 1);
		} else {
			rc = td__value_share(&v, &e->value, st->name);
		}
		if (rc == 0 && keep) {
			rc = td__dict_append_entry(nd, e, &v, st->name);
			if (rc < 0) {
				td__value_release(&v);
			} else if (v.kind == TD_VALUE_DICT) {
				v.dict->parent = nd;
			}
		}
	}
	if (rc < 0) {
		td_dict_free(nd);
		return rc;
	}
	*out = nd;
	return TD_OK;
}

int td_dict_apply(td_dict **out, const td_dict *d, td_apply_fn fn, void *payload)
{
	apply_state st;

	if (out)
		*out = NULL;
	if (!out || !d || !fn)
		return td__error(TD_EINVAL, "td_dict_apply: NULL argument");
	*out = NULL;
	st.fn = fn;
	st.payload = payload;
	st.name = "td_dict_apply";
	return apply_any(out, d, &st, 0);
}

static int apply_inplace_any(td_dict *d, apply_state *st, size_t depth);

static int apply_inplace_child(td_dict *child, void *ctx)
{
	apply_at *a = ctx;

	return apply_inplace_any(child, a->st, a->depth);
}

/* apply_inplace_rec() of a dense dict or of every child of a lazy stack, in order. */
static int apply_inplace_any(td_dict *d, apply_state *st, size_t depth)
{
	if (TD_UNLIKELY(td__dict_is_lazy(d))) {
		apply_at a = { st, depth };

		return td__lazy_each_child(d, apply_inplace_child, &a);
	}
	return apply_inplace_rec(d, st, depth);
}

static int apply_inplace_rec(td_dict *d, apply_state *st, size_t depth)
{
	uint32_t i;

	for (i = 0; i < d->used; i++) {
		td__entry *e = &d->entries[i];
		td_tensor r;
		bool keep;
		int rc;

		if (!td__entry_live(e))
			continue;
		st->path[depth] = td__entry_key(e);
		if (e->value.kind == TD_VALUE_DICT) {
			TD_TRY(apply_inplace_any(e->value.dict, st, depth + 1));
			continue;
		}
		if (e->value.kind != TD_VALUE_TENSOR)
			continue;
		TD_TRY(call_leaf(st, e, depth, &r, &keep));
		if (!keep)
			continue;
		rc = td_tensor_copy(&e->value.tensor, &r);
		td_tensor_release(&r);
		TD_TRY(rc);
	}
	return TD_OK;
}

int td_dict_apply_inplace(td_dict *d, td_apply_fn fn, void *payload)
{
	apply_state st;

	if (!d || !fn)
		return td__error(TD_EINVAL, "td_dict_apply_inplace: NULL argument");
	st.fn = fn;
	st.payload = payload;
	st.name = "td_dict_apply_inplace";
	return apply_inplace_any(d, &st, 0);
}

/* ------------------------------------------------------------------------ */
/* Pairing the leaves of two dicts                                           */
/* ------------------------------------------------------------------------ */

/*
 * Check that `a` and `b` hold the same keys with the same kinds, nested.
 * Returns TD_ENOTFOUND / TD_ETYPE with a message naming the key.
 */
static int same_structure(const td_dict *a, const td_dict *b, const char *fn)
{
	uint32_t i;

	for (i = 0; i < a->used; i++) {
		const td__entry *ea = &a->entries[i], *eb;

		if (!td__entry_live(ea))
			continue;
		eb = td__dict_find(b, td__entry_key(ea), ea->klen, ea->hash);
		if (!eb)
			return td__error(TD_ENOTFOUND, "%s: key '%s' is missing from the second dict", fn,
				td__entry_key(ea));
		if ((ea->value.kind == TD_VALUE_DICT) != (eb->value.kind == TD_VALUE_DICT) ||
			(ea->value.kind == TD_VALUE_TENSOR) != (eb->value.kind == TD_VALUE_TENSOR))
			return td__error(TD_ETYPE, "%s: '%s' holds different kinds of values", fn,
				td__entry_key(ea));
		if (ea->value.kind == TD_VALUE_DICT) {
			/* Two dicts (the kinds agree): a lazy stack on either side is refused. */
			if (TD_UNLIKELY(td__dict_is_lazy(ea->value.dict) || td__dict_is_lazy(eb->value.dict)))
				return lazy_refused(ea, fn, "operations on two dicts");
			TD_TRY(same_structure(ea->value.dict, eb->value.dict, fn));
		}
	}
	if (a->count != b->count)
		return td__error(TD_ENOTFOUND, "%s: the second dict has keys the first lacks", fn);
	return TD_OK;
}

static int binary_rec(td_dict **out, const td_dict *a, const td_dict *b, td_binop op,
	const char *fn)
{
	td_dict *nd;
	uint32_t i;
	int rc = 0;

	TD_TRY(td__dict_alloc(&nd, a->batch_ndim, a->batch_shape, a->count, fn));
	for (i = 0; i < a->used && rc == 0; i++) {
		const td__entry *ea = &a->entries[i], *eb;
		td_value v;

		if (!td__entry_live(ea))
			continue;
		eb = td__dict_find(b, td__entry_key(ea), ea->klen, ea->hash);
		v.kind = ea->value.kind;
		if (ea->value.kind == TD_VALUE_TENSOR) {
			rc = td_tensor_binary(&v.tensor, &ea->value.tensor, &eb->value.tensor, op);
			if (rc == 0) {
				rc = td__dict_check_batch(nd, v.tensor.ndim, td_tensor_shape(&v.tensor),
					td__entry_key(ea), fn);
				if (rc < 0)
					td_tensor_release(&v.tensor);
			}
		} else if (ea->value.kind == TD_VALUE_DICT) {
			rc = binary_rec(&v.dict, ea->value.dict, eb->value.dict, op, fn);
		} else {
			rc = td__value_share(&v, &ea->value, fn);
		}
		if (rc == 0) {
			rc = td__dict_append_entry(nd, ea, &v, fn);
			if (rc < 0) {
				td__value_release(&v);
			} else if (v.kind == TD_VALUE_DICT) {
				v.dict->parent = nd;
			}
		}
	}
	if (rc < 0) {
		td_dict_free(nd);
		return rc;
	}
	*out = nd;
	return TD_OK;
}

int td_dict_binary(td_dict **out, const td_dict *a, const td_dict *b, td_binop op)
{
	static const char fn[] = "td_dict_binary";

	if (out)
		*out = NULL;
	if (!out || !a || !b)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	TD_DENSE_ONLY(a, fn);
	TD_DENSE_ONLY(b, fn);
	if ((unsigned)op > TD_OP_NE)
		return td__error(TD_EINVAL, "%s: invalid op %d", fn, (int)op);
	TD_TRY(same_structure(a, b, fn));
	return binary_rec(out, a, b, op, fn);
}

typedef struct scalar_ctx {
	td_scalar s;
	td_binop op;
} scalar_ctx;

static int leaf_binary_scalar(td_tensor *out, const td_tensor *in, void *ctx)
{
	const scalar_ctx *c = ctx;

	return td_tensor_binary_scalar(out, in, c->s, c->op);
}

int td_dict_binary_scalar(td_dict **out, const td_dict *a, td_scalar s, td_binop op)
{
	static const char fn[] = "td_dict_binary_scalar";
	scalar_ctx c;

	if (out)
		*out = NULL;
	if (!out || !a)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	if ((unsigned)op > TD_OP_NE)
		return td__error(TD_EINVAL, "%s: invalid op %d", fn, (int)op);
	TD_TRY(td__scalar_check(s, fn));
	c.s = s;
	c.op = op;
	return td__dict_map_tensors(out, a, leaf_binary_scalar, &c, fn);
}

static int binary_inplace_rec(td_dict *a, const td_dict *b, td_scalar s, td_binop op, bool write,
	const char *fn);

/* The arguments of `a <op>= s`, for each child of a lazy stack. */
typedef struct scalar_inplace {
	td_scalar s;
	td_binop op;
	bool write;
	const char *fn;
} scalar_inplace;

static int binary_inplace_any(td_dict *a, td_scalar s, td_binop op, bool write, const char *fn);

static int binary_inplace_child(td_dict *child, void *ctx)
{
	const scalar_inplace *c = ctx;

	return binary_inplace_any(child, c->s, c->op, c->write, c->fn);
}

/* binary_inplace_rec() with a scalar of a dense dict or of every child of a lazy stack. */
static int binary_inplace_any(td_dict *a, td_scalar s, td_binop op, bool write, const char *fn)
{
	if (TD_UNLIKELY(td__dict_is_lazy(a))) {
		scalar_inplace c = { s, op, write, fn };

		return td__lazy_each_child(a, binary_inplace_child, &c);
	}
	return binary_inplace_rec(a, NULL, s, op, write, fn);
}

/* Walk the leaves of `a` (and the matching ones of `b`); check, or with `write` apply. */
static int binary_inplace_rec(td_dict *a, const td_dict *b, td_scalar s, td_binop op, bool write,
	const char *fn)
{
	uint32_t i;

	for (i = 0; i < a->used; i++) {
		td__entry *ea = &a->entries[i];
		const td__entry *eb = NULL;
		td_tensor *t;

		if (!td__entry_live(ea))
			continue;
		if (b)
			eb = td__dict_find(b, td__entry_key(ea), ea->klen, ea->hash);
		if (ea->value.kind == TD_VALUE_DICT) {
			/*
			 * Paired with the dict of `b` (same_structure() has refused a
			 * lazy stack on either side), or with a scalar through the
			 * dispatch: a nested stack child by child.
			 */
			if (eb)
				TD_TRY(binary_inplace_rec(ea->value.dict, eb->value.dict, s, op, write, fn));
			else
				TD_TRY(binary_inplace_any(ea->value.dict, s, op, write, fn));
			continue;
		}
		if (ea->value.kind != TD_VALUE_TENSOR)
			continue;
		t = &ea->value.tensor;
		if (write && eb)
			TD_TRY(td_tensor_binary_inplace(t, &eb->value.tensor, op));
		else if (write)
			TD_TRY(td_tensor_binary_scalar_inplace(t, s, op));
		else
			TD_TRY(td__binary_inplace_check(t, eb ? &eb->value.tensor : NULL, &s, op, fn));
	}
	return TD_OK;
}

static int check_inplace_op(td_binop op, const char *fn)
{
	if (op == TD_OP_EQ || op == TD_OP_NE)
		return td__error(TD_EINVAL, "%s: comparisons cannot be done in place", fn);
	if ((unsigned)op > TD_OP_NE)
		return td__error(TD_EINVAL, "%s: invalid op %d", fn, (int)op);
	return TD_OK;
}

int td_dict_binary_inplace(td_dict *a, const td_dict *b, td_binop op)
{
	static const char fn[] = "td_dict_binary_inplace";
	td_scalar none = td_scalar_int(0);

	if (!a || !b)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	TD_DENSE_ONLY(a, fn);
	TD_DENSE_ONLY(b, fn);
	TD_TRY(check_inplace_op(op, fn));
	TD_TRY(same_structure(a, b, fn));
	TD_TRY(binary_inplace_rec(a, b, none, op, false, fn));
	return binary_inplace_rec(a, b, none, op, true, fn);
}

int td_dict_binary_scalar_inplace(td_dict *a, td_scalar s, td_binop op)
{
	static const char fn[] = "td_dict_binary_scalar_inplace";

	if (!a)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	TD_TRY(check_inplace_op(op, fn));
	TD_TRY(td__scalar_check(s, fn));
	TD_TRY(binary_inplace_any(a, s, op, false, fn));
	return binary_inplace_any(a, s, op, true, fn);
}

/* ------------------------------------------------------------------------ */
/* zero, equal, allclose                                                     */
/* ------------------------------------------------------------------------ */

static int zero_rec(td_dict *d, bool write, const char *fn);

/* The pass of td_dict_zero() (checking or writing), for each child of a lazy stack. */
typedef struct zero_pass {
	bool write;
	const char *fn;
} zero_pass;

static int zero_any(td_dict *d, bool write, const char *fn);

static int zero_child(td_dict *child, void *ctx)
{
	const zero_pass *z = ctx;

	return zero_any(child, z->write, z->fn);
}

/* zero_rec() of a dense dict or of every child of a lazy stack. */
static int zero_any(td_dict *d, bool write, const char *fn)
{
	if (TD_UNLIKELY(td__dict_is_lazy(d))) {
		zero_pass z = { write, fn };

		return td__lazy_each_child(d, zero_child, &z);
	}
	return zero_rec(d, write, fn);
}

static int zero_rec(td_dict *d, bool write, const char *fn)
{
	uint32_t i;

	for (i = 0; i < d->used; i++) {
		td__entry *e = &d->entries[i];

		if (!td__entry_live(e))
			continue;
		if (e->value.kind == TD_VALUE_DICT)
			TD_TRY(zero_any(e->value.dict, write, fn));
		else if (e->value.kind == TD_VALUE_TENSOR && write)
			TD_TRY(td_tensor_zero(&e->value.tensor));
		else if (e->value.kind == TD_VALUE_TENSOR)
			TD_TRY(td__tensor_check_write(&e->value.tensor, fn, td__entry_key(e)));
	}
	return TD_OK;
}

int td_dict_zero(td_dict *d)
{
	if (!d)
		return td__error(TD_EINVAL, "td_dict_zero: NULL dict");
	TD_TRY(zero_any(d, false, "td_dict_zero"));
	return zero_any(d, true, "td_dict_zero");
}

typedef struct cmp_opts {
	bool close;
	double rtol, atol;
	bool equal_nan;
} cmp_opts;

static int equal_rec(const td_dict *a, const td_dict *b, const cmp_opts *o);

/*
 * Compare two dicts of any kind: the dispatch of equal and allclose, which
 * nested dicts go through too. A lazy stack on either side is compared by
 * value, as tensordict compares them, through its dense form
 * (td__lazy_dense_form(): its errors, such as TD_ETYPE for ragged leaves,
 * are returned).
 */
static int equal_any(const td_dict *a, const td_dict *b, const cmp_opts *o)
{
	td_dict *da, *db = NULL;
	int r;

	if (TD_LIKELY(!td__dict_is_lazy(a) && !td__dict_is_lazy(b)))
		return equal_rec(a, b, o);
	r = td__lazy_dense_form(&da, &a);
	if (r == TD_OK)
		r = td__lazy_dense_form(&db, &b);
	if (r == TD_OK)
		r = equal_rec(a, b, o);
	td_dict_free(da);
	td_dict_free(db);
	return r;
}

static int equal_rec(const td_dict *a, const td_dict *b, const cmp_opts *o)
{
	uint32_t i;

	if (a->batch_ndim != b->batch_ndim || a->count != b->count ||
		memcmp(a->batch_shape, b->batch_shape, (size_t)a->batch_ndim * sizeof(int64_t)) != 0)
		return 0;
	for (i = 0; i < a->used; i++) {
		const td__entry *ea = &a->entries[i], *eb;
		const td_value *va, *vb;
		int r;

		if (!td__entry_live(ea))
			continue;
		eb = td__dict_find(b, td__entry_key(ea), ea->klen, ea->hash);
		if (!eb || eb->value.kind != ea->value.kind)
			return 0;
		va = &ea->value;
		vb = &eb->value;
		if (va->kind == TD_VALUE_DICT)
			r = equal_any(va->dict, vb->dict, o);
		else if (va->kind != TD_VALUE_TENSOR)
			r = td__text_values_equal(va, vb);
		else if (!o->close)
			r = td_tensor_equal(&va->tensor, &vb->tensor);
		else if (va->tensor.ndim != vb->tensor.ndim ||
			memcmp(td_tensor_shape(&va->tensor), td_tensor_shape(&vb->tensor),
				(size_t)va->tensor.ndim * sizeof(int64_t)) != 0)
			r = 0;
		else
			r = td_tensor_allclose(&va->tensor, &vb->tensor, o->rtol, o->atol, o->equal_nan);
		if (r <= 0)
			return r;
	}
	return 1;
}

int td_dict_equal(const td_dict *a, const td_dict *b)
{
	cmp_opts o = { false, 0, 0, false };

	if (!a || !b)
		return td__error(TD_EINVAL, "td_dict_equal: NULL argument");
	return equal_any(a, b, &o);
}

int td_dict_allclose(const td_dict *a, const td_dict *b, double rtol, double atol, bool equal_nan)
{
	cmp_opts o = { true, rtol, atol, equal_nan };

	if (!a || !b)
		return td__error(TD_EINVAL, "td_dict_allclose: NULL argument");
	if (!(rtol >= 0) || !(atol >= 0))
		return td__error(TD_EINVAL, "td_dict_allclose: tolerances must be >= 0");
	return equal_any(a, b, &o);
}
