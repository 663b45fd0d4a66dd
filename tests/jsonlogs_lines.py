"""Reading a log as docs/json-logs.md describes it: every line a JSON record, except what code that is
not Python writes, which passes through unchanged.

The tests accept exactly the two native forms docs/json-logs.md names, told apart by their prefix:
* glog's, which torch's C++ core (c10d, gloo's wrappers) and TensorFlow's C++ write:
  `[W1201 14:23:24.616591257 socket.cpp:207] ...` (severity letter, month and day, time, source
  location in brackets);
* the shell's command trace (`set -x`: `+ ` once per nesting level), which the MPI launcher's
  kubexec.sh writes for every rank host it starts, as Kubeflow's script does.
Any other line that is not a JSON object fails the test, so a Python line that escaped the records
cannot hide as native output.
"""

from __future__ import annotations

import json
import re
from typing import Any

Json = dict[str, Any]

GLOG = re.compile(r"^\[[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ [^\]]+\] ")
SHELL_TRACE = re.compile(r"^\++ ")
NATIVE = (GLOG, SHELL_TRACE)
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
# Every record carries these (docs/json-logs.md, "A record"); the rest only when set.
ALWAYS = frozenset({"time", "level", "logger", "message", "job", "namespace", "replica_type", "pod", "node"})


def split_log(text: str) -> tuple[list[Json], list[str]]:
    """The records and the native lines of a log; fails on a line that is neither."""
    records, native = [], []
    for line in text.splitlines():
        if any(form.match(line) for form in NATIVE):
            native.append(line)
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise AssertionError(f"neither a JSON record nor native (glog) output: {line!r}") from None
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
