#!/bin/sh
# SPDX-License-Identifier: MIT
# Test wrapper for sanitizer builds: run the test, then fail it when its
# output holds a sanitizer report (LeakSanitizer reports from Criterion's
# worker processes do not change the exit status on their own).
#
# The test's output goes through a pipe, not straight into a file: Criterion
# opens CRITERION_OUTPUTS=tap:/dev/stdout itself, and reopening a regular
# file truncates it and writes from offset 0 over what stderr wrote, which
# loses the TAP plan.
out=$(mktemp "${TMPDIR:-/tmp}/td-test-grep.XXXXXX") || exit 99
rcfile=$(mktemp "${TMPDIR:-/tmp}/td-test-rc.XXXXXX") || exit 99
{ "$@" 2>&1; echo $? >"$rcfile"; } | tee "$out"
rc=$(cat "$rcfile")
rm -f "$rcfile"
if grep -Eq 'ERROR: (Leak|Address|Thread|Memory)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer' "$out"; then
	echo "Bail out! sanitizer report in the output of $*"
	rm -f "$out"
	exit 1
fi
rm -f "$out"
exit "${rc:-99}"
