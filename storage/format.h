/* SPDX-License-Identifier: MIT */
/*
 * format.h - every binary structure tdstore writes to disk, field by field
 * as doc/format.md defines it: the coordination file (section 2), the key
 * index (3), the packed file (4), the ring file (5), the redo journal (6)
 * and the directory key index (7). Never installed.
 *
 * Every integer on disk is little-endian. Files that are read and written
 * through a buffer (key index, packed file, journal, directory key index)
 * are encoded and decoded with the accessors at the end (td__le64() ...),
 * independent of the host's byte order and of alignment; the structs here
 * pin their layout. Files that processes share live (coordination file,
 * ring file) are mapped and their structs used in place, with 64-bit
 * atomics: that needs a little-endian host, asserted below. Every offset
 * and size is pinned by a static assert: a change here is a format change,
 * which needs a new version and a new golden file.
 */
#ifndef TD_FORMAT_H
#define TD_FORMAT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	"the coordination and ring files are used in place: a little-endian host");
_Static_assert(sizeof(_Atomic uint64_t) == 8, "64-bit atomics in shared files");

/* ------------------------------------------------------------------------ */
/* 2. Coordination file `.tdstore-coord`                                     */
/* ------------------------------------------------------------------------ */

#define TD_COORD_NAME ".tdstore-coord"
#define TD_COORD_MAGIC "TDSCOORD"
#define TD_COORD_VERSION 1u
#define TD_COORD_HEADER_SIZE 64u
/** Bytes of the file: the header, then zeros (reserved). */
#define TD_COORD_FILE_SIZE 4096

/** The header at offset 0 (doc/format.md 2.1), mapped shared and used in place. */
typedef struct td__coord_header {
	char magic[8];               /* "TDSCOORD" */
	uint32_t version;            /* TD_COORD_VERSION */
	uint32_t header_size;        /* bytes: TD_COORD_HEADER_SIZE */
	_Atomic uint64_t generation; /* schema generation, bumped after every committed change */
	uint8_t reserved[40];        /* 0 */
} td__coord_header;

_Static_assert(sizeof(td__coord_header) == TD_COORD_HEADER_SIZE, "coord header size");
_Static_assert(offsetof(td__coord_header, version) == 8, "coord version");
_Static_assert(offsetof(td__coord_header, header_size) == 12, "coord header_size");
_Static_assert(offsetof(td__coord_header, generation) == 16, "coord generation");
_Static_assert(offsetof(td__coord_header, reserved) == 24, "coord reserved");

/* ------------------------------------------------------------------------ */
/* 3. Key index                                                              */
/* ------------------------------------------------------------------------ */

#define TD_KEYINDEX_MAGIC "TDSINDEX"
#define TD_KEYINDEX_VERSION 1u
#define TD_KEYINDEX_HEADER_SIZE 64u
/** Most records of one index (3.1). */
#define TD_KEYINDEX_MAX_RECORDS ((uint32_t)1 << 24)
/** Largest body (bytes of records) of one index (3.1: the index is at most 1 GiB). */
#define TD_KEYINDEX_MAX_BYTES ((uint64_t)1 << 30)
/** The parent of the root record (3.2). */
#define TD_KEYINDEX_NO_PARENT 0xFFFFFFFFu

/** Record kinds (3.2). */
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
/** Most children of one lazy stack record (as for the directory placement, 3.4). */
#define TD_KEYINDEX_MAX_LAZY_CHILDREN ((uint64_t)1 << 20)

_Static_assert(TD_KEYINDEX_F_STRINGS == 1u << 0 && TD_KEYINDEX_F_DIRECTORY == 1u << 1 &&
		TD_KEYINDEX_F_LAZY == 1u << 2,
	"index flag bits of doc/format.md 3.1");
_Static_assert(TD_KEYINDEX_KIND_DICT == 1 && TD_KEYINDEX_KIND_TENSOR == 2 &&
		TD_KEYINDEX_KIND_STRING == 3 && TD_KEYINDEX_KIND_STRINGS == 4 && TD_KEYINDEX_KIND_LAZY == 5,
	"record kinds of doc/format.md 3.2");

/** Record flag: `checksum` holds the XXH64 of the tensor's bytes (3.2). */
#define TD_KEYINDEX_REC_CHECKSUM 0x01u

/** The header of a key index (doc/format.md 3.1), little-endian. */
typedef struct td__keyindex_header {
	char magic[8];         /* "TDSINDEX" */
	uint32_t version;      /* TD_KEYINDEX_VERSION */
	uint32_t header_size;  /* bytes: TD_KEYINDEX_HEADER_SIZE */
	uint32_t record_count; /* records, 1..TD_KEYINDEX_MAX_RECORDS */
	uint32_t flags;        /* TD_KEYINDEX_F_* */
	uint64_t body_length;  /* bytes of records after the header, a multiple of 8 */
	uint64_t generation;   /* the schema generation the index was written for */
	uint8_t reserved[16];  /* 0 */
	uint64_t checksum;     /* XXH64(body, seed XXH64(header bytes 0..55, seed 0)) */
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

/**
 * The fixed part of a record (doc/format.md 3.2), little-endian, at a
 * multiple of 8 bytes from the index's start; shape (ndim signed 64-bit
 * sizes), key, inline text and zero padding to a multiple of 8 follow.
 */
typedef struct td__keyindex_record {
	uint8_t kind;           /* TD_KEYINDEX_KIND_* */
	uint8_t dtype;          /* tensors: the dtype code of 3.3; else 0 */
	uint8_t ndim;           /* dims of the shape that follows, 0..16 */
	uint8_t flags;          /* TD_KEYINDEX_REC_CHECKSUM */
	uint32_t parent;        /* the parent's record number; TD_KEYINDEX_NO_PARENT: the root */
	uint32_t key_length;    /* bytes of the key (UTF-8, no NUL) */
	uint32_t inline_length; /* bytes of inline text after the key */
	uint64_t offset;   /* a tensor's first byte in the data file; a lazy stack: its stack dim */
	uint64_t length;   /* a tensor's bytes; a lazy stack: its number of children */
	uint64_t capacity; /* bytes reserved at `offset`, a multiple of 4096, >= length */
	uint64_t checksum; /* with TD_KEYINDEX_REC_CHECKSUM: XXH64 of the tensor's bytes */
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

/* ------------------------------------------------------------------------ */
/* 4. Packed file                                                            */
/* ------------------------------------------------------------------------ */

#define TD_PACK_MAGIC "TDSPACKD"
#define TD_PACK_VERSION 1u
/** Bytes: the alignment of every extent (4.1). */
#define TD_PACK_PAGE 4096u
/** Bytes of the header page (4.1). */
#define TD_PACK_HEADER_SIZE 4096u
/** Byte offsets of commit slots A and B in the header page (4.1). */
#define TD_PACK_SLOT_A 512u
#define TD_PACK_SLOT_B 1024u

/** The header at offset 0 of a packed file (doc/format.md 4.1), little-endian. */
typedef struct td__pack_header {
	char magic[8];        /* "TDSPACKD" */
	uint32_t version;     /* TD_PACK_VERSION */
	uint32_t header_size; /* bytes: TD_PACK_HEADER_SIZE */
	uint32_t page_size;   /* bytes: TD_PACK_PAGE */
	uint32_t flags;       /* 0: no bit defined (features: the key index's flags) */
	uint8_t reserved[32]; /* 0 */
	uint64_t checksum;    /* XXH64 (seed 0) of bytes 0..55 */
} td__pack_header;

_Static_assert(sizeof(td__pack_header) == 64, "pack header size");
_Static_assert(offsetof(td__pack_header, version) == 8, "pack version");
_Static_assert(offsetof(td__pack_header, header_size) == 12, "pack header_size");
_Static_assert(offsetof(td__pack_header, page_size) == 16, "pack page_size");
_Static_assert(offsetof(td__pack_header, flags) == 20, "pack flags");
_Static_assert(offsetof(td__pack_header, reserved) == 24, "pack reserved");
_Static_assert(offsetof(td__pack_header, checksum) == 56, "pack checksum");

/** A commit slot of the header page (doc/format.md 4.2), little-endian. */
typedef struct td__pack_slot {
	uint64_t generation;     /* schema generation; 0: an empty slot */
	uint64_t index_offset;   /* byte offset of the key index, a multiple of 4096, >= 4096 */
	uint64_t index_length;   /* bytes of the key index */
	uint64_t index_capacity; /* bytes reserved for it, a multiple of 4096 */
	uint64_t file_length;    /* bytes of the file in use, a multiple of 4096 */
	uint8_t reserved[16];    /* 0 */
	uint64_t checksum;       /* XXH64 (seed 0) of slot bytes 0..55 */
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

/* ------------------------------------------------------------------------ */
/* 5. Ring file `.tdstore-ring`                                              */
/* ------------------------------------------------------------------------ */

#define TD_RING_NAME ".tdstore-ring"
#define TD_RING_MAGIC "TDSRING\0"
#define TD_RING_VERSION 1u
/** Bytes of the static header (5.2). */
#define TD_RING_HEADER_SIZE 128u
/** Byte offset of the writer slots (5.1). */
#define TD_RING_WRITERS_OFFSET 4096u
/** Writer slots, and bytes of each (5.3). */
#define TD_RING_WRITER_SLOTS 256u
#define TD_RING_WRITER_SIZE 64u
/** Byte offset of the sequence words, one u64 per slot (5.1). */
#define TD_RING_SEQ_OFFSET (TD_RING_WRITERS_OFFSET + TD_RING_WRITER_SLOTS * TD_RING_WRITER_SIZE)
/** Header flag bit 0: the file has a sum-tree (5.6). The other bits are reserved (0). */
#define TD_RING_F_PRIORITIZED 0x1u
/** Largest capacity (rows, 2^40): every offset computed from it fits 64 bits (5.2). */
#define TD_RING_MAX_CAPACITY ((uint64_t)1 << 40)
/** Largest ticket: (ticket + 1) << 2 must fit a sequence word (5.4). */
#define TD_RING_MAX_TICKET (((uint64_t)1 << 62) - 2)

/*
 * Sequence words (one per slot, doc/format.md 5.4): bits 0-1 the state,
 * bits 2-63 the ticket + 1 of the row the state is about (0: none yet).
 */
#define TD_SEQ_EMPTY 0u
#define TD_SEQ_WRITING 1u
#define TD_SEQ_PUBLISHED 2u

static inline uint64_t td__seq_make(uint64_t ticket, unsigned state)
{
	return ((ticket + 1) << 2) | state;
}

static inline unsigned td__seq_state(uint64_t w)
{
	return (unsigned)(w & 3u);
}

/** The ticket + 1 a word is about (0 for a slot never written). */
static inline uint64_t td__seq_tf(uint64_t w)
{
	return w >> 2;
}

/** The static header at offset 0 (doc/format.md 5.2), written once at creation. */
typedef struct td__ring_header {
	char magic[8];           /* "TDSRING\0" */
	uint32_t version;        /* TD_RING_VERSION */
	uint32_t header_size;    /* bytes: TD_RING_HEADER_SIZE */
	uint32_t flags;          /* TD_RING_F_*; other bits 0 */
	uint32_t nleaves;        /* tensor leaves of a row */
	uint64_t capacity;       /* rows, 1 .. TD_RING_MAX_CAPACITY */
	uint64_t row_bytes;      /* bytes of one row: the sum of its leaves' */
	uint64_t schema_hash;    /* XXH64 chain over the store's leaves (5.2) */
	uint32_t writer_slots;   /* TD_RING_WRITER_SLOTS */
	uint32_t reserved0;      /* 0 */
	uint64_t writers_offset; /* byte offset: TD_RING_WRITERS_OFFSET */
	uint64_t seq_offset;     /* byte offset: TD_RING_SEQ_OFFSET */
	uint64_t tree_offset;    /* byte offset of the sum-tree (5.1); 0 without one */
	uint64_t tree_leaves;    /* P, a power of two >= capacity; 0 without a sum-tree */
	uint64_t file_size;      /* bytes of the file's layout (5.1) */
	uint8_t reserved[24];    /* 0 */
	uint64_t checksum;       /* XXH64 (seed 0) of bytes 0..119 */
} td__ring_header;

_Static_assert(sizeof(td__ring_header) == TD_RING_HEADER_SIZE, "ring header size");
_Static_assert(offsetof(td__ring_header, version) == 8, "ring version");
_Static_assert(offsetof(td__ring_header, header_size) == 12, "ring header_size");
_Static_assert(offsetof(td__ring_header, flags) == 16, "ring flags");
_Static_assert(offsetof(td__ring_header, nleaves) == 20, "ring nleaves");
_Static_assert(offsetof(td__ring_header, capacity) == 24, "ring capacity");
_Static_assert(offsetof(td__ring_header, row_bytes) == 32, "ring row_bytes");
_Static_assert(offsetof(td__ring_header, schema_hash) == 40, "ring schema_hash");
_Static_assert(offsetof(td__ring_header, writer_slots) == 48, "ring writer_slots");
_Static_assert(offsetof(td__ring_header, reserved0) == 52, "ring reserved0");
_Static_assert(offsetof(td__ring_header, writers_offset) == 56, "ring writers_offset");
_Static_assert(offsetof(td__ring_header, seq_offset) == 64, "ring seq_offset");
_Static_assert(offsetof(td__ring_header, tree_offset) == 72, "ring tree_offset");
_Static_assert(offsetof(td__ring_header, tree_leaves) == 80, "ring tree_leaves");
_Static_assert(offsetof(td__ring_header, file_size) == 88, "ring file_size");
_Static_assert(offsetof(td__ring_header, reserved) == 96, "ring reserved");
_Static_assert(offsetof(td__ring_header, checksum) == 120, "ring checksum");

/**
 * The live counters after the header (doc/format.md 5.1), at file offset
 * TD_RING_HEADER_SIZE: 64-bit atomic words, each line on its own cache line.
 */
typedef struct td__ring_live {
	_Atomic uint64_t cursor;    /* offset 128: the next ticket to reserve */
	uint8_t pad0[56];           /* 0 */
	_Atomic uint64_t cleared;   /* offset 192: tickets below are cleared */
	_Atomic uint64_t reclaimed; /* offset 200: rows taken back from dead writers */
	_Atomic uint64_t dropped;   /* offset 208: rows writers could not store */
	uint8_t pad1[40];           /* 0 */
} td__ring_live;

_Static_assert(sizeof(td__ring_live) == 128, "ring live part size");
_Static_assert(TD_RING_HEADER_SIZE + offsetof(td__ring_live, cursor) == 128, "ring cursor");
_Static_assert(TD_RING_HEADER_SIZE + offsetof(td__ring_live, cleared) == 192, "ring cleared");
_Static_assert(TD_RING_HEADER_SIZE + offsetof(td__ring_live, reclaimed) == 200, "ring reclaimed");
_Static_assert(TD_RING_HEADER_SIZE + offsetof(td__ring_live, dropped) == 208, "ring dropped");

/** One writer slot (doc/format.md 5.3), at TD_RING_WRITERS_OFFSET + 64 * i. */
typedef struct td__ring_writer {
	_Atomic uint64_t owner; /* 0: free; else pid (bits 0-31) | nonce << 32 */
	_Atomic uint64_t lo;    /* tickets [lo, hi) the writer may hold */
	_Atomic uint64_t hi;
	uint8_t reserved[40]; /* 0 */
} td__ring_writer;

_Static_assert(sizeof(td__ring_writer) == TD_RING_WRITER_SIZE, "ring writer slot size");
_Static_assert(offsetof(td__ring_writer, lo) == 8, "ring writer lo");
_Static_assert(offsetof(td__ring_writer, hi) == 16, "ring writer hi");
_Static_assert(offsetof(td__ring_writer, reserved) == 24, "ring writer reserved");
_Static_assert(TD_RING_HEADER_SIZE + sizeof(td__ring_live) <= TD_RING_WRITERS_OFFSET,
	"ring live part before the writer slots");

/* ------------------------------------------------------------------------ */
/* 6. Redo journal `.tdstore-journal`                                        */
/* ------------------------------------------------------------------------ */

#define TD_JOURNAL_NAME ".tdstore-journal"
#define TD_JOURNAL_MAGIC "TDSJOURN"
#define TD_JOURNAL_VERSION 1u
#define TD_JOURNAL_HEADER_SIZE 32u
/** Bytes of an entry's fixed part (path_len, name_len). */
#define TD_JOURNAL_ENTRY_SIZE 4u
/** Bytes of the checksum that ends the file. */
#define TD_JOURNAL_TRAILER_SIZE 8u
/** Largest journal file in bytes; a bigger one is garbled (never written). */
#define TD_JOURNAL_MAX_BYTES ((size_t)64 << 20)
/** Most entries in one journal. */
#define TD_JOURNAL_MAX_ENTRIES (1u << 20)
/** Longest relative directory path in an entry, in bytes (its length is a u16). */
#define TD_JOURNAL_PATH_MAX 65535u
/** Prefix of the temporary names of uncommitted files, which entries name (6.3). */
#define TD_TMP_PREFIX ".tdstore-tmp."
/** Longest temporary name in bytes (without its NUL): the prefix and 1 to 50 more (6.3). */
#define TD_TMP_NAME_MAX 63u

_Static_assert(sizeof(TD_TMP_PREFIX) - 1 + 50 == TD_TMP_NAME_MAX, "temporary names of 6.3");

/**
 * The header at offset 0 of `.tdstore-journal` (doc/format.md 6.2),
 * little-endian; `count` entries of `body_size` bytes and an 8-byte
 * checksum (XXH64, seed 0, of every byte before it) follow.
 */
typedef struct td__journal_header {
	char magic[8];        /* "TDSJOURN" */
	uint32_t version;     /* TD_JOURNAL_VERSION */
	uint32_t header_size; /* bytes: TD_JOURNAL_HEADER_SIZE */
	uint32_t count;       /* entries, 1..TD_JOURNAL_MAX_ENTRIES */
	uint32_t flags;       /* reserved, 0 */
	uint64_t body_size;   /* bytes of the entries after the header */
} td__journal_header;

_Static_assert(sizeof(td__journal_header) == TD_JOURNAL_HEADER_SIZE, "journal header size");
_Static_assert(offsetof(td__journal_header, version) == 8, "journal version");
_Static_assert(offsetof(td__journal_header, header_size) == 12, "journal header_size");
_Static_assert(offsetof(td__journal_header, count) == 16, "journal count");
_Static_assert(offsetof(td__journal_header, flags) == 20, "journal flags");
_Static_assert(offsetof(td__journal_header, body_size) == 24, "journal body_size");

/**
 * The fixed part of a journal entry (doc/format.md 6.2), little-endian,
 * with no alignment: the path (path_len bytes) and the name (name_len
 * bytes) follow, then the next entry.
 */
typedef struct td__journal_entry {
	uint16_t path_len; /* bytes of the directory's path, relative to the root */
	uint16_t name_len; /* bytes of the temporary file's name in it */
} td__journal_entry;

_Static_assert(sizeof(td__journal_entry) == TD_JOURNAL_ENTRY_SIZE, "journal entry size");
_Static_assert(offsetof(td__journal_entry, name_len) == 2, "journal entry name_len");

/* ------------------------------------------------------------------------ */
/* 7. Directory key index `.tdstore-index`                                   */
/* ------------------------------------------------------------------------ */

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
/** Largest file in bytes: header, key index and tables together. */
#define TD_DIRINDEX_MAX_BYTES ((uint64_t)1 << 30)

/** Roles of a directory entry (doc/format.md 7.3). */
enum {
	TD_DIRINDEX_HOME = 1,   /* a dict's keys: a TensorDict meta.json */
	TD_DIRINDEX_SHELL = 2,  /* a tensorclass: its fields are in _tensordict/ */
	TD_DIRINDEX_STRING = 3, /* a NonTensorData (string leaf) */
	TD_DIRINDEX_STRINGS = 4 /* a NonTensorStack (array of strings) */
};

/** Directory entry flag: named by the raw key (tensordict's legacy name), not enc(key). */
#define TD_DIRINDEX_DIR_RAW 0x01u

/**
 * The header at offset 0 of `.tdstore-index` (doc/format.md 7.2),
 * little-endian; the key index, the directory table and the raw-name table
 * follow.
 */
typedef struct td__dirindex_header {
	char magic[8];         /* "TDSDIRIX" */
	uint32_t version;      /* TD_DIRINDEX_VERSION */
	uint32_t header_size;  /* bytes: TD_DIRINDEX_HEADER_SIZE */
	uint32_t flags;        /* 0 (reserved) */
	uint32_t dir_count;    /* directory entries, 1..2^24 */
	uint32_t raw_count;    /* raw-name entries, 0..2^24 */
	uint32_t reserved0;    /* 0 */
	uint64_t index_length; /* bytes of the key index after the header */
	uint64_t generation;   /* the schema generation it was written at (informative) */
	uint64_t reserved1;    /* 0 */
	uint64_t checksum;     /* XXH64(bytes 64.., seed XXH64(bytes 0..55, seed 0)) */
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

/**
 * A directory whose meta.json the loader reads, with what that file held
 * (doc/format.md 7.3), little-endian.
 */
typedef struct td__dirindex_dir {
	uint32_t record;      /* the key index record the directory belongs to */
	uint8_t role;         /* TD_DIRINDEX_HOME ... */
	uint8_t flags;        /* TD_DIRINDEX_DIR_RAW */
	uint16_t reserved0;   /* 0 */
	uint32_t meta_length; /* bytes of its meta.json, 1..64 MiB */
	uint32_t reserved1;   /* 0 */
	uint64_t meta_hash;   /* XXH3-64 (seed 0) of those bytes */
} td__dirindex_dir;

_Static_assert(sizeof(td__dirindex_dir) == TD_DIRINDEX_DIR_SIZE, "dirindex entry size");
_Static_assert(offsetof(td__dirindex_dir, role) == 4, "dirindex entry role");
_Static_assert(offsetof(td__dirindex_dir, flags) == 5, "dirindex entry flags");
_Static_assert(offsetof(td__dirindex_dir, reserved0) == 6, "dirindex entry reserved0");
_Static_assert(offsetof(td__dirindex_dir, meta_length) == 8, "dirindex entry meta_length");
_Static_assert(offsetof(td__dirindex_dir, reserved1) == 12, "dirindex entry reserved1");
_Static_assert(offsetof(td__dirindex_dir, meta_hash) == 16, "dirindex entry meta_hash");

/* ------------------------------------------------------------------------ */
/* Little-endian field access (any alignment, any host order)                */
/* ------------------------------------------------------------------------ */

static inline uint16_t td__le16(const void *p)
{
	const uint8_t *b = p;

	return (uint16_t)(b[0] | b[1] << 8);
}

static inline uint32_t td__le32(const void *p)
{
	const uint8_t *b = p;

	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline uint64_t td__le64(const void *p)
{
	const uint8_t *b = p;

	return (uint64_t)td__le32(b) | (uint64_t)td__le32(b + 4) << 32;
}

static inline void td__put_le16(void *p, uint16_t v)
{
	uint8_t *b = p;

	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
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
