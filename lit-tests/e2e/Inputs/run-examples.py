#!/usr/bin/env python3
"""Runs every shipped example through tilec-run, checked against the
interpreter, and prints one line per file and backend:

    interp ok FILE            the interpreter ran it (scheduled examples after
                              the passes their target needs, checked against
                              the unscheduled ops)
    cpu ok FILE               compiled for this CPU, run and checked
    cpu excluded FILE: WHY    not run on the CPU backend, and why
    FAILED <backend> FILE     with tilec-run's output after it

Exclusions are explicit (EXCLUDED below) or follow from the file itself
(a schedule for a CUDA target; AVX-512 code on a CPU without it); an entry
in EXCLUDED that names no file is itself a failure, so the list cannot go
stale. Usage: run-examples.py TILEC_RUN DIR...
"""

import os
import subprocess
import sys

# Files that are not run on the CPU backend at all, with the reason. Keep
# this short: every entry is a gap a user could fall into.
EXCLUDED = {}

# Passes that turn a level-1 GPU schedule into loops the interpreter runs
# (the same as lit-tests/e2e/run-sm90.tile).
GPU_PIPELINE = "builtin.module(tile,cache,vthread,bind,unroll)"

CUDA_TARGETS = ("sm80", "sm90")


def cpu_has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


def schedule_targets(text):
    """The targets named by `schedule "..."` in a file (level 1 or 2)."""
    found = set()
    for line in text.splitlines():
        line = line.split("//", 1)[0]
        pos = line.find('schedule "')
        while pos >= 0:
            end = line.find('"', pos + 10)
            found.add(line[pos + 10 : end])
            pos = line.find('schedule "', end)
    return found


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    return p.returncode, p.stdout


def main():
    tilec_run, dirs = sys.argv[1], sys.argv[2:]
    files = sorted(os.path.join(d, f) for d in dirs for f in os.listdir(d) if f.endswith(".tile"))
    names = {os.path.basename(f) for f in files}
    failed = 0
    for stale in sorted(set(EXCLUDED) - names):
        print(f"FAILED exclusion names no file: {stale}")
        failed += 1
    avx512 = cpu_has_avx512()
    for path in files:
        name = os.path.basename(path)
        with open(path) as f:
            text = f.read()
        targets = schedule_targets(text)
        gpu = bool(targets & set(CUDA_TARGETS))
        # The interpreter: GPU-scheduled level-1 ops go through the GPU
        # passes first (level-2 loops need none), and are checked against
        # the ops they came from.
        cmd = [tilec_run, path, "--backend=interp", "--check"]
        if gpu and "kernel " not in text:
            cmd.append(f"--pass-pipeline={GPU_PIPELINE}")
        code, out = run(cmd)
        if code == 0 and "passed" in out:
            print(f"interp ok {name}")
        else:
            print(f"FAILED interp {name}\n{out}")
            failed += 1
        # The CPU backend.
        if name in EXCLUDED:
            print(f"cpu excluded {name}: {EXCLUDED[name]}")
            continue
        if gpu:
            print(f"cpu excluded {name}: scheduled for a CUDA target (run on a GPU by lit-tests/e2e/run-sm90.tile)")
            continue
        if "x86-avx512" in targets and not avx512:
            print(f"cpu excluded {name}: AVX-512 code, and this CPU has no AVX-512")
            continue
        code, out = run([tilec_run, path, "--backend=cpu", "--check", "--threads=2"])
        if code == 0 and "passed" in out and "FAILED" not in out:
            print(f"cpu ok {name}")
        else:
            print(f"FAILED cpu {name}\n{out}")
            failed += 1
    print(f"{len(files)} files, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
