// SPDX-License-Identifier: MIT
//
// consumer.cc - the C++ consumer of an installed libtdstore, built with
// `pkg-config --cflags --libs tdstore` (scripts/check-install.sh).
//   usage: consumer-cxx EXPECTED_VERSION
#include <tdstore.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char **argv)
{
	const std::string lib = td_version(nullptr, nullptr, nullptr);
	if (argc != 2 || lib != argv[1] || lib != TD_VERSION_STRING) {
		std::fprintf(stderr, "consumer-cxx: library %s, headers %s\n", lib.c_str(),
			TD_VERSION_STRING);
		return 1;
	}
	const std::vector<std::int64_t> shape = { 2, 5 };
	td_tensor t = TD_TENSOR_INIT;
	if (td_tensor_zeros(&t, TD_DTYPE_U8, static_cast<int>(shape.size()), shape.data()) != TD_OK) {
		std::fprintf(stderr, "consumer-cxx: %s\n", td_error_last()->message);
		return 1;
	}
	const bool ok = td_tensor_numel(&t) == 10 && td_tensor_nbytes(&t) == 10 &&
		td_tensor_is_contiguous(&t);
	td_tensor_release(&t);
	if (!ok) {
		std::fprintf(stderr, "consumer-cxx: unexpected tensor properties\n");
		return 1;
	}
	std::printf("consumer (C++): tdstore %s ok\n", lib.c_str());
	return 0;
}
