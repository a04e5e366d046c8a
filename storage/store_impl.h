/* SPDX-License-Identifier: MIT */
/*
 * store_impl.h - internals shared by the storage/ sources. Never installed.
 */
#ifndef TD_STORE_IMPL_H
#define TD_STORE_IMPL_H

#include "td_internal.h"

/** Largest meta.json read (bigger ones are refused as corrupt). */
#define TD_META_MAX_BYTES ((size_t)64 << 20)

/** An open store. */
struct td_store {
	char *path;           /* as given to open / memmap */
	unsigned flags;       /* TD_STORE_RDONLY or TD_STORE_RDWR */
	td_dict *dict;        /* the root dict (owned) */
	td_buffer **maps;     /* writable mappings (one reference each), for sync */
	size_t nmaps;
	size_t cap_maps;
};

/** Mapping hook for td_buffer_wrap(): munmap(data, nbytes). */
void td__unmap_release(void *data, size_t nbytes, void *payload);

/**
 * Map `nbytes` from offset 0 of `fd` shared, read-only or writable, as a
 * TD_BUFFER_FILE buffer whose last reference unmaps it. `what` names the
 * file in messages.
 */
int td__map_fd(td_buffer **out, int fd, size_t nbytes, bool writable, const char *what);

/** Remember a writable mapping for td_store_sync() (takes a new reference). */
int td__store_track(td_store *st, td_buffer *map);

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
