"""Resuming a sweep: which cells already have a final row with the same cell key.

The cell key covers the instance's content, the arm's identity, the verify
mode, the harness version and the trial, so a changed instance or arm runs
again. Harness errors, budget skips and interrupted cells are not final and
run again too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .outcome import FINAL_STATUSES


def reusable_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``cell_key -> row`` for the latest final row of each cell."""
    reusable: dict[str, dict[str, Any]] = {}
    for row in rows:
        key = row.get("cell_key")
        if not key:
            continue
        # A later non-final row (say, an interrupted re-run) leaves an earlier final one reusable.
        if row.get("status") in FINAL_STATUSES:
            reusable[key] = dict(row)
    return reusable


def verdicts(reusable: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The little each worker needs to report a reused cell: status, error, run id, spend and patch."""
    return {key: {"status": row["status"], "error": row.get("error"), "run_id": row.get("run_id"),
                  "usage": row.get("usage"), "patch_file": row.get("patch_file")}
            for key, row in reusable.items()}
