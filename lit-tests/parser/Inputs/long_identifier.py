"""Prints a tile function with an identifier of LENGTH characters in op position.

    long_identifier.py LENGTH [WORD]

The identifier is WORD (default `x`) repeated LENGTH times.

Used by errors-long-identifier.tile: an unknown op a megabyte long must be
reported like any other (no suggestion: no op is near it), in time linear
in its length.
"""
import sys

length = int(sys.argv[1])
char = sys.argv[2] if len(sys.argv) > 2 else "x"
pct = "%"
print("func @f(" + pct + "x: tensor<4xf32>) -> tensor<4xf32> {")
print("  " + pct + "y = compute (i: 4) reads(" + pct + "a = " + pct + "x[i]) -> tensor<4xf32>[i] {")
print("    " + pct + "0 = " + char * length + " " + pct + "a : f32")
print("    yield " + pct + "0 : f32")
print("  }")
print("  return " + pct + "y")
print("}")
