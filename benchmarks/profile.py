#!/usr/bin/env python3
"""Runs the kernels of a shared library made by `tilec --emit=lib` in a
loop, for a profiler to sample (tools/profile.sh). Reads the call metadata
`LIB.json` (docs/codegen.md, "C ABI"): per kernel its symbol, parallel trip
count and parameter shapes; buffers are shared by value number, filled with
seeded random numbers, and every kernel runs over its whole range [0, trip)
on one thread, in order, until --seconds have passed.

Needs numpy (tools/bench-env.sh installs it).
"""

import argparse
import json
import time

from kernel_lib import kernel_calls, run_on_kernel_stack


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lib", help="the shared library")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    calls, _buffers = kernel_calls(args.lib)
    runs = 0
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        for fn, ptrs, trip in calls:
            fn(*ptrs, 0, trip)
        runs += 1
    elapsed = time.perf_counter() - start
    print(json.dumps({"runs": runs, "seconds_per_run": elapsed / max(runs, 1)}))


if __name__ == "__main__":
    run_on_kernel_stack(main)
