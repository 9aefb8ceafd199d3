"""Integrity flags: what about a patch, or its graded run, the harness did not take as it came.

A flag is recorded in the row (``details.integrity``) and shown by the viewer; a flag alone never changes a
verdict (the witnesses do: ``witnesses``). The static scan (``patch_flags``) reads the lines a patch adds to
non-test code for what reaches into the runner: pytest's machinery, ``gc``, ``atexit``, ``os._exit``,
``/proc/self``, ``sys.modules``, and files that would load before the harness's rules (``*.dist-info``,
``*.egg-info``, entry points, a top-level module named as the standard library's).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass

from ..cell.patches import files_touched, is_test_path


@dataclass(frozen=True)
class IntegrityFlag:
    """Something about a patch the grading did not take as it came: what, where, and what was done."""

    kind: str
    path: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


#: Added lines that reach into pytest's machinery from code under test.
_PYTEST_INTERNALS = re.compile(
    r"^\+(?!\+\+ ).*?(\b(?:import|from)\s+(?:_pytest|pluggy)\b|\bdef\s+pytest_\w+\s*\(|\bpytest_plugins\s*=|"
    r"\b(?:import|from)\s+pytest\b|_pytest|pluggy|pluginmanager|hookwrapper|\bhookimpl\b)", re.MULTILINE)
#: Added lines that reach for the running process's machinery: each kind, and what it matches.
_RUNNER_REACH = {
    "reaches_gc": re.compile(r"^\+(?!\+\+ ).*?(\bgc\s*\.\s*get_(?:objects|referrers|referents)\b|"
                             r"\b(?:import|from)\s+gc\b)", re.MULTILINE),
    "reaches_atexit": re.compile(r"^\+(?!\+\+ ).*?(\batexit\b)", re.MULTILINE),
    "reaches_exit": re.compile(r"^\+(?!\+\+ ).*?(\bos\s*\.\s*_exit\b|\b_exit\s*\(|\bos\s*\.\s*kill\s*\(\s*os\.getpid)",
                               re.MULTILINE),
    "reaches_proc_self": re.compile(
        r"^\+(?!\+\+ ).*?(/proc/(?:self|\{|\"\s*\+|thread-self)|/dev/fd/|/dev/std(?:out|err))", re.MULTILINE),
    "reaches_sys": re.compile(r"^\+(?!\+\+ ).*?(\bsys\s*\.\s*(?:modules|argv)\b|\bimport\s+sys\s+as\b|"
                            r"\.\s*modules\s*\[|\bin\s+\w+\s*\.\s*modules\b)", re.MULTILINE),
}
#: Standard library modules, and the runner's: a new top-level file named as one is imported instead.
STDLIB_MODULES = frozenset(sys.stdlib_module_names)


def _sections(patch: bytes) -> list[tuple[str, str]]:
    text = patch.decode(errors="replace")
    found = []
    for section in re.split(r"^(?=diff --git )", text, flags=re.MULTILINE):
        paths = files_touched(section)
        if paths and section.startswith("diff --git "):
            found.append((paths[-1], section))
    return found


def internals_flags(patch: bytes) -> list[IntegrityFlag]:
    """Added lines of non-test code that import pytest's internals or define its hooks, one flag per file.

    The runner's own code (a path through ``_pytest``, ``pytest`` or ``pluggy``) is exempt: a fix
    to pytest itself imports them.
    """
    flags = []
    for path, section in _sections(patch):
        if is_test_path(path) or set(path.split("/")) & {"_pytest", "pytest", "pluggy"}:
            continue
        found = _PYTEST_INTERNALS.search(section)
        if found:
            flags.append(IntegrityFlag("pytest_internals", path,
                                       f"non-test code reaches into pytest: {found.group(1).strip()[:120]}"))
    return flags


def patch_flags(patch: bytes) -> list[IntegrityFlag]:
    """The static scan: ``internals_flags``, and each kind of reach into the running process, per file, and
    files that load before the harness's rules. Test files are scanned too (they run in the same process)."""
    flags = internals_flags(patch)
    for path, section in _sections(patch):
        for kind, pattern in _RUNNER_REACH.items():
            found = pattern.search(section)
            if found:
                flags.append(IntegrityFlag(kind, path, f"added code reaches into the running process: "
                                           f"{found.group(1).strip()[:120]}"))
        parts = path.split("/")
        if any(part.endswith((".dist-info", ".egg-info")) for part in parts) or parts[-1] == "entry_points.txt":
            flags.append(IntegrityFlag("entry_point", path, "installed-distribution metadata (entry points) in the "
                                       "tree: plugin autoload is off in the graded run"))
    return flags
