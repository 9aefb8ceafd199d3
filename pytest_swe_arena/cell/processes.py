"""Run a command in its own process group, with a timeout and no orphans.

The child starts a new session, so its process group can be signalled as a
whole. Every process started here also carries a unique ``ARENA_PROCESS_TOKEN``
in its environment: descendants that leave the group (``setsid``, double
forks, daemons) still inherit it, and a scan of ``/proc`` finds and kills
them. Output goes to files, never to memory.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import crossing
from ..interrupts import PROCESS_TOKEN_VARIABLE, holders_of, send_signal

POLL_SECONDS = 0.05


@dataclass(frozen=True)
class ProcessResult:
    """How a process ended. ``returncode`` is None when it had to be killed."""

    returncode: int | None
    timed_out: bool
    stopped: str | None  # why the harness stopped it early (e.g. "over_budget"), if it did
    seconds: float


def run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdout: Path,
    stderr: Path | None = None,
    timeout: float | None = None,
    grace: float = 5.0,
    should_stop: Callable[[], str | None] | None = None,
    stdin: Path | None = None,
    clock: Callable[[], float] = time.monotonic,
    pass_fds: Sequence[int] = (),
) -> ProcessResult:
    """Run ``argv`` to completion, or stop its whole tree on timeout or request.

    :param stderr: where stderr goes; None merges it into ``stdout``.
    :param should_stop: polled while the process runs; a non-empty reason stops
        the tree (SIGTERM, ``grace`` seconds, SIGKILL) and is returned in ``stopped``.
        It is asked once more after the process exits on its own, so a reason
        that arose between the last poll and the exit is still reported.
    :param pass_fds: descriptors the process inherits (the grading run's witness pipe).
    :param clock: the seconds ``timeout`` and ``seconds`` are measured in; a test passes
        a clock it moves itself, so that a busy machine cannot decide where the timeout falls.

    A ``KeyboardInterrupt`` (or any other exception) while waiting stops the tree
    the same way before it propagates, so Ctrl-C never leaves an agent running.
    """
    token = uuid.uuid4().hex
    child_env = dict(env)
    child_env[PROCESS_TOKEN_VARIABLE] = token
    started = clock()
    stdout.parent.mkdir(parents=True, exist_ok=True)
    # The logs are in a run dir the cell can write: opened through the crossing (a link there is refused).
    with crossing.writing(stdout.parent, stdout.name, "append") as out, \
            (crossing.writing(stderr.parent, stderr.name, "append") if stderr else open(os.devnull, "ab")) as err, \
            open(stdin or os.devnull, "rb") as inp:
        process = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=child_env,
            stdin=inp,
            stdout=out,
            stderr=err if stderr else subprocess.STDOUT,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    timed_out = killed = False
    stopped: str | None = None
    exited = _ExitWaiter(process)
    try:
        while True:
            try:
                exited(POLL_SECONDS)
            except subprocess.TimeoutExpired:
                pass
            else:
                # The last poll may have missed what the process did just before it exited.
                stopped = (should_stop() if should_stop else None) or None
                break
            if timeout is not None and clock() - started > timeout:
                timed_out = killed = True
                terminate_tree(process, token, grace)
                break
            reason = should_stop() if should_stop else None
            if reason:
                stopped, killed = reason, True
                terminate_tree(process, token, grace)
                break
    except BaseException:
        terminate_tree(process, token, grace)
        raise
    finally:
        exited.close()
        # Whatever the leader did, nothing it started may outlive it.
        kill_tree(process.pid, token)
    returncode = None if killed else process.returncode
    return ProcessResult(returncode, timed_out, stopped, clock() - started)


class _ExitWaiter:
    """Waits up to a timeout for a process to exit, woken the moment it does: through a pidfd where Linux has one
    (``Popen.wait`` with a timeout sleeps in steps of up to 50 ms, which every short graded run would pay)."""

    def __init__(self, process: subprocess.Popen[bytes]):
        self.process = process
        try:
            self.pidfd: int | None = os.pidfd_open(process.pid)
        except (AttributeError, OSError):  # not Linux 5.3+, or the process is gone already
            self.pidfd = None

    def __call__(self, timeout: float) -> None:
        """Return once the process has exited (reaped); ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        if self.pidfd is None:
            self.process.wait(timeout=timeout)
            return
        select.select([self.pidfd], [], [], timeout)
        if self.process.poll() is None:
            raise subprocess.TimeoutExpired(self.process.args, timeout)

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def terminate_tree(process: subprocess.Popen[bytes], token: str, grace: float) -> None:
    """SIGTERM the group and the token holders, wait ``grace``, then SIGKILL what is left."""
    _signal_group(process.pid, signal.SIGTERM)
    for pid in token_holders(token):
        send_signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if process.poll() is not None and not _group_alive(process.pid) and not token_holders(token):
            break
        time.sleep(POLL_SECONDS)
    kill_tree(process.pid, token)
    try:
        process.wait(timeout=grace + 5)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that ignores SIGKILL
        pass


def kill_tree(group: int, token: str) -> None:
    """SIGKILL the process group and every process carrying ``token``."""
    _signal_group(group, signal.SIGKILL)
    for _ in range(20):  # a dying parent may still fork; repeat until none are left
        holders = token_holders(token)
        if not holders:
            return
        for pid in holders:
            send_signal(pid, signal.SIGKILL)
        time.sleep(0.01)


def token_holders(token: str) -> list[int]:
    """Live processes whose environment carries ``ARENA_PROCESS_TOKEN=token``."""
    return holders_of(PROCESS_TOKEN_VARIABLE, token)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except (ProcessLookupError, PermissionError):
        pass
