"""Capture what each real agent CLI reports, as samples for parser tests: ``tests/data/agents/<agent>/``.

Runs the recipes of tests/helpers/agent_clis.py (the same scripts the contract tests
use) against the scripted endpoint and writes each CLI's report formats: its
stdout (JSON or JSON lines) and its transcript files, plus ``served.json``,
what the endpoint served (the usage each report should add up to). Paths
under the cell become ``/CELL`` and the endpoint's port ``PORT``. Transcript
lines that only repeat the request (Claude's ``api-request-blob`` /
``api-request-shape`` and its context ``attachment`` lines, Codex's
``response_item`` / ``world_state`` / ``turn_context``) are dropped to keep
the samples small: none carries usage. Everything else is line for line what
the CLI wrote.

    python tests/helpers/capture_agent_samples.py [--out tests/data/agents] [claude codex gemini mini]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for helpers
from helpers.agent_clis import (  # noqa: E402
    PROMPT,
    AgentCell,
    AgentRun,
    claude_argv,
    claude_env,
    claude_project_dir,
    claude_script,
    claude_subagent_script,
    codex_argv,
    codex_env,
    codex_rollouts,
    codex_script,
    gemini_argv,
    gemini_env,
    gemini_script,
    gemini_subagent_script,
    gemini_subagent_transcripts,
    gemini_transcripts,
    mini_argv,
    mini_env,
    mini_script,
)
from helpers.scripted_model import ScriptedModel  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "data" / "agents"
DROPPED_LINE_TYPES = {"api-request-blob", "api-request-shape", "attachment", "response_item", "world_state",
                      "turn_context"}


class Sampler:
    """Writes one agent's samples, with the cell's paths and the endpoint's port made neutral."""

    def __init__(self, out: Path, cell: AgentCell, model: ScriptedModel):
        self.out, self.cell, self.model = out, cell, model
        out.mkdir(parents=True, exist_ok=True)

    def neutral(self, text: str) -> str:
        return text.replace(str(self.cell.root), "/CELL").replace(f":{self.model.port}", ":PORT")

    def write(self, name: str, text: str) -> None:
        (self.out / name).write_text(self.neutral(text))

    def jsonl(self, name: str, source: Path) -> None:
        kept = [line for line in source.read_text().splitlines()
                if line.strip() and json.loads(line).get("type") not in DROPPED_LINE_TYPES]
        self.write(name, "\n".join(kept) + "\n")

    def served(self, name: str = "served.json") -> None:
        self.write(name, json.dumps({"served": self.model.served,
                                     "tokens_total": self.model.tokens_total.to_json()}, indent=1) + "\n")

    def check(self, run: AgentRun) -> None:
        if run.returncode != 0:
            raise SystemExit(f"{run.argv[0]} exited {run.returncode}: {run.stderr[-2000:]}")


def capture_claude(out: Path, work: Path) -> None:
    cell = AgentCell(work / "claude")
    with ScriptedModel(claude_script(cell.repo)) as model:
        sample = Sampler(out, cell, model)
        run = cell.run(claude_argv(PROMPT), claude_env(cell, model.root_url))
        sample.check(run)
        sample.write("result.json", run.stdout)
        session = run.json()["session_id"]
        sample.jsonl("transcript.jsonl", claude_project_dir(cell) / f"{session}.jsonl")
        sample.served()
    cell = AgentCell(work / "claude-subagent")
    with ScriptedModel(claude_subagent_script(cell.repo)) as model:
        sample = Sampler(out, cell, model)
        run = cell.run(claude_argv(PROMPT, "stream-json", "--include-partial-messages"),
                       claude_env(cell, model.root_url))
        sample.check(run)
        sample.write("subagent-stream.jsonl", run.stdout)
        session = run.json_lines()[-1]["session_id"]
        sample.jsonl("subagent-transcript-main.jsonl", claude_project_dir(cell) / f"{session}.jsonl")
        (subagent,) = (claude_project_dir(cell) / session / "subagents").glob("agent-*.jsonl")
        sample.jsonl("subagent-transcript-agent.jsonl", subagent)
        sample.write("subagent-meta.json", subagent.with_suffix(".meta.json").read_text())
        sample.served("subagent-served.json")


def capture_codex(out: Path, work: Path) -> None:
    cell = AgentCell(work / "codex")
    prompt = cell.root / "prompt.txt"
    prompt.write_text(PROMPT)
    with ScriptedModel(codex_script(cell.repo)) as model:
        sample = Sampler(out, cell, model)
        run = cell.run(codex_argv(), codex_env(cell, model.base_url), stdin=prompt)
        sample.check(run)
        sample.write("events.jsonl", run.stdout)
        (rollout,) = codex_rollouts(cell)
        sample.jsonl("rollout.jsonl", rollout)
        sample.served()


def capture_gemini(out: Path, work: Path) -> None:
    for output, name in (("json", "result.json"), ("stream-json", "stream.jsonl")):
        cell = AgentCell(work / f"gemini-{output}")
        with ScriptedModel(gemini_script(cell.repo)) as model:
            sample = Sampler(out, cell, model)
            run = cell.run(gemini_argv(PROMPT, output), gemini_env(cell, model.root_url))
            sample.check(run)
            sample.write(name, run.stdout)
            if output == "json":
                (chat,) = gemini_transcripts(cell)
                sample.write("chat.jsonl", chat.read_text())
                sample.served()
    cell = AgentCell(work / "gemini-subagent")
    with ScriptedModel(gemini_subagent_script(cell.repo)) as model:
        sample = Sampler(out, cell, model)
        run = cell.run(gemini_argv(PROMPT, "json", "-m", "gemini-2.5-pro"), gemini_env(cell, model.root_url))
        sample.check(run)
        sample.write("subagent-result.json", run.stdout)
        (chat,) = gemini_transcripts(cell)
        (sub_chat,) = gemini_subagent_transcripts(cell)
        sample.write("subagent-chat-main.jsonl", chat.read_text())
        sample.write("subagent-chat-agent.jsonl", sub_chat.read_text())
        sample.served("subagent-served.json")


def capture_mini(out: Path, work: Path) -> None:
    cell = AgentCell(work / "mini")
    trajectory = cell.root / "trajectory.json"
    with ScriptedModel(mini_script()) as model:
        sample = Sampler(out, cell, model)
        run = cell.run(mini_argv(PROMPT, trajectory), mini_env(cell, model.base_url))
        sample.check(run)
        sample.write("trajectory.json", trajectory.read_text())
        sample.served()


CAPTURES: dict[str, Callable[[Path, Path], None]] = {
    "claude": capture_claude, "codex": capture_codex, "gemini": capture_gemini, "mini": capture_mini}


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("agents", nargs="*", help=f"some of {', '.join(CAPTURES)} (default: all)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    unknown = sorted(set(args.agents) - set(CAPTURES))
    if unknown:
        parser.error(f"unknown agent {unknown[0]!r}; known: {', '.join(CAPTURES)}")
    work = Path(tempfile.mkdtemp(prefix="agent-samples-"))
    try:
        for agent in args.agents or CAPTURES:
            target = args.out / agent
            shutil.rmtree(target, ignore_errors=True)
            CAPTURES[agent](target, work)
            print(f"{agent}: {', '.join(sorted(p.name for p in target.iterdir()))}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
