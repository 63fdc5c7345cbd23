#!/usr/bin/env bash
# The four networks made here (tools/onnx-models.py), full size, end to end:
# built with random weights, imported (`tilec import`), run on the CPU
# backend (fused, construction-only schedules: untuned), compared with
# onnxruntime's outputs on the same seeded input, and both timed on THREADS
# threads (medians of 10 runs). docs/networks.md has the tuned figures.
#   tools/onnx-networks.sh [THREADS] [MODEL...]     (models: resnet18 resnet50 mobilenetv2 bert-layer)
# With PROFILE=1, both also print each kernel's (node's) median time, in run
# order: `tilec-run --profile` and `onnx-reference.py --profile`
# (benchmarks/network_profile.py sets their convolutions side by side).
# LAYOUT=nchw8c imports with blocked activations (`tilec import --layout`).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-1}
shift || true
models=${*:-resnet18 resnet50 mobilenetv2 bert-layer}
tools/bench-env.sh
cargo build --release --locked -p tilec-driver -p tilec-run
py=.tools/bench-venv/bin/python
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
profile=()
[ "${PROFILE:-0}" = 1 ] && profile=(--profile)
pipeline='builtin.module(fuse,collapse-axes,pad-axes,search,tile,cache,vthread,bind,vectorize,tensorize,prepack,unroll,hoist-guards)'
status=0
for m in $models; do
  echo "== $m (full, $threads thread(s))"
  # Whole outputs to files, then their first lines: `| head -1` would
  # close the pipe under a writer that has more to say (SIGPIPE, and
  # pipefail fails the run).
  $py tools/onnx-models.py --model "$m" --size full -o "$work/$m.onnx" > "$work/$m.models.log"
  head -1 "$work/$m.models.log"
  target/release/tilec import "$work/$m.onnx" -o "$work/$m.tile" --layout "${LAYOUT:-nchw}"
  $py tools/onnx-reference.py "$work/$m.onnx" --random-inputs "$work/$m-in" --seed 1 --output-dir "$work/$m-ort" --threads "$threads" --time-runs 10 "${profile[@]}" | grep -v '^input\|^output'
  inputs=()
  for f in "$work/$m-in"/*.npy; do inputs+=(--input "$(basename "$f" .npy)=$f"); done
  target/release/tilec-run "$work/$m.tile" --backend=cpu --threads "$threads" --repeat 10 "${profile[@]}" --pass-pipeline="$pipeline" "${inputs[@]}" --output-dir "$work/$m-tilec" > "$work/$m.run.log"
  if [ ${#profile[@]} = 0 ]; then head -1 "$work/$m.run.log"; else grep -v '^  [a-z_0-9.]*: tensor' "$work/$m.run.log"; fi
  $py tools/onnx-reference.py --compare "$work/$m-tilec" "$work/$m-ort" --rtol 1e-3 --atol 1e-4 || status=1
done
exit $status
