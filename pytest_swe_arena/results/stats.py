"""The statistics behind a sweep's summary, as pure functions of counts and values.

Every function returns None when its value cannot be computed (no cells, no
resolved instance, an unknown cost): callers show that as unavailable, never
as 0, so a number in the report is always one that was measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

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
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def five_numbers(values: Sequence[float]) -> dict[str, float] | None:
    """Minimum, quartiles and maximum (a box plot's five numbers); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    numbers = {name: quantile(ordered, q) for name, q in
               (("min", 0.0), ("q1", 0.25), ("median", 0.5), ("q3", 0.75), ("max", 1.0))}
    return {name: float(value) for name, value in numbers.items() if value is not None}
