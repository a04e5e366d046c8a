#!/bin/sh
# SPDX-License-Identifier: MIT
# The layering of storage/, as TAP (scripts/check-layering.sh): no cycle
# among the object files of the built libtdstorage.a, and no storage/ file
# includes a header other than storage/'s or lib/include/'s (never lib/'s
# *_impl.h). Then that the check fails, saying why, on an archive whose two
# files call each other and on a source tree where storage/ includes
# lib/buffer_impl.h. Run by `make check` (TD_BUILDDIR and TD_SRCDIR point
# at the build and source trees; NM, CC and AR name the tools, as
# configure found them).
set -u

srcdir="${TD_SRCDIR:-.}"
archive="${TD_BUILDDIR:-.}/.libs/libtdstorage.a"
script="$srcdir/scripts/check-layering.sh"
if [ ! -f "$archive" ] || [ ! -f "$script" ]; then
	echo "1..0 # SKIP $archive or $script not found (set TD_BUILDDIR and TD_SRCDIR)"
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/td-test-layering.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM
n=0
failed=0
echo "1..3"

# layering ARCHIVE SRCDIR: run the check, its output in $tmp/out.
layering() {
	rc=0
	sh "$script" "$1" "$2" >"$tmp/out" 2>&1 || rc=$?
}

# check DESC COMMAND...: one TAP line; the check's output as diagnostics.
check() {
	desc=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc"
		failed=1
	fi
	sed 's/^/# /' "$tmp/out"
}

layering "$archive" "$srcdir"
check "storage/ objects form no cycle and storage/ includes no lib/ internals" \
	test "$rc" -eq 0

# The check failed, naming both dependencies of the cycle a.c <-> b.c.
# shellcheck disable=SC2317 # called through check()
cycle_shown() {
	test "$rc" -eq 1 && grep -q "a -> b: td_b" "$tmp/out" && grep -q "b -> a: td_a" "$tmp/out"
}

# The check failed, naming the file and the private header it includes.
# shellcheck disable=SC2317 # called through check()
impl_include_shown() {
	test "$rc" -eq 1 && grep -q "storage/bad.c includes lib/'s private buffer_impl.h" "$tmp/out"
}

# Two files that call each other.
mkdir "$tmp/cycle"
printf 'int td_b(void);\nint td_a(void) { return td_b(); }\n' >"$tmp/cycle/a.c"
printf 'int td_a(void);\nint td_b(void) { return td_a() + 1; }\n' >"$tmp/cycle/b.c"
if (cd "$tmp/cycle" && ${CC:-cc} -c a.c b.c && ${AR:-ar} cr libx.a a.o b.o) >"$tmp/out" 2>&1; then
	layering "$tmp/cycle/libx.a" "$srcdir"
	check "a cycle is found and shown" cycle_shown
else
	n=$((n + 1))
	echo "ok $n # SKIP no C compiler or ar to build the test archive"
fi

# storage/ including lib/'s buffer_impl.h.
mkdir -p "$tmp/src/storage" "$tmp/src/lib/include"
printf '#include "buffer_impl.h"\n' >"$tmp/src/storage/bad.c"
: >"$tmp/src/lib/buffer_impl.h"
layering "$archive" "$tmp/src"
check "a storage/ file including a lib/ *_impl.h header is found" impl_include_shown

exit "$failed"
