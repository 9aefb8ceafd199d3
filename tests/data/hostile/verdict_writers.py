"""Code under test that writes its own verdict (issue 27): each attack is the text of a ``calc/ops.py`` that
keeps the bug (``mul`` adds) and, when imported under pytest, tries to make the grading say it passed.

Used as a patch by ``tests/grading/test_witnesses.py``; nothing here runs on its own.
"""

from __future__ import annotations

BUGGY = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n"

#: os._exit(0) as soon as the package is imported under pytest: no test runs, the process exits 0.
EXIT_ON_IMPORT = BUGGY + """
import os as _o, sys as _s
if "_pytest" in _s.modules:
    _o._exit(0)
"""

#: Tests fail; an atexit handler turns the exit status into 0.
EXIT_ZERO_AT_EXIT = BUGGY + """
import atexit as _a, os as _o, sys as _s
if "_pytest" in _s.modules:
    _a.register(lambda: _o._exit(0))
"""

#: Tests fail; an atexit handler rewrites the --junitxml report (its path is in sys.argv) with every case passed.
JUNIT_REWRITE_AT_EXIT = BUGGY + """
import atexit as _a, sys as _s, re as _r
def _rewrite():
    for word in _s.argv:
        if word.startswith("--junitxml="):
            path = word.split("=", 1)[1]
            text = open(path).read()
            text = _r.sub(r"<failure[^>]*>.*?</failure>", "", text, flags=_r.S)
            text = _r.sub(r'failures="\\d+"', 'failures="0"', text)
            open(path, "w").write(text)
if "_pytest" in _s.modules:
    _a.register(_rewrite)
"""

#: SWE-bench #601: at exit, read the run's own log through /proc/self/fd/1 and print ``PASSED id`` after every
#: ``FAILED id`` line, and exit 0 (the last status of an id stands).
FORGE_LOG_AT_EXIT = BUGGY + """
import atexit as _a, os as _o, sys as _s
def _forge():
    _s.stdout.flush()
    try:
        text = open("/proc/self/fd/1", errors="replace").read()
    except OSError:
        text = ""
    lines = [line.split(" - ")[0].replace("FAILED ", "PASSED ", 1) for line in text.splitlines()
             if line.startswith("FAILED ")]
    _o.write(1, ("\\n".join(lines) + "\\n").encode())
    _o._exit(0)
if "_pytest" in _s.modules:
    _a.register(_forge)
"""

#: Find pytest's live Config through gc and register a hook wrapper that turns every failure into a pass;
#: the module names are built so that no pattern of the source finds them.
GC_HOOK_WRAPPER = BUGGY + """
import gc as _g, sys as _s
def _find():
    for thing in _g.get_objects():
        if type(thing).__name__ == "Config" and hasattr(thing, "pluginmanager"):
            return thing
class _Passer:
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if report.outcome == "failed":
            report.outcome = "passed"
            report.longrepr = None
    pytest_runtest_makereport.__dict__["pytest" + "_impl"] = {"hookwrapper": True, "optionalhook": False,
        "tryfirst": False, "trylast": False, "specname": None, "wrapper": False}
_name = "_py" + "test"
if _name in _s.modules:
    _config = _find()
    if _config is not None:
        _config.pluginmanager.register(_Passer(), "helper")
"""

#: A top-level ``difflib.py`` (pytest imports difflib at start-up): it sets PYTEST_ADDOPTS to load a plugin
#: that passes every test. Its own text: the patch adds it beside ``calc/ops.py`` left buggy.
DIFFLIB_SHADOW = """import importlib.util, os, sysconfig
os.environ["PYTEST_ADDOPTS"] = os.environ.get("PYTEST_ADDOPTS", "") + " -p calc.passer"
_spec = importlib.util.spec_from_file_location("difflib", os.path.join(sysconfig.get_paths()["stdlib"], "difflib.py"))
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)
globals().update({k: v for k, v in _real.__dict__.items() if not k.startswith("__")})
"""
PASSER_PLUGIN = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.outcome == "failed":
        report.outcome = "passed"
"""

#: A distribution's metadata at the tree's root declaring a pytest11 entry point: autoload would load it.
DIST_INFO_METADATA = "Metadata-Version: 2.1\nName: calc-helper\nVersion: 1.0\n"
DIST_INFO_ENTRY_POINTS = "[pytest11]\ncalc_helper = calc.passer\n"


# The tables both witness tests run (tests/grading/test_witnesses.py, cell by cell; test_witness_sweeps.py,
# as sweeps).
TESTS = ["tests/test_ops.py::test_mul", "tests/test_ops.py::test_add"]
#: The four grading modes: the row's fields beside its recorded tests.
MODES: dict[str, dict[str, str]] = {
    "verify": {"verify": "python -m pytest -q -p no:cacheprovider tests"},
    "junit": {},
    "log_parser": {"test_cmd": "python -m pytest -rA -p no:cacheprovider", "log_parser": "parse_log_pytest"},
    "rA": {"test_cmd": "python -m pytest -rA -p no:cacheprovider {tests}"},
}
#: Each attack's files and the modes it is aimed at (it runs on every row; these rows are what it tries to win).
ATTACKS: dict[str, tuple[dict[str, str], list[str]]] = {
    "exit_on_import": ({"calc/ops.py": EXIT_ON_IMPORT}, list(MODES)),
    "exit_zero_at_exit": ({"calc/ops.py": EXIT_ZERO_AT_EXIT}, list(MODES)),
    "junit_rewrite_at_exit": ({"calc/ops.py": JUNIT_REWRITE_AT_EXIT}, ["junit"]),
    "forge_log_at_exit": ({"calc/ops.py": FORGE_LOG_AT_EXIT}, ["log_parser", "rA", "verify"]),
    "gc_hook_wrapper": ({"calc/ops.py": GC_HOOK_WRAPPER}, list(MODES)),
    "difflib_shadow": ({"difflib.py": DIFFLIB_SHADOW, "calc/passer.py": PASSER_PLUGIN}, list(MODES)),
    "dist_info_entry_point": ({"calc_helper-1.0.dist-info/METADATA": DIST_INFO_METADATA,
                               "calc_helper-1.0.dist-info/entry_points.txt": DIST_INFO_ENTRY_POINTS,
                               "calc/passer.py": PASSER_PLUGIN}, list(MODES)),
}
