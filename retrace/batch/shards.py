"""Sharding without a cluster: this machine's share of a batch's jobs.

A CI matrix or a Slurm array starts the same `retrace batch` on N machines;
each takes every N-th job (by the order of the manifest, so shards stay even
when traces differ in size only by chance) and writes its own database, and
`retrace batch merge` joins them. The shard is `--shard I/N` (1-based, as
"shard 2 of 4" is said), or else read from the environment CI systems and
Slurm set: ``CI_NODE_INDEX``/``CI_NODE_TOTAL`` (GitLab's `parallel`, 1-based)
or ``SLURM_ARRAY_TASK_ID``/``SLURM_ARRAY_TASK_COUNT`` (counted from
``SLURM_ARRAY_TASK_MIN``, 0 if unset).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from retrace.errors import UsageError

T = TypeVar("T")


def parse_shard(text: str, source: str = "--shard") -> tuple[int, int]:
    """Parse "I/N" as (I, N), 1 <= I <= N; anything else is a usage error."""
    index, sep, total = text.partition("/")
    try:
        shard = (int(index), int(total))
    except ValueError:
        shard = (0, 0)
    if not sep or not 1 <= shard[0] <= shard[1]:
        raise UsageError(f"{source}: expected I/N with 1 <= I <= N, not {text!r}")
    return shard


def shard_from_environment(env: Mapping[str, str]) -> tuple[int, int] | None:
    """The shard a CI job or Slurm array task is, or None outside one."""
    if env.get("CI_NODE_TOTAL"):
        spec = f"{env.get('CI_NODE_INDEX', '')}/{env['CI_NODE_TOTAL']}"
        return parse_shard(spec, "CI_NODE_INDEX/CI_NODE_TOTAL")
    if env.get("SLURM_ARRAY_TASK_COUNT"):
        try:
            first = int(env.get("SLURM_ARRAY_TASK_MIN", "0"))
            index = int(env.get("SLURM_ARRAY_TASK_ID", "")) - first
        except ValueError:
            index = -1
        spec = f"{index + 1}/{env['SLURM_ARRAY_TASK_COUNT']}"
        return parse_shard(spec, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT")
    return None


def take_shard(items: Sequence[T], shard: tuple[int, int] | None) -> list[T]:
    """Every N-th item from the I-th: shard I of N (all of them without a shard)."""
    if shard is None:
        return list(items)
    index, total = shard
    return list(items[index - 1 :: total])
