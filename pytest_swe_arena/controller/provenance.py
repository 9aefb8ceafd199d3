"""What a sweep says about itself: its line of ``sweeps.jsonl``.

The controller appends one line when a sweep starts (``controller.ledger.append_sweep_record``):
the run id, when, the command line and the ``--arena-*`` options given (on it or in ini: the
sandbox and the meter among them, when given), the project's commit and whether its tree was
dirty, the host, the versions, the workers and the arms. ``summary.json`` and the viewer show it
(``results.records.read_sweep_record``), so a result names the code and command that made it.
"""

from __future__ import annotations

import platform
import socket
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from .. import __version__
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


def sweep_record(config: pytest.Config, run_id: str, arms: Sequence[str],
                 subset: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The sweep's line of ``sweeps.jsonl``; ``subset`` the instances ``--arena-exclude`` left out, and its file."""
    commit, dirty = project_commit(config.rootpath)
    workers = config.getoption("numprocesses", None) if config.pluginmanager.has_plugin("xdist") else None
    return {
        "run_id": run_id, "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": ["pytest", *config.invocation_params.args], "cwd": str(config.invocation_params.dir),
        "rootdir": str(config.rootpath), "project_commit": commit, "project_dirty": dirty,
        "host": socket.gethostname(), "plugin_version": __version__, "python": platform.python_version(),
        "pytest_version": pytest.__version__, "workers": workers, "arms": list(arms),
        "options": given_options(config), "subset": dict(subset) if subset else None,
    }
