"""The summary, its text and its schema, built from ledger rows (no pytest run needed)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from pytest_swe_arena.controller.stand_ins import with_spend_known
from pytest_swe_arena.ledger.reader import UsageRecord, cell_records, user_properties
from pytest_swe_arena.outcome import CellOutcome
from pytest_swe_arena.results.compare import compare_runs, format_comparison
from pytest_swe_arena.results.summary import CellRecord, summarize
from pytest_swe_arena.results.text import format_budget, format_summary
from pytest_swe_arena.spend.budget import BudgetLimits, BudgetTally, Limit, row_tokens
from pytest_swe_arena.spend.usage import Usage as CellUsage
from pytest_swe_arena.spend.usage import unknown_usage


def row(iid: str, arm: str, status: str, cost: float | None = 0.0, tokens: int | None = 0, trial: int = 1,
        wall: float = 1.0, **extra: Any) -> dict[str, Any]:
    usage = {"input_tokens": tokens, "output_tokens": 0 if tokens is not None else None, "reasoning_tokens": 0,
             "cost_usd": cost, "cost_source": "reported"}
    return {"run_id": "r1", "instance_id": iid, "arm": arm, "trial": trial, "status": status, "usage": usage,
            "phases": {"arm": wall - 0.5, "verify": 0.5}, **extra}


def summary_validator():
    import jsonschema

    schema = json.loads(resources.files("pytest_swe_arena").joinpath("schemas/summary.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def ten_instance_sweep() -> list[dict[str, Any]]:
    """SOLO resolves 1-3 and 9, SUP4 resolves 1-8 (b = 1 only-SOLO, c = 5 only-SUP4), with spend."""
    rows = []
    for n in range(1, 11):
        iid = f"demo__calc-{n}"
        rows.append(row(iid, "SOLO", "resolved" if n in (1, 2, 3, 9) else "unresolved", cost=0.5, tokens=1000,
                        wall=float(n)))
        rows.append(row(iid, "SUP4", "resolved" if n <= 8 else "arm_error", cost=2.0, tokens=5000, wall=10.0))
    return rows


def test_per_arm_numbers_and_paired_comparison():
    summary = summarize(cell_records(ten_instance_sweep()), ["SUP4", "SOLO"], "r1")
    summary_validator().validate(summary)
    sup4, solo = summary["arms"]
    assert (sup4["arm"], sup4["resolved"], sup4["cells"], sup4["resolve_rate"]) == ("SUP4", 8, 10, 0.8)
    assert solo["resolve_rate_ci95"] == pytest.approx([0.168180, 0.687326], abs=1e-6)  # Wilson at 4/10
    assert solo["cost_usd"] == 5.0 and solo["cost_per_resolved_usd"] == pytest.approx(5.0 / 4)
    assert sup4["tokens"] == 50_000 and sup4["tokens_per_resolved"] == 6250
    assert solo["median_wall_seconds"] == 5.5 and sup4["median_wall_seconds"] == 10.0
    assert solo["cost_distribution"] == {"min": 0.5, "q1": 0.5, "median": 0.5, "q3": 0.5, "max": 0.5}
    [pair] = summary["pairs"]
    assert pair["arms"] == ["SUP4", "SOLO"]
    assert (pair["cells"], pair["both"], pair["only_first"], pair["only_second"], pair["neither"]) == (10, 3, 5, 1, 1)
    assert pair["mcnemar_p"] == pytest.approx(2 * 7 / 64)  # Bin(6, 1/2): P(X <= 1) = 7/64
    assert summary["warnings"] == [] and summary["budget"] is None


def test_terminal_summary_fits_100_columns_and_shows_the_numbers():
    rows = ten_instance_sweep() + [
        row("demo__calc-11", "SUPERVISOR-4-SANDBOXES", "resolved", cost=None, model_mismatch=True,
            asked_model="anthropic/claude-sonnet-4-5-20250929", served_model="anthropic/claude-haiku-4-5-20251001"),
        row("demo__calc-11", "SOLO", "harness_error", error="setup: base_commit 0123 not found\ntraceback..."),
    ]
    budget = {"run_id": "r1", "limits": {"sweep": {"max_usd": 25.0, "max_tokens": None}, "arms": {}},
              "spent": {"usd": 25.0, "tokens": 60_000, "cells": 21, "unknown_usd_cells": 1,
                        "unknown_token_cells": 2},
              "models": {"lab/model": {"usd": 25.0, "tokens": 60_000, "cells": 21, "unknown_usd_cells": 1}},
              "exhausted": {"*": "sweep budget exhausted ($25.0000 spent of $25)"}}
    summary = summarize(cell_records(rows), ["SOLO", "SUP4"], "r1", budget)
    summary_validator().validate(summary)
    lines = format_summary(summary)
    text = "\n".join(lines)
    assert max(len(line) for line in lines) <= 100, text
    assert lines[0] == "11 instances x 3 arms: 22 cells (95% CI: Wilson; n/a: not computable)"
    table = {line.split()[0]: line.split()[1:] for line in lines[2:7]}
    assert table["arm"] == ["resolved", "rate", "95%", "CI", "USD", "USD/res", "tokens", "tok/res", "wall", "p50"]
    assert table["SOLO"] == ["4/10", "40.0%", "16.8-68.7%", "5.0000", "1.2500", "10,000", "2,500", "5.5s"]
    assert table["SUP4"] == ["8/10", "80.0%", "49.0-94.3%", "20.00", "2.5000", "50,000", "6,250", "10.0s"]
    # Unknown cost: "n/a", never 0 -- in the table, per resolved, and in the JSON.
    assert table["SUPERVISOR-4-SANDBOXES"][:6] == ["1/1", "100.0%", "20.7-100.0%", "n/a", "n/a", "0"]
    assert summary["arms"][2]["cost_usd"] is None and summary["arms"][2]["cost_per_resolved_usd"] is None
    # pairs, only A, only B, A-B in points, its bootstrap interval, exact and Holm-adjusted p (one pair: the same)
    pair = next(line.split() for line in lines if line.startswith("SOLO vs SUP4"))
    assert pair[3:8] + pair[9:] == ["10", "1", "5", "-40.0", "[-80.0,", "0.2188", "0.2188"]
    assert any(line.startswith("tied with the best (SUPERVISOR-4-SANDBOXES; exact McNemar, Holm-adjusted")
               for line in lines)
    budget_at = lines.index("budget: $25.00 of $25 and 60,000 tokens spent")
    assert lines[budget_at + 1] == "  + 1 cell(s) of unknown USD cost, 2 cell(s) of unknown tokens (not in the totals)"
    assert lines[budget_at + 2] == "  lab/model: $25.00, 60,000 tokens in 21 cell(s)"
    assert "  ! SOLO: 1 harness error(s), not counted in the rate (--arena-resume runs them again)" in lines
    assert "  ! sweep budget exhausted ($25.0000 spent of $25): no new cell started after that" in lines
    assert "served model differs from the asked one in 1 cell(s) of SUPERVISOR-4-SANDBOXES" in text
    assert "  ! 1 cell(s) of unknown USD cost were not counted against --arena-max-usd" in lines
    kinds = [warning["kind"] for warning in summary["warnings"]]
    assert kinds == ["harness_error", "model_mismatch", "unknown_cost", "budget_exhausted", "budget_unknown_cost"]


def test_nothing_resolved_and_no_cells_are_unavailable_not_zero():
    summary = summarize(cell_records([row("a", "EMPTY", "unresolved", cost=0.25, tokens=10),
                                      row("a", "BROKEN", "harness_error")]))
    broken, empty = summary["arms"]  # by name, without an arm order
    assert empty["resolve_rate"] == 0.0 and empty["cost_per_resolved_usd"] is None
    assert empty["tokens_per_resolved"] is None
    assert broken["cells"] == 0 and broken["resolve_rate"] is None and broken["resolve_rate_ci95"] is None
    assert summary["pairs"] == [], "no cell both arms have in their rates"
    [broken_line, empty_line] = format_summary(summary)[4:6]
    assert empty_line.split()[1:] == ["0/1", "0.0%", "0.0-79.3%", "0.2500", "n/a", "10", "n/a", "1.0s"]
    assert broken_line.split()[1:5] == ["0/0", "n/a", "n/a", "0.0000"]


def test_integrity_flags_are_counted_per_arm_by_kind_and_shown_in_report_html():
    """Cells whose grading took files from base or found a nested repository (``details.integrity``) are
    counted in summary.json (cells flagged, cells per kind), warned about, and shown in report.html."""
    from pytest_swe_arena.results.html import render_report

    run_config = {"kind": "run_config", "path": "conftest.py", "detail": "taken from base"}
    nested = {"kind": "nested_repository", "path": "pytest", "detail": "taken in as files"}
    twice = [run_config, dict(run_config, path="tests/conftest.py")]
    rows = [row("a", "SNEAKY", "resolved", details={"integrity": twice}),
            row("b", "SNEAKY", "unresolved", details={"integrity": [nested, run_config]}),
            row("c", "SNEAKY", "unresolved", details={"integrity": []}),
            row("d", "SNEAKY", "unresolved", details={"integrity": ["not a flag"]}),
            row("a", "HONEST", "resolved"), row("b", "HONEST", "unresolved", details={"reconciliation": None})]
    summary = summarize(cell_records(rows), ["SNEAKY", "HONEST"], "r1")
    summary_validator().validate(summary)
    sneaky, honest = summary["arms"]
    assert sneaky["integrity_flagged"] == 3
    assert sneaky["integrity_flagged_resolved"] == 1  # a flag never changes a verdict: the reader sees how many
    assert sneaky["integrity_flags"] == {"nested_repository": 1, "other": 1, "run_config": 2}
    assert honest["integrity_flagged"] == 0 and honest["integrity_flags"] == {}
    [warning] = [warning for warning in summary["warnings"] if warning["kind"] == "integrity"]
    assert warning["arm"] == "SNEAKY" and warning["count"] == 3
    assert warning["examples"] == ["a[SNEAKY]", "b[SNEAKY]", "d[SNEAKY]"]
    assert "nested_repository 1, other 1, run_config 2), 1 of them resolved" in warning["message"]
    page = "".join(render_report(summary, cell_records(rows)))
    assert "<th>integrity flags</th>" in page
    assert "<td>3, 1 resolved (nested_repository 1, other 1, run_config 2)</td>" in page
    assert "SNEAKY: 3 cell(s) with integrity flags" in page


def test_repeats_give_pass_at_k_and_pass_hat_k():
    # Instance a: 2 of 3 trials pass; instance b: 0 of 3.
    rows = [row(iid, "SOLO", "resolved" if (iid, trial) in {("a", 1), ("a", 3)} else "unresolved", trial=trial)
            for iid in ("a", "b") for trial in (1, 2, 3)]
    summary = summarize(cell_records(rows))
    table = {entry["k"]: entry for entry in summary["arms"][0]["pass_at_k"]}
    assert table[1]["pass_at_k"] == pytest.approx((2 / 3 + 0) / 2)
    assert table[2]["pass_at_k"] == pytest.approx((1 + 0) / 2)  # a: 1 - C(1,2)/C(3,2) = 1
    assert table[2]["pass_hat_k"] == pytest.approx((1 / 3 + 0) / 2)  # a: C(2,2)/C(3,2)
    assert table[3]["pass_hat_k"] == 0.0
    lines = format_summary(summary)
    # trials, mean rate over trials (0.5, 0.5, 0) +- its standard error, pass@1, pass@3, pass^3
    assert "SOLO 3 33.3% +- 16.7 33.3% 50.0% 0.0%".split() in [line.split() for line in lines]
    # Trials of one instance are not independent: the CI and McNemar p say what they assume.
    assert lines[0] == ("2 instances x 1 arms, 3 trials: 6 cells "
                        "(95% CI: Wilson, trials as independent; n/a: not computable)")
    [warning] = summary["warnings"]
    assert warning["kind"] == "correlated_trials" and warning["count"] == 3
    assert "the 95% CI and McNemar p assume independent trials" in warning["message"]
    assert max(len(line) for line in lines) <= 100
    summary_validator().validate(summary)
    assert summarize(cell_records(rows[:1]))["warnings"] == [], "no repeats, no warning"


def test_user_properties_carry_status_spend_and_patch():
    usage = {"input_tokens": 5, "output_tokens": 2, "reasoning_tokens": 1, "cost_usd": 0.3, "cost_source": "reported"}
    assert user_properties("resolved", usage, "patches/a.solo.patch") == [
        ("arena_status", "resolved"), ("arena_cost_usd", 0.3), ("arena_tokens", 8),
        ("arena_patch", "patches/a.solo.patch")]
    unknown = dict(user_properties("arm_error", {"input_tokens": None, "cost_source": "unknown"}, None))
    assert unknown == {"arena_status": "arm_error", "arena_cost_usd": None, "arena_tokens": None, "arena_patch": None}
    never_ran = dict(user_properties("skipped_budget", {}, None))
    assert never_ran["arena_cost_usd"] == 0.0 and never_ran["arena_tokens"] == 0
    # The arm ran (it has a phase) and raised before it could report: unknown, not free.
    raised = dict(user_properties("harness_error", {}, None, {"arm": 3.0}))
    assert raised["arena_cost_usd"] is None and raised["arena_tokens"] is None
    setup_failed = dict(user_properties("harness_error", {}, None, {"workspace": 1.0}))
    assert setup_failed["arena_cost_usd"] == 0.0


def test_spend_of_a_cell_whose_arm_ran_or_was_in_flight_is_unknown_not_zero():
    rows = [row("a", "SOLO", "resolved", cost=0.5, tokens=100),
            {**row("b", "SOLO", "harness_error"), "usage": {}, "phases": {"arm": 2.0}},  # the arm raised
            {**row("c", "SOLO", "interrupted"), "usage": unknown_usage(), "phases": {}},  # in flight at Ctrl-C
            {**row("d", "SOLO", "harness_error"), "usage": {}, "phases": {"workspace": 1.0}}]  # never reached the arm
    summary = summarize(cell_records(rows))
    [solo] = summary["arms"]
    assert solo["cost_usd"] is None and solo["tokens"] is None and solo["cost_usd_known"] == 0.5
    assert solo["unknown_cost_cells"] == 2 and solo["unknown_token_cells"] == 2
    assert "SOLO: cost unknown for 2 of 3 cell(s), so its USD figures are n/a (known part: $0.5000)" in [
        warning["message"] for warning in summary["warnings"]]
    assert format_summary(summary)[4].split()[4] == "n/a"
    # The recorder marks such an outcome's usage before it writes the row (so budgets see it too).
    outcome = CellOutcome("k", "b", "SOLO", 1, "harness_error", "n", {}, phases={"arm": 2.0})
    assert with_spend_known(outcome).usage == unknown_usage()
    assert with_spend_known(outcome.replace(phases={"setup": 1.0})).usage == {}


def test_one_token_total_everywhere_and_budgets_count_unknown_tokens_apart():
    known = {"input_tokens": 900, "output_tokens": 100, "reasoning_tokens": 5, "cost_usd": 1.0}
    unknown = {"input_tokens": 900, "output_tokens": None, "reasoning_tokens": 0, "cost_usd": 0.5}
    for usage, total in ((known, 1005), (unknown, None)):
        assert row_tokens(usage) == total
        assert CellRecord("a", "X", "resolved", usage=UsageRecord(**usage)).tokens == total
        assert CellUsage(**usage).total_tokens == total
    tally = BudgetTally(BudgetLimits(Limit(max_tokens=10_000)))
    tally.add({"arm": "X", "usage": known})
    tally.add({"arm": "X", "usage": unknown})
    assert tally.to_json()["spent"] == {"usd": 1.5, "tokens": 1005, "cells": 2, "unknown_usd_cells": 0,
                                        "unknown_token_cells": 1}
    assert format_budget({"run_id": "r", **tally.to_json()})[:2] == [
        "budget: $1.5000 and 1,005 tokens of 10,000 spent", "  + 1 cell(s) of unknown tokens (not in the totals)"]


def test_compare_two_sweeps_gives_deltas_and_flips():
    before = cell_records(ten_instance_sweep())
    after_rows = ten_instance_sweep()
    for entry in after_rows:
        if entry["arm"] == "SOLO" and entry["instance_id"] in ("demo__calc-4", "demo__calc-5"):
            entry["status"] = "resolved"
        if entry["arm"] == "SOLO" and entry["instance_id"] == "demo__calc-9":
            entry["status"] = "unresolved"
        if entry["arm"] == "SOLO":
            entry["usage"]["cost_usd"] = 0.75
        if entry["arm"] == "SOLO" and entry["instance_id"] == "demo__calc-10":
            entry["status"] = "harness_error"  # not in B's rate: 9 common cells
    comparison = compare_runs(before, cell_records(after_rows + [row("x", "NEW", "resolved")]), ["SOLO", "SUP4"])
    solo, sup4 = comparison["arms"]
    assert solo["rate_a"] == 0.4 and solo["rate_b"] == 5 / 9 and solo["rate_delta"] == pytest.approx(5 / 9 - 0.4)
    # Over the 9 cells both have: the population of the flips and of McNemar p.
    assert solo["common_cells"] == 9
    assert solo["common_rate_a"] == 4 / 9 and solo["common_rate_b"] == 5 / 9
    assert solo["common_rate_delta"] == pytest.approx(1 / 9)
    assert solo["cost_usd_delta"] == pytest.approx(2.5)
    assert solo["fixed"] == ["demo__calc-4", "demo__calc-5"] and solo["broken"] == ["demo__calc-9"]
    assert solo["mcnemar_p"] == pytest.approx(1.0)
    assert sup4["fixed"] == sup4["broken"] == [] and sup4["rate_delta"] == 0
    assert comparison["only_in_b"] == ["NEW"] and comparison["only_in_a"] == []
    lines = format_comparison(comparison, "sweep-a", "sweep-b")
    assert max(len(line) for line in lines) <= 100
    split = [line.split() for line in lines]
    # The paired rows (the 9 cells both counted, their cost too) come first; the all-cells rows after.
    paired = split.index("SOLO 9 44.4% 55.6% +11.1pp 4.5000 6.7500 +2.2500 2 1 1.0000".split())
    assert paired < split.index("SOLO 10 40.0% 9 55.6% +15.6pp 5.0000 7.5000 +2.5000".split())
    assert solo["common"]["a"]["cost_usd"] == pytest.approx(4.5) and solo["common"]["b"]["cost_usd"] == 6.75
    assert lines[-3:] == ["  + demo__calc-4", "  + demo__calc-5", "  - demo__calc-9"]
