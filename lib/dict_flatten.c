/* SPDX-License-Identifier: MIT */
/*
 * dict_flatten.c - flatten_keys / unflatten_keys: nested keys joined with a
 * separator into flat keys, and back.
 */
#include "td_internal.h"
#include "dict_impl.h"

/* TD_ENOTSUP: the lazy stack under `key`, nested in the dict, has no stored leaves to move. */
static int lazy_refused(const char *key, const char *fn)
{
	return td__error(TD_ENOTSUP,
		"%s: '%s' is a lazy stack: its leaves are made by stacking, "
		"not stored, and cannot be re-keyed (td_lazy_densify() makes a dense copy)",
		fn, key);
}

/* Append leaf `v` of `out` under `prefix<sep>key` (prefix may be empty). */
static int flatten_rec(td_dict *out, const td_dict *d, char *buf, size_t len, size_t cap,
	const char *sep, size_t seplen, const char *fn)
{
	uint32_t i;

	for (i = 0; i < d->used; i++) {
		const td__entry *e = &d->entries[i];
		size_t klen;

		if (!td__entry_live(e))
			continue;
		if (len + (len ? seplen : 0) + e->klen + 1 > cap)
			return td__error(TD_EINVAL, "%s: a flattened key is longer than %zu bytes", fn,
				cap - 1);
		klen = len;
		if (len) {
			memcpy(buf + klen, sep, seplen);
			klen += seplen;
		}
		memcpy(buf + klen, td__entry_key(e), e->klen);
		klen += e->klen;
		buf[klen] = '\0';
		if (TD_UNLIKELY(td__value_is_stack(&e->value))) {
			return lazy_refused(buf, fn);
		} else if (e->value.kind == TD_VALUE_DICT) {
			TD_TRY(flatten_rec(out, e->value.dict, buf, klen, cap, sep, seplen, fn));
		} else {
			td__kref k;
			td_value v;
			int rc;

			k.s = buf;
			k.len = (uint32_t)klen;
			k.hash = td__hash(buf, klen);
			if (td__dict_find(out, buf, k.len, k.hash))
				return td__error(TD_EEXISTS, "%s: two keys flatten to '%s'", fn, buf);
			TD_TRY(td__value_share(&v, &e->value, fn));
			rc = td__dict_append(out, &k, &v, fn);
			if (rc < 0) {
				td__value_release(&v);
				return rc;
			}
		}
	}
	return TD_OK;
}

/* The longest flattened key of d's subtree, in bytes, and its leaf count. */
static size_t longest_key(const td_dict *d, size_t seplen, size_t *leaves)
{
	size_t best = 0;
	uint32_t i;

	for (i = 0; i < d->used; i++) {
		const td__entry *e = &d->entries[i];
		size_t len;

		if (!td__entry_live(e))
			continue;
		len = e->klen;
		if (e->value.kind == TD_VALUE_DICT)
			len += seplen + longest_key(e->value.dict, seplen, leaves);
		else
			(*leaves)++;
		if (len > best)
			best = len;
	}
	return best;
}

/* td__child_fn of td_dict_flatten_keys() / td_dict_unflatten_keys() (ctx: the separator). */
static int flatten_child(td_dict **out, const td_dict *child, void *ctx)
{
	return td_dict_flatten_keys(out, child, ctx);
}

static int unflatten_child(td_dict **out, const td_dict *child, void *ctx)
{
	return td_dict_unflatten_keys(out, child, ctx);
}

int td_dict_flatten_keys(td_dict **out, const td_dict *d, const char *sep)
{
	static const char fn[] = "td_dict_flatten_keys";
	char stackbuf[1024], *buf = stackbuf;
	size_t cap, seplen, leaves = 0;
	td_dict *nd;
	int rc;

	if (out)
		*out = NULL;
	if (!out || !d || !sep)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	if (!*sep)
		return td__error(TD_EINVAL, "%s: the separator is empty", fn);
	if (TD_UNLIKELY(td__dict_is_lazy(d))) /* each child flattened, into a new stack */
		return td__lazy_map_children(out, d, flatten_child, (void *)sep, fn);
	seplen = strlen(sep);
	/* Keys are at most 64 levels of strings each < 4 GiB: no overflow. */
	cap = longest_key(d, seplen, &leaves) + 1;
	if (leaves > UINT32_MAX / 4)
		return td__error(TD_EOVERFLOW, "%s: too many leaves", fn);
	if (cap > sizeof(stackbuf)) {
		buf = td__malloc(cap);
		if (!buf)
			return td__error_nomem(cap);
	}
	rc = td__dict_alloc(&nd, d->batch_ndim, d->batch_shape, (uint32_t)leaves, fn);
	if (rc == 0) {
		rc = flatten_rec(nd, d, buf, 0, cap, sep, seplen, fn);
		if (rc < 0)
			td_dict_free(nd);
		else
			*out = nd;
	}
	if (buf != stackbuf)
		td__free(buf);
	return rc;
}

/* Split `key` on `sep` into `p` (components borrowed from key). */
static int split_key(td__kpath *p, const td__entry *e, const char *sep, size_t seplen,
	const char *fn)
{
	const char *s = td__entry_key(e), *end = s + e->klen;
	size_t n = 0;

	for (;;) {
		const char *hit = seplen ? strstr(s, sep) : NULL;
		size_t len = hit ? (size_t)(hit - s) : (size_t)(end - s);

		if (len == 0)
			return td__error(TD_EINVAL, "%s: key '%s' has an empty component", fn,
				td__entry_key(e));
		if (n == TD_KEY_MAX_DEPTH)
			return td__error(TD_EINVAL, "%s: key '%s' is deeper than %d", fn, td__entry_key(e),
				TD_KEY_MAX_DEPTH);
		p->part[n].s = s;
		p->part[n].len = (uint32_t)len;
		p->part[n].hash = (hit || n) ? td__hash(s, len) : e->hash;
		n++;
		if (!hit)
			break;
		s = hit + seplen;
	}
	p->n = n;
	return TD_OK;
}

static int unflatten_rec(td_dict **out, const td_dict *d, const char *sep, size_t seplen,
	const char *fn);

/*
 * Merge the already unflattened dict `src` into `dst`; leaves must not
 * collide. Neither holds a lazy stack: unflatten_entry() refuses them.
 */
static int merge(td_dict *dst, const td_dict *src, const char *fn)
{
	uint32_t i;

	for (i = 0; i < src->used; i++) {
		const td__entry *e = &src->entries[i];
		td__entry *hit;
		td__kref k;
		td_value v;
		int rc;

		if (!td__entry_live(e))
			continue;
		hit = td__dict_find(dst, td__entry_key(e), e->klen, e->hash);
		if (hit) {
			if (hit->value.kind != TD_VALUE_DICT || e->value.kind != TD_VALUE_DICT)
				return td__error(TD_EEXISTS, "%s: '%s' is both a leaf and a prefix", fn,
					td__entry_key(e));
			TD_TRY(merge(hit->value.dict, e->value.dict, fn));
			continue;
		}
		TD_TRY(td__value_share(&v, &e->value, fn));
		k.s = td__entry_key(e);
		k.len = e->klen;
		k.hash = e->hash;
		rc = td__dict_set_value(dst, &k, 1, &v, fn);
		if (v.kind != TD_VALUE_DICT || rc < 0)
			td__value_release(&v);
		TD_TRY(rc);
	}
	return TD_OK;
}

/* Put one entry of the flat dict at its nested place in `nd`. */
static int unflatten_entry(td_dict *nd, const td__entry *e, const char *sep, size_t seplen,
	const char *fn)
{
	td_dict *parent;
	td__entry *existing;
	td__undo undo;
	td__kpath p;
	td_value v;
	int rc;

	if (TD_UNLIKELY(td__value_is_stack(&e->value)))
		return lazy_refused(td__entry_key(e), fn);
	TD_TRY(split_key(&p, e, sep, seplen, fn));
	rc = td__dict_walk(nd, p.part, p.n, &undo, &parent, fn);
	if (rc == TD_ETYPE)
		return td__error(TD_EEXISTS, "%s: '%s' needs a dict where a leaf already is", fn,
			td__entry_key(e));
	TD_TRY(rc);
	existing = td__dict_find(parent, p.part[p.n - 1].s, p.part[p.n - 1].len, p.part[p.n - 1].hash);
	if (e->value.kind == TD_VALUE_DICT) {
		v.kind = TD_VALUE_DICT;
		rc = unflatten_rec(&v.dict, e->value.dict, sep, seplen, fn);
	} else {
		rc = td__value_share(&v, &e->value, fn);
	}
	if (rc == 0 && existing) {
		/* Only two dicts may meet at one key: merge them. */
		if (existing->value.kind == TD_VALUE_DICT && v.kind == TD_VALUE_DICT)
			rc = merge(existing->value.dict, v.dict, fn);
		else
			rc = td__error(TD_EEXISTS, "%s: '%s' is both a leaf and a prefix", fn,
				td__entry_key(e));
		td__value_release(&v);
		if (rc < 0)
			td__dict_undo(&undo);
		return rc;
	}
	if (rc == 0) {
		rc = td__dict_set_value(parent, &p.part[p.n - 1], 1, &v, fn);
		if (v.kind == TD_VALUE_DICT) {
			if (rc < 0)
				td_dict_free(v.dict);
		} else {
			td__value_release(&v);
		}
	}
	if (rc < 0)
		td__dict_undo(&undo);
	return rc;
}

static int unflatten_rec(td_dict **out, const td_dict *d, const char *sep, size_t seplen,
	const char *fn)
{
	td_dict *nd;
	uint32_t i;
	int rc = 0;

	TD_TRY(td__dict_alloc(&nd, d->batch_ndim, d->batch_shape, d->count, fn));
	for (i = 0; i < d->used && rc == 0; i++)
		if (td__entry_live(&d->entries[i]))
			rc = unflatten_entry(nd, &d->entries[i], sep, seplen, fn);
	if (rc < 0) {
		td_dict_free(nd);
		return rc;
	}
	*out = nd;
	return TD_OK;
}

int td_dict_unflatten_keys(td_dict **out, const td_dict *d, const char *sep)
{
	static const char fn[] = "td_dict_unflatten_keys";

	if (out)
		*out = NULL;
	if (!out || !d || !sep)
		return td__error(TD_EINVAL, "%s: NULL argument", fn);
	*out = NULL;
	if (!*sep)
		return td__error(TD_EINVAL, "%s: the separator is empty", fn);
	if (TD_UNLIKELY(td__dict_is_lazy(d)))
		return td__lazy_map_children(out, d, unflatten_child, (void *)sep, fn);
	return unflatten_rec(out, d, sep, strlen(sep), fn);
}
