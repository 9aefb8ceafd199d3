"""Calibration: is an instance gradeable? Verify must fail on the untouched base and pass with the gold patch.

``--arena-calibrate`` runs the GOLD and EMPTY arms (EMPTY's verify *is* the
verify on the untouched base) and the controller turns their rows into one
verdict per instance in ``calibration.json``; ``--arena-calibrated-only``
reads that file and deselects the instances that failed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from .grading import PASSING
from .ledger import write_atomic

CALIBRATION_NAME = "calibration.json"
GOLD, BASE = "GOLD", "EMPTY"


def verdicts(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """One verdict per instance that has both a GOLD and an EMPTY row among ``rows``."""
    by_instance: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for row in rows:
        if row["arm"] in (GOLD, BASE):
            by_instance.setdefault(row["instance_id"], {}).setdefault(row["arm"], []).append(row)
    return {iid: _verdict(arms[GOLD], arms[BASE]) for iid, arms in sorted(by_instance.items())
            if GOLD in arms and BASE in arms}


def _verdict(gold_rows: list[Mapping[str, Any]], base_rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    problems: list[str] = []
    for row in gold_rows:
        if row["status"] != "resolved":
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
            if status in PASSING:
                problems.append(f"FAIL_TO_PASS test {test_id} already passes on the untouched base")
    return {
        "ok": not problems,
        "problems": problems,
        "gold": [_summary(row) for row in gold_rows],
        "base": [_summary(row) for row in base_rows],
    }


def _summary(row: Mapping[str, Any]) -> dict[str, Any]:
    verify = row.get("verify") or {}
    return {"status": row["status"], "verify_passed": verify.get("passed"), "tests": verify.get("tests"),
            "run_id": row.get("run_id")}


def write_calibration(out: Path, new: Mapping[str, Mapping[str, Any]], run_id: str) -> Path:
    """Merge ``new`` verdicts into ``<out>/calibration.json`` (later runs replace earlier verdicts)."""
    path = out / CALIBRATION_NAME
    instances = dict(_read(path).get("instances", {})) if path.exists() else {}
    instances.update(new)
    data = {
        "run_id": run_id,
        "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "instances": dict(sorted(instances.items())),
        "failed": sorted(iid for iid, verdict in instances.items() if not verdict["ok"]),
    }
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def failed_instances(out: Path) -> list[str]:
    """Ids that failed calibration, for ``--arena-calibrated-only``; a usage error without a calibration."""
    path = out / CALIBRATION_NAME
    if not path.is_file():
        raise pytest.UsageError(
            f"--arena-calibrated-only: {path} does not exist; run the sweep with --arena-calibrate first"
        )
    return list(_read(path).get("failed", []))


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise pytest.UsageError(f"{path}: cannot read calibration: {error}") from None
    if not isinstance(data, dict):
        raise pytest.UsageError(f"{path}: expected a JSON object with 'instances' and 'failed'")
    return data
