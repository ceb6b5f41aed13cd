"""Traced values read as the types a replayed call needs.

The reader delivers whatever the trace holds (`NodeLists.value`): a damaged
trace can put an array where a number belongs, or a string where a handle
does. The compiler and the window-system readers take every value through
these functions, so a mismatch is a `BadValue` that the compiler reports as
damage at that call, never a TypeError from deep inside the replay.
"""

from __future__ import annotations

import math
from typing import Any


class BadValue(Exception):
    """A traced value of the wrong kind for the call it is in; the message says what."""


def kind(value: Any) -> str:
    """What a traced value is, for messages."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, tuple):
        return "a struct"
    if isinstance(value, (bytes, str)):
        return "a string or blob"
    if isinstance(value, float):
        return f"the number {value}"
    return f"a {type(value).__name__}"


def number(value: Any) -> int | float:
    """A number argument: None (an argument the trace left out) passes 0."""
    if value is None:
        return 0
    if isinstance(value, (int, float)):
        return value
    raise BadValue(f"{kind(value)} where a number belongs")


def integer(value: Any) -> int:
    """An integer argument (a name, a handle, a size): None passes 0, a float is truncated."""
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    if value is None or isinstance(value, int):
        return int(value or 0)
    raise BadValue(f"{kind(value)} where an integer belongs")


def integers(value: Any) -> list[int]:
    """An attribute list or array of integers; None (a NULL list) is empty."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadValue(f"{kind(value)} where an array of integers belongs")
    return [integer(v) for v in value]


def handle(value: Any) -> int | tuple[str, int]:
    """A hashable identity for a traced window-system handle: a pointer or integer, or the
    visual id of an XVisualInfo struct; an array of one stands for its element."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, tuple) and len(value) > 1:
        return ("visualid", integer(value[1]))  # XVisualInfo: {visual, visualid, ...}
    return integer(value)
