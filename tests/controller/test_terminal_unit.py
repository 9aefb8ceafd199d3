"""Unit tests of what the controller removes from the terminal reporter before the failure summary."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_swe_arena.controller.terminal import drop_silent_reports

CELL = "suite.jsonl::proj__x-{}[SOLO]"


def report(nodeid: str, when: str, sections: list[tuple[str, str]] | None = None) -> pytest.TestReport:
    return pytest.TestReport(nodeid, ("suite.jsonl", 0, ""), {}, "passed", None, when, sections or [])


def test_only_the_cells_reports_the_failure_summary_could_never_print_are_dropped() -> None:
    printed = report(CELL.format(3), "teardown", [("Captured stdout teardown", "bye\n")])
    other_test = report("tests/test_x.py::test_y", "teardown")
    stats: dict[str, list[Any]] = {
        "": [report(CELL.format(1), "setup"), report(CELL.format(1), "teardown"),
             report(CELL.format(2), "teardown", [("Captured stdout call", "hi\n")]), printed, other_test],
        "failed": [report(CELL.format(1), "call")],
    }
    assert drop_silent_reports(stats) == 3
    assert stats[""] == [printed, other_test]
    assert len(stats["failed"]) == 1


def test_nothing_to_drop() -> None:
    assert drop_silent_reports({}) == 0
    assert drop_silent_reports({"": []}) == 0
