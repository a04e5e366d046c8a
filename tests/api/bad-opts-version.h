/* expect: td_x_opts does not start with `unsigned version` */
#define TD_X_OPTS_VERSION 1
typedef struct td_x_opts {
	unsigned flags;
	unsigned version;
} td_x_opts;
#define TD_X_OPTS_INIT { 0u, TD_X_OPTS_VERSION }
