"""Datasets as published: SWE-bench 5 rows and task directories, SWE-rebench, SWE-Gym and SWE-smith rows.

The rows under ``tests/data/datasets`` are real rows of each format (see its README for where each comes from);
SWE-smith's is graded on a made repository shaped as SWE-smith publishes its tasks (the bug committed on a branch
named after the instance, ``base_commit`` that commit).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.gitrepos import commit, git, write_jsonl

from pytest_swe_arena.grading.runners import has_repo_runner, runner_for_row
from pytest_swe_arena.instances.formats import SWE_REBENCH, SWE_SMITH, SWEBENCH, SWEBENCH5, detect, reverse_patch
from pytest_swe_arena.instances.loading import InstanceFileError, load_instances, read_rows
from pytest_swe_arena.instances.model import Source
from pytest_swe_arena.instances.specs import with_shipped_spec
from pytest_swe_arena.instances.swebench_specs import load_shipped_specs

DATA = Path(__file__).parents[1] / "data" / "datasets"


def rows_of(name: str) -> list[dict[str, Any]]:
    return [row for _, row in read_rows(DATA / name)]


def load(path: Path, repos: Path | None = DATA) -> list[Any]:
    return load_instances(path, read_rows(path), repos, has_repo_runner)


def write_row(tmp_path: Path, row: dict[str, Any], name: str = "rows.jsonl") -> Path:
    return write_jsonl(tmp_path / name, [row])


def error_of(path: Path, repos: Path | None = DATA) -> InstanceFileError:
    with pytest.raises(InstanceFileError) as caught:
        load(path, repos)
    return caught.value


# SWE-bench 5 ------------------------------------------------------------------------------------------------


def test_swe_bench_5_rows_grade_with_their_eval_script_and_named_parser():
    flask, requests = load(DATA / "swe-bench-5.jsonl")
    assert [detect(instance.row) for instance in (flask, requests)] == [SWEBENCH5, SWEBENCH5]
    assert flask.instance_id == "pallets__flask-4992" and flask.repo == "pallets/flask"
    assert flask.fail_to_pass == ("tests/test_config.py::test_config_from_file_toml",)
    assert flask.patch and flask.test_patch and flask.problem_statement.startswith("Add a file mode parameter")
    runner = runner_for_row(flask.row)
    assert runner is not None and runner.log_parser == "parse_log_pytest"
    assert runner.test_cmd == "pytest -rA tests/test_config.py" and runner.targets == "in_command"
    # No mirror: the row's image (its checkout in /testbed) is the source.
    assert flask.source == Source("image", "swebench/sweb.eval.x86_64.pallets_1776_flask-4992:latest")
    assert "created_2023" in flask.marks and "created_2023_02" in flask.marks


def test_a_swe_bench_5_row_is_graded_from_its_mirror_when_there_is_one(tmp_path):
    (tmp_path / "pallets__flask").mkdir()
    flask = load(DATA / "swe-bench-5.jsonl", tmp_path)[0]
    assert flask.source == Source("git", str(tmp_path / "pallets__flask"))


@pytest.mark.parametrize("eval_type, message", [("fail_only", "not a grading the harness does"),
                                                ("both", "not one of SWE-bench's eval types")])
def test_an_eval_type_the_harness_does_not_grade_is_an_error_naming_it(tmp_path, eval_type, message):
    row = {**rows_of("swe-bench-5.jsonl")[0], "eval_type": eval_type}
    error = error_of(write_row(tmp_path, row))
    assert error.field == "eval_type" and error.line == 1 and message in str(error) and "pass_and_fail" in str(error)


def test_an_eval_script_without_its_markers_is_an_error_naming_it(tmp_path):
    row = {**rows_of("swe-bench-5.jsonl")[0], "eval_script": "#!/bin/bash\npytest -rA\n"}
    error = error_of(write_row(tmp_path, row))
    assert error.field == "eval_script" and ">>>>> Start Test Output" in str(error)


@pytest.fixture(scope="module")
def testbed_image(tmp_path_factory):
    """A small SWE-bench-style image of the calc project (its checkout in /testbed); skipped where no engine answers."""
    from helpers.testbed_image import calc_testbed_image

    yield from calc_testbed_image(tmp_path_factory, "swebench5")


def test_a_swe_bench_5_row_without_a_mirror_is_graded_in_its_image(suite, testbed_image):
    engine, tag, calc = testbed_image
    script = ("#!/bin/bash\nset -uxo pipefail\ncd /testbed\n: '>>>>> Start Test Output'\n"
              "python -m pytest -rA tests/test_ops.py\n: '>>>>> End Test Output'\n")
    row = {"instance_id": "demo__calc-5", "repo": "demo/calc", "version": "1.0", "base_commit": calc.base,
           "patch": calc.patch, "test_patch": calc.test_patch, "problem_statement": "mul adds",
           "created_at": "2025-07-01T00:00:00Z", "FAIL_TO_PASS": '["tests/test_ops.py::test_mul"]',
           "PASS_TO_PASS": '["tests/test_ops.py::test_add"]', "image": tag, "log_parser": "parse_log_pytest",
           "eval_type": "pass_and_fail", "eval_script": script}
    suite.instances([row], name="instances/swe-bench-5.jsonl")
    suite.run(f"--arena-engine={engine}", "--arena-arms=GOLD,EMPTY")
    gold, empty = sorted(suite.ledger(), key=lambda r: r["arm"] != "GOLD")
    assert gold["status"] == "resolved", gold
    assert gold["verify"]["tests"]["FAIL_TO_PASS"] == {"tests/test_ops.py::test_mul": "passed"}
    assert gold["verify"]["tests"]["log_parser"] == "parse_log_pytest"
    assert empty["status"] == "unresolved" and empty["verify"]["tests"]["failing"] == ["tests/test_ops.py::test_mul"]
    log = (suite.path / "arena-out" / gold["run_dir"] / "verify.log").read_text()
    assert "PASSED tests/test_ops.py::test_mul" in log


# SWE-bench 5 task directories -------------------------------------------------------------------------------


def test_a_task_directory_loads_as_the_row_it_publishes():
    task = DATA / "task-repo" / "tasks" / "pallets__flask-4992" / "task.yaml"
    (from_dir,) = load(task)
    from_row = load(DATA / "swe-bench-5.jsonl")[0]
    for name in ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch", "fail_to_pass",
                 "pass_to_pass", "source"):
        assert getattr(from_dir, name) == getattr(from_row, name), name
    assert runner_for_row(from_dir.row) == runner_for_row(from_row.row)
    assert from_dir.row["split"] == "test"


def test_a_directory_of_tasks_is_an_instance_source(suite):
    shutil.copytree(DATA / "task-repo", suite.path / "instances" / "lite-tasks")
    result = suite.run("--collect-only", "-q", "--arena-arms=GOLD")
    assert "instances/lite-tasks/tasks/pallets__flask-4992/task.yaml::pallets__flask-4992[GOLD]" in result.stdout.str()


def copy_task(tmp_path: Path) -> Path:
    folder = tmp_path / "tasks" / "pallets__flask-4992"
    shutil.copytree(DATA / "task-repo" / "tasks" / "pallets__flask-4992", folder)
    return folder


def test_a_task_directory_without_its_eval_script_is_an_error_naming_the_file(tmp_path):
    folder = copy_task(tmp_path)
    (folder / "eval.sh").unlink()
    error = error_of(folder / "task.yaml")
    assert error.path == folder / "eval.sh" and "is missing" in str(error) and "eval_script" in str(error)


def test_a_bad_test_list_in_tests_json_is_an_error_naming_that_file(tmp_path):
    folder = copy_task(tmp_path)
    (folder / "tests.json").write_text(json.dumps({"FAIL_TO_PASS": [], "PASS_TO_PASS": []}))
    error = error_of(folder / "task.yaml")
    assert error.path == folder / "tests.json" and error.field == "FAIL_TO_PASS" and "is empty" in str(error)


def test_a_task_whose_id_is_not_its_directory_is_an_error(tmp_path):
    folder = copy_task(tmp_path)
    text = (folder / "task.yaml").read_text().replace("instance_id: pallets__flask-4992", "instance_id: other__x-1")
    (folder / "task.yaml").write_text(text)
    error = error_of(folder / "task.yaml")
    assert error.field == "instance_id" and "directory name" in str(error)


# SWE-rebench ------------------------------------------------------------------------------------------------


def test_a_swe_rebench_rows_install_config_becomes_its_environment_and_runner():
    (spectree,) = load(DATA / "swe-rebench.jsonl")
    assert detect(spectree.row) == SWE_REBENCH
    assert spectree.repo == "0b01001001/spectree" and spectree.base_commit.startswith("a091fab0")
    assert spectree.fail_to_pass == ("tests/test_utils.py::test_parse_params",)
    assert spectree.env == {"python": "3.9", "requirements": ["pytest"],
                            "pre_install": ["python -m pip install -r requirements.txt"],
                            "install": "pip install -e .[flask,falcon,starlette]"}
    # parse_log_pytest and no test command of its own: pytest, read by the harness's own runner.
    assert runner_for_row(spectree.row) is None
    assert "difficulty_1" in spectree.marks


def test_a_swe_rebench_test_command_and_parser_are_the_rows_runner(tmp_path):
    row = rows_of("swe-rebench.jsonl")[0]
    command = "pytest --no-header -rA --tb=line -p no:cacheprovider"
    row["install_config"] = {**row["install_config"], "test_cmd": command, "log_parser": "parse_log_pytest_v2"}
    (instance,) = load(write_row(tmp_path, row))
    runner = runner_for_row(instance.row)
    assert runner is not None and runner.log_parser == "parse_log_pytest_v2"
    assert runner.test_cmd == command


@pytest.mark.parametrize("change, field, message", [
    ({"packages": "environment.yml"}, "install_config.packages", "conda environment file"),
    ({"reqs_path": None}, "install_config.reqs_path", "is needed with packages 'requirements.txt'"),
    ({"log_parser": None}, "install_config.log_parser", "expected the name of the parser"),
    ({"test_cmd": "pytest -rA", "log_parser": "parse_log_nope"}, "install_config.log_parser", "names no parser"),
    ({"log_parser": "parse_log_gotest"}, "install_config.test_cmd", "needed with log_parser 'parse_log_gotest'"),
    ({"python": "three"}, "install_config.python", "does not match"),
])
def test_a_swe_rebench_row_the_harness_cannot_grade_is_an_error_naming_the_field(tmp_path, change, field, message):
    row = rows_of("swe-rebench.jsonl")[0]
    row["install_config"] = {**row["install_config"], **change}
    error = error_of(write_row(tmp_path, row))
    assert error.field == field and message in str(error) and error.line == 1


def test_a_swe_rebench_v2_row_of_another_language_is_an_error_naming_it(tmp_path):
    row = {**rows_of("swe-rebench.jsonl")[0], "language": "go"}
    error = error_of(write_row(tmp_path, row))
    assert error.field == "language" and "Python rows" in str(error)


# SWE-Gym ----------------------------------------------------------------------------------------------------


def test_swe_gym_rows_are_swe_bench_rows():
    (moto,) = load(DATA / "swe-gym.jsonl")
    assert detect(moto.row) == SWEBENCH
    assert moto.fail_to_pass == ("tests/test_dynamodb/test_dynamodb_update_expressions.py::test_update_item_add_float",)
    assert {"created_2024", "created_2024_02"} <= set(moto.marks) and moto.repo_mark == "moto"


def test_swe_gym_rows_get_their_repositorys_shipped_spec():
    (moto,) = load(DATA / "swe-gym.jsonl")
    shipped = with_shipped_spec(moto, load_shipped_specs())
    assert shipped.shipped_spec is not None  # SWE-Gym's fork: SPECS_MOTO["5.0"]
    assert shipped.env == {"python": "3.12", "requirements": [], "pre_install": [], "install": "make init"}
    assert shipped.shipped_spec.swebench_test_cmd == "pytest -n0 -rA"


def test_a_swe_gym_row_without_fail_to_pass_is_an_error_naming_it(tmp_path):
    error = error_of(write_row(tmp_path, {**rows_of("swe-gym.jsonl")[0], "FAIL_TO_PASS": []}))
    assert error.field == "FAIL_TO_PASS" and "any patch would resolve" in str(error)


# SWE-smith --------------------------------------------------------------------------------------------------

ORIGINAL = {
    ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n",
    "tldx/__init__.py": "",
    "tldx/split.py": "def suffix(host):\n    return host.rsplit('.', 1)[-1]\n\n\ndef label_count(host):\n"
                     "    return len(host.split('.'))\n",
    "tests/test_split.py": "from tldx.split import label_count, suffix\n\n\ndef test_suffix():\n"
                           "    assert suffix('a.example.com') == 'com'\n\n\ndef test_label_count():\n"
                           "    assert label_count('a.example.com') == 3\n",
}
BUG = {"tldx/split.py": ORIGINAL["tldx/split.py"].replace("rsplit('.', 1)[-1]", "rsplit('.', 1)[0]")}


def swe_smith_task(root: Path) -> tuple[dict[str, Any], Path]:
    """A repository as SWE-smith's ``harness/gather.py`` leaves it, and the task row it publishes.

    The mirror ``swesmith/<owner>__<name>.<commit8>`` holds the original at ``main`` and, on a branch named after
    the instance, the bug committed ("Bug Patch"); ``base_commit`` is that commit, ``patch`` the bug's diff.
    """
    repos = root / "repos"
    repo = repos / "placeholder"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    original = commit(repo, ORIGINAL, "tldx: suffix and label_count")
    name = f"tldx__tldx.{original[:8]}"
    repo = repo.rename(repos / f"swesmith__{name}")
    instance_id = f"{name}.func_pm_remove_assign__3qjv8u0e"
    git(repo, "checkout", "-q", "-b", instance_id)
    bug_commit = commit(repo, BUG, "Bug Patch")
    bug = git(repo, "diff", original, bug_commit)
    git(repo, "checkout", "-q", "main")
    row = {
        "instance_id": instance_id,
        "repo": f"swesmith/{name}",
        "patch": bug,
        "FAIL_TO_PASS": ["tests/test_split.py::test_suffix"],
        "PASS_TO_PASS": ["tests/test_split.py::test_label_count"],
        "created_at": "2025-03-05T09:12:27.553451",
        "image_name": f"jyangballin/swesmith.x86_64.tldx_1776_tldx.{original[:8]}",
        "base_commit": bug_commit,
        "problem_statement": "suffix('a.example.com') returns 'a.example' instead of 'com'.",
    }
    return row, repos


def test_swe_smith_gold_is_the_inverse_of_the_bug(tmp_path):
    row, repos = swe_smith_task(tmp_path)
    (instance,) = load(write_row(tmp_path, row), repos)
    assert detect(row) == SWE_SMITH and instance.test_patch is None
    assert instance.row["bug_patch"] == row["patch"] and instance.patch == reverse_patch(row["patch"])
    repo = next(repos.iterdir())
    git(repo, "checkout", "-q", row["base_commit"])
    assert "[0]" in (repo / "tldx/split.py").read_text()  # the workspace's base holds the bug
    (tmp_path / "gold.patch").write_text(instance.patch)
    git(repo, "apply", str(tmp_path / "gold.patch"))
    assert (repo / "tldx/split.py").read_text() == ORIGINAL["tldx/split.py"]
    assert {"created_2025", "created_2025_03"} <= set(instance.marks)
    assert instance.repo_mark == "tldx__tldx_" + row["repo"].rsplit(".", 1)[1]


def test_swe_smith_workspace_has_the_bug_and_gold_resolves_it(suite, tmp_path):
    row, repos = swe_smith_task(tmp_path)
    suite.instances([row], name="instances/swe-smith.jsonl")
    result = suite.run(f"--arena-repos={repos}")
    result.assert_outcomes(passed=1, failed=1)
    gold, empty = sorted(suite.ledger(), key=lambda r: r["arm"] != "GOLD")
    assert gold["status"] == "resolved"
    assert empty["status"] == "unresolved"  # the workspace holds the bug: its FAIL_TO_PASS test fails
    assert empty["verify"]["tests"]["FAIL_TO_PASS"] == {"tests/test_split.py::test_suffix": "failed"}
    assert empty["verify"]["tests"]["PASS_TO_PASS"] == {"tests/test_split.py::test_label_count": "passed"}


def test_a_swe_smith_row_without_its_bug_is_an_error_naming_the_patch(tmp_path):
    row, repos = swe_smith_task(tmp_path)
    error = error_of(write_row(tmp_path, {**row, "patch": ""}), repos)
    assert error.field == "patch" and "introduces the bug" in str(error)


def test_a_binary_swe_smith_bug_is_an_error_naming_the_patch(tmp_path):
    row, repos = swe_smith_task(tmp_path)
    binary = "diff --git a/x.bin b/x.bin\nindex 1..2 100644\nGIT binary patch\nliteral 1\nIcmZ?l00000\n"
    error = error_of(write_row(tmp_path, {**row, "patch": binary}), repos)
    assert error.field == "patch" and "binary" in str(error)


def test_the_inverse_of_a_patch_undoes_it_with_git(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = commit(repo, {"a.py": "x = 1\ny = 2\n", "gone.py": "old\n", "mode.sh": "echo\n"}, "base")
    (repo / "mode.sh").chmod(0o755)
    after = commit(repo, {"a.py": "x = 1\ny = 3\n", "gone.py": None, "new.py": "fresh"}, "change")
    git(repo, "mv", "a.py", "b.py")
    after = commit(repo, {}, "rename")
    patch = git(repo, "diff", "-M", base, after)
    (tmp_path / "inverse.patch").write_text(reverse_patch(patch))
    git(repo, "apply", str(tmp_path / "inverse.patch"))
    git(repo, "add", "-A")
    assert git(repo, "diff", "--cached", base) == ""


# Selection --------------------------------------------------------------------------------------------------


def test_a_contamination_window_selects_by_created_at(suite, tmp_path):
    rows = [*rows_of("swe-bench-5.jsonl"), rows_of("swe-gym.jsonl")[0]]
    suite.instances(rows, name="instances/mixed.jsonl")
    for name in ("getmoto__moto", "pallets__flask", "psf__requests"):
        (tmp_path / name).mkdir()  # collection only looks the mirrors up
    repos = f"--arena-repos={tmp_path}"
    result = suite.run("--collect-only", "-q", "--arena-arms=GOLD", repos, "--arena-created-after=2024-01-01")
    out = result.stdout.str()
    assert "getmoto__moto-7365[GOLD]" in out and "pallets__flask-4992" not in out and "2 deselected" in out
    result = suite.run("--collect-only", "-q", "--arena-arms=GOLD", repos, "-m", "created_2023_02")
    out = result.stdout.str()
    assert "pallets__flask-4992[GOLD]" in out and "getmoto" not in out and "psf__requests-2317" not in out


def test_a_created_after_that_is_not_a_date_is_a_usage_error(suite):
    suite.instances(rows_of("swe-gym.jsonl"), name="instances/gym.jsonl")
    result = suite.run("--collect-only", "--arena-created-after=June")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "'June' is not a date; expected YYYY-MM-DD" in result.stderr.str()


def test_a_swe_smith_agent_cannot_read_the_fix_from_the_workspaces_history(suite, tmp_path):
    """The bug's commit is base, and its parent the code without the bug: the workspace holds base's tree alone.

    The agent tries the parent by name and by sha (the original's sha is in the published row's image name's
    prefix and the repository's name).
    """
    row, repos = swe_smith_task(tmp_path)
    original = git(next(repos.iterdir()), "rev-parse", "main").strip()
    suite.instances([row], name="instances/swe-smith.jsonl")
    suite.arms_toml = ('[tool.swe_arena.arms.PEEK]\nkind = "command"\nshell = true\n'
                       f'command = "(git checkout HEAD~1 -- tldx/split.py; git checkout {original} -- tldx/split.py; '
                       'git cat-file -t HEAD~1); true"\n')
    suite.run(f"--arena-repos={repos}", "--arena-arms=PEEK")
    (peek,) = suite.ledger()
    assert peek["status"] == "unresolved" and peek["patch_lines"] == 0
