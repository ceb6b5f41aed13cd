"""The batch database: one DuckDB file holding every run of every build.

Tables (query them with SQL: `retrace batch sql DB "..."`, or DuckDB itself;
`retrace batch export DB DIR` writes each as Parquet):

* ``runs`` — one row per (build, trace, run): the trace's path, size and
  SHA-256, the settings that decide the measurement (profile options,
  environment, rows kept), status (ok, failed, timeout, mismatch) and reason,
  exit code, attempts, host, start and wall time, retrace's warnings, the
  fidelity summary, and the metadata retrace wrote beside the tables
  (``OUT.tsv.json``) when there was one;
* ``measurements`` — every value, long form: (build, trace, run, tbl, row,
  call_no, program, name, frame, metric, value), tbl being "frames", "calls"
  or "draw calls"; NULL where the table says ``-``;
* ``frame_md5`` — the frames' MD5s where the manifest expects some;
* ``last_frame`` — a CI job's last frame (traces description files): the
  call, piglit's checksum and the one expected, the images kept;
* ``batches`` — one row per `retrace batch` invocation.

A build is a label (`--build`, default "default"): two drivers or two app
builds profiled into one database are two builds, compared with `retrace diff
DB:BASE DB:NEW`. A run is replaced whole when it is measured again, so a
database never mixes two measurements of one run. DuckDB stores the long
table column-wise and compressed, so repeated keys cost little.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrace.batch.job import FINISHED, SKIP, Job, Outcome, first_line
from retrace.errors import RetraceError, UsageError, pip_install
from retrace.vocabulary import TABLE_TITLES, Boundary

if TYPE_CHECKING:
    import duckdb

    from retrace.compare.load import Run

_BOUNDARIES = {name: boundary for boundary, name in TABLE_TITLES.items()}
_DEPARTED = "retrace: warning: the replay departed from the trace: "

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    build VARCHAR NOT NULL, trace VARCHAR NOT NULL, run INTEGER NOT NULL,
    path VARCHAR, size BIGINT, sha256 VARCHAR, settings JSON,
    status VARCHAR, reason VARCHAR, exit_code INTEGER, attempts INTEGER,
    host VARCHAR, started TIMESTAMP, wall_s DOUBLE,
    warnings VARCHAR[], fidelity VARCHAR, metadata JSON, allowed_regression DOUBLE,
    PRIMARY KEY (build, trace, run));
CREATE TABLE IF NOT EXISTS measurements (
    build VARCHAR, trace VARCHAR, run INTEGER, tbl VARCHAR, row INTEGER,
    call_no BIGINT, program BIGINT, name VARCHAR, frame BIGINT, metric VARCHAR, value DOUBLE);
CREATE TABLE IF NOT EXISTS frame_md5 (
    build VARCHAR, trace VARCHAR, frame INTEGER, md5 VARCHAR, expected VARCHAR);
CREATE TABLE IF NOT EXISTS last_frame (
    build VARCHAR, trace VARCHAR, call_no BIGINT, checksum VARCHAR, expected VARCHAR,
    image VARCHAR, difference VARCHAR);
CREATE TABLE IF NOT EXISTS batches (
    build VARCHAR, manifest VARCHAR, shard VARCHAR, started TIMESTAMP, finished TIMESTAMP,
    jobs INTEGER, ran INTEGER, failed INTEGER, retrace_version VARCHAR);
"""
TABLES = ("runs", "measurements", "frame_md5", "last_frame", "batches")


def is_database(spec: str) -> bool:
    """Whether `spec` names a batch database, ``DB`` or ``DB:BUILD`` (a DuckDB file)."""
    path = Path(spec)
    if not path.is_file() and ":" in spec:
        path = Path(spec.rpartition(":")[0])
    try:
        with path.open("rb") as stream:
            return stream.read(12)[8:12] == b"DUCK"  # DuckDB's magic, after the checksum
    except OSError:
        return False


def split_spec(spec: str) -> tuple[str, str | None]:
    """``DB:BUILD`` as (DB, BUILD); a plain ``DB`` as (DB, None)."""
    if Path(spec).is_file() or ":" not in spec:
        return spec, None
    path, _, build = spec.rpartition(":")
    return path, build


@contextmanager
def connect(path: str | Path, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """The database at `path`, made with the schema if new; DuckDB's errors as one line."""
    try:
        import duckdb
    except ImportError:
        raise RetraceError(f"the batch database needs DuckDB: {pip_install('farm')}") from None
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as exc:
        raise RetraceError(f"{path}: {first_line(exc)}") from None
    try:
        if not read_only:
            con.execute(_SCHEMA)
        yield con
    except duckdb.Error as exc:
        raise RetraceError(f"{path}: {first_line(exc)}") from None
    finally:
        con.close()


def finished(con: duckdb.DuckDBPyConnection, build: str) -> dict[tuple[str, int], tuple[str, str]]:
    """(trace, run) -> (sha256, settings) of the build's runs a resumed batch need not redo."""
    marks = ",".join("?" * len(FINISHED))
    rows = con.execute(
        f"SELECT trace, run, sha256, settings FROM runs WHERE build = ? AND status IN ({marks})",
        [build, *FINISHED],
    ).fetchall()
    return {(t, r): (sha, json.dumps(json.loads(s), sort_keys=True)) for t, r, sha, s in rows}


def is_done(done: dict[tuple[str, int], tuple[str, str]], job: Job) -> bool:
    """Whether `done` holds `job` measured on the same trace with the same settings."""
    return done.get(job.key) == (job.trace.sha256, job.settings())


def record(con: duckdb.DuckDBPyConnection, build: str, job: Job, outcome: Outcome) -> None:
    """Store one job's outcome, replacing any earlier one of the same run."""
    key = [build, job.name, job.run]
    tables = _parse(outcome)
    metadata = _json_or_none(outcome.metadata)
    fidelity = metadata.get("fidelity") if isinstance(metadata, dict) else None
    if fidelity is None:  # no metadata (yet): the summary line retrace printed, if any
        departed = [w.removeprefix(_DEPARTED) for w in outcome.warnings if w.startswith(_DEPARTED)]
        fidelity = departed[-1] if departed else None
    con.begin()
    try:
        con.execute("DELETE FROM runs WHERE build = ? AND trace = ? AND run = ?", key)
        con.execute("DELETE FROM measurements WHERE build = ? AND trace = ? AND run = ?", key)
        con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, make_timestamp(?), ?, ?, "
            "?, ?, ?)",
            [
                *key,
                job.trace.path,
                job.trace.size,
                job.trace.sha256,
                job.settings(),
                outcome.status,
                outcome.reason,
                outcome.exit_code,
                outcome.attempts,
                outcome.host,
                _micros(outcome.started),
                outcome.wall_s,
                outcome.warnings,
                fidelity if fidelity is None or isinstance(fidelity, str) else json.dumps(fidelity),
                None if metadata is None else json.dumps(metadata),
                job.expect.allowed_regression,
            ],
        )
        for boundary, table in tables.items():
            _insert_values(con, key, TABLE_TITLES[boundary], table, job)
        if outcome.md5:
            con.execute("DELETE FROM frame_md5 WHERE build = ? AND trace = ?", key[:2])
            expected = list(job.expect.md5) + [None] * len(outcome.md5)
            con.executemany(
                "INSERT INTO frame_md5 VALUES (?, ?, ?, ?, ?)",
                [[*key[:2], i, md5, expected[i]] for i, md5 in enumerate(outcome.md5)],
            )
        if job.last_frame is not None and job.run == 0:
            con.execute("DELETE FROM last_frame WHERE build = ? AND trace = ?", key[:2])
            frame = outcome.last_frame
            if frame is not None:
                con.execute(
                    "INSERT INTO last_frame VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [*key[:2], frame.call_no, frame.checksum, job.expect.checksum, frame.image,
                     frame.difference],
                )  # fmt: skip
        con.commit()
    except BaseException:
        con.rollback()
        raise


def _micros(seconds: float) -> int:
    """Seconds since the epoch as DuckDB's make_timestamp takes them: times are UTC, and
    TIMESTAMP rather than TIMESTAMPTZ, which Python clients can read only with pytz."""
    return round(seconds * 1e6)


def _parse(outcome: Outcome) -> dict[Boundary, Any]:
    """The tables of the run's TSV; none if it wrote none (or nothing readable)."""
    from retrace.writer.tsv_reader import read_tables

    try:
        return read_tables(outcome.tsv.splitlines(), source="profile")
    except RetraceError as exc:
        outcome.warnings.append(f"retrace: warning: the tables could not be read: {exc}")
        return {}


def _json_or_none(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"unreadable": text}


def _insert_values(
    con: duckdb.DuckDBPyConnection, key: list[Any], tbl: str, table: Any, job: Job
) -> None:
    """One table's values, long form, only the rows the manifest keeps."""
    frames = np.frombuffer(table.frames, dtype=np.int64)
    rows = len(frames)
    keep = np.ones(rows, dtype=bool)
    if job.frames is not None:
        keep &= (frames >= job.frames[0]) & (frames <= job.frames[1])
    is_call = table.boundary != Boundary.FRAME
    if is_call:
        call_nos = np.frombuffer(table.call_nos, dtype=np.int64)
        programs = np.frombuffer(table.programs, dtype=np.int64)
        names = np.array(table.names, dtype=object)
        if job.calls is not None:  # by number and by the kind a name says (*/draw), as --calls
            from retrace.profile.window import selected
            from retrace.trace.callset import CallSet

            functions, ids = np.unique(names.astype(str), return_inverse=True)
            keep &= selected(CallSet.parse(job.calls), call_nos, ids, functions.tolist())
    index = np.flatnonzero(keep)
    n = len(index)
    for metric in table.metrics:
        values = np.frombuffer(table.column(metric), dtype=np.float64)[index]
        data = {  # noqa: F841 - read by name in the INSERT (DuckDB's scan of Python variables)
            "build": np.full(n, key[0], dtype=object),
            "trace": np.full(n, key[1], dtype=object),
            "run": np.full(n, key[2], dtype=np.int32),
            "tbl": np.full(n, tbl, dtype=object),
            "row": index.astype(np.int32),
            "call_no": call_nos[index] if is_call else np.full(n, None, dtype=object),
            "program": programs[index] if is_call else np.full(n, None, dtype=object),
            "name": names[index] if is_call else np.full(n, None, dtype=object),
            "frame": frames[index],
            "metric": np.full(n, metric, dtype=object),
            "value": values,
        }
        con.execute(
            "INSERT INTO measurements SELECT build, trace, run, tbl, row, call_no, program, name, "
            "frame, metric, CASE WHEN isnan(value) THEN NULL ELSE value END FROM data"
        )


def record_batch(
    con: duckdb.DuckDBPyConnection,
    build: str,
    manifest: str,
    shard: str,
    started: float,
    counts: tuple[int, int, int],
) -> None:
    """One row for this invocation: its jobs, those run, those failed."""
    from retrace import __version__

    con.execute(
        "INSERT INTO batches VALUES (?, ?, ?, make_timestamp(?), make_timestamp(?), ?, ?, ?, ?)",
        [
            build,
            manifest,
            shard,
            _micros(started),
            _micros(time.time()),
            *counts,
            __version__,
        ],  # fmt: skip
    )


@dataclass
class TraceRuns:
    """The finished runs of one trace in one build, as `retrace diff` reads runs."""

    sha256: str
    allowed_regression: float | None
    runs: list[Run]


def only_failed(con: duckdb.DuckDBPyConnection, build: str) -> dict[str, str]:
    """Trace -> a reason, for the traces of `build` none of whose runs finished."""
    marks = ",".join("?" * len(FINISHED))
    return dict(
        con.execute(
            "SELECT trace, any_value(reason) FROM runs WHERE build = ? AND status != ? "
            f"GROUP BY trace HAVING NOT bool_or(status IN ({marks}))",
            [build, SKIP, *FINISHED],
        ).fetchall()
    )


def builds(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [b for (b,) in con.execute("SELECT DISTINCT build FROM runs ORDER BY 1").fetchall()]


def load_build(con: duckdb.DuckDBPyConnection, source: str, build: str) -> dict[str, TraceRuns]:
    """Every trace of `build` with its finished runs (a frame MD5 other than expected still
    measured the trace); `source` names them."""
    from retrace.compare.load import Run, metadata_fields

    out: dict[str, TraceRuns] = {}
    marks = ",".join("?" * len(FINISHED))
    runs = con.execute(
        "SELECT trace, run, sha256, allowed_regression, metadata FROM runs "
        f"WHERE build = ? AND status IN ({marks}) ORDER BY trace, run",
        [build, *FINISHED],
    ).fetchall()
    for trace, run, sha256, allowed, metadata in runs:
        fields = metadata_fields(json.loads(metadata)) if metadata else {}
        fields.setdefault("trace", sha256)
        tables = _tables(con, build, trace, run)
        entry = out.setdefault(trace, TraceRuns(sha256, allowed, []))
        entry.runs.append(Run(f"{source}:{build}:{trace}#{run}", tables, fields))
    return out


def _tables(con: duckdb.DuckDBPyConnection, build: str, trace: str, run: int) -> dict:
    """The stored tables of one run, rebuilt as the TSV reader makes them (`-` as NaN)."""
    from array import array

    from retrace.writer.tsv_reader import ParsedTable

    where = "FROM measurements WHERE build = ? AND trace = ? AND run = ? AND tbl = ?"
    tables = {}
    for boundary, tbl in TABLE_TITLES.items():
        key = [build, trace, run, tbl]
        metrics = [m for (m,) in con.execute(
            f"SELECT metric {where} GROUP BY metric ORDER BY min(rowid)", key
        ).fetchall()]  # fmt: skip
        if not metrics:
            continue
        table = ParsedTable(boundary, metrics)
        for i, metric in enumerate(metrics):
            data = con.execute(
                "SELECT call_no, program, name, frame, coalesce(value, 'NaN'::DOUBLE) AS value "
                f"{where} AND metric = ? ORDER BY row",
                [*key, metric],
            ).fetchnumpy()
            table.values[i] = array("d", data["value"].tolist())
        table.frames = array("q", data["frame"].tolist())
        if boundary != Boundary.FRAME:
            table.call_nos = array("q", data["call_no"].tolist())
            table.programs = array("q", data["program"].tolist())
            table.names = data["name"].tolist()
        tables[boundary] = table
    return tables


def merge(con: duckdb.DuckDBPyConnection, shards: list[str]) -> int:
    """Add every shard database's runs to `con` (a run there replaces the same run here);
    the number of runs merged."""
    merged = 0
    for i, shard in enumerate(shards):
        if not is_database(shard):
            raise UsageError(f"{shard}: not a batch database")
        alias = f"shard{i}"
        con.execute(f"ATTACH ? AS {alias} (READ_ONLY)", [shard])
        try:
            con.execute("BEGIN")
            runs = f"(SELECT build, trace, run FROM {alias}.runs)"
            con.execute(f"DELETE FROM runs WHERE (build, trace, run) IN {runs}")
            con.execute(f"DELETE FROM measurements WHERE (build, trace, run) IN {runs}")
            for table in ("frame_md5", "last_frame"):
                con.execute(
                    f"DELETE FROM {table} WHERE (build, trace) IN "
                    f"(SELECT DISTINCT build, trace FROM {alias}.{table})"
                )
            for table in TABLES:
                con.execute(f"INSERT INTO {table} SELECT * FROM {alias}.{table}")
            con.execute("COMMIT")
            merged += con.execute(f"SELECT count(*) FROM {alias}.runs").fetchall()[0][0]
        finally:
            con.execute(f"DETACH {alias}")
    return merged


def export_parquet(con: duckdb.DuckDBPyConnection, folder: Path) -> list[Path]:
    """Each table as ``FOLDER/<table>.parquet``; the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for table in TABLES:
        out = folder / f"{table}.parquet"
        con.execute(f"COPY {table} TO '{_quote(out)}' (FORMAT PARQUET)")
        written.append(out)
    return written


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")
