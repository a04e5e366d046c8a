/* SPDX-License-Identifier: MIT */
/*
 * store_impl.h - internals shared by the storage/ sources. Never installed.
 */
#ifndef TD_STORE_IMPL_H
#define TD_STORE_IMPL_H

#include "td_internal.h"
#include "index.h"

#include <stddef.h>

/** Largest meta.json read (bigger ones are refused as corrupt). */
#define TD_META_MAX_BYTES ((size_t)64 << 20)

/* ---- coordination file (coord.c; doc/format.md) ---- */

#define TD_COORD_NAME ".tdstore-coord"
#define TD_COORD_MAGIC "TDSCOORD"
#define TD_COORD_VERSION 1u
#define TD_COORD_HEADER_SIZE 64u
#define TD_COORD_FILE_SIZE 4096

/** The coordination file's header, little-endian, at offset 0. */
typedef struct td__coord_header {
	char magic[8];                 /* "TDSCOORD" */
	uint32_t version;              /* TD_COORD_VERSION */
	uint32_t header_size;          /* TD_COORD_HEADER_SIZE */
	_Atomic uint64_t generation;   /* bumped after every committed schema change */
	uint8_t reserved[40];          /* zero */
} td__coord_header;

/** A store's handle on its coordination file. */
typedef struct td__coord {
	int fd;                        /* -1 when the directory has none (read-only open) */
	td__coord_header *hdr;         /* the shared mapping, or NULL */
} td__coord;

/**
 * Open (and with `create`, create and initialize) the coordination file
 * of the store directory `dirfd`; `root` names it in messages. Without
 * `create` a missing file is not an error: c->fd stays -1.
 */
int td__coord_open(td__coord *c, int dirfd, const char *root, bool create);
void td__coord_close(td__coord *c);
/** The current schema generation (0 without a coordination file). */
uint64_t td__coord_generation(const td__coord *c);
/** Increment the generation; @return the new value. Under the exclusive lock. */
uint64_t td__coord_bump(td__coord *c);
/** flock the coordination file: exclusive for schema changes, shared for loading. */
int td__coord_lock(td__coord *c, bool exclusive);
void td__coord_unlock(td__coord *c);

/** A commit slot of a packed file, decoded (doc/format.md 4.2). */
typedef struct td__slot {
	uint64_t generation, index_offset, index_length, index_capacity, file_length;
	bool sealed;           /* checksum valid and generation not 0: a commit happened */
	bool ok;               /* sealed and fields valid (its index may still be damaged) */
} td__slot;

/** The packed placement's part of a store (store_packed.c). */
typedef struct td__packed {
	int fd;                /* the file; -1 when closed */
	td_buffer *map;        /* [0, file_length) mapped shared (one reference) */
	td__index ix;          /* the committed index the dict was built from */
	td__slot slot[2];      /* A and B as last read */
	int cur;               /* the slot in use (the newer): 0 or 1 */
} td__packed;

/** An open store. */
struct td_store {
	char *path;           /* as given to open / memmap */
	unsigned flags;       /* TD_STORE_RDONLY or TD_STORE_RDWR */
	td_dict *dict;        /* the root dict (owned) */
	td_buffer **maps;     /* writable mappings (one reference each), for sync */
	size_t nmaps;
	size_t cap_maps;
	td__coord coord;      /* the coordination file */
	uint64_t generation;  /* the schema generation the dict was loaded at */
	bool packed;          /* the packed placement: one file (pk), no directory */
	td__packed pk;
};

/** A new, empty store handle (no dict yet) for `path`. */
int td__store_new(td_store **out, const char *path, unsigned flags);

/* ---- packed placement (store_packed.c) ---- */

/** Open the packed file `path` into a new store (`st` has path and flags set). */
int td__packed_open(td_store *st);
/** td_store_memmap() with TD_STORE_PACKED. */
int td__packed_memmap(td_store **out, const td_dict *src, const char *path, unsigned flags);
/** Add a leaf (a copy of `t`, or zeros when !copy) to a packed store. */
int td__packed_add(td_store *st, const char *const *parts, size_t n, const td_tensor *t,
	bool copy, const char *fn);
int td__packed_remove(td_store *st, const char *const *parts, size_t n, const char *fn);
int td__packed_refresh(td_store *st, bool *changed);
uint64_t td__packed_generation(const td_store *st);
int td__packed_sync(td_store *st);
/** Release the packed state (mapping, descriptor, index). */
void td__packed_free(td_store *st);

/**
 * Create a new temporary file `.tdstore-tmp.<pid>.<n>` under `dirfd`,
 * open read-write; its name goes to `tmp` (64 bytes are enough).
 */
int td__create_temp(int dirfd, char *tmp, size_t tmp_len, int *fd_out, const char *what);

/** The checks td_store_memmap() makes before touching a file (reserved keys, bytes, devices). */
int td__check_writable(const td_dict *d, const char *fn);

/* ---- shared-memory arena (shm_arena.c) ---- */

/**
 * Serve `nbytes` of anonymous shared memory from the arena as a writable
 * TD_BUFFER_SHM buffer whose last reference gives the block back.
 * @return 1 with `*out` set, and `*zeroed_out` true when the bytes read as
 *         zeros (a never-used block) and false when they may hold an
 *         earlier tensor's bytes; 0 when the arena does not serve this
 *         size (0 bytes, above the arena's maximum, or the arena is off):
 *         the caller makes a memfd of its own; < 0 on failure (`fn`
 *         names the call in the message).
 */
int td__shm_arena_alloc(td_buffer **out, size_t nbytes, bool *zeroed_out, const char *fn);

/**
 * If `buf` is an arena buffer: mark its block as exported (never handed
 * out again by this process), store the chunk's memfd in `*fd_out` and the
 * byte offset of the buffer's data in the memfd in `*offset_out`, and
 * return true. Otherwise return false and store nothing.
 */
bool td__shm_arena_export(const td_buffer *buf, int *fd_out, uint64_t *offset_out);

/** Mapping hook for td_buffer_wrap(): munmap(data, nbytes). */
void td__unmap_release(void *data, size_t nbytes, void *payload);

/**
 * Map `nbytes` from offset 0 of `fd` shared, read-only or writable, as a
 * TD_BUFFER_FILE buffer whose last reference unmaps it. `what` names the
 * file in messages.
 */
int td__map_fd(td_buffer **out, int fd, size_t nbytes, bool writable, const char *what);

/**
 * As td__map_fd(), with the buffer's kind, release hook and payload taken
 * from `opts` (its flags are set from `writable`). The hook must unmap
 * (td__unmap_release() does). On failure nothing is mapped and the hook is
 * not called.
 */
int td__map_fd_as(td_buffer **out, int fd, size_t nbytes, bool writable,
	const td_buffer_wrap_opts *opts, const char *what);

/** Remember a writable mapping for td_store_sync() (takes a new reference). */
int td__store_track(td_store *st, td_buffer *map);

/**
 * Report a failed open/mkdir/... of `what` for errno `err`: ELOOP (a
 * symbolic link under O_NOFOLLOW) is TD_ECORRUPT, ENOENT TD_ENOTFOUND,
 * EACCES/EPERM/EROFS TD_EREADONLY, the rest by td__status_from_errno().
 */
int td__file_error(int err, const char *what, const char *op);

/**
 * fstat `fd` and require a regular file (TD_ECORRUPT otherwise; TD_EIO if
 * fstat fails). Its size goes to `*size_out` when not NULL. `what` names
 * it in messages.
 */
int td__fstat_regular(int fd, const char *what, uint64_t *size_out);

/**
 * Open `name` under `dirfd` read-write with `nbytes` reserved on disk
 * (posix_fallocate; skipped for 0), so that a full disk fails here rather
 * than with SIGBUS later. The file is created (O_CREAT | O_EXCL, 0666), or
 * with `existsok` an existing one is reused: grown when short, never
 * truncated. Symbolic links and non-regular files are refused
 * (TD_ECORRUPT); without `existsok` an existing file is TD_EEXISTS. `fn`
 * and `what` name the call and the file in messages. `*created_out` (may
 * be NULL) tells whether this call created the file, also on failure, so
 * that the caller may remove it; on failure the descriptor is closed.
 */
int td__open_reserved(int dirfd, const char *name, size_t nbytes, bool existsok,
	const char *fn, const char *what, int *fd_out, bool *created_out);

/**
 * Read a whole regular file `name` under `dirfd` (no symbolic links) into
 * a new NUL-terminated heap block of at most `max` bytes (release with
 * td__free()). `what` names it in messages.
 */
int td__read_small_file(int dirfd, const char *name, size_t max, char **out, size_t *len,
	const char *what);

/**
 * Replace `name` under `dirfd` atomically with `len` bytes: written to a
 * temporary name in the same directory, fsynced (unless `nosync`), renamed
 * over `name`, and the directory fsynced.
 */
int td__write_file_atomic(int dirfd, const char *name, const void *data, size_t len,
	bool nosync, const char *what);

/**
 * Write `len` bytes to a new temporary file in `dirfd` (fsynced when
 * `do_fsync`); its name goes to `tmp` (64 bytes are enough). On failure
 * nothing is left behind.
 */
int td__write_temp(int dirfd, const void *data, size_t len, bool do_fsync, char *tmp,
	size_t tmp_len, const char *what);

/** Write all of `data` at the current offset of `fd` (retrying short writes and EINTR). */
int td__write_fd(int fd, const void *data, size_t len, const char *what);

#endif /* TD_STORE_IMPL_H */
