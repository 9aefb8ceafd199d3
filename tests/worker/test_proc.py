"""The process-group runner: timeouts, stop requests and leftovers never leave orphans."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from pytest_swe_arena.cell import processes as proc

# A tree: the leader forks a child in its group, a grandchild that escapes with setsid and a shell
# that ignores SIGTERM; it says "started" (and writes its pid) once the escapee has left the group and
# the shell's trap is set, so that the test acts on the whole tree, however slowly the machine starts it.
TREE = r"""
import os, subprocess, sys, time
pids = sys.argv[1]
escaped, trapped = pids + ".setsid", pids + ".trap"
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
subprocess.Popen([sys.executable, "-c", "import os, sys, time; os.setsid(); open(sys.argv[1], 'w').close(); "
                  "time.sleep(600)", escaped])
subprocess.Popen(["sh", "-c", "trap '' TERM; : > \"$1\"; sleep 600 & wait", "sh", trapped])
while not (os.path.exists(escaped) and os.path.exists(trapped)):
    time.sleep(0.01)
with open(pids, "w") as f:
    f.write(" ".join(str(p) for p in [os.getpid()]))
print("started", flush=True)
time.sleep(float(sys.argv[2]))
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_tree(tmp_path, hold: float, **kwargs):
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    env = dict(os.environ, MARK=str(tmp_path))
    return proc.run([sys.executable, str(script), str(tmp_path / "pids"), str(hold)], cwd=tmp_path, env=env,
                    stdout=tmp_path / "out.log", **kwargs)


def tree_processes(tmp_path) -> list[int]:
    """Every live process started for this test (they all carry MARK=tmp_path in their environment)."""
    needle = f"MARK={tmp_path}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as env:
                    if needle in env.read().split(b"\0") and alive(int(entry)):
                        found.append(int(entry))
            except OSError:
                pass
    return found


def test_timeout_kills_the_whole_tree_including_escaped_grandchildren(tmp_path):
    log = tmp_path / "out.log"

    def clock() -> float:
        # Stands still until the whole tree runs, then passes the timeout at once: the timeout falls
        # while every process of the tree is alive, whatever the machine's speed.
        return 3600.0 if log.is_file() and "started" in log.read_text() else 0.0

    result = run_tree(tmp_path, hold=600, timeout=60, grace=1, clock=clock)
    assert result.timed_out and result.returncode is None
    assert result.seconds == 3600.0, "measured on the clock it was given"
    assert "started" in log.read_text()
    assert tree_processes(tmp_path) == []


def test_leftovers_are_reaped_after_a_normal_exit(tmp_path):
    result = run_tree(tmp_path, hold=0)
    assert result.returncode == 0 and not result.timed_out
    assert tree_processes(tmp_path) == []


def test_stop_request_stops_the_tree_and_says_why(tmp_path):
    calls = []

    def should_stop():
        calls.append(1)
        return "over_budget" if (tmp_path / "pids").exists() else None

    result = run_tree(tmp_path, hold=600, timeout=60, grace=1, should_stop=should_stop)
    assert result.stopped == "over_budget" and result.returncode is None
    assert tree_processes(tmp_path) == []


def test_keyboard_interrupt_while_waiting_kills_the_tree(tmp_path):
    def interrupt_soon():
        while not (tmp_path / "pids").exists():
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_soon, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_tree(tmp_path, hold=600, timeout=60, grace=1)
    assert tree_processes(tmp_path) == []


def test_output_goes_to_files_and_exit_codes_are_kept(tmp_path):
    result = proc.run(["sh", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path, env=dict(os.environ),
                      stdout=tmp_path / "o", stderr=tmp_path / "e")
    assert result.returncode == 3
    assert (tmp_path / "o").read_text() == "out\n" and (tmp_path / "e").read_text() == "err\n"
