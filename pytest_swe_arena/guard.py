"""Guarding a sweep: one owner per out dir, and clean stops on Ctrl-C or SIGTERM.

``SweepLock`` is ``arena.lock`` in the out dir: a JSON object (mode 0600,
replaced atomically) with the owner's pid, host, run id, start time and a
heartbeat refreshed every 20 s, plus the sweep's progress, which is what
``swe-arena status`` shows. A lock whose heartbeat is older than 90 s, or whose
pid is gone on this host, is stale and is taken over with a warning. The lock
records its owner's heartbeat interval and stale limit, and whoever judges the
lock (``swe-arena status``, a second sweep) uses those, not its own.

Every process a sweep starts inherits ``ARENA_SWEEP_TOKEN``; after an
interrupt, whatever still carries it (an agent whose worker was killed before
it could stop it) is terminated, so no process outlives the sweep. The lock
records the token too, so the sweep that takes over from a controller killed
with SIGKILL also stops the agents that controller left running.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from .proc import holders_of

LOCK_NAME = "arena.lock"
SWEEP_TOKEN_VARIABLE = "ARENA_SWEEP_TOKEN"
HEARTBEAT_SECONDS = 20.0
STALE_SECONDS = 90.0


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _age(iso: str) -> float:
    return time.time() - datetime.fromisoformat(iso).timestamp()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_lock(out: Path) -> dict[str, Any] | None:
    """The lock's content, or None if there is no (readable) lock."""
    try:
        data = json.loads((out / LOCK_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def owner_stale_limit(owner: Mapping[str, Any], default: float = STALE_SECONDS) -> float:
    """The stale limit the lock's owner recorded (its ``--arena-lock-stale``), else ``default``."""
    limit = owner.get("stale_seconds")
    if isinstance(limit, int | float) and not isinstance(limit, bool) and limit > 0:
        return float(limit)
    return default


def stale_reason(owner: Mapping[str, Any], stale_after: float = STALE_SECONDS) -> str | None:
    """Why the lock content ``owner`` belongs to a dead sweep, or None if its owner lives.

    The owner's own stale limit wins over ``stale_after`` (which serves locks that do not record one):
    a sweep with a slow heartbeat must not be declared dead by a reader with a shorter limit.
    """
    stale_after = owner_stale_limit(owner, stale_after)
    try:
        age = _age(str(owner["heartbeat_at"]))
    except (KeyError, ValueError, TypeError):
        return "its content is unreadable"
    if age > stale_after:
        return f"its heartbeat is {age:.0f} s old"
    if owner.get("host") == socket.gethostname() and not _pid_alive(int(owner.get("pid", 0))):
        return f"its pid {owner.get('pid')} is gone"
    return None


class SweepLock:
    """The single-owner lock of an out dir, held by the controller for the whole sweep."""

    def __init__(self, out: Path, run_id: str, progress: Callable[[], Mapping[str, Any]], sweep_token: str = "",
                 heartbeat: float = HEARTBEAT_SECONDS, stale_after: float = STALE_SECONDS):
        self.path = out / LOCK_NAME
        self.sweep_token = sweep_token
        self.out = out
        self.run_id = run_id
        self.progress = progress
        self.heartbeat = heartbeat
        self.stale_after = stale_after
        self.started = time.time()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._write_lock = threading.Lock()
        #: Heartbeats that could not be written (the thread keeps beating).
        self.failures = 0

    def _content(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "run_id": self.run_id,
            "sweep_token": self.sweep_token,
            "started_at": _iso(self.started),
            "heartbeat_at": _iso(time.time()),
            "heartbeat_seconds": self.heartbeat,
            "stale_seconds": self.stale_after,
            "progress": dict(self.progress()),
        }

    def stale_reason(self, owner: Mapping[str, Any]) -> str | None:
        """Why a lock held by ``owner`` may be taken over, or None if its owner lives."""
        return stale_reason(owner, self.stale_after)

    def acquire(self) -> str | None:
        """Take the lock or raise ``pytest.UsageError`` naming the live owner.

        Returns the warning to show when a stale lock was taken over.
        """
        from filelock import FileLock

        self.out.mkdir(parents=True, exist_ok=True)
        takeover = None
        with FileLock(str(self.out / ".arena.lock.guard")):
            owner = read_lock(self.out)
            if owner is not None and owner.get("run_id") != self.run_id:
                reason = self.stale_reason(owner)
                if reason is None:
                    raise pytest.UsageError(
                        f"{self.out} is in use by another sweep (pid {owner.get('pid')} on {owner.get('host')}, "
                        f"run {owner.get('run_id')}, heartbeat {_age(str(owner['heartbeat_at'])):.0f} s ago); "
                        "wait for it, stop it, or use another --arena-out"
                    )
                takeover = (f"taking over the lock of {self.out} from run {owner.get('run_id')} "
                            f"(pid {owner.get('pid')} on {owner.get('host')}): {reason}")
                if owner.get("host") == socket.gethostname() and owner.get("sweep_token"):
                    left = reap_sweep(str(owner["sweep_token"]))
                    if left:
                        takeover += f"; stopped {len(left)} process(es) it left running"
            self.write()
        self._thread = threading.Thread(target=self._beat, name="arena-heartbeat", daemon=True)
        self._thread.start()
        return takeover

    def write(self) -> None:
        """Rewrite the lock (heartbeat and progress), atomically, mode 0600."""
        with self._write_lock:
            temp = self.path.with_name(f".{LOCK_NAME}.{os.getpid()}")
            descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                json.dump(self._content(), handle, allow_nan=False)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.path)

    def _beat(self) -> None:
        failing = False
        while not self._stop.wait(self.heartbeat):
            try:
                self.write()
            except OSError as error:
                # A full disk or a vanished out dir must not end the heartbeat for good: a lock that
                # stops beating is taken over while the sweep still runs. Say so once, keep trying.
                if not failing:
                    warnings.warn(f"swe-arena: cannot refresh {self.path}: {error}; retrying every "
                                  f"{self.heartbeat:g} s", RuntimeWarning, stacklevel=1)
                failing = True
                self.failures += 1
            else:
                failing = False

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._write_lock:
            owner = read_lock(self.out)
            if owner is not None and owner.get("run_id") == self.run_id:
                self.path.unlink(missing_ok=True)


class InterruptSignals:
    """SIGINT and SIGTERM raise KeyboardInterrupt; a repeat within a second counts once.

    A terminal's Ctrl-C reaches every process of the foreground group, and the
    controller also forwards the signal to its workers: the repeat window
    keeps one Ctrl-C from looking like two, while a real second Ctrl-C still
    hurries the stop.
    """

    REPEAT_WINDOW = 1.0

    def __init__(self) -> None:
        self.last = 0.0
        self.received = 0
        self.previous: dict[int, Any] = {}
        self.deferring = 0
        self.pending: int | None = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            self.previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if now - self.last < self.REPEAT_WINDOW:
            return
        self.last = now
        self.received += 1
        if self.deferring:
            self.pending = signum
            return
        raise KeyboardInterrupt(signal.Signals(signum).name)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold off a SIGINT/SIGTERM until the block is done, then raise it.

        Python runs signal handlers in the main thread only, whichever thread the
        signal hit, so remembering the signal here defers it for sure (a blocked
        signal mask would not: other threads would take it, or it would fire the
        moment the mask is restored). Nested blocks raise at the outermost exit.
        """
        self.deferring += 1
        try:
            yield
        finally:
            self.deferring -= 1
            if not self.deferring and self.pending is not None:
                signum, self.pending = self.pending, None
                raise KeyboardInterrupt(signal.Signals(signum).name)


def forward_interrupt(token: str) -> None:
    """Send SIGINT to this process's children that belong to the sweep (its xdist workers)."""
    me = os.getpid()
    for pid in holders_of(SWEEP_TOKEN_VARIABLE, token):
        if _parent_of(pid) == me:
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass


def reap_sweep(token: str, grace: float = 10.0) -> list[int]:
    """Terminate every process still carrying the sweep token; return the pids found."""
    me = os.getpid()
    found = [pid for pid in holders_of(SWEEP_TOKEN_VARIABLE, token) if pid != me]
    for pid in found:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(
        pid in holders_of(SWEEP_TOKEN_VARIABLE, token) for pid in found
    ):
        time.sleep(0.1)
    for pid in holders_of(SWEEP_TOKEN_VARIABLE, token):
        if pid != me:
            _signal(pid, signal.SIGKILL)
    return found


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])
