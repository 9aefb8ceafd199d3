"""The harness's git: every git call of a cell goes through ``git()`` (or ``run_git``).

It ignores the user's global and system git config (``diff.noprefix``, ``core.excludesFile``,
hooks, signing...) and commits as ``swe-arena``, so no setting of the machine shapes a workspace,
a snapshot or a patch.

``HarnessGit`` goes further, for the trees an agent has had its hands on: a git dir of the
harness's own over a work tree it does not own. The workspace's ``.git`` belongs to the agent:
its config can name an fsmonitor, hooks, filters or another work tree, its index can hide files
(``--skip-worktree``, ``--assume-unchanged``), its refs can replace the base commit. None of it
is read by a ``HarnessGit``: it keeps an index and new objects *outside* the workspace, the base
snapshot's objects through ``objects/info/alternates``, and a config written by the harness
alone. Every command runs ``git --git-dir=HARNESS --work-tree=TREE`` with ``harness_git_env``:
no global or system config, no replace objects, and ``HARNESS_SETTINGS`` on the command line,
where nothing overrides them. Attributes would let files change what git reads
(``working-tree-encoding``, ``ident``, ``text``/``eol``, ``filter``): ``info/attributes``, which
takes precedence over every ``.gitattributes``, unsets them all, so git reads and writes the
files' bytes as they are.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

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


class WorkspaceError(Exception):
    """The harness could not materialize, reset or patch a workspace (a git command failed, say)."""


def harness_git_environment() -> dict[str, str]:
    """The process environment with the harness's git settings over it (no user or system git config)."""
    return {**os.environ, **_GIT_ENV}


def run_git(*args: str, cwd: Path, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run git with the harness's environment and return the completed process, whatever its exit code."""
    return subprocess.run(
        ["git", *args], cwd=cwd, env=harness_git_environment(), input=input, capture_output=True, check=False,
    )


def git_bytes(*args: str, cwd: Path, check: bool = True, input: bytes | None = None, cap: int | None = None) -> bytes:
    """Run git; its output as bytes, exactly (a patch); raise ``WorkspaceError`` when it fails and ``check``.

    :param cap: most bytes of output read, as ``read_capped`` reads them (``OutputOverCap`` beyond); None: all.
    """
    completed = (run_git(*args, cwd=cwd, input=input) if cap is None
                 else read_capped(["git", *args], cwd=cwd, env=harness_git_environment(), cap=cap, input=input))
    if check and completed.returncode != 0:
        message = completed.stderr.decode(errors="replace").strip() or completed.stdout.decode(errors="replace")
        raise WorkspaceError(f"git {' '.join(args[:3])} failed in {cwd}: {message[:800]}")
    return completed.stdout


def git(*args: str, cwd: Path, check: bool = True, input: bytes | None = None) -> str:
    """``git_bytes`` as text, for shas, refs and status (a byte that is not UTF-8 becomes U+FFFD)."""
    return git_bytes(*args, cwd=cwd, check=check, input=input).decode(errors="replace")


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

#: Variables that would point git somewhere else; none of the harness's environment reaches its git.
_GIT_ENV_PREFIX = "GIT_"


class ExtractionError(WorkspaceError):
    """The workspace the arm left cannot be read into a patch: after the arm started, the arm's failure."""


class OutputOverCap(ExtractionError):
    """A git command printed more than the harness reads (a patch over ``--arena-patch-max-bytes``): git was
    stopped there, the rest never read."""

    def __init__(self, command: str, cap: int):
        self.cap = cap
        super().__init__(f"the patch is over the cap of {cap:,} bytes ({command} was stopped after "
                         f"{cap + 1:,} bytes of it; the rest was not read)")


#: How much of a git command's output is read at a time by ``read_capped``.
_CHUNK = 1 << 20


def read_capped(argv: list[str], *, cwd: Path, env: Mapping[str, str], cap: int | None,
                input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` and read its output as it comes, never more than ``cap`` bytes (None: no cap).

    Raise ``OutputOverCap`` as soon as more arrives (git is killed: a patch of a large file the arm left is
    never held whole in the harness's memory). Its stderr goes to a file, so neither pipe can block the other.
    """
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdin=subprocess.PIPE if input is not None
                                   else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, bufsize=0)
        assert isinstance(process.stdout, io.FileIO)
        try:
            if input is not None and process.stdin is not None:
                process.stdin.write(input)
                process.stdin.close()
            chunks: list[bytes] = []
            read = 0
            while chunk := process.stdout.read(_CHUNK):
                read += len(chunk)
                if cap is not None and read > cap:
                    raise OutputOverCap(f"git {next((arg for arg in argv[1:] if not arg.startswith('-')), '')}", cap)
                chunks.append(chunk)
            returncode = process.wait()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stdout.close()
        errors.seek(0)
        return subprocess.CompletedProcess(argv, returncode, b"".join(chunks), errors.read(1 << 16))


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
        # Not bare: a git dir inside its tree (a grading tree's .git) must work for the tree's own tools too.
        init_git_dir(git_dir, objects, "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
                     + "".join(f"[{key.split('.')[0]}]\n\t{key.split('.', 1)[1]} = {value}\n"
                               for key, value in HARNESS_SETTINGS.items() if value))
        (git_dir / "info").mkdir()
        (git_dir / "info" / "attributes").write_text(NEUTRAL_ATTRIBUTES)
        (git_dir / "info" / "exclude").write_text("")
        return cls(git_dir, work_tree)

    def run(self, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """Run git on this git dir and work tree; the completed process, whatever its exit status."""
        where = [f"--git-dir={self.git_dir}", f"--work-tree={self.work_tree}"]
        try:
            return subprocess.run(["git", *where, *args], cwd=self.work_tree,
                                  env=harness_git_env(), input=input, capture_output=True, check=False)
        except OSError as error:  # the work tree is gone (an arm can delete its workspace)
            raise ExtractionError(f"git {' '.join(args[:2])} cannot run in {self.work_tree}: {error}") from None

    def output(self, *args: str, input: bytes | None = None, cap: int | None = None) -> bytes:
        """Run git; its output as bytes; ``ExtractionError`` naming the command and git's words if it fails.

        :param cap: most bytes of output read (``OutputOverCap`` beyond it); None: all of it, at once.
        """
        if cap is None:
            completed = self.run(*args, input=input)
        else:
            where = [f"--git-dir={self.git_dir}", f"--work-tree={self.work_tree}"]
            try:
                completed = read_capped(["git", *where, *args], cwd=self.work_tree, env=harness_git_env(),
                                        cap=cap, input=input)
            except OSError as error:
                raise ExtractionError(f"git {' '.join(args[:2])} cannot run in {self.work_tree}: {error}") from None
        if completed.returncode != 0:
            said = (completed.stderr or completed.stdout).decode(errors="replace").strip()
            raise ExtractionError(f"git {' '.join(args[:2])} on {self.work_tree} failed: {said[:800]}")
        return completed.stdout

    def checkout_base(self, base_commit: str) -> None:
        """Write base's files into the (empty) work tree, and base into the index with the files' stat data."""
        self.work_tree.mkdir(parents=True, exist_ok=True)
        self.output("read-tree", "--reset", "-u", base_commit)

    def point_branch(self, branch: str, commit: str) -> None:
        """Set ``refs/heads/<branch>`` to ``commit`` and HEAD to that branch (the ref files, as git writes them)."""
        (self.git_dir / "refs" / "heads" / branch).write_text(f"{commit}\n")
        (self.git_dir / "HEAD").write_text(f"ref: refs/heads/{branch}\n")

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

    def seed_index(self, base_commit: str, checked_out: Path | None = None) -> None:
        """Base into the index, with the stat data of the files already in the work tree (checked out as base).

        Done once before the arm starts, so extraction later reads only the files whose stat changed.

        :param checked_out: an index git wrote when it checked base out into this work tree (the
            workspace's own, before the arm started): copied with its time stamp, so git's check of
            racily clean entries holds as it did there, instead of reading base and every file's stat again.
        """
        if checked_out is not None and checked_out.is_file() and not checked_out.is_symlink():
            shutil.copy2(checked_out, self.git_dir / "index")
            return
        self.output("read-tree", base_commit)
        self.run("update-index", "-q", "--refresh")


def init_git_dir(git_dir: Path, objects: Path | None, config: str, head: str = "main") -> None:
    """A new, empty git dir as ``git init --template=`` makes it (HEAD on the unborn ``head`` branch, ``config``),
    borrowing ``objects`` (another store's ``objects`` folder) when given: written here, not by a git process,
    since starting git is most of what a cell's git calls cost."""
    # Parent first, one mkdir each; git makes objects/pack, refs/tags and the like when it first needs them.
    for folder in ("", "objects", "objects/info", "refs", "refs/heads"):
        os.mkdir(git_dir / folder)
    if objects is not None:
        (git_dir / "objects" / "info" / "alternates").write_text(f"{objects}\n")
    (git_dir / "config").write_text(config)
    (git_dir / "HEAD").write_text(f"ref: refs/heads/{head}\n")

