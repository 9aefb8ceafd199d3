"""Claude Code's formats: its usage, read from its ``stream-json`` output and its transcripts, and what it did,
read as turns from the same files (``read_claude_stream``, ``read_claude_transcript``).

The stream's last line, ``result``, carries ``modelUsage`` (per model, sub-agents
included, each with Claude's ``costUSD``) and ``total_cost_usd``; its top-level ``usage``
leaves sub-agents out and is not used. While it runs, the stream's ``message_delta``
events (the main agent) and the sub-agents' transcripts
(``$CLAUDE_CONFIG_DIR/projects/<cwd>/<session>/subagents/*.jsonl``) are followed for the
live cap. A run that never printed its result is read from all its transcripts, each
call once (its message id between two requests: a server may repeat ids), at its last
usage. Anthropic counts input without the cache, so the ledger's split is Anthropic's
own; thinking tokens, when given, are taken out of output.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..files import LineFollower, json_objects, json_table, json_text
from ..spend.usage import Usage
from .reports import AgentSpend, CallTally, FigureReader, call_usage, with_calls
from .turns import (
    Turn,
    answer_call,
    as_text,
    clip,
    first_record,
    for_agent,
    json_lines,
    mark_call,
    noting_unreadable,
    tool_turn,
)


def anthropic_call(usage: Any, where: str, reader: FigureReader | None = None) -> Usage:
    """An Anthropic ``usage`` object (a stream's message_delta, a transcript message) as one call."""
    reader = reader or FigureReader(where)
    thinking = reader.count(json_table(usage.get("output_tokens_details")), "thinking_tokens")
    output = reader.count(usage, "output_tokens", None)
    cache_read = reader.count(usage, "cache_read_input_tokens")
    cache_write = reader.count(usage, "cache_creation_input_tokens")
    return call_usage(reader.count(usage, "input_tokens", None), reader.rest(output, thinking), thinking,
                      cache_read, cache_write)


class TranscriptCalls:
    """The assistant messages of transcripts, one per model call.

    Claude writes a call's content blocks as separate lines with the same message id; a
    server may also give every call the same id. So a call is its id between two
    boundaries: the ``api-request`` line before a request and the ``user`` line (tool
    results) after a reply.
    """

    def __init__(self) -> None:
        self.tally = CallTally()
        self.boundaries: dict[Path, int] = {}

    def add(self, path: Path, entry: Mapping[str, Any]) -> None:
        if entry.get("type") in ("api-request", "user"):
            self.boundaries[path] = self.boundaries.get(path, 0) + 1
            return
        message = json_table(entry.get("message"))
        identifier, usage = json_text(message.get("id")), json_table(message.get("usage"))
        if entry.get("type") == "assistant" and identifier and usage:
            self.tally.add(f"{path}#{self.boundaries.get(path, 0)}#{identifier}",
                           json_text(message.get("model")) or "unknown", anthropic_call(usage, identifier))


def read_transcripts(paths: Iterable[Path]) -> CallTally:
    """Every model call of the transcripts, once, with its final usage, by model."""
    calls = TranscriptCalls()
    for path in paths:
        for entry in json_objects(path):
            calls.add(path, entry)
    return calls.tally


def model_usage(report: Mapping[str, Any], reader: FigureReader) -> dict[str, Usage]:
    """The result's ``modelUsage``: every call per model, sub-agents included, with Claude's cost."""
    models = {}
    for model, figures in json_table(report.get("modelUsage")).items():
        figures = json_table(figures)
        thinking = reader.count(figures, "thinkingTokens")
        output = reader.count(figures, "outputTokens", None)
        models[model] = Usage(
            reader.count(figures, "inputTokens", None), reader.rest(output, thinking), thinking,
            reader.count(figures, "cacheReadInputTokens"), reader.count(figures, "cacheCreationInputTokens"),
            None, None, reader.cost(figures, "costUSD"), "reported")
    return models


class StreamAndSubagents:
    """The main agent's calls from the stream's message_delta events, plus the sub-agents' transcripts."""

    def __init__(self, stream: Path, home: Path):
        self.stream = stream
        self.home = home
        self.lines = LineFollower()
        self.main = CallTally()
        self.model = "unknown"
        self.subagents = TranscriptCalls()
        self.subagent_lines = LineFollower()

    def poll(self) -> Mapping[str, Usage]:
        for _, line in self.lines.objects([self.stream]):
            event = json_table(line.get("event"))
            if line.get("type") != "stream_event" or line.get("parent_tool_use_id"):
                continue
            if event.get("type") == "message_start":
                self.model = json_text(json_table(event.get("message")).get("model")) or self.model
            elif event.get("type") == "message_delta" and json_table(event.get("usage")):
                self.main.add(f"call-{len(self.main.calls) + 1}", self.model,
                              anthropic_call(event["usage"], "message_delta"))
        for path, entry in self.subagent_lines.objects((self.home / "projects").glob("*/*/subagents/*.jsonl")):
            self.subagents.add(path, entry)
        return CallTally({**self.main.calls, **self.subagents.tally.calls}).by_model()


def read_claude_spend(stream: Path, transcripts: Iterable[Path]) -> AgentSpend:
    """What Claude Code spent: its result's ``modelUsage``, else (no result printed) its transcripts."""
    lines = json_objects(stream)
    init = next((line for line in lines if line.get("type") == "system" and line.get("subtype") == "init"), {})
    served = json_text(init.get("model"))
    result = next((line for line in reversed(lines) if line.get("type") == "result"), None)
    counted = read_transcripts(transcripts).by_model()
    if result is None:
        return AgentSpend(counted, served or next(iter(counted), None), "transcript" if counted else "none")
    reader = FigureReader("result.modelUsage")
    # Steps and context size are not in the result: the transcripts have them, per call.
    models = {model: with_calls(usage, counted.get(model)) for model, usage in model_usage(result, reader).items()}
    details: dict[str, Any] = {"num_turns": result.get("num_turns"),
                               "reported_cost_usd": reader.cost(result, "total_cost_usd"),
                               "permission_denials": len(result.get("permission_denials") or [])}
    error = json_text(result.get("result")) if result.get("is_error") else None
    return AgentSpend(models, served, "report", reader.problems, error, details)


# -- its transcript, as turns ---------------------------------------------------------------

def read_claude_transcript(lines: Iterable[str]) -> list[Turn]:
    """Claude Code's session transcript (``~/.claude/projects/<project>/<session>.jsonl``), one record a line.

    ``user`` and ``assistant`` records carry the conversation; content blocks are ``text``,
    ``thinking``, ``tool_use`` and (in user records) ``tool_result``. The first user record is
    the prompt, which the run dir's prompt.txt already shows. Other records (queue operations,
    API requests) are bookkeeping and skipped.
    """
    turns: list[Turn] = []
    prompt_seen = False
    for line in lines:
        try:
            record = json_table(json.loads(line))
        except ValueError:
            continue
        if record.get("type") not in ("user", "assistant"):
            continue
        if record["type"] == "user" and isinstance(json_table(record.get("message")).get("content"), str) \
                and not prompt_seen:
            prompt_seen = True
            continue
        _claude_message(turns, record)
    return turns


def _claude_message(turns: list[Turn], record: Mapping[str, Any], agent: str | None = None) -> None:
    """A ``user`` or ``assistant`` record of Claude Code's (session transcript or stream) as turns: its content
    (a text, or blocks ``text``, ``thinking``, ``tool_use``, ``tool_result``); an assistant's turns marked as one
    model call (its message id); ``agent`` names a sub-agent's."""
    role = record["type"]
    message = json_table(record.get("message"))
    content = message.get("content")
    start = len(turns)
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    for block in blocks if isinstance(blocks, list) else []:
        block = json_table(block)
        part = block.get("type")
        if part == "text":
            turns.append(for_agent({"role": role, "kind": "text", "text": clip(str(block.get("text") or ""))}, agent))
        elif part == "thinking":
            turns.append(for_agent({"role": "assistant", "kind": "reasoning",
                                     "text": clip(str(block.get("thinking") or ""))}, agent))
        elif part == "tool_use":
            turns.append(for_agent(tool_turn(str(block.get("name") or ""), block.get("input"), block.get("id")), agent))
        elif part == "tool_result":
            answer_call(turns, block.get("tool_use_id"), block.get("content"), bool(block.get("is_error")))
    if role == "assistant":
        mark_call(turns, start, message.get("id"))


def read_claude_stream(lines: Iterable[str]) -> list[Turn]:
    """Claude Code's ``--output-format stream-json`` (``events.jsonl``), one event a line.

    ``assistant`` and ``user`` events carry the conversation as the session transcript does
    (content blocks ``text``, ``thinking``, ``tool_use``, ``tool_result``); an event with a
    ``parent_tool_use_id`` is a sub-agent's, and says so. The prompt is not in the stream (it
    came on stdin). ``result`` ends the run: its turns, cost and, when it failed, its error.
    Partial messages (``stream_event``) and ``system`` events are bookkeeping, skipped.
    """
    records, unreadable = json_lines(lines)
    turns: list[Turn] = []
    for record in records:
        kind = record.get("type")
        agent = "sub-agent" if record.get("parent_tool_use_id") else None
        if kind in ("user", "assistant"):
            _claude_message(turns, record, agent)
        elif kind == "result":
            cost = record.get("total_cost_usd")
            summary = f"result: {record.get('subtype', '?')} after {record.get('num_turns', '?')} turn(s)"
            turns.append({"role": "meta", "kind": "event",
                          "text": summary + (f", ${cost}" if isinstance(cost, (int, float)) else "")})
            if record.get("is_error"):
                turns.append({"role": "error", "kind": "error", "text": clip(as_text(record.get("result")))})
    return noting_unreadable(turns, unreadable)


def claude_first(text: str) -> bool:
    record = first_record(text)
    return "session_id" in record and record.get("type") in ("system", "stream_event", "user", "assistant", "result")
