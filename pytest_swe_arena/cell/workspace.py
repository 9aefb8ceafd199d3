"""Workspaces: materialize a repository at ``base_commit``, extract the patch.

Each repository is fetched once into a bare mirror in the shared cache (under
a file lock, so concurrent xdist workers fetch it once between them). The
mirror holds the whole history, including the fix and everything after it, so
no workspace ever reads from it. Instead each base commit gets a *snapshot*
once per cache: a bare repository whose single pack holds exactly the objects
reachable from ``base_commit`` (built with ``git pack-objects --revs`` under a
file lock, into a temporary directory renamed into place). Every arm and trial
of that base borrows the snapshot's objects through ``objects/info/alternates``:
nothing is copied per cell, only the tree is checked out, and the workspace's
refs, index and new objects stay private. A commit after base is not in any
object store the workspace can see, by name or by sha. A snapshot is verified
when built (base and its whole tree readable; its history is not walked), and
one that fails a checkout is rebuilt once, with a warning naming it, never
reused broken.

Every git call goes through ``git.git()`` (the harness's git, whatever the
user's config); extracting and applying patches is ``patches``' job.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..cache import process_leases, prune
from ..instances.model import Instance, Source
from .git import NEUTRAL_ATTRIBUTES, WorkspaceError, git, init_git_dir, run_git

WORK_BRANCH = "arena-work"

#: Set on every mirror and snapshot: nothing may repack or prune a store that
#: other processes are reading from.
_NO_GC = ("gc.auto=0", "maintenance.auto=false")
#: The same, as config file text.
_NO_GC_CONFIG = "[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n"


@dataclass(frozen=True)
class Workspace:
    """A cell's private checkout of the instance's repository at ``base_commit``."""

    path: Path
    base_commit: str  # full sha
    #: False for an image's /testbed, whose ignored files are the image's build (compiled extensions...).
    clean_ignored: bool = True
    #: The base snapshot's object store the workspace borrows (None for an image's /testbed): the
    #: harness's record, not the workspace's ``.git``, which the arm can rewrite.
    objects: Path | None = None
    #: The shared mirror the snapshot was cut from (None for an image): the harness reads later commits
    #: there (a SWE-bench row's environment_setup_commit), never the workspace.
    mirror: Path | None = None
    #: Why the base snapshot was rebuilt before this checkout (it failed one), or None.
    snapshot_rebuilt: str | None = None


class RepoStore:
    """One bare mirror per repository source in ``root``, and one snapshot per base commit.

    Both are shared by every cell and worker; only snapshots are ever borrowed by a workspace.
    """

    def __init__(self, root: Path, max_bytes: int | None = None):
        self.root = root
        #: The cache's budget (--arena-cache-max): pruned to it after a mirror or snapshot is made. None: never.
        self.max_bytes = max_bytes
        #: (mirror, commit as given) -> full sha: resolved once per session, not once per cell.
        self._resolved: dict[tuple[Path, str], str] = {}
        #: (mirror, commit as given) -> why it cannot be used: fetched for once per session, not once per cell.
        self._unusable: dict[tuple[Path, str], str] = {}
        #: Snapshots rebuilt in this session: rebuilt once, never again (a second failure is an error).
        self._rebuilt: set[Path] = set()

    def mirror_path(self, source: Source, repo: str) -> Path:
        digest = hashlib.sha256(f"{source.kind}:{source.location}".encode()).hexdigest()[:12]
        slug = re.sub(r"[^A-Za-z0-9._-]", "_", repo.replace("/", "__"))
        return self.root / "mirrors" / f"{slug}-{digest}.git"

    def snapshot_path(self, mirror: Path, full: str, tree_only: bool = False) -> Path:
        return self.root / "snapshots" / mirror.name.removesuffix(".git") / f"{full}{'.tree' if tree_only else ''}.git"

    def ensure_commit(self, source: Source, repo: str, commit: str) -> tuple[Path, str]:
        """Return the mirror holding ``commit`` and the commit's full sha; fetch if needed."""
        from filelock import FileLock

        mirror = self.mirror_path(source, repo)
        key = (mirror, commit)
        if key in self._unusable:
            raise WorkspaceError(self._unusable[key])
        process_leases().hold(mirror)  # held until the cell ends: no eviction removes it under the cell
        exists = mirror.exists()
        full = self._resolved.get(key) if exists else None  # evicted since it was resolved: fetched again
        if full is None and exists:
            full = self._resolve(mirror, commit, source)
        if full:
            self._resolved[key] = full
            return mirror, full
        mirror.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(mirror) + ".lock"):
            # Another worker may have fetched while we waited for the lock.
            full = self._resolve(mirror, commit, source) if mirror.exists() else None
            if full:
                self._resolved[key] = full
                return mirror, full
            if mirror.exists():
                no_gc = [arg for setting in _NO_GC for arg in ("-c", setting)]
                git(*no_gc, "fetch", "--quiet", "--force", source.location, "+refs/*:refs/*", cwd=mirror)
            else:
                staging = Path(tempfile.mkdtemp(prefix=mirror.name + ".", dir=mirror.parent))
                try:
                    no_gc = [arg for setting in _NO_GC for arg in ("--config", setting)]
                    git("clone", "--quiet", "--mirror", *no_gc, source.location, str(staging / "m.git"),
                        cwd=mirror.parent)
                    os.rename(staging / "m.git", mirror)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
            with open(mirror / "arena-fetches.log", "a") as log:
                log.write(f"{time.time():.3f} pid={os.getpid()} {source.describe()}\n")
            full = self._resolve(mirror, commit, source)
            if not full:
                self._unusable[key] = f"base_commit {commit} not found in {source.describe()}"
                raise WorkspaceError(self._unusable[key])
            self._resolved[key] = full
        self._prune()
        return mirror, full

    def _prune(self) -> None:
        if self.max_bytes is not None:
            prune(self.root, self.max_bytes)

    def _resolve(self, mirror: Path, commit: str, source: Source) -> str | None:
        try:
            return _resolve_commit(mirror, commit)
        except AmbiguousCommitError as error:
            # More history can only add candidates: fetching again would not help.
            self._unusable[mirror, commit] = f"base_commit {commit} is ambiguous in {source.describe()}: {error}"
            raise WorkspaceError(self._unusable[mirror, commit]) from None

    def snapshot(self, mirror: Path, full: str, tree_only: bool = False) -> Path:
        """The object store (``objects`` folder) of the snapshot of ``full``: only objects reachable from it
        (``tree_only``: base's commit and tree alone, no history, for a base whose history holds the fix).

        Built once per cache for every arm and trial of that base, under a file lock,
        into a temporary folder renamed into place (so a snapshot that exists is complete).
        """
        from filelock import FileLock

        snapshot = self.snapshot_path(mirror, full, tree_only)
        process_leases().hold(snapshot)  # held until the cell ends: no eviction removes it under the cell
        if snapshot.exists():
            return snapshot / "objects"
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        # One lock per snapshot: snapshots of different bases only read the mirror, so they build in parallel.
        with FileLock(str(snapshot) + ".lock"):
            if not snapshot.exists():
                _build_snapshot(mirror, full, snapshot, tree_only)
        self._prune()
        return snapshot / "objects"

    def rebuild_snapshot(self, mirror: Path, full: str, seen: int, why: str, tree_only: bool = False) -> Path:
        """Replace the snapshot of ``full`` that failed a checkout with a new one; its ``objects`` folder.

        ``seen`` is the inode of the snapshot that failed: if another worker has replaced it since, its
        new one is used. Once per session and snapshot: a second failure raises ``WorkspaceError``.
        """
        from filelock import FileLock

        snapshot = self.snapshot_path(mirror, full, tree_only)
        if snapshot in self._rebuilt:
            raise WorkspaceError(f"snapshot {snapshot} failed a checkout again after it was rebuilt: {why}")
        self._rebuilt.add(snapshot)
        with FileLock(str(snapshot) + ".lock"):
            if not snapshot.exists() or snapshot.stat().st_ino == seen:
                warnings.warn(f"snapshot {snapshot} failed a checkout ({' '.join(why.split())[:300]}); "
                              f"rebuilding it from {mirror}", stacklevel=2)
                broken = Path(tempfile.mkdtemp(prefix=snapshot.name + ".broken.", dir=snapshot.parent))
                if snapshot.exists():
                    os.rename(snapshot, broken / "s.git")
                shutil.rmtree(broken, ignore_errors=True)
                _build_snapshot(mirror, full, snapshot, tree_only)
        return snapshot / "objects"


def _build_snapshot(mirror: Path, full: str, snapshot: Path, tree_only: bool = False) -> None:
    """Pack the objects reachable from ``full`` (and the tags at or before it) into a new bare repository,
    verify it, and rename it to ``snapshot`` (so a snapshot that exists is complete). Under the snapshot's lock.
    ``tree_only``: base's commit and tree alone, as a shallow snapshot with no tags."""
    staging = Path(tempfile.mkdtemp(prefix=snapshot.name + ".", dir=snapshot.parent))
    try:
        repo = staging / "s.git"
        _init_snapshot(repo)
        tags = [] if tree_only else _tags_at_or_before(mirror, full)
        wanted = "".join(f"{line.split()[0]}\n" for line in tags if not line.startswith("^"))
        packed = None if tree_only else run_git(
            "pack-objects", "--revs", "--quiet", "--delta-base-offset", str(repo / "objects/pack/pack"), cwd=mirror,
            input=f"{full}\n{wanted}".encode())
        if packed is None:
            _pack_base_tree_only(mirror, full, repo, "its history holds the fix (a SWE-smith row): not packed")
        elif packed.returncode != 0:
            # A partial or shallow mirror lacks some history: base's own tree is all a workspace needs.
            _pack_base_tree_only(mirror, full, repo, packed.stderr.decode(errors="replace"))
            tags = []
        (repo / ARENA_TAGS).write_text("".join(line + "\n" for line in tags))
        # A detached HEAD keeps every object reachable inside the snapshot itself.
        (repo / "HEAD").write_text(full + "\n")
        # Verified as a workspace needs it: base and every tree and blob of base's tree readable. Its
        # history is not walked: a shallow or partial mirror's snapshot lacks some, and needs none.
        checked = run_git("rev-list", "--objects", "--no-walk", "--quiet", full, cwd=repo)
        if checked.returncode != 0:
            said = " ".join((checked.stderr or checked.stdout).decode(errors="replace").split())
            raise WorkspaceError(f"the snapshot of {full} cut from {mirror} does not verify: {said[:500]}")
        os.rename(repo, snapshot)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


#: In a snapshot: the tags a workspace gets, as ``packed-refs`` lines (an annotated tag's ``^peeled`` line too).
ARENA_TAGS = "arena-tags"


def _tags_at_or_before(mirror: Path, full: str) -> list[str]:
    """The mirror's tags that point at ``full`` or an ancestor of it, as ``packed-refs`` lines.

    SWE-bench's images keep the repository's tags, and versioneer / setuptools_scm read the version from
    them; a tag that reaches any later commit is never kept (it would reveal that commit). None where the
    history cannot be walked (a shallow or partial mirror).
    """
    listed = run_git("for-each-ref", f"--merged={full}", "--format=%(objectname) %(refname) %(*objectname)",
                     "refs/tags", cwd=mirror)
    if listed.returncode != 0:
        return []
    lines: list[str] = []
    for entry in listed.stdout.decode(errors="replace").splitlines():
        name, ref, *peeled = entry.split()
        lines.append(f"{name} {ref}")
        if peeled:
            lines.append(f"^{peeled[0]}")
    return lines


def _pack_base_tree_only(mirror: Path, full: str, repo: Path, why: str) -> None:
    """Pack ``full``'s commit and tree alone, as a shallow snapshot; ``WorkspaceError`` if even that is incomplete."""
    # Never fetch what is missing from a partial clone's promisor: a workspace reads only what is here.
    listed = subprocess.run(["git", "rev-list", "--objects", "--no-walk", full], cwd=mirror, capture_output=True,
                            env={**os.environ, "GIT_NO_LAZY_FETCH": "1", "GIT_CONFIG_NOSYSTEM": "1",
                                 "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"}, check=False)
    packed = None
    if listed.returncode == 0:
        packed = run_git("pack-objects", "--quiet", str(repo / "objects/pack/pack"), cwd=mirror, input=listed.stdout)
    if packed is None or packed.returncode != 0:
        said = " ".join(((packed.stderr if packed is not None else listed.stderr).decode(errors="replace")).split())
        raise WorkspaceError(f"{mirror}: the tree of base_commit {full} is not complete in the mirror ({said[:300]}); "
                             f"its history could not be packed either ({' '.join(why.split())[:300]})")
    (repo / "shallow").write_text(full + "\n")


def _init_snapshot(repo: Path) -> None:
    git("init", "--quiet", "--bare", "--template=", str(repo), cwd=repo.parent)
    (repo / "objects" / "pack").mkdir(parents=True, exist_ok=True)
    with open(repo / "config", "a", encoding="utf-8") as config:
        config.write(_NO_GC_CONFIG)


class AmbiguousCommitError(Exception):
    """A short sha names more than one commit; the message lists the candidates."""


def _resolve_commit(repo: Path, commit: str) -> str | None:
    """The full sha of ``commit`` in ``repo``; None if it is not there; ``AmbiguousCommitError`` if not unique."""
    completed = run_git("rev-parse", "--verify", "--end-of-options", f"{commit}^{{commit}}", cwd=repo)
    if completed.returncode == 0:
        return completed.stdout.decode().strip() or None
    stderr = completed.stderr.decode(errors="replace")
    if "is ambiguous" in stderr:
        candidates = [line.split(":", 1)[1].strip() for line in stderr.splitlines()
                      if line.startswith("hint:  ") and line.split(":", 1)[1].strip()]
        raise AmbiguousCommitError(
            f"it names {len(candidates) or 'several'} commits ({'; '.join(candidates)}); give more hex digits")
    return None


#: The harness's settings in a workspace's .git/config (an image's /testbed gets them appended).
_WORKSPACE_CONFIG = _NO_GC_CONFIG + """[user]
\tname = swe-arena
\temail = swe-arena@localhost
"""
#: A fresh workspace's whole .git/config: what ``git init`` writes on Linux, and the harness's settings. Written
#: directly, with the rest of the git dir, not by ``git init`` and ``git config`` processes: process start-up is
#: most of a cell's git cost.
_FRESH_WORKSPACE_CONFIG = """[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\tlogallrefupdates = true
\tautocrlf = false
""" + _WORKSPACE_CONFIG


def materialize(instance: Instance, store: RepoStore, dest: Path, engine: str = "docker") -> Workspace:
    """Check out ``instance`` at its base commit into ``dest`` on the work branch, clean."""
    if instance.source.kind == "image":
        return materialize_image(instance, engine, dest)
    mirror, full = store.ensure_commit(instance.source, instance.repo, instance.base_commit)
    tree_only = instance.history_holds_the_fix
    objects = store.snapshot(mirror, full, tree_only)
    try:
        seen = objects.parent.stat().st_ino
    except OSError:
        seen = -1  # removed from the cache since this session first saw it: rebuilt below
    try:
        _check_out(dest, objects, full)
        return Workspace(path=dest, base_commit=full, objects=objects, mirror=mirror)
    except WorkspaceError as error:
        why = str(error)
    # A snapshot that fails a checkout (a truncated pack, say) is rebuilt once, not reused forever.
    shutil.rmtree(dest, ignore_errors=True)
    objects = store.rebuild_snapshot(mirror, full, seen, why, tree_only)
    _check_out(dest, objects, full)
    return Workspace(path=dest, base_commit=full, objects=objects, mirror=mirror,
                     snapshot_rebuilt=f"snapshot {objects.parent} failed a checkout and was rebuilt: {why[:500]}")


def _check_out(dest: Path, objects: Path, full: str) -> None:
    """A new repository in ``dest`` borrowing ``objects``, on the work branch at ``full``, checked out."""
    dest.mkdir(parents=True, exist_ok=True)
    git_dir = dest / ".git"
    init_git_dir(git_dir, objects, _FRESH_WORKSPACE_CONFIG, head=WORK_BRANCH)
    # Laid as the grading tree and the harness's extraction read it: each file is its blob's bytes. A
    # `.gitattributes` (`text eol=crlf`, `ident`, `working-tree-encoding`, a filter) would otherwise rewrite
    # files on checkout, and every later read of them (a racily clean entry, a file an agent or a tool
    # rewrote unchanged, a template's copy) would put the rewrite into the patch.
    (git_dir / "info").mkdir()
    (git_dir / "info" / "attributes").write_text(NEUTRAL_ATTRIBUTES)
    copy_snapshot_refs(objects.parent, git_dir)
    # On the unborn work branch, this creates the branch at ``full`` and checks it out.
    git("reset", "--quiet", "--hard", full, cwd=dest)


def copy_snapshot_refs(snapshot: Path, git_dir: Path) -> None:
    """Give the workspace the snapshot's tags, and its ``shallow`` file when only base's tree is there."""
    tags = snapshot / ARENA_TAGS
    if tags.is_file() and tags.stat().st_size:
        (git_dir / "packed-refs").write_text("# pack-refs with: peeled fully-peeled \n" + tags.read_text())
    if (snapshot / "shallow").is_file():
        shutil.copyfile(snapshot / "shallow", git_dir / "shallow")


def reset_to_base(workspace: Workspace) -> None:
    """Discard every change: tracked, untracked and ignored files."""
    git("reset", "--quiet", "--hard", workspace.base_commit, cwd=workspace.path)
    git("clean", "-qfdx" if workspace.clean_ignored else "-qfd", cwd=workspace.path)


@functools.cache
def engine_problem(engine: str) -> str | None:
    """None when ``engine`` answers; otherwise one line saying why it does not (asked once per process)."""
    if shutil.which(engine) is None:
        return f"container engine {engine!r} is not installed"
    try:
        completed = subprocess.run([engine, "info", "--format", "{{json .}}"], capture_output=True, text=True,
                                   timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return f"container engine {engine!r} does not answer (`{engine} info` timed out)"
    if completed.returncode != 0:
        why = " ".join((completed.stderr or completed.stdout).split())[:300]
        return f"container engine {engine!r} does not answer ({why})"
    return None


def materialize_image(instance: Instance, engine: str, dest: Path) -> Workspace:
    """Copy the image's ``/testbed`` out, then reset it to base on the work branch, clean."""
    image = instance.source.location
    problem = engine_problem(engine)
    if problem:
        raise WorkspaceError(f"image {image} needs a container engine: {problem}")
    name = f"arena-{instance.instance_id}-{os.getpid()}-{time.monotonic_ns()}"
    # The container is never started (only copied from), so its command never runs; an image
    # without CMD still needs one for `create`.
    created = subprocess.run([engine, "create", "--name", name, image, "true"], capture_output=True, text=True,
                             check=False)
    if created.returncode != 0:
        raise WorkspaceError(f"{engine} create {image} failed: {' '.join(created.stderr.split())[:500]}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        copied = subprocess.run([engine, "cp", f"{name}:/testbed", str(dest)], capture_output=True,
                                text=True, check=False)
        if copied.returncode != 0:
            raise WorkspaceError(f"{engine} cp {image}:/testbed failed: {' '.join(copied.stderr.split())[:500]}")
    finally:
        subprocess.run([engine, "rm", "--force", name], capture_output=True, check=False)
    try:
        full = _resolve_commit(dest, instance.base_commit)
    except AmbiguousCommitError as error:
        raise WorkspaceError(f"base_commit {instance.base_commit} is ambiguous in {image}:/testbed: {error}") from None
    if not full:
        raise WorkspaceError(f"base_commit {instance.base_commit} not found in {image}:/testbed")
    with open(dest / ".git" / "config", "a", encoding="utf-8") as config:
        config.write(_WORKSPACE_CONFIG)
    # Laid as every other workspace is (``_check_out``): each file its blob's bytes. The image's checkout
    # applied the repository's attributes (`text eol=crlf`...), and its index says those files are clean: the
    # index goes, and the reset writes every tracked file again from its blob under neutral attributes.
    (dest / ".git" / "info").mkdir(exist_ok=True)
    (dest / ".git" / "info" / "attributes").write_text(NEUTRAL_ATTRIBUTES)
    git("checkout", "--quiet", "--force", "-B", WORK_BRANCH, full, cwd=dest)
    (dest / ".git" / "index").unlink(missing_ok=True)
    git("reset", "--quiet", "--hard", full, cwd=dest)
    git("clean", "-qfd", cwd=dest)
    return Workspace(path=dest, base_commit=full, clean_ignored=False)


def check_out_base(dest: Path, objects: Path, full: str) -> None:
    """A checkout of ``full`` in ``dest`` made as a cell's workspace is (its ``.git``, the tags at or before
    base): for an environment template's build, whose install steps read what a cell's would (the version
    setuptools_scm and versioneer derive from the tags)."""
    _check_out(dest, objects, full)
