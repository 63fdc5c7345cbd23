"""Checks the tuning curves of a `tilec-bench --curve --json` document
(lit-tests/bench/curve.tile): every point's fields, measurements numbered
from 1, time and best-so-far never decreasing, the best-so-far the largest
first timing so far, and the summary fields agreeing with the points.
Prints one line per curve; exits 1 with the first violation."""

import json
import sys


def fail(why):
    print("check_curves: " + why)
    sys.exit(1)


doc = json.load(open(sys.argv[1]))
if not doc.get("curves"):
    fail("no curves")
for c in doc["curves"]:
    points = c["points"]
    name = "%s/%s" % (c["workload"], c["strategy"])
    if not points:
        fail(name + ": no points")
    best = None
    last_seconds = 0.0
    for i, p in enumerate(points):
        if p["measurement"] != i + 1:
            fail("%s: point %d is measurement %s" % (name, i, p["measurement"]))
        if p["seconds"] < last_seconds:
            fail("%s: time goes back at measurement %d" % (name, i + 1))
        last_seconds = p["seconds"]
        if p["gflops"] is not None and not p["retimed"]:
            best = p["gflops"] if best is None else max(best, p["gflops"])
        if p["best_gflops"] != best:
            fail("%s: best %s at measurement %d, expected %s" % (name, p["best_gflops"], i + 1, best))
    bests = [p["best_gflops"] for p in points if p["best_gflops"] is not None]
    if any(b < a for a, b in zip(bests, bests[1:])):
        fail(name + ": the best so far decreases")
    if c["measurements"] != len(points):
        fail(name + ": measurements does not count the points")
    if c["failures"] != sum(p["gflops"] is None for p in points):
        fail(name + ": failures does not count the failed points")
    if c["best_gflops"] != best:
        fail(name + ": best_gflops is not the last best")
    first_95 = next(p for p in points if p["best_gflops"] is not None and p["best_gflops"] >= 0.95 * best)
    if (c["measurements_to_95"], c["seconds_to_95"]) != (first_95["measurement"], first_95["seconds"]):
        fail(name + ": the 95% point is not the first to reach 95% of the best")
    if not (c["total_s"] >= points[-1]["seconds"] > 0):
        fail(name + ": total_s is before the last measurement")
    print("%s: %d measurements, best never decreases" % (name, len(points)))
