"""Signal handlers retrace installs for a while (`retrace.replay.handlers`) give back what
was there, a handler installed outside Python included: by a program that embeds the
Python API, or by a tracer preloaded into retrace before Python started (apitrace's, for
SIGINT and SIGTERM: tests/gl/test_exit_paths.py), where a replay that had succeeded
ended in an internal error (exit 70)."""

from __future__ import annotations

import ctypes
import signal

import pytest

from retrace.replay import _guard
from retrace.replay.contain import supervise
from retrace.replay.handlers import handling


def handler_address(number: int) -> int | None:
    """The address of the function that handles signal `number` now (glibc's struct
    sigaction starts with it), as the C library holds it."""
    action = ctypes.create_string_buffer(_guard.action(number))
    return ctypes.c_void_p.from_buffer(action).value


@pytest.fixture
def foreign_sigterm():
    """SIGTERM handled by a C function that Python did not install (never called here:
    the test sends no SIGTERM)."""
    libc = ctypes.CDLL(None)
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.signal.restype = ctypes.c_void_p
    foreign = ctypes.cast(libc.abort, ctypes.c_void_p).value
    before = _guard.action(signal.SIGTERM)
    libc.signal(signal.SIGTERM, foreign)
    assert handler_address(signal.SIGTERM) == foreign
    yield foreign
    _guard.set_action(signal.SIGTERM, before)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_a_handler_installed_outside_python_is_put_back(foreign_sigterm):
    """Installed since Python started, which therefore records SIG_DFL."""
    with handling({signal.SIGTERM: lambda number, frame: None}):
        assert handler_address(signal.SIGTERM) != foreign_sigterm
    assert handler_address(signal.SIGTERM) == foreign_sigterm


def test_a_pythons_handler_is_put_back():
    def mine(number: int, frame: object) -> None:
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with handling({signal.SIGTERM: lambda number, frame: None}):
            assert signal.getsignal(signal.SIGTERM) is not mine
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


def _succeed() -> None:
    pass


def test_a_replay_child_supervised_under_a_foreign_handler_ends_well(foreign_sigterm, tmp_path):
    ending = supervise(_succeed, errors_to=str(tmp_path / "e"))
    assert (ending.code, ending.signal) == (0, 0)
    assert handler_address(signal.SIGTERM) == foreign_sigterm


def test_set_action_takes_only_what_action_returned():
    with pytest.raises(ValueError):
        _guard.set_action(signal.SIGTERM, b"short")
