#!/usr/bin/env python3
"""Times compiled networks and onnxruntime in turns: each round runs every
NET.tile once with `tilec-run --backend=cpu` and the ONNX model once with
`tools/onnx-reference.py`, each for --repeat runs, and keeps each one's
median. A shared machine's phases move whole runs by 10% (docs/networks.md),
so networks compare only round by round: the summary gives each network's
median ratio to onnxruntime over the rounds, with their range.

    benchmarks/network_turns.py --onnx r50.onnx --input data=x.npy \\
        --threads 1 --rounds 8 tuned-a.tile tuned-b.tile

Each NET finds its weights beside it (NET.safetensors) unless --weights
names a file. Prints a line per run as it completes, then the summary;
--log FILE keeps the lines.
"""

import argparse
import os
import re
import statistics
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEDIAN = re.compile(r"median ([0-9.]+) ms")


def median_ms(cmd):
    """Runs `cmd` and returns the first `median X ms` it prints."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    text = out.stdout + out.stderr
    m = MEDIAN.search(text)
    if out.returncode != 0 or not m:
        sys.exit(f"network_turns: `{' '.join(cmd)}` failed (exit {out.returncode}):\n{text[-2000:]}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("nets", nargs="+", metavar="NET.tile")
    ap.add_argument("--onnx", required=True, help="the model onnxruntime runs")
    ap.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="an input, for both (repeatable)")
    ap.add_argument("--weights", help="the weights file of every NET (default: beside each)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=20, help="timed runs of each per round (default 20)")
    ap.add_argument("--bin", help="the folder of tilec-run (default: the one on PATH, else target/release)")
    ap.add_argument("--python", default=os.path.join(ROOT, ".tools", "bench-venv", "bin", "python"), help="a Python with onnxruntime (tools/bench-env.sh)")
    ap.add_argument("--log", help="also write the per-run lines here")
    args = ap.parse_args()
    if args.rounds < 1 or args.repeat < 1:
        sys.exit("network_turns: --rounds and --repeat must be at least 1")

    if args.bin:
        tilec_run = os.path.join(args.bin, "tilec-run")
    else:
        tilec_run = shutil.which("tilec-run") or os.path.join(ROOT, "target", "release", "tilec-run")
    inputs = [a for i in args.input for a in ("--input", i)]
    log = open(args.log, "w") if args.log else None
    times = {name: [] for name in args.nets + ["onnxruntime"]}
    # onnxruntime's outputs go somewhere; only its timing is kept.
    ort_out = tempfile.mkdtemp(prefix="network-turns-")
    for r in range(1, args.rounds + 1):
        for net in args.nets:
            cmd = [tilec_run, net, "--backend=cpu", "--threads", str(args.threads), "--repeat", str(args.repeat), *inputs]
            if args.weights:
                cmd += ["--weights", args.weights]
            times[net].append(median_ms(cmd))
        times["onnxruntime"].append(
            median_ms([args.python, os.path.join(ROOT, "tools", "onnx-reference.py"), args.onnx, *inputs, "--output-dir", ort_out, "--time-runs", str(args.repeat), "--threads", str(args.threads)])
        )
        for name, t in times.items():
            line = f"round {r} {name}: median {t[-1]:.3f} ms"
            print(line, flush=True)
            if log:
                print(line, file=log, flush=True)
    shutil.rmtree(ort_out, ignore_errors=True)

    ort = times["onnxruntime"]
    print(f"\n{args.rounds} round(s) of {args.repeat} runs, {args.threads} thread(s); onnxruntime median {statistics.median(ort):.2f} ms")
    for net in args.nets:
        ratios = [a / b for a, b in zip(times[net], ort)]
        print(f"{net}: median {statistics.median(times[net]):.2f} ms, / onnxruntime median {statistics.median(ratios):.3f} (rounds {min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
