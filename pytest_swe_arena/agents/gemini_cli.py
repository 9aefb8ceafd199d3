"""Gemini CLI's formats: its usage, read from its ``--output-format json`` result and its chat files, and what
it did, read as turns from the same files (``read_gemini_chat``, ``read_gemini_result``).

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import crossing
from ..files import LineFollower, json_table, json_text, read_json_object
from ..spend.usage import Usage
from .reports import AgentSpend, CallTally, FigureReader, call_usage
from .turns import (
    Turn,
    as_text,
    clip,
    for_agent,
    json_lines,
    noting_unreadable,
)


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


# -- its transcript, as turns ---------------------------------------------------------------

def _gemini_messages(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages of a Gemini CLI chat file, each as last written (a message is rewritten as it grows)."""
    messages: dict[str, dict[str, Any]] = {}
    for record in records:
        initial = json_table(record.get("$set")).get("messages")
        for message in (initial if isinstance(initial, list) else [record]):
            message = json_table(message)
            if "id" in message and "type" in message:
                messages[str(message["id"])] = message
    return list(messages.values())


def _gemini_parts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content] if content else []
    parts = map(json_table, content if isinstance(content, list) else [])
    return [str(part["text"]) for part in parts if part.get("text")]


def _gemini_call(call: Mapping[str, Any]) -> Turn:
    outputs, errors = [], []
    for result in call.get("result") or []:
        response = json_table(json_table(json_table(result).get("functionResponse")).get("response"))
        if "output" in response:
            outputs.append(as_text(response["output"]))
        if response.get("error"):
            errors.append(as_text(response["error"]))
    return {"role": "tool", "kind": "tool", "tool": str(call.get("name") or "?"),
            "title": str(call.get("description") or ""), "status": str(call.get("status") or ""),
            "input": clip(as_text(call.get("args", {}))), "output": clip("\n".join(outputs)) if outputs else None,
            "error": clip("\n".join(errors)) if errors else None}


def read_gemini_chat(lines: Iterable[str], agent: str | None = None) -> list[Turn]:
    """A Gemini CLI chat (``transcript/<dir>/chats/session-*.jsonl``, copied from ``~/.gemini/tmp``).

    The first line describes the session; then messages, each rewritten as it grows (its last
    version counts), and ``$set`` updates. ``gemini`` messages give their thoughts, text, tool
    calls with their results, and tokens; ``user`` messages before the first answer are the
    setup and the prompt (prompt.txt shows it), later ones are shown; ``info``, ``warning`` and
    ``error`` messages as they are. ``agent`` marks a sub-agent's chat, whose task is shown.
    """
    records, unreadable = json_lines(lines)
    turns: list[Turn] = []
    answered = agent is not None
    steps = 0
    for message in _gemini_messages(records):
        kind = message.get("type")
        if kind == "user":
            if answered:
                turns += [for_agent({"role": "user", "kind": "text", "text": clip(text)}, agent)
                          for text in _gemini_parts(message.get("content"))]
        elif kind == "gemini":
            answered = True
            for thought in message.get("thoughts") or []:
                thought = json_table(thought)
                text = "\n".join(str(thought[key]) for key in ("subject", "description") if thought.get(key))
                if text:
                    turns.append(for_agent({"role": "assistant", "kind": "reasoning", "text": clip(text)}, agent))
            turns += [for_agent({"role": "assistant", "kind": "text", "text": clip(text)}, agent)
                      for text in _gemini_parts(message.get("content"))]
            turns += [for_agent(_gemini_call(json_table(call)), agent) for call in message.get("toolCalls") or []]
            tokens = json_table(message.get("tokens"))
            if tokens:
                steps += 1
                turns.append(for_agent({"role": "meta", "kind": "step", "step": steps, "reason": message.get("model"),
                                         "tokens": tokens, "cost_usd": None}, agent))
        elif kind == "error":
            turns.append(for_agent({"role": "error", "kind": "error", "text": clip(as_text(message.get("content")))},
                                    agent))
        elif kind in ("info", "warning"):
            text = clip(f"{kind}: {as_text(message.get('content'))}")
            turns.append(for_agent({"role": "meta", "kind": "event", "text": text}, agent))
    return noting_unreadable(turns, unreadable)


def read_gemini_result(lines: Iterable[str]) -> list[Turn]:
    """Gemini CLI's ``--output-format json`` result (``result.json``): its last answer and its error, if any."""
    try:
        document = json_table(json.loads("\n".join(lines)))
    except ValueError:
        return [{"role": "error", "kind": "error", "text": "the result is not JSON"}]
    turns: list[Turn] = []
    if document.get("response"):
        turns.append({"role": "assistant", "kind": "text", "text": clip(as_text(document["response"]))})
    error = json_table(document.get("error"))
    if error:
        turns.append({"role": "error", "kind": "error",
                      "text": clip(f"{error.get('type', 'error')}: {error.get('message', as_text(error))}")})
    return turns
