"""The controller's side of xdist: starting workers that make the controller's choices, their last
reports, and losing hosts.

What the workers get from the controller in ``workerinput`` is ``state.hand_to_worker``'s.
"""

from __future__ import annotations

import copy
import dataclasses
import queue
from collections.abc import Callable, Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import execnet
import pytest


def pin_worker_rootdir(config: pytest.Config, specs: Sequence[Any]) -> None:
    """Start xdist workers on this host with the controller's rootdir and ini file.

    xdist gives each worker the controller's command line, and the worker redoes pytest's
    rootdir choice from it, at a later time: a path on that line that did not exist when the
    controller started (an out dir it created since) can make the worker choose another
    rootdir, read another ini file, and collect something else. ``--rootdir`` and ``-c`` in
    front of the command line (where the user's own, if any, still win) make the choice the
    controller's. Workers on other hosts (or in another directory) keep their own choice.
    """
    if not specs or not all(spec.popen and not spec.chdir and not spec.via for spec in specs):
        return
    pinned = [f"--rootdir={config.rootpath}"]
    if config.inipath is not None:
        pinned.append(f"--config-file={config.inipath}")
    params = config.invocation_params
    config.invocation_params = dataclasses.replace(params, args=(*pinned, *params.args))


def is_local_spec(spec: Any) -> bool:
    """Whether an xdist gateway spec starts its worker on this host (``popen`` without ``via``)."""
    return bool(spec.popen and not spec.via)


class LostHosts:
    """Keeps a sweep going when a host drops: its workers are not replaced, the other hosts run the rest.

    When a worker dies, pytest-xdist reports the cell it was running as crashed (a harness
    error row, which ``--arena-resume`` runs again), hands the cells queued on it to the other
    workers, and replaces it with a new worker on the same ``--tx`` spec. On a host that is gone
    (sshd killed, network cut, powered off) that new gateway cannot be made: execnet raises
    ``HostNotFound`` inside xdist's loop and the whole sweep ends in an INTERNALERROR. Here the
    replacement is tried once per host; when it fails the host is lost for the rest of the sweep
    and its other workers are not replaced either (each try could wait out ssh's ConnectTimeout).

    pytest-xdist has no hook for this: ``DSession._clone_node`` (pytest-xdist 3.x) is wrapped on
    the instance.
    """

    def __init__(self, dsession: Any, note: Callable[[str], None]):
        self.dsession = dsession
        self.note = note
        self.clone = dsession._clone_node
        #: Each host that could not be reached (as ``host_of`` names it), and why.
        self.lost: dict[str, str] = {}

    @classmethod
    def watch(cls, config: pytest.Config, note: Callable[[str], None]) -> LostHosts | None:
        dsession = config.pluginmanager.get_plugin("dsession")
        if dsession is None or not hasattr(dsession, "_clone_node"):
            return None
        watcher = cls(dsession, note)
        dsession._clone_node = watcher.replace
        return watcher

    def replace(self, node: Any) -> Any | None:
        """A new worker for the dead ``node``, or None when its host is gone."""
        spec = node.gateway.spec
        host = host_of(spec)
        if host in self.lost:
            self.note(f"worker {node.gateway.id} on lost host {host} is not replaced")
            return self.not_replaced()
        try:
            return self.clone(node)
        except (execnet.HostNotFound, OSError, EOFError) as error:
            self.lost[host] = f"{type(error).__name__}: {error}"
            self.note(f"host {host} is lost ({self.lost[host]}): worker {node.gateway.id} is not replaced, "
                      "its cell in flight is a harness error (run again by --arena-resume), "
                      "the cells queued on it go to the other workers")
            return self.not_replaced()

    def not_replaced(self) -> Any | None:
        """After a worker of a lost host is not replaced: finish the sweep, or start a worker elsewhere.

        xdist undid its shutdown to bring the replacement up, and handed the lost worker's queued
        cells to the others. With every cell done, shut down again (else the last worker of a lost
        host, going down after the others finished, leaves xdist with no worker: "Unexpectedly no
        active workers available"). When cells are left and every other worker was already told to
        shut down or finished (a silent host is found dead only after ssh's keep-alives), start one
        worker on a host that is still there (the first of its ``--tx`` specs), which takes them.
        """
        sched = self.dsession.sched
        if sched is None:
            return None
        if sched.tests_finished:
            self.dsession.triggershutdown()
            return None
        if any(not node.shutting_down for node in sched.nodes):
            return None  # a worker still takes cells: it takes these
        spares = [spec for spec in self.dsession.nodemanager.specs if host_of(spec) not in self.lost]
        if not spares:
            return None  # every host is lost: xdist ends the sweep
        spec = copy.copy(spares[0])
        self.note(f"the cells left go to a new worker on {host_of(spec)}")
        try:
            return self.clone(SimpleNamespace(gateway=SimpleNamespace(spec=spec)))
        except (execnet.HostNotFound, OSError, EOFError) as error:
            self.lost[host_of(spec)] = f"{type(error).__name__}: {error}"
            self.note(f"host {host_of(spec)} is lost too ({self.lost[host_of(spec)]})")
            return self.not_replaced()


def host_of(spec: Any) -> str:
    """Where a gateway spec starts its worker: ``ssh=HOST``, ``socket=ADDRESS``, or ``popen`` (this host)."""
    for kind in ("ssh", "socket", "vagrant_ssh"):
        value = getattr(spec, kind, None)
        if value:
            return f"{kind}={value}"
    return "popen" + (f" via {spec.via}" if spec.via else "")


def late_reports(session: pytest.Session) -> Iterator[pytest.TestReport]:
    """Cell reports xdist's workers sent while the sweep was stopping, which xdist no longer reads.

    An agent arm stopped by Ctrl-C still reports its cell (``interrupted``, with what the agent
    spent and its transcript): that report must not lose to the pending row's unknown spend.
    """
    events = getattr(session.config.pluginmanager.get_plugin("dsession"), "queue", None)
    while events is not None:
        try:
            name, arguments = events.get_nowait()
        except queue.Empty:
            return
        if name == "testreport":
            yield arguments["rep"]
