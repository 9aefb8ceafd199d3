"""Summaries of a sweep: per-arm results, paired comparisons and warnings.

Ledger rows are first reduced to ``CellRecord``s (the few fields a summary
needs, so a 100,000-row ledger stays small in memory); ``summarize`` turns them
into plain data (``summary.json``) and ``format_summary`` into the terminal
text. The plugin and the ``swe-arena`` command share these functions, so both
show the same numbers. A value that cannot be computed is None ("n/a").
"""

from __future__ import annotations

import json
import math
import textwrap
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from pathlib import Path
from typing import Any

from .budget import BUDGET_FILE, SWEEP
from .ledger import write_atomic
from .outcome import STATUSES
from .stats import five_numbers, mcnemar_exact_p, median, pass_at_k, pass_hat_k, per_resolved, wilson_interval

SUMMARY_NAME = "summary.json"
REPORT_NAME = "report.html"
SUMMARY_SCHEMA_VERSION = 1
#: The terminal summary's width.
TERMINAL_WIDTH = 100
#: How many example cells a warning lists.
WARNING_EXAMPLES = 5


def counts_in_rate(status: str) -> bool:
    return STATUSES.get(status, ("", False))[1]


@dataclass(frozen=True, slots=True)
class CellRecord:
    """What the summary and the report need from one ledger row."""

    run_id: str | None
    instance_id: str
    arm: str
    trial: int
    status: str
    #: False when no usage was recorded (the arm never ran): it spent nothing.
    ran: bool
    cost_usd: float | None
    tokens: int | None
    wall_seconds: float | None
    patch_file: str | None
    run_dir: str | None
    asked_model: str | None
    served_model: str | None
    model_mismatch: bool
    reused: bool
    #: The first line of the row's error text.
    error: str | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CellRecord:
        usage = row.get("usage")
        cost, tokens = spend(usage)
        error = row.get("error")
        return cls(
            run_id=row.get("run_id"),
            instance_id=row["instance_id"],
            arm=row["arm"],
            trial=row.get("trial", 1),
            status=row["status"],
            ran=bool(usage),
            cost_usd=cost,
            tokens=tokens,
            wall_seconds=wall_seconds(row),
            patch_file=row.get("patch_file"),
            run_dir=row.get("run_dir"),
            asked_model=row.get("asked_model"),
            served_model=row.get("served_model"),
            model_mismatch=bool(row.get("model_mismatch")),
            reused=bool(row.get("reused_from")),
            error=error.strip().splitlines()[0] if error and error.strip() else None,
        )

    @property
    def counts(self) -> bool:
        """Whether the cell counts in its arm's resolve rate."""
        return counts_in_rate(self.status)

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"


def spend(usage: Mapping[str, Any] | None) -> tuple[float | None, int | None]:
    """A cell's cost in USD and tokens (input + output + reasoning); None when not known.

    A cell without usage never ran its arm (skipped, or its setup failed): it spent nothing.
    """
    if not usage:
        return 0.0, 0
    parts: list[int | None] = [usage.get(name) for name in ("input_tokens", "output_tokens", "reasoning_tokens")]
    tokens = None if any(part is None for part in parts) else sum(part or 0 for part in parts)
    return usage.get("cost_usd"), tokens


def user_properties(row: Mapping[str, Any]) -> list[tuple[str, object]]:
    """A cell's status, spend and patch as pytest ``user_properties`` (for ``--junitxml`` and JSON reports).

    Cost and tokens are None when unknown; the patch is relative to the out dir, None when not graded.
    """
    cost, tokens = spend(row.get("usage"))
    return [("arena_status", row["status"]), ("arena_cost_usd", cost), ("arena_tokens", tokens),
            ("arena_patch", row.get("patch_file"))]


def wall_seconds(row: Mapping[str, Any]) -> float | None:
    """A cell's wall time: the sum of its phases, else ended minus started; None if neither is known."""
    phases = row.get("phases") or {}
    if phases:
        return math.fsum(phases.values())  # exact, so the order of the phases (JSON sorts them) cannot matter
    try:
        seconds = (datetime.fromisoformat(row["ended_at"]) - datetime.fromisoformat(row["started_at"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None


def cell_records(rows: Iterable[Mapping[str, Any]]) -> list[CellRecord]:
    return [CellRecord.from_row(row) for row in rows]


def summarize(cells: Sequence[CellRecord], arm_order: Sequence[str] = (), run_id: str | None = None,
              budget: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary of one run's cells: per arm, per pair of arms, and what to be warned about.

    Arms are listed in ``arm_order`` (the sweep's ``--arena-arms``), then by name. ``budget`` is the
    sweep's ``budget.json`` (caps and spend) when it had caps.
    """
    by_arm: dict[str, list[CellRecord]] = defaultdict(list)
    for cell in cells:
        by_arm[cell.arm].append(cell)
    rank = {name: index for index, name in enumerate(arm_order)}
    names = sorted(by_arm, key=lambda name: (rank.get(name, len(rank)), name))
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "run_id": run_id,
        "arm_order": names,
        "rows": len(cells),
        "instances": len({cell.instance_id for cell in cells}),
        "trials": max((cell.trial for cell in cells), default=0),
        "arms": [arm_summary(name, by_arm[name]) for name in names],
        "pairs": paired_comparisons(names, by_arm),
        "budget": dict(budget) if budget else None,
        "warnings": [warning for name in names for warning in arm_warnings(name, by_arm[name])]
        + budget_warnings(budget),
    }


def arm_summary(arm: str, cells: Sequence[CellRecord]) -> dict[str, Any]:
    """One arm's resolve rate (Wilson 95%), spend, efficiency, wall time and pass@k."""
    counted = [cell for cell in cells if cell.counts]
    resolved = sum(cell.resolved for cell in counted)
    statuses = Counter(cell.status for cell in cells)
    ran = [cell for cell in cells if cell.ran]
    costs = [cell.cost_usd for cell in ran if cell.cost_usd is not None]
    tokens = [cell.tokens for cell in ran if cell.tokens is not None]
    cost_total = round(sum(costs), 6) if len(costs) == len(ran) else None
    token_total = sum(tokens) if len(tokens) == len(ran) else None
    interval = wilson_interval(resolved, len(counted))
    return {
        "arm": arm,
        "cells": len(counted),
        "resolved": resolved,
        "resolve_rate": resolved / len(counted) if counted else None,
        "resolve_rate_ci95": list(interval) if interval else None,
        "instances": len({cell.instance_id for cell in counted}),
        "trials": max((cell.trial for cell in cells), default=0),
        "statuses": dict(sorted(statuses.items())),
        "harness_errors": statuses["harness_error"],
        "skipped": statuses["skipped_budget"],
        "interrupted": statuses["interrupted"],
        "reused": sum(cell.reused for cell in cells),
        "model_mismatches": sum(cell.model_mismatch for cell in cells),
        "cost_usd": cost_total,
        "cost_usd_known": round(sum(costs), 6),
        "unknown_cost_cells": len(ran) - len(costs),
        "tokens": token_total,
        "tokens_known": sum(tokens),
        "unknown_token_cells": len(ran) - len(tokens),
        "cost_per_cell_usd": cost_total / len(ran) if cost_total is not None and ran else None,
        "cost_per_resolved_usd": per_resolved(cost_total, resolved),
        "tokens_per_resolved": per_resolved(token_total, resolved),
        "median_wall_seconds": median([cell.wall_seconds for cell in counted if cell.wall_seconds is not None]),
        "cost_distribution": five_numbers(costs),
        "token_distribution": five_numbers(tokens),
        "pass_at_k": pass_at_k_table(counted),
    }


def pass_at_k_table(counted: Sequence[CellRecord]) -> list[dict[str, Any]]:
    """pass@k and pass^k for k = 1..max trials, averaged over the instances with at least k trials.

    Empty when no instance was tried more than once.
    """
    trials: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for cell in counted:
        tally = trials[cell.instance_id]
        tally[0] += 1
        tally[1] += cell.resolved
    most = max((n for n, _ in trials.values()), default=0)
    if most < 2:
        return []
    table = []
    for k in range(1, most + 1):
        # An instance with fewer than k trials has no estimate (None) and is left out of the mean.
        at_k = [value for n, c in trials.values() if (value := pass_at_k(n, c, k)) is not None]
        hat_k = [value for n, c in trials.values() if (value := pass_hat_k(n, c, k)) is not None]
        table.append({"k": k, "instances": len(at_k), "pass_at_k": sum(at_k) / len(at_k),
                      "pass_hat_k": sum(hat_k) / len(hat_k)})
    return table


def paired_comparisons(names: Sequence[str], by_arm: Mapping[str, Sequence[CellRecord]]) -> list[dict[str, Any]]:
    """For each pair of arms, the split over the (instance, trial) cells both have in the rate."""
    verdicts = {
        name: {(cell.instance_id, cell.trial): cell.resolved for cell in by_arm[name] if cell.counts}
        for name in names
    }
    pairs = []
    for first, second in combinations(names, 2):
        a, b = verdicts[first], verdicts[second]
        common = a.keys() & b.keys()
        if not common:
            continue
        only_first = sum(a[key] and not b[key] for key in common)
        only_second = sum(b[key] and not a[key] for key in common)
        both = sum(a[key] and b[key] for key in common)
        pairs.append({
            "arms": [first, second],
            "cells": len(common),
            "both": both,
            "only_first": only_first,
            "only_second": only_second,
            "neither": len(common) - both - only_first - only_second,
            "rate_first": (both + only_first) / len(common),
            "rate_second": (both + only_second) / len(common),
            "mcnemar_p": mcnemar_exact_p(only_first, only_second),
        })
    return pairs


def _examples(cells: Sequence[CellRecord]) -> list[str]:
    return [f"{cell.instance_id}[{cell.arm}]" + (f" r{cell.trial}" if cell.trial > 1 else "")
            for cell in cells[:WARNING_EXAMPLES]]


def arm_warnings(arm: str, cells: Sequence[CellRecord]) -> list[dict[str, Any]]:
    """What a reader must know before trusting this arm's numbers."""
    warnings: list[dict[str, Any]] = []

    def warn(kind: str, which: Sequence[CellRecord], message: str) -> None:
        if which:
            warnings.append({"kind": kind, "arm": arm, "count": len(which), "message": message,
                             "examples": _examples(which)})

    harness = [cell for cell in cells if cell.status == "harness_error"]
    warn("harness_error", harness,
         f"{arm}: {len(harness)} harness error(s), not counted in the rate (--arena-resume runs them again)")
    skipped = [cell for cell in cells if cell.status == "skipped_budget"]
    reasons = sorted({cell.error for cell in skipped if cell.error})
    warn("skipped_budget", skipped,
         f"{arm}: {len(skipped)} cell(s) skipped, budget spent" + (f": {reasons[0]}" if reasons else ""))
    interrupted = [cell for cell in cells if cell.status == "interrupted"]
    warn("interrupted", interrupted, f"{arm}: {len(interrupted)} cell(s) interrupted, not counted")
    mismatched = [cell for cell in cells if cell.model_mismatch]
    if mismatched:
        first = mismatched[0]
        warn("model_mismatch", mismatched,
             f"served model differs from the asked one in {len(mismatched)} cell(s) of {arm} "
             f"(e.g. asked {first.asked_model}, served {first.served_model})")
    ran = [cell for cell in cells if cell.ran]
    unknown_cost = [cell for cell in ran if cell.cost_usd is None]
    known = sum(cell.cost_usd for cell in ran if cell.cost_usd is not None)
    warn("unknown_cost", unknown_cost,
         f"{arm}: cost unknown for {len(unknown_cost)} of {len(ran)} cell(s), so its USD figures are n/a "
         f"(known part: ${known:.4f})")
    unknown_tokens = [cell for cell in ran if cell.tokens is None]
    warn("unknown_tokens", unknown_tokens,
         f"{arm}: tokens unknown for {len(unknown_tokens)} of {len(ran)} cell(s), so its token figures are n/a")
    return warnings


def budget_warnings(budget: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Spent caps (from the controller's ``budget.json``), and dollars a cap could not count."""
    if not budget:
        return []
    warnings: list[dict[str, Any]] = [{"kind": "budget_exhausted", "arm": None if arm == SWEEP else arm, "count": 1,
                 "message": f"{reason}: no new cell started after that", "examples": []}
                for arm, reason in sorted((budget.get("exhausted") or {}).items())]
    spent = budget.get("spent") or {}
    unknown = spent.get("unknown_usd_cells") or 0
    if unknown and (budget.get("limits") or {}).get("sweep", {}).get("max_usd") is not None:
        warnings.append({"kind": "budget_unknown_cost", "arm": None, "count": unknown,
                         "message": f"{unknown} cell(s) of unknown USD cost were not counted against --arena-max-usd",
                         "examples": []})
    return warnings


# --- text --------------------------------------------------------------------------------------------------


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def interval_text(interval: Sequence[float] | None) -> str:
    return "n/a" if interval is None else f"{100 * interval[0]:.1f}-{100 * interval[1]:.1f}%"


def usd(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.4f}" if value < 10 else f"{value:,.2f}"


def count(value: float | None) -> str:
    """A token count, exact below 100,000, then in k and M (the JSON keeps it exact)."""
    if value is None:
        return "n/a"
    if value < 100_000:
        return f"{value:,.0f}"
    return f"{value / 1000:,.0f}k" if value < 999_500 else f"{value / 1_000_000:,.1f}M"


def seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.1f}s" if value < 600 else f"{value / 60:.1f}m"


def p_value(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "<0.0001" if value < 0.0001 else f"{value:.4f}"


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A plain text table: the first column left-aligned, the others right-aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        padded = (cell.ljust(width) if index == 0 else cell.rjust(width)
                  for index, (cell, width) in enumerate(zip(cells, widths, strict=True)))
        return "  ".join(padded).rstrip()

    return [line(header), "  ".join("-" * width for width in widths), *(line(row) for row in rows)]


def format_budget(budget: Mapping[str, Any]) -> str:
    """One line: what the sweep spent against its caps."""
    limits = (budget.get("limits") or {}).get("sweep") or {}
    spent = budget.get("spent") or {}
    usd_cap = "" if limits.get("max_usd") is None else f" of ${limits['max_usd']:g}"
    token_cap = "" if limits.get("max_tokens") is None else f" of {limits['max_tokens']:,}"
    unknown = spent.get("unknown_usd_cells") or 0
    return (f"budget: ${usd(spent.get('usd'))}{usd_cap} and {count(spent.get('tokens'))} tokens{token_cap} spent"
            + (f" (+ {unknown} cell(s) of unknown USD cost)" if unknown else ""))


def format_summary(summary: Mapping[str, Any], width: int = TERMINAL_WIDTH) -> list[str]:
    """The terminal summary: per-arm table, pass@k (with repeats), paired comparison, budget, warnings.

    Tables fit in 100 columns for arm names up to 16 characters; warnings wrap at ``width``.
    """
    header = ["arm", "resolved", "rate", "95% CI", "USD", "USD/res", "tokens", "tok/res", "wall p50"]
    body = [
        [arm["arm"], f"{arm['resolved']}/{arm['cells']}", percent(arm["resolve_rate"]),
         interval_text(arm["resolve_rate_ci95"]), usd(arm["cost_usd"]), usd(arm["cost_per_resolved_usd"]),
         count(arm["tokens"]), count(arm["tokens_per_resolved"]), seconds(arm["median_wall_seconds"])]
        for arm in summary["arms"]
    ]
    trials = f", {summary['trials']} trials" if summary["trials"] > 1 else ""
    lines = [f"{summary['instances']} instances x {len(summary['arms'])} arms{trials}: {summary['rows']} cells "
             "(95% CI: Wilson; n/a: not computable)", ""]
    lines += format_table(header, body)
    most = max((len(arm["pass_at_k"]) for arm in summary["arms"]), default=0)
    if most > 1:
        def at(arm: Mapping[str, Any], k: int, key: str) -> str:
            entry = next((row for row in arm["pass_at_k"] if row["k"] == k), None)
            return percent(entry[key]) if entry else "n/a"

        lines.append("")
        lines += format_table(
            ["repeats", "trials", "pass@1", f"pass@{most}", f"pass^{most}"],
            [[arm["arm"], str(arm["trials"]), at(arm, 1, "pass_at_k"), at(arm, most, "pass_at_k"),
              at(arm, most, "pass_hat_k")] for arm in summary["arms"]],
        )
    if summary["pairs"]:
        lines.append("")
        lines += format_table(
            ["paired (A vs B)", "pairs", "both", "only A", "only B", "neither", "McNemar p"],
            [[f"{pair['arms'][0]} vs {pair['arms'][1]}", str(pair["cells"]), str(pair["both"]),
              str(pair["only_first"]), str(pair["only_second"]), str(pair["neither"]), p_value(pair["mcnemar_p"])]
             for pair in summary["pairs"]],
        )
    if summary.get("budget"):
        lines += ["", format_budget(summary["budget"])]
    if summary["warnings"]:
        lines += ["", "warnings:"]
        for warning in summary["warnings"]:
            lines += textwrap.wrap(warning["message"], width, initial_indent="  ! ", subsequent_indent="    ",
                                   break_on_hyphens=False)
    return lines


def written_lines(out: Path, run_id: str | None, paths: Sequence[Path]) -> list[str]:
    """Where the results went: the out dir, then each file written, relative to it."""
    names = [str(path.relative_to(out)) if path.is_relative_to(out) else str(path) for path in paths]
    return [f"out: {out} (run {run_id})", *(f"  {name}" for name in names)]


# --- files -------------------------------------------------------------------------------------------------


def write_reports(out: Path, cells: Sequence[CellRecord], arm_order: Sequence[str] = (),
                  run_id: str | None = None, budget: Mapping[str, Any] | None = None
                  ) -> tuple[dict[str, Any], list[Path]]:
    """Write ``summary.json`` and ``report.html`` (each atomically); return the summary and the paths."""
    from .html_report import render_report

    summary = summarize(cells, arm_order, run_id, budget)
    summary_path, report_path = out / SUMMARY_NAME, out / REPORT_NAME
    write_atomic(summary_path, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    write_atomic(report_path, render_report(summary, cells))
    return summary, [summary_path, report_path]


def recorded_budget(out: Path, run_id: str | None) -> dict[str, Any] | None:
    """The ``budget.json`` the controller wrote for ``run_id`` (None without caps or for another run)."""
    try:
        budget = json.loads((out / BUDGET_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return budget if isinstance(budget, dict) and budget.get("run_id") == run_id else None


def previous_arm_order(out: Path, run_id: str | None) -> list[str]:
    """The arm order a run's own ``summary.json`` recorded (the sweep's ``--arena-arms``), if any."""
    try:
        summary = json.loads((out / SUMMARY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(summary, dict) or summary.get("run_id") != run_id:
        return []
    order = summary.get("arm_order")
    return [str(name) for name in order] if isinstance(order, list) else []
