"""The controller's recorder: reports in, ledger rows and output files out.

Registered only where there is no ``workerinput`` (the controller under xdist,
or the only process without it), fed only by test reports, so the same sweep
gives the same rows with and without ``-n``. It also keeps what only the
controller can know: the sweep's budget, its progress, the out dir's lock,
the rows a resumed sweep reuses, and which cells were in flight when the
sweep was interrupted.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from . import __version__
from .budget import BUDGET_FILE, BudgetLimits, BudgetTally, Limit
from .guard import SweepLock, forward_interrupt, reap_sweep
from .ledger import LEDGER_NAME, LedgerWriter, read_ledger, write_atomic, write_predictions
from .outcome import CellOutcome
from .report import format_summary, summarize
from .resume import reusable_rows, verdicts
from .state import CASE_KEY, ArenaState

NODE_NAME = re.compile(r"::(?P<iid>[^:\[]+)\[(?P<arm>.+?)(?:-r(?P<trial>\d+))?\]$")


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


class ArenaRecorder:
    """Writes ``ledger.jsonl``, patches, run logs, predictions, ``budget.json`` and ``summary.json``."""

    def __init__(self, config: pytest.Config, state: ArenaState):
        settings = state.settings
        self.config = config
        self.state = state
        self.arm_order = settings.arms
        self.writer = LedgerWriter(settings.out, new_run_id(), settings.repeat)
        limits = BudgetLimits(Limit(settings.max_usd, settings.max_tokens), dict(state.suite.arm_limits))
        self.tally = BudgetTally(limits)
        self.reusable: dict[str, dict[str, Any]] = {}
        if settings.resume:
            self.reusable = reusable_rows(read_ledger(settings.out / LEDGER_NAME))
            state.reuse = verdicts(self.reusable)
        self.total: int | None = None
        self.started: set[str] = set()
        self.finished: set[str] = set()
        self.pending: dict[str, dict[str, Any]] = {}
        self.interrupted = False
        self.lock: SweepLock | None = None
        self.written: list[Path] = []
        self.notes: list[str] = []

    @property
    def out(self) -> Path:
        return self.writer.out

    # -- the sweep's lifetime -------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self) -> None:
        if not self.state.sweep_run:
            return
        settings = self.state.settings
        self.lock = SweepLock(self.out, self.writer.run_id, self.progress, self.state.sweep_token,
                              heartbeat=settings.lock_heartbeat, stale_after=settings.lock_stale)
        takeover = self.lock.acquire()
        if takeover:
            self.note(takeover)
        if self.tally.limits.is_set:
            self.write_budget()

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter spends seconds rendering the traceback
    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True
        if self.state.sweep_token:
            forward_interrupt(self.state.sweep_token)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            self.interrupted = True
        if self.interrupted:
            self.record_unfinished()
        if self.state.sweep_token:
            leftovers = reap_sweep(self.state.sweep_token)
            if leftovers:
                self.note(f"stopped {len(leftovers)} process(es) the sweep left behind: {leftovers}")
        if self.writer.rows:
            self.written = [self.writer.path, *write_predictions(self.writer.rows, self.out)]
            summary = {"run_id": self.writer.run_id, **self.summary()}
            write_atomic(self.out / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
            self.written.append(self.out / "summary.json")
        if self.lock is not None:
            self.lock.release()

    def note(self, message: str) -> None:
        """A warning about the sweep itself: shown now and again under the results."""
        self.notes.append(message)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"swe-arena: {message}", yellow=True)

    # -- progress ---------------------------------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.total = sum(1 for item in session.items if CASE_KEY in item.stash)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.total is None:
            self.total = sum(1 for nodeid in ids if NODE_NAME.search(nodeid))

    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        cases = [item.stash[CASE_KEY] for item in items if CASE_KEY in item.stash]
        if not cases:
            return []
        reused = sum(1 for case in cases if case.key in self.state.reuse)
        return [f"swe-arena: {len(cases)} cells, {len(cases) - reused} to run, {reused} reused from earlier runs"]

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.started.add(nodeid)

    def progress(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "done": len(self.finished),
            "running": len(self.started - self.finished),
            "spent_usd": round(self.tally.sweep.usd, 6),
            "spent_tokens": self.tally.sweep.tokens,
            "unknown_usd_cells": self.tally.sweep.unknown_usd_cells,
        }

    # -- rows -------------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        pending = getattr(report, "arena_pending", None)
        if pending:
            self.pending[report.nodeid] = pending
        data = getattr(report, "arena", None)
        if not data:
            return
        if data.get("reused"):
            row = self.record_reused(data["cell_key"], report.nodeid)
        else:
            row = self.writer.record(CellOutcome.from_json(data))
        self.finished.add(report.nodeid)
        self.tally.add(row)
        if self.tally.limits.is_set:
            self.write_budget()
        if self.lock is not None:
            self.lock.write()
        self.config.hook.pytest_arena_cell_finished(row=row, config=self.config)

    def record_reused(self, cell_key: str, nodeid: str) -> dict[str, Any]:
        earlier = dict(self.reusable[cell_key])
        earlier.update(run_id=self.writer.run_id, reused_from=earlier["run_id"], nodeid=nodeid)
        self.writer.append(earlier)
        return earlier

    def record_unfinished(self) -> None:
        """Cells that started but never finished: recorded as ``interrupted`` (not final)."""
        for nodeid in sorted(self.started - self.finished):
            data = self.pending.get(nodeid) or self._unidentified(nodeid)
            if data is not None:
                self.writer.record(CellOutcome.from_json(data).replace(ended_at=datetime.now(UTC).isoformat()))
                self.finished.add(nodeid)

    def _unidentified(self, nodeid: str) -> dict[str, Any] | None:
        """A cell interrupted during its setup: only its node id says what it was."""
        match = NODE_NAME.search(nodeid)
        if not match:
            return None
        arm = match["arm"]
        return CellOutcome(
            cell_key="", instance_id=match["iid"], arm=arm, trial=int(match["trial"] or 1),
            status="interrupted", nodeid=nodeid, arm_identity={"name": arm},
            error="interrupted during setup", provenance={"plugin_version": __version__},
        ).to_json()

    def write_budget(self) -> None:
        write_atomic(self.out / BUDGET_FILE, json.dumps(self.tally.to_json(), indent=2, sort_keys=True) + "\n")

    # -- the summary ------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        summary = summarize(self.writer.rows, self.arm_order)
        if self.tally.limits.is_set:
            summary["budget"] = self.tally.to_json()
        return summary

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.writer.rows:
            return
        terminalreporter.write_sep("=", "swe-arena results")
        for line in format_summary(self.summary()):
            terminalreporter.write_line(line)
        terminalreporter.write_line("")
        for message in self.notes:
            terminalreporter.write_line(f"warning: {message}", yellow=True)
        terminalreporter.write_line(f"out: {self.out} (run {self.writer.run_id})")
