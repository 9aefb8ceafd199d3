"""SWE-bench's environment specs, shipped as data, and the date each SWE-bench environment is resolved as of.

``swebench_specs.toml`` (beside this module) holds a spec for every Python repository and version
of SWE-bench (full, Lite and Verified), translated from SWE-bench's own
``MAP_REPO_VERSION_TO_SPECS_PY`` by ``bench/swebench_specs.py``. Besides the
keys of an instance's ``env`` (python, requirements, pre_install, install) a
shipped spec may say:

- ``requirements_files`` / ``environment_files``: SWE-bench reads the
  repository's own requirements (a pip file, or a conda ``environment.yml``)
  at the row's ``environment_setup_commit``; the first path that exists there
  is used (``requirements_from_files``, ``requirements_from_environment_file``),
  and the spec's own pinned requirements override its pins, as SWE-bench's
  later ``pip install`` of its ``pip_packages`` does (``override_requirements``).
- ``date_floor``: the earliest date at which the spec's own pins resolve for its
  Python; an environment is never resolved as of an earlier date.
- ``conda_only``: why the spec cannot be reproduced without conda. A row with
  such a spec is a harness error with that reason, never a silently different
  environment.
- ``system_steps``: SWE-bench's steps that need root or a download outside the
  package index (``apt-get``, ``wget``, ``locale-gen``); they are not run.
- ``eval_env``: variables SWE-bench exports before running the tests.
- ``network``: what the tests need of the network, which SWE-bench's containers had: servers they
  connect to (``http://httpbin.org/``) and addresses they expect a connection to hang on
  (``tarpit://10.255.255.1:80``, requests' timeout tests). A row with such a spec is a harness error,
  before any arm runs, when this machine does not give one of them (never a verdict read from the
  tests' log); ``worker.health.unreachable_server`` checks. Such a row's graded tests share the
  machine's network; every other row's run sealed (``cell.network.grading_network``).

**Resolved as of the row's date.** Today's packages break 2023's installs
(setuptools without ``pkg_resources``, NumPy 2, pytest 8, pip without the
legacy editable fallback), so each SWE-bench environment is resolved as of
``resolution_date``: the commit date of the row's ``environment_setup_commit``
(``created_at`` when that commit cannot be read), raised to the spec's
``date_floor`` and to the date packages first supported the spec's Python
(``PYTHON_FLOORS``). uv applies it everywhere: ``uv venv --seed`` (pip and
setuptools as of the date), ``uv pip compile`` / ``sync``, and the install
steps, which run ``uv pip install`` with ``UV_CONFIG_FILE`` pointing at
``uv_config_text``'s file (``uv_environment``), so build dependencies are as of the date too.
"""

from __future__ import annotations

import functools
import re
import subprocess
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from .selection import created_at

#: The first day packages (numpy and pytest wheels, a setuptools that imports) supported each Python,
#: about three months after its x.0 release: resolving as of an earlier date gives packages that do not run
#: on it (setuptools 41, of 2019, fails to import on Python 3.9). Checked by bench/swebench_env_check.py.
PYTHON_FLOORS: Mapping[str, datetime] = {
    version: datetime.fromisoformat(day).replace(tzinfo=UTC)
    for version, day in {
        "3.5": "2016-01-01", "3.6": "2017-04-01", "3.7": "2018-10-01", "3.8": "2020-01-01",
        "3.9": "2021-01-01", "3.10": "2022-01-01", "3.11": "2023-01-01", "3.12": "2024-01-01",
        "3.13": "2025-01-01",
    }.items()
}

#: setuptools 64 (2022-08-11) is the first with PEP 660 editable installs, which ``uv pip install -e``
#: needs; a build before that date takes setuptools as of this one (it still has ``pkg_resources``).
SETUPTOOLS_EDITABLE_FLOOR = datetime(2022, 9, 1, tzinfo=UTC)

#: The oldest setuptools whose ``build_meta:__legacy__`` backend uv's builds accept.
_OLDEST_PEP517_SETUPTOOLS = "40.8.0"

#: The shipped specs, inside the package.
SPECS_RESOURCE = "instances/swebench_specs.toml"

#: SWE-bench's requirements-file reader skips these lines (the project itself, comments).
_SKIPPED_REQUIREMENT_PREFIXES = ("-e .", "#", ".[test")

#: Packages yanked from PyPI since, and what SWE-bench installs instead.
_REPLACED_REQUIREMENTS = {"types-pkg_resources": "types-setuptools"}

_SPEC_KEYS = {"python", "requirements", "pre_install", "install"}
_EXTRA_KEYS = {"requirements_files", "environment_files", "date_floor", "conda_only", "system_steps",
               "eval_env", "sdist_only", "swebench_test_cmd", "notes", "network"}


class ShippedSpecsError(Exception):
    """The shipped (or a given) SWE-bench specs file is malformed; the message names file and table."""


@dataclass(frozen=True)
class CondaNames:
    """How conda package names in an ``environment.yml`` map to PyPI: renamed, or not installable from it."""

    pypi_names: Mapping[str, str] = field(default_factory=dict)
    not_on_pypi: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ShippedSpec:
    """One repository version's environment, as SWE-bench builds it, in the harness's terms."""

    repo: str
    version: str
    env: Mapping[str, Any]
    requirements_files: tuple[str, ...] = ()
    environment_files: tuple[str, ...] = ()
    date_floor: datetime | None = None
    conda_only: str | None = None
    system_steps: tuple[str, ...] = ()
    eval_env: Mapping[str, str] = field(default_factory=dict)
    sdist_only: tuple[str, ...] = ()
    swebench_test_cmd: str | None = None
    notes: tuple[str, ...] = ()
    network: tuple[str, ...] = ()

    @property
    def python(self) -> str | None:
        python = self.env.get("python")
        return str(python) if python is not None else None

    def identity(self) -> dict[str, Any]:
        """Everything the spec says, as plain JSON: part of a cell's key."""
        identity = {"repo": self.repo, "version": self.version, "env": dict(self.env),
                    "requirements_files": list(self.requirements_files),
                    "environment_files": list(self.environment_files),
                    "date_floor": uv_timestamp(self.date_floor) if self.date_floor else None,
                    "conda_only": self.conda_only, "eval_env": dict(self.eval_env)}
        # Only when given: the keys of rows whose spec names no network stay as they were.
        return identity | ({"network": list(self.network)} if self.network else {})


@dataclass(frozen=True)
class ShippedSpecs:
    """Every shipped spec by ``(repo, version)``, and the conda name table ``environment.yml`` files need."""

    specs: Mapping[tuple[str, str], ShippedSpec]
    conda: CondaNames
    source: str

    def get(self, repo: str, version: str) -> ShippedSpec | None:
        return self.specs.get((repo, str(version)))


@dataclass(frozen=True)
class EnvironmentFileRequirements:
    """A conda ``environment.yml`` as pip requirements, and the packages that PyPI cannot give."""

    requirements: tuple[str, ...]
    dropped: Mapping[str, str]


def load_shipped_specs(path: Path | None = None) -> ShippedSpecs:
    """Read the shipped specs (or those at ``path``); raise ``ShippedSpecsError`` naming what is wrong."""
    if path is None:
        return _shipped_specs()
    return _load_specs(path)


@functools.cache
def _shipped_specs() -> ShippedSpecs:
    # Read once per process: every instance file of a session asks.
    return _load_specs(None)


def _load_specs(path: Path | None) -> ShippedSpecs:
    if path is None:
        text = resources.files("pytest_swe_arena").joinpath(SPECS_RESOURCE).read_text(encoding="utf-8")
        source = f"pytest_swe_arena/{SPECS_RESOURCE}"
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ShippedSpecsError(f"{path}: cannot read: {error}") from None
        source = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ShippedSpecsError(f"{source}: cannot read TOML: {error}") from None
    return parse_shipped_specs(data, source)


def parse_shipped_specs(data: Mapping[str, Any], source: str) -> ShippedSpecs:
    """Turn the TOML document of a specs file into ``ShippedSpecs``, checking every table."""
    tables = data.get("specs")
    if not isinstance(tables, dict) or not tables:
        raise ShippedSpecsError(f'{source}: expected tables [specs."owner/name"."VERSION"]')
    specs: dict[tuple[str, str], ShippedSpec] = {}
    for repo, versions in tables.items():
        if "/" not in repo or not isinstance(versions, dict):
            raise ShippedSpecsError(f'{source}: [specs."{repo}"] must be a repo "owner/name" holding one table '
                                    "per version")
        for version, table in versions.items():
            specs[(repo, version)] = _parse_spec(f'{source}: [specs."{repo}"."{version}"]', repo, version, table)
    conda = data.get("conda", {})
    if not isinstance(conda, dict):
        raise ShippedSpecsError(f"{source}: [conda] must be a table")
    names = CondaNames(pypi_names=_string_table(f"{source}: [conda.pypi_names]", conda.get("pypi_names", {})),
                       not_on_pypi=_string_table(f"{source}: [conda.not_on_pypi]", conda.get("not_on_pypi", {})))
    return ShippedSpecs(specs=specs, conda=names, source=source)


def _parse_spec(where: str, repo: str, version: str, table: Any) -> ShippedSpec:
    from .specs import env_problem

    if not isinstance(table, dict):
        raise ShippedSpecsError(f"{where} must be a table")
    unknown = sorted(set(table) - _SPEC_KEYS - _EXTRA_KEYS)
    if unknown:
        raise ShippedSpecsError(f"{where}: unknown key(s) {', '.join(unknown)}; expected some of "
                                f"{', '.join(sorted(_SPEC_KEYS | _EXTRA_KEYS))}")
    env = {key: value for key, value in table.items() if key in _SPEC_KEYS}
    problem = env_problem(env)
    if problem:
        raise ShippedSpecsError(f"{where}: {problem}")
    floor = table.get("date_floor")
    if floor is not None:
        floor = _parse_date(f"{where}: field 'date_floor'", floor)
    network = _strings(where, table, "network")
    for url in network:
        if not re.fullmatch(r"(https?://[A-Za-z0-9.\-]+(:\d+)?/?|tarpit://[A-Za-z0-9.\-]+:\d+)", url):
            raise ShippedSpecsError(f"{where}: field 'network': {url!r} is not a server's URL; expected e.g. "
                                    "'http://httpbin.org/', 'https://example.org:8443/' or 'tarpit://10.255.255.1:80'")
    for key in ("conda_only", "swebench_test_cmd"):
        if key in table and not isinstance(table[key], str):
            raise ShippedSpecsError(f"{where}: field {key!r} must be a string")
    return ShippedSpec(
        repo=repo, version=version, env=env,
        requirements_files=_strings(where, table, "requirements_files"),
        environment_files=_strings(where, table, "environment_files"),
        date_floor=floor,
        conda_only=table.get("conda_only"),
        system_steps=_strings(where, table, "system_steps"),
        eval_env=_string_table(f"{where}: field 'eval_env'", table.get("eval_env", {})),
        sdist_only=_strings(where, table, "sdist_only"),
        swebench_test_cmd=table.get("swebench_test_cmd"),
        notes=_strings(where, table, "notes"),
        network=network,
    )


def _strings(where: str, table: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ShippedSpecsError(f"{where}: field {key!r} must be a list of strings")
    return tuple(value)


def _string_table(where: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise ShippedSpecsError(f"{where} must be a table of strings")
    return dict(value)


def _parse_date(where: str, value: Any) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ShippedSpecsError(f"{where}: {value!r} is not a date; expected e.g. 2023-06-01T00:00:00Z") from None
    else:
        raise ShippedSpecsError(f"{where}: expected a date such as 2023-06-01T00:00:00Z")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# --- the date -----------------------------------------------------------------------------------------------


def row_date(row: Mapping[str, Any], commit_date: Callable[[str], datetime | None]) -> datetime | None:
    """The date a SWE-bench row's environment is as of: its ``environment_setup_commit``'s, else ``created_at``.

    ``commit_date`` reads a commit's committer date from the repository (None when it is not there).
    None when the row has neither, as rows that are not SWE-bench's have.
    """
    commit = row.get("environment_setup_commit")
    if isinstance(commit, str) and commit:
        found = commit_date(commit)
        if found is not None:
            return found
    return created_at(row)


def git_commit_date(git_dir: Path, commit: str) -> datetime | None:
    """The committer date of ``commit`` in the repository at ``git_dir`` (bare or not), or None."""
    completed = subprocess.run(["git", "--git-dir", str(git_dir), "show", "-s", "--format=%cI", f"{commit}^{{commit}}"],
                               capture_output=True, text=True, check=False)
    if completed.returncode != 0 or not completed.stdout.strip():
        return None
    return datetime.fromisoformat(completed.stdout.strip())


def resolution_date(row_date: datetime | None, python: str | None, floor: datetime | None = None) -> datetime | None:
    """The date to resolve as of: the row's, raised to the spec's floor and to its Python's; None without a row date."""
    if row_date is None:
        return None
    candidates = [row_date.astimezone(UTC)]
    if floor is not None:
        candidates.append(floor.astimezone(UTC))
    python_floor = PYTHON_FLOORS.get(".".join((python or "").split(".")[:2]))
    if python_floor is not None:
        candidates.append(python_floor)
    return max(candidates)


def uv_timestamp(moment: datetime) -> str:
    """``moment`` as uv's ``exclude-newer`` reads it (RFC 3339, UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def uv_config_text(as_of: datetime) -> str:
    """A ``uv.toml`` that resolves everything as of ``as_of`` (setuptools no older than its first PEP 660 release)."""
    lines = [f"# pytest-swe-arena: resolve as of {uv_timestamp(as_of)}", f'exclude-newer = "{uv_timestamp(as_of)}"']
    if as_of < SETUPTOOLS_EDITABLE_FLOOR:
        lines += ["", "[exclude-newer-package]", f'setuptools = "{uv_timestamp(SETUPTOOLS_EDITABLE_FLOOR)}"']
    return "\n".join(lines) + "\n"


def uv_environment(as_of: datetime, config_file: Path, python_version: str) -> dict[str, str]:
    """Variables for every uv call and install step of an environment resolved as of ``as_of``.

    ``config_file`` must hold ``uv_config_text(as_of)``. It replaces uv's own config discovery (a
    ``uv.toml`` in the workspace is not read either); ``UV_EXCLUDE_NEWER`` says the same date to any uv
    that reads only the variable. ``UV_COMPILE_BYTECODE``: pip compiles what it installs, and SWE-bench's
    environments were installed by pip; without it a dependency's first import compiles it under the
    tests' warning filters (flask's ``filterwarnings = error`` makes blinker's invalid escape a SyntaxError).
    Not before Python 3.7 (``python_version``, e.g. ``3.6.15``): uv's compile script needs
    ``py_compile.PycInvalidationMode`` and every install would fail (astropy 1.3 and 2.0); the template's
    own ``compileall`` compiles those environments after the build.
    """
    variables = {"UV_CONFIG_FILE": str(config_file), "UV_EXCLUDE_NEWER": uv_timestamp(as_of)}
    if uv_compiles_bytecode(python_version):
        variables["UV_COMPILE_BYTECODE"] = "1"
    return variables


def uv_compiles_bytecode(python_version: str) -> bool:
    """Whether uv can byte-compile what it installs for this Python (``3.6.15``, ``3.11``): from 3.7 only (its
    compile script needs ``py_compile.PycInvalidationMode``)."""
    return tuple(int(part) for part in python_version.split(".")[:2]) >= (3, 7)


# --- requirements from the repository -----------------------------------------------------------------------


def requirements_from_files(read: Callable[[str], str | None], paths: Sequence[str]) -> tuple[str, ...] | None:
    """The requirements of the first of ``paths`` that ``read`` finds, as SWE-bench reads them; None if none.

    ``read(path)`` returns a repository file's text at the environment's commit, or None. ``-r``
    includes are read relative to the including file; the project itself (``-e .``), comments and
    pip options are skipped; yanked packages are replaced as SWE-bench replaces them.
    """
    for path in paths:
        text = read(path)
        if text is not None:
            return tuple(_requirement_lines(read, path, text, seen={path}))
    return None


def _requirement_lines(read: Callable[[str], str | None], path: str, text: str, seen: set[str]) -> list[str]:
    directory = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
    found: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(("-r ", "--requirement ")):
            included = _normalise_path(directory + line.split(None, 1)[1].strip())
            nested = read(included) if included not in seen else None
            if nested is not None:
                found += _requirement_lines(read, included, nested, seen | {included})
            continue
        line = re.sub(r"\s+#.*$", "", line)
        if not line or line.startswith(_SKIPPED_REQUIREMENT_PREFIXES) or line.startswith("-"):
            continue
        found.append(_replace_yanked(line))
    return found


def _normalise_path(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def _replace_yanked(line: str) -> str:
    name = _requirement_name(line)
    for yanked, replacement in _REPLACED_REQUIREMENTS.items():
        if name == _canonical(yanked):
            return replacement
    return line


def requirements_from_environment_file(text: str, conda: CondaNames) -> EnvironmentFileRequirements:
    """A conda ``environment.yml`` as pip requirements: conda match specs translated, its ``pip:`` list kept.

    ``python`` and ``pip`` are left out (the spec names the Python); names are mapped with
    ``conda.pypi_names``; packages in ``conda.not_on_pypi`` are dropped, with the reason.
    """
    import yaml

    document = yaml.safe_load(text)
    dependencies = document.get("dependencies") if isinstance(document, dict) else None
    if not isinstance(dependencies, list):
        raise ValueError("environment file has no 'dependencies' list")
    pypi_names = {_canonical(name): target for name, target in conda.pypi_names.items()}
    not_on_pypi = {_canonical(name): reason for name, reason in conda.not_on_pypi.items()}
    requirements: list[str] = []
    dropped: dict[str, str] = {}
    for entry in dependencies:
        if isinstance(entry, dict):
            requirements += [str(item).strip() for item in entry.get("pip") or () if str(item).strip()]
            continue
        name, specifier = _conda_match_spec(str(entry))
        canonical = _canonical(name)
        if canonical in ("python", "pip"):
            continue
        if canonical in not_on_pypi:
            dropped[name] = not_on_pypi[canonical]
            continue
        requirements.append(pypi_names.get(canonical, name) + specifier)
    return EnvironmentFileRequirements(requirements=tuple(requirements), dropped=dropped)


def conda_requirement(entry: str) -> str:
    """A conda match spec (``numpy=1.2``, ``'scipy==1.5.2'``, ``pandas<2.0.0``) as a pip requirement."""
    name, specifier = _conda_match_spec(entry)
    return name + specifier


def _conda_match_spec(entry: str) -> tuple[str, str]:
    """``numpy=1.2`` / ``numpy 1.2.*`` / ``conda-forge::numpy>=1.2`` as a name and a pip specifier."""
    entry = re.sub(r"\s+#.*$", "", entry).strip()
    entry = entry.split("::", 1)[-1]
    match = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)$", entry)
    if not match:
        raise ValueError(f"not a conda package spec: {entry!r}")
    name, rest = match.group(1), match.group(2).strip()
    if not rest:
        return name, ""
    if rest.startswith("=") and not rest.startswith("=="):
        version = rest[1:].split("=", 1)[0]  # name=version=build: the build is conda's
        return name, f"=={version}" if "*" in version else f"=={version}.*"
    if rest[0].isdigit():
        version = rest.split()[0]
        return name, f"=={version}"
    return name, rest.replace(" ", "")


def override_requirements(spec_requirements: Sequence[str]) -> tuple[str, ...]:
    """The spec's requirements that override the repository file's (``uv pip compile --override``).

    Those with a version specifier: SWE-bench's ``pip install`` of its ``pip_packages`` after the
    repository's requirements replaces a file's pin with its own, and leaves a bare name as installed.
    """
    return tuple(line for line in spec_requirements if re.search(r"[<>=!~@]", line.split(";", 1)[0]))


def build_constraints(spec_requirements: Sequence[str]) -> tuple[str, ...]:
    """The spec's pins of build tools (setuptools, wheel): sdists are built with them (``--build-constraints``).

    SWE-bench's pip built a pinned sdist (MarkupSafe 1.0, whose setup.py imports what setuptools 46
    removed) with the setuptools the spec pins into the environment; an isolated build as of the date
    would take a newer one. A setuptools pin older than 40.8.0, the first with the PEP 517 backend
    uv builds with, is raised to it.
    """
    from packaging.version import InvalidVersion, Version

    found: list[str] = []
    for line in spec_requirements:
        name = _requirement_name(line)
        if name not in ("setuptools", "wheel") or "==" not in line:
            continue
        if name == "setuptools":
            try:
                if Version(line.split("==", 1)[1].split(";")[0].strip()) < Version(_OLDEST_PEP517_SETUPTOOLS):
                    line = f"setuptools=={_OLDEST_PEP517_SETUPTOOLS}"
            except InvalidVersion:
                pass
        found.append(line)
    return tuple(found)


def _requirement_name(line: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._\-]*)", line)
    return _canonical(match.group(1)) if match else ""


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
