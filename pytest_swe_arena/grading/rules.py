"""How a run's reported per-test statuses become a verdict: the one engine, under a rule set.

Every graded run goes through it: SWE-bench's runners (their log read by SWE-bench's parsers), the
harness's pytest runner (its JUnit XML, or its ``-rA`` summary lines), and the witness, which checks the
verdict against what pytest said as the run went (``witnesses``). The rule set is ``--arena-grading-rules``.

The default rule set, ``SWEBENCH``, decides as SWE-bench 5.0.2's ``grading.py`` does:

- a test passes when it passed or failed as expected (xfail); a skipped PASS_TO_PASS test is kept
  (it is not a regression), a skipped FAIL_TO_PASS test is not a resolution;
- only what SWE-bench's parser reads counts, so an XPASS (which it never reads) leaves the test
  missing, and a missing test fails (an XPASS pytest's own report names fails);
- several results under one id (pytest ids cut at their first space, Django tests named by the
  same docstring line, a node id pytest ran twice): the last one read stands, as SWE-bench's harness
  has it; an id cut inside its ``[...]`` matches every reported id it begins, when those agree on
  pass or fail (the first one's status stands);
- a runner that exits non-zero while its log shows no failure at all is not believed: not resolved;
- an id is matched as recorded, so one naming the absolute path of the tree SWE-bench recorded it in
  (pylint-7080's ``test_stdin[/n/fs/p-swe-bench/temp/...]``) is missing anywhere else.

Each option of ``GradingRules`` changes one of these. ``STRICT`` turns the first four the other way;
``PORTABLE`` is SWE-bench's rules with ids naming SWE-bench's tree matched here (``tree_paths``).

Where the statuses were read (``Report``) adds what no rule set can change: pytest's node ids (JUnit XML,
``-rA`` lines of the harness's runner) also count cut at their first space, as SWE-bench's datasets
record them; pytest's own JUnit XML is believed with exit 0 or 1 (1: a test outside the lists failed),
never with another status; statuses read from printed ``-rA`` lines only with exit 0.
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

#: Where a run's statuses were read: a SWE-bench runner's log (``"log"``), pytest's JUnit XML
#: (``"junitxml"``), or the ``-rA`` summary lines the harness's runner printed (``"output"``).
Report = Literal["log", "junitxml", "output"]


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


def reported_statuses(results: Iterable[TestResult], rules: GradingRules = SWEBENCH, *,
                      cut_ids: bool = False) -> dict[str, str]:
    """Each id the counted results name, to its status: of several results under one id, the last (or the worst).

    :param cut_ids: each id also counts cut at its first space (pytest's node ids, as SWE-bench's datasets hold them).
    """
    statuses: dict[str, str] = {}
    for result in results:
        if not (result.swebench_reads or rules.read_every_result):
            continue
        cut = result.test_id.split(" ", 1)[0] if cut_ids else result.test_id
        for test_id in (result.test_id, cut) if cut != result.test_id else (result.test_id,):
            earlier = statuses.get(test_id)
            if (rules.duplicates == "last" or earlier is None
                    or TestStatus(result.status).severity > TestStatus(earlier).severity):
                statuses[test_id] = result.status
    return statuses


def _cut_inside_brackets(test_id: str) -> bool:
    # SWE-bench's datasets hold parametrized ids cut in the middle of their parameters.
    return test_id.count("[") > test_id.count("]")


def recorded_status(test_id: str, statuses: Mapping[str, str], rules: GradingRules = SWEBENCH) -> str:
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
    #: Why the report was not believed (its runner's exit status), or None.
    rejected: str | None
    rules: str
    report: Report = "log"

    def not_passing(self, rules: GradingRules) -> list[tuple[str, str]]:
        """The recorded tests that do not pass, and their statuses."""
        return [(test_id, status) for kind, tests in ((FAIL_TO_PASS, self.fail_to_pass),
                                                      (PASS_TO_PASS, self.pass_to_pass))
                for test_id, status in tests.items() if not rules.passes(status, kind)]

    def failing(self, rules: GradingRules) -> list[str]:
        """The recorded tests that do not pass, as ``id (status)``."""
        return [f"{test_id} ({status})" for test_id, status in self.not_passing(rules)]

    def to_json(self, rules: GradingRules) -> dict[str, object]:
        """The ledger row's ``verify.tests`` (its caller adds what else it ran): plain strings, the statuses travel
        to the controller (execnet sends no enums)."""
        return {FAIL_TO_PASS: {test_id: str(status) for test_id, status in self.fail_to_pass.items()},
                PASS_TO_PASS: {test_id: str(status) for test_id, status in self.pass_to_pass.items()},
                "report": self.report,
                "failing": sorted({test_id for test_id, _ in self.not_passing(rules)})}


def rejection(statuses: Mapping[str, str], returncode: int | None, rules: GradingRules = SWEBENCH,
              report: Report = "log") -> str | None:
    """Why a runner's exit status makes its report unbelievable, or None.

    A report that names no test never resolves. Printed lines can claim passes (the code under test
    prints them): a runner that exited non-zero must show a failure, as SWE-bench checks, and the
    harness's runner's ``-rA`` lines are believed with exit 0 only. pytest's own JUnit XML is believed
    with exit 0 or 1 (a test outside the lists failed), never when pytest was interrupted, failed
    internally, was misused or collected nothing. ``None`` is an exit status not known.
    """
    if not statuses:
        return "the log names no test" if report == "log" else f"the {report} report names no test"
    exited = "with an unknown status" if returncode is None else returncode
    if rules.require_exit_zero:
        return None if returncode == 0 else f"the runner exited {exited} (the rules {rules.name!r} need 0)"
    if report == "output":
        return None if returncode == 0 else f"the runner exited {exited} (printed statuses need 0)"
    if report == "junitxml":
        return None if returncode in (0, 1) else f"the runner exited {exited} (pytest's report needs 0 or 1)"
    if returncode in (None, 0) or any(status in (TestStatus.FAILED, TestStatus.ERROR) for status in statuses.values()):
        return None
    return f"the runner exited {returncode} but its log shows no failing test"


def verdict_on_run(results: Sequence[TestResult], fail_to_pass: Iterable[str], pass_to_pass: Iterable[str],
                   returncode: int | None, rules: GradingRules = SWEBENCH, tree: str | None = None,
                   report: Report = "log") -> Verdict:
    """The verdict on one run: every FAIL_TO_PASS and PASS_TO_PASS test passes and the report is believed.

    :param results: what the run reported, in the order reported (``parsers``).
    :param tree: the absolute path of the tree the tests ran in, as the runner saw it (``tree_paths``).
    :param report: where the results were read (``Report``).
    """
    cut_ids = report != "log"
    statuses = reported_statuses(results, rules, cut_ids=cut_ids)
    if rules.tree_paths:
        if tree is None:
            raise ValueError(f"grading rules {rules.name!r}: tree_paths needs the path of the tree the tests ran in")
        statuses |= reported_statuses(printed_in(results, tree), rules, cut_ids=cut_ids)

    def status(test_id: str) -> str:
        return recorded_status(as_named_in(test_id, tree) if rules.tree_paths and tree else test_id, statuses, rules)

    fail = {test_id: status(test_id) for test_id in fail_to_pass}
    kept = {test_id: status(test_id) for test_id in pass_to_pass}
    rejected = rejection(statuses, returncode, rules, report)
    resolved = (rejected is None and all(rules.passes(status, FAIL_TO_PASS) for status in fail.values())
                and all(rules.passes(status, PASS_TO_PASS) for status in kept.values()))
    return Verdict(fail_to_pass=fail, pass_to_pass=kept, resolved=resolved, rejected=rejected, rules=rules.name,
                   report=report)
