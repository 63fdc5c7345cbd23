#!/usr/bin/env bash
# GTA's Fig. 10 on this machine (docs/networks.md, "Dual-task scheduling
# measured"): one network tuned by tilec-tune under the same measurer with
#   GTA at each κ (--scheduler dual-task --kappa K; κ = 1 is GTA-Raw),
#   AMOS-style (--sub-tasks equal: every mapping candidate every round),
#   Ansor-style (--scheduler gradient, intrinsics=none),
# all for the same number of rounds (Algorithm 1's trials = rounds ×
# MEASURE_NUM), then each one's tuning time, measurements and end-to-end
# latency side by side, and the objective against time in one plot.
#   [SEED=N] tools/gta-dual-task.sh OUT_DIR [ROUNDS] [THREADS] [MODEL] [KAPPAS...]
# MODEL: resnet18 (default) or another of tools/onnx-models.py, full size;
# or a tile network (a path ending in .tile, e.g. the int8 ResNet-18 of
# benchmarks/networks/), tuned as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: tools/gta-dual-task.sh OUT_DIR [ROUNDS] [THREADS] [MODEL] [KAPPAS...]}
rounds=${2:-60}
threads=${3:-2}
model=${4:-resnet18}
shift $(($# < 4 ? $# : 4))
kappas=${*:-0.2 0.4 1.0}
mkdir -p "$out"
tools/bench-env.sh
cargo build --release --locked -p tilec-driver -p tilec-tune -p tilec-worker
py=.tools/bench-venv/bin/python
# The network and the tuned networks (tens of MB of weights each) go to
# NET_DIR (default: a temporary folder); OUT_DIR gets the reports, the
# records and the logs.
work=${NET_DIR:-$(mktemp -d)}
if [[ $model == *.tile ]]; then
  net="$work/$(basename "$model" .tile)"
  cp "$model" "$net.tile"
else
  net="$work/$model"
  [ -f "$net.tile" ] || { $py tools/onnx-models.py --model "$model" --size full -o "$net.onnx" | head -1; target/release/tilec import "$net.onnx" -o "$net.tile"; }
fi
common=(--rounds "$rounds" --round-trials 8 --threads "$threads" --repeat 10 --seed "${SEED:-0}")
run() { # NAME ARGS...
  local name=$1
  shift
  echo "== $name" >&2
  rm -f "$out/$name.jsonl"
  target/release/tilec-tune "$net.tile" "${common[@]}" --records "$out/$name.jsonl" --report "$out/$name.json" -o "$work/$name.tuned.tile" "$@" > "$out/$name.out" 2> "$out/$name.err"
  head -1 "$out/$name.out" >&2
}
reports=()
run ansor --scheduler gradient --search-options intrinsics=none
reports+=("$out/ansor.json")
run amos --scheduler dual-task --sub-tasks equal --no-untuned
reports+=("$out/amos.json")
last=${kappas##* }
for k in $kappas; do
  plot=()
  if [ "$k" = "$last" ]; then
    # The last run draws every run's objective against time in one SVG.
    plot=(--plot "$out/curves.svg")
    for r in "${reports[@]}"; do plot+=(--compare "$r"); done
  fi
  run "gta-$k" --scheduler dual-task --kappa "$k" --no-untuned "${plot[@]}"
  reports+=("$out/gta-$k.json")
done
$py - "${reports[@]}" <<'EOF'
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:]]
print(f"machine: {runs[0]['machine']}, {runs[0]['threads']} thread(s), {runs[0]['rounds']} rounds of 8")
print("| run | tuning s | measurements | tuned ms (end to end) | estimate Σω·latency ms |")
print("|---|---:|---:|---:|---:|")
for p, r in zip(sys.argv[1:], runs):
    name = p.rsplit('/', 1)[-1][:-5]
    print(f"| {name} | {r['tuning_s']:.1f} | {r['measurements']} | {r['tuned_ms']:.3f} | {r['steps'][-1]['objective_ms']:.3f} |")
untuned = runs[0].get('untuned_ms')
if untuned:
    print(f"untuned (construction only): {untuned:.3f} ms")
EOF
