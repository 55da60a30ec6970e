#!/usr/bin/env bash
# Builds the C consumer with pkg-config only:  PKG_CONFIG_PATH=<prefix>/lib/pkgconfig
#   tests/consumer/build-pkgconfig.sh OUT_BINARY
# strata.pc is relocatable (${pcfiledir}) and its Libs carry -Wl,-rpath,<libdir>, so the
# binary runs without LD_LIBRARY_PATH.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: build-pkgconfig.sh OUT_BINARY}
pkg-config --exists strata || { echo "build-pkgconfig: strata.pc not found on PKG_CONFIG_PATH='${PKG_CONFIG_PATH:-}'" >&2; exit 1; }
# shellcheck disable=SC2046  # pkg-config output is meant to be split into words
cc -std=c11 -O2 -Wall -Wextra -o "$OUT" "$HERE/consumer.c" $(pkg-config --cflags --libs strata)
echo "build-pkgconfig: built $OUT against strata $(pkg-config --modversion strata)"
