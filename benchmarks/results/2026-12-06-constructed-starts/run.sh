#!/bin/bash
# issue 21: gradient with and without constructed starts, each final pick timed by tilec-bench (docs/search.md, `constructed-starts`)
cd "$(dirname "$0")/../../.."
OUT=${1:?usage: run.sh OUT_DIR}; mkdir -p "$OUT"
for w in gemm_1024 gemm_bert_m1 conv2d_resnet50_r2 gemm_bert_m3 conv2d_resnet50_r7 conv2d_resnet50_r10; do
  label=$(grep -o 'compute "[a-z0-9_]*" ([^)]*) reduce' benchmarks/workloads/$w.tile | head -1 | sed 's/compute "\([^"]*\)".*/\1/')
  for seed in 0 1; do
    for cs in 4 0; do
      f=$OUT/$w-s$seed-cs$cs.json
      [ -f $f ] && continue
      target/release/tilec-bench --strategy gradient --search-options "trials=64 constructed-starts=$cs op=$label" --seed $seed --threads 1 --no-check --json benchmarks/workloads/$w.tile > $f.tmp 2>$OUT/$w-s$seed-cs$cs.err && mv $f.tmp $f
      echo "$w seed $seed cs $cs: $(python3 -c "import json;r=json.load(open('$f'))['records'][0];print(round(r['gflops'],2), round(r['search_s'],1))")"
    done
  done
done
