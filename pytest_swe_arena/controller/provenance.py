"""What a sweep says about itself: its line of ``sweeps.jsonl``.

The controller appends one line when a sweep starts (``ledger.writer.append_sweep_record``):
the run id, when, the command line and the ``--arena-*`` options given (on it or in ini: the
sandbox and the meter among them, when given), the project's commit and whether its tree was
dirty, the host, the versions, the workers and the arms. ``summary.json`` and the viewer show it
(``ledger.reader.read_sweep_record``), so a result names the code and command that made it.
"""

from __future__ import annotations

import hashlib
import platform
import socket
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from .. import __version__
from ..naming import is_instance_file
from ..settings import given_options


def project_commit(root: Path) -> tuple[str | None, bool | None]:
    """The commit checked out at ``root`` and whether the tree differs from it; (None, None) outside git."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None, None
    status = git("status", "--porcelain", "--untracked-files=no")
    return commit.strip(), None if status is None else bool(status.strip())


def instance_file_digests(paths: Iterable[Path]) -> dict[str, str]:
    """The SHA-256 of every instance file among ``paths`` (files, or directories searched for them), by path.

    What a paper cites as "the instances": a later reader can check that their copy is byte for byte the one graded.
    """
    digests: dict[str, str] = {}
    for path in paths:
        files = sorted(found for found in path.rglob("*") if found.is_file() and is_instance_file(found)) \
            if path.is_dir() else [path]
        for file in files:
            try:
                digests[str(file)] = hashlib.sha256(file.read_bytes()).hexdigest()
            except OSError as error:
                digests[str(file)] = f"unreadable: {error.strerror or error}"
    return dict(sorted(digests.items()))


def sweep_record(config: pytest.Config, run_id: str, arms: Sequence[str],
                 subset: Mapping[str, Any] | None = None, instance_files: Iterable[Path] = ()) -> dict[str, Any]:
    """The sweep's line of ``sweeps.jsonl``; ``subset`` the instances ``--arena-exclude`` left out, and its file;
    ``instance_files`` the sweep's instance files and folders, digested."""
    commit, dirty = project_commit(config.rootpath)
    plugin_commit, plugin_dirty = project_commit(Path(__file__).resolve().parents[1])
    workers = config.getoption("numprocesses", None) if config.pluginmanager.has_plugin("xdist") else None
    return {
        "run_id": run_id, "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": ["pytest", *config.invocation_params.args], "cwd": str(config.invocation_params.dir),
        "rootdir": str(config.rootpath), "project_commit": commit, "project_dirty": dirty,
        "host": socket.gethostname(), "plugin_version": __version__, "python": platform.python_version(),
        "pytest_version": pytest.__version__, "workers": workers, "arms": list(arms),
        "options": given_options(config), "subset": dict(subset) if subset else None,
        "plugin_commit": plugin_commit, "plugin_dirty": plugin_dirty,
        "instance_files": instance_file_digests(instance_files),
    }
