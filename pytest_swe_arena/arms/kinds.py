"""Arm kinds: the built-in ones (one module each), those other plugins contribute, and a sweep's arms.

Every built-in kind is named in ``BUILTIN_KINDS`` with the module of this package that makes it,
and each such module is a plugin at start-up (``builtin_kind_plugins``) that offers its kinds
*without importing the module*: a module is loaded only when the sweep has an arm of its kind, so a
sweep of GOLD and EMPTY does not load nine agent modules in every worker. Adding a kind means adding
its module and its line in ``BUILTIN_KINDS`` (a test checks the two agree); an agent's formats (its
usage and its transcript) are its module of ``agents/``. Kinds are gathered through the hook (``arm_kinds``) and the
sweep's arms built from the suite's tables (``build_arms``), once per session on the controller
and on every worker.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import cast

import pytest

from ..suite import ArmSpec, Suite
from .base import Arm, ArmConfigError, ArmKind

PACKAGE = __name__.rpartition(".")[0]

#: Each built-in kind and the module of this package whose ``pytest_arena_arm_kinds`` makes it.
BUILTIN_KINDS: Mapping[str, str] = {
    "gold": "reference",
    "empty": "reference",
    "replay": "replay",
    "opencode": "opencode",
    "command": "command",
    "supervisor": "supervisor",
    "claude-code": "claude_code",
    "codex": "codex",
    "gemini-cli": "gemini_cli",
    "mini-swe-agent": "mini_swe_agent",
}


class BuiltinKindModule:
    """One built-in kind module as a plugin: its kinds, each importing the module when first built."""

    def __init__(self, module: str):
        self.module = module

    @property
    def plugin_name(self) -> str:
        return f"swe-arena-{self.module}"

    @pytest.hookimpl
    def pytest_arena_arm_kinds(self) -> Mapping[str, ArmKind]:
        return {kind: _LazyKind(self.module, kind) for kind, module in BUILTIN_KINDS.items() if module == self.module}


class _LazyKind:
    """A built-in kind that imports its module only when an arm of it is built."""

    def __init__(self, module: str, kind: str):
        self.module, self.kind = module, kind

    def __call__(self, spec: ArmSpec, suite: Suite) -> Arm:
        module = importlib.import_module(f"{PACKAGE}.{self.module}")
        return cast("Mapping[str, ArmKind]", module.pytest_arena_arm_kinds())[self.kind](spec, suite)


def builtin_kind_plugins() -> list[BuiltinKindModule]:
    """The plugins that offer the built-in kinds, one per module, in module name order."""
    return [BuiltinKindModule(module) for module in sorted(set(BUILTIN_KINDS.values()))]


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
