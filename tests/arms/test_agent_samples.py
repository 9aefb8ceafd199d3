"""The captured agent reports in tests/data/agents/ add up to what the endpoint served when they were captured.

The samples are real output of the pinned CLIs (tests/helpers/capture_agent_samples.py
writes them); the arm kinds' parsers will be tested on them. This keeps them
honest: each report, read by the contract tests' readers, equals the served
usage recorded beside it. Needs no CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.agent_clis import (
    CLAUDE_MODEL,
    CLAUDE_PRICE,
    anthropic_tokens,
    claude_model_usage,
    claude_transcript_tokens,
    codex_rollout_running_total,
    codex_rollout_tokens,
    codex_tokens,
    gemini_model_tokens,
    gemini_transcript_tokens,
    mini_message_usages,
    priced,
    summed,
)
from helpers.scripted_apis import Tokens

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "agents"


def served(agent: str, name: str = "served.json", queue: str | None = None) -> Tokens:
    data = json.loads((SAMPLES / agent / name).read_text())
    return summed(Tokens(**s["tokens"]) for s in data["served"]
                  if queue is None or (s["queue"] or "").split("#")[0] == queue)


def lines(agent: str, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SAMPLES / agent / name).read_text().splitlines() if line.strip()]


def test_claude_samples() -> None:
    result = json.loads((SAMPLES / "claude" / "result.json").read_text())
    assert claude_model_usage(result) == {CLAUDE_MODEL: served("claude")}
    assert anthropic_tokens(result["usage"]) == served("claude")
    assert abs(result["total_cost_usd"] - priced(served("claude"), CLAUDE_PRICE)) < 1e-9
    assert claude_transcript_tokens(SAMPLES / "claude" / "transcript.jsonl") == served("claude")
    main, sub = (served("claude", "subagent-served.json", queue) for queue in ("turns", "marker:SUBTASK-42"))
    (stream_result,) = [e for e in lines("claude", "subagent-stream.jsonl") if e["type"] == "result"]
    assert claude_model_usage(stream_result) == {CLAUDE_MODEL: main + sub}
    assert anthropic_tokens(stream_result["usage"]) == main
    assert claude_transcript_tokens(SAMPLES / "claude" / "subagent-transcript-main.jsonl") == main
    assert claude_transcript_tokens(SAMPLES / "claude" / "subagent-transcript-agent.jsonl") == sub


def test_codex_samples() -> None:
    (completed,) = [e for e in lines("codex", "events.jsonl") if e["type"] == "turn.completed"]
    assert codex_tokens(completed["usage"]) == served("codex")
    assert codex_rollout_tokens(SAMPLES / "codex" / "rollout.jsonl") == served("codex")
    assert codex_rollout_running_total(SAMPLES / "codex" / "rollout.jsonl") == served("codex")


def test_gemini_samples() -> None:
    result = json.loads((SAMPLES / "gemini" / "result.json").read_text())
    assert summed(gemini_model_tokens(result).values()) == served("gemini")
    assert gemini_transcript_tokens(SAMPLES / "gemini" / "chat.jsonl") == served("gemini", queue="turns")
    # stream-json's result reports no thoughts: they are total - input - output there
    (stream_result,) = [e for e in lines("gemini", "stream.jsonl") if e["type"] == "result"]
    stats = stream_result["stats"]
    total = served("gemini")
    assert stats["input_tokens"] == total.prompt_tokens and stats["cached"] == total.cache_read_tokens
    assert stats["output_tokens"] == total.output_tokens
    assert stats["total_tokens"] - stats["input_tokens"] - stats["output_tokens"] == total.reasoning_tokens
    main, sub = (served("gemini", "subagent-served.json", queue) for queue in ("turns", "marker:SUBTASK-42"))
    result = json.loads((SAMPLES / "gemini" / "subagent-result.json").read_text())
    assert summed(gemini_model_tokens(result).values()) == main + sub
    assert gemini_transcript_tokens(SAMPLES / "gemini" / "subagent-chat-main.jsonl") == main
    assert gemini_transcript_tokens(SAMPLES / "gemini" / "subagent-chat-agent.jsonl") == sub


def test_mini_samples() -> None:
    trajectory = json.loads((SAMPLES / "mini" / "trajectory.json").read_text())
    assert summed(mini_message_usages(trajectory)) == served("mini")
    assert trajectory["info"]["exit_status"] == "Submitted"
    assert trajectory["info"]["model_stats"]["api_calls"] == 3
