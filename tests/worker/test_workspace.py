"""Workspaces: shared mirrors, private checkouts, patch extraction with excludes."""

from __future__ import annotations

import multiprocessing
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
from helpers.arena import XDIST
from helpers.gitrepos import commit, commits_sharing_a_prefix, diff_of, git

from pytest_swe_arena.cell.git import WorkspaceError
from pytest_swe_arena.cell.patches import (
    apply_patch,
    commit_environment_setup,
    extract_patch,
    files_touched,
    is_excluded_from_patch,
    is_test_path,
)
from pytest_swe_arena.cell.workspace import WORK_BRANCH, RepoStore, materialize, reset_to_base
from pytest_swe_arena.instances.loading import Source, build_instance


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
    # No objects were copied: the workspace's own object store is empty (it borrows the base's snapshot).
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
    touched = sorted(line.split(b" b/")[1].decode() for line in patch.splitlines() if line.startswith(b"diff --git"))
    assert touched == ["calc/new.py", "calc/ops.py"]


#: Paths on both sides of every rule in PATCH_EXCLUDES: folder names inside and at the root, names that
#: only look alike, and ``*`` that must not cross a ``/``.
PATHS_NEAR_THE_RULES = [
    "tests/test_ops.py", "tests/data/input.txt", "pkg/tests/helper.py", "test/x.py", "a/b/test/x.txt",
    "calc/test_mine.py", "test_top.py", "calc/mine_test.py", "conftest.py", "calc/conftest.py",
    ".loops/supervisor/state.json", "calc/__pycache__/ops.cpython-311.pyc", "calc/ops.pyc", ".pytest_cache/v/x",
    "tests.py", "testsuite/a.py", "mytests/x.py", "calc/testing.py", "calc/test_mine.txt", "calc/atest_x.py",
    "calc/test_dir/x.py", "calc/contest.py", "calc/my_test.py.bak", "pkg/.loops/x", "calc/new.py",
]


def test_the_path_rules_agree_with_what_extract_patch_leaves_out(calc, tmp_path):
    ws = materialize(instance_of(calc), RepoStore(tmp_path / "cache"), tmp_path / "ws")
    for path in PATHS_NEAR_THE_RULES:
        (ws.path / path).parent.mkdir(parents=True, exist_ok=True)
        (ws.path / path).write_text("# touched\n")
    kept = set(files_touched(extract_patch(ws)))
    assert {path for path in PATHS_NEAR_THE_RULES if not is_excluded_from_patch(path)} == kept
    assert "calc/test_dir/x.py" in kept and "pkg/.loops/x" in kept and "tests.py" in kept
    tests = {path for path in PATHS_NEAR_THE_RULES if is_test_path(path)}
    assert tests == {path for path in PATHS_NEAR_THE_RULES if path not in kept} - {
        ".loops/supervisor/state.json", "calc/__pycache__/ops.cpython-311.pyc", "calc/ops.pyc", ".pytest_cache/v/x"}


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
    # One snapshot, complete, and no half-built staging folder beside it.
    [snapshot_dir] = (tmp_path / "cache/snapshots").iterdir()
    assert sorted(path.name for path in snapshot_dir.iterdir()) == [
        f"{calc.base}.git", f"{calc.base}.git.lease", f"{calc.base}.git.lock"]


def test_history_after_base_is_not_readable_from_the_workspace_by_sha(calc, tmp_path):
    fix = commit(calc.repo, {"calc/ops.py": "def mul(a, b):\n    return a * b  # the fix\n"}, "the fix")
    fix_blob = git(calc.repo, "rev-parse", f"{fix}:calc/ops.py").strip()
    store = RepoStore(tmp_path / "cache")
    ws = materialize(instance_of(calc), store, tmp_path / "ws")
    # A later instance of the same repository, based on the fix, shares the mirror but not the snapshot.
    later = materialize(instance_of(calc, instance_id="demo__calc-2", base_commit=fix), store, tmp_path / "later")
    assert git(later.path, "cat-file", "-t", fix).strip() == "commit"

    listed = git(ws.path, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    assert calc.base in listed
    for sha in (fix, fix_blob):
        assert sha not in listed
        assert subprocess.run(["git", "cat-file", "-e", sha], cwd=ws.path, check=False).returncode != 0
    # The base and its history are all there.
    assert git(ws.path, "log", "--format=%s").splitlines() == ["ops: simplify mul", "docs: readme", "calc: add and mul"]
    assert git(ws.path, "fsck", "--connectivity-only", "--no-dangling") == ""
    # The workspace names no store that holds the fix.
    alternates = (ws.path / ".git/objects/info/alternates").read_text()
    assert "mirrors" not in alternates
    assert git(Path(alternates.strip()).parent, "cat-file", "--batch-all-objects", "--batch-check").count("\n") \
        == len(listed)


def test_every_arm_and_trial_of_a_base_shares_one_snapshot(calc, tmp_path):
    store = RepoStore(tmp_path / "cache")
    first = materialize(instance_of(calc), store, tmp_path / "ws1")
    # A new session (another worker) finds the snapshot on disk.
    second = materialize(instance_of(calc), RepoStore(tmp_path / "cache"), tmp_path / "ws2")
    alternates = {(ws.path / ".git/objects/info/alternates").read_text() for ws in (first, second)}
    assert len(alternates) == 1
    [snapshot] = (tmp_path / "cache/snapshots").glob("*/*.git")
    assert snapshot.name == f"{calc.base}.git"
    assert (Path(alternates.pop().strip()) / "pack").is_dir()
    assert git(snapshot, "config", "gc.auto").strip() == "0"
    mirror = store.mirror_path(Source("git", str(calc.repo)), "demo/calc")
    assert git(mirror, "config", "gc.auto").strip() == "0"
    assert git(mirror, "config", "maintenance.auto").strip() == "false"


def test_the_users_git_config_does_not_shape_patches_or_commits(calc, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    hook = home / "hooks" / "post-commit"
    hook.write_text(f"#!/bin/sh\ntouch {home / 'hook-ran'}\n")
    hook.chmod(0o755)
    (home / "ignore").write_text("calc/new.py\nsetup.txt\n")
    (home / ".gitconfig").write_text(
        "[diff]\n\tnoprefix = true\n\tmnemonicPrefix = true\n"
        f"[core]\n\texcludesFile = {home / 'ignore'}\n\thooksPath = {home / 'hooks'}\n"
        "[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = false\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    ws = materialize(instance_of(calc), RepoStore(tmp_path / "cache"), tmp_path / "ws")
    (ws.path / "setup.txt").write_text("built by the environment\n")
    ws = commit_environment_setup(ws)  # signs (and fails) or runs the hook if the user's config leaks
    assert git(ws.path, "show", "--format=%s", "--stat", "HEAD").startswith("arena: environment setup")
    assert not (home / "hook-ran").exists()
    (ws.path / "calc/new.py").write_text("X = 1\n")
    (ws.path / "calc/ops.py").write_text("fixed\n")
    patch = extract_patch(ws)
    assert files_touched(patch) == ["calc/new.py", "calc/ops.py"]
    assert b"diff --git a/calc/new.py b/calc/new.py\n" in patch
    assert b"--- a/calc/ops.py\n+++ b/calc/ops.py\n" in patch
    reset_to_base(ws)
    apply_patch(ws, patch, "the extracted patch")
    assert (ws.path / "calc/ops.py").read_text() == "fixed\n"


def test_a_stale_index_lock_left_by_a_killed_arm_does_not_stop_patch_extraction(calc, tmp_path):
    ws = materialize(instance_of(calc), RepoStore(tmp_path / "cache"), tmp_path / "ws")
    (ws.path / "calc/ops.py").write_text("fixed\n")
    (ws.path / ".git/index.lock").write_text("")
    patch = extract_patch(ws)
    assert files_touched(patch) == ["calc/ops.py"]
    assert not (ws.path / ".git/index.lock").exists()


def test_a_missing_commit_is_fetched_for_once_per_session(calc, tmp_path):
    store = RepoStore(tmp_path / "cache")
    for attempt in range(3):
        with pytest.raises(WorkspaceError, match="base_commit deadbeef not found in git "):
            materialize(instance_of(calc, base_commit="deadbeef"), store, tmp_path / f"ws{attempt}")
    mirror = store.mirror_path(Source("git", str(calc.repo)), "demo/calc")
    assert len((mirror / "arena-fetches.log").read_text().splitlines()) == 1


def test_an_ambiguous_short_sha_says_so(calc, tmp_path):
    # Four digits, so that a few thousand commits are enough for two to share a prefix; the instance
    # schema asks for seven or more, so the store is called directly.
    prefix, one, other = commits_sharing_a_prefix(calc.repo)
    store = RepoStore(tmp_path / "cache")
    source = Source("git", str(calc.repo))
    for _ in range(2):
        with pytest.raises(WorkspaceError, match=f"base_commit {prefix} is ambiguous in git .*give more hex digits") \
                as error:
            store.ensure_commit(source, "demo/calc", prefix)
        assert one[:7] in str(error.value) and other[:7] in str(error.value)
    mirror = store.mirror_path(Source("git", str(calc.repo)), "demo/calc")
    assert len((mirror / "arena-fetches.log").read_text().splitlines()) == 1
    ws = materialize(instance_of(calc, base_commit=one[:12]), store, tmp_path / "ws")
    assert ws.base_commit == one


def test_files_touched_reads_the_paths_git_quotes_or_spaces(calc, tmp_path):
    git(calc.repo, "mv", "calc/ops.py", "calc/old ops.py")
    commit(calc.repo, {"docs/é.md": "accent\n"}, "odd names")
    patch = diff_of(calc.repo, {
        "docs/é.md": "accent, changed\n",         # quoted: "a/docs/\303\251.md"
        "dir with space/new file.py": "X = 1\n",  # --- /dev/null, +++ b/... with a trailing tab
        "empty new": "",                          # no ---/+++ lines: only the header
        "calc/old ops.py": None,
        "calc/new ops.py": (calc.repo / "calc/old ops.py").read_text(),  # a pure rename
    })
    assert '"a/docs/\\303\\251.md"' in patch and "rename from calc/old ops.py" in patch
    assert files_touched(patch) == [
        "calc/old ops.py", "calc/new ops.py", "dir with space/new file.py", "docs/é.md", "empty new",
    ]
    (calc.repo / "bin file.dat").write_bytes(b"\x00\x01binary")
    git(calc.repo, "add", "bin file.dat")
    git(calc.repo, "commit", "-qm", "binary")
    binary = git(calc.repo, "diff", "--binary", "HEAD~1", "HEAD")
    assert "GIT binary patch" in binary and "+++" not in binary
    assert files_touched(binary) == ["bin file.dat"]


def truncate_packs(snapshots: Path) -> list[Path]:
    """Cut every pack under ``snapshots`` to half its size (what a hostile agent outside a sandbox did)."""
    packs = sorted(snapshots.glob("*/*.git/objects/pack/*.pack"))
    for pack in packs:
        pack.chmod(0o644)
        with open(pack, "r+b") as handle:
            handle.truncate(pack.stat().st_size // 2)
    return packs


def test_a_snapshot_that_fails_a_checkout_is_rebuilt_once_with_a_warning(calc, tmp_path):
    store = RepoStore(tmp_path / "cache")
    instance = instance_of(calc)
    materialize(instance, store, tmp_path / "ws1")
    [pack] = truncate_packs(store.root / "snapshots")
    snapshot = pack.parents[2]
    fresh = RepoStore(store.root)  # a later session: the snapshot exists, so it is trusted until a checkout fails
    with pytest.warns(UserWarning, match=f"snapshot {snapshot} failed a checkout .*; rebuilding it from "):
        workspace = materialize(instance, fresh, tmp_path / "ws2")
    assert workspace.snapshot_rebuilt and str(snapshot) in workspace.snapshot_rebuilt
    assert (workspace.path / "calc" / "ops.py").is_file()
    git(snapshot, "fsck", "--no-dangling")  # whole again
    truncate_packs(store.root / "snapshots")
    with pytest.raises(WorkspaceError, match="failed a checkout again after it was rebuilt"):
        materialize(instance, fresh, tmp_path / "ws3")  # rebuilt once per session, not in a loop


@pytest.mark.parametrize("xdist", XDIST)
def test_a_sweep_after_its_cached_snapshot_was_truncated_rebuilds_it_and_resolves(suite, calc, xdist):
    suite.instances([calc.row()])
    first = suite.run("--arena-arms=GOLD")
    assert suite.ledger()[0]["status"] == "resolved", first.stdout.str()[-3000:]
    [pack] = truncate_packs(suite.cache / "snapshots")
    snapshot = pack.parents[2]

    again = suite.run("--arena-arms=GOLD", "--arena-out=again", *xdist)
    [row] = suite.ledger("again")
    assert row["status"] == "resolved", (row["error"], again.stdout.str()[-3000:])
    assert f"snapshot {snapshot} failed a checkout" in again.stdout.str()
    assert row["details"]["snapshot_rebuilt"].startswith(f"snapshot {snapshot} failed a checkout and was rebuilt")
    git(snapshot, "fsck", "--no-dangling")  # whole again


def test_a_snapshot_removed_from_the_cache_during_a_session_is_rebuilt(calc, tmp_path):
    """Evicted (``cache.prune``) between two cells of a session: built again, as a missing one is, not taken
    for a broken one."""
    store = RepoStore(tmp_path / "cache")
    materialize(instance_of(calc), store, tmp_path / "ws1")
    [snapshot] = (store.root / "snapshots").glob("*/*.git")
    shutil.rmtree(snapshot)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        workspace = materialize(instance_of(calc), store, tmp_path / "ws2")
    assert (workspace.path / "calc" / "ops.py").is_file() and snapshot.is_dir()
