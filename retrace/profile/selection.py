"""glretrace's metric selection grammar.

    --pframes "opengl: GPU Duration, Pixels Drawn; cpu: [0, 1]"

Backends are separated by ``;``; after a backend name and ``:`` come metrics
separated by ``,``, each a name (matched case-insensitively) or ``[group, id]``.
Unlike glretrace, which warns and carries on, an unknown backend or metric is
an error that names the closest existing ones: a profile silently missing a
column is worse than no profile. The spelling of the user's design card,
"GPU time" and "CPU time", selects "GPU Duration" and "CPU Duration".

Here too, finding the backends and metrics a selection names (`find_backend`,
`find_metric`): the command line checks a selection before the replay forks
(`checks`) with this module only, the planner in the replaying child.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from retrace.errors import UsageError
from retrace.vocabulary import Boundary

if TYPE_CHECKING:
    from retrace.backends.base import MetricBackend
    from retrace.vocabulary import Metric

# Names people write for glretrace's metrics (the design card says "GPU time").
ALIASES = {"gpu time": "gpu duration", "cpu time": "cpu duration"}

_ID = re.compile(r"\[\s*(\d+)\s*,\s*(\d+)\s*\]$")
OPTION = {Boundary.FRAME: "--pframes", Boundary.CALL: "--pcalls", Boundary.DRAWCALL: "--pdrawcalls"}
B = TypeVar("B")  # a backend, or what stands for one (`checks`)


class MetricRef(NamedTuple):
    """A metric as the user wrote it: a name, or (group, id)."""

    text: str
    name: str | None = None
    group: int | None = None
    id: int | None = None


def parse_selection(spec: str, option: str) -> list[tuple[str, list[MetricRef]]]:
    """[(backend name, [metric refs])] in the order written; raises UsageError."""
    out: list[tuple[str, list[MetricRef]]] = []
    for part in spec.split(";"):
        if not part.strip():
            continue
        backend, sep, rest = part.partition(":")
        if not sep or not backend.strip():
            raise UsageError(f'{option}: expected "backend: metric, ..." but got "{part.strip()}"')
        refs = []
        for raw in _split_metrics(rest):
            text = raw.strip()
            if not text:
                continue
            match = _ID.match(text)
            if match:
                refs.append(MetricRef(text, group=int(match[1]), id=int(match[2])))
            else:
                refs.append(MetricRef(text, name=ALIASES.get(text.casefold(), text)))
        if not refs:
            raise UsageError(f'{option}: no metric given for backend "{backend.strip()}"')
        out.append((backend.strip(), refs))
    if not out:
        raise UsageError(f"{option}: empty metric selection")
    return out


def _split_metrics(text: str) -> list[str]:
    """Split on commas that are not inside [group, id]."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def closest(word: str, candidates: list[str]) -> str:
    """' (did you mean: A, B?)' or '' — for error messages."""
    import difflib  # (an error's: not every profile's, in the parent and its child)

    folded = {c.casefold(): c for c in candidates}
    matches = difflib.get_close_matches(word.casefold(), list(folded), n=3, cutoff=0.4)
    if not matches:
        return f" (available: {', '.join(candidates)})" if candidates else ""
    return f" (did you mean: {', '.join(folded[m] for m in matches)}?)"


def find_metric(backend: MetricBackend, ref: MetricRef, boundary: Boundary, option: str) -> Metric:
    """The metric `ref` names in `backend`, measurable per `boundary`; else a UsageError that
    names the closest."""
    if ref.name is not None:
        metric = backend.metric_by_name(ref.name)
    else:  # the grammar gives a name, or a group and an id
        assert ref.group is not None and ref.id is not None
        metric = backend.metric_by_id(ref.group, ref.id)
    if metric is None:
        hint = closest(ref.name or ref.text, [m.name for m in backend.metrics()])
        raise UsageError(f'{option}: backend "{backend.name}" has no metric "{ref.text}"{hint}')
    if boundary not in backend.boundaries(metric):
        raise UsageError(
            f'{option}: "{metric.name}" of {backend.name} cannot be measured per '
            f"{boundary.name.lower()}"
        )
    return metric


def find_backend(name: str, backends: Mapping[str, B], option: str) -> B:
    """A backend by name, matched exactly or else case-insensitively."""
    key = (
        name
        if name in backends
        else next((n for n in backends if n.casefold() == name.casefold()), None)
    )
    if key is None:
        raise UsageError(f'{option}: no backend "{name}"{closest(name, list(backends))}')
    return backends[key]
