"""The suite's ``[tool.swe_arena]`` table: arms, prices and shared agent settings.

Read once per session from ``--arena-config FILE`` (``arena_config``) or the
rootdir's ``pyproject.toml`` (see ``settings.find_config_file``); every problem
is a ``pytest.UsageError`` naming the file and the table.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from .arms.base import Arm, ArmConfigError, ArmKind, ArmSpec
from .naming import arm_name_problem
from .spend.budget import Limit

BUILTIN_ARMS = {"GOLD": "gold", "EMPTY": "empty"}

#: Appended to the problem statement for every agent arm (overridable per arm or suite).
DEFAULT_WORKER_SUFFIX = """

---
Work only inside your current working directory: it is a git checkout of the
repository the issue above is about. Implement the change completely, as a
maintainer would merge it: no stubs, no placeholders, no special cases for the
examples in the issue. Keep the existing tests passing. An automated check
runs the project's tests on your result when you finish.
"""


@dataclass(frozen=True)
class Suite:
    """The parsed ``[tool.swe_arena]`` table."""

    path: Path | None
    arm_specs: Mapping[str, ArmSpec]
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    worker_suffix: str = DEFAULT_WORKER_SUFFIX
    #: Each arm's total budget for the sweep (``max_total_usd``, ``max_total_tokens``).
    arm_limits: Mapping[str, Limit] = field(default_factory=dict)

    @property
    def base_dir(self) -> Path:
        return self.path.parent if self.path else Path.cwd()


def load_suite(path: Path | None, table: Mapping[str, Any] | None) -> Suite:
    table = table or {}
    where = str(path) if path else "[tool.swe_arena]"
    base_dir = path.parent if path else Path.cwd()
    known_keys = {"arms", "prices", "worker_suffix"}
    unknown = sorted(set(table) - known_keys)
    if unknown:
        raise pytest.UsageError(
            f"{where}: [tool.swe_arena] has unknown key {unknown[0]!r}; known: {', '.join(sorted(known_keys))}"
        )
    specs = {name: ArmSpec(name, kind, {}, "built in", base_dir) for name, kind in BUILTIN_ARMS.items()}
    arms = table.get("arms", {})
    if not isinstance(arms, dict):
        raise pytest.UsageError(f"{where}: [tool.swe_arena.arms] must be a table of arm tables")
    suffix = table.get("worker_suffix", DEFAULT_WORKER_SUFFIX)
    if not isinstance(suffix, str):
        raise pytest.UsageError(f"{where}: [tool.swe_arena] worker_suffix must be a string")
    arm_limits: dict[str, Limit] = {}
    for name, settings in arms.items():
        origin = f"{where} [tool.swe_arena.arms.{name}]"
        if name in BUILTIN_ARMS:
            raise pytest.UsageError(f"{origin}: {name} is built in and cannot be redefined; pick another name")
        problem = arm_name_problem(name)
        if problem:
            raise pytest.UsageError(f"{origin}: {problem}")
        twin = next((spec for other, spec in specs.items() if other.lower() == name.lower()), None)
        if twin is not None:
            raise pytest.UsageError(
                f"{origin}: arm {name!r} differs from {twin.name!r} ({twin.origin}) only in case, and "
                f"patch files are named by the lower-cased arm name ({name.lower()}); rename one of them"
            )
        if not isinstance(settings, dict) or not isinstance(settings.get("kind"), str):
            raise pytest.UsageError(f"{origin}: field 'kind' is required (a string such as \"opencode\")")
        # The sweep-level budget belongs to the harness, not the kind, and not to the arm's identity.
        kind_settings = {k: v for k, v in settings.items() if k not in ("kind", *ARM_BUDGET_FIELDS)}
        limit = _arm_limit(origin, settings)
        if limit.is_set:
            arm_limits[name] = limit
        # The suite-wide suffix is part of the prompt of every arm without its own: a new suffix
        # must make resume run such arms again. A digest keeps the ledger rows short.
        inherited = {} if "worker_suffix" in kind_settings else {"worker_suffix_sha256": _digest(suffix)}
        specs[name] = ArmSpec(name, settings["kind"], kind_settings, origin, base_dir, inherited)
    prices = _prices(where, table.get("prices", {}))
    return Suite(path=path, arm_specs=specs, prices=prices, worker_suffix=suffix, arm_limits=arm_limits)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


ARM_BUDGET_FIELDS = ("max_total_usd", "max_total_tokens")


def _arm_limit(origin: str, settings: Mapping[str, Any]) -> Limit:
    values: dict[str, Any] = {}
    for key in ARM_BUDGET_FIELDS:
        value = settings.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise pytest.UsageError(f"{origin}: field {key!r}: {value!r} is not a finite non-negative number")
        values[key] = value
    tokens = values.get("max_total_tokens")
    return Limit(max_usd=values.get("max_total_usd"), max_tokens=int(tokens) if tokens is not None else None)


PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")


def _prices(where: str, prices: Any) -> dict[str, dict[str, float]]:
    if not isinstance(prices, dict):
        raise pytest.UsageError(f"{where}: [tool.swe_arena.prices] must be a table of model tables")
    result = {}
    for model, table in prices.items():
        origin = f"{where} [tool.swe_arena.prices.\"{model}\"]"
        if not isinstance(table, dict):
            fields = ", ".join(PRICE_FIELDS)
            raise pytest.UsageError(f"{origin}: must be a table with {fields} (USD per million tokens)")
        for key, value in table.items():
            if key not in PRICE_FIELDS:
                raise pytest.UsageError(f"{origin}: unknown field {key!r}; known: {', '.join(PRICE_FIELDS)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise pytest.UsageError(f"{origin}: field {key!r}: {value!r} is not a finite non-negative number")
        result[model] = {key: float(value) for key, value in table.items()}
    return result


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
