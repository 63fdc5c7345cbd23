#!/usr/bin/env bash
# The main job, end to end on a fresh machine: install what is missing,
# build tilec in release mode, compile a real operator (BERT's GEMM layer M3,
# 512x3072x768) through the pass pipeline, then run and time it and check it
# against the reference interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh

echo "==> building tilec (release)" >&2
cargo build --release --locked --workspace >&2

bin=target/release
workload=benchmarks/workloads/gemm_bert_m3.tile

echo "==> tilec: parse, verify and canonicalize $workload" >&2
"$bin/tilec" "$workload" --pass-pipeline='builtin.module(canonicalize)' --timing

echo "==> tilec-run: run and time it (3 runs after 1 warm-up), checked against the interpreter" >&2
"$bin/tilec-run" "$workload" --pass-pipeline='builtin.module(canonicalize)' --warmup 1 --repeat 3 --check
