# SPDX-License-Identifier: MIT
# `make interop-check`: the write direction of the tensordict interop proof.
# write_stores writes stores with td_store_memmap() and ring buffers with
# td_ring_create() / td_ring_extend() / td_ring_add() (wrapped and not) and
# describes them in expected.json; check_tensordict_roundtrip.py loads each
# one with Python tensordict (TensorDict.load_memmap) and compares every
# value (a ring's rows also against values it recomputes). Neither
# `make` nor `make check` (nor CI) builds or runs it: it needs a Python with
# torch and tensordict, named by PYTHON (default python3), e.g.
#     PYTHON=/tmp/tdvenv/bin/python make interop-check
# (The read direction, files written by tensordict and read by tdstore, is
# tested by make check with the fixtures in tests/data/tensordict.)
EXTRA_PROGRAMS += %D%/write_stores
%C%_write_stores_SOURCES = %D%/write_stores.c
%C%_write_stores_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
%C%_write_stores_LDADD = libtdstore.la $(JANSSON_LIBS) -lm

EXTRA_DIST += %D%/check_tensordict_roundtrip.py
CLEANFILES += %D%/write_stores$(EXEEXT)

interop-check: %D%/write_stores$(EXEEXT)
	$${PYTHON:-python3} $(top_srcdir)/%D%/check_tensordict_roundtrip.py \
		%D%/write_stores$(EXEEXT)

.PHONY: interop-check
