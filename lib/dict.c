/* SPDX-License-Identifier: MIT */
/*
 * dict.c - the td_dict map: creation and release, the insertion-ordered
 * entry array with its open-addressing index, path walking, and the batch
 * shape and lock state.
 */
#include "td_internal.h"
#include "dict_impl.h"

/* ------------------------------------------------------------------------ */
/* Allocation and release                                                    */
/* ------------------------------------------------------------------------ */

/* Index size for `cap` entries: a power of two at least twice as large. */
static uint32_t index_size(uint32_t cap)
{
	uint32_t size = 16;

	while (size < 2 * cap)
		size *= 2;
	return size;
}

int td__dict_alloc(td_dict **out, int batch_ndim, const int64_t *batch_shape, uint32_t cap,
	const char *fn)
{
	size_t size;
	td_dict *d;

	if (cap > UINT32_MAX / 4)
		return td__error(TD_EOVERFLOW, "%s: too many entries in one dict", fn);
	size = sizeof(*d) + (size_t)cap * sizeof(td__entry);
	d = td__alloc_small(size);
	if (!d)
		return td__error_nomem(size);
	td__dict_init(d, batch_ndim, batch_shape, cap);
	if (cap > TD_DICT_SCAN_MAX) {
		uint32_t isize = index_size(cap);
		d->index = td__calloc(isize, sizeof(uint32_t));
		if (!d->index) {
			td__free_small(d, size);
			return td__error_nomem((size_t)isize * sizeof(uint32_t));
		}
		d->index_mask = isize - 1;
	}
	*out = d;
	return TD_OK;
}

int td_dict_new(td_dict **out, int batch_ndim, const int64_t *batch_shape)
{
	static const char fn[] = "td_dict_new";
	int i;

	if (!out)
		return td__error(TD_EINVAL, "td_dict_new: NULL out");
	*out = NULL;
	if (batch_ndim < 0 || batch_ndim > TD_MAX_DIMS)
		return td__error(TD_EINVAL, "%s: batch ndim %d is outside 0..%d", fn, batch_ndim,
			TD_MAX_DIMS);
	if (batch_ndim > 0 && !batch_shape)
		return td__error(TD_EINVAL, "%s: NULL batch shape", fn);
	for (i = 0; i < batch_ndim; i++)
		if (batch_shape[i] < 0)
			return td__error(TD_EINVAL, "%s: negative batch size %lld at dim %d", fn,
				(long long)batch_shape[i], i);
	TD_TRY(td__batch_check_numel(batch_ndim, batch_shape, fn));
	return td__dict_alloc(out, batch_ndim, batch_shape, 2, "td_dict_new");
}

int td__batch_check_numel(int ndim, const int64_t *shape, const char *fn)
{
	int64_t numel = 1;
	int i;

	for (i = 0; i < ndim; i++)
		if (!td__mul_i64(numel, shape[i], &numel))
			return td__error(TD_EOVERFLOW, "%s: the batch shape has too many elements", fn);
	return TD_OK;
}

static void dict_destroy(td_dict *d);

/* The references a value holds (a blob emptied by a rename has none). */
static inline void value_release(td_value *v)
{
	switch (v->kind) {
	case TD_VALUE_TENSOR:
		if (v->tensor.buffer)
			td__tensor_drop(&v->tensor);
		break;
	case TD_VALUE_DICT:
		dict_destroy(v->dict);
		break;
	case TD_VALUE_STRING:
	case TD_VALUE_BYTES:
		if (v->blob.buffer)
			td__buffer_unref(v->blob.buffer);
		break;
	case TD_VALUE_STRINGS:
		td_buffer_unref(v->strings->buffer);
		break;
	}
}

void td__value_release(td_value *v)
{
	value_release(v);
}

/*
 * Release what the live entries of the dense dict d hold; its sub-dicts go
 * to next[] (while *m < room) or are destroyed.
 */
static inline void release_entries(td_dict *d, td_dict **next, size_t *m, size_t room)
{
	td__entry *e, *end;

	/* An empty dict may have no entry array (no arithmetic on NULL). */
	e = d->entries;
	end = d->used ? e + d->used : e;
	for (; e < end; e++) {
		if (TD_UNLIKELY(e->klen > TD_KEY_INLINE)) {
			if (e->klen == TD_SLOT_DEAD)
				continue;
			td__kstr_unref(e->k.heap);
		}
		/* Leaves first: the common case takes one compare to reach. */
		if (e->value.kind == TD_VALUE_TENSOR) {
			if (e->value.tensor.buffer)
				td__tensor_drop(&e->value.tensor);
		} else if (e->value.kind == TD_VALUE_DICT && *m < room) {
			next[(*m)++] = e->value.dict;
		} else {
			value_release(&e->value);
		}
	}
}

/* Free the memory of the dense dict d (its entries released). */
static inline void free_dict_memory(td_dict *d)
{
	if (d->index)
		td__free(d->index);
	if (!d->entries_inline)
		td__free_small(d->entries, (size_t)d->cap * sizeof(td__entry));
	td__free_small(d, sizeof(*d) + (size_t)d->block_cap * sizeof(td__entry));
}

#define LEVEL_BATCH 32

/* What a level walk does to each dict (its sub-dicts go to next[] while *m < LEVEL_BATCH). */
enum level_op { LEVEL_DESTROY, LEVEL_LOCK, LEVEL_UNLOCK };

static inline void destroy_one(td_dict *d, td_dict **next, size_t *m);
static inline void lock_one(td_dict *d, td_dict **next, size_t *m, bool locked);

/*
 * Walk the trees first[0..n-1] (n <= LEVEL_BATCH) one level at a time,
 * applying `op` to every dict. The dicts of a level are independent, so
 * they are all prefetched (td__dict_prefetch()) before any is read, instead
 * of one chain of dependent misses per tree walked depth first (header,
 * entry, child header, ...: 19 levels for the benchmark chain). Always
 * inline, with a constant `op`: no call per dict (~30 instructions).
 */
static inline __attribute__((always_inline)) void walk_levels(td_dict *const *first, size_t n,
	enum level_op op)
{
	td_dict *a[LEVEL_BATCH], *b[LEVEL_BATCH], **todo = a, **next = b, **t;
	size_t i, m;

	for (i = 0; i < n; i++)
		todo[i] = first[i];
	while (n > 0) {
		for (i = 0; i < n; i++)
			td__dict_prefetch(todo[i]);
		m = 0;
		for (i = 0; i < n; i++) {
			if (op == LEVEL_DESTROY)
				destroy_one(todo[i], next, &m);
			else
				lock_one(todo[i], next, &m, op == LEVEL_LOCK);
		}
		t = todo;
		todo = next;
		next = t;
		n = m;
	}
}

/* Destroy d (sub-dicts beyond the batch on their own); a lazy stack's children join next[]. */
static inline __attribute__((always_inline)) void destroy_one(td_dict *d, td_dict **next, size_t *m)
{
	if (TD_UNLIKELY(td__dict_is_lazy(d))) {
		td__lazy_release(d, next, m, LEVEL_BATCH);
		return;
	}
	release_entries(d, next, m, LEVEL_BATCH);
	free_dict_memory(d);
}

/* Destroy the dicts first[0..n-1] (n <= LEVEL_BATCH) and all they hold, a level at a time. */
static void destroy_levels(td_dict *const *first, size_t n)
{
	walk_levels(first, n, LEVEL_DESTROY);
}

static void dict_destroy(td_dict *d)
{
	/* A lazy stack straight away: the stacks gets make borrow their children. */
	if (td__dict_is_lazy(d))
		td__lazy_destroy(d);
	else
		destroy_levels(&d, 1);
}

void td__dict_destroy_many(td_dict *const *dicts, size_t n)
{
	size_t i;

	for (i = 0; i < n; i += LEVEL_BATCH)
		destroy_levels(dicts + i, n - i < LEVEL_BATCH ? n - i : LEVEL_BATCH);
}

void td_dict_free(td_dict *d)
{
	if (d && !d->parent)
		dict_destroy(d);
}

void td_dict_array_free(td_dict **dicts, size_t count)
{
	td_dict *batch[LEVEL_BATCH];
	size_t i, m = 0;

	if (!dicts)
		return;
	/* The roots among them (td_dict_free() skips the others), destroyed
	 * together a level at a time: the pieces of an unbind, for one. */
	for (i = 0; i < count; i++) {
		if (!dicts[i] || dicts[i]->parent)
			continue;
		batch[m++] = dicts[i];
		if (m == LEVEL_BATCH) {
			destroy_levels(batch, m);
			m = 0;
		}
	}
	if (m)
		destroy_levels(batch, m);
	td__free(dicts);
}

int td__value_share(td_value *out, const td_value *v, const char *fn)
{
	switch (v->kind) {
	case TD_VALUE_DICT: {
		td_dict *copy;
		TD_TRY(td__dict_copy(&copy, v->dict, fn));
		out->kind = TD_VALUE_DICT;
		out->dict = copy;
		return TD_OK;
	}
	case TD_VALUE_TENSOR:
		*out = *v;
		td__tensor_hold(&out->tensor);
		return TD_OK;
	case TD_VALUE_STRINGS:
		*out = *v;
		td_buffer_ref(out->strings->buffer);
		return TD_OK;
	default:
		*out = *v;
		td_buffer_ref(out->blob.buffer);
		return TD_OK;
	}
}

/* ------------------------------------------------------------------------ */
/* The index                                                                 */
/* ------------------------------------------------------------------------ */

td__entry *td__dict_find_indexed(const td_dict *d, const char *key, uint32_t len, uint64_t hash)
{
	uint32_t i, mask = d->index_mask, v;

	for (i = (uint32_t)hash & mask;; i = (i + 1) & mask) {
		v = d->index[i];
		if (v == 0)
			return NULL;
		if (v != TD_DICT_TOMB && td__key_eq(&d->entries[v - 1], key, len, hash))
			return &d->entries[v - 1];
	}
}

static void index_insert(td_dict *d, uint64_t hash, uint32_t slot)
{
	uint32_t mask = d->index_mask, i;

	for (i = (uint32_t)hash & mask; d->index[i] != 0 && d->index[i] != TD_DICT_TOMB;
		 i = (i + 1) & mask)
		;
	if (d->index[i] == 0)
		d->index_fill++;
	d->index[i] = slot + 1;
}

/* Refill `index` (size mask + 1, already allocated) from the live entries. */
static void index_fill_all(td_dict *d, uint32_t *index, uint32_t mask)
{
	uint32_t i;

	memset(index, 0, ((size_t)mask + 1) * sizeof(uint32_t));
	d->index = index;
	d->index_mask = mask;
	d->index_fill = 0;
	for (i = 0; i < d->used; i++)
		if (td__entry_live(&d->entries[i]))
			index_insert(d, d->entries[i].hash, i);
}

/* Close the holes left by deletions, in place. */
static void compact(td_dict *d)
{
	uint32_t i, j = 0;

	for (i = 0; i < d->used; i++)
		if (td__entry_live(&d->entries[i]))
			d->entries[j++] = d->entries[i];
	d->used = j;
	if (d->index)
		index_fill_all(d, d->index, d->index_mask);
}

/* Make room for one more entry. */
static int grow(td_dict *d, const char *fn)
{
	uint32_t new_cap, isize = 0;
	uint32_t *new_index = NULL;
	td__entry *new_entries;
	size_t bytes;

	if (d->used - d->count >= d->used / 2 && d->used > d->count) {
		compact(d);
		return TD_OK;
	}
	if (d->cap >= UINT32_MAX / 4)
		return td__error(TD_EOVERFLOW, "%s: too many entries in one dict", fn);
	new_cap = d->cap ? d->cap * 2 : 2;
	bytes = (size_t)new_cap * sizeof(td__entry);
	new_entries = td__alloc_small(bytes);
	if (!new_entries)
		return td__error_nomem(bytes);
	if (new_cap > TD_DICT_SCAN_MAX && (!d->index || index_size(new_cap) > d->index_mask + 1)) {
		isize = index_size(new_cap);
		new_index = td__malloc((size_t)isize * sizeof(uint32_t));
		if (!new_index) {
			td__free_small(new_entries, bytes);
			return td__error_nomem((size_t)isize * sizeof(uint32_t));
		}
	}
	if (d->used)
		memcpy(new_entries, d->entries, (size_t)d->used * sizeof(td__entry));
	if (!d->entries_inline)
		td__free_small(d->entries, (size_t)d->cap * sizeof(td__entry));
	d->entries = new_entries;
	d->entries_inline = false;
	d->cap = new_cap;
	compact(d);
	if (new_index) {
		td__free(d->index);
		index_fill_all(d, new_index, isize - 1);
	}
	return TD_OK;
}

int td__dict_append(td_dict *d, const td__kref *k, const td_value *value, const char *fn)
{
	uint32_t slot;

	if (d->used == d->cap)
		TD_TRY(grow(d, fn));
	if (!td__entry_set_key(&d->entries[d->used], k))
		return td__error_nomem(k->len);
	if (d->index && ((uint64_t)d->index_fill + 1) * 4 > ((uint64_t)d->index_mask + 1) * 3)
		index_fill_all(d, d->index, d->index_mask); /* drop tombstones */
	slot = d->used++;
	td__value_assign(&d->entries[slot].value, value);
	d->count++;
	if (d->index)
		index_insert(d, k->hash, slot);
	td__dict_touch(d);
	return TD_OK;
}

int td__dict_append_entry(td_dict *d, const td__entry *src, const td_value *value, const char *fn)
{
	uint32_t slot;

	if (d->used == d->cap)
		TD_TRY(grow(d, fn));
	if (d->index && ((uint64_t)d->index_fill + 1) * 4 > ((uint64_t)d->index_mask + 1) * 3)
		index_fill_all(d, d->index, d->index_mask);
	slot = d->used++;
	td__entry_copy_key(&d->entries[slot], src);
	td__value_assign(&d->entries[slot].value, value);
	d->count++;
	if (d->index)
		index_insert(d, src->hash, slot);
	d->gen++; /* a dict being built: only its own generation */
	return TD_OK;
}

void td__dict_commit(td_dict *d)
{
	uint32_t slot = d->used++;

	d->count++;
	d->gen++; /* a dict being built: only its own generation */
	if (d->index) {
		if (((uint64_t)d->index_fill + 1) * 4 > ((uint64_t)d->index_mask + 1) * 3)
			index_fill_all(d, d->index, d->index_mask);
		index_insert(d, d->entries[slot].hash, slot);
	}
}

void td__dict_push(td_dict *d, const td__entry *src)
{
	td__entry_copy_key(&d->entries[d->used], src);
	td__dict_commit(d);
}

void td__dict_remove_slot(td_dict *d, uint32_t i)
{
	td__entry *e = &d->entries[i];

	if (d->index) {
		uint32_t mask = d->index_mask, k;
		for (k = (uint32_t)e->hash & mask; d->index[k] != i + 1; k = (k + 1) & mask)
			;
		d->index[k] = TD_DICT_TOMB;
	}
	td__entry_drop_key(e);
	td__value_release(&e->value);
	d->count--;
	while (d->used > 0 && !td__entry_live(&d->entries[d->used - 1]))
		d->used--;
	td__dict_touch(d);
}

int td__dict_rekey(td_dict *d, uint32_t i, const td__kref *k)
{
	td__entry *e = &d->entries[i];
	td__entry fresh;

	/* Make the new key first: a long one may fail to allocate. */
	if (!td__entry_set_key(&fresh, k))
		return td__error_nomem(k->len);
	if (d->index) {
		uint32_t mask = d->index_mask, c;
		for (c = (uint32_t)e->hash & mask; d->index[c] != i + 1; c = (c + 1) & mask)
			;
		d->index[c] = TD_DICT_TOMB;
	}
	td__entry_drop_key(e);
	e->k = fresh.k;
	e->klen = fresh.klen;
	e->hash = fresh.hash;
	td__dict_touch(d);
	if (!d->index)
		return TD_OK;
	/* The new key may take an empty cell: keep the load bound, as appends do. */
	if (((uint64_t)d->index_fill + 1) * 4 > ((uint64_t)d->index_mask + 1) * 3)
		index_fill_all(d, d->index, d->index_mask);
	else
		index_insert(d, e->hash, i);
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Batch shape, depth, locks                                                 */
/* ------------------------------------------------------------------------ */

int td__dict_check_batch(const td_dict *d, int ndim, const int64_t *shape, const char *key,
	const char *fn)
{
	char s1[TD_SHAPE_STR_LEN], s2[TD_SHAPE_STR_LEN];

	if (ndim >= d->batch_ndim &&
		memcmp(shape, d->batch_shape, (size_t)d->batch_ndim * sizeof(int64_t)) == 0)
		return TD_OK;
	return td__error(TD_ETYPE,
		"%s: '%s' has shape %s, which does not start with the batch "
		"shape %s",
		fn, key, td__format_shape(s1, sizeof(s1), ndim, shape),
		td__format_shape(s2, sizeof(s2), d->batch_ndim, d->batch_shape));
}

size_t td__dict_height(const td_dict *d)
{
	size_t h = 0, i;

	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_height(d);
	for (i = 0; i < d->used; i++) {
		const td__entry *e = &d->entries[i];
		if (td__entry_live(e) && e->value.kind == TD_VALUE_DICT) {
			size_t c = td__dict_height(e->value.dict);
			if (c > h)
				h = c;
		}
	}
	return h + 1;
}

size_t td__dict_depth(const td_dict *d)
{
	size_t n = 0;

	while (d->parent) {
		d = d->parent;
		n++;
	}
	return n;
}

/* Set d's lock flag; its sub-dicts join next[] or are set on their own. */
static inline void lock_one(td_dict *d, td_dict **next, size_t *m, bool locked)
{
	uint32_t j;

	if (TD_UNLIKELY(td__dict_is_lazy(d))) {
		td__lazy_set_locked(d, locked);
		return;
	}
	d->locked = locked;
	for (j = 0; j < d->used; j++) {
		td__entry *e = &d->entries[j];

		if (!td__entry_live(e) || e->value.kind != TD_VALUE_DICT)
			continue;
		if (*m < LEVEL_BATCH)
			next[(*m)++] = e->value.dict;
		else
			td__dict_set_locked(e->value.dict, locked);
	}
}

/*
 * Set the lock flag over the trees first[0..n-1] (n <= LEVEL_BATCH) a
 * level at a time: a lazy stack of chains is as many chains of dependent
 * misses otherwise (10 x 19 dicts for the benchmark stack, cold when
 * freshly built).
 */
static void lock_levels(td_dict *const *first, size_t n, bool locked)
{
	walk_levels(first, n, locked ? LEVEL_LOCK : LEVEL_UNLOCK);
}

void td__dict_set_locked_many(td_dict *const *dicts, size_t n, bool locked)
{
	size_t i;

	for (i = 0; i < n; i += LEVEL_BATCH)
		lock_levels(dicts + i, n - i < LEVEL_BATCH ? n - i : LEVEL_BATCH, locked);
}

void td__dict_set_locked(td_dict *d, bool locked)
{
	lock_levels(&d, 1, locked);
}

int td_dict_lock(td_dict *d)
{
	if (!d)
		return td__error(TD_EINVAL, "td_dict_lock: NULL dict");
	td__dict_set_locked(d, true);
	return TD_OK;
}

int td_dict_unlock(td_dict *d)
{
	const td_dict *p;

	if (!d)
		return td__error(TD_EINVAL, "td_dict_unlock: NULL dict");
	for (p = d->parent; p; p = p->parent)
		if (p->locked)
			return td__error(TD_ELOCKED,
				"td_dict_unlock: a parent of this dict is locked; "
				"unlock the parent instead");
	td__dict_set_locked(d, false);
	return TD_OK;
}

bool td_dict_is_locked(const td_dict *d)
{
	return d && d->locked;
}

int td_dict_batch_ndim(const td_dict *d)
{
	return d ? d->batch_ndim : 0;
}

const int64_t *td_dict_batch_shape(const td_dict *d)
{
	return d ? d->batch_shape : NULL;
}

int64_t td_dict_batch_numel(const td_dict *d)
{
	return d ? td__numel(d->batch_ndim, d->batch_shape) : 0;
}

td_dict *td_dict_parent(const td_dict *d)
{
	return d ? d->parent : NULL;
}

size_t td_dict_len(const td_dict *d)
{
	if (d && TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_len(d);
	return d ? d->count : 0;
}

/* The shape of an entry's value that must start with the batch shape. */
static bool value_shape(const td_value *v, int *ndim, const int64_t **shape)
{
	if (v->kind == TD_VALUE_TENSOR) {
		*ndim = v->tensor.ndim;
		*shape = td_tensor_shape(&v->tensor);
		return true;
	}
	if (v->kind == TD_VALUE_DICT) {
		*ndim = v->dict->batch_ndim;
		*shape = v->dict->batch_shape;
		return true;
	}
	if (v->kind == TD_VALUE_STRINGS) {
		*ndim = v->strings->ndim;
		*shape = v->strings->shape;
		return true;
	}
	return false;
}

int td_dict_set_batch_shape(td_dict *d, int batch_ndim, const int64_t *batch_shape)
{
	static const char fn[] = "td_dict_set_batch_shape";
	td_dict probe;
	uint32_t i;

	if (!d)
		return td__error(TD_EINVAL, "%s: NULL dict", fn);
	TD_DENSE_ONLY(d, fn);
	if (d->locked)
		return td__error(TD_ELOCKED, "%s: the dict is locked", fn);
	if (batch_ndim < 0 || batch_ndim > TD_MAX_DIMS || (batch_ndim > 0 && !batch_shape))
		return td__error(TD_EINVAL, "%s: invalid batch shape (ndim %d)", fn, batch_ndim);
	for (i = 0; i < (uint32_t)batch_ndim; i++)
		if (batch_shape[i] < 0)
			return td__error(TD_EINVAL, "%s: negative batch size at dim %u", fn, i);
	TD_TRY(td__batch_check_numel(batch_ndim, batch_shape, fn));
	if (d->parent)
		TD_TRY(td__dict_check_batch(d->parent, batch_ndim, batch_shape, "the dict", fn));
	probe.batch_ndim = batch_ndim;
	if (batch_ndim)
		memcpy(probe.batch_shape, batch_shape, (size_t)batch_ndim * sizeof(int64_t));
	for (i = 0; i < d->used; i++) {
		const td__entry *e = &d->entries[i];
		const int64_t *shape;
		int ndim;

		if (td__entry_live(e) && value_shape(&e->value, &ndim, &shape))
			TD_TRY(td__dict_check_batch(&probe, ndim, shape, td__entry_key(e), fn));
	}
	d->batch_ndim = batch_ndim;
	if (batch_ndim)
		memcpy(d->batch_shape, batch_shape, (size_t)batch_ndim * sizeof(int64_t));
	td__dict_touch(d);
	return TD_OK;
}

/* ------------------------------------------------------------------------ */
/* Paths                                                                     */
/* ------------------------------------------------------------------------ */

td__entry *td__dict_lookup_quiet(const td_dict *d, const td__kref *parts, size_t n,
	td_dict **parent_out)
{
	size_t i;

	for (i = 0;; i++) {
		td__entry *e = td__dict_find(d, parts[i].s, parts[i].len, parts[i].hash);
		if (!e)
			return NULL;
		if (i == n - 1) {
			if (parent_out)
				*parent_out = (td_dict *)d;
			return e;
		}
		if (e->value.kind != TD_VALUE_DICT)
			return NULL;
		d = e->value.dict;
	}
}

/* TD_ENOTSUP: component i of the path is a lazy stack and the path goes on into it. */
static int lazy_on_path(const td__kref *parts, size_t n, size_t i, const char *fn)
{
	char path[512], stack[512];

	td__kpath_format(path, sizeof(path), parts, n);
	td__kpath_format(stack, sizeof(stack), parts, i + 1);
	return td__error(TD_ENOTSUP,
		"%s: key '%s' lies inside the lazy stack '%s', whose values "
		"are made by stacking, not stored: %s does not reach into it (td_lazy_get_tensor() "
		"and td_lazy_get_dict() read such a path; td_dict_set_*(), td_dict_del() and "
		"td_dict_contains() reach through the stack)",
		fn, path, stack, fn);
}

const td_dict *td__dict_lazy_prefix(const td_dict *d, const td__kref *parts, size_t n, size_t *used)
{
	size_t i;

	for (i = 0; i + 1 < n; i++) {
		const td__entry *e;

		if (td__dict_is_lazy(d))
			break;
		e = td__dict_find(d, parts[i].s, parts[i].len, parts[i].hash);
		if (!e || e->value.kind != TD_VALUE_DICT)
			return NULL;
		d = e->value.dict;
	}
	if (!td__dict_is_lazy(d) || i == 0 || i >= n)
		return NULL;
	*used = i;
	return d;
}

int td__dict_lookup(const td_dict *d, const td__kref *parts, size_t n, td__entry **out,
	td_dict **parent_out, const char *fn)
{
	char path[512];
	size_t i;

	*out = td__dict_lookup_quiet(d, parts, n, parent_out);
	if (*out)
		return TD_OK;
	/* Walk again to say which component failed. */
	for (i = 0; i < n; i++) {
		const td__entry *e = td__dict_find(d, parts[i].s, parts[i].len, parts[i].hash);
		if (!e) {
			/* A lazy stack has no entries: the path went on into one. */
			if (TD_UNLIKELY(i > 0 && td__dict_is_lazy(d)))
				return lazy_on_path(parts, n, i - 1, fn);
			td__kpath_format(path, sizeof(path), parts, n);
			if (n == 1)
				return td__error(TD_ENOTFOUND, "%s: key '%s' not found", fn, path);
			return td__error(TD_ENOTFOUND, "%s: key '%s' not found ('%.*s' is missing)", fn, path,
				(int)parts[i].len, parts[i].s);
		}
		if (e->value.kind != TD_VALUE_DICT) {
			td__kpath_format(path, sizeof(path), parts, n);
			return td__error(TD_ETYPE, "%s: key '%s': '%.*s' is not a dict", fn, path,
				(int)parts[i].len, parts[i].s);
		}
		d = e->value.dict;
	}
	return td__error(TD_ERROR, "%s: lookup failed", fn);
}

void td__dict_undo(td__undo *undo)
{
	if (undo->dict)
		td__dict_remove_slot(undo->dict, undo->slot);
	undo->dict = NULL;
}

/* Append a new empty child dict named `part` to `d`. */
static int add_child(td_dict *d, const td__kref *part, td_dict **child_out, const char *fn)
{
	td_value v;
	td_dict *c;
	int rc;

	if (td__dict_depth(d) + 1 >= TD_KEY_MAX_DEPTH)
		return td__error(TD_EINVAL, "%s: dicts cannot nest deeper than %d levels", fn,
			TD_KEY_MAX_DEPTH);
	TD_TRY(td__dict_alloc(&c, d->batch_ndim, d->batch_shape, 1, fn));
	v.kind = TD_VALUE_DICT;
	v.dict = c;
	rc = td__dict_append(d, part, &v, fn);
	if (rc < 0) {
		td_dict_free(c);
		return rc;
	}
	c->parent = d;
	*child_out = c;
	return TD_OK;
}

int td__dict_walk(td_dict *d, const td__kref *parts, size_t n, td__undo *undo, td_dict **parent_out,
	const char *fn)
{
	char path[512];
	size_t i;
	int rc;

	if (undo)
		undo->dict = NULL;
	for (i = 0; i + 1 < n; i++) {
		td__entry *e = td__dict_find(d, parts[i].s, parts[i].len, parts[i].hash);

		if (e && e->value.kind == TD_VALUE_DICT) {
			d = e->value.dict;
			/* A walk entering a lazy stack (nothing is stored in one). */
			if (TD_UNLIKELY(td__dict_is_lazy(d))) {
				if (undo)
					td__dict_undo(undo);
				return lazy_on_path(parts, n, i, fn);
			}
			continue;
		}
		if (!e && undo && !d->locked) {
			td_dict *child = NULL;
			rc = add_child(d, &parts[i], &child, fn);
			if (rc == TD_OK) {
				if (!undo->dict) {
					undo->dict = d;
					undo->slot = d->used - 1;
				}
				d = child;
				continue;
			}
		} else {
			/* Only now format the path: the message needs it. */
			td__kpath_format(path, sizeof(path), parts, n);
			if (e)
				rc = td__error(TD_ETYPE, "%s: key '%s': '%.*s' is not a dict", fn, path,
					(int)parts[i].len, parts[i].s);
			else if (!undo)
				rc = td__error(TD_ENOTFOUND, "%s: key '%s' not found ('%.*s' is missing)", fn, path,
					(int)parts[i].len, parts[i].s);
			else
				rc = td__error(TD_ELOCKED, "%s: cannot add '%s': the dict is locked", fn, path);
		}
		if (undo)
			td__dict_undo(undo);
		return rc;
	}
	*parent_out = d;
	return TD_OK;
}

/* Check that a dict value fits under `parent` (batch, nesting, cycles). */
static int check_child(td_dict *parent, td_dict *child, const td__kref *last, const char *fn)
{
	const td_dict *p;
	char key[256];

	if (child->parent) {
		td__kpath_format(key, sizeof(key), last, 1);
		return td__error(TD_EINVAL, "%s: '%s': the dict already belongs to another dict", fn, key);
	}
	for (p = parent; p; p = p->parent) {
		if (p == child) {
			td__kpath_format(key, sizeof(key), last, 1);
			return td__error(TD_EINVAL, "%s: '%s': a dict cannot contain itself", fn, key);
		}
	}
	if (child->batch_ndim < parent->batch_ndim ||
		memcmp(child->batch_shape, parent->batch_shape,
			(size_t)parent->batch_ndim * sizeof(int64_t)) != 0) {
		td__kpath_format(key, sizeof(key), last, 1);
		return td__dict_check_batch(parent, child->batch_ndim, child->batch_shape, key, fn);
	}
	if (td__dict_depth(parent) + td__dict_height(child) >= TD_KEY_MAX_DEPTH) {
		td__kpath_format(key, sizeof(key), last, 1);
		return td__error(TD_EINVAL, "%s: '%s': dicts cannot nest deeper than %d levels", fn, key,
			TD_KEY_MAX_DEPTH);
	}
	return TD_OK;
}

static int check_value(td_dict *parent, const td_value *v, const td__kref *last, const char *fn)
{
	char key[256];

	if (v->kind == TD_VALUE_TENSOR) {
		const td_tensor *t = &v->tensor;
		if (TD_LIKELY(t->ndim >= parent->batch_ndim &&
				td__shape_eq(td_tensor_shape(t), parent->batch_shape, parent->batch_ndim)))
			return TD_OK;
		td__kpath_format(key, sizeof(key), last, 1);
		return td__dict_check_batch(parent, t->ndim, td_tensor_shape(t), key, fn);
	}
	if (v->kind == TD_VALUE_DICT)
		return check_child(parent, v->dict, last, fn);
	if (v->kind == TD_VALUE_STRINGS) {
		const td_strings *s = v->strings;
		if (s->ndim >= parent->batch_ndim &&
			td__shape_eq(s->shape, parent->batch_shape, parent->batch_ndim))
			return TD_OK;
		td__kpath_format(key, sizeof(key), last, 1);
		return td__dict_check_batch(parent, s->ndim, s->shape, key, fn);
	}
	return TD_OK;
}

/* Store `v` in an existing entry of `parent`. */
static int replace_value(td_dict *parent, td__entry *e, const td_value *v, const char *fn)
{
	const char *key = td__entry_key(e);

	td_value old;

	if (parent->locked) {
		if (e->value.kind == TD_VALUE_TENSOR && v->kind == TD_VALUE_TENSOR)
			return td_tensor_copy(&e->value.tensor, &v->tensor);
		return td__error(TD_ELOCKED, "%s: cannot replace '%s': the dict is locked", fn, key);
	}
	old = e->value;
	if (old.kind != TD_VALUE_TENSOR || v->kind != TD_VALUE_TENSOR)
		td__dict_touch(parent); /* a kind change or another dict */
	td__value_assign(&e->value, v);
	if (v->kind == TD_VALUE_TENSOR)
		td__tensor_hold(&v->tensor);
	else if (v->kind == TD_VALUE_DICT)
		v->dict->parent = parent;
	else if (v->kind == TD_VALUE_STRINGS)
		td_buffer_ref(v->strings->buffer);
	else
		td_buffer_ref(v->blob.buffer);
	td__value_release(&old);
	return TD_OK;
}

int td__dict_set_entry(td_dict *parent, td__entry *e, const td__kref *last, const td_value *v,
	const char *fn)
{
	TD_TRY(check_value(parent, v, last, fn));
	return replace_value(parent, e, v, fn);
}

int td__dict_set_value(td_dict *d, const td__kref *parts, size_t n, const td_value *v,
	const char *fn)
{
	const td__kref *last = &parts[n - 1];
	char key[512];
	td_dict *parent;
	td__undo undo;
	td__entry *e;
	int rc;

	TD_TRY(td__dict_walk(d, parts, n, &undo, &parent, fn));
	rc = check_value(parent, v, last, fn);
	if (rc < 0)
		goto fail;
	e = td__dict_find(parent, last->s, last->len, last->hash);
	if (e)
		return replace_value(parent, e, v, fn);
	if (parent->locked) {
		td__kpath_format(key, sizeof(key), parts, n);
		rc = td__error(TD_ELOCKED, "%s: cannot add '%s': the dict is locked", fn, key);
		goto fail;
	}
	rc = td__dict_append(parent, last, v, fn);
	if (rc < 0)
		goto fail;
	if (v->kind == TD_VALUE_TENSOR)
		td__tensor_hold(&v->tensor);
	else if (v->kind == TD_VALUE_DICT)
		v->dict->parent = parent;
	else if (v->kind == TD_VALUE_STRINGS)
		td_buffer_ref(v->strings->buffer);
	else
		td_buffer_ref(v->blob.buffer);
	return TD_OK;
fail:
	td__dict_undo(&undo);
	return rc;
}
