# SPDX-License-Identifier: MIT
# storage/: everything that touches files (stores, their formats, tensordict
# compatibility). Compiled into the same convenience library as lib/, so that
# libtdstore.la stays one library; storage/ depends on lib/, never the reverse.
libtdcore_la_SOURCES += \
	%D%/store_impl.h \
	%D%/format.h \
	%D%/index.h \
	%D%/index.c \
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

libtdcore_la_CFLAGS += -I$(top_srcdir)/storage $(JANSSON_CFLAGS)
libtdcore_la_LIBADD += $(JANSSON_LIBS)
