"""The bubblewrap sandbox: a hostile agent sees the allow-list and nothing else, and leaves nothing behind."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.agents import ASKED, DOTENVX, OPENCODE, opencode_config
from helpers.gitrepos import Project, commit
from helpers.scripted_model import ScriptedModel

from pytest_swe_arena.arms.agent import agent_version
from pytest_swe_arena.arms.base import CellRequest
from pytest_swe_arena.arms.opencode_home import OPENCODE_QUIET_ENV, OpencodeHome
from pytest_swe_arena.cell import processes as proc
from pytest_swe_arena.cell.environment import CellEnvironment, create_cell_environment
from pytest_swe_arena.cell.patches import extract_patch
from pytest_swe_arena.cell.sandbox import (
    BwrapProbe,
    Sandbox,
    SandboxError,
    SandboxPolicy,
    cell_policy,
    explain_failure,
    private_key_variables,
    probe_bwrap,
    program_mounts,
    resolve_sandbox,
)
from pytest_swe_arena.cell.workspace import RepoStore, Workspace, materialize
from pytest_swe_arena.instances.loading import build_instance

HOSTILE = Path(__file__).parents[1] / "data" / "hostile"
ESCAPE = HOSTILE / "escape.py"

needs_bwrap = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")


@dataclass
class Layout:
    """A cell beside everything of the harness an agent must not reach."""

    root: Path
    cell: CellEnvironment
    workspace: Workspace
    objects: Path
    store: RepoStore
    fix: str  # a commit after base: in the mirror, not in the snapshot
    other_snapshot: Path
    instance_file: Path
    out: Path
    secrets: Path
    other_cell: Path

    def sandbox(self, **policy: Any) -> Sandbox:
        return Sandbox(cell_policy(self.cell, read_only=(self.objects,), programs=[sys.executable, ESCAPE], **policy))

    def run(self, actions: list[dict[str, Any]], sandbox: Sandbox | None, env: dict[str, str] | None = None,
            wrap_outside: list[str] | None = None, cwd: Path | None = None) -> dict[str, list[Any]]:
        """Run the hostile agent with ``actions`` as a cell would: in the workspace, through proc.run."""
        plan = self.cell.run_dir / "plan.json"
        plan.write_text(json.dumps(actions))
        results = self.workspace.path / "results.json"
        results.unlink(missing_ok=True)
        argv = [sys.executable, str(ESCAPE), str(plan), str(results)]
        if sandbox is not None:
            argv = sandbox.wrap(argv, self.workspace.path)
        argv = [*(wrap_outside or []), *argv]
        outcome = proc.run(argv, cwd=cwd or self.workspace.path, env=env or self.cell.env(),
                           stdout=self.cell.run_dir / "agent.log", timeout=120)
        log = (self.cell.run_dir / "agent.log").read_text()
        assert outcome.returncode == 0, log
        loaded: dict[str, list[Any]] = json.loads(results.read_text())
        return loaded


@pytest.fixture
def layout(calc: Project, tmp_path: Path) -> Layout:
    fix = commit(calc.repo, {"calc/ops.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"},
                 "the upstream fix")
    subprocess.run(["git", "checkout", "-q", calc.base], cwd=calc.repo, check=True)
    instance_file = tmp_path / "instances" / "demo.jsonl"
    instance_file.parent.mkdir()
    instance_file.write_text(json.dumps(calc.row()) + "\n")
    instance = build_instance(instance_file, 1, calc.row(), None)
    store = RepoStore(tmp_path / "cache")
    cell = create_cell_environment(tmp_path / "cells" / "c1")
    workspace = materialize(instance, store, cell.root / "workspace")
    mirror, full = store.ensure_commit(instance.source, instance.repo, instance.base_commit)
    objects = store.snapshot(mirror, full)
    other_snapshot = store.snapshot(*store.ensure_commit(instance.source, instance.repo, fix))
    out = tmp_path / "out"
    out.mkdir()
    (out / "ledger.jsonl").write_text('{"status": "unresolved"}\n')
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    (secrets / "model.env").write_text('ARENA_MODEL_KEY="sk-model"\n')
    (secrets / ".env.keys").write_text('DOTENV_PRIVATE_KEY="not-for-agents"\n')
    other_cell = tmp_path / "cells" / "c2"
    (other_cell / "workspace").mkdir(parents=True)
    (other_cell / "workspace" / "answer.txt").write_text("another cell's work\n")
    return Layout(tmp_path, cell, workspace, objects, store, fix, other_snapshot, instance_file, out, secrets,
                  other_cell)


def forbidden_paths(layout: Layout) -> dict[str, Path]:
    return {
        "instance file": layout.instance_file,
        "mirror": layout.store.root / "mirrors",
        "later snapshot": layout.other_snapshot,
        "out dir": layout.out / "ledger.jsonl",
        "secrets": layout.secrets / ".env.keys",
        "other cell": layout.other_cell / "workspace" / "answer.txt",
        "cells folder": layout.other_cell.parent,
    }


@needs_bwrap
def test_an_agent_in_the_sandbox_cannot_read_what_the_harness_keeps_outside_its_cell(layout):
    forbidden = forbidden_paths(layout)
    home_entries = [entry for entry in Path.home().iterdir()
                    if not any(entry == mount or entry in mount.parents for mount in layout.sandbox().policy.read_only)]
    actions = [{"name": name, "op": "read", "arg": str(path)} for name, path in forbidden.items()]
    actions += [{"name": f"home {entry.name}", "op": "read", "arg": str(entry)} for entry in home_entries[:5]]
    actions += [{"name": "own file", "op": "read", "arg": str(layout.workspace.path / "calc" / "ops.py")}]
    unsandboxed = layout.run(actions, None)
    assert all(unsandboxed[name][0] == "ok" for name in forbidden), unsandboxed  # the attack works without it

    results = layout.run(actions, layout.sandbox())

    assert results.pop("own file")[0] == "ok"
    # The cells' folder exists only as the way to this cell: it lists this cell, and nothing of another.
    assert results.pop("cells folder") == ["ok", [layout.cell.root.name]]
    assert {name: outcome[0] for name, outcome in results.items()} == {name: "ENOENT" for name in results}


@needs_bwrap
def test_an_agent_in_the_sandbox_cannot_change_the_snapshot_the_out_dir_or_the_system(layout):
    pack = next((layout.objects / "pack").glob("*.pack"))
    size = pack.stat().st_size
    copy = layout.cell.root / "copy.pack"
    copy.write_bytes(pack.read_bytes())
    copy.chmod(0o444)
    control = layout.run([{"name": "truncate", "op": "truncate", "arg": str(copy)}], None)
    assert control == {"truncate": ["ok", "truncated"]} and copy.stat().st_size == 0  # the attack works without it
    actions = [
        {"name": "truncate the snapshot", "op": "truncate", "arg": str(pack)},
        {"name": "forge a row", "op": "write", "arg": str(layout.out / "ledger.jsonl")},
        {"name": "write /usr", "op": "write", "arg": "/usr/arena-was-here"},
        {"name": "write /", "op": "write", "arg": "/arena-was-here"},
        {"name": "write a sysctl", "op": "write", "arg": "/proc/sys/kernel/printk_ratelimit"},
        {"name": "write its workspace", "op": "write", "arg": str(layout.workspace.path / "notes.txt")},
        {"name": "write its HOME", "op": "write", "arg": str(layout.cell.home / "notes.txt")},
        {"name": "write /tmp", "op": "write", "arg": "/tmp/notes.txt"},
    ]
    results = layout.run(actions, layout.sandbox())
    assert results["truncate the snapshot"][0] == "EROFS"
    assert pack.stat().st_size == size
    assert results["forge a row"][0] == "ENOENT"
    assert (layout.out / "ledger.jsonl").read_text() == '{"status": "unresolved"}\n'
    assert results["write /usr"][0] in ("EROFS", "EACCES")
    assert results["write /"][0] in ("EROFS", "EACCES")
    assert results["write a sysctl"][0] in ("EROFS", "EACCES")
    assert [results[name][0] for name in ("write its workspace", "write its HOME", "write /tmp")] == ["ok"] * 3
    # /tmp is the cell's TMPDIR: removed with the cell, and never another cell's.
    assert (Path(layout.cell.variables["TMPDIR"]) / "notes.txt").is_file()


@needs_bwrap
def test_an_agent_in_the_sandbox_reads_base_history_but_not_the_fix(layout):
    actions = [{"name": "log", "op": "git", "arg": ["log", "--oneline", layout.workspace.base_commit]},
               {"name": "fix", "op": "git", "arg": ["cat-file", "-e", layout.fix]}]
    results = layout.run(actions, layout.sandbox())
    assert results == {"log": ["ok", "exit 0"], "fix": ["ok", "exit 1"]}


@needs_bwrap
def test_an_agent_in_the_sandbox_cannot_see_or_signal_the_harness(layout):
    marker = f"arena-secret-{uuid.uuid4().hex}"
    env = layout.cell.env({"HARNESS_ONLY": marker})
    actions = [{"name": "scan", "op": "scan_proc"}, {"name": "signal", "op": "signal", "arg": os.getpid()}]
    sandbox = layout.sandbox(unset_env=("HARNESS_ONLY",))
    results = layout.run(actions, sandbox, env=env)
    assert results["signal"][0] == "ESRCH"
    seen = " ".join(results["scan"][1])
    for name, path in forbidden_paths(layout).items():
        if name != "cells folder":  # the way to the cell's own paths, which bwrap's command line names
            assert str(path) not in seen, name
    assert marker not in seen  # unset inside: not in the agent's environment, nor in any process it can read
    harness = Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    assert harness not in seen  # the harness's own command line


@needs_bwrap
def test_a_daemon_that_escapes_group_and_token_dies_with_the_sandbox(layout):
    marker = f"arena-daemon-{uuid.uuid4().hex}"
    actions = [{"name": "daemon", "op": "daemon", "arg": marker}]
    try:
        # Without a sandbox it outlives the run (a new session and no environment: no group, no token).
        assert layout.run(actions, None)["daemon"][0] == "ok"
        assert processes_with(marker)
    finally:
        for pid in processes_with(marker):
            os.kill(pid, 9)
    results = layout.run(actions, layout.sandbox())
    assert results["daemon"][0] == "ok" and results["daemon"][1].startswith("daemon ")
    # When proc.run returns, the pid namespace is gone and every process in it with it.
    assert processes_with(marker) == []


@needs_bwrap
@pytest.mark.parametrize("dotenvx", [False, True])
def test_a_stopped_agent_in_the_sandbox_gets_its_grace(layout, dotenvx):
    """bwrap dies at once on SIGTERM and takes the agent with it: proc.run must signal the agent, not bwrap."""
    if dotenvx and DOTENVX is None:
        pytest.skip("dotenvx is not installed (npm install)")
    ready, flushed = layout.cell.root / "ready", layout.cell.root / "flushed"
    script = HOSTILE / "graceful.py"
    sandbox = Sandbox(cell_policy(layout.cell, programs=[sys.executable, script]))
    argv = sandbox.wrap([sys.executable, str(script), str(ready), str(flushed)], layout.workspace.path)
    if dotenvx:
        argv = [str(DOTENVX), "run", "--quiet", "--strict", "-f", "model.env", "--", *argv]
    result = proc.run(argv, cwd=layout.secrets if dotenvx else layout.workspace.path, env=layout.cell.env(),
                      stdout=layout.cell.run_dir / "g.log", timeout=300, grace=60,
                      should_stop=lambda: "over_budget" if ready.exists() else None)
    assert result.stopped == "over_budget"
    assert flushed.read_text() == "flushed on SIGTERM\n"


@needs_bwrap
def test_the_network_is_shared_so_a_model_on_loopback_answers(layout):
    with greeting_server() as port:
        results = layout.run([{"name": "model", "op": "connect", "arg": ["127.0.0.1", port]}], layout.sandbox())
    assert results == {"model": ["ok", "hello from the model"]}


@needs_bwrap
@pytest.mark.skipif(DOTENVX is None, reason="dotenvx is not installed (npm install)")
def test_dotenvx_outside_starts_the_sandbox_so_env_files_and_keys_stay_out(layout):
    """``dotenvx run -- bwrap ... -- agent``: the value reaches the agent; the env files and keys do not."""
    assert DOTENVX is not None
    env = layout.cell.env({"DOTENV_PRIVATE_KEY_CI": "key-of-the-harness"})
    sandbox = layout.sandbox(unset_env=private_key_variables(env))
    actions = [{"name": "keys", "op": "read", "arg": str(layout.secrets / ".env.keys")},
               {"name": "env file", "op": "read", "arg": str(layout.secrets / "model.env")},
               {"name": "scan", "op": "scan_proc"}]
    dotenvx = [DOTENVX, "run", "--quiet", "--strict", "-f", "model.env", "--"]
    results = layout.run(actions, sandbox, env=env, wrap_outside=dotenvx, cwd=layout.secrets)
    assert results["keys"][0] == "ENOENT" and results["env file"][0] == "ENOENT"
    seen = " ".join(results["scan"][1])
    assert "ARENA_MODEL_KEY=sk-model" in seen  # its own environment: the value it needs
    assert "key-of-the-harness" not in seen
    assert "run --quiet --strict -f model.env" not in seen and str(layout.secrets) not in seen  # dotenvx is outside


@needs_bwrap
@pytest.mark.skipif(OPENCODE is None, reason="opencode is not installed (npm install)")
def test_real_opencode_fixes_the_bug_inside_the_sandbox(layout, calc):
    """The agent program read-only from node_modules, its home in the cell, the model on loopback."""
    assert OPENCODE is not None
    packages = layout.root / "opencode-packages"  # shared by the cells: read-only inside
    packages.mkdir()
    edit = {"filePath": "calc/ops.py", "oldString": "def mul(a, b):\n    return a + b",
            "newString": "def mul(a, b):\n    return a * b"}
    turns = [{"tool_calls": [{"name": "edit", "arguments": edit}], "usage": {"prompt_tokens": 90,
                                                                              "completion_tokens": 9}},
             {"content": "Fixed mul.", "usage": {"prompt_tokens": 99, "completion_tokens": 3}}]
    instance = build_instance(layout.instance_file, 1, calc.row(), None)
    prompt = layout.cell.run_dir / "prompt.txt"
    prompt.write_text(instance.problem_statement)
    with ScriptedModel(turns) as model:
        home = OpencodeHome(json.dumps(opencode_config(model.base_url)), "test", None, packages,
                            agent_version(OPENCODE))
        home.install(CellRequest(instance=instance, workspace=layout.workspace, cell=layout.cell, trial=1))
        sandbox = Sandbox(cell_policy(layout.cell, read_only=(layout.objects, packages), programs=[OPENCODE]))
        argv = sandbox.wrap([OPENCODE, "run", "-m", ASKED, "--format", "json"], layout.workspace.path)
        result = proc.run(argv, cwd=layout.workspace.path, stdin=prompt, timeout=300,
                          env=layout.cell.env({**OPENCODE_QUIET_ENV, "PWD": str(layout.workspace.path)}),
                          stdout=layout.cell.run_dir / "events.jsonl", stderr=layout.cell.run_dir / "stderr.log")
        served = len(model.requests)
    assert result.returncode == 0, (layout.cell.run_dir / "stderr.log").read_text()[-2000:]
    assert served >= 2
    assert b"+    return a * b" in extract_patch(layout.workspace)


def test_the_deepest_path_decides_and_a_path_given_both_ways_is_read_only(tmp_path):
    inner = tmp_path / "tree" / "objects"
    policy = SandboxPolicy(read_write=(tmp_path / "tree", tmp_path / "both"), read_only=(inner, tmp_path / "both"))
    assert policy.binds() == [(tmp_path / "both", False), (tmp_path / "tree", True), (inner, False)]


def test_a_missing_path_or_working_directory_is_an_error_naming_it(tmp_path):
    with pytest.raises(SandboxError, match=f"read-only path {tmp_path / 'gone'} does not exist"):
        Sandbox(SandboxPolicy(read_only=(tmp_path / "gone",))).wrap(["true"], tmp_path)
    with pytest.raises(SandboxError, match="working directory relative is not an existing absolute directory"):
        Sandbox(SandboxPolicy()).wrap(["true"], Path("relative"))


@needs_bwrap
def test_a_program_in_node_modules_gets_its_whole_node_modules_and_its_interpreter(tmp_path):
    package = tmp_path / "app" / "node_modules" / "@scope" / "cli"
    (package / "bin").mkdir(parents=True)
    script = package / "bin" / "cli.py"
    script.write_text(f"#!/usr/bin/env {Path(sys.executable).name}\nimport sys\nprint('cli runs')\n")
    script.chmod(0o755)
    bin_dir = tmp_path / "app" / "node_modules" / ".bin"
    bin_dir.mkdir()
    (bin_dir / "cli").symlink_to("../@scope/cli/bin/cli.py")
    search = f"{Path(sys.executable).parent}{os.pathsep}{os.defpath}"
    mounts = program_mounts(bin_dir / "cli", search)
    assert mounts[0] == tmp_path / "app" / "node_modules"
    cell = create_cell_environment(tmp_path / "cell")
    sandbox = Sandbox(cell_policy(cell, programs=[bin_dir / "cli"]))
    completed = subprocess.run(sandbox.wrap([str(bin_dir / "cli")], cell.root), capture_output=True, text=True,
                               env=cell.env(), check=False)
    assert (completed.returncode, completed.stdout) == (0, "cli runs\n"), completed.stderr


def test_probe_says_why_when_bwrap_is_missing_and_the_answer_is_cached():
    probe_bwrap.cache_clear()
    missing = probe_bwrap("no-such-bwrap-here")
    assert not missing.works
    assert "bubblewrap is not installed ('no-such-bwrap-here' is not on PATH)" in (missing.problem or "")
    assert probe_bwrap("no-such-bwrap-here") is missing
    probe_bwrap.cache_clear()


def test_a_namespace_failure_is_explained_with_the_fix():
    # What bwrap prints where unprivileged user namespaces are off (Ubuntu 24.04's AppArmor rule, a container).
    for said in ("bwrap: setting up uid map: Permission denied",
                 "bwrap: No permissions to creating new namespace, likely because the kernel does not allow "
                 "non-privileged user namespaces.",
                 "bwrap: Creating new namespace failed: Operation not permitted"):
        message = explain_failure(said, 1)
        assert "unprivileged user namespaces are not allowed" in message
        assert "kernel.apparmor_restrict_unprivileged_userns=0" in message and "--arena-sandbox=none" in message
    assert explain_failure("bwrap: Can't mount proc on /newroot/proc: Device busy", 1).startswith("bwrap failed: ")


def test_sandbox_modes_resolve_with_messages_for_the_header():
    works = BwrapProbe("/usr/bin/bwrap", "bubblewrap 0.8.0", None)
    broken = BwrapProbe("/usr/bin/bwrap", "bubblewrap 0.8.0", "bwrap cannot create its namespaces (...)")
    assert resolve_sandbox("auto", works).mode == "bwrap"
    assert resolve_sandbox("auto", works).header() == "arena sandbox: bwrap (bubblewrap 0.8.0)"
    fallback = resolve_sandbox("auto", broken)
    assert (fallback.mode, fallback.requested) == ("none", "auto")
    assert fallback.header() == ("arena sandbox: NONE, reference and replay arms only: the patches' code runs "
                                 "unsandboxed when graded (--arena-sandbox=auto and bubblewrap does not work here: "
                                 "bwrap cannot create its namespaces (...))")
    assert fallback.refuse_agents([]) is None  # GOLD, EMPTY, replay run
    refusal = fallback.refuse_agents(["CLAUDE"])
    assert refusal is not None and "arm(s) CLAUDE would run their agent unsandboxed" in refusal
    assert "bwrap cannot create its namespaces (...)" in refusal and "--arena-sandbox=none" in refusal
    assert resolve_sandbox("none", works).mode == "none"
    assert resolve_sandbox("none", works).refuse_agents(["CLAUDE"]) is None  # asked for: it runs them
    assert resolve_sandbox("none", works).header() == "arena sandbox: NONE, arms and grading run unsandboxed: " \
                                                      "--arena-sandbox=none"
    with pytest.raises(SandboxError, match=r"--arena-sandbox=bwrap, but bubblewrap does not work here: bwrap cannot"):
        resolve_sandbox("bwrap", broken)
    with pytest.raises(SandboxError, match=r"arena_sandbox: 'docker' is not one of auto, bwrap, none"):
        resolve_sandbox("docker", works, source="arena_sandbox")


def test_private_keys_of_dotenvx_are_named_for_unsetting():
    env = {"DOTENV_PRIVATE_KEY": "a", "DOTENV_PRIVATE_KEY_CI": "b", "DOTENV_KEY": "c", "DOTENV_PUBLIC_KEY": "d",
           "PATH": "/usr/bin"}
    assert private_key_variables(env) == ("DOTENV_KEY", "DOTENV_PRIVATE_KEY", "DOTENV_PRIVATE_KEY_CI")


@needs_bwrap
def test_as_an_unprivileged_user_the_sandbox_runs_in_a_user_namespace(tmp_path):
    """Root runs bwrap without a user namespace; anyone else needs one (where the kernel allows it)."""
    if os.getuid() != 0:
        pytest.skip("needs root to switch to an unprivileged user")
    setpriv = subprocess.run(["which", "setpriv"], capture_output=True, text=True, check=False).stdout.strip()
    if not setpriv:
        pytest.skip("setpriv is not installed")
    tmp_path.chmod(0o755)
    sandbox = Sandbox(SandboxPolicy())
    completed = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                                *sandbox.wrap(["sh", "-c", "id -u; grep CapEff /proc/self/status"], Path("/"))],
                               capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["65534", "CapEff:", "0000000000000000"]


def processes_with(marker: str) -> list[int]:
    """Live processes (not zombies) whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker.encode() not in handle.read():
                    continue
            with open(f"/proc/{entry}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


class greeting_server:
    """A TCP server on 127.0.0.1 that greets each connection, like a model endpoint would answer."""

    def __enter__(self) -> int:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        port: int = self.server.getsockname()[1]
        return port

    def _serve(self) -> None:
        try:
            connection, _ = self.server.accept()
        except OSError:
            return
        with connection:
            connection.sendall(b"hello from the model")

    def __exit__(self, *exc: object) -> None:
        self.server.close()
        self.thread.join(timeout=30)


@needs_bwrap
def test_python_in_the_sandbox_is_the_harness_interpreter_by_every_name_with_its_packages(tmp_path):
    """A verify command says ``python`` (not ``python3.11``): the harness's interpreter, wherever it is
    installed (a venv, pyenv, /opt), answers to it inside the sandbox, with its stdlib and pytest."""
    cell = create_cell_environment(tmp_path / "cell")
    tree = tmp_path / "tree"
    tree.mkdir()
    sandbox = Sandbox(cell_policy(cell, read_write=(tree,)))
    script = "python -c 'import json, pytest, pytest_swe_arena, sys; print(sys.executable)'"
    completed = subprocess.run(sandbox.wrap(["bash", "-c", script], tree), env=cell.env(), capture_output=True,
                               text=True, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr
    assert Path(completed.stdout.strip()).resolve() == Path(sys.executable).resolve()
