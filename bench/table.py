"""Regenerate bench/README.md's results table from the JSON the scripts write (``--json``).

    python bench/table.py bench/results/*.json            # rewrite the table in bench/README.md
    python bench/table.py --print bench/results/*.json    # print it instead

Runs of the same script and figure (same title and figure name) are combined: the table
shows the median of their values, baselines and ratios, how many runs there were, and the
load averages the scripts printed at the end of each run. The table sits between the
``<!-- results:start -->`` and ``<!-- results:end -->`` markers of the README.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent / "README.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"
LOAD = re.compile(r"load average at the end: (?P<load>[\d.]+)")


def load_of(run: dict[str, Any]) -> str:
    for note in run.get("notes", []):
        found = LOAD.search(note)
        if found:
            return found["load"]
    return "?"


def table(runs: list[dict[str, Any]], sources: list[str]) -> list[str]:
    """The markdown table: one line per (script, figure), medians over the runs that have it."""
    grouped: dict[tuple[str, str], list[tuple[dict[str, Any], str, str]]] = defaultdict(list)
    for run, source in zip(runs, sources, strict=True):
        for figure in run["figures"]:
            grouped[(run["title"], figure["name"])].append((figure, load_of(run), source))
    lines = ["| benchmark | figure | value (median) | baseline | baseline value (median) | ratio (median) | "
             "target | runs | load at the end of each run |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (title, name), entries in grouped.items():
        figures = [figure for figure, _, _ in entries]
        unit = figures[0]["unit"]
        value = statistics.median(figure["value"] for figure in figures)
        baseline = statistics.median(figure["baseline"] for figure in figures)
        ratio = statistics.median(figure["ratio"] for figure in figures)
        target = figures[0].get("target") or ""
        verdicts = {figure.get("meets_target") for figure in figures}
        verdict = "" if not target else "met" if verdicts == {True} else "missed" if verdicts == {False} else "mixed"
        loads = ", ".join(load for _, load, _ in entries)
        lines.append(f"| {title} | {name} | {value:.4g} {unit} | {figures[0]['baseline_name']} | "
                     f"{baseline:.4g} {unit} | {ratio:.2f}x | {target} {verdict}".rstrip()
                     + f" | {len(entries)} | {loads} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="JSON files written by the scripts' --json")
    parser.add_argument("--print", action="store_true", help="print the table instead of rewriting the README")
    args = parser.parse_args()
    runs = [json.loads(path.read_text()) for path in args.results]
    lines = table(runs, [str(path) for path in args.results])
    if args.print:
        print("\n".join(lines))
        return
    text = README.read_text()
    if START not in text or END not in text:
        sys.exit(f"{README}: no {START} ... {END} markers to put the table between")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{START}\n" + "\n".join(lines) + f"\n{END}{tail}")
    print(f"wrote {len(lines) - 2} figures from {len(runs)} runs to {README}")


if __name__ == "__main__":
    main()
