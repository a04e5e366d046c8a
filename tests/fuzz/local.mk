# SPDX-License-Identifier: MIT
# Fuzz targets for the parsers of on-disk data. `make check` replays each
# corpus (tests/fuzz/corpus/<target>/) through a plain driver; `make fuzz`
# builds libFuzzer binaries with clang to search for new inputs:
#     make fuzz CC=clang && ./tests/fuzz/fuzz-store_meta -max_total_time=600 \
#         $(srcdir)/tests/fuzz/corpus/store_meta
# (new inputs worth keeping are minimized with -merge=1 and committed).
EXTRA_DIST += \
	%D%/corpus \
	%D%/fuzz_util.h \
	%D%/fuzz_store_journal.c \
	%D%/fuzz_store_index.c \
	%D%/fuzz_store_meta.c \
	%D%/fuzz_store_packed.c

check_PROGRAMS += %D%/replay-store_meta
TESTS += %D%/replay-store_meta
%C%_replay_store_meta_SOURCES = %D%/replay.c %D%/fuzz_store_meta.c
%C%_replay_store_meta_CPPFLAGS = $(AM_CPPFLAGS) -DTD_FUZZ_TARGET='"store_meta"'
%C%_replay_store_meta_LDADD = libtdstore.la

check_PROGRAMS += %D%/replay-store_packed
TESTS += %D%/replay-store_packed
%C%_replay_store_packed_SOURCES = %D%/replay.c %D%/fuzz_store_packed.c
%C%_replay_store_packed_CPPFLAGS = $(AM_CPPFLAGS) $(XXHASH_CFLAGS) \
	-DTD_FUZZ_TARGET='"store_packed"'
%C%_replay_store_packed_LDADD = libtdstore.la $(XXHASH_LIBS)

check_PROGRAMS += %D%/replay-store_journal
TESTS += %D%/replay-store_journal
%C%_replay_store_journal_SOURCES = %D%/replay.c %D%/fuzz_store_journal.c
%C%_replay_store_journal_CPPFLAGS = $(AM_CPPFLAGS) -DTD_FUZZ_TARGET='"store_journal"'
%C%_replay_store_journal_LDADD = libtdstore.la

# The index parser is internal: its replay links the library's convenience archives.
check_PROGRAMS += %D%/replay-store_index
TESTS += %D%/replay-store_index
%C%_replay_store_index_SOURCES = %D%/replay.c %D%/fuzz_store_index.c
%C%_replay_store_index_CPPFLAGS = $(AM_CPPFLAGS) $(td_storage_cppflags) $(XXHASH_CFLAGS) \
	$(JANSSON_CFLAGS) -DTD_FUZZ_TARGET='"store_index"'
%C%_replay_store_index_LDADD = libtdstorage.la libtdcore.la

fuzz_targets = store_meta store_packed store_journal store_index

# The library sources are compiled into each fuzzer, so that libFuzzer sees
# their coverage.
fuzz: $(top_builddir)/config.h include/tdstore/version.h
	@for t in $(fuzz_targets); do \
		echo "  FUZZ     tests/fuzz/fuzz-$$t"; \
		$(CC) -g -O1 -fsanitize=fuzzer,address,undefined \
			$(td_lib_cppflags) $(td_storage_cppflags) \
			$(DEFAULT_INCLUDES) $(AM_CPPFLAGS) $(CPPFLAGS) $(XXHASH_CFLAGS) $(JANSSON_CFLAGS) \
			-o tests/fuzz/fuzz-$$t $(srcdir)/tests/fuzz/fuzz_$$t.c \
			$(addprefix $(srcdir)/,$(filter %.c,$(libtdcore_la_SOURCES) $(libtdstorage_la_SOURCES))) \
			$(XXHASH_LIBS) $(JANSSON_LIBS) $(PTHREAD_LIBS) $(LIBS) || exit 1; \
	done
CLEANFILES += tests/fuzz/fuzz-store_meta tests/fuzz/fuzz-store_packed \
	tests/fuzz/fuzz-store_journal tests/fuzz/fuzz-store_index
.PHONY: fuzz
