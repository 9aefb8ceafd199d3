"""The one small protocol every arm kind implements, and what flows through it.

An arm *kind* (``gold``, ``opencode``, ...) is a callable ``kind(spec, suite)``
returning an ``Arm``; kinds are contributed through the ``pytest_arena_arm_kinds``
hook, so a conftest or another plugin can add one. ``Arm.run`` does the arm's
work in the cell's workspace and returns an ``ArmResult``; patch extraction and
verification are the harness's job, not the arm's.
"""

from __future__ import annotations

import copy
import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, cast, overload

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


class Required:
    """The default of a setting that must be given (``REQUIRED``)."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = Required()


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One setting of an arm kind's table, as the kind declares it: the one place its name, what it accepts,
    its default and its meaning live. The kind reads it with ``SettingsReader.read``, and its docs page shows
    it (``docs/hooks/reference.py`` generates each kind's table from its ``arm_settings``).

    Made by ``text``, ``number``, ``strings``, ``table``, ``boolean``, ``path`` (typed reads) or ``other`` (a
    setting the kind reads itself, through ``SettingsReader.get``); ``but`` gives a kind's own default of a
    shared one.
    """

    name: str
    #: What the table may hold, as the docs say it ("a string", "a number"...).
    accepts: str
    meaning: str
    #: The value when the table leaves it out (None: none; ``REQUIRED``: it must be given).
    default: object = None
    #: The default as the docs say it when it is not that value (computed, or taken from elsewhere).
    shown_default: str | None = None
    #: How the reader reads it: the name of a ``SettingsReader`` method; None: the kind reads it itself.
    method: str | None = None

    def but(self, **changes: Any) -> Setting[Any]:
        """This setting as a kind takes it: its own ``default``, ``shown_default`` or ``meaning``."""
        if "default" in changes:
            changes.setdefault("shown_default", None)
        return replace(self, **changes)

    def required(self, meaning: str | None = None) -> Setting[Any]:
        """This setting, which the kind needs (a string or a path), with what it means to the kind."""
        return self.but(default=REQUIRED, meaning=meaning or self.meaning)

    @property
    def default_text(self) -> str:
        """The default as the docs show it."""
        if self.shown_default is not None:
            return self.shown_default
        if self.default is None:
            return "none"
        if self.default is REQUIRED:
            return "required"
        return f"`{_toml(self.default)}`"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + "}"
    return str(value)


@overload
def text(name: str, meaning: str, default: str, *, shown: str | None = None) -> Setting[str]: ...
@overload
def text(name: str, meaning: str, default: None = None, *, shown: str | None = None) -> Setting[str | None]: ...
def text(name: str, meaning: str, default: str | None = None, *, shown: str | None = None) -> Setting[Any]:
    return Setting(name, "a string", meaning, default, shown, "string")


@overload
def number(name: str, meaning: str, default: float, *, shown: str | None = None) -> Setting[float]: ...
@overload
def number(name: str, meaning: str, default: None = None, *, shown: str | None = None) -> Setting[float | None]: ...
def number(name: str, meaning: str, default: float | None = None, *, shown: str | None = None) -> Setting[Any]:
    return Setting(name, "a positive number", meaning, default, shown, "number")


@overload
def strings(name: str, meaning: str, default: list[str], *, shown: str | None = None) -> Setting[list[str]]: ...
@overload
def strings(name: str, meaning: str, default: None = None, *,
            shown: str | None = None) -> Setting[list[str] | None]: ...
def strings(name: str, meaning: str, default: list[str] | None = None, *, shown: str | None = None) -> Setting[Any]:
    return Setting(name, "a list of strings", meaning, default, shown, "strings")


@overload
def table(name: str, meaning: str, default: dict[str, Any], *,
          shown: str | None = None) -> Setting[dict[str, Any]]: ...
@overload
def table(name: str, meaning: str, default: None = None, *,
          shown: str | None = None) -> Setting[dict[str, Any] | None]: ...
def table(name: str, meaning: str, default: dict[str, Any] | None = None, *,
          shown: str | None = None) -> Setting[Any]:
    return Setting(name, "a table", meaning, default, shown, "table")


@overload
def boolean(name: str, meaning: str, default: bool, *, shown: str | None = None) -> Setting[bool]: ...
@overload
def boolean(name: str, meaning: str, default: None = None, *, shown: str | None = None) -> Setting[bool | None]: ...
def boolean(name: str, meaning: str, default: bool | None = None, *, shown: str | None = None) -> Setting[Any]:
    return Setting(name, "true or false", meaning, default, shown, "boolean")


def path(name: str, meaning: str, default: str | None = None, *, shown: str | None = None) -> Setting[Path | None]:
    """A file or folder, relative to the suite's config file."""
    return Setting(name, "a path", meaning, default, shown, "path")


def other(name: str, accepts: str, meaning: str, default: object = None, *,
          shown: str | None = None) -> Setting[object]:
    """A setting of a shape the kind checks itself (``SettingsReader.get``)."""
    return Setting(name, accepts, meaning, default, shown)


# -- the settings several kinds share: declared here once, each kind taking them with its own defaults --------

MODEL = text("model", "the asked model: priced, and compared with the served one")
EXECUTABLE = text("executable", "the CLI (on `PATH`, in `node_modules/.bin`, or a path); its `--version` goes "
                                "into `provenance.agent_version`")
ARGS = strings("args", "more arguments for its command line", [])
TIMEOUT = number("timeout", "seconds before the agent is stopped", 1000.0)
GRACE = number("grace", "seconds between SIGTERM and SIGKILL", 10.0)
WORKER_SUFFIX = text("worker_suffix", "the text appended to the problem statement",
                     shown="the suite's `worker_suffix`")
ENV = table("env", 'plain variables for the agent, `{NAME = "value"}`', {})
NETWORK = other("network", 'a string or a list of hosts',
                'the agent\'s network: `"sealed"` (its own loopback and its model endpoints), `"open"` (the '
                "machine's, recorded as not sealed), or a list of hosts reached through the harness's CONNECT "
                'proxy, `["pypi.org", "files.pythonhosted.org"]`; see '
                "[the threat model](../threat-model.md#the-network)",
                shown='`"sealed"`')
SECRETS = table("secrets", '`{dir = "secrets", files = ["model.env"], dotenvx = "dotenvx"}`, see '
                           "[Secrets](index.md#secrets)")
MAX_USD = number("max_usd", "the live per-cell cap in dollars ([Live caps](index.md#live-caps))")
MAX_TOKENS = number("max_tokens", "the live per-cell cap in tokens ([Live caps](index.md#live-caps))")
METER = boolean("meter", "send the agent's model calls through the harness's metering proxy",
                shown="`--arena-meter` decides")
UPSTREAM = text("upstream", "the URL the agent's model calls go to, for the meter")
#: The settings every agent kind reads, in the order the docs list them after its own.
AGENT_SETTINGS = (TIMEOUT, GRACE, WORKER_SUFFIX, ENV, NETWORK, SECRETS)


def read_run(reader: SettingsReader, suite: Suite) -> tuple[float, float, str]:
    """``timeout``, ``grace`` and ``worker_suffix``, read in that order with the kind's defaults."""
    timeout: float = reader.read(TIMEOUT)
    grace: float = reader.read(GRACE)
    return timeout, grace, read_worker_suffix(reader, suite)


def read_worker_suffix(reader: SettingsReader, suite: Suite) -> str:
    """``worker_suffix``: the kind's default, else the suite's."""
    suffix = reader.read(WORKER_SUFFIX)
    return suite.worker_suffix if suffix is None else suffix


class SettingsReader:
    """Reads an arm's settings table, with errors that name the table, field and accepted values.

    A kind that declares its ``arm_settings`` passes them: a setting is then read by its declaration (``read``),
    with the kind's default, and reading one the kind does not declare is a bug caught at once.
    """

    def __init__(self, spec: ArmSpec, declared: tuple[Setting[Any], ...] | None = None):
        self.spec = spec
        # The limits (``cell.limits.LIMIT_SETTINGS``) are every kind's: read by the harness, not the kind.
        self._read: set[str] = {"kind", "memory", "pids", "disk"}
        self._declared = None if declared is None else {setting.name: setting for setting in declared}

    def read(self, setting: Setting[T]) -> T:
        """``setting`` as the kind declares it (its default, or required), with the reader's errors."""
        declared = setting if self._declared is None else self._declared.get(setting.name)
        assert declared is not None and declared.method is not None, f"{setting.name!r} is not declared to be read"
        if declared.default is REQUIRED:
            return cast("T", getattr(self, declared.method)(declared.name, required=True))
        # a fresh copy of a list or table default: one arm's value is never another's
        return cast("T", getattr(self, declared.method)(declared.name, copy.deepcopy(declared.default)))

    def _fail(self, key: str, message: str) -> ArmConfigError:
        return ArmConfigError(f"{self.spec.origin}: field {key!r}: {message}")

    def get(self, key: str, kinds: tuple[type, ...], default: object, accepted: str) -> object:
        """The setting ``key`` (``default`` when absent), one of ``kinds`` or None; else an ``ArmConfigError``."""
        assert self._declared is None or key in self._declared, f"{self.spec.kind}: {key!r} is read but not declared"
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
