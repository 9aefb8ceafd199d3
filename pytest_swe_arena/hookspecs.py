"""Hooks other plugins (or a suite's conftest) implement to extend the arena."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .arms.base import ArmKind


@pytest.hookspec
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    """Return arm kinds this plugin provides, as ``{"kind-name": factory}``.

    A factory is called as ``factory(spec, suite)`` with the arm's ``ArmSpec``
    and the parsed ``Suite``, and returns an object with ``spec`` and
    ``run(request) -> ArmResult`` (see ``pytest_swe_arena.arms.base.Arm``); it
    raises ``ArmConfigError`` for bad settings. Called once per session on the
    controller and on every worker; define it in a plugin or the rootdir conftest.
    """
    raise NotImplementedError


@pytest.hookspec(firstresult=True)
def pytest_arena_load_instances(path: Path, config: pytest.Config) -> list[tuple[int, Any]] | None:
    """Read the rows of an instance file as ``[(line, row), ...]``, or None to let others try.

    The built-in loader reads JSON Lines and JSON arrays; rows are validated
    against the instance schema afterwards, whoever loaded them. Runs wherever
    collection runs (each xdist worker).
    """
    raise NotImplementedError


@pytest.hookspec
def pytest_arena_cell_finished(row: Mapping[str, Any], config: pytest.Config) -> None:
    """Called on the controller after a cell's row is in the ledger (plain JSON data)."""
    raise NotImplementedError
