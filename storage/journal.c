/* SPDX-License-Identifier: MIT */
/*
 * journal.c - the redo journal that makes a commit of several meta.json
 * files atomic (doc/format.md, section 6). A commit stages each new
 * meta.json under a temporary name, writes `.tdstore-journal` (the list of
 * directories and their temporary files, checksummed), renames, and
 * removes the journal. After a crash, the next writer redoes a sealed
 * journal and a reader that cannot write loads the listed directories
 * from their temporary files, so every tdstore reader sees the old state
 * or the new one. The journal is untrusted input: every size is checked
 * and every path is opened one component at a time without following
 * symbolic links.
 */
#include "store_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* Up to this many directories, a commit fsyncs each after the renames; beyond, one syncfs. */
#define SYNC_DIRS_MAX 8

/* Directory levels the sweep of temporary files descends (tensorclasses add one per dict). */
#define SWEEP_MAX_DEPTH (2 * TD_KEY_MAX_DEPTH + 2)

/* ---- relative paths ---- */

int td__relpath_push(td__relpath *p, const char *name, size_t *mark)
{
	size_t nlen = strlen(name), need;

	*mark = p->len;
	if (!td__add_size(p->len, nlen + 2, &need) || need - 1 > TD_JOURNAL_PATH_MAX)
		return td__error(TD_ENOTSUP, "store: a directory path longer than %u bytes",
			TD_JOURNAL_PATH_MAX);
	if (need > p->cap) {
		size_t cap = need < 256 ? 256 : 2 * need;
		char *s = td__realloc(p->s, cap);

		if (!s)
			return td__error_nomem(cap);
		p->s = s;
		p->cap = cap;
	}
	if (p->len)
		p->s[p->len++] = '/';
	memcpy(p->s + p->len, name, nlen + 1);
	p->len += nlen;
	return TD_OK;
}

void td__relpath_pop(td__relpath *p, size_t mark)
{
	if (p->s && mark <= p->len) {
		p->len = mark;
		p->s[mark] = '\0';
	}
}

const char *td__relpath_str(const td__relpath *p)
{
	return p->s ? p->s : "";
}

void td__relpath_free(td__relpath *p)
{
	td__free(p->s);
	p->s = NULL;
	p->len = p->cap = 0;
}

/* ---- parsing ---- */

/* A path of an entry: "" or components of 1..255 bytes joined by '/', none "." or "..", no NUL. */
static bool valid_path(const char *s, size_t len)
{
	size_t i, start = 0;

	if (len == 0)
		return true;
	for (i = 0; i <= len; i++) {
		size_t clen;

		if (i < len && s[i] == '\0')
			return false;
		if (i < len && s[i] != '/')
			continue;
		clen = i - start;
		if (clen == 0 || clen > 255)
			return false;
		if ((clen == 1 && s[start] == '.') || (clen == 2 && s[start] == '.' && s[start + 1] == '.'))
			return false;
		start = i + 1;
	}
	return true;
}

/* A temporary name: ".tdstore-tmp." and at least one digit or '.', at most 63 bytes. */
static bool valid_tmp_name(const char *s, size_t len)
{
	size_t plen = sizeof(TD_TMP_PREFIX) - 1, i;

	if (len <= plen || len > TD_TMP_NAME_MAX || memcmp(s, TD_TMP_PREFIX, plen) != 0)
		return false;
	for (i = plen; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || s[i] == '.'))
			return false;
	return true;
}

void td__journal_free(td__journal *j)
{
	td__free(j->e);
	j->e = NULL;
	j->count = 0;
	j->sealed = false;
}

int td__journal_parse(const void *data, size_t len, td__journal *j, const char *what)
{
	const unsigned char *p = data;
	const size_t fixed = TD_JOURNAL_HEADER_SIZE + TD_JOURNAL_TRAILER_SIZE;
	uint32_t version, count, flags;
	uint64_t body;
	size_t off, i;

	memset(j, 0, sizeof(*j));
	if (len < fixed || memcmp(p, TD_JOURNAL_MAGIC, 8) != 0)
		return TD_OK;
	/* A newer writer's journal is neither applied nor ignored. */
	version = td__le32(p + 8);
	if (version != TD_JOURNAL_VERSION)
		return td__error(TD_EVERSION, "%s: journal version %u, this library reads %u", what,
			(unsigned)version, TD_JOURNAL_VERSION);
	body = td__le64(p + 24);
	if (td__le32(p + 12) != TD_JOURNAL_HEADER_SIZE || body != (uint64_t)(len - fixed) ||
		XXH64(p, TD_JOURNAL_HEADER_SIZE + (size_t)body, 0) !=
			td__le64(p + TD_JOURNAL_HEADER_SIZE + (size_t)body))
		return TD_OK; /* torn or truncated: the commit never happened */
	j->sealed = true;
	count = td__le32(p + 16);
	flags = td__le32(p + 20);
	if (flags != 0)
		return td__error(TD_ECORRUPT, "%s: reserved flags 0x%x are set", what, (unsigned)flags);
	if (count == 0 || count > TD_JOURNAL_MAX_ENTRIES || count > body / TD_JOURNAL_ENTRY_SIZE)
		return td__error(TD_ECORRUPT, "%s: %u entries in %llu bytes", what, (unsigned)count,
			(unsigned long long)body);
	j->e = td__calloc(count, sizeof(*j->e));
	if (!j->e)
		return td__error_nomem((size_t)count * sizeof(*j->e));
	off = TD_JOURNAL_HEADER_SIZE;
	for (i = 0; i < count; i++) {
		const size_t end = TD_JOURNAL_HEADER_SIZE + (size_t)body;
		td__journal_ent *e = &j->e[i];

		if (end - off < TD_JOURNAL_ENTRY_SIZE)
			return td__error(TD_ECORRUPT, "%s: entry %zu is cut short", what, i);
		e->path_len = td__le16(p + off);
		e->name_len = td__le16(p + off + offsetof(td__journal_entry, name_len));
		off += TD_JOURNAL_ENTRY_SIZE;
		if (end - off < e->path_len + e->name_len)
			return td__error(TD_ECORRUPT, "%s: entry %zu is cut short", what, i);
		e->path = (const char *)p + off;
		e->name = e->path + e->path_len;
		off += e->path_len + e->name_len;
		if (!valid_path(e->path, e->path_len))
			return td__error(TD_ECORRUPT, "%s: entry %zu: invalid directory path", what, i);
		if (!valid_tmp_name(e->name, e->name_len))
			return td__error(TD_ECORRUPT, "%s: entry %zu: invalid temporary file name", what, i);
	}
	if (off != TD_JOURNAL_HEADER_SIZE + body)
		return td__error(TD_ECORRUPT, "%s: %llu bytes after the last entry", what,
			(unsigned long long)(TD_JOURNAL_HEADER_SIZE + body - off));
	j->count = count;
	return TD_OK;
}

/* ---- reading and applying ---- */

/* The journal's bytes; *present false when there is none. Larger than the limit: empty (unsealed). */
static int journal_read(int rootfd, const char *what, bool *present, char **buf, size_t *len)
{
	uint64_t size;
	size_t done = 0;
	int fd, rc;

	*present = false;
	*buf = NULL;
	*len = 0;
	fd = openat(rootfd, TD_JOURNAL_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return TD_OK;
	if (fd < 0)
		return td__file_error(errno, what, "open");
	rc = td__fstat_regular(fd, what, &size);
	if (rc < 0)
		goto out;
	*present = true;
	if (size > TD_JOURNAL_MAX_BYTES)
		goto out;
	*buf = td__malloc((size_t)size + 1);
	if (!*buf) {
		rc = td__error_nomem((size_t)size + 1);
		goto out;
	}
	while (done < (size_t)size) {
		ssize_t n = read(fd, *buf + done, (size_t)size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = td__error_os(TD_EIO, errno, "%s: read", what);
			td__free(*buf);
			*buf = NULL;
			goto out;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*len = done;
out:
	close(fd);
	return rc;
}

/* Read and parse the journal of the store at rootfd. */
static int journal_load(int rootfd, const char *root, td__journal *j, bool *present, char **buf)
{
	char what[512];
	size_t len;
	int rc;

	memset(j, 0, sizeof(*j));
	snprintf(what, sizeof(what), "%s/" TD_JOURNAL_NAME, root);
	TD_TRY(journal_read(rootfd, what, present, buf, &len));
	if (!*present)
		return TD_OK;
	rc = td__journal_parse(*buf ? *buf : "", len, j, what);
	if (rc < 0) {
		td__journal_free(j);
		td__free(*buf);
		*buf = NULL;
	}
	return rc;
}

/* Open an entry's directory, one component at a time, refusing links and non-directories. */
static int open_entry_dir(int rootfd, const td__journal_ent *e, const char *root, int *out)
{
	char comp[256];
	size_t start = 0, i;
	int fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);

	*out = -1;
	if (fd < 0)
		return td__error_os(td__status_from_errno(errno), errno, "%s: dup", root);
	for (i = 0; e->path_len && i <= e->path_len; i++) {
		int next, err;

		if (i < e->path_len && e->path[i] != '/')
			continue;
		memcpy(comp, e->path + start, i - start); /* valid_path bounds it by 255 */
		comp[i - start] = '\0';
		start = i + 1;
		next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		err = errno;
		close(fd);
		if (next < 0) {
			if (err == ENOENT || err == ELOOP || err == ENOTDIR)
				return td__error(TD_ECORRUPT,
					"%s/" TD_JOURNAL_NAME ": \"%.*s\" is not a directory of the store", root,
					(int)e->path_len, e->path);
			return td__error_os(td__status_from_errno(err), err, "%s/%.*s: open", root,
				(int)e->path_len, e->path);
		}
		fd = next;
	}
	*out = fd;
	return TD_OK;
}

/*
 * Whether the entry's temporary file is still there (a regular file: it
 * was not renamed yet). Anything else under that name is corrupt.
 */
static int tmp_present(int dirfd, const td__journal_ent *e, const char *root, char *name,
	bool *present)
{
	struct stat sb;

	memcpy(name, e->name, e->name_len); /* valid_tmp_name bounds it by TD_TMP_NAME_MAX */
	name[e->name_len] = '\0';
	*present = false;
	if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return TD_OK;
		return td__error_os(td__status_from_errno(errno), errno, "%s/%.*s/%s: stat", root,
			(int)e->path_len, e->path, name);
	}
	if (!S_ISREG(sb.st_mode))
		return td__error(TD_ECORRUPT, "%s/%.*s/%s: not a regular file", root, (int)e->path_len,
			e->path, name);
	*present = true;
	return TD_OK;
}

/* Remove every uncommitted temporary file under dirfd (best effort; under the writer lock). */
static void sweep_temps(int dirfd, int depth)
{
	const size_t plen = sizeof(TD_TMP_PREFIX) - 1;
	struct dirent *de;
	DIR *d;
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat sb;
		int sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!strncmp(de->d_name, TD_TMP_PREFIX, plen)) {
			if (fstatat(dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode))
				unlinkat(dirfd, de->d_name, 0);
			continue;
		}
		if (depth >= SWEEP_MAX_DEPTH || (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
			continue;
		sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0) {
			sweep_temps(sub, depth + 1);
			close(sub);
		}
	}
	closedir(d);
}

static int remove_journal(int rootfd, const char *root)
{
	if (unlinkat(rootfd, TD_JOURNAL_NAME, 0) < 0 && errno != ENOENT)
		return td__error_os(td__status_from_errno(errno), errno, "%s/" TD_JOURNAL_NAME ": unlink",
			root);
	if (fsync(rootfd) < 0)
		return td__error_os(TD_EIO, errno, "%s: fsync", root);
	return TD_OK;
}

int td__journal_recover(int rootfd, const char *root, bool *redone)
{
	char name[TD_TMP_NAME_MAX + 1];
	td__journal j;
	bool present, *live = NULL;
	char *buf = NULL;
	int *fds = NULL, rc;
	size_t i, opened = 0;

	*redone = false;
	TD_TRY(journal_load(rootfd, root, &j, &present, &buf));
	if (!present)
		return TD_OK;
	if (!j.sealed) {
		/* The writer died before sealing it: nothing was renamed. Drop its files. */
		sweep_temps(rootfd, 0);
		rc = remove_journal(rootfd, root);
		goto out;
	}
	fds = td__malloc(j.count * sizeof(*fds));
	live = td__calloc(j.count, sizeof(*live));
	if (!fds || !live) {
		rc = td__error_nomem(j.count * sizeof(*fds));
		goto out;
	}
	/* Check every entry before renaming anything. */
	for (rc = TD_OK; rc == TD_OK && opened < j.count; opened++) {
		rc = open_entry_dir(rootfd, &j.e[opened], root, &fds[opened]);
		if (rc < 0)
			break; /* fds[opened] is not open */
		rc = tmp_present(fds[opened], &j.e[opened], root, name, &live[opened]);
	}
	for (i = 0; rc == TD_OK && i < j.count; i++) {
		if (!live[i])
			continue; /* renamed before the crash */
		memcpy(name, j.e[i].name, j.e[i].name_len);
		name[j.e[i].name_len] = '\0';
		if (renameat(fds[i], name, fds[i], "meta.json") < 0)
			rc = td__error_os(td__status_from_errno(errno), errno, "%s/%.*s: rename", root,
				(int)j.e[i].path_len, j.e[i].path);
	}
	for (i = 0; rc == TD_OK && i < j.count; i++)
		if (live[i] && fsync(fds[i]) < 0)
			rc = td__error_os(TD_EIO, errno, "%s/%.*s: fsync", root, (int)j.e[i].path_len,
				j.e[i].path);
	if (rc == TD_OK)
		rc = remove_journal(rootfd, root);
	if (rc == TD_OK)
		*redone = true;
out:
	for (i = 0; i < opened && fds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	td__free(fds);
	td__free(live);
	td__journal_free(&j);
	td__free(buf);
	return rc;
}

/* ---- the read-only view ---- */

struct td__journal_view_ent {
	dev_t dev;
	ino_t ino;
	char name[TD_TMP_NAME_MAX + 1];
};

int td__journal_view_open(td__journal_view *v, int rootfd, const char *root)
{
	td__journal j;
	bool present;
	char *buf = NULL;
	size_t i;
	int rc;

	v->n = 0;
	v->e = NULL;
	TD_TRY(journal_load(rootfd, root, &j, &present, &buf));
	if (!present || !j.sealed) {
		td__journal_free(&j);
		td__free(buf);
		return TD_OK; /* an unsealed journal: its commit never happened */
	}
	v->e = td__calloc(j.count, sizeof(*v->e));
	rc = v->e ? TD_OK : td__error_nomem(j.count * sizeof(*v->e));
	for (i = 0; rc == TD_OK && i < j.count; i++) {
		struct td__journal_view_ent *ve = &v->e[v->n];
		struct stat sb;
		bool live;
		int fd;

		rc = open_entry_dir(rootfd, &j.e[i], root, &fd);
		if (rc < 0)
			break;
		rc = tmp_present(fd, &j.e[i], root, ve->name, &live);
		if (rc == TD_OK && live && fstat(fd, &sb) < 0)
			rc = td__error_os(TD_EIO, errno, "%s/%.*s: fstat", root, (int)j.e[i].path_len,
				j.e[i].path);
		close(fd);
		if (rc == TD_OK && live) {
			ve->dev = sb.st_dev;
			ve->ino = sb.st_ino;
			v->n++;
		}
	}
	td__journal_free(&j);
	td__free(buf);
	if (rc < 0)
		td__journal_view_free(v);
	return rc;
}

const char *td__journal_view_meta(const td__journal_view *v, int dirfd)
{
	struct stat sb;
	size_t i;

	if (v == NULL || v->n == 0 || fstat(dirfd, &sb) < 0)
		return "meta.json";
	/* The last entry for a directory wins, as the last rename would. */
	for (i = v->n; i-- > 0;)
		if (v->e[i].dev == sb.st_dev && v->e[i].ino == sb.st_ino)
			return v->e[i].name;
	return "meta.json";
}

void td__journal_view_free(td__journal_view *v)
{
	td__free(v->e);
	v->e = NULL;
	v->n = 0;
}

/* ---- committing ---- */

/* Record a meta.json for the commit: under a temporary name, or `in_place`. */
static int stage(td__commit *c, int dirfd, const char *path, const char *text, size_t len,
	bool in_place, const char *what)
{
	td__commit_entry *e;
	int rc;

	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 8, bytes;
		td__commit_entry *p;

		if (!td__mul_size(cap, sizeof(*p), &bytes))
			return td__error(TD_EOVERFLOW, "%s: too many directories", what);
		p = td__realloc(c->e, bytes);
		if (!p)
			return td__error_nomem(bytes);
		c->e = p;
		c->cap = cap;
	}
	e = &c->e[c->n];
	e->path = td__strndup(path, strlen(path));
	if (!e->path)
		return td__error_nomem(strlen(path) + 1);
	e->dirfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (e->dirfd < 0) {
		rc = td__error_os(td__status_from_errno(errno), errno, "%s: dup", what);
		td__free(e->path);
		return rc;
	}
	e->in_place = in_place;
	if (in_place) {
		snprintf(e->tmp, sizeof(e->tmp), "meta.json");
		rc = td__write_new(dirfd, e->tmp, text, len, what);
	} else {
		rc = td__write_temp(dirfd, text, len, false, e->tmp, sizeof(e->tmp), what);
	}
	if (rc < 0) {
		close(e->dirfd);
		td__free(e->path);
		return rc;
	}
	/* What the directory key index will list for it (meta.json stays below 64 MiB). */
	e->meta_length = (uint32_t)len;
	e->meta_hash = XXH3_64bits(text, len);
	c->n++;
	return TD_OK;
}

int td__commit_stage(td__commit *c, int dirfd, const char *path, const char *text, size_t len,
	const char *what)
{
	return stage(c, dirfd, path, text, len, false, what);
}

int td__commit_stage_new(td__commit *c, int dirfd, const char *path, const char *text, size_t len,
	const char *what)
{
	return stage(c, dirfd, path, text, len, true, what);
}

/* Empty the commit; with `unlink_tmp`, remove the staged files first. */
static void commit_clear(td__commit *c, bool unlink_tmp)
{
	size_t i;

	for (i = 0; i < c->n; i++) {
		if (unlink_tmp)
			unlinkat(c->e[i].dirfd, c->e[i].tmp, 0);
		close(c->e[i].dirfd);
		td__free(c->e[i].path);
	}
	td__free(c->e);
	c->e = NULL;
	c->n = c->cap = 0;
}

void td__commit_abort(td__commit *c)
{
	commit_clear(c, true);
}

/* Encode, write and (with `sync`) sync the journal listing the staged files. */
static int journal_write(const td__commit *c, size_t staged, int rootfd, bool sync,
	const char *what)
{
	size_t body = 0, total, off, i;
	unsigned char *buf;
	int fd, rc;

	if (staged > TD_JOURNAL_MAX_ENTRIES)
		return td__error(TD_ENOTSUP, "%s: %zu directories in one commit, more than %u", what,
			staged, TD_JOURNAL_MAX_ENTRIES);
	for (i = 0; i < c->n; i++) {
		size_t plen = strlen(c->e[i].path);

		if (c->e[i].in_place)
			continue;

		if (plen > TD_JOURNAL_PATH_MAX)
			return td__error(TD_ENOTSUP, "%s: a directory path longer than %u bytes", what,
				TD_JOURNAL_PATH_MAX);
		body += TD_JOURNAL_ENTRY_SIZE + plen + strlen(c->e[i].tmp);
		if (body > TD_JOURNAL_MAX_BYTES)
			return td__error(TD_ENOTSUP, "%s: a journal of more than %zu bytes", what,
				TD_JOURNAL_MAX_BYTES);
	}
	total = TD_JOURNAL_HEADER_SIZE + body + TD_JOURNAL_TRAILER_SIZE;
	buf = td__malloc(total);
	if (!buf)
		return td__error_nomem(total);
	memcpy(buf, TD_JOURNAL_MAGIC, 8);
	td__put_le32(buf + 8, TD_JOURNAL_VERSION);
	td__put_le32(buf + 12, TD_JOURNAL_HEADER_SIZE);
	td__put_le32(buf + 16, (uint32_t)staged);
	td__put_le32(buf + 20, 0);
	td__put_le64(buf + 24, body);
	off = TD_JOURNAL_HEADER_SIZE;
	for (i = 0; i < c->n; i++) {
		size_t plen = strlen(c->e[i].path), nlen = strlen(c->e[i].tmp);

		if (c->e[i].in_place)
			continue;
		td__put_le16(buf + off, (uint16_t)plen);
		td__put_le16(buf + off + offsetof(td__journal_entry, name_len), (uint16_t)nlen);
		memcpy(buf + off + TD_JOURNAL_ENTRY_SIZE, c->e[i].path, plen);
		memcpy(buf + off + TD_JOURNAL_ENTRY_SIZE + plen, c->e[i].tmp, nlen);
		off += TD_JOURNAL_ENTRY_SIZE + plen + nlen;
	}
	td__put_le64(buf + off, XXH64(buf, off, 0));
	fd = openat(rootfd, TD_JOURNAL_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		0666);
	if (fd < 0) {
		rc = td__error_os(td__status_from_errno(errno), errno, "%s/" TD_JOURNAL_NAME ": create",
			what);
		td__free(buf);
		return rc;
	}
	rc = td__write_fd(fd, buf, total, what);
	td__free(buf);
	if (rc == TD_OK && sync && fsync(fd) < 0)
		rc = td__error_os(TD_EIO, errno, "%s/" TD_JOURNAL_NAME ": fsync", what);
	if (close(fd) < 0 && rc == TD_OK)
		rc = td__error_os(TD_EIO, errno, "%s/" TD_JOURNAL_NAME ": close", what);
	/* The journal's name must be durable before the first rename. */
	if (rc == TD_OK && sync && fsync(rootfd) < 0)
		rc = td__error_os(TD_EIO, errno, "%s: fsync", what);
	if (rc < 0)
		unlinkat(rootfd, TD_JOURNAL_NAME, 0); /* unsealed for any reader: never happened */
	return rc;
}

int td__commit_run(td__commit *c, int rootfd, bool sync, const char *what)
{
	size_t staged = 0, i;
	bool journal;
	int rc = TD_OK;

	if (c->n == 0) {
		commit_clear(c, false);
		return TD_OK;
	}
	for (i = 0; i < c->n; i++)
		staged += !c->e[i].in_place;
	journal = staged > 1;
	/* Data first: every leaf and staged file durable before anything names it. */
	if (sync && syncfs(rootfd) < 0)
		rc = td__error_os(TD_EIO, errno, "%s: syncfs", what);
	if (rc == TD_OK && journal)
		rc = journal_write(c, staged, rootfd, sync, what);
	if (rc < 0) {
		commit_clear(c, true);
		return rc;
	}
	/* Sealed (or a single file): from here on the commit happens. */
	for (i = 0; rc == TD_OK && i < c->n; i++)
		if (!c->e[i].in_place &&
			renameat(c->e[i].dirfd, c->e[i].tmp, c->e[i].dirfd, "meta.json") < 0)
			rc = td__error_os(td__status_from_errno(errno), errno, "%s/%s: rename of meta.json",
				what, c->e[i].path);
	if (rc < 0 && !journal) {
		commit_clear(c, true);
		return rc;
	}
	/* The renames durable before the journal goes (a few directories: fsync each). */
	if (rc == TD_OK && sync && staged > SYNC_DIRS_MAX && syncfs(rootfd) < 0)
		rc = td__error_os(TD_EIO, errno, "%s: syncfs", what);
	for (i = 0; rc == TD_OK && sync && staged <= SYNC_DIRS_MAX && i < c->n; i++)
		if (!c->e[i].in_place && fsync(c->e[i].dirfd) < 0)
			rc = td__error_os(TD_EIO, errno, "%s/%s: fsync", what, c->e[i].path);
	/*
	 * On failure the journal stays: the next writer redoes what is left.
	 * Its removal needs no sync: a journal that comes back after a power
	 * loss lists files that are gone, and every writer recovers (drops
	 * it) before it stages files of its own.
	 */
	if (rc == TD_OK && journal && unlinkat(rootfd, TD_JOURNAL_NAME, 0) < 0)
		rc = td__error_os(td__status_from_errno(errno), errno, "%s/" TD_JOURNAL_NAME ": unlink",
			what);
	if (rc == TD_OK)
		td__dirmodel_note_commit(c->model, c);
	commit_clear(c, false);
	return rc;
}
