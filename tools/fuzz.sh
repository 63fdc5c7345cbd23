#!/usr/bin/env bash
# Fuzzes tilec for a long time: every target (parse, pipeline, interp,
# compile), a new seed every round, new findings minimised and saved in
# the corpus (tools/tilec-fuzz/corpus/<target>/open/, listed in open.md).
# Prints each round's iteration counts, and the totals at the end.
#
# Usage: tools/fuzz.sh [hours] [first seed]     (default: 1 hour, seed from the clock)
# Environment: TILEC_FUZZ_ROUND (seconds per round, default 600).
set -euo pipefail
cd "$(dirname "$0")/.."

hours=${1:-1}
seed=${2:-$(date +%s)}
round=${TILEC_FUZZ_ROUND:-600}

cargo build --locked -p tilec-fuzz >&2
# Run a copy: a rebuild during the run must not swap the binary the
# driver starts its workers from.
bin_dir=$(mktemp -d)
trap 'rm -rf "$bin_dir"' EXIT
cp target/debug/tilec-fuzz "$bin_dir/"
fuzz="$bin_dir/tilec-fuzz"

end=$(( $(date +%s) + $(awk -v h="$hours" 'BEGIN { printf "%d", h * 3600 }') ))
declare -A total
rounds=0
new=0
while [ "$(date +%s)" -lt "$end" ]; do
  left=$(( end - $(date +%s) ))
  secs=$(( left < round ? left : round ))
  [ "$secs" -ge 20 ] || break
  echo "==> round $((rounds + 1)): seed $seed, $secs s" >&2
  out=$(mktemp)
  set +e
  "$fuzz" --seed "$seed" --seconds "$secs" --save-to-corpus --minimize-seconds 60 | tee "$out"
  status=${PIPESTATUS[0]}
  set -e
  [ "$status" -eq 0 ] || new=$((new + 1))
  # Columns of the summary table: target, iterations, ...
  while read -r target iterations _; do
    total[$target]=$(( ${total[$target]:-0} + iterations ))
  done < <(awk '$1 ~ /^(parse|pipeline|interp|compile)$/ && $2 ~ /^[0-9]+$/ && NF == 8 {print $1, $2}' "$out")
  rm -f "$out"
  rounds=$((rounds + 1))
  seed=$((seed + 1))
done

echo "==> $rounds round(s); iterations per target:"
for t in parse pipeline interp compile; do
  printf '  %-9s %10d\n' "$t" "${total[$t]:-0}"
done
echo "rounds with new findings: $new (saved under tools/tilec-fuzz/corpus/*/open/, listed in open.md)"
