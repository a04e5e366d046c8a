/* expect: takes a td_key but is not the _key twin of a dotted-key call */
TD_API int td_x_has_key(const td_x *x, const td_key *key);
