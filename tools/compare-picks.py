#!/usr/bin/env python3
"""Collects and compares the schedules the search picks.

A refactoring of the search must not change what it picks: for a fixed seed,
markov, roller and exhaustive give byte-identical schedules before and after.
`collect` runs a `tilec` binary's construction-only search (no measurement:
deterministic, and independent of the machine's load) on every workload under
benchmarks/workloads/ for each target and strategy, and writes one JSON line
per run: the workload, target, strategy, exit status, the printed module (the
chosen schedules) or the error. `compare` joins two such files and prints every
run whose output differs; it exits 1 if any does.

Usage:
  tools/compare-picks.py collect --tilec BIN --out FILE [--jobs N]
        [--targets x86-avx2,x86-avx512,sm90] [--strategies markov,roller,exhaustive]
        [--options 'seed=0'] [--workloads 'benchmarks/workloads/*.tile']
  tools/compare-picks.py compare BEFORE AFTER

Typical use: build the old commit's `tilec` (release) and copy it aside, collect
with it, build the new one, collect again, compare.
"""

import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_one(tilec, path, target, strategy, options, timeout):
    pipeline = f"builtin.module(search{{strategy={strategy} {options}}})".replace(" }", "}")
    started = time.monotonic()
    try:
        p = subprocess.run(
            [tilec, path, f"--target={target}", f"--pass-pipeline={pipeline}", "--search-report"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        status, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        status, out, err = "timeout", "", f"no answer within {timeout} s"
    seconds = time.monotonic() - started
    # An error's first line names it; the rest (source excerpts) follows from it.
    error = next((line for line in err.splitlines() if line.startswith("error")), "") if status != 0 else ""
    # The model's figure for each chosen schedule (`--search-report`), to
    # show what a pick that changed on purpose is worth.
    predicted = [line.strip() for line in err.splitlines() if line.strip().startswith("predicted:")]
    return {
        "workload": os.path.relpath(path, ROOT),
        "target": target,
        "strategy": strategy,
        "status": status,
        "output_sha256": hashlib.sha256(out.encode()).hexdigest(),
        "output": out,
        "error": error,
        "predicted": predicted,
        "seconds": round(seconds, 3),
    }


def collect(args):
    paths = sorted(glob.glob(os.path.join(ROOT, args.workloads)))
    if not paths:
        sys.exit(f"no workloads match {args.workloads}")
    jobs = [
        (p, t, s)
        for p in paths
        for t in args.targets.split(",")
        for s in args.strategies.split(",")
    ]
    results = []
    # Each run is appended as it ends (a long collection can be read while
    # it runs), then the file is rewritten in a fixed order.
    with open(args.out, "w") as partial, concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, args.tilec, p, t, s, args.options, args.timeout) for (p, t, s) in jobs]
        for i, f in enumerate(concurrent.futures.as_completed(futures), 1):
            results.append(f.result())
            partial.write(json.dumps(results[-1], sort_keys=True) + "\n")
            partial.flush()
            if i % 50 == 0 or i == len(futures):
                print(f"{i}/{len(futures)} runs", file=sys.stderr)
    results.sort(key=lambda r: (r["workload"], r["target"], r["strategy"]))
    with open(args.out, "w") as out:
        for r in results:
            out.write(json.dumps(r, sort_keys=True) + "\n")
    slowest = max(results, key=lambda r: r["seconds"])
    failed = sum(1 for r in results if r["status"] != 0)
    print(
        f"{len(results)} runs written to {args.out}; {failed} ended in an error "
        f"(e.g. exhaustive refusing a large space); slowest {slowest['seconds']} s "
        f"({slowest['workload']}, {slowest['target']}, {slowest['strategy']})",
        file=sys.stderr,
    )


def load(path):
    with open(path) as f:
        return {(r["workload"], r["target"], r["strategy"]): r for r in map(json.loads, f)}


def compare(args):
    before, after = load(args.before), load(args.after)
    keys = sorted(set(before) | set(after))
    differing = 0
    for k in keys:
        a, b = before.get(k), after.get(k)
        if a is None or b is None:
            differing += 1
            print(f"{' / '.join(k)}: only in {'after' if a is None else 'before'}")
            continue
        if (a["status"], a["output_sha256"], a["error"]) != (b["status"], b["output_sha256"], b["error"]):
            differing += 1
            print(f"{' / '.join(k)}: differs")
            print(f"  before (status {a['status']}): {summary(a)}  [{'; '.join(a.get('predicted', []))}]")
            print(f"  after  (status {b['status']}): {summary(b)}  [{'; '.join(b.get('predicted', []))}]")
    same = len(keys) - differing
    print(f"{same} of {len(keys)} picks identical, {differing} differ")
    times_a = sum(r["seconds"] for r in before.values())
    times_b = sum(r["seconds"] for r in after.values())
    print(f"total search time: before {times_a:.1f} s, after {times_b:.1f} s (wall clock of each run, load included)")
    sys.exit(1 if differing else 0)


def summary(r):
    if r["status"] != 0:
        return r["error"] or "(no error line)"
    lines = [l.strip() for l in r["output"].splitlines()]
    sched = [l for l in lines if l.startswith(("tile =", "vthread =", "cache =", "order =", "vector =", "pack ="))]
    return " ".join(sched) or r["output_sha256"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--tilec", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    c.add_argument("--targets", default="x86-avx2,x86-avx512,sm90")
    c.add_argument("--strategies", default="markov,roller,exhaustive")
    c.add_argument("--options", default="seed=0")
    c.add_argument("--workloads", default="benchmarks/workloads/*.tile")
    c.add_argument("--timeout", type=float, default=600)
    d = sub.add_parser("compare")
    d.add_argument("before")
    d.add_argument("after")
    args = ap.parse_args()
    collect(args) if args.cmd == "collect" else compare(args)


if __name__ == "__main__":
    main()
