"""The cell plugin: the hooks of every process that collects and runs cells.

Registered wherever the arena is on: each xdist worker, and the only process without xdist
(where the controller's plugin sits beside it). It builds the sweep's arms, turns instance
files into items (``collection``), deselects uncalibrated instances, and puts each cell's
outcome on the report that finishes it, as plain JSON: all the controller gets of a cell.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import pytest

from ..arms.base import Arm, arm_program, runs_agent
from ..arms.kinds import arm_kinds, build_arms
from ..cell.limits import CellLimits, arm_limits, probe_mechanism
from ..cell.programs import missing_in_sandbox
from ..cell.sandbox import SandboxError, probe_bwrap, resolve_sandbox
from ..instances.selection import in_window
from ..interrupts import stop_signals
from ..ledger.reader import user_properties
from ..naming import CellName, is_instance_file, parse_node_id
from ..outcome import CellOutcome, CellStatus, pending, setup_failed, skipped
from ..settings import Settings
from ..spend.budget import sweep_limits
from ..state import CASE_KEY, OUTCOME_KEY, SHORTCUT_KEY, ArenaState, Case, Shortcut, take_from_controller
from .collection import InstanceFile, check_sources

#: How many cells a worker runs between two sweeps of its terminal reporter's kept reports.
FORGET_EVERY = 256


class CellPlugin:
    """Collects instance files into cells, and reports each cell's outcome."""

    def __init__(self, config: pytest.Config, state: ArenaState):
        self.config = config
        self.state = state
        config.addinivalue_line("markers", "arena: an arena cell (instance x arm x trial)")
        #: Cells this process finished (counted on xdist workers, see ``forget_cell_reports``).
        self.finished = 0
        workerinput = getattr(config, "workerinput", None)
        if workerinput is None and state.sweep_run:
            choose_sandbox(state)
        if workerinput is not None and state.sweep_run:
            take_from_controller(state, workerinput)
            state.interrupts = stop_signals(state.sweep_token, controller=False)
            state.interrupts.install()

    def pytest_sessionstart(self) -> None:
        # A bad arm table is a usage error now, before any cell.
        settings = self.state.settings
        self.state.arms = build_arms(self.state.suite, arm_kinds(self.config), settings.arms,
                                     source=settings.sources["arms"], strict_models=settings.strict_models)
        self.state.limits, self.state.limit_mechanism = arms_cell_limits(settings, self.state.arms)
        choice = self.state.sandbox_choice
        if choice is not None:
            refusal = choice.refuse_agents([name for name, arm in self.state.arms.items() if runs_agent(arm)])
            if refusal is not None:
                raise pytest.UsageError(refusal)
            if choice.mode == "bwrap":
                check_programs(self.state.arms)
        if settings.preflight and self.state.sweep_run and not hasattr(self.config, "workerinput"):
            from ..arms.preflight import preflight_arms  # only a preflighted sweep loads it

            preflight_arms(self.state.arms, Path(self.config.rootpath), settings.sources["preflight"])
        if not any(getattr(arm, "metering", None) is not None for arm in self.state.arms.values()):
            return  # no arm calls a model (GOLD, EMPTY, replay...): the meter's modules are never loaded
        from ..spend.meter.cells import SessionMeter, metered_plans

        plans, problems = metered_plans(self.state.arms, settings.meter)
        if problems:
            raise pytest.UsageError(f"{settings.sources['meter']}: {problems[0]}")
        if plans and self.state.sweep_run:
            self.state.meter = SessionMeter(plans, self.state.suite.prices, self.state.budget_gate,
                                            sweep_limits(settings, self.state.suite), self.state.shared_meter)

    # A wrapper: the proxy stops after every other session finish, xdist's too, which waits
    # for the workers whose cells the controller's proxy meters (also after a Ctrl-C). A worker's
    # terminal reporter is done with the cells' reports before it renders its (unseen) summary.
    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self) -> Generator[None]:
        if hasattr(self.config, "workerinput"):
            forget_cell_reports(self.config)
        try:
            return (yield)
        finally:
            if self.state.meter is not None:
                self.state.meter.stop()

    def pytest_runtest_logfinish(self) -> None:
        if hasattr(self.config, "workerinput"):
            self.finished += 1
            if self.finished % FORGET_EVERY == 0:
                forget_cell_reports(self.config)

    def pytest_report_header(self) -> list[str]:
        lines = [self.state.sandbox_header] if self.state.sandbox_header else []
        lines += limits_header(self.state.limits, self.state.limit_mechanism, self.state.sandbox)
        for name, arm in self.state.arms.items():
            program = arm_program(arm)
            if program is not None:
                lines.append(f"arena arm {name}: {program.named} is {program.path}")
        return lines

    def pytest_unconfigure(self) -> None:
        if hasattr(self.config, "workerinput") and self.state.interrupts is not None:
            self.state.interrupts.uninstall()

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        if is_instance_file(file_path) and self.state.covers(file_path):
            collector: pytest.Collector = InstanceFile.from_parent(parent, path=file_path)
            return collector
        return None

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        deselect_uncalibrated(config, self.state, items)
        interleave_instances(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not hasattr(self.config, "workerinput"):  # a worker's error would be an INTERNALERROR: the controller's
            check_sources(session.items)  # after -k and -m: only the selected rows need their repositories

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        case = item.stash.get(CASE_KEY, None)
        if case is not None and call.when != "teardown":
            attach_outcome(item, case, call.when, report, self.state.settings.repeat)
        return report


def forget_cell_reports(config: pytest.Config) -> None:
    """Drop the cells' reports an xdist worker's terminal reporter keeps: nobody ever sees that reporter.

    A worker sends every report to the controller, which shows them; its own terminal reporter
    writes nowhere, yet it keeps every report to the end and then renders a failure summary that
    scans all of them for each failure: O(failures x cells) in every worker, which at 10,000 cells
    kept the workers past execnet's 5 s grace at exit (it then interrupts them) and grew their memory.
    """
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    stats: MutableMapping[str, list[Any]] = getattr(reporter, "stats", {})
    for reports in stats.values():
        reports[:] = [report for report in reports if parse_node_id(str(getattr(report, "nodeid", ""))) is None]


def arms_cell_limits(settings: Settings, arms: Mapping[str, Arm]) -> tuple[dict[str, CellLimits], str]:
    """Each arm's cell limits (its table over the sweep's options) and this machine's way to enforce them."""
    defaults = CellLimits(settings.memory, settings.pids, settings.disk)
    limits = {name: arm_limits(arm.spec.settings, defaults, arm.spec.origin) for name, arm in arms.items()}
    return limits, probe_mechanism() if any(limit.any for limit in limits.values()) else "rlimit"


def limits_header(limits: Mapping[str, CellLimits], mechanism: str, sandbox: str) -> list[str]:
    """The sweep header's line naming the limits and how they are enforced (none when no arm has limits)."""
    if not any(limit.any for limit in limits.values()):
        return []
    if sandbox != "bwrap":
        return ["arena limits: NOT enforced: they ride on the sandbox, and --arena-sandbox is none"]
    shown = "; ".join(f"{name} {limit.shown()}" for name, limit in limits.items())
    return [f"arena limits: {mechanism} (disk: file-size rlimit and the harness's watch): {shown}"]


def choose_sandbox(state: ArenaState) -> None:
    """Resolve --arena-sandbox once, where the sweep is controlled; workers are handed the answer."""
    settings = state.settings
    try:
        choice = resolve_sandbox(settings.sandbox, probe_bwrap(), settings.sources["sandbox"])
    except SandboxError as error:
        raise pytest.UsageError(str(error)) from None
    state.sandbox, state.sandbox_header, state.sandbox_choice = choice.mode, choice.header(), choice


def check_programs(arms: Mapping[str, Arm]) -> None:
    """Refuse, before any cell, an arm whose program cannot start in its sandbox (checked there, once per arm)."""
    for name, arm in arms.items():
        program = arm_program(arm)
        missing = missing_in_sandbox(program.path) if program is not None else None
        if program is not None and missing is not None:
            raise pytest.UsageError(
                f"arm {name}: its program {program.named!r} resolved to {program.path}, which cannot start in the "
                f"arm's sandbox: the sandbox does not show {missing}. Give the program's real path (a version "
                "manager's shim is followed to it), or install it where the sandbox shows it (docs/threat-model.md)")


def deselect_uncalibrated(config: pytest.Config, state: ArenaState, items: list[pytest.Item]) -> None:
    """With --arena-calibrated-only or --arena-exclude, drop the cells of the instances they name; with
    --arena-created-after / --arena-created-before, those of the instances created outside the window."""
    failed = set(state.calibration_failed) | set(state.excluded)
    after, before = state.settings.created_after, state.settings.created_before
    if not failed and after is None and before is None:
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        case = item.stash.get(CASE_KEY, None)
        out = case is not None and (case.instance.instance_id in failed
                                    or not in_window(case.instance.row, after, before))
        (drop if out else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def interleave_instances(items: list[pytest.Item]) -> None:
    """Run order: every instance's first cell before any instance's second, then round by round.

    Cells are ordered by trial, then arm (in ``--arena-arms`` order), then instance (in collection
    order): ``A[GOLD-r1], B[GOLD-r1], A[EMPTY-r1], B[EMPTY-r1], A[GOLD-r2], ...``. So the first cells
    xdist hands out are of different instances: each worker builds a different instance's environment
    template instead of waiting on the lock of the one another worker is building, and the cells with
    the same patch (GOLD's trials) are apart, not waiting on each other's grading run. Deterministic
    (the same on every worker, as xdist checks); other items keep their places.
    """
    places = [index for index, item in enumerate(items) if CASE_KEY in item.stash]
    if not places:
        return
    instances: dict[str, int] = {}
    arms: dict[str, int] = {}
    for index in places:
        case = items[index].stash[CASE_KEY]
        instances.setdefault(case.instance.instance_id, len(instances))
        arms.setdefault(case.arm.spec.name, len(arms))

    def order(item: pytest.Item) -> tuple[int, int, int]:
        case = item.stash[CASE_KEY]
        return case.trial, arms[case.arm.spec.name], instances[case.instance.instance_id]

    for index, item in zip(places, sorted((items[index] for index in places), key=order), strict=True):
        items[index] = item


def attach_outcome(item: pytest.Item, case: Case, when: str, report: pytest.TestReport, repeat: int) -> None:
    """Put the cell's outcome on the report that finishes it, as plain JSON.

    A successful setup report carries the row to write should the cell never
    finish (``arena_pending``, status ``interrupted``); a reused cell's call
    report carries only its cell key, the controller holds its recorded row.
    """
    shortcut = item.stash.get(SHORTCUT_KEY, Shortcut())
    if shortcut.reused is not None:
        if when == "call":
            verdict = shortcut.reused
            report.arena = {"reused": True, "cell_key": case.key, "status": verdict["status"]}  # type: ignore[attr-defined]
            _add_user_properties(item, report, user_properties(verdict["status"], verdict.get("usage"),
                                                               verdict.get("patch_file")))
        return
    outcome: CellOutcome | None
    if shortcut.skipped is not None:
        status = CellStatus.SKIPPED_CONFIG if shortcut.halted else CellStatus.SKIPPED_BUDGET
        outcome = skipped(case, item.nodeid, status, shortcut.skipped)
    elif when == "setup" and report.passed:
        report.arena_pending = pending(case, item.nodeid).to_json()  # type: ignore[attr-defined]
        return
    else:
        outcome = item.stash.get(OUTCOME_KEY, None) if when == "call" else None
        if outcome is None:
            if not report.failed:
                return
            outcome = setup_failed(case, item.nodeid, when, _failure_text(report))
    report.arena = outcome.to_json()  # type: ignore[attr-defined]
    patch_file = (CellName(outcome.instance_id, outcome.arm, outcome.trial).patch_file(repeat)
                  if outcome.patch_scored else None)
    _add_user_properties(item, report, user_properties(outcome.status, outcome.usage, patch_file))


def _add_user_properties(item: pytest.Item, report: pytest.TestReport, properties: list[tuple[str, Any]]) -> None:
    # On the item too: the teardown report, which --junitxml reads, is built from the item.
    report.user_properties.extend(properties)
    item.user_properties.extend(properties)


def _failure_text(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    return text.removeprefix("Failed: ").removeprefix("harness_error: ")
