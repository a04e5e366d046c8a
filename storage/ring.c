/* SPDX-License-Identifier: MIT */
/*
 * ring.c - ring buffers over a store: creating and opening one (the store
 * directory plus its ring file `.tdstore-ring`, doc/format.md section 5),
 * validating the ring file as untrusted input, clear, reclaim and the
 * figures. Writing and reading rows are in ring_io.c, the sum-tree in
 * ring_prio.c, what every call does with its handle (writer slots, fork,
 * the generator) in ring_handle.c.
 */
#include "ring_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* ------------------------------------------------------------------------ */
/* Layout and schema                                                         */
/* ------------------------------------------------------------------------ */

typedef struct layout {
	uint64_t seq_offset, tree_offset, tree_leaves, file_size;
} layout;

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* The layout of a ring file for `capacity` rows (doc/format.md 5.1). */
static void compute_layout(uint64_t capacity, bool prioritized, layout *l)
{
	uint64_t end;

	l->seq_offset = TD_RING_SEQ_OFFSET;
	end = l->seq_offset + capacity * 8;
	l->tree_offset = 0;
	l->tree_leaves = 0;
	if (prioritized) {
		uint64_t p = 1;

		while (p < capacity)
			p <<= 1;
		l->tree_leaves = p;
		l->tree_offset = align_up(end, 64);
		end = l->tree_offset + 2 * p * 8;
	}
	l->file_size = align_up(end, 4096);
}

static void hash_u32(XXH64_hash_t *h, uint32_t v)
{
	unsigned char b[4] = { (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
		(unsigned char)(v >> 24) };

	*h = XXH64(b, sizeof(b), *h);
}

static void hash_str(XXH64_hash_t *h, const char *s)
{
	size_t len = strlen(s);

	hash_u32(h, (uint32_t)len);
	*h = XXH64(s, len, *h);
}

/* Chain one leaf into the schema hash (doc/format.md 5.2). */
static void hash_leaf(XXH64_hash_t *h, const td_item *it, const td__ring_leaf *l)
{
	size_t i;

	hash_u32(h, (uint32_t)it->depth);
	for (i = 0; i < it->depth; i++)
		hash_str(h, it->path[i]);
	hash_str(h, td_dtype_torch_name(l->dtype));
	hash_u32(h, (uint32_t)l->row_ndim);
	for (i = 0; i < (size_t)l->row_ndim; i++) {
		uint64_t d = (uint64_t)l->row_shape[i];

		hash_u32(h, (uint32_t)d);
		hash_u32(h, (uint32_t)(d >> 32));
	}
}

static void leaves_free(td_ring *r)
{
	size_t i;

	for (i = 0; i < r->nleaves; i++) {
		td_key_free(r->leaves[i].key);
		td_tensor_release(&r->leaves[i].whole);
	}
	td__free(r->leaves);
	td__free(r->ptrs);
	td__free((void *)r->tens);
	r->leaves = NULL;
	r->ptrs = NULL;
	r->tens = NULL;
	r->nleaves = 0;
}

/* Describe one leaf of the store's dict (tensor [capacity] + row shape). */
static int leaf_init(td__ring_leaf *l, const td_item *it, uint64_t capacity, const char *what)
{
	const td_tensor *t = &it->value->tensor;
	int rc;

	if (it->value->kind != TD_VALUE_TENSOR)
		return td__error(TD_ECORRUPT, "%s: leaf '%s' is not a tensor", what, it->key);
	if (t->ndim < 1 || (uint64_t)td_tensor_shape(t)[0] != capacity || !td_tensor_is_contiguous(t) ||
		td_tensor_nbytes(t) == 0 || !td_tensor_data(t))
		return td__error(TD_ECORRUPT, "%s: leaf '%s' does not hold %llu rows", what, it->key,
			(unsigned long long)capacity);
	rc = td_key_from_path(&l->key, it->path, it->depth);
	if (rc < 0)
		return rc;
	l->dtype = t->dtype;
	l->row_ndim = t->ndim - 1;
	memcpy(l->row_shape, td_tensor_shape(t) + 1, sizeof(int64_t) * (size_t)l->row_ndim);
	l->row_bytes = td_tensor_nbytes(t) / capacity;
	l->base = td_tensor_data(t);
	td_tensor_ref(&l->whole, t);
	return TD_OK;
}

/*
 * Build r->leaves from the store's dict and compute the schema hash, the
 * leaf count and the row size that the ring file must agree with.
 */
static int load_leaves(td_ring *r, uint64_t capacity, uint64_t *hash, uint64_t *row_bytes,
	const char *what)
{
	const td_dict *d = td_store_dict(r->store);
	XXH64_hash_t h = 0;
	td_dict_iter *iter;
	td_item it;
	size_t n = 0, cap = 0, bytes;
	int rc;

	*row_bytes = 0;
	/* A lazy stack's leaves are made by stacking: rows written there would be lost. */
	rc = td__holds_lazy(d);
	if (rc < 0)
		return rc;
	if (rc)
		return td__error(TD_ECORRUPT,
			"%s: the ring's store holds a lazy stack, not one "
			"mapped leaf per key",
			what);
	TD_TRY(td_dict_iter_new(&iter, d, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY));
	while ((rc = td_dict_iter_next(&it, iter)) == 1) {
		if (n == cap) {
			td__ring_leaf *nl;

			cap = cap ? cap * 2 : 8;
			if (!td__mul_size(cap, sizeof(*nl), &bytes) || !(nl = td__realloc(r->leaves, bytes))) {
				rc = td__error_nomem(cap * sizeof(*nl));
				break;
			}
			r->leaves = nl;
		}
		memset(&r->leaves[n], 0, sizeof(r->leaves[n]));
		r->leaves[n].whole = (td_tensor)TD_TENSOR_INIT;
		rc = leaf_init(&r->leaves[n], &it, capacity, what);
		if (rc < 0)
			break;
		r->nleaves = ++n;
		hash_leaf(&h, &it, &r->leaves[n - 1]);
		*row_bytes += r->leaves[n - 1].row_bytes;
	}
	td_dict_iter_free(iter);
	if (rc < 0)
		return rc;
	if (n == 0)
		return td__error(TD_ECORRUPT, "%s: the store has no tensor leaf", what);
	r->ptrs = td__calloc(n, sizeof(*r->ptrs));
	r->tens = td__calloc(n, sizeof(*r->tens));
	if (!r->ptrs || !r->tens)
		return td__error_nomem(n * sizeof(*r->ptrs));
	*hash = h;
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Open                                                                      */
/* ------------------------------------------------------------------------ */

/* Validate the static header against the file's size (doc/format.md 5.7). */
static int check_header(const td__ring_header *h, uint64_t fsize, const char *what)
{
	layout l;

	if (memcmp(h->magic, TD_RING_MAGIC, sizeof(h->magic)) != 0)
		return td__error(TD_ECORRUPT, "%s: not a tdstore ring file (bad magic)", what);
	if (h->version != TD_RING_VERSION)
		return td__error(TD_EVERSION, "%s: ring file version %u, this library reads %u", what,
			(unsigned)h->version, TD_RING_VERSION);
	if (h->checksum != XXH64(h, offsetof(td__ring_header, checksum), 0))
		return td__error(TD_ECORRUPT, "%s: header checksum mismatch", what);
	if (h->header_size != TD_RING_HEADER_SIZE || (h->flags & ~TD_RING_F_PRIORITIZED) ||
		h->reserved0 || !td__all_zero(h->reserved, sizeof(h->reserved)))
		return td__error(TD_ECORRUPT, "%s: bad header size, flags or reserved field", what);
	if (h->capacity < 1 || h->capacity > TD_RING_MAX_CAPACITY)
		return td__error(TD_ECORRUPT, "%s: capacity %llu out of range", what,
			(unsigned long long)h->capacity);
	compute_layout(h->capacity, h->flags & TD_RING_F_PRIORITIZED, &l);
	if (h->writer_slots != TD_RING_WRITER_SLOTS || h->writers_offset != TD_RING_WRITERS_OFFSET ||
		h->seq_offset != l.seq_offset || h->tree_offset != l.tree_offset ||
		h->tree_leaves != l.tree_leaves || h->file_size != l.file_size)
		return td__error(TD_ECORRUPT, "%s: layout does not match a capacity of %llu rows", what,
			(unsigned long long)h->capacity);
	if (fsize < h->file_size)
		return td__error(TD_ECORRUPT, "%s: %llu bytes, shorter than its %llu-byte layout", what,
			(unsigned long long)fsize, (unsigned long long)h->file_size);
	if (h->file_size > SIZE_MAX)
		return td__error(TD_EOVERFLOW, "%s: too large to map", what);
	return TD_OK;
}

static void ring_free(td_ring *r)
{
	if (!r)
		return;
	td__ring_release_slot(r);
	leaves_free(r);
	if (r->map)
		munmap(r->map, r->map_len);
	if (r->fd >= 0)
		close(r->fd);
	td__free(r->set);
	td__free(r);
}

static int map_ring_file(td_ring *r, int dirfd, const char *what)
{
	td__ring_header h;
	uint64_t fsize;
	ssize_t got;
	void *p;

	r->fd = openat(dirfd, TD_RING_NAME, (r->writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC);
	if (r->fd < 0)
		return td__file_error(errno, what, "open");
	TD_TRY(td__fstat_regular(r->fd, what, &fsize));
	if (fsize < TD_RING_SEQ_OFFSET)
		return td__error(TD_ECORRUPT, "%s: %llu bytes, too short for a ring file", what,
			(unsigned long long)fsize);
	got = pread(r->fd, &h, sizeof(h), 0);
	if (got != (ssize_t)sizeof(h))
		return td__error_os(TD_EIO, got < 0 ? errno : EIO, "%s: read", what);
	TD_TRY(check_header(&h, fsize, what));
	p = mmap(NULL, (size_t)h.file_size, r->writable ? PROT_READ | PROT_WRITE : PROT_READ,
		MAP_SHARED, r->fd, 0);
	if (p == MAP_FAILED)
		return td__error_os(td__status_from_errno(errno), errno, "%s: mmap", what);
	r->map = p;
	r->map_len = (size_t)h.file_size;
	/* The mapping is page-aligned and every offset a multiple of 64 (3.1). */
	r->hdr = (const td__ring_header *)(void *)r->map;
	/* The mapping is what is used from now on: check it holds what was validated. */
	if (memcmp(r->hdr, &h, sizeof(h)) != 0)
		return td__error(TD_ECORRUPT, "%s: header changed while opening", what);
	r->live = (td__ring_live *)(void *)(r->map + TD_RING_HEADER_SIZE);
	r->writers = (td__ring_writer *)(void *)(r->map + TD_RING_WRITERS_OFFSET);
	r->seq = (_Atomic uint64_t *)(void *)(r->map + h.seq_offset);
	r->tree = h.tree_offset ? (_Atomic uint64_t *)(void *)(r->map + h.tree_offset) : NULL;
	r->capacity = h.capacity;
	r->tree_leaves = h.tree_leaves;
	return TD_OK;
}

static int open_impl(td_ring **out, const char *path, bool writable, const char *fn)
{
	td_store_open_opts so = TD_STORE_OPEN_OPTS_INIT;
	char what[4096];
	uint64_t hash, row_bytes;
	td_ring *r;
	int dirfd, rc;

	snprintf(what, sizeof(what), "%s/" TD_RING_NAME, path);
	r = td__calloc(1, sizeof(*r));
	if (!r)
		return td__error_nomem(sizeof(*r));
	r->fd = -1;
	r->wslot = -1;
	r->writable = writable;
	rc = td__ring_own_init(r);
	if (rc < 0) {
		td__free(r);
		return rc;
	}
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		rc = td__file_error(errno, path, "open");
		goto fail;
	}
	rc = map_ring_file(r, dirfd, what);
	close(dirfd);
	if (rc < 0)
		goto fail;
	so.writable = writable;
	rc = td_store_open(&r->store, path, &so);
	if (rc < 0)
		goto fail;
	rc = load_leaves(r, r->capacity, &hash, &row_bytes, what);
	if (rc < 0)
		goto fail;
	if (hash != r->hdr->schema_hash || r->nleaves != r->hdr->nleaves ||
		row_bytes != r->hdr->row_bytes) {
		rc = td__error(TD_ECORRUPT, "%s: the store's leaves do not match the ring's rows", what);
		goto fail;
	}
	if (r->writable) {
		rc = td__ring_claim_slot(r, what);
		if (rc < 0)
			goto fail;
	}
	*out = r;
	return TD_OK;
fail:
	if (rc == TD_ENOTFOUND && r->store == NULL && r->fd < 0)
		rc = td__error(TD_ENOTFOUND, "%s: %s is not a ring (no %s)", fn, path, TD_RING_NAME);
	td_store_close(r->store);
	ring_free(r);
	return rc;
}

int td_ring_open(td_ring **out, const char *path, const td_ring_open_opts *opts)
{
	if (!out)
		return td__error(TD_EINVAL, "td_ring_open: NULL out");
	*out = NULL;
	if (!path)
		return td__error(TD_EINVAL, "td_ring_open: NULL path");
	if (opts && opts->version != TD_RING_OPEN_OPTS_VERSION)
		return td__error(TD_EINVAL, "td_ring_open: options version %u, expected %u", opts->version,
			TD_RING_OPEN_OPTS_VERSION);
	return open_impl(out, path, opts && opts->writable, "td_ring_open");
}

/* ------------------------------------------------------------------------ */
/* Create                                                                    */
/* ------------------------------------------------------------------------ */

static int like_dict(const td_dict *row, int64_t capacity, td_dict **out, size_t *ntensors);

/* Add one entry of the row template, grown to `capacity` rows, to `d`. */
static int like_entry(td_dict *d, const char *key, const td_value *v, int64_t capacity,
	size_t *ntensors)
{
	td_tensor u = TD_TENSOR_INIT, e = TD_TENSOR_INIT;
	int64_t shape[TD_MAX_DIMS];
	td_dict *sub = NULL;
	int rc;

	if (v->kind == TD_VALUE_DICT) {
		TD_TRY(like_dict(v->dict, capacity, &sub, ntensors));
		return td_dict_set_dict_take(d, key, sub);
	}
	if (v->kind != TD_VALUE_TENSOR)
		return td__error(TD_EINVAL,
			"td_ring_create: '%s': ring rows hold tensors and "
			"dicts only",
			key);
	if (td_tensor_numel(&v->tensor) == 0)
		return td__error(TD_EINVAL, "td_ring_create: '%s' has no element", key);
	if (v->tensor.ndim >= TD_MAX_DIMS)
		return td__error(TD_EINVAL, "td_ring_create: '%s' has too many dimensions", key);
	shape[0] = capacity;
	memcpy(shape + 1, td_tensor_shape(&v->tensor), sizeof(int64_t) * (size_t)v->tensor.ndim);
	/* A view of one row expanded to every row: no memory for the capacity. */
	rc = td_tensor_unsqueeze(&u, &v->tensor, 0);
	if (rc == TD_OK)
		rc = td_tensor_expand(&e, &u, v->tensor.ndim + 1, shape);
	if (rc == TD_OK)
		rc = td_dict_set_tensor_take(d, key, &e);
	td_tensor_release(&u);
	td_tensor_release(&e);
	(*ntensors)++;
	return rc;
}

/* The template with `capacity` rows: batch [capacity] + each dict's own batch. */
static int like_dict(const td_dict *row, int64_t capacity, td_dict **out, size_t *ntensors)
{
	int64_t batch[TD_MAX_DIMS];
	int bnd = td_dict_batch_ndim(row);
	size_t i, n = td_dict_items(NULL, NULL, 0, row);
	const char **keys = NULL;
	const td_value **vals = NULL;
	td_dict *d = NULL;
	int rc;

	if (td_dict_is_lazy(row))
		return td__error(TD_EINVAL,
			"td_ring_create: ring rows hold tensors and dense dicts "
			"only, not lazy stacks (td_lazy_densify() makes a dense dict)");
	if (bnd >= TD_MAX_DIMS)
		return td__error(TD_EINVAL, "td_ring_create: batch shape too long");
	batch[0] = capacity;
	memcpy(batch + 1, td_dict_batch_shape(row), sizeof(int64_t) * (size_t)bnd);
	keys = td__calloc(n ? n : 1, sizeof(*keys));
	vals = td__calloc(n ? n : 1, sizeof(*vals));
	if (!keys || !vals) {
		rc = td__error_nomem(n * sizeof(*keys));
		goto out;
	}
	td_dict_items(keys, vals, n, row);
	rc = td_dict_new(&d, bnd + 1, batch);
	for (i = 0; rc == TD_OK && i < n; i++)
		rc = like_entry(d, keys[i], vals[i], capacity, ntensors);
out:
	td__free(keys);
	td__free(vals);
	if (rc < 0)
		td_dict_free(d);
	else
		*out = d;
	return rc;
}

/*
 * Write the ring file under a temporary name and link it into place: a
 * crash leaves either no ring file or a complete one.
 */
static int write_ring_file(int dirfd, const td__ring_header *h, bool nosync, const char *what)
{
	static _Atomic unsigned counter;
	unsigned char page[TD_RING_HEADER_SIZE + sizeof(td__ring_live)];
	char tmp[64];
	int fd, rc = TD_OK;

	snprintf(tmp, sizeof(tmp), ".tdstore-tmp.%ld.ring%u", (long)getpid(),
		atomic_fetch_add(&counter, 1));
	fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
	if (fd < 0)
		return td__file_error(errno, what, "create");
	memset(page, 0, sizeof(page));
	memcpy(page, h, sizeof(*h));
	if (pwrite(fd, page, sizeof(page), 0) != (ssize_t)sizeof(page))
		rc = td__error_os(td__status_from_errno(errno), errno, "%s: write", what);
	/* Reserve every block: a full disk fails here, never with SIGBUS later. */
	if (rc == TD_OK && (errno = posix_fallocate(fd, 0, (off_t)h->file_size)) != 0)
		rc = td__error_os(td__status_from_errno(errno), errno, "%s: reserving %llu bytes", what,
			(unsigned long long)h->file_size);
	if (rc == TD_OK && h->tree_offset) {
		unsigned char one[8];

		td__ring_prio_init(one, 0);
		if (pwrite(fd, one, 8, (off_t)h->tree_offset) != 8)
			rc = td__error_os(td__status_from_errno(errno), errno, "%s: write", what);
	}
	if (rc == TD_OK && !nosync && fsync(fd) < 0)
		rc = td__error_os(TD_EIO, errno, "%s: fsync", what);
	close(fd);
	if (rc == TD_OK && linkat(dirfd, tmp, dirfd, TD_RING_NAME, 0) < 0)
		rc = errno == EEXIST ? td__error(TD_EEXISTS, "%s already exists", what) :
							   td__error_os(td__status_from_errno(errno), errno, "%s: link", what);
	unlinkat(dirfd, tmp, 0);
	if (rc == TD_OK && !nosync && fsync(dirfd) < 0)
		rc = td__error_os(TD_EIO, errno, "%s: fsync of the directory", what);
	return rc;
}

/* Check td_ring_create()'s arguments; `o`, the defaults, takes the options given. */
static int check_create_args(td_ring **out, const char *path, const td_dict *row, int64_t capacity,
	const td_ring_create_opts *opts, td_ring_create_opts *o)
{
	if (!out)
		return td__error(TD_EINVAL, "td_ring_create: NULL out");
	*out = NULL;
	if (!path || !row)
		return td__error(TD_EINVAL, "td_ring_create: NULL %s", path ? "row" : "path");
	if (opts && opts->version != TD_RING_CREATE_OPTS_VERSION)
		return td__error(TD_EINVAL, "td_ring_create: options version %u, expected %u",
			opts->version, TD_RING_CREATE_OPTS_VERSION);
	if (opts)
		*o = *opts;
	if (o->sync != TD_SYNC_FULL && o->sync != TD_SYNC_NONE)
		return td__error(TD_EINVAL, "td_ring_create: unknown sync mode %d", (int)o->sync);
	if (capacity < 1 || (uint64_t)capacity > TD_RING_MAX_CAPACITY)
		return td__error(TD_EINVAL, "td_ring_create: capacity %lld out of [1, 2^40]",
			(long long)capacity);
	if (td_dict_batch_ndim(row) != 0)
		return td__error(TD_EINVAL,
			"td_ring_create: the row template must have batch "
			"shape [] (one row)");
	return TD_OK;
}

/* Build the header of a new ring file from the store just written. */
static int make_header(td_ring *r, uint64_t capacity, bool prioritized, td__ring_header *h,
	const char *what)
{
	layout l;
	uint64_t row_bytes, hash;

	TD_TRY(load_leaves(r, capacity, &hash, &row_bytes, what));
	compute_layout(capacity, prioritized, &l);
	if (l.file_size > SIZE_MAX)
		return td__error(TD_EOVERFLOW, "%s: too large", what);
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, TD_RING_MAGIC, sizeof(h->magic));
	h->version = TD_RING_VERSION;
	h->header_size = TD_RING_HEADER_SIZE;
	h->flags = prioritized ? TD_RING_F_PRIORITIZED : 0;
	h->nleaves = (uint32_t)r->nleaves;
	h->capacity = capacity;
	h->row_bytes = row_bytes;
	h->schema_hash = hash;
	h->writer_slots = TD_RING_WRITER_SLOTS;
	h->writers_offset = TD_RING_WRITERS_OFFSET;
	h->seq_offset = l.seq_offset;
	h->tree_offset = l.tree_offset;
	h->tree_leaves = l.tree_leaves;
	h->file_size = l.file_size;
	h->checksum = XXH64(h, offsetof(td__ring_header, checksum), 0);
	return TD_OK;
}

int td_ring_create(td_ring **out, const char *path, const td_dict *row, int64_t capacity,
	const td_ring_create_opts *opts)
{
	char what[4096];
	td_ring_create_opts o = TD_RING_CREATE_OPTS_INIT;
	td_store_memmap_opts mo = TD_STORE_MEMMAP_OPTS_INIT;
	td_dict *like = NULL;
	td_ring *r = NULL;
	td__ring_header h;
	size_t ntensors = 0;
	bool nosync;
	int dirfd, rc;

	TD_TRY(check_create_args(out, path, row, capacity, opts, &o));
	nosync = o.sync == TD_SYNC_NONE;
	snprintf(what, sizeof(what), "%s/" TD_RING_NAME, path);
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd >= 0) {
		bool taken = faccessat(dirfd, "meta.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
			faccessat(dirfd, TD_RING_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0;

		close(dirfd);
		if (taken)
			return td__error(TD_EEXISTS, "td_ring_create: %s already holds a store", path);
	}
	TD_TRY(like_dict(row, capacity, &like, &ntensors));
	if (ntensors == 0) {
		td_dict_free(like);
		return td__error(TD_EINVAL, "td_ring_create: the row template has no tensor");
	}
	r = td__calloc(1, sizeof(*r));
	if (!r) {
		td_dict_free(like);
		return td__error_nomem(sizeof(*r));
	}
	r->fd = -1;
	r->wslot = -1;
	mo.like = true;
	mo.sync = o.sync;
	rc = td_store_memmap(&r->store, like, path, &mo);
	td_dict_free(like);
	if (rc == TD_OK)
		rc = make_header(r, (uint64_t)capacity, o.prioritized, &h, what);
	if (rc == TD_OK) {
		dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		rc = dirfd < 0 ? td__file_error(errno, path, "open") :
						 write_ring_file(dirfd, &h, nosync, what);
		if (dirfd >= 0)
			close(dirfd);
	}
	td_store_close(r->store);
	r->store = NULL;
	ring_free(r);
	if (rc < 0)
		return rc;
	return open_impl(out, path, true, "td_ring_create");
}

/* ------------------------------------------------------------------------ */
/* Close, accessors, figures                                                 */
/* ------------------------------------------------------------------------ */

void td_ring_close(td_ring *ring)
{
	if (!ring)
		return;
	/* A copy inherited through fork() and never used here holds no slot of its own. */
	if (ring->epoch != td__ring_epoch())
		ring->wslot = -1;
	td__ring_release_slot(ring);
	leaves_free(ring);
	td_store_close(ring->store);
	ring->store = NULL;
	ring_free(ring);
}

int td_ring_sync(td_ring *ring)
{
	if (!ring)
		return td__error(TD_EINVAL, "td_ring_sync: NULL ring");
	if (!ring->writable)
		return TD_OK;
	TD_TRY(td_store_sync(ring->store));
	if (msync(ring->map, ring->map_len, MS_SYNC) < 0 || fsync(ring->fd) < 0)
		return td__error_os(TD_EIO, errno, "td_ring_sync: %s", TD_RING_NAME);
	return TD_OK;
}

td_store *td_ring_store(td_ring *ring)
{
	return ring ? ring->store : NULL;
}

int64_t td_ring_capacity(const td_ring *ring)
{
	return ring ? (int64_t)ring->capacity : 0;
}

/* The oldest ticket that may be present, and the cursor, as one snapshot. */
static void window(const td_ring *r, uint64_t *oldest, uint64_t *head)
{
	uint64_t h = atomic_load_explicit(&r->live->cursor, memory_order_acquire);
	uint64_t c = atomic_load_explicit(&r->live->cleared, memory_order_acquire);
	uint64_t lo = h > r->capacity ? h - r->capacity : 0;

	*head = h;
	*oldest = c > lo ? c : lo;
	if (*oldest > h)
		*oldest = h; /* a garbage `cleared`: nothing is present */
}

int64_t td_ring_len(const td_ring *ring)
{
	uint64_t oldest, head;

	if (!ring)
		return 0;
	window(ring, &oldest, &head);
	return (int64_t)(head - oldest);
}

int td_ring_stat(td_ring_stats *out, const td_ring *ring)
{
	uint64_t s, oldest, head;
	uint32_t i;

	if (!ring || !out)
		return td__error(TD_EINVAL, "td_ring_stat: NULL %s", ring ? "out" : "ring");
	memset(out, 0, sizeof(*out));
	window(ring, &oldest, &head);
	out->capacity = (int64_t)ring->capacity;
	out->head = head;
	out->oldest = oldest;
	out->cleared = atomic_load_explicit(&ring->live->cleared, memory_order_acquire);
	out->len = (int64_t)(head - oldest);
	for (s = 0; s < ring->capacity; s++) {
		uint64_t w = atomic_load_explicit(&ring->seq[s], memory_order_relaxed);

		if (td__ring_sampleable(ring, w))
			out->published++;
		else if (td__seq_state(w) == TD_SEQ_WRITING)
			out->writing++;
	}
	out->reclaimed = atomic_load_explicit(&ring->live->reclaimed, memory_order_relaxed);
	out->dropped = atomic_load_explicit(&ring->live->dropped, memory_order_relaxed);
	for (i = 0; i < TD_RING_WRITER_SLOTS; i++)
		if (atomic_load_explicit(&ring->writers[i].owner, memory_order_relaxed))
			out->writers++;
	out->prioritized = ring->tree != NULL;
	return TD_OK;
}

int td_ring_batch_new(td_dict **out, const td_ring *ring, int64_t n)
{
	td_dict *d = NULL;
	size_t i;
	int rc;

	if (!out)
		return td__error(TD_EINVAL, "td_ring_batch_new: NULL out");
	*out = NULL;
	if (!ring || n < 0)
		return td__error(TD_EINVAL, "td_ring_batch_new: %s", ring ? "n < 0" : "NULL ring");
	rc = td_dict_new(&d, 1, &n);
	for (i = 0; rc == TD_OK && i < ring->nleaves; i++) {
		const td__ring_leaf *l = &ring->leaves[i];
		int64_t shape[TD_MAX_DIMS];
		td_tensor t;

		shape[0] = n;
		memcpy(shape + 1, l->row_shape, sizeof(int64_t) * (size_t)l->row_ndim);
		rc = td_tensor_zeros(&t, l->dtype, l->row_ndim + 1, shape);
		if (rc == TD_OK) {
			rc = td_dict_set_tensor_take_key(d, l->key, &t);
			td_tensor_release(&t);
		}
	}
	if (rc < 0) {
		td_dict_free(d);
		return rc;
	}
	*out = d;
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Clear and reclaim                                                         */
/* ------------------------------------------------------------------------ */

int td_ring_clear(td_ring *ring)
{
	uint64_t head, c;

	if (!ring)
		return td__error(TD_EINVAL, "td_ring_clear: NULL ring");
	if (!ring->writable)
		return td__error(TD_EREADONLY, "td_ring_clear: the ring is open read-only");
	TD_TRY(td__ring_own(ring, "td_ring_clear"));
	/* cleared only grows: raise it to the cursor. */
	head = atomic_load_explicit(&ring->live->cursor, memory_order_acquire);
	c = atomic_load_explicit(&ring->live->cleared, memory_order_relaxed);
	while (c < head &&
		!atomic_compare_exchange_weak_explicit(&ring->live->cleared, &c, head, memory_order_acq_rel,
			memory_order_relaxed))
		;
	if (ring->tree) {
		TD_TRY(td__ring_tree_lock(ring));
		td__ring_prio_zero(ring);
		td__ring_tree_unlock(ring);
	}
	return TD_OK;
}

int td_ring_reclaim(int64_t *reclaimed_out, td_ring *ring)
{
	int64_t n = 0;
	uint64_t s;

	if (reclaimed_out)
		*reclaimed_out = 0;
	if (!ring)
		return td__error(TD_EINVAL, "td_ring_reclaim: NULL ring");
	if (!ring->writable)
		return td__error(TD_EREADONLY, "td_ring_reclaim: the ring is open read-only");
	TD_TRY(td__ring_own(ring, "td_ring_reclaim"));
	for (s = 0; s < ring->capacity; s++) {
		uint64_t w = atomic_load_explicit(&ring->seq[s], memory_order_acquire);
		uint64_t tf = td__seq_tf(w);

		if (td__seq_state(w) != TD_SEQ_WRITING || tf == 0 || td__ring_owner_alive(ring, tf - 1))
			continue;
		/* Only this exact word: a writer that published meanwhile keeps its row. */
		if (atomic_compare_exchange_strong(&ring->seq[s], &w, td__seq_make(tf - 1, TD_SEQ_EMPTY)))
			n++;
	}
	td__ring_free_dead_slots(ring);
	atomic_fetch_add_explicit(&ring->live->reclaimed, (uint64_t)n, memory_order_relaxed);
	if (reclaimed_out)
		*reclaimed_out = n;
	return TD_OK;
}
