"""Whether a change between two sets of runs is more than noise: Mann-Whitney U.

Timings of replays are not normally distributed. A run can be slowed by a page
fault, a preempted thread or a shader compiled in the background, so one slow
run makes a skewed distribution with outliers. A rank test assumes no shape
and lets one outlier move the statistic by at most one rank, so it suits few
runs of noisy timings better than a t-test does. It is also deterministic: the
same files always give the same verdict, which a bootstrap on a few runs does
not guarantee.

U counts, for each row, the (base run, new run) pairs where the new value is
the larger; ties count one half. p-values are one-sided in each direction:
`p_up` is the chance of a U this large if both sides came from one
distribution. For small run counts they are exact: the null distribution of U
is counted by recursion on the largest value, and ties are not corrected for,
which makes it slightly conservative. For large run counts they use the normal
approximation with a continuity correction. With m and n runs the smallest
possible one-sided p is 1 / C(m+n, m). Verdicts use the two-sided p (twice the
smaller one), since a change either way is reported: 4 runs per side reach
0.05.

Two more tools build on U. `shift_interval` is the confidence interval that
inverts the same test (Hodges-Lehmann/Moses): exact, deterministic, and
honest with few runs, where a bootstrap of 3 to 5 runs has only a handful of
distinct resamples and gives intervals that are too narrow. `false_discovery`
is Benjamini-Hochberg's adjustment, so that testing a thousand rows at once
does not turn noise into "regressions". Both are a few lines of numpy; scipy
(over 100 MB installed) is used only to check them in the tests.
"""

from __future__ import annotations

import functools
import math
import statistics

import numpy as np

# Run counts with m * n up to this get exact p-values; the recursion costs ~(m*n)^2 / 4.
EXACT_LIMIT = 2500
# Comparing probabilities with a level: a p-value of exactly the level passes despite rounding.
P_SLACK = 1 + 1e-9
# Rows compared at once: bounds the (m, n, rows) comparison block to ~32 MB of booleans.
_BLOCK = 1 << 25


def smallest_p(m: int, n: int) -> float:
    """The smallest two-sided p-value m and n runs can give (4 per side reach 0.05)."""
    return 2.0 / math.comb(m + n, m)


def two_sided(base: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Two-sided p-values per row: a change either way is a finding (an improvement too)."""
    p_up, p_down = mann_whitney(base, new)
    return np.minimum(2 * np.minimum(p_up, p_down), 1.0)


def u_statistic(base: np.ndarray, new: np.ndarray) -> np.ndarray:
    """U of `new` against `base` per row; `base` is (m, rows), `new` is (n, rows)."""
    m, rows = base.shape
    n = new.shape[0]
    u = np.empty(rows)
    step = max(1, _BLOCK // (m * n))
    for start in range(0, rows, step):
        b = base[:, None, start : start + step]
        w = new[None, :, start : start + step]
        u[start : start + step] = (w > b).sum(axis=(0, 1)) + 0.5 * (w == b).sum(axis=(0, 1))
    return u


def mann_whitney(base: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One-sided p-values per row: (new is larger, new is smaller)."""
    m, n = base.shape[0], new.shape[0]
    u = u_statistic(base, new)
    if m * n <= EXACT_LIMIT:
        sf = _exact_sf(m, n)
        p_up = sf[np.ceil(u).astype(np.int64)]
        p_down = sf[np.ceil(m * n - u).astype(np.int64)]
    else:
        mean = m * n / 2
        sd = math.sqrt(m * n * (m + n + 1) / 12)
        p_up = _normal_sf((u - mean - 0.5) / sd)
        p_down = _normal_sf((mean - u - 0.5) / sd)
    return np.minimum(p_up, 1.0), np.minimum(p_down, 1.0)


def shift_interval(base: np.ndarray, new: np.ndarray, confidence: float) -> tuple[float, float]:
    """The distribution-free interval for the shift `new - base` of two 1-D samples.

    The shifts s for which a two-sided Mann-Whitney test of `new - s` against
    `base` is not rejected at 1 - `confidence`: order statistics k + 1 and
    mn - k of the m * n pairwise differences, k the largest U with
    P(U <= k) <= (1 - confidence) / 2. (-inf, inf) when the run counts are too
    few for that confidence (4 or more runs per side reach 95%).
    """
    m, n = base.size, new.size
    tail = (1 - confidence) / 2
    if m * n <= EXACT_LIMIT:
        below = _exact_sf(m, n)[::-1]  # below[k] = P(U <= k), by symmetry
        k = int(np.count_nonzero(below <= tail * P_SLACK)) - 1
    else:
        sd = math.sqrt(m * n * (m + n + 1) / 12)
        k = math.floor(m * n / 2 - statistics.NormalDist().inv_cdf(1 - tail) * sd - 0.5)
    if k < 0:
        return -math.inf, math.inf
    differences = np.sort((new[None, :] - base[:, None]).ravel())
    return float(differences[k]), float(differences[m * n - 1 - k])


def false_discovery(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q): a row with q <= alpha keeps the expected
    share of false discoveries among the rows that pass below alpha."""
    count = p.size
    if count == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = p[order] * count / np.arange(1, count + 1)
    q = np.minimum.accumulate(scaled[::-1])[::-1]
    adjusted = np.empty_like(q)
    adjusted[order] = np.minimum(q, 1.0)
    return adjusted


@functools.lru_cache(maxsize=16)
def _exact_sf(m: int, n: int) -> np.ndarray:
    """P(U >= u) for u = 0 .. m*n when the two sides come from one distribution.

    p(i, j) is the distribution of U for i base and j new values. The largest of
    the i + j values is a base value with probability i / (i + j), adding no
    pair, or a new value, adding i pairs (it is larger than every base value).
    """
    previous = [np.ones(1) for _ in range(n + 1)]  # i = 0: U is 0
    for i in range(1, m + 1):
        current = [np.ones(1)]  # j = 0
        for j in range(1, n + 1):
            pmf = np.zeros(i * j + 1)
            below = previous[j]
            pmf[: below.size] += i / (i + j) * below
            left = current[j - 1]
            pmf[i : i + left.size] += j / (i + j) * left
            current.append(pmf)
        previous = current
    pmf = previous[n]
    return np.cumsum(pmf[::-1])[::-1]


def _normal_sf(z: np.ndarray) -> np.ndarray:
    """P(Z >= z) for a standard normal Z, elementwise."""
    return 0.5 * np.asarray(np.frompyfunc(math.erfc, 1, 1)(z / math.sqrt(2)), np.float64)
