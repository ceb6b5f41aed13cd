"""What a profile measures and how: built once (from the command line or the Python API)
and handed down whole, rather than option by option through every layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from retrace.errors import UsageError
from retrace.vocabulary import Boundary

if TYPE_CHECKING:
    from retrace.trace.callset import CallSet


class _ProfileFields(NamedTuple):
    selections: Mapping[Boundary, str]  # in glretrace's syntax
    repeat: int  # measured runs per pass: the table has their median
    warmup: int  # runs per pass before those, not kept (with --loop: loops)
    stats: bool  # min, p95 and stddev of the runs beside the median
    strict: bool  # a replay that departs from its trace fails (exit 3)
    frames: tuple[int, int | None]  # measure frames first..last (0-based) only
    call_range: str | None  # --calls: the call set whose rows are measured
    # --loop N: then replay the frames measured N more times, measured (N < 0: until
    # interrupted, the tables holding the loops measured; 0, as in glretrace: no loop)
    loop: int | None


class ProfileOptions(_ProfileFields):
    """The selection per table, and how each pass is repeated, checked when made. (A
    NamedTuple, as `ReplayOptions` is: a frozen dataclass costs a millisecond to define, in
    every profile's start-up.)"""

    __slots__ = ()

    def __new__(
        cls,
        selections: Mapping[Boundary, str] | None = None,
        repeat: int = 1,
        warmup: int = 0,
        stats: bool = False,
        strict: bool = False,
        frames: tuple[int, int | None] = (0, None),
        call_range: str | None = None,
        loop: int | None = None,
    ) -> ProfileOptions:
        if repeat < 1 or warmup < 0:
            raise UsageError("--repeat must be at least 1 and --warmup at least 0")
        if stats and repeat < 2:
            raise UsageError(
                "--stats is over --repeat's runs (min, p95, stddev): give --repeat N, N >= 2"
            )
        if loop == 0:
            loop = None
        if loop is not None and loop < 0 and repeat > 1:
            raise UsageError(
                "--loop without a count loops until interrupted: --repeat would never repeat "
                "it (give --loop=N)"
            )
        fields = ({} if selections is None else selections, repeat, warmup, stats, strict)
        return super().__new__(cls, *fields, frames, call_range, loop)

    def replace(self, **changes: Any) -> ProfileOptions:
        """These options with some changed (checked again)."""
        return ProfileOptions(**{**self._asdict(), **changes})

    @property
    def warmup_runs(self) -> int:
        """Replays of every pass before its measured ones (with --loop, --warmup counts loops
        instead)."""
        return 0 if self.loop is not None else self.warmup

    @property
    def calls(self) -> CallSet | None:
        """The --calls call set, parsed (the spec is kept as text, for the manifest)."""
        if self.call_range is None:
            return None
        from retrace.trace.callset import CallSet

        return CallSet.parse(self.call_range)

    @classmethod
    def select(
        cls,
        per_frame: str | None = None,
        per_call: str | None = None,
        per_drawcall: str | None = None,
        *,
        frames: str | None = None,
        calls: str | None = None,
        **how: Any,
    ) -> ProfileOptions:
        """Options from `--pframes/--pcalls/--pdrawcalls` (None or empty: no such table) and
        the text of `--frames A-B` and `--calls CALLSET` (None: the whole trace), checked
        here (UsageError) for the command line and the API alike."""
        given = {
            Boundary.FRAME: per_frame,
            Boundary.CALL: per_call,
            Boundary.DRAWCALL: per_drawcall,
        }
        if frames is not None or calls is not None:  # (call sets' modules: only for a part)
            from retrace.trace.callset import CallSet, frame_range

            how["frames"] = frame_range(frames)
            if calls is not None:
                CallSet.parse(calls)  # a bad call set is a usage error now, not in the child
        return cls({b: spec for b, spec in given.items() if spec}, call_range=calls, **how)

    def to_json(self) -> dict[str, Any]:
        return {
            "selections": {b.name: spec for b, spec in self.selections.items()},
            "repeat": self.repeat,
            "warmup": self.warmup,
            "stats": self.stats,
            "strict": self.strict,
            "frames": list(self.frames),
            "calls": self.call_range,
            "loop": self.loop,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProfileOptions:
        """Raises KeyError or TypeError on what `to_json` did not write."""
        selections = {Boundary[name]: spec for name, spec in data["selections"].items()}
        how = {k: data[k] for k in ("repeat", "warmup", "stats", "strict") if k in data}
        first, last = data.get("frames", (0, None))
        return cls(
            selections,
            frames=(first, last),
            call_range=data.get("calls"),
            loop=data.get("loop"),
            **how,
        )


class LegacyOptions(NamedTuple):
    """glretrace's legacy profiler (`retrace.profile.legacy`): what its per-call lines
    measure (--pcpu, --pgpu, --ppd, --pmem), --pframe-times, and --min-cpu-time. (This and
    `ProfileRun` are NamedTuples, as `ReplayOptions` is: a dataclass costs a millisecond
    or more to define, in the command's start-up.)"""

    cpu: bool = False
    gpu: bool = False
    pixels: bool = False
    memory: bool = False
    frame_times: bool = False
    min_cpu_time: int = 1000  # ns: with `cpu`, calls faster than this get no line

    @property
    def chosen(self) -> bool:
        """Whether any legacy option is on (then the profile prints the legacy lines)."""
        return self.cpu or self.gpu or self.pixels or self.memory or self.frame_times


class ProfileRun(NamedTuple):
    """Where a profile run delivers, whatever it measures: the tables (`output`, None:
    standard output), the result store (made in `store_dir`, None: a temporary folder;
    kept after the run with `keep_store`), the progress lines (`progress`, None: none)."""

    output: str | None = None
    store_dir: str | None = None
    keep_store: bool = False
    progress: TextIO | None = None
