"""Call sets: apitrace's little language for choosing calls by number and kind.

A call set selects the calls that `dump --calls` prints, that replay
snapshots (`--snapshot`) and that replay skips (`--ignore-calls`).  The
grammar follows apitrace's `trace_callset.cpp`:

    callset   = item ( ',' item )*        items are split on commas first
    item      = '@' FILENAME              the file holds ranges, same syntax
              | ranges
    ranges    = range ( ','? range )*     whitespace or a comma separates
    range     = interval ( '/' suffix )?
              | frequency                 the same as '*/frequency'
    interval  = '*' | N | N '-' | N '-' M  'N-' runs to the end of the trace
    suffix    = STEP | frequency          STEP counts from the interval start
    frequency = 'frame' | 'draw' | 'render' | 'fbo' | 'rendertarget'

Ranges need no separator at all (`1 5`, `3*`, `12frame`), whitespace is
space, tab, CR or LF and may surround any token (so `5- 7` is `5-7`), and
frequency names are lowercase.  `@FILE` must start
its comma-separated item; the file has no comment syntax.  An interval that
runs backwards (`10-5`) selects nothing and is not an error, as in apitrace.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from typing import TYPE_CHECKING, NamedTuple, NoReturn

from retrace.errors import UsageError
from retrace.trace._scanner import calls_in
from retrace.trace.flags import CallFlag

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import Buffer

UNBOUNDED = 2**64 - 1
"""`CallSet.last` of a set with no upper end (and call numbers may not exceed it)."""

# apitrace's frequency masks: a call matches when it has any of the bits.
# `fbo` includes END_FRAME because a swap also starts a new render target.
_FREQUENCIES: dict[str, int] = {
    "frame": CallFlag.END_FRAME,
    "draw": CallFlag.RENDER,
    "render": CallFlag.RENDER,
    "fbo": CallFlag.END_FRAME | CallFlag.SWAP_RENDERTARGET,
    "rendertarget": CallFlag.END_FRAME | CallFlag.SWAP_RENDERTARGET,
}

_SPACE = re.compile(r"[ \t\r\n]*")
_NUMBER = re.compile(r"[0-9]+")
_WORD = re.compile(r"[a-z]+")


class _Range(NamedTuple):
    """Calls start..stop (inclusive) every `step` from start, with any bit of `freq`."""

    start: int
    stop: int
    step: int = 1
    freq: int | None = None  # None: calls of every kind

    def contains(self, call_no: int, flags: int) -> bool:
        return (
            self.start <= call_no <= self.stop
            and (call_no - self.start) % self.step == 0
            and (self.freq is None or bool(flags & self.freq))
        )


class _Parser:
    """Parses ranges from one text: a command-line item or a whole `@FILE`."""

    def __init__(self, spec: str, text: str, offset: int = 0, filename: str | None = None) -> None:
        self.spec = spec  # the whole user spec, for messages
        self.text = text
        self.offset = offset  # where `text` starts within `spec`
        self.filename = filename
        self.pos = 0

    def parse(self) -> list[_Range]:
        ranges: list[_Range] = []
        self._skip_space()
        while self.pos < len(self.text):
            ranges.append(self._range())
            self._accept(",")
        return ranges

    def _range(self) -> _Range:
        if _WORD.match(self.text, self.pos):
            return _Range(0, UNBOUNDED, freq=self._frequency())
        if self._accept("*"):
            start, stop = 0, UNBOUNDED
        elif _NUMBER.match(self.text, self.pos):
            start = stop = self._number()
            if self._accept("-"):
                stop = self._number() if _NUMBER.match(self.text, self.pos) else UNBOUNDED
        else:
            hint = ""
            if self._peek() == "@":
                hint = " ('@FILE' must start a comma-separated item and cannot nest)"
            elif (self._peek() or "").isupper():
                hint = " (frequencies are lowercase)"
            self._fail("expected a call number, '*' or a frequency" + self._found() + hint)
        if not self._accept("/"):
            return _Range(start, stop)
        if _NUMBER.match(self.text, self.pos):
            at = self.pos
            step = self._number()
            if step == 0:
                self._fail("a step after '/' must be at least 1", at)
            return _Range(start, stop, step=step)
        if not _WORD.match(self.text, self.pos):
            self._fail("expected a step or a frequency after '/'" + self._found())
        return _Range(start, stop, freq=self._frequency())

    def _number(self) -> int:
        match = _NUMBER.match(self.text, self.pos)
        assert match is not None  # callers look ahead for a digit
        if int(match.group()) > UNBOUNDED:
            self._fail(f"call number {match.group()} is too large")
        self.pos = match.end()
        self._skip_space()
        return int(match.group())

    def _frequency(self) -> int:
        match = _WORD.match(self.text, self.pos)
        assert match is not None  # callers look ahead for a word
        freq = _FREQUENCIES.get(match.group())
        if freq is None:
            self._fail(
                f"unknown frequency {match.group()!r} "
                "(expected frame, draw, render, fbo or rendertarget)"
            )
        self.pos = match.end()
        self._skip_space()
        return freq

    def _accept(self, char: str) -> bool:
        if self._peek() != char:
            return False
        self.pos += 1
        self._skip_space()
        return True

    def _peek(self) -> str | None:
        return self.text[self.pos] if self.pos < len(self.text) else None

    def _found(self) -> str:
        char = self._peek()
        return ", found end of input" if char is None else f", found {char!r}"

    def _skip_space(self) -> None:
        space = _SPACE.match(self.text, self.pos)
        assert space is not None  # it matches the empty string
        self.pos = space.end()

    def _fail(self, problem: str, at: int | None = None) -> NoReturn:
        at = self.pos if at is None else at
        if self.filename is None:
            where = f"column {self.offset + at + 1}"
        else:
            line = self.text.count("\n", 0, at) + 1
            column = at - (self.text.rfind("\n", 0, at) + 1) + 1
            where = f"{self.filename} line {line}, column {column}"
        raise UsageError(f"invalid call set {_quote(self.spec)} at {where}: {problem}")


def _quote(text: str) -> str:
    """Double-quotes `text` on one line, so that an error message stays one line."""
    escaped = text.encode("unicode_escape").decode("ascii").replace('"', '\\"')
    return f'"{escaped}"'


def _read_file(spec: str, filename: str) -> str:
    try:
        with open(filename, "rb") as file:
            # Latin-1 never fails; any byte outside the grammar is reported as found.
            return file.read().decode("latin-1")
    except OSError as error:
        reason = error.strerror or str(error)
        raise UsageError(
            f"invalid call set {_quote(spec)}: cannot read {_quote(filename)}: {reason}"
        ) from None


class CallSet:
    """A set of call numbers, optionally restricted to calls of some kind.

    Build one with `parse`; `contains` is asked once per call of a trace.
    """

    __slots__ = (
        "_spec", "_starts", "_stops", "_single", "_filtered", "_first", "_last", "_packed"
    )  # fmt: skip

    def __init__(self, spec: str, ranges: list[_Range]) -> None:
        self._spec = spec
        ranges = [r for r in ranges if r.start <= r.stop]
        plain = sorted((r.start, r.stop) for r in ranges if r.step == 1 and r.freq is None)
        merged: list[list[int]] = []
        for start, stop in plain:
            if merged and start <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], stop)
            else:
                merged.append([start, stop])
        # Disjoint sorted intervals, looked up by bisection on their starts.
        self._starts = [start for start, _ in merged]
        self._stops = [stop for _, stop in merged]
        # Ranges with a step or a frequency, by start so that a lookup stops early.
        self._filtered = sorted(
            (r for r in ranges if r.step != 1 or r.freq is not None), key=lambda r: r.start
        )
        # The common cases, `*` and one plain range, need just two comparisons.
        self._single = merged[0] if len(merged) == 1 and not self._filtered else None
        # Like apitrace, an empty set claims no bounds: 0 to UNBOUNDED.
        self._first = min((r.start for r in ranges), default=0)
        self._last = max((r.stop for r in ranges), default=UNBOUNDED)
        self._packed: tuple[array[int], array[int]] | None = None  # for `mark`, made at first use

    @classmethod
    def parse(cls, spec: str) -> CallSet:
        """Parses a call set spec; raises UsageError naming the spec and the problem."""
        ranges: list[_Range] = []
        offset = 0
        for item in spec.split(","):
            if item.startswith("@"):
                filename = item[1:]
                text = _read_file(spec, filename)
                ranges += _Parser(spec, text, filename=filename).parse()
            else:
                ranges += _Parser(spec, item, offset).parse()
            offset += len(item) + 1
        return cls(spec, ranges)

    @classmethod
    def all(cls) -> CallSet:
        """Every call: the default of `dump --calls`."""
        return cls.parse("*")

    def contains(self, call_no: int, flags: int = 0) -> bool:
        """Whether the call is selected; `flags` are its CallFlag bits.

        Unlike apitrace, whose default flags match every frequency, a call
        given without flags matches no `/frame`, `/draw` or `/fbo` range.
        """
        single = self._single
        if single is not None:
            return single[0] <= call_no <= single[1]
        index = bisect_right(self._starts, call_no) - 1
        if index >= 0 and call_no <= self._stops[index]:
            return True
        for candidate in self._filtered:
            if candidate.start > call_no:
                break
            if candidate.contains(call_no, flags):
                return True
        return False

    def mark(
        self,
        asked: bytearray,
        call_nos: Buffer,
        flags: Buffer,
        kinds: Buffer | None = None,
        invert: bool = False,
    ) -> None:
        """`contains` for many calls at once, in C (no numpy): set `asked[i]` to 1 where
        call i is selected (with `invert`: where it is not). `call_nos`: uint64 per call;
        their CallFlag bits: `flags[kinds[i]]` (`kinds`: uint32 per call, e.g. its
        signature id; `flags`: uint64 per kind), or without `kinds` `flags[i]`."""
        if self._packed is None:
            intervals = array(
                "Q", [n for pair in zip(self._starts, self._stops, strict=True) for n in pair]
            )
            ranges = array("Q", [n for r in self._filtered for n in (*r[:3], r.freq or 0)])
            self._packed = intervals, ranges
        calls_in(call_nos, kinds, flags, *self._packed, asked, invert)

    def contains_many(self, call_nos: np.ndarray, flags: np.ndarray) -> np.ndarray:
        """`contains` for arrays of call numbers and their CallFlag bits, as a bool array (for
        tools that work on whole columns: numpy is imported here, not with the module)."""
        import numpy as np

        asked = bytearray(len(call_nos))
        nos, bits = (np.ascontiguousarray(a, np.uint64).data for a in (call_nos, flags))
        self.mark(asked, nos, bits)
        return np.frombuffer(asked, bool)

    @property
    def first(self) -> int:
        """The lowest call number any range starts at (0 for an empty set)."""
        return self._first

    @property
    def last(self) -> int:
        """The highest call number any range reaches, so readers can stop early.

        UNBOUNDED when a range is open-ended (`*`, `N-`, a bare frequency) or
        the set is empty.  A stepped or filtered range counts up to its stop.
        """
        return self._last

    def __bool__(self) -> bool:
        return bool(self._starts or self._filtered)

    def __repr__(self) -> str:
        return f"CallSet.parse({self._spec!r})"


_FRAMES = re.compile(r"^(\d+)?(?:-(\d+)?)?$")


def frame_range(spec: str | None) -> tuple[int, int | None]:
    """`--frames A-B`, `A-` or `N` (0-based, inclusive) as (first, last or None); None: all."""
    if spec is None:
        return 0, None
    match = _FRAMES.match(spec.strip())
    if not match or not spec.strip():
        raise UsageError(f'--frames: expected "A-B", "A-" or "N" (0-based frames), got "{spec}"')
    first = int(match[1] or 0)
    last = int(match[2]) if match[2] else (first if "-" not in spec else None)
    if last is not None and last < first:
        raise UsageError(f"--frames: {spec} is an empty range")
    return first, last
