"""Signatures and the flat call records the scanner produces.

The scanner (`_scanner.c`) emits each batch of calls as four flat buffers:

* ``calls``: one `CALLS` record per call, in delivery order;
* ``slots``: per call, one int32 per argument of its signature: the
  call-relative index of the argument's value node, or -1 when the trace holds
  no value for it;
* ``nodes``: `NODES` value nodes in pre-order; arrays, structs and reprs
  are followed by their children, and ``v`` of such a node counts the nodes
  below it, so a reader can step over a whole value;
* ``pool``: the bytes of strings and blobs (``v`` = offset, ``aux`` = length)
  and of wide strings (uint32 code points, ``aux`` = count).

The record layouts are records.h's, exported by the scanner; `Layout` reads
them with struct and memoryview, so that neither a replay nor a dump needs numpy
(50-130 ms to import). Value tags
are the trace format's own type bytes (`Tag`). Signatures are defined once per
trace and kept as small Python objects.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from typing import Any, NamedTuple, TypeAlias, cast

from retrace.trace import _scanner
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


class Layout:
    """One of the scanner's record types, from its (name, struct code) fields."""

    __slots__ = ("fields", "record", "size", "_offsets")

    def __init__(self, fields: tuple[tuple[str, str], ...], size: int) -> None:
        self.fields = fields
        self.record = struct.Struct("<" + "".join(code for _, code in fields))
        self.size = self.record.size
        if self.size != size:
            raise ImportError(f"records.h and its struct codes disagree: {size} != {self.size}")
        self._offsets: dict[str, tuple[int, str]] = {}
        offset = 0
        for name, code in fields:
            self._offsets[name] = offset, code
            offset += struct.calcsize("<" + code)

    def column(
        self, buffer: bytes | memoryview, name: str, code: str | None = None
    ) -> memoryview[Any]:
        """Field `name` of every record in `buffer` as a memoryview, without a copy (read as
        `code`, a type of the same size, where given: "d" for a node's value as a double)."""
        offset, own = self._offsets[name]
        width = struct.calcsize(own)
        view: Any = memoryview(buffer)  # (typeshed's cast() takes literal formats only)
        return view.cast(code or own)[offset // width :: self.size // width]


CALLS = Layout(_scanner.CALL_FIELDS, _scanner.CALL_SIZE)
NODES = Layout(_scanner.NODE_FIELDS, _scanner.NODE_SIZE)


def _text(raw: bytes) -> str:
    # Names are C strings of unknown encoding; keep every byte round-trippable.
    return raw.decode("utf-8", "surrogateescape")


class FunctionSig(NamedTuple):
    id: int
    name: str
    arg_names: tuple[str, ...]
    flags: CallFlag


class StructSig(NamedTuple):
    id: int
    name: str
    member_names: tuple[str, ...]


class EnumSig:
    """An enum signature, its names decoded on first use: apitrace defines GLenum with
    about 4,000 of them in every trace, and replay reads none (4 ms saved per run)."""

    __slots__ = ("id", "_raw", "_by_value")

    def __init__(self, id: int, raw: tuple[tuple[bytes, int], ...]) -> None:
        self.id = id
        self._raw = raw  # (name, value) as the trace lists them
        self._by_value: dict[int, str] | None = None

    def __eq__(self, other: object) -> bool:  # (what the trace defined: decoded or not yet)
        return isinstance(other, EnumSig) and (self.id, self._raw) == (other.id, other._raw)

    def __hash__(self) -> int:
        return hash((self.id, self._raw))

    def __repr__(self) -> str:
        return f"EnumSig(id={self.id}, values={self.values!r})"

    @property
    def pairs(self) -> tuple[tuple[bytes, int], ...]:
        """(name, value) as the trace lists them, names undecoded (for a writer)."""
        return self._raw

    @property
    def values(self) -> tuple[tuple[str, int], ...]:
        return tuple((_text(n), v) for n, v in self._raw)

    @property
    def by_value(self) -> dict[int, str]:
        """Value -> the first name listed for it."""
        if self._by_value is None:
            self._by_value = {}
            for n, v in self.values:
                self._by_value.setdefault(v, n)
        return self._by_value


class BitmaskSig(NamedTuple):
    id: int
    flags: tuple[tuple[str, int], ...]


class StackFrame(NamedTuple):
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
        # per function id, 1 where its calls end a frame (END_FRAME): what `calls_of` takes
        # to find a batch's frame ends in C
        self.frame_ending = bytearray()

    def add(self, definitions: list[tuple[Any, ...]]) -> None:
        """Record definitions as reported by the scanner's take()."""
        for d in definitions:
            kind, sid = d[0], d[1]
            if kind == "call":
                name = _text(d[2])
                sig = self.functions[sid] = FunctionSig(
                    sid, name, tuple(_text(a) for a in d[3]), call_flags(name)
                )
                if sid >= len(self.frame_ending):
                    self.frame_ending.extend(bytes(sid + 1 - len(self.frame_ending)))
                self.frame_ending[sid] = bool(sig.flags & CallFlag.END_FRAME)
            elif kind == "struct":
                self.structs[sid] = StructSig(sid, _text(d[2]), tuple(_text(m) for m in d[3]))
            elif kind == "enum":
                self.enums[sid] = EnumSig(sid, d[2])
            elif kind == "bitmask":
                self.bitmasks[sid] = BitmaskSig(sid, tuple((_text(n), v) for n, v in d[2]))
            else:
                module, function, filename = (None if s is None else _text(s) for s in d[2:5])
                self.frames[sid] = StackFrame(module, function, filename, d[5], d[6])


class Pointer(int):
    """An opaque pointer as recorded: an address in the traced process."""

    __slots__ = ()


_NESTING = frozenset((Tag.ARRAY, Tag.STRUCT, Tag.REPR))
# tags as plain ints, for `NodeLists.value`'s tests of every node (a member looked up on its
# enum costs 0.2 us: a value took ten, more than the rest of its conversion)
_SIGNED, _UNSIGNED = (int(Tag.SINT), int(Tag.ENUM)), (int(Tag.UINT), int(Tag.BITMASK))
_REAL, _BYTES = (int(Tag.FLOAT), int(Tag.DOUBLE)), (int(Tag.STRING), int(Tag.BLOB))
_NULL, _TRUE, _ARRAY, _STRUCT, _OPAQUE, _REPR, _WSTRING = map(
    int, (Tag.NULL, Tag.TRUE, Tag.ARRAY, Tag.STRUCT, Tag.OPAQUE, Tag.REPR, Tag.WSTRING)
)


# At most this many nodes are unpacked record by record (`NodeLists._load`): for a few,
# faster than a column cast per field (3 us for a glXMakeCurrent's three).
_FEW_NODES = 16
assert [name for name, code in NODES.fields if not code.endswith("x")] == ["tag", "aux", "v"]

# the scanner's buffers: bytes it made, or a slice of a cache file it made before
Buffer: TypeAlias = bytes | memoryview


class NodeLists:
    """A batch's value nodes as Python lists, for code that visits values one by one.

    Tags, counts and unsigned payloads are converted once per batch (a per-value
    struct.unpack would cost more than the visit itself); the payload as a double
    only on the first float asked for, and as a signed integer per value.
    """

    __slots__ = ("tags", "aux", "u", "_nodes", "_d", "pool")

    def __init__(self, batch: CallBatch) -> None:
        self._load(batch.nodes, batch.pool)

    @classmethod
    def of_call(cls, batch: CallBatch, node_start: int, node_count: int) -> NodeLists:
        """The values of one call only (indices relative to the call), for a batch where
        few calls are visited: converting all its nodes would cost more."""
        values = cls.__new__(cls)
        size = NODES.size
        values._load(
            memoryview(batch.nodes)[node_start * size : (node_start + node_count) * size],
            batch.pool,
        )
        return values

    def _load(self, nodes: Buffer, pool: Buffer) -> None:
        self._nodes = nodes
        self._d: list[float] | None = None
        self.pool = pool
        if len(nodes) > _FEW_NODES * NODES.size:
            self.tags: list[int] = NODES.column(nodes, "tag").tolist()
            self.aux: list[int] = NODES.column(nodes, "aux").tolist()
            self.u: list[int] = NODES.column(nodes, "v").tolist()
            return
        self.tags, self.aux, self.u = tags, aux, u = [], [], []  # (a few: record by record)
        for tag, count, payload in NODES.record.iter_unpack(nodes):
            tags.append(tag)
            aux.append(count)
            u.append(payload)

    def signed(self, i: int) -> int:
        """The payload of node `i` as a signed integer."""
        u = self.u[i]
        return u - (1 << 64) if u >> 63 else u

    def double(self, i: int) -> float:
        """The payload of node `i` as a double."""
        if self._d is None:
            self._d = cast(list[float], NODES.column(self._nodes, "v", "d").tolist())
        return self._d[i]

    def children(self, i: int, count: int) -> Iterator[int]:
        """Indices of the `count` values nested directly under node `i`."""
        child = i + 1
        for _ in range(count):
            yield child
            if self.tags[child] in _NESTING:
                child += self.u[child]
            child += 1

    def bytes(self, i: int) -> bytes:
        """The pool bytes of a string or blob node (a copy, whether the pool is bytes or a
        slice of a cache file)."""
        start = self.u[i]
        return bytes(self.pool[start : start + self.aux[i]])

    def wide(self, i: int) -> list[int]:
        """The code points of a wide-string node."""
        start = self.u[i]
        codes: list[int] = memoryview(self.pool)[start : start + 4 * self.aux[i]].cast("I").tolist()
        return codes

    def value(self, i: int, sigs: Signatures) -> object:
        """Node `i` as a plain Python value, for replay.

        None for NULL, int for booleans, integers, enums and bitmasks, float,
        bytes for strings and blobs (one copy out of the pool: a bytes subclass would
        take two, a blob's size twice over at once), `Pointer`, list for arrays, tuple for
        structs, str for wide strings; a repr becomes its machine value.
        """
        tag = self.tags[i]
        if tag in _SIGNED:
            return self.signed(i)
        if tag in _UNSIGNED:
            return self.u[i]
        if tag in _REAL:
            return self.double(i)
        if tag in _BYTES:
            return self.bytes(i)
        if tag == _ARRAY:
            return [self.value(c, sigs) for c in self.children(i, self.aux[i])]
        if tag == _OPAQUE:
            return Pointer(self.u[i])
        if tag == _STRUCT:
            count = len(sigs.structs[self.aux[i]].member_names)
            return tuple(self.value(c, sigs) for c in self.children(i, count))
        if tag == _REPR:
            _, machine = self.children(i, 2)
            return self.value(machine, sigs)
        if tag == _WSTRING:
            return "".join(map(chr, self.wide(i)))
        return None if tag == _NULL else int(tag == _TRUE)


class CallBatch:
    """A run of consecutive calls in flat form (see the module docstring): the scanner's
    buffers as it wrote them, read a call at a time (`call`, `arguments`) or a field of
    every call at once (`column`)."""

    __slots__ = ("calls", "slots", "nodes", "pool", "backtraces", "frame_ends")

    def __init__(
        self,
        calls: Buffer,
        slots: Buffer,
        nodes: Buffer,
        pool: Buffer,
        backtraces: Buffer,
        frame_ends: list[int],
    ) -> None:
        self.calls = calls
        self.slots = slots  # int32
        self.nodes = nodes
        self.pool = pool
        self.backtraces = backtraces  # uint32 frame ids
        self.frame_ends = frame_ends  # indices of the calls that end a frame (END_FRAME)

    def __len__(self) -> int:
        return len(self.calls) // CALLS.size

    def call(self, i: int) -> tuple[int, ...]:
        """Call `i`'s record, its fields in `CALLS` order."""
        return CALLS.record.unpack_from(self.calls, i * CALLS.size)

    def records(self) -> Iterator[tuple[int, ...]]:
        """Every call's record, in order."""
        return CALLS.record.iter_unpack(self.calls)

    def column(self, name: str) -> memoryview[Any]:
        """One field of every call record (`CALLS`), without a copy."""
        return CALLS.column(self.calls, name)

    def arguments(self, slot_start: int, nargs: int) -> list[int]:
        """A call's slots: per argument, its call-relative node, or -1."""
        slots = memoryview(self.slots).cast("i")[slot_start : slot_start + nargs]
        numbers: list[int] = slots.tolist()
        return numbers
