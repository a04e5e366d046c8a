/* SPDX-License-Identifier: MIT */
/*
 * dirindex.h - the directory key index `.tdstore-index` (doc/format.md
 * section 7) in memory: parsed from untrusted bytes and encoded
 * (dirindex.c), and the model a writer keeps of what each directory's
 * meta.json held, from which it writes the next index (dirindex.c,
 * store_dirindex.c). Never installed.
 */
#ifndef TD_DIRINDEX_H
#define TD_DIRINDEX_H

#include "store_impl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** One directory entry (doc/format.md 7.3), decoded. */
typedef struct td__dirent {
	uint32_t record;      /* the key index record it belongs to */
	uint8_t role;         /* TD_DIRINDEX_HOME ... */
	uint8_t flags;        /* TD_DIRINDEX_DIR_RAW */
	uint32_t meta_length; /* bytes of its meta.json */
	uint64_t meta_hash;   /* XXH3-64 of them */
} td__dirent;

/** A whole `.tdstore-index`, parsed (or being built by a writer). */
typedef struct td__dirindex {
	td__keyindex ix;     /* the key index, TD_KEYINDEX_F_DIRECTORY */
	uint64_t generation; /* informative: the generation it was written at */
	uint32_t ndirs, cap_dirs;
	td__dirent *dirs; /* ordered by record; a record's shells before its home */
	uint32_t nraw, cap_raw;
	uint32_t *raw; /* ascending: tensor records whose file has the raw key name */
} td__dirindex;

/** Release what `dx` holds (the struct is the caller's); safe on a zeroed one. */
void td__dirindex_free(td__dirindex *dx);

/**
 * Parse and check `len` bytes of a `.tdstore-index`: every rule of
 * doc/format.md 7.6, the key index's (section 3) included. `what` names
 * the file in messages. On failure `dx` is left empty.
 *
 * @return TD_OK; TD_ECORRUPT; TD_EVERSION; TD_ENOTSUP (reserved flags);
 *         TD_EOVERFLOW (a shape whose byte size overflows); TD_ENOMEM
 */
int td__dirindex_parse(td__dirindex *dx, const void *buf, size_t len, const char *what);

/** The encoded size of `dx`. TD_EOVERFLOW past TD_DIRINDEX_MAX_BYTES. */
int td__dirindex_size(const td__dirindex *dx, size_t *out);

/** Encode `dx` into `buf` of td__dirindex_size() bytes, checksums included. */
void td__dirindex_encode(const td__dirindex *dx, void *buf, size_t len);

/** Append a directory entry or a raw-name record to a writer's `dx`. TD_ENOMEM. */
int td__dirindex_push_dir(td__dirindex *dx, const td__dirent *e);
int td__dirindex_push_raw(td__dirindex *dx, uint32_t record);

/**
 * enc(key) (doc/format.md 1.4) followed by `suffix` into `buf` of `len`
 * bytes. @return false when it does not fit (no name that long opens).
 */
bool td__dirindex_name(const char *key, const char *suffix, char *buf, size_t len);

/* ---- the writer's model of the directories (dirindex.c) ---- */

/** What a model knows of one path. */
enum {
	TD_DIRMODEL_DIR = 1, /* a directory whose meta.json was read or written */
	TD_DIRMODEL_RAW = 2  /* a leaf file opened under its raw key name */
};

/** One path of a model (borrowed from it; valid until its next change). */
typedef struct td__dirmodel_ent {
	char *path; /* relative to the root ("" for the root), owned */
	size_t path_len;
	uint64_t h;   /* hash of kind and path; 0: a free slot */
	uint8_t kind; /* TD_DIRMODEL_* */
	bool shell;   /* a directory: a tensorclass, its fields in _tensordict/ */
	bool used;    /* named by the index being written */
	uint32_t meta_length;
	uint64_t meta_hash;
} td__dirmodel_ent;

/** The paths a writer will name in the next index: a hash table keyed by (kind, path). */
struct td__dirmodel {
	td__dirmodel_ent *slots;
	size_t cap, n; /* cap: a power of two, or 0 */
	size_t nraw;   /* entries of kind TD_DIRMODEL_RAW */
	bool poisoned; /* it may not match the store: write no index */
};

/**
 * Record what is known of `path` (`len` bytes, no NUL needed): a
 * directory's meta.json (length, hash, tensorclass or not) or a raw leaf
 * name. @return TD_OK; TD_ENOMEM
 */
int td__dirmodel_set(td__dirmodel *m, uint8_t kind, const char *path, size_t len,
	uint32_t meta_length, uint64_t meta_hash, bool shell);

/** The entry of (kind, path), or NULL. */
td__dirmodel_ent *td__dirmodel_find(const td__dirmodel *m, uint8_t kind, const char *path,
	size_t len);

/** Keep only the entries marked used (and clear the marks). TD_ENOMEM. */
int td__dirmodel_prune(td__dirmodel *m);

#endif /* TD_DIRINDEX_H */
