"""The intervals and tests of report/stats.py on known values."""

from __future__ import annotations

import math

import pytest

from ppoga_dspy.report.stats import (
    binomial_two_sided,
    mcnemar_exact,
    paired_bootstrap,
    wilson_interval,
)


def test_wilson_known_values():
    low, high = wilson_interval(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)  # Wilson (1927), as statsmodels' proportion_confint
    assert wilson_interval(0, 0) == (0.0, 0.0)
    low, high = wilson_interval(0, 20)
    assert low == 0.0 and round(high, 4) == 0.1611
    low, high = wilson_interval(20, 20)
    assert high == 1.0 and round(low, 4) == 0.8389


def test_exact_binomial_tail_known_values():
    assert binomial_two_sided(1, 7) == 0.125  # 2 * (1 + 7) / 128
    assert binomial_two_sided(0, 0) == 1.0
    assert binomial_two_sided(5, 10) == 1.0  # as many each way: no evidence
    assert math.isclose(binomial_two_sided(10, 40), 0.0022214337732293643, rel_tol=1e-12)  # scipy binomtest


def test_exact_binomial_matches_scipy_where_installed():
    stats = pytest.importorskip("scipy.stats")
    for n in (1, 2, 9, 30, 101, 400):
        for k in range(0, n // 2 + 1, max(1, n // 7)):
            assert math.isclose(binomial_two_sided(k, n), stats.binomtest(k, n, 0.5).pvalue, rel_tol=1e-9), (k, n)


def test_mcnemar_counts_discordant_pairs_only():
    a = [1, 1, 0, 0, 0, 0, 0, 0, 1, 0]
    b = [1, 0, 1, 1, 1, 1, 1, 1, 1, 0]
    result = mcnemar_exact(a, b)
    assert (result.a_only, result.b_only) == (1, 6) and result.p_value == 0.125
    with pytest.raises(ValueError, match="differ in length"):
        mcnemar_exact([1], [1, 0])


def test_paired_bootstrap_is_seeded_and_paired():
    a = [0, 1] * 50
    shifted = paired_bootstrap(a, [x + 1 for x in a])
    assert (shifted.difference, shifted.low, shifted.high) == (1.0, 1.0, 1.0)  # the pairs move together
    same = paired_bootstrap(a, a)
    assert (same.low, same.high) == (0.0, 0.0) and not same.excludes_zero
    b = [1] * 100
    first, again = paired_bootstrap(a, b, seed=3), paired_bootstrap(a, b, seed=3)
    assert first == again and first.difference == 0.5 and first.excludes_zero
    # b - a is 1 on half the questions, 0 on the rest: the mean's standard error is 0.05, so the 95% interval
    # is about 0.5 +- 0.098
    assert 0.38 < first.low < 0.42 and 0.58 < first.high < 0.62
    assert paired_bootstrap([], []).n == 0
