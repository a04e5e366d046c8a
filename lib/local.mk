# SPDX-License-Identifier: MIT
# libtdstore: the in-memory core (lib/) - later issues add storage/ and gpu/.
lib_LTLIBRARIES += libtdstore.la

libtdstore_la_SOURCES = \
	%D%/td_internal.h \
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
	%D%/tensor_index.c

libtdstore_la_CFLAGS = $(AM_CFLAGS) $(XXHASH_CFLAGS)
libtdstore_la_LIBADD = $(XXHASH_LIBS) $(PTHREAD_LIBS) $(LIBS)
libtdstore_la_LDFLAGS = $(AM_LDFLAGS) \
	-version-info $(TD_LT_CURRENT):$(TD_LT_REVISION):$(TD_LT_AGE) \
	-no-undefined
