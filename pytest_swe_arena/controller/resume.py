"""Resuming a sweep: which cells already have a final row with the same cell key.

The cell key covers the instance's content, the arm's identity, the verify
mode, the harness version and the trial, so a changed instance or arm runs
again. Harness errors, budget skips and interrupted cells are not final and
run again too.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from ..naming import LEDGER_NAME, CellName
from ..outcome import FINAL_STATUSES
from ..spend.usage import plausible_usage_json
from ..state import ReuseVerdict


def reusable_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``cell_key -> row`` for the latest final row of each cell."""
    reusable: dict[str, dict[str, Any]] = {}
    for row in rows:
        key = row.get("cell_key")
        if not key:
            continue
        # A later non-final row (say, an interrupted re-run) leaves an earlier final one reusable.
        if row.get("status") in FINAL_STATUSES:
            reusable[key] = plausible_spend(row)
    return reusable


def plausible_spend(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with each usage figure that is not plausible unknown (None), with a warning naming the cell.

    Rows an older version, another tool or a text editor wrote may hold NaN, a negative count or a
    string cost: a reused row is recorded again, and its spend counted in the budget, only once checked.
    """
    fixed = dict(row)
    problems: list[str] = []
    if row.get("usage"):
        fixed["usage"], found = plausible_usage_json(row["usage"])
        problems += [f"usage.{problem}" for problem in found]
    models = row.get("models")
    if isinstance(models, Mapping):
        fixed["models"] = {}
        for model, usage in models.items():
            fixed["models"][model], found = plausible_usage_json(usage)
            problems += [f"models[{model}].{problem}" for problem in found]
    if problems:
        warnings.warn(f"{LEDGER_NAME}: the reused row of {CellName.of_row(row).shown} "
                      f"(run {row.get('run_id')}): {'; '.join(problems)}; taken as unknown", stacklevel=2)
    return fixed


def verdicts(reusable: Mapping[str, Mapping[str, Any]]) -> dict[str, ReuseVerdict]:
    """The little each worker needs to report a reused cell: status, error, run id, spend and patch."""
    return {key: ReuseVerdict(status=row["status"], error=row.get("error"), run_id=row.get("run_id"),
                              usage=row.get("usage"), patch_file=row.get("patch_file"))
            for key, row in reusable.items()}
