#!/usr/bin/env bash
# The GPU check: every workload and CUDA example through
# `tilec-run --backend=cuda`, on a machine with an NVIDIA GPU and its driver.
# CI has no GPU, so this is run by hand (docs/codegen.md, "Running on a GPU").
#
#   tools/gpu-check.sh BIN_DIR OUT_DIR [TARGET]
#
# BIN_DIR holds tilec-run and tilec-worker, or their .xz files from
# tools/gpu-pack.sh; TARGET is a CUDA target name (default sm90).
# Seven phases, each writing as it goes, so a run cut short still says
# what it reached:
#   1. correctness: the CPU-sized workloads (`*_small.tile`) and the
#      examples scheduled for TARGET, compiled by the default pipeline
#      (markov, construction only), run once and checked against the
#      interpreter, several at a time (their times are not used);
#   2. speed: each full-size workload alone on the GPU, median of 20 runs
#      after 3 warm-ups, beside PyTorch (cuBLAS/cuDNN, strict f32) where
#      benchmarks/baseline.py has a baseline;
#   3. correctness at full size, checked against the interpreter, with a
#      time limit per workload (the interpreter is slow on the largest).
#   4. Tensor Cores: the hand-scheduled mma.sync inputs of
#      lit-tests/tensorize (sm80 schedules) and benchmarks/tensor-cores
#      (f16/bf16/s8 GEMMs and an f16 conv, default pipeline and hand
#      schedules) checked where the interpreter is quick enough (all but
#      the 4096^3 GEMMs), then timed beside cuBLAS/cuDNN through PyTorch
#      in the same types; each timed kernel's PTX is kept and its mma.sync
#      instructions counted.
#   5. the f16 GEMM 4096^3 by hand over a grid of block, warp and k
#      tiles (benchmarks/tensor-cores/sweep.py), timed.
#   6. the Tensor Core workloads tuned on the GPU: markov with
#      GPU_CHECK_MEASURE (default 8) candidates measured, each in a
#      tilec-worker (BIN_DIR must hold it too), then timed.
#   7. phases 4 and 5's timings again without the padding of shared
#      tiles against bank conflicts (tensorize{pad-shared=false}), to
#      compare.
# GPU_CHECK_PHASES (default 1234567) picks phases, GPU_CHECK_JOBS the runs at
# a time in phases 1 and 3, GPU_CHECK_FULL_LIMIT phase 3's seconds per run.
# OUT_DIR gets check-small.tsv, speed.tsv (and speed.baseline.jsonl),
# check-full.tsv, check-tensor-cores.tsv, speed-tensor-cores.tsv,
# speed-sweep.tsv, speed-tuned.tsv and speed-unpadded.tsv; each run's stderr goes to $GPU_CHECK_LOGS (default
# OUT_DIR/logs).
set -u
bin=$(realpath "$1")
# Binaries packed by tools/gpu-pack.sh (xz) are unpacked first.
if [ ! -x "$bin/tilec-run" ] && [ -f "$bin/tilec-run.xz" ]; then
  unpacked=$(mktemp -d)
  for b in tilec-run tilec-worker; do
    [ -f "$bin/$b.xz" ] && xz -dc "$bin/$b.xz" >"$unpacked/$b" && chmod +x "$unpacked/$b"
  done
  bin=$unpacked
fi
out=$(realpath -m "$2")
target=${3:-sm90}
jobs=${GPU_CHECK_JOBS:-8}
phases=${GPU_CHECK_PHASES:-1234567}
cd "$(dirname "$0")/.."
logs=$(realpath -m "${GPU_CHECK_LOGS:-$out/logs}")
mkdir -p "$out" "$logs"
export bin out target logs

# One checked run; prints "name<TAB>verdict<TAB>max relative error".
check_one() {
  row=$(check_row "$@")
  [ -n "$row" ] || row="$(basename "$1" .tile)	no-result	-"
  echo "$row"
}
check_row() {
  f=$1
  limit=$2
  name=$(basename "$f" .tile)
  json=$(timeout "$limit" "$bin/tilec-run" --backend=cuda --target="${3:-$target}" --check --json "$f" 2>"$logs/$name.check.err")
  rc=$?
  if [ $rc -eq 124 ]; then
    printf '%s\ttimeout(%ss)\t-\n' "$name" "$limit"
  elif [ $rc -ne 0 ]; then
    printf '%s\tFAILED(rc=%s)\t%s\n' "$name" "$rc" "$(head -c 300 "$logs/$name.check.err" | tr '\n\t' '  ')"
  else
    echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
outs = r["outputs"]
ok = all(o["check"]["passed"] for o in outs)
err = max(o["check"]["max_rel_err"] for o in outs)
verdict = "passed" if ok else "MISMATCH"
print("\t".join([sys.argv[1], verdict, f"{err:.3g}"]))' "$name"
  fi
}
export -f check_one check_row

# Times each workload alone (median of 20 runs after 3 warm-ups) beside
# PyTorch's; writes TABLE and TABLE's baselines (.jsonl beside it).
# $speed_pipeline, if set, is the pipeline (else the default one),
# $speed_limit the seconds a run may take, $speed_suffix names its logs.
speed_table() {
  table=$1
  shift
  python3 benchmarks/baseline.py --device cuda "$@" >"${table%.tsv}.baseline.jsonl" 2>"$logs/$(basename "$table" .tsv).baseline.err"
  printf 'workload\ttilec_ms\tgflops\tpeak_pct\tbaseline_ms\tlibrary\ttilec_vs_baseline\n' >"$table"
  for f in "$@"; do
    name=$(basename "$f" .tile)
    json=$(timeout "${speed_limit:-120}" "$bin/tilec-run" --backend=cuda --target="$target" ${speed_pipeline:+--pass-pipeline="$speed_pipeline"} --repeat=20 --warmup=3 --json --keep-dir "$logs/$name${speed_suffix:-}.kernels" "$f" 2>"$logs/$name${speed_suffix:-}.speed.err")
    rc=$?
    echo "$json" | python3 -c '
import json, sys
name, rc, f = sys.argv[1], int(sys.argv[2]), sys.argv[3]
base = {}
for line in open(sys.argv[4]):
    b = json.loads(line)
    if b["workload"] == f:
        base = b
if rc != 0:
    print(f"{name}\tFAILED(rc={rc})\t-\t-\t-\t-\t-")
    sys.exit()
r = json.load(sys.stdin)
ms = r["time_ms"]["median"]
gf = r.get("gflops")
pk = r.get("peak_fraction")
bms = base.get("median_s")
print("\t".join([name, f"{ms:.4f}", f"{gf:.1f}" if gf else "-", f"{100*pk:.2f}" if pk else "-",
                 f"{1e3*bms:.4f}" if bms else "-", base.get("library", base.get("skipped", "-")),
                 f"{1e3*bms/ms:.3f}" if bms else "-"]))' "$name" "$rc" "$f" "${table%.tsv}.baseline.jsonl" | tee -a "$table"
  done
}

echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true

if [[ $phases == *1* ]]; then
echo "== 1. correctness, CPU-sized workloads and examples ($target)"
examples=$(grep -l "schedule \"$target\"" examples/*.tile 2>/dev/null)
printf '%s\n' benchmarks/workloads/*_small.tile $examples |
  xargs -P "$jobs" -I{} bash -c 'check_one {} 120' | sort | tee "$out/check-small.tsv"
echo "passed: $(grep -c $'\tpassed' "$out/check-small.tsv") of $(wc -l <"$out/check-small.tsv")"

fi

full=$(ls benchmarks/workloads/*.tile | grep -v '_small\.tile$')
if [[ $phases == *2* ]]; then
echo "== 2. speed, full-size workloads, one at a time"
speed_table "$out/speed.tsv" $full

fi

if [[ $phases == *3* ]]; then
echo "== 3. correctness, full-size workloads"
printf '%s\n' $full | xargs -P "$jobs" -I{} bash -c "check_one {} ${GPU_CHECK_FULL_LIMIT:-90}" | sort | tee "$out/check-full.tsv"
echo "passed: $(grep -c $'\tpassed' "$out/check-full.tsv") of $(wc -l <"$out/check-full.tsv")"
fi

if [[ $phases == *4* ]]; then
  echo "== 4. Tensor Cores (mma.sync), checked then timed"
  tc=$(ls benchmarks/tensor-cores/*.tile benchmarks/tensor-cores/hand/*.tile)
  {
    printf '%s\n' lit-tests/tensorize/Inputs/{gemm_f16_mma,conv_f16_mma,conv_f16_mma_fused,conv_f16_mma_fused_n,conv_f16_mma_padded,gemm_f16_mma_padded,gemm_i8_mma,gemm_i8_mma_bt,gemm_bf16_mma}.tile |
      xargs -P "$jobs" -I{} bash -c 'check_one {} 120 sm80'
    printf '%s\n' $tc | grep -v 4096 | xargs -P 4 -I{} bash -c "check_one {} ${GPU_CHECK_FULL_LIMIT:-90}"
  } | sort | tee "$out/check-tensor-cores.tsv"
  echo "passed: $(grep -c $'\tpassed' "$out/check-tensor-cores.tsv") of $(wc -l <"$out/check-tensor-cores.tsv")"
  speed_table "$out/speed-tensor-cores.tsv" $tc
  for f in $tc; do
    name=$(basename "$f" .tile)
    printf '%s\tmma.sync in PTX: %s\n' "$name" "$(cat "$logs/$name.kernels"/*.ptx 2>/dev/null | grep -c 'mma.sync')"
  done | tee "$out/mma-count.tsv"
fi

if [[ $phases == *5* ]]; then
  echo "== 5. the f16 GEMM 4096^3 scheduled by hand over a grid of tiles, timed"
  sweep=$(mktemp -d)
  python3 benchmarks/tensor-cores/sweep.py "$sweep"
  speed_table "$out/speed-sweep.tsv" "$sweep"/*.tile
fi

if [[ $phases == *6* ]]; then
  echo "== 6. the Tensor Core workloads tuned on the GPU, then timed"
  speed_pipeline="builtin.module(collapse-axes,search{strategy=markov measure-top-k=${GPU_CHECK_MEASURE:-8}},tile,cache,vthread,bind,vectorize,tensorize,unroll,hoist-guards)" \
    speed_limit=600 speed_suffix=.tuned speed_table "$out/speed-tuned.tsv" benchmarks/tensor-cores/*.tile
fi

if [[ $phases == *7* ]]; then
  echo "== 7. phases 4 and 5 without padded shared tiles (tensorize{pad-shared=false})"
  sweep=$(mktemp -d)
  python3 benchmarks/tensor-cores/sweep.py "$sweep"
  speed_pipeline="builtin.module(collapse-axes,search,tile,cache,vthread,bind,vectorize,tensorize{pad-shared=false},unroll,hoist-guards)" \
    speed_suffix=.unpadded speed_table "$out/speed-unpadded.tsv" benchmarks/tensor-cores/*.tile benchmarks/tensor-cores/hand/*.tile "$sweep"/*.tile
fi
