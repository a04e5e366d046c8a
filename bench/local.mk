# SPDX-License-Identifier: MIT
# Benchmarks, run by `make bench`. `make check` builds them too and runs
# every row for a couple of calls (tests/bench/test_bench.sh), timing
# nothing. They are compiled with the same CFLAGS as the library
# (configure's default -g -O2). Pass options with
# `make bench BENCH_ARGS="--json --filter nested"` (tdbench, the core rows)
# STORE_BENCH_ARGS="--large" (tdstorebench, the storage rows) and
# RING_BENCH_ARGS="--seconds 2" (ringbench, the ring buffer rows); see
# bench/README.md. `make bench-torchrl` (below) runs ringbench beside
# torchrl.

check_PROGRAMS += %D%/tdbench

%C%_tdbench_SOURCES = \
	%D%/bench.h \
	%D%/bench_impl.h \
	%D%/bench_fixtures.h \
	%D%/bench_suites.h \
	%D%/bench.c \
	%D%/bench_report.c \
	%D%/bench_alloc.c \
	%D%/bench_fixtures.c \
	%D%/bench_core.c \
	%D%/bench_memmap.c \
	%D%/bench_pytree.c \
	%D%/bench_na.c \
	%D%/tdbench.c
nodist_%C%_tdbench_SOURCES = %D%/seed_cpu.c
%C%_tdbench_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/%D%
%C%_tdbench_LDADD = libtdstore.la

# The seed table is compiled in, generated from the committed TSV.
%D%/seed_cpu.c: $(top_srcdir)/%D%/seed_cpu.tsv $(top_srcdir)/%D%/seed_cpu.awk
	$(AM_V_GEN)$(MKDIR_P) $(@D) && \
	$(AWK) -f $(top_srcdir)/%D%/seed_cpu.awk $(top_srcdir)/%D%/seed_cpu.tsv > $@.tmp && \
	mv -f $@.tmp $@

CLEANFILES += \
	%D%/tdbench$(EXEEXT) \
	%D%/seed_cpu.c \
	%D%/seed_cpu.c.tmp

EXTRA_DIST += \
	%D%/README.md \
	%D%/seed_cpu.tsv \
	%D%/seed_cpu.awk

check_PROGRAMS += %D%/tdstorebench
%C%_tdstorebench_SOURCES = %D%/tdstorebench.c %D%/bench_util.h
%C%_tdstorebench_LDADD = libtdstore.la
CLEANFILES += %D%/tdstorebench$(EXEEXT)

check_PROGRAMS += %D%/ringbench
%C%_ringbench_SOURCES = %D%/ringbench.c %D%/bench_util.h
%C%_ringbench_LDADD = libtdstore.la
CLEANFILES += %D%/ringbench$(EXEEXT)

# make bench-torchrl: torchrl's ReplayBuffer over a LazyMemmapStorage on
# ringbench's rows (bench/torchrl_ring.py, which needs a Python with torch
# and torchrl, named by PYTHON, default python3), then ringbench with those
# figures (--torchrl), so that both are measured in the same run, in the
# same directory (RING_BENCH_DIR, default $TMPDIR or /tmp), e.g.
#     make bench-torchrl PYTHON=/tmp/rlvenv/bin/python RING_BENCH_DIR=/dev/shm
# TORCHRL_ARGS go to the script, RING_BENCH_ARGS to ringbench. Neither make
# check nor CI runs it.
EXTRA_DIST += %D%/torchrl_ring.py
CLEANFILES += \
	%D%/torchrl_ring.tsv \
	%D%/torchrl_ring.tsv.tmp

bench-torchrl: %D%/ringbench$(EXEEXT)
	@dir='$(RING_BENCH_DIR)'; set -x; \
	$${PYTHON:-python3} $(top_srcdir)/%D%/torchrl_ring.py $${dir:+--dir "$$dir"} \
		--output %D%/torchrl_ring.tsv $(TORCHRL_ARGS) && \
	./%D%/ringbench$(EXEEXT) --torchrl %D%/torchrl_ring.tsv $${dir:+--dir "$$dir"} \
		$(RING_BENCH_ARGS)

bench: %D%/tdbench$(EXEEXT) %D%/tdstorebench$(EXEEXT) %D%/ringbench$(EXEEXT)
	@echo "== %D%/tdbench $(BENCH_ARGS)" >&2
	./%D%/tdbench$(EXEEXT) $(BENCH_ARGS)
	@echo "== %D%/tdstorebench $(STORE_BENCH_ARGS)" >&2
	./%D%/tdstorebench$(EXEEXT) $(STORE_BENCH_ARGS)
	@echo "== %D%/ringbench $(RING_BENCH_ARGS)" >&2
	./%D%/ringbench$(EXEEXT) $(RING_BENCH_ARGS)

.PHONY: bench bench-torchrl
