/* expect: a release function returns int, not void */
TD_API int td_x_close(td_x *x);
