"""Prints a tile function whose read index is wrapped in DEPTH parentheses.

Used by errors-nesting.tile: brackets may nest 200 deep (counting the
function's `{`, the `reads(` and the index `[`), and deeper input must get a
diagnostic rather than overflow the parser's stack.
"""
import sys

depth = int(sys.argv[1])
pct = "%"
print("func @deep(" + pct + "x: tensor<4xf32>) -> tensor<4xf32> {")
print("  " + pct + "y = compute (i: 4) reads(" + pct + "a = " + pct + "x["
      + "(" * depth + "i" + ")" * depth + "]) -> tensor<4xf32>[i] {")
print("    yield " + pct + "a : f32")
print("  }")
print("  return " + pct + "y")
print("}")
