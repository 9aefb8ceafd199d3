"""Stopping a sweep: the tokens its processes carry, finding them, and Ctrl-C / SIGTERM.

Every process a sweep starts inherits ``ARENA_SWEEP_TOKEN`` (made by the controller, see
``new_sweep_token``), and every process ``cell.processes.run`` starts carries an
``ARENA_PROCESS_TOKEN`` of its own: descendants that leave their process group (``setsid``,
double forks, daemons) still inherit them, and a scan of ``/proc`` (``holders_of``) finds them.

After an interrupt, whatever still carries the sweep token (an agent whose worker was killed
before it could stop it) is terminated (``reap_sweep``), so no process outlives the sweep; the
lock records the token too, so the sweep that takes over from a controller killed with SIGKILL
stops the agents that controller left running. A second Ctrl-C (or SIGTERM) hurries the stop:
every agent is killed at once, and the bookkeeping of the stop still runs to its end
(``InterruptSignals``).

Both sides use this module: the controller stops its workers and reaps the sweep, a worker stops
the agents it runs.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

SWEEP_TOKEN_VARIABLE = "ARENA_SWEEP_TOKEN"
#: Carried by every process ``cell.processes.run`` starts, one token per run.
PROCESS_TOKEN_VARIABLE = "ARENA_PROCESS_TOKEN"


def new_sweep_token() -> str:
    """A random token (not the run id) for this sweep, inherited by xdist workers and every process they start."""
    token = uuid.uuid4().hex
    os.environ[SWEEP_TOKEN_VARIABLE] = token
    return token


def forget_sweep_token(token: str) -> None:
    """Take this sweep's token out of the environment again (a later session in this process is another sweep)."""
    if token and os.environ.get(SWEEP_TOKEN_VARIABLE) == token:
        del os.environ[SWEEP_TOKEN_VARIABLE]


def stop_signals(sweep_token: str, controller: bool) -> InterruptSignals:
    """The sweep's SIGINT/SIGTERM handling: a second signal kills the agents at once.

    The controller also passes the hurry on to its workers. Only workers see one Ctrl-C twice
    (from the terminal and from the controller), so only they count a quick repeat once.
    """
    def hurry() -> None:
        if controller:
            forward_interrupt(sweep_token)
        hurry_sweep(sweep_token)

    return InterruptSignals(hurry, repeat_window=0.0 if controller else InterruptSignals.REPEAT_WINDOW)


class InterruptSignals:
    """SIGINT and SIGTERM: the first raises KeyboardInterrupt, every later one hurries the stop.

    The first signal stops the sweep the ordinary way: each agent gets SIGTERM and its grace.
    From then on (and once the session's finish has begun, see ``begin_stop``) a signal never
    raises: an exception there would skip the bookkeeping of the stop (the ``interrupted``
    rows, the summary, the lock). It hurries the stop instead: ``on_hurry`` runs (it kills the
    sweep's agents at once, without grace) and ``hurried`` is set, which cuts the stop's own
    waits short.

    A repeat within ``repeat_window`` seconds counts once: a terminal's Ctrl-C reaches every
    process of the foreground group and the controller also forwards it to its workers, so a
    worker sees one Ctrl-C twice. The controller sees each Ctrl-C once and counts them all.
    """

    REPEAT_WINDOW = 1.0

    def __init__(self, on_hurry: Callable[[], object] | None = None, repeat_window: float = REPEAT_WINDOW) -> None:
        self.on_hurry = on_hurry
        self.repeat_window = repeat_window
        self.last = -repeat_window
        self.received = 0
        self.previous: dict[int, Any] = {}
        self.deferring = 0
        self.pending: int | None = None
        #: Set from the first signal on (or by ``begin_stop``): later signals hurry, never raise.
        self.stopping = False
        self.hurried = threading.Event()

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            self.previous[signum] = signal.signal(signum, self._handle)

    def uninstall(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous.clear()

    def begin_stop(self) -> None:
        """The session is ending: from now on a signal hurries the stop instead of raising."""
        self.stopping = True

    def hurry(self) -> None:
        """Stop now: run ``on_hurry`` and set ``hurried``."""
        self.hurried.set()
        if self.on_hurry is not None:
            try:
                self.on_hurry()
            except OSError:  # pragma: no cover - /proc vanished under us: the stop's own reaping remains
                pass

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if now - self.last < self.repeat_window:
            return
        self.last = now
        self.received += 1
        if self.stopping:
            self.hurry()
            return
        self.stopping = True
        if self.deferring:
            self.pending = signum
            return
        raise KeyboardInterrupt(signal.Signals(signum).name)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold off a SIGINT/SIGTERM until the block is done, then raise it.

        Python runs signal handlers in the main thread only, whichever thread the
        signal hit, so remembering the signal here defers it for sure (a blocked
        signal mask would not: other threads would take it, or it would fire the
        moment the mask is restored). Nested blocks raise at the outermost exit.
        """
        self.deferring += 1
        try:
            yield
        finally:
            self.deferring -= 1
            if not self.deferring and self.pending is not None:
                signum, self.pending = self.pending, None
                raise KeyboardInterrupt(signal.Signals(signum).name)


def forward_interrupt(token: str) -> None:
    """Send SIGINT to this process's children that belong to the sweep (its xdist workers)."""
    me = os.getpid()
    for pid in holders_of(SWEEP_TOKEN_VARIABLE, token):
        if _parent_of(pid) == me:
            send_signal(pid, signal.SIGINT)


def reap_sweep(token: str, grace: float = 10.0, hurry: threading.Event | None = None) -> list[int]:
    """Terminate every process still carrying the sweep token; return the pids found.

    SIGTERM, up to ``grace`` seconds, SIGKILL; the wait ends early once ``hurry`` is set.
    """
    me = os.getpid()
    found = [pid for pid in holders_of(SWEEP_TOKEN_VARIABLE, token) if pid != me]
    for pid in found:
        send_signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    hurry = hurry or threading.Event()
    while time.monotonic() < deadline and not hurry.is_set() and any(
        pid in holders_of(SWEEP_TOKEN_VARIABLE, token) for pid in found
    ):
        hurry.wait(0.1)
    for pid in holders_of(SWEEP_TOKEN_VARIABLE, token):
        if pid != me:
            send_signal(pid, signal.SIGKILL)
    return found


def hurry_sweep(token: str) -> list[int]:
    """SIGKILL, now, every process of the sweep that ``proc.run`` started on this host; return their pids.

    What a second Ctrl-C does: the agents (and any verify run) end without grace. The xdist
    workers carry the sweep token but no process token of their own, so they live on to
    report and to finish the bookkeeping. A dying parent may still fork: repeat until none is left.
    """
    killed: list[int] = []
    for _ in range(20):
        found = holders_of(SWEEP_TOKEN_VARIABLE, token, started_by_run=True)
        if not found:
            break
        for pid in found:
            send_signal(pid, signal.SIGKILL)
        killed += [pid for pid in found if pid not in killed]
        time.sleep(0.01)
    return killed



def send_signal(pid: int, signum: int) -> None:
    """Signal ``pid``; one that is gone (or no longer ours) is no error."""
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def holders_of(variable: str, token: str, *, started_by_run: bool = False) -> list[int]:
    """Live processes whose environment carries ``variable=token`` (Linux /proc).

    :param started_by_run: only those that ``cell.processes.run`` started (or their descendants): their
        ``ARENA_PROCESS_TOKEN`` is not this process's own.
    """
    needle = f"{variable}={token}".encode()
    own = f"{PROCESS_TOKEN_VARIABLE}={os.environ.get(PROCESS_TOKEN_VARIABLE, '')}".encode()
    prefix = f"{PROCESS_TOKEN_VARIABLE}=".encode()
    found: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    me = str(os.getpid())
    # Called after every process a cell runs, over every process of the machine: plain reads, and the
    # environment split only where the token's bytes appear at all.
    for name in os.listdir(proc):
        if not name.isdigit() or name == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as file:
                data = file.read()
            if needle not in data:
                continue
            environ = data.split(b"\0")
            if needle not in environ or _is_zombie(proc / name):
                continue
            if started_by_run and not any(item.startswith(prefix) and item != own for item in environ):
                continue
            found.append(int(name))
        except OSError:
            continue
    return found


def _is_zombie(entry: Path) -> bool:
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"
