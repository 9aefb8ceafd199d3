"""The suite's ``[tool.swe_arena]`` table: arms, prices and shared agent settings.

Read once per session from ``--arena-config FILE`` (``arena_config``) or the
rootdir's ``pyproject.toml`` (see ``settings.find_config_file``); every problem
is a ``pytest.UsageError`` naming the file and the table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .naming import REFERENCE_ARMS, arm_name_problem
from .spend.budget import ARM_BUDGET_FIELDS, Limit, arm_limit
from .spend.prices import Price, read_prices

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
class ArmSpec:
    """An arm as configured: its name, kind and settings, and where it was defined."""

    name: str
    kind: str
    settings: Mapping[str, Any]
    origin: str
    #: Directory that relative paths in the settings are relative to.
    base_dir: Path
    #: What changes the arm's results without being in its table: the suite's worker_suffix
    #: (as a digest) when the arm has none of its own, --arena-strict-models when on.
    inherited: Mapping[str, Any] = field(default_factory=dict)

    @property
    def identity(self) -> dict[str, Any]:
        """What identifies the arm in the ledger and in cell keys."""
        identity = {"name": self.name, "kind": self.kind, "settings": dict(self.settings)}
        if self.inherited:
            identity["inherited"] = dict(self.inherited)
        return identity


@dataclass(frozen=True)
class Suite:
    """The parsed ``[tool.swe_arena]`` table."""

    path: Path | None
    arm_specs: Mapping[str, ArmSpec]
    prices: Mapping[str, Price] = field(default_factory=dict)
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
    specs = {name: ArmSpec(name, kind, {}, "built in", base_dir) for name, kind in REFERENCE_ARMS.items()}
    arms = table.get("arms", {})
    if not isinstance(arms, dict):
        raise pytest.UsageError(f"{where}: [tool.swe_arena.arms] must be a table of arm tables")
    suffix = table.get("worker_suffix", DEFAULT_WORKER_SUFFIX)
    if not isinstance(suffix, str):
        raise pytest.UsageError(f"{where}: [tool.swe_arena] worker_suffix must be a string")
    arm_limits: dict[str, Limit] = {}
    for name, settings in arms.items():
        origin = f"{where} [tool.swe_arena.arms.{name}]"
        if name in REFERENCE_ARMS:
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
        limit = arm_limit(origin, settings)
        if limit.is_set:
            arm_limits[name] = limit
        # The suite-wide suffix is part of the prompt of every arm without its own: a new suffix
        # must make resume run such arms again. A digest keeps the ledger rows short.
        inherited = {} if "worker_suffix" in kind_settings else {"worker_suffix_sha256": _digest(suffix)}
        specs[name] = ArmSpec(name, settings["kind"], kind_settings, origin, base_dir, inherited)
    prices = read_prices(where, table.get("prices", {}))
    return Suite(path=path, arm_specs=specs, prices=prices, worker_suffix=suffix, arm_limits=arm_limits)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


