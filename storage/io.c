/* SPDX-License-Identifier: MIT */
/*
 * io.c - the shared write path (io.h): spans queued as iovecs and written
 * with one pwritev per run, zero padding from one static block, gathered
 * copies of strided tensors through a bounded staging buffer.
 */
#include "io.h"

#include <errno.h>
#include <unistd.h>

/* Zero padding for every writer: iovecs point here, nothing writes it. */
static const char zero_block[65536];

int td__writer_init(td__writer *w, int fd, uint64_t off, const char *what)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->what = what;
	w->start = w->pos = off;
	w->iov = td__malloc(TD_IO_IOV_MAX * sizeof(*w->iov));
	if (!w->iov)
		return td__error_nomem(TD_IO_IOV_MAX * sizeof(*w->iov));
	return TD_OK;
}

void td__writer_reset(td__writer *w, int fd, uint64_t off, const char *what)
{
	w->fd = fd;
	w->what = what;
	w->start = w->pos = off;
	w->n = 0;
	w->staged = 0;
}

void td__writer_free(td__writer *w)
{
	td__free(w->iov);
	w->iov = NULL;
	td_buffer_unref(w->stage);
	w->stage = NULL;
	w->n = 0;
}

static int write_error(const td__writer *w, int err)
{
	return td__error_os(td__status_from_errno(err), err, "%s: write at offset %llu", w->what,
		(unsigned long long)w->start);
}

int td__writer_flush(td__writer *w)
{
	struct iovec *iov = w->iov;
	int n = w->n;

	while (n > 0) {
		ssize_t k = pwritev(w->fd, iov, n, (off_t)w->start);

		if (k < 0 && errno == EINTR)
			continue;
		w->calls++;
		if (k <= 0) {
			int err = k < 0 ? errno : EIO;

			w->n = 0;
			w->staged = 0;
			return write_error(w, err);
		}
		w->start += (uint64_t)k;
		/* Drop the pieces written whole; a short write resumes inside the next. */
		while (n > 0 && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	w->n = 0;
	w->staged = 0;
	w->start = w->pos;
	return TD_OK;
}

int td__writer_put(td__writer *w, const void *data, size_t len)
{
	struct iovec *last = w->n ? &w->iov[w->n - 1] : NULL;

	if (len == 0)
		return TD_OK;
	if (len > UINT64_MAX - w->pos)
		return td__error(TD_EOVERFLOW, "%s: the file would pass 2^64 bytes", w->what);
	/* Memory that continues the previous piece extends it. */
	if (last && (const char *)last->iov_base + last->iov_len == (const char *)data &&
		last->iov_len <= SIZE_MAX - len) {
		last->iov_len += len;
	} else {
		if (w->n == TD_IO_IOV_MAX)
			TD_TRY(td__writer_flush(w));
		w->iov[w->n].iov_base = (void *)data;
		w->iov[w->n].iov_len = len;
		w->n++;
	}
	w->pos += len;
	return TD_OK;
}

int td__writer_zero(td__writer *w, uint64_t len)
{
	while (len) {
		size_t n = len < sizeof(zero_block) ? (size_t)len : sizeof(zero_block);

		/* Each piece starts the block again, so consecutive ones never merge. */
		if (w->n == TD_IO_IOV_MAX)
			TD_TRY(td__writer_flush(w));
		if (n > UINT64_MAX - w->pos)
			return td__error(TD_EOVERFLOW, "%s: the file would pass 2^64 bytes", w->what);
		w->iov[w->n].iov_base = (void *)zero_block;
		w->iov[w->n].iov_len = n;
		w->n++;
		w->pos += n;
		len -= n;
	}
	return TD_OK;
}

int td__writer_seek(td__writer *w, uint64_t off)
{
	TD_TRY(td__writer_flush(w));
	w->start = w->pos = off;
	return TD_OK;
}

int td__writer_zero_to(td__writer *w, uint64_t off)
{
	if (off < w->pos)
		return td__error(TD_EINVAL, "%s: write at %llu, behind the writer at %llu", w->what,
			(unsigned long long)off, (unsigned long long)w->pos);
	return td__writer_zero(w, off - w->pos);
}

/* Gather `t` (at most TD_IO_STAGE_BYTES) into the staging buffer and queue it. */
static int put_staged(td__writer *w, const td_tensor *t, size_t nbytes)
{
	size_t at;
	td_tensor dst;
	int rc;

	if (!w->stage)
		TD_TRY(td_buffer_new(&w->stage, TD_IO_STAGE_BYTES, 0));
	/* Each piece starts aligned to its element size; the gaps are never written. */
	at = (w->staged + 15) & ~(size_t)15;
	if (at > TD_IO_STAGE_BYTES || nbytes > TD_IO_STAGE_BYTES - at) {
		TD_TRY(td__writer_flush(w));
		at = 0;
	}
	rc = td_tensor_from_buffer(&dst, w->stage, t->dtype, t->ndim, td_tensor_shape(t), NULL,
		(int64_t)(at / td_dtype_size(t->dtype)));
	if (rc < 0)
		return rc;
	rc = td_tensor_copy(&dst, t);
	td_tensor_release(&dst);
	if (rc < 0)
		return rc;
	w->staged = at + nbytes;
	return td__writer_put(w, (char *)td_buffer_data(w->stage) + at, nbytes);
}

int td__writer_put_tensor(td__writer *w, const td_tensor *t)
{
	size_t nbytes = td_tensor_nbytes(t), row;
	int64_t rows, start;

	if (nbytes == 0)
		return TD_OK;
	if (td_tensor_is_contiguous(t))
		return td__writer_put(w, td_tensor_data(t), nbytes);
	if (nbytes <= TD_IO_STAGE_BYTES)
		return put_staged(w, t, nbytes);
	/* Larger than the stage: slices along dim 0, or a lone row's own dims. */
	if (td_tensor_shape(t)[0] == 1) {
		td_tensor sub;
		int rc;

		TD_TRY(td_tensor_select(&sub, t, 0, 0));
		rc = td__writer_put_tensor(w, &sub);
		td_tensor_release(&sub);
		return rc;
	}
	row = nbytes / (size_t)td_tensor_shape(t)[0];
	rows = row >= TD_IO_STAGE_BYTES ? 1 : (int64_t)(TD_IO_STAGE_BYTES / row);
	for (start = 0; start < td_tensor_shape(t)[0]; start += rows) {
		int64_t len = td_tensor_shape(t)[0] - start < rows ? td_tensor_shape(t)[0] - start : rows;
		td_tensor sub;
		int rc;

		TD_TRY(td_tensor_narrow(&sub, t, 0, start, len));
		rc = td__writer_put_tensor(w, &sub);
		td_tensor_release(&sub);
		TD_TRY(rc);
	}
	return TD_OK;
}

int td__pwrite_all(int fd, const void *data, size_t len, uint64_t off, const char *what)
{
	const char *p = data;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : EIO;

			return td__error_os(td__status_from_errno(err), err, "%s: write", what);
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return TD_OK;
}
