"""The shared vocabulary of measurement: boundaries, metric descriptors, kinds and types.

Backends describe their metrics with these types, the profiler plans and brackets
with them, the store and the writers label columns with them, and `compare`
reads them back. It imports nothing of retrace, so every layer can depend on it
without depending on another layer (the plug-in base in `retrace.backends.base`
is only for the backends that extend it).
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple


class Boundary(enum.IntEnum):
    """Where an event begins and ends; numbered as in glretrace."""

    DRAWCALL = 0
    FRAME = 1
    CALL = 2


# The tables' names: one word, as glretrace's --pdrawcalls, where code and files name them
# (the Python API's tables and keywords, the metadata's keys: files written carry them),
# and titles where people read them (diff and summary reports, `retrace report`'s page, the
# batch database's `tbl` column, which queries name).
TABLE_NAMES = {Boundary.FRAME: "frames", Boundary.CALL: "calls", Boundary.DRAWCALL: "drawcalls"}
TABLE_TITLES = {Boundary.FRAME: "frames", Boundary.CALL: "calls", Boundary.DRAWCALL: "draw calls"}


class NumType(enum.Enum):
    """How a value is stored and printed (glretrace's CNT_NUM_*)."""

    UINT = "uint"
    FLOAT = "float"
    UINT64 = "uint64"
    DOUBLE = "double"
    BOOL = "bool"
    INT64 = "int64"

    @property
    def is_float(self) -> bool:
        return self in (NumType.FLOAT, NumType.DOUBLE)

    @property
    def code(self) -> str:
        """The `struct`/`array` item code of one value of this type as GL returns it (a
        BOOL is 32 bits, as GL's counter data holds it)."""
        return _CODES[self]


_CODES = {
    NumType.UINT: "I",
    NumType.FLOAT: "f",
    NumType.UINT64: "Q",
    NumType.DOUBLE: "d",
    NumType.BOOL: "I",
    NumType.INT64: "q",
}


class Kind(enum.Enum):
    """What a value means (glretrace's CNT_TYPE_*)."""

    GENERIC = "generic"
    NUM = "number"
    DURATION = "duration"
    PERCENT = "percent"
    TIMESTAMP = "timestamp"
    OTHER = "other"


class Metric:
    """One measurable quantity of a backend, identified by (group, id) or by name.

    Each backend defines its metrics once, so identity is equality: that keeps
    them cheap dictionary keys on the per-event path. (A plain class: a frozen
    dataclass costs a millisecond to define, in every profile's start-up.)
    """

    __slots__ = (
        "backend", "group", "id", "name", "description", "num_type", "kind", "unit", "group_name"
    )  # fmt: skip

    def __init__(
        self,
        backend: str,
        group: int,
        id: int,
        name: str,
        description: str,
        num_type: NumType,
        kind: Kind,
        unit: str,  # "ns", "bytes", "pixels", "%", "" ...
        group_name: str = "",
    ) -> None:
        self.backend, self.group, self.id, self.name = backend, group, id, name
        self.description, self.num_type, self.kind = description, num_type, kind
        self.unit, self.group_name = unit, group_name

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.backend, self.group, self.id)

    def fields(self) -> dict[str, Any]:
        """Every field by name, in the constructor's order."""
        return {name: getattr(self, name) for name in self.__slots__}

    def replace(self, **changes: Any) -> Metric:
        """A new metric: this one with some fields changed."""
        return Metric(**{**self.fields(), **changes})


class NativeEvents(NamedTuple):
    """What the replay loop measures around every event of a boundary besides the CPU clock,
    which it always reads (`MetricBackend.native_events`)."""

    gpu_times: bool = False  # GL_TIMESTAMP queries at the start and the end
    pixels: bool = False  # a GL_SAMPLES_PASSED query
    memory: bool = False  # virtual and resident memory at the start and the end
    disjoint: bool = False  # GL_GPU_DISJOINT_EXT at the end
    busy: bool = False  # the GPU time of its GPU work (each work op between two timestamps)


class MetricError(Exception):
    """A metric cannot be enabled (unsupported, or not at that boundary); the message says why."""
