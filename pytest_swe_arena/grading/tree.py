"""A fresh grading tree: the patch graded on a checkout the agent never touched.

The tree is a new directory, checked out from the base snapshot through a
``HarnessGit`` (its ``.git`` is the harness's: no agent config, hooks or
replace refs), the environment's setup run on it (``setup``, before the patch,
as it ran before the arm), then the patch bytes applied, then ``test_patch``.
Files that configure the test run are taken from base, whatever the patch
did to them (``run_config_reason``): pytest's config files, ``conftest.py``,
``sitecustomize.py``, ``usercustomize.py``, ``*.pth``, and a new top-level
module that would shadow the runner (``pytest/``, ``_pytest/``, ``pluggy``...,
as the nested ``pytest/`` repository of issue 13 did). Each one the patch
touched is an ``IntegrityFlag`` for the row (``details.integrity``), and so is
added non-test code that reaches into pytest's internals (``pytest_internals``).

Who is at fault: a patch that does not apply to the fresh tree is the arm's
(``PatchRejected``: the cell is an ``arm_error``, counted); a ``test_patch``
that does not apply on base is the instance's, a harness error
(``TestPatchRejected``).

The tests then run in a sandbox (the code under test is agent-written), sealed from the
network unless the row's environment needs it (``cell.network.grading_network``), with a
fresh HOME and a fresh copy of the instance's environment template
(``grading_environment``), and their report is read once the sandbox's pid
namespace, and every process in it, is gone (``grade``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import crossing
from ..cell import processes
from ..cell.environment import CellEnvironment, create_cell_environment
from ..cell.git import ExtractionError, HarnessGit
from ..cell.limits import CellLimits, LimitGroup
from ..cell.network import GradingNetwork
from ..cell.patches import files_touched
from ..cell.sandbox import Sandbox, cell_policy, program_mounts_outside
from ..cell.templates import EnvironmentTemplate
from ..cell.venvs import EnvBuildError, PythonEnvironment, shell_argv
from ..cell.workspace import WORK_BRANCH, Workspace, copy_snapshot_refs
from ..instances.model import Instance
from .integrity import STDLIB_MODULES, IntegrityFlag, patch_flags
from .rules import SWEBENCH, GradingRules
from .runners import _PYTEST_CONFIGS as PYTEST_CONFIGS  # where pytest reads its configuration: one home
from .runners import configures_pytest
from .verify import VerifyResult, run_checks

#: Files that configure a test run wherever they are.
RUN_CONFIG_NAMES = frozenset({"pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "conftest.py",
                              "sitecustomize.py", "usercustomize.py"})
#: Modules the runner imports at start-up: a new top-level one in the tree would be imported instead.
RUNNER_MODULES = frozenset({"pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "exceptiongroup",
                            "tomli", "colorama", "pygments", "xdist"})
class PatchRejected(Exception):
    """The arm's patch does not apply to a fresh checkout of base: the arm's failure."""


class LimitPassed(PatchRejected):
    """The graded run of the arm's patch passed one of the cell's limits (``cell.limits``): the arm's failure."""


class TestPatchRejected(Exception):
    """The instance's ``test_patch`` does not apply on base: a harness error (the instance is broken)."""

    __test__ = False  # not a pytest test class, whatever its name says


@dataclass(frozen=True)
class GradingTree:
    """A laid-out grading tree; ``base_commit`` is base plus the environment's setup, if it changed anything."""

    path: Path
    base_commit: str
    integrity: tuple[IntegrityFlag, ...] = ()

    @property
    def workspace(self) -> Workspace:
        return Workspace(self.path, self.base_commit)


def build_grading_tree(dest: Path, *, objects: Path, base_commit: str, patch: bytes, instance: Instance,
                       setup: Callable[[Path], None] | None = None) -> GradingTree:
    """Check out base into the new directory ``dest``, set it up, apply ``patch`` and the instance's test_patch.

    :param objects: the base snapshot's object store (the tree's .git borrows it).
    :param setup: runs the environment's steps on the base tree before the patch (as before the arm);
        what they change is committed, and the patch applies on top.
    """
    if dest.exists():
        raise ExtractionError(f"grading tree {dest} exists already")
    harness = HarnessGit.create(dest / ".git", dest, objects)
    # The workspace's tags (versioneer and setuptools_scm read the version from them), and its shallow file.
    copy_snapshot_refs(objects.parent, dest / ".git")
    harness.checkout_base(base_commit)
    harness.point_branch(WORK_BRANCH, base_commit)
    if setup is not None:
        setup(dest)
        base_commit = harness.commit_work_tree(base_commit, "arena: environment setup")
        harness.point_branch(WORK_BRANCH, base_commit)
    applied = harness.run("apply", "--binary", "--whitespace=nowarn", "-", input=patch) if patch.strip() else None
    if applied is not None and applied.returncode != 0:
        said = (applied.stdout + applied.stderr).decode(errors="replace").strip()
        raise PatchRejected(f"the patch does not apply to a fresh checkout of base: {said[:500]}")
    touched = files_touched(patch)
    flags = [*_restore_run_config(harness, base_commit, touched), *patch_flags(patch)]
    if instance.test_patch:
        # On a fresh tree only the files the patch also touched can differ from base.
        both = [path for path in files_touched(instance.test_patch) if path in set(touched)]
        _restore(harness, base_commit, both)
        applied = harness.run("apply", "--binary", "--whitespace=nowarn", "-", input=instance.test_patch.encode())
        if applied.returncode != 0:
            said = (applied.stdout + applied.stderr).decode(errors="replace").strip()
            raise TestPatchRejected(f"test_patch of {instance.instance_id} does not apply on base: {said[:500]}")
    return GradingTree(dest, base_commit, tuple(flags))


def run_config_reason(path: str, base_text: str | None, tree_text: str | None, base_has_top: bool) -> str | None:
    """Why ``path`` configures the test run (None if it does not), given its text at base and in the tree.

    :param base_has_top: whether base has the path's top-level entry (a runner module base ships is its code).
    """
    name = path.rsplit("/", 1)[-1]
    if name in RUN_CONFIG_NAMES:
        return f"{name} configures the test run"
    if name.endswith(".pth"):
        return "a .pth file runs code at interpreter start-up"
    if any(part.endswith((".dist-info", ".egg-info")) for part in path.split("/")[:-1]):
        return "installed-distribution metadata declares entry points (pytest plugins) that would load at start-up"
    if name in PYTEST_CONFIGS and any(text is not None and configures_pytest(name, text)
                                      for text in (base_text, tree_text)):
        return f"{name} holds pytest's configuration"
    top = path.split("/", 1)[0]
    module = top.removesuffix(".py") if "/" not in path else top
    if module in RUNNER_MODULES and not base_has_top:
        return f"a new top-level {top} would be imported instead of the test runner's own"
    shadows = path == f"{module}.py" or path == f"{module}/__init__.py"
    if module in STDLIB_MODULES and not base_has_top and shadows:
        return f"a new top-level {top} would be imported instead of the standard library's {module}"
    return None


def _restore_run_config(harness: HarnessGit, base_commit: str, touched: list[str]) -> list[IntegrityFlag]:
    flags = []
    for path in touched:
        if not may_configure_run(path):
            continue  # no need to read it at base (two git calls per file)
        reason = run_config_reason(path, _text_at(harness, base_commit, path), _text_in(harness.work_tree / path),
                                   _exists_at(harness, base_commit, path.split("/", 1)[0]))
        if reason is None:
            continue
        at_base = _exists_at(harness, base_commit, path)
        _restore(harness, base_commit, [path])
        done = "taken from base" if at_base else "left out (base has no such file)"
        flags.append(IntegrityFlag("run_config", path, f"{reason}: the patch changed it; {done}"))
    return flags


def may_configure_run(path: str) -> bool:
    """Whether ``run_config_reason`` could find a reason for ``path``, whatever its text and base: its name, a
    metadata folder, or a top-level name of the runner's or the standard library's."""
    name, top = path.rsplit("/", 1)[-1], path.split("/", 1)[0]
    module = top.removesuffix(".py") if "/" not in path else top
    return (name in RUN_CONFIG_NAMES or name.endswith(".pth") or name in PYTEST_CONFIGS
            or any(part.endswith((".dist-info", ".egg-info")) for part in path.split("/")[:-1])
            or module in RUNNER_MODULES or module in STDLIB_MODULES)


def _text_at(harness: HarnessGit, commit: str, path: str) -> str | None:
    completed = harness.run("cat-file", "blob", f"{commit}:{path}")
    return completed.stdout.decode(errors="replace") if completed.returncode == 0 else None


def _text_in(path: Path) -> str | None:
    try:
        # The patch's file: a link or a FIFO there is not followed nor waited on.
        return crossing.read_text(path, 16 << 20)
    except OSError:
        return None


def _exists_at(harness: HarnessGit, commit: str, path: str) -> bool:
    return harness.run("cat-file", "-e", f"{commit}:{path}").returncode == 0


def _restore(harness: HarnessGit, commit: str, paths: list[str]) -> None:
    """Put ``paths`` back as they are at ``commit``; a file base does not have is removed, and so are the
    folders that held only it."""
    for path in paths:
        if _exists_at(harness, commit, path):
            harness.output("checkout", commit, "--", path)
            continue
        target = harness.work_tree / path
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
        for parent in target.parents:
            if parent == harness.work_tree or not parent.is_dir() or any(parent.iterdir()):
                break
            parent.rmdir()


# -- the grading run ----------------------------------------------------------------------


def grading_environment(template: EnvironmentTemplate, tree: Path, cell: CellEnvironment, log: Path, *,
                        bound: bool = False) -> PythonEnvironment:
    """A venv the agent never touched, for the tree: the instance's template copied into the grading cell,
    its editable install pointed at the tree, the files its steps made laid into the tree (before the patch).

    ``bound``: the template's installed packages are not copied nor linked (``EnvironmentTemplate.copy_to``),
    for a grading run in a sandbox that binds them, read-only, over their stand-ins (the environment's
    ``bound``): nothing to copy, whatever the venv's size.
    """
    return template.copy_to(cell.root / "venv", tree, log, bound=bound)


#: Files whose change can change what an install builds: the install step runs again on a patched tree
#: that touches one (SWE-bench runs it before every evaluation; the template's copy stands in for it otherwise).
BUILD_FILES = frozenset({"setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in", "meson.build", "CMakeLists.txt",
                         "build.py", "Makefile"})
BUILD_SUFFIXES = (".pyx", ".pxd", ".pxi", ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".f", ".f90", ".rs")


def install_again(patch: bytes) -> bool:
    """Whether the patch touches what the install builds from (``BUILD_FILES``, sources of extensions)."""
    return any(path.rsplit("/", 1)[-1] in BUILD_FILES or path.endswith(BUILD_SUFFIXES)
               for path in files_touched(patch))


def run_step(environment: PythonEnvironment, command: str, tree: Path, cell: CellEnvironment, log: Path,
             timeout: float, what: str, sandbox: Sandbox | None) -> None:
    """One shell step of the environment in the tree, with the venv first on PATH, in ``sandbox`` if given.

    Its ``uv pip`` resolves as of the environment's date, as the cell's steps did (``uv_environment``: the
    config file, shown read-only in the sandbox, and the variables; not the shared cache, which the
    sandbox does not show).
    """
    dated = {name: value for name, value in environment.uv_variables.items()
             if name in ("UV_CONFIG_FILE", "UV_EXCLUDE_NEWER", "UV_COMPILE_BYTECODE")}
    env = cell.env({**environment.variables(cell.variables.get("PATH", "")), **dated})
    if sandbox is not None and "UV_CONFIG_FILE" in dated:
        sandbox = sandbox.showing(Path(dated["UV_CONFIG_FILE"]))
    argv = shell_argv(command)
    with crossing.writing(log.parent, log.name, "append") as out:
        out.write(f"$ ({what}) {command}\n".encode())
    argv = sandbox.wrap(argv, tree) if sandbox else argv
    result = processes.run(argv, cwd=tree, env=env, stdout=log, timeout=timeout)
    if result.returncode != 0:
        why = "timed out" if result.timed_out else f"exited {result.returncode}"
        raise EnvBuildError(f"grading environment: {what} step `{command}` {why} (see {log.name})")


def grade_tree(tree: GradingTree, instance: Instance, *, cell: CellEnvironment, timeout: float,
          sandbox: Sandbox | None, extra_env: Mapping[str, str] | None = None,
          rules: GradingRules = SWEBENCH) -> VerifyResult:
    """Run the instance's verify command or tests on the tree, in ``sandbox``, with ``cell``'s fresh HOME.

    The log and the JUnit report go to ``cell.run_dir``; the report is read after the run's
    sandbox, and every process in it, is gone.
    """
    return run_checks(tree.workspace, instance, env=cell.env(extra_env), log=cell.run_dir / "verify.log",
                      timeout=timeout, sandbox=sandbox, rules=rules)


def integrity_details(nested_repositories: Sequence[str] = (),
                      flags: Sequence[IntegrityFlag] = ()) -> list[dict[str, Any]]:
    """The row's ``details.integrity``: the nested repositories extraction took in, and the grading tree's flags."""
    nested = [IntegrityFlag("nested_repository", path, "a directory with its own .git: taken in as files")
              for path in nested_repositories]
    return [flag.to_json() for flag in (*nested, *flags)]


# -- a cell's grading -----------------------------------------------------------------------


def fresh_tree_grading(verify_on: str, workspace: Workspace) -> bool:
    """Whether a cell's patch is graded on a fresh tree: with ``--arena-verify-on=patch`` (the default),
    wherever there is a snapshot to check out (not an image's /testbed, which is graded in place)."""
    return verify_on == "patch" and workspace.objects is not None


#: The graded tests' network by default: their own loopback, nothing else.
SEALED = GradingNetwork("sealed")

#: Files of the grading run copied into the cell's run dir (the report reads them there).
GRADING_LOGS = ("env.log", "verify.log", "verify-junit.xml")
#: At most this much of each is copied (the run dir's collection caps cut it further).
GRADING_LOG_CAP = 256 << 20


def grade_on_fresh_tree(instance: Instance, patch: bytes, *, objects: Path, base_commit: str, root: Path,
                        run_dir: Path, timeout: float, sandboxed: bool, template: EnvironmentTemplate | None,
                        rules: GradingRules = SWEBENCH, limits: CellLimits | None = None,
                        limit_mechanism: str = "rlimit",
                        network: GradingNetwork = SEALED) -> tuple[VerifyResult, tuple[IntegrityFlag, ...]]:
    """Grade ``patch`` on a new tree under ``root``: base from the snapshot, the environment's setup, the patch,
    ``test_patch``; a fresh HOME and a copy of the instance's environment ``template``, everything it runs in a
    sandbox when ``sandboxed``.

    The grading logs land in ``run_dir`` (the cell's). Raise ``PatchRejected`` when the patch does not
    apply, or when the environment's install step (run again when the patch touches what it builds:
    ``install_again``) fails on the patched tree (the arm's failure); ``TestPatchRejected``,
    ``EnvBuildError`` (before the patch) and ``WorkspaceError`` are the harness's.

    With ``limits`` (the cell's, when any is set: ``Case.enforced_limits``; sandboxed only: they ride on the
    sandbox), the patched install and the tests run inside the
    cell's limits, in groups of their own; passing one is ``LimitPassed`` (a ``PatchRejected``: the arm's
    failure, since the code under test is the arm's).

    The tests' sandbox has a network of its own with only loopback unless ``network`` is open (``grading_network``:
    the row's environment needs the network). The install step run again on the patched tree shares the machine's
    network whatever ``network`` says: it builds the environment, from the package index.
    """
    cell = create_cell_environment(root / "cell")
    tree_dir = root / "tree"
    log = cell.run_dir / "env.log"
    group = (LimitGroup.create(limits, limit_mechanism, (cell.root, tree_dir))
             if sandboxed and limits is not None else None)

    def sandbox() -> Sandbox | None:
        policy = cell_policy(cell, read_write=(tree_dir,), read_only=(objects,))
        return Sandbox(replace(policy, share_network=not network.sealed), limits=group) if sandboxed else None

    built: list[PythonEnvironment] = []

    def setup(tree: Path) -> None:
        assert template is not None
        # An install on the patched tree may replace what the environment installed: a real copy for it.
        built.append(grading_environment(template, tree, cell, log, bound=sandboxed and not install_again(patch)))

    try:
        # A template whose steps left no files changes nothing in the tree: no setup to commit before the patch.
        lays_files = template is not None and bool(template.files or template.removed)
        tree = build_grading_tree(tree_dir, objects=objects, base_commit=base_commit, patch=patch,
                                  instance=instance, setup=setup if lays_files else None)
        if template is not None:
            if not built:
                setup(tree.path)
            template.lay_bytecode(tree.path)  # after the setup's commit: bytecode is never part of base
        extra: dict[str, str] = {}
        grading_sandbox = sandbox()
        if built:
            environment = built[0]
            if grading_sandbox is not None:
                # the venv is the grading cell's (writable: the install step of the patched tree writes it),
                # but for its entries hardlinked to the template's
                grading_sandbox = grading_sandbox.showing(
                    *program_mounts_outside(environment.venv / "bin" / "python", (cell.root,)),
                    *environment.read_only).binding(*environment.bound)
            if environment.spec.install and install_again(patch):
                try:
                    run_step(environment, environment.spec.install, tree.path, cell, log, timeout,
                             "install (the patch touches what it builds)", sharing_network(grading_sandbox))
                except EnvBuildError as error:
                    raise PatchRejected(f"the environment's install step fails on the patched tree: {error}") from None
            extra = environment.variables(cell.variables.get("PATH", ""))
        verdict = grade_tree(tree, instance, cell=cell, timeout=timeout, sandbox=grading_sandbox, extra_env=extra,
                        rules=rules)
    finally:
        passed = group.close() if group is not None else None
        refused = copy_grading_logs(cell.run_dir, run_dir)
    if passed is not None:
        raise LimitPassed(f"the graded tests passed a limit: {passed}")
    # A grading log the graded code swapped for a link (or the arm pre-made as one) is not copied: flagged.
    return verdict, (*tree.integrity, *verdict.integrity,
                     *(IntegrityFlag("crossing", path, reason) for path, reason in refused))


def sharing_network(sandbox: Sandbox | None) -> Sandbox | None:
    """``sandbox`` with the machine's network: an environment step's (it installs from the package index)."""
    if sandbox is None:
        return None
    return replace(sandbox, policy=replace(sandbox.policy, share_network=True))


def copy_grading_logs(source: Path, run_dir: Path) -> list[tuple[str, str]]:
    """Copy the grading run's logs into the cell's ``run_dir``, through the crossing (the graded code could
    write where they are, and the arm where they go); what was refused (path, why)."""
    refused: list[tuple[str, str]] = []
    for name in GRADING_LOGS:
        appended = name == "env.log" and os.path.lexists(run_dir / name)  # the arm's environment phase wrote it
        try:
            if appended:
                with crossing.writing(run_dir, name, "append") as kept:
                    kept.write(b"\n# the grading environment: a copy of the template for the fresh tree\n")
            crossing.copy(source, name, run_dir, name, cap=GRADING_LOG_CAP, mode="append" if appended else "truncate")
        except FileNotFoundError:
            continue
        except crossing.Refused as refusal:
            refused.append((refusal.path, refusal.reason))
    return refused
