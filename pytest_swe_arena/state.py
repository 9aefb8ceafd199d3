"""Session state kept in ``config.stash`` / ``item.stash`` (never module globals), on both sides.

``open_state`` makes a session's ``ArenaState`` once the arena is enabled: the suite, the env
specs, what the session collects, the budget gate. What the controller hands its xdist
workers travels in ``workerinput`` (``hand_to_worker`` / ``take_from_controller``). A ``Case``
is what one item stands for: an instance, an arm, a trial.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pytest

from .instances.specs import EnvSpecsError, load_env_specs
from .naming import is_instance_file
from .outcome import cell_key
from .settings import CollectionCaps
from .spend.budget import budget_gate
from .suite import load_suite

if TYPE_CHECKING:
    from .arms.base import Arm
    from .cell.limits import CellLimits
    from .cell.sandbox import SandboxChoice
    from .instances.model import Instance
    from .interrupts import InterruptSignals
    from .outcome import CellOutcome
    from .settings import Settings
    from .spend.budget import BudgetGate
    from .spend.meter.cells import SessionMeter
    from .suite import Suite


class ReuseVerdict(TypedDict):
    """What a worker needs to report a cell a resumed sweep reuses (plain JSON: it travels in ``workerinput``)."""

    status: str
    error: str | None
    run_id: str | None
    usage: Mapping[str, Any] | None
    patch_file: str | None


@dataclass
class ArenaState:
    """Per-session arena state, on both the controller and the workers."""

    settings: Settings
    suite: Suite
    arms: dict[str, Arm] = field(default_factory=dict)
    #: instance_id -> "file:line" where it was first defined (duplicates across files).
    instance_ids: dict[str, str] = field(default_factory=dict)
    #: True when this session runs cells (not, say, ``pytest tests`` in a suite's repository).
    sweep_run: bool = False
    #: With --arena-resume: cell_key -> what a worker needs to report a reused cell (see
    #: ``controller.resume.verdicts``); made by the controller, sent to workers in ``workerinput``.
    #: Cells whose key is here are not run again.
    reuse: dict[str, ReuseVerdict] = field(default_factory=dict)
    #: Random token (not the run id) made by the controller and inherited by every process of
    #: this sweep, so an interrupt can find and stop them (``interrupts.reap_sweep``).
    sweep_token: str = ""
    #: Reads the controller's budget.json before each cell (None when no budget is set, and on
    #: workers of other hosts: there the controller's scheduler alone holds the budget).
    budget_gate: BudgetGate | None = None
    #: Arms whose configuration failed so far, each with its row's error (``BudgetTally.misconfigured``): the
    #: controller's, read before each cell where the controller runs cells too (no ``-n``); with workers, the
    #: controller's scheduler hands their cells out no more.
    misconfigured: dict[str, str] = field(default_factory=dict)
    #: The metering proxy of this process's cells (None when no arm is metered).
    meter: SessionMeter | None = None
    #: On a worker of the controller's host: the sweep's metering proxy, as the controller handed it
    #: (``SessionMeter.share``: its address and control secret, or why it did not start).
    shared_meter: dict[str, str] | None = None
    interrupts: InterruptSignals | None = None
    #: (repo, version) -> env spec, from --arena-env-specs.
    env_specs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: With --arena-calibrated-only: ids that failed calibration (deselected).
    calibration_failed: list[str] = field(default_factory=list)
    #: With --arena-exclude: the ids the file lists (deselected), and the subset the sweep records.
    excluded: list[str] = field(default_factory=list)
    subset: dict[str, Any] | None = None
    #: What every cell's arm and grading run in: "bwrap" or "none" (resolved from --arena-sandbox on the
    #: controller, handed to workers), and the sweep header's line saying so.
    sandbox: str = "none"
    sandbox_header: str = ""
    #: The controller's answer to --arena-sandbox (None on workers): it may refuse the arms (``refuse_agents``).
    sandbox_choice: SandboxChoice | None = None
    #: Each arm's cell limits (``cell.limits``: its table over --arena-memory/-pids/-disk), and how this machine
    #: enforces them ("cgroup-v2", "cgroup-v1", "rlimit"), probed by each process on the host it runs cells on.
    limits: dict[str, CellLimits] = field(default_factory=dict)
    limit_mechanism: str = "rlimit"
    #: Instance files given as test paths (``pytest mine.jsonl``): collected like --arena-instances.
    named_files: frozenset[Path] = frozenset()

    def claim_instance_id(self, instance_id: str, where: str) -> str | None:
        """Record where an id is defined; return the earlier place if it was already taken."""
        first = self.instance_ids.setdefault(instance_id, where)
        return first if first != where else None

    def instance_files(self) -> list[Path]:
        """The instance files of the sweep, as collection will find them (hidden directories skipped)."""
        found: set[Path] = set(self.named_files)
        for root in self.settings.instances:
            if root.is_file():
                found.add(root)
            elif root.is_dir():
                found.update(path for path in root.rglob("*") if is_instance_file(path) and path.is_file()
                             and not any(part.startswith(".") for part in path.relative_to(root).parts))
        return sorted(found)

    def covers(self, path: Path) -> bool:
        """Whether ``path`` is an instance file of the sweep: configured, under a configured dir, or named."""
        return path in self.named_files or any(path == root or root in path.parents
                                               for root in self.settings.instances)


@dataclass(frozen=True)
class CellSettings:
    """The settings every cell of a session runs with: made once per instance file (``cell_settings``) and
    shared by reference from each of its ``Case``s. Where a setting enters a cell: this, and ``Case``."""

    verify_on: str
    verify_timeout: float
    #: The xdist worker id ("gw0"...) or "controller" when running in one process.
    worker: str
    strict_models: bool = False
    #: The shared cache (mirrors, resolved environments, uv's packages).
    cache: Path | None = None
    #: --arena-cache-max: the cache's budget, kept after each build (None: never pruned by the cell).
    cache_max: int | None = None
    #: Container engine for image-backed instances.
    engine: str = "docker"
    #: "bwrap": the arm's processes and the graded tests run in the cell's sandbox; "none": unsandboxed.
    sandbox: str = "none"
    #: How a SWE-bench runner's results are graded (a name in ``grading.rules.RULE_SETS``).
    grading_rules: str = "swebench"
    #: What of the run dir reaches the out dir, and the largest patch kept (--arena-run-dir-max-bytes...).
    caps: CollectionCaps = CollectionCaps()
    #: Where this sweep's harness keeps what its cells share on this host (``sweep_cache``): the grading runs
    #: of identical patches (``grading.shared``), failed environment builds. None: nothing is shared.
    sweep_cache: Path | None = None
    #: --arena-grade-every-cell: every cell grades its patch in a run of its own, none shares another's.
    grade_every_cell: bool = False
    #: The suite's price table (``[tool.swe_arena.prices]``): what an agent's reported cost is checked against.
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: The mechanism that enforces the cells' limits ("cgroup-v2", "cgroup-v1", "rlimit").
    limit_mechanism: str = "rlimit"

    @property
    def sandboxed(self) -> bool:
        return self.sandbox == "bwrap"


def cell_settings(state: ArenaState, worker: str) -> CellSettings:
    """The session's settings for its cells, from its ``Settings``, its suite and what the session probed."""
    settings = state.settings
    return CellSettings(
        verify_on=settings.verify_on, verify_timeout=settings.verify_timeout, worker=worker,
        strict_models=settings.strict_models, cache=settings.cache, cache_max=settings.cache_max,
        engine=settings.engine, sandbox=state.sandbox,
        grading_rules=settings.grading_rules, caps=settings.caps, sweep_cache=sweep_cache(state),
        grade_every_cell=settings.grade_every_cell, prices=state.suite.prices, limit_mechanism=state.limit_mechanism,
    )


@dataclass(frozen=True)
class Case:
    """What one pytest item stands for: an instance, an arm, a trial; the session's settings, and its arm's."""

    instance: Instance
    arm: Arm
    trial: int
    settings: CellSettings
    #: The session's meter when this cell's arm is metered.
    meter: SessionMeter | None = None
    #: The arm's cell limits (``cell.limits.CellLimits``; None: none).
    limits: CellLimits | None = None

    @property
    def enforced_limits(self) -> CellLimits | None:
        """The cell's limits when any is set; None when there is nothing to enforce."""
        return self.limits if self.limits is not None and self.limits.any else None

    @cached_property
    def key(self) -> str:
        # The default rules keep the keys cells had before the option existed.
        verify_on, rules = self.settings.verify_on, self.settings.grading_rules
        graded = verify_on if rules == "swebench" else f"{verify_on}+{rules}"
        return cell_key(self.instance.content_sha256, self.arm.spec.identity, graded, self.trial)


@dataclass(frozen=True)
class Shortcut:
    """Why an item is not run: reused (its earlier final row's verdict) or skipped (a spent budget, or its arm's
    configuration failed: ``halted``)."""

    reused: ReuseVerdict | None = None
    skipped: str | None = None
    halted: bool = False


def sweep_cache(state: ArenaState) -> Path | None:
    """This sweep's folder in the shared cache, which no sandbox shows (None outside a sweep)."""
    return state.settings.cache / "sweeps" / state.sweep_token if state.sweep_token else None


STATE_KEY = pytest.StashKey[ArenaState]()
CASE_KEY = pytest.StashKey[Case]()
# Annotated rather than subscripted: the type exists only for the type checker (import cycle).
OUTCOME_KEY: pytest.StashKey[CellOutcome] = pytest.StashKey()
PHASES_KEY = pytest.StashKey[dict[str, float]]()
STARTED_KEY = pytest.StashKey[str]()
#: Set on an item that is not run.
SHORTCUT_KEY = pytest.StashKey[Shortcut]()


def open_state(config: pytest.Config, settings: Settings) -> ArenaState:
    """Load the suite and set up this session's arena state (the arena is enabled)."""
    suite = load_suite(settings.config_file, settings.arena_table)
    state = ArenaState(settings=settings, suite=suite)
    if settings.env_specs is not None:
        try:
            state.env_specs = load_env_specs(settings.env_specs)
        except EnvSpecsError as error:
            raise pytest.UsageError(f"{settings.sources['env-specs']}: {error}") from None
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        # With no paths on the command line, a sweep collects its instance paths.
        existing = [str(path) for path in settings.instances if path.exists()]
        if existing:
            config.args = existing
    state.named_files = named_instance_files(config)
    state.sweep_run = is_sweep_run(config, state)
    if state.sweep_run:
        state.budget_gate = budget_gate(settings, suite)
    return state


def named_instance_files(config: pytest.Config) -> frozenset[Path]:
    """Instance files given as test paths (``pytest mine.jsonl``): each is a sweep of that file.

    Spelled as pytest spells the paths it collects (absolute, symlinks kept), so that
    ``ArenaState.covers`` recognises them in ``pytest_collect_file``.
    """
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        return frozenset()
    paths = (Path(os.path.abspath(config.invocation_params.dir / arg.split("::")[0])) for arg in config.args)
    return frozenset(path for path in paths if is_instance_file(path) and path.is_file())


def is_sweep_run(config: pytest.Config, state: ArenaState) -> bool:
    """Whether this session collects instance files (so it runs cells and owns the out dir)."""
    if config.option.collectonly:
        return False
    if state.named_files:
        return True
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if state.covers(path) or any(path in root.parents for root in state.settings.instances):
            return True
    return False


def hand_to_worker(state: ArenaState, workerinput: dict[str, Any], local: bool) -> str | None:
    """The controller's side of xdist: what every worker needs from the controller.

    :param local: the worker runs on the controller's host, so it sees the controller's
        ``budget.json`` and reads it before each cell (a worker elsewhere has only the
        controller's scheduler to hold the budget, see ``controller.scheduling``).
    :returns: a note for the user when this worker cannot use the sweep's metering proxy.
    """
    if not state.sweep_run:
        return None
    workerinput["arena_budget_file"] = local
    workerinput["arena_reuse"] = state.reuse
    workerinput["arena_sweep_token"] = state.sweep_token
    workerinput["arena_calibration_failed"] = state.calibration_failed
    workerinput["arena_excluded"] = state.excluded
    workerinput["arena_sandbox"] = state.sandbox
    if state.meter is None:
        return None
    listen = state.settings.meter_listen
    if not local and listen is None:
        return ("--arena-meter-listen is not set, so workers on other hosts meter their cells with a proxy of "
                "their own: the sweep's and arms' totals hold there between cells (the controller's scheduler "
                "starts no cell once a cap is spent), not call by call; give --arena-meter-listen an address of "
                "this machine that the hosts reach")
    from .spend.meter.accounts import MeterError  # the meter's modules load only for a metered sweep

    # One proxy for the sweep's cells, so its totals hold over all of them at once.
    try:
        workerinput["arena_meter"] = state.meter.share(listen)
    except MeterError as error:
        workerinput["arena_meter"] = {"error": f"the sweep's metering proxy did not start: {error}"}
    return None


def take_from_controller(state: ArenaState, workerinput: Mapping[str, Any]) -> None:
    """A worker's side of xdist: what its controller handed it (see ``hand_to_worker``)."""
    state.reuse = workerinput.get("arena_reuse", {})
    if not workerinput.get("arena_budget_file"):
        # A budget.json on another host, if any, is not this sweep's.
        state.budget_gate = None
    state.sweep_token = workerinput.get("arena_sweep_token", "")
    state.calibration_failed = workerinput.get("arena_calibration_failed", [])
    state.excluded = workerinput.get("arena_excluded", [])
    state.sandbox = workerinput.get("arena_sandbox", "none")
    state.shared_meter = workerinput.get("arena_meter")
