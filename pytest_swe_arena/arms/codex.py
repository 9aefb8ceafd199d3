"""The ``codex`` kind: OpenAI's Codex CLI, ``codex exec``, in the workspace.

Runs ``codex exec --json --sandbox workspace-write [-m MODEL] -c ... - <
prompt.txt`` with ``CODEX_HOME`` in the cell. Its ``config.toml`` there is the
arm's ``config`` file (model providers, say) or empty; the offline switches go
on the command line as overrides (``analytics.enabled=false``: no analytics;
``features.plugins=false``: no plugin marketplace sync over git), so they hold
whatever the file says. ``turn.completed`` in the ``--json`` stream carries
the usage (input with cached and cache-write tokens inside it, output with
reasoning inside it), once, at the end; the live cap and a run that never
finished are read from the rollout's ``token_usage_record`` lines, one per
model response, written as soon as it is in. Codex reports no cost: the
suite's price table prices it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ..suite import Suite
from ..usage import Usage, add_usages
from .agent import AgentOutcome
from .base import ArmConfigError, ArmKind, CellRequest, SettingsReader
from .cli_agent import (
    AgentCall,
    AgentSpend,
    CallTally,
    CliAgentArm,
    FigureReader,
    JsonLinesFollower,
    LiveUsage,
    call_usage,
    json_lines,
    table,
    text,
    under,
    write_private,
)

#: Codex's own sandbox for its commands: "workspace-write" lets them write the workspace (and TMPDIR);
#: inside an outer sandbox that gives no writable /tmp, its bwrap cannot start: use "bypass" there.
SANDBOXES = {"workspace-write": ["--sandbox", "workspace-write"],
             "danger-full-access": ["--sandbox", "danger-full-access"],
             "bypass": ["--dangerously-bypass-approvals-and-sandbox"]}
OFFLINE_OVERRIDES = {"analytics.enabled": False, "features.plugins": False}


def toml_value(value: Any) -> str:
    """A ``-c key=value`` value: Codex parses it as TOML (JSON's strings, numbers and booleans are TOML's)."""
    return json.dumps(value)


def codex_call(usage: Any, where: str, reader: FigureReader | None = None) -> Usage:
    """Codex's usage (``turn.completed``, a rollout record): input includes cache reads and writes."""
    reader = reader or FigureReader(where)
    cached = reader.count(usage, "cached_input_tokens")
    written = reader.count(usage, "cache_write_input_tokens")
    reasoning = reader.count(usage, "reasoning_output_tokens")
    return call_usage(reader.rest(reader.count(usage, "input_tokens", None), cached, written),
                      reader.rest(reader.count(usage, "output_tokens", None), reasoning), reasoning, cached, written)


def rollout_model(entries: list[dict[str, Any]]) -> str | None:
    """The model the thread ran on, as the rollout records it (its settings, or a turn's context)."""
    for entry in entries:
        payload = table(entry.get("payload"))
        settings = table(payload.get("thread_settings"))
        model = text(settings.get("model")) or (text(payload.get("model")) if entry.get("type") == "turn_context"
                                                else None)
        if model:
            return model
    return None


PROVIDER_KEYS = ("base_url", "env_key", "wire_api", "name")


def provider_overrides(reader: SettingsReader) -> dict[str, Any]:
    """``provider = {base_url, env_key, wire_api, name}``: a model provider named ``arena``, and chosen.

    ``env_key`` names the variable that holds the API key (default ``OPENAI_API_KEY``, from
    ``secrets``); Codex sends it as a Bearer token to ``{base_url}/responses``.
    """
    provider = reader.table("provider")
    if provider is None:
        return {}
    origin = f"{reader.spec.origin}: field 'provider'"
    unknown = sorted(set(provider) - set(PROVIDER_KEYS))
    if unknown:
        raise ArmConfigError(f"{origin}: unknown key {unknown[0]!r}; known: {', '.join(PROVIDER_KEYS)}")
    values = {"name": "arena", "env_key": "OPENAI_API_KEY", "wire_api": "responses", **provider}
    if not isinstance(values.get("base_url"), str) or not values["base_url"]:
        raise ArmConfigError(f"{origin}: 'base_url' is required (the provider's URL, e.g. https://api.openai.com/v1)")
    bad = next((key for key in PROVIDER_KEYS if not isinstance(values[key], str)), None)
    if bad:
        raise ArmConfigError(f"{origin}: {bad} = {values[bad]!r} is not a string")
    return {"model_provider": "arena", **{f"model_providers.arena.{key}": values[key] for key in PROVIDER_KEYS}}


class Rollouts(LiveUsage):
    """The rollouts' ``token_usage_record`` lines, one per response id."""

    def __init__(self, home: Path, model: str | None):
        self.home = home
        self.model = model
        self.follower = JsonLinesFollower()
        self.tally = CallTally()
        self.problems: list[str] = []

    def poll(self, final: bool = False) -> Mapping[str, Usage]:
        for _, entry in self.follower.poll((self.home / "sessions").rglob("rollout-*.jsonl"), final=final):
            payload = table(entry.get("payload"))
            self.model = self.model or rollout_model([entry])
            if entry.get("type") == "token_usage_record" and table(payload.get("usage")):
                key = text(payload.get("response_id")) or f"record-{len(self.tally.calls)}"
                reader = FigureReader(f"rollout {key}")
                self.tally.add(key, self.model or "unknown", codex_call(payload["usage"], key, reader))
                self.problems += reader.problems
        return self.tally.by_model()


class CodexArm(CliAgentArm):
    """Codex CLI, ``codex exec --json``, in its own sandbox that may write the workspace."""

    kind = "codex"
    program = "codex"
    private_variables = ("CODEX_HOME",)
    login_file = "auth.json"

    def configure(self, reader: SettingsReader, suite: Suite) -> None:
        self.sandbox: str = reader.string("sandbox", "workspace-write")
        if self.sandbox not in SANDBOXES:
            raise ArmConfigError(f"{reader.spec.origin}: field 'sandbox': {self.sandbox!r} is not one of "
                                 f"{', '.join(SANDBOXES)}")
        config = reader.path("config")
        if config is not None and not config.is_file():
            raise ArmConfigError(f"{reader.spec.origin}: field 'config': {config} is not a file "
                                 "(Codex's config.toml for the cell)")
        self.config_text = config.read_bytes() if config is not None else b""
        overrides = reader.table("overrides", {})
        for key, value in overrides.items():
            if isinstance(value, (dict, list)) or value is None:
                raise ArmConfigError(f"{reader.spec.origin}: field 'overrides': {key} = {value!r} is not a "
                                     "string, number or boolean (a dotted key names a nested setting)")
        self.overrides: dict[str, Any] = {**OFFLINE_OVERRIDES, **provider_overrides(reader), **overrides}

    def prepare(self, request: CellRequest, home: Path, prompt: Path) -> AgentCall:
        write_private(home / "config.toml", self.config_text)
        overrides = [arg for key, value in self.overrides.items() for arg in ("-c", f"{key}={toml_value(value)}")]
        argv = [self.executable, "exec", "--json", *SANDBOXES[self.sandbox],
                *(["-m", self.model] if self.model else []), *overrides, *self.args, "-"]
        return AgentCall(argv, {"CODEX_HOME": str(home)}, request.run_dir / "events.jsonl", stdin=prompt)

    def live_usage(self, request: CellRequest, home: Path, call: AgentCall) -> LiveUsage:
        return Rollouts(home, self.model)

    def transcripts(self, request: CellRequest, home: Path) -> list[tuple[Path, str]]:
        return under(home / "sessions", "**/rollout-*.jsonl")

    def read_spend(self, request: CellRequest, home: Path, call: AgentCall, outcome: AgentOutcome) -> AgentSpend:
        events = json_lines(call.stdout)
        rollout_entries = [entry for path, _ in self.transcripts(request, home) for entry in json_lines(path)]
        served = rollout_model(rollout_entries) or self.model
        rollouts = Rollouts(home, served)
        per_call = rollouts.poll(final=True)
        failed = [text(table(event.get("error")).get("message")) for event in events
                  if event.get("type") == "turn.failed"]
        errors = [text(event.get("message")) for event in events if event.get("type") == "error"]
        error = next((message for message in [*failed, *reversed(errors)] if message), None)
        turns = [table(event.get("usage")) for event in events if event.get("type") == "turn.completed"]
        if not turns:
            return AgentSpend(per_call, served if per_call else None, "transcript" if per_call else "none",
                              rollouts.problems, error)
        reader = FigureReader("turn.completed")
        usage = add_usages([codex_call(turn, "turn.completed", reader) for turn in turns])
        model = served or "unknown"
        if model in per_call:  # steps and context size are the rollout's, per response
            usage = Usage(**{**usage.to_json(), "steps": per_call[model].steps,
                             "max_context_tokens": per_call[model].max_context_tokens})
        else:
            usage = Usage(**{**usage.to_json(), "steps": None, "max_context_tokens": None})
        return AgentSpend({model: usage}, served, "report", [*reader.problems, *rollouts.problems], error,
                          {"turns": len(turns)})


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"codex": CodexArm}
