"""Per-test grading: reading statuses from pytest's reports, matching SWE-bench ids, the exit-status rule."""

from __future__ import annotations

from pytest_swe_arena.grading import (
    DEFAULT_TEST_CMD,
    grade,
    parse_junitxml,
    parse_output,
    runner_command,
    status_of,
)

OUTPUT = """\
tests/test_a.py ..F
=========================== short test summary info ============================
PASSED tests/test_a.py::test_one
PASSED tests/test_a.py::TestThing::test_param[a b-c]
XFAIL tests/test_a.py::test_known - reason: flaky
FAILED tests/test_a.py::test_two - AssertionError: assert 1 == 2
ERROR tests/test_b.py::test_setup - RuntimeError
SKIPPED [1] tests/test_a.py:12: no network
"""


def test_rA_summary_lines_give_each_test_its_status():
    assert parse_output(OUTPUT) == {
        "tests/test_a.py::test_one": "passed",
        "tests/test_a.py::TestThing::test_param[a b-c]": "passed",
        "tests/test_a.py::test_known": "xfailed",
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
    assert parse_junitxml(report) == {
        "pkg/tests/test_a.py::TestThing::test_param[a b-c]": "passed",
        "pkg/tests/test_a.py::test_two": "failed",
        "pkg/tests/test_a.py::test_x": "xfailed",
        "pkg/tests/test_a.py::test_s": "skipped",
        "pkg/tests/test_a.py::test_e": "error",
    }
    assert parse_junitxml(tmp_path / "absent.xml") is None
    # Other junit families have no file attribute: the file is found among those the runner ran.
    report.write_text('<testsuite><testcase classname="pkg.tests.test_a.TestThing" name="test_p"/></testsuite>')
    assert parse_junitxml(report, ["pkg/tests/test_b.py", "pkg/tests/test_a.py"]) == {
        "pkg/tests/test_a.py::TestThing::test_p": "passed"}


def test_ids_cut_at_their_first_space_match_and_the_worst_status_wins():
    reported = {"t.py::test_p[a b]": "passed", "t.py::test_p[a c]": "failed", "t.py::test_q[x y]": "passed",
                "t.py::test_q[x": "passed"}
    assert status_of("t.py::test_p[a", reported) == "failed"
    assert status_of("t.py::test_q[x", reported) == "passed"
    assert status_of("t.py::test_p[a b]", reported) == "passed"
    assert status_of("t.py::test_gone", reported) == "missing"
    # A forged line for the cut id cannot hide the real test's failure.
    assert status_of("t.py::test_r[a", {"t.py::test_r[a": "passed", "t.py::test_r[a b]": "failed"}) == "failed"


def test_exit_status_rule_depends_on_where_statuses_came_from():
    passing = {"t.py::a": "passed"}
    assert grade(["t.py::a"], [], passing, "output", 0).passed
    # Text that claims passes while the runner exits 1 is never trusted.
    assert not grade(["t.py::a"], [], passing, "output", 1).passed
    # pytest's own report: exit 1 means a test outside the lists failed.
    assert grade(["t.py::a"], [], passing, "junitxml", 1).passed
    for returncode in (2, 3, 4, 5, None):
        assert not grade(["t.py::a"], [], passing, "junitxml", returncode).passed
    assert not grade(["t.py::a"], ["t.py::b"], passing, "junitxml", 0).passed


def test_runner_command_fills_placeholders_or_appends_files(tmp_path):
    command = runner_command(None, ["tests/test a.py"], "/r/j.xml", tmp_path)
    assert command == DEFAULT_TEST_CMD.replace("{junitxml}", "/r/j.xml").replace(
        "{tests}", "--confcutdir=. --rootdir=. -c /dev/null 'tests/test a.py'")
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\naddopts = -q\n")
    assert "-c /dev/null" not in runner_command(None, ["t.py"], "/j.xml", tmp_path)
    assert runner_command("tox -e py -- {tests}", ["a.py", "b.py"], "/j.xml") == "tox -e py -- a.py b.py"
    assert runner_command("./run-tests", ["a.py"], "/j.xml") == "./run-tests a.py"
