"""A row's runner is started as grading starts it: sphinx's ``tox --current-env`` in the cell's venv, and the
health check at base running the row's own test command, so a runner that cannot start is a harness error."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from helpers.arena import write_export
from helpers.gitrepos import shapes_swe_bench_row

from pytest_swe_arena.grading.runners import (
    ToxEnvNameError,
    prepare_tox_current_env,
    swebench_runner,
    tox_current_envs,
)

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"

#: sphinx 3.4's tox.ini, cut down: its commands run `python -X dev -m pytest`, the tox env's `python`.
TOX_INI = "[tox]\nenvlist = py\n\n[testenv]\ncommands =\n    python -X dev -m pytest -rA {posargs}\n"


def test_tox_current_env_names_its_environments():
    sphinx = swebench_runner("sphinx-doc/sphinx", "3.4")
    assert sphinx is not None and tox_current_envs(sphinx.test_cmd) == ["py39"]
    assert tox_current_envs("tox --current-env -e py39,docs -v --") == ["py39", "docs"]
    assert tox_current_envs("tox -epy39 -v --") == []  # tox's own venvs need nothing of ours
    assert tox_current_envs("pytest -rA") == []
    assert tox_current_envs("tox --current-env -e py3.9,.hidden -v --") == ["py3.9", ".hidden"]


@pytest.mark.parametrize("names", ["..", ".", "py39,..", "...", "py39,."])
def test_a_tox_environment_of_dots_only_is_refused_naming_the_command(tmp_path, names):
    """``.tox/..`` is the tree itself: the preparation would replace the whole tree (issue 27)."""
    command = f"tox --current-env -e {names} -v --"
    with pytest.raises(ToxEnvNameError, match=r"test command 'tox --current-env.*not dots only"):
        tox_current_envs(command)
    tree = tmp_path / "tree"
    (tree / "calc").mkdir(parents=True)
    (tree / "calc" / "ops.py").write_text("x = 1\n")
    with pytest.raises(ToxEnvNameError):
        prepare_tox_current_env(command, tree, tmp_path / "venv")
    assert (tree / "calc" / "ops.py").read_text() == "x = 1\n"


def test_the_tox_env_of_a_current_env_runner_is_a_view_of_the_venv(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib").mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "bin" / "python3.99").symlink_to("python")
    workspace = tmp_path / "tree"
    # Whatever the tree held there (an agent's own "python") is replaced.
    (workspace / ".tox" / "py39" / "bin").mkdir(parents=True)
    (workspace / ".tox" / "py39" / "bin" / "python").write_text("#!/bin/sh\necho PASSED tests/test_x.py::t\n")
    prepare_tox_current_env("tox --current-env -epy39 -v --", workspace, venv)
    view = workspace / ".tox" / "py39"
    assert (view / "pyvenv.cfg").read_text() == "home = /usr/bin\n"
    assert (view / "lib").resolve() == venv / "lib"
    assert sorted(path.name for path in (view / "bin").iterdir()) == ["python", "python3", "python3.99"]
    assert {(view / "bin" / name).readlink() for name in ("python", "python3", "python3.99")} == {venv / "bin/python"}
    prepare_tox_current_env("pytest -rA", workspace, venv)  # not tox: nothing more
    assert sorted(path.name for path in (workspace / ".tox").iterdir()) == ["py39"]


def tox_row(repo_root: Path, **env: object) -> tuple[dict[str, object], Path]:
    row, repo = shapes_swe_bench_row(repo_root)
    write_tox = "printf " + shlex.quote(TOX_INI.replace("\n", "\\n")) + " > tox.ini"
    # SWE-bench's runner runs the files test_patch touches: test_other.py's tests are not run.
    row["PASS_TO_PASS"] = json.dumps(["tests/test_text.py::test_lower", "tests/test_text.py::test_collapse[X-x]"])
    return {**row, "test_cmd": "tox --current-env -epy -v --", "log_parser": "parse_log_sphinx",
            "env": {"python": HERE, "requirements": ["pytest", "tox==4.16.0", "tox-current-env==0.0.11"],
                    "pre_install": [write_tox],
                    "install": "python -m pip install --quiet --no-deps --no-build-isolation -e .", **env}}, repo


def test_a_tox_current_env_runner_runs_the_tests_with_the_venvs_python(suite, tmp_path_factory):
    # sphinx's runner: tox-current-env links .tox/py/bin/python to tox's own interpreter, a venv's link, which
    # alone would not find the venv (pyvenv.cfg is read beside the link): "No module named pytest".
    row, repo = tox_row(tmp_path_factory.mktemp("repos"))
    write_export(suite, [row])
    result = suite.run(f"--arena-repos={repo.parent}")
    result.assert_outcomes(passed=1, failed=1)
    gold, empty = sorted(suite.ledger(), key=lambda r: r["arm"] != "GOLD")
    assert gold["status"] == "resolved", gold["error"]
    assert gold["verify"]["tests"]["log_parser"] == "parse_log_sphinx"
    assert gold["verify"]["tests"]["FAIL_TO_PASS"] == {"tests/test_text.py::test_collapse[a": "passed",
                                                       "tests/test_text.py::test_strip": "passed"}
    # pytest is in the venv alone: the tox env's python found it through its view of the venv.
    assert gold["verify"]["tests"]["PASS_TO_PASS"] == {"tests/test_text.py::test_lower": "passed",
                                                       "tests/test_text.py::test_collapse[X-x]": "passed"}
    assert empty["status"] == "unresolved"
    assert empty["verify"]["tests"]["FAIL_TO_PASS"]["tests/test_text.py::test_strip"] == "failed"
    out = suite.path / "arena-out"
    assert "py: commands[0]> python -X dev -m pytest -rA" in (out / gold["run_dir"] / "verify.log").read_text()
    # The health check at base started tox the same way.
    assert "$ (health check at base) tox --current-env -epy -v -- --collect-only" in (
        out / gold["run_dir"] / "env.log").read_text()


def test_the_health_check_starts_the_rows_own_runner_and_a_runner_that_cannot_start_is_a_harness_error(
        suite, tmp_path_factory):
    # `pytest -rA` (SWE-bench's command) does not put the tree on sys.path as `python -m pytest` does: without an
    # install step the tests cannot import the project. Grading would call every test failed, GOLD unresolved.
    row, repo = shapes_swe_bench_row(tmp_path_factory.mktemp("repos"))
    row["PASS_TO_PASS"] = json.dumps(["tests/test_text.py::test_lower", "tests/test_text.py::test_collapse[X-x]"])
    not_installed = {**row, "test_cmd": "pytest -rA", "log_parser": "parse_log_pytest",
                     "env": {"python": HERE, "requirements": ["pytest"]}}
    installed = {**not_installed, "instance_id": "acme__shapes-43",
                 "env": {**not_installed["env"], "install": "python -m pip install --quiet --no-deps -e ."}}
    write_export(suite, [not_installed, installed])
    result = suite.run(f"--arena-repos={repo.parent}", "--arena-arms=GOLD")
    result.assert_outcomes(passed=1, errors=1)
    by_id = {ledger_row["instance_id"]: ledger_row for ledger_row in suite.ledger()}
    broken = by_id["acme__shapes-42"]
    assert broken["status"] == "harness_error"
    assert broken["error"].startswith("env: environment is broken: `pytest -rA --collect-only -q -p no:cacheprovider "
                                      "tests/test_text.py || test $? -eq 5` failed at base, before any arm ran ("), \
        broken["error"]
    assert "No module named 'shapes'" in broken["error"]
    assert by_id["acme__shapes-43"]["status"] == "resolved", by_id["acme__shapes-43"]["error"]


def test_a_tox_runner_that_cannot_start_is_a_harness_error_saying_why(suite, tmp_path_factory):
    # tox without tox-current-env: `tox --current-env` is no option of tox's own.
    row, repo = tox_row(tmp_path_factory.mktemp("repos"), requirements=["pytest", "tox==4.16.0"])
    write_export(suite, [row])
    result = suite.run(f"--arena-repos={repo.parent}", "--arena-arms=GOLD")
    result.assert_outcomes(errors=1)
    [gold] = suite.ledger()
    assert gold["status"] == "harness_error"
    assert gold["error"].startswith("env: environment is broken: `tox --current-env -epy -v -- --collect-only"), \
        gold["error"]
    assert "failed at base, before any arm ran (tox: error: unrecognized arguments: --current-env" in gold["error"]
