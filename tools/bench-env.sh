#!/usr/bin/env bash
# Makes the Python environment tilec-bench's --baseline measures against:
# numpy (its wheels bundle OpenBLAS) and onnxruntime (with onnx to build the
# models), pinned, from PyPI, in .tools/bench-venv (git-ignored), which
# tilec-bench finds by itself. Debian's own numpy uses the reference BLAS,
# which is no baseline. Idempotent; a failure is a warning (the baselines
# are then skipped with a message, not faked).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.tools/bench-venv
want="numpy==2.4.6 onnxruntime==1.31.1 onnx==1.23.2"
stamp="$venv/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "bench-env: installing $want into $venv" >&2
if /usr/bin/python3 -m venv "$venv" >&2 && "$venv/bin/pip" install --quiet --disable-pip-version-check $want >&2; then
  echo "$want" > "$stamp"
else
  echo "bench-env: warning: could not install the baseline packages; tilec-bench --baseline will skip them" >&2
fi
