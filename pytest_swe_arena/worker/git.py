"""The harness's git: every git call of a cell goes through ``git()`` (or ``run_git``).

It ignores the user's global and system git config (``diff.noprefix``, ``core.excludesFile``,
hooks, signing...) and commits as ``swe-arena``, so no setting of the machine shapes a workspace,
a snapshot or a patch.
"""

from __future__ import annotations

import os
import subprocess
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
