"""What every agent arm shares: the prompt, finding its program, secrets, its table's caps, running it.

Secrets: an arm may name ``secrets = {dir = "...", files = ["model.env"]}``;
its agent then runs as ``dotenvx run --quiet --strict -f FILE... -- env -C
WORKSPACE AGENT...`` with cwd = that dir. The harness only ever handles the
directory and file names: values are read by dotenvx, inside the agent's
process, and never enter the cell environment that verify uses.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import string
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cell import processes
from ..cell.environment import cell_search_path
from ..cell.network import NETWORK_ACCEPTED, parse_network
from ..cell.programs import ProgramError, follow_shim, resolve_program
from ..cell.sandbox import SandboxError
from ..outcome import AgentOutcome, ArmStatus
from ..spend.budget import SpendCap
from ..spend.meter.accounts import Upstream
from ..spend.meter.cells import Metering
from ..spend.prices import Price
from ..suite import Suite
from .base import (
    ENV,
    MAX_TOKENS,
    MAX_USD,
    METER,
    NETWORK,
    SECRETS,
    UPSTREAM,
    ArmConfigError,
    ArmStartError,
    CellRequest,
    SettingsReader,
)
from .misconfig import tail_lines

if TYPE_CHECKING:
    from ..cell.sandbox import CellSandbox

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: the name of the upstream of an arm whose agent calls one model provider (its route is
#: ``route.base_url(MODEL_UPSTREAM)``)
MODEL_UPSTREAM = "model"

def write_prompt(request: CellRequest, suffix: str) -> Path:
    """The agent's task, the problem statement and the worker suffix, as ``prompt.txt`` in the run dir."""
    path = request.run_dir / "prompt.txt"
    path.write_text(request.instance.problem_statement + suffix, encoding="utf-8")
    return path


def find_program(name: str, suite: Suite, origin: str, key: str) -> str:
    """An executable by path, on the cell's PATH (as the agent's children find it), or in the suite's
    ``node_modules/.bin`` (where npm puts CLIs); a version manager's shim followed to what it runs."""
    if os.sep in name:
        path = Path(os.path.abspath(suite.base_dir / name))
        if not os.access(path, os.X_OK) or not path.is_file():
            raise ArmConfigError(f"{origin}: field {key!r}: {path.resolve()} is not an executable file")
        located: Path | None = path
        try:
            real: Path | None = follow_shim(path, cwd=suite.base_dir)
            real = path.resolve() if real == path else real
        except ProgramError as error:
            raise ArmConfigError(f"{origin}: field {key!r}: {name!r}: {error}") from None
    else:
        try:
            located, real = resolve_program(name, (suite.base_dir / "node_modules" / ".bin",), cwd=suite.base_dir)
        except ProgramError as error:
            raise ArmConfigError(f"{origin}: field {key!r}: {name!r}: {error}") from None
    if located is None or real is None:
        raise ArmConfigError(
            f"{origin}: field {key!r}: {name!r} is not on PATH nor in {suite.base_dir / 'node_modules/.bin'} "
            f"(the cell's PATH: {cell_search_path()}); install it (npm install) or give its path"
        )
    return str(real)


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
    table = reader.read(SECRETS)
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


def files_named(env: Mapping[str, str]) -> list[Path]:
    """The files an arm's ``env`` table names by absolute path (a config, say): its sandbox shows them read-only.

    Only the arm's own table: the user's environment may name credentials the agent must not read.
    """
    return [Path(value) for value in env.values() if os.path.isabs(value) and os.path.isfile(value)]


def read_env(reader: SettingsReader) -> dict[str, str]:
    """An ``env = {NAME = "value"}`` table: plain (non-secret) variables for the agent."""
    key = ENV.name
    table: dict[str, Any] = reader.read(ENV)
    env = {}
    for name, value in table.items():
        if not ENV_NAME.match(name) or isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ArmConfigError(f"{reader.spec.origin}: field {key!r}: {name} = {value!r} is not NAME = \"text\"")
        env[name] = str(value)
    return env


def read_network(reader: SettingsReader) -> tuple[str, tuple[str, ...]]:
    """``network``: the agent phase's network (``cell.network``): sealed, open, or sealed with an allow-list."""
    value = reader.get(NETWORK.name, (str, list), None, NETWORK_ACCEPTED)
    try:
        return parse_network(value, reader.spec.origin)
    except ValueError as error:
        raise ArmConfigError(str(error)) from None


def read_cap(reader: SettingsReader, price: Price | None, model: str | None) -> SpendCap:
    """``max_usd`` / ``max_tokens``; ``max_usd`` needs the model's price.

    opencode reports a cost of 0 for a model without a ``cost`` in its config,
    so without a price the dollar cap could never fire: that is a
    configuration error, not a cap that silently does nothing.
    """
    max_usd = reader.read(MAX_USD)
    max_tokens = reader.read(MAX_TOKENS)
    if max_usd is not None and price is None:
        whose = f"model {model!r}" if model else "the arm, which names no 'model',"
        add = f'[tool.swe_arena.prices."{model}"]' if model else "'model' and its [tool.swe_arena.prices]"
        raise ArmConfigError(f"{reader.spec.origin}: field 'max_usd': no price is known for {whose} and an agent "
                             f"that reports cost 0 would never reach the cap; add {add}, or use max_tokens")
    return SpendCap(max_usd, int(max_tokens) if max_tokens is not None else None, price)


def read_metering(reader: SettingsReader, cap: SpendCap, known: Mapping[str, str] | None = None,
                  upstream_name: str = MODEL_UPSTREAM, *, partial: bool = False) -> Metering:
    """``meter`` (true / false; absent: ``--arena-meter`` decides) and ``upstream``, the URL the agent calls.

    :param known: upstreams the agent's own config names (opencode's providers' ``baseURL``), by name.
    :param upstream_name: the name ``upstream`` is given (opencode: the model's provider).
    An ``upstream`` that is not an http(s) URL is an ``ArmConfigError``; so is ``meter = true``
    on an arm whose model calls the meter cannot route.
    """
    origin = reader.spec.origin
    wanted = reader.read(METER)
    urls = dict(known or {})
    upstream = reader.read(UPSTREAM)
    if upstream is not None:
        try:
            urls[upstream_name] = Upstream.parse(upstream_name, upstream, f"{origin}: field 'upstream'").url
        except ValueError as error:
            raise ArmConfigError(str(error)) from None
    upstreams, problems = [], []
    for name, url in sorted(urls.items()):
        try:
            upstreams.append(Upstream.parse(name, url, origin))
        except ValueError as error:
            problems.append(str(error))
    if not upstreams and not problems:
        problems.append(f"{origin}: the meter needs the URL this agent's model calls go to: set 'upstream' "
                        "to the provider's base URL (e.g. https://api.openai.com/v1)")
    problem = "; ".join(problems) or None
    if wanted and problem:
        raise ArmConfigError(f"{problem} (meter = true)")
    return Metering(wanted, tuple(upstreams), cap, problem, partial)


def run_agent(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    secrets: Secrets | None,
    sandbox: CellSandbox | None,
    timeout: float,
    grace: float,
    stdout: Path,
    stderr: Path,
    stdin: Path | None = None,
    should_stop: Callable[[], str | None] | None = None,
    what: str = "the agent",
    programs: Sequence[str | Path] = (),
    read_only: Sequence[Path] = (),
) -> AgentOutcome:
    """Run the agent in its own process group (under dotenvx when it has secrets) and say how it ended.

    With ``sandbox`` (the cell's, ``CellRequest.sandbox``; every kind passes it on), the agent runs
    inside it: dotenvx stays outside and starts the sandbox, so the env files and keys never enter
    it. ``programs`` are what the agent starts besides ``argv[0]`` (shown read-only with their
    install), ``read_only`` the directories it reads besides the cell.

    Its failures are statuses, not exceptions; only an agent that cannot be
    started at all raises ``ArmStartError`` (a harness error: re-run on resume).
    Ctrl-C or SIGTERM (``KeyboardInterrupt``) stops the agent's tree and is the
    status ``interrupted``, so the arm still reads what the agent spent and keeps
    its transcript; the harness then stops the sweep after this cell.
    """
    if sandbox is not None:
        # Outside the sandbox a missing program or cwd is an OSError of the exec: say the same here.
        program = argv[0] if argv else ""
        found = shutil.which(program, path=env.get("PATH")) if os.sep not in program else str(cwd / program)
        missing = next((path for path in (str(cwd), found) if path is None or not os.path.exists(path)), "")
        if missing != "":
            raise ArmStartError(f"cannot start {what}: No such file or directory: {missing or program}")
        if sandbox.limits is not None:  # the disk watch stops the agent once the cell's files pass the limit
            should_stop = sandbox.limits.should_stop(should_stop)
        try:
            argv = sandbox.wrap(argv, cwd, env, programs=programs, read_only=read_only)
        except SandboxError as error:
            raise ArmStartError(f"cannot start {what} in its sandbox: {error}") from None
    command, directory = (secrets.wrap(argv, cwd) if secrets else (list(argv), cwd))
    # opencode (Bun) takes its working directory from PWD when set: it must be the agent's cwd.
    env = {**env, "PWD": str(cwd)}
    started = time.monotonic()
    try:
        result = processes.run(command, cwd=directory, env=env, stdout=stdout, stderr=stderr, stdin=stdin,
                               timeout=timeout, grace=grace, should_stop=should_stop)
    except KeyboardInterrupt as interrupt:  # processes.run has stopped the agent's whole tree
        return AgentOutcome(ArmStatus.INTERRUPTED, f"{what} was interrupted ({interrupt or 'KeyboardInterrupt'})",
                            None, time.monotonic() - started)
    except OSError as error:
        # error.filename is whatever was missing: the program, its cwd, or a file given as stdin.
        culprit = error.filename if error.filename is not None else command[0]
        raise ArmStartError(f"cannot start {what}: {error.strerror or error}: {culprit}") from None
    if result.timed_out:
        return AgentOutcome(ArmStatus.TIMEOUT, f"{what} did not finish within {timeout:g} s", None, result.seconds)
    if result.stopped:
        return AgentOutcome(ArmStatus(result.stopped), f"{what} was stopped: {result.stopped}", result.returncode,
                            result.seconds)
    if result.returncode in CANNOT_START and not _wrote(stdout):
        return AgentOutcome(ArmStatus.CONFIG_ERROR, f"{what} could not start: exit status {result.returncode} "
                            f"({CANNOT_START[result.returncode]}) before it wrote anything{_said(stderr)}",
                            result.returncode, result.seconds)
    if result.returncode != 0:
        return AgentOutcome(ArmStatus.ARM_ERROR, f"{what} exited with status {result.returncode}",
                            result.returncode, result.seconds)
    return AgentOutcome(ArmStatus.COMPLETED, None, 0, result.seconds)


#: The shell's exit statuses for a command that never ran: its program, or its ``#!`` interpreter, was not
#: found or could not be executed (a shim whose manager the sandbox does not show ends so).
CANNOT_START = {126: "found but not executable", 127: "not found"}


def _wrote(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _said(stderr: Path) -> str:
    """What the program printed on its way out (the last line of its stderr), for the error."""
    lines = [line for line in tail_lines(stderr) if line.strip()]  # through the crossing: the run dir is the cell's
    return f": {lines[-1].strip()[:300]}" if lines else ""


def agent_version(executable: str, origin: str | None = None, config_variables: Sequence[str] = ()) -> str:
    """``EXECUTABLE --version``, e.g. ``1.18.33`` (recorded in every row's provenance).

    Asked with HOME (and the agent's ``config_variables``) in a throwaway directory: some
    CLIs create their state dirs even for ``--version`` (Gemini's ``.gemini``, Codex's
    ``tmp``), and not in the user's.

    :param origin: the arm table that names the executable, for the error message.
    """
    where = f"{origin}: " if origin else ""
    try:
        return _version(executable, tuple(config_variables))
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ArmConfigError(f"{where}cannot run {executable} --version: {error}") from None
    except subprocess.CalledProcessError as error:
        raise ArmConfigError(f"{where}{executable} --version exited with {error.returncode}: "
                             f"{error.stderr[-300:]}") from None


@functools.lru_cache
def _version(executable: str, config_variables: tuple[str, ...]) -> str:
    """Asked once per process: every arm is built on the controller and on each xdist worker."""
    with tempfile.TemporaryDirectory(prefix="arena-version-") as scratch:
        env = {**os.environ, "HOME": scratch, **dict.fromkeys(config_variables, scratch)}
        return subprocess.run([executable, "--version"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120, check=True, env=env, cwd=scratch).stdout.strip()
