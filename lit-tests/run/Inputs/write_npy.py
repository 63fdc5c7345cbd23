#!/usr/bin/env python3
"""Writes a .npy file without numpy, for tests of tilec-run's input checks.

    write_npy.py PATH DESCR SHAPE [VALUES] [--fortran] [--header-only]

DESCR is a numpy type string (`<f4`, `<f8`, `<i4`, `|i1`, `<f2`, `>f4`);
SHAPE is `2x3` (or `scalar` for rank 0); VALUES is a comma-separated list
(default 0, 1, 2, ...). The header follows the .npy format version 1.0.
--header-only writes the header and no data: a file whose header claims
more than it holds (any shape, however large).
"""
import struct
import sys

args = [a for a in sys.argv[1:] if a not in ("--fortran", "--header-only")]
fortran = "--fortran" in sys.argv[1:]
header_only = "--header-only" in sys.argv[1:]
path, descr, shape_text = args[0], args[1], args[2]
shape = () if shape_text == "scalar" else tuple(int(d) for d in shape_text.split("x"))
count = 1
for d in shape:
    count *= d
values = [float(v) for v in args[3].split(",")] if len(args) > 3 else ([] if header_only else list(range(count)))
if not header_only and len(values) != count:
    sys.exit(f"write_npy.py: {len(values)} values for shape {shape}")

codes = {"f8": "d", "f4": "f", "f2": "e", "i4": "i", "i1": "b", "u1": "B"}
endian = "<" if descr[0] in "<|" else ">"
code = codes[descr[1:]]
if code in "ibB":
    values = [int(v) for v in values]
data = b"" if header_only else struct.pack(endian + code * count, *values)

shape_repr = "(%s)" % ("".join(f"{d}, " for d in shape).rstrip(" ") if len(shape) == 1 else ", ".join(str(d) for d in shape))
header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_repr)
# magic (6) + version (2) + header length (2) + header, padded to 64 bytes
# and ended by a newline.
total = 10 + len(header) + 1
header += " " * ((64 - total % 64) % 64) + "\n"
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + data)
