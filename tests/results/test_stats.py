"""The statistics module against values checked by hand (and, for pass@k, by enumeration)."""

from __future__ import annotations

import itertools

import pytest

from pytest_swe_arena.results.stats import (
    five_numbers,
    mcnemar_exact_p,
    median,
    pass_at_k,
    pass_hat_k,
    per_resolved,
    quantile,
    wilson_interval,
)


# z = 1.959964, z^2 = 3.841459. At 5/10: centre 0.5, half-width
# z * sqrt(0.025 + z^2/400) / (1 + z^2/10) = 0.263406. At 0/10 the upper bound is
# (z^2/20 + z * sqrt(z^2/400)) / (1 + z^2/10) = 2 * 0.192073 / 1.384146 = 0.277533.
@pytest.mark.parametrize(("successes", "low", "high"), [
    (0, 0.0, 0.277533),
    (5, 0.236594, 0.763406),
    (10, 0.722467, 1.0),
])
def test_wilson_interval_at_0_5_and_10_of_10(successes, low, high):
    interval = wilson_interval(successes, 10)
    assert interval == pytest.approx((low, high), abs=1e-6)


def test_wilson_interval_is_unavailable_without_trials_and_rejects_impossible_counts():
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="between 0 and 10, got 11"):
        wilson_interval(11, 10)


def test_exact_mcnemar_with_7_against_1():
    # n = 8 discordant pairs; P(X <= 1 | Bin(8, 1/2)) = (1 + 8) / 256; two-sided doubles it.
    assert mcnemar_exact_p(7, 1) == pytest.approx(18 / 256)
    assert mcnemar_exact_p(1, 7) == mcnemar_exact_p(7, 1)


@pytest.mark.parametrize(("first", "second", "expected"), [
    (0, 0, 1.0),            # no discordant pair: no evidence of a difference
    (3, 3, 1.0),            # an even split is capped at 1
    (6, 0, 2 / 64),         # the smallest p with six pairs
    (10, 2, 2 * 79 / 4096),  # (1 + 12 + 66) / 2^12, doubled
])
def test_exact_mcnemar_edge_cases(first, second, expected):
    assert mcnemar_exact_p(first, second) == pytest.approx(expected)


def test_pass_at_k_and_pass_hat_k_by_hand():
    # n = 5 trials, c = 2 passed, k = 2: C(3,2)/C(5,2) = 3/10 of the pairs fail both; C(2,2)/C(5,2) pass both.
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1)
    assert pass_at_k(10, 3, 1) == pass_hat_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 4, 3) == pass_hat_k(4, 4, 3) == 1.0
    assert pass_at_k(4, 0, 3) == pass_hat_k(4, 0, 3) == 0.0


@pytest.mark.parametrize(("n", "c"), [(n, c) for n in range(1, 7) for c in range(n + 1)])
def test_pass_at_k_and_pass_hat_k_match_enumerating_every_draw_of_k_trials(n, c):
    trials = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        draws = list(itertools.combinations(trials, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(draw) for draw in draws) / len(draws))
        assert pass_hat_k(n, c, k) == pytest.approx(sum(all(draw) for draw in draws) / len(draws))


def test_pass_at_k_is_unavailable_with_fewer_trials_than_k_and_rejects_bad_counts():
    assert pass_at_k(2, 1, 3) is None and pass_hat_k(2, 1, 3) is None
    with pytest.raises(ValueError, match="between 0 and 2, got 3"):
        pass_at_k(2, 3, 1)
    with pytest.raises(ValueError, match="k must be at least 1, got 0"):
        pass_hat_k(2, 1, 0)


def test_per_resolved_is_unavailable_never_zero():
    assert per_resolved(1.5, 3) == pytest.approx(0.5)
    assert per_resolved(1200, 4) == 300
    assert per_resolved(None, 3) is None, "unknown cost"
    assert per_resolved(1.5, 0) is None, "nothing resolved"
    assert per_resolved(0.0, 2) == 0.0, "a known zero stays zero"


def test_median_quantiles_and_five_numbers():
    assert median([]) is None
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert quantile([10.0, 20.0, 30.0, 40.0, 50.0], 0.25) == 20.0
    assert five_numbers([]) is None
    assert five_numbers([5.0, 1.0, 3.0, 2.0, 4.0]) == {"min": 1.0, "q1": 2.0, "median": 3.0, "q3": 4.0, "max": 5.0}
