/* SPDX-License-Identifier: MIT */
/* td_test.c - implementation of the shared test helpers. */
#define _GNU_SOURCE
#include "td_test.h"

#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[4096];
static char pathbuf[8192];

void td_test_tmpdir_init(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/tdstore-test.XXXXXX", base && *base ? base : "/tmp");
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp failed");
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void td_test_tmpdir_fini(void)
{
	if (tmpdir[0])
		nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	tmpdir[0] = '\0';
}

const char *td_test_tmpdir(void)
{
	return tmpdir;
}

const char *td_test_path(const char *name)
{
	snprintf(pathbuf, sizeof(pathbuf), "%s/%s", tmpdir, name);
	return pathbuf;
}

bool td_test_exists(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0;
}

int64_t td_test_file_size(const char *path)
{
	struct stat sb;

	cr_assert_eq(stat(path, &sb), 0, "stat %s", path);
	return (int64_t)sb.st_size;
}

uint64_t td_test_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void td_test_arange(td_tensor *out, td_dtype dtype, int ndim, const int64_t *shape)
{
	int64_t i, n;
	td_tensor f;

	td_cr_assert_ok(td_tensor_empty(&f, TD_DTYPE_F64, ndim, shape));
	n = td_tensor_numel(&f);
	for (i = 0; i < n; i++)
		((double *)td_tensor_data(&f))[i] = (double)i;
	td_cr_assert_ok(td_tensor_to_dtype(out, &f, dtype));
	td_tensor_release(&f);
}

/* Visit every element of t in C order of its logical shape. */
static int64_t flat_offset(const td_tensor *t, int64_t flat)
{
	int64_t off = 0;
	int d;

	for (d = t->ndim - 1; d >= 0; d--) {
		int64_t k = td_tensor_shape(t)[d] ? flat % td_tensor_shape(t)[d] : 0;
		flat = td_tensor_shape(t)[d] ? flat / td_tensor_shape(t)[d] : 0;
		off += k * td_tensor_strides(t)[d];
	}
	return off;
}

void td_test_random_fill(td_tensor *t, uint64_t seed)
{
	int64_t i, n = td_tensor_numel(t);
	td_category cat = td_dtype_category(t->dtype);

	for (i = 0; i < n; i++) {
		int64_t idx[TD_MAX_DIMS], f = i;
		int d;
		uint64_t r = td_test_rand(&seed);
		td_scalar s;

		for (d = t->ndim - 1; d >= 0; d--) {
			idx[d] = f % td_tensor_shape(t)[d];
			f /= td_tensor_shape(t)[d];
		}
		if (cat == TD_CATEGORY_FLOAT || cat == TD_CATEGORY_COMPLEX)
			s = td_scalar_float((double)(r % 20000) / 100.0 - 100.0);
		else if (cat == TD_CATEGORY_BOOL)
			s = td_scalar_bool(r & 1);
		else if (cat == TD_CATEGORY_UINT)
			s = td_scalar_int((int64_t)(r % 100));
		else
			s = td_scalar_int((int64_t)(r % 200) - 100);
		td_cr_assert_ok(td_tensor_set(t, idx, s));
	}
}

double td_test_element(const td_tensor *t, int64_t flat)
{
	const char *p = (const char *)td_tensor_data(t) +
		flat_offset(t, flat) * (int64_t)td_dtype_size(t->dtype);
	td_tensor one;
	double v = 0;
	td_tensor out;
	int64_t shape0[1] = { 1 };

	/* Convert one element through the library's own conversion path. */
	td_cr_assert_ok(td_tensor_from_data(&one, t->dtype, 1, shape0, p));
	td_cr_assert_ok(td_tensor_to_dtype(&out, &one, TD_DTYPE_F64));
	v = *(double *)td_tensor_data(&out);
	td_tensor_release(&out);
	td_tensor_release(&one);
	return v;
}

const td_dtype td_test_all_dtypes[TD_DTYPE_COUNT] = {
	TD_DTYPE_BOOL,
	TD_DTYPE_U8,
	TD_DTYPE_I8,
	TD_DTYPE_I16,
	TD_DTYPE_I32,
	TD_DTYPE_I64,
	TD_DTYPE_U16,
	TD_DTYPE_U32,
	TD_DTYPE_U64,
	TD_DTYPE_F16,
	TD_DTYPE_BF16,
	TD_DTYPE_F32,
	TD_DTYPE_F64,
	TD_DTYPE_C64,
	TD_DTYPE_C128,
};

void td_test_poison(td_tensor *t)
{
	memset(t, 0xa5, sizeof(*t));
}

void td_test_assert_poisoned(const td_tensor *t)
{
	td_tensor p;

	td_test_poison(&p);
	cr_assert(memcmp(&p, t, sizeof(p)) == 0, "a failing call wrote its out tensor");
}

td_key *td_test_key(const char *const *parts, size_t n)
{
	td_key *k = NULL;

	td_cr_assert_ok(td_key_from_path(&k, parts, n));
	return k;
}

int64_t *td_test_shape_w(td_tensor *t)
{
	cr_assert(t->ndim >= 0 && t->ndim <= TD_TENSOR_INLINE_DIMS);
	return t->dims_.inl.shape;
}

int64_t *td_test_strides_w(td_tensor *t)
{
	cr_assert(t->ndim >= 0 && t->ndim <= TD_TENSOR_INLINE_DIMS);
	return t->dims_.inl.strides;
}

void td_test_unravel(int ndim, const int64_t *shape, int64_t flat, int64_t *idx)
{
	int i;

	for (i = ndim - 1; i >= 0; i--) {
		idx[i] = shape[i] ? flat % shape[i] : 0;
		flat = shape[i] ? flat / shape[i] : 0;
	}
}

int64_t td_test_elem_pos(const td_tensor *t, const int64_t *idx)
{
	int64_t p = t->offset;
	int i;

	for (i = 0; i < t->ndim; i++)
		p += idx[i] * td_tensor_strides(t)[i];
	return p;
}

/* ---- failing allocator ---- */

static long alloc_budget = -1;
static long alloc_live;
static long alloc_attempts;

static bool alloc_allowed(void)
{
	alloc_attempts++;
	if (alloc_budget == 0)
		return false;
	if (alloc_budget > 0)
		alloc_budget--;
	return true;
}

static void *t_malloc(size_t size, void *payload)
{
	void *p;
	(void)payload;
	if (!alloc_allowed())
		return NULL;
	p = malloc(size);
	if (p)
		alloc_live++;
	return p;
}

static void *t_realloc(void *ptr, size_t size, void *payload)
{
	void *p;
	(void)payload;
	if (!alloc_allowed())
		return NULL;
	p = realloc(ptr, size);
	if (p && !ptr)
		alloc_live++;
	return p;
}

static void *t_aligned(size_t alignment, size_t size, void *payload)
{
	void *p = NULL;
	(void)payload;
	if (!alloc_allowed())
		return NULL;
	if (posix_memalign(&p, alignment < sizeof(void *) ? sizeof(void *) : alignment, size) != 0)
		return NULL;
	alloc_live++;
	return p;
}

static void t_free(void *ptr, void *payload)
{
	(void)payload;
	if (ptr)
		alloc_live--;
	free(ptr);
}

void td_test_alloc_install(long succeed)
{
	td_allocator a = { TD_ALLOCATOR_VERSION, t_malloc, t_realloc, t_aligned, t_free, NULL };

	alloc_budget = succeed;
	alloc_live = 0;
	alloc_attempts = 0;
	td_cr_assert_ok(td_set_allocator(&a));
}

void td_test_alloc_uninstall(void)
{
	td_set_allocator(NULL);
}

long td_test_alloc_live(void)
{
	return alloc_live;
}

long td_test_alloc_attempts(void)
{
	return alloc_attempts;
}

void td_test_enomem_sweep(int (*body)(void *ctx), void (*cleanup)(void *ctx), void *ctx)
{
	long k;

	for (k = 0; k < 100000; k++) {
		int rc;

		td_test_alloc_install(k);
		rc = body(ctx);
		if (rc >= 0) {
			cleanup(ctx);
			cr_assert_eq(td_test_alloc_live(), 0, "success after %ld allocations leaked %ld", k,
				td_test_alloc_live());
			td_test_alloc_uninstall();
			return;
		}
		cr_assert_eq(rc, TD_ENOMEM, "failure at allocation %ld returned %d (%s): %s", k, rc,
			td_strerror(rc), td_error_last()->message);
		cr_assert_eq(td_test_alloc_live(), 0, "failure at allocation %ld leaked %ld allocations", k,
			td_test_alloc_live());
		td_test_alloc_uninstall();
	}
	cr_assert_fail("the body never succeeded");
}

/* ---- writers killed at random points ---- */

bool td_test_under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	/* Valgrind preloads its own library. */
	return p && strstr(p, "vgpreload") != NULL;
}

const td_store_open_opts *td_test_rw(void)
{
	static const td_store_open_opts rw = { TD_STORE_OPEN_OPTS_VERSION, true };

	return &rw;
}

/* One td_store_memmap_opts of placement P for the TD_TEST_* settings F. */
#define TD_TEST_MEMMAP(P, F) \
	{ \
		TD_STORE_MEMMAP_OPTS_VERSION, P, ((F)&TD_TEST_EXISTSOK) != 0, ((F)&TD_TEST_LIKE) != 0, \
			((F)&TD_TEST_NOSYNC) ? TD_SYNC_NONE : TD_SYNC_FULL \
	}
#define TD_TEST_MEMMAP_ALL(P) \
	TD_TEST_MEMMAP(P, 0), TD_TEST_MEMMAP(P, 1), TD_TEST_MEMMAP(P, 2), TD_TEST_MEMMAP(P, 3), \
		TD_TEST_MEMMAP(P, 4), TD_TEST_MEMMAP(P, 5), TD_TEST_MEMMAP(P, 6), TD_TEST_MEMMAP(P, 7)

const td_store_memmap_opts *td_test_memmap(td_placement placement, unsigned flags)
{
	static const td_store_memmap_opts opts[2][8] = {
		{ TD_TEST_MEMMAP_ALL(TD_PLACEMENT_DIRECTORY) },
		{ TD_TEST_MEMMAP_ALL(TD_PLACEMENT_PACKED) },
	};

	cr_assert(placement == TD_PLACEMENT_DIRECTORY || placement == TD_PLACEMENT_PACKED);
	cr_assert_eq(flags & ~7u, 0u);
	return &opts[placement][flags];
}

const td_mmap_opts *td_test_mmap_rw(void)
{
	static const td_mmap_opts rw = { TD_MMAP_OPTS_VERSION, false, true };

	return &rw;
}

const td_mmap_opts *td_test_mmap_existsok(void)
{
	static const td_mmap_opts existsok = { TD_MMAP_OPTS_VERSION, true, false };

	return &existsok;
}

const td_ring_open_opts *td_test_ring_rw(void)
{
	static const td_ring_open_opts rw = { TD_RING_OPEN_OPTS_VERSION, true };

	return &rw;
}

const td_ring_create_opts *td_test_ring_create(bool prioritized)
{
	static const td_ring_create_opts opts[2] = {
		{ TD_RING_CREATE_OPTS_VERSION, false, TD_SYNC_NONE },
		{ TD_RING_CREATE_OPTS_VERSION, true, TD_SYNC_NONE },
	};

	return &opts[prioritized];
}

void td_test_kill_writer(td_store *watch, void (*writer)(void *arg), void *arg,
	const char *wait_path, long delay_ns)
{
	struct timespec poll = { 0, 100000 }, tick = { 0, 20000 };
	struct timespec delay = { delay_ns / 1000000000L, delay_ns % 1000000000L };
	uint64_t g0 = td_store_generation(watch);
	int status, waited;
	pid_t pid = fork();

	cr_assert(pid >= 0, "fork");
	if (pid == 0) {
		writer(arg);
		_exit(1);
	}
	for (waited = 0; td_store_generation(watch) == g0 && waited < 600000; waited++)
		nanosleep(&poll, NULL);
	if (wait_path) {
		for (waited = 0; !td_test_exists(wait_path) && waited < 50000; waited++)
			nanosleep(&tick, NULL);
	} else {
		nanosleep(&delay, NULL);
	}
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(td_store_generation(watch) > g0, "the killed writer committed nothing");
}

int td_test_add_filled(td_store *st, const char *key, int64_t value)
{
	int rc, tries;

	/* Another process may grow the store between the refresh and the add: retry. */
	for (tries = 0, rc = TD_ETYPE; rc == TD_ETYPE && tries < 1000; tries++) {
		int64_t rows[1];
		td_tensor t;

		rc = td_store_refresh(NULL, st);
		if (rc < 0)
			break;
		rows[0] = td_dict_batch_shape(td_store_dict(st))[0];
		rc = td_tensor_full(&t, TD_DTYPE_I64, 1, rows, td_scalar_int(value));
		if (rc == 0)
			rc = td_store_add_tensor(st, key, &t);
		td_tensor_release(&t);
	}
	return rc;
}

void td_test_schema_writer(void *arg)
{
	const td_test_writer *tw = arg;
	td_store *w;
	int k, rc = td_store_open(&w, tw->path, td_test_rw());

	for (k = tw->first; rc == 0; k++) {
		char key[32];

		switch (k % 4) {
		case 0:
			rc = td_store_grow(w, td_dict_batch_shape(td_store_dict(w))[0] + 1);
			break;
		case 1:
			snprintf(key, sizeof(key), "k%d", k);
			rc = td_test_add_filled(w, key, k);
			break;
		case 2:
			snprintf(key, sizeof(key), "d%d.v", k);
			rc = td_test_add_filled(w, key, k);
			break;
		default:
			/* Keep the store small: drop what was added two rounds ago. */
			snprintf(key, sizeof(key), "k%d", k - 10);
			rc = td_store_remove(w, key);
			snprintf(key, sizeof(key), "d%d", k - 9);
			if (rc == 0 || rc == TD_ENOTFOUND)
				rc = td_store_remove(w, key);
			if (rc == TD_ENOTFOUND)
				rc = 0;
			break;
		}
	}
}

/* Racer `i` of td_test_race_adds(): exits 0 once all its adds are done. */
static void race_adds_child(const char *path, int i, int per_racer, td_test_race_step step)
{
	static const int64_t b4[1] = { 4 };
	char key[48];
	td_store *mine;
	int j, rc = td_store_open(&mine, path, td_test_rw());

	for (j = 0; rc == 0 && j < per_racer; j++) {
		td_tensor t;
		bool nested = j % 2;

		snprintf(key, sizeof(key), "%sp%d_%d", nested ? "shared." : "", i, j);
		rc = td_tensor_full(&t, TD_DTYPE_I64, 1, b4, td_scalar_int(i * 100 + j));
		if (rc == 0)
			rc = td_store_add_tensor(mine, key, &t);
		td_tensor_release(&t);
		if (rc == 0 && step)
			rc = step(mine, i, j);
	}
	if (rc < 0)
		fprintf(stderr, "racer %d: %s\n", i, td_error_last()->message);
	td_store_close(mine);
	_exit(rc < 0);
}

td_store *td_test_race_adds(const char *path, int racers, int per_racer, td_test_race_step step)
{
	pid_t pids[64];
	char key[40];
	td_store *st;
	int i, j, status;

	cr_assert(racers > 0 && racers <= (int)TD_TEST_ARRAY_LEN(pids));
	for (i = 0; i < racers; i++) {
		pids[i] = fork();
		cr_assert(pids[i] >= 0);
		if (pids[i] == 0)
			race_adds_child(path, i, per_racer, step);
	}
	for (i = 0; i < racers; i++) {
		cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "racer %d failed", i);
	}
	td_cr_assert_ok(td_store_open(&st, path, NULL));
	for (i = 0; i < racers; i++)
		for (j = 0; j < per_racer; j++) {
			bool nested = j % 2;
			const td_value *v;

			snprintf(key, sizeof(key), "%sp%d_%d", nested ? "shared." : "", i, j);
			td_cr_assert_ok(td_dict_get(&v, td_store_dict(st), key));
			cr_assert_eq(v->kind, TD_VALUE_TENSOR);
			cr_assert_eq(((const int64_t *)td_tensor_data(&v->tensor))[3], i * 100 + j, "p%d_%d", i,
				j);
		}
	cr_assert_eq(td_store_generation(st), 1 + (uint64_t)racers * (uint64_t)per_racer);
	return st;
}

/* ---- lazy stacks ---- */

td_dict *td_test_lazy_ref(int sd)
{
	int64_t b[2] = { 3, 2 }, sa[3], sb[2], sc[3];
	td_tensor a, nb, c;
	td_dict *d;

	if (sd == 1) {
		b[0] = 2;
		b[1] = 3;
	}
	memcpy(sa, b, sizeof(b));
	sa[2] = 4;
	memcpy(sb, b, sizeof(b));
	memcpy(sc, b, sizeof(b));
	sc[2] = 2;
	td_cr_assert_ok(td_dict_new(&d, 2, b));
	td_test_arange(&a, TD_DTYPE_F32, 3, sa);
	td_test_arange(&nb, TD_DTYPE_I64, 2, sb);
	td_test_arange(&c, TD_DTYPE_F64, 3, sc);
	td_cr_assert_ok(td_dict_set_tensor_take(d, "a", &a));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "n.b", &nb));
	td_cr_assert_ok(td_dict_set_tensor_take(d, "n.m.c", &c));
	td_cr_assert_ok(td_dict_set_string(d, "s", "hello"));
	return d;
}

/* ---- descriptor passing ---- */

void td_test_send_fd(int sock, int fd)
{
	char byte = 'f', ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr msg;
	struct cmsghdr *c;

	memset(&msg, 0, sizeof(msg));
	memset(ctrl, 0, sizeof(ctrl));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctrl;
	msg.msg_controllen = sizeof(ctrl);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	cr_assert_eq(sendmsg(sock, &msg, 0), 1);
}

int td_test_recv_fd(int sock)
{
	char byte, ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr msg;
	struct cmsghdr *c;
	int fd;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctrl;
	msg.msg_controllen = sizeof(ctrl);
	if (recvmsg(sock, &msg, 0) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}
