"""The statistics module against values checked by hand (and, for pass@k, by enumeration)."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import pytest

from pytest_swe_arena.results.stats import (
    binomial_sample,
    discrimination,
    five_numbers,
    holm_adjusted,
    mcnemar_exact_p,
    mean_interval,
    median,
    paired_bootstrap_interval,
    paired_comparison,
    pass_at_k,
    pass_hat_k,
    per_resolved,
    quantile,
    ratio_interval,
    significance_groups,
    trial_rates,
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


@pytest.mark.parametrize(("n", "p"), [(12, 0.3), (200, 0.02), (60, 0.4), (400, 0.7), (5000, 0.5)])
def test_binomial_draws_follow_the_binomial_distribution(n, p):
    """Both samplers (waiting times below a mean of 10, BTRS above) against the exact pmf (chi-square)."""
    draws = 40_000
    rng = random.Random(n)
    counts = Counter(binomial_sample(rng, n, p) for _ in range(draws))
    expected = {k: draws * math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                                    + k * math.log(p) + (n - k) * math.log(1 - p)) for k in range(n + 1)}
    cells = [k for k, e in expected.items() if e >= 5]  # pooled tails below
    chi2 = sum((counts[k] - expected[k]) ** 2 / expected[k] for k in cells)
    tail_e = draws - sum(expected[k] for k in cells)
    tail_o = draws - sum(counts[k] for k in cells)
    chi2 += (tail_o - tail_e) ** 2 / tail_e if tail_e >= 5 else 0
    degrees = len(cells)
    # Seeded, so deterministic; the bound is the chi-square 99.9% point (Wilson-Hilferty), far from chance.
    bound = degrees * (1 - 2 / (9 * degrees) + 3.09 * math.sqrt(2 / (9 * degrees))) ** 3
    assert chi2 < bound, (chi2, bound)
    assert sum(k * c for k, c in counts.items()) / draws == pytest.approx(n * p, rel=0.02)


def test_binomial_edge_cases():
    rng = random.Random(0)
    assert binomial_sample(rng, 0, 0.5) == 0 and binomial_sample(rng, 9, 0.0) == 0
    assert binomial_sample(rng, 9, 1.0) == 9
    assert all(0 <= binomial_sample(rng, 30, 0.999) <= 30 for _ in range(1000))


def ideal_bootstrap_quantile(kinds: dict[int, int], q: float) -> float:
    """The q quantile of the exact (infinitely replicated) bootstrap of a paired difference of one-trial cells.

    ``kinds`` counts the cells whose difference is +1, 0 and -1; every resample is enumerated.
    """
    total = sum(kinds.values())
    p_up, p_down = kinds[1] / total, kinds[-1] / total
    p_same = 1 - p_up - p_down
    mass: dict[int, float] = {}
    for up in range(total + 1):
        for down in range(total - up + 1):
            weight = (math.factorial(total) / (math.factorial(up) * math.factorial(down)
                      * math.factorial(total - up - down)) * p_up**up * p_down**down * p_same ** (total - up - down))
            mass[up - down] = mass.get(up - down, 0.0) + weight
    running = 0.0
    for difference in sorted(mass):
        running += mass[difference]
        if running >= q:
            return difference / total
    return max(mass) / total


def test_paired_bootstrap_matches_the_ideal_bootstrap_on_a_small_sweep():
    """12 cells: A alone resolves 5, B alone 2, 5 agree. Monte Carlo quantiles land on the exact ones."""
    clusters = [(1, 1)] * 5 + [(-1, 1)] * 2 + [(0, 1)] * 5
    low, high = paired_bootstrap_interval(clusters, replicates=20_000, seed=3)
    exact_low = ideal_bootstrap_quantile({1: 5, -1: 2, 0: 5}, 0.025)
    exact_high = ideal_bootstrap_quantile({1: 5, -1: 2, 0: 5}, 0.975)
    step = 1 / 12  # the bootstrap's atoms
    assert abs(low - exact_low) <= step and abs(high - exact_high) <= step, (low, high, exact_low, exact_high)
    assert low < 3 / 12 < high
    assert paired_bootstrap_interval(clusters, seed=3) == paired_bootstrap_interval(clusters, seed=3), "seeded"


def test_paired_bootstrap_resamples_instances_so_correlated_trials_widen_it():
    """Three trials that always agree carry one instance's evidence, not three cells' worth."""
    instances = [(3, 3)] * 8 + [(0, 3)] * 10 + [(-3, 3)] * 2
    as_cells = [(1, 1)] * 24 + [(0, 1)] * 30 + [(-1, 1)] * 6
    clustered, independent = paired_bootstrap_interval(instances), paired_bootstrap_interval(as_cells)
    width = clustered[1] - clustered[0]
    assert width > 1.4 * (independent[1] - independent[0])  # about sqrt(3) wider
    assert clustered[0] < 18 / 60 < clustered[1]


def test_paired_bootstrap_without_pairs_or_with_impossible_clusters():
    assert paired_bootstrap_interval([]) is None
    assert paired_bootstrap_interval([(0, 1)] * 4) == (0.0, 0.0), "every pair agrees: no spread"
    with pytest.raises(ValueError, match="pairs >= 1"):
        paired_bootstrap_interval([(2, 1)])


def test_cost_intervals_by_hand():
    # mean 2, sample sd 1 (values 1, 2, 3): 2 +- 1.96 / sqrt(3)
    low, high = mean_interval([1.0, 2.0, 3.0])
    assert (low, high) == pytest.approx((2 - 1.959964 / math.sqrt(3), 2 + 1.959964 / math.sqrt(3)))
    assert mean_interval([]) is None and mean_interval([0.5]) == (0.5, 0.5)
    # Dollars 1, 2, 3, 2 with cells 1 and 3 resolved: R = 8 / 2 = 4. Residuals y - R x: -3, 2, -1, 2;
    # their variance 18 / 3 = 6; Var(R) = 6 / (4 * 0.5^2) = 6, so R +- 1.96 * sqrt(6), cut at 0.
    low, high = ratio_interval([1.0, 2.0, 3.0, 2.0], [1.0, 0.0, 1.0, 0.0])
    assert low == 0.0 and high == pytest.approx(4 + 1.959964 * math.sqrt(6))
    assert ratio_interval([1.0, 2.0], [0.0, 0.0]) is None, "nothing resolved: no dollars per resolved"
    with pytest.raises(ValueError):
        ratio_interval([1.0], [])


def test_holm_adjustment_by_hand():
    # m = 4: sorted p 0.01, 0.02, 0.03, 0.5 -> 0.04, max(0.04, 0.06), max(0.06, 0.06), max(0.06, 0.5).
    assert holm_adjusted([0.03, 0.01, 0.5, 0.02]) == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert holm_adjusted([0.9, 0.8]) == pytest.approx([1.0, 1.0]), "capped at 1"
    assert holm_adjusted([]) == []


def cells(resolved_by_instance: dict[str, list[bool]]) -> dict[tuple[str, int], bool]:
    return {(iid, trial): verdict for iid, verdicts in resolved_by_instance.items()
            for trial, verdict in enumerate(verdicts, 1)}


def test_paired_comparison_counts_the_split_and_pairs_only_shared_cells():
    first = cells({"a": [True, True], "b": [True, False], "c": [False, False]})
    second = cells({"a": [True, False], "b": [False, False], "d": [True, True]})
    compared = paired_comparison(first, second, seed=1)
    assert compared is not None
    assert (compared["cells"], compared["instances"], compared["both"], compared["only_first"],
            compared["only_second"], compared["neither"]) == (4, 2, 1, 2, 0, 1)
    assert compared["delta"] == pytest.approx(0.5) and compared["mcnemar_p"] == pytest.approx(0.5)
    low, high = compared["delta_ci95"]
    assert 0 <= low <= 0.5 <= high <= 1
    assert paired_comparison(first, cells({"z": [True]})) is None


def test_significance_groups_tie_arms_the_holm_adjusted_test_cannot_separate_from_the_best():
    pairs = [{"arms": ["A", "B"], "mcnemar_p": 0.04}, {"arms": ["A", "C"], "mcnemar_p": 0.001},
             {"arms": ["B", "C"], "mcnemar_p": 0.2}]
    groups = significance_groups({"A": 0.8, "B": 0.6, "C": 0.1}, pairs)
    # Holm: 0.001 x 3 = 0.003; 0.04 x 2 = 0.08; 0.2 x 1 -> 0.2. B vs A at 0.08 >= 0.05: tied.
    assert [pair["mcnemar_p_holm"] for pair in pairs] == pytest.approx([0.08, 0.003, 0.2])
    assert groups is not None
    assert (groups["best"], groups["tied_with_best"], groups["separated_from_best"]) == ("A", ["A", "B"], ["C"])
    assert significance_groups({"A": 0.5, "B": None}, []) is None, "one rated arm: nothing to group"


def test_trial_rates_mean_and_standard_error():
    rates = trial_rates(cells({"a": [True, True, False], "b": [True, False, False]}))
    assert rates is not None
    assert rates["rates"] == [1.0, 0.5, 0.0] and rates["mean"] == pytest.approx(0.5)
    assert rates["standard_error"] == pytest.approx(0.5 / math.sqrt(3))
    single = trial_rates(cells({"a": [True]}))
    assert single is not None and single["standard_error"] is None
    assert trial_rates({}) is None


def test_discrimination_marks_instances_every_arm_or_none_resolves():
    arms = {"A": cells({"easy": [True, True], "hard": [False, False], "split": [True, True], "mixed": [True, False]}),
            "B": cells({"easy": [True, True], "hard": [False, False], "split": [False, False], "mixed": [True, True]})}
    decided = discrimination(arms)
    assert decided == {"instances": 4, "separating": 2, "separating_instances": ["mixed", "split"],
                       "all_resolve": ["easy"], "none_resolve": ["hard"]}
    assert discrimination({"A": arms["A"]}) is None
