#!/usr/bin/env python3
"""The baseline for one workload file, for `tilec-bench --baseline`.

Reads the workload's header comment (written by workloads/generate.py),
runs the same operator with numpy (GEMM, batched GEMM, GEMV) or
onnxruntime (conv2d, pooling) on random inputs, and prints one JSON object:
{"library": ..., "median_s": ...} or {"skipped": why}. Installs nothing:
a missing package is a skip, not an error.

Thread counts come from OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (set by
tilec-bench) and --threads (onnxruntime's intra-op threads).
"""

import argparse
import json
import re
import sys
import time

RUNS = 10


def median_time(fn):
    fn()
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def numbers(text):
    return {k: int(v) for k, v in re.findall(r"\b([A-Z])=(\d+)", text)}


def blas_name(np):
    try:
        config = np.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {})
        return "numpy/" + blas.get("name", "blas")
    except Exception:
        return "numpy"


def numpy_case(header):
    try:
        import numpy as np
    except ImportError:
        return {"skipped": "numpy is not installed"}
    rng = np.random.default_rng(0)
    n = numbers(header)
    if header.startswith("C[b, i, j]"):
        batch = int(re.search(r"batch (\d+)", header).group(1))
        a = rng.random((batch, n["M"], n["K"]), dtype=np.float32)
        b = rng.random((batch, n["K"], n["N"]), dtype=np.float32)
        fn = lambda: np.matmul(a, b)
    elif header.startswith("C[i, j]"):
        a = rng.random((n["M"], n["K"]), dtype=np.float32)
        b = rng.random((n["K"], n["N"]), dtype=np.float32)
        fn = lambda: a @ b
    else:
        a = rng.random((n["M"], n["N"]), dtype=np.float32)
        x = rng.random(n["N"], dtype=np.float32)
        fn = lambda: a @ x
    return {"library": blas_name(np), "median_s": median_time(fn)}


def onnx_case(header, threads):
    try:
        import numpy as np
        import onnx
        from onnx import TensorProto, helper
        import onnxruntime as ort
    except ImportError as e:
        return {"skipped": f"{e.name} is not installed (onnxruntime baseline)"}
    n = numbers(header)
    stride = int(re.search(r"stride (\d+)", header).group(1))
    pad = int(re.search(r"padding (\d+)", header).group(1))
    x_shape = [n["N"], n["C"], n["H"], n["W"]]
    rng = np.random.default_rng(0)
    x = rng.random(x_shape, dtype=np.float32)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    feeds = {"x": x}
    if header.startswith("conv2d"):
        k = int(re.search(r"R=S=(\d+)", header).group(1))
        groups = int((re.search(r"groups (\d+)", header) or [None, 1])[1])
        dilation = int((re.search(r"dilation (\d+)", header) or [None, 1])[1])
        w_shape = [n["F"], n["C"] // groups, k, k]
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, w_shape))
        feeds["w"] = rng.random(w_shape, dtype=np.float32)
        node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[stride, stride], pads=[pad] * 4, group=groups, dilations=[dilation, dilation])
    else:
        k = int(re.search(r"window (\d+)", header).group(1))
        op = "MaxPool" if header.startswith("max") else "AveragePool"
        node = helper.make_node(op, ["x"], ["y"], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    graph = helper.make_graph([node], "baseline", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    # A newer onnx writes a newer IR version than onnxruntime may read; opset
    # 13 needs no more than IR version 7.
    model.ir_version = min(model.ir_version, 7)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return {"library": "onnxruntime " + ort.__version__, "median_s": median_time(lambda: session.run(None, feeds))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with open(args.workload) as f:
        lines = [l[2:].strip() for l in f if l.startswith("//")]
    header = next((l for l in lines if re.match(r"(C\[|y\[i\] = sum|conv2d NCHW|average pooling|max pooling)", l)), None)
    if header is None:
        result = {"skipped": "no baseline for this operator"}
    elif header.startswith(("C[", "y[i] = sum")):
        result = numpy_case(header)
    elif header.startswith("conv2d NCHW") and "transposed" not in header:
        result = onnx_case(header, args.threads)
    elif "pooling" in header:
        result = onnx_case(header, args.threads)
    else:
        result = {"skipped": "no baseline for this operator"}
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
