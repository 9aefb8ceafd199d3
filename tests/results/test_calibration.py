"""Calibration (--arena-calibrate, --arena-calibrated-only) and image-backed instances without an engine."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers.arena import XDIST

from pytest_swe_arena.results import calibration


def broken_and_good_rows(calc):
    # The broken instance's gold patch touches only the README: it cannot make verify pass.
    readme_only = ("diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n"
                   "@@ -1 +1,2 @@\n # calc\n+fixed\n")
    return [calc.row("demo__calc-1"), calc.row("demo__broken-1", patch=readme_only)]


@pytest.mark.parametrize("xdist", XDIST)
def test_calibration_finds_a_broken_instance_and_calibrated_only_skips_it(suite, calc, xdist):
    suite.instances(broken_and_good_rows(calc))
    result = suite.run("--arena-calibrate", "--arena-arms=GOLD", *xdist)
    result.assert_outcomes(passed=1, failed=3)  # EMPTY joins GOLD for calibration
    result.stdout.fnmatch_lines([
        "calibration: 2 instance(s), 1 failed: demo__broken-1",
        "  demo__broken-1: gold patch does not resolve (unresolved: verify exited 1)",
    ])
    calibration = json.loads((suite.path / "arena-out/calibration.json").read_text())
    assert calibration["failed"] == ["demo__broken-1"]
    good = calibration["instances"]["demo__calc-1"]
    assert good["ok"] is True and good["problems"] == []
    assert [g["status"] for g in good["gold"]] == ["resolved"]
    assert [b["verify_passed"] for b in good["base"]] == [False]

    result = suite.run("--arena-calibrated-only", "--arena-arms=GOLD", "--arena-out=arena-out", *xdist)
    result.stdout.fnmatch_lines([
        "swe-arena: calibrated only: 1 instance(s) failed calibration and are deselected: demo__broken-1",
    ])
    result.assert_outcomes(passed=1, deselected=0 if xdist else 1)
    rows = [row for row in suite.ledger() if row["run_id"] != calibration["run_id"]]
    assert [(row["instance_id"], row["arm"], row["status"]) for row in rows] == [("demo__calc-1", "GOLD", "resolved")]


@pytest.mark.parametrize("xdist", XDIST)
def test_calibrate_exits_0_when_every_instance_calibrates_and_1_when_one_does_not(suite, calc, xdist):
    suite.instances([calc.row("demo__calc-1"), calc.row("demo__calc-2")])
    result = suite.run("--arena-calibrate", *xdist)
    result.assert_outcomes(passed=2, failed=2)  # EMPTY unresolved: what calibration expects
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["calibration: 2 instance(s), 0 failed*"])
    suite.instances(broken_and_good_rows(calc))
    result = suite.run("--arena-calibrate", "--arena-out=second", *xdist)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_calibrate_keeps_the_failure_of_another_arm(suite, calc):
    suite.instances([calc.row("demo__calc-1")])
    suite.arms_toml = '[tool.swe_arena.arms.NOTHING]\nkind = "empty"\n'
    result = suite.run("--arena-calibrate", "--arena-arms=NOTHING")
    result.assert_outcomes(passed=1, failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_base_that_already_passes_fails_calibration(suite, calc):
    suite.instances([calc.row("demo__calc-1", verify="true")])
    suite.run("--arena-calibrate").assert_outcomes(passed=1, failed=1)
    calibration = json.loads((suite.path / "arena-out/calibration.json").read_text())
    assert calibration["instances"]["demo__calc-1"]["problems"] == ["verify passes on the untouched base"]


def test_calibrated_only_without_a_calibration_is_a_usage_error(suite, calc):
    suite.instances([calc.row()])
    result = suite.run("--arena-calibrated-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--arena-calibrated-only: */arena-out/calibration.json does not exist; "
                                 "run the sweep with --arena-calibrate first*"])


def engine_answers(engine: str) -> bool:
    try:
        return subprocess.run([engine, "info"], capture_output=True, timeout=120, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.parametrize("xdist", XDIST)
def test_image_instances_without_an_engine_are_one_line_harness_errors(suite, calc, xdist):
    if engine_answers("docker"):
        pytest.skip("a container engine answers on this machine")
    image_row = calc.row("demo__image-1", source={"image": "swebench/sweb.eval.x86_64.demo__image-1:latest"})
    suite.instances([image_row, calc.row("demo__calc-1")])
    result = suite.run("--arena-arms=GOLD", "--arena-engine=docker", *xdist)
    result.assert_outcomes(passed=1, errors=1)
    rows = {row["instance_id"]: row for row in suite.ledger()}
    assert rows["demo__calc-1"]["status"] == "resolved"
    error = rows["demo__image-1"]["error"]
    assert rows["demo__image-1"]["status"] == "harness_error" and "\n" not in error
    assert "image swebench/sweb.eval.x86_64.demo__image-1:latest needs a container engine: container engine " \
           "'docker' " in error
    assert "not installed" in error or "does not answer" in error


@pytest.fixture(scope="module")
def testbed_image(tmp_path_factory):
    from helpers.testbed_image import calc_testbed_image

    yield from calc_testbed_image(tmp_path_factory, "calc")


def test_image_instances_materialize_from_testbed_and_verify_inside_the_image(suite, testbed_image):
    engine, tag, calc = testbed_image
    # Inside the image the workspace is mounted read-write (test suites write into their tree).
    verify = ("python -m pytest -q -p no:cacheprovider tests"
              " && python -c \"open('/testbed/probe', 'w').write('x')\" && test -f /testbed/probe")
    graded = calc.row("demo__image-2", source={"image": tag}, FAIL_TO_PASS='["tests/test_ops.py::test_mul"]',
                      PASS_TO_PASS='["tests/test_ops.py::test_add"]')
    del graded["verify"]
    suite.instances([calc.row("demo__image-1", source={"image": tag}, verify=verify), graded])
    result = suite.run(f"--arena-engine={engine}", "-n", "2")
    result.assert_outcomes(passed=2, failed=2)
    rows = {(row["instance_id"], row["arm"]): row for row in suite.ledger()}
    gold = rows["demo__image-1", "GOLD"]
    assert gold["status"] == "resolved" and gold["patch_lines"] == calc.patch.count("\n")
    assert rows["demo__image-1", "EMPTY"]["status"] == "unresolved"
    assert rows["demo__image-1", "EMPTY"]["verify"]["passed"] is False
    assert "2 passed" in (suite.path / "arena-out" / gold["run_dir"] / "verify.log").read_text()
    # Per-test grading inside the image: pytest's report reaches the run dir through its mount.
    assert rows["demo__image-2", "GOLD"]["verify"]["tests"] == {
        "FAIL_TO_PASS": {"tests/test_ops.py::test_mul": "passed"},
        "PASS_TO_PASS": {"tests/test_ops.py::test_add": "passed"}, "report": "junitxml", "failing": []}
    empty_tests = rows["demo__image-2", "EMPTY"]["verify"]["tests"]
    assert empty_tests["FAIL_TO_PASS"] == {"tests/test_ops.py::test_mul": "failed"}
    assert empty_tests["failing"] == ["tests/test_ops.py::test_mul"]


def calibration_row(iid: str, arm: str, status: str, run_id: str = "r1", **extra) -> dict:
    verify = {"passed": status == "resolved", "tests": {}} if status in ("resolved", "unresolved") else None
    return {"run_id": run_id, "instance_id": iid, "arm": arm, "status": status, "verify": verify,
            "error": extra.get("error")}


def test_a_harness_error_or_interrupt_makes_calibration_inconclusive_not_failed(tmp_path):
    from pytest_swe_arena.results.calibration import verdicts, write_calibration

    good = [calibration_row("a", "GOLD", "resolved"), calibration_row("a", "EMPTY", "unresolved")]
    path, problem = write_calibration(tmp_path, verdicts(good), "r1")
    assert problem is None and json.loads(path.read_text())["instances"]["a"]["ok"] is True

    flaky = [calibration_row("a", "GOLD", "harness_error", "r2", error="setup: clone failed"),
             calibration_row("a", "EMPTY", "unresolved", "r2"),
             calibration_row("b", "GOLD", "resolved", "r2"), calibration_row("b", "EMPTY", "interrupted", "r2")]
    found = verdicts(flaky)
    assert found["a"]["ok"] is None and found["a"]["inconclusive"] is True
    assert found["a"]["problems"] == ["GOLD did not finish (harness_error: setup: clone failed)"]
    assert found["b"]["ok"] is None
    write_calibration(tmp_path, found, "r2")
    data = json.loads(path.read_text())
    assert data["failed"] == [], "an unfinished cell says nothing against the instance"
    assert data["instances"]["a"]["ok"] is True, "an inconclusive verdict does not replace an earlier one"
    assert data["instances"]["b"]["inconclusive"] is True


@pytest.mark.parametrize("content", ["{not json", '["a list"]', '{"instances": 3}'])
def test_a_corrupt_calibration_file_is_replaced_with_a_warning(tmp_path, content):
    from pytest_swe_arena.results.calibration import verdicts, write_calibration

    (tmp_path / "calibration.json").write_text(content)
    rows = [calibration_row("a", "GOLD", "resolved"), calibration_row("a", "EMPTY", "unresolved")]
    path, problem = write_calibration(tmp_path, verdicts(rows), "r1")
    assert problem is not None and str(path) in problem and "replaced by this run's verdicts" in problem
    assert list(json.loads(path.read_text())["instances"]) == ["a"]


def test_a_sweep_with_a_corrupt_calibration_file_finishes_and_warns(suite, calc):
    suite.instances([calc.row("demo__calc-1")])
    (suite.path / "arena-out").mkdir()
    (suite.path / "arena-out/calibration.json").write_text("{torn")
    result = suite.run("--arena-calibrate", "--arena-arms=GOLD")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["warning: *calibration.json: cannot read calibration*replaced by this run's verdicts*"])
    assert json.loads((suite.path / "arena-out/calibration.json").read_text())["failed"] == []
    assert not (suite.path / "arena-out/arena.lock").exists()


@pytest.mark.parametrize(("content", "message"), [
    (b"demo__calc-1\nnot an/id  # comment\n", r"x\.txt:2: 'not an/id' is not an instance id; expected one id a line"),
    (b"\xff\xfe", r"x\.txt is not UTF-8 text"),
])
def test_a_bad_exclude_file_is_a_usage_error_naming_file_and_line(tmp_path, content, message):
    from pytest_swe_arena.results.calibration import read_exclude

    path = tmp_path / "x.txt"
    path.write_bytes(content)
    with pytest.raises(pytest.UsageError, match=r"--arena-exclude: .*" + message):
        read_exclude(path, "--arena-exclude")


def test_the_exclude_file_lists_flaky_and_broken_instances_with_their_rates(tmp_path):
    from pytest_swe_arena.results.calibration import exclude_text, read_exclude

    def row(iid, arm, status, trial):
        return {"instance_id": iid, "arm": arm, "status": status, "trial": trial,
                "verify": {"passed": status == "resolved", "tests": {}}}

    rows = [row("steady", "GOLD", "resolved", t) for t in (1, 2, 3)]
    rows += [row(iid, "EMPTY", "unresolved", t) for iid in ("steady", "shaky", "dead") for t in (1, 2, 3)]
    rows += [row("shaky", "GOLD", "resolved" if t < 3 else "unresolved", t) for t in (1, 2, 3)]
    rows += [row("dead", "GOLD", "unresolved", t) for t in (1, 2, 3)]
    found = calibration.verdicts(rows)
    assert {iid: verdict["stability"] for iid, verdict in found.items()} == {
        "dead": "broken", "shaky": "flaky", "steady": "stable"}
    assert found["shaky"]["gold_resolved"] == [2, 3] and found["shaky"]["empty_resolved"] == [0, 3]
    text = exclude_text(found)
    assert "shaky  # flaky: gold 2/3, empty 0/3" in text.splitlines()
    path = tmp_path / "exclude.txt"
    path.write_text(text)
    assert read_exclude(path, "--arena-exclude")[0] == ["dead", "shaky"]
