#!/bin/sh
# SPDX-License-Identifier: MIT
# Check the public headers against the API rules of doc/design.md ("API
# rules"), over every TD_API declaration and every option struct:
#   order    outputs (out, *_out, dst; then cap / *_cap) come before every
#            other parameter;
#   doc      a parameter documented @param[out] or @param[in,out] has an
#            output's name;
#   release  *_free, *_close, *_unref, *_release return void;
#   keys     a call taking a dotted key (`const char *key`, `*_key`) has a
#            twin NAME_key taking `const td_key *`, and the reverse; a call
#            taking an array of dotted keys (`keys`) has a twin NAME_keys;
#            no call takes a pre-split path (`parts`, `*_parts`) but
#            td_key_from_path();
#   opts     an option struct td_X_opts starts with `unsigned version`, and
#            TD_X_OPTS_VERSION and TD_X_OPTS_INIT are defined.
# Prints one line per violation and exits 1 if there is any.
#   usage: check-api.sh HEADER...
set -eu

if [ "$#" -lt 1 ]; then
	echo "usage: $0 HEADER..." >&2
	exit 2
fi
for h in "$@"; do
	if [ ! -f "$h" ]; then
		echo "check-api: $h not found" >&2
		exit 2
	fi
done

awk '
function is_output(p) {
	return p == "out" || p == "dst" || p ~ /_out$/
}
function is_cap(p) {
	return p == "cap" || p ~ /_cap$/
}
function fail(msg) {
	printf "%s: %s\n", where, msg
	bad++
}
# The last identifier of a parameter declaration ("const int64_t *shape"
# gives "shape"); "" for an unnamed one ("void").
function param_name(s,    r) {
	sub(/\[[^]]*\]/, "", s)
	gsub(/[ \t]+$/, "", s)
	if (s == "void" || s == "...")
		return ""
	if (!match(s, /[A-Za-z_][A-Za-z0-9_]*$/))
		return ""
	return substr(s, RSTART, RLENGTH)
}
# Split a parameter list at top-level commas into P[1..n].
function split_params(args, P,    n, i, c, depth, cur) {
	n = 0; depth = 0; cur = ""
	for (i = 1; i <= length(args); i++) {
		c = substr(args, i, 1)
		if (c == "(") depth++
		if (c == ")") depth--
		if (c == "," && depth == 0) { P[++n] = cur; cur = ""; continue }
		cur = cur c
	}
	if (cur ~ /[^ \t]/) P[++n] = cur
	return n
}
function check_decl(text, file, line,    p, head, args, name, ret, n, P, i, pn, seen_input, ty) {
	where = file ":" line
	gsub(/[ \t]+/, " ", text)
	sub(/^ *TD_API */, "", text)
	p = index(text, "(")
	if (p == 0)
		return
	head = substr(text, 1, p - 1)
	args = substr(text, p + 1)
	sub(/\) *$/, "", args)
	if (!match(head, /[A-Za-z_][A-Za-z0-9_]*[ ]*$/))
		return
	name = substr(head, RSTART, RLENGTH)
	gsub(/ /, "", name)
	ret = substr(head, 1, RSTART - 1)
	gsub(/^ +| +$/, "", ret)
	where = where " " name "()"
	funcs[name] = 1

	if (name ~ /_(free|close|unref|release)$/ && ret != "void")
		fail("a release function returns " ret ", not void")

	n = split_params(args, P)
	seen_input = ""
	for (i = 1; i <= n; i++) {
		pn = param_name(P[i])
		if (pn == "")
			continue
		ty = P[i]
		if (is_output(pn)) {
			if (seen_input != "")
				fail("output `" pn "` comes after the input `" seen_input "`")
		} else if (is_cap(pn)) {
			if (seen_input != "")
				fail("capacity `" pn "` is not next to the outputs")
		} else if (seen_input == "") {
			seen_input = pn
		}
		if ((pn == "parts" || pn ~ /_parts$/) && name != "td_key_from_path")
			fail("takes a pre-split path `" pn "`: keyed calls take a dotted key or a td_key")
		# The key handle functions themselves (td_key_*) are not keyed calls.
		if ((pn == "key" || pn ~ /_key$/) && name !~ /^td_key_/) {
			if (ty ~ /char/) dotted[name] = 1
			else if (ty ~ /td_key/) handle[name] = 1
		}
		if (pn == "keys") {
			if (ty ~ /char/) dotted_many[name] = 1
			else if (ty ~ /td_key/) handle_many[name] = 1
		}
		decl_where[name] = where
	}
}
FNR == 1 {
	indecl = 0; incomment = 0; instruct = ""
}
# Doc comments: @param[out] NAME and @param[in,out] NAME.
/\/\*\*/ { incomment = 1 }
incomment && match($0, /@param\[(out|in,out)\][ \t]+[A-Za-z_][A-Za-z0-9_]*/) {
	s = substr($0, RSTART, RLENGTH)
	sub(/.*\][ \t]+/, "", s)
	if (!is_output(s)) {
		where = FILENAME ":" FNR
		fail("@param[out] `" s "` is not named as an output (out, *_out, dst)")
	}
}
incomment && /\*\// { incomment = 0 }
# Option structs.
/^typedef struct td_[a-z0-9_]*_opts[ \t]*\{/ {
	instruct = $3
	opts_where[instruct] = FILENAME ":" FNR
	opts_first[instruct] = ""
	next
}
instruct != "" && opts_first[instruct] == "" && /;/ {
	s = $0
	sub(/\/\*.*/, "", s)
	sub(/;.*/, "", s)
	gsub(/^[ \t]+|[ \t]+$/, "", s)
	gsub(/[ \t]+/, " ", s)
	opts_first[instruct] = s
}
instruct != "" && /^\}/ { instruct = "" }
/^#define[ \t]+TD_[A-Z0-9_]*_OPTS_(VERSION|INIT)[ \t(]/ { macros[$2] = 1 }
# TD_API declarations, read up to their semicolon.
/^[ \t]*#/ { next }
!indecl && /^[ \t]*TD_API[ \t]/ { indecl = 1; text = ""; decl_line = FNR }
indecl {
	text = text " " $0
	if (index(text, ";") == 0)
		next
	indecl = 0
	sub(/;.*/, "", text)
	check_decl(text, FILENAME, decl_line)
}
END {
	for (f in dotted) {
		if (!((f "_key") in handle)) {
			where = decl_where[f]
			fail("takes a dotted key but has no twin " f "_key taking a td_key")
		}
	}
	for (f in handle) {
		base = f
		sub(/_key$/, "", base)
		if (base == f || !(base in dotted)) {
			where = decl_where[f]
			fail("takes a td_key but is not the _key twin of a dotted-key call")
		}
	}
	for (f in dotted_many) {
		if (!((f "_keys") in handle_many)) {
			where = decl_where[f]
			fail("takes dotted keys but has no twin " f "_keys taking td_keys")
		}
	}
	for (f in handle_many) {
		base = f
		sub(/_keys$/, "", base)
		if (base == f || !(base in dotted_many)) {
			where = decl_where[f]
			fail("takes td_keys but is not the _keys twin of a dotted-keys call")
		}
	}
	for (s in opts_where) {
		where = opts_where[s]
		if (opts_first[s] != "unsigned version")
			fail(s " does not start with `unsigned version`")
		up = toupper(s)
		if (!((up "_VERSION") in macros))
			fail(s ": no " up "_VERSION")
		if (!((up "_INIT") in macros))
			fail(s ": no " up "_INIT")
	}
	if (bad > 0) {
		printf "check-api: %d violation(s) of the API rules (doc/design.md)\n", bad
		exit 1
	}
}
' "$@"
