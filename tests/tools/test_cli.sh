#!/bin/sh
# SPDX-License-Identifier: MIT
# Tests of the tdstore command line, as TAP: `tdstore version` prints the
# library version, `tdstore demo` runs every step and verifies it (exit 0),
# and bad command lines exit 2 with usage on stderr.
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

echo "1..16"

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

run demo --quiet
check "demo --quiet exits 0" test "$rc" -eq 0
# (stderr may hold valgrind's own ==PID== lines under make check-valgrind)
check "demo --quiet prints only the summary line" \
	sh -c 'test "$(wc -l <"$1")" -eq 1 && grep -q "^tdstore demo: OK, [0-9][0-9]* steps, [0-9][0-9]* checks passed in " "$1" && ! grep -qv "^==[0-9]*==" "$2"' \
	sh "$tmp/out" "$tmp/err"

run demo
steps=$(sed -n 's/^tdstore demo: libtdstore .*, \([0-9][0-9]*\) steps$/\1/p' "$tmp/out")
check "demo exits 0 and prints one line per step" \
	sh -c 'test "$1" -eq 0 && test -n "$3" &&
		test "$(grep -c "^\[ *[0-9][0-9]*/$3\] " "$2")" -eq "$3" &&
		grep -q "^tdstore demo: OK, $3 steps, " "$2"' sh "$rc" "$tmp/out" "${steps:-}"

run demo --help
check "demo --help prints its usage and the steps, exits 0" \
	sh -c 'test "$1" -eq 0 && grep -q "^usage: tdstore demo \[--quiet\]$" "$2" &&
		grep -q "^steps:$" "$2"' sh "$rc" "$tmp/out"

run demo --bogus
check "demo with an unknown option exits 2" test "$rc" -eq 2
check "demo with an unknown option names it and prints usage on stderr" \
	sh -c 'grep -q "unknown option '"'"'--bogus'"'"'" "$1" && grep -q "^usage: tdstore demo" "$1" &&
		test ! -s "$2"' sh "$tmp/err" "$tmp/out"

run help
check "help lists demo" grep -q "^  demo " "$tmp/out"

exit $failed
