/* SPDX-License-Identifier: MIT */
/*
 * fuzz_store_meta.c - fuzz target for the directory-store reader: the
 * input is the root meta.json of a store, optionally followed by the line
 * "\n--sub--\n" and the meta.json of its sub-directory "sub/". The store
 * directory also holds a 256-byte leaf file "x.memmap" and "sub/y.memmap",
 * so that inputs naming them reach the mapping code. td_store_open must
 * return (any status) and release everything: crashes, sanitizer reports
 * and leaks are the findings.
 *
 * Built two ways: with libFuzzer (`make fuzz`, clang) to search, and with
 * replay.c into a plain program that `make check` runs over the corpus in
 * tests/fuzz/corpus/store_meta.
 */
#define _GNU_SOURCE
#include <tdstore.h>
#include "fuzz_util.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[256];

static void put(const char *name, const void *p, size_t n)
{
	td_fuzz_put(dir, name, p, n);
}

static void cleanup(void)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/sub/meta.json", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/sub/y.memmap", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/sub", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/meta.json", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/x.memmap", dir);
	unlink(path);
	rmdir(dir);
}

static void setup(void)
{
	static unsigned char leaf[256];
	char path[512];

	td_fuzz_tmpdir(dir, sizeof(dir), "meta");
	memset(leaf, 0x3f, sizeof(leaf));
	put("x.memmap", leaf, sizeof(leaf));
	snprintf(path, sizeof(path), "%s/sub", dir);
	if (mkdir(path, 0755) < 0)
		abort();
	put("sub/y.memmap", leaf, sizeof(leaf));
	atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char sep[] = "\n--sub--\n";
	const uint8_t *sub = NULL;
	size_t root = size;

	if (!dir[0])
		setup();
	sub = memmem(data, size, sep, sizeof(sep) - 1);
	if (sub) {
		root = (size_t)(sub - data);
		sub += sizeof(sep) - 1;
	}
	put("meta.json", data, root);
	if (sub)
		put("sub/meta.json", sub, size - (size_t)(sub - data));
	else
		put("sub/meta.json", "{}", 2);
	td_fuzz_open_and_read(dir, false);
	return 0;
}
