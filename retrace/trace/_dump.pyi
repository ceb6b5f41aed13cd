# The C extension retrace/trace/_dump.c: `retrace dump`'s text, formatted in C.
from typing import Any

def quote(text: bytes, /) -> bytes: ...
def format_calls(
    calls: Any,
    slots: Any,
    nodes: Any,
    pool: Any,
    backtraces: Any,
    chosen: Any,
    flags: Any,
    shown: tuple[int, int, int],
    hidden: int,
    shapes: dict[int, Any],
    enums: dict[int, Any],
    bitmasks: dict[int, Any],
    structs: dict[int, Any],
    frames: dict[int, Any],
    style: int,
    /,
) -> tuple[bytes, list[int]]: ...
def call_flags(calls: Any, by_sig: Any, stop: int, /) -> tuple[bytearray, int]: ...
