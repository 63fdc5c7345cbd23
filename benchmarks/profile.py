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
import ctypes
import json
import time

import numpy as np

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32, "i8": np.int8, "u8": np.uint8}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lib", help="the shared library")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    meta = json.load(open(args.lib + ".json"))
    lib = ctypes.CDLL(args.lib)
    rng = np.random.default_rng(0)
    buffers = {}
    calls = []
    for k in meta["kernels"]:
        ptrs = []
        for p in k["params"]:
            if p["value"] not in buffers:
                dtype = DTYPES[p["elem"]]
                a = rng.standard_normal(p["shape"]).astype(dtype) if np.issubdtype(dtype, np.floating) else np.zeros(p["shape"], dtype)
                buffers[p["value"]] = np.ascontiguousarray(a)
            ptrs.append(buffers[p["value"]].ctypes.data_as(ctypes.c_void_p))
        fn = getattr(lib, k["symbol"])
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p] * len(ptrs) + [ctypes.c_int64, ctypes.c_int64]
        calls.append((fn, ptrs, k["parallel_trip"]))
    runs = 0
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        for fn, ptrs, trip in calls:
            fn(*ptrs, 0, trip)
        runs += 1
    elapsed = time.perf_counter() - start
    print(json.dumps({"runs": runs, "seconds_per_run": elapsed / max(runs, 1)}))


if __name__ == "__main__":
    main()
