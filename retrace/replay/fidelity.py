"""Whether a replay did what the trace did, and what it did not.

A replay that departs from its trace draws other frames, and every time, pixel
count and counter measured on it is then a number that looks right and means
nothing. So every replay and profile ends by saying so when it departed:
calls it could not issue (and why), data the program wrote into mapped
buffers that landed in no mapping, GL errors the program's own glGetError did
not see, conditional renders on queries the profiler had to leave out, and
with --query-handling check, query results unlike the trace's. The per-kind
lines come first, then one summary line; `--strict` makes any departure an
error (exit 3). GL errors the trace cannot vouch for are reported only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from retrace.errors import RetraceError
from retrace.replay import _vm

if TYPE_CHECKING:
    from retrace.gl.registry import Registry

T = TypeVar("T", int, tuple[int, int, int])  # where a departure was first seen

# glGetError keeps answering GL_CONTEXT_LOST on a lost context: drain at most this many
_MAX_ERRORS_PER_CHECK = 32


class FidelityError(RetraceError):
    """--strict: the replay departed from the trace."""

    exit_code = 3


def enum_name(code: int, enum_names: Mapping[int, list[str]]) -> str:
    """GL_INVALID_OPERATION for 0x502: the GL_ name among the registry's names for a value."""
    return next((n for n in enum_names.get(code, ()) if n.startswith("GL_")), hex(code))


class GlErrors:
    """GL errors the driver raised during a pass.

    Where the traced program called glGetError, the trace says which error it
    got: there the replay asks the driver too (`check`), and an error the
    program did not get is a departure. Errors raised where the program never
    asked are drained at frame ends, context switches and the end of the pass
    (and after every call with `replay -v`): the trace cannot say whether the
    program had them too, so they are reported but do not fail --strict.
    """

    __slots__ = (
        "get_error_address",
        "registry",
        "counts",
        "unexpected",
        "first_unexpected",
        "frames",
        "first_frame",
        "_pending",
        "_names",
    )
    first_unexpected: int | None  # the call number of the first glGetError contradicted
    frames: int  # frames ended so far this pass
    first_frame: int | None  # the frame by whose end the first unasked error came

    def __init__(self, get_error_address: int, registry: Registry) -> None:
        self.get_error_address = get_error_address  # glGetError, called in C (`_vm.gl_errors`)
        self.registry = registry  # names the errors (its index of names is made on first use)
        self.counts: Counter[str] = Counter()  # where the program never asked
        self.unexpected: Counter[str] = Counter()  # where it got no such error
        self._pending: list[str] = []  # drained, not yet accounted for
        self._names: dict[int, str] = {}  # error code -> name (`_name`)
        self.clear()

    def clear(self) -> None:
        self.counts.clear()
        self.unexpected.clear()
        self.first_unexpected = None
        self.frames = 0
        self.first_frame = None
        self._pending.clear()

    def drain(self) -> list[str]:
        """The errors raised on the current context since the last drain, by name; they
        stay pending until the program's next glGetError or the next `settle`."""
        codes = _vm.gl_errors(self.get_error_address, _MAX_ERRORS_PER_CHECK)
        if not codes:  # (most often)
            return []
        names = [self._name(code) for code in codes]
        self._pending += names
        return names

    def check(self, traced: int, call_no: int) -> None:
        """The program's own glGetError, which returned `traced` when it was traced: pending
        errors other than that one are errors the program did not get."""
        self.drain()
        expected = self._name(traced) if traced else None
        unexpected = [name for name in self._pending if name != expected]
        self._pending.clear()
        if unexpected:
            self.unexpected.update(unexpected)
            if self.first_unexpected is None:
                self.first_unexpected = call_no

    def _name(self, code: int) -> str:
        """`enum_name` of an error code, found by a scan of the registry's enumerants on its
        first use: the index of all their names took 2 ms, in the loop of a trace whose
        program calls glGetError, to name a few codes."""
        name = self._names.get(code)
        if name is None:
            found = (n for n, v in self.registry.enums.items() if v == code and n.startswith("GL_"))
            name = self._names[code] = next(found, hex(code))
        return name

    def settle(self) -> None:
        """At a frame end, context switch or the end of a pass: pending errors are ones the
        program never asked about."""
        self.drain()
        if self._pending:
            self.counts.update(self._pending)
            self._pending.clear()
            if self.first_frame is None:
                self.first_frame = self.frames


class UndrawnFrames:
    """Frames a desktop-GL window ended with no draw buffer: GL_DRAW_BUFFER = GL_NONE on
    the default framebuffer at the frame's end, in a trace that never chose draw buffers itself
    (so it never asked for GL_NONE). Whatever the frame drew on its window landed
    nowhere: a driver that gave the context no buffer (NVIDIA's, to a context first
    bound without a surface), or a replay bug. Checked at each frame end
    (`WindowSystem.check_drawn`)."""

    __slots__ = ("count", "first_frame")
    first_frame: int | None  # the first such frame (1-based)

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.count = 0
        self.first_frame = None

    def add(self, frame: int) -> None:
        self.count += 1
        if self.first_frame is None:
            self.first_frame = frame


class Fidelity:
    """What one replay left out or got wrong; empty when it was faithful. (A plain class: a
    dataclass costs every replay's start-up the dataclasses module and its class's making.)"""

    def __init__(
        self,
        skipped: dict[str, tuple[int, str]],  # function -> (calls not issued, why)
        lost_memcpys: int = 0,  # fake memcpys whose destination is in no live mapping
        first_lost: int | None = None,
        unexpected_errors: Counter[str] | None = None,
        first_unexpected: int | None = None,
        gl_errors: Counter[str] | None = None,  # unvouched for: see GlErrors
        first_error_frame: int | None = None,
        left_out_queries: Counter[str] | None = None,  # target -> count
        unconditional_renders: int = 0,  # conditional renders on a query left out
        query_mismatches: int = 0,  # --query-handling check: results unlike the trace's
        first_query_mismatch: tuple[int, int, int] | None = None,  # call, replay's, trace's
        undrawn_frames: int = 0,  # see UndrawnFrames
        first_undrawn: int | None = None,
    ) -> None:
        self.skipped = skipped
        self.lost_memcpys = lost_memcpys
        self.first_lost = first_lost
        self.unexpected_errors = Counter() if unexpected_errors is None else unexpected_errors
        self.first_unexpected = first_unexpected
        self.gl_errors = Counter() if gl_errors is None else gl_errors
        self.first_error_frame = first_error_frame
        self.left_out_queries = Counter() if left_out_queries is None else left_out_queries
        self.unconditional_renders = unconditional_renders
        self.query_mismatches = query_mismatches
        self.first_query_mismatch = first_query_mismatch
        self.undrawn_frames = undrawn_frames
        self.first_undrawn = first_undrawn

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fidelity) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"Fidelity({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    @property
    def faithful(self) -> bool:
        """No departure the trace proves (GL errors it cannot vouch for are only warned of)."""
        departures = (self.skipped, self.lost_memcpys, self.unexpected_errors)
        counts = (self.unconditional_renders, self.query_mismatches, self.undrawn_frames)
        return not (any(departures) or any(counts))

    def warnings(self) -> list[str]:
        """One line per kind of departure, with its count and why."""
        lines = [
            f"retrace: warning: skipped {count} call(s) to {name}: {why}"
            for name, (count, why) in sorted(self.skipped.items())
        ]
        if self.lost_memcpys:
            lines.append(
                f"retrace: warning: {self.lost_memcpys} memcpy(s) into mapped buffers landed in no "
                f"live mapping (the first at {self.first_lost:#x}): their data is missing"
            )
        if self.unexpected_errors:
            lines.append(
                "retrace: warning: GL errors the traced program did not get "
                f"({_listed(self.unexpected_errors)}), the first before call "
                f"{self.first_unexpected}, where its own glGetError said otherwise"
            )
        if self.left_out_queries:
            lines.append(
                "retrace: warning: left out the program's own queries "
                f"({_listed(self.left_out_queries)}) "
                "while the profiler's queries used their target; the replay never reads "
                "their results"
            )
        if self.unconditional_renders:
            lines.append(
                f"retrace: warning: {self.unconditional_renders} conditional render(s) on the "
                "program's own queries, left out while the profiler used their target, "
                "drew unconditionally"
            )
        if self.first_query_mismatch is not None:
            call, got, traced = self.first_query_mismatch
            lines.append(
                f"retrace: warning: {self.query_mismatches} query result(s) differ from the "
                "trace's "
                f"(the first at call {call}: {got}, the trace has {traced})"
            )
        if self.undrawn_frames:
            lines.append(
                f"retrace: warning: {self.undrawn_frames} frame(s) ended with GL_NONE as their "
                f"window's draw buffer, the first at the swap ending frame {self.first_undrawn}, "
                "though the trace never chose draw buffers: what they drew on the window "
                "landed nowhere"
            )
        if self.gl_errors:
            lines.append(
                "retrace: warning: GL errors where the trace does not show whether the program "
                "had them "
                f"({_listed(self.gl_errors)}), the first by the end of frame "
                f"{self.first_error_frame}; `retrace replay -v` names the calls"
            )
        return lines

    def summary(self) -> str:
        """One line: how the replay departed from the trace."""
        parts = []
        if self.skipped:
            calls = sum(count for count, _ in self.skipped.values())
            parts.append(f"{calls} call(s) of {len(self.skipped)} function(s) not issued")
        if self.lost_memcpys:
            parts.append(f"{self.lost_memcpys} mapped-buffer write(s) lost")
        if self.unexpected_errors:
            parts.append(
                f"{sum(self.unexpected_errors.values())} GL error(s) the program did not get"
            )
        if self.unconditional_renders:
            parts.append(f"{self.unconditional_renders} conditional render(s) drawn always")
        if self.query_mismatches:
            parts.append(f"{self.query_mismatches} query result(s) unlike the trace's")
        if self.undrawn_frames:
            parts.append(f"{self.undrawn_frames} frame(s) drawn into no buffer")
        return "the replay departed from the trace: " + "; ".join(parts)

    def worst(self, other: Fidelity) -> Fidelity:
        """Of two replays of one trace (a profile's passes): every departure either had,
        at the larger count, and the earliest place each was first seen."""
        skipped = dict(other.skipped)
        for name, (count, why) in self.skipped.items():
            skipped[name] = max((count, why), skipped.get(name, (0, why)))
        return Fidelity(
            skipped,
            max(self.lost_memcpys, other.lost_memcpys),
            _first(self.first_lost, other.first_lost),
            self.unexpected_errors | other.unexpected_errors,
            _first(self.first_unexpected, other.first_unexpected),
            self.gl_errors | other.gl_errors,
            _first(self.first_error_frame, other.first_error_frame),
            self.left_out_queries | other.left_out_queries,
            max(self.unconditional_renders, other.unconditional_renders),
            max(self.query_mismatches, other.query_mismatches),
            _first(self.first_query_mismatch, other.first_query_mismatch),
            max(self.undrawn_frames, other.undrawn_frames),
            _first(self.first_undrawn, other.first_undrawn),
        )

    def as_dict(self) -> dict[str, object]:
        """For results that record how faithful their replay was."""
        return {
            "faithful": self.faithful,
            "skipped": {n: {"calls": c, "why": w} for n, (c, w) in sorted(self.skipped.items())},
            "lost_memcpys": self.lost_memcpys,
            "unexpected_gl_errors": dict(self.unexpected_errors),
            "gl_errors": dict(self.gl_errors),
            "left_out_queries": dict(self.left_out_queries),
            "unconditional_renders": self.unconditional_renders,
            "query_mismatches": self.query_mismatches,
            "undrawn_frames": self.undrawn_frames,
        }


def _first(a: T | None, b: T | None) -> T | None:
    """The earlier of two first places (call numbers, frames...), either may be unknown."""
    return b if a is None else a if b is None else min(a, b)


def _listed(counts: Counter[str]) -> str:
    return ", ".join(f"{n} {name}" for name, n in counts.most_common())
