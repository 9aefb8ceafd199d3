"""Instance environment templates: built once per spec and base, copied (never linked) for every cell.

Real uv, real pip, real git; the hostile sweep runs its agent in the real sandbox.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.agents import arm_table
from helpers.arena import write_export
from helpers.gitrepos import git, shapes_swe_bench_row

from pytest_swe_arena.cell.sandbox import probe_bwrap
from pytest_swe_arena.cell.templates import instance_template
from pytest_swe_arena.cell.venvs import EnvBuildError, EnvironmentStore, EnvSpec

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"
needs_bwrap = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")


@dataclasses.dataclass
class Project:
    """The shapes repository, its base, and a store the templates go to."""

    repo: Path
    base: str
    store: EnvironmentStore
    counter: Path
    log: Path

    @property
    def objects(self) -> Path:
        return self.repo / ".git" / "objects"

    def spec(self, install_options: str = "", **changes: object) -> EnvSpec:
        install = (f"python -m pip install --quiet --no-deps --no-build-isolation {install_options} -e . "
                   f"&& echo built >> {self.counter}")
        return dataclasses.replace(EnvSpec(python=HERE, requirements=("iniconfig",), install=install), **changes)

    def template(self, spec: EnvSpec, base: str | None = None):
        return instance_template(self.store, spec, repo="acme/shapes", base_commit=base or self.base,
                                 objects=self.objects, cell_env=dict(os.environ), log=self.log, timeout=300)

    @property
    def installs(self) -> int:
        return len(self.counter.read_text().splitlines()) if self.counter.is_file() else 0

    def checkout(self, dest: Path, base: str | None = None) -> Path:
        subprocess.run(["git", "worktree", "add", "--quiet", "--detach", str(dest), base or self.base],
                       cwd=self.repo, check=True, capture_output=True)
        return dest


@pytest.fixture
def project(tmp_path) -> Project:
    row, repo = shapes_swe_bench_row(tmp_path / "repos")
    return Project(repo, row["base_commit"], EnvironmentStore(tmp_path / "cache"), tmp_path / "installs.txt",
                   tmp_path / "env.log")


def test_a_template_is_built_once_and_a_change_of_spec_or_base_builds_another(project):
    first = project.template(project.spec())
    assert project.installs == 1
    again = project.template(project.spec())
    assert again.root == first.root and project.installs == 1  # found: the install did not run again
    assert "reused" in project.log.read_text().splitlines()[-1]
    changed_step = project.template(project.spec(pre_install=("true",)))
    assert changed_step.root != first.root and project.installs == 2
    changed_requirements = project.template(project.spec(requirements=("iniconfig", "pluggy")))
    assert changed_requirements.root not in (first.root, changed_step.root) and project.installs == 3
    later = git(project.repo, "rev-parse", "HEAD").strip()  # the fix commit: another base
    assert project.template(project.spec(), base=later).root not in (first.root, changed_step.root)
    assert project.installs == 4
    assert len((project.store.root / "templates" / "builds.log").read_text().splitlines()) == 4


def test_a_failed_build_leaves_no_template_and_the_next_cell_builds_again(project):
    broken = project.spec(pre_install=("exit 7",))
    for _ in range(2):
        with pytest.raises(EnvBuildError, match="pre_install step `exit 7` exited 7"):
            project.template(broken)
    assert [p.name for p in (project.store.root / "templates").iterdir() if p.is_dir()] == []
    assert project.installs == 0


def test_a_failed_build_remembered_for_the_sweep_is_not_tried_again_and_names_the_first_failure(project, tmp_path):
    failures = tmp_path / "sweep" / "failed-templates"
    broken = project.spec(pre_install=(f"echo tried >> {tmp_path / 'tries'}; exit 7",))
    with pytest.raises(EnvBuildError, match="exited 7"):
        instance_template(project.store, broken, repo="acme/shapes", base_commit=project.base, objects=project.objects,
                          cell_env=dict(os.environ), log=project.log, timeout=300, failures=failures,
                          cell="shapes-1[GOLD]")
    for cell in ("shapes-1[EMPTY]", "shapes-1[GOLD-r2]"):
        with pytest.raises(EnvBuildError, match=r"its build failed earlier in this sweep, in cell shapes-1\[GOLD\] "
                                                r"\(not tried again until the next sweep\): .*exited 7"):
            instance_template(project.store, broken, repo="acme/shapes", base_commit=project.base,
                              objects=project.objects, cell_env=dict(os.environ), log=project.log, timeout=300,
                              failures=failures, cell=cell)
    assert (tmp_path / "tries").read_text() == "tried\n"
    # Another sweep (another folder of failures) builds again.
    with pytest.raises(EnvBuildError, match="exited 7"):
        instance_template(project.store, broken, repo="acme/shapes", base_commit=project.base, objects=project.objects,
                          cell_env=dict(os.environ), log=project.log, timeout=300, failures=tmp_path / "next",
                          cell="shapes-1[GOLD]")
    assert (tmp_path / "tries").read_text() == "tried\ntried\n"


def test_a_sweeps_cells_of_an_instance_whose_template_failed_do_not_build_it_again(suite, calc, tmp_path):
    """GOLD and EMPTY x 2 trials on 2 workers, an environment whose pre_install step fails: one build, and
    every cell a harness error, those after the first naming the cell whose build failed."""
    tries = tmp_path / "tries"
    suite.instances([calc.row(env={"python": HERE, "pre_install": [f"echo tried >> {tries}; exit 7"]})])
    result = suite.run("--arena-repeat=2", "--arena-sandbox=none", "-n", "2")
    rows = suite.ledger()
    assert len(rows) == 4, result.stdout.str()[-3000:]
    assert tries.read_text() == "tried\n"
    assert {row["status"] for row in rows} == {"harness_error"}
    first = [row for row in rows if "earlier in this sweep" not in row["error"]]
    assert len(first) == 1 and "exited 7" in first[0]["error"]
    name = f"demo__calc-1[{first[0]['arm']}-r{first[0]['trial']}]".replace("-r1]", "]")
    for row in rows:
        if row is not first[0]:
            assert f"in cell {name} (not tried again" in row["error"] and "exited 7" in row["error"], row["error"]


@pytest.mark.parametrize("install_options", ["", "--config-settings editable_mode=compat"],
                         ids=["pep660-finder", "compat-pth"])
def test_an_editable_install_in_a_copy_imports_the_cells_own_workspace(project, tmp_path, install_options):
    template = project.template(project.spec(install_options))
    cells = {}
    for name in ("one", "two"):
        workspace = project.checkout(tmp_path / name / "workspace")
        (workspace / "shapes" / "text.py").write_text(f"def normalize(text):\n    return {name!r}\n")
        cells[name] = (workspace, template.copy_to(tmp_path / name / "venv", workspace, tmp_path / name / "env.log"))
    # The template's own files are out of reach: every path must come from the copies.
    hidden = template.root.with_name(template.root.name + ".hidden")
    template.root.rename(hidden)
    try:
        for name, (workspace, environment) in cells.items():
            said = subprocess.run(
                [str(environment.venv / "bin" / "python"), "-c",
                 "import shapes, sys; print(shapes.__file__); print(shapes.normalize('X')); print(sys.prefix)"],
                cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()
            assert said == [str(workspace / "shapes" / "__init__.py"), name, str(environment.venv)]
            # A console script of the copy runs the copy's interpreter (its #! line, or its sh launcher for a long
            # path, was rewritten).
            script = (environment.venv / "bin" / "pip").read_text()
            assert str(environment.venv) in script and template.key not in script
            subprocess.run([str(environment.venv / "bin" / "pip"), "--version"], check=True, capture_output=True)
    finally:
        hidden.rename(template.root)


def test_a_copy_shares_no_inode_with_the_template(project, tmp_path):
    """Hardlinks would share the inode: a write in place into the copy would be a write into the template."""
    template = project.template(project.spec())
    environment = template.copy_to(tmp_path / "cell" / "venv", project.checkout(tmp_path / "cell" / "ws"),
                                   tmp_path / "env.log")
    inodes = {(path.stat().st_dev, path.stat().st_ino) for path in template.venv.rglob("*")
              if path.is_file() and not path.is_symlink()}
    copied = [path for path in environment.venv.rglob("*") if path.is_file() and not path.is_symlink()]
    assert len(copied) == len(inodes) > 100
    assert not inodes & {(path.stat().st_dev, path.stat().st_ino) for path in copied}


def test_what_the_steps_left_in_the_checkout_reaches_every_copy(project, tmp_path):
    """A generated version file (ignored, as setuptools_scm's is) and a file the steps removed."""
    spec = project.spec(pre_install=("echo 'version = \"1.0.dev3\"' > shapes/_version.py && echo shapes/_version.py"
                                     " >> .gitignore && rm CHANGES",))
    template = project.template(spec)
    workspace = project.checkout(tmp_path / "ws")
    environment = template.copy_to(tmp_path / "venv", workspace, tmp_path / "env.log")
    assert (workspace / "shapes" / "_version.py").read_text() == 'version = "1.0.dev3"\n'
    assert not (workspace / "CHANGES").exists()
    said = subprocess.run([str(environment.venv / "bin" / "python"), "-c", "import shapes._version as v; "
                           "print(v.__file__)"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert said.stdout.strip() == str(workspace / "shapes" / "_version.py")


HOSTILE_AGENT = r"""
import glob, os, shutil, sys
[site] = glob.glob(os.path.join(os.environ["VIRTUAL_ENV"], "lib", "python*", "site-packages"))
package = os.path.join(site, "iniconfig")
templates = sys.argv[1]
TAMPERED = "raise SystemExit('tampered')\n"

def in_place():  # the same inode, written in place
    with open(os.path.join(package, "__init__.py"), "r+b") as handle:
        handle.write(TAMPERED.encode() + b"#")

def recreate():  # removed, and a new file in its place
    os.unlink(os.path.join(package, "exceptions.py"))
    with open(os.path.join(package, "exceptions.py"), "w") as handle:
        handle.write(TAMPERED)

def replace_package():
    shutil.rmtree(package)
    os.mkdir(package)
    with open(os.path.join(package, "__init__.py"), "w") as handle:
        handle.write(TAMPERED)

def add_package():
    os.mkdir(os.path.join(site, "added_by_agent"))

def list_templates():
    os.listdir(templates)

def write_templates():
    open(os.path.join(templates, "x"), "w").close()

for attack in (in_place, recreate, replace_package, add_package, list_templates, write_templates):
    try:
        attack()
        print(attack.__name__, "DONE")
    except OSError as error:
        print(attack.__name__, "REFUSED", error.strerror)
"""

RECORDER_CONFTEST = '''
import hashlib
from pathlib import Path

from pytest_swe_arena.arms.base import ArmResult
from pytest_swe_arena.spend.usage import Usage


class RecordArm:
    """Records what the iniconfig package in its venv holds."""

    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        venv = Path(request.cell.env()["VIRTUAL_ENV"])
        [package] = venv.glob("lib/python*/site-packages/iniconfig")
        return ArmResult(usage=Usage.no_model(), details={
            "venv": str(venv), **{name: (package / name).read_text() for name in ("__init__.py", "exceptions.py")}})


def pytest_arena_arm_kinds():
    return {"record": RecordArm}
'''


@pytest.mark.parametrize("sandbox", [pytest.param("bwrap", marks=needs_bwrap), "none"])
def test_a_hostile_agent_writing_its_venv_changes_neither_the_template_nor_the_next_cells_env(suite, tmp_path,
                                                                                              sandbox):
    """Sandboxed, the venv's installed packages are hardlinks shown read-only: writes in place, remove-and-recreate
    and replacing a package are refused, adding one is not, and the cache is out of sight. Unsandboxed, the venv
    is a real copy: every attack works, on the agent's own copy only."""
    row, repo = shapes_swe_bench_row(tmp_path / "repos")
    write_export(suite, [row])
    (suite.path / "env-specs.toml").write_text(
        '[specs."acme/shapes"."1.0"]\n'
        f'python = "{HERE}"\nrequirements = ["pytest", "iniconfig"]\n'
        'install = "python -m pip install --quiet --no-deps --no-build-isolation -e ."\n')
    agent = tmp_path / "agent.py"
    agent.write_text(HOSTILE_AGENT)
    suite.pytester.makeconftest(RECORDER_CONFTEST)
    templates = suite.cache / "templates"
    # In a shell, so `python` is the cell's venv's (a command's program is looked up on the harness's PATH).
    suite.arms_toml = (arm_table("HOSTILE", "command", shell=True, command=f"python {agent} {templates}")
                       + arm_table("LATER", "record"))
    suite.run(f"--arena-repos={repo.parent}", "--arena-env-specs=env-specs.toml", "--arena-arms=HOSTILE,LATER",
              f"--arena-sandbox={sandbox}", "-p", "no:xdist")
    rows = {row["arm"]: row for row in suite.ledger()}
    assert [row["arm"] for row in suite.ledger()] == ["HOSTILE", "LATER"]  # the second cell ran after the attack
    said = dict(line.split(" ", 1) for line in
                (suite.path / "arena-out" / rows["HOSTILE"]["run_dir"] / "stdout.log").read_text().splitlines())
    if sandbox == "bwrap":
        assert said["in_place"] == said["recreate"] == "REFUSED Read-only file system"
        assert said["replace_package"].startswith("REFUSED")
        assert said["list_templates"].startswith("REFUSED") and said["write_templates"].startswith("REFUSED")
    else:
        assert said["in_place"] == said["recreate"] == said["replace_package"] == "DONE"
    assert said["add_package"] == "DONE"
    [template] = [p for p in templates.iterdir() if p.is_dir()]
    [package] = (template / "venv").glob("lib/python*/site-packages/iniconfig")
    for name in ("__init__.py", "exceptions.py"):
        pristine = (package / name).read_text()
        assert "tampered" not in pristine
        assert rows["LATER"]["details"][name] == pristine
    assert rows["LATER"]["details"]["venv"] != str(template / "venv")
    assert not list((template / "venv").glob("lib/python*/site-packages/added_by_agent"))


def test_a_linked_copy_shares_inodes_only_in_the_entries_it_protects(project, tmp_path):
    """Hardlinked entries are listed for the sandbox to show read-only; every file that holds a path (scripts,
    .pth files, the editable finder, direct_url.json) is a file of the copy's own."""
    template = project.template(project.spec())
    environment = template.copy_to(tmp_path / "cell" / "venv", project.checkout(tmp_path / "cell" / "ws"),
                                   tmp_path / "env.log", linked=True)
    inodes = {(path.stat().st_dev, path.stat().st_ino) for path in template.venv.rglob("*")
              if path.is_file() and not path.is_symlink()}
    shared = {path for path in environment.venv.rglob("*") if path.is_file() and not path.is_symlink()
              and (path.stat().st_dev, path.stat().st_ino) in inodes}
    assert shared and environment.read_only
    assert all(any(root == path or root in path.parents for root in environment.read_only) for path in shared)
    own = [*environment.venv.glob("bin/*"), *environment.venv.glob("lib/python*/site-packages/*.pth"),
           *environment.venv.glob("lib/python*/site-packages/__editable__*"),
           *environment.venv.glob("lib/python*/site-packages/shapes-*.dist-info/direct_url.json")]
    assert len(own) > 5 and not shared & set(own)
    said = subprocess.run([str(environment.venv / "bin" / "python"), "-c", "import shapes; print(shapes.__file__)"],
                          cwd=tmp_path, capture_output=True, text=True, check=True)
    assert said.stdout.strip() == str(tmp_path / "cell" / "ws" / "shapes" / "__init__.py")


def test_a_venv_of_requirements_alone_has_pip_for_an_agent_and_is_compiled_but_for_pip(project):
    """No steps: the venv is still seeded (an agent in its cell's copy may run ``pip install``, as in any venv),
    and the template compiles what the tests may import, so every copy, read-only in the sandbox, imports
    without compiling; pip is left out of the compile (the graded tests never import it)."""
    template = project.template(EnvSpec(python=HERE, requirements=("iniconfig",)))
    [site] = template.venv.glob("lib/python*/site-packages")
    pip = subprocess.run([str(template.venv / "bin" / "python"), "-m", "pip", "--version"], capture_output=True,
                         text=True, check=False)
    assert pip.returncode == 0 and str(site / "pip") in pip.stdout, pip.stderr
    modules = list((site / "iniconfig").glob("*.py"))
    assert modules and all(list((site / "iniconfig" / "__pycache__").glob(f"{module.stem}.*.pyc"))
                           for module in modules)
    assert not list((site / "pip" / "_internal" / "commands" / "__pycache__").glob("uninstall.*.pyc"))
    assert "compileall -q -j 0 -x /site-packages/pip/" in (template.root / "build.log").read_text()


def test_a_seeded_venv_is_compiled_but_for_pip(project):
    """Steps call pip: the venv is seeded, and its compile leaves pip out (the tests never import it) but not
    setuptools (``distutils-precedence.pth`` imports ``_distutils_hack`` at every start-up)."""
    template = project.template(project.spec())
    [site] = template.venv.glob("lib/python*/site-packages")
    # Only what the install step's own pip imported has bytecode (written at build time): not `pip uninstall`.
    assert (site / "pip" / "_internal" / "commands" / "uninstall.py").is_file()
    assert not list((site / "pip" / "_internal" / "commands" / "__pycache__").glob("uninstall.*.pyc"))
    assert "compileall -q -j 0 -x /site-packages/pip/" in (template.root / "build.log").read_text()
    if (site / "_distutils_hack").is_dir():
        assert list((site / "_distutils_hack").glob("__pycache__/__init__.*.pyc"))
    assert list((site / "iniconfig").glob("__pycache__/__init__.*.pyc"))


def test_the_checkouts_bytecode_is_hash_checked_and_reaches_a_grading_tree_as_copies(project, tmp_path):
    """Base's modules compiled once in the template, hash-checked: valid in a fresh checkout whatever its mtimes,
    laid as copies (the graded code may write them), and a module the patch changed is compiled again."""
    template = project.template(project.spec())
    assert "shapes/__pycache__" in template.bytecode
    [pyc] = (template.checkout / "shapes" / "__pycache__").glob("__init__.*.pyc")
    assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 0b11  # hash-based, checked against the source
    tree = project.checkout(tmp_path / "tree")
    (tree / "shapes" / "__init__.py").write_text("def normalize(text):\n    return 'patched'\n")
    template.lay_bytecode(tree)
    [laid] = (tree / "shapes" / "__pycache__").glob("__init__.*.pyc")
    assert laid.read_bytes() == pyc.read_bytes() and laid.stat().st_ino != pyc.stat().st_ino
    said = subprocess.run([sys.executable, "-c", "import shapes; print(shapes.normalize('A'))"], cwd=tree,
                          capture_output=True, text=True, check=True)
    assert said.stdout.strip() == "patched"  # the stale bytecode is not used: its hash names base's source
    laid.write_bytes(b"tampered")  # what the graded code may do to its tree's copy
    assert pyc.read_bytes() != b"tampered"


def test_a_patch_linking_a_folder_out_of_the_tree_gets_no_bytecode_through_it(project, tmp_path):
    """The bytecode is laid after the patch: a folder the patch made a link (here to a folder of the harness's) is
    not followed, and a folder the patch removed gets none (bytecode alone would import as a namespace package)."""
    template = project.template(project.spec())
    tree = project.checkout(tmp_path / "tree")
    outside = tmp_path / "outside"
    outside.mkdir()
    subprocess.run(["git", "rm", "-rq", "shapes"], cwd=tree, check=True)
    (tree / "shapes").symlink_to(outside)
    template.lay_bytecode(tree)
    assert list(outside.iterdir()) == []
    removed = project.checkout(tmp_path / "removed")
    subprocess.run(["git", "rm", "-rq", "shapes"], cwd=removed, check=True)
    template.lay_bytecode(removed)
    assert not (removed / "shapes").exists()
