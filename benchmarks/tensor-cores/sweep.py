#!/usr/bin/env python3
"""Writes hand-scheduled variants of the f16 GEMM 4096^3 (Tensor Cores,
mma.sync m16n8k16) into a folder, for tools/gpu-check.sh's phase 5: block
tile, warp tile and k step over a small grid, each file named after them
(bm x bn blocks of wm x wn warps, k step bk). The search's GPU model is
not measured against anything else yet; these times are what it should
rank (docs/tensorize.md, "On a GPU").

    python3 benchmarks/tensor-cores/sweep.py OUT_DIR [N]
"""
import os
import sys

# (bm, bn, wm, wn, bk): 4 to 16 warps, 32 to 128 accumulators a lane.
VARIANTS = [
    (128, 128, 64, 32, 32),
    (128, 128, 64, 32, 64),
    (128, 128, 32, 32, 32),
    (128, 128, 64, 64, 32),
    (128, 128, 32, 64, 32),
    (64, 128, 32, 64, 32),
    (128, 64, 64, 32, 32),
    (64, 64, 32, 32, 32),
    (128, 256, 64, 64, 32),
    (256, 128, 64, 64, 32),
    (256, 128, 64, 32, 32),
    (128, 256, 64, 32, 32),
]


def variant(n, bm, bn, wm, wn, bk):
    name = f"gemm_f16_{n}_b{bm}x{bn}_w{wm}x{wn}_k{bk}"
    warps = (bm // wm) * (bn // wn)
    return name, f"""// f16 GEMM {n}^3 into f32, hand-scheduled: {bm}x{bn} blocks of {warps} warps of {wm}x{wn}, {bk} of k per step (benchmarks/tensor-cores/sweep.py)
// C[i, j] = sum_k A[i, k] * B[k, j]; f16 x f16 -> f32; M={n} N={n} K={n}; {2 * n ** 3} ops.
func @{name}(%A: tensor<{n}x{n}xf16>, %B: tensor<{n}x{n}xf16>) -> tensor<{n}x{n}xf32> {{
  %C = compute "gemm" (i: {n}, j: {n}) reduce sum (k: {n})
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<{n}x{n}xf32>[i, j]
      schedule "sm90" {{
        tile = {{i = [{bm}, {wm}], j = [{bn}, {wn}], k = [{bk}, 16]}},
        cache = {{a = shared, b = shared}},
        unroll = 1024,
        intrinsic = {{name = "mma.sync.m16n8k16.f32.f16.f16.f32", a = a, m = [i], n = [j], k = [k]}}
      }} {{
    %x = cast %a : f16 -> f32
    %y = cast %b : f16 -> f32
    %0 = mul %x, %y : f32
    yield %0 : f32
  }}
  return %C
}}
"""


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    os.makedirs(out, exist_ok=True)
    for v in VARIANTS:
        name, text = variant(n, *v)
        with open(os.path.join(out, name + ".tile"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
