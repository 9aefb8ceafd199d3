"""The controller's recorder: reports in, ledger rows and output files out.

Registered only where there is no ``workerinput`` (the controller under xdist,
or the only process without it), fed only by test reports, so the same sweep
gives the same rows with and without ``-n``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from .ledger import LedgerWriter, write_predictions
from .outcome import CellOutcome
from .report import cell_records, format_summary, summarize, write_reports


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


class ArenaRecorder:
    """Writes ``ledger.jsonl``, patches, run logs, predictions and ``summary.json``."""

    def __init__(self, config: pytest.Config, out: Path, repeat: int, arm_order: tuple[str, ...]):
        self.config = config
        self.arm_order = arm_order
        self.writer = LedgerWriter(out, new_run_id(), repeat)
        self.written: list[Path] = []
        self.final_summary: dict[str, Any] | None = None

    @property
    def out(self) -> Path:
        return self.writer.out

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "arena", None)
        if not data:
            return
        row = self.writer.record(CellOutcome.from_json(data))
        self.config.hook.pytest_arena_cell_finished(row=row, config=self.config)

    def summary(self) -> dict[str, Any]:
        return summarize(cell_records(self.writer.rows), self.arm_order, self.writer.run_id)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        if not self.writer.rows:
            return
        self.written = [self.writer.path, *write_predictions(self.writer.rows, self.out)]
        self.final_summary, reports = write_reports(
            self.out, cell_records(self.writer.rows), self.arm_order, self.writer.run_id
        )
        self.written += reports

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.writer.rows:
            return
        terminalreporter.write_sep("=", "swe-arena results")
        for line in format_summary(self.final_summary or self.summary()):
            terminalreporter.write_line(line)
        terminalreporter.write_line("")
        terminalreporter.write_line(f"out: {self.out} (run {self.writer.run_id})")
        for path in self.written:
            terminalreporter.write_line(f"  {path}")
