"""The runs browser: every run found in one or more folders of out dirs, and any two arms of them side by side.

``write_browser(folders, to)`` finds the out dirs (a folder that holds ``summary.json``, or its
children that do), brings each one's own viewer up to date (``write_viewer``: the cell pages the
browser links to and whose patches it shows), and writes ``to/runs.html`` with ``to/data/runs.js``.

A *side* is one arm of one run. Every pair of sides is compared here, in Python, with the same
statistics as a run's overview (``overview.comparisons``: paired over the (instance, trial)
cells both count, exact McNemar, paired bootstrap of the difference), and the cells whose
verdict flipped are listed with both cell pages, so the page only shows what was computed.
The pairs grow with the square of the sides: a folder of 10 runs of 4 arms is 780 pairs.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ... import __version__
from ...naming import LEDGER_NAME, SUMMARY_NAME, VIEWER_DIR
from ..summary import paired_comparisons
from .build import copy_assets, script_text, write_derived, write_viewer
from .overview import arm_entries, comparisons
from .rows import ViewerRow, read_run

BROWSER_PAGE = "runs.html"
#: The files of ``assets/`` the runs browser loads (the run viewer's pages are not copied beside it).
BROWSER_PAGES = (BROWSER_PAGE,)


def find_out_dirs(folders: Sequence[Path]) -> list[Path]:
    """The out dirs in ``folders``: each folder that holds a ledger and ``summary.json``, else its children that do.

    A folder that is neither is an error naming it, so a typo is not an empty list.
    """
    found: list[Path] = []
    for folder in folders:
        if not folder.is_dir():
            raise ValueError(f"{folder}: not a directory (give a sweep's --arena-out or a folder of them)")
        if _is_out_dir(folder):
            found.append(folder.resolve())
            continue
        children = sorted(child.resolve() for child in folder.iterdir() if child.is_dir() and _is_out_dir(child))
        if not children:
            raise ValueError(f"{folder}: holds no out dir (no {LEDGER_NAME} with {SUMMARY_NAME}, in it or in a "
                             "folder directly under it)")
        found.extend(children)
    return list(dict.fromkeys(found))


def _is_out_dir(path: Path) -> bool:
    return (path / LEDGER_NAME).is_file() and (path / SUMMARY_NAME).is_file()


def read_summary(out: Path) -> dict[str, Any] | None:
    """The out dir's ``summary.json``, or None (with a warning naming the file) when it is not a run's summary."""
    path = out / SUMMARY_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        warnings.warn(f"{path}: left out of the runs browser: not readable JSON ({error})", stacklevel=2)
        return None
    if not isinstance(data, dict) or not all(key in data for key in ("run_id", "arms", "arm_order")):
        warnings.warn(f"{path}: left out of the runs browser: not a summary (needs run_id, arms, arm_order)",
                      stacklevel=2)
        return None
    return data


def _link(to: Path, target: Path) -> str:
    """``target`` relative to the browser's folder, as a URL path (the folders can move together)."""
    return Path(os.path.relpath(target, to)).as_posix()


def run_entry(label: str, out: Path, to: Path, summary: Mapping[str, Any], rows: Sequence[ViewerRow],
              arms: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One run of the list: where it is, when it ran, its arms with their rates and spend."""
    sweep = summary.get("sweep") or {}
    started = sweep.get("started_at") or min((row.started_at for row in rows if row.started_at), default=None)
    known = [arm["cost_usd"] for arm in arms if arm["cost_usd"] is not None]
    return {
        "label": label, "run_id": summary["run_id"], "started": started,
        "viewer": _link(to, out / VIEWER_DIR / "index.html"), "cells_base": _link(to, out / VIEWER_DIR),
        "instances": summary.get("instances"), "rows": summary.get("rows"), "trials": summary.get("trials"),
        "spend_usd": round(sum(known), 6) if known else None,
        "spend_unknown_arms": [arm["arm"] for arm in arms if arm["cost_usd"] is None],
        "arms": [{key: arm[key] for key in ("arm", "kind", "resolved", "cells", "resolve_rate", "resolve_rate_ci95",
                                            "cost_usd")} for arm in arms],
    }


def flips(first: Sequence[ViewerRow], second: Sequence[ViewerRow]) -> list[dict[str, Any]]:
    """The (instance, trial) cells both sides count whose verdicts differ, each with both cells' statuses and pages."""
    counted = {(row.instance_id, row.trial): row for row in second if row.counts}
    found = []
    for row in first:
        other = counted.get((row.instance_id, row.trial))
        if row.counts and other is not None and row.resolved != other.resolved:
            found.append({"instance": row.instance_id, "trial": row.trial, "status_a": row.status,
                          "status_b": other.status, "page_a": row.page, "page_b": other.page})
    found.sort(key=lambda flip: (flip["instance"], flip["trial"]))
    return found


def browser_data(out_dirs: Sequence[Path], to: Path) -> dict[str, Any]:
    """The runs browser's data (``data/runs.js``): the runs, the sides, and every pair of sides compared."""
    runs: list[dict[str, Any]] = []
    sides: list[dict[str, Any]] = []
    rows_of: dict[str, list[ViewerRow]] = {}
    entries: dict[str, Mapping[str, Any]] = {}
    labels = _labels(out_dirs)
    for out in out_dirs:
        summary = read_summary(out)
        if summary is None:
            continue
        write_viewer(out, summary)
        rows = read_run(out, summary["run_id"])
        by_arm: dict[str, list[ViewerRow]] = {}
        for row in rows:
            by_arm.setdefault(row.arm, []).append(row)
        arms = arm_entries(summary, by_arm)
        run = run_entry(labels[out], out, to, summary, rows, arms)
        for arm in arms:
            key = f"{len(runs)}:{arm['arm']}"
            rows_of[key] = by_arm.get(arm["arm"], [])
            entries[key] = arm
            sides.append({"key": key, "run": len(runs), "arm": arm["arm"], "label": f"{run['label']} · {arm['arm']}"})
        runs.append(run)
    keys = [side["key"] for side in sides]
    verdicts = {key: {(row.instance_id, row.trial): row.resolved for row in rows_of[key] if row.counts}
                for key in keys}
    compared = comparisons(keys, paired_comparisons(keys, verdicts), entries)
    pairs: dict[str, dict[str, Any]] = {}
    for index, first in enumerate(keys):
        for second in keys[index + 1:]:
            entry = next((found for found in compared[first] if found["arm"] == second), None)
            pairs[f"{first}|{second}"] = {
                "stats": entry, "flips": flips(rows_of[first], rows_of[second]),
            }
    return {"format": 1, "version": __version__, "runs": runs, "sides": sides, "pairs": pairs}


def _labels(out_dirs: Sequence[Path]) -> dict[Path, str]:
    """Each out dir's name in the list: its path below the folders' common parent (its own name when alone)."""
    if len(out_dirs) == 1:
        return {out_dirs[0]: out_dirs[0].name}
    common = Path(os.path.commonpath([str(out) for out in out_dirs]))
    return {out: out.relative_to(common).as_posix() for out in out_dirs}


def write_browser(folders: Sequence[Path], to: Path) -> Path:
    """Write the runs browser of the out dirs in ``folders`` into ``to``; return its page."""
    out_dirs = find_out_dirs(folders)
    to = to.resolve()
    to.mkdir(parents=True, exist_ok=True)
    copy_assets(to, pages=BROWSER_PAGES)
    write_derived(to / "data" / "runs.js", script_text("runs", browser_data(out_dirs, to)))
    return to / BROWSER_PAGE
