"""A cell's outcome, and its plain-JSON form that travels on the test report.

The worker builds a ``CellOutcome``; ``to_json`` turns it into builtin types
that survive xdist's report serialization; the controller turns it into a
ledger row (``ledger_row``) and writes the patch and logs it carries.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from . import __version__

#: status -> (pytest outcome, counts in the pass rate)
STATUSES: dict[str, tuple[str, bool]] = {
    "resolved": ("passed", True),
    "unresolved": ("failed", True),
    "arm_error": ("failed", True),
    "timeout": ("failed", True),
    "over_budget": ("failed", True),
    "harness_error": ("error", False),
    "skipped_budget": ("skipped", False),
    "interrupted": ("error", False),
}
#: Statuses a resumed sweep reuses; the others run again.
FINAL_STATUSES = frozenset({"resolved", "unresolved", "arm_error", "timeout", "over_budget"})


def cell_key(instance_sha256: str, arm_identity: Mapping[str, Any], verify_on: str, trial: int) -> str:
    """What makes two cells the same cell: instance content, arm identity, verify mode, harness, trial.

    The arm identity (``ArmSpec.identity``) holds the arm's table and what it inherits that
    changes its result: the suite's worker_suffix, --arena-strict-models.
    """
    material = json.dumps(
        {"instance": instance_sha256, "arm": arm_identity, "verify_on": verify_on,
         "harness": __version__, "trial": trial},
        sort_keys=True, separators=(",", ":"),
    )
    return hashlib.sha256(material.encode()).hexdigest()[:24]


def patch_digest(patch: str) -> tuple[int, str]:
    """Number of lines and sha256 of a patch."""
    return patch.count("\n"), hashlib.sha256(patch.encode()).hexdigest()


@dataclass(frozen=True)
class CellOutcome:
    """Everything the controller needs to record one finished cell."""

    cell_key: str
    instance_id: str
    arm: str
    trial: int
    status: str
    nodeid: str
    arm_identity: Mapping[str, Any]
    error: str | None = None
    verify: Mapping[str, Any] | None = None
    phases: Mapping[str, float] = field(default_factory=dict)
    patch: str = ""
    #: True when the patch was graded; a partial patch of a failed arm is kept, not graded.
    patch_scored: bool = False
    usage: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    asked_model: str | None = None
    served_model: str | None = None
    #: The tripwire: the model that answered is not the one the arm asked for.
    model_mismatch: bool = False
    #: Run id of the earlier run whose row a resumed sweep reused.
    reused_from: str | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)
    host: str = ""
    worker: str = ""
    started_at: str = ""
    ended_at: str = ""
    #: Files of the cell's run dir (name -> text), written to runs/<iid>/<ARM>/.
    logs: Mapping[str, str] = field(default_factory=dict)
    #: The instance's card (``Instance.card``), written once per instance to runs/<iid>/instance.json.
    instance: Mapping[str, Any] | None = None

    @property
    def pytest_outcome(self) -> str:
        return STATUSES[self.status][0]

    def replace(self, **changes: Any) -> CellOutcome:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellOutcome:
        return cls(**data)

    def short(self) -> str:
        """One line for the terminal: the status and why."""
        return f"{self.status}: {self.error}" if self.error else self.status
