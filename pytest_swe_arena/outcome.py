"""What a status means, and a cell's outcome: the one table of statuses and every way an outcome is made.

``CellStatus`` is a cell's status, and ``STATUS_TABLE`` says, for each, everything the
package does with it: the pytest outcome, whether it counts in the resolve rate, whether a
resumed sweep keeps it, how the terminal and ``report.html`` show it, and what it means.
No other module spells a status. ``ArmStatus`` is how an arm's run ended (``ArmResult``,
``AgentOutcome``), ``TestStatus`` one test's status in a graded run; ``CostSource`` and
``ReconciliationStatus`` are the vocabularies of a row's usage.

The worker builds a ``CellOutcome``; ``to_json`` turns it into builtin types that survive
xdist's report serialization; the controller turns it into a ledger row
(``ledger.writer``) and writes the patch and logs it carries. Every outcome is made by a
function of this module: ``started`` and ``finished`` for a cell that ran, ``pending`` (its
setup passed), ``skipped_budget``, ``setup_failed``; the controller's stand-ins for a cell that
never reported are in ``controller.stand_ins``.

The patch is bytes (a source file need not be UTF-8). Its JSON form is the one place that
encodes it: base64 text under ``patch_base64``, so any bytes survive xdist's channel (which
refuses strings that are not UTF-8) and any JSON consumer of the report (pytest-reportlog...).
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .files import plain_json, timestamp

if TYPE_CHECKING:
    from .state import Case

#: How many of an arm error's last stderr lines the terminal shows, and how much of each.
STDERR_TAIL_LINES = 5
STDERR_LINE_WIDTH = 200


class CellStatus(StrEnum):
    """A cell's status; ``STATUS_TABLE`` says what each means."""

    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    ARM_ERROR = "arm_error"
    TIMEOUT = "timeout"
    OVER_BUDGET = "over_budget"
    HARNESS_ERROR = "harness_error"
    CONFIG_ERROR = "config_error"
    SKIPPED_BUDGET = "skipped_budget"
    SKIPPED_CONFIG = "skipped_config"
    INTERRUPTED = "interrupted"

    @property
    def meaning(self) -> StatusMeaning:
        return STATUS_TABLE[self]

    @property
    def pytest_outcome(self) -> str:
        return STATUS_TABLE[self].pytest_outcome

    @property
    def counted(self) -> bool:
        """Whether a cell of this status counts in its arm's resolve rate."""
        return STATUS_TABLE[self].counted

    @property
    def final(self) -> bool:
        """Whether a resumed sweep keeps a row of this status (else it runs the cell again)."""
        return STATUS_TABLE[self].final


@dataclass(frozen=True)
class StatusMeaning:
    """Everything the package does with one status."""

    #: What pytest reports for the cell: passed, failed, error or skipped.
    pytest_outcome: str
    #: Counted in the resolve rate: the arm is answerable for it.
    counted: bool
    #: Kept by ``--arena-resume``; a status that is not final runs again.
    final: bool
    #: The terminal's progress letter and colour.
    letter: str
    colour: str
    #: ``report.html``'s mark, its legend text, and its colours (background, text).
    glyph: str
    label: str
    badge: tuple[str, str]
    #: What the status means, for the docs.
    description: str
    #: The id lists of SWE-bench's run report the cell's instance goes into (``results.swebench``); a
    #: replayed prediction that was empty is never run there, nor here (``empty_patch_ids``).
    swebench: tuple[str, ...]


_SPENT = ("#ffe2bf", "#953800")
_NOT_COUNTED = ("#eaeef2", "#59636e")

STATUS_TABLE: dict[CellStatus, StatusMeaning] = {
    CellStatus.RESOLVED: StatusMeaning(
        "passed", True, True, ".", "green", "✓", "resolved", ("#d1f4d9", "#116329"),
        "The graded patch passed verification.",
        swebench=("completed", "resolved")),
    CellStatus.UNRESOLVED: StatusMeaning(
        "failed", True, True, "F", "red", "✗", "unresolved", ("#ffd8d3", "#a40e26"),
        "The patch was graded and failed verification, or it was empty (an empty patch is verified but never "
        "resolves).",
        swebench=("completed", "unresolved")),
    CellStatus.ARM_ERROR: StatusMeaning(
        "failed", True, True, "F", "red", "!", "arm error", _SPENT,
        "The arm failed: the agent exited non-zero, a recorded or gold patch did not apply, the supervisor did "
        "not reach state `completed` (or ran out of time). Its partial work is not graded.",
        swebench=("error",)),
    CellStatus.TIMEOUT: StatusMeaning(
        "failed", True, True, "F", "red", "T", "timeout", _SPENT,
        "The agent ran past its `timeout`, or pytest-timeout fired while the arm or verify ran. Not graded.",
        swebench=("completed", "unresolved")),
    CellStatus.OVER_BUDGET: StatusMeaning(
        "failed", True, True, "F", "red", "$", "over its budget", _SPENT,
        "The arm passed its per-cell cap (`max_usd` / `max_tokens`), live or in the final accounting. Not graded.",
        swebench=("error",)),
    CellStatus.HARNESS_ERROR: StatusMeaning(
        "error", False, False, "E", "red", "E", "harness error (not counted)", ("#e6e0f8", "#512a97"),
        "The harness, not the arm, failed: workspace, environment build, grading infrastructure, an agent that "
        "could not be started, an arm that raised, a crashed xdist worker, a served-model mismatch under "
        "`--arena-strict-models`.",
        swebench=("error", "infra_failure")),
    CellStatus.CONFIG_ERROR: StatusMeaning(
        "error", False, False, "C", "yellow", "⚙", "configuration error (not counted)", ("#fff8c5", "#7d4e00"),
        "The arm's setup, not the agent, failed: its model calls were refused for credentials (401/403), its "
        "endpoint was unreachable, a quota or budget answer (402) or rate limits outlasted its retries, or its "
        "program could not start in its sandbox (126/127). The arm's remaining cells are not started; the "
        "sweep says what to fix.",
        swebench=("error", "infra_failure")),
    CellStatus.SKIPPED_BUDGET: StatusMeaning(
        "skipped", False, False, "s", "yellow", "–", "skipped: budget spent (not counted)", _NOT_COUNTED,
        "A sweep or arm budget was spent before the cell started; the reason is the row's `error`.",
        swebench=("incomplete",)),
    CellStatus.SKIPPED_CONFIG: StatusMeaning(
        "skipped", False, False, "s", "yellow", "⚙", "skipped: arm misconfigured (not counted)", _NOT_COUNTED,
        "An earlier cell of the arm was `config_error`, so this one was not started (a wrong key would otherwise "
        "fail every cell); the row's `error` says what was seen. Run again on resume, once the setup is fixed.",
        swebench=("incomplete",)),
    CellStatus.INTERRUPTED: StatusMeaning(
        "error", False, False, "E", "red", "∅", "interrupted (not counted)", _NOT_COUNTED,
        "Ctrl-C or SIGTERM stopped the sweep before the cell finished.",
        swebench=("incomplete",)),
}


#: The statuses a resolve rate counts, and those a resumed sweep keeps (views of ``STATUS_TABLE``).
COUNTED_STATUSES = frozenset(status for status in CellStatus if status.counted)
FINAL_STATUSES = frozenset(status for status in CellStatus if status.final)


def known_status(text: object) -> CellStatus | None:
    """The status ``text`` spells (a row's ``status``, whoever wrote it); None for anything else."""
    try:
        return CellStatus(text) if isinstance(text, str) else None
    except ValueError:
        return None


class ArmStatus(StrEnum):
    """How an arm's run ended (``ArmResult.status``): anything but ``completed`` is never graded."""

    COMPLETED = "completed"
    ARM_ERROR = "arm_error"
    TIMEOUT = "timeout"
    OVER_BUDGET = "over_budget"
    #: The agent's program could not start (126/127 before it wrote anything): the arm's setup, not its agent.
    CONFIG_ERROR = "config_error"
    #: Ctrl-C or SIGTERM stopped the agent; its spend is read all the same, then the sweep stops.
    INTERRUPTED = "interrupted"

    @property
    def cell_status(self) -> CellStatus | None:
        """The cell's status when the run did not complete (its work is not graded); None when it did."""
        return None if self is ArmStatus.COMPLETED else CellStatus(self.value)


@dataclass(frozen=True)
class AgentOutcome:
    """How an agent process ended, as an arm status."""

    status: ArmStatus
    error: str | None
    returncode: int | None
    seconds: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", ArmStatus(self.status))


class TestStatus(StrEnum):
    """One test's status in a graded run, as the runner's report gives it (``missing``: it gave none)."""

    __test__ = False  # not a pytest test class

    PASSED = "passed"
    XFAILED = "xfailed"
    SKIPPED = "skipped"
    XPASSED = "xpassed"
    FAILED = "failed"
    ERROR = "error"
    MISSING = "missing"

    @property
    def passes(self) -> bool:
        """Whether the test counts as passing (as in SWE-bench, an expected failure passes)."""
        return self in (TestStatus.PASSED, TestStatus.XFAILED)

    @property
    def severity(self) -> int:
        """When one id is reported more than once and the worst status stands (``rules.STRICT``): higher is worse."""
        return _TEST_SEVERITY[self]


_TEST_SEVERITY = {status: rank for rank, status in enumerate(TestStatus)}


class CostSource(StrEnum):
    """Where a usage's ``cost_usd`` came from (``usage.cost_source`` of a row)."""

    #: the agent said what it cost
    REPORTED = "reported"
    #: the agent said its tokens; the suite's prices gave the dollars
    PRICED = "priced"
    #: the metering proxy counted the calls and priced them
    METERED = "metered"
    #: the agent's figure was refused as implausible; the plausible (priced) one is recorded
    IMPLAUSIBLE = "implausible"
    #: nobody knows: the cell may have spent
    UNKNOWN = "unknown"
    #: no model was called: truly zero
    NONE = "none"


class ReconciliationStatus(StrEnum):
    """What an agent reported against what the meter counted for one cell (``details.reconciliation.status``)."""

    #: every token count equal, the cost within rounding
    AGREE = "agree"
    #: the agent's report is off (``difference`` says by how much)
    DIFFER = "differ"
    #: the meter could not read some calls: its figures are a lower bound
    INCOMPLETE = "incomplete"
    #: the agent reported no usage
    UNREPORTED = "unreported"


def counts_as_pass(status: object) -> bool:
    """Whether a recorded test status (a row's ``verify.tests``, whoever wrote it) is a pass."""
    try:
        return isinstance(status, str) and TestStatus(status).passes
    except ValueError:
        return False


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


def patch_digest(patch: bytes) -> tuple[int, str]:
    """Number of lines and sha256 of a patch, over its bytes."""
    return patch.count(b"\n"), hashlib.sha256(patch).hexdigest()


@dataclass(frozen=True)
class CellOutcome:
    """Everything the controller needs to record one finished cell.

    Every field but ``patch``, ``logs`` and ``instance`` (written as files) is a field of its ledger row, and is
    described there: ``ledger.row.LedgerRow`` (the writer builds the row through it, so the two cannot drift).
    """

    cell_key: str
    instance_id: str
    arm: str
    trial: int
    status: CellStatus
    nodeid: str
    arm_identity: Mapping[str, Any]
    error: str | None = None
    verify: Mapping[str, Any] | None = None
    phases: Mapping[str, float] = field(default_factory=dict)
    #: The extracted patch, exactly as git wrote it.
    patch: bytes = b""
    patch_scored: bool = False
    usage: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    asked_model: str | None = None
    served_model: str | None = None
    model_mismatch: bool = False
    reused_from: str | None = None
    verify_shared_with: str | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)
    host: str = ""
    worker: str = ""
    sandbox: str = "none"
    started_at: str = ""
    ended_at: str = ""
    #: Files of the cell's run dir (name -> text), written to runs/<iid>/<ARM>/.
    logs: Mapping[str, str] = field(default_factory=dict)
    #: The instance's card (``Instance.card``), written once per instance to runs/<iid>/instance.json.
    instance: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", CellStatus(self.status))

    @property
    def pytest_outcome(self) -> str:
        return self.status.pytest_outcome

    def replace(self, **changes: Any) -> CellOutcome:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON types only: the status as its text, the patch as ``patch_base64``."""
        data = asdict(self)
        logs, patch = data.pop("logs"), data.pop("patch")
        data = dict(plain_json(data))
        data["logs"] = logs
        data["patch_base64"] = base64.b64encode(patch).decode("ascii")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellOutcome:
        fields = dict(data)
        patch = base64.b64decode(fields.pop("patch_base64", ""), validate=True)
        return cls(**fields, patch=patch)

    def short(self) -> str:
        """One line for the terminal: the status and why."""
        return f"{self.status}: {self.error}" if self.error else str(self.status)

    def failure_text(self, run_dir: Path | None) -> str:
        """What the terminal shows of a failed cell: ``short()``, then why, and where its logs are.

        No traceback (the harness's frames say nothing about an arm), so pytest's failure
        summary costs the same for every cell. For an arm error, the last lines of each
        ``*stderr.log`` the arm left (the real reason is usually there); then the run dir
        ``run_dir`` (absolute, as the controller will write it) when the cell has logs.
        """
        lines = [self.short()]
        if self.status == CellStatus.ARM_ERROR:
            for name, text in sorted(self.logs.items()):
                if name.endswith("stderr.log"):
                    tail = [line[:STDERR_LINE_WIDTH] for line in text.splitlines() if line.strip()]
                    if tail:
                        lines.append(f"last lines of {name}:")
                        lines += [f"  {line}" for line in tail[-STDERR_TAIL_LINES:]]
        if run_dir is not None and (self.logs or self.patch):
            lines.append(f"run dir: {run_dir}")
        return "\n".join(lines)


# -- every outcome a cell can have -----------------------------------------------------------------


def _of_case(case: Case, nodeid: str, status: CellStatus, error: str | None) -> CellOutcome:
    """An outcome with the cell's identity filled in."""
    return CellOutcome(
        cell_key=case.key,
        instance_id=case.instance.instance_id,
        arm=case.arm.spec.name,
        trial=case.trial,
        status=status,
        nodeid=nodeid,
        arm_identity=case.arm.spec.identity,
        error=error,
        provenance={"plugin_version": __version__},
        host=socket.gethostname(),
        worker=case.settings.worker,
        sandbox=case.settings.sandbox,
        ended_at=timestamp(),
        instance=case.instance.card(),
    )


def started(case: Case, nodeid: str, started_at: str) -> CellOutcome:
    """A cell whose arm is about to run: a harness error until ``finished`` says otherwise."""
    return _of_case(case, nodeid, CellStatus.HARNESS_ERROR, None).replace(started_at=started_at)


def finished(outcome: CellOutcome, status: CellStatus, error: str | None, timings: Mapping[str, float],
             logs: Mapping[str, str]) -> CellOutcome:
    """A cell that ran: its status and why, its phases' seconds and its run dir's files."""
    return outcome.replace(status=status, error=error, logs=logs, ended_at=timestamp(),
                           phases={name: round(seconds, 3) for name, seconds in timings.items()})


def pending(case: Case, nodeid: str) -> CellOutcome:
    """What a cell whose setup passed is, should it never finish: ``interrupted``."""
    return _of_case(case, nodeid, CellStatus.INTERRUPTED, "interrupted before the cell finished")


def skipped(case: Case, nodeid: str, status: CellStatus, reason: str) -> CellOutcome:
    """A cell that did not start: a budget was spent (``skipped_budget``) or its arm's configuration failed
    (``skipped_config``)."""
    return _of_case(case, nodeid, status, reason)


def setup_failed(case: Case, nodeid: str, when: str, message: str) -> CellOutcome:
    """A cell whose fixture (or the harness itself) failed in ``when``: a harness error, never the arm's fault."""
    return _of_case(case, nodeid, CellStatus.HARNESS_ERROR, f"{when}: {message}")
