"""One cell, after its fixtures, in phases: environment -> arm -> patch -> grade.

This is where the line between a failing arm (counts against the arm) and a
failing harness (not counted, run again on resume) is drawn; grading itself is
``grading.verify``'s.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from .. import crossing
from ..arms.base import ArmError, ArmResult, ArmStartError, CellRequest
from ..arms.misconfig import NO_FAILURES, tail_lines
from ..cache import process_leases
from ..cell.environment import CellEnvironment
from ..cell.git import ExtractionError, HarnessGit, OutputOverCap, WorkspaceError
from ..cell.limits import LimitGroup
from ..cell.network import CellGate, GradingNetwork, agent_network, grading_network, open_gate
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
from .health import check_health, unreachable_server
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
    outcome = started(case, nodeid, started_at)

    def finish(outcome: CellOutcome, status: CellStatus, error: str | None) -> CellOutcome:
        collected = collect_run_dir(cell.run_dir, case.caps, first=HARNESS_LOGS)
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
        return finished(outcome, status, error, timings, collected.logs)

    python_env: PythonEnvironment | None = None
    template: EnvironmentTemplate | None = None
    store = EnvironmentStore(case.cache or cell.root / "cache", case.cache_max)
    original_base = workspace.base_commit
    if case.instance.env is not None and case.instance.source.kind != "image":
        clock = time.monotonic()
        try:
            python_env, template, workspace = build_environment(case, cell, workspace, store)
        except (EnvBuildError, WorkspaceError) as error:
            timings["env"] = time.monotonic() - clock
            return finish(outcome, CellStatus.HARNESS_ERROR, f"env: {error}")
        timings["env"] = time.monotonic() - clock
        cell = dataclasses.replace(cell, variables={**cell.variables, **python_env.variables(cell.variables["PATH"])})
    try:
        extraction_base = seed_extraction(harness / "extract.git", workspace, original_base)
    except ExtractionError as error:
        return finish(outcome, CellStatus.HARNESS_ERROR, f"patch extraction could not be prepared: {error}")
    route = None
    if case.meter is not None:
        from ..spend.meter.accounts import MeterError  # only a metered cell loads the meter

        try:
            route = case.meter.open(case.key, case.arm.spec.name)
        except MeterError as error:
            return finish(outcome, CellStatus.HARNESS_ERROR, f"meter: {error}")
    network = agent_network(case.arm, None if route is None else route.base_urls.values(), case.sandbox == "bwrap")
    fresh_tree = fresh_tree_grading(case.verify_on, workspace)
    grading = grading_network(case.instance.network_needs, sandboxed=case.sandbox == "bwrap",
                              container=container_host(case) is not None)
    clock = time.monotonic()
    gate: CellGate | None = None
    sandbox: CellSandbox | None = None
    try:
        with open_gate(network) as gate:  # a sealed cell's model endpoints, for as long as its arm runs
            try:
                sandbox = cell_sandbox(case, cell, workspace, python_env, gate)
            except OSError as error:  # the cell's cgroups could not be made: the machine's, not the arm's
                return finish(outcome, CellStatus.HARNESS_ERROR, f"limits: cannot set the cell's limits: {error}")
            request = CellRequest(instance=case.instance, workspace=workspace, cell=cell, trial=case.trial,
                                  sandbox=sandbox, meter=route)
            result = case.arm.run(request)
    except ArmError as error:
        result = ArmResult(status=ArmStatus.ARM_ERROR, error=str(error))
    except ArmStartError as error:
        # The agent never started: nothing was spent, and the setup (not the arm) is at fault.
        timings["arm"] = time.monotonic() - clock
        return finish(outcome, CellStatus.HARNESS_ERROR, str(error))
    except pytest.fail.Exception as error:
        if not is_pytest_timeout(error):
            raise
        result = ArmResult(status=ArmStatus.TIMEOUT, error=f"pytest-timeout fired while the arm ran: {error}")
    except Exception:
        timings["arm"] = time.monotonic() - clock
        # The arm started and may have spent: what it spent is unknown, never "did not run" ($0).
        return finish(outcome.replace(usage=Usage().to_json()), CellStatus.HARNESS_ERROR,
                      f"arm {case.arm.spec.name} raised:\n{traceback.format_exc(limit=8)}")
    finally:
        limits = sandbox.limits if sandbox is not None else None
        passed = limits.close() if limits is not None else None
    timings["arm"] = time.monotonic() - clock
    if limits is not None:
        result = dataclasses.replace(result, details={**result.details, "limits": limits.details(passed)})
    if passed is not None and result.status in (ArmStatus.COMPLETED, ArmStatus.ARM_ERROR, ArmStatus.TIMEOUT):
        # A limit passed is the arm's failure, counted, whatever its process said after: named in the error.
        result = dataclasses.replace(result, status=ArmStatus.ARM_ERROR, error=f"limit passed: {passed}"
                                     f"{'; ' + result.error if result.error else ''}")
    from ..spend.meter.cells import CALLS_FILE

    # The harness writes its own files in the run dir next: whatever the arm left at their names (a link to a
    # host file, say) is removed, never written through, and flagged.
    cleared = tuple(IntegrityFlag("crossing", name, why)
                    for name, why in crossing.clear(cell.run_dir, (*HARNESS_LOGS, CALLS_FILE, ATIF_FILE)))
    # Compared as the price table compares them: mini's served "gpt-4o" is the asked "openai/gpt-4o".
    mismatch = bool(result.asked_model and result.served_model
                    and not same_model(result.asked_model, result.served_model))
    # Whatever the kind, no implausible figure (NaN, negative, absurd) reaches the ledger.
    usage, models, problems = checked_spend(result.usage, result.models)
    details = {**accounting_errors(result.details, problems), "network": {**network.to_json(gate), **grading.to_json()}}
    metered_refusal: str | None = None
    if case.meter is not None and route is not None:
        from ..spend.meter.cells import metered_spend

        try:
            spent = metered_spend(usage, models, case.meter.close(route, cell.run_dir),
                                  case.meter.plans[case.arm.spec.name].partial)
        except MeterError as error:
            # The proxy failed, not the agent: what the agent reported is kept, the cell runs again on resume.
            outcome = outcome.replace(usage=usage.to_json(), details=details)
            return finish(outcome, CellStatus.HARNESS_ERROR, f"meter: {error}")
        usage, models, details = spent.usage, dict(spent.models), {**details, **spent.details}
        metered_refusal = spent.config_failure
        if spent.over_budget_reason is not None and result.status in (ArmStatus.COMPLETED, ArmStatus.ARM_ERROR):
            result = dataclasses.replace(result, status=ArmStatus.OVER_BUDGET,
                                         error=f"metering proxy: {spent.over_budget_reason}")
    # Checked after the meter: a cost the meter could not price is the agent's, held to the metered tokens.
    usage, models, implausible = checked_costs(
        usage, models, lambda model: price_for_served(case.prices, model, result.asked_model), result.served_model)
    # What the harness refused at the crossing after the arm, and a reported cost its tokens cannot explain.
    cell_flags = (*cleared, *((IntegrityFlag("implausible_cost", "", str(implausible["implausible_cost"])),)
                              if implausible else ()))
    if implausible:
        details = {**details, **implausible}
    if cell_flags:
        details = {**details, "integrity": integrity_details((), cell_flags)}
    if usage.cost_source != CostSource.NONE.value:  # an arm that calls no model has no trajectory
        details = {**details, **cell_trajectory(case, cell.run_dir, result, usage)}
    outcome = outcome.replace(
        usage=usage.to_json(),
        models={model: model_usage.to_json() for model, model_usage in models.items()},
        asked_model=result.asked_model,
        served_model=result.served_model,
        model_mismatch=mismatch,
        provenance={**outcome.provenance, **result.provenance},
        details=details,
    )
    ended = result.status.cell_status
    misconfigured = configuration_failure(case, result, usage, cell.run_dir, metered=route is not None,
                                          metered_refusal=metered_refusal)
    if misconfigured is not None:
        # The arm's setup failed before its agent did anything: not counted, and its other cells wait for a fix.
        return finish(outcome, CellStatus.CONFIG_ERROR, misconfigured)

    clock = time.monotonic()
    nested: tuple[str, ...] = ()
    try:
        if extraction_base is None or workspace.objects is None:
            patch = extract_patch(workspace, case.caps.max_patch_bytes)  # an image's /testbed: no snapshot
            excluded = excluded_from_workspace(workspace)
        else:
            extraction = extract(workspace.path, extraction_base, workspace.objects, harness / "extract.git",
                                 case.caps.max_patch_bytes)
            patch, nested, excluded = extraction.patch, extraction.nested_repositories, list(extraction.excluded)
    except OutputOverCap as error:
        # Cut, it would not apply: the arm's failure, counted (the cap is the harness's, the size the arm's).
        timings["patch"] = time.monotonic() - clock
        return finish(outcome, ended or CellStatus.ARM_ERROR, f"{result.error + '; ' if result.error else ''}{error}")
    except WorkspaceError as error:
        if ended is not None:
            # Nothing would be scored anyway: the arm's own ending (timeout, arm_error...) is the verdict.
            return finish(outcome, ended, f"{result.error or result.status}; patch extraction also failed: {error}")
        # The arm has run: what it left cannot be read, and that is the arm's failure, counted in its rate.
        return finish(outcome, CellStatus.ARM_ERROR, f"patch extraction: {error}")
    timings["patch"] = time.monotonic() - clock
    outcome = outcome.replace(details={**outcome.details, "patch_excluded": excluded_details(excluded)})
    too_large = patch_over_cap(patch, case.caps)
    if too_large is not None:
        # Cut, it would not apply: the arm's failure, counted (the cap is the harness's, the size the arm's).
        return finish(outcome, ended or CellStatus.ARM_ERROR, f"{result.error + '; ' if result.error else ''}"
                      f"{too_large}")
    outcome = outcome.replace(patch=patch)
    if nested:
        outcome = outcome.replace(details={**outcome.details, "integrity": integrity_details(nested, cell_flags)})

    if ended is not None:
        # Never scored from partial work: keep the patch for forensics, do not verify it.
        return finish(outcome, ended, result.error)
    if mismatch and case.strict_models:
        return finish(outcome, CellStatus.HARNESS_ERROR,
                      f"served model {result.served_model!r} is not the asked {result.asked_model!r} "
                      "(--arena-strict-models)")

    clock = time.monotonic()
    try:
        if fresh_tree and workspace.objects is not None:
            objects = workspace.objects

            def grading_run() -> tuple[VerifyResult, tuple[IntegrityFlag, ...]]:
                return grade_on_fresh_tree(
                    case.instance, patch, objects=objects, base_commit=original_base, root=harness / "grading",
                    run_dir=cell.run_dir, timeout=case.verify_timeout, sandboxed=case.sandbox == "bwrap",
                    template=template, rules=RULE_SETS[case.grading_rules], limits=case.limits,
                    limit_mechanism=case.limit_mechanism, network=grading)

            if case.sweep_cache is None or case.grade_every_cell:
                verdict, flags = grading_run()
            else:
                key = grade_key(case.instance, patch, rules=case.grading_rules, sandbox=case.sandbox,
                                timeout=case.verify_timeout, template=template.key if template else None,
                                limits=case.limits.to_json() if case.limits is not None and case.limits.any else None)
                shared = grade_once(case.sweep_cache / "grades", key, case.key, grading_run)
                verdict, flags = shared.verdict, shared.flags
                if shared.shared_with is not None:
                    outcome = outcome.replace(verify_shared_with=shared.shared_with)
                    note_shared_grade(cell.run_dir / "verify.log", shared)
            if flags or nested or cell_flags:
                outcome = outcome.replace(details={**outcome.details,
                                                   "integrity": integrity_details(nested, (*cell_flags, *flags))})
        else:
            verdict = run_verify(
                workspace, case.instance, patch, verify_on=case.verify_on,
                env=cell.env(), log=cell.run_dir / "verify.log", timeout=case.verify_timeout,
                host=container_host(case), sandbox=in_place_grading_sandbox(case, cell, workspace, python_env, grading),
                rules=RULE_SETS[case.grading_rules],
            )
            if verdict.integrity or nested:
                outcome = outcome.replace(details={**outcome.details,
                                                   "integrity": integrity_details(nested, verdict.integrity)})
    except PatchRejected as error:
        # The arm's own patch cannot be graded on a fresh tree: its failure, counted in its rate.
        timings["verify"] = time.monotonic() - clock
        if isinstance(error, SharedPatchRejected):
            outcome = outcome.replace(verify_shared_with=error.shared_with)
        return finish(outcome, CellStatus.ARM_ERROR, f"verify: {error}")
    except (VerifyInfrastructureError, TestPatchRejected, WorkspaceError, EnvBuildError) as error:
        timings["verify"] = time.monotonic() - clock
        return finish(outcome, CellStatus.HARNESS_ERROR, f"verify: {error}")
    except pytest.fail.Exception as fired:
        if not is_pytest_timeout(fired):
            raise
        timings["verify"] = time.monotonic() - clock
        return finish(outcome.replace(patch_scored=False), CellStatus.TIMEOUT,
                      f"pytest-timeout fired during verify: {fired}")
    timings["verify"] = time.monotonic() - clock
    status, why = graded_status(verdict, patch)
    return finish(outcome.replace(verify=verdict.to_json(), patch_scored=True), status, why)


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
    if case.sandbox != "bwrap":
        return None
    outside = () if cell.root in workspace.path.parents else (workspace.path,)
    objects = () if workspace.objects is None else (workspace.objects,)
    limits = (LimitGroup.create(case.limits, case.limit_mechanism, (cell.root, *outside))
              if case.limits is not None and case.limits.any else None)
    return CellSandbox(cell, read_write=outside, read_only=(*objects, *(python_env.read_only if python_env else ())),
                       limits=limits, gate=gate)


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


def build_environment(case: Case, cell: CellEnvironment, workspace: Workspace,
                      store: EnvironmentStore) -> tuple[PythonEnvironment, EnvironmentTemplate | None, Workspace]:
    """The cell's venv for the instance's ``env``: a copy of the instance's template (built by the first cell
    that needs it), checked to run the tests at base, and what the steps changed in the workspace committed.

    A shipped SWE-bench spec is finished for the row first (``swebench_envs``: its requirement files, its
    date). Each uv and shell step is bounded by ``--arena-verify-timeout``. A workspace without a snapshot
    to check the template out from builds its venv in place, as before templates.
    """
    assert case.instance.env is not None
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
                         case.verify_timeout)

    template = None
    if workspace.objects is None:
        python_env = store.build(spec, cell.root / "venv", workspace.path, cell.env(), log, case.verify_timeout)
    else:
        template = instance_template(store, spec, repo=case.instance.repo, base_commit=workspace.base_commit,
                                     objects=workspace.objects, cell_env=cell.env(), log=log,
                                     timeout=case.verify_timeout, check=check,
                                     failures=case.sweep_cache / "failed-templates" if case.sweep_cache else None,
                                     cell=CellName(case.instance.instance_id, case.arm.spec.name, case.trial).shown)
        # Linked only where a fresh tree's grading shows the template's files read-only; grading in place keeps
        # the seed's venv, a copy of the cell's own (its sandbox shows the cell's venv read-write).
        linked = case.sandbox == "bwrap" and fresh_tree_grading(case.verify_on, workspace)
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
    if case.sandbox != "bwrap" or case.instance.source.kind == "image":
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
    return ContainerHost(case.engine, source.location) if source.kind == "image" else None


def is_pytest_timeout(error: BaseException) -> bool:
    """Whether pytest-timeout's signal method interrupted the cell (it raises ``pytest.fail("Timeout...")``)."""
    return str(error).startswith("Timeout")
