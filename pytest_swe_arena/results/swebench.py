"""SWE-bench's outputs for a sweep of replayed predictions: its run report and its per-instance log tree.

The shapes are SWE-bench 5's (``swebench/harness/reporting.py`` ``make_run_report``, ``grading.py``
``get_eval_report``, ``constants``): scripts, leaderboards and submission checks read them.

- The run report, ``<model>.<run_id>.json`` (``<model>`` is ``model_name_or_path`` with ``/`` as ``__``),
  ``schema_version`` 2: counts and sorted id lists. Which lists an instance goes into is its cell's
  status's ``swebench`` entry in ``outcome.STATUS_TABLE`` (the one place statuses are mapped); an
  instance without a prediction is ``incomplete``, one whose prediction is empty is ``empty_patch`` and
  never runs (SWE-bench's ``empty_patch_ids``).
- ``logs/run_evaluation/<run_id>/<model>/<instance_id>/``: ``patch.diff`` (the prediction as given),
  ``report.json`` (for a completed instance only: SWE-bench files an instance without one under
  ``error_ids``), ``test_output.txt`` (the grading run's log) and ``run_instance.log`` (what this harness
  did: the apply method, the status and its reason).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import crossing
from ..ledger.reader import CellRecord, UsageRecord
from ..outcome import CellStatus, known_status

#: Where SWE-bench puts its per-instance logs, relative to the directory it runs in.
RUN_EVALUATION_LOG_DIR = Path("logs/run_evaluation")
SCHEMA_VERSION = 2
#: The id lists of a run report, in SWE-bench's order; each has its count as ``<name>_instances``
#: (``submitted`` and ``incomplete`` aside, as SWE-bench writes them).
ID_LISTS = ("completed", "incomplete", "empty_patch", "submitted", "resolved", "unresolved", "infra_failure",
            "ambiguous_failure", "error")
COUNTED = ("completed", "resolved", "unresolved", "infra_failure", "ambiguous_failure", "empty_patch", "error")
#: The test lists of a ``report.json``'s ``tests_status``; SWE-bench leaves the ``_TO_FAIL`` ones empty
#: unless asked (``calculate_to_fail``), and so does this.
FAIL_TO_PASS, PASS_TO_PASS = "FAIL_TO_PASS", "PASS_TO_PASS"
TEST_LISTS = (FAIL_TO_PASS, PASS_TO_PASS, "FAIL_TO_FAIL", "PASS_TO_FAIL")
#: How much of the grading run's log goes into ``test_output.txt``.
TEST_OUTPUT_CAP = 64 * 1024 * 1024


def model_dir_name(model: str) -> str:
    """``model_name_or_path`` as SWE-bench names its folder and report file."""
    return model.replace("/", "__")


def is_empty(prediction: Mapping[str, Any]) -> bool:
    return prediction.get("model_patch") in ("", None)


@dataclass(frozen=True)
class Evaluation:
    """What one evaluation run covered: the dataset's ids (after ``--instance_ids``), the predictions by id,
    and the sweep's final row per instance (absent for an instance that did not run)."""

    run_id: str
    dataset_ids: list[str]
    predictions: Mapping[str, Mapping[str, Any]]
    rows: Mapping[str, Mapping[str, Any]]

    @property
    def model(self) -> str:
        """The first prediction's model, as SWE-bench names the report after it."""
        first = next(iter(self.predictions.values()), {})
        return str(first.get("model_name_or_path"))


def lists_of(evaluation: Evaluation, instance_id: str) -> tuple[str, ...]:
    """The run report's id lists ``instance_id`` goes into (``submitted`` aside)."""
    prediction = evaluation.predictions.get(instance_id)
    if prediction is None:
        return ("incomplete",)
    if is_empty(prediction):
        return ("empty_patch",)
    status = known_status(evaluation.rows.get(instance_id, {}).get("status"))
    # A prediction the sweep has no row for was not evaluated: SWE-bench files that (no report.json) as an error.
    return status.meaning.swebench if status is not None else ("error",)


def run_report(evaluation: Evaluation) -> dict[str, Any]:
    """SWE-bench's run report (``make_run_report``) for ``evaluation``, its keys in SWE-bench's order."""
    ids: dict[str, set[str]] = {name: set() for name in ID_LISTS}
    for instance_id in evaluation.dataset_ids:
        for name in lists_of(evaluation, instance_id):
            ids[name].add(instance_id)
    ids["submitted"] = set(evaluation.predictions)
    return {
        "total_instances": len(evaluation.dataset_ids),
        "submitted_instances": len(evaluation.predictions),
        **{f"{name}_instances": len(ids[name]) for name in COUNTED},
        **{f"{name}_ids": sorted(ids[name]) for name in ID_LISTS[:-1]},  # error_ids last, after failure_reasons
        "failure_reasons": {instance_id: _first_line(evaluation.rows[instance_id].get("error"))
                            for instance_id in sorted(ids["infra_failure"])},
        "error_ids": sorted(ids["error"]),
        "schema_version": SCHEMA_VERSION,
    }


def instance_report(instance_id: str, prediction: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    """``report.json`` of one completed instance, as SWE-bench's ``get_eval_report`` writes it.

    A grading run that timed out gave SWE-bench no test output to read ("not found": not applied, not
    resolved, no ``tests_status``). A row graded by its ``verify`` command has no per-test statuses: its
    ``tests_status`` lists are empty and ``resolved`` is the command's verdict.
    """
    report: dict[str, Any] = {"patch_is_None": prediction.get("model_patch") is None, "patch_exists": True,
                              "patch_successfully_applied": False, "resolved": False, "infra_failure": False}
    verify = row.get("verify") or {}
    if not verify or verify.get("timed_out"):
        return {instance_id: report}
    tests = verify.get("tests") or {}
    failing = set(tests.get("failing") or ())  # as the grading rules decided it, on the worker
    status_lists: dict[str, dict[str, list[str]]] = {name: {"success": [], "failure": []} for name in TEST_LISTS}
    for kind in (FAIL_TO_PASS, PASS_TO_PASS):
        for test_id in tests.get(kind) or {}:
            status_lists[kind]["failure" if test_id in failing else "success"].append(test_id)
    report |= {"patch_successfully_applied": True, "resolved": row.get("status") == "resolved",
               "tests_status": status_lists}
    return {instance_id: report}


def write_logs(evaluation: Evaluation, root: Path, out_dir: Path) -> Path:
    """Write ``logs/run_evaluation/<run_id>/<model>/<iid>/`` under ``root`` for every prediction evaluated."""
    model_dir = root / RUN_EVALUATION_LOG_DIR / evaluation.run_id / model_dir_name(evaluation.model)
    for instance_id in evaluation.dataset_ids:
        prediction = evaluation.predictions.get(instance_id)
        if prediction is None or is_empty(prediction):
            continue
        folder = model_dir / instance_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "patch.diff").write_text(str(prediction.get("model_patch") or ""), encoding="utf-8")
        row = evaluation.rows.get(instance_id)
        lists = lists_of(evaluation, instance_id)
        (folder / "run_instance.log").write_text(_instance_log(instance_id, row, lists), encoding="utf-8")
        (folder / "report.json").unlink(missing_ok=True)
        if row is None:
            continue
        (folder / "test_output.txt").write_bytes(_test_output(row, out_dir))
        if "completed" in lists:
            report = instance_report(instance_id, prediction, row)
            (folder / "report.json").write_text(json.dumps(report, indent=4), encoding="utf-8")
    return model_dir


def write_run_report(evaluation: Evaluation, report_dir: Path) -> Path:
    """``<report_dir>/<model>.<run_id>.json``, SWE-bench's run report."""
    report_dir.mkdir(parents=True, exist_ok=True)
    path = report_dir / f"{model_dir_name(evaluation.model)}.{evaluation.run_id}.json"
    path.write_text(json.dumps(run_report(evaluation), indent=4) + "\n", encoding="utf-8")
    return path


def _test_output(row: Mapping[str, Any], out_dir: Path) -> bytes:
    """The grading run's log as the out dir keeps it (``runs/<iid>/<ARM>/verify.log``), or nothing."""
    run_dir = row.get("run_dir")
    if not isinstance(run_dir, str):
        return b""
    try:
        return crossing.read_capped(out_dir, f"{run_dir}/verify.log", TEST_OUTPUT_CAP)[0]
    except OSError:
        return b""


def _instance_log(instance_id: str, row: Mapping[str, Any] | None, lists: tuple[str, ...]) -> str:
    if row is None:
        return f"{instance_id}: not evaluated (no ledger row): filed under {', '.join(lists)}\n"
    provenance = row.get("provenance") or {}
    lines = [f"instance: {instance_id}", f"status: {row.get('status')}", f"filed under: {', '.join(lists)}",
             f"apply method: {provenance.get('apply_method')}"]
    tests = (row.get("verify") or {}).get("tests")
    if row.get("verify"):
        lines.append(f"graded: test by test ({tests.get('report')}, rules {tests.get('rules', 'swebench')})" if tests
                     else "graded: by the row's verify command (no per-test statuses)")
    lines += [f"  {line}" for line in provenance.get("apply_fuzz") or []]
    for attempt in (row.get("details") or {}).get("apply_attempts") or []:
        lines.append(f"apply attempt {attempt.get('method')} failed:\n{attempt.get('output')}")
    if row.get("error"):
        lines.append(f"error: {row['error']}")
    lines.append(f"ledger run: {row.get('run_id')}  cell: {row.get('nodeid')}")
    return "\n".join(lines) + "\n"


def _first_line(text: object) -> str:
    return str(text or "").strip().splitlines()[0] if str(text or "").strip() else "unknown"


#: How ``swe-arena compare`` reads a SWE-bench run report's lists back as cells: in SWE-bench's rate every
#: submitted instance counts (an error, an empty patch), an instance that was not submitted does not.
REPORT_LISTS_AS_STATUS = (("resolved_ids", CellStatus.RESOLVED), ("unresolved_ids", CellStatus.UNRESOLVED),
                          ("empty_patch_ids", CellStatus.UNRESOLVED), ("error_ids", CellStatus.ARM_ERROR))


def read_run_report(path: Path) -> dict[str, Any] | None:
    """``path``'s SWE-bench run report, or None when ``path`` is not one (a sweep's out dir, say)."""
    if not path.is_file():
        return None
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a SWE-bench run report ({error})") from None
    if not isinstance(report, dict) or "resolved_ids" not in report or "schema_version" not in report:
        raise ValueError(f"{path}: not a SWE-bench run report (no 'resolved_ids' and 'schema_version'); "
                         "give a sweep's out dir or a <model>.<run_id>.json")
    return report


def report_cells(report: Mapping[str, Any], arm: str, run_id: str) -> list[CellRecord]:
    """A SWE-bench run report as one arm's cells, for ``swe-arena compare``."""
    cells = []
    for key, status in REPORT_LISTS_AS_STATUS:
        for instance_id in report.get(key) or ():
            error = "empty patch" if key == "empty_patch_ids" else None
            # A report says nothing of spend: unknown, never $0.
            cells.append(CellRecord(instance_id=str(instance_id), arm=arm, status=str(status), run_id=run_id,
                                    error=error, usage=UsageRecord(cost_source="unknown")))
    return cells
