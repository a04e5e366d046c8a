/* SPDX-License-Identifier: MIT */
/*
 * tensor_impl.h - internal helpers shared by the tensor sources: argument
 * validation, shape arithmetic, broadcasting, the strided n-d iterator and
 * the dtype conversion kernels. Never installed.
 */
#ifndef TD_TENSOR_IMPL_H
#define TD_TENSOR_IMPL_H

#include "td_internal.h"
#include "buffer_impl.h"

/* Element sizes indexed by td_dtype (valid dtypes only). */
extern const uint8_t td__dtype_sizes[TD_DTYPE_COUNT];

static inline size_t td__itemsize(td_dtype d)
{
	return td__dtype_sizes[d];
}

/** Address of the tensor's first element. The tensor must hold a buffer. */
static inline char *td__tensor_ptr(const td_tensor *t)
{
	return (char *)t->buffer->data + (size_t)t->offset * td__itemsize(t->dtype);
}

/**
 * Copy a tensor value's fields and its ndim sizes and strides (not the
 * unused tail of the arrays). Takes no reference.
 */
static inline void td__tensor_copy_meta(td_tensor *dst, const td_tensor *src)
{
	int i, n = src->ndim;

	dst->buffer = src->buffer;
	dst->offset = src->offset;
	dst->dtype = src->dtype;
	dst->ndim = n;
	/* Four dims per step with fixed-size copies (inlined as vector moves,
	 * where a variable-length loop becomes two memcpy calls); the arrays
	 * hold TD_MAX_DIMS, a multiple of 4, so the tail stays in bounds. */
	for (i = 0; i < n; i += 4) {
		memcpy(&dst->shape[i], &td_tensor_shape(src)[i], 4 * sizeof(int64_t));
		memcpy(&dst->strides[i], &td_tensor_strides(src)[i], 4 * sizeof(int64_t));
	}
}

_Static_assert(TD_MAX_DIMS % 4 == 0, "td__tensor_copy_meta copies dims by 4");

/** Whether two shapes of `n` dims are equal (a short loop: no memcmp call). */
static inline bool td__shape_eq(const int64_t *a, const int64_t *b, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/**
 * The view `t[..., k, ...]` at dim d (validated by the caller: t valid,
 * 0 <= d < ndim, 0 <= k < shape[d]); takes a buffer reference. `out` must
 * not alias `t`.
 */
static inline void td__view_select(td_tensor *out, const td_tensor *t, int d, int64_t k)
{
	int i, j = 0;

	out->buffer = td_buffer_ref(t->buffer);
	out->offset = t->offset + k * td_tensor_strides(t)[d];
	out->dtype = t->dtype;
	for (i = 0; i < t->ndim; i++) {
		if (i == d)
			continue;
		out->shape[j] = td_tensor_shape(t)[i];
		out->strides[j++] = td_tensor_strides(t)[i];
	}
	out->ndim = t->ndim - 1;
}

/** The view of [start, start + len) along dim d (validated by the caller); no aliasing. */
static inline void td__view_narrow(td_tensor *out, const td_tensor *t, int d, int64_t start,
	int64_t len)
{
	td__tensor_copy_meta(out, t);
	if (len > 0)
		out->offset += start * td_tensor_strides(t)[d];
	out->shape[d] = len;
	td_buffer_ref(out->buffer);
}

/** Complex element layouts. */
typedef struct td__cf32 {
	float re, im;
} td__cf32;
typedef struct td__cf64 {
	double re, im;
} td__cf64;

/* ------------------------------------------------------------------------ */
/* Validation                                                                */
/* ------------------------------------------------------------------------ */

/*
 * td__tensor_check(), td__tensor_check_read(), td__shape_check(),
 * td__contiguous_strides() and td__copy_unchecked() are in td_internal.h,
 * which storage/ uses too.
 */

/** td__tensor_check_read() plus: it may be written (not read-only). */
int td__tensor_check_write(const td_tensor *t, const char *fn, const char *what);

/** Normalize a possibly negative dim against `ndim` dims (TD_EINVAL when out of range). */
int td__wrap_dim(int dim, int ndim, int *out, const char *fn);

/* ------------------------------------------------------------------------ */
/* Shapes                                                                    */
/* ------------------------------------------------------------------------ */

static inline int64_t td__numel(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	int i;

	for (i = 0; i < ndim; i++)
		n *= shape[i];
	return n;
}

/** Whether a shape/strides pair is C-contiguous (size-1 dims ignored; empty shapes are). */
static inline bool td__is_contiguous(int ndim, const int64_t *shape, const int64_t *strides)
{
	int64_t expected = 1;
	int i;

	/* Without elements any strides are contiguous (torch's rule), whichever dim is 0. */
	for (i = 0; i < ndim; i++)
		if (shape[i] == 0)
			return true;
	for (i = ndim - 1; i >= 0; i--) {
		if (shape[i] == 1)
			continue;
		if (strides[i] != expected)
			return false;
		expected *= shape[i];
	}
	return true;
}


/**
 * Broadcast two shapes (numpy rules) into `out`/`nout`.
 * TD_ETYPE with a message when they do not broadcast.
 */
int td__broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
	int64_t *out, const char *fn);

/**
 * Strides (elements) that make `t` appear with shape `shape` (ndim >= t's):
 * broadcast dims get stride 0. TD_ETYPE when it does not broadcast.
 */
int td__broadcast_strides(const td_tensor *t, int ndim, const int64_t *shape, int64_t *strides,
	const char *fn);

/**
 * A new contiguous tensor with the shape of the valid tensor `t` and dtype
 * `dtype` (contents unspecified): no re-validation of the shape.
 */
int td__tensor_alloc_like(td_tensor *out, const td_tensor *t, td_dtype dtype, const char *fn);

/** td_tensor_clone() of a tensor known to be valid (held by a dict); `out` must not alias it. */
int td__tensor_clone_valid(td_tensor *out, const td_tensor *t, const char *fn);

/** Allocate a new contiguous tensor (zeroed when `zero`). */
int td__tensor_alloc(td_tensor *out, td_dtype dtype, int ndim, const int64_t *shape, bool zero,
	const char *fn);

/**
 * Store a freshly computed result `*tmp` into `*out`. When `out` aliases
 * `in` (the caller passed the same tensor as input and output), the input's
 * old reference is released first. Always succeeds.
 */
static inline void td__tensor_assign(td_tensor *out, const td_tensor *in, td_tensor *tmp)
{
	if (out == in)
		td_buffer_unref(out->buffer);
	td__tensor_copy_meta(out, tmp);
}

/** Whether two tensors' byte extents in the same buffer overlap. */
bool td__tensor_overlap(const td_tensor *a, const td_tensor *b);

/** Whether two tensors are the same view: same buffer, dtype, offset, shape and strides. */
static inline bool td__same_view(const td_tensor *a, const td_tensor *b)
{
	return a->buffer == b->buffer && a->dtype == b->dtype && a->offset == b->offset &&
	       a->ndim == b->ndim && td__shape_eq(td_tensor_shape(a), td_tensor_shape(b), a->ndim) &&
	       td__shape_eq(td_tensor_strides(a), td_tensor_strides(b), a->ndim);
}

/* ------------------------------------------------------------------------ */
/* Strided iteration                                                         */
/* ------------------------------------------------------------------------ */

#define TD_ITER_MAX_OPS 3

/**
 * Walks up to three operands of one logical shape. Dims of size 1 are
 * dropped and dims contiguous in every operand are merged, so the inner
 * loop is as long as possible. Strides are in bytes.
 */
typedef struct td__iter {
	int ndim;                                 /* >= 1 after setup */
	int nops;
	int64_t shape[TD_MAX_DIMS];
	int64_t strides[TD_ITER_MAX_OPS][TD_MAX_DIMS];
	char *base[TD_ITER_MAX_OPS];
} td__iter;

/**
 * Inner loop: `n` elements; operand k starts at ptrs[k] and advances by
 * strides[k] bytes.
 */
typedef void (*td__loop_fn)(char *const *ptrs, const int64_t *strides, int64_t n, void *ctx);

/**
 * Set up an iteration over `shape` for `nops` operands with element strides
 * `strides[k]` (of length ndim) and element sizes `itemsizes[k]`.
 */
void td__iter_init(td__iter *it, int ndim, const int64_t *shape, int nops, char *const *base,
	const int64_t *const *strides, const size_t *itemsizes);

/** Run `fn` over every inner row of the iteration. */
void td__iter_run(const td__iter *it, td__loop_fn fn, void *ctx);

/* ------------------------------------------------------------------------ */
/* Conversion (tensor_copy.c)                                                */
/* ------------------------------------------------------------------------ */

/**
 * Convert `n` elements of dtype `st` at `src` (byte stride `ss`) into dtype
 * `dt` at `dst` (byte stride `ds`) with the rules of td_tensor_to_dtype().
 */
void td__convert(char *dst, int64_t ds, td_dtype dt, const char *src, int64_t ss, td_dtype st,
	int64_t n);

/**
 * Write the scalar converted to `dtype` into `out` (td_dtype_size(dtype)
 * bytes).
 */
void td__scalar_store(void *out, td_dtype dtype, td_scalar s);

/** TD_EINVAL unless `s` has a valid kind. */
int td__scalar_check(td_scalar s, const char *fn);

/** Fill a validated, writable tensor. */
int td__fill_unchecked(const td_tensor *t, td_scalar value);

/** Read one element of `dtype` at `p` as a scalar (kinds as td_tensor_get()). */
td_scalar td__scalar_load(const void *p, td_dtype dtype);

/**
 * Merge the dims of a block (sizes `shape`, byte strides `ss` and `ds` of
 * its source and destination) that are laid out one inside the other in
 * both, and drop dims of size 1: fewer and longer loops. Returns the dims
 * left (0: a single element).
 */
int td__coalesce_dims(int nd, int64_t *shape, int64_t *ss, int64_t *ds);
/**
 * Copy the nd-dim block of elements of `isz` bytes at `s` (byte strides
 * `ss`) to `d` (byte strides `ds`); no dim of size 0.
 */
void td__copy_block(char *d, const int64_t *ds, const char *s, const int64_t *ss,
	const int64_t *shape, int nd, size_t isz);

/**
 * Every check td_tensor_binary_inplace() (b non-NULL) or
 * td_tensor_binary_scalar_inplace() (*s) makes, without writing: callers
 * that update many tensors check them all before writing any.
 */
int td__binary_inplace_check(const td_tensor *a, const td_tensor *b, const td_scalar *s,
	td_binop op, const char *fn);

/* ------------------------------------------------------------------------ */
/* Indexing (tensor_index.c)                                                 */
/* ------------------------------------------------------------------------ */

/*
 * td_tensor_index(), td_tensor_index_put() and td_tensor_index_fill() with
 * the caller's name `fn` in error messages (td_dict reports its own name).
 * The basic case of td__tensor_index() allocates nothing and costs
 * O(t->ndim + n).
 */
int td__tensor_index(td_tensor *out, const td_tensor *t, const td_index *idx, size_t n,
	const char *fn);
int td__tensor_index_put(td_tensor *t, const td_index *idx, size_t n, const td_tensor *value,
	const char *fn);
int td__tensor_index_fill(td_tensor *t, const td_index *idx, size_t n, td_scalar value,
	const char *fn);

/**
 * The shape `t[idx...]` has for a tensor `t` of shape `shape` (ndim dims),
 * with every check td_tensor_index() makes (positions in range, mask
 * shapes, broadcasting): a call that succeeds here succeeds there, barring
 * TD_ENOMEM. Allocates nothing. `shape_out` needs TD_MAX_DIMS entries;
 * `*view_out` (may be NULL) says whether the expression is basic (a view).
 */
int td__index_shape(int *ndim_out, int64_t *shape_out, bool *view_out, int ndim,
	const int64_t *shape, const td_index *idx, size_t n, const char *fn);

/**
 * An index expression prepared once to be applied to many tensors whose
 * leading dims share one shape (a td_dict's leaves share its batch shape).
 * Applying `idx` to a tensor whose leading dims are the prepared shape gives
 * what the original expression gives on the prepared shape, with the
 * tensor's further dims kept whole.
 */
typedef struct td__index_expr {
	td_index *idx;            /* `n` elements; owned array */
	size_t n;
	td_tensor *positions;     /* owned int64 position tensors the mask elements point to */
	size_t npositions;
	bool basic;               /* no advanced element: every result is a view */
	int ndim;                 /* the indexed shape of the prepared shape */
	int64_t shape[TD_MAX_DIMS];
} td__index_expr;

/**
 * Prepare `idx` for tensors whose leading dims are `shape` (ndim dims):
 *  - the expression is checked in full against `shape` (as
 *    td__index_shape(); TD_EINDEX, TD_EINVAL, TD_ETYPE);
 *  - an ellipsis is replaced by full slices over the dims of `shape` that
 *    the expression does not name, so that it stands for those dims only;
 *  - every mask (TD_INDEX_MASK, or a TD_INDEX_TENSOR of dtype bool with
 *    ndim k >= 1) is replaced by k int64 TD_INDEX_TENSOR elements holding
 *    the coordinates of its true elements (numpy's nonzero()), so that the
 *    count is made once, not once per tensor. Mask sizes are checked here
 *    against `shape`; the positions are in range by construction.
 * 0-d bool tensors, lists and integer index tensors stay as given: their
 * pointers are borrowed from `idx`, which must outlive the use of `out`.
 *
 * @param[out] out  written on success; release with td__index_expr_release()
 * @return TD_OK; as td__index_shape(); TD_ENOMEM; TD_EOVERFLOW
 */
int td__index_expr_prepare(td__index_expr *out, const td_index *idx, size_t n, int ndim,
	const int64_t *shape, const char *fn);

/** Release what td__index_expr_prepare() made; NULL is accepted. */
void td__index_expr_release(td__index_expr *e);

#endif /* TD_TENSOR_IMPL_H */
