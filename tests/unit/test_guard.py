"""Scratch memory ends at a guard, and a write past it is blamed on retrace, not the driver.

The child of `contain.supervise` stands in for a driver writing through a pointer retrace
gave it: past the end of `_guard.scratch` (retrace sized it wrongly), or somewhere no
retrace memory is (the driver's own bug). Under pytest the fault goes on to the handler
installed before (faulthandler's, whose dump of the child's stack shows on stderr)."""

from __future__ import annotations

import ctypes
import signal

from retrace.replay import _guard
from retrace.replay.contain import crash_message, supervise


def test_scratch_is_writable_up_to_its_end_and_reused():
    first = _guard.scratch(100)
    ctypes.memset(first, 0xAB, 100)
    assert ctypes.string_at(first, 100) == b"\xab" * 100
    assert _guard.scratch(10) == first + 90  # the same arena, ending at the same guard
    big = _guard.scratch(1 << 20)
    ctypes.memset(big, 1, 1 << 20)
    assert _guard.scratch(0) == big + (1 << 20)  # nothing writable: the guard itself


def test_a_write_past_the_scratch_is_retraces_error(tmp_path):
    def overrun() -> None:
        address = _guard.scratch(64 * 64 * 16)
        ctypes.memset(address + 64 * 64 * 16 + 4096 * 16, 0, 16)  # a row of 4096 pixels on

    ending = supervise(overrun, errors_to=str(tmp_path / "err"))
    assert ending.signal == signal.SIGSEGV and ending.overrun == 4096 * 16
    message = crash_message(ending, str(tmp_path / "none.trace"))
    assert message.startswith("retrace's own error (a bug in retrace, please report it): ")
    assert "the driver wrote 65536 bytes past the end of the memory retrace gave it" in message
    assert "driver crashed" not in message


def test_any_other_crash_is_the_drivers(tmp_path):
    def wild_write() -> None:
        _guard.scratch(16)
        ctypes.memset(16, 0, 1)  # the first page: never mapped

    ending = supervise(wild_write, errors_to=str(tmp_path / "err"))
    assert ending.signal == signal.SIGSEGV and ending.overrun == -1
    message = crash_message(ending, str(tmp_path / "none.trace"))
    assert message.startswith("driver crashed (SIGSEGV)")
