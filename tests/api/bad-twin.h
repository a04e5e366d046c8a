/* expect: takes a dotted key but has no twin td_x_del_key taking a td_key */
TD_API int td_x_del(td_x *x, const char *key);
