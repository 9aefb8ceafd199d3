"""Generate pytest_swe_arena/instances/swebench_specs.toml from SWE-bench's own specs (run by hand, never in CI).

    python bench/swebench_specs.py --swebench /path/to/SWE-bench [--rev v4.1.0] [--no-resolve]

Reads ``MAP_REPO_VERSION_TO_SPECS_PY``, ``MAP_REPO_TO_REQS_PATHS`` and
``MAP_REPO_TO_ENV_YML_PATHS`` from ``swebench/harness/constants/python.py`` at
``--rev`` of a SWE-bench checkout (a bare clone will do). SWE-bench 5.0 removed
that module (5.x rows carry their own eval scripts and Dockerfiles); its last
content, unchanged from v4.1.0 until it was deleted, is what 4.1 and 5.x's
``swebench-og`` images were built from, so ``v4.1.0`` is the default.

Each spec is translated to the harness's terms (see pytest_swe_arena/swebench_envs.py):
conda ``packages`` and ``pip_packages`` become ``requirements``; ``requirements.txt`` /
``environment.yml`` sources become ``requirements_files`` / ``environment_files``;
``python -m pip install`` becomes ``uv pip install`` (Python 3.7 and later);
``apt-get`` / ``wget`` / ``locale-gen`` steps go to ``system_steps``; Django's
``export`` lines to ``eval_env``. With uv, the converter also finds each spec's
``date_floor`` (the first month its pins resolve for its Python, by bisection on
``--exclude-newer``) and marks ``conda_only`` the specs whose pins need conda:
compiled packages without a wheel for that Python on PyPI, and Python 3.5,
which uv does not support. ``--no-resolve`` keeps the floors and marks of the
existing output file instead of asking the index.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_swe_arena.instances.swebench_specs import (  # noqa: E402
    PYTHON_FLOORS,
    SETUPTOOLS_EDITABLE_FLOOR,
    build_constraints,
    conda_requirement,
    load_shipped_specs,
    uv_timestamp,
)

OUT = ROOT / "pytest_swe_arena" / "instances" / "swebench_specs.toml"
SPECS_PATH = "swebench/harness/constants/python.py"
#: SWE-Gym's specs: its SWE-bench fork (SWE-Gym/SWE-Bench-Fork) keeps them in one constants module.
SWE_GYM_SPECS_PATH = "swebench/harness/constants.py"
#: The commit of SWE-Gym/SWE-Bench-Fork the shipped SWE-Gym specs were read from.
SWE_GYM_REV = "242429c188fcfd06aad13fce9a54d450470bf0ac"
#: SWE-Gym's repositories (its other specs are SWE-bench's, read from SWE-bench itself).
SWE_GYM_REPOS = ("getmoto/moto", "pandas-dev/pandas", "python/mypy", "dask/dask", "iterative/dvc", "conan-io/conan",
                 "pydantic/pydantic", "modin-project/modin", "Project-MONAI/MONAI", "facebookresearch/hydra",
                 "bokeh/bokeh")

#: Not a SWE-bench repository: the harness's seq2seq smoke task.
SKIPPED_REPOS = {"swe-bench/humaneval"}

#: Compiled packages whose source build needs more than a C compiler and Python's headers
#: (Fortran, BLAS/LAPACK, GEOS/PROJ, HDF5...): a pin of one without a wheel needs conda.
NEEDS_TOOLCHAIN = {"numpy", "scipy", "pandas", "matplotlib", "scikit-learn", "h5py", "netcdf4", "gdal",
                   "pyproj", "cartopy", "shapely", "fiona", "rasterio", "tables", "numba", "llvmlite"}

#: setuptools' path-based editable install (a ``.pth`` naming the source tree), what SWE-bench's pip made with
#: ``setup.py develop``; its default PEP 660 install maps the package through an import hook, under which
#: pylint finds none of its checkers' messages ("No such message id or symbol 'C0301'"). Other backends
#: ignore the setting.
COMPAT_EDITABLE = "-C editable_mode=compat"

#: What a repository's tests need of the network at the versions given (SWE-bench's containers had the
#: internet): a spec's ``network``. requests before 2.9 tests against httpbin.org itself (pytest-httpbin's local
#: server after); from 2.4 its timeout tests expect a connection to 10.255.255.1 (its TARPIT) to hang.
NETWORK = [("psf/requests", lambda version: version_key(version) < (2, 9), ["http://httpbin.org/",
                                                                          "https://httpbin.org/"]),
           ("psf/requests", lambda version: version_key(version) >= (2, 4), ["tarpit://10.255.255.1:80"])]

#: pre_install / eval lines SWE-bench runs as root or that download outside the package index.
SYSTEM_STEP = re.compile(r"apt-get|\bwget\b|\bcurl\b|locale-gen|/etc/|QHULL")

#: How conda names in environment.yml files map to PyPI, and what PyPI cannot give.
CONDA_PYPI_NAMES = {
    "matplotlib-base": "matplotlib",
    "dask-core": "dask",
    "pyqt": "PyQt5",
    "pytables": "tables",
    "python-graphviz": "graphviz",
    "nbconvert-core": "nbconvert",
    "pystemmer": "PyStemmer",
}
CONDA_NOT_ON_PYPI = {
    "cdms2": "conda-forge only",
    "hdf5": "the HDF5 C library (h5py's and netCDF4's wheels bundle it)",
    "c-compiler": "a compiler toolchain",
    "cxx-compiler": "a compiler toolchain",
    "compilers": "a compiler toolchain",
    "pkg-config": "a system tool",
    "graphviz": "the Graphviz programs (PyPI's graphviz is a Python wrapper)",
    "ffmpeg": "a system program",
    "tk": "the Tk library (Python's own tkinter uses the system's)",
    "gtk3": "a system library",
    "gtk4": "a system library",
    "pygobject": "needs GObject introspection libraries to build from PyPI's sdist",
    "wxpython": "no Linux wheel on PyPI; a source build needs GTK development libraries",
    "cartopy": "no wheel before 0.22 on PyPI; a source build needs GEOS and PROJ",
    "iris": "PyPI's scitools-iris needs cartopy, which needs GEOS and PROJ to build before 0.22",
    "cfgrib": "needs the ecCodes C library, which its import fails without",
    "pynio": "conda-forge only",
    "nodejs": "a system program",
    "nodefaults": "a channel, not a package",
}


@dataclass
class Translated:
    """One spec in the output file's terms, plus what the converter noticed."""

    repo: str
    version: str
    table: dict[str, Any] = field(default_factory=dict)

    @property
    def needs_repo_files(self) -> bool:
        return bool(self.table.get("requirements_files") or self.table.get("environment_files"))


def read_swebench_specs(swebench: Path, rev: str) -> dict[str, Any]:
    """The constants of SWE-bench's python.py at ``rev``: a module of literal data, run in a bare namespace."""
    text = subprocess.run(["git", "-C", str(swebench), "show", f"{rev}:{SPECS_PATH}"], capture_output=True,
                          text=True, check=True).stdout
    namespace: dict[str, Any] = {"__builtins__": {"range": range, "int": int, "dict": dict, "list": list}}
    exec(compile(text, f"{rev}:{SPECS_PATH}", "exec"), namespace)
    return namespace


def read_swe_gym_specs(fork: Path, rev: str) -> dict[str, Any]:
    """The constants of SWE-Gym's fork at ``rev`` (a module that imports enum, pathlib and typing: run as a module)."""
    text = subprocess.run(["git", "-C", str(fork), "show", f"{rev}:{SWE_GYM_SPECS_PATH}"], capture_output=True,
                          text=True, check=True).stdout
    namespace: dict[str, Any] = {"__name__": "swe_gym_constants"}
    exec(compile(text, f"{rev}:{SWE_GYM_SPECS_PATH}", "exec"), namespace)
    return namespace


def translate(repo: str, version: str, spec: Mapping[str, Any], reqs_paths: Mapping[str, list[str]],
              env_yml_paths: Mapping[str, list[str]]) -> Translated:
    """SWE-bench's spec for ``repo`` ``version`` as a shipped spec table (without date floor or conda marks)."""
    out = Translated(repo, version)
    table = out.table
    python = str(spec["python"])
    table["python"] = python
    packages = str(spec.get("packages", "")).strip()
    conda_requirements: list[str] = []
    if packages == "requirements.txt":
        table["requirements_files"] = list(reqs_paths[repo])
    elif packages == "environment.yml":
        table["environment_files"] = list(env_yml_paths[repo])
    elif packages:
        conda_requirements = [conda_requirement(entry) for entry in shlex.split(packages)]
    table["requirements"] = merge_requirements(conda_requirements, list(spec.get("pip_packages", [])))
    pre_install = [str(step) for step in spec.get("pre_install", [])]
    system = [step for step in pre_install if SYSTEM_STEP.search(step)]
    table["pre_install"] = [step for step in pre_install if step not in system]
    eval_env: dict[str, str] = {}
    for command in spec.get("eval_commands", []):
        exported = re.fullmatch(r"export (\w+)=(\S+)", command.strip())
        if exported:
            eval_env[exported.group(1)] = exported.group(2).strip("'\"")
        else:
            system.append(command)
    notes: list[str] = []
    if "install" in spec:
        table["install"], install_notes = uv_install(str(spec["install"]), python)
        notes += install_notes
    if system:
        table["system_steps"] = system
    if eval_env:
        table["eval_env"] = eval_env
    if spec.get("no_use_env"):
        notes.append("SWE-bench adds the environment file's packages to a fresh conda env (no_use_env)")
    if spec.get("execute_test_as_nonroot"):
        notes.append("SWE-bench runs these tests as a non-root user")
    if spec.get("nano_cpus"):
        notes.append(f"SWE-bench limits the container to {spec['nano_cpus'] / 1e9:g} CPUs")
    if "test_cmd" in spec:
        table["swebench_test_cmd"] = str(spec["test_cmd"])
    network = [need for (needy, applies, needs) in NETWORK if needy == repo and applies(version) for need in needs]
    if network:
        table["network"] = network
    if notes:
        table["notes"] = notes
    return out


def merge_requirements(conda: Sequence[str], pip: Sequence[str]) -> list[str]:
    """conda's packages then pip's, as one list: a pip pin replaces conda's entry for the same package."""
    pinned_by_pip = {requirement_name(line) for line in pip if re.search(r"[<>=!~]", line)}
    merged: list[str] = []
    for line in [*[entry for entry in conda if requirement_name(entry) not in pinned_by_pip], *pip]:
        if line not in merged:
            merged.append(line)
    return merged


def uv_install(command: str, python: str) -> tuple[str, list[str]]:
    """SWE-bench's install command with ``uv pip install`` for pip where uv can build it (Python 3.7+).

    An editable install is path-based (``COMPAT_EDITABLE``), as pip's ``setup.py develop`` of
    SWE-bench's images made it.

    An editable install is retried without build isolation: a project whose build requirements
    forbid setuptools 64 (pylint 2.15's ``setuptools~=62.6``) has no PEP 660 hook in its isolated
    build, and pip's legacy ``setup.py develop`` fallback is gone from uv; the venv's own setuptools
    (64 or later, see SETUPTOOLS_EDITABLE_FLOOR) builds it then.
    """
    if not python_at_least(python, "3.7") or "pip install" not in command:
        return command, []
    notes = []
    # ``python -m pip install``, and SWE-Gym's bare ``pip install`` (never ``uv pip install`` or ``pipx install``)
    translated = re.sub(r"(?<!uv )(?<![\w-])(?:python3? -m )?pip install\b", "uv pip install", command)
    if "--no-use-pep517" in translated:
        translated = re.sub(r"\s*--no-use-pep517", "", translated)
        notes.append("install: --no-use-pep517 dropped (uv builds a setup.py project with setuptools' legacy "
                     "backend)")
    if re.search(r"(^|\s)(-e|--editable)\s", translated):
        translated = translated.replace("uv pip install", f"uv pip install {COMPAT_EDITABLE}")
        if "--no-build-isolation" not in translated:
            retry = translated.replace("uv pip install", "uv pip install --no-build-isolation", 1)
            translated = f"{translated} || {retry}"
            notes.append("install: an editable build that fails in isolation is retried with the venv's setuptools")
    return translated, notes


def python_at_least(version: str, minimum: str) -> bool:
    return tuple(int(part) for part in version.split(".")[:2]) >= tuple(int(part) for part in minimum.split("."))


def requirement_name(line: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._\-]*)", line)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else ""


# --- asking the index: date floors and wheels ---------------------------------------------------------------


#: uv's words when an offline resolution needed a page its cache lacks.
OFFLINE_MISS = re.compile(r"offline|network (connectivity )?(is|was) disabled|not found in the cache", re.I)


class Resolver:
    """``uv pip compile`` for a Python version as of a date, cached by (python, requirements, date, wheels only)."""

    def __init__(self, uv: str, cache: Path):
        self.uv = uv
        self.cache = cache
        self.answers: dict[tuple[str, tuple[str, ...], str, bool], tuple[bool, str]] = {}

    def resolves(self, python: str, requirements: Sequence[str], as_of: datetime, binary_only: bool = False
                 ) -> tuple[bool, str]:
        key = (python, tuple(requirements), uv_timestamp(as_of), binary_only)
        if key not in self.answers:
            self.answers[key] = self._compile(python, requirements, as_of, binary_only)
        return self.answers[key]

    def _compile(self, python: str, requirements: Sequence[str], as_of: datetime, binary_only: bool
                 ) -> tuple[bool, str]:
        with tempfile.TemporaryDirectory() as scratch:
            listing = Path(scratch) / "requirements.in"
            listing.write_text("".join(line + "\n" for line in requirements))
            args = [self.uv, "pip", "compile", "--quiet", "--no-header", *python_args(python), "--exclude-newer",
                    uv_timestamp(as_of), "--output-file", str(Path(scratch) / "lock"), str(listing)]
            if binary_only:
                args[3:3] = ["--only-binary", ":all:"]
            constraints = build_constraints(requirements)
            if constraints:
                (Path(scratch) / "build-constraints.txt").write_text("".join(line + "\n" for line in constraints))
                args[3:3] = ["--build-constraints", str(Path(scratch) / "build-constraints.txt")]
            env = {**{key: value for key, value in os.environ.items() if not key.startswith("UV_")},
                   "UV_CACHE_DIR": str(self.cache)}
            # Offline first: bisection asks the same pages many times. Online when the cache lacks one.
            completed = subprocess.run([*args, "--offline"], capture_output=True, text=True, env=env, check=False)
            if completed.returncode != 0 and OFFLINE_MISS.search(completed.stderr):
                completed = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
        return completed.returncode == 0, completed.stderr.strip()


def python_args(python: str) -> list[str]:
    """The interpreter itself where pyenv has it (sdists' metadata builds need it), else ``--python-version``."""
    found = sorted(Path.home().glob(f".pyenv/versions/{python}.*/bin/python"))
    return ["--python", str(found[-1])] if found else ["--python-version", python]


def months(start: datetime, end: datetime) -> list[datetime]:
    found = []
    year, month = start.year, start.month
    while datetime(year, month, 1, tzinfo=UTC) <= end:
        found.append(datetime(year, month, 1, tzinfo=UTC))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return found


#: uv's words for a requirement that no release as of the date satisfies (as opposed to a build that failed).
MISSING_RELEASE = re.compile(r"there is no version of|there are no versions of|only [^ ]+ (is|are) available|"
                             r"no versions? of [^ ]+ (is|are) available|not found in the package registry")


def date_floor(resolver: Resolver, python: str, pins: Sequence[str], now: datetime) -> tuple[datetime | None, str]:
    """The first month (at or after the Python's floor) from which every pin has a release; None if never.

    Bisected on "no pin is missing", which only ever turns true as releases appear; whether
    everything then builds is checked as of the floor found (``resolve_marks``), since a build
    can fail later too (an sdist whose setup.py imports what newer setuptools removed).
    """
    floor = PYTHON_FLOORS.get(python, datetime(2015, 1, 1, tzinfo=UTC))
    if not pins:
        return floor, ""

    def released(moment: datetime) -> tuple[bool, str]:
        ok, error = resolver.resolves(python, pins, moment)
        return ok or not MISSING_RELEASE.search(error), error

    ok, error = released(now)
    if not ok:
        return None, error
    candidates = months(floor, now)
    if released(candidates[0])[0]:
        return candidates[0], ""
    low, high = 0, len(candidates) - 1  # candidates[low] lacks a release, candidates[high] has them all
    while high - low > 1:
        middle = (low + high) // 2
        if released(candidates[middle])[0]:
            high = middle
        else:
            low = middle
    return candidates[high], ""


def conda_reason(resolver: Resolver, python: str, pins: Sequence[str], as_of: datetime) -> tuple[str | None, list[str]]:
    """Why ``pins`` need conda (compiled pins without a wheel for ``python``), and every pin without a wheel."""
    if resolver.resolves(python, pins, as_of, binary_only=True)[0]:
        return None, []
    without_wheel = [pin for pin in pins if not resolver.resolves(python, [pin], as_of, binary_only=True)[0]]
    heavy = [pin for pin in without_wheel if requirement_name(pin) in NEEDS_TOOLCHAIN]
    if not heavy:
        return None, without_wheel
    return (f"{', '.join(heavy)}: no wheel for CPython {python} on PyPI (SWE-bench installs conda's builds); a "
            "source build needs compilers and system libraries (BLAS/LAPACK, a Fortran compiler for scipy)"), \
        without_wheel


def resolve_marks(resolver: Resolver, translated: Translated, now: datetime) -> None:
    table = translated.table
    python = table["python"]
    if not python_at_least(python, "3.6"):
        table["date_floor"] = uv_timestamp(PYTHON_FLOORS.get(python, datetime(2016, 1, 1, tzinfo=UTC)))
        table["conda_only"] = (f"Python {python}: uv supports Python 3.6 and later; SWE-bench builds this with "
                               f"conda's python={python}")
        return
    pins = [line for line in table["requirements"] if "==" in line]
    floor, error = date_floor(resolver, python, pins, now)
    if floor is None:
        table["conda_only"] = f"the spec's pins do not resolve from PyPI for Python {python}: {last_line(error)}"
        return
    table["date_floor"] = uv_timestamp(floor)
    ok, error = resolver.resolves(python, table["requirements"], floor)
    if not ok:
        table["conda_only"] = f"the spec's requirements do not resolve from PyPI as of {floor:%Y-%m-%d}: " \
                              f"{last_line(error)}"
        return
    reason, without_wheel = conda_reason(resolver, python, pins, floor)
    if without_wheel:
        table["sdist_only"] = without_wheel
    if reason:
        table["conda_only"] = reason


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines[-3:])[:400]


# --- output ---------------------------------------------------------------------------------------------------


def toml_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + "".join(f"    {toml_value(item)},\n" for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(key)} = {toml_value(item)}" for key, item in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


KEY_ORDER = ["python", "requirements", "requirements_files", "environment_files", "pre_install", "install",
             "date_floor", "conda_only", "sdist_only", "system_steps", "eval_env", "swebench_test_cmd", "network",
             "notes"]


def render(translated: Sequence[Translated], header: Iterable[str]) -> str:
    lines = [f"# {line}" if line else "#" for line in header]
    lines += ["", "[conda.pypi_names]"]
    lines += [f"{json.dumps(name)} = {json.dumps(target)}" for name, target in sorted(CONDA_PYPI_NAMES.items())]
    lines += ["", "[conda.not_on_pypi]"]
    lines += [f"{json.dumps(name)} = {json.dumps(reason)}" for name, reason in sorted(CONDA_NOT_ON_PYPI.items())]
    for spec in translated:
        lines += ["", f"[specs.{json.dumps(spec.repo)}.{json.dumps(spec.version)}]"]
        for key in KEY_ORDER:
            if key in spec.table and (spec.table[key] or key in ("requirements", "pre_install")):
                lines.append(f"{key} = {toml_value(spec.table[key])}")
    return "\n".join(lines) + "\n"


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def summary(translated: Sequence[Translated]) -> str:
    rows = ["| repository | versions | translated | needing repo files | conda-only |", "|---|---|---|---|---|"]
    repos = sorted({spec.repo for spec in translated})
    totals = [0, 0, 0, 0]
    for repo in repos:
        mine = [spec for spec in translated if spec.repo == repo]
        counts = [len(mine), sum("conda_only" not in spec.table for spec in mine),
                  sum(spec.needs_repo_files for spec in mine), sum("conda_only" in spec.table for spec in mine)]
        totals = [total + count for total, count in zip(totals, counts, strict=True)]
        rows.append(f"| {repo} | " + " | ".join(map(str, counts)) + " |")
    rows.append("| **all** | " + " | ".join(f"**{count}**" for count in totals) + " |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--swebench", type=Path, required=True, help="a SWE-bench git checkout or bare clone")
    parser.add_argument("--rev", default="v4.1.0", help="the SWE-bench revision to read (default: v4.1.0)")
    parser.add_argument("--swe-gym", type=Path, help="a SWE-Gym/SWE-Bench-Fork checkout or bare clone: its "
                        "repositories' specs are added")
    parser.add_argument("--swe-gym-rev", default=SWE_GYM_REV, help=f"the fork's revision (default: {SWE_GYM_REV})")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output file (default: {OUT.relative_to(ROOT)})")
    parser.add_argument("--no-resolve", action="store_true",
                        help="keep date floors and conda marks from the existing output file; ask the index only "
                             "for specs it does not have")
    parser.add_argument("--uv-cache", type=Path, default=Path(tempfile.gettempdir()) / "swebench-specs-uv",
                        help="uv cache for the resolutions")
    args = parser.parse_args(argv)

    constants = read_swebench_specs(args.swebench, args.rev)
    commit = subprocess.run(["git", "-C", str(args.swebench), "rev-parse", f"{args.rev}^{{commit}}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    translated = [
        translate(repo, version, spec, constants["MAP_REPO_TO_REQS_PATHS"], constants["MAP_REPO_TO_ENV_YML_PATHS"])
        for repo, versions in sorted(constants["MAP_REPO_VERSION_TO_SPECS_PY"].items()) if repo not in SKIPPED_REPOS
        for version, spec in sorted(versions.items(), key=lambda item: version_key(item[0]))
    ]
    sources = [f"SWE-bench {args.rev} ({commit}) {SPECS_PATH}"]
    if args.swe_gym is not None:
        gym = read_swe_gym_specs(args.swe_gym, args.swe_gym_rev)
        specs = gym["MAP_REPO_VERSION_TO_SPECS"]
        for repo in sorted(SWE_GYM_REPOS):
            for version, spec in sorted(specs.get(repo, {}).items(), key=lambda item: version_key(item[0])):
                # A spec without a Python (dask's environment.yml ones: conda picks it) or whose files the fork
                # does not name cannot be translated; it is listed, not guessed.
                try:
                    translated.append(translate(repo, version, spec, gym["MAP_REPO_TO_REQS_PATHS"],
                                                gym.get("MAP_REPO_TO_ENV_YML_PATHS", {})))
                except KeyError as missing:
                    print(f"{repo} {version}: not shipped (no {missing} in the fork's spec)", file=sys.stderr)
        sources.append(f"SWE-Gym/SWE-Bench-Fork {args.swe_gym_rev} {SWE_GYM_SPECS_PATH} (its repositories: "
                       f"{', '.join(repo for repo in SWE_GYM_REPOS if repo in specs)})")
    now = datetime.now(UTC)
    if args.no_resolve:
        previous = load_shipped_specs(args.out) if args.out.exists() else None
        for spec in translated:
            old = previous.get(spec.repo, spec.version) if previous else None
            if old is not None:
                spec.table.update({key: value for key, value in {
                    "date_floor": uv_timestamp(old.date_floor) if old.date_floor else None,
                    "conda_only": old.conda_only, "sdist_only": list(old.sdist_only)}.items() if value})
            else:  # a spec the file does not have yet (a new repository's) is resolved all the same
                uv = shutil.which("uv")
                if uv is None:
                    parser.error(f"uv is needed to find the date floor of the new spec {spec.repo} {spec.version}")
                resolve_marks(Resolver(uv, args.uv_cache), spec, now)
    else:
        uv = shutil.which("uv")
        if uv is None:
            parser.error("uv is needed to find date floors (pip install uv), or pass --no-resolve")
        resolver = Resolver(uv, args.uv_cache)
        for spec in translated:
            resolve_marks(resolver, spec, now)
            print(f"{spec.repo} {spec.version}: floor {spec.table.get('date_floor')} "
                  f"{'conda-only' if 'conda_only' in spec.table else ''}", file=sys.stderr)
    header = [
        "SWE-bench's environment specs for every Python repository and version, in pytest-swe-arena's terms.",
        f"Generated by bench/swebench_specs.py from {' and '.join(sources)}:",
        "do not edit by hand; change the converter and run it again. Keys: pytest_swe_arena/swebench_envs.py.",
        f"Resolution: every environment is resolved as of its row's date (uv exclude-newer), never before the "
        f"spec's date_floor; editable builds before {SETUPTOOLS_EDITABLE_FLOOR:%Y-%m-%d} take setuptools as of "
        "then.",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(translated, header), encoding="utf-8")
    load_shipped_specs(args.out)  # what we wrote must load
    print(summary(translated))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
