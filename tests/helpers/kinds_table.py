"""The agent kinds' closing table, from the figures tests/arms/test_agent_kinds.py records.

    AGENT_KINDS_FIGURES=/tmp/kinds.jsonl python3 -m pytest tests/arms/test_agent_kinds.py -p no:randomly \\
        -k "documented_example or max_usd"
    python3 tests/helpers/kinds_table.py /tmp/kinds.jsonl

prints agent | version | resolved | tokens ledger vs endpoint | cost ledger vs agent | live cap |
seconds per cell, one row per kind, from the documented-example cells and the ``max_usd`` live-cap cell.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HEADER = ("agent", "version (pinned / provenance)", "resolved", "tokens ledger vs endpoint", "cost ledger vs agent",
          "live cap (max_usd)", "seconds per cell (arm / cell)")


def usd(value: float | None) -> str:
    return "none" if value is None else f"${value:.8f}".rstrip("0")


def kind_row(kind: str, cells: list[dict[str, Any]], caps: list[dict[str, Any]]) -> list[str]:
    versions = sorted({f"{cell['pinned_version']} / {cell['agent_version']}" for cell in cells})
    resolved = sum(cell["status"] == "resolved" for cell in cells)
    tokens = ", ".join(f"{cell['tokens_ledger']} / {cell['tokens_endpoint']}" for cell in cells)
    costs = ", ".join(f"{usd(cell['cost_ledger'])} / "
                      + (usd(cell["cost_agent"]) if cell["cost_agent"] is not None
                         else f"none ({cell['cost_source']})") for cell in cells)
    cap = "; ".join(f"{cap['status']} at {usd(cap['cost_ledger'])}, tokens {cap['tokens_ledger']} / "
                    f"{cap['tokens_endpoint']}, {cap['calls_answered']} call answered" for cap in caps) or "not run"
    seconds = ", ".join(f"{cell['seconds_arm']} / {cell['seconds_cell']}" for cell in cells)
    return [kind, "; ".join(versions), f"{resolved}/{len(cells)}", tokens, costs, cap, seconds]


def table(lines: list[dict[str, Any]]) -> str:
    kinds = list(dict.fromkeys(line["kind"] for line in lines))
    rows = [HEADER, tuple("---" for _ in HEADER)]
    for kind in kinds:
        cells = [line for line in lines if line["kind"] == kind and line["test"] == "documented_example"]
        caps = [line for line in lines if line["kind"] == kind and line["test"] == "live_cap"
                and line["stop"] == "max_usd"]
        rows.append(tuple(kind_row(kind, cells, caps)))
    return "".join("| " + " | ".join(row) + " |\n" for row in rows)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 tests/helpers/kinds_table.py FIGURES.jsonl")
    path = Path(sys.argv[1])
    sys.stdout.write(table([json.loads(line) for line in path.read_text().splitlines() if line.strip()]))
