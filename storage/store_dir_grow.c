/* SPDX-License-Identifier: MIT */
/*
 * store_dir_grow.c - growing an open directory store along dim 0:
 * td_store_grow (batch dim 0 of every dict and leaf, committed as one
 * journaled change of every meta.json) and td_store_grow_leaf (dim 0 of
 * one leaf of a dict without batch dims). Crash ordering: leaf files are
 * extended, their new blocks reserved and their new bytes zeroed, and
 * everything is synced before any meta.json names the new size; files are
 * never truncated, so a crash leaves at worst longer files than declared.
 */
#include "store_dir.h"
#include "dictname.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A growth in progress: the new dim 0 and the meta.json files staged so far. */
typedef struct grower {
	const char *fn;
	int64_t size;
	td__commit commit;
	td__relpath path;
} grower;

/* Bytes of a leaf shaped like `t` with dim 0 set to `dim0`, overflow-checked. */
static int grown_nbytes(const td_tensor *t, int64_t dim0, const char *key, const char *fn,
	size_t *out)
{
	size_t itemsize = td_dtype_size(t->dtype);
	int64_t numel = dim0;
	int i;

	for (i = 1; i < t->ndim; i++)
		if (!td__mul_i64(numel, td_tensor_shape(t)[i], &numel))
			break;
	if (i < t->ndim || (uint64_t)numel > (uint64_t)PTRDIFF_MAX / itemsize)
		return td__error(TD_EOVERFLOW, "%s: \"%s\" with %lld rows: the byte size overflows", fn,
			key, (long long)dim0);
	*out = (size_t)numel * itemsize;
	return TD_OK;
}

/* Write zeros over [from, to) of fd. */
static int zero_range(int fd, size_t from, size_t to, const char *what)
{
	static const char zeros[65536];

	while (from < to) {
		size_t n = to - from < sizeof(zeros) ? to - from : sizeof(zeros);
		ssize_t w = pwrite(fd, zeros, n, (off_t)from);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return td__error_os(td__status_from_errno(w < 0 ? errno : EIO), w < 0 ? errno : EIO,
				"%s: write", what);
		from += (size_t)w;
	}
	return TD_OK;
}

/*
 * Make the file of leaf `key` under `dirfd` at least `new_bytes` long with
 * every byte past the leaf's `old_bytes` zero. The blocks are reserved
 * first (posix_fallocate: a full disk fails here, not with SIGBUS at a
 * later access); bytes an earlier write left past old_bytes (a growth
 * that never committed, tensordict's trailing bytes) are then zeroed. A
 * leaf without elements has no file yet: it is created. Never truncates.
 */
static int extend_leaf_file(int dirfd, const char *rel, const char *key, size_t old_bytes,
	size_t new_bytes, const char *fn)
{
	char what[TD_REL_MAX], *name = NULL;
	uint64_t fsize;
	int fd, err, rc;

	if (new_bytes <= old_bytes)
		return TD_OK;
	if (old_bytes == 0) {
		TD_TRY(td__encoded_name(key, ".memmap", &name));
		fd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
		err = errno;
	} else {
		TD_TRY(td__open_leaf_file(dirfd, key, O_RDWR, &fd, &err, &name));
	}
	td__dir_join(what, sizeof(what), rel, name);
	td__free(name);
	if (fd < 0)
		return err == ENOENT ? td__error(TD_ECORRUPT, "%s: %s: declared but missing", fn, what) :
							   td__file_error(err, what, "open");
	rc = td__fstat_regular(fd, what, &fsize);
	if (rc == TD_OK) {
		int e = posix_fallocate(fd, 0, (off_t)new_bytes);

		if (e != 0)
			rc = td__error_os(td__status_from_errno(e), e, "%s: %s: reserving %zu bytes", fn, what,
				new_bytes);
	}
	if (rc == TD_OK && fsize > old_bytes)
		rc = zero_range(fd, old_bytes, fsize < new_bytes ? (size_t)fsize : new_bytes, what);
	close(fd);
	return rc;
}

/* Every leaf's grown size fits: checked before any file is touched. */
static int check_sizes(const td_dict *root, int64_t size, const char *fn)
{
	td_dict_iter *it;
	td_item item;
	size_t nbytes;
	int rc;

	TD_TRY(td_dict_iter_new(&it, root, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY));
	while ((rc = td_dict_iter_next(&item, it)) == 1)
		if (item.value->kind == TD_VALUE_TENSOR &&
			(rc = grown_nbytes(&item.value->tensor, size, item.key, fn, &nbytes)) < 0)
			break;
	td_dict_iter_free(it);
	return rc < 0 ? rc : TD_OK;
}

static int grow_dict(grower *g, int dirfd, const char *rel, const td_dict *d);

/* Stage the grown meta.json of a NonTensorStack: its new rows are empty strings. */
static int grow_strings(grower *g, int dirfd, const char *rel, const td_strings *s)
{
	char what[TD_REL_MAX], *text;
	int rc;

	td__dir_join(what, sizeof(what), rel, "meta.json");
	TD_TRY(td__strings_meta_text(s, g->size, &text));
	rc = td__commit_stage(&g->commit, dirfd, td__relpath_str(&g->path), text, strlen(text), what);
	free(text);
	return rc;
}

/* Grow one entry of a dict whose home directory is `dirfd`. */
static int grow_entry(grower *g, int dirfd, const char *rel, const char *key, const td_value *v)
{
	char crel[TD_REL_MAX], *name;
	size_t nbytes, mark;
	int cfd, rc;

	if (v->kind == TD_VALUE_TENSOR) {
		TD_TRY(grown_nbytes(&v->tensor, g->size, key, g->fn, &nbytes));
		return extend_leaf_file(dirfd, rel, key, td_tensor_nbytes(&v->tensor), nbytes, g->fn);
	}
	if (v->kind != TD_VALUE_DICT && v->kind != TD_VALUE_STRINGS)
		return TD_OK; /* a string's directory records no shape */
	TD_TRY(td__open_child(dirfd, rel, key, crel, sizeof(crel), &cfd, &name));
	rc = td__relpath_push(&g->path, name, &mark);
	td__free(name);
	if (rc == TD_OK) {
		if (v->kind == TD_VALUE_DICT)
			rc = grow_dict(g, cfd, crel, v->dict);
		else
			rc = grow_strings(g, cfd, crel, v->strings);
		td__relpath_pop(&g->path, mark);
	}
	close(cfd);
	return rc;
}

/*
 * Extend the leaf files of dict `d` (directory `dirfd`) and its nested
 * dicts, and stage their grown meta.json files, children first (the
 * order of the renames).
 */
static int grow_dict(grower *g, int dirfd, const char *rel, const td_dict *d)
{
	size_t n = td_dict_items(NULL, NULL, 0, d), i, mark = g->path.len;
	const char **keys = td__calloc(n ? n : 1, sizeof(*keys));
	const td_value **vals = td__calloc(n ? n : 1, sizeof(*vals));
	char what[TD_REL_MAX], *text = NULL;
	bool sub = false;
	int home = -1, rc;

	td__dir_join(what, sizeof(what), rel, "meta.json");
	rc = keys && vals ? TD_OK : td__error_nomem(n * sizeof(*keys));
	if (rc == TD_OK)
		rc = td__dict_home(dirfd, what, &home, &sub);
	if (rc == TD_OK && sub)
		rc = td__relpath_push(&g->path, "_tensordict", &mark);
	if (rc == TD_OK)
		td_dict_items(keys, vals, n, d);
	for (i = 0; rc == TD_OK && i < n; i++)
		rc = grow_entry(g, home, rel, keys[i], vals[i]);
	if (rc == TD_OK)
		rc = td__meta_text(d, g->size, &text);
	if (rc == TD_OK)
		rc = td__commit_stage(&g->commit, home, td__relpath_str(&g->path), text, strlen(text),
			what);
	free(text);
	td__relpath_pop(&g->path, mark);
	if (home >= 0)
		close(home);
	td__free(keys);
	td__free(vals);
	return rc;
}

/* The growth of a store whose root has batch dims (under the change's lock). */
static int grow_store(td__change *c, int64_t new_size, const char *fn)
{
	const td_dict *root = c->st->dict;
	grower g;
	int64_t cur;
	int rc;

	if (td_dict_batch_ndim(root) == 0)
		return td__error(TD_EINVAL, "%s: the store's root has no batch dims to grow", fn);
	cur = td_dict_batch_shape(root)[0];
	if (new_size < cur)
		return td__error(TD_EINVAL,
			"%s: %lld rows is fewer than the %lld the store has "
			"(stores never shrink)",
			fn, (long long)new_size, (long long)cur);
	if (new_size == cur)
		return TD_OK;
	TD_TRY(check_sizes(root, new_size, fn));
	memset(&g, 0, sizeof(g));
	g.fn = fn;
	g.size = new_size;
	rc = grow_dict(&g, c->rootfd, "", root); /* grow_dict finds a tensorclass's home */
	td__relpath_free(&g.path);
	if (rc < 0) {
		td__commit_abort(&g.commit);
		return rc;
	}
	rc = td__commit_run(&g.commit, c->rootfd, true, c->st->path);
	if (rc == TD_OK) {
		c->committed = true;
		c->reload = true;
	}
	return rc;
}

int td__dir_grow(td_store *st, int64_t new_size, const char *fn)
{
	td__change c;

	TD_TRY(td__change_begin(&c, st, fn));
	return td__change_end(&c, grow_store(&c, new_size, fn));
}

/* Grow the leaf `key` of the change's deepest dict (under the change's lock). */
static int grow_one_leaf(td__change *c, const char *key, int64_t new_size, const char *fn)
{
	td_dict *d = c->dicts[c->depth - 1];
	int64_t shape[TD_MAX_DIMS];
	const td_tensor *t;
	const td_value *v;
	td_tensor z, e;
	size_t nbytes;
	int rc;

	rc = td__dictname_get(&v, d, key);
	if (rc == TD_ENOTFOUND)
		return td__error(TD_ENOTFOUND, "%s: no key \"%s\"", fn, key);
	if (rc < 0)
		return rc;
	if (v->kind != TD_VALUE_TENSOR)
		return td__error(TD_ETYPE, "%s: \"%s\" is a %s, not a tensor", fn, key,
			v->kind == TD_VALUE_DICT ? "dict" : "non-tensor value");
	t = &v->tensor;
	if (t->ndim == 0)
		return td__error(TD_EINVAL, "%s: \"%s\" has no dims", fn, key);
	if (td_dict_batch_ndim(d) > 0)
		return td__error(TD_EINVAL,
			"%s: dim 0 of \"%s\" is a batch dim of its dict "
			"(grow the whole store with td_store_grow)",
			fn, key);
	if (new_size < td_tensor_shape(t)[0])
		return td__error(TD_EINVAL,
			"%s: \"%s\" has %lld rows, more than %lld (leaves never "
			"shrink)",
			fn, key, (long long)td_tensor_shape(t)[0], (long long)new_size);
	if (new_size == td_tensor_shape(t)[0])
		return TD_OK;
	TD_TRY(grown_nbytes(t, new_size, key, fn, &nbytes));
	TD_TRY(extend_leaf_file(c->fds[c->depth - 1], c->rel, key, td_tensor_nbytes(t), nbytes, fn));
	/*
	 * meta.json is written from the dict: the entry becomes a zero-strided
	 * placeholder of the new shape, and the reload after the commit maps
	 * the grown file.
	 */
	memcpy(shape, td_tensor_shape(t), (size_t)t->ndim * sizeof(*shape));
	shape[0] = new_size;
	TD_TRY(td__dictname_key(&c->undo_handle, key)); /* for change_undo(): made now, not then */
	TD_TRY(td_tensor_zeros(&z, t->dtype, 0, NULL));
	rc = td_tensor_expand(&e, &z, t->ndim, shape);
	td_tensor_release(&z);
	if (rc < 0)
		return rc;
	/* Keep the old mapping until the change is over (change_undo()). */
	td_tensor_ref(&c->undo, t);
	rc = td__dictname_set_tensor_take(d, key, &e);
	td_tensor_release(&e);
	if (rc < 0) {
		td_tensor_release(&c->undo);
		return rc;
	}
	c->has_undo = true;
	c->undo_dict = d;
	c->undo_key = key;
	c->first_dirty = c->depth - 1;
	c->reload = true;
	return TD_OK;
}

int td__dir_grow_leaf(td_store *st, const char *const *parts, size_t n, int64_t new_size,
	const char *fn)
{
	td__change c;
	int rc;

	TD_TRY(td__change_begin(&c, st, fn));
	rc = td__change_walk(&c, parts, n, false, fn);
	if (rc == TD_OK)
		rc = grow_one_leaf(&c, parts[n - 1], new_size, fn);
	return td__change_end(&c, rc);
}
