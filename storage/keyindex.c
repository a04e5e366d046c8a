/* SPDX-License-Identifier: MIT */
/*
 * keyindex.c - the key index of doc/format.md section 3: parse (untrusted
 * input: every count, length and offset is checked before use), edit,
 * encode, and build the td_dict it describes.
 */
#include "keyindex.h"
#include "dictname.h"

#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

/* The on-disk dtype codes are the td_dtype values (doc/format.md 3.3). */
_Static_assert(TD_DTYPE_BOOL == 0 && TD_DTYPE_U8 == 1 && TD_DTYPE_I8 == 2 && TD_DTYPE_I16 == 3 &&
		TD_DTYPE_I32 == 4 && TD_DTYPE_I64 == 5 && TD_DTYPE_U16 == 6 && TD_DTYPE_U32 == 7 &&
		TD_DTYPE_U64 == 8 && TD_DTYPE_F16 == 9 && TD_DTYPE_BF16 == 10 && TD_DTYPE_F32 == 11 &&
		TD_DTYPE_F64 == 12 && TD_DTYPE_C64 == 13 && TD_DTYPE_C128 == 14 && TD_DTYPE_COUNT == 15,
	"dtype codes of doc/format.md 3.3");
_Static_assert(TD_MAX_DIMS == 16, "the index stores at most 16 dims");

#define PAGE ((uint64_t)TD_PACK_PAGE)

static void rec_free(td__keyrec *r)
{
	td__free(r->key);
	td__free(r->text);
	r->key = r->text = NULL;
}

void td__keyindex_free(td__keyindex *ix)
{
	uint32_t i;

	if (!ix)
		return;
	for (i = 0; i < ix->n; i++)
		rec_free(&ix->recs[i]);
	td__free(ix->recs);
	ix->recs = NULL;
	ix->n = ix->cap = 0;
}

static char *dup_bytes(const char *s, size_t len)
{
	char *p = td__malloc(len + 1);

	if (p) {
		if (len)
			memcpy(p, s, len);
		p[len] = '\0';
	}
	return p;
}

int td__keyindex_push(td__keyindex *ix, const td__keyrec *r, uint32_t *at)
{
	td__keyrec *dst;

	if (ix->n >= TD_KEYINDEX_MAX_RECORDS)
		return td__error(TD_EOVERFLOW, "store index: more than %u entries",
			(unsigned)TD_KEYINDEX_MAX_RECORDS);
	if (ix->n == ix->cap) {
		uint32_t cap = ix->cap ? 2 * ix->cap : 16;
		td__keyrec *p = td__realloc(ix->recs, (size_t)cap * sizeof(*p));

		if (!p)
			return td__error_nomem((size_t)cap * sizeof(*p));
		ix->recs = p;
		ix->cap = cap;
	}
	dst = &ix->recs[ix->n];
	*dst = *r;
	dst->key = dup_bytes(r->key ? r->key : "", r->key ? r->key_len : 0);
	dst->text = r->text ? dup_bytes(r->text, r->text_len) : NULL;
	if (!dst->key || (r->text && !dst->text)) {
		rec_free(dst);
		return td__error_nomem(r->key_len + r->text_len + 2);
	}
	if (!r->key)
		dst->key_len = 0;
	if (at)
		*at = ix->n;
	ix->n++;
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */
/* ------------------------------------------------------------------------ */

/* A set of (parent, key) pairs, to refuse duplicate keys in one dict. */
typedef struct keyset {
	uint32_t *slots; /* record index + 1; 0 = empty */
	size_t mask;
} keyset;

static uint64_t key_hash(uint32_t parent, const char *key, size_t len)
{
	return XXH64(key, len, parent);
}

static int keyset_init(keyset *ks, uint32_t n)
{
	size_t cap = 16;

	while (cap < (size_t)n * 2)
		cap *= 2;
	ks->slots = td__calloc(cap, sizeof(*ks->slots));
	ks->mask = cap - 1;
	return ks->slots ? TD_OK : td__error_nomem(cap * sizeof(*ks->slots));
}

/* @return false if an equal key under the same parent is already in. */
static bool keyset_add(keyset *ks, const td__keyindex *ix, uint32_t i)
{
	const td__keyrec *r = &ix->recs[i];
	size_t h = (size_t)key_hash(r->parent, r->key, r->key_len) & ks->mask;

	for (;; h = (h + 1) & ks->mask) {
		const td__keyrec *o;

		if (!ks->slots[h]) {
			ks->slots[h] = i + 1;
			return true;
		}
		o = &ix->recs[ks->slots[h] - 1];
		if (o->parent == r->parent && o->key_len == r->key_len &&
			memcmp(o->key, r->key, r->key_len) == 0)
			return false;
	}
}

/*
 * The index checksum (doc/format.md 3.1): XXH64 of the body seeded with
 * the XXH64 (seed 0) of header bytes 0..55.
 */
static uint64_t index_checksum(const uint8_t *b, size_t len)
{
	return XXH64(b + TD_KEYINDEX_HEADER_SIZE, len - TD_KEYINDEX_HEADER_SIZE, XXH64(b, 56, 0));
}

static int corrupt(const char *what, uint32_t i, const char *msg)
{
	return td__error(TD_ECORRUPT, "%s: index record %u: %s", what, (unsigned)i, msg);
}

/*
 * An array of strings: prod(shape) texts, each followed by a NUL, fill the
 * inline bytes exactly (so the count of NUL bytes is the element count).
 */
static int check_strings(const td__keyrec *r, uint32_t i, const char *what)
{
	int64_t numel = 1;
	size_t nuls = 0, k;

	for (uint8_t d = 0; d < r->ndim; d++)
		if (!td__mul_i64(numel, r->shape[d], &numel))
			return td__error(TD_EOVERFLOW,
				"%s: index record %u: the number of strings "
				"overflows",
				what, (unsigned)i);
	for (k = 0; k < r->text_len; k++)
		nuls += r->text[k] == '\0';
	if ((uint64_t)numel != nuls || (r->text_len && r->text[r->text_len - 1] != '\0'))
		return corrupt(what, i,
			"the inline bytes are not one NUL-terminated text per "
			"element");
	return TD_OK;
}

/*
 * A lazy stack record (doc/format.md 3.4): its stack dim (`offset`) is one
 * of its batch dims, its child count (`length`) is that dim's size, 1 to
 * 2^20, and the fields a lazy record does not use are zero.
 */
static int check_lazy(const td__keyrec *r, uint32_t i, uint32_t flags, const char *what)
{
	if (!(flags & TD_KEYINDEX_F_LAZY))
		return corrupt(what, i, "a lazy stack in an index without its flag");
	if (r->dtype || r->flags || r->capacity || r->checksum || r->text_len)
		return corrupt(what, i, "non-zero unused fields on a lazy stack");
	if (r->ndim < 1)
		return corrupt(what, i, "a lazy stack without batch dims");
	if (r->offset >= r->ndim)
		return corrupt(what, i, "the stack dim is not one of the stack's batch dims");
	if (r->length == 0)
		return corrupt(what, i, "a lazy stack of no children");
	if (r->length > TD_KEYINDEX_MAX_LAZY_CHILDREN)
		return corrupt(what, i, "a lazy stack of more than 2^20 children");
	if ((uint64_t)r->shape[r->offset] != r->length)
		return corrupt(what, i, "the size of the stack dim is not the number of children");
	return TD_OK;
}

/*
 * A record whose parent is the lazy stack `p`: a dict or a lazy stack with
 * an empty key and the stack's batch shape without the stack dim.
 */
static int check_lazy_child(const td__keyrec *r, const td__keyrec *p, uint32_t i, const char *what)
{
	uint8_t dim = (uint8_t)p->offset;

	if (r->kind != TD_KEYINDEX_KIND_DICT && r->kind != TD_KEYINDEX_KIND_LAZY)
		return corrupt(what, i, "a child of a lazy stack is not a dict");
	if (r->key_len)
		return corrupt(what, i, "a child of a lazy stack has a key");
	if (r->ndim + 1 != p->ndim || memcmp(r->shape, p->shape, (size_t)dim * sizeof(int64_t)) != 0 ||
		memcmp(r->shape + dim, p->shape + dim + 1, (size_t)(r->ndim - dim) * sizeof(int64_t)) != 0)
		return corrupt(what, i,
			"the batch shape of a child of a lazy stack is not the "
			"stack's without the stack dim");
	return TD_OK;
}

/* Per-record state of a parse: nesting depth, and children seen of each lazy stack. */
typedef struct parse_state {
	uint8_t *depth; /* the root 0, a record one more than its parent */
	uint32_t *kids; /* records seen whose parent is record i */
} parse_state;

/* Check a record's fields against its parent (already parsed). */
static int check_record(const td__keyindex *ix, uint32_t i, uint32_t flags, parse_state *ps,
	const char *what)
{
	const td__keyrec *r = &ix->recs[i];
	const td__keyrec *p;
	int rc;

	if (i == 0) {
		if ((r->kind != TD_KEYINDEX_KIND_DICT && r->kind != TD_KEYINDEX_KIND_LAZY) ||
			r->parent != TD_KEYINDEX_NO_PARENT || r->key_len != 0)
			return corrupt(what, i, "the first record is not the root dict");
		ps->depth[0] = 0;
	} else {
		if (r->parent >= i)
			return corrupt(what, i, "its parent does not come before it");
		if (ix->recs[r->parent].kind != TD_KEYINDEX_KIND_DICT &&
			ix->recs[r->parent].kind != TD_KEYINDEX_KIND_LAZY)
			return corrupt(what, i, "its parent is not a dict");
		/* Dicts and stacks nest below TD_KEY_MAX_DEPTH, so every key path fits. */
		if (ps->depth[r->parent] + 1 >= TD_KEY_MAX_DEPTH +
				(r->kind != TD_KEYINDEX_KIND_DICT && r->kind != TD_KEYINDEX_KIND_LAZY))
			return corrupt(what, i, "too deep: nested past 64 levels");
		ps->depth[i] = (uint8_t)(ps->depth[r->parent] + 1);
	}
	if (memchr(r->key, '\0', r->key_len))
		return corrupt(what, i, "the key holds a NUL byte");
	if (r->ndim > TD_MAX_DIMS)
		return corrupt(what, i, "more than 16 dims");
	for (uint8_t d = 0; d < r->ndim; d++)
		if (r->shape[d] < 0)
			return corrupt(what, i, "a negative size");
	if (r->flags & ~(uint8_t)TD_KEYINDEX_REC_CHECKSUM)
		return corrupt(what, i, "unknown record flags");
	if (!(r->flags & TD_KEYINDEX_REC_CHECKSUM) && r->checksum)
		return corrupt(what, i, "a checksum without its flag");
	p = i ? &ix->recs[r->parent] : NULL;
	if (r->kind == TD_KEYINDEX_KIND_LAZY) {
		rc = check_lazy(r, i, flags, what);
		if (rc < 0)
			return rc;
	}
	if (p && p->kind == TD_KEYINDEX_KIND_LAZY) {
		/* Its children, in record order: exactly as many as the stack says. */
		if (++ps->kids[r->parent] > p->length)
			return corrupt(what, r->parent, "more children than the lazy stack's count");
		rc = check_lazy_child(r, p, i, what);
		if (rc < 0 || r->kind == TD_KEYINDEX_KIND_LAZY)
			return rc;
		/* A dict: the rules of any non-tensor, below. */
	} else
		switch (r->kind) {
		case TD_KEYINDEX_KIND_DICT:
		case TD_KEYINDEX_KIND_TENSOR:
		case TD_KEYINDEX_KIND_LAZY:
			if (p &&
				(r->ndim < p->ndim ||
					memcmp(r->shape, p->shape, (size_t)p->ndim * sizeof(int64_t)) != 0))
				return corrupt(what, i, "the shape does not start with the batch shape");
			if (r->kind == TD_KEYINDEX_KIND_LAZY)
				return TD_OK;
			break;
		case TD_KEYINDEX_KIND_STRING:
			break;
		case TD_KEYINDEX_KIND_STRINGS:
			if (!(flags & TD_KEYINDEX_F_STRINGS))
				return corrupt(what, i, "an array of strings in an index without its flag");
			if (r->ndim < 1 || r->ndim < p->ndim ||
				memcmp(r->shape, p->shape, (size_t)p->ndim * sizeof(int64_t)) != 0)
				return corrupt(what, i, "the shape does not start with the batch shape");
			break;
		default:
			return corrupt(what, i, "unknown kind");
		}
	if (r->kind != TD_KEYINDEX_KIND_TENSOR) {
		if (r->dtype || r->flags || r->offset || r->length || r->capacity)
			return corrupt(what, i, "non-zero tensor fields on a non-tensor");
		if (r->kind == TD_KEYINDEX_KIND_STRING && r->ndim)
			return corrupt(what, i, "a string with dims");
		if (r->kind == TD_KEYINDEX_KIND_DICT && r->text_len)
			return corrupt(what, i, "a dict with inline bytes");
		if (r->kind == TD_KEYINDEX_KIND_STRINGS)
			return check_strings(r, i, what);
		if (r->text && memchr(r->text, '\0', r->text_len))
			return corrupt(what, i, "the text holds a NUL byte");
		return TD_OK;
	}
	if (r->text_len)
		return corrupt(what, i, "a tensor with inline bytes");
	if (!td_dtype_is_valid(r->dtype))
		return corrupt(what, i, "unknown dtype code");
	{
		int64_t numel = 1;
		size_t nbytes;

		for (uint8_t d = 0; d < r->ndim; d++)
			if (!td__mul_i64(numel, r->shape[d], &numel))
				return td__error(TD_EOVERFLOW,
					"%s: index record %u: the number of "
					"elements overflows",
					what, (unsigned)i);
		if (!td__mul_size((size_t)numel, td_dtype_size(r->dtype), &nbytes) ||
			(uint64_t)numel > SIZE_MAX || nbytes > (size_t)PTRDIFF_MAX)
			return td__error(TD_EOVERFLOW, "%s: index record %u: the byte size overflows", what,
				(unsigned)i);
		if (r->length != (uint64_t)nbytes)
			return corrupt(what, i, "length is not the byte size of the shape");
	}
	if (r->length == 0) {
		if (r->offset || r->capacity || r->flags)
			return corrupt(what, i, "an extent for a tensor without elements");
		return TD_OK;
	}
	if (flags & TD_KEYINDEX_F_DIRECTORY) {
		/* The bytes are the leaf's own file (doc/format.md 7): no extent. */
		if (r->offset || r->capacity)
			return corrupt(what, i, "an extent in the index of a directory store");
		return TD_OK;
	}
	if (r->offset % PAGE || r->capacity % PAGE || r->offset < PAGE)
		return corrupt(what, i, "an extent not aligned to 4096 bytes");
	if (r->length > r->capacity || r->capacity > UINT64_MAX - r->offset)
		return corrupt(what, i, "an extent shorter than the data");
	return TD_OK;
}

int td__keyindex_parse(td__keyindex *ix, const void *buf, size_t len, bool directory,
	const char *what)
{
	const uint8_t *b = buf;
	uint32_t count, flags, i;
	uint64_t body_len, pos;
	keyset ks = { 0 };
	parse_state ps = { NULL, NULL };
	int rc = TD_OK;

	memset(ix, 0, sizeof(*ix));
	if (len < TD_KEYINDEX_HEADER_SIZE)
		return td__error(TD_ECORRUPT, "%s: index of %zu bytes, shorter than its header", what, len);
	if (memcmp(b, TD_KEYINDEX_MAGIC, 8) != 0)
		return td__error(TD_ECORRUPT, "%s: bad index magic", what);
	if (td__le32(b + 8) != TD_KEYINDEX_VERSION)
		return td__error(TD_EVERSION, "%s: index version %u (this build reads %u)", what,
			(unsigned)td__le32(b + 8), TD_KEYINDEX_VERSION);
	if (td__le32(b + 12) != TD_KEYINDEX_HEADER_SIZE)
		return td__error(TD_ECORRUPT, "%s: index header size %u", what, (unsigned)td__le32(b + 12));
	count = td__le32(b + 16);
	body_len = td__le64(b + 24);
	if (body_len % 8 || body_len > TD_KEYINDEX_MAX_BYTES ||
		body_len != (uint64_t)len - TD_KEYINDEX_HEADER_SIZE)
		return td__error(TD_ECORRUPT, "%s: index body of %llu bytes in %zu", what,
			(unsigned long long)body_len, len);
	if (index_checksum(b, len) != td__le64(b + 56))
		return td__error(TD_ECORRUPT, "%s: index checksum mismatch", what);
	flags = td__le32(b + 20);
	if (flags & ~TD_KEYINDEX_F_KNOWN)
		return td__error(TD_ENOTSUP, "%s: index flags 0x%x are not supported", what,
			(unsigned)(flags & ~TD_KEYINDEX_F_KNOWN));
	if (!(flags & TD_KEYINDEX_F_DIRECTORY) != !directory)
		return td__error(TD_ECORRUPT, "%s: the key index of a %s store", what,
			directory ? "packed" : "directory");
	if ((flags & TD_KEYINDEX_F_LAZY) && (flags & TD_KEYINDEX_F_DIRECTORY))
		return td__error(TD_ECORRUPT,
			"%s: lazy stacks in the key index of a directory "
			"store",
			what);
	if (!td__all_zero(b + 40, 16))
		return td__error(TD_ECORRUPT, "%s: reserved index bytes are not zero", what);
	/* Every record takes at least 48 bytes: bound the count before allocating. */
	if (count == 0 || count > TD_KEYINDEX_MAX_RECORDS ||
		(uint64_t)count > body_len / TD_KEYINDEX_RECORD_FIXED)
		return td__error(TD_ECORRUPT, "%s: %u index records in %llu bytes", what, (unsigned)count,
			(unsigned long long)body_len);
	ix->generation = td__le64(b + 32);
	ix->flags = flags;
	ix->recs = td__calloc(count, sizeof(*ix->recs));
	if (!ix->recs)
		return td__error_nomem((size_t)count * sizeof(*ix->recs));
	ix->cap = count;
	rc = keyset_init(&ks, count);
	ps.depth = td__calloc(count, sizeof(*ps.depth));
	ps.kids = td__calloc(count, sizeof(*ps.kids));
	if (rc == TD_OK && (!ps.depth || !ps.kids))
		rc = td__error_nomem((size_t)count * sizeof(*ps.kids));
	pos = TD_KEYINDEX_HEADER_SIZE;
	for (i = 0; rc == TD_OK && i < count; i++) {
		const uint8_t *p = b + pos;
		td__keyrec *r = &ix->recs[i];
		uint64_t left = (uint64_t)len - pos, need, end;

		if (left < TD_KEYINDEX_RECORD_FIXED) {
			rc = corrupt(what, i, "runs past the end of the index");
			break;
		}
		r->kind = p[0];
		r->dtype = p[1];
		r->ndim = p[2];
		r->flags = p[3];
		r->parent = td__le32(p + 4);
		r->key_len = td__le32(p + 8);
		r->text_len = td__le32(p + 12);
		r->offset = td__le64(p + 16);
		r->length = td__le64(p + 24);
		r->capacity = td__le64(p + 32);
		r->checksum = td__le64(p + 40);
		if (r->ndim > TD_MAX_DIMS) {
			rc = corrupt(what, i, "more than 16 dims");
			break;
		}
		/* 48 + 8*16 + 2 * (2^32 - 1) cannot overflow 64 bits. */
		need = TD_KEYINDEX_RECORD_FIXED + 8u * r->ndim + (uint64_t)r->key_len + r->text_len;
		end = (need + 7) & ~(uint64_t)7;
		if (end > left) {
			rc = corrupt(what, i, "runs past the end of the index");
			break;
		}
		for (uint8_t d = 0; d < r->ndim; d++)
			r->shape[d] = (int64_t)td__le64(p + TD_KEYINDEX_RECORD_FIXED + 8u * d);
		r->key = dup_bytes((const char *)p + TD_KEYINDEX_RECORD_FIXED + 8u * r->ndim, r->key_len);
		if (r->kind == TD_KEYINDEX_KIND_STRING || r->kind == TD_KEYINDEX_KIND_STRINGS ||
			r->text_len)
			r->text = dup_bytes((const char *)p + TD_KEYINDEX_RECORD_FIXED + 8u * r->ndim +
					r->key_len,
				r->text_len);
		ix->n = i + 1; /* owns what was allocated, for td__keyindex_free() */
		if (!r->key || (r->text_len && !r->text)) {
			rc = td__error_nomem(r->key_len + r->text_len + 2);
			break;
		}
		if (!td__all_zero(p + need, (size_t)(end - need))) {
			rc = corrupt(what, i, "padding is not zero");
			break;
		}
		rc = check_record(ix, i, flags, &ps, what);
		/* The children of a lazy stack have no keys: their order tells them apart. */
		if (rc == TD_OK && i > 0 && ix->recs[r->parent].kind != TD_KEYINDEX_KIND_LAZY &&
			!keyset_add(&ks, ix, i))
			rc = corrupt(what, i, "a duplicate key in its dict");
		pos += end;
	}
	if (rc == TD_OK && pos != len)
		rc = td__error(TD_ECORRUPT, "%s: %llu bytes after the last index record", what,
			(unsigned long long)(len - pos));
	for (i = 0; rc == TD_OK && i < count; i++)
		if (ix->recs[i].kind == TD_KEYINDEX_KIND_LAZY && ps.kids[i] != ix->recs[i].length)
			rc = corrupt(what, i, "fewer children than the lazy stack's count");
	td__free(ps.depth);
	td__free(ps.kids);
	td__free(ks.slots);
	if (rc < 0)
		td__keyindex_free(ix);
	return rc;
}

static int cmp_extent(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

int td__keyindex_check_extents(const td__keyindex *ix, uint64_t lo, uint64_t hi,
	const uint64_t (*extra)[2], size_t nextra, const char *what)
{
	uint64_t(*ext)[2];
	size_t n = 0, i;
	int rc = TD_OK;

	ext = td__calloc((size_t)ix->n + nextra + 1, sizeof(*ext));
	if (!ext)
		return td__error_nomem(((size_t)ix->n + nextra) * sizeof(*ext));
	for (i = 0; i < ix->n; i++)
		if (ix->recs[i].kind == TD_KEYINDEX_KIND_TENSOR && ix->recs[i].length) {
			ext[n][0] = ix->recs[i].offset;
			ext[n][1] = ix->recs[i].capacity;
			n++;
		}
	for (i = 0; i < nextra; i++)
		if (extra[i][1]) {
			ext[n][0] = extra[i][0];
			ext[n][1] = extra[i][1];
			n++;
		}
	qsort(ext, n, sizeof(*ext), cmp_extent);
	for (i = 0; i < n; i++) {
		if (ext[i][0] < lo || ext[i][1] > hi || ext[i][0] > hi - ext[i][1]) {
			rc = td__error(TD_ECORRUPT,
				"%s: an extent at %llu of %llu bytes lies outside "
				"the %llu bytes in use",
				what, (unsigned long long)ext[i][0], (unsigned long long)ext[i][1],
				(unsigned long long)hi);
			break;
		}
		if (i && ext[i - 1][0] + ext[i - 1][1] > ext[i][0]) {
			rc = td__error(TD_ECORRUPT, "%s: extents at %llu and %llu overlap", what,
				(unsigned long long)ext[i - 1][0], (unsigned long long)ext[i][0]);
			break;
		}
	}
	td__free(ext);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */
/* ------------------------------------------------------------------------ */

static uint64_t rec_size(const td__keyrec *r)
{
	uint64_t need = TD_KEYINDEX_RECORD_FIXED + 8u * r->ndim + (uint64_t)r->key_len + r->text_len;

	return (need + 7) & ~(uint64_t)7;
}

int td__keyindex_size(const td__keyindex *ix, size_t *out)
{
	uint64_t total = TD_KEYINDEX_HEADER_SIZE;
	uint32_t i;

	for (i = 0; i < ix->n; i++) {
		if (ix->recs[i].key_len > UINT32_MAX || ix->recs[i].text_len > UINT32_MAX)
			return td__error(TD_EOVERFLOW, "store index: a key or string over 4 GiB");
		total += rec_size(&ix->recs[i]);
		if (total - TD_KEYINDEX_HEADER_SIZE > TD_KEYINDEX_MAX_BYTES)
			return td__error(TD_EOVERFLOW, "store index: over 1 GiB of keys and strings");
	}
	*out = (size_t)total;
	return TD_OK;
}

void td__keyindex_encode(const td__keyindex *ix, void *buf, size_t len)
{
	uint8_t *b = buf;
	uint64_t pos = TD_KEYINDEX_HEADER_SIZE;
	uint32_t i;

	memset(b, 0, len);
	memcpy(b, TD_KEYINDEX_MAGIC, 8);
	td__put_le32(b + 8, TD_KEYINDEX_VERSION);
	td__put_le32(b + 12, TD_KEYINDEX_HEADER_SIZE);
	td__put_le32(b + 16, ix->n);
	for (i = 0; i < ix->n; i++)
		if (ix->recs[i].kind == TD_KEYINDEX_KIND_STRINGS) {
			/* Set only when needed: other indexes stay readable by older builds. */
			td__put_le32(b + 20, TD_KEYINDEX_F_STRINGS);
			break;
		}
	for (i = 0; i < ix->n; i++)
		if (ix->recs[i].kind == TD_KEYINDEX_KIND_LAZY) {
			td__put_le32(b + 20, td__le32(b + 20) | TD_KEYINDEX_F_LAZY);
			break;
		}
	if (ix->flags & TD_KEYINDEX_F_DIRECTORY)
		td__put_le32(b + 20, td__le32(b + 20) | TD_KEYINDEX_F_DIRECTORY);
	td__put_le64(b + 24, (uint64_t)len - TD_KEYINDEX_HEADER_SIZE);
	td__put_le64(b + 32, ix->generation);
	for (i = 0; i < ix->n; i++) {
		const td__keyrec *r = &ix->recs[i];
		uint8_t *p = b + pos;

		p[0] = r->kind;
		p[1] = r->dtype;
		p[2] = r->ndim;
		p[3] = r->flags;
		td__put_le32(p + 4, r->parent);
		td__put_le32(p + 8, (uint32_t)r->key_len);
		td__put_le32(p + 12, (uint32_t)r->text_len);
		td__put_le64(p + 16, r->offset);
		td__put_le64(p + 24, r->length);
		td__put_le64(p + 32, r->capacity);
		td__put_le64(p + 40, r->checksum);
		for (uint8_t d = 0; d < r->ndim; d++)
			td__put_le64(p + TD_KEYINDEX_RECORD_FIXED + 8u * d, (uint64_t)r->shape[d]);
		p += TD_KEYINDEX_RECORD_FIXED + 8u * r->ndim;
		if (r->key_len)
			memcpy(p, r->key, r->key_len);
		if (r->text_len)
			memcpy(p + r->key_len, r->text, r->text_len);
		pos += rec_size(r);
	}
	td__put_le64(b + 56, index_checksum(b, len));
}

/* ------------------------------------------------------------------------ */
/* Editing                                                                   */
/* ------------------------------------------------------------------------ */

int td__keyindex_add_dict(td__keyindex *ix, const td_dict *d, uint32_t parent, const char *key)
{
	size_t n = td_dict_items(NULL, NULL, 0, d), i;
	const char **keys = td__calloc(n ? n : 1, sizeof(*keys));
	const td_value **vals = td__calloc(n ? n : 1, sizeof(*vals));
	td__keyrec r;
	uint32_t self;
	int rc;

	if (td_dict_is_lazy(d)) {
		/* The stack's record, then each child's records under it, in child order. */
		size_t count = td_lazy_count(d);

		memset(&r, 0, sizeof(r));
		r.kind = TD_KEYINDEX_KIND_LAZY;
		r.ndim = (uint8_t)td_dict_batch_ndim(d);
		memcpy(r.shape, td_dict_batch_shape(d), (size_t)r.ndim * sizeof(int64_t));
		r.offset = (uint64_t)td_lazy_stack_dim(d);
		r.length = count;
		r.parent = parent;
		r.key = (char *)key;
		r.key_len = strlen(key);
		if (count > TD_KEYINDEX_MAX_LAZY_CHILDREN)
			rc = td__error(TD_EOVERFLOW,
				"store index: a lazy stack of %zu children (at "
				"most 2^20)",
				count);
		else
			rc = td__keyindex_push(ix, &r, &self);
		for (i = 0; rc == TD_OK && i < count; i++)
			rc = td__keyindex_add_dict(ix, td_lazy_child(d, i), self, "");
		goto out;
	}
	if (!keys || !vals) {
		rc = td__error_nomem(n * sizeof(*keys));
		goto out;
	}
	td_dict_items(keys, vals, n, d);
	memset(&r, 0, sizeof(r));
	r.kind = TD_KEYINDEX_KIND_DICT;
	r.ndim = (uint8_t)td_dict_batch_ndim(d);
	memcpy(r.shape, td_dict_batch_shape(d), (size_t)r.ndim * sizeof(int64_t));
	r.parent = parent;
	r.key = (char *)key;
	r.key_len = strlen(key);
	rc = td__keyindex_push(ix, &r, &self);
	for (i = 0; rc == TD_OK && i < n; i++) {
		const td_value *v = vals[i];

		memset(&r, 0, sizeof(r));
		r.parent = self;
		r.key = (char *)keys[i];
		r.key_len = strlen(keys[i]);
		switch (v->kind) {
		case TD_VALUE_DICT:
			rc = td__keyindex_add_dict(ix, v->dict, self, keys[i]);
			break;
		case TD_VALUE_TENSOR:
			r.kind = TD_KEYINDEX_KIND_TENSOR;
			r.dtype = (uint8_t)v->tensor.dtype;
			r.ndim = (uint8_t)v->tensor.ndim;
			memcpy(r.shape, td_tensor_shape(&v->tensor), (size_t)r.ndim * sizeof(int64_t));
			r.length = td_tensor_nbytes(&v->tensor);
			r.src = &v->tensor;
			rc = td__keyindex_push(ix, &r, NULL);
			break;
		case TD_VALUE_STRING:
			r.kind = TD_KEYINDEX_KIND_STRING;
			r.text = (char *)v->blob.data;
			r.text_len = v->blob.length;
			rc = td__keyindex_push(ix, &r, NULL);
			break;
		case TD_VALUE_STRINGS: {
			const td_strings *s = v->strings;

			/* The texts with their NULs are the inline bytes, as they lie in memory. */
			r.kind = TD_KEYINDEX_KIND_STRINGS;
			r.ndim = (uint8_t)s->ndim;
			memcpy(r.shape, s->shape, (size_t)r.ndim * sizeof(int64_t));
			r.text = (char *)s->bytes;
			r.text_len = (size_t)s->offsets[s->numel];
			rc = td__keyindex_push(ix, &r, NULL);
			break;
		}
		default:
			rc = td__error(TD_EINVAL,
				"store: \"%s\" holds bytes, which stores do not "
				"keep",
				keys[i]);
			break;
		}
	}
out:
	td__free(keys);
	td__free(vals);
	return rc;
}

int td__keyindex_remove(td__keyindex *ix, uint32_t victim)
{
	uint32_t *map, i, j;
	bool *gone;

	/* Records come parents first: one pass marks every descendant. */
	gone = td__calloc(ix->n, sizeof(*gone));
	map = td__calloc(ix->n, sizeof(*map));
	if (!gone || !map) {
		td__free(gone);
		td__free(map);
		return td__error_nomem((size_t)ix->n * sizeof(*map));
	}
	gone[victim] = true;
	for (i = victim + 1; i < ix->n; i++)
		if (ix->recs[i].parent != TD_KEYINDEX_NO_PARENT && gone[ix->recs[i].parent])
			gone[i] = true;
	for (i = j = 0; i < ix->n; i++) {
		if (gone[i]) {
			rec_free(&ix->recs[i]);
			continue;
		}
		map[i] = j;
		ix->recs[j] = ix->recs[i];
		if (ix->recs[j].parent != TD_KEYINDEX_NO_PARENT)
			ix->recs[j].parent = map[ix->recs[j].parent];
		j++;
	}
	ix->n = j;
	td__free(gone);
	td__free(map);
	return TD_OK;
}

uint32_t td__keyindex_child(const td__keyindex *ix, uint32_t parent, const char *key)
{
	size_t len = strlen(key);
	uint32_t i;

	for (i = parent + 1; i < ix->n; i++)
		if (ix->recs[i].parent == parent && ix->recs[i].key_len == len &&
			memcmp(ix->recs[i].key, key, len) == 0)
			return i;
	return TD_KEYINDEX_NO_PARENT;
}

int td__keyindex_find(const td__keyindex *ix, const char *const *parts, size_t n, uint32_t *out)
{
	uint32_t cur = 0;
	size_t k;

	for (k = 0; k < n; k++) {
		if (ix->recs[cur].kind != TD_KEYINDEX_KIND_DICT) {
			*out = cur;
			return TD_ETYPE;
		}
		cur = td__keyindex_child(ix, cur, parts[k]);
		if (cur == TD_KEYINDEX_NO_PARENT)
			return TD_ENOTFOUND;
	}
	*out = cur;
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* The dict of an index                                                      */
/* ------------------------------------------------------------------------ */

/* Store the array of strings of record `i` (checked: one text per element) in `parent`. */
static int set_strings(td_dict *parent, const char *key, const td__keyrec *r, uint32_t i,
	const char *what)
{
	size_t count = 0, k, pos = 0;
	const char **texts;
	int rc;

	for (k = 0; k < r->text_len; k++)
		count += r->text[k] == '\0';
	texts = td__calloc(count ? count : 1, sizeof(*texts));
	if (!texts)
		return td__error_nomem(count * sizeof(*texts));
	for (k = 0; k < count; k++) {
		texts[k] = r->text + pos;
		pos += strlen(texts[k]) + 1;
	}
	rc = td__dictname_set_strings(parent, key, r->ndim, r->shape, texts);
	if (rc == TD_EINVAL)
		rc = corrupt(what, i, "a string is not valid UTF-8");
	td__free(texts);
	return rc;
}

/* A failure to build what the index checks allowed: the file's fault, unless out of memory. */
static int restate(int rc, const char *what, uint32_t i, const char *msg)
{
	char why[256];

	if (rc == TD_ENOMEM)
		return rc;
	snprintf(why, sizeof(why), "%s", td_error_last()->message);
	return td__error(TD_ECORRUPT, "%s: index record %u: %s (%s)", what, (unsigned)i, msg, why);
}

/*
 * Assemble the lazy stacks of an index once every other record is in:
 * from the last to the first, so that a stack's children (records after
 * it) are complete when it is built. `own[i]` says that `dicts[i]` is a
 * root the build still owns (the children of a stack until stacked, each
 * stack until placed). A stack under a dict replaces the empty placeholder
 * put under its key in index order, so the dict keeps its key order.
 */
static int build_stacks(const td__keyindex *ix, td_dict **dicts, bool *own, const char *what)
{
	uint32_t *head, *next, *tail, i;
	td_dict **kids = NULL;
	int rc = TD_OK;

	head = td__calloc(ix->n, sizeof(*head));
	tail = td__calloc(ix->n, sizeof(*tail));
	next = td__calloc(ix->n, sizeof(*next));
	if (!head || !tail || !next) {
		rc = td__error_nomem((size_t)ix->n * sizeof(*head));
		goto out;
	}
	/* Each stack's children in record order, as lists (0 ends one: never a child). */
	for (i = 1; i < ix->n; i++) {
		uint32_t p = ix->recs[i].parent;

		if (ix->recs[p].kind != TD_KEYINDEX_KIND_LAZY)
			continue;
		if (!head[p])
			head[p] = i;
		else
			next[tail[p]] = i;
		tail[p] = i;
	}
	for (i = ix->n; rc == TD_OK && i-- > 0;) {
		const td__keyrec *r = &ix->recs[i];
		td_dict **k;
		size_t n = 0;
		uint32_t c;

		if (r->kind != TD_KEYINDEX_KIND_LAZY)
			continue;
		k = td__realloc(kids, (size_t)r->length * sizeof(*kids));
		if (!k) {
			rc = td__error_nomem((size_t)r->length * sizeof(*kids));
			break;
		}
		kids = k;
		for (c = head[i]; c && n < r->length; c = next[c])
			kids[n++] = dicts[c];
		if (n != r->length) {
			rc = corrupt(what, i, "fewer children than the lazy stack's count");
			break;
		}
		rc = td_lazy_stack(&dicts[i], kids, n, (int)r->offset, TD_LAZY_TAKE);
		if (rc < 0) {
			rc = restate(rc, what, i, "its children do not stack");
			break;
		}
		own[i] = true;
		for (c = head[i]; c; c = next[c])
			own[c] = false;
		if (i == 0 || ix->recs[r->parent].kind == TD_KEYINDEX_KIND_LAZY)
			continue;
		{
			const char *key = r->key;

			rc = td__dictname_set_dict_take(dicts[r->parent], key, dicts[i]);
			if (rc < 0)
				rc = restate(rc, what, i, "the lazy stack does not fit its dict");
			else
				own[i] = false;
		}
	}
out:
	td__free(kids);
	td__free(head);
	td__free(tail);
	td__free(next);
	return rc;
}

/* Add record `i` (not the root) to the tree: into its dict, or held for its stack. */
static int build_record(const td__keyindex *ix, uint32_t i, td_dict **dicts, bool *own,
	td_tensor *t, const char *what)
{
	const td__keyrec *r = &ix->recs[i];
	td_dict *parent = dicts[r->parent];
	const char *key = r->key;
	td_dict *ph = NULL;
	int rc = TD_OK;

	if (ix->recs[r->parent].kind == TD_KEYINDEX_KIND_LAZY) {
		/* A child of a stack: a root until build_stacks() stacks it. */
		if (r->kind == TD_KEYINDEX_KIND_DICT) {
			rc = td_dict_new(&dicts[i], r->ndim, r->shape);
			own[i] = rc == TD_OK;
		} else if (r->kind != TD_KEYINDEX_KIND_LAZY) {
			rc = corrupt(what, i, "a child of a lazy stack is not a dict");
		}
		return rc;
	}
	switch (r->kind) {
	case TD_KEYINDEX_KIND_DICT:
		rc = td_dict_new(&dicts[i], r->ndim, r->shape);
		if (rc == TD_OK) {
			rc = td__dictname_set_dict_take(parent, key, dicts[i]);
			if (rc < 0) {
				td_dict_free(dicts[i]);
				dicts[i] = NULL;
			}
		}
		break;
	case TD_KEYINDEX_KIND_LAZY:
		/* Keeps the key's place until build_stacks() puts the stack there. */
		rc = td_dict_new(&ph, r->ndim, r->shape);
		if (rc == TD_OK) {
			rc = td__dictname_set_dict_take(parent, key, ph);
			if (rc < 0)
				td_dict_free(ph);
		}
		break;
	case TD_KEYINDEX_KIND_TENSOR:
		if (r->length == 0)
			rc = td_tensor_empty(t, r->dtype, r->ndim, r->shape);
		if (rc == TD_OK)
			rc = td__dictname_set_tensor_take(parent, key, t);
		break;
	case TD_KEYINDEX_KIND_STRING:
		rc = td__dictname_set_string(parent, key, r->text ? r->text : "");
		if (rc == TD_EINVAL)
			rc = corrupt(what, i, "the string is not valid UTF-8");
		break;
	case TD_KEYINDEX_KIND_STRINGS:
		rc = set_strings(parent, key, r, i, what);
		break;
	default:
		rc = corrupt(what, i, "unknown kind");
		break;
	}
	return rc;
}

int td__keyindex_build(const td__keyindex *ix, td__keyindex_visit_fn visit, void *payload,
	td_dict **out, const char *what)
{
	td_dict **dicts;
	bool *own, lazy = false;
	uint32_t i;
	int rc = TD_OK;

	*out = NULL;
	if (ix->n == 0 ||
		(ix->recs[0].kind != TD_KEYINDEX_KIND_DICT && ix->recs[0].kind != TD_KEYINDEX_KIND_LAZY))
		return td__error(TD_ECORRUPT, "%s: the index has no root dict", what);
	dicts = td__calloc(ix->n, sizeof(*dicts));
	own = td__calloc(ix->n, sizeof(*own));
	if (!dicts || !own) {
		td__free(dicts);
		td__free(own);
		return td__error_nomem((size_t)ix->n * sizeof(*dicts));
	}
	rc = visit(ix, 0, NULL, payload);
	if (rc == TD_OK && ix->recs[0].kind == TD_KEYINDEX_KIND_DICT) {
		rc = td_dict_new(&dicts[0], ix->recs[0].ndim, ix->recs[0].shape);
		own[0] = rc == TD_OK;
	}
	for (i = 1; rc == TD_OK && i < ix->n; i++) {
		const td__keyrec *r = &ix->recs[i];
		td_tensor t = TD_TENSOR_INIT;

		if (r->kind != TD_KEYINDEX_KIND_TENSOR || r->length > 0)
			rc = visit(ix, i, &t, payload);
		if (rc == TD_OK)
			rc = build_record(ix, i, dicts, own, &t, what);
		td_tensor_release(&t);
		lazy |= r->kind == TD_KEYINDEX_KIND_LAZY;
	}
	if (rc == TD_OK && (lazy || ix->recs[0].kind == TD_KEYINDEX_KIND_LAZY))
		rc = build_stacks(ix, dicts, own, what);
	if (rc == TD_OK) {
		*out = dicts[0];
		own[0] = false;
	}
	/* What is still a root of ours: the root, children not stacked, stacks not placed. */
	for (i = 0; i < ix->n; i++)
		if (own[i])
			td_dict_free(dicts[i]);
	td__free(dicts);
	td__free(own);
	return rc;
}

/* What view_extent() needs: the packed file's mapping, and its name for messages. */
typedef struct extent_map {
	td_buffer *map;
	const char *what;
} extent_map;

/* A tensor of a packed store: a view of its extent in the mapping. */
static int view_extent(const td__keyindex *ix, uint32_t i, td_tensor *t, void *payload)
{
	const td__keyrec *r = &ix->recs[i];
	const extent_map *m = payload;

	if (r->kind != TD_KEYINDEX_KIND_TENSOR)
		return TD_OK;
	if (!m->map || r->offset > td_buffer_size(m->map) ||
		r->length > td_buffer_size(m->map) - r->offset)
		return corrupt(m->what, i, "the extent lies past the mapping");
	return td_tensor_from_buffer(t, m->map, r->dtype, r->ndim, r->shape, NULL,
		(int64_t)(r->offset / td_dtype_size(r->dtype)));
}

int td__keyindex_to_dict(const td__keyindex *ix, td_buffer *map, td_dict **out, const char *what)
{
	extent_map m = { map, what };

	return td__keyindex_build(ix, view_extent, &m, out, what);
}
