"""The ``claude-code`` kind: Claude Code's ``claude -p`` in the workspace.

Runs ``claude -p --model MODEL --output-format stream-json --verbose
--include-partial-messages --permission-mode acceptEdits --allowedTools Bash <
prompt.txt`` with ``CLAUDE_CONFIG_DIR`` in the cell and
``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` (no telemetry, no update checks).
Without ``--allowedTools Bash`` it denies every shell command and still exits 0
(tests/AGENT_NOTES.md 2.3). Its usage is read in ``agents.claude_code``: the stream's
``result`` (``modelUsage`` per model, sub-agents included, and Claude's cost), live
from the stream and the sub-agents' transcripts, and from all its transcripts when it
never printed its result. Metered, ``ANTHROPIC_BASE_URL`` is the cell's route.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from ..agents.claude_code import StreamAndSubagents, read_claude_spend
from ..agents.reports import AgentSpend, CallFollower
from ..outcome import AgentOutcome, ArmStatus
from .base import MODEL, ArmKind, CellRequest
from .cli_agent import AgentCall, CliAgentArm, cli_settings, under
from .misconfig import KindFailures, credentials, endpoint, quota, rate_limit
from .preflight import ProbeCall

#: Keep Claude Code off the network but for its model (event logging, error reports, update checks).
QUIET_ENV = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
#: Edits without asking, and Bash (which acceptEdits alone denies); -p never asks, it denies.
PERMISSIONS = ("--permission-mode", "acceptEdits", "--allowedTools", "Bash")


#: How Claude Code says its setup failed (its result's text, "API Error: <status> ..." and the like).
CONFIG_FAILURES = KindFailures(
    "ANTHROPIC_API_KEY or the login file, and ANTHROPIC_BASE_URL",
    (
        credentials(r"Not logged in|Invalid API key|API Error: 40[13]\b|authentication_error|permission_error"
                    r"|OAuth token (has expired|revoked)"),
        quota(r"API Error: 402\b|Credit balance is too low|insufficient_quota|billing"),
        rate_limit(r"API Error: 429\b|Request rejected \(429\)|rate_limit_error|Rate limit|overloaded_error"),
        endpoint(r"API Error: (Connection error|Request timed out)|ECONNREFUSED|ENOTFOUND|Unable to connect to API"
                 r"|API Error: 404\b"),
    ),
)

class ClaudeCodeArm(CliAgentArm):
    """Claude Code, ``claude -p``, with the permissions that let it edit files and run commands."""

    config_failures = CONFIG_FAILURES
    kind = "claude-code"
    program = "claude"
    private_variables = ("CLAUDE_CONFIG_DIR",)
    login_file = ".credentials.json"
    arm_settings = cli_settings(program, MODEL.required("`--model`"), "`~/.claude/.credentials.json`")
    base_url_variable = "ANTHROPIC_BASE_URL"  # no /v1: it POSTs {base URL}/v1/messages
    default_base_url = "https://api.anthropic.com"

    def probe_call(self) -> ProbeCall | None:
        return ProbeCall("anthropic", self.base_url_variable, self.default_base_url, "ANTHROPIC_API_KEY",
                         self.model or "claude-sonnet-4-5")

    def prepare(self, request: CellRequest, home: Path, prompt: Path) -> AgentCall:
        argv = [self.executable, "-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages",
                *PERMISSIONS, *(["--model", self.model] if self.model else []), *self.args]
        return AgentCall(argv, {**QUIET_ENV, "CLAUDE_CONFIG_DIR": str(home)}, request.run_dir / "events.jsonl",
                         stdin=prompt)

    def live_calls(self, request: CellRequest, home: Path, call: AgentCall) -> CallFollower:
        return StreamAndSubagents(call.stdout, home)

    def transcripts(self, request: CellRequest, home: Path) -> list[tuple[Path, str]]:
        return under(home / "projects", "**/*.json*")

    def read_spend(self, request: CellRequest, home: Path, call: AgentCall) -> AgentSpend:
        return read_claude_spend(call.stdout, (path for path, _ in self.transcripts(request, home)))

    def check_report(self, spend: AgentSpend, outcome: AgentOutcome) -> AgentOutcome:
        if outcome.status == ArmStatus.COMPLETED and spend.error:
            return replace(outcome, status=ArmStatus.ARM_ERROR, error="claude-code reported an error")
        return outcome


@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"claude-code": ClaudeCodeArm}
