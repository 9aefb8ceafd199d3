"""The isolated cell environment: a private HOME and XDG tree per cell.

Two cells running at once never share agent state: each gets its own HOME,
XDG config/data/cache/state/runtime dirs, TMPDIR, PYTHONUSERBASE and opencode
config/database paths under the cell's root (mode 0700), a fresh directory
under pytest's basetemp that the ``arena_cell_env`` fixture removes after the
cell, with the harness's folder beside it (on a thread of its own, ``DirectoryRemover``,
so the next cell need not wait; renamed at once, so no later cell meets it); the
logs to keep go to ``root/run`` and travel to the controller on the report. PYTHONHOME,
PYTHONPATH, the other ``REMOVED_VARIABLES`` and every ``PYTEST_*`` variable are removed so
the harness's Python and pytest setup does not leak in.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: Variables that would make a cell see the harness's (or the user's) state.
REMOVED_VARIABLES = ("PYTHONHOME", "PYTHONPATH", "VIRTUAL_ENV", "OPENCODE_CONFIG_CONTENT")
#: And every variable of the harness's own pytest (PYTEST_ADDOPTS, PYTEST_XDIST_WORKER, PYTEST_DEBUG_TEMPROOT,
#: PYTEST_VERSION, ...): the graded tests run their own pytest, configured by the instance alone.
REMOVED_PREFIX = "PYTEST_"

_PRIVATE_DIRS = {
    "HOME": "home",
    "XDG_CONFIG_HOME": "xdg/config",
    "XDG_DATA_HOME": "xdg/data",
    "XDG_CACHE_HOME": "xdg/cache",
    "XDG_STATE_HOME": "xdg/state",
    "XDG_RUNTIME_DIR": "xdg/runtime",
    "TMPDIR": "tmp",
    "PYTHONUSERBASE": "pyuser",
}
#: Every folder of a cell's tree, each after its parent: one mkdir apiece.
_CELL_FOLDERS = ("home", "xdg", "xdg/config", "xdg/config/opencode", "xdg/data", "xdg/cache", "xdg/state",
                 "xdg/runtime", "tmp", "pyuser", "run")


@dataclass(frozen=True)
class CellEnvironment:
    """A cell's private directories and the environment its processes get.

    ``run_dir`` holds the logs the controller will copy to ``runs/<iid>/<ARM>/``;
    ``root`` holds the private HOME/XDG tree and the workspace.
    """

    root: Path
    run_dir: Path
    variables: Mapping[str, str] = field(repr=False)

    @property
    def home(self) -> Path:
        return Path(self.variables["HOME"])

    @property
    def opencode_db(self) -> Path:
        return Path(self.variables["OPENCODE_DB"])

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for a process of this cell, with ``extra`` on top."""
        merged = dict(self.variables)
        if extra:
            merged.update(extra)
        return merged


def create_cell_environment(root: Path, base: Mapping[str, str] | None = None) -> CellEnvironment:
    """Create the private tree under ``root`` and the environment that points into it."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(root, 0o700)
    variables = {k: v for k, v in (base if base is not None else os.environ).items()
                 if k not in REMOVED_VARIABLES and not k.startswith(REMOVED_PREFIX)}
    for relative in _CELL_FOLDERS:
        with contextlib.suppress(FileExistsError):
            os.mkdir(root / relative, 0o700)
    for name, relative in _PRIVATE_DIRS.items():
        variables[name] = str(root / relative)
    variables["OPENCODE_CONFIG"] = str(root / "xdg/config/opencode/opencode.json")
    variables["OPENCODE_DB"] = str(root / "xdg/data/opencode/opencode.db")
    variables["PATH"] = cell_search_path(variables.get("PATH"))
    return CellEnvironment(root=root, run_dir=root / "run", variables=variables)


def cell_search_path(path: str | None = None) -> str:
    """A cell's ``PATH``: the harness's interpreter's directory, then ``path`` (the harness's ``PATH``).

    ``python`` in a verify command means the harness's interpreter unless an instance environment
    puts its own first; an arm's program is looked up on this too (``programs.resolve_program``).
    """
    base = path if path is not None else os.environ.get("PATH", os.defpath)
    return os.pathsep.join([os.path.dirname(sys.executable), base])


class DirectoryRemover:
    """Removes finished cells' directories on a thread of its own, off the cells' path.

    ``remove`` renames the directory at once (so nothing can mistake it for a live cell's)
    and queues it; the thread deletes it while the next cell runs. ``close`` waits for the
    queue to empty: every directory is gone when the worker's session ends.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue[Path | None] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="arena-cell-remover", daemon=True)
        self._thread.start()

    def remove(self, root: Path) -> None:
        doomed = root.with_name(f".{root.name}.removing")
        try:
            os.rename(root, doomed)
        except OSError:
            doomed = root  # renaming failed (gone already, say): remove it where it is
        self._queue.put(doomed)

    def _work(self) -> None:
        while (path := self._queue.get()) is not None:
            shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
