#!/usr/bin/env bash
# The onnx package's model tests through tilec: export them from the
# installed wheel (tools/onnx-suite.py), import each with `tilec import`,
# run it with `tilec-run --backend=cpu` and compare with the shipped
# expected outputs; a pass/fail table goes to OUT (default
# benchmarks/results/onnx-suite.md). docs/onnx.md has the last table.
#   tools/onnx-suite.sh [OUT.md] [--model NAME ...]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-benchmarks/results/onnx-suite.md}
shift || true
tools/bench-env.sh
cargo build --release --locked -p tilec-driver -p tilec-run
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.tools/bench-venv/bin/python tools/onnx-suite.py --export "$work" "$@" > /dev/null
.tools/bench-venv/bin/python tools/onnx-suite-tilec.py "$work" --bin target/release --markdown "$out" "$@"
