"""The one small protocol every arm kind implements, and what flows through it.

An arm *kind* (``gold``, ``opencode``, ...) is a callable ``kind(spec, suite)``
returning an ``Arm``; kinds are contributed through the ``pytest_arena_arm_kinds``
hook, so a conftest or another plugin can add one. ``Arm.run`` does the arm's
work in the cell's workspace and returns an ``ArmResult``; patch extraction and
verification are the harness's job, not the arm's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..usage import Usage

if TYPE_CHECKING:
    from ..cell import CellEnvironment
    from ..instances import Instance
    from ..suite import Suite
    from ..workspace import Workspace

#: ArmResult.status values; anything but "completed" is never scored. "interrupted": Ctrl-C or
#: SIGTERM stopped the agent (its spend read all the same); the harness then stops the sweep.
ARM_STATUSES = ("completed", "arm_error", "timeout", "over_budget", "interrupted")


class ArmConfigError(Exception):
    """An arm's table is invalid; the message names the table and the field."""


class ArmError(Exception):
    """The arm failed in a way that counts against it (status ``arm_error``)."""


class ArmStartError(Exception):
    """The agent could not be started at all (a missing program or directory): the setup's fault, not the arm's.

    Not an ``ArmError``: the harness records any other exception from
    ``Arm.run`` as ``harness_error``, which is not scored and runs again on resume.
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
class CellRequest:
    """What an arm gets for one cell."""

    instance: Instance
    workspace: Workspace
    cell: CellEnvironment
    trial: int

    @property
    def run_dir(self) -> Path:
        return self.cell.run_dir


@dataclass(frozen=True)
class ArmResult:
    """What the arm did: how it ended, what it spent, and where it came from."""

    status: str = "completed"
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    models: Mapping[str, Usage] = field(default_factory=dict)
    asked_model: str | None = None
    served_model: str | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in ARM_STATUSES:
            raise ValueError(f"ArmResult.status {self.status!r} is not one of {ARM_STATUSES}")


class Arm(Protocol):
    """An arm configured for a sweep; ``run`` is called once per cell, on the worker."""

    spec: ArmSpec

    def run(self, request: CellRequest) -> ArmResult: ...


ArmKind = Callable[["ArmSpec", "Suite"], Arm]


class SettingsReader:
    """Reads an arm's settings table, with errors that name the table, field and accepted values."""

    def __init__(self, spec: ArmSpec):
        self.spec = spec
        self._read: set[str] = {"kind"}

    def _fail(self, key: str, message: str) -> ArmConfigError:
        return ArmConfigError(f"{self.spec.origin}: field {key!r}: {message}")

    def get(self, key: str, kinds: tuple[type, ...], default: Any, accepted: str) -> Any:
        self._read.add(key)
        value = self.spec.settings.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) and bool not in kinds:
            raise self._fail(key, f"{value!r} is not {accepted}")
        if not isinstance(value, kinds):
            raise self._fail(key, f"{value!r} is not {accepted}")
        return value

    def string(self, key: str, default: str | None = None, *, required: bool = False) -> Any:
        value = self.get(key, (str,), default, "a string")
        if required and not value:
            raise self._fail(key, "is required (a string)")
        return value

    def number(self, key: str, default: float | None = None, *, positive: bool = True) -> Any:
        value = self.get(key, (int, float), default, "a number")
        if value is not None and not math.isfinite(value):
            raise self._fail(key, f"{value!r} is not a finite number")
        if value is not None and positive and value <= 0:
            raise self._fail(key, f"{value!r} is not a positive number")
        return value

    def strings(self, key: str, default: list[str] | None = None) -> Any:
        value = self.get(key, (list,), default, "a list of strings")
        if value is not None and not all(isinstance(v, str) for v in value):
            raise self._fail(key, f"{value!r} is not a list of strings")
        return value

    def table(self, key: str, default: dict[str, Any] | None = None) -> Any:
        return self.get(key, (dict,), default, "a table")

    def boolean(self, key: str, default: bool | None = None) -> Any:
        return self.get(key, (bool,), default, "true or false")

    def path(self, key: str, default: str | None = None, *, required: bool = False) -> Path | None:
        value = self.string(key, default, required=required)
        return (self.spec.base_dir / value).resolve() if value else None

    def finish(self) -> None:
        """Reject settings nobody read: a typo must not be silently ignored."""
        unknown = sorted(set(self.spec.settings) - self._read)
        if unknown:
            raise self._fail(
                unknown[0], f"unknown setting for kind {self.spec.kind!r}; known: {', '.join(sorted(self._read))}"
            )
