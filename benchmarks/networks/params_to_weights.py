#!/usr/bin/env python3
"""Makes a network's parameters after the first N into weights: `weight`
ops of the function, with seeded random values (uniform over the type for
integers, standard normal for floats) in a safetensors file beside the
output (`OUT.safetensors`, where `tilec-run` and `tilec-tune` look). The
int8 networks of generate.py take their weights as parameters, which a
runtime must treat as inputs; as weights they are the network's constants,
and `prepack` lays their staged copies out once (docs/scheduling.md).

    benchmarks/networks/params_to_weights.py IN.tile OUT.tile [--inputs 1] [--seed 0]

Only the function's signature changes, and one `weight` line per former
parameter at the top of its body; schedules and everything else stay.
"""
import argparse
import json
import re
import struct

import numpy as np

DTYPES = {"f32": ("F32", np.float32), "i8": ("I8", np.int8), "u8": ("U8", np.uint8), "i32": ("I32", np.int32)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--inputs", type=int, default=1, help="parameters that stay inputs (the first N)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    text = open(args.input).read()
    head = re.search(r"func @(\w+)\((.*?)\) ->(.*?)\{\n", text, re.S)
    if not head:
        raise SystemExit(f"{args.input}: no function")
    params = [p.strip() for p in head.group(2).split(",") if p.strip()]
    # Commas inside types (none in tensor<...>) would split wrongly: check.
    parsed = [re.fullmatch(r"%(\w+): tensor<((?:\d+x)*)(\w+)>", p) for p in params]
    if not all(parsed):
        raise SystemExit(f"{args.input}: parameters not of the form %name: tensor<AxBxT>")
    keep, weights = parsed[: args.inputs], parsed[args.inputs :]
    rng = np.random.default_rng(args.seed)
    header, blobs, lines, offset = {}, [], [], 0
    for m in weights:
        name, dims, elem = m.group(1), [int(d) for d in m.group(2).split("x") if d], m.group(3)
        if elem not in DTYPES:
            raise SystemExit(f"{args.input}: parameter %{name} is {elem}; this script writes {', '.join(DTYPES)}")
        tag, dtype = DTYPES[elem]
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            values = rng.integers(info.min, int(info.max) + 1, dims, dtype=dtype)
        else:
            values = rng.standard_normal(dims).astype(dtype)
        blob = values.tobytes()
        header[name] = {"dtype": tag, "shape": dims, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
        lines.append(f'  %{name} = weight "{name}" : tensor<{m.group(2)}{elem}>\n')
    signature = f"func @{head.group(1)}({', '.join(p.group(0) for p in keep)}) ->{head.group(3)}{{\n"
    out = text[: head.start()] + signature + "".join(lines) + text[head.end() :]
    with open(args.output, "w") as f:
        f.write(out)
    blob_header = json.dumps(header).encode()
    blob_header += b" " * (-len(blob_header) % 8)
    weights_path = re.sub(r"\.tile$", "", args.output) + ".safetensors"
    with open(weights_path, "wb") as f:
        f.write(struct.pack("<Q", len(blob_header)) + blob_header + b"".join(blobs))
    print(f"{args.output}: {len(keep)} input(s), {len(weights)} weight(s) in {weights_path} ({offset} bytes)")


if __name__ == "__main__":
    main()
