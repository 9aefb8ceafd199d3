"""The built-in kinds: the table that offers them without importing their modules agrees with the modules."""

from __future__ import annotations

import importlib
import pkgutil

from pytest_swe_arena import arms
from pytest_swe_arena.arms.kinds import BUILTIN_KINDS, PACKAGE


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
