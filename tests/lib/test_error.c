/* SPDX-License-Identifier: MIT */
/* test_error.c - status codes, td_strerror() and the thread-local last error. */
#include "td_test.h"

#include <pthread.h>

Test(error, every_code_has_a_distinct_description)
{
	static const struct {
		int code;
		const char *text;
	} codes[] = {
#define X(name, value, text) { value, text },
		TD_ERROR_LIST(X)
#undef X
	};
	size_t i, j;

	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		cr_assert_str_eq(td_strerror(codes[i].code), codes[i].text);
		cr_assert(codes[i].code <= 0);
		for (j = 0; j < i; j++) {
			cr_assert_neq(codes[i].code, codes[j].code);
			cr_assert_str_neq(codes[i].text, codes[j].text);
		}
	}
	cr_assert_eq(TD_OK, 0);
	cr_assert_eq(TD_ENOSPC, TD__ERROR_LAST);
}

Test(error, unknown_code_is_described_not_null)
{
	cr_assert_str_eq(td_strerror(12345), "unknown error");
	cr_assert_str_eq(td_strerror(-9999), "unknown error");
}

Test(error, last_error_starts_clear_and_is_never_null)
{
	const td_error *e = td_error_last();

	cr_assert_not_null(e);
	cr_assert_eq(e->code, TD_OK);
	cr_assert_not_null(e->message);
}

Test(error, failing_call_records_code_and_message)
{
	td_dtype d;

	td_cr_assert_err(td_dtype_from_name(&d, "no-such-type"), TD_EINVAL);
	cr_assert(strstr(td_error_last()->message, "no-such-type") != NULL,
		"message should name the bad input: %s", td_error_last()->message);
	td_error_clear();
	cr_assert_eq(td_error_last()->code, TD_OK);
	cr_assert_str_eq(td_error_last()->message, "no error");
}

static void *other_thread(void *arg)
{
	(void)arg;
	/* A new thread starts with no error, whatever the main thread did. */
	return (void *)(intptr_t)td_error_last()->code;
}

Test(error, last_error_is_per_thread)
{
	td_dtype d;
	pthread_t th;
	void *res;

	td_cr_assert_err(td_dtype_from_name(&d, "bogus"), TD_EINVAL);
	cr_assert_eq(pthread_create(&th, NULL, other_thread, NULL), 0);
	cr_assert_eq(pthread_join(th, &res), 0);
	cr_assert_eq((int)(intptr_t)res, TD_OK);
	cr_assert_eq(td_error_last()->code, TD_EINVAL);
}

Test(error, version_matches_headers)
{
	int major = -1, minor = -1, patch = -1;
	const char *v = td_version(&major, &minor, &patch);

	cr_assert_str_eq(v, TD_VERSION_STRING);
	cr_assert_eq(major, TD_VERSION_MAJOR);
	cr_assert_eq(minor, TD_VERSION_MINOR);
	cr_assert_eq(patch, TD_VERSION_PATCH);
	cr_assert_str_eq(td_version(NULL, NULL, NULL), TD_VERSION_STRING);
}

Test(error, allocator_rejects_incomplete_tables)
{
	td_allocator a = { 0 };

	td_cr_assert_err(td_set_allocator(&a), TD_EINVAL);
	a.version = TD_ALLOCATOR_VERSION;
	td_cr_assert_err(td_set_allocator(&a), TD_EINVAL);
	td_cr_assert_ok(td_set_allocator(NULL));
	td_free(NULL);
}

Test(error, allocation_failure_gives_enomem)
{
	td_buffer *b = (td_buffer *)0x1;

	td_test_alloc_install(0);
	td_cr_assert_err(td_buffer_new(&b, 16, 0), TD_ENOMEM);
	cr_assert_null(b);
	td_test_alloc_uninstall();
}
