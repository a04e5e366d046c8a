/* SPDX-License-Identifier: MIT */
/*
 * lazy_schema.c - the cached schema of a lazy stack of dense children.
 *
 * Without it every read of a lazy stack resolves its keys again in every
 * child: a nested iteration over the 19-level benchmark chain stacked 10
 * times probed about 400 small dicts and made 19 sub-stacks per call, and a
 * get of a 20-component key walked 200 dicts. The schema holds, per level,
 * the keys every child has with the n children's entries (and for sub-dicts
 * a ready lazy stack of them), so keys, membership, gets and sets walk one
 * small tree instead.
 *
 * Validity: every dense dict has a generation that structural changes bump
 * on the dict and its ancestors (td__dict_touch()). The schema is valid
 * while the sum of the children's generations equals the stamp it was built
 * for: a check of n loads. Generations only grow, so the sum cannot return
 * to an old value. A stack that owns its children is their ancestor, so its
 * own generation serves: one load (STAMP_OWN).
 *
 * Threads: concurrent readers are safe (the dict rule). The first reader
 * that finds the stamp stale builds the schema under the stack's `building`
 * flag, publishes the pointer and then the stamp (release); readers read the
 * pointer only after seeing a matching stamp (acquire). A stale schema can
 * only be replaced after a structural change of a child, which the dict
 * rule forbids while any thread reads the stack, so no reader still uses it
 * when it is freed.
 */
#include "td_internal.h"
#include "dict_impl.h"
#include "lazy_impl.h"
#include "buffer_impl.h"

#include <sched.h>
#include <stddef.h>

/* The schema's memory: chunks handed out by a bump pointer, freed at once. */
typedef struct td__lz_chunk {
	struct td__lz_chunk *next;
	size_t used, cap;
	max_align_t data[];
} td__lz_chunk;

#define CHUNK_MIN 4096

static void *arena(td__lz_schema *s, size_t size)
{
	td__lz_chunk *c = s->chunks;
	size_t cap, bytes;
	void *p;

	size = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	if (!c || c->cap - c->used < size) {
		cap = size > CHUNK_MIN ? size : CHUNK_MIN;
		if (!td__add_size(sizeof(*c), cap, &bytes))
			return NULL;
		c = td__malloc(bytes);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		c->next = s->chunks;
		s->chunks = c;
	}
	p = (char *)c->data + c->used;
	c->used += size;
	return p;
}

static void *arena_array(td__lz_schema *s, size_t n, size_t size)
{
	size_t bytes;

	if (!td__mul_size(n, size, &bytes))
		return NULL;
	return arena(s, bytes ? bytes : 1);
}

static void free_node(td__lz_node *node)
{
	size_t i;

	for (i = 0; i < node->nkeys; i++)
		if (node->keys[i].sub)
			free_node(node->keys[i].sub);
	td_dict_free(node->stack);
}

void td__lz_free(td__lz_schema *s)
{
	td__lz_chunk *c, *next;

	if (!s)
		return;
	free_node(&s->root);
	for (c = s->chunks; c; c = next) {
		next = c->next;
		td__free(c);
	}
	td__free(s);
}

/* Fill `node` from the n dicts `dicts` (child 0 gives the key order). false: no schema. */
static bool build_node(td__lz_schema *s, td__lz_node *node, td_dict *const *dicts, size_t n,
	int dim, int depth)
{
	const td_dict *src = dicts[0];
	uint32_t j;
	size_t i;

	node->dicts = dicts;
	node->nkeys = 0;
	node->keys = arena_array(s, src->count, sizeof(*node->keys));
	if (!node->keys)
		return false;
	for (j = 0; j < src->used; j++) {
		const td__entry *e = &src->entries[j];
		td__lz_key *k = &node->keys[node->nkeys];
		bool is_dict;

		if (!td__entry_live(e))
			continue;
		is_dict = e->value.kind == TD_VALUE_DICT;
		k->src = e;
		k->kind = (int)e->value.kind;
		k->all_tensor = e->value.kind == TD_VALUE_TENSOR;
		k->sub = NULL;
		k->ent = arena_array(s, n, sizeof(*k->ent));
		if (!k->ent)
			return false;
		k->ent[0] = e;
		for (i = 1; i < n; i++) {
			const td__entry *f = td__dict_find(dicts[i], td__entry_key(e), e->klen, e->hash);

			if (!f || (f->value.kind == TD_VALUE_DICT) != is_dict)
				break;
			k->all_tensor = k->all_tensor && f->value.kind == TD_VALUE_TENSOR;
			k->ent[i] = f;
		}
		if (i < n)
			continue; /* not a key of the stack */
		if (is_dict) {
			td_dict **subs = arena_array(s, n, sizeof(*subs));
			const td_dict *s0 = e->value.dict;
			td_dict *stack;

			if (!subs || depth + 1 >= TD_KEY_MAX_DEPTH)
				return false;
			for (i = 0; i < n; i++) {
				subs[i] = k->ent[i]->value.dict;
				/* A lazy stack nested in a child has no entries to cache:
				 * no schema, the general paths read through it. */
				if (subs[i]->lazy)
					return false;
				if (subs[i]->batch_ndim != s0->batch_ndim ||
					!td__shape_eq(subs[i]->batch_shape, s0->batch_shape, s0->batch_ndim))
					return false; /* td__lazy_get_dict() reports it */
			}
			k->sub = arena(s, sizeof(*k->sub));
			if (!k->sub)
				return false;
			memset(k->sub, 0, sizeof(*k->sub));
			if (td__lazy_alloc(&stack, n, dim, s0->batch_ndim, s0->batch_shape, "td_lazy") < 0)
				return false;
			memcpy(stack->lazy->child, subs, n * sizeof(*subs));
			k->sub->stack = stack;
			if (!build_node(s, k->sub, subs, n, dim, depth + 1)) {
				/* Counted, so that td__lz_free() frees the sub-stacks made. */
				node->nkeys++;
				return false;
			}
		}
		node->nkeys++;
	}
	return true;
}

static td__lz_schema *build(const td_dict *d)
{
	const td__lazy *z = d->lazy;
	td__lz_schema *s;
	size_t i;

	if (z->n == 0)
		return NULL;
	s = td__malloc(sizeof(*s));
	if (!s)
		return NULL;
	memset(s, 0, sizeof(*s));
	for (i = 0; i < TD_LZ_MEMO; i++) {
		atomic_init(&s->memo[i].id, 0);
		atomic_init(&s->memo[i].ready, false);
	}
	if (!build_node(s, &s->root, z->child, z->n, z->dim, 0)) {
		td__lz_free(s);
		return NULL;
	}
	return s;
}

/*
 * The stamp of a stack that owns all its children: STAMP_OWN and the
 * stack's own generation. Owned children have the stack as parent, so a
 * structural change at any depth of any of them bumps it too
 * (td__dict_touch() walks up the parents): one load instead of n. The
 * stamp of other stacks is the sum of their children's generations, which
 * stays below STAMP_OWN. The initial stamp, UINT64_MAX, matches neither.
 */
#define STAMP_OWN (UINT64_C(1) << 63)

/* Build the schema again (or find it built by another reader) for the current stamp. */
static __attribute__((noinline)) const td__lz_schema *refresh(const td_dict *d)
{
	td__lazy *z = d->lazy;
	td__lz_schema *old, *fresh;
	uint64_t sum = 0, now;
	bool own = true;
	size_t i;

	for (i = 0; i < z->n; i++) {
		const td_dict *c = z->child[i];

		if (c->lazy != NULL)
			return NULL;
		sum += c->gen;
		own = own && c->parent == d;
	}
	now = own && z->n > 0 ? STAMP_OWN | d->gen : sum;
	while (atomic_flag_test_and_set_explicit(&z->building, memory_order_acquire))
		sched_yield();
	if (atomic_load_explicit(&z->stamp, memory_order_relaxed) == now) {
		/* Another reader built it meanwhile. */
		atomic_flag_clear_explicit(&z->building, memory_order_release);
		return z->schema;
	}
	old = z->schema;
	fresh = build(d);
	z->schema = fresh;
	atomic_store_explicit(&z->stamp, now, memory_order_release);
	atomic_flag_clear_explicit(&z->building, memory_order_release);
	td__lz_free(old);
	return fresh;
}

const td__lz_schema *td__lz_get(const td_dict *d)
{
	td__lazy *z = d->lazy;
	uint64_t st = atomic_load_explicit(&z->stamp, memory_order_acquire), sum = 0;
	size_t i;

	if (st & STAMP_OWN) {
		if (TD_LIKELY(st == (STAMP_OWN | d->gen)))
			return z->schema;
		return refresh(d);
	}
	/* A schema was built for these children: none is lazy (that never changes). */
	for (i = 0; i < z->n; i++)
		sum += z->child[i]->gen;
	if (TD_LIKELY(st == sum))
		return z->schema;
	return refresh(d);
}

const td__lz_key *td__lz_find(const td__lz_schema *s, const td__kref *parts, size_t n,
	const td__lz_node **node_out)
{
	const td__lz_node *node = &s->root;
	const td__lz_key *k = NULL;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!node)
			return NULL;
		if (node_out)
			*node_out = node;
		k = td__lz_node_find(node, &parts[i]);
		if (!k)
			return NULL;
		node = k->sub;
	}
	return k;
}

const td__lz_key *td__lz_find_key(const td__lz_schema *s, const td__kref *parts, size_t n,
	const td_key *key, const td__lz_node **node_out)
{
	/* The memo is the one part of a schema that readers write (atomically). */
	td__lz_memo *memo = ((td__lz_schema *)s)->memo;
	const td__lz_node *node = NULL;
	const td__lz_key *k;
	uint64_t id, none;
	size_t i;

	if (!key)
		return td__lz_find(s, parts, n, node_out);
	for (i = 0; i < TD_LZ_MEMO; i++) {
		id = atomic_load_explicit(&memo[i].id, memory_order_acquire);
		if (id == key->id) {
			if (!atomic_load_explicit(&memo[i].ready, memory_order_acquire))
				break; /* another reader is filling it */
			if (node_out)
				*node_out = memo[i].node;
			return memo[i].key;
		}
		if (id != 0)
			continue;
		none = 0;
		if (!atomic_compare_exchange_strong_explicit(&memo[i].id, &none, key->id,
				memory_order_acq_rel, memory_order_acquire)) {
			if (none == key->id)
				break; /* claimed for this handle meanwhile */
			continue;
		}
		k = td__lz_find(s, parts, n, &node);
		memo[i].key = k;
		memo[i].node = node;
		atomic_store_explicit(&memo[i].ready, true, memory_order_release);
		if (node_out)
			*node_out = node;
		return k;
	}
	return td__lz_find(s, parts, n, node_out);
}

int td__lz_stack(td_tensor *out, const td__entry *const *ent, size_t n, int dim,
	const int64_t *step, td_buffer **spare, const char *fn)
{
	const td_tensor *t0 = &ent[0]->value.tensor;
	const int ond = t0->ndim + 1; /* at most TD_TENSOR_INLINE_DIMS (the caller's check) */
	int64_t bs[TD_MAX_DIMS], ss[TD_MAX_DIMS], ds[TD_MAX_DIMS], es, stride;
	size_t i, isz = td__itemsize(t0->dtype), nbytes;
	const int64_t *strides = NULL;
	int64_t *osh, *ost;
	td_buffer *buf;
	char *dst;
	int k, j, nd = 0;

	/* t0 is valid, so its byte size is; n times it is checked. */
	if (n > (size_t)INT64_MAX ||
		!td__mul_size((size_t)td__numel(t0->ndim, td__ishape(t0)) * isz, n, &nbytes) ||
		nbytes > (size_t)PTRDIFF_MAX - TD_BUFFER_HEADER_SIZE)
		return td__error(TD_EOVERFLOW, "%s: %zu stacked leaves of %zu bytes are too large", fn, n,
			(size_t)td__numel(t0->ndim, td__ishape(t0)) * isz);
	if (spare && *spare && (*spare)->nbytes == nbytes) {
		buf = *spare; /* the caller's, unshared: taken over */
		*spare = NULL;
	} else {
		TD_TRY(td_buffer_new(&buf, nbytes, 0));
	}
	/* The result: t0's shape with n inserted at `dim`, contiguous (inline dims). */
	out->buffer = buf;
	out->offset = 0;
	out->dtype = t0->dtype;
	out->ndim = ond;
	osh = td__ishape_w(out);
	ost = td__istrides_w(out);
	for (k = 0, j = 0; k < ond; k++)
		osh[k] = k == dim ? (int64_t)n : td__ishape(t0)[j++];
	for (k = ond - 1, es = 1; k >= 0; k--) {
		ost[k] = es;
		es *= osh[k] > 1 ? osh[k] : 1;
	}
	if (nbytes == 0)
		return TD_OK;
	dst = buf->data;
	if (step) {
		/* Evenly spaced views of one buffer: their stack is a strided view
		 * of it (step at the stack dim), copied as one block; one memcpy
		 * when that view is laid out as the result is. */
		bool dense = true;

		for (k = 0, j = 0; k < ond; k++) {
			bs[k] = td__ishape(out)[k];
			ds[k] = td__istrides(out)[k] * (int64_t)isz;
			ss[k] = (k == dim ? *step : td__istrides(t0)[j++]) * (int64_t)isz;
			dense = dense && (bs[k] == 1 || ss[k] == ds[k]);
		}
		if (dense) {
			memcpy(dst, td__tensor_ptr(t0), nbytes);
			return TD_OK;
		}
		nd = td__coalesce_dims(ond, bs, ss, ds);
		td__copy_block(dst, ds, td__tensor_ptr(t0), ss, bs, nd, isz);
		return TD_OK;
	}
	/* One block per child; its layout is worked out again only when its
	 * strides differ from the previous child's. */
	stride = td__istrides(out)[dim] * (int64_t)isz;
	for (i = 0; i < n; i++) {
		const td_tensor *x = &ent[i]->value.tensor;

		if (!strides || !td__shape_eq(td__istrides(x), strides, x->ndim)) {
			for (k = 0, j = 0; k < ond; k++)
				if (k != dim)
					ds[j++] = td__istrides(out)[k] * (int64_t)isz;
			for (k = 0; k < x->ndim; k++) {
				bs[k] = td__ishape(x)[k];
				ss[k] = td__istrides(x)[k] * (int64_t)isz;
			}
			nd = td__coalesce_dims(x->ndim, bs, ss, ds);
			strides = td__istrides(x);
		}
		td__copy_block(dst + (int64_t)i * stride, ds, td__tensor_ptr(x), ss, bs, nd, isz);
	}
	return TD_OK;
}
