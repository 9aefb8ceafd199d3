"""Selection by the fields researchers slice datasets on: when a row was made, how hard it is, its language.

Each row's cells get marks derived from its published fields (``selection_marks``), so ``-m`` selects them:

- ``created_2025`` and ``created_2025_06``: the year and month of ``created_at`` (the pull request's date in
  SWE-bench, SWE-Gym and SWE-rebench; the bug's in SWE-smith);
- ``difficulty_<value>``: SWE-bench Verified's ``difficulty`` (``<15 min fix`` gives ``difficulty_lt_15_min_fix``),
  SWE-rebench-V2's ``meta.llm_metadata.difficulty`` (``difficulty_easy``), SWE-rebench's
  ``meta.llm_score.difficulty_score`` (``difficulty_2``);
- ``language_<name>``: the row's ``language`` (SWE-rebench-V2, SWE-bench Multilingual).

The repository's mark (``repo`` ``pallets/flask`` gives ``flask``) is ``Instance.repo_mark``. A contamination
window is ``--arena-created-after`` / ``--arena-created-before`` (``in_window``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any


def created_at(row: Mapping[str, Any]) -> datetime | None:
    """The row's ``created_at`` as the datasets write it (``2023-04-01T12:00:00Z``, ``2025-03-05 09:12:27.123456``,
    ``2024-01-02``), UTC when it names no zone; None when it has none the harness can read."""
    created = row.get("created_at")
    if not isinstance(created, str) or not created:
        return None
    try:
        parsed = datetime.fromisoformat(created.strip().replace(" ", "T"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def created_on(row: Mapping[str, Any]) -> date | None:
    """The day of the row's ``created_at``, or None when it has none the harness can read."""
    created = created_at(row)
    return created.date() if created is not None else None


def difficulty(row: Mapping[str, Any]) -> str | None:
    """The row's difficulty as its dataset says it, or None."""
    if row.get("difficulty") not in (None, ""):
        return str(row["difficulty"])
    meta = row.get("meta")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except json.JSONDecodeError:
            return None
    if not isinstance(meta, dict):
        return None
    for outer, inner in (("llm_metadata", "difficulty"), ("llm_score", "difficulty_score")):
        value = meta.get(outer, {}).get(inner) if isinstance(meta.get(outer), dict) else None
        if value not in (None, ""):
            return str(value)
    return None


def _slug(text: str) -> str:
    text = text.lower().replace("<", " lt ").replace(">", " gt ")
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_")


def selection_marks(row: Mapping[str, Any]) -> list[str]:
    """The marks a row's published fields give its cells (see the module's docstring)."""
    marks = []
    created = created_on(row)
    if created is not None:
        marks += [f"created_{created.year}", f"created_{created.year}_{created.month:02d}"]
    level = difficulty(row)
    if level is not None and _slug(level):
        marks.append(f"difficulty_{_slug(level)}")
    language = row.get("language")
    if isinstance(language, str) and _slug(language):
        marks.append(f"language_{_slug(language)}")
    return marks


def in_window(row: Mapping[str, Any], after: date | None, before: date | None) -> bool:
    """Whether the row was created in the window: on or after ``after`` and before ``before``.

    A row without a readable ``created_at`` is outside any window: a contamination window that let undated
    rows in would not be one.
    """
    if after is None and before is None:
        return True
    created = created_on(row)
    if created is None:
        return False
    return (after is None or created >= after) and (before is None or created < before)
