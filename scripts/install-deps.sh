#!/usr/bin/env bash
# Installs every Debian 12 package strata needs to build, test and package.
# Run as root on a fresh machine; safe to re-run.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PKGS=(
  # toolchain
  build-essential cmake ninja-build pkg-config file patchelf
  # model import: the ONNX reference parser, checker and shape inference
  libonnx-dev libprotobuf-dev protobuf-compiler
  # CPU kernels (CPU-only: XNNPACK needs only cpuinfo and pthreadpool)
  libxnnpack-dev libpthreadpool-dev libcpuinfo-dev libopenblas-dev
  # regular expressions of the Tokenizer op (text pipelines)
  libre2-dev
  # CLI, JSON, ELF audit, archives
  libcli11-dev nlohmann-json3-dev libelf-dev libarchive-dev
  # tests and benchmarks
  googletest libgtest-dev libbenchmark-dev libonnx-testdata
  python3 python3-numpy python3-onnx python3-torch python3-torchvision python3-sklearn
  # Vulkan provider: headers, loader-free build (volk), shader compiler, CPU driver for CI
  libvulkan-dev libvulkan-volk-dev glslc mesa-vulkan-drivers vulkan-tools
  # fuzzing with clang
  clang-14 libclang-rt-14-dev
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all ${#PKGS[@]} packages present"
