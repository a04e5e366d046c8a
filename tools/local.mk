# SPDX-License-Identifier: MIT
# The tdstore command: tools/tdstore.c dispatches to one tools/cmd_<name>.c
# per subcommand (see tools/cmd.h).
bin_PROGRAMS += tools/tdstore

tools_tdstore_SOURCES = \
	%D%/cmd.h \
	%D%/tdstore.c \
	%D%/cmd_version.c \
	%D%/cmd_demo.c \
	%D%/demo.h \
	%D%/demo_util.c \
	%D%/demo_fixtures.c \
	%D%/demo_access.c \
	%D%/demo_shape.c \
	%D%/demo_ops.c \
	%D%/demo_store.c \
	%D%/demo_ring.c

tools_tdstore_LDADD = libtdstore.la -lm
