"""Writes a safetensors file of f32 tensors for the weights tests, with the
standard library only: `write-safetensors.py OUT NAME=DIMS[:START:STEP]...`
(e.g. `s=4:1:0.5` is [1, 1.5, 2, 2.5]; DIMS like 2x3). The format: an
8-byte little-endian header length, a JSON header of dtype, shape and byte
range per tensor, then the data."""
import json
import struct
import sys

out, specs = sys.argv[1], sys.argv[2:]
header, data = {}, b""
for spec in specs:
    name, rest = spec.split("=", 1)
    parts = rest.split(":")
    shape = [int(d) for d in parts[0].split("x")]
    start, step = (float(parts[1]), float(parts[2])) if len(parts) == 3 else (0.0, 1.0)
    n = 1
    for d in shape:
        n *= d
    blob = struct.pack(f"<{n}f", *[start + i * step for i in range(n)])
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
    data += blob
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
