#!/usr/bin/env python3
"""Builds ONNX models for tests and benchmarks, with seeded random weights.

Nothing is downloaded: the graphs follow torchvision's ResNet-18, ResNet-50
and MobileNetV2 and a BERT-base encoder layer (Hugging Face's BertLayer),
as inference graphs at batch 1, written with onnx.helper. Each model comes
in two sizes with the same graph (every node, in the same order): `full`,
the real architecture, and `tiny`, small enough for tilec's reference
interpreter (a few million multiply-adds).

    tools/onnx-models.py --model resnet18 --size tiny --seed 0 -o r18.onnx
    tools/onnx-models.py --all models/ --check     # every model, both sizes

The same model, size and seed give byte-identical files. `--check` runs
onnx's checker (with shape inference) on each model, runs it once with
onnxruntime on a seeded standard-normal input, and checks that a tiny graph
has the same nodes as its full one. Run it with the pinned Python of
tools/bench-env.sh: .tools/bench-venv/bin/python.
"""

import argparse
import math
import os
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as error:
    sys.exit(
        f"onnx-models.py: error: the Python package {error.name} is not installed here; run this script "
        "with .tools/bench-venv/bin/python (tools/bench-env.sh makes it)"
    )

MODELS = ["resnet18", "resnet50", "mobilenetv2", "bert-layer"]
SIZES = ["full", "tiny"]

# Opset 17 has every op these graphs use but Gelu, which came in opset 20;
# onnxruntime 1.31 runs Gelu at opset 20 (checked when these models were
# written), so the BERT layer declares opset 20 and uses it, not the Erf
# formula.
OPSET = 17
OPSET_WITH_GELU = 20

BN_EPSILON = 1e-5
# Hugging Face's BertConfig.layer_norm_eps.
LAYER_NORM_EPSILON = 1e-12


class GraphBuilder:
    """Collects nodes and initializers. Weights are drawn from `rng` in the
    order the graph asks for them, so a seed fixes every value; with
    `rng=None` only the nodes are built (the structure check of --check)."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.initializers = []
        # Initializer names that torchvision counts as parameters (not BN's
        # running statistics, reshape targets or scalar constants).
        self.parameter_names = set()
        self.constants = {}

    def add_initializer(self, name, make_array, parameter):
        if parameter:
            self.parameter_names.add(name)
        if self.rng is not None:
            self.initializers.append(numpy_helper.from_array(make_array(), name))
        return name

    def normal(self, name, shape, std, mean=0.0):
        return self.add_initializer(
            name,
            lambda: (mean + std * self.rng.standard_normal(shape)).astype(np.float32),
            parameter=True,
        )

    def uniform(self, name, shape, low, high, parameter=True):
        return self.add_initializer(
            name, lambda: self.rng.uniform(low, high, shape).astype(np.float32), parameter
        )

    def constant(self, name, array):
        """A constant shared by the whole graph (clip bounds, reshape targets)."""
        if name not in self.constants:
            self.constants[name] = self.add_initializer(name, lambda: array, parameter=False)
        return name

    def node(self, op_type, inputs, name, **attributes):
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attributes))
        return name


# --- CNN pieces ---------------------------------------------------------


def conv(b, x, name, cin, cout, kernel, stride=1, pad=0, groups=1):
    # He initialisation (std sqrt(2 / fan_in)) keeps the second moment of
    # the activations about constant through conv + ReLU, so that 50 layers
    # neither blow up nor vanish.
    fan_in = cin // groups * kernel * kernel
    w = b.normal(f"{name}.weight", (cout, cin // groups, kernel, kernel), math.sqrt(2.0 / fan_in))
    return b.node(
        "Conv",
        [x, w],
        name,
        kernel_shape=[kernel, kernel],
        strides=[stride, stride],
        pads=[pad, pad, pad, pad],
        group=groups,
    )


def batch_norm(b, x, name, channels, residual_branch_end=False):
    # Random but sane statistics: gamma / sqrt(var) near 1 and small shifts,
    # so each BN is close to the identity in scale. The last BN of a residual
    # branch gets a small gamma, as in trained networks: with gamma near 1
    # every residual Add would double the variance, and ResNet-50's 16 blocks
    # would grow activations by about 2^8.
    gamma_low, gamma_high = (0.1, 0.3) if residual_branch_end else (0.8, 1.2)
    scale = b.uniform(f"{name}.weight", (channels,), gamma_low, gamma_high)
    bias = b.normal(f"{name}.bias", (channels,), 0.1)
    mean = b.add_initializer(
        f"{name}.running_mean",
        lambda: (0.1 * b.rng.standard_normal(channels)).astype(np.float32),
        parameter=False,
    )
    var = b.uniform(f"{name}.running_var", (channels,), 0.5, 1.5, parameter=False)
    return b.node("BatchNormalization", [x, scale, bias, mean, var], name, epsilon=BN_EPSILON)


def relu6(b, x, name):
    low = b.constant("relu6.min", np.array(0.0, np.float32))
    high = b.constant("relu6.max", np.array(6.0, np.float32))
    return b.node("Clip", [x, low, high], name)


def classifier(b, x, features, classes, name):
    pooled = b.node("GlobalAveragePool", [x], "avgpool")
    flat = b.node("Flatten", [pooled], "flatten", axis=1)
    # torchvision's Linear: weight [out, in] (hence transB), bias; scale
    # 1 / sqrt(fan_in) keeps the logits O(1).
    w = b.normal(f"{name}.weight", (classes, features), 1.0 / math.sqrt(features))
    bias = b.normal(f"{name}.bias", (classes,), 0.01)
    return b.node("Gemm", [flat, w, bias], "logits", transB=1)


# --- ResNet (torchvision.models.resnet) ------------------------------------


def basic_block(b, x, prefix, cin, width, stride):
    out = conv(b, x, f"{prefix}.conv1", cin, width, 3, stride, 1)
    out = batch_norm(b, out, f"{prefix}.bn1", width)
    out = b.node("Relu", [out], f"{prefix}.relu1")
    out = conv(b, out, f"{prefix}.conv2", width, width, 3, 1, 1)
    out = batch_norm(b, out, f"{prefix}.bn2", width, residual_branch_end=True)
    return out, width


def bottleneck(b, x, prefix, cin, width, stride):
    # ResNet v1.5, as torchvision: the stride is on the 3x3 conv.
    cout = width * 4
    out = conv(b, x, f"{prefix}.conv1", cin, width, 1)
    out = batch_norm(b, out, f"{prefix}.bn1", width)
    out = b.node("Relu", [out], f"{prefix}.relu1")
    out = conv(b, out, f"{prefix}.conv2", width, width, 3, stride, 1)
    out = batch_norm(b, out, f"{prefix}.bn2", width)
    out = b.node("Relu", [out], f"{prefix}.relu2")
    out = conv(b, out, f"{prefix}.conv3", width, cout, 1)
    out = batch_norm(b, out, f"{prefix}.bn3", cout, residual_branch_end=True)
    return out, cout


def resnet(b, block, layers, base_width, classes):
    x = "data"
    out = conv(b, x, "conv1", 3, base_width, 7, 2, 3)
    out = batch_norm(b, out, "bn1", base_width)
    out = b.node("Relu", [out], "relu")
    out = b.node(
        "MaxPool", [out], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
    )
    channels = base_width
    for stage, blocks in enumerate(layers):
        width = base_width * 2**stage
        for index in range(blocks):
            prefix = f"layer{stage + 1}.{index}"
            stride = 2 if stage > 0 and index == 0 else 1
            branch, cout = block(b, out, prefix, channels, width, stride)
            identity = out
            if stride != 1 or channels != cout:
                identity = conv(b, out, f"{prefix}.downsample.0", channels, cout, 1, stride)
                identity = batch_norm(b, identity, f"{prefix}.downsample.1", cout)
            out = b.node("Add", [branch, identity], f"{prefix}.add")
            out = b.node("Relu", [out], f"{prefix}.relu")
            channels = cout
    return classifier(b, out, channels, classes, "fc")


# --- MobileNetV2 (torchvision.models.mobilenetv2) --------------------------

# expand ratio t, output channels c, repeats n, first stride s
INVERTED_RESIDUAL_SETTING = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
]



def conv_bn_relu6(b, x, prefix, cin, cout, kernel, stride, groups=1):
    out = conv(b, x, f"{prefix}.0", cin, cout, kernel, stride, (kernel - 1) // 2, groups)
    out = batch_norm(b, out, f"{prefix}.1", cout)
    return relu6(b, out, f"{prefix}.2")


def mobilenetv2(b, channel_divisor, classes):
    # Width 1.0 (torchvision's default). The tiny model divides every
    # channel count exactly instead of using a width multiplier: torchvision's
    # rounding to multiples of 8 would give neighbouring stages the same
    # count at small widths, which adds residual Adds the full graph has not.
    cin = 32 // channel_divisor
    out = conv_bn_relu6(b, "data", "features.0", 3, cin, 3, 2)
    index = 1
    for t, c, n, s in INVERTED_RESIDUAL_SETTING:
        cout = c // channel_divisor
        for repeat in range(n):
            stride = s if repeat == 0 else 1
            prefix = f"features.{index}.conv"
            hidden = cin * t
            branch = out
            layer = 0
            if t != 1:
                branch = conv_bn_relu6(b, branch, f"{prefix}.{layer}", cin, hidden, 1, 1)
                layer += 1
            # The depthwise 3x3 conv: one group per channel.
            branch = conv_bn_relu6(b, branch, f"{prefix}.{layer}", hidden, hidden, 3, stride, hidden)
            layer += 1
            branch = conv(b, branch, f"{prefix}.{layer}", hidden, cout, 1)
            residual = stride == 1 and cin == cout
            branch = batch_norm(b, branch, f"{prefix}.{layer + 1}", cout, residual_branch_end=residual)
            if residual:
                out = b.node("Add", [out, branch], f"features.{index}.add")
            else:
                out = branch
            cin = cout
            index += 1
    last_channel = 1280 // channel_divisor
    out = conv_bn_relu6(b, out, f"features.{index}", cin, last_channel, 1, 1)
    # The classifier's Dropout is the identity at inference; it has no node.
    return classifier(b, out, last_channel, classes, "classifier.1")


# --- BERT encoder layer (transformers' BertLayer) --------------------------


def linear(b, x, name, fan_in, fan_out):
    # std 1 / sqrt(fan_in) (not BERT's 0.02) keeps the projections O(1), so
    # the attention scores spread and Softmax is not near uniform.
    w = b.normal(f"{name}.weight", (fan_in, fan_out), 1.0 / math.sqrt(fan_in))
    bias = b.normal(f"{name}.bias", (fan_out,), 0.02)
    product = b.node("MatMul", [x, w], f"{name}.matmul")
    return b.node("Add", [product, bias], name)


def layer_norm(b, x, name, hidden):
    scale = b.uniform(f"{name}.weight", (hidden,), 0.8, 1.2)
    bias = b.normal(f"{name}.bias", (hidden,), 0.1)
    return b.node("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=LAYER_NORM_EPSILON)


def bert_layer(b, seq, hidden, heads, ffn):
    head_dim = hidden // heads
    x = "hidden"
    split_heads = b.constant("shape.split_heads", np.array([1, seq, heads, head_dim], np.int64))
    merge_heads = b.constant("shape.merge_heads", np.array([1, seq, hidden], np.int64))

    def to_heads(name, perm):
        projected = linear(b, x, f"attention.self.{name}", hidden, hidden)
        split = b.node("Reshape", [projected, split_heads], f"attention.self.{name}.split")
        return b.node("Transpose", [split], f"attention.self.{name}.heads", perm=perm)

    q = to_heads("query", [0, 2, 1, 3])  # [1, heads, seq, head_dim]
    k = to_heads("key", [0, 2, 3, 1])  # [1, heads, head_dim, seq]
    v = to_heads("value", [0, 2, 1, 3])
    scores = b.node("MatMul", [q, k], "attention.self.scores")
    sqrt_d = b.constant("attention.self.sqrt_head_dim", np.array(math.sqrt(head_dim), np.float32))
    scaled = b.node("Div", [scores, sqrt_d], "attention.self.scaled_scores")
    probs = b.node("Softmax", [scaled], "attention.self.probs", axis=-1)
    context = b.node("MatMul", [probs, v], "attention.self.context")
    context = b.node("Transpose", [context], "attention.self.context.seq_major", perm=[0, 2, 1, 3])
    context = b.node("Reshape", [context, merge_heads], "attention.self.context.merged")
    attn = linear(b, context, "attention.output.dense", hidden, hidden)
    attn = b.node("Add", [attn, x], "attention.output.residual")
    attn = layer_norm(b, attn, "attention.output.LayerNorm", hidden)
    inter = linear(b, attn, "intermediate.dense", hidden, ffn)
    inter = b.node("Gelu", [inter], "intermediate.gelu")
    out = linear(b, inter, "output.dense", ffn, hidden)
    out = b.node("Add", [out, attn], "output.residual")
    return layer_norm(b, out, "output", hidden)


# --- models ---------------------------------------------------------------

# Per model and size: the builder's arguments, the input shape, the opset.
CONFIGS = {
    "resnet18": {
        "full": dict(image=224, base_width=64, classes=1000),
        "tiny": dict(image=32, base_width=8, classes=10),
    },
    "resnet50": {
        "full": dict(image=224, base_width=64, classes=1000),
        "tiny": dict(image=32, base_width=8, classes=10),
    },
    "mobilenetv2": {
        "full": dict(image=224, channel_divisor=1, classes=1000),
        "tiny": dict(image=32, channel_divisor=4, classes=10),
    },
    "bert-layer": {
        "full": dict(seq=128, hidden=768, heads=12, ffn=3072),
        "tiny": dict(seq=8, hidden=32, heads=2, ffn=64),
    },
}


def build_graph(model, size, rng):
    """The builder filled for `model` at `size`, its input and output value
    infos and its opset."""
    config = dict(CONFIGS[model][size])
    b = GraphBuilder(rng)
    if model == "bert-layer":
        shape = [1, config["seq"], config["hidden"]]
        output = bert_layer(b, **config)
        inputs = [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, shape)]
        outputs = [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)]
        return b, inputs, outputs, OPSET_WITH_GELU
    image = config.pop("image")
    if model == "resnet18":
        output = resnet(b, basic_block, [2, 2, 2, 2], **config)
    elif model == "resnet50":
        output = resnet(b, bottleneck, [3, 4, 6, 3], **config)
    else:
        output = mobilenetv2(b, **config)
    inputs = [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, image, image])]
    outputs = [helper.make_tensor_value_info(output, TensorProto.FLOAT, [1, config["classes"]])]
    return b, inputs, outputs, OPSET


def build_model(model, size, seed):
    b, inputs, outputs, opset = build_graph(model, size, np.random.default_rng(seed))
    graph = helper.make_graph(
        b.nodes, f"{model}-{size}", inputs, outputs, initializer=b.initializers
    )
    # make_model_gen_version picks the oldest IR version that has the
    # opset, which onnxruntime 1.31 loads (helper.make_model's newest does
    # not).
    onnx_model = helper.make_model_gen_version(
        graph,
        producer_name="tilec tools/onnx-models.py",
        opset_imports=[helper.make_opsetid("", opset)],
    )
    onnx_model.doc_string = f"{model} ({size}), random weights, seed {seed}"
    return onnx_model, b.parameter_names


def parameter_count(onnx_model, parameter_names):
    return sum(
        int(np.prod(t.dims)) for t in onnx_model.graph.initializer if t.name in parameter_names
    )


def multiply_adds(onnx_model):
    """Multiply-adds of the Conv, Gemm and MatMul nodes, from the shapes
    onnx's shape inference gives."""
    inferred = onnx.shape_inference.infer_shapes(onnx_model, strict_mode=True)
    shapes = {}
    for info in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        shapes[info.name] = [d.dim_value for d in info.type.tensor_type.shape.dim]
    for t in inferred.graph.initializer:
        shapes[t.name] = list(t.dims)
    total = 0
    for node in inferred.graph.node:
        out = shapes[node.output[0]]
        if node.op_type == "Conv":
            weight = shapes[node.input[1]]
            total += int(np.prod(out)) * int(np.prod(weight[1:]))
        elif node.op_type == "Gemm":
            total += int(np.prod(out)) * shapes[node.input[0]][-1]
        elif node.op_type == "MatMul":
            total += int(np.prod(out)) * shapes[node.input[0]][-1]
    return total


def op_types(nodes):
    return sorted({n.op_type for n in nodes})


def self_test(onnx_model, model, size, seed):
    """onnx's checker, a run with onnxruntime, and (for tiny) the same nodes
    as the full graph. Returns a summary, or raises CheckFailed."""
    try:
        onnx.checker.check_model(onnx_model, full_check=True)
    except onnx.checker.ValidationError as error:
        raise CheckFailed(f"onnx.checker: {error}") from error
    if size == "tiny":
        full, _, _, _ = build_graph(model, "full", rng=None)
        tiny_ops = [n.op_type for n in onnx_model.graph.node]
        full_ops = [n.op_type for n in full.nodes]
        if tiny_ops != full_ops:
            raise CheckFailed("the tiny graph's nodes differ from the full graph's")
    try:
        import onnxruntime
    except ImportError:
        raise CheckFailed("onnxruntime is not installed here; run this script with .tools/bench-venv/bin/python")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        onnx_model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in session.get_inputs():
        feeds[value.name] = rng.standard_normal(value.shape).astype(np.float32)
    (output,) = session.run(None, feeds)
    expected = [d.dim_value for d in onnx_model.graph.output[0].type.tensor_type.shape.dim]
    if list(output.shape) != expected:
        raise CheckFailed(f"onnxruntime's output has shape {list(output.shape)}, the graph says {expected}")
    if not np.all(np.isfinite(output)):
        raise CheckFailed("onnxruntime's output has NaN or infinite values")
    rms = float(np.sqrt(np.mean(np.square(output, dtype=np.float64))))
    name = session.get_outputs()[0].name
    return f"check ok: onnx.checker, onnxruntime {name} {list(output.shape)} rms {rms:.3g}"


class CheckFailed(Exception):
    pass


def write_model(model, size, seed, path, check):
    onnx_model, parameter_names = build_model(model, size, seed)
    data = onnx_model.SerializeToString()
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as error:
        fail(f"cannot write {path}: {error.strerror}")
    nodes = onnx_model.graph.node
    print(
        f"{model} {size}: opset {onnx_model.opset_import[0].version}, {len(nodes)} nodes, "
        f"{parameter_count(onnx_model, parameter_names)} parameters, "
        f"{multiply_adds(onnx_model) / 1e6:.2f} M multiply-adds, "
        f"{len(data) / 1e6:.2f} MB -> {path}"
    )
    print(f"{model} {size}: op types {' '.join(op_types(nodes))}")
    if check:
        try:
            print(f"{model} {size}: {self_test(onnx_model, model, size, seed)}")
        except CheckFailed as error:
            print(f"onnx-models.py: error: {model} {size}: check failed: {error}", file=sys.stderr)
            return False
    return True


def fail(message):
    print(f"onnx-models.py: error: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Examples: --model resnet50 --size full -o resnet50.onnx; --all DIR --check",
    )
    parser.add_argument("--model", choices=MODELS)
    parser.add_argument("--size", choices=SIZES, default="full")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights (default 0)")
    parser.add_argument("-o", "--output", metavar="OUT.onnx", help="where to write the model")
    parser.add_argument(
        "--all", metavar="DIR", help="write every model at both sizes to DIR/<model>-<size>.onnx"
    )
    parser.add_argument(
        "--check", action="store_true", help="check each model and run it once with onnxruntime"
    )
    args = parser.parse_args()
    if args.seed < 0:
        parser.error("--seed must be 0 or more")
    if args.all is not None:
        if args.model or args.output:
            parser.error("--all writes every model: give it without --model and -o")
        if not os.path.isdir(args.all):
            try:
                os.makedirs(args.all)
            except OSError as error:
                fail(f"cannot create {args.all}: {error.strerror}")
        jobs = [
            (model, size, os.path.join(args.all, f"{model}-{size}.onnx"))
            for model in MODELS
            for size in SIZES
        ]
    else:
        if not args.model or not args.output:
            parser.error("give --model and -o OUT.onnx (or --all DIR)")
        jobs = [(args.model, args.size, args.output)]
    ok = True
    for model, size, path in jobs:
        ok = write_model(model, size, args.seed, path, args.check) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
