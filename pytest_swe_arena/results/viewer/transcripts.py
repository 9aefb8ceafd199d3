"""What an agent did, as a conversation: transcript readers per agent format.

A reader turns one file of a cell's run dir into a list of ``Turn`` dicts the cell page shows
one under the other:

- ``{"role": "user", "kind": "text", "text"}``: the prompt;
- ``{"role": "assistant", "kind": "text" | "reasoning", "text"}``;
- ``{"role": "tool", "kind": "tool", "tool", "title", "status", "input", "output", "error"}``;
- ``{"role": "meta", "kind": "step", "step", "reason", "tokens", "cost_usd"}``: a model call ended;
- ``{"role": "error", "kind": "error", "text"}``;
- ``{"role": "meta", "kind": "event", "text"}``: anything else the stream held, shown as it is.

``TRANSCRIPT_READERS`` is the hook for more agents: add ``(file name, format name, reader)`` and
the first file a run dir has is its transcript. Without one, the agent's plain output
(``FALLBACK_OUTPUTS``) is shown as a single block.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

Turn = dict[str, Any]
TranscriptReader = Callable[[Iterable[str]], list[Turn]]

#: Longest text kept of one turn (a file read, a tool's output); the raw file has the rest.
MAX_TURN_CHARS = 16_000
#: Most turns kept of one transcript.
MAX_TURNS = 3_000


def mapping(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: rows and streams are read, never trusted."""
    return value if isinstance(value, dict) else {}


def clip(text: str, limit: int = MAX_TURN_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit:,} more characters in the raw file ...]"


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True)


def _opencode_event(event: Mapping[str, Any], steps: list[int]) -> Turn | None:
    kind = event.get("type")
    part = mapping(event.get("part"))
    if kind == "step_start":
        steps[0] += 1
        return None
    if kind in ("text", "reasoning"):
        return {"role": "assistant", "kind": kind, "text": clip(str(part.get("text") or ""))}
    if kind == "tool_use":
        state = mapping(part.get("state"))
        return {"role": "tool", "kind": "tool", "tool": str(part.get("tool") or "?"),
                "title": str(state.get("title") or ""), "status": str(state.get("status") or ""),
                "input": clip(_json_text(state.get("input", {}))),
                "output": clip(_json_text(state["output"])) if "output" in state else None,
                "error": clip(_json_text(state["error"])) if state.get("error") else None}
    if kind == "step_finish":
        tokens = mapping(part.get("tokens"))
        return {"role": "meta", "kind": "step", "step": steps[0], "reason": part.get("reason"),
                "tokens": tokens, "cost_usd": part.get("cost")}
    if kind == "error":
        error = mapping(event.get("error"))
        data = mapping(error.get("data"))
        return {"role": "error", "kind": "error",
                "text": clip(f"{error.get('name', 'error')}: {data.get('message') or _json_text(error)}")}
    return {"role": "meta", "kind": "event", "text": clip(_json_text(event), 2_000)}


def read_opencode_events(lines: Iterable[str]) -> list[Turn]:
    """opencode's ``--format json`` stream (``events.jsonl``): text, reasoning, tool calls with results, steps."""
    turns: list[Turn] = []
    steps = [0]
    unreadable = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            unreadable += 1
            continue
        turn = _opencode_event(event, steps) if isinstance(event, dict) else None
        if turn is not None:
            turns.append(turn)
    if unreadable:
        turns.append({"role": "meta", "kind": "event", "text": f"{unreadable} line(s) of the stream were not JSON"})
    return turns


def _tool_turn(tool: str, arguments: Any, call_id: str | None) -> Turn:
    return {"role": "tool", "kind": "tool", "tool": tool or "?", "title": "", "status": "", "id": call_id,
            "input": clip(_json_text(arguments)), "output": "", "error": ""}


def _answer(turns: list[Turn], call_id: Any, output: Any, failed: bool = False) -> None:
    """Put a tool's result on the turn that called it (by id), or on its own turn when none did."""
    text = clip(_json_text(output))
    for turn in reversed(turns):
        if turn.get("kind") == "tool" and call_id is not None and turn.get("id") == call_id:
            turn["status"] = "error" if failed else "completed"
            turn["error" if failed else "output"] = text
            return
    turns.append({"role": "meta", "kind": "event", "text": text})


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
            record = mapping(json.loads(line))
        except ValueError:
            continue
        if record.get("type") not in ("user", "assistant"):
            continue
        content = mapping(record.get("message")).get("content")
        if isinstance(content, str):
            if record["type"] == "user" and not prompt_seen:
                prompt_seen = True
                continue
            turns.append({"role": record["type"], "kind": "text", "text": clip(content)})
            continue
        for block in content if isinstance(content, list) else []:
            block = mapping(block)
            kind = block.get("type")
            if kind == "text":
                turns.append({"role": record["type"], "kind": "text", "text": clip(str(block.get("text") or ""))})
            elif kind == "thinking":
                turns.append({"role": "assistant", "kind": "reasoning", "text": clip(str(block.get("thinking") or ""))})
            elif kind == "tool_use":
                turns.append(_tool_turn(str(block.get("name") or ""), block.get("input"), block.get("id")))
            elif kind == "tool_result":
                _answer(turns, block.get("tool_use_id"), block.get("content"), bool(block.get("is_error")))
    return turns


def read_mini_trajectory(lines: Iterable[str]) -> list[Turn]:
    """mini-swe-agent's trajectory (``--output``: one JSON document, ``messages`` in the chat format).

    The system message and the first user message (the task, as prompt.txt shows it) are skipped;
    assistant messages give their text and ``tool_calls``, tool messages their output, and the
    final ``exit`` message the exit status.
    """
    try:
        document = mapping(json.loads("\n".join(lines)))
    except ValueError:
        return [{"role": "error", "kind": "error", "text": "the trajectory is not JSON"}]
    turns: list[Turn] = []
    users = 0
    messages = document.get("messages")
    for message in messages if isinstance(messages, list) else []:
        message = mapping(message)
        role, content = message.get("role"), message.get("content")
        if role == "user":
            users += 1
            if users > 1:
                turns.append({"role": "user", "kind": "text", "text": clip(_json_text(content))})
        elif role == "assistant":
            if content:
                turns.append({"role": "assistant", "kind": "text", "text": clip(_json_text(content))})
            for call in message.get("tool_calls") or []:
                call = mapping(call)
                function = mapping(call.get("function"))
                turns.append(_tool_turn(str(function.get("name") or ""), function.get("arguments"), call.get("id")))
        elif role == "tool":
            _answer(turns, message.get("tool_call_id"), content)
        elif role == "exit":
            status = mapping(message.get("extra")).get("exit_status")
            turns.append({"role": "meta", "kind": "event", "text": f"exit: {status}"})
    return turns


#: (file in the run dir, format, reader): the first file present is the cell's transcript. An arm
#: keeps its agent's transcript under the name given here (Codex's rollout and Gemini CLI's chat
#: are not read yet: their cells show the agent's output).
TRANSCRIPT_READERS: list[tuple[str, str, TranscriptReader]] = [
    ("events.jsonl", "opencode", read_opencode_events),
    ("claude-transcript.jsonl", "claude-code", read_claude_transcript),
    ("mini-trajectory.json", "mini-swe-agent", read_mini_trajectory),
]
#: Plain agent output, shown whole when no transcript reader applies.
FALLBACK_OUTPUTS = ("stdout.log", "driver.log")
PROMPT_FILE = "prompt.txt"


def read_transcript(run_dir: Path | None, read_text: Callable[[Path], str | None]) -> dict[str, Any] | None:
    """The cell's conversation: ``{"format", "file", "turns", "omitted"}``; None when the run dir has none.

    ``read_text`` reads a run-dir file (bounded, inside the out dir) or gives None.
    """
    if run_dir is None:
        return None
    prompt = read_text(run_dir / PROMPT_FILE)
    turns: list[Turn] = [{"role": "user", "kind": "text", "text": clip(prompt)}] if prompt else []
    for name, form, reader in TRANSCRIPT_READERS:
        text = read_text(run_dir / name)
        if text is not None:
            turns += reader(text.splitlines())
            return {"format": form, "file": name, "turns": turns[:MAX_TURNS],
                    "omitted": max(0, len(turns) - MAX_TURNS)}
    for name in FALLBACK_OUTPUTS:
        text = read_text(run_dir / name)
        if text is not None:
            turns.append({"role": "assistant", "kind": "output", "text": clip(text, 200_000), "file": name})
            return {"format": "output", "file": name, "turns": turns, "omitted": 0}
    return {"format": "prompt", "file": PROMPT_FILE, "turns": turns, "omitted": 0} if turns else None
