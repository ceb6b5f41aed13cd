"""From a selection to a plan: the metrics of every table and the replays that measure them.

Runs at the first context the trace makes current (metrics depend on it, as in
glretrace): every selected metric is found in its backend and enabled there,
then every backend splits what it was given into passes. Errors name the
closest existing name.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import NamedTuple

from retrace.backends.base import MetricBackend
from retrace.errors import UsageError
from retrace.profile.events import PassPlan
from retrace.profile.selection import OPTION, find_backend, find_metric, parse_selection
from retrace.vocabulary import Boundary, Metric, MetricError


class Plan(NamedTuple):
    """The columns of each table, in glretrace's order, and the passes, in order."""

    metrics: dict[Boundary, list[Metric]]
    passes: list[PassPlan]


def plan(selections: Mapping[Boundary, str], backends: Mapping[str, MetricBackend]) -> Plan:
    """Enable the selected metrics and plan the passes: backends in order of first mention,
    each backend's metrics in its own order (a metric that cannot be enabled here gets a
    warning and '-' cells)."""
    order: list[str] = []
    wanted: dict[Boundary, dict[str, list[Metric]]] = {}
    warnings: dict[str, str] = {}
    for boundary, spec in selections.items():
        option = OPTION[boundary]
        for backend_name, refs in parse_selection(spec, option):
            backend = find_backend(backend_name, backends, option)
            if backend.name not in order:
                order.append(backend.name)
            for ref in refs:
                metric = find_metric(backend, ref, boundary, option)
                chosen = wanted.setdefault(boundary, {}).setdefault(backend.name, [])
                if metric in chosen:
                    raise UsageError(
                        f'{option}: "{metric.name}" of {backend.name} is selected twice'
                    )
                try:
                    backend.enable(metric, boundary)
                except MetricError as e:  # told once, whichever tables select it
                    warnings.setdefault(str(e), f"retrace: warning: {e}; its cells will read '-'")
                chosen.append(metric)
    for line in warnings.values():
        print(line, file=sys.stderr)
    result = Plan({}, [])
    for boundary, per_backend in wanted.items():
        columns: list[Metric] = []
        for name in order:
            picked = set(per_backend.get(name, ()))
            columns += [m for m in backends[name].metrics() if m in picked]
        result.metrics[boundary] = columns
    for name in order:
        backend = backends[name]
        for index in range(backend.generate_passes()):
            result.passes.append(PassPlan(backend, index, backend.pass_boundaries(index)))
    return result
