"""The harness's witness inside a graded pytest run: ``-p arena_witness``, loaded before anything of the tree.

The harness starts the run with this folder on ``PYTHONPATH``, ``PYTEST_ADDOPTS=-p arena_witness``, plugin
autoload off and ``ARENA_WITNESS_FD`` naming the write end of a pipe only the harness reads. On import the
plugin moves that end to a descriptor that is not inherited (the tests' own children never get it), drops the
variables, loads the entry-point plugins installed outside the tree (what autoload would have loaded, but a
``*.dist-info`` in the tree), and then writes one JSON line per event, as it happens:

- ``start``: the session began (its pid);
- ``test``: one phase's report of a test as pytest logged it (``pytest_runtest_logreport``);
- ``hooks``: at the end, every implementation of a hook that decides a test's report, with where it was defined
  (and when that file was written), and the runner's functions that were replaced since start-up;
- ``finish``: the session's exit status.

Only the first ``Config`` of the process is witnessed: a test that runs pytest in-process (``pytester``) does
not write into the channel. It imports only the standard library and pytest: it runs in the grading venv, and in
an instance's image, whose Python may be as old as 3.6 and whose pytest as old as 3.x (so every annotation is a
string, never evaluated, and entry points are read as every Python since 3.6 can: ``importlib.metadata`` or its
backport).
"""

import importlib
import json
import os
import sys
from typing import Any

import _pytest
import pytest

#: Hooks whose implementations decide what a test's report says, or whether it runs.
REPORT_HOOKS = ("pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_report_teststatus",
                "pytest_runtest_protocol", "pytest_runtest_call", "pytest_pyfunc_call", "pytest_runtestloop",
                "pytest_sessionfinish", "pytest_runtest_setup", "pytest_runtest_teardown")
#: The runner's functions a report goes through: replacing one is tampering.
RUNNER_FUNCTIONS = (("_pytest.runner", "call_and_report"), ("_pytest.runner", "runtestprotocol"),
                    ("_pytest.runner", "call_runtest_hook"), ("_pytest.runner", "pytest_runtest_makereport"),
                    ("_pytest.reports", "TestReport.from_item_and_call"), ("_pytest.main", "pytest_runtestloop"),
                    ("_pytest.skipping", "pytest_runtest_makereport"), ("_pytest.main", "wrap_session"),
                    ("pluggy._callers", "_multicall"), ("pluggy._hooks", "HookCaller.__call__"))


def _take_channel() -> "int | None":
    named = os.environ.pop("ARENA_WITNESS_FD", None)
    if named is None or not named.isdigit():
        return None
    try:
        fd = os.dup(int(named))  # os.dup's copy is not inheritable
        os.close(int(named))
    except OSError:
        return None
    return fd


_FD = _take_channel()
_TREE = os.environ.pop("ARENA_WITNESS_TREE", os.getcwd())
if _FD is not None and os.environ.get("PYTEST_ADDOPTS", "").strip() == "-p arena_witness":
    os.environ.pop("PYTEST_ADDOPTS")
_OWNER: "list[Any]" = []
_LOADED: "list[bool]" = []


def _send(record: "dict[str, Any]") -> None:
    if _FD is None:
        return
    data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    try:
        while data:
            data = data[os.write(_FD, data):]
    except OSError:
        pass  # the harness stopped reading: nothing to tell


def _resolve(dotted: Any) -> object:
    try:
        value: object = importlib.import_module(dotted[0])
        for part in dotted[1].split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError):
        return None
    return getattr(value, "__func__", value)  # a classmethod is bound anew each time it is looked up


_RUNNER_AT_START = {pair: id(_resolve(pair)) for pair in RUNNER_FUNCTIONS}


def _in_tree(path: str) -> bool:
    try:
        where, tree = os.path.realpath(path), os.path.realpath(_TREE)
        return os.path.commonpath([where, tree]) == tree
    except (OSError, ValueError):
        return False


def _pytest11_entry_points() -> "list[Any]":
    """(entry point, its distribution) of every ``pytest11`` entry point installed (``EntryPoint.dist`` and
    ``entry_points(group=...)`` are Python 3.10's: each distribution is asked instead)."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8: the backport pluggy itself needs there
        try:
            import importlib_metadata as metadata  # type: ignore[no-redef]
        except ImportError:
            return []
    return [(entry, dist) for dist in metadata.distributions() for entry in dist.entry_points
            if entry.group == "pytest11"]


def pytest_addhooks(pluginmanager: "pytest.PytestPluginManager") -> None:
    """Load the entry-point plugins autoload would have, but those a distribution in the tree declares."""
    if _FD is None or _OWNER or _LOADED:
        return
    _LOADED.append(True)
    for entry, dist in _pytest11_entry_points():
        where = str(dist.locate_file(""))
        if where and _in_tree(where):
            _send({"e": "tree_entry_point", "name": entry.name, "value": entry.value})
            continue
        if pluginmanager.get_plugin(entry.name) is None and not pluginmanager.is_blocked(entry.name):
            try:
                plugin = entry.load()
            except ImportError as error:  # installed for another interpreter, or not shown in the sandbox
                _send({"e": "entry_point_failed", "name": entry.name, "error": str(error)[:200]})
                continue
            pluginmanager.register(plugin, name=entry.name)
            try:  # pytest's header lists the plugins of installed distributions, as autoload would have
                from pluggy._manager import DistFacade

                pluginmanager._plugin_distinfo.append((plugin, DistFacade(dist)))
            except (ImportError, AttributeError):
                pass


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: "pytest.Config") -> None:
    """Witness the process's first ``Config`` only: its own object, registered on that config alone."""
    if _FD is not None and not _OWNER:
        _OWNER.append(config)
        config.pluginmanager.register(Witness(config), "arena_witness_session")
        _send({"e": "start", "pid": os.getpid()})


class Witness:
    """The hooks that report to the harness, on the witnessed config's plugin manager only."""

    def __init__(self, config: "pytest.Config") -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: "pytest.TestReport") -> None:
        _send({"e": "test", "id": report.nodeid, "when": report.when, "outcome": report.outcome,
               "xfail": hasattr(report, "wasxfail")})

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: "pytest.Session", exitstatus: int) -> None:
        replaced = sorted(f"{module}.{name}" for (module, name), ident in _RUNNER_AT_START.items()
                          if id(_resolve((module, name))) != ident)
        _send({"e": "hooks", "impls": _hook_sources(self.config), "replaced": replaced, "tree": _TREE,
               "runner": os.path.dirname(os.path.abspath(_pytest.__file__)),
               "prefixes": sorted({sys.prefix, sys.base_prefix, sys.exec_prefix})})
        _send({"e": "finish", "exitstatus": int(exitstatus)})


def _hook_sources(config: "pytest.Config") -> "list[dict[str, Any]]":
    found = []
    for name in REPORT_HOOKS:
        for impl in getattr(config.pluginmanager.hook, name).get_hookimpls():
            code = getattr(impl.function, "__code__", None)
            found.append({"hook": name, "plugin": str(impl.plugin_name),
                          "file": code.co_filename if code is not None else "",
                          "mtime": _mtime(code.co_filename) if code is not None else None})
    return found


def _mtime(path: str) -> "float | None":
    """When the hook's file was last written, as this process sees it (inside an image, the harness cannot)."""
    try:
        return os.stat(path).st_mtime
    except (OSError, ValueError):
        return None
