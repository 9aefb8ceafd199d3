"""``swe-arena status``: a live view of a sweep from another terminal.

Reads the single-owner lock the controller keeps in the out dir
(``arena.lock``: JSON with ``pid``, ``host``, ``run_id``, ``started_at``,
``heartbeat_at`` and ``progress`` {total, done, running, spent_usd,
spent_tokens}, refreshed every 20 s) and the ledger rows of that run so far.
It only reads: it never takes or breaks the lock.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .ledger import LEDGER_NAME, latest_run, read_ledger
from .report import SUMMARY_NAME, CellRecord, count, format_summary, summarize, usd

LOCK_NAME = "arena.lock"
#: A lock whose heartbeat is older than this belongs to a sweep that died (DESIGN: stale after 90 s).
STALE_AFTER_SECONDS = 90.0


class LockFileError(Exception):
    """``arena.lock`` exists but does not follow the lock contract; the message names the field."""


@dataclass(frozen=True)
class SweepLock:
    """The owner of an out dir and its progress, as the controller last wrote them."""

    pid: int
    host: str
    run_id: str
    started_at: datetime
    heartbeat_at: datetime
    total: int | None
    done: int
    running: int
    spent_usd: float | None
    spent_tokens: int

    @classmethod
    def from_json(cls, data: Any, source: Path) -> SweepLock:
        def field(mapping: Any, name: str, kinds: tuple[type, ...], where: str = "") -> Any:
            if not isinstance(mapping, Mapping) or name not in mapping:
                raise LockFileError(f"{source}: missing field {where}{name!r}")
            value = mapping[name]
            if not isinstance(value, kinds) or isinstance(value, bool):
                accepted = " or ".join("null" if kind is type(None) else kind.__name__ for kind in kinds)
                raise LockFileError(f"{source}: field {where}{name!r} is {value!r}, expected {accepted}")
            return value

        def moment(name: str) -> datetime:
            text = field(data, name, (str,))
            try:
                value = datetime.fromisoformat(text)
            except ValueError:
                raise LockFileError(f"{source}: field {name!r} is {text!r}, expected an ISO 8601 time") from None
            return value if value.tzinfo else value.replace(tzinfo=UTC)

        progress = field(data, "progress", (dict,))
        return cls(
            pid=field(data, "pid", (int,)),
            host=field(data, "host", (str,)),
            run_id=field(data, "run_id", (str,)),
            started_at=moment("started_at"),
            heartbeat_at=moment("heartbeat_at"),
            total=field(progress, "total", (int, type(None)), "progress."),
            done=field(progress, "done", (int,), "progress."),
            running=field(progress, "running", (int,), "progress."),
            spent_usd=field(progress, "spent_usd", (int, float, type(None)), "progress."),
            spent_tokens=field(progress, "spent_tokens", (int,), "progress."),
        )

    def heartbeat_age(self, now: datetime) -> float:
        return max(0.0, (now - self.heartbeat_at).total_seconds())

    def owner_gone(self) -> bool:
        """True when the owner ran on this machine and its process no longer exists."""
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def read_lock(out: Path) -> SweepLock | None:
    """The out dir's lock, or None when no sweep holds it."""
    path = out / LOCK_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise LockFileError(f"{path}: not JSON ({error})") from None
    return SweepLock.from_json(data, path)


def duration(seconds: float) -> str:
    """4s, 3m12s, 2h05m."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _cells(out: Path, run_id: str | None) -> list[CellRecord]:
    """The ledger's cells of ``run_id`` (or of its last run when None)."""
    records = (CellRecord.from_row(row) for row in read_ledger(out / LEDGER_NAME))
    if run_id is None:
        return latest_run(records, lambda cell: cell.run_id)
    return [cell for cell in records if cell.run_id == run_id]


def sweep_status(out: Path, now: datetime | None = None) -> tuple[list[str], bool]:
    """What is going on in ``out``: the lines to show, and whether a live sweep owns it."""
    now = now or datetime.now(UTC)
    lock = read_lock(out)
    if lock is None:
        cells = _cells(out, None)
        if not cells:
            return [f"no sweep is running in {out}: no {LOCK_NAME} and no {LEDGER_NAME} (none has run here)"], False
        return [
            f"no sweep is running in {out} (no {LOCK_NAME}): the last run, {cells[-1].run_id}, has finished "
            f"with {len(cells)} cells recorded",
            f"its results: {out / SUMMARY_NAME} (rebuild with `swe-arena report {out}`)",
        ], False
    age = lock.heartbeat_age(now)
    gone = lock.owner_gone()
    live = age <= STALE_AFTER_SECONDS and not gone
    if live:
        state = "running"
    else:
        why = f"process {lock.pid} is gone" if gone else f"no heartbeat for {duration(age)}"
        state = f"STALE ({why}): the sweep died; the next sweep in this out dir takes the lock over"
    left = "" if lock.total is None else f", {max(lock.total - lock.done - lock.running, 0)} left of {lock.total}"
    here = " (this machine)" if lock.host == socket.gethostname() else ""
    lines = [
        f"sweep {lock.run_id} in {out}: {state}",
        f"  owner      pid {lock.pid} on {lock.host}{here}",
        f"  started    {lock.started_at.isoformat(timespec='seconds')}, {duration((now - lock.started_at).total_seconds())} ago",
        f"  heartbeat  {duration(age)} ago",
        f"  cells      {lock.done} done, {lock.running} running{left}",
        f"  spent      {usd(lock.spent_usd)} USD, {count(lock.spent_tokens)} tokens",
    ]
    cells = _cells(out, lock.run_id)
    if cells:
        lines += ["", "results so far:", *format_summary(summarize(cells, run_id=lock.run_id))]
    return lines, live
