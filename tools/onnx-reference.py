#!/usr/bin/env python3
"""Reference outputs of an ONNX model from onnxruntime, as .npy files.

    tools/onnx-reference.py MODEL.onnx --input data=x.npy --output-dir ref/
    tools/onnx-reference.py MODEL.onnx --random-inputs in/ --seed 0 --output-dir ref/
    tools/onnx-reference.py MODEL.onnx --random-inputs in/ --output-dir ref/ --time-runs 10
    tools/onnx-reference.py --compare out/ ref/ --rtol 1e-3 --atol 1e-5

The first two run MODEL.onnx with onnxruntime's CPU provider (1 thread
unless --threads says more) and write each output to
DIR/<output name>.npy, the name with every character other than letters,
digits, '_', '-' and '.' replaced by '_'. Inputs come from --input
NAME=FILE.npy; with --random-inputs DIR, those not given are drawn first,
float32 standard normal from numpy's default_rng(--seed), and written to
DIR/<input name>.npy so that another tool can run the same inputs. --time-runs N times N runs
after the first and prints their median (time.perf_counter around
InferenceSession.run); with --profile, each node's median over those runs
too, in run order (onnxruntime's own profiler, which names the nodes after
its graph rewrites: a Conv with its fused activation, in NCHWc layout, is
`<name>_nchwc`), to set beside `tilec-run --profile`.

--compare DIR_A DIR_B compares the .npy files of two folders by name, each
tensor of A against B's as numpy.isclose does (|a - b| <= atol + rtol * |b|,
NaN equal to NaN), prints the largest absolute and relative error of each,
and exits 1 if any tensor differs, has another shape, or is in one folder
only. Run it with the pinned Python of tools/bench-env.sh:
.tools/bench-venv/bin/python.
"""

import argparse
import os
import re
import shutil
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError as error:
    sys.exit(
        f"onnx-reference.py: error: the Python package {error.name} is not installed here; run this script "
        "with .tools/bench-venv/bin/python (tools/bench-env.sh makes it)"
    )

# onnxruntime's element type names (NodeArg.type) and numpy's.
ONNXRUNTIME_DTYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int8)": np.int8,
    "tensor(int16)": np.int16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
}


# Untimed runs before --time-runs (the first run, whose outputs are
# written, included).
WARMUP_RUNS = 3


class UserError(Exception):
    pass


def sanitised(name):
    """A file name for a tensor name: ONNX names may hold '/' or ':'
    (gpu_0/data_0), and must not make hidden files or '..'."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    return re.sub(r"^\.", "_", safe) or "_"


def shape_text(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def parse_input_arguments(pairs):
    given = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise UserError(f"--input {pair!r}: expected NAME=FILE.npy")
        if name in given:
            raise UserError(f"--input {name} is given twice")
        given[name] = path
    return given


def load_npy(path, what):
    try:
        with open(path, "rb") as f:
            # Without this, numpy reads any other file as a pickle and
            # complains about pickled data.
            if f.read(6) != b"\x93NUMPY":
                raise UserError(f"{what}: {path} is not a .npy file (it does not start with \\x93NUMPY)")
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UserError(f"{what}: no such file {path}")
    except (OSError, ValueError) as error:
        raise UserError(f"{what}: cannot read {path} as a .npy file: {error}")


def check_input(value, array, path):
    """The array has the input's element type and its fixed dimensions."""
    want = ONNXRUNTIME_DTYPES.get(value.type)
    if want is None:
        raise UserError(f"input {value.name} has type {value.type}, which this script cannot feed")
    if array.dtype != want:
        raise UserError(
            f"{path} holds {array.dtype}, but input {value.name} is {np.dtype(want).name}"
        )
    fixed = [d if isinstance(d, int) else None for d in value.shape]
    if len(fixed) != array.ndim or any(
        d is not None and d != actual for d, actual in zip(fixed, array.shape)
    ):
        raise UserError(
            f"{path} has shape {shape_text(array.shape)}, but input {value.name} has shape "
            f"{shape_text(d if d is not None else '?' for d in fixed)}"
        )


def random_input(value, rng):
    if value.type != "tensor(float)":
        raise UserError(
            f"--random-inputs draws float32 tensors, but input {value.name} is {value.type}; "
            f"give it with --input {value.name}=FILE.npy"
        )
    if not all(isinstance(d, int) for d in value.shape):
        raise UserError(
            f"input {value.name} has symbolic dimensions {value.shape}; "
            f"give it with --input {value.name}=FILE.npy"
        )
    return rng.standard_normal(value.shape).astype(np.float32)


def make_dir(path):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise UserError(f"cannot create {path}: {error.strerror}")


def save_npy(path, array):
    try:
        np.save(path, array, allow_pickle=False)
    except OSError as error:
        raise UserError(f"cannot write {path}: {error.strerror}")


def tensor_paths(folder, names, what):
    """DIR/<sanitised name>.npy for each name; two names may not share a file."""
    paths = {}
    owners = {}
    for name in names:
        file_name = sanitised(name) + ".npy"
        if file_name in owners:
            raise UserError(f"{what} {owners[file_name]!r} and {name!r} would both be written to {file_name}")
        owners[file_name] = name
        paths[name] = os.path.join(folder, file_name)
    return paths


def run_model(args):
    try:
        import onnxruntime
    except ImportError:
        raise UserError("onnxruntime is not installed here; run this script with .tools/bench-venv/bin/python")

    if not os.path.isfile(args.model):
        raise UserError(f"no such model file {args.model}")
    given = parse_input_arguments(args.input)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    # Warnings (unused initializers in old models) would bury the summary.
    options.log_severity_level = 3
    if args.profile:
        profile_dir = tempfile.mkdtemp(prefix="onnx-reference-profile")
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(profile_dir, "ort")
    try:
        session = onnxruntime.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own exception types
        raise UserError(f"onnxruntime cannot load {args.model}: {error}")

    model_inputs = session.get_inputs()
    known = [value.name for value in model_inputs]
    for name in given:
        if name not in known:
            raise UserError(f"--input {name}: the model has no input {name}; its inputs are {', '.join(known)}")
    missing = [value for value in model_inputs if value.name not in given]
    if missing and args.random_inputs is None:
        names = ", ".join(value.name for value in missing)
        raise UserError(f"no value for input {names}: give --input NAME=FILE.npy or --random-inputs DIR")

    feeds = {}
    for value in model_inputs:
        if value.name in given:
            path = given[value.name]
            array = load_npy(path, f"--input {value.name}")
            check_input(value, array, path)
            feeds[value.name] = array
    if missing:
        make_dir(args.random_inputs)
        rng = np.random.default_rng(args.seed)
        paths = tensor_paths(args.random_inputs, [value.name for value in missing], "inputs")
        for value in missing:
            array = random_input(value, rng)
            save_npy(paths[value.name], array)
            feeds[value.name] = array
            print(
                f"input {value.name}: {array.dtype} {shape_text(array.shape)} "
                f"random (seed {args.seed}) -> {paths[value.name]}"
            )

    try:
        results = session.run(None, feeds)
        if args.time_runs:
            # The run above and these are the warm-up: onnxruntime's first
            # runs after the session's creation are slower.
            for _ in range(WARMUP_RUNS - 1):
                session.run(None, feeds)
            warm_runs = WARMUP_RUNS
            times = []
            for _ in range(args.time_runs):
                start = time.perf_counter()
                session.run(None, feeds)
                times.append(time.perf_counter() - start)
    except Exception as error:
        raise UserError(f"onnxruntime failed to run {args.model}: {error}")
    if args.time_runs:
        times.sort()
        print(
            f"onnxruntime {onnxruntime.__version__}: median {times[len(times) // 2] * 1e3:.2f} ms "
            f"of {args.time_runs} runs after {warm_runs} warm-up runs (min {times[0] * 1e3:.2f} ms), "
            f"{args.threads} thread{'s' if args.threads != 1 else ''}"
        )
    if args.profile:
        print_profile(session.end_profiling(), warm_runs, args.time_runs)
        shutil.rmtree(profile_dir, ignore_errors=True)
    make_dir(args.output_dir)
    output_names = [value.name for value in session.get_outputs()]
    paths = tensor_paths(args.output_dir, output_names, "outputs")
    for name, array in zip(output_names, results):
        array = np.asarray(array)
        save_npy(paths[name], array)
        print(f"output {name}: {array.dtype} {shape_text(array.shape)} -> {paths[name]}")
    return 0


def print_profile(path, warm_runs, timed_runs):
    """Each node's median time over the timed runs (the profile also holds
    the warm-up runs, which come first), in run order."""
    import json

    with open(path) as f:
        events = json.load(f)
    times = {}
    kinds = {}
    for event in events:
        name = event.get("name", "")
        if event.get("cat") == "Node" and name.endswith("_kernel_time"):
            node = name[: -len("_kernel_time")]
            times.setdefault(node, []).append(event["dur"] / 1e3)
            kinds[node] = event.get("args", {}).get("op_name", "?")
    print(f"nodes, in run order (medians of {timed_runs} runs):")
    print(f"  {'#':>4}  {'node':<40} {'op':<20} {'ms':>10}")
    total = 0.0
    for i, (node, durations) in enumerate(times.items()):
        timed = sorted(durations[warm_runs:]) or sorted(durations)
        median = timed[len(timed) // 2]
        total += median
        print(f"  {i:>4}  {node:<40} {kinds[node]:<20} {median:>10.3f}")
    print(f"  sum of the nodes' medians: {total:.3f} ms")


def npy_files(folder):
    if not os.path.isdir(folder):
        raise UserError(f"--compare: no such folder {folder}")
    return sorted(f for f in os.listdir(folder) if f.endswith(".npy"))


def compare_arrays(a, b, rtol, atol):
    """(max abs error, max rel error, elements that differ)."""
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    close = np.isclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        error = np.abs(a64 - b64)
        # Where both are NaN, or both the same infinity, there is no error.
        error[np.isnan(a64) & np.isnan(b64)] = 0.0
        error[(a64 == b64)] = 0.0
        relative = np.where(b64 != 0, error / np.abs(b64), np.where(error == 0, 0.0, np.inf))
    max_abs = float(np.max(error)) if error.size else 0.0
    max_rel = float(np.max(relative)) if relative.size else 0.0
    return max_abs, max_rel, int(error.size - np.count_nonzero(close))


def compare(args):
    folder_a, folder_b = args.compare
    files_a, files_b = npy_files(folder_a), npy_files(folder_b)
    names = sorted(set(files_a) | set(files_b))
    if not names:
        raise UserError(f"--compare: no .npy files in {folder_a} or {folder_b}")
    mismatches = 0
    for file_name in names:
        tensor = file_name[: -len(".npy")]
        if file_name not in files_b or file_name not in files_a:
            where = folder_a if file_name in files_a else folder_b
            print(f"{tensor}: MISMATCH: only in {where}")
            mismatches += 1
            continue
        a = load_npy(os.path.join(folder_a, file_name), "--compare")
        b = load_npy(os.path.join(folder_b, file_name), "--compare")
        if a.shape != b.shape:
            print(f"{tensor}: MISMATCH: shape {shape_text(a.shape)} in {folder_a}, {shape_text(b.shape)} in {folder_b}")
            mismatches += 1
            continue
        max_abs, max_rel, differing = compare_arrays(a, b, args.rtol, args.atol)
        verdict = "ok" if differing == 0 else f"MISMATCH: {differing} of {a.size} elements differ"
        print(f"{tensor}: max abs error {max_abs:.3g}, max rel error {max_rel:.3g}, {verdict}")
        mismatches += differing != 0
    print(
        f"compared {len(names)} tensor{'s' if len(names) != 1 else ''} (rtol {args.rtol:g}, atol {args.atol:g}): "
        f"{mismatches} mismatched"
    )
    return 1 if mismatches else 0


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        usage="%(prog)s MODEL.onnx [--input NAME=FILE.npy ...] [--random-inputs DIR [--seed N]] "
        "--output-dir DIR [--threads N] [--time-runs N]\n       %(prog)s --compare DIR_A DIR_B [--rtol R] [--atol A]",
    )
    parser.add_argument("model", nargs="?", metavar="MODEL.onnx")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    parser.add_argument("--random-inputs", metavar="DIR", help="draw the inputs not given, and write them here")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument("--output-dir", metavar="DIR")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime's intra-op threads (default 1)")
    parser.add_argument(
        "--time-runs", type=int, default=0, metavar="N", help="also time N more runs and print their median"
    )
    parser.add_argument(
        "--profile", action="store_true", help="with --time-runs, print each node's median time (onnxruntime's profiler)"
    )
    parser.add_argument("--compare", nargs=2, metavar=("DIR_A", "DIR_B"))
    parser.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (default 1e-3)")
    parser.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance (default 1e-5)")
    args = parser.parse_args()
    if args.compare:
        if args.model or args.output_dir or args.input or args.random_inputs:
            parser.error("--compare takes two folders and no model")
        if args.rtol < 0 or args.atol < 0:
            parser.error("--rtol and --atol must be 0 or more")
        action = compare
    else:
        if not args.model or not args.output_dir:
            parser.error("give MODEL.onnx and --output-dir DIR (or --compare DIR_A DIR_B)")
        if args.threads < 1:
            parser.error("--threads must be 1 or more")
        if args.time_runs < 0:
            parser.error("--time-runs must be 0 or more")
        if args.profile and not args.time_runs:
            parser.error("--profile needs --time-runs N")
        if args.seed < 0:
            parser.error("--seed must be 0 or more")
        action = run_model
    try:
        sys.exit(action(args))
    except UserError as error:
        # The lines --compare printed come first, also through a pipe.
        sys.stdout.flush()
        print(f"onnx-reference.py: error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
