"""Writes a safetensors file of tensors for the weights tests, with the
standard library only: `write-safetensors.py OUT NAME=DIMS[:START:STEP[:DTYPE]]...`
(e.g. `s=4:1:0.5` is [1, 1.5, 2, 2.5]; DIMS like 2x3). DTYPE is F32 (the
default), I8 or U8; integers are the values truncated and wrapped into the
type's range (`k=4:0:37:I8` is [0, 37, 74, 111]; the next would be -108).
The format: an 8-byte little-endian header length, a JSON header of dtype,
shape and byte range per tensor, then the data."""
import json
import struct
import sys

out, specs = sys.argv[1], sys.argv[2:]
header, data = {}, b""
for spec in specs:
    name, rest = spec.split("=", 1)
    parts = rest.split(":")
    shape = [int(d) for d in parts[0].split("x")]
    start, step = (float(parts[1]), float(parts[2])) if len(parts) >= 3 else (0.0, 1.0)
    dtype = parts[3] if len(parts) == 4 else "F32"
    n = 1
    for d in shape:
        n *= d
    values = [start + i * step for i in range(n)]
    if dtype == "F32":
        blob = struct.pack(f"<{n}f", *values)
    elif dtype in ("I8", "U8"):
        wrapped = [int(v) % 256 for v in values]
        blob = struct.pack(f"<{n}b", *[w - 256 if w > 127 else w for w in wrapped]) if dtype == "I8" else bytes(wrapped)
    else:
        sys.exit(f"write-safetensors.py: unknown dtype {dtype} (F32, I8, U8)")
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
    data += blob
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
