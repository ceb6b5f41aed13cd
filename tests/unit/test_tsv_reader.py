"""read_tables parses rows in C (`retrace.writer._tsv`); these tests hold it to the Python
row reader it keeps as the reference (`tsv_reader._add_row`), line by line, on every form
of cell a profile can hold and on malformed rows. No GL needed."""

from __future__ import annotations

import io
import math
from array import array
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrace.errors import RetraceError
from retrace.vocabulary import Boundary
from retrace.writer import tsv_reader
from retrace.writer.tsv_reader import ParsedTable, read_tables


def reference(text: str | Iterable[str], source: str = "<stream>") -> list[ParsedTable]:
    """The tables of `text` (or of its lines) read one line at a time by the reference row
    reader, in order."""
    tables: list[ParsedTable] = []
    table = None
    names: dict[str, str] = {}
    for lineno, raw in enumerate(io.StringIO(text) if isinstance(text, str) else text, 1):
        line = raw.rstrip("\r\n")
        if table is None:
            if line == "#" or line.startswith("#\t"):
                table = tsv_reader._start_table(line.split("\t")[1:])
                tables.append(table)
        elif not line:
            table = None
        else:
            try:
                tsv_reader._add_row(table, line.split("\t"), names)
            except ValueError as exc:
                raise RetraceError(f"{source}:{lineno}: {exc}") from None
    return tables


def same(a: ParsedTable, b: ParsedTable) -> None:
    assert (a.metrics, a.names, a.frames_ended) == (b.metrics, b.names, b.frames_ended)
    assert a.errors == b.errors
    assert (a.call_nos, a.programs, a.frames) == (b.call_nos, b.programs, b.frames)
    for x, y in zip(a.values, b.values, strict=True):
        assert array("d", x).tobytes() == array("d", y).tobytes()  # NaN and -0.0 included


CELLS = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(-1e6, 1e6).map(lambda f: f"{f:.6f}"),
    st.sampled_from(
        [
            "-",
            "#ERR3",
            "#ERR0",
            "#ERR",
            "#ERRx",
            "nan",
            "-inf",
            "1e5",
            "1E-3",
            ".5",
            "5.",
            "-0",
            "-0.0",
            "1_000",
            " 7",
            "7 ",
            "+3",
            "0x10",
            "",
            "1.2.3",
            "00000000000000000012",
            "123456789012345678",
            "0.1234567890123456789",
        ]
    ),
)


@settings(max_examples=300)
@given(st.lists(st.lists(CELLS, min_size=2, max_size=2), min_size=1, max_size=20))
def test_cells_read_as_the_reference_reads_them(rows: list[list[str]]) -> None:
    lines = ["#\tcall no\tprogram\tname\tA\tB"]
    for i, cells in enumerate(rows):
        lines.append("\t".join(["call", str(i), "3", "glDrawArrays", *cells]))
        if i % 3 == 2:
            lines.append("frame_end")
    text = "\n".join(lines) + "\n\n"
    try:
        expected = reference(text)
    except RetraceError as exc:
        with pytest.raises(RetraceError) as raised:
            read_tables(io.StringIO(text))
        assert str(raised.value) == str(exc)
        return
    (got,) = read_tables(io.StringIO(text), call_table=Boundary.CALL).values()
    same(got, expected[0])


def test_frames_calls_and_draws_with_other_lines_between() -> None:
    text = (
        "retrace: measuring into /tmp/x\n"
        "#\tGPU Duration\tPixels Drawn\n"
        "frame\t100\t-\n"
        "frame\t#ERR2\t3.5\r\n"
        "\n"
        "#\tcall no\tprogram\tname\tGPU Duration\n"
        "call\t4\t1\tglDrawArrays\t12\n"
        "frame_end\n"
        "call\t9\t1\tglClear\t1_000\n"
        "call\t10\t2\tgl\u00e9Draw\t-0\n"
        "frame_end\n"
        "\n"
        "#\tcall no\tprogram\tname\tGPU Duration\n"
        "call\t4\t1\tglDrawArrays\t7\n"
        "\n"
        "Rendered 2 frames in 0.1 secs, average of 20 fps\n"
    )
    tables = read_tables(io.StringIO(text))
    frames, calls, draws = reference(text)
    same(tables[Boundary.FRAME], frames)
    same(tables[Boundary.CALL], calls)
    same(tables[Boundary.DRAWCALL], draws)
    assert tables[Boundary.FRAME].errors == {(1, 0): 2}
    assert list(tables[Boundary.CALL].frames) == [0, 1, 1]
    assert tables[Boundary.CALL].frames_ended == 2
    assert math.copysign(1, tables[Boundary.CALL].values[0][2]) == -1
    assert tables[Boundary.CALL].names[0] is tables[Boundary.DRAWCALL].names[0]


@pytest.mark.parametrize(
    ("row", "line"),
    [
        ("call\t5\t1\tglDrawArrays\t1\t2", 3),  # a value too many
        ("call\tfive\t1\tglDrawArrays\t1", 3),
        ("frame\t1", 3),
        ("call\t5\t1\tglDrawArrays\tmany", 3),
    ],
)
def test_malformed_rows_name_their_line(row: str, line: int) -> None:
    text = f"note\n#\tcall no\tprogram\tname\tA\n{row}\ncall\t6\t1\tglClear\t1\n"
    with pytest.raises(RetraceError) as expected:
        reference(text, "p.tsv")
    with pytest.raises(RetraceError) as got:
        read_tables(io.StringIO(text), "p.tsv")
    assert str(got.value) == str(expected.value)
    assert str(got.value).startswith(f"p.tsv:{line}: ")


def test_lines_without_line_ends_and_a_table_cut_at_the_end() -> None:
    """An iterable of lines (splitlines) reads like the file, and a table may end at EOF."""
    text = "#\tA\nframe\t1\nframe\t2"
    assert list(read_tables(text.splitlines())[Boundary.FRAME].values[0]) == [1.0, 2.0]
    same(read_tables(io.StringIO(text))[Boundary.FRAME], reference(text)[0])


def test_a_million_rows() -> None:
    """Column lengths and the frame of each row stay right across the C scanner's buffers."""
    rows = 1_000_000
    body = "".join(f"call\t{i}\t{i % 7}\tglDraw{i % 13}\t{i}.5\n" for i in range(rows))
    text = "#\tcall no\tprogram\tname\tA\n" + body + "frame_end\n"
    (table,) = read_tables(io.StringIO(text), call_table=Boundary.CALL).values()
    assert len(table) == rows and table.frames_ended == 1
    assert table.call_nos[-1] == rows - 1 and table.programs[-1] == (rows - 1) % 7
    assert table.values[0][123456] == 123456.5 and table.names[-1] == f"glDraw{(rows - 1) % 13}"
    assert len(set(map(id, table.names))) == 13
