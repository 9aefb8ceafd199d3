"""The controller's records of a sweep: reports in, ledger rows out, spend counted, files written.

Fed only by test reports, so the same sweep gives the same rows with and without ``-n``:
each report that ends a cell carries its outcome as plain JSON (``report.arena``), and a
failed one without it is xdist's stand-in for a worker that died (``controller.stand_ins.crashed``). Rows
are built and written by ``ledger``; their spend goes to the ``BudgetTally``, and with a
budget to ``budget.json`` after every row. What cannot be written (a full disk) is kept
here, and stops the sweep after the cell (``stop_reason``). At the end: the rows of cells
that never finished (``controller.stand_ins.interrupted``), then the predictions, ``summary.json``,
``report.html`` and, when calibrating, ``calibration.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from ..files import finite_json, write_atomic
from ..ledger.reader import CellRecord, line_cell
from ..ledger.writer import LedgerWriter, RowNotWritten, append_sweep_record
from ..naming import BUDGET_NAME, CellName
from ..outcome import CellOutcome, CellStatus
from ..results import calibration
from ..results.outputs import remove_other_predictions, write_predictions, write_summary_and_report
from ..results.summary import summarize
from ..spend.budget import BudgetLimits, BudgetTally
from .progress import SweepProgress
from .stand_ins import crashed, interrupted, with_spend_known

#: The exit status of a sweep that could not run: more than ``NOT_RUN_SHARE`` of its cells this run were
#: harness or configuration errors (status 1 stays a sweep that ran and left cells unresolved). docs/outputs.md.
SWEEP_NOT_RUN = 6
NOT_RUN_SHARE = 0.5
#: The statuses that say the harness or the arm's setup failed, not the agent (``skipped_config``: a cell not started
#: because its arm's setup failed; a wrong key over a whole sweep is one ``config_error`` and the rest of these).
NOT_RUN_STATUSES = (CellStatus.HARNESS_ERROR.value, CellStatus.CONFIG_ERROR.value, CellStatus.SKIPPED_CONFIG.value)


if TYPE_CHECKING:
    from ..results.viewer.build import PagesWhileRunning


class RecordedRow(NamedTuple):
    """The row of the cell a report finished, and whether it is in the ledger."""

    row: dict[str, Any]
    written: bool


def carries_a_cell(report: pytest.TestReport) -> bool:
    """Whether a report carries a cell's outcome (a finished one, or the pending one of its setup)."""
    return bool(getattr(report, "arena", None) or getattr(report, "arena_pending", None))


def shown_on_terminal(data: Mapping[str, Any]) -> dict[str, Any]:
    """What a recorded cell's report keeps of its outcome: what the terminal shows (``text.cell_teststatus``)."""
    return {name: data[name] for name in ("status", "reused") if name in data}


class SweepRecords:
    """Every row of this sweep, the spend it counts, its progress, and what could not be written."""

    def __init__(self, out: Path, run_id: str, arms: Sequence[str], repeat: int, limits: BudgetLimits,
                 reusable: Mapping[str, Mapping[str, Any]] | None = None,
                 deferred: Callable[[], AbstractContextManager[None]] = nullcontext):
        """
        :param reusable: with --arena-resume, ``cell_key -> row`` of the earlier rows this sweep may reuse.
        :param deferred: holds off Ctrl-C while a row is written and counted, so a row on disk is
            never recorded twice (``interrupts.InterruptSignals.deferred``).
        """
        self.arm_order = tuple(arms)
        self.writer = LedgerWriter(out, run_id, repeat)
        self.tally = BudgetTally(limits)
        self.progress = SweepProgress(arms, repeat)
        self.reusable = dict(reusable or {})
        self.deferred = deferred
        #: nodeid -> the outcome its setup report carried: what the cell is should it never finish.
        self.pending: dict[str, dict[str, Any]] = {}
        #: Rows that could not be written (a full disk): their cells are not recorded.
        self.unwritten_rows: list[RowNotWritten] = []
        #: Other files of the out dir that could not be written, by path.
        self.unwritten_files: dict[str, OSError] = {}
        #: Why the sweep must stop (something could not be written), until it does.
        self.stop_reason: str | None = None
        #: What the end of the sweep wrote: the paths, the summary, the calibration verdicts.
        self.written: list[Path] = []
        self.final_summary: dict[str, Any] | None = None
        self.calibration: dict[str, dict[str, Any]] = {}
        #: This sweep's line of ``sweeps.jsonl`` (``provenance.sweep_record``), once it started.
        self.sweep: dict[str, Any] | None = None
        #: The viewer's pages of each instance whose cells all finished, built while the sweep runs.
        self.pages: PagesWhileRunning | None = None  # made when the first instance finishes (an import the CLI pays)
        #: Instance id -> the ledger offsets of its rows, until its last cell finishes.
        self.offsets_of: dict[str, list[int]] = {}

    @property
    def out(self) -> Path:
        return self.writer.out

    @property
    def run_id(self) -> str:
        return self.writer.run_id

    @property
    def rows(self) -> list[dict[str, Any]]:
        """This sweep's rows, read back from the ledger (``LedgerWriter.rows``)."""
        return self.writer.rows

    @property
    def recorded(self) -> int:
        """How many rows this sweep wrote."""
        return len(self.writer.offsets)

    def record_sweep(self, record: Mapping[str, Any]) -> None:
        """Append the sweep's own line to ``sweeps.jsonl``; a full disk loses it with an error at the end."""
        self.sweep = dict(record)
        try:
            append_sweep_record(self.out, record)
        except OSError as error:
            self.file_not_written(error)

    def prepay_reused(self) -> None:
        """Count the spend of the rows this sweep may reuse before any cell starts (``BudgetTally.prepay``)."""
        self.tally.prepay(self.reusable.values(), self.arm_order)
        if self.tally.limits.is_set:
            self.write_budget()

    # -- rows ---------------------------------------------------------------------------------

    def record(self, report: pytest.TestReport) -> RecordedRow | None:
        """Record the cell ``report`` finishes; None for a report that finishes none (not a cell, a teardown)."""
        nodeid = report.nodeid
        if carries_a_cell(report):
            self.progress.adopt(nodeid)
        if not self.progress.awaits(nodeid):
            return None
        pending = getattr(report, "arena_pending", None)
        if pending:
            self.pending[nodeid] = pending
            del report.arena_pending  # kept above, until the cell ends: pytest keeps the report to the end
        data = getattr(report, "arena", None)
        if not data:
            if not report.failed:
                return None
            # Every report that ends a cell carries its outcome; a failed one without it is xdist's
            # stand-in for a worker that died while running the cell (when="???"). Put on the
            # report too, so the terminal shows it as the harness error it is.
            data = crashed(nodeid, self.pending.get(nodeid), str(report.longrepr or ""), report.when).to_json()
            report.arena = data  # type: ignore[attr-defined]
        reused = bool(data.get("reused"))
        with self.deferred():
            try:
                if reused:
                    row = self.writer.record_reused(self.reusable[data["cell_key"]], nodeid)
                else:
                    row = self.writer.record(with_spend_known(CellOutcome.from_json(data)))
            except RowNotWritten as failure:
                recorded = RecordedRow(failure.row, written=False)
                self.unwritten_rows.append(failure)
                self.stop_for(failure.error)
            else:
                recorded = RecordedRow(row, written=True)
                # On disk now: pytest keeps every report to the end, and at 10,000 cells the rows
                # on them would be most of the controller's memory. The terminal needs the status.
                report.arena = shown_on_terminal(data)  # type: ignore[attr-defined]
                self.offsets_of.setdefault(row["instance_id"], []).append(self.writer.offsets[-1])
            if self.progress.finish(nodeid):
                self.instance_finished(recorded.row["instance_id"])
            self.pending.pop(nodeid, None)
            if not reused:  # a reused row's spend was counted at session start
                self.tally.add(recorded.row)
        if self.tally.limits.is_set and not reused:
            self.write_budget()
        return recorded

    def instance_finished(self, instance_id: str) -> None:
        """The last cell of an instance finished: its viewer pages are built now, off the end of the sweep."""
        offsets = self.offsets_of.pop(instance_id, [])
        if not offsets:
            return
        if self.pages is None:
            from ..results.viewer.build import PagesWhileRunning

            self.pages = PagesWhileRunning(self.out, self.arm_order)
        self.pages.instance_finished(offsets)

    def record_unfinished(self) -> None:
        """Cells that started but never finished: recorded as ``interrupted`` (not final)."""
        for nodeid in self.progress.unfinished():
            outcome = interrupted(nodeid, self.pending.get(nodeid))
            with self.deferred():
                try:
                    self.writer.record(outcome)
                except RowNotWritten as failure:
                    self.unwritten_rows.append(failure)
                self.progress.finish(nodeid)

    # -- files --------------------------------------------------------------------------------

    def budget(self) -> dict[str, Any] | None:
        """The sweep's caps and spend, when it has caps (as in ``budget.json``)."""
        return {"run_id": self.run_id, **self.tally.to_json()} if self.tally.limits.is_set else None

    def write_budget(self) -> None:
        path = self.out / BUDGET_NAME
        try:
            write_atomic(path, finite_json(self.budget(), BUDGET_NAME, indent=2, sort_keys=True) + "\n",
                         durable=False)  # rebuilt from the ledger by a resumed sweep
        except OSError as error:
            # The workers read the caps from this file: without it, no cap holds. Stop the sweep.
            self.file_not_written(error)
            self.stop_for(error)
        else:
            self.unwritten_files.pop(str(path), None)

    def cells(self) -> list[CellRecord]:
        """This sweep's rows as the summary reads them, decoded from their ledger lines (``ledger.reader``)."""
        cells = (line_cell(line, f"{self.writer.path} row {number} of run {self.run_id}")
                 for number, line in enumerate(self.writer.lines(), start=1))
        return [cell for cell in cells if cell is not None]

    def summary(self) -> dict[str, Any]:
        """The summary of the rows so far (``final_summary`` once the end of the sweep wrote it)."""
        return self.final_summary or summarize(self.cells(), self.arm_order, self.run_id, self.budget(), self.sweep)

    def write_outputs(self, calibrate: bool) -> list[str]:
        """Predictions, summary and report, calibration: each written whatever became of the others.

        Returns the warnings to show about them.
        """
        notes: list[str] = []
        self.written = [self.writer.path]
        try:
            self.writer.flush()  # the rows on disk before anything made from them
        except OSError as error:
            self.file_not_written(error)
        # The rows are read back from the ledger a line at a time: held whole, 10,000 rows would
        # be the controller's peak memory.
        try:
            this_sweep = write_predictions(self.writer.iter_rows(), self.out)
            self.written += this_sweep
            stale = remove_other_predictions(self.out, this_sweep)
            if stale:
                names = ", ".join(str(path.relative_to(self.out)) for path in stale)
                notes.append(f"removed {names}: an earlier sweep's, of arms or trials not in this one (their rows "
                             "stay in the ledger, under their run ids)")
        except OSError as error:
            self.file_not_written(error)
        # Before the viewer, which shows the calibration's flake rates.
        if calibrate:
            self.calibration = calibration.verdicts(self.rows)
            try:
                path, problem = calibration.write_calibration(self.out, self.calibration, self.run_id)
            except OSError as error:
                self.file_not_written(error)
            else:
                self.written.append(path)
                notes += [problem] if problem else []
        try:
            from ..results.viewer import write_viewer

            cells = self.cells()
            self.final_summary, reports = write_summary_and_report(self.out, cells, self.arm_order, self.run_id,
                                                                   self.budget(), self.sweep)
            self.written += reports
            # The viewer reads rows of its own: with the cells still held, the two were the controller's
            # peak memory at 10,000 cells.
            del cells
            self.written.append(write_viewer(self.out, self.final_summary,
                                             built=self.pages.finish() if self.pages is not None else None))
        except OSError as error:
            self.file_not_written(error)
        return notes

    # -- what could not be written ----------------------------------------------------------

    @property
    def incomplete(self) -> bool:
        """Whether anything of the sweep could not be written."""
        return bool(self.unwritten_rows or self.unwritten_files)

    def stop_for(self, error: OSError) -> None:
        """Stop the sweep after this cell: what it writes cannot be kept."""
        self.stop_reason = self.stop_reason or (f"swe-arena: stopped the sweep: cannot write {error.filename} "
                                                f"({error.strerror or error}); see the error above")

    def file_not_written(self, error: OSError) -> None:
        self.unwritten_files[str(error.filename)] = error

    def not_run_line(self) -> str | None:
        """Why this sweep counts as one that could not run (exit status ``SWEEP_NOT_RUN``), or None."""
        statuses = [row.get("status") for row in self.rows]
        errors = sum(1 for status in statuses if status in NOT_RUN_STATUSES)
        if not statuses or errors <= NOT_RUN_SHARE * len(statuses):
            return None
        return (f"error: {errors} of {len(statuses)} cells were harness or configuration errors (not counted): "
                f"the sweep could not run, exit status {SWEEP_NOT_RUN}; their errors are in the ledger and above")

    def failure_lines(self) -> list[str]:
        """The one error about what could not be written, or nothing."""
        if not self.incomplete:
            return []
        lines = [f"error: swe-arena could not write everything to {self.out}; what was recorded before is intact"]
        if self.unwritten_rows:
            cells = ", ".join(f"{CellName.of_row(failure.row).shown} ({failure.row.get('status')})"
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
