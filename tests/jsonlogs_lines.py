"""Reading a log as docs/json-logs.md describes it: every line a JSON record, except what code that is
not Python writes, which passes through unchanged.

A record is a line that starts with `{`, and it must parse as a JSON object. The tests accept, beside the
records, exactly the native forms docs/json-logs.md names:
* glog's, which torch's C++ core (c10d, gloo's wrappers) and TensorFlow's C++ write:
  `[W1201 14:23:24.616591257 socket.cpp:207] ...` (severity letter, month and day, time, source
  location in brackets), told apart by that prefix;
* in an MPI launcher's log only (`trace=True`), the shell's command trace (`set -x`) that kubexec.sh,
  as Kubeflow's script does, writes for every rank host it starts. mpirun starts them at once and the
  shell writes a trace line in pieces, so two traces interleave: a line may hold pieces of both, or be
  empty. There any line that does not start with `{` is taken as trace, and the tests of that log
  check instead that every rank's Python lines arrived as records, so nothing of Python can hide there.
Any other line fails, so a Python line that escaped the records cannot pass as native output.
"""

from __future__ import annotations

import json
import re

from trainop.jsontypes import Json

GLOG = re.compile(r"^\[[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ [^\]]+\] ")
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
# Every record carries these (docs/json-logs.md, "A record"); the rest only when set.
ALWAYS = frozenset({"time", "level", "logger", "message", "job", "namespace", "replica_type", "pod", "node"})


def split_log(text: str, trace: bool = False) -> tuple[list[Json], list[str]]:
    """The records and the native lines of a log (with `trace`, an MPI launcher's, whose kubexec.sh
    traces may interleave); fails on a line that is neither."""
    records, native = [], []
    for line in text.splitlines():
        if not line.startswith("{"):
            if not (trace or GLOG.match(line)):
                raise AssertionError(f"neither a JSON record nor native (glog) output: {line!r}")
            native.append(line)
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise AssertionError(f"a damaged JSON record: {line!r}") from None
        assert isinstance(record, dict), line
        records.append(record)
    return records, native


def assert_documented(record: Json) -> None:
    """The fields every record has, in their documented form."""
    assert record.keys() >= ALWAYS, record
    assert TIME.match(record["time"]), record
    assert record["level"] in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}, record
    for number in ("replica_index", "rank", "local_rank", "world_size"):
        assert number not in record or isinstance(record[number], int), record
