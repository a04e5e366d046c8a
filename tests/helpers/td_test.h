/* SPDX-License-Identifier: MIT */
/*
 * td_test.h - helpers shared by the Criterion test programs: assertions that
 * print td_error_last() on failure, a private temporary directory per test,
 * tensor builders, and an allocator that fails on demand (for TD_ENOMEM
 * paths).
 */
#ifndef TD_TEST_H
#define TD_TEST_H

#include <criterion/criterion.h>
#include <tdstore.h>

/** Assert that a tdstore call succeeded (returned >= 0); print its error otherwise. */
#define td_cr_assert_ok(expr) \
	do { \
		int td_rc_ = (expr); \
		cr_assert(td_rc_ >= 0, "%s failed with %d (%s): %s", #expr, td_rc_, td_strerror(td_rc_), \
			td_error_last()->message); \
	} while (0)

/**
 * Assert that a tdstore call failed with `code`, recorded that code as the
 * thread's last error, and left a real message.
 */
#define td_cr_assert_err(expr, expected) \
	do { \
		int td_rc_; \
		td_error_clear(); \
		td_rc_ = (expr); \
		cr_assert_eq(td_rc_, (expected), "%s returned %d (%s), expected %d (%s); message: %s", \
			#expr, td_rc_, td_strerror(td_rc_), (int)(expected), td_strerror(expected), \
			td_error_last()->message); \
		cr_assert_eq(td_error_last()->code, (expected), "%s: last error code %d, expected %d", \
			#expr, td_error_last()->code, (int)(expected)); \
		cr_assert(td_error_last()->message[0] != '\0' && \
				strcmp(td_error_last()->message, "no error") != 0, \
			"%s: no error message recorded", #expr); \
	} while (0)

/* ---- per-test temporary directory (TestSuite .init/.fini) ---- */

/** Create a fresh directory under $TMPDIR for the current test. */
void td_test_tmpdir_init(void);
/** Remove it recursively. */
void td_test_tmpdir_fini(void);
/** @return the current test's directory (valid between init and fini). */
const char *td_test_tmpdir(void);
/** @return a path inside the test directory (static buffer, overwritten per call). */
const char *td_test_path(const char *name);
/** @return whether `path` exists (a dangling symbolic link counts). */
bool td_test_exists(const char *path);
/** @return the size of the file `path` (following links); fails the test if it is missing. */
int64_t td_test_file_size(const char *path);

/* ---- keys ---- */

/**
 * A key handle of the path parts[0..n) (td_key_from_path(): components may
 * hold '.' or be empty), asserted to succeed. Owned: td_key_free().
 */
td_key *td_test_key(const char *const *parts, size_t n);

/* ---- tensors ---- */

#define TD_TEST_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/** Every dtype, in td_dtype order. */
extern const td_dtype td_test_all_dtypes[TD_DTYPE_COUNT];

/** Fill a tensor value with a byte pattern, to see later whether a failing call wrote it. */
void td_test_poison(td_tensor *t);
/** Assert that a tensor value still holds td_test_poison()'s pattern. */
void td_test_assert_poisoned(const td_tensor *t);
/**
 * The shape and the strides of a tensor value whose dims are held inline
 * (at most TD_TENSOR_INLINE_DIMS), for writing: tests forge malformed
 * values with them. Fails the test for a tensor of more dims.
 */
int64_t *td_test_shape_w(td_tensor *t);
int64_t *td_test_strides_w(td_tensor *t);
/** The multi-index `idx` of C-order position `flat` in `shape` (ndim dims). */
void td_test_unravel(int ndim, const int64_t *shape, int64_t flat, int64_t *idx);
/** Position, in elements from the buffer start, of element `idx` of `t`. */
int64_t td_test_elem_pos(const td_tensor *t, const int64_t *idx);

/** A contiguous tensor of `dtype` holding 0, 1, 2, ... converted to `dtype`. */
void td_test_arange(td_tensor *out, td_dtype dtype, int ndim, const int64_t *shape);
/** Fill a tensor with pseudo-random values in [-100, 100) (integers for integer dtypes). */
void td_test_random_fill(td_tensor *t, uint64_t seed);
/** A splitmix64 step: deterministic pseudo-random numbers for tests. */
uint64_t td_test_rand(uint64_t *state);
/** Element `flat` (C order over the logical shape) of `t` as a double (real part). */
double td_test_element(const td_tensor *t, int64_t flat);

/* ---- allocation failure injection ---- */

/**
 * Install an allocator that fails every allocation after the first
 * `succeed` ones (-1: never fail) and counts live allocations.
 */
void td_test_alloc_install(long succeed);
/** Restore the default allocator. */
void td_test_alloc_uninstall(void);
/** @return the number of allocations made through the test allocator not yet freed. */
long td_test_alloc_live(void);
/** @return the number of allocations attempted since install. */
long td_test_alloc_attempts(void);

/**
 * Run `body` with allocation failures injected at every position in turn
 * (0, 1, 2, ... successful allocations before the failure) until it
 * succeeds. Each failing run must return TD_ENOMEM and release everything
 * it allocated; `cleanup` releases what a successful run produced.
 */
void td_test_enomem_sweep(int (*body)(void *ctx), void (*cleanup)(void *ctx), void *ctx);

/* ---- options (static, never changed: pass them to any number of calls) ---- */

/** td_store_open() options: read-write. */
const td_store_open_opts *td_test_rw(void);

/** td_test_memmap() settings, combined with |: exist_ok, like, TD_SYNC_NONE. */
#define TD_TEST_EXISTSOK 0x1u
#define TD_TEST_LIKE 0x2u
#define TD_TEST_NOSYNC 0x4u

/** td_store_memmap() options: `placement`, and the settings `flags` (TD_TEST_*) asks for. */
const td_store_memmap_opts *td_test_memmap(td_placement placement, unsigned flags);

/** td_mmap_opts: `writable` (td_mmap_tensor_from_file(), td_shm_tensor_from_fd()). */
const td_mmap_opts *td_test_mmap_rw(void);
/** td_mmap_opts: `exist_ok` (the calls that make a file). */
const td_mmap_opts *td_test_mmap_existsok(void);

/** td_ring_open() options: read-write. */
const td_ring_open_opts *td_test_ring_rw(void);
/** td_ring_create() options: with or without priorities; nothing synced (no test needs it). */
const td_ring_create_opts *td_test_ring_create(bool prioritized);

/* ---- writers killed at random points ---- */

/** Whether the program runs under valgrind (long tests then run fewer iterations). */
bool td_test_under_valgrind(void);

/**
 * Kill a writer at a random point of its work: fork a child that runs
 * `writer(arg)` (which should loop until killed; the child exits with 1 if
 * it returns), wait until the read-only handle `watch` sees a new
 * generation (the child committed a change; at most 60 s, for slow runs
 * under valgrind), then either until `wait_path` exists (at most about a
 * second; NULL: do not wait for a file) or for `delay_ns` nanoseconds,
 * and SIGKILL it. Asserts that the child was reaped and that it committed.
 */
void td_test_kill_writer(td_store *watch, void (*writer)(void *arg), void *arg,
	const char *wait_path, long delay_ns);

/**
 * Add the dotted `key` as an int64 leaf filled with `value`, of the store's
 * batch shape [rows] at that moment (refreshed first; retried when another
 * process grows the store in between). @return the add's status.
 */
int td_test_add_filled(td_store *st, const char *key, int64_t value);

/** What td_test_schema_writer() works on. */
typedef struct td_test_writer {
	const char *path; /* a directory store whose root has one batch dim */
	int first;        /* the first key number it uses */
} td_test_writer;

/**
 * A writer for td_test_kill_writer() (`arg`: a td_test_writer): opens the
 * store read-write, then in turn grows it by a row, adds "k<n>", adds
 * "d<n>/v" (a new dict: a journaled commit), and removes the "k" and "d"
 * entries it added a few rounds before; every leaf is int64 holding n.
 * Returns only if a call fails.
 */
void td_test_schema_writer(void *arg);

/**
 * Called by td_test_race_adds() in racer `racer` after its add number `j`
 * succeeded, to write data or refresh between schema changes. @return a
 * status: an error ends the racer, which then fails.
 */
typedef int (*td_test_race_step)(td_store *mine, int racer, int j);

/**
 * Race schema changes: fork `racers` processes that each open the store at
 * `path` read-write and add `per_racer` int64 leaves of shape [4] (the
 * store's batch shape must be [4]), "p<racer>_<j>" holding racer * 100 + j,
 * every second one inside the nested dict "shared" (made by whoever comes
 * first), calling `step` (may be NULL) after each add. Asserts that every
 * racer succeeded, then reopens the store read-only, checks that every leaf
 * is there with its value and that the generation counts every add, and
 * returns it (the caller closes it).
 */
td_store *td_test_race_adds(const char *path, int racers, int per_racer, td_test_race_step step);

/* ---- lazy stacks ---- */

/**
 * The dense reference the lazy-stack tests stack and compare against:
 * batch [3, 2] (for `sd` 1, [2, 3]), leaves "a" f32 [B, 4], "n.b" i64 [B],
 * "n.m.c" f64 [B, 2] (each an arange) and the string "s" = "hello". Owned
 * by the caller.
 */
td_dict *td_test_lazy_ref(int sd);

/* ---- descriptor passing ---- */

/** Send `fd` and one data byte over the Unix socket `sock` (SCM_RIGHTS); asserts success. */
void td_test_send_fd(int sock, int fd);
/** Receive one descriptor sent by td_test_send_fd(), or -1 (usable in a child: never asserts). */
int td_test_recv_fd(int sock);

#endif /* TD_TEST_H */
