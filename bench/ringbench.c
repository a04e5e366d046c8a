/* SPDX-License-Identifier: MIT */
/*
 * ringbench.c - ring buffer benchmarks (../shared/reference/benchmarks.md):
 * td_ring_extend throughput with 1, 2 and 4 writer processes and
 * td_ring_sample throughput (batches of 256), for rows of 64 B, 4 KiB and
 * 28 KiB (an 84x84x4 uint8 frame), beside memcpy bandwidth measured in the
 * same run: large sequential copies, and copies of 256 random rows of the
 * same size out of a buffer as large as the ring (what sampling does).
 *
 * Targets: sampling 256 rows of 28 KiB at >= 70% of memcpy bandwidth
 * (sequential memcpy of the same bytes per call, measured interleaved with
 * the sampling, best slice of each); extending 64 B rows at >= 5 M rows/s
 * with 2 writers.
 *
 * torchrl: with --torchrl FILE, the table that bench/torchrl_ring.py wrote
 * (torchrl's ReplayBuffer over a LazyMemmapStorage, measured on the same
 * rows and capacities; `make bench-torchrl` runs both in one go), and each
 * row that has a counterpart there (sample256/<size>, extend/<size>/w1)
 * gets torchrl's calls/s and the ratio ours / torchrl. Without it no
 * torchrl figure is printed.
 *
 * Usage: ringbench [--json] [--filter SUBSTR] [--seconds S] [--dir DIR]
 *                  [--torchrl FILE] [--quick]
 *   --quick  small rings, a few milliseconds per row (a smoke test: make
 *   check runs it). Exits 1 if a sampled row is wrong, a call fails or the
 *   torchrl file cannot be read or is malformed.
 */
#define _GNU_SOURCE
#define BENCH_PROG "ringbench"
#include "bench_util.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH 256
#define FILL 0xA5

static struct {
	bool json, quick;
	const char *filter;
	double seconds;
	char dir[4096];
} opt = { false, false, NULL, 1.0, "" };

static int nrows;

/* The torchrl figures read from --torchrl FILE (bench/torchrl_ring.py). */
#define TORCHRL_MAX 16

static struct {
	const char *path;
	int n;
	struct {
		char name[64];
		double calls_s;
	} rows[TORCHRL_MAX];
	char notes[4][256]; /* the file's first comment lines: versions, set-up */
	int nnotes;
} torchrl;

/* The row layouts measured. */
typedef struct layout {
	const char *name;
	size_t bytes;
	int64_t capacity, quick_capacity;
} layout;

static const layout layouts[] = {
	{ "64B", 64, 1 << 20, 1024 },
	{ "4KiB", 4096, 1 << 16, 512 },
	{ "28KiB", 84 * 84 * 4, 1 << 14, 512 },
};

static bool wanted(const char *name)
{
	return !opt.filter || strstr(name, opt.filter);
}

/* torchrl's calls/s for the row `name`, or 0 when the file has none. */
static double torchrl_calls(const char *name)
{
	int i;

	for (i = 0; i < torchrl.n; i++)
		if (!strcmp(torchrl.rows[i].name, name))
			return torchrl.rows[i].calls_s;
	return 0;
}

static void row(const char *name, double calls_s, double rows_s, double gbs, const char *vs,
	double ratio, const char *target)
{
	double trl = torchrl_calls(name);
	char trl_calls[32] = "-", trl_ratio[32] = "-";

	if (opt.json) {
		if (trl > 0) {
			snprintf(trl_calls, sizeof(trl_calls), "%.1f", trl);
			snprintf(trl_ratio, sizeof(trl_ratio), "%.3f", calls_s / trl);
		} else {
			strcpy(trl_calls, "null");
			strcpy(trl_ratio, "null");
		}
		printf("%s  {\"name\": \"%s\", \"calls_per_s\": %.1f, \"rows_per_s\": %.1f, "
			   "\"gb_per_s\": %.3f, \"baseline\": \"%s\", \"ratio\": %.3f, "
			   "\"torchrl_calls_per_s\": %s, \"torchrl_ratio\": %s, \"target\": \"%s\"}",
			nrows ? ",\n" : "", name, calls_s, rows_s, gbs, vs, ratio, trl_calls, trl_ratio,
			target);
	} else if (torchrl.path) {
		if (trl > 0) {
			snprintf(trl_calls, sizeof(trl_calls), "%.0f", trl);
			snprintf(trl_ratio, sizeof(trl_ratio), "%.1fx", calls_s / trl);
		}
		printf("%-24s %12.0f %14.0f %9.2f  %-22s %7.2f  %11s %9s  %s\n", name, calls_s, rows_s, gbs,
			vs, ratio, trl_calls, trl_ratio, target);
	} else {
		printf("%-24s %12.0f %14.0f %9.2f  %-22s %7.2f  %s\n", name, calls_s, rows_s, gbs, vs,
			ratio, target);
	}
	nrows++;
	fflush(stdout);
}

static void bad_torchrl_file(int line, const char *why)
{
	fprintf(stderr,
		"ringbench: %s:%d: %s (a table written by bench/torchrl_ring.py "
		"--output FILE expected)\n",
		torchrl.path, line, why);
	exit(1);
}

/*
 * Read the table of bench/torchrl_ring.py: `#` comment lines, the header
 * "name<TAB>calls_per_s<TAB>rows_per_s", then one line per row. Every name
 * must be one this program measures (sample256/<size> or extend/<size>/w1).
 */
static void read_torchrl(void)
{
	static const char *const sizes[] = { "64B", "4KiB", "28KiB" };
	FILE *f = fopen(torchrl.path, "r");
	char line[512];
	bool header = false;
	int ln = 0;

	if (!f) {
		fprintf(stderr, "ringbench: %s: %s\n", torchrl.path, strerror(errno));
		exit(1);
	}
	while (fgets(line, sizeof(line), f)) {
		char name[64], *end;
		double calls, rows;
		size_t k, len = strlen(line);
		bool known = false;
		int i;

		ln++;
		if (len && line[len - 1] != '\n' && !feof(f))
			bad_torchrl_file(ln, "line too long");
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '#') {
			if (torchrl.nnotes < 4)
				snprintf(torchrl.notes[torchrl.nnotes++], sizeof(torchrl.notes[0]), "%s",
					line + 1 + (line[1] == ' '));
			continue;
		}
		if (line[0] == '\0')
			continue;
		if (!header) {
			if (strcmp(line, "name\tcalls_per_s\trows_per_s") != 0)
				bad_torchrl_file(ln, "no header line");
			header = true;
			continue;
		}
		end = strchr(line, '\t');
		if (!end || (size_t)(end - line) >= sizeof(name))
			bad_torchrl_file(ln, "not name<TAB>calls_per_s<TAB>rows_per_s");
		memcpy(name, line, (size_t)(end - line));
		name[end - line] = '\0';
		errno = 0;
		calls = strtod(end + 1, &end);
		if (*end != '\t' || errno)
			bad_torchrl_file(ln, "not name<TAB>calls_per_s<TAB>rows_per_s");
		rows = strtod(end + 1, &end);
		if (*end != '\0' || errno || !isfinite(calls) || !isfinite(rows) || calls <= 0 || rows <= 0)
			bad_torchrl_file(ln, "figures must be finite numbers > 0");
		for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			char a[64], b[64];

			snprintf(a, sizeof(a), "sample256/%s", sizes[k]);
			snprintf(b, sizeof(b), "extend/%s/w1", sizes[k]);
			known = known || !strcmp(name, a) || !strcmp(name, b);
		}
		if (!known)
			bad_torchrl_file(ln, "a row ringbench does not measure");
		for (i = 0; i < torchrl.n; i++)
			if (!strcmp(torchrl.rows[i].name, name))
				bad_torchrl_file(ln, "a row given twice");
		if (torchrl.n == TORCHRL_MAX)
			bad_torchrl_file(ln, "too many rows");
		snprintf(torchrl.rows[torchrl.n].name, sizeof(torchrl.rows[0].name), "%s", name);
		torchrl.rows[torchrl.n++].calls_s = calls;
	}
	if (ferror(f))
		bad_torchrl_file(ln, strerror(errno));
	fclose(f);
	if (!header)
		bad_torchrl_file(ln, "no header line");
}

/* One row of `bytes` as a template: 64 B is obs float32[14] + action int64,
 * 4 KiB obs float32[1024], 28 KiB pixels uint8[84, 84, 4]. */
static td_dict *template_for(size_t bytes)
{
	td_dict *row;
	td_tensor t;

	BENCH_CHECK(td_dict_new(&row, 0, NULL));
	if (bytes == 64) {
		BENCH_CHECK(td_tensor_zeros(&t, TD_DTYPE_F32, 1, (int64_t[]){ 14 }));
		BENCH_CHECK(td_dict_set_tensor_take(row, "obs", &t));
		BENCH_CHECK(td_tensor_zeros(&t, TD_DTYPE_I64, 0, NULL));
		BENCH_CHECK(td_dict_set_tensor_take(row, "action", &t));
	} else if (bytes == 4096) {
		BENCH_CHECK(td_tensor_zeros(&t, TD_DTYPE_F32, 1, (int64_t[]){ 1024 }));
		BENCH_CHECK(td_dict_set_tensor_take(row, "obs", &t));
	} else {
		BENCH_CHECK(td_tensor_zeros(&t, TD_DTYPE_U8, 3, (int64_t[]){ 84, 84, 4 }));
		BENCH_CHECK(td_dict_set_tensor_take(row, "pixels", &t));
	}
	return row;
}

/* Fill every leaf of a batch with FILL bytes. */
static void fill_batch(td_dict *b)
{
	td_dict_iter *it;
	td_item item;

	BENCH_CHECK(td_dict_iter_new(&it, b, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY));
	while (td_dict_iter_next(&item, it) == 1)
		memset(td_tensor_data(&item.value->tensor), FILL, td_tensor_nbytes(&item.value->tensor));
	td_dict_iter_free(it);
}

/* Every sampled row came from a writer: its bytes are all FILL. */
static void check_batch(const td_dict *b)
{
	td_dict_iter *it;
	td_item item;

	BENCH_CHECK(td_dict_iter_new(&it, b, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY));
	while (td_dict_iter_next(&item, it) == 1) {
		const unsigned char *p = td_tensor_data(&item.value->tensor);
		size_t n = td_tensor_nbytes(&item.value->tensor);

		if (p[0] != FILL || p[n / 2] != FILL || p[n - 1] != FILL) {
			fprintf(stderr, "ringbench: a sampled row does not hold what was written\n");
			exit(1);
		}
	}
	td_dict_iter_free(it);
}

/* ---- memcpy baselines ---- */

static void memcpy_rows(const layout *l, int64_t capacity)
{
	size_t rb = l->bytes, total = (size_t)capacity * rb, chunk = BATCH * rb;
	unsigned char *src = malloc(total), *dst = malloc(chunk);
	uint64_t seed = 1;
	double t0, t, seq_bytes = 0;
	int64_t calls = 0;
	char name[64];

	if (!src || !dst)
		bench_die("malloc");
	memset(src, FILL, total);
	memset(dst, 0, chunk);
	/* Sequential: chunk-sized copies walking through the source. */
	t0 = bench_now();
	do {
		size_t off = ((size_t)calls * chunk) % (total > chunk ? total - chunk + 1 : 1);

		memcpy(dst, src + off, chunk < total ? chunk : total);
		seq_bytes += (double)(chunk < total ? chunk : total);
		calls++;
	} while ((t = bench_now() - t0) < opt.seconds / 2);
	snprintf(name, sizeof(name), "memcpy/seq/%s", l->name);
	if (wanted(name))
		row(name, (double)calls / t, seq_bytes / (double)rb / t, seq_bytes / t / 1e9, "-", 1, "");
	/* Random rows: what sampling copies. */
	calls = 0;
	t0 = bench_now();
	do {
		int j;

		for (j = 0; j < BATCH; j++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			memcpy(dst + (size_t)j * rb, src + ((seed >> 33) % (uint64_t)capacity) * rb, rb);
		}
		calls++;
	} while ((t = bench_now() - t0) < opt.seconds / 2);
	snprintf(name, sizeof(name), "memcpy/rows256/%s", l->name);
	if (wanted(name))
		row(name, (double)calls / t, (double)calls * BATCH / t,
			(double)calls * BATCH * (double)rb / t / 1e9, "-", 1, "");
	if (dst[0] != FILL)
		bench_die("memcpy check");
	free(src);
	free(dst);
}

/* ---- extend ---- */

typedef struct shared {
	_Atomic int ready;
	_Atomic int go;
	_Atomic int64_t rows;
} shared;

static int writer(const char *dir, shared *sh, double seconds)
{
	td_ring_open_opts rw = TD_RING_OPEN_OPTS_INIT;
	td_ring *r;
	td_dict *b;
	int64_t rows = 0;
	double t0;

	rw.writable = true;
	if (td_ring_open(&r, dir, &rw) < 0 || td_ring_batch_new(&b, r, BATCH) < 0)
		return 1;
	fill_batch(b);
	atomic_fetch_add(&sh->ready, 1);
	while (!atomic_load(&sh->go))
		;
	t0 = bench_now();
	do {
		int64_t got = td_ring_extend(NULL, r, b);

		if (got < 0)
			return 1;
		rows += BATCH;
	} while (bench_now() - t0 < seconds);
	atomic_fetch_add(&sh->rows, rows);
	td_dict_free(b);
	td_ring_close(r);
	return 0;
}

/* `w` writer processes extend for the set time; @return rows/s. */
static double run_writers(const char *dir, int w, double seconds)
{
	shared *sh = mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		0);
	pid_t pids[8];
	double t0, t;
	int k, status, failed = 0;

	if (sh == MAP_FAILED)
		bench_die("mmap");
	memset(sh, 0, sizeof(*sh));
	fflush(NULL);
	for (k = 0; k < w; k++) {
		pids[k] = fork();
		if (pids[k] < 0)
			bench_die("fork");
		if (pids[k] == 0)
			_exit(writer(dir, sh, seconds));
	}
	while (atomic_load(&sh->ready) < w) {
		struct timespec ts = { 0, 100000 };

		for (k = 0; k < w; k++)
			if (waitpid(pids[k], &status, WNOHANG) == pids[k])
				bench_die("a writer failed to start");
		nanosleep(&ts, NULL);
	}
	t0 = bench_now();
	atomic_store(&sh->go, 1);
	for (k = 0; k < w; k++)
		if (waitpid(pids[k], &status, 0) != pids[k] || !WIFEXITED(status) || WEXITSTATUS(status))
			failed = 1;
	t = bench_now() - t0;
	if (failed)
		bench_die("a writer failed");
	t = (double)atomic_load(&sh->rows) / t;
	munmap(sh, sizeof(*sh));
	return t;
}

/*
 * Sampling, interleaved with sequential memcpy of the same bytes per call
 * (7 MB for 28 KiB rows) in ROUNDS slices each, best slice of each kept:
 * on a shared machine both see the same load, so that the ratio is fair.
 */
#define ROUNDS 8

static double seq_copy_gbs(unsigned char *dst, const unsigned char *src, size_t total, size_t chunk,
	double seconds)
{
	double t0 = bench_now(), t, bytes = 0;
	size_t off = 0;

	do {
		if (off + chunk > total)
			off = 0;
		memcpy(dst, src + off, chunk);
		off += chunk;
		bytes += (double)chunk;
	} while ((t = bench_now() - t0) < seconds);
	return bytes / t / 1e9;
}

static void sample_row(const layout *l, td_ring *r, const char *name)
{
	size_t total = (size_t)td_ring_capacity(r) * l->bytes, chunk = BATCH * l->bytes;
	unsigned char *src = malloc(total), *dst = malloc(chunk);
	double best_calls = 0, best_copy = 0, gbs, ratio, calls_s;
	char target[96];
	td_dict *b;
	int k;

	if (!src || !dst)
		bench_die("malloc");
	if (chunk > total)
		chunk = total;
	memset(src, FILL, total);
	memset(dst, 0, chunk);
	BENCH_CHECK(td_ring_batch_new(&b, r, BATCH));
	for (k = 0; k < ROUNDS; k++) {
		double t0 = bench_now(), t, copy;
		int64_t calls = 0;

		do {
			BENCH_CHECK(td_ring_sample(b, NULL, r, 0));
			calls++;
		} while ((t = bench_now() - t0) < opt.seconds / ROUNDS);
		if ((double)calls / t > best_calls)
			best_calls = (double)calls / t;
		copy = seq_copy_gbs(dst, src, total, chunk, opt.seconds / ROUNDS);
		if (copy > best_copy)
			best_copy = copy;
	}
	check_batch(b);
	td_dict_free(b);
	free(src);
	free(dst);
	calls_s = best_calls;
	gbs = calls_s * BATCH * (double)l->bytes / 1e9;
	ratio = gbs / best_copy;
	if (!strcmp(l->name, "28KiB"))
		snprintf(target, sizeof(target), "target >= 0.70: %s", ratio >= 0.7 ? "met" : "MISSED");
	else
		target[0] = '\0';
	row(name, calls_s, calls_s * BATCH, gbs, "memcpy same bytes", ratio, target);
}

static void bench_layout(const layout *l)
{
	int64_t cap = opt.quick ? l->quick_capacity : l->capacity;
	static const int writers[] = { 1, 2, 4 };
	char dir[4200], name[64], target[64];
	td_dict *tmpl = template_for(l->bytes), *b;
	td_ring_create_opts opts = TD_RING_CREATE_OPTS_INIT;
	td_ring *r;
	size_t i;

	snprintf(dir, sizeof(dir), "%.4100s/ring-%s", opt.dir, l->name);
	opts.sync = TD_SYNC_NONE;
	BENCH_CHECK(td_ring_create(&r, dir, tmpl, cap, &opts));
	td_dict_free(tmpl);
	/* Fault every page in: one full lap, not timed. */
	BENCH_CHECK(td_ring_batch_new(&b, r, cap));
	fill_batch(b);
	BENCH_CHECK(td_ring_extend(NULL, r, b));
	td_dict_free(b);
	memcpy_rows(l, cap);
	for (i = 0; i < sizeof(writers) / sizeof(writers[0]); i++) {
		double rows_s;

		snprintf(name, sizeof(name), "extend/%s/w%d", l->name, writers[i]);
		if (!wanted(name))
			continue;
		rows_s = run_writers(dir, writers[i], opt.seconds);
		snprintf(target, sizeof(target), "%s",
			l->bytes == 64 && writers[i] == 2 ?
				(rows_s >= 5e6 ? "target >= 5M rows/s: met" : "target >= 5M rows/s: MISSED") :
				"");
		row(name, rows_s / BATCH, rows_s, rows_s * (double)l->bytes / 1e9, "-", 1, target);
	}
	snprintf(name, sizeof(name), "sample256/%s", l->name);
	if (wanted(name))
		sample_row(l, r, name);
	td_ring_close(r);
	bench_rm_rf(dir);
}

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [--json] [--filter SUBSTR] [--seconds S] [--dir DIR] "
		"[--torchrl FILE] [--quick]\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	char base[4096];
	size_t i;
	int a;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--json"))
			opt.json = true;
		else if (!strcmp(argv[a], "--quick"))
			opt.quick = true;
		else if (!strcmp(argv[a], "--filter") && a + 1 < argc)
			opt.filter = argv[++a];
		else if (!strcmp(argv[a], "--seconds") && a + 1 < argc && atof(argv[a + 1]) > 0)
			opt.seconds = atof(argv[++a]);
		else if (!strcmp(argv[a], "--dir") && a + 1 < argc)
			snprintf(base, sizeof(base), "%s", argv[++a]), tmp = base;
		else if (!strcmp(argv[a], "--torchrl") && a + 1 < argc)
			torchrl.path = argv[++a];
		else
			usage(argv[0]);
	}
	if (torchrl.path)
		read_torchrl();
	if (opt.quick)
		opt.seconds = 0.01;
	snprintf(opt.dir, sizeof(opt.dir), "%.4000s/ringbench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(opt.dir))
		bench_die("mkdtemp");
	if (opt.json)
		printf("[\n");
	else if (torchrl.path)
		printf("%-24s %12s %14s %9s  %-22s %7s  %11s %9s  %s\n", "name", "calls/s", "rows/s",
			"GB/s", "ratio to", "ratio", "torchrl/s", "x torchrl", "target");
	else
		printf("%-24s %12s %14s %9s  %-22s %7s  %s\n", "name", "calls/s", "rows/s", "GB/s",
			"ratio to", "ratio", "target");
	for (i = sizeof(layouts) / sizeof(layouts[0]); i-- > 0;)
		bench_layout(&layouts[i]);
	if (opt.json)
		printf("\n]\n");
	else {
		int k;

		printf("rows: %d; extend rows are batches of %d rows per call summed over the writer "
			   "processes; sample256 is one process, %d rows per call\n",
			nrows, BATCH, BATCH);
		if (torchrl.path) {
			printf("torchrl/s: calls/s of torchrl's ReplayBuffer(LazyMemmapStorage) on the same "
				   "rows (sample() / extend() of %d rows, one process), from %s; "
				   "x torchrl = calls/s / torchrl/s\n",
				BATCH, torchrl.path);
			for (k = 0; k < torchrl.nnotes; k++)
				printf("torchrl: %s\n", torchrl.notes[k]);
		}
	}
	rmdir(opt.dir);
	return 0;
}
