"""Run dirs laid out from the agents' captured samples (tests/data/agents), as each kind writes its own."""

from __future__ import annotations

from pathlib import Path

AGENTS = Path(__file__).parents[1] / "data" / "agents"
#: Run dirs as each kind lays them out (arms/<kind>.py): its stdout where the kind sends it, its own
#: transcripts copied under transcript/ by the names CliAgentArm.transcripts gives them.
LAID_OUT = {
    "claude-code": {"events.jsonl": "claude/subagent-stream.jsonl",
                    "transcript/-CELL-repo/d16f4c4c.jsonl": "claude/subagent-transcript-main.jsonl",
                    "transcript/-CELL-repo/d16f4c4c/subagents/agent-a58e.jsonl":
                        "claude/subagent-transcript-agent.jsonl",
                    "transcript/-CELL-repo/d16f4c4c/subagents/agent-a58e.meta.json": "claude/subagent-meta.json"},
    "codex": {"events.jsonl": "codex/events.jsonl",
              "transcript/2026/12/01/rollout-2026-12-01T21-27-11-01a23381.jsonl": "codex/rollout.jsonl"},
    "gemini-cli": {"result.json": "gemini/subagent-result.json",
                   "transcript/repo/chats/session-2026-12-01T21-48-f3e04296.jsonl": "gemini/subagent-chat-main.jsonl",
                   "transcript/repo/chats/f3e04296/34d45afb.jsonl": "gemini/subagent-chat-agent.jsonl"},
    "mini-swe-agent": {"trajectory.json": "mini/trajectory.json", "stdout.log": None},
}



def lay_out(run_dir: Path, files: dict[str, str | None]) -> None:
    """Write ``files`` into ``run_dir``, with a prompt.txt and a stderr.log: a sample's name; None, a line;
    "", nothing."""
    for name, sample in {"prompt.txt": None, "stderr.log": None, **files}.items():
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / name).write_text((AGENTS / sample).read_text() if sample else "" if sample == "" else
                                    f"{name} of the cell\n")
