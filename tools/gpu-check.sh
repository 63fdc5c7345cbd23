#!/usr/bin/env bash
# The GPU check: every workload and CUDA example through
# `tilec-run --backend=cuda`, on a machine with an NVIDIA GPU and its driver.
# CI has no GPU, so this is run by hand (docs/codegen.md, "Running on a GPU").
#
#   tools/gpu-check.sh BIN_DIR OUT_DIR [TARGET]
#
# BIN_DIR holds tilec-run; TARGET is a CUDA target name (default sm90).
# Three phases, each writing as it goes, so a run cut short still says
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
# GPU_CHECK_PHASES (default 123) picks phases, GPU_CHECK_JOBS the runs at
# a time in phases 1 and 3, GPU_CHECK_FULL_LIMIT phase 3's seconds per run.
# OUT_DIR gets check-small.tsv, speed.tsv, baseline.jsonl and
# check-full.tsv; each run's stderr goes to $GPU_CHECK_LOGS (default
# OUT_DIR/logs).
set -u
bin=$(realpath "$1")
out=$(realpath -m "$2")
target=${3:-sm90}
jobs=${GPU_CHECK_JOBS:-8}
phases=${GPU_CHECK_PHASES:-123}
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
  json=$(timeout "$limit" "$bin/tilec-run" --backend=cuda --target="$target" --check --json "$f" 2>"$logs/$name.check.err")
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
python3 benchmarks/baseline.py --device cuda $full >"$out/baseline.jsonl" 2>"$logs/baseline.err"
printf 'workload\ttilec_ms\tgflops\tpeak_pct\tbaseline_ms\tlibrary\ttilec_vs_baseline\n' >"$out/speed.tsv"
for f in $full; do
  name=$(basename "$f" .tile)
  json=$(timeout 120 "$bin/tilec-run" --backend=cuda --target="$target" --repeat=20 --warmup=3 --json "$f" 2>"$logs/$name.speed.err")
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
                 f"{1e3*bms/ms:.3f}" if bms else "-"]))' "$name" "$rc" "$f" "$out/baseline.jsonl" | tee -a "$out/speed.tsv"
done

fi

if [[ $phases == *3* ]]; then
echo "== 3. correctness, full-size workloads"
printf '%s\n' $full | xargs -P "$jobs" -I{} bash -c "check_one {} ${GPU_CHECK_FULL_LIMIT:-90}" | sort | tee "$out/check-full.tsv"
echo "passed: $(grep -c $'\tpassed' "$out/check-full.tsv") of $(wc -l <"$out/check-full.tsv")"
fi
