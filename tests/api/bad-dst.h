/* expect: output `dst` comes after the input `ring` */
TD_API int td_x_sample(td_x *ring, td_dict *dst, unsigned flags);
