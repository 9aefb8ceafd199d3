"""The ``gemini-cli`` kind: Google's Gemini CLI, ``gemini -p``, in the workspace.

Runs ``gemini -p "" --yolo --skip-trust --output-format json [-m MODEL] <
prompt.txt`` with ``GEMINI_CLI_HOME`` in the cell and its
``.gemini/settings.json`` there: the auth type named (``gemini-api-key`` by
default: a base URL alone makes 0.61 pick an auth type that non-interactive
runs refuse), usage statistics off. Without ``--yolo`` a non-interactive run
gets no tool that writes; without ``--skip-trust`` it refuses the workspace.
``GEMINI_CLI_NO_RELAUNCH=true`` keeps it one process (the relaunching parent
ignores SIGTERM). Its usage is read in ``agents.gemini_cli`` (its result's ``stats.models``, its chat
files live and when it printed nothing). Gemini reports no cost: the suite's
price table prices it. Metered, ``GOOGLE_GEMINI_BASE_URL`` is the cell's route (0.61 reads it for
the API-key auth type too).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ..agents.gemini_cli import Chats, read_gemini_spend
from ..agents.reports import AgentSpend, CallFollower
from ..files import json_table, write_atomic
from ..outcome import AgentOutcome, ArmStatus
from ..suite import Suite
from .base import MODEL, ArmKind, CellRequest, SettingsReader, table, text
from .cli_agent import AgentCall, CliAgentArm, cli_settings, under
from .misconfig import KindFailures, credentials, endpoint, quota, rate_limit
from .preflight import ProbeCall


def merged(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``top`` laid over it, tables merged key by key."""
    result = dict(base)
    for key, value in top.items():
        result[key] = merged(json_table(base.get(key)), value) if isinstance(value, Mapping) else value
    return result


#: How Gemini CLI says its setup failed (its JSON ``error`` and the ApiError on stderr: ``"code":401``...).
CONFIG_FAILURES = KindFailures(
    "GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL",
    (
        credentials(r"API key not valid|API_KEY_INVALID|\"code\\?\":\s*40[13]\b|status: 40[13]\b|UNAUTHENTICATED"
                    r"|PERMISSION_DENIED|GEMINI_API_KEY environment variable not found|set an Auth method"),
        quota(r"\"code\\?\":\s*402\b|status: 402\b|insufficient_quota|Quota exceeded"),
        rate_limit(r"\"code\\?\":\s*429\b|status: 429\b|RESOURCE_EXHAUSTED|Too Many Requests"),
        endpoint(r"fetch failed|ECONNREFUSED|ENOTFOUND|\"code\\?\":\s*404\b"),
    ),
)


AUTH_TYPE = text("auth_type", '`security.auth.selectedType` (`"oauth-personal"` with a login file, `"vertex-ai"`)',
                 "gemini-api-key")
SETTINGS = table("settings", "more of its `settings.json`", {})


class GeminiCliArm(CliAgentArm):
    """Gemini CLI in YOLO mode (its write and shell tools without asking), API-key auth by default."""

    config_failures = CONFIG_FAILURES
    kind = "gemini-cli"
    program = "gemini"
    private_variables = ("GEMINI_CLI_HOME",)
    login_file = ".gemini/oauth_creds.json"
    # Its model may be left out: Gemini CLI then routes each prompt to a model of its choice.
    arm_settings = cli_settings(program, MODEL.but(meaning="`-m`", shown_default="none (its router)"),
                                "`~/.gemini/oauth_creds.json`", AUTH_TYPE, SETTINGS)
    base_url_variable = "GOOGLE_GEMINI_BASE_URL"  # it calls {base URL}/v1beta/models/M:streamGenerateContent
    default_base_url = "https://generativelanguage.googleapis.com"

    def configure(self, reader: SettingsReader, suite: Suite) -> None:
        self.auth_type: str = reader.read(AUTH_TYPE)
        self.settings: dict[str, Any] = reader.read(SETTINGS)

    def probe_call(self) -> ProbeCall | None:
        return ProbeCall("gemini", self.base_url_variable, self.default_base_url, "GEMINI_API_KEY",
                         self.model or "gemini-2.5-flash")

    def prepare(self, request: CellRequest, home: Path, prompt: Path) -> AgentCall:
        ours = {"security": {"auth": {"selectedType": self.auth_type}}, "privacy": {"usageStatisticsEnabled": False}}
        settings = merged(self.settings, ours)
        write_atomic(home / ".gemini" / "settings.json", json.dumps(settings, indent=2).encode())
        argv = [self.executable, "-p", "", "--yolo", "--skip-trust", "--output-format", "json",
                *(["-m", self.model] if self.model else []), *self.args]
        env = {"GEMINI_CLI_HOME": str(home), "GEMINI_CLI_NO_RELAUNCH": "true"}
        return AgentCall(argv, env, request.run_dir / "result.json", stdin=prompt)

    def live_calls(self, request: CellRequest, home: Path, call: AgentCall) -> CallFollower:
        return Chats(home)

    def transcripts(self, request: CellRequest, home: Path) -> list[tuple[Path, str]]:
        return under(home / ".gemini" / "tmp", "*/chats/**/*.jsonl")

    def read_spend(self, request: CellRequest, home: Path, call: AgentCall) -> AgentSpend:
        return read_gemini_spend(call.stdout, request.run_dir / "stderr.log", home, self.model)

    def check_report(self, spend: AgentSpend, outcome: AgentOutcome) -> AgentOutcome:
        # SIGTERM makes it exit 0 without a result: an exit code of 0 alone is no finish.
        if outcome.status == ArmStatus.COMPLETED and not spend.details.get("printed_result"):
            return replace(outcome, status=ArmStatus.ARM_ERROR, error="gemini-cli exited 0 but printed no result")
        return outcome



@pytest.hookimpl
def pytest_arena_arm_kinds() -> Mapping[str, ArmKind]:
    return {"gemini-cli": GeminiCliArm}
