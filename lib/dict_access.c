/* SPDX-License-Identifier: MIT */
/*
 * dict_access.c - the public get / set / delete / rename / membership
 * functions in their two key forms: a dotted string ("next.obs") and a
 * key handle (td_key, the `_key` functions). Each public function resolves
 * its key into components (a dotted key split into a td__kpath; a handle
 * lends its own, split and hashed when it was made) and calls one shared
 * implementation that takes the components, and the handle when there is
 * one (lazy stacks remember what handles resolve to). The implementation
 * dispatches a lazy stack once, at its top (dict_impl.h).
 */
#include "td_internal.h"
#include "dict_impl.h"

#include <stdio.h>

/* TD_EINVAL for a NULL key handle passed to `fn`. */
static int null_handle(const char *fn)
{
	return td__error(TD_EINVAL, "%s: NULL key handle", fn);
}

/* ------------------------------------------------------------------------ */
/* Membership                                                                */
/* ------------------------------------------------------------------------ */

static int contains_impl(const td_dict *d, const td__kref *kp, size_t kn, const td_key *handle,
	unsigned flags, const char *fn)
{
	const td__entry *e;
	size_t used;

	if (!d)
		return td__error(TD_EINVAL, "%s: NULL dict", fn);
	if (flags & ~(unsigned)TD_LEAVES_ONLY)
		return td__error(TD_EINVAL, "%s: unknown flags 0x%x", fn, flags);
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_contains(d, kp, kn, handle, flags);
	e = td__dict_lookup_quiet(d, kp, kn, NULL);
	if (!e) {
		/* A miss may be a path into a nested lazy stack: ask the stack. */
		const td_dict *z = td__dict_lazy_prefix(d, kp, kn, &used);

		return z ? td__lazy_contains(z, kp + used, kn - used, NULL, flags) : 0;
	}
	return !(flags & TD_LEAVES_ONLY) || e->value.kind != TD_VALUE_DICT;
}

/*
 * td_dict_contains() past its fast path. Out of line: its key path (some
 * 1.5 KiB) would otherwise be part of every call's frame.
 */
static __attribute__((noinline)) int contains_dotted(const td_dict *d, const char *key,
	unsigned flags)
{
	static const char fn[] = "td_dict_contains";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return contains_impl(d, p.part, p.n, NULL, flags, fn);
}

int td_dict_contains(const td_dict *d, const char *key, unsigned flags)
{
	td__kref k;

	/*
	 * Fast path: a single-component key of a dense dict needs no path. The
	 * kind is part of its guard (asked after a miss instead, the key's
	 * parts would have to live across the probe: ~4 instructions a call);
	 * a lazy stack takes the general path, which dispatches it.
	 */
	if (TD_LIKELY(d && key && !(flags & ~(unsigned)TD_LEAVES_ONLY) && !td__dict_is_lazy(d)) &&
		!*td__kref_scan(key, &k) && k.len > 0) {
		const td__entry *e = td__dict_find(d, k.s, k.len, k.hash);
		return e && (!(flags & TD_LEAVES_ONLY) || e->value.kind != TD_VALUE_DICT);
	}
	return contains_dotted(d, key, flags);
}

int td_dict_contains_key(const td_dict *d, const td_key *key, unsigned flags)
{
	static const char fn[] = "td_dict_contains_key";

	if (!key)
		return null_handle(fn);
	return contains_impl(d, key->part, key->n, key, flags, fn);
}

/* ------------------------------------------------------------------------ */
/* Lookup                                                                    */
/* ------------------------------------------------------------------------ */

/* The entry under the path: every lookup's implementation. */
static int get_entry(td__entry **out, const td_dict *d, const td__kref *kp, size_t kn,
	const char *fn)
{
	if (!d)
		return td__error(TD_EINVAL, "%s: NULL dict", fn);
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__error(TD_ENOTSUP,
			"%s: a lazy stack lends no values (its leaves are made "
			"by stacking): use td_lazy_get_tensor() or td_lazy_get_dict()",
			fn);
	return td__dict_lookup(d, kp, kn, out, NULL, fn);
}

static int not_kind(const td__entry *e, const char *want, const char *fn)
{
	static const char *const names[] = { "?", "a tensor", "a dict", "a string", "bytes",
		"an array of strings" };

	return td__error(TD_ETYPE, "%s: '%s' holds %s, not %s", fn, td__entry_key(e),
		names[e->value.kind <= TD_VALUE_STRINGS ? e->value.kind : 0], want);
}

/*
 * The entry under the path, which must hold a value of `kind` (`want`
 * names it in errors); `out` is the caller's output, checked here.
 */
static int get_of_kind(td__entry **e, const void *out, const td_dict *d, const td__kref *kp,
	size_t kn, td_value_kind kind, const char *want, const char *fn)
{
	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(get_entry(e, d, kp, kn, fn));
	if ((*e)->value.kind != kind)
		return not_kind(*e, want, fn);
	return TD_OK;
}

static int get_value(const td_value **out, const td_dict *d, const td__kref *kp, size_t kn,
	const char *fn)
{
	td__entry *e;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(get_entry(&e, d, kp, kn, fn));
	*out = &e->value;
	return TD_OK;
}

int td_dict_get(const td_value **out, const td_dict *d, const char *key)
{
	static const char fn[] = "td_dict_get";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return get_value(out, d, p.part, p.n, fn);
}

int td_dict_get_key(const td_value **out, const td_dict *d, const td_key *key)
{
	static const char fn[] = "td_dict_get_key";

	if (!key)
		return null_handle(fn);
	return get_value(out, d, key->part, key->n, fn);
}

static int get_tensor(const td_tensor **out, const td_dict *d, const td__kref *kp, size_t kn,
	const char *fn)
{
	td__entry *e;

	TD_TRY(get_of_kind(&e, out, d, kp, kn, TD_VALUE_TENSOR, "a tensor", fn));
	*out = &e->value.tensor;
	return TD_OK;
}

int td_dict_get_tensor(const td_tensor **out, const td_dict *d, const char *key)
{
	static const char fn[] = "td_dict_get_tensor";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return get_tensor(out, d, p.part, p.n, fn);
}

int td_dict_get_tensor_key(const td_tensor **out, const td_dict *d, const td_key *key)
{
	static const char fn[] = "td_dict_get_tensor_key";

	if (!key)
		return null_handle(fn);
	return get_tensor(out, d, key->part, key->n, fn);
}

static int get_dict(td_dict **out, const td_dict *d, const td__kref *kp, size_t kn, const char *fn)
{
	td__entry *e;

	TD_TRY(get_of_kind(&e, out, d, kp, kn, TD_VALUE_DICT, "a dict", fn));
	*out = e->value.dict;
	return TD_OK;
}

int td_dict_get_dict(td_dict **out, const td_dict *d, const char *key)
{
	static const char fn[] = "td_dict_get_dict";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return get_dict(out, d, p.part, p.n, fn);
}

int td_dict_get_dict_key(td_dict **out, const td_dict *d, const td_key *key)
{
	static const char fn[] = "td_dict_get_dict_key";

	if (!key)
		return null_handle(fn);
	return get_dict(out, d, key->part, key->n, fn);
}

static int get_blob(const char **data_out, size_t *length_out, const td_dict *d, const td__kref *kp,
	size_t kn, const char *fn)
{
	td__entry *e;

	if (!data_out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(get_entry(&e, d, kp, kn, fn));
	if (e->value.kind != TD_VALUE_STRING && e->value.kind != TD_VALUE_BYTES)
		return not_kind(e, "a string or bytes", fn);
	*data_out = e->value.blob.data;
	if (length_out)
		*length_out = e->value.blob.length;
	return TD_OK;
}

int td_dict_get_blob(const char **data_out, size_t *length_out, const td_dict *d, const char *key)
{
	static const char fn[] = "td_dict_get_blob";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return get_blob(data_out, length_out, d, p.part, p.n, fn);
}

int td_dict_get_blob_key(const char **data_out, size_t *length_out, const td_dict *d,
	const td_key *key)
{
	static const char fn[] = "td_dict_get_blob_key";

	if (!key)
		return null_handle(fn);
	return get_blob(data_out, length_out, d, key->part, key->n, fn);
}

static int get_strings(const td_strings **out, const td_dict *d, const td__kref *kp, size_t kn,
	const char *fn)
{
	td__entry *e;

	TD_TRY(get_of_kind(&e, out, d, kp, kn, TD_VALUE_STRINGS, "an array of strings", fn));
	*out = e->value.strings;
	return TD_OK;
}

int td_dict_get_strings(const td_strings **out, const td_dict *d, const char *key)
{
	static const char fn[] = "td_dict_get_strings";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return get_strings(out, d, p.part, p.n, fn);
}

int td_dict_get_strings_key(const td_strings **out, const td_dict *d, const td_key *key)
{
	static const char fn[] = "td_dict_get_strings_key";

	if (!key)
		return null_handle(fn);
	return get_strings(out, d, key->part, key->n, fn);
}

/* ------------------------------------------------------------------------ */
/* Setting                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * td__dict_set_value() on the dense dict d; a path that goes on into a
 * nested lazy stack (refused by the walk with TD_ENOTSUP) is set through
 * that stack instead.
 */
static int dense_set_value(td_dict *d, const td__kref *parts, size_t n, const td_value *v,
	const char *fn)
{
	const td_dict *z;
	size_t used;
	int rc = td__dict_set_value(d, parts, n, v, fn);

	if (TD_LIKELY(rc != TD_ENOTSUP))
		return rc;
	z = td__dict_lazy_prefix(d, parts, n, &used);
	if (!z)
		return rc;
	/* The stack belongs to d's tree: d is writable, so is it. */
	return td__lazy_set_value((td_dict *)z, parts + used, n - used, NULL, v, fn);
}

/* Store `v` under the path: every setter's implementation, and its one dispatch. */
static int set_value(td_dict *d, const td__kref *kp, size_t kn, const td_key *handle,
	const td_value *v, const char *fn)
{
	if (!d)
		return td__error(TD_EINVAL, "%s: NULL dict", fn);
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_set_value(d, kp, kn, handle, v, fn);
	return dense_set_value(d, kp, kn, v, fn);
}

static int set_tensor(td_dict *d, const td__kref *kp, size_t kn, const td_key *handle,
	const td_tensor *t, const char *fn)
{
	td_value v;

	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	v.kind = TD_VALUE_TENSOR;
	td__tensor_copy_meta(&v.tensor, t);
	return set_value(d, kp, kn, handle, &v, fn);
}

/*
 * td_dict_set_tensor() and td_dict_set_tensor_take() of a dotted key: a
 * single component needs no path (the fast path of plain sets).
 */
static int set_tensor_dotted(td_dict *d, const char *key, const td_tensor *t, const char *fn)
{
	td__kpath p;
	td_value v;
	td__kref k;

	if (d && key && !*td__kref_scan(key, &k) && k.len > 0) {
		TD_TRY(td__tensor_check(t, fn, "the tensor"));
		v.kind = TD_VALUE_TENSOR;
		td__tensor_copy_meta(&v.tensor, t);
		if (TD_LIKELY(!td__dict_is_lazy(d)))
			return td__dict_set_value(d, &k, 1, &v, fn);
		return td__lazy_set_value(d, &k, 1, NULL, &v, fn);
	}
	TD_TRY(td__kpath_dotted(&p, key, fn));
	return set_tensor(d, p.part, p.n, NULL, t, fn);
}

int td_dict_set_tensor(td_dict *d, const char *key, const td_tensor *t)
{
	return set_tensor_dotted(d, key, t, "td_dict_set_tensor");
}

int td_dict_set_tensor_key(td_dict *d, const td_key *key, const td_tensor *t)
{
	static const char fn[] = "td_dict_set_tensor_key";

	if (!key)
		return null_handle(fn);
	return set_tensor(d, key->part, key->n, key, t, fn);
}

int td_dict_set_tensor_take(td_dict *d, const char *key, td_tensor *t)
{
	TD_TRY(set_tensor_dotted(d, key, t, "td_dict_set_tensor_take"));
	td_tensor_release(t);
	return TD_OK;
}

int td_dict_set_tensor_take_key(td_dict *d, const td_key *key, td_tensor *t)
{
	static const char fn[] = "td_dict_set_tensor_take_key";

	if (!key)
		return null_handle(fn);
	TD_TRY(set_tensor(d, key->part, key->n, key, t, fn));
	td_tensor_release(t);
	return TD_OK;
}

static int set_inplace(td_dict *d, const td__kref *kp, size_t kn, const td_key *handle,
	const td_tensor *t, const char *fn)
{
	td__entry *e;
	int rc;

	TD_TRY(td__tensor_check(t, fn, "the tensor"));
	if (!d)
		return td__error(TD_EINVAL, "%s: NULL dict", fn);
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_set_inplace(d, kp, kn, handle, t, fn);
	rc = td__dict_lookup(d, kp, kn, &e, NULL, fn);
	if (TD_UNLIKELY(rc == TD_ENOTSUP)) {
		/* A path into a nested lazy stack: written through the stack. */
		size_t used;
		const td_dict *z = td__dict_lazy_prefix(d, kp, kn, &used);

		if (z)
			return td__lazy_set_inplace((td_dict *)z, kp + used, kn - used, NULL, t, fn);
	}
	TD_TRY(rc);
	if (e->value.kind != TD_VALUE_TENSOR)
		return not_kind(e, "a tensor", fn);
	return td_tensor_copy(&e->value.tensor, t);
}

int td_dict_set_tensor_inplace(td_dict *d, const char *key, const td_tensor *t)
{
	static const char fn[] = "td_dict_set_tensor_inplace";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return set_inplace(d, p.part, p.n, NULL, t, fn);
}

int td_dict_set_tensor_inplace_key(td_dict *d, const td_key *key, const td_tensor *t)
{
	static const char fn[] = "td_dict_set_tensor_inplace_key";

	if (!key)
		return null_handle(fn);
	return set_inplace(d, key->part, key->n, key, t, fn);
}

static int set_dict_copy(td_dict *d, const td__kref *kp, size_t kn, const td_key *handle,
	const td_dict *child, const char *fn)
{
	const td_dict *p;
	td_value v;
	int rc;

	if (!child)
		return td__error(TD_EINVAL, "%s: NULL child dict", fn);
	if (d && td__dict_is_lazy(d))
		return td__error(TD_ENOTSUP,
			"%s: a dict cannot be stored in a lazy stack; store "
			"its leaves",
			fn);
	for (p = d; p; p = p->parent)
		if (p == child)
			return td__error(TD_EINVAL, "%s: a dict cannot contain itself", fn);
	v.kind = TD_VALUE_DICT;
	TD_TRY(td__dict_copy(&v.dict, child, fn));
	if (d && d->locked)
		td__dict_set_locked(v.dict, true);
	rc = set_value(d, kp, kn, handle, &v, fn);
	if (rc < 0)
		td_dict_free(v.dict);
	return rc;
}

int td_dict_set_dict(td_dict *d, const char *key, const td_dict *child)
{
	static const char fn[] = "td_dict_set_dict";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return set_dict_copy(d, p.part, p.n, NULL, child, fn);
}

int td_dict_set_dict_key(td_dict *d, const td_key *key, const td_dict *child)
{
	static const char fn[] = "td_dict_set_dict_key";

	if (!key)
		return null_handle(fn);
	return set_dict_copy(d, key->part, key->n, key, child, fn);
}

static int set_dict_take(td_dict *d, const td__kref *kp, size_t kn, const td_key *handle,
	td_dict *child, const char *fn)
{
	td_value v;

	if (!child)
		return td__error(TD_EINVAL, "%s: NULL child dict", fn);
	if (child->parent)
		return td__error(TD_EINVAL, "%s: the dict already belongs to another dict", fn);
	v.kind = TD_VALUE_DICT;
	v.dict = child;
	return set_value(d, kp, kn, handle, &v, fn);
}

int td_dict_set_dict_take(td_dict *d, const char *key, td_dict *child)
{
	static const char fn[] = "td_dict_set_dict_take";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return set_dict_take(d, p.part, p.n, NULL, child, fn);
}

int td_dict_set_dict_take_key(td_dict *d, const td_key *key, td_dict *child)
{
	static const char fn[] = "td_dict_set_dict_take_key";

	if (!key)
		return null_handle(fn);
	return set_dict_take(d, key->part, key->n, key, child, fn);
}

static int set_blob(td_dict *d, const td__kref *kp, size_t kn, const td_key *handle,
	const void *data, size_t length, bool string, const char *fn)
{
	td_value v;
	int rc;

	if (!data && length)
		return td__error(TD_EINVAL, "%s: NULL data", fn);
	if (string && !td__utf8_valid(data, length))
		return td__error(TD_EINVAL, "%s: the string is not valid UTF-8", fn);
	TD_TRY(td__blob_make(&v, data, length, string, fn));
	rc = set_value(d, kp, kn, handle, &v, fn);
	td_buffer_unref(v.blob.buffer);
	return rc;
}

int td_dict_set_string(td_dict *d, const char *key, const char *utf8)
{
	static const char fn[] = "td_dict_set_string";
	td__kpath p;

	if (!utf8)
		return td__error(TD_EINVAL, "%s: NULL string", fn);
	TD_TRY(td__kpath_dotted(&p, key, fn));
	return set_blob(d, p.part, p.n, NULL, utf8, strlen(utf8), true, fn);
}

int td_dict_set_string_key(td_dict *d, const td_key *key, const char *utf8)
{
	static const char fn[] = "td_dict_set_string_key";

	if (!key)
		return null_handle(fn);
	if (!utf8)
		return td__error(TD_EINVAL, "%s: NULL string", fn);
	return set_blob(d, key->part, key->n, key, utf8, strlen(utf8), true, fn);
}

int td_dict_set_bytes(td_dict *d, const char *key, const void *data, size_t length)
{
	static const char fn[] = "td_dict_set_bytes";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return set_blob(d, p.part, p.n, NULL, data, length, false, fn);
}

int td_dict_set_bytes_key(td_dict *d, const td_key *key, const void *data, size_t length)
{
	static const char fn[] = "td_dict_set_bytes_key";

	if (!key)
		return null_handle(fn);
	return set_blob(d, key->part, key->n, key, data, length, false, fn);
}

static int set_strings(td_dict *d, const td__kref *kp, size_t kn, const td_key *handle, int ndim,
	const int64_t *shape, const char *const *utf8, const char *fn)
{
	td_value v;
	int rc;

	TD_TRY(td__strings_new(&v, ndim, shape, utf8, NULL, fn));
	rc = set_value(d, kp, kn, handle, &v, fn);
	td__value_release(&v);
	return rc;
}

int td_dict_set_strings(td_dict *d, const char *key, int ndim, const int64_t *shape,
	const char *const *utf8)
{
	static const char fn[] = "td_dict_set_strings";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return set_strings(d, p.part, p.n, NULL, ndim, shape, utf8, fn);
}

int td_dict_set_strings_key(td_dict *d, const td_key *key, int ndim, const int64_t *shape,
	const char *const *utf8)
{
	static const char fn[] = "td_dict_set_strings_key";

	if (!key)
		return null_handle(fn);
	return set_strings(d, key->part, key->n, key, ndim, shape, utf8, fn);
}

/* ------------------------------------------------------------------------ */
/* Deleting and renaming                                                     */
/* ------------------------------------------------------------------------ */

static int del_impl(td_dict *d, const td__kref *kp, size_t kn, const char *fn)
{
	td_dict *parent;
	td__entry *e;
	int rc;

	if (!d)
		return td__error(TD_EINVAL, "%s: NULL dict", fn);
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_del(d, kp, kn, fn);
	rc = td__dict_lookup(d, kp, kn, &e, &parent, fn);
	if (TD_UNLIKELY(rc == TD_ENOTSUP)) {
		/* A path into a nested lazy stack: deleted from its children. */
		size_t used;
		const td_dict *z = td__dict_lazy_prefix(d, kp, kn, &used);

		if (z)
			return td__lazy_del((td_dict *)z, kp + used, kn - used, fn);
	}
	TD_TRY(rc);
	if (parent->locked)
		return td__error(TD_ELOCKED, "%s: cannot delete '%s': the dict is locked", fn,
			td__entry_key(e));
	td__dict_remove_slot(parent, (uint32_t)(e - parent->entries));
	return TD_OK;
}

int td_dict_del(td_dict *d, const char *key)
{
	static const char fn[] = "td_dict_del";
	td__kpath p;

	TD_TRY(td__kpath_dotted(&p, key, fn));
	return del_impl(d, p.part, p.n, fn);
}

int td_dict_del_key(td_dict *d, const td_key *key)
{
	static const char fn[] = "td_dict_del_key";

	if (!key)
		return null_handle(fn);
	return del_impl(d, key->part, key->n, fn);
}

/* Rename within one dict: the entry keeps its position. */
static int rename_here(td_dict *d, td__entry *e, const td__kref *to)
{
	return td__dict_rekey(d, (uint32_t)(e - d->entries), to);
}

/* Check that moving value `v` out of `from` into `to` keeps the tree valid. */
static int check_move(const td_dict *to, const td_value *v, const char *key, const char *fn)
{
	const td_dict *p;
	const td_dict *child;

	if (v->kind == TD_VALUE_TENSOR)
		return td__dict_check_batch(to, v->tensor.ndim, td_tensor_shape(&v->tensor), key, fn);
	if (v->kind == TD_VALUE_STRINGS)
		return td__dict_check_batch(to, v->strings->ndim, v->strings->shape, key, fn);
	if (v->kind != TD_VALUE_DICT)
		return TD_OK;
	child = v->dict;
	for (p = to; p; p = p->parent)
		if (p == child)
			return td__error(TD_EINVAL, "%s: cannot move '%s' into itself", fn, key);
	TD_TRY(td__dict_check_batch(to, child->batch_ndim, child->batch_shape, key, fn));
	if (td__dict_depth(to) + td__dict_height(child) >= TD_KEY_MAX_DEPTH)
		return td__error(TD_EINVAL, "%s: dicts cannot nest deeper than %d levels", fn,
			TD_KEY_MAX_DEPTH);
	return TD_OK;
}

/*
 * Move the entry holding key `old` of `from` into `to` as `name`. `old`
 * points into the caller's key path (stable), not into the entry: the
 * walk that found `to` may have moved the entries of `from`.
 */
static int rename_move(td_dict *from, const td__kref *old, td_dict *to, const td__kref *name,
	const char *key, const char *fn)
{
	td__entry *e = td__dict_find(from, old->s, old->len, old->hash);
	td_value v = e->value;

	TD_TRY(check_move(to, &v, key, fn));
	if (to->locked)
		return td__error(TD_ELOCKED, "%s: cannot add '%s': the dict is locked", fn, key);
	TD_TRY(td__dict_append(to, name, &v, fn));
	if (v.kind == TD_VALUE_DICT)
		v.dict->parent = to;
	/* The value now lives in `to`: empty the old slot without releasing it. */
	e = td__dict_find(from, old->s, old->len, old->hash);
	e->value.kind = TD_VALUE_BYTES;
	e->value.blob.buffer = NULL;
	td__dict_remove_slot(from, (uint32_t)(e - from->entries));
	return TD_OK;
}

static int rename_impl(td_dict *d, const td__kref *op, size_t on, const td__kref *np, size_t nn,
	const char *fn)
{
	const td__kref *last = &np[nn - 1];
	const td__kref *old = &op[on - 1];
	td_dict *from, *to;
	char key[512];
	td__entry *e;
	td__undo undo;
	int rc;

	if (!d)
		return td__error(TD_EINVAL, "%s: NULL dict", fn);
	TD_DENSE_ONLY(d, fn);
	TD_TRY(td__dict_lookup(d, op, on, &e, &from, fn));
	if (from->locked)
		return td__error(TD_ELOCKED, "%s: cannot rename '%s': the dict is locked", fn,
			td__entry_key(e));
	TD_TRY(td__dict_walk(d, np, nn, &undo, &to, fn));
	td__kpath_format(key, sizeof(key), np, nn);
	if (to == from && last->hash == old->hash && last->len == old->len &&
		memcmp(last->s, old->s, old->len) == 0) {
		rc = TD_OK; /* renamed to itself: nothing to do */
	} else if (td__dict_find(to, last->s, last->len, last->hash)) {
		rc = td__error(TD_EEXISTS, "%s: key '%s' already exists", fn, key);
	} else if (to == from) {
		rc = rename_here(from, td__dict_find(from, old->s, old->len, old->hash), last);
	} else {
		rc = rename_move(from, old, to, last, key, fn);
	}
	if (rc < 0)
		td__dict_undo(&undo);
	return rc;
}

int td_dict_rename(td_dict *d, const char *old_key, const char *new_key)
{
	static const char fn[] = "td_dict_rename";
	td__kpath po, pn;

	TD_TRY(td__kpath_dotted(&po, old_key, fn));
	TD_TRY(td__kpath_dotted(&pn, new_key, fn));
	return rename_impl(d, po.part, po.n, pn.part, pn.n, fn);
}

int td_dict_rename_key(td_dict *d, const td_key *old_key, const td_key *new_key)
{
	static const char fn[] = "td_dict_rename_key";

	if (!old_key || !new_key)
		return null_handle(fn);
	return rename_impl(d, old_key->part, old_key->n, new_key->part, new_key->n, fn);
}
