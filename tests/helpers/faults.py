"""Faults for the stop tests: a stubborn agent, a sweep in its own process, a small disk that fills up.

The agent is a real process tree run by a ``command`` arm: it takes note of
SIGTERM and carries on (only SIGKILL ends it), leaves a child in its own session
that ignores SIGTERM too, and waits for the test to release it before it fixes
the bug. The test synchronises on the files it writes (``started/<pid>``,
``term/<pid>``) and on the processes that carry its mark, never on time.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from helpers.agents import arm_table
from helpers.arena import processes_with, start_sweep

AGENT = '''
import os, pathlib, signal, subprocess, sys, time

state = pathlib.Path(os.environ["FAULT_STATE"])


def took_note(signum, frame):
    (state / "term" / str(os.getpid())).write_text("")


signal.signal(signal.SIGTERM, took_note)
subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                  "time.sleep(3600)"], start_new_session=True)
(state / "started" / str(os.getpid())).write_text(os.getcwd())
while not (state / "release").exists():
    time.sleep(0.05)
pathlib.Path("calc/ops.py").write_text("def add(a, b):\\n    return a + b\\n\\n\\ndef mul(a, b):\\n    return a * b\\n")
'''

#: How long after the first Ctrl-C a person presses it again in the tests (longer than the
#: window in which a worker counts a repeated signal once).
SECOND_CTRL_C_PAUSE = 1.5


def wait_for(condition: Callable[[], object], what: str, timeout: float = 300) -> None:
    """Poll ``condition`` until it holds; the timeout is only there so a broken sweep fails the test."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def interrupt_sweep(suite: Any, *args: str, ready: Callable[[], object], what: str) -> None:
    """A sweep in another process, sent one SIGINT once ``ready()`` holds (``what`` says what that is); it must
    end INTERRUPTED."""
    sweep = start_sweep(suite, *args)
    try:
        wait_for(lambda: ready() or sweep.poll() is not None, what)
        assert sweep.poll() is None, f"the sweep ended before {what}"
        sweep.send_signal(signal.SIGINT)
        assert sweep.wait(timeout=120) == pytest.ExitCode.INTERRUPTED
    finally:
        if sweep.poll() is None:
            sweep.kill()


class FaultSweep:
    """A suite whose AGENT arm is the stubborn agent, and the sweeps run on it."""

    def __init__(self, suite: Any, grace: float = 3600):
        self.suite = suite
        self.path: Path = suite.path
        self.mark = uuid.uuid4().hex
        self.state = self.path / "agent-state"
        for name in ("started", "term"):
            (self.state / name).mkdir(parents=True, exist_ok=True)
        agent = self.path / "stubborn_agent.py"
        agent.write_text(AGENT)
        suite.arms_toml = arm_table("AGENT", "command", command=[sys.executable, str(agent)], grace=grace,
                                    timeout=7200, env={"FAULT_STATE": str(self.state), "FAULT_AGENT": self.mark})
        # The agent and the test coordinate through FAULT_STATE, outside the cell: what a sandbox hides.
        # These sweeps are about the controller's bookkeeping, so they run unsandboxed.
        suite.ini_lines.append('arena_sandbox = "none"')
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """A sweep in its own process (as from a terminal), its output in ``sweep-N.log``."""
        self.suite.write_config()
        self.log = self.path / f"sweep-{time.monotonic_ns()}.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                                            cwd=self.path, stdout=log, stderr=subprocess.STDOUT)
        return self.process

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def started(self) -> set[str]:
        return {entry.name for entry in (self.state / "started").iterdir()}

    def termed(self) -> set[str]:
        return {entry.name for entry in (self.state / "term").iterdir()}

    def agents(self) -> list[int]:
        """Live processes of the agents: each agent and the child it left in its own session."""
        return processes_with("FAULT_AGENT", self.mark)

    def wait_for_agents(self, count: int) -> None:
        """Until ``count`` agents have started and each has its process and its child running."""
        assert self.process is not None
        wait_for(lambda: self.process.poll() is not None
                 or (len(self.started()) >= count and len(self.agents()) >= 2 * count),
                 f"{count} agent(s) to start")
        assert self.process.poll() is None, f"the sweep ended before its agents started:\n{self.output()}"

    def release(self) -> None:
        (self.state / "release").write_text("")

    def signal(self, signum: int) -> float:
        """Send ``signum`` to the controller; return the monotonic time it was sent."""
        assert self.process is not None
        sent = time.monotonic()
        self.process.send_signal(signum)
        return sent

    def wait(self, timeout: float = 300) -> int:
        assert self.process is not None
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"the sweep did not end within {timeout:g} s:\n{self.output()}") from None

    def kill_leftovers(self) -> None:
        for pid in self.agents():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def ledger_lines(out: Path) -> list[str]:
    ledger = out / "ledger.jsonl"
    return ledger.read_text().splitlines() if ledger.exists() else []


def ledger_rows(out: Path) -> list[dict[str, Any]]:
    """Every row of the ledger; a line that does not parse (a torn one) fails the test."""
    return [json.loads(line) for line in ledger_lines(out) if line.strip()]


def cell(row: dict[str, Any]) -> tuple[str, str]:
    return row["instance_id"], row["arm"]


@contextmanager
def small_disk(path: Path, size: str = "16m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` for the test, unmounted after; skips where mounting is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                             check=False, capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a full disk needs a small file system of its own, and `mount -t tmpfs` is not allowed here "
                    f"(needs root with CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` with one file (the next write there fails with ENOSPC); return it."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        for chunk in (1 << 20, 1 << 12, 1):
            block = b"\0" * chunk
            try:
                while True:
                    out.write(block)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
    return filler
