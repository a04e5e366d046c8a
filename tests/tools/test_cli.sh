#!/bin/sh
# SPDX-License-Identifier: MIT
# Tests of the tdstore command line, as TAP: `tdstore version` prints the
# library version, and bad command lines exit 2 with usage on stderr.
# Run by `make check` (TD_BUILDDIR points at the build tree). TD_TOOL_WRAPPER,
# when set, prefixes every tdstore run (make check-valgrind uses it).
# Everything the tool writes to stderr is copied to this script's stderr so
# that the sanitizer wrapper sees any report.
set -u

tool="${TD_BUILDDIR:-.}/tools/tdstore"
version_h="${TD_BUILDDIR:-.}/include/tdstore/version.h"
if [ ! -x "$tool" ] || [ ! -f "$version_h" ]; then
	echo "1..0 # SKIP $tool or $version_h not found (set TD_BUILDDIR)"
	exit 0
fi
expected=$(sed -n 's/^#define TD_VERSION_STRING "\(.*\)"$/\1/p' "$version_h")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/td-test-cli.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM
n=0
failed=0

# run ARGS...: run the tool, leaving stdout, stderr and the status in $tmp.
run() {
	rc=0
	${TD_TOOL_WRAPPER:-} "$tool" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	cat "$tmp/err" >&2
}

# check DESCRIPTION CONDITION...: one TAP line.
check() {
	desc=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc"
		echo "# status $rc; stdout:"; sed 's/^/#   /' "$tmp/out"
		echo "# stderr:"; sed 's/^/#   /' "$tmp/err"
		failed=1
	fi
}

echo "1..9"

run version
check "version exits 0" test "$rc" -eq 0
check "version prints 'tdstore $expected'" test "$(cat "$tmp/out")" = "tdstore $expected"

run frobnicate
check "an unknown subcommand exits 2" test "$rc" -eq 2
check "an unknown subcommand is named on stderr" grep -q "unknown subcommand 'frobnicate'" "$tmp/err"
check "an unknown subcommand prints usage on stderr, nothing on stdout" \
	sh -c 'grep -q "^usage: tdstore" "$1" && test ! -s "$2"' sh "$tmp/err" "$tmp/out"

run
check "no subcommand exits 2" test "$rc" -eq 2

run version extra
check "version with an argument exits 2" test "$rc" -eq 2

run help
check "help lists the subcommands and exits 0" \
	sh -c 'test "$1" -eq 0 && grep -q "^  version " "$2" && grep -q "^  help " "$2"' \
	sh "$rc" "$tmp/out"

run help version
check "help SUBCOMMAND prints its usage" \
	sh -c 'test "$1" -eq 0 && grep -q "^usage: tdstore version$" "$2"' sh "$rc" "$tmp/out"

exit $failed
