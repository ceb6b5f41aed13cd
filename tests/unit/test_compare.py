"""The statistics of `retrace diff` against scipy's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrace.compare.stats import EXACT_LIMIT, false_discovery, shift_interval


def test_interval_inverts_the_test():
    """The interval holds exactly the shifts a two-sided Mann-Whitney test (scipy's) keeps."""
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(16)
    for m, n in [(4, 4), (5, 5), (3, 7), (10, 12), (60, 60)]:
        base, new = rng.lognormal(size=m), rng.lognormal(size=n) * 1.3
        low, high = shift_interval(base, new, 0.95)
        shifts = np.unique(new[None, :] - base[:, None])
        method = "exact" if m * n <= EXACT_LIMIT else "asymptotic"
        for s in (shifts[1:] + shifts[:-1]) / 2:  # between differences: no ties
            p = scipy_stats.mannwhitneyu(new - s, base, method=method).pvalue
            assert (low < s < high) == (p > 0.05), (m, n, s)
    assert shift_interval(np.ones(3), np.ones(3), 0.95) == (-math.inf, math.inf)


def test_false_discovery_matches_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(16)
    for p in (rng.uniform(size=500) ** 4, np.array([0.004] * 7 + [0.5] * 3), np.array([0.2])):
        expected = scipy_stats.false_discovery_control(p)
        np.testing.assert_allclose(false_discovery(p), expected, rtol=1e-12)


@pytest.mark.parametrize("metric", ["GPU Busy", "GPU Idle"])
def test_gpu_busy_and_idle_are_time_costs(tmp_path, metric):
    """`retrace diff` and `compare` judge them as they judge the Durations: more is worse,
    changes under the nanosecond floor are noise."""
    import json
    import subprocess
    import sys

    def profile(name: str, ns: int) -> str:
        path = tmp_path / f"{name}.tsv"
        path.write_text(f"#\t{metric}\n" + f"frame\t{ns}\n" * 6)
        return str(path)

    base, slower, tiny = (
        profile("base", 400_000),
        profile("slower", 800_000),
        profile("tiny", 400_900),
    )
    verdicts = []
    for new in (slower, tiny):
        args = [sys.executable, "-m", "retrace", "diff", base, new, "--format", "json"]
        done = subprocess.run(args, capture_output=True, text=True)
        verdicts.append((done.returncode, json.loads(done.stdout)["verdict"]))
    assert verdicts == [(1, "regression"), (0, "same")]
