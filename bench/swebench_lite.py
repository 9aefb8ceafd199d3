"""GOLD and EMPTY on real SWE-bench Lite rows through the harness, shipped specs only (by hand, not in CI).

    python bench/swebench_lite.py --rows ../shared/data/swe-bench-lite-test.json --repos /tmp/swe-repos \\
        --out /tmp/lite-run --table docs/swe-bench-lite-check.md psf__requests-2317 pallets__flask-4045 ...

The rows are written unchanged (no ``env``, no ``verify``: SWE-bench's runner for the repo, its log
parser and rules, and the shipped spec for its repo/version, resolved as of the row's date) into a
throwaway suite and run with ``pytest --arena-arms=GOLD,EMPTY``. ``--repos`` holds the repositories
as ``owner__name`` (clones or bare mirrors). The table has, per row, GOLD's and EMPTY's status, the
environment's and verify's seconds (GOLD's cell; EMPTY's reuses the resolved environment) and, for
anything but GOLD resolved / EMPTY unresolved, the reason from the ledger. Expected: GOLD resolved
on every row whose environment builds, EMPTY on none, and every other row a harness_error saying why.
The summary line gives the load average (1 minute) at the start and at the end.

``--grading-rules NAME`` grades with another rule set (``--arena-grading-rules``; its cells are other cells).
``--earlier OUT`` (repeatable) takes a row's cells from an earlier run's out dir when this run has none
of them (a run stopped part-way and continued for the rest); ``--no-run`` only writes the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

PYPROJECT = """[tool.pytest.ini_options]
arena_instances = ["instances"]
[tool.swe_arena]
"""


def run_suite(rows: list[dict[str, Any]], repos: Path, out: Path, cache: Path, workers: int,
              timeout: float, rules: str) -> float:
    suite = out / "suite"
    (suite / "instances").mkdir(parents=True, exist_ok=True)
    (suite / "pyproject.toml").write_text(PYPROJECT)
    (suite / "instances" / "lite.json").write_text(json.dumps(rows, indent=1))
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--arena-arms=GOLD,EMPTY",
            f"--arena-repos={repos}", f"--arena-out={out / 'arena-out'}", f"--arena-cache={cache}",
            f"--arena-verify-timeout={timeout:g}", f"--arena-grading-rules={rules}", "--arena-resume", "instances"]
    if workers > 1:
        argv += ["-n", str(workers)]
    clock = time.monotonic()
    subprocess.run(argv, cwd=suite, check=False, env={**os.environ, "COLUMNS": "200"})
    return time.monotonic() - clock


def read_ledger(out: Path) -> dict[tuple[str, str], dict[str, Any]]:
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    ledger = out / "arena-out" / "ledger.jsonl"
    for line in (ledger.read_text().splitlines() if ledger.is_file() else []):
        if line.strip():
            row = json.loads(line)
            cells[row["instance_id"], row["arm"]] = row  # the last row of a cell stands (resume)
    return cells


def reason(row: dict[str, Any] | None) -> str:
    if row is None:
        return "not run"
    text = " ".join(str(row.get("error") or "").split())
    return text[:240].replace("|", "\\|")


def table(rows: list[dict[str, Any]], cells: dict[tuple[str, str], dict[str, Any]]) -> tuple[str, Counter[str]]:
    lines = ["| instance | GOLD | EMPTY | env s | verify s | reason |", "|---|---|---|---|---|---|"]
    counts: Counter[str] = Counter()
    for row in rows:
        gold, empty = cells.get((row["instance_id"], "GOLD")), cells.get((row["instance_id"], "EMPTY"))
        gold_status = gold["status"] if gold else "not run"
        empty_status = empty["status"] if empty else "not run"
        phases = (gold or {}).get("phases") or {}
        expected = gold_status == "resolved" and empty_status == "unresolved"
        counts["expected" if expected else f"GOLD {gold_status} / EMPTY {empty_status}"] += 1
        why = "" if expected else reason(gold if gold_status != "resolved" else empty)
        lines.append(f"| {row['instance_id']} | {gold_status} | {empty_status} | {phases.get('env', 0):.0f} | "
                     f"{phases.get('verify', 0):.0f} | {why} |")
    return "\n".join(lines) + "\n", counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("instance_ids", nargs="+")
    parser.add_argument("--rows", type=Path, default=ROOT.parent.parent / "shared" / "data" /
                        "swe-bench-lite-test.json")
    parser.add_argument("--repos", type=Path, required=True, help="repositories as owner__name")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cache", type=Path, help="shared cache (default: OUT/cache)")
    parser.add_argument("-n", "--workers", type=int, default=1)
    parser.add_argument("--verify-timeout", type=float, default=1800)
    parser.add_argument("--grading-rules", default="swebench",
                        help="--arena-grading-rules for the run (default: swebench, SWE-bench 5.0.2's)")
    parser.add_argument("--table", type=Path, help="also write the markdown table here")
    parser.add_argument("--earlier", type=Path, action="append", default=[],
                        help="an earlier run's --out: its cells stand for rows this run has none of")
    parser.add_argument("--no-run", action="store_true", help="only write the table from the out dirs")
    args = parser.parse_args()
    by_id = {row["instance_id"]: row for row in json.loads(args.rows.read_text())}
    unknown = [iid for iid in args.instance_ids if iid not in by_id]
    if unknown:
        parser.error(f"not in {args.rows}: {', '.join(unknown)}")
    rows = [by_id[iid] for iid in args.instance_ids]
    load_before = os.getloadavg()[0]
    seconds = 0.0 if args.no_run else run_suite(rows, args.repos, args.out, args.cache or args.out / "cache",
                                                 args.workers, args.verify_timeout, args.grading_rules)
    cells = read_ledger(args.out)
    for earlier in args.earlier:
        found = read_ledger(earlier)
        for row in rows:
            iid = row["instance_id"]
            if not any((iid, arm) in cells for arm in ("GOLD", "EMPTY")):
                cells.update({(iid, arm): found[iid, arm] for arm in ("GOLD", "EMPTY") if (iid, arm) in found})
    text, counts = table(rows, cells)
    repos = Counter(row["repo"] for row in rows)
    summary = (f"rules {args.grading_rules}: {len(rows)} rows from {len(repos)} repositories "
               f"({', '.join(f'{r} {n}' for r, n in repos.items())}); "
               f"{', '.join(f'{k}: {v}' for k, v in counts.items())}; {seconds:.0f} s wall; load average "
               f"{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(text)
    print(summary)
    if args.table:
        args.table.write_text(text + "\n" + summary + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
