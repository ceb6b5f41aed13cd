"""Types of `_guard.c`: scratch memory followed by a guard, the watch on the guard, and
signal actions saved and reinstated as they are."""

from typing_extensions import Buffer

OVERRUN_HIT: int
"""Which int64 of the watched buffer becomes 1 when a write faulted in the guard."""
OVERRUN_PAST: int
"""Which int64 holds how many bytes past the end of the scratch that write was."""
OVERRUN_WORDS: int
"""How many int64 `watch` writes."""

def scratch(n: int, /) -> int:
    """The address of `n` writable bytes ending where the guard begins (until the next call
    asks for more)."""

def watch(buffer: Buffer, /) -> None:
    """Record an overrun into the guard in `buffer` (a shared mapping) before the fault ends
    the process."""

def action(number: int, /) -> bytes:
    """The signal's action now (its struct sigaction), whoever installed it."""

def set_action(number: int, action: bytes, /) -> None:
    """Reinstate an action that `action` returned."""
