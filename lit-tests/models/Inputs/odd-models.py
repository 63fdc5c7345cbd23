#!/usr/bin/env python3
"""Writes small ONNX models that tools/onnx-reference.py must refuse to
draw random inputs for, or to write outputs of, with a clear error:

    odd-models.py DIR   writes DIR/int-input.onnx (an int64 input),
                        DIR/symbolic.onnx (a dimension named, not sized),
                        DIR/colliding-outputs.onnx (outputs y/0 and y:0,
                        which would both be written to y_0.npy)
"""
import os
import sys

import onnx
from onnx import TensorProto, helper


def save(graph, path):
    model = helper.make_model_gen_version(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def main():
    out = sys.argv[1]
    save(
        helper.make_graph(
            [helper.make_node("Neg", ["x"], ["y"])],
            "int-input",
            [helper.make_tensor_value_info("x", TensorProto.INT64, [2])],
            [helper.make_tensor_value_info("y", TensorProto.INT64, [2])],
        ),
        os.path.join(out, "int-input.onnx"),
    )
    save(
        helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "symbolic",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        ),
        os.path.join(out, "symbolic.onnx"),
    )
    save(
        helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y/0"]), helper.make_node("Neg", ["x"], ["y:0"])],
            "colliding-outputs",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
            [
                helper.make_tensor_value_info("y/0", TensorProto.FLOAT, [4]),
                helper.make_tensor_value_info("y:0", TensorProto.FLOAT, [4]),
            ],
        ),
        os.path.join(out, "colliding-outputs.onnx"),
    )


if __name__ == "__main__":
    main()
