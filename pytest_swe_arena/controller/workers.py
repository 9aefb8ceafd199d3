"""The controller's side of xdist: starting workers that make the controller's choices, and their last reports.

What the workers get from the controller in ``workerinput`` is ``state.hand_to_worker``'s.
"""

from __future__ import annotations

import dataclasses
import queue
from collections.abc import Iterator, Sequence
from typing import Any

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
