"""Independent check of split-copy-run.tile's @pack_offset: out[t, a, b, c]
is B[4t + 4a + c, 8 + b], or the pad value 7 past B's 10 rows."""
import sys

import numpy as np

folder = sys.argv[1]
B = np.load(f"{folder}/inputs/B.npy")
out = np.load(f"{folder}/out.npy")
expected = np.full((3, 2, 8, 4), 7, dtype=np.uint8)
for t in range(3):
    for a in range(2):
        for b in range(8):
            for c in range(4):
                row = 4 * t + 4 * a + c
                if row < B.shape[0]:
                    expected[t, a, b, c] = B[row, 8 + b]
print("split copy matches numpy" if (out == expected).all() else f"MISMATCH at {np.argwhere(out != expected)[:5].tolist()}")
