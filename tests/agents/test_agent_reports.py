"""The agent kinds' readers, on the real reports in tests/data/agents/: each equals what was served.

No CLI needed: the samples are what the pinned CLIs wrote (tests/helpers/capture_agent_samples.py),
beside the usage the scripted endpoint served them. The sweeps with the real CLIs are in
tests/arms/test_agent_kinds.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest
from helpers.scripted_apis import Tokens

from pytest_swe_arena.agents.claude_code import StreamAndSubagents, model_usage, read_transcripts
from pytest_swe_arena.agents.codex import Rollouts, codex_call
from pytest_swe_arena.agents.gemini_cli import Chats, gemini_tokens, read_error
from pytest_swe_arena.agents.mini_swe_agent import Trajectory, read_trajectory
from pytest_swe_arena.agents.reports import FigureReader
from pytest_swe_arena.files import LineFollower, json_objects
from pytest_swe_arena.spend.usage import Usage, add_usages

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "agents"


def served(agent: str, name: str = "served.json", *, queues: tuple[str, ...] | None = None) -> Tokens:
    data = json.loads((SAMPLES / agent / name).read_text())
    return sum((Tokens(**s["tokens"]) for s in data["served"]
                if queues is None or (s["queue"] or "").split("#")[0] in queues), Tokens())


def tokens(usages: Mapping[str, Usage] | Usage) -> Tokens:
    usage = add_usages(usages.values()) if isinstance(usages, Mapping) else usages
    return Tokens(usage.input_tokens or 0, usage.cache_read_tokens or 0, usage.cache_write_tokens or 0,
                  usage.output_tokens or 0, usage.reasoning_tokens or 0)


def test_claude_model_usage_includes_the_sub_agent_and_its_cost():
    lines = json_objects(SAMPLES / "claude" / "subagent-stream.jsonl")
    result = next(line for line in lines if line["type"] == "result")
    reader = FigureReader("result")
    models = model_usage(result, reader)
    assert tokens(models) == served("claude", "subagent-served.json") and not reader.problems
    assert add_usages(models.values()).cost_usd == pytest.approx(result["total_cost_usd"])


def test_claude_transcripts_count_each_message_once():
    assert tokens(read_transcripts([SAMPLES / "claude" / "transcript.jsonl"]).by_model()) == served("claude")
    both = [SAMPLES / "claude" / f"subagent-transcript-{who}.jsonl" for who in ("main", "agent")]
    assert tokens(read_transcripts(both).by_model()) == served("claude", "subagent-served.json")


def test_claude_live_usage_is_the_stream_plus_the_sub_agents_transcripts(tmp_path):
    stream = SAMPLES / "claude" / "subagent-stream.jsonl"
    live = StreamAndSubagents(stream, tmp_path)
    assert tokens(live.poll()) == served("claude", "subagent-served.json", queues=("turns",))  # main agent only
    subagents = tmp_path / "projects" / "-cell-repo" / "session" / "subagents"
    subagents.mkdir(parents=True)
    shutil.copy(SAMPLES / "claude" / "subagent-transcript-agent.jsonl", subagents / "agent-1.jsonl")
    assert tokens(live.poll()) == served("claude", "subagent-served.json")


def test_codex_turn_completed_and_rollout_are_what_was_served(tmp_path):
    events = json_objects(SAMPLES / "codex" / "events.jsonl")
    (turn,) = [event for event in events if event["type"] == "turn.completed"]
    assert tokens(codex_call(turn["usage"], "turn.completed")) == served("codex")
    rollout = tmp_path / "sessions" / "2026" / "12" / "01" / "rollout-x.jsonl"
    rollout.parent.mkdir(parents=True)
    shutil.copy(SAMPLES / "codex" / "rollout.jsonl", rollout)
    rollouts = Rollouts(tmp_path, None)
    models = rollouts.poll(final=True)
    assert list(models) == ["gpt-5.5"] and tokens(models) == served("codex") and models["gpt-5.5"].steps == 3


def test_gemini_stats_include_the_router_and_chats_leave_it_out(tmp_path):
    report = json.loads((SAMPLES / "gemini" / "result.json").read_text())
    reader = FigureReader("stats")
    models = {model: gemini_tokens(figures["tokens"], reader, prompt_key="prompt")
              for model, figures in report["stats"]["models"].items()}
    assert tokens(models) == served("gemini") and not reader.problems
    chat = tmp_path / ".gemini" / "tmp" / "repo" / "chats" / "session-1.jsonl"
    chat.parent.mkdir(parents=True)
    shutil.copy(SAMPLES / "gemini" / "chat.jsonl", chat)
    assert tokens(Chats(tmp_path).poll(final=True)) == served("gemini", queues=("turns",))


def test_gemini_error_object_is_read_from_stderr(tmp_path):
    stderr = tmp_path / "stderr.log"
    stderr.write_text('Warning: 256-color support not detected.\n{\n  "session_id": "s",\n  "error": {\n'
                      '    "type": "Error", "message": "API key not valid.", "code": 144\n  }\n}\n')
    assert read_error(stderr) == "API key not valid."


def test_mini_trajectory_usage_and_cost(tmp_path):
    data = json.loads((SAMPLES / "mini" / "trajectory.json").read_text())
    spend = read_trajectory(data, "openai/gpt-4o")
    assert list(spend.models) == ["gpt-4o"] and tokens(spend.models) == served("mini") and not spend.problems
    assert spend.models["gpt-4o"].cost_usd == pytest.approx(spend.details["reported_cost_usd"])
    half = tmp_path / "trajectory.json"
    live = Trajectory(half, "openai/gpt-4o")
    half.write_text(json.dumps(data))
    assert tokens(live.poll()) == served("mini")
    half.write_text(json.dumps(data)[:100])  # mini rewrites it in place: a half-written file keeps the last read
    assert tokens(live.poll()) == served("mini")


def test_figures_an_agent_gives_wrongly_are_unknown_and_said(tmp_path):
    reader = FigureReader("turn.completed")
    usage = codex_call({"input_tokens": "many", "output_tokens": 10, "reasoning_output_tokens": 20}, "x", reader)
    assert usage.input_tokens is None and usage.output_tokens is None  # reasoning above output: not believed
    assert reader.problems == ["turn.completed: input_tokens 'many' is not a whole number",
                               "turn.completed: a total of 10 is less than its parts [20]"]


def test_the_follower_waits_for_a_whole_line(tmp_path):
    path = tmp_path / "lines.jsonl"
    path.write_text('{"a": 1}\n{"b":')
    follower = LineFollower()
    assert [entry for _, entry in follower.objects([path])] == [{"a": 1}]
    with open(path, "a") as handle:
        handle.write(' 2}\nnot json\n')
    assert [entry for _, entry in follower.objects([path])] == [{"b": 2}]


def one_id(line: dict[str, object], key_path: tuple[str, ...], same: str) -> dict[str, object]:
    """``line`` with the id at ``key_path`` (where it has one) replaced by ``same``: a server that repeats an id."""
    table: object = line
    for key in key_path[:-1]:
        table = table.get(key) if isinstance(table, dict) else None
    if isinstance(table, dict) and key_path[-1] in table:
        table[key_path[-1]] = same
    return line


def with_one_id(source: Path, target: Path, key_path: tuple[str, ...], same: str) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(one_id(line, key_path, same)) + "\n" for line in json_objects(source)))
    return target


def test_each_call_counts_once_when_the_server_repeats_one_id_on_every_call(tmp_path):
    """Usage is the sum over calls, whatever ids the server gives: ids only join a call's repeated lines."""
    transcript = with_one_id(SAMPLES / "claude" / "transcript.jsonl", tmp_path / "claude.jsonl",
                             ("message", "id"), "msg_same")
    assert tokens(read_transcripts([transcript]).by_model()) == served("claude")
    both = [with_one_id(SAMPLES / "claude" / f"subagent-transcript-{who}.jsonl", tmp_path / f"{who}.jsonl",
                        ("message", "id"), "msg_same") for who in ("main", "agent")]
    assert tokens(read_transcripts(both).by_model()) == served("claude", "subagent-served.json")
    with_one_id(SAMPLES / "codex" / "rollout.jsonl", tmp_path / "codex" / "sessions" / "2026" / "rollout-x.jsonl",
                ("payload", "response_id"), "resp_same")
    models = Rollouts(tmp_path / "codex", None).poll(final=True)
    assert tokens(models) == served("codex") and models["gpt-5.5"].steps == 3
    data = json.loads((SAMPLES / "mini" / "trajectory.json").read_text())
    for message in data["messages"]:
        one_id(message, ("extra", "response", "id"), "chatcmpl-same")
    spend = read_trajectory(data, "openai/gpt-4o")
    assert tokens(spend.models) == served("mini") and add_usages(spend.models.values()).steps == 3
