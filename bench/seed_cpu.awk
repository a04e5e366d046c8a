# SPDX-License-Identifier: MIT
# seed_cpu.awk - turn bench/seed_cpu.tsv (name<TAB>ops_per_s) into the C
# table bench_seed_cpu[] of bench.h. Fails on any malformed line.
BEGIN {
	FS = "\t"
	n = 0
	bad = 0
	print "/* Generated from bench/seed_cpu.tsv by bench/seed_cpu.awk: do not edit. */"
	print "#include \"bench.h\""
	print ""
	print "const bench_seed bench_seed_cpu[] = {"
}
/^#/ || /^[ \t]*$/ { next }
NF != 2 || $1 !~ /^[][A-Za-z0-9_.-]+$/ || $2 !~ /^[0-9]+([.][0-9]+)?$/ {
	printf "%s:%d: malformed seed line: %s\n", FILENAME, FNR, $0 > "/dev/stderr"
	bad = 1
	exit 1
}
{
	printf "\t{ \"%s\", %s },\n", $1, $2
	n++
}
END {
	if (bad)
		exit 1
	if (n == 0) {
		print "seed_cpu.awk: no seed rows" > "/dev/stderr"
		exit 1
	}
	print "};"
	print ""
	printf "const size_t bench_seed_cpu_count = %d;\n", n
}
