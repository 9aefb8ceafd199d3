"""Where Gemini CLI's usage is read: its ``--output-format json`` result and its chat files.

The JSON printed at the end has ``stats.models``, per model (the router's side call and
sub-agents included): ``tokens.prompt`` with the cached tokens inside it, ``tool``
(tool-use prompt tokens, billed as input), ``candidates`` (output), ``thoughts``
(reasoning); Gemini has no cache writes. The live cap and a run that printed nothing read
its chat files (``$GEMINI_CLI_HOME/.gemini/tmp/<dir>/chats/*.jsonl``: each model message
with its ``tokens``, the router's side call left out). On failure it prints an error object
to stderr. Gemini reports no cost: the suite's price table prices it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import crossing
from ..files import LineFollower, json_table, json_text, read_json_object
from ..spend.usage import Usage
from .reports import AgentSpend, CallTally, FigureReader, call_usage


def gemini_tokens(tokens: Any, reader: FigureReader, *, prompt_key: str) -> Usage:
    """Gemini's token counts: ``prompt_key`` holds the prompt with cached tokens inside it; no cache writes."""
    cached = reader.count(tokens, "cached")
    tool = reader.count(tokens, "tool")  # tool-use prompt tokens, billed as input
    input_tokens = reader.rest(reader.count(tokens, prompt_key, None), cached)
    return call_usage(None if input_tokens is None or tool is None else input_tokens + tool,
                      reader.count(tokens, "candidates" if prompt_key == "prompt" else "output", None),
                      reader.count(tokens, "thoughts"), cached, 0)


class Chats:
    """The chat files' model messages (``type: gemini``) under ``home/.gemini/tmp``, each id once, by model."""

    def __init__(self, home: Path):
        self.root = home / ".gemini" / "tmp"
        self.lines = LineFollower()
        self.tally = CallTally()
        self.problems: list[str] = []

    def poll(self, final: bool = False) -> Mapping[str, Usage]:
        for _, entry in self.lines.objects(self.root.glob("*/chats/**/*.jsonl"), final=final):
            identifier, tokens = json_text(entry.get("id")), json_table(entry.get("tokens"))
            if entry.get("type") == "gemini" and identifier and tokens:
                reader = FigureReader(f"chat message {identifier}")
                self.tally.add(identifier, json_text(entry.get("model")) or "unknown",
                               gemini_tokens(tokens, reader, prompt_key="input"))
                self.problems += reader.problems
        return self.tally.by_model()


def read_error(stderr: Path) -> str | None:
    """The error object Gemini CLI prints to stderr in JSON mode (``{"error": {"message": ...}}``)."""
    try:
        output = crossing.read_text(stderr, 16 << 20)  # the agent's run dir: through the crossing
    except OSError:
        return None
    start = output.find("{")
    # One object, on one line or pretty-printed, after its warnings.
    for candidate in [output[start:] if start >= 0 else "", *reversed(output.splitlines())]:
        try:
            entry = json.loads(candidate)
        except ValueError:
            continue
        message = json_text(json_table(json_table(entry).get("error")).get("message"))
        if message:
            return message
    return None


def read_gemini_spend(result: Path, stderr: Path, home: Path, asked: str | None) -> AgentSpend:
    """What Gemini CLI spent: its result's ``stats.models``, else (no result printed) its chat files.

    ``details.printed_result`` says which: Gemini exits 0 on SIGTERM without a result.
    """
    failure = read_error(stderr)
    stats = json_table(json_table(read_json_object(result)).get("stats")).get("models")
    if not isinstance(stats, dict):
        chats = Chats(home)
        models = dict(chats.poll(final=True))
        return AgentSpend(models, asked or main_model(models), "transcript" if models else "none", chats.problems,
                          failure, {"printed_result": False})
    reader = FigureReader("stats.models")
    models = {}
    for model, figures in stats.items():
        figures = json_table(figures)
        usage = gemini_tokens(json_table(figures.get("tokens")), reader, prompt_key="prompt")
        requests = reader.count(json_table(figures.get("api")), "totalRequests", None)
        models[model] = replace(usage, steps=requests, max_context_tokens=None)
    main = [model for model, figures in stats.items() if "main" in json_table(json_table(figures).get("roles"))]
    served = main[0] if main else asked or main_model(models)
    return AgentSpend(models, served, "report", reader.problems, failure, {"printed_result": True})


def main_model(models: Mapping[str, Usage]) -> str | None:
    """The model that did most of the work (most output), when nothing names it."""
    return max(models, key=lambda model: models[model].output_tokens or 0) if models else None
