"""One cell, after its fixtures, in phases: environment -> meter -> arm -> spend -> patch -> grade.

Each phase is a small function that returns what the next continues with, or the cell's ``Verdict``.
What can go wrong in each, and the status it gives (the line between a failing arm, counted, and a
failing harness, not counted and run again on resume), is one table: ``attribution.FAULTS``. Grading
itself is ``grading.verify``'s.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .. import crossing
from ..arms.base import ArmError, ArmResult, ArmStartError, CellRequest, runs_agent
from ..arms.misconfig import NO_FAILURES, tail_lines
from ..cache import process_leases
from ..cell.environment import CellEnvironment
from ..cell.git import ExtractionError, HarnessGit, OutputOverCap, WorkspaceError
from ..cell.limits import LimitGroup
from ..cell.network import CellGate, CellNetwork, GradingNetwork, agent_network, grading_network, open_gate
from ..cell.patches import commit_environment_setup, excluded_details, excluded_from_workspace, extract, extract_patch
from ..cell.rundir import collect_run_dir, patch_over_cap
from ..cell.sandbox import CellSandbox, Sandbox, cell_policy, program_mounts_outside
from ..cell.templates import EnvironmentTemplate, instance_template
from ..cell.venvs import EnvBuildError, EnvironmentStore, EnvSpec, PythonEnvironment
from ..cell.workspace import Workspace
from ..grading.integrity import IntegrityFlag, cell_record
from ..grading.rules import RULE_SETS
from ..grading.shared import SharedGrade, SharedPatchRejected, grade_key, grade_once
from ..grading.tree import (
    PatchRejected,
    TestPatchRejected,
    fresh_tree_grading,
    grade_on_fresh_tree,
    integrity_details,
)
from ..grading.verify import (
    ContainerHost,
    VerifyInfrastructureError,
    VerifyResult,
    graded_status,
    repo_runner,
    run_verify,
)
from ..naming import CellName
from ..outcome import ArmStatus, CellOutcome, CellStatus, CostSource, finished, started
from ..spend.plausible import checked_costs
from ..spend.prices import price_for_served, same_model
from ..spend.usage import Usage, accounting_errors, checked_spend
from ..state import Case
from ..transcripts.atif import ATIF_FILE, AgentIdentity, write_trajectory
from .attribution import (
    ARM_ENDED,
    ARM_FAILED,
    ARM_NOT_STARTED,
    ARM_RAISED,
    ARM_TIMED_OUT,
    ENV_BUILD,
    EXTRACTION_SEED,
    GRADE_TIMED_OUT,
    GRADING_BROKE,
    LIMIT_PASSED,
    LIMITS_NOT_SET,
    METER_CLOSE,
    METER_OPEN,
    MISCONFIGURED,
    MODEL_MISMATCH,
    OVER_BUDGET,
    PATCH_OVER_CAP,
    PATCH_REJECTED,
    PATCH_UNREADABLE,
    Fault,
)
from .health import check_health, health_passed, unreachable_server

if TYPE_CHECKING:
    from ..spend.meter.accounts import CellRoute
from .swebench_envs import shipped_env_spec

#: The harness's own files of a run dir: collected first, so a flood of the agent's files cannot crowd them out.
HARNESS_LOGS = ("verify.log", "env.log", "verify-junit.xml")


def run_cell(
    case: Case,
    nodeid: str,
    cell: CellEnvironment,
    workspace: Workspace,
    phases: Mapping[str, float],
    started_at: str,
    remove: Callable[[Path], None] | None = None,
) -> CellOutcome:
    """Run the arm and grade its patch. Never raises for arm or harness failures.

    Beside the cell's root (outside anything its sandbox shows) the harness keeps what the arm
    must not reach: its git dir for extraction and the fresh grading tree; removed afterwards.

    :param remove: how that folder is removed once the cell is done (the worker's ``DirectoryRemover``,
        off the cells' path); at once when not given.
    """
    harness = Path(tempfile.mkdtemp(prefix=f"{cell.root.name}-harness-", dir=cell.root.parent))
    try:
        return _run_cell(case, nodeid, cell, workspace, phases, started_at, harness)
    finally:
        process_leases().release()  # what the cell held of the cache (its snapshot, template...) may be evicted
        if remove is None:
            shutil.rmtree(harness, ignore_errors=True)
        else:
            remove(harness)


def _run_cell(case: Case, nodeid: str, cell: CellEnvironment, workspace: Workspace, phases: Mapping[str, float],
              started_at: str, harness: Path) -> CellOutcome:
    timings = dict(phases)
    verdict = cell_phases(case, cell, workspace, harness, timings, started(case, nodeid, started_at))
    return finish(verdict, case, cell.run_dir, workspace, harness, timings)


@dataclass(frozen=True)
class Verdict:
    """How a cell ended: its row so far, its status and why."""

    outcome: CellOutcome
    status: CellStatus
    error: str | None


def stop(fault: Fault, outcome: CellOutcome, error: str | None, ending: CellStatus | None = None) -> Verdict:
    """The cell ends on ``fault`` (``attribution.FAULTS`` says with which status)."""
    return Verdict(outcome, fault.status_after(ending), error)


@dataclass(frozen=True)
class Setup:
    """What the environment phase leaves the others."""

    case: Case
    #: The cell, with its venv's variables; its workspace, with what the environment's steps changed committed.
    cell: CellEnvironment
    workspace: Workspace
    #: Beside the cell's root, what the arm must not reach: the harness's git dir, the fresh grading tree.
    harness: Path
    timings: dict[str, float]
    #: The instance's commit, and the base the patch is taken against (None: no snapshot, an image's /testbed).
    original_base: str
    extraction_base: str | None
    #: The graded tests' network (``details.network.grading``).
    grading: GradingNetwork
    python_env: PythonEnvironment | None = None
    template: EnvironmentTemplate | None = None


@dataclass(frozen=True)
class ArmRun:
    """What the arm phase leaves: the arm's result (its ending set by what went wrong) and the cell's networks."""

    result: ArmResult
    network: CellNetwork
    gate: CellGate | None
    route: CellRoute | None


@dataclass(frozen=True)
class Spent:
    """What the spend phase leaves: the row with the arm's spend and models, and what the patch phase needs."""

    outcome: CellOutcome
    result: ArmResult
    mismatch: bool
    #: What the harness refused at the crossing after the arm, and a reported cost its tokens cannot explain.
    cell_flags: tuple[IntegrityFlag, ...]


@dataclass(frozen=True)
class Patched:
    """What the patch phase leaves for grading: the row with the patch, and the nested repositories it holds."""

    outcome: CellOutcome
    patch: bytes
    nested: tuple[str, ...]
    cell_flags: tuple[IntegrityFlag, ...]


def cell_phases(case: Case, cell: CellEnvironment, workspace: Workspace, harness: Path, timings: dict[str, float],
                outcome: CellOutcome) -> Verdict:
    """The cell's phases in order (``attribution.PHASES``), each continuing with what the last left, or ending it."""
    setup = environment_phase(case, cell, workspace, harness, timings, outcome)
    if isinstance(setup, Verdict):
        return setup
    route = meter_phase(case, outcome)
    if isinstance(route, Verdict):
        return route
    ran = arm_phase(setup, route, outcome)
    if isinstance(ran, Verdict):
        return ran
    spent = spend_phase(setup, ran, outcome)
    if isinstance(spent, Verdict):
        return spent
    patched = patch_phase(setup, spent)
    if isinstance(patched, Verdict):
        return patched
    return grade_phase(setup, patched)


@contextmanager
def timed(timings: dict[str, float], phase: str) -> Iterator[None]:
    """The seconds of the block as ``timings[phase]``, however it ends."""
    clock = time.monotonic()
    try:
        yield
    finally:
        timings[phase] = time.monotonic() - clock


def environment_phase(case: Case, cell: CellEnvironment, workspace: Workspace, harness: Path,
                      timings: dict[str, float], outcome: CellOutcome) -> Setup | Verdict:
    """The instance's venv (``build_environment``), and the harness's git dir for extraction."""
    python_env: PythonEnvironment | None = None
    template: EnvironmentTemplate | None = None
    original_base = workspace.base_commit
    if case.instance.env is not None and case.instance.source.kind != "image":
        store = EnvironmentStore(case.settings.cache or cell.root / "cache", case.settings.cache_max)
        try:
            with timed(timings, "env"):
                python_env, template, workspace = build_environment(case, cell, workspace, store)
        except (EnvBuildError, WorkspaceError) as error:
            return stop(ENV_BUILD, outcome, f"env: {error}")
        if python_env is not None:
            cell = dataclasses.replace(cell, variables={**cell.variables,
                                                        **python_env.variables(cell.variables["PATH"])})
    try:
        extraction_base = seed_extraction(harness / "extract.git", workspace, original_base)
    except ExtractionError as error:
        return stop(EXTRACTION_SEED, outcome, f"patch extraction could not be prepared: {error}")
    grading = grading_network(case.instance.network_needs, sandboxed=case.settings.sandboxed,
                              container=container_host(case) is not None)
    return Setup(case, cell, workspace, harness, timings, original_base, extraction_base, grading, python_env,
                 template)


def meter_phase(case: Case, outcome: CellOutcome) -> CellRoute | None | Verdict:
    """The cell's route through the metering proxy (None: its arm is not metered)."""
    if case.meter is None:
        return None
    from ..spend.meter.accounts import MeterError  # only a metered cell loads the meter

    try:
        return case.meter.open(case.key, case.arm.spec.name)
    except MeterError as error:
        return stop(METER_OPEN, outcome, f"meter: {error}")


def arm_phase(setup: Setup, route: CellRoute | None, outcome: CellOutcome) -> ArmRun | Verdict:
    """The arm's run, in its sandbox behind its network's gate; its ending set by its limits."""
    case, cell, workspace = setup.case, setup.cell, setup.workspace
    network = agent_network(case.arm, None if route is None else route.base_urls.values(), case.settings.sandboxed)
    gate: CellGate | None = None
    sandbox: CellSandbox | None = None
    with timed(setup.timings, "arm"):
        try:
            with open_gate(network) as gate:  # a sealed cell's model endpoints, for as long as its arm runs
                try:
                    sandbox = cell_sandbox(case, cell, workspace, setup.python_env, gate)
                except OSError as error:  # the cell's cgroups could not be made: the machine's, not the arm's
                    return stop(LIMITS_NOT_SET, outcome, f"limits: cannot set the cell's limits: {error}")
                request = CellRequest(instance=case.instance, workspace=workspace, cell=cell, trial=case.trial,
                                      sandbox=sandbox, meter=route)
                result = case.arm.run(request)
        except ArmError as error:
            result = ArmResult(status=ARM_FAILED.arm_status, error=str(error))
        except ArmStartError as error:
            return stop(ARM_NOT_STARTED, outcome, str(error))
        except pytest.fail.Exception as error:
            if not is_pytest_timeout(error):
                raise
            result = ArmResult(status=ARM_TIMED_OUT.arm_status,
                               error=f"pytest-timeout fired while the arm ran: {error}")
        except Exception:
            return stop(ARM_RAISED, outcome.replace(usage=Usage().to_json()),
                        f"arm {case.arm.spec.name} raised:\n{traceback.format_exc(limit=8)}")
        finally:
            limits = sandbox.limits if sandbox is not None else None
            passed = limits.close() if limits is not None else None
    if limits is not None:
        result = dataclasses.replace(result, details={**result.details, "limits": limits.details(passed)})
    if passed is not None and result.status in (ArmStatus.COMPLETED, ArmStatus.ARM_ERROR, ArmStatus.TIMEOUT):
        result = dataclasses.replace(result, status=LIMIT_PASSED.arm_status, error=f"limit passed: {passed}"
                                     f"{'; ' + result.error if result.error else ''}")
    return ArmRun(result, network, gate, route)


def spend_phase(setup: Setup, ran: ArmRun, outcome: CellOutcome) -> Spent | Verdict:
    """What the arm spent, checked (and metered), in the row; its trajectory; whether its setup failed."""
    from ..spend.meter.cells import CALLS_FILE

    case, run_dir, result, route = setup.case, setup.cell.run_dir, ran.result, ran.route
    # The harness writes its own files in the run dir next: whatever the arm left at their names (a link to a
    # host file, say) is removed, never written through, and flagged.
    cleared = tuple(IntegrityFlag("crossing", name, why)
                    for name, why in crossing.clear(run_dir, (*HARNESS_LOGS, CALLS_FILE, ATIF_FILE)))
    # Compared as the price table compares them: mini's served "gpt-4o" is the asked "openai/gpt-4o".
    mismatch = bool(result.asked_model and result.served_model
                    and not same_model(result.asked_model, result.served_model))
    # Whatever the kind, no implausible figure (NaN, negative, absurd) reaches the ledger.
    usage, models, problems = checked_spend(result.usage, result.models)
    details = {**accounting_errors(result.details, problems),
               "network": {**ran.network.to_json(ran.gate), **setup.grading.to_json()}}
    metered_refusal: str | None = None
    if case.meter is not None and route is not None:
        from ..spend.meter.accounts import MeterError
        from ..spend.meter.cells import metered_spend

        try:
            spent = metered_spend(usage, models, case.meter.close(route, run_dir),
                                  case.meter.plans[case.arm.spec.name].partial)
        except MeterError as error:
            return stop(METER_CLOSE, outcome.replace(usage=usage.to_json(), details=details), f"meter: {error}")
        usage, models, details = spent.usage, dict(spent.models), {**details, **spent.details}
        metered_refusal = spent.config_failure
        if spent.over_budget_reason is not None and result.status in (ArmStatus.COMPLETED, ArmStatus.ARM_ERROR):
            result = dataclasses.replace(result, status=OVER_BUDGET.arm_status,
                                         error=f"metering proxy: {spent.over_budget_reason}")
    # Checked after the meter: a cost the meter could not price is the agent's, held to the metered tokens.
    asked = result.asked_model
    usage, models, implausible = checked_costs(
        usage, models, lambda model: price_for_served(case.settings.prices, model, asked), result.served_model)
    cell_flags = (*cleared, *((IntegrityFlag("implausible_cost", "", str(implausible["implausible_cost"])),)
                              if implausible else ()))
    if implausible:
        details = {**details, **implausible}
    if cell_flags:
        details = {**details, "integrity": integrity_details((), cell_flags)}
    if usage.cost_source != CostSource.NONE.value:  # an arm that calls no model has no trajectory
        details = {**details, **cell_trajectory(case, run_dir, result, usage)}
    outcome = outcome.replace(
        usage=usage.to_json(),
        models={model: model_usage.to_json() for model, model_usage in models.items()},
        asked_model=result.asked_model,
        served_model=result.served_model,
        model_mismatch=mismatch,
        provenance={**outcome.provenance, **result.provenance},
        details=details,
    )
    misconfigured = configuration_failure(case, result, usage, run_dir, metered=route is not None,
                                          metered_refusal=metered_refusal)
    if misconfigured is not None:
        return stop(MISCONFIGURED, outcome, misconfigured)
    return Spent(outcome, result, mismatch, cell_flags)


def patch_phase(setup: Setup, spent: Spent) -> Patched | Verdict:
    """The arm's patch, extracted with the harness's git dir; a cell whose arm did not complete ends here."""
    case, workspace, outcome, result = setup.case, setup.workspace, spent.outcome, spent.result
    ended = result.status.cell_status
    nested: tuple[str, ...] = ()
    try:
        with timed(setup.timings, "patch"):
            if setup.extraction_base is None or workspace.objects is None:
                patch = extract_patch(workspace, case.settings.caps.max_patch_bytes)  # an image's /testbed: no snapshot
                excluded = excluded_from_workspace(workspace)
            else:
                extraction = extract(workspace.path, setup.extraction_base, workspace.objects,
                                     setup.harness / "extract.git", case.settings.caps.max_patch_bytes)
                patch, nested, excluded = extraction.patch, extraction.nested_repositories, list(extraction.excluded)
    except OutputOverCap as error:
        return stop(PATCH_OVER_CAP, outcome, f"{result.error + '; ' if result.error else ''}{error}", ended)
    except WorkspaceError as error:
        why = (f"{result.error or result.status}; patch extraction also failed: {error}" if ended is not None
               else f"patch extraction: {error}")
        return stop(PATCH_UNREADABLE, outcome, why, ended)
    outcome = outcome.replace(details={**outcome.details, "patch_excluded": excluded_details(excluded)})
    too_large = patch_over_cap(patch, case.settings.caps)
    if too_large is not None:
        return stop(PATCH_OVER_CAP, outcome, f"{result.error + '; ' if result.error else ''}{too_large}", ended)
    outcome = outcome.replace(patch=patch)
    if nested:
        outcome = outcome.replace(details={**outcome.details,
                                           "integrity": integrity_details(nested, spent.cell_flags)})
    if ended is not None:
        return stop(ARM_ENDED, outcome, result.error, ended)
    if spent.mismatch and case.settings.strict_models:
        return stop(MODEL_MISMATCH, outcome, f"served model {result.served_model!r} is not the asked "
                    f"{result.asked_model!r} (--arena-strict-models)")
    return Patched(outcome, patch, nested, spent.cell_flags)


def grade_phase(setup: Setup, patched: Patched) -> Verdict:
    """The patch graded: on a fresh tree (shared by identical patches of the sweep) or on the workspace."""
    outcome = patched.outcome
    try:
        with timed(setup.timings, "verify"):
            verdict, outcome = graded(setup, patched)
    except PatchRejected as error:
        if isinstance(error, SharedPatchRejected):
            outcome = outcome.replace(verify_shared_with=error.shared_with)
        return stop(PATCH_REJECTED, outcome, f"verify: {error}")
    except (VerifyInfrastructureError, TestPatchRejected, WorkspaceError, EnvBuildError) as error:
        return stop(GRADING_BROKE, outcome, f"verify: {error}")
    except pytest.fail.Exception as fired:
        if not is_pytest_timeout(fired):
            raise
        return stop(GRADE_TIMED_OUT, outcome.replace(patch_scored=False),
                    f"pytest-timeout fired during verify: {fired}")
    status, why = graded_status(verdict, patched.patch)
    return Verdict(outcome.replace(verify=verdict.to_json(), patch_scored=True), status, why)


def graded(setup: Setup, patched: Patched) -> tuple[VerifyResult, CellOutcome]:
    """The grading run's verdict, and the row with whose grade it shares and the integrity flags it raised."""
    case, cell, workspace, outcome, patch = setup.case, setup.cell, setup.workspace, patched.outcome, patched.patch
    grading, nested, cell_flags = setup.grading, patched.nested, patched.cell_flags
    if not (fresh_tree_grading(case.settings.verify_on, workspace) and workspace.objects is not None):
        verdict = run_verify(
            workspace, case.instance, patch, verify_on=case.settings.verify_on,
            env=cell.env(), log=cell.run_dir / "verify.log", timeout=case.settings.verify_timeout,
            host=container_host(case), sandbox=in_place_grading_sandbox(case, cell, workspace, setup.python_env,
                                                                         grading),
            rules=RULE_SETS[case.settings.grading_rules],
        )
        if verdict.integrity or nested:
            outcome = outcome.replace(details={**outcome.details,
                                               "integrity": integrity_details(nested, verdict.integrity)})
        return verdict, outcome
    objects, limits = workspace.objects, case.enforced_limits

    def grading_run() -> tuple[VerifyResult, tuple[IntegrityFlag, ...]]:
        return grade_on_fresh_tree(
            case.instance, patch, objects=objects, base_commit=setup.original_base, root=setup.harness / "grading",
            run_dir=cell.run_dir, timeout=case.settings.verify_timeout, sandboxed=case.settings.sandboxed,
            template=setup.template, rules=RULE_SETS[case.settings.grading_rules], limits=limits,
            limit_mechanism=case.settings.limit_mechanism, network=grading)

    if case.settings.sweep_cache is None or case.settings.grade_every_cell:
        verdict, flags = grading_run()
    else:
        key = grade_key(case.instance, patch, rules=case.settings.grading_rules, sandbox=case.settings.sandbox,
                        timeout=case.settings.verify_timeout, template=setup.template.key if setup.template else None,
                        limits=limits.to_json() if limits is not None else None)
        shared = grade_once(case.settings.sweep_cache / "grades", key, case.key, grading_run)
        verdict, flags = shared.verdict, shared.flags
        if shared.shared_with is not None:
            outcome = outcome.replace(verify_shared_with=shared.shared_with)
            note_shared_grade(cell.run_dir / "verify.log", shared)
    if flags or nested or cell_flags:
        outcome = outcome.replace(details={**outcome.details,
                                           "integrity": integrity_details(nested, (*cell_flags, *flags))})
    return verdict, outcome


def finish(verdict: Verdict, case: Case, run_dir: Path, workspace: Workspace, harness: Path,
           timings: Mapping[str, float]) -> CellOutcome:
    """The cell's row: its verdict, its run dir's files (what the caps cut said), and its integrity record."""
    outcome = verdict.outcome
    collected = collect_run_dir(run_dir, case.settings.caps, first=HARNESS_LOGS)
    if collected.cut:  # what the caps left out or cut, with why
        outcome = outcome.replace(details={**outcome.details, "run_dir_cut": list(collected.cut)})
    if workspace.snapshot_rebuilt:
        outcome = outcome.replace(details={**outcome.details, "snapshot_rebuilt": workspace.snapshot_rebuilt})
    # The cell's integrity record, from what the harness saw: never a verdict by itself.
    record = integrity_record(collected.logs, outcome.patch if "patch_excluded" in outcome.details else None,
                              outcome.details, harness / "extract.git", workspace.path)
    if record:
        outcome = outcome.replace(details={**outcome.details, "integrity": [
            *(outcome.details.get("integrity") or []), *(flag.to_json() for flag in record)]})
    return finished(outcome, verdict.status, verdict.error, timings, collected.logs)


#: Most object names of a transcript looked up in base's objects (each is one ``git cat-file``).
MAX_OBJECTS_LOOKED_UP = 20


def cell_trajectory(case: Case, run_dir: Path, result: ArmResult, usage: Usage) -> dict[str, object]:
    """Write the cell's ``trajectory.atif.json`` from the agent's record in its run dir; the row's details
    that say so (``atif``, or ``atif_missing`` and why). Never raises."""
    provenance = result.provenance
    version = provenance.get("agent_version") or provenance.get("loops_commit") or "unknown"
    agent = AgentIdentity(name=case.arm.spec.kind, version=str(version),
                          model_name=result.served_model or result.asked_model, arm=case.arm.spec.name)
    session = CellName(case.instance.instance_id, case.arm.spec.name, case.trial).label
    return write_trajectory(run_dir, case.arm.spec.kind, agent, session, usage.to_json(),
                            case.instance.problem_statement)


def integrity_record(logs: Mapping[str, str], patch: bytes | None, details: Mapping[str, object], git_dir: Path,
                     work_tree: Path) -> list[IntegrityFlag]:
    """The cell's flags from its logs, its patch and what it changed (``grading.integrity.cell_record``); an object
    an agent named is looked up in the harness's git dir, which holds base's objects (none of a later commit)."""
    looked_up: dict[str, bool] = {}

    def known(name: str) -> bool:
        if name not in looked_up:
            if not git_dir.is_dir() or len(looked_up) >= MAX_OBJECTS_LOOKED_UP:
                return True  # not checked: not flagged
            looked_up[name] = HarnessGit(git_dir, work_tree).run("cat-file", "-e", f"{name}^{{object}}").returncode == 0
        return looked_up[name]

    return cell_record(logs, patch, details, known)


def configuration_failure(case: Case, result: ArmResult, usage: Usage, run_dir: Path, *, metered: bool = False,
                          metered_refusal: str | None = None) -> str | None:
    """Why the cell is ``config_error`` (a refused key, an unreachable endpoint, a quota, rate limits), or None.

    Metered, from what the meter saw: the upstream answered none of the cell's calls but with a refusal
    (``spend.meter.cells.upstream_refusal``). Else read from the agent's error output against its kind's
    ``config_failures`` (``arms.misconfig``), only
    for a run that exited (failed, or ended without an answer) or timed out with no output tokens recorded
    (none, or not known): once a model answered, what the agent prints may be the model's doing, and its
    failure is counted. A timeout is read too: Codex never gives up on an endpoint it cannot reach (it
    waits for the network until the arm's timeout), so its cell times out saying so.
    """
    failures = getattr(case.arm, "config_failures", NO_FAILURES)
    if result.status not in (ArmStatus.ARM_ERROR, ArmStatus.COMPLETED, ArmStatus.TIMEOUT):
        return None
    if metered:
        return metered_refusal  # the proxy saw every upstream answer: it decides, not what the agent printed
    if usage.output_tokens:
        return None
    return failures.find([result.error or "", *("\n".join(tail_lines(run_dir / name))
                                                for name in failures.output_names(run_dir))])


def note_shared_grade(log: Path, shared: SharedGrade) -> None:
    """The verify.log of a cell that took another cell's grade: whose, and where its log is."""
    note = (f"# verify: this cell's patch is byte-identical to cell {shared.shared_with}'s, whose grading run "
            f"on a fresh tree gave this cell's verdict (waited {shared.waited:.2f}s for it; its verify.log "
            "is in that cell's run dir; --arena-grade-every-cell grades every cell on its own)\n")
    try:  # the run dir is the cell's: a link the agent left at the name is refused, not written through
        with crossing.writing(log.parent, log.name) as file:
            file.write(note.encode())
    except crossing.Refused:
        pass  # the collected run dir lists the link, not followed


def cell_sandbox(case: Case, cell: CellEnvironment, workspace: Workspace,
                 python_env: PythonEnvironment | None = None, gate: CellGate | None = None) -> CellSandbox | None:
    """The sandbox of the cell's arm (None with --arena-sandbox=none): the cell and its workspace
    read-write, the base snapshot's objects read-only (the workspace's history), and so are the venv's
    entries hardlinked to the template's; nothing else of the harness."""
    if not case.settings.sandboxed:
        return None
    outside = () if cell.root in workspace.path.parents else (workspace.path,)
    objects = () if workspace.objects is None else (workspace.objects,)
    limits = case.enforced_limits
    group = None if limits is None else LimitGroup.create(limits, case.settings.limit_mechanism,
                                                          (cell.root, *outside))
    return CellSandbox(cell, read_write=outside, read_only=(*objects, *(python_env.read_only if python_env else ())),
                       limits=group, gate=gate)


def seed_extraction(git_dir: Path, workspace: Workspace, original_base: str) -> str | None:
    """Before the arm: the harness's git dir for extraction, and the base its patch is taken against.

    Base is the instance's commit plus what the environment's steps changed (committed in the
    harness's objects, not the workspace's); the index is seeded with the files' stat data, so
    extraction later reads only what changed. None for a workspace without a snapshot (an image).
    """
    if workspace.objects is None:
        return None
    harness = HarnessGit.create(git_dir, workspace.path, workspace.objects)
    if workspace.base_commit != original_base:
        base = harness.commit_work_tree(original_base, "arena: environment setup")
        harness.seed_index(base)
        return base
    # The workspace's index is git's record of checking base out there, before the arm ran.
    harness.seed_index(original_base, checked_out=workspace.path / ".git" / "index")
    return original_base


def build_environment(case: Case, cell: CellEnvironment, workspace: Workspace, store: EnvironmentStore,
                      ) -> tuple[PythonEnvironment | None, EnvironmentTemplate | None, Workspace]:
    """The cell's venv for the instance's ``env``: a copy of the instance's template (built by the first cell
    that needs it), checked to run the tests at base, and what the steps changed in the workspace committed.

    No venv (None) for a cell whose arm runs nothing in the workspace (``runs_agent``: GOLD, EMPTY, a replay)
    and whose patch a fresh tree grades (with a copy of its own): the steps' files are laid into the workspace
    all the same, so the patch is taken against the same base. Its row's check at base must have passed
    already (the template's build runs it); else the cell gets its venv, to check it with.

    A shipped SWE-bench spec is finished for the row first (``swebench_envs``: its requirement files, its
    date). Each uv and shell step is bounded by ``--arena-verify-timeout``. A workspace without a snapshot
    to check the template out from builds its venv in place, as before templates.
    """
    assert case.instance.env is not None
    settings = case.settings
    log = cell.run_dir / "env.log"
    shipped = case.instance.shipped_spec
    if shipped is None:
        # What the tests need of the network is checked from here first, as a shipped spec's is (``swebench_envs``).
        needs = case.instance.network_needs
        unreachable = unreachable_server(needs)
        if unreachable:
            raise EnvBuildError(f"its tests need the network (field 'network': {', '.join(needs)}), which this "
                                f"machine cannot reach: {unreachable}")
    spec = (shipped_env_spec(case.instance, shipped, workspace.mirror) if shipped is not None
            else EnvSpec.from_mapping(case.instance.env))
    check_env = {**cell.env(), "PYTHONDONTWRITEBYTECODE": "1"}

    def check(environment: PythonEnvironment, checkout: Path, log: Path) -> None:
        if case.instance.verify is None:
            # Without a working environment every test of every arm, GOLD too, would fail: a harness error instead.
            check_health(case.instance, repo_runner(case.instance), environment, store, checkout, check_env, log,
                         case.settings.verify_timeout)

    template = None
    if workspace.objects is None:
        python_env = store.build(spec, cell.root / "venv", workspace.path, cell.env(), log, settings.verify_timeout)
    else:
        template = instance_template(store, spec, repo=case.instance.repo, base_commit=workspace.base_commit,
                                     objects=workspace.objects, cell_env=cell.env(), log=log,
                                     timeout=settings.verify_timeout, check=check,
                                     failures=(settings.sweep_cache / "failed-templates"
                                               if settings.sweep_cache else None),
                                     cell=CellName(case.instance.instance_id, case.arm.spec.name, case.trial).shown)
        # Linked only where a fresh tree's grading shows the template's files read-only; grading in place keeps
        # the seed's venv, a copy of the cell's own (its sandbox shows the cell's venv read-write).
        fresh_tree = fresh_tree_grading(case.settings.verify_on, workspace)
        if not runs_agent(case.arm) and fresh_tree and (
                case.instance.verify is not None
                or health_passed(case.instance, repo_runner(case.instance), template.key, store, workspace.path)):
            template.lay_into(workspace.path, log)
            return None, template, commit_environment_setup(workspace)
        linked = case.settings.sandboxed and fresh_tree
        python_env = template.copy_to(cell.root / "venv", workspace.path, log, linked=linked)
    # Remembered per environment: a second instance on the same template checks its own tests once.
    check(python_env, workspace.path, log)
    return python_env, template, commit_environment_setup(workspace)


def in_place_grading_sandbox(case: Case, cell: CellEnvironment, workspace: Workspace,
                             python_env: PythonEnvironment | None, network: GradingNetwork) -> Sandbox | None:
    """The sandbox of a grading run on the workspace as the arm left it (``--arena-verify-on=workspace``): the
    cell and its workspace read-write, the base snapshot's objects and the venv's interpreter read-only, as
    the arm's own sandbox had them, and the graded tests' ``network``. None without bwrap, and for an image's
    /testbed (graded in its container).

    The code it runs is the arm's, on the arm's tree: unsandboxed, it would write wherever the harness's
    user can (the out dir, the cache, the instance files).
    """
    if not case.settings.sandboxed or case.instance.source.kind == "image":
        return None
    outside = () if cell.root in workspace.path.parents else (workspace.path,)
    shown: list[Path] = [] if workspace.objects is None else [workspace.objects]
    if python_env is not None:
        shown += [*program_mounts_outside(python_env.venv / "bin" / "python", (cell.root, *outside)),
                  *python_env.read_only]
    return Sandbox(dataclasses.replace(cell_policy(cell, read_write=outside, read_only=shown),
                                       share_network=not network.sealed))


def container_host(case: Case) -> ContainerHost | None:
    source = case.instance.source
    return ContainerHost(case.settings.engine, source.location) if source.kind == "image" else None


def is_pytest_timeout(error: BaseException) -> bool:
    """Whether pytest-timeout's signal method interrupted the cell (it raises ``pytest.fail("Timeout...")``)."""
    return str(error).startswith("Timeout")
