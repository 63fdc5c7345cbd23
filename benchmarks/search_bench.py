#!/usr/bin/env python3
"""Compares search strategies on CPU workloads on this machine.

For each workload (a file of benchmarks/workloads/) and strategy, runs

    tilec W.tile --target=host --search-report \
        --pass-pipeline='builtin.module(search{strategy=S measure-top-k=K seed=SEED ...})'

which constructs candidates, compiles and times the best K of them (the
CPU evaluator: LLVM, a worker process, a reference check where the
interpreter can afford it) and keeps the fastest. From the search report
it takes the construction time, the states visited, and the measured
GFLOP/s of the chosen schedule; regret is 1 - GFLOP/s / (the best any
strategy found for the workload). Prints a Markdown table (and JSON with
--json). Not a test: timings depend on the machine and its load.

Strategies are `name` or `name:option=value,option=value` (e.g.
`markov:cache-scale=0.3`; separate strategies with `;` when options
need commas), so option settings can be compared too.
Usage: python3 benchmarks/search_bench.py [--k 8] [--seed 0]
       [--strategies markov,roller,random,exhaustive] [--workloads a,b]
       [--tilec target/debug/tilec] [--json out.json]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_WORKLOADS = [
    "gemm_gta_16x512x128",
    "gemm_gta_512x256x16",
    "conv1d_ansor",
    "conv2d_depthwise_ansor",
    "conv2d_resnet18_c3",
    "bmm_bert_qk",
    "gemv_v3",
]


def run(tilec, workload, strategy, k, seed, extra_options, target="host"):
    name, _, opts = strategy.partition(":")
    # Later settings override earlier ones: the defaults, the strategy's
    # own (`exhaustive:measure-top-k=840`), then --option.
    options = {"strategy": name, "measure-top-k": str(k), "seed": str(seed)}
    for o in [o for o in opts.replace(" ", ",").split(",") if o] + extra_options:
        key, _, value = o.partition("=")
        options[key] = value
    pipeline = "builtin.module(search{" + " ".join(f"{a}={b}" for a, b in options.items()) + "})"
    path = os.path.join(ROOT, "benchmarks", "workloads", workload + ".tile")
    start = time.time()
    p = subprocess.run(
        [tilec, path, "--target=" + target, "--search-report", "--pass-pipeline=" + pipeline, "-o", os.devnull],
        capture_output=True,
        text=True,
    )
    wall = time.time() - start
    out = {"workload": workload, "strategy": strategy, "wall_s": wall}
    if p.returncode != 0:
        first = next((l for l in p.stderr.splitlines() if l.startswith("error")), p.stderr.strip()[:200])
        out["error"] = first
        return out
    r = p.stderr
    m = re.search(r"states visited: (\d+), candidates ranked: (\d+), measured: (\d+)(?: \((\d+) failed\))?", r)
    out["states"], out["ranked"], out["measured"] = int(m.group(1)), int(m.group(2)), int(m.group(3))
    out["failed"] = int(m.group(4) or 0)
    m = re.search(r"construction ([0-9.]+) s, measurement ([0-9.]+) s", r)
    out["construction_s"], out["measurement_s"] = float(m.group(1)), float(m.group(2))
    m = re.search(r"predicted: ([0-9.]+) GFLOP/s", r)
    out["predicted_gflops"] = float(m.group(1))
    m = re.search(r"measured: ([0-9.]+) GFLOP/s \(([0-9.]+) ms\)", r)
    out["gflops"] = float(m.group(1)) if m else None
    out["ms"] = float(m.group(2)) if m else None
    m = re.search(r"chosen: (.*)", r)
    out["chosen"] = m.group(1).strip()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tilec", default=os.path.join(ROOT, "target", "debug", "tilec"))
    ap.add_argument("--k", type=int, default=8, help="candidates measured per strategy (the same for all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--strategies", default="markov,roller,random,exhaustive")
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    ap.add_argument("--option", action="append", default=[], help="an extra search option for every run (budget=4000)")
    ap.add_argument("--target", default="host", help="the target (measurement needs one that runs here; --k 0 compares predictions)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--from-json", help="print the tables of an earlier --json file instead of running")
    ap.add_argument("--pivot", action="store_true", help="one row per strategy, one column per workload: GFLOP/s (regret)")
    a = ap.parse_args()
    strategies = [s for s in a.strategies.split(";" if ";" in a.strategies else ",") if s]
    rows = []
    if a.from_json:
        with open(a.from_json) as f:
            rows = json.load(f)
        strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    for w in [] if a.from_json else [w for w in a.workloads.split(",") if w]:
        results = [run(a.tilec, w, s, a.k, a.seed, a.option, a.target) for s in strategies]
        best = max((r.get("gflops") or 0.0) for r in results)
        for r in results:
            r["regret"] = (1.0 - r["gflops"] / best) if r.get("gflops") and best > 0 else None
            rows.append(r)
            print(json.dumps(r), file=sys.stderr)
    if a.pivot:
        pivot(rows, strategies)
        return
    print(f"| workload | strategy | GFLOP/s (measured) | regret | predicted GFLOP/s | construction (s) | states | measured (failed) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            m = re.search(r"has (\d+) points, more than max-space=(\d+)", r["error"])
            why = f"refused: {int(m.group(1)):,} points > max-space={m.group(2)}" if m else r["error"][:90]
            print(f"| {r['workload']} | {r['strategy']} | — | — | — | — | — | {why} |")
            continue
        g = f"{r['gflops']:.2f}" if r["gflops"] is not None else "—"
        reg = f"{100 * r['regret']:.0f}%" if r["regret"] is not None else "—"
        print(
            f"| {r['workload']} | {r['strategy']} | {g} | {reg} | {r['predicted_gflops']:.1f} | {r['construction_s']:.3f} | {r['states']} | {r['measured']} ({r['failed']}) |"
        )
    # Mean regret per strategy over the workloads where it ran.
    print()
    print("| strategy | mean regret | workloads |")
    print("|---|---:|---:|")
    for s in strategies:
        regs = [r["regret"] for r in rows if r["strategy"] == s and r.get("regret") is not None]
        if regs:
            print(f"| {s} | {100 * sum(regs) / len(regs):.0f}% | {len(regs)} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


def pivot(rows, strategies):
    ws = list(dict.fromkeys(r["workload"] for r in rows))
    print("| strategy | " + " | ".join(ws) + " | mean regret |")
    print("|---|" + "---:|" * len(ws) + "---:|")
    for s in strategies:
        cells, regs = [], []
        for w in ws:
            r = next((x for x in rows if x["workload"] == w and x["strategy"] == s), None)
            if r is None or r.get("gflops") is None:
                cells.append("—")
                continue
            cells.append(f"{r['gflops']:.2f} ({100 * r['regret']:.0f}%)")
            regs.append(r["regret"])
        mean = f"{100 * sum(regs) / len(regs):.0f}%" if regs else "—"
        print(f"| `{s}` | " + " | ".join(cells) + f" | {mean} |")


if __name__ == "__main__":
    main()
