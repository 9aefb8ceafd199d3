"""Summaries of a sweep's rows: per-arm results and paired comparisons.

Pure functions from ledger rows to plain data, and from that data to text, so
the terminal summary, ``summary.json`` and the ``swe-arena`` command share one
implementation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

from .outcome import STATUSES


def counts_in_rate(status: str) -> bool:
    return STATUSES.get(status, ("", False))[1]


def summarize(rows: Iterable[Mapping[str, Any]], arm_order: Sequence[str] = ()) -> dict[str, Any]:
    """Per-arm totals and, for each pair of arms, the split over their common cells.

    Arms are listed in ``arm_order`` (the sweep's ``--arena-arms``), then by name.
    """
    arms: dict[str, dict[str, Any]] = {}
    verdicts: dict[str, dict[tuple[str, int], bool]] = {}
    for row in rows:
        arm = row["arm"]
        entry = arms.setdefault(arm, {
            "arm": arm, "cells": 0, "resolved": 0, "harness_errors": 0, "skipped": 0,
            "statuses": {}, "tokens": 0, "cost_usd": 0.0, "unknown_cost_cells": 0, "model_mismatch": 0,
        })
        entry["model_mismatch"] += bool(row.get("model_mismatch"))
        status = row["status"]
        entry["statuses"][status] = entry["statuses"].get(status, 0) + 1
        if status == "harness_error":
            entry["harness_errors"] += 1
        if STATUSES.get(status, ("",))[0] == "skipped":
            entry["skipped"] += 1
        if counts_in_rate(status):
            entry["cells"] += 1
            entry["resolved"] += status == "resolved"
            verdicts.setdefault(arm, {})[(row["instance_id"], row.get("trial", 1))] = status == "resolved"
        usage = row.get("usage") or {}
        tokens = sum(usage.get(k) or 0 for k in ("input_tokens", "output_tokens", "reasoning_tokens"))
        entry["tokens"] += tokens
        if usage.get("cost_usd") is None:
            if usage:
                entry["unknown_cost_cells"] += 1
        else:
            entry["cost_usd"] += usage["cost_usd"]
    rank = {name: index for index, name in enumerate(arm_order)}
    arms = dict(sorted(arms.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))
    for entry in arms.values():
        entry["resolve_rate"] = entry["resolved"] / entry["cells"] if entry["cells"] else None
        entry["cost_usd"] = round(entry["cost_usd"], 6)
    pairs = []
    for first, second in combinations(list(arms), 2):
        common = sorted(set(verdicts.get(first, {})) & set(verdicts.get(second, {})))
        if not common:
            continue
        a, b = verdicts[first], verdicts[second]
        pairs.append({
            "arms": [first, second],
            "cells": len(common),
            "both": sum(a[c] and b[c] for c in common),
            "only_first": sum(a[c] and not b[c] for c in common),
            "only_second": sum(b[c] and not a[c] for c in common),
            "neither": sum(not a[c] and not b[c] for c in common),
        })
    return {"arms": list(arms.values()), "pairs": pairs}


def _rate(entry: Mapping[str, Any]) -> str:
    rate = entry["resolve_rate"]
    return "n/a" if rate is None else f"{100 * rate:.1f}%"


def _cost(entry: Mapping[str, Any]) -> str:
    text = f"{entry['cost_usd']:.4f}"
    return text + "+?" if entry["unknown_cost_cells"] else text


def format_table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    def line(cells: list[str]) -> str:
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def format_summary(summary: Mapping[str, Any]) -> list[str]:
    """The terminal summary: the per-arm table, then the paired splits."""
    header = ["arm", "cells", "resolved", "rate", "harness err", "tokens", "USD"]
    body = [
        [e["arm"], str(e["cells"]), str(e["resolved"]), _rate(e), str(e["harness_errors"]),
         f"{e['tokens']:,}", _cost(e)]
        for e in summary["arms"]
    ]
    lines = format_table(header, body)
    if summary["pairs"]:
        lines.append("")
        pair_rows = [
            [f"{p['arms'][0]} vs {p['arms'][1]}", str(p["cells"]), str(p["both"]),
             str(p["only_first"]), str(p["only_second"]), str(p["neither"])]
            for p in summary["pairs"]
        ]
        lines += format_table(["paired", "cells", "both", "only A", "only B", "neither"], pair_rows)
    return lines + format_warnings(summary)


def format_warnings(summary: Mapping[str, Any]) -> list[str]:
    """Budget and served-model lines: what a reader must know before trusting the table."""
    lines: list[str] = []
    mismatched = {e["arm"]: e["model_mismatch"] for e in summary["arms"] if e.get("model_mismatch")}
    if mismatched:
        arms = ", ".join(f"{arm} ({n})" for arm, n in mismatched.items())
        lines.append(f"warning: served model differs from the asked one in {sum(mismatched.values())} cell(s): {arms}")
    budget = summary.get("budget")
    if budget:
        spent = budget["spent"]
        cap = budget["limits"]["sweep"]
        caps = [f"${cap['max_usd']:g}" if cap["max_usd"] is not None else "",
                f"{cap['max_tokens']:,} tokens" if cap["max_tokens"] is not None else ""]
        of = " and ".join(c for c in caps if c)
        text = f"budget: ${spent['usd']:.4f} and {spent['tokens']:,} tokens spent" + (f" of {of}" if of else "")
        if spent["unknown_usd_cells"]:
            text += f"; {spent['unknown_usd_cells']} cell(s) of unknown cost"
        skipped = sum(e["skipped"] for e in summary["arms"])
        if skipped:
            text += f"; {skipped} cell(s) skipped: budget exhausted"
        lines += ["", text]
        for model, spend in budget["models"].items():
            lines.append(f"  {model}: ${spend['usd']:.4f}, {spend['tokens']:,} tokens in {spend['cells']} cell(s)")
    return lines
