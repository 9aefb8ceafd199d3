"""Unit tests of the budget: the tally, the caps it says are spent, the gate workers read, arm limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_swe_arena.files import write_atomic
from pytest_swe_arena.outcome import AgentOutcome, ArmStatus
from pytest_swe_arena.spend.budget import (
    BudgetGate,
    BudgetLimits,
    BudgetTally,
    Limit,
    SpendCap,
    arm_limit,
    over_cap,
)
from pytest_swe_arena.spend.usage import Usage


def row(arm: str, cost: float | None, tokens: int | None = 100) -> dict[str, object]:
    return {"arm": arm, "usage": {"input_tokens": tokens, "output_tokens": 0, "reasoning_tokens": 0,
                                  "cost_usd": cost},
            "models": {"m1": {"input_tokens": tokens, "cost_usd": cost}}}


def test_the_tally_counts_sweep_arm_and_model_and_unknown_spend_apart() -> None:
    tally = BudgetTally(BudgetLimits())
    for item in (row("A", 1.0), row("A", None), row("B", 0.5, None)):
        tally.add(item)
    spent = tally.to_json()
    assert spent["spent"] == {"usd": 1.5, "tokens": 200, "cells": 3, "unknown_usd_cells": 1,
                              "unknown_token_cells": 1}
    assert spent["arms"]["A"]["usd"] == 1.0 and spent["models"]["m1"]["cells"] == 3


def test_an_implausible_figure_is_unknown_never_a_number() -> None:
    tally = BudgetTally(BudgetLimits())
    tally.add(row("A", float("inf")))
    tally.add(row("A", -3.0))
    assert (tally.sweep.usd, tally.sweep.unknown_usd_cells) == (0.0, 2)


def test_caps_of_the_sweep_and_of_an_arm_are_spent_at_their_limit() -> None:
    tally = BudgetTally(BudgetLimits(Limit(max_tokens=1000), {"A": Limit(max_usd=1.0)}))
    tally.add(row("A", 0.6))
    assert tally.exhausted() == {}
    tally.add(row("A", 0.4))
    assert tally.exhausted() == {"A": "budget of arm A exhausted ($1.0000 spent of $1)"}


def test_a_resumed_sweep_prepays_only_its_own_arms() -> None:
    tally = BudgetTally(BudgetLimits(Limit(max_usd=5)))
    tally.prepay([row("A", 2.0), row("OLD", 9.0)], ["A"])
    assert tally.sweep.usd == 2.0


def test_the_gate_reads_what_the_controller_wrote(tmp_path: Path) -> None:
    gate = BudgetGate(tmp_path / "budget.json")
    assert gate.reason_to_skip("A") is None, "no file yet: nothing is spent"
    write_atomic(gate.path, '{"exhausted": {"A": "budget of arm A exhausted"}}')
    assert (gate.reason_to_skip("A"), gate.reason_to_skip("B")) == ("budget of arm A exhausted", None)
    write_atomic(gate.path, "not json")
    assert gate.reason_to_skip("A") is None


@pytest.mark.parametrize("value", [-1, "ten", float("nan"), True])
def test_a_bad_arm_limit_is_a_usage_error_naming_the_table_and_field(value: object) -> None:
    with pytest.raises(pytest.UsageError, match=r"pyproject.toml \[tool.swe_arena.arms.A\].*max_total_usd"):
        arm_limit("pyproject.toml [tool.swe_arena.arms.A]", {"max_total_usd": value})


def test_the_final_accounting_is_held_to_the_per_cell_cap() -> None:
    cap = SpendCap(max_usd=None, max_tokens=50, price=None)
    done = AgentOutcome(ArmStatus.COMPLETED, None, 0, 1.0)
    over = over_cap(cap, done, Usage(input_tokens=40, output_tokens=20, reasoning_tokens=0), "the agent")
    assert over.status == ArmStatus.OVER_BUDGET and "60 tokens, over max_tokens 50" in (over.error or "")
    assert over_cap(cap, done, Usage(input_tokens=10, output_tokens=0, reasoning_tokens=0), "x") is done


def test_limits_travel_to_the_meter_process_as_json() -> None:
    limits = BudgetLimits(Limit(2.5, None), {"A": Limit(None, 1000), "B": Limit()})
    assert BudgetLimits.from_json(limits.to_json()) == limits
