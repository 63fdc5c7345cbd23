#!/usr/bin/env python3
"""Times the kernels that two search strategies found, side by side: for a
`tools/search-bench.sh` results folder, each run's best kernel within its
trials (the fastest first timing among its first N measurements, N read
from the strategy's `trials=N`) is compiled again from its record and
called in turns with the other runs' best kernels of the same workload and
with the workload's library baseline (numpy for a GEMM, onnxruntime for a
convolution), as `interleave.py` does.

Why: search-bench's comparison takes each run's best *first timing*. On a
shared VM one timing of a kernel can be 20-30% off its median, and the
best of 1,000 noisy timings is further above its kernel's speed than the
best of 64 is, so the first timings favour the strategy that measures
more. Timed in turns, every kernel sees the same slow phases; the medians
say which strategy found the faster kernel.

    benchmarks/search_retime.py benchmarks/results/2026-11-28-search-curves \\
        --candidate gradient:64 --reference evolutionary:1000 --rounds 40

`--candidate` is repeatable: several strategies' kernels (say `tlm:10`
and `gradient:64`) are then timed in the same turns against the
reference's.

Prints a markdown table (per workload and seed: each kernel's median ms
and GFLOP/s, their ratio, and each against the baseline) and the geomean
of the ratios. Needs `target/release/tilec` (or --tilec), numpy, onnx and
onnxruntime (tools/bench-env.sh installs them).
"""

import argparse
import json
import math
import os
import statistics
import sys
import tempfile

from ab_picks import baseline_of, build
from interleave import kernel_call, time_in_turns
from kernel_lib import run_on_kernel_stack


def best_record(path, trials):
    """The record of the fastest successful timing among the first
    `trials` measurements of a records file (one line per measurement, in
    the order measured; the final rounds' retimings come after them)."""
    best = None
    with open(path) as f:
        lines = [line for line in f if line.strip()]
    for line in lines[:trials]:
        r = json.loads(line)
        lat = r.get("latency")
        if r.get("error") or not lat:
            continue
        if best is None or lat["median_s"] < best["latency"]["median_s"]:
            best = r
    return best


def compile_record(tilec, workload, record, out):
    """`workload` with `record`'s schedule (apply-records), compiled to a
    library; ops without a record (a copy collapse-axes adds) get the
    default pipeline's schedule. Returns the library's path."""
    records = out + ".records.jsonl"
    with open(records, "w") as f:
        f.write(json.dumps(record) + "\n")
    return build(tilec, workload, f"builtin.module(collapse-axes,pad-axes,apply-records{{file={records}}})", "host", out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a tools/search-bench.sh results folder")
    ap.add_argument("--candidate", action="append", help="NAME:TRIALS (repeatable: every candidate is timed in the same turns; default gradient:64)")
    ap.add_argument("--reference", default="evolutionary:1000", help="NAME:TRIALS")
    ap.add_argument("--workloads", default="gemm_1024,gemm_bert_m1,gemm_bert_m3,conv2d_resnet50_r2,conv2d_resnet50_r7,conv2d_resnet50_r10")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tilec", default="target/release/tilec")
    ap.add_argument("--keep", help="folder for the compiled picks (default: a temporary one)")
    args = ap.parse_args()
    parse = lambda s: (s.split(":")[0], int(s.split(":")[1]))
    candidates = [parse(c) for c in args.candidate or ["gradient:64"]]
    b_name, b_n = parse(args.reference)
    keep = args.keep or tempfile.mkdtemp(prefix="search-retime-")
    os.makedirs(keep, exist_ok=True)
    seeds = args.seeds.split(",")
    names = ", ".join(f"{n} {t}" for n, t in candidates)
    print(f"Best kernel within the trials of each run ({names}; {b_name} {b_n}), timed in turns with the others of its workload and the baseline: {args.rounds} rounds, medians in ms; ratio = {b_name} ms / candidate ms (above 1: the candidate's kernel is faster).\n")
    print(f"| workload | seed | candidate | candidate ms | {b_name} ms | ratio | baseline ms | candidate / baseline | {b_name} / baseline |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    ratios = {name: [] for name, _ in candidates}
    for w in args.workloads.split(","):
        path = f"benchmarks/workloads/{w}.tile"
        entries = []
        for seed in seeds:
            for name, n in candidates + [(b_name, b_n)]:
                records = os.path.join(args.results, f"{w}-seed{seed}-{name}.records.jsonl")
                best = best_record(records, n) if os.path.exists(records) else None
                if best is None:
                    continue
                lib = compile_record(args.tilec, path, best, os.path.join(keep, f"{w}-seed{seed}-{name}"))
                entries.append(((seed, name), kernel_call(lib)))
        base_name, base_call = baseline_of(path)
        if base_call:
            entries.append((("base", base_name), base_call))
        times = time_in_turns(entries, args.rounds, args.warmup)
        med = {key: statistics.median(ts) * 1e3 for key, ts in times.items()}
        base = med.get(("base", base_name))
        f = lambda x, d=3: "—" if x is None else f"{x:.{d}f}"
        to_base = lambda x: f"{base / x:.2f}" if base and x else "—"
        for seed in seeds:
            b = med.get((seed, b_name))
            for a_name, _ in candidates:
                a = med.get((seed, a_name))
                r = b / a if a and b else None
                if r:
                    ratios[a_name].append(r)
                print(f"| {w} | {seed} | {a_name} | {f(a)} | {f(b)} | {f(r)} | {f(base)} | {to_base(a)} | {to_base(b)} |", flush=True)
    geomeans = {a_name: math.exp(sum(math.log(r) for r in rs) / len(rs)) for a_name, rs in ratios.items() if rs}
    for a_name, geo in geomeans.items():
        print(f"| **geomean** ({len(ratios[a_name])}) | | {a_name} | | | **{geo:.3f}** | | | |")
    for a_name, geo in geomeans.items():
        print(f"\n{a_name}'s kernels against {b_name}'s, timed in turns: {geo:.3f} (geomean; the goal is at least 0.95).", end="")
    print(f"\nCompiled picks in {keep}.")


if __name__ == "__main__":
    sys.exit(run_on_kernel_stack(main))
