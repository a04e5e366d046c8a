/* SPDX-License-Identifier: MIT */
/*
 * store_dir.h - internals of the directory placement, one section per file
 * (store_dir*.c, store_dirindex.c), lowest first: tensordict's directory
 * layout (names, meta.json text), the reader, the key index in use, the
 * writer, schema changes and growth. store_dir.c puts them in the
 * placement's table (td__dir_ops). Never installed.
 */
#ifndef TD_STORE_DIR_H
#define TD_STORE_DIR_H

#include "store_impl.h"

#include <jansson.h>

/* The `_type` meta.json gives each kind of directory (tensordict's classes). */
#define TD_TYPE_TENSORDICT "<class 'tensordict._td.TensorDict'>"
#define TD_TYPE_NONTENSORDATA "<class 'tensordict.tensorclass.NonTensorData'>"
#define TD_TYPE_NONTENSORSTACK "<class 'tensordict.tensorclass.NonTensorStack'>"
#define TD_TYPE_LAZYSTACK "<class 'tensordict._lazy.LazyStackedTensorDict'>"

/* ---- names (store_dir_meta.c) ---- */

/** "rel/name" into `buf` of `len` bytes, for messages (cut when long). @return buf. */
const char *td__dir_join(char *buf, size_t len, const char *rel, const char *name);
/** The file name of `key` plus `suffix`, encoded as tensordict does (heap). */
int td__encoded_name(const char *key, const char *suffix, char **out);
/** Open the root directory `path` of a store; `fn` names the caller in messages. */
int td__open_root(const char *path, const char *fn, int *out);
/** Open directory `name` under `dirfd`, refusing symbolic links; `what` names it. */
int td__open_subdir(int dirfd, const char *name, const char *what, int *out);
/**
 * Open the sub-directory of `key` under `dirfd` (encoded name, else the
 * legacy raw name), without following links. `crel` receives "rel/name"
 * for messages; with `name_out` the name opened (heap).
 */
int td__open_child(int dirfd, const char *rel, const char *key, char *crel, size_t crel_len,
	int *out, char **name_out);
/**
 * Create (or reuse) the directory of the sub-collection `key` under
 * `dirfd`, as td__open_child() names it (the encoded name). @return 1 when
 * the directory was made here, TD_OK when it existed, or a negative status.
 */
int td__make_child_dir(int dirfd, const char *rel, const char *key, char *crel, size_t crel_len,
	int *out, char **name_out);
/**
 * Open the leaf file of `key` under `dirfd` with `oflags` (O_NOFOLLOW is
 * added): the encoded name, else the legacy raw name. *fd_out is -1 with
 * *err_out the errno when neither opens; *name_out the name (heap).
 */
int td__open_leaf_file(int dirfd, const char *key, int oflags, int *fd_out, int *err_out,
	char **name_out);
/**
 * The directory that holds the meta.json and leaves of the dict whose
 * directory is `dirfd`: itself, or for a tensorclass (a `_type` other than
 * TensorDict) its `_tensordict/` sub-directory, as the loader reads it.
 * `*home` is a new descriptor; `*sub` tells whether it is `_tensordict/`.
 */
int td__dict_home(int dirfd, const char *what, int *home, bool *sub);

/** Remember a writable mapping for td_store_sync() (takes a new reference). */
int td__store_track(td_store *st, td_buffer *map);

/* ---- meta.json text (store_dir_meta.c) ---- */

/**
 * The meta.json of dict `d`, as tensordict writes it. With `dim0` >= 0
 * (and at least one batch dim), dim 0 of the batch shape and of every
 * tensor is written as `dim0`: the dict grown. NULL when out of memory.
 */
json_t *td__build_meta(const td_dict *d, int64_t dim0);
/**
 * meta.json's bytes for `meta` (consumed; NULL reports TD_ENOMEM) in
 * Python's json.dumps spelling: ", " and ": " separators, ASCII only with
 * lowercase \u escapes. Release *out with free().
 */
int td__meta_dump(json_t *meta, char **out);
/** meta.json's text for dict `d`, dim 0 written as `dim0` when >= 0; free() it. */
int td__meta_text(const td_dict *d, int64_t dim0, char **out);
/**
 * The meta.json text of a NonTensorStack holding array `s`, dim 0 written as
 * `dim0` rows when >= 0 (rows past the array's are empty strings); free() it.
 */
int td__strings_meta_text(const td_strings *s, int64_t dim0, char **out);

/* ---- reading (store_dir_read.c) ---- */

/**
 * Load the store's committed dict from disk, under the coordination lock:
 * through the directory key index when it is valid, else from the
 * meta.json files (a crashed writer's sealed journal read, not redone). A
 * read-write load tracks its mappings and gives the model of what it read
 * for the next index (`*model_out`; NULL when it could not be made).
 */
int td__dir_load(td_store *st, int dirfd, td_dict **out, td__dirmodel **model_out);
/** Under the lock: load the dict again (new mappings); on failure the old one stays. */
int td__store_reload(td_store *st, int rootfd);

/* ---- the directory key index in use (store_dirindex.c; doc/format.md 7) ---- */

/**
 * Build the dict of the directory store at `rootfd` from its index, when
 * the index is valid and every meta.json it lists has the bytes it lists
 * (the maps of a read-write store are tracked as td__dir_load() does). For
 * a read-write store `*model_out` receives the model of the loaded state.
 * Records st->dir.dix_state. On failure nothing is left behind and no
 * error is recorded: the caller parses the meta.json files.
 *
 * @return TD_OK; a negative status when the index was not used
 */
int td__dirindex_load(td_store *st, int rootfd, td_dict **out, td__dirmodel **model_out);
/**
 * After a committed save or schema change (under the exclusive lock):
 * write the index of st->dict from st->dir.dix (temporary name, rename, no
 * sync: it is derived data). When that cannot be done (no model, a lazy
 * stack, a failure) the index file is removed instead and the model
 * dropped. Never fails; records no error.
 */
void td__dirindex_update(td_store *st, int rootfd);

/* ---- writing (store_dir_write.c) ---- */

/**
 * td_store_memmap() into the directory st->path (st new, read-write, no
 * dict yet): on success st->dict maps the written leaves.
 */
int td__dir_memmap(td_store *st, const td_dict *src, const td_store_memmap_opts *opts);
/**
 * Create (or reuse, as an add that crashed before its commit left it) the
 * leaf file of `key` under `dirfd` for a schema change, holding a copy of
 * `t` (or, without `copy`, reserved only), and map it into `out`. A file
 * this call made is removed again on failure. `rel` names `dirfd`.
 */
int td__dir_write_leaf(td_store *st, int dirfd, const char *rel, const char *key,
	const td_tensor *t, bool copy, td_tensor *out);
/** Under the exclusive lock: finish a crashed commit (journal.c), bumping the generation. */
int td__store_recover(td_store *st, int rootfd);

/* ---- schema changes (store_dir_change.c) ---- */

/**
 * A schema change in progress: the writer lock is held, and the levels of
 * a key path are open (fds[0] is the root), each with its dict in the
 * store's (unlocked) dict tree and the length of `path` at that level.
 */
typedef struct td__change {
	td_store *st;
	int rootfd;
	size_t depth; /* levels opened */
	int fds[TD_KEY_MAX_DEPTH];
	td_dict *dicts[TD_KEY_MAX_DEPTH];
	size_t marks[TD_KEY_MAX_DEPTH]; /* path.len at each level */
	td__relpath path;               /* the deepest level, relative to the root */
	char rel[TD_REL_MAX];           /* the same, for messages */
	size_t first_dirty;             /* shallowest level to rewrite; SIZE_MAX: none */
	bool committed;                 /* the caller committed its own files (growth) */
	bool reload;                    /* reload the dict after the commit (new mappings) */
	/*
	 * What to put back in the dict when the change fails and the dict
	 * cannot be reloaded (a grown leaf's placeholder: its old mapping).
	 */
	bool has_undo;
	td_tensor undo;
	td_dict *undo_dict;
	const char *undo_key;
	td_key *undo_handle; /* the key as a handle when undo_key holds '.' */
	/*
	 * Called once the change is committed, still under the writer lock and
	 * with the levels open (removal deletes files no meta.json names any
	 * more: under the lock, no other writer can have added them again).
	 */
	void (*on_commit)(struct td__change *c, void *arg);
	void *on_commit_arg;
} td__change;

/**
 * Begin a change: take the exclusive lock, recover a crashed commit, load
 * what other processes committed; the store's dict is unlocked for editing.
 */
int td__change_begin(td__change *c, td_store *st, const char *fn);
/** Descend to the dict holding the path's last component (creating dicts with `create`). */
int td__change_walk(td__change *c, const char *const *parts, size_t n, bool create, const char *fn);
/**
 * End a change with status `rc`: commit the levels from first_dirty down
 * (journaled when several); after that commit, or one the caller made
 * (c->committed), bump the generation and with c->reload load the dict
 * again; on failure reload what is committed. Releases the lock; returns
 * the status.
 */
int td__change_end(td__change *c, int rc);
/** td_store_add_tensor() (`copy`) and td_store_add_empty() on a checked key path. */
int td__dir_add(td_store *st, const char *const *parts, size_t n, const td_tensor *t, bool copy,
	const char *fn);
/** td_store_remove() on a checked key path. */
int td__dir_remove(td_store *st, const char *const *parts, size_t n, const char *fn);

/* ---- growth (store_dir_grow.c) ---- */

/** td_store_grow() on a read-write store without lazy stacks. */
int td__dir_grow(td_store *st, int64_t new_size, const char *fn);
/** td_store_grow_leaf() on a checked key path. */
int td__dir_grow_leaf(td_store *st, const char *const *parts, size_t n, int64_t new_size,
	const char *fn);

#endif /* TD_STORE_DIR_H */
