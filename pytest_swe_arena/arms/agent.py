"""What every agent arm shares: the prompt, secrets, the opencode home of a cell, running the agent.

Secrets: an arm may name ``secrets = {dir = "...", files = ["model.env"]}``;
its agent then runs as ``dotenvx run --quiet --strict -f FILE... -- env -C
WORKSPACE AGENT...`` with cwd = that dir. The harness only ever handles the
directory and file names: values are read by dotenvx, inside the agent's
process, and never enter the cell environment that verify uses.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import string
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import proc
from ..suite import Suite
from ..usage import StreamFollower, Usage
from .base import ArmConfigError, ArmStartError, CellRequest, SettingsReader

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: opencode variables that keep a cell off the network and out of the user's state (tests/OPENCODE_NOTES.md).
OPENCODE_QUIET_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
}


def write_prompt(request: CellRequest, suffix: str) -> Path:
    """The agent's task, the problem statement and the worker suffix, as ``prompt.txt`` in the run dir."""
    path = request.run_dir / "prompt.txt"
    path.write_text(request.instance.problem_statement + suffix, encoding="utf-8")
    return path


def find_program(name: str, suite: Suite, origin: str, key: str) -> str:
    """An executable by path, on PATH, or in the suite's ``node_modules/.bin`` (where npm puts CLIs)."""
    if os.sep in name:
        path = (suite.base_dir / name).resolve()
        if not os.access(path, os.X_OK):
            raise ArmConfigError(f"{origin}: field {key!r}: {path} is not an executable file")
        return str(path)
    search = os.pathsep.join([os.environ.get("PATH", os.defpath), str(suite.base_dir / "node_modules" / ".bin")])
    found = shutil.which(name, path=search)
    if found is None:
        raise ArmConfigError(
            f"{origin}: field {key!r}: {name!r} is not on PATH nor in {suite.base_dir / 'node_modules/.bin'}; "
            "install it (npm install) or give its path"
        )
    return found


def check_template(parts: Iterable[str], placeholders: Sequence[str], origin: str, key: str) -> set[str]:
    """The placeholders a command template uses; anything but a bare known ``{name}`` is an ``ArmConfigError``.

    Format specs, conversions, attribute or index access and positional
    ``{}`` are refused here, at configuration, so they cannot fail in a cell.
    """
    known = ", ".join("{" + name + "}" for name in placeholders)
    used: set[str] = set()
    for part in parts:
        try:
            fields = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(part)
                      if name is not None]
        except ValueError as error:
            raise ArmConfigError(f"{origin}: field {key!r}: {part!r}: {error} "
                                 f"(write a literal brace as {{{{ or }}}}; placeholders: {known})") from None
        for name, spec, conversion in fields:
            shown = "{" + name + ("!" + conversion if conversion else "") + (":" + spec if spec else "") + "}"
            if name not in placeholders or spec or conversion:
                raise ArmConfigError(f"{origin}: field {key!r}: unknown placeholder {shown} in {part!r}; "
                                     f"known: {known} (a literal brace is {{{{ or }}}})")
            used.add(name)
    return used


def check_program(argv: Sequence[str], suite: Suite, origin: str, key: str) -> str | None:
    """Refuse, at configuration, an argv whose program cannot be found (a placeholder in it is checked in the cell).

    Returns the program found (a bare name found only in the suite's ``node_modules/.bin``
    is not on the agent's PATH: run it by this path). A relative path is left to the cell:
    it is relative to the agent's cwd.
    """
    program = argv[0] if argv else ""
    if not program or "{" in program or (os.sep in program and not os.path.isabs(program)):
        return None
    return find_program(program, suite, origin, key)


@dataclass(frozen=True)
class Secrets:
    """Env files dotenvx loads for the agent; names only, never values."""

    directory: Path
    files: tuple[str, ...]
    dotenvx: str

    def wrap(self, argv: Sequence[str], cwd: Path) -> tuple[list[str], Path]:
        """``argv`` run under dotenvx from the secrets dir, switching to ``cwd`` inside."""
        loads = [arg for name in self.files for arg in ("-f", name)]
        return [self.dotenvx, "run", "--quiet", "--strict", *loads, "--", "env", "-C", str(cwd), *argv], self.directory

    def describe(self) -> dict[str, Any]:
        return {"dir": str(self.directory), "files": list(self.files)}


def read_secrets(reader: SettingsReader, suite: Suite) -> Secrets | None:
    table = reader.table("secrets")
    if table is None:
        return None
    origin = f"{reader.spec.origin}: field 'secrets'"
    unknown = sorted(set(table) - {"dir", "files", "dotenvx"})
    if unknown:
        raise ArmConfigError(f"{origin}: unknown key {unknown[0]!r}; known: dir, files, dotenvx")
    directory, files = table.get("dir"), table.get("files")
    if not isinstance(directory, str) or not directory:
        raise ArmConfigError(f"{origin}: 'dir' is required (the directory holding the env files)")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) and f for f in files):
        raise ArmConfigError(f"{origin}: 'files' must be a non-empty list of env file names")
    path = (reader.spec.base_dir / directory).resolve()
    if not path.is_dir():
        raise ArmConfigError(f"{origin}: dir {path} is not a directory")
    for name in files:
        if not (path / name).is_file():
            raise ArmConfigError(f"{origin}: env file {name!r} is not in {path}")
    dotenvx = find_program(str(table.get("dotenvx", "dotenvx")), suite, reader.spec.origin, "secrets.dotenvx")
    return Secrets(path, tuple(files), dotenvx)


def read_env(reader: SettingsReader, key: str = "env") -> dict[str, str]:
    """An ``env = {NAME = "value"}`` table: plain (non-secret) variables for the agent."""
    table = reader.table(key, {})
    env = {}
    for name, value in table.items():
        if not ENV_NAME.match(name) or isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ArmConfigError(f"{reader.spec.origin}: field {key!r}: {name} = {value!r} is not NAME = \"text\"")
        env[name] = str(value)
    return env


@dataclass(frozen=True)
class SpendCap:
    """The live per-cell cap: ``max_usd`` / ``max_tokens`` (input + output + reasoning)."""

    max_usd: float | None
    max_tokens: int | None
    price: Mapping[str, float] | None

    @property
    def is_set(self) -> bool:
        return self.max_usd is not None or self.max_tokens is not None

    def exceeded(self, usage: Usage) -> str | None:
        """Why ``usage`` is over the cap, or None."""
        tokens = usage.total_tokens or 0
        if self.max_tokens is not None and tokens > self.max_tokens:
            return f"spent {tokens:,} tokens, over max_tokens {self.max_tokens:,}"
        if self.max_usd is not None:
            cost = usage.priced(self.price).cost_usd or 0.0
            if cost > self.max_usd:
                return f"spent ${cost:.6f}, over max_usd ${self.max_usd:g}"
        return None



class CapWatch:
    """A ``should_stop`` for ``proc.run``: follows an opencode event stream against a ``SpendCap``."""

    def __init__(self, cap: SpendCap, stream: Path):
        self.cap = cap
        self.follower = StreamFollower(stream)
        self.reason: str | None = None

    def __call__(self) -> str | None:
        self.reason = self.cap.exceeded(self.follower.poll().known_usage())
        return "over_budget" if self.reason else None


def read_cap(reader: SettingsReader, price: Mapping[str, float] | None, model: str | None) -> SpendCap:
    """``max_usd`` / ``max_tokens``; ``max_usd`` needs the model's price.

    opencode reports a cost of 0 for a model without a ``cost`` in its config,
    so without a price the dollar cap could never fire: that is a
    configuration error, not a cap that silently does nothing.
    """
    max_usd = reader.number("max_usd")
    max_tokens = reader.number("max_tokens")
    if max_usd is not None and price is None:
        whose = f"model {model!r}" if model else "the arm, which names no 'model',"
        add = f'[tool.swe_arena.prices."{model}"]' if model else "'model' and its [tool.swe_arena.prices]"
        raise ArmConfigError(f"{reader.spec.origin}: field 'max_usd': no price is known for {whose} and an agent "
                             f"that reports cost 0 would never reach the cap; add {add}, or use max_tokens")
    return SpendCap(max_usd, int(max_tokens) if max_tokens is not None else None, price)


def over_cap(cap: SpendCap, outcome: AgentOutcome, usage: Usage, what: str) -> AgentOutcome:
    """``outcome``, turned ``over_budget`` when the final, accounted ``usage`` passed the cap.

    The live watch sees only the stream; subagents, or spend in the last
    moments before the agent exited, show up only in the final accounting.
    Such a cell is never scored from its work either.
    """
    if outcome.status != "completed" or not cap.is_set:
        return outcome
    reason = cap.exceeded(usage)
    if reason is None:
        return outcome
    return AgentOutcome("over_budget", f"{what} went over its cap: {reason}", outcome.returncode, outcome.seconds)


@dataclass(frozen=True)
class AgentOutcome:
    """How the agent process ended, as an arm status."""

    status: str
    error: str | None
    returncode: int | None
    seconds: float


def run_agent(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    secrets: Secrets | None,
    timeout: float,
    grace: float,
    stdout: Path,
    stderr: Path,
    stdin: Path | None = None,
    should_stop: Callable[[], str | None] | None = None,
    what: str = "the agent",
) -> AgentOutcome:
    """Run the agent in its own process group (under dotenvx when it has secrets) and say how it ended.

    Its failures are statuses, not exceptions; only an agent that cannot be
    started at all raises ``ArmStartError`` (a harness error: re-run on resume).
    Ctrl-C or SIGTERM (``KeyboardInterrupt``) stops the agent's tree and is the
    status ``interrupted``, so the arm still reads what the agent spent and keeps
    its transcript; the harness then stops the sweep after this cell.
    """
    command, directory = (secrets.wrap(argv, cwd) if secrets else (list(argv), cwd))
    # opencode (Bun) takes its working directory from PWD when set: it must be the agent's cwd.
    env = {**env, "PWD": str(cwd)}
    started = time.monotonic()
    try:
        result = proc.run(command, cwd=directory, env=env, stdout=stdout, stderr=stderr, stdin=stdin,
                          timeout=timeout, grace=grace, should_stop=should_stop)
    except KeyboardInterrupt as interrupt:  # proc.run has stopped the agent's whole tree
        return AgentOutcome("interrupted", f"{what} was interrupted ({interrupt or 'KeyboardInterrupt'})", None,
                            time.monotonic() - started)
    except OSError as error:
        # error.filename is whatever was missing: the program, its cwd, or a file given as stdin.
        culprit = error.filename if error.filename is not None else command[0]
        raise ArmStartError(f"cannot start {what}: {error.strerror or error}: {culprit}") from None
    if result.timed_out:
        return AgentOutcome("timeout", f"{what} did not finish within {timeout:g} s", None, result.seconds)
    if result.stopped:
        return AgentOutcome(result.stopped, f"{what} was stopped: {result.stopped}", result.returncode,
                            result.seconds)
    if result.returncode != 0:
        return AgentOutcome("arm_error", f"{what} exited with status {result.returncode}", result.returncode,
                            result.seconds)
    return AgentOutcome("completed", None, 0, result.seconds)


# -- opencode in a cell ------------------------------------------------------------------------


@dataclass(frozen=True)
class OpencodeHome:
    """The user's opencode setup, carried into every cell's private config and data dirs.

    ``config`` is the config text (from the arm's ``config`` setting, else
    ``OPENCODE_CONFIG_CONTENT``, else the file ``OPENCODE_CONFIG`` names, else
    the user's ``opencode.json(c)``), written to the cell's ``OPENCODE_CONFIG``.
    ``auth`` is the user's ``auth.json`` (provider logins), copied mode 0600.
    ``packages`` is a shared directory for provider packages opencode installs
    at run time, linked into each cell so they are downloaded once, not per cell.
    """

    config: str | None
    config_source: str
    auth: Path | None
    packages: Path
    version: str

    @property
    def provenance(self) -> dict[str, Any]:
        digest = hashlib.sha256(self.config.encode()).hexdigest()[:16] if self.config is not None else None
        return {"agent": "opencode", "agent_version": self.version, "opencode_config": self.config_source,
                "opencode_config_sha256": digest}

    def install(self, request: CellRequest) -> None:
        """Write the config, auth and package links into the cell (never into its run dir)."""
        variables = request.cell.variables
        config_dir = Path(variables["XDG_CONFIG_HOME"]) / "opencode"
        config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.config is not None:
            _write_private(Path(variables["OPENCODE_CONFIG"]), self.config)
        # opencode npm-installs its plugin package into every config dir unless this lock says it is there.
        dependencies = {"@opencode-ai/plugin": self.version}
        (config_dir / "node_modules").mkdir(exist_ok=True)
        (config_dir / "package.json").write_text(json.dumps({"dependencies": dependencies}))
        lock = {"name": "opencode", "lockfileVersion": 3, "requires": True,
                "packages": {"": {"dependencies": dependencies}}}
        (config_dir / "package-lock.json").write_text(json.dumps(lock))
        data_dir = Path(variables["XDG_DATA_HOME"]) / "opencode"
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.auth is not None and self.auth.is_file():
            _write_private(data_dir / "auth.json", self.auth.read_text(encoding="utf-8"))
        cache_dir = Path(variables["XDG_CACHE_HOME"]) / "opencode"
        cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.packages.mkdir(parents=True, exist_ok=True)
        link = cache_dir / "packages"
        if not link.exists():
            link.symlink_to(self.packages, target_is_directory=True)


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


def _user_dir(variable: str, fallback: str) -> Path:
    value = os.environ.get(variable)
    return Path(value) if value else Path.home() / fallback


def read_opencode_home(reader: SettingsReader, executable: str) -> OpencodeHome:
    """Settings ``config`` (a file or an inline table), ``auth``, ``packages``; defaults from the user's setup."""
    origin = reader.spec.origin
    config_setting = reader.get("config", (str, dict), None, "a file name or an inline table")
    config: str | None
    if isinstance(config_setting, dict):
        try:
            config, source = json.dumps(config_setting, indent=2, allow_nan=False), "arm table"
        except ValueError:
            raise ArmConfigError(f"{origin}: field 'config': holds nan or inf, which JSON (opencode.json) "
                                 "cannot hold; give a finite number") from None
    elif isinstance(config_setting, str):
        path = (reader.spec.base_dir / config_setting).resolve()
        if not path.is_file():
            raise ArmConfigError(f"{origin}: field 'config': {path} does not exist")
        config, source = path.read_text(encoding="utf-8"), str(path)
    else:
        config, source = _user_config()
    auth_setting = reader.path("auth")
    if auth_setting is not None and not auth_setting.is_file():
        raise ArmConfigError(f"{origin}: field 'auth': {auth_setting} does not exist")
    auth = auth_setting or _user_dir("XDG_DATA_HOME", ".local/share") / "opencode" / "auth.json"
    packages = reader.path("packages") or _user_dir("XDG_CACHE_HOME", ".cache") / "opencode" / "packages"
    return OpencodeHome(config, source, auth if auth.is_file() else None, packages,
                        agent_version(executable, origin))


def _user_config() -> tuple[str | None, str]:
    inline = os.environ.get("OPENCODE_CONFIG_CONTENT")
    if inline:
        return inline, "OPENCODE_CONFIG_CONTENT"
    candidates = [os.environ.get("OPENCODE_CONFIG")] + [
        str(_user_dir("XDG_CONFIG_HOME", ".config") / "opencode" / name)
        for name in ("opencode.json", "opencode.jsonc", "config.json")
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate).read_text(encoding="utf-8"), candidate
    return None, "none"


def agent_version(executable: str, origin: str | None = None) -> str:
    """``EXECUTABLE --version``, e.g. ``1.18.33`` (recorded in every row's provenance).

    :param origin: the arm table that names the executable, for the error message.
    """
    where = f"{origin}: " if origin else ""
    try:
        return _version(executable)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ArmConfigError(f"{where}cannot run {executable} --version: {error}") from None
    except subprocess.CalledProcessError as error:
        raise ArmConfigError(f"{where}{executable} --version exited with {error.returncode}: "
                             f"{error.stderr[-300:]}") from None


@functools.lru_cache
def _version(executable: str) -> str:
    """Asked once per process: every arm is built on the controller and on each xdist worker."""
    return subprocess.run([executable, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, check=True).stdout.strip()
