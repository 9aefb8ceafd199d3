"""Each distinct patch of an instance graded once per sweep (``grading.shared``), on real xdist workers.

The grading runs are counted by the verify command itself: unsandboxed (``--arena-sandbox=none``), it
appends a line to a file of the test's before it runs the tests, so every run the harness starts is
counted, whichever worker starts it. The hostile side (an agent planting a verdict) is in
``tests/worker/test_hostile_cells.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from helpers.agents import arm_table
from helpers.gitrepos import VERIFY

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"


def counting_row(calc, counter: Path, **extra) -> dict:
    """The calc row whose verify command appends a line to ``counter`` each time a grading run starts."""
    return calc.row(verify=f"echo run >> {counter} && {VERIFY}", **extra)


def runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.is_file() else 0


def test_cells_with_the_same_patch_share_one_grading_run_and_different_patches_get_their_own(suite, calc, tmp_path):
    """GOLD and EMPTY x 3 trials on 2 workers: two grading runs, one per distinct patch. In each arm one
    cell graded (no ``verify_shared_with``); the others name it and carry its verdict."""
    counter = tmp_path / "grading-runs"
    suite.instances([counting_row(calc, counter)])
    result = suite.run("--arena-repeat=3", "--arena-sandbox=none", "-n", "2")
    rows = suite.ledger()
    assert len(rows) == 6, result.stdout.str()[-3000:]
    assert {row["worker"] for row in rows} == {"gw0", "gw1"}
    assert runs(counter) == 2
    for arm, status in (("GOLD", "resolved"), ("EMPTY", "unresolved")):
        cells = [row for row in rows if row["arm"] == arm]
        assert len({row["patch_sha256"] for row in cells}) == 1
        [graded] = [row for row in cells if row["verify_shared_with"] is None]
        for row in cells:
            assert row["status"] == status, row["error"]
            assert row["verify"] == graded["verify"]
            if row is not graded:
                assert row["verify_shared_with"] == graded["cell_key"]
                log = (suite.path / "arena-out" / row["run_dir"] / "verify.log").read_text()
                assert f"byte-identical to cell {graded['cell_key']}'s" in log
    gold = next(row for row in rows if row["arm"] == "GOLD" and row["verify_shared_with"] is None)
    empty = next(row for row in rows if row["arm"] == "EMPTY" and row["verify_shared_with"] is None)
    assert gold["patch_sha256"] != empty["patch_sha256"]
    assert list((suite.cache / "sweeps").iterdir()) == []  # kept for the sweep only


def test_grade_every_cell_gives_every_cell_a_grading_run_of_its_own(suite, calc, tmp_path):
    counter = tmp_path / "grading-runs"
    suite.instances([counting_row(calc, counter)])
    suite.run("--arena-repeat=3", "--arena-sandbox=none", "--arena-grade-every-cell", "-n", "2")
    rows = suite.ledger()
    assert len(rows) == 6
    assert runs(counter) == 6
    assert [row["verify_shared_with"] for row in rows] == [None] * 6
    assert sorted(row["status"] for row in rows) == ["resolved"] * 3 + ["unresolved"] * 3


def test_the_option_has_an_ini_twin(suite, calc, tmp_path):
    counter = tmp_path / "grading-runs"
    suite.instances([counting_row(calc, counter)])
    suite.ini_lines.append("arena_grade_every_cell = true")
    suite.run("--arena-repeat=2", "--arena-arms=EMPTY", "--arena-sandbox=none", "-p", "no:xdist")
    assert runs(counter) == 2


def test_a_grading_run_that_failed_for_the_harness_is_not_shared_the_next_cell_grades_again(suite, calc, tmp_path):
    """The first cell's arm (unsandboxed) removes the instance's environment template from the cache after its
    cell has copied it: that cell's grading tree cannot get its copy, a ``harness_error``. The second cell, with
    the same (empty) patch, does not take that failure: it builds the template again and grades."""
    counter = tmp_path / "grading-runs"
    marker = tmp_path / "template-removed"
    suite.instances([counting_row(calc, counter, env={"python": HERE})])
    suite.arms_toml = arm_table("BREAKER", "command", shell=True,
                                command=f"mkdir {marker} 2>/dev/null && rm -rf {suite.cache}/templates; true")
    result = suite.run("--arena-arms=BREAKER", "--arena-repeat=2", "--arena-sandbox=none", "-p", "no:xdist")
    first, second = sorted(suite.ledger(), key=lambda row: row["trial"])
    assert first["status"] == "harness_error", (first["error"], result.stdout.str()[-3000:])
    assert first["error"].startswith("verify: environment copy"), first["error"]
    assert first["patch_sha256"] == second["patch_sha256"]
    assert second["status"] == "unresolved", second["error"]
    assert second["verify_shared_with"] is None
    assert runs(counter) == 1  # the first cell's grading never reached its verify command


def test_grading_in_the_workspace_is_never_shared(suite, calc, tmp_path):
    """With ``--arena-verify-on=workspace`` each cell's tree is its own workspace as its arm left it: no sharing."""
    counter = tmp_path / "grading-runs"
    suite.instances([counting_row(calc, counter)])
    suite.run("--arena-repeat=2", "--arena-verify-on=workspace", "--arena-sandbox=none", "-n", "2")
    rows = suite.ledger()
    assert len(rows) == 4 and runs(counter) == 4
    assert [row["verify_shared_with"] for row in rows] == [None] * 4


def test_a_patch_refused_by_the_fresh_tree_is_refused_once_and_the_others_name_the_refusing_cell(suite, calc, tmp_path):
    """The arm adds a ``setup.cfg``: the grading tree runs the install again, which refuses it. The second
    trial's cell, with the same patch, takes that refusal and names the first cell in ``verify_shared_with``,
    as a shared verdict does."""
    installs = tmp_path / "installs"
    suite.instances([calc.row(env={"python": HERE, "install": f"echo install >> {installs} && test ! -e setup.cfg"})])
    suite.arms_toml = arm_table("BUILDBREAKER", "command", shell=True, command="echo '[metadata]' > setup.cfg")
    result = suite.run("--arena-arms=BUILDBREAKER", "--arena-repeat=2", "--arena-sandbox=none", "-p", "no:xdist")
    first, second = sorted(suite.ledger(), key=lambda row: row["trial"])
    for row in (first, second):
        assert row["status"] == "arm_error", (row["error"], result.stdout.str()[-3000:])
        assert "the environment's install step fails on the patched tree" in row["error"]
    assert first["verify_shared_with"] is None
    assert second["verify_shared_with"] == first["cell_key"]
    assert f"the grading run of cell {first['cell_key']}" in second["error"]
    # The template's build on base, then the first cell's grading tree: the second cell ran no install.
    assert installs.read_text().count("install") == 2
