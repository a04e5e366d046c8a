#!/bin/sh
# SPDX-License-Identifier: MIT
# The API rules of doc/design.md, as TAP: scripts/check-api.sh accepts the
# public headers, accepts a header that follows every rule (good.h) and
# rejects each bad-*.h fixture, whose first line names the violation the
# checker must report, so that the checker itself is shown able to fail.
set -u

top="${TD_SRCDIR:-${top_srcdir:-.}}"
check="$top/scripts/check-api.sh"
dir="$top/tests/api"
if [ ! -f "$check" ]; then
	echo "1..0 # SKIP $check not found (set TD_SRCDIR)"
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/td-test-api.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM
n=0
failed=0

report() {
	n=$((n + 1))
	if [ "$1" = ok ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		sed 's/^/#   /' "$tmp/out"
		failed=1
	fi
}

set -- "$dir"/bad-*.h
echo "1..$(($# + 2))"

if sh "$check" "$top/include/tdstore.h" "$top"/include/tdstore/*.h >"$tmp/out" 2>&1; then
	report ok "the public headers follow the API rules"
else
	report fail "the public headers follow the API rules"
fi

if sh "$check" "$dir/good.h" >"$tmp/out" 2>&1; then
	report ok "a header following every rule passes"
else
	report fail "a header following every rule passes"
fi

for h in "$@"; do
	want=$(sed -n '1s|^/\* expect: \(.*\) \*/$|\1|p' "$h")
	name=$(basename "$h")
	if [ -z "$want" ]; then
		echo "no expect line" >"$tmp/out"
		report fail "$name names what the checker must report"
		continue
	fi
	if sh "$check" "$h" >"$tmp/out" 2>&1; then
		report fail "$name is rejected: $want"
	elif grep -F -q -- "$want" "$tmp/out"; then
		report ok "$name is rejected: $want"
	else
		report fail "$name is rejected: $want"
	fi
done
exit "$failed"
