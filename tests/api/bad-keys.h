/* expect: takes dotted keys but has no twin td_x_drop_keys taking td_keys */
TD_API int td_x_drop(td_x **out, const td_x *x, const char *const *keys, size_t n);
