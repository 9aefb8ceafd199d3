"""Calibration: is an instance gradeable? Verify must fail on the untouched base and pass with the gold patch.

``--arena-calibrate`` runs the GOLD and EMPTY arms (EMPTY's verify *is* the
verify on the untouched base) and the controller turns their rows into one
verdict per instance in ``calibration.json``; ``--arena-calibrated-only``
reads that file and deselects the instances that failed.

With ``--arena-repeat N`` each instance's GOLD and EMPTY run N times and its
verdict carries their flake rates (gold resolved k/N, empty resolved k/N): an
instance is ``flaky`` when either arm's trials disagree, ``broken`` when they
agree on the wrong answer. Both are written, one id a line with the reason, to
``calibration-exclude.txt``, which ``--arena-exclude FILE`` reads in a later
sweep, so every later rate is over a declared, stable subset.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from ..files import finite_json, timestamp, write_atomic
from ..naming import CALIBRATION_NAME, EMPTY, GOLD, INSTANCE_ID
from ..outcome import COUNTED_STATUSES, CellStatus, counts_as_pass

#: What to do about a calibration file that cannot be used.
REWRITE = "run the sweep with --arena-calibrate to write it again (or delete it)"


def verdicts(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """One verdict per instance that has both a GOLD and an EMPTY row among ``rows``.

    An instance whose GOLD or EMPTY cell did not finish (harness error, interrupted, skipped)
    is ``inconclusive``: neither ok nor failed, and it does not replace an earlier verdict.
    """
    by_instance: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for row in rows:
        if row["arm"] in (GOLD, EMPTY):
            by_instance.setdefault(row["instance_id"], {}).setdefault(row["arm"], []).append(row)
    return {iid: _verdict(arms[GOLD], arms[EMPTY]) for iid, arms in sorted(by_instance.items())
            if GOLD in arms and EMPTY in arms}


def _verdict(gold_rows: list[Mapping[str, Any]], base_rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    verdict = _checks(gold_rows, base_rows)
    gold = [row["status"] == CellStatus.RESOLVED for row in gold_rows if row["status"] in COUNTED_STATUSES]
    empty = [row["status"] == CellStatus.RESOLVED for row in base_rows if row["status"] in COUNTED_STATUSES]
    verdict["gold_resolved"] = [sum(gold), len(gold)]
    verdict["empty_resolved"] = [sum(empty), len(empty)]
    verdict["stability"] = stability(verdict)
    return verdict


def stability(verdict: Mapping[str, Any]) -> str:
    """``stable`` (gold always resolves, empty never), ``flaky`` (either arm's trials disagree), ``broken``
    (they agree on the wrong answer), or ``inconclusive`` (a cell did not finish)."""
    if verdict.get("inconclusive"):
        return "inconclusive"
    (gold, gold_runs), (empty, empty_runs) = verdict["gold_resolved"], verdict["empty_resolved"]
    if 0 < gold < gold_runs or 0 < empty < empty_runs:
        return "flaky"
    return "stable" if verdict["ok"] else "broken"


def _checks(gold_rows: list[Mapping[str, Any]], base_rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    # A status not counted in the rate says nothing about the instance: the harness failed or the sweep stopped.
    unfinished = [row for row in [*gold_rows, *base_rows] if row["status"] not in COUNTED_STATUSES]
    if unfinished:
        return {
            "ok": None,
            "inconclusive": True,
            "problems": [f"{row['arm']} did not finish ({row['status']}: {row.get('error')})" for row in unfinished],
            "gold": [_summary(row) for row in gold_rows],
            "base": [_summary(row) for row in base_rows],
        }
    problems: list[str] = []
    for row in gold_rows:
        if row["status"] != CellStatus.RESOLVED:
            problems.append(f"gold patch does not resolve ({row['status']}: {row.get('error')})")
    for row in base_rows:
        verify = row.get("verify")
        if verify is None:
            problems.append(f"verify did not run on the untouched base ({row['status']}: {row.get('error')})")
            continue
        if verify["passed"]:
            problems.append("verify passes on the untouched base")
        tests = verify.get("tests") or {}
        for test_id, status in (tests.get("FAIL_TO_PASS") or {}).items():
            if counts_as_pass(status):
                problems.append(f"FAIL_TO_PASS test {test_id} already passes on the untouched base")
    return {
        "ok": not problems,
        "problems": problems,
        "gold": [_summary(row) for row in gold_rows],
        "base": [_summary(row) for row in base_rows],
    }


def all_calibrated(found: Mapping[str, Mapping[str, Any]], rows: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a calibration sweep went as it should: every instance calibrated, and nothing failed but EMPTY.

    EMPTY unresolved is what calibration expects, so ``--arena-calibrate`` exits 0 then; any other
    cell that did not resolve (another arm's, a harness error) keeps pytest's exit status.
    """
    rows = list(rows)
    instances = {row["instance_id"] for row in rows}
    if not instances or set(found) != instances or not all(verdict.get("ok") is True for verdict in found.values()):
        return False
    allowed = {CellStatus.RESOLVED, CellStatus.SKIPPED_BUDGET}
    return all(row["status"] in allowed or (row["arm"] == EMPTY and row["status"] == CellStatus.UNRESOLVED)
               for row in rows)


def _summary(row: Mapping[str, Any]) -> dict[str, Any]:
    verify = row.get("verify") or {}
    return {"status": row["status"], "verify_passed": verify.get("passed"), "tests": verify.get("tests"),
            "run_id": row.get("run_id")}


def write_calibration(out: Path, new: Mapping[str, Mapping[str, Any]], run_id: str) -> tuple[Path, str | None]:
    """Merge ``new`` verdicts into ``<out>/calibration.json``; return its path and a warning, if any.

    Later runs replace earlier verdicts, except that an inconclusive one never replaces a verdict.
    An unreadable file (corrupt, or not a calibration) is replaced, with the warning saying so.
    """
    path = out / CALIBRATION_NAME
    problem = None
    instances: dict[str, Any] = {}
    if path.exists():
        try:
            earlier = _read(path).get("instances", {})
            if not isinstance(earlier, dict):
                raise pytest.UsageError(f"{path}: 'instances' is not a JSON object")
            instances = {iid: verdict for iid, verdict in earlier.items() if isinstance(verdict, dict)}
        except pytest.UsageError as error:
            problem = f"{error}; replaced by this run's verdicts (earlier verdicts are lost)"
    for iid, verdict in new.items():
        if verdict.get("inconclusive") and iid in instances and not instances[iid].get("inconclusive"):
            continue
        instances[iid] = verdict
    data = {
        "run_id": run_id,
        "updated_at": timestamp(),
        "instances": dict(sorted(instances.items())),
        "failed": sorted(iid for iid, verdict in instances.items() if verdict.get("ok") is False),
        "flaky": sorted(iid for iid, verdict in instances.items() if verdict.get("stability") == "flaky"),
        "broken": sorted(iid for iid, verdict in instances.items() if verdict.get("stability") == "broken"),
    }
    write_atomic(path, finite_json(data, path, indent=2, sort_keys=True) + "\n")
    write_atomic(out / EXCLUDE_NAME, exclude_text(instances))
    return path, problem


#: The deselection file a calibration writes beside ``calibration.json``, for ``--arena-exclude``.
EXCLUDE_NAME = "calibration-exclude.txt"


def exclude_text(instances: Mapping[str, Mapping[str, Any]]) -> str:
    """The deselection file: a header, then one flaky or broken instance id a line, its rates as a comment."""
    lines = ["# instances that failed calibration (flaky or broken); read by --arena-exclude FILE",
             "# instance_id  # stability: gold resolved k/N, empty resolved k/N"]
    for iid, verdict in sorted(instances.items()):
        kind = verdict.get("stability") or ("broken" if verdict.get("ok") is False else None)
        if kind in ("flaky", "broken"):
            gold, empty = verdict.get("gold_resolved") or ["?", "?"], verdict.get("empty_resolved") or ["?", "?"]
            lines.append(f"{iid}  # {kind}: gold {gold[0]}/{gold[1]}, empty {empty[0]}/{empty[1]}")
    return "\n".join(lines) + "\n"


def read_exclude(path: Path, source: str) -> tuple[list[str], str]:
    """The instance ids a deselection file lists, and its sha256; a usage error naming the file and line.

    One id a line; ``#`` starts a comment; blank lines are skipped (the format ``exclude_text`` writes).
    """
    try:
        data = path.read_bytes()
    except OSError as error:
        raise pytest.UsageError(f"{source}: cannot read {path}: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise pytest.UsageError(f"{source}: {path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    ids: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        if not INSTANCE_ID.match(entry):
            raise pytest.UsageError(f"{source}: {path}:{number}: {entry[:80]!r} is not an instance id; expected one "
                                    "id a line (letters, digits, '.', '_', '-'), '#' for comments")
        ids.append(entry)
    return sorted(set(ids)), hashlib.sha256(data).hexdigest()


def failed_instances(out: Path) -> list[str]:
    """Ids that failed calibration, for ``--arena-calibrated-only``; a usage error without a calibration."""
    path = out / CALIBRATION_NAME
    if not path.is_file():
        raise pytest.UsageError(
            f"--arena-calibrated-only: {path} does not exist; run the sweep with --arena-calibrate first"
        )
    try:
        failed = _read(path).get("failed", [])
    except pytest.UsageError as error:
        raise pytest.UsageError(f"{error}; {REWRITE}") from None
    if not isinstance(failed, list) or not all(isinstance(iid, str) for iid in failed):
        raise pytest.UsageError(f"{path}: 'failed' must be a list of instance ids, not {json.dumps(failed)[:80]}; "
                                f"{REWRITE}")
    return failed



def flake_rates(out: Path, instance_ids: Iterable[str]) -> dict[str, Any] | None:
    """The calibration's verdicts on ``instance_ids`` (``calibration.json``, as ``write_calibration`` wrote it),
    for the viewer: each instance's stability and gold / empty resolved k/N, the flaky and broken ones listed.

    None when the out dir has no readable calibration, or it holds none of these instances.
    """
    try:
        found = _read(out / CALIBRATION_NAME).get("instances")
    except pytest.UsageError:
        return None
    if not isinstance(found, dict):
        return None
    rates = {iid: {key: verdict.get(key) for key in ("stability", "ok", "gold_resolved", "empty_resolved")}
             for iid in sorted(set(instance_ids)) if isinstance(verdict := found.get(iid), dict)}
    if not rates:
        return None
    return {"instances": rates,
            "flaky": [iid for iid, verdict in rates.items() if verdict["stability"] == "flaky"],
            "broken": [iid for iid, verdict in rates.items() if verdict["stability"] == "broken"]}


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as error:
        raise pytest.UsageError(f"{path}: cannot read calibration: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise pytest.UsageError(f"{path}: cannot read calibration: not UTF-8 text ({error.reason} at byte "
                                f"{error.start})") from None
    except json.JSONDecodeError as error:
        raise pytest.UsageError(f"{path}: cannot read calibration: {error}") from None
    if not isinstance(data, dict):
        raise pytest.UsageError(f"{path}: expected a JSON object with 'instances' and 'failed'")
    return data
