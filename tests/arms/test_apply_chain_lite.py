"""The apply chain on real SWE-bench Lite rows: each path, against SWE-bench's own commands on the same patch.

For each patch, SWE-bench's chain (``helpers.swebench_chain``: its commands, run as its harness runs
them) is run on a testbed made as SWE-bench makes one (the base commit, the spec's ``pre_install``
steps, then ``git commit -am``), and the harness must record the method it applied with and reach the
verdict that method's tree gets: the gold tree's verdict, base's, or the arm's failure when none applies.

- ``pallets__flask-4992``, graded end to end (the shipped spec's environment, the row unchanged):
  gold (``git apply``), gold with a drifted context line (``fuzz``), the base commit's own change
  (``already applied``), gold with a removed line the tree does not have (nothing applies), empty.
- ``sphinx-doc__sphinx-8721``, applied only (its full tree is too large to bundle): a diff made in a
  testbed whose setup edits (``sed -i 's/pytest/pytest -rA/' tox.ini`` and the ``setup.py`` pins)
  were not committed carries them (``3way``), and one whose testbed pinned Jinja2 otherwise conflicts.

The repositories are in ``tests/data/swebench_lite`` (its README says how they were made).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.gitrepos import LITE_DATA, git, unbundle_shallow
from helpers.swebench_chain import SWEBENCH_CHAIN, drift_first_context_line, swebench_apply

from pytest_swe_arena.cell.patches import PatchChainError, apply_recorded_patch, commit_environment_setup
from pytest_swe_arena.cell.workspace import Workspace
from pytest_swe_arena.instances.swebench_specs import load_shipped_specs

ROWS = {row["instance_id"]: row for row in json.loads((LITE_DATA / "rows.json").read_text())}
FLASK = ROWS["pallets__flask-4992"]
SPHINX = ROWS["sphinx-doc__sphinx-8721"]


def swebench_testbed(repo: Path, base: str, where: Path, setup: list[str] | tuple[str, ...] = ()) -> Path:
    """A checkout at ``base`` with the setup steps run and committed, as SWE-bench's image holds its testbed."""
    subprocess.run(["git", "clone", "-q", str(repo), str(where)], check=True, capture_output=True)
    git(where, "checkout", "-q", base)
    for step in setup:
        subprocess.run(step, shell=True, cwd=where, check=True)
    git(where, "commit", "-q", "--allow-empty", "-am", "SWE-bench")  # its clean_diff_commands
    return where


def tree_id(tree: Path) -> str:
    """The work tree's files, as a git tree id; ``patch``'s ``.orig`` backups (SWE-bench's ``patch`` leaves
    one beside a hunk it fuzzed, which its ``git diff`` and its tests never read) left out."""
    git(tree, "add", "-A", "--", ".", ":(exclude,glob)**/*.orig")
    tree_sha = git(tree, "write-tree").strip()
    git(tree, "reset", "-q")
    return tree_sha


def swebench_decides(repo: Path, base: str, patch: str, scratch: Path, setup: list[str] | tuple[str, ...] = ()
                     ) -> tuple[str | None, str]:
    """SWE-bench's method for ``patch`` on its testbed, and the tree it leaves."""
    tree = swebench_testbed(repo, base, scratch / "testbed", setup)
    patch_file = scratch / "patch.diff"
    patch_file.write_text(patch)
    method = swebench_apply(tree, patch_file)
    return method, tree_id(tree)


@pytest.fixture(scope="module")
def flask_repos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``--arena-repos``: the row's base and environment_setup_commit, as ``pallets__flask``."""
    repos = tmp_path_factory.mktemp("repos")
    unbundle_shallow(LITE_DATA / "pallets__flask.bundle", repos / "pallets__flask",
                     [FLASK["base_commit"], FLASK["environment_setup_commit"]])
    return repos


def flask_predictions() -> dict[str, str]:
    gold = FLASK["patch"]
    removed = "-            with open(filename) as f:\n"
    assert removed in gold
    return {
        "PLAIN": gold,
        "DRIFTED": drift_first_context_line(gold),
        # The base commit's own change to scaffold.py: a prediction that resubmits what the tree holds.
        "ALREADY": (LITE_DATA / "pallets__flask-4992.already.diff").read_text(),
        "UNAPPLIED": gold.replace(removed, "-            with open(filename, encoding='utf-8') as f:\n"),
        "NOTHING": "",
    }


def test_each_path_on_a_real_flask_row_as_swebench_decides(suite, flask_repos, tmp_path_factory) -> None:
    predictions = flask_predictions()
    repo, base = flask_repos / "pallets__flask", FLASK["base_commit"]
    gold_tree = swebench_decides(repo, base, FLASK["patch"], tmp_path_factory.mktemp("gold"))[1]
    base_tree = git(repo, "rev-parse", f"{base}^{{tree}}").strip()
    expected: dict[str, tuple[str | None, str]] = {}
    for arm, patch in predictions.items():
        if not patch:
            continue
        method, tree = swebench_decides(repo, base, patch, tmp_path_factory.mktemp(arm))
        # The verdict that method's tree gets: gold's tree is resolved (the row's FAIL_TO_PASS pass with
        # it), base's is not; a patch nothing applies is an error in SWE-bench's report, the arm's here.
        verdict = {gold_tree: "resolved", base_tree: "unresolved"}.get(tree) if method else "arm_error"
        assert verdict is not None, f"{arm}: SWE-bench's {method} left a tree that is neither gold's nor base's"
        expected[arm] = (method, verdict)
    # Every path is taken (a change on SWE-bench's side, or in the patches, shows here).
    assert {arm: method for arm, (method, _) in expected.items()} == {
        "PLAIN": "git apply", "DRIFTED": "fuzz", "ALREADY": "already applied", "UNAPPLIED": None}
    suite.instances([FLASK])  # the row as SWE-bench ships it: no env, no verify, no source
    suite.arms_toml = "".join(f'[tool.swe_arena.arms.{arm}]\nkind = "replay"\npredictions = "{arm}.json"\n'
                              for arm in predictions)
    for arm, patch in predictions.items():
        prediction = {"instance_id": FLASK["instance_id"], "model_name_or_path": arm, "model_patch": patch}
        (suite.path / f"{arm}.json").write_text(json.dumps([prediction]))
    suite.run(f"--arena-repos={flask_repos}", "--arena-arms", ",".join(predictions), "-n", "2")
    rows: dict[str, dict[str, Any]] = {row["arm"]: row for row in suite.ledger()}
    for arm, (method, verdict) in expected.items():
        row = rows[arm]
        assert (row["provenance"].get("apply_method"), row["status"]) == (method, verdict), (arm, row.get("error"))
    assert rows["DRIFTED"]["provenance"]["apply_fuzz"] == ["Hunk #1 succeeded at 234 with fuzz 1."]
    attempts = rows["UNAPPLIED"]["details"]["apply_attempts"]
    assert [attempt["method"] for attempt in attempts] == [method for method, _ in SWEBENCH_CHAIN]
    # SWE-bench does not run an empty prediction (empty_patch_ids); here it is unresolved, and says why.
    assert (rows["NOTHING"]["status"], rows["NOTHING"]["error"]) == ("unresolved", "empty patch")
    assert rows["NOTHING"]["provenance"].get("apply_method") is None


def sphinx_setup(jinja_pin: str = "Jinja2<3.0") -> list[str]:
    """The shipped spec's ``pre_install`` for the row (SWE-bench's), its Jinja2 pin replaced if asked."""
    spec = load_shipped_specs().get(SPHINX["repo"], SPHINX["version"])
    assert spec is not None
    steps = list(spec.env["pre_install"])
    assert "sed -i 's/pytest/pytest -rA/' tox.ini" in steps
    return [step.replace("Jinja2<3.0", jinja_pin) for step in steps]


def carried_diff(repo: Path, base: str, where: Path, setup: list[str]) -> str:
    """Gold, as a diff taken in a testbed whose setup steps ran but were not committed: it carries them."""
    subprocess.run(["git", "clone", "-q", str(repo), str(where)], check=True, capture_output=True)
    git(where, "checkout", "-q", base)
    for step in setup:
        subprocess.run(step, shell=True, cwd=where, check=True)
    (where / "gold.diff").write_text(SPHINX["patch"])
    git(where, "apply", "gold.diff")
    (where / "gold.diff").unlink()
    return git(where, "diff")


@pytest.mark.parametrize(("jinja_pin", "method"), [("Jinja2<3.0", "3way"), ("Jinja2<3.1", None)],
                         ids=["carried-setup-edits", "conflicting-setup-edits"])
def test_setup_edits_carried_in_a_real_sphinx_diff(tmp_path, jinja_pin, method) -> None:
    repo = tmp_path / "sphinx.git"
    git(tmp_path, "clone", "-q", "--bare", str(LITE_DATA / "sphinx-doc__sphinx-8721.bundle"), repo.name)
    base = git(repo, "rev-parse", "base").strip()
    patch = carried_diff(repo, base, tmp_path / "agent", sphinx_setup(jinja_pin))
    assert "+    python -X dev -m pytest -rA" in patch and "+    'Jinja2<" in patch and "viewcode_enable_epub" in patch
    decided, swebench_tree = swebench_decides(repo, base, patch, tmp_path / "swebench", sphinx_setup())
    assert decided == method  # what SWE-bench's commands do with it
    # The harness's testbed: the same checkout, the spec's steps committed as the environment's.
    work = tmp_path / "workspace"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True, capture_output=True)
    git(work, "checkout", "-q", base)
    for step in sphinx_setup():
        subprocess.run(step, shell=True, cwd=work, check=True)
    workspace = commit_environment_setup(Workspace(work, base))
    if method is None:
        with pytest.raises(PatchChainError) as failed:
            apply_recorded_patch(workspace, patch.encode(), "the prediction")
        assert [attempt for attempt, _ in failed.value.attempts] == [name for name, _ in SWEBENCH_CHAIN]
        assert "conflict" in failed.value.attempts[1][1].lower()
        return
    applied = apply_recorded_patch(workspace, patch.encode(), "the prediction")
    assert applied.method == method
    assert tree_id(work) == swebench_tree  # the same files as SWE-bench's tree: the same grading
