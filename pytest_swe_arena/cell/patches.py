"""Patches: what an arm changed, extracted as bytes, applied, and the files they touch.

``extract`` is how a cell's patch is taken: with the harness's own git dir and index
(``git.HarnessGit``) over the workspace's files, never the workspace's ``.git``. The patch is
every file of the workspace that differs from base (the agent's commits count: they are in the
files), minus ``PATCH_EXCLUDES``, as bytes. The agent's ``.git`` is never in it (git never adds a
path named ``.git``). A directory with a ``.git`` of its own (a nested repository, which
``git add -A`` would record as a bare gitlink) becomes its files, and is named in
``Extraction.nested_repositories`` so the row can say so.

A patch is bytes: a source file need not be UTF-8 (Latin-1 is common in older projects), and
a patch decoded and encoded again would no longer apply. ``PATCH_EXCLUDES`` says what never
enters a patch: test files (an arm cannot grade itself by editing tests), the supervisor's
scratch folder and byte-code.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .git import ExtractionError, HarnessGit, WorkspaceError, git, git_bytes, harness_git_environment, run_git
from .workspace import Workspace

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


class PatchApplyError(WorkspaceError):
    """A patch does not apply; ``output`` holds git's explanation."""

    def __init__(self, what: str, output: str):
        self.output = output
        super().__init__(f"{what} does not apply: {output.strip()[:500]}")


#: Options that make ``git diff`` print a patch ``git apply`` takes, whatever the workspace's config says.
PATCH_OPTIONS = ("--binary", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
                  "--src-prefix=a/", "--dst-prefix=b/")


def extract_patch(workspace: Workspace, max_bytes: int | None = None) -> bytes:
    """Everything the arm changed since base (staged, unstaged, untracked, committed), minus excludes, as bytes.

    :param max_bytes: the patch cap, checked while git prints it (``OutputOverCap`` beyond it).
    """
    # An arm killed in the middle of a git command leaves the index locked; its
    # process tree is dead by now, so the lock is stale.
    (workspace.path / ".git" / "index.lock").unlink(missing_ok=True)
    git("add", "-A", cwd=workspace.path)
    excludes = [f":(exclude,glob){pattern}" for pattern in PATCH_EXCLUDES]
    return git_bytes("diff", "--cached", *PATCH_OPTIONS, workspace.base_commit, "--", ".", *excludes,
                     cwd=workspace.path, cap=max_bytes)


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


#: SWE-bench's chain for a recorded patch, in its order (``GIT_APPLY_CMDS`` in
#: ``swebench/harness/run_evaluation.py``), each tried on a clean tree: the method's name, then its argv
#: (the patch on stdin). ``patch`` keeps no ``.orig`` copies: SWE-bench's ``git diff`` ignores them, a
#: patch taken from the files would not.
APPLY_CHAIN = (
    ("git apply", ("git", "apply", "--verbose")),
    ("3way", ("git", "apply", "--verbose", "--3way")),
    ("reject", ("git", "apply", "--verbose", "--reject")),
    ("fuzz", ("patch", "--batch", "--forward", "--fuzz=5", "-p1", "--no-backup-if-mismatch")),
)
#: The method recorded when no command applies the patch but the tree already holds it
#: (``git apply --check --reverse`` succeeds), as SWE-bench accepts it.
ALREADY_APPLIED = "already applied"
#: What ``patch`` says of a hunk it placed with fuzz or at an offset.
_FUZZ_LINE = re.compile(rb"^Hunk #\d+ succeeded at \d+ .*$", re.MULTILINE)

Runner = Callable[[Sequence[str], Path, bytes], "subprocess.CompletedProcess[bytes]"]


@dataclass(frozen=True)
class AppliedPatch:
    """How a recorded patch went in: the method of ``APPLY_CHAIN`` (or ``ALREADY_APPLIED``) and what it said."""

    method: str
    #: ``patch``'s lines for hunks placed with fuzz or at an offset (the ``fuzz`` method only).
    fuzz: tuple[str, ...] = ()
    #: Each failed attempt before it: (method, its output's last lines).
    attempts: tuple[tuple[str, str], ...] = ()


class PatchChainError(PatchApplyError):
    """No method of ``APPLY_CHAIN`` applies the patch; ``attempts`` holds each one's output."""

    def __init__(self, what: str, attempts: tuple[tuple[str, str], ...]):
        self.attempts = attempts
        super().__init__(what, "\n".join(f"[{method}] {output}" for method, output in attempts))


def run_plainly(argv: Sequence[str], cwd: Path, data: bytes) -> subprocess.CompletedProcess[bytes]:
    """Run an apply command in ``cwd`` with the harness's git environment (no sandbox)."""
    return subprocess.run(list(argv), cwd=cwd, env=harness_git_environment(), input=data,
                          capture_output=True, check=False)


def apply_recorded_patch(workspace: Workspace, patch: bytes, what: str, run: Runner = run_plainly) -> AppliedPatch:
    """Apply a recorded patch as SWE-bench does: each method of ``APPLY_CHAIN`` on a clean tree, then the
    reverse check; raise ``PatchChainError`` with every attempt's output when none applies.

    ``run`` runs each command (the replay arm runs them in the cell's sandbox: the patch is the user's
    file, and ``patch`` is a program a hostile diff has fooled before); the tree is reset by the harness's git.
    """
    attempts: list[tuple[str, str]] = []
    for method, argv in APPLY_CHAIN:
        if attempts:
            _reset(workspace)
        completed = run(argv, workspace.path, patch)
        output = completed.stdout + completed.stderr
        if completed.returncode == 0:
            fuzz = [line.decode(errors="replace") for line in _FUZZ_LINE.findall(output)] if method == "fuzz" else []
            return AppliedPatch(method, tuple(fuzz), tuple(attempts))
        attempts.append((method, _tail(output)))
    _reset(workspace)
    if run(("git", "apply", "--check", "--reverse"), workspace.path, patch).returncode == 0:
        return AppliedPatch(ALREADY_APPLIED, (), tuple(attempts))
    raise PatchChainError(what, tuple(attempts))


def _reset(workspace: Workspace) -> None:
    """Put the work tree back at its commit: a failed attempt (``--reject``, ``patch``) leaves hunks and ``.rej``."""
    git("reset", "--hard", "--quiet", workspace.base_commit, cwd=workspace.path)
    git("clean", "-fdq", cwd=workspace.path)


def _tail(output: bytes, lines: int = 12) -> str:
    return "\n".join(output.decode(errors="replace").strip().splitlines()[-lines:])


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


@dataclass(frozen=True)
class ExcludedFile:
    """A file the arm changed that ``PATCH_EXCLUDES`` left out of its patch, with its lines (None: binary)."""

    path: str
    added: int | None
    removed: int | None


#: Most excluded files a row names (the totals count them all).
MAX_EXCLUDED_LISTED = 200
#: A new excluded file larger than this is not read to count its lines.
MAX_COUNTED_BYTES = 8 * 1024 * 1024


def excluded_details(excluded: Iterable[ExcludedFile]) -> dict[str, Any]:
    """``details.patch_excluded``: the files the excludes left out (the first ``MAX_EXCLUDED_LISTED``), their count,
    and their added and removed lines (binary files not counted)."""
    files = sorted(excluded, key=lambda entry: entry.path)
    return {"files": [{"path": entry.path, "added": entry.added, "removed": entry.removed}
                      for entry in files[:MAX_EXCLUDED_LISTED]],
            "count": len(files), "added": sum(entry.added or 0 for entry in files),
            "removed": sum(entry.removed or 0 for entry in files)}


def _excluded_pathspec() -> list[str]:
    return [f":(glob){pattern}" for pattern in PATCH_EXCLUDES]


def _numstat(raw: bytes) -> list[ExcludedFile]:
    """``git diff --numstat -z --no-renames`` output: ``added TAB removed TAB path NUL``, ``-`` for binary."""
    found = []
    for entry in raw.split(b"\0"):
        added, _, rest = entry.partition(b"\t")
        removed, _, path = rest.partition(b"\t")
        if path:
            found.append(ExcludedFile(os.fsdecode(path), int(added) if added.isdigit() else None,
                                      int(removed) if removed.isdigit() else None))
    return found


def _new_file(work_tree: Path, path: str) -> ExcludedFile:
    """A new file's lines as a patch would count them: a link is one line, a binary file (a NUL) none."""
    full = work_tree / path
    if full.is_symlink():
        return ExcludedFile(path, 1, 0)
    try:
        handle = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return ExcludedFile(path, None, 0)
    with os.fdopen(handle, "rb") as file:
        if os.fstat(file.fileno()).st_size > MAX_COUNTED_BYTES:
            return ExcludedFile(path, None, 0)
        data = file.read()
    if b"\0" in data[:8000]:
        return ExcludedFile(path, None, 0)
    return ExcludedFile(path, data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0), 0)


def excluded_from_harness(harness: HarnessGit) -> list[ExcludedFile]:
    """What the excludes left out of a patch ``extract`` took: the excluded files that differ from base.

    ``extract`` never adds an excluded path, so the index still holds base's entries there (with their
    stat data, when seeded): the tracked ones changed are ``diff-files`` against it, the new ones the
    untracked files git would have added (``.gitignore`` applies, as it does to the patch).
    """
    changed = _numstat(harness.output("diff-files", "--numstat", "-z", "--no-renames", "--",
                                      *_excluded_pathspec()))
    new = harness.output("ls-files", "-z", "--others", "--exclude-standard", "--", *_excluded_pathspec())
    return changed + [_new_file(harness.work_tree, os.fsdecode(path)) for path in new.split(b"\0")
                      if path and not path.endswith(b"/")]  # "dir/": a nested repository, taken in as files


def excluded_from_workspace(workspace: Workspace) -> list[ExcludedFile]:
    """What the excludes left out of ``extract_patch``'s patch (its ``add -A`` staged them: the index has them)."""
    return _numstat(git_bytes("diff", "--cached", "--numstat", "-z", "--no-renames", workspace.base_commit, "--",
                              *_excluded_pathspec(), cwd=workspace.path))


@dataclass(frozen=True)
class Extraction:
    """A patch and what the harness had to do to make it."""

    patch: bytes
    #: Directories with a ``.git`` of their own, taken into the patch as files.
    nested_repositories: tuple[str, ...] = ()
    #: Files the arm changed that ``PATCH_EXCLUDES`` left out of the patch.
    excluded: tuple[ExcludedFile, ...] = ()


def extract(workspace: Path, base_commit: str, objects: Path, git_dir: Path,
            max_bytes: int | None = None) -> Extraction:
    """What the arm changed in ``workspace`` since ``base_commit``, with the harness's git dir ``git_dir``.

    ``git_dir`` lies outside the workspace (and outside anything the arm's sandbox can write). If it
    does not exist it is made, borrowing ``objects``, with base in its index; if it was seeded before
    the arm ran (``HarnessGit.seed_index``) only files whose stat changed are read again.
    Raise ``ExtractionError`` when the files cannot be read (the arm's doing, once it has run), and its
    ``OutputOverCap`` as soon as git has printed more than ``max_bytes`` of the patch (the rest is never read).
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
    patch = harness.output("diff", "--cached", *PATCH_OPTIONS, base_commit, "--", *pathspec, cap=max_bytes)
    # A changed gitlink's diff always shows its mode: without that mode no nested repository changed, and
    # the index need not be listed again (one git process fewer per cell).
    nested = gitlinks_changed(harness, base_commit) if GITLINK_MODE in patch else []
    if nested:
        take_in_as_files(harness, nested)
        patch = harness.output("diff", "--cached", *PATCH_OPTIONS, base_commit, "--", *pathspec, cap=max_bytes)
    return Extraction(patch, tuple(nested), tuple(excluded_from_harness(harness)))


#: A gitlink's mode, as a diff's header shows it (``new file mode 160000``, ``index a..b 160000``...).
GITLINK_MODE = b" 160000"


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
