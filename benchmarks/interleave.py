#!/usr/bin/env python3
"""Times several kernels side by side, one call of each in turn: for
comparing schedules of one operator on a noisy machine, where the slow
phases last seconds and would otherwise fall on one schedule's runs.

Each LIB is a shared library made by `tilec FILE --emit=lib -o LIB` (with
its call metadata LIB.json, docs/codegen.md, "C ABI"); its kernels run in
order over their whole parallel range on one thread, as one call. With
--ort-conv, onnxruntime (one thread) runs a convolution with those
dimensions as another entry; with --numpy-gemm, numpy's `a @ b` (set
OPENBLAS_NUM_THREADS=1 for one thread) does; with --ort-int8, onnxruntime's
u8 x i8 operators (MatMulInteger and QLinearMatMul, or ConvInteger and
QLinearConv) do, and the faster of the two is the baseline. Every round calls each entry once, in turn
(every other round in reverse order); the figures are per-call medians
and first quartiles in milliseconds, and each entry's speed against
onnxruntime's where it ran.

    benchmarks/interleave.py --rounds 300 --ort-conv 1,512,7,7,2048,1,1,1,0 a.so b.so
    OPENBLAS_NUM_THREADS=1 benchmarks/interleave.py --rounds 30 --numpy-gemm 1024,1024,1024 gemm.so
    benchmarks/interleave.py --rounds 100 --cold 96 layer.so   # caches evicted before each call

Needs numpy, and onnx and onnxruntime for --ort-conv (tools/bench-env.sh
installs them).
"""

import argparse
import statistics
import time

import numpy as np

from kernel_lib import kernel_calls, run_on_kernel_stack


def kernel_call(path):
    """One call of every kernel of the library at `path`, over its whole
    range, on seeded data."""
    calls, buffers = kernel_calls(path)

    def call():
        for fn, ptrs, trip in calls:
            fn(*ptrs, 0, trip)

    call.buffers = buffers  # kept alive with the closure
    return call


def ort_conv_call(spec):
    """onnxruntime (one thread) running Conv with dimensions
    N,C,H,W,F,R,S,stride,pad and constant weights."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    n, c, h, w, f, r, s, stride, pad = map(int, spec.split(","))
    rng = np.random.default_rng(1)
    weights = numpy_helper.from_array(rng.standard_normal((f, c, r, s)).astype(np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[stride, stride], pads=[pad] * 4)
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    return lambda: session.run(None, {"x": x})


def ort_session(node, inputs, output_type, constants):
    """A one-thread onnxruntime session of the single-node graph `node`."""
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    weights = [numpy_helper.from_array(a, name) for name, a in constants.items()]
    graph = helper.make_graph([node], "op", inputs, [helper.make_tensor_value_info("y", output_type, None)], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def ort_int8_calls(spec):
    """onnxruntime's two quantized forms of a u8 x i8 GEMM (M,N,K) or
    convolution (N,C,H,W,F,R,S,STRIDE,PAD): the exact i32 operator
    (MatMulInteger, ConvInteger) and the requantizing one (QLinearMatMul,
    QLinearConv), as benchmarks/baseline.py times them."""
    from onnx import TensorProto, helper

    dims = list(map(int, spec.split(",")))
    rng = np.random.default_rng(1)
    if len(dims) == 3:
        m, n, k = dims
        x_shape, w_shape, ops, attrs = [m, k], [k, n], ("MatMulInteger", "QLinearMatMul"), {}
    else:
        n, c, h, w, f, r, s, stride, pad = dims
        x_shape, w_shape, ops = [n, c, h, w], [f, c, r, s], ("ConvInteger", "QLinearConv")
        attrs = {"strides": [stride, stride], "pads": [pad] * 4}
    x = rng.integers(0, 256, x_shape, dtype=np.uint8)
    w = rng.integers(-128, 128, w_shape, dtype=np.int8)
    inputs = [helper.make_tensor_value_info("x", TensorProto.UINT8, x_shape)]
    exact = ort_session(helper.make_node(ops[0], ["x", "w"], ["y"], **attrs), inputs, TensorProto.INT32, {"w": w})
    scales = {
        "w": w,
        "x_scale": np.array(0.02, dtype=np.float32), "x_zero": np.array(0, dtype=np.uint8),
        "w_scale": np.array(0.01, dtype=np.float32), "w_zero": np.array(0, dtype=np.int8),
        "y_scale": np.array(4.0, dtype=np.float32), "y_zero": np.array(0, dtype=np.uint8),
    }
    qnode = helper.make_node(ops[1], ["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero"], ["y"], **attrs)
    qlinear = ort_session(qnode, inputs, TensorProto.UINT8, scales)
    return [(f"onnxruntime {ops[0]}", lambda: exact.run(None, {"x": x})), (f"onnxruntime {ops[1]}", lambda: qlinear.run(None, {"x": x}))]


def numpy_gemm_call(spec):
    """numpy's `a @ b` for an M x K by K x N product of f32."""
    m, n, k = map(int, spec.split(","))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    out = np.empty((m, n), np.float32)
    return lambda: np.matmul(a, b, out=out)


def cache_evictor(megabytes):
    """A call that writes and reads `megabytes` of memory, to leave the
    caches holding none of a kernel's data before its timed call: as a
    layer of a network finds its weights (read once per inference, from
    memory), where repeated calls of one kernel find them in the caches."""
    junk = np.ones(int(megabytes * 2**20) // 8, np.float64)

    def evict():
        junk[::8] += 1.0  # one write per 64-byte line
        return float(junk[::8].sum())

    return evict


def time_in_turns(entries, rounds, warmup, before_each=None):
    """Calls each (name, call) of `entries` once per round, in turn (every
    other round in reverse order), after `warmup` rounds; each name's
    seconds per call. `before_each`, if given, runs untimed before every
    timed call."""
    for _ in range(warmup):
        for _, call in entries:
            call()
    times = {name: [] for name, _ in entries}
    for i in range(rounds):
        for name, call in entries if i % 2 == 0 else entries[::-1]:
            if before_each:
                before_each()
            t = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("libs", nargs="+", help="shared libraries from `tilec --emit=lib`")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--ort-conv", metavar="N,C,H,W,F,R,S,STRIDE,PAD", help="also time onnxruntime on this convolution")
    ap.add_argument("--numpy-gemm", metavar="M,N,K", help="also time numpy on this f32 GEMM")
    ap.add_argument("--ort-int8", metavar="M,N,K|N,C,H,W,F,R,S,STRIDE,PAD", help="also time onnxruntime's two u8 x i8 operators on this GEMM or convolution; the faster is the baseline")
    ap.add_argument("--cold", type=float, metavar="MB", help="before each timed call, write and read MB megabytes (more than the last-level cache) so that the call starts with cold caches, as a network's layer does with its weights")
    args = ap.parse_args()
    entries = [(lib, kernel_call(lib)) for lib in args.libs]
    if args.ort_conv:
        entries.append(("onnxruntime", ort_conv_call(args.ort_conv)))
    if args.numpy_gemm:
        entries.append(("numpy", numpy_gemm_call(args.numpy_gemm)))
    if args.ort_int8:
        entries += ort_int8_calls(args.ort_int8)
    times = time_in_turns(entries, args.rounds, args.warmup, cache_evictor(args.cold) if args.cold else None)
    baseline = "onnxruntime" if args.ort_conv else "numpy" if args.numpy_gemm else None
    if args.ort_int8:
        baseline = min((name for name, _ in entries[-2:]), key=lambda name: statistics.median(times[name]))
    base = statistics.median(times[baseline]) if baseline else None
    for name, _ in entries:
        med = statistics.median(times[name])
        q1 = float(np.percentile(times[name], 25))
        line = f"{name:32s} median {med * 1e3:8.3f} ms  p25 {q1 * 1e3:8.3f} ms"
        if base:
            line += f"  {baseline}/this {base / med:5.2f}"
        print(line)


if __name__ == "__main__":
    run_on_kernel_stack(main)
