/* SPDX-License-Identifier: MIT */
/*
 * dict_key.c - key strings (hashed, shared by reference), key paths from
 * dotted strings and arrays, and precompiled key handles (td_key).
 */
#include "td_internal.h"
#include "dict_impl.h"

#include <stdio.h>

uint64_t td__hash(const char *s, size_t len)
{
	uint64_t h = TD_HASH_INIT;
	size_t i;

	for (i = 0; i < len; i++)
		h = td__hash_step(h, (unsigned char)s[i]);
	return td__hash_finish(h);
}

td__kstr *td__kstr_new(const char *s, size_t len, uint64_t hash)
{
	td__kstr *k;

	if (len >= UINT32_MAX)
		return NULL;
	k = td__alloc_small(sizeof(*k) + len + 1);
	if (!k)
		return NULL;
	atomic_init(&k->refs, 1);
	k->len = (uint32_t)len;
	k->hash = hash;
	memcpy(k->data, s, len);
	k->data[len] = '\0';
	return k;
}

void td__kstr_unref(td__kstr *k)
{
	if (k && atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) == 1)
		td__free_small(k, sizeof(*k) + k->len + 1);
}

int td__kpath_dotted(td__kpath *p, const char *dotted, const char *fn)
{
	const char *s = dotted, *c;
	size_t n = 0;

	if (!dotted)
		return td__error(TD_EINVAL, "%s: NULL key", fn);
	for (;;) {
		size_t len;

		if (n == TD_KEY_MAX_DEPTH)
			return td__error(TD_EINVAL, "%s: key '%.64s...' is deeper than %d", fn, dotted,
				TD_KEY_MAX_DEPTH);
		c = td__kref_scan(s, &p->part[n]);
		len = (size_t)(c - s);
		if (len == 0)
			return td__error(TD_EINVAL, "%s: key '%s' has an empty component", fn, dotted);
		if (len >= UINT32_MAX)
			return td__error(TD_EINVAL, "%s: key component too long", fn);
		n++;
		if (!*c)
			break;
		s = c + 1;
	}
	p->n = n;
	return TD_OK;
}

int td__kpath_parts(td__kpath *p, const char *const *parts, size_t n, const char *fn)
{
	size_t i;

	if (!parts || n == 0)
		return td__error(TD_EINVAL, "%s: empty key path", fn);
	if (n > TD_KEY_MAX_DEPTH)
		return td__error(TD_EINVAL, "%s: key path of %zu components is deeper than %d", fn, n,
			TD_KEY_MAX_DEPTH);
	for (i = 0; i < n; i++) {
		uint64_t h = TD_HASH_INIT;
		const char *c;

		if (!parts[i])
			return td__error(TD_EINVAL, "%s: key path component %zu is NULL", fn, i);
		/* One pass: the length and the hash together. */
		for (c = parts[i]; *c; c++)
			h = td__hash_step(h, (unsigned char)*c);
		if ((size_t)(c - parts[i]) >= UINT32_MAX)
			return td__error(TD_EINVAL, "%s: key component too long", fn);
		p->part[i].s = parts[i];
		p->part[i].len = (uint32_t)(c - parts[i]);
		p->part[i].hash = td__hash_finish(h);
	}
	p->n = n;
	return TD_OK;
}

int td__kpath_key(td__kpath *p, const td_key *key, const char *fn)
{
	if (!key)
		return td__error(TD_EINVAL, "%s: NULL key handle", fn);
	p->n = key->n;
	memcpy(p->part, key->part, key->n * sizeof(td__kref));
	return TD_OK;
}

char *td__kpath_format(char *buf, size_t len, const td__kref *parts, size_t n)
{
	size_t pos = 0, i;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	for (i = 0; i < n && pos + 1 < len; i++) {
		int w = snprintf(buf + pos, len - pos, "%s%.*s", i ? "." : "", (int)parts[i].len,
			parts[i].s);
		if (w < 0)
			break;
		pos += (size_t)w;
	}
	return buf;
}

/* ------------------------------------------------------------------------ */
/* Key handles                                                               */
/* ------------------------------------------------------------------------ */

/* Key handle ids: unique (64 bits never wrap), 0 is never one. */
static _Atomic uint64_t next_key_id = 1;

static int key_from_kpath(td_key **out, const td__kpath *p)
{
	size_t total = 0, i;
	td_key *k;
	char *s;

	for (i = 0; i < p->n; i++)
		total += (size_t)p->part[i].len + 1;
	k = td__malloc(sizeof(*k) + p->n * sizeof(td__kref));
	if (!k)
		return td__error_nomem(sizeof(*k) + p->n * sizeof(td__kref));
	k->strings = td__malloc(total);
	if (!k->strings) {
		td__free(k);
		return td__error_nomem(total);
	}
	k->n = p->n;
	k->id = atomic_fetch_add_explicit(&next_key_id, 1, memory_order_relaxed);
	s = k->strings;
	for (i = 0; i < p->n; i++) {
		memcpy(s, p->part[i].s, p->part[i].len);
		s[p->part[i].len] = '\0';
		k->part[i] = p->part[i];
		k->part[i].s = s;
		s += p->part[i].len + 1;
	}
	*out = k;
	return TD_OK;
}

int td_key_new(td_key **out, const char *dotted)
{
	td__kpath p;

	if (!out)
		return td__error(TD_EINVAL, "td_key_new: NULL out");
	*out = NULL;
	TD_TRY(td__kpath_dotted(&p, dotted, "td_key_new"));
	return key_from_kpath(out, &p);
}

int td_key_from_path(td_key **out, const char *const *parts, size_t n)
{
	td__kpath p;

	if (!out)
		return td__error(TD_EINVAL, "td_key_from_path: NULL out");
	*out = NULL;
	TD_TRY(td__kpath_parts(&p, parts, n, "td_key_from_path"));
	return key_from_kpath(out, &p);
}

void td_key_free(td_key *key)
{
	if (!key)
		return;
	td__free(key->strings);
	td__free(key);
}

size_t td_key_depth(const td_key *key)
{
	return key ? key->n : 0;
}

const char *td_key_part(const td_key *key, size_t i)
{
	if (!key || i >= key->n)
		return NULL;
	return key->part[i].s;
}
