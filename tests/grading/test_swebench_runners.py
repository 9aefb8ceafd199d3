"""SWE-bench's runners in verify: chosen by repo (Django's runtests.py with the real django), by a row's
eval_script or log_parser, and graded by SWE-bench 5.0.2's rules, the strict ones or the portable ones."""

from __future__ import annotations

import json
import sys

import pytest
from helpers.arena import XDIST, ledger_validator
from helpers.gitrepos import commit, django_style_row, git, shapes_swe_bench_row

pytest.importorskip("django", reason="the Django-style project runs the real django package (the test extra)")


@pytest.fixture
def django_row(tmp_path_factory):
    return django_style_row(tmp_path_factory.mktemp("repos"), sys.executable)


def write_export(suite, rows, name="instances/swe-bench.json"):
    path = suite.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1))
    return path


@pytest.mark.parametrize("xdist", XDIST)
def test_django_rows_run_runtests_and_grade_its_ids(suite, django_row, xdist):
    row, repo = django_row
    write_export(suite, [row])
    result = suite.run(f"--arena-repos={repo.parent}", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    gold, empty = sorted(suite.ledger(), key=lambda r: r["arm"] != "GOLD")
    for ledger_row in (gold, empty):
        ledger_validator().validate(ledger_row)
    assert gold["status"] == "resolved", gold["error"]
    assert gold["verify"]["tests"] == {
        "FAIL_TO_PASS": {"test_add (money.tests.MoneyTests.test_add)": "passed",
                         "Adding nothing changes nothing.": "passed"},
        "PASS_TO_PASS": {"test_stable (money.tests.MoneyTests.test_stable)": "passed"},
        "report": "log", "log_parser": "parse_log_django", "rules": "swebench", "failing": []}
    assert empty["status"] == "unresolved"
    assert empty["verify"]["tests"]["FAIL_TO_PASS"] == {"test_add (money.tests.MoneyTests.test_add)": "failed",
                                                         "Adding nothing changes nothing.": "failed"}
    log = (suite.path / "arena-out" / gold["run_dir"] / "verify.log").read_text()
    assert "test_add (money.tests.MoneyTests.test_add) ... ok" in log  # run as `./tests/runtests.py ... money.tests`


def test_a_django_row_with_an_unknown_log_parser_is_a_collection_error_naming_the_field(suite, django_row):
    row, repo = django_row
    path = write_export(suite, [{**row, "log_parser": "parse_log_djangoo"}])
    result = suite.run(f"--arena-repos={repo.parent}")
    result.stdout.fnmatch_lines([f"*{path}:*: field 'log_parser': 'parse_log_djangoo' names no parser; "
                                 "expected one of *parse_log_django*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED


def test_a_rows_eval_script_and_log_parser_choose_the_runner(suite, tmp_path_factory):
    # acme/shapes is no SWE-bench repository: the row's own eval script runs the tests and names its parser.
    row, repo = shapes_swe_bench_row(tmp_path_factory.mktemp("repos"))
    script = "\n".join(["#!/bin/bash", "set -uxo pipefail", "source /opt/miniconda3/bin/activate",
                        "export ARENA_SHAPES=1", ": '>>>>> Start Test Output'",
                        "python -m pytest -rA -p no:cacheprovider tests/test_text.py tests/test_other.py",
                        "SWEBENCH_TEST_EXIT_CODE=$?", ": '>>>>> End Test Output'", "git checkout x tests"])
    write_export(suite, [{**row, "eval_script": script, "log_parser": "parse_log_pytest"}])
    result = suite.run(f"--arena-repos={repo.parent}")
    result.assert_outcomes(passed=1, failed=1)
    gold, empty = sorted(suite.ledger(), key=lambda r: r["arm"] != "GOLD")
    assert gold["status"] == "resolved", gold["error"]
    assert gold["verify"]["tests"]["report"] == "log"
    assert gold["verify"]["tests"]["log_parser"] == "parse_log_pytest"
    assert empty["status"] == "unresolved"
    # The suite runs with COLUMNS=200; the runner gets SWE-bench's 80 columns (ids depend on the layout).
    log = (suite.path / "arena-out" / gold["run_dir"] / "verify.log").read_text().splitlines()
    assert {len(line) for line in log if line.startswith("=====") and "test session starts" in line} == {80}


#: A test named after the absolute path of a file in the tree it runs in, as pylint's test_stdin is.
WHERE_TEST = """import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("path", [os.path.join(HERE, "data", "where.txt")])
def test_where(path):
    assert os.path.isfile(path)
"""


def test_an_id_naming_swebenchs_tree_is_found_in_the_grading_tree_only_under_portable_rules(suite, tmp_path_factory):
    row, repo = shapes_swe_bench_row(tmp_path_factory.mktemp("repos"))
    commit(repo, {"tests/test_where.py": WHERE_TEST, "tests/data/where.txt": "here\n"}, "tests: where")
    builder = "/n/fs/p-swe-bench/temp/shapes/tmpab12cd/acme__shapes__1.0"
    recorded = f"tests/test_where.py::test_where[{builder}/tests/data/where.txt]"
    row = {**row, "test_patch": git(repo, "diff", row["base_commit"], "HEAD", "--", "tests"),
           "PASS_TO_PASS": json.dumps(["tests/test_text.py::test_lower", recorded]),
           # pylint's parser: it cuts the absolute path printed in the id to its last part. pytest 9.2 names a
           # parameter over 100 characters `path0`; "legacy" names it in full, as pylint's pytest 7.2 did.
           "test_cmd": "python -m pytest -rA -p no:cacheprovider -o parametrize_long_str_id_strategy=legacy",
           "log_parser": "parse_log_pylint"}
    write_export(suite, [row])
    result = suite.run(f"--arena-repos={repo.parent}")
    result.assert_outcomes(failed=2)
    gold = next(r for r in suite.ledger() if r["arm"] == "GOLD")
    assert gold["error"] == f"1 of 4 recorded tests not passing: {recorded} (missing)"
    # It ran and passed, named after the grading tree's path.
    log = (suite.path / "arena-out" / gold["run_dir"] / "verify.log").read_text().splitlines()
    printed = [line for line in log if line.startswith("PASSED tests/test_where.py::test_where[")]
    assert len(printed) == 1 and printed[0].endswith("/tests/data/where.txt]") and builder not in printed[0]

    result = suite.run(f"--arena-repos={repo.parent}", "--arena-grading-rules=portable", "--arena-out=portable-out")
    result.assert_outcomes(passed=1, failed=1)
    gold, empty = sorted(suite.ledger("portable-out"), key=lambda r: r["arm"] != "GOLD")
    assert gold["status"] == "resolved", gold["error"]
    assert gold["verify"]["tests"]["PASS_TO_PASS"][recorded] == "passed"
    assert gold["verify"]["tests"]["rules"] == "portable"
    assert empty["status"] == "unresolved"
