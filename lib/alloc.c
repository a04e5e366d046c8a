/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - the pluggable allocator behind every allocation of the library,
 * and a per-thread cache of small blocks in front of the default one.
 */
#include "td_internal.h"

#include <pthread.h>
#include <stdlib.h>

static void *default_malloc(size_t size, void *payload)
{
	(void)payload;
	return malloc(size);
}

static void *default_realloc(void *ptr, size_t size, void *payload)
{
	(void)payload;
	return realloc(ptr, size);
}

static void *default_aligned_alloc(size_t alignment, size_t size, void *payload)
{
	void *p = NULL;

	(void)payload;
	if (alignment < sizeof(void *))
		alignment = sizeof(void *);
	if (posix_memalign(&p, alignment, size ? size : 1) != 0)
		return NULL;
	return p;
}

static void default_free(void *ptr, void *payload)
{
	(void)payload;
	free(ptr);
}

static td_allocator allocator = { TD_ALLOCATOR_VERSION, default_malloc, default_realloc,
	default_aligned_alloc, default_free, NULL };

static bool using_default = true;

static void cache_flush(void);

int td_set_allocator(const td_allocator *alloc)
{
	cache_flush();
	if (alloc == NULL) {
		using_default = true;
		allocator.version = TD_ALLOCATOR_VERSION;
		allocator.malloc = default_malloc;
		allocator.realloc = default_realloc;
		allocator.aligned_alloc = default_aligned_alloc;
		allocator.free = default_free;
		allocator.payload = NULL;
		return TD_OK;
	}
	if (alloc->version != TD_ALLOCATOR_VERSION)
		return td__error(TD_EINVAL, "td_set_allocator: version %u, expected %u", alloc->version,
			TD_ALLOCATOR_VERSION);
	if (!alloc->malloc || !alloc->realloc || !alloc->aligned_alloc || !alloc->free)
		return td__error(TD_EINVAL, "td_set_allocator: every function must be set");
	allocator = *alloc;
	using_default = false;
	return TD_OK;
}

void *td__malloc(size_t size)
{
	return allocator.malloc(size ? size : 1, allocator.payload);
}

void *td__calloc(size_t count, size_t size)
{
	size_t total;
	void *p;

	if (!td__mul_size(count, size, &total))
		return NULL;
	p = td__malloc(total);
	if (p)
		memset(p, 0, total);
	return p;
}

void *td__realloc(void *ptr, size_t size)
{
	return allocator.realloc(ptr, size ? size : 1, allocator.payload);
}

void *td__aligned_alloc(size_t alignment, size_t size)
{
	return allocator.aligned_alloc(alignment, size ? size : 1, allocator.payload);
}

void td__free(void *ptr)
{
	if (ptr)
		allocator.free(ptr, allocator.payload);
}

void td_free(void *ptr)
{
	td__free(ptr);
}

char *td__strndup(const char *s, size_t len)
{
	char *p;

	if (len == SIZE_MAX)
		return NULL;
	p = td__malloc(len + 1);
	if (!p)
		return NULL;
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

int td__error_nomem(size_t size)
{
	return td__error(TD_ENOMEM, "out of memory allocating %zu bytes", size);
}

/* ------------------------------------------------------------------------ */
/* Per-thread cache of small blocks                                          */
/* ------------------------------------------------------------------------ */

/*
 * Operations that build or drop many dicts at once (unbind, split, batch
 * indexing of nested dicts) allocate and free bursts of same-size blocks.
 * glibc's own per-thread cache keeps 7 blocks per size (and none above
 * 1 KiB), so such bursts fall into its slower paths (measured with
 * callgrind: ~230 instructions per malloc/free pair in td_dict_unbind,
 * against ~30 here). Blocks of up to CACHE_MAX bytes, in classes of
 * CACHE_STEP bytes, are kept per thread, CACHE_BYTES in all, and only while
 * the default allocator is in use: a caller's allocator sees every
 * allocation.
 *
 * Each class is a list threaded through the free blocks themselves (the
 * first word of a cached block points at the next one), so no class has a
 * depth limit of its own: a burst of 570 dicts of one class (the unbind of
 * a lazy stack of 10 chains of 19 dicts into 3) returns to the cache whole,
 * where a fixed array of 64 slots per class sent 506 of them through
 * glibc's slow paths on every call (~300 instructions per pair).
 */
#define CACHE_STEP 64
#define CACHE_CLASSES 64
#define CACHE_MAX (CACHE_STEP * CACHE_CLASSES)
#define CACHE_BYTES (1024 * 1024)

typedef struct cached_block {
	struct cached_block *next;
} cached_block;

typedef struct block_cache {
	size_t bytes;
	cached_block *head[CACHE_CLASSES];
} block_cache;

/*
 * initial-exec: one %fs-relative load instead of a __tls_get_addr() call
 * per access (measured: ~110 instructions per dict built). It takes 8 bytes
 * of static TLS, which glibc reserves even for dlopen()ed libraries.
 */
static _Thread_local block_cache *tcache __attribute__((tls_model("initial-exec")));
static pthread_key_t tcache_key;
static pthread_once_t tcache_once = PTHREAD_ONCE_INIT;
static bool tcache_key_ok;

static inline size_t class_bytes(size_t k)
{
	return (k + 1) * CACHE_STEP;
}

/*
 * The blocks of the cached classes, whichever allocator makes them, carry
 * the pointer their memory starts at in the word just before them. The
 * fast paths never read it. A block goes back to the allocator current
 * when it is released, as td_set_allocator() documents: to a caller's
 * allocator when one is in use (td__free_small()), to the C library when
 * the cache lets it go (a full cache, cache_release(): it was released
 * into the cache while the C library's allocator was current).
 *
 * The C library's blocks of ALIGN_MIN bytes and more (dicts, lazy stacks,
 * iterators, small tensor buffers) are also aligned to a cache line: a
 * dict's header then fills one line and its inline entries start on the
 * next, as td_dict is laid out for. With malloc's 16-byte alignment the
 * fields a walk touches straddle more lines (7 to 9 instead of 5 for a
 * dict of a leaf and a sub-dict): the unbind of the lazy benchmark stack
 * (570 such dicts a call) took 8% longer. They are carved out of a
 * malloc() of a line more: aligned_alloc() gave the same alignment, but in
 * a heap fragmented by earlier work each call split chunks and left
 * fragments behind, and a benchmark row that allocates most of its blocks
 * afresh (test_lock_stack_nested[lazy], after the 105 rows before it) took
 * 58 us a call instead of 41.
 */
#define ALIGN_MIN 192
#define LINE 64
#define HDR 16 /* room for the word, keeping the allocator's 16-byte alignment */

/* A block of class k: from the C library (cache on) or the caller's allocator. */
static void *block_new(size_t k)
{
	size_t bytes = class_bytes(k);
	unsigned char *raw, *p;

	if (!using_default || bytes < ALIGN_MIN) {
		raw = using_default ? malloc(bytes + HDR) : td__malloc(bytes + HDR);
		if (!raw)
			return NULL;
		p = raw + HDR;
	} else {
		raw = malloc(bytes + LINE);
		if (!raw)
			return NULL;
		/* malloc aligns to 16 at least: p - raw is 16 to 64, room for the word */
		p = raw + (LINE - (uintptr_t)raw % LINE);
	}
	memcpy(p - sizeof(raw), &raw, sizeof(raw));
	return p;
}

/* Where the memory of a block of a cached class starts. */
static void *block_origin(void *ptr)
{
	void *raw;

	memcpy(&raw, (unsigned char *)ptr - sizeof(raw), sizeof(raw));
	return raw;
}

/* Give a block released into the cache (or meant for it) back to the C library. */
static void block_free(void *ptr)
{
	free(block_origin(ptr));
}

/* Return every block of `c` to the C library. */
static void cache_release(block_cache *c)
{
	cached_block *b, *next;
	int k;

	for (k = 0; k < CACHE_CLASSES; k++) {
		for (b = c->head[k]; b; b = next) {
			next = b->next;
			block_free(b);
		}
		c->head[k] = NULL;
	}
	c->bytes = 0;
}

static void cache_destroy(void *arg)
{
	block_cache *c = arg;

	if (!c)
		return;
	cache_release(c);
	free(c);
}

static void cache_key_init(void)
{
	tcache_key_ok = pthread_key_create(&tcache_key, cache_destroy) == 0;
}

/* The calling thread's cache, created on first use; NULL if that fails. */
static block_cache *cache_get(void)
{
	block_cache *c = tcache;

	if (TD_LIKELY(c != NULL))
		return c;
	pthread_once(&tcache_once, cache_key_init);
	if (!tcache_key_ok)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (pthread_setspecific(tcache_key, c) != 0) {
		free(c);
		return NULL;
	}
	tcache = c;
	return c;
}

/* Return the calling thread's cached blocks to the C library. */
static void cache_flush(void)
{
	block_cache *c = tcache;

	if (c)
		cache_release(c);
}

void *td__alloc_small(size_t size)
{
	block_cache *c = tcache;
	size_t k;

	if (size == 0 || size > CACHE_MAX)
		return td__malloc(size);
	k = (size - 1) / CACHE_STEP;
	/*
	 * A caller's allocator gets the whole class too: should such a block be
	 * released after td_set_allocator(NULL) (which breaks the documented
	 * contract), the cache it lands in still holds a block of its class.
	 */
	if (!using_default)
		return block_new(k);
	if (TD_LIKELY(c != NULL && c->head[k] != NULL)) {
		cached_block *b = c->head[k];

		c->head[k] = b->next;
		c->bytes -= class_bytes(k);
		/* The next pop reads the new head's link: fetch it now. */
		if (b->next)
			__builtin_prefetch(b->next, 1);
		return b;
	}
	/* A whole class, so that the block can serve any size of its class. */
	return block_new(k);
}

bool td__alloc_small_n(void **out, size_t n, size_t size)
{
	block_cache *c = tcache;
	size_t i = 0;

	/* The cached blocks of the class taken in one pass: no call, no checks per block. */
	if (size > 0 && size <= CACHE_MAX && using_default && TD_LIKELY(c != NULL)) {
		size_t k = (size - 1) / CACHE_STEP;
		cached_block *b = c->head[k];

		for (; i < n && b; i++) {
			out[i] = b;
			b = b->next;
		}
		c->head[k] = b;
		c->bytes -= i * class_bytes(k);
		if (b)
			__builtin_prefetch(b, 1);
	}
	for (; i < n; i++) {
		out[i] = td__alloc_small(size);
		if (!out[i]) {
			while (i-- > 0)
				td__free_small(out[i], size);
			return false;
		}
	}
	return true;
}

/*
 * Make room in a full cache for a block of class k by freeing one block of
 * another class, the largest class that has any; false if only class k
 * holds blocks. A full cache so follows what the thread frees now: without
 * it the blocks left by earlier work (a table of benchmark rows, an earlier
 * phase of a program) kept their room for good, and what is freed now went
 * to free() and came back from malloc() on every call. tdbench's
 * test_unlock_stack_nested[lazy] (570 dicts made and freed a call, after
 * 106 other rows) took 34.5 us a call that way, 27 us with a cache that
 * never filled.
 */
static bool evict_one(block_cache *c, size_t k)
{
	cached_block *b;
	size_t v;

	for (v = CACHE_CLASSES; v-- > 0;) {
		if (v == k || !c->head[v])
			continue;
		b = c->head[v];
		c->head[v] = b->next;
		c->bytes -= class_bytes(v);
		block_free(b);
		return true;
	}
	return false;
}

/* td__free_small() when the thread has no cache yet or it is full: kept off the fast path. */
static __attribute__((noinline)) void free_small_slow(void *ptr, size_t k)
{
	block_cache *c = cache_get();
	cached_block *b = ptr;

	while (c && c->bytes + class_bytes(k) > CACHE_BYTES && evict_one(c, k))
		;
	if (!c || c->bytes + class_bytes(k) > CACHE_BYTES) {
		block_free(ptr);
		return;
	}
	b->next = c->head[k];
	c->head[k] = b;
	c->bytes += class_bytes(k);
}

void td__free_small(void *ptr, size_t size)
{
	block_cache *c = tcache;
	cached_block *b = ptr;
	size_t k;

	if (!ptr)
		return;
	if (size == 0 || size > CACHE_MAX) {
		td__free(ptr);
		return;
	}
	if (!using_default) {
		td__free(block_origin(ptr));
		return;
	}
	k = (size - 1) / CACHE_STEP;
	/* The common case, with no register to save (~15 instructions, from ~30). */
	if (TD_LIKELY(c != NULL && c->bytes + class_bytes(k) <= CACHE_BYTES)) {
		b->next = c->head[k];
		c->head[k] = b;
		c->bytes += class_bytes(k);
		return;
	}
	free_small_slow(ptr, k);
}
