"""Sweep-level glue behind the hooks in ``plugin.py``.

Configuring the arena (settings, suite, arms), attaching each cell's outcome
to its test report, and showing arena statuses in pytest's terminal output.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from ..arms.base import ArmKind
from ..instances.specs import EnvSpecsError, load_env_specs
from ..interrupts import SWEEP_TOKEN_VARIABLE, InterruptSignals, forward_interrupt, hurry_sweep
from ..naming import CellName, is_instance_file
from ..outcome import STATUSES
from ..results.calibration import failed_instances
from ..results.summary import user_properties
from ..settings import Settings
from ..spend.budget import BUDGET_FILE, BudgetGate
from ..state import CASE_KEY, OUTCOME_KEY, SHORTCUT_KEY, STATE_KEY, ArenaState
from ..suite import Suite, build_arms, load_suite
from .pipeline import base_outcome


def configure_arena(config: pytest.Config, settings: Settings) -> ArenaState:
    """Load the suite and set up this session's arena state (the arena is enabled)."""
    suite = load_suite(settings.config_file, settings.arena_table)
    state = ArenaState(settings=settings, suite=suite)
    if settings.env_specs is not None:
        try:
            state.env_specs = load_env_specs(settings.env_specs)
        except EnvSpecsError as error:
            raise pytest.UsageError(f"{settings.sources['env-specs']}: {error}") from None
    config.stash[STATE_KEY] = state
    config.addinivalue_line("markers", "arena: an arena cell (instance x arm x trial)")
    from . import fixtures

    config.pluginmanager.register(fixtures, "swe-arena-fixtures")
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        # With no paths on the command line, a sweep collects its instance paths.
        existing = [str(path) for path in settings.instances if path.exists()]
        if existing:
            config.args = existing
    state.named_files = named_instance_files(config)
    state.sweep_run = is_sweep_run(config, state)
    if not state.sweep_run:
        return state
    budgets = budget_sources(settings, suite)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        state.reuse = workerinput.get("arena_reuse", {})
        state.sweep_token = workerinput.get("arena_sweep_token", "")
        state.calibration_failed = workerinput.get("arena_calibration_failed", [])
    else:
        check_budgets_have_local_workers(config, budgets)
        if settings.calibrated_only:
            state.calibration_failed = failed_instances(settings.out)
        state.sweep_token = uuid.uuid4().hex
        # Inherited by xdist workers and every process they start (see guard.reap_sweep).
        os.environ[SWEEP_TOKEN_VARIABLE] = state.sweep_token
    if settings.max_usd is not None or settings.max_tokens is not None or suite.arm_limits:
        state.budget_gate = BudgetGate(settings.out / BUDGET_FILE)
    state.interrupts = stop_signals(state.sweep_token, controller=workerinput is None)
    state.interrupts.install()
    return state


def stop_signals(sweep_token: str, controller: bool) -> InterruptSignals:
    """The sweep's SIGINT/SIGTERM handling: a second signal kills the agents at once.

    The controller also passes the hurry on to its workers. Only workers see one Ctrl-C twice
    (from the terminal and from the controller), so only they count a quick repeat once.
    """
    def hurry() -> None:
        if controller:
            forward_interrupt(sweep_token)
        hurry_sweep(sweep_token)

    return InterruptSignals(hurry, repeat_window=0.0 if controller else InterruptSignals.REPEAT_WINDOW)


def budget_sources(settings: Settings, suite: Suite) -> list[str]:
    """Where each budget of this sweep is set (empty when the sweep has none)."""
    sources = [settings.sources[noun] for noun, value in (("max-usd", settings.max_usd),
                                                          ("max-tokens", settings.max_tokens))
               if value is not None]
    sources += [f"{suite.arm_specs[name].origin} max_total_*" for name in settings.arms if name in suite.arm_limits]
    return sources


def is_local_gateway(spec: str) -> bool:
    """Whether an xdist ``--tx`` spec starts its worker on this host (``popen`` without ``via``)."""
    keys = {part.split("=", 1)[0] for part in spec.split("*", 1)[-1].split("//")}
    return "popen" in keys and "via" not in keys


def check_budgets_have_local_workers(config: pytest.Config, budgets: list[str]) -> None:
    """Refuse budgets with remote xdist workers: each would read budget.json from its own host.

    The controller writes the spend totals to budget.json in its out dir and every worker reads
    that file before a cell starts, so the caps hold only for workers that see the same file.
    """
    if not budgets:
        return
    remote = [spec for spec in config.getoption("tx", None) or [] if not is_local_gateway(spec)]
    if remote:
        raise pytest.UsageError(
            f"--tx {remote[0]}: the budget set by {budgets[0]} needs local workers (--tx popen or -n N): "
            "workers read the controller's budget.json before each cell, which a worker on another host "
            "cannot see, so no cap would hold; run the budgeted sweep with local workers, or drop the budget"
        )


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


def unconfigure_arena(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None:
        return
    if state.interrupts is not None:
        state.interrupts.uninstall()
    if os.environ.get(SWEEP_TOKEN_VARIABLE) == state.sweep_token and not hasattr(config, "workerinput"):
        del os.environ[SWEEP_TOKEN_VARIABLE]


def pin_worker_rootdir(config: pytest.Config, specs: Sequence[Any]) -> None:
    """Start xdist workers on this host with the controller's rootdir and ini file.

    xdist gives each worker the controller's command line, and the worker redoes pytest's
    rootdir choice from it, at a later time: a path on that line that did not exist when the
    controller started (an out dir it created since) can make the worker choose another
    rootdir, read another ini file, and collect something else. ``--rootdir`` and ``-c`` in
    front of the command line (where the user's own, if any, still win) make the choice the
    controller's. Workers on other hosts (or in another directory) keep their own choice.
    """
    if not specs or not all(spec.popen and not spec.chdir and not spec.via for spec in specs):
        return
    pinned = [f"--rootdir={config.rootpath}"]
    if config.inipath is not None:
        pinned.append(f"--config-file={config.inipath}")
    params = config.invocation_params
    config.invocation_params = dataclasses.replace(params, args=(*pinned, *params.args))


def configure_worker_node(config: pytest.Config, workerinput: dict[str, Any]) -> None:
    """Controller side of xdist: what every worker needs from the controller."""
    state = config.stash.get(STATE_KEY, None)
    if state is not None and state.sweep_run:
        workerinput["arena_reuse"] = state.reuse
        workerinput["arena_sweep_token"] = state.sweep_token
        workerinput["arena_calibration_failed"] = state.calibration_failed


def deselect_uncalibrated(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --arena-calibrated-only, drop the cells of instances that failed calibration."""
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.calibration_failed:
        return
    failed = set(state.calibration_failed)
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        case = item.stash.get(CASE_KEY, None)
        (drop if case is not None and case.instance.instance_id in failed else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def report_header(config: pytest.Config) -> list[str]:
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.settings.calibrated_only:
        return []
    failed = state.calibration_failed
    names = f": {', '.join(failed[:10])}{' ...' if len(failed) > 10 else ''}" if failed else ""
    return [f"swe-arena: calibrated only: {len(failed)} instance(s) failed calibration and are deselected{names}"]


def arm_kinds(config: pytest.Config) -> dict[str, ArmKind]:
    """Every kind contributed through ``pytest_arena_arm_kinds``; a kind defined twice is an error."""
    kinds: dict[str, ArmKind] = {}
    provider: dict[str, str] = {}
    # Each implementation is called on its own (in pluggy's call order) to know who gave what.
    for impl in reversed(config.hook.pytest_arena_arm_kinds.get_hookimpls()):
        if impl.hookwrapper or impl.wrapper:
            continue
        contribution = cast("Mapping[str, ArmKind]", impl.function() or {})
        for name, kind in contribution.items():
            if name in kinds and kinds[name] is not kind:
                raise pytest.UsageError(
                    f"arm kind {name!r} is provided by two plugins, {provider[name]} and {impl.plugin_name}; "
                    "rename it in one of them"
                )
            kinds[name] = kind
            provider.setdefault(name, impl.plugin_name)
    return kinds


def build_session_arms(config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is not None:
        settings = state.settings
        state.arms = build_arms(state.suite, arm_kinds(config), settings.arms, source=settings.sources["arms"],
                                strict_models=settings.strict_models)


def attach_outcome(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """Put the cell's outcome on the report that finishes it, as plain JSON.

    A successful setup report carries the row to write should the cell never
    finish (``arena_pending``, status ``interrupted``); a reused cell's call
    report carries only its cell key, the controller holds its recorded row.
    """
    case = item.stash.get(CASE_KEY, None)
    if case is None or call.when == "teardown":
        return
    shortcut = item.stash.get(SHORTCUT_KEY, {})
    if "reused" in shortcut:
        if call.when == "call":
            verdict = shortcut["reused"]
            report.arena = {"reused": True, "cell_key": case.key, "status": verdict["status"]}  # type: ignore[attr-defined]
            properties = user_properties(verdict["status"], verdict.get("usage"), verdict.get("patch_file"))
            _add_user_properties(item, report, properties)
        return
    if "skipped" in shortcut:
        outcome = base_outcome(case, item.nodeid, "skipped_budget", shortcut["skipped"])
    elif call.when == "setup" and report.passed:
        pending = base_outcome(case, item.nodeid, "interrupted", "interrupted before the cell finished")
        report.arena_pending = pending.to_json()  # type: ignore[attr-defined]
        return
    else:
        finished = item.stash.get(OUTCOME_KEY, None) if call.when == "call" else None
        if finished is None:
            if not report.failed:
                return
            # A fixture or the harness itself failed: a harness error, never the arm's fault.
            message = _failure_text(report)
            finished = base_outcome(case, item.nodeid, "harness_error", f"{call.when}: {message}")
        outcome = finished
    report.arena = outcome.to_json()  # type: ignore[attr-defined]
    repeat = item.config.stash[STATE_KEY].settings.repeat
    patch_file = (CellName(outcome.instance_id, outcome.arm, outcome.trial).patch_file(repeat)
                  if outcome.patch_scored else None)
    _add_user_properties(item, report, user_properties(outcome.status, outcome.usage, patch_file))


def _add_user_properties(item: pytest.Item, report: pytest.TestReport, properties: list[tuple[str, object]]) -> None:
    # On the item too: the teardown report, which --junitxml reads, is built from the item.
    report.user_properties.extend(properties)
    item.user_properties.extend(properties)


def _failure_text(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    return text.removeprefix("Failed: ").removeprefix("harness_error: ")


def arena_teststatus(report: pytest.TestReport) -> tuple[str, str, tuple[str, Mapping[str, bool]]] | None:
    """Show arena statuses: harness errors count as errors, failures name their status."""
    data = getattr(report, "arena", None)
    if not data:
        return None
    status = data["status"]
    category = STATUSES[status][0]
    letter = {"passed": ".", "failed": "F", "error": "E", "skipped": "s"}[category]
    colour = {"passed": "green", "skipped": "yellow"}.get(category, "red")
    word = status.upper() + (" (reused)" if data.get("reused") else "")
    return category, letter, (word, {colour: True})
