"""Hook wiring for pytest-swe-arena; the logic lives in the modules named here.

The plugin is inert unless the user asks for a sweep (an ``--arena-*`` option,
an ``arena_*`` ini value, or a ``[tool.swe_arena]`` table), so installing it
changes nothing for other projects.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    from .settings import add_options

    add_options(parser)


def _arena_on(config: pytest.Config) -> bool:
    from .state import STATE_KEY

    return STATE_KEY in config.stash


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from .settings import load_settings

    settings = load_settings(config)
    if not settings.enabled:
        return
    from .arms import builtin_kind_modules
    from .controller.recorder import ArenaRecorder
    from .worker.session import configure_arena

    state = configure_arena(config, settings)
    for module in builtin_kind_modules():
        if not config.pluginmanager.is_registered(module):
            config.pluginmanager.register(module, f"swe-arena-{module.__name__.rsplit('.', 1)[-1]}")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(ArenaRecorder(config, state), "swe-arena-recorder")


def pytest_unconfigure(config: pytest.Config) -> None:
    if not _arena_on(config):
        return
    from .worker.session import unconfigure_arena

    unconfigure_arena(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: Sequence[Any]) -> None:
    if not _arena_on(config):
        return
    from .worker.session import pin_worker_rootdir

    pin_worker_rootdir(config, specs)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    if not _arena_on(node.config):
        return
    from .worker.session import configure_worker_node

    configure_worker_node(node.config, node.workerinput)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _arena_on(session.config):
        return
    from .worker.session import build_session_arms

    build_session_arms(session.config)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if not _arena_on(parent.config):
        return None
    from .naming import is_instance_file
    from .state import STATE_KEY
    from .worker.collection import InstanceFile

    if is_instance_file(file_path) and parent.config.stash[STATE_KEY].covers(file_path):
        collector: pytest.Collector = InstanceFile.from_parent(parent, path=file_path)
        return collector
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _arena_on(config):
        return
    from .worker.session import deselect_uncalibrated

    deselect_uncalibrated(config, items)


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not _arena_on(config):
        return []
    from .worker.session import report_header

    return report_header(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if _arena_on(item.config):
        from .worker.session import attach_outcome

        attach_outcome(item, call, report)
    return report


def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, tuple[str, Mapping[str, bool]]] | None:
    if not _arena_on(config):
        return None
    from .worker.session import arena_teststatus

    return arena_teststatus(report)
