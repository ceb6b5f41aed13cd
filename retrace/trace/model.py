"""Signatures and the flat call records the scanner produces.

The scanner (`_scanner.c`) emits each batch of calls as four flat arrays:

* ``calls``: one `CALL_DTYPE` record per call, in delivery order;
* ``slots``: per call, one int32 per argument of its signature: the
  call-relative index of the argument's value node, or -1 when the trace holds
  no value for it;
* ``nodes``: `NODE_DTYPE` value nodes in pre-order; arrays, structs and reprs
  are followed by their children, and ``v`` of such a node counts the nodes
  below it, so a reader can step over a whole value;
* ``pool``: the bytes of strings and blobs (``v`` = offset, ``aux`` = length)
  and of wide strings (uint32 code points, ``aux`` = count).

Value tags are the trace format's own type bytes (`Tag`). Signatures are
defined once per trace and kept as small Python objects.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrace.trace.flags import CallFlag, call_flags


class Tag(enum.IntEnum):
    """Value kinds, numbered as in apitrace's binary format."""

    NULL = 0
    FALSE = 1
    TRUE = 2
    SINT = 3
    UINT = 4
    FLOAT = 5
    DOUBLE = 6
    STRING = 7
    BLOB = 8
    ENUM = 9
    BITMASK = 10
    ARRAY = 11
    STRUCT = 12
    OPAQUE = 13
    REPR = 14
    WSTRING = 15


CALL_DTYPE = np.dtype(
    [
        ("no", "<u8"),
        ("offset", "<u8"),  # stream offset of the call's enter event
        ("sig", "<u4"),
        ("thread", "<u4"),
        ("flags", "<u4"),  # FAKE and INCOMPLETE as read; name-derived flags live on the signature
        ("node_start", "<u4"),
        ("node_count", "<u4"),
        ("slot_start", "<u4"),
        ("nargs", "<u4"),
        ("ret", "<i4"),  # call-relative node index, -1 when the call returned nothing
        ("bt_start", "<u4"),
        ("bt_count", "<u4"),
    ]
)

NODE_DTYPE = np.dtype([("tag", "u1"), ("pad", "V3"), ("aux", "<u4"), ("v", "<u8")])


def _text(raw: bytes) -> str:
    # Names are C strings of unknown encoding; keep every byte round-trippable.
    return raw.decode("utf-8", "surrogateescape")


@dataclass(frozen=True, slots=True)
class FunctionSig:
    id: int
    name: str
    arg_names: tuple[str, ...]
    flags: CallFlag


@dataclass(frozen=True, slots=True)
class StructSig:
    id: int
    name: str
    member_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EnumSig:
    id: int
    values: tuple[tuple[str, int], ...]
    by_value: dict[int, str] = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class BitmaskSig:
    id: int
    flags: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class StackFrame:
    module: str | None
    function: str | None
    filename: str | None
    line: int  # -1 when unknown
    offset: int  # -1 when unknown


class Signatures:
    """Every signature defined so far in one trace, by kind and id."""

    def __init__(self) -> None:
        self.functions: dict[int, FunctionSig] = {}
        self.structs: dict[int, StructSig] = {}
        self.enums: dict[int, EnumSig] = {}
        self.bitmasks: dict[int, BitmaskSig] = {}
        self.frames: dict[int, StackFrame] = {}

    def add(self, definitions: list[tuple[Any, ...]]) -> None:
        """Record definitions as reported by the scanner's take()."""
        for d in definitions:
            kind, sid = d[0], d[1]
            if kind == "call":
                name = _text(d[2])
                self.functions[sid] = FunctionSig(
                    sid, name, tuple(_text(a) for a in d[3]), call_flags(name)
                )
            elif kind == "struct":
                self.structs[sid] = StructSig(sid, _text(d[2]), tuple(_text(m) for m in d[3]))
            elif kind == "enum":
                values = tuple((_text(n), v) for n, v in d[2])
                by_value: dict[int, str] = {}
                for n, v in values:
                    by_value.setdefault(v, n)  # the first name listed for a value wins
                self.enums[sid] = EnumSig(sid, values, by_value)
            elif kind == "bitmask":
                self.bitmasks[sid] = BitmaskSig(sid, tuple((_text(n), v) for n, v in d[2]))
            else:
                module, function, filename = (None if s is None else _text(s) for s in d[2:5])
                self.frames[sid] = StackFrame(module, function, filename, d[5], d[6])


class Pointer(int):
    """An opaque pointer as recorded: an address in the traced process."""

    __slots__ = ()


_NESTING = frozenset((Tag.ARRAY, Tag.STRUCT, Tag.REPR))
_NUMBER_TAGS = (
    Tag.NULL,
    Tag.FALSE,
    Tag.TRUE,
    Tag.SINT,
    Tag.UINT,
    Tag.FLOAT,
    Tag.DOUBLE,
    Tag.ENUM,
    Tag.BITMASK,
    Tag.OPAQUE,
)


class NodeLists:
    """A batch's value nodes as Python lists, for code that visits values one by one.

    The payload is offered three ways (unsigned, signed, double), each
    converted once per batch: a per-value struct.unpack would cost more than
    the visit itself.
    """

    __slots__ = ("tags", "aux", "u", "i", "d", "pool")

    def __init__(self, batch: CallBatch) -> None:
        self._load(batch.nodes, batch.pool)

    @classmethod
    def of_call(cls, batch: CallBatch, node_start: int, node_count: int) -> NodeLists:
        """The values of one call only (indices relative to the call), for a batch where
        few calls are visited: converting all its nodes would cost more."""
        values = cls.__new__(cls)
        values._load(batch.nodes[node_start : node_start + node_count], batch.pool)
        return values

    def _load(self, nodes: np.ndarray, pool: bytes) -> None:
        v = nodes["v"]
        self.tags: list[int] = nodes["tag"].tolist()
        self.aux: list[int] = nodes["aux"].tolist()
        self.u: list[int] = v.tolist()
        self.i: list[int] = v.view("<i8").tolist()
        self.d: list[float] = v.view("<f8").tolist()
        self.pool = pool

    def children(self, i: int, count: int) -> Iterator[int]:
        """Indices of the `count` values nested directly under node `i`."""
        child = i + 1
        for _ in range(count):
            yield child
            if self.tags[child] in _NESTING:
                child += self.u[child]
            child += 1

    def bytes(self, i: int) -> bytes:
        """The pool bytes of a string or blob node."""
        start = self.u[i]
        return self.pool[start : start + self.aux[i]]

    def wide(self, i: int) -> list[int]:
        """The code points of a wide-string node."""
        codes: list[int] = np.frombuffer(self.pool, "<u4", self.aux[i], self.u[i]).tolist()
        return codes

    def value(self, i: int, sigs: Signatures) -> object:
        """Node `i` as a plain Python value, for replay.

        None for NULL, int for booleans, integers, enums and bitmasks, float,
        bytes for strings and blobs (one copy out of the pool: a bytes subclass would
        take two, a blob's size twice over at once), `Pointer`, list for arrays, tuple for
        structs, str for wide strings; a repr becomes its machine value.
        """
        tag = self.tags[i]
        if tag in (Tag.SINT, Tag.ENUM):
            return self.i[i]
        if tag in (Tag.UINT, Tag.BITMASK):
            return self.u[i]
        if tag in (Tag.FLOAT, Tag.DOUBLE):
            return self.d[i]
        if tag in (Tag.STRING, Tag.BLOB):
            return self.bytes(i)
        if tag == Tag.ARRAY:
            return [self.value(c, sigs) for c in self.children(i, self.aux[i])]
        if tag == Tag.OPAQUE:
            return Pointer(self.u[i])
        if tag == Tag.STRUCT:
            count = len(sigs.structs[self.aux[i]].member_names)
            return tuple(self.value(c, sigs) for c in self.children(i, count))
        if tag == Tag.REPR:
            _, machine = self.children(i, 2)
            return self.value(machine, sigs)
        if tag == Tag.WSTRING:
            return "".join(map(chr, self.wide(i)))
        return None if tag == Tag.NULL else int(tag == Tag.TRUE)


def node_numbers(batch: CallBatch) -> list[int | float | None]:
    """Every node of a batch as a Python number (None where it is not one), in one go.

    Replay compiles most calls from numbers alone; converting all nodes with
    numpy costs far less than visiting them one by one.
    """
    tag, v = batch.nodes["tag"], batch.nodes["v"]
    out = v.view("<i8").astype(object)
    unsigned = np.isin(tag, (Tag.UINT, Tag.BITMASK, Tag.OPAQUE)) & (v >= 1 << 63)
    out[unsigned] = v[unsigned].astype(object)
    reals = np.isin(tag, (Tag.FLOAT, Tag.DOUBLE))
    out[reals] = v.view("<f8")[reals].astype(object)
    out[np.isin(tag, (Tag.NULL, Tag.FALSE))] = 0
    out[tag == Tag.TRUE] = 1
    out[~np.isin(tag, _NUMBER_TAGS)] = None
    values: list[int | float | None] = out.tolist()
    return values


@dataclass(slots=True)
class CallBatch:
    """A run of consecutive calls in flat form (see the module docstring)."""

    calls: np.ndarray
    slots: np.ndarray
    nodes: np.ndarray
    pool: bytes
    backtraces: np.ndarray

    def __len__(self) -> int:
        return len(self.calls)
