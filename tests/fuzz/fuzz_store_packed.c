/* SPDX-License-Identifier: MIT */
/*
 * fuzz_store_packed.c - fuzz target for the packed-store reader: the
 * header page, the two commit slots and the key index parser (doc/format.md
 * sections 3 and 4).
 *
 * Input: one flag byte, then the bytes of a packed file. With bit 0 of the
 * flag set, the target first recomputes every checksum the input holds
 * (header, both slots, and the index each slot points at when it lies
 * inside the input), so that mutations reach the checks behind the
 * checksums instead of stopping at them. The file is opened read-only;
 * when it opens, every leaf is read in full and the store is refreshed.
 * With bit 1 set it is then also opened read-write and one leaf is added
 * and one removed (appending to the temporary copy). td_store_open must
 * return (any status) and release everything: crashes, sanitizer reports
 * and leaks are the findings.
 *
 * Built with libFuzzer by `make fuzz`, and with replay.c into a program
 * that `make check` runs over tests/fuzz/corpus/store_packed.
 */
#define _GNU_SOURCE
#include <tdstore.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[256];

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Recompute the checksums of the header, the slots and the indexes they name. */
static void reseal(uint8_t *b, size_t n)
{
	static const size_t slots[2] = { 512, 1024 };
	int i;

	if (n < 4096)
		return;
	put_le64(b + 56, XXH64(b, 56, 0));
	for (i = 0; i < 2; i++) {
		uint8_t *s = b + slots[i];
		uint64_t off = le64(s + 8), len = le64(s + 16);

		if (off <= n && len >= 64 && len <= n - off) {
			uint8_t *ix = b + off;
			uint64_t body = le64(ix + 24);

			if (body <= len - 64)
				put_le64(ix + 56, XXH64(ix + 64, (size_t)body, XXH64(ix, 56, 0)));
		}
		put_le64(s + 56, XXH64(s, 56, 0));
	}
}

static void read_all(td_store *st)
{
	td_dict_iter *it;
	td_item item;
	volatile uint8_t sink = 0;

	if (td_dict_iter_new(&it, td_store_dict(st), TD_ITER_NESTED) < 0)
		return;
	while (td_dict_iter_next(&item, it) == 1) {
		if (item.value->kind == TD_VALUE_TENSOR) {
			const uint8_t *p = td_tensor_data(&item.value->tensor);
			size_t k, nb = td_tensor_nbytes(&item.value->tensor);

			for (k = 0; k < nb; k += 512)
				sink ^= p[k];
		}
	}
	td_dict_iter_free(it);
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const td_store_open_opts rw = { TD_STORE_OPEN_OPTS_VERSION, true };
	uint8_t *copy;
	td_store *st;
	int fd;

	if (size < 1)
		return 0;
	if (!path[0]) {
		snprintf(path, sizeof(path), "%s/td-fuzz-packed.XXXXXX",
			getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		fd = mkstemp(path);
		if (fd < 0)
			abort();
		close(fd);
	}
	copy = malloc(size);
	if (!copy)
		abort();
	memcpy(copy, data + 1, size - 1);
	if (data[0] & 1)
		reseal(copy, size - 1);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0 || (size > 1 && write(fd, copy, size - 1) != (ssize_t)(size - 1)))
		abort();
	close(fd);
	free(copy);

	if (td_store_open(&st, path, NULL) == TD_OK) {
		bool changed;

		read_all(st);
		td_store_refresh(&changed, st);
		td_store_close(st);
	}
	if ((data[0] & 2) && td_store_open(&st, path, &rw) == TD_OK) {
		const td_dict *d = td_store_dict(st);
		td_tensor t;

		int64_t rows = 1;
		int i;

		/* Small batches only: a forged batch of 2^40 rows would just exhaust memory. */
		for (i = 0; i < td_dict_batch_ndim(d) && rows <= (1 << 20); i++) {
			int64_t s = td_dict_batch_shape(d)[i];

			rows = s > (1 << 20) ? INT64_MAX : rows * s; /* at most 2^40 */
		}
		if (rows <= (1 << 20) &&
			td_tensor_zeros(&t, TD_DTYPE_U8, td_dict_batch_ndim(d), td_dict_batch_shape(d)) ==
				TD_OK) {
			if (td_store_add_tensor(st, "fuzz.leaf", &t) == TD_OK)
				td_store_remove(st, "fuzz");
			td_tensor_release(&t);
		}
		read_all(st);
		td_store_close(st);
	}
	td_error_clear();
	return 0;
}

/* The replay driver and libFuzzer both exit through here: remove the file. */
__attribute__((destructor)) static void cleanup(void)
{
	if (path[0])
		unlink(path);
}
