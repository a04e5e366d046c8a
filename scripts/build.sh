#!/bin/sh
# SPDX-License-Identifier: MIT
# Configure and build tdstore in ./_build (VPATH), reusing it when present.
# Extra arguments go to configure.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
	autoreconf -fi
fi
mkdir -p _build
cd _build
if [ ! -f Makefile ] || [ "$#" -gt 0 ]; then
	../configure "$@"
fi
make -j"$(nproc)"
