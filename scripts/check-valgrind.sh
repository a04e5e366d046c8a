#!/bin/sh
# SPDX-License-Identifier: MIT
# Run every test under valgrind (make check-valgrind).
#   usage: check-valgrind.sh TEST...   (paths relative to the build tree)
# Criterion programs run with --jobs=1 and valgrind follows their worker
# processes; script tests (*.sh) run the tdstore command under valgrind
# through TD_TOOL_WRAPPER. Any valgrind error or definite/indirect leak
# fails the test: a Criterion worker's valgrind errors do not change the
# program's exit status, so every process's ERROR SUMMARY is checked in the
# log too. Logs go to <test>.valgrind.log.
# Environment: LIBTOOL (to run uninstalled programs), VALGRIND (default
# valgrind), TD_SRCDIR (where script tests are found in VPATH builds),
# TD_TEST_DATA and TD_BUILDDIR as in make check.
set -u

if [ "$#" -eq 0 ]; then
	echo "usage: $0 TEST..." >&2
	exit 2
fi
libtool=${LIBTOOL:-libtool}
valgrind=${VALGRIND:-valgrind}
if ! command -v "$valgrind" >/dev/null 2>&1; then
	echo "check-valgrind: $valgrind not found" >&2
	exit 1
fi
export TD_TEST_DATA TD_BUILDDIR
# Tests that run many processes do less work when this is set.
TD_VALGRIND=1
export TD_VALGRIND
vg="$valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect --trace-children=yes --num-callers=30"

# Tests run $TD_VALGRIND_JOBS at a time (default: the number of CPUs); each
# writes its own log and result file, and results are reported in order.
jobs=${TD_VALGRIND_JOBS:-$(nproc 2>/dev/null || echo 2)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1

run_one() {
	t=$1
	log="$t.valgrind.log"
	mkdir -p "$(dirname "$log")"
	t0=$(date +%s)
	case "$t" in
	*.sh)
		script=$t
		[ -f "$script" ] || script="${TD_SRCDIR:-.}/$t"
		TD_TOOL_WRAPPER="$libtool --mode=execute $vg" \
			${SHELL:-/bin/sh} "$script" >"$log" 2>&1
		;;
	*)
		$libtool --mode=execute $vg "./$t" --jobs=1 >"$log" 2>&1
		;;
	esac
	rc=$?
	secs=$(($(date +%s) - t0))
	if [ "$rc" -eq 0 ] && ! grep -q -E '^not ok|== ERROR SUMMARY: [1-9]' "$log"; then
		echo "PASS: $t (${secs}s)" >"$log.result"
	else
		{
			echo "FAIL: $t (${secs}s, exit $rc; see $log)"
			grep -E -A12 '== (Invalid|Conditional|Use of|Syscall|Mismatched|[0-9,]+ bytes in)|^not ok' \
				"$log" | head -n 60
		} >"$log.result"
	fi
}

failed=0
ran=0
start=$(date +%s)
running=""
all_tests="$*"
for t in $all_tests; do
	rm -f "$t.valgrind.log.result"
done
for t in $all_tests; do
	# A free slot: wait until any running test (test:pid) has written its
	# result or is gone; waiting for the oldest, which may be the longest,
	# left the other slots idle.
	while :; do
		still=""
		n=0
		for r in $running; do
			[ -f "${r%:*}.valgrind.log.result" ] && continue
			kill -0 "${r##*:}" 2>/dev/null || continue
			still="$still $r"
			n=$((n + 1))
		done
		running=$still
		[ "$n" -lt "$jobs" ] && break
		sleep 1
	done
	run_one "$t" &
	running="$running $t:$!"
done
wait
for t in $all_tests; do
	ran=$((ran + 1))
	if [ -f "$t.valgrind.log.result" ]; then
		cat "$t.valgrind.log.result"
		grep -q '^PASS: ' "$t.valgrind.log.result" || failed=$((failed + 1))
		rm -f "$t.valgrind.log.result"
	else
		echo "FAIL: $t (no result)"
		failed=$((failed + 1))
	fi
done
echo "check-valgrind: $ran tests, $failed failed, $(($(date +%s) - start))s"
[ "$failed" -eq 0 ]
