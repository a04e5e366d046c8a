#!/bin/sh
# SPDX-License-Identifier: MIT
# Check the layering of storage/ (make check runs it: tests/storage/test_layering.sh).
#   usage: check-layering.sh LIBTDSTORAGE.a SRCDIR
# 1. No cycle among storage/ object files: file A depends on file B when A
#    uses a td_ symbol (function or data) that B defines. The files, read
#    from the convenience archive LIBTDSTORAGE.a with nm, must form an
#    acyclic graph (store.c -> placements -> shared helpers); tsort finds
#    any loop, which is printed with the symbols that close it.
# 2. The include boundary: every file of SRCDIR/storage includes only
#    headers of storage/ or lib/include/ (by plain name), and never one of
#    lib/'s private *_impl.h headers.
# Prints the graph by level (a file's level is one more than its deepest
# dependency's). Exit status 0 when both hold, 1 otherwise, 2 on bad usage.
# NM overrides `nm`.
set -eu

if [ "$#" -ne 2 ]; then
	echo "usage: $0 LIBTDSTORAGE.a SRCDIR" >&2
	exit 2
fi
archive=$1
srcdir=$2
if [ ! -f "$archive" ] || [ ! -d "$srcdir/storage" ]; then
	echo "check-layering: $archive or $srcdir/storage not found" >&2
	exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/td-check-layering.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM
status=0

# ---- 1. the object graph ----

# "member symbol type" for every td_ symbol, the member named as its
# source file (libtool's "<target>_la-" prefix and ".o" removed). -P: one
# line per symbol, "archive[member]: name type value size".
${NM:-nm} -P -A "$archive" >"$tmp/nm"
awk '
	{
		m = $1
		sub(/^.*\[/, "", m)
		sub(/\]:$/, "", m)
		sub(/^.*_la-/, "", m)
		sub(/\.o$/, "", m)
		if ($2 ~ /^td_/)
			print m, $2, $3
	}
' "$tmp/nm" >"$tmp/syms"
if [ ! -s "$tmp/syms" ]; then
	echo "check-layering: no td_ symbol in $archive" >&2
	exit 1
fi

# Edges "user definer symbol", one per symbol a file takes from another.
awk '
	NR == FNR {
		if ($3 ~ /^[A-TV-Z]$/)
			def[$2] = $1
		next
	}
	$3 == "U" && ($2 in def) && def[$2] != $1 { print $1, def[$2], $2 }
' "$tmp/syms" "$tmp/syms" | sort -u >"$tmp/edges"
awk '{ print $1, $2 }' "$tmp/edges" | sort -u >"$tmp/deps"
awk '{ print $1 }' "$tmp/syms" | sort -u >"$tmp/files"

# tsort: the file pairs, plus every file paired with itself (so that a file
# without edges is listed too). It reports each loop on stderr.
cat "$tmp/deps" >"$tmp/pairs"
awk '{ print $1, $1 }' "$tmp/files" >>"$tmp/pairs"
if ! tsort "$tmp/pairs" >"$tmp/order" 2>"$tmp/loops"; then
	status=1
	echo "check-layering: storage/ object files depend on each other in a cycle:"
	# Each loop tsort found (its files follow a "contains a loop" line),
	# then every dependency between two of its files, with their symbols.
	awk '
		NR == FNR {
			if ($0 ~ /contains a loop/) {
				n++
				next
			}
			f = $0
			sub(/^tsort: /, "", f)
			loop[n] = loop[n] " " f
			in_loop[n, f] = 1
			next
		}
		{ s[$1 " " $2] = s[$1 " " $2] " " $3 }
		END {
			for (i = 1; i <= n; i++) {
				if (seen[loop[i]]++)
					continue
				printf "%d\t0\t  loop:%s\n", i, loop[i]
				for (e in s) {
					split(e, ab, " ")
					if (in_loop[i, ab[1]] && in_loop[i, ab[2]])
						printf "%d\t1\t    %s -> %s:%s\n", i, ab[1], ab[2], s[e]
				}
			}
		}
	' "$tmp/loops" "$tmp/edges" | sort -t "$(printf '\t')" -k1,1n -k2,2n -k3 | cut -f3-
fi

# The graph by level, deepest first: a file with no storage/ dependency is
# level 0. (With a cycle the levels stop growing after as many rounds as
# there are files.)
awk '
	NR == FNR { lvl[$1] = 0; n++; next }
	{ from[++e] = $1; to[e] = $2; dep[$1] = dep[$1] " " $2 }
	END {
		for (round = 0; round < n; round++) {
			changed = 0
			for (i = 1; i <= e; i++)
				if (lvl[from[i]] < lvl[to[i]] + 1) {
					lvl[from[i]] = lvl[to[i]] + 1
					changed = 1
				}
			if (!changed)
				break
		}
		for (f in lvl)
			printf "%d %s%s\n", lvl[f], f, (f in dep) ? " ->" dep[f] : ""
	}
' "$tmp/files" "$tmp/deps" |
	sort -k1,1nr -k2,2 | awk '
		{ printf "  level %s: %s", $1, $2; for (i = 3; i <= NF; i++) printf " %s", $i; print "" }
	' >"$tmp/levels"
nfiles=$(wc -l <"$tmp/files")
nedges=$(wc -l <"$tmp/deps")
if [ "$status" -eq 0 ]; then
	echo "check-layering: $nfiles storage/ object files, $nedges dependencies, no cycle:"
else
	echo "check-layering: $nfiles storage/ object files, $nedges dependencies:"
fi
cat "$tmp/levels"

# ---- 2. the include boundary ----

for h in "$srcdir"/lib/*_impl.h; do
	[ -f "$h" ] && basename "$h"
done >"$tmp/impl"
bad=0
for f in "$srcdir"/storage/*.c "$srcdir"/storage/*.h; do
	[ -f "$f" ] || continue
	sed -n 's/^[[:blank:]]*#[[:blank:]]*include[[:blank:]]*\([<"]\)\([^>"]*\)[>"].*/\1 \2/p' "$f" >"$tmp/inc"
	while read -r kind name; do
		base=${name##*/}
		if grep -qx "$base" "$tmp/impl"; then
			echo "check-layering: storage/${f##*/} includes lib/'s private $base"
			bad=1
		elif [ "$kind" = '"' ]; then
			case $name in
			*/*)
				echo "check-layering: storage/${f##*/} includes \"$name\" by a path"
				bad=1
				;;
			*)
				if [ ! -f "$srcdir/storage/$name" ] && [ ! -f "$srcdir/lib/include/$name" ]; then
					echo "check-layering: storage/${f##*/} includes \"$name\"," \
						"which is in neither storage/ nor lib/include/"
					bad=1
				fi
				;;
			esac
		fi
	done <"$tmp/inc"
done
if [ "$bad" -eq 0 ]; then
	echo "check-layering: storage/ includes only storage/ and lib/include/ headers"
else
	status=1
fi
exit "$status"
