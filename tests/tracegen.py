"""A small writer of apitrace's binary format, for tests.

Real programs traced with Debian's apitrace only produce format version 6, so
this writer builds traces of every version (0-6) and every value kind from the
grammar in apitrace's docs/FORMAT.markdown. Tests hand its output to both
`apitrace dump` and `retrace dump` and compare.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import cramjam


def uint(n: int) -> bytes:
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
    raw = s.encode() if isinstance(s, str) else s
    return uint(len(raw)) + raw


@dataclass
class TraceWriter:
    """Builds the decompressed event stream; `snappy()` wraps it as apitrace does."""

    version: int = 6
    properties: dict[str, str] = field(default_factory=dict)
    _out: bytearray = field(default_factory=bytearray)
    _defined: set[tuple[str, int]] = field(default_factory=set)
    _next_call: int = 0
    _ids: dict[tuple[str, object], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._out += uint(self.version)
        if self.version >= 6:
            self._out += uint(self.version)
            for k, v in self.properties.items():
                self._out += string(k) + string(v)
            self._out += string(b"")

    # -- signatures: an id per distinct definition, the definition written once

    def _sig(self, kind: str, key: object, definition: bytes) -> bytes:
        sid = self._ids.setdefault((kind, key), len([k for k in self._ids if k[0] == kind]))
        if (kind, sid) in self._defined:
            return uint(sid)
        self._defined.add((kind, sid))
        return uint(sid) + definition

    # -- values

    null = b"\x00"
    false = b"\x01"
    true = b"\x02"

    @staticmethod
    def int(n: int) -> bytes:
        return b"\x03" + uint(-n) if n < 0 else b"\x04" + uint(n)

    @staticmethod
    def float(x: float) -> bytes:
        return b"\x05" + struct.pack("<f", x)

    @staticmethod
    def double(x: float) -> bytes:
        return b"\x06" + struct.pack("<d", x)

    @staticmethod
    def string(s: bytes | str) -> bytes:
        return b"\x07" + string(s)

    @staticmethod
    def blob(data: bytes) -> bytes:
        return b"\x08" + string(data)

    def enum(self, values: tuple[tuple[str, int], ...], value: int) -> bytes:
        if self.version >= 3:
            definition = uint(len(values)) + b"".join(string(n) + self.int(v) for n, v in values)
            return b"\x09" + self._sig("enum", values, definition) + self.int(value)
        # before version 3 an enum signature is a single name and value
        name = dict((v, n) for n, v in reversed(values)).get(value, str(value))
        return b"\x09" + self._sig("enum", (name, value), string(name) + self.int(value))

    def bitmask(self, flags: tuple[tuple[str, int], ...], value: int) -> bytes:
        definition = uint(len(flags)) + b"".join(string(n) + uint(v) for n, v in flags)
        return b"\x0a" + self._sig("bitmask", flags, definition) + uint(value)

    @staticmethod
    def array(*values: bytes) -> bytes:
        return b"\x0b" + uint(len(values)) + b"".join(values)

    def struct(self, name: str, members: tuple[str, ...], *values: bytes) -> bytes:
        definition = string(name) + uint(len(members)) + b"".join(string(m) for m in members)
        return b"\x0c" + self._sig("struct", (name, members), definition) + b"".join(values)

    @staticmethod
    def opaque(address: int) -> bytes:
        return b"\x0d" + uint(address)

    @staticmethod
    def repr(human: bytes, machine: bytes) -> bytes:
        return b"\x0e" + human + machine

    @staticmethod
    def wstring(text: str) -> bytes:
        return b"\x0f" + uint(len(text)) + b"".join(uint(ord(c)) for c in text)

    # -- events

    def enter(
        self,
        name: str,
        arg_names: tuple[str, ...],
        args: dict[int, bytes],
        thread: int = 0,
        fake: bool = False,
        backtrace: list[tuple[int, dict[int, bytes | int]]] | None = None,
    ) -> int:
        """Write an enter event; returns the call number apitrace assigns."""
        out = self._out
        out += b"\x00"
        if self.version >= 4:
            out += uint(thread)
        definition = string(name) + uint(len(arg_names)) + b"".join(string(a) for a in arg_names)
        out += self._sig("call", (name, arg_names), definition)
        for index, value in args.items():
            out += b"\x01" + uint(index) + value
        if fake:
            out += b"\x05" + uint(1)
        if backtrace is not None:
            out += b"\x04" + uint(len(backtrace))
            for frame_id, details in backtrace:
                out += uint(frame_id)
                if ("frame", frame_id) not in self._defined:
                    self._defined.add(("frame", frame_id))
                    for kind, detail in details.items():
                        out += bytes([kind]) + (string(detail) if kind <= 3 else uint(detail))
                    out += b"\x00"
        out += b"\x00"
        self._next_call += 1
        return self._next_call - 1

    def leave(
        self, call_no: int, args: dict[int, bytes] | None = None, ret: bytes | None = None
    ) -> None:
        out = self._out
        out += b"\x01" + uint(call_no)
        for index, value in (args or {}).items():
            out += b"\x01" + uint(index) + value
        if ret is not None:
            out += b"\x02" + ret
        out += b"\x00"

    def call(
        self,
        name: str,
        arg_names: tuple[str, ...] = (),
        args: dict[int, bytes] | None = None,
        ret: bytes | None = None,
        **enter_options,
    ) -> int:
        no = self.enter(name, arg_names, args or {}, **enter_options)
        self.leave(no, ret=ret)
        return no

    @property
    def stream(self) -> bytes:
        return bytes(self._out)

    def snappy(self, chunk_size: int = 1 << 20) -> bytes:
        return wrap_snappy(self.stream, chunk_size)


def wrap_snappy(stream: bytes, chunk_size: int = 1 << 20) -> bytes:
    """apitrace's snappy container around a decompressed stream."""
    out = bytearray(b"at")
    for i in range(0, len(stream), chunk_size):
        block = bytes(cramjam.snappy.compress_raw(stream[i : i + chunk_size]))
        out += struct.pack("<I", len(block)) + block
    return bytes(out)
