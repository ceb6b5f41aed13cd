"""Text dump of a trace, line for line identical to ``apitrace dump --color=never``.

Identity matters because users diff dumps from the two tools; so this module
reproduces apitrace's formatting exactly, quirks included: C++ stream float
precision, strings cut at their first NUL, octal escapes whose middle digit is
repeated, carriage returns dropped, one-element arrays shown as ``&value``,
and a blank line after each frame.

Not reproduced: apitrace names Direct3D GUID structs from its own table; such
structs are printed member by member here (GL traces have none).
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Iterator
from typing import IO

from retrace.trace import _dump
from retrace.trace._scanner import calls_of
from retrace.trace.callset import UNBOUNDED, CallSet
from retrace.trace.flags import CallFlag, adjust_flags
from retrace.trace.model import NODES, CallBatch, Signatures, StackFrame
from retrace.trace.reader import TraceReader

_DUMP_TOLERANCE = 100  # apitrace dump reads this many calls past the last one asked for
_SHOWN = (int(CallFlag.FAKE), int(CallFlag.INCOMPLETE), int(CallFlag.END_FRAME))  # in the text
_VERBOSE = int(CallFlag.VERBOSE)


class Style(enum.IntFlag):
    """apitrace dump's options that change the text (the bits `_dump.format_calls` takes),
    and whether arguments are named."""

    CALL_NOS = 1  # --call-nos (default yes)
    THREAD_IDS = 2  # --thread-ids
    ONELINE = 4  # --multiline=no: newlines in strings as \n; no backtraces, no blank lines
    BLOBS = 8  # --blobs: blobs into blob_call<N>.bin files, their names in the text
    ARG_NAMES = 16  # --arg-names (default yes); the Python side's


DEFAULT_STYLE = Style.CALL_NOS | Style.ARG_NAMES  # apitrace dump's


def _text(name: str) -> bytes:
    """A name as the trace spelled it: every byte kept."""
    return name.encode("utf-8", "surrogateescape")


class _Tables:
    """The signatures as the C formatter reads them (text as bytes, keyed by id), kept in
    step with the reader's as definitions arrive."""

    def __init__(self, sigs: Signatures, arg_names: bool = True) -> None:
        self.sigs = sigs
        self.arg_names = arg_names
        self.shapes: dict[int, tuple[bytes, tuple[bytes, ...]]] = {}
        self.enums: dict[int, dict[int, bytes]] = {}
        self.bitmasks: dict[int, tuple[tuple[bytes, int], ...]] = {}
        self.structs: dict[int, tuple[bytes, ...]] = {}
        self.frames: dict[int, bytes] = {}
        self.flags = array("Q")  # by function id: the flags its name implies
        self.get_error = bytearray()  # by function id: 1 for a glGetError signature

    def update(self) -> None:
        sigs = self.sigs
        if len(self.shapes) != len(sigs.functions):
            size = max(sigs.functions) + 1
            self.flags = array("Q", bytes(8 * size))
            self.get_error = bytearray(size)
            for sid, f in sigs.functions.items():
                self.shapes[sid] = (
                    _text(f.name + "("),
                    tuple(_text(f"{a} = " if self.arg_names else "") for a in f.arg_names),
                )
                self.flags[sid] = f.flags
                self.get_error[sid] = f.name == "glGetError"
        for sid, e in sigs.enums.items():
            if sid not in self.enums:
                self.enums[sid] = {v: _text(n) for v, n in e.by_value.items()}
        for sid, b in sigs.bitmasks.items():
            if sid not in self.bitmasks:
                self.bitmasks[sid] = tuple((_text(n), v) for n, v in b.flags)
        for sid, s in sigs.structs.items():
            if sid not in self.structs:
                self.structs[sid] = tuple(map(_text, s.member_names))
        for sid, frame in sigs.frames.items():
            if sid not in self.frames:
                self.frames[sid] = _text(_frame_line(frame))


def _frame_line(frame: StackFrame) -> str:
    line = frame.module if frame.module is not None else "?"
    if frame.function is not None:
        line += ": " + frame.function
    if frame.offset >= 0:
        line += f"+{frame.offset:#x}"
    if frame.filename is not None:
        line += ": " + frame.filename
        if frame.line >= 0:
            line += f":{frame.line}"
    return line


def _properties(reader: TraceReader, style: Style = DEFAULT_STYLE) -> bytes:
    """The ``// key = "value"`` lines apitrace dump starts with, sorted by key's bytes."""
    lines = []
    for key, value in sorted(reader.properties.items(), key=lambda kv: _text(kv[0])):
        quoted = _dump.quote(_text(value))  # its only newlines are the value's
        if Style.ONELINE in style:
            quoted = quoted.replace(b"\n", b"\\n")
        lines.append(b"// " + _text(key) + b" = " + quoted + b"\n")
    return b"".join(lines)


def _dumped(
    reader: TraceReader, calls: CallSet | None, verbose: bool, style: Style = DEFAULT_STYLE
) -> Iterator[tuple[bytes, list[int]]]:
    """Per batch: the text of the calls it prints, and the offset where each call's ends.

    Which calls print is decided here, a batch at a time; the text is made in C.
    """
    tables = _Tables(reader.signatures, Style.ARG_NAMES in style)
    stop = UNBOUNDED if calls is None else min(calls.last + _DUMP_TOLERANCE, UNBOUNDED)
    for batch in reader.batches():
        tables.update()
        flags, beyond = _dump.call_flags(batch.calls, tables.flags, stop)
        _adjust_get_errors(batch, tables, flags)
        count = len(batch)
        if calls is None:
            chosen = bytearray(b"\x01") * count
        else:
            chosen = bytearray(count)
            calls.mark(chosen, batch.column("no").tobytes(), flags)
        chosen[beyond:] = bytes(count - beyond)
        t = tables
        yield _dump.format_calls(
            batch.calls,
            batch.slots,
            batch.nodes,
            batch.pool,
            batch.backtraces,
            chosen,
            flags,
            _SHOWN,
            0 if verbose else _VERBOSE,
            t.shapes,
            t.enums,
            t.bitmasks,
            t.structs,
            t.frames,
            int(style & ~Style.ARG_NAMES),
        )
        if beyond < count:
            return


def _adjust_get_errors(batch: CallBatch, tables: _Tables, flags: bytearray) -> None:
    """apitrace hides a glGetError that returned GL_NO_ERROR: its flags, adjusted in `flags`
    (uint64 per call), as apitrace's parser adjusts them."""
    errors = calls_of(batch.calls, tables.get_error)
    if not errors:
        return
    by_call = memoryview(flags).cast("Q")
    sig, node_start, ret = (batch.column(name) for name in ("sig", "node_start", "ret"))
    values = NODES.column(batch.nodes, "v", "q")
    for k in errors:
        if ret[k] < 0:
            continue
        f = tables.sigs.functions[sig[k]]
        returned = values[node_start[k] + ret[k]]
        by_call[k] = adjust_flags(f.name, CallFlag(by_call[k]), returned, num_args=len(f.arg_names))


def dump_calls(
    reader: TraceReader, calls: CallSet | None = None, verbose: bool = False
) -> Iterator[str]:
    """Yield the dump text of a trace: the property lines, then one call (with its trailing
    newlines) at a time."""
    properties = _properties(reader)
    if properties:
        yield properties.decode("utf-8", "surrogateescape")
    for text, ends in _dumped(reader, calls, verbose):
        start = 0
        for end in ends:
            yield text[start:end].decode("utf-8", "surrogateescape")
            start = end


def write_dump(
    reader: TraceReader,
    out: IO[bytes],
    calls: CallSet | None = None,
    verbose: bool = False,
    style: Style = DEFAULT_STYLE,
) -> None:
    """Write the dump to a binary stream, keeping every byte of names and strings; a
    damaged trace raises after its last intact call is written."""
    _write_all(out, _properties(reader, style))
    for text, _ in _dumped(reader, calls, verbose, style):
        _write_all(out, text)


def _write_all(out: IO[bytes], data: bytes) -> None:
    """Write all of `data`: a large write to a pipe whose reader leaves (or to a full disk)
    can return short without an error, which the next write then raises."""
    view = memoryview(data)
    while view:
        view = view[out.write(view) :]
