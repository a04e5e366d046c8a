/* SPDX-License-Identifier: MIT */
/*
 * bench.c - the benchmark harness: options, row selection, calibration and
 * timing in the manner of pytest-benchmark on CLOCK_MONOTONIC, and the
 * comparison with the seed CPU table. Output (table, JSON) is in
 * bench_report.c; the counting allocator in bench_alloc.c.
 */
#include "config.h"

#include "bench.h"
#include "bench_impl.h"

#include <tdstore.h>

#include <fnmatch.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

volatile uintptr_t bench_sink;

static char fail_message[512];

/* Most iterations in one round; keeps k * per-call fixtures bounded too. */
#define BENCH_MAX_ITERATIONS ((size_t)1 << 24)
/* Most rounds per row (each costs 8 bytes of statistics). */
#define BENCH_MAX_ROUNDS ((size_t)1 << 20)
/* pytest-benchmark's defaults: at least 5 rounds; a round lasts at least
 * 10 timer ticks. */
#define BENCH_MIN_ROUNDS 5
#define BENCH_PRECISION_FACTOR 10

int bench_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(fail_message, sizeof(fail_message), fmt, ap);
	va_end(ap);
	return BENCH_EUNEXPECTED;
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The smallest nonzero step between two readings, as pytest-benchmark's
 * compute_timer_precision() does. */
static uint64_t timer_precision_ns(void)
{
	uint64_t best = UINT64_MAX;
	int i;

	for (i = 0; i < 20000; i++) {
		uint64_t t0 = bench_now_ns(), t1 = bench_now_ns();

		if (t1 > t0 && t1 - t0 < best)
			best = t1 - t0;
	}
	return best == UINT64_MAX ? 1 : best;
}

/* ------------------------------------------------------------------------ */
/* Errors of a row                                                           */
/* ------------------------------------------------------------------------ */

static void record_error(bench_result *r, const char *stage, int rc)
{
	r->status = BENCH_ERROR;
	if (rc == BENCH_EUNEXPECTED)
		snprintf(r->error, sizeof(r->error), "%s: %s", stage, fail_message);
	else if (td_error_last()->code == rc)
		snprintf(r->error, sizeof(r->error), "%s: %s (%d): %s", stage, td_strerror(rc), rc,
			td_error_last()->message);
	else
		snprintf(r->error, sizeof(r->error), "%s: %s (%d)", stage, td_strerror(rc), rc);
}

/* ------------------------------------------------------------------------ */
/* Timing                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct round_time {
	uint64_t timed; /* the k calls */
	uint64_t wall;  /* with prepare/unprepare */
} round_time;

/* One round: k calls of run(), with the per-round fixtures made before and
 * released after the clock reads. */
static int time_round(const bench_row *row, void *state, size_t k, round_time *out)
{
	uint64_t w0 = bench_now_ns(), t0, t1;
	int rc = 0;
	size_t i;

	if (row->prepare && (rc = row->prepare(state, k)) < 0) {
		if (row->unprepare)
			row->unprepare(state, k);
		return rc;
	}
	t0 = bench_now_ns();
	for (i = 0; i < k; i++) {
		rc = row->run(state, i);
		if (rc < 0)
			break;
	}
	t1 = bench_now_ns();
	if (row->unprepare)
		row->unprepare(state, k);
	out->timed = t1 - t0;
	out->wall = bench_now_ns() - w0;
	return rc < 0 ? rc : 0;
}

/* Run the operation for `warmup_ns` (at least one call) in rounds that grow
 * while they stay short next to the warm-up time. */
static int warm_up(const bench_row *row, void *state, uint64_t warmup_ns)
{
	uint64_t end = bench_now_ns() + warmup_ns;
	size_t k = 1;
	round_time rt;

	do {
		int rc = time_round(row, state, k, &rt);

		if (rc < 0)
			return rc;
		if (k < 1024 && rt.wall < warmup_ns / 8)
			k *= 2;
	} while (bench_now_ns() < end);
	return 0;
}

/*
 * pytest-benchmark's calibration: grow the iterations per round until a
 * round lasts at least 3/4 of the minimum round time, jumping straight to
 * the estimated count once a round is long enough to measure.
 */
static int calibrate(const bench_row *row, void *state, const bench_config *cfg, size_t *k_out,
	round_time *rt)
{
	double min_ns = cfg->min_time * 1e9;
	size_t k = 1;

	if (min_ns < (double)(cfg->precision_ns * BENCH_PRECISION_FACTOR))
		min_ns = (double)(cfg->precision_ns * BENCH_PRECISION_FACTOR);
	for (;;) {
		int rc = time_round(row, state, k, rt);
		double next;

		if (rc < 0)
			return rc;
		if ((double)rt->timed >= 0.75 * min_ns || k >= BENCH_MAX_ITERATIONS)
			break;
		if (rt->timed >= cfg->precision_ns)
			next = ceil(min_ns * (double)k / (double)rt->timed);
		else
			next = (double)k * 10;
		k = next > (double)BENCH_MAX_ITERATIONS ? BENCH_MAX_ITERATIONS : (size_t)next;
	}
	*k_out = k;
	return 0;
}

static size_t plan_rounds(const bench_config *cfg, const round_time *rt)
{
	double wall = rt->wall ? (double)rt->wall : 1.0;
	double n;

	if (cfg->rounds)
		return cfg->rounds;
	n = ceil(cfg->max_time * 1e9 / wall);
	if (n < BENCH_MIN_ROUNDS)
		n = BENCH_MIN_ROUNDS;
	return n > (double)BENCH_MAX_ROUNDS ? BENCH_MAX_ROUNDS : (size_t)n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Max, min, median, standard deviation of the per-call time of each round;
 * mean = total time / total calls. */
static void summarize(bench_result *r, double *per_call, size_t rounds, double total_ns)
{
	double sq = 0;
	size_t i;

	r->mean_ns = total_ns / ((double)rounds * (double)r->iterations);
	qsort(per_call, rounds, sizeof(*per_call), cmp_double);
	r->min_ns = per_call[0];
	r->max_ns = per_call[rounds - 1];
	r->median_ns = rounds % 2 ? per_call[rounds / 2] :
								(per_call[rounds / 2 - 1] + per_call[rounds / 2]) / 2;
	for (i = 0; i < rounds; i++)
		sq += (per_call[i] - r->mean_ns) * (per_call[i] - r->mean_ns);
	r->stddev_ns = rounds > 1 ? sqrt(sq / (double)(rounds - 1)) : 0;
	r->ops_per_s = r->mean_ns > 0 ? 1e9 / r->mean_ns : 0;
}

static int measure_rounds(const bench_row *row, void *state, bench_result *r, size_t rounds)
{
	double *per_call = malloc(rounds * sizeof(*per_call));
	double total = 0;
	round_time rt;
	size_t i;

	if (!per_call)
		return bench_fail("out of memory for %zu rounds", rounds);
	for (i = 0; i < rounds; i++) {
		int rc = time_round(row, state, r->iterations, &rt);

		if (rc < 0) {
			free(per_call);
			return rc;
		}
		per_call[i] = (double)rt.timed / (double)r->iterations;
		total += (double)rt.timed;
	}
	r->rounds = rounds;
	summarize(r, per_call, rounds, total);
	free(per_call);
	return 0;
}

/* Warm up, calibrate and time one row; the fixture lives across all three. */
static void measure(const bench_row *row, const bench_config *cfg, bench_result *r)
{
	void *state = NULL;
	round_time rt;
	int setup_rc, rc;

	fail_message[0] = '\0';
	setup_rc = row->setup ? row->setup(&state, row->arg) : 0;
	if ((rc = setup_rc) < 0) {
		record_error(r, "setup", rc);
	} else if ((rc = warm_up(row, state, (uint64_t)(cfg->warmup * 1e9))) < 0) {
		record_error(r, "warmup", rc);
	} else if (cfg->calls) {
		r->iterations = cfg->calls;
		if ((rc = measure_rounds(row, state, r, cfg->rounds)) < 0)
			record_error(r, "run", rc);
		else
			r->status = BENCH_OK;
	} else if ((rc = calibrate(row, state, cfg, &r->iterations, &rt)) < 0) {
		record_error(r, "calibration", rc);
	} else if ((rc = measure_rounds(row, state, r, plan_rounds(cfg, &rt))) < 0) {
		record_error(r, "run", rc);
	} else {
		r->status = BENCH_OK;
	}
	if (row->teardown && (setup_rc >= 0 || state))
		row->teardown(state);
}

/* ------------------------------------------------------------------------ */
/* Selection and the seed                                                    */
/* ------------------------------------------------------------------------ */

/* A pattern holding '*' or '?' is a glob (fnmatch); otherwise a substring. */
static bool name_selected(const bench_config *cfg, const char *name)
{
	size_t i;

	if (cfg->nfilters == 0)
		return true;
	for (i = 0; i < cfg->nfilters; i++) {
		const char *f = cfg->filters[i];

		if (strpbrk(f, "*?") ? fnmatch(f, name, 0) == 0 : strstr(name, f) != NULL)
			return true;
	}
	return false;
}

static double seed_lookup(const char *name)
{
	size_t i;

	static const char lazy[] = "[lazy]";
	size_t len = strlen(name), cut = sizeof(lazy) - 1;

	/* A row on the lazily stacked fixture compares with its dense row's seed. */
	if (len > cut && strcmp(name + len - cut, lazy) == 0)
		len -= cut;
	else
		cut = 0;
	for (i = 0; i < bench_seed_cpu_count; i++)
		if (strncmp(bench_seed_cpu[i].name, name, len) == 0 && bench_seed_cpu[i].name[len] == '\0')
			return bench_seed_cpu[i].ops_per_s;
	return 0;
}

static bool program_has_row(const bench_program *prog, const char *name)
{
	size_t s, i;

	for (s = 0; s < prog->nsuites; s++)
		for (i = 0; i < prog->suites[s]->count; i++)
			if (strcmp(prog->suites[s]->rows[i].name, name) == 0)
				return true;
	return false;
}

/* Results for the selected rows (measured or n/a), then for seed rows that
 * no suite names, so that no seed row is silently dropped. */
static bench_result *select_rows(const bench_program *prog, const bench_config *cfg, size_t *count)
{
	size_t cap = bench_seed_cpu_count, n = 0, s, i;
	bench_result *res;

	for (s = 0; s < prog->nsuites; s++)
		cap += prog->suites[s]->count;
	res = calloc(cap ? cap : 1, sizeof(*res));
	if (!res)
		return NULL;
	for (s = 0; s < prog->nsuites; s++) {
		for (i = 0; i < prog->suites[s]->count; i++) {
			const bench_row *row = &prog->suites[s]->rows[i];

			if (!name_selected(cfg, row->name))
				continue;
			res[n].row = row;
			res[n].name = row->name;
			res[n].file = prog->suites[s]->file;
			res[n].entries = row->entries;
			res[n].seed_ops_per_s = seed_lookup(row->name);
			res[n].status = row->run ? BENCH_PENDING : BENCH_NA;
			res[n].note = row->note;
			n++;
		}
	}
	for (i = 0; prog->check_seed_coverage && i < bench_seed_cpu_count; i++) {
		const char *name = bench_seed_cpu[i].name;

		if (program_has_row(prog, name) || !name_selected(cfg, name))
			continue;
		res[n].name = name;
		res[n].file = "?";
		res[n].seed_ops_per_s = bench_seed_cpu[i].ops_per_s;
		res[n].status = BENCH_UNMAPPED;
		res[n].note = "no row of this program mirrors this seed row";
		n++;
	}
	*count = n;
	return res;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [options]\n"
		"  --filter PATTERN  run only rows whose name contains PATTERN, or matches\n"
		"                    it as a glob when it holds '*' or '?' (repeatable)\n"
		"  --json            print machine-readable JSON instead of the table\n"
		"  --min-time SEC    shortest round (default %g; raised to 10 timer ticks)\n"
		"  --max-time SEC    time budget of the rounds of one row (default %g)\n"
		"  --rounds N        exactly N rounds per row (overrides --max-time)\n"
		"  --calls N         exactly N calls per round, no calibration (with\n"
		"                    --rounds, a fixed amount of work per row: for\n"
		"                    valgrind --tool=callgrind; default rounds 5)\n"
		"  --warmup SEC      warm-up time per row (default %g)\n"
		"  --repeat N        measure every row in N passes over the table and report\n"
		"                    each row's pass with the lowest Mean (default %d): a\n"
		"                    pass hit by another process's load then does not count\n"
		"  --no-memory       skip the memory-per-leaf measurement\n"
		"  --list            list the rows (measured or n/a) without running them\n"
		"  --help            this text\n",
		prog, BENCH_DEFAULT_MIN_TIME, BENCH_DEFAULT_MAX_TIME, BENCH_DEFAULT_WARMUP,
		BENCH_DEFAULT_REPEAT);
}

static bool parse_seconds(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end != '\0' || !(v >= 0) || v > 3600)
		return false;
	*out = v;
	return true;
}

static bool parse_count(const char *s, size_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s || *end != '\0' || s[0] == '-' || v < 1 || v > BENCH_MAX_ROUNDS)
		return false;
	*out = (size_t)v;
	return true;
}

enum {
	OPT_JSON = 256,
	OPT_FILTER,
	OPT_MIN_TIME,
	OPT_MAX_TIME,
	OPT_ROUNDS,
	OPT_CALLS,
	OPT_WARMUP,
	OPT_REPEAT,
	OPT_NO_MEMORY,
	OPT_LIST,
	OPT_HELP
};

static const struct option long_options[] = { { "json", no_argument, NULL, OPT_JSON },
	{ "filter", required_argument, NULL, OPT_FILTER },
	{ "min-time", required_argument, NULL, OPT_MIN_TIME },
	{ "max-time", required_argument, NULL, OPT_MAX_TIME },
	{ "rounds", required_argument, NULL, OPT_ROUNDS },
	{ "calls", required_argument, NULL, OPT_CALLS },
	{ "warmup", required_argument, NULL, OPT_WARMUP },
	{ "repeat", required_argument, NULL, OPT_REPEAT },
	{ "no-memory", no_argument, NULL, OPT_NO_MEMORY }, { "list", no_argument, NULL, OPT_LIST },
	{ "help", no_argument, NULL, OPT_HELP }, { NULL, 0, NULL, 0 } };

/* @return 0 to run, 1 after --help, -1 on a usage error. */
static int apply_option(bench_config *cfg, int c, const char *arg)
{
	switch (c) {
	case OPT_JSON:
		cfg->json = true;
		return 0;
	case OPT_NO_MEMORY:
		cfg->no_memory = true;
		return 0;
	case OPT_LIST:
		cfg->list = true;
		return 0;
	case OPT_FILTER:
		cfg->filters[cfg->nfilters++] = arg;
		return 0;
	case OPT_MIN_TIME:
		return parse_seconds(arg, &cfg->min_time) ? 0 : -1;
	case OPT_MAX_TIME:
		return parse_seconds(arg, &cfg->max_time) ? 0 : -1;
	case OPT_WARMUP:
		return parse_seconds(arg, &cfg->warmup) ? 0 : -1;
	case OPT_ROUNDS:
		return parse_count(arg, &cfg->rounds) ? 0 : -1;
	case OPT_CALLS:
		return parse_count(arg, &cfg->calls) ? 0 : -1;
	case OPT_REPEAT:
		return parse_count(arg, &cfg->repeat) ? 0 : -1;
	case OPT_HELP:
		return 1;
	default:
		return -1;
	}
}

static int parse_options(bench_config *cfg, int argc, char **argv)
{
	int c;

	cfg->min_time = BENCH_DEFAULT_MIN_TIME;
	cfg->max_time = BENCH_DEFAULT_MAX_TIME;
	cfg->warmup = BENCH_DEFAULT_WARMUP;
	cfg->repeat = BENCH_DEFAULT_REPEAT;
	cfg->filters = calloc((size_t)argc + 1, sizeof(*cfg->filters));
	if (!cfg->filters)
		return -1;
	while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
		int rc = apply_option(cfg, c, optarg);

		if (rc != 0) {
			if (rc < 0 && c >= OPT_JSON)
				fprintf(stderr, "%s: bad value '%s'\n", argv[0], optarg ? optarg : "");
			usage(rc < 0 ? stderr : stdout, argv[0]);
			return rc;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
		usage(stderr, argv[0]);
		return -1;
	}
	if (cfg->calls && !cfg->rounds)
		cfg->rounds = BENCH_MIN_ROUNDS;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */
/* ------------------------------------------------------------------------ */

static int run_memory(const bench_program *prog, const bench_config *cfg, bench_report *rep)
{
	int n;

	if (!prog->memory || cfg->no_memory || cfg->list)
		return 0;
	n = prog->memory(rep->memory, TD_BENCH_MAX_MEMORY);
	if (n < 0) {
		rep->memory_error = true;
		record_error(&rep->memory_failure, "memory", n);
		return 1;
	}
	rep->nmemory = (size_t)n;
	return 0;
}

/*
 * Passes 2..N over the rows: each row measured again keeps the pass with
 * the lowest Mean. Passes are whole sweeps of the table, so that a burst
 * of load from another process hits one pass of a row, not all of them.
 */
static void repeat_rows(const bench_config *cfg, bench_report *rep)
{
	size_t pass, i;

	for (pass = 1; pass < cfg->repeat; pass++) {
		for (i = 0; i < rep->count; i++) {
			bench_result *r = &rep->results[i], again;

			if (r->status != BENCH_OK)
				continue;
			again = *r;
			again.status = BENCH_PENDING;
			measure(r->row, cfg, &again);
			if (again.status == BENCH_OK && again.mean_ns < r->mean_ns)
				*r = again;
		}
	}
}

static int run_rows(const bench_config *cfg, bench_report *rep)
{
	int failed = 0;
	size_t i;

	for (i = 0; i < rep->count; i++)
		if (rep->results[i].status == BENCH_PENDING)
			measure(rep->results[i].row, cfg, &rep->results[i]);
	repeat_rows(cfg, rep);
	bench_report_begin(cfg, rep);
	for (i = 0; i < rep->count; i++) {
		bench_result *r = &rep->results[i];

		if (r->status == BENCH_OK && r->seed_ops_per_s > 0)
			r->ratio = r->ops_per_s / r->seed_ops_per_s;
		if (r->status == BENCH_ERROR || r->status == BENCH_UNMAPPED)
			failed = 1;
		bench_report_row(cfg, rep, r);
	}
	bench_report_end(cfg, rep);
	return failed;
}

int bench_main(const bench_program *prog, int argc, char **argv)
{
	bench_config cfg = { 0 };
	bench_report rep = { 0 };
	int rc;

	rc = parse_options(&cfg, argc, argv);
	if (rc != 0) {
		free(cfg.filters);
		return rc > 0 ? 0 : 2;
	}
	cfg.precision_ns = timer_precision_ns();
	rep.program = prog->name;
	rep.results = select_rows(prog, &cfg, &rep.count);
	if (!rep.results || rep.count == 0) {
		fprintf(stderr, "%s: no rows match the filter\n", argv[0]);
		free(rep.results);
		free(cfg.filters);
		return 2;
	}
	if (cfg.list) {
		bench_report_list(&cfg, &rep);
		rc = 0;
	} else {
		rc = run_memory(prog, &cfg, &rep);
		rc |= run_rows(&cfg, &rep);
	}
	free(rep.results);
	free(cfg.filters);
	return rc;
}
