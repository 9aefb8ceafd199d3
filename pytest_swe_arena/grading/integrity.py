"""Integrity flags: what about a patch, or its graded run, the harness did not take as it came.

A flag is recorded in the row (``details.integrity``) and shown by the viewer; a flag alone never changes a
verdict (the witnesses do: ``witnesses``). The static scan (``patch_flags``) reads the lines a patch adds to
non-test code for what reaches into the runner: pytest's machinery, ``gc``, ``atexit``, ``os._exit``,
``/proc/self``, ``sys.modules``, and files that would load before the harness's rules (``*.dist-info``,
``*.egg-info``, entry points, a top-level module named as the standard library's).

The cell's record (``cell_record``) is what the harness saw of the arm itself: git commands that look beyond
base in the agent's transcript and logs (``history_probe_flags``), edits to test files that the patch drops
(``dropped_test_edit_flags``), a patch that touches only test or configuration files (``only_tests_flag``),
and connections the network policy refused (``refused_connection_flags``: data the policy hands over).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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


# -- the cell's record: what the harness saw of the arm ---------------------------------------------------------

#: Files of a run dir the harness or the instance wrote, not the agent: not read for the agent's commands.
NOT_TRANSCRIPTS = frozenset({"prompt.txt", "params.json", "verify.log", "env.log", "verify-junit.xml",
                             "meter-calls.jsonl", "replayed.patch"})
#: Most history-probe flags a cell carries (the first of each distinct command).
MAX_PROBE_FLAGS = 10
#: A git command line as an agent's log shows it: ``git``, its global options, the subcommand, its arguments up to
#: the end of the line, a quote (a JSON transcript) or a shell separator.
_GIT_COMMAND = re.compile(
    r"\bgit(?:\s+(?:-[Cc]\s+\S+|--[\w-]+(?:=\S+)?))*\s+"
    r"(log|rev-list|reflog|fsck|fetch|pull|clone|show|cat-file)\b([^\n\r\"'`;|&)]*)")
#: Arguments of ``log``/``rev-list`` that walk refs other than base's history.
_BEYOND_BASE = re.compile(r"(?:^|\s)(--all|--branches|--remotes|--tags|--glob|--reflog|--walk-reflogs|-g)\b")
#: Pickaxe searches: the commit that added or removed a string.
_PICKAXE = re.compile(r"(?:^|\s)(-S\S*|-G\S*|--pickaxe-\w+|--find-object\S*)")
#: ``fsck`` options that list objects no ref reaches (the trail of a rewritten history).
_LOST = re.compile(r"(--lost-found|--unreachable|--dangling)\b")
#: An object name an agent may ``show`` or ``cat-file``.
_OBJECT_ID = re.compile(r"(?:^|[\s:^~])([0-9a-f]{7,64})\b")


def _probe(command: str, arguments: str, known: Callable[[str], bool]) -> str | None:
    """Why ``git COMMAND ARGUMENTS`` looks beyond base, or None."""
    if command in ("log", "rev-list"):
        found = _PICKAXE.search(arguments)
        if found:
            return f"a pickaxe search ({found.group(1)[:40]}) for the commit that changed a string"
        found = _BEYOND_BASE.search(arguments)
        return f"walks refs beyond base's history ({found.group(1)})" if found else None
    if command == "reflog":
        return "reads the reflog (where a rewritten history leaves its trail)"
    if command == "fsck":
        found = _LOST.search(arguments)
        return f"lists objects no ref reaches ({found.group(1)})" if found else None
    if command in ("fetch", "pull", "clone"):
        return f"fetches history from elsewhere ({command})"
    unknown = [name for name in _OBJECT_ID.findall(arguments) if not known(name)]
    return f"reads an object base does not hold ({unknown[0]})" if unknown else None


def history_probe_flags(logs: Mapping[str, str], known: Callable[[str], bool] = lambda name: False,
                        ) -> list[IntegrityFlag]:
    """Git commands in the agent's transcript and logs (``logs``: run-dir path -> text, as collected) that look
    beyond base: ``log``/``rev-list`` over all refs, the reflog, pickaxe ``-S``/``-G``, ``fsck --lost-found``,
    ``fetch``/``pull``/``clone``, ``show``/``cat-file`` of an object ``known`` says base does not hold.

    One flag per distinct command (the first ``MAX_PROBE_FLAGS``), naming the log it was seen in. Seen, not
    proven run: a command the agent only printed is flagged too; a command it ran without a trace is not.
    """
    flags: list[IntegrityFlag] = []
    seen: set[str] = set()
    for name, text in sorted(logs.items()):
        if name.rsplit("/", 1)[-1] in NOT_TRANSCRIPTS:
            continue
        for found in _GIT_COMMAND.finditer(text):
            command, arguments = found.group(1), found.group(2).replace("\\n", " ")
            shown = f"git {command}{arguments}".strip()[:120]
            if shown in seen or len(flags) >= MAX_PROBE_FLAGS:
                continue
            why = _probe(command, arguments, known)
            if why is not None:
                seen.add(shown)
                flags.append(IntegrityFlag("git_history_probe", name, f"`{shown}`: {why}"))
    return flags


def dropped_test_edit_flags(excluded: Iterable[Mapping[str, Any]]) -> list[IntegrityFlag]:
    """The test files (``conftest.py`` among them) the arm changed and the patch left out, one flag each
    (``excluded``: the row's ``details.patch_excluded.files``)."""
    return [IntegrityFlag("test_edit_dropped", entry["path"],
                          f"the arm changed this test file (+{entry.get('added')}/-{entry.get('removed')} lines); "
                          "the patch leaves it out and the tests run as the instance has them")
            for entry in excluded if is_test_path(entry["path"])]


#: Files that configure a build or a test run rather than hold the code under test.
CONFIG_NAMES = frozenset({"setup.cfg", "tox.ini", "pyproject.toml", "pytest.ini", ".pytest.ini", "pytest.toml",
                          ".pytest.toml", "noxfile.py", "MANIFEST.in", ".coveragerc", "sitecustomize.py",
                          "usercustomize.py", "requirements.txt"})


def is_test_or_config(path: str) -> bool:
    """Whether ``path`` is a test file (the patch's excludes) or a file that configures a build or test run."""
    name = path.rsplit("/", 1)[-1]
    return is_test_path(path) or name in CONFIG_NAMES or name.endswith((".pth", ".ini", ".cfg"))


def only_tests_flag(patch: bytes, excluded: Iterable[Mapping[str, Any]]) -> list[IntegrityFlag]:
    """One flag when every file the arm changed (the patch's and the excluded test files) is a test or
    configuration file: a cell that resolves so changed no code under test."""
    changed = sorted({*files_touched(patch), *(entry["path"] for entry in excluded if is_test_path(entry["path"]))})
    if not changed or not all(is_test_or_config(path) for path in changed):
        return []
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return [IntegrityFlag("tests_only_patch", changed[0], f"the arm changed only test or configuration files: "
                          f"{shown}")]


def refused_connection_flags(refusals: Iterable[Mapping[str, Any]]) -> list[IntegrityFlag]:
    """Connections the cell's network policy refused, one flag per host and port (``refusals``: what the
    policy hands over, ``{"host", "port", "count"}`` each)."""
    return [IntegrityFlag("network_refused", f"{entry.get('host')}:{entry.get('port')}",
                          f"the network policy refused {entry.get('count', 1)} connection(s)")
            for entry in refusals]


def cell_record(logs: Mapping[str, str], patch: bytes | None, details: Mapping[str, Any],
               known: Callable[[str], bool] = lambda name: False) -> list[IntegrityFlag]:
    """The cell's record: ``history_probe_flags`` of its logs, and, once a patch was taken, the dropped test
    edits and a tests-only patch (from ``details.patch_excluded``), and what ``details.network_refused`` (the
    network policy's data) holds."""
    excluded = (details.get("patch_excluded") or {}).get("files") or []
    flags = history_probe_flags(logs, known)
    if patch is not None:
        flags += dropped_test_edit_flags(excluded) + only_tests_flag(patch, excluded)
    return flags + refused_connection_flags(details.get("network_refused") or ())
