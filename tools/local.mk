# SPDX-License-Identifier: MIT
# The tdstore command: tools/tdstore.c dispatches to one tools/cmd_<name>.c
# per subcommand (see tools/cmd.h).
bin_PROGRAMS += tools/tdstore

tools_tdstore_SOURCES = \
	%D%/cmd.h \
	%D%/tdstore.c \
	%D%/cmd_version.c

tools_tdstore_LDADD = libtdstore.la
