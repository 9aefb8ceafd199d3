"""Per-test grading: read each test's status from the runner's own report.

The FAIL_TO_PASS and PASS_TO_PASS ids are never handed back to the runner:
SWE-bench cuts parametrized ids at their first space, so many are not valid
node ids. The runner runs the test *files*; statuses are read from pytest's
JUnit XML (written by pytest to a file outside the workspace, so text the
code under test prints cannot forge it) or, for a runner without one, from
its ``-rA`` summary lines. An id matches a reported test when they are equal
or when the reported id cut at its first space equals it.
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: The runner when an instance gives no ``test_cmd``: pytest, reporting every test.
DEFAULT_TEST_CMD = "python -m pytest -rA -p no:cacheprovider -o junit_family=xunit1 --junitxml={junitxml} {tests}"

#: Statuses that count as a pass (as in SWE-bench, an expected failure passes).
PASSING = frozenset({"passed", "xfailed"})
#: When one id is reported more than once, the worst status wins.
SEVERITY = {"passed": 0, "xfailed": 1, "skipped": 2, "xpassed": 3, "failed": 4, "error": 5}
MISSING = "missing"

_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S.*)$")
_SUMMARY_STATUS = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "XFAIL": "xfailed", "XPASS": "xpassed"}


def test_files(ids: Iterable[str], test_patch: str | None, workspace: Path) -> list[str]:
    """The files to run: those named by pytest-style ids, and the test files ``test_patch`` touches."""
    from ..worker.patches import files_touched

    seen: dict[str, None] = {}
    candidates = [test_id.split("::", 1)[0] for test_id in ids if "::" in test_id]
    candidates += [path for path in files_touched(test_patch or "") if path.endswith(".py")]
    for path in candidates:
        if (workspace / path).is_file():
            seen.setdefault(path)
    return list(seen)


#: Where pytest reads its configuration in a repository's root, and the table header that makes a file
#: count (None: the file counts even when empty, as pytest.ini does).
_PYTEST_CONFIGS: dict[str, re.Pattern[str] | None] = {
    "pytest.toml": None, ".pytest.toml": None, "pytest.ini": None, ".pytest.ini": None,
    "pyproject.toml": re.compile(r"^\s*\[\s*tool\s*\.\s*pytest\s*(\.\s*ini_options\s*)?\]", re.MULTILINE),
    "tox.ini": re.compile(r"^\s*\[pytest\]", re.MULTILINE),
    "setup.cfg": re.compile(r"^\s*\[tool:pytest\]", re.MULTILINE),
}


def has_pytest_config(workspace: Path) -> bool:
    """Whether the repository configures pytest in its root (else pytest would search the parent dirs)."""
    for name, section in _PYTEST_CONFIGS.items():
        path = workspace / name
        if path.is_file() and (section is None
                               or section.search(path.read_text(encoding="utf-8", errors="replace"))):
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


def parse_output(text: str) -> dict[str, str]:
    """Statuses from pytest's ``-rA`` short test summary (``PASSED id``, ``FAILED id - message``)."""
    statuses: dict[str, str] = {}
    for line in text.splitlines():
        match = _SUMMARY_LINE.match(line.rstrip())
        if match:
            test_id = match.group(2)
            if match.group(1) in ("FAILED", "ERROR", "XFAIL", "XPASS"):
                test_id = test_id.split(" - ", 1)[0]
            _record(statuses, test_id.strip(), _SUMMARY_STATUS[match.group(1)])
    return statuses


def parse_junitxml(path: Path, files: Iterable[str] = ()) -> dict[str, str] | None:
    """Statuses from pytest's JUnit XML, keyed by node id; None if unreadable.

    A case's ``classname`` is its node id's module path, dotted, then its classes.
    The file is the one among ``files`` (those the runner ran) with the longest
    dotted module name ``classname`` starts with; ``file`` (xunit1) is used only
    when none does, since it names the file *defining* the test: a method a test
    class inherits from a mixin in another file would be put under that file.
    """
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return None
    modules = sorted(((_module_of(file), file) for file in files), key=lambda item: -len(item[0]))
    statuses: dict[str, str] = {}
    for case in root.iter("testcase"):
        classname = case.get("classname") or ""
        file = next((file for module, file in modules
                     if classname == module or classname.startswith(module + ".")), case.get("file") or "")
        _record(statuses, _junit_node_id(file, classname, case.get("name") or ""), _junit_status(case))
    return statuses


def _module_of(file: str) -> str:
    return file.removesuffix(".py").replace("/", ".")


def _junit_node_id(file: str, classname: str, name: str) -> str:
    if not file:
        return f"{classname}::{name}" if classname else name
    module = _module_of(file)
    classes = classname[len(module) + 1:].split(".") if classname.startswith(module + ".") else []
    return "::".join([file, *filter(None, classes), name])


def _junit_status(case: ElementTree.Element) -> str:
    if case.find("error") is not None:
        return "error"
    if case.find("failure") is not None:
        return "failed"
    skipped = case.find("skipped")
    if skipped is not None:
        return "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
    return "passed"


def _record(statuses: dict[str, str], test_id: str, status: str) -> None:
    earlier = statuses.get(test_id)
    if earlier is None or SEVERITY[status] > SEVERITY[earlier]:
        statuses[test_id] = status


def status_index(reported: Mapping[str, str]) -> dict[str, str]:
    """Each reported id, and each cut at its first space, to the worst status of the reported ids behind it."""
    index: dict[str, str] = {}
    for test_id, status in reported.items():
        _record(index, test_id, status)
        cut = test_id.split(" ", 1)[0]
        if cut != test_id:
            _record(index, cut, status)
    return index


def status_of(expected: str, reported: Mapping[str, str]) -> str:
    """The status of one recorded id: the worst of the reported ids equal to it or, cut at their first space, equal.

    Taking the worst of all matches means a line printed to look like the
    recorded (cut) id cannot hide the real test's failure. To grade many ids,
    build ``status_index(reported)`` once and look each up in it.
    """
    return status_index(reported).get(expected, MISSING)


@dataclass(frozen=True)
class TestGrades:
    """Each recorded test's status, and whether the runner's report can be trusted to pass them."""

    __test__ = False  # not a pytest test class

    fail_to_pass: Mapping[str, str]
    pass_to_pass: Mapping[str, str]
    report: str  # "junitxml" or "output"
    returncode: int | None

    @property
    def passed(self) -> bool:
        """Every recorded test passes, and the runner's exit status agrees.

        Output text can be printed by the code under test, so with statuses read
        from output only exit 0 passes. The JUnit XML is pytest's own, so exit 1
        (some test outside the two lists failed) still passes there; any other
        status (interrupted, internal or usage error, nothing collected) never does.
        """
        accepted = (0, 1) if self.report == "junitxml" else (0,)
        every = [*self.fail_to_pass.values(), *self.pass_to_pass.values()]
        return self.returncode in accepted and all(status in PASSING for status in every)

    def failing(self) -> list[str]:
        tests = {**self.fail_to_pass, **self.pass_to_pass}
        return [f"{test_id} ({status})" for test_id, status in tests.items() if status not in PASSING]

    def to_json(self) -> dict[str, object]:
        return {"FAIL_TO_PASS": dict(self.fail_to_pass), "PASS_TO_PASS": dict(self.pass_to_pass),
                "report": self.report}


def grade(fail_to_pass: Iterable[str], pass_to_pass: Iterable[str], reported: Mapping[str, str],
          report: str, returncode: int | None) -> TestGrades:
    index = status_index(reported)
    return TestGrades(
        fail_to_pass={test_id: index.get(test_id, MISSING) for test_id in fail_to_pass},
        pass_to_pass={test_id: index.get(test_id, MISSING) for test_id in pass_to_pass},
        report=report,
        returncode=returncode,
    )
