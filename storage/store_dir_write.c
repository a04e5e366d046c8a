/* SPDX-License-Identifier: MIT */
/*
 * store_dir_write.c - the directory placement's writer: td_store_memmap
 * in tensordict's memmap layout (leaf files written with few system calls,
 * io.c; every meta.json staged and made current together, journal.c), the
 * leaf files of schema changes, and the recovery of a commit a crashed
 * writer left.
 */
#include "store_dir.h"
#include "dictname.h"
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Under the exclusive lock: finish (or discard) a commit that a crashed
 * writer left in the journal. A redone commit is a schema change the other
 * processes must see, so it bumps the generation.
 */
int td__store_recover(td_store *st, int rootfd)
{
	bool redone;

	TD_TRY(td__journal_recover(rootfd, st->path, &redone));
	if (redone)
		td__coord_bump(&st->dir.coord);
	return TD_OK;
}

/* A file or directory a save made, relative to the store's root. */
typedef struct made_entry {
	char *path;
	bool dir;
} made_entry;

/*
 * A save in progress: every meta.json is staged under a temporary name in
 * `commit` and made current at the end, all together (journal.c); `path`
 * is the directory being written, relative to the root.
 */
typedef struct writer {
	td_store *st;
	bool exist_ok; /* reuse existing leaf files */
	bool like;     /* reserve the leaves' files without writing their bytes */
	bool sync;     /* sync the data and the commit */
	td__commit commit;
	td__relpath path;
	td__writer io; /* writes every leaf's bytes */
	bool dir_new;  /* the directory being written was made by this save (not the root) */
	/* What this save made, removed again if it fails before its commit. */
	made_entry *made;
	size_t nmade, capmade;
} writer;

/* Remember that the save made `name` (a file or a directory) in the current directory. */
static int record_made(writer *w, const char *name, bool dir)
{
	const char *base = td__relpath_str(&w->path);
	size_t len = strlen(base) + strlen(name) + 2;
	char *p;

	if (w->nmade == w->capmade) {
		size_t cap = w->capmade ? 2 * w->capmade : 16;
		made_entry *m = td__realloc(w->made, cap * sizeof(*m));

		if (!m)
			return td__error_nomem(cap * sizeof(*m));
		w->made = m;
		w->capmade = cap;
	}
	p = td__malloc(len);
	if (!p)
		return td__error_nomem(len);
	snprintf(p, len, "%s%s%s", base, base[0] ? "/" : "", name);
	w->made[w->nmade].path = p;
	w->made[w->nmade].dir = dir;
	w->nmade++;
	return TD_OK;
}

/*
 * Release the list of what the save made; with `undo` (a save that failed
 * before its commit: no meta.json names any of it) remove it first, the
 * latest first, so that directories are empty when they are removed. Files
 * that existed before the save (reused with exist_ok) are not in the list.
 */
static void release_made(writer *w, int rootfd, bool undo)
{
	size_t i = w->nmade;

	while (i-- > 0) {
		if (undo)
			unlinkat(rootfd, w->made[i].path, w->made[i].dir ? AT_REMOVEDIR : 0);
		td__free(w->made[i].path);
	}
	td__free(w->made);
	w->made = NULL;
	w->nmade = w->capmade = 0;
}

/* A sub-directory entered while writing, until leave_child_dir(). */
typedef struct level {
	int fd;
	size_t mark;  /* the writer's path before it */
	bool was_new; /* the writer's dir_new before it */
} level;

/*
 * Stage `text` as the directory's meta.json for the commit at the end of
 * the save. A directory this save made is named by no meta.json until its
 * parent's is renamed into place: its own is written in place.
 */
static int stage_meta_text(writer *w, int dirfd, const char *rel, const char *text)
{
	char what[TD_REL_MAX];

	td__dir_join(what, sizeof(what), rel, "meta.json");
	return (w->dir_new ? td__commit_stage_new : td__commit_stage)(&w->commit, dirfd,
		td__relpath_str(&w->path), text, strlen(text), what);
}

/* stage_meta_text() of `meta`'s text. Consumes `meta`. */
static int write_meta(writer *w, int dirfd, const char *rel, json_t *meta)
{
	char *text;
	int rc;

	TD_TRY(td__meta_dump(meta, &text));
	rc = stage_meta_text(w, dirfd, rel, text);
	free(text);
	return rc;
}

/*
 * Make a save visible: every staged meta.json becomes current at once
 * (after one sync of the leaf data, unless the save is TD_SYNC_NONE),
 * through the journal when there are several. With `ok` false the staged
 * files are removed.
 */
static int commit_meta(writer *w, int rootfd, bool ok)
{
	int rc = TD_OK;

	if (ok)
		rc = td__commit_run(&w->commit, rootfd, w->sync, w->st->path);
	else
		td__commit_abort(&w->commit);
	td__relpath_free(&w->path);
	return rc;
}

/*
 * Create (or reuse) one leaf file, write the data in and map it. Writing
 * every byte reserves the file's blocks; `like` leaves, which are
 * not written, are reserved with fallocate.
 */
static int write_leaf(writer *w, int dirfd, const char *rel, const char *key, const td_tensor *src,
	td_tensor *out)
{
	char what[TD_REL_MAX], *fname;
	size_t nbytes = td_tensor_nbytes(src);
	bool like = w->like, created = false;
	td_buffer *map = NULL;
	int fd = -1, rc;

	if (nbytes == 0)
		return td_tensor_empty(out, src->dtype, src->ndim, td_tensor_shape(src));
	TD_TRY(td__encoded_name(key, ".memmap", &fname));
	td__dir_join(what, sizeof(what), rel, fname);
	rc = td__open_reserved(dirfd, fname, like ? nbytes : 0, w->exist_ok, "td_store_memmap", what,
		&fd, &created);
	if (created) {
		int r2 = record_made(w, fname, false); /* before anything can fail after it */

		if (rc == TD_OK)
			rc = r2;
	}
	td__free(fname);
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (!like) {
		/* pwritev, not the fresh mapping: no page fault per 4 KiB. */
		td__writer_reset(&w->io, fd, 0, what);
		rc = td__writer_put_tensor(&w->io, src);
		if (rc == TD_OK)
			rc = td__writer_flush(&w->io);
	}
	if (rc == TD_OK)
		rc = td__map_fd(&map, fd, nbytes, true, what);
	if (rc == TD_OK)
		rc = td_tensor_from_buffer(out, map, src->dtype, src->ndim, td_tensor_shape(src), NULL, 0);
	if (rc == TD_OK) {
		rc = td__store_track(w->st, map);
		if (rc < 0)
			td_tensor_release(out);
	}
	td_buffer_unref(map);
	close(fd);
	return rc;
}

/* Create (or reuse) a sub-collection's directory and enter it in the writer's path. */
static int enter_child_dir(writer *w, int dirfd, const char *rel, const char *key, char *crel,
	level *lv)
{
	char *name;
	int made, rc;

	made = td__make_child_dir(dirfd, rel, key, crel, TD_REL_MAX, &lv->fd, &name);
	if (made < 0)
		return made;
	rc = made == 1 ? record_made(w, name, true) : TD_OK;
	if (rc == TD_OK)
		rc = td__relpath_push(&w->path, name, &lv->mark);
	td__free(name);
	if (rc < 0) {
		close(lv->fd);
		return rc;
	}
	lv->was_new = w->dir_new;
	w->dir_new = made == 1;
	return TD_OK;
}

static void leave_child_dir(writer *w, const level *lv)
{
	td__relpath_pop(&w->path, lv->mark);
	w->dir_new = lv->was_new;
	close(lv->fd);
}

static int write_string(writer *w, int dirfd, const char *rel, const char *key, const td_value *v)
{
	char crel[TD_REL_MAX];
	json_t *meta;
	level lv;
	int rc;

	TD_TRY(enter_child_dir(w, dirfd, rel, key, crel, &lv));
	meta = json_object();
	if (meta &&
		(json_object_set_new(meta, "_type", json_string(TD_TYPE_NONTENSORDATA)) < 0 ||
			json_object_set_new(meta, "data", json_stringn(v->blob.data, v->blob.length)) < 0 ||
			json_object_set_new(meta, "_metadata", json_null()) < 0 ||
			json_object_set_new(meta, "_is_non_tensor", json_true()) < 0)) {
		json_decref(meta);
		meta = NULL;
	}
	rc = write_meta(w, lv.fd, crel, meta);
	leave_child_dir(w, &lv);
	return rc;
}

static int set_strings_copy(td_dict *dst, const char *key, const td_strings *s)
{
	const char **texts = td__calloc(s->numel ? (size_t)s->numel : 1, sizeof(*texts));
	int64_t i;
	int rc;

	if (!texts)
		return td__error_nomem((size_t)s->numel * sizeof(*texts));
	for (i = 0; i < s->numel; i++)
		texts[i] = td_strings_at(NULL, s, i);
	rc = td__dictname_set_strings(dst, key, s->ndim, s->shape, texts);
	td__free(texts);
	return rc;
}

/* A NonTensorStack's directory: only its meta.json, as tensordict writes it. */
static int write_strings(writer *w, int dirfd, const char *rel, const char *key,
	const td_strings *s)
{
	char crel[TD_REL_MAX], *text;
	level lv;
	int rc;

	TD_TRY(enter_child_dir(w, dirfd, rel, key, crel, &lv));
	rc = td__strings_meta_text(s, -1, &text);
	if (rc == TD_OK) {
		rc = stage_meta_text(w, lv.fd, crel, text);
		free(text);
	}
	leave_child_dir(w, &lv);
	return rc;
}

static int write_dict(writer *w, int dirfd, const char *rel, const td_dict *src, td_dict **out);
static int write_lazy(writer *w, int dirfd, const char *rel, const td_dict *src, td_dict **out);

/* Write one entry's data (files, sub-directories) and store its mapped copy in dst. */
static int write_entry(writer *w, int dirfd, const char *rel, const char *key, const td_value *v,
	td_dict *dst)
{
	int rc;

	switch (v->kind) {
	case TD_VALUE_TENSOR: {
		td_tensor t = TD_TENSOR_INIT;

		rc = write_leaf(w, dirfd, rel, key, &v->tensor, &t);
		if (rc == TD_OK) {
			rc = td__dictname_set_tensor_take(dst, key, &t);
			td_tensor_release(&t);
		}
		return rc;
	}
	case TD_VALUE_DICT: {
		char crel[TD_REL_MAX];
		td_dict *child = NULL;
		level lv;

		TD_TRY(enter_child_dir(w, dirfd, rel, key, crel, &lv));
		/* A lazy stack as a value: its own meta.json and children 0/, 1/, ... */
		if (td_dict_is_lazy(v->dict))
			rc = write_lazy(w, lv.fd, crel, v->dict, &child);
		else
			rc = write_dict(w, lv.fd, crel, v->dict, &child);
		leave_child_dir(w, &lv);
		if (rc == TD_OK) {
			rc = td__dictname_set_dict_take(dst, key, child);
			if (rc < 0)
				td_dict_free(child);
		}
		return rc;
	}
	case TD_VALUE_STRING:
		TD_TRY(write_string(w, dirfd, rel, key, v));
		return td__dictname_set_string(dst, key, v->blob.data);
	case TD_VALUE_STRINGS:
		TD_TRY(write_strings(w, dirfd, rel, key, v->strings));
		return set_strings_copy(dst, key, v->strings);
	default:
		return td__error(TD_EINVAL, "td_store_memmap: \"%s\": unsupported value kind %d", key,
			(int)v->kind);
	}
}

static int write_dict(writer *w, int dirfd, const char *rel, const td_dict *src, td_dict **out)
{
	size_t n = td_dict_items(NULL, NULL, 0, src), i;
	const char **keys = NULL;
	const td_value **vals = NULL;
	td_dict *d = NULL;
	int rc;

	*out = NULL;
	TD_TRY(td_dict_new(&d, td_dict_batch_ndim(src), td_dict_batch_shape(src)));
	keys = td__calloc(n ? n : 1, sizeof(*keys));
	vals = td__calloc(n ? n : 1, sizeof(*vals));
	if (!keys || !vals) {
		rc = td__error_nomem(n * sizeof(*keys));
		goto out;
	}
	td_dict_items(keys, vals, n, src);
	for (i = 0; i < n; i++) {
		rc = write_entry(w, dirfd, rel, keys[i], vals[i], d);
		if (rc < 0)
			goto out;
	}
	rc = write_meta(w, dirfd, rel, td__build_meta(d, -1));
	if (rc < 0)
		goto out;
	*out = d;
	d = NULL;
out:
	td__free(keys);
	td__free(vals);
	td_dict_free(d);
	return rc;
}

/*
 * A lazy stack in tensordict's layout: its children in "0/", "1/", ...
 * and a meta.json with the class and stack_dim; `*out` becomes a lazy
 * stack of the mapped children.
 */
static int write_lazy(writer *w, int dirfd, const char *rel, const td_dict *src, td_dict **out)
{
	size_t n = td_lazy_count(src), i, made = 0;
	char name[24], crel[TD_REL_MAX];
	td_dict **kids;
	json_t *meta;
	int rc = TD_OK;

	*out = NULL;
	/* A directory "n/" left by a larger stack would be read as one more child. */
	snprintf(name, sizeof(name), "%zu", n);
	if (faccessat(dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		td__dir_join(crel, sizeof(crel), rel, name);
		return td__error(TD_EEXISTS,
			"td_store_memmap: %s exists, left by a larger lazy "
			"stack: it would be read as child %zu",
			crel, n);
	}
	kids = td__calloc(n, sizeof(*kids));
	if (!kids)
		return td__error_nomem(n * sizeof(*kids));
	for (i = 0; rc == TD_OK && i < n; i++) {
		const td_dict *child = td_lazy_child(src, i);
		level lv;

		/* Decimal names need no encoding: the encoded name is the name. */
		snprintf(name, sizeof(name), "%zu", i);
		rc = enter_child_dir(w, dirfd, rel, name, crel, &lv);
		if (rc < 0)
			break;
		rc = td_dict_is_lazy(child) ? write_lazy(w, lv.fd, crel, child, &kids[i]) :
									  write_dict(w, lv.fd, crel, child, &kids[i]);
		leave_child_dir(w, &lv);
		if (rc == TD_OK)
			made++;
	}
	meta = json_object();
	if (rc == TD_OK &&
		(!meta || json_object_set_new(meta, "_type", json_string(TD_TYPE_LAZYSTACK)) < 0 ||
			json_object_set_new(meta, "_format_version", json_integer(1)) < 0 ||
			json_object_set_new(meta, "_class", json_string("tensordict:LazyStackedTensorDict")) <
				0 ||
			json_object_set_new(meta, "stack_dim", json_integer(td_lazy_stack_dim(src))) < 0 ||
			json_object_set_new(meta, "stack_dim_name", json_null()) < 0)) {
		json_decref(meta);
		meta = NULL;
	}
	if (rc == TD_OK)
		rc = write_meta(w, dirfd, rel, meta);
	else
		json_decref(meta);
	if (rc == TD_OK) {
		rc = td_lazy_stack(out, kids, n, td_lazy_stack_dim(src), TD_LAZY_TAKE);
		if (rc == TD_OK)
			made = 0;
	}
	for (i = 0; i < made; i++)
		td_dict_free(kids[i]);
	td__free(kids);
	return rc;
}

/* One leaf of a schema change, reusing a file an add that crashed left (store_dir.h). */
int td__dir_write_leaf(td_store *st, int dirfd, const char *rel, const char *key,
	const td_tensor *t, bool copy, td_tensor *out)
{
	writer w;
	int rc;

	memset(&w, 0, sizeof(w));
	w.st = st;
	w.exist_ok = true;
	w.like = !copy;
	w.sync = true;
	rc = td__writer_init(&w.io, -1, 0, rel);
	if (rc == TD_OK)
		rc = write_leaf(&w, dirfd, rel, key, t, out);
	td__writer_free(&w.io);
	release_made(&w, dirfd, rc < 0);
	return rc;
}

/*
 * Save `src` into the directory st->path (created if missing): every leaf
 * file and directory written, every meta.json staged, then all made current
 * together as one schema change (journal.c), under the exclusive lock. A
 * save that fails before its commit leaves nothing it made behind.
 */
int td__dir_memmap(td_store *st, const td_dict *src, const td_store_memmap_opts *opts)
{
	const char *path = st->path;
	writer w;
	bool root_made = false, wrote = false;
	int dirfd, rc;

	if (mkdir(path, 0777) == 0)
		root_made = true;
	else if (errno != EEXIST)
		return td__error_os(td__status_from_errno(errno), errno, "td_store_memmap: mkdir %s", path);
	TD_TRY(td__open_root(path, "td_store_memmap", &dirfd));
	memset(&w, 0, sizeof(w));
	w.st = st;
	w.exist_ok = opts->exist_ok;
	w.like = opts->like;
	w.sync = opts->sync == TD_SYNC_FULL;
	rc = td__writer_init(&w.io, -1, 0, path);
	/* The whole save is one schema change for processes that have the directory open. */
	if (rc == TD_OK)
		rc = td__coord_open(&st->dir.coord, dirfd, path, true);
	if (rc == TD_OK)
		rc = td__dirmodel_new(&st->dir.dix);
	w.commit.model = st->dir.dix; /* told each meta.json, for the directory key index */
	if (rc == TD_OK)
		rc = td__coord_lock(&st->dir.coord, true);
	if (rc == TD_OK) {
		int crc;

		rc = td__store_recover(st, dirfd);
		if (rc == TD_OK)
			rc = td_dict_is_lazy(src) ? write_lazy(&w, dirfd, "", src, &st->dict) :
										write_dict(&w, dirfd, "", src, &st->dict);
		wrote = rc == TD_OK;
		crc = commit_meta(&w, dirfd, rc == TD_OK);
		/*
		 * A save that failed while writing (a full disk, say) removes the
		 * leaf files and directories it made: no meta.json names them. One
		 * whose commit failed keeps them, as the journal may yet redo it.
		 */
		release_made(&w, dirfd, !wrote);
		if (rc == TD_OK)
			rc = crc;
		if (rc == TD_OK)
			st->generation = td__coord_bump(&st->dir.coord);
		if (rc == TD_OK)
			td__dirindex_update(st, dirfd);
		td__coord_unlock(&st->dir.coord);
	}
	release_made(&w, dirfd, false);
	td__writer_free(&w.io);
	if (rc < 0 && !wrote && root_made) {
		/* Nothing of the store is left: the directory goes too (if it is empty). */
		unlinkat(dirfd, TD_COORD_NAME, 0);
		close(dirfd);
		rmdir(path);
	} else {
		close(dirfd);
	}
	return rc;
}
