"""Workspaces: materialize a repository at ``base_commit``, extract the patch.

Each repository is fetched once into a bare mirror in the shared cache (under
a file lock, so concurrent xdist workers fetch it once between them). A cell's
workspace is a fresh ``git init`` whose object store borrows the mirror's
through ``objects/info/alternates``: no objects are copied, only the tree is
checked out, and the workspace's refs, index and new objects stay private.
Only the work branch exists in the workspace, so the history after
``base_commit`` is not reachable by name from inside it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .instances import Instance, Source

WORK_BRANCH = "arena-work"

#: Paths that never enter a patch: test files (an arm cannot grade itself by
#: editing tests), the supervisor's scratch folder, and Python byte-code.
PATCH_EXCLUDES = (
    "**/tests/**",
    "**/test/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    ".loops/**",
    "**/__pycache__/**",
    "**/*.pyc",
    "**/.pytest_cache/**",
)

_GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "swe-arena",
    "GIT_AUTHOR_EMAIL": "swe-arena@localhost",
    "GIT_COMMITTER_NAME": "swe-arena",
    "GIT_COMMITTER_EMAIL": "swe-arena@localhost",
}


class WorkspaceError(Exception):
    """The harness could not materialize, reset or patch a workspace."""


class PatchApplyError(WorkspaceError):
    """A patch does not apply; ``output`` holds git's explanation."""

    def __init__(self, what: str, output: str):
        self.output = output
        super().__init__(f"{what} does not apply: {output.strip()[:500]}")


def git(*args: str, cwd: Path, check: bool = True, input: bytes | None = None) -> str:
    env = {**os.environ, **_GIT_ENV}
    completed = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=input, capture_output=True, check=False,
    )
    if check and completed.returncode != 0:
        message = completed.stderr.decode(errors="replace").strip() or completed.stdout.decode(errors="replace")
        raise WorkspaceError(f"git {' '.join(args[:3])} failed in {cwd}: {message[:800]}")
    return completed.stdout.decode(errors="replace")


@dataclass(frozen=True)
class Workspace:
    """A cell's private checkout of the instance's repository at ``base_commit``."""

    path: Path
    base_commit: str  # full sha
    mirror: Path | None
    #: False for an image's /testbed, whose ignored files are the image's build (compiled extensions...).
    clean_ignored: bool = True


class RepoStore:
    """One bare mirror per repository source in ``root``, shared by every cell and worker."""

    def __init__(self, root: Path):
        self.root = root
        self.engines = EngineProbe()
        #: (mirror, commit as given) -> full sha: resolved once per session, not once per cell.
        self._resolved: dict[tuple[Path, str], str] = {}

    def mirror_path(self, source: Source, repo: str) -> Path:
        digest = hashlib.sha256(f"{source.kind}:{source.location}".encode()).hexdigest()[:12]
        slug = re.sub(r"[^A-Za-z0-9._-]", "_", repo.replace("/", "__"))
        return self.root / "mirrors" / f"{slug}-{digest}.git"

    def ensure_commit(self, source: Source, repo: str, commit: str) -> tuple[Path, str]:
        """Return the mirror holding ``commit`` and the commit's full sha; fetch if needed."""
        from filelock import FileLock

        mirror = self.mirror_path(source, repo)
        full = self._resolved.get((mirror, commit))
        if full is None and mirror.exists():
            full = _resolve_commit(mirror, commit)
        if full:
            self._resolved[mirror, commit] = full
            return mirror, full
        mirror.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(mirror) + ".lock"):
            # Another worker may have fetched while we waited for the lock.
            full = _resolve_commit(mirror, commit) if mirror.exists() else None
            if full:
                return mirror, full
            if mirror.exists():
                git("fetch", "--quiet", "--force", source.location, "+refs/*:refs/*", cwd=mirror)
            else:
                staging = Path(tempfile.mkdtemp(prefix=mirror.name + ".", dir=mirror.parent))
                try:
                    git("clone", "--quiet", "--mirror", source.location, str(staging / "m.git"), cwd=mirror.parent)
                    os.rename(staging / "m.git", mirror)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
            with open(mirror / "arena-fetches.log", "a") as log:
                log.write(f"{time.time():.3f} pid={os.getpid()} {source.describe()}\n")
            full = _resolve_commit(mirror, commit)
            if not full:
                raise WorkspaceError(f"base_commit {commit} not found in {source.describe()}")
            self._resolved[mirror, commit] = full
            return mirror, full


def _resolve_commit(mirror: Path, commit: str) -> str | None:
    out = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
        cwd=mirror, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False,
    )
    return out.stdout.decode().strip() or None if out.returncode == 0 else None


#: Appended to a fresh workspace's .git/config: written directly, not with three
#: ``git config`` processes, because process start-up is most of a cell's git cost.
_WORKSPACE_CONFIG = """[gc]
\tauto = 0
[user]
\tname = swe-arena
\temail = swe-arena@localhost
"""


def materialize(instance: Instance, store: RepoStore, dest: Path, engine: str = "docker") -> Workspace:
    """Check out ``instance`` at its base commit into ``dest`` on the work branch, clean."""
    if instance.source.kind == "image":
        return materialize_image(instance, store.engines, engine, dest)
    mirror, full = store.ensure_commit(instance.source, instance.repo, instance.base_commit)
    dest.mkdir(parents=True, exist_ok=True)
    git("init", "--quiet", "--template=", f"--initial-branch={WORK_BRANCH}", str(dest), cwd=dest)
    git_dir = dest / ".git"
    info = git_dir / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(str(mirror / "objects") + "\n")
    with open(git_dir / "config", "a", encoding="utf-8") as config:
        config.write(_WORKSPACE_CONFIG)
    # On the unborn work branch, this creates the branch at ``full`` and checks it out.
    git("reset", "--quiet", "--hard", full, cwd=dest)
    return Workspace(path=dest, base_commit=full, mirror=mirror)


def extract_patch(workspace: Workspace) -> str:
    """Everything the arm changed since base (staged, unstaged, untracked, committed), minus excludes."""
    git("add", "-A", cwd=workspace.path)
    excludes = [f":(exclude,glob){pattern}" for pattern in PATCH_EXCLUDES]
    return git(
        "diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--no-renames",
        workspace.base_commit, "--", ".", *excludes, cwd=workspace.path,
    )


def reset_to_base(workspace: Workspace) -> None:
    """Discard every change: tracked, untracked and ignored files."""
    git("reset", "--quiet", "--hard", workspace.base_commit, cwd=workspace.path)
    git("clean", "-qfdx" if workspace.clean_ignored else "-qfd", cwd=workspace.path)


def apply_patch(workspace: Workspace, patch: str, what: str) -> None:
    """``git apply`` a patch to the work tree; raise ``PatchApplyError`` naming ``what``."""
    if not patch.strip():
        return
    completed = subprocess.run(
        ["git", "apply", "--binary", "--whitespace=nowarn", "-"],
        cwd=workspace.path, input=patch.encode(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False,
    )
    if completed.returncode != 0:
        raise PatchApplyError(what, completed.stdout.decode(errors="replace"))


def files_touched(patch: str) -> list[str]:
    """Paths a unified diff touches (both sides), in order of appearance."""
    seen: dict[str, None] = {}
    for match in re.finditer(r"^diff --git a/(\S+) b/(\S+)$", patch, flags=re.MULTILINE):
        seen.setdefault(match.group(1))
        seen.setdefault(match.group(2))
    return list(seen)


def restore_from_base(workspace: Workspace, paths: list[str]) -> None:
    """Put ``paths`` back as they are at base (deleting those that do not exist there)."""
    for path in paths:
        exists = subprocess.run(
            ["git", "cat-file", "-e", f"{workspace.base_commit}:{path}"],
            cwd=workspace.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
        ).returncode == 0
        if exists:
            git("checkout", workspace.base_commit, "--", path, cwd=workspace.path)
        else:
            (workspace.path / path).unlink(missing_ok=True)


def commit_environment_setup(workspace: Workspace) -> Workspace:
    """Commit what an environment's steps changed, so the arm's patch holds only the arm's work.

    Returns the workspace with that commit as its base (unchanged if the steps left the tree clean).
    """
    if not git("status", "--porcelain", cwd=workspace.path).strip():
        return workspace
    git("add", "-A", cwd=workspace.path)
    git("commit", "--quiet", "--no-verify", "-m", "arena: environment setup", cwd=workspace.path)
    return replace(workspace, base_commit=git("rev-parse", "HEAD", cwd=workspace.path).strip())


class EngineProbe:
    """Whether a container engine answers, asked once per engine and process."""

    def __init__(self) -> None:
        self._answers: dict[str, str | None] = {}

    def problem(self, engine: str) -> str | None:
        """None when ``engine`` answers; otherwise one line saying why it does not."""
        if engine not in self._answers:
            self._answers[engine] = _engine_problem(engine)
        return self._answers[engine]


def _engine_problem(engine: str) -> str | None:
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


def materialize_image(instance: Instance, engines: EngineProbe, engine: str, dest: Path) -> Workspace:
    """Copy the image's ``/testbed`` out, then reset it to base on the work branch, clean."""
    image = instance.source.location
    problem = engines.problem(engine)
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
    full = _resolve_commit(dest, instance.base_commit)
    if not full:
        raise WorkspaceError(f"base_commit {instance.base_commit} not found in {image}:/testbed")
    git("config", "user.name", "swe-arena", cwd=dest)
    git("config", "user.email", "swe-arena@localhost", cwd=dest)
    git("checkout", "--quiet", "--force", "-B", WORK_BRANCH, full, cwd=dest)
    git("clean", "-qfd", cwd=dest)
    return Workspace(path=dest, base_commit=full, mirror=None, clean_ignored=False)
