# SPDX-License-Identifier: MIT
# storage/: everything that touches files (stores, their formats, tensordict
# compatibility). A convenience library of its own, built into libtdstore.la
# with lib/'s (lib/local.mk). storage/ depends on lib/, never the reverse, and
# sees of lib/ only td_internal.h (td_storage_cppflags).
noinst_LTLIBRARIES += libtdstorage.la
libtdstore_la_LIBADD += libtdstorage.la

libtdstorage_la_SOURCES = \
	%D%/store_impl.h \
	%D%/format.h \
	%D%/dictname.h \
	%D%/dictname.c \
	%D%/keyindex.h \
	%D%/keyindex.c \
	%D%/io.h \
	%D%/io.c \
	%D%/store_packed.c \
	%D%/fileio.c \
	%D%/coord.c \
	%D%/journal.c \
	%D%/store.c \
	%D%/store_dir.h \
	%D%/store_dir.c \
	%D%/store_dir_meta.c \
	%D%/store_dir_read.c \
	%D%/store_dir_write.c \
	%D%/store_dir_change.c \
	%D%/store_rules.c \
	%D%/mmap.c \
	%D%/ring_impl.h \
	%D%/ring.c \
	%D%/ring_io.c \
	%D%/ring_prio.c \
	%D%/ring_handle.c \
	%D%/shm_arena.c \
	%D%/store_dir_grow.c \
	%D%/dirindex.h \
	%D%/dirindex.c \
	%D%/store_dirindex.c

libtdstorage_la_CPPFLAGS = $(AM_CPPFLAGS) $(td_storage_cppflags)
libtdstorage_la_CFLAGS = $(AM_CFLAGS) $(XXHASH_CFLAGS) $(JANSSON_CFLAGS)
libtdstorage_la_LIBADD = $(JANSSON_LIBS) $(XXHASH_LIBS) $(PTHREAD_LIBS)
