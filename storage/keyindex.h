/* SPDX-License-Identifier: MIT */
/*
 * keyindex.h - the key index (doc/format.md section 3) in memory: parsed from
 * untrusted bytes, edited, encoded, and turned into a td_dict over a
 * mapping. Never installed.
 */
#ifndef TD_KEYINDEX_H
#define TD_KEYINDEX_H

#include "td_internal.h"
#include "format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * One record: a dict, a tensor leaf, a string leaf, an array of strings or
 * a lazy stack (whose `offset` is its stack dim and `length` its number of
 * children, doc/format.md 3.2).
 */
typedef struct td__keyrec {
	uint8_t kind;    /* TD_KEYINDEX_KIND_* */
	uint8_t dtype;   /* tensors: td_dtype (codes equal the enum values) */
	uint8_t ndim;    /* tensor dims, or a dict's (a stack's) batch dims */
	uint8_t flags;   /* TD_KEYINDEX_REC_CHECKSUM */
	uint32_t parent; /* the parent's record; TD_KEYINDEX_NO_PARENT for the root */
	char *key;       /* owned, NUL-terminated ("" for the root) */
	size_t key_len;
	char *text; /* strings: owned, NUL-terminated; else NULL */
	size_t text_len;
	uint64_t offset, length, capacity, checksum;
	int64_t shape[TD_MAX_DIMS];
	const td_tensor *src; /* writers: the data to write (not serialized) */
} td__keyrec;

/** A whole index: the records, parents first. */
typedef struct td__keyindex {
	uint64_t generation;
	uint32_t flags; /* header flags; encoding honours TD_KEYINDEX_F_DIRECTORY */
	uint32_t n, cap;
	td__keyrec *recs;
} td__keyindex;

/** Release the records (the struct itself is the caller's); safe on a zeroed index. */
void td__keyindex_free(td__keyindex *ix);

/**
 * Parse and check `len` bytes of an index (every rule of doc/format.md 3
 * except where extents lie in a file: td__keyindex_check_extents()).
 * `directory` says which placement the index must be of: the directory
 * placement (flag TD_KEYINDEX_F_DIRECTORY set, no extents) or the packed one
 * (the flag clear). `what` names the file in messages. On failure `ix` is
 * left empty.
 *
 * @return TD_OK; TD_ECORRUPT (also the other placement's index);
 *         TD_EVERSION; TD_ENOTSUP (unknown flags); TD_EOVERFLOW (a shape
 *         whose byte size overflows); TD_ENOMEM
 */
int td__keyindex_parse(td__keyindex *ix, const void *buf, size_t len, bool directory,
	const char *what);

/**
 * Check that every tensor extent lies in [lo, hi) and that no two extents
 * overlap each other or any of the `nextra` extra (offset, capacity) pairs.
 *
 * @return TD_OK; TD_ECORRUPT; TD_ENOMEM
 */
int td__keyindex_check_extents(const td__keyindex *ix, uint64_t lo, uint64_t hi,
	const uint64_t (*extra)[2], size_t nextra, const char *what);

/** The encoded size of `ix`: 64 + body_length. TD_EOVERFLOW past 1 GiB. */
int td__keyindex_size(const td__keyindex *ix, size_t *out);

/** Encode `ix` into `buf` of td__keyindex_size() bytes, checksum included. */
void td__keyindex_encode(const td__keyindex *ix, void *buf, size_t len);

/**
 * Append a record (key and text are copied). @return its index through
 * `*at` (may be NULL); TD_ENOMEM; TD_EOVERFLOW past TD_KEYINDEX_MAX_RECORDS.
 */
int td__keyindex_push(td__keyindex *ix, const td__keyrec *r, uint32_t *at);

/**
 * Records for `d` and everything under it, appended under `parent` (the
 * root: TD_KEYINDEX_NO_PARENT with an empty key). A lazy stack (`d` itself or
 * a nested one) is a lazy record followed by its children's records, each
 * with an empty key. Tensors get dtype, shape, length and `src`; offsets
 * and capacities stay 0 for the caller to place. Bytes values are refused
 * (TD_EINVAL).
 */
int td__keyindex_add_dict(td__keyindex *ix, const td_dict *d, uint32_t parent, const char *key);

/** Remove record `i` and every record below it, renumbering parents. TD_ENOMEM. */
int td__keyindex_remove(td__keyindex *ix, uint32_t i);

/**
 * Find the record of a key path (n >= 1) from the root. @return TD_OK and
 * `*out`; TD_ENOTFOUND; TD_ETYPE when a component before the last is not a
 * dict (`*out` then names that component's record).
 */
int td__keyindex_find(const td__keyindex *ix, const char *const *parts, size_t n, uint32_t *out);

/** The child of dict record `parent` named `key`, or TD_KEYINDEX_NO_PARENT. */
uint32_t td__keyindex_child(const td__keyindex *ix, uint32_t parent, const char *key);

/**
 * Called by td__keyindex_build() for record `i` before it enters the dict:
 * for the root (`t` NULL), every dict, string and array of strings, and
 * every tensor with elements, which it stores in `*t` (the builder takes
 * it over). @return TD_OK, or a failure that ends the build.
 */
typedef int (
	*td__keyindex_visit_fn)(const td__keyindex *ix, uint32_t i, td_tensor *t, void *payload);

/**
 * Build the dict an index describes, record by record in index order,
 * calling `visit` for each (see td__keyindex_visit_fn); tensors without
 * elements are empty heap tensors; lazy stacks are assembled from their
 * children once every other record is in (the result may be one). `what`
 * names the file in messages.
 *
 * @return TD_OK; what `visit` returned; TD_ECORRUPT (a string that is not
 *         UTF-8); TD_ENOMEM
 */
int td__keyindex_build(const td__keyindex *ix, td__keyindex_visit_fn visit, void *payload,
	td_dict **out, const char *what);

/**
 * Build the dict an index describes: tensors view `map` at their offsets
 * (tensors without elements are empty heap tensors; `map` may be NULL when
 * there are none). `what` names the file in messages.
 *
 * @return TD_OK; TD_ECORRUPT (a string that is not UTF-8; an extent past
 *         the mapping); TD_ENOMEM
 */
int td__keyindex_to_dict(const td__keyindex *ix, td_buffer *map, td_dict **out, const char *what);

#endif /* TD_KEYINDEX_H */
