"""The ``mini-swe-agent`` kind: ``mini`` in the workspace, in yolo mode.

Runs ``mini --yolo --exit-immediately -m MODEL -c mini.yaml -c
environment.timeout=SECONDS -t TASK -o RUN_DIR/trajectory.json`` with
``MSWEA_GLOBAL_CONFIG_DIR`` in the cell (mini reads its ``.env`` there at
import, and creates it even for ``--help``), ``MSWEA_CONFIGURED`` (no
first-run setup prompt), ``MSWEA_SILENT_STARTUP`` and litellm's local price
table (``LITELLM_LOCAL_MODEL_COST_MAP``: no fetch of it at import). mini's
default command timeout is 30 s, too short for a test suite:
``command_timeout`` raises it. The task goes in argv (one argument is at most
128 KiB on Linux). Its report is the trajectory, rewritten after every step
and read in ``agents.mini_swe_agent`` (also live, for the cap).
A model litellm cannot price costs 0 there (``MSWEA_COST_TRACKING=ignore_errors``,
rather than a failed run): the suite's price table prices it. Metered, ``OPENAI_BASE_URL`` is the cell's
route: the meter can route only litellm's ``openai/`` models.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from ..agents.mini_swe_agent import Trajectory, read_mini_spend
from ..agents.reports import AgentSpend, CallFollower
from ..suite import Suite
from .base import MODEL, ArmConfigError, ArmError, ArmKind, CellRequest, SettingsReader, number, strings
from .cli_agent import AgentCall, CliAgentArm, cli_settings
from .misconfig import KindFailures, credentials, endpoint, quota, rate_limit
from .preflight import ProbeCall

QUIET_ENV = {"MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
             "MSWEA_COST_TRACKING": "ignore_errors"}
#: The longest task mini's ``-t`` can take: Linux refuses a single argument of 128 KiB or more.
MAX_TASK_BYTES = 128 * 1024 - 1
COMMAND_TIMEOUT = number("command_timeout", "seconds mini lets one command run", 600.0)
CONFIG = strings("config", "mini's `-c` config files and `key=value` pairs", ["mini.yaml"])


@functools.lru_cache
def mini_version(executable: str) -> str:
    """mini has no ``--version``: ask the interpreter its console script runs on."""
    interpreter = Path(executable).read_text(encoding="utf-8", errors="replace").splitlines()[0].removeprefix("#!")
    program = "import importlib.metadata as m; print(m.version('mini-swe-agent'))"
    return subprocess.run([interpreter.strip(), "-c", program], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, check=True).stdout.strip()


#: How mini-swe-agent (litellm's exceptions) says its setup failed.
CONFIG_FAILURES = KindFailures(
    "the model's provider key (OPENAI_API_KEY...) and OPENAI_BASE_URL",
    (
        credentials(r"AuthenticationError|PermissionDeniedError|Incorrect API key|invalid_api_key"),
        quota(r"exceeded your current quota|insufficient_quota|BudgetExceededError|Error code: 402\b|Payment Required"),
        rate_limit(r"RateLimitError|Error code: 429\b"),
        endpoint(r"APIConnectionError|Connection refused|NotFoundError"),
    ),
)


class MiniSweAgentArm(CliAgentArm):
    """mini-swe-agent, its one bash tool run without confirmation, exiting when it submits."""

    config_failures = CONFIG_FAILURES
    kind = "mini-swe-agent"
    program = "mini"
    private_variables = ("MSWEA_GLOBAL_CONFIG_DIR",)
    login_file = ".env"
    arm_settings = cli_settings(program, MODEL.required("`-m`, litellm's `provider/model`"), "an `.env` file",
                                COMMAND_TIMEOUT, CONFIG)
    base_url_variable = "OPENAI_BASE_URL"  # litellm's openai/ provider: it POSTs {base URL}/chat/completions
    default_base_url = "https://api.openai.com/v1"

    def configure(self, reader: SettingsReader, suite: Suite) -> None:
        self.command_timeout: float = reader.read(COMMAND_TIMEOUT)
        self.config: list[str] = reader.read(CONFIG)

    def unmeterable(self) -> str | None:
        if str(self.model).startswith("openai/"):
            return None
        return (f"the meter routes mini-swe-agent's calls through OPENAI_BASE_URL, which only litellm's openai/ "
                f"models use; model {self.model!r} is not one (an OpenAI-compatible endpoint is "
                f"model = \"openai/NAME\" with upstream = its base URL)")

    def probe_call(self) -> ProbeCall | None:
        provider, _, model = (self.model or "").partition("/")
        if provider != "openai":
            return None  # litellm's other providers each read their own variables: the sweep finds out
        return ProbeCall("chat", self.base_url_variable, self.default_base_url, "OPENAI_API_KEY", model)

    def agent_version(self) -> str:
        try:
            return mini_version(self.executable)
        except (OSError, IndexError, subprocess.SubprocessError) as error:
            raise ArmConfigError(f"{self.spec.origin}: cannot tell the version of mini-swe-agent behind "
                                 f"{self.executable}: {error}") from None

    def prepare(self, request: CellRequest, home: Path, prompt: Path) -> AgentCall:
        task = prompt.read_text(encoding="utf-8")
        if len(task.encode()) > MAX_TASK_BYTES:
            raise ArmError(f"the prompt is {len(task.encode()):,} bytes; mini takes its task as one argument, "
                           f"at most {MAX_TASK_BYTES:,} bytes on Linux")
        configs = [arg for spec in [*self.config, f"environment.timeout={self.command_timeout:g}"]
                   for arg in ("-c", spec)]
        argv = [self.executable, "--yolo", "--exit-immediately", "-m", str(self.model), *configs, *self.args,
                "-t", task, "-o", str(request.run_dir / "trajectory.json")]
        return AgentCall(argv, {**QUIET_ENV, "MSWEA_GLOBAL_CONFIG_DIR": str(home)}, request.run_dir / "stdout.log")

    def live_calls(self, request: CellRequest, home: Path, call: AgentCall) -> CallFollower:
        return Trajectory(request.run_dir / "trajectory.json", self.model)

    def transcripts(self, request: CellRequest, home: Path) -> list[tuple[Path, str]]:
        return []  # the trajectory is written in the run dir itself

    def read_spend(self, request: CellRequest, home: Path, call: AgentCall) -> AgentSpend:
        return read_mini_spend(request.run_dir / "trajectory.json", self.model)


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"mini-swe-agent": MiniSweAgentArm}
