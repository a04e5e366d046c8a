# SPDX-License-Identifier: MIT
# `make headertest`: <tdstore.h> compiled as strict C11 (the project's
# language: td_value's union is anonymous, which C99 lacks) and as C++11
# (when configure found a C++ compiler), each program linked against
# libtdstore and run; and the C example of README.md compiled as strict C11.
EXTRA_DIST += \
	%D%/headertest.c \
	%D%/headertest.cc

td_ht_cppflags = -I$(top_srcdir)/include -I$(top_builddir)/include $(CPPFLAGS)
td_ht_warnings = -pedantic -Wall -Wextra -Werror
td_ht_dir = tests/headertest

CLEANFILES += \
	$(td_ht_dir)/headertest-c \
	$(td_ht_dir)/headertest-c.o \
	$(td_ht_dir)/headertest-cxx \
	$(td_ht_dir)/headertest-cxx.o \
	$(td_ht_dir)/readme_example.c \
	$(td_ht_dir)/readme_example.o

headertest: headertest-c headertest-cxx headertest-readme

headertest-c: libtdstore.la
	@$(MKDIR_P) $(td_ht_dir)
	$(AM_V_CC)$(CC) $(td_ht_cppflags) $(CFLAGS) -std=c11 $(td_ht_warnings) \
		-c -o $(td_ht_dir)/headertest-c.o $(srcdir)/$(td_ht_dir)/headertest.c
	$(AM_V_CCLD)$(LIBTOOL) $(AM_V_lt) --tag=CC --mode=link $(CC) $(CFLAGS) \
		$(AM_LDFLAGS) $(LDFLAGS) -o $(td_ht_dir)/headertest-c \
		$(td_ht_dir)/headertest-c.o libtdstore.la
	$(td_ht_dir)/headertest-c
	@echo "headertest: <tdstore.h> is valid C11 (-std=c11 $(td_ht_warnings))"

if TD_HAVE_CXX
headertest-cxx: libtdstore.la
	@$(MKDIR_P) $(td_ht_dir)
	$(AM_V_GEN)$(CXX) $(td_ht_cppflags) $(CXXFLAGS) -std=c++11 $(td_ht_warnings) \
		-c -o $(td_ht_dir)/headertest-cxx.o $(srcdir)/$(td_ht_dir)/headertest.cc
	$(AM_V_GEN)$(LIBTOOL) $(AM_V_lt) --tag=CXX --mode=link $(CXX) $(CXXFLAGS) \
		$(AM_LDFLAGS) $(LDFLAGS) -o $(td_ht_dir)/headertest-cxx \
		$(td_ht_dir)/headertest-cxx.o libtdstore.la
	$(td_ht_dir)/headertest-cxx
	@echo "headertest: <tdstore.h> is valid C++11 (-std=c++11 $(td_ht_warnings))"
else
headertest-cxx:
	@echo "headertest: no C++11 compiler found by configure; C++ part skipped"
endif

# The README's C example is compiled, not linked: it may use functions that
# later commits implement.
headertest-readme: $(srcdir)/README.md
	@$(MKDIR_P) $(td_ht_dir)
	$(AM_V_GEN)$(AWK) '/^```c$$/ { on = 1; next } /^```$$/ { on = 0 } on' \
		$(srcdir)/README.md > $(td_ht_dir)/readme_example.c
	@test -s $(td_ht_dir)/readme_example.c || \
		{ echo "headertest: no \`\`\`c block in README.md" >&2; exit 1; }
	$(AM_V_CC)$(CC) $(td_ht_cppflags) $(CFLAGS) -std=c11 $(td_ht_warnings) \
		-c -o $(td_ht_dir)/readme_example.o $(td_ht_dir)/readme_example.c
	@echo "headertest: the C example of README.md compiles as C11"

.PHONY: headertest headertest-c headertest-cxx headertest-readme
