"""`--update-checksums`: write the checksums measured on one device back into the file.

ruamel.yaml's round trip keeps the file as it was but for the checksums: the
comments, the order of traces and devices, the quoting, ``%YAML 1.2`` and
fields retrace does not know. Only the device's existing entries change
(a trace the file does not list for the device gets none); a trace whose
last frame could not be replayed keeps its checksum. Labels are kept: a
changed checksum under a label is named on stderr, so that someone checks the
label still holds, as Mesa's update_traces_checksum.py does.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from retrace.batch.ci.description import load_yaml, parse
from retrace.writer.atomic import replaced

_WIDTH = 4096  # never fold a long line (text: notes) that the file has on one line


def update_checksums(path: Path, device: str, measured: dict[str, str]) -> list[str]:
    """Set `device`'s checksum of each trace in `measured` (path -> checksum); the traces
    changed. The file is rewritten only if one did."""
    from ruamel.yaml import YAML

    document = load_yaml(path)
    description = parse(path, document)  # the same checks as reading it
    changed = []
    traces = document["traces"]
    for entry in description.traces:
        new = measured.get(entry.path)
        old = entry.expectations.get(device)
        if new is None or old is None or old.checksum == new:
            continue
        node = _device_node(traces, description.layout, entry.path, device)
        # (a checksum of digits was unquoted, a number to YAML: the new one is quoted)
        node["checksum"] = new if isinstance(node.get("checksum"), str) else _quoted(new)
        changed.append(entry.path)
        if old.labels:
            labels = ", ".join(old.labels)
            print(
                f"retrace batch: {entry.path}: checksum updated under label [{labels}]: "
                "check that the label still holds",
                file=sys.stderr,
            )
    if changed:
        yaml = YAML()
        yaml.width = _WIDTH
        yaml.indent(mapping=2, sequence=_sequence_indent(path), offset=_offset(path))
        head = path.read_text(encoding="utf-8").lstrip().splitlines()[:2]
        if head and head[0].startswith("%YAML 1.2"):
            yaml.version = (1, 2)  # the directive (and its "---") as the file has it
        elif head and head[0].rstrip() == "---":
            yaml.explicit_start = True
        with replaced(str(path)) as stream:
            yaml.dump(document, stream)
    return changed


def _quoted(text: str) -> Any:
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    return DoubleQuotedScalarString(text)


def _device_node(traces: Any, layout: str, trace: str, device: str) -> Any:
    """The device's mapping under the trace, made where the file has the device's key with
    nothing under it (`gl-vmware-llvmpipe:`, a trace to add as Mesa's docs show)."""
    if layout == "mapping":
        devices = traces[trace]
        if devices[device] is None:
            from ruamel.yaml.comments import CommentedMap

            devices[device] = CommentedMap()
        return devices[device]
    item = next(t for t in traces if t.get("path") == trace)
    return next(e for e in item["expectations"] if e.get("device") == device)


def _sequence_indent(path: Path) -> int:
    """The indent of the file's block sequences, dash included (Mesa's: 4, as "  - x")."""
    dash, item = _first_dash(path)
    return max(2, item) if dash is not None else 2


def _offset(path: Path) -> int:
    dash, _ = _first_dash(path)
    return dash if dash is not None else 0


def _first_dash(path: Path) -> tuple[int | None, int]:
    """The first block sequence item under a key: the dash's column relative to the key,
    and the item's (dash, space and all)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for above, line in zip(lines, lines[1:], strict=False):
        stripped = line.lstrip(" ")
        if stripped.startswith("- ") and above.rstrip().endswith(":"):
            key_column = len(above) - len(above.lstrip(" "))
            dash = len(line) - len(stripped) - key_column
            return dash, dash + 2
    return None, 2
