/* SPDX-License-Identifier: MIT */
/*
 * bench_report.c - the harness's output: the table (seed columns Name, Max,
 * Mean, Ops/s, then the seed's CPU Ops/s, the ratio ours / seed and
 * nanoseconds per entry), the summary (geometric mean and minimum of the
 * ratios), the memory-per-leaf section, --list, and the same as JSON.
 */
#include "config.h"

#include "bench.h"
#include "bench_impl.h"

#include <tdstore.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define BENCH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BENCH_SANITIZED 1
#endif
#endif
#ifndef BENCH_SANITIZED
#define BENCH_SANITIZED 0
#endif

#ifdef __OPTIMIZE__
#define BENCH_OPTIMIZED 1
#else
#define BENCH_OPTIMIZED 0
#endif

/* Rows under this ratio miss the per-row target; under 100x the mean target. */
#define BENCH_ROW_TARGET 10.0
#define BENCH_MEAN_TARGET 100.0

typedef struct ratio_summary {
	size_t measured, na, errors, unmapped, compared;
	double geomean;
	const bench_result *min;
	size_t below_row, below_mean;
} ratio_summary;

static void summarize_ratios(const bench_report *rep, ratio_summary *s)
{
	double logsum = 0;
	size_t i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < rep->count; i++) {
		const bench_result *r = &rep->results[i];

		s->measured += r->status == BENCH_OK;
		s->na += r->status == BENCH_NA;
		s->errors += r->status == BENCH_ERROR;
		s->unmapped += r->status == BENCH_UNMAPPED;
		if (r->status != BENCH_OK || r->ratio <= 0)
			continue;
		s->compared++;
		logsum += log(r->ratio);
		if (!s->min || r->ratio < s->min->ratio)
			s->min = r;
		s->below_row += r->ratio < BENCH_ROW_TARGET;
		s->below_mean += r->ratio < BENCH_MEAN_TARGET;
	}
	s->geomean = s->compared ? exp(logsum / (double)s->compared) : 0;
}

/* ------------------------------------------------------------------------ */
/* Table                                                                     */
/* ------------------------------------------------------------------------ */

static void fmt_time(char *buf, size_t n, double ns)
{
	if (ns < 1e3)
		snprintf(buf, n, "%.2fns", ns);
	else if (ns < 1e6)
		snprintf(buf, n, "%.4fus", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, n, "%.4fms", ns / 1e6);
	else
		snprintf(buf, n, "%.4fs", ns / 1e9);
}

static void fmt_ops(char *buf, size_t n, double ops)
{
	if (ops <= 0)
		snprintf(buf, n, "-");
	else if (ops >= 1e9)
		snprintf(buf, n, "%.4fG", ops / 1e9);
	else if (ops >= 1e6)
		snprintf(buf, n, "%.4fM", ops / 1e6);
	else if (ops >= 1e3)
		snprintf(buf, n, "%.4fK", ops / 1e3);
	else
		snprintf(buf, n, "%.4f", ops);
}

static void print_header(const bench_config *cfg, bench_report *rep)
{
	size_t i;

	rep->name_width = 4;
	for (i = 0; i < rep->count; i++)
		if ((int)strlen(rep->results[i].name) > rep->name_width)
			rep->name_width = (int)strlen(rep->results[i].name);
	printf("%s: tdstore %s benchmarks against tensordict's CI table "
		   "(bench/seed_cpu.tsv, CPU run)\n",
		rep->program, td_version(NULL, NULL, NULL));
	printf("timing: CLOCK_MONOTONIC (precision %llu ns); warm-up %g s, rounds >= %g s, ",
		(unsigned long long)cfg->precision_ns, cfg->warmup, cfg->min_time);
	if (cfg->calls)
		printf("%zu rounds of %zu calls per row", cfg->rounds, cfg->calls);
	else if (cfg->rounds)
		printf("%zu rounds per row", cfg->rounds);
	else
		printf("%g s of rounds per row (at least 5)", cfg->max_time);
	printf("; best of %zu passes over the table (the pass with the lowest Mean)\n", cfg->repeat);
	printf("Max = slowest round per call, Mean = total / calls, Ops/s = 1 / Mean; "
		   "Ratio = Ops/s / Seed Ops/s\n");
	if (!BENCH_OPTIMIZED)
		printf("WARNING: built without optimization; figures are not representative\n");
	if (BENCH_SANITIZED)
		printf("WARNING: built with sanitizers; figures are not representative\n");
	printf("\n%-*s %12s %12s %12s %12s %9s %9s\n", rep->name_width, "Name", "Max", "Mean", "Ops/s",
		"Seed Ops/s", "Ratio", "ns/entry");
}

static void print_row(const bench_report *rep, const bench_result *r)
{
	char max[32], mean[32], ops[32], seed[32], ratio[32], per[32];

	if (r->status == BENCH_NA || r->status == BENCH_UNMAPPED) {
		printf("%-*s  %s: %s\n", rep->name_width, r->name,
			r->status == BENCH_NA ? "n/a" : "UNMAPPED", r->note);
		return;
	}
	if (r->status == BENCH_ERROR) {
		printf("%-*s  ERROR: %s\n", rep->name_width, r->name, r->error);
		return;
	}
	fmt_time(max, sizeof(max), r->max_ns);
	fmt_time(mean, sizeof(mean), r->mean_ns);
	fmt_ops(ops, sizeof(ops), r->ops_per_s);
	fmt_ops(seed, sizeof(seed), r->seed_ops_per_s);
	if (r->ratio > 0)
		snprintf(ratio, sizeof(ratio), "%.1fx", r->ratio);
	else
		snprintf(ratio, sizeof(ratio), "-");
	if (r->entries)
		snprintf(per, sizeof(per), "%.2f", r->mean_ns / (double)r->entries);
	else
		snprintf(per, sizeof(per), " ");
	printf("%-*s %12s %12s %12s %12s %9s %9s\n", rep->name_width, r->name, max, mean, ops, seed,
		ratio, per);
}

/* The names of the measured rows under `limit`, wrapped. */
static void print_rows_under(const bench_report *rep, double limit, size_t count)
{
	int col = 0;
	size_t i;

	printf("rows under %.0fx: %zu%s", limit, count, count ? ":" : "\n");
	for (i = 0; i < rep->count && count; i++) {
		const bench_result *r = &rep->results[i];
		int len = (int)strlen(r->name);

		if (r->status != BENCH_OK || r->ratio <= 0 || r->ratio >= limit)
			continue;
		if (col == 0 || col + len + 1 > 96) {
			printf("\n   ");
			col = 3;
		}
		printf(" %s", r->name);
		col += len + 1;
	}
	if (count)
		printf("\n");
}

static void print_summary(const bench_report *rep)
{
	ratio_summary s;

	summarize_ratios(rep, &s);
	printf("\nrows: %zu measured, %zu n/a, %zu errors", s.measured, s.na, s.errors);
	if (s.unmapped)
		printf(", %zu seed rows not mirrored by any row", s.unmapped);
	printf("\n");
	if (!s.compared) {
		printf("no measured row has a seed figure\n");
		return;
	}
	printf("geometric mean of the ratios (ours / seed CPU): %.1fx over %zu rows\n", s.geomean,
		s.compared);
	printf("minimum ratio: %.1fx (%s)\n", s.min->ratio, s.min->name);
	print_rows_under(rep, BENCH_ROW_TARGET, s.below_row);
	print_rows_under(rep, BENCH_MEAN_TARGET, s.below_mean);
}

static void print_notes(const bench_report *rep)
{
	bool any = false;
	size_t i;

	for (i = 0; i < rep->count; i++) {
		const bench_result *r = &rep->results[i];

		if (r->status != BENCH_OK || !r->note)
			continue;
		if (!any)
			printf("\nhow measured rows differ from the Python ones:\n");
		any = true;
		printf("  %s: %s\n", r->name, r->note);
	}
}

static void print_memory(const bench_report *rep)
{
	size_t i;

	if (rep->memory_error) {
		printf("\nmemory per leaf: ERROR: %s\n", rep->memory_failure.error);
		return;
	}
	if (!rep->nmemory)
		return;
	printf("\nmemory per leaf (counting allocator installed with td_set_allocator):\n");
	printf("%-16s %6s %6s %12s %12s %12s %12s %12s %8s\n", "fixture", "leaves", "dicts",
		"dict B/leaf", "allocs/leaf", "peak B/leaf", "tensor B/leaf", "data B/leaf", "leaked");
	for (i = 0; i < rep->nmemory; i++) {
		const bench_memory *m = &rep->memory[i];
		double n = m->leaves ? (double)m->leaves : 1;

		printf("%-16s %6zu %6zu %12.1f %12.2f %12.1f %12.1f %12.1f %8lld\n", m->fixture, m->leaves,
			m->dicts, (double)m->dict_bytes / n, (double)m->dict_allocs / n,
			(double)m->dict_peak / n, (double)m->tensor_bytes / n, (double)m->data_bytes / n,
			(long long)m->leaked_bytes);
	}
	printf("dict B/leaf: bytes the dict structure keeps (keys, entries, nested dicts) "
		   "divided by the leaves,\nthe tensors being made beforehand; tensor B/leaf: "
		   "buffer allocations (header + data).\n");
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */
/* ------------------------------------------------------------------------ */

static void json_str(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_num(double v, bool valid)
{
	if (valid && isfinite(v))
		printf("%.9g", v);
	else
		printf("null");
}

static const char *status_name(bench_status s)
{
	switch (s) {
	case BENCH_OK:
		return "ok";
	case BENCH_NA:
		return "n/a";
	case BENCH_ERROR:
		return "error";
	case BENCH_UNMAPPED:
		return "unmapped";
	default:
		return "pending";
	}
}

static void json_row(const bench_result *r)
{
	bool ok = r->status == BENCH_OK;

	printf("    {\"name\": ");
	json_str(r->name);
	printf(", \"file\": ");
	json_str(r->file);
	printf(", \"status\": \"%s\", \"max_s\": ", status_name(r->status));
	json_num(r->max_ns / 1e9, ok);
	printf(", \"mean_s\": ");
	json_num(r->mean_ns / 1e9, ok);
	printf(", \"min_s\": ");
	json_num(r->min_ns / 1e9, ok);
	printf(", \"median_s\": ");
	json_num(r->median_ns / 1e9, ok);
	printf(", \"stddev_s\": ");
	json_num(r->stddev_ns / 1e9, ok);
	printf(", \"ops_per_s\": ");
	json_num(r->ops_per_s, ok);
	printf(", \"seed_ops_per_s\": ");
	json_num(r->seed_ops_per_s, r->seed_ops_per_s > 0);
	printf(", \"ratio\": ");
	json_num(r->ratio, ok && r->ratio > 0);
	printf(", \"rounds\": %zu, \"iterations\": %zu, \"entries\": %zu, \"ns_per_entry\": ",
		r->rounds, r->iterations, r->entries);
	json_num(r->entries ? r->mean_ns / (double)r->entries : 0, ok && r->entries);
	printf(", \"note\": ");
	if (r->note)
		json_str(r->note);
	else
		printf("null");
	printf(", \"error\": ");
	if (r->status == BENCH_ERROR)
		json_str(r->error);
	else
		printf("null");
	printf("}");
}

static void json_summary(const bench_report *rep)
{
	ratio_summary s;

	summarize_ratios(rep, &s);
	printf("  \"summary\": {\"measured\": %zu, \"na\": %zu, \"errors\": %zu, "
		   "\"unmapped\": %zu, \"compared\": %zu, \"geomean_ratio\": ",
		s.measured, s.na, s.errors, s.unmapped, s.compared);
	json_num(s.geomean, s.compared > 0);
	printf(", \"min_ratio\": ");
	json_num(s.min ? s.min->ratio : 0, s.min != NULL);
	printf(", \"min_ratio_row\": ");
	if (s.min)
		json_str(s.min->name);
	else
		printf("null");
	printf(", \"rows_below_10x\": %zu, \"rows_below_100x\": %zu},\n", s.below_row, s.below_mean);
}

static void json_memory(const bench_report *rep)
{
	size_t i;

	printf("  \"memory\": [");
	for (i = 0; i < rep->nmemory; i++) {
		const bench_memory *m = &rep->memory[i];
		double n = m->leaves ? (double)m->leaves : 1;

		printf("%s\n    {\"fixture\": ", i ? "," : "");
		json_str(m->fixture);
		printf(", \"leaves\": %zu, \"dicts\": %zu, \"dict_bytes\": %llu, "
			   "\"dict_allocs\": %llu, \"dict_peak_bytes\": %llu, \"tensor_bytes\": %llu, "
			   "\"tensor_allocs\": %llu, \"data_bytes\": %llu, \"leaked_bytes\": %lld, "
			   "\"dict_bytes_per_leaf\": %.9g, \"tensor_bytes_per_leaf\": %.9g}",
			m->leaves, m->dicts, (unsigned long long)m->dict_bytes,
			(unsigned long long)m->dict_allocs, (unsigned long long)m->dict_peak,
			(unsigned long long)m->tensor_bytes, (unsigned long long)m->tensor_allocs,
			(unsigned long long)m->data_bytes, (long long)m->leaked_bytes,
			(double)m->dict_bytes / n, (double)m->tensor_bytes / n);
	}
	printf("%s],\n  \"memory_error\": ", rep->nmemory ? "\n  " : "");
	if (rep->memory_error)
		json_str(rep->memory_failure.error);
	else
		printf("null");
	printf("\n");
}

static void print_json(const bench_config *cfg, const bench_report *rep)
{
	size_t i;

	printf("{\n  \"program\": ");
	json_str(rep->program);
	printf(",\n  \"version\": ");
	json_str(td_version(NULL, NULL, NULL));
	printf(",\n  \"seed\": \"bench/seed_cpu.tsv\",\n  \"config\": {\"min_time_s\": %.9g, "
		   "\"max_time_s\": %.9g, \"warmup_s\": %.9g, \"rounds\": %zu, \"calls\": %zu, \"repeat\": %zu, "
		   "\"timer_precision_ns\": %llu, \"optimized\": %s, \"sanitized\": %s},\n",
		cfg->min_time, cfg->max_time, cfg->warmup, cfg->rounds, cfg->calls, cfg->repeat,
		(unsigned long long)cfg->precision_ns, BENCH_OPTIMIZED ? "true" : "false",
		BENCH_SANITIZED ? "true" : "false");
	printf("  \"rows\": [\n");
	for (i = 0; i < rep->count; i++) {
		json_row(&rep->results[i]);
		printf("%s\n", i + 1 < rep->count ? "," : "");
	}
	printf("  ],\n");
	json_summary(rep);
	json_memory(rep);
	printf("}\n");
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
/* ------------------------------------------------------------------------ */

void bench_report_begin(const bench_config *cfg, bench_report *rep)
{
	if (!cfg->json)
		print_header(cfg, rep);
	fflush(stdout);
}

void bench_report_row(const bench_config *cfg, bench_report *rep, const bench_result *r)
{
	if (!cfg->json) {
		print_row(rep, r);
		fflush(stdout);
	}
}

void bench_report_end(const bench_config *cfg, bench_report *rep)
{
	if (cfg->json) {
		print_json(cfg, rep);
		return;
	}
	print_summary(rep);
	print_notes(rep);
	print_memory(rep);
}

void bench_report_list(const bench_config *cfg, const bench_report *rep)
{
	size_t i;

	(void)cfg;
	for (i = 0; i < rep->count; i++) {
		const bench_result *r = &rep->results[i];
		const char *kind = r->status == BENCH_PENDING ? "measured" : "n/a";

		printf("%-44s %-8s %-26s", r->name, kind, r->file);
		if (r->entries)
			printf(" entries=%zu", r->entries);
		if (r->note)
			printf(" - %s", r->note);
		printf("\n");
	}
}
