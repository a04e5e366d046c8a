/* SPDX-License-Identifier: MIT */
/*
 * tdstore/buffer.h - reference-counted spans of bytes that tensors view.
 *
 * A buffer has a memory kind (heap, file mapping, anonymous shared memory, pinned
 * host, device, external) and a release hook run when its last reference
 * goes. Tensors hold a reference to their buffer, so a view keeps its bytes
 * alive; a file-mapping buffer keeps its mapping alive. References may be
 * taken and dropped from any thread.
 */
#ifndef TDSTORE_BUFFER_H
#define TDSTORE_BUFFER_H

#include "common.h"

TD_BEGIN_DECLS

typedef struct td_buffer td_buffer;

/** Where a buffer's bytes live. */
typedef enum td_memory {
	TD_MEMORY_HEAP = 0,    /**< host memory from the library allocator, 64-byte aligned */
	TD_MEMORY_FILE = 1,    /**< a memory-mapped file */
	TD_MEMORY_SHM = 2,     /**< anonymous shared memory (memfd), shareable across processes */
	TD_MEMORY_PINNED = 3,  /**< page-locked host memory registered with a GPU runtime */
	TD_MEMORY_DEVICE = 4,  /**< GPU memory: not addressable by the CPU */
	TD_MEMORY_EXTERNAL = 5 /**< host memory owned by the caller, released by a hook */
} td_memory;

/** Buffer flag: the bytes must not be written (read-only mapping, constant data). */
#define TD_BUFFER_READONLY 0x1u
/** td_buffer_new() flag: zero the bytes. */
#define TD_BUFFER_ZEROED 0x2u

/** Alignment in bytes of every heap buffer's data. */
#define TD_BUFFER_ALIGNMENT 64

/**
 * Called once when the last reference to a wrapped buffer is dropped.
 *
 * @param data     the buffer's data pointer
 * @param nbytes   the buffer's size
 * @param payload  the payload given to td_buffer_wrap()
 */
typedef void (*td_buffer_release_fn)(void *data, size_t nbytes, void *payload);

/** Current version of td_buffer_wrap_opts. */
#define TD_BUFFER_WRAP_OPTS_VERSION 1

/** How td_buffer_wrap() describes foreign memory. Fields are only appended. */
typedef struct td_buffer_wrap_opts {
	unsigned version;             /**< TD_BUFFER_WRAP_OPTS_VERSION */
	td_memory memory;             /**< default TD_MEMORY_EXTERNAL */
	unsigned flags;               /**< TD_BUFFER_READONLY or 0 */
	int device;                   /**< device ordinal for TD_MEMORY_DEVICE, else -1 */
	td_buffer_release_fn release; /**< may be NULL: nothing to release */
	void *payload;                /**< passed to `release` */
} td_buffer_wrap_opts;

/** Initializer for td_buffer_wrap_opts: external host memory, writable, no hook. */
#define TD_BUFFER_WRAP_OPTS_INIT \
	{ \
		TD_BUFFER_WRAP_OPTS_VERSION, TD_MEMORY_EXTERNAL, 0u, -1, NULL, NULL \
	}

/**
 * Allocate a heap buffer of `nbytes` bytes aligned to TD_BUFFER_ALIGNMENT.
 *
 * @param[out] out  receives the buffer with one reference; owned by the
 *                  caller, release with td_buffer_unref(). NULL on failure.
 * @param nbytes    size in bytes (0 is allowed and gives an empty buffer)
 * @param flags     TD_BUFFER_ZEROED to zero the bytes, or 0
 * @return TD_OK; TD_EINVAL if `out` is NULL or `flags` has unknown bits;
 *         TD_ENOMEM; TD_EOVERFLOW if `nbytes` is too large to allocate
 */
TD_API int td_buffer_new(td_buffer **out, size_t nbytes, unsigned flags);

/**
 * Wrap memory the library did not allocate (a mapping, pinned or device
 * memory, a caller's array). The buffer does not copy the bytes; `release`
 * runs when the last reference is dropped.
 *
 * @param[out] out  receives the buffer with one reference; owned by the
 *                  caller, release with td_buffer_unref(). NULL on failure,
 *                  in which case `release` is not called.
 * @param data      the bytes; may be NULL only when `nbytes` is 0
 * @param nbytes    their size
 * @param opts      description, or NULL for TD_BUFFER_WRAP_OPTS_INIT
 * @return TD_OK; TD_EINVAL for NULL `out`, NULL `data` with a nonzero size,
 *         an unknown memory kind, flag or version, TD_MEMORY_HEAP (heap
 *         buffers come from td_buffer_new()), or a device ordinal that does
 *         not fit the memory kind (>= 0 for device memory, -1 otherwise); TD_ENOMEM
 */
TD_API int td_buffer_wrap(td_buffer **out, void *data, size_t nbytes,
	const td_buffer_wrap_opts *opts);

/**
 * Take one more reference.
 *
 * @param buf  a buffer, or NULL
 * @return `buf`
 */
TD_API td_buffer *td_buffer_ref(td_buffer *buf);

/** Drop one reference; the last one frees the buffer (or runs its hook). NULL is accepted. */
TD_API void td_buffer_unref(td_buffer *buf);

/** @return the first byte (borrowed; valid while a reference is held); NULL for NULL. */
TD_API void *td_buffer_data(const td_buffer *buf);

/** @return the size in bytes; 0 for NULL. */
TD_API size_t td_buffer_size(const td_buffer *buf);

/** @return where the bytes live (the buffer's memory kind); TD_MEMORY_HEAP for NULL. */
TD_API td_memory td_buffer_memory(const td_buffer *buf);

/** @return the TD_BUFFER_READONLY flag or 0; 0 for NULL. */
TD_API unsigned td_buffer_flags(const td_buffer *buf);

/** @return the device ordinal of a TD_MEMORY_DEVICE buffer, -1 otherwise. */
TD_API int td_buffer_device(const td_buffer *buf);

/** @return the current number of references (for diagnostics); 0 for NULL. */
TD_API uint32_t td_buffer_refcount(const td_buffer *buf);

TD_END_DECLS

#endif /* TDSTORE_BUFFER_H */
