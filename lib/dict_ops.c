/* SPDX-License-Identifier: MIT */
/*
 * dict_ops.c - whole-dict operations: copies, the leaf transform that batch
 * operations are built on, update, select/exclude, empty, apply, and
 * elementwise arithmetic and equality.
 */
#include "td_internal.h"
#include "dict_impl.h"

/* TD_ENOTSUP: the operation does not reach into the lazy stack nested under entry e. */
static int lazy_refused(const td__entry *e, const char *fn)
{
	return td__error(TD_ENOTSUP,
		"%s: '%s' is a lazy stack: %s does not reach into lazy "
		"stacks nested in a dict (td_lazy_densify() makes a dense copy)",
		fn, td__entry_key(e), fn);
}

/* ------------------------------------------------------------------------ */
/* Transform: same structure, new batch shape, new leaves                    */
/* ------------------------------------------------------------------------ */

/* Append `v` (whose references are taken) under the key of entry `src`; release v on failure. */
static int append_shared_key(td_dict *nd, const td__entry *src, td_value *v, const char *fn)
{
	int rc = td__dict_append_entry(nd, src, v, fn);

	if (rc < 0) {
		td__value_release(v);
		return rc;
	}
	if (v->kind == TD_VALUE_DICT)
		v->dict->parent = nd;
	return TD_OK;
}

static int transform_rec(td_dict **out, const td_dict *d, int old_root, int ndim,
	const int64_t *shape, td__leaf_fn fn, void *ctx, bool batch, td__lazy_fn lz, const char *name);

/* An operation on the elements (td__dict_map_tensors()), for each child of a lazy stack. */
typedef struct map_args {
	td__leaf_fn fn;
	void *ctx;
	const char *name;
} map_args;

static int map_child(td_dict **out, const td_dict *child, void *ctx)
{
	const map_args *m = ctx;

	return td__dict_map_tensors(out, child, m->fn, m->ctx, m->name);
}

/*
 * transform_rec() of the lazy stack `z` nested in a dict under `key`. An
 * operation on the elements (batch == false) applies to each child: a new
 * stack, at the same dim, of the transformed children (owned). A batch
 * operation goes to `lz`, which makes the stack's result from the stack
 * (indexing: td__lazy_index()); without one it is refused.
 */
static int transform_lazy(td_dict **out, const td_dict *z, const char *key, int ndim,
	const int64_t *shape, td__leaf_fn fn, void *ctx, bool batch, td__lazy_fn lz, const char *name)
{
	map_args m = { fn, ctx, name };

	if (!batch)
		return td__lazy_map_children(out, z, map_child, &m, name);
	if (!lz)
		return td__error(TD_ENOTSUP,
			"%s: '%s' is a lazy stack: this batch operation "
			"does not apply to lazy stacks nested in a dict (td_lazy_densify() makes a "
			"dense copy)",
			name, key);
	TD_TRY(lz(out, z, ctx));
	/* The stack's result must fit under the new batch: never silently wrong. */
	if ((*out)->batch_ndim < ndim ||
		memcmp((*out)->batch_shape, shape, (size_t)ndim * sizeof(int64_t)) != 0) {
		td_dict_free(*out);
		*out = NULL;
		return td__error(TD_ERROR,
			"%s: the lazy stack '%s' gave a result of another "
			"batch shape",
			name, key);
	}
	return TD_OK;
}

static int transform_rec(td_dict **out, const td_dict *d, int old_root, int ndim,
	const int64_t *shape, td__leaf_fn fn, void *ctx, bool batch, td__lazy_fn lz, const char *name)
{
	int extra = d->batch_ndim - old_root;
	int64_t nb[TD_MAX_DIMS];
	td_dict *nd;
	uint32_t i;
	int rc;

	if (ndim + extra > TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: a nested batch would exceed %d dims", name, TD_MAX_DIMS);
	memcpy(nb, shape, (size_t)ndim * sizeof(int64_t));
	memcpy(nb + ndim, d->batch_shape + old_root, (size_t)extra * sizeof(int64_t));
	TD_TRY(td__dict_alloc(&nd, ndim + extra, nb, d->count, name));
	for (i = 0; i < d->used; i++) {
		const td__entry *e = &d->entries[i];
		/* Build the value in place in the next slot, then commit it. */
		td_value *v = &nd->entries[nd->used].value;

		if (!td__entry_live(e))
			continue;
		v->kind = e->value.kind;
		if (e->value.kind == TD_VALUE_TENSOR)
			rc = fn(&v->tensor, &e->value.tensor, ctx);
		else if (TD_UNLIKELY(td__value_is_stack(&e->value)))
			rc = transform_lazy(&v->dict, e->value.dict, td__entry_key(e), ndim, shape, fn, ctx,
				batch, lz, name);
		else if (e->value.kind == TD_VALUE_DICT)
			rc = transform_rec(&v->dict, e->value.dict, old_root, ndim, shape, fn, ctx, batch, lz,
				name);
		else if (batch && e->value.kind == TD_VALUE_STRINGS)
			rc = td__strings_transform(v, &e->value, fn, ctx, name);
		else
			rc = td__value_share(v, &e->value, name);
		if (rc < 0)
			goto fail;
		if (v->kind == TD_VALUE_DICT)
			v->dict->parent = nd;
		td__dict_push(nd, e);
	}
	*out = nd;
	return TD_OK;
fail:
	td_dict_free(nd);
	return rc;
}

int td__dict_transform(td_dict **out, const td_dict *d, int ndim, const int64_t *shape,
	td__leaf_fn fn, void *ctx, td__lazy_fn lz, const char *fn_name)
{
	return transform_rec(out, d, d->batch_ndim, ndim, shape, fn, ctx, true, lz, fn_name);
}

int td__dict_map_tensors(td_dict **out, const td_dict *d, td__leaf_fn fn, void *ctx,
	const char *fn_name)
{
	if (TD_UNLIKELY(td__dict_is_lazy(d))) { /* each child, into a new stack */
		map_args m = { fn, ctx, fn_name };

		return td__lazy_map_children(out, d, map_child, &m, fn_name);
	}
	return transform_rec(out, d, d->batch_ndim, d->batch_ndim, d->batch_shape, fn, ctx, false, NULL,
		fn_name);
}

static int leaf_clone(td_tensor *out, const td_tensor *in, void *ctx)
{
	(void)ctx;
	return td__tensor_clone_valid(out, in, "td_dict_clone");
}

int td__dict_copy(td_dict **out, const td_dict *d, const char *fn)
{
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_copy(out, d, false, fn);
	/* A cut into one piece, no dim cut: a level at a time, inline (fewer
	 * instructions than td__dict_map_tensors() with a sharing leaf function). */
	return td__dict_cut(out, d, -1, NULL, 1, fn);
}

int td_dict_copy(td_dict **out, const td_dict *d)
{
	if (out)
		*out = NULL;
	if (!out || !d)
		return td__error(TD_EINVAL, "td_dict_copy: NULL argument");
	*out = NULL;
	return td__dict_copy(out, d, "td_dict_copy");
}

int td_dict_clone(td_dict **out, const td_dict *d)
{
	if (out)
		*out = NULL;
	if (!out || !d)
		return td__error(TD_EINVAL, "td_dict_clone: NULL argument");
	*out = NULL;
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_copy(out, d, true, "td_dict_clone");
	return td__dict_map_tensors(out, d, leaf_clone, NULL, "td_dict_clone");
}

/* ------------------------------------------------------------------------ */
/* Empty                                                                     */
/* ------------------------------------------------------------------------ */

static int empty_rec(td_dict **out, const td_dict *d, bool recurse, const char *fn);

/* td__child_fn of an empty dict with the child's structure (ctx: recurse). */
static int empty_child(td_dict **out, const td_dict *child, void *ctx)
{
	return td_dict_empty(out, child, *(const bool *)ctx);
}

/* empty_rec() of a dense dict, or a new stack of the children's empty forms. */
static int empty_any(td_dict **out, const td_dict *d, bool recurse, const char *fn)
{
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_map_children(out, d, empty_child, &recurse, fn);
	return empty_rec(out, d, recurse, fn);
}

static int empty_rec(td_dict **out, const td_dict *d, bool recurse, const char *fn)
{
	td_dict *nd;
	uint32_t i;
	int rc;

	TD_TRY(td__dict_alloc(&nd, d->batch_ndim, d->batch_shape, recurse ? d->count : 0, fn));
	for (i = 0; recurse && i < d->used; i++) {
		const td__entry *e = &d->entries[i];
		td_value v;

		if (!td__entry_live(e) || e->value.kind != TD_VALUE_DICT)
			continue;
		v.kind = TD_VALUE_DICT;
		rc = empty_any(&v.dict, e->value.dict, true, fn);
		if (rc == 0)
			rc = append_shared_key(nd, e, &v, fn);
		if (rc < 0) {
			td_dict_free(nd);
			return rc;
		}
	}
	*out = nd;
	return TD_OK;
}

int td_dict_empty(td_dict **out, const td_dict *d, bool recurse)
{
	if (out)
		*out = NULL;
	if (!out || !d)
		return td__error(TD_EINVAL, "td_dict_empty: NULL argument");
	*out = NULL;
	return empty_any(out, d, recurse, "td_dict_empty");
}

/* ------------------------------------------------------------------------ */
/* Update                                                                    */
/* ------------------------------------------------------------------------ */

static int update_rec(td_dict *d, const td_dict *o, const char *fn);
static int update_inplace_rec(td_dict *d, const td_dict *o, bool write, const char *fn);

int td__dict_update_any(td_dict *d, const td_dict *o, bool inplace, bool write, const char *fn)
{
	if (TD_UNLIKELY(td__dict_is_lazy(d) || td__dict_is_lazy(o)))
		return td__lazy_update(d, o, inplace, write, fn);
	return inplace ? update_inplace_rec(d, o, write, fn) : update_rec(d, o, fn);
}

static int update_rec(td_dict *d, const td_dict *o, const char *fn)
{
	uint32_t i;

	for (i = 0; i < o->used; i++) {
		const td__entry *eo = &o->entries[i];
		td__kref k;
		td__entry *e;
		int rc;

		if (!td__entry_live(eo))
			continue;
		e = td__dict_find(d, td__entry_key(eo), eo->klen, eo->hash);
		if (e && e->value.kind == TD_VALUE_DICT && eo->value.kind == TD_VALUE_DICT) {
			/* Two dicts merge, a lazy stack on either side too. */
			TD_TRY(td__dict_update_any(e->value.dict, eo->value.dict, false, true, fn));
			continue;
		}
		k = td__entry_kref(eo);
		if (eo->value.kind == TD_VALUE_DICT) {
			td_value v;
			TD_TRY(td__value_share(&v, &eo->value, fn));
			if (d->locked)
				td__dict_set_locked(v.dict, true);
			rc = td__dict_set_value(d, &k, 1, &v, fn);
			if (rc < 0)
				td_dict_free(v.dict);
		} else {
			rc = td__dict_set_value(d, &k, 1, &eo->value, fn);
		}
		TD_TRY(rc);
	}
	return TD_OK;
}

static const td_dict *root_of(const td_dict *d)
{
	while (d->parent)
		d = d->parent;
	return d;
}

int td_dict_update(td_dict *d, const td_dict *other)
{
	td_dict *copy;
	int rc;

	if (!d || !other)
		return td__error(TD_EINVAL, "td_dict_update: NULL argument");
	if (d == other)
		return TD_OK;
	if (TD_UNLIKELY(td__dict_is_lazy(d) || td__dict_is_lazy(other)))
		return td__lazy_update(d, other, false, true, "td_dict_update");
	if (root_of(d) != root_of(other))
		return update_rec(d, other, "td_dict_update");
	/* `other` lies in d's tree and could be replaced while it is read: read a copy. */
	TD_TRY(td__dict_copy(&copy, other, "td_dict_update"));
	rc = update_rec(d, copy, "td_dict_update");
	td_dict_free(copy);
	return rc;
}

/*
 * Walk `o` and its counterpart in `d`: every tensor of `o` must meet a
 * tensor of `d` that it broadcasts to, every non-tensor value a non-tensor
 * value. With `write`, copy the tensors in and replace the values.
 */
static int update_inplace_rec(td_dict *d, const td_dict *o, bool write, const char *fn)
{
	uint32_t i;

	for (i = 0; i < o->used; i++) {
		const td__entry *eo = &o->entries[i];
		td__entry *e;

		if (!td__entry_live(eo))
			continue;
		e = td__dict_find(d, td__entry_key(eo), eo->klen, eo->hash);
		if (!e)
			return td__error(TD_ENOTFOUND, "%s: key '%s' not found", fn, td__entry_key(eo));
		if (eo->value.kind == TD_VALUE_DICT) {
			if (e->value.kind != TD_VALUE_DICT)
				return td__error(TD_ETYPE, "%s: '%s' is a dict in one and not the other", fn,
					td__entry_key(eo));
			TD_TRY(td__dict_update_any(e->value.dict, eo->value.dict, true, write, fn));
		} else if (eo->value.kind != TD_VALUE_TENSOR) {
			/* Non-tensor values are immutable: updating one replaces it. */
			if (e->value.kind != eo->value.kind)
				return td__error(TD_ETYPE,
					"%s: '%s' holds %s in one dict and not the "
					"other",
					fn, td__entry_key(eo),
					eo->value.kind == TD_VALUE_STRING      ? "a string" :
						eo->value.kind == TD_VALUE_STRINGS ? "an array of strings" :
															 "a bytes value");
			if (eo->value.kind == TD_VALUE_STRINGS &&
				(e->value.strings->ndim != eo->value.strings->ndim ||
					!td__shape_eq(e->value.strings->shape, eo->value.strings->shape,
						e->value.strings->ndim)))
				return td__error(TD_ETYPE,
					"%s: '%s': the arrays of strings differ in "
					"shape",
					fn, td__entry_key(eo));
			if (write) {
				td_value old = e->value;

				TD_TRY(td__value_share(&e->value, &eo->value, fn));
				td__value_release(&old);
			}
		} else {
			int64_t strides[TD_MAX_DIMS];
			const td_tensor *t = &e->value.tensor;
			if (e->value.kind != TD_VALUE_TENSOR)
				return td__error(TD_ETYPE, "%s: '%s' is not a tensor", fn, td__entry_key(eo));
			if (write)
				TD_TRY(td_tensor_copy(&e->value.tensor, &eo->value.tensor));
			else {
				TD_TRY(td__tensor_check_write(t, fn, td__entry_key(eo)));
				TD_TRY(td__broadcast_strides(&eo->value.tensor, t->ndim, td_tensor_shape(t),
					strides, fn));
			}
		}
	}
	return TD_OK;
}

int td_dict_update_inplace(td_dict *d, const td_dict *other)
{
	static const char fn[] = "td_dict_update_inplace";

	if (!d || !other)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	if (d == other)
		return TD_OK;
	if (TD_UNLIKELY(td__dict_is_lazy(d) || td__dict_is_lazy(other))) {
		TD_TRY(td__lazy_update(d, other, true, false, fn));
		return td__lazy_update(d, other, true, true, fn);
	}
	TD_TRY(update_inplace_rec(d, other, false, fn));
	return update_inplace_rec(d, other, true, fn);
}

/* ------------------------------------------------------------------------ */
/* Select and exclude                                                        */
/* ------------------------------------------------------------------------ */

typedef struct sel_path {
	const td__kref *part;
	size_t n;
	bool found;
} sel_path;

static bool part_is(const sel_path *p, size_t level, const td__entry *e)
{
	const td__kref *r = &p->part[level];
	return r->hash == e->hash && r->len == e->klen && memcmp(r->s, td__entry_key(e), e->klen) == 0;
}

/* Which paths name this entry exactly, and which pass through it, at `level`. */
static void classify(sel_path *paths, size_t np, size_t level, const td__entry *k, bool *exact,
	bool *through)
{
	size_t j;

	*exact = false;
	*through = false;
	for (j = 0; j < np; j++) {
		if (paths[j].n <= level || !part_is(&paths[j], level, k))
			continue;
		if (paths[j].n == level + 1) {
			*exact = true;
			paths[j].found = true;
		} else {
			*through = true;
		}
	}
}

/* An entry kept whole holds the paths below it that exist: they are found too. */
static void mark_inside(sel_path *paths, size_t np, size_t level, const td__entry *e)
{
	size_t j;

	if (e->value.kind != TD_VALUE_DICT)
		return;
	for (j = 0; j < np; j++) {
		const td_dict *sub = e->value.dict;
		const td__kref *rest = paths[j].part + level + 1;
		size_t nrest = paths[j].n - level - 1;

		if (paths[j].n <= level + 1 || paths[j].found || !part_is(&paths[j], level, e))
			continue;
		if (td__dict_is_lazy(sub) ? td__lazy_contains(sub, rest, nrest, NULL, 0) :
									td__dict_lookup_quiet(sub, rest, nrest, NULL) != NULL)
			paths[j].found = true;
	}
}

/*
 * select: keep exact matches whole, recurse into dicts a path goes through
 * (keeping them only if something was selected inside). exclude: drop
 * exact matches, recurse into dicts a path goes through, keep the rest.
 */
static int filter_rec(td_dict **out, const td_dict *d, sel_path *paths, size_t np, size_t level,
	bool select, const char *fn)
{
	td_dict *nd;
	uint32_t i;
	int rc = 0;

	TD_TRY(td__dict_alloc(&nd, d->batch_ndim, d->batch_shape, d->count, fn));
	for (i = 0; i < d->used && rc == 0; i++) {
		const td__entry *e = &d->entries[i];
		bool exact, through, descend;
		td_value v;

		if (!td__entry_live(e))
			continue;
		classify(paths, np, level, e, &exact, &through);
		if (exact && through && select)
			mark_inside(paths, np, level, e);
		descend = !exact && through && e->value.kind == TD_VALUE_DICT;
		if (descend && TD_UNLIKELY(td__value_is_stack(&e->value))) {
			rc = lazy_refused(e, fn);
		} else if (descend) {
			v.kind = TD_VALUE_DICT;
			rc = filter_rec(&v.dict, e->value.dict, paths, np, level + 1, select, fn);
			if (rc == 0 && select && v.dict->count == 0) {
				td_dict_free(v.dict);
				continue;
			}
		} else if (exact == select) {
			rc = td__value_share(&v, &e->value, fn);
		} else {
			continue;
		}
		if (rc == 0)
			rc = append_shared_key(nd, e, &v, fn);
	}
	if (rc < 0) {
		td_dict_free(nd);
		return rc;
	}
	*out = nd;
	return TD_OK;
}

static int filter_impl(td_dict **out, const td_dict *d, const char *const *keys,
	const td_key *const *handles, size_t n, bool select, bool strict, const char *fn);

/* The arguments of a select / exclude, for each child of a lazy stack. */
typedef struct filter_args {
	const char *const *keys;
	const td_key *const *handles;
	size_t n;
	bool select, strict;
	const char *fn;
} filter_args;

static int filter_child(td_dict **out, const td_dict *child, void *ctx)
{
	const filter_args *a = ctx;

	return filter_impl(out, child, a->keys, a->handles, a->n, a->select, a->strict, a->fn);
}

static int filter_impl(td_dict **out, const td_dict *d, const char *const *keys,
	const td_key *const *handles, size_t n, bool select, bool strict, const char *fn)
{
	td__kpath *store = NULL;
	sel_path *paths;
	size_t i;
	int rc = 0;

	if (out)
		*out = NULL;
	if (!out || !d || (n && !keys && !handles))
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	if (TD_UNLIKELY(td__dict_is_lazy(d))) {
		/* Each child selects (strictly: every child must hold the keys). */
		filter_args a = { keys, handles, n, select, strict, fn };

		return td__lazy_map_children(out, d, filter_child, &a, fn);
	}
	paths = td__calloc(n ? n : 1, sizeof(*paths));
	if (keys)
		store = td__calloc(n ? n : 1, sizeof(*store));
	if (!paths || (keys && !store)) {
		td__free(paths);
		td__free(store);
		return td__error_nomem(n * sizeof(td__kpath));
	}
	for (i = 0; i < n && rc == 0; i++) {
		if (keys) {
			rc = td__kpath_dotted(&store[i], keys[i], fn);
			paths[i].part = store[i].part;
			paths[i].n = store[i].n;
		} else if (!handles[i]) {
			rc = td__error(TD_EINVAL, "%s: key handle %zu is NULL", fn, i);
		} else {
			paths[i].part = handles[i]->part;
			paths[i].n = handles[i]->n;
		}
	}
	if (rc == 0)
		rc = filter_rec(out, d, paths, n, 0, select, fn);
	for (i = 0; rc == 0 && select && strict && i < n; i++) {
		if (!paths[i].found) {
			char path[512];
			td__kpath_format(path, sizeof(path), paths[i].part, paths[i].n);
			td_dict_free(*out);
			*out = NULL;
			rc = td__error(TD_ENOTFOUND, "%s: key '%s' not found", fn, path);
		}
	}
	td__free(paths);
	td__free(store);
	return rc;
}

int td_dict_select(td_dict **out, const td_dict *d, const char *const *keys, size_t n, bool strict)
{
	return filter_impl(out, d, keys, NULL, n, true, strict, "td_dict_select");
}

int td_dict_select_keys(td_dict **out, const td_dict *d, const td_key *const *keys, size_t n,
	bool strict)
{
	if (n && !keys)
		return td__error(TD_EINVAL, "td_dict_select_keys: NULL keys");
	return filter_impl(out, d, NULL, keys, n, true, strict, "td_dict_select_keys");
}

int td_dict_exclude(td_dict **out, const td_dict *d, const char *const *keys, size_t n)
{
	return filter_impl(out, d, keys, NULL, n, false, false, "td_dict_exclude");
}

int td_dict_exclude_keys(td_dict **out, const td_dict *d, const td_key *const *keys, size_t n)
{
	if (n && !keys)
		return td__error(TD_EINVAL, "td_dict_exclude_keys: NULL keys");
	return filter_impl(out, d, NULL, keys, n, false, false, "td_dict_exclude_keys");
}
