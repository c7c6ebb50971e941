"""Confidence intervals and tests for comparing runs on the same questions.

- `wilson_interval`: the interval of a proportion (Hits@1 of a run or of a group of its questions). Wilson's
  score interval stays inside [0, 1] and behaves at 0/n and n/n, where the normal approximation does not.
- `paired_bootstrap`: the interval of the mean difference between two runs *on the same questions*,
  resampling questions (a pair of scores moves together), seeded so a report is reproducible.
- `mcnemar_exact`: McNemar's test for paired right/wrong outcomes, exact: under "no difference" each
  discordant question (right in one run only) is a fair coin, so the two-sided p-value is a binomial
  tail, computed with integers (`math.comb`); valid for any count, including the small ones where the
  chi-squared approximation is not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: The 97.5th percentile of the standard normal: a 95% two-sided interval.
Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, *, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for a proportion; (0, 0) for n = 0.

    >>> tuple(round(x, 4) for x in wilson_interval(8, 10))
    (0.4902, 0.9433)
    >>> wilson_interval(0, 0)
    (0.0, 0.0)
    """
    if n <= 0:
        return 0.0, 0.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes <= 0 else max(0.0, centre - half)  # exact at the ends, where rounding could cross p
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class PairedDifference:
    """The mean of `b - a` over paired questions and its bootstrap interval."""

    mean_a: float
    mean_b: float
    difference: float
    low: float
    high: float
    n: int

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies on one side of 0 (the runs differ at the interval's level)."""
        return self.low > 0 or self.high < 0


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0, confidence: float = 0.95,
) -> PairedDifference:
    """Percentile bootstrap interval of mean(b) - mean(a), resampling the paired questions with replacement.

    Seeded (`numpy.random.default_rng(seed)`), so the same runs give the same interval. Resampling is done
    in blocks so memory stays small at 10,000 questions.
    """
    import numpy as np

    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")
    n = len(a)
    if n == 0:
        return PairedDifference(0.0, 0.0, 0.0, 0.0, 0.0, 0)
    left, right = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    differences = right - left
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    block = max(1, 2_000_000 // n)
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        means[start:start + size] = differences[rng.integers(0, n, size=(size, n))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return PairedDifference(float(left.mean()), float(right.mean()), float(differences.mean()), float(low),
                            float(high), n)


@dataclass(frozen=True)
class McNemar:
    """Discordant pairs and the exact two-sided p-value: `b_only` right in b only, `a_only` right in a only."""

    a_only: int
    b_only: int
    p_value: float


def mcnemar_exact(a: Sequence[int | bool], b: Sequence[int | bool]) -> McNemar:
    """McNemar's exact test on paired 0/1 outcomes (see the module doc).

    >>> mcnemar_exact([1, 1, 0, 0, 0, 0, 0, 0], [1, 0, 1, 1, 1, 1, 1, 1])
    McNemar(a_only=1, b_only=6, p_value=0.125)
    >>> mcnemar_exact([1, 0], [1, 0]).p_value
    1.0
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")
    a_only = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    b_only = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    return McNemar(a_only, b_only, binomial_two_sided(min(a_only, b_only), a_only + b_only))


def binomial_two_sided(k: int, n: int) -> float:
    """P(X <= k or X >= n - k) for X ~ Binomial(n, 1/2), k <= n/2: the exact two-sided tail (1.0 for n = 0).

    >>> binomial_two_sided(1, 7)
    0.125
    >>> round(binomial_two_sided(10, 40), 6)
    0.002221
    """
    if n == 0:
        return 1.0
    k = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, 2 * tail / 2**n)
