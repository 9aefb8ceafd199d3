#!/usr/bin/env python3
"""Build the bundled suite from ``projects/``: ``repos/<name>.bundle`` and ``suite.jsonl``, each row checked.

Run from anywhere, with pytest-swe-arena installed (``pip install -e .``)::

    python instances/build_suite.py            # rebuild, check every row, then replace the files
    python instances/build_suite.py --check    # only check the suite.jsonl and bundles on disk
    python instances/build_suite.py --out DIR  # build into DIR instead of next to this script

Each ``projects/<name>/`` folder holds one instance: ``instance.toml`` (the row's own fields),
``problem_statement.md``, ``history/*.patch`` (``git format-patch -k`` files, replayed in order with
``git am``; the project's tests must pass after each one), ``gold.patch`` and ``test.patch``. The rows are
checked with the harness's own code: its loader and JSON Schema, its workspaces and patch extraction, its
test-path rules, its verify step and its per-test grading, so the suite is checked by the code that grades it.
Nothing is replaced unless every row checks out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from pytest_swe_arena.cell import processes as proc
from pytest_swe_arena.cell.git import WorkspaceError
from pytest_swe_arena.cell.patches import (
    apply_patch,
    extract_patch,
    files_touched,
    is_excluded_from_patch,
    is_test_path,
)
from pytest_swe_arena.cell.venvs import shell_argv
from pytest_swe_arena.cell.workspace import RepoStore, Workspace, materialize
from pytest_swe_arena.grading.parsers import TestResult, parse_junitxml, parse_output
from pytest_swe_arena.grading.rules import SWEBENCH, reported_statuses, verdict_on_run
from pytest_swe_arena.grading.runners import runner_command
from pytest_swe_arena.grading.verify import VerifyInfrastructureError, VerifyResult, prepare_tree, run_verify
from pytest_swe_arena.instances.loading import build_instance, load_instances, read_rows
from pytest_swe_arena.instances.model import Instance, InstanceFileError
from pytest_swe_arena.outcome import counts_as_pass

T = TypeVar("T")
R = TypeVar("R")

HERE = Path(__file__).resolve().parent
SUITE_FILE = "suite.jsonl"
REPOS_DIR = "repos"
#: Who commits the replayed history (the author and both dates come from each patch).
COMMITTER = {"GIT_COMMITTER_NAME": "Arena Maintainers", "GIT_COMMITTER_EMAIL": "maintainers@arena.invalid"}
#: The order of a row's fields in suite.jsonl; other fields of instance.toml follow, in the file's order.
ROW_ORDER = ("instance_id", "repo", "base_commit", "source", "version", "created_at", "problem_statement",
             "hints_text", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS", "verify")
#: Fields the builder fills in from the folder's other files and the test runs.
COMPUTED = ("base_commit", "source", "problem_statement", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")
#: What a project folder holds.
PROJECT_FILES = ("instance.toml", "problem_statement.md", "history", "gold.patch", "test.patch")
#: A generous bound on one test run: the projects' suites take about a second.
RUN_TIMEOUT = 600.0
DEFAULT_MAX_VERIFY_SECONDS = 6.0


class BuildError(Exception):
    """Anything that makes the suite wrong; aborts the build."""


@dataclasses.dataclass(frozen=True)
class Project:
    """One folder of ``projects/``: the instance's own fields, its history, its gold and test patches."""

    name: str
    folder: Path
    metadata: Mapping[str, Any]
    problem_statement: str
    history: tuple[Path, ...]
    gold_patch: str
    test_patch: str


def load_project(folder: Path) -> Project:
    """Read one project folder; raise ``BuildError`` naming the file that is missing or wrong."""

    def read(name: str) -> str:
        try:
            # Bytes, not read_text(): universal newlines would turn a patch's "\r\n" lines into "\n".
            return (folder / name).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise BuildError(f"{folder / name}: cannot read: {error}") from None

    unexpected = sorted(path.name for path in folder.iterdir() if path.name not in PROJECT_FILES)
    unexpected += sorted(f"history/{path.name}" for path in (folder / "history").glob("*") if path.suffix != ".patch")
    if unexpected:
        raise BuildError(f"{folder}: unexpected {unexpected}; a project folder holds only {list(PROJECT_FILES)}, "
                         "and history/ only *.patch files")
    metadata_file = folder / "instance.toml"
    try:
        metadata = tomllib.loads(read("instance.toml"))
    except tomllib.TOMLDecodeError as error:
        raise BuildError(f"{metadata_file}: not valid TOML: {error}") from None
    computed = [key for key in COMPUTED if key in metadata]
    if computed:
        raise BuildError(f"{metadata_file}: {computed} are filled in by the builder; remove them (the patches, "
                         "the problem statement and the history are files of their own)")
    if not isinstance(metadata.get("verify"), str):
        raise BuildError(f"{metadata_file}: 'verify' (a shell command, exit 0 = pass) is required")
    history = tuple(sorted((folder / "history").glob("*.patch")))
    if len(history) < 3:
        raise BuildError(f"{folder / 'history'}: needs at least 3 commits as *.patch files, found {len(history)}")
    project = Project(folder.name, folder, metadata, read("problem_statement.md"), history,
                      read("gold.patch"), read("test.patch"))
    problems = patch_problems(project.gold_patch, project.test_patch)
    if problems:
        raise BuildError(f"{folder}: " + "; ".join(problems))
    return project


def patch_problems(patch: str, test_patch: str) -> list[str]:
    """The test-path rules, as the harness's patch extraction applies them."""
    problems = []
    patch_files, test_files = files_touched(patch), files_touched(test_patch)
    left_out = [path for path in patch_files if is_excluded_from_patch(path)]
    not_tests = [path for path in test_files if not (is_test_path(path) and path.startswith("tests/"))]
    if not patch_files:
        problems.append("the gold patch changes nothing")
    if left_out:
        problems.append(f"the gold patch touches files the harness leaves out of every patch: {left_out}")
    if not test_files:
        problems.append("the test patch changes nothing")
    if not_tests:
        problems.append(f"the test patch touches files that are not tests under tests/: {not_tests}")
    return problems


# ---------------------------------------------------------------------------------------------------------------
# processes


def git(cwd: Path, *args: str) -> str:
    """git with no user or system config, the suite's committer, and dates in UTC."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(COMMITTER, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
               LC_ALL="C", TZ="UTC")
    completed = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise BuildError(f"git {' '.join(args)} failed in {cwd} (exit {completed.returncode}):\n"
                         f"{completed.stderr}{completed.stdout}")
    return completed.stdout


def tests_env() -> dict[str, str]:
    """The environment the projects' tests run in: no installed pytest plugins, this script's ``python``."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONSTARTUP")}
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONHASHSEED="0")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def run_shell(command: str, cwd: Path, log: Path) -> proc.ProcessResult:
    return proc.run(shell_argv(command), cwd=cwd, env=tests_env(), stdout=log, timeout=RUN_TIMEOUT)


def in_parallel(function: Callable[[T], R], items: list[T], jobs: int) -> list[R]:
    """``function`` over ``items``, ``jobs`` at a time, results in order; an error cancels what has not started."""
    pool = ThreadPoolExecutor(jobs)
    try:
        return list(pool.map(function, items))
    finally:
        pool.shutdown(cancel_futures=True)


def tail(log: Path, lines: int = 60) -> str:
    return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


# ---------------------------------------------------------------------------------------------------------------
# build


def replay_history(project: Project, repo: Path, logs: Path) -> str:
    """Commit each history patch with ``git am``, running the project's tests after each; return the base sha."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for patch in project.history:
        try:
            git(repo, "am", "--quiet", "--keep", "--committer-date-is-author-date", str(patch))
        except BuildError as error:
            raise BuildError(f"{patch}: does not apply with git am: {error}") from None
        if (repo / "tests").is_dir():
            log = logs / f"{patch.stem}.log"
            result = run_shell(project.metadata["verify"], repo, log)
            if result.returncode != 0:
                raise BuildError(f"{patch}: the project's tests fail after this commit:\n{tail(log)}")
        git(repo, "clean", "-q", "-fdx")
    return git(repo, "rev-parse", "HEAD").strip()


def make_row(project: Project, base: str, fail_to_pass: list[str], pass_to_pass: list[str]) -> dict[str, Any]:
    values = {**project.metadata, "base_commit": base, "source": {"bundle": f"{REPOS_DIR}/{project.name}.bundle"},
              "problem_statement": project.problem_statement, "patch": project.gold_patch,
              "test_patch": project.test_patch, "FAIL_TO_PASS": fail_to_pass, "PASS_TO_PASS": pass_to_pass}
    order = [key for key in ROW_ORDER if key in values] + [key for key in values if key not in ROW_ORDER]
    return {key: values[key] for key in order}


def as_instance(project: Project, row: Mapping[str, Any], suite_dir: Path) -> Instance:
    """The row as the harness loads it, or a ``BuildError`` naming the project file to fix."""
    try:
        return build_instance(suite_dir / SUITE_FILE, 0, dict(row), None)
    except InstanceFileError as error:
        top = (error.field or "").split(".")[0]
        where = project.folder / "instance.toml" if top in project.metadata else project.folder
        field = f"field {error.field!r}: " if error.field else ""
        raise BuildError(f"{where}: {field}{error.message}") from None


@dataclasses.dataclass(frozen=True)
class TestRun:
    """The status of every test in ``tests/``, and the runner's exit status."""

    #: As pytest's JUnit XML reports them, in order.
    results: list[TestResult]
    returncode: int

    @property
    def statuses(self) -> dict[str, str]:
        return reported_statuses(self.results)


def run_all_tests(workspace: Workspace, instance: Instance, patch: str, log: Path) -> TestRun:
    """Run ``tests/`` at base + ``patch`` + test_patch with the harness's default runner; read both its reports."""
    prepare_tree(workspace, instance, patch, "patch")
    junit = log.with_suffix(".xml")
    result = run_shell(runner_command(None, ["tests"], str(junit), workspace.path), workspace.path, log)
    if result.returncode not in (0, 1):
        raise BuildError(f"pytest could not run the tests (exit {result.returncode}):\n{tail(log)}")
    statuses = reported_statuses(parse_output(log.read_text(encoding="utf-8", errors="replace")))
    not_tests = sorted(test for test, status in statuses.items() if status == "error" or "::" not in test)
    if not_tests:
        raise BuildError(f"pytest reports errors, not test results: {not_tests}\n{tail(log)}")
    results = parse_junitxml(junit, sorted({test.split("::")[0] for test in statuses}))
    from_junit = None if results is None else reported_statuses(results)
    if results is None or from_junit != statuses:
        raise BuildError(f"the -rA summary and the JUnit XML disagree: {statuses} != {from_junit}")
    return TestRun(results, result.returncode)


def run_before_and_after(workspace: Workspace, instance: Instance, logs: Path) -> tuple[TestRun, TestRun]:
    """The tests at base + test_patch, and at base + the gold patch + test_patch."""
    return (run_all_tests(workspace, instance, "", logs / "tests-before.log"),
            run_all_tests(workspace, instance, instance.patch or "", logs / "tests-after.log"))


def fail_and_pass_lists(before: TestRun, after: TestRun) -> tuple[list[str], list[str]]:
    """FAIL_TO_PASS and PASS_TO_PASS: every test passes with the gold patch; those passing before are P2P."""
    failing = sorted(test for test, status in after.statuses.items() if not counts_as_pass(status))
    if failing or after.returncode != 0:
        raise BuildError(f"not every test passes with the gold patch (exit {after.returncode}): {failing}")
    vanished = sorted(set(before.statuses) - set(after.statuses))
    if vanished:
        raise BuildError(f"tests disappear with the gold patch: {vanished}")
    spaced = [test for test in after.statuses if any(char.isspace() for char in test)]
    if spaced:
        raise BuildError(f"test ids with whitespace (SWE-bench cuts ids there): {spaced}")
    fail_to_pass = sorted(test for test in after.statuses if not counts_as_pass(before.statuses.get(test)))
    pass_to_pass = sorted(test for test in after.statuses if counts_as_pass(before.statuses.get(test)))
    if not fail_to_pass:
        raise BuildError("no test fails before the gold patch: FAIL_TO_PASS would be empty")
    return fail_to_pass, pass_to_pass


def build_project(project: Project, store: RepoStore, work: Path, out: Path) -> dict[str, Any]:
    print(f"building {project.name} ...", flush=True)
    logs = work / f"{project.name}-logs"
    repo = work / project.name
    try:
        base = replay_history(project, repo, logs)
        bundle = out / REPOS_DIR / f"{project.name}.bundle"
        git(repo, "-c", "pack.threads=1", "bundle", "create", "-q", str(bundle), "--all")
        instance = as_instance(project, make_row(project, base, [], []), out)
        workspace = materialize(instance, store, work / f"{project.name}-workspace")
        row = make_row(project, base, *fail_and_pass_lists(*run_before_and_after(workspace, instance, logs)))
    except (WorkspaceError, VerifyInfrastructureError, BuildError) as error:
        raise BuildError(f"{project.folder}: {error}") from None
    as_instance(project, row, out)
    return row


def build(projects_dir: Path, target: Path, max_verify_seconds: float, jobs: int) -> None:
    folders = sorted(path for path in projects_dir.iterdir() if path.is_dir()) if projects_dir.is_dir() else []
    if not folders:
        raise BuildError(f"{projects_dir}: no project folders")
    projects = [load_project(folder) for folder in folders]
    with tempfile.TemporaryDirectory(prefix="arena-build-") as tmp:
        work, out = Path(tmp) / "work", Path(tmp) / "out"
        (out / REPOS_DIR).mkdir(parents=True)
        store = RepoStore(work / "cache")
        rows = sorted(in_parallel(lambda project: build_project(project, store, work, out), projects, jobs),
                      key=lambda row: str(row["instance_id"]))
        with open(out / SUITE_FILE, "w", encoding="utf-8", newline="\n") as handle:
            handle.writelines(json.dumps(row, ensure_ascii=True) + "\n" for row in rows)
        print("checking the built suite from fresh workspaces ...", flush=True)
        problems = check_suite(out, max_verify_seconds, jobs)
        if problems:
            raise BuildError("self-check failed:\n  - " + "\n  - ".join(problems))
        # Install: replace suite.jsonl and the bundles, drop the bundles of removed projects.
        (target / REPOS_DIR).mkdir(parents=True, exist_ok=True)
        names = {project.name for project in projects}
        for old in (target / REPOS_DIR).glob("*.bundle"):
            if old.stem not in names:
                old.unlink()
        for name in sorted(names):
            shutil.copyfile(out / REPOS_DIR / f"{name}.bundle", target / REPOS_DIR / f"{name}.bundle")
        shutil.copyfile(out / SUITE_FILE, target / SUITE_FILE)
    print(f"wrote {len(rows)} instances to {target / SUITE_FILE}")
    for row in rows:
        print(f"  {row['instance_id']:<28} {row['base_commit']}")


# ---------------------------------------------------------------------------------------------------------------
# self-check (also on its own with --check)


def check_suite(suite_dir: Path, max_verify_seconds: float, jobs: int) -> list[str]:
    """Load suite.jsonl as the harness does and check every row from a fresh workspace; return the problems."""
    path = suite_dir / SUITE_FILE
    try:
        rows = list(read_rows(path))
        instances = load_instances(path, rows, None)
    except InstanceFileError as error:
        return [str(error)]
    problems = []
    ids = [row["instance_id"] for _, row in rows]
    if ids != sorted(ids):
        problems.append(f"{path}: the rows are not sorted by instance_id")
    with tempfile.TemporaryDirectory(prefix="arena-check-") as tmp:
        store = RepoStore(Path(tmp) / "cache")

        def check(instance: Instance) -> list[str]:
            try:
                return check_row(instance, store, Path(tmp) / instance.instance_id, max_verify_seconds)
            except (WorkspaceError, VerifyInfrastructureError, BuildError) as error:
                return [str(error)]

        for instance, found in zip(instances, in_parallel(check, instances, jobs), strict=True):
            problems.extend(f"{instance.instance_id}: {problem}" for problem in found)
    return problems


def bundle_heads(bundle: Path) -> dict[str, str]:
    listed = git(bundle.parent, "bundle", "list-heads", str(bundle)).split()
    return dict(zip(listed[1::2], listed[0::2], strict=True))


def check_row(instance: Instance, store: RepoStore, work: Path, max_verify_seconds: float) -> list[str]:
    problems = []
    if instance.source.kind != "bundle":
        return [f"'source' is {instance.source.describe()}; the bundled suite's rows use a bundle under {REPOS_DIR}/"]
    if not re.fullmatch(r"[0-9a-f]{40}", instance.base_commit):
        problems.append(f"base_commit {instance.base_commit!r} is not a full sha")
    heads = bundle_heads(Path(instance.source.location))
    if set(heads) - {"HEAD"} != {"refs/heads/main"} or set(heads.values()) != {instance.base_commit}:
        problems.append(f"the bundle's refs are {heads}; expected only main (and HEAD), at base_commit")
    problems.extend(patch_problems(instance.patch or "", instance.test_patch or ""))
    if not instance.fail_to_pass:
        problems.append("FAIL_TO_PASS is empty")
    if problems:
        return problems

    workspace = materialize(instance, store, work / "workspace")
    # What the GOLD arm's cell grades: the gold patch applied, then taken back by the harness's extraction.
    apply_patch(workspace, instance.patch or "", "the gold patch")
    if extract_patch(workspace) != (instance.patch or "").encode():
        problems.append("the harness's patch extraction does not give back the gold patch unchanged")
    before_state, after_state = "base + test_patch", "base + patch + test_patch"
    before = verify(workspace, instance, "", work / "verify-before.log")
    if before.passed:
        problems.append(f"verify passes at {before_state} ({before.detail}); it must fail")
    after = verify(workspace, instance, instance.patch or "", work / "verify-after.log")
    if not after.passed:
        problems.append(f"verify fails at {after_state} ({after.detail})")
    slowest = max(before.seconds, after.seconds)
    if slowest > max_verify_seconds:
        problems.append(f"verify takes {slowest:.2f}s (at most {max_verify_seconds:g}s: --max-verify-seconds)")

    # The recorded tests, graded as the harness grades them, then derived again as the build derives them.
    tests_before, tests_after = run_before_and_after(workspace, instance, work)
    graded = verdict_on_run(tests_before.results, instance.fail_to_pass, instance.pass_to_pass,
                            tests_before.returncode, report="junitxml")
    passing = [test for test, status in graded.fail_to_pass.items() if counts_as_pass(status)]
    if passing:
        problems.append(f"FAIL_TO_PASS tests already pass at {before_state}: {passing}")
    failing = [test for test, status in graded.pass_to_pass.items() if not counts_as_pass(status)]
    if failing:
        problems.append(f"PASS_TO_PASS tests do not pass at {before_state}: {failing}")
    graded = verdict_on_run(tests_after.results, instance.fail_to_pass, instance.pass_to_pass,
                            tests_after.returncode, report="junitxml")
    if not graded.resolved:
        problems.append(f"the recorded tests do not all pass at {after_state}: {graded.failing(SWEBENCH)}")
    fail_to_pass, pass_to_pass = fail_and_pass_lists(tests_before, tests_after)
    for key, listed, found in (("FAIL_TO_PASS", instance.fail_to_pass, fail_to_pass),
                               ("PASS_TO_PASS", instance.pass_to_pass, pass_to_pass)):
        if list(listed) != found:
            problems.append(f"{key} is not what the tests give: missing {sorted(set(found) - set(listed))}, "
                            f"not expected {sorted(set(listed) - set(found))}, expected order {found}")
    print(f"  {'ok' if not problems else 'BAD'} {instance.instance_id:<28} F2P={len(fail_to_pass):<3} "
          f"P2P={len(pass_to_pass):<3} verify {before.seconds:.2f}s/{after.seconds:.2f}s", flush=True)
    return problems


def verify(workspace: Workspace, instance: Instance, patch: str, log: Path) -> VerifyResult:
    """The harness's verify step, as a cell runs it on the patch ``patch``."""
    return run_verify(workspace, instance, patch, verify_on="patch", env=tests_env(), log=log, timeout=RUN_TIMEOUT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the suite.jsonl and bundles in --out")
    parser.add_argument("--out", type=Path, default=HERE,
                        help="where suite.jsonl and repos/ are written or checked (default: %(default)s)")
    parser.add_argument("--projects", type=Path, default=HERE / "projects",
                        help="the project folders to build from (default: %(default)s)")
    parser.add_argument("--max-verify-seconds", type=float, default=DEFAULT_MAX_VERIFY_SECONDS,
                        help="fail a row whose verify takes longer (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="projects built and checked at once (default: the number of CPUs, %(default)s)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    try:
        if args.check:
            problems = check_suite(args.out.resolve(), args.max_verify_seconds, args.jobs)
            if problems:
                raise BuildError("check failed:\n  - " + "\n  - ".join(problems))
            print("suite OK")
        else:
            build(args.projects.resolve(), args.out.resolve(), args.max_verify_seconds, args.jobs)
    except BuildError as error:
        print(f"build_suite: ERROR: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
