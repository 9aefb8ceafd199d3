"""Environment health: before any arm runs, the environment imports the project and collects its tests at base.

A broken environment (setuptools without ``pkg_resources``, a NumPy its code predates) fails every
test, so GOLD would be ``unresolved`` with every test missing: a verdict on the harness, not on the
patch. ``check_health`` runs, at base and before ``test_patch`` (whose new imports base does not
have), what grading will need: the row's own test command, started as grading starts it, collecting
the test files that exist at base (``--collect-only`` after SWE-bench's ``pytest -rA``, or after
sphinx's ``tox --current-env -epy39 -v --``, whose tox env must find the venv), or, for a runner that
is not pytest (Django's runtests.py, sympy's bin/test), an import of the project's package. What
fails is an ``EnvBuildError`` naming the failing import, so the cell is a harness error for every
arm. A success is remembered in the shared cache per environment, base and check, so the other arms
and trials of the instance skip it.

``unreachable_server`` checks a shipped spec's ``network`` (the servers its tests need) the same way:
before any arm runs, from this machine, never from what a log says.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import socket
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from ..cell.venvs import EnvBuildError, EnvironmentStore, PythonEnvironment
from ..grading.runners import (
    Runner,
    ToxEnvNameError,
    has_pytest_config,
    prepare_tox_current_env,
    targets_from_patch,
    test_files,
)
from ..instances.model import Instance

#: The parsers of runners that are not pytest: their check imports the project instead of collecting.
NOT_PYTEST = {"parse_log_django": "django", "parse_log_sympy": "sympy"}

#: A line that says which import failed: an exception pytest or Python printed, or ``python -m``'s own words.
_IMPORT_FAILURE = re.compile(r"((?:ModuleNotFoundError|ImportError|AttributeError|SyntaxError|"
                             r"DeprecationWarning|TypeError)\b.*|No module named .*)")


def health_command(instance: Instance, runner: Runner | None, workspace: Path) -> str:
    """What the check runs in the workspace at base: pytest collecting the test files there, or an import."""
    if runner is not None and runner.log_parser in NOT_PYTEST:
        return f"python -c {shlex.quote('import ' + NOT_PYTEST[runner.log_parser])}"
    if runner is not None:
        files = [path for path in targets_from_patch(instance.test_patch or "")
                 if path.endswith(".py") and (workspace / path).is_file()]
    else:
        files = test_files([*instance.fail_to_pass, *instance.pass_to_pass], instance.test_patch, workspace)
    quoted = " ".join(shlex.quote(path) for path in files)
    # Exit 5, no test collected (a file of fixtures only), is no failure of the environment.
    if runner is not None and runner.targets != "in_command":
        # The runner's own command (its targets are appended to it), so its start-up is what is checked.
        if not files:
            return f"{runner.test_cmd} --version"
        return f"{runner.test_cmd} --collect-only -q -p no:cacheprovider {quoted} || test $? -eq 5"
    if not files:
        return "python -m pytest --version"
    # Kept inside the workspace as the runner is (a config file in a folder above must not count).
    confined = "--confcutdir=." if has_pytest_config(workspace) else "--confcutdir=. --rootdir=. -c /dev/null"
    return f"python -m pytest --collect-only -q -p no:cacheprovider {confined} {quoted} || test $? -eq 5"


def check_health(instance: Instance, runner: Runner | None, environment: PythonEnvironment,
                 store: EnvironmentStore, workspace: Path, cell_env: dict[str, str], log: Path,
                 timeout: float) -> None:
    """Raise ``EnvBuildError`` naming the failing import unless the environment can run the row's tests at base."""
    command = health_command(instance, runner, workspace)
    passed = _passed_record(instance, environment.identity, store, command)
    if passed.is_file():
        return
    start = log.stat().st_size if log.is_file() else 0
    try:
        prepare_tox_current_env(command, workspace, environment.venv)
    except ToxEnvNameError as error:
        raise EnvBuildError(f"{instance.instance_id}: {error}") from None
    try:
        store.run_step(environment, command, workspace, cell_env, log, timeout, "health check at base")
    except EnvBuildError:
        with open(log, "rb") as handle:
            handle.seek(start)
            said = handle.read().decode("utf-8", errors="replace")
        failures = _IMPORT_FAILURE.findall(said)
        # Else the last line that says error (a runner that cannot start: "tox: error: ..."), else its last words.
        words = [line.strip() for line in said.splitlines()
                 if line.strip() and not line.startswith(("$ (health check at base)", "# took "))]
        errors = [line for line in words if re.search(r"\berror\b", line, re.IGNORECASE)]
        why = (failures or errors or words or ["it printed nothing"])[-1].strip()[:300]
        raise EnvBuildError(
            f"environment is broken: `{command}` failed at base, before any arm ran ({why}; see env.log)"
        ) from None
    passed.parent.mkdir(parents=True, exist_ok=True)
    passed.write_text(command + "\n")


def health_passed(instance: Instance, runner: Runner | None, identity: str, store: EnvironmentStore,
                  workspace: Path) -> bool:
    """Whether the environment ``identity`` (a template's key) passed the row's check already (``check_health``)."""
    return _passed_record(instance, identity, store, health_command(instance, runner, workspace)).is_file()


def _passed_record(instance: Instance, identity: str, store: EnvironmentStore, command: str) -> Path:
    material = f"{identity}\0{instance.repo}\0{instance.base_commit}\0{command}"
    return store.root / "health" / (hashlib.sha256(material.encode()).hexdigest()[:24] + ".ok")


def unreachable_server(urls: Iterable[str], timeout: float = 10.0, tarpit_wait: float = 1.0) -> str | None:
    """The first of the network needs of a row's tests (``network``) this machine does not meet, and why.

    ``http(s)://host[:port]/``: a server the tests connect to, which must accept a TCP connection from here.
    ``tarpit://address:port``: an address the tests expect a connection to hang on (requests' ``TARPIT``,
    for its timeout tests), which must neither connect nor be refused within ``tarpit_wait`` seconds. Checked
    from here, the network the graded tests share: their log is never read for it (a log is the agent's to
    forge). None when every need is met.
    """
    for url in urls:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
        if parts.scheme == "tarpit":
            try:
                with socket.create_connection((host, port), timeout=tarpit_wait):
                    return f"{url}: {host}:{port} accepts connections; the tests expect connecting to it to hang"
            except TimeoutError:
                continue
            except OSError as error:
                return f"{url}: connecting to {host}:{port} fails at once ({error.strerror or error}); the tests " \
                       "expect it to hang"
        try:
            with socket.create_connection((host, port), timeout=timeout):
                pass
        except OSError as error:
            return f"{url}: cannot connect to {host}:{port} ({error.strerror or error})"
    return None
