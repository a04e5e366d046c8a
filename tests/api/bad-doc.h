/* expect: @param[out] `changed` is not named as an output */
/**
 * Refresh.
 *
 * @param[out] changed  set when something changed
 */
TD_API int td_x_refresh(bool *changed, td_x *x);
