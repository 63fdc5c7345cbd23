#!/usr/bin/env python3
"""Runs the onnx package's model tests through tilec and tabulates them.

For each model exported by `tools/onnx-suite.py --export DIR`: `tilec import`
it, run it with `tilec-run --backend=cpu` (or --backend) on the exported
inputs, and compare every output with the shipped expected one within the
test's tolerances (|got - want| <= atol + rtol * |want|, onnx's rule).

    tools/onnx-suite.sh                       # export, run, table (this script's caller)
    tools/onnx-suite-tilec.py DIR --bin target/release [--model NAME] [--markdown OUT.md]

Exit status 1 if any model that imports fails to run or to match; models
whose import is refused (an unsupported op or attribute) are reported
with tilec's reason and do not fail the run (--strict makes them fail).
"""

import argparse
import json
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import onnx
except ImportError as error:
    sys.exit(f"onnx-suite-tilec.py: error: the Python package {error.name} is not installed here; run this script with .tools/bench-venv/bin/python (tools/bench-env.sh)")


def first_error(text):
    for line in text.splitlines():
        if line.startswith("error:"):
            return line[len("error:"):].strip()
    return text.strip().splitlines()[-1] if text.strip() else "no output"


def tile_signature(path):
    """The function's parameter names and returned value names, in order."""
    text = open(path).read()
    params = re.search(r"func @\w+\((.*?)\)\s*->", text, re.S).group(1)
    names = re.findall(r"%([A-Za-z0-9_.$]+)\s*:", params)
    returned = re.findall(r"^\s*return\s+(.*)$", text, re.M)[-1]
    return names, [r.strip().lstrip("%") for r in returned.split(",")]


def run_one(model_dir, bin_dir, backend, timeout):
    test = json.load(open(os.path.join(model_dir, "test.json")))
    work = os.path.join(model_dir, "tilec")
    os.makedirs(work, exist_ok=True)
    tile = os.path.join(work, "net.tile")
    row = {"model": os.path.basename(model_dir), "opset": test["opset"], "ops": " ".join(test["op_types"])}
    imported = subprocess.run([os.path.join(bin_dir, "tilec"), "import", os.path.join(model_dir, "model.onnx"), "-o", tile], capture_output=True, text=True, timeout=timeout)
    if imported.returncode != 0:
        row.update(status="refused", why=first_error(imported.stderr))
        return row
    model = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [v.name for v in model.graph.input if v.name not in initializers]
    graph_outputs = [v.name for v in model.graph.output]
    params, results = tile_signature(tile)
    data = test["data_sets"][0]
    folder = os.path.join(model_dir, data["folder"])
    command = [os.path.join(bin_dir, "tilec-run"), tile, f"--backend={backend}", "--output-dir", os.path.join(work, "out")]
    for param, name in zip(params, graph_inputs):
        command += ["--input", f"{param}={os.path.join(folder, 'inputs', data['inputs'][name])}"]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if ran.returncode != 0:
        row.update(status="run failed", why=first_error(ran.stderr))
        return row
    worst = 0.0
    for result, name in zip(results, graph_outputs):
        got = np.load(os.path.join(work, "out", result + ".npy"))
        want = np.load(os.path.join(folder, "expected", data["expected"][name]))
        if got.shape != want.shape:
            row.update(status="mismatch", why=f"output {name}: shape {got.shape}, expected {want.shape}")
            return row
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        worst = max(worst, float(err.max(initial=0.0)))
        bad = int((err > test["atol"] + test["rtol"] * np.abs(want)).sum())
        if bad:
            row.update(status="mismatch", why=f"output {name}: {bad} of {want.size} elements beyond atol {test['atol']:g} + rtol {test['rtol']:g}·|want|", max_abs=worst)
            return row
    row.update(status="passed", max_abs=worst)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="a folder written by tools/onnx-suite.py --export")
    parser.add_argument("--bin", default="target/release", help="the folder with tilec and tilec-run")
    parser.add_argument("--backend", default="cpu", choices=["cpu", "interp", "cuda"])
    parser.add_argument("--model", action="append", default=[], metavar="NAME", help="only this model (repeatable)")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per import or run")
    parser.add_argument("--strict", action="store_true", help="refused imports fail the run too")
    args = parser.parse_args()
    if not os.path.isdir(args.dir):
        sys.exit(f"onnx-suite-tilec.py: error: no exported model in {args.dir}: not a folder (run tools/onnx-suite.py --export {args.dir})")
    names = sorted(n for n in os.listdir(args.dir) if os.path.isfile(os.path.join(args.dir, n, "test.json")))
    if args.model:
        names = [n for n in names if n in args.model]
    if not names:
        sys.exit(f"onnx-suite-tilec.py: error: no exported model in {args.dir} (run tools/onnx-suite.py --export {args.dir})")
    rows = []
    for name in names:
        try:
            row = run_one(os.path.join(args.dir, name), args.bin, args.backend, args.timeout)
        except subprocess.TimeoutExpired:
            row = {"model": name, "status": "timeout", "why": f"more than {args.timeout:g} s"}
        rows.append(row)
        detail = f"max abs err {row['max_abs']:.2e}" if row.get("max_abs") is not None else row.get("why", "")
        print(f"{row['status']:>10}  {name}: {detail}", flush=True)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("passed", "refused", "run failed", "mismatch", "timeout")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    print(f"{len(rows)} models: {summary}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"| model | opset | result | detail |\n|---|---:|---|---|\n")
            for r in rows:
                detail = f"max abs err {r['max_abs']:.2e}" if r["status"] == "passed" else r.get("why", "").replace("|", "\\|")
                f.write(f"| {r['model']} | {r.get('opset', '')} | {r['status']} | {detail} |\n")
            f.write(f"\n{len(rows)} models: {summary}\n")
    failed = counts["run failed"] + counts["mismatch"] + counts["timeout"] + (counts["refused"] if args.strict else 0)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
