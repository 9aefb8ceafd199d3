"""Budgets that hold on every host: the controller stops handing out cells once a cap is spent.

The same holds for an arm whose configuration failed (a ``config_error`` row: a refused key, an
unreachable endpoint...): ``BudgetTally.stopped`` names it beside the spent caps, and its
remaining cells are kept back and reported ``skipped_config`` with the reason, so a wrong key costs one cell
per worker, not the sweep.

The controller counts every ledger row in its ``BudgetTally``; workers need not see any file of
the controller's. ``BudgetScheduling`` wraps the scheduler of the ``--dist`` mode the user chose
(through ``pytest_xdist_make_scheduler``) and stands between it and the workers:

- a cell whose budget (the sweep's, or its arm's) is spent is never sent to a worker: the
  chosen scheduler is told it is done, and the controller reports it ``skipped_budget`` with
  the reason (``controller.stand_ins.never_handed_out``), through ``pytest_runtest_logreport`` like every
  other report, so it is in the ledger, the terminal and ``--junitxml``;
- once a cap is spent, the cells already queued on a worker but not started are asked back
  (xdist's ``steal`` command, one cell per request) and reported the same way.

What a worker has started cannot be asked back: an xdist worker takes the cell after the one
it runs off its queue before running it (it needs the next item for fixture teardown), so a
sweep stops at its cap to within two cells per worker. Local workers also read ``budget.json``
before each cell (``spend.budget.BudgetGate``), which catches that second cell.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import pytest

from ..naming import parse_node_id
from ..outcome import CellStatus
from ..spend.budget import SWEEP, BudgetTally
from .stand_ins import never_handed_out


class HeldNode:
    """A worker as the chosen scheduler sees it: what it is sent passes the budget first."""

    def __init__(self, node: Any, scheduling: BudgetScheduling):
        self.node = node
        self.scheduling = scheduling
        #: Indices sent to the worker that it has neither finished nor given back.
        self.sent: set[int] = set()

    def send_runtest_some(self, indices: Sequence[int]) -> None:
        allowed = [index for index in indices if not self.scheduling.hold_back(self, index)]
        if allowed:
            self.sent.update(allowed)
            self.node.send_runtest_some(allowed)

    def send_runtest_all(self) -> None:
        self.send_runtest_some(range(len(self.scheduling.collection)))

    def send_steal(self, indices: Sequence[int]) -> None:
        self.scheduling.steals[self.node].append(False)  # the chosen scheduler's own (worksteal)
        self.node.send_steal(indices)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.node, name)

    def __repr__(self) -> str:
        return f"<HeldNode {self.node!r}>"


class BudgetScheduling:
    """xdist's scheduler protocol around the chosen scheduler (``chosen``), for a sweep with a budget.

    :param turn_away: called with the skipped report of each cell the budget kept from the workers.
    :param arm_identities: each arm's identity, for the rows of cells no worker built.
    """

    def __init__(self, chosen: Any, tally: BudgetTally, turn_away: Callable[[pytest.TestReport], None],
                 arm_identities: Mapping[str, Mapping[str, Any]]):
        self.chosen = chosen
        self.tally = tally
        self.turn_away = turn_away
        self.arm_identities = arm_identities
        self.held: dict[Any, HeldNode] = {}
        self.collection: list[str] = []
        #: Cells kept back and not yet reported: (node, index, reason).
        self.kept: list[tuple[HeldNode, int, str]] = []
        #: Per worker, in the order sent, who sent each steal request: True for ours.
        self.steals: dict[Any, deque[bool]] = {}
        #: The caps already found spent (each spent cap asks its queued cells back once).
        self.spent: set[str] = set()

    # -- the protocol, passed on -------------------------------------------------------------

    @property
    def nodes(self) -> list[Any]:
        return [held.node for held in self.chosen.nodes]

    @property
    def numnodes(self) -> int:
        """How many workers' collections the chosen scheduler waits for (fewer once a host is lost)."""
        return int(self.chosen.numnodes)

    @numnodes.setter
    def numnodes(self, count: int) -> None:
        self.chosen.numnodes = count

    @property
    def collection_is_completed(self) -> bool:
        return bool(self.chosen.collection_is_completed)

    @property
    def tests_finished(self) -> bool:
        return bool(self.chosen.tests_finished)

    @property
    def has_pending(self) -> bool:
        return bool(self.chosen.has_pending)

    def add_node(self, node: Any) -> None:
        self.held[node] = HeldNode(node, self)
        self.steals[node] = deque()
        self.chosen.add_node(self.held[node])

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        if not self.collection:
            self.collection = list(collection)
        self.chosen.add_node_collection(self.held[node], collection)
        self.settle()

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        # The cell's reports came first: its row is in the tally by now.
        self.held[node].sent.discard(item_index)
        self.chosen.mark_test_complete(self.held[node], item_index, duration)
        self.settle()

    def mark_test_pending(self, item: str) -> None:
        self.chosen.mark_test_pending(item)
        self.settle()

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        held = self.held[node]
        queue = self.steals[node]
        if queue and queue.popleft():
            for index in indices:  # given back: never started
                held.sent.discard(index)
                reason = self.reason(index)
                self.kept.append((held, index, reason or "sweep budget exhausted"))
        else:
            held.sent.difference_update(indices)
            self.chosen.remove_pending_tests_from_node(held, indices)
        self.settle()

    def remove_node(self, node: Any) -> str | None:
        held = self.held.pop(node)
        self.steals.pop(node, None)
        crashed: str | None = self.chosen.remove_node(held)
        self.settle()
        return crashed

    def schedule(self) -> None:
        self.chosen.schedule()
        self.settle()

    # -- the budget --------------------------------------------------------------------------

    def reason(self, index: int) -> str | None:
        """Why the cell at ``index`` must not start (its budget is spent, its arm's configuration failed), or None
        (also for a non-cell)."""
        parsed = parse_node_id(self.collection[index])
        if parsed is None:
            return None
        stopped = self.tally.stopped()
        return stopped.get(SWEEP) or stopped.get(parsed[1].arm)

    def hold_back(self, held: HeldNode, index: int) -> bool:
        reason = self.reason(index)
        if reason is not None:
            self.kept.append((held, index, reason))
        return reason is not None

    def settle(self) -> None:
        """After each event: ask back what a newly spent cap or halted arm forbids, and report the cells kept back."""
        spent = set(self.tally.stopped())
        if spent - self.spent:
            self.spent |= spent
            self.ask_back()
        while self.kept:
            held, index, reason = self.kept.pop(0)
            self.turn_away(self.skipped_report(held.node, self.collection[index], reason))
            # Done, as the chosen scheduler sees it: it may send more (kept back in turn) or shut down.
            self.chosen.mark_test_complete(held, index, 0)

    def ask_back(self) -> None:
        """Steal back every queued cell whose budget is spent; the worker gives back those not started."""
        for node, held in self.held.items():
            for index in sorted(held.sent):
                if self.reason(index) is not None:
                    self.steals[node].append(True)
                    node.send_steal([index])

    def skipped_report(self, node: Any, nodeid: str, reason: str) -> pytest.TestReport:
        parsed = parse_node_id(nodeid)
        arm = parsed[1].arm if parsed else "?"
        # Halted (its arm's configuration failed) unless a spent budget is the reason given.
        status = CellStatus.SKIPPED_CONFIG if reason == self.tally.halted().get(arm) else CellStatus.SKIPPED_BUDGET
        outcome = never_handed_out(nodeid, self.arm_identities.get(arm, {"name": arm}), status, reason)
        path = nodeid.split("::")[0]
        # No line: the controller never read the instance file (pytest shows a skip without one).
        where = cast("tuple[str, int, str]", (path, None, f"Skipped: {reason}"))
        report = pytest.TestReport(nodeid=nodeid, location=(path, None, nodeid), keywords={}, outcome="skipped",
                                   longrepr=where, when="setup")
        report.arena = outcome.to_json()  # type: ignore[attr-defined]
        report.node = node  # type: ignore[attr-defined]  # as xdist's reports have it
        return report
