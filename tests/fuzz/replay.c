/* SPDX-License-Identifier: MIT */
/*
 * replay.c - runs a fuzz target over every file of a corpus directory
 * without libFuzzer, and reports TAP: one test per file. `make check` runs
 * it (the sanitizer build and valgrind then check each input). Usage:
 *     replay-<target> [DIR]     (default: $TD_SRCDIR/tests/fuzz/corpus/<target>)
 * Options starting with "--" (as test harnesses pass) are ignored.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef TD_FUZZ_TARGET
#error "TD_FUZZ_TARGET must name the corpus"
#endif

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	char dir[4096], path[8192];
	struct dirent **names;
	const char *src = getenv("TD_SRCDIR");
	int i, n, count = 0, failed = 0;

	snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", src && *src ? src : ".", TD_FUZZ_TARGET);
	for (i = 1; i < argc; i++)
		if (strncmp(argv[i], "--", 2) != 0)
			snprintf(dir, sizeof(dir), "%s", argv[i]);
	n = scandir(dir, &names, NULL, by_name);
	if (n < 0) {
		printf("Bail out! cannot read the corpus %s\n", dir);
		return 1;
	}
	for (i = 0; i < n; i++)
		if (names[i]->d_name[0] != '.')
			count++;
	printf("1..%d\n", count);
	count = 0;
	for (i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		unsigned char *buf = NULL;
		long len;
		FILE *f;

		if (name[0] == '.') {
			free(names[i]);
			continue;
		}
		count++;
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		f = fopen(path, "rb");
		if (!f || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
			fseek(f, 0, SEEK_SET) != 0 || !(buf = malloc((size_t)len + 1)) ||
			fread(buf, 1, (size_t)len, f) != (size_t)len) {
			printf("not ok %d - %s: cannot read\n", count, name);
			failed++;
		} else {
			LLVMFuzzerTestOneInput(buf, (size_t)len);
			printf("ok %d - %s\n", count, name);
		}
		fflush(stdout);
		free(buf);
		if (f)
			fclose(f);
		free(names[i]);
	}
	free(names);
	return failed != 0;
}
