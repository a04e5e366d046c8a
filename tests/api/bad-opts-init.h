/* expect: td_x_opts: no TD_X_OPTS_INIT */
#define TD_X_OPTS_VERSION 1
typedef struct td_x_opts {
	unsigned version;
	bool fast;
} td_x_opts;
