"""What an agent did, as a conversation: transcript readers per agent format.

A reader turns one file of a cell's run dir into a list of ``Turn`` dicts the cell page shows
one under the other:

- ``{"role": "user", "kind": "text", "text"}``: the prompt (or a sub-agent's task);
- ``{"role": "assistant", "kind": "text" | "reasoning", "text"}``;
- ``{"role": "tool", "kind": "tool", "tool", "title", "status", "input", "output", "error"}``;
- ``{"role": "meta", "kind": "step", "step", "reason", "tokens", "cost_usd"}``: a model call ended;
- ``{"role": "error", "kind": "error", "text"}``;
- ``{"role": "meta", "kind": "event", "text"}``: anything else the stream held, shown as it is.

A turn a sub-agent took carries ``"agent"`` (who: ``"sub-agent"`` or the sub-agent's name). Where the
format has no ``step`` turns but says which model call a turn came from (Claude Code's message ids,
mini-swe-agent's assistant messages), the turn carries ``"call"``: ATIF's steps are cut there (``atif``).

The files are those the arms write (``arms/``): the agent's stdout stream, ``events.jsonl``
(opencode's ``--format json``, Claude Code's ``stream-json``, Codex's ``exec --json``),
mini-swe-agent's ``trajectory.json``, Gemini CLI's ``result.json``, and the agents' own
transcripts copied under ``transcript/`` (Claude Code's session, Codex's rollouts, Gemini CLI's chats).
``read_transcript`` chooses by what the run dir holds: each ``TranscriptSource`` names the files
it reads and says whether a file's first record is in its format (three agents write
``events.jsonl``); the row's arm kind only says which to try first (``KIND_SOURCES``). Without
any, the agent's plain output (``FALLBACK_OUTPUTS``) is shown as a single block.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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
        if record["type"] == "user" and isinstance(mapping(record.get("message")).get("content"), str) \
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
    message = mapping(record.get("message"))
    content = message.get("content")
    start = len(turns)
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    for block in blocks if isinstance(blocks, list) else []:
        block = mapping(block)
        part = block.get("type")
        if part == "text":
            turns.append(_of({"role": role, "kind": "text", "text": clip(str(block.get("text") or ""))}, agent))
        elif part == "thinking":
            turns.append(_of({"role": "assistant", "kind": "reasoning",
                              "text": clip(str(block.get("thinking") or ""))}, agent))
        elif part == "tool_use":
            turns.append(_of(_tool_turn(str(block.get("name") or ""), block.get("input"), block.get("id")), agent))
        elif part == "tool_result":
            _answer(turns, block.get("tool_use_id"), block.get("content"), bool(block.get("is_error")))
    if role == "assistant":
        _called(turns, start, message.get("id"))


def read_mini_trajectory(lines: Iterable[str]) -> list[Turn]:
    """mini-swe-agent's trajectory (``--output``: one JSON document, ``messages`` in the chat format).

    The system message and the first user message (the task, as prompt.txt shows it) are skipped;
    assistant messages give their text and ``tool_calls`` and, from their ``extra.response.usage``, a
    step; tool messages their output, and the final ``exit`` message the exit status.
    """
    try:
        document = mapping(json.loads("\n".join(lines)))
    except ValueError:
        return [{"role": "error", "kind": "error", "text": "the trajectory is not JSON"}]
    turns: list[Turn] = []
    users = steps = 0
    messages = document.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        message = mapping(message)
        role, content = message.get("role"), message.get("content")
        if role == "user":
            users += 1
            if users > 1:
                turns.append({"role": "user", "kind": "text", "text": clip(_json_text(content))})
        elif role == "assistant":
            start = len(turns)
            if content:
                turns.append({"role": "assistant", "kind": "text", "text": clip(_json_text(content))})
            for call in message.get("tool_calls") or []:
                call = mapping(call)
                function = mapping(call.get("function"))
                turns.append(_tool_turn(str(function.get("name") or ""), function.get("arguments"), call.get("id")))
            _called(turns, start, f"message-{index}")
            extra = mapping(message.get("extra"))
            usage = mapping(mapping(extra.get("response")).get("usage"))
            if usage:  # OpenAI chat usage: cached tokens inside the prompt's, reasoning inside the completion's
                steps += 1
                turns.append({"role": "meta", "kind": "step", "step": steps, "reason": "model call", "tokens": {
                    "input": usage.get("prompt_tokens"), "output": usage.get("completion_tokens"),
                    "cached": mapping(usage.get("prompt_tokens_details")).get("cached_tokens"),
                    "reasoning": mapping(usage.get("completion_tokens_details")).get("reasoning_tokens")},
                    "cost_usd": extra.get("cost")})
        elif role == "tool":
            _answer(turns, message.get("tool_call_id"), content)
        elif role == "exit":
            status = mapping(message.get("extra")).get("exit_status")
            turns.append({"role": "meta", "kind": "event", "text": f"exit: {status}"})
    return turns


def _json_lines(lines: Iterable[str]) -> tuple[list[dict[str, Any]], int]:
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


def _unreadable(turns: list[Turn], count: int) -> list[Turn]:
    if count:
        turns.append({"role": "meta", "kind": "event", "text": f"{count} line(s) of the stream were not JSON"})
    return turns


def _called(turns: list[Turn], start: int, call: Any) -> None:
    """Mark the turns from ``start`` on as the model call ``call``'s (a message id, an index)."""
    if call is not None and not isinstance(call, (dict, list)):
        for turn in turns[start:]:
            turn.setdefault("call", str(call))


def _of(turn: Turn, agent: str | None) -> Turn:
    return {**turn, "agent": agent} if agent else turn


def read_claude_stream(lines: Iterable[str]) -> list[Turn]:
    """Claude Code's ``--output-format stream-json`` (``events.jsonl``), one event a line.

    ``assistant`` and ``user`` events carry the conversation as the session transcript does
    (content blocks ``text``, ``thinking``, ``tool_use``, ``tool_result``); an event with a
    ``parent_tool_use_id`` is a sub-agent's, and says so. The prompt is not in the stream (it
    came on stdin). ``result`` ends the run: its turns, cost and, when it failed, its error.
    Partial messages (``stream_event``) and ``system`` events are bookkeeping, skipped.
    """
    records, unreadable = _json_lines(lines)
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
                turns.append({"role": "error", "kind": "error", "text": clip(_json_text(record.get("result")))})
    return _unreadable(turns, unreadable)


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
        changes = [mapping(change) for change in item.get("changes") or []]
        return {"role": "tool", "kind": "tool", "tool": "file_change", "title": "", "status": status,
                "input": "\n".join(f"{change.get('kind', '?')} {change.get('path', '?')}" for change in changes),
                "output": None, "error": None}
    if kind == "mcp_tool_call":
        error = mapping(item.get("error")).get("message")
        return {"role": "tool", "kind": "tool", "tool": f"{item.get('server', '?')}.{item.get('tool', '?')}",
                "title": "", "status": status, "input": clip(_json_text(item.get("arguments", {}))),
                "output": clip(_json_text(item["result"])) if item.get("result") is not None else None,
                "error": clip(str(error)) if error else None}
    if kind == "web_search":
        return {"role": "tool", "kind": "tool", "tool": "web_search", "title": "", "status": status,
                "input": clip(str(item.get("query") or "")), "output": None, "error": None}
    if kind == "error":
        return {"role": "error", "kind": "error", "text": clip(str(item.get("message") or ""))}
    return {"role": "meta", "kind": "event", "text": clip(_json_text(dict(item)), 2_000)}


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
    records, unreadable = _json_lines(lines)
    turns: list[Turn] = []
    where: dict[str, int] = {}
    steps = 0
    for record in records:
        kind = record.get("type")
        if kind in ("item.started", "item.updated", "item.completed"):
            item = mapping(record.get("item"))
            turn = _codex_item(item)
            key = str(item.get("id", ""))
            if key and key in where:
                turns[where[key]] = turn
            else:
                where[key] = len(turns)
                turns.append(turn)
        elif kind == "turn.completed":
            steps += 1
            turns.append(_codex_step(steps, "turn completed", mapping(record.get("usage"))))
        elif kind in ("turn.failed", "error"):
            message = mapping(record.get("error")).get("message") if kind == "turn.failed" else record.get("message")
            turns.append({"role": "error", "kind": "error", "text": clip(f"{kind}: {message}")})
    return _unreadable(turns, unreadable)


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
        text = "\n".join(str(part["text"]) for part in map(mapping, item.get("content") or []) if part.get("text"))
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
        changes = mapping(item.get("changes"))
        return {"role": "tool", "kind": "tool", "tool": "file_change", "title": "", "status": status,
                "input": "\n".join(f"{mapping(change).get('type', '?')} {path}" for path, change in changes.items()),
                "output": clip("".join(str(mapping(change).get("unified_diff") or "") for change in changes.values()))
                or None, "error": clip(str(item["stderr"])) if item.get("stderr") else None}
    return {"role": "meta", "kind": "event", "text": clip(f"{kind}: {_json_text(dict(item))}", 2_000)}


def read_codex_rollout(lines: Iterable[str]) -> list[Turn]:
    """A Codex rollout (``transcript/<yyyy>/<mm>/<dd>/rollout-*.jsonl``, copied from ``$CODEX_HOME/sessions``).

    Its ``event_msg`` records are the session as Codex saw it: each finished item (the prompt, the
    reasoning summaries, file changes with their diffs, commands, the answers), a ``token_count`` per
    model call (its ``last_token_usage``), errors and the task's end. The prompt (the first user
    message) is prompt.txt's, so it is not shown again.
    """
    records, unreadable = _json_lines(lines)
    turns: list[Turn] = []
    prompted = False
    steps = 0
    for record in records:
        payload = mapping(record.get("payload"))
        kind = payload.get("type") if record.get("type") == "event_msg" else None
        if kind == "item_completed":
            item = mapping(payload.get("item"))
            if item.get("type") == "UserMessage" and not prompted:
                prompted = True
                continue
            turns.append(_rollout_item(item))
        elif kind == "token_count":
            steps += 1
            last = mapping(mapping(payload.get("info")).get("last_token_usage"))
            turns.append(_codex_step(steps, "model call", last))
        elif kind in ("error", "stream_error"):
            turns.append({"role": "error", "kind": "error", "text": clip(f"{kind}: {payload.get('message')}")})
        elif kind == "turn_aborted":
            turns.append({"role": "error", "kind": "error", "text": f"turn aborted: {payload.get('reason')}"})
    return _unreadable(turns, unreadable)


def _gemini_messages(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages of a Gemini CLI chat file, each as last written (a message is rewritten as it grows)."""
    messages: dict[str, dict[str, Any]] = {}
    for record in records:
        initial = mapping(record.get("$set")).get("messages")
        for message in (initial if isinstance(initial, list) else [record]):
            message = mapping(message)
            if "id" in message and "type" in message:
                messages[str(message["id"])] = message
    return list(messages.values())


def _gemini_parts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content] if content else []
    parts = map(mapping, content if isinstance(content, list) else [])
    return [str(part["text"]) for part in parts if part.get("text")]


def _gemini_call(call: Mapping[str, Any]) -> Turn:
    outputs, errors = [], []
    for result in call.get("result") or []:
        response = mapping(mapping(mapping(result).get("functionResponse")).get("response"))
        if "output" in response:
            outputs.append(_json_text(response["output"]))
        if response.get("error"):
            errors.append(_json_text(response["error"]))
    return {"role": "tool", "kind": "tool", "tool": str(call.get("name") or "?"),
            "title": str(call.get("description") or ""), "status": str(call.get("status") or ""),
            "input": clip(_json_text(call.get("args", {}))), "output": clip("\n".join(outputs)) if outputs else None,
            "error": clip("\n".join(errors)) if errors else None}


def read_gemini_chat(lines: Iterable[str], agent: str | None = None) -> list[Turn]:
    """A Gemini CLI chat (``transcript/<dir>/chats/session-*.jsonl``, copied from ``~/.gemini/tmp``).

    The first line describes the session; then messages, each rewritten as it grows (its last
    version counts), and ``$set`` updates. ``gemini`` messages give their thoughts, text, tool
    calls with their results, and tokens; ``user`` messages before the first answer are the
    setup and the prompt (prompt.txt shows it), later ones are shown; ``info``, ``warning`` and
    ``error`` messages as they are. ``agent`` marks a sub-agent's chat, whose task is shown.
    """
    records, unreadable = _json_lines(lines)
    turns: list[Turn] = []
    answered = agent is not None
    steps = 0
    for message in _gemini_messages(records):
        kind = message.get("type")
        if kind == "user":
            if answered:
                turns += [_of({"role": "user", "kind": "text", "text": clip(text)}, agent)
                          for text in _gemini_parts(message.get("content"))]
        elif kind == "gemini":
            answered = True
            for thought in message.get("thoughts") or []:
                thought = mapping(thought)
                text = "\n".join(str(thought[key]) for key in ("subject", "description") if thought.get(key))
                if text:
                    turns.append(_of({"role": "assistant", "kind": "reasoning", "text": clip(text)}, agent))
            turns += [_of({"role": "assistant", "kind": "text", "text": clip(text)}, agent)
                      for text in _gemini_parts(message.get("content"))]
            turns += [_of(_gemini_call(mapping(call)), agent) for call in message.get("toolCalls") or []]
            tokens = mapping(message.get("tokens"))
            if tokens:
                steps += 1
                turns.append(_of({"role": "meta", "kind": "step", "step": steps, "reason": message.get("model"),
                                  "tokens": tokens, "cost_usd": None}, agent))
        elif kind == "error":
            turns.append(_of({"role": "error", "kind": "error", "text": clip(_json_text(message.get("content")))},
                             agent))
        elif kind in ("info", "warning"):
            text = clip(f"{kind}: {_json_text(message.get('content'))}")
            turns.append(_of({"role": "meta", "kind": "event", "text": text}, agent))
    return _unreadable(turns, unreadable)


def read_gemini_result(lines: Iterable[str]) -> list[Turn]:
    """Gemini CLI's ``--output-format json`` result (``result.json``): its last answer and its error, if any."""
    try:
        document = mapping(json.loads("\n".join(lines)))
    except ValueError:
        return [{"role": "error", "kind": "error", "text": "the result is not JSON"}]
    turns: list[Turn] = []
    if document.get("response"):
        turns.append({"role": "assistant", "kind": "text", "text": clip(_json_text(document["response"]))})
    error = mapping(document.get("error"))
    if error:
        turns.append({"role": "error", "kind": "error",
                      "text": clip(f"{error.get('type', 'error')}: {error.get('message', _json_text(error))}")})
    return turns


# -- which file is the transcript --------------------------------------------------------------

def _first_record(text: str) -> dict[str, Any]:
    for line in text.splitlines()[:20]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            return record
    return {}


def _opencode_first(text: str) -> bool:
    record = _first_record(text)
    return "sessionID" in record or "part" in record


def _claude_first(text: str) -> bool:
    record = _first_record(text)
    return "session_id" in record and record.get("type") in ("system", "stream_event", "user", "assistant", "result")


def _codex_first(text: str) -> bool:
    return str(_first_record(text).get("type", "")).startswith(("thread.", "turn.", "item."))


def _rollout_first(text: str) -> bool:
    return _first_record(text).get("type") == "session_meta"


def _any(text: str) -> bool:
    return True


def matches(name: str, pattern: str) -> bool:
    """Whether the run-dir path ``name`` matches the glob ``pattern``, whose ``*`` stays within one path part."""
    return re.fullmatch("[^/]*".join(map(re.escape, pattern.split("*"))), name) is not None


@dataclass(frozen=True)
class TranscriptSource:
    """One way to read a transcript: the format's name, the run-dir files it reads (globs, first match
    first), whether a file's text is in this format, and the reader."""

    format: str
    patterns: tuple[str, ...]
    claims: Callable[[str], bool]
    reader: TranscriptReader


#: Every source, in the order tried for a row whose arm kind is not in ``KIND_SOURCES``.
SOURCES: dict[str, TranscriptSource] = {source.format: source for source in (
    TranscriptSource("opencode", ("events.jsonl",), _opencode_first, read_opencode_events),
    TranscriptSource("claude-code", ("events.jsonl",), _claude_first, read_claude_stream),
    TranscriptSource("codex", ("events.jsonl",), _codex_first, read_codex_events),
    # The rollouts Codex keeps: what a cell whose stream is missing or empty (a command arm) still has.
    TranscriptSource("codex-rollout", ("transcript/*/*/*/rollout-*.jsonl",), _rollout_first, read_codex_rollout),
    TranscriptSource("mini-swe-agent", ("trajectory.json",), _any, read_mini_trajectory),
    TranscriptSource("gemini-cli", ("transcript/*/chats/session-*.jsonl",), _any, read_gemini_chat),
    # The session transcripts Claude Code keeps (``~/.claude/projects/<project>/<session>.jsonl``): what a
    # cell whose stream is missing or empty still has.
    TranscriptSource("claude-code-session", ("transcript/*/*.jsonl",), _any, read_claude_transcript),
    TranscriptSource("gemini-cli-result", ("result.json",), _any, read_gemini_result),
)}
#: An arm kind's sources, tried before the rest: its agent's richest record first.
KIND_SOURCES: dict[str, tuple[str, ...]] = {
    "opencode": ("opencode",),
    "claude-code": ("claude-code", "claude-code-session"),
    "codex": ("codex", "codex-rollout"),
    "gemini-cli": ("gemini-cli", "gemini-cli-result"),
    "mini-swe-agent": ("mini-swe-agent",),
}
#: Gemini CLI's sub-agents' chats (``chats/<parent session>/<sub-agent session>.jsonl``), shown after the main one.
GEMINI_SUBAGENT_CHATS = "transcript/*/chats/*/*.jsonl"
#: Plain agent output, shown whole when no transcript reader applies.
FALLBACK_OUTPUTS = ("stdout.log", "driver.log")
PROMPT_FILE = "prompt.txt"


def sources_for(kind: str | None, preferred: Mapping[str, tuple[str, ...]] = KIND_SOURCES) -> list[TranscriptSource]:
    """The sources tried for a row of arm kind ``kind``: the kind's own (``preferred``'s), then every other."""
    first = preferred.get(kind or "", ())
    return [SOURCES[name] for name in first] + [source for name, source in SOURCES.items() if name not in first]


def looked_for() -> list[str]:
    """Every file a transcript is looked for in, for a page that found none."""
    patterns = dict.fromkeys(pattern for source in SOURCES.values() for pattern in source.patterns)
    return [*patterns, *FALLBACK_OUTPUTS]


def read_transcript(run_dir: Path | None, read_text: Callable[[Path], str | None], kind: str | None = None,
                    names: Sequence[str] = (),
                    preferred: Mapping[str, tuple[str, ...]] = KIND_SOURCES) -> dict[str, Any] | None:
    """The cell's conversation: ``{"format", "file", "files", "turns", "omitted"}``; None when the run dir has none.

    ``read_text`` reads a run-dir file (bounded, inside the out dir) or gives None; ``kind`` is the
    row's arm kind; ``names`` are the run dir's files (relative, ``/``-separated), where the
    sources' globs look; ``preferred`` the sources each kind tries first.
    """
    if run_dir is None:
        return None
    prompt = read_text(run_dir / PROMPT_FILE)
    turns: list[Turn] = [{"role": "user", "kind": "text", "text": clip(prompt)}] if prompt else []
    texts: dict[str, str | None] = {}

    def text_of(name: str) -> str | None:
        if name not in texts:
            texts[name] = read_text(run_dir / name)
        return texts[name]

    for source in sources_for(kind, preferred):
        for name in (name for pattern in source.patterns for name in names if matches(name, pattern)):
            text = text_of(name)
            if text is None or not text.strip() or not source.claims(text):
                continue
            read, files = source.reader(text.splitlines()), [name]
            if source.format == "gemini-cli":
                for sub in (sub for sub in names if matches(sub, GEMINI_SUBAGENT_CHATS)):
                    sub_text = text_of(sub)
                    if sub_text is not None:
                        read += [{"role": "meta", "kind": "event", "text": f"sub-agent chat: {sub}"},
                                 *read_gemini_chat(sub_text.splitlines(), "sub-agent")]
                        files.append(sub)
            if not read:
                continue  # a stream with nothing in it: another source may hold more
            turns += read
            return {"format": source.format, "file": name, "files": files, "turns": turns[:MAX_TURNS],
                    "omitted": max(0, len(turns) - MAX_TURNS)}
    for name in FALLBACK_OUTPUTS:
        text = read_text(run_dir / name)
        if text is not None:
            turns.append({"role": "assistant", "kind": "output", "text": clip(text, 200_000), "file": name})
            return {"format": "output", "file": name, "files": [name], "turns": turns, "omitted": 0}
    return {"format": "prompt", "file": PROMPT_FILE, "files": [], "turns": turns, "omitted": 0} if turns else None
