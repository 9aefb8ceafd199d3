"""End-to-end sweeps: cells, verification, the ledger and the outputs, with and without xdist."""

from __future__ import annotations

import importlib
import json

import pytest
from helpers.arena import XDIST, ledger_validator
from helpers.gitrepos import bundle

# chain_sha256 seals each row to the one before it, run ids and times included: it differs per run by design.
TIME_FIELDS = {"phases", "started_at", "ended_at", "run_id", "worker", "verify", "chain_sha256"}


def comparable(rows):
    return sorted(({k: v for k, v in row.items() if k not in TIME_FIELDS} for row in rows),
                  key=lambda row: (row["instance_id"], row["arm"]))


@pytest.mark.parametrize("xdist", XDIST)
def test_gold_and_empty_sweep_writes_ledger_patches_predictions_and_summary(suite, calc, xdist):
    bundle(calc, suite.path / "instances/repos/calc.bundle")
    rows = [calc.row(f"demo__calc-{n}", source={"bundle": "repos/calc.bundle"}) for n in (1, 2)]
    suite.instances(rows)
    result = suite.run("-p", "no:randomly", *xdist)
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "*swe-arena results*",
        "2 instances x 2 arms: 4 cells *",
        "arm * resolved * rate * 95% CI * USD * USD/res * tokens * tok/res * wall p50",
        "GOLD * 2/2 * 100.0% * 34.2-100.0% * 0.0000 * 0.0000 * 0 * 0 * *s",
        "EMPTY * 0/2 * 0.0% * 0.0-65.8% * 0.0000 * n/a * 0 * n/a * *s",
        "paired (A vs B) * pairs * only A * only B * A-B pp * 95% CI (pp) * p exact * p Holm",
        "GOLD vs EMPTY * 2 * 2 * 0 * +100.0 * [[]+100.0, +100.0[]] * 0.5000 * 0.5000",
        "tied with the best (GOLD; exact McNemar, Holm-adjusted p >= 0.05): GOLD, EMPTY",
        "2 of 2 instances decide the comparison (0 resolved by every arm, 0 by none)",
    ])
    result.stdout.fnmatch_lines(["UNRESOLVED instances/demo.jsonl::demo__calc-1[[]EMPTY[]] - *unresolved: empty patch"])

    ledger = suite.ledger()
    assert sorted((r["instance_id"], r["arm"], r["status"]) for r in ledger) == [
        ("demo__calc-1", "EMPTY", "unresolved"), ("demo__calc-1", "GOLD", "resolved"),
        ("demo__calc-2", "EMPTY", "unresolved"), ("demo__calc-2", "GOLD", "resolved"),
    ]
    out = suite.path / "arena-out"
    validator = ledger_validator()
    for row in ledger:
        validator.validate(row)
        assert row["schema_version"] == 1 and row["trial"] == 1
        assert row["arm_identity"]["name"] == row["arm"]
        assert row["usage"]["cost_source"] == "none"
        assert set(row["phases"]) >= {"workspace", "arm", "patch", "verify"}
        # EMPTY is graded too: its verify must really fail (calibration), not be skipped.
        assert row["verify"]["passed"] is (row["arm"] == "GOLD")
        assert (out / row["run_dir"] / "verify.log").is_file()
        patch = (out / row["patch_file"]).read_text()
        assert row["patch_file"] == f"patches/{row['instance_id']}.{row['arm'].lower()}.patch"
        if row["arm"] == "GOLD":
            assert patch == calc.patch and row["patch_lines"] == calc.patch.count("\n")
        else:
            assert patch == ""
    predictions = [json.loads(line) for line in (out / "predictions/GOLD.jsonl").read_text().splitlines()]
    assert predictions == [
        {"instance_id": f"demo__calc-{n}", "model_name_or_path": "GOLD", "model_patch": calc.patch} for n in (1, 2)
    ]
    assert (out / "predictions/EMPTY.jsonl").is_file()
    summary = suite.summary()
    assert [(a["arm"], a["cells"], a["resolved"]) for a in summary["arms"]] == [("GOLD", 2, 2), ("EMPTY", 2, 0)]


def test_same_rows_with_and_without_xdist(suite, calc):
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    suite.run("--arena-out=serial").assert_outcomes(passed=3, failed=3)
    suite.run("--arena-out=parallel", "-n", "2").assert_outcomes(passed=3, failed=3)
    serial, parallel = suite.ledger("serial"), suite.ledger("parallel")
    assert {r["worker"] for r in serial} == {"controller"}
    assert {r["worker"] for r in parallel} <= {"gw0", "gw1"}
    assert comparable(serial) == comparable(parallel)


CHEATER_CONFTEST = '''
from pytest_swe_arena.arms.base import ArmResult
from pytest_swe_arena.spend.usage import Usage

CHEAT = """
import calc, calc.ops


def _mul(a, b):
    return a * b


calc.mul = calc.ops.mul = _mul
"""


class CheaterArm:
    """Makes the tests pass by patching the code from a test conftest, not by fixing it."""

    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        ws = request.workspace.path
        (ws / "tests" / "conftest.py").write_text(CHEAT)
        (ws / "README.md").write_text("# calc\\n\\nmul is fixed now.\\n")
        return ArmResult(usage=Usage.no_model())


def pytest_arena_arm_kinds():
    return {"cheater": CheaterArm}
'''


def test_an_arm_that_edits_tests_cannot_change_its_grade(suite, calc):
    suite.instances([calc.row()])
    suite.pytester.makeconftest(CHEATER_CONFTEST)
    suite.arms_toml = '[tool.swe_arena.arms.CHEAT]\nkind = "cheater"\n'

    result = suite.run("--arena-arms", "CHEAT")
    result.assert_outcomes(failed=1)
    [row] = suite.ledger()
    assert row["status"] == "unresolved" and row["error"] == "verify exited 1"
    patch = (suite.path / "arena-out" / row["patch_file"]).read_text()
    assert "README.md" in patch and "conftest" not in patch

    # The seed's behaviour, for contrast: grading the workspace as left lets the cheat through.
    result = suite.run("--arena-arms", "CHEAT", "--arena-verify-on=workspace", "--arena-out=ws")
    result.assert_outcomes(passed=1)


def test_two_workers_materialize_the_same_repo_once(suite, calc):
    bundle(calc, suite.path / "instances/repos/calc.bundle")
    rows = [calc.row(f"demo__calc-{n}", source={"bundle": "repos/calc.bundle"}) for n in range(1, 7)]
    suite.instances(rows)
    result = suite.run("-n", "2", "--arena-arms", "GOLD")
    result.assert_outcomes(passed=6)
    ledger = suite.ledger()
    assert {row["worker"] for row in ledger} == {"gw0", "gw1"}
    [mirror] = (suite.cache / "mirrors").glob("*.git")
    fetches = (mirror / "arena-fetches.log").read_text().splitlines()
    assert len(fetches) == 1, fetches


def test_missing_commit_is_a_harness_error_naming_it(suite, calc):
    suite.instances([calc.row(base_commit="0123456789abcdef0123456789abcdef01234567")])
    result = suite.run("--arena-arms", "GOLD")
    result.assert_outcomes(errors=1)
    missing = "0123456789abcdef0123456789abcdef01234567"
    result.stdout.fnmatch_lines([f"*harness_error*base_commit {missing} not found in git *"])
    [row] = suite.ledger()
    assert row["status"] == "harness_error" and "not found" in row["error"]


def test_broken_verify_infrastructure_is_an_error_not_a_failure(suite, calc):
    suite.instances([calc.row(test_patch="diff --git a/tests/x.py b/tests/x.py\n--- a/tests/x.py\n+++ b/tests/x.py\n"
                              "@@ -1 +1 @@\n-nothing\n+here\n")])
    result = suite.run("--arena-arms", "GOLD")
    result.assert_outcomes(errors=1)
    [row] = suite.ledger()
    assert row["status"] == "harness_error"
    assert "test_patch of demo__calc-1 does not apply" in row["error"]
    assert row["verify"] is None


OWN_CELL_ENV_CONFTEST = '''
import pytest
from pytest_swe_arena.cell.environment import create_cell_environment


@pytest.fixture
def arena_cell_env(tmp_path):
    """A suite's own cell environment (docs/internals: every cell fixture can be overridden)."""
    cell = create_cell_environment(tmp_path / "own-cell")
    (cell.run_dir / "own.txt").write_text("mine")
    return cell
'''


def test_a_conftest_may_override_arena_cell_env(suite, calc):
    suite.instances([calc.row()])
    suite.pytester.makeconftest(OWN_CELL_ENV_CONFTEST)
    result = suite.run("--arena-arms=GOLD")
    result.assert_outcomes(passed=1)
    [row] = suite.ledger()
    assert row["status"] == "resolved" and row["started_at"]
    assert set(row["phases"]) >= {"workspace", "arm", "verify"}
    assert (suite.path / "arena-out" / row["run_dir"] / "own.txt").read_text() == "mine"


def test_resume_runs_again_when_the_suite_suffix_or_strict_models_change(suite, calc):
    suite.instances([calc.row()])
    suite.arms_toml = '[tool.swe_arena.arms.ALT]\nkind = "gold"\n'
    suite.run("--arena-arms=ALT", "--arena-resume").assert_outcomes(passed=1)
    suite.run("--arena-arms=ALT", "--arena-resume").assert_outcomes(passed=1)
    # The prompt every arm without its own suffix gets is part of its identity.
    suite.arms_toml = 'worker_suffix = "Be brief."\n[tool.swe_arena.arms.ALT]\nkind = "gold"\n'
    suite.run("--arena-arms=ALT", "--arena-resume").assert_outcomes(passed=1)
    suite.run("--arena-arms=ALT", "--arena-resume").assert_outcomes(passed=1)
    suite.run("--arena-arms=ALT", "--arena-resume", "--arena-strict-models").assert_outcomes(passed=1)
    rows = suite.ledger()
    assert [row.get("reused_from") is not None for row in rows] == [False, True, False, True, False]
    assert "worker_suffix_sha256" in rows[0]["arm_identity"]["inherited"]
    assert rows[2]["arm_identity"]["inherited"] != rows[0]["arm_identity"]["inherited"]
    assert rows[4]["arm_identity"]["inherited"]["strict_models"] is True
    assert len({row["cell_key"] for row in rows}) == 3




QUIET_REPORTS_CONFTEST = '''
import json

import pytest

lengths = []


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid):
    reporter = pytest.arena_config.pluginmanager.get_plugin("terminalreporter")
    lengths.append(len(reporter.stats.get("", [])))


def pytest_configure(config):
    pytest.arena_config = config


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        with open("quiet-reports.json", "w") as out:
            json.dump(lengths, out)
'''


@pytest.mark.parametrize("xdist", XDIST)
def test_the_cells_silent_reports_leave_the_controller_as_the_sweep_goes(suite, calc, xdist, monkeypatch):
    # pytest keeps every report to the end: a cell's passed setup and teardown would cost the
    # controller memory per cell for the whole sweep (DROP_SILENT_EVERY cells at a time here: 2).
    # The module as sys.modules has it, which the in-process run imports: an earlier in-process run's module
    # can be left as the package's attribute (pytester drops the modules a run imported), and a dotted
    # monkeypatch target would patch that one.
    recorder = importlib.import_module("pytest_swe_arena.controller.recorder")
    monkeypatch.setattr(recorder, "DROP_SILENT_EVERY", 2)
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    suite.pytester.makeconftest(QUIET_REPORTS_CONFTEST)
    result = suite.run("-p", "no:randomly", *xdist, subprocess=False)  # in process: the patched constant holds
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines(["*swe-arena results*", "GOLD * 3/3 * 100.0% *",
                                 "UNRESOLVED instances/demo.jsonl::demo__calc-2[[]EMPTY[]] - *unresolved: empty patch"])
    lengths = json.loads((suite.path / "quiet-reports.json").read_text())
    assert len(lengths) == 6 and max(lengths) <= 4 + 2 * len(xdist), lengths  # 12 if kept to the end
    assert lengths[1] == lengths[3] == lengths[5] == 0 or xdist, lengths


WORKER_REPORTS_CONFTEST = '''
import json
import os

import pytest


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, config):
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # what the worker's own (unseen) summary was rendered from
        kept = sum(1 for reports in terminalreporter.stats.values() for report in reports
                   if "[" in str(getattr(report, "nodeid", "")))
        with open(os.path.join(str(config.rootpath), "kept-" + workerinput["workerid"]), "w") as out:
            out.write(json.dumps(kept))
'''


def test_a_workers_unseen_terminal_keeps_no_cell_report_to_summarize(suite, calc):
    # Every report reaches the controller, which shows it; a worker's own terminal reporter writes
    # nowhere, and summarizing what it kept costs O(failures x cells) at exit (5 s and an interrupt
    # from execnet at 10,000 cells). The EMPTY cells fail, so there is a failure summary to render.
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    suite.pytester.makeconftest(WORKER_REPORTS_CONFTEST)
    result = suite.run("-n", "2")
    result.assert_outcomes(passed=3, failed=3)
    kept = {path.name: json.loads(path.read_text()) for path in suite.path.glob("kept-gw*")}
    assert sorted(kept) == ["kept-gw0", "kept-gw1"] and set(kept.values()) == {0}, kept
