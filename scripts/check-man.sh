#!/bin/sh
# SPDX-License-Identifier: MIT
# Check the man pages (make check-man).
#   usage: check-man.sh LIBTDSTORE.so TOP_SRCDIR PAGE...
# PAGE... are the installed pages (dist_man_MANS), relative to TOP_SRCDIR.
# Fails when:
#  - an exported td_ function of LIBTDSTORE.so (nm -D --defined-only) has no
#    doc/man/man3/<name>.3, or that page (or the page its `.so` alias points
#    to) does not name it in its NAME section;
#  - an alias page is not one `.so man3/<page>.3` line naming a full page;
#  - a man3 page lacks NAME, SYNOPSIS, DESCRIPTION, RETURN VALUE, ERRORS or
#    SEE ALSO, or a page's .TH does not match its file name;
#  - a page under doc/man is not in PAGE..., or a PAGE does not exist;
#  - a page renders with warnings (man --warnings -l), or wider than 80
#    columns at MANWIDTH=80;
#  - with CC set: a C example (an .EX block holding `int main(`) does not
#    compile with -std=c11 -pedantic -Wall -Wextra -Werror, link against
#    TD_LA (libtdstore.la, through LIBTOOL) and exit 0.
# Environment: NM, MAN (default nm, man); CC, CPPFLAGS, CFLAGS, LDFLAGS,
# LIBTOOL, TD_LA for the examples.
# Needs man-db and groff (Debian: man-db, groff-base; scripts/setup.sh).
set -eu

if [ "$#" -lt 2 ]; then
	echo "usage: $0 LIBTDSTORE.so TOP_SRCDIR PAGE..." >&2
	exit 2
fi
lib=$1
top=$2
shift 2
mandir=$top/doc/man
MAN=${MAN:-man}

if [ ! -f "$lib" ]; then
	echo "check-man: $lib not found (configure with --enable-shared)" >&2
	exit 1
fi
if ! command -v "$MAN" >/dev/null 2>&1; then
	echo "check-man: '$MAN' not found: install man-db and groff-base" \
		"(scripts/setup.sh)" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/td-check-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM
status=0

fail() {
	echo "check-man: ERROR: $*"
	status=1
}

# The file an alias page points to (empty for a full page).
alias_target() {
	sed -n '1s/^\.so[ \t]\{1,\}//p' "$1"
}

# The NAME section of a page, on one line.
name_section() {
	awk '/^\.SH[ \t]+"?NAME"?[ \t]*$/ { on = 1; next } /^\.SH/ { on = 0 } on' "$1" |
		tr '\n' ' '
}

# --- listed pages against the files in doc/man ------------------------------
for p in "$@"; do
	printf '%s\n' "$p"
done | sed 's|^\./||' | sort >"$tmp/listed"
(cd "$top" && find doc/man -type f -name '*.[1-9]' | sort) >"$tmp/present"
comm -23 "$tmp/present" "$tmp/listed" | while read -r p; do
	echo "check-man: ERROR: $p is not in dist_man_MANS (doc/local.mk)"
done | tee "$tmp/unlisted"
[ -s "$tmp/unlisted" ] && status=1
comm -13 "$tmp/present" "$tmp/listed" | while read -r p; do
	echo "check-man: ERROR: $p is listed in dist_man_MANS but does not exist"
done | tee "$tmp/missing-files"
[ -s "$tmp/missing-files" ] && status=1

# --- page structure ---------------------------------------------------------
: >"$tmp/full"
nalias=0
while read -r p; do
	f=$top/$p
	[ -f "$f" ] || continue
	base=${p##*/}
	sec=${base##*.}
	dir=${p%/*}
	target=$(alias_target "$f")
	if [ -n "$target" ]; then
		nalias=$((nalias + 1))
		if [ "$(wc -l <"$f")" -ne 1 ]; then
			fail "$p: an alias page must be the single line .so man$sec/<page>.$sec"
		elif [ ! -f "$mandir/$target" ]; then
			fail "$p: .so target $target does not exist"
		elif [ -n "$(alias_target "$mandir/$target")" ]; then
			fail "$p: .so target $target is itself an alias"
		fi
		continue
	fi
	echo "$p" >>"$tmp/full"
	th=$(sed -n 's/^\.TH[ \t]\{1,\}\([^ \t]*\)[ \t]\{1,\}\([^ \t]*\).*/\1 \2/p' "$f" | head -n 1)
	if [ "$th" != "${base%.*} $sec" ]; then
		fail "$p: .TH says '$th', expected '${base%.*} $sec'"
	fi
	if [ "$sec" = 3 ]; then
		for s in NAME SYNOPSIS DESCRIPTION "RETURN VALUE" ERRORS "SEE ALSO"; do
			if ! grep -q -E "^\.SH[ \t]+\"?$s\"?[ \t]*\$" "$f"; then
				fail "$p: no $s section"
			fi
		done
	fi
	case $dir in
	*/man"$sec") ;;
	*) fail "$p: a section $sec page outside man$sec/" ;;
	esac
done <"$tmp/listed"

# --- every exported function has a man3 page naming it ---------------------
${NM:-nm} -D --defined-only "$lib" | awk '
	NF >= 3 && $2 ~ /^[TtDdBbRrVvWwiu]$/ { print $3 }
' | sed 's/@.*//' | grep -E '^td_[A-Za-z0-9]' | sort -u >"$tmp/exported" || true
if [ ! -s "$tmp/exported" ]; then
	fail "no td_ symbols exported by $lib"
fi
while read -r sym; do
	page=$mandir/man3/$sym.3
	if [ ! -f "$page" ]; then
		fail "$sym has no man page (doc/man/man3/$sym.3, a full page or a .so alias)"
		continue
	fi
	target=$(alias_target "$page")
	[ -n "$target" ] && page=$mandir/$target
	if [ -f "$page" ] && ! name_section "$page" | grep -q -w -- "$sym"; then
		fail "$sym: the NAME section of ${page#"$top"/} does not name it"
	fi
done <"$tmp/exported"

# --- rendering --------------------------------------------------------------
# man resolves .so relative to the current directory: run it in doc/man.
while read -r p; do
	rel=${p#doc/man/}
	if ! (cd "$mandir" && MANWIDTH=80 LC_ALL=C.UTF-8 "$MAN" --warnings=w -l -Tutf8 "$rel" \
		>/dev/null 2>"$tmp/warnings"); then
		fail "$p: man failed"
	fi
	if [ -s "$tmp/warnings" ]; then
		fail "$p renders with warnings:"
		sed 's/^/  /' "$tmp/warnings"
	fi
	(cd "$mandir" && MANWIDTH=80 LC_ALL=C "$MAN" -l "$rel" 2>/dev/null) |
		awk -v p="$p" 'length($0) > 80 { printf "  %s: %d columns: %s\n", p, length($0), $0 }' \
		>"$tmp/wide"
	if [ -s "$tmp/wide" ]; then
		fail "$p renders wider than 80 columns:"
		cat "$tmp/wide"
	fi
done <"$tmp/full"

# --- examples ---------------------------------------------------------------
nex=0
if [ -n "${CC:-}" ]; then
	if [ -z "${LIBTOOL:-}" ] || [ -z "${TD_LA:-}" ]; then
		echo "check-man: CC is set but LIBTOOL or TD_LA is not" >&2
		exit 2
	fi
	while read -r p; do
		name=${p##*/}
		awk -v dir="$tmp" -v base="$name" '
			/^\.EX/ { on = 1; n++; buf = ""; next }
			/^\.EE/ {
				if (on && buf ~ /int main\(/) {
					f = dir "/ex-" base "-" n ".c"
					printf "%s", buf > f
					close(f)
					print f
				}
				on = 0
				next
			}
			on { buf = buf $0 "\n" }
		' "$top/$p" >"$tmp/examples"
		while read -r src; do
			nex=$((nex + 1))
			# Undo the roff escapes used in examples: \- \(aq \(dq \& \e.
			sed -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" -e 's/\\(dq/"/g' \
				-e 's/\\&//g' -e 's/\\e/\\/g' "$src" >"$src.tmp"
			mv "$src.tmp" "$src"
			obj=${src%.c}.o
			exe=${src%.c}
			# shellcheck disable=SC2086
			if ! $CC ${CPPFLAGS:-} ${CFLAGS:-} -std=c11 -pedantic -Wall -Wextra -Werror \
				-c -o "$obj" "$src" >"$tmp/log" 2>&1 ||
			   ! $LIBTOOL --quiet --tag=CC --mode=link $CC ${CFLAGS:-} ${LDFLAGS:-} \
				-o "$exe" "$obj" "$TD_LA" >>"$tmp/log" 2>&1; then
				fail "$p: the example does not build:"
				sed 's/^/  /' "$tmp/log"
				continue
			fi
			if ! $LIBTOOL --mode=execute "$exe" >"$tmp/log" 2>&1; then
				fail "$p: the example exits with an error:"
				sed 's/^/  /' "$tmp/log"
			fi
		done <"$tmp/examples"
	done <"$tmp/full"
fi

echo "check-man: $(wc -l <"$tmp/exported") exported functions," \
	"$(wc -l <"$tmp/full") pages, $nalias aliases," \
	"$( [ -n "${CC:-}" ] && echo "$nex examples checked" || echo "examples not built (CC unset)")"
exit $status
