/* expect: capacity `cap` is not next to the outputs */
TD_API size_t td_x_items(const char **keys_out, const td_x *x, size_t cap);
