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

/*
 * Take the writer lock, finish a commit a crashed writer left (journal),
 * and bring the dict up to date with the committed schema.
 */

/*
 * Make the change's deepest level the home of its dict (td__dict_home()):
 * for a tensorclass, its `_tensordict/` sub-directory, pushed on the path.
 */
static void change_release(td__change *c);

static int enter_home(td__change *c, const char *what)
{
	size_t i = c->depth - 1, mark;
	bool sub;
	int home;

	TD_TRY(td__dict_home(c->fds[i], what, &home, &sub));
	close(c->fds[i]);
	c->fds[i] = home;
	if (!sub)
		return TD_OK;
	TD_TRY(td__relpath_push(&c->path, "_tensordict", &mark));
	c->marks[i] = c->path.len;
	if (strlen(c->rel) + sizeof("/_tensordict") <= sizeof(c->rel))
		strcat(c->rel, c->rel[0] ? "/_tensordict" : "_tensordict");
	return TD_OK;
}

/*
 * Take the writer lock, finish a commit a crashed writer left (journal),
 * and bring the dict up to date with the committed schema.
 */
int td__change_begin(td__change *c, td_store *st, const char *fn)
{
	uint64_t gen;
	int rc;

	memset(c, 0, sizeof(*c));
	c->st = st;
	c->fds[0] = -1;
	TD_TRY(td__open_root(st->path, fn, &c->rootfd));
	rc = td__coord_lock(&st->coord, true);
	if (rc < 0) {
		close(c->rootfd);
		return rc;
	}
	rc = td__store_recover(st, c->rootfd);
	gen = td__coord_generation(&st->coord);
	if (rc == TD_OK && gen != st->generation) {
		rc = td__store_reload(st, c->rootfd);
		if (rc == TD_OK)
			st->generation = gen;
	}
	if (rc == TD_OK) {
		c->fds[0] = fcntl(c->rootfd, F_DUPFD_CLOEXEC, 0);
		if (c->fds[0] < 0)
			rc = td__error_os(TD_EIO, errno, "%s: dup", fn);
	}
	if (rc < 0) {
		td__coord_unlock(&st->coord);
		close(c->rootfd);
		return rc;
	}
	c->dicts[0] = st->dict;
	c->depth = 1;
	c->first_dirty = SIZE_MAX;
	if (!td_dict_is_lazy(st->dict)) {
		rc = enter_home(c, st->path);
		if (rc < 0) {
			change_release(c);
			return rc;
		}
	}
	/* The store's dict is locked against callers; the change edits it unlocked. */
	td_dict_unlock(st->dict);
	return TD_OK;
}

/* Enter a child directory opened (or made) under the deepest level, named `name` on disk. */
static int change_enter(td__change *c, int fd, td_dict *child, const char *crel, char *name)
{
	size_t mark;
	int rc = td__relpath_push(&c->path, name, &mark);

	td__free(name);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	c->fds[c->depth] = fd;
	c->dicts[c->depth] = child;
	c->marks[c->depth] = c->path.len;
	snprintf(c->rel, sizeof(c->rel), "%s", crel);
	c->depth++;
	return TD_OK;
}

/*
 * Descend to the dict that holds the last component of the path, creating
 * missing intermediate dicts (with their parent's batch shape, as
 * tensordict's make_memmap does) when `create`.
 */
int td__change_walk(td__change *c, const char *const *parts, size_t n, bool create,
	const char *fn)
{
	size_t i;

	for (i = 0; i + 1 < n; i++) {
		td_dict *cur = c->dicts[c->depth - 1], *child;
		const td_value *v;
		char crel[TD_REL_MAX], *name;
		int fd, rc = td_dict_get_path(cur, &parts[i], 1, &v);

		if (rc == TD_OK && v->kind != TD_VALUE_DICT)
			return td__error(TD_ETYPE, "%s: \"%s\" is not a dict", fn, parts[i]);
		if (rc == TD_OK) {
			TD_TRY(td__open_child(c->fds[c->depth - 1], c->rel, parts[i], crel,
				sizeof(crel), &fd, &name));
			TD_TRY(change_enter(c, fd, v->u.dict, crel, name));
			TD_TRY(enter_home(c, crel));
			continue;
		} else if (rc == TD_ENOTFOUND && create) {
			TD_TRY(td__make_child_dir(c->fds[c->depth - 1], c->rel, parts[i], crel,
				sizeof(crel), &fd, &name));
			rc = td_dict_new(&child, td_dict_batch_ndim(cur), td_dict_batch_shape(cur));
			if (rc == TD_OK) {
				rc = td_dict_set_dict_take_path(cur, &parts[i], 1, child);
				if (rc < 0)
					td_dict_free(child);
			}
			if (rc < 0) {
				td__free(name);
				close(fd);
				return rc;
			}
			if (c->first_dirty == SIZE_MAX)
				c->first_dirty = c->depth - 1;
		} else {
			return rc == TD_ENOTFOUND ?
				td__error(TD_ENOTFOUND, "%s: no key \"%s\"", fn, parts[i]) : rc;
		}
		TD_TRY(change_enter(c, fd, child, crel, name));
	}
	return TD_OK;
}

/*
 * Stage the meta.json of every changed level, deepest first, and commit
 * them together: one is renamed into place, several (new nested dicts)
 * go through the journal, so that no reader sees a parent without its
 * child or the reverse.
 */
static int change_commit(td__change *c)
{
	td__commit commit = { .model = c->st->dix };
	size_t i;
	int rc = TD_OK;

	for (i = c->depth; rc == TD_OK && i-- > c->first_dirty;) {
		char what[TD_REL_MAX];
		char *text;

		snprintf(what, sizeof(what), "%s: meta.json at depth %zu", c->st->path, i);
		td__relpath_pop(&c->path, c->marks[i]);
		rc = td__meta_dump(td__build_meta(c->dicts[i], -1), &text);
		if (rc < 0)
			break;
		rc = td__commit_stage(&commit, c->fds[i], td__relpath_str(&c->path), text,
			strlen(text), what);
		free(text);
	}
	if (rc < 0) {
		td__commit_abort(&commit);
		return rc;
	}
	return td__commit_run(&commit, c->rootfd, true, c->st->path);
}

/* Close the levels, release the lock and the root. */
static void change_release(td__change *c)
{
	size_t i;

	for (i = 0; i < c->depth; i++)
		close(c->fds[i]);
	td__relpath_free(&c->path);
	td__coord_unlock(&c->st->coord);
	close(c->rootfd);
}

/*
 * Commit the changed levels (none: nothing to do), then bump the
 * generation (also after a commit the caller made itself, c->committed);
 * with c->reload, load the dict again (new mappings). On
 * failure, reload the dict from what is on disk. Releases the lock either
 * way; the store's dict is locked again.
 */
int td__change_end(td__change *c, int rc)
{
	td_store *st = c->st;

	if (rc == TD_OK && c->first_dirty != SIZE_MAX)
		rc = change_commit(c);
	if (rc == TD_OK && (c->first_dirty != SIZE_MAX || c->committed)) {
		uint64_t gen = td__coord_bump(&st->coord);

		if (c->on_commit)
			c->on_commit(c, c->on_commit_arg);

		/* A failed reload keeps the old dict and generation: the next call reloads. */
		if (c->reload)
			rc = td__store_reload(st, c->rootfd);
		if (rc == TD_OK)
			st->generation = gen;
		td_dict_lock(st->dict);
		if (rc == TD_OK)
			td__dirindex_update(st, c->rootfd);
	} else if (rc == TD_OK) {
		td_dict_lock(st->dict);
	} else {
		int saved = td_error_last()->code;
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", td_error_last()->message);
		/* Back to what is committed on disk (the in-memory dict may be half-changed). */
		if (td__store_reload(st, c->rootfd) < 0)
			td_dict_lock(st->dict);
		td__error(saved ? saved : rc, "%s", msg);
	}
	change_release(c);
	return rc;
}

static int add_impl(td_store *st, const char *const *parts, size_t n, const td_tensor *t,
	bool copy, const char *fn)
{
	const char *key = parts[n - 1];
	td__change c;
	td_tensor mapped = TD_TENSOR_INIT;
	const td_value *v;
	td_dict *d;
	int bndim, rc;

	TD_TRY(td__change_begin(&c, st, fn));
	rc = td__change_walk(&c, parts, n, true, fn);
	if (rc < 0)
		goto out;
	d = c.dicts[c.depth - 1];
	if (td_dict_get_path(d, &key, 1, &v) == TD_OK) {
		rc = td__error(TD_EEXISTS, "%s: key \"%s\" already exists", fn, key);
		goto out;
	}
	bndim = td_dict_batch_ndim(d);
	if (t->ndim < bndim ||
	    memcmp(t->shape, td_dict_batch_shape(d), (size_t)bndim * sizeof(int64_t)) != 0) {
		rc = td__error(TD_ETYPE, "%s: the shape of \"%s\" does not start with the batch shape",
			fn, key);
		goto out;
	}
	rc = td__dir_write_leaf(st, c.fds[c.depth - 1], c.rel, key, t, copy, &mapped);
	if (rc == TD_OK && !copy && td_tensor_numel(&mapped) > 0)
		rc = td_tensor_zero(&mapped); /* a reused file may hold old bytes */
	if (rc == TD_OK)
		rc = td_dict_set_tensor_take_path(d, &key, 1, &mapped);
	td_tensor_release(&mapped);
	if (rc == TD_OK && c.first_dirty == SIZE_MAX)
		c.first_dirty = c.depth - 1;
out:
	return td__change_end(&c, rc);
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
	return add_impl(store, parts, n, t, true, fn);
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
			add_impl(store, parts, n, &e, false, fn);
		td_tensor_release(&e);
	}
	return rc;
}

/* Delete what a removed entry had on disk (best effort: the commit is done). */
static void remove_files(int dirfd, const char *key, const td_value *v)
{
	char *name;
	int fd;

	if (v->kind == TD_VALUE_TENSOR) {
		if (td_tensor_numel(&v->u.tensor) > 0 && td__encoded_name(key, ".memmap", &name) == TD_OK) {
			unlinkat(dirfd, name, 0);
			td__free(name);
		}
		return;
	}
	if (td__encoded_name(key, "", &name) < 0)
		return;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		int home;
		bool sub;

		if (v->kind == TD_VALUE_DICT && td__dict_home(fd, name, &home, &sub) == TD_OK) {
			size_t n = td_dict_items(v->u.dict, NULL, NULL, 0), i;
			const char **keys = td__calloc(n ? n : 1, sizeof(*keys));
			const td_value **vals = td__calloc(n ? n : 1, sizeof(*vals));

			if (keys && vals) {
				td_dict_items(v->u.dict, keys, vals, n);
				for (i = 0; i < n; i++)
					remove_files(home, keys[i], vals[i]);
			}
			td__free(keys);
			td__free(vals);
			if (sub) /* a tensorclass: its fields' dict, then the class's own files */
				unlinkat(home, "meta.json", 0);
			close(home);
			if (sub)
				unlinkat(fd, "_tensordict", AT_REMOVEDIR);
		}
		unlinkat(fd, "meta.json", 0);
		close(fd);
		unlinkat(dirfd, name, AT_REMOVEDIR); /* stays if something else is in it */
	}
	td__free(name);
}

/* What td_store_remove() deletes once its change is committed. */
typedef struct removal {
	const char *key;
	td_value value;   /* the removed value: its kind and shape name its files */
	td_dict *holder;  /* for a dict, a copy of its tree under `key` */
} removal;

static void delete_removed(td__change *c, void *arg)
{
	const removal *r = arg;
	const td_value *hv;

	if (r->value.kind != TD_VALUE_DICT)
		remove_files(c->fds[c->depth - 1], r->key, &r->value);
	else if (td_dict_get_path(r->holder, &r->key, 1, &hv) == TD_OK)
		remove_files(c->fds[c->depth - 1], r->key, hv);
	td_error_clear(); /* a file that cannot be deleted is dead space, not an error */
}

int td_store_remove(td_store *store, const char *const *parts, size_t n)
{
	static const char fn[] = "td_store_remove";
	removal r = { 0 };
	const td_value *v;
	td_dict *d;
	td__change c;
	int rc;

	TD_TRY(td__store_check_path(store, parts, n, fn));
	if (store->packed)
		return td__packed_remove(store, parts, n, fn);
	r.key = parts[n - 1];
	TD_TRY(td__change_begin(&c, store, fn));
	rc = td__change_walk(&c, parts, n, false, fn);
	if (rc < 0)
		goto out;
	d = c.dicts[c.depth - 1];
	rc = td_dict_get_path(d, &r.key, 1, &v);
	if (rc < 0) {
		rc = td__error(TD_ENOTFOUND, "%s: no key \"%s\"", fn, r.key);
		goto out;
	}
	/* Keep what names the files to delete after the commit: a nested dict's tree. */
	if (v->kind == TD_VALUE_DICT) {
		rc = td_dict_new(&r.holder, 0, NULL);
		if (rc == TD_OK)
			rc = td_dict_set_dict_path(r.holder, &r.key, 1, v->u.dict);
	}
	r.value = *v;
	if (rc == TD_OK)
		rc = td_dict_del_path(d, &r.key, 1);
	if (rc == TD_OK) {
		c.first_dirty = c.depth - 1;
		c.on_commit = delete_removed;
		c.on_commit_arg = &r;
	}
out:
	rc = td__change_end(&c, rc);
	td_dict_free(r.holder);
	return rc;
}
