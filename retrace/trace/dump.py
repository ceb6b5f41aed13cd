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
import struct
from collections.abc import Iterator
from typing import IO

import numpy as np

from retrace.trace.callset import CallSet
from retrace.trace.flags import CallFlag, adjust_flags
from retrace.trace.model import CallBatch, Signatures, Tag
from retrace.trace.reader import TraceReader

_PACK_U64 = struct.Struct("<Q")
_UNPACK_F64 = struct.Struct("<d")
_SIGN = 1 << 63
_DUMP_TOLERANCE = 100  # apitrace dump reads this many calls past the last one asked for


def _signed(v: int) -> int:
    return v - (1 << 64) if v & _SIGN else v


def _float(v: int, precision: int) -> str:
    d = _UNPACK_F64.unpack(_PACK_U64.pack(v))[0]
    if math.isnan(d):
        return "-nan" if math.copysign(1.0, d) < 0 else "nan"
    return f"{d:.{precision}g}"


def quote(codes: Iterator[int] | bytes, wide: bool = False) -> str:
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
    """Formats the values of one batch; node fields are converted to lists once per batch."""

    def __init__(self, batch: CallBatch, sigs: Signatures) -> None:
        nodes = batch.nodes
        self.tags: list[int] = nodes["tag"].tolist()
        self.aux: list[int] = nodes["aux"].tolist()
        self.v: list[int] = nodes["v"].tolist()
        self.pool = batch.pool
        self.sigs = sigs

    def value(self, i: int) -> str:
        tag, v = self.tags[i], self.v[i]
        if tag == Tag.UINT:
            return str(v)
        if tag == Tag.SINT:
            return str(_signed(v))
        if tag == Tag.ENUM:
            value = _signed(v)
            name = self.sigs.enums[self.aux[i]].by_value.get(value)
            return name if name is not None else str(value)
        if tag == Tag.FLOAT:
            return _float(v, 7)
        if tag == Tag.DOUBLE:
            return _float(v, 16)
        if tag == Tag.STRING:
            return quote(self.pool[v : v + self.aux[i]])
        if tag == Tag.OPAQUE:
            return f"{v:#x}"
        if tag == Tag.ARRAY:
            return self._array(i)
        if tag == Tag.NULL:
            return "NULL"
        if tag == Tag.FALSE:
            return "false"
        if tag == Tag.TRUE:
            return "true"
        if tag == Tag.BLOB:
            return f"blob({self.aux[i]})"
        if tag == Tag.BITMASK:
            return self._bitmask(i)
        if tag == Tag.STRUCT:
            return "{" + ", ".join(self._members(i)) + "}"
        if tag == Tag.REPR:
            return self.value(i + 1)
        # wide string: uint32 code points in the pool
        codes = np.frombuffer(self.pool, "<u4", self.aux[i], v).tolist()
        return "L" + quote(codes, wide=True)

    def _children(self, i: int, count: int) -> Iterator[int]:
        child = i + 1
        for _ in range(count):
            yield child
            if self.tags[child] in (Tag.ARRAY, Tag.STRUCT, Tag.REPR):
                child += self.v[child]
            child += 1

    def _array(self, i: int) -> str:
        count = self.aux[i]
        if count == 1:
            return "&" + self.value(i + 1)
        return "{" + ", ".join(self.value(c) for c in self._children(i, count)) + "}"

    def _members(self, i: int) -> Iterator[str]:
        sig = self.sigs.structs[self.aux[i]]
        for name, child in zip(
            sig.member_names, self._children(i, len(sig.member_names)), strict=True
        ):
            if name:
                yield f"{name} = {self.value(child)}"
            elif self.tags[child] == Tag.STRUCT:  # anonymous struct: its members inline
                yield from self._members(child)

    def _bitmask(self, i: int) -> str:
        value = self.v[i]
        parts = []
        for name, flag in self.sigs.bitmasks[self.aux[i]].flags:
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
            sig = sigs.functions[sig_id]
            flags = sig.flags | rflags
            if ret >= 0 and sig.name == "glGetError" and not sig.arg_names:
                flags = adjust_flags(sig.name, flags, _signed(fmt.v[node_start + ret]))
            if calls is not None and not calls.contains(no, flags):
                continue
            if flags & CallFlag.VERBOSE and not verbose:
                continue
            args = []
            for name, slot in zip(
                sig.arg_names, slots[slot_start : slot_start + nargs], strict=True
            ):
                args.append(f"{name} = {fmt.value(node_start + slot) if slot >= 0 else '?'}")
            line = f"{no} {sig.name}({', '.join(args)})"
            if ret >= 0:
                line += " = " + fmt.value(node_start + ret)
            if flags & (CallFlag.FAKE | CallFlag.INCOMPLETE):
                line += " //"
                if flags & CallFlag.FAKE:
                    line += " fake"
                if flags & CallFlag.INCOMPLETE:
                    line += " incomplete"
            line += "\n"
            if bt_count:
                line += "Backtrace:\n"
                for fid in bts[bt_start : bt_start + bt_count]:
                    line += _frame_line(sigs.frames[fid]) + "\n"
            if flags & CallFlag.END_FRAME:
                line += "\n"
            yield line


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
