/* SPDX-License-Identifier: MIT */
/* A header that follows every API rule: scripts/check-api.sh accepts it. */
typedef struct td_x td_x;
typedef struct td_key td_key;

/** Current version of td_x_open_opts. */
#define TD_X_OPEN_OPTS_VERSION 1
typedef struct td_x_open_opts {
	unsigned version; /**< TD_X_OPEN_OPTS_VERSION */
	bool writable;
} td_x_open_opts;
#define TD_X_OPEN_OPTS_INIT { TD_X_OPEN_OPTS_VERSION, false }

/**
 * @param[out] out  receives the handle
 */
TD_API int td_x_open(td_x **out, const char *path, const td_x_open_opts *opts);
TD_API void td_x_close(td_x *x);
TD_API size_t td_x_len(const td_x *x);
/**
 * @param[out] data_out    the bytes
 * @param[out] length_out  their length
 */
TD_API int td_x_get(const char **data_out, size_t *length_out, const td_x *x,
	const char *key);
TD_API int td_x_get_key(const char **data_out, size_t *length_out, const td_x *x,
	const td_key *key);
TD_API size_t td_x_items(const char **keys_out, size_t cap, const td_x *x);
TD_API int td_x_rename(td_x *x, const char *old_key, const char *new_key);
TD_API int td_x_rename_key(td_x *x, const td_key *old_key, const td_key *new_key);
TD_API int td_x_select(td_x **out, const td_x *x, const char *const *keys, size_t n);
TD_API int td_x_select_keys(td_x **out, const td_x *x, const td_key *const *keys, size_t n);
TD_API int td_x_fill(td_x *dst, const td_x *src);
TD_API int td_key_from_path(td_key **out, const char *const *parts, size_t n);
TD_API void td_key_free(td_key *key);
