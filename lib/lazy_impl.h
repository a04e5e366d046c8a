/* SPDX-License-Identifier: MIT */
/*
 * lazy_impl.h - what the sources of lazy stacks (lazy*.c) share among
 * themselves. Never installed.
 */
#ifndef TD_LAZY_IMPL_H
#define TD_LAZY_IMPL_H

#include "td_internal.h"
#include "dict_impl.h"

/** TD_ENOTFOUND naming the path and the child `i` of the lazy stack that lacks it. */
int td__lz_not_found(const td__kref *parts, size_t n, size_t i, const char *fn);

/* The view t[..., k, ...] at dim `dim`, borrowing t's buffer (no reference). */
static inline void td__lz_select_borrowed(td_tensor *out, const td_tensor *t, int dim,
	int64_t k)
{
	int i, j = 0;

	out->buffer = t->buffer;
	out->offset = t->offset + k * t->strides[dim];
	out->dtype = t->dtype;
	for (i = 0; i < t->ndim; i++) {
		if (i == dim)
			continue;
		out->shape[j] = t->shape[i];
		out->strides[j++] = t->strides[i];
	}
	out->ndim = t->ndim - 1;
}

#endif /* TD_LAZY_IMPL_H */
