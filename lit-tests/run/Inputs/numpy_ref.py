#!/usr/bin/env python3
"""numpy references for the tilec-run tests (numpy-*.tile).

    numpy_ref.py rand PATH SHAPE [--seed N] [--dtype D]
                                                write float32 uniform in [-1, 1), or
                                                integers of dtype D (uint8, int8) over
                                                its whole range
    numpy_ref.py perturb IN OUT                 copy IN, one element moved by 1%
                                                (by 1 for integers)
    numpy_ref.py OP RESULT INPUT... [options]   compare RESULT with numpy

Each OP is computed here from its textbook definition, in float64, without
looking at the tile program: matmul/einsum for the GEMMs, zero padding with
np.pad and a sum over kernel offsets of strided slices for convolutions, a
scatter of every input element for transposed convolution, sliding windows
for pooling, np.mean and np.cumsum. RESULT (a .npy written by tilec-run)
must have the reference's shape and dtype float32, and every element must be
within rtol * max|ref| of the reference (rtol 1e-4). Prints `OK shape=...
max_err=...` and exits 0, or `MISMATCH ...` and exits 1.

`igemm` is the integer GEMM (quantized MatMulInteger: u8 or i8 inputs,
int32 result): the products are summed exactly in int64, wrapped to int32,
and RESULT must be int32 and equal to it element for element.
"""
import argparse
import itertools
import sys

import numpy as np


def shape_arg(text):
    return tuple(int(d) for d in text.split("x"))


def conv(x, w, stride=1, pad=0, dilation=1, groups=1):
    """y[n, f, o...] = sum_{c in f's group, k...} xpad[n, c, o*stride + k*dilation] * w[f, c, k...]"""
    nd = x.ndim - 2
    n, c = x.shape[:2]
    f, cg = w.shape[:2]
    kernel = w.shape[2:]
    assert c == cg * groups and f % groups == 0, (x.shape, w.shape, groups)
    fg = f // groups
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pad, pad)] * nd)
    out = [(xp.shape[2 + i] - dilation * (kernel[i] - 1) - 1) // stride + 1 for i in range(nd)]
    y = np.zeros((n, f, *out))
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * fg:(g + 1) * fg]
        for k in itertools.product(*(range(e) for e in kernel)):
            window = tuple(slice(k[i] * dilation, k[i] * dilation + stride * (out[i] - 1) + 1, stride) for i in range(nd))
            patch = xs[(slice(None), slice(None)) + window]  # [n, cg, out...]
            tap = ws[(slice(None), slice(None)) + k]  # [fg, cg]
            y[:, g * fg:(g + 1) * fg] += np.einsum("nc...,fc->nf...", patch, tap)
    return y


def conv_transpose2d(x, w, stride, pad):
    """Every input element x[n, c, i, j] adds x * w[c, f, r, s] to
    full[n, f, i*stride + r, j*stride + s]; the result crops `pad` from each side."""
    n, c, h, wd = x.shape
    c2, f, kh, kw = w.shape
    assert c == c2
    full = np.zeros((n, f, (h - 1) * stride + kh, (wd - 1) * stride + kw))
    for i in range(h):
        for j in range(wd):
            for r in range(kh):
                for s in range(kw):
                    full[:, :, i * stride + r, j * stride + s] += x[:, :, i, j] @ w[:, :, r, s]
    ho, wo = full.shape[2] - 2 * pad, full.shape[3] - 2 * pad
    return full[:, :, pad:pad + ho, pad:pad + wo]


def pool(x, kernel, stride, pad, kind):
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, [(0, 0), (0, 0), (pad, pad), (pad, pad)], constant_values=fill)
    windows = np.lib.stride_tricks.sliding_window_view(xp, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]
    return windows.max(axis=(-2, -1)) if kind == "max" else windows.mean(axis=(-2, -1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("op")
    p.add_argument("paths", nargs="+")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--pad", type=int, default=0)
    p.add_argument("--dilation", type=int, default=1)
    p.add_argument("--groups", type=int, default=1)
    p.add_argument("--kernel", type=int, default=1)
    p.add_argument("--transpose-b", action="store_true")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--dtype", default="float32")
    a = p.parse_args()

    if a.op == "rand":
        path, shape = a.paths
        rng = np.random.default_rng(a.seed)
        if a.dtype == "float32":
            np.save(path, rng.uniform(-1.0, 1.0, size=shape_arg(shape)).astype(np.float32))
        else:
            info = np.iinfo(a.dtype)
            np.save(path, rng.integers(info.min, info.max, size=shape_arg(shape), endpoint=True, dtype=a.dtype))
        return 0
    if a.op == "perturb":
        src, dst = a.paths
        y = np.load(src)
        flat = y.reshape(-1).copy()
        if np.issubdtype(flat.dtype, np.integer):
            flat[flat.size // 2] += 1
        else:
            flat[flat.size // 2] += 0.01 * np.abs(flat).max()
        np.save(dst, flat.reshape(y.shape))
        return 0

    result_path, *input_paths = a.paths
    got = np.load(result_path)
    if a.op == "igemm":
        x, w = (np.load(q) for q in input_paths)
        ref = np.matmul(x.astype(np.int64), w.astype(np.int64)).astype(np.int32)
        if got.dtype != np.int32 or got.shape != ref.shape:
            print(f"MISMATCH dtype {got.dtype} shape {got.shape}, expected int32 {ref.shape}")
            return 1
        wrong = np.argwhere(got != ref)
        if len(wrong):
            at = tuple(wrong[0])
            print(f"MISMATCH shape={ref.shape} {len(wrong)} element(s) differ, first at {at}: got {got[at]}, expected {ref[at]}")
            return 1
        print(f"OK shape={ref.shape} exact (inputs {x.dtype} x {w.dtype}, values {x.min()}..{x.max()} and {w.min()}..{w.max()})")
        return 0
    ins = [np.load(q).astype(np.float64) for q in input_paths]
    if a.op == "gemm":
        ref = np.matmul(ins[0], ins[1])
    elif a.op == "bmm":
        ref = np.einsum("bik,bjk->bij" if a.transpose_b else "bik,bkj->bij", ins[0], ins[1])
    elif a.op == "gemv":
        ref = np.matmul(ins[0], ins[1])
    elif a.op == "conv":
        ref = conv(ins[0], ins[1], a.stride, a.pad, a.dilation, a.groups)
    elif a.op == "conv_transpose2d":
        ref = conv_transpose2d(ins[0], ins[1], a.stride, a.pad)
    elif a.op in ("avgpool", "maxpool"):
        ref = pool(ins[0], a.kernel, a.stride, a.pad, a.op[:3])
    elif a.op == "mean":
        ref = np.mean(ins[0], axis=-1)
    elif a.op == "cumsum":
        ref = np.cumsum(ins[0], axis=-1)
    else:
        print(f"unknown op {a.op}")
        return 2

    if got.dtype != np.float32:
        print(f"MISMATCH dtype {got.dtype}, expected float32")
        return 1
    if got.shape != ref.shape:
        print(f"MISMATCH shape {got.shape}, expected {ref.shape}")
        return 1
    scale = np.abs(ref).max()
    if not scale > 0:
        print("MISMATCH the reference is all zeros: a useless test")
        return 1
    err = np.abs(got.astype(np.float64) - ref)
    tol = a.rtol * scale
    worst = np.unravel_index(np.argmax(err), err.shape)
    if not err.max() <= tol:
        print(f"MISMATCH shape={ref.shape} max_err={err.max():.3e} > tol={tol:.3e} at {worst}: got {got[worst]}, expected {ref[worst]}")
        return 1
    print(f"OK shape={ref.shape} max_err={err.max():.3e} tol={tol:.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
