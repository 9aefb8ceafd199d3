"""The metering proxy as a process of its own, started by the process that owns a sweep's meter.

The controller starts one for its sweep (and hands its address to the workers
on its host, or, listening on an address they reach, to the workers on every
host); the only process of a sweep without xdist, or a worker on another host
that was handed none, starts its own (``cells.SessionMeter``). Cells' routes are opened
over the control API (``MeterClient``). Its own process, not a thread of the
harness: the agents' traffic never waits on the harness's GIL, and a proxy
that dies is seen (``check``) instead of silently taking the harness with it.
It is in its own session and does not carry the sweep's token, so a Ctrl-C
aimed at the sweep does not cut the calls cells are still settling (its owner
stops it once they are done); it stops when its stdin closes, so an owner
killed outright leaves no proxy behind.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ...interrupts import SWEEP_TOKEN_VARIABLE
from ..budget import BudgetLimits
from ..prices import Price
from .accounts import NO_BUDGET, MeterError
from .client import SECRET_VARIABLE, MeterClient, proxy_url

#: how long a new proxy may take to listen (a busy machine imports aiohttp slowly)
START_SECONDS = 120.0


class MeterProcess:
    """``python -m pytest_swe_arena.spend.meter`` in ``directory``: its port file, its call log, its stderr.

    :param listen: the address it listens on, which is also the one every route it opens names
        (``--arena-meter-listen``); port 0 is any free port.
    """

    def __init__(self, directory: Path, prices: Mapping[str, Price], limits: BudgetLimits = NO_BUDGET,
                 listen: tuple[str, int] = ("127.0.0.1", 0)):
        self.directory = directory
        self.listen = listen
        self.prices = dict(prices)
        self.limits = limits
        self.secret = secrets.token_urlsafe(24)
        self.process: subprocess.Popen[bytes] | None = None
        self.client: MeterClient | None = None

    @property
    def log(self) -> Path:
        """One JSON line per call the proxy saw (no header, no query: never a key)."""
        return self.directory / "calls.jsonl"

    @property
    def stderr(self) -> Path:
        return self.directory / "meter.stderr"

    def start(self) -> MeterClient:
        """Start the proxy and wait until it listens; ``MeterError`` with its stderr when it does not."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        port_file = self.directory / "port"
        port_file.unlink(missing_ok=True)
        prices = self.directory / "prices.json"
        prices.write_text(json.dumps(self.prices))
        limits = self.directory / "limits.json"
        limits.write_text(json.dumps(self.limits.to_json()))
        argv = [sys.executable, "-m", "pytest_swe_arena.spend.meter", "--port-file", str(port_file),
                "--prices", str(prices), "--limits", str(limits), "--log", str(self.log), "--until-stdin-closes",
                "--host", self.listen[0], "--port", str(self.listen[1])]
        env = {name: value for name, value in os.environ.items() if name != SWEEP_TOKEN_VARIABLE}
        env[SECRET_VARIABLE] = self.secret
        with open(self.stderr, "ab") as stderr:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr,
                                            env=env, start_new_session=True)
        deadline = time.monotonic() + START_SECONDS
        while not port_file.exists():
            if self.process.poll() is not None:
                raise MeterError(f"the metering proxy exited with status {self.process.returncode} before it "
                                 f"listened: {self._stderr_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise MeterError(f"the metering proxy did not listen within {START_SECONDS:g} s: {self._stderr_tail()}")
            time.sleep(0.05)
        port = int(port_file.read_text())
        self.client = MeterClient(proxy_url(self.listen[0], port), self.secret)
        return self.client

    def check(self) -> None:
        """``MeterError`` unless the proxy process is still running."""
        if self.process is None:
            raise MeterError("the metering proxy was not started")
        if self.process.poll() is not None:
            raise MeterError(f"the metering proxy exited with status {self.process.returncode}: "
                             f"{self._stderr_tail()}")

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; idempotent."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        finally:
            if process.stdin is not None:
                process.stdin.close()

    def _stderr_tail(self) -> str:
        try:
            return self.stderr.read_text(errors="replace")[-1000:].strip() or "(no output)"
        except OSError:
            return "(no output)"
