#!/usr/bin/env bash
# Packs a built tree for scripts/gpu-check.sh on a GPU machine that has the NVIDIA driver and
# the CUDA 13 runtime libraries but not strata's build dependencies (Debian's libonnx,
# protobuf, XNNPACK, OpenBLAS...), e.g. a rented H200 image.
#
# The tarball holds BUILD_DIR's bin/strata, bin/strata_tests and lib/ (libstrata, providers,
# test providers), plus deps/: every shared library those need that is neither glibc nor part
# of CUDA or the driver, copied from this machine (the Vulkan loader included, since GPU
# images often lack it). Unpack it at the same absolute path as BUILD_DIR (the tests have that
# path compiled in) and run `STRATA_GPU_PREBUILT=1 scripts/gpu-check.sh BUILD_DIR`.
#
# usage: scripts/gpu-bundle.sh BUILD_DIR OUT.tar.xz [EXTRA_PROVIDER_DIR [OTHER_PROVIDER_DIR]]
#   EXTRA_PROVIDER_DIR: a folder whose libstrata-provider-*.so (and .json) replace the build's,
#   e.g. a CUDA provider built for the target GPU's architecture; the build's own go to
#   lib/strata/providers.orig/, where gpu-check.sh shows how the GPU takes them.
#   OTHER_PROVIDER_DIR: providers to put in providers.orig/ instead, e.g. one with machine code
#   for another GPU generation only, which the GPU must refuse by name.
set -euo pipefail
BUILD=${1:?usage: gpu-bundle.sh BUILD_DIR OUT.tar.xz [EXTRA_PROVIDER_DIR]}
OUT=${2:?usage: gpu-bundle.sh BUILD_DIR OUT.tar.xz [EXTRA_PROVIDER_DIR]}
EXTRA=${3:-}
OTHER=${4:-}
BUILD=$(cd "$BUILD" && pwd)
for f in bin/strata bin/strata_tests lib/libstrata.so; do
  [[ -e "$BUILD/$f" ]] || { echo "gpu-bundle: $BUILD/$f is missing (build strata_cli and strata_tests first)" >&2; exit 2; }
done

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/deps"
cp -a "$BUILD/bin/strata" "$BUILD/bin/strata_tests" "$STAGE/bin/"
cp -a "$BUILD/lib" "$STAGE/lib"
rm -rf "$STAGE/lib/"*.a "$STAGE/lib/cmake" "$STAGE/lib/pkgconfig"
if [[ -n "$EXTRA" ]]; then
  mv "$STAGE/lib/strata/providers" "$STAGE/lib/strata/providers.orig"
  cp -a "$STAGE/lib/strata/providers.orig" "$STAGE/lib/strata/providers"
  cp -a "$EXTRA"/libstrata-provider-*.so "$STAGE/lib/strata/providers/"
  cp -a "$EXTRA"/libstrata-provider-*.json "$STAGE/lib/strata/providers/" 2>/dev/null || true
  if [[ -n "$OTHER" ]]; then
    cp -a "$OTHER"/libstrata-provider-*.so "$STAGE/lib/strata/providers.orig/"
    cp -a "$OTHER"/libstrata-provider-*.json "$STAGE/lib/strata/providers.orig/" 2>/dev/null || true
  fi
fi

# Every resolved dependency of the binaries, libraries and providers, minus glibc (the target's
# must be used), CUDA and driver libraries (the target's match its driver), and strata's own.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libcuda|libcudart|libcublas|libcudnn|libnvidia|libstrata)'
mapfile -t objs < <(find "$STAGE/bin" "$STAGE/lib" -type f \( -name '*.so*' -o -perm -u+x \))
for o in "${objs[@]}"; do
  # (ldd fails on files that are not dynamic objects: those have nothing to list)
  { LD_LIBRARY_PATH="$BUILD/lib:${LD_LIBRARY_PATH:-}" ldd "$o" 2>/dev/null || true; } |
    awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] && continue
  cp -L "$path" "$STAGE/deps/$name"
done
# Loaded with dlopen, so ldd does not list them: the Vulkan loader, and the GL dispatch
# libraries that NVIDIA's Vulkan driver (libGLX_nvidia.so.0) needs and GPU compute images lack.
for so in /usr/lib/x86_64-linux-gnu/{libvulkan.so.1,libGLdispatch.so.0,libGLX.so.0,libEGL.so.1,libOpenGL.so.0}; do
  [[ -e "$so" ]] && cp -L "$so" "$STAGE/deps/"
done

tar -C "$STAGE" -cf - . | xz -T0 -6 >"$OUT"
echo "gpu-bundle: $OUT ($(du -h "$OUT" | cut -f1)); deps: $(ls "$STAGE/deps" | tr '\n' ' ')"
