/* SPDX-License-Identifier: MIT */
/*
 * consumer.c - a program built against an installed libtdstore with
 * `pkg-config --cflags --libs tdstore` (scripts/check-install.sh): it checks
 * that the installed headers and library agree and that basic calls work.
 *   usage: consumer EXPECTED_VERSION
 */
#include <tdstore.h>

#include <stdio.h>
#include <string.h>

static int fail(const char *what)
{
	fprintf(stderr, "consumer: %s: %s\n", what, td_error_last()->message);
	return 1;
}

int main(int argc, char **argv)
{
	const int64_t shape[2] = { 4, 3 };
	const int64_t at[1] = { 1 };
	td_tensor t = TD_TENSOR_INIT;
	td_tensor row = TD_TENSOR_INIT;
	td_tensor as_int = TD_TENSOR_INIT;
	td_scalar got;
	const char *lib = td_version(NULL, NULL, NULL);

	if (argc != 2 || strcmp(lib, argv[1]) != 0 || strcmp(lib, TD_VERSION_STRING) != 0) {
		fprintf(stderr, "consumer: library %s, headers %s, expected %s\n", lib, TD_VERSION_STRING,
			argc == 2 ? argv[1] : "(none)");
		return 1;
	}
	if (td_tensor_zeros(&t, TD_DTYPE_F64, 2, shape) != TD_OK)
		return fail("td_tensor_zeros");
	if (td_tensor_fill(&t, td_scalar_float(3.75)) != TD_OK)
		return fail("td_tensor_fill");
	if (td_tensor_select(&row, &t, 0, -1) != TD_OK)
		return fail("td_tensor_select");
	if (td_tensor_to_dtype(&as_int, &row, TD_DTYPE_I32) != TD_OK)
		return fail("td_tensor_to_dtype");
	if (td_tensor_get(&got, &as_int, at) != TD_OK)
		return fail("td_tensor_get");
	td_tensor_release(&as_int);
	td_tensor_release(&row);
	td_tensor_release(&t);
	if (got.kind != TD_SCALAR_INT || got.v.i != 3) {
		fprintf(stderr, "consumer: expected int 3 from float 3.75\n");
		return 1;
	}
	if (td_tensor_zeros(&t, TD_DTYPE_F32, -1, shape) != TD_EINVAL)
		return fail("td_tensor_zeros accepted ndim -1");
	printf("consumer (C): tdstore %s ok\n", lib);
	return 0;
}
