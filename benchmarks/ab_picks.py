#!/usr/bin/env python3
"""Compares what two tilec builds pick and compile, side by side: for each
workload, each build searches it (markov with 8 candidates measured on one
thread, unless --pipeline says otherwise) and compiles its pick to a shared
library; then the libraries and the workload's library baseline (numpy for a
GEMM, onnxruntime for a convolution, read from the workload file's header
line) are called in turn, as `interleave.py` does, and the medians printed
with each build's ratio to the baseline and new/old.

A change to the search or the code generator is judged this way on this
noisy machine: the builds' kernels and the baseline share every slow phase.

    benchmarks/ab_picks.py --old /tmp/old/tilec --new target/release/tilec \\
        --rounds 40 benchmarks/workloads/gemm_1024.tile benchmarks/workloads/conv2d_resnet50_r7.tile

Each build needs `tilec-worker` beside it (the search measures through it).
Needs numpy, onnx and onnxruntime (tools/bench-env.sh installs them). The
searched modules and libraries are kept under --keep (default: a temporary
folder) for a later look.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from interleave import kernel_call, numpy_gemm_call, ort_conv_call, time_in_turns
from kernel_lib import run_on_kernel_stack

GEMM = re.compile(r"M=(\d+) N=(\d+) K=(\d+)")
CONV = re.compile(r"N=(\d+) F=(\d+) C=(\d+) H=(\d+) W=(\d+) R=S=(\d+) stride (\d+) padding (\d+)")


def baseline_of(path):
    """The library call a workload is compared with, from its header."""
    with open(path) as f:
        head = "".join(f.readline() for _ in range(3))
    if m := CONV.search(head):
        n, f_, c, h, w, r, stride, pad = m.groups()
        return "onnxruntime", ort_conv_call(",".join([n, c, h, w, f_, r, r, stride, pad]))
    if m := GEMM.search(head):
        return "numpy", numpy_gemm_call(",".join(m.groups()))
    return None, None


def build(tilec, workload, pipeline, target, out):
    """Search `workload` with `tilec` and compile the pick; the library."""
    picked, lib = out + ".tile", out + ".so"
    subprocess.run([tilec, workload, f"--target={target}", f"--pass-pipeline={pipeline}", "-o", picked], check=True)
    subprocess.run([tilec, picked, f"--target={target}", "--emit=lib", "-o", lib], check=True)
    return lib


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workloads", nargs="+")
    ap.add_argument("--old", required=True, help="the old build's tilec")
    ap.add_argument("--new", required=True, help="the new build's tilec")
    ap.add_argument("--pipeline", default="builtin.module(collapse-axes,pad-axes,search{measure-top-k=8})", help="the pipeline that picks (a workload is left unscheduled; the pick is then compiled with the default pipeline)")
    ap.add_argument("--target", default="host")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--keep", help="folder for the searched modules and libraries")
    args = ap.parse_args()
    keep = args.keep or tempfile.mkdtemp(prefix="ab-picks-")
    os.makedirs(keep, exist_ok=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}; old {args.old}, new {args.new}; pipeline {args.pipeline}; {args.rounds} rounds; files in {keep}")
    print(f"{'workload':28s} {'old ms':>9s} {'new ms':>9s} {'base ms':>9s} {'old/base':>8s} {'new/base':>8s} {'new/old':>8s}")
    for workload in args.workloads:
        name = os.path.basename(workload).removesuffix(".tile")
        libs = {which: build(tilec, workload, args.pipeline, args.target, os.path.join(keep, f"{name}-{which}")) for which, tilec in (("old", args.old), ("new", args.new))}
        entries = [(which, kernel_call(lib)) for which, lib in libs.items()]
        base_name, base_call = baseline_of(workload)
        if base_call:
            entries.append(("base", base_call))
        times = time_in_turns(entries, args.rounds, args.warmup)
        med = {which: statistics.median(ts) * 1e3 for which, ts in times.items()}
        base = med.get("base")
        ratio = lambda which: f"{base / med[which]:8.2f}" if base else f"{'-':>8s}"
        base_col = f"{base:9.3f}" if base else f"{'-':>9s}"
        # The time ratio: above 1 means the new build's kernel is slower.
        print(f"{name:28s} {med['old']:9.3f} {med['new']:9.3f} {base_col} {ratio('old')} {ratio('new')} {med['new'] / med['old']:8.3f}", flush=True)
    print("# ratios to the baseline (numpy or onnxruntime): baseline time / tilec time (above 1: tilec faster); new/old: time ratio")


if __name__ == "__main__":
    sys.exit(run_on_kernel_stack(main))
