"""Types of the C scanner (`_scanner.c`): what its module, `Scanner` and `take()` export."""

from typing import TypeAlias, final

from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12

# Definitions as `take()` reports them (names are the trace's bytes; `model.Signatures.add`
# reads them): ("call", id, name, arg names), ("struct", id, name, member names),
# ("enum", id, ((name, value), ...)), ("bitmask", id, ((name, flag), ...)),
# ("frame", id, module, function, file name, line, offset).
_CallDef: TypeAlias = tuple[str, int, bytes, tuple[bytes, ...]]
_EnumDef: TypeAlias = tuple[str, int, tuple[tuple[bytes, int], ...]]
_FrameDef: TypeAlias = tuple[str, int, bytes | None, bytes | None, bytes | None, int, int]
_Definition: TypeAlias = _CallDef | _EnumDef | _FrameDef

CALL_FIELDS: tuple[tuple[str, str], ...]
"""(name, struct code) of each field of a call record (`CALL_FIELDS` in records.h)."""
NODE_FIELDS: tuple[tuple[str, str], ...]
"""(name, struct code) of each field of a value node (`NODE_FIELDS` in records.h)."""
CALL_SIZE: int
"""Bytes per call record (`CallRec` in records.h)."""
NODE_SIZE: int
"""Bytes per value node (`Node` in records.h)."""
RECORD_LAYOUT: int
"""Version of the records and definitions the scanner emits (records.h)."""

def calls_of(calls: Buffer, wanted: Buffer, /) -> list[int]:
    """Indices of the call records whose signature id has a non-zero byte in `wanted`."""

def calls_in(
    nos: Buffer,
    kinds: Buffer | None,
    flags: Buffer,
    intervals: Buffer,
    ranges: Buffer,
    asked: Buffer,
    invert: bool,
    /,
) -> None:
    """Set `asked[i]` to 1 where call i (number `nos[i]`, CallFlag bits `flags[kinds[i]]`,
    or `flags[i]`) is in the call set (`intervals`, `ranges`), or with `invert` is not."""

@final
class Scanner:
    """Incremental scanner of apitrace's event stream into flat records."""

    def __init__(self, version: int, offset: int = 0) -> None: ...
    def feed(self, data: Buffer, /) -> int:
        """Parse every whole event buffered; the number of calls ready."""
    def finish(self) -> int:
        """End of stream: pending calls are delivered as incomplete; the calls ready."""
    def take(self) -> tuple[bytes, bytes, bytes, bytes, bytes, list[_Definition]]:
        """(calls, slots, nodes, pool, backtraces, definitions); starts a new batch."""
    @property
    def error(self) -> tuple[int, str] | None:
        """(offset, message) of a format error, or None."""
    @property
    def offset(self) -> int:
        """Stream offset of the first unparsed byte."""
    @property
    def buffered(self) -> int:
        """Bytes buffered but not yet parsed."""
    @property
    def pending(self) -> int:
        """Calls entered but not yet left."""
