"""``swe-arena``'s command line: its parser, its warnings, its exit statuses.

The commands themselves are ``commands``' (report, compare, status, export, mirror, view); ``evaluate`` is
``evaluate``'s, ``cache`` ``cache``'s and ``mock-model`` ``mockmodel``'s.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ..ledger.chain import ChainBroken, UnsafeReference
from ..mockmodel.server import add_arguments as add_mock_model_arguments
from ..mockmodel.server import serve as serve_mock_model
from ..results.gate import METRICS, Limit, LimitError
from .cache import add_arguments as add_cache_arguments
from .cache import command_cache
from .commands import (
    command_browse,
    command_compare,
    command_export,
    command_mirror,
    command_report,
    command_status,
    command_view,
)
from .evaluate import add_arguments as add_evaluate_arguments
from .evaluate import command_evaluate

#: Exit status after Ctrl-C (128 + SIGINT), as a shell reports it.
INTERRUPTED = 130


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _limit(text: str) -> Limit:
    try:
        return Limit.parse(text)
    except LimitError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535; 0 picks a free port)")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="swe-arena", description="Look at sweeps without running pytest.")
    commands = parser.add_subparsers(dest="command", required=True)
    out_help = "a sweep's --arena-out directory"

    report = commands.add_parser("report", help="rebuild summary.json and report.html from the ledger")
    report.add_argument("out", type=Path, help=out_help)
    report.set_defaults(run=command_report)

    evaluate = commands.add_parser(
        "evaluate", help="SWE-bench's run_evaluation without Docker: a predictions file in, SWE-bench's report out")
    add_evaluate_arguments(evaluate)
    evaluate.set_defaults(run=command_evaluate)

    compare = commands.add_parser("compare", help="two sweeps side by side: per-arm deltas and per-instance flips")
    compare.add_argument("out_a", type=Path, metavar="OUT_A",
                         help="the sweep to compare from (an out dir, or a SWE-bench run report <model>.<run_id>.json)")
    compare.add_argument("out_b", type=Path, metavar="OUT_B", help="the sweep to compare to (the same)")
    compare.add_argument(
        "--fail-on", action="append", type=_limit, metavar="METRIC:LIMIT",
        help="exit 1 when B moved past LIMIT from A on the cells both counted, for any arm (repeatable): "
             "resolve_rate:-5%% (more than 5%% below A), resolve_rate:-2pp (points), cost_usd:+20%%, "
             f"tokens:+10000; metrics: {', '.join(METRICS)}")
    compare.set_defaults(run=command_compare)

    status = commands.add_parser(
        "status", help="progress of a running sweep: owner, heartbeat, cells done/running/left, spend",
        description="Exit status: 0 while a live sweep owns OUT, 1 when none does (finished, never started, stale).",
    )
    status.add_argument("out", type=Path, help=out_help)
    status.add_argument("--watch", type=_seconds, metavar="SECONDS",
                        help="show it again every SECONDS until the sweep ends")
    status.set_defaults(run=command_status)

    export = commands.add_parser("export", help="write SWE-bench predictions (predictions/<ARM>.jsonl), or with "
                                                 "--to a bundle: predictions, ledger rows, ATIF trajectories")
    export.add_argument("out", type=Path, help=out_help)
    export.add_argument("--arm", action="append", metavar="NAME",
                        help="the arm to export (repeatable; default: every arm)")
    export.add_argument("--to", type=Path, metavar="DIR",
                        help="write DIR/predictions.jsonl (every arm), DIR/ledger.jsonl (the rows) and "
                             "DIR/trajectories/<instance>/<ARM>/<trial>.atif.json (each cell's ATIF trajectory)")
    export.set_defaults(run=command_export)

    mirror = commands.add_parser(
        "mirror", help="make bare mirrors under --arena-repos for rows that name their repository by 'repo'",
        description="Each SOURCE (a repository URL or a local clone) becomes DIR/OWNER__NAME.git, where a sweep "
                    "with --arena-repos DIR finds it; an existing mirror is fetched again. Exit status 1 when a "
                    "SOURCE could not be mirrored.",
    )
    mirror.add_argument("--arena-repos", dest="repos", type=Path, required=True, metavar="DIR",
                        help="the directory a sweep's --arena-repos names (created if missing)")
    mirror.add_argument("--repo", metavar="OWNER/NAME",
                        help="the repository's name as rows give it (default: from the URL, or the clone's origin)")
    mirror.add_argument("sources", nargs="+", metavar="SOURCE", help="a repository URL or a local clone")
    mirror.set_defaults(run=command_mirror)

    view = commands.add_parser(
        "view", help="serve the out dir's viewer on 127.0.0.1 (it also opens from file://, no server needed)",
        description="Builds the viewer first when the out dir has none (an out dir from before it), or with --build.",
    )
    view.add_argument("out", type=Path, help=out_help)
    view.add_argument("--port", type=_port, default=8000, help="the port on 127.0.0.1 (default 8000; 0: any free one)")
    view.add_argument("--build", action="store_true", help="rebuild the viewer from the ledger before serving")
    view.set_defaults(run=command_view)

    browse = commands.add_parser(
        "browse", help="list the runs in folders of out dirs and compare any two arms of them (writes runs.html)",
        description="Finds the out dirs in each FOLDER (the folder itself, or the folders directly under it), "
                    "brings their viewers up to date, and writes TO/runs.html: the runs, any two arms side by "
                    "side with the cells that flipped and both patches. It opens from file://, no server needed.",
    )
    browse.add_argument("folders", nargs="+", type=Path, metavar="FOLDER",
                        help="a sweep's --arena-out directory, or a folder of them")
    browse.add_argument("--to", type=Path, default=Path("arena-runs"),
                        help="the folder to write runs.html into (default: ./arena-runs)")
    browse.set_defaults(run=command_browse)

    cache = commands.add_parser(
        "cache", help="show the harness cache (entries, kinds, sizes, last use, held or not), or prune it",
        description="The cache --arena-cache names: repository mirrors, base snapshots, environment templates, "
                    "resolved specs and uv's and pip's package caches (docs/cache.md). `swe-arena cache prune` "
                    "removes the least recently used entries no running cell holds until it fits --max.",
    )
    add_cache_arguments(cache)
    cache.set_defaults(run=command_cache)

    mock = commands.add_parser(
        "mock-model", help="serve a model with known answers and usage, to try an arm without a key",
        description="Answers OpenAI Chat and Responses, Anthropic Messages and Gemini on one port, from a script "
                    "of turns with known usage; stops on Ctrl-C or SIGTERM and prints what it served "
                    "(docs/mock-model.md).",
    )
    add_mock_model_arguments(mock)
    mock.set_defaults(run=serve_mock_model)
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
    except (ChainBroken, UnsafeReference) as error:
        raise SystemExit(f"swe-arena: {error}") from None
    except KeyboardInterrupt:
        return INTERRUPTED  # Ctrl-C on `status --watch`: no traceback
    except BrokenPipeError:
        # `swe-arena status OUT | head`: the reader left. Point stdout at devnull so the
        # interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0

