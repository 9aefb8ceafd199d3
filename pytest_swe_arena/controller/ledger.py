"""Where a ledger row is built: one JSON row per finished cell, appended and fsynced (its files are not).

Only the controller writes to the out dir. Every row is built here: ``ledger_row`` for a
cell's outcome (finished on a worker, or made on the controller for a crashed worker or an
interrupted cell, see ``outcome``), ``reused_row`` for the row a resumed sweep records again.
A row is appended only after the cell's patch and logs are on disk, so every row's files
exist. A row is whole or absent: when the disk is full the ledger is cut back to where it was
and the caller learns which row was not written (``RowNotWritten``). Reading streams line by
line and skips a torn line (a kill -9 mid-write) with a warning (``files.read_json_lines``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..files import append_line, finite_json, read_json_lines, write_atomic
from ..naming import LEDGER_NAME, PARTIAL_PATCH_NAME, CellName
from ..outcome import CellOutcome, patch_digest

SCHEMA_VERSION = 1


class RowNotWritten(Exception):
    """A cell's row (or one of its files) could not be written; the ledger is as it was before."""

    def __init__(self, row: Mapping[str, Any], error: OSError):
        super().__init__(f"{CellName.of_row(row).shown}: {error}")
        self.row = dict(row)
        self.error = error


def ledger_row(outcome: CellOutcome, run_id: str, patch_file: str | None, run_dir: str | None) -> dict[str, Any]:
    """The ledger's view of an outcome: everything but the patch and log contents."""
    row = outcome.to_json()
    row.pop("patch_base64")
    row.pop("logs")
    lines, sha = patch_digest(outcome.patch)
    row.update(
        schema_version=SCHEMA_VERSION,
        run_id=run_id,
        patch_lines=lines,
        patch_sha256=sha,
        patch_file=patch_file,
        run_dir=run_dir,
    )
    return row


def reused_row(earlier: Mapping[str, Any], run_id: str, nodeid: str) -> dict[str, Any]:
    """An earlier run's final row, recorded again by a resumed sweep that reuses it."""
    row = dict(earlier)
    # After chained resumes, name the run that really ran the cell.
    row.update(run_id=run_id, reused_from=row.get("reused_from") or row["run_id"], nodeid=nodeid)
    return row


class LedgerWriter:
    """Appends rows to ``<out>/ledger.jsonl`` and writes each cell's patch and logs."""

    def __init__(self, out: Path, run_id: str, repeat: int):
        self.out = out
        self.run_id = run_id
        self.repeat = repeat
        self.path = out / LEDGER_NAME
        self.rows: list[dict[str, Any]] = []

    def record(self, outcome: CellOutcome) -> dict[str, Any]:
        """Write the cell's files, then append its row; return the row.

        Raises ``RowNotWritten`` (which carries the row) when a file or the row cannot be written.
        """
        cell = CellName(outcome.instance_id, outcome.arm, outcome.trial)
        run_dir = cell.run_dir(self.repeat)
        patch_file = cell.patch_file(self.repeat) if outcome.patch_scored else None
        row = ledger_row(outcome, self.run_id, patch_file, run_dir if outcome.logs or outcome.patch else None)
        try:
            for name, text in outcome.logs.items():
                write_atomic(self.out / run_dir / name, text, durable=False)
            if patch_file is not None:
                write_atomic(self.out / patch_file, outcome.patch, durable=False)
            elif outcome.patch:
                write_atomic(self.out / run_dir / PARTIAL_PATCH_NAME, outcome.patch, durable=False)
        except OSError as error:
            raise RowNotWritten(row, error) from None
        self.append(row)
        return row

    def record_reused(self, earlier: Mapping[str, Any], nodeid: str) -> dict[str, Any]:
        """Append the row of a cell this sweep reuses from an earlier run; return it."""
        row = reused_row(earlier, self.run_id, nodeid)
        self.append(row)
        return row

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one row and fsync it: the line is whole or absent (``files.append_line``).

        When the write fails (a full disk) ``RowNotWritten`` is raised and the ledger is as it
        was. The caller defers Ctrl-C around this and its own bookkeeping
        (``interrupts.InterruptSignals.deferred``), so a line on disk is always a row it knows about.
        """
        line = (finite_json(row, self.path, sort_keys=True, ensure_ascii=False) + "\n").encode()
        try:
            append_line(self.path, line)
        except OSError as error:
            raise RowNotWritten(row, error) from None
        self.rows.append(dict(row))


def read_ledger(path: Path) -> Iterator[dict[str, Any]]:
    """Stream the rows of a ledger; a torn or corrupt line is skipped with a warning."""
    if not path.exists():
        return
    for _, row in read_json_lines(path, json.loads, what="ledger line"):
        if isinstance(row, dict):
            yield row
