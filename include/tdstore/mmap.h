/* SPDX-License-Identifier: MIT */
/*
 * tdstore/mmap.h - memory-mapped tensors on their own (tensordict's
 * MemoryMappedTensor) and tensors and dicts in anonymous shared memory.
 *
 * A memory-mapped tensor views one raw file: C-ordered, little-endian, no
 * header, exactly as a leaf file of a store directory (and as numpy.memmap
 * or MemoryMappedTensor.from_filename read it). The file is mapped
 * MAP_SHARED: writes reach the file and every process that maps it.
 *
 * An anonymous shared-memory tensor lives in a memfd (memfd_create(2))
 * instead of a named file. It is shared with children made by fork() (the
 * mapping is inherited), and with any process that receives its descriptor
 * (td_shm_tensor_fd(), then SCM_RIGHTS over a Unix socket, then
 * td_shm_tensor_from_fd() on the other side).
 *
 * The shared-memory arena: a tensor of at most td_shm_arena_stat()'s
 * `max_bytes` (TD_SHM_ARENA_MAX_DEFAULT, 64 KiB, unless tuned) does not get
 * a memfd of its own. It is a block of a per-process arena chunk: one
 * memfd of at least 256 KiB, mapped once, cut into blocks of one
 * power-of-two size (64 bytes at least, so every block is 64-byte
 * aligned). The block goes back to the chunk when the tensor's buffer is
 * released, and the chunk is unmapped (and its memfd closed) when its last
 * block is released, except that one empty chunk per block size is kept
 * for the next tensor (td_shm_arena_trim() unmaps those). The arena is safe
 * to use from any thread. Rules that follow from sharing a memfd:
 * - td_shm_tensor_fd() gives the chunk's memfd and the tensor's offset in
 *   it. The descriptor gives access to the whole chunk: a receiver that
 *   maps it (td_shm_tensor_from_fd() maps from byte 0 of the memfd to the
 *   tensor's end) can read and write every arena tensor of the sender in
 *   that range, present and future. Pass arena tensors only to processes
 *   trusted with them, or turn the arena off. A block whose descriptor was
 *   asked for is never handed out again by this process, so the receiver's
 *   view never aliases a later tensor of the sender.
 * - fork(): the child shares the chunks' pages with the parent, as with
 *   one memfd per tensor. A block made before the fork is never handed
 *   out again, in the parent or in the child (the other process may still
 *   use it); tensors made after the fork come from new chunks, private to
 *   the process that made them until shared again. Each process unmaps an
 *   older chunk when it releases its own last tensor in it.
 * - td_mmap_tensor_empty() may give a block that held an earlier tensor of
 *   this process (its contents are unspecified, as documented);
 *   td_mmap_tensor_zeros() zeroes such a block.
 * Tuning: the environment variable TDSTORE_SHM_ARENA_MAX, read at the
 * first arena use, sets `max_bytes` (decimal bytes; 0 turns the arena off,
 * so every tensor gets a memfd of its own; values above
 * TD_SHM_ARENA_MAX_LIMIT are clamped to it; anything else is ignored), and
 * td_shm_arena_set_max() changes it at run time.
 *
 * Lifetimes: each tensor holds a reference to a buffer that owns the
 * mapping (kind TD_MEMORY_FILE for files, TD_MEMORY_SHM for memfds, which
 * also keeps the memfd open). Views of the tensor (td_tensor_ref(),
 * indexing) hold the same buffer; the mapping is unmapped, and the memfd
 * closed, when the last of them is released. A file is never truncated by
 * these functions; truncating it behind tdstore's back while it is mapped
 * makes access to the lost pages fault (SIGBUS), as with any mapping.
 *
 * Nothing here calls fsync: data written to a file mapping reaches the disk
 * when the kernel writes it back, or when the caller calls msync(2) on
 * td_tensor_data().
 */
#ifndef TDSTORE_MMAP_H
#define TDSTORE_MMAP_H

#include "common.h"
#include "dict.h"
#include "tensor.h"

TD_BEGIN_DECLS

/** Current version of td_mmap_opts; set `version` to it. */
#define TD_MMAP_OPTS_VERSION 1

/**
 * How the calls of this header make or map a tensor. Each call reads the
 * fields that apply to it and ignores the others, as it documents. Fields
 * are only appended.
 */
typedef struct td_mmap_opts {
	unsigned version; /**< TD_MMAP_OPTS_VERSION */
	/**
	 * calls that make a file (td_mmap_tensor_empty() and the others with a
	 * `path`): reuse an existing regular file at `path` (tensordict's
	 * existsok=True), grown when shorter than the tensor and never
	 * truncated; default false: an existing file is an error
	 */
	bool exist_ok;
	/**
	 * calls that map what exists (td_mmap_tensor_from_file(),
	 * td_shm_tensor_from_fd()): map writable; default false: read-only
	 */
	bool writable;
} td_mmap_opts;

/** Initializer for td_mmap_opts: no file reused, existing files mapped read-only. */
#define TD_MMAP_OPTS_INIT \
	{ \
		TD_MMAP_OPTS_VERSION, false, false \
	}

/**
 * A new memory-mapped tensor, contents unspecified (tensordict's
 * MemoryMappedTensor.empty).
 *
 * With a `path`, the file is created (O_CREAT | O_EXCL | O_NOFOLLOW, mode
 * 0666 before the umask) and its full size reserved with posix_fallocate(),
 * so that a full disk fails here with TD_ENOSPC rather than later with
 * SIGBUS; a new file reads as zeros, a reused one keeps its bytes. A tensor
 * without elements maps nothing, but its file is still created (empty).
 *
 * With `path` NULL, the tensor lives in anonymous shared memory and its
 * buffer has the kind TD_MEMORY_SHM: a block of the shared-memory arena
 * when it is small enough (see the top of this header; a recycled block
 * keeps an earlier tensor's bytes), else a new zero-filled memfd.
 *
 * @param[out] out  receives a contiguous, writable tensor; owned by the
 *                  caller, release with td_tensor_release(); written
 *                  only on success
 * @param path      the file, or NULL for anonymous shared memory
 * @param dtype     element type
 * @param ndim      number of dims, 0..TD_MAX_DIMS (0 gives one element)
 * @param shape     `ndim` sizes, each >= 0 (may be NULL when ndim is 0)
 * @param opts      NULL for the defaults (TD_MMAP_OPTS_INIT), or options
 *                  whose `version` is TD_MMAP_OPTS_VERSION; `exist_ok`
 *                  applies (to a `path`), `writable` is ignored (the
 *                  tensor is writable)
 * @return TD_OK;
 *         TD_EINVAL (NULL out, an unknown options version, bad dtype, ndim
 *         or size);
 *         TD_EOVERFLOW (the byte size overflows);
 *         TD_EEXISTS (`path` exists and `exist_ok` is not set);
 *         TD_ECORRUPT (`path` is a symbolic link or not a regular file);
 *         TD_ENOTFOUND (the parent directory does not exist);
 *         TD_EREADONLY (the file cannot be written);
 *         TD_ENOSPC; TD_EIO; TD_ENOMEM.
 *         A file this call created is removed again on failure.
 */
TD_API int td_mmap_tensor_empty(td_tensor *out, const char *path, td_dtype dtype, int ndim,
	const int64_t *shape, const td_mmap_opts *opts);

/**
 * As td_mmap_tensor_empty(), with every element zero (a reused file, or a
 * recycled arena block, is overwritten with zeros).
 */
TD_API int td_mmap_tensor_zeros(td_tensor *out, const char *path, td_dtype dtype, int ndim,
	const int64_t *shape, const td_mmap_opts *opts);

/**
 * As td_mmap_tensor_empty(), with every element set to `value` converted to
 * `dtype` (see td_tensor_fill() for the conversion rules).
 */
TD_API int td_mmap_tensor_full(td_tensor *out, const char *path, td_dtype dtype, int ndim,
	const int64_t *shape, td_scalar value, const td_mmap_opts *opts);

/**
 * A new memory-mapped tensor holding a copy of `src` in C order
 * (tensordict's MemoryMappedTensor.from_tensor), whatever the strides of
 * `src`. The file (or memfd) is made as by td_mmap_tensor_empty().
 *
 * @param[out] out  receives the tensor; release with td_tensor_release()
 * @param path      the file, or NULL for anonymous shared memory
 * @param src       the tensor to copy (borrowed; CPU memory)
 * @param opts      as for td_mmap_tensor_empty()
 * @return as td_mmap_tensor_empty(), plus TD_EINVAL for a NULL or invalid
 *         `src` and TD_ENOTSUP for one in device memory (both checked before
 *         any file is made). `out` may be `src`: its old reference is then
 *         released on success.
 */
TD_API int td_mmap_tensor_from_tensor(td_tensor *out, const char *path, const td_tensor *src,
	const td_mmap_opts *opts);

/**
 * Map an existing file as a tensor of the given dtype and shape, from its
 * first byte (tensordict's MemoryMappedTensor.from_filename). The file may
 * be longer than the tensor; the rest is not mapped. A shape without
 * elements needs no file and maps nothing.
 *
 * @param[out] out  receives the tensor (read-only unless `writable`);
 *                  release with td_tensor_release()
 * @param path      the file (symbolic links are refused)
 * @param dtype     element type
 * @param ndim      number of dims
 * @param shape     sizes
 * @param opts      NULL for the defaults (TD_MMAP_OPTS_INIT: read-only),
 *                  or options whose `version` is TD_MMAP_OPTS_VERSION;
 *                  `writable` applies, `exist_ok` is ignored
 * @return TD_OK;
 *         TD_EINVAL (NULL out or path, an unknown options version, bad
 *         dtype, ndim or size);
 *         TD_EOVERFLOW (the byte size overflows);
 *         TD_ENOTFOUND (no such file);
 *         TD_ECORRUPT (the file is shorter than the tensor, a symbolic link,
 *         or not a regular file);
 *         TD_EREADONLY (`writable` on a file that cannot be written);
 *         TD_EIO; TD_ENOMEM
 */
TD_API int td_mmap_tensor_from_file(td_tensor *out, const char *path, td_dtype dtype, int ndim,
	const int64_t *shape, const td_mmap_opts *opts);

/**
 * The memfd behind an anonymous shared-memory tensor, to pass to another
 * process (SCM_RIGHTS) which maps it with td_shm_tensor_from_fd().
 *
 * For a tensor of the shared-memory arena this is the arena chunk's memfd,
 * shared by other tensors of this process, and the offset is the tensor's
 * place in the chunk: a receiver must use the offset, never assume 0. The
 * tensor's block is then marked exported: it is never handed out again by
 * this process, even after the tensor is released (the chunk is still
 * unmapped once none of its blocks is in use here). The receiver's mapping
 * covers the chunk up to the tensor's end (see the top of this header).
 *
 * @param[out] fd_out      receives the descriptor (>= 0; -1 on failure):
 *                         borrowed, valid while a reference to the
 *                         tensor's buffer is held (dup(2) it to keep it
 *                         longer; do not close it)
 * @param[out] offset_out  receives the byte offset of the tensor's first
 *                         element in the memfd (0 on failure); may be NULL
 * @param t                a tensor from td_mmap_tensor_*() with a NULL
 *                         path, td_shm_tensor_from_fd() or td_shm_dict(),
 *                         or a view of one
 * @return TD_OK; TD_EINVAL for a NULL `fd_out` or `t`, a released tensor,
 *         or a tensor that is not in tdstore's anonymous shared memory (an
 *         arena block is marked exported only on success)
 *
 * Thread-safe: may be called while other threads make and release arena
 * tensors.
 */
TD_API int td_shm_tensor_fd(int *fd_out, uint64_t *offset_out, const td_tensor *t);

/**
 * Map shared memory received from another process (or any regular file
 * descriptor) as a C-contiguous tensor that starts `offset` bytes into it.
 * The descriptor is duplicated (the caller keeps and closes its own); the
 * tensor's buffer has the kind TD_MEMORY_SHM and td_shm_tensor_fd() works
 * on it. The bytes [0, offset + nbytes) are mapped.
 *
 * @param[out] out  receives the tensor (read-only unless `writable`);
 *                  release with td_tensor_release()
 * @param fd        the descriptor (not consumed)
 * @param dtype     element type
 * @param ndim      number of dims
 * @param shape     sizes
 * @param offset    byte offset of the first element, a multiple of the
 *                  element size
 * @param opts      as for td_mmap_tensor_from_file()
 * @return TD_OK;
 *         TD_EINVAL (NULL out, negative fd or one that is not open, an
 *         unknown options version, bad dtype, ndim or size, misaligned
 *         offset);
 *         TD_EOVERFLOW (the byte size or offset + size overflows);
 *         TD_ECORRUPT (the memory is shorter than offset + size, or the
 *         descriptor is not a regular file or memfd);
 *         TD_EREADONLY (`writable` on a descriptor not open for writing);
 *         TD_EIO; TD_ENOMEM
 */
TD_API int td_shm_tensor_from_fd(td_tensor *out, int fd, td_dtype dtype, int ndim,
	const int64_t *shape, uint64_t offset, const td_mmap_opts *opts);

/**
 * A copy of `src` whose tensors all live in ONE span of anonymous shared
 * memory (one block of the shared-memory arena when the leaves fit in
 * `max_bytes`, else a new memfd of their own), each leaf C-contiguous and
 * 64-byte aligned inside it: a child made by fork() after
 * this call shares every tensor with the parent (writes on either side are
 * seen by the other). Nested dicts, batch shapes and string and bytes
 * leaves are copied as td_dict_clone() copies them (those stay private to
 * each process).
 *
 * To share the dict with an unrelated process instead, pass the memfd
 * (td_shm_tensor_fd() of any leaf gives the same descriptor, and each
 * leaf's byte offset in it) and rebuild each leaf there with
 * td_shm_tensor_from_fd(); the keys, dtypes and shapes travel however the
 * caller likes.
 *
 * @param[out] out  receives the dict; owned by the caller, release with
 *                  td_dict_free() (the memfd goes when the dict and every
 *                  tensor taken from it are released); NULL on failure
 * @param src       the dict to copy (borrowed)
 * @return TD_OK; TD_EINVAL (NULL argument, an invalid tensor);
 *         TD_ENOTSUP (a tensor in device memory); TD_EOVERFLOW (the total size overflows); TD_ENOSPC; TD_EIO;
 *         TD_ENOMEM
 */
TD_API int td_shm_dict(td_dict **out, const td_dict *src);

/** Default largest tensor, in bytes, served by the shared-memory arena. */
#define TD_SHM_ARENA_MAX_DEFAULT ((size_t)64 << 10)
/** Largest value td_shm_arena_set_max() accepts (1 MiB). */
#define TD_SHM_ARENA_MAX_LIMIT ((size_t)1 << 20)

/** Current version of td_shm_arena_stats; set `version` to it. */
#define TD_SHM_ARENA_STATS_VERSION 1

/** The shared-memory arena of this process, for tuning and tests. Fields are only appended. */
typedef struct td_shm_arena_stats {
	unsigned version;     /**< set by the caller: TD_SHM_ARENA_STATS_VERSION */
	size_t max_bytes;     /**< tensors of 1..max_bytes bytes come from the arena; 0: off */
	size_t chunks;        /**< chunks (memfds) this process maps: in use or cached */
	size_t chunk_bytes;   /**< their total size in bytes */
	size_t blocks;        /**< blocks in use: arena buffers not yet released */
	size_t cached_chunks; /**< empty chunks kept for reuse (see td_shm_arena_trim()) */
} td_shm_arena_stats;

/**
 * Set the largest tensor, in bytes, that the shared-memory arena serves;
 * larger ones get a memfd of their own. 0 turns the arena off. Overrides
 * TDSTORE_SHM_ARENA_MAX. Tensors already made stay where they are, and
 * chunks already cached stay mapped until td_shm_arena_trim(). Thread-safe.
 *
 * @param max_bytes  0..TD_SHM_ARENA_MAX_LIMIT
 * @return TD_OK; TD_EINVAL when `max_bytes` is above TD_SHM_ARENA_MAX_LIMIT
 *         (the setting is then unchanged)
 */
TD_API int td_shm_arena_set_max(size_t max_bytes);

/**
 * Unmap every arena chunk of this process that has no tensor in it (the
 * empty chunks kept for reuse), closing their memfds. Chunks with tensors
 * are untouched. Thread-safe; never fails. The library also does this
 * when it is unloaded or the process exits.
 */
TD_API void td_shm_arena_trim(void);

/**
 * Describe the shared-memory arena of this process.
 *
 * @param[in,out] out  `out->version` must be TD_SHM_ARENA_STATS_VERSION;
 *                     the other fields are written on success
 * @return TD_OK; TD_EINVAL for NULL `out` or an unknown version
 */
TD_API int td_shm_arena_stat(td_shm_arena_stats *out);

TD_END_DECLS

#endif /* TDSTORE_MMAP_H */
