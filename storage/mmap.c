/* SPDX-License-Identifier: MIT */
/*
 * mmap.c - memory-mapped tensors on their own (tensordict's
 * MemoryMappedTensor) and tensors and dicts in anonymous shared memory
 * (memfd). A file tensor's buffer (TD_MEMORY_FILE) owns its mapping. A
 * shared-memory buffer (TD_MEMORY_SHM) is either a block of the
 * shared-memory arena (shm_arena.c; small tensors) or owns its mapping and
 * its memfd, whose descriptor is the buffer's payload, closed by the
 * release hook.
 */
#include "store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* Alignment of each leaf inside a td_shm_dict() memfd. */
#define SHM_DICT_ALIGN ((size_t)64)

/*
 * The data address of buffers of zero bytes, which map nothing: not NULL,
 * because tensor code computes addresses from it (NULL + 0 is undefined).
 * Nothing is ever read or written there.
 */
static _Alignas(64) char no_bytes[64];

/* ------------------------------------------------------------------------ */
/* Buffers                                                                   */
/* ------------------------------------------------------------------------ */

static void shm_release(void *data, size_t nbytes, void *payload)
{
	td__unmap_release(data, nbytes, NULL);
	close((int)(intptr_t)payload);
}

/*
 * Map the first `nbytes` of `fd` as a TD_MEMORY_SHM buffer that owns `fd`
 * (closed here on failure). Zero bytes map nothing.
 */
static int shm_buffer(td_buffer **out, int fd, size_t nbytes, bool writable, const char *what)
{
	td_buffer_wrap_opts opts = TD_BUFFER_WRAP_OPTS_INIT;
	int rc;

	opts.memory = TD_MEMORY_SHM;
	opts.release = shm_release;
	opts.payload = (void *)(intptr_t)fd;
	if (nbytes) {
		rc = td__map_fd_as(out, fd, nbytes, writable, &opts, what);
	} else {
		opts.flags = writable ? 0u : TD_BUFFER_READONLY;
		rc = td_buffer_wrap(out, no_bytes, 0, &opts);
	}
	if (rc < 0)
		close(fd);
	return rc;
}

/* A new memfd of `nbytes` zero bytes, mapped writable. */
static int shm_new(td_buffer **out, size_t nbytes, const char *fn)
{
	int fd, rc;

	*out = NULL;
	fd = memfd_create("tdstore", MFD_CLOEXEC);
	if (fd < 0)
		return td__error_os(td__status_from_errno(errno), errno, "%s: memfd_create", fn);
	/* Nothing maps the fresh memfd yet. Allocating its pages up front makes
	 * exhausted memory fail here rather than with SIGBUS on first touch. */
	rc = nbytes ? posix_fallocate(fd, 0, (off_t)nbytes) : 0;
	if (rc != 0) {
		close(fd);
		return td__error_os(td__status_from_errno(rc), rc,
			"%s: reserving %zu bytes of shared memory", fn, nbytes);
	}
	return shm_buffer(out, fd, nbytes, true, fn);
}

/*
 * `nbytes` of anonymous shared memory, writable: an arena block when the
 * arena serves the size, else a memfd of its own. `*zeroed_out` tells
 * whether the bytes read as zeros (a recycled arena block may not).
 */
static int shm_alloc(td_buffer **out, size_t nbytes, bool *zeroed_out, const char *fn)
{
	int rc = td__shm_arena_alloc(out, nbytes, zeroed_out, fn);

	if (rc != 0)
		return rc < 0 ? rc : TD_OK;
	*zeroed_out = true;
	return shm_new(out, nbytes, fn);
}

/* A buffer of zero bytes of `kind` (nothing mapped). */
static int empty_buffer(td_buffer **out, td_memory kind, bool writable)
{
	td_buffer_wrap_opts opts = TD_BUFFER_WRAP_OPTS_INIT;

	opts.memory = kind;
	opts.flags = writable ? 0u : TD_BUFFER_READONLY;
	return td_buffer_wrap(out, no_bytes, 0, &opts);
}

/* ------------------------------------------------------------------------ */
/* Creating mapped tensors                                                   */
/* ------------------------------------------------------------------------ */

/* How a creation call initializes the elements. */
typedef enum make_init { INIT_NONE, INIT_ZEROS, INIT_FILL } make_init;

/*
 * The options of a call of this file into `o`, which holds the defaults
 * (kept for NULL `opts`); TD_EINVAL for an unknown version. `fn` names
 * the call.
 */
static int get_opts(td_mmap_opts *o, const td_mmap_opts *opts, const char *fn)
{
	if (opts && opts->version != TD_MMAP_OPTS_VERSION)
		return td__error(TD_EINVAL, "%s: options version %u, expected %u", fn, opts->version,
			TD_MMAP_OPTS_VERSION);
	if (opts)
		*o = *opts;
	return TD_OK;
}

/* One creation call: what it makes, and whether it created a file. */
typedef struct maker {
	const char *fn;
	const char *path;         /* NULL: anonymous shared memory */
	const td_mmap_opts *opts; /* as the caller gave them (checked by make_begin()) */
	bool exist_ok;            /* set by make_begin() from `opts` */
	make_init init;
	td_scalar value; /* for INIT_FILL */
	bool created;    /* set by make_buffer(): it created the file */
	bool zeroed;     /* set by make_buffer(): the bytes read as zeros */
} maker;

/* The new (or reused) file, or new shared memory, of `nbytes`, mapped writable. */
static int make_buffer(maker *m, size_t nbytes, td_buffer **out)
{
	int fd, rc;

	*out = NULL;
	if (!m->path)
		return shm_alloc(out, nbytes, &m->zeroed, m->fn);
	TD_TRY(td__open_reserved(AT_FDCWD, m->path, nbytes, m->exist_ok, m->fn, m->path, &fd,
		&m->created));
	m->zeroed = m->created;
	if (nbytes)
		rc = td__map_fd(out, fd, nbytes, true, m->path);
	else
		rc = empty_buffer(out, TD_MEMORY_FILE, true);
	close(fd);
	return rc;
}

/*
 * Finish a creation: on failure release `t` and remove a file this call
 * created; on success move `t` into `out`.
 */
static int make_end(maker *m, td_tensor *out, td_tensor *t, int rc)
{
	if (rc < 0) {
		td_tensor_release(t);
		if (m->created)
			unlink(m->path);
		return rc;
	}
	*out = *t;
	return TD_OK;
}

/*
 * Validate, then map a new C-contiguous tensor into `t` (not yet in `out`;
 * `t->buffer` is NULL on entry and stays NULL on failure). The new buffer
 * holds exactly the checked shape, so `t` takes over its reference without
 * the checks of td_tensor_from_buffer(), as td__tensor_alloc() does.
 */
static int make_begin(maker *m, td_tensor *t, const td_tensor *out, td_dtype dtype, int ndim,
	const int64_t *shape)
{
	td_mmap_opts o = TD_MMAP_OPTS_INIT;
	size_t nbytes;
	int rc;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", m->fn);
	TD_TRY(get_opts(&o, m->opts, m->fn));
	m->exist_ok = o.exist_ok;
	TD_TRY(td__shape_check(ndim, shape, dtype, NULL, &nbytes, m->fn));
	TD_TRY(td__tensor_contiguous_dims(t, ndim, shape, m->fn));
	rc = make_buffer(m, nbytes, &t->buffer);
	if (rc < 0) {
		td__tensor_dims_drop(t); /* t holds no buffer: make_end() drops nothing */
		return rc;
	}
	t->offset = 0;
	t->dtype = dtype;
	return TD_OK;
}

static int make(maker *m, td_tensor *out, td_dtype dtype, int ndim, const int64_t *shape)
{
	td_tensor t;
	int rc;

	t.buffer = NULL;
	rc = make_begin(m, &t, out, dtype, ndim, shape);
	/* New files, memfds and arena blocks read as zeros: only a reused file
	 * or a recycled block needs zeroing. */
	if (rc == TD_OK && m->init == INIT_FILL)
		rc = td_tensor_fill(&t, m->value);
	else if (rc == TD_OK && m->init == INIT_ZEROS && !m->zeroed)
		rc = td_tensor_zero(&t);
	return make_end(m, out, &t, rc);
}

int td_mmap_tensor_empty(td_tensor *out, const char *path, td_dtype dtype, int ndim,
	const int64_t *shape, const td_mmap_opts *opts)
{
	maker m = { "td_mmap_tensor_empty", path, opts, false, INIT_NONE, { TD_SCALAR_BOOL, { 0 } },
		false, false };

	return make(&m, out, dtype, ndim, shape);
}

int td_mmap_tensor_zeros(td_tensor *out, const char *path, td_dtype dtype, int ndim,
	const int64_t *shape, const td_mmap_opts *opts)
{
	maker m = { "td_mmap_tensor_zeros", path, opts, false, INIT_ZEROS, { TD_SCALAR_BOOL, { 0 } },
		false, false };

	return make(&m, out, dtype, ndim, shape);
}

int td_mmap_tensor_full(td_tensor *out, const char *path, td_dtype dtype, int ndim,
	const int64_t *shape, td_scalar value, const td_mmap_opts *opts)
{
	maker m = { "td_mmap_tensor_full", path, opts, false, INIT_FILL, value, false, false };

	return make(&m, out, dtype, ndim, shape);
}

int td_mmap_tensor_from_tensor(td_tensor *out, const char *path, const td_tensor *src,
	const td_mmap_opts *opts)
{
	maker m = { "td_mmap_tensor_from_tensor", path, opts, false, INIT_NONE,
		{ TD_SCALAR_BOOL, { 0 } }, false, false };
	td_tensor t;
	int rc;

	t.buffer = NULL;
	if (!src)
		return td__error(TD_EINVAL, "%s: NULL src", m.fn);
	TD_TRY(td__tensor_check_read(src, m.fn, "src"));
	rc = make_begin(&m, &t, out, src->dtype, src->ndim, td_tensor_shape(src));
	/* `src` is checked, and new shared memory cannot overlap it (a block in
	 * use, or exported, is never handed out): no second round of checks. A
	 * reused file may be mapped by `src` too: td_tensor_copy() sorts that. */
	if (rc == TD_OK && !path)
		rc = td__copy_unchecked(&t, src, m.fn);
	else if (rc == TD_OK)
		rc = td_tensor_copy(&t, src);
	if (rc == TD_OK && out == src)
		td_tensor_release(out);
	return make_end(&m, out, &t, rc);
}

/* ------------------------------------------------------------------------ */
/* Mapping existing files and descriptors                                    */
/* ------------------------------------------------------------------------ */

/* `fd` must be a regular file (or memfd) of at least `end` bytes. */
static int check_file(int fd, size_t end, const char *fn, const char *what)
{
	uint64_t size;

	TD_TRY(td__fstat_regular(fd, what, &size));
	if (size < (uint64_t)end)
		return td__error(TD_ECORRUPT, "%s: %s has %llu bytes, fewer than the %zu needed", fn, what,
			(unsigned long long)size, end);
	return TD_OK;
}

int td_mmap_tensor_from_file(td_tensor *out, const char *path, td_dtype dtype, int ndim,
	const int64_t *shape, const td_mmap_opts *opts)
{
	static const char fn[] = "td_mmap_tensor_from_file";
	td_buffer *buf = NULL;
	td_mmap_opts o = TD_MMAP_OPTS_INIT;
	size_t nbytes;
	bool rw;
	int fd, rc;

	if (!out || !path)
		return td__error(TD_EINVAL, "%s: NULL %s", fn, out ? "path" : "out");
	TD_TRY(get_opts(&o, opts, fn));
	rw = o.writable;
	TD_TRY(td__shape_check(ndim, shape, dtype, NULL, &nbytes, fn));
	if (nbytes == 0) {
		rc = empty_buffer(&buf, TD_MEMORY_FILE, rw);
	} else {
		/* O_NONBLOCK: a FIFO at `path` must not block the open. */
		fd = open(path, (rw ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return td__file_error(errno, path, "open");
		rc = check_file(fd, nbytes, fn, path);
		if (rc == TD_OK)
			rc = td__map_fd(&buf, fd, nbytes, rw, path);
		close(fd);
	}
	if (rc == TD_OK)
		rc = td_tensor_from_buffer(out, buf, dtype, ndim, shape, NULL, 0);
	td_buffer_unref(buf);
	return rc;
}

int td_shm_tensor_fd(int *fd_out, uint64_t *offset_out, const td_tensor *t)
{
	static const char fn[] = "td_shm_tensor_fd";
	uint64_t base = 0;
	void *payload;
	int fd;

	if (fd_out)
		*fd_out = -1;
	if (offset_out)
		*offset_out = 0;
	if (!fd_out)
		return td__error(TD_EINVAL, "%s: NULL fd_out", fn);
	TD_TRY(td__tensor_check(t, fn, "t"));
	if (td__buffer_hooked(t->buffer, shm_release, &payload))
		fd = (int)(intptr_t)payload;
	else if (!td__shm_arena_export(t->buffer, &fd, &base))
		return td__error(TD_EINVAL, "%s: the tensor is not in tdstore's shared memory", fn);
	*fd_out = fd;
	if (offset_out)
		*offset_out = base + (uint64_t)t->offset * td_dtype_size(t->dtype);
	return TD_OK;
}

/* Check the descriptor and the byte range [offset, offset + nbytes) before mapping. */
static int check_fd_range(int fd, td_dtype dtype, size_t nbytes, uint64_t offset, bool rw,
	size_t *end_out)
{
	static const char fn[] = "td_shm_tensor_from_fd";
	int fl;

	if (fd < 0)
		return td__error(TD_EINVAL, "%s: negative descriptor %d", fn, fd);
	if (offset % td_dtype_size(dtype))
		return td__error(TD_EINVAL, "%s: offset %llu is not a multiple of %zu", fn,
			(unsigned long long)offset, td_dtype_size(dtype));
	if (offset > (uint64_t)PTRDIFF_MAX || !td__add_size((size_t)offset, nbytes, end_out) ||
		*end_out > (size_t)PTRDIFF_MAX)
		return td__error(TD_EOVERFLOW, "%s: offset %llu + %zu bytes overflows", fn,
			(unsigned long long)offset, nbytes);
	fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return td__error(TD_EINVAL, "%s: descriptor %d is not open", fn, fd);
	if (rw && (fl & O_ACCMODE) == O_RDONLY)
		return td__error(TD_EREADONLY, "%s: descriptor %d is open read-only", fn, fd);
	if (nbytes == 0)
		*end_out = 0;
	return check_file(fd, *end_out, fn, "the descriptor");
}

int td_shm_tensor_from_fd(td_tensor *out, int fd, td_dtype dtype, int ndim, const int64_t *shape,
	uint64_t offset, const td_mmap_opts *opts)
{
	static const char fn[] = "td_shm_tensor_from_fd";
	td_buffer *buf = NULL;
	td_mmap_opts o = TD_MMAP_OPTS_INIT;
	size_t nbytes, end = 0;
	bool rw;
	int own, rc;

	if (!out)
		return td__error(TD_EINVAL, "%s: NULL out", fn);
	TD_TRY(get_opts(&o, opts, fn));
	rw = o.writable;
	TD_TRY(td__shape_check(ndim, shape, dtype, NULL, &nbytes, fn));
	TD_TRY(check_fd_range(fd, dtype, nbytes, offset, rw, &end));
	own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (own < 0)
		return td__error_os(td__status_from_errno(errno), errno, "%s: dup", fn);
	TD_TRY(shm_buffer(&buf, own, end, rw, fn));
	rc = td_tensor_from_buffer(out, buf, dtype, ndim, shape, NULL,
		nbytes ? (int64_t)(offset / td_dtype_size(dtype)) : 0);
	td_buffer_unref(buf);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Dicts in one memfd                                                        */
/* ------------------------------------------------------------------------ */

/* Where the next leaf goes in the memfd. */
typedef struct shm_layout {
	td_buffer *buf;
	size_t pos;
	size_t total;
} shm_layout;

static bool round_up(size_t n, size_t *out)
{
	if (!td__add_size(n, SHM_DICT_ALIGN - 1, out))
		return false;
	*out &= ~(SHM_DICT_ALIGN - 1);
	return true;
}

/* Bytes the memfd needs: every tensor leaf, each rounded up to 64 bytes. */
static int shm_dict_size(const td_dict *src, size_t *out)
{
	td_dict_iter *it;
	td_item item;
	size_t total = 0, step;
	int rc;

	TD_TRY(td_dict_iter_new(&it, src, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY));
	while ((rc = td_dict_iter_next(&item, it)) == 1) {
		const td_tensor *t = &item.value->tensor;

		if (item.value->kind != TD_VALUE_TENSOR)
			continue;
		rc = td__tensor_check_read(t, "td_shm_dict", item.key);
		if (rc < 0)
			break;
		if (!round_up(td_tensor_nbytes(t), &step) || !td__add_size(total, step, &total) ||
			total > (size_t)PTRDIFF_MAX) {
			rc = td__error(TD_EOVERFLOW, "td_shm_dict: the total size overflows");
			break;
		}
	}
	td_dict_iter_free(it);
	*out = total;
	return rc < 0 ? rc : TD_OK;
}

/* td_dict_apply() callback: the leaf's copy at the next aligned place in the memfd. */
static int shm_place(td_tensor *out, const td_tensor *in, const td_item *item, void *payload)
{
	shm_layout *l = payload;
	td_tensor t = TD_TENSOR_INIT;
	size_t step;
	int rc;

	if (!round_up(td_tensor_nbytes(in), &step) || step > l->total - l->pos)
		return td__error(TD_ERROR, "td_shm_dict: %s: the dict changed while copied", item->key);
	rc = td_tensor_from_buffer(&t, l->buf, in->dtype, in->ndim, td_tensor_shape(in), NULL,
		(int64_t)(l->pos / td_dtype_size(in->dtype)));
	if (rc == TD_OK)
		rc = td_tensor_copy(&t, in);
	if (rc < 0) {
		td_tensor_release(&t);
		return rc;
	}
	l->pos += step;
	*out = t;
	return TD_OK;
}

int td_shm_dict(td_dict **out, const td_dict *src)
{
	shm_layout l = { NULL, 0, 0 };
	bool zeroed;
	int rc;

	if (!out)
		return td__error(TD_EINVAL, "td_shm_dict: NULL out");
	*out = NULL;
	if (!src)
		return td__error(TD_EINVAL, "td_shm_dict: NULL src");
	if (td_dict_is_lazy(src))
		return td__error(TD_ENOTSUP,
			"td_shm_dict: a lazy stack cannot be moved to shared "
			"memory as one dict (td_lazy_densify() makes a dense dict)");
	TD_TRY(shm_dict_size(src, &l.total));
	/* Every leaf is copied whole: a recycled block needs no zeroing. */
	TD_TRY(shm_alloc(&l.buf, l.total, &zeroed, "td_shm_dict"));
	rc = td_dict_apply(out, src, shm_place, &l);
	td_buffer_unref(l.buf);
	return rc;
}
