"""Sweep budgets: spend totalled on the controller, a gate every worker reads.

The controller adds every ledger row to a ``BudgetTally``. After each row it
writes ``budget.json`` in the out dir (atomically): the totals, per-arm and
per-model tiers, and which caps are exhausted. Before a cell starts, the
worker running it reads that file (``BudgetGate``); once a cap is spent no new
cell starts and the rest are skipped with the reason. Cells already running
finish (their own per-cell caps still apply).

Spend whose dollars are unknown (``cost_usd`` null) cannot be counted against
a dollar cap, nor tokens that are unknown against a token cap; such cells are
counted separately and shown in the summary. A resumed sweep starts with the
spend of the rows it may reuse already counted (see ``recorder``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .usage import TOKEN_PARTS, plausible_usage_json, token_total

BUDGET_FILE = "budget.json"
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


def row_tokens(usage: Mapping[str, Any]) -> int | None:
    """The token total of a row's (or a model's) ``usage`` mapping; None when unknown."""
    return token_total(usage.get(key) for key in TOKEN_PARTS)


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

    def add(self, row: Mapping[str, Any]) -> None:
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

    def to_json(self) -> dict[str, Any]:
        return {
            "limits": {
                "sweep": {"max_usd": self.limits.sweep.max_usd, "max_tokens": self.limits.sweep.max_tokens},
                "arms": {arm: {"max_usd": limit.max_usd, "max_tokens": limit.max_tokens}
                         for arm, limit in self.limits.arms.items()},
            },
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
        try:
            exhausted = json.loads(self.path.read_text()).get("exhausted", {})
        except (OSError, ValueError):
            return None  # no budget spent yet (the controller writes the file after the first row)
        reason = exhausted.get(SWEEP) or exhausted.get(arm)
        return str(reason) if reason else None
