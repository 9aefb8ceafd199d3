"""The one small protocol every arm kind implements, and what flows through it.

An arm *kind* (``gold``, ``opencode``, ...) is a callable ``kind(spec, suite)``
returning an ``Arm``; kinds are contributed through the ``pytest_arena_arm_kinds``
hook, so a conftest or another plugin can add one. ``Arm.run`` does the arm's
work in the cell's workspace and returns an ``ArmResult``; patch extraction and
verification are the harness's job, not the arm's.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, overload

from ..outcome import ArmStatus
from ..spend.usage import Usage
from ..suite import ArmSpec, Suite

if TYPE_CHECKING:
    from ..cell.environment import CellEnvironment
    from ..cell.sandbox import CellSandbox
    from ..cell.workspace import Workspace
    from ..instances.model import Instance
    from ..spend.meter.accounts import CellRoute

T = TypeVar("T")


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
class CellRequest:
    """What an arm gets for one cell."""

    instance: Instance
    workspace: Workspace
    cell: CellEnvironment
    trial: int
    #: Where every process the arm starts runs (``run_agent`` wraps it); None: unsandboxed (--arena-sandbox=none).
    sandbox: CellSandbox | None = None
    #: the cell's route through the metering proxy when its arm is metered: its agent's base URLs point here
    meter: CellRoute | None = None

    @property
    def run_dir(self) -> Path:
        return self.cell.run_dir


@dataclass(frozen=True)
class ArmResult:
    """What the arm did: how it ended (an ``ArmStatus``, or its text), what it spent, and where it came from."""

    status: ArmStatus = ArmStatus.COMPLETED
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    models: Mapping[str, Usage] = field(default_factory=dict)
    asked_model: str | None = None
    served_model: str | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "status", ArmStatus(self.status))
        except ValueError:
            known = tuple(status.value for status in ArmStatus)
            raise ValueError(f"ArmResult.status {self.status!r} is not one of {known}") from None


class Arm(Protocol):
    """An arm configured for a sweep; ``run`` is called once per cell, on the worker."""

    spec: ArmSpec

    def run(self, request: CellRequest) -> ArmResult: ...


@dataclass(frozen=True)
class ResolvedProgram:
    """The program an arm runs: as its table names it, and the executable that is (``agent.find_program``)."""

    named: str
    path: str


def arm_program(arm: Arm) -> ResolvedProgram | None:
    """The program an agent arm starts (its ``resolved_program``); None for arms that start none, or name
    theirs only in the cell (a ``{placeholder}``, a relative path, a shell line)."""
    program = getattr(arm, "resolved_program", None)
    return program if isinstance(program, ResolvedProgram) else None


def runs_agent(arm: Arm) -> bool:
    """Whether ``arm`` starts a program (an agent) in its cells: every arm but those saying
    ``runs_agent = False`` (gold, empty, replay: they only apply a patch). Unknown kinds are agents,
    so ``--arena-sandbox=auto`` fails closed for them where bubblewrap does not work."""
    return bool(getattr(arm, "runs_agent", True))


ArmKind = Callable[[ArmSpec, Suite], Arm]


class SettingsReader:
    """Reads an arm's settings table, with errors that name the table, field and accepted values."""

    def __init__(self, spec: ArmSpec):
        self.spec = spec
        # The limits (``cell.limits.LIMIT_SETTINGS``) are every kind's: read by the harness, not the kind.
        self._read: set[str] = {"kind", "memory", "pids", "disk"}

    def _fail(self, key: str, message: str) -> ArmConfigError:
        return ArmConfigError(f"{self.spec.origin}: field {key!r}: {message}")

    def get(self, key: str, kinds: tuple[type, ...], default: object, accepted: str) -> object:
        """The setting ``key`` (``default`` when absent), one of ``kinds`` or None; else an ``ArmConfigError``."""
        self._read.add(key)
        value = self.spec.settings.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) and bool not in kinds:
            raise self._fail(key, f"{value!r} is not {accepted}")
        if not isinstance(value, kinds):
            raise self._fail(key, f"{value!r} is not {accepted}")
        return value

    def _typed(self, key: str, kind: type[T], default: object, accepted: str) -> T | None:
        value = self.get(key, (kind,), default, accepted)
        assert value is None or isinstance(value, kind)
        return value

    @overload
    def string(self, key: str, default: str, *, required: bool = False) -> str: ...
    @overload
    def string(self, key: str, default: None = None, *, required: Literal[True]) -> str: ...
    @overload
    def string(self, key: str, default: None = None, *, required: Literal[False] = False) -> str | None: ...
    def string(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self._typed(key, str, default, "a string")
        if required and not value:
            misspelt = self._misspelling_of(key)
            if misspelt is not None:
                raise self._fail(misspelt, f"unknown setting for kind {self.spec.kind!r} (did you mean {key!r}? "
                                           "it is required)")
            raise self._fail(key, "is required (a string)")
        return value

    def _misspelling_of(self, key: str) -> str | None:
        """A setting given but not read that is close to the absent ``key`` (``modle`` for ``model``).

        Only a close match (similarity 0.8): a setting the kind reads later is unread here too, and a real one
        (``driver_model`` while ``worker_model`` is missing, 0.75) must not be taken for a typo."""
        if key in self.spec.settings:
            return None
        unread = [name for name in self.spec.settings if name not in self._read]
        close = difflib.get_close_matches(key, unread, n=1, cutoff=0.8)
        return close[0] if close else None

    @overload
    def number(self, key: str, default: float, *, positive: bool = True) -> float: ...
    @overload
    def number(self, key: str, default: None = None, *, positive: bool = True) -> float | None: ...
    def number(self, key: str, default: float | None = None, *, positive: bool = True) -> float | None:
        value = self.get(key, (int, float), default, "a number")
        if value is None:
            return None
        assert isinstance(value, (int, float))
        if not math.isfinite(value):
            raise self._fail(key, f"{value!r} is not a finite number")
        if positive and value <= 0:
            raise self._fail(key, f"{value!r} is not a positive number")
        return value

    @overload
    def strings(self, key: str, default: list[str]) -> list[str]: ...
    @overload
    def strings(self, key: str, default: None = None) -> list[str] | None: ...
    def strings(self, key: str, default: list[str] | None = None) -> list[str] | None:
        value = self._typed(key, list, default, "a list of strings")
        if value is not None and not all(isinstance(v, str) for v in value):
            raise self._fail(key, f"{value!r} is not a list of strings")
        return value

    @overload
    def table(self, key: str, default: dict[str, Any]) -> dict[str, Any]: ...
    @overload
    def table(self, key: str, default: None = None) -> dict[str, Any] | None: ...
    def table(self, key: str, default: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return self._typed(key, dict, default, "a table")

    @overload
    def boolean(self, key: str, default: bool) -> bool: ...
    @overload
    def boolean(self, key: str, default: None = None) -> bool | None: ...
    def boolean(self, key: str, default: bool | None = None) -> bool | None:
        return self._typed(key, bool, default, "true or false")

    def path(self, key: str, default: str | None = None, *, required: bool = False) -> Path | None:
        value = self.string(key, default, required=True) if required else self.string(key, default)
        return (self.spec.base_dir / value).resolve() if value else None

    def finish(self) -> None:
        """Reject settings nobody read: a typo must not be silently ignored."""
        unknown = sorted(set(self.spec.settings) - self._read)
        if unknown:
            close = difflib.get_close_matches(unknown[0], sorted(self._read - set(self.spec.settings)), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise self._fail(
                unknown[0],
                f"unknown setting for kind {self.spec.kind!r}{hint}; known: {', '.join(sorted(self._read))}",
            )
