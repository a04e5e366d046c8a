# SPDX-License-Identifier: MIT
# Criterion test programs, one per module, run through automake's TAP driver.
if HAVE_CRITERION

check_LTLIBRARIES += tests/helpers/libtdtest.la
tests_helpers_libtdtest_la_SOURCES = \
	%D%/helpers/td_test.h \
	%D%/helpers/td_test.c
tests_helpers_libtdtest_la_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS)

td_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -I$(top_srcdir)/tests/helpers
td_test_ldadd = tests/helpers/libtdtest.la libtdstore.la $(CRITERION_LIBS) $(PTHREAD_LIBS) -lm

# The shared library exports only td_ symbols. Programs that test internal
# td__ functions link the library's convenience archives instead, and see the
# internal headers through td_lib_cppflags or td_storage_cppflags.
td_test_internal_ldadd = tests/helpers/libtdtest.la libtdstorage.la libtdcore.la \
	$(CRITERION_LIBS) $(PTHREAD_LIBS) -lm

# --- lib/ ---
check_PROGRAMS += %D%/lib/test_error
TESTS += %D%/lib/test_error
%C%_lib_test_error_CFLAGS = $(td_test_cflags)
%C%_lib_test_error_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_dtype
TESTS += %D%/lib/test_dtype
%C%_lib_test_dtype_CFLAGS = $(td_test_cflags)
%C%_lib_test_dtype_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_buffer
TESTS += %D%/lib/test_buffer
%C%_lib_test_buffer_CFLAGS = $(td_test_cflags)
%C%_lib_test_buffer_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_tensor_ops
TESTS += %D%/lib/test_tensor_ops
%C%_lib_test_tensor_ops_CFLAGS = $(td_test_cflags)
%C%_lib_test_tensor_ops_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_tensor_index
TESTS += %D%/lib/test_tensor_index
%C%_lib_test_tensor_index_CFLAGS = $(td_test_cflags)
%C%_lib_test_tensor_index_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_tensor_index_internal
TESTS += %D%/lib/test_tensor_index_internal
%C%_lib_test_tensor_index_internal_CFLAGS = $(td_test_cflags) $(td_lib_cppflags)
%C%_lib_test_tensor_index_internal_LDADD = $(td_test_internal_ldadd)

check_PROGRAMS += %D%/lib/test_core_internal
TESTS += %D%/lib/test_core_internal
%C%_lib_test_core_internal_CFLAGS = $(td_test_cflags) $(td_lib_cppflags)
%C%_lib_test_core_internal_LDADD = $(td_test_internal_ldadd)

check_PROGRAMS += %D%/lib/test_dict
TESTS += %D%/lib/test_dict
%C%_lib_test_dict_CFLAGS = $(td_test_cflags)
%C%_lib_test_dict_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_dict_ops
TESTS += %D%/lib/test_dict_ops
%C%_lib_test_dict_ops_CFLAGS = $(td_test_cflags)
%C%_lib_test_dict_ops_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_dict_batch
TESTS += %D%/lib/test_dict_batch
%C%_lib_test_dict_batch_CFLAGS = $(td_test_cflags)
%C%_lib_test_dict_batch_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_strings
TESTS += %D%/lib/test_strings
%C%_lib_test_strings_CFLAGS = $(td_test_cflags)
%C%_lib_test_strings_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_lazy
TESTS += %D%/lib/test_lazy
%C%_lib_test_lazy_CFLAGS = $(td_test_cflags)
%C%_lib_test_lazy_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_lazy_nested
TESTS += %D%/lib/test_lazy_nested
%C%_lib_test_lazy_nested_CFLAGS = $(td_test_cflags)
%C%_lib_test_lazy_nested_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_tensor
TESTS += %D%/lib/test_tensor
%C%_lib_test_tensor_CFLAGS = $(td_test_cflags)
%C%_lib_test_tensor_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_scalar
TESTS += %D%/lib/test_scalar
%C%_lib_test_scalar_CFLAGS = $(td_test_cflags)
%C%_lib_test_scalar_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_tensor_shape
TESTS += %D%/lib/test_tensor_shape
%C%_lib_test_tensor_shape_CFLAGS = $(td_test_cflags)
%C%_lib_test_tensor_shape_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/lib/test_tensor_copy
TESTS += %D%/lib/test_tensor_copy
%C%_lib_test_tensor_copy_CFLAGS = $(td_test_cflags)
%C%_lib_test_tensor_copy_LDADD = $(td_test_ldadd)

# --- storage/ ---
check_PROGRAMS += %D%/storage/test_store_dir
TESTS += %D%/storage/test_store_dir
%C%_storage_test_store_dir_CFLAGS = $(td_test_cflags)
%C%_storage_test_store_dir_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/storage/test_mmap
TESTS += %D%/storage/test_mmap
%C%_storage_test_mmap_CFLAGS = $(td_test_cflags)
%C%_storage_test_mmap_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/storage/test_shm_arena
TESTS += %D%/storage/test_shm_arena
%C%_storage_test_shm_arena_CFLAGS = $(td_test_cflags)
%C%_storage_test_shm_arena_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/storage/test_store_tensordict
TESTS += %D%/storage/test_store_tensordict
%C%_storage_test_store_tensordict_CFLAGS = $(td_test_cflags) $(JANSSON_CFLAGS)
%C%_storage_test_store_tensordict_LDADD = $(td_test_ldadd) $(JANSSON_LIBS)

check_PROGRAMS += %D%/storage/test_store_schema
TESTS += %D%/storage/test_store_schema
%C%_storage_test_store_schema_CFLAGS = $(td_test_cflags)
%C%_storage_test_store_schema_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/storage/test_store_packed
TESTS += %D%/storage/test_store_packed
%C%_storage_test_store_packed_CFLAGS = $(td_test_cflags) $(XXHASH_CFLAGS)
%C%_storage_test_store_packed_LDADD = $(td_test_ldadd) $(XXHASH_LIBS)

check_PROGRAMS += %D%/storage/test_ring
TESTS += %D%/storage/test_ring
%C%_storage_test_ring_CFLAGS = $(td_test_cflags)
%C%_storage_test_ring_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/storage/test_store_grow
TESTS += %D%/storage/test_store_grow
%C%_storage_test_store_grow_CFLAGS = $(td_test_cflags)
%C%_storage_test_store_grow_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/storage/test_store_full
TESTS += %D%/storage/test_store_full
%C%_storage_test_store_full_CFLAGS = $(td_test_cflags)
%C%_storage_test_store_full_LDADD = $(td_test_ldadd)

check_PROGRAMS += %D%/storage/test_io
TESTS += %D%/storage/test_io
%C%_storage_test_io_CFLAGS = $(td_test_cflags) $(td_storage_cppflags)
%C%_storage_test_io_LDADD = $(td_test_internal_ldadd)

check_PROGRAMS += %D%/storage/test_store_index
TESTS += %D%/storage/test_store_index
%C%_storage_test_store_index_CFLAGS = $(td_test_cflags) $(td_storage_cppflags) \
	$(XXHASH_CFLAGS) $(JANSSON_CFLAGS)
%C%_storage_test_store_index_LDADD = $(td_test_internal_ldadd)

check_PROGRAMS += %D%/storage/test_store_journal
TESTS += %D%/storage/test_store_journal
%C%_storage_test_store_journal_CFLAGS = $(td_test_cflags) $(XXHASH_CFLAGS)
%C%_storage_test_store_journal_LDADD = $(td_test_ldadd) $(XXHASH_LIBS)

endif

# --- script tests (TAP, run through SH_LOG_DRIVER) ---
TESTS += %D%/storage/test_layering.sh
EXTRA_DIST += %D%/storage/test_layering.sh
TESTS += %D%/api/test_api_rules.sh
EXTRA_DIST += %D%/api/test_api_rules.sh %D%/api/good.h \
	%D%/api/bad-cap.h \
	%D%/api/bad-doc.h \
	%D%/api/bad-dst.h \
	%D%/api/bad-keys.h \
	%D%/api/bad-opts-init.h \
	%D%/api/bad-opts-version.h \
	%D%/api/bad-order.h \
	%D%/api/bad-orphan-key.h \
	%D%/api/bad-path.h \
	%D%/api/bad-release.h \
	%D%/api/bad-twin.h
TESTS += %D%/tools/test_cli.sh
EXTRA_DIST += %D%/tools/test_cli.sh
TESTS += %D%/bench/test_bench.sh
EXTRA_DIST += %D%/bench/test_bench.sh

