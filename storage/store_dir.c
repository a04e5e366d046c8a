/* SPDX-License-Identifier: MIT */
/*
 * store_dir.c - stores and the directory placement: the store handle,
 * td_store_open (the packed placement is store_packed.c), td_store_memmap
 * in tensordict's memmap layout, schema changes and refresh. The reader of
 * the layout is store_dir_read.c, its names and meta.json text
 * store_dir_meta.c.
 */
#include "store_dir.h"
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* The store handle and opening                                              */
/* ------------------------------------------------------------------------ */

static void store_free(td_store *st)
{
	size_t i;

	if (!st)
		return;
	td_dict_free(st->dict);
	for (i = 0; i < st->nmaps; i++)
		td_buffer_unref(st->maps[i]);
	td__free(st->maps);
	td__packed_free(st);
	td__dirmodel_free(st->dix);
	td__coord_close(&st->coord);
	td__free(st->path);
	td__free(st);
}

int td__store_new(td_store **out, const char *path, unsigned flags)
{
	td_store *st = td__calloc(1, sizeof(*st));

	*out = NULL;
	if (!st)
		return td__error_nomem(sizeof(*st));
	st->path = td__strndup(path, strlen(path));
	if (!st->path) {
		td__free(st);
		return td__error_nomem(strlen(path) + 1);
	}
	st->flags = flags;
	st->coord.fd = -1;
	st->pk.fd = -1;
	*out = st;
	return TD_OK;
}

/* Hand over a store whose dict was loaded or written (locked), or free it on failure. */
static int store_finish(td_store *st, int rc, td_store **out)
{
	if (rc == TD_OK)
		rc = td_dict_lock(st->dict);
	if (rc < 0) {
		store_free(st);
		return rc;
	}
	*out = st;
	return TD_OK;
}

/* A read-write open recovers a journal it finds (taking the exclusive lock only then). */
static int recover_on_open(td_store *st, int rootfd)
{
	int rc;

	if (faccessat(rootfd, TD_JOURNAL_NAME, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
		return TD_OK;
	TD_TRY(td__coord_lock(&st->coord, true));
	rc = td__store_recover(st, rootfd);
	td__coord_unlock(&st->coord);
	return rc;
}

int td_store_open(td_store **out, const char *path, unsigned flags)
{
	td_store *st;
	int dirfd, rc;

	if (!out)
		return td__error(TD_EINVAL, "td_store_open: NULL out");
	*out = NULL;
	if (!path)
		return td__error(TD_EINVAL, "td_store_open: NULL path");
	if (flags & ~TD_STORE_RDWR)
		return td__error(TD_EINVAL, "td_store_open: unknown flags 0x%x", flags);
	{
		struct stat sb;

		/* A regular file is a packed store; anything else must be a directory. */
		if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
			TD_TRY(td__store_new(&st, path, flags));
			return store_finish(st, td__packed_open(st), out);
		}
	}
	TD_TRY(td__open_root(path, "td_store_open", &dirfd));
	rc = td__store_new(&st, path, flags);
	if (rc < 0) {
		close(dirfd);
		return rc;
	}
	/* A read-write open creates the coordination file; a read-only one uses it if present. */
	rc = td__coord_open(&st->coord, dirfd, path, (flags & TD_STORE_RDWR) != 0);
	if (rc == TD_OK && (flags & TD_STORE_RDWR))
		rc = recover_on_open(st, dirfd);
	if (rc == TD_OK)
		rc = td__coord_lock(&st->coord, false);
	if (rc == TD_OK) {
		st->generation = td__coord_generation(&st->coord);
		rc = td__dir_load(st, dirfd, &st->dict, &st->dix);
		td__coord_unlock(&st->coord);
	}
	close(dirfd);
	return store_finish(st, rc, out);
}

int td_store_memmap(td_store **out, const td_dict *src, const char *path, unsigned flags)
{
	const unsigned known = TD_STORE_EXISTSOK | TD_STORE_LIKE | TD_STORE_NOSYNC |
		TD_STORE_PACKED;
	td_store *st;

	if (!out)
		return td__error(TD_EINVAL, "td_store_memmap: NULL out");
	*out = NULL;
	if (!src || !path)
		return td__error(TD_EINVAL, "td_store_memmap: NULL %s", src ? "path" : "src");
	if (flags & ~known)
		return td__error(TD_EINVAL, "td_store_memmap: unknown flags 0x%x", flags);
	if (flags & TD_STORE_PACKED)
		return td__packed_memmap(out, src, path, flags);
	TD_TRY(td__check_writable(src, "td_store_memmap"));
	TD_TRY(td__store_new(&st, path, TD_STORE_RDWR));
	return store_finish(st, td__dir_memmap(st, src, flags), out);
}

/* ------------------------------------------------------------------------ */
/* Accessors, sync, close                                                    */
/* ------------------------------------------------------------------------ */

td_dict *td_store_dict(td_store *store)
{
	return store ? store->dict : NULL;
}

const char *td_store_path(const td_store *store)
{
	return store ? store->path : NULL;
}

unsigned td_store_flags(const td_store *store)
{
	if (!store)
		return TD_STORE_RDONLY;
	return store->flags | (store->packed ? TD_STORE_PACKED : 0u);
}

/* Up to this many mappings td_store_sync() msyncs each; beyond, one syncfs. */
#define SYNC_MAPS_MAX 8

int td_store_sync(td_store *store)
{
	size_t i;
	int rc = TD_OK;

	if (!store)
		return td__error(TD_EINVAL, "td_store_sync: NULL store");
	if (store->packed)
		return td__packed_sync(store);
	if (!(store->flags & TD_STORE_RDWR))
		return TD_OK; /* nothing was written through it */
	if (store->nmaps > SYNC_MAPS_MAX) {
		/*
		 * msync(MS_SYNC) of a mapping syncs its file, which on most file
		 * systems ends with a flush of the device's cache: one per leaf
		 * (1.5 s for 2,000 leaves, measured on ext4). One syncfs writes
		 * every dirty page of the file system and flushes once.
		 */
		int fd;

		TD_TRY(td__open_root(store->path, "td_store_sync", &fd));
		if (syncfs(fd) < 0)
			rc = td__error_os(TD_EIO, errno, "td_store_sync: %s: syncfs", store->path);
		close(fd);
		return rc;
	}
	for (i = 0; i < store->nmaps; i++) {
		td_buffer *b = store->maps[i];

		/* msync(MS_SYNC) writes the dirty pages and syncs the file range. */
		if (msync(td_buffer_data(b), td_buffer_size(b), MS_SYNC) < 0 && rc == TD_OK)
			rc = td__error_os(TD_EIO, errno, "td_store_sync: %s: msync", store->path);
	}
	return rc;
}

int td_store_close(td_store *store)
{
	int rc = TD_OK;

	if (!store)
		return TD_OK;
	if (store->flags & TD_STORE_RDWR)
		rc = td_store_sync(store);
	store_free(store);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Schema changes and refresh                                               */
/* ------------------------------------------------------------------------ */

uint64_t td_store_generation(const td_store *store)
{
	if (store && store->packed)
		return td__packed_generation(store);
	return store ? td__coord_generation(&store->coord) : 0;
}

int td_store_refresh(td_store *store, bool *changed)
{
	uint64_t gen;
	int dirfd, rc;

	if (changed)
		*changed = false;
	if (!store)
		return td__error(TD_EINVAL, "td_store_refresh: NULL store");
	if (store->packed)
		return td__packed_refresh(store, changed);
	TD_TRY(td__open_root(store->path, "td_store_refresh", &dirfd));
	/* A writer may have created the coordination file since a read-only open. */
	if (store->coord.fd < 0 && (rc = td__coord_open(&store->coord, dirfd, store->path,
					   false)) < 0)
		goto out;
	rc = TD_OK;
	gen = td__coord_generation(&store->coord);
	if (gen == store->generation)
		goto out;
	rc = td__coord_lock(&store->coord, false);
	if (rc < 0)
		goto out;
	gen = td__coord_generation(&store->coord);
	rc = td__store_reload(store, dirfd);
	td__coord_unlock(&store->coord);
	if (rc == TD_OK) {
		store->generation = gen;
		if (changed)
			*changed = true;
	}
out:
	close(dirfd);
	return rc;
}

int td__store_check_path(const td_store *st, const char *const *parts, size_t n,
	const char *fn)
{
	size_t i;
	int rc;

	if (!st || !parts)
		return td__error(TD_EINVAL, "%s: NULL %s", fn, st ? "path" : "store");
	if (n < 1 || n > TD_KEY_MAX_DEPTH - 1)
		return td__error(TD_EINVAL, "%s: a key path of %zu components", fn, n);
	for (i = 0; i < n; i++) {
		if (!parts[i])
			return td__error(TD_EINVAL, "%s: NULL key component %zu", fn, i);
		if (td__key_reserved(parts[i]))
			return td__error(TD_EINVAL, "%s: key \"%s\" is reserved by meta.json", fn,
				parts[i]);
	}
	if (!(st->flags & TD_STORE_RDWR))
		return td__error(TD_EREADONLY, "%s: the store is open read-only", fn);
	rc = td__holds_lazy(st->dict);
	if (rc < 0)
		return rc;
	if (rc)
		return td__error(TD_ENOTSUP, "%s: the store holds a lazy stack, whose schema "
			"tdstore does not change in place (as tensordict's make_memmap)", fn);
	return TD_OK;
}

int td_store_add_tensor(td_store *store, const char *const *parts, size_t n, const td_tensor *t)
{
	static const char fn[] = "td_store_add_tensor";

	TD_TRY(td__store_check_path(store, parts, n, fn));
	if (!t || !t->buffer)
		return td__error(TD_EINVAL, "%s: NULL tensor", fn);
	if (td_buffer_memory(t->buffer) == TD_MEMORY_DEVICE)
		return td__error(TD_EINVAL, "%s: the tensor is in device memory", fn);
	if (store->packed)
		return td__packed_add(store, parts, n, t, true, fn);
	return td__dir_add(store, parts, n, t, true, fn);
}

int td_store_add_empty(td_store *store, const char *const *parts, size_t n, td_dtype dtype,
	int ndim, const int64_t *shape)
{
	static const char fn[] = "td_store_add_empty";
	td_tensor t;
	int rc;

	TD_TRY(td__store_check_path(store, parts, n, fn));
	/* A zero-strided view describes the leaf without allocating its size. */
	TD_TRY(td_tensor_zeros(&t, dtype, 0, NULL));
	{
		td_tensor e;

		rc = td_tensor_expand(&e, &t, ndim, shape);
		td_tensor_release(&t);
		if (rc < 0)
			return rc;
		rc = store->packed ? td__packed_add(store, parts, n, &e, false, fn) :
			td__dir_add(store, parts, n, &e, false, fn);
		td_tensor_release(&e);
	}
	return rc;
}

int td_store_remove(td_store *store, const char *const *parts, size_t n)
{
	static const char fn[] = "td_store_remove";

	TD_TRY(td__store_check_path(store, parts, n, fn));
	if (store->packed)
		return td__packed_remove(store, parts, n, fn);
	return td__dir_remove(store, parts, n, fn);
}
