"""The data of the overview page: arms, comparisons against a baseline, the frontier, and every cell.

Cells go out as columns (one list per field, instances and errors as indexes into tables)
so the page of a 100,000-cell run loads in a few megabytes and is filtered and sorted in
typed arrays. Numbers come from the same summary as ``summary.json`` (its pairs, groups and
discrimination as they are), flake rates from ``calibration.json``; what the summary does
not hold (the comparisons against every baseline, the cost intervals) is computed here from
the same cells, with the statistics module.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ... import __version__
from ...outcome import STATUS_TABLE, CellStatus
from ..stats import cost_frontier as frontier
from ..stats import ratio_interval
from .rows import ViewerRow

#: Arm kinds that are references, not contenders: the default baseline is the first other arm.
REFERENCE_KINDS = frozenset({"gold", "empty"})
#: Longest error line the overview keeps per cell (the cell page has the whole text).
MAX_ERROR_CHARS = 200


def _rounded(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def _interval(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [round(interval[0], 6), round(interval[1], 6)]


def arm_entries(summary: Mapping[str, Any], by_arm: Mapping[str, Sequence[ViewerRow]]) -> list[dict[str, Any]]:
    """Per arm: its summary numbers, its identity, and the intervals of its mean cost per cell and per resolved cell."""
    entries = []
    for arm in summary["arms"]:
        rows = by_arm.get(arm["arm"], [])
        costs: list[float] = []
        resolved: list[float] = []
        sources: dict[str, int] = defaultdict(int)
        for row in rows:
            ran, cost, _ = row.spend()
            if ran and cost is not None:
                costs.append(cost)
                resolved.append(1.0 if row.resolved else 0.0)
            if row.usage is not None and row.usage.cost_source:
                sources[row.usage.cost_source] += 1
        known = arm["cost_usd"] is not None
        identity = next((row.arm_identity for row in rows if row.arm_identity), {})
        versions = sorted({str(row.provenance.agent_version) for row in rows if row.provenance.agent_version})
        entries.append({
            **{key: arm[key] for key in ("arm", "cells", "resolved", "resolve_rate", "resolve_rate_ci95", "instances",
                                         "trials", "statuses", "cost_usd", "cost_per_cell_usd", "cost_per_resolved_usd",
                                         "tokens", "median_wall_seconds", "unknown_cost_cells", "harness_errors",
                                         "config_errors")},
            "trial_rates": arm.get("trial_rates"), "flaky_instances": arm.get("flaky_instances", {}),
            "unguarded": arm.get("unguarded", 0), "unsealed": arm.get("unsealed", 0),
            "kind": identity.get("kind"), "identity": identity, "agent_versions": versions,
            "cost_sources": dict(sorted(sources.items())), "cost_known": known,
            "cost_per_cell_ci95": arm.get("cost_per_cell_ci95"),
            "cost_per_resolved_ci95": _interval(ratio_interval(costs, resolved)) if known else None,
        })
    return entries


def comparisons(names: Sequence[str], pairs: Sequence[Mapping[str, Any]],
                arms: Mapping[str, Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """For each arm taken as the baseline, every other arm against it: the summary's pairs, read both ways.

    The paired statistics are computed once, by the summary (``stats.paired_comparison``); this only turns
    each unordered pair around for the page's baseline selector.
    """
    result: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for pair in pairs:
        first, second = pair["arms"]
        interval = pair["delta_ci95"]
        for arm, baseline, wins, losses, sign in ((first, second, pair["only_first"], pair["only_second"], 1),
                                                 (second, first, pair["only_second"], pair["only_first"], -1)):
            ci = None if interval is None else [min(sign * interval[0], sign * interval[1]),
                                                max(sign * interval[0], sign * interval[1])]
            cost, base_cost = arms[arm]["cost_per_cell_usd"], arms[baseline]["cost_per_cell_usd"]
            result[baseline].append({
                "arm": arm, "cells": pair["cells"], "instances": pair["instances"], "both": pair["both"],
                "only_arm": wins, "only_baseline": losses, "neither": pair["neither"],
                "rate_arm": pair["rate_first" if sign == 1 else "rate_second"],
                "rate_baseline": pair["rate_second" if sign == 1 else "rate_first"],
                "delta": sign * pair["delta"], "delta_ci95": ci,
                "mcnemar_p": pair["mcnemar_p"], "mcnemar_p_holm": pair.get("mcnemar_p_holm"),
                "cost_per_cell_delta": None if cost is None or base_cost is None else _rounded(cost - base_cost),
            })
    order = {name: index for index, name in enumerate(names)}
    for entries in result.values():
        entries.sort(key=lambda entry: order[entry["arm"]])
    return result


def run_metadata(summary: Mapping[str, Any], rows: Sequence[ViewerRow]) -> dict[str, Any]:
    """What the run was: the sweep's record, and what its rows say about hosts, workers, versions, sandbox, meter."""
    started = min((row.started_at for row in rows if row.started_at), default=None)
    ended = max((row.ended_at for row in rows if row.ended_at), default=None)
    sandboxes = sorted({str(row.sandbox) for row in rows if row.sandbox is not None})
    reconciliations: dict[str, int] = defaultdict(int)
    for row in rows:
        if row.details.reconciliation_status:
            reconciliations[row.details.reconciliation_status] += 1
    sweep = summary.get("sweep") or {}
    given = sweep.get("options")
    options: dict[str, Any] = given if isinstance(given, dict) else {}
    return {
        "sweep": summary.get("sweep"), "run_id": summary["run_id"], "first_cell_started": started,
        "last_cell_ended": ended, "hosts": sorted({row.host for row in rows if row.host}),
        "workers": len({(row.host, row.worker) for row in rows if row.worker}),
        "plugin_versions": sorted({str(row.provenance.plugin_version) for row in rows
                                   if row.provenance.plugin_version}),
        "sandboxes": sandboxes, "sandbox_option": options.get("sandbox"), "meter_option": options.get("meter"),
        "options": options,
        "metered_cells": sum(1 for row in rows if row.usage and row.usage.cost_source == "metered"),
        "reconciliations": dict(sorted(reconciliations.items())),
        "chained_rows": sum(1 for row in rows if row.chain_sha256),
        "reused_cells": sum(1 for row in rows if row.reused_from), "budget": summary.get("budget"),
        "viewer_version": __version__, "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def cell_columns(rows: Sequence[ViewerRow], names: Sequence[str], repos: Mapping[str, str | None],
                 created: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """Every cell as columns, instance ids, repositories and error lines as indexes into their tables.

    ``created``: each instance's creation date (``YYYY-MM-DD``, from its card), for the matrix's filter.
    """
    statuses = [status.value for status in CellStatus]
    status_index = {status: index for index, status in enumerate(statuses)}
    arm_index = {name: index for index, name in enumerate(names)}
    instances = sorted({row.instance_id for row in rows})
    instance_index = {iid: index for index, iid in enumerate(instances)}
    repo_names = sorted({repo or "" for repo in repos.values()} | {""})
    repo_index = {repo: index for index, repo in enumerate(repo_names)}
    errors: dict[str, int] = {}
    columns: dict[str, list[Any]] = {key: [] for key in
                                     ("instance", "arm", "trial", "status", "cost", "tokens", "wall", "error", "flags")}
    pages: dict[int, str] = {}
    #: How each cell whose recorded patch was not applied by plain ``git apply`` was (flag 8).
    applies: dict[int, str] = {}
    for number, row in enumerate(rows):
        ran, cost, tokens = row.spend()
        wall = row.wall_seconds
        line = row.error_line
        columns["instance"].append(instance_index[row.instance_id])
        columns["arm"].append(arm_index.get(row.arm, -1))
        columns["trial"].append(row.trial)
        columns["status"].append(status_index.get(row.status, -1))
        columns["cost"].append(_rounded(cost))
        columns["tokens"].append(tokens)
        columns["wall"].append(None if wall is None else round(wall, 2))
        columns["error"].append(-1 if line is None else errors.setdefault(line[:MAX_ERROR_CHARS], len(errors)))
        applied = row.provenance.non_plain_apply
        columns["flags"].append(int(row.flagged) | (2 if row.reused_from else 0) | (4 if not ran else 0)
                                | (8 if applied is not None else 0))
        if applied is not None:
            applies[number] = applied
        expected = f"cells/{row.instance_id}/{row.arm}/{row.trial}"
        if row.page != expected:
            pages[number] = row.page
    return {
        "count": len(rows), "statuses": statuses, "instances": instances, "repos": repo_names,
        "instance_repo": [repo_index[repos.get(iid) or ""] for iid in instances],
        "instance_created": [(created or {}).get(iid) for iid in instances],
        "errors": list(errors), "columns": columns, "pages": {str(k): v for k, v in pages.items()},
        "applies": {str(k): v for k, v in applies.items()},
    }


def overview_data(summary: Mapping[str, Any], rows: Sequence[ViewerRow], repos: Mapping[str, str | None],
                  created: Mapping[str, str | None] | None = None,
                  calibrated: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The overview page's data (``viewer/data/overview.js``).

    ``calibrated``: the calibration's flake rates on the run's instances (``calibration.flake_rates``), if any.
    """
    names = [arm["arm"] for arm in summary["arms"]]
    by_arm: dict[str, list[ViewerRow]] = defaultdict(list)
    for row in rows:
        by_arm[row.arm].append(row)
    arms = arm_entries(summary, by_arm)
    arm_by_name = {arm["arm"]: arm for arm in arms}
    contenders = [arm["arm"] for arm in arms if arm["kind"] not in REFERENCE_KINDS]
    charted = [arm for arm in arms if arm["cost_usd"] != 0]
    return {
        "format": 1,
        "meta": run_metadata(summary, rows),
        "summary": {key: summary[key] for key in ("run_id", "rows", "instances", "trials")},
        "warnings": [warning["message"] for warning in summary["warnings"]],
        "status_labels": {status.value: {"glyph": meaning.glyph, "label": meaning.label, "counted": meaning.counted}
                          for status, meaning in STATUS_TABLE.items()},
        "arms": arms,
        "baseline": (contenders or names or [None])[0],
        "comparisons": comparisons(names, summary["pairs"], arm_by_name),
        "pairs": summary["pairs"],
        "groups": summary.get("groups"),
        "calibration": calibrated,
        "discrimination": summary.get("discrimination"),
        "subset": summary.get("subset"),
        # An arm that spent $0 (GOLD, EMPTY: no model call) is not a point of the cost charts, nor of their frontier.
        "frontier": {"per_cell": frontier(charted, "cost_per_cell_usd"),
                     "per_resolved": frontier(charted, "cost_per_resolved_usd")},
        "cells": cell_columns(rows, names, repos, created),
    }
