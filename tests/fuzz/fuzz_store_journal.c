/* SPDX-License-Identifier: MIT */
/*
 * fuzz_store_journal.c - fuzz target for the redo journal's reader: the
 * input is a store's `.tdstore-journal` (doc/format.md section 6). The
 * store beside it is reset for every input: a root of batch [4] with a
 * leaf "x.memmap" and a nested dict "sub/" with "y.memmap", temporary
 * files ".tdstore-tmp.1.1" (in sub/) and ".tdstore-tmp.1.2" (in the root)
 * holding the store grown to 8 rows, a symbolic link "link" -> "sub" and a
 * directory ".tdstore-tmp.1.3". Each input is opened read-only (the
 * journal read, not redone) and then read-write (the journal redone or
 * dropped, under the writer lock). The calls must return (any status) and
 * release everything: crashes, sanitizer reports and leaks are the
 * findings.
 *
 * Built with libFuzzer by `make fuzz` and with replay.c into the program
 * `make check` runs over tests/fuzz/corpus/store_journal.
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

#define TAIL(shp) \
	"\"shape\": " shp ", \"device\": \"cpu\", " \
	"\"_type\": \"<class 'tensordict._td.TensorDict'>\"}"
#define ROOT(n) \
	"{\"x\": {\"device\": \"cpu\", \"shape\": [" n "], \"dtype\": \"torch.int32\", " \
	"\"is_nested\": false}, \"sub\": {\"type\": \"TensorDict\"}, " TAIL("[" n "]")
#define SUB(n) \
	"{\"y\": {\"device\": \"cpu\", \"shape\": [" n ", 2], \"dtype\": \"torch.int64\", " \
	"\"is_nested\": false}, " TAIL("[" n "]")

static char dir[256];

static void put(const char *name, const void *p, size_t n)
{
	td_fuzz_put(dir, name, p, n);
}

static void drop(const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

static void cleanup(void)
{
	static const char *const files[] = {
		"sub/meta.json",
		"sub/y.memmap",
		"sub/.tdstore-tmp.1.1",
		"meta.json",
		"x.memmap",
		".tdstore-tmp.1.2",
		".tdstore-journal",
		".tdstore-coord",
		"link",
	};
	char path[512];
	size_t i;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		drop(files[i]);
	snprintf(path, sizeof(path), "%s/sub", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/.tdstore-tmp.1.3", dir);
	rmdir(path);
	rmdir(dir);
}

static void setup(void)
{
	static unsigned char leaf[128];
	char path[512];

	td_fuzz_tmpdir(dir, sizeof(dir), "journal");
	snprintf(path, sizeof(path), "%s/sub", dir);
	if (mkdir(path, 0755) < 0)
		abort();
	snprintf(path, sizeof(path), "%s/.tdstore-tmp.1.3", dir);
	if (mkdir(path, 0755) < 0)
		abort();
	snprintf(path, sizeof(path), "%s/link", dir);
	if (symlink("sub", path) < 0)
		abort();
	memset(leaf, 0x11, sizeof(leaf));
	put("x.memmap", leaf, 8 * 4);
	put("sub/y.memmap", leaf, 8 * 2 * 8);
	atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dir[0])
		setup();
	/* The state a writer killed while growing the store to 8 rows leaves. */
	put("meta.json", ROOT("4"), strlen(ROOT("4")));
	put("sub/meta.json", SUB("4"), strlen(SUB("4")));
	put("sub/.tdstore-tmp.1.1", SUB("8"), strlen(SUB("8")));
	put(".tdstore-tmp.1.2", ROOT("8"), strlen(ROOT("8")));
	put(".tdstore-journal", data, size);
	td_fuzz_open_and_read(dir, false);
	td_fuzz_open_and_read(dir, true);
	return 0;
}
