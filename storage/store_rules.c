/* SPDX-License-Identifier: MIT */
/*
 * store_rules.c - what every placement of a store accepts: the values a
 * store can hold (td_store_memmap's checks before any file is touched) and
 * whether a dict holds a lazy stack, whose schema stores do not change in
 * place.
 */
#include "store_impl.h"

int td__holds_lazy(const td_dict *d)
{
	size_t n, i;
	const td_value **vals;
	int rc = 0;

	if (td_dict_is_lazy(d))
		return 1;
	n = td_dict_items(NULL, NULL, 0, d);
	if (n == 0)
		return 0;
	vals = td__calloc(n, sizeof(*vals));
	if (!vals)
		return td__error_nomem(n * sizeof(*vals));
	td_dict_items(NULL, vals, n, d);
	for (i = 0; rc == 0 && i < n; i++)
		if (vals[i]->kind == TD_VALUE_DICT)
			rc = td__holds_lazy(vals[i]->dict);
	td__free(vals);
	return rc;
}

/*
 * Everything that would make the write fail half-way is refused before any
 * file is touched. A lazy stack is checked child by child (its leaves are
 * not stacked: a ragged one is written as it is).
 */
int td__check_writable(const td_dict *d, const char *fn)
{
	const char **keys = NULL;
	const td_value **vals = NULL;
	size_t n, i;
	int rc = TD_OK;

	if (td_dict_is_lazy(d)) {
		for (i = 0; rc == TD_OK && i < td_lazy_count(d); i++)
			rc = td__check_writable(td_lazy_child(d, i), fn);
		return rc;
	}
	n = td_dict_items(NULL, NULL, 0, d);
	if (n == 0)
		return TD_OK;
	keys = td__calloc(n, sizeof(*keys));
	vals = td__calloc(n, sizeof(*vals));
	if (!keys || !vals)
		rc = td__error_nomem(n * sizeof(*keys));
	else
		td_dict_items(keys, vals, n, d);
	for (i = 0; rc == TD_OK && i < n; i++) {
		const td_value *v = vals[i];

		if (td__key_reserved(keys[i]))
			rc = td__error(TD_EINVAL, "%s: key \"%s\" is reserved by meta.json", fn, keys[i]);
		else if (v->kind == TD_VALUE_BYTES)
			rc = td__error(TD_EINVAL,
				"%s: \"%s\" holds bytes, which "
				"tensordict's layout stores only as a Python pickle",
				fn, keys[i]);
		else if (v->kind == TD_VALUE_TENSOR &&
			td_buffer_memory(v->tensor.buffer) == TD_MEMORY_DEVICE)
			rc = td__error(TD_EINVAL, "%s: \"%s\" is in device memory", fn, keys[i]);
		else if (v->kind == TD_VALUE_DICT)
			rc = td__check_writable(v->dict, fn);
	}
	td__free(keys);
	td__free(vals);
	return rc;
}
