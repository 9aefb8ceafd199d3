"""Where the budget is enforced: the sweep's, each arm's, and each cell's.

Sweep and arm budgets (``--arena-max-usd``, ``--arena-max-tokens``, an arm's
``max_total_usd`` / ``max_total_tokens``): spend totalled on the controller, a
gate every worker reads.

The controller adds every ledger row to a ``BudgetTally``. After each row it
writes ``budget.json`` in the out dir (atomically): the totals, per-arm and
per-model tiers, and which caps are exhausted. Before a cell starts, the
worker running it reads that file (``BudgetGate``); once a cap is spent no new
cell starts and the rest are skipped with the reason. Cells already running
finish (their own per-cell caps still apply).

Spend whose dollars are unknown (``cost_usd`` null) cannot be counted against
a dollar cap, nor tokens that are unknown against a token cap; such cells are
counted separately and shown in the summary. A resumed sweep starts with the
spend of the rows it may reuse already counted (``BudgetTally.prepay``).

Under xdist the controller itself holds the caps on every host: its scheduler
(``controller.scheduling.BudgetScheduling``) hands no cell out once its cap is
spent and records the cells it kept back. Only workers on the controller's host
also read ``budget.json`` (a worker elsewhere would read its own host's file).

Per-cell caps (an agent arm's ``max_usd`` / ``max_tokens``): ``CapWatch`` follows
what the agent writes while it runs (its kind's ``LiveSpend``) and stops it once over ``SpendCap``;
``over_cap`` holds the final accounting to the cap too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..files import read_json_object
from ..naming import BUDGET_NAME
from ..outcome import AgentOutcome, ArmStatus, CellStatus
from .prices import Price
from .usage import Usage, plausible_usage_json, row_tokens

if TYPE_CHECKING:
    from ..settings import Settings
    from ..suite import Suite

SWEEP = "*"  # key of the sweep-wide cap in ``exhausted``


@dataclass(frozen=True)
class Limit:
    """A spending cap; None means no cap on that quantity."""

    max_usd: float | None = None
    max_tokens: int | None = None

    @property
    def is_set(self) -> bool:
        return self.max_usd is not None or self.max_tokens is not None


@dataclass(frozen=True)
class BudgetLimits:
    """The sweep's cap and each arm's ``max_total_usd`` / ``max_total_tokens``."""

    sweep: Limit = Limit()
    arms: Mapping[str, Limit] = field(default_factory=dict)

    @property
    def is_set(self) -> bool:
        return self.sweep.is_set or any(limit.is_set for limit in self.arms.values())

    def to_json(self) -> dict[str, Any]:
        return {"sweep": asdict(self.sweep), "arms": {arm: asdict(limit) for arm, limit in self.arms.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BudgetLimits:
        return cls(Limit(**data.get("sweep", {})), {str(arm): Limit(**limit)
                                                   for arm, limit in data.get("arms", {}).items()})


@dataclass
class Spend:
    usd: float = 0.0
    tokens: int = 0
    cells: int = 0
    unknown_usd_cells: int = 0
    unknown_token_cells: int = 0

    def add(self, usage: Mapping[str, Any]) -> None:
        """Count one cell's (or model's) usage; a figure that is not plausible counts as unknown, never as a number."""
        self.cells += 1
        usage = plausible_usage_json(usage)[0]  # rows of older ledgers, reused on resume, may hold anything
        tokens = row_tokens(usage)
        if tokens is None:
            self.unknown_token_cells += 1
        else:
            self.tokens += tokens
        cost = usage.get("cost_usd")
        if cost is None:
            self.unknown_usd_cells += 1
        else:
            self.usd += float(cost)

    def to_json(self) -> dict[str, Any]:
        return {"usd": round(self.usd, 6), "tokens": self.tokens, "cells": self.cells,
                "unknown_usd_cells": self.unknown_usd_cells, "unknown_token_cells": self.unknown_token_cells}


def halted_reason(arm: str, error: str) -> str:
    """Why a cell of ``arm`` is not started after one of its cells was ``config_error`` with ``error``."""
    return f"not started: arm {arm}'s configuration failed ({error})"


def _over(spend: Spend, limit: Limit) -> str | None:
    if limit.max_usd is not None and spend.usd >= limit.max_usd:
        return f"${spend.usd:.4f} spent of ${limit.max_usd:g}"
    if limit.max_tokens is not None and spend.tokens >= limit.max_tokens:
        return f"{spend.tokens:,} tokens spent of {limit.max_tokens:,}"
    return None


@dataclass
class BudgetTally:
    """Spend so far, on the controller: the whole sweep, per arm, per model."""

    limits: BudgetLimits
    sweep: Spend = field(default_factory=Spend)
    arms: dict[str, Spend] = field(default_factory=dict)
    models: dict[str, Spend] = field(default_factory=dict)
    #: Arms whose configuration failed (a ``config_error`` row), each with that row's error: what to fix.
    misconfigured: dict[str, str] = field(default_factory=dict)

    def prepay(self, rows: Iterable[Mapping[str, Any]], arms: Iterable[str]) -> None:
        """Count what the rows a resumed sweep may reuse spent, before any cell starts.

        Otherwise a budget would only see that spend as the reused cells come by, and cells
        would start that the earlier runs' spend had already paid out. Rows of the sweep's arms
        count, whether or not a ``-k`` or a changed instance keeps them from being reused.
        """
        wanted = set(arms)
        for row in rows:
            if row.get("arm") in wanted:
                self.add(row)

    def add(self, row: Mapping[str, Any]) -> None:
        if row.get("status") == CellStatus.CONFIG_ERROR:
            self.misconfigured.setdefault(str(row.get("arm")), str(row.get("error") or "its configuration failed"))
        usage = row.get("usage") or {}
        if not usage:
            return  # a cell that never ran its arm spent nothing we know of
        self.sweep.add(usage)
        self.arms.setdefault(str(row.get("arm")), Spend()).add(usage)
        models = row.get("models")
        for model, model_usage in (models.items() if isinstance(models, Mapping) else ()):
            self.models.setdefault(str(model), Spend()).add(model_usage)

    def exhausted(self) -> dict[str, str]:
        """Which caps are spent: ``{"*": reason}`` for the sweep, ``{ARM: reason}`` per arm."""
        spent: dict[str, str] = {}
        sweep = _over(self.sweep, self.limits.sweep)
        if sweep:
            spent[SWEEP] = f"sweep budget exhausted ({sweep})"
        for arm, limit in self.limits.arms.items():
            reason = _over(self.arms.get(arm, Spend()), limit)
            if reason:
                spent[arm] = f"budget of arm {arm} exhausted ({reason})"
        return spent

    def halted(self) -> dict[str, str]:
        """Why each arm whose configuration failed starts no more cells: ``{ARM: reason}``."""
        return {arm: halted_reason(arm, error) for arm, error in self.misconfigured.items()}

    def stopped(self) -> dict[str, str]:
        """What may start no more cells, and why: the spent caps (``exhausted``) and the halted arms."""
        return {**self.halted(), **self.exhausted()}

    def to_json(self) -> dict[str, Any]:
        return {
            "limits": self.limits.to_json(),
            "spent": self.sweep.to_json(),
            "arms": {arm: spend.to_json() for arm, spend in sorted(self.arms.items())},
            "models": {model: spend.to_json() for model, spend in sorted(self.models.items())},
            "exhausted": self.exhausted(),
        }


class BudgetGate:
    """The worker's view: reads the controller's ``budget.json`` before each cell starts."""

    def __init__(self, path: Path):
        self.path = path

    def reason_to_skip(self, arm: str) -> str | None:
        # No file yet: no budget spent yet (the controller writes it after the first row).
        exhausted = (read_json_object(self.path) or {}).get("exhausted")
        if not isinstance(exhausted, dict):
            return None
        reason = exhausted.get(SWEEP) or exhausted.get(arm)
        return str(reason) if reason else None

    def left(self, arm: str, limits: BudgetLimits) -> Limit:
        """What is left of the sweep's and ``arm``'s ``limits`` after the spend budget.json counts so far.

        The smaller of the two for each quantity (None where neither has a cap); the
        metering proxy holds a cell to it, so that one cell alone cannot spend past a total.
        """
        budget = read_json_object(self.path) or {}
        spent, arms = budget.get("spent"), budget.get("arms")
        spent = spent if isinstance(spent, dict) else {}
        arm_spent = arms.get(arm) if isinstance(arms, dict) else None
        arm_spent = arm_spent if isinstance(arm_spent, dict) else {}
        pairs = [(limits.sweep, spent), (limits.arms.get(arm, Limit()), arm_spent)]

        def room(cap: float | None, used: Any) -> float | None:
            if cap is None:
                return None
            return max(0.0, cap - (float(used) if isinstance(used, (int, float)) else 0.0))

        usd = [r for cap, used in pairs if (r := room(cap.max_usd, used.get("usd"))) is not None]
        tokens = [r for cap, used in pairs if (r := room(cap.max_tokens, used.get("tokens"))) is not None]
        return Limit(min(usd) if usd else None, int(min(tokens)) if tokens else None)


def sweep_limits(settings: Settings, suite: Suite) -> BudgetLimits:
    """The sweep's cap (--arena-max-usd, --arena-max-tokens) and each arm's ``max_total_*``."""
    return BudgetLimits(Limit(settings.max_usd, settings.max_tokens), dict(suite.arm_limits))


def budget_gate(settings: Settings, suite: Suite) -> BudgetGate | None:
    """The gate a process reads before each cell, when the sweep has a budget (None when it has none)."""
    return BudgetGate(settings.out / BUDGET_NAME) if sweep_limits(settings, suite).is_set else None


ARM_BUDGET_FIELDS = ("max_total_usd", "max_total_tokens")


def arm_limit(origin: str, settings: Mapping[str, Any]) -> Limit:
    """An arm table's ``max_total_usd`` / ``max_total_tokens``; a bad value is a usage error naming ``origin``."""
    import pytest  # only where a suite's arm tables are read: ``swe-arena report`` never imports pytest

    values: dict[str, Any] = {}
    for key in ARM_BUDGET_FIELDS:
        value = settings.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise pytest.UsageError(f"{origin}: field {key!r}: {value!r} is not a finite non-negative number")
        values[key] = value
    tokens = values.get("max_total_tokens")
    return Limit(max_usd=values.get("max_total_usd"), max_tokens=int(tokens) if tokens is not None else None)


@dataclass(frozen=True)
class SpendCap:
    """The live per-cell cap: ``max_usd`` / ``max_tokens`` (input + output + reasoning)."""

    max_usd: float | None
    max_tokens: int | None
    price: Price | None

    @property
    def is_set(self) -> bool:
        return self.max_usd is not None or self.max_tokens is not None

    def exceeded(self, usage: Usage) -> str | None:
        """Why ``usage`` is over the cap, or None."""
        tokens = usage.total_tokens or 0
        if self.max_tokens is not None and tokens > self.max_tokens:
            return f"spent {tokens:,} tokens, over max_tokens {self.max_tokens:,}"
        if self.max_usd is not None:
            cost = usage.priced(self.price).cost_usd or 0.0
            if cost > self.max_usd:
                return f"spent ${cost:.6f}, over max_usd ${self.max_usd:g}"
        return None



class LiveSpend(Protocol):
    """What an agent has spent so far, read from what it writes as it runs (its stream, its logs)."""

    def spent(self) -> Usage:
        """The spend so far, priced where the agent reports no cost; called often while the agent runs."""
        ...


Live = TypeVar("Live", bound=LiveSpend)


class CapWatch(Generic[Live]):
    """A ``should_stop`` for ``cell.processes.run``: an agent's live spend against a ``SpendCap``.

    ``live`` is where the agent's kind reads its spend so far: opencode's event stream
    (``agents.opencode.StreamFollower``), Claude's stream and sub-agent transcripts, Codex's
    rollouts, Gemini's chat files, mini's trajectory (``agents.reports.PricedCalls``).
    """

    def __init__(self, cap: SpendCap, live: Live):
        self.cap = cap
        self.live = live
        self.reason: str | None = None

    def __call__(self) -> str | None:
        self.reason = self.cap.exceeded(self.live.spent())
        return ArmStatus.OVER_BUDGET if self.reason else None


def over_cap(cap: SpendCap, outcome: AgentOutcome, usage: Usage, what: str) -> AgentOutcome:
    """``outcome``, turned ``over_budget`` when the final, accounted ``usage`` passed the cap.

    The live watch sees only the stream; subagents, or spend in the last
    moments before the agent exited, show up only in the final accounting.
    Such a cell is never scored from its work either.
    """
    if outcome.status != ArmStatus.COMPLETED or not cap.is_set:
        return outcome
    reason = cap.exceeded(usage)
    if reason is None:
        return outcome
    return AgentOutcome(ArmStatus.OVER_BUDGET, f"{what} went over its cap: {reason}", outcome.returncode,
                        outcome.seconds)

