# SPDX-License-Identifier: MIT
# storage/: everything that touches files (stores, their formats, tensordict
# compatibility). Compiled into the same convenience library as lib/, so that
# libtdstore.la stays one library; storage/ depends on lib/, never the reverse.
libtdcore_la_SOURCES += \
	%D%/store_impl.h \
	%D%/fileio.c \
	%D%/coord.c \
	%D%/journal.c \
	%D%/store_dir.c \
	%D%/store_grow.c \
	%D%/mmap.c

libtdcore_la_CFLAGS += -I$(top_srcdir)/storage $(JANSSON_CFLAGS)
libtdcore_la_LIBADD += $(JANSSON_LIBS)
