"""The ``swe-arena`` commands: report, compare, status, export, mirror, view, browse.

Each shares its implementation with the plugin: the same ledger reader, summary,
HTML report and predictions writer produce the same files the sweep wrote.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

from ..crossing import terminal_text
from ..instances.mirrors import MirrorError, make_mirror
from ..ledger.chain import checked_names
from ..ledger.lock import CorruptLock, lock_written_ago, read_lock, stale_reason
from ..ledger.reader import CellRecord, latest_run_rows, ledger_cells, read_ledger, read_sweep_record
from ..naming import LEDGER_NAME, VIEWER_DIR
from ..results.outputs import previous_arm_order, recorded_budget, write_export, write_predictions, write_reports
from ..results.text import format_summary, written_lines

#: Exit status of a command refused or misused (as argparse's own usage errors).
USAGE_ERROR = 2


def _ledger(out: Path) -> Path:
    ledger = out / LEDGER_NAME
    if not ledger.is_file():
        raise SystemExit(f"swe-arena: {ledger} does not exist; is {out} a sweep's --arena-out directory?")
    return ledger


def _refuse_a_live_sweep(out: Path, command: str) -> None:
    """``report`` and ``export`` write into the out dir: not while a live sweep owns it."""
    try:
        owner = read_lock(out)
    except CorruptLock:
        return  # no sweep of ours writes a lock like that
    if owner is not None and stale_reason(owner, written_ago=lock_written_ago(out)) is None:
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
    # A row's served model or error is the cell's text: shown without control sequences.
    print(terminal_text("\n".join([*format_summary(summary), "", *written_lines(args.out, run_id, written)])))
    return 0


#: Exit status of ``compare --fail-on`` when B regressed past a limit (or a limit could not be checked).
REGRESSION = 1


def command_compare(args: argparse.Namespace) -> int:
    from ..results.compare import compare_runs, format_comparison
    from ..results.gate import check, gate_lines

    cells_a, cells_b = _comparable_cells(args.out_a, args.out_b), _comparable_cells(args.out_b, args.out_a)
    order = previous_arm_order(args.out_a, cells_a[-1].run_id) if args.out_a.is_dir() else []
    comparison = compare_runs(cells_a, cells_b, order)
    lines = format_comparison(comparison, str(args.out_a), str(args.out_b))
    checks = check(comparison, args.fail_on or [])
    if args.fail_on:
        lines += ["", *gate_lines(comparison, checks)]
    print(terminal_text("\n".join(lines)))
    return REGRESSION if any(found.failed for found in checks) else 0


def _comparable_cells(side: Path, other: Path) -> list[CellRecord]:
    """A sweep's last run, or a SWE-bench run report read as one arm: named after the other side's only arm
    (a user checking that this harness reproduces their report), else ``swebench``."""
    from ..results.swebench import read_run_report, report_cells

    try:
        report = read_run_report(side)
    except ValueError as error:
        raise SystemExit(f"swe-arena: {error}") from None
    if report is None:
        return _latest_cells(side)
    other_arms = {cell.arm for cell in _latest_cells(other)} if other.is_dir() else set()
    arm = other_arms.pop() if len(other_arms) == 1 else "swebench"
    cells = report_cells(report, arm, side.name.removesuffix(".json"))
    if not cells:
        raise SystemExit(f"swe-arena: {side}: the report lists no instance")
    return cells


def command_status(args: argparse.Namespace) -> int:
    from .status import sweep_status  # reads the lock, whose module needs pytest: only here

    while True:
        lines, live = sweep_status(args.out)
        print(terminal_text("\n".join(lines)), flush=True)
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
    for row in rows:  # a forged arm of "../../x" or a patch_file outside the out dir is refused, not followed
        if "arm" in row and "instance_id" in row:  # a row without them is skipped with a warning below
            checked_names(row, args.out, f"{args.out / LEDGER_NAME}: the row of {row.get('instance_id')!r}")
    if args.to is not None:
        for path in write_export(rows, args.out, args.to):
            print(path)
        return 0
    written = write_predictions(rows, args.out)
    if not written:
        raise SystemExit(f"swe-arena: no graded patch to export in {args.out / LEDGER_NAME}")
    for path in written:
        print(path)
    return 0


def command_view(args: argparse.Namespace) -> int:
    from ..results.summary import summarize
    from ..results.viewer import write_viewer
    from ..results.viewer.serve import serve

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


def command_mirror(args: argparse.Namespace) -> int:
    if args.repo and len(args.sources) != 1:
        print("swe-arena: --repo names one repository: give one SOURCE with it", file=sys.stderr)
        return USAGE_ERROR
    failed = 0
    for source in args.sources:
        try:
            path, new = make_mirror(args.repos, source, args.repo)
        except MirrorError as error:
            print(f"swe-arena: {error}", file=sys.stderr)
            failed += 1
            continue
        print(f"{'made' if new else 'updated'} {path}")
    return 1 if failed else 0


def command_browse(args: argparse.Namespace) -> int:
    from ..results.viewer.runs import write_browser

    try:
        page = write_browser(args.folders, args.to)
    except ValueError as error:
        raise SystemExit(f"swe-arena browse: {error}") from None
    print(page)
    return 0
