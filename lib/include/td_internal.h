/* SPDX-License-Identifier: MIT */
/*
 * td_internal.h - what every library source includes first: config.h, the
 * public API, error and allocation helpers, overflow-checked arithmetic,
 * and the few lib/ internals the layers above use. Never installed; td__
 * names are never exported.
 *
 * It is alone in lib/include/, the only lib/ directory on the include path
 * of storage/ (lib/local.mk, storage/local.mk): lib/'s private headers
 * (*_impl.h), with the layouts of td_buffer and td_dict, stay out of reach.
 */
#ifndef TD_INTERNAL_H
#define TD_INTERNAL_H

#include "config.h"

#include <tdstore.h>

#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

#define TD_LIKELY(x) __builtin_expect(!!(x), 1)
#define TD_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define TD_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define TD_HIDDEN __attribute__((visibility("hidden")))
#else
#define TD_PRINTF(fmt, args)
#define TD_HIDDEN
#endif

/* ------------------------------------------------------------------------ */
/* Errors (error.c)                                                          */
/* ------------------------------------------------------------------------ */

/**
 * Record `code` with a formatted message as the calling thread's last
 * error and return `code`, so that `return td__error(TD_EINVAL, "...")`
 * reports and fails in one line.
 */
int td__error(int code, const char *fmt, ...) TD_PRINTF(2, 3);

/** As td__error() and also record `sys_errno`; the message gets strerror appended. */
int td__error_os(int code, int sys_errno, const char *fmt, ...) TD_PRINTF(3, 4);

/** Map an errno value to the closest td_status (ENOMEM -> TD_ENOMEM, ENOSPC -> TD_ENOSPC, ...). */
int td__status_from_errno(int err);

/** Evaluate a td_status expression; return it from the caller if negative. */
#define TD_TRY(expr) \
	do { \
		int td__rc_ = (expr); \
		if (TD_UNLIKELY(td__rc_ < 0)) \
			return td__rc_; \
	} while (0)

/** Report TD_EINVAL for a NULL argument. */
#define TD_CHECK_ARG(cond) \
	do { \
		if (TD_UNLIKELY(!(cond))) \
			return td__error(TD_EINVAL, "%s: invalid argument (%s)", __func__, #cond); \
	} while (0)

/* ------------------------------------------------------------------------ */
/* Allocation (alloc.c): every allocation goes through these.                */
/* ------------------------------------------------------------------------ */

void *td__malloc(size_t size);
void *td__calloc(size_t count, size_t size);
void *td__realloc(void *ptr, size_t size);
/** Memory aligned to `alignment` (a power of two); release with td__free(). */
void *td__aligned_alloc(size_t alignment, size_t size);
void td__free(void *ptr);
/**
 * Small blocks of a known size (dict nodes, key strings, small heap
 * buffers): served from a per-thread cache while the default allocator is
 * in use. A block from td__alloc_small(size) must be released with
 * td__free_small(ptr, size) and the same size.
 */
void *td__alloc_small(size_t size);
void td__free_small(void *ptr, size_t size);
/**
 * n blocks of `size` bytes into out[0..n-1], as n calls of
 * td__alloc_small(size) (each released with td__free_small()), the cached
 * ones taken in one pass. false when memory runs out: then none is left.
 */
bool td__alloc_small_n(void **out, size_t n, size_t size);

/** A copy of `len` bytes of `s` plus a NUL; NULL on allocation failure. */
char *td__strndup(const char *s, size_t len);

/** Report TD_ENOMEM (with the size) and return it. */
int td__error_nomem(size_t size);

/* ------------------------------------------------------------------------ */
/* Overflow-checked arithmetic: true on success, false on overflow.          */
/* ------------------------------------------------------------------------ */

static inline bool td__mul_size(size_t a, size_t b, size_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

static inline bool td__add_size(size_t a, size_t b, size_t *out)
{
	return !__builtin_add_overflow(a, b, out);
}

static inline bool td__mul_i64(int64_t a, int64_t b, int64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

static inline bool td__add_i64(int64_t a, int64_t b, int64_t *out)
{
	return !__builtin_add_overflow(a, b, out);
}

/* ------------------------------------------------------------------------ */
/* Formatting helpers for messages                                           */
/* ------------------------------------------------------------------------ */

/** Write "[3, 4, 5]" into buf (truncated to len). @return buf. */
char *td__format_shape(char *buf, size_t len, int ndim, const int64_t *shape);

/** Size of a buffer that td__format_shape() never truncates. */
#define TD_SHAPE_STR_LEN (TD_MAX_DIMS * 22 + 4)

/* ------------------------------------------------------------------------ */
/* lib/ internals the layers above use (storage/)                            */
/* ------------------------------------------------------------------------ */

/**
 * Check that `t` is a usable tensor (non-NULL, holds a buffer, valid
 * dtype/ndim/shape, extent inside its buffer). `what` names it in messages.
 * (tensor.c)
 */
int td__tensor_check(const td_tensor *t, const char *fn, const char *what);

/** td__tensor_check() plus: the CPU may read it (not device memory). */
int td__tensor_check_read(const td_tensor *t, const char *fn, const char *what);

/**
 * Validate a shape given by the caller and compute its element count and
 * byte size for `dtype` (TD_EINVAL, TD_EOVERFLOW). (tensor.c)
 */
int td__shape_check(int ndim, const int64_t *shape, td_dtype dtype, int64_t *numel_out,
	size_t *nbytes_out, const char *fn);

/** C-order strides (elements) of a shape. (tensor.c) */
void td__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);

/**
 * Set t->ndim and give `t`, a new tensor value, the dims of a C-contiguous
 * tensor of `shape` (validated): in the struct, or above
 * TD_TENSOR_INLINE_DIMS in a new block that `t` then holds, which
 * td_tensor_release() drops once `t` holds a buffer and
 * td__tensor_dims_drop() before. TD_ENOMEM (only for a new block). (tensor.c)
 */
int td__tensor_contiguous_dims(td_tensor *t, int ndim, const int64_t *shape, const char *fn);

/** Drop the dims of a tensor value that holds no buffer; t->ndim becomes 0. (tensor.c) */
void td__tensor_dims_drop(td_tensor *t);

/**
 * Copy `src` into `dst` (same shape after broadcasting `src`), converting
 * dtypes. No argument checks and no overlap handling: internal callers use
 * it on validated, non-overlapping tensors. (tensor_copy.c)
 */
int td__copy_unchecked(const td_tensor *dst, const td_tensor *src, const char *fn);

/** Whether s[0..len) is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF). (strings.c) */
bool td__utf8_valid(const unsigned char *s, size_t len);

/**
 * Whether `buf` was made by td_buffer_wrap() with the release hook
 * `release`; if so, its payload goes to `*payload_out`. The code that made
 * a kind of buffer recognizes its own this way (shared memory: storage/).
 * (buffer.c)
 */
bool td__buffer_hooked(const td_buffer *buf, td_buffer_release_fn release, void **payload_out);

#endif /* TD_INTERNAL_H */
