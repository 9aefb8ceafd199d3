"""The ``supervisor`` kind (SUP): the loops supervisor driver, fail-closed, with its hidden worker spend.

For each cell it writes ``params.json`` in the run dir, exports the env knobs
(plus ``LOOPS_BRAIN_LOG`` in the run dir) and runs the driver command with
cwd = the loops checkout, whose commit is recorded as provenance. The driver
gets ``DRIVER_CANCEL_TIMEOUT_MS`` + 10 s between SIGTERM and SIGKILL to cancel
and settle its workers (the ``grace`` setting overrides that). Afterwards it reads ``<ws>/.loops/supervisor/<id>/``:
``state.json`` (status, verdict, result), ``journal.jsonl`` (spawned and
settled workers, their labels as subtasks) and ``workers/*.ndjson`` (settled
spend, started cwd). Workers run opencode with the cell's environment, so their
sessions are in the cell's opencode store: joining their cwds to the
``session`` table recovers what they spent. A store that cannot be read, or a
worker whose cwd matches no session, gives null, never 0. Anything but a driver that exits 0 with state ``completed`` is
``arm_error`` and is not scored.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from .. import crossing
from ..agents.opencode import read_sessions, sessions_by_model, worker_sessions
from ..cell.git import run_git
from ..files import json_count, json_table
from ..outcome import ArmStatus
from ..spend.meter.accounts import NO_CAP
from ..spend.usage import UNKNOWN_MODEL, Accounting, Usage, accounting_errors, add_usages, cost_problem, count_problem
from ..suite import ArmSpec, Suite
from .agent import (
    check_program,
    check_template,
    find_program,
    read_env,
    read_metering,
    read_network,
    read_secrets,
    run_agent,
)
from .base import (
    ENV,
    GRACE,
    METER,
    NETWORK,
    SECRETS,
    TIMEOUT,
    UPSTREAM,
    WORKER_SUFFIX,
    ArmConfigError,
    ArmKind,
    ArmResult,
    CellRequest,
    SettingsReader,
    number,
    path,
    read_worker_suffix,
    strings,
    text,
)
from .opencode_home import CONFIG_FAILURES, OPENCODE_HOME_SETTINGS, OPENCODE_QUIET_ENV, read_opencode_home
from .preflight import ProbeCall

DEFAULT_COMMAND = ["node", "--import", "tsx", "{shim}", "{extension}", "{workspace}", "{params}"]
PLACEHOLDERS = ("shim", "extension", "workspace", "params", "run_dir", "loops_repo")
DEFAULT_KNOBS = {
    "WORKER_BACKEND": "cli",
    "LOOPS_WORKER_HARNESS": "opencode",
    "LOOPS_BRAIN_RETRIES": "30",
    "DRIVER_DEADLINE_MS": "2600000",
    # Exported, not only assumed: the kill grace is computed from it (cancel_grace).
    "DRIVER_CANCEL_TIMEOUT_MS": "30000",
}
#: Time the driver gets beyond its own cancellation deadline to settle its workers.
SETTLE_SECONDS = 10.0

LOOPS_REPO = path("loops_repo", "the loops checkout (a git repository with a commit)").required()
COMMAND = strings("command", "the driver's argv template", DEFAULT_COMMAND, shown="see above")
SHIM = path("shim", "the driver shim file (`{shim}`)")
EXTENSION = path("extension", "`{extension}`", shown="`<loops_repo>/extensions/pi/loops.ts`")
WORKER_MODEL = text("worker_model", "the workers' model, passed in `params.json`").required()
DRIVER_MODEL = text("driver_model", "the driver's model, passed in `params.json`").required()
BUDGET = number("budget", "`params.json`'s `budget`", 40)
MAX_SANDBOXES = number("max_sandboxes", "`params.json`'s `maxSandboxes`", 4)
MAX_USD = number("max_usd", "`params.json`'s `maxUsd` (the driver's own limit, not a cap the harness holds)", 8)
MAX_DEPTH = number("max_depth", "`params.json`'s `maxDepth`", 3)
VERIFY_CMD = text("verify_cmd", "`params.json`'s `verifyCmd`", shown="the instance's `verify`")
OPENCODE = text("opencode", "the workers' opencode CLI", "opencode")
SUPERVISOR_SETTINGS = (
    LOOPS_REPO, WORKER_MODEL, DRIVER_MODEL, SHIM, EXTENSION, COMMAND, BUDGET, MAX_SANDBOXES, MAX_USD, MAX_DEPTH,
    VERIFY_CMD, TIMEOUT.but(default=2800.0),
    GRACE.but(default=None, shown_default="`DRIVER_CANCEL_TIMEOUT_MS` / 1000 + 10"),
    WORKER_SUFFIX.but(default=""), ENV.but(meaning="the driver's env knobs, over its defaults"), NETWORK, SECRETS,
    OPENCODE, *(setting.but(meaning=f"{setting.meaning} (the workers')") for setting in OPENCODE_HOME_SETTINGS),
    METER, UPSTREAM,
)
SUBTASK_LABEL_LIMIT = 100


@dataclass
class SupervisorRun:
    """What the driver left in ``<ws>/.loops/supervisor/<id>/`` (None where a file said nothing)."""

    id: str | None = None
    #: Other run dirs found in ``.loops/supervisor`` (there should be none: ``.loops`` is removed before the run).
    other_ids: list[str] = field(default_factory=list)
    status: str | None = None
    verdict: str | None = None
    delivered: bool | None = None
    spent_tokens: int | None = None
    spent_usd: float | None = None
    spawned: int = 0
    workers: int = 0
    settled: int = 0
    subtasks: list[str] = field(default_factory=list)
    worker_cwds: list[str] = field(default_factory=list)
    #: input + output tokens the workers' own ``settled`` events report (CLI workers often report none).
    settled_tokens: int = 0
    #: Why figures of ``state.json`` were refused (they are None above).
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


#: The most of one driver file read (its state, its journal, a worker's events): the driver is the cell's.
DRIVER_FILE_CAP = 16 * 1024 * 1024


def _driver_text(workspace: Path, relative: str) -> str:
    """A driver file under the workspace, through the crossing (no link followed, capped); "" when it is not
    there or is refused (the run's fields then stay unknown)."""
    try:
        data, _ = crossing.read_capped(workspace, relative, DRIVER_FILE_CAP)
    except OSError:  # not there, or crossing.Refused
        return ""
    return data.decode("utf-8", errors="replace")


def _json_lines(workspace: Path, relative: str) -> list[dict[str, Any]]:
    text = _driver_text(workspace, relative)
    events = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _state_mtime(directory: Path) -> float:
    try:
        return (directory / "state.json").stat().st_mtime
    except OSError:
        return float("-inf")  # no state written: never preferred to a run that wrote one


def read_supervisor_run(workspace: Path) -> SupervisorRun:
    """Parse the supervisor run dir in ``workspace`` (an empty ``SupervisorRun`` when there is none).

    Should there be several, the one whose ``state.json`` was written last is
    read (run ids need not sort by time) and the others are listed in ``other_ids``.
    """
    root = workspace / ".loops" / "supervisor"
    directories = ([entry for entry in root.iterdir() if entry.is_dir() and not entry.is_symlink()]
                   if root.is_dir() and not root.is_symlink() else [])
    run = SupervisorRun()
    if not directories:
        return run
    directories.sort(key=lambda entry: (_state_mtime(entry), entry.name))
    directory = directories[-1]
    run.id = directory.name
    run.other_ids = sorted(entry.name for entry in directories[:-1])
    folder = f".loops/supervisor/{directory.name}"
    try:
        state = json.loads(_driver_text(workspace, f"{folder}/state.json"))
    except ValueError:
        state = {}  # killed mid-write, or never written: every field stays unknown
    if isinstance(state, dict):
        run.status = state.get("status") if isinstance(state.get("status"), str) else None
        run.verdict = state.get("verdict") if isinstance(state.get("verdict"), str) else None
        result = json_table(state.get("result"))
        run.delivered = result.get("delivered") if isinstance(result.get("delivered"), bool) else None
        tokens, usd = result.get("spentTokens"), result.get("spentUsd")
        token_problem = None if tokens is None else count_problem(tokens)
        usd_problem = None if usd is None else cost_problem(usd)
        run.spent_tokens = None if token_problem else tokens
        run.spent_usd = None if usd is None or usd_problem else float(usd)
        run.problems += [f"state.json result.{key}: {problem}"
                         for key, problem in (("spentTokens", token_problem), ("spentUsd", usd_problem)) if problem]
    for event in _json_lines(workspace, f"{folder}/journal.jsonl"):
        if event.get("kind") == "spawned":
            run.spawned += 1
            label = event.get("label")
            if isinstance(label, str) and label and label != "root":
                run.workers += 1
                run.subtasks.append(label[:SUBTASK_LABEL_LIMIT])
        elif event.get("kind") == "settled":
            run.settled += 1
    for worker_file in sorted((directory / "workers").glob("*.ndjson")):
        for event in _json_lines(workspace, f"{folder}/workers/{worker_file.name}"):
            if event.get("kind") == "started" and isinstance(event.get("cwd"), str):
                run.worker_cwds.append(event["cwd"])
            elif event.get("kind") == "settled":
                tokens = json_table(json_table(event.get("spend")).get("tokens"))
                run.settled_tokens += json_count(tokens.get("input")) + json_count(tokens.get("output"))
    return run


class SupervisorArm:
    """SUP: the loops supervisor driver, run through a command template in the loops checkout."""

    #: Its workers are opencode, which says a setup failure its own way; the driver leaves each worker's stderr in
    #: the run dir (beside its brain log) as ``<worker>.stderr.log``.
    config_failures = replace(CONFIG_FAILURES, outputs=("*.stderr.log",))

    arm_settings = SUPERVISOR_SETTINGS

    def __init__(self, spec: ArmSpec, suite: Suite):
        reader = SettingsReader(spec, self.arm_settings)
        origin = spec.origin
        loops_repo = reader.read(LOOPS_REPO)
        assert loops_repo is not None
        if not loops_repo.is_dir():
            raise ArmConfigError(f"{origin}: field 'loops_repo': {loops_repo} is not a directory")
        self.loops_repo = loops_repo
        self.loops_commit = _git_head(loops_repo, origin)
        self.command: list[str] = reader.read(COMMAND)
        if not self.command:
            raise ArmConfigError(f"{origin}: field 'command' must not be empty")
        self.shim = reader.read(SHIM)
        self.extension = reader.read(EXTENSION) or loops_repo / "extensions" / "pi" / "loops.ts"
        self._check_template(origin)
        check_program(self.command, suite, origin, "command")
        self.worker_model: str = reader.read(WORKER_MODEL)
        self.driver_model: str = reader.read(DRIVER_MODEL)
        self.params_defaults = {
            "budget": reader.read(BUDGET),
            "maxSandboxes": reader.read(MAX_SANDBOXES),
            "maxUsd": reader.read(MAX_USD),
            "maxDepth": reader.read(MAX_DEPTH),
        }
        self.verify_cmd: str | None = reader.read(VERIFY_CMD)
        self.suffix: str = read_worker_suffix(reader, suite)
        self.timeout: float = reader.read(TIMEOUT)
        self.knobs = {**DEFAULT_KNOBS, **read_env(reader)}
        self.network = read_network(reader)  # the agent phase's (cell.network)
        computed_grace = cancel_grace(self.knobs, origin)  # validates the knob even when 'grace' overrides it
        self.grace: float = reader.read(GRACE) or computed_grace
        self.secrets = read_secrets(reader, suite)
        named: str = reader.read(OPENCODE)
        executable = find_program(named, suite, origin, "opencode")
        #: What the driver's workers run, as named (a link in another node_modules, say) and as found:
        #: both shown read-only in the sandbox, with their node_modules.
        self.opencode = tuple(dict.fromkeys([*([str(suite.base_dir / named)] if "/" in named else []), executable]))
        self.home = read_opencode_home(reader, executable)
        # the workers' calls go where opencode's providers send them; the driver's own are not metered
        self.metering = read_metering(reader, NO_CAP, self.home.provider_urls(),
                                      self.worker_model.split("/", 1)[0], partial=True)
        self.prices = suite.prices
        reader.finish()
        self.spec = spec

    def _check_template(self, origin: str) -> None:
        used = check_template(self.command, PLACEHOLDERS, origin, "command")
        if "shim" in used and (self.shim is None or not self.shim.is_file()):
            raise ArmConfigError(f"{origin}: field 'shim': the command uses {{shim}}, so 'shim' must name the "
                                 f"driver shim file (got {self.shim})")

    def params(self, request: CellRequest) -> dict[str, Any]:
        return {
            "task": request.instance.problem_statement + self.suffix,
            "workspaceDir": str(request.workspace.path),
            "budget": self.params_defaults["budget"],
            "verifyCmd": self.verify_cmd if self.verify_cmd is not None else request.instance.verify,
            "workerModel": self.worker_model,
            "driverModel": self.driver_model,
            "maxSandboxes": self.params_defaults["maxSandboxes"],
            "maxUsd": self.params_defaults["maxUsd"],
            "maxDepth": self.params_defaults["maxDepth"],
        }

    def probe_call(self) -> ProbeCall | None:
        """The one call ``--arena-preflight`` makes for the arm: its workers' model, as their opencode config
        says (the driver's own model calls are the loops driver's business and are not probed)."""
        return self.home.probe_call(self.worker_model)

    @property
    def env(self) -> dict[str, str]:
        """What the driver (and so its workers) runs with beside the cell's environment: the knobs and ``env``."""
        return self.knobs

    def run(self, request: CellRequest) -> ArmResult:
        workspace = request.workspace.path
        self.home.install(request)
        shutil.rmtree(workspace / ".loops", ignore_errors=True)
        params = request.run_dir / "params.json"
        params.write_text(json.dumps(self.params(request), indent=1, allow_nan=False), encoding="utf-8")
        values = {"shim": str(self.shim), "extension": str(self.extension), "workspace": str(workspace),
                  "params": str(params), "run_dir": str(request.run_dir), "loops_repo": str(self.loops_repo)}
        env = {**OPENCODE_QUIET_ENV, **self.knobs, "LOOPS_BRAIN_LOG": str(request.run_dir / "brain.jsonl")}
        outcome = run_agent(
            [part.format_map(values) for part in self.command], cwd=self.loops_repo,
            env=request.cell.env(env), secrets=self.secrets, sandbox=request.sandbox, timeout=self.timeout,
            grace=self.grace, stdout=request.run_dir / "driver.log", stderr=request.run_dir / "driver.stderr.log",
            what="the supervisor driver", programs=self.opencode,
            read_only=[self.loops_repo, self.home.packages,
                       *(path for path in (self.shim, self.extension) if path is not None)],
        )
        run = read_supervisor_run(workspace)
        status, error = ArmStatus.COMPLETED, None
        if outcome.status != ArmStatus.COMPLETED:
            status = ArmStatus.INTERRUPTED if outcome.status == ArmStatus.INTERRUPTED else ArmStatus.ARM_ERROR
            error = f"{outcome.error} (supervisor state {run.status or 'missing'})"
        elif run.status != "completed":
            status, error = ArmStatus.ARM_ERROR, f"supervisor state {run.status or 'missing'}; expected completed"
        spent = self.account(request, run)
        recovered = dict(spent.details) or None
        return ArmResult(
            status=status, error=error, usage=spent.usage, models=dict(spent.models),
            asked_model=self.worker_model, served_model=spent.served_model,
            provenance={**self.home.provenance, "loops_repo": str(self.loops_repo),
                        "loops_commit": self.loops_commit, "env_knobs": self.knobs,
                        **({"secrets": self.secrets.describe()} if self.secrets else {})},
            details=accounting_errors(
                {"supervisor": run.to_json(), "recovered_worker_spend": recovered,
                 "driver_returncode": outcome.returncode, "driver_seconds": round(outcome.seconds, 3)},
                [*run.problems, (recovered or {}).get("accounting_error", "")]),
        )

    def account(self, request: CellRequest, run: SupervisorRun) -> Accounting:
        """Workers' spend recovered from the store, plus the driver's own reported spend; never raises.

        ``usage`` tokens are the workers' (the driver reports one undivided
        total, kept in the details); its dollars are the workers' plus the
        driver's. ``models`` holds each worker model's spend, with the
        driver's dollars added to the driver model's entry, so the entries
        sum to the cell's cost. Worker spend is unknown (null) when the store
        cannot be read, or when a worker ran whose cwd matches no session.
        The served model(s) are the workers'; the details, the spend recovered from the store
        (empty when the store could not be read).
        """
        try:
            return self._account(request, run)
        except Exception as error:  # any failure: the driver ran, its spend is unknown, not lost
            return Accounting(details={"accounting_error": f"{type(error).__name__}: {error}"})

    def _account(self, request: CellRequest, run: SupervisorRun) -> Accounting:
        sessions = worker_sessions(read_sessions(request.cell.opencode_db) if run.worker_cwds else [],
                                   run.worker_cwds)
        driver = Usage(cost_usd=run.spent_usd, cost_source="reported" if run.spent_usd is not None else "unknown")
        if sessions is None:
            return Accounting(models={self.driver_model: driver})
        found = {session.directory for session in sessions}
        unmatched = sorted(set(run.worker_cwds) - found)
        models = sessions_by_model(sessions, self.prices)
        workers = add_usages(models.values())
        output = (None if workers.output_tokens is None or workers.reasoning_tokens is None
                  else workers.output_tokens + workers.reasoning_tokens)
        recovered = accounting_errors(
            {"sessions": len(sessions), "input_tokens": workers.input_tokens, "output_tokens": output,
             "cost_usd": workers.cost_usd, "cost_source": workers.cost_source, "unmatched_cwds": unmatched},
            (problem for session in sessions for problem in session.problems))
        served = _served(models)
        models = _with_driver(models, self.driver_model, driver)
        if unmatched or (run.workers and not run.worker_cwds):
            # A worker ran, but what it spent is not in the store: the total is unknown, never a partial sum.
            return Accounting(Usage(), models, served, recovered)
        cost = None if workers.cost_usd is None or run.spent_usd is None else round(workers.cost_usd + run.spent_usd, 9)
        source = workers.cost_source if cost is not None else "unknown"
        usage = Usage(workers.input_tokens, workers.output_tokens, workers.reasoning_tokens,
                      workers.cache_read_tokens, workers.cache_write_tokens, None, None, cost, source)
        return Accounting(usage, models, served, recovered)


def _with_driver(models: Mapping[str, Usage], driver_model: str, driver: Usage) -> dict[str, Usage]:
    """The workers' per-model spend with the driver's dollars in the driver model's entry (added, never replacing)."""
    merged = dict(models)
    workers = merged.get(driver_model)
    if workers is None:
        merged[driver_model] = driver
        return merged
    cost = None if workers.cost_usd is None or driver.cost_usd is None else round(workers.cost_usd + driver.cost_usd, 9)
    merged[driver_model] = replace(workers, cost_usd=cost, cost_source=workers.cost_source if cost is not None
                                   else "unknown")
    return merged


def _served(worker_models: Mapping[str, Usage]) -> str | None:
    """The models the workers' sessions were served by (sessions naming no model are left out)."""
    served = sorted(model for model in worker_models if model != UNKNOWN_MODEL)
    return ",".join(served) or None


def cancel_grace(knobs: Mapping[str, str], origin: str) -> float:
    """``DRIVER_CANCEL_TIMEOUT_MS`` + 10 s: the driver's own cancellation deadline, and time to settle."""
    raw = knobs.get("DRIVER_CANCEL_TIMEOUT_MS", DEFAULT_KNOBS["DRIVER_CANCEL_TIMEOUT_MS"])
    try:
        milliseconds = float(raw)
    except ValueError:
        milliseconds = -1
    if not milliseconds > 0:
        raise ArmConfigError(f"{origin}: field 'env': DRIVER_CANCEL_TIMEOUT_MS = {raw!r} is not a positive number")
    return milliseconds / 1000 + SETTLE_SECONDS


def _git_head(repo: Path, origin: str) -> str:
    completed = run_git("rev-parse", "HEAD", cwd=repo)
    if completed.returncode != 0:
        raise ArmConfigError(f"{origin}: field 'loops_repo': {repo} is not a git checkout with a commit "
                             f"({completed.stderr.decode(errors='replace').strip()[:200]})")
    return completed.stdout.decode().strip()


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"supervisor": SupervisorArm}
