"""Witnesses of a graded pytest run that the code under test cannot rewrite after the fact.

The graded run reports each test's outcome as it happens to the harness's own plugin
(``witness/arena_witness.py``), which writes it to a pipe only the harness reads (``Channel``). A cell
resolves only when every witness agrees (``disagreement``): the streamed outcomes, the session's exit
status against the process's, the report (JUnit XML) or the log under the row's rules, and the hooks that
decided the reports. Any disagreement makes the cell ``unresolved``, with the reason, and an integrity flag.

What a witness proves, and what it cannot: see docs/threat-model.md. In short, a record is written when pytest
logs a test's phase, before any ``atexit`` handler or ``os._exit``, so a report rewritten at exit, log lines
forged afterwards, or an exit status that hides failures disagree with it; a hook implementation defined in the
tree (not a ``conftest.py``), in code with no file, or in a file written during the run, and a pytest function
replaced during the run, are named at the session's end. Code under test runs in pytest's process: code written
to imitate pytest's own (a file outside the tree, written before the run) can still lie to an in-process
witness. The stream proves what pytest's process said, not that it was told the truth.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..outcome import TestStatus
from .integrity import IntegrityFlag
from .parsers import TestResult
from .rules import SWEBENCH, GradingRules, reported_statuses

#: The folder put on ``PYTHONPATH`` so that ``-p arena_witness`` finds the witness (it holds nothing else).
WITNESS_DIR = Path(__file__).parent / "witness"
#: Variables that would change how Python or pytest start before the harness's rules apply: never passed on.
SCRUBBED = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONHOME", "PYTHONEXECUTABLE",
            "PYTHONUSERBASE", "PYTEST_DEBUG", "PYTHONBREAKPOINT")
#: What the harness keeps of the stream at most; a longer one is not believed.
STREAM_CAP = 256 * 1024 * 1024
#: A command that runs pytest: its run must report to the witness.
_RUNS_PYTEST = re.compile(r"(?:^|[\s;&|()/])(?:py\.test|pytest|python[\d.]*(?:\s+-\S+)*\s+-m\s+pytest)(?:\s|$)",
                          re.MULTILINE)


def runs_pytest(command: str) -> bool:
    """Whether a shell command runs pytest itself (then its run must be witnessed)."""
    return bool(_RUNS_PYTEST.search(command))


def startup_env(env: Mapping[str, str], tree: Path, fd: int | None = None) -> dict[str, str]:
    """The graded run's environment: nothing that changes start-up, autoload off, the witness loaded first."""
    clean = {name: value for name, value in env.items() if name not in SCRUBBED}
    clean["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    clean["PYTEST_ADDOPTS"] = "-p arena_witness"
    clean["PYTHONPATH"] = os.pathsep.join([str(WITNESS_DIR), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    clean["ARENA_WITNESS_TREE"] = str(tree)
    if fd is not None:
        clean["ARENA_WITNESS_FD"] = str(fd)
    return clean


@dataclass
class Channel:
    """A pipe the graded run writes its witness records to; the harness reads it while the run goes on."""

    write_fd: int
    _read_fd: int
    _chunks: list[bytes] = field(default_factory=list)
    _size: int = 0
    overflow: bool = False

    def _drain(self) -> None:
        with os.fdopen(self._read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                if self._size + len(chunk) > STREAM_CAP:
                    self.overflow = True
                    continue
                self._size += len(chunk)
                self._chunks.append(chunk)

    def data(self) -> bytes:
        return b"".join(self._chunks)


@contextmanager
def channel() -> Iterator[Channel]:
    """An open channel; on exit the harness's write end is closed and what was written is read to its end."""
    read_fd, write_fd = os.pipe()
    os.set_inheritable(write_fd, True)
    opened = Channel(write_fd, read_fd)
    reader = threading.Thread(target=opened._drain, name="arena-witness", daemon=True)
    reader.start()
    try:
        yield opened
    finally:
        os.close(write_fd)
        # Every writer is gone once the run's processes are (a sandbox's pid namespace ends with it).
        reader.join(timeout=30)
        if reader.is_alive():
            opened.overflow = True


@dataclass
class _TestRun:
    """One run of a test as the witness saw it: its node id and its outcome so far (None: not decided)."""

    test_id: str
    status: str | None = None


@dataclass
class Testimony:
    """What the witness saw: each pytest session by pid (its exit status, None if it never finished), each
    test's outcome, the hook implementations and the replaced runner functions at the end."""

    sessions: dict[int, int | None] = field(default_factory=dict)
    #: Each run of a test, in order (pytest may run one node id more than once).
    runs: list[_TestRun] = field(default_factory=list)
    hooks: list[dict[str, str]] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    tree_entry_points: list[str] = field(default_factory=list)
    #: Where pytest's own package (``_pytest``) was imported from, as the run said.
    runner: str = ""
    malformed: int = 0
    last_exit: int | None = None

    def outcomes(self) -> list[TestResult]:
        """Each decided run of a test, in order, as a result the grading rules read (``rules.reported_statuses``)."""
        return [TestResult(run.test_id, run.status) for run in self.runs if run.status is not None]


def read_testimony(data: bytes) -> Testimony:
    """The records of a stream; a line that is not one of the witness's records is counted as malformed."""
    seen = Testimony()
    pid = 0
    current: dict[str, _TestRun] = {}  # each test's run under way
    for line in data.splitlines():
        try:
            record = json.loads(line)
            kind = record["e"]
        except (ValueError, KeyError, TypeError):
            seen.malformed += 1
            continue
        if kind == "start":
            pid = int(record["pid"])
            seen.sessions[pid] = None
        elif kind == "test":
            _note_phase(seen.runs, current, str(record["id"]), str(record["when"]), str(record["outcome"]),
                        bool(record.get("xfail")))
        elif kind == "hooks":
            seen.hooks.extend(record.get("impls", ()))
            seen.replaced.extend(record.get("replaced", ()))
            seen.runner = str(record.get("runner") or "")
        elif kind == "finish":
            seen.sessions[pid] = seen.last_exit = int(record["exitstatus"])
        elif kind == "entry_point_failed":
            pass  # an installed plugin that cannot be imported where the run is: not the tree's
        elif kind == "tree_entry_point":
            seen.tree_entry_points.append(f"{record.get('name')} = {record.get('value')}")
        else:
            seen.malformed += 1
    return seen


def _note_phase(runs: list[_TestRun], current: dict[str, _TestRun], test_id: str, when: str, outcome: str,
                xfail: bool) -> None:
    """A test's outcome as pytest counts it: a failed phase fails it; its call phase (or a skipped setup)
    decides it otherwise; an expected failure is ``xfailed``. A setup phase starts another run of the test."""
    if when == "setup" or test_id not in current:
        current[test_id] = run = _TestRun(test_id)
        runs.append(run)
    run = current[test_id]
    if run.status in (TestStatus.FAILED, TestStatus.ERROR):
        return
    if outcome == "failed":
        run.status = TestStatus.FAILED if when == "call" else TestStatus.ERROR
    elif when == "call" or (when == "setup" and outcome == "skipped"):
        if outcome == "passed":
            run.status = TestStatus.XPASSED if xfail else TestStatus.PASSED
        else:
            run.status = TestStatus.XFAILED if xfail else TestStatus.SKIPPED


@dataclass(frozen=True)
class Judgement:
    """Whether the witnesses agree with the verdict: ``reason`` (None: they do) and the flags they raise."""

    reason: str | None
    flags: tuple[IntegrityFlag, ...] = ()


RUNNER_IN_TREE = ("the tree is pytest itself: its own plugins decide the test reports, so the runner is the code "
                  "under test and its hooks were believed (as SWE-bench grades pytest's rows); a hook elsewhere in "
                  "the tree, or in a file written during the run, is still refused")


def _runner_in_tree(runner: str, tree: Path) -> Path | None:
    """pytest's package folder, when the run imported pytest from the tree itself (the tree is pytest's repository)."""
    if not runner or not os.path.isabs(runner):
        return None
    where = Path(runner)
    return where if where.is_relative_to(tree) and where.name == "_pytest" else None


def _runner_file(path: str, runner: Path, started: float, inside_image: bool, mtime: object) -> bool:
    """A hook's file inside pytest's own package in the tree, there before the run started."""
    if not path or not os.path.isabs(path) or not Path(path).is_relative_to(runner):
        return False
    if inside_image:
        return isinstance(mtime, (int, float)) and mtime < started
    try:
        return Path(path).is_file() and Path(path).stat().st_mtime < started
    except OSError:
        return False


def _trusted_file(path: str, tree: Path, untrusted: Sequence[Path], started: float, inside_image: bool = False,
                  mtime: object = None, shown_at: Sequence[tuple[Path, Path]] = ()) -> bool:
    """A hook's file pytest or an installed plugin would have: a ``conftest.py`` of the tree (taken from base), or a
    file outside the tree and the cell's writable folders that existed before the run.

    Inside an image the file is not this machine's: where it is, and when it was written (``mtime``), are as the
    run saw them. A file under a place the sandbox bound another folder over (``shown_at``: (source, place), a
    template's package over its stand-in) is that folder's file.
    """
    if not path or not os.path.isabs(path):
        return False
    where = Path(path)
    for source, place in shown_at:
        if where.is_relative_to(place):
            where = source / where.relative_to(place)
            break
    if where.is_relative_to(tree):
        return where.name == "conftest.py"
    if inside_image:
        return (not any(where.is_relative_to(root) for root in untrusted)
                and isinstance(mtime, (int, float)) and mtime < started)
    # The harness's own interpreter (pytest, its plugins) may live under the user's HOME (pyenv's ~/.pyenv): the
    # HOME a cell can write is its own, which holds no interpreter.
    harness = {Path(prefix) for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    if not any(where.is_relative_to(prefix) for prefix in harness) and any(
            where.is_relative_to(root) for root in untrusted):
        return False
    try:
        return where.is_file() and where.stat().st_mtime < started
    except OSError:
        return False


def judge(data: bytes, *, expected: bool, returncode: int | None, statuses: Mapping[str, str], tree: Path,
          untrusted: Sequence[Path] = (), started: float = 0.0, overflow: bool = False,
          inside_image: bool = False, rules: GradingRules = SWEBENCH,
          shown_at: Sequence[tuple[Path, Path]] = ()) -> Judgement:
    """Compare the witness's stream with the verdict's other witnesses.

    :param expected: the command runs pytest (``runs_pytest``): no stream at all is a disagreement.
    :param returncode: the run's exit status.
    :param statuses: each recorded test's status as the report or the log gave it.
    :param untrusted: folders the code under test could write (the cell's HOME, its temp dir).
    :param started: when the run started (``time.time()``): a hook file written since was written by the run.
    :param inside_image: the run was in an image's container: ``tree`` and ``untrusted`` are its paths.
    :param rules: the verdict's rules: they decide which of a node id's runs stands, as for the report.
    :param shown_at: (source, place): the sandbox showed ``source`` read-only at ``place`` (``SandboxPolicy``).
    """
    seen = read_testimony(data)
    flags = [IntegrityFlag("tree_entry_point", name, "a pytest11 entry point of a distribution in the tree: "
                           "not loaded") for name in seen.tree_entry_points]

    def refuse(kind: str, reason: str) -> Judgement:
        return Judgement(f"witnesses disagree: {reason}", (*flags, IntegrityFlag(kind, "", reason)))

    if overflow:
        return refuse("witness", "the witness's stream was cut (over its cap, or still open after the run)")
    if not seen.sessions:
        if expected:
            return refuse("witness", "the pytest run never reported to the harness's witness "
                          "(it exited before pytest started its session, or ran without the harness's plugin)")
        return Judgement(None, tuple(flags))
    if seen.malformed:
        return refuse("witness", f"{seen.malformed} record(s) on the witness's channel were not the witness's")
    unfinished = sorted(pid for pid, status in seen.sessions.items() if status is None)
    if unfinished:
        return refuse("witness", f"a pytest session (pid {unfinished[0]}) ended without finishing "
                      "(os._exit, a crash or a kill before its end)")
    if returncode == 0 and seen.last_exit not in (0, None):
        return refuse("witness", f"the run exited 0 but its pytest session ended with exit status {seen.last_exit}")
    runner = _runner_in_tree(seen.runner, tree)
    trusted: dict[tuple[str, str], bool] = {}  # a file defines many hooks: judged once

    def trusted_file(hook: Mapping[str, Any]) -> bool:
        key = (str(hook.get("file", "")), repr(hook.get("mtime")))  # the stream's, whatever it holds
        if key not in trusted:
            trusted[key] = _trusted_file(key[0], tree, untrusted, started, inside_image, hook.get("mtime"), shown_at)
        return trusted[key]

    untrusted_hooks = [hook for hook in seen.hooks if not trusted_file(hook)]
    believed = [hook for hook in untrusted_hooks if runner is not None
                and _runner_file(str(hook.get("file", "")), runner, started, inside_image, hook.get("mtime"))]
    if believed:
        flags.append(IntegrityFlag("runner_in_tree", str(runner), RUNNER_IN_TREE))
    foreign = sorted({f"{hook['hook']} in {hook['file'] or '(no file)'}" for hook in untrusted_hooks
                      if hook not in believed})
    if foreign:
        return refuse("runner_tampered", f"hooks that decide test reports were defined by the code under test: "
                      f"{'; '.join(foreign[:3])}")
    if seen.replaced:
        return refuse("runner_tampered", f"pytest's own functions were replaced during the run: "
                      f"{', '.join(seen.replaced[:5])}")
    index = reported_statuses(seen.outcomes(), rules, cut_ids=True)
    for test_id, status in statuses.items():
        witnessed = index.get(test_id)
        if TestStatus(status).passes and witnessed is not None and not TestStatus(witnessed).passes:
            return refuse("witness", f"{test_id} is {status} in the report but the witness saw it {witnessed}")
    return Judgement(None, tuple(flags))


def recorded_statuses(tests: Mapping[str, Any] | None) -> dict[str, str]:
    """The recorded tests' statuses of a verdict's ``tests``."""
    if not tests:
        return {}
    return {str(test_id): str(status) for part in ("FAIL_TO_PASS", "PASS_TO_PASS")
            for test_id, status in dict(tests.get(part) or {}).items()}
