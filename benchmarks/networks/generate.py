#!/usr/bin/python3
"""Writes int8 networks as tile modules, for the network tuner's
quantized runs (GTA's Fig. 10 on a VNNI CPU: docs/networks.md).

`resnet18_int8.tile` is ResNet-18's convolutional body (GTA's tasks C0-C10,
seed 001) in int8, batch 1, as a quantized model runs it: u8 activations
times i8 weights summed exactly in i32 (VNNI's `vpdpbusd`), each sum
requantized to u8 in the convolution's epilogue (scaled, rounded, and
saturated at 0 and 255, which is also the ReLU), the residual added there
in f32 before rounding, BatchNorm folded into the weights. The stem's max
pooling is a u8 max. The global pooling and classifier are left out: the
network ends at layer 4's 512 x 7 x 7 activations. Weights are parameters
(the tuner and tilec-run fill them with seeded random values, uniform
over the type), so no weights file goes with it. Each layer's scale is
calibrated as a quantizer would be: the network is run here in numpy on
uniform random inputs and weights, and the scale maps the standard
deviation of the layer's sums to 48, so that the u8 activations spread
over their range instead of dying out layer by layer.

`resnet18_int8_small.tile` has the same layers at an eighth of the
channels and a 32 x 32 input, for tests.

`gta_gemms_int8.tile` is GTA's public GEMM benchmarks (seed 001; the f32
ones are benchmarks/workloads/gemm_gta_*) in u8 x i8 -> i32, four
independent ops in one function: a task set whose ops have two mapping
candidates each on VNNI (the lanes along i or along j), where ResNet-18's
convolutions have one (along f: their other axes, 56, 28, 14 and 7, are no
multiples of 16 lanes).

Usage: benchmarks/networks/generate.py [OUT_DIR]
"""
import os
import sys

import numpy as np


class Net:
    def __init__(self, name, channels_div, size):
        self.name, self.div, self.size = name, channels_div, size
        self.params, self.lines, self.n, self.convs = [], [], 0, 0
        self.rng = np.random.default_rng(0)
        # The numpy value of each tile value, for the scales.
        self.values = {}

    def fresh(self, stem):
        self.n += 1
        return f"%{stem}{self.n}"

    def param(self, name, shape, elem):
        self.params.append(f"%{name}: tensor<{'x'.join(map(str, shape))}x{elem}>")
        low, high = (0, 256) if elem == "u8" else (-128, 128)
        self.values[f"%{name}"] = self.rng.integers(low, high, shape).astype(np.float64)
        return f"%{name}"

    def conv(self, x, c, h, f, k, s, p, label, residual=None):
        """A u8 x i8 convolution with its requantizing epilogue; returns
        the u8 output and its channels and size."""
        f //= self.div
        ho = (h + 2 * p - k) // s + 1
        self.convs += 1
        w = self.param(f"w{self.convs}", [f, c, k, k], "i8")
        y = self.fresh("y")
        ih = f"oh * {s} + r" if s > 1 else "oh + r"
        iw = f"ow * {s} + s" if s > 1 else "ow + s"
        if p:
            ih, iw = f"{ih} - {p}", f"{iw} - {p}"
        pad = " pad(0)" if p else ""
        sums = conv_sums(self.values[x], self.values[w], s, p)
        scale = 48.0 / sums.std()
        scaled = np.float32(sums * np.float32(scale))
        if residual:
            scaled = scaled + self.values[residual]
        self.values[y] = np.clip(np.floor(scaled + 0.5), 0, 255)
        out = f"tensor<1x{f}x{ho}x{ho}xu8>"
        reads = f" reads(%rv = {residual}[n, f, oh, ow])" if residual else ""
        self.lines += [
            f'  {y} = compute "{label}" (n: 1, f: {f}, oh: {ho}, ow: {ho}) reduce sum (c: {c}, r: {k}, s: {k})',
            f"      reads(%xv = {x}[n, c, {ih}, {iw}]{pad}, %kv = {w}[f, c, r, s]) -> {out}[n, f, oh, ow] {{",
            "    %a = cast %xv : u8 -> i32",
            "    %b = cast %kv : i8 -> i32",
            "    %0 = mul %a, %b : i32",
            "    yield %0 : i32",
            f"  }} epilogue(%acc){reads} {{",
            "    %sum = cast %acc : i32 -> f32",
            f"    %scale = const {scale:.6e} : f32",
            "    %half = const 0.5 : f32",
            "    %scaled = mul %sum, %scale : f32",
        ]
        if residual:
            self.lines += [
                "    %res = cast %rv : u8 -> f32",
                "    %added = add %scaled, %res : f32",
                "    %rounded = add %added, %half : f32",
            ]
        else:
            self.lines += ["    %rounded = add %scaled, %half : f32"]
        self.lines += ["    %q = cast %rounded : f32 -> u8", "    yield %q : u8", "  }"]
        return y, f, ho

    def maxpool(self, x, c, h):
        ho = (h + 2 - 3) // 2 + 1
        y = self.fresh("p")
        padded = np.pad(self.values[x], ((0, 0), (0, 0), (1, 1), (1, 1)))
        self.values[y] = np.max([padded[:, :, r : r + 2 * ho : 2, s : s + 2 * ho : 2] for r in range(3) for s in range(3)], axis=0)
        self.lines += [
            f'  {y} = compute "maxpool_u8" (n: 1, c: {c}, oh: {ho}, ow: {ho}) reduce max (r: 3, s: 3)',
            f"      reads(%v = {x}[n, c, oh * 2 + r - 1, ow * 2 + s - 1] pad(0)) -> tensor<1x{c}x{ho}x{ho}xu8>[n, c, oh, ow] {{",
            "    yield %v : u8",
            "  }",
        ]
        return y, ho

    def text(self, result, c, h):
        header = [
            f"// {self.name}: ResNet-18's convolutional body in int8 (benchmarks/networks/generate.py)",
            "// u8 activations x i8 weights -> i32, requantized to u8 in each convolution's epilogue; residuals added there.",
            f"func @{self.name}({', '.join(self.params)}) -> tensor<1x{c}x{h}x{h}xu8> {{",
        ]
        return "\n".join(header + self.lines + [f"  return {result}", "}", ""])


def conv_sums(x, w, stride, pad):
    """The convolution's i32 sums (exact in f64 at these sizes), by im2col."""
    n, c, h, _ = x.shape
    f, _, k, _ = w.shape
    ho = (h + 2 * pad - k) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.stack([xp[:, :, r : r + stride * ho : stride, s : s + stride * ho : stride] for r in range(k) for s in range(k)], axis=2)
    cols = cols.reshape(n, c * k * k, ho * ho)
    return (w.reshape(f, c * k * k) @ cols).reshape(n, f, ho, ho)


def resnet18(name, channels_div, size):
    net = Net(name, channels_div, size)
    x = net.param("data", [1, 3, size, size], "u8")
    y, c, h = net.conv(x, 3, size, 64, 7, 2, 3, "conv2d_int8_c0")
    y, h = net.maxpool(y, c, h)
    for stage, f in enumerate([64, 128, 256, 512]):
        for block in range(2):
            downsample = stage > 0 and block == 0
            s = 2 if downsample else 1
            # GTA's task names: the first conv of a stage's first block
            # (C2, C5, C8), its 1x1 downsample (C3, C6, C9), and the
            # stage's other 3x3 convs (C1, C4, C7, C10).
            first = f"c{3 * stage - 1}" if downsample else f"c{3 * stage + 1}"
            rest = f"c{3 * stage + 1}"
            a, fa, ha = net.conv(y, c, h, f, 3, s, 1, f"conv2d_int8_{first}")
            shortcut = net.conv(y, c, h, f, 1, 2, 0, f"conv2d_int8_c{3 * stage}")[0] if downsample else y
            y, c, h = net.conv(a, fa, ha, f, 3, 1, 1, f"conv2d_int8_{rest}", residual=shortcut)
    return net.text(y, c, h)


def gta_gemms(name):
    shapes = [(16, 512, 128), (1024, 16, 256), (256, 1024, 256), (512, 256, 16)]
    params, lines, results, types = [], [], [], []
    for i, (m, n, k) in enumerate(shapes):
        params += [f"%a{i}: tensor<{m}x{k}xu8>", f"%b{i}: tensor<{k}x{n}xi8>"]
        lines += [
            f'  %c{i} = compute "gemm_int8_{m}x{n}x{k}" (i: {m}, j: {n}) reduce sum (k: {k})',
            f"      reads(%a = %a{i}[i, k], %b = %b{i}[k, j]) -> tensor<{m}x{n}xi32>[i, j] {{",
            "    %x = cast %a : u8 -> i32",
            "    %y = cast %b : i8 -> i32",
            "    %0 = mul %x, %y : i32",
            "    yield %0 : i32",
            "  }",
        ]
        results.append(f"%c{i}")
        types.append(f"tensor<{m}x{n}xi32>")
    header = [
        f"// {name}: GTA's public GEMM benchmarks (seed 001) in int8, u8 x i8 -> i32 (benchmarks/networks/generate.py)",
        f"func @{name}({', '.join(params)}) -> ({', '.join(types)}) {{",
    ]
    return "\n".join(header + lines + [f"  return {', '.join(results)}", "}", ""])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, div, size in [("resnet18_int8", 1, 224), ("resnet18_int8_small", 8, 32)]:
        with open(os.path.join(out, f"{name}.tile"), "w") as f:
            f.write(resnet18(name, div, size))
    with open(os.path.join(out, "gta_gemms_int8.tile"), "w") as f:
        f.write(gta_gemms("gta_gemms_int8"))
    print(f"wrote resnet18_int8.tile, resnet18_int8_small.tile and gta_gemms_int8.tile to {out}")


if __name__ == "__main__":
    main()
