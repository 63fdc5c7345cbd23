#!/usr/bin/env python3
"""Side by side: each convolution of a network as tilec ran it and as
onnxruntime ran it, from the two profiles.

    benchmarks/network_profile.py TILEC_PROFILE.txt ORT_PROFILE.txt

TILEC_PROFILE.txt is the output of `tilec-run NET.tile --backend=cpu
--profile`, ORT_PROFILE.txt that of `tools/onnx-reference.py MODEL.onnx
--time-runs N --profile` (tools/onnx-networks.sh with PROFILE=1 prints
both). onnxruntime renames the nodes it fuses (a Conv with its ReLU is
`<relu>_nchwc`), so the two are paired by order: the n-th kernel whose
label ends in `convN` or `downsample.N` with the n-th Conv node; the
script refuses profiles whose counts differ. Prints per pair the two
medians (ms) and tilec's time over onnxruntime's, then the sums of the
convolutions and of everything.
"""

import re
import sys

KERNEL = re.compile(r'^\s+\d+\s+(\S+)\s+([0-9.]+)\s+[0-9.]+%\s+\S+\s*$')
NODE = re.compile(r'^\s+\d+\s+(\S+)\s+(\S+)\s+([0-9.]+)\s*$')
CONV_LABEL = re.compile(r'(conv\d*|downsample\.\d+)$')


def rows(path, pattern):
    """The groups of every line of `path` that `pattern` matches."""
    with open(path) as f:
        return [m.groups() for m in map(pattern.match, f) if m]


def tilec_kernels(path):
    return [(label.strip('"'), float(ms)) for label, ms in rows(path, KERNEL)]


def ort_nodes(path):
    return [(name, op, float(ms)) for name, op, ms in rows(path, NODE)]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    kernels = tilec_kernels(sys.argv[1])
    nodes = ort_nodes(sys.argv[2])
    if not kernels or not nodes:
        sys.exit("network_profile.py: no profile rows in one of the files")
    convs = [(label, ms) for label, ms in kernels if CONV_LABEL.search(label)]
    ort_convs = [(name, ms) for name, op, ms in nodes if op == "Conv"]
    if len(convs) != len(ort_convs):
        sys.exit(f"network_profile.py: {len(convs)} tilec convolutions, {len(ort_convs)} onnxruntime Conv nodes")
    print(f"{'tilec kernel':<28} {'tilec ms':>9} {'onnxruntime node':<32} {'ort ms':>8} {'ratio':>6}")
    for (label, ms), (name, ort_ms) in zip(convs, ort_convs):
        print(f"{label:<28} {ms:>9.3f} {name:<32} {ort_ms:>8.3f} {ms / ort_ms:>6.2f}")
    tc, oc = sum(ms for _, ms in convs), sum(ms for _, ms in ort_convs)
    ta, oa = sum(ms for _, ms in kernels), sum(ms for _, _, ms in nodes)
    print(f"{'convolutions':<28} {tc:>9.3f} {'':<32} {oc:>8.3f} {tc / oc:>6.2f}")
    print(f"{'everything':<28} {ta:>9.3f} {'':<32} {oa:>8.3f} {ta / oa:>6.2f}")


if __name__ == "__main__":
    main()
