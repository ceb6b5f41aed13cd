"""Mesa's traces description files (``src/**/ci/traces-*.yml``), read as they are.

Two layouts are in use, and both are read:

    traces-db:                              # optional: where missing traces come from
      download-url: "https://.../"          #   (the trace's path is appended to it)
    traces:                                 # the older list layout (piglit 2020-2022)
      - path: glmark2/jellyfish-v2.trace
        expectations:
          - device: gl-vmware-llvmpipe
            checksum: da850394d7f99a895322222cc95170af

    %YAML 1.2                               # the newer mapping layout (Mesa today)
    ---
    traces:
      glmark2/jellyfish-v2.trace:
        gl-vmware-llvmpipe:
          checksum: da850394d7f99a895322222cc95170af
        gl-zink-anv-tgl:
          label: [skip, flakes]             # skip: not replayed on that device
          text: a note for people           #   (other labels are kept as facts)

A checksum is the MD5 of the last frame's pixels as piglit computes it
(`retrace.batch.lastframe`). A trace with no entry for the device is not
replayed there, nor one whose entry is labelled ``skip``, nor one whose entry
has labels and no checksum (Mesa's ``label: [unsupported]``: no image is
expected of it); these are no tests of the device, as in piglit's results.
An entry with no checksum and no label is replayed and fails until
`--update-checksums` writes its checksum. Fields neither layout defines are
kept (`--update-checksums` writes them back) and ignored, with one warning
naming them all. A file that is not such a description is one line naming
the file, line and column, exit status 2.

ruamel.yaml reads it (the extra ``ci``): one library for reading and for
`--update-checksums`' round trip, YAML 1.2 as Mesa's files declare, and
line numbers for every error; PyYAML would be a second dialect (1.1) to keep
in step with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from retrace.errors import UsageError, pip_install

SKIP = "skip"  # the label that keeps a trace off a device
NO_PERF = "no-perf"  # the label that keeps a trace out of performance runs
APITRACE_SUFFIX = ".trace"
# Other kinds of traces the files list, which only their own replayers read.
OTHER_KINDS = {".rdc": "RenderDoc", ".gfxr": "GFXReconstruct", ".trace-dxgi": "apitrace DXGI"}

_TOP = ("traces-db", "traces")
_DB = ("download-url",)
_LIST_TRACE = ("path", "expectations")
_LIST_EXPECTATION = ("device", "checksum")
_DEVICE = ("checksum", "label", "text")


@dataclass(frozen=True)
class Expectation:
    """What a trace should give on one device."""

    device: str
    checksum: str | None  # None: none given yet
    labels: tuple[str, ...] = ()
    text: str | None = None


@dataclass(frozen=True)
class TraceEntry:
    path: str  # relative to the traces folder (--db-path) and to the download URL
    line: int  # 1-based, of the entry in the file
    expectations: dict[str, Expectation]

    @property
    def kind(self) -> str | None:
        """Why retrace cannot replay it (another replayer's trace), or None."""
        suffix = PurePosixPath(self.path).suffix
        if suffix == APITRACE_SUFFIX:
            return None
        return OTHER_KINDS.get(suffix, f"a {suffix or 'suffixless'} file")


@dataclass(frozen=True)
class Description:
    file: Path
    layout: str  # "list" or "mapping"
    download_url: str | None
    traces: tuple[TraceEntry, ...]
    unknown: tuple[str, ...]  # fields kept and ignored, each as "where (line N)"


@dataclass(frozen=True)
class Planned:
    """One trace of the file as a run for one device sees it: run it, or why not."""

    entry: TraceEntry
    expectation: Expectation | None
    skip: str = ""  # the reason it is not replayed; "" runs it
    test: bool = True  # a test of the device in piglit's results (skipped or not)


def load_yaml(path: Path) -> Any:
    """The file as ruamel.yaml's round-trip nodes (comments and order kept)."""
    try:
        from ruamel.yaml import YAML
        from ruamel.yaml.error import MarkedYAMLError, YAMLError
    except ImportError:
        raise UsageError(
            f"{path}: reading a traces description file needs ruamel.yaml: {pip_install('ci')}"
        ) from None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text: {exc}") from None
    yaml = YAML()
    yaml.preserve_quotes = True  # kept by --update-checksums; reads as the strings they are
    try:
        return yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise UsageError(f"{path}{at}: not valid YAML: {exc.problem or exc.context}") from None
    except YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {exc}") from None


def read_description(path: str | Path) -> Description:
    """Read and check the description file at `path` (either layout)."""
    path = Path(path)
    return parse(path, load_yaml(path))


def parse(path: Path, document: Any) -> Description:
    reader = _Reader(path)
    top = reader.mapping(document, None, "the file")
    reader.known(top, _TOP, "")
    url = None
    if "traces-db" in top:
        db = reader.mapping(top["traces-db"], top.lc.key("traces-db"), "traces-db")
        reader.known(db, _DB, "traces-db.")
        if db.get("download-url") is not None:
            url = reader.string(db["download-url"], db.lc.key("download-url"), "download-url")
    traces = top.get("traces")
    if traces is None:
        raise UsageError(f"{path}: no 'traces' in it: not a traces description file")
    at = top.lc.key("traces")
    if isinstance(traces, list):
        layout, entries = "list", reader.list_layout(traces)
    elif isinstance(traces, dict):
        layout, entries = "mapping", reader.mapping_layout(traces)
    else:
        raise reader.error(at, "traces must be a list (path/expectations) or a mapping (PATH: ...)")
    seen: dict[str, int] = {}
    for entry in entries:
        if entry.path in seen:
            where = (entry.line - 1, 0)
            raise reader.error(where, f"{entry.path} is listed twice (line {seen[entry.path]})")
        seen[entry.path] = entry.line
    return Description(path, layout, url, tuple(entries), tuple(reader.unknown))


def plan(description: Description, device: str, performance: bool = False) -> list[Planned]:
    """Every trace of the file for `device`, in the file's order, with why it is skipped."""
    out = []
    for entry in description.traces:
        e = entry.expectations.get(device)
        note = f": {e.text}" if e is not None and e.text else ""
        if e is None:
            out.append(Planned(entry, e, f"not expected on {device}", test=False))
        elif SKIP in e.labels or (e.labels and e.checksum is None):
            label = SKIP if SKIP in e.labels else ", ".join(e.labels)
            out.append(Planned(entry, e, f"label {label}{note}", test=False))
        elif performance and NO_PERF in e.labels:
            out.append(Planned(entry, e, f"label {NO_PERF}", test=False))
        elif entry.kind is not None:
            out.append(Planned(entry, e, f"not an apitrace trace ({entry.kind})"))
        else:
            out.append(Planned(entry, e))
    return out


class _Reader:
    """Checks nodes, naming the place of a mistake; collects unknown fields."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.unknown: list[str] = []

    def error(self, where: Any, problem: str) -> UsageError:
        at = f":{where[0] + 1}:{where[1] + 1}" if where else ""
        return UsageError(f"{self.path}{at}: {problem}")

    def mapping(self, node: Any, where: Any, what: str) -> Any:
        if not isinstance(node, dict):
            raise self.error(where, f"{what} must be a mapping, not {_shown(node)}")
        return node

    def string(self, node: Any, where: Any, what: str) -> str:
        if not isinstance(node, str) or not node:
            raise self.error(where, f"{what} must be a non-empty string, not {_shown(node)}")
        return node

    def known(self, node: Any, keys: tuple[str, ...], prefix: str) -> None:
        for key in node:
            if key not in keys:
                line = node.lc.key(key)[0] + 1
                self.unknown.append(f"{prefix}{key} (line {line})")

    def checksum(self, node: Any, where: Any) -> str | None:
        if node is None:
            return None
        if isinstance(node, bool) or not isinstance(node, (str, int)):
            raise self.error(where, f"checksum must be an MD5 in hex, not {_shown(node)}")
        return str(node)  # an all-digit MD5 reads as a number: piglit compares its text too

    def labels(self, node: Any, where: Any) -> tuple[str, ...]:
        if node is None:
            return ()
        items = node if isinstance(node, list) else [node]
        if not all(isinstance(item, str) for item in items):
            raise self.error(where, f"label must be a name or a list of names, not {_shown(node)}")
        return tuple(items)

    def list_layout(self, traces: Any) -> list[TraceEntry]:
        entries = []
        for i, item in enumerate(traces):
            where = traces.lc.item(i)
            trace = self.mapping(item, where, f"traces item {i + 1}")
            self.known(trace, _LIST_TRACE, f"traces[{i}].")
            path = self.string(trace.get("path"), where, "path")
            expectations: dict[str, Expectation] = {}
            listed: Any = trace.get("expectations") or []
            if not isinstance(listed, list):
                raise self.error(trace.lc.key("expectations"), "expectations must be a list")
            for j, node in enumerate(listed):
                at = _item_place(listed, j)
                e = self.mapping(node, at, f"{path}: expectation {j + 1}")
                self.known(e, _LIST_EXPECTATION, f"traces[{i}].expectations[{j}].")
                device = self.string(e.get("device"), at, "device")
                checksum = self.checksum(e.get("checksum"), at)
                expectations[device] = Expectation(device, checksum)
            entries.append(TraceEntry(path, where[0] + 1, expectations))
        return entries

    def mapping_layout(self, traces: Any) -> list[TraceEntry]:
        entries = []
        for path, devices in traces.items():
            where = traces.lc.key(path)
            self.string(path, where, "a trace's path")
            devices = self.mapping(devices if devices is not None else {}, where, path)
            expectations: dict[str, Expectation] = {}
            for device, node in devices.items():
                at = devices.lc.key(device)
                self.string(device, at, "a device name")
                e = self.mapping(node if node is not None else {}, at, f"{path}: {device}")
                self.known(e, _DEVICE, f"traces.{path}.{device}.")
                checksum = self.checksum(e.get("checksum"), at)
                labels = self.labels(e.get("label"), at)
                text = e.get("text")
                expectations[device] = Expectation(
                    device, checksum, labels, None if text is None else str(text)
                )
            entries.append(TraceEntry(str(path), where[0] + 1, expectations))
        return entries


def _shown(node: Any) -> str:
    text = repr(node if not isinstance(node, (dict, list)) else type(node).__name__)
    return text if len(text) < 60 else text[:57] + "..."


def _item_place(sequence: Any, i: int) -> Any:
    """(line, column) of item `i` of a sequence ruamel.yaml read."""
    return sequence.lc.item(i)
