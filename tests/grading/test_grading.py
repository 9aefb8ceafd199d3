"""Per-test grading: reading statuses from pytest's reports, matching SWE-bench ids, the exit-status rule."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_swe_arena.grading.parsers import TestResult, parse_junitxml, parse_output
from pytest_swe_arena.grading.rules import (
    STRICT,
    SWEBENCH,
    GradingRules,
    recorded_status,
    reported_statuses,
    verdict_on_run,
)
from pytest_swe_arena.grading.runners import DEFAULT_TEST_CMD, has_pytest_config, runner_command

OUTPUT = """\
tests/test_a.py ..F
=========================== short test summary info ============================
PASSED tests/test_a.py::test_one
PASSED tests/test_a.py::TestThing::test_param[a b-c]
XFAIL tests/test_a.py::test_known - reason: flaky
XPASS tests/test_a.py::test_lucky - reason: flaky
FAILED tests/test_a.py::test_two - AssertionError: assert 1 == 2
ERROR tests/test_b.py::test_setup - RuntimeError
SKIPPED [1] tests/test_a.py:12: no network
"""


def test_rA_summary_lines_give_each_test_its_status():
    assert statuses(parse_output(OUTPUT)) == {
        "tests/test_a.py::test_one": "passed",
        "tests/test_a.py::TestThing::test_param[a b-c]": "passed",
        "tests/test_a.py::test_known": "xfailed",
        "tests/test_a.py::test_lucky": "xpassed",
        "tests/test_a.py::test_two": "failed",
        "tests/test_b.py::test_setup": "error",
    }


def test_junitxml_cases_become_node_ids(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite>'
        '<testcase classname="pkg.tests.test_a.TestThing" name="test_param[a b-c]" file="pkg/tests/test_a.py"/>'
        '<testcase classname="pkg.tests.test_a" name="test_two" file="pkg/tests/test_a.py"><failure/></testcase>'
        '<testcase classname="pkg.tests.test_a" name="test_x" file="pkg/tests/test_a.py">'
        '<skipped type="pytest.xfail"/></testcase>'
        '<testcase classname="pkg.tests.test_a" name="test_s" file="pkg/tests/test_a.py"><skipped/></testcase>'
        '<testcase classname="pkg.tests.test_a" name="test_e" file="pkg/tests/test_a.py"><error/></testcase>'
        '</testsuite></testsuites>'
    )
    assert statuses(parse_junitxml(report)) == {
        "pkg/tests/test_a.py::TestThing::test_param[a b-c]": "passed",
        "pkg/tests/test_a.py::test_two": "failed",
        "pkg/tests/test_a.py::test_x": "xfailed",
        "pkg/tests/test_a.py::test_s": "skipped",
        "pkg/tests/test_a.py::test_e": "error",
    }
    assert parse_junitxml(tmp_path / "absent.xml") is None
    # Other junit families have no file attribute: the file is found among those the runner ran.
    report.write_text('<testsuite><testcase classname="pkg.tests.test_a.TestThing" name="test_p"/></testsuite>')
    assert statuses(parse_junitxml(report, ["pkg/tests/test_b.py", "pkg/tests/test_a.py"])) == {
        "pkg/tests/test_a.py::TestThing::test_p": "passed"}


def statuses(results: list[TestResult] | None) -> dict[str, str]:
    assert results is not None
    return {result.test_id: result.status for result in results}


def status_of_pytest_id(test_id: str, reported: dict[str, str], rules: GradingRules = SWEBENCH) -> str:
    """A recorded id's status among pytest's node ids, reported in this order (as the JUnit path grades)."""
    results = [TestResult(node_id, status) for node_id, status in reported.items()]
    return recorded_status(test_id, reported_statuses(results, rules, cut_ids=True), rules)


def test_ids_cut_at_their_first_space_match_and_of_several_the_last_stands():
    reported = {"t.py::test_p[a b]": "passed", "t.py::test_p[a c]": "failed", "t.py::test_q[x y]": "passed",
                "t.py::test_q[x": "passed"}
    assert status_of_pytest_id("t.py::test_p[a", reported) == "failed"
    assert status_of_pytest_id("t.py::test_q[x", reported) == "passed"
    assert status_of_pytest_id("t.py::test_p[a b]", reported) == "passed"
    assert status_of_pytest_id("t.py::test_gone", reported) == "missing"
    earlier_pass = {"t.py::test_r[a": "passed", "t.py::test_r[a b]": "failed"}
    assert status_of_pytest_id("t.py::test_r[a", earlier_pass) == "failed"
    # SWE-bench's rule: the last one reported stands, as its harness reads pytest's summary. The strict rules
    # take the worst, whatever the order.
    later_pass = {"t.py::test_r[a b]": "failed", "t.py::test_r[a": "passed"}
    assert status_of_pytest_id("t.py::test_r[a", later_pass) == "passed"
    assert status_of_pytest_id("t.py::test_r[a", later_pass, STRICT) == "failed"


def resolves(fail_to_pass: list[str], pass_to_pass: list[str], reported: dict[str, str], report: str,
             returncode: int | None) -> bool:
    results = [TestResult(test_id, status) for test_id, status in reported.items()]
    return verdict_on_run(results, fail_to_pass, pass_to_pass, returncode, report=report).resolved  # type: ignore[arg-type]


def test_exit_status_rule_depends_on_where_statuses_came_from():
    passing = {"t.py::a": "passed"}
    assert resolves(["t.py::a"], [], passing, "output", 0)
    # Text that claims passes while the runner exits 1 is never trusted.
    assert not resolves(["t.py::a"], [], passing, "output", 1)
    # pytest's own report: exit 1 means a test outside the lists failed.
    assert resolves(["t.py::a"], [], passing, "junitxml", 1)
    for returncode in (2, 3, 4, 5, None):
        assert not resolves(["t.py::a"], [], passing, "junitxml", returncode)
    assert not resolves(["t.py::a"], ["t.py::b"], passing, "junitxml", 0)



def test_the_junit_report_is_graded_under_the_rule_set_as_a_swebench_log_is():
    # A skipped PASS_TO_PASS test is kept under SWE-bench's rules (not a regression), fails under strict; an
    # xpassed test passes under neither; strict needs exit 0 where pytest's report is otherwise believed with 1.
    results = [TestResult("t.py::a", "passed"), TestResult("t.py::s", "skipped"), TestResult("t.py::x", "xpassed")]
    for rules, skipped_kept in ((SWEBENCH, True), (STRICT, False)):
        assert verdict_on_run(results, ["t.py::a"], ["t.py::s"], 0, rules, report="junitxml").resolved is skipped_kept
        assert not verdict_on_run(results, ["t.py::a"], ["t.py::x"], 0, rules, report="junitxml").resolved
    assert verdict_on_run(results, ["t.py::a"], [], 1, SWEBENCH, report="junitxml").resolved
    assert verdict_on_run(results, ["t.py::a"], [], 1, STRICT, report="junitxml").rejected == (
        "the runner exited 1 (the rules 'strict' need 0)")


def test_runner_command_fills_placeholders_or_appends_files(tmp_path):
    command = runner_command(None, ["tests/test a.py"], "/r/j.xml", tmp_path)
    assert command == DEFAULT_TEST_CMD.replace("{junitxml}", "/r/j.xml").replace(
        "{tests}", "--confcutdir=. --rootdir=. -c /dev/null 'tests/test a.py'")
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\naddopts = -q\n")
    assert "-c /dev/null" not in runner_command(None, ["t.py"], "/j.xml", tmp_path)
    assert runner_command("tox -e py -- {tests}", ["a.py", "b.py"], "/j.xml") == "tox -e py -- a.py b.py"
    assert runner_command("./run-tests", ["a.py"], "/j.xml") == "./run-tests a.py"


def test_inherited_and_imported_tests_keep_the_id_of_the_file_that_ran_them(tmp_path):
    # xunit1's `file` names the defining file (tests/base.py); the node id is the collecting file's.
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/__init__.py").write_text("")
    (tmp_path / "tests/base.py").write_text("class Mixin:\n    def test_inherited(self):\n        assert True\n\n\n"
                                            "def test_shared():\n    assert False\n")
    (tmp_path / "tests/test_a.py").write_text("from tests.base import Mixin, test_shared\n\n\n"
                                              "class TestA(Mixin):\n    def test_own(self):\n        pass\n")
    (tmp_path / "tests/test_ab.py").write_text("def test_near_name():\n    pass\n")
    files = ["tests/test_a.py", "tests/test_ab.py"]
    command = runner_command(None, files, str(tmp_path / "junit.xml"), tmp_path).replace("python", sys.executable, 1)
    subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, check=False)
    xml = (tmp_path / "junit.xml").read_text()
    assert 'file="tests/base.py"' in xml  # the case the rebuild must not follow
    assert statuses(parse_junitxml(tmp_path / "junit.xml", files)) == {
        "tests/test_a.py::TestA::test_own": "passed",
        "tests/test_a.py::TestA::test_inherited": "passed",
        "tests/test_a.py::test_shared": "failed",
        "tests/test_ab.py::test_near_name": "passed",
    }
    # The longest matching module wins: tests.test_ab is not read as tests.test_a plus a class "b".
    report = tmp_path / "nested.xml"
    report.write_text('<testsuite><testcase classname="pkg.test_a.TestB" name="t" file="other.py"/>'
                      '<testcase classname="elsewhere" name="u" file="conf/elsewhere.py"/></testsuite>')
    assert statuses(parse_junitxml(report, ["pkg.py", "pkg/test_a.py"])) == {
        "pkg/test_a.py::TestB::t": "passed", "conf/elsewhere.py::u": "passed"}


def test_thousands_of_ids_grade_against_thousands_of_reported_tests():
    reported = [TestResult(f"t.py::test_p[{n} x]", "passed") for n in range(5000)]
    reported.append(TestResult("t.py::test_p[17 y]", "failed"))
    ids = [f"t.py::test_p[{n}" for n in range(5000)]
    grades = verdict_on_run(reported, ids, ["t.py::test_gone"], 0, report="junitxml")
    assert [test_id for test_id, status in grades.fail_to_pass.items() if status != "passed"] == ["t.py::test_p[17"]
    assert grades.fail_to_pass["t.py::test_p[17"] == "failed"
    assert grades.pass_to_pass == {"t.py::test_gone": "missing"}


@pytest.mark.parametrize(("name", "text", "configured"), [
    ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-q'\n", True),
    ("pyproject.toml", "[tool.pytest]\naddopts = ['-q']\n", True),
    ("pyproject.toml", "[tool.pytest-benchmark]\nx = 1\n", False),
    ("pyproject.toml", "[project]\nname = 'x'\n", False),
    ("pytest.toml", "", True),
    (".pytest.toml", "[pytest]\n", True),
    ("pytest.ini", "", True),
    ("tox.ini", "[testenv]\ncommands = pytest [pytest]\n", False),
    ("tox.ini", "[pytest]\naddopts = -q\n", True),
    ("setup.cfg", "[tool:pytest]\n", True),
    # issue 27: pyproject.toml is read as TOML, however its tool.pytest table is written
    ("pyproject.toml", "[tool]\npytest.ini_options.addopts = '-p calc.passer'\n", True),
    ("pyproject.toml", "tool.pytest.ini_options = {addopts = '-q'}\n", True),
    ("pyproject.toml", "[\"tool\".'pytest'.ini_options]\naddopts = '-q'\n", True),
    ("pyproject.toml", "[tool.black]\nline-length = 80\n# [tool.pytest.ini_options]\n", False),
])
def test_pytest_configuration_in_the_root_is_recognised_by_its_table(tmp_path, name, text, configured):
    (tmp_path / name).write_text(text)
    assert has_pytest_config(tmp_path) is configured
