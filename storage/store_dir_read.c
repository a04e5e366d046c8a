/* SPDX-License-Identifier: MIT */
/*
 * store_dir_read.c - the directory placement's reader: the dict of a
 * store in tensordict's memmap layout, from its meta.json files and leaf
 * files (or through its key index, store_dirindex.c), loaded at open and
 * again when another process changed the schema.
 *
 * Reading treats every file as untrusted: meta.json is parsed by jansson
 * and every field is checked (types, dims, sizes with overflow checks)
 * before use; leaf files must be regular files at least as long as their
 * declared size; symbolic links are refused everywhere below the root.
 */
#include "store_dir.h"
#include "dictname.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static int fail_json(const char *what, const char *msg)
{
	return td__error(TD_ECORRUPT, "%s: %s", what, msg);
}

/* A JSON shape: an array of at most TD_MAX_DIMS integers in [0, INT64_MAX]. */
static int parse_shape(const json_t *j, int *ndim, int64_t *shape, const char *what)
{
	size_t i, n;

	if (!json_is_array(j))
		return fail_json(what, "shape is not a list");
	n = json_array_size(j);
	if (n > TD_MAX_DIMS)
		return td__error(TD_ECORRUPT, "%s: shape has %zu dims, more than %d", what, n, TD_MAX_DIMS);
	for (i = 0; i < n; i++) {
		const json_t *v = json_array_get(j, i);

		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return td__error(TD_ECORRUPT, "%s: shape dim %zu is not an integer >= 0", what, i);
		shape[i] = (int64_t)json_integer_value(v);
	}
	*ndim = (int)n;
	return TD_OK;
}

typedef struct loader {
	td_store *st;
	bool writable;
	const td__journal_view *jv; /* directories to read from a journaled temporary file */
	td__dirmodel *model;        /* read-write loads: notes for the next directory index */
} loader;

static int load_dict(loader *ld, int dirfd, const char *rel, int depth, td_dict **out);

/*
 * Parse a directory's meta.json, or, when a sealed journal still lists the
 * directory (a writer crashed mid-commit), the temporary file that becomes
 * its meta.json: the committed state.
 */
static int read_meta(const loader *ld, int dirfd, const char *rel, json_t **out)
{
	const char *name = td__journal_view_meta(ld->jv, dirfd);
	char what[TD_REL_MAX], *text;
	json_error_t jerr;
	size_t len;
	json_t *root;

	*out = NULL;
	td__dir_join(what, sizeof(what), rel, name);
	TD_TRY(td__read_small_file(dirfd, name, TD_META_MAX_BYTES, &text, &len, what));
	td__dirmodel_note_meta(ld->model, rel, text, len);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	td__free(text);
	if (!root)
		return td__error(TD_ECORRUPT, "%s: invalid JSON at line %d column %d: %s", what, jerr.line,
			jerr.column, jerr.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return fail_json(what, "not a JSON object");
	}
	*out = root;
	return TD_OK;
}

/* Map one tensor leaf (or make an empty tensor for a leaf without elements). */
static int load_leaf(loader *ld, int dirfd, const char *rel, const char *key, const json_t *e,
	const td_dict *d, td_tensor *out)
{
	char what[TD_REL_MAX], *fname = NULL;
	const char *dts;
	int64_t shape[TD_MAX_DIMS], numel = 1;
	int ndim = 0, i, fd, rc, bndim, err;
	const json_t *isn;
	uint64_t fsize;
	td_dtype dtype;
	td_buffer *map = NULL;
	size_t nbytes;

	td__dir_join(what, sizeof(what), rel, key);
	isn = json_object_get(e, "is_nested");
	if (isn && !json_is_boolean(isn))
		return fail_json(what, "is_nested is not a boolean");
	if (json_is_true(isn))
		return td__error(TD_ENOTSUP, "%s: nested (jagged) tensors are not supported", what);
	dts = json_string_value(json_object_get(e, "dtype"));
	if (!dts)
		return fail_json(what, "dtype is not a string");
	rc = td_dtype_from_name(&dtype, dts);
	if (rc == TD_ENOTSUP)
		return td__error(TD_ENOTSUP, "%s: dtype %s is not supported", what, dts);
	if (rc < 0 || strncmp(dts, "torch.", 6) != 0)
		return td__error(TD_ECORRUPT, "%s: unknown dtype \"%s\"", what, dts);
	TD_TRY(parse_shape(json_object_get(e, "shape"), &ndim, shape, what));
	bndim = td_dict_batch_ndim(d);
	if (ndim < bndim || memcmp(shape, td_dict_batch_shape(d), (size_t)bndim * sizeof(int64_t)))
		return td__error(TD_ECORRUPT, "%s: shape does not start with the batch shape", what);
	for (i = 0; i < ndim; i++)
		if (!td__mul_i64(numel, shape[i], &numel))
			return td__error(TD_EOVERFLOW, "%s: the number of elements overflows", what);
	if ((uint64_t)numel > SIZE_MAX / td_dtype_size(dtype) ||
		(nbytes = (size_t)numel * td_dtype_size(dtype)) > (size_t)PTRDIFF_MAX)
		return td__error(TD_EOVERFLOW, "%s: the byte size overflows", what);
	if (nbytes == 0)
		return td_tensor_empty(out, dtype, ndim, shape);

	TD_TRY(td__open_leaf_file(dirfd, key, ld->writable ? O_RDWR : O_RDONLY, &fd, &err, &fname));
	if (fd >= 0)
		td__dirmodel_note_leaf(ld->model, rel, key, fname);
	td__dir_join(what, sizeof(what), rel, fname);
	td__free(fname);
	if (fd < 0 && err == ENOENT)
		return td__error(TD_ECORRUPT, "%s: declared in meta.json but missing", what);
	if (fd < 0)
		return td__file_error(err, what, "open");
	rc = td__fstat_regular(fd, what, &fsize);
	if (rc < 0)
		goto out;
	if (fsize < (uint64_t)nbytes) {
		rc = td__error(TD_ECORRUPT, "%s: %llu bytes, shorter than the %zu declared", what,
			(unsigned long long)fsize, nbytes);
		goto out;
	}
	rc = td__map_fd(&map, fd, nbytes, ld->writable, what);
	if (rc < 0)
		goto out;
	if (ld->writable) {
		rc = td__store_track(ld->st, map);
		if (rc < 0)
			goto out;
	}
	rc = td_tensor_from_buffer(out, map, dtype, ndim, shape, NULL, 0);
out:
	td_buffer_unref(map);
	close(fd);
	return rc;
}

/* A NonTensorData directory: its string value. */
static int load_string(const json_t *meta, const char *what, const char **out)
{
	const json_t *data = json_object_get(meta, "data");

	if (!data)
		return td__error(TD_ENOTSUP,
			"%s: NonTensorData without \"data\" (a pickled value) is not supported", what);
	if (!json_is_string(data))
		return td__error(TD_ENOTSUP,
			"%s: NonTensorData holding a %s is not supported (only strings)", what,
			json_is_array(data)      ? "list" :
				json_is_object(data) ? "dict" :
				json_is_null(data)   ? "None" :
									   "number or bool");
	*out = json_string_value(data);
	return TD_OK;
}

/* What a JSON value is, for messages. */
static const char *json_kind(const json_t *j)
{
	return json_is_array(j) ? "list" :
		json_is_object(j)   ? "dict" :
		json_is_null(j)     ? "None" :
		json_is_string(j)   ? "string" :
							  "number or bool";
}

/*
 * Whether every node `depth` levels below `node` is a list of one length
 * (stored in *len, -1 before the first): a dim of the stack, as
 * NonTensorStack._from_list nests stacks while all items are lists of equal
 * length.
 */
static bool level_is_dim(const json_t *node, int depth, int64_t *len)
{
	size_t i;
	const json_t *item;

	if (depth == 0) {
		if (!json_is_array(node) || (*len >= 0 && (int64_t)json_array_size(node) != *len))
			return false;
		*len = (int64_t)json_array_size(node);
		return true;
	}
	json_array_foreach(node, i, item) if (!level_is_dim(item, depth - 1, len)) return false;
	return true;
}

/* Collect the strings at depth `ndim` below `node` in order; TD_ENOTSUP for other values. */
static int collect_strings(const json_t *node, int ndim, const char **out, size_t *n,
	const char *what)
{
	size_t i;
	const json_t *item;

	if (ndim == 0) {
		if (!json_is_string(node))
			return td__error(TD_ENOTSUP,
				"%s: a NonTensorStack holding a %s is not "
				"supported (only strings, in lists of equal length)",
				what, json_kind(node));
		out[(*n)++] = json_string_value(node);
		return TD_OK;
	}
	json_array_foreach(node, i, item) TD_TRY(collect_strings(item, ndim - 1, out, n, what));
	return TD_OK;
}

/*
 * A NonTensorStack directory: its "data" as nested lists of strings
 * (tolist() of the stack) becomes an array of strings of the lists' shape.
 */
static int load_strings(const json_t *meta, const char *what, td_dict *d, const char *key)
{
	const json_t *data = json_object_get(meta, "data");
	int64_t shape[TD_MAX_DIMS], numel = 1;
	const char **texts = NULL;
	size_t n = 0;
	int ndim = 0, rc;

	if (!data || json_is_string(data))
		return td__error(TD_ENOTSUP,
			"%s: a NonTensorStack stored as a Python pickle is not "
			"supported",
			what);
	if (!json_is_array(data))
		return fail_json(what, "NonTensorStack data is not a list");
	for (;;) {
		int64_t len = -1;

		if (!level_is_dim(data, ndim, &len))
			break;
		if (ndim == TD_MAX_DIMS)
			return td__error(TD_ENOTSUP, "%s: a NonTensorStack of more than %d dims", what,
				TD_MAX_DIMS);
		shape[ndim++] = len;
		if (!td__mul_i64(numel, len, &numel))
			return td__error(TD_EOVERFLOW, "%s: too many strings", what);
		if (len == 0)
			break; /* nothing below an empty dim */
	}
	texts = td__calloc(numel ? (size_t)numel : 1, sizeof(*texts));
	if (!texts)
		return td__error_nomem((size_t)numel * sizeof(*texts));
	rc = numel ? collect_strings(data, ndim, texts, &n, what) : TD_OK;
	if (rc == TD_OK) {
		rc = td__dictname_set_strings(d, key, ndim, shape, texts);
		if (rc == TD_ETYPE)
			rc = td__error(TD_ECORRUPT, "%s: %s", what, td_error_last()->message);
		else if (rc == TD_EINVAL)
			rc = td__error(TD_ENOTSUP, "%s: a string holds a NUL byte", what);
	}
	td__free(texts);
	return rc;
}

static int load_lazy(loader *ld, int dirfd, const char *rel, int depth, const json_t *meta,
	td_dict **out);

static int load_collection(loader *ld, int dirfd, const char *rel, const char *key, int depth,
	td_dict *d)
{
	char crel[TD_REL_MAX], what[TD_REL_MAX];
	const char *type, *s = NULL;
	json_t *meta = NULL;
	td_dict *child = NULL;
	int cfd, rc;

	TD_TRY(td__open_child(dirfd, rel, key, crel, sizeof(crel), &cfd, NULL));
	td__dir_join(what, sizeof(what), crel, "meta.json");
	rc = read_meta(ld, cfd, crel, &meta);
	if (rc < 0)
		goto out;
	type = json_string_value(json_object_get(meta, "_type"));
	if (type && !strcmp(type, TD_TYPE_NONTENSORDATA)) {
		rc = load_string(meta, what, &s);
		if (rc == TD_OK) {
			rc = td__dictname_set_string(d, key, s);
			if (rc == TD_ETYPE)
				rc = td__error(TD_ECORRUPT, "%s: %s", crel, td_error_last()->message);
		}
		goto out;
	}
	if (type && !strcmp(type, TD_TYPE_NONTENSORSTACK)) {
		rc = load_strings(meta, what, d, key);
		goto out;
	}
	if (depth + 1 >= TD_KEY_MAX_DEPTH) {
		rc = td__error(TD_ENOTSUP, "%s: nested deeper than %d levels", crel, TD_KEY_MAX_DEPTH);
		goto out;
	}
	if (type && !strcmp(type, TD_TYPE_LAZYSTACK)) {
		/* A lazy stack as a value (tensordict's TensorDict({"z": lazy_stack})). */
		rc = load_lazy(ld, cfd, crel, depth + 1, meta, &child);
	} else {
		json_decref(meta);
		meta = NULL;
		rc = load_dict(ld, cfd, crel, depth + 1, &child);
	}
	if (rc < 0)
		goto out;
	rc = td__dictname_set_dict_take(d, key, child);
	if (rc < 0) {
		td_dict_free(child);
		if (rc == TD_ETYPE)
			rc = td__error(TD_ECORRUPT, "%s: batch shape does not start with its parent's", crel);
		else if (rc == TD_EINVAL)
			rc = td__error(TD_ENOTSUP, "%s: nested deeper than %d levels", crel, TD_KEY_MAX_DEPTH);
	}
out:
	json_decref(meta);
	close(cfd);
	return rc;
}

/* Most children of one lazy stack read (a bound on what a directory can make us open). */
#define LAZY_MAX_CHILDREN (1u << 20)

/*
 * A lazy stack (tensordict's LazyStackedTensorDict): "stack_dim" in its
 * meta.json, children in the sub-directories "0", "1", ... (never encoded)
 * read while they exist, each a dict or a lazy stack itself.
 */
static int load_lazy(loader *ld, int dirfd, const char *rel, int depth, const json_t *meta,
	td_dict **out)
{
	char what[TD_REL_MAX], crel[TD_REL_MAX], name[16];
	const json_t *js = json_object_get(meta, "stack_dim");
	td_dict **kids = NULL;
	size_t n = 0, cap = 0, i;
	int rc = TD_OK;

	td__dir_join(what, sizeof(what), rel, "meta.json");
	if (!json_is_integer(js) || json_integer_value(js) < -TD_MAX_DIMS - 1 ||
		json_integer_value(js) > TD_MAX_DIMS)
		return fail_json(what, "stack_dim is not an integer in [-17, 16]");
	if (depth + 1 >= TD_KEY_MAX_DEPTH)
		return td__error(TD_ENOTSUP, "%s: nested deeper than %d levels", what, TD_KEY_MAX_DEPTH);
	for (;;) {
		int cfd;

		snprintf(name, sizeof(name), "%zu", n);
		td__dir_join(crel, sizeof(crel), rel, name);
		rc = td__open_subdir(dirfd, name, crel, &cfd);
		if (rc == TD_ENOTFOUND) {
			td_error_clear();
			rc = TD_OK;
			break;
		}
		if (rc < 0)
			break;
		if (n == LAZY_MAX_CHILDREN) {
			close(cfd);
			rc = td__error(TD_ENOTSUP, "%s: a lazy stack of more than %u children", what,
				LAZY_MAX_CHILDREN);
			break;
		}
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 8;
			td_dict **p = td__realloc(kids, ncap * sizeof(*p));

			if (!p) {
				close(cfd);
				rc = td__error_nomem(ncap * sizeof(*p));
				break;
			}
			kids = p;
			cap = ncap;
		}
		rc = load_dict(ld, cfd, crel, depth + 1, &kids[n]);
		close(cfd);
		if (rc < 0)
			break;
		n++;
	}
	if (rc == TD_OK && n == 0)
		rc = td__error(TD_ECORRUPT, "%s: a lazy stack without children (no %s/0)", what,
			rel[0] ? rel : ".");
	if (rc == TD_OK) {
		rc = td_lazy_stack(out, kids, n, (int)json_integer_value(js), TD_LAZY_TAKE);
		if (rc == TD_ETYPE)
			rc = td__error(TD_ENOTSUP,
				"%s: the children of this lazy stack have different "
				"batch shapes, which tdstore's lazy stacks do not hold",
				what);
		else if (rc == TD_EINVAL)
			rc = td__error(TD_ECORRUPT,
				"%s: stack_dim %lld is out of range for its "
				"children",
				what, (long long)json_integer_value(js));
		if (rc == TD_OK)
			n = 0; /* the stack owns them */
	}
	for (i = 0; i < n; i++)
		td_dict_free(kids[i]);
	td__free(kids);
	return rc;
}

static int load_dict(loader *ld, int dirfd, const char *rel, int depth, td_dict **out)
{
	char what[TD_REL_MAX];
	int64_t batch[TD_MAX_DIMS];
	int bndim = 0, rc;
	const char *type, *key;
	json_t *meta, *val, *js;
	td_dict *d = NULL;

	*out = NULL;
	TD_TRY(read_meta(ld, dirfd, rel, &meta));
	td__dir_join(what, sizeof(what), rel, "meta.json");
	js = json_object_get(meta, "_type");
	if (js && !json_is_string(js)) {
		rc = fail_json(what, "_type is not a string");
		goto out;
	}
	type = json_string_value(js);
	if (type && strcmp(type, TD_TYPE_TENSORDICT) != 0) {
		/* A tensorclass keeps its fields in _tensordict/; other types are unknown here. */
		int sub;

		if (!strcmp(type, TD_TYPE_LAZYSTACK))
			rc = load_lazy(ld, dirfd, rel, depth, meta, out);
		else if (!strcmp(type, TD_TYPE_NONTENSORDATA) || !strcmp(type, TD_TYPE_NONTENSORSTACK))
			rc = td__error(TD_ENOTSUP, "%s: a non-tensor value is not a dict", what);
		else if (td__open_subdir(dirfd, "_tensordict", what, &sub) == TD_OK) {
			char srel[TD_REL_MAX];

			json_decref(meta);
			td__dirmodel_note_shell(ld->model, rel);
			td__dir_join(srel, sizeof(srel), rel, "_tensordict");
			rc = load_dict(ld, sub, srel, depth, out);
			close(sub);
			return rc;
		} else
			rc = td__error(TD_ENOTSUP, "%s: unsupported type %s", what, type);
		goto out;
	}
	js = json_object_get(meta, "shape");
	if (js && (rc = parse_shape(js, &bndim, batch, what)) < 0)
		goto out;
	rc = td_dict_new(&d, bndim, batch);
	if (rc < 0) {
		if (rc != TD_ENOMEM)
			rc = td__error(TD_ECORRUPT, "%s: invalid batch shape", what);
		goto out;
	}
	json_object_foreach(meta, key, val)
	{
		if (td__key_reserved(key))
			continue;
		/* tensordict skips entries that are not objects, and leaves without dtype/shape. */
		if (!json_is_object(val))
			continue;
		js = json_object_get(val, "type");
		if (js && !json_is_null(js)) {
			rc = load_collection(ld, dirfd, rel, key, depth, d);
		} else {
			td_tensor t = TD_TENSOR_INIT;

			if (!json_object_get(val, "dtype") || !json_object_get(val, "shape"))
				continue;
			rc = load_leaf(ld, dirfd, rel, key, val, d, &t);
			if (rc == TD_OK) {
				rc = td__dictname_set_tensor_take(d, key, &t);
				td_tensor_release(&t);
			}
		}
		if (rc < 0)
			goto out;
	}
	*out = d;
	d = NULL;
	rc = TD_OK;
out:
	td_dict_free(d);
	json_decref(meta);
	return rc;
}

/*
 * Load the store's committed dict from disk (under the coordination lock,
 * shared or exclusive): from the directory key index when it is valid,
 * else from the meta.json files. A sealed journal left by a crashed writer
 * is read, not redone: the directories it lists are loaded from their
 * temporary files, so that a reader that cannot write sees the committed
 * state. A read-write load also gives the model of what it read, for the
 * next index (`*model_out`, NULL when it could not be made).
 */
int td__dir_load(td_store *st, int dirfd, td_dict **out, td__dirmodel **model_out)
{
	td__journal_view jv;
	loader ld = { st, st->writable, &jv, NULL };
	int rc;

	*out = NULL;
	*model_out = NULL;
	TD_TRY(td__journal_view_open(&jv, dirfd, st->path));
	if (td__dirindex_load(st, dirfd, out, model_out) == TD_OK) {
		td__journal_view_free(&jv);
		return TD_OK;
	}
	if (ld.writable && td__dirmodel_new(&ld.model) == TD_OK && jv.n > 0)
		td__dirmodel_poison(ld.model); /* it would note the temporary files */
	rc = load_dict(&ld, dirfd, "", 0, out);
	td__journal_view_free(&jv);
	if (rc == TD_OK)
		*model_out = ld.model;
	else
		td__dirmodel_free(ld.model);
	return rc;
}

/*
 * Load the dict again from disk (the caller holds the coordination lock).
 * The old dict and its mappings are released; tensors the caller took with
 * td_tensor_ref() keep theirs.
 */
int td__store_reload(td_store *st, int dirfd)
{
	td_buffer **old_maps = st->dir.maps;
	size_t old_n = st->dir.nmaps, old_cap = st->dir.cap_maps, i;
	td__dirmodel *model = NULL;
	td_dict *d = NULL;
	int rc;

	st->dir.maps = NULL;
	st->dir.nmaps = st->dir.cap_maps = 0;
	rc = td__dir_load(st, dirfd, &d, &model);
	if (rc == TD_OK)
		rc = td_dict_lock(d);
	if (rc < 0) {
		td_dict_free(d);
		td__dirmodel_free(model);
		for (i = 0; i < st->dir.nmaps; i++)
			td_buffer_unref(st->dir.maps[i]);
		td__free(st->dir.maps);
		st->dir.maps = old_maps;
		st->dir.nmaps = old_n;
		st->dir.cap_maps = old_cap;
		return rc;
	}
	td_dict_free(st->dict);
	st->dict = d;
	st->dir.stale = false;
	td__dirmodel_free(st->dir.dix);
	st->dir.dix = model;
	for (i = 0; i < old_n; i++)
		td_buffer_unref(old_maps[i]);
	td__free(old_maps);
	return TD_OK;
}
