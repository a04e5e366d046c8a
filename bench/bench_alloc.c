/* SPDX-License-Identifier: MIT */
/*
 * bench_alloc.c - a counting allocator for td_set_allocator(): every block
 * carries a 16-byte header (its size and the address to free) just before
 * the pointer handed out, so frees can be counted; counts are of the bytes
 * the library asked for, headers excluded. Single-threaded use only.
 */
#include "config.h"

#include "bench.h"

#include <tdstore.h>

#include <stdlib.h>
#include <string.h>

#define HEADER 16

static bench_alloc_stats stats;

static void *place(void *raw, size_t offset, size_t size)
{
	char *user = (char *)raw + offset;

	((size_t *)(void *)user)[-2] = size;
	((void **)(void *)user)[-1] = raw;
	stats.allocs++;
	stats.bytes += size;
	stats.live += (int64_t)size;
	stats.live_blocks++;
	if (stats.live > 0 && (uint64_t)stats.live > stats.peak)
		stats.peak = (uint64_t)stats.live;
	return user;
}

static size_t block_size(const void *user)
{
	return ((const size_t *)user)[-2];
}

static void *count_aligned(size_t alignment, size_t size, void *payload)
{
	size_t offset = alignment < HEADER ? HEADER : alignment;
	void *raw = NULL;

	(void)payload;
	if (size > SIZE_MAX - offset || posix_memalign(&raw, offset, size + offset) != 0)
		return NULL;
	return place(raw, offset, size);
}

static void *count_malloc(size_t size, void *payload)
{
	return count_aligned(HEADER, size, payload);
}

static void count_free(void *ptr, void *payload)
{
	(void)payload;
	if (!ptr)
		return;
	stats.frees++;
	stats.live -= (int64_t)block_size(ptr);
	stats.live_blocks--;
	free(((void **)ptr)[-1]);
}

static void *count_realloc(void *ptr, size_t size, void *payload)
{
	void *p = count_malloc(size, payload);
	size_t old;

	if (!p || !ptr)
		return p;
	old = block_size(ptr);
	memcpy(p, ptr, old < size ? old : size);
	count_free(ptr, payload);
	return p;
}

static const td_allocator counting = { TD_ALLOCATOR_VERSION, count_malloc, count_realloc,
	count_aligned, count_free, NULL };

int bench_count_begin(void)
{
	memset(&stats, 0, sizeof(stats));
	return td_set_allocator(&counting);
}

void bench_count_stats(bench_alloc_stats *out)
{
	*out = stats;
}

void bench_count_reset_peak(void)
{
	stats.peak = stats.live > 0 ? (uint64_t)stats.live : 0;
}

int64_t bench_count_end(void)
{
	td_set_allocator(NULL);
	return stats.live;
}
