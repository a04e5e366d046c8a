/* SPDX-License-Identifier: MIT */
/*
 * buffer_impl.h - the layout of td_buffer, shared by the tensor code for
 * fast data access. Never installed.
 */
#ifndef TD_BUFFER_IMPL_H
#define TD_BUFFER_IMPL_H

#include "td_internal.h"

struct td_buffer {
	_Atomic uint32_t refs;
	uint8_t kind;   /* td_memory */
	uint8_t flags;  /* TD_BUFFER_READONLY */
	int16_t device; /* device ordinal, -1 for host memory */
	void *data;
	size_t nbytes;
	td_buffer_release_fn release;
	void *payload;
};

/* Upper bound of a heap buffer's header and alignment padding, in bytes. */
#define TD_BUFFER_HEADER_SIZE (2 * TD_BUFFER_ALIGNMENT)

/**
 * Take `n` references at once, for `n` views made together (the pieces of
 * an unbind): one atomic add instead of n.
 */
static inline void td__buffer_ref_n(td_buffer *b, size_t n)
{
	atomic_fetch_add_explicit(&b->refs, (uint32_t)n, memory_order_relaxed);
}

/** Free a buffer whose last reference went (td__buffer_unref()). */
void td__buffer_destroy(td_buffer *b);

/** td_buffer_unref() of a non-NULL buffer, inline: one atomic add on the common path. */
static inline void td__buffer_unref(td_buffer *b)
{
	if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
		td__buffer_destroy(b);
}

static inline bool td__buffer_host(const td_buffer *b)
{
	return b->kind != TD_MEMORY_DEVICE;
}

#endif /* TD_BUFFER_IMPL_H */
