"""What a profile measures and how: built once (from the command line or the Python API)
and handed down whole, rather than option by option through every layer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retrace.errors import UsageError
from retrace.vocabulary import Boundary


@dataclass(frozen=True)
class ProfileOptions:
    """The selection per table, and how each pass is repeated."""

    selections: Mapping[Boundary, str] = field(default_factory=dict)  # in glretrace's syntax
    repeat: int = 1  # measured runs per pass: the table has their median
    warmup: int = 0  # runs per pass before those, not kept
    stats: bool = False  # min, p95 and stddev of the runs beside the median
    strict: bool = False  # a replay that departs from its trace fails (exit 3)
    frames: tuple[int, int | None] = (0, None)  # measure frames first..last (0-based) only

    def __post_init__(self) -> None:
        if self.repeat < 1 or self.warmup < 0:
            raise UsageError("--repeat must be at least 1 and --warmup at least 0")

    @classmethod
    def select(
        cls,
        per_frame: str | None = None,
        per_call: str | None = None,
        per_drawcall: str | None = None,
        **how: Any,
    ) -> ProfileOptions:
        """Options from `--pframes/--pcalls/--pdrawcalls` (None or empty: no such table)."""
        given = {
            Boundary.FRAME: per_frame,
            Boundary.CALL: per_call,
            Boundary.DRAWCALL: per_drawcall,
        }
        return cls({b: spec for b, spec in given.items() if spec}, **how)

    def to_json(self) -> dict[str, Any]:
        return {
            "selections": {b.name: spec for b, spec in self.selections.items()},
            "repeat": self.repeat,
            "warmup": self.warmup,
            "stats": self.stats,
            "strict": self.strict,
            "frames": list(self.frames),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProfileOptions:
        """Raises KeyError or TypeError on what `to_json` did not write."""
        selections = {Boundary[name]: spec for name, spec in data["selections"].items()}
        how = {k: data[k] for k in ("repeat", "warmup", "stats", "strict") if k in data}
        first, last = data.get("frames", (0, None))
        return cls(selections, frames=(first, last), **how)
