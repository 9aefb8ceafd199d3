"""A sweep's progress on the controller: which reports are cells, which cells started, which finished.

What ``arena.lock`` records after every cell and heartbeat, and ``swe-arena status`` shows.
Under xdist the controller has no items, only node ids, which the workers made with
``naming``'s functions: parsed back with the same module, they say which are cells.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from ..naming import parse_node_id
from ..spend.budget import BudgetTally
from ..state import CASE_KEY


class SweepProgress:
    """The cells of a sweep (other tests of the session are none of its business) and how far they got."""

    def __init__(self, arms: Sequence[str], repeat: int):
        self.arms = tuple(arms)
        self.repeat = repeat
        #: Node ids of the arena cells.
        self.cell_ids: set[str] = set()
        self.total: int | None = None
        self.started: set[str] = set()
        self.finished: set[str] = set()
        #: Started and not finished: ``to_json`` runs on every report and heartbeat.
        self.running: set[str] = set()
        #: Instance id -> how many of its cells have not finished (which cell is an instance's last).
        self.left_of: Counter[str] = Counter()

    def collected(self, items: Iterable[pytest.Item]) -> None:
        """The session's items (without xdist): those that are cells."""
        self.cell_ids = {item.nodeid for item in items if CASE_KEY in item.stash}
        self.total = len(self.cell_ids)
        self.left_of = Counter(_instance_of(nodeid) for nodeid in self.cell_ids)

    def collected_by_worker(self, nodeids: Iterable[str]) -> None:
        """A worker's collected node ids (under xdist). Every worker collects the same ids (xdist
        stops otherwise): the first one says it all."""
        if self.cell_ids:
            return
        self.cell_ids.update(nodeid for nodeid in nodeids if self.is_cell_id(nodeid))
        self.total = len(self.cell_ids)
        self.left_of = Counter(_instance_of(nodeid) for nodeid in self.cell_ids)

    def is_cell_id(self, nodeid: str) -> bool:
        """Whether ``nodeid`` is the id a worker gives a cell of this sweep."""
        parsed = parse_node_id(nodeid)
        if parsed is None:
            return False
        file_part, cell = parsed
        return (cell.arm in self.arms and 1 <= cell.trial <= self.repeat
                and cell.node_id(file_part, self.repeat) == nodeid)

    def adopt(self, nodeid: str) -> None:
        """A cell whose id was not recognised at collection: its report's payload says it is one,
        and a sweep's results are never dropped for the sake of a name."""
        if nodeid not in self.cell_ids:
            self.cell_ids.add(nodeid)
            self.total = len(self.cell_ids)
            self.left_of[_instance_of(nodeid)] += 1

    def start(self, nodeid: str) -> None:
        if nodeid in self.cell_ids and nodeid not in self.finished:
            self.started.add(nodeid)
            self.running.add(nodeid)

    def awaits(self, nodeid: str) -> bool:
        """Whether a report of ``nodeid`` may still finish a cell (a cell not finished yet)."""
        return nodeid in self.cell_ids and nodeid not in self.finished

    def finish(self, nodeid: str) -> bool:
        """Mark the cell finished; whether it was the last of its instance's cells to finish."""
        self.finished.add(nodeid)
        self.running.discard(nodeid)
        instance = _instance_of(nodeid)
        self.left_of[instance] -= 1
        return bool(instance) and self.left_of[instance] == 0

    def unfinished(self) -> list[str]:
        """Cells that started and never finished, sorted."""
        return sorted(self.started - self.finished)

    def to_json(self, tally: BudgetTally) -> dict[str, Any]:
        """The progress the lock records: cells done, running and in all, and the spend so far."""
        return {
            "total": self.total,
            "done": len(self.finished),
            "running": len(self.running),
            "spent_usd": round(tally.sweep.usd, 6),
            "spent_tokens": tally.sweep.tokens,
            "unknown_usd_cells": tally.sweep.unknown_usd_cells,
            "unknown_token_cells": tally.sweep.unknown_token_cells,
        }


def _instance_of(nodeid: str) -> str:
    """The instance id in a cell's node id ("" for a node id that is not a cell's)."""
    parsed = parse_node_id(nodeid)
    return parsed[1].instance_id if parsed is not None else ""
