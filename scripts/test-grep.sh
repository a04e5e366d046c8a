#!/bin/sh
# SPDX-License-Identifier: MIT
# Test wrapper for sanitizer builds: run the test, then fail it when its
# output holds a sanitizer report (LeakSanitizer reports from Criterion's
# worker processes do not change the exit status on their own).
out=$(mktemp "${TMPDIR:-/tmp}/td-test-grep.XXXXXX") || exit 99
"$@" >"$out" 2>&1
rc=$?
cat "$out"
if grep -Eq 'ERROR: (Leak|Address|Thread|Memory)Sanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer' "$out"; then
	echo "Bail out! sanitizer report in the output of $*"
	rm -f "$out"
	exit 1
fi
rm -f "$out"
exit $rc
