/* SPDX-License-Identifier: MIT */
/*
 * dictname.h - dict calls under one key component read from a file (a
 * directory name, a key index record): any string, which may hold '.' or
 * be empty, so that the dotted form of the public calls cannot always
 * spell it. A plain name goes through the dotted form; any other through
 * the `_key` form, with a handle made by td_key_from_path() for the call.
 * The errors are those of the call made (plus TD_ENOMEM for the handle).
 * Never installed.
 */
#ifndef TD_DICTNAME_H
#define TD_DICTNAME_H

#include "td_internal.h"

/** td_dict_get() of the entry `name` of `d`. */
int td__dictname_get(const td_value **out, const td_dict *d, const char *name);
/**
 * A key handle naming the one component `name` (owned: td_key_free()), or
 * NULL in `*out` when the dotted form names it already (no '.', not empty).
 */
int td__dictname_key(td_key **out, const char *name);
/** td_dict_set_tensor_take() under `name`. */
int td__dictname_set_tensor_take(td_dict *d, const char *name, td_tensor *t);
/** td_dict_set_dict() under `name`. */
int td__dictname_set_dict(td_dict *d, const char *name, const td_dict *child);
/** td_dict_set_dict_take() under `name`. */
int td__dictname_set_dict_take(td_dict *d, const char *name, td_dict *child);
/** td_dict_set_string() under `name`. */
int td__dictname_set_string(td_dict *d, const char *name, const char *utf8);
/** td_dict_set_strings() under `name`. */
int td__dictname_set_strings(td_dict *d, const char *name, int ndim, const int64_t *shape,
	const char *const *utf8);
/** td_dict_del() of `name`. */
int td__dictname_del(td_dict *d, const char *name);

#endif /* TD_DICTNAME_H */
