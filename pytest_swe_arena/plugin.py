"""Hook wiring for pytest-swe-arena: the hook specs, the options, and the two plugin objects.

The plugin is inert unless the user asks for a sweep (an ``--arena-*`` option, an
``arena_*`` ini value, or a ``[tool.swe_arena]`` table), so installing it changes nothing
for other projects: nothing beyond ``settings`` is imported then. When it is on, every
process gets the cell plugin (``worker.session.CellPlugin``) and the fixtures, and the
process without ``workerinput`` (xdist's controller, or the only process) also gets the
controller plugin (``controller.recorder.ControllerPlugin``), as pytest-xdist and junitxml
register theirs. The arm kinds of ``arms/`` are plugins too.
"""

from __future__ import annotations

import pytest


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    from .settings import add_options

    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from .settings import load_settings

    settings = load_settings(config)
    if not settings.enabled:
        return
    from .arms.kinds import builtin_kind_plugins
    from .state import STATE_KEY, open_state
    from .worker import fixtures
    from .worker.session import CellPlugin

    state = config.stash[STATE_KEY] = open_state(config, settings)
    manager = config.pluginmanager
    for kinds in builtin_kind_plugins():
        if manager.get_plugin(kinds.plugin_name) is None:
            manager.register(kinds, kinds.plugin_name)
    manager.register(fixtures, "swe-arena-fixtures")
    if not hasattr(config, "workerinput"):
        # Imported here: a worker never records, and every worker's start-up delays the sweep's first cell.
        from .controller.recorder import ControllerPlugin

        manager.register(ControllerPlugin(config, state), "swe-arena-controller")
    manager.register(CellPlugin(config, state), "swe-arena-cells")
