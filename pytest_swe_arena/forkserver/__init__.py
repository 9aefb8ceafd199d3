"""Local xdist workers forked from one warmed-up process (a fork server) instead of started afresh.

A new worker pays for a Python interpreter, the imports of pytest, execnet, xdist and every
plugin, and its collection; at ``-n 32`` on two cores that is seconds before the first cell, and
xdist hands out no cell until every worker has collected. With the fork server (the default,
``--arena-worker-start=fork``) the controller starts one process, the zygote (``zygote.py``),
that imports all of that once, and every local worker (``-n N``, ``--tx popen``) is a fork of it:
the popen spec's ``python=`` names a launcher (``launcher.py``, a few milliseconds to start) that
hands its stdio to the zygote and stands in for the worker, so execnet, pytest-xdist and the
sweep's signals (Ctrl-C, SIGTERM, kill) treat it as the worker they started. Workers on other
hosts (ssh, socket) and popen specs that name their own ``python=`` start as before.

If the zygote cannot start, the workers start as new interpreters and the controller says so
in one line; if it dies mid-sweep, the next launcher says so and every later worker starts
afresh.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from selectors import EVENT_READ, DefaultSelector
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
#: Seconds the zygote may take to import everything a worker imports (a loaded machine's worst case).
READY_TIMEOUT = 60.0


def forkable(spec: Any) -> bool:
    """Whether a worker of this xdist spec can be a fork: popen on this host, with the controller's Python."""
    return bool(spec.popen and not spec.via and not spec.python)


class ForkServer:
    """The controller's side: the zygote process, the launcher command, and stopping both at the end."""

    def __init__(self, process: subprocess.Popen[bytes], directory: Path):
        self.process = process
        self.directory = directory

    @classmethod
    def start(cls, config: pytest.Config, specs: Sequence[Any], note: Callable[[str], None]) -> ForkServer | None:
        """Start the zygote and point the forkable specs at the launcher; None (and a note) when it cannot start."""
        local = [spec for spec in specs if forkable(spec)]
        if not local:
            return None
        directory = Path(tempfile.mkdtemp(prefix="swe-arena-fork-"))
        socket_path = directory / "zygote.sock"
        # The controller's -p choices (its command line's and addopts'), so the zygote imports no plugin
        # the workers block, and those they are told to load.
        plugins = [f"-p{name}" for name in config.known_args_namespace.plugins or ()]
        setup = {"socket": str(socket_path), "rootdir": str(config.rootpath), "plugins": plugins,
                 "inifile": str(config.inipath) if config.inipath else None, "sys_path": sys.path}
        try:
            process = subprocess.Popen([sys.executable, str(HERE / "zygote.py")], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, start_new_session=True)
        except OSError as error:
            shutil.rmtree(directory, ignore_errors=True)
            note(f"the worker fork server could not start ({error}): workers start as new interpreters")
            return None
        server = cls(process, directory)
        assert process.stdin is not None
        process.stdin.write(json.dumps(setup).encode() + b"\n")
        process.stdin.flush()
        why = server.wait_ready()
        if why is not None:
            server.stop()
            note(f"the worker fork server did not start ({why}): workers start as new interpreters")
            return None
        launcher = [sys.executable, "-S", "-E", str(HERE / "launcher.py"), str(socket_path),
                    str(directory / "fell-back")]
        for spec in local:
            spec.python = shlex.join(launcher)
        config.pluginmanager.register(server, "swe-arena-fork-server")
        return server

    def wait_ready(self) -> str | None:
        """None once the zygote says ``ready``; else why not."""
        assert self.process.stdout is not None
        with DefaultSelector() as selector:
            selector.register(self.process.stdout, EVENT_READ)
            if not selector.select(READY_TIMEOUT):
                return f"not ready after {READY_TIMEOUT:g} s"
        line = self.process.stdout.readline().decode(errors="replace").strip()
        if line == "ready":
            return None
        status = self.process.wait()
        return line.removeprefix("failed: ") or f"it exited with status {status}"

    def stop(self) -> None:
        """Close the zygote's stdin (it stops, once its workers are gone) and remove its socket's directory."""
        if self.process.returncode is None:
            assert self.process.stdin is not None
            try:
                self.process.stdin.close()
            except OSError:
                pass
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)

    def pytest_unconfigure(self) -> None:
        self.stop()
