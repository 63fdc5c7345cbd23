#!/usr/bin/env python3
"""Times onnxruntime on the int8 ResNet-18 body of resnet18_int8.tile
(benchmarks/networks/generate.py): the same 20 convolutions as
QLinearConv (u8 activations, i8 weights, requantized to u8), the stem's
3x3 max pooling on u8, and each block's residual added by QLinearAdd
(onnxruntime's contrib operator) before requantizing. Weights, inputs and
scales are random (timing only; the arithmetic is not tilec's to the
bit: onnxruntime requantizes with its own rounding). Prints one JSON
object: {"library", "median_ms", "runs", "threads"}.

    .tools/bench-venv/bin/python benchmarks/networks/resnet18_int8_ort.py [--threads 1] [--runs 50]
"""
import argparse
import json
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def build(size=224):
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    count = [0]

    def const(name, array):
        inits.append(numpy_helper.from_array(array, name))
        return name

    def scale(value, zero_type=np.uint8):
        count[0] += 1
        i = count[0]
        return const(f"s{i}", np.array(value, np.float32)), const(f"z{i}", np.array(0, zero_type))

    x_s, x_z = scale(0.02)

    def conv(x, c, f, k, s, p, y_name):
        count[0] += 1
        w = const(f"w{count[0]}", rng.integers(-128, 128, (f, c, k, k), dtype=np.int8))
        w_s, w_z = scale(0.01, np.int8)
        y_s, y_z = scale(0.02)
        nodes.append(helper.make_node("QLinearConv", [x, x_s, x_z, w, w_s, w_z, y_s, y_z], [y_name], strides=[s, s], pads=[p] * 4))
        return y_name

    def add(a, b, y_name):
        y_s, y_z = scale(0.02)
        nodes.append(helper.make_node("QLinearAdd", [a, x_s, x_z, b, x_s, x_z, y_s, y_z], [y_name], domain="com.microsoft"))
        return y_name

    y = conv("data", 3, 64, 7, 2, 3, "stem")
    nodes.append(helper.make_node("MaxPool", [y], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    y, c, n = "pool", 64, 0
    for stage, f in enumerate([64, 128, 256, 512]):
        for block in range(2):
            down = stage > 0 and block == 0
            n += 1
            a = conv(y, c, f, 3, 2 if down else 1, 1, f"a{n}")
            shortcut = conv(y, c, f, 1, 2, 0, f"d{n}") if down else y
            b = conv(a, f, f, 3, 1, 1, f"b{n}")
            y, c = add(b, shortcut, f"r{n}"), f
    graph = helper.make_graph(nodes, "resnet18_int8", [helper.make_tensor_value_info("data", TensorProto.UINT8, [1, 3, size, size])], [helper.make_tensor_value_info(y, TensorProto.UINT8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 7
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(build().SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).integers(0, 256, (1, 3, 224, 224), dtype=np.uint8)
    for _ in range(5):
        session.run(None, {"data": x})
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        session.run(None, {"data": x})
        times.append(time.perf_counter() - t)
    times.sort()
    print(json.dumps({"library": f"onnxruntime {ort.__version__} (QLinearConv, QLinearAdd)", "median_ms": times[len(times) // 2] * 1e3, "runs": args.runs, "threads": args.threads}))


if __name__ == "__main__":
    main()
