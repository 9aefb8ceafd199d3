"""Which runner runs a row's tests: today's default runner, and SWE-bench's table by ``repo``.

The default runner (``DEFAULT_TEST_CMD``, or the row's ``test_cmd``) runs the test files the
recorded ids and ``test_patch`` name (``test_files``, ``runner_command``), kept inside the workspace.

SWE-bench's runners are chosen by ``repo`` as SWE-bench chooses (``runner_for_row``); verify runs them
(``verify.run_repo_runner``) and grades their logs with ``rules``.

The table, ``runners.toml``, gives each SWE-bench repository its test command, its log
parser and how its targets are named. The targets are SWE-bench's: every file ``test_patch``
touches but data files (``.json``, ``.txt``, ``.md``...), Django's as dotted modules under
``tests/``. A row overrides the table with ``test_cmd`` and ``log_parser``; a SWE-bench 5 row's
``eval_script`` gives its own test command (targets included) between its output markers.
"""

from __future__ import annotations

import re
import shlex
import shutil
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from .. import crossing
from ..cell.patches import files_touched
from .parsers import END_TEST_OUTPUT, LOG_PARSERS, START_TEST_OUTPUT, UnknownLogParser, log_parser

Targets = Literal["files", "django_modules", "in_command"]

#: What SWE-bench leaves out of the targets: data files a test reads (``csv`` without its dot, as there).
NON_TEST_SUFFIXES = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")
_DIFF_HEADER = re.compile(r"diff --git a/.* b/(.*)")
#: A line SWE-bench adds after an eval script's test command to keep its exit status.
_EXIT_STATUS_LINE = re.compile(r"\s*SWEBENCH_TEST_EXIT_CODE=\$\?\s*")
_EXPORT = re.compile(r"\s*export\s+[A-Za-z_][A-Za-z0-9_]*=.*")


#: The runner when an instance gives no ``test_cmd``: pytest, reporting every test.
DEFAULT_TEST_CMD = "python -m pytest -rA -p no:cacheprovider -o junit_family=xunit1 --junitxml={junitxml} {tests}"


def test_files(ids: Iterable[str], test_patch: str | None, workspace: Path) -> list[str]:
    """The files to run: those named by pytest-style ids, and the test files ``test_patch`` touches."""
    seen: dict[str, None] = {}
    candidates = [test_id.split("::", 1)[0] for test_id in ids if "::" in test_id]
    candidates += [path for path in files_touched(test_patch or "") if path.endswith(".py")]
    for path in candidates:
        if (workspace / path).is_file():
            seen.setdefault(path)
    return list(seen)


#: Where pytest reads its configuration in a repository's root, and the table header that makes a file
#: count (None: the file counts even when empty, as pytest.ini does; pyproject.toml is read as TOML).
_PYTEST_CONFIGS: dict[str, re.Pattern[str] | None] = {
    "pytest.toml": None, ".pytest.toml": None, "pytest.ini": None, ".pytest.ini": None, "pyproject.toml": None,
    "tox.ini": re.compile(r"^\s*\[pytest\]", re.MULTILINE),
    "setup.cfg": re.compile(r"^\s*\[tool:pytest\]", re.MULTILINE),
}


def configures_pytest(name: str, text: str) -> bool:
    """Whether the config file ``name`` (a key of ``_PYTEST_CONFIGS``) with ``text`` configures pytest.

    ``pyproject.toml`` is parsed (``tomllib``): its ``tool.pytest`` table counts however it is written
    (a header, dotted or quoted keys, an inline table). A file that is not valid TOML counts: pytest
    would fail on it, and its text must not decide how the run goes.
    """
    if name == "pyproject.toml":
        try:
            tool = tomllib.loads(text).get("tool")
        except tomllib.TOMLDecodeError:
            return True
        return isinstance(tool, dict) and "pytest" in tool
    section = _PYTEST_CONFIGS.get(name)
    return name in _PYTEST_CONFIGS and (section is None or bool(section.search(text)))


def has_pytest_config(workspace: Path) -> bool:
    """Whether the repository configures pytest in its root (else pytest would search the parent dirs)."""
    for name in _PYTEST_CONFIGS:
        try:  # the tree's files: read through the crossing (a link or a FIFO is not a configuration)
            text = crossing.read_text(workspace / name, 16 << 20)
        except OSError:
            continue
        if configures_pytest(name, text):
            return True
    return False


def runner_command(test_cmd: str | None, files: list[str], junitxml: str, workspace: Path | None = None) -> str:
    """The shell command that runs ``files``: ``{tests}`` and ``{junitxml}`` filled in, or files appended.

    The default runner is kept inside the workspace (``--confcutdir=.``, and for a
    repository without a pytest configuration ``--rootdir=. -c /dev/null``): a
    conftest or config file in a directory above it must not change how its tests run.
    """
    template = test_cmd or DEFAULT_TEST_CMD
    if test_cmd is None and workspace is not None:
        confined = "--confcutdir=." if has_pytest_config(workspace) else "--confcutdir=. --rootdir=. -c /dev/null"
        template = template.replace(" {tests}", f" {confined} {{tests}}")
    tests = " ".join(shlex.quote(path) for path in files)
    command = template.replace("{junitxml}", shlex.quote(junitxml))
    if "{tests}" in command:
        return command.replace("{tests}", tests)
    return f"{command} {tests}".rstrip()


def uses_junitxml(test_cmd: str | None) -> bool:
    return "{junitxml}" in (test_cmd or DEFAULT_TEST_CMD)


class RunnerChoiceError(ValueError):
    """A row's runner fields that cannot be used; ``field`` names the one at fault."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


@dataclass(frozen=True)
class Runner:
    """How one row's tests are run and read.

    :param test_cmd: a shell command; the targets are appended to it (``in_command``: it has them).
    :param log_parser: the name of the parser of its output, in ``parsers.LOG_PARSERS``.
    :param targets: how the targets are named.
    """

    test_cmd: str
    log_parser: str
    targets: Targets = "files"

    def command(self, test_patch: str | None) -> str:
        """The shell command that runs the row's tests, targets included."""
        if self.targets == "in_command":
            return self.test_cmd
        targets = targets_from_patch(test_patch or "", self.targets)
        return " ".join([self.test_cmd, *(shlex.quote(target) for target in targets)])


@cache
def runner_table() -> Mapping[str, Any]:
    """The shipped table, by repository (``owner/name``)."""
    text = resources.files(__package__).joinpath("runners.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def swebench_runner(repo: str, version: str | None = None) -> Runner | None:
    """The runner SWE-bench uses for ``repo`` at ``version``, or None for a repository it does not know."""
    entry = runner_table().get(repo)
    if entry is None:
        return None
    override: Mapping[str, Any] = next((override for override in entry.get("overrides", ())
                                        if version is not None and version in override["versions"]), {})
    return Runner(test_cmd=override.get("test_cmd", entry["test_cmd"]), log_parser=entry["log_parser"],
                  targets=entry.get("targets", "files"))


def targets_from_patch(test_patch: str, targets: Targets = "files") -> list[str]:
    """SWE-bench's test directives: the files ``test_patch`` touches but data files; Django's as modules.

    As in SWE-bench, a file the patch deletes is still a target, and a ``.py`` file that holds no test
    (a fixture module, a test root's ``conf.py``) is one too.
    """
    files = [path for path in _DIFF_HEADER.findall(test_patch) if not path.endswith(NON_TEST_SUFFIXES)]
    if targets != "django_modules":
        return files
    return [path.removesuffix(".py").removeprefix("tests/").replace("/", ".") for path in files]


def eval_script_command(script: str) -> str:
    """The part of a SWE-bench 5 eval script that runs the tests: the command between its output markers,
    after the variables the script exports.

    The rest of the script activates its image's conda environment in ``/testbed`` and applies
    ``test_patch``, which the harness does itself.
    """
    lines = script.splitlines()
    start = next((index for index, line in enumerate(lines) if START_TEST_OUTPUT in line), None)
    end = next((index for index, line in enumerate(lines) if END_TEST_OUTPUT in line), None)
    if start is None or end is None or end < start:
        raise RunnerChoiceError(
            "eval_script", f"has no test command between {START_TEST_OUTPUT!r} and {END_TEST_OUTPUT!r} lines "
            "(the markers SWE-bench's eval scripts print around the command that runs the tests)")
    command = [line for line in lines[start + 1:end] if line.strip() and not _EXIT_STATUS_LINE.fullmatch(line)]
    if not command:
        raise RunnerChoiceError("eval_script", f"has nothing between its {START_TEST_OUTPUT!r} and "
                                f"{END_TEST_OUTPUT!r} lines; expected the command that runs the tests")
    exports = [line.strip() for line in lines[:start] if _EXPORT.fullmatch(line)]
    return "\n".join([*exports, *command])


#: ``tox --current-env -e NAME`` (tox-current-env): NAME's environments, comma-separated.
_TOX_CURRENT_ENV = re.compile(r"\btox\b(?=.*\s--current-env\b).*?\s(?:-e\s*|--envlist[= ]\s*)([\w.,-]+)")


#: A tox environment name the harness will make a directory of: not ``.``, ``..`` nor any name of dots only, which
#: would make ``.tox/NAME`` the ``.tox`` folder itself or the tree (replaced whole by the preparation).
_TOX_ENV_NAME = re.compile(r"[\w-][\w.-]*|[\w.-]*[\w-]")


class ToxEnvNameError(ValueError):
    """A ``tox --current-env`` command names an environment the harness will not make a directory of."""


def tox_current_envs(command: str) -> list[str]:
    """The tox environments a ``tox --current-env`` command runs (none for any other command).

    :raises ToxEnvNameError: a name made of dots only (``.``, ``..``): ``.tox/..`` is the tree itself.
    """
    found = _TOX_CURRENT_ENV.search(command)
    names = [name for name in found.group(1).split(",") if name] if found else []
    for name in names:
        if not _TOX_ENV_NAME.fullmatch(name) or set(name) == {"."}:
            raise ToxEnvNameError(f"test command {command!r}: tox environment {name!r} is not a name the harness "
                                  "makes a directory of (letters, digits, '_', '-' and '.', not dots only)")
    return names


def prepare_tox_current_env(command: str, workspace: Path, venv: Path) -> None:
    """Make each environment dir a ``tox --current-env`` command uses a view of ``venv``.

    tox-current-env runs the tox env's commands with ``.tox/NAME/bin`` first on PATH, where it links
    ``python`` to its own ``sys.executable``. In SWE-bench's conda env that is a real interpreter; in a
    venv it is a link whose venv is found by the ``pyvenv.cfg`` beside the *link*, so ``.tox/NAME/bin/python``
    would start the bare interpreter ("No module named pytest"). With ``pyvenv.cfg``, ``lib`` and the
    ``bin/python`` links of ``venv`` in ``.tox/NAME`` (tox-current-env keeps links that exist), the tox
    env's ``python`` is the venv's. Whatever was in ``.tox/NAME`` is replaced.
    """
    for name in tox_current_envs(command):
        # The tree is the patch's: a link at ``.tox`` or ``.tox/NAME`` is removed (the link, never its target),
        # so what is replaced and written is in the tree.
        for view in (workspace / ".tox", workspace / ".tox" / name):
            if view.is_symlink() or (view.exists() and not view.is_dir()):
                view.unlink()
        view = workspace / ".tox" / name
        if view.is_dir():
            shutil.rmtree(view)  # refuses a link; does not follow links inside
        (view / "bin").mkdir(parents=True)
        shutil.copyfile(venv / "pyvenv.cfg", view / "pyvenv.cfg")
        (view / "lib").symlink_to(venv / "lib", target_is_directory=True)
        for link in {"python", "python3", *(path.name for path in (venv / "bin").glob("python3.*"))}:
            (view / "bin" / link).symlink_to(venv / "bin" / "python")


def runner_for_row(row: Mapping[str, Any]) -> Runner | None:
    """The runner of one instance row: its ``eval_script`` or ``test_cmd``, else SWE-bench's for its
    ``repo``/``version``; its ``log_parser``, else the table's. None: no runner is known (the harness's
    own pytest runner applies).
    """
    known = swebench_runner(str(row.get("repo", "")), _version(row.get("version")))
    parser = row.get("log_parser")
    if parser is not None:
        try:
            log_parser(str(parser))
        except UnknownLogParser:
            raise RunnerChoiceError("log_parser", f"{parser!r} names no parser; expected one of "
                                    f"{', '.join(sorted(LOG_PARSERS))}") from None
    chosen_parser = parser if parser is not None else (known.log_parser if known else None)
    targets: Targets
    if row.get("eval_script"):
        command, targets = eval_script_command(str(row["eval_script"])), "in_command"
    elif row.get("test_cmd"):
        command, targets = str(row["test_cmd"]), (known.targets if known else "files")
    elif known is not None:
        command, targets = known.test_cmd, known.targets
    elif parser is not None:
        raise RunnerChoiceError("log_parser", f"is given but SWE-bench has no runner for repo {row.get('repo')!r}; "
                                "give the 'test_cmd' whose output it reads")
    else:
        return None
    if chosen_parser is None:
        if targets == "in_command":
            raise RunnerChoiceError("log_parser", "is needed with an 'eval_script' for a repo SWE-bench does not "
                                    f"know ({row.get('repo')!r}); expected one of {', '.join(sorted(LOG_PARSERS))}")
        return None  # a test_cmd of its own, for pytest: the harness's pytest reading applies
    return Runner(test_cmd=command, log_parser=str(chosen_parser), targets=targets)


def _version(value: object) -> str | None:
    # SWE-bench's versions are strings ("3.0"); a JSON number would lose "3.10"'s zero, so only strings match.
    return value if isinstance(value, str) else None


def has_repo_runner(row: Mapping[str, Any]) -> bool:
    """Whether ``runner_for_row`` gives the row a runner (``RunnerChoiceError`` for a bad choice): loading's check."""
    return runner_for_row(row) is not None
