"""Reading ahead (`retrace/trace/ahead.py`): the source's items in order, then what it
raised; stopping early ends the thread and closes the source; on one core it is off."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Generator

import pytest

from retrace.errors import TraceError
from retrace.trace.ahead import ReadAhead, wanted


def test_items_in_order_then_the_error_after_them() -> None:
    def source() -> Generator[int, None, None]:
        yield from range(5)
        raise TraceError("a.trace", 7, "trace cut off in the middle of a call")

    got = []
    ahead = ReadAhead(source())
    with pytest.raises(TraceError, match="at byte 7"):
        for item in ahead:
            got.append(item)
    assert got == [0, 1, 2, 3, 4]
    assert not ahead._thread.is_alive()


def test_closing_early_ends_the_thread_and_closes_the_source() -> None:
    closed = []

    def source() -> Generator[int, None, None]:
        try:
            yield from range(1_000_000)
        finally:
            closed.append(True)

    ahead = ReadAhead(source())
    for item in ahead:
        if item == 3:
            break
    ahead.close()
    assert closed == [True] and not ahead._thread.is_alive()


@pytest.mark.parametrize("switch", ["0", "1"])
def test_the_switch_decides(switch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRACE_READ_AHEAD", switch)
    assert wanted() is (switch == "1")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity masks here")
def test_off_on_one_core() -> None:
    """`taskset -c 0 retrace ...`: one core to run on, nothing to gain from a thread."""
    env = {k: v for k, v in os.environ.items() if k != "RETRACE_READ_AHEAD"}
    code = (
        "import os; from retrace.trace.ahead import wanted; "
        "print(wanted()); os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "print(wanted())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.split() == [str(len(os.sched_getaffinity(0)) > 1), "False"]
