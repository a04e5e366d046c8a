/* SPDX-License-Identifier: MIT */
/*
 * shm_arena.c - the shared-memory arena: small anonymous shared tensors are
 * blocks of a few memfd-backed chunks instead of one memfd each (one memfd
 * costs memfd_create + fallocate + mmap + munmap + close, ~20 us). Blocks
 * are powers of two from 64 bytes to the arena's limit; each chunk holds
 * blocks of one size. The public rules (fork, fd passing, tuning) are in
 * include/tdstore/mmap.h and td_shm_arena(3).
 *
 * Invariants:
 * - Every chunk's bookkeeping lives in a private anonymous mapping of its
 *   own, never in the shared pages (another process that maps the memfd
 *   may write anywhere in it) and never in the pluggable allocator (a
 *   cached chunk outlives every tensor, and td_set_allocator() may change
 *   the allocator when no tensor is alive).
 * - A size class's lock guards its chunks, their counts and free stacks.
 *   The fork handlers take every lock, so a child never inherits one held.
 * - A chunk made before the latest fork() is stale, in both processes: its
 *   blocks are never handed out again (the other process may still use
 *   them); it is unmapped when this process releases its last block.
 * - An exported block (td_shm_tensor_fd()) is never handed out again: the
 *   receiver may still use it.
 */
#include "store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIN_SHIFT 6  /* 64-byte blocks: the alignment of every block */
#define MAX_SHIFT 20 /* TD_SHM_ARENA_MAX_LIMIT */
#define NCLASSES (MAX_SHIFT - MIN_SHIFT + 1)
/* A chunk has at least CHUNK_MIN_BYTES and at least CHUNK_MIN_BLOCKS blocks. */
#define CHUNK_MIN_BYTES ((size_t)256 << 10)
#define CHUNK_MIN_BLOCKS 16u
#define ENV_MAX "TDSTORE_SHM_ARENA_MAX"

_Static_assert(((size_t)1 << MAX_SHIFT) == TD_SHM_ARENA_MAX_LIMIT, "limit and classes differ");
_Static_assert(((size_t)1 << MIN_SHIFT) >= TD_BUFFER_ALIGNMENT, "blocks under-aligned");

typedef struct chunk chunk;

/* The chunks of one block size. */
typedef struct size_class {
	pthread_mutex_t lock;
	chunk *avail;   /* chunks with a block to hand out, most recently freed first */
	unsigned epoch; /* arena_epoch when `avail` was last purged of stale chunks */
	size_t nempty;  /* chunks in `avail` with no block in use */
	size_t nchunks; /* chunks mapped (listed, full or stale) */
	size_t bytes;   /* their shared bytes */
	size_t live;    /* blocks in use */
} size_class;

/* One memfd chunk; this header is the start of its private bookkeeping mapping. */
struct chunk {
	chunk *prev, *next; /* in cls->avail while `listed` */
	size_class *cls;
	char *base;         /* the shared mapping of the whole memfd */
	size_t bytes;       /* its size: nblocks << shift */
	size_t meta_bytes;  /* size of this private mapping */
	uint64_t *exported; /* nblocks bits: blocks passed to td_shm_tensor_fd() */
	uint32_t *free_idx; /* stack of released blocks, reused first */
	int fd;
	unsigned epoch; /* arena_epoch when made; stale once it differs */
	unsigned shift; /* block size 1 << shift */
	uint32_t nblocks;
	uint32_t fresh; /* blocks [fresh, nblocks) were never handed out: zero */
	uint32_t nfree; /* entries in free_idx */
	uint32_t live;  /* blocks in use */
	bool listed;
};

static size_class classes[NCLASSES];
static unsigned arena_epoch; /* bumped by fork() in parent and child; under every lock */
static _Atomic size_t arena_max;
static _Atomic bool arena_ready; /* arena_init() ran */
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;

/* ------------------------------------------------------------------------ */
/* Setup and fork                                                            */
/* ------------------------------------------------------------------------ */

static void fork_prepare(void)
{
	size_t i;

	for (i = 0; i < NCLASSES; i++)
		pthread_mutex_lock(&classes[i].lock);
}

static void fork_done(void)
{
	size_t i;

	arena_epoch++;
	for (i = NCLASSES; i-- > 0;)
		pthread_mutex_unlock(&classes[i].lock);
}

/* TDSTORE_SHM_ARENA_MAX: decimal bytes, clamped to the limit; else the default. */
static size_t env_max(void)
{
	const char *s = getenv(ENV_MAX);
	unsigned long long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return TD_SHM_ARENA_MAX_DEFAULT;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end != '\0')
		return TD_SHM_ARENA_MAX_DEFAULT;
	if (errno == ERANGE || v > TD_SHM_ARENA_MAX_LIMIT)
		return TD_SHM_ARENA_MAX_LIMIT;
	return (size_t)v;
}

static void arena_init(void)
{
	size_t i;

	for (i = 0; i < NCLASSES; i++)
		pthread_mutex_init(&classes[i].lock, NULL);
	/* Without fork handlers a child could hand out its parent's blocks: off. */
	if (pthread_atfork(fork_prepare, fork_done, fork_done) != 0)
		atomic_store(&arena_max, 0);
	else
		atomic_store(&arena_max, env_max());
	atomic_store(&arena_ready, true);
}

/* ------------------------------------------------------------------------ */
/* Chunks                                                                    */
/* ------------------------------------------------------------------------ */

static void link_chunk(size_class *cls, chunk *c)
{
	c->prev = NULL;
	c->next = cls->avail;
	if (cls->avail)
		cls->avail->prev = c;
	cls->avail = c;
	c->listed = true;
}

static void unlink_chunk(size_class *cls, chunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		cls->avail = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	c->listed = false;
}

static bool has_block(const chunk *c)
{
	return c->nfree > 0 || c->fresh < c->nblocks;
}

/* Unmap a chunk with no block in use (unlinked first when listed). */
static void chunk_free(size_class *cls, chunk *c)
{
	if (c->listed)
		unlink_chunk(cls, c);
	cls->nchunks--;
	cls->bytes -= c->bytes;
	munmap(c->base, c->bytes);
	close(c->fd);
	munmap(c, c->meta_bytes);
}

/* The memfd of a new chunk, its pages allocated (no SIGBUS on first touch). */
static int chunk_memfd(size_t bytes, int *fd_out, const char *fn)
{
	int fd, rc;

	fd = memfd_create("tdstore-arena", MFD_CLOEXEC);
	if (fd < 0)
		return td__error_os(td__status_from_errno(errno), errno,
			"%s: shared-memory arena: memfd_create", fn);
	rc = posix_fallocate(fd, 0, (off_t)bytes);
	if (rc != 0) {
		close(fd);
		return td__error_os(td__status_from_errno(rc), rc,
			"%s: shared-memory arena: reserving a chunk of %zu bytes", fn, bytes);
	}
	*fd_out = fd;
	return TD_OK;
}

/* A new chunk of blocks of 1 << shift bytes, listed in `cls` (lock held). */
static int chunk_new(size_class *cls, unsigned shift, chunk **out, const char *fn)
{
	uint32_t nblocks = (uint32_t)(CHUNK_MIN_BYTES >> shift);
	size_t bytes, words, meta;
	void *base, *m;
	chunk *c;
	int fd = -1, err;

	if (nblocks < CHUNK_MIN_BLOCKS)
		nblocks = CHUNK_MIN_BLOCKS;
	bytes = (size_t)nblocks << shift;
	words = ((size_t)nblocks + 63) / 64;
	meta = sizeof(chunk) + words * sizeof(uint64_t) + (size_t)nblocks * sizeof(uint32_t);
	TD_TRY(chunk_memfd(bytes, &fd, fn));
	base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		err = errno;
		close(fd);
		return td__error_os(td__status_from_errno(err), err,
			"%s: shared-memory arena: mmap of %zu bytes", fn, bytes);
	}
	/* Anonymous pages read as zeros: every count and bit starts at 0. */
	m = mmap(NULL, meta, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		err = errno;
		munmap(base, bytes);
		close(fd);
		return td__error_os(td__status_from_errno(err), err,
			"%s: shared-memory arena: mmap of %zu bytes", fn, meta);
	}
	c = m;
	c->cls = cls;
	c->base = base;
	c->bytes = bytes;
	c->meta_bytes = meta;
	c->exported = (uint64_t *)(c + 1);
	c->free_idx = (uint32_t *)(c->exported + words);
	c->fd = fd;
	c->epoch = arena_epoch;
	c->shift = shift;
	c->nblocks = nblocks;
	link_chunk(cls, c);
	cls->nempty++;
	cls->nchunks++;
	cls->bytes += bytes;
	*out = c;
	return TD_OK;
}

/* After a fork: no block of an older chunk is handed out again (lock held). */
static void drop_stale(size_class *cls)
{
	chunk *c, *next;

	for (c = cls->avail; c; c = next) {
		next = c->next;
		unlink_chunk(cls, c);
		if (c->live == 0)
			chunk_free(cls, c);
	}
	cls->nempty = 0;
	cls->epoch = arena_epoch;
}

/* ------------------------------------------------------------------------ */
/* Blocks                                                                    */
/* ------------------------------------------------------------------------ */

/* Hand out a block of the listed chunk `c` (lock held); true when it reads as zeros. */
static bool take_block(size_class *cls, chunk *c, uint32_t *idx_out)
{
	bool zero = c->nfree == 0;

	*idx_out = zero ? c->fresh++ : c->free_idx[--c->nfree];
	if (c->live++ == 0)
		cls->nempty--;
	cls->live++;
	if (!has_block(c))
		unlink_chunk(cls, c);
	return zero;
}

/* Release hook of arena buffers: the block goes back to its chunk. */
static void arena_release(void *data, size_t nbytes, void *payload)
{
	chunk *c = payload;
	size_class *cls = c->cls;
	uint32_t idx = (uint32_t)(((char *)data - c->base) >> c->shift);
	bool stale;

	(void)nbytes;
	pthread_mutex_lock(&cls->lock);
	stale = c->epoch != arena_epoch;
	c->live--;
	cls->live--;
	if (!stale && !(c->exported[idx / 64] & ((uint64_t)1 << (idx % 64)))) {
		c->free_idx[c->nfree++] = idx;
		if (!c->listed)
			link_chunk(cls, c);
	}
	if (c->live == 0) {
		/* Keep one empty chunk per size for the next tensor; unmap the rest. */
		if (stale || !has_block(c) || cls->nempty > 0)
			chunk_free(cls, c);
		else
			cls->nempty++;
	}
	pthread_mutex_unlock(&cls->lock);
}

int td__shm_arena_alloc(td_buffer **out, size_t nbytes, bool *zeroed_out, const char *fn)
{
	td_buffer_wrap_opts opts = TD_BUFFER_WRAP_OPTS_INIT;
	unsigned shift;
	size_class *cls;
	uint32_t idx;
	chunk *c;
	void *data;
	int rc;

	pthread_once(&arena_once, arena_init);
	if (nbytes == 0 || nbytes > atomic_load_explicit(&arena_max, memory_order_relaxed))
		return 0;
	shift = nbytes <= ((size_t)1 << MIN_SHIFT) ?
		MIN_SHIFT :
		(unsigned)(64 - __builtin_clzll((unsigned long long)nbytes - 1));
	cls = &classes[shift - MIN_SHIFT];
	pthread_mutex_lock(&cls->lock);
	if (TD_UNLIKELY(cls->epoch != arena_epoch))
		drop_stale(cls);
	c = cls->avail;
	if (!c) {
		rc = chunk_new(cls, shift, &c, fn);
		if (rc < 0) {
			pthread_mutex_unlock(&cls->lock);
			return rc;
		}
	}
	*zeroed_out = take_block(cls, c, &idx);
	pthread_mutex_unlock(&cls->lock);
	data = c->base + ((size_t)idx << shift);
	opts.memory = TD_MEMORY_SHM;
	opts.release = arena_release;
	opts.payload = c;
	rc = td_buffer_wrap(out, data, nbytes, &opts);
	if (rc < 0)
		arena_release(data, nbytes, c);
	return rc < 0 ? rc : 1;
}

bool td__shm_arena_export(const td_buffer *buf, int *fd_out, uint64_t *offset_out)
{
	void *payload;
	chunk *c;
	size_t off;
	uint32_t idx;

	if (!td__buffer_hooked(buf, arena_release, &payload))
		return false;
	c = payload;
	off = (size_t)((char *)td_buffer_data(buf) - c->base);
	idx = (uint32_t)(off >> c->shift);
	pthread_mutex_lock(&c->cls->lock);
	c->exported[idx / 64] |= (uint64_t)1 << (idx % 64);
	pthread_mutex_unlock(&c->cls->lock);
	*fd_out = c->fd;
	*offset_out = (uint64_t)off;
	return true;
}

/* ------------------------------------------------------------------------ */
/* Public tuning                                                             */
/* ------------------------------------------------------------------------ */

int td_shm_arena_set_max(size_t max_bytes)
{
	pthread_once(&arena_once, arena_init);
	if (max_bytes > TD_SHM_ARENA_MAX_LIMIT)
		return td__error(TD_EINVAL, "td_shm_arena_set_max: %zu bytes is above the limit %zu",
			max_bytes, (size_t)TD_SHM_ARENA_MAX_LIMIT);
	atomic_store(&arena_max, max_bytes);
	return TD_OK;
}

/* Unmap the chunks of `cls` with no block in use (lock held). */
static void trim_class(size_class *cls)
{
	chunk *c, *next;

	if (cls->epoch != arena_epoch)
		drop_stale(cls);
	for (c = cls->avail; c; c = next) {
		next = c->next;
		if (c->live == 0)
			chunk_free(cls, c);
	}
	cls->nempty = 0;
}

void td_shm_arena_trim(void)
{
	size_t i;

	pthread_once(&arena_once, arena_init);
	for (i = 0; i < NCLASSES; i++) {
		pthread_mutex_lock(&classes[i].lock);
		trim_class(&classes[i]);
		pthread_mutex_unlock(&classes[i].lock);
	}
}

int td_shm_arena_stat(td_shm_arena_stats *out)
{
	size_t i;

	if (!out)
		return td__error(TD_EINVAL, "td_shm_arena_stat: NULL out");
	if (out->version != TD_SHM_ARENA_STATS_VERSION)
		return td__error(TD_EINVAL, "td_shm_arena_stat: version %u, expected %u", out->version,
			TD_SHM_ARENA_STATS_VERSION);
	pthread_once(&arena_once, arena_init);
	out->max_bytes = atomic_load(&arena_max);
	out->chunks = out->chunk_bytes = out->blocks = out->cached_chunks = 0;
	for (i = 0; i < NCLASSES; i++) {
		size_class *cls = &classes[i];

		pthread_mutex_lock(&cls->lock);
		if (cls->epoch != arena_epoch)
			drop_stale(cls);
		out->chunks += cls->nchunks;
		out->chunk_bytes += cls->bytes;
		out->blocks += cls->live;
		out->cached_chunks += cls->nempty;
		pthread_mutex_unlock(&cls->lock);
	}
	return TD_OK;
}

/*
 * At exit or unload: unmap the cached empty chunks (and close their
 * memfds). A size class whose lock another thread still holds is skipped
 * rather than waited for: the kernel unmaps everything at exit anyway.
 */
__attribute__((destructor)) static void arena_fini(void)
{
	size_t i;

	if (!atomic_load(&arena_ready))
		return;
	for (i = 0; i < NCLASSES; i++) {
		if (pthread_mutex_trylock(&classes[i].lock) != 0)
			continue;
		trim_class(&classes[i]);
		pthread_mutex_unlock(&classes[i].lock);
	}
}
