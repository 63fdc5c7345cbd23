#!/usr/bin/env bash
# How much of the schedule space each of GTA's resource-constrained rules
# R1-R5 removes (docs/search.md, "Resource-constrained rules"), on the GTA
# workloads of benchmarks/workloads/: ResNet-18's eleven convolutions (C0-C10), the
# four GTA GEMMs, the row mean and the scan. f32 on two CPU and two GPU
# targets, and f16 copies on the GPUs (the Tensor Core tasks, where R3
# applies). Measures nothing: `tilec --print-space-rules` draws points of
# each op's space on the target's model, seeded, so the output is the same
# on every machine.
#   tools/space-rules.sh OUT_DIR [DRAWS]
# BIN: the tilec binary (default: a release build, made here).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: tools/space-rules.sh OUT_DIR [DRAWS]}
draws=${2:-10000}
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -p tilec-driver
  BIN=target/release/tilec
fi
mkdir -p "$out"
workloads=()
for i in $(seq 0 10); do workloads+=("conv2d_resnet18_c$i"); done
workloads+=(gemm_gta_16x512x128 gemm_gta_1024x16x256 gemm_gta_256x1024x256 gemm_gta_512x256x16 mean_gta scan_gta)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for target in x86-avx2 x86-avx512 sm80 sm90; do
  types=f32
  case $target in sm*) types="f32 f16" ;; esac
  for ty in $types; do
    file="$out/$target-$ty.txt"
    : > "$file"
    for w in "${workloads[@]}"; do
      src=benchmarks/workloads/$w.tile
      if [ "$ty" = f16 ]; then
        sed 's/f32/f16/g' "$src" > "$tmp/$w.tile"
        src=$tmp/$w.tile
      fi
      "$BIN" "$src" --target "$target" --print-space-rules="$draws" >> "$file"
    done
  done
done
# ResNet-18 itself, where `fuse` has folded each convolution's bias, ReLU
# and residual add into its epilogue (R4's reads), when the ONNX tools are
# installed (tools/bench-env.sh).
py=.tools/bench-venv/bin/python
if [ -x "$py" ]; then
  $py tools/onnx-models.py --model resnet18 --size full -o "$tmp/resnet18.onnx" | head -1
  "$BIN" import "$tmp/resnet18.onnx" -o "$tmp/resnet18.tile"
  for target in x86-avx2 x86-avx512 sm80 sm90; do
    "$BIN" "$tmp/resnet18.tile" --pass-pipeline='builtin.module(fuse)' --target "$target" --print-space-rules="$draws" > "$out/resnet18-fused-$target-f32.txt"
  done
else
  echo "no $py: ResNet-18 skipped (tools/bench-env.sh installs it)" >&2
fi
python3 - "$out" > "$out/summary.md" <<'PY'
# One Markdown table per target and type: per workload, the share of the
# space's points each rule removes first (in GTA's order), what the
# verifier removes after them, and what is valid.
import pathlib, re, sys
out = pathlib.Path(sys.argv[1])
rows = ["R1", "R2", "R3", "R4", "R5"]
for f in sorted(out.glob("*.txt")):
    text = f.read_text()
    print(f"### {f.stem}\n")
    print("| workload | points | effective draws | " + " | ".join(rows) + " | verifier | valid |")
    print("|---|---:|---:|" + "---:|" * (len(rows) + 2))
    totals, n = [0.0] * (len(rows) + 2), 0
    for block in text.split("space rules of ")[1:]:
        func, op = re.match(r"`([^`]+)` \(op `([^`]+)`\)", block).groups()
        name = op if func.startswith("resnet18") else func
        points = re.search(r"of about (\S+) points", block).group(1)
        effective = float(re.search(r"weighs them as (\S+) draws", block).group(1))
        cells = []
        for r in rows:
            m = re.search(rf"^  {r}\s+\S+\s+(yes|no)\s+\S+%\s+(\S+)%", block, re.M)
            cells.append((m.group(1), float(m.group(2))))
        ver = float(re.search(r"verifier, after the rules\s+\S+%\s+(\S+)%", block).group(1))
        val = float(re.search(r"^  -\s+valid\s+\S+%\s+(\S+)%", block, re.M).group(1))
        shown = [f"{v:.1f}%" if a == "yes" else "n/a" for a, v in cells]
        print(f"| {name} | {points} | {effective:.0f} | " + " | ".join(shown) + f" | {ver:.1f}% | {val:.1f}% |")
        for i, (_, v) in enumerate(cells):
            totals[i] += v
        totals[-2] += ver
        totals[-1] += val
        n += 1
    print("| **mean** | | | " + " | ".join(f"**{t / n:.1f}%**" for t in totals) + " |\n")
PY
cat "$out/summary.md"
