"""Codex CLI's formats: its usage, read from its ``--json`` events and its rollout files, and what it did, read
as turns from the same files (``read_codex_events``, ``read_codex_rollout``).

``turn.completed`` in the ``--json`` stream carries the usage, once, at the end: input
with cached and cache-write tokens inside it, output with reasoning inside it (split out
here into the ledger's disjoint fields). The live cap and a run that never finished read
the rollouts' ``token_usage_record`` lines
(``$CODEX_HOME/sessions/Y/M/D/rollout-*.jsonl``), one per model response, written as soon
as it is in. Codex reports no cost: the suite's price table prices it.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..files import LineFollower, json_objects, json_table, json_text
from ..spend.usage import Usage, add_usages
from .reports import AgentSpend, CallTally, FigureReader, call_usage, with_calls
from .turns import (
    Turn,
    as_text,
    clip,
    first_record,
    json_lines,
    noting_unreadable,
)


def codex_call(usage: Any, where: str, reader: FigureReader | None = None) -> Usage:
    """Codex's usage (``turn.completed``, a rollout record): input includes cache reads and writes."""
    reader = reader or FigureReader(where)
    cached = reader.count(usage, "cached_input_tokens")
    written = reader.count(usage, "cache_write_input_tokens")
    reasoning = reader.count(usage, "reasoning_output_tokens")
    return call_usage(reader.rest(reader.count(usage, "input_tokens", None), cached, written),
                      reader.rest(reader.count(usage, "output_tokens", None), reasoning), reasoning, cached, written)


def rollout_model(entries: Iterable[Mapping[str, Any]]) -> str | None:
    """The model the thread ran on, as the rollout records it (its settings, or a turn's context)."""
    for entry in entries:
        payload = json_table(entry.get("payload"))
        settings = json_table(payload.get("thread_settings"))
        model = json_text(settings.get("model")) or (
            json_text(payload.get("model")) if entry.get("type") == "turn_context" else None)
        if model:
            return model
    return None


class Rollouts:
    """The rollouts' ``token_usage_record`` lines under ``home/sessions``, one per model response."""

    def __init__(self, home: Path, model: str | None):
        self.home = home
        self.model = model
        self.lines = LineFollower()
        self.tally = CallTally()
        self.problems: list[str] = []

    def poll(self, final: bool = False) -> Mapping[str, Usage]:
        for _, entry in self.lines.objects((self.home / "sessions").rglob("rollout-*.jsonl"), final=final):
            payload = json_table(entry.get("payload"))
            self.model = self.model or rollout_model([entry])
            if entry.get("type") == "token_usage_record" and json_table(payload.get("usage")):
                # Each record is a call, written once: a server may give every response the same id.
                key = f"record-{len(self.tally.calls)}"
                reader = FigureReader(f"rollout {key}")
                self.tally.add(key, self.model or "unknown", codex_call(payload["usage"], key, reader))
                self.problems += reader.problems
        return self.tally.by_model()


def read_codex_spend(events: Path, home: Path, rollouts: Iterable[Path], asked: str | None) -> AgentSpend:
    """What Codex spent: its ``turn.completed`` usage, else (the run did not finish) its rollouts."""
    lines = json_objects(events)
    served = rollout_model(entry for path in rollouts for entry in json_objects(path)) or asked
    records = Rollouts(home, served)
    per_call = records.poll(final=True)
    failed = [json_text(json_table(event.get("error")).get("message")) for event in lines
              if event.get("type") == "turn.failed"]
    errors = [json_text(event.get("message")) for event in lines if event.get("type") == "error"]
    error = next((message for message in [*failed, *reversed(errors)] if message), None)
    turns = [json_table(event.get("usage")) for event in lines if event.get("type") == "turn.completed"]
    if not turns:
        return AgentSpend(per_call, served if per_call else None, "transcript" if per_call else "none",
                          records.problems, error)
    reader = FigureReader("turn.completed")
    model = served or "unknown"
    # Steps and context size are the rollout's, per response.
    usage = with_calls(add_usages([codex_call(turn, "turn.completed", reader) for turn in turns]),
                       per_call.get(model))
    return AgentSpend({model: usage}, served, "report", [*reader.problems, *records.problems], error,
                      {"turns": len(turns)})


# -- its transcript, as turns ---------------------------------------------------------------

def _codex_item(item: Mapping[str, Any]) -> Turn:
    kind = item.get("type")
    status = str(item.get("status") or "")
    if kind in ("agent_message", "reasoning"):
        return {"role": "assistant", "kind": "text" if kind == "agent_message" else "reasoning",
                "text": clip(str(item.get("text") or ""))}
    if kind == "command_execution":
        code = item.get("exit_code")
        return {"role": "tool", "kind": "tool", "tool": "shell", "title": "",
                "status": f"{status}, exit {code}" if code is not None else status,
                "input": clip(str(item.get("command") or "")), "output": clip(str(item.get("aggregated_output") or "")),
                "error": None}
    if kind == "file_change":
        changes = [json_table(change) for change in item.get("changes") or []]
        return {"role": "tool", "kind": "tool", "tool": "file_change", "title": "", "status": status,
                "input": "\n".join(f"{change.get('kind', '?')} {change.get('path', '?')}" for change in changes),
                "output": None, "error": None}
    if kind == "mcp_tool_call":
        error = json_table(item.get("error")).get("message")
        return {"role": "tool", "kind": "tool", "tool": f"{item.get('server', '?')}.{item.get('tool', '?')}",
                "title": "", "status": status, "input": clip(as_text(item.get("arguments", {}))),
                "output": clip(as_text(item["result"])) if item.get("result") is not None else None,
                "error": clip(str(error)) if error else None}
    if kind == "web_search":
        return {"role": "tool", "kind": "tool", "tool": "web_search", "title": "", "status": status,
                "input": clip(str(item.get("query") or "")), "output": None, "error": None}
    if kind == "error":
        return {"role": "error", "kind": "error", "text": clip(str(item.get("message") or ""))}
    return {"role": "meta", "kind": "event", "text": clip(as_text(dict(item)), 2_000)}


def _codex_step(step: int, reason: str, usage: Mapping[str, Any]) -> Turn:
    """A step turn from Codex's token counts (its stream and its rollouts name them alike; no cost)."""
    return {"role": "meta", "kind": "step", "step": step, "reason": reason,
            "tokens": {"input": usage.get("input_tokens"), "output": usage.get("output_tokens"),
                       "cache_read": usage.get("cached_input_tokens"),
                       "reasoning": usage.get("reasoning_output_tokens")},
            "cost_usd": None}


def read_codex_events(lines: Iterable[str]) -> list[Turn]:
    """Codex's ``codex exec --json`` stream (``events.jsonl``): items and turns.

    An item (``agent_message``, ``reasoning``, ``command_execution``, ``file_change``,
    ``mcp_tool_call``, ``web_search``, ``error``...) is shown where it started, as it was when last
    heard of (a command cut off by a timeout shows ``in_progress``); ``turn.completed`` gives the
    turn's tokens (Codex reports no cost), ``turn.failed`` and ``error`` its errors.
    """
    records, unreadable = json_lines(lines)
    turns: list[Turn] = []
    where: dict[str, int] = {}
    steps = 0
    for record in records:
        kind = record.get("type")
        if kind in ("item.started", "item.updated", "item.completed"):
            item = json_table(record.get("item"))
            turn = _codex_item(item)
            key = str(item.get("id", ""))
            if key and key in where:
                turns[where[key]] = turn
            else:
                where[key] = len(turns)
                turns.append(turn)
        elif kind == "turn.completed":
            steps += 1
            turns.append(_codex_step(steps, "turn completed", json_table(record.get("usage"))))
        elif kind in ("turn.failed", "error"):
            message = json_table(record.get("error")).get("message") if kind == "turn.failed" else record.get("message")
            turns.append({"role": "error", "kind": "error", "text": clip(f"{kind}: {message}")})
    return noting_unreadable(turns, unreadable)


def _rollout_command(command: Any) -> str:
    """A rollout's command as the shell line it ran (``["/bin/bash", "-lc", LINE]`` is LINE)."""
    if isinstance(command, list):
        words = [str(word) for word in command]
        return words[2] if len(words) == 3 and words[1] in ("-c", "-lc") else shlex.join(words)
    return str(command or "")


def _rollout_item(item: Mapping[str, Any]) -> Turn:
    kind = item.get("type")
    status = str(item.get("status") or "")
    if kind in ("AgentMessage", "UserMessage"):
        text = "\n".join(str(part["text"]) for part in map(json_table, item.get("content") or []) if part.get("text"))
        return {"role": "assistant" if kind == "AgentMessage" else "user", "kind": "text", "text": clip(text)}
    if kind == "Reasoning":
        return {"role": "assistant", "kind": "reasoning",
                "text": clip("\n".join(str(text) for text in item.get("summary_text") or []))}
    if kind == "CommandExecution":
        code = item.get("exit_code")
        return {"role": "tool", "kind": "tool", "tool": "shell", "title": "",
                "status": f"{status}, exit {code}" if code is not None else status,
                "input": clip(_rollout_command(item.get("command"))),
                "output": clip(str(item.get("aggregated_output") or "")), "error": None}
    if kind == "FileChange":
        changes = json_table(item.get("changes"))
        return {"role": "tool", "kind": "tool", "tool": "file_change", "title": "", "status": status,
                "input": "\n".join(f"{json_table(change).get('type', '?')} {path}" for path, change in changes.items()),
                "output": clip("".join(str(json_table(change).get("unified_diff") or "")
                                       for change in changes.values())) or None,
                "error": clip(str(item["stderr"])) if item.get("stderr") else None}
    return {"role": "meta", "kind": "event", "text": clip(f"{kind}: {as_text(dict(item))}", 2_000)}


def read_codex_rollout(lines: Iterable[str]) -> list[Turn]:
    """A Codex rollout (``transcript/<yyyy>/<mm>/<dd>/rollout-*.jsonl``, copied from ``$CODEX_HOME/sessions``).

    Its ``event_msg`` records are the session as Codex saw it: each finished item (the prompt, the
    reasoning summaries, file changes with their diffs, commands, the answers), a ``token_count`` per
    model call (its ``last_token_usage``), errors and the task's end. The prompt (the first user
    message) is prompt.txt's, so it is not shown again.
    """
    records, unreadable = json_lines(lines)
    turns: list[Turn] = []
    prompted = False
    steps = 0
    for record in records:
        payload = json_table(record.get("payload"))
        kind = payload.get("type") if record.get("type") == "event_msg" else None
        if kind == "item_completed":
            item = json_table(payload.get("item"))
            if item.get("type") == "UserMessage" and not prompted:
                prompted = True
                continue
            turns.append(_rollout_item(item))
        elif kind == "token_count":
            steps += 1
            last = json_table(json_table(payload.get("info")).get("last_token_usage"))
            turns.append(_codex_step(steps, "model call", last))
        elif kind in ("error", "stream_error"):
            turns.append({"role": "error", "kind": "error", "text": clip(f"{kind}: {payload.get('message')}")})
        elif kind == "turn_aborted":
            turns.append({"role": "error", "kind": "error", "text": f"turn aborted: {payload.get('reason')}"})
    return noting_unreadable(turns, unreadable)


def codex_first(text: str) -> bool:
    return str(first_record(text).get("type", "")).startswith(("thread.", "turn.", "item."))


def rollout_first(text: str) -> bool:
    return first_record(text).get("type") == "session_meta"
