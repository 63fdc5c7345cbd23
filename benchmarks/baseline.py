#!/usr/bin/env python3
"""The baseline for one workload file, for `tilec-bench --baseline`.

Reads the workload's header comment (written by workloads/generate.py),
runs the same operator with numpy (GEMM, batched GEMM, GEMV) or
onnxruntime (conv2d, pooling; the quantized u8 x i8 -> i32 GEMM and conv2d
with the faster of MatMulInteger/ConvInteger and QLinearMatMul/QLinearConv;
a bf16 GEMM against numpy's f32 GEMM, there being no bf16 library here)
on random inputs, and prints one JSON object:
{"library": ..., "median_s": ...} or {"skipped": why}. Installs nothing:
a missing package is a skip, not an error.

With --device=cuda the baseline is PyTorch on GPU 0 (cuBLAS, cuDNN) in
strict f32 (TF32 off, as tilec's kernels are f32 FMAs), timed with CUDA
events around the operator alone. Several workloads give one JSON line
each, with its "workload".

Thread counts come from OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (set by
tilec-bench) and --threads (onnxruntime's intra-op threads).

With --tilec-lib LIB (one thread; `tilec-bench --in-turns`), the kernels
of LIB (a library of `tilec --emit=lib`, or tilec-bench's, with its call
metadata LIB.json) are timed too, in turns with the baseline: one call of
each, alternately (every other round in reverse order), in this process.
A shared machine's slow phases last seconds and would otherwise fall on
one side's runs; the JSON then also has "tilec_median_s" and
"tilec_min_s".

onnxruntime gets the weights as initializers (constants), as in a real
model: it then prepacks them once, at session creation, into the blocked
layouts its kernels use (NCHWc filters), which it cannot do for weights
fed at each run. Every library is warmed up (at least WARMUP_CALLS calls
and WARMUP_SECONDS) before RUNS timed calls: onnxruntime's first calls
after the session's creation are slower (2026-11-28, Zen 3: with one
warm-up call and 10 runs it timed ResNet-50 R12 at 1.68-1.95 ms; warmed
up, 1.43-1.49 ms, and 1.26-1.30 ms with constant weights; the conv
inside the whole network took 1.34-1.37 ms).
"""

import argparse
import json
import re
import sys
import time

RUNS = 30
WARMUP_CALLS = 5
WARMUP_SECONDS = 0.2


# The tuned kernels of --tilec-lib: one call of them, timed in turns with
# the baseline (`measured`).
TILEC_CALL = None


def measured(library, fn):
    """The baseline `fn`'s figures: its median alone, or with --tilec-lib
    in turns with tilec's kernels (both warmed up as `median_time` warms
    one up, then RUNS rounds of one call each)."""
    if TILEC_CALL is None:
        return {"library": library, "median_s": median_time(fn)}
    from interleave import time_in_turns

    entries = [("baseline", fn), ("tilec", TILEC_CALL)]
    warm_up(lambda: [call() for _, call in entries])
    times = time_in_turns(entries, RUNS, 0)
    middle = lambda ts: sorted(ts)[len(ts) // 2]
    return {"library": library, "median_s": middle(times["baseline"]), "tilec_median_s": middle(times["tilec"]), "tilec_min_s": min(times["tilec"])}


def warm_up(fn):
    """Calls `fn` at least WARMUP_CALLS times and for WARMUP_SECONDS."""
    start = time.perf_counter()
    calls = 0
    while calls < WARMUP_CALLS or time.perf_counter() - start < WARMUP_SECONDS:
        fn()
        calls += 1


def median_time(fn):
    warm_up(fn)
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
    # No CPU library here multiplies bf16: a bf16 GEMM is set beside the
    # f32 one, and the label says so.
    f32 = " f32 (no bf16 GEMM here)" if "bf16 x bf16" in header else ""
    return measured(blas_name(np) + f32, fn)


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
    constants = {}
    if header.startswith("conv2d"):
        k = int(re.search(r"R=S=(\d+)", header).group(1))
        groups = int((re.search(r"groups (\d+)", header) or [None, 1])[1])
        dilation = int((re.search(r"dilation (\d+)", header) or [None, 1])[1])
        w_shape = [n["F"], n["C"] // groups, k, k]
        constants["w"] = rng.random(w_shape, dtype=np.float32)
        node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[stride, stride], pads=[pad] * 4, group=groups, dilations=[dilation, dilation])
    else:
        k = int(re.search(r"window (\d+)", header).group(1))
        op = "MaxPool" if header.startswith("max") else "AveragePool"
        node = helper.make_node(op, ["x"], ["y"], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    return onnx_timed(node, inputs, TensorProto.FLOAT, feeds, constants, threads, "onnxruntime " + ort.__version__)


def onnx_timed(node, inputs, output_type, feeds, constants, threads, library):
    """Times one onnxruntime session of the single-node graph `node`, whose
    `constants` (name -> array) are initializers: weights, as in a model."""
    from onnx import helper, numpy_helper
    import onnxruntime as ort

    initializers = [numpy_helper.from_array(array, name) for name, array in constants.items()]
    graph = helper.make_graph([node], "baseline", inputs, [helper.make_tensor_value_info("y", output_type, None)], initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    # A newer onnx writes a newer IR version than onnxruntime may read; opset
    # 13 needs no more than IR version 7.
    model.ir_version = min(model.ir_version, 7)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return measured(library, lambda: session.run(None, feeds))


def onnx_int8_case(header, threads):
    """u8 x i8 -> i32 GEMM or conv2d against onnxruntime's quantized
    operators, both timed: MatMulInteger or ConvInteger (zero points 0),
    which sum exactly in i32 as tilec does, and QLinearMatMul or
    QLinearConv, which also requantize the sums to u8 (more work, a
    quarter of the output bytes) and are what a quantized model runs. The
    faster of the two is the baseline; the label names both."""
    try:
        import numpy as np
        import onnx
        from onnx import TensorProto, helper
        import onnxruntime as ort
    except ImportError as e:
        return {"skipped": f"{e.name} is not installed (onnxruntime baseline)"}
    n = numbers(header)
    rng = np.random.default_rng(0)
    attrs = {}
    if header.startswith("C[i, j]"):
        x_shape, w_shape = [n["M"], n["K"]], [n["K"], n["N"]]
        exact_op, qlinear_op = "MatMulInteger", "QLinearMatMul"
    else:
        stride = int(re.search(r"stride (\d+)", header).group(1))
        pad = int(re.search(r"padding (\d+)", header).group(1))
        k = int(re.search(r"R=S=(\d+)", header).group(1))
        x_shape, w_shape = [n["N"], n["C"], n["H"], n["W"]], [n["F"], n["C"], k, k]
        exact_op, qlinear_op = "ConvInteger", "QLinearConv"
        attrs = {"strides": [stride, stride], "pads": [pad] * 4}
    inputs = [helper.make_tensor_value_info("x", TensorProto.UINT8, x_shape)]
    feeds = {"x": rng.integers(0, 256, x_shape, dtype=np.uint8)}
    w = rng.integers(-128, 128, w_shape, dtype=np.int8)
    version = f"onnxruntime {ort.__version__}"
    exact = onnx_timed(helper.make_node(exact_op, ["x", "w"], ["y"], **attrs), inputs, TensorProto.INT32, feeds, {"w": w}, threads, f"{version} {exact_op}")
    # Scales that keep the requantized outputs in range; zero points 0
    # (x's is u8, w's i8, y's u8), as the exact operator's.
    constants = {
        "w": w,
        "x_scale": np.array(0.02, dtype=np.float32), "x_zero": np.array(0, dtype=np.uint8),
        "w_scale": np.array(0.01, dtype=np.float32), "w_zero": np.array(0, dtype=np.int8),
        "y_scale": np.array(4.0, dtype=np.float32), "y_zero": np.array(0, dtype=np.uint8),
    }
    node = helper.make_node(qlinear_op, ["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero"], ["y"], **attrs)
    try:
        qlinear = onnx_timed(node, inputs, TensorProto.UINT8, feeds, constants, threads, f"{version} {qlinear_op}")
    except Exception as e:  # an onnxruntime without the u8 x i8 kernel
        return {**exact, "library": f"{exact['library']} ({qlinear_op} failed: {e})"}
    faster, slower = sorted([exact, qlinear], key=lambda r: r["median_s"])
    slower_op = slower["library"].rsplit(" ", 1)[1]
    return {**faster, "library": f"{faster['library']} (faster than {slower_op}'s {slower['median_s'] * 1e3:.3g} ms)"}


def torch_cuda_case(header):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return {"skipped": "torch is not installed (CUDA baseline)"}
    if not torch.cuda.is_available():
        return {"skipped": "torch sees no GPU"}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # Tensor-core workloads (benchmarks/tensor-cores) name their element
    # types, "f16 x f16 -> f32": the inputs are made in that type and the
    # library sums in f32 (no reduced-precision reductions) or exactly in
    # i32 (torch._int_mm, cuBLAS's int8 GEMM).
    types = re.search(r"; (\w+) x (\w+) -> (\w+);", header)
    torch_type = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i8": torch.int8}
    if types and not all(t in torch_type or t == "i32" for t in types.groups()):
        return {"skipped": f"no CUDA baseline for {types.group(0).strip('; ')}"}
    in_type = torch_type[types.group(1)] if types else torch.float32
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    gen = torch.Generator(device="cuda").manual_seed(0)
    if in_type == torch.int8:
        rand = lambda *shape: torch.randint(-128, 128, shape, generator=gen, device="cuda", dtype=torch.int8)
    else:
        rand = lambda *shape: torch.rand(*shape, generator=gen, device="cuda", dtype=torch.float32).to(in_type)
    n = numbers(header)
    how = f" ({types.group(1)})" if types else ""
    if types and header.startswith("C[i, j]"):
        a, b = rand(n["M"], n["K"]), rand(n["K"], n["N"])
        if in_type == torch.int8:
            fn = lambda: torch._int_mm(a, b)
            how = " (torch._int_mm)"
        else:
            # f16/bf16 into f32 where this torch has mm's out_dtype; else
            # into the input type (the same cuBLAS kernels, f32 sums).
            try:
                torch.mm(a, b, out_dtype=torch.float32)
                fn = lambda: torch.mm(a, b, out_dtype=torch.float32)
                how = f" ({types.group(1)} into f32)"
            except (TypeError, RuntimeError):
                fn = lambda: a @ b
                how = f" ({types.group(1)} into {types.group(1)})"
    elif header.startswith("C[b, i, j]"):
        batch = int(re.search(r"batch (\d+)", header).group(1))
        a, b = rand(batch, n["M"], n["K"]), rand(batch, n["K"], n["N"])
        fn = lambda: torch.bmm(a, b)
    elif header.startswith("C[i, j]"):
        a, b = rand(n["M"], n["K"]), rand(n["K"], n["N"])
        fn = lambda: a @ b
    elif header.startswith("y[i] = sum"):
        a, x = rand(n["M"], n["N"]), rand(n["N"])
        fn = lambda: torch.mv(a, x)
    elif header.startswith("conv2d NCHW") and "transposed" not in header:
        stride = int(re.search(r"stride (\d+)", header).group(1))
        pad = int(re.search(r"padding (\d+)", header).group(1))
        k = int(re.search(r"R=S=(\d+)", header).group(1))
        groups = int((re.search(r"groups (\d+)", header) or [None, 1])[1])
        dilation = int((re.search(r"dilation (\d+)", header) or [None, 1])[1])
        x, w = rand(n["N"], n["C"], n["H"], n["W"]), rand(n["F"], n["C"] // groups, k, k)
        fn = lambda: F.conv2d(x, w, stride=stride, padding=pad, dilation=dilation, groups=groups)
    elif "pooling" in header:
        stride = int(re.search(r"stride (\d+)", header).group(1))
        pad = int(re.search(r"padding (\d+)", header).group(1))
        k = int(re.search(r"window (\d+)", header).group(1))
        x = rand(n["N"], n["C"], n["H"], n["W"])
        pool = F.max_pool2d if header.startswith("max") else F.avg_pool2d
        fn = lambda: pool(x, k, stride=stride, padding=pad)
    else:
        return {"skipped": "no baseline for this operator"}
    for _ in range(3):
        fn()
    times = []
    for _ in range(RUNS * 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return {"library": f"torch {torch.__version__}{how} on {torch.cuda.get_device_name(0)}", "median_s": times[len(times) // 2]}


def baseline(workload, threads, device):
    with open(workload) as f:
        lines = [l[2:].strip() for l in f if l.startswith("//")]
    header = next((l for l in lines if re.match(r"(C\[|y\[i\] = sum|conv2d NCHW|average pooling|max pooling)", l)), None)
    if header is None:
        return {"skipped": "no baseline for this operator"}
    if "u8 x i8 -> i32" in header:
        if device == "cuda":
            return {"skipped": "no CUDA baseline for the quantized operators"}
        return onnx_int8_case(header, threads)
    if device == "cuda":
        return torch_cuda_case(header)
    if header.startswith(("C[", "y[i] = sum")):
        return numpy_case(header)
    if header.startswith("conv2d NCHW") and "transposed" not in header:
        return onnx_case(header, threads)
    if "pooling" in header:
        return onnx_case(header, threads)
    return {"skipped": "no baseline for this operator"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="+")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--tilec-lib", metavar="LIB", help="also time this library's kernels, in turns with the baseline (one thread)")
    args = parser.parse_args()
    if args.tilec_lib:
        if args.threads != 1 or args.device != "cpu" or len(args.workload) != 1:
            parser.error("--tilec-lib times one workload on one CPU thread")
        from interleave import kernel_call
        from kernel_lib import run_on_kernel_stack

        def in_turns():
            # The kernels (and their prepack kernels, run once here) need
            # the kernel thread's stack.
            global TILEC_CALL
            TILEC_CALL = kernel_call(args.tilec_lib)
            report(args)

        return run_on_kernel_stack(in_turns)
    report(args)


def report(args):
    for workload in args.workload:
        result = baseline(workload, args.threads, args.device)
        if len(args.workload) > 1:
            result = {"workload": workload, **result}
        json.dump(result, sys.stdout)
        print(flush=True)


if __name__ == "__main__":
    main()
