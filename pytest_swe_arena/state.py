"""Session state kept in ``config.stash`` / ``item.stash`` (never module globals)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .arms.base import Arm
    from .budget import BudgetGate
    from .guard import InterruptSignals
    from .settings import Settings
    from .suite import Suite


@dataclass
class ArenaState:
    """Per-session arena state, on both the controller and the workers."""

    settings: Settings
    suite: Suite
    arms: dict[str, Arm] = field(default_factory=dict)
    #: instance_id -> "file:line" where it was first defined (duplicates across files).
    instance_ids: dict[str, str] = field(default_factory=dict)
    #: True when this session runs cells (not, say, ``pytest tests`` in a suite's repository).
    sweep_run: bool = False
    #: With --arena-resume: cell_key -> {status, error, run_id} of cells not to run again.
    reuse: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Token every process of this sweep inherits (the controller's run id).
    sweep_token: str = ""
    #: Reads the controller's budget.json before each cell (None when no budget is set).
    budget_gate: BudgetGate | None = None
    interrupts: InterruptSignals | None = None

    def claim_instance_id(self, instance_id: str, where: str) -> str | None:
        """Record where an id is defined; return the earlier place if it was already taken."""
        first = self.instance_ids.setdefault(instance_id, where)
        return first if first != where else None

    def covers(self, path: Path) -> bool:
        """Whether ``path`` is one of the configured instance files or lies under one of their dirs."""
        return any(path == root or root in path.parents for root in self.settings.instances)


STATE_KEY = pytest.StashKey[ArenaState]()
CASE_KEY = pytest.StashKey["Case"]()
OUTCOME_KEY = pytest.StashKey["CellOutcome"]()
PHASES_KEY = pytest.StashKey[dict[str, float]]()
STARTED_KEY = pytest.StashKey[str]()
#: Set on an item that is not run: {"reused": verdict} or {"skipped": reason}.
SHORTCUT_KEY = pytest.StashKey[dict[str, Any]]()
