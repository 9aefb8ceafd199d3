"""Workspaces from real users' stores: the tags SWE-bench keeps, and mirrors that are shallow or partial."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.gitrepos import commit, git

from pytest_swe_arena.cell.git import WorkspaceError
from pytest_swe_arena.cell.patches import extract_patch
from pytest_swe_arena.cell.workspace import RepoStore, materialize
from pytest_swe_arena.instances.loading import build_instance


def instance_at(source: Path, base: str):
    row = {"instance_id": "demo__calc-1", "repo": "demo/calc", "base_commit": base, "problem_statement": "p",
           "verify": "true", "source": {"git": str(source)}}
    return build_instance(Path("/x/i.jsonl"), 1, row, None)


def tagged_history(calc):
    """Tags before base (annotated and lightweight), at base, and after it (on the fix)."""
    repo = calc.repo
    first = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    git(repo, "tag", "-a", "v0.1", "-m", "first release", first)
    git(repo, "tag", "v0.2", calc.base)
    fix = commit(repo, {"calc/ops.py": "def mul(a, b):\n    return a * b\n"}, "the fix")
    git(repo, "tag", "-a", "v1.0", "-m", "the fixed release", fix)
    git(repo, "tag", "v1.0-light", fix)
    return fix


def test_workspaces_keep_the_tags_of_base_and_its_ancestors_only(calc, tmp_path):
    fix = tagged_history(calc)
    ws = materialize(instance_at(calc.repo, calc.base), RepoStore(tmp_path / "cache"), tmp_path / "ws")
    assert git(ws.path, "tag", "--list").split() == ["v0.1", "v0.2"]
    # What versioneer and setuptools_scm ask.
    assert git(ws.path, "describe", "--tags").strip() == "v0.2"
    assert git(ws.path, "describe", "--tags", "--abbrev=0", "HEAD~1").strip() == "v0.1"
    assert git(ws.path, "cat-file", "-t", "v0.1").strip() == "tag"
    # The tags of the fix name nothing the workspace can read.
    assert subprocess.run(["git", "cat-file", "-e", fix], cwd=ws.path, check=False).returncode != 0
    assert git(ws.path, "fsck", "--no-dangling") == ""


def test_a_shallow_mirror_gives_a_workspace_at_base(calc, tmp_path):
    git(calc.repo, "branch", "release", calc.base)
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "release", f"file://{calc.repo}", str(shallow))
    assert git(shallow, "rev-parse", "--is-shallow-repository").strip() == "true"
    ws = materialize(instance_at(shallow, calc.base), RepoStore(tmp_path / "cache"), tmp_path / "ws")
    at_base = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n"
    assert (ws.path / "calc/ops.py").read_text() == at_base
    assert git(ws.path, "status", "--porcelain") == ""
    (ws.path / "calc/ops.py").write_text("def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n")
    assert b"+    return a * b" in extract_patch(ws)


def test_a_blob_filtered_partial_mirror_gives_a_workspace_at_base(calc, tmp_path):
    # The later commit's blob is in no store the partial clone has: the mirror's history is incomplete.
    fix = commit(calc.repo, {"calc/ops.py": "def mul(a, b):\n    return a * b  # later\n"}, "later")
    git(calc.repo, "config", "uploadpack.allowFilter", "true")
    partial = tmp_path / "partial"
    git(tmp_path, "clone", "-q", "--filter=blob:none", "--no-checkout", f"file://{calc.repo}", str(partial))
    git(partial, "checkout", "-q", calc.base)  # fetches base's blobs, and only those
    later_blob = git(calc.repo, "rev-parse", f"{fix}:calc/ops.py").strip()
    assert subprocess.run(["git", "cat-file", "-e", later_blob], cwd=partial, check=False,
                          env={"GIT_NO_LAZY_FETCH": "1", "PATH": "/usr/bin:/bin"}).returncode != 0
    ws = materialize(instance_at(partial, calc.base), RepoStore(tmp_path / "cache"), tmp_path / "ws")
    assert git(ws.path, "status", "--porcelain") == ""
    assert (ws.path / "tests/test_ops.py").is_file()
    (ws.path / "calc/new.py").write_text("x = 1\n")
    assert b"+x = 1" in extract_patch(ws)


def test_a_mirror_missing_part_of_bases_own_tree_is_a_clear_error(calc, tmp_path):
    git(calc.repo, "config", "uploadpack.allowFilter", "true")
    partial = tmp_path / "partial"
    git(tmp_path, "clone", "-q", "--filter=blob:none", "--no-checkout", f"file://{calc.repo}", str(partial))
    # Nothing checked out: base's blobs are missing too. The promisor is gone, so nothing can be fetched.
    calc.repo.rename(tmp_path / "gone")
    try:
        materialize(instance_at(partial, calc.base), RepoStore(tmp_path / "cache"), tmp_path / "ws")
    except WorkspaceError as error:
        assert f"the tree of base_commit {calc.base} is not complete in the mirror" in str(error)
    else:
        raise AssertionError("a workspace was made from a mirror without base's files")
