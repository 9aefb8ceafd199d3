"""Python environments without a container: a per-cell virtual environment built with uv.

An instance's ``env`` (or the ``--arena-env-specs`` entry for its repo and
version) names a Python version, requirements, pre-install steps and an
install command. The requirements are resolved once per spec and interpreter
(``uv pip compile``, under a file lock, so concurrent xdist workers resolve
once between them) into a pinned ``requirements.lock`` in the shared cache;
the environment is then built from that lock out of uv's shared package cache,
offline, and the spec's steps run. ``cell.templates`` does that once per spec and
base (a template) and gives every cell a copy.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..cache import process_leases
from ..files import write_atomic
from ..instances.swebench_specs import uv_config_text, uv_environment
from . import processes

#: ``version_info`` of an interpreter, read by running it (shims and symlinks are resolved by the answer).
_PROBE = "import sys, json; print(json.dumps([list(sys.version_info[:3]), sys.executable]))"


class EnvBuildError(Exception):
    """The cell's environment could not be built: a harness error, its log in the run dir."""


@dataclass(frozen=True)
class EnvSpec:
    """What an environment holds: ``{"python", "requirements", "pre_install", "install"}``, all optional.

    A shipped SWE-bench spec (``swebench_envs``) says more: the date everything is resolved as of
    (``as_of``: uv's ``exclude-newer``, for requirements, build dependencies and the steps' ``uv pip``),
    the requirements that override the repository's pins, the build tools sdists are built with, and
    the variables its tests run with.
    """

    python: str | None = None
    requirements: tuple[str, ...] = ()
    pre_install: tuple[str, ...] = ()
    install: str | None = None
    as_of: datetime | None = None
    overrides: tuple[str, ...] = ()
    build_constraints: tuple[str, ...] = ()
    variables: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> EnvSpec:
        return cls(
            python=data.get("python"),
            requirements=tuple(data.get("requirements") or ()),
            pre_install=tuple(data.get("pre_install") or ()),
            install=data.get("install") or None,
        )


@dataclass(frozen=True)
class PythonEnvironment:
    """A cell's built venv, and the variables that put it first for the arm and verify."""

    venv: Path
    spec: EnvSpec
    #: What uv runs with for this environment (its cache, its date): the install steps' ``uv pip`` too.
    uv_variables: Mapping[str, str] = field(default_factory=dict)
    #: Names the resolved environment (its directory in the store): the same for every cell built from it.
    identity: str = ""
    #: Paths of the venv whose files are hardlinks to a template's: every sandbox shows them read-only.
    read_only: tuple[Path, ...] = ()
    #: (a template's entry, the empty stand-in for it in this venv): the sandbox binds the one over the other,
    #: read-only (``Sandbox.binding``); such a venv works in that sandbox only.
    bound: tuple[tuple[Path, Path], ...] = ()

    def variables(self, path: str) -> dict[str, str]:
        return {**self.spec.variables, "VIRTUAL_ENV": str(self.venv),
                "PATH": os.pathsep.join([str(self.venv / "bin"), path])}


@functools.cache
def find_interpreter(version: str | None) -> tuple[Path, str]:
    """An interpreter on this machine whose version starts with ``version`` (PATH, pyenv, uv).

    None means the harness's own interpreter. A version that is not installed is
    an ``EnvBuildError`` naming where it looked: never another version instead.
    Looked up once per process (every cell of a spec asks); a failure is not cached.
    """
    if version is None:
        return Path(sys.executable), ".".join(map(str, sys.version_info[:3]))
    wanted = [int(part) for part in version.split(".")]
    looked: list[str] = []
    for candidate in _candidates(version):
        looked.append(str(candidate))
        found = _probe(candidate)
        if found and found[0][: len(wanted)] == wanted:
            return Path(found[1]), ".".join(map(str, found[0]))
    managed = _uv_managed(version)
    if managed:
        return managed
    raise EnvBuildError(
        f"Python {version} is not installed on this machine (looked on PATH, in pyenv's versions and "
        f"uv's managed Pythons: {', '.join(looked) or 'nothing found'}); install it, e.g. `uv python install {version}`"
    )


def _candidates(version: str) -> list[Path]:
    major_minor = ".".join(version.split(".")[:2])
    found: list[Path] = []
    for name in (f"python{major_minor}", f"python{version.split('.')[0]}", "python"):
        located = shutil.which(name)
        if located:
            found.append(Path(located))
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    versions = pyenv_root / "versions"
    if versions.is_dir():
        for entry in sorted(versions.iterdir(), reverse=True):
            if entry.name == version or entry.name.startswith(version + "."):
                found.append(entry / "bin" / "python")
    return found


def _probe(interpreter: Path) -> tuple[list[int], str] | None:
    try:
        completed = subprocess.run([str(interpreter), "-c", _PROBE], capture_output=True, text=True, timeout=30,
                                   check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if completed.returncode != 0:
        return None
    try:
        numbers, executable = json.loads(completed.stdout)
        return [int(number) for number in numbers], str(executable)
    except (ValueError, TypeError):
        raise EnvBuildError(
            f"{interpreter} did not answer the version probe as a Python interpreter does (expected a JSON "
            f"[version, executable] line, got {completed.stdout.strip()[:200]!r}); fix or remove it"
        ) from None


def _uv_managed(version: str) -> tuple[Path, str] | None:
    uv = find_uv()
    if uv is None:
        return None
    completed = subprocess.run(
        # --python-preference only-managed, not --managed-python: uv 0.5 (the declared minimum) has only this.
        [uv, "python", "find", "--python-preference", "only-managed", "--no-python-downloads", version],
        capture_output=True, text=True, check=False, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
    )
    if completed.returncode != 0:
        return None
    found = _probe(Path(completed.stdout.strip()))
    return (Path(found[1]), ".".join(map(str, found[0]))) if found else None


def find_uv() -> str | None:
    """The uv binary: the ``uv`` package's (``pip install uv``), else ``uv`` on PATH."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return shutil.which("uv")
    try:
        return str(find_uv_bin())
    except FileNotFoundError:
        return shutil.which("uv")


class EnvironmentStore:
    """Resolved specs and uv's package cache under ``root``, shared by every cell and worker."""

    def __init__(self, root: Path, max_bytes: int | None = None):
        self.root = root
        #: The cache's budget (--arena-cache-max): pruned to it after a template is built. None: never.
        self.max_bytes = max_bytes

    @property
    def uv_cache(self) -> Path:
        return self.root / "uv"

    @property
    def pip_cache(self) -> Path:
        """pip's cache for the steps (``pip install -e .``): shared, not each cell's private HOME's."""
        return self.root / "pip"

    def spec_dir(self, spec: EnvSpec, python_version: str) -> Path:
        identity: dict[str, Any] = {"python": python_version, "requirements": list(spec.requirements)}
        if spec.as_of is not None or spec.overrides or spec.build_constraints:
            # Only what a dated spec adds: an undated spec keeps the directory it had.
            identity |= {"as_of": spec.as_of.isoformat() if spec.as_of else None, "overrides": list(spec.overrides),
                         "build_constraints": list(spec.build_constraints)}
        material = json.dumps(identity, sort_keys=True)
        return self.root / "envs" / hashlib.sha256(material.encode()).hexdigest()[:16]

    def uv_variables(self, spec: EnvSpec, python_version: str) -> dict[str, str]:
        """The variables every uv call and step of ``spec`` runs with: the shared cache, and its date if it has one.

        The caches and the spec's resolution are held (``cache.Leases``) until the cell ends. uv links what it
        installs from its cache (``UV_LINK_MODE``, hardlink unless set otherwise): a package is stored once,
        however many templates install it.
        """
        leases = process_leases()
        for entry in (self.uv_cache, self.pip_cache, self.spec_dir(spec, python_version)):
            leases.hold(entry)
        variables = {"UV_CACHE_DIR": str(self.uv_cache), "PIP_CACHE_DIR": str(self.pip_cache),
                     "UV_PYTHON_DOWNLOADS": "never", "UV_LINK_MODE": os.environ.get("UV_LINK_MODE", "hardlink")}
        if spec.as_of is None:
            return variables
        config = self.spec_dir(spec, python_version).with_suffix(".uv.toml")
        if not config.is_file():
            config.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(config, uv_config_text(spec.as_of).encode())
        return {**variables, **uv_environment(spec.as_of, config, python_version)}

    def build(self, spec: EnvSpec, venv: Path, workspace: Path, cell_env: Mapping[str, str],
              log: Path, timeout: float) -> PythonEnvironment:
        """Create ``venv`` for ``spec``, then run its pre-install and install steps in ``workspace``."""
        uv = find_uv()
        if uv is None:
            raise EnvBuildError("uv is needed to build instance environments: pip install uv (or the 'envs' extra)")
        interpreter, python_version = find_interpreter(spec.python)
        _log(log, f"interpreter {interpreter} (Python {python_version})")
        variables = self.uv_variables(spec, python_version)
        if spec.as_of is not None:
            _log(log, f"resolved as of {variables['UV_EXCLUDE_NEWER']} (uv exclude-newer)")
        if not self._resolve_and_create(uv, spec, interpreter, python_version, venv, log, timeout, variables):
            lock = self.spec_dir(spec, python_version) / "requirements.lock"
            try:
                # Resolved earlier and its packages are in uv's shared cache: no network needed.
                self._create(uv, interpreter, venv, lock, ["--offline"], log, timeout, variables)
            except EnvBuildError:
                _log(log, "offline install from the shared cache failed (pruned?); retrying online")
                self._create(uv, interpreter, venv, lock, [], log, timeout, variables)
        environment = PythonEnvironment(venv=venv, spec=spec, uv_variables=variables,
                                        identity=self.spec_dir(spec, python_version).name)
        for step in spec.pre_install:
            self.run_step(environment, step, workspace, cell_env, log, timeout, "pre_install")
        if spec.install:
            self.run_step(environment, spec.install, workspace, cell_env, log, timeout, "install")
        return environment

    def _resolve_and_create(self, uv: str, spec: EnvSpec, interpreter: Path, python_version: str, venv: Path,
                            log: Path, timeout: float, variables: Mapping[str, str]) -> bool:
        """Resolve the spec to a pinned lock and build the first venv from it, if nobody has; True if we did.

        Both happen under the spec's file lock, so a cell that waited for it finds
        the lock resolved and uv's cache warm, and builds offline.
        """
        from filelock import FileLock

        directory = self.spec_dir(spec, python_version)
        lock = directory / "requirements.lock"
        if lock.is_file():
            return False
        directory.mkdir(parents=True, exist_ok=True)
        with FileLock(str(directory) + ".lock"):
            if lock.is_file():
                return False
            requirements = directory / "requirements.in"
            requirements.write_text("".join(line + "\n" for line in spec.requirements))
            staging = directory / f"requirements.lock.{os.getpid()}"
            clock = time.monotonic()
            if spec.requirements:
                self._uv(uv, ["pip", "compile", "--quiet", "--python", str(interpreter),
                              *self._pin_files(spec, directory), "--output-file", str(staging), str(requirements)],
                         log, timeout, variables)
            else:
                staging.write_text("")
            self._create(uv, interpreter, venv, staging, [], log, timeout, variables)
            os.replace(staging, lock)
            with open(directory / "arena-builds.log", "a") as builds:
                builds.write(f"{time.time():.3f} pid={os.getpid()} resolved and built in "
                             f"{time.monotonic() - clock:.2f}s\n")
            return True

    @staticmethod
    def _pin_files(spec: EnvSpec, directory: Path) -> list[str]:
        """uv's ``--overrides`` / ``--build-constraints`` options for the spec's pins, their files written."""
        options: list[str] = []
        for option, lines, name in (("--overrides", spec.overrides, "overrides.txt"),
                                    ("--build-constraints", spec.build_constraints, "build-constraints.txt")):
            if lines:
                (directory / name).write_text("".join(line + "\n" for line in lines))
                options += [option, str(directory / name)]
        return options

    def _create(self, uv: str, interpreter: Path, venv: Path, lock: Path, extra: Sequence[str],
                log: Path, timeout: float, variables: Mapping[str, str]) -> None:
        """``uv venv --seed`` and ``uv pip sync`` of the lock. Every venv is seeded with pip and setuptools: the
        steps may call pip, and so may an agent working in its cell's copy. The template compiles it after
        (``templates._compile_bytecode``), pip left out."""
        self._uv(uv, ["venv", "--quiet", "--clear", "--seed", *extra, "--python", str(interpreter), str(venv)],
                 log, timeout, variables)
        if lock.read_text().strip():
            constraints = lock.parent / "build-constraints.txt"
            build = ["--build-constraints", str(constraints)] if constraints.is_file() else []
            self._uv(uv, ["pip", "sync", "--quiet", *extra, *build, "--python", str(venv / "bin" / "python"),
                          str(lock)], log, timeout, variables)

    def _uv(self, uv: str, args: list[str], log: Path, timeout: float, variables: Mapping[str, str]) -> None:
        env = {**os.environ, **variables}
        env.pop("VIRTUAL_ENV", None)
        _log(log, "$ uv " + " ".join(args))
        result = processes.run([uv, *args], cwd=self.root, env=env, stdout=log, timeout=timeout)
        _log(log, f"# took {result.seconds:.2f}s")
        if result.returncode != 0:
            why = "timed out" if result.timed_out else f"exited {result.returncode}"
            raise EnvBuildError(f"environment build failed: `uv {args[0]} {args[1]}` {why}{_last_error(log)} "
                                "(see env.log)")

    def run_step(self, environment: PythonEnvironment, command: str, workspace: Path,
                 cell_env: Mapping[str, str], log: Path, timeout: float, what: str) -> None:
        """Run one of the spec's shell steps in the workspace with the venv (and uv) first on PATH.

        The step's ``uv pip`` calls share the cache and resolve as of the spec's date.
        """
        uv = find_uv()
        path = cell_env.get("PATH", os.defpath)
        if uv is not None:
            path = os.pathsep.join([str(Path(uv).parent), path])
        env = {**cell_env, **environment.variables(path),
               **(environment.uv_variables or {"UV_CACHE_DIR": str(self.uv_cache)})}
        _log(log, f"$ ({what}) {command}")
        result = processes.run(shell_argv(command), cwd=workspace, env=env, stdout=log, timeout=timeout)
        _log(log, f"# took {result.seconds:.2f}s")
        if result.returncode != 0:
            why = "timed out" if result.timed_out else f"exited {result.returncode}"
            raise EnvBuildError(f"environment build failed: {what} step `{command}` {why}{_last_error(log)} "
                                "(see env.log)")


def shell_argv(command: str) -> list[str]:
    """The argv that runs a shell command line: bash where there is one, else sh."""
    return [shutil.which("bash") or "/bin/sh", "-c", command]


#: Lines by which a step says it reached for the network and did not get there (git, curl, pip, requests, socket).
UNREACHED_NETWORK = re.compile(r"Could not resolve host|Temporary failure in name resolution|Name or service not "
                               r"known|Network is unreachable|Failed to establish a new connection|No route to host")


def _last_error(log: Path) -> str:
    """Why the log's last step failed, as ``: line``; empty when it does not say.

    A line showing the step reached for the network and did not get there wins (the build needs a
    network it was not given: an install that clones a submodule from github.com); otherwise the last
    line that says why (``error:``, ``ERROR``...).
    """
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    starts = [index for index, line in enumerate(lines) if line.startswith("$ ")]
    step = lines[starts[-1]:] if starts else lines
    unreached = [line.strip() for line in step if UNREACHED_NETWORK.search(line)]
    if unreached:
        return f": it needs the network, which it could not reach: {unreached[0][:300]}"
    said = [line.strip() for line in step[-200:] if re.search(r"\berror\b|Error|No matching|not found", line)]
    return f": {said[-1][:300]}" if said else ""


def _log(log: Path, line: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as out:
        out.write(line + "\n")
