#!/bin/sh
# SPDX-License-Identifier: MIT
# Smoke test of the benchmark harness, as TAP: every row of bench/tdbench
# runs a few calls (each call checks its own result, so a broken fixture or
# a wrong answer is an error row and a non-zero exit), in the table and the
# JSON form, and bad command lines exit 2. Timings are not looked at.
# Run by `make check` (TD_BUILDDIR points at the build tree); under the
# sanitizer build the wrapper also fails it on any report, which covers the
# rows' fixtures and teardown. TD_TOOL_WRAPPER, when set, prefixes each run.
set -u

bench="${TD_BUILDDIR:-.}/bench/tdbench"
if [ ! -x "$bench" ]; then
	echo "1..0 # SKIP $bench not found (set TD_BUILDDIR)"
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/td-test-bench.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM
n=0
failed=0
quick="--warmup 0 --rounds 1 --calls 2 --repeat 1"

run() {
	rc=0
	${TD_TOOL_WRAPPER:-} "$bench" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	cat "$tmp/err" >&2
}

check() {
	desc=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc"
		echo "# exit status $rc; stdout:"
		sed 's/^/#   /' "$tmp/out" | tail -20
		failed=1
	fi
}

# shellcheck disable=SC2086 # $quick is a list of options
run $quick
check "every row runs (table)" test "$rc" -eq 0
check "the table has the summary" grep -q '^rows: [0-9]* measured, [0-9]* n/a, 0 errors$' "$tmp/out"
check "the memory table is there" grep -q 'per leaf' "$tmp/out"
check "the fixed work is stated" grep -q '1 rounds of 2 calls per row' "$tmp/out"

# shellcheck disable=SC2086
run $quick --no-memory --json --filter 'test_membership*' --filter test_clone
check "every selected row runs (JSON)" test "$rc" -eq 0
check "JSON names the rows" grep -q '"name": "test_clone"' "$tmp/out"
check "JSON rows are ok" sh -c "! grep -q '\"status\": \"error\"' '$tmp/out'"
check "JSON records the calls" grep -q '"calls": 2' "$tmp/out"

run --calls 0
check "--calls 0 is refused" test "$rc" -eq 2
check "a refusal prints the usage" grep -q '^usage:' "$tmp/err"
run --filter no_such_row_anywhere
check "a filter that matches nothing exits 2" test "$rc" -eq 2
run --list
check "--list lists measured and n/a rows" sh -c "grep -q '^test_clone' '$tmp/out' && grep -q 'n/a' '$tmp/out'"

# The storage benchmark: every row on 1 MB stores, once (a smoke test).
storebench="${TD_BUILDDIR:-.}/bench/tdstorebench"
rc=0
${TD_TOOL_WRAPPER:-} "$storebench" --quick --floor --dir "$tmp" >"$tmp/out" 2>"$tmp/err" || rc=$?
cat "$tmp/err" >&2
check "tdstorebench --quick runs every row" test "$rc" -eq 0
check "tdstorebench saves, reads and opens" sh -c "grep -q '^save/many_small/1MB' '$tmp/out' && \
	grep -q '^save-files/deep/1MB' '$tmp/out' && grep -q '^save-rawfiles/deep/1MB' '$tmp/out' && \
	grep -q '^read/deep/1MB' '$tmp/out' && grep -q '^open/1000_leaves/1MB' '$tmp/out'"
check "tdstorebench opens directory stores with and without their index" sh -c \
	"grep -q '^open/1000_leaves/1MB .* open-json ' '$tmp/out' && \
	grep -q '^open-json/1000_leaves/1MB ' '$tmp/out' && grep -q '^open-packed/1000_leaves' '$tmp/out'"
rc=0
${TD_TOOL_WRAPPER:-} "$storebench" --quick --json --filter open/10_ --dir "$tmp" >"$tmp/out" \
	2>"$tmp/err" || rc=$?
check "tdstorebench --json" sh -c "test $rc -eq 0 && grep -q '\"name\": \"open/10_leaves/1MB\"' '$tmp/out'"
rc=0
"$storebench" --bogus >"$tmp/out" 2>"$tmp/err" || rc=$?
check "tdstorebench refuses an unknown option" test "$rc" -eq 2

# The ring benchmark: every row on small rings for a few milliseconds.
ringbench="${TD_BUILDDIR:-.}/bench/ringbench"
rc=0
${TD_TOOL_WRAPPER:-} "$ringbench" --quick --dir "$tmp" >"$tmp/out" 2>"$tmp/err" || rc=$?
cat "$tmp/err" >&2
check "ringbench --quick runs every row" test "$rc" -eq 0
check "ringbench extends, samples and copies" sh -c "grep -q '^extend/64B/w2 ' '$tmp/out' && \
	grep -q '^sample256/28KiB ' '$tmp/out' && grep -q '^memcpy/seq/28KiB ' '$tmp/out' && \
	grep -q '^rows: 18;' '$tmp/out'"
check "ringbench prints no torchrl figure without --torchrl" sh -c "! grep -q torchrl '$tmp/out'"
rc=0
${TD_TOOL_WRAPPER:-} "$ringbench" --quick --json --filter sample256/64B --dir "$tmp" \
	>"$tmp/out" 2>"$tmp/err" || rc=$?
check "ringbench --json" sh -c "test $rc -eq 0 && grep -q '\"name\": \"sample256/64B\"' '$tmp/out' && \
	grep -q '\"torchrl_calls_per_s\": null, \"torchrl_ratio\": null' '$tmp/out'"
rc=0
"$ringbench" --bogus >"$tmp/out" 2>"$tmp/err" || rc=$?
check "ringbench refuses an unknown option" test "$rc" -eq 2

# ringbench --torchrl: the table bench/torchrl_ring.py writes (made up here:
# the script needs torch and torchrl), its figures and ratios in the output.
ringbench_torchrl() {
	rc=0
	${TD_TOOL_WRAPPER:-} "$ringbench" --quick --filter 64B --dir "$tmp" --torchrl "$tmp/trl.tsv" \
		"$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
}
printf '# torchrl_ring.py: a made-up table\nname\tcalls_per_s\trows_per_s\n' >"$tmp/trl.tsv"
printf 'sample256/64B\t4000.0\t1024000.0\nextend/64B/w1\t2000.5\t512128.0\n' >>"$tmp/trl.tsv"
printf 'sample256/28KiB\t50\t12800\n' >>"$tmp/trl.tsv"
ringbench_torchrl
cat "$tmp/err" >&2
check "ringbench --torchrl gives torchrl's figure and the ratio" sh -c "test $rc -eq 0 && \
	grep -q '^sample256/64B .* 4000 *[0-9.]*x ' '$tmp/out' && \
	grep -q '^extend/64B/w1 .* 2000 *[0-9.]*x ' '$tmp/out' && \
	grep -q '^extend/64B/w2 .* - *- ' '$tmp/out' && \
	grep -q '^torchrl: torchrl_ring.py: a made-up table' '$tmp/out'"
ringbench_torchrl --json
check "ringbench --torchrl --json" sh -c "test $rc -eq 0 && \
	grep -q '\"name\": \"sample256/64B\".*\"torchrl_calls_per_s\": 4000.0, \"torchrl_ratio\": [0-9]' \
	'$tmp/out' && grep -q '\"name\": \"extend/64B/w2\".*\"torchrl_ratio\": null' '$tmp/out'"
printf 'name\tcalls_per_s\trows_per_s\nsample256/65B\t1\t256\n' >"$tmp/trl.tsv"
ringbench_torchrl
check "ringbench --torchrl refuses a row it does not measure" sh -c \
	"test $rc -eq 1 && grep -q 'trl.tsv:2: a row ringbench does not measure' '$tmp/err'"
printf 'sample256/64B\t1\t256\n' >"$tmp/trl.tsv"
ringbench_torchrl
check "ringbench --torchrl refuses a table without its header" test "$rc" -eq 1
printf 'name\tcalls_per_s\trows_per_s\nsample256/64B\t0\t256\n' >"$tmp/trl.tsv"
ringbench_torchrl
check "ringbench --torchrl refuses a figure that is not > 0" test "$rc" -eq 1
printf 'name\tcalls_per_s\trows_per_s\nsample256/64B\t12 calls\t256\n' >"$tmp/trl.tsv"
ringbench_torchrl
check "ringbench --torchrl refuses a line that is not three fields" test "$rc" -eq 1
rm -f "$tmp/trl.tsv"
ringbench_torchrl
check "ringbench --torchrl fails on a missing file" test "$rc" -eq 1

# bench/torchrl_ring.py (run by make bench-torchrl, not here: it needs torchrl)
# is at least valid Python.
n=$((n + 1))
script="${TD_SRCDIR:-.}/bench/torchrl_ring.py"
if ! command -v python3 >/dev/null 2>&1; then
	echo "ok $n - torchrl_ring.py parses # SKIP no python3"
elif python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$script"; then
	echo "ok $n - torchrl_ring.py parses"
else
	echo "not ok $n - torchrl_ring.py parses"
	failed=1
fi

echo "1..$n"
exit "$failed"
