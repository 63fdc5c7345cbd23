# -*- Python -*-
# lit configuration for the tilec FileCheck test suite.
#
# Run from the repository root after `cargo build`:
#   /usr/lib/llvm-22/bin/lit -v lit-tests
# Parameters (`--param name=value`):
#   tilec_bin_dir  folder holding the `tilec` binary (default: <repo>/target/debug)
#   llvm_bin_dir   folder holding FileCheck, not and count (default: /usr/lib/llvm-22/bin)
#   onnx_python    Python with onnx and onnxruntime (default: <repo>/.tools/bench-venv/bin/python)

import os

import lit.formats

config.name = "tilec"
# True: run RUN lines with the external shell (bash, with pipefail).
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".tile"]

config.test_source_root = os.path.dirname(os.path.abspath(__file__))
# Each test's %t files go to an `Output/` folder next to it (git-ignored).
config.test_exec_root = config.test_source_root

# Not tests: documentation, and inputs that RUN lines refer to.
config.excludes = ["README.md", "Inputs", "lit.cfg.py"]

repo_root = os.path.dirname(config.test_source_root)

tilec_bin_dir = os.path.abspath(
    lit_config.params.get("tilec_bin_dir", os.path.join(repo_root, "target", "debug"))
)
tilec = os.path.join(tilec_bin_dir, "tilec")
if not (os.path.isfile(tilec) and os.access(tilec, os.X_OK)):
    lit_config.fatal(
        "tilec not found at %s; build it first with `cargo build` in %s "
        "(or pass --param tilec_bin_dir=<folder holding tilec>)" % (tilec, repo_root)
    )

llvm_bin_dir = os.path.abspath(lit_config.params.get("llvm_bin_dir", "/usr/lib/llvm-22/bin"))
for tool in ("FileCheck", "not", "count"):
    if not os.path.isfile(os.path.join(llvm_bin_dir, tool)):
        lit_config.fatal(
            "%s not found in %s; install LLVM 22 or pass --param llvm_bin_dir=<folder>"
            % (tool, llvm_bin_dir)
        )

# tilec first, then the LLVM test tools, then whatever the user had.
config.environment["PATH"] = os.pathsep.join(
    [tilec_bin_dir, llvm_bin_dir, config.environment.get("PATH", os.environ.get("PATH", ""))]
)

# Diagnostics must not depend on the locale. (NO_COLOR is deliberately not
# set: tilec must print no colour codes when stderr is not a terminal.)
config.environment["LC_ALL"] = "C.UTF-8"
# Measured peaks are cached per machine (src/calibration.rs); tests start
# from an empty cache of their own, never the user's, so that ratios say
# "nominal" unless a test measures first (lit-tests/bench/bench.tile).
import tempfile
config.environment["TILEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilec-lit-cache-")

# The Python that runs lit (Debian's, with python3-numpy from tools/setup.sh);
# `python3` on PATH may be another installation without numpy.
import sys

config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%repo", repo_root))

# Tests that compare with numpy say `REQUIRES: numpy`; they are reported as
# UNSUPPORTED (not silently passed) where numpy is missing.
try:
    import numpy  # noqa: F401

    config.available_features.add("numpy")
except ImportError:
    lit_config.note("numpy is not installed: tests that compare with numpy are skipped (install python3-numpy)")

# `REQUIRES: onnx`: tests that build ONNX models or run onnxruntime
# (lit-tests/models) need the pinned Python of tools/bench-env.sh, with onnx
# and onnxruntime; `%onnx_python` is that interpreter. Another one can be
# given with `--param onnx_python=<python>` (a worktree without its own
# .tools/). Where it is missing or cannot import them (bench-env.sh had no
# network), those tests are UNSUPPORTED.
import subprocess

onnx_python = lit_config.params.get(
    "onnx_python", os.path.join(repo_root, ".tools", "bench-venv", "bin", "python")
)
try:
    subprocess.run(
        [onnx_python, "-c", "import onnx, onnxruntime"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=60,
    )
    config.available_features.add("onnx")
    config.substitutions.append(("%onnx_python", onnx_python))
except (OSError, subprocess.SubprocessError):
    lit_config.note(
        "no Python with onnx and onnxruntime at %s: the ONNX model tests are skipped "
        "(run tools/bench-env.sh)" % onnx_python
    )

# `REQUIRES: avx512`: tests that run AVX-512 code need a CPU that has it
# (emitting and inspecting AVX-512 objects works everywhere).
# `REQUIRES: avx512vnni`, `avxvnni`, `avx512bf16`: tests that run the
# dot-product intrinsics (lit-tests/tensorize) need the CPU feature; Linux
# spells the flags with underscores.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        flags = set()
        for line in cpuinfo:
            if line.startswith("flags"):
                flags.update(line.split(":", 1)[1].split())
        if "avx512f" in flags:
            config.available_features.add("avx512")
        for flag, feature in [("avx512_vnni", "avx512vnni"), ("avx_vnni", "avxvnni"), ("avx512_bf16", "avx512bf16")]:
            if flag in flags:
                config.available_features.add(feature)
except OSError:
    pass

# `REQUIRES: ptxas`: PTX is validated by NVIDIA's assembler where one is
# found (on PATH, or TILEC_PTXAS); elsewhere those tests are UNSUPPORTED.
import shutil

ptxas = os.environ.get("TILEC_PTXAS") or shutil.which("ptxas")
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
else:
    lit_config.note("ptxas not found: PTX is checked as text only (set TILEC_PTXAS or put ptxas on PATH)")

# `REQUIRES: cuda`: tests that run kernels on a GPU need the CUDA driver
# (libcuda.so) and a GPU; elsewhere they are UNSUPPORTED, and the tests of
# the "no driver" error (`UNSUPPORTED: cuda`) run instead.
import ctypes

try:
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda")
except OSError:
    lit_config.note("no CUDA driver: GPU runs are skipped; PTX is compiled and checked only")
