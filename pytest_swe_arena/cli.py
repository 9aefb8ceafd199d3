"""``swe-arena``: look at sweeps without running pytest.

Shares its implementation with the plugin: the same ledger reader, summary,
HTML report and predictions writer produce the same files the sweep wrote.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .ledger import LEDGER_NAME, latest_run, latest_run_rows, read_ledger, write_predictions
from .report import (
    CellRecord,
    format_summary,
    previous_arm_order,
    read_cells,
    recorded_budget,
    write_reports,
    written_lines,
)


def _ledger(out: Path) -> Path:
    ledger = out / LEDGER_NAME
    if not ledger.is_file():
        raise SystemExit(f"swe-arena: {ledger} does not exist; is {out} a sweep's --arena-out directory?")
    return ledger


def _latest_cells(out: Path) -> list[CellRecord]:
    """The cells of the ledger's last run, reduced while streaming (a large ledger is never held whole)."""
    cells = latest_run(read_cells(_ledger(out)), lambda cell: cell.run_id)
    if not cells:
        raise SystemExit(f"swe-arena: {out / LEDGER_NAME} has no rows")
    # The cells live until the command ends: keep the cyclic GC from re-scanning them (and their phases).
    gc.freeze()
    return cells


def command_report(args: argparse.Namespace) -> int:
    cells = _latest_cells(args.out)
    run_id = cells[-1].run_id
    summary, written = write_reports(args.out, cells, previous_arm_order(args.out, run_id), run_id,
                                     recorded_budget(args.out, run_id))
    print("\n".join([*format_summary(summary), "", *written_lines(args.out, run_id, written)]))
    return 0


def command_compare(args: argparse.Namespace) -> int:
    from .compare import compare_runs, format_comparison

    cells_a, cells_b = _latest_cells(args.out_a), _latest_cells(args.out_b)
    order = previous_arm_order(args.out_a, cells_a[-1].run_id)
    print("\n".join(format_comparison(compare_runs(cells_a, cells_b, order), str(args.out_a), str(args.out_b))))
    return 0


def command_status(args: argparse.Namespace) -> int:
    from .status import sweep_status  # reads the lock through guard, which needs pytest: only here

    while True:
        lines, live = sweep_status(args.out)
        print("\n".join(lines), flush=True)
        if not (args.watch and live):
            return 0 if live else 1
        time.sleep(args.watch)
        print(flush=True)


def command_export(args: argparse.Namespace) -> int:
    rows = latest_run_rows(read_ledger(_ledger(args.out)))
    if args.arm:
        known = {row["arm"] for row in rows}
        unknown = [name for name in args.arm if name not in known]
        if unknown:
            raise SystemExit(f"swe-arena: no rows for arm {unknown[0]!r} in {args.out / LEDGER_NAME}; "
                             f"arms there: {', '.join(sorted(known)) or 'none'}")
        rows = [row for row in rows if row["arm"] in args.arm]
    for path in write_predictions(rows, args.out):
        print(path)
    return 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="swe-arena", description="Look at sweeps without running pytest.")
    commands = parser.add_subparsers(dest="command", required=True)
    out_help = "a sweep's --arena-out directory"

    report = commands.add_parser("report", help="rebuild summary.json and report.html from the ledger")
    report.add_argument("out", type=Path, help=out_help)
    report.set_defaults(run=command_report)

    compare = commands.add_parser("compare", help="two sweeps side by side: per-arm deltas and per-instance flips")
    compare.add_argument("out_a", type=Path, metavar="OUT_A", help="the sweep to compare from")
    compare.add_argument("out_b", type=Path, metavar="OUT_B", help="the sweep to compare to")
    compare.set_defaults(run=command_compare)

    status = commands.add_parser(
        "status", help="progress of a running sweep: owner, heartbeat, cells done/running/left, spend",
        description="Exit status: 0 while a live sweep owns OUT, 1 when none does (finished, never started, stale).",
    )
    status.add_argument("out", type=Path, help=out_help)
    status.add_argument("--watch", type=_seconds, metavar="SECONDS",
                        help="show it again every SECONDS until the sweep ends")
    status.set_defaults(run=command_status)

    export = commands.add_parser("export", help="write SWE-bench predictions (predictions/<ARM>.jsonl)")
    export.add_argument("out", type=Path, help=out_help)
    export.add_argument("--arm", action="append", metavar="NAME",
                        help="the arm to export (repeatable; default: every arm)")
    export.set_defaults(run=command_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
