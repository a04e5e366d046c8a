/* SPDX-License-Identifier: MIT */
/*
 * test_tensor_index.c - td_tensor_index(), td_tensor_index_put() and
 * td_tensor_index_fill(): each index kind, the placement rules of advanced
 * indices, views versus copies, every failure path, allocation failures,
 * and several hundred random expressions (random shapes, dtypes, layouts
 * and index kinds) checked against a naive reference implemented here.
 */
#include "td_test.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static const td_dtype int_dtypes[] = {
	TD_DTYPE_U8,
	TD_DTYPE_I8,
	TD_DTYPE_I16,
	TD_DTYPE_I32,
	TD_DTYPE_I64,
	TD_DTYPE_U16,
	TD_DTYPE_U32,
	TD_DTYPE_U64,
};

static int64_t rnd(uint64_t *rng, int64_t n)
{
	return n <= 0 ? 0 : (int64_t)(td_test_rand(rng) % (uint64_t)n);
}

/* Address of element `index` of `t`. */
static char *elem_at(const td_tensor *t, const int64_t *index)
{
	int64_t off = 0;
	int d;

	for (d = 0; d < t->ndim; d++)
		off += index[d] * td_tensor_strides(t)[d];
	return (char *)td_tensor_data(t) + off * (int64_t)td_dtype_size(t->dtype);
}

static int64_t numel_of(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	int d;

	for (d = 0; d < ndim; d++)
		n *= shape[d];
	return n;
}

/*
 * A tensor of `shape` with a random layout: dims permuted in memory, gaps
 * between positions, stride-0 (expanded) dims when `expand`, an offset,
 * filled with random values.
 */
static void make_view(td_tensor *out, td_dtype dt, int ndim, const int64_t *shape, uint64_t *rng,
	bool expand)
{
	int perm[TD_MAX_DIMS], d, k;
	int64_t strides[TD_MAX_DIMS], acc = 1, extent, offset = rnd(rng, 3);
	td_tensor base;

	for (d = 0; d < ndim; d++)
		perm[d] = d;
	if (rnd(rng, 3) == 0)
		for (d = ndim - 1; d > 0; d--) {
			int j = (int)rnd(rng, d + 1), tmp = perm[d];
			perm[d] = perm[j];
			perm[j] = tmp;
		}
	for (k = ndim - 1; k >= 0; k--) {
		d = perm[k];
		if (expand && rnd(rng, 6) == 0) {
			strides[d] = 0;
			continue;
		}
		strides[d] = acc * (rnd(rng, 4) == 0 ? 2 : 1);
		acc = strides[d] * (shape[d] > 0 ? shape[d] : 1);
	}
	extent = offset + 1;
	for (d = 0; d < ndim; d++)
		extent += (shape[d] > 0 ? shape[d] - 1 : 0) * strides[d];
	td_cr_assert_ok(td_tensor_empty(&base, dt, 1, &extent));
	td_test_random_fill(&base, td_test_rand(rng));
	td_cr_assert_ok(td_tensor_from_buffer(out, base.buffer, dt, ndim, shape, strides, offset));
	td_tensor_release(&base);
}

/* A 1-d int64 tensor holding `v`. */
static void make_i64(td_tensor *out, const int64_t *v, int64_t n)
{
	td_cr_assert_ok(td_tensor_from_data(out, TD_DTYPE_I64, 1, &n, v));
}

static double get_f(const td_tensor *t, const int64_t *index)
{
	td_scalar s;

	td_cr_assert_ok(td_tensor_get(&s, t, index));
	switch (s.kind) {
	case TD_SCALAR_BOOL:
		return s.v.b;
	case TD_SCALAR_INT:
		return (double)s.v.i;
	case TD_SCALAR_UINT:
		return (double)s.v.u;
	case TD_SCALAR_FLOAT:
		return s.v.f;
	default:
		return s.v.c[0];
	}
}

static void assert_shape(const td_tensor *t, int ndim, const int64_t *shape)
{
	int d;

	cr_assert_eq(t->ndim, ndim, "ndim %d, expected %d", t->ndim, ndim);
	for (d = 0; d < ndim; d++)
		cr_assert_eq(td_tensor_shape(t)[d], shape[d], "dim %d: %lld, expected %lld", d,
			(long long)td_tensor_shape(t)[d], (long long)shape[d]);
}

/* ------------------------------------------------------------------------ */
/* Reference implementation                                                  */
/* ------------------------------------------------------------------------ */

#define REF_MAX 64

/* A dense index array, C order. */
typedef struct ref_arr {
	int ndim;
	int64_t shape[TD_MAX_DIMS];
	int64_t *v;
} ref_arr;

/* One dim-making item of the expression, in order. */
typedef struct ref_item {
	bool adv;
	int in_dim;               /* -1: an inserted dim */
	int64_t start, step, len; /* basic items */
	int arr;                  /* advanced items */
} ref_item;

typedef struct ref {
	int status; /* what the library must return */
	bool view;
	int ndim;
	int64_t shape[REF_MAX];
	int64_t count;
	int64_t *offsets; /* buffer element of each result element, C order */
	int64_t fixed[TD_MAX_DIMS];
	int nitems, narr, nb;
	int64_t bshape[TD_MAX_DIMS];
	ref_item items[REF_MAX];
	ref_arr arrs[REF_MAX];
	int rdims[REF_MAX]; /* result dim -> item, or -1 - (B dim) */
} ref;

static void ref_free(ref *r)
{
	int j;

	for (j = 0; j < r->narr; j++)
		free(r->arrs[j].v);
	free(r->offsets);
	memset(r, 0, sizeof(*r));
}

static void ref_basic(ref *r, int in_dim, int64_t start, int64_t step, int64_t len)
{
	ref_item *it = &r->items[r->nitems++];

	it->adv = false;
	it->in_dim = in_dim;
	it->start = start;
	it->step = step;
	it->len = len;
}

static ref_arr *ref_adv(ref *r, int in_dim, int ndim, const int64_t *shape)
{
	ref_item *it = &r->items[r->nitems++];
	ref_arr *a = &r->arrs[r->narr];

	it->adv = true;
	it->in_dim = in_dim;
	it->arr = r->narr++;
	a->ndim = ndim;
	memcpy(a->shape, shape, (size_t)ndim * sizeof(int64_t));
	a->v = calloc((size_t)numel_of(ndim, shape) + 1, sizeof(int64_t));
	return a;
}

/* Python's slice semantics for a positive step, position by position. */
static void ref_slice(ref *r, int d, int64_t size, const td_index *x)
{
	int64_t step = x->step == TD_SLICE_NONE ? 1 : x->step, start = x->start, stop = x->stop;
	int64_t i, first = -1, len = 0;

	if (start == TD_SLICE_NONE)
		start = 0;
	else if (start < 0)
		start = start + size < 0 ? 0 : start + size;
	if (stop == TD_SLICE_NONE)
		stop = size;
	else if (stop < 0)
		stop = stop + size < 0 ? 0 : stop + size;
	for (i = start; i < stop && i < size; i += step) {
		if (first < 0)
			first = i;
		len++;
	}
	ref_basic(r, d, first < 0 ? 0 : first, step, len);
}

/* Apply an integer or bool index tensor; false on a mask shape mismatch. */
static bool ref_tensor(ref *r, const td_tensor *t, int *d, const td_tensor *m)
{
	int64_t n = numel_of(m->ndim, td_tensor_shape(m)), f, idx[TD_MAX_DIMS], nnz = 0, c = 0;
	ref_arr *a;
	int j;

	if (m->dtype != TD_DTYPE_BOOL) {
		a = ref_adv(r, (*d)++, m->ndim, td_tensor_shape(m));
		for (f = 0; f < n; f++) {
			td_scalar s;
			td_test_unravel(m->ndim, td_tensor_shape(m), f, idx);
			td_cr_assert_ok(td_tensor_get(&s, m, idx));
			a->v[f] = s.kind == TD_SCALAR_UINT ? (s.v.u > INT64_MAX ? INT64_MAX : (int64_t)s.v.u) :
												 s.v.i;
		}
		return true;
	}
	for (f = 0; f < n; f++) {
		td_test_unravel(m->ndim, td_tensor_shape(m), f, idx);
		nnz += get_f(m, idx) != 0;
	}
	if (m->ndim == 0) {
		ref_adv(r, -1, 1, &nnz);
		return true;
	}
	for (j = 0; j < m->ndim; j++)
		if (td_tensor_shape(m)[j] != td_tensor_shape(t)[*d + j])
			return false;
	for (j = 0; j < m->ndim; j++)
		ref_adv(r, *d + j, 1, &nnz);
	for (f = 0; f < n; f++) {
		td_test_unravel(m->ndim, td_tensor_shape(m), f, idx);
		if (get_f(m, idx) == 0)
			continue;
		for (j = 0; j < m->ndim; j++)
			r->arrs[r->narr - m->ndim + j].v[c] = idx[j];
		c++;
	}
	*d += m->ndim;
	return true;
}

/* Walk the elements; returns false on an out-of-range int/range or a bad mask. */
static bool ref_walk(ref *r, const td_tensor *t, const td_index *idx, size_t n)
{
	int consumed = 0, d = 0, k;
	bool ok = true;
	size_t i;

	for (i = 0; i < n; i++) {
		td_index_kind kd = idx[i].kind;
		if (kd == TD_INDEX_TENSOR)
			consumed += idx[i].tensor->dtype == TD_DTYPE_BOOL ? idx[i].tensor->ndim : 1;
		else if (kd != TD_INDEX_NEWAXIS && kd != TD_INDEX_ELLIPSIS)
			consumed++;
	}
	for (k = 0; k < t->ndim; k++)
		r->fixed[k] = -1;
	for (i = 0; i < n; i++) {
		const td_index *x = &idx[i];
		int64_t size = d < t->ndim ? td_tensor_shape(t)[d] : 0, v, c;
		ref_arr *a;
		switch (x->kind) {
		case TD_INDEX_INT:
			v = x->start < 0 ? x->start + size : x->start;
			ok = ok && v >= 0 && v < size;
			r->fixed[d++] = v;
			break;
		case TD_INDEX_SLICE:
			ref_slice(r, d++, size, x);
			break;
		case TD_INDEX_RANGE:
			for (c = 0, v = x->start; v < x->stop; v += x->step, c++)
				ok = ok && v >= 0 && v < size;
			ref_basic(r, d++, x->start, x->step, c);
			break;
		case TD_INDEX_NEWAXIS:
			ref_basic(r, -1, 0, 0, 1);
			break;
		case TD_INDEX_ELLIPSIS:
			for (k = 0; k < t->ndim - consumed; k++, d++)
				ref_basic(r, d, 0, 1, td_tensor_shape(t)[d]);
			break;
		case TD_INDEX_LIST:
			a = ref_adv(r, d++, 1, &x->count);
			memcpy(a->v, x->list, (size_t)x->count * sizeof(int64_t));
			break;
		case TD_INDEX_MASK:
			ok = ok && x->count == size;
			for (c = 0, v = 0; v < x->count; v++)
				c += x->mask[v];
			a = ref_adv(r, d++, 1, &c);
			for (c = 0, v = 0; v < x->count; v++)
				if (x->mask[v])
					a->v[c++] = v;
			break;
		case TD_INDEX_TENSOR:
			if (!ref_tensor(r, t, &d, x->tensor))
				return false;
			break;
		}
	}
	for (; d < t->ndim; d++)
		ref_basic(r, d, 0, 1, td_tensor_shape(t)[d]);
	return ok;
}

/* numpy broadcasting of the index arrays; false if they do not broadcast. */
static bool ref_broadcast(ref *r)
{
	int j, d;

	r->nb = 0;
	for (j = 0; j < r->narr; j++) {
		const ref_arr *a = &r->arrs[j];
		int64_t out[TD_MAX_DIMS];
		int nb = a->ndim > r->nb ? a->ndim : r->nb;
		for (d = 0; d < nb; d++) {
			int ia = a->ndim - nb + d, ib = r->nb - nb + d;
			int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? r->bshape[ib] : 1;
			if (sa != sb && sa != 1 && sb != 1)
				return false;
			out[d] = sa == 1 ? sb : sa;
		}
		r->nb = nb;
		memcpy(r->bshape, out, sizeof(out));
	}
	return true;
}

static bool ref_positions_ok(const ref *r, const td_tensor *t)
{
	int i;
	int64_t f;

	for (i = 0; i < r->nitems; i++) {
		const ref_item *it = &r->items[i];
		const ref_arr *a = &r->arrs[it->arr];
		int64_t size = it->in_dim >= 0 ? td_tensor_shape(t)[it->in_dim] : 1;
		if (!it->adv)
			continue;
		for (f = 0; f < numel_of(a->ndim, a->shape); f++)
			if (a->v[f] < -size || a->v[f] >= size)
				return false;
	}
	return true;
}

/* The result dims: items, with the advanced ones replaced by the B dims. */
static void ref_layout(ref *r)
{
	int i, j, first = -1, last = -1, nadv = 0;
	bool adjacent;

	for (i = 0; i < r->nitems; i++)
		if (r->items[i].adv) {
			if (first < 0)
				first = i;
			last = i;
			nadv++;
		}
	adjacent = nadv > 0 && last - first + 1 == nadv;
	r->ndim = 0;
	if (nadv > 0 && !adjacent)
		for (j = 0; j < r->nb; j++)
			r->rdims[r->ndim++] = -1 - j;
	for (i = 0; i < r->nitems; i++) {
		if (i == first && adjacent)
			for (j = 0; j < r->nb; j++)
				r->rdims[r->ndim++] = -1 - j;
		if (!r->items[i].adv)
			r->rdims[r->ndim++] = i;
	}
	for (i = 0; i < r->ndim; i++)
		r->shape[i] = r->rdims[i] >= 0 ? r->items[r->rdims[i]].len : r->bshape[-1 - r->rdims[i]];
}

/* Buffer element of result element `ridx`. */
static int64_t ref_offset(const ref *r, const td_tensor *t, const int64_t *ridx)
{
	int64_t pos[TD_MAX_DIMS], bidx[TD_MAX_DIMS], off = t->offset;
	int i, d;

	memcpy(pos, r->fixed, sizeof(pos));
	for (i = 0; i < r->ndim; i++) {
		if (r->rdims[i] < 0) {
			bidx[-1 - r->rdims[i]] = ridx[i];
		} else {
			const ref_item *it = &r->items[r->rdims[i]];
			if (it->in_dim >= 0)
				pos[it->in_dim] = it->start + ridx[i] * it->step;
		}
	}
	for (i = 0; i < r->nitems; i++) {
		const ref_item *it = &r->items[i];
		const ref_arr *a = &r->arrs[it->arr];
		int64_t f = 0, v, size;
		if (!it->adv || it->in_dim < 0)
			continue;
		for (d = 0; d < a->ndim; d++) {
			int ib = r->nb - a->ndim + d;
			f = f * a->shape[d] + (a->shape[d] == 1 ? 0 : bidx[ib]);
		}
		size = td_tensor_shape(t)[it->in_dim];
		v = a->v[f];
		pos[it->in_dim] = v < 0 ? v + size : v;
	}
	for (d = 0; d < t->ndim; d++)
		off += pos[d] * td_tensor_strides(t)[d];
	return off;
}

/* Compute what `t[idx...]` must give. */
static void ref_index(ref *r, const td_tensor *t, const td_index *idx, size_t n)
{
	int64_t f, ridx[REF_MAX];

	memset(r, 0, sizeof(*r));
	if (!ref_walk(r, t, idx, n)) {
		r->status = TD_EINDEX;
		return;
	}
	if (!ref_broadcast(r)) {
		r->status = TD_ETYPE;
		return;
	}
	if (!ref_positions_ok(r, t)) {
		r->status = TD_EINDEX;
		return;
	}
	r->view = r->narr == 0;
	ref_layout(r);
	r->count = numel_of(r->ndim, r->shape);
	r->offsets = calloc((size_t)r->count + 1, sizeof(int64_t));
	for (f = 0; f < r->count; f++) {
		td_test_unravel(r->ndim, r->shape, f, ridx);
		r->offsets[f] = ref_offset(r, t, ridx);
	}
}

/* ------------------------------------------------------------------------ */
/* Random expressions                                                        */
/* ------------------------------------------------------------------------ */

#define GEN_MAX 24

typedef struct gen {
	td_index idx[GEN_MAX];
	size_t n;
	int64_t lists[GEN_MAX][8];
	bool masks[GEN_MAX][8];
	td_tensor tensors[GEN_MAX];
	int ntensors;
	int64_t len; /* preferred length of 1-d index arrays */
} gen;

static void gen_free(gen *g)
{
	int i;

	for (i = 0; i < g->ntensors; i++)
		td_tensor_release(&g->tensors[i]);
	g->ntensors = 0;
}

/* An integer index tensor with positions for a dim of `size`, random dtype and layout. */
static void gen_int_tensor(gen *g, int64_t size, uint64_t *rng)
{
	static const int64_t shapes[6][2] = { { 0, 0 }, { 1, 0 }, { 1, 1 }, { 2, 0 }, { 2, 1 },
		{ 2, 2 } };
	td_dtype dt = int_dtypes[rnd(rng, 8)];
	td_tensor *m = &g->tensors[g->ntensors++];
	int64_t shape[2], f, idx[2];
	int k = (int)rnd(rng, 6), nd = (int)shapes[k][0];

	shape[0] = shapes[k][1] == 1 ? 1 : g->len;
	if (nd == 2) {
		shape[0] = 2;
		shape[1] = shapes[k][1] == 1 ? 1 : g->len;
	}
	make_view(m, dt, nd, shape, rng, true);
	for (f = 0; f < numel_of(nd, shape); f++) {
		int64_t v = size > 0 ? rnd(rng, 2 * size) - size : 0;
		if (td_dtype_category(dt) == TD_CATEGORY_UINT && v < 0)
			v += size;
		td_test_unravel(nd, shape, f, idx);
		td_cr_assert_ok(td_tensor_set(m, idx, td_scalar_int(v)));
	}
	g->idx[g->n++] = td_index_tensor(m);
}

/* A bool mask tensor over `k` dims of `shape`. */
static void gen_bool_tensor(gen *g, int k, const int64_t *shape, uint64_t *rng)
{
	td_tensor *m = &g->tensors[g->ntensors++];
	int64_t f, idx[TD_MAX_DIMS];

	make_view(m, TD_DTYPE_BOOL, k, shape, rng, false);
	for (f = 0; f < numel_of(k, shape); f++) {
		td_test_unravel(k, shape, f, idx);
		td_cr_assert_ok(td_tensor_set(m, idx, td_scalar_bool(rnd(rng, 2) != 0)));
	}
	g->idx[g->n++] = td_index_tensor(m);
}

static int64_t gen_bound(int64_t size, uint64_t *rng)
{
	return rnd(rng, 4) == 0 ? TD_SLICE_NONE : rnd(rng, 2 * size + 5) - size - 2;
}

static void gen_range(gen *g, int64_t size, uint64_t *rng)
{
	int64_t start, step = 1 + rnd(rng, 3), cnt;

	if (size == 0) {
		g->idx[g->n++] = td_index_range(0, 0, 1);
		return;
	}
	start = rnd(rng, size);
	cnt = rnd(rng, (size - 1 - start) / step + 2);
	g->idx[g->n++] = td_index_range(start,
		cnt == 0 ? start - rnd(rng, 2) : start + (cnt - 1) * step + 1 + rnd(rng, step), step);
}

/* One element naming dim `*d` (or more, for a mask tensor). */
static void gen_dim(gen *g, const td_tensor *t, int *d, uint64_t *rng)
{
	int64_t size = td_tensor_shape(t)[*d], i, c;
	int k;

	switch (rnd(rng, 9)) {
	case 0:
		if (size > 0) {
			g->idx[g->n++] = td_index_int(rnd(rng, 2 * size) - size);
			break;
		}
		/* fall through */
	case 1:
		g->idx[g->n++] = td_index_slice(gen_bound(size, rng), gen_bound(size, rng),
			rnd(rng, 6) == 0 ? TD_SLICE_NONE : 1 + rnd(rng, 3));
		break;
	case 2:
		gen_range(g, size, rng);
		break;
	case 3:
	case 4:
		c = size == 0 ? 0 : rnd(rng, 3) == 0 ? 1 : g->len;
		for (i = 0; i < c; i++)
			g->lists[g->n][i] = rnd(rng, 2 * size) - size;
		g->idx[g->n] = td_index_list(g->lists[g->n], c);
		g->n++;
		break;
	case 5:
		for (i = 0; i < size; i++)
			g->masks[g->n][i] = rnd(rng, 2) != 0;
		g->idx[g->n] = td_index_mask(g->masks[g->n], size);
		g->n++;
		break;
	case 6:
		gen_int_tensor(g, size, rng);
		break;
	case 7:
		k = 1 + (int)rnd(rng, t->ndim - *d < 2 ? 1 : 2);
		gen_bool_tensor(g, k, td_tensor_shape(t) + *d, rng);
		*d += k;
		return;
	default:
		gen_bool_tensor(g, 0, NULL, rng);
		return; /* a 0-d mask names no dim */
	}
	(*d)++;
}

/* A random valid-looking expression for `t`. */
static void gen_expr(gen *g, const td_tensor *t, uint64_t *rng)
{
	bool ellipsis = false;
	int d = 0;

	memset(g, 0, sizeof(*g));
	g->len = 1 + rnd(rng, 3);
	while (d < t->ndim && g->n < GEN_MAX - 2) {
		if (rnd(rng, 8) == 0) {
			g->idx[g->n++] = td_index_newaxis();
			continue;
		}
		if (!ellipsis && rnd(rng, 5) == 0) {
			ellipsis = true;
			g->idx[g->n++] = td_index_ellipsis();
			d += (int)rnd(rng, t->ndim - d + 1);
			continue;
		}
		if (!ellipsis && rnd(rng, 6) == 0)
			break; /* leave the trailing dims unnamed */
		gen_dim(g, t, &d, rng);
	}
	if (rnd(rng, 10) == 0)
		g->idx[g->n++] = td_index_newaxis();
}

/* Make one list position out of range, when there is a list with room for it. */
static bool gen_break(gen *g)
{
	size_t i;

	for (i = 0; i < g->n; i++)
		if (g->idx[i].kind == TD_INDEX_LIST && g->idx[i].count > 0) {
			g->lists[i][0] = 1000;
			return true;
		}
	return false;
}

/* ------------------------------------------------------------------------ */
/* Random tests against the reference                                        */
/* ------------------------------------------------------------------------ */

static void random_shape(int *ndim, int64_t *shape, uint64_t *rng)
{
	int d;

	*ndim = 1 + (int)rnd(rng, 5);
	for (d = 0; d < *ndim; d++)
		shape[d] = rnd(rng, 12) == 0 ? 0 : 1 + rnd(rng, 4);
}

/* Check the library's `t[idx]` against the reference. */
static void check_index(const td_tensor *t, const gen *g, int iter)
{
	size_t isz = td_dtype_size(t->dtype);
	int64_t f, ridx[REF_MAX];
	td_tensor out;
	ref r;
	int rc;

	ref_index(&r, t, g->idx, g->n);
	rc = td_tensor_index(&out, t, g->idx, g->n);
	cr_assert_eq(rc, r.status, "case %d (%s): returned %d, expected %d: %s", iter,
		td_dtype_name(t->dtype), rc, r.status, td_error_last()->message);
	if (rc < 0) {
		ref_free(&r);
		return;
	}
	assert_shape(&out, r.ndim, r.shape);
	cr_assert_eq(out.dtype, t->dtype);
	if (r.view) {
		cr_assert_eq(out.buffer, t->buffer, "case %d: a basic expression must give a view", iter);
	} else {
		cr_assert_neq(out.buffer, t->buffer, "case %d: an advanced expression must copy", iter);
		cr_assert_eq(td_buffer_refcount(out.buffer), 1);
		cr_assert(td_tensor_is_contiguous(&out));
	}
	for (f = 0; f < r.count; f++) {
		const char *want = (const char *)td_buffer_data(t->buffer) + r.offsets[f] * (int64_t)isz;
		td_test_unravel(r.ndim, r.shape, f, ridx);
		if (r.view)
			cr_assert_eq(elem_at(&out, ridx), want, "case %d: element %lld", iter, (long long)f);
		else
			cr_assert(memcmp(elem_at(&out, ridx), want, isz) == 0, "case %d: element %lld", iter,
				(long long)f);
	}
	td_tensor_release(&out);
	ref_free(&r);
}

Test(tensor_index, random_expressions_match_the_reference)
{
	uint64_t rng = 0x1d3a5eedULL;
	int iter, copies = 0, views = 0;

	for (iter = 0; iter < 800; iter++) {
		int64_t shape[TD_MAX_DIMS];
		td_tensor t;
		int ndim;
		gen g;

		random_shape(&ndim, shape, &rng);
		make_view(&t, (td_dtype)rnd(&rng, TD_DTYPE_COUNT), ndim, shape, &rng, true);
		gen_expr(&g, &t, &rng);
		if (rnd(&rng, 15) == 0)
			gen_break(&g);
		check_index(&t, &g, iter);
		views += g.ntensors == 0;
		copies += g.ntensors > 0;
		gen_free(&g);
		td_tensor_release(&t);
	}
	cr_assert(views > 100 && copies > 100, "views %d, copies %d", views, copies);
}

/* A value broadcastable to `shape`: leading dims dropped, some dims 1, random dtype. */
static void make_value(td_tensor *v, int ndim, const int64_t *shape, uint64_t *rng)
{
	int64_t vshape[REF_MAX];
	int drop = (int)rnd(rng, ndim + 1), d;

	if (rnd(rng, 2))
		drop = 0;
	for (d = drop; d < ndim; d++)
		vshape[d - drop] = rnd(rng, 4) == 0 ? 1 : shape[d];
	make_view(v, (td_dtype)rnd(rng, TD_DTYPE_COUNT), ndim - drop, vshape, rng, true);
}

/* What the buffer of `t` must hold after writing `src` (t's dtype) at the reference offsets. */
static char *ref_put(const td_tensor *t, const ref *r, const td_tensor *src)
{
	size_t isz = td_dtype_size(t->dtype), nbytes = td_buffer_size(t->buffer);
	char *want = malloc(nbytes + 1);
	int64_t f, ridx[REF_MAX], sidx[REF_MAX];
	int d;

	memcpy(want, td_buffer_data(t->buffer), nbytes);
	for (f = 0; f < r->count; f++) {
		td_test_unravel(r->ndim, r->shape, f, ridx);
		for (d = 0; d < src->ndim; d++) {
			int rd = r->ndim - src->ndim + d;
			sidx[d] = td_tensor_shape(src)[d] == 1 ? 0 : ridx[rd];
		}
		memcpy(want + r->offsets[f] * (int64_t)isz, elem_at(src, sidx), isz);
	}
	return want;
}

static void check_put(td_tensor *t, const gen *g, uint64_t *rng, int iter)
{
	td_tensor v, conv;
	char *want;
	ref r;
	int rc;

	ref_index(&r, t, g->idx, g->n);
	if (r.status < 0) {
		int64_t one = 1;
		td_cr_assert_ok(td_tensor_zeros(&v, TD_DTYPE_F32, 1, &one));
		rc = td_tensor_index_put(t, g->idx, g->n, &v);
		cr_assert_eq(rc, r.status, "case %d: put returned %d, expected %d", iter, rc, r.status);
		td_tensor_release(&v);
		ref_free(&r);
		return;
	}
	make_value(&v, r.ndim, r.shape, rng);
	td_cr_assert_ok(td_tensor_to_dtype(&conv, &v, t->dtype));
	want = ref_put(t, &r, &conv);
	td_cr_assert_ok(td_tensor_index_put(t, g->idx, g->n, &v));
	cr_assert(memcmp(td_buffer_data(t->buffer), want, td_buffer_size(t->buffer)) == 0,
		"case %d (%s <- %s): buffer differs from the reference", iter, td_dtype_name(t->dtype),
		td_dtype_name(v.dtype));
	free(want);
	td_tensor_release(&conv);
	td_tensor_release(&v);
	ref_free(&r);
}

static td_scalar random_scalar(uint64_t *rng)
{
	switch (rnd(rng, 4)) {
	case 0:
		return td_scalar_bool(rnd(rng, 2) != 0);
	case 1:
		return td_scalar_int(rnd(rng, 200) - 100);
	case 2:
		return td_scalar_uint((uint64_t)rnd(rng, 300));
	default:
		return td_scalar_float((double)(rnd(rng, 4000) - 2000) / 16.0);
	}
}

static void check_fill(td_tensor *t, const gen *g, uint64_t *rng, int iter)
{
	td_scalar s = random_scalar(rng);
	td_tensor cell;
	char *want;
	ref r;
	int rc;

	ref_index(&r, t, g->idx, g->n);
	if (r.status < 0) {
		rc = td_tensor_index_fill(t, g->idx, g->n, s);
		cr_assert_eq(rc, r.status, "case %d: fill returned %d, expected %d", iter, rc, r.status);
		ref_free(&r);
		return;
	}
	td_cr_assert_ok(td_tensor_full(&cell, t->dtype, 0, NULL, s));
	want = ref_put(t, &r, &cell);
	td_cr_assert_ok(td_tensor_index_fill(t, g->idx, g->n, s));
	cr_assert(memcmp(td_buffer_data(t->buffer), want, td_buffer_size(t->buffer)) == 0,
		"case %d (%s): buffer differs from the reference", iter, td_dtype_name(t->dtype));
	free(want);
	td_tensor_release(&cell);
	ref_free(&r);
}

Test(tensor_index, random_index_put_matches_the_reference)
{
	uint64_t rng = 0xfeedbeefULL;
	int iter;

	for (iter = 0; iter < 500; iter++) {
		int64_t shape[TD_MAX_DIMS];
		td_tensor t;
		int ndim;
		gen g;

		random_shape(&ndim, shape, &rng);
		/* No stride-0 dims: writing through them is order-dependent. */
		make_view(&t, (td_dtype)rnd(&rng, TD_DTYPE_COUNT), ndim, shape, &rng, false);
		gen_expr(&g, &t, &rng);
		if (rnd(&rng, 15) == 0)
			gen_break(&g);
		check_put(&t, &g, &rng, iter);
		gen_free(&g);
		td_tensor_release(&t);
	}
}

Test(tensor_index, random_index_fill_matches_the_reference)
{
	uint64_t rng = 0xabcdef12ULL;
	int iter;

	for (iter = 0; iter < 400; iter++) {
		int64_t shape[TD_MAX_DIMS];
		td_tensor t;
		int ndim;
		gen g;

		random_shape(&ndim, shape, &rng);
		make_view(&t, (td_dtype)rnd(&rng, TD_DTYPE_COUNT), ndim, shape, &rng, false);
		gen_expr(&g, &t, &rng);
		if (rnd(&rng, 15) == 0)
			gen_break(&g);
		check_fill(&t, &g, &rng, iter);
		gen_free(&g);
		td_tensor_release(&t);
	}
}

/* ------------------------------------------------------------------------ */
/* Basic indexing: views                                                     */
/* ------------------------------------------------------------------------ */

static void assert_view(const td_tensor *v, const td_tensor *t, int64_t offset, int ndim,
	const int64_t *shape, const int64_t *strides)
{
	int d;

	cr_assert_eq(v->buffer, t->buffer, "not a view");
	cr_assert_eq(v->offset, offset, "offset %lld, expected %lld", (long long)v->offset,
		(long long)offset);
	assert_shape(v, ndim, shape);
	for (d = 0; d < ndim; d++)
		if (shape[d] > 1)
			cr_assert_eq(td_tensor_strides(v)[d], strides[d], "stride %d: %lld, expected %lld", d,
				(long long)td_tensor_strides(v)[d], (long long)strides[d]);
}

Test(tensor_index, int_slice_and_range_give_views)
{
	int64_t shape[3] = { 3, 4, 5 };
	td_tensor t, v;

	td_test_arange(&t, TD_DTYPE_I32, 3, shape);
	{
		td_index x[] = { td_index_int(1) };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 1));
		assert_view(&v, &t, 20, 2, (int64_t[]){ 4, 5 }, (int64_t[]){ 5, 1 });
		cr_assert_eq(td_buffer_refcount(t.buffer), 2);
		td_tensor_release(&v);
		cr_assert_eq(td_buffer_refcount(t.buffer), 1);
	}
	{
		td_index x[] = { td_index_int(-1), td_index_slice(1, 3, 1),
			td_index_slice(TD_SLICE_NONE, TD_SLICE_NONE, 2) };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 3));
		assert_view(&v, &t, 45, 2, (int64_t[]){ 2, 3 }, (int64_t[]){ 5, 2 });
		cr_assert_eq(get_f(&v, (int64_t[]){ 1, 2 }), 54.0);
		td_tensor_release(&v);
	}
	{
		td_index x[] = { td_index_range(0, 3, 2), td_index_range(1, 4, 1) };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 2));
		assert_view(&v, &t, 5, 3, (int64_t[]){ 2, 3, 5 }, (int64_t[]){ 40, 5, 1 });
		td_tensor_release(&v);
	}
	{
		td_index x[] = { td_index_range(2, 2, 1), td_index_range(7, 3, 1) }; /* empty ranges */
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 2));
		assert_shape(&v, 3, (int64_t[]){ 0, 0, 5 });
		td_tensor_release(&v);
	}
	td_tensor_release(&t);
}

Test(tensor_index, slice_bounds_follow_python_rules)
{
	int64_t n = 10;
	td_tensor t, v;
	static const struct {
		int64_t start, stop, step, len, first;
	} c[] = {
		{ TD_SLICE_NONE, TD_SLICE_NONE, 1, 10, 0 },
		{ -3, TD_SLICE_NONE, 1, 3, 7 },
		{ -100, 100, 1, 10, 0 },
		{ 3, 1, 1, 0, 0 },
		{ 2, -2, 3, 2, 2 },
		{ 12, 20, 1, 0, 0 },
		{ TD_SLICE_NONE, -1, 4, 3, 0 },
		{ 1, 9, TD_SLICE_NONE, 8, 1 }, /* an omitted step is 1 */
		{ 0, 10, INT64_MAX, 1, 0 },
		{ INT64_MIN + 1, INT64_MAX, 5, 2, 0 },
	};
	size_t i;

	td_test_arange(&t, TD_DTYPE_I64, 1, &n);
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		td_index x = td_index_slice(c[i].start, c[i].stop, c[i].step);
		td_cr_assert_ok(td_tensor_index(&v, &t, &x, 1));
		cr_assert_eq(td_tensor_shape(&v)[0], c[i].len, "case %zu: length %lld", i,
			(long long)td_tensor_shape(&v)[0]);
		if (c[i].len > 0)
			cr_assert_eq(get_f(&v, (int64_t[]){ 0 }), (double)c[i].first, "case %zu", i);
		if (c[i].len > 1)
			cr_assert_eq(td_tensor_strides(&v)[0], c[i].step == TD_SLICE_NONE ? 1 : c[i].step);
		td_tensor_release(&v);
	}
	td_tensor_release(&t);
}

Test(tensor_index, newaxis_and_ellipsis)
{
	int64_t shape[3] = { 3, 4, 5 };
	td_tensor t, v;

	td_test_arange(&t, TD_DTYPE_F32, 3, shape);
	{
		td_index x[] = { td_index_newaxis(), td_index_ellipsis(), td_index_newaxis() };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 3));
		assert_view(&v, &t, 0, 5, (int64_t[]){ 1, 3, 4, 5, 1 }, (int64_t[]){ 0, 20, 5, 1, 0 });
		td_tensor_release(&v);
	}
	{
		td_index x[] = { td_index_ellipsis(), td_index_int(2) };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 2));
		assert_view(&v, &t, 2, 2, (int64_t[]){ 3, 4 }, (int64_t[]){ 20, 5 });
		td_tensor_release(&v);
	}
	{
		td_index x[] = { td_index_int(1), td_index_ellipsis(), td_index_int(1), td_index_int(1),
			td_index_newaxis() };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 5)); /* the ellipsis covers no dim */
		assert_view(&v, &t, 26, 1, (int64_t[]){ 1 }, (int64_t[]){ 0 });
		td_tensor_release(&v);
	}
	td_cr_assert_ok(td_tensor_index(&v, &t, NULL, 0));
	assert_view(&v, &t, 0, 3, shape, (int64_t[]){ 20, 5, 1 });
	td_tensor_release(&v);
	td_tensor_release(&t);
}

Test(tensor_index, basic_expressions_allocate_nothing)
{
	int64_t shape[2] = { 4, 6 };
	td_index x[] = { td_index_slice(1, TD_SLICE_NONE, 2), td_index_newaxis(), td_index_int(-2) };
	td_tensor t, v;

	td_test_arange(&t, TD_DTYPE_U16, 2, shape);
	td_test_alloc_install(0); /* every allocation fails */
	td_cr_assert_ok(td_tensor_index(&v, &t, x, 3));
	cr_assert_eq(td_test_alloc_attempts(), 0);
	td_cr_assert_ok(td_tensor_index_fill(&t, x, 3, td_scalar_int(9)));
	cr_assert_eq(td_test_alloc_attempts(), 0);
	td_test_alloc_uninstall();
	assert_view(&v, &t, 10, 2, (int64_t[]){ 2, 1 }, (int64_t[]){ 12, 0 });
	cr_assert_eq(get_f(&t, (int64_t[]){ 3, 4 }), 9.0);
	cr_assert_eq(get_f(&t, (int64_t[]){ 3, 3 }), 21.0);
	td_tensor_release(&v);
	td_tensor_release(&t);
}

Test(tensor_index, out_may_alias_an_input)
{
	int64_t shape[2] = { 4, 3 }, rows[2] = { 3, 0 };
	td_index x1[] = { td_index_int(2) };
	td_index x2[] = { td_index_list(rows, 2) };
	td_tensor t, keep, it;

	td_test_arange(&t, TD_DTYPE_I64, 2, shape);
	td_tensor_ref(&keep, &t);
	td_cr_assert_ok(td_tensor_index(&t, &t, x1, 1)); /* narrows t in place */
	cr_assert_eq(td_buffer_refcount(keep.buffer), 2);
	assert_shape(&t, 1, (int64_t[]){ 3 });
	cr_assert_eq(get_f(&t, (int64_t[]){ 1 }), 7.0);
	td_tensor_release(&t);
	td_tensor_ref(&t, &keep);
	td_cr_assert_ok(td_tensor_index(&t, &t, x2, 1)); /* a copy replaces t */
	cr_assert_eq(td_buffer_refcount(keep.buffer), 1);
	assert_shape(&t, 2, (int64_t[]){ 2, 3 });
	cr_assert_eq(get_f(&t, (int64_t[]){ 0, 2 }), 11.0);
	td_tensor_release(&t);
	make_i64(&it, rows, 2);
	{
		td_index x3[] = { td_index_tensor(&it) };
		td_cr_assert_ok(td_tensor_index(&it, &keep, x3, 1)); /* out is the index tensor */
	}
	assert_shape(&it, 2, (int64_t[]){ 2, 3 });
	cr_assert_eq(get_f(&it, (int64_t[]){ 1, 1 }), 1.0);
	td_tensor_release(&it);
	td_tensor_release(&keep);
}

/* ------------------------------------------------------------------------ */
/* Advanced indexing                                                         */
/* ------------------------------------------------------------------------ */

/* The 64 positions `rows` as: a list (0), an int64 tensor (1), a strided int32 tensor (2). */
static td_index row_index(int form, const int64_t *rows, td_tensor *it)
{
	int64_t wide_shape[2] = { 64, 2 };
	td_index second[] = { td_index_all(), td_index_int(1) };
	td_tensor pos, wide;

	if (form == 0)
		return td_index_list(rows, 64);
	make_i64(&pos, rows, 64);
	if (form == 1) {
		*it = pos;
		return td_index_tensor(it);
	}
	td_cr_assert_ok(td_tensor_zeros(&wide, TD_DTYPE_I32, 2, wide_shape));
	td_cr_assert_ok(td_tensor_index(it, &wide, second, 2)); /* column 1: stride 2 */
	td_cr_assert_ok(td_tensor_copy(it, &pos));
	td_tensor_release(&wide);
	td_tensor_release(&pos);
	return td_index_tensor(it);
}

Test(tensor_index, row_gather_from_a_contiguous_tensor)
{
	int64_t shape[3] = { 100, 7, 3 }, rows[64], i, j, k;
	uint64_t rng = 42;
	int form;

	for (i = 0; i < 64; i++)
		rows[i] = rnd(&rng, 200) - 100;
	for (form = 0; form < 3; form++) {
		td_tensor t, v, it = TD_TENSOR_INIT;
		td_index x = row_index(form, rows, &it);
		td_test_arange(&t, TD_DTYPE_I64, 3, shape);
		td_cr_assert_ok(td_tensor_index(&v, &t, &x, 1));
		assert_shape(&v, 3, (int64_t[]){ 64, 7, 3 });
		for (i = 0; i < 64; i++)
			for (j = 0; j < 7; j++)
				for (k = 0; k < 3; k++) {
					int64_t r = rows[i] < 0 ? rows[i] + 100 : rows[i];
					cr_assert_eq(((int64_t *)td_tensor_data(&v))[(i * 7 + j) * 3 + k],
						(r * 7 + j) * 3 + k, "form %d", form);
				}
		/* and the scatter back: t[rows] = 5 */
		td_cr_assert_ok(td_tensor_fill(&v, td_scalar_int(5)));
		td_cr_assert_ok(td_tensor_index_put(&t, &x, 1, &v));
		for (i = 0; i < 64; i++) {
			int64_t r = rows[i] < 0 ? rows[i] + 100 : rows[i];
			cr_assert_eq(((int64_t *)td_tensor_data(&t))[r * 21 + 20], 5, "form %d", form);
		}
		td_tensor_release(&v);
		td_tensor_release(&it);
		td_tensor_release(&t);
	}
}

Test(tensor_index, index_tensors_of_every_integer_dtype)
{
	int64_t shape[2] = { 6, 3 }, ishape[2] = { 2, 2 }, i, j, k;
	size_t di;
	td_tensor t, v, it;

	td_test_arange(&t, TD_DTYPE_F64, 2, shape);
	for (di = 0; di < sizeof(int_dtypes) / sizeof(int_dtypes[0]); di++) {
		bool sign = td_dtype_category(int_dtypes[di]) == TD_CATEGORY_INT;
		int64_t want[4] = { 5, 0, sign ? -1 : 1, 2 }, idx[2];
		td_index x;
		td_cr_assert_ok(td_tensor_empty(&it, int_dtypes[di], 2, ishape));
		for (i = 0; i < 4; i++) {
			td_test_unravel(2, ishape, i, idx);
			td_cr_assert_ok(td_tensor_set(&it, idx, td_scalar_int(want[i])));
		}
		x = td_index_tensor(&it);
		td_cr_assert_ok(td_tensor_index(&v, &t, &x, 1));
		assert_shape(&v, 3, (int64_t[]){ 2, 2, 3 });
		for (i = 0; i < 2; i++)
			for (j = 0; j < 2; j++)
				for (k = 0; k < 3; k++) {
					int64_t r = want[i * 2 + j] < 0 ? want[i * 2 + j] + 6 : want[i * 2 + j];
					cr_assert_eq(get_f(&v, (int64_t[]){ i, j, k }), (double)(r * 3 + k), "%s",
						td_dtype_name(int_dtypes[di]));
				}
		td_tensor_release(&v);
		td_tensor_release(&it);
	}
	td_tensor_release(&t);
}

Test(tensor_index, masks_select_true_positions)
{
	int64_t shape[3] = { 2, 3, 4 }, mshape[2] = { 3, 4 }, zero = 0;
	bool m1[4] = { true, false, true, true };
	td_tensor t, v, m;

	td_test_arange(&t, TD_DTYPE_I16, 3, shape);
	{
		td_index x[] = { td_index_ellipsis(), td_index_mask(m1, 4) };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 2));
		assert_shape(&v, 3, (int64_t[]){ 2, 3, 3 });
		cr_assert_eq(get_f(&v, (int64_t[]){ 1, 2, 2 }), 23.0);
		cr_assert_eq(get_f(&v, (int64_t[]){ 1, 2, 1 }), 22.0);
		td_tensor_release(&v);
	}
	td_cr_assert_ok(td_tensor_zeros(&m, TD_DTYPE_BOOL, 2, mshape));
	td_cr_assert_ok(td_tensor_set(&m, (int64_t[]){ 0, 3 }, td_scalar_bool(true)));
	td_cr_assert_ok(td_tensor_set(&m, (int64_t[]){ 2, 1 }, td_scalar_bool(true)));
	{
		td_index x[] = { td_index_all(), td_index_tensor(&m) };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 2)); /* a 2-d mask over dims 1, 2 */
		assert_shape(&v, 2, (int64_t[]){ 2, 2 });
		cr_assert_eq(get_f(&v, (int64_t[]){ 0, 0 }), 3.0);
		cr_assert_eq(get_f(&v, (int64_t[]){ 1, 1 }), 21.0);
		td_tensor_release(&v);
	}
	td_tensor_release(&m);
	td_cr_assert_ok(td_tensor_full(&m, TD_DTYPE_BOOL, 0, NULL, td_scalar_bool(true)));
	{
		td_index x[] = { td_index_tensor(&m) }; /* t[True] */
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 1));
		assert_shape(&v, 4, (int64_t[]){ 1, 2, 3, 4 });
		cr_assert_neq(v.buffer, t.buffer);
		cr_assert_eq(get_f(&v, (int64_t[]){ 0, 1, 2, 3 }), 23.0);
		td_tensor_release(&v);
		td_cr_assert_ok(td_tensor_fill(&m, td_scalar_bool(false)));
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 1)); /* t[False] */
		assert_shape(&v, 4, (int64_t[]){ 0, 2, 3, 4 });
		td_tensor_release(&v);
	}
	td_tensor_release(&m);
	{
		td_index x[] = { td_index_mask(NULL, 0) };
		td_tensor e;
		td_cr_assert_ok(td_tensor_zeros(&e, TD_DTYPE_F32, 1, &zero));
		td_cr_assert_ok(td_tensor_index(&v, &e, x, 1));
		assert_shape(&v, 1, &zero);
		td_tensor_release(&v);
		td_tensor_release(&e);
	}
	td_tensor_release(&t);
}

Test(tensor_index, advanced_dims_go_first_unless_adjacent)
{
	int64_t shape[4] = { 3, 4, 5, 6 }, l1[2] = { 0, 1 }, l2[2] = { 1, 2 }, l3[3] = { 0, 1, 2 };
	int64_t col[2] = { 0, 1 }, cshape[2] = { 2, 1 };
	td_tensor t, v, ct;

	td_test_arange(&t, TD_DTYPE_I32, 4, shape);
	td_cr_assert_ok(td_tensor_from_data(&ct, TD_DTYPE_I64, 2, cshape, col));
	{ /* adjacent: the broadcast dims replace them */
		td_index x[] = { td_index_all(), td_index_list(l1, 2), td_index_list(l2, 2) };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 3));
		assert_shape(&v, 3, (int64_t[]){ 3, 2, 6 });
		cr_assert_eq(get_f(&v, (int64_t[]){ 2, 1, 5 }), (double)(((2 * 4 + 1) * 5 + 2) * 6 + 5));
		td_tensor_release(&v);
	}
	{ /* separated by a slice: first */
		td_index x[] = { td_index_list(l1, 2), td_index_all(), td_index_list(l2, 2) };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 3));
		assert_shape(&v, 3, (int64_t[]){ 2, 4, 6 });
		cr_assert_eq(get_f(&v, (int64_t[]){ 1, 3, 4 }), (double)(((1 * 4 + 3) * 5 + 2) * 6 + 4));
		td_tensor_release(&v);
	}
	{ /* an integer between advanced indices does not separate them */
		td_index x[] = { td_index_all(), td_index_list(l1, 2), td_index_int(0),
			td_index_list(l2, 2) };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 4));
		assert_shape(&v, 2, (int64_t[]){ 3, 2 });
		cr_assert_eq(get_f(&v, (int64_t[]){ 2, 1 }), (double)(((2 * 4 + 1) * 5 + 0) * 6 + 2));
		td_tensor_release(&v);
	}
	{ /* an integer before them does not move them (torch's rule) */
		td_index x[] = { td_index_int(0), td_index_all(), td_index_list(l2, 2) };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 3));
		assert_shape(&v, 3, (int64_t[]){ 4, 2, 6 });
		td_tensor_release(&v);
	}
	{ /* a new axis separates them; 2-d index broadcasts with 1-d */
		td_index x[] = { td_index_tensor(&ct), td_index_newaxis(), td_index_list(l3, 3) };
		td_cr_assert_ok(td_tensor_index(&v, &t, x, 3));
		assert_shape(&v, 5, (int64_t[]){ 2, 3, 1, 5, 6 });
		cr_assert_eq(get_f(&v, (int64_t[]){ 1, 2, 0, 4, 5 }),
			(double)(((1 * 4 + 2) * 5 + 4) * 6 + 5));
		td_tensor_release(&v);
	}
	td_tensor_release(&ct);
	td_tensor_release(&t);
}

Test(tensor_index, empty_results)
{
	int64_t shape[2] = { 0, 3 }, three = 3;
	td_index x[] = { td_index_list(NULL, 0) };
	td_tensor t, v, one;

	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_C64, 2, shape));
	td_cr_assert_ok(td_tensor_index(&v, &t, x, 1));
	assert_shape(&v, 2, (int64_t[]){ 0, 3 });
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_index_fill(&t, x, 1, td_scalar_int(1)));
	td_tensor_release(&t);
	td_test_arange(&t, TD_DTYPE_U32, 1, &three);
	td_cr_assert_ok(td_tensor_index(&v, &t, x, 1));
	assert_shape(&v, 1, (int64_t[]){ 0 });
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_zeros(&one, TD_DTYPE_F32, 0, NULL));
	td_cr_assert_ok(td_tensor_index_put(&t, x, 1, &one));
	td_tensor_release(&one);
	td_cr_assert_ok(td_tensor_zeros(&one, TD_DTYPE_F32, 1, &three));
	td_cr_assert_err(td_tensor_index_put(&t, x, 1, &one), TD_ETYPE);
	td_tensor_release(&one);
	td_tensor_release(&t);
}

/* ------------------------------------------------------------------------ */
/* index_put and index_fill                                                  */
/* ------------------------------------------------------------------------ */

Test(tensor_index, put_broadcasts_and_converts_the_value)
{
	int64_t shape[2] = { 3, 4 }, four = 4, one = 1, rows[2] = { 2, 0 };
	td_index row[] = { td_index_int(1) };
	td_index adv[] = { td_index_list(rows, 2), td_index_slice(1, 3, 1) };
	td_tensor t, v;

	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 2, shape));
	td_test_arange(&v, TD_DTYPE_I64, 1, &four);
	td_cr_assert_ok(td_tensor_index_put(&t, row, 1, &v));
	cr_assert_eq(get_f(&t, (int64_t[]){ 1, 3 }), 3.0);
	cr_assert_eq(get_f(&t, (int64_t[]){ 0, 3 }), 0.0);
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_full(&v, TD_DTYPE_F64, 1, &one, td_scalar_float(2.5)));
	td_cr_assert_ok(td_tensor_index_put(&t, adv, 2, &v));
	cr_assert_eq(get_f(&t, (int64_t[]){ 2, 1 }), 2.5);
	cr_assert_eq(get_f(&t, (int64_t[]){ 0, 2 }), 2.5);
	cr_assert_eq(get_f(&t, (int64_t[]){ 0, 3 }), 0.0);
	cr_assert_eq(get_f(&t, (int64_t[]){ 1, 1 }), 1.0);
	td_tensor_release(&v);
	td_tensor_release(&t);
}

Test(tensor_index, put_with_repeated_positions_keeps_the_last_write)
{
	int64_t five = 5, three = 3, pos[3] = { 1, 3, -4 }, vals[3] = { 10, 20, 30 };
	td_index x[] = { td_index_list(pos, 3) };
	td_tensor t, v;

	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_I32, 1, &five));
	td_cr_assert_ok(td_tensor_from_data(&v, TD_DTYPE_I64, 1, &three, vals));
	td_cr_assert_ok(td_tensor_index_put(&t, x, 1, &v));
	cr_assert_eq(get_f(&t, (int64_t[]){ 1 }), 30.0);
	cr_assert_eq(get_f(&t, (int64_t[]){ 3 }), 20.0);
	td_tensor_release(&v);
	td_tensor_release(&t);
}

Test(tensor_index, put_reads_an_overlapping_value_before_writing)
{
	int64_t six = 6, pos[3] = { 0, 1, 2 };
	td_index tail[] = { td_index_slice(3, 6, 1) }, head[] = { td_index_slice(0, 3, 1) };
	td_index mid[] = { td_index_slice(1, 4, 1) }, adv[] = { td_index_list(pos, 3) };
	td_tensor t, v;
	int64_t i;

	td_test_arange(&t, TD_DTYPE_I32, 1, &six);
	td_cr_assert_ok(td_tensor_index(&v, &t, tail, 1));
	td_cr_assert_ok(td_tensor_index_put(&t, adv, 1, &v)); /* t[[0, 1, 2]] = t[3:6] */
	td_tensor_release(&v);
	for (i = 0; i < 6; i++)
		cr_assert_eq(get_f(&t, &i), (double)(3 + i % 3));
	td_tensor_release(&t);
	td_test_arange(&t, TD_DTYPE_I32, 1, &six);
	td_cr_assert_ok(td_tensor_index(&v, &t, head, 1));
	td_cr_assert_ok(td_tensor_index_put(&t, mid, 1, &v)); /* t[1:4] = t[0:3] */
	td_tensor_release(&v);
	for (i = 0; i < 6; i++)
		cr_assert_eq(get_f(&t, &i), (double)(i == 0 ? 0 : i < 4 ? i - 1 : i));
	td_tensor_release(&t);
	td_test_arange(&t, TD_DTYPE_I32, 1, &six);
	td_cr_assert_ok(td_tensor_index(&v, &t, head, 1));
	pos[0] = 1;
	pos[1] = 2;
	pos[2] = 3;
	td_cr_assert_ok(td_tensor_index_put(&t, adv, 1, &v)); /* t[[1, 2, 3]] = t[0:3] */
	td_tensor_release(&v);
	for (i = 0; i < 6; i++)
		cr_assert_eq(get_f(&t, &i), (double)(i == 0 ? 0 : i < 4 ? i - 1 : i));
	td_tensor_release(&t);
}

Test(tensor_index, put_reads_index_tensors_that_overlap_the_target_first)
{
	int64_t six = 6, three = 3, data[6] = { 2, 0, 1, 5, 5, 5 }, vals[3] = { 7, 8, 9 };
	td_index head[] = { td_index_slice(0, 3, 1) };
	td_tensor t, it, v;
	int64_t want[6] = { 8, 9, 7, 5, 5, 5 }, i;

	td_cr_assert_ok(td_tensor_from_data(&t, TD_DTYPE_I64, 1, &six, data));
	td_cr_assert_ok(td_tensor_from_data(&v, TD_DTYPE_I64, 1, &three, vals));
	td_cr_assert_ok(td_tensor_index(&it, &t, head, 1));
	{
		td_index x[] = { td_index_tensor(&it) }; /* t[t[0:3]] = [7, 8, 9] */
		td_cr_assert_ok(td_tensor_index_put(&t, x, 1, &v));
	}
	for (i = 0; i < 6; i++)
		cr_assert_eq(((int64_t *)td_tensor_data(&t))[i], want[i], "element %lld", (long long)i);
	memcpy(td_tensor_data(&t), data, sizeof(data));
	{
		td_index x[] = { td_index_tensor(&it) }; /* t[t[0:3]] = 4: 2 -> 4, 0 -> 4, then t[4] */
		td_cr_assert_ok(td_tensor_index_fill(&t, x, 1, td_scalar_int(4)));
	}
	cr_assert_eq(((int64_t *)td_tensor_data(&t))[0], 4);
	cr_assert_eq(((int64_t *)td_tensor_data(&t))[1], 4);
	cr_assert_eq(((int64_t *)td_tensor_data(&t))[2], 4);
	cr_assert_eq(((int64_t *)td_tensor_data(&t))[4], 5);
	td_tensor_release(&it);
	td_tensor_release(&v);
	td_tensor_release(&t);
}

Test(tensor_index, fill_with_masks_and_slices)
{
	int64_t shape[2] = { 3, 4 }, i, j;
	bool rows[3] = { true, false, true };
	td_index x[] = { td_index_mask(rows, 3), td_index_slice(1, TD_SLICE_NONE, 2) };
	td_tensor t;

	td_test_arange(&t, TD_DTYPE_BF16, 2, shape);
	td_cr_assert_ok(td_tensor_index_fill(&t, x, 2, td_scalar_float(-1.5)));
	for (i = 0; i < 3; i++)
		for (j = 0; j < 4; j++)
			cr_assert_eq(get_f(&t, (int64_t[]){ i, j }),
				i != 1 && j % 2 == 1 ? -1.5 : (double)(i * 4 + j));
	td_tensor_release(&t);
}

/* ------------------------------------------------------------------------ */
/* Failures                                                                  */
/* ------------------------------------------------------------------------ */

Test(tensor_index, malformed_expressions_are_refused)
{
	int64_t shape[2] = { 3, 4 }, fshape[1] = { 2 };
	td_tensor t, v = TD_TENSOR_INIT, ft, released = TD_TENSOR_INIT;
	td_index x;

	td_test_arange(&t, TD_DTYPE_F32, 2, shape);
	td_cr_assert_ok(td_tensor_zeros(&ft, TD_DTYPE_F32, 1, fshape));
	x = td_index_int(0);
	td_cr_assert_err(td_tensor_index(NULL, &t, &x, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_index(&v, NULL, &x, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_index(&v, &released, &x, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_index(&v, &t, NULL, 1), TD_EINVAL);
	{
		td_index e[] = { td_index_ellipsis(), td_index_int(0), td_index_ellipsis() };
		td_cr_assert_err(td_tensor_index(&v, &t, e, 3), TD_EINVAL);
	}
	x = td_index_slice(0, 2, 0);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINVAL);
	x = td_index_slice(TD_SLICE_NONE, TD_SLICE_NONE, -1);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "negative") != NULL);
	x = td_index_range(0, 2, 0);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINVAL);
	x = td_index_range(2, 0, -1);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINVAL);
	x = td_index_tensor(&ft);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINVAL);
	x = td_index_tensor(NULL);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINVAL);
	x = td_index_list(NULL, 2);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINVAL);
	x = td_index_list(shape, -1);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINVAL);
	x = td_index_mask(NULL, 3);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINVAL);
	x = td_index_int(0);
	x.kind = (td_index_kind)99;
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINVAL);
	cr_assert_null(v.buffer);
	td_tensor_release(&ft);
	td_tensor_release(&t);
}

Test(tensor_index, positions_out_of_range_are_refused)
{
	int64_t shape[2] = { 3, 4 }, bad1[2] = { 0, 3 }, bad2[1] = { -4 }, ok[2] = { 0, 1 };
	int64_t three[3] = { 0, 1, 2 }, one = 1;
	bool m2[2] = { true, true };
	td_tensor t, v = TD_TENSOR_INIT, u8, u64, m;
	td_index x;

	td_test_arange(&t, TD_DTYPE_F32, 2, shape);
	x = td_index_int(3);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	x = td_index_int(-4);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	x = td_index_range(0, 4, 1);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	x = td_index_range(-1, 2, 1);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	x = td_index_range(1, INT64_MAX, 1);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	x = td_index_range(INT64_MIN, INT64_MAX, INT64_MAX);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	x = td_index_list(bad1, 2);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	x = td_index_list(bad2, 1);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	td_cr_assert_ok(td_tensor_full(&u8, TD_DTYPE_U8, 1, &one, td_scalar_int(200)));
	x = td_index_tensor(&u8);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	td_cr_assert_ok(td_tensor_full(&u64, TD_DTYPE_U64, 1, &one, td_scalar_uint(UINT64_MAX)));
	x = td_index_tensor(&u64);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	x = td_index_mask(m2, 2);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	td_cr_assert_ok(td_tensor_zeros(&m, TD_DTYPE_BOOL, 2, (int64_t[]){ 3, 3 }));
	x = td_index_tensor(&m);
	td_cr_assert_err(td_tensor_index(&v, &t, &x, 1), TD_EINDEX);
	td_tensor_release(&m);
	{
		td_index e[] = { td_index_int(0), td_index_int(0), td_index_int(0) };
		td_cr_assert_err(td_tensor_index(&v, &t, e, 3), TD_EINDEX);
	}
	td_cr_assert_ok(td_tensor_zeros(&m, TD_DTYPE_BOOL, 2, (int64_t[]){ 4, 1 }));
	{
		td_index e[] = { td_index_all(), td_index_tensor(&m) }; /* names dims 1 and 2 */
		td_cr_assert_err(td_tensor_index(&v, &t, e, 2), TD_EINDEX);
	}
	{
		td_index e[] = { td_index_list(ok, 2), td_index_list(three, 3) };
		td_cr_assert_err(td_tensor_index(&v, &t, e, 2), TD_ETYPE);
		td_cr_assert_err(td_tensor_index_fill(&t, e, 2, td_scalar_int(0)), TD_ETYPE);
	}
	cr_assert_null(v.buffer);
	td_tensor_release(&m);
	td_tensor_release(&u8);
	td_tensor_release(&u64);
	td_tensor_release(&t);
}

Test(tensor_index, results_beyond_the_dim_limit_are_refused)
{
	int64_t shape[TD_MAX_DIMS];
	td_index x[2];
	td_tensor t, v = TD_TENSOR_INIT, it;
	int d;

	for (d = 0; d < TD_MAX_DIMS; d++)
		shape[d] = 1;
	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_U8, TD_MAX_DIMS, shape));
	x[0] = td_index_newaxis();
	td_cr_assert_err(td_tensor_index(&v, &t, x, 1), TD_EINVAL);
	td_cr_assert_ok(td_tensor_zeros(&it, TD_DTYPE_I64, 2, shape));
	x[0] = td_index_tensor(&it); /* 2 + 15 dims */
	td_cr_assert_err(td_tensor_index(&v, &t, x, 1), TD_EINVAL);
	td_cr_assert_err(td_tensor_index_fill(&t, x, 1, td_scalar_int(1)), TD_EINVAL);
	cr_assert_null(v.buffer);
	x[1] = td_index_int(0); /* 2 + 14 dims */
	td_cr_assert_ok(td_tensor_index(&v, &t, x, 2));
	cr_assert_eq(v.ndim, TD_MAX_DIMS);
	td_tensor_release(&v);
	td_tensor_release(&it);
	td_tensor_release(&t);
}

Test(tensor_index, put_and_fill_refuse_bad_arguments)
{
	int64_t shape[2] = { 3, 4 }, five = 5, pos[2] = { 0, 2 };
	td_index row[] = { td_index_int(0) }, adv[] = { td_index_list(pos, 2) };
	td_tensor t, v;
	td_scalar bad = td_scalar_int(0);

	td_cr_assert_ok(td_tensor_zeros(&t, TD_DTYPE_F32, 2, shape));
	td_cr_assert_ok(td_tensor_zeros(&v, TD_DTYPE_F32, 1, &five));
	td_cr_assert_err(td_tensor_index_put(NULL, row, 1, &v), TD_EINVAL);
	td_cr_assert_err(td_tensor_index_put(&t, row, 1, NULL), TD_EINVAL);
	td_cr_assert_err(td_tensor_index_put(&t, row, 1, &v), TD_ETYPE);
	td_cr_assert_err(td_tensor_index_put(&t, adv, 1, &v), TD_ETYPE);
	td_cr_assert_err(td_tensor_index_put(&t, NULL, 2, &v), TD_EINVAL);
	td_cr_assert_err(td_tensor_index_fill(NULL, row, 1, bad), TD_EINVAL);
	bad.kind = (td_scalar_kind)42;
	td_cr_assert_err(td_tensor_index_fill(&t, row, 1, bad), TD_EINVAL);
	td_tensor_release(&v);
	td_tensor_release(&t);
}

Test(tensor_index, read_only_buffers_can_be_indexed_not_written)
{
	static float data[12];
	int64_t shape[2] = { 3, 4 }, pos[2] = { 2, 0 }, one = 1;
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	td_index row[] = { td_index_int(1) }, adv[] = { td_index_list(pos, 2) };
	td_buffer *b;
	td_tensor t, v;

	o.flags = TD_BUFFER_READONLY;
	data[8] = 5.0f;
	td_cr_assert_ok(td_buffer_wrap(&b, data, sizeof(data), &o));
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, shape, NULL, 0));
	td_buffer_unref(b);
	td_cr_assert_ok(td_tensor_index(&v, &t, row, 1));
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_index(&v, &t, adv, 1));
	cr_assert_eq(get_f(&v, (int64_t[]){ 0, 0 }), 5.0);
	td_tensor_release(&v);
	td_cr_assert_ok(td_tensor_zeros(&v, TD_DTYPE_F32, 1, &one));
	td_cr_assert_err(td_tensor_index_put(&t, row, 1, &v), TD_EREADONLY);
	td_cr_assert_err(td_tensor_index_put(&t, adv, 1, &v), TD_EREADONLY);
	td_cr_assert_err(td_tensor_index_fill(&t, row, 1, td_scalar_int(1)), TD_EREADONLY);
	td_cr_assert_err(td_tensor_index_fill(&t, adv, 1, td_scalar_int(1)), TD_EREADONLY);
	cr_assert_eq(data[0], 0.0f);
	td_tensor_release(&v);
	td_tensor_release(&t);
}

Test(tensor_index, device_memory_gives_views_only)
{
	static char fake_device[48];
	int64_t shape[2] = { 3, 4 }, pos[2] = { 2, 0 }, one = 1;
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	td_index row[] = { td_index_int(1) }, adv[] = { td_index_list(pos, 2) };
	td_buffer *b;
	td_tensor t, v, host;

	o.memory = TD_MEMORY_DEVICE;
	o.device = 0;
	td_cr_assert_ok(td_buffer_wrap(&b, fake_device, sizeof(fake_device), &o));
	td_cr_assert_ok(td_tensor_from_buffer(&t, b, TD_DTYPE_F32, 2, shape, NULL, 0));
	td_buffer_unref(b);
	td_cr_assert_ok(td_tensor_index(&v, &t, row, 1)); /* a view needs no CPU access */
	cr_assert_eq(v.buffer, t.buffer);
	td_tensor_release(&v);
	td_cr_assert_err(td_tensor_index(&v, &t, adv, 1), TD_ENOTSUP);
	td_cr_assert_ok(td_tensor_zeros(&host, TD_DTYPE_F32, 1, &one));
	td_cr_assert_err(td_tensor_index_put(&t, row, 1, &host), TD_ENOTSUP);
	td_cr_assert_err(td_tensor_index_fill(&t, adv, 1, td_scalar_int(1)), TD_ENOTSUP);
	{ /* an index tensor in device memory */
		td_tensor dt;
		td_index x[1];
		td_cr_assert_ok(td_tensor_from_buffer(&dt, t.buffer, TD_DTYPE_I32, 1, &one, NULL, 0));
		x[0] = td_index_tensor(&dt);
		td_cr_assert_err(td_tensor_index(&v, &host, x, 1), TD_ENOTSUP);
		td_tensor_release(&dt);
	}
	td_tensor_release(&host);
	td_tensor_release(&t);
}

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

typedef struct sweep_ctx {
	td_tensor t, out, value, it, mask;
	td_index idx[4];
	size_t n;
	int op; /* 0 index, 1 put, 2 fill */
} sweep_ctx;

static int sweep_body(void *p)
{
	sweep_ctx *c = p;

	switch (c->op) {
	case 0:
		return td_tensor_index(&c->out, &c->t, c->idx, c->n);
	case 1:
		return td_tensor_index_put(&c->t, c->idx, c->n, &c->value);
	default:
		return td_tensor_index_fill(&c->t, c->idx, c->n, td_scalar_float(3.0));
	}
}

static void sweep_cleanup(void *p)
{
	sweep_ctx *c = p;

	if (c->op == 0)
		td_tensor_release(&c->out);
}

Test(tensor_index, allocation_failures_release_everything)
{
	static const bool m1[4] = { true, false, true, true };
	int64_t shape[3] = { 4, 3, 5 }, rows[3] = { 3, -1, 0 }, mshape[2] = { 3, 5 };
	sweep_ctx c;
	int op, k;

	memset(&c, 0, sizeof(c));
	td_test_arange(&c.t, TD_DTYPE_F64, 3, shape);
	td_cr_assert_ok(td_tensor_zeros(&c.mask, TD_DTYPE_BOOL, 2, mshape));
	td_cr_assert_ok(td_tensor_set(&c.mask, (int64_t[]){ 1, 2 }, td_scalar_bool(true)));
	td_cr_assert_ok(td_tensor_set(&c.mask, (int64_t[]){ 2, 4 }, td_scalar_bool(true)));
	for (k = 0; k < 3; k++) {
		if (k == 0) { /* a row gather */
			c.idx[0] = td_index_list(rows, 3);
			c.n = 1;
		} else if (k == 1) { /* a 1-d mask and a list */
			c.idx[0] = td_index_mask(m1, 4);
			c.idx[1] = td_index_slice(0, 1, 1);
			c.idx[2] = td_index_list(rows, 1);
			c.n = 3;
		} else { /* a 2-d bool tensor mask */
			c.idx[0] = td_index_all();
			c.idx[1] = td_index_tensor(&c.mask);
			c.n = 2;
		}
		for (op = 0; op < 3; op++) {
			c.op = op;
			if (op == 1) { /* a value in t's own buffer: put must copy it first */
				td_index first[] = { td_index_int(0), td_index_int(0), td_index_int(0) };
				td_cr_assert_ok(td_tensor_index(&c.value, &c.t, first, 3));
			}
			td_test_enomem_sweep(sweep_body, sweep_cleanup, &c);
			td_tensor_release(&c.value);
		}
	}
	td_tensor_release(&c.mask);
	td_tensor_release(&c.t);
}

Test(tensor_index, allocation_failures_with_an_overlapping_index_tensor)
{
	int64_t six = 6, data[6] = { 2, 0, 1, 5, 5, 5 };
	td_index head[] = { td_index_slice(0, 3, 1) };
	sweep_ctx c;

	memset(&c, 0, sizeof(c));
	td_cr_assert_ok(td_tensor_from_data(&c.t, TD_DTYPE_I64, 1, &six, data));
	td_cr_assert_ok(td_tensor_index(&c.it, &c.t, head, 1));
	c.idx[0] = td_index_tensor(&c.it);
	c.n = 1;
	c.op = 2;
	td_test_enomem_sweep(sweep_body, sweep_cleanup, &c);
	cr_assert_eq(((int64_t *)td_tensor_data(&c.t))[0], 3);
	td_tensor_release(&c.it);
	td_tensor_release(&c.t);
}

/* ------------------------------------------------------------------------ */
/* Tensors of more than TD_TENSOR_INLINE_DIMS dims                           */
/* ------------------------------------------------------------------------ */

typedef struct many_ctx {
	td_tensor t;
	td_tensor out;
	int which;
} many_ctx;

/* Index, put and fill on a 6-d tensor, with views and copies of 5 and 7 dims. */
static int many_body(void *p)
{
	static const int64_t pos[2] = { 1, 0 };
	many_ctx *c = p;
	td_index idx[3];
	td_tensor v = TD_TENSOR_INIT;
	int rc;

	idx[0] = td_index_slice(TD_SLICE_NONE, TD_SLICE_NONE, 2);
	idx[1] = td_index_newaxis();
	idx[2] = td_index_list(pos, 2);
	td_test_poison(&c->out);
	switch (c->which) {
	case 0: /* basic: 7 dims, a view */
		rc = td_tensor_index(&c->out, &c->t, idx, 2);
		break;
	case 1: /* advanced: a copy of 7 dims */
		rc = td_tensor_index(&c->out, &c->t, idx, 3);
		break;
	case 2: /* basic, int: 5 dims */
		idx[0] = td_index_int(1);
		rc = td_tensor_index(&c->out, &c->t, idx, 1);
		break;
	case 3: /* a write through a basic view of 7 dims */
		rc = td_tensor_index_fill(&c->t, idx, 2, td_scalar_int(7));
		if (rc == TD_OK)
			rc = td_tensor_zeros(&c->out, TD_DTYPE_I32, 0, NULL);
		break;
	default: /* put a broadcast 0-d value, then the same through a 7-d value */
		rc = td_tensor_zeros(&v, TD_DTYPE_I32, 0, NULL);
		if (rc == TD_OK)
			rc = td_tensor_index_put(&c->t, idx, 2, &v);
		if (rc == TD_OK)
			rc = td_tensor_index(&c->out, &c->t, idx, 2);
		if (rc == TD_OK)
			rc = td_tensor_index_put(&c->t, idx, 2, &c->out);
		if (rc < 0 && c->out.ndim == 7)
			td_tensor_release(&c->out);
		td_tensor_release(&v);
		break;
	}
	if (rc < 0 && c->which < 3)
		td_test_assert_poisoned(&c->out);
	return rc;
}

static void many_cleanup(void *p)
{
	many_ctx *c = p;

	td_tensor_release(&c->out);
}

Test(tensor_index, tensors_of_many_dims_index_and_report_enomem)
{
	static const int64_t shape[6] = { 3, 2, 1, 2, 1, 2 };
	static const int want[5] = { 7, 7, 5, 0, 7 };
	many_ctx c;
	int64_t f;

	td_test_arange(&c.t, TD_DTYPE_I32, 6, shape);
	for (c.which = 0; c.which < 5; c.which++) {
		td_cr_assert_ok(many_body(&c));
		cr_assert_eq(c.out.ndim, want[c.which], "case %d", c.which);
		if (c.which == 0) {
			/* t[::2, None]: element (i, 0, ...) is t[2 i, ...] */
			for (f = 0; f < td_tensor_numel(&c.out); f++) {
				int64_t idx[7], tidx[6];
				td_scalar a, b;

				td_test_unravel(7, td_tensor_shape(&c.out), f, idx);
				tidx[0] = 2 * idx[0];
				memcpy(tidx + 1, idx + 2, 5 * sizeof(int64_t));
				td_cr_assert_ok(td_tensor_get(&a, &c.out, idx));
				td_cr_assert_ok(td_tensor_get(&b, &c.t, tidx));
				cr_assert_eq(a.v.i, b.v.i);
			}
		}
		many_cleanup(&c);
		td_test_enomem_sweep(many_body, many_cleanup, &c);
	}
	cr_assert_eq(td_buffer_refcount(c.t.buffer), 1);
	td_tensor_release(&c.t);
}
