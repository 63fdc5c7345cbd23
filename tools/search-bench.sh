#!/usr/bin/env bash
# The benchmark of issue 21: does a learning search find as fast a schedule
# with far fewer measurements? For each workload and seed it records the
# tuning curves (`tilec-bench --curve`, docs/search.md "Tuning curves") of
#   gradient      (search options `trials=64`), the candidate, and
#   evolutionary  (search options `trials=1000`), the reference,
# on one thread, then compares them: the candidate's best GFLOP/s within its
# trials against the reference's best within its trials, and their wall
# times. Done when the geometric mean of best(candidate)/best(reference) is
# at least 0.95 and that of time(candidate)/time(reference) at most 1/5.
#
# Workloads (benchmarks/workloads/): gemm_1024, gemm_bert_m1, gemm_bert_m3
# (BERT M1, M3), conv2d_resnet50_r2, conv2d_resnet50_r7, conv2d_resnet50_r10
# (ResNet-50 R2, R7, R10). Seeds 0 and 1.
#
# Each run searches the workload's own op alone (`op=LABEL`, the label of
# its reduction): an op that the pipeline adds beside it (collapse-axes'
# dense copy of a strided read, `subsample`, for R7 and R10) keeps its
# default schedule in both strategies' runs, instead of spending their
# trials on a copy.
#
# Runs go one at a time (a two-core machine: two timed runs at once would
# time each other), and a lock on the results folder keeps a second
# invocation from starting beside this one. Each (workload, seed, strategy)
# is one `tilec-bench --curve --json` run whose document goes to its own
# file in the results folder, written when the run ends: a benchmark
# stopped halfway keeps the runs that finished, and a rerun with the same
# folder skips every run whose file exists. A run that fails leaves
# `<run>.json.failed` (its output; stderr in `<run>.stderr`) and is tried
# again by a rerun.
#
# At the end it writes into the results folder, and prints:
#   summary.md   the comparison table (per workload and seed: each best
#                within its trials, their ratio, each one's wall seconds
#                and their ratio; the geometric means; the verdict), then
#                `tilec-bench --from` over every run (the final picks, and
#                a table of curves per run);
#   curves.svg   the curves (`tilec-bench --from ... --plot`): per
#                workload, best GFLOP/s so far against measurements and
#                against wall seconds, a line per strategy and seed.
#
# Usage: tools/search-bench.sh [options]
#   --workloads W1,W2,...    workload names under benchmarks/workloads/
#   --seeds S1,S2,...        search seeds (default 0,1)
#   --candidate NAME:OPTS    the strategy under test and its search options
#                            (default gradient:trials=64)
#   --reference NAME:OPTS    the strategy it is compared with (default
#                            evolutionary:trials=1000)
#   --trials A,B             shorthand: candidate trials=A, reference trials=B
#   --bin PATH               the tilec-bench binary (default: build and use
#                            target/release/tilec-bench; tilec-worker must be
#                            next to it)
#   --out DIR                the results folder (default
#                            benchmarks/results/<today>-search-curves); pass
#                            an earlier one to resume it
#   --check                  also check each final pick against the
#                            interpreter (slow on these sizes; off by default:
#                            the curves do not depend on it)
#   --summary-only           run nothing; summarise what DIR has
# "Best within N" reads N from the options' trials=N (else measure-top-k=N);
# with neither it is the best of the whole run. Any other strategy works
# too, e.g. to try the script before the learning strategies exist:
#   tools/search-bench.sh --workloads gemm_bert_m1 --seeds 0 \
#       --candidate random:measure-top-k=4 --reference markov:measure-top-k=16
set -euo pipefail
cd "$(dirname "$0")/.."

workloads=gemm_1024,gemm_bert_m1,gemm_bert_m3,conv2d_resnet50_r2,conv2d_resnet50_r7,conv2d_resnet50_r10
seeds=0,1
candidate="gradient:trials=64"
reference="evolutionary:trials=1000"
bin=""
out=""
check=--no-check
summary_only=0

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --workloads) workloads=${2:?--workloads needs a value}; shift 2 ;;
    --seeds) seeds=${2:?--seeds needs a value}; shift 2 ;;
    --candidate) candidate=${2:?--candidate needs NAME:OPTIONS}; shift 2 ;;
    --reference) reference=${2:?--reference needs NAME:OPTIONS}; shift 2 ;;
    --trials)
      t=${2:?--trials needs A,B}; shift 2
      [[ $t =~ ^[0-9]+,[0-9]+$ ]] || { echo "search-bench: --trials takes two counts, A,B (got '$t')" >&2; exit 2; }
      candidate="${candidate%%:*}:trials=${t%,*}"
      reference="${reference%%:*}:trials=${t#*,}" ;;
    --bin) bin=${2:?--bin needs a path}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --check) check=""; shift ;;
    --summary-only) summary_only=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "search-bench: unknown option '$1'" >&2; usage ;;
  esac
done
out=${out:-benchmarks/results/$(date +%F)-search-curves}
IFS=, read -r -a workload_list <<< "$workloads"
IFS=, read -r -a seed_list <<< "$seeds"
strategies=("$candidate" "$reference")
for s in "${strategies[@]}"; do
  [[ $s =~ ^[a-z][a-z0-9-]*(:.*)?$ ]] || { echo "search-bench: '$s' is not NAME or NAME:OPTIONS" >&2; exit 2; }
done
[ "${candidate%%:*}" != "${reference%%:*}" ] || { echo "search-bench: the candidate and the reference are both '${candidate%%:*}'; their runs would share files" >&2; exit 2; }
for w in "${workload_list[@]}"; do
  [ -f "benchmarks/workloads/$w.tile" ] || { echo "search-bench: no workload benchmarks/workloads/$w.tile" >&2; exit 2; }
done
for s in "${seed_list[@]}"; do
  [[ $s =~ ^[0-9]+$ ]] || { echo "search-bench: seed '$s' is not a number" >&2; exit 2; }
done

if [ -z "$bin" ]; then
  echo "==> building tilec-bench and tilec-worker (release)" >&2
  cargo build --release --locked -p tilec-bench -p tilec-worker >&2
  bin=target/release/tilec-bench
fi
[ -x "$bin" ] || { echo "search-bench: $bin is not an executable" >&2; exit 2; }
[ -x "$(dirname "$bin")/tilec-worker" ] || [ -n "${TILEC_WORKER:-}" ] \
  || { echo "search-bench: no tilec-worker next to $bin (build it, or set TILEC_WORKER)" >&2; exit 2; }

mkdir -p "$out"
# One benchmark at a time on this folder; a second invocation stops here.
exec 9> "$out/.lock"
flock -n 9 || { echo "search-bench: another search-bench is running on $out" >&2; exit 1; }

run_file() { echo "$out/$1-seed$2-$3.json"; }   # workload, seed, strategy name

if [ "$summary_only" = 0 ]; then
  total=$(( ${#workload_list[@]} * ${#seed_list[@]} * ${#strategies[@]} ))
  n=0
  for w in "${workload_list[@]}"; do
    label=$(grep -oP 'compute "\K[^"]+(?="[^\n]*reduce)' "benchmarks/workloads/$w.tile" | head -n 1 || true)
    for seed in "${seed_list[@]}"; do
      for s in "${strategies[@]}"; do
        n=$((n + 1))
        name=${s%%:*}
        options=""
        [[ $s == *:* ]] && options=${s#*:}
        [ -n "$label" ] && options="${options:+$options }op=$label"
        file=$(run_file "$w" "$seed" "$name")
        if [ -f "$file" ]; then
          echo "==> [$n/$total] $w seed $seed $name: done before ($file)" >&2
          continue
        fi
        echo "==> [$n/$total] $w seed $seed $name ($options)" >&2
        # Written beside the result and renamed once complete: a run that is
        # stopped leaves no file that a rerun would take for finished.
        rm -f "${file%.json}.records.jsonl"
        set +e
        "$bin" "benchmarks/workloads/$w.tile" --curve --json --threads=1 --seed="$seed" \
            --strategy="$name" --search-options="$options" $check \
            --records="${file%.json}.records.jsonl" \
            > "$file.partial" 2> "${file%.json}.stderr"
        status=$?
        set -e
        if [ "$status" = 0 ]; then
          mv "$file.partial" "$file"
          rm -f "$file.failed" "${file%.json}.stderr"
        else
          mv "$file.partial" "$file.failed"
          echo "search-bench: $w seed $seed $name failed (exit $status); see ${file%.json}.stderr" >&2
          tail -n 5 "${file%.json}.stderr" >&2 || true
        fi
      done
    done
  done
fi

# The comparison, from the saved documents.
summary=$(python3 - "$out" "$candidate" "$reference" "$workloads" "$seeds" <<'PY'
import json, math, os, re, sys

out, candidate, reference, workloads, seeds = sys.argv[1:6]

def planned(spec):
    """trials=N, else measure-top-k=N, from NAME:OPTIONS; None: no limit."""
    options = spec.split(":", 1)[1] if ":" in spec else ""
    for key in ("trials", "measure-top-k"):
        m = re.search(r"(?:^|\s)" + key + r"=(\d+)(?:\s|$)", options)
        if m and int(m.group(1)) > 0:
            return int(m.group(1))
    return None

def curve(workload, seed, spec):
    path = os.path.join(out, "%s-seed%s-%s.json" % (workload, seed, spec.split(":")[0]))
    if not os.path.exists(path):
        return None, "not run" + (" (failed)" if os.path.exists(path + ".failed") else "")
    curves = json.load(open(path)).get("curves") or []
    if len(curves) != 1:
        return None, "%d curves (one op expected)" % len(curves)
    return curves[0], None

def best_within(c, n):
    bests = [p["best_gflops"] for p in c["points"] if (n is None or p["measurement"] <= n) and p["best_gflops"] is not None]
    return bests[-1] if bests else None

a_name, b_name = candidate.split(":")[0], reference.split(":")[0]
a_n, b_n = planned(candidate), planned(reference)
within = lambda n: "" if n is None else " within %d" % n
print("Candidate `%s` against reference `%s`: best GFLOP/s found (within the trials) and wall seconds of the search; one thread.\n" % (candidate, reference))
print("| workload | seed | %s best%s | %s best%s | ratio | %s s | %s s | time ratio |" % (a_name, within(a_n), b_name, within(b_n), a_name, b_name))
print("|---|---:|---:|---:|---:|---:|---:|---:|")
ratios, time_ratios, missing = [], [], []
cpus = set()
for w in workloads.split(","):
    for seed in seeds.split(","):
        (a, a_why), (b, b_why) = curve(w, seed, candidate), curve(w, seed, reference)
        if a is None or b is None:
            missing.append("%s seed %s: %s" % (w, seed, "; ".join(x for x in (a_why and a_name + " " + a_why, b_why and b_name + " " + b_why) if x)))
            print("| %s | %s | — | — | — | — | — | — |" % (w, seed))
            continue
        cpus.update(c["cpu"] for c in (a, b))
        ga, gb = best_within(a, a_n), best_within(b, b_n)
        ta, tb = a["total_s"], b["total_s"]
        r = ga / gb if ga and gb else None
        tr = ta / tb if tb else None
        if r is not None and tr is not None:
            ratios.append(r)
            time_ratios.append(tr)
        f = lambda x, d: "—" if x is None else "%.*f" % (d, x)
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (w, seed, f(ga, 2), f(gb, 2), f(r, 3), f(ta, 1), f(tb, 1), f(tr, 3)))
geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None
g, gt = geo(ratios), geo(time_ratios)
if g is None:
    print("\nNo workload has both runs: nothing to compare.")
else:
    print("| **geomean** (%d) | | | | **%.3f** | | | **%.3f** |" % (len(ratios), g, gt))
    done = g >= 0.95 and gt <= 0.2
    print("\nDone when the ratio is at least 0.95 at no more than 1/5 of the wall time: %s (ratio %.3f, time ratio %.3f)." % ("**met**" if done else "**not met**", g, gt))
if missing:
    print("\nMissing: " + "; ".join(missing) + ".")
if cpus:
    print("\nMachine: " + "; ".join(sorted(cpus)) + ".")
PY
)
echo "$summary"

docs=()
for f in "$out"/*.json; do [ -e "$f" ] && docs+=(--from "$f"); done
if [ ${#docs[@]} -gt 0 ]; then
  {
    echo "$summary"
    echo
    echo "Every run (\`tilec-bench --from\`): the final picks, then the curves."
    echo
    "$bin" "${docs[@]}" --plot "$out/curves.svg"
  } > "$out/summary.md"
  echo "search-bench: wrote $out/summary.md and $out/curves.svg" >&2
fi
