/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - the pluggable allocator behind every allocation of the library.
 */
#include "td_internal.h"

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

static td_allocator allocator = {
	TD_ALLOCATOR_VERSION, default_malloc, default_realloc, default_aligned_alloc,
	default_free, NULL
};

int td_set_allocator(const td_allocator *alloc)
{
	if (alloc == NULL) {
		allocator.version = TD_ALLOCATOR_VERSION;
		allocator.malloc = default_malloc;
		allocator.realloc = default_realloc;
		allocator.aligned_alloc = default_aligned_alloc;
		allocator.free = default_free;
		allocator.payload = NULL;
		return TD_OK;
	}
	if (alloc->version != TD_ALLOCATOR_VERSION)
		return td__error(TD_EINVAL, "td_set_allocator: version %u, expected %u",
			alloc->version, TD_ALLOCATOR_VERSION);
	if (!alloc->malloc || !alloc->realloc || !alloc->aligned_alloc || !alloc->free)
		return td__error(TD_EINVAL, "td_set_allocator: every function must be set");
	allocator = *alloc;
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
