#!/usr/bin/env python3
"""TVM MetaSchedule as the baseline for one workload file, for
`tilec-bench --baseline=tvm` (issue 23: what a user would pick instead).

Reads the workload's header comment (as benchmarks/baseline.py does),
writes the same operator in TVM's tensor expressions (GEMM, batched GEMM,
GEMV, conv2d NCHW with stride, padding, dilation and groups), tunes it with
MetaSchedule (its defaults: the XGBoost cost model, the evolutionary
search, `--trials` measured candidates, 64 by default), compiles the best,
and times it. Prints one JSON object: {"library", "median_s", "tuning_s",
"trials"} or {"skipped": why}.

Tuning is done once per workload, thread count, trial count and machine:
the tuning database and the time it took are kept in a work folder under
the cache directory (TILEC_CACHE_DIR, else XDG_CACHE_HOME/tilec, else
~/.cache/tilec), so the rounds of tilec-bench only time the compiled
kernel. Installs nothing: tools/bench-env.sh --tvm makes
.tools/tvm-venv, which tilec-bench runs this with; a missing package is a
skip, not an error.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time

RUNS = 10


def numbers(text):
    return {k: int(v) for k, v in re.findall(r"\b([A-Z])=(\d+)", text)}


def header_of(workload):
    with open(workload) as f:
        lines = [l[2:].strip() for l in f if l.startswith("//")]
    return next((l for l in lines if re.match(r"(C\[|y\[i\] = sum|conv2d NCHW)", l)), None)


def operator(header, te, topi):
    """(the tensor expressions' arguments, output), or None."""
    n = numbers(header)
    f32 = "float32"
    if "u8 x i8" in header or "transposed" in header:
        return None
    if header.startswith("C[b, i, j]"):
        batch = int(re.search(r"batch (\d+)", header).group(1))
        a = te.placeholder((batch, n["M"], n["K"]), f32, name="A")
        b = te.placeholder((batch, n["K"], n["N"]), f32, name="B")
        k = te.reduce_axis((0, n["K"]), name="k")
        c = te.compute((batch, n["M"], n["N"]), lambda z, i, j: te.sum(a[z, i, k] * b[z, k, j], axis=k), name="C")
        return [a, b, c]
    if header.startswith("C[i, j]"):
        a = te.placeholder((n["M"], n["K"]), f32, name="A")
        b = te.placeholder((n["K"], n["N"]), f32, name="B")
        k = te.reduce_axis((0, n["K"]), name="k")
        c = te.compute((n["M"], n["N"]), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
        return [a, b, c]
    if header.startswith("y[i] = sum"):
        a = te.placeholder((n["M"], n["N"]), f32, name="A")
        x = te.placeholder((n["N"],), f32, name="x")
        k = te.reduce_axis((0, n["N"]), name="k")
        y = te.compute((n["M"],), lambda i: te.sum(a[i, k] * x[k], axis=k), name="y")
        return [a, x, y]
    if header.startswith("conv2d NCHW"):
        stride = int(re.search(r"stride (\d+)", header).group(1))
        pad = int(re.search(r"padding (\d+)", header).group(1))
        k = int(re.search(r"R=S=(\d+)", header).group(1))
        groups = int((re.search(r"groups (\d+)", header) or [None, 1])[1])
        dilation = int((re.search(r"dilation (\d+)", header) or [None, 1])[1])
        x = te.placeholder((n["N"], n["C"], n["H"], n["W"]), f32, name="x")
        w = te.placeholder((n["F"], n["C"] // groups, k, k), f32, name="w")
        if groups == 1:
            y = topi.nn.conv2d_nchw(x, w, stride, pad, dilation)
        else:
            y = topi.nn.group_conv2d_nchw(x, w, stride, pad, dilation, groups)
        return [x, w, y]
    return None


def target_string(threads):
    with open("/proc/cpuinfo") as f:
        flags = next((l for l in f if l.startswith("flags")), "")
    mcpu = "skylake-avx512" if " avx512f" in flags else "core-avx2"
    return {"kind": "llvm", "mcpu": mcpu, "num-cores": threads}


def cache_dir():
    for var, sub in (("TILEC_CACHE_DIR", ""), ("XDG_CACHE_HOME", "tilec")):
        if os.environ.get(var):
            return os.path.join(os.environ[var], sub)
    return os.path.join(os.path.expanduser("~"), ".cache", "tilec")


def machine_key():
    """The CPU's identity (vendor, family, model, flags), as tilec's
    calibration cache keys it: tuning on another CPU is not reused."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read().split("\n\n")[0]
    except OSError:
        text = ""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def baseline(workload, threads, trials):
    try:
        import numpy as np
        import tvm
        from tvm import te, topi
        from tvm.s_tir import meta_schedule as ms
    except ImportError as e:
        return {"skipped": f"{e.name} is not installed (TVM baseline: tools/bench-env.sh --tvm)"}
    header = header_of(workload)
    args = operator(header, te, topi) if header else None
    if args is None:
        return {"skipped": "no TVM baseline for this operator"}
    func = te.create_prim_func(args)
    target = tvm.target.Target(target_string(threads))
    key = hashlib.sha256(f"{header}|{threads}|{trials}|{target}|{machine_key()}|{tvm.__version__}".encode()).hexdigest()[:16]
    work = os.path.join(cache_dir(), "tvm", f"{os.path.basename(workload)}-{key}")
    done = os.path.join(work, "tuned.json")
    if not os.path.exists(done):
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        start = time.perf_counter()
        # MetaSchedule's builders and runners print; tilec-bench reads
        # this script's standard output as JSON.
        with tempfile.TemporaryFile("w+") as log:
            saved = os.dup(1)
            os.dup2(log.fileno(), 1)
            try:
                ms.tune_tir(func, target, work, max_trials_global=trials, num_trials_per_iter=min(64, trials), num_tuning_cores=threads, seed=0)
            finally:
                os.dup2(saved, 1)
                os.close(saved)
        with open(done, "w") as f:
            json.dump({"tuning_s": time.perf_counter() - start}, f)
    with open(done) as f:
        tuning_s = json.load(f)["tuning_s"]
    database = ms.database.JSONDatabase(os.path.join(work, "database_workload.json"), os.path.join(work, "database_tuning_record.json"), allow_missing=False)
    sch = ms.tir_integration.compile_tir(database, func, target)
    if sch is None:
        return {"skipped": "MetaSchedule found no valid schedule"}
    lib = tvm.compile(sch.mod, target=target)
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    tensors = [tvm.runtime.tensor(rng.random([int(d) for d in a.shape], dtype=np.float32), dev) for a in args[:-1]]
    tensors.append(tvm.runtime.tensor(np.zeros([int(d) for d in args[-1].shape], dtype=np.float32), dev))
    module = lib.jit()
    timer = module.time_evaluator("main", dev, number=1, repeat=RUNS, min_repeat_ms=0)
    module["main"](*tensors)
    times = sorted(timer(*tensors).results)
    return {
        "library": f"TVM {tvm.__version__} MetaSchedule ({trials} trials)",
        "median_s": times[len(times) // 2],
        "tuning_s": tuning_s,
        "trials": trials,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--trials", type=int, default=64)
    args = parser.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    json.dump(baseline(args.workload, args.threads, args.trials), sys.stdout)
    print(flush=True)


if __name__ == "__main__":
    main()
