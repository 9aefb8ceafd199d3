"""The regression gate of ``swe-arena compare A B --fail-on METRIC:LIMIT``: a non-zero exit for CI.

Each limit is checked per arm on the cells both sweeps counted (``compare.compare_runs``'
``common``), so two sweeps of different sizes are held to the same cells. A limit is signed:
``resolve_rate:-5%`` fails when B's rate is more than 5 % (relative to A's) below A's,
``cost_usd:+20%`` when B spent more than 20 % more; ``pp`` is percentage points (rates only),
a bare number is in the metric's own unit (dollars, tokens). A value that is unknown on
either side, or an arm with no common cell, fails the check: a gate never passes on what it
could not measure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .text import count, percent, usd

#: What a limit can be set on, and how its values read.
METRICS = {
    "resolve_rate": percent,
    "cost_usd": usd,
    "cost_per_cell_usd": usd,
    "cost_per_resolved_usd": usd,
    "tokens": count,
}
RATES = frozenset({"resolve_rate"})
_LIMIT = re.compile(r"^(?P<metric>[a-z_]+):(?P<sign>[+-])(?P<amount>[0-9]+(?:\.[0-9]+)?)(?P<unit>%|pp)?$")


class LimitError(ValueError):
    """A ``--fail-on`` value that is not a limit; the message says what would be accepted."""


@dataclass(frozen=True)
class Limit:
    """One ``--fail-on``: B may not move from A by more than ``amount`` in the direction of ``sign``."""

    metric: str
    sign: int
    amount: float
    unit: str  # "%" (relative to A), "pp" (percentage points) or "" (the metric's unit)

    @classmethod
    def parse(cls, text: str) -> Limit:
        found = _LIMIT.match(text.strip())
        if found is None:
            raise LimitError(f"{text!r} is not METRIC:+N% or METRIC:-N% (or +Npp for a rate, +N in the metric's "
                             f"unit), e.g. resolve_rate:-5% or cost_usd:+20%; metrics: {', '.join(METRICS)}")
        metric, unit = found["metric"], found["unit"] or ""
        if metric not in METRICS:
            raise LimitError(f"{text!r}: unknown metric {metric!r}; metrics: {', '.join(METRICS)}")
        if unit == "pp" and metric not in RATES:
            raise LimitError(f"{text!r}: pp (percentage points) is for a rate ({', '.join(sorted(RATES))}); "
                             "use % or an amount in the metric's unit")
        if unit == "" and metric in RATES:
            raise LimitError(f"{text!r}: give a rate's limit in % (relative) or pp (points), e.g. {metric}:-5pp")
        return cls(metric, 1 if found["sign"] == "+" else -1, float(found["amount"]), unit)

    @property
    def text(self) -> str:
        return f"{self.metric}:{'+' if self.sign > 0 else '-'}{self.amount:g}{self.unit}"

    def change(self, a: float, b: float) -> float:
        """B's move from A in this limit's unit (signed: positive when B is higher)."""
        if self.unit == "%":
            if a == 0:
                return 0.0 if b == 0 else math.copysign(math.inf, b)
            return 100 * (b - a) / abs(a)
        if self.unit == "pp":
            return 100 * (b - a)
        return b - a

    def broken_by(self, change: float) -> bool:
        """Whether B moved past the limit in its direction."""
        return self.sign * change > self.amount


@dataclass(frozen=True)
class Check:
    """One limit on one arm: the values, B's move, and whether it failed (and why, when it could not be checked)."""

    arm: str
    limit: Limit
    a: float | None
    b: float | None
    change: float | None
    failed: bool
    reason: str = ""

    def line(self) -> str:
        verdict = "FAIL" if self.failed else "ok"
        shown = METRICS[self.limit.metric]
        if self.change is None:
            return f"{verdict:4} {self.arm} {self.limit.metric}: {self.reason} (limit {self.limit.text})"
        moved = f"{self.change:+.1f}{self.limit.unit}" if self.limit.unit else f"{self.change:+.6g}"
        return (f"{verdict:4} {self.arm} {self.limit.metric} {shown(self.a)} -> {shown(self.b)} "
                f"({moved}; limit {self.limit.text})")


def check(comparison: Mapping[str, Any], limits: Sequence[Limit]) -> list[Check]:
    """Every limit on every arm both sweeps have, on the cells both counted."""
    checks = []
    for arm in comparison["arms"]:
        common: Mapping[str, Mapping[str, Any]] = arm["common"]
        for limit in limits:
            a, b = common["a"].get(limit.metric), common["b"].get(limit.metric)
            if not arm["common_cells"]:
                checks.append(Check(arm["arm"], limit, a, b, None, True, "no cell counted in both sweeps"))
            elif a is None or b is None:
                side = " and ".join(name for name, value in (("A", a), ("B", b)) if value is None)
                checks.append(Check(arm["arm"], limit, a, b, None, True,
                                    f"unknown in {side} (on {arm['common_cells']} common cells): cannot be checked"))
            else:
                change = limit.change(a, b)
                checks.append(Check(arm["arm"], limit, a, b, change, limit.broken_by(change)))
    return checks


def gate_lines(comparison: Mapping[str, Any], checks: Sequence[Check]) -> list[str]:
    """What the gate found, one line per check, then the verdict."""
    failed = sum(check.failed for check in checks)
    lines = [f"regression gate (B against A, on the cells both sweeps counted): "
             f"{failed} of {len(checks)} checks failed" if failed else
             f"regression gate (B against A, on the cells both sweeps counted): all {len(checks)} checks passed"]
    lines += ["  " + check.line() for check in checks]
    for side, names in (("A", comparison["only_in_a"]), ("B", comparison["only_in_b"])):
        if names:
            lines.append(f"  not gated (only in {side}): {', '.join(names)}")
    return lines
