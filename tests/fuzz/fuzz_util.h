/* SPDX-License-Identifier: MIT */
/*
 * fuzz_util.h - what the directory-store fuzz targets share: a private
 * temporary directory, writing a file into it, and what they do with a
 * store that opens: touch every mapped byte of every leaf, as a reader
 * would, so that a mapping shorter than its tensor is a finding. Included
 * by the targets.
 */
#ifndef TD_FUZZ_UTIL_H
#define TD_FUZZ_UTIL_H

#include <tdstore.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Make a new directory <$TMPDIR or /tmp>/td-fuzz-<tag>.XXXXXX into dir; abort on failure. */
static void td_fuzz_tmpdir(char *dir, size_t len, const char *tag)
{
	const char *base = getenv("TMPDIR");

	snprintf(dir, len, "%s/td-fuzz-%s.XXXXXX", base && *base ? base : "/tmp", tag);
	if (!mkdtemp(dir))
		abort();
}

/* Write the file dir/name holding p[0..n) (replacing it); abort on failure. */
static void td_fuzz_put(const char *dir, const char *name, const void *p, size_t n)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
		abort();
	close(fd);
}

/* td_store_open() options of a read-write open. */
static const td_store_open_opts td_fuzz_rw = { TD_STORE_OPEN_OPTS_VERSION, true };

/* Open the store at `path` (read-write when `writable`), read every leaf in full, close it. */
static void td_fuzz_open_and_read(const char *path, bool writable)
{
	td_store *st = NULL;
	td_dict_iter *it;
	td_item item;

	if (td_store_open(&st, path, writable ? &td_fuzz_rw : NULL) != TD_OK)
		return;
	if (td_dict_iter_new(&it, td_store_dict(st), TD_ITER_NESTED | TD_ITER_LEAVES_ONLY) == 0) {
		while (td_dict_iter_next(&item, it) == 1) {
			const td_value *v = item.value;
			volatile unsigned char sink = 0;
			size_t i, n;

			if (v->kind != TD_VALUE_TENSOR)
				continue;
			n = td_tensor_nbytes(&v->tensor);
			for (i = 0; i < n; i++)
				sink ^= ((const unsigned char *)td_tensor_data(&v->tensor))[i];
			(void)sink;
		}
		td_dict_iter_free(it);
	}
	td_store_close(st);
}

#endif /* TD_FUZZ_UTIL_H */
