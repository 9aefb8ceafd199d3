"""Results that decide: ``swe-arena compare --fail-on`` (the regression gate) and ``--arena-forecast``,
on ledgers whose numbers are known."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.arena import PRICED_CONFTEST, swe_arena

from pytest_swe_arena.ledger.reader import cell_records
from pytest_swe_arena.results.compare import compare_runs, format_comparison
from pytest_swe_arena.results.forecast import arm_histories, forecast, forecast_lines
from pytest_swe_arena.results.gate import Limit, LimitError, check, gate_lines

IDENTITY = {"name": "SOLO", "kind": "priced", "settings": {"cost": 0.25}}


def row(iid: str, status: str, cost: float | None = 0.25, arm: str = "SOLO", trial: int = 1, run_id: str = "run-a",
        seconds: float = 30.0, **extra: Any) -> dict[str, Any]:
    return {"instance_id": iid, "arm": arm, "trial": trial, "status": status, "run_id": run_id,
            "usage": {"input_tokens": 1000, "output_tokens": 100, "reasoning_tokens": 0, "cost_usd": cost,
                      "cost_source": "reported" if cost is not None else "unknown"},
            "phases": {"arm": seconds}, "arm_identity": IDENTITY if arm == "SOLO" else {"name": arm}, **extra}


def sweep(resolved: int, cells: int = 10, cost: float | None = 0.25, run_id: str = "run-a") -> list[dict[str, Any]]:
    return [row(f"i-{n}", "resolved" if n < resolved else "unresolved", cost, run_id=run_id) for n in range(cells)]


def gate(rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]], *limits: str) -> list[Any]:
    return check(compare_runs(cell_records(rows_a), cell_records(rows_b)), [Limit.parse(text) for text in limits])


def test_limits_say_what_they_accept():
    assert Limit.parse("resolve_rate:-5%") == Limit("resolve_rate", -1, 5.0, "%")
    assert Limit.parse("cost_usd:+0.5") == Limit("cost_usd", 1, 0.5, "")
    assert Limit.parse("resolve_rate:-2pp").change(0.5, 0.47) == pytest.approx(-3.0)
    for bad, said in (("resolve_rate", "is not METRIC:+N%"), ("resolve_rate:5%", "is not METRIC:+N%"),
                      ("speed:+5%", "unknown metric 'speed'"),
                      ("cost_usd:+5pp", "pp (percentage points) is for a rate"),
                      ("resolve_rate:-0.05", "give a rate's limit in %")):
        with pytest.raises(LimitError, match=re.escape(said)):
            Limit.parse(bad)


def test_gate_fails_on_a_drop_past_the_limit_and_passes_within_it():
    # 5/10 resolved in A; 4/10 in B is a 20 % (relative) drop, 10 points.
    [relative] = gate(sweep(5), sweep(4), "resolve_rate:-5%")
    assert relative.failed and relative.a == 0.5 and relative.b == 0.4 and relative.change == pytest.approx(-20)
    assert relative.line() == "FAIL SOLO resolve_rate 50.0% -> 40.0% (-20.0%; limit resolve_rate:-5%)"
    [points] = gate(sweep(5), sweep(4), "resolve_rate:-10pp")
    assert not points.failed, "exactly 10 points down is within -10pp"
    [rise] = gate(sweep(5), sweep(6), "resolve_rate:-5%")
    assert not rise.failed, "a rise is no regression of a -5% limit"


def test_gate_holds_cost_to_its_limit_on_the_common_cells():
    costly = sweep(5, cost=0.31)  # +24 %
    usd, per_cell = gate(sweep(5), costly, "cost_usd:+20%", "cost_per_cell_usd:+25%")
    assert usd.failed and usd.a == pytest.approx(2.5) and usd.b == pytest.approx(3.1)
    assert not per_cell.failed and per_cell.change == pytest.approx(24)
    # B ran 40 cells more (all resolved, costly): the gate compares the 10 both have, not 50 against 10.
    larger = sweep(5) + [row(f"j-{n}", "resolved", 5.0, run_id="run-a") for n in range(40)]
    rate, cost = gate(sweep(5), larger, "resolve_rate:-1%", "cost_usd:+1%")
    assert (rate.a, rate.b, rate.failed) == (0.5, 0.5, False)
    assert cost.b == pytest.approx(2.5) and not cost.failed


def test_gate_fails_what_it_cannot_measure():
    [unknown] = gate(sweep(5), sweep(5, cost=None), "cost_usd:+20%")
    assert unknown.failed and unknown.change is None
    assert "unknown in B (on 10 common cells): cannot be checked" in unknown.line()
    other = [dict(entry, instance_id="k-" + entry["instance_id"]) for entry in sweep(5)]
    [disjoint] = gate(sweep(5), other, "resolve_rate:-5%")
    assert disjoint.failed and "no cell counted in both sweeps" in disjoint.line()


def test_the_comparison_says_what_it_compares():
    """A 10-cell run against a 1-cell run: the paired rows first, the rest labelled, and a warning."""
    comparison = compare_runs(cell_records(sweep(5)), cell_records(sweep(1, cells=1)))
    lines = format_comparison(comparison, "a", "b")
    paired = lines.index("Paired: per arm, the cells (instance, trial) both sweeps counted in its rate")
    unpaired = lines.index("Not paired: each sweep over all its cells (as its own summary shows it)")
    assert paired < unpaired
    assert lines[paired + 3].split()[:5] == ["SOLO", "1", "100.0%", "100.0%", "+0.0pp"]
    assert "warning: SOLO: different cells (A 10, 10 counted; B 1, 1 counted; 1 in both): read its paired row" in lines
    checks = check(comparison, [Limit.parse("resolve_rate:-5%")])
    assert gate_lines(comparison, checks)[0].endswith("all 1 checks passed")


def write_ledger(out: Path, rows: list[dict[str, Any]]) -> Path:
    out.mkdir()
    (out / "ledger.jsonl").write_text("".join(json.dumps(entry) + "\n" for entry in rows))
    return out


def test_swe_arena_compare_fail_on_exits_non_zero_on_a_regression(tmp_path):
    before = write_ledger(tmp_path / "before", sweep(5))
    worse = write_ledger(tmp_path / "worse", sweep(3, cost=0.4, run_id="run-b"))
    better = write_ledger(tmp_path / "better", sweep(6, run_id="run-c"))

    failed = swe_arena("compare", before, worse, "--fail-on", "resolve_rate:-5%", "--fail-on", "cost_usd:+20%")
    assert failed.returncode == 1, failed.stderr
    gate_text = failed.stdout.split("\n\nregression gate")[1].splitlines()
    assert gate_text[0] == " (B against A, on the cells both sweeps counted): 2 of 2 checks failed"
    assert gate_text[1:] == ["  FAIL SOLO resolve_rate 50.0% -> 30.0% (-40.0%; limit resolve_rate:-5%)",
                             "  FAIL SOLO cost_usd 2.5000 -> 4.0000 (+60.0%; limit cost_usd:+20%)"]

    passed = swe_arena("compare", before, better, "--fail-on", "resolve_rate:-5%", "--fail-on", "cost_usd:+20%")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "all 2 checks passed" in passed.stdout

    no_gate = swe_arena("compare", before, worse)
    assert no_gate.returncode == 0 and "regression gate" not in no_gate.stdout

    bad = swe_arena("compare", before, worse, "--fail-on", "resolve_rate:5%")
    assert bad.returncode == 2
    assert "argument --fail-on: 'resolve_rate:5%' is not METRIC:+N% or METRIC:-N%" in bad.stderr


def test_forecast_from_known_rows():
    rows = [*sweep(5, cells=4), row("i-9", "skipped_budget", None, phases={}),  # never ran: no history
            row("i-1", "resolved", 0.25, reused_from="run-0", run_id="run-b"),  # counted where it ran
            row("i-2", "resolved", 9.0, arm="OTHER")]
    rows[-3]["phases"] = {}
    rows[-3]["usage"] = {}
    identities = {"SOLO": IDENTITY, "NEW": {"name": "NEW", "kind": "priced"}}
    histories = arm_histories(rows, identities)
    assert histories["SOLO"].ran == 4 and histories["SOLO"].mean_usd == pytest.approx(0.25)
    assert histories["SOLO"].mean_seconds == pytest.approx(30.0) and histories["NEW"].ran == 0
    lines = forecast_lines(forecast({"SOLO": 12, "NEW": 3}, {"SOLO": 2}, histories), ["x/ledger.jsonl"], workers=2)
    assert lines[0] == "arena forecast: 4 earlier cell(s) of these arms in x/ledger.jsonl"
    assert lines[3].split() == ["SOLO", "12", "2", "10", "4", "0.2500", "2.5000", "0.08"]
    assert lines[4].split() == ["NEW", "3", "0", "3", "0", "n/a", "n/a", "n/a"]
    assert lines[5] == ("NEW: no history (no earlier row of this arm with the same identity): "
                        "its dollars and hours are unknown")
    assert lines[6] == "expected: 2.5000 USD (+ unknown for NEW), 0.08 cell-hours (about 0.04 h on 2 workers)"


def test_arena_forecast_with_collect_only_prints_the_expected_spend_and_runs_nothing(suite, calc):
    suite.pytester.makeconftest(PRICED_CONFTEST)
    suite.arms_toml = ('[tool.swe_arena.arms.SOLO]\nkind = "priced"\ncost = 0.25\n'
                       '[tool.swe_arena.arms.NEWARM]\nkind = "priced"\ncost = 2.0\n')
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2)])
    suite.run("--arena-arms=SOLO", "--arena-out=earlier").assert_outcomes(failed=2)
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3, 4)])

    result = suite.run("--arena-arms=SOLO,NEWARM", "--collect-only", "--arena-forecast",
                       "--arena-forecast-from=earlier")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "arena forecast: 2 earlier cell(s) of these arms in *earlier/ledger.jsonl",
        "arm * cells * reused * to run * history * USD / cell * USD * cell-hours",
        "SOLO * 4 * 0 * 4 * 2 * 0.2500 * 1.0000 * [0-9].[0-9][0-9]",
        "NEWARM * 4 * 0 * 4 * 0 * n/a * n/a * n/a",
        "NEWARM: no history (no earlier row of this arm with the same identity): its dollars and hours are unknown",
        "expected: 1.0000 USD (+ unknown for NEWARM), [0-9].[0-9][0-9] cell-hours",
    ])
    assert "no ledger at" not in result.stdout.str(), "the out dir of a first sweep has none, and that is no news"
    assert not (suite.path / "arena-out" / "ledger.jsonl").exists(), "a forecast spends nothing"

    # Without history anywhere, it says so.
    alone = suite.run("--arena-arms=SOLO", "--collect-only", "--arena-forecast", "--arena-forecast-from=nowhere")
    alone.stdout.fnmatch_lines(["arena forecast: 0 earlier cell(s) of these arms in no ledger",
                                "SOLO: no history *", "arena forecast: no ledger at */nowhere/ledger.jsonl *"])
