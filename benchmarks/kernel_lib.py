"""Loads a shared library made by `tilec --emit=lib` for calling from
Python: its call metadata `LIB.json` (docs/codegen.md, "C ABI") gives per
kernel its symbol, parallel trip count and parameter shapes. Shared by
`profile.py` and `interleave.py`."""

import ctypes
import json
import threading

import numpy as np

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32, "i8": np.int8, "u8": np.uint8}


def kernel_calls(path):
    """The library's kernels as (function, argument pointers, parallel
    trip) in order, on buffers shared by value number and filled with
    seeded random numbers; and the buffers, which
    must outlive the calls. Prepack kernels (`"prepack": true`, made by
    the `prepack` pass: weights laid out once) are called here, once, and
    left out of the calls, as tilec's runtime leaves them out of its
    timing."""
    meta = json.load(open(path + ".json"))
    lib = ctypes.CDLL(path if "/" in path else "./" + path)
    rng = np.random.default_rng(0)
    buffers = {}
    calls = []
    for k in meta["kernels"]:
        ptrs = []
        for p in k["params"]:
            if p["value"] not in buffers:
                if p["elem"] == "bf16":
                    # numpy has no bf16: the upper halves of f32 normals.
                    a = (rng.standard_normal(p["shape"]).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
                else:
                    dtype = DTYPES[p["elem"]]
                    if np.issubdtype(dtype, np.floating):
                        a = rng.standard_normal(p["shape"]).astype(dtype)
                    else:
                        # Uniform over the type, as tilec's inputs are. (Not
                        # zeros: numpy maps a large zeroed array to the
                        # kernel's one zero page until written, and a kernel
                        # reading it would find it in cache; until
                        # 2026-12-06 integer inputs were such zeros.)
                        info = np.iinfo(dtype)
                        a = rng.integers(info.min, int(info.max) + 1, p["shape"], dtype=dtype)
                buffers[p["value"]] = np.ascontiguousarray(a)
            ptrs.append(buffers[p["value"]].ctypes.data_as(ctypes.c_void_p))
        fn = getattr(lib, k["symbol"])
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p] * len(ptrs) + [ctypes.c_int64, ctypes.c_int64]
        calls.append((fn, ptrs, k["parallel_trip"], k.get("prepack", False)))
    # Prepack kernels read only parameters, so they can run first.
    for fn, ptrs, trip, prepack in calls:
        if prepack:
            fn(*ptrs, 0, trip)
    return [(fn, ptrs, trip) for fn, ptrs, trip, prepack in calls if not prepack], buffers


# A kernel keeps its packed copies and accumulator tiles on its stack
# (`stack_bytes` in the metadata: 8 MiB for a GEMM whose B is packed per
# core tile, more than a process's main thread gets), so the scripts run on
# a thread with room to spare; the pages are only reserved.
KERNEL_STACK_BYTES = 1 << 30


def run_on_kernel_stack(fn):
    """Runs `fn()` on a thread whose stack has KERNEL_STACK_BYTES, and
    returns its result (or raises its exception)."""
    out = {}

    def body():
        try:
            out["value"] = fn()
        except BaseException as e:  # re-raised in the caller's thread
            out["error"] = e

    threading.stack_size(KERNEL_STACK_BYTES)
    t = threading.Thread(target=body)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out.get("value")
