"""Arm kinds: the built-in ones (one module each), those other plugins contribute, and a sweep's arms.

Every module of this package that implements ``pytest_arena_arm_kinds`` is registered as a
plugin at start-up (``builtin_kind_modules``), so adding a kind means adding a module. Kinds are
gathered through the hook (``arm_kinds``) and the sweep's arms built from the suite's tables
(``build_arms``), once per session on the controller and on every worker.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import ModuleType
from typing import cast

import pytest

from ..suite import Suite
from .base import Arm, ArmConfigError, ArmKind

PACKAGE = __name__.rpartition(".")[0]


def builtin_kind_modules() -> list[ModuleType]:
    """The modules of this package that contribute arm kinds, in name order."""
    modules = []
    for info in sorted(pkgutil.iter_modules(importlib.import_module(PACKAGE).__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        if hasattr(module, "pytest_arena_arm_kinds"):
            modules.append(module)
    return modules


def arm_kinds(config: pytest.Config) -> dict[str, ArmKind]:
    """Every kind contributed through ``pytest_arena_arm_kinds``; a kind defined twice is an error."""
    kinds: dict[str, ArmKind] = {}
    provider: dict[str, str] = {}
    # Each implementation is called on its own (in pluggy's call order) to know who gave what.
    for impl in reversed(config.hook.pytest_arena_arm_kinds.get_hookimpls()):
        if impl.hookwrapper or impl.wrapper:
            continue
        contribution = cast("Mapping[str, ArmKind]", impl.function() or {})
        for name, kind in contribution.items():
            if name in kinds and kinds[name] is not kind:
                raise pytest.UsageError(
                    f"arm kind {name!r} is provided by two plugins, {provider[name]} and {impl.plugin_name}; "
                    "rename it in one of them"
                )
            kinds[name] = kind
            provider.setdefault(name, impl.plugin_name)
    return kinds


def build_arms(suite: Suite, kinds: Mapping[str, ArmKind], selected: Sequence[str], *,
               source: str = "--arena-arms", strict_models: bool = False) -> dict[str, Arm]:
    """Construct the selected arms; unknown names and kinds are usage errors listing the known ones.

    :param source: where ``selected`` came from (an option or an ini value), for the error.
    :param strict_models: --arena-strict-models, which turns a served-model mismatch into an
        error and so is part of every arm's identity (and cell key) when on.
    """
    unknown = [name for name in selected if name not in suite.arm_specs]
    if unknown:
        known = ", ".join(sorted(suite.arm_specs))
        raise pytest.UsageError(f"{source}: unknown arm {unknown[0]!r}; known arms: {known}")
    arms: dict[str, Arm] = {}
    for name in selected:
        spec = suite.arm_specs[name]
        if strict_models:
            spec = replace(spec, inherited={**spec.inherited, "strict_models": True})
        kind = kinds.get(spec.kind)
        if kind is None:
            raise pytest.UsageError(
                f"{spec.origin}: unknown kind {spec.kind!r}; known kinds: {', '.join(sorted(kinds))}"
            )
        try:
            arms[name] = kind(spec, suite)
        except ArmConfigError as error:
            raise pytest.UsageError(str(error)) from None
    return arms
