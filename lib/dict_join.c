/* SPDX-License-Identifier: MIT */
/*
 * dict_join.c - dense stack and cat of dicts with identical structure:
 * every leaf is joined with td_tensor_stack() / td_tensor_cat().
 */
#include "td_internal.h"
#include "dict_impl.h"

typedef struct join {
	size_t n;
	int dim;
	bool stack;         /* stack (new dim) or cat (existing dim) */
	td_tensor *tensors; /* scratch, n values */
	const char *fn;
} join;

/* The batch shape of the joined dict of `ds`. */
static int joined_shape(const join *j, const td_dict *const *ds, int *ndim, int64_t *shape)
{
	const td_dict *d0 = ds[0];
	size_t i;
	int k;

	for (i = 1; i < j->n; i++) {
		bool same = ds[i]->batch_ndim == d0->batch_ndim;
		for (k = 0; same && k < d0->batch_ndim; k++)
			if (ds[i]->batch_shape[k] != d0->batch_shape[k] && (j->stack || k != j->dim))
				same = false;
		if (!same) {
			char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
			return td__error(TD_ETYPE, "%s: dict %zu has batch shape %s, dict 0 has %s", j->fn, i,
				td__format_shape(s1, sizeof(s1), ds[i]->batch_ndim, ds[i]->batch_shape),
				td__format_shape(s2, sizeof(s2), d0->batch_ndim, d0->batch_shape));
		}
	}
	if (j->stack) {
		if (d0->batch_ndim >= TD_MAX_DIMS)
			return td__error(TD_EINVAL, "%s: the batch would exceed %d dims", j->fn, TD_MAX_DIMS);
		for (k = 0, i = 0; k <= d0->batch_ndim; k++)
			shape[k] = k == j->dim ? (int64_t)j->n : d0->batch_shape[i++];
		*ndim = d0->batch_ndim + 1;
		return td__batch_check_numel(*ndim, shape, j->fn);
	}
	memcpy(shape, d0->batch_shape, (size_t)d0->batch_ndim * sizeof(int64_t));
	shape[j->dim] = 0;
	for (i = 0; i < j->n; i++)
		if (!td__add_i64(shape[j->dim], ds[i]->batch_shape[j->dim], &shape[j->dim]))
			return td__error(TD_EOVERFLOW, "%s: the joined batch is too large", j->fn);
	*ndim = d0->batch_ndim;
	return td__batch_check_numel(*ndim, shape, j->fn);
}

/* Join one entry (key of ds[0] entry e0) across all dicts into *v. */
static int join_entry(const join *j, const td_dict *const *ds, const td__entry *e0, td_value *v);

/*
 * Join strings and arrays of strings, as tensordict stacks NonTensorData:
 * equal strings stay one string; otherwise the result is an array in which
 * each dict's single string stands for every element of its batch.
 */
static int join_text(const join *j, const td_dict *const *ds, const td__entry *e0, td_value *v)
{
	const td_value **vals = td__calloc(j->n, sizeof(*vals));
	td_tensor *nums = td__calloc(j->n, sizeof(*nums));
	td_tensor res = TD_TENSOR_INIT;
	bool same = e0->value.kind == TD_VALUE_STRING;
	int64_t base = 0;
	size_t k;
	int rc = TD_OK;

	if (!vals || !nums) {
		rc = td__error_nomem(j->n * sizeof(*nums));
		goto out;
	}
	for (k = 0; k < j->n; k++) {
		const td__entry *e = td__dict_find(ds[k], td__entry_key(e0), e0->klen, e0->hash);

		if (!e || !td__is_text(&e->value)) {
			rc = td__error(TD_ETYPE, "%s: '%s' is %s in dict %zu", j->fn, td__entry_key(e0),
				e ? "not a string" : "missing", k);
			goto out;
		}
		vals[k] = &e->value;
		if (same && !td__text_values_equal(vals[k], vals[0]))
			same = false;
	}
	if (same) {
		rc = td__value_share(v, &e0->value, j->fn);
		goto out;
	}
	for (k = 0; k < j->n && rc == TD_OK; k++) {
		rc = td__strings_numbers(&nums[k], vals[k], ds[k]->batch_ndim, ds[k]->batch_shape, base,
			j->fn);
		base += vals[k]->kind == TD_VALUE_STRINGS ? vals[k]->strings->numel : 1;
	}
	if (rc == TD_OK)
		rc = j->stack ? td_tensor_stack(&res, nums, j->n, j->dim) :
						td_tensor_cat(&res, nums, j->n, j->dim);
	if (rc == TD_OK)
		rc = td__strings_gather(v, vals, j->n, &res, j->fn);
out:
	if (nums)
		for (k = 0; k < j->n; k++)
			td_tensor_release(&nums[k]);
	td_tensor_release(&res);
	td__free(nums);
	td__free(vals);
	return rc;
}

static int join_rec(const join *j, const td_dict *const *ds, td_dict **out)
{
	const td_dict *d0 = ds[0];
	int64_t shape[TD_MAX_DIMS];
	td_dict *nd;
	uint32_t i;
	size_t k;
	int ndim = 0, rc = 0;

	TD_TRY(joined_shape(j, ds, &ndim, shape));
	for (k = 1; k < j->n; k++)
		if (ds[k]->count != d0->count)
			return td__error(TD_ETYPE, "%s: dict %zu has %u keys, dict 0 has %u", j->fn, k,
				ds[k]->count, d0->count);
	TD_TRY(td__dict_alloc(&nd, ndim, shape, d0->count, j->fn));
	for (i = 0; i < d0->used && rc == 0; i++) {
		const td__entry *e0 = &d0->entries[i];
		td_value v;

		if (!td__entry_live(e0))
			continue;
		rc = join_entry(j, ds, e0, &v);
		if (rc < 0)
			break;
		rc = td__dict_append_entry(nd, e0, &v, j->fn);
		if (rc < 0) {
			td__value_release(&v);
		} else if (v.kind == TD_VALUE_DICT) {
			v.dict->parent = nd;
		}
	}
	if (rc < 0) {
		td_dict_free(nd);
		return rc;
	}
	*out = nd;
	return TD_OK;
}

static int join_entry(const join *j, const td_dict *const *ds, const td__entry *e0, td_value *v)
{
	const td_dict **children = NULL;
	size_t k;
	int rc;

	if (td__is_text(&e0->value))
		return join_text(j, ds, e0, v);
	if (e0->value.kind == TD_VALUE_DICT) {
		children = td__calloc(j->n, sizeof(*children));
		if (!children)
			return td__error_nomem(j->n * sizeof(*children));
	}
	for (k = 0; k < j->n; k++) {
		const td__entry *e = td__dict_find(ds[k], td__entry_key(e0), e0->klen, e0->hash);
		if (!e || e->value.kind != e0->value.kind) {
			td__free(children);
			return td__error(TD_ETYPE, "%s: '%s' is %s in dict %zu", j->fn, td__entry_key(e0),
				e ? "a different kind of value" : "missing", k);
		}
		if (children && TD_UNLIKELY(td__dict_is_lazy(e->value.dict))) {
			td__free(children);
			return td__error(TD_ENOTSUP,
				"%s: '%s' is a lazy stack in dict %zu: stacking and "
				"concatenating do not reach into lazy stacks nested in a dict "
				"(td_lazy_densify() makes a dense copy; td_lazy_stack() stacks lazily)",
				j->fn, td__entry_key(e0), k);
		}
		if (children)
			children[k] = e->value.dict;
		else if (e->value.kind == TD_VALUE_TENSOR)
			j->tensors[k] = e->value.tensor;
		else if (!td__text_values_equal(&e->value, &e0->value))
			return td__error(TD_ETYPE, "%s: non-tensor '%s' differs between dicts", j->fn,
				td__entry_key(e0));
	}
	v->kind = e0->value.kind;
	if (children) {
		rc = join_rec(j, children, &v->dict);
		td__free(children);
		return rc;
	}
	if (e0->value.kind != TD_VALUE_TENSOR)
		return td__value_share(v, &e0->value, j->fn);
	/* j->tensors is scratch shared by the whole recursion: it is filled
	 * above and consumed here before any other entry is visited. */
	if (j->stack)
		return td_tensor_stack(&v->tensor, j->tensors, j->n, j->dim);
	return td_tensor_cat(&v->tensor, j->tensors, j->n, j->dim);
}

static int join_impl(td_dict **out, const td_dict *const *dicts, size_t n, int dim, bool stack,
	const char *fn)
{
	join j;
	size_t i;
	int rc;

	if (out)
		*out = NULL;
	if (!out || !dicts || n == 0)
		return td__error(TD_EINVAL, "%s: no dicts to join", fn);
	*out = NULL;
	for (i = 0; i < n; i++)
		if (!dicts[i])
			return td__error(TD_EINVAL, "%s: dict %zu is NULL", fn, i);
	for (i = 0; i < n; i++)
		if (td__dict_is_lazy(dicts[i]))
			return td__error(TD_ENOTSUP,
				"%s: dict %zu is a lazy stack (td_lazy_densify() "
				"makes a dense dict; td_lazy_stack() stacks lazily)",
				fn, i);
	if (stack)
		TD_TRY(td__wrap_dim(dim, dicts[0]->batch_ndim + 1, &j.dim, fn));
	else if (dicts[0]->batch_ndim == 0)
		return td__error(TD_EINVAL, "%s: dicts without batch dims cannot be concatenated", fn);
	else
		TD_TRY(td__wrap_dim(dim, dicts[0]->batch_ndim, &j.dim, fn));
	j.n = n;
	j.stack = stack;
	j.fn = fn;
	j.tensors = td__calloc(n, sizeof(td_tensor));
	if (!j.tensors)
		return td__error_nomem(n * sizeof(td_tensor));
	rc = join_rec(&j, dicts, out);
	td__free(j.tensors);
	return rc;
}

int td_dict_stack(td_dict **out, const td_dict *const *dicts, size_t n, int dim)
{
	return join_impl(out, dicts, n, dim, true, "td_dict_stack");
}

int td_dict_cat(td_dict **out, const td_dict *const *dicts, size_t n, int dim)
{
	return join_impl(out, dicts, n, dim, false, "td_dict_cat");
}
