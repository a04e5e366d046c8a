/* expect: takes a pre-split path `parts` */
TD_API int td_x_del_path(td_x *x, const char *const *parts, size_t n);
