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


#: (file in the run dir, format, reader): the first file present is the cell's transcript.
#: Claude Code, Codex and mini-swe-agent transcripts are added here when their arms keep them.
TRANSCRIPT_READERS: list[tuple[str, str, TranscriptReader]] = [
    ("events.jsonl", "opencode", read_opencode_events),
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
