/* SPDX-License-Identifier: MIT */
/*
 * tdstore/store.h - memory-mapped stores: a td_dict laid out in files,
 * opened in place, whose tensors are views into the file mappings.
 *
 * A store has one of two placements. The directory placement (the default)
 * is Python tensordict's memmap layout (TensorDict.memmap /
 * TensorDict.load_memmap):
 *
 *     <dir>/meta.json             the dict's keys, dtypes, shapes, batch shape
 *     <dir>/<enc(key)>.memmap     one raw, C-ordered, little-endian file per leaf
 *     <dir>/<enc(key)>/           one directory per nested dict or string leaf
 *
 * where enc() is tensordict's file-name encoding of a key (see
 * td_store_encode_key()). A leaf without elements has no file. A directory
 * written by Python tensordict opens as it is, and one written here opens
 * in Python with TensorDict.load_memmap().
 *
 * The packed placement (TD_PLACEMENT_PACKED) is one file: a header page with
 * two commit slots, a binary key index and every leaf in a 4096-byte
 * aligned extent (doc/format.md sections 3 and 4). One mapping covers the
 * whole store; opening reads the index only. It holds lazy stacks too (at
 * the root or nested, ragged ones included) as records of the key index
 * (doc/format.md 3.4); builds that predate them refuse such a file with
 * TD_ENOTSUP.
 *
 * Lifetimes: a store owns its dict (td_store_dict()); the dict pointer and
 * everything borrowed from it is valid until td_store_close(). Tensors taken
 * from the dict with td_tensor_ref() (or copied out of a td_value) hold a
 * reference to their file mapping and stay valid after the store is closed.
 * A mapping is never shrunk: truncating a leaf file behind tdstore's back
 * while it is mapped makes access to the lost pages fault (SIGBUS), as with
 * any memory-mapped file.
 *
 * Threads and processes: a store handle is used by one thread at a time;
 * any number of processes may open the same directory. Writes to tensor
 * data through a writable store are visible at once to every process that
 * maps the same files (MAP_SHARED).
 */
#ifndef TDSTORE_STORE_H
#define TDSTORE_STORE_H

#include "common.h"
#include "dict.h"

TD_BEGIN_DECLS

typedef struct td_store td_store;

/** How a store keeps its files (td_store_memmap_opts, td_store_placement()). */
typedef enum td_placement {
	/** tensordict's directory layout: meta.json files, one file per leaf (the default) */
	TD_PLACEMENT_DIRECTORY = 0,
	/** one file: header, key index, every leaf in a 4096-byte aligned extent */
	TD_PLACEMENT_PACKED = 1
} td_placement;

/**
 * How much of a call's writing reaches the disk before it returns (the
 * `sync` of td_store_memmap_opts and td_ring_create_opts).
 */
typedef enum td_sync_mode {
	/**
	 * Every file and directory written is synced (fsync, syncfs) before
	 * the call returns: the result survives a crash of the machine.
	 */
	TD_SYNC_FULL = 0,
	/**
	 * Nothing is synced: faster; the result survives a crash of the
	 * process (what is committed is whole), not of the machine, until the
	 * kernel writes it back or td_store_sync() / td_ring_sync() is called.
	 */
	TD_SYNC_NONE = 1
} td_sync_mode;

/** Current version of td_store_open_opts; set `version` to it. */
#define TD_STORE_OPEN_OPTS_VERSION 1

/** How td_store_open() opens a store. Fields are only appended. */
typedef struct td_store_open_opts {
	unsigned version; /**< TD_STORE_OPEN_OPTS_VERSION */
	/**
	 * map the leaves writable (data written through the dict reaches the
	 * files) and allow schema changes; default false: read-only
	 */
	bool writable;
} td_store_open_opts;

/** Initializer for td_store_open_opts: read-only. */
#define TD_STORE_OPEN_OPTS_INIT \
	{ \
		TD_STORE_OPEN_OPTS_VERSION, false \
	}

/** Current version of td_store_memmap_opts; set `version` to it. */
#define TD_STORE_MEMMAP_OPTS_VERSION 1

/** How td_store_memmap() writes a store. Fields are only appended. */
typedef struct td_store_memmap_opts {
	unsigned version; /**< TD_STORE_MEMMAP_OPTS_VERSION */
	/**
	 * TD_PLACEMENT_DIRECTORY (the default): tensordict's directory layout;
	 * TD_PLACEMENT_PACKED: one file at `path` holding a header, the key
	 * index and every leaf in 4096-byte aligned extents (doc/format.md
	 * section 4), which one mapping covers
	 */
	td_placement placement;
	/**
	 * reuse what exists (tensordict's existsok=True): leaf files are written
	 * in place, grown when too small and never truncated; a packed file is
	 * replaced. Default false: an existing leaf file or packed file is an
	 * error
	 */
	bool exist_ok;
	/**
	 * allocate the files without copying the data (tensordict's
	 * memmap_like): new files read as zeros, reused files keep their bytes;
	 * default false: the data is copied
	 */
	bool like;
	/**
	 * TD_SYNC_FULL (the default): every file and directory is synced
	 * before the call returns; TD_SYNC_NONE: nothing is synced (the save
	 * is still atomic against a crash of the process)
	 */
	td_sync_mode sync;
} td_store_memmap_opts;

/** Initializer for td_store_memmap_opts: a directory, nothing reused, the data copied, synced. */
#define TD_STORE_MEMMAP_OPTS_INIT \
	{ \
		TD_STORE_MEMMAP_OPTS_VERSION, TD_PLACEMENT_DIRECTORY, false, false, TD_SYNC_FULL \
	}

/**
 * Open a store in place: a directory (only its meta.json files are read)
 * or a packed file (only its header and key index are read). Data pages
 * fault in on first access. A directory holding a lazy stack (tensordict's
 * LazyStackedTensorDict, children in "0/", "1/", ...) opens as a lazy
 * stack (td_dict_is_lazy()) of its opened children; a lazy stack named as
 * an entry of a dict ({"type": "LazyStackedTensorDict"}) opens as a lazy
 * stack nested in the dict (see lazy.h). A packed file's lazy stacks open
 * the same way, their leaves viewing the file's mapping. The schema of a
 * store holding a lazy stack anywhere cannot be changed in place
 * (td_store_add_tensor(), td_store_remove(), td_store_grow() etc. give
 * TD_ENOTSUP, packed or not), and no .tdstore-index is kept for a
 * directory holding one: its meta.json files are read.
 *
 * The dict has the directory's batch shape, keys in meta.json order,
 * nested dicts, string leaves (tensordict's NonTensorData holding a str),
 * and tensors that view the mapped `.memmap` files (leaves without
 * elements are empty heap tensors). It is locked: keys cannot be added or
 * removed through it.
 *
 * @param[out] out  receives the store; owned by the caller, release with
 *                  td_store_close(); NULL on failure
 * @param path      the directory, or a packed file
 * @param opts      NULL for the defaults (TD_STORE_OPEN_OPTS_INIT:
 *                  read-only), or options whose `version` is
 *                  TD_STORE_OPEN_OPTS_VERSION
 * @return TD_OK;
 *         TD_EINVAL for NULL arguments or an unknown options version;
 *         TD_EEXISTS if `path` is neither a directory nor a regular file;
 *         TD_ENOTFOUND if `path` or a meta.json it needs does not exist;
 *         TD_ECORRUPT for a meta.json that is not valid JSON, is not the
 *         layout above, declares an invalid dtype, shape or batch shape, or a
 *         leaf file shorter than its declared size; for a symbolic link or
 *         other non-regular file where a file or directory is expected;
 *         for a packed file whose header, commit slots or key index is
 *         damaged (checksums, bounds, overlapping extents, a file shorter
 *         than its declared length; a torn commit slot is not damage: the
 *         other slot's state opens);
 *         TD_EVERSION for a packed format version this build does not read;
 *         TD_EOVERFLOW for a shape whose byte size overflows;
 *         TD_ENOTSUP for content this release cannot represent (a lazy stack
 *         whose children's batch shapes differ, nesting past 64 levels;
 *         nested tensors, NonTensorStack, non-string NonTensorData,
 *         quantized or complex32 dtypes; unknown packed feature flags); the
 *         message names the key;
 *         TD_EREADONLY (`writable` on files that cannot be written);
 *         TD_EIO and TD_ENOMEM for system failures
 */
TD_API int td_store_open(td_store **out, const char *path, const td_store_open_opts *opts);

/**
 * Write a dict into a store directory (tensordict's TensorDict.memmap)
 * and open it read-write: the store's dict holds the same keys, its
 * tensors now map the new files. `src` is not modified.
 *
 * The directory is created if missing (its parent must exist); an existing
 * one is reused. Each leaf file is created with its full size reserved
 * (every byte written, or with the option `like` fallocated), so that a
 * full disk fails here with TD_ENOSPC rather than later with SIGBUS.
 * meta.json files are replaced atomically (written under a temporary name,
 * synced, renamed). With the default `sync` (TD_SYNC_FULL) everything is
 * synced to disk before returning.
 *
 * A lazy stack is written as tensordict writes one (its children in "0/",
 * "1/", ...; TD_EEXISTS if a directory "n/" beyond its n children exists);
 * the store's dict is then a lazy stack of the mapped children. So is a
 * lazy stack nested in a dict, in its entry's directory, named
 * {"type": "LazyStackedTensorDict"} in the dict's meta.json. A packed
 * store holds lazy stacks too, nested or not: each child's leaves in
 * extents of their own, the stack as a record of the key index.
 *
 * Keys may be any string: file names are encoded as tensordict encodes
 * them. The keys "shape", "device", "_type", "_format_version" and
 * "_class" are refused, as meta.json uses them for the dict itself. Bytes
 * leaves are refused (tensordict stores them in a Python pickle, which
 * tdstore does not write).
 *
 * With TD_PLACEMENT_PACKED the store is one file at `path`, written under
 * a temporary name beside it, synced, then linked to `path` (which must not
 * exist) or, with `exist_ok`, renamed over it: a crash leaves no file or a
 * whole one. Processes that had the old file open keep seeing the old
 * file.
 *
 * @param[out] out  receives the store, open read-write; owned by the
 *                  caller, release with td_store_close(); NULL on failure
 * @param src       the dict to write (tensors, nested dicts, strings)
 * @param path      the directory, or for a packed store the file
 * @param opts      NULL for the defaults (TD_STORE_MEMMAP_OPTS_INIT: a
 *                  directory, nothing reused, the data copied, everything
 *                  synced), or options whose `version` is
 *                  TD_STORE_MEMMAP_OPTS_VERSION
 * @return TD_OK;
 *         TD_EINVAL (NULL arguments, an unknown options version, placement
 *         or sync mode, a reserved key, a bytes leaf, a device tensor);
 *         TD_EEXISTS (a leaf file, or the packed file, exists and
 *         `exist_ok` is not set; `path` exists and is not a directory, or
 *         for a packed store not a regular file);
 *         TD_ENOTFOUND (the parent of `path` does not exist);
 *         TD_ECORRUPT (a symbolic link or other non-regular file where a
 *         leaf file or directory goes);
 *         TD_ENOSPC; TD_EIO; TD_ENOMEM.
 *         On failure files already written stay on disk, and the meta.json
 *         of a directory holds either its old or its new content, never a
 *         mix.
 */
TD_API int td_store_memmap(td_store **out, const td_dict *src, const char *path,
	const td_store_memmap_opts *opts);

/**
 * The store's dict. Borrowed: valid until td_store_close(). Locked (no
 * keys can be added or removed through it); tensor data can be written in
 * place when the store is read-write.
 *
 * @return the dict; NULL for NULL
 */
TD_API td_dict *td_store_dict(td_store *store);

/** @return the path the store was opened with (borrowed, valid until close); NULL for NULL. */
TD_API const char *td_store_path(const td_store *store);

/**
 * @return the store's placement: TD_PLACEMENT_DIRECTORY or
 *         TD_PLACEMENT_PACKED; TD_PLACEMENT_DIRECTORY for NULL
 */
TD_API td_placement td_store_placement(const td_store *store);

/**
 * @return whether the store is open read-write (td_store_memmap(), or
 *         td_store_open() with `writable`); false for NULL
 */
TD_API bool td_store_is_writable(const td_store *store);

/**
 * Flush what was written through a read-write store to disk. A packed store
 * or a directory store of up to 8 leaf files: msync of each mapping (which
 * syncs its file). A directory store of more files: one syncfs of its file
 * system, which flushes the device once instead of once per file (it also
 * writes back other processes' dirty data on that file system).
 * td_store_close() does not call it: call it before closing a store whose
 * data must survive a crash of the machine.
 *
 * @return TD_OK (also for a read-only store); TD_EINVAL for NULL; TD_EIO;
 *         TD_ENOTFOUND (a directory store whose directory went away)
 */
TD_API int td_store_sync(td_store *store);

/**
 * Close a store: the dict and the handle are released. Nothing is synced:
 * data written through a read-write store is in the files' pages (every
 * process mapping them sees it at once) and reaches the disk when the
 * kernel writes them back; call td_store_sync() first to make it durable
 * against a crash of the machine. (What td_store_memmap() and the schema
 * changes write is synced by those calls, unless TD_SYNC_NONE.) Mappings
 * still referenced by tensors the caller holds stay mapped until those
 * tensors are released. Cannot fail; NULL is accepted.
 */
TD_API void td_store_close(td_store *store);

/* ------------------------------------------------------------------------ */
/* Schema changes, shared by processes                                       */
/* ------------------------------------------------------------------------ */

/*
 * A read-write store keeps a coordination file, ".tdstore-coord", in its
 * directory (doc/format.md). Schema changes (td_store_add_tensor,
 * td_store_add_empty, td_store_remove, td_store_grow, td_store_grow_leaf,
 * their _key forms,
 * td_store_memmap into the directory) take its writer lock, bring the dict
 * up to date with changes committed by other processes, write and sync the
 * data, replace the affected meta.json files and then increment the
 * store's generation. Other processes see the change after
 * td_store_refresh().
 *
 * Crash safety: a change that replaces several meta.json files (growth, an
 * add that creates nested dicts, a save) commits them together through a
 * redo journal, ".tdstore-journal" (doc/format.md section 6). A process
 * killed at any point leaves the old state or the new one: the next
 * read-write open or schema change finishes (or discards) the interrupted
 * commit, and a read-only open that finds it reads the new state without
 * writing. Python tensordict does not read the journal: until a tdstore
 * writer has recovered the store it may see some directories old and some
 * new.
 *
 * A packed store does the same under an exclusive flock on its file: new
 * data is appended, the new key index written and synced, then the older
 * of the two commit slots is overwritten and synced (doc/format.md 4.4).
 * Committed extents are never moved or reused: a removed leaf's space is
 * dead until the store is written anew.
 *
 * Failures: a change that fails leaves the files as they were (or, when it
 * fails after its commit, reports the error with the change committed) and
 * reloads the dict from disk. When that reload itself fails (TD_ENOMEM),
 * the dict keeps the data it showed before the change, possibly with the
 * changed entry missing or added, and the store is marked stale: the next
 * schema change or td_store_refresh() reloads it.
 *
 * Views across a refresh or a remap: a refresh or a schema change replaces
 * the store's dict. Pointers borrowed from the old dict (nested dicts,
 * values, keys, tensor data pointers) become invalid; tensors taken with
 * td_tensor_ref() stay valid and keep their own mapping of the same file
 * pages (files are never truncated; a removed leaf's file is unlinked, and
 * its pages live on while referenced). After a growth such a tensor keeps
 * its old shape: it sees, and writes, the first rows of the grown leaf,
 * shared with the new dict and with every process mapping the file, but
 * not the new rows; take the tensor again from td_store_dict() to see them.
 */

/*
 * Keys: each schema change that names an entry comes in two forms. The
 * first takes a dotted key ("next.obs": the leaf "obs" of the nested dict
 * "next"; its components are not empty). The _key form takes a key handle
 * (td_key_new(), or td_key_from_path() for components that hold '.' or are
 * empty); the handle is only read, and the caller keeps it. Either way a
 * key has 1 to TD_KEY_MAX_DEPTH - 1 components.
 */

/**
 * Add a leaf holding a copy of `t` (tensordict's make_memmap_from_tensor).
 * Missing intermediate dicts are created with their parent's batch shape.
 *
 * @param store  a read-write store
 * @param key    the dotted key of the new leaf
 * @param t      the data (host memory; any strides; its shape must start
 *               with the batch shape of the dict that receives it)
 * @return TD_OK; TD_EINVAL (NULL arguments, an empty key component, a key
 *         of TD_KEY_MAX_DEPTH components or more, a reserved key, a device
 *         tensor); TD_EREADONLY (a read-only store); TD_EEXISTS (the key
 *         exists); TD_ETYPE (the shape does not start with the batch shape,
 *         or a path component is a leaf); TD_ENOTSUP (a store holding a
 *         lazy stack); TD_ENOSPC; TD_EIO; TD_ENOMEM.
 *         On failure nothing is committed and the dict is reloaded from
 *         disk (so borrowed pointers are invalid after any call).
 */
TD_API int td_store_add_tensor(td_store *store, const char *key, const td_tensor *t);

/** As td_store_add_tensor(), the key given as a handle (NULL: TD_EINVAL). */
TD_API int td_store_add_tensor_key(td_store *store, const td_key *key, const td_tensor *t);

/**
 * Add a zero-filled leaf of `dtype` and `shape` (tensordict's make_memmap).
 *
 * @param store  a read-write store
 * @param key    the dotted key of the new leaf
 * @param dtype  element type
 * @param ndim   number of dims
 * @param shape  `ndim` sizes, starting with the batch shape of the dict
 *               that receives the leaf
 * @return as td_store_add_tensor(); TD_EINVAL for a bad dtype or shape
 */
TD_API int td_store_add_empty(td_store *store, const char *key, td_dtype dtype, int ndim,
	const int64_t *shape);

/** As td_store_add_empty(), the key given as a handle (NULL: TD_EINVAL). */
TD_API int td_store_add_empty_key(td_store *store, const td_key *key, td_dtype dtype, int ndim,
	const int64_t *shape);

/**
 * Remove an entry (a leaf, a string or a whole nested dict) and delete its
 * files after the commit (a file still mapped somewhere stays readable
 * there until unmapped).
 *
 * @param store  a read-write store
 * @param key    the dotted key of the entry
 * @return TD_OK; TD_EINVAL (NULL arguments, a malformed key as for
 *         td_store_add_tensor(), a reserved key); TD_EREADONLY;
 *         TD_ENOTFOUND; TD_ETYPE (a path component is a leaf); TD_ENOTSUP
 *         (a store holding a lazy stack); TD_EIO; TD_ENOMEM
 */
TD_API int td_store_remove(td_store *store, const char *key);

/** As td_store_remove(), the key given as a handle (NULL: TD_EINVAL). */
TD_API int td_store_remove_key(td_store *store, const td_key *key);

/**
 * Grow the store along batch dim 0 (tensordict's preallocated storages
 * made larger): the root's batch dim 0 and dim 0 of every nested dict's
 * batch shape and of every tensor leaf become `new_size`. Existing rows
 * keep their values; new rows read as zeros.
 *
 * Each leaf file is extended (never truncated) with its new blocks
 * reserved (posix_fallocate, so that a full disk fails here rather than
 * with SIGBUS later) and its new bytes zeroed; a leaf without elements
 * that gains some gets its file. Then every dict's meta.json is replaced
 * in one journaled commit, the generation is incremented and the store's
 * dict is loaded again: its tensors map the grown files. String leaves
 * are kept as they are.
 *
 * In a packed store a leaf grows in place while its extent has room (it
 * is rounded up to 4096 bytes); otherwise its bytes are copied to a new
 * extent at the end of the file, and the old extent stays as dead space.
 * Tensors taken with td_tensor_ref() before the growth keep viewing the
 * extent they were taken from: shared with the new dict for a leaf grown
 * in place, a frozen copy for a moved one (writes through it no longer
 * reach the store). The commit is one slot write (doc/format.md 4.4).
 *
 * @param store     a read-write store whose root has at least one batch dim
 * @param new_size  the new dim 0, >= the current one (equal: nothing happens)
 * @return TD_OK;
 *         TD_EINVAL (NULL store, a negative size, fewer rows than the
 *         store has, a root without batch dims);
 *         TD_EREADONLY (a read-only store);
 *         TD_EOVERFLOW (a leaf's grown byte size overflows; nothing is
 *         touched);
 *         TD_ENOTSUP (more directories than one commit can journal);
 *         TD_ECORRUPT (a leaf file is missing or is not a regular file);
 *         TD_ENOSPC (the disk is full: nothing is committed; files already
 *         extended stay longer than their meta.json says, which readers
 *         accept);
 *         TD_EIO; TD_ENOMEM.
 *         On failure the dict is reloaded from what is committed on disk:
 *         the old size, unless the failure came after the commit point (a
 *         rename or sync failing once the journal was written, which the
 *         next writer completes; or loading the grown dict, which leaves
 *         the old dict in place until td_store_refresh()). Either way the
 *         store's dict is replaced (see "Views across a refresh or a
 *         remap" above).
 */
TD_API int td_store_grow(td_store *store, int64_t new_size);

/**
 * Grow dim 0 of one leaf of a dict without batch dims (tensordict's
 * make_memmap, then a larger copy of the same leaf): its shape becomes
 * [new_size, d1, ...]; existing rows keep their values, new rows are
 * zeros. The file is extended and reserved as by td_store_grow(), the
 * dict's meta.json is replaced atomically, the generation incremented and
 * the store's dict loaded again. In a packed store the leaf grows in place
 * or moves as td_store_grow() says.
 *
 * @param store     a read-write store
 * @param key       the dotted key of the leaf
 * @param new_size  the new dim 0, >= the current one (equal: nothing happens)
 * @return TD_OK;
 *         TD_EINVAL (NULL arguments, a malformed key as for
 *         td_store_add_tensor(), a reserved key, a negative size, fewer
 *         rows than the leaf has, a leaf without dims, or a leaf whose dim
 *         0 is a batch dim of its dict: grow the store with td_store_grow());
 *         TD_EREADONLY; TD_ENOTFOUND (no such key); TD_ETYPE (the key
 *         names a dict or a string, or a path component is a leaf);
 *         TD_EOVERFLOW; TD_ECORRUPT; TD_ENOSPC; TD_EIO; TD_ENOMEM.
 *         On failure nothing is committed and the dict is reloaded from
 *         disk.
 */
TD_API int td_store_grow_leaf(td_store *store, const char *key, int64_t new_size);

/** As td_store_grow_leaf(), the key given as a handle (NULL: TD_EINVAL). */
TD_API int td_store_grow_leaf_key(td_store *store, const td_key *key, int64_t new_size);

/**
 * Catch up with schema changes committed by other processes: when the
 * store's generation moved, or a failed change left the dict stale (see
 * "Failures" above), the dict is reloaded from disk.
 *
 * @param[out] changed_out  set to whether the dict was reloaded (false on
 *                         failure); may be NULL
 * @param store            the store
 * @return TD_OK; TD_EINVAL for a NULL store; the errors of td_store_open()
 *         when the new schema cannot be loaded (the old dict is kept then)
 */
TD_API int td_store_refresh(bool *changed_out, td_store *store);

/**
 * @return the schema generation in the coordination file (0 when the
 *         directory has none, or for NULL); for a packed store, the
 *         generation of its newer intact commit slot
 */
TD_API uint64_t td_store_generation(const td_store *store);

/**
 * Encode one key component (a name in one dict, not a dotted path) as a
 * file name the way tensordict does (robust_key=True): "" gives "%", "."
 * gives "%2E", ".." gives "%2E%2E"; each of / < > : " | ? * \ space % and
 * every byte below 0x20 or equal to 0x7f becomes %XX (uppercase hex);
 * every other byte ('.' included) is kept.
 *
 * @param[out] out  receives the encoded name and a NUL, cut to fit; may be
 *                  NULL when `cap` is 0
 * @param cap       size of `out` in bytes
 * @param name      the NUL-terminated name
 * @return the length of the encoded name (without the NUL) even when it did
 *         not fit, as snprintf; TD_EINVAL for a NULL name, or a NULL `out`
 *         with `cap` above 0; TD_EOVERFLOW for a name whose encoding is
 *         longer than INT_MAX
 */
TD_API int td_store_encode_key(char *out, size_t cap, const char *name);

TD_END_DECLS

#endif /* TDSTORE_STORE_H */
