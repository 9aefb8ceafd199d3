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


#: A host is lost when its workers crash this many times per worker it runs, in a row (no cell of it
#: finished in between): a host whose workers cannot start (no plugin, a broken environment) or
#: die in every cell. pytest-xdist would replace them forever (it bounds restarts only for ``-n``).
CRASHES_PER_WORKER = 2


class LostHosts:
    """Keeps a sweep going when a host drops: its workers are not replaced, the other hosts run the rest.

    When a worker dies, pytest-xdist reports the cell it was running as crashed (a harness
    error row, which ``--arena-resume`` runs again), hands the cells queued on it to the other
    workers, and replaces it with a new worker on the same ``--tx`` spec. A host is lost, and
    its workers are no longer replaced, when that cannot work:

    - the host is gone (sshd killed, network cut, powered off): the new gateway cannot be made
      (execnet raises ``HostNotFound`` inside xdist's loop, and the whole sweep would end in an
      INTERNALERROR); the replacement is tried once per host, since each try could wait out
      ssh's ConnectTimeout;
    - its workers keep crashing (``CRASHES_PER_WORKER`` crashes per worker of the host in a row,
      with no cell finished on it in between): a host whose Python lacks the plugin, whose
      workers die at start-up, or in every cell. xdist would replace them forever.

    When every host is lost the sweep ends (cleanly: its rows and summary are written), and the
    cells that did not run are left to ``--arena-resume``.

    A worker of a lost host that never collected is one collection fewer for the scheduler to
    wait for, so the other hosts' workers start. Registered as a plugin (``pytest_testnodedown``
    gives the crash's error); pytest-xdist has no hook for replacing a worker:
    ``DSession._clone_node`` (pytest-xdist 3.x) is wrapped on the instance.
    """

    def __init__(self, dsession: Any, note: Callable[[str], None]):
        self.dsession = dsession
        self.note = note
        self.clone = dsession._clone_node
        #: Each host that could not be reached (as ``host_of`` names it), and why.
        self.lost: dict[str, str] = {}
        #: Per host, its workers' crashes since a cell last finished on it.
        self.crashes: dict[str, int] = {}
        #: Why each worker went down (xdist's error), until its replacement is decided.
        self.errors: dict[Any, str] = {}
        #: The workers that sent their collection.
        self.collected: set[Any] = set()

    @classmethod
    def watch(cls, config: pytest.Config, note: Callable[[str], None]) -> LostHosts | None:
        dsession = config.pluginmanager.get_plugin("dsession")
        if dsession is None or not hasattr(dsession, "_clone_node"):
            return None
        watcher = cls(dsession, note)
        dsession._clone_node = watcher.replace
        config.pluginmanager.register(watcher, "arena-lost-hosts")
        return watcher

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        if error is not None:
            self.errors[node] = str(error)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any) -> None:
        self.collected.add(node)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)
        if node is not None and report.when == "teardown":
            self.crashes[host_of(node.gateway.spec)] = 0  # a cell finished there: the host works

    def replace(self, node: Any) -> Any | None:
        """A new worker for the dead ``node``, or None when its host is lost."""
        host = host_of(node.gateway.spec)
        error = last_line(self.errors.pop(node, "") or "no error given")
        if host in self.lost:
            self.note(f"worker {node.gateway.id} on lost host {host} is not replaced")
            return self.not_replaced(node)
        self.crashes[host] = self.crashes.get(host, 0) + 1
        workers = sum(host_of(spec) == host for spec in self.dsession.nodemanager.specs)
        # The controller's own host is never lost this way: xdist bounds its restarts (-n), and
        # without it no worker would be left to run the sweep.
        if not is_local_spec(node.gateway.spec) and self.crashes[host] >= CRASHES_PER_WORKER * workers:
            started = "at start-up" if node not in self.collected else "in a row"
            return self.lose(host, f"its workers crashed {self.crashes[host]} times {started}, last: {error}", node)
        try:
            return self.clone(node)
        except (execnet.HostNotFound, OSError, EOFError) as problem:
            return self.lose(host, f"{type(problem).__name__}: {problem}", node)

    def lose(self, host: str, why: str, node: Any) -> Any | None:
        self.lost[host] = why
        self.note(f"host {host} is lost ({why}): worker {node.gateway.id} is not replaced, "
                  "its cell in flight is a harness error (run again by --arena-resume), "
                  "the cells queued on it go to the other workers")
        return self.not_replaced(node)

    def not_replaced(self, node: Any) -> Any | None:
        """After ``node``, a worker of a lost host, is not replaced: go on with the other workers.

        A worker that never collected is one the scheduler need not wait for: the cells are
        handed out once the others have. xdist undid its shutdown to bring the replacement up,
        and handed the lost worker's queued cells to the others. With every cell done, shut down
        again (else the last worker of a lost host, going down after the others finished, leaves
        xdist with no worker: "Unexpectedly no active workers available"). When cells are left
        and every other worker was already told to shut down or finished (a silent host is found
        dead only after ssh's keep-alives), start one worker on a host that is still there (the
        first of its ``--tx`` specs), which takes them.
        """
        sched = self.dsession.sched
        if sched is None:
            return None
        if node not in self.collected and sched.numnodes > 1:
            sched.numnodes -= 1
            if sched.nodes and sched.collection_is_completed:
                sched.schedule()
        if sched.tests_finished:
            self.dsession.triggershutdown()
            return None
        if any(not other.shutting_down for other in self.dsession._active_nodes if other is not node):
            return None  # a worker still takes cells (or is starting): it takes these
        spares = [spec for spec in self.dsession.nodemanager.specs if host_of(spec) not in self.lost]
        if not spares:
            # Shut down now: with this worker gone xdist's loop ends instead of failing for want of workers.
            self.note("every host is lost: the sweep ends, the cells that did not run have no row "
                      "(--arena-resume runs them)")
            self.dsession.triggershutdown()
            return None
        spec = copy.copy(spares[0])
        self.note(f"the cells left go to a new worker on {host_of(spec)}")
        try:
            return self.clone(SimpleNamespace(gateway=SimpleNamespace(spec=spec)))
        except (execnet.HostNotFound, OSError, EOFError) as error:
            self.lost[host_of(spec)] = f"{type(error).__name__}: {error}"
            self.note(f"host {host_of(spec)} is lost too ({self.lost[host_of(spec)]})")
            return self.not_replaced(node)


def last_line(text: str, limit: int = 300) -> str:
    """The last non-blank line of an error (a traceback's says what went wrong), at most ``limit`` characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = lines[-1] if lines else text.strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


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
