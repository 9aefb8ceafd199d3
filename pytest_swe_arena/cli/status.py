"""``swe-arena status``: a live view of a sweep from another terminal.

Reads what the sweep's controller keeps in its out dir: ``arena.lock`` (owner,
heartbeat and progress, see ``ledger.lock.SweepLock``, rewritten after every cell and
every heartbeat) and the ledger rows of that run so far. It only reads: it
never takes, refreshes or breaks the lock.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..ledger.lock import STALE_SECONDS, CorruptLock, lock_written_ago, read_lock, stale_reason
from ..ledger.reader import CellRecord, ledger_cells
from ..naming import LEDGER_NAME, LOCK_NAME, SUMMARY_NAME
from ..results.summary import summarize
from ..results.text import count, format_summary, usd


def duration(seconds: float) -> str:
    """4s, 3m12s, 2h05m."""
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _age(iso: Any, now: datetime) -> str:
    try:
        moment = datetime.fromisoformat(str(iso))
    except ValueError:
        return "unknown"
    return duration((now - moment).total_seconds()) + " ago"


def _run_cells(out: Path, run_id: str) -> list[CellRecord]:
    ledger = out / LEDGER_NAME
    return ledger_cells(ledger, run_id) if ledger.is_file() else []


def progress_lines(owner: Mapping[str, Any], now: datetime) -> list[str]:
    """The lock's owner, heartbeat and progress as text."""
    progress = owner.get("progress") or {}
    total, done, running = progress.get("total"), progress.get("done", 0), progress.get("running", 0)
    left = "not collected yet" if total is None else f"{max(total - done - running, 0)} left of {total}"
    unknown = progress.get("unknown_usd_cells") or 0
    spent_usd = f"${usd(progress.get('spent_usd'))}" + (f" (+ {unknown} cell(s) of unknown cost)" if unknown else "")
    unknown_tokens = progress.get("unknown_token_cells") or 0
    spent_tokens = f"{count(progress.get('spent_tokens'))} tokens" + (
        f" (+ {unknown_tokens} cell(s) of unknown tokens)" if unknown_tokens else "")
    here = " (this machine)" if owner.get("host") == socket.gethostname() else ""
    return [
        f"  owner      pid {owner.get('pid')} on {owner.get('host')}{here}",
        f"  started    {owner.get('started_at')}, {_age(owner.get('started_at'), now)}",
        f"  heartbeat  {_age(owner.get('heartbeat_at'), now)}",
        f"  cells      {done} done, {running} running, {left}",
        f"  spent      {spent_usd}, {spent_tokens}",
    ]


def sweep_status(out: Path, now: datetime | None = None) -> tuple[list[str], bool]:
    """What is going on in ``out``: the lines to show, and whether a live sweep owns it."""
    now = now or datetime.now(UTC)
    try:
        owner = read_lock(out)
    except CorruptLock as corrupt:
        return [f"{corrupt}: whether a sweep is running in {out} cannot be told from it; the next sweep "
                f"takes it over once nothing has rewritten it for {STALE_SECONDS:g} s (or delete it)"], False
    if owner is None:
        ledger = out / LEDGER_NAME
        if not ledger.is_file():
            return [f"no sweep is running in {out}: no {LOCK_NAME} and no {LEDGER_NAME} (no sweep has run here)"], False
        cells = ledger_cells(ledger)
        if not cells:
            return [f"no sweep is running in {out} (no {LOCK_NAME}); {ledger} has no readable row"], False
        return [
            f"no sweep is running in {out} (no {LOCK_NAME}); the last run, {cells[-1].run_id}, "
            f"recorded {len(cells)} cells",
            f"its results: {out / SUMMARY_NAME} (rebuild with `swe-arena report {out}`)",
        ], False
    # By the owner's own stale limit (recorded in the lock), or the file's age when its content cannot tell.
    dead = stale_reason(owner, written_ago=lock_written_ago(out))
    state = "running" if dead is None else f"STALE ({dead}): the sweep died; the next sweep here takes over"
    run_id = str(owner.get("run_id"))
    lines = [f"sweep {run_id} in {out}: {state}", *progress_lines(owner, now)]
    cells = _run_cells(out, run_id)
    if cells:
        lines += ["", "results so far:", *format_summary(summarize(cells, run_id=run_id))]
    return lines, dead is None
