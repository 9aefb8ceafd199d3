"""The ``claude-code`` kind: Claude Code's ``claude -p`` in the workspace.

Runs ``claude -p --model MODEL --output-format stream-json --verbose
--include-partial-messages --permission-mode acceptEdits --allowedTools Bash <
prompt.txt`` with ``CLAUDE_CONFIG_DIR`` in the cell and
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` (no telemetry, no update
checks). Without ``--allowedTools Bash`` it denies every shell command and
still exits 0 (tests/AGENT_NOTES.md 2.3). The stream's last line, ``result``,
carries ``modelUsage`` (per model, sub-agents included) and ``total_cost_usd``;
its top-level ``usage`` leaves sub-agents out and is not used. The live cap
follows the stream's ``message_delta`` events (the main agent) and the
sub-agents' transcripts; a run that never printed its result is read from all
its transcripts (each message id once).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from ..usage import Usage
from .agent import AgentOutcome
from .base import ArmKind, CellRequest
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
)

#: Keep Claude Code off the network but for its model (event logging, error reports, update checks).
QUIET_ENV = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
#: Edits without asking, and Bash (which acceptEdits alone denies); -p never asks, it denies.
PERMISSIONS = ("--permission-mode", "acceptEdits", "--allowedTools", "Bash")


def project_dir(home: Path, workspace: Path) -> Path:
    """Where Claude keeps the transcripts of runs in ``workspace``: its path, each non-alphanumeric as "-"."""
    return home / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(workspace))


def anthropic_call(usage: Any, where: str, reader: FigureReader | None = None) -> Usage:
    """An Anthropic ``usage`` object (a stream's message_delta, a transcript message) as one call."""
    reader = reader or FigureReader(where)
    thinking = reader.count(table(usage.get("output_tokens_details")), "thinking_tokens")
    output = reader.count(usage, "output_tokens", None)
    cache_read = reader.count(usage, "cache_read_input_tokens")
    cache_write = reader.count(usage, "cache_creation_input_tokens")
    return call_usage(reader.count(usage, "input_tokens", None), reader.rest(output, thinking), thinking,
                      cache_read, cache_write)


def read_transcripts(paths: Iterable[Path]) -> CallTally:
    """Every assistant message of the transcripts, each id once, with its final usage, by model."""
    tally = CallTally()
    for path in paths:
        for entry in json_lines(path):
            add_transcript_entry(tally, entry)
    return tally


def add_transcript_entry(tally: CallTally, entry: Mapping[str, Any]) -> None:
    message = table(entry.get("message"))
    identifier, usage = text(message.get("id")), table(message.get("usage"))
    if entry.get("type") == "assistant" and identifier and usage:
        tally.add(identifier, text(message.get("model")) or "unknown", anthropic_call(usage, identifier))


def model_usage(report: Mapping[str, Any], reader: FigureReader) -> dict[str, Usage]:
    """The result's ``modelUsage``: every call per model, sub-agents included, with Claude's cost."""
    models = {}
    for model, figures in table(report.get("modelUsage")).items():
        figures = table(figures)
        thinking = reader.count(figures, "thinkingTokens")
        output = reader.count(figures, "outputTokens", None)
        models[model] = Usage(
            reader.count(figures, "inputTokens", None), reader.rest(output, thinking), thinking,
            reader.count(figures, "cacheReadInputTokens"), reader.count(figures, "cacheCreationInputTokens"),
            None, None, reader.cost(figures, "costUSD"), "reported")
    return models


class StreamAndSubagents(LiveUsage):
    """The main agent's calls from the stream's message_delta events, plus the sub-agents' transcripts."""

    def __init__(self, stream: Path, home: Path):
        self.stream = stream
        self.home = home
        self.follower = JsonLinesFollower()
        self.main = CallTally()
        self.model = "unknown"
        self.calls = 0
        self.subagents = CallTally()
        self.subagent_follower = JsonLinesFollower()

    def poll(self) -> Mapping[str, Usage]:
        for _, line in self.follower.poll([self.stream]):
            event = table(line.get("event"))
            if line.get("type") != "stream_event" or line.get("parent_tool_use_id"):
                continue
            if event.get("type") == "message_start":
                self.model = text(table(event.get("message")).get("model")) or self.model
            elif event.get("type") == "message_delta" and table(event.get("usage")):
                self.calls += 1
                self.main.add(f"call-{self.calls}", self.model, anthropic_call(event["usage"], "message_delta"))
        for _, entry in self.subagent_follower.poll((self.home / "projects").glob("*/*/subagents/*.jsonl")):
            add_transcript_entry(self.subagents, entry)
        merged = CallTally({**self.main.calls, **self.subagents.calls})
        return merged.by_model()


class ClaudeCodeArm(CliAgentArm):
    """Claude Code, ``claude -p``, with the permissions that let it edit files and run commands."""

    kind = "claude-code"
    program = "claude"
    private_variables = ("CLAUDE_CONFIG_DIR",)
    login_file = ".credentials.json"

    def prepare(self, request: CellRequest, home: Path, prompt: Path) -> AgentCall:
        argv = [self.executable, "-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
                *PERMISSIONS, *(["--model", self.model] if self.model else []), *self.args]
        return AgentCall(argv, {**QUIET_ENV, "CLAUDE_CONFIG_DIR": str(home)}, request.run_dir / "events.jsonl",
                         stdin=prompt)

    def live_usage(self, request: CellRequest, home: Path, call: AgentCall) -> LiveUsage:
        return StreamAndSubagents(call.stdout, home)

    def transcripts(self, request: CellRequest, home: Path) -> list[tuple[Path, str]]:
        return under(home / "projects", "**/*.json*")

    def read_spend(self, request: CellRequest, home: Path, call: AgentCall, outcome: AgentOutcome) -> AgentSpend:
        lines = json_lines(call.stdout)
        init = next((line for line in lines if line.get("type") == "system" and line.get("subtype") == "init"), {})
        served = text(init.get("model"))
        result = next((line for line in reversed(lines) if line.get("type") == "result"), None)
        transcripts = read_transcripts(path for path, _ in self.transcripts(request, home))
        if result is None:
            models = transcripts.by_model()
            return AgentSpend(models, served or next(iter(models), None), "transcript" if models else "none")
        reader = FigureReader("result.modelUsage")
        models = model_usage(result, reader)
        # Steps and context size are not in the result: the transcripts have them, per call.
        counted = transcripts.by_model()
        models = {model: (usage if model not in counted else
                          Usage(**{**usage.to_json(), "steps": counted[model].steps,
                                   "max_context_tokens": counted[model].max_context_tokens}))
                  for model, usage in models.items()}
        total = reader.cost(result, "total_cost_usd")
        details: dict[str, Any] = {"num_turns": result.get("num_turns"), "reported_cost_usd": total,
                                   "permission_denials": len(result.get("permission_denials") or [])}
        error = text(result.get("result")) if result.get("is_error") else None
        return AgentSpend(models, served, "report", reader.problems, error, details)

    def check_report(self, spend: AgentSpend, outcome: AgentOutcome) -> AgentOutcome:
        if outcome.status == "completed" and spend.error:
            return AgentOutcome("arm_error", "claude-code reported an error", outcome.returncode, outcome.seconds)
        return outcome


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"claude-code": ClaudeCodeArm}
