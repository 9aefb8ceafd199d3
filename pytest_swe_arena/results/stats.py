"""The statistics behind a sweep's summary, as pure functions of counts and values.

Every function returns None when its value cannot be computed (no cells, no
resolved instance, an unknown cost): callers show that as unavailable, never
as 0, so a number in the report is always one that was measured.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

#: The normal quantile for a two-sided 95% interval.
Z_95 = 1.959963984540054


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion (95% by default); None without trials.

    Unlike the normal approximation it stays inside [0, 1] and is not a point at 0/n or n/n.
    """
    if trials <= 0:
        return None
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be between 0 and {trials}, got {successes}")
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact_p(only_first: int, only_second: int) -> float:
    """Exact two-sided McNemar p-value: a binomial test of the discordant split against 1/2.

    ``only_first`` are the pairs resolved by the first arm only, ``only_second`` by the
    second only. With no discordant pairs there is no evidence of a difference: p = 1.
    """
    if only_first < 0 or only_second < 0:
        raise ValueError("discordant counts must not be negative")
    n = only_first + only_second
    smaller = min(only_first, only_second)
    # P(X <= smaller) for X ~ Bin(n, 1/2), summed down from its largest term: C(n, i-1) = C(n, i) * i / (n-i+1).
    # In floats with the largest term factored out, so a 100,000-cell sweep costs microseconds, not big integers.
    log_largest = math.lgamma(n + 1) - math.lgamma(smaller + 1) - math.lgamma(n - smaller + 1) - n * math.log(2)
    term, relative_sum = 1.0, 1.0
    for i in range(smaller, 0, -1):
        term *= i / (n - i + 1)
        relative_sum += term
        if term < 1e-17 * relative_sum:
            break
    return min(1.0, 2 * relative_sum * math.exp(log_largest))


def _check_counts(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"correct trials must be between 0 and {n}, got {c}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k from ``n`` trials of which ``c`` passed: 1 - C(n-c, k) / C(n, k).

    The chance that at least one of k trials drawn without replacement passes;
    None when there are fewer than k trials.
    """
    _check_counts(n, c, k)
    if k > n:
        return None
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass^k from ``n`` trials of which ``c`` passed: C(c, k) / C(n, k).

    The chance that all of k trials drawn without replacement pass (consistency);
    None when there are fewer than k trials.
    """
    _check_counts(n, c, k)
    if k > n:
        return None
    return float(Fraction(math.comb(c, k), math.comb(n, k)))


def per_resolved(total: float | None, resolved: int) -> float | None:
    """A total divided by the number of resolved cells; None if the total is unknown or nothing resolved."""
    if total is None or resolved <= 0:
        return None
    return total / resolved


def median(values: Sequence[float]) -> float | None:
    """The median of ``values``; None for no values."""
    return quantile(values, 0.5)


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` by linear interpolation between order statistics; None for no values."""
    if not 0 <= q <= 1:
        raise ValueError(f"q must be between 0 and 1, got {q}")
    if not values:
        return None
    return _quantile_of_sorted(sorted(values), q)


def _quantile_of_sorted(ordered: Sequence[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def five_numbers(values: Sequence[float]) -> dict[str, float] | None:
    """Minimum, quartiles and maximum (a box plot's five numbers); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return {name: float(_quantile_of_sorted(ordered, q)) for name, q in
            (("min", 0.0), ("q1", 0.25), ("median", 0.5), ("q3", 0.75), ("max", 1.0))}


#: Replicates of the paired bootstrap: enough for a stable 95% percentile interval.
BOOTSTRAP_REPLICATES = 2000


def binomial_sample(rng: random.Random, n: int, p: float) -> int:
    """One exact draw from Binomial(n, p).

    Small means count geometric waiting times (Devroye's first waiting-time method, O(np)); larger
    ones use Hoermann's transformed rejection with squeeze (BTRS, constant time), as Python 3.12's
    ``random.binomialvariate`` does: it is not in 3.11, and our draws must not change with the version.
    """
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial_sample(rng, n, 1.0 - p)
    q = 1.0 - p
    if n * p < 10:
        log_q, successes, position = math.log(q), 0, 0
        while True:
            position += math.floor(math.log(1.0 - rng.random()) / log_q) + 1
            if position > n:
                return successes
            successes += 1
    spread = math.sqrt(n * p * q)
    b = 1.15 + 2.53 * spread
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    squeeze = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spread
    log_odds = math.log(p / q)
    mode = math.floor((n + 1) * p)
    at_mode = math.lgamma(mode + 1) + math.lgamma(n - mode + 1)
    while True:
        u = rng.random() - 0.5
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        v = rng.random()
        if us >= 0.07 and v <= squeeze:
            return k
        v *= alpha / (a / (us * us) + b)
        if math.log(v) <= at_mode - math.lgamma(k + 1) - math.lgamma(n - k + 1) + (k - mode) * log_odds:
            return k


def paired_bootstrap_interval(clusters: Sequence[tuple[int, int]], replicates: int = BOOTSTRAP_REPLICATES,
                              seed: int = 0, level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of a paired difference of resolve rates; None without pairs.

    Each cluster is one instance: ``(difference, pairs)``, the cells arm A resolved minus those arm B
    resolved over the ``pairs`` (trials) both arms have in their rates. Instances are resampled with
    replacement, all their trials together, so correlated trials do not narrow the interval; with one
    trial per instance this is the plain paired bootstrap over cells. The statistic depends only on how
    many of each kind of cluster a resample holds, so each replicate draws those counts (a multinomial,
    as binomials) rather than every instance. Seeded: the same input gives the same interval.
    """
    if not clusters:
        return None
    if any(pairs < 1 or abs(difference) > pairs for difference, pairs in clusters):
        raise ValueError("each cluster needs pairs >= 1 and |difference| <= pairs")
    kinds = sorted(Counter(clusters).items())
    total = len(clusters)
    rng = random.Random(seed)
    estimates = []
    for _ in range(replicates):
        remaining, unassigned = total, total
        differences = pairs_drawn = 0
        for (difference, pairs), count in kinds:
            drawn = remaining if count == unassigned else binomial_sample(rng, remaining, count / unassigned)
            differences += drawn * difference
            pairs_drawn += drawn * pairs
            remaining -= drawn
            unassigned -= count
        estimates.append(differences / pairs_drawn)
    estimates.sort()
    tail = (1 - level) / 2
    low, high = quantile(estimates, tail), quantile(estimates, 1 - tail)
    assert low is not None and high is not None
    return low, high


def mean_interval(values: Sequence[float], z: float = Z_95) -> tuple[float, float] | None:
    """Normal-approximation interval of a mean (mean +- z standard errors); None for no values."""
    if not values:
        return None
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, mean
    error = z * statistics.stdev(values, mean) / math.sqrt(len(values))
    return mean - error, mean + error


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float],
                   z: float = Z_95) -> tuple[float, float] | None:
    """Delta-method interval of a ratio of sums (dollars per resolved cell); None when the denominator sums to 0.

    ``numerators[i]`` and ``denominators[i]`` belong to the same cell. The variance of
    R = sum(y) / sum(x) is about (s_y^2 - 2R s_xy + R^2 s_x^2) / (n mean(x)^2).
    """
    if len(numerators) != len(denominators):
        raise ValueError("numerators and denominators must pair up")
    n = len(numerators)
    total = math.fsum(denominators)
    if n == 0 or total <= 0:
        return None
    ratio = math.fsum(numerators) / total
    if n < 2:
        return ratio, ratio
    mean_x = total / n
    residuals = [y - ratio * x for y, x in zip(numerators, denominators, strict=True)]
    variance = math.fsum(r * r for r in residuals) / (n - 1) / (n * mean_x * mean_x)
    error = z * math.sqrt(variance)
    return max(0.0, ratio - error), ratio + error


#: The family-wise error rate of the significance groups (Holm).
ALPHA = 0.05


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the order given.

    The i-th smallest of m p-values is multiplied by (m - i + 1), made monotone from the smallest
    up and capped at 1: rejecting where the adjusted p < alpha keeps the family-wise error <= alpha.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda index: p_values[index])
    adjusted = [1.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


Key = tuple[str, int]


def paired_comparison(first: Mapping[Key, bool], second: Mapping[Key, bool], seed: int = 0) -> dict[str, Any] | None:
    """Two arms over the (instance, trial) cells both have in their rates; None when they share none.

    ``first`` and ``second`` map each counted cell to whether it resolved. Gives the discordant
    split, the exact McNemar p, the rate difference (first - second) and its paired bootstrap 95%
    interval with instances as clusters (all trials of an instance resampled together).
    """
    common = first.keys() & second.keys()
    if not common:
        return None
    clusters: dict[str, list[int]] = {}
    both = only_first = only_second = 0
    for key in common:
        a, b = first[key], second[key]
        both += a and b
        only_first += a and not b
        only_second += b and not a
        cluster = clusters.setdefault(key[0], [0, 0])
        cluster[0] += a - b
        cluster[1] += 1
    cells = len(common)
    interval = paired_bootstrap_interval([(d, n) for d, n in clusters.values()], seed=seed)
    return {
        "cells": cells, "instances": len(clusters), "both": both, "only_first": only_first,
        "only_second": only_second, "neither": cells - both - only_first - only_second,
        "rate_first": (both + only_first) / cells, "rate_second": (both + only_second) / cells,
        "delta": (only_first - only_second) / cells,
        "delta_ci95": None if interval is None else [round(interval[0], 6), round(interval[1], 6)],
        "mcnemar_p": mcnemar_exact_p(only_first, only_second),
    }


def significance_groups(rates: Mapping[str, float | None], pairs: Sequence[dict[str, Any]],
                        alpha: float = ALPHA) -> dict[str, Any] | None:
    """Holm-adjust every pair's McNemar p and find the arms that cannot be told apart from the best.

    ``pairs`` carry ``arms`` ([first, second]) and ``mcnemar_p``; each gets ``mcnemar_p_holm``
    (in place). The best arm has the highest resolve rate (ties: the first listed); an arm is tied with
    it when their pair's Holm-adjusted p is >= ``alpha``, or they share no cells (nothing tells them
    apart). None with fewer than two rated arms.
    """
    rated = [name for name, rate in rates.items() if rate is not None]
    if len(rated) < 2:
        return None
    for pair, adjusted in zip(pairs, holm_adjusted([pair["mcnemar_p"] for pair in pairs]), strict=True):
        pair["mcnemar_p_holm"] = adjusted
    best = max(rated, key=lambda name: (rates[name], -rated.index(name)))
    against = {name: pair["mcnemar_p_holm"] for pair in pairs if best in pair["arms"]
               for name in pair["arms"] if name != best}
    tied = [name for name in rated if name == best or against.get(name, 1.0) >= alpha]
    return {"alpha": alpha, "correction": "holm", "test": "mcnemar_exact", "best": best,
            "tied_with_best": tied, "separated_from_best": [name for name in rated if name not in tied]}


def trial_rates(verdicts: Mapping[Key, bool]) -> dict[str, Any] | None:
    """The resolve rate of each trial (repeat) and their mean with its standard error; None without cells.

    The standard error is the sample standard deviation of the per-trial rates over sqrt(trials):
    how much the rate of a whole sweep moves from one repeat to the next. None with one trial.
    """
    by_trial: dict[int, list[int]] = {}
    for (_, trial), resolved in verdicts.items():
        tally = by_trial.setdefault(trial, [0, 0])
        tally[0] += resolved
        tally[1] += 1
    if not by_trial:
        return None
    rates = [resolved / cells for _, (resolved, cells) in sorted(by_trial.items())]
    mean = math.fsum(rates) / len(rates)
    error = statistics.stdev(rates, mean) / math.sqrt(len(rates)) if len(rates) > 1 else None
    return {"rates": rates, "mean": mean, "standard_error": error}


def instance_rates(verdicts: Mapping[Key, bool]) -> dict[str, tuple[int, int]]:
    """Per instance, (resolved trials, counted trials)."""
    found: dict[str, tuple[int, int]] = {}
    for (instance_id, _), resolved in verdicts.items():
        passes, runs = found.get(instance_id, (0, 0))
        found[instance_id] = (passes + resolved, runs + 1)
    return dict(sorted(found.items()))


def discrimination(arms: Mapping[str, Mapping[Key, bool]]) -> dict[str, Any] | None:
    """Which instances separate the arms: those not resolved in every cell of every arm, nor in none.

    Over the instances every arm has counted cells of; None with fewer than two arms. An instance
    that every arm always resolves, or none ever does, cannot change any comparison of this sweep.
    None too when no instance has counted cells of every arm.
    """
    if len(arms) < 2:
        return None
    per_arm = [instance_rates(verdicts) for verdicts in arms.values()]
    shared = sorted(set.intersection(*(set(rates) for rates in per_arm)))
    if not shared:
        return None
    always = [iid for iid in shared if all(rates[iid][0] == rates[iid][1] for rates in per_arm)]
    never = [iid for iid in shared if all(rates[iid][0] == 0 for rates in per_arm)]
    separating = [iid for iid in shared if iid not in always and iid not in never]
    return {"instances": len(shared), "separating": len(separating), "separating_instances": separating,
            "all_resolve": always, "none_resolve": never}


def cost_frontier(arms: Sequence[Mapping[str, Any]], cost_key: str) -> list[str]:
    """The cost-resolve Pareto frontier (HAL's accuracy vs cost): the arms no other arm beats on both counts
    (as cheap or cheaper, and a higher rate), cheapest first.

    An arm whose cost is unknown (None) is not placed: unknown spend is never read as $0.
    """
    placed = sorted((arm for arm in arms if arm[cost_key] is not None and arm["resolve_rate"] is not None),
                    key=lambda arm: (arm[cost_key], -arm["resolve_rate"]))
    best, names = -1.0, []
    for arm in placed:
        if arm["resolve_rate"] > best:
            best = arm["resolve_rate"]
            names.append(arm["arm"])
    return names
