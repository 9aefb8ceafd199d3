"""The ledger: one JSON row per finished cell, appended and fsynced.

Only the controller writes to the out dir. Rows are built from outcomes that
travelled on test reports as plain JSON; a row is appended only after the
cell's patch and logs are on disk, so every row's files exist. Reading
streams line by line and skips a torn last line (a kill -9 mid-write) with a
warning.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .outcome import CellOutcome, patch_digest

SCHEMA_VERSION = 1
LEDGER_NAME = "ledger.jsonl"
#: Per instance, in runs/<iid>/: the task as the cells saw it (``Instance.card``).
INSTANCE_CARD = "instance.json"
#: One line per sweep on the out dir: its run id, command line, project commit, host and versions.
SWEEPS_NAME = "sweeps.jsonl"
T = TypeVar("T")


def write_atomic(path: Path, text: str | Iterable[str]) -> None:
    """Write ``text`` (a string or its pieces) to ``path`` via a temp file and ``os.replace``: never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            if isinstance(text, str):
                out.write(text)
            else:
                out.writelines(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def patch_file_name(instance_id: str, arm: str, trial: int, repeat: int) -> str:
    suffix = f".r{trial}" if repeat > 1 else ""
    return f"{instance_id}.{arm.lower()}{suffix}.patch"


def scored_patch_file(instance_id: str, arm: str, trial: int, repeat: int) -> str:
    """Where a graded patch is written, relative to the out dir (the row's ``patch_file``)."""
    return "patches/" + patch_file_name(instance_id, arm, trial, repeat)


def run_dir_name(instance_id: str, arm: str, trial: int, repeat: int) -> str:
    return f"runs/{instance_id}/{arm}" + (f"/r{trial}" if repeat > 1 else "")


class LedgerWriter:
    """Appends rows to ``<out>/ledger.jsonl`` and writes each cell's patch and logs."""

    def __init__(self, out: Path, run_id: str, repeat: int):
        self.out = out
        self.run_id = run_id
        self.repeat = repeat
        self.path = out / LEDGER_NAME
        self.rows: list[dict[str, Any]] = []
        self.cards_written: set[str] = set()

    def record(self, outcome: CellOutcome) -> dict[str, Any]:
        """Write the cell's files, then append its row; return the row."""
        self.out.mkdir(parents=True, exist_ok=True)
        run_dir = run_dir_name(outcome.instance_id, outcome.arm, outcome.trial, self.repeat)
        for name, text in outcome.logs.items():
            write_atomic(self.out / run_dir / name, text)
        patch_file = None
        if outcome.patch_scored:
            patch_file = scored_patch_file(outcome.instance_id, outcome.arm, outcome.trial, self.repeat)
            write_atomic(self.out / patch_file, outcome.patch)
        elif outcome.patch:
            write_atomic(self.out / run_dir / "partial.patch", outcome.patch)
        if outcome.instance is not None and outcome.instance_id not in self.cards_written:
            card = json.dumps(outcome.instance, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
            write_atomic(self.out / "runs" / outcome.instance_id / INSTANCE_CARD, card)
            self.cards_written.add(outcome.instance_id)
        row = ledger_row(outcome, self.run_id, patch_file, run_dir if outcome.logs or outcome.patch else None)
        self.append(row)
        return row

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one line and fsync it.

        The caller defers Ctrl-C around this and its own bookkeeping
        (``guard.InterruptSignals.deferred``), so a line on disk is always a row it knows about.
        """
        line = (json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n").encode()
        with open(self.path, "ab") as ledger:
            if ledger.tell() > 0 and not self._ends_with_newline():
                line = b"\n" + line  # a torn line from a killed sweep stays alone on its line
            ledger.write(line)
            ledger.flush()
            os.fsync(ledger.fileno())
        self.rows.append(dict(row))

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as ledger:
            ledger.seek(-1, os.SEEK_END)
            return ledger.read(1) == b"\n"


def ledger_row(outcome: CellOutcome, run_id: str, patch_file: str | None, run_dir: str | None) -> dict[str, Any]:
    """The ledger's view of an outcome: everything but the patch text and log contents."""
    row = outcome.to_json()
    patch = row.pop("patch")
    row.pop("logs")
    row.pop("instance")
    lines, sha = patch_digest(patch)
    row.update(
        schema_version=SCHEMA_VERSION,
        run_id=run_id,
        patch_lines=lines,
        patch_sha256=sha,
        patch_file=patch_file,
        run_dir=run_dir,
    )
    return row


def append_sweep_record(out: Path, record: Mapping[str, Any]) -> None:
    """Append one sweep's record (see ``SWEEPS_NAME``) to the out dir, fsynced."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / SWEEPS_NAME, "ab") as sweeps:
        sweeps.write((json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n").encode())
        sweeps.flush()
        os.fsync(sweeps.fileno())


def read_sweep_record(out: Path, run_id: str | None) -> dict[str, Any] | None:
    """The record of the sweep that wrote run ``run_id`` (None for an out dir from before the file, or a torn line)."""
    found = None
    for row in read_ledger(out / SWEEPS_NAME):
        if row.get("run_id") == run_id:
            found = row
    return found


def read_ledger(path: Path) -> Iterator[dict[str, Any]]:
    """Stream the rows of a ledger; a torn or corrupt line is skipped with a warning."""
    if not path.exists():
        return
    with open(path, encoding="utf-8", errors="replace") as ledger:
        for number, line in enumerate(ledger, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                warnings.warn(f"{path}:{number}: skipping a torn or corrupt ledger line", stacklevel=2)
                continue
            if isinstance(row, dict):
                yield row


def latest_run(items: Iterable[T], run_id: Callable[[T], object]) -> list[T]:
    """The items of the last run in a ledger (a resumed run re-records what it reused), streaming."""
    current: list[T] = []
    latest: object = None
    for item in items:
        if run_id(item) != latest:
            latest, current = run_id(item), []
        current.append(item)
    return current


def latest_run_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows of the last run in a ledger."""
    return [dict(row) for row in latest_run(rows, lambda row: row.get("run_id"))]


def predictions(rows: Iterable[Mapping[str, Any]], out: Path) -> dict[str, list[dict[str, str]]]:
    """SWE-bench predictions per arm (and per trial when repeated) from scored rows.

    A row without an arm or instance id, or whose patch file is missing, is skipped with a warning naming it.
    """
    by_file: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        if not row.get("patch_file"):
            continue
        arm, instance_id = row.get("arm"), row.get("instance_id")
        if not isinstance(arm, str) or not isinstance(instance_id, str):
            warnings.warn(f"{out / LEDGER_NAME}: skipping a row without 'arm' or 'instance_id' "
                          f"(patch_file {row['patch_file']!r})", stacklevel=2)
            continue
        trial = row.get("trial", 1)
        name = arm if trial == 1 else f"{arm}.r{trial}"
        try:
            patch = (out / row["patch_file"]).read_text(encoding="utf-8")
        except OSError as error:
            warnings.warn(f"{out / LEDGER_NAME}: skipping {instance_id}[{arm}]: cannot read its patch "
                          f"{row['patch_file']}: {error.strerror or error}", stacklevel=2)
            continue
        by_file.setdefault(name, []).append(
            {"instance_id": instance_id, "model_name_or_path": arm, "model_patch": patch}
        )
    return by_file


def write_predictions(rows: Iterable[Mapping[str, Any]], out: Path) -> list[Path]:
    written = []
    for name, entries in sorted(predictions(rows, out).items()):
        path = out / "predictions" / f"{name}.jsonl"
        entries.sort(key=lambda entry: entry["instance_id"])
        write_atomic(path, "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries))
        written.append(path)
    return written
