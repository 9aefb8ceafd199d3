"""SWE-bench rows as exported: repos found under --arena-repos, per-test grading, forged output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading

import pytest
from helpers.arena import XDIST, ledger_validator, swe_arena, write_export
from helpers.gitrepos import commit, diff_of, git, shapes_swe_bench_row

from pytest_swe_arena.cell.patches import apply_patch, extract_patch
from pytest_swe_arena.cell.workspace import RepoStore, materialize
from pytest_swe_arena.grading.verify import ContainerHost, VerifyInfrastructureError, run_verify
from pytest_swe_arena.instances.loading import build_instance

F2P = {"tests/test_text.py::test_collapse[a": "passed", "tests/test_text.py::test_strip": "passed"}
P2P = {"tests/test_text.py::test_lower": "passed", "tests/test_text.py::test_collapse[X-x]": "passed",
       "tests/test_other.py::test_stable": "passed", "tests/test_other.py::test_in_cell_venv": "passed"}


@pytest.fixture
def shapes(tmp_path_factory):
    return shapes_swe_bench_row(tmp_path_factory.mktemp("repos"))


@pytest.mark.parametrize("xdist", XDIST)
def test_exported_rows_grade_per_test_gold_resolved_empty_unresolved(suite, shapes, xdist):
    row, repo = shapes
    assert isinstance(row["FAIL_TO_PASS"], str) and "verify" not in row and "source" not in row
    write_export(suite, [row])
    result = suite.run(f"--arena-repos={repo.parent}", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    gold, empty = sorted(suite.ledger(), key=lambda r: r["arm"] != "GOLD")
    validator = ledger_validator()
    for ledger_row in (gold, empty):
        validator.validate(ledger_row)
    assert gold["status"] == "resolved" and gold["error"] is None
    # pytest exits 1 (test_needs_network fails before and after the fix, in neither list): per-test grading
    # from pytest's own report still resolves, as SWE-bench grades.
    assert gold["verify"]["returncode"] == 1
    assert gold["verify"]["tests"] == {"FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P, "report": "junitxml",
                                       "failing": []}
    assert empty["status"] == "unresolved"
    assert empty["verify"]["tests"]["FAIL_TO_PASS"] == {test_id: "failed" for test_id in F2P}
    assert empty["verify"]["tests"]["failing"] == sorted(F2P)  # what SWE-bench's report counts as failing
    assert empty["verify"]["tests"]["PASS_TO_PASS"] == P2P
    out = suite.path / "arena-out"
    assert (out / gold["run_dir"] / "verify-junit.xml").is_file()
    assert "PASSED tests/test_text.py::test_collapse[a  b-a b]" in (out / gold["run_dir"] / "verify.log").read_text()


def test_repos_are_found_as_owner_slash_name_bare_mirrors(suite, shapes, tmp_path):
    row, repo = shapes
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(tmp_path / "mirrors/acme/shapes.git"))
    suite.instances([row], name="instances/lite.jsonl")
    result = suite.run(f"--arena-repos={tmp_path / 'mirrors'}", "--arena-arms=GOLD")
    result.assert_outcomes(passed=1)

    result = suite.run(f"--arena-repos={tmp_path / 'nowhere'}", "--arena-arms=GOLD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*lite.jsonl:1: repository 'acme/shapes' is not under --arena-repos (looked for "
                                 "*/nowhere/acme__shapes, */nowhere/acme/shapes); make its mirror with `swe-arena "
                                 f"mirror --arena-repos {tmp_path / 'nowhere'} https://github.com/acme/shapes`*"])


@pytest.mark.parametrize("xdist", XDIST)
def test_rows_deselected_by_k_need_no_mirror_and_swe_arena_mirror_makes_one(suite, shapes, tmp_path, xdist):
    row, repo = shapes
    remote = tmp_path / "remote/acme/shapes.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    mirrors = tmp_path / "mirrors"
    made = swe_arena("mirror", "--arena-repos", mirrors, f"file://{remote}")
    assert made.returncode == 0, made.stderr
    assert made.stdout == f"made {mirrors / 'acme__shapes.git'}\n"
    assert git(mirrors / "acme__shapes.git", "rev-parse", "--is-bare-repository").strip() == "true"
    again = swe_arena("mirror", "--arena-repos", mirrors, f"file://{remote}")
    assert again.stdout == f"updated {mirrors / 'acme__shapes.git'}\n", "an existing mirror is fetched again"
    other = {**row, "instance_id": "globex__widgets-7", "repo": "globex/widgets"}
    write_export(suite, [row, other])
    selected = suite.run(f"--arena-repos={mirrors}", "--arena-arms=EMPTY", "-k", "shapes", *xdist)
    selected.assert_outcomes(failed=1)
    assert [r["instance_id"] for r in suite.ledger()] == [row["instance_id"]]
    everything = suite.run(f"--arena-repos={mirrors}", "--arena-arms=EMPTY", "--arena-out=all", *xdist)
    assert everything.ret == pytest.ExitCode.USAGE_ERROR
    # Without xdist a usage error; with it the controller's, after the workers collected: pytest.exit's.
    pytest.LineMatcher((everything.stderr.str() + "\n" + everything.stdout.str()).splitlines()).fnmatch_lines([
        "*1 selected repository(ies) missing (deselect their rows with -k or -m, or make their mirrors):",
        "*swe-bench-lite.json:*: repository 'globex/widgets' is not under --arena-repos *; make its mirror with "
        f"`swe-arena mirror --arena-repos {mirrors} https://github.com/globex/widgets`*"])
    assert not (suite.path / "all" / "ledger.jsonl").exists(), "no cell ran"


def test_swe_arena_mirror_takes_a_local_clone_and_names_what_it_cannot_mirror(tmp_path, shapes):
    _, repo = shapes
    clone = tmp_path / "work/shapes"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "remote", "set-url", "origin", "https://github.com/acme/shapes.git")
    made = swe_arena("mirror", "--arena-repos", tmp_path / "m", clone)
    assert made.returncode == 0 and made.stdout == f"made {tmp_path / 'm/acme__shapes.git'}\n", made.stderr
    named = swe_arena("mirror", "--arena-repos", tmp_path / "m", "--repo", "acme/other", repo)
    assert named.returncode == 0 and (tmp_path / "m/acme__other.git").is_dir(), named.stderr
    git(clone, "remote", "remove", "origin")
    bad = swe_arena("mirror", "--arena-repos", tmp_path / "m2", clone, tmp_path / "nowhere")
    assert bad.returncode == 1
    assert f"swe-arena: {clone}: a clone without an 'origin' remote does not say which repository it is; give it " \
           "with --repo OWNER/NAME" in bad.stderr
    assert f"swe-arena: {tmp_path / 'nowhere'}: not a URL and no such directory" in bad.stderr


FORGER_CONFTEST = '''
from pytest_swe_arena.arms.base import ArmResult
from pytest_swe_arena.spend.usage import Usage

FORGERY = """
import atexit
import os

from .text import normalize

_IDS = {ids!r}


def _claim_every_test_passed():
    # After pytest has stopped capturing: these lines reach the runner's real output.
    os.write(1, "".join("PASSED " + test_id + "\\\\n" for test_id in _IDS).encode())
    os.write(1, b"==== 6 passed in 0.01s ====\\\\n")


atexit.register(_claim_every_test_passed)
"""


class ForgerArm:
    """Does not fix the bug; makes the test run print PASSED for every recorded test instead."""

    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        instance = request.instance
        ids = [*instance.fail_to_pass, *instance.pass_to_pass, "tests/test_text.py::test_collapse[a  b-a b]"]
        (request.workspace.path / "shapes" / "__init__.py").write_text(FORGERY.format(ids=ids))
        return ArmResult(usage=Usage.no_model())


def pytest_arena_arm_kinds():
    return {"forger": ForgerArm}
'''


@pytest.mark.parametrize("test_cmd", [None, "python -m pytest -rA -p no:cacheprovider"], ids=["junitxml", "output"])
def test_forged_passed_lines_with_a_failing_exit_are_unresolved(suite, shapes, test_cmd):
    row, repo = shapes
    if test_cmd:
        row = {**row, "test_cmd": test_cmd}
    write_export(suite, [row])
    suite.pytester.makeconftest(FORGER_CONFTEST)
    suite.arms_toml = '[tool.swe_arena.arms.FORGE]\nkind = "forger"\n'
    result = suite.run(f"--arena-repos={repo.parent}", "--arena-arms=FORGE")
    result.assert_outcomes(failed=1)
    [ledger_row] = suite.ledger()
    log = (suite.path / "arena-out" / ledger_row["run_dir"] / "verify.log").read_text()
    assert "PASSED tests/test_text.py::test_strip" in log  # the forgery did print
    assert ledger_row["status"] == "unresolved" and ledger_row["verify"]["returncode"] == 1
    tests = ledger_row["verify"]["tests"]
    assert tests["report"] == ("output" if test_cmd else "junitxml")
    if test_cmd:
        # Printed lines are read as SWE-bench's harness reads them (its rules: the last line under an id stands),
        # so the forged lines, printed last, give the statuses; but printed statuses are believed only with exit 0,
        # and the witness saw the tests fail.
        assert tests["FAIL_TO_PASS"] == {test_id: "passed" for test_id in F2P}
        assert "log not believed: the runner exited 1 (printed statuses need 0)" in ledger_row["error"]
        assert "witnesses disagree" in ledger_row["error"] and "the witness saw it failed" in ledger_row["error"]
    else:
        assert tests["FAIL_TO_PASS"] == {test_id: "failed" for test_id in F2P}
        assert "2 of 6 recorded tests not passing" in ledger_row["error"]


def test_tests_missing_from_the_report_do_not_resolve(suite, shapes):
    row, repo = shapes
    ghost = "tests/test_text.py::test_that_was_never_written"
    row = {**row, "PASS_TO_PASS": json.dumps([*json.loads(row["PASS_TO_PASS"]), ghost])}
    write_export(suite, [row])
    result = suite.run(f"--arena-repos={repo.parent}", "--arena-arms=GOLD")
    result.assert_outcomes(failed=1)
    [ledger_row] = suite.ledger()
    assert ledger_row["verify"]["tests"]["PASS_TO_PASS"][ghost] == "missing"
    assert ledger_row["error"] == f"1 of 7 recorded tests not passing: {ghost} (missing)"


@pytest.mark.parametrize("verify_on", ["patch", "workspace"])
def test_arm_edits_to_a_non_test_file_that_test_patch_touches_do_not_count(calc, tmp_path, verify_on):
    # test_patch changes checks.py, which no exclude glob covers (as pytest's testing/python/collect.py).
    commit(calc.repo, {"checks.py": "from calc import mul\nassert mul(2, 2) == 4\n"}, "checks")
    test_patch = diff_of(calc.repo, {"checks.py": "from calc import mul\nassert mul(3, 4) == 12\n"})
    row = calc.row(base_commit=git(calc.repo, "rev-parse", "HEAD").strip(), test_patch=test_patch,
                   verify="python checks.py")
    instance = build_instance(tmp_path / "i.jsonl", 1, row, None)
    verdicts = {}
    for fix in (False, True):
        workspace = materialize(instance, RepoStore(tmp_path / "cache"), tmp_path / f"ws-{fix}")
        (workspace.path / "checks.py").write_text("print('nothing to check')\n")
        if fix:
            apply_patch(workspace, calc.patch, "the fix")
        patch = extract_patch(workspace)
        assert b"checks.py" in patch
        verdicts[fix] = run_verify(workspace, instance, patch, verify_on=verify_on, env=dict(os.environ),
                                   log=tmp_path / f"run-{fix}" / "verify.log", timeout=600)
    # test_patch applied over base's checks.py, not the arm's: graded on it, never a harness error.
    assert not verdicts[False].passed and verdicts[False].detail == "verify exited 1"
    assert verdicts[True].passed


BROKEN_ARMS_CONFTEST = '''
import shutil

from pytest_swe_arena.arms.base import ArmResult


class RaisingArm:
    """Starts work (may have spent tokens), then raises something unexpected."""

    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        (request.workspace.path / "calc" / "ops.py").write_text("half done\\n")
        raise RuntimeError("agent SDK blew up")


class JammingArm:
    """Gives up, leaving the workspace's git index corrupt: the harness reads the tree with its own index."""

    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        (request.workspace.path / "calc" / "ops.py").write_text("half done\\n")
        (request.workspace.path / ".git" / "index").write_text("not an index")
        return ArmResult(status="arm_error", error="agent gave up")


class VanishingArm:
    """Gives up, and takes its workspace with it, so no patch can be taken."""

    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        shutil.rmtree(request.workspace.path)
        return ArmResult(status="arm_error", error="agent gave up")


def pytest_arena_arm_kinds():
    return {"raising": RaisingArm, "jamming": JammingArm, "vanishing": VanishingArm}
'''


def test_an_arm_that_raised_has_unknown_usage_and_a_failed_extraction_keeps_the_arm_status(suite, calc):
    suite.instances([calc.row()])
    suite.pytester.makeconftest(BROKEN_ARMS_CONFTEST)
    suite.arms_toml = ('[tool.swe_arena.arms.RAISE]\nkind = "raising"\n'
                       '[tool.swe_arena.arms.JAM]\nkind = "jamming"\n'
                       '[tool.swe_arena.arms.GONE]\nkind = "vanishing"\n')
    result = suite.run("--arena-arms=RAISE,JAM,GONE")
    result.assert_outcomes(failed=2, errors=1)
    rows = {row["arm"]: row for row in suite.ledger()}
    raised = rows["RAISE"]
    assert raised["status"] == "harness_error" and "agent SDK blew up" in raised["error"]
    # Started, so it may have spent: unknown, not "never ran" ($0).
    assert raised["usage"]["cost_source"] == "unknown"
    assert {key: value for key, value in raised["usage"].items() if key != "cost_source"} == {
        "input_tokens": None, "output_tokens": None, "reasoning_tokens": None, "cache_read_tokens": None,
        "cache_write_tokens": None, "steps": None, "max_context_tokens": None, "cost_usd": None}
    jammed = rows["JAM"]
    assert jammed["status"] == "arm_error" and jammed["error"] == "agent gave up"
    # the agent's own git index does not decide what it changed: the harness reads the tree with its own
    assert "+half done" in (suite.path / "arena-out" / jammed["run_dir"] / "partial.patch").read_text()
    gone = rows["GONE"]
    assert gone["status"] == "arm_error"
    assert gone["error"].startswith("agent gave up; patch extraction also failed: "), gone["error"]


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """A small testbed image (bash, this machine's Python and pytest) and its engine; skipped where none answers."""
    from helpers.testbed_image import calc_testbed_image

    yield from calc_testbed_image(tmp_path_factory, "verify")


def verify_in(image, tmp_path, verify, host_image=None, timeout=600):
    engine, tag, project = image
    instance = build_instance(tmp_path / "i.jsonl", 1, project.row(verify=verify, test_patch=""), None)
    workspace = materialize(instance, RepoStore(tmp_path / "cache"), tmp_path / "ws")
    result = run_verify(workspace, instance, "", verify_on="workspace", env=dict(os.environ),
                        log=tmp_path / "run" / "verify.log", timeout=timeout,
                        host=ContainerHost(engine, host_image or tag))
    return workspace, result


def test_verify_in_an_image_may_write_the_workspace_and_the_files_stay_ours(image, tmp_path):
    # The image has bash and Python only: no mkdir, no touch.
    write = "python -c \"import os; os.mkdir('result_images')\" && : > result_images/a.png"
    workspace, result = verify_in(image, tmp_path, write)
    assert result.passed, (tmp_path / "run" / "verify.log").read_text()
    written = workspace.path / "result_images" / "a.png"
    assert written.is_file() and written.stat().st_uid == os.getuid()


def test_an_engine_that_cannot_run_the_container_is_an_infrastructure_error(image, tmp_path):
    engine, _, _ = image
    with pytest.raises(VerifyInfrastructureError, match=rf"`{engine} run localhost/swe-arena-test/absent:none` "
                                                        r"failed \(exit 125, the engine could not run"):
        verify_in(image, tmp_path, "true", host_image="localhost/swe-arena-test/absent:none")


def imported_image(engine, root, tag):
    """An image made of the files under ``root`` (no registry), removed by the caller."""
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run([engine, "import", "-", tag], stdin=tar.stdout, capture_output=True, check=True)
    tar.wait()
    return tag


@pytest.mark.parametrize(("broken", "exit_status", "why"), [
    ("no shell", 127, "the command was not found in the image"),
    ("/testbed is a file", 126, "the command could not be invoked"),
])
def test_an_image_that_cannot_start_the_command_is_an_infrastructure_error(image, tmp_path, broken, exit_status,
                                                                           why):
    engine, _, _ = image
    root = tmp_path / "rootfs"
    (root / "arena-run").mkdir(parents=True)
    if broken == "no shell":
        (root / "testbed").mkdir()
    else:
        (root / "testbed").write_text("not a directory: the workspace cannot be mounted there\n")
    tag = imported_image(engine, root, f"localhost/swe-arena-test/broken-{exit_status}:{os.getpid()}")
    try:
        expected = rf"`{engine} run {tag}` failed \(exit {exit_status}, {why}\)"
        with pytest.raises(VerifyInfrastructureError, match=expected):
            verify_in(image, tmp_path, "true", host_image=tag)
    finally:
        subprocess.run([engine, "rmi", "--force", tag], capture_output=True, check=False)


@pytest.mark.parametrize("exit_status", [125, 126, 127])
def test_a_command_that_exits_like_the_engine_is_graded_not_a_harness_error(image, tmp_path, exit_status):
    # The command started (its shell said so before it ran): its exit status is a verdict, whatever the number.
    _, result = verify_in(image, tmp_path, f"exit {exit_status}")
    assert not result.passed and result.returncode == exit_status


class Interrupted(Exception):
    pass


def test_an_exception_while_verify_runs_in_a_container_removes_the_container(image, tmp_path):
    # As pytest-timeout's signal method does: an exception raised from a signal handler mid-run.
    engine, tag, _ = image

    def interrupt(signum, frame):
        raise Interrupted

    started, done = tmp_path / "run" / "started", threading.Event()

    def alarm_once_the_container_runs() -> None:
        while not started.is_file():
            if done.wait(0.05):
                return
        os.kill(os.getpid(), signal.SIGALRM)

    previous = signal.signal(signal.SIGALRM, interrupt)
    alarm = threading.Thread(target=alarm_once_the_container_runs, daemon=True)
    alarm.start()
    try:
        with pytest.raises(Interrupted):
            verify_in(image, tmp_path, ": > /arena-run/started; python -c 'import time; time.sleep(120)'")
    finally:
        done.set()
        alarm.join()
        signal.signal(signal.SIGALRM, previous)
    assert (tmp_path / "run" / "started").is_file()  # the container was running when interrupted
    left = subprocess.run([engine, "ps", "--all", "--quiet", "--filter", f"ancestor={tag}"], capture_output=True,
                          text=True, check=True).stdout
    assert left.strip() == ""
