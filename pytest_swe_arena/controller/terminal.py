"""What the end of a sweep asks of pytest's terminal reporter: O(failures), not O(failures x cells).

For each failure, pytest's failure summary looks for the failed test's teardown reports by
scanning every report it filed under ``""`` (the passed setups and teardowns of every test):
with thousands of unresolved cells that scan is most of a sweep's exit (48 s of 245 s at
6,000 cells). Before the summary, ``drop_silent_reports`` removes from that list the cells'
reports the scan could never print (anything but a teardown report with a teardown section),
so the summary prints exactly what it did, each failure at the cost of its own lines. It also
frees those reports: the controller calls it every few hundred cells during the sweep, not only
before the summary, since pytest keeps every report to the end of the session.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from ..naming import parse_node_id


def _prints_teardown_sections(report: Any) -> bool:
    # What pytest's TerminalReporter.print_teardown_sections would print something of.
    return getattr(report, "when", None) == "teardown" and any(
        "teardown" in name for name, _ in getattr(report, "sections", ()))


def drop_silent_reports(stats: MutableMapping[str, list[Any]],
                        is_cell: Callable[[str], bool] = lambda nodeid: parse_node_id(nodeid) is not None) -> int:
    """Remove the cells' passed setup/teardown reports that the failure summary would never show.

    :param stats: the terminal reporter's ``stats`` (category -> reports).
    :returns: how many reports were removed.
    """
    quiet = stats.get("")
    if not quiet:
        return 0
    kept = [report for report in quiet
            if _prints_teardown_sections(report) or not is_cell(str(getattr(report, "nodeid", "")))]
    removed = len(quiet) - len(kept)
    quiet[:] = kept
    return removed
