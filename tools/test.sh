#!/usr/bin/env bash
# Runs every test: `cargo test` (units, properties, golden docs) and the lit
# suite (parser, verifier, pipelines, passes, driver). Installs the toolchain
# first if it is missing. Usage: tools/test.sh [extra lit args]
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh

echo "==> cargo test" >&2
cargo test --workspace --locked

echo "==> tilec-fuzz: a fixed-seed slice (docs/fuzzing.md; tools/fuzz.sh runs for hours)" >&2
cargo run --locked -q -p tilec-fuzz -- --seed 1 --iterations parse=10000,pipeline=600,interp=15000,compile=60

echo "==> building the tools for lit" >&2
cargo build --workspace --locked

echo "==> the pinned onnx and onnxruntime for lit-tests/models (tools/bench-env.sh)" >&2
# Installs .tools/bench-venv only when it is missing. Without a network it
# warns, and lit reports the onnx tests UNSUPPORTED instead of failing them.
tools/bench-env.sh || echo "test.sh: warning: tools/bench-env.sh failed; the onnx tests will be UNSUPPORTED" >&2

echo "==> lit lit-tests" >&2
if [ -x .tools/cuda-nvcc/nvidia/cuda_nvcc/bin/ptxas ]; then
  export TILEC_PTXAS="$PWD/.tools/cuda-nvcc/nvidia/cuda_nvcc/bin/ptxas"
fi
lit_out=$(mktemp)
set +e
/usr/lib/llvm-22/bin/lit -sv --param tilec_bin_dir="$PWD/target/debug" "$@" lit-tests | tee "$lit_out"
lit_status=${PIPESTATUS[0]}
set -e
passed=$(grep -Eo '^ *Passed *: *[0-9]+' "$lit_out" | grep -Eo '[0-9]+$' || echo 0)
failed=$(grep -Eo '^ *Failed *: *[0-9]+' "$lit_out" | grep -Eo '[0-9]+$' || echo 0)
rm -f "$lit_out"
echo "lit: ${passed} passed, ${failed} failed"
exit "$lit_status"
