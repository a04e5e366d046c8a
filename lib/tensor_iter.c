/* SPDX-License-Identifier: MIT */
/*
 * tensor_iter.c - the strided n-d iterator behind copies, conversions and
 * elementwise operations. Dims of size 1 are dropped and dims that are
 * contiguous in every operand are merged, so inner loops run as long as
 * possible and contiguous tensors are walked in one row.
 */
#include "td_internal.h"
#include "tensor_impl.h"

void td__iter_init(td__iter *it, int ndim, const int64_t *shape, int nops, char *const *base,
	const int64_t *const *strides, const size_t *itemsizes)
{
	int i, k, n = 0;

	it->nops = nops;
	for (k = 0; k < nops; k++)
		it->base[k] = base[k];
	for (i = 0; i < ndim; i++) {
		if (shape[i] == 0) {
			/* Nothing to visit: one empty row. */
			it->ndim = 1;
			it->shape[0] = 0;
			for (k = 0; k < nops; k++)
				it->strides[k][0] = 0;
			return;
		}
		if (shape[i] == 1)
			continue;
		it->shape[n] = shape[i];
		for (k = 0; k < nops; k++)
			it->strides[k][n] = strides[k][i] * (int64_t)itemsizes[k];
		n++;
	}
	if (n == 0) {
		it->ndim = 1;
		it->shape[0] = 1;
		for (k = 0; k < nops; k++)
			it->strides[k][0] = (int64_t)itemsizes[k];
		return;
	}
	/* Merge dim i into dim i-1 when every operand steps over it contiguously. */
	{
		int m = 0;
		for (i = 1; i < n; i++) {
			bool merge = true;
			for (k = 0; k < nops; k++)
				if (it->strides[k][m] != it->shape[i] * it->strides[k][i])
					merge = false;
			if (merge) {
				it->shape[m] *= it->shape[i];
				for (k = 0; k < nops; k++)
					it->strides[k][m] = it->strides[k][i];
			} else {
				m++;
				it->shape[m] = it->shape[i];
				for (k = 0; k < nops; k++)
					it->strides[k][m] = it->strides[k][i];
			}
		}
		n = m + 1;
	}
	it->ndim = n;
}

void td__iter_run(const td__iter *it, td__loop_fn fn, void *ctx)
{
	int64_t idx[TD_MAX_DIMS] = { 0 };
	int64_t inner[TD_ITER_MAX_OPS];
	char *p[TD_ITER_MAX_OPS];
	int last = it->ndim - 1, d, k;
	int64_t n = it->shape[last];

	if (n == 0)
		return;
	for (k = 0; k < it->nops; k++) {
		p[k] = it->base[k];
		inner[k] = it->strides[k][last];
	}
	for (;;) {
		fn(p, inner, n, ctx);
		for (d = last - 1; d >= 0; d--) {
			idx[d]++;
			for (k = 0; k < it->nops; k++)
				p[k] += it->strides[k][d];
			if (idx[d] < it->shape[d])
				break;
			for (k = 0; k < it->nops; k++)
				p[k] -= it->strides[k][d] * it->shape[d];
			idx[d] = 0;
		}
		if (d < 0)
			return;
	}
}
