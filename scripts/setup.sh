#!/bin/sh
# SPDX-License-Identifier: MIT
# Install every Debian package that building, testing and benchmarking
# tdstore needs. Idempotent; run as root on Debian 12 (or with sudo).
set -eu

PACKAGES="
	build-essential
	autoconf
	automake
	autoconf-archive
	libtool
	pkg-config
	gcc
	clang
	libclang-rt-dev
	valgrind
	libcriterion-dev
	liburing-dev
	liblz4-dev
	lz4
	libxxhash-dev
	libjansson-dev
	libdlpack-dev
	python3
	groff-base
	man-db
"

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "setup: all packages present"
	exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
fi
echo "setup: installing:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
