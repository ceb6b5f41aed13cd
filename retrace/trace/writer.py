"""Writing apitrace's binary format: the header, events and values, in its snappy container.

One writer for everything that makes traces: `retrace trim` copies calls read
by the scanner into a new trace (`copy_call`), and the tests build traces of
every format version (0-6) and value kind from the grammar of apitrace's
docs/FORMAT.markdown (`tests/tracegen.py`). A signature (function, enum,
bitmask, struct) is written with its definition at its first use in the
output and by id alone after that, whatever the trace it came from did: a
trim leaves out the calls where the original defined most of them.
"""

from __future__ import annotations

import builtins  # int and float: TraceWriter has methods of those names
import struct
from collections.abc import Callable
from typing import BinaryIO

import cramjam

from retrace.trace.model import CallBatch, NodeLists, Signatures, Tag

CHUNK_SIZE = 1 << 20  # uncompressed bytes per snappy block, as apitrace writes them
_FAKE_DETAIL = b"\x05" + b"\x01"  # a call's flags detail: FAKE (the only flag the file holds)


def uint(n: int) -> bytes:
    """The format's variable-length unsigned integer (7 bits a byte, low first)."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def string(s: bytes | str) -> bytes:
    """A length and the bytes; a str as the reader made it (surrogateescape: bytes that are
    not UTF-8, in a header property, are written back as they were read)."""
    raw = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s
    return uint(len(raw)) + raw


def wrap_snappy(stream: bytes, chunk_size: int = CHUNK_SIZE) -> bytes:
    """apitrace's snappy container around a decompressed stream."""
    out = bytearray(b"at")
    for i in range(0, len(stream), chunk_size):
        out += _snappy_block(stream[i : i + chunk_size])
    return bytes(out)


def _snappy_block(data: bytes | bytearray | memoryview) -> bytes:
    block = bytes(cramjam.snappy.compress_raw(bytes(data)))
    return struct.pack("<I", len(block)) + block


class SnappyFile:
    """A decompressed stream written to `file` in apitrace's snappy container, a block per
    `CHUNK_SIZE` bytes, so a trace of any size is written in bounded memory."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.file.write(b"at")
        self._pending = bytearray()
        self.stream_bytes = 0

    def write(self, data: bytes | bytearray) -> None:
        self._pending += data
        self.stream_bytes += len(data)
        if len(self._pending) >= CHUNK_SIZE:
            view = memoryview(self._pending)
            whole = len(self._pending) - len(self._pending) % CHUNK_SIZE
            for i in range(0, whole, CHUNK_SIZE):
                self.file.write(_snappy_block(view[i : i + CHUNK_SIZE]))
            view.release()
            del self._pending[:whole]

    def close(self) -> None:
        if self._pending:
            self.file.write(_snappy_block(self._pending))
            self._pending.clear()


class TraceWriter:
    """Builds a decompressed event stream: the header, then calls. `take()` hands out what
    is written so far (to a `SnappyFile`); `stream` and `snappy()` are the whole of it for
    traces built in memory."""

    def __init__(
        self,
        version: int = 6,
        properties: dict[str, str] | None = None,
        semantic_version: int | None = None,
    ) -> None:
        self.version = version
        self.properties = dict(properties or {})
        self._out = bytearray()
        self._ids: dict[tuple[str, object], int] = {}  # (kind, key) -> id in this trace
        self._count: dict[str, int] = {}  # ids given per kind
        self._frames_defined: set[int] = set()  # backtrace frames
        # per enum signature read, the values to define it with (copy_call; None: all)
        self.enum_values: dict[builtins.int, set[builtins.int]] | None = None
        self.calls = 0  # calls written: the next call's number
        self.written = 0  # bytes handed out by take()
        # (stream offset where the event ends, "enter" or "leave", call number)
        self.events: list[tuple[int, str, int]] = []
        self._out += uint(version)
        if version >= 6:
            self._out += uint(version if semantic_version is None else semantic_version)
            for k, v in self.properties.items():
                self._out += string(k) + string(v)
            self._out += string(b"")

    # -- signatures: an id per distinct key, its definition written at the first use

    def _sig(self, kind: str, key: object, definition: Callable[[], bytes]) -> bytes:
        sid = self._ids.get((kind, key))
        if sid is not None:
            return uint(sid)
        sid = self._ids[kind, key] = self._count.get(kind, 0)
        self._count[kind] = sid + 1
        return uint(sid) + definition()

    # -- values

    null = b"\x00"
    false = b"\x01"
    true = b"\x02"

    @staticmethod
    def int(n: builtins.int) -> bytes:
        return b"\x03" + uint(-n) if n < 0 else b"\x04" + uint(n)

    @staticmethod
    def float(x: builtins.float) -> bytes:
        return b"\x05" + struct.pack("<f", x)

    @staticmethod
    def double(x: builtins.float) -> bytes:
        return b"\x06" + struct.pack("<d", x)

    @staticmethod
    def string(s: bytes | str) -> bytes:
        return b"\x07" + string(s)

    @staticmethod
    def blob(data: bytes) -> bytes:
        return b"\x08" + string(data)

    def _enum_definition(self, values: tuple[tuple[bytes | str, builtins.int], ...]) -> bytes:
        if self.version >= 3:
            return uint(len(values)) + b"".join(string(n) + self.int(v) for n, v in values)
        name, value = values[0]  # before version 3 a signature is one name and value
        return string(name) + self.int(value)

    def enum(self, values: tuple[tuple[str, builtins.int], ...], value: builtins.int) -> bytes:
        if self.version >= 3:
            sid = self._sig("enum", values, lambda: self._enum_definition(values))
            return b"\x09" + sid + self.int(value)
        name = dict((v, n) for n, v in reversed(values)).get(value, str(value))
        one = ((name, value),)
        return b"\x09" + self._sig("enum", one, lambda: self._enum_definition(one))

    @staticmethod
    def _bitmask_definition(flags: tuple[tuple[bytes | str, builtins.int], ...]) -> bytes:
        return uint(len(flags)) + b"".join(string(n) + uint(v) for n, v in flags)

    def bitmask(self, flags: tuple[tuple[str, builtins.int], ...], value: builtins.int) -> bytes:
        sid = self._sig("bitmask", flags, lambda: self._bitmask_definition(flags))
        return b"\x0a" + sid + uint(value)

    @staticmethod
    def array(*values: bytes) -> bytes:
        return b"\x0b" + uint(len(values)) + b"".join(values)

    @staticmethod
    def _named_list(name: str, members: tuple[str, ...]) -> bytes:
        return string(name) + uint(len(members)) + b"".join(string(m) for m in members)

    def struct(self, name: str, members: tuple[str, ...], *values: bytes) -> bytes:
        sid = self._sig("struct", (name, members), lambda: self._named_list(name, members))
        return b"\x0c" + sid + b"".join(values)

    @staticmethod
    def opaque(address: builtins.int) -> bytes:
        return b"\x0d" + uint(address)

    @staticmethod
    def repr(human: bytes, machine: bytes) -> bytes:
        return b"\x0e" + human + machine

    @staticmethod
    def wstring(text: str) -> bytes:
        return b"\x0f" + uint(len(text)) + b"".join(uint(ord(c)) for c in text)

    # -- events

    def _enter_head(self, thread: builtins.int, function: bytes) -> None:
        self._out += b"\x00"
        if self.version >= 4:
            self._out += uint(thread)
        self._out += function

    def enter(
        self,
        name: str,
        arg_names: tuple[str, ...],
        args: dict[builtins.int, bytes],
        thread: builtins.int = 0,
        fake: bool = False,
        backtrace: list[tuple[builtins.int, dict[builtins.int, bytes | builtins.int]]]
        | None = None,
    ) -> builtins.int:
        """Write an enter event; returns the call number apitrace assigns."""
        key = (name, arg_names)
        self._enter_head(thread, self._sig("call", key, lambda: self._named_list(*key)))
        out = self._out
        for index, value in args.items():
            out += b"\x01" + uint(index) + value
        if fake:
            out += _FAKE_DETAIL
        if backtrace is not None:
            out += b"\x04" + uint(len(backtrace))
            for frame_id, details in backtrace:
                out += uint(frame_id)
                if frame_id not in self._frames_defined:
                    self._frames_defined.add(frame_id)
                    for kind, detail in details.items():
                        out += bytes([kind]) + (
                            uint(detail) if isinstance(detail, builtins.int) else string(detail)
                        )
                    out += b"\x00"
        return self._entered()

    def _entered(self) -> builtins.int:
        self._out += b"\x00"
        self.calls += 1
        self.events.append((self.written + len(self._out), "enter", self.calls - 1))
        return self.calls - 1

    def leave(
        self,
        call_no: builtins.int,
        args: dict[builtins.int, bytes] | None = None,
        ret: bytes | None = None,
    ) -> None:
        out = self._out
        out += b"\x01" + uint(call_no)
        for index, value in (args or {}).items():
            out += b"\x01" + uint(index) + value
        if ret is not None:
            out += b"\x02" + ret
        out += b"\x00"
        self.events.append((self.written + len(out), "leave", call_no))

    def call(
        self,
        name: str,
        arg_names: tuple[str, ...] = (),
        args: dict[builtins.int, bytes] | None = None,
        ret: bytes | None = None,
        **enter_options: object,
    ) -> builtins.int:
        no = self.enter(name, arg_names, args or {}, **enter_options)  # type: ignore[arg-type]
        self.leave(no, ret=ret)
        return no

    # -- copies of calls read by the scanner

    def copy_call(
        self,
        batch: CallBatch,
        values: NodeLists,
        index: builtins.int,
        sigs: Signatures,
        blank: builtins.int | None = None,
    ) -> builtins.int:
        """Write call `index` of `batch` (its values in `values`, converted from the whole
        batch) as one enter event holding every argument and a leave holding the result;
        returns its number here. Signatures keep their definitions, under ids of this trace.
        Argument `blank`, where given, is written as null (an upload without its data).
        Backtraces are left out."""
        _, _, sid, thread, flags, node_start, _, slot_start, nargs, ret, _, _ = batch.call(index)
        sig = sigs.functions[sid]
        self._enter_head(
            thread,
            self._sig("call", ("read", sid), lambda: self._named_list(sig.name, sig.arg_names)),
        )
        out = self._out
        for arg, node in enumerate(batch.arguments(slot_start, nargs)):
            if arg == blank:
                out += b"\x01" + uint(arg) + self.null
            elif node >= 0:
                out += b"\x01" + uint(arg)
                self._copy_value(values, node_start + node, sigs)
        if flags & 1:  # the scanner's FAKE
            out += _FAKE_DETAIL
        number = self._entered()
        out += b"\x01" + uint(number)
        if ret >= 0:
            out += b"\x02"
            self._copy_value(values, node_start + ret, sigs)
        out += b"\x00"
        self.events.append((self.written + len(out), "leave", number))
        return number

    def _copy_value(self, v: NodeLists, i: builtins.int, sigs: Signatures) -> builtins.int:
        """Append node `i`'s value; returns the index of the node after it."""
        out, tag = self._out, v.tags[i]
        if tag == Tag.UINT or tag == Tag.OPAQUE:
            out += bytes((tag,)) + uint(v.u[i])
        elif tag == Tag.SINT:
            out += b"\x03" + uint(-v.signed(i))
        elif tag == Tag.STRING or tag == Tag.BLOB:
            start = v.u[i]
            out += bytes((tag,)) + uint(v.aux[i])
            out += v.pool[start : start + v.aux[i]]
        elif tag == Tag.ENUM:
            sid = v.aux[i]
            out += b"\x09" + self._sig("enum", ("read", sid), lambda: self._read_enum(sid, sigs))
            if self.version >= 3:
                out += self.int(v.signed(i))
        elif tag == Tag.BITMASK:
            flags = sigs.bitmasks[v.aux[i]].flags
            ref = self._sig("bitmask", ("read", v.aux[i]), lambda: self._bitmask_definition(flags))
            out += b"\x0a" + ref + uint(v.u[i])
        elif tag == Tag.FLOAT:
            out += b"\x05" + struct.pack("<f", v.double(i))
        elif tag == Tag.DOUBLE:
            out += b"\x06" + struct.pack("<d", v.double(i))
        elif tag == Tag.ARRAY or tag == Tag.STRUCT or tag == Tag.REPR:
            return self._copy_nested(v, i, tag, sigs)
        elif tag == Tag.WSTRING:
            out += b"\x0f" + uint(v.aux[i]) + b"".join(uint(c) for c in v.wide(i))
        else:  # null, false, true
            out += bytes((tag,))
        return i + 1

    def _read_enum(self, sid: builtins.int, sigs: Signatures) -> bytes:
        """The definition of a read enum signature: with the values used, where known."""
        pairs = sigs.enums[sid].pairs
        if self.enum_values is not None and self.version >= 3:
            wanted = self.enum_values.get(sid, ())
            pairs = tuple(pair for pair in pairs if pair[1] in wanted)
        return self._enum_definition(pairs)

    def _copy_nested(
        self, v: NodeLists, i: builtins.int, tag: builtins.int, sigs: Signatures
    ) -> builtins.int:
        out = self._out
        if tag == Tag.ARRAY:
            out += b"\x0b" + uint(v.aux[i])
            count = v.aux[i]
        elif tag == Tag.STRUCT:
            s = sigs.structs[v.aux[i]]
            out += b"\x0c" + self._sig(
                "struct", ("read", s.id), lambda: self._named_list(s.name, s.member_names)
            )
            count = len(s.member_names)
        else:
            out += b"\x0e"
            count = 2
        child = i + 1
        for _ in range(count):
            child = self._copy_value(v, child, sigs)
        return child

    # -- output

    def take(self) -> bytes:
        """The stream written since the last take, handed out (and no longer held)."""
        data = bytes(self._out)
        self.written += len(data)
        self._out.clear()
        return data

    def tell(self) -> builtins.int:
        """Bytes written so far, taken or not."""
        return self.written + len(self._out)

    @property
    def stream(self) -> bytes:
        """The stream not yet taken (all of it, for a trace built in memory)."""
        return bytes(self._out)

    def snappy(self, chunk_size: builtins.int = CHUNK_SIZE) -> bytes:
        return wrap_snappy(self.stream, chunk_size)
