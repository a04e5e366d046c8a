/* SPDX-License-Identifier: MIT */
/*
 * tdstore/alloc.h - plug in the allocator behind every heap allocation the
 * library makes (dict nodes, keys, heap tensor buffers, iterators).
 */
#ifndef TDSTORE_ALLOC_H
#define TDSTORE_ALLOC_H

#include "common.h"

TD_BEGIN_DECLS

/** Current version of td_allocator; set `version` to it. */
#define TD_ALLOCATOR_VERSION 1

/**
 * A set of allocation functions. All four functions are required. Each
 * receives `payload` as its last argument. `aligned_alloc` must return
 * memory aligned to `alignment` (a power of two, at most 4096) that
 * `free` releases. Returning NULL makes the calling tdstore function fail
 * with TD_ENOMEM and leave its arguments unchanged.
 */
typedef struct td_allocator {
	unsigned version;
	void *(*malloc)(size_t size, void *payload);
	void *(*realloc)(void *ptr, size_t size, void *payload);
	void *(*aligned_alloc)(size_t alignment, size_t size, void *payload);
	void (*free)(void *ptr, void *payload);
	void *payload;
} td_allocator;

/**
 * Replace the allocator used by the library.
 *
 * Call it before any other tdstore call, or when no tdstore object is
 * alive: memory is released with whichever allocator is current when it is
 * released, so objects must not outlive the allocator that made them.
 * Not thread-safe with respect to concurrent tdstore calls. While the
 * default allocator is in use, the library keeps a small per-thread cache
 * of freed small blocks; a caller's allocator sees every allocation.
 *
 * @param alloc  the allocator (copied), or NULL to restore the C library's
 * @return TD_OK; TD_EINVAL if a function pointer is NULL or `version` is
 *         not TD_ALLOCATOR_VERSION
 */
TD_API int td_set_allocator(const td_allocator *alloc);

/**
 * Release memory that a tdstore function documents as "owned by the
 * caller; release with td_free()" (for instance the arrays returned by
 * td_tensor_unbind() and td_dict_unbind() after their elements were
 * released). NULL is accepted.
 */
TD_API void td_free(void *ptr);

TD_END_DECLS

#endif /* TDSTORE_ALLOC_H */
