"""What the agent CLI kinds share: one base for ``claude-code``, ``codex``, ``gemini-cli``, ``mini-swe-agent``.

Each kind is a subclass of ``CliAgentArm`` in its own module that says only what is its
own: its command line (non-interactive, with the permissions that let it edit and run
commands), its config files and variables, where its login file goes, where its
transcripts are; what it reports is read in ``spend/`` (one module per agent family). This
base does the rest the same way for all of them:

- the agent's **private config dir**, ``<cell>/agent`` (mode 0700), which the kind points
  its variable at (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``GEMINI_CLI_HOME``,
  ``MSWEA_GLOBAL_CONFIG_DIR``): the user's own setting of that variable never reaches the
  agent, so two cells never share one;
- the user's **auth**: API keys through ``secrets`` (dotenvx, as for every agent), or a
  login file (``auth = "..."``) copied into the config dir, mode 0600;
- the **process**: ``agent.run_agent`` (own process group, timeout, grace, Ctrl-C), with a
  live ``max_usd`` / ``max_tokens`` watch (``budget.CapWatch``) over what the agent writes
  as it goes;
- **settling**, whatever the ending (completed, arm error, timeout, over budget,
  interrupted): the transcripts copied into the run dir, the spend read (the agent's final
  report, else its per-call files), each model priced by its own name, then by the asked
  model, and the final cap check;
- the agent's ``--version`` in ``provenance``;
- **metering** (``--arena-meter`` or ``meter = true``): the kind's base-URL setting (a variable
  such as ``ANTHROPIC_BASE_URL``, or Codex's provider override) points at the cell's route of the
  meter, whose upstream is ``upstream``, else the URL the agent would call without the meter (the
  arm's ``env`` value of that variable, else the provider's public URL). The meter then holds
  ``max_usd`` / ``max_tokens`` at its proxy, in place of the watch over what the agent writes. A base
  URL in the arm's ``secrets`` is never read by the harness: a metered arm names it in ``upstream``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from .. import crossing
from ..agents.reports import NO_SPEND, AgentSpend, CallFollower, PricedCalls
from ..files import write_atomic
from ..outcome import AgentOutcome, ArmStatus
from ..spend.budget import CapWatch, over_cap
from ..spend.meter.cells import Metering
from ..spend.prices import Price, price_for, price_for_served
from ..spend.usage import Usage, accounting_errors, add_usages
from ..suite import ArmSpec, Suite
from .agent import (
    MODEL_UPSTREAM,
    agent_version,
    files_named,
    find_program,
    read_cap,
    read_env,
    read_metering,
    read_network,
    read_secrets,
    run_agent,
    write_prompt,
)
from .base import (
    AGENT_SETTINGS,
    ARGS,
    EXECUTABLE,
    MAX_TOKENS,
    MAX_USD,
    METER,
    MODEL,
    UPSTREAM,
    ArmConfigError,
    ArmResult,
    CellRequest,
    ResolvedProgram,
    Setting,
    SettingsReader,
    read_run,
    text,
)
from .misconfig import NO_FAILURES, KindFailures
from .preflight import ProbeCall

#: Where the agent's transcripts are copied, inside the run dir.
TRANSCRIPT_DIR = "transcript"


AUTH = text("auth", "a login file, copied into each cell's config dir, mode 0600")


def cli_settings(program: str, model: Setting[Any], auth: str, *own: Setting[Any]) -> tuple[Setting[Any], ...]:
    """An agent CLI kind's settings: its ``model`` (required or not), its own, then those every such kind reads.

    :param program: the CLI looked up when ``executable`` is not set.
    :param auth: what its login file is (``~/.claude/.credentials.json``).
    """
    return (model, *own, EXECUTABLE.but(default=program), ARGS,
            AUTH.but(meaning=f"a login file ({auth}), copied into each cell's config dir, mode 0600"),
            *AGENT_SETTINGS, MAX_USD, MAX_TOKENS, METER, UPSTREAM)


@dataclass(frozen=True)
class AgentCall:
    """How one cell runs the agent: its argv, its stdin, its own variables, where its stdout goes."""

    argv: list[str]
    env: Mapping[str, str]
    stdout: Path
    stdin: Path | None = None


class CliAgentArm:
    """An agent CLI run non-interactively in the workspace; subclasses say what is the agent's own.

    Settings every such kind reads (``cli_settings``): ``model``, ``executable``, ``args`` (added to its command
    line), ``auth`` (a login file), ``timeout``, ``grace``, ``worker_suffix``, ``env``, ``network``, ``secrets``,
    ``max_usd``, ``max_tokens``, ``meter``, ``upstream``; a subclass declares its own and reads them in ``configure``.
    """

    #: The kind's name, also ``provenance.agent``.
    kind: ClassVar[str]
    #: The program looked up when ``executable`` is not set (``cli_settings``).
    program: ClassVar[str]
    #: The kind's settings (``cli_settings``): what it reads, and what its docs page lists.
    arm_settings: ClassVar[tuple[Setting[Any], ...]]
    #: The variable(s) that must point into the cell; the user's values never pass through.
    private_variables: ClassVar[tuple[str, ...]] = ()
    #: Where a login file (``auth``) goes, relative to the agent's config dir.
    login_file: ClassVar[str]
    #: The variable that sets where the agent's model calls go (a metered cell points it at its route);
    #: None for a kind that says it otherwise (``routed_call``).
    base_url_variable: ClassVar[str | None] = None
    #: Where the agent's model calls go when nothing in the arm's table says otherwise.
    default_base_url: ClassVar[str]
    #: How the kind's CLI says its setup failed (a refused key, an unreachable endpoint...: ``arms.misconfig``).
    config_failures: ClassVar[KindFailures] = NO_FAILURES

    def __init__(self, spec: ArmSpec, suite: Suite):
        reader = SettingsReader(spec, self.arm_settings)
        self.spec = spec
        self.model: str | None = reader.read(MODEL)
        named = reader.read(EXECUTABLE)
        assert named is not None  # its default is the kind's program
        self.executable = find_program(named, suite, spec.origin, "executable")
        self.resolved_program = ResolvedProgram(named, self.executable)
        self.args: list[str] = reader.read(ARGS)
        self.timeout, self.grace, self.suffix = read_run(reader, suite)
        self.env = read_env(reader)
        self.network = read_network(reader)  # the agent phase's (cell.network)
        clash = sorted(set(self.env) & set(self.private_variables))
        if clash:
            raise ArmConfigError(f"{spec.origin}: field 'env': {clash[0]} is the agent's config dir, which the "
                                 f"harness points into each cell (two cells must never share one); leave it out")
        self.secrets = read_secrets(reader, suite)
        self.auth = self._read_auth(reader)
        self.prices = suite.prices
        self.cap = read_cap(reader, price_for(suite.prices, self.model), self.model)
        self.configure(reader, suite)
        self.metering = self.read_metering(reader)
        reader.finish()
        self.version = self.agent_version()

    def _read_auth(self, reader: SettingsReader) -> Path | None:
        value = reader.read(AUTH)
        if value is None:
            return None
        path = (reader.spec.base_dir / os.path.expanduser(value)).resolve()
        if not path.is_file():
            raise ArmConfigError(f"{reader.spec.origin}: field 'auth': {path} is not a file (the agent's login "
                                 f"file, copied into each cell as {self.login_file})")
        return path

    def read_metering(self, reader: SettingsReader) -> Metering:
        """``meter`` and ``upstream`` (default: ``model_base_url``); ``meter = true`` on an arm the meter cannot
        route is an ``ArmConfigError``."""
        problem = self.unmeterable()
        if problem is None:
            return read_metering(reader, self.cap, {MODEL_UPSTREAM: self.model_base_url()})
        wanted, _ = reader.read(METER), reader.read(UPSTREAM)
        if wanted:
            raise ArmConfigError(f"{reader.spec.origin}: {problem} (meter = true)")
        return Metering(wanted, (), self.cap, f"{reader.spec.origin}: {problem}")

    def probe_call(self) -> ProbeCall | None:
        """The one call ``--arena-preflight`` makes for the arm (``arms.preflight``); None: not probed."""
        return None

    def model_base_url(self) -> str:
        """The URL the agent's model calls go to without the meter: the arm's ``env`` value of
        ``base_url_variable``, else the kind's default."""
        if self.base_url_variable is not None and self.env.get(self.base_url_variable):
            return self.env[self.base_url_variable]
        return self.default_base_url

    def unmeterable(self) -> str | None:
        """Why the meter cannot route this arm's model calls (None when it can)."""
        return None

    def price_of(self, model: str | None) -> Price | None:
        """A model's price by its own name, else the asked model's."""
        return price_for_served(self.prices, model, self.model)

    # -- what a kind says ----------------------------------------------------------------------

    def configure(self, reader: SettingsReader, suite: Suite) -> None:
        """Read the kind's own settings."""

    def agent_version(self) -> str:
        """The agent's version for ``provenance``: ``EXECUTABLE --version``, its config dir in a throwaway one."""
        return agent_version(self.executable, self.spec.origin, self.private_variables)

    def prepare(self, request: CellRequest, home: Path, prompt: Path) -> AgentCall:
        """Write the agent's config files into ``home`` and say how to run it."""
        raise NotImplementedError

    def routed_call(self, request: CellRequest, call: AgentCall, route: str) -> AgentCall:
        """``call`` with the agent's model calls sent to ``route``, the cell's base URL at the meter."""
        assert self.base_url_variable is not None, f"{self.kind} names no base URL variable: it routes itself"
        return replace(call, env={**call.env, self.base_url_variable: route})

    def live_calls(self, request: CellRequest, home: Path, call: AgentCall) -> CallFollower:
        """What to follow for the live cap: the calls the agent logs as it runs."""
        raise NotImplementedError

    def transcripts(self, request: CellRequest, home: Path) -> list[tuple[Path, str]]:
        """The agent's transcript files, each with its name under ``transcript/`` in the run dir."""
        raise NotImplementedError

    def read_spend(self, request: CellRequest, home: Path, call: AgentCall) -> AgentSpend:
        """What the agent reported, from its final report, else from its per-call files."""
        raise NotImplementedError

    def check_report(self, spend: AgentSpend, outcome: AgentOutcome) -> AgentOutcome:
        """The outcome, made ``arm_error`` when the agent exited 0 but its report says it failed."""
        return outcome

    # -- the cell ------------------------------------------------------------------------------

    def run(self, request: CellRequest) -> ArmResult:
        home = request.cell.root / "agent"
        home.mkdir(mode=0o700, exist_ok=True)
        prompt = write_prompt(request, self.suffix)
        if self.auth is not None:
            write_atomic(home / self.login_file, self.auth.read_bytes())  # mode 0600
        call = self.prepare(request, home, prompt)
        if request.meter is not None:
            call = self.routed_call(request, call, request.meter.base_url(MODEL_UPSTREAM))
        # Metered, the cap is held at the proxy, which counts every call: the agent's own record is not watched.
        watch = (CapWatch(self.cap, PricedCalls(self.live_calls(request, home, call), self.price_of))
                 if self.cap.is_set and request.meter is None else None)
        # The kind's variables last: a user's CLAUDE_CONFIG_DIR (say) must not send two cells to one dir.
        env = request.cell.env({**self.env, **call.env})
        outcome = run_agent(call.argv, cwd=request.workspace.path, env=env, secrets=self.secrets,
                            sandbox=request.sandbox, timeout=self.timeout, grace=self.grace, stdout=call.stdout,
                            stderr=request.run_dir / "stderr.log", stdin=call.stdin, should_stop=watch,
                            what=self.kind, read_only=files_named(self.env))
        return self.settle(request, home, call, outcome, watch)

    def settle(self, request: CellRequest, home: Path, call: AgentCall, outcome: AgentOutcome,
               watch: CapWatch[PricedCalls] | None) -> ArmResult:
        """After the agent, however it ended: keep its transcripts, read its spend, check the cap. Never raises."""
        problems: list[str] = []
        refused: list[str] = []
        try:
            copied, refused = copy_transcripts(self.transcripts(request, home), home, request.run_dir)
        except Exception as failure:  # a transcript that cannot be copied must not lose the cell's spend
            copied, problems = [], [f"transcripts not copied: {type(failure).__name__}: {crossing.shown(str(failure))}"]
        try:
            spend = self.read_spend(request, home, call)
        except Exception as failure:  # the agent ran: its spend is unknown, never lost to an accounting bug
            spend = replace(NO_SPEND, problems=[f"accounting failed: {type(failure).__name__}: {failure}"])
        models = {model: usage.priced(self.price_of(model)) for model, usage in spend.models.items()}
        usage = add_usages(models.values()) if models else Usage()
        outcome = self.check_report(spend, outcome)
        if outcome.status == ArmStatus.OVER_BUDGET and watch is not None and watch.reason:
            outcome = replace(outcome, error=f"{self.kind} stopped: {watch.reason}")
        elif outcome.status == ArmStatus.ARM_ERROR and spend.error:
            outcome = replace(outcome, error=f"{outcome.error}: {spend.error[:500]}")
        outcome = over_cap(self.cap, outcome, usage, self.kind)
        details = accounting_errors(
            {"usage_source": spend.source, "transcripts": copied, **spend.details,
             **({"crossing_refused": refused} if refused else {}),
             "returncode": outcome.returncode, "agent_seconds": round(outcome.seconds, 3)},
            [*problems, *spend.problems])
        provenance: dict[str, Any] = {"agent": self.kind, "agent_version": self.version}
        if self.secrets:
            provenance["secrets"] = self.secrets.describe()
        if self.auth is not None:
            provenance["auth"] = str(self.auth)
        return ArmResult(status=outcome.status, error=outcome.error, usage=usage, models=models,
                         asked_model=self.model, served_model=spend.served_model, provenance=provenance,
                         details=details)


#: A transcript larger than this is copied up to it (the run dir's caps cut it further).
TRANSCRIPT_CAP = 256 << 20


def copy_transcripts(files: Iterable[tuple[Path, str]], home: Path, run_dir: Path) -> tuple[list[str], list[str]]:
    """Copy each (file under ``home``, name) to ``run_dir/transcript/name`` through the crossing: the names
    copied, in order, and the refusals (a link or a special file in the cell's HOME, or where the copy goes,
    is never followed)."""
    copied, refused = [], []
    for source, name in files:
        try:
            crossing.copy(home, source.relative_to(home).as_posix(), run_dir, f"{TRANSCRIPT_DIR}/{name}",
                          cap=TRANSCRIPT_CAP)
        except FileNotFoundError:
            continue
        except crossing.Refused as refusal:
            refused.append(str(refusal))
            continue
        copied.append(f"{TRANSCRIPT_DIR}/{name}")
    return copied, refused


def under(root: Path, pattern: str) -> list[tuple[Path, str]]:
    """Files under ``root`` matching ``pattern``, each named by its path relative to ``root``."""
    if not root.is_dir():
        return []
    return [(path, path.relative_to(root).as_posix()) for path in sorted(root.glob(pattern))
            if path.is_file() or path.is_symlink()]  # a link is listed: the copy refuses it, and says so
