"""Where a ledger row is built: one JSON row per finished cell, appended and fsynced (its files are not).

A row is written before the writer goes on (a killed controller loses none) and fsynced by the
ledger's ``files.GroupSync`` thread a moment later; ``LedgerWriter.flush`` waits for the disk
before the files made from the rows (predictions, summary, report) are written.

Only the controller writes to the out dir. Every row is built here: ``ledger_row`` for a
cell's outcome (finished on a worker, or made on the controller for a crashed worker or an
interrupted cell, see ``outcome``), ``reused_row`` for the row a resumed sweep records again.
A row is appended only after the cell's patch and logs are on disk, so every row's files
exist. A row is whole or absent: when the disk is full the ledger is cut back to where it was
and the caller learns which row was not written (``RowNotWritten``). Reading streams line by
line and skips a torn line (a kill -9 mid-write) with a warning (``reader.read_ledger``).

Every row is sealed into the ledger's chain (``chain``): the writer verifies the chain before its
first row and continues from its head; ``read_ledger`` refuses a ledger whose chain does not
verify (``ChainBroken`` names the first bad line), so an edited or inserted row is never trusted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..crossing import fits, shown
from ..files import GroupSync, append_line, finite_json, write_atomic
from ..naming import INSTANCE_CARD_NAME, LEDGER_NAME, PARTIAL_PATCH_NAME, SWEEPS_NAME, CellName
from ..outcome import CellOutcome, patch_digest
from .chain import seal, verify_ledger, without_seal
from .reader import row_of_line
from .row import SCHEMA_VERSION, LedgerRow


class RowNotWritten(Exception):
    """A cell's row (or one of its files) could not be written; the ledger is as it was before."""

    def __init__(self, row: Mapping[str, Any], error: OSError):
        super().__init__(f"{CellName.of_row(row).shown}: {error}")
        self.row = dict(row)
        self.error = error


def ledger_row(outcome: CellOutcome, run_id: str, patch_file: str | None, run_dir: str | None) -> dict[str, Any]:
    """The ledger's view of an outcome: everything but the patch and log contents, as a ``LedgerRow``.

    Built through the model, so an outcome field the row does not declare (or a declared one it lacks) is
    a ``TypeError`` here, not a row the schema and the docs do not know.
    """
    fields = outcome.to_json()
    for carried in ("patch_base64", "logs", "instance"):  # written as files, not in the row
        fields.pop(carried)
    lines, sha = patch_digest(outcome.patch)
    row = LedgerRow(**fields, schema_version=SCHEMA_VERSION, run_id=run_id, patch_lines=lines, patch_sha256=sha,
                    patch_file=patch_file, run_dir=run_dir)
    built: dict[str, Any] = msgspec.to_builtins(row)
    return built


def reused_row(earlier: Mapping[str, Any], run_id: str, nodeid: str) -> dict[str, Any]:
    """An earlier run's final row, recorded again by a resumed sweep that reuses it."""
    row = without_seal(earlier)  # sealed again, as a row of this run
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
        #: Where each row this writer appended starts in the ledger (``rows`` reads them back by it).
        self.offsets: list[int] = []
        #: The instances whose card (``runs/<iid>/instance.json``) this sweep has written.
        self.cards_written: set[str] = set()
        #: The chain's head the next row is sealed to; read (and the chain verified) before the first row.
        self.head: str | None = None
        #: fsyncs the rows off the controller's thread (``flush`` waits for it).
        self.sync = GroupSync(self.path)

    def record(self, outcome: CellOutcome) -> dict[str, Any]:
        """Write the cell's files, then append its row; return the row.

        Raises ``RowNotWritten`` (which carries the row) when a file or the row cannot be written.
        """
        cell = CellName(outcome.instance_id, outcome.arm, outcome.trial)
        run_dir = cell.run_dir(self.repeat)
        patch_file = cell.patch_file(self.repeat) if outcome.patch_scored else None
        row = ledger_row(outcome, self.run_id, patch_file, run_dir if outcome.logs or outcome.patch else None)
        skipped: list[dict[str, Any]] = []
        try:
            for name, text in outcome.logs.items():
                if not fits(self.out / run_dir, name):  # a long name under a long out dir: skipped, listed
                    skipped.append({"path": shown(name), "bytes": len(text), "kind": "long_name",
                                    "reason": "its path under the out dir would be too long: not written"})
                    continue
                write_atomic(self.out / run_dir / name, text, durable=False)
            if patch_file is not None:
                write_atomic(self.out / patch_file, outcome.patch, durable=False)
            elif outcome.patch:
                write_atomic(self.out / run_dir / PARTIAL_PATCH_NAME, outcome.patch, durable=False)
            if outcome.instance is not None and outcome.instance_id not in self.cards_written:
                card = finite_json(outcome.instance, INSTANCE_CARD_NAME, indent=1, sort_keys=True, ensure_ascii=False)
                write_atomic(self.out / "runs" / outcome.instance_id / INSTANCE_CARD_NAME, card + "\n",
                             durable=False)
                self.cards_written.add(outcome.instance_id)
        except OSError as error:
            raise RowNotWritten(row, error) from None
        if skipped:
            details: dict[str, Any] = row["details"] if isinstance(row.get("details"), dict) else {}
            row["details"] = {**details, "run_dir_cut": [*details.get("run_dir_cut", []), *skipped]}
        self.append(row)
        return row

    def record_reused(self, earlier: Mapping[str, Any], nodeid: str) -> dict[str, Any]:
        """Append the row of a cell this sweep reuses from an earlier run; return it."""
        row = reused_row(earlier, self.run_id, nodeid)
        self.append(row)
        return row

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one row, fsynced by ``self.sync``: the line is whole or absent (``files.append_line``).

        When the write fails (a full disk) ``RowNotWritten`` is raised and the ledger is as it
        was. The caller defers Ctrl-C around this and its own bookkeeping
        (``interrupts.InterruptSignals.deferred``), so a line on disk is always a row it knows about.
        """
        try:
            head = self.head if self.head is not None else verify_ledger(self.path).head
            sealed, new_head = seal(finite_json(row, self.path, sort_keys=True, ensure_ascii=False), head)
            offset = append_line(self.path, (sealed + "\n").encode(), self.sync)
        except OSError as error:
            raise RowNotWritten(row, error) from None
        self.head = new_head
        self.offsets.append(offset)

    def flush(self) -> None:
        """Wait until every row appended so far is on disk; an ``OSError`` says an fsync failed."""
        self.sync.flush()

    def lines(self) -> Iterator[bytes]:
        """The ledger lines of the rows this writer appended, read back one at a time."""
        if not self.offsets:
            return
        with open(self.path, "rb") as ledger:
            for offset in self.offsets:
                ledger.seek(offset)
                yield ledger.readline()

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """The rows this writer appended, read back from the ledger (without their chain hash).

        Not kept in memory: at 10,000 cells they would be a third of the controller's.
        """
        for line in self.lines():
            yield row_of_line(line)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """``iter_rows`` as a list."""
        return list(self.iter_rows())


def append_sweep_record(out: Path, record: Mapping[str, Any]) -> None:
    """Append one sweep's line to ``sweeps.jsonl`` (whole or absent, fsynced: ``files.append_line``)."""
    path = out / SWEEPS_NAME
    append_line(path, (finite_json(record, path, sort_keys=True, ensure_ascii=False) + "\n").encode())
