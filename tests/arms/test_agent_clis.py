"""Contract tests: the REAL Claude Code, Codex, Gemini CLI and mini-swe-agent against scripted endpoints.

Each test runs one CLI non-interactively in a temp git repo with a private
HOME and config dir (tests/helpers/agent_clis.py holds the recipes), against the
scripted endpoint of the API it speaks on 127.0.0.1 (Anthropic Messages,
OpenAI Responses, Gemini, OpenAI Chat). The scripted turns make it edit a
file with its own tools and run a shell command; the test checks the file,
the exit code, and that what the agent REPORTS (its usage, its cost, its
transcripts) equals what the endpoint served. They pin the facts
tests/helpers/AGENT_NOTES.md states, which the agent arm kinds are written from:
run them after upgrading a CLI.

Skipped only when a CLI is not installed (``npm install``; ``pip install -e .[test]``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers.agent_clis import (
    API_KEY,
    CLAUDE,
    CLAUDE_MODEL,
    CLAUDE_PRICE,
    CODEX,
    CODEX_MODEL,
    GEMINI,
    GEMINI_ROUTER_MARKER,
    MINI,
    MINI_MODEL,
    PROMPT,
    SUBAGENT_MARKER,
    AgentCell,
    anthropic_tokens,
    claude_argv,
    claude_env,
    claude_model_usage,
    claude_project_dir,
    claude_script,
    claude_subagent_script,
    claude_transcript_tokens,
    claude_transcripts,
    codex_argv,
    codex_env,
    codex_rollout_running_total,
    codex_rollout_tokens,
    codex_rollouts,
    codex_script,
    codex_tokens,
    gemini_argv,
    gemini_env,
    gemini_model_tokens,
    gemini_script,
    gemini_subagent_script,
    gemini_subagent_transcripts,
    gemini_transcript_tokens,
    gemini_transcripts,
    mini_argv,
    mini_env,
    mini_message_usages,
    mini_script,
    pinned_test_requirement,
    pinned_version,
    priced,
    summed,
    usage,
    version_of,
)
from helpers.arena import processes_with
from helpers.scripted_apis import Tokens
from helpers.scripted_model import ScriptedModel


@pytest.fixture
def cell(tmp_path: Path) -> AgentCell:
    return AgentCell(tmp_path / "cell")


def served(model: ScriptedModel, queue: str | None = None) -> Tokens:
    """What the endpoint served in full, optionally only for one queue ("turns", "marker:X", "aux:X")."""
    return summed(Tokens(**s["tokens"]) for s in model.served
                  if queue is None or (s["queue"] or "").split("#")[0] == queue)


def assert_edited(cell: AgentCell) -> None:
    assert cell.read("a.txt") == "bye\n"
    assert cell.read("ran.txt") == "ran"
    assert cell.changed_files() == ["a.txt", "ran.txt"]  # the agent left nothing else in the workspace
    assert not any(cell.home.iterdir())  # its config dir variable kept it out of HOME


# --------------------------------------------------------------------------- Claude Code


claude_only = pytest.mark.skipif(CLAUDE is None, reason="claude not found (npm install)")


@claude_only
def test_claude_code_edits_runs_bash_and_reports_what_was_served(cell: AgentCell) -> None:
    with ScriptedModel(claude_script(cell.repo), api_key=API_KEY) as model:
        run = cell.run(claude_argv(PROMPT), claude_env(cell, model.root_url))
    assert run.returncode == 0, run.stderr
    assert_edited(cell)
    report = run.json()
    assert (report["type"], report["subtype"], report["is_error"]) == ("result", "success", False)
    assert report["permission_denials"] == [] and report["num_turns"] == 4 and report["result"] == "All done."
    # every request was a model turn, with the key: no side calls, no auxiliary model
    assert [(r["api"], r["kind"], r["model"]) for r in model.model_requests()] == [
        ("anthropic", "turn", CLAUDE_MODEL)] * 4
    assert all(r["authorization"] for r in model.model_requests())
    assert model.remaining() == 0
    total = served(model)
    assert total.cache_write_tokens and total.reasoning_tokens  # the script exercises every field
    assert claude_model_usage(report) == {CLAUDE_MODEL: total}
    assert anthropic_tokens(report["usage"]) == total  # no sub-agent: the top-level usage is complete
    assert report["total_cost_usd"] == pytest.approx(priced(total, CLAUDE_PRICE), abs=1e-9)
    assert report["modelUsage"][CLAUDE_MODEL]["costUSD"] == pytest.approx(report["total_cost_usd"])
    # the transcript, in the private config dir, holds the same usage
    (transcript,) = claude_transcripts(cell)
    assert transcript == claude_project_dir(cell) / f"{report['session_id']}.jsonl"
    assert claude_transcript_tokens(transcript) == total
    assert version_of(CLAUDE, cell, claude_env(cell, "http://127.0.0.1:9")) == (
        f"{pinned_version('@anthropic-ai/claude-code')} (Claude Code)")


@claude_only
def test_claude_code_without_allowed_bash_denies_the_command_and_still_exits_0(cell: AgentCell) -> None:
    argv = [arg for arg in claude_argv(PROMPT) if arg not in ("--allowedTools", "Bash")]
    with ScriptedModel(claude_script(cell.repo)) as model:
        run = cell.run(argv, claude_env(cell, model.root_url))
    assert run.returncode == 0, run.stderr
    report = run.json()
    assert report["subtype"] == "success" and report["is_error"] is False
    assert [d["tool_name"] for d in report["permission_denials"]] == ["Bash"]
    assert cell.read("a.txt") == "bye\n"  # acceptEdits let the Edit through
    assert not (cell.repo / "ran.txt").exists()


@claude_only
def test_claude_code_sub_agent_spend_is_missing_from_its_top_level_usage(cell: AgentCell) -> None:
    with ScriptedModel(claude_subagent_script(cell.repo)) as model:
        run = cell.run(claude_argv(PROMPT, "stream-json", "--include-partial-messages"),
                       claude_env(cell, model.root_url))
    assert run.returncode == 0, run.stderr
    assert cell.read("b.txt") == "sub\n"
    events = run.json_lines()
    (result,) = [e for e in events if e["type"] == "result"]
    assert events[-1] is result and result["subtype"] == "success"
    main, sub = served(model, "turns"), served(model, f"marker:{SUBAGENT_MARKER}")
    assert main != Tokens() and sub != Tokens()
    # modelUsage and the cost count the sub-agent; the top-level usage only the main conversation
    assert claude_model_usage(result) == {CLAUDE_MODEL: main + sub}
    assert anthropic_tokens(result["usage"]) == main
    assert result["total_cost_usd"] == pytest.approx(priced(main + sub, CLAUDE_PRICE), abs=1e-9)
    assert result["subagent_stats"]["spawned"] == 1 and result["subagent_stats"]["completed"] == 1
    # the sub-agent has its own transcript
    session = claude_project_dir(cell) / result["session_id"]
    (subagent,) = sorted((session / "subagents").glob("agent-*.jsonl"))
    assert claude_transcripts(cell) == sorted([session.with_suffix(".jsonl"), subagent])
    assert claude_transcript_tokens(session.with_suffix(".jsonl")) == main
    assert claude_transcript_tokens(subagent) == sub
    # streamed: "assistant" events carry message_start's usage (output_tokens 1), never the final one;
    # the final per-call usage is in the partial messages' message_delta, for the main agent only
    assert {e["message"]["usage"]["output_tokens"] for e in events if e["type"] == "assistant"} == {1}
    deltas = [e["event"]["usage"] for e in events
              if e["type"] == "stream_event" and e["event"]["type"] == "message_delta"]
    assert summed(anthropic_tokens(u) for u in deltas) == main


# --------------------------------------------------------------------------- Codex


@pytest.mark.skipif(CODEX is None, reason="codex not found (npm install)")
def test_codex_exec_patches_runs_a_command_and_reports_what_was_served(cell: AgentCell) -> None:
    prompt = cell.root / "prompt.txt"
    prompt.write_text(PROMPT)
    with ScriptedModel(codex_script(cell.repo), api_key=API_KEY) as model:
        run = cell.run(codex_argv(), codex_env(cell, model.base_url), stdin=prompt)
    assert run.returncode == 0, run.stderr
    assert_edited(cell)
    events = run.json_lines()
    assert [e["type"] for e in events if e["type"].startswith(("thread", "turn"))] == [
        "thread.started", "turn.started", "turn.completed"]
    items = {e["item"]["type"]: e["item"] for e in events if e["type"] == "item.completed"}
    assert items["file_change"]["status"] == "completed" and items["command_execution"]["exit_code"] == 0
    assert items["agent_message"]["text"] == "All done." and "error" not in items
    assert [(r["api"], r["kind"], r["model"]) for r in model.model_requests()] == [
        ("responses", "turn", CODEX_MODEL)] * 3
    assert "apply_patch" in model.model_requests()[0]["tool_names"]
    # the prompt came from stdin, byte for byte
    assert PROMPT in json.dumps(model.model_requests()[0]["body"]["input"])
    total = served(model)
    assert total.cache_write_tokens and total.reasoning_tokens
    (completed,) = [e for e in events if e["type"] == "turn.completed"]
    assert codex_tokens(completed["usage"]) == total
    (rollout,) = codex_rollouts(cell)
    assert rollout.stem.endswith(events[0]["thread_id"])
    assert codex_rollout_tokens(rollout) == total
    assert codex_rollout_running_total(rollout) == total
    assert version_of(CODEX, cell, {"CODEX_HOME": str(cell.root / "codex")}) == (
        f"codex-cli {pinned_version('@openai/codex')}")


# --------------------------------------------------------------------------- Gemini CLI


@pytest.mark.skipif(GEMINI is None, reason="gemini not found (npm install)")
def test_gemini_cli_edits_runs_a_command_and_reports_what_was_served(cell: AgentCell) -> None:
    with ScriptedModel(gemini_script(cell.repo), api_key=API_KEY) as model:
        run = cell.run(gemini_argv(PROMPT), gemini_env(cell, model.root_url))
    assert run.returncode == 0, run.stderr
    assert_edited(cell)
    report = run.json()
    assert report["response"] == "All done."
    requests = model.model_requests()
    # the model router's side call (auto model) comes first, then the main model's turns
    assert [(r["api"], r["kind"], r["stream"]) for r in requests] == [("gemini", "aux", False)] + [
        ("gemini", "turn", True)] * 3
    router, main = requests[0]["model"], requests[1]["model"]
    per_model = gemini_model_tokens(report)
    assert per_model == {router: served(model, f"aux:{GEMINI_ROUTER_MARKER}"), main: served(model, "turns")}
    assert report["stats"]["models"][router]["roles"].keys() == {"utility_router"}
    assert served(model, "turns").reasoning_tokens  # thoughts are counted apart
    (chat,) = gemini_transcripts(cell)
    assert gemini_transcript_tokens(chat) == served(model, "turns")  # the router call is not in it
    assert version_of(GEMINI, cell, gemini_env(cell, "http://127.0.0.1:9")) == pinned_version("@google/gemini-cli")


@pytest.mark.skipif(GEMINI is None, reason="gemini not found (npm install)")
def test_gemini_cli_sub_agent_spend_is_in_its_stats_and_in_its_own_chat(cell: AgentCell) -> None:
    with ScriptedModel(gemini_subagent_script(cell.repo)) as model:
        run = cell.run(gemini_argv(PROMPT, "json", "-m", "gemini-2.5-pro"), gemini_env(cell, model.root_url))
    assert run.returncode == 0, run.stderr
    assert cell.read("b.txt") == "sub\n"
    assert model.remaining() == 0 and not model.model_requests("fallback")  # complete_task ended the sub-agent
    main, sub = served(model, "turns"), served(model, f"marker:{SUBAGENT_MARKER}")
    stats = run.json()["stats"]["models"]["gemini-2.5-pro"]
    # unlike Claude's top-level usage, Gemini's stats count the sub-agent, under its own role
    assert gemini_model_tokens(run.json()) == {"gemini-2.5-pro": main + sub}
    assert stats["roles"].keys() == {"main", "subagent"}
    assert stats["roles"]["subagent"]["totalRequests"] == 2
    (chat,) = gemini_transcripts(cell)
    (sub_chat,) = gemini_subagent_transcripts(cell)
    assert sub_chat.parent.parent == chat.parent
    assert gemini_transcript_tokens(chat) == main and gemini_transcript_tokens(sub_chat) == sub
    assert json.loads(sub_chat.read_text().splitlines()[0])["kind"] == "subagent"


# --------------------------------------------------------------------------- mini-swe-agent


def litellm_price(model: str) -> dict[str, Any]:
    """litellm's bundled price row for ``model`` (what mini charges by with LITELLM_LOCAL_MODEL_COST_MAP),
    read from its JSON file: importing litellm costs tens of seconds."""
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.origin is not None
    table = Path(spec.origin).with_name("model_prices_and_context_window_backup.json")
    return dict(json.loads(table.read_text())[model])


@pytest.mark.skipif(MINI is None, reason="mini-swe-agent not installed (pip install -e .[test])")
def test_mini_swe_agent_edits_runs_a_command_and_reports_what_was_served(cell: AgentCell) -> None:
    trajectory = cell.root / "trajectory.json"
    with ScriptedModel(mini_script(), api_key=API_KEY) as model:
        run = cell.run(mini_argv(PROMPT, trajectory), mini_env(cell, model.base_url))
    assert run.returncode == 0, run.stderr
    assert_edited(cell)
    data = json.loads(trajectory.read_text())
    assert data["info"]["exit_status"] == "Submitted"
    assert [(r["api"], r["kind"], r["model"]) for r in model.model_requests()] == [
        ("chat", "turn", MINI_MODEL.split("/")[1])] * 3
    total = served(model)
    assert summed(mini_message_usages(data)) == total
    stats = data["info"]["model_stats"]
    assert stats["api_calls"] == 3
    price = litellm_price(MINI_MODEL.split("/")[1])
    per_million = {"input": price["input_cost_per_token"] * 1e6, "output": price["output_cost_per_token"] * 1e6,
                   "cache_read": price["cache_read_input_token_cost"] * 1e6}
    assert stats["instance_cost"] == pytest.approx(priced(total, per_million), rel=1e-9)
    costs = [m["extra"]["cost"] for m in data["messages"] if m.get("role") == "assistant"]
    assert stats["instance_cost"] == pytest.approx(sum(costs))
    assert data["info"]["mini_version"] == pinned_test_requirement("mini-swe-agent")


# --------------------------------------------------------------------------- SIGTERM during a tool call

#: a shell command that runs until killed (Claude's Bash tool refuses a standalone `sleep N`)
LONG_COMMAND = "python3 -c \"import time; time.sleep(600)\""


def long_call_script(agent: str, repo: Path) -> dict[str, Any]:
    """One turn whose tool call runs LONG_COMMAND in the agent's shell tool."""
    call = {"claude": {"name": "Bash", "arguments": {"command": LONG_COMMAND, "description": "Wait"}},
            "codex": {"name": "exec_command", "arguments": {"cmd": LONG_COMMAND, "workdir": str(repo),
                                                            "yield_time_ms": 600000}},
            "gemini": {"name": "run_shell_command", "arguments": {"command": LONG_COMMAND, "description": "Wait"}},
            "mini": {"name": "bash", "arguments": {"command": LONG_COMMAND}}}[agent]
    script: dict[str, Any] = {"turns": [{"content": "Waiting.", "tool_calls": [call],
                                         "usage": usage(1000, 50, cached=600, reasoning=10)}]}
    if agent == "gemini":
        script["aux"] = gemini_script(repo)["aux"]
    return script


def long_command_pids(mark: str) -> list[int]:
    """Live processes of the cell that are LONG_COMMAND's python itself.

    Not the wrappers whose command lines quote it: codex's ``codex-linux-sandbox`` and its two bwraps quote the
    command while the parent-death signals that tie it to codex are still being set, one per fork, and a
    SIGTERM that lands then can leave it running (CI saw it under load).
    """
    found = []
    for pid in processes_with("ARENA_TEST_MARK", mark):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if Path(argv[0].decode()).name.startswith("python") and argv[1:3] == [b"-c", b"import time; time.sleep(600)"]:
            found.append(pid)
    return found


#: (returncode after SIGTERM to the CLI's pid, whether its shell command outlives it) as observed
SIGTERM_OUTCOMES = {
    "claude": (143, False),   # kills its Bash child (exit 137), then exits 128+15
    "codex": (-15, False),    # dies by the signal; bwrap --die-with-parent takes the command along
    "gemini": (0, True),      # exits 0 (!) and the command, in its own process group, keeps running
    "mini": (-15, True),      # dies by the signal; the command, in its own session, keeps running
}
AGENT_AVAILABLE = {"claude": CLAUDE, "codex": CODEX, "gemini": GEMINI, "mini": MINI}


@pytest.mark.parametrize("agent", sorted(SIGTERM_OUTCOMES))
def test_sigterm_during_a_tool_call_what_survives_and_what_usage_is_on_disk(agent: str, cell: AgentCell) -> None:
    if AGENT_AVAILABLE[agent] is None:
        pytest.skip(f"{agent} is not installed")
    mark = uuid.uuid4().hex
    with ScriptedModel(long_call_script(agent, cell.repo)) as model:
        argv, env = {
            "claude": lambda: (claude_argv("Wait.", "stream-json"), claude_env(cell, model.root_url)),
            "codex": lambda: ([*codex_argv()[:-1], "Wait."], codex_env(cell, model.base_url)),
            "gemini": lambda: (gemini_argv("Wait."), gemini_env(cell, model.root_url)),
            "mini": lambda: (mini_argv("Wait.", cell.root / "trajectory.json"), mini_env(cell, model.base_url)),
        }[agent]()
        process = subprocess.Popen(argv, cwd=cell.repo, env=cell.env({**env, "ARENA_TEST_MARK": mark}),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while not long_command_pids(mark):
                assert process.poll() is None and time.monotonic() < deadline, "the tool call never started"
                time.sleep(0.1)
            os.kill(process.pid, signal.SIGTERM)
            returncode = process.wait(timeout=120)
            expected_code, outlives = SIGTERM_OUTCOMES[agent]
            assert returncode == expected_code
            if outlives:
                assert long_command_pids(mark), "the shell command died with the agent"
            else:
                deadline = time.monotonic() + 60
                while long_command_pids(mark) and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert not long_command_pids(mark)
        finally:
            for pid in processes_with("ARENA_TEST_MARK", mark):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    # the one finished model call is on disk, except for mini: it saves its trajectory after each step
    on_disk = {
        "claude": lambda: summed(claude_transcript_tokens(path) for path in claude_transcripts(cell)),
        "codex": lambda: summed(codex_rollout_tokens(path) for path in codex_rollouts(cell)),
        "gemini": lambda: summed(gemini_transcript_tokens(path) for path in gemini_transcripts(cell)),
        "mini": lambda: Tokens() if not (cell.root / "trajectory.json").exists() else summed(
            mini_message_usages(json.loads((cell.root / "trajectory.json").read_text()))),
    }[agent]()
    main_call = served(model, "turns")
    assert main_call == Tokens(400, 600, 0, 40, 10)
    assert on_disk == (Tokens() if agent == "mini" else main_call)
