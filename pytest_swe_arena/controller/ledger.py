"""The ledger: one JSON row per finished cell, appended and fsynced.

Only the controller writes to the out dir. Rows are built from outcomes that
travelled on test reports as plain JSON; a row is appended only after the
cell's patch and logs are on disk, so every row's files exist. A row is
whole or absent: when the disk is full the ledger is cut back to where it was
and the caller learns which row was not written (``RowNotWritten``). Reading
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

from ..naming import CellName, predictions_name
from ..outcome import CellOutcome, patch_digest

SCHEMA_VERSION = 1
LEDGER_NAME = "ledger.jsonl"
T = TypeVar("T")


def write_atomic(path: Path, text: str | bytes | Iterable[str]) -> None:
    """Write ``text`` (bytes, a string or its pieces) to ``path`` via a temp file and ``os.replace``: never half a file.

    On failure (a full disk, say) the temp file is removed and the ``OSError`` names ``path``.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from None
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
    except BaseException as error:
        os.unlink(temp)
        if isinstance(error, OSError):
            raise OSError(error.errno, error.strerror, str(path)) from None
        raise


class RowNotWritten(Exception):
    """A cell's row (or one of its files) could not be written; the ledger is as it was before."""

    def __init__(self, row: Mapping[str, Any], error: OSError):
        super().__init__(f"{cell_label(row)}: {error}")
        self.row = dict(row)
        self.error = error


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



def cell_label(row: Mapping[str, Any]) -> str:
    """``iid[ARM]`` (``iid[ARM-r2]`` for a later trial): how a cell is named in messages."""
    trial = int(row.get("trial", 1) or 1)
    # A later trial is named as in a repeated sweep; trial 1 as in a single one.
    return CellName(str(row.get("instance_id")), str(row.get("arm")), trial).item_name(repeat=trial)


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
                write_atomic(self.out / run_dir / name, text)
            if patch_file is not None:
                write_atomic(self.out / patch_file, outcome.patch)
            elif outcome.patch:
                write_atomic(self.out / run_dir / "partial.patch", outcome.patch)
        except OSError as error:
            raise RowNotWritten(row, error) from None
        self.append(row)
        return row

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one line and fsync it: the line is whole or absent.

        It is written with one ``os.write`` (repeated only for what a short write left); when a
        write or the fsync fails (a full disk), the file is cut back to its size before, and
        ``RowNotWritten`` is raised. The caller defers Ctrl-C around this and its own
        bookkeeping (``guard.InterruptSignals.deferred``), so a line on disk is always a row it knows about.
        """
        line = (finite_json(row, self.path, sort_keys=True, ensure_ascii=False) + "\n").encode()
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as error:
            raise RowNotWritten(row, OSError(error.errno, error.strerror, str(self.path))) from None
        try:
            size = os.fstat(descriptor).st_size
            if size and os.pread(descriptor, 1, size - 1) != b"\n":
                line = b"\n" + line  # a torn line from a killed sweep stays alone on its line
            try:
                rest = memoryview(line)
                while rest:
                    rest = rest[os.write(descriptor, rest):]
                os.fsync(descriptor)
            except OSError as error:
                _cut_back(descriptor, size)
                raise RowNotWritten(row, OSError(error.errno, error.strerror, str(self.path))) from None
        finally:
            os.close(descriptor)
        self.rows.append(dict(row))


def _cut_back(descriptor: int, size: int) -> None:
    """Truncate a file to ``size`` after a failed append (best effort: a reader skips a torn line)."""
    try:
        os.ftruncate(descriptor, size)
        os.fsync(descriptor)
    except OSError:
        pass


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
    """SWE-bench predictions per file (one per arm, and per trial when repeated) from scored rows.

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
        name = predictions_name(arm, row.get("trial", 1))
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
                          f"written to {name} with U+FFFD for the bytes that are not, so it will "
                          f"not apply as it is; the exact patch is the file {row['patch_file']}", stacklevel=2)
        by_file.setdefault(name, []).append(
            {"instance_id": instance_id, "model_name_or_path": arm, "model_patch": patch}
        )
    return by_file


def write_predictions(rows: Iterable[Mapping[str, Any]], out: Path) -> list[Path]:
    written = []
    for name, entries in sorted(predictions(rows, out).items()):
        path = out / name
        entries.sort(key=lambda entry: entry["instance_id"])
        write_atomic(path, "".join(finite_json(entry, path, ensure_ascii=False) + "\n" for entry in entries))
        written.append(path)
    return written
