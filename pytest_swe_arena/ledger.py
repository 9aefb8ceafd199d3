"""The ledger: one JSON row per finished cell, appended and fsynced.

Only the controller writes to the out dir. Rows are built from outcomes that
travelled on test reports as plain JSON; a row is appended only after the
cell's patch and logs are on disk, so every row's files exist. Reading
streams line by line and skips a torn last line (a kill -9 mid-write) with a
warning.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .outcome import CellOutcome, patch_digest

SCHEMA_VERSION = 1
LEDGER_NAME = "ledger.jsonl"
T = TypeVar("T")


def write_atomic(path: Path, text: str | bytes | Iterable[str]) -> None:
    """Write ``text`` (bytes, a string or its pieces) to ``path`` via a temp file and ``os.replace``: never half one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        binary = isinstance(text, bytes)
        with os.fdopen(handle, "wb" if binary else "w", encoding=None if binary else "utf-8") as out:
            if isinstance(text, (str, bytes)):
                out.write(text)
            else:
                out.writelines(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def finite_json(value: Any, where: str | Path, **options: Any) -> str:
    """``json.dumps(value, allow_nan=False, **options)``: what every JSON file of the package is written with.

    JSON has no NaN or infinity (Python's ``json`` would write the non-standard
    ``NaN``); such a number is written as null, with a warning naming ``where``
    and the field, rather than lose the whole write.
    """
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        found: list[str] = []
        cleaned = _finite(value, "", found)
        if not found:
            raise  # not a number's fault (a circular reference)
    warnings.warn(f"{where}: {', '.join(found)}: not a finite number, written as null", stacklevel=2)
    return json.dumps(cleaned, allow_nan=False, **options)


def _finite(value: Any, path: str, found: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        found.append(f"{path or 'value'} = {value!r}")
        return None
    if isinstance(value, Mapping):
        return {key: _finite(item, f"{path}.{key}" if path else str(key), found) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item, f"{path}[{index}]", found) for index, item in enumerate(value)]
    return value


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
        row = ledger_row(outcome, self.run_id, patch_file, run_dir if outcome.logs or outcome.patch else None)
        self.append(row)
        return row

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one line and fsync it.

        The caller defers Ctrl-C around this and its own bookkeeping
        (``guard.InterruptSignals.deferred``), so a line on disk is always a row it knows about.
        """
        line = (finite_json(row, self.path, sort_keys=True, ensure_ascii=False) + "\n").encode()
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
    ``model_patch`` is text (SWE-bench's format): a patch that is not UTF-8 (a fix in a Latin-1 file) is
    decoded with U+FFFD for the bytes that are not, with a warning naming the cell; it will not apply as
    it is, and its exact bytes stay in ``patches/``.
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
            data = (out / row["patch_file"]).read_bytes()
        except OSError as error:
            warnings.warn(f"{out / LEDGER_NAME}: skipping {instance_id}[{arm}]: cannot read its patch "
                          f"{row['patch_file']}: {error.strerror or error}", stacklevel=2)
            continue
        try:
            patch = data.decode("utf-8")
        except UnicodeDecodeError:
            patch = data.decode("utf-8", errors="replace")
            warnings.warn(f"{out / LEDGER_NAME}: {instance_id}[{arm}]: its patch {row['patch_file']} is not UTF-8: "
                          f"written to predictions/{name}.jsonl with U+FFFD for the bytes that are not, so it will "
                          f"not apply as it is; the exact patch is the file {row['patch_file']}", stacklevel=2)
        by_file.setdefault(name, []).append(
            {"instance_id": instance_id, "model_name_or_path": arm, "model_patch": patch}
        )
    return by_file


def write_predictions(rows: Iterable[Mapping[str, Any]], out: Path) -> list[Path]:
    written = []
    for name, entries in sorted(predictions(rows, out).items()):
        path = out / "predictions" / f"{name}.jsonl"
        entries.sort(key=lambda entry: entry["instance_id"])
        write_atomic(path, "".join(finite_json(entry, path, ensure_ascii=False) + "\n" for entry in entries))
        written.append(path)
    return written
