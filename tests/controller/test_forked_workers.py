"""Local xdist workers forked from the fork server: the same sweep, no orphans, and a fallback that says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.arena import marked_processes, start_sweep

# Each worker writes down who it is as it configures, and the HOLD arm's cells wait for a release
# file (so the test, not a clock, decides when they end) after writing down their worker's pid.
CONFTEST = r'''
import json, os, random, time
from pathlib import Path

from pytest_swe_arena.arms.base import ArmResult
from pytest_swe_arena.spend.usage import Usage


def pytest_configure(config):
    if hasattr(config, "workerinput"):
        parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        record = {"id": os.environ["PYTEST_XDIST_WORKER"], "pid": os.getpid(), "parent": parent,
                  "random": random.random()}
        Path(os.environ["WORKERS_DIR"], str(os.getpid())).write_text(json.dumps(record))


class HoldArm:
    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        Path(os.environ["HOLD_DIR"], f"{request.instance.instance_id}-{os.getpid()}").write_text(str(os.getpid()))
        while not Path(os.environ["HOLD_DIR"], "release").exists():
            time.sleep(0.05)
        from pytest_swe_arena.cell.patches import apply_patch
        apply_patch(request.workspace, request.instance.patch, "gold")
        return ArmResult(usage=Usage.no_model())


def pytest_arena_arm_kinds():
    return {"hold": HoldArm}
'''
ARMS_TOML = '[tool.swe_arena.arms.HOLD]\nkind = "hold"\n'
#: A plugin that starts a thread as it is imported: a fork would copy none of it, so the zygote refuses.
#: Ledger fields that differ between two runs of the same cells.
TIME_FIELDS = {"phases", "started_at", "ended_at", "run_id", "worker", "verify", "chain_sha256"}
THREADED_PLUGIN = "import threading, time\n\nthreading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n"


@pytest.fixture
def forking(suite, calc, tmp_path, monkeypatch):
    suite.pytester.makeconftest(CONFTEST)
    suite.arms_toml = ARMS_TOML
    for name in ("WORKERS_DIR", "HOLD_DIR"):
        (tmp_path / name).mkdir()
        monkeypatch.setenv(name, str(tmp_path / name))
    marker = f"arena-test-{os.getpid()}-{time.monotonic_ns()}"
    monkeypatch.setenv("ARENA_TEST_MARK", marker)
    suite.marker, suite.calc, suite.dirs = marker, calc, tmp_path
    yield suite
    for pid in marked_processes(marker):
        os.kill(pid, signal.SIGKILL)


def comparable(rows):
    return sorted(({k: v for k, v in row.items() if k not in TIME_FIELDS} for row in rows),
                  key=lambda row: (row["instance_id"], row["arm"]))


def workers(suite) -> list[dict]:
    folder = suite.dirs / "WORKERS_DIR"
    records = [json.loads(path.read_text()) for path in folder.iterdir()]
    for path in folder.iterdir():
        path.unlink()
    return records


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(condition, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def held(suite) -> dict[str, int]:
    """Cell instance id -> the pid of the worker holding it, for every cell that started."""
    return {path.name.rsplit("-", 1)[0]: int(path.read_text())
            for path in (suite.dirs / "HOLD_DIR").iterdir() if path.name != "release"}


def children(pid: int, script: str) -> list[int]:
    """The live children of ``pid`` whose command line runs ``script``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and alive(int(entry)):
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if int(stat[1]) == pid and script.encode() in cmdline:
                found.append(int(entry))
    return found


def test_forked_workers_run_the_sweep_that_new_interpreters_run(forking):
    forking.instances([forking.calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    (forking.dirs / "HOLD_DIR/release").write_text("")
    forked = forking.run("--arena-arms=GOLD,EMPTY", "--arena-out=forked", "-n", "2")
    forked.assert_outcomes(passed=3, failed=3)
    forked_workers = workers(forking)
    spawned = forking.run("--arena-arms=GOLD,EMPTY", "--arena-out=spawned", "-n", "2",
                          "--arena-worker-start=popen")
    spawned.assert_outcomes(passed=3, failed=3)
    spawned_workers = workers(forking)

    assert comparable(forking.ledger("forked")) == comparable(forking.ledger("spawned"))
    assert {row["worker"] for row in forking.ledger("forked")} <= {"gw0", "gw1"}
    assert sorted(record["id"] for record in forked_workers) == ["gw0", "gw1"]
    assert all("forkserver/zygote.py" in record["parent"] for record in forked_workers), forked_workers
    assert not any("zygote.py" in record["parent"] for record in spawned_workers), spawned_workers
    assert len({record["random"] for record in forked_workers}) == 2, "each fork reseeds its random numbers"
    for result in (forked, spawned):
        output = result.stdout.str() + result.stderr.str()
        assert "cannot be rewritten" not in output and "fork server" not in output, output


def test_a_worker_goes_with_its_killed_launcher_or_zygote_and_the_sweep_falls_back(forking):
    forking.instances([forking.calc.row(f"demo__calc-{n}") for n in range(1, 7)])
    sweep = start_sweep(forking, "--arena-arms=HOLD", "-n", "2", "--dist=load", "--maxschedchunk=1")
    try:
        wait_for(lambda: len(held(forking)) == 2, "two cells to start")
        first = set(held(forking).values())
        launchers = children(sweep.pid, "forkserver/launcher.py")
        assert len(launchers) == 2
        for pid in launchers:
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not any(alive(pid) for pid in first), "the workers of the killed launchers to end")

        # xdist replaces the crashed workers: forks again, which take the next two cells.
        wait_for(lambda: len(held(forking)) == 4, "the replacement workers' cells to start")
        second = set(held(forking).values()) - first
        (zygote,) = children(sweep.pid, "forkserver/zygote.py")
        os.kill(zygote, signal.SIGKILL)
        wait_for(lambda: not any(alive(pid) for pid in second), "the workers of the dead zygote to end")

        # Their replacements cannot reach the zygote: they start as new interpreters (which of them
        # takes the last two cells is xdist's choice: one may queue both).
        wait_for(lambda: len(held(forking)) >= 5, "a cell to start on a replacement worker")
        third = set(held(forking).values()) - first - second
        assert not any(alive(pid) for pid in first | second)
        (forking.dirs / "HOLD_DIR/release").write_text("")
        sweep.wait(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    output = "".join(path.read_text() for path in forking.path.glob("sweep-*.log"))
    last = [record for record in workers(forking) if record["pid"] in third]
    assert last and not any("zygote.py" in record["parent"] for record in last), last
    said = [line for line in output.splitlines() if "fork server" in line]
    assert len(said) == 1 and said[0].startswith("swe-arena: the worker fork server is gone"), output
    rows = forking.ledger()
    assert len({(row["instance_id"], row["arm"]) for row in rows}) == len(rows) == 6, "one row per cell"
    statuses = sorted(row["status"] for row in rows)
    assert statuses == ["harness_error"] * 4 + ["resolved"] * 2, output
    assert marked_processes(forking.marker) == [], "no worker, launcher or zygote outlives the sweep"


def test_a_zygote_that_cannot_start_leaves_the_workers_to_start_afresh(forking, monkeypatch):
    (forking.path / "threaded_plugin.py").write_text(THREADED_PLUGIN)
    monkeypatch.setenv("PYTEST_PLUGINS", "threaded_plugin")
    forking.instances([forking.calc.row(f"demo__calc-{n}") for n in (1, 2)])
    (forking.dirs / "HOLD_DIR/release").write_text("")
    result = forking.run("--arena-arms=GOLD", "-n", "2")
    result.assert_outcomes(passed=2)
    output = result.stdout.str() + result.stderr.str()
    said = [line for line in output.splitlines() if line.startswith("swe-arena: the worker fork server")]
    assert said == ["swe-arena: the worker fork server did not start (RuntimeError: 1 thread(s) started while the "
                    "plugins were imported, and a fork copies none of them): workers start as new interpreters"], output
    assert not any("zygote.py" in record["parent"] for record in workers(forking))


def test_the_launcher_alone_becomes_an_ordinary_worker_when_no_zygote_listens(tmp_path):
    """Without a zygote the launcher execs this Python with execnet's arguments, and says so once."""
    launcher = Path(__file__).resolve().parents[2] / "pytest_swe_arena/forkserver/launcher.py"
    note = tmp_path / "fell-back"
    outputs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-S", "-E", str(launcher), str(tmp_path / "none.sock"), str(note),
                               "-c", "import sys; print(sys.flags.no_site, sys.stdin.readline().strip())"],
                              input="hello\n", capture_output=True, text=True, check=True)
        outputs.append(done)
    assert [done.stdout for done in outputs] == ["0 hello\n"] * 2, "a new interpreter, with site, reading stdin"
    assert "the worker fork server is gone" in outputs[0].stderr and outputs[1].stderr == ""
