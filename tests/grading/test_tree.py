"""Grading on a fresh tree: the patch bytes on a new checkout, run-config from base, tests in the sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.gitrepos import CALC_FIX, Project, diff_of

from pytest_swe_arena.cell import processes as proc
from pytest_swe_arena.cell.environment import CellEnvironment, create_cell_environment
from pytest_swe_arena.cell.patches import HarnessGit, extract, files_touched
from pytest_swe_arena.cell.sandbox import Sandbox, cell_policy, probe_bwrap, program_mounts_outside
from pytest_swe_arena.cell.templates import instance_template
from pytest_swe_arena.cell.venvs import EnvironmentStore, EnvSpec
from pytest_swe_arena.cell.workspace import RepoStore, Workspace, materialize
from pytest_swe_arena.grading.integrity import internals_flags
from pytest_swe_arena.grading.rules import STRICT, SWEBENCH
from pytest_swe_arena.grading.tree import (
    GradingTree,
    PatchRejected,
    TestPatchRejected,
    build_grading_tree,
    grade_tree,
    grading_environment,
    integrity_details,
    may_configure_run,
    run_config_reason,
)
from pytest_swe_arena.grading.verify import run_verify
from pytest_swe_arena.instances.loading import build_instance
from pytest_swe_arena.instances.model import Instance

HOSTILE = Path(__file__).parents[1] / "data" / "hostile"
TESTS = ["tests/test_ops.py::test_mul", "tests/test_ops.py::test_add"]
HERE = f"{sys.version_info.major}.{sys.version_info.minor}"

needs_bwrap = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")


@dataclass
class Grading:
    """A cell that ran, and what the harness needs to grade its patch on a fresh tree beside it."""

    root: Path
    calc: Project
    instance: Instance
    cell: CellEnvironment
    workspace: Workspace
    objects: Path
    store: RepoStore

    def tree(self, patch: bytes, name: str = "grading", **options: Any) -> GradingTree:
        return build_grading_tree(self.root / name / "tree", objects=self.objects, base_commit=self.calc.base,
                                  patch=patch, instance=self.instance, **options)

    def grading_cell(self, name: str = "grading") -> CellEnvironment:
        return create_cell_environment(self.root / name / "cell")

    def sandbox(self, cell: CellEnvironment, tree: GradingTree, *read_only: Path) -> Sandbox:
        return Sandbox(cell_policy(cell, read_write=(tree.path,), read_only=(self.objects, *read_only)))

    def agent(self, script: str, *args: str, sandbox: bool = True) -> None:
        """Run a hostile agent script in the workspace, as an arm would (sandboxed unless told)."""
        argv = [sys.executable, str(HOSTILE / script), *args]
        if sandbox:
            argv = Sandbox(cell_policy(self.cell, read_only=(self.objects,),
                                       programs=[sys.executable, HOSTILE / script])).wrap(argv, self.workspace.path)
        result = proc.run(argv, cwd=self.workspace.path, env=self.cell.env(), stdout=self.cell.run_dir / "agent.log",
                          timeout=120)
        assert result.returncode == 0, (self.cell.run_dir / "agent.log").read_text()

    def extract(self) -> bytes:
        return extract(self.workspace.path, self.workspace.base_commit, self.objects,
                       self.root / "harness" / "extract.git").patch


def graded_row(calc: Project, **extra: Any) -> dict[str, Any]:
    row = calc.row(FAIL_TO_PASS=TESTS[:1], PASS_TO_PASS=TESTS[1:], **extra)
    del row["verify"]
    return row


@pytest.fixture
def grading(calc: Project, tmp_path: Path) -> Grading:
    instance = build_instance(tmp_path / "i.jsonl", 1, graded_row(calc), None)
    store = RepoStore(tmp_path / "cache")
    cell = create_cell_environment(tmp_path / "cell")
    workspace = materialize(instance, store, cell.root / "workspace")
    objects = store.snapshot(*store.ensure_commit(instance.source, instance.repo, instance.base_commit))
    return Grading(tmp_path, calc, instance, cell, workspace, objects, store)


@needs_bwrap
def test_the_gold_patch_resolves_on_a_fresh_tree_and_an_empty_patch_does_not(grading):
    for name, patch, passed in (("gold", grading.calc.patch.encode(), True), ("empty", b"", False)):
        tree = grading.tree(patch, name)
        cell = grading.grading_cell(name)
        verdict = grade_tree(tree, grading.instance, cell=cell, timeout=120, sandbox=grading.sandbox(cell, tree))
        assert verdict.passed is passed, (cell.run_dir / "verify.log").read_text()
        assert tree.integrity == ()
        assert verdict.tests is not None and verdict.tests["FAIL_TO_PASS"]["tests/test_ops.py::test_mul"] == (
            "passed" if passed else "failed")


@needs_bwrap
def test_what_the_environment_setup_generates_is_base_for_the_patch_on_both_sides(grading, calc):
    """A setup step writes a file before the arm; the agent edits it; the grading tree replays the setup."""
    def setup(tree: Path) -> None:
        (tree / "calc" / "_version.py").write_text("version = '1.0'\n")

    setup(grading.workspace.path)
    harness = HarnessGit.create(grading.root / "harness" / "extract.git", grading.workspace.path, grading.objects)
    setup_base = harness.commit_work_tree(calc.base, "arena: environment setup")
    assert setup_base != calc.base
    assert harness.commit_work_tree(setup_base, "again") == setup_base  # nothing changed since
    harness.seed_index(setup_base)
    (grading.workspace.path / "calc" / "_version.py").write_text("version = '1.1'\n")
    (grading.workspace.path / "calc" / "ops.py").write_text(CALC_FIX["calc/ops.py"] or "")
    patch = extract(grading.workspace.path, setup_base, grading.objects, harness.git_dir).patch
    assert sorted(files_touched(patch)) == ["calc/_version.py", "calc/ops.py"]

    tree = grading.tree(patch, setup=setup)
    cell = grading.grading_cell()
    verdict = grade_tree(tree, grading.instance, cell=cell, timeout=120, sandbox=grading.sandbox(cell, tree))
    assert verdict.passed, (cell.run_dir / "verify.log").read_text()
    assert (tree.path / "calc" / "_version.py").read_text() == "version = '1.1'\n"
    assert tree.base_commit != calc.base


def test_the_grading_tree_has_the_tags_of_base_and_its_ancestors_as_the_workspace_has(calc, tmp_path):
    # setuptools_scm and versioneer read the version from the tags: without them pytest's own tree says it is
    # 0.1.dev and its `minversion` refuses to run (pytest-dev__pytest-11143).
    from helpers.gitrepos import commit, git

    first = git(calc.repo, "rev-list", "--max-parents=0", "HEAD").strip()
    git(calc.repo, "tag", "-a", "v0.1", "-m", "first release", first)
    git(calc.repo, "tag", "v0.2", calc.base)
    git(calc.repo, "tag", "v1.0", commit(calc.repo, {"calc/ops.py": "def mul(a, b):\n    return a * b\n"}, "fix"))
    instance = build_instance(tmp_path / "i.jsonl", 1, graded_row(calc), None)
    store = RepoStore(tmp_path / "cache")
    objects = store.snapshot(*store.ensure_commit(instance.source, instance.repo, instance.base_commit))
    tree = build_grading_tree(tmp_path / "tree", objects=objects, base_commit=calc.base, patch=calc.patch.encode(),
                              instance=instance)
    assert git(tree.path, "tag", "--list").split() == ["v0.1", "v0.2"]
    assert git(tree.path, "describe", "--tags").strip().startswith("v0.2")  # "-dirty" aside: the patch is applied
    assert git(tree.path, "cat-file", "-t", "v0.1").strip() == "tag"


def test_a_patch_that_does_not_apply_is_the_arms_and_a_broken_test_patch_the_harness(grading, calc, tmp_path):
    stale = calc.patch.replace("return a + b\n+    return a * b", "return a - b\n+    return a * b")
    with pytest.raises(PatchRejected, match="the patch does not apply to a fresh checkout of base"):
        grading.tree(stale.encode(), "stale")
    broken = build_instance(tmp_path / "j.jsonl", 1, graded_row(calc, test_patch=calc.patch.replace("a + b", "a % b")),
                            None)
    with pytest.raises(TestPatchRejected, match="test_patch of demo__calc-1 does not apply on base"):
        build_grading_tree(tmp_path / "broken" / "tree", objects=grading.objects, base_commit=calc.base,
                           patch=b"", instance=broken)


FORCE_PASS_CONFTEST = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


@needs_bwrap
def test_files_that_configure_the_run_come_from_base_and_are_flagged(grading, calc):
    """A prediction (no extraction's excludes) that makes every test pass through pytest, not the code."""
    patch = diff_of(calc.repo, {
        "README.md": "# calc\n\nThe bug is still there.\n",
        "conftest.py": FORCE_PASS_CONFTEST,
        "calc/conftest.py": FORCE_PASS_CONFTEST,
        "tox.ini": "[pytest]\naddopts = -p calc.plugin\n",
        "calc/plugin.py": FORCE_PASS_CONFTEST,
        "pytest/__init__.py": "import sys\nsys.exit(0)\n",
        "sitecustomize.py": "import calc.plugin\n",
        "calc/evil.pth": "import calc.plugin\n",
    }).encode()
    tree = grading.tree(patch)
    cell = grading.grading_cell()

    verdict = grade_tree(tree, grading.instance, cell=cell, timeout=120, sandbox=grading.sandbox(cell, tree))

    assert not verdict.passed
    assert verdict.tests is not None and verdict.tests["FAIL_TO_PASS"] == {"tests/test_ops.py::test_mul": "failed"}
    flagged = {flag.path: flag.kind for flag in tree.integrity}
    assert flagged == {"conftest.py": "run_config", "calc/conftest.py": "run_config", "tox.ini": "run_config",
                       "pytest/__init__.py": "run_config", "sitecustomize.py": "run_config",
                       "calc/evil.pth": "run_config", "calc/plugin.py": "pytest_internals"}
    for path in ("conftest.py", "calc/conftest.py", "tox.ini", "pytest", "sitecustomize.py", "calc/evil.pth"):
        assert not (tree.path / path).exists(), path
    assert (tree.path / "README.md").read_text() == "# calc\n\nThe bug is still there.\n"
    nested = {"kind": "nested_repository", "path": "vendor/pytest",
              "detail": "a directory with its own .git: taken in as files"}
    assert integrity_details(("vendor/pytest",), tree.integrity)[0] == nested


@needs_bwrap
def test_a_nested_pytest_repository_neither_shadows_the_runner_nor_is_dropped_silently(grading):
    subprocess.run([sys.executable, str(HOSTILE / "git_tricks.py"), "nested-pytest", str(grading.root)],
                   cwd=grading.workspace.path, check=True)
    extraction = extract(grading.workspace.path, grading.calc.base, grading.objects, grading.root / "x.git")
    tree = grading.tree(extraction.patch)
    cell = grading.grading_cell()
    verdict = grade_tree(tree, grading.instance, cell=cell, timeout=120, sandbox=grading.sandbox(cell, tree))
    # The agent fixed mul too: the patch resolves on its merits, with the shadowing package left out and said so.
    assert verdict.passed, (cell.run_dir / "verify.log").read_text()
    assert extraction.nested_repositories == ("pytest",)
    assert [(flag.kind, flag.path) for flag in tree.integrity] == [("run_config", "pytest/__init__.py")]
    assert not (tree.path / "pytest").exists()


@needs_bwrap
def test_a_pth_in_the_cells_venv_does_not_reach_the_grading_venv(grading, calc, tmp_path):
    instance = build_instance(tmp_path / "k.jsonl", 1,
                              calc.row(verify="python -c 'from calc import mul; assert mul(3, 4) == 12'"), None)
    store = EnvironmentStore(tmp_path / "envs")
    spec = EnvSpec(python=HERE)
    template = instance_template(store, spec, repo="acme/calc", base_commit=calc.base, objects=grading.objects,
                                 cell_env=grading.cell.env(), log=grading.cell.run_dir / "env.log", timeout=300)
    cell_venv = template.copy_to(grading.cell.root / "venv", grading.workspace.path, grading.cell.run_dir / "env.log")
    agent_env = grading.cell.env(cell_venv.variables(grading.cell.variables["PATH"]))
    grading.agent("pth_agent.py", str(cell_venv.venv))
    patch = grading.extract()
    assert [line for line in patch.decode().splitlines() if line.startswith("+++")] == ["+++ b/README.md"]
    # Today's in-place verify, with the cell's venv: resolved by the .pth alone.
    today = run_verify(grading.workspace, instance, patch, verify_on="patch", env=agent_env,
                       log=grading.cell.run_dir / "verify.log", timeout=120)
    assert today.passed

    tree = build_grading_tree(tmp_path / "g" / "tree", objects=grading.objects, base_commit=calc.base, patch=patch,
                              instance=instance)
    cell = create_cell_environment(tmp_path / "g" / "cell")
    venv = grading_environment(template, tree.path, cell, cell.run_dir / "env.log")
    sandbox = grading.sandbox(cell, tree, venv.venv)
    verdict = grade_tree(tree, instance, cell=cell, timeout=120, sandbox=sandbox,
                    extra_env=venv.variables(cell.variables["PATH"]))
    assert not verdict.passed
    assert "AssertionError" in (cell.run_dir / "verify.log").read_text()


GRADED_WRITER = """
import os, pathlib, sys
site = next(pathlib.Path(sys.prefix).glob("lib/python*/site-packages"))
import iniconfig
package = pathlib.Path(iniconfig.__file__).parent
assert package.parent == site, package
def attempt(name, action):
    try:
        action()
        print(name, "DONE")
    except OSError as error:
        print(name, "REFUSED", error.strerror)
attempt("in_place", lambda: open(package / "__init__.py", "a").write("tampered = True"))
attempt("remove", lambda: (package / "__init__.py").unlink())
attempt("new_file", lambda: (package / "planted.py").write_text("tampered = True"))
attempt("bytecode", lambda: next(package.glob("__pycache__/*.pyc")).write_bytes(b"tampered"))
attempt("add_package", lambda: (site / "added_by_tests").mkdir())
"""


@needs_bwrap
def test_graded_code_cannot_write_the_templates_packages_bound_into_its_venv(grading, calc, tmp_path):
    """A grading tree's venv binds the template's installed packages read-only over empty stand-ins: the code under
    test imports them, and every write into them is refused (the template is every later cell's); outside the
    sandbox the stand-ins are empty, nothing of the template is linked."""
    store = EnvironmentStore(tmp_path / "envs")
    template = instance_template(store, EnvSpec(python=HERE, requirements=("iniconfig",)), repo="acme/calc",
                                 base_commit=calc.base, objects=grading.objects, cell_env=grading.cell.env(),
                                 log=grading.cell.run_dir / "env.log", timeout=300)
    [site] = template.venv.glob("lib/python*/site-packages")
    pristine = {path: path.read_bytes() for path in (site / "iniconfig").rglob("*") if path.is_file()}
    tree = grading.tree(b"")
    cell = grading.grading_cell()
    venv = grading_environment(template, tree.path, cell, cell.run_dir / "env.log", bound=True)
    assert venv.bound and not venv.read_only
    [stand_in] = [place for source, place in venv.bound if source.name == "iniconfig"]
    assert stand_in.is_dir() and not any(stand_in.iterdir())
    sandbox = grading.sandbox(cell, tree, *program_mounts_outside(venv.venv / "bin" / "python", (cell.root,)))
    argv = sandbox.binding(*venv.bound).wrap([str(venv.venv / "bin" / "python"), "-c", GRADED_WRITER], tree.path)
    log = cell.run_dir / "writer.log"
    result = proc.run(argv, cwd=tree.path, env=cell.env(venv.variables(cell.variables["PATH"])), stdout=log,
                      timeout=120)
    said = dict(line.split(" ", 1) for line in log.read_text().splitlines())
    assert result.returncode == 0, said
    for attack in ("in_place", "remove", "new_file", "bytecode"):
        assert said[attack].startswith("REFUSED"), (attack, said)
    assert said["add_package"] == "DONE"  # site-packages itself is the grading cell's
    assert {path: path.read_bytes() for path in (site / "iniconfig").rglob("*") if path.is_file()} == pristine
    assert not (site / "added_by_tests").exists()


@needs_bwrap
def test_a_daemon_the_arm_left_cannot_rewrite_the_grading_report(grading):
    marker = f"arena-forger-{uuid.uuid4().hex}"
    grading.agent("junit_forger.py", marker, *TESTS)
    # The arm's sandbox is gone, and its daemon with it (a new session and no environment did not help).
    assert processes_with(marker) == []
    tree = grading.tree(grading.extract())
    cell = grading.grading_cell()
    verdict = grade_tree(tree, grading.instance, cell=cell, timeout=120, sandbox=grading.sandbox(cell, tree))
    assert not verdict.passed
    report = (cell.run_dir / "verify-junit.xml").read_text()
    assert "forged" not in report and 'failures="1"' in report


@needs_bwrap
def test_every_process_the_code_under_test_starts_is_gone_when_the_report_is_read(grading, calc):
    marker = f"arena-grading-daemon-{uuid.uuid4().hex}"
    daemon = (f"import subprocess, sys\nsubprocess.Popen(['setsid', 'env', '-i', sys.executable, '-c', "
              f"'import time; time.sleep(600)', {marker!r}])\n")
    patch = diff_of(calc.repo, {**CALC_FIX, "calc/__init__.py": daemon + "from .ops import add, mul\n"}).encode()
    tree = grading.tree(patch)
    cell = grading.grading_cell()
    verdict = grade_tree(tree, grading.instance, cell=cell, timeout=120, sandbox=grading.sandbox(cell, tree))
    assert verdict.passed, (cell.run_dir / "verify.log").read_text()
    assert processes_with(marker) == []


def test_the_fix_smuggled_in_as_a_replaced_base_is_not_in_the_grading_tree(grading, calc):
    """`git replace` of base by a fixed commit: the files keep the bug; a checkout of "base" gets the fix."""
    git = ["git", "-c", "user.name=a", "-c", "user.email=a@x"]
    ws = grading.workspace.path
    (ws / "calc" / "ops.py").write_text(CALC_FIX["calc/ops.py"] or "")
    subprocess.run([*git, "commit", "-qam", "fix"], cwd=ws, check=True)
    fixed = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ws, check=True, capture_output=True, text=True).stdout
    subprocess.run([*git, "reset", "-q", "--hard", calc.base], cwd=ws, check=True)
    subprocess.run([*git, "replace", calc.base, fixed.strip()], cwd=ws, check=True)
    (ws / "README.md").write_text("# calc\n\nReplaced.\n")
    patch = grading.extract()
    assert [line for line in patch.decode().splitlines() if line.startswith("+++")] == ["+++ b/README.md"]
    # Today's in-place verify resets the workspace to "base" with the agent's git: the fix is back.
    today = run_verify(grading.workspace, grading.instance, patch, verify_on="patch", env=grading.cell.env(),
                       log=grading.cell.run_dir / "verify.log", timeout=120)
    assert today.passed

    tree = grading.tree(patch)
    cell = grading.grading_cell()
    verdict = grade_tree(tree, grading.instance, cell=cell, timeout=120, sandbox=None)
    assert not verdict.passed
    assert (tree.path / "calc" / "ops.py").read_text().endswith("return a + b\n")


def test_run_config_rules():
    assert run_config_reason("a/b/conftest.py", None, "x", False) == "conftest.py configures the test run"
    assert run_config_reason("pkg/x.pth", None, "import os", False) == "a .pth file runs code at interpreter start-up"
    assert run_config_reason("setup.cfg", "[metadata]\nname = x\n", "[metadata]\nname = y\n", True) is None
    assert run_config_reason("setup.cfg", "[tool:pytest]\naddopts = -q\n", "[metadata]\n", True) == (
        "setup.cfg holds pytest's configuration")
    assert run_config_reason("pyproject.toml", "[project]\n", "[tool.pytest.ini_options]\n", True) is not None
    assert run_config_reason("_pytest/main.py", None, "x", False) is not None
    assert run_config_reason("_pytest/main.py", "x", "y", True) is None  # pytest's own repository
    assert run_config_reason("pytest.py", None, "x", False) is not None
    assert run_config_reason("pytestutils/x.py", None, "x", False) is None


@pytest.mark.parametrize("path", ["a/b/conftest.py", "pkg/x.pth", "setup.cfg", "pyproject.toml", "tox.ini",
                                  "_pytest/main.py", "pytest.py", "pytestutils/x.py", "calc/ops.py", "email/x.py",
                                  "json.py", "json/__init__.py", "src/pkg-1.0.dist-info/entry_points.txt",
                                  "x.egg-info/entry_points.txt", "docs/conf.py", "pytest.ini", "sitecustomize.py"])
def test_a_path_read_at_base_only_when_it_may_configure_the_run(path):
    """The fresh tree reads a touched file at base (two git calls) only when ``run_config_reason`` could give a
    reason for its path, whatever its texts: skipping the rest changes no flag."""
    texts = [None, "x", "[tool:pytest]\naddopts = -q\n", "[pytest]\n", "[tool.pytest.ini_options]\n"]
    reasons = {run_config_reason(path, base, tree, top) for base in texts for tree in texts for top in (True, False)}
    assert may_configure_run(path) or reasons == {None}


def test_internals_flags_name_the_file_and_spare_tests_and_pytest_itself(calc):
    patch = diff_of(calc.repo, {
        "calc/hooks.py": "def pytest_collection_modifyitems(items):\n    items.clear()\n",
        "calc/util.py": "from _pytest.reports import TestReport\n",
        "tests/test_x.py": "import pytest\n",
        "src/_pytest/fixtures.py": "from _pytest.compat import x\n",
        "calc/plain.py": "import os\n",
    }).encode()
    flags = {flag.path: flag.detail for flag in internals_flags(patch)}
    assert flags == {"calc/hooks.py": "non-test code reaches into pytest: def pytest_collection_modifyitems(",
                     "calc/util.py": "non-test code reaches into pytest: from _pytest"}


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


#: A test that fails the first time it runs in a session and passes the second.
TWICE = "_runs = []\n\n\ndef test_flaky():\n    _runs.append(1)\n    assert len(_runs) > 1\n"


@needs_bwrap
def test_the_grading_rules_decide_a_node_id_pytest_reported_twice_on_the_junit_path(grading, calc, tmp_path):
    """pytest runs tests/test_twice.py::test_flaky twice (the file given twice, ``--keep-duplicates``): it fails,
    then passes. SWE-bench's rules (the default) let the last result stand, as its harness does; the strict
    rules, the worst. ``--arena-grading-rules`` reaches the harness's JUnit runner and its witness."""
    flaky = "tests/test_twice.py::test_flaky"
    row = {**graded_row(calc), "FAIL_TO_PASS": [flaky],
                     "test_patch": calc.test_patch + diff_of(calc.repo, {"tests/test_twice.py": TWICE}),
                     "test_cmd": "python -m pytest -p no:cacheprovider --keep-duplicates -o junit_family=xunit1 "
                                 "--junitxml={junitxml} {tests} tests/test_twice.py"}
    instance = build_instance(tmp_path / "twice.jsonl", 1, row, None)
    verdicts = {}
    for rules in (SWEBENCH, STRICT):
        tree = build_grading_tree(tmp_path / rules.name / "tree", objects=grading.objects,
                                  base_commit=calc.base, patch=calc.patch.encode(), instance=instance)
        cell = grading.grading_cell(rules.name)
        verdicts[rules.name] = grade_tree(tree, instance, cell=cell, timeout=120,
                                          sandbox=grading.sandbox(cell, tree), rules=rules)
        junit = (cell.run_dir / "verify-junit.xml").read_text()
        assert junit.count('name="test_flaky"') == 2 and junit.count("<failure") == 1, junit
    default, strict = verdicts["swebench"], verdicts["strict"]
    assert default.returncode == strict.returncode == 1  # one of the two runs failed
    assert default.tests is not None and default.tests["FAIL_TO_PASS"] == {flaky: "passed"}
    assert default.passed and default.integrity == (), default.detail  # the witness reads the runs the same way
    assert strict.tests is not None and strict.tests["FAIL_TO_PASS"] == {flaky: "failed"}
    assert strict.tests["rules"] == "strict"
    assert not strict.passed and f"{flaky} (failed)" in strict.detail
