"""The controller's plugin: the sweep's lifetime on the process that owns the out dir.

Registered only where there is no ``workerinput`` (the controller under xdist, or the only
process without it), as pytest-xdist and junitxml register theirs, and fed only by test
reports, so the same sweep gives the same rows with and without ``-n``. Each hook delegates:
the rows to ``records.SweepRecords``, the out dir's owner to ``lock.SweepLock``, what a
resumed sweep reuses to ``resume``, stopping to ``interrupts``, the text to ``results.text``.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import pytest

from ..cache import prune
from ..crossing import terminal_text
from ..files import remove_detached
from ..forkserver import ForkServer
from ..instances.loading import SchemaMemo, missing_repositories, missing_repositories_error
from ..interrupts import forget_sweep_token, forward_interrupt, new_sweep_token, reap_sweep, stop_signals
from ..ledger.chain import ChainBroken, verify_ledger
from ..ledger.lock import SweepLock
from ..ledger.reader import read_ledger
from ..naming import LEDGER_NAME, file_node_path, new_run_id, parse_node_id
from ..results import calibration
from ..results.calibration import failed_instances, read_exclude
from ..results.text import (
    calibrated_only_header,
    calibration_lines,
    cell_teststatus,
    cells_line,
    format_summary,
    misconfigured_lines,
    written_lines,
)
from ..spend.budget import sweep_limits
from ..state import CASE_KEY, ArenaState, hand_to_worker, sweep_cache
from .forecasts import sweep_forecast
from .provenance import sweep_record
from .records import SWEEP_NOT_RUN, SweepRecords
from .resume import reusable_rows, verdicts
from .scheduling import BudgetScheduling
from .terminal import drop_silent_reports
from .workers import LostHosts, is_local_spec, late_reports, pin_worker_rootdir

#: Every this many tests logged, the cells' silent reports leave the terminal reporter (``drop_silent_reports``).
DROP_SILENT_EVERY = 256


class ControllerPlugin:
    """Writes ``ledger.jsonl``, patches, run logs, predictions, ``budget.json`` and ``summary.json``."""

    def __init__(self, config: pytest.Config, state: ArenaState):
        settings = state.settings
        self.config = config
        self.state = state
        if state.sweep_run:
            if settings.calibrated_only:
                state.calibration_failed = failed_instances(settings.out)
            if settings.exclude is not None:
                state.excluded, digest = read_exclude(settings.exclude, settings.sources["exclude"])
                state.subset = {"exclude_file": str(settings.exclude), "sha256": digest, "excluded": state.excluded}
            state.sweep_token = new_sweep_token()
            state.interrupts = stop_signals(state.sweep_token, controller=True)
            state.interrupts.install()
        try:
            verify_ledger(settings.out / LEDGER_NAME)  # before anything is read from it or appended to it
            reusable = reusable_rows(read_ledger(settings.out / LEDGER_NAME)) if settings.resume else {}
        except ChainBroken as error:
            raise pytest.UsageError(f"{settings.sources['out']}: {error}") from None
        state.reuse = verdicts(reusable)
        self.records = SweepRecords(settings.out, new_run_id(), settings.arms, settings.repeat,
                                    sweep_limits(settings, state.suite), reusable, self.deferred)
        # One dict: where this process runs cells too (no -n), a cell reads what the controller counted.
        self.records.tally.misconfigured = state.misconfigured
        self.lock: SweepLock | None = None
        self.interrupted = False
        self.fork_server: ForkServer | None = None
        self.notes: list[str] = []
        #: Set at the end when the sweep could not run (``records.SWEEP_NOT_RUN``): the line that says so.
        self.not_run: str | None = None
        #: Tests whose reports have all been logged (``pytest_runtest_logfinish``).
        self.logged = 0

    def deferred(self) -> AbstractContextManager[None]:
        """Ctrl-C waits while a row is written and counted, so a row on disk is never recorded twice."""
        interrupts = self.state.interrupts
        return interrupts.deferred() if interrupts is not None else nullcontext()

    # -- xdist ------------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: Sequence[Any]) -> None:
        pin_worker_rootdir(config, specs)
        if self.state.settings.worker_start == "fork":
            self.fork_server = ForkServer.start(config, specs, self.note)
        if self.state.sweep_run:
            memo = SchemaMemo(self.state.settings.cache)
            for path in self.state.instance_files():
                memo.check(path)  # once, before any worker collects: those on this host find the files known
            LostHosts.watch(config, self.note)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        note = hand_to_worker(self.state, node.workerinput, local=is_local_spec(node.gateway.spec))
        if note is not None and note not in self.notes:
            self.note(note)

    # The user's --dist mode chooses the scheduler; it is wrapped so that the controller, which counts
    # every row, stops handing out cells once a cap is spent or an arm's configuration failed.
    @pytest.hookimpl(wrapper=True, optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Generator[None, Any, Any]:
        chosen = yield
        if chosen is None or not self.state.sweep_run:
            return chosen
        arms = self.state.suite.arm_specs
        return BudgetScheduling(chosen, self.records.tally, self.turn_away,
                                {name: arms[name].identity for name in self.state.settings.arms if name in arms})

    def turn_away(self, report: pytest.TestReport) -> None:
        """A cell the budget scheduler never handed out: its skipped report goes where every report goes."""
        self.config.hook.pytest_runtest_logreport(report=report)

    # -- the sweep's lifetime -----------------------------------------------------------------

    def pytest_report_header(self) -> list[str]:
        lines = [calibrated_only_header(self.state.calibration_failed)] if self.state.settings.calibrated_only else []
        subset = self.state.subset
        if subset is not None:
            lines.append(f"swe-arena: excluded {len(subset['excluded'])} instance(s) listed in "
                         f"{subset['exclude_file']} (sha256 {subset['sha256'][:12]})")
        return lines

    # trylast: after the cell plugin's sessionstart built the arms. A usage error there ends the
    # session without pytest_sessionfinish, so the lock must not be taken before it.
    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self) -> None:
        if not self.state.sweep_run:
            return
        settings = self.state.settings
        self.lock = SweepLock(self.records.out, self.records.run_id, self.progress, self.state.sweep_token,
                              heartbeat=settings.lock_heartbeat, stale_after=settings.lock_stale)
        takeover = self.lock.acquire()
        if takeover:
            self.note(takeover)
        ledger = self.records.out / LEDGER_NAME
        if not settings.resume and ledger.is_file() and ledger.stat().st_size:
            self.note(f"{self.records.out} holds earlier sweeps ({ledger}): this sweep's rows are added after "
                      "theirs and its outputs replace theirs; --arena-resume reuses their finished cells, or use "
                      "another --arena-out for a sweep of its own")
        self.prune_cache()
        self.records.record_sweep(sweep_record(
            self.config, self.records.run_id, self.records.arm_order, self.state.subset,
            instance_files=[*self.state.settings.instances, *sorted(self.state.named_files)]))
        self.records.prepay_reused()

    def progress(self) -> Mapping[str, Any]:
        return self.records.progress.to_json(self.records.tally)

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
            if exitstatus == pytest.ExitCode.INTERRUPTED or self.interrupted:
                for report in late_reports(session):
                    self.pytest_runtest_logreport(report)
                self.records.record_unfinished()
            if self.fork_server is not None:
                self.fork_server.stop()  # the workers are down: the zygote is no process left behind
            if self.state.sweep_token:
                interrupts = self.state.interrupts
                leftovers = reap_sweep(self.state.sweep_token,
                                       hurry=interrupts.hurried if interrupts is not None else None)
                if leftovers:
                    self.note(f"stopped {len(leftovers)} process(es) the sweep left behind: {leftovers}")
                self.prune_cache()
                shared = sweep_cache(self.state)
                if shared is not None:
                    # What this host's cells shared for the sweep (grades, failed builds): no later sweep's.
                    # A file or two per cell: removed beside the end of the sweep, not in it.
                    remove_detached(shared, self.state.settings.cache)
            if self.records.recorded:
                for note in self.records.write_outputs(self.state.settings.calibrate):
                    self.note(note)
        finally:
            self.release_lock()
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            drop_silent_reports(reporter.stats)
        if self.records.incomplete and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        elif (self.state.settings.calibrate and session.exitstatus == pytest.ExitCode.TESTS_FAILED
              and calibration.all_calibrated(self.records.calibration, self.records.rows)):
            session.exitstatus = pytest.ExitCode.OK  # EMPTY failing is calibration's expected result
        elif session.exitstatus == pytest.ExitCode.TESTS_FAILED and self.records.recorded:
            self.not_run = self.records.not_run_line()
            if self.not_run is not None:
                session.exitstatus = SWEEP_NOT_RUN

    def pytest_unconfigure(self) -> None:
        # The safety net: a session that ended before pytest_sessionfinish (an error in another
        # plugin's sessionstart, say) must not leave a lock behind for the next sweep to take over.
        self.release_lock()
        if self.state.interrupts is not None:
            self.state.interrupts.uninstall()
        forget_sweep_token(self.state.sweep_token)

    def release_lock(self) -> None:
        lock, self.lock = self.lock, None
        if lock is not None:
            lock.release()

    def prune_cache(self) -> None:
        """Keep the cache within --arena-cache-max (at the sweep's start, and at its end once the workers are
        down): a line when something was removed, a note when it is still over (what running cells hold)."""
        settings = self.state.settings
        pruned = prune(settings.cache, settings.cache_max)
        if pruned.after > pruned.max_bytes:
            self.note(pruned.describe())
        elif pruned.removed:
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"swe-arena: {pruned.describe()}")

    def note(self, message: str) -> None:
        """A warning about the sweep itself: shown now and again under the results."""
        self.notes.append(message)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(terminal_text(f"swe-arena: {message}"), yellow=True)

    # -- progress -----------------------------------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.records.progress.collected(session.items)
        self.refresh_lock()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # Every worker sends its own copy of the same ids, and xdist's scheduler keeps each list to
        # the end: interned, the lists share one set of strings (at 10,000 cells, about 1 MiB a worker).
        ids[:] = map(sys.intern, ids)
        first = not self.records.progress.cell_ids
        self.records.progress.collected_by_worker(ids)
        self.refresh_lock()
        if first:
            self.check_repositories(ids)

    def check_repositories(self, ids: Sequence[str]) -> None:
        """Under xdist: the selected rows' repositories are there (a worker's usage error would be an INTERNALERROR)."""
        selected: dict[str, set[str]] = {}
        for nodeid in ids:
            parsed = parse_node_id(nodeid)
            if parsed is not None:
                selected.setdefault(parsed[0], set()).add(parsed[1].instance_id)
        missing: dict[str, str] = {}
        for path in self.state.instance_files():
            chosen = selected.get(file_node_path(path, self.config.rootpath))
            if chosen:
                missing.update((message, where) for message, where in
                               missing_repositories(path, chosen, self.state.settings.repos).items()
                               if message not in missing)
        if missing:
            pytest.exit(missing_repositories_error(missing), returncode=pytest.ExitCode.USAGE_ERROR)

    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        cases = [item.stash[CASE_KEY] for item in items if CASE_KEY in item.stash]
        if not cases:
            return []
        lines = [cells_line(len(cases), sum(1 for case in cases if case.key in self.state.reuse))]
        if self.state.settings.forecast:
            lines += sweep_forecast(config, self.state.settings, cases, self.state.reuse.keys())
        return lines

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.records.progress.start(nodeid)

    # -- rows ---------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)  # before the terminal reporter, which shows a crashed cell's arena status
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        recorded = self.records.record(report)
        if recorded is None:
            return
        if recorded.written:
            self.refresh_lock()
            self.config.hook.pytest_arena_cell_finished(row=recorded.row, config=self.config)

    def refresh_lock(self) -> None:
        """The lock's progress after every cell and once the cells are known (``swe-arena status``), not
        only at the next heartbeat; a failed write is the heartbeat's to report, and the next one retries."""
        if self.lock is not None:
            try:
                self.lock.write()
            except OSError:
                pass

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        # pytest keeps every report to the end of the session: the cells' silent setup and teardown
        # reports go as the sweep goes, or at 10,000 cells they would be most of the controller's memory.
        self.logged += 1
        if self.logged % DROP_SILENT_EVERY == 0:
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                drop_silent_reports(reporter.stats)
        # After the cell's reports are shown: stop the sweep like an interrupt, so no more cells
        # run whose results could not be kept (its cells in flight become interrupted).
        reason, self.records.stop_reason = self.records.stop_reason, None
        if reason is not None:
            pytest.exit(reason, returncode=pytest.ExitCode.INTERRUPTED)

    def pytest_report_teststatus(
        self, report: pytest.TestReport,
    ) -> tuple[str, str, tuple[str, Mapping[str, bool]]] | None:
        data = getattr(report, "arena", None)
        return cell_teststatus(data) if data else None

    # -- the summary --------------------------------------------------------------------------

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        # What a cell reported (its served model, its error) is in these lines: shown without control sequences.
        def write(line: str, **markup: bool) -> None:
            terminalreporter.write_line(terminal_text(line), **markup)

        failure = self.records.failure_lines()
        if self.records.recorded:
            terminalreporter.write_sep("=", "swe-arena results")
            for line in [*format_summary(self.records.summary()), ""]:
                write(line)
            for line in calibration_lines(self.records.calibration) if self.records.calibration else []:
                write(line)
            for message in self.notes:
                write(f"warning: {message}", yellow=True)
            for line in written_lines(self.records.out, self.records.run_id, self.records.written):
                write(line)
        for line in [*failure, *([self.not_run] if self.not_run else [])]:
            write(line, red=True)
        for line in misconfigured_lines(self.records.tally.misconfigured):
            write(line, red=True)
