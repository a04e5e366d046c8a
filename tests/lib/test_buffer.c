/* SPDX-License-Identifier: MIT */
/* test_buffer.c - heap and wrapped buffers, reference counting, release hooks. */
#include "td_test.h"

#include <pthread.h>

Test(buffer, heap_buffer_is_aligned_sized_and_zeroed_on_request)
{
	td_buffer *b;
	size_t i;

	td_cr_assert_ok(td_buffer_new(&b, 1000, TD_BUFFER_ZEROED));
	cr_assert_eq(td_buffer_size(b), 1000);
	cr_assert_eq((uintptr_t)td_buffer_data(b) % TD_BUFFER_ALIGNMENT, 0);
	cr_assert_eq(td_buffer_memory(b), TD_MEMORY_HEAP);
	cr_assert_eq(td_buffer_flags(b), 0);
	cr_assert_eq(td_buffer_device(b), -1);
	cr_assert_eq(td_buffer_refcount(b), 1);
	for (i = 0; i < 1000; i++)
		cr_assert_eq(((unsigned char *)td_buffer_data(b))[i], 0);
	td_buffer_unref(b);
}

Test(buffer, empty_buffer_is_allowed)
{
	td_buffer *b;

	td_cr_assert_ok(td_buffer_new(&b, 0, 0));
	cr_assert_eq(td_buffer_size(b), 0);
	td_buffer_unref(b);
}

Test(buffer, bad_arguments_are_refused)
{
	td_buffer *b = NULL;
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;
	char data[8];

	td_cr_assert_err(td_buffer_new(NULL, 1, 0), TD_EINVAL);
	td_cr_assert_err(td_buffer_new(&b, 1, 0x100), TD_EINVAL);
	td_cr_assert_err(td_buffer_new(&b, SIZE_MAX - 8, 0), TD_EOVERFLOW);
	td_cr_assert_err(td_buffer_wrap(NULL, data, 8, NULL), TD_EINVAL);
	td_cr_assert_err(td_buffer_wrap(&b, NULL, 8, NULL), TD_EINVAL);
	o.memory = TD_MEMORY_HEAP;
	td_cr_assert_err(td_buffer_wrap(&b, data, 8, &o), TD_EINVAL);
	o.memory = (td_memory)42;
	td_cr_assert_err(td_buffer_wrap(&b, data, 8, &o), TD_EINVAL);
	o.memory = TD_MEMORY_DEVICE; /* device memory needs an ordinal */
	td_cr_assert_err(td_buffer_wrap(&b, data, 8, &o), TD_EINVAL);
	o.memory = TD_MEMORY_EXTERNAL;
	o.device = 0; /* host memory with a device ordinal */
	td_cr_assert_err(td_buffer_wrap(&b, data, 8, &o), TD_EINVAL);
	o.device = -1;
	o.flags = 0x80;
	td_cr_assert_err(td_buffer_wrap(&b, data, 8, &o), TD_EINVAL);
	o.flags = 0;
	o.version = 99;
	td_cr_assert_err(td_buffer_wrap(&b, data, 8, &o), TD_EINVAL);
	cr_assert_null(b);
}

static int released;

static void on_release(void *data, size_t nbytes, void *payload)
{
	cr_assert_eq(nbytes, 16);
	cr_assert_eq(payload, (void *)0x1234);
	released++;
	(void)data;
}

Test(buffer, wrapped_buffer_runs_its_hook_on_last_unref)
{
	char data[16];
	td_buffer *b;
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;

	o.memory = TD_MEMORY_FILE;
	o.flags = TD_BUFFER_READONLY;
	o.release = on_release;
	o.payload = (void *)0x1234;
	released = 0;
	td_cr_assert_ok(td_buffer_wrap(&b, data, sizeof(data), &o));
	cr_assert_eq(td_buffer_data(b), data);
	cr_assert_eq(td_buffer_memory(b), TD_MEMORY_FILE);
	cr_assert_eq(td_buffer_flags(b), TD_BUFFER_READONLY);
	cr_assert_eq(td_buffer_ref(b), b);
	cr_assert_eq(td_buffer_refcount(b), 2);
	td_buffer_unref(b);
	cr_assert_eq(released, 0);
	td_buffer_unref(b);
	cr_assert_eq(released, 1);
}

Test(buffer, device_buffer_keeps_its_ordinal)
{
	td_buffer *b;
	td_buffer_wrap_opts o = TD_BUFFER_WRAP_OPTS_INIT;

	o.memory = TD_MEMORY_DEVICE;
	o.device = 3;
	td_cr_assert_ok(td_buffer_wrap(&b, (void *)0x1000, 64, &o));
	cr_assert_eq(td_buffer_device(b), 3);
	td_buffer_unref(b);
}

Test(buffer, null_is_accepted_everywhere)
{
	td_buffer_unref(NULL);
	cr_assert_null(td_buffer_ref(NULL));
	cr_assert_null(td_buffer_data(NULL));
	cr_assert_eq(td_buffer_size(NULL), 0);
	cr_assert_eq(td_buffer_refcount(NULL), 0);
	cr_assert_eq(td_buffer_flags(NULL), 0);
	cr_assert_eq(td_buffer_device(NULL), -1);
}

static void *ref_storm(void *arg)
{
	td_buffer *b = arg;
	int i;

	for (i = 0; i < 100000; i++) {
		td_buffer_ref(b);
		td_buffer_unref(b);
	}
	return NULL;
}

Test(buffer, references_are_thread_safe)
{
	td_buffer *b;
	pthread_t th[4];
	int i;

	td_cr_assert_ok(td_buffer_new(&b, 8, 0));
	for (i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, ref_storm, b), 0);
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(td_buffer_refcount(b), 1);
	td_buffer_unref(b);
}
