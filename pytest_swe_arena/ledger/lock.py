"""One owner per out dir: ``arena.lock``.

``SweepLock`` is ``arena.lock`` in the out dir: a JSON object (mode 0600,
replaced atomically) with the owner's pid, host, run id, start time and a
heartbeat refreshed every 20 s, plus the sweep's progress, which is what
``swe-arena status`` shows. A lock whose heartbeat is older than 90 s, or whose
pid is gone on this host, is stale and is taken over with a warning. The lock
records its owner's heartbeat interval and stale limit, and whoever judges the
lock (``swe-arena status``, a second sweep) uses those, not its own. It records
the sweep token too (see ``interrupts``), so the sweep that takes over from a
controller killed with SIGKILL also stops the agents that controller left running.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TypeGuard

from ..files import timestamp, write_atomic
from ..interrupts import reap_sweep
from ..naming import LOCK_GUARD_NAME, LOCK_NAME

HEARTBEAT_SECONDS = 20.0
STALE_SECONDS = 90.0


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


class CorruptLock(Exception):
    """``arena.lock`` exists but is not a lock: not UTF-8, not JSON, or not an object (the message names it)."""


def read_lock(out: Path) -> dict[str, Any] | None:
    """The lock's content, or None if there is no lock; raises ``CorruptLock`` if it cannot be read as one."""
    path = out / LOCK_NAME
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CorruptLock(f"{path} cannot be read ({error.strerror or error})") from None
    except UnicodeDecodeError:
        raise CorruptLock(f"{path} is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise CorruptLock(f"{path} is not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise CorruptLock(f"{path} holds a JSON {type(data).__name__}, not a lock's object")
    return data


def lock_written_ago(out: Path) -> float | None:
    """Seconds since ``arena.lock`` was last written (its mtime), or None if there is none."""
    try:
        return time.time() - (out / LOCK_NAME).stat().st_mtime
    except FileNotFoundError:
        return None


def owner_stale_limit(owner: Mapping[str, Any], default: float = STALE_SECONDS) -> float:
    """The stale limit the lock's owner recorded (its ``--arena-lock-stale``), else ``default``."""
    limit = owner.get("stale_seconds")
    if isinstance(limit, int | float) and not isinstance(limit, bool) and limit > 0:
        return float(limit)
    return default


def _is_pid(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def content_doubt(owner: Mapping[str, Any]) -> str | None:
    """Why the lock's content cannot tell whether its owner lives, or None when it can.

    A pid that is not one, a heartbeat that is not a time, or a heartbeat that lies in
    the future (the owner's host has a clock ahead of this one's): then only the lock
    file's own age can tell, since a live owner rewrites the file every heartbeat.
    """
    if not _is_pid(owner.get("pid")):
        return f"its pid {owner.get('pid')!r} is not a process id"
    try:
        age = _age(str(owner["heartbeat_at"]))
    except (KeyError, ValueError, TypeError, OverflowError):
        return f"its heartbeat {owner.get('heartbeat_at')!r} is not a time"
    if age < 0:
        return f"its heartbeat lies {-age:.0f} s in the future (the clock of {owner.get('host')} is ahead of this one)"
    return None


def stale_reason(owner: Mapping[str, Any], stale_after: float = STALE_SECONDS,
                 written_ago: float | None = None) -> str | None:
    """Why the lock content ``owner`` belongs to a dead sweep, or None if its owner lives.

    The owner's own stale limit wins over ``stale_after`` (which serves locks that do not record one):
    a sweep with a slow heartbeat must not be declared dead by a reader with a shorter limit. When
    the content cannot tell (``content_doubt``), ``written_ago`` (the lock file's age) decides; without
    it such a lock counts as live.
    """
    stale_after = owner_stale_limit(owner, stale_after)
    pid = owner.get("pid")
    doubt = content_doubt(owner)
    if doubt is None:
        age = _age(str(owner["heartbeat_at"]))
        if age > stale_after:
            return f"its heartbeat is {age:.0f} s old"
    if owner.get("host") == socket.gethostname() and _is_pid(pid) and not _pid_alive(pid):
        return f"its pid {pid} is gone"
    if doubt is not None and written_ago is not None and written_ago > stale_after:
        return f"{doubt}, and the lock was last written {written_ago:.0f} s ago"
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
            "started_at": timestamp(self.started),
            "heartbeat_at": timestamp(),
            "heartbeat_seconds": self.heartbeat,
            "stale_seconds": self.stale_after,
            "progress": dict(self.progress()),
        }

    def acquire(self) -> str | None:
        """Take the lock or raise ``pytest.UsageError`` naming the live owner.

        Returns the warning to show when a stale (or corrupt and old) lock was taken over.
        """
        import pytest  # the sweep's error; ``swe-arena report`` reads the lock without importing pytest
        from filelock import FileLock

        self.out.mkdir(parents=True, exist_ok=True)
        takeover = None
        with FileLock(str(self.out / LOCK_GUARD_NAME)):
            try:
                owner, corrupt = read_lock(self.out), None
            except CorruptLock as error:
                owner, corrupt = {}, str(error)
            written_ago = lock_written_ago(self.out)
            if owner is not None and written_ago is not None and (corrupt or owner.get("run_id") != self.run_id):
                if corrupt:
                    stale_after = self.stale_after
                    reason = (f"{corrupt}, and it was last written {written_ago:.0f} s ago"
                              if written_ago > stale_after else None)
                else:
                    stale_after = owner_stale_limit(owner, self.stale_after)
                    reason = stale_reason(owner, self.stale_after, written_ago)
                if reason is None:
                    raise pytest.UsageError(self._in_use(owner, corrupt or content_doubt(owner), written_ago,
                                                         stale_after))
                takeover = (f"taking over the lock of {self.out}: {reason}" if corrupt else
                            f"taking over the lock of {self.out} from run {owner.get('run_id')} "
                            f"(pid {owner.get('pid')} on {owner.get('host')}): {reason}")
                if owner.get("host") == socket.gethostname() and owner.get("sweep_token"):
                    left = reap_sweep(str(owner["sweep_token"]))
                    if left:
                        takeover += f"; stopped {len(left)} process(es) it left running"
            self.write()
        self._thread = threading.Thread(target=self._beat, name="arena-heartbeat", daemon=True)
        self._thread.start()
        return takeover

    def _in_use(self, owner: Mapping[str, Any], doubt: str | None, written_ago: float, stale_after: float) -> str:
        if doubt is None:
            return (f"{self.out} is in use by another sweep (pid {owner.get('pid')} on {owner.get('host')}, "
                    f"run {owner.get('run_id')}, heartbeat {_age(str(owner['heartbeat_at'])):.0f} s ago); "
                    "wait for it, stop it, or use another --arena-out")
        return (f"{self.out} may be in use by another sweep: {doubt}, and {self.path} was written "
                f"{max(written_ago, 0):.0f} s ago. If no sweep is running there, delete {self.path}; otherwise "
                f"wait for it (the lock counts as stale {stale_after:g} s after its last write), stop it, "
                "or use another --arena-out")

    def write(self) -> None:
        """Rewrite the lock (heartbeat and progress), atomically, mode 0600; a full disk leaves the previous one."""
        with self._write_lock:
            write_atomic(self.path, json.dumps(self._content(), allow_nan=False))

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
            try:
                owner = read_lock(self.out)
            except CorruptLock:
                return  # not ours: whoever wrote it answers for it
            if owner is not None and owner.get("run_id") == self.run_id:
                self.path.unlink(missing_ok=True)
