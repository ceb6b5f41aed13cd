"""Crafted traces never make the driver write past memory retrace gave it.

A seeded, bounded run of `fuzzing.mutate_outputs` (the long run, beside glretrace and
eglretrace, is `benchmarks/fuzz_outputs.py`): numbers of output-writing and pixel-store
calls of real traces changed, recorded output arrays shortened, each case replayed. A
write past retrace's scratch faults in its guard and ends as retrace's own error, which
must never happen; nor may a traceback, a hang or a crash of retrace itself.
"""

from __future__ import annotations

import random
from collections import Counter

from conftest import ROOT
from fuzzing import FAILURES, Harness, Seed, mutate_outputs, output_targets, replay_outcome

SEEDS = (
    "readback-pixels.trace",  # glReadPixels under every pack state, glReadnPixels
    "readback-textures.trace",  # glGetTexImage of every kind, compressed, DSA
    "piglit-fbo-blit.trace",  # glReadPixels probes, glGen*
    "persistent-map.trace",  # glCreateBuffers, glGenVertexArrays
)
CASES = 50


def test_crafted_outputs_never_overrun_retraces_memory(tmp_path):
    rng = random.Random(26)
    seeds = [Seed.load(ROOT / "traces" / name) for name in SEEDS]
    targets = [output_targets(seed) for seed in seeds]
    outcomes: Counter[str] = Counter()
    failures = []
    with Harness(timeout=120) as harness:
        for case in range(CASES):
            index = rng.randrange(len(seeds))
            path = tmp_path / f"{case}.trace"
            path.write_bytes(mutate_outputs(seeds[index], targets[index], rng))
            outcome, detail = replay_outcome(harness, path)
            outcomes[outcome] += 1
            if outcome in (*FAILURES, "out-of-bounds write"):
                failures.append((case, SEEDS[index], outcome, detail[-400:]))
    assert not failures, (failures, outcomes)
    assert outcomes["ok"] > CASES // 2  # the changes were replayed, not refused wholesale
