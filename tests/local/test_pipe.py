"""`trainop run`'s output when the reader of its pipe goes away."""

from __future__ import annotations

import os

from trainop.local.pipe import ReaderGone


def test_a_closed_pipe_is_reported_once_and_later_writes_go_nowhere() -> None:
    read_end, write_end = os.pipe()
    calls: list[str] = []
    guarded = ReaderGone(os.fdopen(write_end, "w"), lambda: calls.append("gone"))
    guarded.write("first\n")
    guarded.flush()
    assert os.read(read_end, 100) == b"first\n"
    os.close(read_end)

    guarded.write("second\n")
    guarded.flush()
    guarded.write("third\n")
    guarded.flush()

    assert calls == ["gone"]
    assert guarded.closed
    guarded.out.close()
