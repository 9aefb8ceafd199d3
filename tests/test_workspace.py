"""Workspaces: shared mirrors, private checkouts, patch extraction with excludes."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from gitrepos import commit, git

from pytest_swe_arena.instances import Source, build_instance
from pytest_swe_arena.workspace import (
    WORK_BRANCH,
    RepoStore,
    WorkspaceError,
    apply_patch,
    extract_patch,
    materialize,
    reset_to_base,
)


def instance_of(project, **extra):
    return build_instance(Path("/x/i.jsonl"), 1, project.row(**extra), None)


def test_workspace_is_at_base_on_the_work_branch_and_borrows_objects(calc, tmp_path):
    # History after base exists in the source but must not be reachable by name in the workspace.
    later = commit(calc.repo, {"calc/ops.py": "def add(a, b):\n    return a + b\n"}, "later work")
    store = RepoStore(tmp_path / "cache")
    ws = materialize(instance_of(calc), store, tmp_path / "ws")
    assert ws.base_commit == calc.base
    assert git(ws.path, "rev-parse", "HEAD").strip() == calc.base
    assert git(ws.path, "symbolic-ref", "HEAD").strip() == f"refs/heads/{WORK_BRANCH}"
    assert git(ws.path, "status", "--porcelain") == ""
    assert git(ws.path, "for-each-ref", "--format=%(refname)").split() == [f"refs/heads/{WORK_BRANCH}"]
    assert later not in git(ws.path, "log", "--all", "--format=%H")
    # No objects were copied: the workspace's own object store is empty.
    objects = [p for p in (ws.path / ".git/objects").rglob("*") if p.is_file() and p.name != "alternates"]
    assert objects == []
    assert (ws.path / "calc/ops.py").read_text().endswith("return a + b\n")


def test_patch_includes_new_and_committed_files_and_excludes_tests(calc, tmp_path):
    ws = materialize(instance_of(calc), RepoStore(tmp_path / "cache"), tmp_path / "ws")
    (ws.path / "calc/ops.py").write_text("def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n")
    (ws.path / "calc/new.py").write_text("X = 1\n")
    for test_path in ["tests/test_ops.py", "pkg/tests/helper.py", "test/x.py", "calc/test_mine.py",
                      "calc/mine_test.py", "conftest.py", "calc/conftest.py", ".loops/supervisor/s/state.json",
                      "calc/__pycache__/ops.cpython-311.pyc"]:
        (ws.path / test_path).parent.mkdir(parents=True, exist_ok=True)
        (ws.path / test_path).write_text("# touched\n")
    git(ws.path, "add", "calc/new.py")
    git(ws.path, "commit", "-qm", "agent commit")  # committed work counts too
    patch = extract_patch(ws)
    touched = sorted(line.split(" b/")[1] for line in patch.splitlines() if line.startswith("diff --git"))
    assert touched == ["calc/new.py", "calc/ops.py"]


def test_reset_discards_everything_and_patches_apply(calc, tmp_path):
    ws = materialize(instance_of(calc), RepoStore(tmp_path / "cache"), tmp_path / "ws")
    (ws.path / "junk.txt").write_text("x")
    (ws.path / "calc/ops.py").write_text("broken")
    reset_to_base(ws)
    assert git(ws.path, "status", "--porcelain", "--ignored") == ""
    apply_patch(ws, calc.patch, "gold")
    assert "a * b" in (ws.path / "calc/ops.py").read_text()


def test_missing_commit_is_a_clear_error(calc, tmp_path):
    with pytest.raises(WorkspaceError, match="base_commit deadbeef not found in git "):
        materialize(instance_of(calc, base_commit="deadbeef"), RepoStore(tmp_path / "cache"), tmp_path / "ws")


def test_new_commit_in_source_is_fetched_into_the_existing_mirror(calc, tmp_path):
    store = RepoStore(tmp_path / "cache")
    materialize(instance_of(calc), store, tmp_path / "ws1")
    newer = commit(calc.repo, {"NEWS": "x\n"}, "news")
    ws = materialize(instance_of(calc, base_commit=newer), store, tmp_path / "ws2")
    assert (ws.path / "NEWS").exists()
    mirror = store.mirror_path(Source("git", str(calc.repo)), "demo/calc")
    assert len((mirror / "arena-fetches.log").read_text().splitlines()) == 2


def _materialize_in_process(args):
    project_row, cache, dest = args
    instance = build_instance(Path("/x/i.jsonl"), 1, project_row, None)
    ws = materialize(instance, RepoStore(Path(cache)), Path(dest))
    return git(ws.path, "rev-parse", "HEAD").strip()


def test_concurrent_processes_fetch_the_mirror_once(calc, tmp_path):
    jobs = [(calc.row(), str(tmp_path / "cache"), str(tmp_path / f"ws{n}")) for n in range(6)]
    with multiprocessing.get_context("spawn").Pool(6) as pool:
        heads = pool.map(_materialize_in_process, jobs)
    assert heads == [calc.base] * 6
    [mirror] = (tmp_path / "cache/mirrors").glob("*.git")
    assert len((mirror / "arena-fetches.log").read_text().splitlines()) == 1
