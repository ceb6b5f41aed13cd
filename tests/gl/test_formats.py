"""`--format csv|json`: the tables as records that csv and json readers take as they are,
with the same rows and values as glretrace's TSV. Real profiles on llvmpipe."""

from __future__ import annotations

import csv
import io
import json

import pytest
from conftest import TRACES, run_retrace

from retrace.vocabulary import Boundary
from retrace.writer.tsv_reader import read_tables

TRACE = TRACES / "glmark2-desktop-fbo.trace"
# deterministic metrics only, so that two runs can be compared value for value
SELECTION = [
    "--pframes", "opengl: Pixels Drawn",
    "--pcalls", "pipeline: Vertices Submitted",
    "--pdrawcalls", "opengl: Pixels Drawn; pipeline: Vertices Submitted",
]  # fmt: skip
EVENTS = {Boundary.FRAME: "frame", Boundary.CALL: "call", Boundary.DRAWCALL: "drawcall"}


@pytest.fixture(scope="module")
def tsv() -> dict:
    done = run_retrace(*SELECTION, "--quiet", str(TRACE), check=True)
    return read_tables(done.stdout.decode().splitlines(keepends=True))


def expected_rows(tables: dict) -> list[dict]:
    """The TSV's rows as records: every key and metric, None for '-'."""
    rows = []
    for boundary in (Boundary.FRAME, Boundary.CALL, Boundary.DRAWCALL):
        table = tables[boundary]
        for row in table.rows():
            record = {
                "event": EVENTS[boundary],
                "frame": row.frame,
                "call_no": row.call_no,
                "program": row.program,
                "name": row.name,
            }
            record.update(
                (m, None if v != v else v) for m, v in zip(table.metrics, row.values, strict=True)
            )
            rows.append(record)
    return rows


def test_csv_has_the_tsvs_rows(tsv):
    done = run_retrace(*SELECTION, "--quiet", "--format", "csv", str(TRACE))
    assert done.returncode == 0
    assert done.stderr.decode().startswith("Rendered ")  # not in the CSV on stdout
    reader = csv.DictReader(io.StringIO(done.stdout.decode()))
    assert reader.fieldnames == [
        "event", "frame", "call_no", "program", "name", "Pixels Drawn", "Vertices Submitted",
    ]  # fmt: skip
    got = []
    for record in reader:
        typed = {}
        for key, value in record.items():
            if key in ("event", "name"):
                typed[key] = value or None
            else:
                typed[key] = float(value) if value else None
        got.append(typed)
    expected = expected_rows(tsv)
    for record in expected:  # a metric the row's table lacks is an empty cell
        record.setdefault("Pixels Drawn", None)
        record.setdefault("Vertices Submitted", None)
    assert len(got) == len(expected) > 100
    assert all(any(r[m] for r in expected) for m in ("Pixels Drawn", "Vertices Submitted"))
    assert got == expected


def test_json_lines_have_the_tsvs_rows(tsv, tmp_path):
    out = tmp_path / "out.json"
    done = run_retrace(*SELECTION, "--quiet", "--format", "json", "-o", str(out), str(TRACE))
    assert done.returncode == 0 and done.stdout == b""  # --quiet -o: nothing on stdout
    got = [json.loads(line) for line in out.read_text().splitlines()]
    expected = expected_rows(tsv)
    assert len(got) == len(expected)
    for record, want in zip(got, expected, strict=True):
        assert isinstance(record["frame"], int)
        for key, value in want.items():
            assert record[key] == value, (record, key)
        missing = set(record) - set(want)
        assert all(record[k] is None for k in missing)
    meta = json.loads((tmp_path / "out.json.json").read_text())
    assert meta["outputs"]["format"] == "json"
