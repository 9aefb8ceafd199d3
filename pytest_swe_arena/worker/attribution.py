"""What can go wrong in each phase of a cell, and the status it gives: the one table of attribution.

Fail-closed: once the arm has started, what goes wrong because of what it left is the arm's failure
(``arm_error``, counted in its rate); only what fails before the arm starts, or in the harness's own
machinery (its environment, its meter, its grading infrastructure on a fresh tree), is a
``harness_error`` (not counted, run again on resume). ``worker.pipeline`` takes each status from
``FAULTS``; the threat model's "Attribution" table is generated from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..outcome import ArmStatus, CellStatus

#: A cell's phases, in the order ``worker.pipeline`` runs them.
PHASES = ("environment", "meter", "arm", "spend", "patch", "grade")


@dataclass(frozen=True)
class Fault:
    """One thing that can go wrong in a phase, and the cell's status when it does."""

    phase: str
    what: str
    #: The cell's status; None: the arm's own ending (``ArmStatus.cell_status``).
    status: CellStatus | None
    why: str
    #: The arm's own ending, when it had one, is the status instead (it went wrong first).
    ending_first: bool = False
    #: Not yet the cell's verdict: the arm's ending, its spend read and its patch kept before the cell ends so.
    ends_arm: bool = False

    def status_after(self, ending: CellStatus | None) -> CellStatus:
        """The cell's status given the arm's ending (None: it completed)."""
        if self.status is None or (self.ending_first and ending is not None):
            assert ending is not None, f"{self.what}: no ending to take"
            return ending
        return self.status

    @property
    def arm_status(self) -> ArmStatus:
        """The arm's ending this fault gives (for ``ends_arm``)."""
        assert self.status is not None
        return ArmStatus(self.status.value)


_HARNESS = "the harness's failure, not the arm's: not counted, run again on resume"
_BEFORE = "before the arm starts: not counted, run again on resume"

ENV_BUILD = Fault("environment", "the instance's venv cannot be built or checked at base, or what its steps changed "
                  "cannot be committed", CellStatus.HARNESS_ERROR, _BEFORE)
EXTRACTION_SEED = Fault("environment", "the harness's git dir for patch extraction cannot be prepared",
                        CellStatus.HARNESS_ERROR, _BEFORE)
METER_OPEN = Fault("meter", "the metering proxy cannot open the cell's route", CellStatus.HARNESS_ERROR,
                   _BEFORE)
LIMITS_NOT_SET = Fault("arm", "the cell's cgroups (its limits) cannot be made", CellStatus.HARNESS_ERROR,
                       f"the machine's, {_BEFORE}")
ARM_NOT_STARTED = Fault("arm", "the agent never started (`ArmStartError`)", CellStatus.HARNESS_ERROR,
                        "nothing was spent, and the setup (not the arm) is at fault")
ARM_RAISED = Fault("arm", "the arm's code raises an exception rather than returning a status",
                   CellStatus.HARNESS_ERROR, "an arm kind's code is the harness's; the arm started and may "
                   "have spent: its spend is recorded as unknown, never $0")
ARM_FAILED = Fault("arm", "the arm reports its run failed (`ArmError`)", CellStatus.ARM_ERROR,
                   "the arm's failure, counted", ends_arm=True)
ARM_TIMED_OUT = Fault("arm", "pytest-timeout fires while the arm runs", CellStatus.TIMEOUT,
                      "the arm's time ran out, counted", ends_arm=True)
LIMIT_PASSED = Fault("arm", "the arm passes a cell limit (memory, pids, disk), whatever its process said after",
                     CellStatus.ARM_ERROR, "the arm's failure, counted, the limit named in the error", ends_arm=True)
METER_CLOSE = Fault("spend", "the metering proxy fails to give the cell's spend", CellStatus.HARNESS_ERROR,
                    "the proxy failed, not the agent: what the agent reported is kept; not counted, run again "
                    "on resume")
OVER_BUDGET = Fault("spend", "the meter stopped the arm at its budget", CellStatus.OVER_BUDGET,
                    "the arm's spend, counted", ends_arm=True)
MISCONFIGURED = Fault("spend", "the arm's setup failed before its agent did anything (a refused key, an "
                      "unreachable endpoint, a quota: `arms.misconfig`, or the meter's refusals)",
                      CellStatus.CONFIG_ERROR, "not counted; the arm's other cells wait for a fix")
PATCH_OVER_CAP = Fault("patch", "the patch is over the size cap", CellStatus.ARM_ERROR,
                       "cut, it would not apply: the cap is the harness's, the size the arm's", ending_first=True)
PATCH_UNREADABLE = Fault("patch", "extraction fails on what the arm left (a workspace swapped for a link, or "
                         "deleted)", CellStatus.ARM_ERROR, "the arm has run: what it left cannot be read",
                         ending_first=True)
ARM_ENDED = Fault("patch", "the arm did not complete (an ending above, or its own: timeout, over_budget, "
                  "config_error, interrupted...)", None, "never scored from partial work: the patch is kept for "
                  "forensics, not graded")
MODEL_MISMATCH = Fault("patch", "with `--arena-strict-models`, the served model is not the asked one",
                       CellStatus.HARNESS_ERROR, "the provider's, not the arm's: not counted, not graded")
PATCH_REJECTED = Fault("grade", "the arm's patch does not apply to a fresh checkout of base, or the environment's "
                       "install fails on the patched tree", CellStatus.ARM_ERROR,
                       "the arm's own patch cannot be graded: its failure, counted")
GRADING_BROKE = Fault("grade", "the harness's grading fails: a `test_patch` that does not apply on base, a venv "
                      "that cannot be built, the grading run's own infrastructure", CellStatus.HARNESS_ERROR,
                      _HARNESS)
GRADE_TIMED_OUT = Fault("grade", "pytest-timeout fires while the patch is graded", CellStatus.TIMEOUT,
                        "counted; the patch is not scored")

#: Every fault, phase by phase: the table the threat model shows.
FAULTS = (ENV_BUILD, EXTRACTION_SEED, METER_OPEN, LIMITS_NOT_SET, ARM_NOT_STARTED, ARM_RAISED, ARM_FAILED,
          ARM_TIMED_OUT, LIMIT_PASSED, METER_CLOSE, OVER_BUDGET, MISCONFIGURED, PATCH_OVER_CAP, PATCH_UNREADABLE,
          ARM_ENDED, MODEL_MISMATCH, PATCH_REJECTED, GRADING_BROKE, GRADE_TIMED_OUT)
