"""What reading the agents' transcripts shares: the ``Turn`` a reader gives, and the helpers every format uses.

A reader (one per format, in each agent's module) turns one file of a cell's run dir into a list of
``Turn`` dicts the cell page shows one under the other:

- ``{"role": "user", "kind": "text", "text"}``: the prompt (or a sub-agent's task);
- ``{"role": "assistant", "kind": "text" | "reasoning", "text"}``;
- ``{"role": "tool", "kind": "tool", "tool", "title", "status", "input", "output", "error"}``;
- ``{"role": "meta", "kind": "step", "step", "reason", "tokens", "cost_usd"}``: a model call ended;
- ``{"role": "error", "kind": "error", "text"}``;
- ``{"role": "meta", "kind": "event", "text"}``: anything else the stream held, shown as it is.

A turn a sub-agent took carries ``"agent"`` (who: ``"sub-agent"`` or the sub-agent's name). Where the
format has no ``step`` turns but says which model call a turn came from (Claude Code's message ids,
mini-swe-agent's assistant messages), the turn carries ``"call"``: ATIF's steps are cut there
(``transcripts.atif``). Which file is read is ``transcripts.readers``' choice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

Turn = dict[str, Any]

#: Longest text kept of one turn (a file read, a tool's output); the raw file has the rest.
MAX_TURN_CHARS = 16_000


def clip(text: str, limit: int = MAX_TURN_CHARS) -> str:
    """``text`` cut at ``limit`` characters, saying how many more the raw file has."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit:,} more characters in the raw file ...]"


def as_text(value: Any) -> str:
    """A string as it is; any other JSON value as indented JSON, to show."""
    return value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True)


def tool_turn(tool: str, arguments: Any, call_id: str | None) -> Turn:
    """A tool call's turn, its result to come (``answer_call`` finds it by ``call_id``)."""
    return {"role": "tool", "kind": "tool", "tool": tool or "?", "title": "", "status": "", "id": call_id,
            "input": clip(as_text(arguments)), "output": "", "error": ""}


def answer_call(turns: list[Turn], call_id: Any, output: Any, failed: bool = False) -> None:
    """Put a tool's result on the turn that called it (by id), or on its own turn when none did."""
    text = clip(as_text(output))
    for turn in reversed(turns):
        if turn.get("kind") == "tool" and call_id is not None and turn.get("id") == call_id:
            turn["status"] = "error" if failed else "completed"
            turn["error" if failed else "output"] = text
            return
    turns.append({"role": "meta", "kind": "event", "text": text})


def json_lines(lines: Iterable[str]) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of a JSON-lines stream, and how many non-blank lines were not JSON."""
    records, unreadable = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            unreadable += 1
            continue
        if isinstance(record, dict):
            records.append(record)
    return records, unreadable


def noting_unreadable(turns: list[Turn], count: int) -> list[Turn]:
    """``turns``, with a last one saying how many lines were not JSON, if any."""
    if count:
        turns.append({"role": "meta", "kind": "event", "text": f"{count} line(s) of the stream were not JSON"})
    return turns


def mark_call(turns: list[Turn], start: int, call: Any) -> None:
    """Mark the turns from ``start`` on as the model call ``call``'s (a message id, an index)."""
    if call is not None and not isinstance(call, (dict, list)):
        for turn in turns[start:]:
            turn.setdefault("call", str(call))


def for_agent(turn: Turn, agent: str | None) -> Turn:
    """``turn`` marked as a sub-agent's (``agent``), when one is named."""
    return {**turn, "agent": agent} if agent else turn


def first_record(text: str) -> dict[str, Any]:
    """The first JSON object among a file's first 20 lines (empty if none): what tells a format apart."""
    for line in text.splitlines()[:20]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            return record
    return {}
