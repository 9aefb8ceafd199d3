"""The controller's recorder: reports in, ledger rows and output files out.

Registered only where there is no ``workerinput`` (the controller under xdist,
or the only process without it), fed only by test reports, so the same sweep
gives the same rows with and without ``-n``. It also keeps what only the
controller can know: the sweep's budget, its progress, the out dir's lock,
the rows a resumed sweep reuses, and which cells were in flight when the
sweep was interrupted.
"""

from __future__ import annotations

import queue
import uuid
from collections.abc import Generator
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from . import __version__, calibration
from .budget import BUDGET_FILE, BudgetLimits, BudgetTally, Limit
from .guard import SweepLock, forward_interrupt, reap_sweep
from .ledger import (
    LEDGER_NAME,
    LedgerWriter,
    RowNotWritten,
    cell_label,
    finite_json,
    read_ledger,
    write_atomic,
    write_predictions,
)
from .naming import parse_node_id
from .outcome import CellOutcome
from .report import (
    cell_records,
    format_summary,
    summarize,
    unknown_usage,
    with_spend_known,
    write_reports,
    written_lines,
)
from .resume import reusable_rows, verdicts
from .state import CASE_KEY, ArenaState


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
        #: Node ids of the arena cells (other tests of the session are none of the recorder's business).
        self.cell_ids: set[str] = set()
        self.started: set[str] = set()
        self.finished: set[str] = set()
        #: Started and not finished: ``progress()`` runs on every report and heartbeat.
        self.running: set[str] = set()
        self.pending: dict[str, dict[str, Any]] = {}
        self.interrupted = False
        self.lock: SweepLock | None = None
        self.written: list[Path] = []
        self.calibration: dict[str, dict[str, Any]] = {}
        self.final_summary: dict[str, Any] | None = None
        self.notes: list[str] = []
        #: Rows that could not be written (a full disk): their cells are not recorded.
        self.unwritten_rows: list[RowNotWritten] = []
        #: Other files of the out dir that could not be written, by path.
        self.unwritten_files: dict[str, OSError] = {}
        #: Why the sweep must stop (something could not be written), until it does.
        self.stop_reason: str | None = None

    @property
    def out(self) -> Path:
        return self.writer.out

    # -- the sweep's lifetime -------------------------------------------------------------

    # trylast: after the plugin's sessionstart built the arms. A usage error there ends the session
    # without pytest_sessionfinish, so the lock must not be taken before it.
    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self) -> None:
        if not self.state.sweep_run:
            return
        settings = self.state.settings
        self.lock = SweepLock(self.out, self.writer.run_id, self.progress, self.state.sweep_token,
                              heartbeat=settings.lock_heartbeat, stale_after=settings.lock_stale)
        takeover = self.lock.acquire()
        if takeover:
            self.note(takeover)
        self.prepay_reused()
        if self.tally.limits.is_set:
            self.write_budget()

    def prepay_reused(self) -> None:
        """Count what the rows a resumed sweep may reuse spent, before any cell starts.

        Otherwise a budget would only see that spend as the reused cells come by, and cells
        would start that the earlier runs' spend had already paid out. Rows of the sweep's arms
        count, whether or not a ``-k`` or a changed instance keeps them from being reused.
        """
        arms = set(self.arm_order)
        for row in self.reusable.values():
            if row.get("arm") in arms:
                self.tally.add(row)

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter spends seconds rendering the traceback
    def pytest_keyboard_interrupt(self) -> None:
        self.interrupted = True
        if self.state.interrupts is not None:
            self.state.interrupts.begin_stop()  # an interrupt raised by xdist did not pass our handler
        if self.state.sweep_token:
            forward_interrupt(self.state.sweep_token)

    # A wrapper, innermost (trylast): signals stop raising before xdist's own session finish
    # waits for its workers, and the bookkeeping below runs whatever happened in there, still
    # before the terminal reporter shows the results.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Generator[None]:
        if self.state.interrupts is not None:
            self.state.interrupts.begin_stop()
        try:
            return (yield)
        finally:
            self.finish_sweep(session, exitstatus)

    def finish_sweep(self, session: pytest.Session, exitstatus: int) -> None:
        """The bookkeeping at the end of a sweep: unfinished cells, leftover processes, output files, the lock."""
        try:
            if exitstatus == pytest.ExitCode.INTERRUPTED:
                self.interrupted = True
            if self.interrupted:
                self.record_late_reports(session)
                self.record_unfinished()
            if self.state.sweep_token:
                interrupts = self.state.interrupts
                leftovers = reap_sweep(self.state.sweep_token,
                                       hurry=interrupts.hurried if interrupts is not None else None)
                if leftovers:
                    self.note(f"stopped {len(leftovers)} process(es) the sweep left behind: {leftovers}")
            if self.writer.rows:
                self.write_outputs()
        finally:
            self.release_lock()
        if (self.unwritten_rows or self.unwritten_files) and session.exitstatus in (
                pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def write_outputs(self) -> None:
        """Predictions, summary and report, calibration: each written whatever became of the others."""
        self.written = [self.writer.path]
        try:
            self.written += write_predictions(self.writer.rows, self.out)
        except OSError as error:
            self.file_not_written(error)
        try:
            self.final_summary, reports = write_reports(
                self.out, cell_records(self.writer.rows), self.arm_order, self.writer.run_id, self.budget()
            )
            self.written += reports
        except OSError as error:
            self.file_not_written(error)
        if self.state.settings.calibrate:
            self.calibration = calibration.verdicts(self.writer.rows)
            try:
                path, problem = calibration.write_calibration(self.out, self.calibration, self.writer.run_id)
            except OSError as error:
                self.file_not_written(error)
            else:
                self.written.append(path)
                if problem:
                    self.note(problem)

    def pytest_unconfigure(self) -> None:
        # The safety net: a session that ended before pytest_sessionfinish (an error in another
        # plugin's sessionstart, say) must not leave a lock behind for the next sweep to take over.
        self.release_lock()

    def release_lock(self) -> None:
        lock, self.lock = self.lock, None
        if lock is not None:
            lock.release()

    def note(self, message: str) -> None:
        """A warning about the sweep itself: shown now and again under the results."""
        self.notes.append(message)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"swe-arena: {message}", yellow=True)

    # -- progress ---------------------------------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.cell_ids = {item.nodeid for item in session.items if CASE_KEY in item.stash}
        self.total = len(self.cell_ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # Under xdist the controller has no items, only node ids, which the workers made with
        # naming's functions: parsed back with the same module, they say which are cells.
        # Every worker collects the same ids (xdist stops otherwise): the first one says it all.
        if self.cell_ids:
            return
        self.cell_ids.update(nodeid for nodeid in ids if self.is_cell_id(nodeid))
        self.total = len(self.cell_ids)

    def is_cell_id(self, nodeid: str) -> bool:
        """Whether ``nodeid`` is the id a worker gives a cell of this sweep."""
        parsed = parse_node_id(nodeid)
        if parsed is None:
            return False
        file_part, cell = parsed
        settings = self.state.settings
        return (cell.arm in settings.arms and 1 <= cell.trial <= settings.repeat
                and cell.node_id(file_part, settings.repeat) == nodeid)

    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        cases = [item.stash[CASE_KEY] for item in items if CASE_KEY in item.stash]
        if not cases:
            return []
        reused = sum(1 for case in cases if case.key in self.state.reuse)
        return [f"swe-arena: {len(cases)} cells, {len(cases) - reused} to run, {reused} reused from earlier runs"]

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        if nodeid in self.cell_ids and nodeid not in self.finished:
            self.started.add(nodeid)
            self.running.add(nodeid)

    def progress(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "done": len(self.finished),
            "running": len(self.running),
            "spent_usd": round(self.tally.sweep.usd, 6),
            "spent_tokens": self.tally.sweep.tokens,
            "unknown_usd_cells": self.tally.sweep.unknown_usd_cells,
            "unknown_token_cells": self.tally.sweep.unknown_token_cells,
        }

    # -- rows -------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter, which shows a crashed cell's arena status
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        if nodeid not in self.cell_ids and self.carries_a_cell(report):
            # A cell whose id was not recognised at collection: its payload says what it is,
            # and a sweep's results are never dropped for the sake of a name.
            self.cell_ids.add(nodeid)
            self.total = len(self.cell_ids)
        if nodeid not in self.cell_ids or nodeid in self.finished:
            return  # not a cell, or a report after the one that finished it (a teardown)
        pending = getattr(report, "arena_pending", None)
        if pending:
            self.pending[nodeid] = pending
        data = getattr(report, "arena", None)
        if not data:
            if not report.failed:
                return
            # Every report that ends a cell carries its outcome; a failed one without it is xdist's
            # stand-in for a worker that died while running the cell (when="???").
            data = self.crashed(report)
        with self.deferred():
            try:
                if data.get("reused"):
                    row = self.record_reused(data["cell_key"], nodeid)
                else:
                    row = self.writer.record(with_spend_known(CellOutcome.from_json(data)))
            except RowNotWritten as failure:
                row, written = failure.row, False
                self.row_not_written(failure)
            else:
                written = True
            self.finished.add(nodeid)
            self.running.discard(nodeid)
            if not data.get("reused"):  # a reused row's spend was counted at session start
                self.tally.add(row)
        if self.tally.limits.is_set and not data.get("reused"):
            self.write_budget()
        self.refresh_lock()
        if written:
            self.config.hook.pytest_arena_cell_finished(row=row, config=self.config)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        # After the cell's reports are shown: stop the sweep like an interrupt, so no more cells
        # run whose results could not be kept (its cells in flight become interrupted).
        if self.stop_reason is not None:
            reason, self.stop_reason = self.stop_reason, None
            pytest.exit(reason, returncode=pytest.ExitCode.INTERRUPTED)

    def row_not_written(self, failure: RowNotWritten) -> None:
        self.unwritten_rows.append(failure)
        self.stop_for(failure.error)

    def stop_for(self, error: OSError) -> None:
        """Stop the sweep after this cell: what it writes cannot be kept."""
        self.stop_reason = self.stop_reason or (f"swe-arena: stopped the sweep: cannot write {error.filename} "
                                                f"({error.strerror or error}); see the error above")

    def file_not_written(self, error: OSError) -> None:
        self.unwritten_files[str(error.filename)] = error

    def refresh_lock(self) -> None:
        if self.lock is not None:
            try:
                self.lock.write()
            except OSError:
                pass  # the heartbeat says so, and keeps trying

    def write_failure_lines(self) -> list[str]:
        """The one error about what could not be written, or nothing."""
        if not self.unwritten_rows and not self.unwritten_files:
            return []
        lines = [f"error: swe-arena could not write everything to {self.out}; what was recorded before is intact"]
        if self.unwritten_rows:
            cells = ", ".join(f"{cell_label(failure.row)} ({failure.row.get('status')})"
                              for failure in self.unwritten_rows)
            reasons = sorted({failure.error.strerror or str(failure.error) for failure in self.unwritten_rows})
            lines.append(f"  {len(self.unwritten_rows)} row(s) not written ({'; '.join(reasons)}), so these cells "
                         f"are not recorded: {cells}")
        for path, error in self.unwritten_files.items():
            lines.append(f"  not written: {path} ({error.strerror or error})")
        remedy = "free space (or remove the cause), then run the sweep again with --arena-resume"
        if self.unwritten_rows:
            remedy += ": it runs the cells not recorded and reuses the rest"
        else:
            remedy += f", or rewrite the summary with `swe-arena report {self.out}`"
        return [*lines, f"  {remedy}"]

    @staticmethod
    def carries_a_cell(report: pytest.TestReport) -> bool:
        return bool(getattr(report, "arena", None) or getattr(report, "arena_pending", None))

    def deferred(self) -> AbstractContextManager[None]:
        """Ctrl-C waits while a row is written and counted, so a row on disk is never recorded twice."""
        interrupts = self.state.interrupts
        return interrupts.deferred() if interrupts is not None else nullcontext()

    def crashed(self, report: pytest.TestReport) -> dict[str, Any]:
        """The harness_error row of a cell whose worker died; also put on the report, to show as such."""
        text = str(report.longrepr or "").strip()
        error = "worker crashed: " + (text.splitlines()[0] if text else f"no report ({report.when})")
        pending = self.pending.get(report.nodeid)
        if pending is not None:
            # The cell was past its setup: its arm may have run and spent, how much is unknown.
            outcome = CellOutcome.from_json(pending).replace(status="harness_error", error=error,
                                                             usage=unknown_usage())
        else:
            outcome = self._unidentified(report.nodeid, "harness_error", error)
        data = outcome.replace(ended_at=datetime.now(UTC).isoformat()).to_json()
        report.arena = data  # type: ignore[attr-defined]
        return data

    def record_reused(self, cell_key: str, nodeid: str) -> dict[str, Any]:
        earlier = dict(self.reusable[cell_key])
        # After chained resumes, name the run that really ran the cell.
        earlier.update(run_id=self.writer.run_id, reused_from=earlier.get("reused_from") or earlier["run_id"],
                       nodeid=nodeid)
        self.writer.append(earlier)
        return earlier

    def record_late_reports(self, session: pytest.Session) -> None:
        """Cell reports xdist's workers sent while the sweep was stopping, which xdist no longer reads.

        An agent arm stopped by Ctrl-C still reports its cell (``interrupted``, with what the agent
        spent and its transcript): that report must not lose to the pending row's unknown spend.
        """
        events = getattr(session.config.pluginmanager.get_plugin("dsession"), "queue", None)
        while events is not None:
            try:
                name, arguments = events.get_nowait()
            except queue.Empty:
                return
            if name == "testreport":
                self.pytest_runtest_logreport(arguments["rep"])

    def record_unfinished(self) -> None:
        """Cells that started but never finished: recorded as ``interrupted`` (not final)."""
        for nodeid in sorted(self.started - self.finished):
            if nodeid in self.pending:
                # In flight: its arm may have run and spent, how much is unknown.
                outcome = CellOutcome.from_json(self.pending[nodeid]).replace(usage=unknown_usage())
            else:
                outcome = self._unidentified(nodeid, "interrupted", "interrupted during setup")
            with self.deferred():
                try:
                    self.writer.record(outcome.replace(ended_at=datetime.now(UTC).isoformat()))
                except RowNotWritten as failure:
                    self.unwritten_rows.append(failure)
                self.finished.add(nodeid)
                self.running.discard(nodeid)

    def _unidentified(self, nodeid: str, status: str, error: str) -> CellOutcome:
        """A cell that ended during its setup: only its node id says what it was (its arm never ran)."""
        parsed = parse_node_id(nodeid)
        iid, arm, trial = (parsed[1].instance_id, parsed[1].arm, parsed[1].trial) if parsed else (nodeid, "?", 1)
        return CellOutcome(
            cell_key="", instance_id=iid, arm=arm, trial=trial,
            status=status, nodeid=nodeid, arm_identity={"name": arm},
            error=error, provenance={"plugin_version": __version__},
        )

    def write_budget(self) -> None:
        try:
            text = finite_json(self.budget(), BUDGET_FILE, indent=2, sort_keys=True) + "\n"
            write_atomic(self.out / BUDGET_FILE, text)
        except OSError as error:
            # The workers read the caps from this file: without it, no cap holds. Stop the sweep.
            self.file_not_written(error)
            self.stop_for(error)
        else:
            self.unwritten_files.pop(str(self.out / BUDGET_FILE), None)

    # -- the summary ------------------------------------------------------------------------

    def budget(self) -> dict[str, Any] | None:
        """The sweep's caps and spend, when it had caps (as in ``budget.json``)."""
        return {"run_id": self.writer.run_id, **self.tally.to_json()} if self.tally.limits.is_set else None

    def summary(self) -> dict[str, Any]:
        return summarize(cell_records(self.writer.rows), self.arm_order, self.writer.run_id, self.budget())

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        failure = self.write_failure_lines()
        if not self.writer.rows:
            for line in failure:
                terminalreporter.write_line(line, red=True)
            return
        terminalreporter.write_sep("=", "swe-arena results")
        for line in format_summary(self.final_summary or self.summary()):
            terminalreporter.write_line(line)
        terminalreporter.write_line("")
        if self.calibration:
            failed = sorted(iid for iid, verdict in self.calibration.items() if verdict["ok"] is False)
            unsure = sorted(iid for iid, verdict in self.calibration.items() if verdict.get("inconclusive"))
            terminalreporter.write_line(f"calibration: {len(self.calibration)} instance(s), {len(failed)} failed"
                                        + (f": {', '.join(failed)}" if failed else "")
                                        + (f"; {len(unsure)} inconclusive (run again): {', '.join(unsure)}"
                                           if unsure else ""))
            for iid in failed + unsure:
                terminalreporter.write_line(f"  {iid}: {'; '.join(self.calibration[iid]['problems'])}")
        for message in self.notes:
            terminalreporter.write_line(f"warning: {message}", yellow=True)
        for line in written_lines(self.out, self.writer.run_id, self.written):
            terminalreporter.write_line(line)
        for line in failure:
            terminalreporter.write_line(line, red=True)
