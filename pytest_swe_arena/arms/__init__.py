"""Arm kinds, one module each.

Every module in this package that implements ``pytest_arena_arm_kinds`` is
registered as a plugin at start-up, so adding a kind means adding a module.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def builtin_kind_modules() -> list[ModuleType]:
    """The modules of this package that contribute arm kinds, in name order."""
    modules = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "pytest_arena_arm_kinds"):
            modules.append(module)
    return modules
