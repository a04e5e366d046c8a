/* SPDX-License-Identifier: MIT */
/*
 * format.h - the binary on-disk structures of doc/format.md, field by
 * field: the key index (section 3), the packed file (section 4) and the
 * directory key index (section 7). Never installed.
 *
 * The structs describe the little-endian layout; code reads and writes the
 * fields with the explicit little-endian accessors below (td__le64() ...)
 * so that it does not depend on the host's byte order or on alignment.
 * Every offset and size is pinned by a static assert: a change here is a
 * format change, which needs a new version and a new golden file.
 */
#ifndef TD_FORMAT_H
#define TD_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- 3. key index ---- */

#define TD_KEYINDEX_MAGIC "TDSINDEX"
#define TD_KEYINDEX_VERSION 1u
#define TD_KEYINDEX_HEADER_SIZE 64u
#define TD_KEYINDEX_MAX_RECORDS ((uint32_t)1 << 24)
#define TD_KEYINDEX_MAX_BYTES ((uint64_t)1 << 30)
#define TD_KEYINDEX_NO_PARENT 0xFFFFFFFFu

enum {
	TD_KEYINDEX_KIND_DICT = 1,
	TD_KEYINDEX_KIND_TENSOR = 2,
	TD_KEYINDEX_KIND_STRING = 3,
	TD_KEYINDEX_KIND_STRINGS = 4, /* needs TD_KEYINDEX_F_STRINGS */
	TD_KEYINDEX_KIND_LAZY = 5     /* a lazy stack; needs TD_KEYINDEX_F_LAZY */
};

/** Index flag: records of kind TD_KEYINDEX_KIND_STRINGS (arrays of strings) may appear. */
#define TD_KEYINDEX_F_STRINGS 0x01u
/**
 * Index flag: the directory placement (section 7): a tensor's bytes are its
 * own leaf file (section 1), so tensor records carry no extent (offset and
 * capacity 0). Set in every index of a `.tdstore-index`, never in a packed
 * file.
 */
#define TD_KEYINDEX_F_DIRECTORY 0x02u
/**
 * Index flag: records of kind TD_KEYINDEX_KIND_LAZY (lazy stacks) may appear.
 * Set only when one does; never with TD_KEYINDEX_F_DIRECTORY.
 */
#define TD_KEYINDEX_F_LAZY 0x04u
/** Every index flag this build reads; another set bit is TD_ENOTSUP. */
#define TD_KEYINDEX_F_KNOWN (TD_KEYINDEX_F_STRINGS | TD_KEYINDEX_F_DIRECTORY | TD_KEYINDEX_F_LAZY)
/** Most children of one lazy stack record (as for the directory placement). */
#define TD_KEYINDEX_MAX_LAZY_CHILDREN ((uint64_t)1 << 20)

_Static_assert(TD_KEYINDEX_F_STRINGS == 1u << 0 && TD_KEYINDEX_F_DIRECTORY == 1u << 1 &&
	TD_KEYINDEX_F_LAZY == 1u << 2, "index flag bits of doc/format.md 3.1");
_Static_assert(TD_KEYINDEX_KIND_DICT == 1 && TD_KEYINDEX_KIND_TENSOR == 2 &&
	TD_KEYINDEX_KIND_STRING == 3 && TD_KEYINDEX_KIND_STRINGS == 4 && TD_KEYINDEX_KIND_LAZY == 5,
	"record kinds of doc/format.md 3.2");

/** Record flag: `checksum` holds the XXH64 of the tensor's bytes. */
#define TD_KEYINDEX_REC_CHECKSUM 0x01u

typedef struct td__keyindex_header {
	char magic[8];          /* "TDSINDEX" */
	uint32_t version;       /* 1 */
	uint32_t header_size;   /* 64 */
	uint32_t record_count;
	uint32_t flags;         /* TD_KEYINDEX_F_* */
	uint64_t body_length;   /* multiple of 8 */
	uint64_t generation;
	uint8_t reserved[16];   /* 0 */
	uint64_t checksum;      /* XXH64(body, seed XXH64(header[0..56), 0)) */
} td__keyindex_header;

_Static_assert(sizeof(td__keyindex_header) == TD_KEYINDEX_HEADER_SIZE, "index header size");
_Static_assert(offsetof(td__keyindex_header, version) == 8, "index version");
_Static_assert(offsetof(td__keyindex_header, header_size) == 12, "index header_size");
_Static_assert(offsetof(td__keyindex_header, record_count) == 16, "index record_count");
_Static_assert(offsetof(td__keyindex_header, flags) == 20, "index flags");
_Static_assert(offsetof(td__keyindex_header, body_length) == 24, "index body_length");
_Static_assert(offsetof(td__keyindex_header, generation) == 32, "index generation");
_Static_assert(offsetof(td__keyindex_header, reserved) == 40, "index reserved");
_Static_assert(offsetof(td__keyindex_header, checksum) == 56, "index checksum");

/** The fixed part of a record; shape, key, inline text and padding follow. */
typedef struct td__keyindex_record {
	uint8_t kind;
	uint8_t dtype;
	uint8_t ndim;
	uint8_t flags;
	uint32_t parent;
	uint32_t key_length;
	uint32_t inline_length;
	uint64_t offset;        /* a lazy stack: its stack dim */
	uint64_t length;        /* a lazy stack: its number of children */
	uint64_t capacity;
	uint64_t checksum;
	/* int64_t shape[ndim]; key; inline; padding to 8 */
} td__keyindex_record;

#define TD_KEYINDEX_RECORD_FIXED 48u
_Static_assert(sizeof(td__keyindex_record) == TD_KEYINDEX_RECORD_FIXED, "index record size");
_Static_assert(offsetof(td__keyindex_record, dtype) == 1, "record dtype");
_Static_assert(offsetof(td__keyindex_record, ndim) == 2, "record ndim");
_Static_assert(offsetof(td__keyindex_record, flags) == 3, "record flags");
_Static_assert(offsetof(td__keyindex_record, parent) == 4, "record parent");
_Static_assert(offsetof(td__keyindex_record, key_length) == 8, "record key_length");
_Static_assert(offsetof(td__keyindex_record, inline_length) == 12, "record inline_length");
_Static_assert(offsetof(td__keyindex_record, offset) == 16, "record offset");
_Static_assert(offsetof(td__keyindex_record, length) == 24, "record length");
_Static_assert(offsetof(td__keyindex_record, capacity) == 32, "record capacity");
_Static_assert(offsetof(td__keyindex_record, checksum) == 40, "record checksum");

/* ---- 4. packed file ---- */

#define TD_PACK_MAGIC "TDSPACKD"
#define TD_PACK_VERSION 1u
#define TD_PACK_PAGE 4096u
#define TD_PACK_HEADER_SIZE 4096u
#define TD_PACK_SLOT_A 512u
#define TD_PACK_SLOT_B 1024u

typedef struct td__pack_header {
	char magic[8];          /* "TDSPACKD" */
	uint32_t version;       /* 1 */
	uint32_t header_size;   /* 4096 */
	uint32_t page_size;     /* 4096 */
	uint32_t flags;         /* 0: no bit defined (doc/format.md 4.1) */
	uint8_t reserved[32];   /* 0 */
	uint64_t checksum;      /* XXH64(bytes 0..56) */
} td__pack_header;

_Static_assert(sizeof(td__pack_header) == 64, "pack header size");
_Static_assert(offsetof(td__pack_header, version) == 8, "pack version");
_Static_assert(offsetof(td__pack_header, header_size) == 12, "pack header_size");
_Static_assert(offsetof(td__pack_header, page_size) == 16, "pack page_size");
_Static_assert(offsetof(td__pack_header, flags) == 20, "pack flags");
_Static_assert(offsetof(td__pack_header, reserved) == 24, "pack reserved");
_Static_assert(offsetof(td__pack_header, checksum) == 56, "pack checksum");

typedef struct td__pack_slot {
	uint64_t generation;     /* 0: empty */
	uint64_t index_offset;
	uint64_t index_length;
	uint64_t index_capacity;
	uint64_t file_length;
	uint8_t reserved[16];    /* 0 */
	uint64_t checksum;       /* XXH64(slot bytes 0..56) */
} td__pack_slot;

_Static_assert(sizeof(td__pack_slot) == 64, "pack slot size");
_Static_assert(offsetof(td__pack_slot, index_offset) == 8, "slot index_offset");
_Static_assert(offsetof(td__pack_slot, index_length) == 16, "slot index_length");
_Static_assert(offsetof(td__pack_slot, index_capacity) == 24, "slot index_capacity");
_Static_assert(offsetof(td__pack_slot, file_length) == 32, "slot file_length");
_Static_assert(offsetof(td__pack_slot, reserved) == 40, "slot reserved");
_Static_assert(offsetof(td__pack_slot, checksum) == 56, "slot checksum");
_Static_assert(TD_PACK_SLOT_A + sizeof(td__pack_slot) <= TD_PACK_SLOT_B, "slots apart");
_Static_assert(TD_PACK_SLOT_B + sizeof(td__pack_slot) <= TD_PACK_HEADER_SIZE, "slot B fits");

/* ---- 7. directory key index (.tdstore-index) ---- */

#define TD_DIRINDEX_NAME ".tdstore-index"
#define TD_DIRINDEX_MAGIC "TDSDIRIX"
#define TD_DIRINDEX_VERSION 1u
#define TD_DIRINDEX_HEADER_SIZE 64u
/** Bytes of one directory entry. */
#define TD_DIRINDEX_DIR_SIZE 24u
/** Most directory entries (and most raw-name entries). */
#define TD_DIRINDEX_MAX_DIRS ((uint32_t)1 << 24)
/** Most tensorclass shells one record passes through before its home. */
#define TD_DIRINDEX_MAX_SHELLS 8u
/** Largest file: header, key index and tables together. */
#define TD_DIRINDEX_MAX_BYTES ((uint64_t)1 << 30)

/** Roles of a directory entry (doc/format.md 7.3). */
enum {
	TD_DIRINDEX_HOME = 1,     /* a dict's keys: a TensorDict meta.json */
	TD_DIRINDEX_SHELL = 2,    /* a tensorclass: its fields are in _tensordict/ */
	TD_DIRINDEX_STRING = 3,   /* a NonTensorData (string leaf) */
	TD_DIRINDEX_STRINGS = 4   /* a NonTensorStack (array of strings) */
};

/** Directory entry flag: named by the raw key (tensordict's legacy name), not enc(key). */
#define TD_DIRINDEX_DIR_RAW 0x01u

typedef struct td__dirindex_header {
	char magic[8];          /* "TDSDIRIX" */
	uint32_t version;       /* 1 */
	uint32_t header_size;   /* 64 */
	uint32_t flags;         /* 0 (reserved) */
	uint32_t dir_count;     /* directory entries, 1..2^24 */
	uint32_t raw_count;     /* raw-name entries, 0..2^24 */
	uint32_t reserved0;     /* 0 */
	uint64_t index_length;  /* bytes of the key index after the header */
	uint64_t generation;    /* the schema generation it was written at (informative) */
	uint64_t reserved1;     /* 0 */
	uint64_t checksum;      /* XXH64(bytes 64.., seed XXH64(bytes 0..56), 0)) */
} td__dirindex_header;

_Static_assert(sizeof(td__dirindex_header) == TD_DIRINDEX_HEADER_SIZE, "dirindex header size");
_Static_assert(offsetof(td__dirindex_header, version) == 8, "dirindex version");
_Static_assert(offsetof(td__dirindex_header, header_size) == 12, "dirindex header_size");
_Static_assert(offsetof(td__dirindex_header, flags) == 16, "dirindex flags");
_Static_assert(offsetof(td__dirindex_header, dir_count) == 20, "dirindex dir_count");
_Static_assert(offsetof(td__dirindex_header, raw_count) == 24, "dirindex raw_count");
_Static_assert(offsetof(td__dirindex_header, reserved0) == 28, "dirindex reserved0");
_Static_assert(offsetof(td__dirindex_header, index_length) == 32, "dirindex index_length");
_Static_assert(offsetof(td__dirindex_header, generation) == 40, "dirindex generation");
_Static_assert(offsetof(td__dirindex_header, reserved1) == 48, "dirindex reserved1");
_Static_assert(offsetof(td__dirindex_header, checksum) == 56, "dirindex checksum");

/** A directory whose meta.json the loader reads, with what that file held. */
typedef struct td__dirindex_dir {
	uint32_t record;        /* the key index record the directory belongs to */
	uint8_t role;           /* TD_DIRINDEX_HOME ... */
	uint8_t flags;          /* TD_DIRINDEX_DIR_RAW */
	uint16_t reserved0;     /* 0 */
	uint32_t meta_length;   /* bytes of its meta.json, 1..64 MiB */
	uint32_t reserved1;     /* 0 */
	uint64_t meta_hash;     /* XXH3-64 (seed 0) of those bytes */
} td__dirindex_dir;

_Static_assert(sizeof(td__dirindex_dir) == TD_DIRINDEX_DIR_SIZE, "dirindex entry size");
_Static_assert(offsetof(td__dirindex_dir, role) == 4, "dirindex entry role");
_Static_assert(offsetof(td__dirindex_dir, flags) == 5, "dirindex entry flags");
_Static_assert(offsetof(td__dirindex_dir, reserved0) == 6, "dirindex entry reserved0");
_Static_assert(offsetof(td__dirindex_dir, meta_length) == 8, "dirindex entry meta_length");
_Static_assert(offsetof(td__dirindex_dir, reserved1) == 12, "dirindex entry reserved1");
_Static_assert(offsetof(td__dirindex_dir, meta_hash) == 16, "dirindex entry meta_hash");

/* ---- little-endian field access (any alignment, any host order) ---- */

static inline uint32_t td__le32(const void *p)
{
	const uint8_t *b = p;

	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

static inline uint64_t td__le64(const void *p)
{
	const uint8_t *b = p;

	return (uint64_t)td__le32(b) | (uint64_t)td__le32(b + 4) << 32;
}

static inline void td__put_le32(void *p, uint32_t v)
{
	uint8_t *b = p;

	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}

static inline void td__put_le64(void *p, uint64_t v)
{
	td__put_le32(p, (uint32_t)v);
	td__put_le32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}

/** @return true if the `n` bytes at `p` are all zero. */
static inline int td__all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

#endif /* TD_FORMAT_H */
