"""MetricWriter / LegacyWriter output, checked against glretrace's formats as documented.

The expected strings are written out by hand from the format description
(shared/reference/glretrace-profiling.md), not captured from the writer.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from retrace.errors import RetraceError
from retrace.vocabulary import Boundary, Kind, Metric, NumType
from retrace.writer.store import Store
from retrace.writer.tsv import LEGACY_HEADER, LegacyWriter, MetricWriter, Table
from retrace.writer.tsv_reader import read_tables


def metric(name: str, num_type: NumType = NumType.INT64, kind: Kind = Kind.DURATION) -> Metric:
    return Metric("opengl", 0, 0, name, "", num_type, kind, "ns")


CPU = metric("CPU Duration")
GPU = metric("GPU Duration")
PIXELS = metric("Pixels Drawn", NumType.INT64, Kind.NUM)
MISSING = np.iinfo(np.int64).min
NAMES = ["glBindTexture", "glDrawElements", "glClear", "glDrawArrays"]


def render(*tables: Table, block_rows: int = 1 << 16) -> str:
    out = io.StringIO()
    MetricWriter(out, block_rows=block_rows).write_all(tables)
    return out.getvalue()


def frames_table() -> Table:
    # Two SwapBuffers, so three frame rows: the partial last frame counts.
    cpu = np.array([812345, 900000, 12], dtype=np.int64)
    gpu = np.array([655210, MISSING, 7], dtype=np.int64)
    return Table(Boundary.FRAME, [CPU, GPU], [cpu, gpu])


def calls_table(boundary: Boundary = Boundary.CALL) -> Table:
    return Table(
        boundary,
        [CPU, GPU],
        [
            np.array([5310, 2210, 1500, 800], dtype=np.int64),
            np.array([MISSING, 40112, 900, 600], dtype=np.int64),
        ],
        call_nos=np.array([175, 181, 190, 300]),
        programs=np.array([0, 3, 0, 3]),
        names=np.array([0, 1, 2, 3]),
        name_table=NAMES,
        frame_of_event=np.array([0, 0, 1, 2]),
        frames_ended=2,
    )


FRAMES_TEXT = (
    "#\tCPU Duration\tGPU Duration\nframe\t812345\t655210\nframe\t900000\t-\nframe\t12\t7\n\n"
)
CALLS_TEXT = (
    "#\tcall no\tprogram\tname\tCPU Duration\tGPU Duration\n"
    "call\t175\t0\tglBindTexture\t5310\t-\n"
    "call\t181\t3\tglDrawElements\t2210\t40112\n"
    "frame_end\n"
    "call\t190\t0\tglClear\t1500\t900\n"
    "frame_end\n"
    "call\t300\t3\tglDrawArrays\t800\t600\n"
    "\n"
)


def test_frames_table_two_metrics() -> None:
    assert render(frames_table()) == FRAMES_TEXT


def test_calls_table_frame_end_rows_and_no_frame_end_after_partial_frame() -> None:
    assert render(calls_table()) == CALLS_TEXT


def test_frame_ended_after_last_event_gets_its_frame_end() -> None:
    table = calls_table()
    table.frames_ended = 3  # the trace ends with a SwapBuffers: no partial frame
    assert render(table) == CALLS_TEXT[:-1] + "frame_end\n\n"


def test_frames_without_events_give_consecutive_frame_ends() -> None:
    table = Table(
        Boundary.DRAWCALL,
        [PIXELS],
        [np.array([30720, 0], dtype=np.int64)],
        call_nos=np.array([181, 400]),
        programs=np.array([3, 0]),
        names=np.array([0, 1]),
        name_table=["glDrawElements", "glClear"],
        frame_of_event=np.array([1, 3]),
        frames_ended=4,
    )
    assert render(table) == (
        "#\tcall no\tprogram\tname\tPixels Drawn\n"
        "frame_end\n"
        "call\t181\t3\tglDrawElements\t30720\n"
        "frame_end\n"
        "frame_end\n"
        "call\t400\t0\tglClear\t0\n"
        "frame_end\n"
        "\n"
    )


def test_tables_in_order_frames_calls_draws_each_followed_by_blank_line() -> None:
    draws = Table(
        Boundary.DRAWCALL,
        [GPU],
        [np.array([40112, 600], dtype=np.int64)],
        call_nos=np.array([181, 300]),
        programs=np.array([3, 3]),
        names=np.array([0, 1]),
        name_table=["glDrawElements", "glDrawArrays"],
        frame_of_event=np.array([0, 2]),
        frames_ended=2,
    )
    draws_text = (
        "#\tcall no\tprogram\tname\tGPU Duration\n"
        "call\t181\t3\tglDrawElements\t40112\n"
        "frame_end\n"
        "frame_end\n"
        "call\t300\t3\tglDrawArrays\t600\n"
        "\n"
    )
    assert render(draws, frames_table(), calls_table()) == FRAMES_TEXT + CALLS_TEXT + draws_text


def test_table_without_metrics_prints_nothing() -> None:
    assert render(Table(Boundary.FRAME, [], [])) == ""


def test_missing_values_from_short_columns_and_sentinels() -> None:
    floats = metric("Busy", NumType.DOUBLE, Kind.PERCENT)
    table = Table(
        Boundary.FRAME,
        [CPU, floats],
        [np.array([1], dtype=np.int64), np.array([math.nan, 2.5])],
        rows=3,
    )
    assert render(table) == "#\tCPU Duration\tBusy\nframe\t1\t-\nframe\t-\t2.5\nframe\t-\t-\n\n"


def test_number_formatting_follows_the_metric_type() -> None:
    as_float = metric("F", NumType.FLOAT)
    as_double = metric("D", NumType.DOUBLE)
    as_uint64 = metric("U", NumType.UINT64)
    as_bool = metric("B", NumType.BOOL)
    as_int = metric("I", NumType.INT64)
    table = Table(
        Boundary.FRAME,
        [as_float, as_double, as_uint64, as_bool, as_int],
        [
            np.array([0.5, 1234567.0, 1e-5, 100.0, -0.25], dtype=np.float32),
            np.array([3.14159265, 1e20, 0.0001, 812345.0, 1.0 / 3]),
            np.array([2**63 + 5, np.iinfo(np.uint64).max, 0, 1, 7], dtype=np.uint64),
            np.array([True, False, True, False, True]),
            np.array([3.0, 2.9, math.nan, -4.0, 0.0]),  # an integer metric in a float column
        ],
    )
    assert render(table) == (
        "#\tF\tD\tU\tB\tI\n"
        "frame\t0.5\t3.14159\t9223372036854775813\t1\t3\n"
        "frame\t1.23457e+06\t1e+20\t-\t0\t2\n"
        "frame\t1e-05\t0.0001\t0\t1\t-\n"
        "frame\t100\t812345\t1\t0\t-4\n"
        "frame\t-0.25\t0.333333\t7\t1\t0\n"
        "\n"
    )


def test_error_cells() -> None:
    table = Table(
        Boundary.FRAME,
        [CPU, GPU],
        [np.array([1, 2], dtype=np.int64), np.array([3, 4], dtype=np.int64)],
        errors=[None, np.array([0, 1])],
    )
    assert render(table) == "#\tCPU Duration\tGPU Duration\nframe\t1\t3\nframe\t2\t#ERR1\n\n"


def test_store_columns_streamed_in_small_blocks(tmp_path) -> None:
    with Store(str(tmp_path)) as store:
        source = calls_table()
        columns = []
        for key, array in [
            ("cpu", source.values[0]),
            ("gpu", source.values[1]),
            ("no", source.call_nos),
            ("program", source.programs),
            ("name", source.names),
            ("frame", source.frame_of_event),
        ]:
            col = store.column(key, np.int64)
            col.extend(np.asarray(array))
            columns.append(col)
        cpu, gpu, nos, programs, names, frames = columns
        table = Table(
            Boundary.CALL,
            [CPU, GPU],
            [cpu, gpu],
            call_nos=nos,
            programs=programs,
            names=names,
            name_table=NAMES,
            frame_of_event=frames,
            frames_ended=2,
        )
        for block_rows in (1, 2, 3, 4, 100):
            assert render(table, block_rows=block_rows) == CALLS_TEXT


def test_decreasing_frames_rejected() -> None:
    table = calls_table()
    table.frames_ended = 1  # fewer than the frames the events are in
    with pytest.raises(ValueError, match="non-decreasing"):
        render(table)


def test_call_table_needs_its_metadata() -> None:
    with pytest.raises(ValueError, match="call_nos"):
        Table(Boundary.CALL, [CPU], [np.array([1])])


# --- legacy format ------------------------------------------------------------------------


def test_legacy_lines_all_measurements() -> None:
    out = io.StringIO()
    writer = LegacyWriter(out, gpu=True, cpu=True, pixels=True)
    writer.write_header()
    assert writer.write_call(175, 0, "glBindTexture", cpu_start=1203, cpu_duration=5310)
    assert writer.write_call(
        181,
        3,
        "glDrawElements",
        gpu_start=9120,
        gpu_duration=40112,
        cpu_start=9300,
        cpu_duration=2210,
        pixels=30720,
    )
    writer.write_frame_end()
    assert out.getvalue() == (
        "# call no gpu_start gpu_dura cpu_start cpu_dura vsize_start vsize_dura "
        "rss_start rss_dura pixels program name\n"
        "call 175 0 0 1203 5310 0 0 0 0 -1 0 glBindTexture\n"
        "call 181 9120 40112 9300 2210 0 0 0 0 30720 3 glDrawElements\n"
        "frame_end\n"
    )
    assert len(out.getvalue().splitlines()[2].split(" ")) == 13


def test_legacy_disabled_columns_print_zero() -> None:
    out = io.StringIO()
    writer = LegacyWriter(out, memory=True)
    writer.write_call(
        7,
        2,
        "glClear",
        gpu_start=1,
        gpu_duration=2,
        cpu_start=3,
        cpu_duration=4,
        vsize_start=5,
        vsize_duration=6,
        rss_start=7,
        rss_duration=8,
        pixels=9,
    )
    assert out.getvalue() == "call 7 0 0 0 0 5 6 7 8 0 2 glClear\n"


def test_legacy_min_cpu_time_only_with_cpu() -> None:
    out = io.StringIO()
    with_cpu = LegacyWriter(out, cpu=True, min_cpu_time=1000)
    assert not with_cpu.write_call(1, 0, "glEnable", cpu_start=5, cpu_duration=999)
    assert with_cpu.write_call(2, 0, "glEnable", cpu_start=5, cpu_duration=1000)
    without_cpu = LegacyWriter(out, gpu=True, min_cpu_time=1000)
    assert without_cpu.write_call(3, 0, "glEnable", cpu_duration=10)
    assert out.getvalue() == (
        "call 2 0 0 5 1000 0 0 0 0 0 0 glEnable\ncall 3 0 0 0 0 0 0 0 0 0 0 glEnable\n"
    )
    assert LEGACY_HEADER.startswith("# call no gpu_start")


# --- reading back ------------------------------------------------------------------------


def test_round_trip_through_reader() -> None:
    draws = calls_table(Boundary.DRAWCALL)
    text = render(frames_table(), calls_table(), draws)
    tables = read_tables(io.StringIO(text))
    assert set(tables) == {Boundary.FRAME, Boundary.CALL, Boundary.DRAWCALL}

    frames = tables[Boundary.FRAME]
    assert frames.metrics == ["CPU Duration", "GPU Duration"]
    assert list(frames.frames) == [0, 1, 2]
    assert list(frames.column("CPU Duration")) == [812345, 900000, 12]
    gpu = list(frames.column("GPU Duration"))
    assert gpu[0] == 655210 and math.isnan(gpu[1]) and gpu[2] == 7

    for boundary in (Boundary.CALL, Boundary.DRAWCALL):
        table = tables[boundary]
        assert table.boundary == boundary
        assert table.metrics == ["CPU Duration", "GPU Duration"]
        assert list(table.call_nos) == [175, 181, 190, 300]
        assert list(table.programs) == [0, 3, 0, 3]
        assert table.names == NAMES
        assert list(table.frames) == [0, 0, 1, 2]
        assert table.frames_ended == 2
        rows = list(table.rows())
        assert rows[1] == (181, 3, "glDrawElements", 0, (2210.0, 40112.0))
        assert math.isnan(rows[0].values[1])


def test_round_trip_floats_and_errors() -> None:
    table = Table(
        Boundary.FRAME,
        [metric("D", NumType.DOUBLE), GPU],
        [np.array([0.25, 1234567.0]), np.array([1, 2], dtype=np.int64)],
        errors=[None, np.array([0, 3])],
    )
    parsed = read_tables(io.StringIO(render(table)))[Boundary.FRAME]
    assert list(parsed.values[0]) == [0.25, 1234570.0]  # 6 significant digits, as glretrace
    assert parsed.errors == {(1, 1): 3}
    assert math.isnan(parsed.values[1][1])


def test_reader_skips_other_output_and_guesses_lone_table() -> None:
    text = (
        "# call no gpu_start gpu_dura cpu_start cpu_dura vsize_start vsize_dura "
        "rss_start rss_dura pixels program name\n"
        "call 181 9120 40112 9300 2210 0 0 0 0 30720 3 glDrawElements\n"
        "frame_end\n"
        "#\tcall no\tprogram\tname\tGPU Duration\tPixels Drawn\n"
        "call\t181\t3\tglDrawElements\t40112\t30720\n"
        "frame_end\n"
        "call\t190\t0\tglClear\t18\t-\n"
        "\n"
        "Rendered 2 frames in 0.0123 secs, average of 162.6 fps\n"
    )
    tables = read_tables(io.StringIO(text))
    assert list(tables) == [Boundary.DRAWCALL]
    assert list(tables[Boundary.DRAWCALL].frames) == [0, 1]
    assert tables[Boundary.DRAWCALL].frames_ended == 1
    as_calls = read_tables(io.StringIO(text), call_table=Boundary.CALL)
    assert list(as_calls) == [Boundary.CALL]
    non_draws = text.replace("glClear", "glEnable")
    assert list(read_tables(io.StringIO(non_draws))) == [Boundary.CALL]


def test_reader_reports_bad_rows_with_line_number() -> None:
    text = "#\tCPU Duration\nframe\t1\nframe\t1\t2\n\n"
    with pytest.raises(RetraceError, match=r"^profile.tsv:3: 2 values for 1 metrics$"):
        read_tables(io.StringIO(text), source="profile.tsv")
