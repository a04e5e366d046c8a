/* SPDX-License-Identifier: MIT */
/*
 * store_packed.c - the packed placement (doc/format.md section 4): one
 * file holding a header page with two commit slots, the key index and the
 * tensors' 4096-byte aligned extents, mapped whole.
 *
 * Reading treats the file as untrusted: the header, both slots and the
 * index are checked (checksums, bounds, overlaps) before anything is
 * mapped. Writing never moves or overwrites a committed extent: a schema
 * change appends, writes the new index into the older slot's area (or a
 * new one), syncs, and only then overwrites the older slot.
 */
#include "store_impl.h"
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define PAGE ((uint64_t)TD_PACK_PAGE)
#define SLOT_OFF(i) ((i) ? TD_PACK_SLOT_B : TD_PACK_SLOT_A)

static uint64_t round_page(uint64_t n)
{
	return (n + PAGE - 1) & ~(PAGE - 1);
}

/* ------------------------------------------------------------------------ */
/* Low-level file access                                                     */
/* ------------------------------------------------------------------------ */

static int pread_all(int fd, void *buf, size_t len, uint64_t off, const char *what)
{
	char *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return td__error_os(TD_EIO, errno, "%s: read", what);
		if (n == 0)
			return td__error(TD_ECORRUPT,
				"%s: the file ends at %llu, before the %zu "
				"bytes it declares",
				what, (unsigned long long)off, len);
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return TD_OK;
}

/* Reserve [off, off + len) on disk (the file grows to cover it). */
static int reserve(int fd, uint64_t off, uint64_t len, const char *what)
{
	int err;

	if (len == 0)
		return TD_OK;
	if (off > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - off)
		return td__error(TD_EOVERFLOW, "%s: the file would pass 2^63 bytes", what);
	err = posix_fallocate(fd, (off_t)off, (off_t)len);
	if (err == EINTR)
		err = posix_fallocate(fd, (off_t)off, (off_t)len);
	if (err)
		return td__error_os(td__status_from_errno(err), err, "%s: reserving %llu bytes", what,
			(unsigned long long)len);
	return TD_OK;
}

/* Zero [off, off + len), which may hold bytes of a change that never committed. */
static int zero_range(int fd, uint64_t off, uint64_t len, uint64_t file_size, const char *what)
{
	td__writer w;
	int rc;

	/* Bytes past the old end of the file read as zeros already. */
	if (off >= file_size)
		return TD_OK;
	if (len > file_size - off)
		len = file_size - off;
	TD_TRY(td__writer_init(&w, fd, off, what));
	rc = td__writer_zero(&w, len);
	if (rc == TD_OK)
		rc = td__writer_flush(&w);
	td__writer_free(&w);
	return rc;
}

static int sync_fd(int fd, const char *what)
{
	if (fdatasync(fd) < 0)
		return td__error_os(TD_EIO, errno, "%s: fdatasync", what);
	return TD_OK;
}

static int lock_fd(int fd, bool exclusive, const char *what)
{
	while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0) {
		if (errno != EINTR)
			return td__error_os(TD_EIO, errno, "%s: flock", what);
	}
	return TD_OK;
}

static void unlock_fd(int fd)
{
	flock(fd, LOCK_UN);
}

/* ------------------------------------------------------------------------ */
/* Header page and slots                                                     */
/* ------------------------------------------------------------------------ */

static void encode_header(uint8_t *page)
{
	memset(page, 0, TD_PACK_HEADER_SIZE);
	memcpy(page, TD_PACK_MAGIC, 8);
	td__put_le32(page + 8, TD_PACK_VERSION);
	td__put_le32(page + 12, TD_PACK_HEADER_SIZE);
	td__put_le32(page + 16, TD_PACK_PAGE);
	td__put_le64(page + 56, XXH64(page, 56, 0));
}

static void encode_slot(uint8_t *p, const td__slot *s)
{
	memset(p, 0, sizeof(td__pack_slot));
	td__put_le64(p + 0, s->generation);
	td__put_le64(p + 8, s->index_offset);
	td__put_le64(p + 16, s->index_length);
	td__put_le64(p + 24, s->index_capacity);
	td__put_le64(p + 32, s->file_length);
	td__put_le64(p + 56, XXH64(p, 56, 0));
}

/* Check the header page; decode both slots (ok = checksum and field rules hold). */
static int decode_page(const uint8_t *page, uint64_t file_size, td__slot slot[2], const char *what)
{
	size_t i;

	if (memcmp(page, TD_PACK_MAGIC, 8) != 0)
		return td__error(TD_ECORRUPT, "%s: not a tdstore packed file (bad magic)", what);
	if (td__le32(page + 8) != TD_PACK_VERSION)
		return td__error(TD_EVERSION, "%s: packed format version %u (this build reads %u)", what,
			(unsigned)td__le32(page + 8), TD_PACK_VERSION);
	if (XXH64(page, 56, 0) != td__le64(page + 56))
		return td__error(TD_ECORRUPT, "%s: header checksum mismatch", what);
	if (td__le32(page + 12) != TD_PACK_HEADER_SIZE || td__le32(page + 16) != TD_PACK_PAGE)
		return td__error(TD_ECORRUPT, "%s: header size %u or page size %u", what,
			(unsigned)td__le32(page + 12), (unsigned)td__le32(page + 16));
	if (td__le32(page + 20))
		return td__error(TD_ENOTSUP, "%s: packed format flags 0x%x are not supported", what,
			(unsigned)td__le32(page + 20));
	if (!td__all_zero(page + 24, 32) || !td__all_zero(page + 64, TD_PACK_SLOT_A - 64) ||
		!td__all_zero(page + TD_PACK_SLOT_A + 64, TD_PACK_SLOT_B - TD_PACK_SLOT_A - 64) ||
		!td__all_zero(page + TD_PACK_SLOT_B + 64, TD_PACK_HEADER_SIZE - TD_PACK_SLOT_B - 64))
		return td__error(TD_ECORRUPT, "%s: reserved header bytes are not zero", what);
	for (i = 0; i < 2; i++) {
		const uint8_t *p = page + SLOT_OFF(i);
		td__slot *s = &slot[i];

		s->generation = td__le64(p);
		s->index_offset = td__le64(p + 8);
		s->index_length = td__le64(p + 16);
		s->index_capacity = td__le64(p + 24);
		s->file_length = td__le64(p + 32);
		s->sealed = XXH64(p, 56, 0) == td__le64(p + 56) && s->generation != 0;
		s->ok = s->sealed && td__all_zero(p + 40, 16) && s->index_offset % PAGE == 0 &&
			s->index_offset >= PAGE && s->index_capacity % PAGE == 0 &&
			s->index_length >= TD_KEYINDEX_HEADER_SIZE && s->index_length <= s->index_capacity &&
			s->index_length <= TD_KEYINDEX_HEADER_SIZE + TD_KEYINDEX_MAX_BYTES &&
			s->file_length % PAGE == 0 && s->file_length <= file_size &&
			s->index_offset <= s->file_length &&
			s->index_capacity <= s->file_length - s->index_offset;
	}
	return TD_OK;
}

/* Read and check the index a slot names. */
static int read_index(int fd, const td__slot *s, td__keyindex *ix, const char *what)
{
	void *buf = td__malloc((size_t)s->index_length);
	int rc;

	if (!buf)
		return td__error_nomem((size_t)s->index_length);
	rc = pread_all(fd, buf, (size_t)s->index_length, s->index_offset, what);
	if (rc == TD_OK)
		rc = td__keyindex_parse(ix, buf, (size_t)s->index_length, false, what);
	td__free(buf);
	if (rc == TD_OK && ix->generation != s->generation) {
		td__keyindex_free(ix);
		rc = td__error(TD_ECORRUPT, "%s: the index is of generation %llu, its slot of %llu", what,
			(unsigned long long)ix->generation, (unsigned long long)s->generation);
	}
	return rc;
}

/*
 * Load the committed state: the header, the newer valid slot, its index
 * (checked against the file), a mapping of [0, file_length) and the dict.
 * On success the store's pk and dict are replaced (the old ones released).
 * The caller holds the file lock.
 */
static int load(td_store *st)
{
	td__packed *pk = &st->pk;
	const char *what = st->path;
	uint8_t page[TD_PACK_HEADER_SIZE];
	td__slot slot[2];
	td__keyindex ix = { 0 };
	td_buffer *map = NULL;
	td_dict *d = NULL;
	uint64_t fsize, extra[1][2];
	int cur, rc;

	TD_TRY(td__fstat_regular(pk->fd, what, &fsize));
	if (fsize < TD_PACK_HEADER_SIZE)
		return td__error(TD_ECORRUPT, "%s: %llu bytes, shorter than a packed header", what,
			(unsigned long long)fsize);
	TD_TRY(pread_all(pk->fd, page, sizeof(page), 0, what));
	TD_TRY(decode_page(page, fsize, slot, what));
	/* A slot that fails its checksum was torn by a crash: it does not count. */
	if (!slot[0].sealed && !slot[1].sealed)
		return td__error(TD_ECORRUPT, "%s: no valid commit slot", what);
	if (slot[0].sealed && slot[1].sealed && slot[0].generation == slot[1].generation)
		return td__error(TD_ECORRUPT, "%s: both commit slots hold generation %llu", what,
			(unsigned long long)slot[0].generation);
	cur = !slot[0].sealed || (slot[1].sealed && slot[1].generation > slot[0].generation);
	/* The newer sealed slot is the committed state: it must be right. */
	if (!slot[cur].ok)
		return td__error(TD_ECORRUPT,
			"%s: commit slot %c (generation %llu) names an index "
			"or a length outside the %llu-byte file",
			what, cur ? 'B' : 'A', (unsigned long long)slot[cur].generation,
			(unsigned long long)fsize);
	/* The newer slot's index must be intact; the older one's may be half rewritten. */
	TD_TRY(read_index(pk->fd, &slot[cur], &ix, what));
	if (slot[!cur].ok) {
		td__keyindex old = { 0 };

		if (read_index(pk->fd, &slot[!cur], &old, what) == TD_OK)
			td__keyindex_free(&old);
		else
			slot[!cur].ok = false;
		td_error_clear();
	}
	extra[0][0] = slot[cur].index_offset;
	extra[0][1] = slot[cur].index_capacity;
	rc = td__keyindex_check_extents(&ix, PAGE, slot[cur].file_length, extra, 1, what);
	/* An older area overlapping the newer state is not ours to reuse. */
	if (rc == TD_OK && slot[!cur].ok) {
		uint64_t both[2][2] = { { slot[cur].index_offset, slot[cur].index_capacity },
			{ slot[!cur].index_offset, slot[!cur].index_capacity } };

		if (slot[!cur].index_offset + slot[!cur].index_capacity > slot[cur].file_length ||
			td__keyindex_check_extents(&ix, PAGE, slot[cur].file_length, both, 2, what) < 0)
			slot[!cur].ok = false;
		td_error_clear();
	}
	if (rc == TD_OK)
		rc = td__map_fd(&map, pk->fd, (size_t)slot[cur].file_length, st->writable, what);
	if (rc == TD_OK)
		rc = td__keyindex_to_dict(&ix, map, &d, what);
	if (rc == TD_OK)
		rc = td_dict_lock(d);
	if (rc < 0) {
		td_dict_free(d);
		td_buffer_unref(map);
		td__keyindex_free(&ix);
		return rc;
	}
	td_dict_free(st->dict);
	st->dict = d;
	td_buffer_unref(pk->map);
	pk->map = map;
	td__keyindex_free(&pk->ix);
	pk->ix = ix;
	pk->slot[0] = slot[0];
	pk->slot[1] = slot[1];
	pk->cur = cur;
	st->generation = slot[cur].generation;
	return TD_OK;
}

/* A regular file is a packed store (a directory, or anything else, is not). */
static bool packed_probe(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static void packed_init(td_store *st)
{
	st->pk.fd = -1;
}

static int packed_open(td_store *st)
{
	bool rw = st->writable;
	int rc;

	st->pk.fd = open(st->path, (rw ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (st->pk.fd < 0)
		return td__file_error(errno, st->path, "open");
	rc = lock_fd(st->pk.fd, false, st->path);
	if (rc < 0)
		return rc;
	rc = load(st);
	unlock_fd(st->pk.fd);
	return rc;
}

static void packed_release(td_store *st)
{
	td__packed *pk = &st->pk;

	td_buffer_unref(pk->map);
	pk->map = NULL;
	td__keyindex_free(&pk->ix);
	if (pk->fd >= 0)
		close(pk->fd);
	pk->fd = -1;
}

static uint64_t packed_generation(const td_store *st)
{
	const uint8_t *page;
	uint64_t best = 0;
	int i;

	if (!st->pk.map)
		return st->generation;
	/*
	 * Page 0 is mapped shared: a writer's slot update shows here. A slot
	 * counts when its checksum holds (a torn or half-written one does not).
	 */
	page = td_buffer_data(st->pk.map);
	for (i = 0; i < 2; i++) {
		uint8_t s[sizeof(td__pack_slot)];
		uint64_t g;

		memcpy(s, page + SLOT_OFF(i), sizeof(s));
		g = td__le64(s);
		if (g > best && XXH64(s, 56, 0) == td__le64(s + 56))
			best = g;
	}
	return best ? best : st->generation;
}

static int packed_refresh(td_store *st, bool *changed)
{
	uint64_t gen = st->generation;
	int rc;

	if (packed_generation(st) == st->generation)
		return TD_OK;
	TD_TRY(lock_fd(st->pk.fd, false, st->path));
	rc = load(st);
	unlock_fd(st->pk.fd);
	if (rc == TD_OK && changed)
		*changed = st->generation != gen;
	return rc;
}

static int packed_sync(td_store *st)
{
	if (!st->writable || !st->pk.map)
		return TD_OK;
	if (msync(td_buffer_data(st->pk.map), td_buffer_size(st->pk.map), MS_SYNC) < 0)
		return td__error_os(TD_EIO, errno, "td_store_sync: %s: msync", st->path);
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */
/* ------------------------------------------------------------------------ */

/* Give every tensor record without an extent one at *end (appended). */
static int place_new_extents(td__keyindex *ix, uint64_t *end, const char *what)
{
	uint32_t i;

	for (i = 0; i < ix->n; i++) {
		td__keyrec *r = &ix->recs[i];
		uint64_t cap;

		if (r->kind != TD_KEYINDEX_KIND_TENSOR || r->length == 0 || r->capacity)
			continue;
		cap = round_page(r->length);
		if (cap < r->length || cap > UINT64_MAX - *end)
			return td__error(TD_EOVERFLOW, "%s: the file would pass 2^64 bytes", what);
		r->offset = *end;
		r->capacity = cap;
		*end += cap;
	}
	return TD_OK;
}

/*
 * Queue the data of every record with a `src` (clearing every `src`) at
 * its extent, zero-padded to the extent's capacity: with extents placed
 * back to back from the writer's position, every byte up to the end of
 * the last one is written, which also reserves its blocks. With `zero`,
 * nothing is queued: the extents are zeroed instead where they may hold
 * bytes of a change that never committed (below `old_size`), and the
 * caller reserves them.
 */
static int write_sources(td__keyindex *ix, td__writer *w, uint64_t old_size, bool zero)
{
	uint32_t i;
	int rc = TD_OK;

	for (i = 0; i < ix->n; i++) {
		td__keyrec *r = &ix->recs[i];
		const td_tensor *src = r->src;

		r->src = NULL;
		if (rc < 0 || !src || r->length == 0)
			continue;
		if (zero) {
			rc = zero_range(w->fd, r->offset, r->capacity, old_size, w->what);
			continue;
		}
		rc = td__writer_zero_to(w, r->offset);
		if (rc == TD_OK)
			rc = td__writer_put_tensor(w, src);
		if (rc == TD_OK)
			rc = td__writer_zero(w, r->capacity - r->length);
	}
	return rc;
}

/*
 * The whole new file in one pass of vectored writes: header page, extents
 * (unless `like`: the caller reserved them), index area. Every byte
 * written is a byte reserved.
 */
static int write_file(td__keyindex *ix, int fd, const uint8_t *page, const void *ibuf, size_t ilen,
	uint64_t index_off, uint64_t end, bool like, const char *what)
{
	td__writer w;
	int rc;

	TD_TRY(td__writer_init(&w, fd, 0, what));
	rc = td__writer_put(&w, page, TD_PACK_HEADER_SIZE);
	if (rc == TD_OK)
		rc = write_sources(ix, &w, 0, like);
	if (rc == TD_OK)
		rc = like ? td__writer_seek(&w, index_off) : td__writer_zero_to(&w, index_off);
	if (rc == TD_OK)
		rc = td__writer_put(&w, ibuf, ilen);
	if (rc == TD_OK)
		rc = td__writer_zero_to(&w, end);
	if (rc == TD_OK)
		rc = td__writer_flush(&w);
	td__writer_free(&w);
	return rc;
}

/* A store handle over a new packed file (or the rebuilt state after a commit). */
static int adopt(td_store *st, td__keyindex *ix, td_buffer *map, const td__slot slot[2], int cur)
{
	td_dict *d = NULL;
	int rc = td__keyindex_to_dict(ix, map, &d, st->path);

	if (rc == TD_OK)
		rc = td_dict_lock(d);
	if (rc < 0) {
		td_dict_free(d);
		return rc;
	}
	td_dict_free(st->dict);
	st->dict = d;
	td_buffer_ref(map); /* first: `map` may be the current mapping */
	td_buffer_unref(st->pk.map);
	st->pk.map = map;
	td__keyindex_free(&st->pk.ix);
	st->pk.ix = *ix;
	memset(ix, 0, sizeof(*ix));
	st->pk.slot[0] = slot[0];
	st->pk.slot[1] = slot[1];
	st->pk.cur = cur;
	st->generation = slot[cur].generation;
	return TD_OK;
}

/* The directory of `path` (opened) and the file's base name within it. */
static int open_parent(const char *path, int *dirfd, const char **base)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	size_t len;

	*base = slash ? slash + 1 : path;
	if (!**base)
		return td__error(TD_EINVAL, "td_store_memmap: %s names a directory", path);
	len = slash ? (size_t)(slash - path) : 1;
	if (slash == path)
		len = 1;
	dir = td__strndup(slash ? path : ".", len);
	if (!dir)
		return td__error_nomem(len + 1);
	*dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd < 0) {
		int err = errno;

		td__free(dir);
		return td__file_error(err, path, "open of its directory");
	}
	td__free(dir);
	return TD_OK;
}

static int packed_memmap(td_store *st, const td_dict *src, const td_store_memmap_opts *opts)
{
	static const char fn[] = "td_store_memmap";
	const char *path = st->path;
	bool nosync = opts->sync == TD_SYNC_NONE;
	td__keyindex ix = { 0 };
	td__slot slot[2];
	td_buffer *map = NULL;
	const char *base;
	uint8_t page[TD_PACK_HEADER_SIZE];
	uint64_t end = PAGE, index_off, index_cap;
	size_t ilen;
	void *ibuf = NULL;
	char tmp[64];
	int dirfd = -1, fd = -1, rc;
	bool linked = false;

	{
		struct stat sb;

		if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
			return td__error(TD_EEXISTS, "%s: %s exists and is not a regular file", fn, path);
	}
	TD_TRY(open_parent(path, &dirfd, &base));
	rc = td__keyindex_add_dict(&ix, src, TD_KEYINDEX_NO_PARENT, "");
	if (rc == TD_OK)
		rc = place_new_extents(&ix, &end, path);
	ix.generation = 1;
	if (rc == TD_OK)
		rc = td__keyindex_size(&ix, &ilen);
	if (rc < 0)
		goto out;
	index_off = end;
	index_cap = round_page(ilen);
	end += index_cap;
	ibuf = td__malloc(ilen);
	if (!ibuf) {
		rc = td__error_nomem(ilen);
		goto out;
	}
	td__keyindex_encode(&ix, ibuf, ilen);
	memset(slot, 0, sizeof(slot));
	slot[0] = (td__slot){ 1, index_off, ilen, index_cap, end, true, true };
	encode_header(page);
	encode_slot(page + TD_PACK_SLOT_A, &slot[0]);

	rc = td__create_temp(dirfd, tmp, sizeof(tmp), &fd, path);
	if (rc < 0)
		goto out;
	/* `like` writes no extent: fallocate reserves them. Otherwise writing does. */
	if (opts->like)
		rc = reserve(fd, 0, end, path);
	if (rc == TD_OK)
		rc = write_file(&ix, fd, page, ibuf, ilen, index_off, end, opts->like, path);
	if (rc == TD_OK)
		rc = td__map_fd(&map, fd, (size_t)end, true, path);
	if (rc == TD_OK && !nosync)
		rc = sync_fd(fd, path);
	if (rc < 0)
		goto out;
	/* Publish under the final name: a link fails if the name exists. */
	if (opts->exist_ok) {
		if (renameat(dirfd, tmp, dirfd, base) < 0)
			rc = td__file_error(errno, path, "rename");
	} else if (linkat(dirfd, tmp, dirfd, base, 0) < 0) {
		rc = errno == EEXIST ?
			td__error(TD_EEXISTS, "%s: %s exists (set the option exist_ok to replace it)", fn,
				path) :
			td__file_error(errno, path, "link");
	} else {
		unlinkat(dirfd, tmp, 0);
	}
	if (rc < 0)
		goto out;
	linked = true;
	if (!nosync && fsync(dirfd) < 0) {
		rc = td__error_os(TD_EIO, errno, "%s: fsync of its directory", path);
		goto out;
	}
	st->pk.fd = fd;
	fd = -1;
	rc = adopt(st, &ix, map, slot, 0);
out:
	if (rc < 0 && fd >= 0 && !linked)
		unlinkat(dirfd, tmp, 0);
	if (fd >= 0)
		close(fd);
	td_buffer_unref(map);
	td__free(ibuf);
	td__keyindex_free(&ix);
	close(dirfd);
	return rc;
}

/*
 * Commit `ix` (the whole new index; new tensors placed from `pk` state's
 * file_length on, their data already written) as the next generation:
 * write the index into the older slot's area or a new one, sync, write
 * the older slot, sync, and rebuild the dict. `end` is the file length
 * after the new extents; `map` maps [0, end) (or NULL: mapped here).
 * Under the exclusive lock.
 */
static int commit(td_store *st, td__keyindex *ix, uint64_t end, td_buffer *map)
{
	td__packed *pk = &st->pk;
	const char *what = st->path;
	int old = !pk->cur;
	td__slot slot[2];
	uint8_t sbuf[sizeof(td__pack_slot)];
	uint64_t index_off, index_cap;
	size_t ilen;
	void *ibuf;
	td_buffer *own = NULL;
	int rc;

	ix->generation = pk->slot[pk->cur].generation + 1;
	TD_TRY(td__keyindex_size(ix, &ilen));
	if (pk->slot[old].ok && pk->slot[old].index_capacity >= ilen) {
		index_off = pk->slot[old].index_offset;
		index_cap = pk->slot[old].index_capacity;
	} else {
		index_cap = round_page(2 * (uint64_t)ilen);
		if (index_cap > UINT64_MAX - end)
			return td__error(TD_EOVERFLOW, "%s: the file would pass 2^64 bytes", what);
		index_off = end;
		end += index_cap;
		TD_TRY(reserve(pk->fd, index_off, index_cap, what));
	}
	ibuf = td__malloc(ilen);
	if (!ibuf)
		return td__error_nomem(ilen);
	td__keyindex_encode(ix, ibuf, ilen);
	rc = td__pwrite_all(pk->fd, ibuf, ilen, index_off, what);
	td__free(ibuf);
	if (rc == TD_OK)
		rc = sync_fd(pk->fd, what);
	if (rc < 0)
		return rc;
	slot[pk->cur] = pk->slot[pk->cur];
	slot[old] = (td__slot){ ix->generation, index_off, ilen, index_cap, end, true, true };
	encode_slot(sbuf, &slot[old]);
	rc = td__pwrite_all(pk->fd, sbuf, sizeof(sbuf), SLOT_OFF(old), what);
	if (rc == TD_OK)
		rc = sync_fd(pk->fd, what);
	if (rc < 0)
		return rc;
	/* Committed: from here on a failure only leaves this handle stale. */
	if (!map || td_buffer_size(map) < end) {
		rc = td__map_fd(&own, pk->fd, (size_t)end, st->writable, what);
		if (rc < 0)
			return rc;
		map = own;
	}
	rc = adopt(st, ix, map, slot, old);
	td_buffer_unref(own);
	return rc;
}

/*
 * Take the writer lock and catch up with other processes' commits. A
 * store that holds a lazy stack refuses schema changes (as a directory
 * store does): its callers check the dict, this checks the committed index.
 */
static int change_begin(td_store *st, const char *fn)
{
	uint32_t i;

	TD_TRY(lock_fd(st->pk.fd, true, st->path));
	if (packed_generation(st) != st->generation) {
		int rc = load(st);

		if (rc < 0) {
			unlock_fd(st->pk.fd);
			return rc;
		}
	}
	for (i = 0; i < st->pk.ix.n; i++)
		if (st->pk.ix.recs[i].kind == TD_KEYINDEX_KIND_LAZY) {
			unlock_fd(st->pk.fd);
			return td__error(TD_ENOTSUP,
				"%s: the store holds a lazy stack, whose schema "
				"tdstore does not change in place",
				fn);
		}
	return TD_OK;
}

/* A copy of the committed index to edit. */
static int index_copy(td__keyindex *dst, const td__keyindex *src)
{
	uint32_t i;

	memset(dst, 0, sizeof(*dst));
	dst->generation = src->generation;
	for (i = 0; i < src->n; i++) {
		int rc = td__keyindex_push(dst, &src->recs[i], NULL);

		if (rc < 0) {
			td__keyindex_free(dst);
			return rc;
		}
	}
	return TD_OK;
}

static int packed_add(td_store *st, const char *const *parts, size_t n, const td_tensor *t,
	bool copy, const char *fn)
{
	td__packed *pk = &st->pk;
	td__keyindex ix = { 0 };
	td__keyrec r;
	td__writer w = { 0 };
	uint64_t end, old_size;
	uint32_t cur = 0, at;
	size_t k;
	int rc;

	TD_TRY(change_begin(st, fn));
	rc = index_copy(&ix, &pk->ix);
	/* Walk (and create) the dicts above the leaf. */
	for (k = 0; rc == TD_OK && k + 1 < n; k++) {
		uint32_t next = td__keyindex_child(&ix, cur, parts[k]);

		if (next == TD_KEYINDEX_NO_PARENT) {
			memset(&r, 0, sizeof(r));
			r.kind = TD_KEYINDEX_KIND_DICT;
			r.parent = cur;
			r.key = (char *)parts[k];
			r.key_len = strlen(parts[k]);
			r.ndim = ix.recs[cur].ndim;
			memcpy(r.shape, ix.recs[cur].shape, sizeof(r.shape));
			rc = td__keyindex_push(&ix, &r, &next);
		} else if (ix.recs[next].kind != TD_KEYINDEX_KIND_DICT) {
			rc = td__error(TD_ETYPE, "%s: \"%s\" is not a dict", fn, parts[k]);
		}
		cur = next;
	}
	if (rc == TD_OK && td__keyindex_child(&ix, cur, parts[n - 1]) != TD_KEYINDEX_NO_PARENT)
		rc = td__error(TD_EEXISTS, "%s: key \"%s\" already exists", fn, parts[n - 1]);
	if (rc == TD_OK &&
		(t->ndim < ix.recs[cur].ndim ||
			memcmp(td_tensor_shape(t), ix.recs[cur].shape,
				(size_t)ix.recs[cur].ndim * sizeof(int64_t)) != 0))
		rc = td__error(TD_ETYPE,
			"%s: the shape of \"%s\" does not start with the batch "
			"shape",
			fn, parts[n - 1]);
	if (rc == TD_OK) {
		memset(&r, 0, sizeof(r));
		r.kind = TD_KEYINDEX_KIND_TENSOR;
		r.dtype = (uint8_t)t->dtype;
		r.ndim = (uint8_t)t->ndim;
		memcpy(r.shape, td_tensor_shape(t), (size_t)t->ndim * sizeof(int64_t));
		r.length = td_tensor_nbytes(t);
		r.parent = cur;
		r.key = (char *)parts[n - 1];
		r.key_len = strlen(parts[n - 1]);
		r.src = t;
		rc = td__keyindex_push(&ix, &r, &at);
	}
	end = pk->slot[pk->cur].file_length;
	if (rc == TD_OK)
		rc = td__fstat_regular(pk->fd, st->path, &old_size);
	if (rc == TD_OK)
		rc = place_new_extents(&ix, &end, st->path);
	/* A copy writes every byte of the new extents; zeros are reserved and cleared. */
	if (rc == TD_OK && !copy)
		rc = reserve(pk->fd, pk->slot[pk->cur].file_length, end - pk->slot[pk->cur].file_length,
			st->path);
	if (rc == TD_OK)
		rc = td__writer_init(&w, pk->fd, pk->slot[pk->cur].file_length, st->path);
	if (rc == TD_OK)
		rc = write_sources(&ix, &w, old_size, !copy);
	if (rc == TD_OK)
		rc = td__writer_flush(&w);
	td__writer_free(&w);
	if (rc == TD_OK)
		rc = commit(st, &ix, end, NULL);
	td__keyindex_free(&ix);
	unlock_fd(pk->fd);
	return rc;
}

static int packed_remove(td_store *st, const char *const *parts, size_t n, const char *fn)
{
	td__packed *pk = &st->pk;
	td__keyindex ix = { 0 };
	uint32_t at = 0;
	int rc;

	TD_TRY(change_begin(st, fn));
	rc = index_copy(&ix, &pk->ix);
	if (rc == TD_OK) {
		rc = td__keyindex_find(&ix, parts, n, &at);
		if (rc == TD_ENOTFOUND)
			rc = td__error(TD_ENOTFOUND, "%s: no key \"%s\"", fn, parts[n - 1]);
		else if (rc == TD_ETYPE)
			rc = td__error(TD_ETYPE, "%s: \"%s\" is not a dict", fn, ix.recs[at].key);
	}
	if (rc == TD_OK)
		rc = td__keyindex_remove(&ix, at);
	if (rc == TD_OK)
		rc = commit(st, &ix, pk->slot[pk->cur].file_length, pk->map);
	td__keyindex_free(&ix);
	unlock_fd(pk->fd);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Growth along dim 0                                                        */
/* ------------------------------------------------------------------------ */

/*
 * Give tensor record `r` the dim 0 `new0`: in place when its extent has
 * the room (the new bytes zeroed), else in a new extent appended at *end
 * holding the old bytes (read through the current mapping) and zeros.
 * `old_size` is the file's size before this change (bytes past it read as
 * zeros already).
 */
static int grow_record(td_store *st, td__keyrec *r, int64_t new0, uint64_t *end, uint64_t old_size,
	const char *fn)
{
	td__packed *pk = &st->pk;
	uint64_t old_len = r->length, new_len, cap;
	int64_t numel = 1;
	size_t nb;
	int d;

	r->shape[0] = new0;
	for (d = 0; d < r->ndim; d++)
		if (!td__mul_i64(numel, r->shape[d], &numel))
			return td__error(TD_EOVERFLOW, "%s: \"%s\" would hold too many elements", fn, r->key);
	if (!td__mul_size((size_t)numel, td_dtype_size(r->dtype), &nb) || nb > (size_t)PTRDIFF_MAX)
		return td__error(TD_EOVERFLOW, "%s: the byte size of \"%s\" overflows", fn, r->key);
	new_len = nb;
	/* The data changes: a checksum of the old bytes no longer holds. */
	r->flags &= (uint8_t)~TD_KEYINDEX_REC_CHECKSUM;
	r->checksum = 0;
	if (new_len <= r->capacity) {
		if (new_len > old_len)
			TD_TRY(
				zero_range(pk->fd, r->offset + old_len, new_len - old_len, UINT64_MAX, st->path));
		r->length = new_len;
		return TD_OK;
	}
	cap = round_page(new_len);
	if (cap < new_len || cap > UINT64_MAX - *end)
		return td__error(TD_EOVERFLOW, "%s: the file would pass 2^64 bytes", fn);
	TD_TRY(reserve(pk->fd, *end, cap, st->path));
	if (old_len)
		TD_TRY(td__pwrite_all(pk->fd, (const char *)td_buffer_data(pk->map) + r->offset,
			(size_t)old_len, *end, st->path));
	TD_TRY(zero_range(pk->fd, *end + old_len, cap - old_len, old_size, st->path));
	r->offset = *end;
	r->capacity = cap;
	r->length = new_len;
	*end += cap;
	return TD_OK;
}

/* Grow an array of strings to `new_size` rows: the new elements are empty strings. */
static int grow_strings(td__keyrec *r, int64_t new_size, const char *fn)
{
	int64_t row = 1, extra;
	size_t len;
	char *text;
	uint8_t d;

	for (d = 1; d < r->ndim; d++)
		if (!td__mul_i64(row, r->shape[d], &row))
			return td__error(TD_EOVERFLOW, "%s: \"%s\": too many strings", fn, r->key);
	if (!td__mul_i64(row, new_size - r->shape[0], &extra) || (uint64_t)extra > SIZE_MAX ||
		!td__add_size(r->text_len, (size_t)extra, &len) || len == SIZE_MAX)
		return td__error(TD_EOVERFLOW, "%s: \"%s\" with %lld rows: too many strings", fn, r->key,
			(long long)new_size);
	text = td__realloc(r->text, len + 1);
	if (!text)
		return td__error_nomem(len + 1);
	memset(text + r->text_len, 0, (size_t)extra + 1); /* one NUL per new (empty) string */
	r->text = text;
	r->text_len = len;
	r->shape[0] = new_size;
	return TD_OK;
}

static int packed_grow(td_store *st, int64_t new_size, const char *fn)
{
	td__packed *pk = &st->pk;
	td__keyindex ix = { 0 };
	uint64_t end, old_size;
	uint32_t i;
	int rc;

	TD_TRY(change_begin(st, fn));
	rc = index_copy(&ix, &pk->ix);
	if (rc == TD_OK && ix.recs[0].ndim == 0)
		rc = td__error(TD_EINVAL, "%s: the store has no batch dims to grow", fn);
	else if (rc == TD_OK && new_size < ix.recs[0].shape[0])
		rc = td__error(TD_EINVAL,
			"%s: %lld rows is fewer than the %lld the store has "
			"(stores never shrink)",
			fn, (long long)new_size, (long long)ix.recs[0].shape[0]);
	if (rc < 0 || new_size == ix.recs[0].shape[0])
		goto out;
	end = pk->slot[pk->cur].file_length;
	rc = td__fstat_regular(pk->fd, st->path, &old_size);
	/* Every dict and every tensor has the root's dim 0 as its own dim 0. */
	for (i = 0; rc == TD_OK && i < ix.n; i++) {
		td__keyrec *r = &ix.recs[i];

		if (r->kind == TD_KEYINDEX_KIND_DICT)
			r->shape[0] = new_size;
		else if (r->kind == TD_KEYINDEX_KIND_TENSOR)
			rc = grow_record(st, r, new_size, &end, old_size, fn);
		else if (r->kind == TD_KEYINDEX_KIND_STRINGS)
			rc = grow_strings(r, new_size, fn);
	}
	if (rc == TD_OK)
		rc = commit(st, &ix, end, NULL);
out:
	td__keyindex_free(&ix);
	unlock_fd(pk->fd);
	return rc;
}

static int packed_grow_leaf(td_store *st, const char *const *parts, size_t n, int64_t new_size,
	const char *fn)
{
	td__packed *pk = &st->pk;
	td__keyindex ix = { 0 };
	uint64_t end, old_size;
	uint32_t at = 0;
	td__keyrec *r;
	int rc;

	TD_TRY(change_begin(st, fn));
	rc = index_copy(&ix, &pk->ix);
	if (rc == TD_OK) {
		rc = td__keyindex_find(&ix, parts, n, &at);
		if (rc == TD_ENOTFOUND)
			rc = td__error(TD_ENOTFOUND, "%s: no key \"%s\"", fn, parts[n - 1]);
		else if (rc == TD_ETYPE)
			rc = td__error(TD_ETYPE, "%s: \"%s\" is not a dict", fn, ix.recs[at].key);
	}
	if (rc < 0)
		goto out;
	r = &ix.recs[at];
	if (r->kind != TD_KEYINDEX_KIND_TENSOR)
		rc = td__error(TD_ETYPE, "%s: \"%s\" is a %s, not a tensor", fn, r->key,
			r->kind == TD_KEYINDEX_KIND_DICT ? "dict" : "non-tensor value");
	else if (ix.recs[r->parent].ndim > 0)
		rc = td__error(TD_EINVAL,
			"%s: dim 0 of \"%s\" is a batch dim of its dict: grow the "
			"store with td_store_grow",
			fn, r->key);
	else if (r->ndim == 0)
		rc = td__error(TD_EINVAL, "%s: \"%s\" has no dims", fn, r->key);
	else if (new_size < r->shape[0])
		rc = td__error(TD_EINVAL, "%s: %lld rows is fewer than the %lld \"%s\" has", fn,
			(long long)new_size, (long long)r->shape[0], r->key);
	if (rc < 0 || new_size == r->shape[0])
		goto out;
	end = pk->slot[pk->cur].file_length;
	rc = td__fstat_regular(pk->fd, st->path, &old_size);
	if (rc == TD_OK)
		rc = grow_record(st, r, new_size, &end, old_size, fn);
	if (rc == TD_OK)
		rc = commit(st, &ix, end, NULL);
out:
	td__keyindex_free(&ix);
	unlock_fd(pk->fd);
	return rc;
}

const td__placement_ops td__packed_ops = {
	.placement = TD_PLACEMENT_PACKED,
	.probe = packed_probe,
	.init = packed_init,
	.release = packed_release,
	.open = packed_open,
	.memmap = packed_memmap,
	.sync = packed_sync,
	.generation = packed_generation,
	.refresh = packed_refresh,
	.add = packed_add,
	.remove = packed_remove,
	.grow = packed_grow,
	.grow_leaf = packed_grow_leaf,
};
