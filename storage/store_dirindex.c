/* SPDX-License-Identifier: MIT */
/*
 * store_dirindex.c - a directory store's key index `.tdstore-index` in use
 * (doc/format.md section 7): the open that builds the dict from it once
 * every meta.json it lists still holds the bytes it lists, and the writer
 * that rewrites it after every save and schema change, from the store's
 * dict and the model of what each meta.json holds. The index is derived
 * data: whatever goes wrong with it, the meta.json files are read instead.
 */
#include "dirindex.h"
#include "store_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* Room for a file name: enc() may triple a key; longer names do not open anyway. */
#define NAME_BUF 1024

/* TDSTORE_DIR_INDEX=0 (or "off"): this process neither reads nor writes indexes. */
static bool index_enabled(void)
{
	const char *s = getenv("TDSTORE_DIR_INDEX");

	return !s || (strcmp(s, "0") != 0 && strcmp(s, "off") != 0);
}

/* ------------------------------------------------------------------------ */
/* Opening through the index                                                 */
/* ------------------------------------------------------------------------ */

/* A dict on the way from the root to the record being read, with its home open. */
typedef struct frame {
	uint32_t record;
	int fd;
	size_t mark; /* the path's length before the dict's own name */
} frame;

/* The state of an open through the index (the payload of td__keyindex_build). */
typedef struct reader {
	td_store *st;
	const td__dirindex *dx;
	int rootfd;
	bool writable;
	frame stack[TD_KEY_MAX_DEPTH];
	size_t depth;
	uint32_t next_dir, next_raw; /* cursors into the tables, in record order */
	td__dirmodel *model;         /* read-write opens: the model of what was read */
	td__relpath path;            /* with a model: the directory being read */
	char *buf;                   /* the meta.json being checked */
	size_t cap;
	const char *what;
} reader;

/* The store is not what the index says (or cannot be read as it says). */
static int stale(const reader *rd, const char *name, const char *msg)
{
	return td__error(TD_ECORRUPT, "%s: %s: %s", rd->what, name[0] ? name : ".", msg);
}

static int path_push(reader *rd, const char *name)
{
	size_t mark;

	return rd->model ? td__relpath_push(&rd->path, name, &mark) : TD_OK;
}

/* Close the dicts above the parent of the next record. */
static void pop_to(reader *rd, uint32_t parent)
{
	while (rd->depth > 0 && rd->stack[rd->depth - 1].record != parent) {
		frame *f = &rd->stack[--rd->depth];

		close(f->fd);
		td__relpath_pop(&rd->path, f->mark);
	}
}

/*
 * The name of record `r` in its parent's home, as a loader finds it:
 * enc(key) + suffix, or with `raw` the key itself + suffix, which a loader
 * opens only when the encoded name does not exist.
 */
static int child_name(const reader *rd, int parentfd, const td__keyrec *r, const char *suffix,
	bool raw, char *name)
{
	if (!td__dirindex_name(r->key, suffix, name, NAME_BUF))
		return stale(rd, r->key, "a name too long to open");
	if (!raw)
		return TD_OK;
	if (faccessat(parentfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
		return stale(rd, name, "the encoded name exists beside the raw one");
	if (snprintf(name, NAME_BUF, "%s%s", r->key, suffix) >= NAME_BUF)
		return stale(rd, r->key, "a name too long to open");
	return TD_OK;
}

/* Whether the meta.json of `dirfd` holds exactly the bytes entry `e` lists. */
static int check_meta(reader *rd, int dirfd, const td__dirent *e, const char *name)
{
	struct stat sb;
	size_t done = 0;
	int fd = openat(dirfd, "meta.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int rc = TD_OK;

	if (fd < 0)
		return stale(rd, name, "no meta.json");
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != e->meta_length)
		rc = stale(rd, name, "meta.json changed size");
	if (rc == TD_OK && e->meta_length > rd->cap) {
		char *p = td__realloc(rd->buf, e->meta_length);

		if (!p)
			rc = td__error_nomem(e->meta_length);
		else {
			rd->buf = p;
			rd->cap = e->meta_length;
		}
	}
	while (rc == TD_OK && done < e->meta_length) {
		ssize_t n = read(fd, rd->buf + done, e->meta_length - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			rc = stale(rd, name, "meta.json cannot be read");
		else
			done += (size_t)n;
	}
	close(fd);
	if (rc == TD_OK && XXH3_64bits(rd->buf, done) != e->meta_hash)
		rc = stale(rd, name, "meta.json changed");
	if (rc == TD_OK && rd->model)
		rc = td__dirmodel_set(rd->model, TD_DIRMODEL_DIR, td__relpath_str(&rd->path), rd->path.len,
			e->meta_length, e->meta_hash, e->role == TD_DIRINDEX_SHELL);
	return rc;
}

/*
 * A dict: its directory (the root, or a child of its parent's home), each
 * of its entries checked, through its tensorclass shells to its home,
 * which stays open for its entries.
 */
static int visit_dict(reader *rd, uint32_t i, const td__keyrec *r)
{
	const td__dirent *e = &rd->dx->dirs[rd->next_dir];
	char name[NAME_BUF];
	size_t mark = rd->path.len;
	int fd, rc = TD_OK;

	if (rd->depth == TD_KEY_MAX_DEPTH)
		return stale(rd, r->key, "nested too deep");
	if (i == 0) {
		name[0] = '\0';
		fd = fcntl(rd->rootfd, F_DUPFD_CLOEXEC, 0);
	} else {
		TD_TRY(child_name(rd, rd->stack[rd->depth - 1].fd, r, "",
			(e->flags & TD_DIRINDEX_DIR_RAW) != 0, name));
		fd = openat(rd->stack[rd->depth - 1].fd, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && (rc = path_push(rd, name)) < 0) {
			close(fd);
			return rc;
		}
	}
	if (fd < 0)
		return stale(rd, name, "the directory cannot be opened");
	for (;;) {
		int home;

		e = &rd->dx->dirs[rd->next_dir++];
		rc = check_meta(rd, fd, e, name);
		if (rc < 0 || e->role == TD_DIRINDEX_HOME)
			break;
		/* A tensorclass: its fields are in _tensordict/. */
		home = openat(fd, "_tensordict", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = home;
		if (fd < 0)
			return stale(rd, name, "a tensorclass without _tensordict");
		rc = path_push(rd, "_tensordict");
		if (rc < 0)
			break;
	}
	if (rc < 0) {
		close(fd);
		td__relpath_pop(&rd->path, mark);
		return rc;
	}
	rd->stack[rd->depth].record = i;
	rd->stack[rd->depth].fd = fd;
	rd->stack[rd->depth].mark = mark;
	rd->depth++;
	return TD_OK;
}

/* A string or an array of strings: its directory's meta.json checked. */
static int visit_named(reader *rd, const td__keyrec *r)
{
	const td__dirent *e = &rd->dx->dirs[rd->next_dir++];
	char name[NAME_BUF];
	size_t mark = rd->path.len;
	int fd, rc;

	TD_TRY(child_name(rd, rd->stack[rd->depth - 1].fd, r, "", (e->flags & TD_DIRINDEX_DIR_RAW) != 0,
		name));
	fd = openat(rd->stack[rd->depth - 1].fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return stale(rd, name, "the directory cannot be opened");
	rc = path_push(rd, name);
	if (rc == TD_OK)
		rc = check_meta(rd, fd, e, name);
	close(fd);
	td__relpath_pop(&rd->path, mark);
	return rc;
}

/* A tensor with elements: its leaf file checked (regular, long enough) and mapped. */
static int visit_tensor(reader *rd, uint32_t i, const td__keyrec *r, td_tensor *t)
{
	const td__dirindex *dx = rd->dx;
	bool raw = rd->next_raw < dx->nraw && dx->raw[rd->next_raw] == i;
	int dirfd = rd->stack[rd->depth - 1].fd, fd, rc;
	char name[NAME_BUF];
	td_buffer *map = NULL;
	struct stat sb;

	rd->next_raw += raw;
	TD_TRY(child_name(rd, dirfd, r, ".memmap", raw, name));
	fd = openat(dirfd, name, (rd->writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return stale(rd, name, "the leaf file cannot be opened");
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < r->length)
		rc = stale(rd, name, "not a regular file as long as its data");
	else
		rc = td__map_fd(&map, fd, (size_t)r->length, rd->writable, name);
	close(fd);
	if (rc == TD_OK && rd->writable)
		rc = td__store_track(rd->st, map);
	if (rc == TD_OK)
		rc = td_tensor_from_buffer(t, map, r->dtype, r->ndim, r->shape, NULL, 0);
	td_buffer_unref(map);
	if (rc == TD_OK && raw && rd->model) {
		size_t mark;

		rc = td__relpath_push(&rd->path, name, &mark);
		if (rc == TD_OK)
			rc = td__dirmodel_set(rd->model, TD_DIRMODEL_RAW, td__relpath_str(&rd->path),
				rd->path.len, 0, 0, false);
		td__relpath_pop(&rd->path, mark);
	}
	return rc;
}

/* td__keyindex_build's visitor: every record checked against the files before it is added. */
static int visit(const td__keyindex *ix, uint32_t i, td_tensor *t, void *payload)
{
	reader *rd = payload;
	const td__keyrec *r = &ix->recs[i];

	if (i > 0)
		pop_to(rd, r->parent); /* the records are in preorder (td__dirindex_parse) */
	switch (r->kind) {
	case TD_KEYINDEX_KIND_DICT:
		return visit_dict(rd, i, r);
	case TD_KEYINDEX_KIND_TENSOR:
		return visit_tensor(rd, i, r, t);
	default:
		return visit_named(rd, r);
	}
}

/* Drop the mappings tracked after the first `n` (an open that did not finish). */
static void untrack_from(td_store *st, size_t n)
{
	while (st->dir.nmaps > n)
		td_buffer_unref(st->dir.maps[--st->dir.nmaps]);
}

/* Read and parse the index file; TD_ENOTFOUND when there is none. */
static int read_index(int rootfd, td__dirindex *dx, const char *what)
{
	char *buf;
	size_t len;
	int rc;

	TD_TRY(td__read_small_file(rootfd, TD_DIRINDEX_NAME, (size_t)TD_DIRINDEX_MAX_BYTES, &buf, &len,
		what));
	rc = td__dirindex_parse(dx, buf, len, what);
	td__free(buf);
	return rc;
}

/* Record why the index was not used, forget the message, and pass the status on. */
static int not_used(td_store *st, int state, int rc)
{
	st->dir.dix_state = state;
	st->dir.dix_code = rc;
	td_error_clear();
	return rc;
}

int td__dirindex_load(td_store *st, int rootfd, td_dict **out, td__dirmodel **model_out)
{
	char what[512];
	size_t nmaps = st->dir.nmaps;
	td__dirindex dx;
	reader rd;
	int rc;

	*out = NULL;
	*model_out = NULL;
	if (!index_enabled())
		return not_used(st, TD_DIX_OFF, TD_ENOTSUP);
	/* A commit may be half done: only the meta.json files (and the journal) tell. */
	if (faccessat(rootfd, TD_JOURNAL_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
		return not_used(st, TD_DIX_JOURNAL, TD_EBUSY);
	snprintf(what, sizeof(what), "%s/" TD_DIRINDEX_NAME, st->path);
	rc = read_index(rootfd, &dx, what);
	if (rc < 0)
		return not_used(st, rc == TD_ENOTFOUND ? TD_DIX_ABSENT : TD_DIX_REFUSED, rc);
	memset(&rd, 0, sizeof(rd));
	rd.st = st;
	rd.dx = &dx;
	rd.rootfd = rootfd;
	rd.writable = st->writable;
	rd.what = what;
	rc = rd.writable ? td__dirmodel_new(&rd.model) : TD_OK;
	if (rc == TD_OK)
		rc = td__keyindex_build(&dx.ix, visit, &rd, out, what);
	pop_to(&rd, TD_KEYINDEX_NO_PARENT);
	td__relpath_free(&rd.path);
	td__free(rd.buf);
	td__dirindex_free(&dx);
	if (rc < 0) {
		untrack_from(st, nmaps);
		td__dirmodel_free(rd.model);
		return not_used(st, TD_DIX_STALE, rc);
	}
	*model_out = rd.model;
	st->dir.dix_state = TD_DIX_USED;
	st->dir.dix_code = TD_OK;
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Writing the index                                                         */
/* ------------------------------------------------------------------------ */

/* The index being built for a store's dict, from its model. */
typedef struct builder {
	td__dirmodel *m;
	td__dirindex *dx;
	td__relpath path; /* the directory of the record being described */
	uint32_t records[TD_KEY_MAX_DEPTH];
	size_t homes[TD_KEY_MAX_DEPTH]; /* path length at each open dict's home */
	size_t depth;
} builder;

static int unknown(const char *path, const char *what)
{
	return td__error(TD_ENOTSUP, "store index: %s \"%s\" is not in the model", what, path);
}

/* The model's entry for the builder's current path, marked as named by the index. */
static td__dirmodel_ent *lookup(builder *b, uint8_t kind)
{
	td__dirmodel_ent *e = td__dirmodel_find(b->m, kind, td__relpath_str(&b->path), b->path.len);

	if (e)
		e->used = true;
	return e;
}

static int emit(builder *b, uint32_t i, uint8_t role, bool raw, const td__dirmodel_ent *e)
{
	td__dirent d = { i, role, raw ? TD_DIRINDEX_DIR_RAW : 0, e->meta_length, e->meta_hash };

	return td__dirindex_push_dir(b->dx, &d);
}

/*
 * Enter the directory of record `r` under the current path, named as a
 * loader finds it: enc(key) when the model knows that directory, else
 * the raw key where a loader would try it.
 */
static int enter_named(builder *b, const td__keyrec *r, bool *raw, td__dirmodel_ent **out)
{
	char name[NAME_BUF];
	size_t mark;
	int n;

	*raw = false;
	if (!td__dirindex_name(r->key, "", name, sizeof(name)))
		return td__error(TD_ENOTSUP, "store index: key \"%s\" too long", r->key);
	TD_TRY(td__relpath_push(&b->path, name, &mark));
	*out = lookup(b, TD_DIRMODEL_DIR);
	n = td_store_encode_key(NULL, 0, r->key);
	if (*out || !td__key_legacy_safe(r->key, true) || (size_t)n == r->key_len)
		return *out ? TD_OK : unknown(td__relpath_str(&b->path), "directory");
	td__relpath_pop(&b->path, mark);
	TD_TRY(td__relpath_push(&b->path, r->key, &mark));
	*out = lookup(b, TD_DIRMODEL_DIR);
	*raw = true;
	return *out ? TD_OK : unknown(td__relpath_str(&b->path), "directory");
}

/* A dict's directory entries: its shells, then its home, which becomes the current dict. */
static int describe_dict(builder *b, uint32_t i, const td__keyrec *r)
{
	td__dirmodel_ent *e;
	bool raw = false;
	unsigned shells;

	if (i == 0)
		e = lookup(b, TD_DIRMODEL_DIR);
	else
		TD_TRY(enter_named(b, r, &raw, &e));
	for (shells = 0; e && e->shell && shells < TD_DIRINDEX_MAX_SHELLS; shells++) {
		size_t mark;

		TD_TRY(emit(b, i, TD_DIRINDEX_SHELL, raw, e));
		raw = false;
		TD_TRY(td__relpath_push(&b->path, "_tensordict", &mark));
		e = lookup(b, TD_DIRMODEL_DIR);
	}
	if (!e || e->shell)
		return unknown(td__relpath_str(&b->path), "the home of a dict");
	TD_TRY(emit(b, i, TD_DIRINDEX_HOME, raw, e));
	if (b->depth == TD_KEY_MAX_DEPTH)
		return td__error(TD_ENOTSUP, "store index: dicts nested too deep");
	b->records[b->depth] = i;
	b->homes[b->depth] = b->path.len;
	b->depth++;
	return TD_OK;
}

/* Record `i` of the index: its directory entries, or for a tensor its file's name. */
static int describe(builder *b, uint32_t i)
{
	const td__keyrec *r = &b->dx->ix.recs[i];
	td__dirmodel_ent *e;
	bool raw;

	if (i > 0) {
		while (b->depth > 0 && b->records[b->depth - 1] != r->parent)
			b->depth--;
		td__relpath_pop(&b->path, b->homes[b->depth - 1]);
	}
	switch (r->kind) {
	case TD_KEYINDEX_KIND_DICT:
		return describe_dict(b, i, r);
	case TD_KEYINDEX_KIND_TENSOR: {
		char name[NAME_BUF];
		size_t mark;

		if (r->length == 0 || b->m->nraw == 0 || r->key_len + 8 > sizeof(name))
			return TD_OK;
		snprintf(name, sizeof(name), "%s.memmap", r->key);
		TD_TRY(td__relpath_push(&b->path, name, &mark));
		return lookup(b, TD_DIRMODEL_RAW) ? td__dirindex_push_raw(b->dx, i) : TD_OK;
	}
	default:
		TD_TRY(enter_named(b, r, &raw, &e));
		if (e->shell)
			return unknown(td__relpath_str(&b->path), "a string's directory");
		return emit(b, i,
			r->kind == TD_KEYINDEX_KIND_STRING ? TD_DIRINDEX_STRING : TD_DIRINDEX_STRINGS, raw, e);
	}
}

/* The index of st->dict: its records, and its tables from the model. */
static int build_index(td_store *st, td__dirindex *dx)
{
	builder b;
	uint32_t i;
	int rc;

	if (!st->dir.dix || st->dir.dix->poisoned)
		return td__error(TD_ENOTSUP, "store index: no model of the store's meta.json files");
	rc = td__holds_lazy(st->dict);
	if (rc < 0)
		return rc;
	if (rc)
		return td__error(TD_ENOTSUP,
			"store index: lazy stacks are read from their meta.json "
			"files");
	dx->generation = dx->ix.generation = td__coord_generation(&st->dir.coord);
	dx->ix.flags = TD_KEYINDEX_F_DIRECTORY;
	TD_TRY(td__keyindex_add_dict(&dx->ix, st->dict, TD_KEYINDEX_NO_PARENT, ""));
	memset(&b, 0, sizeof(b));
	b.m = st->dir.dix;
	b.dx = dx;
	for (i = 0, rc = TD_OK; rc == TD_OK && i < dx->ix.n; i++)
		rc = describe(&b, i);
	td__relpath_free(&b.path);
	return rc;
}

void td__dirindex_update(td_store *st, int rootfd)
{
	char what[512];
	td__dirindex dx;
	void *buf = NULL;
	size_t len = 0;
	int rc;

	if (!index_enabled())
		return;
	memset(&dx, 0, sizeof(dx));
	snprintf(what, sizeof(what), "%s/" TD_DIRINDEX_NAME, st->path);
	rc = build_index(st, &dx);
	if (rc == TD_OK)
		rc = td__dirindex_size(&dx, &len);
	if (rc == TD_OK && !(buf = td__malloc(len)))
		rc = td__error_nomem(len);
	if (rc == TD_OK) {
		td__dirindex_encode(&dx, buf, len);
		/* Derived data: a torn or lost index only means the meta.json files are read. */
		rc = td__write_file_atomic(rootfd, TD_DIRINDEX_NAME, buf, len, true, what);
	}
	if (rc == TD_OK)
		rc = td__dirmodel_prune(st->dir.dix);
	if (rc < 0) {
		/* An index that may not match would only be checked and refused: remove it. */
		unlinkat(rootfd, TD_DIRINDEX_NAME, 0);
		td__dirmodel_free(st->dir.dix);
		st->dir.dix = NULL;
	}
	td__free(buf);
	td__dirindex_free(&dx);
	td_error_clear();
}
