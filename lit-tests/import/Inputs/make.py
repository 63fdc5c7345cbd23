"""Writes small ONNX models for the `tilec import` tests, without the onnx
package: the few protobuf fields they need are encoded by hand below (field
numbers from onnx.proto), so the tests run wherever Python does. Text, not
committed binaries, so that a reader sees what each model holds.

    make.py MODEL OUT.onnx            write one model (see MODELS)
    make.py convnet OUT.onnx --ref DIR
                                      also write DIR/x.npy, an input, and
                                      DIR/ref.npy, numpy's output (needs numpy)
    make.py compare GOT.npy WANT.npy  OK or MISMATCH (exit 1), with the error
"""

import struct
import sys

# ---- protobuf wire format ----------------------------------------------------


def varint(v):
    v &= (1 << 64) - 1  # negative int64s are ten-byte two's complement
    out = b""
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def f_varint(field, v):
    return varint(field << 3) + varint(v)


def f_bytes(field, data):
    return varint(field << 3 | 2) + varint(len(data)) + data


def f_str(field, s):
    return f_bytes(field, s.encode())


# ---- ONNX messages -----------------------------------------------------------

FLOAT, INT64, DOUBLE = 1, 7, 11  # TensorProto.DataType
A_FLOAT, A_INT, A_STRING, A_INTS = 1, 2, 3, 7  # AttributeProto.AttributeType


def value_info(name, dims, elem=FLOAT):
    # ValueInfoProto{name=1, type=2}; TypeProto{tensor_type=1};
    # Tensor{elem_type=1, shape=2}; TensorShapeProto{dim=1};
    # Dimension{dim_value=1 | dim_param=2}
    shape = b"".join(f_bytes(1, f_varint(1, d) if isinstance(d, int) else f_str(2, d)) for d in dims)
    tensor = f_varint(1, elem) + f_bytes(2, shape)
    return f_str(1, name) + f_bytes(2, f_bytes(1, tensor))


def initializer(name, dims, values):
    # TensorProto{dims=1, data_type=2, name=8, raw_data=9}
    raw = struct.pack("<%df" % len(values), *values)
    return b"".join(f_varint(1, d) for d in dims) + f_varint(2, FLOAT) + f_str(8, name) + f_bytes(9, raw)


def attr(name, value):
    # AttributeProto{name=1, f=2, i=3, s=4, ints=8, type=20}
    if isinstance(value, float):
        return f_str(1, name) + varint(2 << 3 | 5) + struct.pack("<f", value) + f_varint(20, A_FLOAT)
    if isinstance(value, int):
        return f_str(1, name) + f_varint(3, value) + f_varint(20, A_INT)
    if isinstance(value, str):
        return f_str(1, name) + f_str(4, value) + f_varint(20, A_STRING)
    return f_str(1, name) + b"".join(f_varint(8, v) for v in value) + f_varint(20, A_INTS)


def node(op, name, inputs, outputs, **attrs):
    # NodeProto{input=1, output=2, name=3, op_type=4, attribute=5}
    out = b"".join(f_str(1, i) for i in inputs) + b"".join(f_str(2, o) for o in outputs)
    out += f_str(3, name) + f_str(4, op)
    return out + b"".join(f_bytes(5, attr(k, v)) for k, v in attrs.items())


def model(graph_name, nodes, inits, inputs, outputs, opset=17):
    # GraphProto{node=1, name=2, initializer=5, input=11, output=12}
    g = b"".join(f_bytes(1, n) for n in nodes) + f_str(2, graph_name)
    g += b"".join(f_bytes(5, i) for i in inits)
    g += b"".join(f_bytes(11, i) for i in inputs) + b"".join(f_bytes(12, f_str(1, o)) for o in outputs)
    # ModelProto{ir_version=1, producer_name=2, graph=7, opset_import=8};
    # OperatorSetIdProto{domain=1, version=2}
    return f_varint(1, 8) + f_str(2, "make.py") + f_bytes(7, g) + f_bytes(8, f_varint(2, opset))


# ---- the models --------------------------------------------------------------


def values(n, seed):
    """n deterministic values in [-1, 1) (a 32-bit LCG: no numpy needed)."""
    out, s = [], seed
    for _ in range(n):
        s = (s * 1664525 + 1013904223) % 2**32
        out.append(s / 2**31 - 1.0)
    return out


def convnet_params():
    p = {
        "conv1.weight": ([8, 3, 3, 3], values(8 * 3 * 9, 1)),
        "conv1.bias": ([8], values(8, 2)),
        "bn1.weight": ([8], [1.0 + v / 2 for v in values(8, 3)]),
        "bn1.bias": ([8], values(8, 4)),
        "bn1.running_mean": ([8], values(8, 5)),
        "bn1.running_var": ([8], [1.0 + v / 2 for v in values(8, 6)]),
        "fc.weight": ([5, 8], values(40, 7)),
        "fc.bias": ([5], values(5, 8)),
    }
    return p


def convnet():
    nodes = [
        node("Conv", "conv1", ["data", "conv1.weight", "conv1.bias"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        node("BatchNormalization", "bn1", ["c1", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"], ["b1"], epsilon=1e-5),
        node("Relu", "relu1", ["b1"], ["r1"]),
        node("MaxPool", "pool1", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        node("GlobalAveragePool", "gap", ["p1"], ["g"]),
        node("Flatten", "flatten", ["g"], ["f"], axis=1),
        node("Gemm", "fc", ["f", "fc.weight", "fc.bias"], ["logits"], transB=1),
        node("Softmax", "softmax", ["logits"], ["prob"], axis=-1),
    ]
    inits = [initializer(k, d, v) for k, (d, v) in convnet_params().items()]
    return model("convnet", nodes, inits, [value_info("data", ["N", 3, 16, 16])], ["prob"])


def convnet_reference(folder):
    import numpy as np

    p = {k: np.array(v, dtype=np.float64).reshape(d) for k, (d, v) in convnet_params().items()}
    x = np.random.default_rng(1).uniform(-1, 1, (2, 3, 16, 16)).astype(np.float32)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = p["conv1.weight"]
    c = np.zeros((2, 8, 8, 8))
    for r in range(3):
        for s in range(3):
            c += np.einsum("nchw,fc->nfhw", xp[:, :, r : r + 16 : 2, s : s + 16 : 2], w[:, :, r, s])
    c += p["conv1.bias"][None, :, None, None]
    ch = lambda v: v[None, :, None, None]
    b = (c - ch(p["bn1.running_mean"])) / np.sqrt(ch(p["bn1.running_var"]) + 1e-5) * ch(p["bn1.weight"]) + ch(p["bn1.bias"])
    r = np.maximum(b, 0)
    pool = r.reshape(2, 8, 4, 2, 4, 2).max(axis=(3, 5))
    g = pool.mean(axis=(2, 3))
    logits = g @ p["fc.weight"].T + p["fc.bias"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.save(folder + "/x.npy", x)
    np.save(folder + "/ref.npy", (e / e.sum(axis=1, keepdims=True)).astype(np.float32))


def small(nodes, inits=(), dims=(1, 1, 4, 4), opset=17):
    w = initializer("w", [1, 1, 3, 3], values(9, 1))
    return model("small", nodes, [w, *inits], [value_info("x", list(dims))], ["y"], opset)


MODELS = {
    "convnet": convnet,
    "unsupported-op": lambda: small([node("Conv", "conv0", ["x", "w"], ["c"]), node("NonMaxSuppression", "nms", ["c"], ["y"])]),
    "unknown-attribute": lambda: small([node("Conv", "conv0", ["x", "w"], ["y"], fancy=1)]),
    "bad-attribute-value": lambda: small([node("Conv", "conv0", ["x", "w"], ["y"], auto_pad="SAME_SIDEWAYS")]),
    "dynamic": lambda: small([node("Conv", "conv0", ["x", "w"], ["y"])], dims=("batch", 1, 4, 4)),
    "double-input": lambda: model("small", [node("Relu", "relu", ["x"], ["y"])], [], [value_info("x", [4], DOUBLE)], ["y"]),
}


def compare(got, want):
    import numpy as np

    g, w = np.load(got), np.load(want)
    if g.shape != w.shape:
        print("MISMATCH shapes", g.shape, w.shape)
        return 1
    err = float(np.max(np.abs(g.astype(np.float64) - w)))
    ok = err <= 1e-5
    print("OK" if ok else "MISMATCH", "shape=%s max_err=%.2e" % (g.shape, err))
    return 0 if ok else 1


def main(argv):
    if argv[0] == "compare":
        return compare(argv[1], argv[2])
    with open(argv[1], "wb") as f:
        f.write(MODELS[argv[0]]())
    if len(argv) > 2 and argv[2] == "--ref":
        convnet_reference(argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
