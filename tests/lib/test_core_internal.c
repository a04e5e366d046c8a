/* SPDX-License-Identifier: MIT */
/*
 * test_core_internal.c - the internal helpers of alloc.c and error.c that
 * every module (and later storage/) builds on: the td__ allocation wrappers
 * with the default and a custom allocator, td__strndup, OS errors and their
 * mapping to td_status, and shape formatting. Linked against a static copy
 * of the library.
 */
#include "td_test.h"
#include "td_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

Test(core_internal, default_allocator_wrappers_work_for_every_size)
{
	char *p, *q;
	void *a;

	p = td__malloc(0);
	cr_assert_not_null(p, "a zero-byte request still gives a pointer");
	q = td__realloc(p, 100);
	cr_assert_not_null(q);
	memset(q, 'x', 100);
	q = td__realloc(q, 0);
	cr_assert_not_null(q);
	td__free(q);
	a = td__aligned_alloc(4096, 10);
	cr_assert_not_null(a);
	cr_assert_eq((uintptr_t)a % 4096, 0);
	td__free(a);
	a = td__aligned_alloc(2, 0);
	cr_assert_not_null(a, "small alignments are raised to the pointer size");
	cr_assert_eq((uintptr_t)a % sizeof(void *), 0);
	td__free(a);
	a = td__calloc(4, 8);
	cr_assert_not_null(a);
	cr_assert_eq(((uint64_t *)a)[3], 0);
	td__free(a);
	cr_assert_null(td__calloc(SIZE_MAX / 2, 3), "an overflowing product fails");
	td__free(NULL);
	td_free(NULL);
}

Test(core_internal, strndup_copies_and_terminates)
{
	char *s = td__strndup("abcdef", 3);

	cr_assert_str_eq(s, "abc");
	td__free(s);
	s = td__strndup("", 0);
	cr_assert_str_eq(s, "");
	td__free(s);
	cr_assert_null(td__strndup("x", SIZE_MAX));
	td_test_alloc_install(0);
	cr_assert_null(td__strndup("abc", 3));
	cr_assert_null(td__realloc(NULL, 8));
	cr_assert_null(td__aligned_alloc(64, 8));
	cr_assert_null(td__calloc(1, 8));
	cr_assert_eq(td_test_alloc_live(), 0);
	td_test_alloc_uninstall();
}

Test(core_internal, custom_allocator_receives_every_call)
{
	char *p;
	void *a;

	td_test_alloc_install(-1);
	p = td__strndup("hello", 5);
	p = td__realloc(p, 64);
	cr_assert_str_eq(p, "hello");
	a = td__aligned_alloc(256, 1);
	cr_assert_eq((uintptr_t)a % 256, 0);
	cr_assert_eq(td_test_alloc_live(), 2);
	td__free(p);
	td__free(a);
	cr_assert_eq(td_test_alloc_live(), 0);
	cr_assert_eq(td_test_alloc_attempts(), 3);
	td_test_alloc_uninstall();
}

Test(core_internal, os_errors_append_the_system_message)
{
	const td_error *e;

	cr_assert_eq(td__error_os(TD_EIO, ENOENT, "open '%s'", "/nowhere"), TD_EIO);
	e = td_error_last();
	cr_assert_eq(e->code, TD_EIO);
	cr_assert_eq(e->sys_errno, ENOENT);
	cr_assert(strstr(e->message, "open '/nowhere': ") == e->message, "%s", e->message);
	cr_assert(strlen(e->message) > strlen("open '/nowhere': "), "%s", e->message);
	cr_assert_eq(td__error(TD_EINVAL, "plain %d", 7), TD_EINVAL);
	cr_assert_str_eq(td_error_last()->message, "plain 7");
	cr_assert_eq(td_error_last()->sys_errno, 0);
	td__error_os(TD_EIO, 0, "no errno");
	cr_assert_str_eq(td_error_last()->message, "no errno");
}

Test(core_internal, an_error_may_quote_the_previous_message)
{
	char longer[600];

	td__error(TD_EINVAL, "first %d", 1);
	cr_assert_eq(td__error(TD_ECORRUPT, "context: %s", td_error_last()->message), TD_ECORRUPT);
	cr_assert_str_eq(td_error_last()->message, "context: first 1");
	/* Quoting a message near the buffer's size truncates, never overlaps. */
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	td__error(TD_EIO, "%s", longer);
	td__error(TD_EIO, "a: %s", td_error_last()->message);
	cr_assert(strncmp(td_error_last()->message, "a: xxx", 6) == 0);
	td_error_clear();
}

Test(core_internal, errno_values_map_to_the_closest_status)
{
	static const struct {
		int err, status;
	} map[] = {
		{ ENOMEM, TD_ENOMEM },
		{ ENOENT, TD_ENOTFOUND },
		{ EEXIST, TD_EEXISTS },
		{ EINVAL, TD_EINVAL },
		{ ENOSPC, TD_ENOSPC },
		{ EDQUOT, TD_ENOSPC },
		{ EROFS, TD_EREADONLY },
		{ EACCES, TD_EREADONLY },
		{ EPERM, TD_EREADONLY },
		{ EBUSY, TD_EBUSY },
		{ EAGAIN, TD_EBUSY },
		{ ENOSYS, TD_ENOTSUP },
		{ EOPNOTSUPP, TD_ENOTSUP },
		{ EOVERFLOW, TD_EOVERFLOW },
		{ EFBIG, TD_EOVERFLOW },
		{ EIO, TD_EIO },
		{ EPIPE, TD_EIO },
	};
	size_t i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		cr_assert_eq(td__status_from_errno(map[i].err), map[i].status, "errno %d", map[i].err);
}

Test(core_internal, shapes_are_formatted_and_truncated)
{
	int64_t shape[] = { 3, 40, 500 };
	char buf[TD_SHAPE_STR_LEN], small[6];

	cr_assert_str_eq(td__format_shape(buf, sizeof(buf), 3, shape), "[3, 40, 500]");
	cr_assert_str_eq(td__format_shape(buf, sizeof(buf), 0, NULL), "[]");
	cr_assert_str_eq(td__format_shape(small, sizeof(small), 3, shape), "[3, 4");
	cr_assert_eq(td__format_shape(small, 0, 3, shape), small);
}

/* Build and drop dicts, so that freed small blocks go to this thread's cache. */
static void *churn(void *arg)
{
	int64_t b[] = { 4 };
	int *ok = arg;
	int i;

	*ok = 1;
	for (i = 0; i < 50; i++) {
		td_dict *d, *c;
		if (td_dict_new(&d, 1, b) < 0 || td_dict_set_string(d, "a.b", "x") < 0 ||
			td_dict_copy(&c, d) < 0) {
			*ok = 0;
			return NULL;
		}
		td_dict_free(c);
		td_dict_free(d);
	}
	return NULL;
}

/* Each thread's cache of small blocks is released when the thread exits (the
 * sanitizer and valgrind runs report the blocks otherwise). */
Test(core_internal, small_block_caches_of_exiting_threads_are_released)
{
	pthread_t th[4];
	int ok[4], i;

	for (i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, churn, &ok[i]), 0);
	for (i = 0; i < 4; i++) {
		cr_assert_eq(pthread_join(th[i], NULL), 0);
		cr_assert_eq(ok[i], 1, "thread %d", i);
	}
	/* Switching allocators empties the calling thread's cache first. */
	churn(&ok[0]);
	td_test_alloc_install(-1);
	cr_assert_eq(td_test_alloc_live(), 0);
	churn(&ok[0]);
	cr_assert_eq(ok[0], 1);
	cr_assert_eq(td_test_alloc_live(), 0, "a caller's allocator sees every block");
	cr_assert_gt(td_test_alloc_attempts(), 0);
	td_test_alloc_uninstall();
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;

	return x < y ? -1 : x > y;
}

/* A burst of blocks of one class (more than glibc or a fixed slot array per
 * class would keep) returns to the thread's cache whole and is handed out
 * again, and each block is whole: every byte of the class is usable. */
Test(core_internal, small_block_cache_takes_back_a_whole_burst)
{
	enum { N = 600, SIZE = 840 };
	static void *first[N], *again[N];
	int i;

	for (i = 0; i < N; i++) {
		first[i] = td__alloc_small(SIZE);
		cr_assert_not_null(first[i]);
		memset(first[i], 0xa5, SIZE);
	}
	for (i = 0; i < N; i++)
		td__free_small(first[i], SIZE);
	for (i = 0; i < N; i++) {
		again[i] = td__alloc_small(SIZE);
		cr_assert_not_null(again[i]);
		memset(again[i], 0x5a, SIZE);
	}
	qsort(first, N, sizeof(*first), cmp_ptr);
	qsort(again, N, sizeof(*again), cmp_ptr);
	cr_assert_arr_eq(first, again, sizeof(first), "the burst came back from the cache");
	for (i = 0; i < N; i++)
		td__free_small(again[i], SIZE);
}

/* A cache filled by blocks of one class makes room for the blocks freed
 * now (it drops blocks of other classes): a burst of another class comes
 * back whole afterwards. Blocks of 192 bytes and more are line-aligned. */
Test(core_internal, a_full_cache_makes_room_for_what_is_freed_now)
{
	enum { NBIG = 256, BIG = 4096, N = 600, SIZE = 840 };
	static void *big[NBIG], *first[N], *again[N], *steal[N];
	void *small;
	int i;

	for (i = 0; i < NBIG; i++) {
		big[i] = td__alloc_small(BIG);
		cr_assert_not_null(big[i]);
		cr_assert_eq((uintptr_t)big[i] % 64, 0, "a block of %d bytes is line-aligned", BIG);
	}
	for (i = 0; i < NBIG; i++)
		td__free_small(big[i], BIG); /* the cache is now full of them: 1 MiB */
	for (i = 0; i < N; i++) {
		first[i] = td__alloc_small(SIZE);
		cr_assert_not_null(first[i]);
		cr_assert_eq((uintptr_t)first[i] % 64, 0);
		memset(first[i], 0x11, SIZE);
	}
	for (i = 0; i < N; i++)
		td__free_small(first[i], SIZE);
	/* Had they gone back to malloc, these would take their memory. */
	for (i = 0; i < N; i++) {
		steal[i] = malloc(SIZE + 120);
		cr_assert_not_null(steal[i]);
	}
	for (i = 0; i < N; i++)
		again[i] = td__alloc_small(SIZE);
	qsort(first, N, sizeof(*first), cmp_ptr);
	qsort(again, N, sizeof(*again), cmp_ptr);
	cr_assert_arr_eq(first, again, sizeof(first), "the burst came back from the cache");
	for (i = 0; i < N; i++) {
		td__free_small(again[i], SIZE);
		free(steal[i]);
	}
	small = td__alloc_small(40);
	cr_assert_not_null(small);
	cr_assert_eq((uintptr_t)small % 16, 0);
	memset(small, 0x22, 40);
	td__free_small(small, 40);
}

/* Blocks outlive a change of allocator (which the contract rules out, but
 * nothing may crash): each is freed with the allocator current then. */
Test(core_internal, small_blocks_survive_a_change_of_allocator)
{
	void *before, *during;

	before = td__alloc_small(900);
	cr_assert_not_null(before);
	td_test_alloc_install(-1);
	during = td__alloc_small(900);
	cr_assert_not_null(during);
	memset(during, 0x33, 900);
	td__free_small(before, 900);
	td_test_alloc_uninstall();
	td__free_small(during, 900); /* cached now, freed when the cache is */
	before = td__alloc_small(900);
	cr_assert_not_null(before);
	td__free_small(before, 900);
}
