#!/usr/bin/env bash
# Installs what tilec needs on a fresh Debian 12 machine, and nothing twice:
# the LLVM 22 / MLIR toolchain from Debian's packages (lit and FileCheck for
# the tests; LLVM and MLIR libraries for code generation) and Python 3 for
# lit. Rust (cargo 1.95) must already be installed.
set -euo pipefail

packages=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libpolly-22-dev libclang-22-dev libzstd-dev zlib1g-dev
  python3 python3-numpy python3-pip python3-venv build-essential
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: error: cargo is not installed; install Rust 1.95 or newer (https://rustup.rs)" >&2
  exit 1
fi

for tool in lit FileCheck not; do
  if [ ! -x "/usr/lib/llvm-22/bin/$tool" ]; then
    echo "setup: error: /usr/lib/llvm-22/bin/$tool is missing after installing llvm-22-tools" >&2
    exit 1
  fi
done

# NVIDIA's PTX assembler, to validate generated PTX in the tests (no GPU
# needed). It ships in a PyPI package; it goes to .tools/ (git-ignored).
# Without it the PTX tests are reported UNSUPPORTED, not failed.
ptxas_dir=".tools/cuda-nvcc"
if [ ! -x "$ptxas_dir/nvidia/cuda_nvcc/bin/ptxas" ]; then
  echo "setup: installing ptxas (nvidia-cuda-nvcc-cu12) into $ptxas_dir" >&2
  if ! PIP_BREAK_SYSTEM_PACKAGES=1 /usr/bin/python3 -m pip install --quiet --disable-pip-version-check \
      --target "$ptxas_dir" nvidia-cuda-nvcc-cu12==12.9.86 >&2; then
    echo "setup: warning: could not install ptxas; PTX will be checked as text only" >&2
  fi
fi
