/* SPDX-License-Identifier: MIT */
/*
 * headertest.c - <tdstore.h> compiles as strict C11 (-std=c11 -pedantic
 * -Werror, built by `make headertest`), and a program using its types,
 * macros, inline helpers and td_value's anonymous union links against
 * libtdstore and runs.
 */
#include <tdstore.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
	const int64_t shape[2] = { 3, 4 };
	const int64_t at[1] = { 2 };
	td_tensor t = TD_TENSOR_INIT;
	td_tensor row = TD_TENSOR_INIT;
	td_index idx[3];
	td_scalar got;
	td_value_kind kind = TD_VALUE_TENSOR;
	td_dict *d = NULL;
	const td_value *v = NULL;
	int major = -1;
	const char *version = td_version(&major, NULL, NULL);
	/* Every options initializer, as C99 sees it. */
	td_store_open_opts so = TD_STORE_OPEN_OPTS_INIT;
	td_store_memmap_opts mo = TD_STORE_MEMMAP_OPTS_INIT;
	td_mmap_opts mm = TD_MMAP_OPTS_INIT;
	td_ring_create_opts rc = TD_RING_CREATE_OPTS_INIT;
	td_ring_open_opts ro = TD_RING_OPEN_OPTS_INIT;

	idx[0] = td_index_int(1);
	idx[1] = td_index_slice(0, TD_SLICE_NONE, 2);
	idx[2] = td_index_ellipsis();
	if (strcmp(version, TD_VERSION_STRING) != 0 || major != TD_VERSION_MAJOR)
		return 1;
	if (so.version != TD_STORE_OPEN_OPTS_VERSION || so.writable ||
		mo.placement != TD_PLACEMENT_DIRECTORY || mo.sync != TD_SYNC_FULL ||
		mm.version != TD_MMAP_OPTS_VERSION || rc.prioritized || ro.writable)
		return 1;
	if (idx[1].kind != TD_INDEX_SLICE || kind != TD_VALUE_TENSOR || sizeof(td_value) == 0)
		return 1;
	if (td_tensor_zeros(&t, TD_DTYPE_F32, 2, shape) != TD_OK ||
		td_tensor_fill(&t, td_scalar_float(2.5)) != TD_OK ||
		td_tensor_select(&row, &t, 0, 1) != TD_OK || td_tensor_get(&got, &row, at) != TD_OK) {
		fprintf(stderr, "headertest: %s\n", td_error_last()->message);
		return 1;
	}
	td_tensor_release(&row);
	if (td_dict_new(&d, 1, shape) != TD_OK || td_dict_set_tensor(d, "x", &t) != TD_OK ||
		td_dict_set_string(d, "s", "text") != TD_OK || td_dict_get(&v, d, "x") != TD_OK ||
		v->tensor.ndim != 2 || td_dict_get(&v, d, "s") != TD_OK || v->blob.length != 4) {
		fprintf(stderr, "headertest: %s\n", td_error_last()->message);
		return 1;
	}
	td_dict_free(d);
	td_tensor_release(&t);
	if (got.kind != TD_SCALAR_FLOAT || got.v.f != 2.5)
		return 1;
	return strcmp(td_strerror(TD_EINVAL), "invalid argument") == 0 ? 0 : 1;
}
