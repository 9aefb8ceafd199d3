"""SWE-bench's runners in verify: chosen by repo (Django's runtests.py with the real django), by a row's
eval_script or log_parser, and graded by SWE-bench 5.0.2's rules or the strict ones."""

from __future__ import annotations

import json
import sys

import pytest
from helpers.arena import XDIST, ledger_validator
from helpers.gitrepos import django_style_row, shapes_swe_bench_row

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
        "report": "log", "log_parser": "parse_log_django", "rules": "swebench"}
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
