/* SPDX-License-Identifier: MIT */
/*
 * fuzz_read.h - what the directory-store fuzz targets do with a store that
 * opens: touch every mapped byte of every leaf, as a reader would, so that
 * a mapping shorter than its tensor is a finding. Included by the targets.
 */
#ifndef TD_FUZZ_READ_H
#define TD_FUZZ_READ_H

#include <tdstore.h>

/* Open the store at `path` with `flags`, read every leaf in full, close it. */
static void td_fuzz_open_and_read(const char *path, unsigned flags)
{
	td_store *st = NULL;
	td_dict_iter *it;
	td_item item;

	if (td_store_open(&st, path, flags) != TD_OK)
		return;
	if (td_dict_iter_new(&it, td_store_dict(st), TD_ITER_NESTED | TD_ITER_LEAVES_ONLY) == 0) {
		while (td_dict_iter_next(it, &item) == 1) {
			const td_value *v = item.value;
			volatile unsigned char sink = 0;
			size_t i, n;

			if (v->kind != TD_VALUE_TENSOR)
				continue;
			n = td_tensor_nbytes(&v->u.tensor);
			for (i = 0; i < n; i++)
				sink ^= ((const unsigned char *)td_tensor_data(&v->u.tensor))[i];
			(void)sink;
		}
		td_dict_iter_free(it);
	}
	td_store_close(st);
}

#endif /* TD_FUZZ_READ_H */
