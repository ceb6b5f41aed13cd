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

import math
from collections.abc import Iterable, Iterator
from typing import IO

from retrace.trace.callset import CallSet
from retrace.trace.flags import CallFlag, adjust_flags
from retrace.trace.model import CallBatch, FunctionSig, NodeLists, Signatures, Tag
from retrace.trace.reader import TraceReader

_DUMP_TOLERANCE = 100
_STRUCT = int(Tag.STRUCT)
# plain ints: IntFlag arithmetic is too slow for a loop run once per call
_VERBOSE, _FAKE, _INCOMPLETE, _END_FRAME = (
    int(CallFlag.VERBOSE),
    int(CallFlag.FAKE),
    int(CallFlag.INCOMPLETE),
    int(CallFlag.END_FRAME),
)  # apitrace dump reads this many calls past the last one asked for


def _real(d: float, precision: int) -> str:
    """A float as a C++ stream prints it with the given precision."""
    if d != d:  # NaN: glibc prints its sign
        return "-nan" if math.copysign(1.0, d) < 0 else "nan"
    return f"{d:.{precision}g}"


def quote(codes: Iterable[int], wide: bool = False) -> str:
    """A C string literal as apitrace writes it (stopping at the first NUL)."""
    out = ['"']
    for c in codes:
        if c == 0:
            break
        if not wide and c >= 0x80:
            c |= 0xFFFFFF00  # apitrace reads plain char, which is signed
        if c == 0x22:
            out.append('\\"')
        elif c == 0x5C:
            out.append("\\\\")
        elif 0x20 <= c <= 0x7E or c == 0x09 or c == 0x0A:
            out.append(chr(c))
        elif c == 0x0D:
            continue
        else:
            low, mid = c & 7, (c >> 3) & 7
            # apitrace derives its high digit with the same shift as the middle one
            out.append("\\" + (f"{mid}{mid}" if mid else "") + str(low))
    out.append('"')
    return "".join(out)


class _Formatter:
    """Formats the values of one batch: each tag has its own small function,
    so formatting a value is one list lookup and one call."""

    def __init__(self, batch: CallBatch, sigs: Signatures) -> None:
        self.n = n = NodeLists(batch)
        self.sigs = sigs
        self._by_tag = [
            lambda i: "NULL",
            lambda i: "false",
            lambda i: "true",
            lambda i: str(n.i[i]),
            lambda i: str(n.u[i]),
            lambda i: _real(n.d[i], 7),
            lambda i: _real(n.d[i], 16),
            lambda i: quote(n.bytes(i)),
            lambda i: f"blob({n.aux[i]})",
            self._enum,
            self._bitmask,
            self._array,
            lambda i: "{" + ", ".join(self._members(i)) + "}",
            lambda i: f"{n.u[i]:#x}",
            lambda i: self.value(i + 1),  # repr: the human-readable half
            lambda i: "L" + quote(n.wide(i), wide=True),
        ]

    def value(self, i: int) -> str:
        return self._by_tag[self.n.tags[i]](i)

    def _enum(self, i: int) -> str:
        value = self.n.i[i]
        name = self.sigs.enums[self.n.aux[i]].by_value.get(value)
        return name if name is not None else str(value)

    def _array(self, i: int) -> str:
        count = self.n.aux[i]
        if count == 1:
            return "&" + self.value(i + 1)
        return "{" + ", ".join(self.value(c) for c in self.n.children(i, count)) + "}"

    def _members(self, i: int) -> Iterator[str]:
        sig = self.sigs.structs[self.n.aux[i]]
        for name, child in zip(
            sig.member_names, self.n.children(i, len(sig.member_names)), strict=True
        ):
            if name:
                yield f"{name} = {self.value(child)}"
            elif self.n.tags[child] == _STRUCT:  # anonymous struct: its members inline
                yield from self._members(child)

    def _bitmask(self, i: int) -> str:
        value = self.n.u[i]
        parts = []
        for name, flag in self.sigs.bitmasks[self.n.aux[i]].flags:
            if (flag and value & flag == flag) or (not flag and value == 0):
                parts.append(name)
                value &= ~flag
            if value == 0:
                break
        if value or not parts:
            parts.append(f"{value:#x}")
        return " | ".join(parts)


def _frame_line(frame) -> str:
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


def dump_calls(
    reader: TraceReader, calls: CallSet | None = None, verbose: bool = False
) -> Iterator[str]:
    """Yield the dump text of a trace, one call (with its trailing newlines) at a time."""
    sigs = reader.signatures
    for key, value in sorted(
        reader.properties.items(), key=lambda kv: kv[0].encode("utf-8", "surrogateescape")
    ):
        yield f"// {key} = {quote(value.encode('utf-8', 'surrogateescape'))}\n"
    stop = None if calls is None else calls.last + _DUMP_TOLERANCE
    shapes: dict[int, tuple[str, list[str], int, bool]] = {}
    for batch in reader.batches():
        fmt = _Formatter(batch, sigs)
        slots = batch.slots.tolist()
        bts = batch.backtraces.tolist()
        for rec in batch.calls.tolist():
            no, _, sig_id, _, rflags, node_start, _, slot_start, nargs, ret, bt_start, bt_count = (
                rec
            )
            if stop is not None and no > stop:
                return
            shape = shapes.get(sig_id)
            if shape is None:
                shape = shapes[sig_id] = _shape(sigs.functions[sig_id])
            opening, arg_prefixes, flags, is_get_error = shape
            flags |= rflags
            if is_get_error and ret >= 0:
                flags = adjust_flags("glGetError", flags, fmt.n.i[node_start + ret])
            if calls is not None and not calls.contains(no, flags):
                continue
            if flags & _VERBOSE and not verbose:
                continue
            args = [
                prefix + (fmt.value(node_start + slot) if slot >= 0 else "?")
                for prefix, slot in zip(
                    arg_prefixes, slots[slot_start : slot_start + nargs], strict=True
                )
            ]
            line = f"{no} {opening}{', '.join(args)})"
            if ret >= 0:
                line += " = " + fmt.value(node_start + ret)
            if flags & (_FAKE | _INCOMPLETE):
                line += " //"
                if flags & _FAKE:
                    line += " fake"
                if flags & _INCOMPLETE:
                    line += " incomplete"
            line += "\n"
            if bt_count:
                line += "Backtrace:\n"
                for fid in bts[bt_start : bt_start + bt_count]:
                    line += _frame_line(sigs.frames[fid]) + "\n"
            if flags & _END_FRAME:
                line += "\n"
            yield line


def _shape(sig: FunctionSig) -> tuple[str, list[str], int, bool]:
    """What every call of a signature shares: "name(", "arg = " prefixes, flags, glGetError-ness."""
    is_get_error = sig.name == "glGetError" and not sig.arg_names
    return sig.name + "(", [f"{a} = " for a in sig.arg_names], int(sig.flags), is_get_error


def write_dump(
    reader: TraceReader, out: IO[bytes], calls: CallSet | None = None, verbose: bool = False
) -> None:
    """Write the dump to a binary stream, keeping every byte of names and strings."""
    buffer: list[str] = []
    try:
        for text in dump_calls(reader, calls, verbose):
            buffer.append(text)
            if len(buffer) >= 4096:
                out.write("".join(buffer).encode("utf-8", "surrogateescape"))
                buffer.clear()
    finally:  # a damaged trace raises after its last intact call: print those first
        out.write("".join(buffer).encode("utf-8", "surrogateescape"))
