#!/usr/bin/env python3
"""The onnx package's model tests, listed and exported as .npy files.

The `onnx` wheel ships real architectures with constant weights and their
expected outputs (backend/test/data/light: light_resnet50.onnx and
light_resnet50_output_0.pb, ...) and PyTorch-converted operator tests
(backend/test/data/pytorch-converted/test_*/model.onnx with
test_data_set_0/input_0.pb, output_0.pb, ...). Nothing is vendored: the
files are found through the installed package (onnx.__file__).

    tools/onnx-suite.py --list               # name, opset, op types, data sets
    tools/onnx-suite.py --export DIR         # every model, as below
    tools/onnx-suite.py --export DIR --model light_squeezenet --model test_Conv2d

--export writes, for each model, DIR/<model>/model.onnx (a copy),
DIR/<model>/inputs/<input>.npy, DIR/<model>/expected/<output>.npy (tensor
names sanitised as tools/onnx-reference.py does, so its outputs compare
with `onnx-reference.py --compare`) and DIR/<model>/test.json (source,
opset, onnx's tolerances, the tensor names and their files), so that a tool
without protobuf can run the tests. A model with several data sets gets
DIR/<model>/<data set>/{inputs,expected} for all but the first. The light
models ship no inputs: onnx's test runner feeds them arange(n) / n in the
input's shape (Runner.generate_dummy_data, random=False), and so does the
export, by calling that function.

Run it with the pinned Python of tools/bench-env.sh:
.tools/bench-venv/bin/python.
"""

import argparse
import collections
import glob
import json
import os
import re
import shutil
import sys

try:
    import onnx
    from onnx import numpy_helper
except ImportError as error:
    sys.exit(
        f"onnx-suite.py: error: the Python package {error.name} is not installed here; run this script "
        "with .tools/bench-venv/bin/python (tools/bench-env.sh makes it)"
    )

# onnx's backend test loader's tolerances where a test has no data.json.
DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-7


class UserError(Exception):
    pass


def sanitised(name):
    """As tools/onnx-reference.py names its files."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    return re.sub(r"^\.", "_", safe) or "_"


def data_dir():
    return os.path.join(os.path.dirname(os.path.abspath(onnx.__file__)), "backend", "test", "data")


def tolerances(case_dir):
    rtol, atol = DEFAULT_RTOL, DEFAULT_ATOL
    path = os.path.join(case_dir, "data.json")
    if os.path.isfile(path):
        with open(path) as f:
            data = json.load(f)
        rtol, atol = data.get("rtol", rtol), data.get("atol", atol)
    return rtol, atol


class TestModel:
    """One model and its data sets: (set name, inputs, expected), each of
    the last two a list of (tensor name, where its values come from, a
    function that loads them as a numpy array)."""

    def __init__(self, group, name, path, rtol, atol):
        self.group, self.name, self.path = group, name, path
        self.rtol, self.atol = rtol, atol
        self.model = onnx.load(path)
        initializers = {t.name for t in self.model.graph.initializer}
        # Old IR versions list initializers as graph inputs too.
        self.inputs = [v for v in self.model.graph.input if v.name not in initializers]
        self.outputs = list(self.model.graph.output)
        self.data_sets = []

    def opset(self):
        return next((o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")), None)

    def op_types(self):
        return sorted({node.op_type for node in self.model.graph.node})


def light_models(root):
    models = []
    for path in sorted(glob.glob(os.path.join(root, "light", "light_*.onnx"))):
        name = os.path.basename(path)[: -len(".onnx")]
        # data/real/test_<model>/data.json holds the test's tolerances.
        case_dir = os.path.join(root, "real", "test_" + name[len("light_"):])
        test = TestModel("light", name, path, *tolerances(case_dir))
        inputs = [(value.name, "arange(n) / n", dummy_input(value, name)) for value in test.inputs]
        expected = []
        for index, value in enumerate(test.outputs):
            pb = f"{path[: -len('.onnx')]}_output_{index}.pb"
            if os.path.isfile(pb):
                expected.append((value.name, os.path.basename(pb), load_pb(pb)))
        test.data_sets.append(("test_data_set_0", inputs, expected))
        models.append(test)
    return models


def dummy_input(value, model):
    """What onnx's runner feeds a light model's input."""
    from onnx.backend.test.runner import Runner

    return lambda: Runner.generate_dummy_data(value, seed=0, name=model, random=False)


def load_pb(path):
    def load():
        return numpy_helper.to_array(onnx.load_tensor(path))

    return load


def pytorch_converted_models(root):
    models = []
    for case_dir in sorted(glob.glob(os.path.join(root, "pytorch-converted", "test_*"))):
        path = os.path.join(case_dir, "model.onnx")
        if not os.path.isfile(path):
            continue
        test = TestModel("pytorch-converted", os.path.basename(case_dir), path, *tolerances(case_dir))
        for set_dir in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
            inputs = pb_tensors(set_dir, "input", test.inputs, test.name)
            expected = pb_tensors(set_dir, "output", test.outputs, test.name)
            test.data_sets.append((os.path.basename(set_dir), inputs, expected))
        models.append(test)
    return models


def pb_tensors(set_dir, kind, values, model):
    """(name, file, loader) of input_<i>.pb or output_<i>.pb, named after the
    graph's i-th input or output, as onnx's runner matches them."""
    count = len(glob.glob(os.path.join(set_dir, f"{kind}_*.pb")))
    if count > len(values):
        raise UserError(f"{model}: {set_dir} has {count} {kind}s, the graph {len(values)}")
    tensors = []
    for index in range(count):
        pb = os.path.join(set_dir, f"{kind}_{index}.pb")
        tensors.append((values[index].name, os.path.basename(pb), load_pb(pb)))
    return tensors


def all_models(selected):
    root = data_dir()
    if not os.path.isdir(root):
        raise UserError(f"the onnx package at {os.path.dirname(onnx.__file__)} has no backend test data ({root})")
    models = light_models(root) + pytorch_converted_models(root)
    if selected:
        by_name = {m.name: m for m in models}
        unknown = [name for name in selected if name not in by_name]
        if unknown:
            raise UserError(f"no model named {', '.join(unknown)} (tools/onnx-suite.py --list names them)")
        models = [by_name[name] for name in selected]
    return models


def shape_text(value):
    dims = value.type.tensor_type.shape.dim
    sizes = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in dims]
    return "[" + ", ".join(sizes) + "]"


def list_models(models):
    print(f"onnx {onnx.__version__}: {data_dir()}")
    for test in models:
        print(f"{test.group}/{test.name}: opset {test.opset()}, {len(test.model.graph.node)} nodes, rtol {test.rtol:g}, atol {test.atol:g}")
        print(f"  op types: {' '.join(test.op_types())}")
        for set_name, inputs, expected in test.data_sets:
            shapes = {v.name: shape_text(v) for v in test.inputs}
            input_text = ", ".join(f"{name} {shapes[name]} ({source})" for name, source, _ in inputs)
            output_text = ", ".join(f"{name} ({source})" for name, source, _ in expected)
            print(f"  {set_name}: inputs {input_text}; expected {output_text}")
    print(f"op types across {len(models)} models (models using each: all, light, pytorch-converted):")
    counts = collections.Counter()
    by_group = collections.defaultdict(collections.Counter)
    for test in models:
        for op in test.op_types():
            counts[op] += 1
            by_group[test.group][op] += 1
    for op, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {op}: {count}, {by_group['light'][op]}, {by_group['pytorch-converted'][op]}")


def write_tensors(folder, tensors):
    import numpy as np

    os.makedirs(folder, exist_ok=True)
    files = []
    for name, _, load in tensors:
        file_name = sanitised(name) + ".npy"
        if any(f == file_name for _, f in files):
            raise UserError(f"two tensors would both be written to {os.path.join(folder, file_name)}")
        np.save(os.path.join(folder, file_name), load(), allow_pickle=False)
        files.append((name, file_name))
    return files


def export(models, out_dir):
    # Sources are named from the folder holding the onnx package, as onnx's
    # test cases name them: onnx/backend/test/data/light/light_resnet50.onnx.
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(onnx.__file__)))
    try:
        os.makedirs(out_dir, exist_ok=True)
        for test in models:
            model_dir = os.path.join(out_dir, test.name)
            os.makedirs(model_dir, exist_ok=True)
            shutil.copyfile(test.path, os.path.join(model_dir, "model.onnx"))
            sets = []
            for index, (set_name, inputs, expected) in enumerate(test.data_sets):
                set_dir = model_dir if index == 0 else os.path.join(model_dir, set_name)
                sets.append(
                    {
                        "name": set_name,
                        "inputs": dict(write_tensors(os.path.join(set_dir, "inputs"), inputs)),
                        "expected": dict(write_tensors(os.path.join(set_dir, "expected"), expected)),
                        "folder": os.path.relpath(set_dir, model_dir),
                    }
                )
            description = {
                "source": os.path.relpath(test.path, package_parent),
                "onnx_version": onnx.__version__,
                "opset": test.opset(),
                "rtol": test.rtol,
                "atol": test.atol,
                "op_types": test.op_types(),
                "data_sets": sets,
            }
            with open(os.path.join(model_dir, "test.json"), "w") as f:
                json.dump(description, f, indent=1, sort_keys=True)
                f.write("\n")
            tensors = sum(len(s["inputs"]) + len(s["expected"]) for s in sets)
            print(f"exported {test.name}: {len(sets)} data set{'s' if len(sets) != 1 else ''}, {tensors} tensors -> {model_dir}")
    except OSError as error:
        raise UserError(f"cannot write under {out_dir}: {error}")
    print(f"exported {len(models)} models to {out_dir}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="name, opset, op types and data sets of each model")
    action.add_argument("--export", metavar="DIR", help="write each model's tests as .npy files under DIR")
    parser.add_argument("--model", action="append", default=[], metavar="NAME", help="only this model (repeatable)")
    args = parser.parse_args()
    try:
        models = all_models(args.model)
        if args.list:
            list_models(models)
        else:
            export(models, args.export)
    except UserError as error:
        print(f"onnx-suite.py: error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
