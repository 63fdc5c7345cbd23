#!/usr/bin/env bash
# The main job, end to end on a fresh machine: install what is missing,
# build tilec in release mode, compile a real operator (GEMM 1024^3, f32,
# with a hand-written BLIS-style schedule for this CPU's vector ISA) to an
# x86-64 object through MLIR and LLVM, then compile, run and time it on
# this machine (1 core and all cores), checked against the reference
# interpreter, as a share of the machine's FMA peak measured first; and let
# the search pass schedule the bare operator, beside numpy/OpenBLAS.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh
tools/bench-env.sh   # numpy (OpenBLAS) for the side-by-side baseline

echo "==> building tilec (release)" >&2
cargo build --release --locked --workspace >&2

bin=target/release
if grep -qw avx512f /proc/cpuinfo; then
  example=examples/gemm1024_avx512.tile
elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  example=examples/gemm1024_avx2.tile
else
  echo "demo: this CPU has neither AVX-512 nor AVX2+FMA; tilec's CPU targets need one of them" >&2
  exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "==> tilec: compile $example to an object (the C ABI is in docs/codegen.md)" >&2
"$bin/tilec" "$example" --emit=obj -o "$out/gemm.o" --timing
nm "$out/gemm.o" | grep ' T '

echo "==> this machine's measured f32 FMA peak and memory bandwidth (generated kernels), on 1 core and on every core;" >&2
echo "    cached per machine (~/.cache/tilec/calibration.json), so the ratios below are to this machine's peak, not a datasheet's" >&2
"$bin/tilec-bench" --peak --threads=1
"$bin/tilec-bench" --peak

echo "==> tilec-run: compile, run and time it on 1 core (10 runs after 2 warm-ups), checked against the interpreter" >&2
"$bin/tilec-run" "$example" --backend=cpu --threads=1 --warmup 2 --repeat 10 --check

echo "==> tilec-run: the same on every core" >&2
"$bin/tilec-run" "$example" --backend=cpu --warmup 2 --repeat 10 --check

echo "==> the same GEMM, unscheduled, scheduled by the search pass (Gensor's Markov construction, 8 candidates measured), beside numpy" >&2
"$bin/tilec-bench" benchmarks/workloads/gemm_1024.tile --strategy=markov --search-options="measure-top-k=8" --threads=1 --repeat 10 --warmup 2 --baseline
