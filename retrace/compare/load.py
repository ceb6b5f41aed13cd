"""Reading the runs of a comparison and lining their rows up.

`retrace diff` compares profiles of one trace made under two builds. Each side
is one run or several (TSV files, or directories of ``*.tsv`` files) written by
retrace or by glretrace. Rows are matched by position in the frames table and
by (call no, name) in the call tables. Runs that do not line up are refused
before any number is compared, because comparing two different traces would
print numbers that look believable and mean nothing.

A frames table has only its length to tell traces apart, so a run may bring
metadata beside it: ``OUT.tsv.json``, which retrace writes with every profile
written to a file (`retrace.profile.metadata`): its ``trace.sha256`` (or a bare
``trace_sha256``) names the trace's content, its ``gl.renderer`` and
``gl.version`` (or ``renderer`` and ``driver``) what ran it, and its columns
their units. Runs naming different traces are refused (`force`: compared with a
loud warning); different renderers, drivers or units are stated in the report,
since they may be the very thing compared.

Per-row data stays in numpy arrays: one float64 matrix (runs x rows) per
metric, plus one array each for call numbers, name codes, programs and frames.
A table of millions of calls then needs no Python object per row.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from retrace.errors import RetraceError, UsageError
from retrace.profile.metadata import TABLE_KEYS, units
from retrace.profile.metadata import read_metadata as read_document
from retrace.vocabulary import TABLE_TITLES, Boundary
from retrace.writer.tsv import TABLE_ORDER, runs_folder
from retrace.writer.tsv_reader import ParsedTable, read_tables

# What --stats derives from a column's repeats: "<metric> min" and so on.
DERIVED = ("min", "p95", "stddev")


def is_derived(metric: str, metrics: Collection[str]) -> bool:
    """Whether `metric` is a column --stats derived from another one of `metrics`: a spread
    of the repeats, not a cost, so never summed nor required on both sides."""
    head, _, tail = metric.rpartition(" ")
    return tail in DERIVED and head in metrics


@dataclass
class Run:
    """One profile: the tables of one TSV file."""

    source: str
    tables: dict[Boundary, ParsedTable]
    metadata: dict[str, str] = field(default_factory=dict)
    units: dict[tuple[Boundary, str], str] = field(default_factory=dict)  # (table, metric)
    document: dict[str, Any] = field(default_factory=dict)  # the whole metadata


@dataclass
class Columns:
    """One table of one run as numpy arrays; call rows sorted by call number.

    `names` are codes into the `Vocabulary` the columns were made with; in the
    frames table `call_nos`, `names` and `programs` are empty.
    """

    call_nos: np.ndarray
    names: np.ndarray
    programs: np.ndarray
    frames: np.ndarray
    values: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.frames)


@dataclass
class Vocabulary:
    """Function names as small integer codes, shared by every run compared."""

    codes: dict[str, int] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Names by code."""
        return list(self.codes)

    def encode(self, names: list[str]) -> np.ndarray:
        codes = self.codes
        found = (codes.setdefault(name, len(codes)) for name in names)
        return np.fromiter(found, dtype=np.int32, count=len(names))


@dataclass
class AlignedTable:
    """One table present on both sides, its rows matched across every run.

    `base[m]` and `new[m]` are (runs, rows) matrices of metric `m`; the row
    keys (`call_nos`, `names`, `frames`, `programs`) are the first base run's.
    """

    boundary: Boundary
    metrics: list[str]
    call_nos: np.ndarray
    names: np.ndarray
    programs: np.ndarray
    frames: np.ndarray
    base: dict[str, np.ndarray]
    new: dict[str, np.ndarray]
    units: dict[str, str] = field(default_factory=dict)  # metric -> unit, where known
    # of `metrics`, those --stats derived from a column of the table (compared or not)
    derived: frozenset[str] = frozenset()

    @property
    def title(self) -> str:
        return TABLE_TITLES[self.boundary]

    @property
    def rows(self) -> int:
        return len(self.frames)


@dataclass
class Comparison:
    """Both sides of a diff, lined up table by table."""

    base_sources: list[str]
    new_sources: list[str]
    tables: list[AlignedTable]
    vocabulary: Vocabulary
    notes: list[str] = field(default_factory=list)


def expand_paths(paths: Sequence[str]) -> list[Path]:
    """Files as given, and every ``*.tsv`` file of a directory, in name order."""
    files: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.tsv") if p.is_file())
            if not found:
                raise UsageError(f"{text}: no *.tsv files in this directory")
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise UsageError(f"{text}: no such file or directory")
    return files


def read_samples(paths: Sequence[str]) -> list[Run]:
    """The runs of one side: each file given (`expand_paths`), or, for a file written with
    --repeat, the runs kept beside it (`runs_folder`), which are its samples."""
    runs: list[Run] = []
    for path in expand_paths(paths):
        kept = Path(runs_folder(str(path)))
        files = sorted(kept.glob("run*.tsv"), key=lambda p: int(p.stem[3:] or 0))
        if not kept.is_dir() or not files:
            runs.append(read_run(path))
            continue
        document = _document(path)  # the medians' metadata describes every run
        fields, units = metadata_fields(document), _units(document)
        runs += [
            replace(read_run(f), source=str(path), metadata=fields, units=units, document=document)
            for f in files
        ]
    return runs


def read_run(path: Path) -> Run:
    """The tables of one TSV file; a file that is not one is a usage error (exit 2)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as stream:
            tables = read_tables(stream, source=str(path))
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except RetraceError as exc:
        raise UsageError(str(exc)) from None
    if not tables:
        raise UsageError(
            f"{path}: no profile tables in it (expected the output of "
            "--pframes/--pcalls/--pdrawcalls)"
        )
    document = _document(path)
    return Run(str(path), tables, metadata_fields(document), _units(document), document)


def _document(path: Path) -> dict[str, Any]:
    """The metadata beside a table ({} without any); unreadable metadata is a usage error."""
    try:
        return read_document(path)
    except RetraceError as exc:
        raise UsageError(str(exc)) from None


# Metadata fields and where each may be in OUT.tsv.json.
_METADATA = {
    "trace": (("trace_sha256",), ("trace", "sha256")),
    "trace_path": (("trace", "path"),),
    "renderer": (("renderer",), ("gl", "renderer")),
    "driver": (("driver",), ("gl", "version")),
}


def _units(document: dict) -> dict[tuple[Boundary, str], str]:
    tables = {key: boundary for boundary, key in TABLE_KEYS.items()}
    return {(tables[t], m): u for (t, m), u in units(document).items() if t in tables}


def metadata_fields(document: object) -> dict[str, str]:
    """The fields of `_METADATA` found in a run's metadata document."""
    found: dict[str, str] = {}
    for name, places in _METADATA.items():
        for keys in places:
            value: Any = document
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            if isinstance(value, str) and value:
                found[name] = value
                break
    return found


def columns(table: ParsedTable, metrics: list[str], vocabulary: Vocabulary) -> Columns:
    """`table` as arrays with the given metrics; call rows sorted by call number."""
    frames = np.frombuffer(table.frames, dtype=np.int64)
    values = {m: np.frombuffer(table.column(m), dtype=np.float64) for m in metrics}
    if table.boundary == Boundary.FRAME:
        empty = np.empty(0, dtype=np.int64)
        return Columns(empty, empty.astype(np.int32), empty, frames, values)
    call_nos = np.frombuffer(table.call_nos, dtype=np.int64)
    names = vocabulary.encode(table.names)
    programs = np.frombuffer(table.programs, dtype=np.int64)
    if len(call_nos) > 1 and (np.diff(call_nos) < 0).any():
        order = np.argsort(call_nos, kind="stable")
        call_nos, names, programs, frames = (a[order] for a in (call_nos, names, programs, frames))
        values = {m: v[order] for m, v in values.items()}
    return Columns(call_nos, names, programs, frames, values)


def load_comparison(
    base_paths: Sequence[str],
    new_paths: Sequence[str],
    metrics: Sequence[str] = (),
    force: bool = False,
) -> Comparison:
    """Read both sides and line them up; `metrics` (names, any case) limits what is kept.

    Raises `UsageError` when runs cannot be compared: different tables or
    metrics, or rows that show they profile different traces (metadata naming
    different traces only warns with `force`).
    """
    base, new = read_samples(base_paths), read_samples(new_paths)
    return align_runs(base, new, metrics, force)


def align_runs(
    base: list[Run], new: list[Run], metrics: Sequence[str] = (), force: bool = False
) -> Comparison:
    """Line up runs already read (from files, or from a batch database); raises as
    `load_comparison` does."""
    wanted = _resolve_metrics(base + new, metrics)
    vocabulary = Vocabulary()
    tables = []
    for boundary in TABLE_ORDER:
        chosen = _table_metrics(boundary, base, new, wanted)
        if not chosen:
            continue
        base_cols = [columns(r.tables[boundary], chosen, vocabulary) for r in base]
        new_cols = [columns(r.tables[boundary], chosen, vocabulary) for r in new]
        first = base_cols[0]
        for runs, cols in ((base, base_cols), (new, new_cols)):
            for run, other in zip(runs[1:], cols[1:], strict=True):
                who = f"{runs[0].source} and {run.source}"
                _check_rows(boundary, cols[0], other, vocabulary, who)
        _check_rows(boundary, first, new_cols[0], vocabulary, "the two sides")
        tables.append(
            AlignedTable(
                boundary,
                chosen,
                first.call_nos,
                first.names,
                first.programs,
                first.frames,
                {m: np.vstack([c.values[m] for c in base_cols]) for m in chosen},
                {m: np.vstack([c.values[m] for c in new_cols]) for m in chosen},
                _table_units(boundary, chosen, base + new),
                frozenset(m for m in chosen if is_derived(m, base[0].tables[boundary].metrics)),
            )
        )
    notes = _check_metadata(base, new, force)
    notes += _check_units(base, new, tables)
    if [t.boundary for t in tables] == [Boundary.FRAME] and not all(
        "trace" in r.metadata for r in base + new
    ):
        notes.append(
            "only frames tables and no metadata naming the trace: only the frame counts "
            "say that both sides replayed one trace"
        )
    sources = [r.source for r in base], [r.source for r in new]
    return Comparison(*sources, tables, vocabulary, notes)


def _traces(first: Run, other: Run) -> str:
    """Two different traces in words: by their paths, or where the metadata names one path
    (a trace changed in place) or none, by their contents' SHA-256."""
    paths = [r.metadata.get("trace_path") for r in (first, other)]
    if None not in paths and paths[0] != paths[1]:
        return f"different traces ({paths[0]} and {paths[1]})"
    digests = " and ".join(f"{r.metadata['trace'][:12]}..." for r in (first, other))
    where = f" of {paths[0]}" if paths[0] is not None and paths[0] == paths[1] else ""
    return f"different traces{where} (SHA-256 {digests})"


def _check_metadata(base: list[Run], new: list[Run], force: bool) -> list[str]:
    """Refuse runs whose metadata name different traces (`force`: a warning on stderr and
    in the notes); notes where renderers or drivers differ between the sides."""
    runs = base + new
    named = [r for r in runs if "trace" in r.metadata]
    notes = []
    for run in named[1:]:
        first = named[0]
        if run.metadata["trace"] != first.metadata["trace"]:
            message = f"{first.source} and {run.source} profile {_traces(first, run)}"
            if not force:
                raise UsageError(f"{message}; compare them anyway with --force")
            warning = f"{message}; compared anyway (--force): rows may not match"
            print(f"retrace: warning: {warning}", file=sys.stderr)
            notes.append(f"WARNING: {warning}")
            break
    for field_name in ("renderer", "driver"):
        sides = [sorted({r.metadata.get(field_name, "?") for r in side}) for side in (base, new)]
        if sides[0] != sides[1] and sides != [["?"], ["?"]]:
            notes.append(
                f"the sides ran on different {field_name}s: base {', '.join(sides[0])}; "
                f"new {', '.join(sides[1])}"
            )
    return notes


def _table_units(boundary: Boundary, metrics: list[str], runs: list[Run]) -> dict[str, str]:
    """metric -> unit, from the first run whose metadata knows it."""
    found: dict[str, str] = {}
    for run in runs:
        for metric in metrics:
            unit = run.units.get((boundary, metric))
            if unit and metric not in found:
                found[metric] = unit
    return found


def _check_units(base: list[Run], new: list[Run], tables: list[AlignedTable]) -> list[str]:
    """Notes where the sides' metadata give one column different units (glretrace's RSS
    is in pages, retrace's in bytes)."""
    notes = []
    for table in tables:
        for metric in table.metrics:
            sides = [
                sorted({u for r in side if (u := r.units.get((table.boundary, metric)))})
                for side in (base, new)
            ]
            if sides[0] and sides[1] and sides[0] != sides[1]:
                notes.append(
                    f"{table.title}, {metric}: the sides' units differ (base "
                    f"{', '.join(sides[0])}; new {', '.join(sides[1])}): the values are not "
                    "comparable"
                )
    return notes


def _resolve_metrics(runs: list[Run], metrics: Sequence[str]) -> set[str] | None:
    """The casefolded metric names asked for (None: all); an unknown one is an error."""
    if not metrics:
        return None
    known = {m for r in runs for t in r.tables.values() for m in t.metrics}
    folded = {m.casefold() for m in known}
    for name in metrics:
        if name.casefold() not in folded:
            listed = ", ".join(sorted(known))
            raise UsageError(f"no table has a metric {name!r}; they have: {listed}")
    return {m.casefold() for m in metrics}


def _table_metrics(
    boundary: Boundary, base: list[Run], new: list[Run], wanted: set[str] | None
) -> list[str]:
    """The metrics of this table to compare, in the first run's order; [] to skip the table.

    Every run must have the table and every chosen metric in it.
    """
    runs = base + new
    present = [r for r in runs if boundary in r.tables]
    title = TABLE_TITLES[boundary]
    if not present:
        return []
    union = {m for r in present for m in r.tables[boundary].metrics}
    chosen = {m for m in union if wanted is None or m.casefold() in wanted}
    if wanted is None:  # --stats columns on one side only (glretrace has none) are not missed
        shared = set.intersection(*(set(r.tables[boundary].metrics) for r in present))
        chosen = {m for m in chosen if m in shared or not is_derived(m, union)}
    if not chosen:
        return []
    for run in runs:
        table = run.tables.get(boundary)
        if table is None:
            raise UsageError(
                f"{run.source} has no {title} table and {present[0].source} has one "
                "(profile both sides with the same --pframes/--pcalls/--pdrawcalls)"
            )
        missing = [m for m in chosen if m not in table.metrics]
        if missing:
            raise UsageError(
                f"the {title} tables measure different metrics: {run.source} lacks "
                f"{', '.join(sorted(missing))} (choose common ones with --metric)"
            )
    return [m for m in runs[0].tables[boundary].metrics if m in chosen]


def _check_rows(
    boundary: Boundary, a: Columns, b: Columns, vocabulary: Vocabulary, who: str
) -> None:
    """Refuse two runs whose rows do not match one to one.

    A frames table has only its length to tell traces apart; call tables have
    every call's number and name.
    """
    title = TABLE_TITLES[boundary]
    if boundary == Boundary.FRAME:
        if len(a) != len(b):
            raise UsageError(
                f"{who} come from different traces (frames table: {len(a)} frames vs {len(b)})"
            )
        return
    n = min(len(a), len(b))
    differ = (a.call_nos[:n] != b.call_nos[:n]) | (a.names[:n] != b.names[:n])
    where = np.flatnonzero(differ)
    if where.size:
        i = int(where[0])
        first = f"call {a.call_nos[i]} {vocabulary.names[a.names[i]]}"
        other = vocabulary.names[b.names[i]]
        second = other if a.call_nos[i] == b.call_nos[i] else f"call {b.call_nos[i]} {other}"
    elif len(a) != len(b):
        i = n
        longer = a if len(a) > len(b) else b
        call = f"call {longer.call_nos[i]} {vocabulary.names[longer.names[i]]}"
        first, second = (call, "no such call") if longer is a else ("no such call", call)
    else:
        return
    raise UsageError(
        f"{who} come from different traces (first difference in the {title} table: "
        f"{first} vs {second})"
    )
