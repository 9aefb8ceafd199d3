"""Summaries of a sweep: per-arm results, paired comparisons and warnings (``summary.json``).

``summarize`` turns one run's ``CellRecord``s into plain data; ``text.format_summary`` turns
that into the terminal text. The plugin and the ``swe-arena`` command share these functions,
so both show the same numbers. A value that cannot be computed is None ("n/a").
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from ..ledger.reader import CellRecord
from ..outcome import COUNTED_STATUSES, CellStatus
from ..spend.budget import SWEEP
from .stats import (
    cost_frontier,
    discrimination,
    five_numbers,
    instance_rates,
    mean_interval,
    median,
    paired_comparison,
    pass_at_k,
    pass_hat_k,
    per_resolved,
    significance_groups,
    trial_rates,
    wilson_interval,
)

SUMMARY_SCHEMA_VERSION = 1
#: How many example cells a warning lists.
WARNING_EXAMPLES = 5


def summarize(cells: Sequence[CellRecord], arm_order: Sequence[str] = (), run_id: str | None = None,
              budget: Mapping[str, Any] | None = None, sweep: Mapping[str, Any] | None = None,
              subset: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary of one run's cells: per arm, per pair of arms, and what to be warned about.

    ``subset`` says which instances the rates are over when the sweep excluded some (``--arena-exclude``).

    Arms are listed in ``arm_order`` (the sweep's ``--arena-arms``), then by name. ``budget`` is the
    sweep's ``budget.json`` (caps and spend) when it had caps; ``sweep`` its line of ``sweeps.jsonl``.
    """
    by_arm: dict[str, list[CellRecord]] = defaultdict(list)
    for cell in cells:
        by_arm[cell.arm].append(cell)
    rank = {name: index for index, name in enumerate(arm_order)}
    names = sorted(by_arm, key=lambda name: (rank.get(name, len(rank)), name))
    same_keys: dict[tuple[str, int], tuple[str, int]] = {}
    gathered = {name: ArmCells.gather(by_arm[name], same_keys) for name in names}
    trials = max((cell.trial for cell in cells), default=0)
    verdicts = {name: gathered[name].verdicts() for name in names}
    arms = [arm_summary(name, gathered[name], verdicts[name]) for name in names]
    pairs = paired_comparisons(names, verdicts)
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "run_id": run_id,
        "arm_order": names,
        "rows": len(cells),
        "instances": len({cell.instance_id for cell in cells}),
        "trials": trials,
        "arms": arms,
        "pairs": pairs,
        "groups": significance_groups({arm["arm"]: arm["resolve_rate"] for arm in arms}, pairs),
        "discrimination": discrimination(verdicts),
        "frontier": {"per_cell": cost_frontier(arms, "cost_per_cell_usd"),
                     "per_resolved": cost_frontier(arms, "cost_per_resolved_usd"),
                     "unplaced": [arm["arm"] for arm in arms if arm["cost_usd"] is None]},
        "subset": dict(subset) if subset else (sweep or {}).get("subset"),
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
    #: Cells whose arm ran without a sandbox (``sandbox: none``).
    unsandboxed: list[CellRecord] = field(default_factory=list)
    unsealed: list[CellRecord] = field(default_factory=list)
    #: cells whose agent reported other usage than the meter counted
    misreported: list[CellRecord] = field(default_factory=list)
    #: Cells whose row carries integrity flags (``details.integrity``), and how many cells per flag kind.
    flagged: list[CellRecord] = field(default_factory=list)
    flag_kinds: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: Cells whose recorded patch was applied other than by plain ``git apply`` (3way, reject, fuzz, ...).
    non_plain: list[CellRecord] = field(default_factory=list)
    reused: int = 0
    trials: int = 0
    #: (instance, trial) of the counted cells, and of those resolved: what pairing compares.
    keys: set[tuple[str, int]] = field(default_factory=set)
    resolved_keys: set[tuple[str, int]] = field(default_factory=set)

    @classmethod
    def gather(cls, cells: Sequence[CellRecord], same_keys: dict[tuple[str, int], tuple[str, int]]) -> ArmCells:
        """Sort out one arm's cells; ``same_keys`` (shared by the arms of a summary) gives every arm the same
        key object for an (instance, trial), so pairing the arms' sets compares keys by identity, not by value."""
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
                key = same_keys.setdefault(key, key)
                keys.add(key)
                if cell.status == CellStatus.RESOLVED:
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
            if ran and cell.sandbox == "none":
                arm.unsandboxed.append(cell)
            details = cell.details
            if details is not None:
                if details.misreported:
                    arm.misreported.append(cell)
                if ran and details.unsealed:
                    arm.unsealed.append(cell)
                kinds = details.integrity_kinds
                if kinds:
                    arm.flagged.append(cell)
                    for kind in kinds:
                        arm.flag_kinds[kind] += 1
            if cell.provenance.non_plain_apply is not None:
                arm.non_plain.append(cell)
            if cell.reused_from is not None:
                arm.reused += 1
        arm.trials = trials
        return arm

    def verdicts(self) -> dict[tuple[str, int], bool]:
        """Each counted (instance, trial) and whether it resolved: what the statistics pair up."""
        resolved = self.resolved_keys
        return {key: key in resolved for key in self.keys}


def arm_summary(name: str, arm: ArmCells, verdicts: Mapping[tuple[str, int], bool] | None = None) -> dict[str, Any]:
    """One arm's resolve rate (Wilson 95%), spend, efficiency, wall time, pass@k, and its rate per trial."""
    verdicts = arm.verdicts() if verdicts is None else verdicts
    per_instance = instance_rates(verdicts)
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
        "harness_errors": statuses.get(CellStatus.HARNESS_ERROR, 0),
        "config_errors": statuses.get(CellStatus.CONFIG_ERROR, 0),
        "skipped": statuses.get(CellStatus.SKIPPED_BUDGET, 0) + statuses.get(CellStatus.SKIPPED_CONFIG, 0),
        "interrupted": statuses.get(CellStatus.INTERRUPTED, 0),
        "reused": arm.reused,
        "model_mismatches": len(arm.mismatched),
        "integrity_flagged": len(arm.flagged),
        "integrity_flagged_resolved": sum(cell.status == CellStatus.RESOLVED for cell in arm.flagged),
        "integrity_flags": dict(sorted(arm.flag_kinds.items())),
        "unguarded": len(arm.unsandboxed),
        "unsealed": len(arm.unsealed),
        "non_plain_applies": len(arm.non_plain),
        "cost_usd": cost_total,
        "cost_usd_known": round(known_cost, 6),
        "unknown_cost_cells": len(arm.unknown_cost),
        "tokens": token_total,
        "tokens_known": known_tokens,
        "unknown_token_cells": len(arm.unknown_tokens),
        "cost_per_cell_usd": cost_total / ran if cost_total is not None and ran else None,
        "cost_per_cell_ci95": _rounded_interval(mean_interval(arm.costs)) if cost_total is not None else None,
        "cost_per_resolved_usd": per_resolved(cost_total, resolved),
        "tokens_per_resolved": per_resolved(token_total, resolved),
        "median_wall_seconds": median(arm.walls),
        "cost_distribution": five_numbers(arm.costs),
        "token_distribution": five_numbers(arm.tokens),
        "pass_at_k": pass_at_k_table(counted) if arm.trials > 1 else [],
        "trial_rates": trial_rates(verdicts),
        # An instance whose trials disagree: the arm (or the instance's tests) is not deterministic there.
        "flaky_instances": {iid: [passes, runs] for iid, (passes, runs) in per_instance.items()
                            if 0 < passes < runs},
    }


def _rounded_interval(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [round(max(0.0, interval[0]), 6), round(interval[1], 6)]


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


def paired_comparisons(names: Sequence[str], verdicts: Mapping[str, Mapping[tuple[str, int], bool]]
                       ) -> list[dict[str, Any]]:
    """For each pair of arms, the split, McNemar p and bootstrap interval over the cells both have in the rate.

    The bootstrap is seeded by the pair's names, so the same sweep gives the same intervals.
    """
    pairs = []
    for first, second in combinations(names, 2):
        compared = paired_comparison(verdicts[first], verdicts[second], seed=zlib.crc32(f"{first}\0{second}".encode()))
        if compared is not None:
            pairs.append({"arms": [first, second], **compared})
    return pairs


def _examples(cells: Sequence[CellRecord]) -> list[str]:
    return [cell.name.shown for cell in cells[:WARNING_EXAMPLES]]


def arm_warnings(name: str, arm: ArmCells) -> list[dict[str, Any]]:
    """What a reader must know before trusting this arm's numbers."""
    found: list[dict[str, Any]] = []

    def warn(kind: str, which: Sequence[CellRecord], message: str) -> None:
        if which:
            found.append({"kind": str(kind), "arm": name, "count": len(which), "message": message,
                          "examples": _examples(which)})

    harness = arm.by_status.get(CellStatus.HARNESS_ERROR, [])
    warn(CellStatus.HARNESS_ERROR, harness,
         f"{name}: {len(harness)} harness error(s), not counted in the rate (--arena-resume runs them again)")
    skipped = arm.by_status.get(CellStatus.SKIPPED_BUDGET, [])
    reasons = sorted({cell.error_line for cell in skipped if cell.error_line})
    warn(CellStatus.SKIPPED_BUDGET, skipped,
         f"{name}: {len(skipped)} cell(s) skipped, budget spent" + (f": {reasons[0]}" if reasons else ""))
    interrupted = arm.by_status.get(CellStatus.INTERRUPTED, [])
    warn(CellStatus.INTERRUPTED, interrupted, f"{name}: {len(interrupted)} cell(s) interrupted, not counted")
    if arm.mismatched:
        first = arm.mismatched[0]
        warn("model_mismatch", arm.mismatched,
             f"served model differs from the asked one in {len(arm.mismatched)} cell(s) of {name} "
             f"(e.g. asked {first.asked_model}, served {first.served_model})")
    warn("unsandboxed", arm.unsandboxed,
         f"{name}: {len(arm.unsandboxed)} cell(s) ran without a sandbox (sandbox: none): the agent could reach the "
         "harness's files (the cache, the instance files, the out dir), so its results are not guarded")
    if arm.flagged:
        resolved_flagged = sum(cell.status == CellStatus.RESOLVED for cell in arm.flagged)
        kinds = ", ".join(f"{kind} {cells}" for kind, cells in sorted(arm.flag_kinds.items()))
        warn("integrity", arm.flagged,
             f"{name}: {len(arm.flagged)} cell(s) with integrity flags ({kinds}), {resolved_flagged} of them "
             "resolved: the grading took part of their patch from base or found it reaching into the runner "
             "(details.integrity of their rows)")
    if arm.non_plain:
        methods: dict[str, int] = defaultdict(int)
        for cell in arm.non_plain:
            methods[str(cell.provenance.apply_method)] += 1
        warn("non_plain_apply", arm.non_plain,
             f"{name}: {len(arm.non_plain)} recorded patch(es) applied other than by plain git apply ("
             + ", ".join(f"{method} {cells}" for method, cells in sorted(methods.items()))
             + "): the tree graded may differ from the recorded patch (provenance.apply_method of their rows)")
    if arm.misreported:
        first = arm.misreported[0]
        note = first.details.misreported if first.details is not None else None
        warn("misreported_usage", arm.misreported,
             f"{name}: metered usage differs from the agent's reported usage in {len(arm.misreported)} cell(s); "
             f"the ledger counts the metered (e.g. {first.name.shown}: {note})")
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
