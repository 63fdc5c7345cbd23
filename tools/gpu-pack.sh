#!/usr/bin/env bash
# Packs what tools/gpu-check.sh runs for a GPU machine that has no LLVM
# toolchain: tilec-run (LLVM and MLIR linked in statically, about 190 MB
# stripped) and tilec-worker, stripped and xz-compressed (about 35 MB),
# into OUT_DIR. gpu-check.sh unpacks them itself when BIN_DIR holds the
# .xz files.
#
#   tools/gpu-pack.sh OUT_DIR
set -euo pipefail
out=${1:?usage: tools/gpu-pack.sh OUT_DIR}
cd "$(dirname "$0")/.."
cargo build --release --bin tilec-run --bin tilec-worker
mkdir -p "$out"
for b in tilec-run tilec-worker; do
  tmp=$(mktemp)
  cp "target/release/$b" "$tmp"
  strip "$tmp"
  xz -6 -T0 -c "$tmp" >"$out/$b.xz"
  rm -f "$tmp"
done
ls -l "$out"
