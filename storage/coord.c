/* SPDX-License-Identifier: MIT */
/*
 * coord.c - the coordination file, `.tdstore-coord` in a store's root
 * directory (doc/format.md, "Coordination file"): what processes sharing a
 * store share live. It holds the schema generation, bumped after every
 * committed schema change, and its descriptor carries the writer lock
 * (flock: exclusive for a schema change, shared while a dict is loaded).
 * The file is 4096 bytes, mapped shared; it is never truncated.
 */
#include "store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int check_header(const td__coord_header *h, const char *what)
{
	if (memcmp(h->magic, TD_COORD_MAGIC, sizeof(h->magic)) != 0)
		return td__error(TD_ECORRUPT, "%s: not a tdstore coordination file (bad magic)", what);
	if (h->version != TD_COORD_VERSION)
		return td__error(TD_EVERSION, "%s: coordination file version %u, this library reads %u",
			what, (unsigned)h->version, TD_COORD_VERSION);
	if (h->header_size != TD_COORD_HEADER_SIZE)
		return td__error(TD_ECORRUPT, "%s: header size %u, expected %u", what,
			(unsigned)h->header_size, TD_COORD_HEADER_SIZE);
	return TD_OK;
}

/*
 * Whether the file has not been initialized yet: empty (just created), or
 * TD_COORD_FILE_SIZE zero bytes (created, then a crash before its bytes
 * reached the disk: it is not synced on its own, see init_file()).
 */
static int uninitialized(int fd, const struct stat *sb, const char *what, bool *out)
{
	char page[TD_COORD_FILE_SIZE];
	ssize_t n;

	*out = sb->st_size == 0;
	if (sb->st_size != TD_COORD_FILE_SIZE)
		return TD_OK;
	n = pread(fd, page, sizeof(page), 0);
	if (n < 0)
		return td__error_os(TD_EIO, errno, "%s: read", what);
	*out = n == (ssize_t)sizeof(page) && td__all_zero(page, sizeof(page));
	return TD_OK;
}

/*
 * Write the header of a new coordination file, under the exclusive lock.
 * It is not synced here: the first commit's sync of the filesystem
 * (doc/format.md 6.4, step 3) makes it durable with the leaf data, one
 * barrier less per new store. A crash before that leaves it missing,
 * empty or zeroed, which the next writer initializes again.
 */
static int init_file(int fd, const char *what)
{
	static char page[TD_COORD_FILE_SIZE];
	td__coord_header *h = (td__coord_header *)page;
	struct stat sb;
	bool fresh;
	ssize_t n;

	if (fstat(fd, &sb) < 0)
		return td__error_os(TD_EIO, errno, "%s: fstat", what);
	if (!S_ISREG(sb.st_mode))
		return td__error(TD_ECORRUPT, "%s: not a regular file", what);
	TD_TRY(uninitialized(fd, &sb, what, &fresh));
	if (!fresh)
		return TD_OK; /* another process initialized it first */
	memset(page, 0, sizeof(page));
	memcpy(h->magic, TD_COORD_MAGIC, sizeof(h->magic));
	h->version = TD_COORD_VERSION;
	h->header_size = TD_COORD_HEADER_SIZE;
	n = pwrite(fd, page, sizeof(page), 0);
	if (n != (ssize_t)sizeof(page))
		return td__error_os(td__status_from_errno(n < 0 ? errno : ENOSPC), n < 0 ? errno : ENOSPC,
			"%s: write", what);
	return TD_OK;
}

int td__coord_open(td__coord *c, int dirfd, const char *root, bool create)
{
	char what[512];
	struct stat sb;
	void *p;
	int fd, rc;

	c->fd = -1;
	c->hdr = NULL;
	snprintf(what, sizeof(what), "%s/" TD_COORD_NAME, root);
	fd = openat(dirfd, TD_COORD_NAME,
		(create ? O_RDWR | O_CREAT : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC, 0666);
	if (fd < 0) {
		if (errno == ENOENT && !create)
			return TD_OK; /* a directory no tdstore writer has opened: no coordination yet */
		if (errno == ELOOP)
			return td__error(TD_ECORRUPT, "%s: is a symbolic link", what);
		if (errno == EACCES || errno == EROFS || errno == EPERM)
			return td__error_os(TD_EREADONLY, errno, "%s: open", what);
		return td__error_os(td__status_from_errno(errno), errno, "%s: open", what);
	}
	if (create) {
		if (flock(fd, LOCK_EX) < 0) {
			rc = td__error_os(TD_EIO, errno, "%s: lock", what);
			goto fail;
		}
		rc = init_file(fd, what);
		flock(fd, LOCK_UN);
		if (rc < 0)
			goto fail;
	}
	if (fstat(fd, &sb) < 0) {
		rc = td__error_os(TD_EIO, errno, "%s: fstat", what);
		goto fail;
	}
	if (!create && S_ISREG(sb.st_mode)) {
		bool fresh;

		/* Not initialized yet (or a crash cut that short): no coordination, as when missing. */
		rc = uninitialized(fd, &sb, what, &fresh);
		if (rc < 0)
			goto fail;
		if (fresh) {
			close(fd);
			return TD_OK;
		}
	}
	if (!S_ISREG(sb.st_mode) || sb.st_size < TD_COORD_FILE_SIZE) {
		rc = td__error(TD_ECORRUPT, "%s: %s", what,
			S_ISREG(sb.st_mode) ? "shorter than a coordination file" : "not a regular file");
		goto fail;
	}
	p = mmap(NULL, TD_COORD_FILE_SIZE, create ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd,
		0);
	if (p == MAP_FAILED) {
		rc = td__error_os(td__status_from_errno(errno), errno, "%s: mmap", what);
		goto fail;
	}
	rc = check_header(p, what);
	if (rc < 0) {
		munmap(p, TD_COORD_FILE_SIZE);
		goto fail;
	}
	c->fd = fd;
	c->hdr = p;
	return TD_OK;
fail:
	close(fd);
	return rc;
}

void td__coord_close(td__coord *c)
{
	if (c->hdr)
		munmap(c->hdr, TD_COORD_FILE_SIZE);
	if (c->fd >= 0)
		close(c->fd);
	c->hdr = NULL;
	c->fd = -1;
}

uint64_t td__coord_generation(const td__coord *c)
{
	return c->hdr ? atomic_load_explicit(&c->hdr->generation, memory_order_acquire) : 0;
}

uint64_t td__coord_bump(td__coord *c)
{
	return atomic_fetch_add_explicit(&c->hdr->generation, 1, memory_order_acq_rel) + 1;
}

int td__coord_lock(td__coord *c, bool exclusive)
{
	if (c->fd < 0)
		return TD_OK;
	while (flock(c->fd, exclusive ? LOCK_EX : LOCK_SH) < 0)
		if (errno != EINTR)
			return td__error_os(TD_EIO, errno, "store: locking the coordination file");
	return TD_OK;
}

void td__coord_unlock(td__coord *c)
{
	if (c->fd >= 0)
		flock(c->fd, LOCK_UN);
}
