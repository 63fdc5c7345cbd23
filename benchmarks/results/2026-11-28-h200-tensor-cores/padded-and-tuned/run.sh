#!/usr/bin/env bash
# Device run, 2026-11-28 (third session, second loan): padded shared tiles
# against the default, side by side; the GPU evaluator's first runs.
set -u
B=/tmp/bin; mkdir -p $B /tmp/k
for b in tilec-run tilec-worker; do xz -dc .gpu/$b.xz > $B/$b && chmod +x $B/$b; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
D="builtin.module(collapse-axes,search,tile,cache,vthread,bind,vectorize,tensorize,unroll,hoist-guards)"
P="builtin.module(collapse-axes,search,tile,cache,vthread,bind,vectorize,tensorize{pad-shared=true},unroll,hoist-guards)"
python3 benchmarks/tensor-cores/sweep.py /tmp/sweep
ms() { timeout 120 $B/tilec-run "$1" --backend=cuda --target=sm90 --pass-pipeline="$2" --repeat=20 --warmup=3 --json 2>/tmp/err | python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.4f ms %.1f TFLOP/s" % (r["time_ms"]["median"], r["gflops"]/1e3))' 2>/dev/null || { echo FAILED; head -c 300 /tmp/err; }; }
echo "== A/B: default (D) and padded (P) shared tiles, in turns"
for f in benchmarks/tensor-cores/gemm_f16_4096.tile benchmarks/tensor-cores/hand/gemm_f16_4096_hand_a.tile /tmp/sweep/gemm_f16_4096_b128x128_w64x64_k32.tile benchmarks/tensor-cores/gemm_bf16_4096.tile; do
  for pl in D P D P; do echo "$(basename $f .tile) $pl $(ms $f "${!pl}")"; done
done
echo "== padded, checked"
for f in benchmarks/tensor-cores/gemm_f16_1024.tile benchmarks/tensor-cores/hand/gemm_f16_1024_hand_a.tile benchmarks/tensor-cores/conv2d_f16_resnet_56.tile; do
  echo "$(basename $f .tile) $(timeout 120 $B/tilec-run $f --backend=cuda --target=sm90 --pass-pipeline="$P" --check 2>&1 | grep -E 'check vs|error' | head -2)"
done
echo "== the GPU evaluator: gradient (8 measured) on the f16 GEMM 1024^3, checked"
timeout 150 $B/tilec-run benchmarks/tensor-cores/gemm_f16_1024.tile --backend=cuda --target=sm90 --pass-pipeline="builtin.module(collapse-axes,search{strategy=gradient trials=8 starts=4},tile,cache,vthread,bind,vectorize,tensorize,unroll,hoist-guards)" --check --repeat=20 --warmup=3 --keep-dir /tmp/k/grad1024 2>&1 | tail -4
echo "== markov, 8 measured, f16 GEMM 4096^3 and 1024^3 (default pick: D above)"
for f in benchmarks/tensor-cores/gemm_f16_4096.tile benchmarks/tensor-cores/gemm_f16_1024.tile; do
  T="builtin.module(collapse-axes,search{strategy=markov measure-top-k=8},tile,cache,vthread,bind,vectorize,tensorize,unroll,hoist-guards)"
  echo "$(basename $f .tile) tuned $(ms $f "$T")"; echo "$(basename $f .tile) D $(ms $f "$D")"
done
grep -h maxntid /tmp/k/*/*.ptx 2>/dev/null | head
