#!/bin/sh
# SPDX-License-Identifier: MIT
# Compare the functions libtdstore exports with those its public headers
# declare TD_API (make check-symbols).
#   usage: check-symbols.sh LIBTDSTORE.so INCLUDE_DIR...
# An exported symbol that no header declares TD_API (a td__ internal, a
# helper missing `static`) is an error. A TD_API function the library does
# not export is a warning, or an error when STRICT=1. NM overrides `nm`.
set -eu

if [ "$#" -lt 2 ]; then
	echo "usage: $0 LIBTDSTORE.so INCLUDE_DIR..." >&2
	exit 2
fi
lib=$1
shift
if [ ! -f "$lib" ]; then
	echo "check-symbols: $lib not found (configure with --enable-shared)" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/td-check-symbols.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM

# Declared: the name of every declaration that starts with TD_API, read up
# to its ';' (declarations may span lines): the last identifier before the
# first '(' for a function, before ';' or '[' for an object.
for dir in "$@"; do
	for h in "$dir"/tdstore.h "$dir"/tdstore/*.h "$dir"/tdstore/*.h.in; do
		[ -f "$h" ] && cat "$h"
	done
done | awk '
	/^[ \t]*#/ { next }
	!decl && /^[ \t]*TD_API[ \t]/ { decl = 1; text = "" }
	decl {
		text = text " " $0
		if (index(text, ";") == 0)
			next
		decl = 0
		sub(/;.*/, "", text)
		if (index(text, "(") > 0)
			sub(/\(.*/, "", text)
		sub(/\[.*/, "", text)
		sub(/[ \t]+$/, "", text)
		if (match(text, /[A-Za-z_][A-Za-z0-9_]*$/))
			print substr(text, RSTART, RLENGTH)
	}
' | sort -u >"$tmp/declared"

# Exported: every defined dynamic symbol but the linker's own.
${NM:-nm} -D --defined-only "$lib" | awk '
	NF >= 3 && $2 ~ /^[TtDdBbRrVvWwiu]$/ { print $3 }
' | sed 's/@.*//' | grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$' |
	sort -u >"$tmp/exported"

if [ ! -s "$tmp/declared" ]; then
	echo "check-symbols: no TD_API declarations found under $*" >&2
	exit 1
fi

status=0
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
internal=$(grep -E '^td__' "$tmp/exported" || true)

if [ -n "$extra" ]; then
	echo "check-symbols: ERROR: exported but not declared TD_API in a public header:"
	echo "$extra" | sed 's/^/  /'
	status=1
fi
if [ -n "$internal" ]; then
	echo "check-symbols: ERROR: internal td__ symbols exported:"
	echo "$internal" | sed 's/^/  /'
	status=1
fi
if [ -n "$missing" ]; then
	if [ "${STRICT:-0}" = 1 ]; then
		level=ERROR
		status=1
	else
		level=warning
	fi
	echo "check-symbols: $level: declared TD_API but not exported" \
		"($(echo "$missing" | wc -l) functions):"
	echo "$missing" | sed 's/^/  /'
fi
echo "check-symbols: $(wc -l <"$tmp/exported") exported," \
	"$(wc -l <"$tmp/declared") declared TD_API in the headers"
exit $status
