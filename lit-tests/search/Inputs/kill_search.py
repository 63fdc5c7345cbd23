"""Kills a measured search with SIGKILL and resumes it (records-kill.tile).

Usage: kill_search.py WORKLOAD RECORDS SCRATCH_DIR

Starts `tilec WORKLOAD --target=host --records=RECORDS` with a measured
markov search, waits until RECORDS holds at least two whole lines, and
kills the process with SIGKILL. Then checks that every line of RECORDS is
a whole record (a killed search loses at most the measurement it was
making), and runs the same search again with the same RECORDS: the
records of the killed run must be reused (the report says "(N from the
records)") and not appended again. Prints a summary for FileCheck; exits
with 1 and says why when a check fails.

It polls rather than sleeping for fixed times, with a generous deadline,
so a slow or loaded machine only makes it slower.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

# Enough candidates that the search is still measuring when the second
# record appears (each one is compiled with LLVM and run in a worker
# process: a tenth of a second or more), so the kill lands mid-search.
MEASURE = 24
PIPELINE = "builtin.module(search{strategy=markov budget=500 measure-top-k=%d final-rounds=0})" % MEASURE
DEADLINE_S = 300
FIELDS = {"workload", "target", "schedule", "sentence", "strategy", "latency", "gflops", "error", "threads", "version"}


def fail(why):
    print("FAILED: " + why)
    sys.exit(1)


def whole_lines(path):
    """The lines of `path` that end with a newline (none if it is missing)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    return data.split(b"\n")[:-1]


def check_records(path):
    """Every line of `path` is a whole record; returns them."""
    with open(path, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        fail("the records file ends inside a line: %r" % data[-80:])
    records = []
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            fail("line %d is not a record (%s): %r" % (number, e, line[:80]))
        if not isinstance(record, dict) or set(record) != FIELDS:
            fail("line %d does not have the fields of a record: %r" % (number, line[:80]))
        records.append(record)
    return records


def main():
    workload, records_path, scratch = sys.argv[1:4]
    tilec = shutil.which("tilec")
    if tilec is None:
        fail("tilec is not on PATH")
    os.makedirs(scratch, exist_ok=True)
    # The evaluator's temporary folder of the killed run stays behind: keep
    # it in the test's own folder.
    env = dict(os.environ, TMPDIR=scratch)
    command = [tilec, workload, "--target=host", "--records=" + records_path, "--search-report", "--pass-pipeline=" + PIPELINE]

    with open(os.path.join(scratch, "killed.stderr"), "wb") as err:
        search = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=env)
        deadline = time.monotonic() + DEADLINE_S
        while len(whole_lines(records_path)) < 2:
            if search.poll() is not None:
                fail("the search ended (status %d) before it wrote two records; see %s" % (search.returncode, err.name))
            if time.monotonic() > deadline:
                search.kill()
                search.wait()
                fail("no two records after %d s" % DEADLINE_S)
            time.sleep(0.01)
        search.send_signal(signal.SIGKILL)
        search.wait()
    if search.returncode != -signal.SIGKILL:
        fail("the search ended by itself (status %d) before the kill: raise MEASURE" % search.returncode)

    killed = check_records(records_path)
    with open(records_path, "rb") as f:
        before = f.read()
    timed = sum(1 for r in killed if r["latency"] is not None)
    if len(killed) >= MEASURE:
        fail("the killed search had measured everything (%d records)" % len(killed))
    print("killed with SIGKILL after %d whole records, %d of them timed" % (len(killed), timed))

    # The same search again: the timed candidates come from the records.
    again = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=DEADLINE_S)
    report = again.stderr.decode("utf-8", "replace")
    if again.returncode != 0:
        fail("the resumed search failed (status %d):\n%s" % (again.returncode, report))
    if "warning" in report:
        fail("the resumed search warned about the records file:\n" + report)
    match = re.search(r"measured: (\d+)(?: \(\d+ failed\))?(?: \((\d+) from the records\))?", report)
    if match is None:
        fail("no `measured:` line in the report:\n" + report)
    measured, resumed = int(match.group(1)), int(match.group(2) or 0)
    if measured != MEASURE or resumed != timed:
        fail("expected %d measured, %d of them from the records; the report says:\n%s" % (MEASURE, timed, report))
    after = check_records(records_path)
    with open(records_path, "rb") as f:
        if not f.read().startswith(before):
            fail("the resumed search changed the records the killed one wrote")
    appended = len(after) - len(killed)
    if appended != MEASURE - timed:
        fail("the resumed search appended %d records, expected %d (the %d not in the file)" % (appended, MEASURE - timed, MEASURE - timed))
    print("resumed: %d of %d from the records, %d measured and appended" % (resumed, measured, appended))


if __name__ == "__main__":
    main()
