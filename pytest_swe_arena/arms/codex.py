"""The ``codex`` kind: OpenAI's Codex CLI, ``codex exec``, in the workspace.

Runs ``codex exec --json --sandbox workspace-write [-m MODEL] -c ... - <
prompt.txt`` with ``CODEX_HOME`` in the cell. Its ``config.toml`` there is the
arm's ``config`` file (model providers, say) or empty; the offline switches go
on the command line as overrides (``analytics.enabled=false``: no analytics;
``features.plugins=false``: no plugin marketplace sync over git), so they hold
whatever the file says. Its usage is read in ``agents.codex``: ``turn.completed``
in the ``--json`` stream, and the rollouts' per-response records live and for a
run that never finished. Codex reports no cost: the suite's price table prices it.

Metered, the ``arena`` provider's ``base_url`` is the cell's route (``-c
model_providers.arena.base_url=...``); its upstream is the ``provider``'s
``base_url``. An arm without ``provider`` is metered as the provider
``arena`` with OpenAI's defaults (``https://api.openai.com/v1``, the key in
``OPENAI_API_KEY``); one whose ``config`` file or ``overrides`` choose another
``model_provider`` needs ``provider`` to be metered.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ..agents.codex import Rollouts, read_codex_spend
from ..agents.reports import AgentSpend, CallFollower
from ..files import write_atomic
from ..suite import Suite
from .agent import MODEL_UPSTREAM
from .base import MODEL, ArmConfigError, ArmKind, CellRequest, SettingsReader, path, table, text
from .cli_agent import AgentCall, CliAgentArm, cli_settings, under
from .misconfig import KindFailures, credentials, endpoint, quota, rate_limit
from .preflight import ProbeCall

#: Codex's own sandbox for its commands: "workspace-write" lets them write the workspace (and TMPDIR).
#: Its bwrap cannot start inside another sandbox, so in a cell the arena sandboxes (``--arena-sandbox``)
#: the default is "bypass": the arena's sandbox is the boundary; unsandboxed, "workspace-write".
SANDBOXES = {"workspace-write": ["--sandbox", "workspace-write"],
             "danger-full-access": ["--sandbox", "danger-full-access"],
             "bypass": ["--dangerously-bypass-approvals-and-sandbox"]}
OFFLINE_OVERRIDES = {"analytics.enabled": False, "features.plugins": False}


def toml_value(value: Any) -> str:
    """A ``-c key=value`` value: Codex parses it as TOML (JSON's strings, numbers and booleans are TOML's)."""
    return json.dumps(value)


PROVIDER_KEYS = ("base_url", "env_key", "wire_api", "name")
#: The provider ``provider`` defines (``arena``), with OpenAI's defaults for what it leaves out.
PROVIDER_DEFAULTS = {"name": "arena", "env_key": "OPENAI_API_KEY", "wire_api": "responses",
                     "base_url": "https://api.openai.com/v1"}


PROVIDER = table("provider", "a model provider named `arena`, and chosen: "
                 '`{base_url, env_key = "OPENAI_API_KEY", wire_api = "responses", name = "arena"}`')
SANDBOX = text("sandbox", 'Codex\'s own sandbox for its commands: `"workspace-write"`, `"danger-full-access"` '
                          'or `"bypass"`',
               shown='`"bypass"` in a sandboxed cell, else `"workspace-write"`')
CONFIG = path("config", "a `config.toml` for the cell's `CODEX_HOME`")
OVERRIDES = table("overrides", 'more `-c key=value` overrides, `{"model_reasoning_effort" = "high"}`', {})


def provider_overrides(reader: SettingsReader) -> dict[str, Any]:
    """``provider = {base_url, env_key, wire_api, name}``: a model provider named ``arena``, and chosen.

    ``env_key`` names the variable that holds the API key (default ``OPENAI_API_KEY``, from
    ``secrets``); Codex sends it as a Bearer token to ``{base_url}/responses``.
    """
    provider = reader.read(PROVIDER)
    if provider is None:
        return {}
    origin = f"{reader.spec.origin}: field 'provider'"
    unknown = sorted(set(provider) - set(PROVIDER_KEYS))
    if unknown:
        raise ArmConfigError(f"{origin}: unknown key {unknown[0]!r}; known: {', '.join(PROVIDER_KEYS)}")
    values = {**PROVIDER_DEFAULTS, "base_url": None, **provider}
    if not isinstance(values.get("base_url"), str) or not values["base_url"]:
        raise ArmConfigError(f"{origin}: 'base_url' is required (the provider's URL, e.g. https://api.openai.com/v1)")
    bad = next((key for key in PROVIDER_KEYS if not isinstance(values[key], str)), None)
    if bad:
        raise ArmConfigError(f"{origin}: {bad} = {values[bad]!r} is not a string")
    return arena_provider(values)


def arena_provider(values: Mapping[str, Any]) -> dict[str, Any]:
    """The overrides that define the provider ``arena`` from ``values`` (``PROVIDER_KEYS``) and choose it."""
    return {"model_provider": "arena", **{f"model_providers.arena.{key}": values[key] for key in PROVIDER_KEYS}}


def chosen_provider(config_text: bytes) -> str | None:
    """The ``model_provider`` a Codex config.toml chooses (None when it chooses none, or is no TOML)."""
    try:
        chosen = tomllib.loads(config_text.decode("utf-8", errors="replace")).get("model_provider")
    except tomllib.TOMLDecodeError:
        return None  # Codex will say what is wrong with it
    return str(chosen) if chosen is not None else None


#: How Codex says its setup failed (its ``error`` and ``turn.failed`` events: "unexpected status 401 ...").
CONFIG_FAILURES = KindFailures(
    "OPENAI_API_KEY or the provider's env_key, and the provider's base_url",
    (
        credentials(r"unexpected status 40[13]\b|401 Unauthorized|403 Forbidden|Incorrect API key|invalid_api_key"
                    r"|Missing environment variable|Not logged in"),
        quota(r"exceeded your current quota|unexpected status 402\b|Payment Required|insufficient_quota"
              r"|Quota exceeded|usage limit"),
        rate_limit(r"(last|unexpected) status:? 429\b|Too Many Requests"),
        endpoint(r"error sending request|Connection refused|dns error|unexpected status 404\b"),
    ),
)


class CodexArm(CliAgentArm):
    """Codex CLI, ``codex exec --json``, in its own sandbox that may write the workspace."""

    config_failures = CONFIG_FAILURES
    kind = "codex"
    program = "codex"
    private_variables = ("CODEX_HOME",)
    login_file = "auth.json"
    arm_settings = cli_settings(program, MODEL.required("`-m`"), "`~/.codex/auth.json`",
                                PROVIDER, CONFIG, OVERRIDES, SANDBOX)

    def configure(self, reader: SettingsReader, suite: Suite) -> None:
        self.sandbox: str | None = reader.read(SANDBOX)
        if self.sandbox is not None and self.sandbox not in SANDBOXES:
            raise ArmConfigError(f"{reader.spec.origin}: field 'sandbox': {self.sandbox!r} is not one of "
                                 f"{', '.join(SANDBOXES)}")
        config = reader.read(CONFIG)
        if config is not None and not config.is_file():
            raise ArmConfigError(f"{reader.spec.origin}: field 'config': {config} is not a file "
                                 "(Codex's config.toml for the cell)")
        self.config_text = config.read_bytes() if config is not None else b""
        overrides = reader.read(OVERRIDES)
        for key, value in overrides.items():
            if isinstance(value, (dict, list)) or value is None:
                raise ArmConfigError(f"{reader.spec.origin}: field 'overrides': {key} = {value!r} is not a "
                                     "string, number or boolean (a dotted key names a nested setting)")
        self.overrides: dict[str, Any] = {**OFFLINE_OVERRIDES, **provider_overrides(reader), **overrides}

    def probe_call(self) -> ProbeCall | None:
        if self.overrides.get("model_providers.arena.wire_api", "responses") != "responses":
            return None
        key = str(self.overrides.get("model_providers.arena.env_key", PROVIDER_DEFAULTS["env_key"]))
        return ProbeCall("responses", None, self.model_base_url(), key, self.model or "gpt-5")

    def model_base_url(self) -> str:
        return str(self.overrides.get("model_providers.arena.base_url", PROVIDER_DEFAULTS["base_url"]))

    def unmeterable(self) -> str | None:
        if "model_providers.arena.base_url" in self.overrides:
            return None
        chosen = self.overrides.get("model_provider") or chosen_provider(self.config_text)
        if chosen is None:
            return None
        return (f"its Codex config chooses model_provider {chosen!r}, whose calls the meter cannot route: set "
                "provider = {base_url = \"...\", env_key = \"...\"} (the provider arena, which the meter routes)")

    def routed_call(self, request: CellRequest, call: AgentCall, route: str) -> AgentCall:
        return call  # prepare has put the route in the arena provider's base_url

    def cell_overrides(self, request: CellRequest) -> dict[str, Any]:
        """The arm's overrides; metered, the provider ``arena`` sends its calls to the cell's route."""
        if request.meter is None:
            return self.overrides
        route = request.meter.base_url(MODEL_UPSTREAM)
        if "model_providers.arena.base_url" in self.overrides:
            return {**self.overrides, "model_providers.arena.base_url": route}
        return {**self.overrides, **arena_provider({**PROVIDER_DEFAULTS, "base_url": route})}

    def prepare(self, request: CellRequest, home: Path, prompt: Path) -> AgentCall:
        write_atomic(home / "config.toml", self.config_text)
        overrides = [arg for key, value in self.cell_overrides(request).items()
                     for arg in ("-c", f"{key}={toml_value(value)}")]
        own_sandbox = self.sandbox or ("bypass" if request.sandbox is not None else "workspace-write")
        argv = [self.executable, "exec", "--json", *SANDBOXES[own_sandbox],
                *(["-m", self.model] if self.model else []), *overrides, *self.args, "-"]
        return AgentCall(argv, {"CODEX_HOME": str(home)}, request.run_dir / "events.jsonl", stdin=prompt)

    def live_calls(self, request: CellRequest, home: Path, call: AgentCall) -> CallFollower:
        return Rollouts(home, self.model)

    def transcripts(self, request: CellRequest, home: Path) -> list[tuple[Path, str]]:
        return under(home / "sessions", "**/rollout-*.jsonl")

    def read_spend(self, request: CellRequest, home: Path, call: AgentCall) -> AgentSpend:
        return read_codex_spend(call.stdout, home, (path for path, _ in self.transcripts(request, home)), self.model)


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"codex": CodexArm}
