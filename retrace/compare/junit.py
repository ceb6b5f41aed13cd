"""JUnit XML, the report format every CI system shows: a batch's jobs, or a corpus diff.

One <testsuite> of <testcase> elements; a case that failed has a <failure>
whose message is the one line retrace would print. Written with the standard
library's ElementTree, which escapes what traces and driver messages contain.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SKIPPED = "skip"


@dataclass(frozen=True)
class Case:
    """One test case: `failure` is None when it passed; `kind` names the failure's type, and
    a case of kind SKIPPED was not run: `failure` says why."""

    classname: str
    name: str
    seconds: float = 0.0
    failure: str | None = None
    kind: str = "failure"
    details: str = ""


def write_junit(path: str | Path, suite: str, cases: Sequence[Case]) -> None:
    """Write `cases` as one JUnit test suite named `suite` to `path`."""
    failures = sum(case.failure is not None and case.kind != SKIPPED for case in cases)
    skipped = sum(case.kind == SKIPPED for case in cases)
    root = ET.Element("testsuites", tests=str(len(cases)), failures=str(failures))
    element = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time=f"{sum(c.seconds for c in cases):.3f}",
    )
    for case in cases:
        seconds = f"{case.seconds:.3f}"
        node = ET.SubElement(
            element, "testcase", classname=case.classname, name=case.name, time=seconds
        )
        if case.kind == SKIPPED:
            ET.SubElement(node, "skipped", message=case.failure or "")
        elif case.failure is not None:
            failure = ET.SubElement(node, "failure", message=case.failure, type=case.kind)
            failure.text = case.details or case.failure
    ET.indent(root)
    Path(path).write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n")
