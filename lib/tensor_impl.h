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

/* ------------------------------------------------------------------------ */
/* Dims                                                                      */
/* ------------------------------------------------------------------------ */

/*
 * A tensor of more than TD_TENSOR_INLINE_DIMS dims keeps shape[ndim] and
 * strides[ndim] in a block of its own, after this header (dims_.ext points
 * at v). A block is immutable once a tensor holds it, and reference-counted
 * like the buffer: a struct copy borrows it, each owned tensor value holds
 * one reference. Code that changes dims makes them its own first
 * (td__tensor_dims(), td__tensor_dims_own()).
 */
typedef struct td__dims {
	_Atomic uint32_t refs;
	int32_t ndim;
	int64_t v[];
} td__dims;

/** Whether a tensor of `ndim` dims keeps them out of line. */
static inline bool td__dims_ext(int ndim)
{
	return ndim > TD_TENSOR_INLINE_DIMS;
}

static inline td__dims *td__dims_block(const td_tensor *t)
{
	return (td__dims *)(void *)((char *)(uintptr_t)t->dims_.ext - offsetof(td__dims, v));
}

/** Free a block whose last reference went. */
void td__dims_free(td__dims *b);

/** Take `n` more references to t's dims (none for inline dims). */
static inline void td__dims_ref_n(const td_tensor *t, size_t n)
{
	if (TD_UNLIKELY(td__dims_ext(t->ndim)))
		atomic_fetch_add_explicit(&td__dims_block(t)->refs, (uint32_t)n, memory_order_relaxed);
}

/** Drop the reference t holds to its dims (none for inline dims, or a malformed t). */
static inline void td__dims_unref(const td_tensor *t)
{
	if (TD_UNLIKELY(td__dims_ext(t->ndim)) && t->dims_.ext) {
		td__dims *b = td__dims_block(t);

		if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
			td__dims_free(b);
	}
}

/** Take the references a tensor value holds: its buffer's and its dims'. */
static inline void td__tensor_hold(const td_tensor *t)
{
	td_buffer_ref(t->buffer);
	td__dims_ref_n(t, 1);
}

/** Drop the references of a tensor value that holds a buffer. */
static inline void td__tensor_drop(const td_tensor *t)
{
	td__dims_unref(t);
	td__buffer_unref(t->buffer);
}

/*
 * The dims of a tensor known to hold them inline (ndim <= TD_TENSOR_INLINE_DIMS),
 * without the test of ndim that td_tensor_shape() makes: for hot loops
 * that have checked it once. The _w forms are for writing.
 */
static inline const int64_t *td__ishape(const td_tensor *t)
{
	return t->dims_.inl.shape;
}

static inline const int64_t *td__istrides(const td_tensor *t)
{
	return t->dims_.inl.strides;
}

static inline int64_t *td__ishape_w(td_tensor *t)
{
	return t->dims_.inl.shape;
}

static inline int64_t *td__istrides_w(td_tensor *t)
{
	return t->dims_.inl.strides;
}

/**
 * The shape and strides of `t` (valid) with one test of ndim, where
 * td_tensor_shape() and td_tensor_strides() make one each.
 */
static inline void td__dims_get(const td_tensor *t, const int64_t **shape, const int64_t **strides)
{
	if (TD_LIKELY(!td__dims_ext(t->ndim))) {
		*shape = t->dims_.inl.shape;
		*strides = t->dims_.inl.strides;
	} else {
		*shape = t->dims_.ext;
		*strides = t->dims_.ext + t->ndim;
	}
}

/** td__tensor_dims() of more than TD_TENSOR_INLINE_DIMS dims. */
int td__dims_alloc(td_tensor *t, int ndim, const char *fn);

/**
 * Set t->ndim and give `t` dims of its own to write through td__shape_w()
 * and td__strides_w(): the struct's storage, or above
 * TD_TENSOR_INLINE_DIMS a new block that `t` then holds (one reference),
 * contents unspecified. The dims t had are dropped without being released.
 * TD_ENOMEM (only for a new block).
 */
static inline int td__tensor_dims(td_tensor *t, int ndim, const char *fn)
{
	if (TD_LIKELY(!td__dims_ext(ndim))) {
		t->ndim = ndim;
		return TD_OK;
	}
	return td__dims_alloc(t, ndim, fn);
}

/**
 * td__tensor_dims() that also gives where to write the shape and the
 * strides (one test of ndim).
 */
static inline int td__tensor_dims_w(td_tensor *t, int ndim, int64_t **shape, int64_t **strides,
	const char *fn)
{
	if (TD_LIKELY(!td__dims_ext(ndim))) {
		t->ndim = ndim;
		*shape = t->dims_.inl.shape;
		*strides = t->dims_.inl.strides;
		return TD_OK;
	}
	TD_TRY(td__dims_alloc(t, ndim, fn));
	*shape = (int64_t *)(uintptr_t)t->dims_.ext;
	*strides = *shape + ndim;
	return TD_OK;
}

/** td__tensor_dims_own() of out-of-line dims: a copy in a new block. */
int td__dims_copy(td_tensor *t, const char *fn);

/**
 * Make the dims of `t`, a copy of another tensor's struct (its dims
 * borrowed), its own so that they can be changed in place: nothing to do
 * for inline dims; out-of-line ones are copied into a new block that `t`
 * then holds. TD_ENOMEM (only for a new block).
 */
static inline int td__tensor_dims_own(td_tensor *t, const char *fn)
{
	if (TD_LIKELY(!td__dims_ext(t->ndim)))
		return TD_OK;
	return td__dims_copy(t, fn);
}

/** The shape of `t` for writing: its dims must be its own (td__tensor_dims()). */
static inline int64_t *td__shape_w(td_tensor *t)
{
	return (int64_t *)(uintptr_t)td_tensor_shape(t);
}

/** The strides of `t` for writing, as td__shape_w(). */
static inline int64_t *td__strides_w(td_tensor *t)
{
	return (int64_t *)(uintptr_t)td_tensor_strides(t);
}

/**
 * td__tensor_dims() then the dims copied from shape[0..ndim) and
 * strides[0..ndim) (which must not be t's own). TD_ENOMEM.
 */
static inline int td__tensor_set_dims(td_tensor *t, int ndim, const int64_t *shape,
	const int64_t *strides, const char *fn)
{
	int64_t *sh, *st;
	int i;

	TD_TRY(td__tensor_dims_w(t, ndim, &sh, &st, fn));
	for (i = 0; i < ndim; i++) {
		sh[i] = shape[i];
		st[i] = strides[i];
	}
	return TD_OK;
}

/**
 * Copy a tensor value (fields and dims: inline ones, or the pointer to the
 * out-of-line block, which is borrowed). Takes no reference.
 */
static inline void td__tensor_copy_meta(td_tensor *dst, const td_tensor *src)
{
	*dst = *src;
}

/*
 * td__tensor_copy_meta() of a tensor with inline dims, field by field, for a
 * view just built on the stack: a struct copy loads it by 16-byte moves,
 * each spanning two of the 8-byte stores that built it, and such a load
 * waits for those stores to leave the store buffer (no store-to-load
 * forwarding): measured ~20 ns a call on a set through a lazy stack.
 */
static inline void td__tensor_copy_view(td_tensor *dst, const td_tensor *src)
{
	int q;

	dst->buffer = src->buffer;
	dst->offset = src->offset;
	dst->dtype = src->dtype;
	dst->ndim = src->ndim;
	for (q = 0; q < src->ndim; q++) {
		dst->dims_.inl.shape[q] = src->dims_.inl.shape[q];
		dst->dims_.inl.strides[q] = src->dims_.inl.strides[q];
	}
}

/** Whether two shapes of `n` dims are equal (a short loop: no memcmp call). */
static inline bool td__shape_eq(const int64_t *a, const int64_t *b, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* The fields and dims (from sh/st into osh/ost) of the view t[..., k, ...] at dim d. */
static inline void td__select_fill(td_tensor *out, const td_tensor *t, const int64_t *sh,
	const int64_t *st, int64_t *osh, int64_t *ost, int d, int64_t k)
{
	int i, j = 0;

	out->buffer = t->buffer;
	out->offset = t->offset + k * st[d];
	out->dtype = t->dtype;
	for (i = 0; i < t->ndim; i++) {
		if (i == d)
			continue;
		osh[j] = sh[i];
		ost[j++] = st[i];
	}
}

/** td__view_select_dims() of a tensor with out-of-line dims. */
int td__view_select_ext(td_tensor *out, const td_tensor *t, int d, int64_t k, const char *fn);

/**
 * The view `t[..., k, ...]` at dim d (validated by the caller: t valid,
 * 0 <= d < ndim, 0 <= k < shape[d]) without a buffer reference: its dims
 * are its own (td__dims_unref() drops them). `out` must not alias `t`.
 * TD_ENOMEM only for more than TD_TENSOR_INLINE_DIMS dims left.
 */
static inline int td__view_select_dims(td_tensor *out, const td_tensor *t, int d, int64_t k,
	const char *fn)
{
	if (TD_LIKELY(!td__dims_ext(t->ndim))) {
		out->ndim = t->ndim - 1;
		td__select_fill(out, t, td__ishape(t), td__istrides(t), td__ishape_w(out),
			td__istrides_w(out), d, k);
		return TD_OK;
	}
	return td__view_select_ext(out, t, d, k, fn);
}

/** td__view_select_dims() holding a buffer reference too: an owned view. */
static inline int td__view_select(td_tensor *out, const td_tensor *t, int d, int64_t k,
	const char *fn)
{
	TD_TRY(td__view_select_dims(out, t, d, k, fn));
	td_buffer_ref(out->buffer);
	return TD_OK;
}

/**
 * The view of [start, start + len) along dim d (validated by the caller);
 * no aliasing. TD_ENOMEM only for more than TD_TENSOR_INLINE_DIMS dims.
 */
static inline int td__view_narrow(td_tensor *out, const td_tensor *t, int d, int64_t start,
	int64_t len, const char *fn)
{
	td__tensor_copy_meta(out, t);
	TD_TRY(td__tensor_dims_own(out, fn));
	if (len > 0)
		out->offset += start * td_tensor_strides(t)[d];
	td__shape_w(out)[d] = len;
	td_buffer_ref(out->buffer);
	return TD_OK;
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
		td__tensor_drop(out);
	td__tensor_copy_meta(out, tmp);
}

/** Whether two tensors' byte extents in the same buffer overlap. */
bool td__tensor_overlap(const td_tensor *a, const td_tensor *b);

/** Whether two tensors are the same view: same buffer, dtype, offset, shape and strides. */
static inline bool td__same_view(const td_tensor *a, const td_tensor *b)
{
	if (a->buffer != b->buffer || a->dtype != b->dtype || a->offset != b->offset ||
		a->ndim != b->ndim)
		return false;
	if (TD_LIKELY(!td__dims_ext(a->ndim)))
		return td__shape_eq(td__ishape(a), td__ishape(b), a->ndim) &&
			td__shape_eq(td__istrides(a), td__istrides(b), a->ndim);
	/* Out of line: shape and strides are one array of 2 ndim values. */
	return td__shape_eq(a->dims_.ext, b->dims_.ext, 2 * a->ndim);
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
	int ndim; /* >= 1 after setup */
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
	td_index *idx; /* `n` elements; owned array */
	size_t n;
	td_tensor *positions; /* owned int64 position tensors the mask elements point to */
	size_t npositions;
	bool basic; /* no advanced element: every result is a view */
	int ndim;   /* the indexed shape of the prepared shape */
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
