/* SPDX-License-Identifier: MIT */
/*
 * lazy_batch.c - batch operations of lazy stacks: indexing (an int at the
 * stack dim gives that child; slices, position lists and masks at the
 * stack dim give a new stack of the selected children; indices beside the
 * stack dim are forwarded to each child), indexed writes and fills that
 * reach the children in place, unbind, and the cut (split, and unbind of a
 * dict holding a stack) that indexes the stack.
 *
 * An expression is first made canonical: the ellipsis becomes full slices
 * and full slices are appended until every batch dim is named, so that
 * exactly one element E names the stack dim. Elements other than E apply to
 * each child, whose batch dims are the stack's without the stack dim. Where
 * the stack dim lands in the result follows torch's layout of advanced
 * indices (tensor_index.c): the index arrays broadcast to a block that
 * replaces the indexed dims when they are adjacent, and goes first
 * otherwise; an integer is applied before and separates nothing.
 */
#include "td_internal.h"
#include "dict_impl.h"
#include "lazy_impl.h"

#define MAX_INDEX (TD_MAX_DIMS * 4)

typedef struct lazy_index {
	td_index canon[MAX_INDEX]; /* the canonical expression */
	size_t n;
	size_t e;                 /* the element naming the stack dim */
	td_index rest[MAX_INDEX]; /* the expression for the children (E left out) */
	size_t nrest;
	int ndim; /* the indexed batch shape */
	int64_t shape[TD_MAX_DIMS];
	bool drop;    /* E is an integer: one child, the dim goes */
	int new_dim;  /* else: the stack dim of the result */
	int64_t *pos; /* else: the selected children, `m` of them */
	int64_t m;
	int64_t one; /* storage of pos for an integer */
} lazy_index;

static bool is_advanced(const td_index *x)
{
	return x->kind == TD_INDEX_LIST || x->kind == TD_INDEX_MASK || x->kind == TD_INDEX_TENSOR;
}

/* Batch dims an element names. */
static int dims_named(const td_index *x)
{
	if (x->kind == TD_INDEX_NEWAXIS || x->kind == TD_INDEX_ELLIPSIS)
		return 0;
	if (x->kind == TD_INDEX_TENSOR && x->tensor->dtype == TD_DTYPE_BOOL)
		return x->tensor->ndim;
	return 1;
}

/* Dims an element has in the working view (see tensor_index.c). */
static int w_dims(const td_index *x)
{
	if (x->kind == TD_INDEX_INT)
		return 0;
	if (x->kind == TD_INDEX_TENSOR && x->tensor->dtype == TD_DTYPE_BOOL)
		return x->tensor->ndim ? x->tensor->ndim : 1;
	return 1;
}

static int canonicalize(lazy_index *li, const td_dict *d, const td_index *idx, size_t n,
	const char *fn)
{
	size_t i, ell = SIZE_MAX;
	int named = 0, c;

	for (i = 0; i < n; i++) {
		named += dims_named(&idx[i]);
		if (idx[i].kind == TD_INDEX_ELLIPSIS)
			ell = i;
	}
	if (n + (size_t)d->batch_ndim > MAX_INDEX)
		return td__error(TD_EINVAL, "%s: %zu index elements is too many", fn, n);
	li->n = 0;
	for (i = 0; i < n; i++) {
		if (i != ell) {
			li->canon[li->n++] = idx[i];
			continue;
		}
		for (c = named; c < d->batch_ndim; c++)
			li->canon[li->n++] = td_index_all();
	}
	if (ell == SIZE_MAX)
		for (c = named; c < d->batch_ndim; c++)
			li->canon[li->n++] = td_index_all();
	return TD_OK;
}

static int notsup(const char *fn, const char *what)
{
	return td__error(TD_ENOTSUP,
		"%s: on a lazy stack, %s (td_lazy_densify() makes a dense "
		"dict that takes any index)",
		fn, what);
}

/* Read position k of an index tensor, list or mask at the stack dim of size `size`. */
static int64_t wrap(int64_t p, int64_t size)
{
	return p < 0 ? p + size : p;
}

/* The children an advanced element E at the stack dim selects. */
static int select_positions(lazy_index *li, const td_index *x, int64_t size, const char *fn)
{
	int64_t k, count, j = 0;
	td_scalar s;

	if (x->kind == TD_INDEX_LIST) {
		count = x->count;
	} else if (x->kind == TD_INDEX_MASK) {
		count = x->count;
	} else {
		if (x->tensor->ndim != 1)
			return notsup(fn, "an index tensor at the stack dim must have one dim");
		count = td_tensor_shape(x->tensor)[0];
	}
	li->pos = td__calloc(count ? (size_t)count : 1, sizeof(int64_t));
	if (!li->pos)
		return td__error_nomem((size_t)count * sizeof(int64_t));
	for (k = 0; k < count; k++) {
		if (x->kind == TD_INDEX_LIST) {
			li->pos[j++] = wrap(x->list[k], size);
		} else if (x->kind == TD_INDEX_MASK) {
			if (x->mask[k])
				li->pos[j++] = k;
		} else {
			TD_TRY(td_tensor_get(&s, x->tensor, &k));
			if (s.kind == TD_SCALAR_BOOL)
				li->pos[j] = k, j += s.v.b;
			else if (s.kind == TD_SCALAR_UINT)
				li->pos[j++] = (int64_t)s.v.u;
			else
				li->pos[j++] = wrap(s.v.i, size);
		}
	}
	li->m = j;
	return TD_OK;
}

/* Python's slice rules (the expression was validated). */
static int slice_positions(lazy_index *li, const td_index *x, int64_t size)
{
	int64_t st = x->step == TD_SLICE_NONE ? 1 : x->step, a = x->start, b = x->stop, k, len;

	if (x->kind == TD_INDEX_SLICE) {
		a = a == TD_SLICE_NONE ? 0 : a < 0 ? a + size : a;
		b = b == TD_SLICE_NONE ? size : b < 0 ? b + size : b;
		a = a < 0 ? 0 : a > size ? size : a;
		b = b < 0 ? 0 : b > size ? size : b;
	}
	len = b > a ? (b - a + st - 1) / st : 0;
	li->pos = td__calloc(len ? (size_t)len : 1, sizeof(int64_t));
	if (!li->pos)
		return td__error_nomem((size_t)len * sizeof(int64_t));
	for (k = 0; k < len; k++)
		li->pos[k] = a + k * st;
	li->m = len;
	return TD_OK;
}

/*
 * Where the stack dim lands when E (a slice, at working-view dim wE) stays
 * and the other advanced elements are forwarded to the children; TD_ENOTSUP
 * when leaving E out changes how the children lay out their advanced dims.
 */
static int slice_new_dim(lazy_index *li, int w_e, const char *fn)
{
	int w = 0, first = -1, last = -1, nadv = 0, adv_before = 0, unindexed = 0, nb;
	size_t i;
	bool adjacent, child_adjacent;

	for (i = 0; i < li->n; i++) {
		const td_index *x = &li->canon[i];
		int k, wd = w_dims(x);

		for (k = 0; k < wd; k++, w++) {
			if (!is_advanced(x)) {
				unindexed++;
				continue;
			}
			if (first < 0)
				first = w;
			last = w;
			nadv++;
			adv_before += w < w_e;
		}
	}
	if (nadv == 0) {
		li->new_dim = w_e;
		return TD_OK;
	}
	nb = li->ndim - unindexed;
	adjacent = last - first + 1 == nadv;
	child_adjacent = (w_e > first && w_e < last ? last - 1 : last) - first + 1 == nadv;
	if (adjacent != child_adjacent)
		return notsup(fn, "a slice at the stack dim cannot separate advanced indices");
	if (!adjacent)
		li->new_dim = nb + (w_e - adv_before);
	else
		li->new_dim = w_e < first ? w_e : w_e - nadv + nb;
	return TD_OK;
}

static int plan(lazy_index *li, const td_dict *d, const td_index *idx, size_t n, const char *fn)
{
	int sd = d->lazy->dim, named = 0, w = 0, others = 0;
	const td_index *x = NULL;
	size_t i;

	li->pos = NULL;
	li->m = 0;
	li->drop = false;
	if (n && !idx)
		return td__error(TD_EINVAL, "%s: NULL index", fn);
	TD_TRY(td__index_shape(&li->ndim, li->shape, NULL, d->batch_ndim, d->batch_shape, idx, n, fn));
	TD_TRY(canonicalize(li, d, idx, n, fn));
	li->e = SIZE_MAX;
	li->nrest = 0;
	for (i = 0; i < li->n; i++) {
		const td_index *c = &li->canon[i];
		int k = dims_named(c);

		if (li->e == SIZE_MAX && k > 0 && named <= sd && sd < named + k) {
			li->e = i;
			x = c;
			continue;
		}
		named += k;
		if (li->e == SIZE_MAX)
			w += w_dims(c);
		others += is_advanced(c);
		li->rest[li->nrest++] = *c;
	}
	if (x->kind == TD_INDEX_TENSOR && x->tensor->dtype == TD_DTYPE_BOOL && x->tensor->ndim > 1)
		return notsup(fn, "a mask over the stack dim and other dims is not supported");
	if (x->kind == TD_INDEX_INT ||
		(x->kind == TD_INDEX_TENSOR && x->tensor->ndim == 0 && x->tensor->dtype != TD_DTYPE_BOOL &&
			others == 0)) {
		td_scalar s;
		li->drop = true;
		li->one = x->start;
		if (x->kind == TD_INDEX_TENSOR) {
			int64_t none = 0;
			TD_TRY(td_tensor_get(&s, x->tensor, &none));
			li->one = s.kind == TD_SCALAR_UINT ? (int64_t)s.v.u : s.v.i;
		}
		li->one = wrap(li->one, d->batch_shape[sd]);
		li->pos = &li->one;
		li->m = 1;
		return TD_OK;
	}
	if (x->kind == TD_INDEX_SLICE || x->kind == TD_INDEX_RANGE) {
		TD_TRY(slice_new_dim(li, w, fn));
		return slice_positions(li, x, d->batch_shape[sd]);
	}
	if (others > 0)
		return notsup(fn,
			"an index list, tensor or mask at the stack dim cannot be "
			"combined with other advanced indices");
	if (x->kind == TD_INDEX_TENSOR && x->tensor->ndim == 0)
		return notsup(fn, "a 0-d mask at the stack dim is not supported");
	li->new_dim = w;
	return select_positions(li, x, d->batch_shape[sd], fn);
}

static void plan_release(lazy_index *li)
{
	if (li->pos != &li->one)
		td__free(li->pos);
	li->pos = NULL;
}

/* TD_ERROR unless `got` has the batch shape the index promised (a safety net). */
static int check_result(const td_dict *got, int ndim, const int64_t *shape, const char *fn)
{
	if (got->batch_ndim == ndim && td__shape_eq(got->batch_shape, shape, ndim))
		return TD_OK;
	return td__error(TD_ERROR,
		"%s: internal error: a child's indexed batch shape does not "
		"match the stack's",
		fn);
}

/*
 * Nothing selected at the stack dim: a dense, empty dict with the first
 * child's keys (a stack without children would have none), made from
 * child 0 indexed, given the stack dim back, and emptied along it.
 */
static int empty_selection(td_dict **out, const td_dict *d, const lazy_index *li, const char *fn)
{
	td_index x[TD_MAX_DIMS];
	td_dict *c, *u;
	int j, rc;

	TD_TRY(td_dict_index(&c, d->lazy->child[0], li->rest, li->nrest));
	rc = td_dict_unsqueeze(&u, c, li->new_dim);
	td_dict_free(c);
	TD_TRY(rc);
	for (j = 0; j < li->new_dim; j++)
		x[j] = td_index_all();
	x[li->new_dim] = td_index_slice(0, 0, 1);
	rc = td_dict_index(&c, u, x, (size_t)li->new_dim + 1);
	td_dict_free(u);
	TD_TRY(rc);
	if ((rc = check_result(c, li->ndim, li->shape, fn)) < 0) {
		td_dict_free(c);
		return rc;
	}
	*out = c;
	return TD_OK;
}

int td__lazy_index(td_dict **out, const td_dict *d, const td_index *idx, size_t n)
{
	static const char fn[] = "td_dict_index";
	const td__lazy *z = d->lazy;
	int64_t cshape[TD_MAX_DIMS];
	lazy_index li;
	td_dict *s = NULL, *c;
	int64_t k;
	int j, q, rc;

	rc = plan(&li, d, idx, n, fn);
	if (rc < 0) {
		plan_release(&li);
		return rc;
	}
	if (li.drop) {
		rc = td_dict_index(&c, z->child[li.one], li.rest, li.nrest);
		if (rc == TD_OK && (rc = check_result(c, li.ndim, li.shape, fn)) < 0)
			td_dict_free(c);
		if (rc == TD_OK)
			*out = c;
		return rc;
	}
	if (li.m == 0 && z->n > 0) {
		plan_release(&li);
		return empty_selection(out, d, &li, fn);
	}
	for (j = 0, q = 0; j < li.ndim; j++)
		if (j != li.new_dim)
			cshape[q++] = li.shape[j];
	rc = td__lazy_alloc(&s, (size_t)li.m, li.new_dim, li.ndim - 1, cshape, fn);
	for (k = 0; rc == TD_OK && k < li.m; k++) {
		rc = td_dict_index(&c, z->child[li.pos[k]], li.rest, li.nrest);
		if (rc < 0)
			break;
		s->lazy->child[k] = c;
		s->lazy->own[k] = true;
		c->parent = s;
		rc = check_result(c, li.ndim - 1, cshape, fn);
	}
	if (rc == TD_OK)
		rc = check_result(s, li.ndim, li.shape, fn);
	plan_release(&li);
	if (rc < 0) {
		if (s)
			td__lazy_destroy(s);
		return rc;
	}
	*out = s;
	return TD_OK;
}

int td__lazy_index_put(td_dict *d, const td_index *idx, size_t n, const td_dict *value,
	const td_scalar *fill, const char *fn)
{
	char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];
	const td__lazy *z = d->lazy;
	td_dict **pieces = NULL;
	size_t npieces = 0;
	lazy_index li;
	int64_t k;
	int rc;

	rc = plan(&li, d, idx, n, fn);
	if (rc == TD_OK && value &&
		(value->batch_ndim != li.ndim || !td__shape_eq(value->batch_shape, li.shape, li.ndim)))
		rc = td__error(TD_ETYPE,
			"%s: the value's batch shape %s is not the indexed batch "
			"shape %s",
			fn, td__format_shape(s1, sizeof(s1), value->batch_ndim, value->batch_shape),
			td__format_shape(s2, sizeof(s2), li.ndim, li.shape));
	if (rc == TD_OK && value && !li.drop)
		rc = td_dict_unbind(&pieces, &npieces, value, li.new_dim);
	for (k = 0; rc == TD_OK && k < li.m; k++) {
		td_dict *c = z->child[li.pos[k]];

		if (!value)
			rc = td_dict_index_fill(c, li.rest, li.nrest, *fill);
		else
			rc = td_dict_index_put(c, li.rest, li.nrest, li.drop ? value : pieces[k]);
	}
	td_dict_array_free(pieces, npieces);
	plan_release(&li);
	return rc;
}

/* Piece i's batch shape after a cut of `d` along `dim` (as td__dict_cut()). */
static int cut_shape(int64_t *shape, const td_dict *d, int dim, const int64_t *lengths, size_t i)
{
	int k, nd = 0;

	for (k = 0; k < d->batch_ndim; k++) {
		if (k != dim)
			shape[nd++] = d->batch_shape[k];
		else if (lengths)
			shape[nd++] = lengths[i];
	}
	return nd;
}

int td__lazy_cut(td_dict **out, const td_dict *z, int dim, const int64_t *lengths, size_t n,
	const char *fn)
{
	td_index idx[TD_MAX_DIMS];
	int64_t start = 0;
	size_t i;
	int k, rc = TD_OK;

	for (k = 0; k < dim; k++)
		idx[k] = td_index_all();
	for (i = 0; i < n; i++) {
		if (dim < 0) {
			rc = td__lazy_copy(&out[i], z, false, fn);
		} else {
			if (lengths) {
				idx[dim] = td_index_slice(start, start + lengths[i], 1);
				start += lengths[i];
			} else {
				idx[dim] = td_index_int((int64_t)i);
			}
			rc = td__lazy_index(&out[i], z, idx, (size_t)dim + 1);
		}
		if (rc < 0)
			break;
		/* The piece must have the shape the cut gives this level: never silently wrong. */
		if (dim >= 0) {
			int64_t shape[TD_MAX_DIMS];
			int nd = cut_shape(shape, z, dim, lengths, i);

			if (out[i]->batch_ndim != nd || !td__shape_eq(out[i]->batch_shape, shape, nd)) {
				td_dict_free(out[i]);
				rc = td__error(TD_ERROR,
					"%s: a piece of a nested lazy stack has another "
					"batch shape",
					fn);
				break;
			}
		}
	}
	if (rc < 0)
		while (i-- > 0)
			td_dict_free(out[i]);
	return rc;
}

/*
 * Cutting the dense children of a stack together, a level at a time.
 *
 * The children of a stack usually share their layout: a leaf or a
 * sub-dict in the same slots, the same batch shapes (each piece takes its
 * own child's keys: they need not agree, though they usually do). Their
 * levels are then cut in one pass over all of them (mcut_rec()): one
 * template header per level for every piece, the pieces of the level
 * allocated together, one buffer reference per run of leaves that share a
 * buffer (the children of a stack made by td_lazy_stack() of an unbind
 * usually do), and one call per level instead of one per child and level.
 * A level whose children differ in layout (another slot count, a
 * different kind of value or a hole in one slot, a lazy sub-stack, a level
 * with an index, arrays of strings or blobs) is cut child by child with
 * td__dict_cut(), which handles everything; the levels below it too. The
 * slots are compared as the pass reaches them: a level found to differ
 * late drops the pieces it began and starts over child by child.
 *
 * Against td__dict_cut() child by child: ~290 -> ~215 instructions per dict
 * made in the unbind of the lazy benchmark stack (callgrind).
 */
#define MCUT_LOCAL 32

/*
 * Whether the dicts src[0..m-1] are dense, small (no index), and agree in
 * their slot counts and batch shapes: what one pass needs of their headers
 * (their slots are compared as the pass reaches them, in mcut_slot_same()).
 */
static bool mcut_same_headers(td_dict *const *src, size_t m)
{
	const td_dict *a = src[0], *b;
	size_t i;

	if (td__dict_is_lazy(a) || a->count > TD_DICT_SCAN_MAX)
		return false;
	for (i = 1; i < m; i++) {
		b = src[i];
		if (td__dict_is_lazy(b) || b->used != a->used || b->count != a->count ||
			b->batch_ndim != a->batch_ndim ||
			!td__shape_eq(b->batch_shape, a->batch_shape, a->batch_ndim))
			return false;
	}
	return true;
}

/*
 * Whether slot j is dead in every dict src[0..m-1], or holds a tensor with
 * inline dims in every one, or a dict in every one (whether these are
 * dense is for the level below to see). A tensor of more than
 * TD_TENSOR_INLINE_DIMS dims (out-of-line dims with references of their
 * own, rare) makes the level differ: td__dict_cut() handles those.
 */
static inline bool mcut_slot_same(td_dict *const *src, size_t m, uint32_t j)
{
	const td__entry *e = &src[0]->entries[j];
	const uint32_t kind = e->value.kind;
	size_t i;

	if (!td__entry_live(e)) {
		for (i = 1; i < m; i++)
			if (td__entry_live(&src[i]->entries[j]))
				return false;
		return true;
	}
	if (kind == TD_VALUE_TENSOR) {
		for (i = 0; i < m; i++) {
			e = &src[i]->entries[j];
			if (!td__entry_live(e) || e->value.kind != kind || td__dims_ext(e->value.tensor.ndim))
				return false;
		}
		return true;
	}
	if (kind != TD_VALUE_DICT)
		return false;
	for (i = 1; i < m; i++) {
		e = &src[i]->entries[j];
		if (!td__entry_live(e) || e->value.kind != kind)
			return false;
	}
	return true;
}

/* Cut src[0..m-1] one by one into out[i * n ...]; on failure nothing is left. */
static int mcut_each(td_dict **out, td_dict *const *src, size_t m, int dim, size_t n,
	const char *fn)
{
	size_t i;
	int rc;

	for (i = 0; i < m; i++) {
		rc = td__dict_cut(out + i * n, src[i], dim, NULL, n, fn);
		if (rc < 0) {
			while (i-- > 0)
				td__dict_destroy_many(out + i * n, n);
			return rc;
		}
	}
	return TD_OK;
}

/* A key's heap string gains n references (a piece of each of n pieces). */
static inline void mcut_key_refs(const td__entry *e, size_t n)
{
	if (TD_UNLIKELY(e->klen > TD_KEY_INLINE))
		atomic_fetch_add_explicit(&e->k.heap->refs, (uint32_t)n, memory_order_relaxed);
}

/*
 * Unbind the dense dicts src[0..m-1] along their batch dim `dim` into
 * n pieces each: piece k of src[i] goes to out[i * n + k]. On failure
 * nothing is left.
 */
static int mcut_rec(td_dict **out, td_dict *const *src, size_t m, int dim, size_t n, const char *fn)
{
	const td_dict *a = src[0];
	const uint32_t count = a->count;
	const size_t total = m * n, bytes = sizeof(td_dict) + (size_t)count * sizeof(td__entry);
	int64_t shape[TD_MAX_DIMS];
	td_dict tmpl, *local_sub[MCUT_LOCAL], **sub = local_sub, *local_ssrc[MCUT_LOCAL],
										  **ssrc = local_ssrc;
	void *local_blk[MCUT_LOCAL], **blk = local_blk, **scratch = NULL;
	size_t i, k, q, off;
	uint32_t j, w = 0;
	int d, nd = 0, rc = TD_OK;
	bool differ = false;

	if (!mcut_same_headers(src, m))
		return mcut_each(out, src, m, dim, n, fn);
	if (total > MCUT_LOCAL) {
		scratch = td__malloc((2 * total + m) * sizeof(void *));
		if (!scratch)
			return td__error_nomem((2 * total + m) * sizeof(void *));
		blk = scratch;
		sub = (td_dict **)(void *)(scratch + total);
		ssrc = sub + total;
	}
	if (!td__alloc_small_n(blk, total, bytes)) {
		td__free(scratch);
		return td__error_nomem(bytes);
	}
	/* Every piece's header as it will be once all `count` entries are in. */
	for (d = 0; d < a->batch_ndim; d++)
		if (d != dim)
			shape[nd++] = a->batch_shape[d];
	td__dict_init(&tmpl, nd, shape, count);
	tmpl.used = tmpl.count = count;
	tmpl.gen += count; /* as td__dict_commit() would have */
	tmpl.entries = NULL;
	for (q = 0; q < total; q++) {
		td_dict *p = blk[q];

		memcpy(p, &tmpl, offsetof(td_dict, batch_shape));
		if (count)
			p->entries = (td__entry *)(p + 1);
		for (d = 0; d < nd; d++)
			p->batch_shape[d] = shape[d];
		out[q] = p;
	}
	for (j = 0; j < a->used; j++) {
		if (!mcut_slot_same(src, m, j)) {
			differ = true;
			break;
		}
		if (!td__entry_live(&a->entries[j]))
			continue;
		off = sizeof(td_dict) + (size_t)w * sizeof(td__entry);
		if (a->entries[j].value.kind == TD_VALUE_TENSOR) {
			td_buffer *run = NULL;
			size_t refs = 0;

			for (i = 0, q = 0; i < m; i++) {
				const td__entry *e = &src[i]->entries[j];
				const td_tensor *t = &e->value.tensor;
				int64_t stride = td__istrides(t)[dim];
				td_tensor view;

				/* Inline dims (mcut_slot_same()): the view's are inline too, it cannot fail. */
				(void)td__lz_select_borrowed(&view, t, dim, 0, fn);
				for (k = 0; k < n; k++, q++) {
					td__entry *pe = (td__entry *)(void *)((char *)out[q] + off);

					memcpy(pe, e, offsetof(td__entry, value));
					pe->value.kind = TD_VALUE_TENSOR;
					td__tensor_copy_view(&pe->value.tensor, &view);
					pe->value.tensor.offset += (int64_t)k * stride;
				}
				mcut_key_refs(e, n);
				/* One add per run of leaves in one buffer. */
				if (t->buffer != run) {
					if (refs)
						td__buffer_ref_n(run, refs);
					run = t->buffer;
					refs = 0;
				}
				refs += n;
			}
			td__buffer_ref_n(run, refs);
		} else {
			for (i = 0; i < m; i++)
				ssrc[i] = src[i]->entries[j].value.dict;
			rc = mcut_rec(sub, ssrc, m, dim, n, fn);
			if (rc < 0)
				break;
			for (i = 0, q = 0; i < m; i++) {
				const td__entry *e = &src[i]->entries[j];

				for (k = 0; k < n; k++, q++) {
					td__entry *pe = (td__entry *)(void *)((char *)out[q] + off);

					memcpy(pe, e, offsetof(td__entry, value));
					pe->value.kind = TD_VALUE_DICT;
					pe->value.dict = sub[q];
					sub[q]->parent = out[q];
				}
				mcut_key_refs(e, n);
			}
		}
		w++;
	}
	if (rc < 0 || differ) {
		/* The pieces hold the w entries written so far. */
		for (q = 0; q < total; q++) {
			out[q]->used = out[q]->count = w;
			td_dict_free(out[q]);
		}
	}
	td__free(scratch);
	/* Slots that differ (rare): the level is cut child by child instead. */
	if (differ)
		return mcut_each(out, src, m, dim, n, fn);
	return rc;
}

/*
 * unbind along a dim beside the stack dim: piece k stacks the children's
 * pieces k. Dense children are cut together a level at a time
 * (mcut_rec()), lazy ones through td_dict_unbind().
 */
static int unbind_beside(td_dict ***out, size_t *count_out, const td_dict *d, int dim)
{
	static const char fn[] = "td_dict_unbind";
	const td__lazy *z = d->lazy;
	int64_t cshape[TD_MAX_DIMS];
	int cd = dim < z->dim ? dim : dim - 1, nsd = dim < z->dim ? z->dim - 1 : z->dim;
	size_t count = (size_t)d->batch_shape[dim], i, k, got, nparts = count;
	td_dict **res, **parts = NULL, **sub;
	bool dense = true;
	int j, q, rc = TD_OK;

	for (j = 0, q = 0; j < d->batch_ndim; j++)
		if (j != dim && j != z->dim)
			cshape[q++] = d->batch_shape[j];
	for (i = 0; i < z->n; i++)
		dense = dense && !td__dict_is_lazy(z->child[i]);
	/* All children dense: all their pieces at once, child i's from parts[i * count]. */
	if (dense && count > 0 && z->n > 0 && !td__mul_size(z->n, count, &nparts))
		return td__error_nomem(SIZE_MAX);
	res = td__calloc(count ? count : 1, sizeof(*res));
	if (!res)
		return td__error_nomem(count * sizeof(*res));
	for (k = 0; rc == TD_OK && k < count; k++)
		rc = td__lazy_alloc(&res[k], z->n, nsd, q, cshape, fn);
	if (rc == TD_OK && nparts > 0) {
		parts = td__calloc(nparts, sizeof(*parts));
		if (!parts)
			rc = td__error_nomem(nparts * sizeof(*parts));
	}
	if (rc == TD_OK && dense && count > 0 && z->n > 0) {
		rc = mcut_rec(parts, z->child, z->n, cd, count, fn);
		for (i = 0; rc == TD_OK && i < z->n; i++)
			for (k = 0; k < count; k++) {
				res[k]->lazy->child[i] = parts[i * count + k];
				res[k]->lazy->own[i] = true;
				parts[i * count + k]->parent = res[k];
			}
	}
	for (i = 0; !dense && rc == TD_OK && i < z->n; i++) {
		const td_dict *c = z->child[i];

		sub = parts;
		if (c->lazy)
			rc = td_dict_unbind(&sub, &got, c, cd);
		else
			rc = td__dict_cut(parts, c, cd, NULL, count, fn);
		if (rc < 0)
			break;
		for (k = 0; k < count; k++) {
			res[k]->lazy->child[i] = sub[k];
			res[k]->lazy->own[i] = true;
			sub[k]->parent = res[k];
		}
		if (sub != parts)
			td__free(sub);
	}
	td__free(parts);
	if (rc < 0) {
		td_dict_array_free(res, count);
		return rc;
	}
	*out = res;
	*count_out = count;
	return TD_OK;
}

int td__lazy_unbind(td_dict ***dicts_out, size_t *count_out, const td_dict *d, int dim)
{
	static const char fn[] = "td_dict_unbind";
	const td__lazy *z = d->lazy;
	td_dict **res;
	size_t i;
	int dd, rc;

	TD_TRY(td__wrap_dim(dim, d->batch_ndim, &dd, fn));
	if (dd != z->dim)
		return unbind_beside(dicts_out, count_out, d, dd);
	/* Along the stack dim: the children, as shallow copies the caller owns. */
	res = td__calloc(z->n ? z->n : 1, sizeof(*res));
	if (!res)
		return td__error_nomem(z->n * sizeof(*res));
	for (i = 0; i < z->n; i++) {
		rc = td_dict_copy(&res[i], z->child[i]);
		if (rc < 0) {
			td_dict_array_free(res, i);
			return rc;
		}
	}
	*dicts_out = res;
	*count_out = z->n;
	return TD_OK;
}
