/* SPDX-License-Identifier: MIT */
/*
 * fuzz_store_index.c - fuzz target for the directory key index reader:
 * the input is a store's `.tdstore-index` (doc/format.md section 7). Each
 * input is parsed as it is and, with its checksums (the file's and its key
 * index's) recomputed, parsed again, so that mutations reach the checks
 * behind the checksums; the resealed bytes are then the index of a store
 * and that store is opened read-only and read-write, every leaf read in
 * full. The store is made once: a root of batch [2] with leaves "x",
 * "my key" (under its legacy raw name) and "none" (no elements), a string
 * "s", an array of strings "w", a nested dict "sub" with "y", a
 * tensorclass "tc" (fields in tc/_tensordict/) and a dict under the raw
 * directory name "raw dir"; one change (a leaf added and removed) writes
 * its index, which is the seed of the corpus (set TD_FUZZ_SEED=FILE to
 * have a copy written there). The calls must return (any status) and
 * release everything: crashes, sanitizer reports and leaks are the
 * findings.
 *
 * Built with libFuzzer by `make fuzz`, and with replay.c into the program
 * `make check` runs over tests/fuzz/corpus/store_index (linked against the
 * library's convenience archive: the parser is internal).
 */
#define _GNU_SOURCE
#include "dirindex.h"
#include "fuzz_util.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TAIL(shp) \
	"\"shape\": " shp ", \"device\": \"cpu\", " \
	"\"_type\": \"<class 'tensordict._td.TensorDict'>\"}"
#define LEAF(dt, shp) \
	"{\"device\": \"cpu\", \"shape\": " shp ", \"dtype\": \"" dt "\", " \
	"\"is_nested\": false}"

/* The store, as tensordict (and a hand) would have written it: (path, text) pairs. */
static const char *const files[][2] = {
	{ "meta.json",
		"{\"x\": " LEAF("torch.float32", "[2, 3]") ", \"my key\": " LEAF("torch.int16",
			"[2]") ", \"none\": " LEAF("torch.int8",
			"[2, 0]") ", \"s\": "
					  "{\"type\": \"NonTensorData\"}, \"w\": {\"type\": \"NonTensorStack\"}, \"sub\": "
					  "{\"type\": \"TensorDict\"}, \"tc\": {\"type\": \"Obs\"}, \"raw dir\": {\"type\": "
					  "\"TensorDict\"}, " TAIL("[2]") },
	{ "x.memmap", "0123456789abcdefghijklmn" },
	{ "my key.memmap", "wxyz" },
	{ "s/", NULL },
	{ "s/meta.json",
		"{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", "
		"\"data\": \"hello\", \"_metadata\": null, \"_is_non_tensor\": true}" },
	{ "w/", NULL },
	{ "w/meta.json",
		"{\"_type\":\"<class 'tensordict.tensorclass.NonTensorStack'>\","
		"\"_format_version\":1,\"_class\":\"tensordict:NonTensorStack\",\"stack_dim\":0,"
		"\"device\":null,\"data\":[\"a\",\"b\"]}" },
	{ "sub/", NULL },
	{ "sub/meta.json", "{\"y\": " LEAF("torch.uint8", "[2, 2]") ", " TAIL("[2]") },
	{ "sub/y.memmap", "abcd" },
	{ "tc/", NULL },
	{ "tc/meta.json", "{\"_type\": \"<class '__main__.Obs'>\"}" },
	{ "tc/_tensordict/", NULL },
	{ "tc/_tensordict/meta.json", "{\"p\": " LEAF("torch.int32", "[2]") ", " TAIL("[2]") },
	{ "tc/_tensordict/p.memmap", "pppppppp" },
	{ "raw dir/", NULL },
	{ "raw dir/meta.json", "{\"q\": " LEAF("torch.bool", "[2]") ", " TAIL("[2]") },
	{ "raw dir/q.memmap", "\001\001" },
};

static char dir[256];

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void put(const char *name, const void *p, size_t n)
{
	td_fuzz_put(dir, name, p, n);
}

/* Remove the store (the replay driver and libFuzzer both exit through here). */
static void cleanup(void)
{
	static const char *const extra[] = { TD_DIRINDEX_NAME, ".tdstore-coord" };
	char path[512];
	size_t i;

	for (i = sizeof(files) / sizeof(files[0]); i-- > 0;) {
		path_of(path, sizeof(path), files[i][0]);
		if (files[i][1])
			unlink(path);
		else
			rmdir(path);
	}
	for (i = 0; i < 2; i++) {
		path_of(path, sizeof(path), extra[i]);
		unlink(path);
	}
	rmdir(dir);
}

/* The store's index, as tdstore writes it at a change; copied to $TD_FUZZ_SEED if set. */
static void write_seed(void)
{
	const char *seed = getenv("TD_FUZZ_SEED");
	td_store *st;
	td_tensor t;

	if (td_store_open(&st, dir, &td_fuzz_rw) != TD_OK ||
		td_tensor_zeros(&t, TD_DTYPE_U8, 1, (const int64_t[]){ 2 }) != TD_OK ||
		td_store_add_tensor(st, "probe", &t) != TD_OK || td_store_remove(st, "probe") != TD_OK)
		abort();
	td_tensor_release(&t);
	td_store_close(st);
	if (seed && *seed) {
		char path[512], *buf;
		size_t len;
		FILE *f;

		path_of(path, sizeof(path), TD_DIRINDEX_NAME);
		if (td__read_small_file(AT_FDCWD, path, 1 << 30, &buf, &len, path) != TD_OK ||
			!(f = fopen(seed, "wb")) || fwrite(buf, 1, len, f) != len)
			abort();
		fclose(f);
		td__free(buf);
	}
}

static void setup(void)
{
	char path[512];
	size_t i;

	td_fuzz_tmpdir(dir, sizeof(dir), "index");
	atexit(cleanup);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		path_of(path, sizeof(path), files[i][0]);
		if (!files[i][1] && mkdir(path, 0755) < 0)
			abort();
		if (files[i][1])
			put(files[i][0], files[i][1], strlen(files[i][1]));
	}
	write_seed();
}

/* Recompute the key index's checksum, then the file's (doc/format.md 3.1, 7.2). */
static void reseal(uint8_t *b, size_t n)
{
	uint64_t ilen;

	if (n < TD_DIRINDEX_HEADER_SIZE)
		return;
	ilen = td__le64(b + 32);
	if (ilen >= TD_KEYINDEX_HEADER_SIZE && ilen <= n - TD_DIRINDEX_HEADER_SIZE) {
		uint8_t *ix = b + TD_DIRINDEX_HEADER_SIZE;

		td__put_le64(ix + 56, XXH64(ix + 64, (size_t)ilen - 64, XXH64(ix, 56, 0)));
	}
	td__put_le64(b + 56, XXH64(b + 64, n - 64, XXH64(b, 56, 0)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	td__dirindex dx;
	uint8_t *copy;

	if (!dir[0])
		setup();
	td__dirindex_parse(&dx, data, size, "fuzz");
	td__dirindex_free(&dx);
	copy = malloc(size ? size : 1);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	reseal(copy, size);
	td__dirindex_parse(&dx, copy, size, "fuzz");
	td__dirindex_free(&dx);
	put(TD_DIRINDEX_NAME, copy, size);
	free(copy);
	td_fuzz_open_and_read(dir, false);
	td_fuzz_open_and_read(dir, true);
	td_error_clear();
	return 0;
}
