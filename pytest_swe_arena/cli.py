"""``swe-arena``: look at a sweep's outputs without running pytest.

Shares its implementation with the plugin: the same ledger reader, summary
and predictions writer produce the same files the sweep wrote.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .ledger import LEDGER_NAME, latest_run_rows, read_ledger, write_atomic, write_predictions
from .report import format_summary, summarize


def _rows(out: Path) -> list[dict[str, object]]:
    ledger = out / LEDGER_NAME
    if not ledger.is_file():
        raise SystemExit(f"swe-arena: {ledger} does not exist; is {out} a sweep's --arena-out directory?")
    return latest_run_rows(read_ledger(ledger))


def command_report(args: argparse.Namespace) -> int:
    rows = _rows(args.out)
    summary = summarize(rows)
    run_id = rows[-1]["run_id"] if rows else None
    write_atomic(args.out / "summary.json", json.dumps({"run_id": run_id, **summary}, indent=2, sort_keys=True) + "\n")
    write_predictions(rows, args.out)
    print("\n".join(format_summary(summary)))
    return 0


def command_export(args: argparse.Namespace) -> int:
    rows = [row for row in _rows(args.out) if row["arm"] == args.arm]
    if not rows:
        raise SystemExit(f"swe-arena: no rows for arm {args.arm!r} in {args.out / LEDGER_NAME}")
    for path in write_predictions(rows, args.out):
        print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="swe-arena", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser("report", help="rebuild summary.json and predictions from the ledger")
    report.add_argument("out", type=Path, help="a sweep's --arena-out directory")
    report.set_defaults(run=command_report)
    export = commands.add_parser("export", help="write SWE-bench predictions for one arm")
    export.add_argument("out", type=Path)
    export.add_argument("--arm", required=True)
    export.set_defaults(run=command_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
