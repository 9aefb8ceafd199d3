"""Where a cell is graded: lay out the tree, run verify or the recorded tests, decide resolved or not.

Verification grades the arm's patch (default) or the workspace as left.

Patch mode resets the workspace to base and applies only the extracted patch;
workspace mode keeps the tree as the arm left it. Both then restore the files
``test_patch`` touches to base and apply it, so an arm that edited those files
(tests, or helpers ``test_patch`` changes) cannot change its grade. Without a
``verify`` command the FAIL_TO_PASS and PASS_TO_PASS tests are graded one by
one: for a repository SWE-bench knows (or a row with ``eval_script`` / ``log_parser``) with
SWE-bench's runner, its log parser and ``rules`` (``run_repo_runner``); otherwise with the
harness's pytest runner and its JUnit XML (``runners`` runs them, ``parsers`` reads their
statuses). Either way ``rules`` decides the verdict, under the run's rule set (``--arena-grading-rules``),
and the witnesses check it under the same rules. ``graded_status`` turns the verdict into the cell's status.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import crossing
from ..cell import processes
from ..cell.patches import PatchApplyError, apply_patch, files_touched, restore_from_base
from ..cell.venvs import shell_argv
from ..cell.workspace import Workspace, reset_to_base
from ..instances.model import Instance
from ..outcome import CellStatus
from .integrity import IntegrityFlag
from .parsers import parse_junitxml, parse_output, read_results
from .rules import SWEBENCH, GradingRules, Report, Verdict, verdict_on_run
from .runners import (
    Runner,
    RunnerChoiceError,
    ToxEnvNameError,
    prepare_tox_current_env,
    runner_command,
    runner_for_row,
    test_files,
    uses_junitxml,
)
from .witnesses import WITNESS_DIR, channel, judge, recorded_statuses, runs_pytest, startup_env

if TYPE_CHECKING:
    from ..cell.sandbox import Sandbox


class VerifyInfrastructureError(Exception):
    """Verification could not run (not a verdict on the patch): a harness error."""


@dataclass(frozen=True)
class VerifyResult:
    """The verdict: ``passed`` decides resolved vs unresolved."""

    passed: bool
    returncode: int | None
    timed_out: bool
    seconds: float
    #: Per-test statuses when the instance is graded test by test.
    tests: Mapping[str, Any] | None = field(default=None)
    detail: str = ""
    #: What the witnesses flagged (``witnesses.judge``): goes to the row's ``details.integrity``.
    integrity: tuple[IntegrityFlag, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The row's ``verify``."""
        return {"passed": self.passed, "returncode": self.returncode, "timed_out": self.timed_out,
                "seconds": round(self.seconds, 3), "tests": self.tests}


def graded_status(verdict: VerifyResult, patch: bytes) -> tuple[CellStatus, str | None]:
    """Where a cell is graded: resolved when verify passed on its patch, and the patch is not empty.

    An empty patch is verified (its verdict is recorded) but never resolves: EMPTY must not.
    """
    if not patch.strip():
        return CellStatus.UNRESOLVED, "empty patch"
    if verdict.passed:
        return CellStatus.RESOLVED, None
    return CellStatus.UNRESOLVED, verdict.detail


def prepare_tree(workspace: Workspace, instance: Instance, patch: bytes | str, verify_on: str) -> None:
    """Lay out the tree verify runs on; raise ``VerifyInfrastructureError`` if it cannot."""
    try:
        if verify_on == "patch":
            reset_to_base(workspace)
            apply_patch(workspace, patch, "the extracted patch")
        if instance.test_patch:
            # The patch may edit a file test_patch touches that is not test-named (pytest's
            # testing/python/collect.py): test_patch's version of it is what is graded. On a tree
            # just reset to base, only the files the patch also touches can differ from base.
            touched = files_touched(instance.test_patch)
            if verify_on == "patch":
                patched = set(files_touched(patch))
                touched = [path for path in touched if path in patched]
            restore_from_base(workspace, touched)
            apply_patch(workspace, instance.test_patch, f"test_patch of {instance.instance_id}")
    except PatchApplyError as error:
        raise VerifyInfrastructureError(str(error)) from None


#: The exit statuses of ``docker run`` / ``podman run`` when the engine could not run the command: 125 the
#: engine failed (no image, no daemon...), 126 the command could not be invoked (the OCI runtime's
#: permission errors), 127 it was not found. The command itself can exit with them too, so they are the
#: engine's only when the command never started (``ContainerHost.started``).
ENGINE_FAILURES = {125: "the engine could not run the container", 126: "the command could not be invoked",
                   127: "the command was not found in the image"}


#: Where the code under test can write inside an image, besides /testbed: a hook defined in a file there is its.
#: Not the image's HOME (/root), which may hold its interpreter (pyenv); a file written anywhere during the run is
#: refused by its time (``witnesses.judge``).
IMAGE_WRITABLE = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/run"), Path("/arena-run"))
#: The descriptor the witness's pipe has inside the container (``podman run --preserve-fds 1`` passes fd 3).
IMAGE_WITNESS_FD = 3


@dataclass(frozen=True)
class ContainerHost:
    """Runs verify inside the instance's image: workspace at /testbed (writable), no network."""

    engine: str
    image: str

    @property
    def carries_fds(self) -> bool:
        """Whether the engine passes a descriptor of its client into the container (``podman run --preserve-fds``;
        docker's client only talks to its daemon, which starts the container: it cannot)."""
        return Path(self.engine).name == "podman"

    @staticmethod
    def started(nonce: str) -> str:
        """The line the container's shell prints before the command: once in the log, the command has started.

        Printed to the log (the engine's output, which the command cannot take back), with a nonce per run, so
        a command that exits 125-127 itself is never taken for the engine failing.
        """
        return f"arena: verify command started {nonce}"

    def argv(self, command: str, workspace: Path, run_dir: Path, name: str, nonce: str = "",
             witness_fd: int | None = None) -> list[str]:
        """The engine's command line; with ``witness_fd`` (an engine that ``carries_fds``), the run gets the harness's
        start-up rules and its witness (``witnesses.startup_env``), the plugin's folder shown read-only at its own
        path and the pipe's write end, ``witness_fd`` in the client, as fd 3 in the container."""
        witness: list[str] = []
        if witness_fd is not None:
            witness = ["--preserve-fds", "1", "--volume", f"{WITNESS_DIR}:{WITNESS_DIR}:ro"]
            for variable, value in startup_env({}, Path("/testbed"), IMAGE_WITNESS_FD).items():
                witness += ["--env", f"{variable}={value}"]
        # SWE-bench images keep their Python in the conda env "testbed"; activate it when it is there.
        activate = "if [ -f /opt/miniconda3/bin/activate ]; then . /opt/miniconda3/bin/activate testbed; fi; "
        # Test suites write into the tree (matplotlib's result images...). Docker runs as the image's user,
        # root: run as ours so the workspace stays ours. Rootless podman maps its root to us already.
        user = ["--user", f"{os.getuid()}:{os.getgid()}"] if Path(self.engine).name == "docker" else []
        argv = [self.engine, "run", "--rm", "--pull", "never", "--name", name, "--network", "none", *user,
                "--volume", f"{workspace}:/testbed", "--volume", f"{run_dir}:/arena-run", *witness,
                "--workdir", "/testbed", "--env", "PYTHONDONTWRITEBYTECODE=1",
                self.image, "bash", "-lc", f"echo '{self.started(nonce)}'; " + activate + command]
        if witness_fd is None or witness_fd == IMAGE_WITNESS_FD:
            return argv
        # The engine passes fds 3.. of its own: the pipe's end is moved there by a shell that then becomes the client
        # (bash: dash takes no descriptor above 9).
        moved = f'exec "$@" {IMAGE_WITNESS_FD}>&{witness_fd} {witness_fd}>&-'
        return [shutil.which("bash") or "/bin/bash", "-c", moved, "bash", *argv]

    def path(self, host_path: Path, run_dir: Path) -> str:
        return "/arena-run/" + host_path.relative_to(run_dir).as_posix()


#: The most of a grading log read to grade it: what the tests print past it is not read (a test recorded only
#: there is then missing, so the cell is not resolved: the cap fails closed).
LOG_CAP = 64 * 1024 * 1024


def read_log(log: Path, start: int, cap: int = LOG_CAP) -> str:
    """The run's log from byte ``start``, through the crossing: the code under test can write where its log is,
    so a link in its place is not followed (its text is then the refusal, which grades nothing). At most ``cap``
    bytes are read; a longer log ends with a line saying so."""
    try:
        with crossing.reading(log.parent, log.name) as handle:
            handle.seek(start)
            data = handle.read(cap + 1)
    except OSError as error:
        return f"# the harness did not read this log: {crossing.shown(str(error))}\n"
    text = data[:cap].decode("utf-8", errors="replace")
    if len(data) > cap:
        text += f"\n# the harness read only the first {cap:,} bytes of this log\n"
    return text


def _run(host: ContainerHost | None, command: str, workspace: Path, log: Path, env: Mapping[str, str],
         timeout: float, sandbox: Sandbox | None = None, pass_fds: tuple[int, ...] = ()) -> processes.ProcessResult:
    """Run a shell command in the workspace, here (in ``sandbox`` if given) or inside the instance's image.

    In a sandbox, every process the command started is gone when this returns (its pid namespace ended).
    """
    if host is None:
        argv = shell_argv(command)
        if sandbox is not None:
            argv = sandbox.wrap(argv, workspace)
        return processes.run(argv, cwd=workspace, env=env, stdout=log, timeout=timeout, pass_fds=pass_fds)
    name = f"arena-verify-{uuid.uuid4().hex[:12]}"
    nonce = uuid.uuid4().hex
    size = log.stat().st_size if log.is_file() else 0
    exited = False
    try:
        # The engine client gets the harness's environment (its config and credentials), not the cell's.
        witness_fd = pass_fds[0] if pass_fds else None
        result = processes.run(host.argv(command, workspace, log.parent, name, nonce, witness_fd), cwd=workspace,
                               env=dict(os.environ), stdout=log, timeout=timeout, pass_fds=pass_fds)
        exited = result.returncode is not None
    finally:
        if not exited:
            # Killing the client (timeout, Ctrl-C, pytest-timeout's exception) does not stop the container.
            subprocess.run([host.engine, "rm", "--force", name], capture_output=True, check=False)
    engine_failure = ENGINE_FAILURES.get(result.returncode) if result.returncode is not None else None
    if engine_failure is not None:
        said = read_log(log, size)
        if host.started(nonce) not in said:
            raise VerifyInfrastructureError(
                f"`{host.engine} run {host.image}` failed (exit {result.returncode}, {engine_failure}): "
                f"{' '.join(said.split())[-500:]}")
    return result


@dataclass(frozen=True)
class Witnessed:
    """A graded run's witness stream, and what judging it needs."""

    data: bytes
    overflow: bool
    started: float
    expected: bool
    tree: Path
    untrusted: tuple[Path, ...]
    #: Run inside an image: its files are judged as the run saw them (``witnesses.judge``).
    inside_image: bool = False
    #: (source, place) the sandbox bound read-only (``SandboxPolicy.read_only_at``): a hook's file there is source's.
    shown_at: tuple[tuple[Path, Path], ...] = ()

    def check(self, verdict: VerifyResult, rules: GradingRules) -> VerifyResult:
        """The verdict, unresolved when the witnesses disagree with it (read under ``rules``), with their flags."""
        judgement = judge(self.data, expected=self.expected, returncode=verdict.returncode,
                          statuses=recorded_statuses(verdict.tests), tree=self.tree, untrusted=self.untrusted,
                          started=self.started, overflow=self.overflow, inside_image=self.inside_image, rules=rules,
                          shown_at=self.shown_at)
        if judgement.reason is None or verdict.timed_out:
            return dataclasses.replace(verdict, integrity=judgement.flags)
        detail = judgement.reason if verdict.passed else f"{verdict.detail}; {judgement.reason}"
        return dataclasses.replace(verdict, passed=False, detail=detail, integrity=judgement.flags)


def _run_witnessed(host: ContainerHost | None, command: str, workspace: Path, log: Path, env: Mapping[str, str],
                   timeout: float, sandbox: Sandbox | None) -> tuple[processes.ProcessResult, Witnessed | None]:
    """Run the graded command with the harness's start-up rules and its witness (``witnesses``).

    Inside an image (``host``) the same, where the engine carries the pipe in (``ContainerHost.carries_fds``: podman);
    with docker the run has neither.
    """
    if host is not None and not host.carries_fds:
        return _run(host, command, workspace, log, env, timeout, sandbox), None
    if sandbox is not None:
        sandbox = sandbox.showing(WITNESS_DIR)
    untrusted = (IMAGE_WRITABLE if host is not None
                 else tuple(Path(env[name]) for name in ("HOME", "TMPDIR") if env.get(name)))
    with channel() as pipe:
        started = time.time()
        result = _run(host, command, workspace, log, startup_env(env, workspace, pipe.write_fd), timeout, sandbox,
                      pass_fds=(pipe.write_fd,))
    tree = Path("/testbed") if host is not None else workspace
    return result, Witnessed(pipe.data(), pipe.overflow, started, runs_pytest(command), tree, untrusted,
                             inside_image=host is not None,
                             shown_at=sandbox.policy.read_only_at if sandbox is not None else ())


def run_verify(
    workspace: Workspace,
    instance: Instance,
    patch: bytes | str,
    *,
    verify_on: str,
    env: Mapping[str, str],
    log: Path,
    timeout: float,
    host: ContainerHost | None = None,
    sandbox: Sandbox | None = None,
    rules: GradingRules = SWEBENCH,
) -> VerifyResult:
    """Prepare the tree and run the instance's verify command (exit 0 = pass), or grade it test by test.

    :param host: run inside the instance's image instead of on this machine.
    :param sandbox: run in it (the code run is the arm's, on the arm's tree).
    :param rules: how a SWE-bench runner's results are graded (``rules``).
    """
    prepare_tree(workspace, instance, patch, verify_on)
    return run_checks(workspace, instance, env=env, log=log, timeout=timeout, host=host, sandbox=sandbox,
                      rules=rules)


def run_checks(workspace: Workspace, instance: Instance, *, env: Mapping[str, str], log: Path, timeout: float,
               host: ContainerHost | None = None, sandbox: Sandbox | None = None,
               rules: GradingRules = SWEBENCH) -> VerifyResult:
    """Run the instance's verify command (exit 0 = pass), or grade its tests one by one, on a laid-out tree."""
    if not instance.verify:
        runner = repo_runner(instance)
        if runner is not None:
            return run_repo_runner(workspace, instance, runner, rules, env=env, log=log, timeout=timeout, host=host,
                                   sandbox=sandbox)
        return run_tests(workspace, instance, rules, env=env, log=log, timeout=timeout, host=host, sandbox=sandbox)
    # A verify command that runs pytest is witnessed; any other is graded on its exit status alone.
    result, witnessed = _run_witnessed(host, instance.verify, workspace.path, log, env, timeout, sandbox)
    detail = f"verify timed out after {timeout:g}s" if result.timed_out else f"verify exited {result.returncode}"
    verdict = VerifyResult(
        passed=result.returncode == 0,
        returncode=result.returncode,
        timed_out=result.timed_out,
        seconds=result.seconds,
        detail=detail,
    )
    return witnessed.check(verdict, rules) if witnessed is not None else verdict


def run_tests(workspace: Workspace, instance: Instance, rules: GradingRules, *, env: Mapping[str, str], log: Path,
              timeout: float, host: ContainerHost | None = None, sandbox: Sandbox | None = None) -> VerifyResult:
    """Run the test files of FAIL_TO_PASS / PASS_TO_PASS and grade each recorded test under ``rules``."""
    recorded = [*instance.fail_to_pass, *instance.pass_to_pass]
    files = test_files(recorded, instance.test_patch, workspace.path)
    if not files:
        raise VerifyInfrastructureError(
            f"{instance.instance_id}: no test files to run: FAIL_TO_PASS/PASS_TO_PASS ids name none that exist "
            "and test_patch touches no .py file; give a 'verify' command or a 'test_cmd'"
        )
    report_file = log.parent / "verify-junit.xml"
    report_file.unlink(missing_ok=True)
    report_path = host.path(report_file, log.parent) if host is not None else str(report_file)
    command = runner_command(instance.test_cmd, files, report_path, workspace.path)
    log.parent.mkdir(parents=True, exist_ok=True)
    result, witnessed = _run_witnessed(host, command, workspace.path, log, env, timeout, sandbox)
    report: Report
    if uses_junitxml(instance.test_cmd):
        # A missing report (the runner died, or was made to exit early) leaves every test missing.
        try:
            with crossing.reading(report_file.parent, report_file.name) as handle:
                parsed = parse_junitxml(handle, files)
        except OSError:  # not written, or swapped for a link by the code under test: not read
            parsed = None
        results, report = parsed or [], "junitxml"
    else:
        results, report = parse_output(read_log(log, 0)), "output"
    verdict = verdict_on_run(results, instance.fail_to_pass, instance.pass_to_pass, result.returncode, rules,
                             _tree_as_run(workspace, host), report)
    tests = verdict.to_json(rules) | ({} if rules == SWEBENCH else {"rules": rules.name})
    return _graded(verdict, rules, result, tests, timeout, len(recorded), witnessed)


def _tree_as_run(workspace: Workspace, host: ContainerHost | None) -> str:
    """The tree's path as the tests saw it (``rules.GradingRules.tree_paths``): the sandbox binds the workspace at
    its own path, an image has it at /testbed."""
    return "/testbed" if host is not None else str(workspace.path)


def _graded(verdict: Verdict, rules: GradingRules, result: processes.ProcessResult, tests: dict[str, object],
            timeout: float, recorded: int, witnessed: Witnessed | None, passing: str = "") -> VerifyResult:
    """The run's result from its verdict, checked by its witnesses when it had them."""
    passed = verdict.resolved and not result.timed_out
    failing = verdict.failing(rules)
    if result.timed_out:
        detail = f"tests timed out after {timeout:g}s"
    elif passed:
        detail = f"all {recorded} recorded tests passed{passing}"
    elif failing:
        detail = (f"{len(failing)} of {recorded} recorded tests not passing: {', '.join(failing[:5])}"
                  + (" ..." if len(failing) > 5 else ""))
    else:
        detail = f"log not believed: {verdict.rejected}"
    graded = VerifyResult(passed=passed, returncode=result.returncode, timed_out=result.timed_out,
                          seconds=result.seconds, tests=tests, detail=detail)
    return witnessed.check(graded, rules) if witnessed is not None else graded


def repo_runner(instance: Instance) -> Runner | None:
    """SWE-bench's runner for the row (its repo, ``eval_script``, ``test_cmd`` + ``log_parser``), or None."""
    try:
        return runner_for_row(instance.row)
    except RunnerChoiceError as error:  # loading checks it first; a row built in code may not have been
        raise VerifyInfrastructureError(f"{instance.instance_id}: field {error.field!r}: {error}") from None


def run_repo_runner(workspace: Workspace, instance: Instance, runner: Runner, rules: GradingRules, *,
                    env: Mapping[str, str], log: Path, timeout: float,
                    host: ContainerHost | None = None, sandbox: Sandbox | None = None) -> VerifyResult:
    """Run SWE-bench's test command for the row and grade its log as SWE-bench 5.0.2 does (``rules``)."""
    recorded = [*instance.fail_to_pass, *instance.pass_to_pass]
    command = runner.command(instance.test_patch)
    # SWE-bench's runs had no terminal: 80 columns. Its ids come from lines whose layout follows the width
    # (pytest's own tests print `PASSED  [100%]---...` lines that become ids), so ours must have the same.
    env = {**env, "COLUMNS": "80"}
    if host is None and env.get("VIRTUAL_ENV"):
        try:
            prepare_tox_current_env(command, workspace.path, Path(env["VIRTUAL_ENV"]))
        except ToxEnvNameError as error:
            raise VerifyInfrastructureError(f"{instance.instance_id}: {error}") from None
    log.parent.mkdir(parents=True, exist_ok=True)
    start = log.stat().st_size if log.is_file() else 0
    result, witnessed = _run_witnessed(host, command, workspace.path, log, env, timeout, sandbox)
    text = read_log(log, start)
    verdict = verdict_on_run(read_results(runner.log_parser, text), instance.fail_to_pass, instance.pass_to_pass,
                             result.returncode, rules, _tree_as_run(workspace, host))
    tests = verdict.to_json(rules) | {"log_parser": runner.log_parser, "rules": rules.name}
    return _graded(verdict, rules, result, tests, timeout, len(recorded), witnessed,
                   passing=f" ({runner.log_parser}, rules {rules.name!r})")
