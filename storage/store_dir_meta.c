/* SPDX-License-Identifier: MIT */
/*
 * store_dir_meta.c - tensordict's directory layout as the directory
 * placement's reader, writer, schema changes and growth all see it: the
 * names of files and directories (encoded keys, tensordict's legacy raw
 * names, a tensorclass's `_tensordict/` home) opened without following
 * links, and the text of meta.json as Python's json.dumps writes it; and
 * the mappings a read-write store keeps for td_store_sync().
 */
#include "store_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* "rel/name" into buf, for messages (truncated if long). */
const char *td__dir_join(char *buf, size_t len, const char *rel, const char *name)
{
	/* Truncation only shortens a message. */
	if (snprintf(buf, len, "%s%s%s", rel, rel[0] ? "/" : "", name) >= (int)len)
		buf[len - 1] = '\0';
	return buf;
}

/* The encoded file name of a key plus `suffix`, in a new heap block. */
int td__encoded_name(const char *key, const char *suffix, char **out)
{
	int n = td_store_encode_key(NULL, 0, key);
	size_t len, slen = strlen(suffix);
	char *s;

	*out = NULL;
	if (n < 0)
		return n;
	if (!td__add_size((size_t)n, slen + 1, &len))
		return td__error(TD_EOVERFLOW, "store: key too long");
	s = td__malloc(len);
	if (!s)
		return td__error_nomem(len);
	td_store_encode_key(s, (size_t)n + 1, key);
	memcpy(s + n, suffix, slen + 1);
	*out = s;
	return TD_OK;
}

/* Open directory `name` under dirfd, refusing symbolic links. */
int td__open_subdir(int dirfd, const char *name, const char *what, int *out)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	*out = -1;
	if (fd < 0) {
		if (errno == ENOTDIR)
			return td__error(TD_ECORRUPT, "%s: not a directory", what);
		return td__file_error(errno, what, "open");
	}
	*out = fd;
	return TD_OK;
}

int td__open_leaf_file(int dirfd, const char *key, int oflags, int *fd_out, int *err_out,
	char **name_out)
{
	char *fname;
	int fd;

	*fd_out = -1;
	*name_out = NULL;
	TD_TRY(td__encoded_name(key, ".memmap", &fname));
	fd = openat(dirfd, fname, oflags | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && td__key_legacy_safe(key, false)) {
		size_t klen = strlen(key);
		char *raw = td__malloc(klen + sizeof(".memmap"));

		if (!raw) {
			td__free(fname);
			return td__error_nomem(klen + sizeof(".memmap"));
		}
		memcpy(raw, key, klen);
		memcpy(raw + klen, ".memmap", sizeof(".memmap"));
		fd = openat(dirfd, raw, oflags | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 || errno != ENOENT) {
			int err = errno;

			td__free(fname);
			fname = raw;
			errno = err;
		} else {
			td__free(raw);
			errno = ENOENT;
		}
	}
	*err_out = fd < 0 ? errno : 0;
	*fd_out = fd;
	*name_out = fname;
	return TD_OK;
}

/*
 * Open the sub-collection directory for `key` (encoded name, then the
 * legacy raw name). With `name_out`, the name that was opened goes there
 * (a heap block).
 */
int td__open_child(int dirfd, const char *rel, const char *key, char *crel, size_t crel_len,
	int *out, char **name_out)
{
	char *name;
	int rc;

	if (name_out)
		*name_out = NULL;
	TD_TRY(td__encoded_name(key, "", &name));
	td__dir_join(crel, crel_len, rel, name);
	rc = td__open_subdir(dirfd, name, crel, out);
	if (rc == TD_ENOTFOUND && td__key_legacy_safe(key, true)) {
		td__free(name);
		name = td__strndup(key, strlen(key));
		if (!name)
			return td__error_nomem(strlen(key) + 1);
		td__dir_join(crel, crel_len, rel, key);
		rc = td__open_subdir(dirfd, key, crel, out);
	}
	if (rc == TD_OK && name_out) {
		*name_out = name;
		name = NULL;
	}
	td__free(name);
	return rc;
}

int td__open_root(const char *path, const char *fn, int *out)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	*out = fd;
	if (fd >= 0)
		return TD_OK;
	if (errno == ENOENT)
		return td__error(TD_ENOTFOUND, "%s: %s: no such directory", fn, path);
	if (errno == ENOTDIR)
		return td__error(TD_EEXISTS, "%s: %s: not a directory", fn, path);
	return td__error_os(td__status_from_errno(errno), errno, "%s: %s", fn, path);
}

/*
 * Create (or reuse) the directory of a sub-collection. With `name_out`,
 * its name goes there (a heap block). @return 1 when the directory was
 * made here, TD_OK when it existed, or a negative status.
 */
int td__make_child_dir(int dirfd, const char *rel, const char *key, char *crel, size_t crel_len,
	int *out, char **name_out)
{
	bool made = true;
	char *name;
	int rc;

	if (name_out)
		*name_out = NULL;
	TD_TRY(td__encoded_name(key, "", &name));
	td__dir_join(crel, crel_len, rel, name);
	if (mkdirat(dirfd, name, 0777) < 0) {
		if (errno != EEXIST) {
			rc = td__file_error(errno, crel, "mkdir");
			td__free(name);
			return rc;
		}
		made = false;
	}
	rc = td__open_subdir(dirfd, name, crel, out);
	if (rc == TD_OK && name_out) {
		*name_out = name;
		name = NULL;
	}
	td__free(name);
	return rc == TD_OK ? made : rc;
}

int td__store_track(td_store *st, td_buffer *map)
{
	if (st->dir.nmaps == st->dir.cap_maps) {
		size_t cap = st->dir.cap_maps ? st->dir.cap_maps * 2 : 16, bytes;
		td_buffer **m;

		if (!td__mul_size(cap, sizeof(*m), &bytes))
			return td__error(TD_EOVERFLOW, "store: too many mappings");
		m = td__realloc(st->dir.maps, bytes);
		if (!m)
			return td__error_nomem(bytes);
		st->dir.maps = m;
		st->dir.cap_maps = cap;
	}
	st->dir.maps[st->dir.nmaps++] = td_buffer_ref(map);
	return TD_OK;
}

/* A shape as a JSON list; dim 0 replaced by `dim0` when that is >= 0 (growth). */
static json_t *json_shape(int ndim, const int64_t *shape, int64_t dim0)
{
	json_t *a = json_array();
	int i;

	for (i = 0; a && i < ndim; i++)
		if (json_array_append_new(a, json_integer(i == 0 && dim0 >= 0 ? dim0 : shape[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/*
 * jansson writes \u escapes with uppercase hex, Python's json.dumps with
 * lowercase: lower them so that meta.json is byte for byte what Python
 * writes. Escapes are scanned pairwise, so an escaped backslash followed by
 * a literal 'u' is left alone.
 */
static void lower_unicode_escapes(char *s)
{
	int i;

	for (; *s; s++) {
		if (*s != '\\')
			continue;
		if (s[1] == 'u')
			for (i = 2; i < 6 && s[i]; i++)
				if (s[i] >= 'A' && s[i] <= 'F')
					s[i] = (char)(s[i] - 'A' + 'a');
		if (s[1])
			s++;
	}
}

/*
 * meta.json's bytes for `meta` (consumed; NULL reports TD_ENOMEM), in
 * Python's json.dumps spelling: ", " and ": " separators, ASCII only with
 * lowercase \u escapes. Release *out with free().
 */
int td__meta_dump(json_t *meta, char **out)
{
	*out = NULL;
	if (!meta)
		return td__error_nomem(0);
	*out = json_dumps(meta, JSON_ENSURE_ASCII);
	json_decref(meta);
	if (!*out)
		return td__error_nomem(0);
	lower_unicode_escapes(*out);
	return TD_OK;
}

/*
 * The meta.json of one dict, as tensordict writes it: its entries in order
 * (tensors with device/shape/dtype/is_nested, nested dicts and strings as
 * {"type": ...}), then the dict's own fields. With `dim0` >= 0 (and at
 * least one batch dim), dim 0 of the batch shape and of every tensor is
 * written as `dim0`: the dict grown. NULL when out of memory.
 */
json_t *td__build_meta(const td_dict *d, int64_t dim0)
{
	size_t n = td_dict_items(NULL, NULL, 0, d), i;
	const char **keys = td__calloc(n ? n : 1, sizeof(*keys));
	const td_value **vals = td__calloc(n ? n : 1, sizeof(*vals));
	json_t *meta = json_object();
	bool ok = keys && vals && meta;

	if (td_dict_batch_ndim(d) == 0)
		dim0 = -1; /* no batch dim: dim 0 of a leaf is its own */
	if (ok)
		td_dict_items(keys, vals, n, d);
	for (i = 0; ok && i < n; i++) {
		const td_value *v = vals[i];
		json_t *e = json_object();

		if (!e || json_object_set_new(meta, keys[i], e) < 0) {
			ok = false;
			break;
		}
		if (v->kind == TD_VALUE_TENSOR) {
			const td_tensor *t = &v->tensor;

			ok = json_object_set_new(e, "device", json_string("cpu")) == 0 &&
				json_object_set_new(e, "shape", json_shape(t->ndim, td_tensor_shape(t), dim0)) ==
					0 &&
				json_object_set_new(e, "dtype", json_string(td_dtype_torch_name(t->dtype))) == 0 &&
				json_object_set_new(e, "is_nested", json_false()) == 0;
		} else {
			ok = json_object_set_new(e, "type",
					 json_string(v->kind == TD_VALUE_DICT ?
							 (td_dict_is_lazy(v->dict) ? "LazyStackedTensorDict" : "TensorDict") :
							 v->kind == TD_VALUE_STRINGS ? "NonTensorStack" :
														   "NonTensorData")) == 0;
		}
	}
	ok = ok &&
		json_object_set_new(meta, "shape",
			json_shape(td_dict_batch_ndim(d), td_dict_batch_shape(d), dim0)) == 0 &&
		json_object_set_new(meta, "device", json_string("cpu")) == 0 &&
		json_object_set_new(meta, "_type", json_string(TD_TYPE_TENSORDICT)) == 0 &&
		json_object_set_new(meta, "_format_version", json_integer(1)) == 0 &&
		json_object_set_new(meta, "_class", json_string("tensordict:TensorDict")) == 0;
	td__free(keys);
	td__free(vals);
	if (!ok) {
		json_decref(meta);
		return NULL;
	}
	return meta;
}

int td__meta_text(const td_dict *d, int64_t dim0, char **out)
{
	return td__meta_dump(td__build_meta(d, dim0), out);
}

/*
 * Nested lists over the array's shape (its "data" in meta.json); dim 0
 * taken as `dim0` rows when that is >= 0 (growth: rows past the array's
 * are empty strings). `*next` counts the elements used.
 */
static json_t *strings_lists(const td_strings *s, int dim, int64_t dim0, bool real, int64_t *next)
{
	int64_t n = dim == 0 && dim0 >= 0 ? dim0 : s->shape[dim], i;
	json_t *a = json_array();

	for (i = 0; a && i < n; i++) {
		bool in = real && (dim > 0 || i < s->shape[0]);
		json_t *item;

		if (dim + 1 < s->ndim) {
			item = strings_lists(s, dim + 1, dim0, in, next);
		} else if (in) {
			size_t len;
			const char *t = td_strings_at(&len, s, (*next)++);

			item = json_stringn(t, len);
		} else {
			item = json_string("");
		}
		if (!item || json_array_append_new(a, item) < 0) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

int td__strings_meta_text(const td_strings *s, int64_t dim0, char **out)
{
	json_t *meta = json_object();
	int64_t next = 0;

	/* tensordict writes this file compact, with json.dumps(separators=(",", ":")). */
	if (meta &&
		(json_object_set_new(meta, "_type", json_string(TD_TYPE_NONTENSORSTACK)) < 0 ||
			json_object_set_new(meta, "_format_version", json_integer(1)) < 0 ||
			json_object_set_new(meta, "_class", json_string("tensordict:NonTensorStack")) < 0 ||
			json_object_set_new(meta, "stack_dim", json_integer(0)) < 0 ||
			json_object_set_new(meta, "device", json_null()) < 0 ||
			json_object_set_new(meta, "data", strings_lists(s, 0, dim0, true, &next)) < 0)) {
		json_decref(meta);
		meta = NULL;
	}
	*out = NULL;
	if (!meta)
		return td__error_nomem(0);
	*out = json_dumps(meta, JSON_COMPACT | JSON_ENSURE_ASCII);
	json_decref(meta);
	if (!*out)
		return td__error_nomem(0);
	if (strlen(*out) > TD_META_MAX_BYTES) {
		free(*out);
		*out = NULL;
		return td__error(TD_EOVERFLOW,
			"a NonTensorStack's meta.json would pass %zu bytes, "
			"more than a reader accepts",
			TD_META_MAX_BYTES);
	}
	lower_unicode_escapes(*out);
	return TD_OK;
}

int td__dict_home(int dirfd, const char *what, int *home, bool *sub)
{
	char *text;
	size_t len;
	json_t *meta;
	const char *type;
	bool plain;

	*home = -1;
	*sub = false;
	TD_TRY(td__read_small_file(dirfd, "meta.json", TD_META_MAX_BYTES, &text, &len, what));
	meta = json_loadb(text, len, 0, NULL);
	td__free(text);
	type = json_string_value(json_object_get(meta, "_type"));
	plain = meta && (!type || !strcmp(type, TD_TYPE_TENSORDICT));
	json_decref(meta);
	if (plain) {
		*home = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
		return *home < 0 ? td__error_os(TD_EIO, errno, "%s: dup", what) : TD_OK;
	}
	*home = openat(dirfd, "_tensordict", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*home < 0)
		return td__error(TD_ECORRUPT, "%s: changed since it was loaded", what);
	*sub = true;
	return TD_OK;
}
