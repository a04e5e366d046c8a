/* SPDX-License-Identifier: MIT */
/*
 * dirindex.c - the directory key index `.tdstore-index` of doc/format.md
 * section 7: parse (untrusted input: every count, length and record
 * number is checked before use, and the tables are checked against the
 * key index they describe), encode, and the writer's model of what each
 * directory's meta.json holds.
 */
#include "dirindex.h"

#include <xxhash.h>

void td__dirindex_free(td__dirindex *dx)
{
	if (!dx)
		return;
	td__keyindex_free(&dx->ix);
	td__free(dx->dirs);
	td__free(dx->raw);
	memset(dx, 0, sizeof(*dx));
}

bool td__dirindex_name(const char *key, const char *suffix, char *buf, size_t len)
{
	size_t slen = strlen(suffix);
	int n = td_store_encode_key(buf, len, key);

	if (n < 0 || (size_t)n >= len || slen >= len - (size_t)n)
		return false;
	memcpy(buf + n, suffix, slen + 1);
	return true;
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */
/* ------------------------------------------------------------------------ */

/* Bytes of the raw-name table with its zero padding to a multiple of 8. */
static uint64_t raw_table_size(uint32_t nraw)
{
	return ((uint64_t)nraw * 4 + 7) & ~(uint64_t)7;
}

/* The checksum of doc/format.md 7.2: XXH64 of the body, seeded with the header's. */
static uint64_t file_checksum(const uint8_t *b, size_t len)
{
	return XXH64(b + TD_DIRINDEX_HEADER_SIZE, len - TD_DIRINDEX_HEADER_SIZE, XXH64(b, 56, 0));
}

static int corrupt(const char *what, const char *msg, uint32_t i)
{
	return td__error(TD_ECORRUPT, "%s: %s (record %u)", what, msg, (unsigned)i);
}

/* enc(key) is the key itself: a raw name would be the same name. */
static bool encodes_to_itself(const td__keyrec *r)
{
	int n = td_store_encode_key(NULL, 0, r->key);

	return n >= 0 && (size_t)n == r->key_len;
}

/*
 * The directory entries of record `i`, from entry *next on: none for a
 * tensor; up to TD_DIRINDEX_MAX_SHELLS shells then a home for a dict; one
 * entry of its role for a string or an array of strings. Only the first
 * may have the raw flag, and only where a raw name is what a loader opens.
 */
static int check_dirs(const td__dirindex *dx, uint32_t i, uint32_t *next, const char *what)
{
	const td__keyrec *r = &dx->ix.recs[i];
	uint32_t first = *next, k = first, shells = 0;
	uint8_t want = r->kind == TD_KEYINDEX_KIND_STRING ? TD_DIRINDEX_STRING :
		r->kind == TD_KEYINDEX_KIND_STRINGS           ? TD_DIRINDEX_STRINGS :
														TD_DIRINDEX_HOME;

	if (k < dx->ndirs && dx->dirs[k].record < i)
		return corrupt(what, "directory entries out of record order", dx->dirs[k].record);
	for (; k < dx->ndirs && dx->dirs[k].record == i; k++) {
		const td__dirent *e = &dx->dirs[k];

		if (e->flags & ~TD_DIRINDEX_DIR_RAW)
			return corrupt(what, "unknown directory entry flags", i);
		if ((e->flags & TD_DIRINDEX_DIR_RAW) &&
			(k != first || i == 0 || !td__key_legacy_safe(r->key, true) || encodes_to_itself(r)))
			return corrupt(what, "a raw directory name where a loader opens enc(key)", i);
		if (e->meta_length == 0 || e->meta_length > TD_META_MAX_BYTES)
			return corrupt(what, "a meta.json length out of range", i);
		if (e->role == TD_DIRINDEX_SHELL && r->kind == TD_KEYINDEX_KIND_DICT &&
			shells < TD_DIRINDEX_MAX_SHELLS) {
			shells++;
			continue;
		}
		if (e->role != want || r->kind == TD_KEYINDEX_KIND_TENSOR)
			return corrupt(what, "a directory entry of the wrong role", i);
		k++;
		break;
	}
	if (r->kind != TD_KEYINDEX_KIND_TENSOR && (k == first || dx->dirs[k - 1].role != want))
		return corrupt(what, "an entry without its directory", i);
	*next = k;
	return TD_OK;
}

/* A leaf stored under its raw key name: a tensor with a file, a key a loader tries raw. */
static int check_raw(const td__keyrec *r, uint32_t i, const char *what)
{
	if (r->kind != TD_KEYINDEX_KIND_TENSOR || r->length == 0)
		return corrupt(what, "a raw file name for an entry without a file", i);
	if (!td__key_legacy_safe(r->key, false) || encodes_to_itself(r))
		return corrupt(what, "a raw file name where a loader opens enc(key)", i);
	return TD_OK;
}

/*
 * The rules the tables and the key index obey together (doc/format.md
 * 7.6): the records in depth-first preorder (each one's parent is the
 * previous record or one of its ancestors) and at most TD_KEY_MAX_DEPTH
 * dicts deep; keys UTF-8 and not the names meta.json keeps for the dict
 * itself; every directory entry and raw name belonging to a record, in
 * record order, and every count exact.
 */
static int check_tables(const td__dirindex *dx, const char *what)
{
	uint32_t stack[TD_KEY_MAX_DEPTH], depth = 0, next_dir = 0, next_raw = 0, i;

	for (i = 0; i < dx->ix.n; i++) {
		const td__keyrec *r = &dx->ix.recs[i];

		if (i > 0) {
			while (depth > 0 && stack[depth - 1] != r->parent)
				depth--;
			if (depth == 0)
				return corrupt(what, "records not in depth-first order", i);
			if (!td__utf8_valid((const unsigned char *)r->key, r->key_len) ||
				td__key_reserved(r->key))
				return corrupt(what, "a key that no meta.json can hold", i);
		}
		if (r->kind == TD_KEYINDEX_KIND_DICT) {
			if (depth >= TD_KEY_MAX_DEPTH)
				return corrupt(what, "dicts nested too deep", i);
			stack[depth++] = i;
		}
		TD_TRY(check_dirs(dx, i, &next_dir, what));
		if (next_raw < dx->nraw && dx->raw[next_raw] == i) {
			TD_TRY(check_raw(r, i, what));
			next_raw++;
		}
	}
	if (next_dir != dx->ndirs)
		return td__error(TD_ECORRUPT, "%s: %u directory entries, %u of them for no record", what,
			(unsigned)dx->ndirs, (unsigned)(dx->ndirs - next_dir));
	if (next_raw != dx->nraw)
		return td__error(TD_ECORRUPT, "%s: raw file names not ascending or for no record", what);
	return TD_OK;
}

/* Decode the directory table and the raw-name table at `p` (sizes checked). */
static int decode_tables(td__dirindex *dx, const uint8_t *p, const char *what)
{
	uint32_t k;

	dx->dirs = td__calloc(dx->ndirs, sizeof(*dx->dirs));
	dx->raw = td__calloc(dx->nraw ? dx->nraw : 1, sizeof(*dx->raw));
	if (!dx->dirs || !dx->raw)
		return td__error_nomem((size_t)dx->ndirs * sizeof(*dx->dirs));
	dx->cap_dirs = dx->ndirs;
	dx->cap_raw = dx->nraw;
	for (k = 0; k < dx->ndirs; k++, p += TD_DIRINDEX_DIR_SIZE) {
		td__dirent *e = &dx->dirs[k];

		e->record = td__le32(p);
		e->role = p[4];
		e->flags = p[5];
		e->meta_length = td__le32(p + 8);
		e->meta_hash = td__le64(p + 16);
		if (p[6] || p[7] || td__le32(p + 12))
			return td__error(TD_ECORRUPT,
				"%s: directory entry %u: reserved bytes are not "
				"zero",
				what, (unsigned)k);
	}
	for (k = 0; k < dx->nraw; k++, p += 4)
		dx->raw[k] = td__le32(p);
	if (!td__all_zero(p, (size_t)(raw_table_size(dx->nraw) - 4u * dx->nraw)))
		return td__error(TD_ECORRUPT, "%s: padding is not zero", what);
	return TD_OK;
}

/* The header (doc/format.md 7.2): everything but the key index and the tables. */
static int check_header(const uint8_t *b, size_t len, const char *what)
{
	uint64_t ilen, need;
	uint32_t ndirs, nraw;

	if (len < TD_DIRINDEX_HEADER_SIZE)
		return td__error(TD_ECORRUPT, "%s: %zu bytes, shorter than the header", what, len);
	if (memcmp(b, TD_DIRINDEX_MAGIC, 8) != 0)
		return td__error(TD_ECORRUPT, "%s: bad magic", what);
	if (td__le32(b + 8) != TD_DIRINDEX_VERSION)
		return td__error(TD_EVERSION, "%s: version %u (this build reads %u)", what,
			(unsigned)td__le32(b + 8), TD_DIRINDEX_VERSION);
	if (td__le32(b + 12) != TD_DIRINDEX_HEADER_SIZE)
		return td__error(TD_ECORRUPT, "%s: header size %u", what, (unsigned)td__le32(b + 12));
	if ((uint64_t)len > TD_DIRINDEX_MAX_BYTES)
		return td__error(TD_ECORRUPT, "%s: %zu bytes, more than an index holds", what, len);
	if (file_checksum(b, len) != td__le64(b + 56))
		return td__error(TD_ECORRUPT, "%s: checksum mismatch", what);
	if (td__le32(b + 16))
		return td__error(TD_ENOTSUP, "%s: flags 0x%x are not supported", what,
			(unsigned)td__le32(b + 16));
	if (td__le32(b + 28) || td__le64(b + 48))
		return td__error(TD_ECORRUPT, "%s: reserved bytes are not zero", what);
	ndirs = td__le32(b + 20);
	nraw = td__le32(b + 24);
	ilen = td__le64(b + 32);
	if (ndirs == 0 || ndirs > TD_DIRINDEX_MAX_DIRS || nraw > TD_DIRINDEX_MAX_DIRS)
		return td__error(TD_ECORRUPT, "%s: %u directories and %u raw names", what, (unsigned)ndirs,
			(unsigned)nraw);
	/* Each term is below 2^31, and len below 2^30: no overflow. */
	need = TD_DIRINDEX_HEADER_SIZE + (ilen > len ? (uint64_t)len + 1 : ilen) +
		(uint64_t)ndirs * TD_DIRINDEX_DIR_SIZE + raw_table_size(nraw);
	if (ilen % 8 || ilen < TD_KEYINDEX_HEADER_SIZE || need != (uint64_t)len)
		return td__error(TD_ECORRUPT,
			"%s: %zu bytes, not the %llu its header and index "
			"length say",
			what, len, (unsigned long long)need);
	return TD_OK;
}

int td__dirindex_parse(td__dirindex *dx, const void *buf, size_t len, const char *what)
{
	const uint8_t *b = buf;
	size_t ilen;
	int rc;

	memset(dx, 0, sizeof(*dx));
	TD_TRY(check_header(b, len, what));
	ilen = (size_t)td__le64(b + 32);
	dx->generation = td__le64(b + 40);
	dx->ndirs = td__le32(b + 20);
	dx->nraw = td__le32(b + 24);
	rc = td__keyindex_parse(&dx->ix, b + TD_DIRINDEX_HEADER_SIZE, ilen, true, what);
	if (rc == TD_OK && dx->ix.generation != dx->generation)
		rc = td__error(TD_ECORRUPT, "%s: the key index is of another generation", what);
	if (rc == TD_OK)
		rc = decode_tables(dx, b + TD_DIRINDEX_HEADER_SIZE + ilen, what);
	if (rc == TD_OK)
		rc = check_tables(dx, what);
	if (rc < 0)
		td__dirindex_free(dx);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Building and encoding                                                     */
/* ------------------------------------------------------------------------ */

/* Make room for one more element of `size` bytes in *arr (count n, capacity *cap). */
static int grow(void **arr, uint32_t n, uint32_t *cap, size_t size)
{
	uint32_t ncap;
	void *p;

	if (n < *cap)
		return TD_OK;
	if (n >= TD_DIRINDEX_MAX_DIRS)
		return td__error(TD_EOVERFLOW, "store index: more than %u directories",
			(unsigned)TD_DIRINDEX_MAX_DIRS);
	ncap = *cap ? 2 * *cap : 16;
	p = td__realloc(*arr, (size_t)ncap * size);
	if (!p)
		return td__error_nomem((size_t)ncap * size);
	*arr = p;
	*cap = ncap;
	return TD_OK;
}

int td__dirindex_push_dir(td__dirindex *dx, const td__dirent *e)
{
	TD_TRY(grow((void **)&dx->dirs, dx->ndirs, &dx->cap_dirs, sizeof(*dx->dirs)));
	dx->dirs[dx->ndirs++] = *e;
	return TD_OK;
}

int td__dirindex_push_raw(td__dirindex *dx, uint32_t record)
{
	TD_TRY(grow((void **)&dx->raw, dx->nraw, &dx->cap_raw, sizeof(*dx->raw)));
	dx->raw[dx->nraw++] = record;
	return TD_OK;
}

int td__dirindex_size(const td__dirindex *dx, size_t *out)
{
	size_t ilen;
	uint64_t total;

	TD_TRY(td__keyindex_size(&dx->ix, &ilen));
	total = TD_DIRINDEX_HEADER_SIZE + (uint64_t)ilen + (uint64_t)dx->ndirs * TD_DIRINDEX_DIR_SIZE +
		raw_table_size(dx->nraw);
	if (total > TD_DIRINDEX_MAX_BYTES)
		return td__error(TD_EOVERFLOW, "store index: more than %llu bytes",
			(unsigned long long)TD_DIRINDEX_MAX_BYTES);
	*out = (size_t)total;
	return TD_OK;
}

void td__dirindex_encode(const td__dirindex *dx, void *buf, size_t len)
{
	uint8_t *b = buf, *p;
	size_t ilen = len - TD_DIRINDEX_HEADER_SIZE - (size_t)dx->ndirs * TD_DIRINDEX_DIR_SIZE -
		(size_t)raw_table_size(dx->nraw);
	uint32_t k;

	memset(b, 0, len);
	memcpy(b, TD_DIRINDEX_MAGIC, 8);
	td__put_le32(b + 8, TD_DIRINDEX_VERSION);
	td__put_le32(b + 12, TD_DIRINDEX_HEADER_SIZE);
	td__put_le32(b + 20, dx->ndirs);
	td__put_le32(b + 24, dx->nraw);
	td__put_le64(b + 32, ilen);
	td__put_le64(b + 40, dx->generation);
	td__keyindex_encode(&dx->ix, b + TD_DIRINDEX_HEADER_SIZE, ilen);
	p = b + TD_DIRINDEX_HEADER_SIZE + ilen;
	for (k = 0; k < dx->ndirs; k++, p += TD_DIRINDEX_DIR_SIZE) {
		const td__dirent *e = &dx->dirs[k];

		td__put_le32(p, e->record);
		p[4] = e->role;
		p[5] = e->flags;
		td__put_le32(p + 8, e->meta_length);
		td__put_le64(p + 16, e->meta_hash);
	}
	for (k = 0; k < dx->nraw; k++, p += 4)
		td__put_le32(p, dx->raw[k]);
	td__put_le64(b + 56, file_checksum(b, len));
}

/* ------------------------------------------------------------------------ */
/* The model                                                                 */
/* ------------------------------------------------------------------------ */

int td__dirmodel_new(td__dirmodel **out)
{
	*out = td__calloc(1, sizeof(**out));
	return *out ? TD_OK : td__error_nomem(sizeof(**out));
}

void td__dirmodel_free(td__dirmodel *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->cap; i++)
		td__free(m->slots[i].path);
	td__free(m->slots);
	td__free(m);
}

void td__dirmodel_poison(td__dirmodel *m)
{
	if (m)
		m->poisoned = true;
}

/* Never 0, which marks a free slot. */
static uint64_t ent_hash(uint8_t kind, const char *path, size_t len)
{
	return XXH3_64bits_withSeed(path, len, kind) | 1u;
}

td__dirmodel_ent *td__dirmodel_find(const td__dirmodel *m, uint8_t kind, const char *path,
	size_t len)
{
	uint64_t h;
	size_t i;

	if (!m->cap)
		return NULL;
	h = ent_hash(kind, path, len);
	for (i = (size_t)h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		td__dirmodel_ent *e = &m->slots[i];

		if (!e->h)
			return NULL;
		if (e->h == h && e->kind == kind && e->path_len == len && memcmp(e->path, path, len) == 0)
			return e;
	}
}

/* Place an entry (its path owned by the table) in a free slot of a table with room. */
static void place(td__dirmodel_ent *slots, size_t cap, const td__dirmodel_ent *e)
{
	size_t i;

	for (i = (size_t)e->h & (cap - 1); slots[i].h; i = (i + 1) & (cap - 1))
		;
	slots[i] = *e;
}

/* Rehash into `cap` slots, keeping every entry, or only the used ones (marks cleared). */
static int rehash(td__dirmodel *m, size_t cap, bool used_only)
{
	td__dirmodel_ent *slots = td__calloc(cap, sizeof(*slots));
	size_t i;

	if (!slots)
		return td__error_nomem(cap * sizeof(*slots));
	m->n = m->nraw = 0;
	for (i = 0; i < m->cap; i++) {
		td__dirmodel_ent e = m->slots[i];

		if (!e.h)
			continue;
		if (used_only && !e.used) {
			td__free(e.path);
			continue;
		}
		e.used = false;
		place(slots, cap, &e);
		m->n++;
		m->nraw += e.kind == TD_DIRMODEL_RAW;
	}
	td__free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return TD_OK;
}

int td__dirmodel_set(td__dirmodel *m, uint8_t kind, const char *path, size_t len,
	uint32_t meta_length, uint64_t meta_hash, bool shell)
{
	td__dirmodel_ent *e = td__dirmodel_find(m, kind, path, len), fresh;

	if (!e) {
		/* At most half full: probes stay short. */
		if (2 * (m->n + 1) > m->cap)
			TD_TRY(rehash(m, m->cap ? 2 * m->cap : 64, false));
		memset(&fresh, 0, sizeof(fresh));
		fresh.path = td__strndup(path, len);
		if (!fresh.path)
			return td__error_nomem(len + 1);
		fresh.path_len = len;
		fresh.h = ent_hash(kind, path, len);
		fresh.kind = kind;
		place(m->slots, m->cap, &fresh);
		m->n++;
		m->nraw += kind == TD_DIRMODEL_RAW;
		e = td__dirmodel_find(m, kind, path, len);
	}
	e->meta_length = meta_length;
	e->meta_hash = meta_hash;
	e->shell = shell;
	return TD_OK;
}

int td__dirmodel_prune(td__dirmodel *m)
{
	size_t used = 0, cap = 64, i;

	for (i = 0; i < m->cap; i++)
		used += m->slots[i].h && m->slots[i].used;
	while (cap < 2 * used)
		cap *= 2;
	return rehash(m, cap, true);
}

/* ---- what loaders and commits tell the model ---- */

/*
 * The loader names directories in buffers of TD_REL_MAX bytes for its
 * messages: a path that fills one may have been cut, so it names nothing
 * reliably.
 */
static bool path_whole(td__dirmodel *m, const char *rel)
{
	if (strlen(rel) < TD_REL_MAX - 1)
		return true;
	m->poisoned = true;
	return false;
}

void td__dirmodel_note_meta(td__dirmodel *m, const char *rel, const char *text, size_t len)
{
	uint64_t h;
	const td__dirmodel_ent *e;

	if (!m || !path_whole(m, rel))
		return;
	h = XXH3_64bits(text, len);
	e = td__dirmodel_find(m, TD_DIRMODEL_DIR, rel, strlen(rel));
	/* Read twice (a dict's type, then its keys): both reads must have seen one file. */
	if (e && (e->meta_hash != h || e->meta_length != len))
		m->poisoned = true;
	else if (!e &&
		(len > TD_META_MAX_BYTES ||
			td__dirmodel_set(m, TD_DIRMODEL_DIR, rel, strlen(rel), (uint32_t)len, h, false) < 0))
		m->poisoned = true;
}

void td__dirmodel_note_shell(td__dirmodel *m, const char *rel)
{
	td__dirmodel_ent *e;

	if (!m || !path_whole(m, rel))
		return;
	e = td__dirmodel_find(m, TD_DIRMODEL_DIR, rel, strlen(rel));
	if (e)
		e->shell = true;
	else
		m->poisoned = true;
}

void td__dirmodel_note_leaf(td__dirmodel *m, const char *rel, const char *key, const char *fname)
{
	size_t klen = strlen(key), rlen = strlen(rel), flen = strlen(fname);
	char *path;
	int n;

	if (!m || !path_whole(m, rel))
		return;
	/* Only a raw name is worth a note: the encoded one is what writers assume. */
	n = td_store_encode_key(NULL, 0, key);
	if ((n >= 0 && (size_t)n == klen) || flen != klen + 7 || memcmp(fname, key, klen) != 0)
		return;
	path = td__malloc(rlen + flen + 2);
	if (!path) {
		m->poisoned = true;
		return;
	}
	memcpy(path, rel, rlen);
	path[rlen] = '/';
	memcpy(path + (rlen ? rlen + 1 : 0), fname, flen + 1);
	if (td__dirmodel_set(m, TD_DIRMODEL_RAW, path, strlen(path), 0, 0, false) < 0)
		m->poisoned = true;
	td__free(path);
}

void td__dirmodel_note_commit(td__dirmodel *m, const td__commit *c)
{
	size_t i;

	if (!m)
		return;
	/* A directory we wrote holds a TensorDict (or a string's) meta.json: no shell. */
	for (i = 0; i < c->n; i++)
		if (td__dirmodel_set(m, TD_DIRMODEL_DIR, c->e[i].path, strlen(c->e[i].path),
				c->e[i].meta_length, c->e[i].meta_hash, false) < 0)
			m->poisoned = true;
}
