/* SPDX-License-Identifier: MIT */
/*
 * store_impl.h - internals shared by the storage/ sources. Never installed.
 */
#ifndef TD_STORE_IMPL_H
#define TD_STORE_IMPL_H

#include "td_internal.h"
#include "format.h"
#include "keyindex.h"

#include <stddef.h>

/** Largest meta.json read (bigger ones are refused as corrupt). */
#define TD_META_MAX_BYTES ((size_t)64 << 20)

/* ---- coordination file (coord.c; format.h, doc/format.md 2) ---- */

/** A store's handle on its coordination file. */
typedef struct td__coord {
	int fd;                /* -1 when the directory has none (read-only open) */
	td__coord_header *hdr; /* the shared mapping, or NULL */
} td__coord;

/**
 * Open (and with `create`, create and initialize) the coordination file
 * of the store directory `dirfd`; `root` names it in messages. Without
 * `create` a missing file is not an error: c->fd stays -1.
 */
int td__coord_open(td__coord *c, int dirfd, const char *root, bool create);
void td__coord_close(td__coord *c);
/** The current schema generation (0 without a coordination file). */
uint64_t td__coord_generation(const td__coord *c);
/** Increment the generation; @return the new value. Under the exclusive lock. */
uint64_t td__coord_bump(td__coord *c);
/** flock the coordination file: exclusive for schema changes, shared for loading. */
int td__coord_lock(td__coord *c, bool exclusive);
void td__coord_unlock(td__coord *c);

/* ---- redo journal (journal.c; format.h, doc/format.md 6) ---- */

/** One entry of a parsed journal: pointers into the parsed bytes (not NUL-terminated). */
typedef struct td__journal_ent {
	const char *path; /* the directory, relative to the root ("" for the root) */
	size_t path_len;
	const char *name; /* the temporary file that becomes its meta.json */
	size_t name_len;
} td__journal_ent;

/** A parsed journal. */
typedef struct td__journal {
	bool sealed; /* magic, sizes and checksum hold: the commit happened */
	size_t count;
	td__journal_ent *e; /* count entries (heap), NULL when not sealed */
} td__journal;

/**
 * Parse journal bytes (untrusted). A journal that is not sealed (too
 * short, bad magic, sizes or checksum: a writer crashed while writing it)
 * is TD_OK with j->sealed false. A sealed journal of another version is
 * TD_EVERSION; one whose flags or entries break doc/format.md 6.3 is
 * TD_ECORRUPT. `what` names the file in messages. Release with
 * td__journal_free() (also after a failure).
 */
int td__journal_parse(const void *data, size_t len, td__journal *j, const char *what);
void td__journal_free(td__journal *j);

/**
 * Under the exclusive writer lock: finish a commit a crashed writer left.
 * A sealed journal is redone (each listed temporary file that still
 * exists is renamed over its directory's meta.json, the directories
 * synced) and removed; `*redone` is then true. An unsealed one is removed
 * with every uncommitted temporary file (.tdstore-tmp.*) under the root.
 * No journal: nothing to do. A corrupt journal changes nothing.
 */
int td__journal_recover(int rootfd, const char *root, bool *redone);

/**
 * What a reader that cannot write makes of a sealed journal: the
 * directories whose meta.json is still to be replaced, and by which file.
 */
typedef struct td__journal_view {
	size_t n;
	struct td__journal_view_ent *e;
} td__journal_view;

/** Read the journal of the store at `rootfd` (none, or an unsealed one: an empty view). */
int td__journal_view_open(td__journal_view *v, int rootfd, const char *root);
/** The file that holds the current meta.json of directory `dirfd`: a temporary name or "meta.json". */
const char *td__journal_view_meta(const td__journal_view *v, int dirfd);
void td__journal_view_free(td__journal_view *v);

/** A relative directory path built while descending ("a/b"; "" for the root). */
typedef struct td__relpath {
	char *s;
	size_t len, cap;
} td__relpath;

/** Append component `name`; `*mark` receives what td__relpath_pop() restores. */
int td__relpath_push(td__relpath *p, const char *name, size_t *mark);
void td__relpath_pop(td__relpath *p, size_t mark);
/** The path ("" when empty); valid until the next push or free. */
const char *td__relpath_str(const td__relpath *p);
void td__relpath_free(td__relpath *p);

/** A meta.json written under a temporary name, waiting for its commit. */
typedef struct td__commit_entry {
	int dirfd;                     /* owned */
	char *path;                    /* relative to the root, owned */
	char tmp[TD_TMP_NAME_MAX + 1]; /* the staged file; "meta.json" when in_place */
	bool in_place;                 /* written as meta.json of a new directory: no rename */
	uint32_t meta_length;          /* the file's bytes and their XXH3-64, for */
	uint64_t meta_hash;            /* the directory key index */
} td__commit_entry;

/** What a writer knows of a directory store's meta.json files (dirindex.h). */
typedef struct td__dirmodel td__dirmodel;

/**
 * A commit of meta.json files: staged one by one (children before their
 * parents), then made current together. One file is renamed into place;
 * several go through the journal (doc/format.md 6.4).
 */
typedef struct td__commit {
	td__commit_entry *e;
	size_t n, cap;
	td__dirmodel *model; /* NULL, or told every file once it is committed */
} td__commit;

/**
 * Write `len` bytes of meta.json for the directory `dirfd` (at `path`
 * relative to the root) to a temporary file there, to be committed later.
 */
int td__commit_stage(td__commit *c, int dirfd, const char *path, const char *text, size_t len,
	const char *what);
/**
 * Write meta.json directly into `dirfd`, a directory created by this
 * change: nothing names it until the parent's staged meta.json is renamed
 * into place, so it needs no temporary name, no rename and no journal
 * entry. It becomes durable with the commit's first sync; an abort
 * removes it.
 */
int td__commit_stage_new(td__commit *c, int dirfd, const char *path, const char *text, size_t len,
	const char *what);
/**
 * Make every staged file current, under the exclusive writer lock: with
 * `sync`, sync the filesystem (leaf data and staged files), then (for more
 * than one file) write and sync the journal, rename each file over its
 * meta.json in staging order, sync the directories and remove the
 * journal. Without `sync` the same steps run without syncs (atomic against
 * a process crash, not a power loss). The commit is emptied either way;
 * on failure before the journal was sealed the staged files are removed,
 * after it they stay for recovery.
 */
int td__commit_run(td__commit *c, int rootfd, bool sync, const char *what);
/** Remove the staged files and empty the commit. */
void td__commit_abort(td__commit *c);

/* ---- stores (store.c) and their placements ---- */

/** How the last load of a directory store used its `.tdstore-index`. */
enum {
	TD_DIX_USED = 1, /* the dict was built from the index */
	TD_DIX_OFF,      /* TDSTORE_DIR_INDEX=0: not looked at */
	TD_DIX_ABSENT,   /* no index file */
	TD_DIX_JOURNAL,  /* a journal is left: a commit may be half done */
	TD_DIX_REFUSED,  /* the file is not a valid index (dix_code says why) */
	TD_DIX_STALE     /* a meta.json or a file it names is not what it says */
};

/** Longest path (relative to a directory store's root) kept for messages; longer ones are cut. */
#define TD_REL_MAX 512

/** The directory placement's part of a store (store_dir*.c). */
typedef struct td__dirstore {
	td__coord coord;  /* the coordination file */
	td_buffer **maps; /* writable mappings (one reference each), for sync */
	size_t nmaps;
	size_t cap_maps;
	td__dirmodel *dix; /* read-write stores: what the next index will say */
	int dix_state;     /* how the last load went: TD_DIX_USED, or why not */
	int dix_code;      /* with TD_DIX_REFUSED or TD_DIX_STALE: the status that said so */
	bool stale;        /* a failed change could not reload: the dict may be half-changed */
} td__dirstore;

/** A commit slot of a packed file, decoded (doc/format.md 4.2). */
typedef struct td__slot {
	uint64_t generation, index_offset, index_length, index_capacity, file_length;
	bool sealed; /* checksum valid and generation not 0: a commit happened */
	bool ok;     /* sealed and fields valid (its index may still be damaged) */
} td__slot;

/** The packed placement's part of a store (store_packed.c). */
typedef struct td__packed {
	int fd;           /* the file; -1 when closed */
	td_buffer *map;   /* [0, file_length) mapped shared (one reference) */
	td__keyindex ix;  /* the committed index the dict was built from */
	td__slot slot[2]; /* A and B as last read */
	int cur;          /* the slot in use (the newer): 0 or 1 */
} td__packed;

typedef struct td__placement_ops td__placement_ops;

/** An open store: what every placement has, then the placement's own state. */
struct td_store {
	const td__placement_ops *ops; /* its placement */
	char *path;                   /* as given to open / memmap */
	bool writable;                /* open read-write */
	td_dict *dict;                /* the root dict (owned) */
	uint64_t generation;          /* the schema generation the dict was loaded at */
	union {                       /* the state of the placement `ops` is */
		td__dirstore dir;
		td__packed pk;
	};
};

/**
 * A placement: how a store keeps its files. store.c checks the arguments
 * of every public call and goes to the store's placement through this
 * table; every operation but init and release records what failed. A
 * placement is added by one more table, listed in store.c's `placements`
 * with the probe that tells its stores from the others', and its state in
 * td_store's union.
 */
struct td__placement_ops {
	/** Which placement it is: what td_store_memmap_opts asks for and td_store_placement() says. */
	td_placement placement;
	/** Whether `path` is a store of this placement; NULL for the last, which takes any path. */
	bool (*probe)(const char *path);
	/** Make the placement's state empty (nothing to release), in a zeroed handle. */
	void (*init)(td_store *st);
	/** Release what the placement's state holds. */
	void (*release)(td_store *st);
	/** td_store_open(): load the store at st->path (read-write when st->writable) into st->dict. */
	int (*open)(td_store *st);
	/**
	 * td_store_memmap(): write `src` (checked) as a new store at st->path
	 * and load it; `opts` (checked, never NULL) says how.
	 */
	int (*memmap)(td_store *st, const td_dict *src, const td_store_memmap_opts *opts);
	int (*sync)(td_store *st);
	uint64_t (*generation)(const td_store *st);
	int (*refresh)(td_store *st, bool *changed);
	/*
	 * Schema changes, on a read-write store without lazy stacks and a
	 * checked key path; `fn` names the public call in messages.
	 * td_store_add_tensor() adds a copy of `t`; td_store_add_empty() a
	 * zero-strided `t` of the leaf's shape, without `copy`.
	 */
	int (*add)(td_store *st, const char *const *parts, size_t n, const td_tensor *t, bool copy,
		const char *fn);
	int (*remove)(td_store *st, const char *const *parts, size_t n, const char *fn);
	int (*grow)(td_store *st, int64_t new_size, const char *fn);
	int (*grow_leaf)(td_store *st, const char *const *parts, size_t n, int64_t new_size,
		const char *fn);
};

extern const td__placement_ops td__dir_ops;    /* store_dir.c */
extern const td__placement_ops td__packed_ops; /* store_packed.c */

/* ---- the directory key index's model (dirindex.c; doc/format.md 7) ---- */

int td__dirmodel_new(td__dirmodel **out);
void td__dirmodel_free(td__dirmodel *m);
/** Mark the model as not matching the store (no index is written from it). NULL-safe. */
void td__dirmodel_poison(td__dirmodel *m);

/*
 * What the meta.json loader learned, for a read-write load (each is a
 * no-op on a NULL model, and poisons it instead of failing): the bytes of
 * the meta.json of directory `rel` (relative to the root, as the loader
 * names it), that `rel` is a tensorclass, and the name a leaf file was
 * opened under.
 */
void td__dirmodel_note_meta(td__dirmodel *m, const char *rel, const char *text, size_t len);
void td__dirmodel_note_shell(td__dirmodel *m, const char *rel);
void td__dirmodel_note_leaf(td__dirmodel *m, const char *rel, const char *key, const char *fname);
/** A committed commit: each of its directories now holds the staged file. */
void td__dirmodel_note_commit(td__dirmodel *m, const td__commit *c);

/* ---- what stores accept (store_rules.c) ---- */

/** The checks td_store_memmap() makes before touching a file (reserved keys, bytes, devices). */
int td__check_writable(const td_dict *d, const char *fn);
/**
 * Whether `d` is a lazy stack or holds one at any depth: 1 or 0, or
 * TD_ENOMEM. Schema changes of stores refuse such trees.
 */
int td__holds_lazy(const td_dict *d);

/* ---- shared-memory arena (shm_arena.c) ---- */

/**
 * Serve `nbytes` of anonymous shared memory from the arena as a writable
 * TD_MEMORY_SHM buffer whose last reference gives the block back.
 * @return 1 with `*out` set, and `*zeroed_out` true when the bytes read as
 *         zeros (a never-used block) and false when they may hold an
 *         earlier tensor's bytes; 0 when the arena does not serve this
 *         size (0 bytes, above the arena's maximum, or the arena is off):
 *         the caller makes a memfd of its own; < 0 on failure (`fn`
 *         names the call in the message).
 */
int td__shm_arena_alloc(td_buffer **out, size_t nbytes, bool *zeroed_out, const char *fn);

/**
 * If `buf` is an arena buffer: mark its block as exported (never handed
 * out again by this process), store the chunk's memfd in `*fd_out` and the
 * byte offset of the buffer's data in the memfd in `*offset_out`, and
 * return true. Otherwise return false and store nothing.
 */
bool td__shm_arena_export(const td_buffer *buf, int *fd_out, uint64_t *offset_out);

/* ---- files (fileio.c) ---- */

/**
 * Create a new temporary file `.tdstore-tmp.<pid>.<n>` under `dirfd`,
 * open read-write; its name goes to `tmp` (64 bytes are enough).
 */
int td__create_temp(int dirfd, char *tmp, size_t tmp_len, int *fd_out, const char *what);

/**
 * tensordict's legacy fallback (doc/format.md 1.4): a raw key name is tried
 * when the encoded name is absent and the key is "safe": no `/` or `\`,
 * no drive prefix `X:`, and for directories not empty, `.` or `..`.
 */
bool td__key_legacy_safe(const char *key, bool is_dir);
/** Names meta.json uses for the dict itself (tensordict 0.15 added the last two). */
bool td__key_reserved(const char *key);

/** Mapping hook for td_buffer_wrap(): munmap(data, nbytes). */
void td__unmap_release(void *data, size_t nbytes, void *payload);

/**
 * Map `nbytes` from offset 0 of `fd` shared, read-only or writable, as a
 * TD_MEMORY_FILE buffer whose last reference unmaps it. `what` names the
 * file in messages.
 */
int td__map_fd(td_buffer **out, int fd, size_t nbytes, bool writable, const char *what);

/**
 * As td__map_fd(), with the buffer's kind, release hook and payload taken
 * from `opts` (its flags are set from `writable`). The hook must unmap
 * (td__unmap_release() does). On failure nothing is mapped and the hook is
 * not called.
 */
int td__map_fd_as(td_buffer **out, int fd, size_t nbytes, bool writable,
	const td_buffer_wrap_opts *opts, const char *what);

/**
 * Report a failed open/mkdir/... of `what` for errno `err`: ELOOP (a
 * symbolic link under O_NOFOLLOW) is TD_ECORRUPT, ENOENT TD_ENOTFOUND,
 * EACCES/EPERM/EROFS TD_EREADONLY, the rest by td__status_from_errno().
 */
int td__file_error(int err, const char *what, const char *op);

/**
 * fstat `fd` and require a regular file (TD_ECORRUPT otherwise; TD_EIO if
 * fstat fails). Its size goes to `*size_out` when not NULL. `what` names
 * it in messages.
 */
int td__fstat_regular(int fd, const char *what, uint64_t *size_out);

/**
 * Open `name` under `dirfd` read-write with `nbytes` reserved on disk
 * (posix_fallocate; skipped for 0), so that a full disk fails here rather
 * than with SIGBUS later. The file is created (O_CREAT | O_EXCL, 0666), or
 * with `existsok` an existing one is reused: grown when short, never
 * truncated. Symbolic links and non-regular files are refused
 * (TD_ECORRUPT); without `existsok` an existing file is TD_EEXISTS. `fn`
 * and `what` name the call and the file in messages. `*created_out` (may
 * be NULL) tells whether this call created the file, also on failure, so
 * that the caller may remove it; on failure the descriptor is closed.
 */
int td__open_reserved(int dirfd, const char *name, size_t nbytes, bool existsok, const char *fn,
	const char *what, int *fd_out, bool *created_out);

/**
 * Read a whole regular file `name` under `dirfd` (no symbolic links) into
 * a new NUL-terminated heap block of at most `max` bytes (release with
 * td__free()). `what` names it in messages.
 */
int td__read_small_file(int dirfd, const char *name, size_t max, char **out, size_t *len,
	const char *what);

/**
 * Replace `name` under `dirfd` atomically with `len` bytes: written to a
 * temporary name in the same directory, fsynced (unless `nosync`), renamed
 * over `name`, and the directory fsynced.
 */
int td__write_file_atomic(int dirfd, const char *name, const void *data, size_t len, bool nosync,
	const char *what);

/**
 * Write `len` bytes to a new temporary file in `dirfd` (fsynced when
 * `do_fsync`); its name goes to `tmp` (64 bytes are enough). On failure
 * nothing is left behind.
 */
int td__write_temp(int dirfd, const void *data, size_t len, bool do_fsync, char *tmp,
	size_t tmp_len, const char *what);

/**
 * Create the file `name` under `dirfd` (it must not exist: TD_EEXISTS; no
 * symbolic link is followed) holding `len` bytes, not synced. On failure
 * nothing is left behind.
 */
int td__write_new(int dirfd, const char *name, const void *data, size_t len, const char *what);

/** Write all of `data` at the current offset of `fd` (retrying short writes and EINTR). */
int td__write_fd(int fd, const void *data, size_t len, const char *what);

#endif /* TD_STORE_IMPL_H */
