#!/bin/sh
# SPDX-License-Identifier: MIT
# Install tdstore into a temporary prefix, then build and run consumer
# programs against it with `pkg-config --cflags --libs tdstore`, as C and as
# C++ (tests/install/consumer.c, consumer.cc), and run the installed tool.
#   usage: check-install.sh [CONFIGURE_ARGS...]   (CC, CXX from the environment)
# Needs a generated ./configure in the source tree (autoreconf -fi).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/td-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM
prefix=$tmp/prefix
jobs=$(nproc 2>/dev/null || echo 2)

echo "check-install: configuring and installing into $prefix"
mkdir "$tmp/build"
(cd "$tmp/build" && "$top/configure" -q --prefix="$prefix" --disable-tests "$@" &&
	make -j"$jobs" && make install)

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$tmp/build/config.h")
PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export PKG_CONFIG_PATH
LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH

modversion=$(pkg-config --modversion tdstore)
if [ "$modversion" != "$version" ]; then
	echo "check-install: pkg-config says $modversion, configure said $version" >&2
	exit 1
fi
cflags=$(pkg-config --cflags tdstore)
libs=$(pkg-config --libs tdstore)
echo "check-install: pkg-config --cflags --libs tdstore: $cflags $libs"

set -x
${CC:-cc} -std=c11 -pedantic -Wall -Wextra -Werror $cflags -o "$tmp/consumer" \
	"$top/tests/install/consumer.c" $libs
"$tmp/consumer" "$version"
${CXX:-c++} -std=c++11 -pedantic -Wall -Wextra -Werror $cflags -o "$tmp/consumer-cxx" \
	"$top/tests/install/consumer.cc" $libs
"$tmp/consumer-cxx" "$version"
"$prefix/bin/tdstore" version | grep -qx "tdstore $version"
set +x
echo "check-install: OK"
