/* SPDX-License-Identifier: MIT */
/*
 * dict_batch.c - operations over the batch dimensions of a dict: indexing
 * and indexed writes, unbind / split / chunk, stack / cat, reshape / view,
 * unsqueeze / squeeze / permute. Each applies the same tensor operation to
 * every leaf (td__dict_transform) and computes the new batch shape once.
 */
#include "td_internal.h"
#include "dict_impl.h"

/* ------------------------------------------------------------------------ */
/* Index expressions over batch dims                                         */
/* ------------------------------------------------------------------------ */

/* Most elements of an index expression over a dict. */
#define MAX_INDEX (TD_MAX_DIMS * 4)

typedef struct batch_index {
	const td_index *idx; /* what every leaf is indexed with */
	size_t n;
	td_index expanded[MAX_INDEX]; /* storage: the ellipsis expanded over batch dims */
	td__index_expr prepared;      /* masks turned into positions, when there are masks */
	bool has_prepared;
	int ndim; /* resulting batch ndim */
	int64_t shape[TD_MAX_DIMS];
	/*
	 * For a basic expression, the view every leaf gets, computed once:
	 * leaf offset += sum(start[d] * stride[d]) over the batch dims d; result
	 * dim j is batch dim src[j] (-1: a new axis) stepped by step[j].
	 */
	bool basic;
	int nbatch;
	int64_t start[TD_MAX_DIMS];
	int src[TD_MAX_DIMS];
	int64_t step[TD_MAX_DIMS];
} batch_index;

static bool is_mask(const td_index *x)
{
	return x->kind == TD_INDEX_MASK ||
		(x->kind == TD_INDEX_TENSOR && x->tensor && x->tensor->dtype == TD_DTYPE_BOOL &&
			x->tensor->ndim > 0);
}

/* Python's slice rules for a nonnegative step (validated before). */
static void slice_bounds(const td_index *x, int64_t size, int64_t *start, int64_t *len,
	int64_t *step)
{
	int64_t st = x->step == TD_SLICE_NONE ? 1 : x->step;
	int64_t a = x->start, b = x->stop;

	if (x->kind == TD_INDEX_RANGE) {
		*start = a;
		*len = b > a ? (b - a + st - 1) / st : 0;
		*step = st;
		return;
	}
	a = a == TD_SLICE_NONE ? 0 : a < 0 ? a + size : a;
	b = b == TD_SLICE_NONE ? size : b < 0 ? b + size : b;
	a = a < 0 ? 0 : a > size ? size : a;
	b = b < 0 ? 0 : b > size ? size : b;
	*start = a;
	*len = b > a ? (b - a + st - 1) / st : 0;
	*step = st;
}

/* The view plan of a validated basic expression (see batch_index). */
static void plan_basic(batch_index *bi, const td_dict *d)
{
	int in = 0, out = 0, k;
	size_t i;

	bi->basic = true;
	bi->nbatch = d->batch_ndim;
	for (i = 0; i < bi->n; i++) {
		const td_index *x = &bi->idx[i];
		int64_t len, step, start;

		if (x->kind == TD_INDEX_NEWAXIS) {
			bi->src[out] = -1;
			bi->step[out++] = 0;
			continue;
		}
		if (x->kind == TD_INDEX_INT) {
			bi->start[in] = x->start < 0 ? x->start + d->batch_shape[in] : x->start;
			in++;
			continue;
		}
		slice_bounds(x, d->batch_shape[in], &start, &len, &step);
		bi->start[in] = len > 0 ? start : 0;
		bi->src[out] = in++;
		bi->step[out++] = step;
	}
	for (k = in; k < d->batch_ndim; k++) {
		bi->start[k] = 0;
		bi->src[out] = k;
		bi->step[out++] = 1;
	}
}

/* The fields and dims (from ish/ist into osh/ost) of leaf_view(). */
static inline __attribute__((always_inline)) void leaf_view_fill(td_tensor *out,
	const td_tensor *in, const batch_index *bi, const int64_t *ish, const int64_t *ist,
	int64_t *osh, int64_t *ost)
{
	int64_t offset = in->offset;
	int j, k, n = bi->ndim;

	for (k = 0; k < bi->nbatch; k++)
		offset += bi->start[k] * ist[k];
	out->buffer = td_buffer_ref(in->buffer);
	out->offset = offset;
	out->dtype = in->dtype;
	for (j = 0; j < n; j++) {
		int sd = bi->src[j];
		osh[j] = bi->shape[j];
		ost[j] = sd < 0 ? 1 : ist[sd] * bi->step[j];
	}
	for (k = bi->nbatch; k < in->ndim; k++, j++) {
		osh[j] = ish[k];
		ost[j] = ist[k];
	}
}

/* leaf_view() of a leaf or view with out-of-line dims. */
static __attribute__((noinline)) int leaf_view_ext(td_tensor *out, const td_tensor *in,
	const batch_index *bi, int nd)
{
	const int64_t *ish, *ist;
	int64_t *osh, *ost;

	td__dims_get(in, &ish, &ist);
	TD_TRY(td__tensor_dims_w(out, nd, &osh, &ost, "td_dict_index"));
	leaf_view_fill(out, in, bi, ish, ist, osh, ost);
	return TD_OK;
}

/* Apply the basic plan to one leaf: a view, no checks (leaves are valid). */
static int leaf_view(td_tensor *out, const td_tensor *in, const batch_index *bi)
{
	int nd = bi->ndim + in->ndim - bi->nbatch;

	if (TD_UNLIKELY(td__dims_ext(in->ndim) || td__dims_ext(nd)))
		return leaf_view_ext(out, in, bi, nd);
	out->ndim = nd;
	leaf_view_fill(out, in, bi, td__ishape(in), td__istrides(in), td__ishape_w(out),
		td__istrides_w(out));
	return TD_OK;
}

/*
 * Check `idx` against d's batch shape, compute the resulting batch shape,
 * and rewrite the expression so that it applies to any leaf: an ellipsis
 * becomes full slices over the batch dims it stands for (not the leaf's
 * own dims), and masks become positions once for all leaves.
 */
static int prepare_index(batch_index *bi, const td_dict *d, const td_index *idx, size_t n,
	const char *fn)
{
	size_t i, ellipsis = SIZE_MAX;
	bool masks = false;
	int consumed = 0, c;

	if (n && !idx)
		return td__error(TD_EINVAL, "%s: NULL index", fn);
	bi->has_prepared = false;
	TD_TRY(td__index_shape(&bi->ndim, bi->shape, &bi->basic, d->batch_ndim, d->batch_shape, idx, n,
		fn));
	for (i = 0; i < n; i++) {
		masks = masks || is_mask(&idx[i]);
		if (idx[i].kind == TD_INDEX_ELLIPSIS)
			ellipsis = i;
	}
	if (masks) {
		TD_TRY(td__index_expr_prepare(&bi->prepared, idx, n, d->batch_ndim, d->batch_shape, fn));
		bi->has_prepared = true;
		bi->idx = bi->prepared.idx;
		bi->n = bi->prepared.n;
		return TD_OK;
	}
	if (ellipsis == SIZE_MAX) {
		bi->idx = idx;
		bi->n = n;
		if (bi->basic)
			plan_basic(bi, d);
		return TD_OK;
	}
	if (n > MAX_INDEX - TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: %zu index elements is too many", fn, n);
	for (i = 0; i < n; i++)
		if (idx[i].kind != TD_INDEX_NEWAXIS && idx[i].kind != TD_INDEX_ELLIPSIS)
			consumed += idx[i].kind == TD_INDEX_TENSOR && idx[i].tensor->dtype == TD_DTYPE_BOOL ?
				idx[i].tensor->ndim :
				1;
	bi->n = 0;
	for (i = 0; i < n; i++) {
		if (i != ellipsis) {
			bi->expanded[bi->n++] = idx[i];
			continue;
		}
		for (c = 0; c < d->batch_ndim - consumed; c++)
			bi->expanded[bi->n++] = td_index_all();
	}
	bi->idx = bi->expanded;
	if (bi->basic)
		plan_basic(bi, d);
	return TD_OK;
}

static void release_index(batch_index *bi)
{
	if (bi->has_prepared)
		td__index_expr_release(&bi->prepared);
}

static int leaf_index(td_tensor *out, const td_tensor *in, void *ctx)
{
	const batch_index *bi = ctx;

	if (bi->basic)
		return leaf_view(out, in, bi);
	return td__tensor_index(out, in, bi->idx, bi->n, "td_dict_index");
}

/*
 * A lazy stack nested in the dict being indexed: the same expression, its
 * ellipsis already expanded over the dict's batch dims (so that it names
 * the same leading dims of the stack), indexed by the stack itself.
 */
static int lazy_index(td_dict **out, const td_dict *stack, void *ctx)
{
	const batch_index *bi = ctx;

	return td__lazy_index(out, stack, bi->idx, bi->n);
}

int td_dict_index(td_dict **out, const td_dict *d, const td_index *idx, size_t n)
{
	static const char fn[] = "td_dict_index";
	batch_index bi;
	int rc;

	if (out)
		*out = NULL;
	if (!out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_index(out, d, idx, n);
	TD_TRY(prepare_index(&bi, d, idx, n, fn));
	rc = td__batch_check_numel(bi.ndim, bi.shape, fn);
	if (rc == 0)
		rc = td__dict_transform(out, d, bi.ndim, bi.shape, leaf_index, &bi, lazy_index, fn);
	release_index(&bi);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Indexed writes                                                            */
/* ------------------------------------------------------------------------ */

/* Whether `value` can be written into `t` at the index: nothing is written. */
static int check_put(const td_tensor *t, const td_tensor *value, const batch_index *bi,
	const char *key, const char *fn)
{
	int64_t shape[TD_MAX_DIMS], strides[TD_MAX_DIMS];
	int ndim;

	TD_TRY(td__tensor_check_write(t, fn, key));
	TD_TRY(td__tensor_check_read(value, fn, key));
	TD_TRY(td__index_shape(&ndim, shape, NULL, t->ndim, td_tensor_shape(t), bi->idx, bi->n, fn));
	return td__broadcast_strides(value, ndim, shape, strides, fn);
}

/* An array of empty strings (what an indexed write of strings creates, as zeros for tensors). */
static int empty_strings(td_value *out, int ndim, const int64_t *shape, const char *fn)
{
	const td_value *src;
	td_value empty;
	td_tensor num = TD_TENSOR_INIT;
	int rc;

	TD_TRY(td__blob_make(&empty, "", 0, true, fn));
	src = &empty;
	rc = td__strings_numbers(&num, &empty, ndim, shape, 0, fn);
	if (rc == TD_OK)
		rc = td__strings_gather(out, &src, 1, &num, fn);
	td_tensor_release(&num);
	td__value_release(&empty);
	return rc;
}

/*
 * Write the strings of entry `ev` (of the value dict `v`) into entry `e` of
 * `d` at the index. Arrays are immutable: the entry gets a new array, made
 * by writing the value's string numbers into the numbers of the entry's
 * strings (td__tensor_index_put(), so that broadcasting and every index form
 * behave as for tensors) and gathering. A locked dict refuses it: it holds
 * its values (a store's dict keeps its strings in files).
 */
static int put_text(td_dict *d, td__entry *e, const td_dict *v, const td__entry *ev,
	const batch_index *bi, bool write, const char *fn)
{
	const td_value *srcs[2] = { &e->value, &ev->value };
	td_tensor dn = TD_TENSOR_INIT, dst = TD_TENSOR_INIT, vn = TD_TENSOR_INIT;
	int64_t base = e->value.kind == TD_VALUE_STRINGS ? e->value.strings->numel : 1;
	td_value nv, old;
	int rc;

	rc = td__strings_numbers(&dn, &e->value, d->batch_ndim, d->batch_shape, 0, fn);
	if (rc == TD_OK)
		rc = td_tensor_clone(&dst, &dn); /* writable, also for a broadcast string */
	if (rc == TD_OK)
		rc = td__strings_numbers(&vn, &ev->value, v->batch_ndim, v->batch_shape, base, fn);
	if (rc == TD_OK)
		rc = td__tensor_index_put(&dst, bi->idx, bi->n, &vn, fn);
	if (rc == TD_OK)
		rc = td__strings_gather(&nv, srcs, 2, &dst, fn);
	td_tensor_release(&dn);
	td_tensor_release(&dst);
	td_tensor_release(&vn);
	if (rc < 0)
		return rc;
	if (td__text_values_equal(&nv, &e->value)) {
		td__value_release(&nv); /* the same strings: nothing changes */
		return TD_OK;
	}
	if (d->locked || !write) {
		td__value_release(&nv);
		if (d->locked)
			return td__error(TD_ELOCKED,
				"%s: cannot write the strings of '%s': the dict "
				"is locked (strings are replaced, not written in place)",
				fn, td__entry_key(e));
		return TD_OK;
	}
	old = e->value;
	if (old.kind != nv.kind)
		td__dict_touch(d);
	td__value_assign(&e->value, &nv);
	td__value_release(&old);
	return TD_OK;
}

/*
 * Check (write == false) or perform the write of `v` into `d` at the index.
 * `root_v` is the batch ndim of the value's root and `root_d` of d's root:
 * a leaf of shape (value batch, rest) lands in (d batch, rest).
 */
static int put_rec(td_dict *d, const td_dict *v, const batch_index *bi, int root_d, int root_v,
	bool write, const char *fn)
{
	uint32_t i;

	for (i = 0; i < v->used; i++) {
		const td__entry *ev = &v->entries[i];
		td__entry *e;

		if (!td__entry_live(ev))
			continue;
		e = td__dict_find(d, td__entry_key(ev), ev->klen, ev->hash);
		/* Refused in the checking pass, before anything is written. */
		if (TD_UNLIKELY(td__value_is_stack(&ev->value) || (e && td__value_is_stack(&e->value))))
			return td__error(TD_ENOTSUP,
				"%s: '%s' is a lazy stack: indexed writes do not "
				"reach into lazy stacks nested in a dict (write through the stack: "
				"td_dict_index_put() on it)",
				fn, td__entry_key(ev));
		if (!e && d->locked)
			return td__error(TD_ELOCKED, "%s: cannot add '%s': the dict is locked", fn,
				td__entry_key(ev));
		if (!e && !write)
			continue;
		if (!e) {
			/* Create the missing leaf or dict with d's batch, then write into it. */
			int64_t shape[TD_MAX_DIMS];
			const int64_t *src;
			int nd, extra;
			td__kref k = { td__entry_key(ev), ev->klen, ev->hash };
			td_value nv;
			int rc;

			if (ev->value.kind == TD_VALUE_TENSOR) {
				src = td_tensor_shape(&ev->value.tensor);
				nd = ev->value.tensor.ndim;
			} else if (ev->value.kind == TD_VALUE_DICT) {
				src = ev->value.dict->batch_shape;
				nd = ev->value.dict->batch_ndim;
			} else if (ev->value.kind == TD_VALUE_STRINGS) {
				src = ev->value.strings->shape;
				nd = ev->value.strings->ndim;
			} else {
				TD_TRY(td__dict_set_value(d, &k, 1, &ev->value, fn));
				continue;
			}
			extra = nd - root_v;
			if (root_d + extra > TD_MAX_DIMS)
				return td__error(TD_EINVAL, "%s: '%s' would exceed %d dims", fn, td__entry_key(ev),
					TD_MAX_DIMS);
			memcpy(shape, d->batch_shape, (size_t)root_d * sizeof(int64_t));
			memcpy(shape + root_d, src + root_v, (size_t)extra * sizeof(int64_t));
			nv.kind = ev->value.kind;
			if (nv.kind == TD_VALUE_TENSOR)
				rc = td_tensor_zeros(&nv.tensor, ev->value.tensor.dtype, root_d + extra, shape);
			else if (nv.kind == TD_VALUE_STRINGS)
				rc = empty_strings(&nv, root_d + extra, shape, fn);
			else
				rc = td__dict_alloc(&nv.dict, root_d + extra, shape, 4, fn);
			if (rc < 0)
				return rc;
			rc = td__dict_set_value(d, &k, 1, &nv, fn);
			if (nv.kind != TD_VALUE_DICT || rc < 0)
				td__value_release(&nv);
			TD_TRY(rc);
			e = td__dict_find(d, td__entry_key(ev), ev->klen, ev->hash);
		}
		if (ev->value.kind == TD_VALUE_DICT) {
			if (e->value.kind != TD_VALUE_DICT)
				return td__error(TD_ETYPE, "%s: '%s' is a dict in the value only", fn,
					td__entry_key(ev));
			TD_TRY(put_rec(e->value.dict, ev->value.dict, bi, root_d, root_v, write, fn));
		} else if (ev->value.kind == TD_VALUE_TENSOR) {
			if (e->value.kind != TD_VALUE_TENSOR)
				return td__error(TD_ETYPE, "%s: '%s' is a tensor in the value only", fn,
					td__entry_key(ev));
			if (write)
				TD_TRY(
					td__tensor_index_put(&e->value.tensor, bi->idx, bi->n, &ev->value.tensor, fn));
			else
				TD_TRY(check_put(&e->value.tensor, &ev->value.tensor, bi, td__entry_key(ev), fn));
		} else if (td__text_values_equal(&e->value, &ev->value)) {
			continue; /* nothing changes */
		} else if (td__is_text(&e->value) && td__is_text(&ev->value)) {
			TD_TRY(put_text(d, e, v, ev, bi, write, fn));
		} else {
			return td__error(TD_ETYPE,
				"%s: '%s': a non-tensor value cannot be written at "
				"an index",
				fn, td__entry_key(ev));
		}
	}
	return TD_OK;
}

int td_dict_index_put(td_dict *d, const td_index *idx, size_t n, const td_dict *value)
{
	static const char fn[] = "td_dict_index_put";
	batch_index bi;
	int rc;

	if (!d || !value)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_index_put(d, idx, n, value, NULL, fn);
	TD_DENSE_ONLY(value, fn);
	TD_TRY(prepare_index(&bi, d, idx, n, fn));
	if (value->batch_ndim != bi.ndim ||
		memcmp(value->batch_shape, bi.shape, (size_t)bi.ndim * sizeof(int64_t)) != 0) {
		char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
		release_index(&bi);
		return td__error(TD_ETYPE,
			"%s: the value's batch shape %s is not the indexed "
			"batch shape %s",
			fn, td__format_shape(s1, sizeof(s1), value->batch_ndim, value->batch_shape),
			td__format_shape(s2, sizeof(s2), bi.ndim, bi.shape));
	}
	rc = put_rec(d, value, &bi, d->batch_ndim, value->batch_ndim, false, fn);
	if (rc == 0)
		rc = put_rec(d, value, &bi, d->batch_ndim, value->batch_ndim, true, fn);
	release_index(&bi);
	return rc;
}

static int fill_rec(td_dict *d, const batch_index *bi, td_scalar s, bool write, const char *fn)
{
	uint32_t i;

	for (i = 0; i < d->used; i++) {
		td__entry *e = &d->entries[i];

		if (!td__entry_live(e))
			continue;
		if (TD_UNLIKELY(td__value_is_stack(&e->value)))
			return td__error(TD_ENOTSUP,
				"%s: '%s' is a lazy stack: indexed writes do not "
				"reach into lazy stacks nested in a dict (write through the stack: "
				"td_dict_index_fill() on it)",
				fn, td__entry_key(e));
		if (e->value.kind == TD_VALUE_DICT)
			TD_TRY(fill_rec(e->value.dict, bi, s, write, fn));
		else if (e->value.kind == TD_VALUE_TENSOR && write)
			TD_TRY(td__tensor_index_fill(&e->value.tensor, bi->idx, bi->n, s, fn));
		else if (e->value.kind == TD_VALUE_TENSOR)
			TD_TRY(td__tensor_check_write(&e->value.tensor, fn, td__entry_key(e)));
	}
	return TD_OK;
}

int td_dict_index_fill(td_dict *d, const td_index *idx, size_t n, td_scalar s)
{
	static const char fn[] = "td_dict_index_fill";
	batch_index bi;
	int rc;

	if (!d)
		return td__error(TD_EINVAL, "%s: NULL dict", fn);
	TD_TRY(td__scalar_check(s, fn));
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_index_put(d, idx, n, NULL, &s, fn);
	TD_TRY(prepare_index(&bi, d, idx, n, fn));
	rc = fill_rec(d, &bi, s, false, fn);
	if (rc == 0)
		rc = fill_rec(d, &bi, s, true, fn);
	release_index(&bi);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* unbind, split, chunk                                                      */
/* ------------------------------------------------------------------------ */

static int batch_dim(const td_dict *d, int dim, int *out, const char *fn)
{
	if (d->batch_ndim == 0)
		return td__error(TD_EINVAL, "%s: the dict has no batch dims", fn);
	return td__wrap_dim(dim, d->batch_ndim, out, fn);
}

/*
 * Cutting a dict into pieces along a batch dim reads every level of it
 * once and writes that level of all the pieces together, taking one buffer
 * reference per leaf for all its views. Built one piece at a time through
 * td__dict_transform(), each level was read again per piece and each view
 * took its own atomic reference: ~360 instructions per dict made in the
 * unbind of the lazy benchmark stack (570 dicts a call), against ~190 now,
 * allocation included (callgrind).
 */
typedef struct cut {
	int dim;                /* the batch dim cut (a root batch dim: every level has it); */
							/* -1: no cut, the n pieces are shallow copies */
	size_t n;               /* pieces */
	const int64_t *lengths; /* rows of each piece; NULL: piece i is index i, dim dropped */
	const char *fn;
} cut;

/* Piece i's batch shape at level `d`: d's, with the cut dim resized or dropped. */
static int cut_shape(int64_t *shape, const td_dict *d, const cut *c, size_t i)
{
	int k, nd = 0;

	for (k = 0; k < d->batch_ndim; k++) {
		if (k != c->dim)
			shape[nd++] = d->batch_shape[k];
		else if (c->lengths)
			shape[nd++] = c->lengths[i];
	}
	return nd;
}

/*
 * Slot w of piece p: a piece's entries are inline (td__dict_alloc(),
 * cut_rec()), so the slot is at the same offset, slot_offset(w), in every
 * piece (computed once per entry, not once per entry and piece).
 */
static inline size_t slot_offset(uint32_t w)
{
	return sizeof(td_dict) + (size_t)w * sizeof(td__entry);
}

static inline td__entry *piece_slot(td_dict *p, size_t off)
{
	return (td__entry *)(void *)((char *)p + off);
}

/*
 * An entry's key fields, copied as one block: its hash, length, and inline
 * bytes or shared string. Loaded once per entry and stored into every piece.
 */
#define KEY_BYTES offsetof(td__entry, value)

_Static_assert(offsetof(td__entry, hash) == 0 &&
		offsetof(td__entry, k) + sizeof(((td__entry *)0)->k) == KEY_BYTES,
	"an entry's key fields come first, together: cut_rec() copies them as one block");

/*
 * cut_leaf() of a leaf with out-of-line dims: copies share its block; the
 * n views of an unbind share one set of dims (they differ only in their
 * offset: one block, or inline dims); each piece of a split gets a block
 * of its own. Nothing is left on failure.
 */
static __attribute__((noinline)) int cut_leaf_ext(td_dict *const *out, size_t off,
	const unsigned char *key, const td_tensor *t, const cut *c)
{
	int64_t stride = 0, start = 0;
	td_tensor view;
	size_t i;
	int rc;

	if (c->dim >= 0)
		stride = td_tensor_strides(t)[c->dim];
	if (c->dim < 0) {
		td__tensor_copy_meta(&view, t);
	} else if (!c->lengths) {
		TD_TRY(td__view_select_dims(&view, t, c->dim, 0, c->fn));
		td__dims_ref_n(&view, c->n - 1);
	}
	for (i = 0; i < c->n; i++) {
		td__entry *pe = piece_slot(out[i], off);
		td_tensor *v = &pe->value.tensor;

		if (!c->lengths || c->dim < 0) {
			td__tensor_copy_meta(v, &view);
			v->offset += (int64_t)i * stride;
		} else {
			td__tensor_copy_meta(v, t);
			rc = td__tensor_dims_own(v, c->fn);
			if (rc < 0) {
				while (i-- > 0)
					td__dims_unref(&piece_slot(out[i], off)->value.tensor);
				return rc;
			}
			if (c->lengths[i] > 0)
				v->offset += start * stride;
			td__shape_w(v)[c->dim] = c->lengths[i];
			start += c->lengths[i];
		}
		memcpy(pe, key, KEY_BYTES);
		pe->value.kind = TD_VALUE_TENSOR;
	}
	if (c->dim < 0)
		td__dims_ref_n(t, c->n);
	td__buffer_ref_n(t->buffer, c->n);
	return TD_OK;
}

/*
 * Write the key of an entry and the n views of its leaf t (validated: it
 * has the dim) into the slot at `off` of each piece: one pass over the
 * pieces, the key and the view's fields loaded once. A leaf with inline
 * dims (the common case) is cut here without a test of ndim, one with
 * out-of-line dims by cut_leaf_ext() (which may fail: TD_ENOMEM).
 */
static inline __attribute__((always_inline)) int cut_leaf(td_dict *const *out, size_t off,
	const unsigned char *key, const td_tensor *t, const cut *c)
{
	/* Loaded once: the stores into the pieces could alias `c` for the compiler. */
	const int dim = c->dim;
	const int64_t *lengths = c->lengths;
	const size_t n = c->n;
	const td_tensor *src = t; /* what every piece's view starts as */
	int64_t stride = 0, start = 0;
	td_tensor view;
	size_t i;
	int k, j;

	if (TD_UNLIKELY(td__dims_ext(t->ndim)))
		return cut_leaf_ext(out, off, key, t, c);
	if (dim >= 0)
		stride = td__istrides(t)[dim];
	if (dim >= 0 && !lengths) {
		/* unbind: the dim dropped */
		view.buffer = t->buffer;
		view.offset = t->offset;
		view.dtype = t->dtype;
		view.ndim = t->ndim - 1;
		for (k = 0, j = 0; k < t->ndim; k++) {
			if (k == dim)
				continue;
			td__ishape_w(&view)[j] = td__ishape(t)[k];
			td__istrides_w(&view)[j++] = td__istrides(t)[k];
		}
		src = &view;
	}
	for (i = 0; i < n; i++) {
		td__entry *pe = piece_slot(out[i], off);

		memcpy(pe, key, KEY_BYTES);
		pe->value.kind = TD_VALUE_TENSOR;
		td__tensor_copy_meta(&pe->value.tensor, src);
		if (dim < 0)
			continue;
		if (!lengths) {
			pe->value.tensor.offset += (int64_t)i * stride;
			continue;
		}
		/* As td__view_narrow(): an empty piece keeps the offset. */
		if (lengths[i] > 0)
			pe->value.tensor.offset += start * stride;
		td__ishape_w(&pe->value.tensor)[dim] = lengths[i];
		start += lengths[i];
	}
	td__buffer_ref_n(t->buffer, n);
	return TD_OK;
}

/* Which piece a td__leaf_fn cuts out (arrays of strings go through one). */
typedef struct cut_piece {
	const cut *c;
	size_t i;
	int64_t start;
} cut_piece;

static int cut_piece_leaf(td_tensor *out, const td_tensor *in, void *ctx)
{
	const cut_piece *p = ctx;

	if (!p->c->lengths)
		return td__view_select(out, in, p->c->dim, (int64_t)p->i, p->c->fn);
	return td__view_narrow(out, in, p->c->dim, p->start, p->c->lengths[p->i], p->c->fn);
}

/*
 * Write each piece's part of the array of strings `v` into the slot at
 * `off` of the piece (the value only): its string numbers are cut as a tensor
 * (td__strings_transform()). On failure the parts written are released.
 */
static int cut_strings(td_dict *const *out, size_t off, const td_value *v, const cut *c)
{
	cut_piece p;
	size_t i;
	int rc;

	p.c = c;
	p.start = 0;
	for (i = 0; i < c->n; i++) {
		p.i = i;
		rc = td__strings_transform(&piece_slot(out[i], off)->value, v, cut_piece_leaf, &p, c->fn);
		if (rc < 0) {
			while (i-- > 0)
				td__value_release(&piece_slot(out[i], off)->value);
			return rc;
		}
		if (c->lengths)
			p.start += c->lengths[i];
	}
	return TD_OK;
}

#define CUT_LOCAL 16

/*
 * td__lazy_cut() of a lazy stack nested in the dict being cut. Out of line
 * with the cut as one argument: cut_rec() then keeps the registers it had
 * (unpacked at the call, the arguments cost ~0.7 instructions per dict cut).
 */
static __attribute__((noinline)) int cut_lazy(td_dict **sub, const td_dict *z, const cut *c)
{
	return td__lazy_cut(sub, z, c->dim, c->lengths, c->n, c->fn);
}

/*
 * Make the n pieces of level `d` into out[0..n-1]; on failure nothing is
 * left. Each entry of the level is written into all the pieces in one
 * pass, key and value together (the key's 32 bytes loaded once; a long
 * key takes its n references in one add).
 *
 * A level without an index (at most TD_DICT_SCAN_MAX live entries, the
 * common case) needs no bookkeeping per entry: every piece's header is a
 * copy of one template with its final counts, and on failure the pieces
 * are trimmed to the w entries written before they are freed. A larger
 * level makes its pieces with td__dict_alloc() and commits each entry with
 * td__dict_commit() (counts and index).
 *
 * Against a pass per value with the keys pushed after it (td__dict_push()),
 * 310 -> 297 instructions per dict made and dropped in the unbind of the
 * lazy benchmark stack (callgrind), 322 before levels without an index had
 * their template headers.
 */
static int cut_rec(td_dict **out, const td_dict *d, const cut *c)
{
	const size_t n = c->n;
	const uint32_t count = d->count;
	const bool small = count <= TD_DICT_SCAN_MAX; /* the pieces need no index */
	const size_t bytes = sizeof(td_dict) + (size_t)count * sizeof(td__entry);
	unsigned char key[KEY_BYTES];
	int64_t shape[TD_MAX_DIMS];
	td_dict tmpl, *local_sub[CUT_LOCAL], **sub = local_sub;
	void *scratch = NULL;
	size_t i, off, made = 0;
	uint32_t j, w = 0;
	int k, nd, rc = TD_OK;

	if (n > CUT_LOCAL) {
		scratch = td__malloc(n * sizeof(*sub));
		if (!scratch)
			return td__error_nomem(n * sizeof(*sub));
		sub = scratch;
	}
	/* The next level down: fetched while this one is cut. */
	for (j = 0; j < d->used; j++) {
		const td__entry *e = &d->entries[j];

		if (td__entry_live(e) && e->value.kind == TD_VALUE_DICT)
			td__dict_prefetch(e->value.dict);
	}
	nd = cut_shape(shape, d, c, 0);
	if (small) {
		/* Every piece's header as it will be once all `count` entries are in. */
		td__dict_init(&tmpl, nd, shape, count);
		tmpl.used = tmpl.count = count;
		tmpl.gen += count; /* as td__dict_commit() would have */
	}
	for (made = 0; made < n; made++) {
		td_dict *p;

		if (small) {
			p = td__alloc_small(bytes);
			if (!p) {
				rc = td__error_nomem(bytes);
				goto out;
			}
			memcpy(p, &tmpl, offsetof(td_dict, batch_shape));
			p->entries = count ? (td__entry *)(p + 1) : NULL;
			for (k = 0; k < nd; k++)
				p->batch_shape[k] = shape[k];
		} else {
			rc = td__dict_alloc(&p, nd, shape, count, c->fn);
			if (rc < 0)
				goto out;
		}
		if (c->lengths)
			p->batch_shape[c->dim] = c->lengths[made];
		out[made] = p;
	}
	for (j = 0; j < d->used; j++) {
		const td__entry *e = &d->entries[j];

		if (!td__entry_live(e))
			continue;
		off = slot_offset(w);
		memcpy(key, e, KEY_BYTES);
		if (e->value.kind == TD_VALUE_TENSOR) {
			rc = cut_leaf(out, off, key, &e->value.tensor, c);
			if (rc < 0)
				goto out;
		} else if (e->value.kind == TD_VALUE_DICT) {
			/* A lazy stack cuts itself (td__lazy_cut(): it indexes itself). */
			if (TD_UNLIKELY(td__dict_is_lazy(e->value.dict)))
				rc = cut_lazy(sub, e->value.dict, c);
			else
				rc = cut_rec(sub, e->value.dict, c);
			if (rc < 0)
				goto out;
			for (i = 0; i < n; i++) {
				td__entry *pe = piece_slot(out[i], off);

				memcpy(pe, key, KEY_BYTES);
				pe->value.kind = TD_VALUE_DICT;
				pe->value.dict = sub[i];
				sub[i]->parent = out[i];
			}
		} else if (e->value.kind == TD_VALUE_STRINGS && c->dim >= 0) {
			rc = cut_strings(out, off, &e->value, c);
			if (rc < 0)
				goto out;
			for (i = 0; i < n; i++)
				memcpy(piece_slot(out[i], off), key, KEY_BYTES);
		} else {
			/* Shared whole: a string, bytes, or (a copy shares the array, as
			 * td__dict_map_tensors() does) an array of strings. */
			for (i = 0; i < n; i++) {
				td__entry *pe = piece_slot(out[i], off);

				memcpy(pe, key, KEY_BYTES);
				pe->value = e->value;
			}
			td__buffer_ref_n(e->value.kind == TD_VALUE_STRINGS ? e->value.strings->buffer :
																 e->value.blob.buffer,
				n);
		}
		if (TD_UNLIKELY(e->klen > TD_KEY_INLINE))
			atomic_fetch_add_explicit(&e->k.heap->refs, (uint32_t)n, memory_order_relaxed);
		if (!small)
			for (i = 0; i < n; i++)
				td__dict_commit(out[i]);
		w++;
	}
out:
	if (rc < 0) {
		/* The pieces hold the w entries written so far. */
		for (i = 0; i < made; i++) {
			out[i]->used = out[i]->count = w;
			td_dict_free(out[i]);
		}
	}
	if (scratch)
		td__free(scratch);
	return rc;
}

int td__dict_cut(td_dict **out, const td_dict *d, int dim, const int64_t *lengths, size_t n,
	const char *fn)
{
	cut c;
	int rc;

	c.dim = dim < 0 ? -1 : dim;
	c.n = n;
	c.lengths = lengths;
	c.fn = fn;
	if (n == 0)
		return TD_OK;
	/* A lazy stack cuts itself: each piece indexes it (td__lazy_cut()). */
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		rc = td__lazy_cut(out, d, c.dim, lengths, n, fn);
	else
		rc = cut_rec(out, d, &c);
	if (rc < 0)
		memset(out, 0, n * sizeof(*out)); /* freed: no dangling pointers */
	return rc;
}

/* Cut d along `dim` into pieces of lengths[i] rows (NULL: unbind, n pieces). */
static int pieces(td_dict ***out, size_t *count_out, const td_dict *d, int dim,
	const int64_t *lengths, size_t n, const char *fn)
{
	td_dict **arr;
	int rc;

	arr = td__calloc(n ? n : 1, sizeof(*arr));
	if (!arr)
		return td__error_nomem(n * sizeof(*arr));
	rc = td__dict_cut(arr, d, dim, lengths, n, fn);
	if (rc < 0) {
		td__free(arr);
		return rc;
	}
	*out = arr;
	*count_out = n;
	return TD_OK;
}

int td_dict_unbind(td_dict ***dicts_out, size_t *count_out, const td_dict *d, int dim)
{
	static const char fn[] = "td_dict_unbind";
	int dd;

	if (dicts_out)
		*dicts_out = NULL;
	if (count_out)
		*count_out = 0;
	if (!dicts_out || !count_out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_unbind(dicts_out, count_out, d, dim);
	TD_TRY(batch_dim(d, dim, &dd, fn));
	return pieces(dicts_out, count_out, d, dd, NULL, (size_t)d->batch_shape[dd], fn);
}

int td_dict_split_sizes(td_dict ***dicts_out, size_t *count_out, const td_dict *d,
	const int64_t *sizes, size_t nsizes, int dim)
{
	static const char fn[] = "td_dict_split_sizes";
	int64_t total = 0;
	size_t i;
	int dd;

	if (dicts_out)
		*dicts_out = NULL;
	if (count_out)
		*count_out = 0;
	if (!dicts_out || !count_out || !d || (nsizes && !sizes))
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	TD_TRY(batch_dim(d, dim, &dd, fn));
	for (i = 0; i < nsizes; i++) {
		if (sizes[i] < 0 || !td__add_i64(total, sizes[i], &total))
			return td__error(TD_EINVAL, "%s: invalid size %lld", fn, (long long)sizes[i]);
	}
	if (total != d->batch_shape[dd])
		return td__error(TD_EINVAL, "%s: sizes add up to %lld, dim %d has %lld", fn,
			(long long)total, dim, (long long)d->batch_shape[dd]);
	return pieces(dicts_out, count_out, d, dd, sizes, nsizes, fn);
}

/* Pieces of `size` along a dim of `n` (the last may be shorter; one empty piece if n == 0). */
static int even_pieces(td_dict ***out, size_t *count_out, const td_dict *d, int dd, int64_t size,
	const char *fn)
{
	int64_t n = d->batch_shape[dd], k, count = n == 0 ? 1 : (n - 1) / size + 1;
	int64_t *lengths;
	int rc;

	lengths = td__calloc((size_t)count, sizeof(int64_t));
	if (!lengths)
		return td__error_nomem((size_t)count * sizeof(int64_t));
	for (k = 0; k < count; k++)
		lengths[k] = n - k * size < size ? n - k * size : size;
	rc = pieces(out, count_out, d, dd, lengths, (size_t)count, fn);
	td__free(lengths);
	return rc;
}

int td_dict_split(td_dict ***dicts_out, size_t *count_out, const td_dict *d, int64_t split_size,
	int dim)
{
	static const char fn[] = "td_dict_split";
	int dd;

	if (dicts_out)
		*dicts_out = NULL;
	if (count_out)
		*count_out = 0;
	if (!dicts_out || !count_out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	if (split_size <= 0)
		return td__error(TD_EINVAL, "%s: split size %lld must be positive", fn,
			(long long)split_size);
	TD_TRY(batch_dim(d, dim, &dd, fn));
	return even_pieces(dicts_out, count_out, d, dd, split_size, fn);
}

int td_dict_chunk(td_dict ***dicts_out, size_t *count_out, const td_dict *d, size_t chunks, int dim)
{
	static const char fn[] = "td_dict_chunk";
	int64_t n, size;
	int dd;

	if (dicts_out)
		*dicts_out = NULL;
	if (count_out)
		*count_out = 0;
	if (!dicts_out || !count_out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	if (chunks == 0 || chunks > (size_t)INT64_MAX)
		return td__error(TD_EINVAL, "%s: the number of chunks must be positive", fn);
	TD_TRY(batch_dim(d, dim, &dd, fn));
	n = d->batch_shape[dd];
	size = n == 0 ? 1 : (n - 1) / (int64_t)chunks + 1;
	return even_pieces(dicts_out, count_out, d, dd, size, fn);
}

/* ------------------------------------------------------------------------ */
/* reshape, view, unsqueeze, squeeze, permute                                */
/* ------------------------------------------------------------------------ */

typedef struct shape_ctx {
	int old_ndim;          /* batch ndim of the root being reshaped */
	int ndim;              /* new batch ndim */
	const int64_t *shape;  /* new batch shape */
	int dim;               /* unsqueeze / squeeze */
	int perm[TD_MAX_DIMS]; /* permute */
	bool view_only;
} shape_ctx;

static int leaf_reshape(td_tensor *out, const td_tensor *in, void *ctx)
{
	const shape_ctx *c = ctx;
	int64_t shape[TD_MAX_DIMS];
	int rest = in->ndim - c->old_ndim;

	if (c->ndim + rest > TD_MAX_DIMS)
		return td__error(TD_EINVAL, "td_dict_reshape: a leaf would exceed %d dims", TD_MAX_DIMS);
	memcpy(shape, c->shape, (size_t)c->ndim * sizeof(int64_t));
	memcpy(shape + c->ndim, td_tensor_shape(in) + c->old_ndim, (size_t)rest * sizeof(int64_t));
	if (c->view_only)
		return td_tensor_view(out, in, c->ndim + rest, shape);
	return td_tensor_reshape(out, in, c->ndim + rest, shape);
}

static int reshape_impl(td_dict **out, const td_dict *d, int ndim, const int64_t *shape,
	bool view_only, const char *fn)
{
	int64_t resolved[TD_MAX_DIMS], known = 1, numel;
	shape_ctx c;
	int i, infer = -1;

	if (out)
		*out = NULL;
	if (!out || !d || (ndim > 0 && !shape))
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	TD_DENSE_ONLY(d, fn);
	if (ndim < 0 || ndim > TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: ndim %d is outside 0..%d", fn, ndim, TD_MAX_DIMS);
	numel = td__numel(d->batch_ndim, d->batch_shape);
	for (i = 0; i < ndim; i++) {
		if (shape[i] == -1 && infer < 0) {
			infer = i;
			continue;
		}
		if (shape[i] < 0 || !td__mul_i64(known, shape[i], &known))
			return td__error(TD_EINVAL, "%s: invalid size %lld at dim %d", fn, (long long)shape[i],
				i);
		resolved[i] = shape[i];
	}
	if (infer >= 0 && known == 0) {
		char s[TD_SHAPE_STR_LEN];
		/* As torch: with a zero size the -1 could be anything. */
		return td__error(TD_ETYPE,
			"%s: batch shape %s is ambiguous: with a size 0, -1 "
			"can be any size",
			fn, td__format_shape(s, sizeof(s), ndim, shape));
	}
	if (infer >= 0)
		resolved[infer] = numel / known;
	if ((infer >= 0 ? known * resolved[infer] : known) != numel) {
		char s[TD_SHAPE_STR_LEN];
		return td__error(TD_ETYPE, "%s: batch shape %s does not hold %lld elements", fn,
			td__format_shape(s, sizeof(s), ndim, shape), (long long)numel);
	}
	c.old_ndim = d->batch_ndim;
	c.ndim = ndim;
	c.shape = resolved;
	c.view_only = view_only;
	return td__dict_transform(out, d, ndim, resolved, leaf_reshape, &c, NULL, fn);
}

int td_dict_reshape(td_dict **out, const td_dict *d, int ndim, const int64_t *shape)
{
	return reshape_impl(out, d, ndim, shape, false, "td_dict_reshape");
}

int td_dict_view(td_dict **out, const td_dict *d, int ndim, const int64_t *shape)
{
	return reshape_impl(out, d, ndim, shape, true, "td_dict_view");
}

static int leaf_unsqueeze(td_tensor *out, const td_tensor *in, void *ctx)
{
	return td_tensor_unsqueeze(out, in, ((const shape_ctx *)ctx)->dim);
}

static int leaf_squeeze(td_tensor *out, const td_tensor *in, void *ctx)
{
	return td_tensor_squeeze(out, in, ((const shape_ctx *)ctx)->dim);
}

static int leaf_permute(td_tensor *out, const td_tensor *in, void *ctx)
{
	const shape_ctx *c = ctx;
	int dims[TD_MAX_DIMS], i;

	for (i = 0; i < in->ndim; i++)
		dims[i] = i < c->old_ndim ? c->perm[i] : i;
	return td_tensor_permute(out, in, dims);
}

int td_dict_unsqueeze(td_dict **out, const td_dict *d, int dim)
{
	static const char fn[] = "td_dict_unsqueeze";
	int64_t shape[TD_MAX_DIMS];
	shape_ctx c;
	int i, k = 0;

	if (out)
		*out = NULL;
	if (!out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	TD_DENSE_ONLY(d, fn);
	if (d->batch_ndim >= TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: the batch already has %d dims", fn, TD_MAX_DIMS);
	TD_TRY(td__wrap_dim(dim, d->batch_ndim + 1, &c.dim, fn));
	for (i = 0; i <= d->batch_ndim; i++)
		shape[i] = i == c.dim ? 1 : d->batch_shape[k++];
	return td__dict_transform(out, d, d->batch_ndim + 1, shape, leaf_unsqueeze, &c, NULL, fn);
}

int td_dict_squeeze(td_dict **out, const td_dict *d, int dim)
{
	static const char fn[] = "td_dict_squeeze";
	int64_t shape[TD_MAX_DIMS];
	shape_ctx c;
	int i, k = 0;

	if (out)
		*out = NULL;
	if (!out || !d)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	TD_DENSE_ONLY(d, fn);
	if (d->batch_ndim == 0 && (dim == 0 || dim == -1))
		return td__dict_copy(out, d, fn); /* as td_tensor_squeeze() of a 0-d tensor */
	TD_TRY(batch_dim(d, dim, &c.dim, fn));
	if (d->batch_shape[c.dim] != 1)
		return td__dict_copy(out, d, fn);
	for (i = 0; i < d->batch_ndim; i++)
		if (i != c.dim)
			shape[k++] = d->batch_shape[i];
	return td__dict_transform(out, d, k, shape, leaf_squeeze, &c, NULL, fn);
}

int td_dict_permute(td_dict **out, const td_dict *d, const int *dims)
{
	static const char fn[] = "td_dict_permute";
	bool seen[TD_MAX_DIMS] = { false };
	int64_t shape[TD_MAX_DIMS];
	shape_ctx c;
	int i;

	if (out)
		*out = NULL;
	if (!out || !d || (!dims && d->batch_ndim > 0))
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	TD_DENSE_ONLY(d, fn);
	for (i = 0; i < d->batch_ndim; i++) {
		TD_TRY(td__wrap_dim(dims[i], d->batch_ndim, &c.perm[i], fn));
		if (seen[c.perm[i]])
			return td__error(TD_EINVAL, "%s: dim %d appears twice", fn, dims[i]);
		seen[c.perm[i]] = true;
		shape[i] = d->batch_shape[c.perm[i]];
	}
	c.old_ndim = d->batch_ndim;
	return td__dict_transform(out, d, d->batch_ndim, shape, leaf_permute, &c, NULL, fn);
}
