"""The built-in kinds: the table that offers them without importing their modules agrees with the modules."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

import pytest

from pytest_swe_arena import arms
from pytest_swe_arena.arms.base import (
    AGENT_SETTINGS,
    GRACE,
    MODEL,
    TIMEOUT,
    ArmConfigError,
    SettingsReader,
    read_run,
    read_worker_suffix,
)
from pytest_swe_arena.arms.kinds import BUILTIN_KINDS, PACKAGE
from pytest_swe_arena.suite import ArmSpec


def test_every_kind_module_is_in_the_table_with_exactly_its_kinds() -> None:
    offered: dict[str, str] = {}
    for info in pkgutil.iter_modules(arms.__path__):
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        if hasattr(module, "pytest_arena_arm_kinds"):
            offered.update(dict.fromkeys(module.pytest_arena_arm_kinds(), info.name))
    assert offered == dict(BUILTIN_KINDS)


def test_a_sweep_of_reference_arms_loads_no_agent_module(pytester) -> None:
    """GOLD and EMPTY need none of the agent kinds: their modules (and usage readers) stay unloaded."""
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\narena_arms = "GOLD,EMPTY"\n')
    pytester.makeconftest(
        "import sys\n\n\ndef pytest_sessionfinish(session):\n"
        "    loaded = sorted(name for name in sys.modules if name.startswith('pytest_swe_arena.arms.'))\n"
        "    print('LOADED', ' '.join(loaded))\n"
    )
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    line = next(line for line in result.outlines if "LOADED" in line)
    loaded = set(line.split("LOADED", 1)[1].split())
    assert "pytest_swe_arena.arms.reference" in loaded
    agents = {f"{PACKAGE}.{module}" for module in BUILTIN_KINDS.values()} - {f"{PACKAGE}.reference"}
    assert not loaded & agents, loaded & agents


def kind_class(kind: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.{BUILTIN_KINDS[kind]}").pytest_arena_arm_kinds()[kind]


def test_every_kind_declares_each_setting_once_and_every_agent_kind_takes_the_shared_ones() -> None:
    for kind in BUILTIN_KINDS:
        names = [setting.name for setting in kind_class(kind).arm_settings]
        assert len(names) == len(set(names)), kind
        if getattr(kind_class(kind), "runs_agent", True):
            assert {setting.name for setting in AGENT_SETTINGS} <= set(names), kind


def spec(kind: str, **settings: Any) -> ArmSpec:
    return ArmSpec("A", kind, settings, "[tool.swe_arena.arms.A]", Path("."))


def test_a_shared_setting_is_read_with_the_kinds_own_default() -> None:
    """``read_run`` reads the shared ``timeout``: the supervisor's declaration makes its default 2800 s."""
    suite = type("SuiteStub", (), {"worker_suffix": "SUITE"})()
    supervisor = SettingsReader(spec("supervisor"), kind_class("supervisor").arm_settings)
    opencode = SettingsReader(spec("opencode"), kind_class("opencode").arm_settings)
    assert supervisor.read(TIMEOUT) == 2800.0
    assert supervisor.read(GRACE) is None  # computed from its knobs
    assert read_worker_suffix(supervisor, suite) == ""
    assert read_run(opencode, suite) == (1000.0, 10.0, "SUITE")
    given = SettingsReader(spec("opencode", worker_suffix=""), kind_class("opencode").arm_settings)
    assert read_run(given, suite)[2] == ""  # given empty: not the suite's


def test_reading_a_setting_the_kind_does_not_declare_is_caught_at_once() -> None:
    reader = SettingsReader(spec("gold", grace=3), kind_class("gold").arm_settings)
    with pytest.raises(AssertionError, match="'grace' is not declared"):
        reader.read(GRACE)
    with pytest.raises(AssertionError, match="'grace' is read but not declared"):
        reader.number("grace")


def test_a_bad_or_missing_declared_setting_keeps_its_error() -> None:
    reader = SettingsReader(spec("opencode", timeout="soon"), kind_class("opencode").arm_settings)
    with pytest.raises(ArmConfigError, match=r"^\[tool.swe_arena.arms.A\]: field 'timeout': 'soon' is not a number$"):
        reader.read(TIMEOUT)
    reader = SettingsReader(spec("opencode", modle="p/m"), kind_class("opencode").arm_settings)
    with pytest.raises(ArmConfigError, match=r"field 'modle': unknown setting for kind 'opencode' \(did you mean "
                                             r"'model'\? it is required\)"):
        reader.read(MODEL)
