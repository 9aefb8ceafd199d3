"""The ``command`` kind: any agent CLI, from a command template.

``command`` is an argv list whose items may hold the placeholders
``{prompt_file}``, ``{workspace}``, ``{model}``, ``{run_dir}`` and ``{base_url}``; with
``shell = true`` it is one shell string instead (placeholder values are then
shell-quoted). The agent runs with cwd = the workspace, stdout and stderr to
files in the run dir, in its own process group, like every agent.

Usage comes from ``usage``: ``"file"`` (default) reads the JSON object the
agent may write at ``$ARENA_USAGE_FILE`` (``spend.usage_file``: fields of the
ledger's usage, ``model`` for the served model, ``models`` for several; a value
that is not a plausible number is unknown, with ``details.accounting_error``
saying why); a parser name reads the agent's stdout
(``"opencode"``: opencode's ``--format json`` stream, which also enables the
live ``max_usd`` / ``max_tokens`` cap and the cell's opencode store).

Metered (``--arena-meter`` or ``meter = true``), the agent's calls go through
the harness's proxy: ``upstream`` is the URL they would go to, and the cell's
route for it is ``{base_url}`` and the value of each variable ``base_url_env``
names (e.g. ``["OPENAI_BASE_URL"]``); ``max_usd`` / ``max_tokens`` are then
held at the proxy, whatever the usage source.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ..agents.opencode import StreamFollower
from ..spend.budget import CapWatch
from ..spend.prices import price_for
from ..spend.usage import Accounting
from ..spend.usage_file import account_usage_file
from ..suite import ArmSpec, Suite
from .agent import (
    ENV_NAME,
    MODEL_UPSTREAM,
    check_program,
    check_template,
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
    MAX_TOKENS,
    MAX_USD,
    METER,
    MODEL,
    UPSTREAM,
    ArmConfigError,
    ArmKind,
    ArmResult,
    CellRequest,
    ResolvedProgram,
    Setting,
    SettingsReader,
    boolean,
    other,
    read_run,
    strings,
    text,
)
from .opencode import settle_opencode_run
from .opencode_home import OPENCODE_HOME_SETTINGS, OPENCODE_QUIET_ENV, OpencodeHome, read_opencode_home

PLACEHOLDERS = ("prompt_file", "workspace", "model", "run_dir", "base_url")
USAGE_SOURCES = ("file", "opencode")
USAGE_FILE_VARIABLE = "ARENA_USAGE_FILE"

COMMAND = other("command", "a list of strings (or a string with shell = true)",
                "the argv list, or one string with `shell = true`", shown="required")
SHELL = boolean("shell", "run `command` as a shell string", False)
STDIN = text("stdin", '`"prompt"`: the prompt file on stdin; `"none"`: `/dev/null`', "none")
USAGE = text("usage", '`"file"` or `"opencode"` (see above)', "file")
OPENCODE = text("opencode", 'the opencode CLI, with `usage = "opencode"` only', "opencode")
BASE_URL_ENV = strings("base_url_env", "the variables set to the cell's route at the meter (the upstream's URL "
                                       'unmetered), `["OPENAI_BASE_URL"]`', [])
ONLY_WITH_OPENCODE = ' (with `usage = "opencode"` only)'


class CommandArm:
    """An agent CLI run from a template; usage from its usage file or a stream parser."""

    arm_settings: ClassVar[tuple[Setting[Any], ...]] = (
        COMMAND, SHELL, MODEL.but(meaning="the asked model: filled into `{model}`, priced, compared with the "
                                          "served one; required when the command uses `{model}`"),
        STDIN, USAGE, *AGENT_SETTINGS,
        MAX_USD.but(meaning=f"{MAX_USD.meaning}: with `usage = \"opencode\"` or the meter only"),
        MAX_TOKENS.but(meaning=f"{MAX_TOKENS.meaning}: with `usage = \"opencode\"` or the meter only"),
        OPENCODE, *(setting.but(meaning=setting.meaning + ONLY_WITH_OPENCODE) for setting in OPENCODE_HOME_SETTINGS),
        METER, UPSTREAM.but(meaning="the URL the agent's model calls go to: `{base_url}`, and the meter's upstream"),
        BASE_URL_ENV,
    )

    def __init__(self, spec: ArmSpec, suite: Suite):
        reader = SettingsReader(spec, self.arm_settings)
        self.shell: bool = reader.read(SHELL)
        command = reader.get(COMMAND.name, (list, str), None, COMMAND.accepts)
        if command is None:
            raise ArmConfigError(f"{spec.origin}: field 'command' is required (a list of strings)")
        if isinstance(command, str) and not self.shell:
            raise ArmConfigError(f"{spec.origin}: field 'command': a string needs shell = true; "
                                 "otherwise give the argv as a list")
        if isinstance(command, list) and (self.shell or not command or not all(isinstance(c, str) for c in command)):
            raise ArmConfigError(f"{spec.origin}: field 'command': with shell = true give one string; "
                                 "otherwise a non-empty list of strings")
        assert isinstance(command, (str, list))
        self.command: str | list[str] = command if isinstance(command, str) else [str(part) for part in command]
        used = check_template([self.command] if isinstance(self.command, str) else self.command, PLACEHOLDERS,
                              spec.origin, "command")
        self.model: str | None = reader.read(MODEL)
        if "model" in used and not self.model:
            raise ArmConfigError(f"{spec.origin}: field 'model' is required: the command uses {{model}}")
        if isinstance(command, list):
            found = check_program(command, suite, spec.origin, "command")
            self.command = [found, *self.command[1:]] if found else self.command
            self.resolved_program = ResolvedProgram(command[0], found) if found else None
        self.timeout, self.grace, self.suffix = read_run(reader, suite)
        self.stdin: str = reader.read(STDIN)
        if self.stdin not in ("none", "prompt"):
            raise ArmConfigError(f"{spec.origin}: field 'stdin': {self.stdin!r} is not one of none, prompt")
        self.usage_source: str = reader.read(USAGE)
        if self.usage_source not in USAGE_SOURCES:
            raise ArmConfigError(f"{spec.origin}: field 'usage': {self.usage_source!r} is not one of "
                                 f"{', '.join(USAGE_SOURCES)}")
        self.env = read_env(reader)
        self.network = read_network(reader)  # the agent phase's (cell.network)
        self.secrets = read_secrets(reader, suite)
        self.prices = suite.prices
        self.price = price_for(suite.prices, self.model)
        capped = "max_usd" in spec.settings or "max_tokens" in spec.settings
        if self.usage_source == "file" and capped and spec.settings.get("meter") is not True:
            raise ArmConfigError(f"{spec.origin}: max_usd / max_tokens need a streamed usage (usage = \"opencode\") "
                                 "or the meter (meter = true); a usage file is only read at the end")
        self.cap = read_cap(reader, self.price, self.model)
        self.home: OpencodeHome | None = None
        if self.usage_source == "opencode":
            executable = find_program(reader.read(OPENCODE), suite, spec.origin, "opencode")
            self.home = read_opencode_home(reader, executable)
        self.upstream = reader.read(UPSTREAM)
        self.base_url_env: list[str] = reader.read(BASE_URL_ENV)
        bad = [name for name in self.base_url_env if not ENV_NAME.match(name)]
        if bad:
            raise ArmConfigError(f"{spec.origin}: field 'base_url_env': {bad[0]!r} is not a variable name")
        known = self.home.provider_urls() if self.home is not None else {}
        self.metering = read_metering(reader, self.cap, known,
                                      MODEL_UPSTREAM if self.home is None else (self.model or "").split("/", 1)[0])
        reader.finish()
        self.spec = spec

    def argv(self, values: Mapping[str, str]) -> list[str]:
        if isinstance(self.command, str):
            quoted = {name: shlex.quote(value) for name, value in values.items()}
            return ["/bin/sh", "-c", self.command.format_map(quoted)]
        return [part.format_map(values) for part in self.command]

    def run(self, request: CellRequest) -> ArmResult:
        prompt = write_prompt(request, self.suffix)
        usage_file = request.run_dir / "usage.json"
        streamed = self.usage_source != "file"
        stdout = request.run_dir / ("events.jsonl" if streamed else "stdout.log")
        base_url = self.upstream or ""
        if request.meter is not None and MODEL_UPSTREAM in request.meter.base_urls:
            base_url = request.meter.base_url(MODEL_UPSTREAM)
        values = {"prompt_file": str(prompt), "workspace": str(request.workspace.path),
                  "model": self.model or "", "run_dir": str(request.run_dir), "base_url": base_url}
        env = {**self.env, **dict.fromkeys(self.base_url_env, base_url), USAGE_FILE_VARIABLE: str(usage_file)}
        if self.home is not None:
            self.home.install(request)
            env = {**OPENCODE_QUIET_ENV, **env}
        # a usage file is read at the end: only a stream (or the meter, at its proxy) can hold a cap live
        watch = CapWatch(self.cap, StreamFollower(stdout)) if self.cap.is_set and streamed else None
        outcome = run_agent(
            self.argv(values), cwd=request.workspace.path, env=request.cell.env(env),
            secrets=self.secrets, sandbox=request.sandbox, timeout=self.timeout, grace=self.grace, stdout=stdout,
            stderr=request.run_dir / "stderr.log", stdin=prompt if self.stdin == "prompt" else None,
            should_stop=watch, what=f"command {self.spec.name}",
            read_only=[*files_named(self.env), *([self.home.packages] if self.home is not None else [])],
        )
        provenance: dict[str, Any] = dict(self.home.provenance) if self.home else {}
        if self.secrets:
            provenance["secrets"] = self.secrets.describe()
        if streamed:
            outcome, spent = settle_opencode_run(request, stdout, outcome, watch, self.cap, self.prices, self.price,
                                                 f"command {self.spec.name}")
        else:
            spent = self.account_file(usage_file)
        return ArmResult(status=outcome.status, error=outcome.error, usage=spent.usage, models=dict(spent.models),
                         asked_model=self.model, served_model=spent.served_model, provenance=provenance,
                         details={**spent.details, "returncode": outcome.returncode,
                                  "agent_seconds": round(outcome.seconds, 3)})

    def account_file(self, path: Path) -> Accounting:
        """What the usage file says the run spent; never raises once the agent has run."""
        return account_usage_file(path, self.prices, self.model)


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"command": CommandArm}
