"""What the agent CLI kinds share: one base for ``claude-code``, ``codex``, ``gemini-cli``, ``mini-swe-agent``.

Each kind is a subclass of ``CliAgentArm`` in its own module that says only
what is its own: its command line (non-interactive, with the permissions that
let it edit and run commands), its config files and variables, where its
login file goes, how to read its report and its transcripts. This base does
the rest the same way for all of them:

- the agent's **private config dir**, ``<cell>/agent`` (mode 0700), which
  the kind points its variable at (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``,
  ``GEMINI_CLI_HOME``, ``MSWEA_GLOBAL_CONFIG_DIR``): the user's own
  setting of that variable never reaches the agent, so two cells never share one;
- the user's **auth**: API keys through ``secrets`` (dotenvx, as for every
  agent), or a login file (``auth = "..."``) copied into the config dir, mode 0600;
- the **process**: ``agent.run_agent`` (own process group, timeout, grace,
  Ctrl-C), with a live ``max_usd`` / ``max_tokens`` watch over what the
  agent writes as it goes (``LiveUsage``);
- **settling**, whatever the ending (completed, arm error, timeout, over
  budget, interrupted): the transcripts copied into the run dir, the spend
  read (the agent's final report, else its per-call files), each model
  priced by its own name, then by the asked model, and the final cap check;
- the agent's ``--version`` in ``provenance``.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from ..suite import Suite
from ..usage import Usage, accounting_errors, add_usages, cost_problem, count_problem, price_for, price_for_served
from .agent import (
    AgentOutcome,
    SpendCap,
    find_program,
    over_cap,
    read_cap,
    read_env,
    read_secrets,
    run_agent,
    write_prompt,
)
from .base import ArmConfigError, ArmResult, ArmSpec, CellRequest, SettingsReader

DEFAULT_TIMEOUT = 1000.0
DEFAULT_GRACE = 10.0
#: Where the agent's transcripts are copied, inside the run dir.
TRANSCRIPT_DIR = "transcript"


# -- reading what an agent reports -----------------------------------------------------------


class FigureReader:
    """Reads token counts and costs out of an agent's JSON, collecting why a figure was refused.

    A field the agent's format does not have is 0 (``absent=0``); a field it has
    but gives as something that is not a plausible count (a string, NaN, a
    negative number) is unknown (None), and ``problems`` says where and why.
    """

    def __init__(self, where: str):
        self.where = where
        self.problems: list[str] = []

    def count(self, table: Any, key: str, absent: int | None = 0) -> int | None:
        value = table.get(key) if isinstance(table, Mapping) else None
        if value is None:
            return absent
        problem = count_problem(value)
        if problem:
            self.problems.append(f"{self.where}: {key} {problem}")
            return None
        return int(value)

    def rest(self, total: int | None, *parts: int | None) -> int | None:
        """``total`` minus the ``parts`` a format counts inside it (cached inside input, say).

        Unknown (None) when a figure is unknown, or when the parts are more than the total
        (a report that does not add up is not believed; ``problems`` says so).
        """
        if total is None or any(part is None for part in parts):
            return None
        rest = total - sum(part for part in parts if part is not None)
        if rest < 0:
            self.problems.append(f"{self.where}: a total of {total} is less than its parts {list(parts)}")
            return None
        return rest

    def cost(self, table: Any, key: str) -> float | None:
        value = table.get(key) if isinstance(table, Mapping) else None
        if value is None:
            return None
        problem = cost_problem(value)
        if problem:
            self.problems.append(f"{self.where}: {key} {problem}")
            return None
        return float(value)


def call_usage(input_tokens: int | None, output_tokens: int | None, reasoning_tokens: int | None,
               cache_read_tokens: int | None, cache_write_tokens: int | None,
               cost_usd: float | None = None) -> Usage:
    """One model call in the ledger's disjoint split (input without cache, output without reasoning)."""
    context = (None if None in (input_tokens, cache_read_tokens, cache_write_tokens)
               else (input_tokens or 0) + (cache_read_tokens or 0) + (cache_write_tokens or 0))
    return Usage(input_tokens, output_tokens, reasoning_tokens, cache_read_tokens, cache_write_tokens, 1, context,
                 cost_usd if cost_usd is not None else 0.0, "reported")


@dataclass
class CallTally:
    """Model calls by a key of the agent's own (a message id, a response id), each counted once.

    Agents log a call more than once as it grows (Claude per content block,
    Gemini as tool calls are added): a later entry for a key replaces the earlier.
    """

    calls: dict[str, tuple[str, Usage]] = field(default_factory=dict)

    def add(self, key: str, model: str, usage: Usage) -> None:
        self.calls[key] = (model, usage)

    def by_model(self) -> dict[str, Usage]:
        grouped: dict[str, list[Usage]] = {}
        for model, usage in self.calls.values():
            grouped.setdefault(model, []).append(usage)
        return {model: add_usages(usages) for model, usages in grouped.items()}


class JsonLinesFollower:
    """The JSON objects appended, one a line, to a set of files since the last poll, each file followed apart.

    A half-written last line waits for the next poll (``final`` reads it too,
    once the writer is gone); a line that is not a JSON object is skipped.
    """

    def __init__(self) -> None:
        self.offsets: dict[Path, int] = {}

    def poll(self, paths: Iterable[Path], final: bool = False) -> list[tuple[Path, dict[str, Any]]]:
        found: list[tuple[Path, dict[str, Any]]] = []
        for path in sorted(paths):
            offset = self.offsets.get(path, 0)
            try:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    data = handle.read()
            except OSError:
                continue
            end = len(data) if final else data.rfind(b"\n") + 1
            self.offsets[path] = offset + end
            for line in data[:end].splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict):
                    found.append((path, entry))
        return found


@dataclass(frozen=True)
class AgentSpend:
    """What the agent's own files say it spent, per model (costs as it reported them, else 0)."""

    models: Mapping[str, Usage]
    served_model: str | None
    #: "report" (its final report), "transcript" (its per-call files: a run that did not finish) or "none".
    source: str
    problems: Sequence[str] = ()
    #: The agent's own words on a failure (an error event, an error result), to add to the arm's error.
    error: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


NO_SPEND = AgentSpend({}, None, "none")


class LiveUsage:
    """What the agent has spent so far, read from a file it writes as it runs; ``poll`` is called often."""

    def poll(self) -> Mapping[str, Usage]:
        raise NotImplementedError


class UsageWatch:
    """A ``should_stop`` for ``run_agent``: the live spend, priced per model, against a ``SpendCap``."""

    def __init__(self, cap: SpendCap, live: LiveUsage, price: PriceOf):
        self.cap = cap
        self.live = live
        self.price = price
        self.reason: str | None = None

    def __call__(self) -> str | None:
        try:
            models = self.live.poll()
        except Exception:  # a file the agent is halfway through writing: the next poll reads it
            return None
        spent = add_usages(usage.priced(self.price(model)) for model, usage in models.items())
        self.reason = self.cap.exceeded(spent) if models else None
        return "over_budget" if self.reason else None


class PriceOf:
    """A model's price by its own name, else the asked model's (``usage.price_for_served``)."""

    def __init__(self, prices: Mapping[str, Mapping[str, float]], asked: str | None):
        self.prices = prices
        self.asked = asked

    def __call__(self, model: str | None) -> Mapping[str, float] | None:
        return price_for_served(self.prices, model, self.asked)


# -- the base ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentCall:
    """How one cell runs the agent: its argv, its stdin, its own variables, where its stdout goes."""

    argv: list[str]
    env: Mapping[str, str]
    stdout: Path
    stdin: Path | None = None


class CliAgentArm:
    """An agent CLI run non-interactively in the workspace; subclasses say what is the agent's own.

    Settings every such kind reads: ``model``, ``executable``, ``args`` (added to
    its command line), ``auth`` (a login file), ``timeout``, ``grace``, ``env``,
    ``secrets``, ``worker_suffix``, ``max_usd``, ``max_tokens``; a subclass adds
    its own in ``configure``.
    """

    #: The kind's name, also ``provenance.agent``.
    kind: ClassVar[str]
    #: The program looked up when ``executable`` is not set.
    program: ClassVar[str]
    model_required: ClassVar[bool] = True
    #: The variable(s) that must point into the cell; the user's values never pass through.
    private_variables: ClassVar[tuple[str, ...]] = ()
    #: Where a login file (``auth``) goes, relative to the agent's config dir.
    login_file: ClassVar[str]

    def __init__(self, spec: ArmSpec, suite: Suite):
        reader = SettingsReader(spec)
        self.spec = spec
        self.model: str | None = reader.string("model", required=self.model_required)
        self.executable = find_program(reader.string("executable", self.program), suite, spec.origin, "executable")
        self.args: list[str] = reader.strings("args", [])
        self.timeout: float = reader.number("timeout", DEFAULT_TIMEOUT)
        self.grace: float = reader.number("grace", DEFAULT_GRACE)
        self.suffix: str = reader.string("worker_suffix", suite.worker_suffix)
        self.env = read_env(reader)
        clash = sorted(set(self.env) & set(self.private_variables))
        if clash:
            raise ArmConfigError(f"{spec.origin}: field 'env': {clash[0]} is the agent's config dir, which the "
                                 f"harness points into each cell (two cells must never share one); leave it out")
        self.secrets = read_secrets(reader, suite)
        self.auth = self._read_auth(reader)
        self.prices = suite.prices
        self.price_of = PriceOf(suite.prices, self.model)
        self.cap = read_cap(reader, price_for(suite.prices, self.model), self.model)
        self.configure(reader, suite)
        reader.finish()
        self.version = self.agent_version()

    def _read_auth(self, reader: SettingsReader) -> Path | None:
        value: str | None = reader.string("auth")
        if value is None:
            return None
        path = (reader.spec.base_dir / os.path.expanduser(value)).resolve()
        if not path.is_file():
            raise ArmConfigError(f"{reader.spec.origin}: field 'auth': {path} is not a file (the agent's login "
                                 f"file, copied into each cell as {self.login_file})")
        return path

    # -- what a kind says ----------------------------------------------------------------------

    def configure(self, reader: SettingsReader, suite: Suite) -> None:
        """Read the kind's own settings."""

    def agent_version(self) -> str:
        """``EXECUTABLE --version``, asked with its config dir (and HOME) in a throwaway directory.

        Some CLIs create their state dirs even for ``--version`` (Gemini's ``.gemini``, Codex's ``tmp``):
        not in the user's.
        """
        return quiet_version(self.executable, self.private_variables, self.spec.origin)

    def prepare(self, request: CellRequest, home: Path, prompt: Path) -> AgentCall:
        """Write the agent's config files into ``home`` and say how to run it."""
        raise NotImplementedError

    def live_usage(self, request: CellRequest, home: Path, call: AgentCall) -> LiveUsage:
        """What to follow for the live cap."""
        raise NotImplementedError

    def transcripts(self, request: CellRequest, home: Path) -> Iterable[tuple[Path, str]]:
        """The agent's transcript files, each with its name under ``transcript/`` in the run dir."""
        raise NotImplementedError

    def read_spend(self, request: CellRequest, home: Path, call: AgentCall, outcome: AgentOutcome) -> AgentSpend:
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
            write_private(home / self.login_file, self.auth.read_bytes())
        call = self.prepare(request, home, prompt)
        watch = UsageWatch(self.cap, self.live_usage(request, home, call), self.price_of) if self.cap.is_set else None
        # The kind's variables last: a user's CLAUDE_CONFIG_DIR (say) must not send two cells to one dir.
        env = request.cell.env({**self.env, **call.env})
        outcome = run_agent(call.argv, cwd=request.workspace.path, env=env, secrets=self.secrets,
                            timeout=self.timeout, grace=self.grace, stdout=call.stdout,
                            stderr=request.run_dir / "stderr.log", stdin=call.stdin, should_stop=watch,
                            what=self.kind)
        return self.settle(request, home, call, outcome, watch)

    def settle(self, request: CellRequest, home: Path, call: AgentCall, outcome: AgentOutcome,
               watch: UsageWatch | None) -> ArmResult:
        """After the agent, however it ended: keep its transcripts, read its spend, check the cap. Never raises."""
        problems: list[str] = []
        try:
            copied = copy_transcripts(self.transcripts(request, home), request.run_dir / TRANSCRIPT_DIR)
        except Exception as failure:  # a transcript that cannot be copied must not lose the cell's spend
            copied, problems = [], [f"transcripts not copied: {type(failure).__name__}: {failure}"]
        try:
            spend = self.read_spend(request, home, call, outcome)
        except Exception as failure:  # the agent ran: its spend is unknown, never lost to an accounting bug
            spend = replace(NO_SPEND, problems=[f"accounting failed: {type(failure).__name__}: {failure}"])
        models = {model: usage.priced(self.price_of(model)) for model, usage in spend.models.items()}
        usage = add_usages(models.values()) if models else Usage()
        outcome = self.check_report(spend, outcome)
        error = outcome.error
        if outcome.status == "over_budget" and watch is not None and watch.reason:
            error = f"{self.kind} stopped: {watch.reason}"
        elif outcome.status == "arm_error" and spend.error:
            error = f"{error}: {spend.error[:500]}"
        capped = over_cap(self.cap, outcome, usage, self.kind)
        if capped is not outcome:
            outcome, error = capped, capped.error
        details = accounting_errors(
            {"usage_source": spend.source, "transcripts": copied, **spend.details,
             "returncode": outcome.returncode, "agent_seconds": round(outcome.seconds, 3)},
            [*problems, *spend.problems])
        provenance: dict[str, Any] = {"agent": self.kind, "agent_version": self.version}
        if self.secrets:
            provenance["secrets"] = self.secrets.describe()
        if self.auth is not None:
            provenance["auth"] = str(self.auth)
        return ArmResult(status=outcome.status, error=error, usage=usage, models=models, asked_model=self.model,
                         served_model=spend.served_model, provenance=provenance, details=details)


@functools.lru_cache
def quiet_version(executable: str, variables: tuple[str, ...], origin: str) -> str:
    """Asked once per process (every arm is built on the controller and on each xdist worker)."""
    with tempfile.TemporaryDirectory(prefix="arena-version-") as scratch:
        env = {**os.environ, "HOME": scratch, **dict.fromkeys(variables, scratch)}
        try:
            done = subprocess.run([executable, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=120, check=True, env=env, cwd=scratch)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ArmConfigError(f"{origin}: cannot run {executable} --version: {error}") from None
        except subprocess.CalledProcessError as error:
            raise ArmConfigError(f"{origin}: {executable} --version exited with {error.returncode}: "
                                 f"{error.stderr[-300:]}") from None
    return done.stdout.strip()


def copy_transcripts(files: Iterable[tuple[Path, str]], destination: Path) -> list[str]:
    """Copy each (file, name) under ``destination``; the names copied, in order."""
    copied = []
    for source, name in files:
        if not source.is_file():
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        copied.append(f"{TRANSCRIPT_DIR}/{name}")
    return copied


def under(root: Path, pattern: str) -> list[tuple[Path, str]]:
    """Files under ``root`` matching ``pattern``, each named by its path relative to ``root``."""
    if not root.is_dir():
        return []
    return [(path, path.relative_to(root).as_posix()) for path in sorted(root.glob(pattern)) if path.is_file()]


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by the owner only (a login file, an agent's config)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


def read_json_file(path: Path) -> Any:
    """The JSON document in ``path``, or None when it is missing or not (yet) whole JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file (other lines skipped); none when it is missing."""
    return [entry for _, entry in JsonLinesFollower().poll([path], final=True)]


def table(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def text(value: Any) -> str | None:
    """``value`` if it is a non-empty string."""
    return value if isinstance(value, str) and value else None
