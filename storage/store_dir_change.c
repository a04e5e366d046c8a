/* SPDX-License-Identifier: MIT */
/*
 * store_dir_change.c - schema changes of a directory store: the change
 * machinery (the writer lock, recovery and catching up with other
 * processes, the walk down a key path, the journaled commit of every
 * meta.json it changed, the new generation) and the two changes built on
 * it here, adding a leaf and removing an entry (growth is
 * store_dir_grow.c).
 */
#include "store_dir.h"
#include "dictname.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
	rc = td__coord_lock(&st->dir.coord, true);
	if (rc < 0) {
		close(c->rootfd);
		return rc;
	}
	rc = td__store_recover(st, c->rootfd);
	gen = td__coord_generation(&st->dir.coord);
	if (rc == TD_OK && (gen != st->generation || st->dir.stale)) {
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
		td__coord_unlock(&st->dir.coord);
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
int td__change_walk(td__change *c, const char *const *parts, size_t n, bool create, const char *fn)
{
	size_t i;

	for (i = 0; i + 1 < n; i++) {
		td_dict *cur = c->dicts[c->depth - 1], *child;
		const td_value *v;
		char crel[TD_REL_MAX], *name;
		int fd, rc = td__dictname_get(&v, cur, parts[i]);

		if (rc == TD_OK && v->kind != TD_VALUE_DICT)
			return td__error(TD_ETYPE, "%s: \"%s\" is not a dict", fn, parts[i]);
		if (rc == TD_OK) {
			TD_TRY(td__open_child(c->fds[c->depth - 1], c->rel, parts[i], crel, sizeof(crel), &fd,
				&name));
			TD_TRY(change_enter(c, fd, v->dict, crel, name));
			TD_TRY(enter_home(c, crel));
			continue;
		} else if (rc == TD_ENOTFOUND && create) {
			TD_TRY(td__make_child_dir(c->fds[c->depth - 1], c->rel, parts[i], crel, sizeof(crel),
				&fd, &name));
			rc = td_dict_new(&child, td_dict_batch_ndim(cur), td_dict_batch_shape(cur));
			if (rc == TD_OK) {
				rc = td__dictname_set_dict_take(cur, parts[i], child);
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
			return rc == TD_ENOTFOUND ? td__error(TD_ENOTFOUND, "%s: no key \"%s\"", fn, parts[i]) :
										rc;
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
	td__commit commit = { .model = c->st->dir.dix };
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
		rc = td__commit_stage(&commit, c->fds[i], td__relpath_str(&c->path), text, strlen(text),
			what);
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
	td__coord_unlock(&c->st->dir.coord);
	close(c->rootfd);
}

/*
 * A change failed and the dict could not be reloaded from disk (out of
 * memory): mark the store stale, so that the next change or
 * td_store_refresh() reloads it, and put back what the change replaced,
 * so that meanwhile readers see the old data, not a placeholder.
 */
static void change_undo(td__change *c)
{
	int code = td_error_last()->code;
	char msg[512];

	c->st->dir.stale = true;
	if (!c->has_undo)
		return;
	snprintf(msg, sizeof(msg), "%s", td_error_last()->message);
	/* The dict is still unlocked for the change; the key needs no allocation. */
	if ((c->undo_handle ? td_dict_set_tensor_take_key(c->undo_dict, c->undo_handle, &c->undo) :
						  td_dict_set_tensor_take(c->undo_dict, c->undo_key, &c->undo)) == TD_OK)
		c->has_undo = false;
	if (code)
		td__error(code, "%s", msg); /* the failure the caller reports, not ours */
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
		uint64_t gen = td__coord_bump(&st->dir.coord);

		if (c->on_commit)
			c->on_commit(c, c->on_commit_arg);

		/* A failed reload keeps the old dict and generation: the next call reloads. */
		if (c->reload) {
			rc = td__store_reload(st, c->rootfd);
			if (rc < 0)
				change_undo(c);
		}
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
		if (td__store_reload(st, c->rootfd) < 0) {
			change_undo(c);
			td_dict_lock(st->dict);
		}
		td__error(saved ? saved : rc, "%s", msg);
	}
	if (c->has_undo)
		td_tensor_release(&c->undo);
	td_key_free(c->undo_handle);
	change_release(c);
	return rc;
}

int td__dir_add(td_store *st, const char *const *parts, size_t n, const td_tensor *t, bool copy,
	const char *fn)
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
	rc = td__dictname_get(&v, d, key);
	if (rc == TD_OK) {
		rc = td__error(TD_EEXISTS, "%s: key \"%s\" already exists", fn, key);
		goto out;
	}
	if (rc != TD_ENOTFOUND)
		goto out; /* out of memory naming the key: not a free name */
	bndim = td_dict_batch_ndim(d);
	if (t->ndim < bndim ||
		memcmp(td_tensor_shape(t), td_dict_batch_shape(d), (size_t)bndim * sizeof(int64_t)) != 0) {
		rc = td__error(TD_ETYPE, "%s: the shape of \"%s\" does not start with the batch shape", fn,
			key);
		goto out;
	}
	rc = td__dir_write_leaf(st, c.fds[c.depth - 1], c.rel, key, t, copy, &mapped);
	if (rc == TD_OK && !copy && td_tensor_numel(&mapped) > 0)
		rc = td_tensor_zero(&mapped); /* a reused file may hold old bytes */
	if (rc == TD_OK)
		rc = td__dictname_set_tensor_take(d, key, &mapped);
	td_tensor_release(&mapped);
	if (rc == TD_OK && c.first_dirty == SIZE_MAX)
		c.first_dirty = c.depth - 1;
out:
	return td__change_end(&c, rc);
}

/* Delete what a removed entry had on disk (best effort: the commit is done). */
static void remove_files(int dirfd, const char *key, const td_value *v)
{
	char *name;
	int fd;

	if (v->kind == TD_VALUE_TENSOR) {
		if (td_tensor_numel(&v->tensor) > 0 && td__encoded_name(key, ".memmap", &name) == TD_OK) {
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
			size_t n = td_dict_len(v->dict), i;
			const char **keys = td__calloc(n ? n : 1, sizeof(*keys));
			const td_value **vals = td__calloc(n ? n : 1, sizeof(*vals));

			/* An empty dict read from disk has no entry table: nothing to list. */
			if (keys && vals && n) {
				td_dict_items(keys, vals, n, v->dict);
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
	td_value value;  /* the removed value: its kind and shape name its files */
	td_dict *holder; /* for a dict, a copy of its tree under `key` */
} removal;

static void delete_removed(td__change *c, void *arg)
{
	const removal *r = arg;
	const td_value *hv;

	if (r->value.kind != TD_VALUE_DICT)
		remove_files(c->fds[c->depth - 1], r->key, &r->value);
	else if (td__dictname_get(&hv, r->holder, r->key) == TD_OK)
		remove_files(c->fds[c->depth - 1], r->key, hv);
	td_error_clear(); /* a file that cannot be deleted is dead space, not an error */
}

int td__dir_remove(td_store *st, const char *const *parts, size_t n, const char *fn)
{
	removal r = { 0 };
	const td_value *v;
	td_dict *d;
	td__change c;
	int rc;

	r.key = parts[n - 1];
	TD_TRY(td__change_begin(&c, st, fn));
	rc = td__change_walk(&c, parts, n, false, fn);
	if (rc < 0)
		goto out;
	d = c.dicts[c.depth - 1];
	rc = td__dictname_get(&v, d, r.key);
	if (rc < 0) {
		if (rc == TD_ENOTFOUND)
			rc = td__error(TD_ENOTFOUND, "%s: no key \"%s\"", fn, r.key);
		goto out;
	}
	/* Keep what names the files to delete after the commit: a nested dict's tree. */
	if (v->kind == TD_VALUE_DICT) {
		rc = td_dict_new(&r.holder, 0, NULL);
		if (rc == TD_OK)
			rc = td__dictname_set_dict(r.holder, r.key, v->dict);
	}
	r.value = *v;
	if (rc == TD_OK)
		rc = td__dictname_del(d, r.key);
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
