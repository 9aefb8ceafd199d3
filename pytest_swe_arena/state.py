"""Session state kept in ``config.stash`` / ``item.stash`` (never module globals)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .arms.base import Arm
    from .interrupts import InterruptSignals
    from .outcome import CellOutcome
    from .settings import Settings
    from .spend.budget import BudgetGate
    from .suite import Suite
    from .worker.pipeline import Case


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
    #: With --arena-resume: cell_key -> what a worker needs to report a reused cell (status,
    #: error, run_id, usage, patch_file; see ``resume.verdicts``); made by the controller,
    #: sent to workers in ``workerinput``. Cells whose key is here are not run again.
    reuse: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Random token (uuid4 hex, not the run id) made by the controller and inherited by every
    #: process of this sweep, so an interrupt can find and stop them (``guard.reap_sweep``).
    sweep_token: str = ""
    #: Reads the controller's budget.json before each cell (None when no budget is set).
    budget_gate: BudgetGate | None = None
    interrupts: InterruptSignals | None = None
    #: (repo, version) -> env spec, from --arena-env-specs.
    env_specs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: With --arena-calibrated-only: ids that failed calibration (deselected).
    calibration_failed: list[str] = field(default_factory=list)
    #: Instance files given as test paths (``pytest mine.jsonl``): collected like --arena-instances.
    named_files: frozenset[Path] = frozenset()

    def claim_instance_id(self, instance_id: str, where: str) -> str | None:
        """Record where an id is defined; return the earlier place if it was already taken."""
        first = self.instance_ids.setdefault(instance_id, where)
        return first if first != where else None

    def covers(self, path: Path) -> bool:
        """Whether ``path`` is an instance file of the sweep: configured, under a configured dir, or named."""
        return path in self.named_files or any(path == root or root in path.parents
                                               for root in self.settings.instances)


STATE_KEY = pytest.StashKey[ArenaState]()
# Annotated rather than subscripted: the types exist only for the type checker (import cycle).
CASE_KEY: pytest.StashKey[Case] = pytest.StashKey()
OUTCOME_KEY: pytest.StashKey[CellOutcome] = pytest.StashKey()
PHASES_KEY = pytest.StashKey[dict[str, float]]()
STARTED_KEY = pytest.StashKey[str]()
#: Set on an item that is not run: {"reused": verdict} or {"skipped": reason}.
SHORTCUT_KEY = pytest.StashKey[dict[str, Any]]()
