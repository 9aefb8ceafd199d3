"""The real agent CLIs in a private cell, for tests: Claude Code, Codex, Gemini CLI, mini-swe-agent.

Each ``*_run`` function is the recipe tests/helpers/AGENT_NOTES.md describes for one
CLI: the command line for a non-interactive run in the workspace with the
permissions that let it edit files and run shell commands, the variables that
point it at a scripted endpoint and keep its config, state and transcripts in
the cell, and the config files it needs there. ``AgentCell.run`` starts it
with an environment built from scratch (nothing inherited but what is named).
The parsers below read what each agent REPORTS (its usage, its cost, its
transcripts) into ``Tokens``, so a test can hold the report against what the
endpoint served.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.agents import REPO_ROOT, find_cli
from helpers.gitrepos import commit, git
from helpers.scripted_apis import Tokens

CLAUDE = find_cli("claude")
CODEX = find_cli("codex")
GEMINI = find_cli("gemini")
#: mini-swe-agent is a Python package: its console script sits beside the interpreter running the tests
MINI = str(Path(sys.executable).with_name("mini")) if Path(sys.executable).with_name("mini").exists() else None
RUN_TIMEOUT = 600.0
API_KEY = "sk-scripted-key"
#: the task every recipe is run with; the scripted turns do it
PROMPT = "Change hello to bye in a.txt, then record that you ran by writing ran.txt."
#: a shell command no agent classifies as a file edit (Claude's acceptEdits alone denies it)
RAN_COMMAND = "python3 -c \"open('ran.txt', 'w').write('ran')\""


def pinned_version(package: str) -> str:
    """The exact version package.json pins for an npm package (the tests check the CLI reports it)."""
    return str(json.loads((REPO_ROOT / "package.json").read_text())["dependencies"][package])


def pinned_test_requirement(package: str) -> str:
    """The exact version the ``test`` extra of pyproject.toml pins for a PyPI package."""
    extra = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    (pin,) = [line for line in extra if line.startswith(f"{package}==")]
    return str(pin.split("==", 1)[1])


def usage(prompt: int, completion: int, *, cached: int = 0, cache_write: int = 0, reasoning: int = 0) -> dict[str, int]:
    """A turn's usage in the scripted endpoint's one format (see tests/helpers/scripted_apis.py)."""
    return {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": cached,
            "cache_write_tokens": cache_write, "reasoning_tokens": reasoning}


@dataclass
class AgentRun:
    """How one CLI run ended: its exit code, its output files, and the cell it ran in."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    cell: AgentCell

    def json(self) -> Any:
        return json.loads(self.stdout)

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


@dataclass
class AgentCell:
    """A temp git repository and private HOME, XDG dirs and TMPDIR, all under ``root`` (mode 0700)."""

    root: Path
    files: Mapping[str, str] = field(default_factory=lambda: {"a.txt": "hello\n"})

    def __post_init__(self) -> None:
        for directory in (self.repo, self.home, self.tmp, *self.xdg.values()):
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        git(self.repo, "init", "-q", "-b", "main")
        commit(self.repo, self.files, "base")

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def xdg(self) -> dict[str, Path]:
        return {f"XDG_{kind.upper()}_HOME": self.root / "xdg" / kind for kind in ("config", "data", "cache", "state")}

    def env(self, extra: Mapping[str, str]) -> dict[str, str]:
        """The agent's whole environment: PATH, the private dirs, and ``extra``."""
        path = os.pathsep.join([str(REPO_ROOT / "node_modules" / ".bin"), str(Path(sys.executable).parent),
                                "/usr/local/bin", "/usr/bin", "/bin"])
        return {"PATH": path, "HOME": str(self.home), "TMPDIR": str(self.tmp), "LANG": "C.UTF-8",
                "PWD": str(self.repo), **{k: str(v) for k, v in self.xdg.items()}, **extra}

    def run(self, argv: Sequence[str], extra_env: Mapping[str, str], *, stdin: Path | None = None,
            timeout: float = RUN_TIMEOUT) -> AgentRun:
        with open(stdin or os.devnull, "rb") as source:
            done = subprocess.run(list(argv), cwd=self.repo, env=self.env(extra_env), stdin=source,
                                  capture_output=True, text=True, timeout=timeout, check=False)
        (self.root / "stdout.log").write_text(done.stdout)
        (self.root / "stderr.log").write_text(done.stderr)
        return AgentRun(list(argv), done.returncode, done.stdout, done.stderr, self)

    def read(self, name: str) -> str:
        return (self.repo / name).read_text()

    def changed_files(self) -> list[str]:
        """Paths git sees changed or added in the workspace, sorted."""
        status = git(self.repo, "status", "--porcelain", "--untracked-files=all")
        return sorted(line[3:] for line in status.splitlines())


def version_of(executable: str, cell: AgentCell, extra_env: Mapping[str, str] | None = None) -> str:
    """``EXECUTABLE --version`` inside the cell (it writes state dirs even for that: see AGENT_NOTES.md)."""
    done = subprocess.run([executable, "--version"], cwd=cell.repo, env=cell.env(extra_env or {}),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip()


# --------------------------------------------------------------------------- Claude Code

#: keep Claude Code off the network (telemetry, error reporting, update and feature-flag checks)
CLAUDE_QUIET_ENV = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
#: Claude Code's own list prices ($ per million tokens) for the model the tests ask for
CLAUDE_MODEL = "claude-sonnet-4-5-20250929"
CLAUDE_PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}


def claude_env(cell: AgentCell, root_url: str) -> dict[str, str]:
    return {"CLAUDE_CONFIG_DIR": str(cell.root / "claude"), "ANTHROPIC_BASE_URL": root_url,
            "ANTHROPIC_API_KEY": API_KEY, **CLAUDE_QUIET_ENV}


def claude_argv(prompt: str, output: str = "json", *extra: str) -> list[str]:
    assert CLAUDE is not None
    argv = [CLAUDE, "-p", prompt, "--model", CLAUDE_MODEL, "--output-format", output,
            "--permission-mode", "acceptEdits", "--allowedTools", "Bash"]
    if output == "stream-json":
        argv.append("--verbose")  # stream-json refuses to run without it
    return [*argv, *extra]


def claude_script(repo: Path) -> dict[str, Any]:
    """Read, Edit, a Bash command that only --allowedTools Bash permits, then a final answer with thinking."""
    return {"turns": [
        {"content": "Reading the file.", "tool_calls": [{"name": "Read", "arguments": {"file_path": f"{repo}/a.txt"}}],
         "usage": usage(1000, 50, cached=600, cache_write=300)},
        {"tool_calls": [{"name": "Edit", "arguments": {"file_path": f"{repo}/a.txt", "old_string": "hello",
                                                        "new_string": "bye"}}],
         "usage": usage(1100, 60, cached=900, cache_write=100)},
        {"tool_calls": [{"name": "Bash", "arguments": {"command": RAN_COMMAND, "description": "Write ran.txt"}}],
         "usage": usage(1200, 70, cached=1000, cache_write=100)},
        {"reasoning": "The edit is in place.", "content": "All done.",
         "usage": usage(1300, 20, cached=1100, cache_write=100, reasoning=7)},
    ]}


SUBAGENT_MARKER = "SUBTASK-42"


def claude_subagent_script(repo: Path) -> dict[str, Any]:
    """The main agent hands a task to a foreground sub-agent (Agent tool), which writes b.txt."""
    task = {"description": "Write b.txt", "prompt": f"{SUBAGENT_MARKER}: create b.txt saying sub",
            "subagent_type": "general-purpose", "run_in_background": False}
    return {"turns": [
        {"content": "Delegating.", "tool_calls": [{"name": "Agent", "arguments": task}],
         "usage": usage(1000, 50, cached=600, cache_write=300)},
        {"content": "All done.", "usage": usage(1300, 20, cached=1100, cache_write=100)},
    ], "by_marker": {SUBAGENT_MARKER: [
        {"tool_calls": [{"name": "Write", "arguments": {"file_path": f"{repo}/b.txt", "content": "sub\n"}}],
         "usage": usage(5000, 500, cache_write=4000)},
        {"content": "Sub-agent finished.", "usage": usage(5500, 300, cached=4000, cache_write=1000)},
    ]}}


def claude_model_usage(report: Mapping[str, Any]) -> dict[str, Tokens]:
    """Claude's ``modelUsage`` (every call, sub-agents included) per model, as Tokens."""
    return {model: Tokens(u["inputTokens"], u["cacheReadInputTokens"], u["cacheCreationInputTokens"],
                          u["outputTokens"] - u.get("thinkingTokens", 0), u.get("thinkingTokens", 0))
            for model, u in report["modelUsage"].items()}


def anthropic_tokens(u: Mapping[str, Any]) -> Tokens:
    """An Anthropic ``usage`` object (Claude's top-level ``usage``, a transcript message's) as Tokens."""
    thinking = (u.get("output_tokens_details") or {}).get("thinking_tokens", 0)
    return Tokens(u["input_tokens"], u.get("cache_read_input_tokens", 0), u.get("cache_creation_input_tokens", 0),
                  u["output_tokens"] - thinking, thinking)


def claude_project_dir(cell: AgentCell) -> Path:
    """Where Claude keeps the transcripts of runs in the cell's repo: the cwd, each non-alphanumeric as "-"."""
    return cell.root / "claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(cell.repo))


def claude_transcripts(cell: AgentCell) -> list[Path]:
    """Claude's session transcripts: ``<project dir>/<session>.jsonl`` and ``<session>/subagents/agent-*.jsonl``."""
    return sorted((cell.root / "claude" / "projects").rglob("*.jsonl"))


def claude_transcript_tokens(path: Path) -> Tokens:
    """The usage of one transcript's assistant messages, each counted once (a message is logged per block)."""
    seen: dict[str, Tokens] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message")
        if entry.get("type") == "assistant" and isinstance(message, dict) and message.get("usage"):
            seen[message["id"]] = anthropic_tokens(message["usage"])
    return sum(seen.values(), Tokens())


# --------------------------------------------------------------------------- Codex

#: a model in Codex's bundled catalog: it gets the freeform apply_patch tool (an unknown one gets none)
CODEX_MODEL = "gpt-5.5"


def codex_config(base_url: str, model: str = CODEX_MODEL) -> str:
    """``$CODEX_HOME/config.toml``: the scripted provider, no analytics, no plugin marketplace sync (git ls-remote)."""
    return (f'model = "{model}"\nmodel_provider = "scripted"\n\n'
            f'[model_providers.scripted]\nname = "Scripted"\nbase_url = "{base_url}"\n'
            'env_key = "SCRIPTED_API_KEY"\nwire_api = "responses"\n\n'
            '[analytics]\nenabled = false\n\n[features]\nplugins = false\n')


def codex_env(cell: AgentCell, base_url: str) -> dict[str, str]:
    home = cell.root / "codex"
    home.mkdir(exist_ok=True, mode=0o700)
    (home / "config.toml").write_text(codex_config(base_url))
    return {"CODEX_HOME": str(home), "SCRIPTED_API_KEY": API_KEY}


def codex_argv(*extra: str) -> list[str]:
    """``codex exec --json`` with the prompt on stdin (``-``)."""
    assert CODEX is not None
    return [CODEX, "exec", "--json", "--sandbox", "workspace-write", *extra, "-"]


APPLY_PATCH = "*** Begin Patch\n*** Update File: a.txt\n@@\n-hello\n+bye\n*** End Patch\n"


def codex_script(repo: Path) -> dict[str, Any]:
    """apply_patch (a freeform tool), exec_command, then a final answer; reasoning, cache reads and writes."""
    return {"turns": [
        {"reasoning": "Patch a.txt.", "tool_calls": [{"name": "apply_patch", "arguments": APPLY_PATCH}],
         "usage": usage(1000, 50, cached=600, cache_write=100, reasoning=20)},
        {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": RAN_COMMAND, "workdir": str(repo)}}],
         "usage": usage(1100, 30, cached=900)},
        {"content": "All done.", "usage": usage(1300, 20, cached=1100, reasoning=5)},
    ]}


def codex_tokens(u: Mapping[str, Any]) -> Tokens:
    """Codex's usage (``turn.completed``, a rollout ``token_count``) as Tokens: input includes cache reads/writes."""
    cached, written = u.get("cached_input_tokens", 0), u.get("cache_write_input_tokens", 0)
    reasoning = u.get("reasoning_output_tokens", 0)
    return Tokens(u["input_tokens"] - cached - written, cached, written, u["output_tokens"] - reasoning, reasoning)


def codex_rollouts(cell: AgentCell) -> list[Path]:
    """Codex's transcripts: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``."""
    return sorted((cell.root / "codex" / "sessions").rglob("rollout-*.jsonl"))


def codex_rollout_tokens(path: Path) -> Tokens:
    """The rollout's ``token_usage_record`` entries summed: one per response, written as soon as it is in.

    (The ``token_count`` events carry running totals too, but only once the
    call's tool has run: a run stopped during a tool call has the record, not the event.)
    """
    per_response: dict[str, Tokens] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") == "token_usage_record":
            per_response[entry["payload"]["response_id"]] = codex_tokens(entry["payload"]["usage"])
    return summed(per_response.values())


def codex_rollout_running_total(path: Path) -> Tokens:
    """The last ``token_count`` event's ``total_token_usage`` in a rollout."""
    total = Tokens()
    for line in path.read_text().splitlines():
        payload = json.loads(line).get("payload") or {}
        if payload.get("type") == "token_count" and payload.get("info"):
            total = codex_tokens(payload["info"]["total_token_usage"])
    return total


# --------------------------------------------------------------------------- Gemini CLI

GEMINI_SETTINGS: dict[str, Any] = {
    # GOOGLE_GEMINI_BASE_URL alone makes 0.61 pick the "gateway" auth type, which non-interactive
    # runs reject ("Invalid auth method selected."): name the API-key type explicitly.
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    # no Clearcut usage statistics (play.googleapis.com)
    "privacy": {"usageStatisticsEnabled": False},
}
#: the system prompt of Gemini CLI's model router (one side call per prompt when the model is "auto")
GEMINI_ROUTER_MARKER = "You are a specialized Task Routing AI"


def gemini_env(cell: AgentCell, root_url: str) -> dict[str, str]:
    home = cell.root / "gemini"
    (home / ".gemini").mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_SETTINGS))
    return {"GEMINI_CLI_HOME": str(home), "GEMINI_API_KEY": API_KEY, "GOOGLE_GEMINI_BASE_URL": root_url,
            # one node process instead of a parent that re-spawns itself and ignores SIGINT/SIGTERM
            "GEMINI_CLI_NO_RELAUNCH": "true"}


def gemini_argv(prompt: str, output: str = "json", *extra: str) -> list[str]:
    assert GEMINI is not None
    return [GEMINI, "-p", prompt, "--yolo", "--skip-trust", "--output-format", output, *extra]


def gemini_script(repo: Path) -> dict[str, Any]:
    """replace, run_shell_command, a final answer with thoughts; the router's side call answered as aux."""
    route = {"complexity_reasoning": "A one-line edit.", "complexity_score": 10}
    return {"turns": [
        {"reasoning": "Edit a.txt.", "tool_calls": [{"name": "replace", "arguments": {
            "file_path": f"{repo}/a.txt", "old_string": "hello", "new_string": "bye", "instruction": "say bye"}}],
         "usage": usage(1000, 50, cached=600, reasoning=20)},
        {"tool_calls": [{"name": "run_shell_command", "arguments": {"command": RAN_COMMAND,
                                                                     "description": "Write ran.txt"}}],
         "usage": usage(1100, 30, cached=900)},
        {"content": "All done.", "usage": usage(1300, 20, cached=1100, reasoning=5)},
    ], "aux": {GEMINI_ROUTER_MARKER: {"content": json.dumps(route), "usage": usage(300, 10)}}}


def gemini_subagent_script(repo: Path) -> dict[str, Any]:
    """The main agent hands a task to the built-in "generalist" sub-agent, which writes b.txt and completes."""
    task = {"agent_name": "generalist", "prompt": f"{SUBAGENT_MARKER}: create b.txt saying sub"}
    done = {"result": {"response": "b.txt written."}}
    return {"turns": [
        {"content": "Delegating.", "tool_calls": [{"name": "invoke_agent", "arguments": task}],
         "usage": usage(1000, 50, cached=600)},
        {"content": "All done.", "usage": usage(1300, 20, cached=1100)},
    ], "by_marker": {SUBAGENT_MARKER: [
        {"tool_calls": [{"name": "write_file", "arguments": {"file_path": f"{repo}/b.txt", "content": "sub\n"}}],
         "usage": usage(5000, 500, cached=1000, reasoning=40)},
        {"tool_calls": [{"name": "complete_task", "arguments": done}], "usage": usage(5500, 300, cached=4000)},
    ]}}


def gemini_model_tokens(report: Mapping[str, Any]) -> dict[str, Tokens]:
    """``stats.models[M].tokens`` of ``--output-format json``: prompt includes cached; thoughts apart."""
    out = {}
    for model, stats in report["stats"]["models"].items():
        t = stats["tokens"]
        out[model] = Tokens(t["prompt"] - t["cached"], t["cached"], 0, t["candidates"], t["thoughts"])
    return out


def gemini_transcripts(cell: AgentCell) -> list[Path]:
    """Gemini's chats: ``$GEMINI_CLI_HOME/.gemini/tmp/<dir name>/chats/session-<time>-<id8>.jsonl``."""
    return sorted((cell.root / "gemini" / ".gemini" / "tmp").rglob("chats/session-*.jsonl"))


def gemini_subagent_transcripts(cell: AgentCell) -> list[Path]:
    """Its sub-agents' chats: ``.../chats/<parent session id>/<sub-agent session id>.jsonl``."""
    return sorted((cell.root / "gemini" / ".gemini" / "tmp").rglob("chats/*/*.jsonl"))


def gemini_transcript_tokens(path: Path) -> Tokens:
    """The ``tokens`` of a chat's model messages, each id counted once (a message is rewritten as it grows)."""
    seen: dict[str, Tokens] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") == "gemini" and entry.get("tokens"):
            t = entry["tokens"]
            seen[entry["id"]] = Tokens(t["input"] - t["cached"], t["cached"], 0, t["output"], t["thoughts"])
    return sum(seen.values(), Tokens())


# --------------------------------------------------------------------------- mini-swe-agent

MINI_MODEL = "openai/gpt-4o"
MINI_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def mini_env(cell: AgentCell, base_url: str) -> dict[str, str]:
    return {"MSWEA_GLOBAL_CONFIG_DIR": str(cell.root / "mini"), "MSWEA_CONFIGURED": "true",
            "MSWEA_SILENT_STARTUP": "1", "OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": base_url,
            # litellm fetches its price table from GitHub at import (3 tries, about 10 s) unless told not to
            "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def mini_argv(task: str, trajectory: Path, *extra: str) -> list[str]:
    assert MINI is not None
    return [MINI, "--yolo", "--exit-immediately", "-m", MINI_MODEL, "-t", task, "-o", str(trajectory), *extra]


def mini_script() -> dict[str, Any]:
    """Two bash actions (sed, python), then the submit command mini needs to finish."""
    return {"turns": [
        {"content": "Editing.", "tool_calls": [{"name": "bash", "arguments": {"command": "sed -i s/hello/bye/ a.txt"}}],
         "usage": usage(1000, 50, cached=600, reasoning=20)},
        {"content": "Recording.", "tool_calls": [{"name": "bash", "arguments": {"command": RAN_COMMAND}}],
         "usage": usage(1100, 30, cached=900)},
        {"content": "Submitting.", "tool_calls": [{"name": "bash", "arguments": {"command": MINI_SUBMIT}}],
         "usage": usage(1300, 20, cached=1100, reasoning=5)},
    ]}


def chat_tokens(u: Mapping[str, Any]) -> Tokens:
    """An OpenAI chat ``usage`` object as Tokens."""
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return Tokens(u["prompt_tokens"] - cached, cached, 0, u["completion_tokens"] - reasoning, reasoning)


def mini_message_usages(trajectory: Mapping[str, Any]) -> list[Tokens]:
    """``extra.response.usage`` of each assistant message of a mini trajectory."""
    return [chat_tokens(m["extra"]["response"]["usage"]) for m in trajectory["messages"]
            if m.get("role") == "assistant" and (m.get("extra") or {}).get("response")]


def priced(tokens: Tokens, price: Mapping[str, float]) -> float:
    """USD for ``tokens`` at ``price`` ($ per million: input, output, cache_read, cache_write)."""
    return (tokens.input_tokens * price["input"] + (tokens.output_tokens + tokens.reasoning_tokens) * price["output"]
            + tokens.cache_read_tokens * price["cache_read"]
            + tokens.cache_write_tokens * price.get("cache_write", price["input"])) / 1e6


def summed(tokens: Iterable[Tokens]) -> Tokens:
    return sum(tokens, Tokens())
