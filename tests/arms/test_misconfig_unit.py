"""Each kind's words for a configuration failure, on lines its real CLI printed (tests/arms/test_config_errors.py
runs the CLIs themselves)."""

from __future__ import annotations

import pytest

from pytest_swe_arena.arms.claude_code import CONFIG_FAILURES as CLAUDE
from pytest_swe_arena.arms.codex import CONFIG_FAILURES as CODEX
from pytest_swe_arena.arms.gemini_cli import CONFIG_FAILURES as GEMINI
from pytest_swe_arena.arms.mini_swe_agent import CONFIG_FAILURES as MINI
from pytest_swe_arena.arms.misconfig import NO_FAILURES


@pytest.mark.parametrize(("failures", "output", "seen"), [
    (CLAUDE, '{"type":"result","is_error":true,"result":"Invalid API key · Fix external API key"}', "credentials"),
    (CLAUDE, '{"result":"API Error: 402 You exceeded your current quota"}', "quota"),
    (CLAUDE, '{"result":"API Error: Request rejected (429) · Rate limit reached"}', "rate limited"),
    (CODEX, '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Incorrect API key"}}',
     "credentials"),
    (CODEX, '{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}',
     "rate limited"),
    (GEMINI, '"message": "{\\"error\\":{\\"code\\":402,\\"message\\":\\"You exceeded your current quota\\"}}"',
     "quota"),
    # A rich traceback quotes litellm's source (APIConnectionError) before the final error: the last line wins.
    (MINI, "\x1b[31m│\x1b[0m raised_exc: Final = APIConnectionError(\nOpenAIError: Error code: 402 - You exceeded "
           "your current quota\nAPIError: litellm.APIError: APIError: OpenAIException - You exceeded your\n"
           "current quota", "quota"),
])
def test_a_kind_reads_its_cli_s_refusal(failures, output, seen):
    found = failures.find([output])
    assert found is not None and found.startswith(seen) and "\x1b" not in found, found
    assert f"(check {failures.settings})" in found


def test_an_agent_that_failed_for_its_own_reasons_is_no_configuration_failure():
    assert CLAUDE.find(['{"result":"I could not fix the bug"}', "Traceback: KeyError: 'x'"]) is None
    assert NO_FAILURES.find(["API Error: 401 Invalid API key"]) is None  # the command kind's user program
