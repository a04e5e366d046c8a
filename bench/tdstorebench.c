/* SPDX-License-Identifier: MIT */
/*
 * tdstorebench.c - storage benchmarks (../shared/reference/benchmarks.md,
 * "Storage layouts"): saving a dict into a directory store against a raw
 * sequential write of the same bytes, opening stores of 10 to 10,000
 * leaves and of 10 MB against 1 GB (directory stores through their key
 * index, and again from their meta.json files alone: the open-json rows),
 * and reading every element of a freshly opened store against a raw read,
 * all measured in the same run on the same filesystem. Each figure is the
 * best of --repeat runs; the ratio column is ours / baseline (lower is
 * better; the save target is <= 1.25).
 * With --floor, save-files rows time the directory placement's files
 * created empty (what one file per leaf costs before any byte is written),
 * and save-rawfiles rows the same files with every byte written by write()
 * and one syncfs: the least a save in that layout can take.
 *
 * Usage: tdstorebench [--json] [--filter SUBSTR] [--repeat N] [--dir DIR]
 *                     [--large] [--quick] [--floor]
 *   --large  also the 1 GB sizes;  --quick  1 MB and at most 1,000 leaves, one run
 *   (a smoke test: make check runs it);  --floor  also the save-files rows.
 *   Exits 1 if a store reads back wrong.
 */
#define _GNU_SOURCE
#define BENCH_PROG "tdstorebench"
#include "bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MB ((int64_t)1000 * 1000)

static struct {
	bool json, large, quick, floor;
	const char *filter;
	int repeat;
	char dir[4096];
} opt = { false, false, false, false, NULL, 3, "" };

static int nrows;

static bool wanted(const char *name)
{
	return !opt.filter || strstr(name, opt.filter);
}

/* Resident memory of this process, in bytes. */
static long rss_bytes(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * sysconf(_SC_PAGESIZE);
}

static void row(const char *name, double ours, double raw, const char *raw_name, const char *extra)
{
	if (opt.json) {
		printf("%s{\"name\": \"%s\", \"seconds\": %.6g, \"baseline\": \"%s\", "
			   "\"baseline_seconds\": %.6g, \"ratio\": %.4g%s%s}",
			nrows ? ",\n  " : "[\n  ", name, ours, raw_name, raw, raw > 0 ? ours / raw : 0,
			extra[0] ? ", " : "", extra);
	} else {
		if (!nrows)
			printf("%-34s %12s %12s %-16s %8s  %s\n", "Name", "Ours", "Baseline", "(baseline)",
				"Ratio", "");
		printf("%-34s %10.3fms %10.3fms %-16s %7.2fx  %s\n", name, ours * 1e3, raw * 1e3, raw_name,
			raw > 0 ? ours / raw : 0, extra);
	}
	nrows++;
	fflush(stdout);
}

/* ---- fixtures ---- */

static void put(td_dict *d, const char *const *parts, size_t n, int ndim, const int64_t *shape,
	float value)
{
	td_tensor t;
	td_key *key;

	BENCH_CHECK(td_tensor_full(&t, TD_DTYPE_F32, ndim, shape, td_scalar_float(value)));
	BENCH_CHECK(td_key_from_path(&key, parts, n));
	BENCH_CHECK(td_dict_set_tensor_take_key(d, key, &t));
	td_key_free(key);
}

/* `n` float32 leaves of `bytes / n` bytes each, batch []. */
static td_dict *flat(int64_t bytes, int n)
{
	td_dict *d;
	int64_t shape[1] = { bytes / 4 / n };
	char key[32];
	const char *parts[1] = { key };
	int i;

	BENCH_CHECK(td_dict_new(&d, 0, NULL));
	for (i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "leaf%d", i);
		put(d, parts, 1, 1, shape, (float)i);
	}
	return d;
}

/* 100 groups x 20 float32 leaves. */
static td_dict *many_small(int64_t bytes)
{
	td_dict *d;
	int64_t shape[1] = { bytes / 4 / 2000 };
	char g[16], k[16];
	const char *parts[2] = { g, k };
	int i, j;

	BENCH_CHECK(td_dict_new(&d, 0, NULL));
	for (i = 0; i < 100; i++)
		for (j = 0; j < 20; j++) {
			snprintf(g, sizeof(g), "group%d", i);
			snprintf(k, sizeof(k), "leaf%d", j);
			put(d, parts, 2, 1, shape, (float)j);
		}
	return d;
}

/* A chain 12 levels deep, 4 float32 leaves per level. */
static td_dict *deep(int64_t bytes)
{
	static const char *names[] = { "a", "b", "c", "d" };
	const char *parts[13];
	int64_t shape[1] = { bytes / 4 / 48 };
	td_dict *d;
	int level, j;

	BENCH_CHECK(td_dict_new(&d, 0, NULL));
	for (level = 0; level < 12; level++) {
		parts[level] = "level";
		for (j = 0; j < 4; j++) {
			parts[level + 1] = names[j];
			put(d, parts, (size_t)level + 2, 1, shape, (float)j);
		}
	}
	return d;
}

/* nn.Transformer's parameters: 184 float32 leaves, 176,562,176 bytes. */
static td_dict *weights(void)
{
	td_dict *d;
	char layer[8];
	const char *parts[8];
	int side, l, i;

	BENCH_CHECK(td_dict_new(&d, 0, NULL));
	for (side = 0; side < 2; side++) {
		const char *stack = side ? "decoder" : "encoder";
		const char *attn[2] = { "self_attn", "multihead_attn" };
		int nattn = side ? 2 : 1, nnorm = side ? 3 : 2, a;

		for (l = 0; l < 6; l++) {
			snprintf(layer, sizeof(layer), "%d", l);
			parts[0] = stack;
			parts[1] = "layers";
			parts[2] = layer;
			for (a = 0; a < nattn; a++) {
				static const int64_t w[2] = { 1536, 512 }, b[1] = { 1536 }, ow[2] = { 512, 512 },
									 ob[1] = { 512 };

				parts[3] = attn[a];
				parts[4] = "in_proj_weight";
				put(d, parts, 5, 2, w, 0.01f);
				parts[4] = "in_proj_bias";
				put(d, parts, 5, 1, b, 0);
				parts[4] = "out_proj";
				parts[5] = "weight";
				put(d, parts, 6, 2, ow, 0.01f);
				parts[5] = "bias";
				put(d, parts, 6, 1, ob, 0);
			}
			{
				static const int64_t w1[2] = { 2048, 512 }, b1[1] = { 2048 }, w2[2] = { 512, 2048 },
									 b2[1] = { 512 };

				parts[3] = "linear1";
				parts[4] = "weight";
				put(d, parts, 5, 2, w1, 0.01f);
				parts[4] = "bias";
				put(d, parts, 5, 1, b1, 0);
				parts[3] = "linear2";
				parts[4] = "weight";
				put(d, parts, 5, 2, w2, 0.01f);
				parts[4] = "bias";
				put(d, parts, 5, 1, b2, 0);
			}
			for (i = 1; i <= nnorm; i++) {
				static const int64_t n512[1] = { 512 };
				char norm[8];

				snprintf(norm, sizeof(norm), "norm%d", i);
				parts[3] = norm;
				parts[4] = "weight";
				put(d, parts, 5, 1, n512, 1);
				parts[4] = "bias";
				put(d, parts, 5, 1, n512, 0);
			}
		}
		{
			static const int64_t n512[1] = { 512 };

			parts[0] = stack;
			parts[1] = "norm";
			parts[2] = "weight";
			put(d, parts, 3, 1, n512, 1);
			parts[2] = "bias";
			put(d, parts, 3, 1, n512, 0);
		}
	}
	return d;
}

/* ---- baselines ---- */

/* write() all of p[0..n-1] to fd. */
static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0)
			bench_die("write");
		p += w;
		n -= (size_t)w;
	}
}

/* Every leaf's bytes written one after the other into one file, then fsync. */
static double raw_write(const td_dict *d, const char *path)
{
	td_dict_iter *it;
	td_item item;
	double t0;
	int fd;

	BENCH_CHECK(td_dict_iter_new(&it, d, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY));
	t0 = bench_now();
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		bench_die(path);
	while (td_dict_iter_next(&item, it) == 1)
		write_all(fd, td_tensor_data(&item.value->tensor), td_tensor_nbytes(&item.value->tensor));
	if (fsync(fd) < 0)
		bench_die("fsync");
	close(fd);
	t0 = bench_now() - t0;
	td_dict_iter_free(it);
	return t0;
}

static size_t dict_bytes(const td_dict *d, size_t *leaves)
{
	td_dict_iter *it;
	td_item item;
	size_t total = 0;

	*leaves = 0;
	BENCH_CHECK(td_dict_iter_new(&it, d, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY));
	while (td_dict_iter_next(&item, it) == 1) {
		total += td_tensor_nbytes(&item.value->tensor);
		(*leaves)++;
	}
	td_dict_iter_free(it);
	return total;
}

/* Sum every float of every leaf: reads the mapped pages. */
static double sum_dict(const td_dict *d)
{
	td_dict_iter *it;
	td_item item;
	double s = 0;

	BENCH_CHECK(td_dict_iter_new(&it, d, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY));
	while (td_dict_iter_next(&item, it) == 1) {
		const float *p = td_tensor_data(&item.value->tensor);
		size_t i, n = td_tensor_nbytes(&item.value->tensor) / 4;
		double acc = 0;

		for (i = 0; i < n; i++)
			acc += p[i];
		s += acc;
	}
	td_dict_iter_free(it);
	return s;
}

/* read() a file in 8 MiB chunks and sum its floats. */
static double raw_read_sum(const char *path, double *sum)
{
	static float buf[(8 << 20) / 4];
	double t0 = bench_now(), s = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		bench_die(path);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		double acc = 0;
		ssize_t i;

		for (i = 0; i < n / 4; i++)
			acc += buf[i];
		s += acc;
	}
	close(fd);
	*sum = s;
	return bench_now() - t0;
}

/* ---- what the directory placement cannot avoid: a file per leaf ---- */

/*
 * Create `d`'s tree under `dirfd`: a directory per nested dict, a file per
 * leaf with elements (named as the store names it) and a meta.json per
 * directory, the files empty or, with `data`, each leaf's bytes written
 * into its file. Counts into *files and *dirs.
 */
static void create_tree(int dirfd, const td_dict *d, bool data, size_t *files, size_t *dirs)
{
	size_t n = td_dict_items(NULL, NULL, 0, d), i;
	const char **keys = calloc(n ? n : 1, sizeof(*keys));
	const td_value **vals = calloc(n ? n : 1, sizeof(*vals));
	char name[4096];
	int fd;

	if (!keys || !vals)
		bench_die("calloc");
	td_dict_items(keys, vals, n, d);
	for (i = 0; i < n; i++) {
		if (td_store_encode_key(name, sizeof(name) - 8, keys[i]) < 0)
			bench_die("td_store_encode_key");
		if (vals[i]->kind == TD_VALUE_DICT) {
			if (mkdirat(dirfd, name, 0777) < 0)
				bench_die(name);
			fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0)
				bench_die(name);
			create_tree(fd, vals[i]->dict, data, files, dirs);
			close(fd);
			(*dirs)++;
		} else if (vals[i]->kind == TD_VALUE_TENSOR && td_tensor_nbytes(&vals[i]->tensor) > 0) {
			strcat(name, ".memmap");
			fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
			if (fd < 0)
				bench_die(name);
			if (data)
				write_all(fd, td_tensor_data(&vals[i]->tensor), td_tensor_nbytes(&vals[i]->tensor));
			close(fd);
			(*files)++;
		}
	}
	fd = openat(dirfd, "meta.json", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd < 0)
		bench_die("meta.json");
	close(fd);
	(*files)++;
	free(keys);
	free(vals);
}

/*
 * The directory and coordination file of a store at `path`, then
 * create_tree(); with `data`, the leaves' bytes in their files made
 * durable by one syncfs, as a save's single sync does.
 */
static double files_floor(const td_dict *d, const char *path, bool data, size_t *files,
	size_t *dirs)
{
	double t0 = bench_now();
	int dirfd, fd;

	*files = 1;
	*dirs = 1;
	if (mkdir(path, 0777) < 0)
		bench_die(path);
	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		bench_die(path);
	fd = openat(dirfd, ".tdstore-coord", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd < 0)
		bench_die(".tdstore-coord");
	close(fd);
	create_tree(dirfd, d, data, files, dirs);
	if (data && syncfs(dirfd) < 0)
		bench_die("syncfs");
	close(dirfd);
	return bench_now() - t0;
}

/* ---- rows ---- */

/* "save", "save-packed", ... : the row prefix of a placement. */
static const char *prefix(const char *what, td_placement placement)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), "%s%s", what, placement == TD_PLACEMENT_PACKED ? "-packed" : "");
	return buf;
}

static void bench_save_read(const char *layout, td_dict *d, const char *size_name,
	td_placement placement)
{
	char name[128], store[4200], raw[4200], extra[256], files[128], rawfiles[128], tree[4200];
	double best_save = 1e30, best_raw = 1e30, best_read = 1e30, best_rread = 1e30, s1 = 0, s2 = 0,
		   best_files = 1e30, best_rawfiles = 1e30;
	td_store_memmap_opts opts = TD_STORE_MEMMAP_OPTS_INIT;
	bool floor;
	size_t leaves, bytes = dict_bytes(d, &leaves), nfiles = 0, ndirs = 0;
	int r;

	opts.placement = placement;
	snprintf(name, sizeof(name), "%s/%s/%s", prefix("save", placement), layout, size_name);
	snprintf(extra, sizeof(extra), "%s/%s/%s", prefix("read", placement), layout, size_name);
	/* The directory placement's floor: its files created empty. */
	snprintf(files, sizeof(files), "save-files/%s/%s", layout, size_name);
	/* ... and with every byte written and synced: the least any save takes. */
	snprintf(rawfiles, sizeof(rawfiles), "save-rawfiles/%s/%s", layout, size_name);
	floor = opt.floor && placement != TD_PLACEMENT_PACKED && (wanted(files) || wanted(rawfiles));
	if (!wanted(name) && !wanted(extra) && !floor)
		return;
	snprintf(store, sizeof(store), "%s/store", opt.dir);
	snprintf(raw, sizeof(raw), "%s/raw.bin", opt.dir);
	for (r = 0; r < opt.repeat; r++) {
		td_store *st;
		double t;

		bench_rm_rf(store);
		if (floor) {
			/*
			 * Right after the same deletion as the save below. Kept until
			 * the run ends: deleting them here would slow the saves that
			 * follow (see README), which must run as without --floor.
			 */
			snprintf(tree, sizeof(tree), "%s/files.%s.%s.%d", opt.dir, layout, size_name, r);
			sync();
			t = files_floor(d, tree, false, &nfiles, &ndirs);
			if (t < best_files)
				best_files = t;
			snprintf(tree, sizeof(tree), "%s/rawfiles.%s.%s.%d", opt.dir, layout, size_name, r);
			sync();
			t = files_floor(d, tree, true, &nfiles, &ndirs);
			if (t < best_rawfiles)
				best_rawfiles = t;
		}
		unlink(raw);
		sync();
		t = raw_write(d, raw);
		if (t < best_raw)
			best_raw = t;
		sync();
		t = bench_now();
		BENCH_CHECK(td_store_memmap(&st, d, store, &opts));
		t = bench_now() - t;
		td_store_close(st);
		if (t < best_save)
			best_save = t;
	}
	snprintf(name, sizeof(name), "%s/%s/%s", prefix("save", placement), layout, size_name);
	snprintf(extra, sizeof(extra),
		opt.json ? "\"leaves\": %zu, \"bytes\": %zu" : "%zu leaves, %zu bytes, %.0f MB/s", leaves,
		bytes, bytes / best_save / 1e6);
	if (wanted(name))
		row(name, best_save, best_raw, "write+fsync", extra);
	if (floor && wanted(files)) {
		snprintf(extra, sizeof(extra),
			opt.json ? "\"files\": %zu, \"dirs\": %zu, "
					   "\"us_per_file\": %.1f" :
					   "%zu files + %zu dirs created empty, %.1f us each",
			nfiles, ndirs, best_files * 1e6 / (double)(nfiles + ndirs));
		row(files, best_files, best_raw, "write+fsync", extra);
	}
	if (floor && wanted(rawfiles)) {
		snprintf(extra, sizeof(extra),
			opt.json ? "\"save_over_rawfiles\": %.3f" :
					   "the same files, bytes written, one syncfs; save = %.2fx of this",
			best_save / best_rawfiles);
		row(rawfiles, best_rawfiles, best_raw, "write+fsync", extra);
	}

	/* Read every element of a freshly opened store (warm page cache) vs read() + sum. */
	for (r = 0; r < opt.repeat; r++) {
		td_store *st;
		double t = bench_now();

		BENCH_CHECK(td_store_open(&st, store, NULL));
		s1 = sum_dict(td_store_dict(st));
		td_store_close(st);
		t = bench_now() - t;
		if (t < best_read)
			best_read = t;
		t = raw_read_sum(raw, &s2);
		if (t < best_rread)
			best_rread = t;
	}
	if (s1 != s2) {
		fprintf(stderr, "tdstorebench: %s: the store's sum %g differs from the raw file's %g\n",
			layout, s1, s2);
		exit(1);
	}
	snprintf(name, sizeof(name), "%s/%s/%s", prefix("read", placement), layout, size_name);
	if (wanted(name))
		row(name, best_read, best_rread, "read()+sum",
			opt.json ? "\"cache\": \"warm\"" : "warm page cache");
	bench_rm_rf(store);
	unlink(raw);
}

/* One open of `store` (read-only, then closed): its time, and the RSS it added into *rss. */
static double time_open(const char *store, long *rss)
{
	long before = rss_bytes(), grown;
	td_store *st;
	double t = bench_now();

	BENCH_CHECK(td_store_open(&st, store, NULL));
	t = bench_now() - t;
	grown = rss_bytes() - before;
	if (grown > *rss)
		*rss = grown;
	td_store_close(st);
	return t;
}

static void open_row(const char *name, int leaves, int64_t bytes, double t, double base,
	const char *base_name, long rss)
{
	char extra[256];

	snprintf(extra, sizeof(extra),
		opt.json ? "\"leaves\": %d, \"bytes\": %lld, "
				   "\"rss_growth\": %ld, \"us_per_leaf\": %.3f" :
				   "%d leaves, %lld bytes: RSS +%ld KiB, %.2f us/leaf",
		leaves, (long long)bytes, opt.json ? rss : rss / 1024, t * 1e6 / leaves);
	row(name, t, base, base_name, extra);
}

/*
 * Opening a store of `leaves` leaves. A directory store opens through its
 * key index (.tdstore-index, the default), and again from its meta.json
 * files alone (TDSTORE_DIR_INDEX=0): the open-json row, which is also the
 * baseline of the open row. The two alternate, so that both see the same
 * load of the machine; each is the best of --repeat.
 */
static void bench_open(int leaves, int64_t bytes, const char *size_name, td_placement placement)
{
	char name[128], jname[128], store[4200];
	double best = 1e30, best_json = 1e30;
	long rss = 0, rss_json = 0;
	bool dir = placement != TD_PLACEMENT_PACKED;
	td_store_memmap_opts opts = TD_STORE_MEMMAP_OPTS_INIT;
	td_dict *d;
	td_store *st;
	int r;

	snprintf(name, sizeof(name), "%s/%d_leaves/%s", prefix("open", placement), leaves, size_name);
	snprintf(jname, sizeof(jname), "open-json/%d_leaves/%s", leaves, size_name);
	if (!wanted(name) && !(dir && wanted(jname)))
		return;
	d = flat(bytes, leaves);
	snprintf(store, sizeof(store), "%s/open", opt.dir);
	bench_rm_rf(store);
	/* Files sized and reserved, data not copied: the open does not look at it. */
	opts.placement = placement;
	opts.like = true;
	opts.sync = TD_SYNC_NONE;
	BENCH_CHECK(td_store_memmap(&st, d, store, &opts));
	td_store_close(st);
	td_dict_free(d);
	for (r = 0; r < opt.repeat; r++) {
		double t = time_open(store, &rss);

		if (t < best)
			best = t;
		if (!dir)
			continue;
		setenv("TDSTORE_DIR_INDEX", "0", 1);
		t = time_open(store, &rss_json);
		unsetenv("TDSTORE_DIR_INDEX");
		if (t < best_json)
			best_json = t;
	}
	if (wanted(name))
		open_row(name, leaves, bytes, best, dir ? best_json : 0, dir ? "open-json" : "-", rss);
	if (dir && wanted(jname))
		open_row(jname, leaves, bytes, best_json, 0, "-", rss_json);
	bench_rm_rf(store);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int64_t bytes;
		bool large;
	} sizes[] = { { "10MB", 10 * MB, false }, { "100MB", 100 * MB, false },
		{ "1GB", 1000 * MB, true } };
	static const td_placement placements[2] = { TD_PLACEMENT_DIRECTORY, TD_PLACEMENT_PACKED };
	int i, p;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			opt.json = true;
		else if (!strcmp(argv[i], "--large"))
			opt.large = true;
		else if (!strcmp(argv[i], "--quick"))
			opt.quick = true;
		else if (!strcmp(argv[i], "--floor"))
			opt.floor = true;
		else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
			opt.filter = argv[++i];
		else if (!strcmp(argv[i], "--repeat") && i + 1 < argc && atoi(argv[i + 1]) > 0)
			opt.repeat = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			snprintf(opt.dir, sizeof(opt.dir), "%s/tdstorebench.XXXXXX", argv[++i]);
		else {
			fprintf(stderr,
				"usage: %s [--json] [--filter SUBSTR] [--repeat N] [--dir DIR] "
				"[--large] [--quick] [--floor]\n",
				argv[0]);
			return 2;
		}
	}
	if (!opt.dir[0])
		snprintf(opt.dir, sizeof(opt.dir), "%s/tdstorebench.XXXXXX",
			getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(opt.dir))
		bench_die("mkdtemp");
	if (opt.quick)
		opt.repeat = 1;
	if (!opt.json)
		printf("tdstorebench: tdstore %s, stores in %s (directory rows, then -packed "
			   "rows); best of %d; "
			   "Ratio = ours / baseline (lower is better)\n\n",
			td_version(NULL, NULL, NULL), opt.dir, opt.repeat);

	for (p = 0; p < 2; p++) {
		td_dict *d = opt.quick ? flat(MB, 184) : weights();

		bench_save_read("weights", d, opt.quick ? "1MB" : "176MB", placements[p]);
		td_dict_free(d);
	}
	for (i = 0; i < 3; i++)
		for (p = 0; p < 2; p++) {
			int64_t bytes = opt.quick ? MB : sizes[i].bytes;
			const char *sz = opt.quick ? "1MB" : sizes[i].name;
			td_dict *d;

			if ((sizes[i].large && !opt.large) || (opt.quick && i > 0))
				continue;
			d = flat(bytes, 8);
			bench_save_read("flat", d, sz, placements[p]);
			td_dict_free(d);
			d = many_small(bytes);
			bench_save_read("many_small", d, sz, placements[p]);
			td_dict_free(d);
			d = deep(bytes);
			bench_save_read("deep", d, sz, placements[p]);
			td_dict_free(d);
		}
	{
		static const int leaves[] = { 10, 1000, 10000 }, quick_leaves[] = { 10, 100, 1000 };
		int k;

		for (p = 0; p < 2; p++)
			for (k = 0; k < 3; k++) {
				bench_open(opt.quick ? quick_leaves[k] : leaves[k], opt.quick ? MB : 10 * MB,
					opt.quick ? "1MB" : "10MB", placements[p]);
				if (!opt.quick)
					bench_open(leaves[k], 1000 * MB, "1GB", placements[p]);
			}
	}
	if (opt.json)
		printf("%s]\n", nrows ? "\n" : "[");
	bench_rm_rf(opt.dir);
	return 0;
}
