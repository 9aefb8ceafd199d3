"""Two sweeps side by side: per-arm deltas and the instances that flipped.

Every comparison says what it compares. First, per arm, the (instance, trial) cells both
sweeps have in the arm's rate: their rates, cost and tokens on those cells only, the flips
and the exact McNemar test (as the paired comparison between arms), so a 10-cell sweep is
never set against a 1-cell one as if they were alike. Then each sweep's own numbers over all
its cells (``summary.summarize``, as its summary shows them), labelled as such, with a warning
for each arm whose cells differ. ``gate`` checks ``--fail-on`` limits on the common cells.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..ledger.reader import CellRecord
from ..naming import trial_name
from .stats import mcnemar_exact_p, per_resolved
from .summary import summarize
from .text import UNGUARDED_MARK, UNGUARDED_NOTE, format_table, p_value, percent, usd


def _delta(first: float | None, second: float | None) -> float | None:
    return None if first is None or second is None else second - first


def _spent(cells: Sequence[CellRecord]) -> dict[str, float | int | None]:
    """Rate, dollars and tokens of some cells (the common ones of an arm); None where not known."""
    if not cells:
        return {metric: None for metric in ("resolve_rate", "cost_usd", "cost_per_cell_usd",
                                            "cost_per_resolved_usd", "tokens")}
    resolved = sum(cell.resolved for cell in cells)
    spent = [cell.spend() for cell in cells]
    costs = [cost for _, cost, _ in spent]
    tokens = [used for _, _, used in spent]
    cost = None if None in costs else math.fsum(c for c in costs if c is not None)
    return {
        "resolve_rate": resolved / len(cells),
        "cost_usd": cost,
        "cost_per_cell_usd": None if cost is None else cost / len(cells),
        "cost_per_resolved_usd": per_resolved(cost, resolved),
        "tokens": None if None in tokens else sum(t for t in tokens if t is not None),
    }


def compare_runs(cells_a: Sequence[CellRecord], cells_b: Sequence[CellRecord],
                 arm_order: Sequence[str] = ()) -> dict[str, Any]:
    """Per-arm rates and costs of sweep A and B, their differences (B - A) and per-instance flips."""
    summary_a, summary_b = summarize(cells_a, arm_order), summarize(cells_b, arm_order)
    arms_a = {arm["arm"]: arm for arm in summary_a["arms"]}
    arms_b = {arm["arm"]: arm for arm in summary_b["arms"]}
    order = [name for name in summary_a["arm_order"] if name in arms_b]
    arms = []
    for name in order:
        a, b = arms_a[name], arms_b[name]
        counted_a = {(c.instance_id, c.trial): c for c in cells_a if c.arm == name and c.counts}
        counted_b = {(c.instance_id, c.trial): c for c in cells_b if c.arm == name and c.counts}
        verdicts_a = {key: cell.resolved for key, cell in counted_a.items()}
        verdicts_b = {key: cell.resolved for key, cell in counted_b.items()}
        common = sorted(verdicts_a.keys() & verdicts_b.keys())
        fixed = [key for key in common if verdicts_b[key] and not verdicts_a[key]]
        broken = [key for key in common if verdicts_a[key] and not verdicts_b[key]]
        # Over the cells both sweeps counted: the population the flips and McNemar p describe.
        common_a = sum(verdicts_a[key] for key in common) / len(common) if common else None
        common_b = sum(verdicts_b[key] for key in common) / len(common) if common else None
        arms.append({
            "arm": name,
            "unguarded_a": a["unguarded"], "unguarded_b": b["unguarded"],
            "cells_a": a["cells"], "cells_b": b["cells"],
            "rate_a": a["resolve_rate"], "rate_b": b["resolve_rate"],
            "rate_delta": _delta(a["resolve_rate"], b["resolve_rate"]),
            "cost_usd_a": a["cost_usd"], "cost_usd_b": b["cost_usd"],
            "cost_usd_delta": _delta(a["cost_usd"], b["cost_usd"]),
            "cost_per_resolved_usd_a": a["cost_per_resolved_usd"],
            "cost_per_resolved_usd_b": b["cost_per_resolved_usd"],
            "common_cells": len(common),
            "common_rate_a": common_a, "common_rate_b": common_b,
            "common_rate_delta": _delta(common_a, common_b),
            "common": {"a": _spent([counted_a[key] for key in common]),
                       "b": _spent([counted_b[key] for key in common])},
            "counted_a": len(counted_a), "counted_b": len(counted_b),
            "fixed": [trial_name(*key) for key in fixed],
            "broken": [trial_name(*key) for key in broken],
            "mcnemar_p": mcnemar_exact_p(len(broken), len(fixed)),
        })
    return {
        "run_a": _run_id(cells_a), "run_b": _run_id(cells_b),
        "trials": max(summary_a["trials"], summary_b["trials"]),
        "arms": arms,
        "only_in_a": [name for name in summary_a["arm_order"] if name not in arms_b],
        "only_in_b": [name for name in summary_b["arm_order"] if name not in arms_a],
    }


def _run_id(cells: Sequence[CellRecord]) -> str | None:
    return cells[-1].run_id if cells else None


def _shown(arm: Mapping[str, Any]) -> str:
    """The arm's name, marked when either sweep ran some of its cells without a sandbox."""
    return str(arm["arm"]) + (UNGUARDED_MARK if arm.get("unguarded_a") or arm.get("unguarded_b") else "")


def _signed_points(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f}pp"


def _signed_usd(value: float | None) -> str:
    return "n/a" if value is None else ("+" if value >= 0 else "-") + usd(abs(value))


def format_comparison(comparison: Mapping[str, Any], label_a: str, label_b: str) -> list[str]:
    """The comparison as text: the common cells of each arm first, then every cell of each sweep, labelled."""
    lines = [f"A: {label_a} (run {comparison['run_a']})", f"B: {label_b} (run {comparison['run_b']})", "",
             "Paired: per arm, the cells (instance, trial) both sweeps counted in its rate"]
    lines += format_table(
        ["on common cells", "cells", "rate A", "rate B", "delta", "USD A", "USD B", "delta", "fixed", "broken",
         "McNemar p"],
        [[_shown(arm), str(arm["common_cells"]), percent(arm["common_rate_a"]), percent(arm["common_rate_b"]),
          _signed_points(arm["common_rate_delta"]), usd(arm["common"]["a"]["cost_usd"]),
          usd(arm["common"]["b"]["cost_usd"]),
          _signed_usd(_delta(arm["common"]["a"]["cost_usd"], arm["common"]["b"]["cost_usd"])),
          str(len(arm["fixed"])), str(len(arm["broken"])), p_value(arm["mcnemar_p"])]
         for arm in comparison["arms"]],
    )
    if comparison.get("trials", 1) > 1:
        lines.append(f"{comparison['trials']} trials per instance: McNemar p assumes independent trials "
                     "(trials of one instance are correlated, so p is too small)")
    lines += ["", "Not paired: each sweep over all its cells (as its own summary shows it)"]
    lines += format_table(
        ["all cells", "cells A", "rate A", "cells B", "rate B", "delta", "USD A", "USD B", "delta"],
        [[_shown(arm), str(arm["cells_a"]), percent(arm["rate_a"]), str(arm["cells_b"]), percent(arm["rate_b"]),
          _signed_points(arm["rate_delta"]), usd(arm["cost_usd_a"]), usd(arm["cost_usd_b"]),
          _signed_usd(arm["cost_usd_delta"])]
         for arm in comparison["arms"]],
    )
    unguarded = [f"{arm['arm']} (A {arm['unguarded_a']}, B {arm['unguarded_b']})" for arm in comparison["arms"]
                 if arm.get("unguarded_a") or arm.get("unguarded_b")]
    if unguarded:
        lines.append(f"{UNGUARDED_NOTE}: {', '.join(unguarded)}")
    for arm in comparison["arms"]:
        counted_a, counted_b = arm["counted_a"], arm["counted_b"]
        if arm["cells_a"] != arm["cells_b"] or counted_a != arm["common_cells"] or counted_b != arm["common_cells"]:
            lines.append(f"warning: {arm['arm']}: different cells (A {arm['cells_a']}, {counted_a} counted; "
                         f"B {arm['cells_b']}, {counted_b} counted; {arm['common_cells']} in both): "
                         "read its paired row")
    for side, names in (("A", comparison["only_in_a"]), ("B", comparison["only_in_b"])):
        if names:
            lines.append(f"only in {side}: {', '.join(names)}")
    for arm in comparison["arms"]:
        if arm["fixed"] or arm["broken"]:
            lines += ["", f"{arm['arm']}: {len(arm['fixed'])} fixed in B (+), {len(arm['broken'])} broken in B (-)"]
            lines += [f"  + {name}" for name in arm["fixed"]] + [f"  - {name}" for name in arm["broken"]]
    return lines
