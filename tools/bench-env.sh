#!/usr/bin/env bash
# Makes the Python environment tilec-bench's --baseline measures against:
# numpy (its wheels bundle OpenBLAS) and onnxruntime (with onnx to build the
# models), pinned, from PyPI, in .tools/bench-venv (git-ignored), which
# tilec-bench finds by itself. Debian's own numpy uses the reference BLAS,
# which is no baseline. Idempotent; a failure is a warning (the baselines
# are then skipped with a message, not faked).
#
# With --tvm, also (and only then: it is 400 MB) TVM with MetaSchedule in
# .tools/tvm-venv, for `tilec-bench --baseline=tvm`
# (benchmarks/tvm_baseline.py). apache-tvm-ffi is pinned to the release
# TVM 0.27 was built against: with the newest (0.1.15) MetaSchedule's
# TuneContext crashes.
# Usage: tools/bench-env.sh [--tvm]
set -euo pipefail
cd "$(dirname "$0")/.."

# install VENV "PINNED PACKAGES" WHAT-FOR
install() {
  local venv=$1 want=$2 what=$3
  local stamp="$venv/.installed"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  echo "bench-env: installing $want into $venv" >&2
  # shellcheck disable=SC2086 # the pins are words
  if /usr/bin/python3 -m venv "$venv" >&2 && "$venv/bin/pip" install --quiet --disable-pip-version-check $want >&2; then
    echo "$want" > "$stamp"
  else
    echo "bench-env: warning: could not install $what; tilec-bench will skip it" >&2
  fi
}

install .tools/bench-venv "numpy==2.4.6 onnxruntime==1.31.1 onnx==1.23.2" "the baseline packages"
if [ "${1:-}" = "--tvm" ]; then
  install .tools/tvm-venv "apache-tvm[meta-schedule,popen-pool]==0.27.0.post1 apache-tvm-ffi==0.1.14.post0 xgboost==3.2.0 numpy==2.4.6" "TVM (the --baseline=tvm baseline)"
fi
