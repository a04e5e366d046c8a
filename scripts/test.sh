#!/bin/sh
# SPDX-License-Identifier: MIT
# README command 2: install, build, and run the whole test suite.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
"$top/scripts/build.sh" --enable-werror --enable-tests
cd "$top/_build"
if ! make -j"$(nproc)" check; then
	find . -name '*.log' -path './tests/*' -exec grep -l -E '^(not ok|Bail out)' {} + 2>/dev/null |
		while read -r f; do echo "==> $f"; grep -E -B2 -A20 '^(not ok|Bail out)' "$f" | head -n 80; done
	exit 1
fi
