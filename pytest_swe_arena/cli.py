"""``swe-arena``: look at sweeps without running pytest.

Shares its implementation with the plugin: the same ledger reader, summary,
HTML report and predictions writer produce the same files the sweep wrote.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from .ledger import LEDGER_NAME, latest_run_rows, read_ledger, read_sweep_record, write_predictions
from .report import (
    CellRecord,
    format_summary,
    ledger_cells,
    previous_arm_order,
    recorded_budget,
    write_reports,
    written_lines,
)

#: Exit status of a command refused or misused (as argparse's own usage errors).
USAGE_ERROR = 2
#: Exit status after Ctrl-C (128 + SIGINT), as a shell reports it.
INTERRUPTED = 130


def _ledger(out: Path) -> Path:
    ledger = out / LEDGER_NAME
    if not ledger.is_file():
        raise SystemExit(f"swe-arena: {ledger} does not exist; is {out} a sweep's --arena-out directory?")
    return ledger


def _refuse_a_live_sweep(out: Path, command: str) -> None:
    """``report`` and ``export`` write into the out dir: not while a live sweep owns it."""
    from .guard import read_lock, stale_reason  # guard needs pytest: only here

    owner = read_lock(out)
    if owner is not None and stale_reason(owner) is None:
        print(f"swe-arena {command}: {out} is in use by a running sweep (pid {owner.get('pid')} on "
              f"{owner.get('host')}, run {owner.get('run_id')}); its files are rewritten when it ends. "
              f"Wait for it (`swe-arena status {out} --watch 10`), or stop it.", file=sys.stderr)
        raise SystemExit(USAGE_ERROR)


def _latest_cells(out: Path) -> list[CellRecord]:
    """The cells of the ledger's last run, reduced while streaming (a large ledger is never held whole)."""
    cells = ledger_cells(_ledger(out))
    if not cells:
        raise SystemExit(f"swe-arena: {out / LEDGER_NAME} has no rows")
    # The cells live until the command ends: keep the cyclic GC from re-scanning them (and their phases).
    gc.freeze()
    return cells


def command_report(args: argparse.Namespace) -> int:
    _refuse_a_live_sweep(args.out, "report")
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
    _refuse_a_live_sweep(args.out, "export")
    rows = latest_run_rows(read_ledger(_ledger(args.out)))
    if not rows:
        raise SystemExit(f"swe-arena: {args.out / LEDGER_NAME} has no rows")
    if args.arm:
        known = {str(row["arm"]) for row in rows if "arm" in row}
        unknown = [name for name in args.arm if name not in known]
        if unknown:
            raise SystemExit(f"swe-arena: no rows for arm {unknown[0]!r} in {args.out / LEDGER_NAME}; "
                             f"arms there: {', '.join(sorted(known)) or 'none'}")
        rows = [row for row in rows if row.get("arm") in args.arm]
    written = write_predictions(rows, args.out)
    if not written:
        raise SystemExit(f"swe-arena: no graded patch to export in {args.out / LEDGER_NAME}")
    for path in written:
        print(path)
    return 0


def command_view(args: argparse.Namespace) -> int:
    from .report import summarize
    from .viewer import VIEWER_DIR, write_viewer
    from .viewer.serve import serve

    index = args.out / VIEWER_DIR / "index.html"
    if args.build or not index.is_file():
        _refuse_a_live_sweep(args.out, "view --build" if args.build else "view (no viewer yet)")
        cells = _latest_cells(args.out)
        run_id = cells[-1].run_id
        summary = summarize(cells, previous_arm_order(args.out, run_id), run_id, recorded_budget(args.out, run_id),
                            read_sweep_record(args.out, run_id))
        write_viewer(args.out, summary, rebuild=args.build)

    def ready(url: str) -> None:
        print(f"swe-arena view: serving {args.out} at {url} (Ctrl-C to stop)", flush=True)

    try:
        serve(args.out, args.port, ready)
    except OSError as error:
        raise SystemExit(f"swe-arena view: cannot listen on 127.0.0.1:{args.port}: {error.strerror or error}; "
                         "try another --port (0 picks a free one)") from None
    except KeyboardInterrupt:
        pass
    return 0


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535; 0 picks a free port)")
    return value


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

    view = commands.add_parser(
        "view", help="serve the out dir's viewer on 127.0.0.1 (it also opens from file://, no server needed)",
        description="Builds the viewer first when the out dir has none (an out dir from before it), or with --build.",
    )
    view.add_argument("out", type=Path, help=out_help)
    view.add_argument("--port", type=_port, default=8000, help="the port on 127.0.0.1 (default 8000; 0: any free one)")
    view.add_argument("--build", action="store_true", help="rebuild the viewer from the ledger before serving")
    view.set_defaults(run=command_view)
    return parser


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    print(f"swe-arena: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning  # "swe-arena: warning: ...", not a source line
            result: int = args.run(args)
        return result
    except KeyboardInterrupt:
        return INTERRUPTED  # Ctrl-C on `status --watch`: no traceback
    except BrokenPipeError:
        # `swe-arena status OUT | head`: the reader left. Point stdout at devnull so the
        # interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
