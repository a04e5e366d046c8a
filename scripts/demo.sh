#!/bin/sh
# SPDX-License-Identifier: MIT
# README command 1: install, build, and run the end-to-end demo.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
"$top/scripts/build.sh"
exec "$top/_build/tools/tdstore" demo "$@"
