#!/usr/bin/env python3
"""Writes the papers' workloads (../shared/design/WORKLOADS.md) as tile files.

One file per workload, named <op>_<source>_<id>.tile, plus a shape-shrunk
copy <name>_small.tile with the same structure (strides, padding, dilation,
groups, transposition kept) for tests and quick runs. The output is
deterministic; rerun after editing this script:

    python3 benchmarks/workloads/generate.py           # write the files
    python3 benchmarks/workloads/generate.py --check   # exit 1 if they are stale
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def gemm(name, m, n, k, note):
    return f"""// {note}
// C[i, j] = sum_k A[i, k] * B[k, j]; M={m} N={n} K={k}; {2*m*n*k} flops.
func @{name}(%A: tensor<{m}x{k}xf32>, %B: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %C = compute "gemm" (i: {m}, j: {n}) reduce sum (k: {k})
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<{m}x{n}xf32>[i, j] {{
    %0 = mul %a, %b : f32
    yield %0 : f32
  }}
  return %C
}}
"""


# GEMMs in narrow types (issue 22): u8 activations times i8 weights summed
# exactly in i32, as VNNI's vpdpbusd and onnxruntime's MatMulInteger /
# ConvInteger compute them ("ops" counts a multiply and an add as two);
# bf16 inputs with products and sums in f32, as AVX512-BF16's vdpbf16ps
# computes them.
def gemm_typed(name, m, n, k, a, b, acc, label, note):
    unit = "ops" if acc == "i32" else "flops"
    return f"""// {note}
// C[i, j] = sum_k A[i, k] * B[k, j]; {a} x {b} -> {acc}; M={m} N={n} K={k}; {2*m*n*k} {unit}.
func @{name}(%A: tensor<{m}x{k}x{a}>, %B: tensor<{k}x{n}x{b}>) -> tensor<{m}x{n}x{acc}> {{
  %C = compute "{label}" (i: {m}, j: {n}) reduce sum (k: {k})
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<{m}x{n}x{acc}>[i, j] {{
    %x = cast %a : {a} -> {acc}
    %y = cast %b : {b} -> {acc}
    %0 = mul %x, %y : {acc}
    yield %0 : {acc}
  }}
  return %C
}}
"""


def gemm_int8(name, m, n, k, note):
    return gemm_typed(name, m, n, k, "u8", "i8", "i32", "gemm_int8", note)


def gemm_bf16(name, m, n, k, note):
    return gemm_typed(name, m, n, k, "bf16", "bf16", "f32", "gemm_bf16", note)


def conv2d_int8(name, n, f, c, h, w, k, s, p, note):
    ho, wo = out_size(h, k, s, p), out_size(w, k, s, p)
    pad = " pad(0)" if p else ""
    ops = 2 * n * f * ho * wo * c * k * k
    xh, xw = idx("oh", s, "r", 1, p), idx("ow", s, "s", 1, p)
    return f"""// {note}
// conv2d NCHW, N={n} F={f} C={c} H={h} W={w} R=S={k} stride {s} padding {p}; u8 x i8 -> i32; output {ho}x{wo}; {ops} ops.
func @{name}(%x: tensor<{n}x{c}x{h}x{w}xu8>, %k: tensor<{f}x{c}x{k}x{k}xi8>) -> tensor<{n}x{f}x{ho}x{wo}xi32> {{
  %y = compute "conv2d_int8" (n: {n}, f: {f}, oh: {ho}, ow: {wo}) reduce sum (c: {c}, r: {k}, s: {k})
      reads(%xv = %x[n, c, {xh}, {xw}]{pad}, %kv = %k[f, c, r, s]) -> tensor<{n}x{f}x{ho}x{wo}xi32>[n, f, oh, ow] {{
    %a = cast %xv : u8 -> i32
    %b = cast %kv : i8 -> i32
    %0 = mul %a, %b : i32
    yield %0 : i32
  }}
  return %y
}}
"""


def bmm(name, b, m, n, k, trans_b, note):
    b_ty = f"{b}x{n}x{k}" if trans_b else f"{b}x{k}x{n}"
    b_idx = "[b, j, k]" if trans_b else "[b, k, j]"
    formula = "K[b, j, k]" if trans_b else "V[b, k, j]"
    return f"""// {note}
// C[b, i, j] = sum_k A[b, i, k] * {formula}; batch {b}, M={m} N={n} K={k}; {2*b*m*n*k} flops.
func @{name}(%A: tensor<{b}x{m}x{k}xf32>, %B: tensor<{b_ty}xf32>) -> tensor<{b}x{m}x{n}xf32> {{
  %C = compute "batch_matmul" (b: {b}, i: {m}, j: {n}) reduce sum (k: {k})
      reads(%a = %A[b, i, k], %v = %B{b_idx}) -> tensor<{b}x{m}x{n}xf32>[b, i, j] {{
    %0 = mul %a, %v : f32
    yield %0 : f32
  }}
  return %C
}}
"""


def gemv(name, m, n, note):
    return f"""// {note}
// y[i] = sum_j A[i, j] * x[j]; M={m} N={n}; {2*m*n} flops.
func @{name}(%A: tensor<{m}x{n}xf32>, %x: tensor<{n}xf32>) -> tensor<{m}xf32> {{
  %y = compute "gemv" (i: {m}) reduce sum (j: {n})
      reads(%a = %A[i, j], %v = %x[j]) -> tensor<{m}xf32>[i] {{
    %0 = mul %a, %v : f32
    yield %0 : f32
  }}
  return %y
}}
"""


def out_size(h, k, s, p, d=1):
    return (h + 2 * p - d * (k - 1) - 1) // s + 1


def idx(axis, s, r, d, p):
    e = f"{axis} * {s}" if s != 1 else axis
    e += f" + {r} * {d}" if d != 1 else f" + {r}"
    if p:
        e += f" - {p}"
    return e


def conv2d(name, n, f, c, h, w, k, s, p, note, d=1, groups=1):
    ho, wo = out_size(h, k, s, p, d), out_size(w, k, s, p, d)
    pad = " pad(0.0)" if p else ""
    cg, fg = c // groups, f // groups
    flops = 2 * n * f * ho * wo * cg * k * k
    desc = f"N={n} F={f} C={c} H={h} W={w} R=S={k} stride {s} padding {p}"
    if d != 1:
        desc += f" dilation {d}"
    if groups != 1:
        desc += f" groups {groups}"
    xh, xw = idx("oh", s, "r", d, p), idx("ow", s, "s", d, p)
    if groups == 1:
        axes = f"(n: {n}, f: {f}, oh: {ho}, ow: {wo}) reduce sum (c: {c}, r: {k}, s: {k})"
        reads = f"reads(%xv = %x[n, c, {xh}, {xw}]{pad}, %kv = %k[f, c, r, s])"
        out = f"[n, f, oh, ow]"
    elif cg == 1 and fg == 1:
        axes = f"(n: {n}, f: {f}, oh: {ho}, ow: {wo}) reduce sum (r: {k}, s: {k})"
        reads = f"reads(%xv = %x[n, f, {xh}, {xw}]{pad}, %kv = %k[f, 0, r, s])"
        out = f"[n, f, oh, ow]"
    else:
        axes = f"(n: {n}, g: {groups}, fg: {fg}, oh: {ho}, ow: {wo}) reduce sum (cg: {cg}, r: {k}, s: {k})"
        reads = f"reads(%xv = %x[n, g * {cg} + cg, {xh}, {xw}]{pad}, %kv = %k[g * {fg} + fg, cg, r, s])"
        out = f"[n, g * {fg} + fg, oh, ow]"
    return f"""// {note}
// conv2d NCHW, {desc}; output {ho}x{wo}; {flops} flops.
func @{name}(%x: tensor<{n}x{c}x{h}x{w}xf32>, %k: tensor<{f}x{cg}x{k}x{k}xf32>) -> tensor<{n}x{f}x{ho}x{wo}xf32> {{
  %y = compute "conv2d" {axes}
      {reads} -> tensor<{n}x{f}x{ho}x{wo}xf32>{out} {{
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }}
  return %y
}}
"""


def conv1d(name, n, f, c, l, k, s, p, note):
    lo = out_size(l, k, s, p)
    pad = " pad(0.0)" if p else ""
    return f"""// {note}
// conv1d NCW, N={n} F={f} C={c} L={l} K={k} stride {s} padding {p}; output {lo}; {2*n*f*lo*c*k} flops.
func @{name}(%x: tensor<{n}x{c}x{l}xf32>, %k: tensor<{f}x{c}x{k}xf32>) -> tensor<{n}x{f}x{lo}xf32> {{
  %y = compute "conv1d" (n: {n}, f: {f}, ol: {lo}) reduce sum (c: {c}, r: {k})
      reads(%xv = %x[n, c, {idx("ol", s, "r", 1, p)}]{pad}, %kv = %k[f, c, r]) -> tensor<{n}x{f}x{lo}xf32>[n, f, ol] {{
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }}
  return %y
}}
"""


def conv3d(name, n, f, c, dd, h, w, k, s, p, note):
    do, ho, wo = out_size(dd, k, s, p), out_size(h, k, s, p), out_size(w, k, s, p)
    pad = " pad(0.0)" if p else ""
    return f"""// {note}
// conv3d NCDHW, N={n} F={f} C={c} D={dd} H={h} W={w} kernel {k} stride {s} padding {p}; output {do}x{ho}x{wo}; {2*n*f*do*ho*wo*c*k**3} flops.
func @{name}(%x: tensor<{n}x{c}x{dd}x{h}x{w}xf32>, %k: tensor<{f}x{c}x{k}x{k}x{k}xf32>) -> tensor<{n}x{f}x{do}x{ho}x{wo}xf32> {{
  %y = compute "conv3d" (n: {n}, f: {f}, od: {do}, oh: {ho}, ow: {wo}) reduce sum (c: {c}, t: {k}, r: {k}, s: {k})
      reads(%xv = %x[n, c, {idx("od", s, "t", 1, p)}, {idx("oh", s, "r", 1, p)}, {idx("ow", s, "s", 1, p)}]{pad}, %kv = %k[f, c, t, r, s]) -> tensor<{n}x{f}x{do}x{ho}x{wo}xf32>[n, f, od, oh, ow] {{
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }}
  return %y
}}
"""


def tconv2d(name, n, f, c, h, w, k, s, p, note):
    ho, wo = (h - 1) * s - 2 * p + k, (w - 1) * s - 2 * p + k
    return f"""// {note}
// transposed conv2d (weight [C, F, R, S]), N={n} C={c} F={f} H={h} W={w} kernel {k} stride {s} padding {p}; output {ho}x{wo}.
// Output oh receives input ih where oh = ih*{s} + r - {p}: ih = (oh - r + {p}) div {s} when exact.
func @{name}(%x: tensor<{n}x{c}x{h}x{w}xf32>, %k: tensor<{c}x{f}x{k}x{k}xf32>) -> tensor<{n}x{f}x{ho}x{wo}xf32> {{
  %y = compute "conv2d_transposed" (n: {n}, f: {f}, oh: {ho}, ow: {wo}) reduce sum (c: {c}, r: {k}, s: {k})
      reads(%xv = %x[n, c, (oh - r + {p}) div {s}, (ow - s + {p}) div {s}] pad(0.0), %kv = %k[c, f, r, s]) -> tensor<{n}x{f}x{ho}x{wo}xf32>[n, f, oh, ow] {{
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }}
  return %y
}}
"""


def pool(name, kind, n, c, h, w, k, s, p, note):
    ho, wo = out_size(h, k, s, p), out_size(w, k, s, p)
    xh, xw = idx("oh", s, "r", 1, p), idx("ow", s, "s", 1, p)
    if kind == "avg":
        pad = " pad(0.0)" if p else ""
        scale = repr(1.0 / (k * k))
        return f"""// {note}
// average pooling NCHW, N={n} C={c} H={h} W={w} window {k} stride {s} padding {p}; output {ho}x{wo}.
func @{name}(%x: tensor<{n}x{c}x{h}x{w}xf32>) -> tensor<{n}x{c}x{ho}x{wo}xf32> {{
  %y = compute "avgpool2d" (n: {n}, c: {c}, oh: {ho}, ow: {wo}) reduce sum (r: {k}, s: {k})
      reads(%v = %x[n, c, {xh}, {xw}]{pad}) -> tensor<{n}x{c}x{ho}x{wo}xf32>[n, c, oh, ow] {{
    yield %v : f32
  }} epilogue(%sum) {{
    %scale = const {scale} : f32
    %0 = mul %sum, %scale : f32
    yield %0 : f32
  }}
  return %y
}}
"""
    pad = " pad(-inf)" if p else ""
    return f"""// {note}
// max pooling NCHW, N={n} C={c} H={h} W={w} window {k} stride {s} padding {p}; output {ho}x{wo}.
func @{name}(%x: tensor<{n}x{c}x{h}x{w}xf32>) -> tensor<{n}x{c}x{ho}x{wo}xf32> {{
  %y = compute "maxpool2d" (n: {n}, c: {c}, oh: {ho}, ow: {wo}) reduce max (r: {k}, s: {k})
      reads(%v = %x[n, c, {xh}, {xw}]{pad}) -> tensor<{n}x{c}x{ho}x{wo}xf32>[n, c, oh, ow] {{
    yield %v : f32
  }}
  return %y
}}
"""


def mean(name, m, n, note):
    return f"""// {note}
// row mean: y[i] = (sum_j x[i, j]) / {n}; M={m} N={n}.
func @{name}(%x: tensor<{m}x{n}xf32>) -> tensor<{m}xf32> {{
  %y = compute "mean" (i: {m}) reduce sum (j: {n})
      reads(%v = %x[i, j]) -> tensor<{m}xf32>[i] {{
    yield %v : f32
  }} epilogue(%sum) {{
    %count = const {float(n)!r} : f32
    %0 = div %sum, %count : f32
    yield %0 : f32
  }}
  return %y
}}
"""


def scan(name, m, n, note):
    return f"""// {note}
// inclusive prefix sum along rows: y[i, j] = sum_{{t <= j}} x[i, t], written as
// sum over t of x[i, j - t], where j - t < 0 reads the pad value 0. M={m} N={n}.
func @{name}(%x: tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %y = compute "scan" (i: {m}, j: {n}) reduce sum (t: {n})
      reads(%v = %x[i, j - t] pad(0.0)) -> tensor<{m}x{n}xf32>[i, j] {{
    yield %v : f32
  }}
  return %y
}}
"""


def small(x, cap=48):
    """A test-sized extent for a workload extent: small ones are kept,
    large ones divided by 16 and clamped to [16, cap]."""
    return x if x <= 16 else max(16, min(cap, x // 16))


def small_channels(x):
    return x if x <= 4 else max(4, min(8, x // 16))


W = []  # (name, text)


def add(name, text):
    W.append((name, text))


def gemm_pair(name, m, n, k, note):
    add(name, gemm(name, m, n, k, note))
    add(name + "_small", gemm(name + "_small", small(m), small(n), small(k), note + " (shrunk copy)"))


def conv_pair(name, n, f, c, h, k, s, p, note, d=1, groups=1, n_small=1):
    add(name, conv2d(name, n, f, c, h, h, k, s, p, note, d, groups))
    g = groups
    if g == 1:
        fs, cs = small_channels(f), small_channels(c)
    elif c == f == g:  # depthwise: channels == groups, shrunk together
        g = fs = cs = min(g, 8)
    else:  # grouped: keep the group count, two channels per group
        fs, cs = g * min(2, f // g), g * min(2, c // g)
    hs = max(d * (k - 1) + 1 - 2 * p, min(h, 2 * k + 6))
    add(name + "_small", conv2d(name + "_small", n_small, fs, cs, hs, hs, k, s, p, note + " (shrunk copy)", d, g))


# GEMM: BERT layers (Ansor-AF-DS Table 1)
for i, (m, n, k) in enumerate([(512, 64, 1024), (512, 4096, 1024), (512, 64, 768), (512, 3072, 768), (512, 1024, 4096), (512, 768, 3072)]):
    gemm_pair(f"gemm_bert_m{i}", m, n, k, f"BERT-base layer M{i} (Ansor-AF-DS, seed 003, Table 1)")
# GEMM: GTA public benchmarks
for (m, n, k) in [(16, 512, 128), (1024, 16, 256), (256, 1024, 256), (512, 256, 16)]:
    gemm_pair(f"gemm_gta_{m}x{n}x{k}", m, n, k, "GTA public GEMM benchmark (seed 001)")
gemm_pair("gemm_1024", 1024, 1024, 1024, "GEMM 1024^3 (GTA public benchmark; the CPU reference point in WORKLOADS.md)")
# A GEMV written as a GEMM (M = 1: a batch-1 fully connected layer; issue 23)
gemm_pair("gemm_m1_4096", 1, 4096, 4096, "GEMM with M = 1, a GEMV written as a GEMM (batch-1 fully connected layer; issue 23)")
# Quantized (issue 22): int8 GEMM 1024^3 and the ResNet-50 R5 layer, u8 x i8 -> i32
add("gemm_int8_1024", gemm_int8("gemm_int8_1024", 1024, 1024, 1024, "int8 GEMM 1024^3 (issue 22; baseline: onnxruntime MatMulInteger or QLinearMatMul)"))
add("gemm_int8_1024_small", gemm_int8("gemm_int8_1024_small", 48, 48, 48, "int8 GEMM (shrunk copy)"))
add("conv2d_int8_resnet50_r5", conv2d_int8("conv2d_int8_resnet50_r5", 1, 128, 128, 28, 28, 3, 1, 1, "int8 ResNet-50 layer R5 (issue 22; baseline: onnxruntime ConvInteger or QLinearConv)"))
add("conv2d_int8_resnet18_c0", conv2d_int8("conv2d_int8_resnet18_c0", 1, 64, 3, 224, 224, 7, 2, 3, "int8 ResNet-18 stem C0: 3 input channels, 7x7 (issue 22: a reduction padded onto VNNI by pad-axes; baseline: onnxruntime ConvInteger or QLinearConv)"))
add("conv2d_int8_resnet18_c0_small", conv2d_int8("conv2d_int8_resnet18_c0_small", 1, 16, 3, 20, 20, 7, 2, 3, "int8 ResNet-18 stem C0 (shrunk copy)"))
add("conv2d_int8_resnet50_r5_small", conv2d_int8("conv2d_int8_resnet50_r5_small", 1, 8, 8, 12, 12, 3, 1, 1, "int8 ResNet-50 layer R5 (shrunk copy)"))
add("gemm_bf16_1024", gemm_bf16("gemm_bf16_1024", 1024, 1024, 1024, "bf16 GEMM 1024^3 (issue 22; against f32 tilec on gemm_1024 and the measured vdpbf16ps peak)"))
add("gemm_bf16_1024_small", gemm_bf16("gemm_bf16_1024_small", 48, 48, 48, "bf16 GEMM (shrunk copy)"))
# GEMM: Gensor Table IV (GPU-sized)
gemm_pair("gemm_gensor_m1", 8192, 8192, 8192, "Gensor Table IV M1 (GPU-sized: construction tests only on a CPU)")
gemm_pair("gemm_gensor_m2", 65536, 1024, 4, "Gensor Table IV M2, MKN=[65536,4,1024] (GPU-sized)")
gemm_pair("gemm_gensor_m3", 65536, 4096, 1024, "Gensor Table IV M3, MKN=[65536,1024,4096] (GPU-sized)")

# Batched GEMM: BERT attention, batch 12 (heads) x b=1
add("bmm_bert_qk", bmm("bmm_bert_qk", 12, 128, 128, 64, True, "BERT attention scores Q.K^T, 12 heads, seq 128"))
add("bmm_bert_qk_small", bmm("bmm_bert_qk_small", 2, 16, 16, 8, True, "BERT attention scores (shrunk copy)"))
add("bmm_bert_sv", bmm("bmm_bert_sv", 12, 128, 64, 128, False, "BERT attention output S.V, 12 heads, seq 128"))
add("bmm_bert_sv_small", bmm("bmm_bert_sv_small", 2, 16, 8, 16, False, "BERT attention output (shrunk copy)"))

# GEMV: Gensor V1-V3
for i, (m, n) in enumerate([(16384, 16384), (16384, 8192), (16384, 1000)], start=1):
    add(f"gemv_v{i}", gemv(f"gemv_v{i}", m, n, f"Gensor Table IV V{i}"))
    add(f"gemv_v{i}_small", gemv(f"gemv_v{i}_small", 64, max(8, n // 256), f"Gensor Table IV V{i} (shrunk copy)"))

# Conv2d: ResNet-50 R0-R12 (Ansor-AF-DS Table 1), batch 1: (F, C, H, R, stride, pad)
R50 = [(64, 3, 224, 7, 2, 3), (64, 64, 56, 1, 1, 0), (64, 64, 56, 3, 1, 1), (256, 64, 56, 1, 1, 0), (128, 256, 56, 1, 2, 0),
       (128, 128, 28, 3, 1, 1), (512, 128, 28, 1, 1, 0), (256, 512, 28, 1, 2, 0), (256, 256, 14, 3, 1, 1), (1024, 256, 14, 1, 1, 0),
       (512, 1024, 14, 1, 2, 0), (512, 512, 7, 3, 1, 1), (2048, 512, 7, 1, 1, 0)]
for i, (f, c, h, k, s, p) in enumerate(R50):
    conv_pair(f"conv2d_resnet50_r{i}", 1, f, c, h, k, s, p, f"ResNet-50 layer R{i} (Ansor-AF-DS, seed 003, Table 1)")

# Conv2d: ResNet-18 C0-C10 (GTA), batch 1 and 16
R18 = [(64, 3, 224, 7, 2, 3), (64, 64, 56, 3, 1, 1), (128, 64, 56, 3, 2, 1), (128, 64, 56, 1, 2, 0), (128, 128, 28, 3, 1, 1),
       (256, 128, 28, 3, 2, 1), (256, 128, 28, 1, 2, 0), (256, 256, 14, 3, 1, 1), (512, 256, 14, 3, 2, 1), (512, 256, 14, 1, 2, 0),
       (512, 512, 7, 3, 1, 1)]
for i, (f, c, h, k, s, p) in enumerate(R18):
    conv_pair(f"conv2d_resnet18_c{i}", 1, f, c, h, k, s, p, f"ResNet-18 layer C{i} (GTA, seed 001), batch 1")
    conv_pair(f"conv2d_resnet18_c{i}_b16", 16, f, c, h, k, s, p, f"ResNet-18 layer C{i} (GTA, seed 001), batch 16", n_small=2)

# Conv2d: Gensor Table IV (no padding given: valid convolutions)
for i, (n, c, h, f, k, s) in enumerate([(128, 256, 30, 256, 3, 2), (128, 128, 28, 128, 3, 1), (128, 128, 58, 128, 3, 2)], start=1):
    conv_pair(f"conv2d_gensor_c{i}", n, f, c, h, k, s, 0, f"Gensor Table IV C{i} (GPU-sized)", n_small=2)

# Pooling: Gensor P1-P3 (average pooling), and ResNet's stem max pooling
for i, (n, c, h, k, s) in enumerate([(16, 48, 48, 2, 2), (128, 168, 83, 2, 2), (128, 617, 21, 3, 2)], start=1):
    add(f"avgpool_p{i}", pool(f"avgpool_p{i}", "avg", n, c, h, h, k, s, 0, f"Gensor Table IV P{i}"))
    add(f"avgpool_p{i}_small", pool(f"avgpool_p{i}_small", "avg", 2, 4, 2 * k + 5, 2 * k + 5, k, s, 0, f"Gensor Table IV P{i} (shrunk copy)"))
add("maxpool_resnet_stem", pool("maxpool_resnet_stem", "max", 1, 64, 112, 112, 3, 2, 1, "ResNet stem max pooling 3x3, stride 2, padding 1"))
add("maxpool_resnet_stem_small", pool("maxpool_resnet_stem_small", "max", 1, 4, 12, 12, 3, 2, 1, "ResNet stem max pooling (shrunk copy)"))

# GTA's other operators. WORKLOADS.md gives no shapes; GTA says it follows
# Ansor's and AMOS's configurations, so these are the first configuration of
# each operator in Ansor's single-operator benchmark (our choice, recorded here).
add("conv1d_ansor", conv1d("conv1d_ansor", 1, 128, 64, 256, 3, 2, 1, "C1D (GTA op set; Ansor single-op shape)"))
add("conv1d_ansor_small", conv1d("conv1d_ansor_small", 1, 8, 4, 20, 3, 2, 1, "C1D (shrunk copy)"))
add("conv3d_ansor", conv3d("conv3d_ansor", 1, 64, 3, 16, 224, 224, 7, 2, 3, "C3D (GTA op set; Ansor single-op shape)"))
add("conv3d_ansor_small", conv3d("conv3d_ansor_small", 1, 4, 3, 6, 12, 12, 7, 2, 3, "C3D (shrunk copy)"))
add("conv2d_transposed_ansor", tconv2d("conv2d_transposed_ansor", 1, 256, 512, 4, 4, 4, 2, 1, "T2D (GTA op set; Ansor single-op shape)"))
add("conv2d_transposed_ansor_small", tconv2d("conv2d_transposed_ansor_small", 1, 4, 8, 4, 4, 4, 2, 1, "T2D (shrunk copy)"))
conv_pair("conv2d_dilated_ansor", 1, 64, 3, 224, 7, 2, 3, "DIL (GTA op set; Ansor single-op shape)", d=2)
conv_pair("conv2d_grouped_ansor", 1, 128, 64, 56, 3, 2, 1, "GRP (AMOS op set; Ansor single-op shape)", groups=4)
conv_pair("conv2d_depthwise_ansor", 1, 32, 32, 112, 3, 1, 1, "DEP (AMOS op set; Ansor single-op shape)", groups=32)
add("mean_gta", mean("mean_gta", 1024, 1024, "row mean (GTA op set)"))
add("mean_gta_small", mean("mean_gta_small", 8, 24, "row mean (shrunk copy)"))
add("scan_gta", scan("scan_gta", 64, 1024, "SCAN (GTA op set)"))
add("scan_gta_small", scan("scan_gta_small", 4, 16, "SCAN (shrunk copy)"))


def main():
    check = "--check" in sys.argv[1:]
    names = set()
    stale = []
    for name, text in W:
        assert name not in names, name
        names.add(name)
        path = os.path.join(HERE, name + ".tile")
        if check:
            try:
                with open(path) as f:
                    if f.read() != text:
                        stale.append(name)
            except FileNotFoundError:
                stale.append(name)
        else:
            with open(path, "w") as f:
                f.write(text)
    extra = sorted(f[:-5] for f in os.listdir(HERE) if f.endswith(".tile") and f[:-5] not in names)
    if check:
        if stale or extra:
            print(f"workload files out of date: {', '.join(stale + extra)}; run python3 {os.path.relpath(__file__)}")
            sys.exit(1)
        print(f"{len(W)} workload files up to date")
    else:
        for name in extra:
            os.remove(os.path.join(HERE, name + ".tile"))
        print(f"wrote {len(W)} workloads to {os.path.relpath(HERE)}")


if __name__ == "__main__":
    main()
