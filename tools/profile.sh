#!/usr/bin/env bash
# Where a kernel's time goes, from a sampling profile (perf, cpu-clock: this
# works in VMs without hardware counters). Compiles FILE to a shared
# library with tilec (the pipeline: by default markov with 8 candidates
# measured, as tools/bench.sh runs it; pass --pass-pipeline=... to change),
# runs its kernels in a loop on one thread (benchmarks/profile.py), samples
# them, and prints the share of samples in the micro-kernel (the loop of
# FMAs or VNNI/BF16 dot products) against the rest (packing copies, accumulator set-up and stores,
# loop control), then the hottest instructions.
# Usage: tools/profile.sh FILE.tile [tilec options]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
file=$1
shift
command -v perf >/dev/null || { echo "profile: perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
"$root/tools/bench-env.sh"
python="$root/.tools/bench-venv/bin/python"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pipeline="builtin.module(search{measure-top-k=8},tile,cache,vthread,bind,vectorize,unroll,hoist-guards,lower-to-mlir)"
args=("--pass-pipeline=$pipeline")
for a in "$@"; do case $a in --pass-pipeline=*) args=() ;; esac; done
"$root/target/release/tilec" "$file" --target=host --emit=lib -o "$out/k.so" "${args[@]}" "$@"
OPENBLAS_NUM_THREADS=1 perf record -q -e cpu-clock -F 4000 -o "$out/perf.data" -- "$python" "$root/benchmarks/profile.py" "$out/k.so" --seconds 4 >&2
symbols=$("$python" -c 'import json,sys; print(" ".join(k["symbol"] for k in json.load(open(sys.argv[1]))["kernels"]))' "$out/k.so.json")
perf report -i "$out/perf.data" --stdio --sort dso,sym 2>/dev/null | grep -v '^#' | awk 'NF && n++ < 5'
for s in $symbols; do
  perf annotate -i "$out/perf.data" --stdio -s "$s" 2>/dev/null | "$python" -c '
import re, sys
rows = []
for line in sys.stdin:
    m = re.match(r"\s*([0-9.]+)\s*:\s*([0-9a-f]+):\s*(.*)", line)
    if m:
        rows.append((float(m.group(1)), int(m.group(2), 16), m.group(3).strip()))
# The micro-kernel: FMAs, or dot products (VNNI, BF16).
fma = [a for _, a, i in rows if re.search(r"vfmadd|vpdpbusd|vdpbf16ps", i)]
if not rows:
    sys.exit(0)
lo, hi = (min(fma), max(fma)) if fma else (0, -1)
# The micro-kernel: the FMAs and the loads and loop control between them.
inner = sum(p for p, a, _ in rows if lo - 64 <= a <= hi + 32)
total = sum(p for p, _, _ in rows)
print(f"{sys.argv[1]}: {inner / total * 100:.0f}% of its samples in the micro-kernel (FMA loop), {(total - inner) / total * 100:.0f}% elsewhere (packing copies, accumulator set-up and stores, loop control)")
print("hottest instructions (% of the kernel):")
for p, a, i in sorted(rows, reverse=True)[:12]:
    where = "kernel" if lo - 64 <= a <= hi + 32 else "other"
    print(f"  {p / total * 100:5.1f}%  {a:6x}  {where:6}  {i}")
' "$s"
done
