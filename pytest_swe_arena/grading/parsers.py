"""Test results read from a runner's report: its JUnit XML or its log, one parser per log format.

What verify reads today: pytest's JUnit XML (``parse_junitxml``, written by pytest to a file
outside the workspace, so text the code under test prints cannot forge it) or, for a runner
without one, its ``-rA`` summary lines (``parse_output``).

SWE-bench's parsers (verify reads a SWE-bench runner's log with them, ``verify.run_repo_runner``):

Each parser reads a runner's output (pytest ``-rA``, Django's ``runtests.py --verbosity 2``,
sympy's ``bin/test --verbose``, sphinx through tox) into the ordered list of the results it
states, in the statuses of this package: passed, failed, error, skipped, xfailed, xpassed.

The parsers are named as SWE-bench 5.0.2 names its own (``parse_log_django``...), so a row's
``log_parser`` field means the same here, and each reads exactly the lines SWE-bench's reads,
with the same test ids, quirks included (sympy's failure banners become ids, pytest ids are cut
at their first space, Django's docstring lines name tests): graded with the default rules, a
log gets SWE-bench's verdict. What SWE-bench's parser drops or misreads is read as well but
marked ``swebench_reads=False``, and only counts under rules that ask for it (see
``rules.GradingRules.read_every_result``):

- pytest: ``XPASS`` lines (SWE-bench knows no such status); verbose ``id STATUS`` lines; for
  ``parse_log_pytest_v2``, the id of an ``ERROR``/``XFAIL``/``SKIPPED`` line without its
  `` - reason`` (SWE-bench keeps the reason in the id); for ``parse_log_seaborn``, every
  summary line that is not ``PASSED`` or ``FAILED``.
- Django: ``expected failure`` and ``unexpected success``, and a status printed on its own
  line after output the test wrote.
- sympy: ``f`` (xfail), ``X`` (xpass), ``s``/``w``/``K`` (skips), ``T`` (timeout); the last test
  of each file (its line ends with the file's ``[OK]``/``[FAIL]``); a result letter printed
  after output the test wrote.

One difference is not optional: where a status word begins a longer token (pytest's own
``ERROR: file or directory not found: x``), SWE-bench records a test named by the next word
with that token as its status, which its grading counts neither as a pass nor as a failure;
here such a line names no test.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..outcome import TestStatus

_SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S.*)$")
_SUMMARY_STATUS = {"PASSED": TestStatus.PASSED, "FAILED": TestStatus.FAILED, "ERROR": TestStatus.ERROR,
                   "XFAIL": TestStatus.XFAILED, "XPASS": TestStatus.XPASSED}


def parse_output(text: str) -> list[TestResult]:
    """Results from pytest's ``-rA`` short test summary (``PASSED id``, ``FAILED id - message``), in order."""
    results: list[TestResult] = []
    for line in text.splitlines():
        match = _SUMMARY_LINE.match(line.rstrip())
        if match:
            test_id = match.group(2)
            if match.group(1) in ("FAILED", "ERROR", "XFAIL", "XPASS"):
                test_id = test_id.split(" - ", 1)[0]
            results.append(TestResult(test_id.strip(), _SUMMARY_STATUS[match.group(1)]))
    return results


def parse_junitxml(path: Path | BinaryIO, files: Iterable[str] = ()) -> list[TestResult] | None:
    """Results from pytest's JUnit XML (a file, or one opened through the crossing), by node id, in order; None if
    unreadable.

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
    results: list[TestResult] = []
    for case in root.iter("testcase"):
        classname = case.get("classname") or ""
        file = next((file for module, file in modules
                     if classname == module or classname.startswith(module + ".")), case.get("file") or "")
        results.append(TestResult(_junit_node_id(file, classname, case.get("name") or ""), _junit_status(case)))
    return results


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


#: pytest's words for results in its summary, to ours. SWE-bench reads every word but XPASS.
_PYTEST_WORDS = {"PASSED": TestStatus.PASSED, "FAILED": TestStatus.FAILED, "ERROR": TestStatus.ERROR,
                 "SKIPPED": TestStatus.SKIPPED, "XFAIL": TestStatus.XFAILED, "XPASS": TestStatus.XPASSED}
_SWEBENCH_WORDS = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")


@dataclass(frozen=True)
class TestResult:
    """One result a runner's log states: a test id and its status.

    :param swebench_reads: whether SWE-bench 5.0.2's parser of the same name reads this result.
    :param printed_id: the id as the log prints it, when the parser reads it otherwise (an absolute path
        in its parameters cut, ``parse_log_pytest_options``), else None.
    """

    __test__ = False  # not a pytest test class

    test_id: str
    status: str
    swebench_reads: bool = True
    printed_id: str | None = None


LogParser = Callable[[str], list[TestResult]]


# --- pytest -rA and its variants -------------------------------------------------------------

#: ``SKIPPED [2] tests/x.py:12: reason``: the count in brackets is not a test.
_SKIP_COUNT = re.compile(r"\[\d+\]")
#: A verbose result line: ``tests/x.py::test_a PASSED``, with pytest's ``(reason)`` and ``[ 50%]``.
_VERBOSE_RESULT = re.compile(
    r"(?P<id>\S+::.*?) (?P<word>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: \(.*\))?(?: +\[ *\d+%\])?")


def _summary_tokens(line: str) -> list[str] | None:
    """The words of a summary line SWE-bench reads (``STATUS id ...``), or None.

    As SWE-bench does: a ``FAILED`` line loses every `` - `` (its message is then more words),
    words are split at whitespace (an id with a space is cut there), and pytest's skip count
    is not an id.
    """
    if not line.startswith(_SWEBENCH_WORDS):
        return None
    if line.startswith("FAILED"):
        line = line.replace(" - ", " ")
    words = line.split()
    if len(words) < 2 or (words[0] == "SKIPPED" and _SKIP_COUNT.fullmatch(words[1])):
        return None
    return words


def _read(printed: str, status: str, test_id: Callable[[str], str], swebench_reads: bool = True) -> TestResult:
    read = test_id(printed)
    return TestResult(read, status, swebench_reads, printed_id=None if read == printed else printed)


def _xpass_id(line: str) -> str | None:
    words = line.split()
    return words[1] if len(words) >= 2 and words[0] == "XPASS" else None


def _verbose_result(line: str) -> TestResult | None:
    match = _VERBOSE_RESULT.fullmatch(line.strip())
    if match is None:
        return None
    return TestResult(match["id"], _PYTEST_WORDS[match["word"]], swebench_reads=False)


def _pytest_summary(text: str, test_id: Callable[[str], str] = lambda word: word,
                    fix_line: Callable[[str], str] = lambda line: line) -> list[TestResult]:
    """``parse_log_pytest`` and its variants: the second word of each summary line is the id."""
    results = []
    for raw in text.split("\n"):
        line = fix_line(raw)
        words = _summary_tokens(line)
        if words is not None and words[0] in _PYTEST_WORDS:
            results.append(_read(words[1], _PYTEST_WORDS[words[0]], test_id))
        elif (xpassed := _xpass_id(line)) is not None:
            results.append(_read(xpassed, TestStatus.XPASSED, test_id, swebench_reads=False))
        elif (verbose := _verbose_result(line)) is not None:
            results.append(_read(verbose.test_id, verbose.status, test_id, swebench_reads=False))
    return results


def parse_log_pytest(text: str) -> list[TestResult]:
    """pytest's ``-rA`` summary: ``PASSED tests/x.py::test_a``, ``FAILED tests/x.py::test_b - message``."""
    return _pytest_summary(text)


#: ``test_x[options]``: the id before the first ``[``, and what lies up to the last ``]``.
_OPTIONS = re.compile(r"(?P<name>.*?)\[(?P<options>.*)\]")


def _shorten_path_option(test_id: str) -> str:
    """``test_x[/abs/path/file.txt]`` becomes ``test_x[/file.txt]`` (machine paths in ids), as in SWE-bench.

    What follows the last ``]`` is dropped, as SWE-bench drops it.
    """
    match = _OPTIONS.search(test_id)
    if match is None:
        return test_id
    options = match["options"]
    if options.startswith("/") and not options.startswith("//") and "*" not in options:
        options = "/" + options.rsplit("/", 1)[-1]
    return f"{match['name']}[{options}]"


def parse_log_pytest_options(text: str) -> list[TestResult]:
    """``parse_log_pytest`` with absolute paths in parameters cut to their last part (requests, pydicom, pylint)."""
    return _pytest_summary(text, test_id=_shorten_path_option)


def _matplotlib_line(line: str) -> str:
    # Parameter ids printed as enum members on some versions, as their values on others.
    return line.replace("MouseButton.LEFT", "1").replace("MouseButton.RIGHT", "3")


def parse_log_matplotlib(text: str) -> list[TestResult]:
    """``parse_log_pytest`` with ``MouseButton.LEFT``/``RIGHT`` in ids read as ``1``/``3``."""
    return _pytest_summary(text, fix_line=_matplotlib_line)


def parse_log_seaborn(text: str) -> list[TestResult]:
    """Only ``FAILED`` and ``PASSED`` lines, summary (``PASSED id``) or verbose (``id PASSED ...``)."""
    results = []
    for line in text.split("\n"):
        words = line.split()
        if len(words) < 2:
            continue
        if line.startswith("FAILED"):
            results.append(TestResult(words[1], TestStatus.FAILED))
        elif " PASSED " in line:
            if words[1] == "PASSED":
                results.append(TestResult(words[0], TestStatus.PASSED))
        elif line.startswith("PASSED"):
            results.append(TestResult(words[1], TestStatus.PASSED))
        elif words[0] in _PYTEST_WORDS and not (words[0] == "SKIPPED" and _SKIP_COUNT.fullmatch(words[1])):
            results.append(TestResult(words[1], _PYTEST_WORDS[words[0]], swebench_reads=False))
        elif (verbose := _verbose_result(line)) is not None:
            results.append(verbose)
    return results


#: Colour codes as SWE-bench removes them (``\x1b[32m`` loses ``[32m``, then the escape goes with
#: the other control characters; ``[39;49;00m`` stays).
_COLOUR = re.compile(r"\[\d+m")
_CONTROL_CHARACTERS = str.maketrans("", "", "".join(chr(code) for code in range(1, 32)))


def parse_log_pytest_v2(text: str) -> list[TestResult]:
    """pytest with colour (astropy, scikit-learn, sphinx): ids kept whole, and ``id STATUS`` lines.

    A ``FAILED`` line's id ends at its first `` - ``; other summary lines keep their reason in the id, as
    SWE-bench keeps it (and the id without it is read too, unmarked).
    """
    results = []
    for raw in text.split("\n"):
        line = _COLOUR.sub("", raw).translate(_CONTROL_CHARACTERS)
        if line.startswith(_SWEBENCH_WORDS):
            if line.startswith("FAILED"):
                line = line.split(" - ", 1)[0]
            words = line.split()
            if len(words) >= 2 and not (words[0] == "SKIPPED" and _SKIP_COUNT.fullmatch(words[1])) \
                    and words[0] in _PYTEST_WORDS:
                test_id, status = " ".join(words[1:]), _PYTEST_WORDS[words[0]]
                results.append(TestResult(test_id, status))
                without_reason = " ".join(line.split(" - ", 1)[0].split()[1:])
                if without_reason != test_id:
                    results.append(TestResult(without_reason, status, swebench_reads=False))
        elif line.endswith(_SWEBENCH_WORDS):
            words = line.split()
            if len(words) >= 2 and words[-1] in _PYTEST_WORDS:
                results.append(TestResult(" ".join(words[:-1]), _PYTEST_WORDS[words[-1]]))
        elif line.startswith("XPASS"):
            words = line.split(" - ", 1)[0].split()
            if len(words) >= 2 and words[0] == "XPASS":
                results.append(TestResult(" ".join(words[1:]), TestStatus.XPASSED, swebench_reads=False))
        elif (verbose := _verbose_result(line)) is not None:
            results.append(verbose)
    return results


# --- Django's runtests.py --verbosity 2 ------------------------------------------------------

#: How a passing test's line ends: ``test_x (module.Class) ... ok``.
_DJANGO_PASSED_ENDINGS = (" ... ok", " ... OK", " ...  OK")
#: What SWE-bench does not read: a status alone on its line (the test printed before it), and unittest's
#: words for expected failures.
_DJANGO_STATUS_LINES = {"ok": TestStatus.PASSED, "FAIL": TestStatus.FAILED, "ERROR": TestStatus.ERROR,
                        "expected failure": TestStatus.XFAILED, "unexpected success": TestStatus.XPASSED}
_DJANGO_UNREAD_ENDINGS = ((" ... expected failure", TestStatus.XFAILED),
                          (" ... unexpected success", TestStatus.XPASSED))
#: One test of Django's own suite (django__django-7188) prints a migration's progress on its line.
_DJANGO_MIGRATION_PREFIX = "Applying sites.0002_alter_domain_unique...test_no_migrations"
#: Output printed between a test's ``...`` and its ``ok``, which SWE-bench matches over the whole log.
_DJANGO_INTERRUPTED = (
    re.compile(r"^(.*?)\s\.\.\.\sTesting against Django installed in (?s:.*?) silenced\)\.\nok$", re.MULTILINE),
    re.compile(r"^(.*?)\s\.\.\.\sInternal Server Error: /.*/\nok$", re.MULTILINE),
    re.compile(r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$", re.MULTILINE),
)


def _django_line(line: str, last_test: str | None) -> Iterator[TestResult]:
    """The results SWE-bench reads on one stripped line, given the test last named by a ``...`` line."""
    if "--version is equivalent to version" in line:
        # One test of Django's admin_scripts is named by the text its output spans lines with.
        yield TestResult("--version is equivalent to version", TestStatus.PASSED)
    ending = next((ending for ending in _DJANGO_PASSED_ENDINGS if line.endswith(ending)), None)
    if ending is not None:
        if line.startswith(_DJANGO_MIGRATION_PREFIX):
            line = line.split("...", 1)[-1].strip()
        yield TestResult(line.rsplit(ending, 1)[0], TestStatus.PASSED)
    if " ... skipped" in line:
        yield TestResult(line.split(" ... skipped")[0], TestStatus.SKIPPED)
    words = line.split()
    for word, status in (("FAIL", TestStatus.FAILED), ("ERROR", TestStatus.ERROR)):
        if line.endswith(f" ... {word}"):
            yield TestResult(line.split(f" ... {word}")[0], status)
        if line.startswith(f"{word}:") and len(words) >= 2:
            # The report after the run, ``FAIL: test_x (module.Class)``, is read as its first word only.
            yield TestResult(words[1], status)
    if line.startswith("ok") and last_test is not None:
        yield TestResult(last_test, TestStatus.PASSED)


def parse_log_django(text: str) -> list[TestResult]:
    """Django's runner at ``--verbosity 2``: ``test_x (module.Class) ... ok``, or a docstring's first line."""
    results: list[TestResult] = []
    last_test: str | None = None
    waiting: str | None = None  # a test whose line ended before its status (it printed something)
    for raw in text.split("\n"):
        line = raw.strip()
        if " ... " in line:
            last_test = line.split(" ... ")[0]
        read = list(_django_line(line, last_test))
        results += read
        unread = next((TestResult(line.rsplit(ending, 1)[0], status, swebench_reads=False)
                       for ending, status in _DJANGO_UNREAD_ENDINGS if line.endswith(ending)), None)
        if unread is None and waiting is not None and line in _DJANGO_STATUS_LINES and not read:
            unread = TestResult(waiting, _DJANGO_STATUS_LINES[line], swebench_reads=False)
        if unread is not None:
            results.append(unread)
        if read or unread is not None:
            waiting = None
        elif " ... " in line:
            waiting = last_test
    for pattern in _DJANGO_INTERRUPTED:
        results += [TestResult(match.group(1), TestStatus.PASSED) for match in pattern.finditer(text)]
    return results


# --- sympy's bin/test --verbose --------------------------------------------------------------

#: sympy's result letters after a test's name. SWE-bench reads ``ok``, ``F`` and ``E``.
_SYMPY_READ = {"ok": TestStatus.PASSED, "F": TestStatus.FAILED, "E": TestStatus.ERROR}
_SYMPY_LETTERS = {**_SYMPY_READ, "f": TestStatus.XFAILED, "X": TestStatus.XPASSED, "s": TestStatus.SKIPPED,
                  "w": TestStatus.SKIPPED, "K": TestStatus.SKIPPED, "T": TestStatus.ERROR}
#: The last test of a file: its result, then the file's verdict.
_SYMPY_FILE_VERDICT = re.compile(r"(?P<line>.*\S)\s+\[(?:OK|FAIL)\]")


def _sympy_failure_banner(line: str) -> str | None:
    """The id SWE-bench reads as failed from a line like ``____ sympy/x/tests/test_a.py:test_b ____``.

    SWE-bench searches the whole log for ``(_*) (.*)\\.py:(.*) (_*)``, and joins the groups around
    ``.py:``. On one line that is the text between the line's first and last spaces, when it holds a
    ``.py:``; any line of that shape counts, a printed path or a warning included.
    """
    between = line.partition(" ")[2].rpartition(" ")[0]
    return between if ".py:" in between else None


def _sympy_letter(text: str) -> str | None:
    """The result letter a line ends with, before the file's ``[OK]``/``[FAIL]`` if it is the file's last."""
    verdict = _SYMPY_FILE_VERDICT.fullmatch(text)
    words = (verdict["line"] if verdict else text).split()
    return words[-1] if words and words[-1] in _SYMPY_LETTERS else None


def parse_log_sympy(text: str) -> list[TestResult]:
    """sympy's ``bin/test --verbose``: ``test_x ok``, ``test_y F``, ``test_z E``, and failure banners."""
    lines = text.split("\n")
    results = [TestResult(test_id, TestStatus.FAILED)
               for line in lines if (test_id := _sympy_failure_banner(line)) is not None]
    waiting: str | None = None  # a test whose result follows output it printed
    for raw in lines:
        line = raw.strip()
        if line.startswith("test_"):
            name, waiting = line.split()[0], None
            result = line.rpartition(" ")[2]
            if " " in line and result in _SYMPY_READ:
                results.append(TestResult(name, _SYMPY_READ[result]))
            elif " " in line and (letter := _sympy_letter(line)) is not None:
                results.append(TestResult(name, _SYMPY_LETTERS[letter], swebench_reads=False))
            else:
                waiting = name
        elif waiting is not None and (letter := _sympy_letter(line)) is not None:
            results.append(TestResult(waiting, _SYMPY_LETTERS[letter], swebench_reads=False))
            waiting = None
    return results


#: Every parser by SWE-bench 5.0.2's name for it, the per-repository aliases included.
LOG_PARSERS: dict[str, LogParser] = {
    "parse_log_pytest": parse_log_pytest,
    "parse_log_pytest_options": parse_log_pytest_options,
    "parse_log_pytest_v2": parse_log_pytest_v2,
    "parse_log_django": parse_log_django,
    "parse_log_seaborn": parse_log_seaborn,
    "parse_log_sympy": parse_log_sympy,
    "parse_log_matplotlib": parse_log_matplotlib,
    **{f"parse_log_{name}": parse_log_pytest
       for name in ("astroid", "flask", "marshmallow", "pvlib", "pyvista", "sqlfluff", "xarray")},
    **{f"parse_log_{name}": parse_log_pytest_options for name in ("pydicom", "requests", "pylint")},
    **{f"parse_log_{name}": parse_log_pytest_v2 for name in ("astropy", "scikit", "sphinx")},
}


class UnknownLogParser(ValueError):
    """A ``log_parser`` name that names no parser."""


def log_parser(name: str) -> LogParser:
    """The parser called ``name``, or ``UnknownLogParser`` naming those there are."""
    try:
        return LOG_PARSERS[name]
    except KeyError:
        raise UnknownLogParser(f"unknown log parser {name!r}; known: {', '.join(sorted(LOG_PARSERS))}") from None


# --- SWE-bench 5 eval scripts ----------------------------------------------------------------

START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"


def marked_output(log: str) -> str:
    """The part of a log between SWE-bench's start and end markers, or the whole log if it has none."""
    if START_TEST_OUTPUT in log and END_TEST_OUTPUT in log:
        return log.split(START_TEST_OUTPUT, 1)[1].split(END_TEST_OUTPUT, 1)[0]
    return log


def read_results(parser: str, log: str) -> list[TestResult]:
    """The results a log states, read by the named parser as SWE-bench reads a log.

    Only the part between the markers an eval script prints is read; if nothing is found there
    (some runners' output lands outside them), the whole log is.
    """
    parse = log_parser(parser)
    section = marked_output(log)
    results = parse(section)
    if section is not log and not any(result.swebench_reads for result in results):
        results = parse(log)
    return results
