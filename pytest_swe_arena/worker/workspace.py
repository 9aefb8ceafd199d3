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
object store the workspace can see, by name or by sha.

Every git call goes through ``git()``, which ignores the user's global and
system git config (``diff.noprefix``, ``core.excludesFile``, hooks, signing...).

Patches are bytes: a source file need not be UTF-8 (Latin-1 is common in older
projects), and a patch decoded and encoded again would no longer apply.
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
from dataclasses import dataclass, replace
from pathlib import Path

from ..instances.loading import Instance, Source

WORK_BRANCH = "arena-work"

#: Test files, as git glob pathspecs: an arm cannot grade itself by editing tests.
TEST_PATHS = (
    "**/tests/**",
    "**/test/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
)
#: Paths that never enter a patch: test files, the supervisor's scratch folder, and Python byte-code.
PATCH_EXCLUDES = (
    *TEST_PATHS,
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
    # The user's ~/.gitconfig and /etc/gitconfig must not shape the harness's git:
    # diff.noprefix makes patches that do not apply, core.excludesFile drops files
    # from `git add -A`, commit.gpgsign and core.hooksPath break or run things.
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}

#: Set on every mirror and snapshot: nothing may repack or prune a store that
#: other processes are reading from.
_NO_GC = ("gc.auto=0", "maintenance.auto=false")
#: The same, as config file text.
_NO_GC_CONFIG = "[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n"


class WorkspaceError(Exception):
    """The harness could not materialize, reset or patch a workspace."""


class PatchApplyError(WorkspaceError):
    """A patch does not apply; ``output`` holds git's explanation."""

    def __init__(self, what: str, output: str):
        self.output = output
        super().__init__(f"{what} does not apply: {output.strip()[:500]}")


def run_git(*args: str, cwd: Path, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run git with the harness's environment and return the completed process, whatever its exit code."""
    return subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **_GIT_ENV}, input=input, capture_output=True, check=False,
    )


def git_bytes(*args: str, cwd: Path, check: bool = True, input: bytes | None = None) -> bytes:
    """Run git; its output as bytes, exactly (a patch); raise ``WorkspaceError`` when it fails and ``check``."""
    completed = run_git(*args, cwd=cwd, input=input)
    if check and completed.returncode != 0:
        message = completed.stderr.decode(errors="replace").strip() or completed.stdout.decode(errors="replace")
        raise WorkspaceError(f"git {' '.join(args[:3])} failed in {cwd}: {message[:800]}")
    return completed.stdout


def git(*args: str, cwd: Path, check: bool = True, input: bytes | None = None) -> str:
    """``git_bytes`` as text, for shas, refs and status (a byte that is not UTF-8 becomes U+FFFD)."""
    return git_bytes(*args, cwd=cwd, check=check, input=input).decode(errors="replace")


@dataclass(frozen=True)
class Workspace:
    """A cell's private checkout of the instance's repository at ``base_commit``."""

    path: Path
    base_commit: str  # full sha
    #: False for an image's /testbed, whose ignored files are the image's build (compiled extensions...).
    clean_ignored: bool = True


class RepoStore:
    """One bare mirror per repository source in ``root``, and one snapshot per base commit.

    Both are shared by every cell and worker; only snapshots are ever borrowed by a workspace.
    """

    def __init__(self, root: Path):
        self.root = root
        #: (mirror, commit as given) -> full sha: resolved once per session, not once per cell.
        self._resolved: dict[tuple[Path, str], str] = {}
        #: (mirror, commit as given) -> why it cannot be used: fetched for once per session, not once per cell.
        self._unusable: dict[tuple[Path, str], str] = {}
        self._snapshots: set[Path] = set()

    def mirror_path(self, source: Source, repo: str) -> Path:
        digest = hashlib.sha256(f"{source.kind}:{source.location}".encode()).hexdigest()[:12]
        slug = re.sub(r"[^A-Za-z0-9._-]", "_", repo.replace("/", "__"))
        return self.root / "mirrors" / f"{slug}-{digest}.git"

    def snapshot_path(self, mirror: Path, full: str) -> Path:
        return self.root / "snapshots" / mirror.name.removesuffix(".git") / f"{full}.git"

    def ensure_commit(self, source: Source, repo: str, commit: str) -> tuple[Path, str]:
        """Return the mirror holding ``commit`` and the commit's full sha; fetch if needed."""
        from filelock import FileLock

        mirror = self.mirror_path(source, repo)
        key = (mirror, commit)
        if key in self._unusable:
            raise WorkspaceError(self._unusable[key])
        full = self._resolved.get(key)
        if full is None and mirror.exists():
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
            return mirror, full

    def _resolve(self, mirror: Path, commit: str, source: Source) -> str | None:
        try:
            return _resolve_commit(mirror, commit)
        except AmbiguousCommitError as error:
            # More history can only add candidates: fetching again would not help.
            self._unusable[mirror, commit] = f"base_commit {commit} is ambiguous in {source.describe()}: {error}"
            raise WorkspaceError(self._unusable[mirror, commit]) from None

    def snapshot(self, mirror: Path, full: str) -> Path:
        """The object store (``objects`` folder) of the snapshot of ``full``: only objects reachable from it.

        Built once per cache for every arm and trial of that base, under a file lock,
        into a temporary folder renamed into place (so a snapshot that exists is complete).
        """
        from filelock import FileLock

        snapshot = self.snapshot_path(mirror, full)
        if snapshot in self._snapshots or snapshot.exists():
            self._snapshots.add(snapshot)
            return snapshot / "objects"
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        # One lock per snapshot: snapshots of different bases only read the mirror, so they build in parallel.
        with FileLock(str(snapshot) + ".lock"):
            if not snapshot.exists():
                staging = Path(tempfile.mkdtemp(prefix=snapshot.name + ".", dir=snapshot.parent))
                try:
                    repo = staging / "s.git"
                    _init_snapshot(repo)
                    git("pack-objects", "--revs", "--quiet", "--delta-base-offset", str(repo / "objects/pack/pack"),
                        cwd=mirror, input=f"{full}\n".encode())
                    # A detached HEAD keeps every object reachable inside the snapshot itself.
                    (repo / "HEAD").write_text(full + "\n")
                    os.rename(repo, snapshot)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
        self._snapshots.add(snapshot)
        return snapshot / "objects"


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


#: Appended to a fresh workspace's .git/config: written directly, not with three
#: ``git config`` processes, because process start-up is most of a cell's git cost.
_WORKSPACE_CONFIG = _NO_GC_CONFIG + """[user]
\tname = swe-arena
\temail = swe-arena@localhost
"""


def materialize(instance: Instance, store: RepoStore, dest: Path, engine: str = "docker") -> Workspace:
    """Check out ``instance`` at its base commit into ``dest`` on the work branch, clean."""
    if instance.source.kind == "image":
        return materialize_image(instance, engine, dest)
    mirror, full = store.ensure_commit(instance.source, instance.repo, instance.base_commit)
    objects = store.snapshot(mirror, full)
    dest.mkdir(parents=True, exist_ok=True)
    git("init", "--quiet", "--template=", f"--initial-branch={WORK_BRANCH}", str(dest), cwd=dest)
    git_dir = dest / ".git"
    info = git_dir / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(str(objects) + "\n")
    with open(git_dir / "config", "a", encoding="utf-8") as config:
        config.write(_WORKSPACE_CONFIG)
    # On the unborn work branch, this creates the branch at ``full`` and checks it out.
    git("reset", "--quiet", "--hard", full, cwd=dest)
    return Workspace(path=dest, base_commit=full)


#: Options that make ``git diff`` print a patch ``git apply`` takes, whatever the workspace's config says.
_PATCH_OPTIONS = ("--binary", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
                  "--src-prefix=a/", "--dst-prefix=b/")


def extract_patch(workspace: Workspace) -> bytes:
    """Everything the arm changed since base (staged, unstaged, untracked, committed), minus excludes, as bytes."""
    # An arm killed in the middle of a git command leaves the index locked; its
    # process tree is dead by now, so the lock is stale.
    (workspace.path / ".git" / "index.lock").unlink(missing_ok=True)
    git("add", "-A", cwd=workspace.path)
    excludes = [f":(exclude,glob){pattern}" for pattern in PATCH_EXCLUDES]
    return git_bytes("diff", "--cached", *_PATCH_OPTIONS, workspace.base_commit, "--", ".", *excludes,
                     cwd=workspace.path)


def is_test_path(path: str) -> bool:
    """Whether ``path`` (relative to the repository root, ``/``-separated) is a test file by ``TEST_PATHS``."""
    return any(re.fullmatch(_glob_regex(pattern), path) for pattern in TEST_PATHS)


def is_excluded_from_patch(path: str) -> bool:
    """Whether ``extract_patch`` leaves ``path`` out of every patch: it matches one of ``PATCH_EXCLUDES``."""
    return any(re.fullmatch(_glob_regex(pattern), path) for pattern in PATCH_EXCLUDES)


def _glob_regex(pattern: str) -> str:
    """A git ``:(glob)`` pathspec of the forms ``PATCH_EXCLUDES`` uses, as a regex.

    ``**/`` is any leading folders, a trailing ``/**`` anything inside, and ``*`` and ``?`` stay within one name.
    """
    parts = re.split(r"(\*\*/|/\*\*$|\*|\?)", pattern)
    tokens = {"**/": "(?:.*/)?", "/**": "/.*", "*": "[^/]*", "?": "[^/]"}
    return "(?s)" + "".join(tokens.get(part, re.escape(part)) for part in parts)


def reset_to_base(workspace: Workspace) -> None:
    """Discard every change: tracked, untracked and ignored files."""
    git("reset", "--quiet", "--hard", workspace.base_commit, cwd=workspace.path)
    git("clean", "-qfdx" if workspace.clean_ignored else "-qfd", cwd=workspace.path)


def apply_patch(workspace: Workspace, patch: bytes | str, what: str) -> None:
    """``git apply`` a patch to the work tree; raise ``PatchApplyError`` naming ``what``.

    A patch given as text (the gold and test patches of an instance row are JSON strings) is UTF-8.
    """
    if not patch.strip():
        return
    data = patch.encode() if isinstance(patch, str) else patch
    completed = run_git("apply", "--binary", "--whitespace=nowarn", "-", cwd=workspace.path, input=data)
    if completed.returncode != 0:
        raise PatchApplyError(what, (completed.stdout + completed.stderr).decode(errors="replace"))


_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(text: str) -> tuple[str, str]:
    """Split one path off the start of ``text``: git's C-quoted form or a bare word; return (path, rest)."""
    if not text.startswith('"'):
        path, _, rest = text.partition(" ")
        return path, rest
    raw = bytearray()
    index = 1
    while index < len(text) and text[index] != '"':
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            escape = text[index + 1]
            if escape in "01234567":
                raw.append(int(text[index + 1:index + 4], 8))
                index += 4
                continue
            raw.append(_C_ESCAPES.get(escape, ord(escape)))
            index += 2
            continue
        raw += char.encode(errors="surrogateescape")  # a raw byte of a name git did not escape
        index += 1
    return raw.decode(errors="surrogateescape"), text[index + 1:].lstrip(" ")


def _strip_component(path: str) -> str:
    """Drop the leading ``a/``-style component, as ``git apply -p1`` does."""
    return path.split("/", 1)[1] if "/" in path else path


def _header_paths(header: str) -> list[str]:
    """The path(s) of a ``diff --git`` header (the text after ``diff --git ``), unquoted as git quotes them.

    Only sections without ``---``/``+++`` or rename lines come here (new empty files, mode
    changes, binary patches): both sides then name the same file.
    """
    if header.startswith('"'):
        first, rest = _unquote(header)
        second = _unquote(rest)[0] if rest.startswith('"') else rest
        return [_strip_component(first), _strip_component(second)]
    # An unquoted name may hold spaces: "a/x y b/x y" splits in its middle.
    half = len(header) // 2
    if len(header) % 2 == 1 and header[half] == " ":
        first, second = header[:half], header[half + 1:]
        if _strip_component(first) == _strip_component(second):
            return [_strip_component(first)]
    first, _, second = header.partition(" ")
    return [_strip_component(first), _strip_component(second)]


def files_touched(patch: bytes | str) -> list[str]:
    """Paths a git diff touches (both sides), in order of appearance, unquoted as git quotes them.

    A name's bytes that are not UTF-8 are kept as surrogate escapes, as ``os`` functions take them.
    """
    if isinstance(patch, bytes):
        patch = patch.decode(errors="surrogateescape")
    seen: dict[str, None] = {}
    for section in re.split(r"^(?=diff --git )", patch, flags=re.MULTILINE):
        if not section.startswith("diff --git "):
            continue
        lines = section.splitlines()
        paths: list[str] = []
        for line in lines[1:]:
            if line.startswith(("--- ", "+++ ")):
                # A name with a space gets a trailing tab; a hand-made diff may add a date after one.
                name = line[4:].split("\t", 1)[0] if not line[4:].startswith('"') else _unquote(line[4:])[0]
                if name != "/dev/null":
                    paths.append(_strip_component(name))
            elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
                name = line.split(" ", 2)[2]
                paths.append(_unquote(name)[0] if name.startswith('"') else name)
            elif line.startswith("@@"):
                break
        for path in paths or _header_paths(lines[0][len("diff --git "):]):
            seen.setdefault(path)
    return list(seen)


def restore_from_base(workspace: Workspace, paths: list[str]) -> None:
    """Put ``paths`` back as they are at base (deleting those that do not exist there)."""
    for path in paths:
        exists = run_git("cat-file", "-e", f"{workspace.base_commit}:{path}", cwd=workspace.path).returncode == 0
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
    # The environment's steps may have written the workspace's own config: no hooks, no signing.
    git("-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "commit", "--quiet", "--no-verify",
        "-m", "arena: environment setup", cwd=workspace.path)
    return replace(workspace, base_commit=git("rev-parse", "HEAD", cwd=workspace.path).strip())


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
    git("checkout", "--quiet", "--force", "-B", WORK_BRANCH, full, cwd=dest)
    git("clean", "-qfd", cwd=dest)
    return Workspace(path=dest, base_commit=full, clean_ignored=False)
