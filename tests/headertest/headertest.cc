// SPDX-License-Identifier: MIT
//
// headertest.cc - <tdstore.h> compiles as C++11 (-std=c++11 -pedantic
// -Werror, built by `make headertest`), and its functions link with C
// linkage from a C++ program.
#include <tdstore.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

int main()
{
	const std::int64_t shape[2] = { 3, 4 };
	const std::int64_t at[1] = { 2 };
	td_tensor t = TD_TENSOR_INIT;
	td_tensor row = TD_TENSOR_INIT;
	const td_index idx[3] = { td_index_int(-1), td_index_all(), td_index_newaxis() };
	td_scalar got = td_scalar_int(0);
	td_buffer_wrap_opts opts = TD_BUFFER_WRAP_OPTS_INIT;
	td_dict *dict = nullptr;
	td_key *key = nullptr;
	// Every options initializer, as C++ sees it.
	const td_store_open_opts so = TD_STORE_OPEN_OPTS_INIT;
	const td_store_memmap_opts mo = TD_STORE_MEMMAP_OPTS_INIT;
	const td_mmap_opts mm = TD_MMAP_OPTS_INIT;
	const td_ring_create_opts rc = TD_RING_CREATE_OPTS_INIT;
	const td_ring_open_opts ro = TD_RING_OPEN_OPTS_INIT;

	if (std::strcmp(td_version(nullptr, nullptr, nullptr), TD_VERSION_STRING) != 0)
		return 1;
	if (idx[0].start != -1 || opts.version != TD_BUFFER_WRAP_OPTS_VERSION || dict || key)
		return 1;
	if (so.writable || mo.placement != TD_PLACEMENT_DIRECTORY || mo.sync != TD_SYNC_FULL ||
		mm.version != TD_MMAP_OPTS_VERSION || rc.prioritized || ro.writable)
		return 1;
	if (td_tensor_zeros(&t, TD_DTYPE_I64, 2, shape) != TD_OK ||
		td_tensor_fill(&t, td_scalar_int(7)) != TD_OK ||
		td_tensor_select(&row, &t, 0, 2) != TD_OK || td_tensor_get(&got, &row, at) != TD_OK) {
		std::fprintf(stderr, "headertest: %s\n", td_error_last()->message);
		return 1;
	}
	td_tensor_release(&row);
	const td_value *v = nullptr;
	if (td_dict_new(&dict, 1, shape) != TD_OK || td_dict_set_tensor(dict, "x", &t) != TD_OK ||
		td_dict_get(&v, dict, "x") != TD_OK || v->kind != TD_VALUE_TENSOR || v->tensor.ndim != 2) {
		std::fprintf(stderr, "headertest: %s\n", td_error_last()->message);
		return 1;
	}
	td_dict_free(dict);
	td_tensor_release(&t);
	return got.kind == TD_SCALAR_INT && got.v.i == 7 ? 0 : 1;
}
