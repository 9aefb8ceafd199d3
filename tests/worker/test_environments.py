"""Python environments without containers: per-cell venvs built with uv from a shared cache."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers.arena import write_export
from helpers.gitrepos import git, shapes_swe_bench_row

from pytest_swe_arena.cell.venvs import EnvBuildError, _probe, find_interpreter

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"

ENV_CHECK_CONFTEST = '''
import os
import shutil

from pytest_swe_arena.arms.base import ArmResult
from pytest_swe_arena.spend.usage import Usage


class EnvCheckArm:
    """Records the environment the arm sees, and changes nothing."""

    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        env = request.cell.env()
        python = shutil.which("python", path=env["PATH"])
        return ArmResult(usage=Usage.no_model(), details={"VIRTUAL_ENV": env.get("VIRTUAL_ENV"), "python": python})


def pytest_arena_arm_kinds():
    return {"envcheck": EnvCheckArm}
'''


def env_specs_toml(repo: str, version: str, **spec: object) -> str:
    lines = [f'[specs."{repo}"."{version}"]']
    lines += [f"{key} = {json.dumps(value)}" for key, value in spec.items()]  # JSON strings and lists are TOML
    return "\n".join(lines) + "\n"


@pytest.fixture
def shapes(tmp_path_factory):
    return shapes_swe_bench_row(tmp_path_factory.mktemp("repos"))


def test_two_cells_of_an_instance_build_its_environment_once_and_each_use_a_copy(suite, shapes, tmp_path):
    """-n 2: the template is built once between the workers (its install step runs once, counted by the step
    itself), and each cell, and each grading tree, gets a venv of its own copied from it."""
    row, repo = shapes
    write_export(suite, [row])
    git(repo, "tag", "v1.0", row["base_commit"])  # what setuptools_scm would read: the template's checkout has it
    counter = tmp_path / "installs.txt"
    (suite.path / "env-specs.toml").write_text(env_specs_toml(
        "acme/shapes", "1.0", python=HERE, requirements=["pytest"],
        pre_install=["python -c 'import sys; assert sys.prefix != sys.base_prefix'",
                     "echo described as $(git describe --tags)"],
        install=f"python -m pip install --quiet --no-deps --no-build-isolation -e . && echo $$ >> {counter}",
    ))
    suite.pytester.makeconftest(ENV_CHECK_CONFTEST)
    suite.arms_toml = '[tool.swe_arena.arms.CHECK]\nkind = "envcheck"\n'
    result = suite.run(f"--arena-repos={repo.parent}", "--arena-env-specs=env-specs.toml",
                       "--arena-arms=GOLD,CHECK", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    rows = {row["arm"]: row for row in suite.ledger()}
    assert rows["GOLD"]["status"] == "resolved"
    # P2P test_in_cell_venv asserts sys.prefix == $VIRTUAL_ENV != sys.base_prefix inside the run.
    assert rows["GOLD"]["verify"]["tests"]["PASS_TO_PASS"]["tests/test_other.py::test_in_cell_venv"] == "passed"
    assert {row["worker"] for row in rows.values()} == {"gw0", "gw1"}
    assert len(counter.read_text().splitlines()) == 1  # four environments, one install
    [built] = (suite.cache / "templates" / "builds.log").read_text().splitlines()
    [template] = [p for p in (suite.cache / "templates").iterdir() if p.is_dir()]
    assert template.name in built
    venvs = set()
    out = suite.path / "arena-out"
    logs = {arm: (out / row["run_dir"] / "env.log").read_text() for arm, row in rows.items()}
    assert sum("$ (install) python -m pip install" in log for log in logs.values()) == 1
    assert sum("described as v1.0\n" in log for log in logs.values()) == 1
    assert sum(f"# environment template {template.name}: reused" in log for log in logs.values()) == 1
    for arm, log in logs.items():
        env_log, grading_log = log.split("\n# the grading environment: a copy of the template for the fresh tree\n")
        assert "$ (install" not in grading_log  # the patch touches no build file: the copy stands in for it
        # GOLD runs nothing in its workspace: its cell gets no venv, only the grading tree does.
        for part in (env_log, grading_log) if arm == "CHECK" else (grading_log,):
            [copied] = [line for line in part.splitlines() if line.startswith(f"# environment template "
                                                                             f"{template.name}: copied to ")]
            venvs.add(copied.split(" copied to ")[1].split(" (")[0])
        assert rows[arm]["phases"]["env"] > 0
    assert f"# environment template {template.name}: no venv for this cell" in logs["GOLD"]
    assert len(venvs) == 3 and str(template / "venv") not in venvs  # each agent's cell and grading tree its own copy
    assert rows["CHECK"]["details"]["VIRTUAL_ENV"] in venvs
    assert rows["CHECK"]["details"]["python"] == rows["CHECK"]["details"]["VIRTUAL_ENV"] + "/bin/python"
    # The venv sits outside the workspace and the install left nothing to commit: no setup commit, clean patch.
    assert rows["CHECK"]["patch_lines"] == 0


#: A host no resolver answers for (``.invalid`` is reserved, RFC 2606), here or anywhere.
UNREACHABLE = "https://astropy-helpers.invalid/astropy-helpers.git"


def test_missing_python_and_failed_build_are_harness_errors_with_their_log(suite, shapes):
    row, repo = shapes
    rows = [{**row, "instance_id": "acme__shapes-1", "env": {"python": "2.5"}},
            {**row, "instance_id": "acme__shapes-2", "env": {"pre_install": ["echo building; exit 3"]}},
            {**row, "instance_id": "acme__shapes-3"},
            # Graded by the default pytest runner in a venv without pytest: every test would be missing.
            {**row, "instance_id": "acme__shapes-4", "env": {"python": HERE}},
            # An install that clones a submodule from the network (astropy's astropy_helpers) on a machine without it.
            {**row, "instance_id": "acme__shapes-5", "env": {"pre_install": [f"git clone -q {UNREACHABLE} helpers"]}}]
    write_export(suite, rows)
    result = suite.run(f"--arena-repos={repo.parent}", "--arena-arms=GOLD")
    result.assert_outcomes(passed=1, errors=4)
    by_id = {row["instance_id"]: row for row in suite.ledger()}
    assert by_id["acme__shapes-1"]["status"] == "harness_error"
    assert by_id["acme__shapes-1"]["error"].startswith("env: Python 2.5 is not installed on this machine (looked on")
    failed = by_id["acme__shapes-2"]
    assert failed["status"] == "harness_error"
    assert failed["error"] == ("env: environment build failed: pre_install step `echo building; exit 3` exited 3 "
                               "(see env.log)")
    log = (suite.path / "arena-out" / failed["run_dir"] / "env.log").read_text()
    assert "building" in log
    # The reason is the network the step reached for, not the last line that says "error".
    assert by_id["acme__shapes-5"]["error"] == (
        f"env: environment build failed: pre_install step `git clone -q {UNREACHABLE} helpers` exited 128: it needs "
        f"the network, which it could not reach: fatal: unable to access '{UNREACHABLE}/': Could not resolve host: "
        "astropy-helpers.invalid (see env.log)")
    assert by_id["acme__shapes-3"]["status"] == "resolved"
    no_pytest = by_id["acme__shapes-4"]
    assert no_pytest["status"] == "harness_error"
    # The health check at base, before the arm ran, names the failing import.
    assert no_pytest["error"].startswith("env: environment is broken: `python -m pytest --collect-only -q "
                                         "-p no:cacheprovider --confcutdir=. --rootdir=. -c /dev/null tests/")
    assert "failed at base, before any arm ran (No module named pytest; see env.log)" in no_pytest["error"]
    assert "No module named pytest" in (suite.path / "arena-out" / no_pytest["run_dir"] / "env.log").read_text()


def test_bad_env_specs_file_is_a_usage_error_naming_the_table(suite, shapes):
    row, repo = shapes
    write_export(suite, [row])
    (suite.path / "specs.toml").write_text('[specs."acme/shapes"."1.0"]\npython = 3.9\n')
    result = suite.run(f"--arena-repos={repo.parent}", "--arena-env-specs=specs.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(['*--arena-env-specs: *specs.toml: [[]specs."acme/shapes"."1.0"[]]: '
                                 "field 'python': 3.9 is not of type 'string'*"])


def test_interpreters_are_found_by_version_and_never_substituted():
    path, version = find_interpreter(HERE)
    assert version.startswith(HERE + ".") and os.access(path, os.X_OK)
    with pytest.raises(EnvBuildError, match=r"Python 3\.99 is not installed on this machine"):
        find_interpreter("3.99")


@pytest.mark.skipif(not (Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions").is_dir()
                    or shutil.which("pyenv") is None, reason="pyenv is not on this machine")
def test_pyenv_versions_are_found_even_when_their_shim_is_inactive():
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    other = sorted(p.name for p in versions.iterdir() if p.name.startswith("3.") and not p.name.startswith(HERE))
    if not other:
        pytest.skip("pyenv has no other Python 3 version")
    wanted = ".".join(other[0].split(".")[:2])
    path, version = find_interpreter(wanted)
    assert version.startswith(wanted + ".") and str(path).startswith(str(versions))


def test_an_interpreter_that_answers_the_probe_with_junk_is_a_clear_error(tmp_path):
    impostor = tmp_path / "python"
    impostor.write_text("#!/bin/sh\necho 'Welcome to the Python shim!'\n")
    impostor.chmod(0o755)
    with pytest.raises(EnvBuildError, match=r"/python did not answer the version probe as a Python interpreter "
                                            r"does .*got 'Welcome to the Python shim!'"):
        _probe(impostor)
