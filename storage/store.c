/* SPDX-License-Identifier: MIT */
/*
 * store.c - the store handle, whatever its placement: td_store_open finds
 * the placement of a path (each placement's probe, in order), td_store_memmap
 * takes the one its options ask for, and every call checks its arguments
 * here and goes to the store's placement through its table of operations
 * (td__placement_ops). Nothing here knows how a placement keeps its files.
 */
#include "store_impl.h"

#include <string.h>

/*
 * The placements, in the order td_store_open() probes them. The last one,
 * the directory placement, takes any path no other claims (its open says
 * what is wrong with one that is no store), and any td_store_memmap() that
 * asks for no other.
 */
static const td__placement_ops *const placements[] = { &td__packed_ops, &td__dir_ops };

#define NPLACEMENTS TD_ARRAY_SIZE(placements)

/* The placement of the store at `path`. */
static const td__placement_ops *placement_of(const char *path)
{
	size_t i;

	for (i = 0; i + 1 < NPLACEMENTS; i++)
		if (placements[i]->probe(path))
			break;
	return placements[i];
}

/* The placement td_store_memmap() asks for; NULL for a value no placement has. */
static const td__placement_ops *placement_for(td_placement placement)
{
	size_t i;

	for (i = 0; i < NPLACEMENTS; i++)
		if (placements[i]->placement == placement)
			return placements[i];
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* The handle                                                                */
/* ------------------------------------------------------------------------ */

static void store_free(td_store *st)
{
	td_dict_free(st->dict);
	st->ops->release(st);
	td__free(st->path);
	td__free(st);
}

/* A new store handle of placement `ops` for `path`, its state empty and no dict yet. */
static int store_new(td_store **out, const td__placement_ops *ops, const char *path, bool writable)
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
	st->ops = ops;
	st->writable = writable;
	ops->init(st);
	*out = st;
	return TD_OK;
}

/* Hand over a store whose dict was loaded or written (locked), or free it on failure. */
static int store_finish(td_store *st, int rc, td_store **out)
{
	if (rc == TD_OK && !td_dict_is_locked(st->dict))
		rc = td_dict_lock(st->dict);
	if (rc < 0) {
		store_free(st);
		return rc;
	}
	*out = st;
	return TD_OK;
}

int td_store_open(td_store **out, const char *path, const td_store_open_opts *opts)
{
	td_store *st;

	if (!out)
		return td__error(TD_EINVAL, "td_store_open: NULL out");
	*out = NULL;
	if (!path)
		return td__error(TD_EINVAL, "td_store_open: NULL path");
	if (opts && opts->version != TD_STORE_OPEN_OPTS_VERSION)
		return td__error(TD_EINVAL, "td_store_open: options version %u, expected %u", opts->version,
			TD_STORE_OPEN_OPTS_VERSION);
	TD_TRY(store_new(&st, placement_of(path), path, opts && opts->writable));
	return store_finish(st, st->ops->open(st), out);
}

int td_store_memmap(td_store **out, const td_dict *src, const char *path,
	const td_store_memmap_opts *opts)
{
	td_store_memmap_opts o = TD_STORE_MEMMAP_OPTS_INIT;
	const td__placement_ops *ops;
	td_store *st;

	if (!out)
		return td__error(TD_EINVAL, "td_store_memmap: NULL out");
	*out = NULL;
	if (!src || !path)
		return td__error(TD_EINVAL, "td_store_memmap: NULL %s", src ? "path" : "src");
	if (opts && opts->version != TD_STORE_MEMMAP_OPTS_VERSION)
		return td__error(TD_EINVAL, "td_store_memmap: options version %u, expected %u",
			opts->version, TD_STORE_MEMMAP_OPTS_VERSION);
	if (opts)
		o = *opts;
	ops = placement_for(o.placement);
	if (!ops)
		return td__error(TD_EINVAL, "td_store_memmap: unknown placement %d", (int)o.placement);
	if (o.sync != TD_SYNC_FULL && o.sync != TD_SYNC_NONE)
		return td__error(TD_EINVAL, "td_store_memmap: unknown sync mode %d", (int)o.sync);
	TD_TRY(td__check_writable(src, "td_store_memmap"));
	TD_TRY(store_new(&st, ops, path, true));
	return store_finish(st, st->ops->memmap(st, src, &o), out);
}

td_dict *td_store_dict(td_store *store)
{
	return store ? store->dict : NULL;
}

const char *td_store_path(const td_store *store)
{
	return store ? store->path : NULL;
}

td_placement td_store_placement(const td_store *store)
{
	return store ? store->ops->placement : TD_PLACEMENT_DIRECTORY;
}

bool td_store_is_writable(const td_store *store)
{
	return store && store->writable;
}

int td_store_sync(td_store *store)
{
	if (!store)
		return td__error(TD_EINVAL, "td_store_sync: NULL store");
	return store->ops->sync(store);
}

void td_store_close(td_store *store)
{
	if (store)
		store_free(store);
}

uint64_t td_store_generation(const td_store *store)
{
	return store ? store->ops->generation(store) : 0;
}

int td_store_refresh(bool *changed_out, td_store *store)
{
	if (changed_out)
		*changed_out = false;
	if (!store)
		return td__error(TD_EINVAL, "td_store_refresh: NULL store");
	return store->ops->refresh(store, changed_out);
}

/* ------------------------------------------------------------------------ */
/* Schema changes                                                            */
/* ------------------------------------------------------------------------ */

/*
 * A key path, whichever form the caller named it in: `n` NUL-terminated
 * components, borrowed from a td_key or from `copy`, a split copy of a
 * dotted key (owned; NULL for a handle).
 */
typedef struct keypath {
	const char *parts[TD_KEY_MAX_DEPTH];
	size_t n;
	char *copy;
} keypath;

static void keypath_free(keypath *kp)
{
	td__free(kp->copy);
}

/* Split the dotted key `key` into `kp` (release with keypath_free()). */
static int keypath_dotted(keypath *kp, const char *key, const char *fn)
{
	size_t len, i;
	char *p;

	kp->n = 0;
	kp->copy = NULL;
	if (!key)
		return td__error(TD_EINVAL, "%s: NULL key", fn);
	len = strlen(key);
	kp->copy = td__strndup(key, len);
	if (!kp->copy)
		return td__error_nomem(len + 1);
	for (p = kp->copy;; p++) {
		if (kp->n == TD_KEY_MAX_DEPTH - 1)
			break;
		kp->parts[kp->n++] = p;
		p = strchr(p, '.');
		if (!p)
			break;
		*p = '\0';
	}
	if (p)
		return td__error(TD_EINVAL, "%s: key '%.64s' has %d components or more", fn, key,
			TD_KEY_MAX_DEPTH);
	for (i = 0; i < kp->n; i++)
		if (!kp->parts[i][0])
			return td__error(TD_EINVAL,
				"%s: key '%s' has an empty component (name one "
				"with td_key_from_path() and the _key form)",
				fn, key);
	return TD_OK;
}

/* The components of the key handle `key` into `kp` (nothing to release). */
static int keypath_handle(keypath *kp, const td_key *key, const char *fn)
{
	size_t i;

	kp->n = 0;
	kp->copy = NULL;
	if (!key)
		return td__error(TD_EINVAL, "%s: NULL key", fn);
	if (td_key_depth(key) > TD_KEY_MAX_DEPTH - 1)
		return td__error(TD_EINVAL, "%s: a key of %zu components", fn, td_key_depth(key));
	for (i = 0; i < td_key_depth(key); i++)
		kp->parts[i] = td_key_part(key, i);
	kp->n = i;
	return TD_OK;
}

/* Check a key path and that the store is read-write; `fn` names the caller. */
static int check_path(const td_store *st, const char *const *parts, size_t n, const char *fn)
{
	size_t i;
	int rc;

	if (!st)
		return td__error(TD_EINVAL, "%s: NULL store", fn);
	if (n < 1 || n > TD_KEY_MAX_DEPTH - 1)
		return td__error(TD_EINVAL, "%s: a key path of %zu components", fn, n);
	for (i = 0; i < n; i++) {
		if (td__key_reserved(parts[i]))
			return td__error(TD_EINVAL, "%s: key \"%s\" is reserved by meta.json", fn, parts[i]);
	}
	if (!st->writable)
		return td__error(TD_EREADONLY, "%s: the store is open read-only", fn);
	rc = td__holds_lazy(st->dict);
	if (rc < 0)
		return rc;
	if (rc)
		return td__error(TD_ENOTSUP,
			"%s: the store holds a lazy stack, whose schema "
			"tdstore does not change in place (as tensordict's make_memmap)",
			fn);
	return TD_OK;
}

static int add_tensor(td_store *store, const keypath *kp, const td_tensor *t, const char *fn)
{
	TD_TRY(check_path(store, kp->parts, kp->n, fn));
	if (!t || !t->buffer)
		return td__error(TD_EINVAL, "%s: NULL tensor", fn);
	if (td_buffer_memory(t->buffer) == TD_MEMORY_DEVICE)
		return td__error(TD_EINVAL, "%s: the tensor is in device memory", fn);
	return store->ops->add(store, kp->parts, kp->n, t, true, fn);
}

int td_store_add_tensor(td_store *store, const char *key, const td_tensor *t)
{
	static const char fn[] = "td_store_add_tensor";
	keypath kp;
	int rc = keypath_dotted(&kp, key, fn);

	if (rc == TD_OK)
		rc = add_tensor(store, &kp, t, fn);
	keypath_free(&kp);
	return rc;
}

int td_store_add_tensor_key(td_store *store, const td_key *key, const td_tensor *t)
{
	static const char fn[] = "td_store_add_tensor_key";
	keypath kp;

	TD_TRY(keypath_handle(&kp, key, fn));
	return add_tensor(store, &kp, t, fn);
}

static int add_empty(td_store *store, const keypath *kp, td_dtype dtype, int ndim,
	const int64_t *shape, const char *fn)
{
	td_tensor t, e;
	int rc;

	TD_TRY(check_path(store, kp->parts, kp->n, fn));
	/* A zero-strided view describes the leaf without allocating its size. */
	TD_TRY(td_tensor_zeros(&t, dtype, 0, NULL));
	rc = td_tensor_expand(&e, &t, ndim, shape);
	td_tensor_release(&t);
	if (rc < 0)
		return rc;
	rc = store->ops->add(store, kp->parts, kp->n, &e, false, fn);
	td_tensor_release(&e);
	return rc;
}

int td_store_add_empty(td_store *store, const char *key, td_dtype dtype, int ndim,
	const int64_t *shape)
{
	static const char fn[] = "td_store_add_empty";
	keypath kp;
	int rc = keypath_dotted(&kp, key, fn);

	if (rc == TD_OK)
		rc = add_empty(store, &kp, dtype, ndim, shape, fn);
	keypath_free(&kp);
	return rc;
}

int td_store_add_empty_key(td_store *store, const td_key *key, td_dtype dtype, int ndim,
	const int64_t *shape)
{
	static const char fn[] = "td_store_add_empty_key";
	keypath kp;

	TD_TRY(keypath_handle(&kp, key, fn));
	return add_empty(store, &kp, dtype, ndim, shape, fn);
}

static int remove_entry(td_store *store, const keypath *kp, const char *fn)
{
	TD_TRY(check_path(store, kp->parts, kp->n, fn));
	return store->ops->remove(store, kp->parts, kp->n, fn);
}

int td_store_remove(td_store *store, const char *key)
{
	static const char fn[] = "td_store_remove";
	keypath kp;
	int rc = keypath_dotted(&kp, key, fn);

	if (rc == TD_OK)
		rc = remove_entry(store, &kp, fn);
	keypath_free(&kp);
	return rc;
}

int td_store_remove_key(td_store *store, const td_key *key)
{
	static const char fn[] = "td_store_remove_key";
	keypath kp;

	TD_TRY(keypath_handle(&kp, key, fn));
	return remove_entry(store, &kp, fn);
}

int td_store_grow(td_store *store, int64_t new_size)
{
	static const char fn[] = "td_store_grow";

	if (!store)
		return td__error(TD_EINVAL, "%s: NULL store", fn);
	if (!store->writable)
		return td__error(TD_EREADONLY, "%s: the store is open read-only", fn);
	if (new_size < 0)
		return td__error(TD_EINVAL, "%s: a negative size (%lld)", fn, (long long)new_size);
	if (td__holds_lazy(store->dict) != 0)
		return td__error(TD_ENOTSUP,
			"%s: the store holds a lazy stack, whose schema tdstore "
			"does not change in place",
			fn);
	return store->ops->grow(store, new_size, fn);
}

static int grow_leaf(td_store *store, const keypath *kp, int64_t new_size, const char *fn)
{
	TD_TRY(check_path(store, kp->parts, kp->n, fn));
	if (new_size < 0)
		return td__error(TD_EINVAL, "%s: a negative size (%lld)", fn, (long long)new_size);
	return store->ops->grow_leaf(store, kp->parts, kp->n, new_size, fn);
}

int td_store_grow_leaf(td_store *store, const char *key, int64_t new_size)
{
	static const char fn[] = "td_store_grow_leaf";
	keypath kp;
	int rc = keypath_dotted(&kp, key, fn);

	if (rc == TD_OK)
		rc = grow_leaf(store, &kp, new_size, fn);
	keypath_free(&kp);
	return rc;
}

int td_store_grow_leaf_key(td_store *store, const td_key *key, int64_t new_size)
{
	static const char fn[] = "td_store_grow_leaf_key";
	keypath kp;

	TD_TRY(keypath_handle(&kp, key, fn));
	return grow_leaf(store, &kp, new_size, fn);
}
