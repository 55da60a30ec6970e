#!/usr/bin/env bash
# Builds the three release archives from a release build:
#   strata-<version>-linux-x86_64.tar.gz       CPU only: no provider at all
#   strata-<version>-linux-x86_64-gpu.tar.gz   + the Vulkan provider (if this build has it)
#   strata-<version>-linux-x86_64-cuda.tar.gz  + the CUDA provider (if this build has it)
# into <build>/packages/. Each archive is `cmake --install` of components (core, vulkan,
# cuda; see cmake/StrataInstall.cmake) into a staging folder, tarred deterministically:
# sorted names, fixed mtime (SOURCE_DATE_EPOCH, default the HEAD commit time), uid/gid 0,
# normalised modes, gzip without a timestamp. Same inputs, same bytes.
#
# usage: scripts/package.sh [BUILD_DIR]     (default: build/release, configured if missing)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build/release}

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  if [ "$BUILD" != "$ROOT/build/release" ]; then
    echo "package: $BUILD is not a configured build folder" >&2
    exit 2
  fi
  (cd "$ROOT" && cmake --preset release >/dev/null)
fi
if ! grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$BUILD/CMakeCache.txt"; then
  echo "package: $BUILD is not a Release build; archives ship the release build only" >&2
  exit 2
fi
# Only what the archives contain (never more than 2 jobs: the build machine is shared).
cmake --build "$BUILD" --target strata_package_inputs -j 2 >/dev/null

# shellcheck source=/dev/null
source "$BUILD/packaging/package.env"  # STRATA_VERSION, STRATA_BUILT_PROVIDERS
: "${SOURCE_DATE_EPOCH:=$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 0)}"
OUT=$BUILD/packages
STAGE=$OUT/staging
BASE=strata-$STRATA_VERSION-linux-x86_64
rm -rf "$STAGE"
mkdir -p "$STAGE" "$OUT"

# The core once; each variant is a copy of it plus its provider component.
cmake --install "$BUILD" --component core --prefix "$STAGE/core" >"$STAGE/install-core.log"

make_archive() {  # make_archive NAME [COMPONENT]
  local name=$1 comp=${2:-}
  local dir=$STAGE/$name/$name
  mkdir -p "$STAGE/$name"
  cp -a "$STAGE/core" "$dir"
  if [ -n "$comp" ]; then
    cmake --install "$BUILD" --component "$comp" --prefix "$dir" >"$STAGE/install-$comp.log"
  fi
  tar -C "$STAGE/$name" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    --mode='u+rwX,go+rX,go-w' --format=gnu -cf - "$name" | gzip -9n >"$OUT/$name.tar.gz.tmp"
  mv "$OUT/$name.tar.gz.tmp" "$OUT/$name.tar.gz"
  local providers
  providers=""
  if [ -d "$dir/lib/strata/providers" ]; then
    providers=$(cd "$dir/lib/strata/providers" && find . -name 'libstrata-provider-*.so' -printf '%f ' | sort)
  fi
  echo "package: $OUT/$name.tar.gz ($(du -h "$OUT/$name.tar.gz" | cut -f1), providers: ${providers:-none})"
}

make_archive "$BASE"
make_archive "$BASE-gpu" vulkan
make_archive "$BASE-cuda" cuda
for p in vulkan cuda; do
  case " $STRATA_BUILT_PROVIDERS " in
    *" $p "*) ;;
    *) echo "package: note: the $p provider is not built in $BUILD; its archive carries the core only" ;;
  esac
done
