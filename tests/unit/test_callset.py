"""Call-set grammar: expected values come from apitrace's documented grammar."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrace.errors import UsageError
from retrace.trace.callset import UNBOUNDED, CallSet
from retrace.trace.flags import CallFlag

FRAME = int(CallFlag.END_FRAME)
DRAW = int(CallFlag.RENDER)
FBO = int(CallFlag.SWAP_RENDERTARGET)
SWAP = int(CallFlag.SWAPBUFFERS)


def selected(callset: CallSet, upto: int = 30, flags: int = 0) -> list[int]:
    return [n for n in range(upto) if callset.contains(n, flags)]


# --- intervals -------------------------------------------------------------


def test_star_is_every_call() -> None:
    for callset in (CallSet.parse("*"), CallSet.all()):
        assert callset
        assert callset.contains(0)
        assert callset.contains(123_456_789, DRAW)
        assert callset.contains(UNBOUNDED)
        assert (callset.first, callset.last) == (0, UNBOUNDED)


def test_single_call() -> None:
    assert selected(CallSet.parse("4")) == [4]


def test_list_of_calls() -> None:
    assert selected(CallSet.parse("0,2,4,5")) == [0, 2, 4, 5]


def test_whitespace_separates_like_commas() -> None:
    assert selected(CallSet.parse("0 2\t4\n5\r")) == [0, 2, 4, 5]
    assert selected(CallSet.parse(" 1 , 3 ,5 ")) == [1, 3, 5]


def test_closed_interval_is_inclusive() -> None:
    assert selected(CallSet.parse("3-6")) == [3, 4, 5, 6]
    assert selected(CallSet.parse("3 - 6")) == [3, 4, 5, 6]


def test_open_interval_runs_to_the_end() -> None:
    callset = CallSet.parse("25-")
    assert selected(callset) == [25, 26, 27, 28, 29]
    assert callset.contains(10**12)
    assert (callset.first, callset.last) == (25, UNBOUNDED)


def test_whitespace_after_dash_keeps_the_interval_going() -> None:
    # Whitespace is skipped after every token, so "5- 7" is "5-7", not "5-" and "7".
    assert selected(CallSet.parse("5- 7")) == [5, 6, 7]
    assert selected(CallSet.parse("5-, 7"), upto=10) == [5, 6, 7, 8, 9]


def test_ranges_need_no_separator() -> None:
    assert selected(CallSet.parse("1-2 7")) == [1, 2, 7]
    # "12-" is open-ended, so "frame" starts a second range.
    callset = CallSet.parse("12-frame")
    assert callset.contains(3, FRAME)
    assert not callset.contains(3)
    assert callset.contains(40)


def test_overlapping_and_unsorted_ranges() -> None:
    assert selected(CallSet.parse("20-22,1-3,2-5,5,9")) == [1, 2, 3, 4, 5, 9, 20, 21, 22]


def test_backwards_interval_selects_nothing() -> None:
    callset = CallSet.parse("10-5")
    assert not callset
    assert selected(callset) == []
    assert selected(CallSet.parse("10-5,7")) == [7]


def test_empty_items_are_ignored() -> None:
    assert selected(CallSet.parse("1,,2,")) == [1, 2]
    assert not CallSet.parse("")
    assert not CallSet.parse(" , ")
    assert not CallSet.parse("").contains(0)


def test_largest_call_number() -> None:
    assert CallSet.parse(str(UNBOUNDED)).contains(UNBOUNDED)


def test_negative_numbers_are_never_contained() -> None:
    assert not CallSet.parse("*").contains(-1)
    assert not CallSet.parse("0-5,7/2").contains(-1)


# --- steps -----------------------------------------------------------------


def test_step_counts_from_the_interval_start() -> None:
    # The docs say "0-100/2" is 1, 3, ..., 99; apitrace computes (n - start) % step.
    callset = CallSet.parse("0-100/2")
    assert [n for n in range(120) if callset.contains(n)] == list(range(0, 101, 2))
    assert selected(CallSet.parse("3-20/5")) == [3, 8, 13, 18]


def test_step_on_star_and_open_interval() -> None:
    assert selected(CallSet.parse("*/10")) == [0, 10, 20]
    assert selected(CallSet.parse("7-/4")) == [7, 11, 15, 19, 23, 27]
    assert CallSet.parse("7-/4").contains(7 + 4 * 10**9)


def test_step_on_single_call() -> None:
    assert selected(CallSet.parse("5/3")) == [5]


def test_step_ignores_flags() -> None:
    assert selected(CallSet.parse("0-9/3"), flags=DRAW) == [0, 3, 6, 9]


# --- frequencies -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "matching", "other"),
    [
        ("frame", [FRAME, SWAP], [DRAW, FBO]),
        ("draw", [DRAW, DRAW | FRAME], [FRAME, FBO]),
        ("render", [DRAW], [FRAME, FBO]),
        # apitrace's render-target mask includes END_FRAME: a swap starts a new target.
        ("fbo", [FBO, FRAME, SWAP], [DRAW]),
        ("rendertarget", [FBO, FRAME], [DRAW]),
    ],
)
def test_frequency_selects_calls_by_flags(name: str, matching: list[int], other: list[int]) -> None:
    for spec in (name, f"*/{name}", f"0-100/{name}"):
        callset = CallSet.parse(spec)
        assert callset
        for flags in matching:
            assert callset.contains(50, flags), (spec, flags)
        for flags in [0, *other]:
            assert not callset.contains(50, flags), (spec, flags)


def test_frequency_limits_the_interval() -> None:
    callset = CallSet.parse("0-1000/draw")
    assert callset.contains(1000, DRAW)
    assert not callset.contains(1001, DRAW)
    assert (callset.first, callset.last) == (0, 1000)
    assert CallSet.parse("5/frame").contains(5, FRAME)
    assert not CallSet.parse("5/frame").contains(6, FRAME)


def test_plain_range_ignores_flags_alongside_frequency() -> None:
    callset = CallSet.parse("10-12, 20-/draw")
    assert callset.contains(11)
    assert callset.contains(11, FRAME)
    assert not callset.contains(15, DRAW)
    assert callset.contains(25, DRAW)
    assert not callset.contains(25, FRAME)


def test_bare_frequency_is_open_ended() -> None:
    callset = CallSet.parse("frame")
    assert callset.contains(10**15, SWAP)
    assert (callset.first, callset.last) == (0, UNBOUNDED)


# --- first / last ------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "first", "last"),
    [
        ("7", 7, 7),
        ("5-10,20-30", 5, 30),
        ("30,2", 2, 30),
        ("3-20/5", 3, 20),  # a stepped range reports its stop, not its last step
        ("100-200/fbo, 40", 40, 200),
        ("5-", 5, UNBOUNDED),
        ("*/3", 0, UNBOUNDED),
        ("draw", 0, UNBOUNDED),
        ("10-5,8", 8, 8),  # a backwards interval does not count
        ("", 0, UNBOUNDED),  # an empty set claims no bounds
        ("10-5", 0, UNBOUNDED),
    ],
)
def test_first_and_last(spec: str, first: int, last: int) -> None:
    callset = CallSet.parse(spec)
    assert (callset.first, callset.last) == (first, last)


# --- @FILE -------------------------------------------------------------------


def test_file_uses_the_same_syntax(tmp_path: Path) -> None:
    listing = tmp_path / "calls.txt"
    listing.write_text("1\n3, 5-6\n\t8-10/2\n20/draw,\n")
    callset = CallSet.parse(f"@{listing}")
    assert selected(callset) == [1, 3, 5, 6, 8, 10]
    assert callset.contains(20, DRAW)
    assert (callset.first, callset.last) == (1, 20)


def test_file_mixed_with_ranges(tmp_path: Path) -> None:
    listing = tmp_path / "calls.txt"
    listing.write_text("4 5\n")
    assert selected(CallSet.parse(f"1,@{listing},25-")) == [1, 4, 5, 25, 26, 27, 28, 29]


def test_file_without_final_newline(tmp_path: Path) -> None:
    listing = tmp_path / "calls.txt"
    listing.write_text("2\n12")
    assert selected(CallSet.parse(f"@{listing}")) == [2, 12]


def test_empty_file_is_an_empty_set(tmp_path: Path) -> None:
    listing = tmp_path / "calls.txt"
    listing.write_text("\n  \n")
    assert not CallSet.parse(f"@{listing}")


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(UsageError, match=r"cannot read .*nope\.txt.*No such file"):
        CallSet.parse(f"@{missing}")


@pytest.mark.parametrize(
    ("content", "where", "problem"),
    [
        ("1\n# comment\n", "line 2, column 1", "found '#'"),
        ("1\n2 @other\n", "line 2, column 3", "cannot nest"),
        ("1,,2\n", "line 1, column 3", "found ','"),
        ("1-3\n4/x\n", "line 2, column 3", "unknown frequency 'x'"),
    ],
)
def test_bad_file_content_names_file_and_line(
    tmp_path: Path, content: str, where: str, problem: str
) -> None:
    listing = tmp_path / "calls.txt"
    listing.write_text(content)
    with pytest.raises(UsageError) as raised:
        CallSet.parse(f"@{listing}")
    message = str(raised.value)
    assert f"calls.txt {where}:" in message
    assert problem in message
    assert "\n" not in message


# --- malformed specs ---------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("12-x", "column 4: unknown frequency 'x'"),
        ("1-5/", "column 5: expected a step or a frequency after '/', found end of input"),
        ("1-5/-", "column 5: expected a step or a frequency after '/', found '-'"),
        ("0-10/0", "column 6: a step after '/' must be at least 1"),
        ("-5", "column 1: expected a call number, '*' or a frequency, found '-'"),
        ("1,x5", "column 3: unknown frequency 'x'"),
        ("Frame", "found 'F' (frequencies are lowercase)"),
        ("1-5/draw/2", "found '/'"),
        ("frame/2", "found '/'"),
        ("*-3", "found '-'"),
        ("1;2", "found ';'"),
        (" @calls.txt", "found '@' ('@FILE' must start a comma-separated item"),
        ("1\x0b2", "found '\\x0b'"),
        (str(UNBOUNDED + 1), f"call number {UNBOUNDED + 1} is too large"),
    ],
)
def test_malformed_spec(spec: str, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        CallSet.parse(spec)
    text = str(raised.value)
    assert text.startswith('invalid call set "')
    assert message in text
    assert "\n" not in text


def test_message_quotes_the_whole_spec() -> None:
    with pytest.raises(UsageError, match=r'^invalid call set "1,2-x" at column 5: '):
        CallSet.parse("1,2-x")


# --- properties ----------------------------------------------------------------

_numbers = st.integers(min_value=0, max_value=60)
# (start, stop) with stop None for "start-" and start == stop written as one number.
_intervals = st.tuples(_numbers, st.one_of(st.none(), _numbers))


def _write(start: int, stop: int | None, style: int) -> str:
    if stop is None:
        return f"{start}-"
    if start == stop and style == 0:
        return str(start)
    return f"{start}-{stop}" if style < 2 else f"{start} - {stop}"


@given(
    st.lists(st.tuples(_intervals, st.integers(0, 2), st.sampled_from([",", " ", " , ", "\n"]))),
    st.lists(st.integers(min_value=0, max_value=80), max_size=20),
)
def test_plain_ranges_match_model(items: list, probes: list[int]) -> None:
    # After "N-" whitespace alone would glue the next number on as the stop ("5- 7" is 5-7).
    spec = "".join(
        _write(start, stop, style) + ("," if stop is None else sep)
        for (start, stop), style, sep in items
    )
    bounds = [(start, UNBOUNDED if stop is None else stop) for (start, stop), _, _ in items]
    live = [(lo, hi) for lo, hi in bounds if lo <= hi]
    callset = CallSet.parse(spec)
    assert bool(callset) == bool(live)
    for n in [*probes, *range(0, 70)]:
        assert callset.contains(n, DRAW) == any(lo <= n <= hi for lo, hi in live), n
    assert callset.first == min((lo for lo, _ in live), default=0)
    assert callset.last == max((hi for _, hi in live), default=UNBOUNDED)


_suffixes = st.one_of(
    st.none(), st.integers(min_value=1, max_value=7), st.sampled_from(["frame", "draw", "fbo"])
)
_MASKS = {"frame": FRAME, "draw": DRAW, "fbo": FRAME | FBO}


@given(
    st.lists(st.tuples(_numbers, _numbers, _suffixes), max_size=6),
    st.sampled_from([0, FRAME, DRAW, FBO, SWAP, DRAW | FBO]),
)
def test_steps_and_frequencies_match_model(items: list, flags: int) -> None:
    parts = []
    for start, stop, suffix in items:
        parts.append(f"{start}-{stop}" + ("" if suffix is None else f"/{suffix}"))
    callset = CallSet.parse(",".join(parts))

    def model(n: int) -> bool:
        for start, stop, suffix in items:
            if not start <= n <= stop:
                continue
            if suffix is None:
                return True
            if isinstance(suffix, int):
                if (n - start) % suffix == 0:
                    return True
            elif flags & _MASKS[suffix]:
                return True
        return False

    for n in range(0, 65):
        assert callset.contains(n, flags) == model(n), n


@given(
    spec=st.sampled_from(
        ["*", "1-100", "5,7,9-20/3", "*/frame", "10-/draw", "3 12frame 40-50/2", "0-5/fbo,100-"]
    ),
    calls=st.lists(
        st.tuples(
            st.one_of(st.integers(0, 300), st.just(2**64 - 1)),
            st.sampled_from([0, 1, 2, 4, 8, 16, 32, 0xFFFF]),
        ),
        max_size=50,
    ),
)
def test_contains_many_answers_as_contains(spec, calls):
    callset = CallSet.parse(spec)
    nos = np.array([n for n, _ in calls], np.uint64)
    flags = np.array([f for _, f in calls], np.uint32)
    expected = [callset.contains(n, f) for n, f in calls]
    assert callset.contains_many(nos, flags).tolist() == expected
