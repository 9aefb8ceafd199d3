"""Unit tests of the controller's records: reports in, rows out, spend counted, what could not be written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_swe_arena.controller.records import SweepRecords
from pytest_swe_arena.ledger.reader import read_ledger
from pytest_swe_arena.naming import BUDGET_NAME
from pytest_swe_arena.outcome import CellOutcome, CellStatus
from pytest_swe_arena.spend.budget import BudgetLimits, Limit

NODE = "suite.jsonl::proj__x-{}[SOLO]"


def report(number: int, when: str = "call", outcome: str = "passed", **payload: Any) -> pytest.TestReport:
    made = pytest.TestReport(NODE.format(number), ("suite.jsonl", 0, ""), {}, outcome, None, when)
    for name, value in payload.items():
        setattr(made, name, value)
    return made


def finished(number: int, cost: float | None = 0.25, status: CellStatus = CellStatus.RESOLVED) -> dict[str, Any]:
    return CellOutcome(cell_key=f"k{number}", instance_id=f"proj__x-{number}", arm="SOLO", trial=1, status=status,
                       nodeid=NODE.format(number), arm_identity={"name": "SOLO"}, phases={"arm": 1.0},
                       usage={"input_tokens": 100, "output_tokens": 10, "reasoning_tokens": 0,
                              "cost_usd": cost, "cost_source": "reported"}).to_json()


def records(tmp_path: Path, limits: BudgetLimits | None = None, **options: Any) -> SweepRecords:
    made = SweepRecords(tmp_path, "run-1", ["SOLO"], 1, limits or BudgetLimits(), **options)
    made.progress.collected_by_worker([NODE.format(n) for n in range(1, 4)])
    return made


def test_a_finished_report_becomes_one_row_and_its_spend_is_counted(tmp_path: Path) -> None:
    sweep = records(tmp_path)
    recorded = sweep.record(report(1, arena=finished(1)))
    assert recorded is not None and recorded.written
    assert [row["instance_id"] for row in read_ledger(sweep.writer.path)] == ["proj__x-1"]
    assert (sweep.tally.sweep.usd, sweep.tally.sweep.tokens) == (0.25, 110)
    assert sweep.record(report(1, when="teardown", arena=finished(1))) is None, "a cell is recorded once"


def test_a_report_of_no_cell_is_none_of_the_ledgers_business(tmp_path: Path) -> None:
    sweep = records(tmp_path)
    other = pytest.TestReport("tests/test_x.py::test_y", ("tests/test_x.py", 0, ""), {}, "failed", None, "call")
    assert sweep.record(other) is None and sweep.rows == []


def test_a_failed_report_without_an_outcome_is_a_crashed_worker_with_its_pending_cell(tmp_path: Path) -> None:
    sweep = records(tmp_path)
    pending = finished(2, status=CellStatus.INTERRUPTED)
    sweep.record(report(2, when="setup", arena_pending=pending))
    recorded = sweep.record(report(2, when="???", outcome="failed"))
    assert recorded is not None
    assert recorded.row["status"] == "harness_error" and recorded.row["error"].startswith("worker crashed")
    assert recorded.row["usage"]["cost_usd"] is None, "a crashed cell's spend is unknown, not 0"


def test_cells_that_started_and_never_finished_are_interrupted_rows(tmp_path: Path) -> None:
    sweep = records(tmp_path)
    sweep.progress.start(NODE.format(3))
    sweep.record_unfinished()
    assert [(row["nodeid"], row["status"]) for row in sweep.rows] == [(NODE.format(3), "interrupted")]


def test_with_a_budget_every_row_rewrites_budget_json_and_exhaustion_is_in_it(tmp_path: Path) -> None:
    sweep = records(tmp_path, BudgetLimits(Limit(max_usd=0.4)))
    sweep.record(report(1, arena=finished(1)))
    assert (tmp_path / BUDGET_NAME).exists() and not sweep.tally.exhausted()
    sweep.record(report(2, arena=finished(2)))
    assert "sweep budget exhausted" in sweep.tally.exhausted()["*"]
    assert '"exhausted"' in (tmp_path / BUDGET_NAME).read_text()


def test_a_row_that_cannot_be_written_stops_the_sweep_and_is_named_in_the_failure_lines(tmp_path: Path) -> None:
    sweep = records(tmp_path)
    sweep.writer.path = tmp_path / "a-directory"
    sweep.writer.path.mkdir()
    recorded = sweep.record(report(1, arena=finished(1)))
    assert recorded is not None and not recorded.written
    assert sweep.stop_reason and "cannot write" in sweep.stop_reason
    lines = sweep.failure_lines()
    assert "1 row(s) not written" in lines[1] and "proj__x-1" in lines[1] and "--arena-resume" in lines[-1]


def test_a_reused_row_is_recorded_again_and_its_spend_counted_once_at_the_start(tmp_path: Path) -> None:
    earlier = {**finished(1), "run_id": "run-0", "usage": {"cost_usd": 1.0, "input_tokens": 5}}
    sweep = records(tmp_path, BudgetLimits(Limit(max_usd=10)), reusable={"k1": earlier})
    sweep.prepay_reused()
    sweep.record(report(1, arena={"reused": True, "cell_key": "k1"}))
    assert sweep.rows[0]["reused_from"] == "run-0"
    assert sweep.tally.sweep.usd == 1.0


def test_once_written_a_cells_logs_and_patch_leave_the_report_pytest_keeps(tmp_path: Path) -> None:
    sweep = records(tmp_path)
    data = finished(1, status=CellStatus.UNRESOLVED)
    data.update(logs={"stderr.log": "x" * 100_000}, patch_base64="ZGlmZgo=")
    kept = report(1, outcome="failed", arena=data)
    recorded = sweep.record(kept)
    assert recorded is not None and recorded.written
    assert (tmp_path / recorded.row["run_dir"] / "stderr.log").read_text() == "x" * 100_000
    assert kept.arena == {"status": "unresolved"}, "the terminal still shows it; the row is on disk"  # type: ignore[attr-defined]


def test_a_setup_reports_pending_row_is_kept_only_until_its_cell_finishes(tmp_path: Path) -> None:
    sweep = records(tmp_path)
    setup = report(1, when="setup", arena_pending=finished(1, status=CellStatus.INTERRUPTED))
    assert sweep.record(setup) is None
    assert not hasattr(setup, "arena_pending"), "pytest keeps the setup report to the end of the sweep"
    assert NODE.format(1) in sweep.pending
    sweep.record(report(1, arena=finished(1)))
    assert sweep.pending == {}


def test_an_instances_last_cell_queues_its_viewer_pages_with_its_rows(tmp_path: Path) -> None:
    sweep = SweepRecords(tmp_path, "run-1", ["SOLO", "SUP4"], 1, BudgetLimits())
    nodes = {arm: f"suite.jsonl::proj__x-1[{arm}]" for arm in ("SOLO", "SUP4")}
    sweep.progress.collected_by_worker(list(nodes.values()))
    sweep.record(report(1, arena={**finished(1), "nodeid": nodes["SOLO"]}, nodeid=nodes["SOLO"]))
    assert sweep.pages is None and sweep.offsets_of == {"proj__x-1": [0]}, "one cell of two: not yet"
    sweep.record(report(1, arena={**finished(1), "arm": "SUP4", "nodeid": nodes["SUP4"]}, nodeid=nodes["SUP4"]))
    assert sweep.pages is not None and sweep.offsets_of == {}
    built = sweep.pages.finish()
    assert sorted(built.pages) == ["cells/proj__x-1/SOLO/1", "cells/proj__x-1/SUP4/1"]
    assert (tmp_path / "viewer/data/cells/proj__x-1/SUP4/1.js").is_file()
