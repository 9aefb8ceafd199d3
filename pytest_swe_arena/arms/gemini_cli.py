"""The ``gemini-cli`` kind: Google's Gemini CLI, ``gemini -p``, in the workspace.

Runs ``gemini -p "" --yolo --skip-trust --output-format json [-m MODEL] <
prompt.txt`` with ``GEMINI_CLI_HOME`` in the cell and its
``.gemini/settings.json`` there: the auth type named (``gemini-api-key`` by
default: a base URL alone makes 0.61 pick an auth type that non-interactive
runs refuse), usage statistics off. Without ``--yolo`` a non-interactive run
gets no tool that writes; without ``--skip-trust`` it refuses the workspace.
``GEMINI_CLI_NO_RELAUNCH=true`` keeps it one process (the relaunching parent
ignores SIGTERM). Its report is the JSON printed at the end: ``stats.models``,
per model (the router's side call and sub-agents included). The live cap and
a run that printed nothing follow its chat files (per call, the router left out).
Gemini reports no cost: the suite's price table prices it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ..suite import Suite
from ..usage import Usage
from .agent import AgentOutcome
from .base import ArmKind, CellRequest, SettingsReader
from .cli_agent import (
    AgentCall,
    AgentSpend,
    CallTally,
    CliAgentArm,
    FigureReader,
    JsonLinesFollower,
    LiveUsage,
    call_usage,
    read_json_file,
    table,
    text,
    under,
    write_private,
)


def merged(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``top`` laid over it, tables merged key by key."""
    result = dict(base)
    for key, value in top.items():
        result[key] = merged(table(base.get(key)), value) if isinstance(value, Mapping) else value
    return result


def gemini_tokens(tokens: Any, reader: FigureReader, *, prompt_key: str) -> Usage:
    """Gemini's token counts: ``prompt_key`` holds the prompt with cached tokens inside it; no cache writes."""
    cached = reader.count(tokens, "cached")
    tool = reader.count(tokens, "tool")  # tool-use prompt tokens, billed as input
    prompt = reader.count(tokens, prompt_key, None)
    input_tokens = reader.rest(prompt, cached)
    return call_usage(None if input_tokens is None or tool is None else input_tokens + tool,
                      reader.count(tokens, "candidates" if prompt_key == "prompt" else "output", None),
                      reader.count(tokens, "thoughts"), cached, 0)


class Chats(LiveUsage):
    """The chat files' model messages (``type: gemini``), each id once, by model."""

    def __init__(self, home: Path):
        self.root = home / ".gemini" / "tmp"
        self.follower = JsonLinesFollower()
        self.tally = CallTally()
        self.problems: list[str] = []

    def poll(self, final: bool = False) -> Mapping[str, Usage]:
        for _, entry in self.follower.poll(self.root.glob("*/chats/**/*.jsonl"), final=final):
            identifier, tokens = text(entry.get("id")), table(entry.get("tokens"))
            if entry.get("type") == "gemini" and identifier and tokens:
                reader = FigureReader(f"chat message {identifier}")
                self.tally.add(identifier, text(entry.get("model")) or "unknown",
                               gemini_tokens(tokens, reader, prompt_key="input"))
                self.problems += reader.problems
        return self.tally.by_model()


class GeminiCliArm(CliAgentArm):
    """Gemini CLI in YOLO mode (its write and shell tools without asking), API-key auth by default."""

    kind = "gemini-cli"
    program = "gemini"
    model_required = False  # without one, Gemini CLI routes each prompt to a model of its choice
    private_variables = ("GEMINI_CLI_HOME",)
    login_file = ".gemini/oauth_creds.json"

    def configure(self, reader: SettingsReader, suite: Suite) -> None:
        self.auth_type: str = reader.string("auth_type", "gemini-api-key")
        self.settings: dict[str, Any] = reader.table("settings", {})

    def prepare(self, request: CellRequest, home: Path, prompt: Path) -> AgentCall:
        ours = {"security": {"auth": {"selectedType": self.auth_type}}, "privacy": {"usageStatisticsEnabled": False}}
        settings = merged(self.settings, ours)
        write_private(home / ".gemini" / "settings.json", json.dumps(settings, indent=2).encode())
        argv = [self.executable, "-p", "", "--yolo", "--skip-trust", "--output-format", "json",
                *(["-m", self.model] if self.model else []), *self.args]
        env = {"GEMINI_CLI_HOME": str(home), "GEMINI_CLI_NO_RELAUNCH": "true"}
        return AgentCall(argv, env, request.run_dir / "result.json", stdin=prompt)

    def live_usage(self, request: CellRequest, home: Path, call: AgentCall) -> LiveUsage:
        return Chats(home)

    def transcripts(self, request: CellRequest, home: Path) -> list[tuple[Path, str]]:
        return under(home / ".gemini" / "tmp", "*/chats/**/*.jsonl")

    def read_spend(self, request: CellRequest, home: Path, call: AgentCall, outcome: AgentOutcome) -> AgentSpend:
        report = read_json_file(call.stdout)
        failure = read_error(request.run_dir / "stderr.log")
        stats = table(table(report).get("stats")).get("models")
        if not isinstance(stats, dict):
            chats = Chats(home)
            models = dict(chats.poll(final=True))
            served = self.model or _main_model(models)
            return AgentSpend(models, served, "transcript" if models else "none", chats.problems, failure,
                              {"printed_result": False})
        reader = FigureReader("stats.models")
        models = {}
        for model, figures in stats.items():
            figures = table(figures)
            usage = gemini_tokens(table(figures.get("tokens")), reader, prompt_key="prompt")
            requests = reader.count(table(figures.get("api")), "totalRequests", None)
            models[model] = Usage(**{**usage.to_json(), "steps": requests, "max_context_tokens": None})
        main = [model for model, figures in stats.items() if "main" in table(table(figures).get("roles"))]
        served = main[0] if main else self.model or _main_model(models)
        return AgentSpend(models, served, "report", reader.problems, failure, {"printed_result": True})

    def check_report(self, spend: AgentSpend, outcome: AgentOutcome) -> AgentOutcome:
        # SIGTERM makes it exit 0 without a result: an exit code of 0 alone is no finish.
        if outcome.status == "completed" and not spend.details.get("printed_result"):
            return AgentOutcome("arm_error", "gemini-cli exited 0 but printed no result", outcome.returncode,
                                outcome.seconds)
        return outcome


def _main_model(models: Mapping[str, Usage]) -> str | None:
    """The model that did most of the work (most output), when nothing names it."""
    return max(models, key=lambda model: models[model].output_tokens or 0) if models else None


def read_error(stderr: Path) -> str | None:
    """The error object Gemini CLI prints to stderr in JSON mode (``{"error": {"message": ...}}``)."""
    try:
        output = stderr.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    start = output.find("{")
    # One object, on one line or pretty-printed, after its warnings.
    for candidate in [output[start:] if start >= 0 else "", *reversed(output.splitlines())]:
        try:
            entry = json.loads(candidate)
        except ValueError:
            continue
        message = text(table(table(entry).get("error")).get("message"))
        if message:
            return message
    return None


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"gemini-cli": GeminiCliArm}
