"""``swe-arena cache``: the harness cache's entries (kind, size, last use, held or not), and ``prune``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from ..cache import CacheReport, describe_age, human_size, prune, scan
from ..settings import DEFAULT_CACHE_MAX, _byte_size, _default_cache

_CACHE_HELP = "the cache (--arena-cache; default: $XDG_CACHE_HOME/pytest-swe-arena)"


def _size(text: str) -> int:
    try:
        return _byte_size(text, "--max")
    except pytest.UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arena-cache", dest="cache", type=Path, metavar="DIR", help=_CACHE_HELP)
    actions = parser.add_subparsers(dest="cache_command")
    pruning = actions.add_parser(
        "prune", help="remove the least recently used entries no running cell holds until the cache fits",
        description="Entries a running cell holds (of any sweep) are kept; the harness's bookkeeping is never "
                    "removed. Exit status 1 when the cache is still over the budget.")
    pruning.add_argument("--max", type=_size, default=_byte_size(DEFAULT_CACHE_MAX, "--max"), metavar="SIZE",
                         help=f"the budget (500M, 20G: powers of 1024; default {DEFAULT_CACHE_MAX}, as "
                              "--arena-cache-max's)")
    pruning.add_argument("--arena-cache", dest="cache", type=Path, metavar="DIR", default=argparse.SUPPRESS,
                         help=_CACHE_HELP)


def command_cache(args: argparse.Namespace) -> int:
    root: Path = args.cache or _default_cache()
    if args.cache_command == "prune":
        pruned = prune(root, args.max)
        for entry in pruned.removed:
            print(f"removed {entry.kind} {entry.path.relative_to(root)} ({human_size(entry.own)})")
        print(pruned.describe())
        return 1 if pruned.after > pruned.max_bytes else 0
    print(render(scan(root)))
    return 0


def render(report: CacheReport) -> str:
    """The cache as a table, least recently used first: kind, size, what removing it frees, last use, held."""
    if not report.entries and not report.total:
        return f"{report.root}: no cache here yet"
    now = time.time()
    rows = [("kind", "size", "frees", "last use", "held", "entry")]
    rows += [(entry.kind, human_size(entry.size), human_size(entry.own), describe_age(entry.last_use, now),
              "held" if entry.held else "-", str(entry.path.relative_to(report.root)))
             for entry in report.entries]
    widths = [max(len(row[column]) for row in rows) for column in range(5)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True)) + "  " + row[5]
             for row in rows]
    held = sum(entry.held for entry in report.entries)
    lines.append(f"{report.root}: {human_size(report.total)} on disk (each file once), {len(report.entries)} "
                 f"entries ({held} held), {human_size(report.other)} of bookkeeping")
    return "\n".join(lines)
