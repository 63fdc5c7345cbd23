#!/usr/bin/env bash
# Regenerates the figures of docs/performance.md on this machine: the
# workloads of issue 7's report (GEMM 1024^3 and BERT M0-M5, ResNet-50
# R1-R12, GEMV, pooling) scheduled by markov with 8 candidates measured,
# on 1 thread and on every core, beside numpy (OpenBLAS) and onnxruntime;
# the hand-written GEMM 1024 example for reference; each run's measured
# peak. The convolutions run with `--weights` (their weights are a
# network's, laid out once, as onnxruntime gets them: initializers it
# prepacks); the GEMMs' B stays an input, as numpy's is. On one thread
# each workload's kernels and its baseline are timed in turns (five rounds
# of 30 calls of each, alternately: tilec-bench --in-turns). Writes
# benchmarks/results/<date>-{1t,Nt,weights-1t,weights-Nt,hand-1t,hand-Nt}.json,
# prints the Markdown table and draws docs/performance.svg.
# With --tvm (first), also the GEMMs and convolutions against TVM's
# MetaSchedule with 64 trials on each thread count (installing it with
# tools/bench-env.sh --tvm): benchmarks/results/<date>-tvm-{1t,Nt}.json,
# and each workload's tuning time beside markov's search time. TVM tunes
# for minutes per workload: an hour or more for the 19 of them.
# Usage: tools/bench.sh [--tvm] [extra tilec-bench options]
set -euo pipefail
cd "$(dirname "$0")/.."

tvm=
if [ "${1:-}" = "--tvm" ]; then
  tvm=--tvm
  shift
fi
tools/setup.sh
tools/bench-env.sh $tvm
echo "==> building tilec (release)" >&2
cargo build --release --locked --workspace >&2

bin=target/release
W=benchmarks/workloads
workloads=(gemm_1024 gemm_bert_m0 gemm_bert_m1 gemm_bert_m2 gemm_bert_m3 gemm_bert_m4 gemm_bert_m5)
for r in 1 2 3 4 5 6 7 8 9 10 11 12; do workloads+=("conv2d_resnet50_r$r"); done
workloads+=(gemv_v1 gemv_v2 gemv_v3 avgpool_p1 avgpool_p3 maxpool_resnet_stem)
files=()
conv_files=()
for w in "${workloads[@]}"; do
  case $w in conv2d_*) conv_files+=("$W/$w.tile") ;; *) files+=("$W/$w.tile") ;; esac
done
if grep -qw avx512f /proc/cpuinfo; then hand=examples/gemm1024_avx512.tile; else hand=examples/gemm1024_avx2.tile; fi

cores=$(nproc)
out=benchmarks/results/$(date +%F)
runs=()
for t in 1 "$cores"; do
  # On one thread tilec's kernels and the baseline are timed in turns, one
  # call of each alternately in one process (--in-turns), so that a slow
  # phase of the machine falls on both; with more threads, in alternating
  # rounds of runs.
  turns=()
  [ "$t" -eq 1 ] && turns=(--in-turns --rounds 5)
  echo "==> $t thread(s): markov, 8 candidates measured per workload, beside numpy/onnxruntime" >&2
  "$bin/tilec-bench" --peak --threads="$t" --strategy=markov --search-options="measure-top-k=8" \
      --baseline "${turns[@]}" --repeat 10 --warmup 2 --json "$@" "${files[@]}" > "$out-${t}t.json"
  echo "==> $t thread(s): the convolutions, their weights as weights (--weights), beside onnxruntime" >&2
  "$bin/tilec-bench" --peak --threads="$t" --strategy=markov --search-options="measure-top-k=8" \
      --baseline "${turns[@]}" --repeat 10 --warmup 2 --weights --json "$@" "${conv_files[@]}" > "$out-weights-${t}t.json"
  echo "==> $t thread(s): the hand-written schedule of $hand" >&2
  "$bin/tilec-bench" --peak --threads="$t" --strategy=plain --baseline "${turns[@]}" --repeat 10 --warmup 2 --json "$@" "$hand" > "$out-hand-${t}t.json"
  runs+=(--from "$out-${t}t.json" --from "$out-weights-${t}t.json" --from "$out-hand-${t}t.json")
  [ "$cores" -gt 1 ] || break
done
"$bin/tilec-bench" "${runs[@]}" --plot docs/performance.svg
if [ -n "$tvm" ]; then
  tvm_files=()
  for w in "${workloads[@]}"; do
    case $w in gemm_* | conv2d_*) tvm_files+=("$W/$w.tile") ;; esac
  done
  for t in 1 "$cores"; do
    echo "==> $t thread(s): markov against TVM MetaSchedule (64 trials)" >&2
    "$bin/tilec-bench" --threads="$t" --strategy=markov --search-options="measure-top-k=8" \
        --baseline=tvm --repeat 10 --warmup 2 --json "$@" "${tvm_files[@]}" > "$out-tvm-${t}t.json"
    "$bin/tilec-bench" --from "$out-tvm-${t}t.json"
    [ "$cores" -gt 1 ] || break
  done
fi
