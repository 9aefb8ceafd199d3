"""Patch extraction with the harness's own git: the agent's .git is never read, whatever it holds."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.gitrepos import Project, commit, git

from pytest_swe_arena.cell.patches import (
    ExcludedFile,
    Extraction,
    ExtractionError,
    HarnessGit,
    excluded_details,
    extract,
    files_touched,
)
from pytest_swe_arena.cell.workspace import RepoStore, Workspace, materialize
from pytest_swe_arena.instances.loading import build_instance

GIT_TRICKS = Path(__file__).parents[1] / "data" / "hostile" / "git_tricks.py"
ATTACKS = ["fsmonitor", "hooks", "clean-filter", "encoding", "replace", "skip-worktree", "assume-unchanged",
           "worktree", "destroy-git"]
FIX_LINE = b"+    return a * b\n"


@dataclass
class Cell:
    workspace: Workspace
    objects: Path
    markers: Path  # outside the workspace: what the agent's tricks leave when they run, and a victim dir
    harness_git: Path

    def extract(self) -> Extraction:
        return extract(self.workspace.path, self.workspace.base_commit, self.objects, self.harness_git)

    def attack(self, attack: str) -> None:
        subprocess.run([sys.executable, str(GIT_TRICKS), attack, str(self.markers)], cwd=self.workspace.path,
                       check=True)

    def outside_untouched(self) -> None:
        assert not (self.markers / "ran.log").exists(), (self.markers / "ran.log").read_text()
        assert sorted(p.name for p in (self.markers / "victim").iterdir()) == ["keep.txt", "tracked.py"]
        assert (self.markers / "victim" / "keep.txt").read_text() == "the victim's file\n"


@pytest.fixture
def cell(calc: Project, tmp_path: Path) -> Cell:
    instance = build_instance(tmp_path / "i.jsonl", 1, calc.row(), None)
    store = RepoStore(tmp_path / "cache")
    workspace = materialize(instance, store, tmp_path / "cell" / "workspace")
    objects = store.snapshot(*store.ensure_commit(instance.source, instance.repo, instance.base_commit))
    victim = tmp_path / "markers" / "victim"
    victim.mkdir(parents=True)
    (victim / "keep.txt").write_text("the victim's file\n")
    (victim / "tracked.py").write_text("# a file of the victim's own\n")
    return Cell(workspace, objects, tmp_path / "markers", tmp_path / "harness" / "extract.git")


def fresh_tree_with(patch: bytes, cell: Cell, dest: Path) -> Path:
    """A checkout of base through a harness git, the patch applied: what grading will see."""
    harness = HarnessGit.create(dest.parent / (dest.name + ".git"), dest, cell.objects)
    harness.checkout_base(cell.workspace.base_commit)
    harness.output("apply", "--binary", "-", input=patch)
    return dest


@pytest.mark.parametrize("attack", ATTACKS)
def test_the_fix_is_in_the_patch_and_the_agents_git_runs_nothing(cell, attack, tmp_path):
    cell.attack(attack)

    extraction = cell.extract()

    assert FIX_LINE in extraction.patch
    assert sorted(files_touched(extraction.patch)) == (
        [".gitattributes"] if attack in ("clean-filter", "encoding") else []) + ["README.md", "calc/ops.py"]
    cell.outside_untouched()
    # The patch is the files: applied to base, it gives back what the agent left.
    tree = fresh_tree_with(extraction.patch, cell, tmp_path / "grading")
    for name in ("calc/ops.py", "README.md", "calc/__init__.py"):
        assert (tree / name).read_bytes() == (cell.workspace.path / name).read_bytes(), name


def test_a_nested_repository_becomes_its_files_and_is_named(cell):
    cell.attack("nested-pytest")
    extraction = cell.extract()
    assert extraction.nested_repositories == ("pytest",)
    assert "pytest/__init__.py" in files_touched(extraction.patch)
    assert b"Subproject commit" not in extraction.patch and b"160000" not in extraction.patch
    assert b".git/" not in extraction.patch


def test_the_supervisors_worker_clones_under_loops_are_neither_files_nor_nested_repositories(cell):
    """The supervisor's workers work in git clones of the workspace under .loops/: excluded, not taken in."""
    clone = cell.workspace.path / ".loops" / "sandboxes" / "w1"
    subprocess.run(["git", "clone", "-q", str(cell.workspace.path), str(clone)], check=True)
    (clone / "calc" / "ops.py").write_text("# the worker's change, merged back by the driver or not at all\n")
    assert cell.extract() == Extraction(b"", ())


def test_the_agents_git_dir_never_enters_the_patch(cell):
    (cell.workspace.path / ".git" / "notes.txt").write_text("kept in the agent's .git\n")
    (cell.workspace.path / "calc" / "ops.py").write_text("# the agent's change\n")
    assert files_touched(cell.extract().patch) == ["calc/ops.py"]


def test_an_untouched_workspace_gives_an_empty_patch_and_excludes_still_apply(cell):
    assert cell.extract().patch == b""
    (cell.workspace.path / "tests" / "test_ops.py").write_text("def test_nothing():\n    pass\n")
    (cell.workspace.path / "calc" / "__pycache__").mkdir()
    (cell.workspace.path / "calc" / "__pycache__" / "ops.cpython-311.pyc").write_bytes(b"\0")
    (cell.workspace.path / ".loops" / "supervisor").mkdir(parents=True)
    (cell.workspace.path / ".loops" / "supervisor" / "state.json").write_text("{}")
    assert cell.extract().patch == b""


def test_a_seeded_index_reads_only_changed_files_and_still_sees_every_change(cell):
    harness = HarnessGit.create(cell.harness_git, cell.workspace.path, cell.objects)
    harness.seed_index(cell.workspace.base_commit)
    cell.attack("skip-worktree")
    # Same size, same mtime as base: only the change time (which no unprivileged process sets) differs.
    ops = cell.workspace.path / "calc" / "ops.py"
    before = os.stat(cell.workspace.path / "calc" / "__init__.py")
    os.utime(ops, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert FIX_LINE in cell.extract().patch
    cell.outside_untouched()


def test_the_harness_environment_cannot_point_its_git_elsewhere(cell, monkeypatch, tmp_path):
    elsewhere = tmp_path / "elsewhere.git"
    git(tmp_path, "init", "-q", "--bare", str(elsewhere))
    monkeypatch.setenv("GIT_DIR", str(elsewhere))
    monkeypatch.setenv("GIT_WORK_TREE", str(cell.markers / "victim"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "index"))
    (cell.workspace.path / "calc" / "ops.py").write_text("# the agent's change\n")
    assert files_touched(cell.extract().patch) == ["calc/ops.py"]
    assert not (tmp_path / "index").exists()


def test_a_base_with_attributes_checks_out_and_extracts_as_its_bytes(calc, tmp_path):
    """Base's own .gitattributes (eol=crlf, ident) change nothing: the tree holds the repository's bytes."""
    base = commit(calc.repo, {".gitattributes": "*.txt text eol=crlf\n*.py ident\n",
                              "notes.txt": "one\ntwo\n", "calc/id.py": "# $Id$\n"}, "attributes")
    store = RepoStore(tmp_path / "cache")
    instance = build_instance(tmp_path / "i.jsonl", 1, calc.row(base_commit=base), None)
    objects = store.snapshot(*store.ensure_commit(instance.source, instance.repo, base))
    tree = tmp_path / "tree"
    harness = HarnessGit.create(tmp_path / "tree.git", tree, objects)
    harness.checkout_base(base)
    assert (tree / "notes.txt").read_bytes() == b"one\ntwo\n"
    assert (tree / "calc" / "id.py").read_bytes() == b"# $Id$\n"
    assert extract(tree, base, objects, tmp_path / "tree.git").patch == b""
    (tree / "notes.txt").write_bytes(b"one\r\ntwo\r\n")
    assert b"+one\r\n" in extract(tree, base, objects, tmp_path / "tree.git").patch


def test_a_file_the_harness_cannot_read_is_an_extraction_error_naming_it(cell):
    if os.getuid() == 0:
        pytest.skip("root reads every file")
    secret = cell.workspace.path / "calc" / "locked.py"
    secret.write_text("x = 1\n")
    secret.chmod(0)
    with pytest.raises(ExtractionError, match="locked.py"):
        cell.extract()


@pytest.mark.parametrize("swap", ["symlink", "delete"])
def test_a_workspace_swapped_for_a_link_or_deleted_is_an_extraction_error(cell, tmp_path, swap):
    """Inside the sandbox an agent can rename its workspace and leave a link to a private folder in its place."""
    private = tmp_path / "user-home" / ".ssh"
    private.mkdir(parents=True)
    (private / "id_rsa").write_text("-----BEGIN PRIVATE KEY-----\n")
    cell.workspace.path.rename(cell.workspace.path.with_name("moved"))
    if swap == "symlink":
        cell.workspace.path.symlink_to(private, target_is_directory=True)
    with pytest.raises(ExtractionError, match="is no longer a directory"):
        cell.extract()


def test_an_existing_harness_git_dir_is_not_made_again(cell):
    HarnessGit.create(cell.harness_git, cell.workspace.path, cell.objects)
    with pytest.raises(ExtractionError, match="exists already"):
        HarnessGit.create(cell.harness_git, cell.workspace.path, cell.objects)


def test_what_the_excludes_left_out_is_named_with_its_lines(cell):
    """A hostile agent edits the tests and leaves files in .loops/: none of it is in the patch, all of it is named
    (an ignored file, which no patch would take either, is not)."""
    ws = cell.workspace.path
    HarnessGit.create(cell.harness_git, ws, cell.objects).seed_index(cell.workspace.base_commit)
    (ws / "calc" / "ops.py").write_text("def add(a, b):\n    return a + b\n")
    tests = sorted(path.relative_to(ws).as_posix() for path in ws.rglob("test_*.py"))
    assert tests, "calc has test files"
    (ws / tests[0]).write_text("def test_nothing():\n    pass\n")
    (ws / "calc" / "test_mine.py").write_text("a\nb\nc\n")
    (ws / ".loops").mkdir()
    (ws / ".loops" / "blob.bin").write_bytes(b"\0\1binary")
    extraction = cell.extract()
    assert files_touched(extraction.patch) == ["calc/ops.py"]
    found = {entry.path: entry for entry in extraction.excluded}
    assert set(found) == {tests[0], "calc/test_mine.py", ".loops/blob.bin"}
    assert found["calc/test_mine.py"] == ExcludedFile("calc/test_mine.py", 3, 0)
    assert found[tests[0]].added == 2 and found[tests[0]].removed > 0
    assert found[".loops/blob.bin"].added is None
    details = excluded_details(extraction.excluded)
    assert details["count"] == 3 and details["added"] == 5 and [f["path"] for f in details["files"]] == sorted(found)
