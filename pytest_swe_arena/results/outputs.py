"""The out dir's summary files: ``summary.json``, ``report.html`` and SWE-bench predictions.

Written by the controller at the end of a sweep, and again by ``swe-arena report`` and
``swe-arena export`` from the ledger, with the same functions, so both write the same files.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import crossing
from ..files import finite_json, read_json_object, write_atomic
from ..ledger.reader import CellRecord, read_sweep_record
from ..naming import BUDGET_NAME, LEDGER_NAME, REPORT_NAME, SUMMARY_NAME, CellName, predictions_name
from ..transcripts.atif import ATIF_FILE
from .html import render_report
from .summary import summarize

if TYPE_CHECKING:
    from .viewer.build import Manifest


def write_reports(out: Path, cells: Sequence[CellRecord], arm_order: Sequence[str] = (),
                  run_id: str | None = None, budget: Mapping[str, Any] | None = None,
                  sweep: Mapping[str, Any] | None = None, built: Manifest | None = None
                  ) -> tuple[dict[str, Any], list[Path]]:
    """Write ``summary.json``, ``report.html`` and the viewer (each file atomically); return the summary and paths.

    ``sweep`` is the run's line of ``sweeps.jsonl``, read from the out dir when not given; ``built``
    the viewer's pages the sweep built while it ran (``viewer.build.PagesWhileRunning``).
    """
    from .viewer import write_viewer

    summary, written = write_summary_and_report(out, cells, arm_order, run_id, budget, sweep)
    return summary, [*written, write_viewer(out, summary, built=built)]


def write_summary_and_report(out: Path, cells: Sequence[CellRecord], arm_order: Sequence[str] = (),
                             run_id: str | None = None, budget: Mapping[str, Any] | None = None,
                             sweep: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], list[Path]]:
    """``write_reports`` without the viewer: ``summary.json`` and ``report.html``, from ``cells``.

    The viewer reads rows of its own (``viewer.write_viewer``): a caller that need not keep the cells
    (the end of a sweep) frees them before it writes the viewer.
    """
    summary = summarize(cells, arm_order, run_id, budget, sweep or read_sweep_record(out, run_id))
    summary_path, report_path = out / SUMMARY_NAME, out / REPORT_NAME
    write_atomic(summary_path, finite_json(summary, summary_path, indent=2, sort_keys=True) + "\n")
    write_atomic(report_path, render_report(summary, cells))
    return summary, [summary_path, report_path]


def _of_run(path: Path, run_id: str | None) -> dict[str, Any] | None:
    """The JSON object in ``path`` when it was written for ``run_id``."""
    data = read_json_object(path)
    return data if data is not None and data.get("run_id") == run_id else None


def recorded_budget(out: Path, run_id: str | None) -> dict[str, Any] | None:
    """The ``budget.json`` the controller wrote for ``run_id`` (None without caps or for another run)."""
    return _of_run(out / BUDGET_NAME, run_id)


def previous_arm_order(out: Path, run_id: str | None) -> list[str]:
    """The arm order a run's own ``summary.json`` recorded (the sweep's ``--arena-arms``), if any."""
    order = (_of_run(out / SUMMARY_NAME, run_id) or {}).get("arm_order")
    return [str(name) for name in order] if isinstance(order, list) else []


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
        cell = CellName.of_row(row)
        # The sweep repeated its cells when its patch files carry the trial (``CellName.patch_file``).
        name = predictions_name(arm, cell.trial, repeated=row["patch_file"] == cell.patch_file(repeat=2))
        try:
            data = (out / row["patch_file"]).read_bytes()
        except OSError as error:
            warnings.warn(f"{out / LEDGER_NAME}: skipping {CellName.of_row(row).shown}: cannot read its patch "
                          f"{row['patch_file']}: {error.strerror or error}", stacklevel=2)
            continue
        try:
            patch = data.decode("utf-8")
        except UnicodeDecodeError:
            patch = data.decode("utf-8", errors="replace")
            warnings.warn(f"{out / LEDGER_NAME}: {cell.shown}: its patch {row['patch_file']} is not UTF-8: "
                          f"written to {name} with U+FFFD for the bytes that are not, so it will "
                          f"not apply as it is; the exact patch is the file {row['patch_file']}", stacklevel=2)
        by_file.setdefault(name, []).append(
            {"instance_id": instance_id, "model_name_or_path": arm, "model_patch": patch}
        )
    return by_file


def write_predictions(rows: Iterable[Mapping[str, Any]], out: Path) -> list[Path]:
    """Write ``predictions/<ARM>.jsonl`` (``<ARM>.r1.jsonl``, ``.r2``... when repeated) atomically; return them."""
    written = []
    for name, entries in sorted(predictions(rows, out).items()):
        path = out / name
        entries.sort(key=lambda entry: entry["instance_id"])
        write_atomic(path, "".join(finite_json(entry, path, ensure_ascii=False) + "\n" for entry in entries))
        written.append(path)
    return written


#: The most bytes of one cell's ATIF file an export copies (the run dir is the cell's: a file is never trusted).
EXPORT_ATIF_CAP = 256 << 20


def write_export(rows: Sequence[Mapping[str, Any]], out: Path, to: Path) -> list[Path]:
    """Write the export bundle into ``to``; return what was written, in order.

    ``predictions.jsonl``: SWE-bench predictions of every graded cell (``model_name_or_path`` is the arm,
    ``ARM.r2`` for a later trial of a repeated sweep); ``ledger.jsonl``: ``rows`` as they are, one a line;
    ``trajectories/<instance>/<ARM>/<trial>.atif.json``: each cell's ATIF trajectory, copied from its run
    dir through the crossing (a link or a special file there is skipped with a warning, never followed).
    ``rows`` have been checked to name no path outside the out dir (``ledger.chain.checked_names``).
    """
    entries = [{**entry, "model_name_or_path": Path(name).stem}
               for name, per_file in sorted(predictions(rows, out).items()) for entry in per_file]
    entries.sort(key=lambda entry: (entry["model_name_or_path"], entry["instance_id"]))
    written = [to / "predictions.jsonl", to / "ledger.jsonl"]
    write_atomic(written[0], "".join(finite_json(entry, written[0], ensure_ascii=False) + "\n" for entry in entries))
    write_atomic(written[1], "".join(finite_json(dict(row), written[1], ensure_ascii=False) + "\n" for row in rows))
    for row in rows:
        details = row.get("details")
        if not isinstance(details, Mapping) or details.get("atif") != ATIF_FILE or not row.get("run_dir"):
            continue
        cell = CellName.of_row(row)
        name = f"trajectories/{cell.instance_id}/{cell.arm}/{cell.trial}.atif.json"
        try:
            crossing.copy(out, f"{row['run_dir']}/{ATIF_FILE}", to, name, cap=EXPORT_ATIF_CAP)
        except OSError as error:  # absent, or refused: a link or a special file where the cell's ATIF file was
            warnings.warn(f"{out / LEDGER_NAME}: {cell.shown}: its ATIF file is not exported: "
                          f"{crossing.shown(str(error))}", stacklevel=2)
            continue
        written.append(to / name)
    return written


def remove_other_predictions(out: Path, kept: Iterable[Path]) -> list[Path]:
    """Remove the ``predictions/*.jsonl`` files not in ``kept`` (an earlier sweep's other arms); return them.

    Left beside this sweep's, they read as its results. The ledger keeps their rows, under their run ids.
    """
    keep = {path.resolve() for path in kept}
    stale = sorted(path for path in (out / "predictions").glob("*.jsonl") if path.resolve() not in keep)
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
