"""The controller's side of xdist: starting workers that make the controller's choices.

What the workers get from the controller in ``workerinput`` is ``state.hand_to_worker``'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
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
