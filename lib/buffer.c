/* SPDX-License-Identifier: MIT */
/*
 * buffer.c - reference-counted byte spans. A heap buffer is one
 * allocation: the header, then the data at TD_BUFFER_ALIGNMENT. Wrapped
 * buffers point at foreign memory and run a release hook on the last unref.
 */
#include "td_internal.h"
#include "buffer_impl.h"

/*
 * A heap buffer is one block from the allocator's plain malloc: the header
 * at its start, the data at the first TD_BUFFER_ALIGNMENT boundary after
 * it. Aligning inside the block avoids aligned allocation, which glibc
 * serves several times slower than malloc (measured: ~500 instructions per
 * allocate/free pair for a 240-byte tensor, against ~100).
 */
#define HEAP_SLACK (sizeof(struct td_buffer) + TD_BUFFER_ALIGNMENT - 1)

int td_buffer_new(td_buffer **out, size_t nbytes, unsigned flags)
{
	td_buffer *b;
	size_t total;

	if (!out)
		return td__error(TD_EINVAL, "td_buffer_new: NULL out");
	*out = NULL;
	if (flags & ~(unsigned)TD_BUFFER_ZEROED)
		return td__error(TD_EINVAL, "td_buffer_new: unknown flags 0x%x", flags);
	if (!td__add_size(nbytes, HEAP_SLACK, &total) || total > (size_t)PTRDIFF_MAX)
		return td__error(TD_EOVERFLOW, "td_buffer_new: %zu bytes is too large", nbytes);
	b = td__alloc_small(total);
	if (!b)
		return td__error_nomem(total);
	atomic_init(&b->refs, 1);
	b->kind = TD_MEMORY_HEAP;
	b->flags = 0;
	b->device = -1;
	b->data = (void *)(((uintptr_t)(b + 1) + TD_BUFFER_ALIGNMENT - 1) &
		~(uintptr_t)(TD_BUFFER_ALIGNMENT - 1));
	b->nbytes = nbytes;
	b->release = NULL;
	b->payload = NULL;
	if (flags & TD_BUFFER_ZEROED)
		memset(b->data, 0, nbytes);
	*out = b;
	return TD_OK;
}

int td_buffer_wrap(td_buffer **out, void *data, size_t nbytes, const td_buffer_wrap_opts *opts)
{
	static const td_buffer_wrap_opts defaults = TD_BUFFER_WRAP_OPTS_INIT;
	td_buffer *b;

	if (!out)
		return td__error(TD_EINVAL, "td_buffer_wrap: NULL out");
	*out = NULL;
	if (!opts)
		opts = &defaults;
	if (opts->version != TD_BUFFER_WRAP_OPTS_VERSION)
		return td__error(TD_EINVAL, "td_buffer_wrap: options version %u, expected %u",
			opts->version, TD_BUFFER_WRAP_OPTS_VERSION);
	if (!data && nbytes)
		return td__error(TD_EINVAL, "td_buffer_wrap: NULL data with %zu bytes", nbytes);
	if ((unsigned)opts->memory > TD_MEMORY_EXTERNAL || opts->memory == TD_MEMORY_HEAP)
		return td__error(TD_EINVAL, "td_buffer_wrap: invalid memory kind %d", (int)opts->memory);
	if (opts->flags & ~(unsigned)TD_BUFFER_READONLY)
		return td__error(TD_EINVAL, "td_buffer_wrap: unknown flags 0x%x", opts->flags);
	if (opts->device < -1 || opts->device > INT16_MAX ||
		(opts->memory == TD_MEMORY_DEVICE) != (opts->device >= 0))
		return td__error(TD_EINVAL,
			"td_buffer_wrap: device %d does not fit memory kind %d (device memory needs an "
			"ordinal >= 0, host memory -1)",
			opts->device, (int)opts->memory);
	b = td__malloc(sizeof(*b));
	if (!b)
		return td__error_nomem(sizeof(*b));
	atomic_init(&b->refs, 1);
	b->kind = (uint8_t)opts->memory;
	b->flags = (uint8_t)opts->flags;
	b->device = (int16_t)opts->device;
	b->data = data;
	b->nbytes = nbytes;
	b->release = opts->release;
	b->payload = opts->payload;
	*out = b;
	return TD_OK;
}

td_buffer *td_buffer_ref(td_buffer *buf)
{
	if (buf)
		atomic_fetch_add_explicit(&buf->refs, 1, memory_order_relaxed);
	return buf;
}

void td_buffer_unref(td_buffer *buf)
{
	if (buf)
		td__buffer_unref(buf);
}

void td__buffer_destroy(td_buffer *buf)
{
	if (buf->kind == TD_MEMORY_HEAP) {
		td__free_small(buf, buf->nbytes + HEAP_SLACK);
		return;
	}
	if (buf->release)
		buf->release(buf->data, buf->nbytes, buf->payload);
	td__free(buf);
}

void *td_buffer_data(const td_buffer *buf)
{
	return buf ? buf->data : NULL;
}

size_t td_buffer_size(const td_buffer *buf)
{
	return buf ? buf->nbytes : 0;
}

td_memory td_buffer_memory(const td_buffer *buf)
{
	return buf ? (td_memory)buf->kind : TD_MEMORY_HEAP;
}

unsigned td_buffer_flags(const td_buffer *buf)
{
	return buf ? buf->flags : 0;
}

int td_buffer_device(const td_buffer *buf)
{
	return buf ? buf->device : -1;
}

uint32_t td_buffer_refcount(const td_buffer *buf)
{
	return buf ? atomic_load_explicit(&buf->refs, memory_order_relaxed) : 0;
}

bool td__buffer_hooked(const td_buffer *buf, td_buffer_release_fn release, void **payload_out)
{
	if (buf->release != release)
		return false;
	*payload_out = buf->payload;
	return true;
}
