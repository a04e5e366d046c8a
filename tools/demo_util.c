/* SPDX-License-Identifier: MIT */
/*
 * demo_util.c - what the demo steps share: the report line, failures and
 * verifications, shape formatting, and measurements of tensors and dicts
 * (sums, moments, differences, key lists).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "demo.h"

/* ------------------------------------------------------------------------ */
/* Reporting and verification                                                */
/* ------------------------------------------------------------------------ */

void demo_say(demo *d, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (d->len >= sizeof(d->line) - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(d->line + d->len, sizeof(d->line) - d->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		d->len += (size_t)n < sizeof(d->line) - d->len ? (size_t)n : sizeof(d->line) - d->len - 1;
}

int demo_fail(demo *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->failure, sizeof(d->failure), fmt, ap);
	va_end(ap);
	return -1;
}

int demo_lib(demo *d, int rc, const char *what)
{
	const td_error *e;

	if (rc >= 0)
		return 0;
	e = td_error_last();
	return demo_fail(d, "%s failed: %s (%s)", what, td_strerror(rc),
		e->code == rc ? e->message : "no message recorded");
}

int demo_check(demo *d, bool ok, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (ok) {
		d->checks++;
		return 0;
	}
	n = snprintf(d->failure, sizeof(d->failure), "check failed: ");
	va_start(ap, fmt);
	vsnprintf(d->failure + n, sizeof(d->failure) - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

int demo_check_code(demo *d, int rc, int expected, const char *what)
{
	const td_error *e = td_error_last();

	if (rc != expected)
		return demo_fail(d, "check failed: %s returned %d (%s), expected %s", what, rc,
			td_strerror(rc), td_strerror(expected));
	return demo_check(d, e->code == expected && e->message[0] != '\0',
		"%s failed with %s but recorded no message", what, td_strerror(expected));
}

int demo_check_equal(demo *d, const td_dict *a, const td_dict *b, int expect, const char *what)
{
	int r = td_dict_equal(a, b);

	if (r < 0)
		return demo_lib(d, r, what);
	return demo_check(d, r == expect, "%s: td_dict_equal gave %d, expected %d", what, r, expect);
}

/* ------------------------------------------------------------------------ */
/* Formatting                                                                */
/* ------------------------------------------------------------------------ */

#define FMT_SLOTS 8
#define FMT_CAP 160

static char *fmt_slot(void)
{
	static char slots[FMT_SLOTS][FMT_CAP];
	static unsigned next;

	return slots[next++ % FMT_SLOTS];
}

static void put_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
	size_t len = 0;
	int i;

	len += (size_t)snprintf(buf, cap, "[");
	for (i = 0; i < ndim && len < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)shape[i]);
	if (len < cap)
		snprintf(buf + len, cap - len, "]");
}

const char *demo_shape(int ndim, const int64_t *shape)
{
	char *buf = fmt_slot();

	put_shape(buf, FMT_CAP, ndim, shape);
	return buf;
}

const char *demo_batch(const td_dict *d)
{
	return demo_shape(td_dict_batch_ndim(d), td_dict_batch_shape(d));
}

const char *demo_tensor(const td_tensor *t)
{
	char *buf = fmt_slot();
	int n = snprintf(buf, FMT_CAP, "%s", td_dtype_name(t->dtype));

	put_shape(buf + n, FMT_CAP - (size_t)n, t->ndim, td_tensor_shape(t));
	return buf;
}

/* ------------------------------------------------------------------------ */
/* Measuring                                                                 */
/* ------------------------------------------------------------------------ */

/* A contiguous float64 copy (or reference) of `t`. */
static int as_f64(td_tensor *out, const td_tensor *t)
{
	int rc = td_tensor_to_dtype(out, t, TD_DTYPE_F64);

	if (rc < 0)
		return rc;
	rc = td_tensor_contiguous(out, out);
	if (rc < 0)
		td_tensor_release(out);
	return rc;
}

int demo_tensor_sum(const td_tensor *t, double *sum)
{
	td_tensor f = TD_TENSOR_INIT;
	const double *x;
	int64_t i, n;
	int rc = as_f64(&f, t);

	if (rc < 0)
		return rc;
	x = td_tensor_data(&f);
	n = td_tensor_numel(&f);
	*sum = 0;
	for (i = 0; i < n; i++)
		*sum += x[i];
	td_tensor_release(&f);
	return TD_OK;
}

int demo_tensor_moments(const td_tensor *t, double *mean, double *std)
{
	td_tensor f = TD_TENSOR_INIT;
	const double *x;
	double m = 0, v = 0;
	int64_t i, n;
	int rc = as_f64(&f, t);

	if (rc < 0)
		return rc;
	x = td_tensor_data(&f);
	n = td_tensor_numel(&f);
	for (i = 0; i < n; i++)
		m += x[i];
	m = n > 0 ? m / (double)n : 0;
	for (i = 0; i < n; i++)
		v += (x[i] - m) * (x[i] - m);
	*mean = m;
	*std = n > 0 ? sqrt(v / (double)n) : 0;
	td_tensor_release(&f);
	return TD_OK;
}

/* Compared as float64, so that bool leaves (which cannot be subtracted) work too. */
static int tensor_max_abs_diff(const td_tensor *a, const td_tensor *b, double *out)
{
	td_tensor fa = TD_TENSOR_INIT, fb = TD_TENSOR_INIT, diff = TD_TENSOR_INIT;
	const double *x;
	int64_t i, n;
	int rc = as_f64(&fa, a);

	if (rc >= 0)
		rc = as_f64(&fb, b);
	if (rc >= 0)
		rc = td_tensor_binary(&diff, &fa, &fb, TD_OP_SUB);
	td_tensor_release(&fa);
	td_tensor_release(&fb);
	if (rc < 0)
		return rc;
	x = td_tensor_data(&diff);
	n = td_tensor_numel(&diff);
	for (i = 0; i < n; i++) {
		if (fabs(x[i]) > *out)
			*out = fabs(x[i]);
	}
	td_tensor_release(&diff);
	return TD_OK;
}

int demo_dict_max_abs_diff(const td_dict *a, const td_dict *b, double *out)
{
	td_dict_iter *it = NULL;
	td_item item;
	int rc = td_dict_iter_new(&it, a, TD_ITER_NESTED | TD_ITER_LEAVES_ONLY);

	*out = 0;
	while (rc >= 0 && (rc = td_dict_iter_next(&item, it)) == 1) {
		const td_tensor *tb;
		td_key *key;

		if (item.value->kind != TD_VALUE_TENSOR)
			continue;
		/* The path's components may hold '.': a key handle reaches them. */
		rc = td_key_from_path(&key, item.path, item.depth);
		if (rc >= 0) {
			rc = td_dict_get_tensor_key(&tb, b, key);
			td_key_free(key);
		}
		if (rc >= 0)
			rc = tensor_max_abs_diff(&item.value->tensor, tb, out);
	}
	td_dict_iter_free(it);
	return rc < 0 ? rc : TD_OK;
}

static void count_item(demo_stats *s, const td_item *item, double sum)
{
	if (item->depth > s->max_depth)
		s->max_depth = item->depth;
	if (item->value->kind == TD_VALUE_DICT) {
		s->dicts++;
	} else if (item->value->kind == TD_VALUE_TENSOR) {
		s->leaves++;
		s->numel += td_tensor_numel(&item->value->tensor);
		s->nbytes += td_tensor_nbytes(&item->value->tensor);
		s->sum += sum;
	} else {
		s->blobs++;
	}
}

int demo_dict_stats(const td_dict *d, demo_stats *out)
{
	td_dict_iter *it = NULL;
	td_item item;
	int rc = td_dict_iter_new(&it, d, TD_ITER_NESTED);

	memset(out, 0, sizeof(*out));
	while (rc >= 0 && (rc = td_dict_iter_next(&item, it)) == 1) {
		double sum = 0;

		if (item.value->kind == TD_VALUE_TENSOR)
			rc = demo_tensor_sum(&item.value->tensor, &sum);
		if (rc >= 0)
			count_item(out, &item, sum);
	}
	td_dict_iter_free(it);
	return rc < 0 ? rc : TD_OK;
}

/* Append one path, dotted, after a ", " separator unless first. */
static void put_path(char *buf, size_t cap, size_t *len, const td_item *item)
{
	size_t i;

	for (i = 0; i < item->depth && *len < cap; i++) {
		const char *sep = i > 0 ? "." : *len > 0 ? ", " : "";
		int n = snprintf(buf + *len, cap - *len, "%s%s", sep, item->path[i]);

		*len = n < 0 ? cap : *len + (size_t)n;
	}
}

int demo_dict_key_list(const td_dict *d, unsigned flags, char *buf, size_t cap)
{
	td_dict_iter *it = NULL;
	td_item item;
	size_t len = 0;
	int rc = td_dict_iter_new(&it, d, flags);

	if (cap > 0)
		buf[0] = '\0';
	while (rc >= 0 && (rc = td_dict_iter_next(&item, it)) == 1)
		put_path(buf, cap, &len, &item);
	td_dict_iter_free(it);
	return rc < 0 ? rc : TD_OK;
}

bool demo_shares(const td_dict *d, const td_dict *e, const char *key)
{
	const td_tensor *a, *b;

	if (td_dict_get_tensor(&a, d, key) < 0 || td_dict_get_tensor(&b, e, key) < 0)
		return false;
	return a->buffer == b->buffer;
}

int demo_tensor_at(const td_tensor *t, const int64_t *index, double *out)
{
	td_scalar s;
	int rc = td_tensor_get(&s, t, index);

	if (rc < 0)
		return rc;
	if (s.kind == TD_SCALAR_BOOL)
		*out = s.v.b;
	else if (s.kind == TD_SCALAR_INT)
		*out = (double)s.v.i;
	else if (s.kind == TD_SCALAR_UINT)
		*out = (double)s.v.u;
	else if (s.kind == TD_SCALAR_FLOAT)
		*out = s.v.f;
	else
		*out = s.v.c[0];
	return TD_OK;
}

int demo_at(const td_dict *d, const char *key, const int64_t *index, double *out)
{
	const td_tensor *t;
	int rc = td_dict_get_tensor(&t, d, key);

	return rc < 0 ? rc : demo_tensor_at(t, index, out);
}

int demo_sum(const td_dict *d, const char *key, double *sum)
{
	const td_tensor *t;
	int rc = td_dict_get_tensor(&t, d, key);

	return rc < 0 ? rc : demo_tensor_sum(t, sum);
}
