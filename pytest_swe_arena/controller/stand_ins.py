"""The controller's stand-ins for a cell that never reported its own outcome.

``crashed`` (its worker died), ``interrupted`` (the sweep stopped first) and ``never_handed_out``
(a budget was spent before the scheduler gave the cell to a worker); ``with_spend_known`` marks the
usage of a cell whose arm ran but reported nothing as unknown. They stand above ``spend`` (an
unknown usage is ``spend.usage``'s), which stands above ``outcome``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import __version__
from ..files import timestamp
from ..naming import parse_node_id
from ..outcome import CellOutcome, CellStatus
from ..spend.usage import unknown_usage


def spend_unknown(usage: Mapping[str, Any] | None, phases: Mapping[str, float]) -> bool:
    """A cell with no usage whose arm did run (it raised, say): its spend is unknown, not 0."""
    return not usage and "arm" in phases


def with_spend_known(outcome: CellOutcome) -> CellOutcome:
    """The outcome, its usage marked unknown when its arm ran but reported nothing (see ``spend_unknown``)."""
    return outcome.replace(usage=unknown_usage()) if spend_unknown(outcome.usage, outcome.phases) else outcome


def crashed(nodeid: str, pending_json: Mapping[str, Any] | None, report_text: str, when: str) -> CellOutcome:
    """The harness error of a cell whose worker died (on the controller, from xdist's stand-in report).

    A cell past its setup (``pending_json``, what its setup report carried) may have run its arm
    and spent, how much is unknown; one that died in its setup is known by its node id alone.
    """
    text = report_text.strip()
    error = "worker crashed: " + (text.splitlines()[0] if text else f"no report ({when})")
    if pending_json is not None:
        outcome = CellOutcome.from_json(pending_json).replace(status=CellStatus.HARNESS_ERROR, error=error,
                                                              usage=unknown_usage())
    else:
        outcome = _unidentified(nodeid, CellStatus.HARNESS_ERROR, error)
    return outcome.replace(ended_at=timestamp())


def interrupted(nodeid: str, pending_json: Mapping[str, Any] | None) -> CellOutcome:
    """A cell that started but never finished before the sweep stopped (on the controller)."""
    if pending_json is not None:
        # In flight: its arm may have run and spent, how much is unknown.
        outcome = CellOutcome.from_json(pending_json).replace(usage=unknown_usage())
    else:
        outcome = _unidentified(nodeid, CellStatus.INTERRUPTED, "interrupted during setup")
    return outcome.replace(ended_at=timestamp())


def never_handed_out(nodeid: str, arm_identity: Mapping[str, Any], status: CellStatus, reason: str) -> CellOutcome:
    """A cell the controller's scheduler kept from every worker: a budget was spent or its arm's configuration
    failed (on the controller).

    No worker built it, so its node id and the arm's table say what it was; it has no cell key
    (neither skipped status is final: a resumed sweep runs it again whatever its key).
    """
    return _unidentified(nodeid, status, reason, arm_identity).replace(ended_at=timestamp())


def _unidentified(nodeid: str, status: CellStatus, error: str,
                  arm_identity: Mapping[str, Any] | None = None) -> CellOutcome:
    """A cell that never got past its setup: only its node id says what it was (its arm never ran)."""
    parsed = parse_node_id(nodeid)
    iid, arm, trial = (parsed[1].instance_id, parsed[1].arm, parsed[1].trial) if parsed else (nodeid, "?", 1)
    return CellOutcome(
        cell_key="", instance_id=iid, arm=arm, trial=trial,
        status=status, nodeid=nodeid, arm_identity=arm_identity or {"name": arm},
        error=error, provenance={"plugin_version": __version__},
    )
