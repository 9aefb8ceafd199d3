"""Bare mirrors under --arena-repos, for rows that name their repository by ``repo`` (SWE-bench exports).

``swe-arena mirror`` makes them; ``loading.resolve_source`` finds them (``owner__name.git`` is one of the
names it looks for).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


class MirrorError(Exception):
    """A source that cannot be mirrored: the message names it and what would be accepted."""


def repo_of(source: str) -> str:
    """``owner/name`` of a URL (``https://github.com/psf/requests.git``, ``git@host:psf/requests``) or of a
    local clone (from its ``origin`` remote)."""
    location = source
    if "://" not in source and not re.match(r"^[\w.-]+@[\w.-]+:", source):
        clone = Path(source)
        if not clone.exists():
            raise MirrorError(f"{source}: not a URL and no such directory (expected a repository URL or a clone)")
        origin = subprocess.run(["git", "-C", str(clone), "config", "--get", "remote.origin.url"],
                                capture_output=True, text=True, check=False).stdout.strip()
        if not origin:
            raise MirrorError(f"{source}: a clone without an 'origin' remote does not say which repository it is; "
                              "give it with --repo OWNER/NAME")
        location = origin
    parts = [part for part in re.split(r"[/:]", location.rstrip("/")) if part]
    if len(parts) < 2:
        raise MirrorError(f"{source}: cannot tell OWNER/NAME from {location!r}; give it with --repo OWNER/NAME")
    name = parts[-1].removesuffix(".git")
    return f"{parts[-2]}/{name}"


def mirror_path(repos_dir: Path, repo: str) -> Path:
    """Where the mirror of ``repo`` (``owner/name``) lives under ``repos_dir``."""
    owner, _, name = repo.partition("/")
    if not owner or not name or "/" in name:
        raise MirrorError(f"{repo!r} is not OWNER/NAME (as a row's 'repo' field, e.g. psf/requests)")
    return repos_dir / f"{owner}__{name}.git"


def make_mirror(repos_dir: Path, source: str, repo: str | None = None) -> tuple[Path, bool]:
    """Clone ``source`` as a bare mirror under ``repos_dir`` (or fetch into the one there); the mirror and
    whether it was new."""
    target = mirror_path(repos_dir, repo or repo_of(source))
    if target.exists():
        command = ["git", "-C", str(target), "fetch", "--quiet", "--prune", "origin", "+refs/*:refs/*"]
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        command = ["git", "clone", "--quiet", "--mirror", source, str(target)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise MirrorError(f"{source}: `{' '.join(command)}` failed: {done.stderr.strip() or done.returncode}")
    return target, command[1] == "clone"
