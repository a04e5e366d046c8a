/* SPDX-License-Identifier: MIT */
/*
 * dictname.c - dict calls under one key component that a dotted key may
 * not spell (dictname.h). Names read from files are nearly always plain,
 * and the dotted form then costs no allocation; the others get a key
 * handle made for the call.
 */
#include "dictname.h"

/*
 * Whether the dotted form spells `name` as one component: not empty, no
 * '.'. A NULL name goes to the dotted form too, which reports it.
 */
static bool plain(const char *name)
{
	return !name || (name[0] != '\0' && strchr(name, '.') == NULL);
}

/* A key handle of the one component `name` (owned: td_key_free()). */
static int name_key(td_key **out, const char *name)
{
	return td_key_from_path(out, &name, 1);
}

int td__dictname_key(td_key **out, const char *name)
{
	*out = NULL;
	return plain(name) ? TD_OK : name_key(out, name);
}

int td__dictname_get(const td_value **out, const td_dict *d, const char *name)
{
	td_key *k;
	int rc;

	if (plain(name))
		return td_dict_get(out, d, name);
	TD_TRY(name_key(&k, name));
	rc = td_dict_get_key(out, d, k);
	td_key_free(k);
	return rc;
}

int td__dictname_set_tensor_take(td_dict *d, const char *name, td_tensor *t)
{
	td_key *k;
	int rc;

	if (plain(name))
		return td_dict_set_tensor_take(d, name, t);
	TD_TRY(name_key(&k, name));
	rc = td_dict_set_tensor_take_key(d, k, t);
	td_key_free(k);
	return rc;
}

int td__dictname_set_dict(td_dict *d, const char *name, const td_dict *child)
{
	td_key *k;
	int rc;

	if (plain(name))
		return td_dict_set_dict(d, name, child);
	TD_TRY(name_key(&k, name));
	rc = td_dict_set_dict_key(d, k, child);
	td_key_free(k);
	return rc;
}

int td__dictname_set_dict_take(td_dict *d, const char *name, td_dict *child)
{
	td_key *k;
	int rc;

	if (plain(name))
		return td_dict_set_dict_take(d, name, child);
	TD_TRY(name_key(&k, name));
	rc = td_dict_set_dict_take_key(d, k, child);
	td_key_free(k);
	return rc;
}

int td__dictname_set_string(td_dict *d, const char *name, const char *utf8)
{
	td_key *k;
	int rc;

	if (plain(name))
		return td_dict_set_string(d, name, utf8);
	TD_TRY(name_key(&k, name));
	rc = td_dict_set_string_key(d, k, utf8);
	td_key_free(k);
	return rc;
}

int td__dictname_set_strings(td_dict *d, const char *name, int ndim, const int64_t *shape,
	const char *const *utf8)
{
	td_key *k;
	int rc;

	if (plain(name))
		return td_dict_set_strings(d, name, ndim, shape, utf8);
	TD_TRY(name_key(&k, name));
	rc = td_dict_set_strings_key(d, k, ndim, shape, utf8);
	td_key_free(k);
	return rc;
}

int td__dictname_del(td_dict *d, const char *name)
{
	td_key *k;
	int rc;

	if (plain(name))
		return td_dict_del(d, name);
	TD_TRY(name_key(&k, name));
	rc = td_dict_del_key(d, k);
	td_key_free(k);
	return rc;
}
