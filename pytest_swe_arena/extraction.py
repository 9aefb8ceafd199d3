"""Patch extraction with the harness's own git state over the workspace's files.

The workspace's ``.git`` belongs to the agent: its config can name an fsmonitor,
hooks, filters or another work tree, its index can hide files
(``--skip-worktree``, ``--assume-unchanged``), its refs can replace the base
commit. None of it is ever read here. The harness keeps a git dir of its own
*outside* the workspace (``HarnessGit``): an index and new objects, the base
snapshot's objects through ``objects/info/alternates``, and a config written
by the harness alone. Every command runs ``git --git-dir=HARNESS
--work-tree=WORKSPACE`` with the harness's environment (``harness_git_env``):
no global or system config, no replace objects, and the settings of
``HARNESS_SETTINGS`` given on the command line, where nothing overrides them.

Attributes would let files change what git reads (``working-tree-encoding``,
``ident``, ``text``/``eol``, ``filter``): ``info/attributes``, which takes
precedence over every ``.gitattributes``, unsets them all, so the patch holds
the files' bytes as they are. A checkout through a ``HarnessGit`` (``checkout_base``)
writes the repository's bytes the same way.

What the patch is: every file of the workspace that differs from base (the
agent's commits count: they are in the files), minus ``PATCH_EXCLUDES``, as
bytes. The agent's ``.git`` is never in it (git never adds a path named
``.git``). A directory with a ``.git`` of its own (a nested repository, which
``git add -A`` would record as a bare gitlink) becomes its files, and is named
in ``Extraction.nested_repositories`` so the row can say so.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .workspace import PATCH_EXCLUDES, WorkspaceError, is_excluded_from_patch

#: Git settings of every harness git command, given as command-line config (``GIT_CONFIG_COUNT``):
#: no program of anyone's runs, nothing is converted, nothing is hidden.
HARNESS_SETTINGS: Mapping[str, str] = {
    "core.fsmonitor": "false",
    "core.hooksPath": os.devnull,
    "core.attributesFile": os.devnull,
    "core.excludesFile": os.devnull,
    "core.autocrlf": "false",
    "core.safecrlf": "false",
    "core.symlinks": "true",
    "core.fileMode": "true",
    "core.ignoreCase": "false",
    "core.precomposeUnicode": "false",
    "core.protectNTFS": "true",
    "core.untrackedCache": "false",
    "core.splitIndex": "false",
    "core.sparseCheckout": "false",
    "core.trustctime": "true",
    "core.checkStat": "default",
    "index.sparse": "false",
    "diff.noprefix": "false",
    "diff.mnemonicPrefix": "false",
    "diff.relative": "false",
    "diff.renames": "false",
    "protocol.allow": "never",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "commit.gpgSign": "false",
    "user.name": "swe-arena",
    "user.email": "swe-arena@localhost",
}

#: ``info/attributes`` of a harness git dir: every attribute that changes content is unset for every path.
NEUTRAL_ATTRIBUTES = "* -text !eol !ident !filter !working-tree-encoding !diff !merge !whitespace\n"

#: Options that make ``git diff`` print a patch ``git apply`` takes, whatever else is configured.
PATCH_OPTIONS = ("--binary", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
                 "--src-prefix=a/", "--dst-prefix=b/")

#: Variables that would point git somewhere else; none of the harness's environment reaches its git.
_GIT_ENV_PREFIX = "GIT_"


class ExtractionError(WorkspaceError):
    """The workspace the arm left cannot be read into a patch: after the arm started, the arm's failure."""


def harness_git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the harness's git: ``base`` without any ``GIT_*`` variable, plus the harness's settings."""
    env = {name: value for name, value in (os.environ if base is None else base).items()
           if not name.startswith(_GIT_ENV_PREFIX)}
    env.update({
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_AUTHOR_NAME": "swe-arena", "GIT_AUTHOR_EMAIL": "swe-arena@localhost",
        "GIT_COMMITTER_NAME": "swe-arena", "GIT_COMMITTER_EMAIL": "swe-arena@localhost",
        "GIT_CONFIG_COUNT": str(len(HARNESS_SETTINGS)),
    })
    for index, (key, value) in enumerate(HARNESS_SETTINGS.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


@dataclass(frozen=True)
class HarnessGit:
    """A git dir of the harness's over a work tree it does not own (the workspace, a grading tree)."""

    git_dir: Path
    work_tree: Path

    @classmethod
    def create(cls, git_dir: Path, work_tree: Path, objects: Path) -> HarnessGit:
        """A new git dir at ``git_dir`` borrowing ``objects`` (a snapshot's), with the harness's config only."""
        if git_dir.exists():
            raise ExtractionError(f"harness git dir {git_dir} exists already")
        git_dir.parent.mkdir(parents=True, exist_ok=True)
        harness = cls(git_dir, work_tree)
        harness.output("init", "--quiet", "--bare", "--template=", str(git_dir), bare=True)
        (git_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (git_dir / "objects" / "info" / "alternates").write_text(f"{objects}\n")
        (git_dir / "info").mkdir(exist_ok=True)
        (git_dir / "info" / "attributes").write_text(NEUTRAL_ATTRIBUTES)
        (git_dir / "info" / "exclude").write_text("")
        # Not bare: a git dir inside its tree (a grading tree's .git) must work for the tree's own tools too.
        (git_dir / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
                                        + "".join(f"[{key.split('.')[0]}]\n\t{key.split('.', 1)[1]} = {value}\n"
                                                  for key, value in HARNESS_SETTINGS.items() if value))
        return harness

    def run(self, *args: str, input: bytes | None = None, bare: bool = False) -> subprocess.CompletedProcess[bytes]:
        """Run git on this git dir and work tree; the completed process, whatever its exit status."""
        where = [] if bare else [f"--git-dir={self.git_dir}", f"--work-tree={self.work_tree}"]
        try:
            return subprocess.run(["git", *where, *args], cwd=self.work_tree if not bare else self.git_dir.parent,
                                  env=harness_git_env(), input=input, capture_output=True, check=False)
        except OSError as error:  # the work tree is gone (an arm can delete its workspace)
            raise ExtractionError(f"git {' '.join(args[:2])} cannot run in {self.work_tree}: {error}") from None

    def output(self, *args: str, input: bytes | None = None, bare: bool = False) -> bytes:
        """Run git; its output as bytes; ``ExtractionError`` naming the command and git's words if it fails."""
        completed = self.run(*args, input=input, bare=bare)
        if completed.returncode != 0:
            said = (completed.stderr or completed.stdout).decode(errors="replace").strip()
            raise ExtractionError(f"git {' '.join(args[:2])} on {self.work_tree} failed: {said[:800]}")
        return completed.stdout

    def checkout_base(self, base_commit: str) -> None:
        """Write base's files into the (empty) work tree, and base into the index with the files' stat data."""
        self.work_tree.mkdir(parents=True, exist_ok=True)
        self.output("read-tree", "--reset", "-u", base_commit)

    def commit_work_tree(self, parent: str, message: str) -> str:
        """Commit every file of the work tree on top of ``parent`` in this git dir; ``parent`` if nothing changed.

        For an environment's setup steps, which change the tree before the arm runs (generated files, a
        version file): the commit is the base the patch is taken against, and it lives in the harness's
        object store, not in the workspace's (which the agent could rewrite).
        """
        self.output("read-tree", parent)
        self.output("add", "--all")
        tree = self.output("write-tree").decode().strip()
        if tree == self.output("rev-parse", f"{parent}^{{tree}}").decode().strip():
            return parent
        return self.output("commit-tree", tree, "-p", parent, "-m", message).decode().strip()

    def seed_index(self, base_commit: str) -> None:
        """Base into the index, with the stat data of the files already in the work tree (checked out as base).

        Done once before the arm starts, so extraction later reads only the files whose stat changed.
        """
        self.output("read-tree", base_commit)
        self.run("update-index", "-q", "--refresh")


@dataclass(frozen=True)
class Extraction:
    """A patch and what the harness had to do to make it."""

    patch: bytes
    #: Directories with a ``.git`` of their own, taken into the patch as files.
    nested_repositories: tuple[str, ...] = ()


def extract(workspace: Path, base_commit: str, objects: Path, git_dir: Path) -> Extraction:
    """What the arm changed in ``workspace`` since ``base_commit``, with the harness's git dir ``git_dir``.

    ``git_dir`` lies outside the workspace (and outside anything the arm's sandbox can write). If it
    does not exist it is made, borrowing ``objects``, with base in its index; if it was seeded before
    the arm ran (``HarnessGit.seed_index``) only files whose stat changed are read again.
    Raise ``ExtractionError`` when the files cannot be read (the arm's doing, once it has run).
    """
    if workspace.is_symlink() or not workspace.is_dir():
        # An arm can swap its workspace for a link to any folder the harness can read (~/.ssh...):
        # whatever it points to would be read into the patch and the out dir.
        raise ExtractionError(f"the workspace {workspace} is no longer a directory (a symlink, or gone)")
    harness = HarnessGit(git_dir, workspace) if git_dir.exists() else HarnessGit.create(git_dir, workspace, objects)
    if not (git_dir / "index").exists():
        harness.output("read-tree", base_commit)
    # A harness killed in the middle of a git command leaves the index locked; nothing else uses this dir.
    (git_dir / "index.lock").unlink(missing_ok=True)
    pathspec = [".", *(f":(exclude,glob){pattern}" for pattern in PATCH_EXCLUDES)]
    harness.output("add", "--all", "--", *pathspec)
    nested = gitlinks_changed(harness, base_commit)
    if nested:
        take_in_as_files(harness, nested)
    patch = harness.output("diff", "--cached", *PATCH_OPTIONS, base_commit, "--", *pathspec)
    return Extraction(patch, tuple(nested))


def gitlinks_changed(harness: HarnessGit, base_commit: str) -> list[str]:
    """Paths whose index entry is a gitlink (a nested repository) that base does not have as it is."""
    raw = harness.output("diff", "--cached", "--raw", "-z", "--no-renames", base_commit)
    fields = raw.split(b"\0")
    found = []
    for header, path in zip(fields[0::2], fields[1::2], strict=False):
        if header.startswith(b":") and header.split(b" ")[1] == b"160000":
            found.append(os.fsdecode(path))
    return found


def take_in_as_files(harness: HarnessGit, directories: Iterable[str]) -> None:
    """Replace each nested repository's gitlink in the index by its files (its ``.git`` left out).

    Files the work tree's ignore rules or ``PATCH_EXCLUDES`` leave out of every patch stay out here too.
    """
    for directory in directories:
        harness.output("update-index", "--force-remove", "--", directory)
        candidates = [path for path in _files_below(harness.work_tree, directory) if not is_excluded_from_patch(path)]
        ignored = _ignored(harness, candidates)
        wanted = [path for path in candidates if path not in ignored]
        if wanted:
            harness.output("update-index", "--add", "-z", "--stdin", input=b"".join(os.fsencode(p) + b"\0"
                                                                                    for p in wanted))


def _files_below(work_tree: Path, directory: str) -> list[str]:
    """Files and symlinks under ``directory`` (relative to ``work_tree``), never following a link, no ``.git``."""
    found = []
    for root, dirs, files in os.walk(work_tree / directory):
        links = [name for name in dirs if os.path.islink(os.path.join(root, name))]
        dirs[:] = sorted(name for name in dirs if name != ".git" and name not in links)
        for name in sorted([*files, *links]):
            if name == ".git":
                continue
            path = Path(root, name)
            if path.is_symlink() or path.is_file():
                found.append(path.relative_to(work_tree).as_posix())
    return found


def _ignored(harness: HarnessGit, paths: list[str]) -> set[str]:
    if not paths:
        return set()
    completed = harness.run("check-ignore", "--no-index", "-z", "--stdin",
                            input=b"".join(os.fsencode(path) + b"\0" for path in paths))
    if completed.returncode not in (0, 1):
        said = completed.stderr.decode(errors="replace").strip()
        raise ExtractionError(f"git check-ignore on {harness.work_tree} failed: {said[:800]}")
    return {os.fsdecode(path) for path in completed.stdout.split(b"\0") if path}
