/* SPDX-License-Identifier: MIT */
/*
 * tdstore/tensor.h - n-dimensional views of buffers: creation, indexing,
 * shape operations, copies with dtype conversion, elementwise arithmetic.
 *
 * A td_tensor is a small value type: a buffer reference plus dtype, shape,
 * strides (in elements) and offset (in elements). Copying the struct does
 * not take a reference; use td_tensor_ref() for that and td_tensor_release()
 * to drop one. Basic indexing (int, slice, range, new axis, ellipsis) and
 * the shape operations return views sharing the buffer; advanced indexing
 * (index lists, index tensors, boolean masks) returns copies, as in torch.
 *
 * The dims of a tensor of up to TD_TENSOR_INLINE_DIMS dims are kept in the
 * struct itself. A tensor of more dims (up to TD_MAX_DIMS) keeps its shape
 * and strides in one separate, immutable, reference-counted block, which a
 * copy of the struct borrows as it borrows the buffer, td_tensor_ref()
 * shares (it still cannot fail) and td_tensor_release() drops. Read the
 * dims with td_tensor_shape() and td_tensor_strides() in either case.
 *
 * Conventions for every function below:
 *  - A dim outside the tensor's dims is TD_EINVAL; a position outside a
 *    dim is TD_EINDEX.
 *  - `out` is written only on success; its previous content is overwritten
 *    without being released. `out` may point to the same tensor as an input:
 *    that input's reference is then released and replaced by the result
 *    (so `td_tensor_select(&t, &t, 0, 1)` narrows `t` in place).
 *  - Negative dims count from the end (-1 is the last dimension).
 *  - Tensors in TD_MEMORY_DEVICE buffers cannot be read or written by the
 *    CPU: element operations return TD_ENOTSUP. Writes into a buffer with
 *    TD_BUFFER_READONLY return TD_EREADONLY.
 *  - All size arithmetic is overflow-checked: shapes whose byte size does
 *    not fit in size_t/int64 give TD_EOVERFLOW.
 *  - A function that makes a tensor of more than TD_TENSOR_INLINE_DIMS
 *    dims, a view included, allocates the block of its dims: it may fail
 *    with TD_ENOMEM even where its errors below do not name it.
 */
#ifndef TDSTORE_TENSOR_H
#define TDSTORE_TENSOR_H

#include "common.h"
#include "buffer.h"
#include "dtype.h"

TD_BEGIN_DECLS

/**
 * Dims a td_tensor holds in the struct; a tensor of more dims holds its
 * shape and strides in a block of their own (see above).
 */
#define TD_TENSOR_INLINE_DIMS 4

/**
 * A view of a buffer. `buffer`, `offset`, `dtype` and `ndim` may be read
 * directly, the dims through td_tensor_shape() and td_tensor_strides();
 * change a tensor only through the API.
 */
typedef struct td_tensor {
	td_buffer *buffer; /**< one reference, owned by this value; NULL when released */
	int64_t offset;    /**< index of the first element in the buffer, in elements */
	td_dtype dtype;    /**< element type */
	int32_t ndim;      /**< number of dimensions, 0..TD_MAX_DIMS */
	/** Private: where the dims are; read them with td_tensor_shape() and td_tensor_strides(). */
	union {
		struct {
			int64_t shape[TD_TENSOR_INLINE_DIMS];
			int64_t strides[TD_TENSOR_INLINE_DIMS];
		} inl;              /**< ndim <= TD_TENSOR_INLINE_DIMS */
		const int64_t *ext; /**< more dims: shape[ndim] then strides[ndim], shared */
	} dims_;
} td_tensor;

/** Initializer for a released (empty) td_tensor value. */
#define TD_TENSOR_INIT \
	{ \
		NULL, 0, TD_DTYPE_F32, 0, \
		{ \
			{ \
				{ 0 }, \
				{ \
					0 \
				} \
			} \
		} \
	}

/**
 * @return the size of each of the tensor's `ndim` dims (borrowed: valid
 *         while `t` holds its view, until it is released or overwritten)
 */
static inline const int64_t *td_tensor_shape(const td_tensor *t)
{
	return t->ndim <= TD_TENSOR_INLINE_DIMS ? t->dims_.inl.shape : t->dims_.ext;
}

/**
 * @return the step of each of the tensor's `ndim` dims, in elements (0 for
 *         expanded dims); borrowed as td_tensor_shape()
 */
static inline const int64_t *td_tensor_strides(const td_tensor *t)
{
	return t->ndim <= TD_TENSOR_INLINE_DIMS ? t->dims_.inl.strides : t->dims_.ext + t->ndim;
}

/* ------------------------------------------------------------------------ */
/* Scalars                                                                   */
/* ------------------------------------------------------------------------ */

/** What a td_scalar holds. */
typedef enum td_scalar_kind {
	TD_SCALAR_BOOL = 0,
	TD_SCALAR_INT = 1,    /**< signed 64-bit */
	TD_SCALAR_UINT = 2,   /**< unsigned 64-bit */
	TD_SCALAR_FLOAT = 3,  /**< double */
	TD_SCALAR_COMPLEX = 4 /**< two doubles */
} td_scalar_kind;

/** A single value of any dtype, used to fill, compare and do arithmetic. */
typedef struct td_scalar {
	td_scalar_kind kind;
	union {
		bool b;
		int64_t i;
		uint64_t u;
		double f;
		double c[2]; /**< real, imaginary */
	} v;
} td_scalar;

/** @return a boolean scalar. */
static inline td_scalar td_scalar_bool(bool b)
{
	td_scalar s;
	s.kind = TD_SCALAR_BOOL;
	s.v.b = b;
	return s;
}

/** @return a signed integer scalar. */
static inline td_scalar td_scalar_int(int64_t i)
{
	td_scalar s;
	s.kind = TD_SCALAR_INT;
	s.v.i = i;
	return s;
}

/** @return an unsigned integer scalar. */
static inline td_scalar td_scalar_uint(uint64_t u)
{
	td_scalar s;
	s.kind = TD_SCALAR_UINT;
	s.v.u = u;
	return s;
}

/** @return a floating-point scalar. */
static inline td_scalar td_scalar_float(double f)
{
	td_scalar s;
	s.kind = TD_SCALAR_FLOAT;
	s.v.f = f;
	return s;
}

/** @return a complex scalar. */
static inline td_scalar td_scalar_complex(double re, double im)
{
	td_scalar s;
	s.kind = TD_SCALAR_COMPLEX;
	s.v.c[0] = re;
	s.v.c[1] = im;
	return s;
}

/*
 * Typed readers: the value of a scalar of any kind as one C type, converted
 * by the rules of td_tensor_to_dtype() (to bool, nonzero is true; a float
 * to an integer truncates toward zero, NaN gives 0 and out-of-range values
 * saturate; an integer to an integer of the other signedness wraps around,
 * as a cast does; a complex value gives its real part). They cannot fail: a
 * scalar of an unknown kind reads as 0 (false). Typical use, with the
 * scalar td_tensor_get() gives:
 *
 *     td_scalar s;
 *     if (td_tensor_get(&s, t, index) == TD_OK)
 *             printf("%g\n", td_scalar_as_double(s));
 */

/** @return `s` as a boolean: nonzero (any kind) is true. */
TD_API bool td_scalar_as_bool(td_scalar s);
/** @return `s` as a signed 64-bit integer (floats truncated and saturated). */
TD_API int64_t td_scalar_as_int64(td_scalar s);
/** @return `s` as an unsigned 64-bit integer (floats truncated and saturated). */
TD_API uint64_t td_scalar_as_uint64(td_scalar s);
/** @return `s` as a double (a complex value's real part). */
TD_API double td_scalar_as_double(td_scalar s);

/* ------------------------------------------------------------------------ */
/* Index expressions                                                         */
/* ------------------------------------------------------------------------ */

/** The kinds of index, as in Python's `t[...]`. */
typedef enum td_index_kind {
	TD_INDEX_INT = 0,   /**< one position (`start`); negative counts from the end; drops the dim */
	TD_INDEX_SLICE = 1, /**< start:stop:step with Python slice rules (clamped, negatives wrap);
	                            the step must be positive (views have no negative strides);
	                            TD_SLICE_NONE as step means 1 */
	TD_INDEX_RANGE = 2, /**< range(start, stop, step), step > 0: every position must be in
	                            bounds; a view */
	TD_INDEX_NEWAXIS = 3,  /**< None: inserts a dimension of size 1 */
	TD_INDEX_ELLIPSIS = 4, /**< ...: as many full slices as needed */
	TD_INDEX_LIST = 5,     /**< positions `list[0..count)`: advanced, gives a copy */
	TD_INDEX_MASK = 6,     /**< booleans `mask[0..count)` over one dim: advanced, gives a copy */
	TD_INDEX_TENSOR = 7    /**< an integer tensor of positions or a bool tensor mask over
	                            tensor->ndim dims: advanced, gives a copy */
} td_index_kind;

/** Marks an omitted slice bound (Python's `None` in `a:b:c`). */
#define TD_SLICE_NONE INT64_MIN

/**
 * One element of an index expression. Build them with the td_index_*()
 * helpers. Pointers inside (list, mask, tensor) are borrowed for the
 * duration of the call that receives the expression.
 */
typedef struct td_index {
	td_index_kind kind;
	int64_t start;           /**< INT position; SLICE/RANGE start */
	int64_t stop;            /**< SLICE/RANGE stop */
	int64_t step;            /**< SLICE/RANGE step (nonzero) */
	const int64_t *list;     /**< LIST positions */
	const bool *mask;        /**< MASK booleans */
	int64_t count;           /**< LIST/MASK length */
	const td_tensor *tensor; /**< TENSOR index (int8..int64, uint8..uint64 positions, or bool mask) */
} td_index;

static inline td_index td__index_make(td_index_kind kind)
{
	td_index x;
	x.kind = kind;
	x.start = 0;
	x.stop = 0;
	x.step = 1;
	x.list = NULL;
	x.mask = NULL;
	x.count = 0;
	x.tensor = NULL;
	return x;
}

/** @return the index `i` (negative counts from the end). */
static inline td_index td_index_int(int64_t i)
{
	td_index x = td__index_make(TD_INDEX_INT);
	x.start = i;
	return x;
}

/** @return the slice `start:stop:step`; pass TD_SLICE_NONE for an omitted bound. */
static inline td_index td_index_slice(int64_t start, int64_t stop, int64_t step)
{
	td_index x = td__index_make(TD_INDEX_SLICE);
	x.start = start;
	x.stop = stop;
	x.step = step;
	return x;
}

/** @return the full slice `:`. */
static inline td_index td_index_all(void)
{
	return td_index_slice(TD_SLICE_NONE, TD_SLICE_NONE, 1);
}

/** @return `range(start, stop, step)`: positions must lie in bounds. */
static inline td_index td_index_range(int64_t start, int64_t stop, int64_t step)
{
	td_index x = td__index_make(TD_INDEX_RANGE);
	x.start = start;
	x.stop = stop;
	x.step = step;
	return x;
}

/** @return `None` (a new axis of size 1). */
static inline td_index td_index_newaxis(void)
{
	return td__index_make(TD_INDEX_NEWAXIS);
}

/** @return `...`. */
static inline td_index td_index_ellipsis(void)
{
	return td__index_make(TD_INDEX_ELLIPSIS);
}

/** @return the position list `list[0..count)` (borrowed). */
static inline td_index td_index_list(const int64_t *list, int64_t count)
{
	td_index x = td__index_make(TD_INDEX_LIST);
	x.list = list;
	x.count = count;
	return x;
}

/** @return the boolean mask `mask[0..count)` over one dimension (borrowed). */
static inline td_index td_index_mask(const bool *mask, int64_t count)
{
	td_index x = td__index_make(TD_INDEX_MASK);
	x.mask = mask;
	x.count = count;
	return x;
}

/** @return an index tensor (integer positions, or a bool mask over tensor->ndim dims). */
static inline td_index td_index_tensor(const td_tensor *t)
{
	td_index x = td__index_make(TD_INDEX_TENSOR);
	x.tensor = t;
	return x;
}

/* ------------------------------------------------------------------------ */
/* Creation and release                                                      */
/* ------------------------------------------------------------------------ */

/**
 * A new contiguous tensor in a fresh heap buffer, contents unspecified.
 *
 * @param[out] out  receives the tensor; owned by the caller, release with
 *                  td_tensor_release()
 * @param dtype     element type
 * @param ndim      number of dims, 0..TD_MAX_DIMS (0 gives one element)
 * @param shape     `ndim` sizes, each >= 0 (may be NULL when ndim is 0)
 * @return TD_OK; TD_EINVAL (NULL out, bad dtype, ndim out of range,
 *         negative size); TD_EOVERFLOW; TD_ENOMEM
 */
TD_API int td_tensor_empty(td_tensor *out, td_dtype dtype, int ndim, const int64_t *shape);

/** As td_tensor_empty(), with every element zero. */
TD_API int td_tensor_zeros(td_tensor *out, td_dtype dtype, int ndim, const int64_t *shape);

/**
 * As td_tensor_empty(), with every element set to `value` converted to
 * `dtype` (see td_tensor_fill() for the conversion rules).
 */
TD_API int td_tensor_full(td_tensor *out, td_dtype dtype, int ndim, const int64_t *shape,
	td_scalar value);

/**
 * A new contiguous tensor holding a copy of `data`, which must hold
 * numel * td_dtype_size(dtype) bytes in C order.
 *
 * @return as td_tensor_empty(), plus TD_EINVAL if `data` is NULL while the
 *         tensor has elements
 */
TD_API int td_tensor_from_data(td_tensor *out, td_dtype dtype, int ndim, const int64_t *shape,
	const void *data);

/**
 * A view of an existing buffer (no copy). Takes a new reference to `buf`.
 *
 * @param[out] out  receives the view; release with td_tensor_release()
 * @param buf       the buffer
 * @param dtype     element type
 * @param ndim      number of dims
 * @param shape     sizes
 * @param strides   steps in elements (each >= 0), or NULL for C order
 * @param offset    first element, in elements
 * @return TD_OK; TD_EINVAL for bad arguments or negative strides/offset;
 *         TD_EINDEX if the view reaches beyond the buffer; TD_EOVERFLOW
 */
TD_API int td_tensor_from_buffer(td_tensor *out, td_buffer *buf, td_dtype dtype, int ndim,
	const int64_t *shape, const int64_t *strides, int64_t offset);

/** A new contiguous tensor with the dtype and shape of `t`, contents unspecified. */
TD_API int td_tensor_empty_like(td_tensor *out, const td_tensor *t);

/** A new contiguous zero tensor with the dtype and shape of `t`. */
TD_API int td_tensor_zeros_like(td_tensor *out, const td_tensor *t);

/**
 * Another reference to the same view: `*out` becomes a copy of `*t` holding
 * its own buffer reference. Cannot fail.
 */
TD_API void td_tensor_ref(td_tensor *out, const td_tensor *t);

/**
 * Drop the tensor's buffer reference and reset the value to an empty one
 * (buffer NULL, ndim 0, offset 0, float32), as TD_TENSOR_INIT. NULL and
 * already released tensors are accepted.
 */
TD_API void td_tensor_release(td_tensor *t);

/** Release `count` tensors and then the array itself (from td_tensor_unbind()). NULL is accepted. */
TD_API void td_tensor_array_free(td_tensor *tensors, size_t count);

/* ------------------------------------------------------------------------ */
/* Properties and element access                                             */
/* ------------------------------------------------------------------------ */

/** @return the number of elements (1 for a 0-d tensor). */
TD_API int64_t td_tensor_numel(const td_tensor *t);

/** @return numel * element size. */
TD_API size_t td_tensor_nbytes(const td_tensor *t);

/** @return true if the elements are laid out in C order without gaps. */
TD_API bool td_tensor_is_contiguous(const td_tensor *t);

/**
 * @return the address of the first element; borrowed, valid while the
 *         tensor holds its reference. NULL for a released tensor.
 */
TD_API void *td_tensor_data(const td_tensor *t);

/**
 * Read one element.
 *
 * @param[out] out   receives the value: BOOL for bool, INT for signed
 *                   integers, UINT for unsigned ones, FLOAT for floating
 *                   types, COMPLEX for complex types (read it as one C type
 *                   with td_scalar_as_double() and the other readers)
 * @param t          the tensor
 * @param index      t->ndim positions (negatives count from the end); may
 *                   be NULL for a 0-d tensor
 * @return TD_OK; TD_EINVAL; TD_EINDEX; TD_ENOTSUP for device memory
 */
TD_API int td_tensor_get(td_scalar *out, const td_tensor *t, const int64_t *index);

/**
 * Write one element, converting `value` to the tensor's dtype.
 *
 * @return TD_OK; TD_EINVAL; TD_EINDEX; TD_EREADONLY; TD_ENOTSUP
 */
TD_API int td_tensor_set(td_tensor *t, const int64_t *index, td_scalar value);

/* ------------------------------------------------------------------------ */
/* Indexing                                                                  */
/* ------------------------------------------------------------------------ */

/**
 * `t[idx[0], ..., idx[n-1]]` with numpy/torch semantics. Dimensions not
 * named by the expression are kept whole. Several advanced indices are
 * broadcast together; their result dimensions go where the first one was
 * when they are adjacent, and first otherwise.
 *
 * @param[out] out  receives a view (basic expression) or a new tensor
 *                  (any advanced element); release with td_tensor_release()
 * @param t         the tensor
 * @param idx       `n` index elements (may be NULL when n is 0)
 * @param n         their number
 * @return TD_OK; TD_EINVAL (malformed expression: two ellipses, zero step,
 *         non-integer index tensor); TD_EINDEX (position out of range, too
 *         many indices, mask size mismatch); TD_ETYPE (advanced indices that
 *         do not broadcast); TD_ENOMEM; TD_ENOTSUP (device memory, advanced)
 */
TD_API int td_tensor_index(td_tensor *out, const td_tensor *t, const td_index *idx, size_t n);

/**
 * `t[idx...] = value`: write `value`, broadcast to the indexed shape and
 * converted to t's dtype, into the selected elements. With repeated
 * positions in an advanced index the last write wins.
 *
 * @return as td_tensor_index(), plus TD_ETYPE if `value` does not
 *         broadcast, TD_EREADONLY
 */
TD_API int td_tensor_index_put(td_tensor *t, const td_index *idx, size_t n, const td_tensor *value);

/** `t[idx...] = value` for a scalar. Errors as td_tensor_index_put(). */
TD_API int td_tensor_index_fill(td_tensor *t, const td_index *idx, size_t n, td_scalar value);

/** The view `t[..., index, ...]` at dimension `dim`, which is removed. TD_EINDEX when out of range. */
TD_API int td_tensor_select(td_tensor *out, const td_tensor *t, int dim, int64_t index);

/**
 * The view of `length` positions starting at `start` along `dim`.
 * TD_EINDEX when [start, start + length) is not inside the dimension.
 */
TD_API int td_tensor_narrow(td_tensor *out, const td_tensor *t, int dim, int64_t start,
	int64_t length);

/* ------------------------------------------------------------------------ */
/* Shape operations (views unless stated)                                    */
/* ------------------------------------------------------------------------ */

/**
 * The same elements with a new shape. A view when the strides allow it
 * (torch's rule), else a contiguous copy. One size may be -1 (inferred).
 *
 * @return TD_OK; TD_EINVAL (bad ndim, several -1, negative size); TD_ETYPE
 *         (element count differs); TD_ENOMEM
 */
TD_API int td_tensor_reshape(td_tensor *out, const td_tensor *t, int ndim, const int64_t *shape);

/** As td_tensor_reshape() but never copies: TD_ETYPE when no view is possible. */
TD_API int td_tensor_view(td_tensor *out, const td_tensor *t, int ndim, const int64_t *shape);

/** Insert a dimension of size 1 at `dim` (-ndim-1 <= dim <= ndim). */
TD_API int td_tensor_unsqueeze(td_tensor *out, const td_tensor *t, int dim);

/** Remove dimension `dim` if its size is 1; otherwise the view is unchanged (torch's rule). */
TD_API int td_tensor_squeeze(td_tensor *out, const td_tensor *t, int dim);

/** Remove every dimension of size 1. */
TD_API int td_tensor_squeeze_all(td_tensor *out, const td_tensor *t);

/**
 * Reorder the dimensions: result dim i is input dim `dims[i]`.
 *
 * @param dims  t->ndim distinct dims (negatives allowed)
 * @return TD_OK; TD_EINVAL if `dims` is not a permutation
 */
TD_API int td_tensor_permute(td_tensor *out, const td_tensor *t, const int *dims);

/** Swap dimensions `dim0` and `dim1`. */
TD_API int td_tensor_transpose(td_tensor *out, const td_tensor *t, int dim0, int dim1);

/**
 * Broadcast to `shape` without copying (stride 0 on expanded dims). New
 * leading dims may be added; -1 keeps a size; only size-1 dims grow.
 *
 * @return TD_OK; TD_EINVAL; TD_ETYPE when a dim cannot be expanded
 */
TD_API int td_tensor_expand(td_tensor *out, const td_tensor *t, int ndim, const int64_t *shape);

/**
 * Views of each position along `dim` (which is removed).
 *
 * @param[out] tensors_out  receives an array of `*count_out` views; owned
 *                          by the caller, release with td_tensor_array_free()
 * @param[out] count_out    receives the size of dimension `dim`
 * @return TD_OK; TD_EINVAL; TD_ENOMEM
 */
TD_API int td_tensor_unbind(td_tensor **tensors_out, size_t *count_out, const td_tensor *t,
	int dim);

/**
 * Join tensors of equal shape along a new dimension `dim` (a copy).
 *
 * @param tensors  `n` tensors (n >= 1) of identical shape; dtypes are promoted
 * @return TD_OK; TD_EINVAL; TD_ETYPE (shapes differ); TD_ENOMEM
 */
TD_API int td_tensor_stack(td_tensor *out, const td_tensor *tensors, size_t n, int dim);

/**
 * Join tensors along the existing dimension `dim` (a copy). All other
 * dimensions must agree; dtypes are promoted.
 */
TD_API int td_tensor_cat(td_tensor *out, const td_tensor *tensors, size_t n, int dim);

/* ------------------------------------------------------------------------ */
/* Copies and conversion                                                     */
/* ------------------------------------------------------------------------ */

/** `t` itself (a new reference) when contiguous, else a contiguous copy. */
TD_API int td_tensor_contiguous(td_tensor *out, const td_tensor *t);

/** A contiguous copy of `t` in a new heap buffer. */
TD_API int td_tensor_clone(td_tensor *out, const td_tensor *t);

/**
 * `t` converted to `dtype`: a new reference to `t` when the dtype is
 * already `dtype`, otherwise a new contiguous tensor. Conversions follow
 * torch: to bool, nonzero is true; float to integer truncates toward
 * zero and, where C leaves it undefined, is defined here: NaN gives 0 and
 * out-of-range values saturate; complex to real drops the imaginary part;
 * float16/bfloat16 round to nearest even.
 */
TD_API int td_tensor_to_dtype(td_tensor *out, const td_tensor *t, td_dtype dtype);

/**
 * Copy `src` into `dst` in place: `src` is broadcast to dst's shape and
 * converted to dst's dtype. Overlapping `src` and `dst` are handled.
 *
 * @return TD_OK; TD_EINVAL; TD_ETYPE (src does not broadcast);
 *         TD_EREADONLY; TD_ENOTSUP (device memory); TD_ENOMEM
 */
TD_API int td_tensor_copy(td_tensor *dst, const td_tensor *src);

/* ------------------------------------------------------------------------ */
/* Elementwise operations                                                    */
/* ------------------------------------------------------------------------ */

/** Binary elementwise operations. */
typedef enum td_binop {
	TD_OP_ADD = 0,
	TD_OP_SUB = 1,
	TD_OP_MUL = 2,
	TD_OP_DIV = 3, /**< true division: integer inputs give float32, as torch */
	TD_OP_EQ = 4,  /**< equality: result is bool */
	TD_OP_NE = 5   /**< inequality: result is bool */
} td_binop;

/**
 * `a <op> b` elementwise with broadcasting, into a new contiguous tensor of
 * the promoted dtype (td_dtype_promote(); bool for EQ/NE; float32 for DIV
 * of integers). Integer arithmetic wraps around; integer operations never
 * trap. SUB of bool tensors is refused, as in torch.
 *
 * @return TD_OK; TD_EINVAL (NULL, bad op); TD_ETYPE (shapes do not
 *         broadcast, bool SUB); TD_ENOTSUP; TD_ENOMEM
 */
TD_API int td_tensor_binary(td_tensor *out, const td_tensor *a, const td_tensor *b, td_binop op);

/**
 * `a <op> s` elementwise. As torch, a scalar of a higher category than `a`
 * (a float with an integer tensor, say) counts as float32 (complex64 for a
 * complex scalar) and is promoted with a's dtype (so a complex scalar with
 * a float64 tensor gives complex128); otherwise the result keeps a's dtype.
 * Signed and unsigned integers are one category, as in torch.
 */
TD_API int td_tensor_binary_scalar(td_tensor *out, const td_tensor *a, td_scalar s, td_binop op);

/**
 * `a <op>= b` in place; `b` is broadcast to a's shape. The result must be
 * representable in a's dtype category (an integer tensor cannot receive a
 * float result): TD_ETYPE otherwise, as torch. EQ/NE are refused, and so
 * is an `a` expanded along a dim (stride 0: several elements share one
 * location): TD_EINVAL.
 */
TD_API int td_tensor_binary_inplace(td_tensor *a, const td_tensor *b, td_binop op);

/** `a <op>= s` in place; the rules of td_tensor_binary_inplace() apply. */
TD_API int td_tensor_binary_scalar_inplace(td_tensor *a, td_scalar s, td_binop op);

/** Set every element to `value`, converted as in td_tensor_to_dtype(). */
TD_API int td_tensor_fill(td_tensor *t, td_scalar value);

/** Set every element to zero. */
TD_API int td_tensor_zero(td_tensor *t);

/**
 * Whether `a` and `b` have the same shape and equal elements (compared
 * after promotion; NaN is not equal to NaN).
 *
 * @return 1 if equal, 0 if not, a negative td_status on error (TD_EINVAL,
 *         TD_ENOTSUP)
 */
TD_API int td_tensor_equal(const td_tensor *a, const td_tensor *b);

/**
 * Whether |a - b| <= atol + rtol * |b| holds for every element (a and b
 * broadcast together), as torch.allclose; dtypes may differ (compared in
 * float64 / complex128).
 *
 * @return 1, 0, or a negative td_status (TD_ETYPE when shapes do not
 *         broadcast; TD_EINVAL for a negative or NaN tolerance)
 */
TD_API int td_tensor_allclose(const td_tensor *a, const td_tensor *b, double rtol, double atol,
	bool equal_nan);

TD_END_DECLS

#endif /* TDSTORE_TENSOR_H */
