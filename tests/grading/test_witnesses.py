"""The verdict cannot be written by the code under test (issue 27), in every grading mode.

Each hostile patch leaves ``calc.mul`` broken and tries to make the grading say it passed: ``os._exit(0)`` on
import or at exit, a JUnit report rewritten at exit, ``PASSED`` lines forged through ``/proc/self/fd/1``, a hook
wrapper registered on pytest's live ``Config`` found through ``gc``, a stdlib-shadowing ``difflib.py`` that sets
``PYTEST_ADDOPTS``, a ``*.dist-info`` with a ``pytest11`` entry point. Each is graded as a cell is
(``grade_on_fresh_tree``: a fresh tree, the real sandbox, real pytest) in each mode it applies to: a ``verify``
command, the default JUnit runner, a SWE-bench runner with a ``log_parser``, and ``-rA`` lines. The gold patch
still resolves in every mode (the witnesses do not refuse an honest run).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.gitrepos import CALC_FIX, Project, diff_of

from pytest_swe_arena.cell.sandbox import probe_bwrap
from pytest_swe_arena.cell.workspace import RepoStore
from pytest_swe_arena.grading.tree import grade_on_fresh_tree
from pytest_swe_arena.instances.loading import build_instance

sys.path.insert(0, str(Path(__file__).parents[1] / "data" / "hostile"))
import verdict_writers as hostile  # noqa: E402
from verdict_writers import ATTACKS, MODES, TESTS  # noqa: E402

pytestmark = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")



def graded(calc: Project, root: Path, mode: str, files: dict[str, str | None]) -> tuple[Any, list[str]]:
    """Grade a patch of ``files`` on a fresh tree in a sandbox, as a cell of a row in ``mode`` is graded."""
    row = calc.row(FAIL_TO_PASS=TESTS[:1], PASS_TO_PASS=TESTS[1:], **MODES[mode])
    if "verify" not in MODES[mode]:
        del row["verify"]
    instance = build_instance(root / "i.jsonl", 1, row, None)
    store = RepoStore(root / "cache")
    objects = store.snapshot(*store.ensure_commit(instance.source, instance.repo, instance.base_commit))
    patch = diff_of(calc.repo, files).encode()
    (root / "run").mkdir()
    verdict, flags = grade_on_fresh_tree(instance, patch, objects=objects, base_commit=calc.base,
                                         root=root / "grading", run_dir=root / "run", timeout=120, sandboxed=True,
                                         template=None)
    return verdict, [flag.kind for flag in flags]


@pytest.mark.parametrize("mode", list(MODES))
def test_the_gold_patch_still_resolves_under_the_witnesses(calc, tmp_path, mode):
    verdict, flags = graded(calc, tmp_path, mode, dict(CALC_FIX))
    assert verdict.passed, (verdict.detail, (tmp_path / "run" / "verify.log").read_text())
    assert flags == []




@pytest.mark.parametrize(("attack", "mode"), [(attack, mode) for attack, (_, modes) in ATTACKS.items()
                                              for mode in modes])
def test_code_under_test_cannot_write_its_own_verdict(calc, tmp_path, attack, mode):
    files, _ = ATTACKS[attack]
    verdict, flags = graded(calc, tmp_path, mode, files)
    log = (tmp_path / "run" / "verify.log").read_text() if (tmp_path / "run" / "verify.log").is_file() else ""
    assert not verdict.passed, (verdict.detail, log)
    assert flags, verdict.detail  # a flag names what was tried, or what the witnesses saw


def test_what_loads_before_the_rules_is_taken_from_base_and_pyproject_is_read_as_toml():
    from pytest_swe_arena.grading.tree import run_config_reason

    dotted = "[tool]\npytest.ini_options.addopts = '-p calc.passer'\n"
    assert run_config_reason("pyproject.toml", None, dotted, True) == "pyproject.toml holds pytest's configuration"
    assert run_config_reason("pyproject.toml", "[project]\nname = 'calc'\n", "[project]\nname = 'x'\n", True) is None
    assert "standard library's difflib" in (run_config_reason("difflib.py", None, "", False) or "")
    assert "standard library's json" in (run_config_reason("json/__init__.py", None, "", False) or "")
    assert run_config_reason("difflib.py", "", "", True) is None  # base ships its own: its code
    assert run_config_reason("calc/difflib.py", None, "", True) is None  # not top-level: shadows nothing
    assert "entry points" in (run_config_reason("x-1.0.dist-info/entry_points.txt", None, "", False) or "")


def test_the_static_scan_names_each_reach_into_the_running_process(calc):
    from pytest_swe_arena.grading.integrity import patch_flags

    patch = diff_of(calc.repo, {"calc/ops.py": hostile.GC_HOOK_WRAPPER + hostile.FORGE_LOG_AT_EXIT,
                                "calc_helper-1.0.dist-info/entry_points.txt": hostile.DIST_INFO_ENTRY_POINTS})
    kinds = {(flag.kind, flag.path) for flag in patch_flags(patch.encode())}
    assert {("reaches_gc", "calc/ops.py"), ("reaches_atexit", "calc/ops.py"), ("reaches_exit", "calc/ops.py"),
            ("reaches_proc_self", "calc/ops.py"), ("reaches_sys", "calc/ops.py"), ("pytest_internals", "calc/ops.py"),
            ("entry_point", "calc_helper-1.0.dist-info/entry_points.txt")} <= kinds
    assert patch_flags(diff_of(calc.repo, dict(CALC_FIX)).encode()) == []


def test_a_hook_of_the_harness_interpreter_under_the_users_home_is_trusted_and_one_written_in_the_home_is_not(
        tmp_path):
    """pyenv keeps the harness's interpreter (pytest and its plugins) under ``~/.pyenv``: when the graded run's HOME
    is the user's (the suite builder's self-check), their hooks are pytest's own, not the code under test's. A
    hook file elsewhere in an untrusted HOME still is."""
    import json
    import os
    import time

    from pytest_swe_arena.grading.witnesses import judge

    pytest_file = sys.modules["_pytest.runner"].__file__
    assert pytest_file is not None
    home = Path(sys.base_prefix).parent  # a folder holding the interpreter, as ~ holds ~/.pyenv/versions/X
    planted = tmp_path / "home" / "plugin.py"
    planted.parent.mkdir()
    planted.write_text("def pytest_runtest_makereport(item, call): pass\n")
    os.utime(planted, (time.time() - 60, time.time() - 60))

    def stream(hook_file: str) -> bytes:
        records = [{"e": "start", "pid": 1}, {"e": "test", "id": "t.py::test", "when": "call", "outcome": "passed"},
                   {"e": "hooks", "impls": [{"hook": "pytest_runtest_makereport", "plugin": "p", "file": hook_file}],
                    "replaced": []},
                   {"e": "finish", "exitstatus": 0}]
        return "".join(json.dumps(record) + "\n" for record in records).encode()

    trusted = judge(stream(pytest_file), expected=True, returncode=0, statuses={"t.py::test": "passed"},
                    tree=tmp_path / "tree", untrusted=(home,), started=time.time())
    assert trusted.reason is None, trusted.reason
    planted_judgement = judge(stream(str(planted)), expected=True, returncode=0, statuses={"t.py::test": "passed"},
                              tree=tmp_path / "tree", untrusted=(planted.parent,), started=time.time())
    assert planted_judgement.reason is not None and "defined by the code under test" in planted_judgement.reason


def test_the_grading_log_is_read_up_to_its_cap_and_never_through_a_link(tmp_path):
    """The code under test writes its own log (issue 27): a log past the cap is read only up to it (a test
    recorded past it is then missing, so nothing resolves on it), and a log that is a link is not followed."""
    from pytest_swe_arena.grading.verify import read_log

    log = tmp_path / "verify.log"
    log.write_bytes(b"PASSED tests/test_ops.py::test_add\n" + b"x" * (3 << 20)
                    + b"\nPASSED tests/test_ops.py::test_mul\n")
    text = read_log(log, 0, cap=1 << 20)
    assert len(text) < (1 << 20) + 100 and "test_add" in text and "test_mul" not in text
    assert text.endswith("# the harness read only the first 1,048,576 bytes of this log\n")
    assert read_log(log, 0).endswith("test_mul\n")
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY\n")
    log.unlink()
    log.symlink_to(secret)
    assert "PRIVATE" not in read_log(log, 0) and "did not read this log" in read_log(log, 0)


@pytest.mark.parametrize("version", ["3.6", "3.9"])
def test_the_witness_runs_on_the_older_pythons_of_swe_bench_environments(tmp_path, version):
    """SWE-bench's environments (and images) run Python 3.6 to 3.9 with the pytest of their day: the plugin must
    load there and report (before, it raised at import on 3.6, for ``from __future__ import annotations``, and
    at start-up on 3.8 and 3.9, for ``entry_points(group=...)``, which is Python 3.10's: every graded run in
    such a venv failed)."""
    import subprocess
    import time

    from pytest_swe_arena.cell.venvs import EnvBuildError, find_interpreter, find_uv
    from pytest_swe_arena.grading.witnesses import channel, judge, startup_env

    try:
        interpreter, _ = find_interpreter(version)
    except EnvBuildError:
        pytest.skip(f"no Python {version} on this machine")
    uv = find_uv()
    if uv is None:
        pytest.skip("uv is not on this machine")
    venv = tmp_path / "venv"
    for step in ([uv, "venv", "-q", "-p", str(interpreter), str(venv)],
                 [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "pytest"]):
        subprocess.run(step, check=True, capture_output=True, timeout=600)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "test_x.py").write_text("def test_a():\n    assert 1\n\n\ndef test_b():\n    assert 0\n")
    started = time.time()
    with channel() as pipe:
        run = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                             cwd=tree, env=startup_env({"PATH": os.defpath}, tree, pipe.write_fd),
                             pass_fds=(pipe.write_fd,), capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    judged = judge(pipe.data(), expected=True, returncode=1, tree=tree, started=started,
                   statuses={"test_x.py::test_a": "passed", "test_x.py::test_b": "failed"})
    assert judged.reason is None, (judged.reason, pipe.data()[:2000], run.stdout + run.stderr)
    forged = judge(pipe.data(), expected=True, returncode=1, tree=tree, started=started,
                   statuses={"test_x.py::test_b": "passed"})
    assert forged.reason is not None and "the witness saw it failed" in forged.reason


def test_the_witness_reads_a_node_id_run_twice_under_the_verdicts_rules(tmp_path):
    """pytest can run one node id twice (a file given twice with ``--keep-duplicates``): the witness keeps each
    run, and the verdict's rules pick the one that stands, as for the report: SWE-bench's the last, strict the
    worst. A phase that fails still fails its own run (a teardown error after a passed call)."""
    import json
    import time

    from pytest_swe_arena.grading.rules import STRICT, SWEBENCH, GradingRules
    from pytest_swe_arena.grading.witnesses import judge

    def stream(*runs: tuple[str, str, str]) -> bytes:
        records: list[dict[str, object]] = [{"e": "start", "pid": 1}]
        for setup, call, teardown in runs:
            records += [{"e": "test", "id": "t.py::test[a b]", "when": when, "outcome": outcome}
                        for when, outcome in (("setup", setup), ("call", call), ("teardown", teardown))]
        records.append({"e": "finish", "exitstatus": 1})
        return "".join(json.dumps(record) + "\n" for record in records).encode()

    def reason(data: bytes, rules: GradingRules) -> str | None:
        return judge(data, expected=True, returncode=1, statuses={"t.py::test[a": "passed"}, tree=tmp_path,
                     started=time.time(), rules=rules).reason

    failed_then_passed = stream(("passed", "failed", "passed"), ("passed", "passed", "passed"))
    assert reason(failed_then_passed, SWEBENCH) is None
    assert "the witness saw it failed" in (reason(failed_then_passed, STRICT) or "")
    passed_then_failed = stream(("passed", "passed", "passed"), ("passed", "failed", "passed"))
    assert "the witness saw it failed" in (reason(passed_then_failed, SWEBENCH) or "")
    torn_down = stream(("passed", "failed", "passed"), ("passed", "passed", "failed"))
    assert "the witness saw it error" in (reason(torn_down, SWEBENCH) or "")


def test_pytest_graded_on_its_own_tree_believes_its_own_plugins_and_nothing_else_of_the_tree(tmp_path):
    """Grading pytest's repository runs the tree's pytest: its plugins (``src/_pytest/skipping.py``...) decide the
    reports and are the code under test, as in SWE-bench. They are believed, with a ``runner_in_tree`` flag; a hook
    elsewhere in the tree, one in pytest's package written during the run, or a ``_pytest`` folder of the tree
    when the run's pytest came from elsewhere, are still the code under test's."""
    import json
    import os
    import time

    from pytest_swe_arena.grading.witnesses import judge

    tree = tmp_path / "tree"
    runner = tree / "src" / "_pytest"
    runner.mkdir(parents=True)
    before = time.time() - 60
    for name in ("skipping.py", "runner.py"):
        (runner / name).write_text("def pytest_runtest_makereport(item, call): pass\n")
        os.utime(runner / name, (before, before))
    elsewhere = tree / "src" / "plugin.py"
    elsewhere.write_text("def pytest_runtest_makereport(item, call): pass\n")
    os.utime(elsewhere, (before, before))
    started = time.time()

    def judged(hook_files: list[Path], run_from: Path) -> Any:
        impls = [{"hook": "pytest_runtest_makereport", "plugin": path.stem, "file": str(path)} for path in hook_files]
        records = [{"e": "start", "pid": 1}, {"e": "test", "id": "t.py::test", "when": "call", "outcome": "passed"},
                   {"e": "hooks", "impls": impls, "replaced": [], "runner": str(run_from)},
                   {"e": "finish", "exitstatus": 0}]
        data = "".join(json.dumps(record) + "\n" for record in records).encode()
        return judge(data, expected=True, returncode=0, statuses={"t.py::test": "passed"}, tree=tree,
                     untrusted=(), started=started)

    own = judged([runner / "skipping.py", runner / "runner.py"], runner)
    assert own.reason is None, own.reason
    assert [flag.kind for flag in own.flags] == ["runner_in_tree"]
    planted = judged([runner / "skipping.py", elsewhere], runner)
    assert planted.reason is not None and f"in {elsewhere}" in planted.reason
    assert "skipping.py" not in planted.reason
    installed = Path(sys.modules["_pytest.runner"].__file__ or "").parent
    not_the_runner = judged([runner / "skipping.py"], installed)
    assert not_the_runner.reason is not None and "defined by the code under test" in not_the_runner.reason
    (runner / "runner.py").write_text("def pytest_runtest_makereport(item, call): pass  # rewritten by the run\n")
    os.utime(runner / "runner.py", (started + 1, started + 1))
    rewritten = judged([runner / "runner.py"], runner)
    assert rewritten.reason is not None and "runner.py" in rewritten.reason
