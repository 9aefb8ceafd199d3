"""Datasets as published: which format a row is, and the harness row it becomes.

A row is read by its columns (``detect``), and a SWE-bench 5 task directory by its layout (``read_task_dir``):

- ``swebench``: SWE-bench's columns (full, Lite, Verified, SWE-Gym, the harness's own rows): as they are;
- ``swebench5``: a SWE-bench 5 row (``eval_script``, ``log_parser``, ``eval_type``, ``image``): its
  ``eval_script``'s test command and its named parser grade it (``grading.runners``), ``eval_type`` must be
  ``pass_and_fail``;
- ``swe-rebench``: a row with ``install_config`` (SWE-rebench, SWE-rebench-V2): its python, packages,
  pre-install and install steps become the row's ``env``, its ``test_cmd`` and ``log_parser`` the runner;
- ``swe-smith``: a SWE-smith row (``image_name``, a bug-introducing ``patch``, no ``test_patch``): its
  ``base_commit`` is the bug's commit (the workspace holds the bug), and the gold fix is the inverse of
  ``patch``.

``convert`` gives the harness row (the published columns, kept, plus the ones the harness reads) and where
each harness field came from, so an error about ``log_parser`` names ``install_config.log_parser``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..naming import TASK_FILE
from .model import InstanceFileError

SWEBENCH, SWEBENCH5, SWE_REBENCH, SWE_SMITH = "swebench", "swebench5", "swe-rebench", "swe-smith"

#: A task directory's columns kept as files of their own (SWE-bench's ``swebench/task/repo.py``, ``AS_FILE``).
TASK_COLUMN_FILES = {"patch": "gold.patch", "test_patch": "test.patch", "eval_script": "eval.sh",
                     "problem_statement": "problem_statement.md"}
#: Written only when there is something to say.
TASK_OPTIONAL_FILES = {"hints_text": "hints.md"}
TASK_TESTS_FILE = "tests.json"
#: SWE-bench 5's ``eval_type`` values; the harness grades the first (an absent test is not a pass).
EVAL_TYPES = ("pass_and_fail", "fail_only")


@dataclass(frozen=True)
class Converted:
    """A published row as the harness reads it: ``row`` (a superset of the published row), its format, and
    ``origins``: harness field -> (the published field it came from, the file when not the row's own)."""

    row: dict[str, Any]
    format: str
    origins: Mapping[str, tuple[str, Path | None]] = field(default_factory=dict)

    def located(self, error: InstanceFileError) -> InstanceFileError:
        """``error`` naming the published field (and file) its field came from."""
        top = (error.field or "").split(".", 1)
        if top[0] not in self.origins:
            return error
        published, file = self.origins[top[0]]
        name = published + (f".{top[1]}" if len(top) > 1 else "")
        return InstanceFileError(file or error.path, None if file else error.line, error.message, name)


def detect(row: Mapping[str, Any]) -> str:
    """The format of a row, from its columns."""
    if "install_config" in row:
        return SWE_REBENCH
    if "eval_script" in row or "eval_type" in row:
        return SWEBENCH5
    if "image_name" in row and not row.get("test_patch") and str(row.get("repo", "")).startswith("swesmith/"):
        return SWE_SMITH
    return SWEBENCH


def convert(path: Path, line: int, row: Mapping[str, Any]) -> Converted:
    """The harness row of a published row; a row the harness cannot grade is an ``InstanceFileError``."""
    kind = detect(row)
    if kind == SWE_REBENCH:
        return _swe_rebench(path, line, row)
    if kind == SWEBENCH5:
        _check_eval_type(path, line, row)
    elif kind == SWE_SMITH:
        return _swe_smith(path, line, row)
    return Converted(dict(row), kind)


def _check_eval_type(path: Path, line: int, row: Mapping[str, Any]) -> None:
    eval_type = row.get("eval_type", "pass_and_fail")
    if eval_type == "fail_only":
        raise InstanceFileError(path, line, "'fail_only' (a test absent from the log counts as passed; SWE-bench "
                                "uses it for JavaScript rows) is not a grading the harness does; expected "
                                "'pass_and_fail'", "eval_type")
    if eval_type not in EVAL_TYPES:
        raise InstanceFileError(path, line, f"{eval_type!r} is not one of SWE-bench's eval types; expected "
                                "'pass_and_fail'", "eval_type")


# SWE-rebench ------------------------------------------------------------------------------------------------


#: ``install_config`` keys that describe a conda environment the harness cannot build with uv.
_CONDA_PACKAGES = ("environment.yml",)
#: Pre-install steps that need root (SWE-rebench's images ran them as root): not run, as SWE-bench's ``system_steps``.
_SYSTEM_STEP = re.compile(r"^\s*(sudo\s+)?(apt-get|apt|dpkg|yum|apk)\b")


def _swe_rebench(path: Path, line: int, row: Mapping[str, Any]) -> Converted:
    def fail(message: str, name: str) -> InstanceFileError:
        return InstanceFileError(path, line, message, name)

    language = row.get("language")
    if language is not None and str(language).lower() != "python":
        raise fail(f"{language!r}: the harness grades Python rows; expected 'python' (or no 'language')", "language")
    config = row["install_config"]
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError:
            raise fail("a string here must be a JSON-encoded object", "install_config") from None
    if not isinstance(config, dict):
        raise fail(f"expected an object with 'test_cmd' and 'log_parser' (and 'python', 'install', ...), got "
                   f"{type(config).__name__}", "install_config")
    origins: dict[str, tuple[str, Path | None]] = {}
    harness: dict[str, Any] = {}
    env: dict[str, Any] = {}
    if config.get("python") not in (None, ""):
        env["python"] = str(config["python"])
    requirements: list[str] = []
    pre_install: list[str] = []
    packages = config.get("packages")
    if packages in _CONDA_PACKAGES:
        raise fail(f"{packages!r}: a conda environment file, which the harness (uv, no conda) cannot build; "
                   "expected 'requirements.txt', a list of packages, or none", "install_config.packages")
    if packages == "requirements.txt":
        paths = config.get("reqs_path")
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
            raise fail("is needed with packages 'requirements.txt': a list of the repository's requirement files",
                       "install_config.reqs_path")
        pre_install += [f"python -m pip install -r {p}" for p in paths]
    elif isinstance(packages, str) and packages.strip():
        requirements += packages.split()
    for key, into in (("pip_packages", requirements), ("pre_install", pre_install)):
        value = config.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail("expected a list of strings", f"install_config.{key}")
        into += [v for v in value if key != "pre_install" or not _SYSTEM_STEP.match(v)]
    if requirements:
        env["requirements"] = requirements
    if pre_install:
        env["pre_install"] = pre_install
    if isinstance(config.get("install"), str) and config["install"].strip():
        env["install"] = config["install"]
    if env and "env" not in row:
        harness["env"] = env
        origins["env"] = ("install_config", None)
    command = config.get("test_cmd")
    if isinstance(command, list) and len(command) == 1:
        command = command[0]
    parser = config.get("log_parser")
    if not isinstance(parser, str) or not parser:
        raise fail("expected the name of the parser of the test command's output, e.g. 'parse_log_pytest'",
                   "install_config.log_parser")
    if command is None and parser == "parse_log_pytest":
        # No command of its own: pytest, whose report the harness's own runner reads (JUnit XML), is its runner.
        return Converted({**row, **harness}, SWE_REBENCH, origins)
    if not isinstance(command, str) or not command.strip():
        raise fail(f"expected the command that runs the tests (one string), to which the test files are "
                   f"appended; needed with log_parser {parser!r}", "install_config.test_cmd")
    if "test_cmd" not in row:
        harness["test_cmd"], origins["test_cmd"] = command, ("install_config.test_cmd", None)
    if "log_parser" not in row:
        harness["log_parser"], origins["log_parser"] = parser, ("install_config.log_parser", None)
    return Converted({**row, **harness}, SWE_REBENCH, origins)


# SWE-smith --------------------------------------------------------------------------------------------------


def _swe_smith(path: Path, line: int, row: Mapping[str, Any]) -> Converted:
    bug = row.get("patch")
    if not isinstance(bug, str) or not bug.strip():
        raise InstanceFileError(path, line, "is the patch that introduces the bug (its inverse is the gold fix); "
                                "expected a non-empty diff", "patch")
    try:
        gold = reverse_patch(bug)
    except ValueError as error:
        raise InstanceFileError(path, line, f"cannot be inverted into the gold fix: {error}", "patch") from None
    # ``bug_patch`` keeps the published one; ``patch`` is the gold fix every arm is compared with.
    return Converted({**row, "bug_patch": bug, "patch": gold}, SWE_SMITH, {"bug_patch": ("patch", None)})


_HUNK = re.compile(r"^@@ -(\d+(?:,\d+)?) \+(\d+(?:,\d+)?) @@(.*)$")
_GIT_HEADER = re.compile(r"^diff --git a/(.*) b/(.*)$")


def reverse_patch(patch: str) -> str:
    """The inverse of a git unified diff (``git apply -R``'s patch): applied after ``patch``, it restores the tree.

    :raises ValueError: a binary patch, or a copy (neither has an inverse as text).
    """
    out: list[str] = []
    lines = patch.splitlines(keepends=True)
    index = 0
    pair = {"new file mode": "deleted file mode", "deleted file mode": "new file mode",
            "old mode": "new mode", "new mode": "old mode", "rename from": "rename to", "rename to": "rename from"}
    while index < len(lines):
        text = lines[index]
        body, end = text.rstrip("\r\n"), text[len(text.rstrip("\r\n")):]
        header = _GIT_HEADER.match(body)
        hunk = _HUNK.match(body)
        if header:
            out.append(f"diff --git a/{header.group(2)} b/{header.group(1)}{end}")
            extended: list[str] = []
            index += 1
            while index < len(lines) and not lines[index].startswith(("--- ", "@@", "diff --git ", "Binary ")) \
                    and not lines[index].startswith("GIT binary patch"):
                extended.append(lines[index])
                index += 1
            out += _reverse_extended(extended, pair)
            continue
        if body.startswith("GIT binary patch") or body.startswith("Binary files "):
            raise ValueError("a binary patch has no text inverse")
        if body.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith("+++ "):
            old, new = body[4:], lines[index + 1].rstrip("\r\n")[4:]
            out.append(f"--- {_side(new, 'a/')}{end}")
            out.append(f"+++ {_side(old, 'b/')}{end}")
            index += 2
            continue
        if hunk:
            out.append(f"@@ -{hunk.group(2)} +{hunk.group(1)} @@{hunk.group(3)}{end}")
            index = _reverse_hunk(lines, index + 1, _count(hunk.group(1)), _count(hunk.group(2)), out)
            continue
        out.append(text)
        index += 1
    return "".join(out)


def _count(span: str) -> int:
    return int(span.split(",")[1]) if "," in span else 1


def _reverse_hunk(lines: list[str], index: int, old: int, new: int, out: list[str]) -> int:
    """Copy one hunk's body into ``out`` with its sides swapped; the index after it."""
    while index < len(lines) and (old > 0 or new > 0 or lines[index].startswith("\\")):
        text = lines[index]
        if text.startswith("+"):
            out.append("-" + text[1:])
            new -= 1
        elif text.startswith("-"):
            out.append("+" + text[1:])
            old -= 1
        elif text.startswith("\\"):
            out.append(text)  # "\ No newline at end of file": about the line before it, whichever side it is on
        else:
            out.append(text)
            old, new = old - 1, new - 1
        index += 1
    return index


def _side(name: str, prefix: str) -> str:
    if name == "/dev/null":
        return name
    return prefix + name[2:] if name[:2] in ("a/", "b/") else name


def _reverse_extended(extended: list[str], pair: Mapping[str, str]) -> list[str]:
    reversed_lines: list[str] = []
    for text in extended:
        body, end = text.rstrip("\r\n"), text[len(text.rstrip("\r\n")):]
        if body.startswith(("copy from", "copy to")):
            raise ValueError("a copy has no inverse patch")
        if body.startswith("index "):
            found = re.match(r"^index (\w+)\.\.(\w+)(.*)$", body)
            reversed_lines.append(f"index {found.group(2)}..{found.group(1)}{found.group(3)}{end}" if found else text)
            continue
        key = next((k for k in pair if body.startswith(k + " ")), None)
        reversed_lines.append(f"{pair[key]}{body[len(key):]}{end}" if key else text)
    # ``old mode`` before ``new mode``, ``rename from`` before ``rename to``, as git writes them.
    order = ["old mode", "new mode", "deleted file mode", "new file mode", "similarity index", "rename from",
             "rename to", "index"]

    def rank(text: str) -> int:
        return next((i for i, k in enumerate(order) if text.startswith(k)), len(order))

    return sorted(reversed_lines, key=rank)


# SWE-bench 5 task directories -------------------------------------------------------------------------------


def is_task_file(path: Path) -> bool:
    """Whether ``path`` is a SWE-bench 5 task's ``task.yaml`` (its directory then is one instance)."""
    return path.name == TASK_FILE


def task_digest(task_yaml: Path) -> str:
    """The sha256 of a task directory's files the harness reads, in a fixed order."""
    digest = hashlib.sha256()
    folder = task_yaml.parent
    for name in (TASK_FILE, TASK_TESTS_FILE, *TASK_COLUMN_FILES.values(), *TASK_OPTIONAL_FILES.values()):
        target = folder / name
        digest.update(name.encode() + b"\0" + (target.read_bytes() if target.is_file() else b"\1absent") + b"\0")
    return digest.hexdigest()


def read_task_dir(task_yaml: Path) -> Iterator[tuple[int, Any]]:
    """The one row of a SWE-bench 5 task directory, as SWE-bench's ``load_task`` reads it.

    ``task.yaml`` holds the metadata, ``tests.json`` the ``FAIL_TO_PASS`` / ``PASS_TO_PASS`` lists, and each of
    ``gold.patch``, ``test.patch``, ``eval.sh`` and ``problem_statement.md`` a column; ``hints.md`` is optional.
    The ``Dockerfile`` and the asset folders are not read (the harness builds its own environment).
    """
    import yaml

    folder = task_yaml.parent
    try:
        meta = yaml.safe_load(task_yaml.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise InstanceFileError(task_yaml, None, f"cannot read: {error}") from None
    except yaml.YAMLError as error:
        raise InstanceFileError(task_yaml, None, f"not valid YAML: {error}") from None
    if not isinstance(meta, dict):
        raise InstanceFileError(task_yaml, None, "expected a mapping of the task's metadata (instance_id, repo, "
                                "base_commit, version, log_parser, eval_type, image, ...)")
    if meta.get("instance_id") not in (None, folder.name):
        raise InstanceFileError(task_yaml, None, f"{meta['instance_id']!r} is not the task's directory name "
                                f"({folder.name!r}); a task lives in tasks/<instance_id>/", "instance_id")
    row: dict[str, Any] = {"instance_id": folder.name, **meta}
    for column, name in {**TASK_COLUMN_FILES, **TASK_OPTIONAL_FILES}.items():
        target = folder / name
        if not target.is_file():
            if column in TASK_OPTIONAL_FILES:
                continue
            raise InstanceFileError(target, None, f"is missing; a task directory holds {TASK_FILE}, "
                                    f"{TASK_TESTS_FILE} and {', '.join(TASK_COLUMN_FILES.values())} (its "
                                    f"'{column}')")
        with open(target, newline="", encoding="utf-8") as handle:  # a patch's CRLF survives
            row[column] = handle.read()
    tests_path = folder / TASK_TESTS_FILE
    try:
        tests = json.loads(tests_path.read_text(encoding="utf-8"))
    except OSError:
        raise InstanceFileError(tests_path, None, "is missing; it holds the task's FAIL_TO_PASS and "
                                "PASS_TO_PASS lists") from None
    except json.JSONDecodeError as error:
        raise InstanceFileError(tests_path, error.lineno, f"not valid JSON ({error.msg})") from None
    if not isinstance(tests, dict):
        raise InstanceFileError(tests_path, None, "expected an object with FAIL_TO_PASS and PASS_TO_PASS lists")
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        if key in tests:
            row[key] = tests[key]
    yield 1, row


def task_origins(task_yaml: Path) -> dict[str, tuple[str, Path | None]]:
    """Where a task directory's columns live, for errors that name them."""
    folder = task_yaml.parent
    files = {column: (column, folder / name) for column, name in {**TASK_COLUMN_FILES, **TASK_OPTIONAL_FILES}.items()}
    return {**files, "FAIL_TO_PASS": ("FAIL_TO_PASS", folder / TASK_TESTS_FILE),
            "PASS_TO_PASS": ("PASS_TO_PASS", folder / TASK_TESTS_FILE)}
