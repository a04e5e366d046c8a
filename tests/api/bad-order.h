/* expect: output `out` comes after the input `x` */
TD_API int td_x_count(const td_x *x, size_t *out);
