"""The bundled suite: calibrated (GOLD resolves every instance, EMPTY none), and built from instances/projects/."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.gitrepos import read_ledger

INSTANCES = Path(__file__).resolve().parents[2] / "instances"
BUILDER = INSTANCES / "build_suite.py"
#: The builder's verify-speed limit is for maintainers; a loaded CI machine must not fail on it.
NO_SPEED_LIMIT = ("--max-verify-seconds", "inf")


def build_suite(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BUILDER), *map(str, args)], capture_output=True, text=True,
                          timeout=3600, check=False)


def bundle_heads(bundle: Path) -> str:
    return subprocess.run(["git", "bundle", "list-heads", str(bundle)], capture_output=True, text=True,
                          check=True).stdout


def calibration_sweep(suite: Any) -> tuple[list[dict[str, Any]], pytest.RunResult]:
    """GOLD and EMPTY over the bundled suite: (its ledger rows, its pytest result).

    The README's main command is this sweep, and .ci/run runs it (in a fresh virtualenv, from a copy of the
    checkout) just before the suite, naming in ``$ARENA_README_SWEEP`` the directory it ran in (its
    ``arena-out`` and its terminal output, ``pytest.out``): then that sweep is the one checked, not run twice.
    """
    readme_sweep = os.environ.get("ARENA_README_SWEEP")
    if readme_sweep:
        where = Path(readme_sweep)
        lines = (where / "pytest.out").read_text().splitlines()
        return read_ledger(where / "arena-out"), pytest.RunResult(pytest.ExitCode.TESTS_FAILED, lines, [], 0.0)
    result = suite.run(f"--arena-instances={INSTANCES}", "--arena-arms=GOLD,EMPTY", "-n", "2")
    return suite.ledger(), result


def test_bundled_instances_are_calibrated(suite):
    rows, result = calibration_sweep(suite)
    count = len({row["instance_id"] for row in rows})
    assert count >= 8
    result.assert_outcomes(passed=count, failed=count)
    for row in rows:
        if row["arm"] == "GOLD":
            assert row["status"] == "resolved", row
            assert row["patch_lines"] > 0
        else:
            assert row["status"] == "unresolved", row
            assert row["verify"]["passed"] is False, f"{row['instance_id']}: verify passes on the untouched base"


def test_the_project_folders_rebuild_the_committed_suite(tmp_path):
    built = build_suite("--out", tmp_path, *NO_SPEED_LIMIT)
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "suite.jsonl").read_bytes() == (INSTANCES / "suite.jsonl").read_bytes()
    committed = sorted(path.name for path in (INSTANCES / "repos").glob("*.bundle"))
    assert sorted(path.name for path in (tmp_path / "repos").glob("*.bundle")) == committed
    assert sorted(path.name for path in (INSTANCES / "projects").iterdir()) == [name[:-7] for name in committed]
    for name in committed:
        assert bundle_heads(tmp_path / "repos" / name) == bundle_heads(INSTANCES / "repos" / name), name


def test_check_rejects_a_passing_test_listed_as_fail_to_pass(tmp_path):
    rows = [json.loads(line) for line in (INSTANCES / "suite.jsonl").read_text().splitlines()]
    row = min(rows, key=lambda row: len(row["FAIL_TO_PASS"]) + len(row["PASS_TO_PASS"]))
    moved = row["PASS_TO_PASS"].pop(0)
    row["FAIL_TO_PASS"] = sorted([*row["FAIL_TO_PASS"], moved])
    (tmp_path / "repos").mkdir()
    shutil.copyfile(INSTANCES / row["source"]["bundle"], tmp_path / row["source"]["bundle"])
    (tmp_path / "suite.jsonl").write_text(json.dumps(row) + "\n")
    checked = build_suite("--check", "--out", tmp_path, *NO_SPEED_LIMIT)
    assert checked.returncode == 1
    assert f"{row['instance_id']}: FAIL_TO_PASS tests already pass at base + test_patch: [{moved!r}]" in checked.stderr
    assert f"{row['instance_id']}: FAIL_TO_PASS is not what the tests give: missing [], not expected [{moved!r}]" \
        in checked.stderr


@pytest.mark.parametrize("defect, message", [
    pytest.param("gold patch edits a test", "the gold patch touches files the harness leaves out of every patch: "
                 "['tests/test_cache.py', 'tests/test_memoize.py']", id="gold-patch-edits-tests"),
    pytest.param("test patch edits the code", "the test patch touches files that are not tests under tests/: "
                 "['lrukit/cache.py']", id="test-patch-edits-code"),
    pytest.param("stray file", "unexpected ['hints.md', 'history/notes.txt']; a project folder holds only",
                 id="stray-files"),
    pytest.param("computed field in instance.toml", "instance.toml: ['base_commit'] are filled in by the builder",
                 id="computed-field-in-metadata"),
])
def test_a_broken_project_folder_is_named_and_nothing_is_written(tmp_path, defect, message):
    projects, out = tmp_path / "projects", tmp_path / "out"
    folder = projects / "lrukit"
    shutil.copytree(INSTANCES / "projects" / "lrukit", folder)
    gold, test = (folder / "gold.patch").read_text(), (folder / "test.patch").read_text()
    if defect == "gold patch edits a test":
        (folder / "gold.patch").write_text(gold + test)
    elif defect == "test patch edits the code":
        (folder / "test.patch").write_text(test + gold)
    elif defect == "stray file":
        (folder / "hints.md").write_text("a hint\n")
        (folder / "history" / "notes.txt").write_text("notes\n")
    else:
        with open(folder / "instance.toml", "a") as metadata:
            metadata.write('base_commit = "0000000"\n')
    built = build_suite("--projects", projects, "--out", out)
    assert built.returncode == 1
    assert message in built.stderr
    assert str(folder) in built.stderr
    assert not out.exists()
