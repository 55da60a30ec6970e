#!/usr/bin/env bash
# Checks the three release archives end to end (docs/packaging.md):
#   1. builds them with scripts/package.sh if missing or older than the binaries;
#   2. per archive: `strata audit` against packaging/policies/<variant>.json, extraction to a
#      temp prefix, `strata selftest`, consumer builds (find_package and pkg-config) that run
#      without LD_LIBRARY_PATH, the Python binding from the archive (tests/python/archive_smoke.py);
#   3. no-accelerator proof: in a private mount namespace (unshare -m) every CUDA, Vulkan and
#      OpenCL library of this machine is made unloadable (/dev/null bound over each file, an
#      empty tmpfs over the CUDA toolkit, an ld.so.cache rebuilt without them), verified with
#      ldconfig -p and dlopen; the system copies of every library the archive bundles are
#      hidden too; then the CPU archive's `strata run` + `strata selftest` + C consumer +
#      Python binding, and the -cuda archive's core (and its Python binding, which must
#      refuse providers=["cuda"] naming the missing library), must still work;
#   4. doctored archives must FAIL the audit: the CPU archive with a provider added, and with
#      libstrata patched to NEED libcudart.so.13.
# Needs root (mount namespace) and patchelf. Exit 0 when every check passes.
#
# usage: scripts/check-archives.sh [BUILD_DIR]      (default build/release)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SELF="$ROOT/scripts/check-archives.sh"
PY=$(command -v /usr/bin/python3 || command -v python3)

# Libraries that are accelerator runtimes or drivers: the audit's deny list plus the NVIDIA
# driver's own libraries and the Vulkan ICDs (globs on the file name).
ACCEL_GLOBS=(libcuda.so* libcudart.so* libcublas.so* libcublasLt.so* 'libcudnn*' libnvrtc.so* libnccl.so*
  libcurand.so* libcufft.so* libcusparse.so* libcusolver.so* libnvinfer.so* libnvToolsExt.so* 'libvulkan*'
  libOpenCL.so* libamdhip64.so* 'librocm*' libhsa-runtime64.so* libMIOpen.so* librocblas.so* libze_loader.so*
  libze_intel_gpu.so* 'libnvidia*' 'libmetal*')
# Probed inside the namespace: none of these may load.
PROBE_SONAMES=(libcudart.so.13 libcuda.so.1 libcublas.so.13 libcudnn.so.9 libvulkan.so.1 libOpenCL.so.1)

system_lib_dirs() {
  local d
  {
    printf '%s\n' /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64 /lib /usr/lib /usr/local/lib \
      /usr/local/lib/x86_64-linux-gnu
    # ld.so.conf and its includes (one level, as on Debian).
    cat /etc/ld.so.conf /etc/ld.so.conf.d/*.conf 2>/dev/null | sed -e 's/#.*//' -e '/^include/d' -e '/^\s*$/d'
  } | while read -r d; do [ -d "$d" ] && readlink -f "$d"; done | sort -u
}

# ---------------------------------------------------------------- inside the namespace
# $0 --in-namespace OUTDIR CPU_PREFIX CUDA_PREFIX CONSUMER_BIN
in_namespace() {
  local out=$1 cpu=$2 cuda=$3 consumer=$4
  local masked=0 f d g
  mount --make-rprivate / || return 10
  # 1. The CUDA toolkit and any other accelerator tree: an empty tmpfs over the real folder.
  for d in /usr/local/cuda /usr/local/cuda-* /opt/cuda /opt/rocm /opt/rocm-* /usr/local/nvidia /usr/share/vulkan \
    /etc/vulkan; do
    [ -d "$d" ] || continue
    d=$(readlink -f "$d")
    mountpoint -q "$d" && grep -q " $d tmpfs " /proc/self/mounts && continue
    mount -t tmpfs -o size=64k,mode=755 strata-hidden "$d" || return 11
    echo "hidden folder: $d" >>"$out/hidden.txt"
  done
  # 2. Every accelerator library file in the system library folders: /dev/null bound over it
  #    (the loader then sees an empty file and refuses it).
  local files=()
  for d in $(system_lib_dirs); do
    for g in "${ACCEL_GLOBS[@]}"; do
      for f in "$d"/$g; do
        [ -e "$f" ] && files+=("$(readlink -f "$f")")
      done
    done
  done
  for f in $(printf '%s\n' "${files[@]}" | sort -u); do
    [ -f "$f" ] || continue
    mount --bind /dev/null "$f" || return 12
    echo "hidden file: $f" >>"$out/hidden.txt"
    masked=$((masked + 1))
  done
  for f in /dev/nvidia* /dev/dri/*; do
    [ -c "$f" ] && mount --bind /dev/null "$f" 2>/dev/null && echo "hidden device: $f" >>"$out/hidden.txt"
  done
  # 3. A private ld.so.cache built from what is left (ldconfig skips the emptied files).
  ldconfig -X -C "$out/ld.so.cache" 2>>"$out/ldconfig.log" || return 13
  mount --bind "$out/ld.so.cache" /etc/ld.so.cache || return 14
  # 4. Proof: the cache lists none of them and dlopen finds none of them.
  if ldconfig -p | grep -Ei 'libcuda|libcudart|libcublas|libcudnn|libvulkan|libOpenCL|libnvidia' >"$out/ldconfig-leak.txt"; then
    echo "ldconfig -p still lists accelerator libraries" >>"$out/errors.txt"
  fi
  local probes=("${PROBE_SONAMES[@]}" /usr/local/cuda/lib64/libcudart.so.13)
  "$PY" - "${probes[@]}" >"$out/dlopen.txt" 2>&1 <<'PYEOF' || echo "dlopen probe failed: see dlopen.txt" >>"$out/errors.txt"
import ctypes, sys
bad = 0
for name in sys.argv[1:]:
    try:
        ctypes.CDLL(name)
        print(f"LOADED {name}")
        bad += 1
    except OSError as e:
        print(f"unloadable {name}: {e}")
sys.exit(1 if bad else 0)
PYEOF
  echo "$masked" >"$out/masked-count.txt"
  # The Python binding imports and runs with every accelerator library gone. (Before step 5:
  # the interpreter itself needs system libraries the archive also bundles, such as libz.)
  local envp=(env -i PATH=/usr/bin:/bin HOME=/tmp LANG=C)
  "${envp[@]}" PYTHONPATH="$cpu/lib/python3/dist-packages" "$PY" "$ROOT/tests/python/archive_smoke.py" "$cpu" \
    >"$out/cpu-python.txt" 2>&1
  echo "cpu-python $?" >>"$out/rc.txt"
  local refuse=()
  [ -f "$cuda/lib/strata/providers/libstrata-provider-cuda.so" ] && refuse=(cuda)
  "${envp[@]}" PYTHONPATH="$cuda/lib/python3/dist-packages" "$PY" "$ROOT/tests/python/archive_smoke.py" "$cuda" \
    "${refuse[@]}" >"$out/cuda-python.txt" 2>&1
  echo "cuda-python $?" >>"$out/rc.txt"
  # 5. Hide the system copies of every library the archive bundles, so the core can only
  #    run from its own lib/ (what a machine without the Debian packages looks like).
  #    Paths are collected first: the tools used below must not lose their own libraries.
  local bundled=()
  for f in "$cpu"/lib/*.so*; do
    local n
    n=$(basename "$f")
    case "$n" in libstrata*) continue ;; esac
    for d in $(system_lib_dirs); do
      [ -e "$d/$n" ] && bundled+=("$(readlink -f "$d/$n")")
    done
  done
  for f in $(printf '%s\n' "${bundled[@]}" | sort -u); do
    mount --bind /dev/null "$f" && echo "hidden system copy: $f" >>"$out/hidden.txt"
  done
  # 6. The CPU archive and the -cuda archive's core, with a clean environment.
  local envc=(env -i PATH=/usr/bin:/bin HOME=/tmp LANG=C)
  "${envc[@]}" "$cpu/bin/strata" run "$cpu/share/strata/examples/digits.onnx" >"$out/cpu-run.txt" 2>&1
  echo "cpu-run $?" >>"$out/rc.txt"
  "${envc[@]}" "$cpu/bin/strata" selftest >"$out/cpu-selftest.txt" 2>&1
  echo "cpu-selftest $?" >>"$out/rc.txt"
  if [ -x "$consumer" ]; then
    "${envc[@]}" "$consumer" "$cpu/share/strata/examples" >"$out/cpu-consumer.txt" 2>&1
    echo "cpu-consumer $?" >>"$out/rc.txt"
  fi
  "${envc[@]}" "$cuda/bin/strata" selftest >"$out/cuda-selftest.txt" 2>&1
  echo "cuda-selftest $?" >>"$out/rc.txt"
  "${envc[@]}" "$cuda/bin/strata" selftest --require cuda >"$out/cuda-selftest-require.txt" 2>&1
  echo "cuda-selftest-require $?" >>"$out/rc.txt"
  "${envc[@]}" "$cuda/bin/strata" run --device cuda "$cuda/share/strata/examples/digits.onnx" >"$out/cuda-run-device.txt" 2>&1
  echo "cuda-run-device $?" >>"$out/rc.txt"
  return 0
}

if [ "${1:-}" = "--in-namespace" ]; then
  shift
  in_namespace "$@"
  exit $?
fi

# ---------------------------------------------------------------- driver
BUILD=${1:-$ROOT/build/release}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "check-archives: no build folder ${1:-build/release}" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
  echo "check-archives: SKIP: must run as root (the no-accelerator proof uses a mount namespace)" >&2
  exit 77
fi
for tool in unshare patchelf tar gzip cmake pkg-config cc c++; do
  command -v "$tool" >/dev/null || { echo "check-archives: '$tool' is not installed" >&2; exit 2; }
done

PASS=0
FAIL=0
ok() { echo "  ok    $*"; PASS=$((PASS + 1)); }
bad() { echo "  FAIL  $*"; FAIL=$((FAIL + 1)); }
show() { sed -e 's/^/        | /' "$1" | tail -n "${2:-15}"; }

# ---- 1. archives
need_package=0
if [ -f "$BUILD/packaging/package.env" ]; then
  # shellcheck source=/dev/null
  source "$BUILD/packaging/package.env"
  BASE=strata-$STRATA_VERSION-linux-x86_64
  for s in "" -gpu -cuda; do
    a=$BUILD/packages/$BASE$s.tar.gz
    if [ ! -f "$a" ] || [ "$BUILD/bin/strata" -nt "$a" ] || [ "$BUILD/lib/libstrata.so.${STRATA_VERSION%%.*}" -nt "$a" ]; then
      need_package=1
    fi
  done
else
  need_package=1
fi
if [ "$need_package" = 1 ]; then
  echo "== building archives (scripts/package.sh)"
  bash "$ROOT/scripts/package.sh" "$BUILD" || { echo "check-archives: packaging failed" >&2; exit 1; }
fi
# shellcheck source=/dev/null
source "$BUILD/packaging/package.env"
BASE=strata-$STRATA_VERSION-linux-x86_64
PKG=$BUILD/packages
WORK=$(mktemp -d /tmp/strata-check-archives.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export -n LD_LIBRARY_PATH STRATA_PROVIDER_PATH 2>/dev/null
unset LD_LIBRARY_PATH STRATA_PROVIDER_PATH

built() { case " $STRATA_BUILT_PROVIDERS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# audit_expect ARCHIVE POLICY LABEL MODE: MODE pass | provider-missing | fail:<kind>
audit_expect() {
  local archive=$1 policy=$2 label=$3 mode=$4 json=$WORK/audit-$3.json rc
  "$CLI" audit "$archive" --policy "$ROOT/packaging/policies/$policy.json" --json >"$json" 2>"$WORK/audit-$label.err"
  rc=$?
  local kinds
  kinds=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(sorted({v["kind"] for v in d["violations"]})))' "$json" 2>/dev/null)
  case "$mode" in
    pass)
      [ "$rc" = 0 ] && ok "$label: audit PASS (policy $policy)" ||
        { bad "$label: audit rc=$rc (policy $policy), violations: $kinds"; "$CLI" audit "$archive" --policy "$ROOT/packaging/policies/$policy.json" | tail -20 | sed 's/^/        | /'; } ;;
    provider-missing)
      # The provider is not built yet: the only acceptable violation is its missing file.
      if [ "$rc" = 1 ] && [ "$kinds" = "missing-required-file" ]; then
        ok "$label: audit FAILs only on the missing provider (not built in this tree); core contract holds"
      else
        bad "$label: audit rc=$rc, violations: ${kinds:-none} (expected only missing-required-file)"
      fi ;;
    fail:*)
      if [ "$rc" = 1 ] && [[ " $kinds " == *" ${mode#fail:} "* ]]; then
        ok "$label: doctored archive FAILs the audit ($kinds)"
      else
        bad "$label: doctored archive: audit rc=$rc, violations: ${kinds:-none} (expected ${mode#fail:})"
      fi ;;
  esac
}

CLI=$BUILD/bin/strata
declare -A PREFIX
echo "== archives in $PKG"
for variant in cpu gpu cuda; do
  case $variant in cpu) s="" p="" ;; gpu) s=-gpu p=vulkan ;; cuda) s=-cuda p=cuda ;; esac
  archive=$PKG/$BASE$s.tar.gz
  echo "-- $BASE$s.tar.gz ($(du -h "$archive" | cut -f1))"
  mkdir -p "$WORK/$variant"
  if ! tar -C "$WORK/$variant" -xzf "$archive"; then
    bad "$variant: cannot extract $archive"
    continue
  fi
  prefix=$WORK/$variant/$BASE$s
  PREFIX[$variant]=$prefix
  CLI=$prefix/bin/strata  # the archive's own CLI audits it
  if [ -z "$p" ] || built "$p"; then
    audit_expect "$archive" "$variant" "$variant" pass
  else
    audit_expect "$archive" "$variant" "$variant" provider-missing
  fi
  # Contract: the CPU archive ships no provider; the others ship exactly theirs if built.
  shipped=$(cd "$prefix" && find . -name 'libstrata-provider-*' | sort | tr '\n' ' ')
  if [ -z "$p" ]; then
    [ -z "$shipped" ] && ok "$variant: no provider file" || bad "$variant: ships providers: $shipped"
  elif built "$p"; then
    [ -f "$prefix/lib/strata/providers/libstrata-provider-$p.so" ] && ok "$variant: ships libstrata-provider-$p.so" ||
      bad "$variant: libstrata-provider-$p.so missing ($shipped)"
  fi
  # selftest, from a foreign working directory with a clean environment
  (cd "$WORK" && env -i PATH=/usr/bin:/bin HOME=/tmp "$prefix/bin/strata" selftest --json) >"$WORK/selftest-$variant.json" 2>&1
  rc=$?
  nprov=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["providers"]))' "$WORK/selftest-$variant.json" 2>/dev/null)
  if [ "$rc" = 0 ] && { [ -n "$p" ] || [ "$nprov" = 0 ]; }; then
    ok "$variant: strata selftest PASS ($nprov provider(s) shipped)"
  else
    bad "$variant: strata selftest rc=$rc providers=$nprov"
    show "$WORK/selftest-$variant.json"
  fi
  # the Python binding from the extracted archive, clean environment, foreign directory
  if (cd "$WORK" && env -i PATH=/usr/bin:/bin HOME=/tmp PYTHONPATH="$prefix/lib/python3/dist-packages" \
    "$PY" "$ROOT/tests/python/archive_smoke.py" "$prefix") >"$WORK/python-$variant.log" 2>&1; then
    ok "$variant: Python binding imports from the archive, loads its libstrata, classifies all samples"
  else
    bad "$variant: Python binding from the archive"
    show "$WORK/python-$variant.log"
  fi
  # pkg-config consumer (every variant: the core is the same, the .pc must be too)
  if PKG_CONFIG_PATH=$prefix/lib/pkgconfig bash "$ROOT/tests/consumer/build-pkgconfig.sh" "$WORK/consumer-pc-$variant" \
    >"$WORK/consumer-pc-$variant.log" 2>&1 &&
    (cd / && env -i PATH=/usr/bin:/bin "$WORK/consumer-pc-$variant" "$prefix/share/strata/examples") \
      >>"$WORK/consumer-pc-$variant.log" 2>&1; then
    ok "$variant: pkg-config C consumer builds and classifies all samples (no LD_LIBRARY_PATH)"
  else
    bad "$variant: pkg-config consumer"
    show "$WORK/consumer-pc-$variant.log"
  fi
done

# ---- find_package consumers (C and C++) against the CPU archive
cpu=${PREFIX[cpu]:-}
if [ -n "$cpu" ]; then
  if cmake -S "$ROOT/tests/consumer" -B "$WORK/consumer-cmake" -G Ninja -DCMAKE_PREFIX_PATH="$cpu" \
    -DCMAKE_BUILD_TYPE=Release >"$WORK/consumer-cmake.log" 2>&1 &&
    cmake --build "$WORK/consumer-cmake" -j 2 >>"$WORK/consumer-cmake.log" 2>&1; then
    for prog in strata_consumer_c strata_consumer_cpp; do
      if (cd / && env -i PATH=/usr/bin:/bin "$WORK/consumer-cmake/$prog" "$cpu/share/strata/examples") \
        >"$WORK/$prog.log" 2>&1 && grep -q '^OK$' "$WORK/$prog.log"; then
        ok "cpu: find_package consumer $prog classifies all samples (no LD_LIBRARY_PATH)"
      else
        bad "cpu: find_package consumer $prog"
        show "$WORK/$prog.log"
      fi
    done
  else
    bad "cpu: find_package(strata) consumer build"
    show "$WORK/consumer-cmake.log" 25
  fi
fi

# ---- 3. no-accelerator proof
echo "-- no-accelerator proof (unshare -m)"
NS=$WORK/ns
mkdir -p "$NS"
if [ -n "$cpu" ] && [ -n "${PREFIX[cuda]:-}" ]; then
  unshare -m --propagation private bash "$SELF" --in-namespace "$NS" "$cpu" "${PREFIX[cuda]}" "$WORK/consumer-pc-cpu"
  rc=$?
  if [ "$rc" != 0 ]; then
    bad "namespace setup failed (rc=$rc)"
  else
    nmask=$(cat "$NS/masked-count.txt" 2>/dev/null || echo 0)
    nfold=$(grep -c '^hidden folder' "$NS/hidden.txt" 2>/dev/null)
    nsys=$(grep -c '^hidden system copy' "$NS/hidden.txt" 2>/dev/null)
    if [ -s "$NS/errors.txt" ]; then
      bad "accelerator libraries still reachable in the namespace: $(cat "$NS/errors.txt")"
      show "$NS/dlopen.txt"
      show "$NS/ldconfig-leak.txt"
    else
      ok "namespace: $nmask accelerator library file(s) and $nfold folder(s) hidden; ldconfig -p lists none;" \
        "dlopen fails for ${PROBE_SONAMES[*]}; $nsys system copies of bundled libraries hidden"
    fi
    rcof() { awk -v k="$1" '$1 == k {print $2}' "$NS/rc.txt"; }
    [ "$(rcof cpu-run)" = 0 ] && ! grep -q WRONG "$NS/cpu-run.txt" && grep -q ' ok$' "$NS/cpu-run.txt" &&
      ok "no-accel: cpu archive 'strata run' classifies the samples" || { bad "no-accel: cpu 'strata run'"; show "$NS/cpu-run.txt"; }
    [ "$(rcof cpu-selftest)" = 0 ] && grep -q 'providers: none shipped' "$NS/cpu-selftest.txt" &&
      ok "no-accel: cpu archive 'strata selftest' PASS, no provider shipped" || { bad "no-accel: cpu selftest"; show "$NS/cpu-selftest.txt"; }
    [ "$(rcof cpu-consumer)" = 0 ] && ok "no-accel: C consumer runs" || { bad "no-accel: C consumer"; show "$NS/cpu-consumer.txt"; }
    [ "$(rcof cpu-python)" = 0 ] && ok "no-accel: cpu archive's Python binding imports and classifies the samples" ||
      { bad "no-accel: cpu Python binding"; show "$NS/cpu-python.txt"; }
    if [ "$(rcof cuda-python)" = 0 ] && { ! built cuda || grep -q "providers=\['cuda'\] refused: .*MISSING_DEPENDENCY" "$NS/cuda-python.txt"; }; then
      ok "no-accel: -cuda archive's Python binding runs on the CPU$(built cuda && echo "; providers=['cuda'] raises ProviderError naming MISSING_DEPENDENCY")"
    else
      bad "no-accel: -cuda Python binding"; show "$NS/cuda-python.txt"
    fi
    if built cuda; then
      [ "$(rcof cuda-selftest)" = 0 ] && grep -q 'cuda: unavailable.*MISSING_DEPENDENCY' "$NS/cuda-selftest.txt" &&
        ok "no-accel: -cuda archive selftest PASS, cuda reported unavailable (MISSING_DEPENDENCY)" ||
        { bad "no-accel: -cuda selftest"; show "$NS/cuda-selftest.txt"; }
      [ "$(rcof cuda-selftest-require)" = 1 ] && ok "no-accel: selftest --require cuda exits 1" ||
        { bad "no-accel: selftest --require cuda rc=$(rcof cuda-selftest-require)"; show "$NS/cuda-selftest-require.txt"; }
      [ "$(rcof cuda-run-device)" = 1 ] && grep -q MISSING_DEPENDENCY "$NS/cuda-run-device.txt" &&
        ok "no-accel: 'strata run --device cuda' fails loudly naming MISSING_DEPENDENCY" ||
        { bad "no-accel: run --device cuda rc=$(rcof cuda-run-device)"; show "$NS/cuda-run-device.txt"; }
    else
      [ "$(rcof cuda-selftest)" = 0 ] && ok "no-accel: -cuda archive core selftest PASS (cuda provider not built yet)" ||
        { bad "no-accel: -cuda selftest"; show "$NS/cuda-selftest.txt"; }
      [ "$(rcof cuda-selftest-require)" = 1 ] && ok "no-accel: selftest --require cuda exits 1 (not shipped)" ||
        { bad "no-accel: selftest --require cuda rc=$(rcof cuda-selftest-require)"; show "$NS/cuda-selftest-require.txt"; }
    fi
  fi
else
  bad "no-accelerator proof skipped: archives did not extract"
fi

# ---- 4. doctored archives must fail
echo "-- doctored archives"
if [ -n "$cpu" ]; then
  top=$(basename "$cpu")
  retar() {  # retar SRC_PARENT OUT.tar.gz
    tar -C "$1" --sort=name --owner=0 --group=0 --numeric-owner -czf "$2" "$top"
  }
  d1=$WORK/doctor-provider
  mkdir -p "$d1" && cp -a "$cpu" "$d1/"
  mkdir -p "$d1/$top/lib/strata/providers"
  # Any provider at all is forbidden in the CPU archive; use a real provider-shaped ELF file.
  src=$(ls "$BUILD"/lib/strata/providers/libstrata-provider-*.so "$BUILD"/lib/strata/test-providers/libstrata-provider-ref.so 2>/dev/null | head -1)
  [ -n "$src" ] || src=$(readlink -f "$cpu/lib/libstrata.so")
  cp "$src" "$d1/$top/lib/strata/providers/libstrata-provider-ref.so"
  retar "$d1" "$WORK/doctored-provider.tar.gz"
  audit_expect "$WORK/doctored-provider.tar.gz" cpu doctored-provider fail:forbidden-file

  d2=$WORK/doctor-needed
  mkdir -p "$d2" && cp -a "$cpu" "$d2/"
  real=$(readlink -f "$d2/$top/lib/libstrata.so")
  if patchelf --add-needed libcudart.so.13 "$real"; then
    retar "$d2" "$WORK/doctored-needed.tar.gz"
    audit_expect "$WORK/doctored-needed.tar.gz" cpu doctored-needed fail:deny-list
  else
    bad "doctored-needed: patchelf --add-needed failed"
  fi
fi

echo "== check-archives: $PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
