#!/usr/bin/env bash
# TLM's search efficiency on this machine (docs/search.md, "tlm"):
#   1. demonstration data by the iterative optimisation (§5.3) on the
#      training workloads, starting from the shipped TLM-base;
#   2. TLM-base fine-tuned on every training prompt's best sentence;
#   3. the held-out workloads (not in the demonstration data) tuned with
#      `tlm` (the fine-tuned model and TLM-base) at PER_OP measurements each
#      (the paper's 10×g: g prompts, 10 each), and with `evolutionary` and
#      `gradient` at BASELINE measurements each, all on one thread under the
#      same measurer; each run's best latency and wall time side by side.
#      BASELINE=0 runs neither (to compare against earlier runs' kernels,
#      e.g. with benchmarks/search_retime.py).
#   tools/tlm-eval.sh OUT_DIR [PER_OP] [BASELINE] [K_P]
# Each held-out run searches the workload's first compute op (`op=`) after
# the passes the default pipeline runs before `search` (collapse-axes,
# pad-axes), as tools/search-bench.sh's runs do, so that records name the
# same workload keys.
# HELD_OUT (the held-out workload names) and TRAIN (a glob of the training
# workloads) are environment variables; TARGET is the target the prompts
# are written for (default x86-avx2, the shipped model's; it must run here);
# BIN, a folder of already built binaries (default: a release build);
# BASE, TLM-base (default: the shipped tlm/models/tiny-cpu.safetensors);
# ROUNDS, iterate's passes over the training batches (default 1);
# SEED_RECORDS, records files of other strategies on the training
# workloads (say markov's), whose best sentences seed the demonstrations of
# `iterate` and `sft` (--seed-records); RANK_K, if set, makes the held-out
# `tlm` runs write RANK_K sentences and measure the PER_OP the cost model
# ranks first (rank-by=model) instead of the first PER_OP written; SEEDS,
# the held-out runs' seeds (default 0; a run with seed S > 0 writes
# NAME-WORKLOAD-seedS.jsonl).
# benchmarks/results/2026-12-06-tlm-zen4/README.md has a full-size run.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: tools/tlm-eval.sh OUT_DIR [PER_OP] [BASELINE] [K_P]}
per_op=${2:-10}
baseline=${3:-1000}
kp=${4:-8}
target=${TARGET:-x86-avx2}
held_out=${HELD_OUT:-gemm_gta_16x512x128_small conv2d_resnet18_c5_small bmm_bert_sv_small conv1d_ansor_small}
mkdir -p "$out"
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p tilec-driver -p tilec-worker -p tilec-tlm-cli
fi
bin=${BIN:-target/release}
base=${BASE:-tlm/models/tiny-cpu.safetensors}
# The training prompts: the `_small` workloads that are not held out and
# do not compute what a held-out one computes (some `_small` variants of
# different layers have the same shapes).
computation() { grep -h 'compute' "$1" | sed 's/%[A-Za-z0-9_]*//g; s/"[^"]*"//g'; }
held_computations=""
for w in $held_out; do held_computations+="$(computation "benchmarks/workloads/$w.tile")"$'\n'; done
train=()
for f in ${TRAIN:-benchmarks/workloads/*_small.tile}; do
  name=$(basename "$f" .tile)
  [[ " $held_out " == *" $name "* ]] && continue
  if grep -qxF -- "$(computation "$f" | head -1)" <<< "$held_computations"; then
    echo "   (not training on $name: it computes what a held-out workload does)" >&2
    continue
  fi
  train+=("$f")
done
echo "== iterate on ${#train[@]} training workloads, k_p=$kp, ${ROUNDS:-1} round(s)" >&2
rm -f "$out/iterate.jsonl"
seeds=()
sft_seeds=()
for r in ${SEED_RECORDS:-}; do seeds+=(--seed-records "$r"); sft_seeds+=(--records "$r"); done
$bin/tilec-tlm iterate --base "$base" "${train[@]}" --target "$target" --batches 4 --per-prompt "$kp" --rounds "${ROUNDS:-1}" \
  "${seeds[@]}" --records "$out/iterate.jsonl" --out-dir "$out/iterate" --epochs 8 --batch 16 --learning-rate 5e-4 --warmup-steps 5 2> "$out/iterate.err"
tail -1 "$out/iterate.err" >&2
echo "== sft on every training prompt's best sentence" >&2
$bin/tilec-tlm sft --base "$base" --records "$out/iterate.jsonl" "${sft_seeds[@]}" "${train[@]}" --target "$target" \
  --epochs 8 --batch 16 --learning-rate 5e-4 --warmup-steps 5 -o "$out/sft.safetensors" 2> "$out/sft.err"
tail -1 "$out/sft.err" >&2
run() { # NAME WORKLOAD SEED SEARCH-OPTIONS
  local name=$1 w=$2 seed=$3 opts=$4
  local start end op file
  op=$(grep -o -m1 'compute "[^"]*"' "benchmarks/workloads/$w.tile" | cut -d'"' -f2)
  file="$out/$name-$w"
  [ "$seed" = 0 ] || file+="-seed$seed"
  rm -f "$file.jsonl"
  start=$(date +%s.%N)
  $bin/tilec "benchmarks/workloads/$w.tile" --target="$target" --records="$file.jsonl" --search-report \
    --pass-pipeline="builtin.module(collapse-axes,pad-axes,search{$opts op=$op final-rounds=0 seed=$seed})" > /dev/null 2> "$file.err"
  end=$(date +%s.%N)
  best=$(grep -o '"median_s":[0-9.e-]*' "$file.jsonl" | cut -d: -f2 | sort -g | head -1)
  printf '%s\t%s\t%s\t%.1f\t%s\t%s\n' "$w" "$name" "$best" "$(echo "$end - $start" | bc)" "$(wc -l < "$file.jsonl")" "$seed" | tee -a "$out/table.tsv" >&2
}
printf 'workload\tstrategy\tbest_s\twall_s\tmeasurements\tseed\n' > "$out/table.tsv"
if [ -n "${RANK_K:-}" ]; then
  written="k=$RANK_K rank-by=model"
else
  written="k=$per_op"
fi
for w in $held_out; do
  for seed in ${SEEDS:-0}; do
    run tlm-sft "$w" "$seed" "strategy=tlm model=$out/sft.safetensors $written measure-top-k=$per_op"
    run tlm-base "$w" "$seed" "strategy=tlm model=$base $written measure-top-k=$per_op"
    if [ "$baseline" -gt 0 ]; then
      run evolutionary "$w" "$seed" "strategy=evolutionary trials=$baseline"
      run gradient "$w" "$seed" "strategy=gradient trials=$baseline"
    fi
  done
done
echo "machine: $(lscpu | grep -m1 'Model name' | cut -d: -f2 | xargs); family $(lscpu | grep -m1 'CPU family' | cut -d: -f2 | xargs) model $(lscpu | grep -m1 '^Model:' | cut -d: -f2 | xargs)" | tee "$out/machine.txt" >&2
