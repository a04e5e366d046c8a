# SPDX-License-Identifier: MIT
# libtdstore: the in-memory core (lib/) and storage/ (storage/local.mk).
# Each folder is a convenience library compiled once with its own include
# path (Makefile.am: td_lib_cppflags, td_storage_cppflags): libtdstore.la
# (which exports only TD_API symbols) is made from them, and tests of
# internal td__ functions link them directly.
noinst_LTLIBRARIES += libtdcore.la
lib_LTLIBRARIES += libtdstore.la

libtdcore_la_SOURCES = \
	%D%/include/td_internal.h \
	%D%/buffer_impl.h \
	%D%/tensor_impl.h \
	%D%/error.c \
	%D%/alloc.c \
	%D%/version.c \
	%D%/dtype.c \
	%D%/buffer.c \
	%D%/tensor.c \
	%D%/tensor_iter.c \
	%D%/tensor_shape.c \
	%D%/tensor_copy.c \
	%D%/tensor_ops.c \
	%D%/tensor_index.c \
	%D%/scalar.c \
	%D%/dict_impl.h \
	%D%/dict.c \
	%D%/dict_key.c \
	%D%/dict_access.c \
	%D%/dict_iter.c \
	%D%/dict_ops.c \
	%D%/dict_flatten.c \
	%D%/dict_apply.c \
	%D%/dict_batch.c \
	%D%/dict_join.c \
	%D%/strings.c \
	%D%/lazy_impl.h \
	%D%/lazy.c \
	%D%/lazy_get.c \
	%D%/lazy_set.c \
	%D%/lazy_dense.c \
	%D%/lazy_iter.c \
	%D%/lazy_batch.c \
	%D%/lazy_schema.c

libtdcore_la_CPPFLAGS = $(AM_CPPFLAGS) $(td_lib_cppflags)
libtdcore_la_CFLAGS = $(AM_CFLAGS) $(XXHASH_CFLAGS)
libtdcore_la_LIBADD = $(XXHASH_LIBS) $(PTHREAD_LIBS) $(LIBS)

libtdstore_la_SOURCES =
libtdstore_la_LIBADD = libtdcore.la
libtdstore_la_LDFLAGS = $(AM_LDFLAGS) $(TD_LIB_LDFLAGS) \
	-version-info $(TD_LT_CURRENT):$(TD_LT_REVISION):$(TD_LT_AGE) \
	-no-undefined
