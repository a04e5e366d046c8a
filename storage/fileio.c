/* SPDX-License-Identifier: MIT */
/*
 * fileio.c - the file primitives stores are built from: mapping a file as
 * a buffer, reading a small file whole, replacing a file atomically.
 * Every open refuses symbolic links (O_NOFOLLOW) and non-regular files.
 */
#include "store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void td__unmap_release(void *data, size_t nbytes, void *payload)
{
	(void)payload;
	if (data && nbytes)
		munmap(data, nbytes);
}

int td__map_fd_as(td_buffer **out, int fd, size_t nbytes, bool writable,
	const td_buffer_wrap_opts *opts, const char *what)
{
	td_buffer_wrap_opts o = *opts;
	void *p;
	int rc;

	*out = NULL;
	if (nbytes == 0)
		return td__error(TD_EINVAL, "%s: cannot map zero bytes", what);
	p = mmap(NULL, nbytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return td__error_os(td__status_from_errno(errno), errno, "%s: mmap of %zu bytes", what,
			nbytes);
	o.flags = writable ? 0u : TD_BUFFER_READONLY;
	rc = td_buffer_wrap(out, p, nbytes, &o);
	if (rc < 0)
		munmap(p, nbytes);
	return rc;
}

int td__map_fd(td_buffer **out, int fd, size_t nbytes, bool writable, const char *what)
{
	td_buffer_wrap_opts opts = TD_BUFFER_WRAP_OPTS_INIT;

	opts.memory = TD_MEMORY_FILE;
	opts.release = td__unmap_release;
	return td__map_fd_as(out, fd, nbytes, writable, &opts, what);
}

int td__fstat_regular(int fd, const char *what, uint64_t *size_out)
{
	struct stat sb;

	if (fstat(fd, &sb) < 0)
		return td__error_os(TD_EIO, errno, "%s: fstat", what);
	if (!S_ISREG(sb.st_mode))
		return td__error(TD_ECORRUPT, "%s: not a regular file", what);
	if (size_out)
		*size_out = sb.st_size < 0 ? 0 : (uint64_t)sb.st_size;
	return TD_OK;
}

int td__file_error(int err, const char *what, const char *op)
{
	if (err == ELOOP)
		return td__error(TD_ECORRUPT, "%s: is a symbolic link", what);
	if (err == ENOENT)
		return td__error(TD_ENOTFOUND, "%s: no such file or directory", what);
	if (err == EACCES || err == EPERM || err == EROFS)
		return td__error_os(TD_EREADONLY, err, "%s: %s", what, op);
	return td__error_os(td__status_from_errno(err), err, "%s: %s", what, op);
}

int td__open_reserved(int dirfd, const char *name, size_t nbytes, bool existsok, const char *fn,
	const char *what, int *fd_out, bool *created_out)
{
	bool created = true;
	int fd, rc;

	*fd_out = -1;
	fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
	if (fd < 0 && errno == EEXIST) {
		if (!existsok)
			return td__error(TD_EEXISTS, "%s: %s already exists", fn, what);
		created = false;
		fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	}
	if (created_out)
		*created_out = created && fd >= 0;
	if (fd < 0)
		return td__file_error(errno, what, "open");
	rc = td__fstat_regular(fd, what, NULL);
	if (rc < 0)
		goto fail;
	/* Reserve the blocks: a full disk fails here, not later with SIGBUS. Never truncates. */
	rc = nbytes ? posix_fallocate(fd, 0, (off_t)nbytes) : 0;
	if (rc != 0) {
		rc = td__error_os(td__status_from_errno(rc), rc, "%s: reserving %zu bytes", what, nbytes);
		goto fail;
	}
	*fd_out = fd;
	return TD_OK;
fail:
	close(fd);
	return rc;
}

int td__read_small_file(int dirfd, const char *name, size_t max, char **out, size_t *len,
	const char *what)
{
	uint64_t fsize;
	size_t size, done = 0;
	char *buf;
	int fd, rc = TD_OK;

	*out = NULL;
	*len = 0;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ELOOP)
			return td__error(TD_ECORRUPT, "%s: is a symbolic link", what);
		if (errno == ENOENT)
			return td__error(TD_ENOTFOUND, "%s: no such file", what);
		return td__error_os(td__status_from_errno(errno), errno, "%s: open", what);
	}
	rc = td__fstat_regular(fd, what, &fsize);
	if (rc < 0)
		goto out;
	if (fsize > max) {
		rc = td__error(TD_ECORRUPT, "%s: %llu bytes, more than the %zu allowed", what,
			(unsigned long long)fsize, max);
		goto out;
	}
	size = (size_t)fsize;
	buf = td__malloc(size + 1);
	if (!buf) {
		rc = td__error_nomem(size + 1);
		goto out;
	}
	/* Read to the size seen by fstat; a file that shrinks meanwhile ends early. */
	while (done < size) {
		ssize_t n = read(fd, buf + done, size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = td__error_os(TD_EIO, errno, "%s: read", what);
			td__free(buf);
			goto out;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	buf[done] = '\0';
	*out = buf;
	*len = done;
out:
	close(fd);
	return rc;
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int td__create_temp(int dirfd, char *tmp, size_t tmp_len, int *fd_out, const char *what)
{
	unsigned attempt;
	int fd = -1;

	/* A unique temporary name: the pid and a counter, retried on collision. */
	for (attempt = 0; attempt < 100; attempt++) {
		static _Atomic unsigned counter;

		snprintf(tmp, tmp_len, ".tdstore-tmp.%ld.%u", (long)getpid(),
			atomic_fetch_add(&counter, 1u));
		fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	*fd_out = fd;
	if (fd < 0)
		return td__error_os(td__status_from_errno(errno), errno,
			"%s: cannot create a temporary file", what);
	return TD_OK;
}

/* Fill the new file `fd` (`name` under `dirfd`), sync it when asked, close it; unlink it on failure. */
static int fill_new(int dirfd, const char *name, int fd, const void *data, size_t len,
	bool do_fsync, const char *what)
{
	int err = write_all(fd, data, len);

	if (!err && do_fsync && fsync(fd) < 0)
		err = -errno;
	if (close(fd) < 0 && !err)
		err = -errno;
	if (err) {
		unlinkat(dirfd, name, 0);
		return td__error_os(td__status_from_errno(-err), -err, "%s: write", what);
	}
	return TD_OK;
}

int td__write_temp(int dirfd, const void *data, size_t len, bool do_fsync, char *tmp,
	size_t tmp_len, const char *what)
{
	int fd;

	TD_TRY(td__create_temp(dirfd, tmp, tmp_len, &fd, what));
	return fill_new(dirfd, tmp, fd, data, len, do_fsync, what);
}

int td__write_new(int dirfd, const char *name, const void *data, size_t len, const char *what)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);

	if (fd < 0)
		return errno == EEXIST ? td__error(TD_EEXISTS, "%s: already exists", what) :
								 td__file_error(errno, what, "create");
	return fill_new(dirfd, name, fd, data, len, false, what);
}

int td__write_file_atomic(int dirfd, const char *name, const void *data, size_t len, bool nosync,
	const char *what)
{
	char tmp[64];

	TD_TRY(td__write_temp(dirfd, data, len, !nosync, tmp, sizeof(tmp), what));
	if (renameat(dirfd, tmp, dirfd, name) < 0) {
		int err = errno;

		unlinkat(dirfd, tmp, 0);
		return td__error_os(td__status_from_errno(err), err, "%s: rename", what);
	}
	if (!nosync && fsync(dirfd) < 0)
		return td__error_os(TD_EIO, errno, "%s: fsync of its directory", what);
	return TD_OK;
}

int td__write_fd(int fd, const void *data, size_t len, const char *what)
{
	int err = write_all(fd, data, len);

	return err ? td__error_os(td__status_from_errno(-err), -err, "%s: write", what) : TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Key encoding (tensordict's _encode_key_for_filesystem, robust_key=True)  */
/* ------------------------------------------------------------------------ */

static bool needs_escape(unsigned char c)
{
	return c < 0x20 || c == 0x7f || strchr("/<>:\"|?*\\ %", c) != NULL;
}

bool td__key_legacy_safe(const char *key, bool is_dir)
{
	if (strchr(key, '/') || strchr(key, '\\'))
		return false;
	if (key[0] && key[1] == ':')
		return false;
	if (is_dir && (!key[0] || !strcmp(key, ".") || !strcmp(key, "..")))
		return false;
	return true;
}

bool td__key_reserved(const char *key)
{
	return !strcmp(key, "shape") || !strcmp(key, "device") || !strcmp(key, "_type") ||
		!strcmp(key, "_format_version") || !strcmp(key, "_class");
}

int td_store_encode_key(char *out, size_t cap, const char *name)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p;
	size_t n = 0, w = 0;

	if (!name)
		return td__error(TD_EINVAL, "td_store_encode_key: NULL name");
	if (!out && cap)
		return td__error(TD_EINVAL, "td_store_encode_key: NULL buffer of %zu bytes", cap);
	if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		const char *s = name[0] == '\0' ? "%" : name[1] == '\0' ? "%2E" : "%2E%2E";

		n = strlen(s);
		if (cap)
			snprintf(out, cap, "%s", s);
		return (int)n;
	}
	/* n counts the whole encoding; w what was written (whole escapes only). */
	for (p = (const unsigned char *)name; *p; p++) {
		size_t step = needs_escape(*p) ? 3 : 1;

		if (w == n && n + step < cap) {
			if (step == 3) {
				out[w++] = '%';
				out[w++] = hex[*p >> 4];
				out[w++] = hex[*p & 15];
			} else {
				out[w++] = (char)*p;
			}
		}
		n += step;
		if (n > INT_MAX - 3)
			return td__error(TD_EOVERFLOW, "td_store_encode_key: name too long");
	}
	if (cap)
		out[w] = '\0';
	return (int)n;
}
