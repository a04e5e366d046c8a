/* SPDX-License-Identifier: MIT */
/*
 * io.h - the write path the stores share: a file's bytes written in order
 * with few system calls. Never installed.
 *
 * A td__writer queues spans at increasing file offsets as iovecs and
 * writes each run with pwritev: source memory is borrowed, not copied;
 * zero padding comes from one shared zero block; tensors that are not
 * contiguous are gathered through a bounded staging buffer. Writing every
 * byte of a range is also what reserves its blocks (with delayed
 * allocation a successful write has reserved them), so ranges written
 * this way need no fallocate.
 */
#ifndef TD_IO_H
#define TD_IO_H

#include "td_internal.h"

#include <stdint.h>
#include <sys/uio.h>

/** iovecs queued before a write is issued (Linux's IOV_MAX). */
#define TD_IO_IOV_MAX 1024
/** Bytes of the staging buffer for sources that are not contiguous. */
#define TD_IO_STAGE_BYTES ((size_t)1 << 20)

/** A sequential writer into one file. Caller-owned; td__writer_free() releases it. */
typedef struct td__writer {
	int fd;
	const char *what;  /* names the file in messages (borrowed) */
	uint64_t start;    /* file offset of the first queued byte */
	uint64_t pos;      /* file offset after the last queued byte */
	int n;             /* iovecs queued */
	struct iovec *iov; /* TD_IO_IOV_MAX entries (heap) */
	td_buffer *stage;  /* TD_IO_STAGE_BYTES, allocated on first use */
	size_t staged;     /* bytes of `stage` queued since the last write */
	uint64_t calls;    /* pwritev calls issued (for tests and benchmarks) */
} td__writer;

/**
 * Start writing `fd` at offset `off`. `what` (borrowed for the writer's
 * life) names the file in messages. @return TD_OK; TD_ENOMEM.
 */
int td__writer_init(td__writer *w, int fd, uint64_t off, const char *what);
/** Point a writer with nothing queued at another file (`what` as for td__writer_init). */
void td__writer_reset(td__writer *w, int fd, uint64_t off, const char *what);
/** Release the writer's memory (nothing queued is written). Safe on a zeroed writer. */
void td__writer_free(td__writer *w);

/**
 * Queue `len` bytes of `data` at the writer's position. The memory is
 * borrowed until the next td__writer_flush() (or a call that flushes).
 */
int td__writer_put(td__writer *w, const void *data, size_t len);
/** Queue `len` zero bytes. */
int td__writer_zero(td__writer *w, uint64_t len);
/** Write what is queued, then continue at offset `off`. */
int td__writer_seek(td__writer *w, uint64_t off);
/** Queue zeros up to offset `off` (TD_EINVAL if the writer is already past it). */
int td__writer_zero_to(td__writer *w, uint64_t off);
/**
 * Queue a tensor's bytes in C order: a contiguous tensor's memory is
 * borrowed (see td__writer_put); any other is gathered into the staging
 * buffer, in slices when it is larger than the buffer.
 */
int td__writer_put_tensor(td__writer *w, const td_tensor *t);
/**
 * Write everything queued. @return TD_OK; TD_ENOSPC, TD_EIO, ... (the
 * system's error, with `what` in the message). After a failure the queue
 * is dropped.
 */
int td__writer_flush(td__writer *w);

/** Write `len` bytes at `off` with pwrite, retrying short writes; `what` names the file. */
int td__pwrite_all(int fd, const void *data, size_t len, uint64_t off, const char *what);

#endif /* TD_IO_H */
