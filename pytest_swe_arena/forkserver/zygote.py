"""The zygote: one process that has imported what every xdist worker imports, and forks the workers.

Run by the controller as ``python zygote.py`` (by path: importing ``pytest_swe_arena`` before
pytest's assertion-rewriting hook would make every worker warn that it cannot be rewritten), in a
session of its own (the terminal's Ctrl-C reaches the workers through their launchers, once), with
the controller's environment. Its stdin's first line is JSON: the socket to listen on, the rootdir
and ini file the workers get, and the controller's ``sys.path``. It warms up as a worker starts
(``warm_up``), listens, prints ``ready`` (or ``failed: WHY``), and serves launchers (``launcher.py``)
until its stdin closes: for each, it forks a worker that takes the launcher's stdio, directory and
environment and runs execnet's bootstrap (``run_worker``), and sends the launcher the worker's pid
and, when it ends, its wait status. It kills the worker of a launcher whose connection closes first.
The zygote itself runs no thread: a fork copies only the thread that calls it.
"""

from __future__ import annotations

import builtins
import gc
import importlib
import io
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import sys
import threading
import traceback
import types
from typing import NoReturn

#: What the arena's cell plugin imports in a worker (``plugin.pytest_configure``), what pytest-xdist
#: runs there, and what a worker imported later, by the end of its first cell, when measured (pdb by
#: pytest's debugging plugin, filelock by the workspace and environment locks); imported through
#: pytest's assertion-rewriting hook, as in a worker.
WORKER_MODULES = ("xdist.remote", "pytest_swe_arena.state", "pytest_swe_arena.arms.kinds",
                  "pytest_swe_arena.worker.fixtures", "pytest_swe_arena.worker.session",
                  "pdb", "filelock", "secrets")
#: Bytes of a launcher's request header (its length) and the most a request may hold.
LENGTH = struct.Struct("!I")
MAX_REQUEST = 16 * 1024 * 1024


def warm_up(rootdir: str, inifile: str | None, plugins: list[str]) -> None:
    """Import pytest, the default and entry-point plugins, and the worker modules, as a worker would.

    ``plugins`` are the controller's ``-p`` options (``-pNAME``, ``-pno:NAME``). pytest marks the
    modules of every ``pytest11`` distribution for assertion rewriting and warns
    about those imported before its hook: so they are imported here by a pytest config's own
    parse (with the rootdir and ini file the workers get, no conftest, no capture), through the
    hook it installs. A worker's own config installs its own hook, which accepts modules an
    earlier hook loaded. The hook is taken out again: the workers' configs own theirs.
    """
    from _pytest.config import get_config

    arguments = ["--noconftest", "--capture=no", f"--rootdir={rootdir}", *plugins]
    if inifile:
        arguments.append(f"--config-file={inifile}")
    config = get_config(arguments)
    before = list(sys.meta_path)
    config.parse(arguments, addopts=False)
    for name in WORKER_MODULES:
        importlib.import_module(name)
    sys.meta_path[:] = [finder for finder in sys.meta_path if finder in before]


class Bootstrap:
    """execnet's popen bootstrap: the line ``python -c`` runs, and the module source it reads first.

    The line reads one line from stdin (the source of ``execnet.gateway_base`` and a few lines that
    start the gateway) and runs it; the source part is compiled once, in the zygote, not in every worker.
    """

    def __init__(self) -> None:
        import inspect

        from execnet import gateway_base, gateway_io

        self.line = gateway_io.popen_bootstrapline
        self.source = inspect.getsource(gateway_base) + "\n"
        self.code = compile(self.source, "<string>", "exec")

    def run(self, command: str, namespace: dict[str, object]) -> None:
        """Run ``python -c command`` in ``namespace``."""
        if command != self.line:
            exec(command, namespace)
            return
        source = eval(sys.stdin.readline())  # what the bootstrap line does: a repr'd string
        if isinstance(source, str) and source.startswith(self.source):
            exec(self.code, namespace)
            source = source[len(self.source):]
        exec(source, namespace)


def run_worker(request: dict[str, object], fds: list[int], bootstrap: Bootstrap) -> NoReturn:
    """In the forked child: become the worker the launcher asked for, run execnet's bootstrap, exit."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(str(request["cwd"]))
        environment = request["environment"]
        assert isinstance(environment, dict)
        os.environ.clear()
        os.environ.update(environment)
        arguments = list(request["arguments"])  # type: ignore[call-overload]
        sys.dont_write_bytecode = "-B" in arguments
        sys.argv = ["-c"]
        # As ``python -u``: unbuffered stdout and stderr.
        sys.stdin = open(0, closefd=False)
        sys.stdout = io.TextIOWrapper(open(1, "wb", 0, closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(open(2, "wb", 0, closefd=False), write_through=True,
                                      errors="backslashreplace")
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        bootstrap.run(arguments[arguments.index("-c") + 1], main.__dict__)
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        # As the interpreter would end, without tearing down every module the zygote imported.
        try:
            threading._shutdown()  # type: ignore[attr-defined]
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class Zygote:
    """The serving loop: launchers in, workers forked, statuses back."""

    def __init__(self, listener: socket.socket, bootstrap: Bootstrap):
        self.listener = listener
        self.bootstrap = bootstrap
        self.selector = selectors.DefaultSelector()
        #: Each live worker's launcher connection, by the worker's pid.
        self.launchers: dict[int, socket.socket] = {}
        self.stopping = False
        wakeup_read, wakeup_write = os.pipe()
        os.set_blocking(wakeup_write, False)
        self.wakeup = wakeup_read
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(wakeup_write)
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.selector.register(0, selectors.EVENT_READ, "control")
        self.selector.register(wakeup_read, selectors.EVENT_READ, "child")

    def serve(self) -> None:
        while not (self.stopping and not self.launchers):
            for key, _ in self.selector.select():
                if key.data == "accept":
                    self.accept()
                elif key.data == "control":
                    self.stop()
                elif key.data == "child":
                    os.read(self.wakeup, 4096)
                    self.reap()
                else:
                    self.launcher_gone(key.data)

    def accept(self) -> None:
        connection, _ = self.listener.accept()
        try:
            connection.settimeout(10)
            request, fds = self.receive(connection)
        except (OSError, ValueError) as error:
            sys.stderr.write(f"swe-arena fork server: a launcher's request was refused: {error}\n")
            connection.close()
            return
        pid = os.fork()
        if pid == 0:
            self.listener.close()
            connection.close()
            for launcher in self.launchers.values():
                launcher.close()
            run_worker(request, fds, self.bootstrap)
        for fd in fds:
            os.close(fd)
        self.launchers[pid] = connection
        self.selector.register(connection, selectors.EVENT_READ, pid)
        try:
            connection.sendall(f"{pid}\n".encode())
        except OSError:
            self.launcher_gone(pid)

    @staticmethod
    def receive(connection: socket.socket) -> tuple[dict[str, object], list[int]]:
        header, fds, _, _ = socket.recv_fds(connection, LENGTH.size, 3)
        if len(fds) != 3 or len(header) != LENGTH.size:
            for fd in fds:
                os.close(fd)
            raise ValueError("expected a length and three file descriptors (stdin, stdout, stderr)")
        (length,) = LENGTH.unpack(header)
        if length > MAX_REQUEST:
            raise ValueError(f"a request of {length} bytes")
        payload = b""
        while len(payload) < length:
            chunk = connection.recv(length - len(payload))
            if not chunk:
                raise ValueError("the launcher closed the connection mid-request")
            payload += chunk
        return json.loads(payload), fds

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.launchers.pop(pid, None)
            if connection is not None:
                self.selector.unregister(connection)
                try:
                    connection.sendall(f"{status}\n".encode())
                except OSError:
                    pass
                connection.close()

    def launcher_gone(self, pid: int) -> None:
        """The launcher closed its connection (it died) while its worker runs: the worker goes too."""
        connection = self.launchers.pop(pid, None)
        if connection is None:
            return
        self.selector.unregister(connection)
        connection.close()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        """The controller is done (or gone): no new workers; the live ones are asked to end (SIGTERM)."""
        self.stopping = True
        self.selector.unregister(0)
        self.selector.unregister(self.listener)
        self.listener.close()
        for pid in self.launchers:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def main() -> None:
    setup = json.loads(sys.stdin.buffer.readline())
    sys.path[:] = setup["sys_path"]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the controller's; the workers get it from their launchers
    try:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(setup["socket"])
        listener.listen(256)
        warm_up(setup["rootdir"], setup["inifile"], setup["plugins"])
        bootstrap = Bootstrap()
        if threading.active_count() != 1:
            raise RuntimeError(f"{threading.active_count() - 1} thread(s) started while the plugins were imported, "
                               "and a fork copies none of them")
    except BaseException as error:
        print(f"failed: {type(error).__name__}: {error}".replace("\n", " "), flush=True)
        raise SystemExit(1) from None
    gc.collect()
    gc.freeze()  # what the zygote holds stays shared with the workers, untouched by their collections
    print("ready", flush=True)
    Zygote(listener, bootstrap).serve()
    # The socket's directory is the controller's, but a controller killed with SIGKILL cannot remove it.
    shutil.rmtree(os.path.dirname(setup["socket"]), ignore_errors=True)


if __name__ == "__main__":
    main()
