"""Grading a runner's results against FAIL_TO_PASS / PASS_TO_PASS: SWE-bench 5.0.2's rules, and options.

The default rule set, ``SWEBENCH``, decides as SWE-bench 5.0.2's ``grading.py`` does:

- a test passes when it passed or failed as expected (xfail); a skipped PASS_TO_PASS test is kept
  (it is not a regression), a skipped FAIL_TO_PASS test is not a resolution;
- only what SWE-bench's parser reads counts, so an XPASS (which it never reads) leaves the test
  missing, and a missing test fails;
- several results under one id (pytest ids cut at their first space, Django tests named by the
  same docstring line): the last one read stands; an id cut inside its ``[...]`` matches every
  reported id it begins, when those agree on pass or fail (the first one's status stands);
- a runner that exits non-zero while its log shows no failure at all is not believed: not resolved;
- an id is matched as recorded, so one naming the absolute path of the tree SWE-bench recorded it in
  (pylint-7080's ``test_stdin[/n/fs/p-swe-bench/temp/...]``) is missing anywhere else.

Each option of ``GradingRules`` changes one of these. ``STRICT`` turns the first four the other way;
``PORTABLE`` is SWE-bench's rules with ids naming SWE-bench's tree matched here (``tree_paths``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..outcome import TestStatus
from .parsers import TestResult

FAIL_TO_PASS = "FAIL_TO_PASS"
PASS_TO_PASS = "PASS_TO_PASS"


@dataclass(frozen=True)
class GradingRules:
    """How a runner's results decide a verdict; the defaults are SWE-bench 5.0.2's.

    :param read_every_result: also count the results SWE-bench's parsers drop or misread (see
        ``parsers``): an XPASS, Django's expected failures, sympy's skips and a file's last test.
    :param skipped_pass_to_pass_passes: a skipped PASS_TO_PASS test is kept (SWE-bench); False: it fails.
    :param xpassed_passes: a non-strict XPASS passes, as pytest's exit status has it; False: it fails.
        Needs ``read_every_result`` (SWE-bench never reads an XPASS).
    :param duplicates: of several results under one id, ``"last"`` stands (SWE-bench), or the ``"worst"``.
    :param require_exit_zero: only a runner that exited 0 can resolve; False: SWE-bench's rule, a
        non-zero exit is believed when the log shows some failure.
    :param tree_paths: a recorded id naming the tree SWE-bench recorded it in (``BUILDER_TREE``) is looked
        up with that path replaced by the grading tree's (``as_named_in``), among the ids read and the ids as
        printed that name the grading tree (a parser may cut their paths); False: as recorded (SWE-bench).
    """

    name: str = "swebench"
    read_every_result: bool = False
    skipped_pass_to_pass_passes: bool = True
    xpassed_passes: bool = False
    duplicates: Literal["last", "worst"] = "last"
    require_exit_zero: bool = False
    tree_paths: bool = False

    def __post_init__(self) -> None:
        if self.xpassed_passes and not self.read_every_result:
            raise ValueError(f"grading rules {self.name!r}: xpassed_passes needs read_every_result "
                             "(SWE-bench's parsers never read an XPASS, so there is none to pass)")
        if self.duplicates not in ("last", "worst"):
            raise ValueError(f"grading rules {self.name!r}: duplicates must be 'last' or 'worst', "
                             f"not {self.duplicates!r}")

    def passes(self, status: str, kind: str) -> bool:
        """Whether a test with ``status`` counts as passing in the list ``kind`` (FAIL_TO_PASS or PASS_TO_PASS)."""
        if status in (TestStatus.PASSED, TestStatus.XFAILED):
            return True
        if status == TestStatus.SKIPPED:
            return kind == PASS_TO_PASS and self.skipped_pass_to_pass_passes
        if status == TestStatus.XPASSED:
            return self.xpassed_passes
        return False  # failed, error, missing


SWEBENCH = GradingRules()
STRICT = GradingRules("strict", read_every_result=True, skipped_pass_to_pass_passes=False, duplicates="worst",
                      require_exit_zero=True)
PORTABLE = GradingRules("portable", tree_paths=True)
#: The named rule sets.
RULE_SETS = {rules.name: rules for rules in (SWEBENCH, STRICT, PORTABLE)}

_PART = r"[^/\s\[\]]+"
#: The root of the tree a SWE-bench row was recorded in, as a test id names it: its 2023 build machines'
#: ``/n/fs/p-swe-bench/temp/<repo>/<tmpdir>/<owner>__<name>__<version>/`` or its images' ``/testbed/``,
#: starting a path (not preceded by a name's character or another path's).
BUILDER_TREE = re.compile(
    rf"(?<![\w.~/])(?:/n/fs/p-swe-bench/temp/{_PART}/{_PART}/{_PART}__{_PART}__{_PART}/|/testbed/)")


def as_named_in(test_id: str, tree: str) -> str:
    """A recorded id as a run in ``tree`` (an absolute path) names it: paths under SWE-bench's tree moved to it.

    Only the root is replaced: the path below it must be the same, and the id is then matched exactly.
    """
    return BUILDER_TREE.sub(lambda _: tree.rstrip("/") + "/", test_id)


def printed_in(results: Iterable[TestResult], tree: str) -> list[TestResult]:
    """The results whose id as the log prints it names a path in ``tree`` (their parser cut it), under that id."""
    root = tree.rstrip("/") + "/"
    return [dataclasses.replace(result, test_id=result.printed_id) for result in results
            if result.printed_id is not None and root in result.printed_id]


def reported_statuses(results: Iterable[TestResult], rules: GradingRules = SWEBENCH) -> dict[str, str]:
    """Each id the counted results name, to its status (the last, or the worst, of its results)."""
    statuses: dict[str, str] = {}
    for result in results:
        if not (result.swebench_reads or rules.read_every_result):
            continue
        earlier = statuses.get(result.test_id)
        if (rules.duplicates == "last" or earlier is None
                or TestStatus(result.status).severity > TestStatus(earlier).severity):
            statuses[result.test_id] = result.status
    return statuses


def _cut_inside_brackets(test_id: str) -> bool:
    # SWE-bench's datasets hold parametrized ids cut in the middle of their parameters.
    return test_id.count("[") > test_id.count("]")


def status_of(test_id: str, statuses: Mapping[str, str], rules: GradingRules = SWEBENCH) -> str:
    """The status of one recorded id among ``reported_statuses``: its own, or that of the ids it is cut from."""
    if test_id in statuses:
        return statuses[test_id]
    if not _cut_inside_brackets(test_id):
        return TestStatus.MISSING
    matches = [status for reported, status in statuses.items() if reported.startswith(test_id)]
    if not matches:
        return TestStatus.MISSING
    if rules.duplicates == "worst":
        return max(matches, key=lambda status: TestStatus(status).severity)
    passing = {TestStatus.PASSED, TestStatus.XFAILED} | ({TestStatus.XPASSED} if rules.xpassed_passes else set())
    return matches[0] if len({status in passing for status in matches}) == 1 else TestStatus.MISSING


@dataclass(frozen=True)
class Verdict:
    """Each recorded test's status, and whether they resolve the instance."""

    fail_to_pass: Mapping[str, str]
    pass_to_pass: Mapping[str, str]
    resolved: bool
    #: Why the log was not believed (its runner's exit status), or None.
    rejected: str | None
    rules: str

    def failing(self, rules: GradingRules) -> list[str]:
        """The recorded tests that do not pass, as ``id (status)``."""
        return [f"{test_id} ({status})" for kind, tests in ((FAIL_TO_PASS, self.fail_to_pass),
                                                             (PASS_TO_PASS, self.pass_to_pass))
                for test_id, status in tests.items() if not rules.passes(status, kind)]


def rejection(statuses: Mapping[str, str], returncode: int | None, rules: GradingRules = SWEBENCH) -> str | None:
    """Why a runner's exit status makes its log unbelievable, or None.

    A log that names no test never resolves. Printed lines can claim passes (the code under test
    prints them): a runner that exited non-zero must show a failure, as SWE-bench checks.
    ``None`` is an exit status not known.
    """
    if not statuses:
        return "the log names no test"
    if rules.require_exit_zero:
        if returncode == 0:
            return None
        exited = "with an unknown status" if returncode is None else returncode
        return f"the runner exited {exited} (the rules {rules.name!r} need 0)"
    if returncode in (None, 0) or any(status in (TestStatus.FAILED, TestStatus.ERROR) for status in statuses.values()):
        return None
    return f"the runner exited {returncode} but its log shows no failing test"


def grade(results: Sequence[TestResult], fail_to_pass: Iterable[str], pass_to_pass: Iterable[str],
          returncode: int | None, rules: GradingRules = SWEBENCH, tree: str | None = None) -> Verdict:
    """The verdict on one run: every FAIL_TO_PASS and PASS_TO_PASS test passes and the log is believed.

    :param tree: the absolute path of the tree the tests ran in, as the runner saw it (``tree_paths``).
    """
    statuses = reported_statuses(results, rules)
    if rules.tree_paths:
        if tree is None:
            raise ValueError(f"grading rules {rules.name!r}: tree_paths needs the path of the tree the tests ran in")
        statuses |= reported_statuses(printed_in(results, tree), rules)

    def status(test_id: str) -> str:
        return status_of(as_named_in(test_id, tree) if rules.tree_paths and tree else test_id, statuses, rules)

    fail = {test_id: status(test_id) for test_id in fail_to_pass}
    kept = {test_id: status(test_id) for test_id in pass_to_pass}
    rejected = rejection(statuses, returncode, rules)
    resolved = (rejected is None and all(rules.passes(status, FAIL_TO_PASS) for status in fail.values())
                and all(rules.passes(status, PASS_TO_PASS) for status in kept.values()))
    return Verdict(fail_to_pass=fail, pass_to_pass=kept, resolved=resolved, rejected=rejected, rules=rules.name)
