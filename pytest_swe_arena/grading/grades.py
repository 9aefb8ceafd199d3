"""Per-test grading: each recorded test's status, and whether they all pass.

The FAIL_TO_PASS and PASS_TO_PASS ids are never handed back to the runner:
SWE-bench cuts parametrized ids at their first space, so many are not valid
node ids. The runner runs the test *files* (``runners``); statuses are read
from pytest's JUnit XML or its ``-rA`` summary lines (``parsers``). An id
matches a reported test when they are equal or when the reported id cut at
its first space equals it; of several, the worst status stands.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..outcome import TestStatus


def keep_worst(statuses: dict[str, str], test_id: str, status: str) -> None:
    """Record ``status`` for ``test_id`` unless a worse one is recorded already (``TestStatus.severity``)."""
    earlier = statuses.get(test_id)
    if earlier is None or TestStatus(status).severity > TestStatus(earlier).severity:
        statuses[test_id] = status


def status_index(reported: Mapping[str, str]) -> dict[str, str]:
    """Each reported id, and each cut at its first space, to the worst status of the reported ids behind it."""
    index: dict[str, str] = {}
    for test_id, status in reported.items():
        keep_worst(index, test_id, status)
        cut = test_id.split(" ", 1)[0]
        if cut != test_id:
            keep_worst(index, cut, status)
    return index


def status_of(expected: str, reported: Mapping[str, str]) -> str:
    """The status of one recorded id: the worst of the reported ids equal to it or, cut at their first space, equal.

    Taking the worst of all matches means a line printed to look like the
    recorded (cut) id cannot hide the real test's failure. To grade many ids,
    build ``status_index(reported)`` once and look each up in it.
    """
    return status_index(reported).get(expected, TestStatus.MISSING)


@dataclass(frozen=True)
class TestGrades:
    """Each recorded test's status, and whether the runner's report can be trusted to pass them."""

    __test__ = False  # not a pytest test class

    fail_to_pass: Mapping[str, str]
    pass_to_pass: Mapping[str, str]
    report: str  # "junitxml" or "output"
    returncode: int | None

    @property
    def passed(self) -> bool:
        """Every recorded test passes, and the runner's exit status agrees.

        Output text can be printed by the code under test, so with statuses read
        from output only exit 0 passes. The JUnit XML is pytest's own, so exit 1
        (some test outside the two lists failed) still passes there; any other
        status (interrupted, internal or usage error, nothing collected) never does.
        """
        accepted = (0, 1) if self.report == "junitxml" else (0,)
        every = [*self.fail_to_pass.values(), *self.pass_to_pass.values()]
        return self.returncode in accepted and all(TestStatus(status).passes for status in every)

    def failing(self) -> list[str]:
        tests = {**self.fail_to_pass, **self.pass_to_pass}
        return [f"{test_id} ({status})" for test_id, status in tests.items() if not TestStatus(status).passes]

    def to_json(self) -> dict[str, object]:
        tests = {**self.fail_to_pass, **self.pass_to_pass}
        return {"FAIL_TO_PASS": dict(self.fail_to_pass), "PASS_TO_PASS": dict(self.pass_to_pass),
                "report": self.report,
                "failing": sorted(test_id for test_id, status in tests.items() if not TestStatus(status).passes)}


def grade(fail_to_pass: Iterable[str], pass_to_pass: Iterable[str], reported: Mapping[str, str],
          report: str, returncode: int | None) -> TestGrades:
    index = status_index(reported)
    return TestGrades(
        fail_to_pass={test_id: index.get(test_id, TestStatus.MISSING) for test_id in fail_to_pass},
        pass_to_pass={test_id: index.get(test_id, TestStatus.MISSING) for test_id in pass_to_pass},
        report=report,
        returncode=returncode,
    )
