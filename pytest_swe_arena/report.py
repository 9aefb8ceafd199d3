"""Summaries of a sweep: per-arm results, paired comparisons and warnings.

Ledger rows are first reduced to ``CellRecord``s (the few fields a summary
needs, decoded straight from each ledger line by ``msgspec``, so a 100,000-row
ledger is read in well under a second); ``summarize`` turns them
into plain data (``summary.json``) and ``format_summary`` into the terminal
text. The plugin and the ``swe-arena`` command share these functions, so both
show the same numbers. A value that cannot be computed is None ("n/a").
"""

from __future__ import annotations

import json
import math
import textwrap
import warnings
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations
from pathlib import Path
from typing import Any

import msgspec

from .budget import BUDGET_FILE, SWEEP
from .ledger import read_sweep_record, write_atomic
from .outcome import STATUSES, CellOutcome
from .stats import five_numbers, mcnemar_exact_p, median, pass_at_k, pass_hat_k, per_resolved, wilson_interval
from .usage import token_total

SUMMARY_NAME = "summary.json"
REPORT_NAME = "report.html"
SUMMARY_SCHEMA_VERSION = 1
#: The terminal summary's width.
TERMINAL_WIDTH = 100
#: How many example cells a warning lists.
WARNING_EXAMPLES = 5
#: The statuses a resolve rate counts (resolved, unresolved, arm errors, timeouts, over budget).
COUNTED_STATUSES = frozenset(status for status, (_, counted) in STATUSES.items() if counted)


class Usage(msgspec.Struct, frozen=True, gc=False):
    """The part of a row's ``usage`` a summary reads."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    cost_source: str | None = None

    @property
    def tokens(self) -> int | None:
        """Input + output + reasoning tokens; None if any is unknown."""
        return token_total((self.input_tokens, self.output_tokens, self.reasoning_tokens))


NO_USAGE = Usage()


def unknown_usage() -> dict[str, Any]:
    """The ``usage`` of a cell that may have spent, but did not say how much: every figure null."""
    from .usage import Usage as CellUsage

    return CellUsage(cost_source="unknown").to_json()


def spend_unknown(usage: Mapping[str, Any] | None, phases: Mapping[str, float]) -> bool:
    """A cell with no usage whose arm did run (it raised, say): its spend is unknown, not 0."""
    return not usage and "arm" in phases


def with_spend_known(outcome: CellOutcome) -> CellOutcome:
    """The outcome, its usage marked unknown when its arm ran but reported nothing (see ``spend_unknown``)."""
    return outcome.replace(usage=unknown_usage()) if spend_unknown(outcome.usage, outcome.phases) else outcome


class CellRecord(msgspec.Struct, frozen=True, gc=False):
    """What the summary and the report read from one ledger row.

    Decoded straight from a ledger line, skipping every other field, so a 100,000-row
    ledger is read fast and stays small in memory (see ``read_cells``).
    """

    instance_id: str
    arm: str
    status: str
    run_id: str | None = None
    trial: int = 1
    usage: Usage | None = None
    phases: dict[str, float] = {}
    started_at: str | None = None
    ended_at: str | None = None
    patch_file: str | None = None
    run_dir: str | None = None
    asked_model: str | None = None
    served_model: str | None = None
    model_mismatch: bool = False
    reused_from: str | None = None
    error: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CellRecord:
        return msgspec.convert(row, cls)

    @property
    def ran(self) -> bool:
        """Whether the arm ran: usage was recorded, or it has an ``arm`` phase (it raised).

        False for a cell whose arm never started (skipped, its setup failed): it spent nothing.
        """
        return (self.usage is not None and self.usage != NO_USAGE) or "arm" in self.phases

    @property
    def cost_usd(self) -> float | None:
        """Dollars spent; 0 for a cell that never ran, None when not known."""
        return self.spend()[1]

    @property
    def tokens(self) -> int | None:
        """Tokens spent; 0 for a cell that never ran, None when not known."""
        return self.spend()[2]

    def spend(self) -> tuple[bool, float | None, int | None]:
        """(ran, USD, tokens) in one pass: what a 100,000-cell report reads twice per cell."""
        if not self.ran:
            return False, 0.0, 0
        usage = self.usage
        if usage is None:
            return True, None, None
        return True, usage.cost_usd, usage.tokens

    @property
    def wall_seconds(self) -> float | None:
        """The sum of the cell's phases, else ended minus started; None if neither is known."""
        if self.phases:
            return math.fsum(self.phases.values())  # exact: the order of the phases (JSON sorts them) cannot matter
        try:
            seconds = (datetime.fromisoformat(self.ended_at or "")
                       - datetime.fromisoformat(self.started_at or "")).total_seconds()
        except ValueError:
            return None
        return seconds if seconds >= 0 else None

    @property
    def error_line(self) -> str | None:
        """The first line of the row's error text."""
        text = (self.error or "").strip()
        return text.splitlines()[0] if text else None

    @property
    def counts(self) -> bool:
        """Whether the cell counts in its arm's resolve rate."""
        return self.status in COUNTED_STATUSES

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"


def user_properties(status: str, usage: Mapping[str, Any] | None, patch_file: str | None,
                    phases: Mapping[str, float] | None = None) -> list[tuple[str, object]]:
    """A cell's status, spend and patch as pytest ``user_properties`` (for ``--junitxml`` and JSON reports).

    Cost and tokens are None when unknown (also when the arm ran, per ``phases``, but reported
    nothing); the patch is relative to the out dir, None when not graded.
    """
    cell = CellRecord("", "", status, usage=msgspec.convert(usage or {}, Usage), phases=dict(phases or {}))
    return [("arena_status", status), ("arena_cost_usd", cell.cost_usd), ("arena_tokens", cell.tokens),
            ("arena_patch", patch_file)]


def cell_records(rows: Iterable[Mapping[str, Any]]) -> list[CellRecord]:
    return [CellRecord.from_row(row) for row in rows]


def read_cells(path: Path) -> Iterator[CellRecord]:
    """Stream a ledger's cells; a torn, corrupt or malformed line is skipped with a warning naming it."""
    decoder = msgspec.json.Decoder(CellRecord)
    with open(path, "rb") as ledger:
        for number, line in enumerate(ledger, start=1):
            if not line.strip():
                continue
            try:
                yield decoder.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as error:
                warnings.warn(f"{path}:{number}: skipping a ledger line that is not a cell ({error})", stacklevel=2)


def ledger_cells(path: Path, run_id: str | None = None) -> list[CellRecord]:
    """The cells of ``run_id`` in the ledger at ``path`` (of its last run when None), reduced while streaming."""
    from .ledger import latest_run

    records = read_cells(path)
    if run_id is None:
        return latest_run(records, lambda cell: cell.run_id)
    return [cell for cell in records if cell.run_id == run_id]


def summarize(cells: Sequence[CellRecord], arm_order: Sequence[str] = (), run_id: str | None = None,
              budget: Mapping[str, Any] | None = None, sweep: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary of one run's cells: per arm, per pair of arms, and what to be warned about.

    Arms are listed in ``arm_order`` (the sweep's ``--arena-arms``), then by name. ``budget`` is the
    sweep's ``budget.json`` (caps and spend) when it had caps; ``sweep`` its line of ``sweeps.jsonl``.
    """
    by_arm: dict[str, list[CellRecord]] = defaultdict(list)
    for cell in cells:
        by_arm[cell.arm].append(cell)
    rank = {name: index for index, name in enumerate(arm_order)}
    names = sorted(by_arm, key=lambda name: (rank.get(name, len(rank)), name))
    gathered = {name: ArmCells.gather(by_arm[name]) for name in names}
    trials = max((cell.trial for cell in cells), default=0)
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "run_id": run_id,
        "arm_order": names,
        "rows": len(cells),
        "instances": len({cell.instance_id for cell in cells}),
        "trials": trials,
        "arms": [arm_summary(name, gathered[name]) for name in names],
        "pairs": paired_comparisons(names, gathered),
        "budget": dict(budget) if budget else None,
        "warnings": [warning for name in names for warning in arm_warnings(name, gathered[name])]
        + budget_warnings(budget) + repeat_warnings(trials),
        "sweep": dict(sweep) if sweep else None,
    }


@dataclass
class ArmCells:
    """One arm's cells, sorted out in a single pass (each derived value computed once)."""

    counted: list[CellRecord] = field(default_factory=list)
    resolved: int = 0
    ran: int = 0
    costs: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    unknown_cost: list[CellRecord] = field(default_factory=list)
    unknown_tokens: list[CellRecord] = field(default_factory=list)
    by_status: dict[str, list[CellRecord]] = field(default_factory=lambda: defaultdict(list))
    mismatched: list[CellRecord] = field(default_factory=list)
    reused: int = 0
    trials: int = 0
    #: (instance, trial) of the counted cells, and of those resolved: what pairing compares.
    keys: set[tuple[str, int]] = field(default_factory=set)
    resolved_keys: set[tuple[str, int]] = field(default_factory=set)

    @classmethod
    def gather(cls, cells: Sequence[CellRecord]) -> ArmCells:
        arm = cls()
        by_status, counted, keys, resolved_keys = arm.by_status, arm.counted, arm.keys, arm.resolved_keys
        costs, tokens, walls = arm.costs, arm.tokens, arm.walls
        trials = 0
        for cell in cells:
            by_status[cell.status].append(cell)
            if cell.trial > trials:
                trials = cell.trial
            if cell.status in COUNTED_STATUSES:
                counted.append(cell)
                key = (cell.instance_id, cell.trial)
                keys.add(key)
                if cell.status == "resolved":
                    arm.resolved += 1
                    resolved_keys.add(key)
                wall = cell.wall_seconds
                if wall is not None:
                    walls.append(wall)
            ran, cost, used = cell.spend()
            if ran:
                arm.ran += 1
                if cost is None:
                    arm.unknown_cost.append(cell)
                else:
                    costs.append(cost)
                if used is None:
                    arm.unknown_tokens.append(cell)
                else:
                    tokens.append(used)
            if cell.model_mismatch:
                arm.mismatched.append(cell)
            if cell.reused_from is not None:
                arm.reused += 1
        arm.trials = trials
        return arm


def arm_summary(name: str, arm: ArmCells) -> dict[str, Any]:
    """One arm's resolve rate (Wilson 95%), spend, efficiency, wall time and pass@k."""
    counted, resolved, ran = arm.counted, arm.resolved, arm.ran
    known_cost, known_tokens = math.fsum(arm.costs), sum(arm.tokens)
    cost_total = round(known_cost, 6) if not arm.unknown_cost else None
    token_total = known_tokens if not arm.unknown_tokens else None
    interval = wilson_interval(resolved, len(counted))
    statuses = {status: len(cells) for status, cells in sorted(arm.by_status.items())}
    return {
        "arm": name,
        "cells": len(counted),
        "resolved": resolved,
        "resolve_rate": resolved / len(counted) if counted else None,
        "resolve_rate_ci95": list(interval) if interval else None,
        "instances": len({instance_id for instance_id, _ in arm.keys}),
        "trials": arm.trials,
        "statuses": statuses,
        "harness_errors": statuses.get("harness_error", 0),
        "skipped": statuses.get("skipped_budget", 0),
        "interrupted": statuses.get("interrupted", 0),
        "reused": arm.reused,
        "model_mismatches": len(arm.mismatched),
        "cost_usd": cost_total,
        "cost_usd_known": round(known_cost, 6),
        "unknown_cost_cells": len(arm.unknown_cost),
        "tokens": token_total,
        "tokens_known": known_tokens,
        "unknown_token_cells": len(arm.unknown_tokens),
        "cost_per_cell_usd": cost_total / ran if cost_total is not None and ran else None,
        "cost_per_resolved_usd": per_resolved(cost_total, resolved),
        "tokens_per_resolved": per_resolved(token_total, resolved),
        "median_wall_seconds": median(arm.walls),
        "cost_distribution": five_numbers(arm.costs),
        "token_distribution": five_numbers(arm.tokens),
        "pass_at_k": pass_at_k_table(counted) if arm.trials > 1 else [],
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


def paired_comparisons(names: Sequence[str], arms: Mapping[str, ArmCells]) -> list[dict[str, Any]]:
    """For each pair of arms, the split over the (instance, trial) cells both have in the rate."""
    counted = {name: arms[name].keys for name in names}
    resolved = {name: arms[name].resolved_keys for name in names}
    pairs = []
    for first, second in combinations(names, 2):
        common = len(counted[first] & counted[second])
        if not common:
            continue
        both = len(resolved[first] & resolved[second])
        only_first = len((resolved[first] & counted[second]) - resolved[second])
        only_second = len((resolved[second] & counted[first]) - resolved[first])
        pairs.append({
            "arms": [first, second],
            "cells": common,
            "both": both,
            "only_first": only_first,
            "only_second": only_second,
            "neither": common - both - only_first - only_second,
            "rate_first": (both + only_first) / common,
            "rate_second": (both + only_second) / common,
            "mcnemar_p": mcnemar_exact_p(only_first, only_second),
        })
    return pairs


def _examples(cells: Sequence[CellRecord]) -> list[str]:
    return [f"{cell.instance_id}[{cell.arm}]" + (f" r{cell.trial}" if cell.trial > 1 else "")
            for cell in cells[:WARNING_EXAMPLES]]


def arm_warnings(name: str, arm: ArmCells) -> list[dict[str, Any]]:
    """What a reader must know before trusting this arm's numbers."""
    found: list[dict[str, Any]] = []

    def warn(kind: str, which: Sequence[CellRecord], message: str) -> None:
        if which:
            found.append({"kind": kind, "arm": name, "count": len(which), "message": message,
                          "examples": _examples(which)})

    harness = arm.by_status.get("harness_error", [])
    warn("harness_error", harness,
         f"{name}: {len(harness)} harness error(s), not counted in the rate (--arena-resume runs them again)")
    skipped = arm.by_status.get("skipped_budget", [])
    reasons = sorted({cell.error_line for cell in skipped if cell.error_line})
    warn("skipped_budget", skipped,
         f"{name}: {len(skipped)} cell(s) skipped, budget spent" + (f": {reasons[0]}" if reasons else ""))
    interrupted = arm.by_status.get("interrupted", [])
    warn("interrupted", interrupted, f"{name}: {len(interrupted)} cell(s) interrupted, not counted")
    if arm.mismatched:
        first = arm.mismatched[0]
        warn("model_mismatch", arm.mismatched,
             f"served model differs from the asked one in {len(arm.mismatched)} cell(s) of {name} "
             f"(e.g. asked {first.asked_model}, served {first.served_model})")
    warn("unknown_cost", arm.unknown_cost,
         f"{name}: cost unknown for {len(arm.unknown_cost)} of {arm.ran} cell(s), so its USD figures are n/a "
         f"(known part: ${math.fsum(arm.costs):.4f})")
    warn("unknown_tokens", arm.unknown_tokens,
         f"{name}: tokens unknown for {len(arm.unknown_tokens)} of {arm.ran} cell(s), so its token figures are n/a")
    return found


def repeat_warnings(trials: int) -> list[dict[str, Any]]:
    """With repeats, the interval and McNemar p count every trial as an independent cell: say so.

    Trials of one instance are correlated (the same task, often the same verdict), so both are
    optimistic. They are kept per cell, labelled, rather than replaced: per-instance numbers are
    in pass@k and pass^k.
    """
    if trials <= 1:
        return []
    return [{"kind": "correlated_trials", "arm": None, "count": trials, "examples": [],
             "message": f"{trials} trials per instance: the 95% CI and McNemar p assume independent trials; "
                        "trials of one instance are correlated, so the CI is too narrow and p too small "
                        "(pass@k and pass^k are per instance)"}]


def budget_warnings(budget: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Spent caps (from the controller's ``budget.json``), and dollars a cap could not count."""
    if not budget:
        return []
    found: list[dict[str, Any]] = [{"kind": "budget_exhausted", "arm": None if arm == SWEEP else arm, "count": 1,
                 "message": f"{reason}: no new cell started after that", "examples": []}
                for arm, reason in sorted((budget.get("exhausted") or {}).items())]
    spent = budget.get("spent") or {}
    unknown = spent.get("unknown_usd_cells") or 0
    if unknown and (budget.get("limits") or {}).get("sweep", {}).get("max_usd") is not None:
        found.append({"kind": "budget_unknown_cost", "arm": None, "count": unknown,
                         "message": f"{unknown} cell(s) of unknown USD cost were not counted against --arena-max-usd",
                         "examples": []})
    return found


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


def format_budget(budget: Mapping[str, Any]) -> list[str]:
    """What the sweep spent against its caps, then per model."""
    limits = (budget.get("limits") or {}).get("sweep") or {}
    spent = budget.get("spent") or {}
    usd_cap = "" if limits.get("max_usd") is None else f" of ${limits['max_usd']:g}"
    token_cap = "" if limits.get("max_tokens") is None else f" of {limits['max_tokens']:,}"
    unknown = spent.get("unknown_usd_cells") or 0
    unknown_tokens = spent.get("unknown_token_cells") or 0
    lines = [f"budget: ${usd(spent.get('usd'))}{usd_cap} and {count(spent.get('tokens'))} tokens{token_cap} spent"]
    uncounted = ([f"{unknown} cell(s) of unknown USD cost"] if unknown else []) + (
        [f"{unknown_tokens} cell(s) of unknown tokens"] if unknown_tokens else [])
    if uncounted:
        lines.append(f"  + {', '.join(uncounted)} (not in the totals)")
    for model, model_spend in sorted((budget.get("models") or {}).items()):
        lines.append(f"  {model}: ${usd(model_spend.get('usd'))}, {count(model_spend.get('tokens'))} tokens "
                     f"in {model_spend.get('cells')} cell(s)")
    return lines


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
    independent = ", trials as independent" if summary["trials"] > 1 else ""
    lines = [f"{summary['instances']} instances x {len(summary['arms'])} arms{trials}: {summary['rows']} cells "
             f"(95% CI: Wilson{independent}; n/a: not computable)", ""]
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
        lines += ["", *format_budget(summary["budget"])]
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
    """Write ``summary.json``, ``report.html`` and the viewer (each file atomically); return the summary and paths."""
    from .html_report import render_report
    from .viewer import write_viewer

    summary = summarize(cells, arm_order, run_id, budget, read_sweep_record(out, run_id))
    summary_path, report_path = out / SUMMARY_NAME, out / REPORT_NAME
    write_atomic(summary_path, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    write_atomic(report_path, render_report(summary, cells))
    return summary, [summary_path, report_path, write_viewer(out, summary)]


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
