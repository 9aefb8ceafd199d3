"""The ``mini-swe-agent`` kind: ``mini`` in the workspace, in yolo mode.

Runs ``mini --yolo --exit-immediately -m MODEL -c mini.yaml -c
environment.timeout=SECONDS -t TASK -o RUN_DIR/trajectory.json`` with
``MSWEA_GLOBAL_CONFIG_DIR`` in the cell (mini reads its ``.env`` there at
import, and creates it even for ``--help``), ``MSWEA_CONFIGURED`` (no
first-run setup prompt), ``MSWEA_SILENT_STARTUP`` and litellm's local price
table (``LITELLM_LOCAL_MODEL_COST_MAP``: no fetch of it at import). mini's
default command timeout is 30 s, too short for a test suite:
``command_timeout`` raises it. The task goes in argv (one argument is at most
128 KiB on Linux). Its report is the trajectory, rewritten after every step:
each assistant message's ``extra.response.usage`` (OpenAI chat usage, as the
provider sent it) and ``extra.cost`` (litellm's price), per served model,
``info.model_stats.instance_cost`` in all. It is followed for the live cap.
A model litellm cannot price costs 0 there (``MSWEA_COST_TRACKING=ignore_errors``,
rather than a failed run): the suite's price table prices it.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ..suite import Suite
from ..usage import Usage, add_usages
from .agent import AgentOutcome
from .base import ArmConfigError, ArmError, ArmKind, CellRequest, SettingsReader
from .cli_agent import (
    AgentCall,
    AgentSpend,
    CallTally,
    CliAgentArm,
    FigureReader,
    LiveUsage,
    call_usage,
    read_json_file,
    table,
    text,
)

QUIET_ENV = {"MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
             "MSWEA_COST_TRACKING": "ignore_errors"}
#: The longest task mini's ``-t`` can take: Linux refuses a single argument of 128 KiB or more.
MAX_TASK_BYTES = 128 * 1024 - 1
DEFAULT_COMMAND_TIMEOUT = 600.0


def chat_call(usage: Any, where: str, cost: float | None, reader: FigureReader) -> Usage:
    """An OpenAI chat ``usage``: prompt includes cached (and cache-write) tokens, completion includes reasoning."""
    cached = reader.count(table(usage.get("prompt_tokens_details")), "cached_tokens")
    written = reader.count(usage, "cache_creation_input_tokens")  # what litellm passes on from Anthropic
    reasoning = reader.count(table(usage.get("completion_tokens_details")), "reasoning_tokens")
    output = reader.rest(reader.count(usage, "completion_tokens", None), reasoning)
    return call_usage(reader.rest(reader.count(usage, "prompt_tokens", None), cached, written), output, reasoning,
                      cached, written, cost)


def read_trajectory(data: Any, asked: str | None) -> tuple[dict[str, Usage], list[str], dict[str, Any]]:
    """Usage per served model from a trajectory, why figures were refused, and what else it says."""
    tally = CallTally()
    reader = FigureReader("trajectory")
    messages = table(data).get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        extra = table(table(message).get("extra"))
        response = table(extra.get("response"))
        if table(message).get("role") != "assistant" or not table(response.get("usage")):
            continue
        reader.where = f"trajectory message {index}"
        model = text(response.get("model")) or asked or "unknown"
        tally.add(text(response.get("id")) or f"message-{index}", model,
                  chat_call(response["usage"], reader.where, reader.cost(extra, "cost"), reader))
    info = table(table(data).get("info"))
    reader.where = "trajectory info.model_stats"
    instance_cost = reader.cost(table(info.get("model_stats")), "instance_cost")
    models = tally.by_model()
    problems = list(reader.problems)
    summed = add_usages(models.values()).cost_usd if models else 0.0
    if instance_cost is not None and summed is not None and abs(instance_cost - summed) > 1e-6:
        problems.append(f"trajectory: instance_cost {instance_cost} is not the sum of its messages' cost {summed}")
    details = {"exit_status": info.get("exit_status"), "mini_version": info.get("mini_version"),
               "reported_cost_usd": instance_cost}
    return models, problems, details


class Trajectory(LiveUsage):
    """The trajectory file, read whole at each poll (mini rewrites it after every step, not atomically)."""

    def __init__(self, path: Path, asked: str | None):
        self.path = path
        self.asked = asked
        self.last: Mapping[str, Usage] = {}

    def poll(self) -> Mapping[str, Usage]:
        data = read_json_file(self.path)
        if data is not None:  # half-written: the last whole one stands
            self.last = read_trajectory(data, self.asked)[0]
        return self.last


@functools.lru_cache
def mini_version(executable: str) -> str:
    """mini has no ``--version``: ask the interpreter its console script runs on."""
    interpreter = Path(executable).read_text(encoding="utf-8", errors="replace").splitlines()[0].removeprefix("#!")
    program = "import importlib.metadata as m; print(m.version('mini-swe-agent'))"
    return subprocess.run([interpreter.strip(), "-c", program], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, check=True).stdout.strip()


class MiniSweAgentArm(CliAgentArm):
    """mini-swe-agent, its one bash tool run without confirmation, exiting when it submits."""

    kind = "mini-swe-agent"
    program = "mini"
    private_variables = ("MSWEA_GLOBAL_CONFIG_DIR",)
    login_file = ".env"

    def configure(self, reader: SettingsReader, suite: Suite) -> None:
        self.command_timeout: float = reader.number("command_timeout", DEFAULT_COMMAND_TIMEOUT)
        self.config: list[str] = reader.strings("config", ["mini.yaml"])

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

    def live_usage(self, request: CellRequest, home: Path, call: AgentCall) -> LiveUsage:
        return Trajectory(request.run_dir / "trajectory.json", self.model)

    def transcripts(self, request: CellRequest, home: Path) -> list[tuple[Path, str]]:
        return []  # the trajectory is written in the run dir itself

    def read_spend(self, request: CellRequest, home: Path, call: AgentCall, outcome: AgentOutcome) -> AgentSpend:
        data = read_json_file(request.run_dir / "trajectory.json")
        if data is None:
            # Stopped before its first step was saved: that spend is only in what the provider saw.
            return AgentSpend({}, None, "none", [], None, {"trajectory": False})
        models, problems, details = read_trajectory(data, self.model)
        served = next(iter(models), None)
        return AgentSpend(models, served, "report", problems, text(details.get("exit_status")), details)


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"mini-swe-agent": MiniSweAgentArm}
