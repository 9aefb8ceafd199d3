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


def metered(*statuses, outcome="failed"):
    from pytest_swe_arena.spend.meter.accounts import CellState

    calls = tuple({"upstream": "https://api.example/v1", "status": status, "outcome": outcome} for status in statuses)
    return CellState(cell_key="k", arm="A", models={}, calls=calls)


@pytest.mark.parametrize(("statuses", "seen"), [
    ((401,), "credentials refused (401/403): the meter saw https://api.example/v1 answer 401 to 1 call(s)"),
    ((429, 429, 429), "rate limited beyond its retries (429): the meter saw https://api.example/v1 answer 429 to 3"),
    ((402,), "quota or budget refused (402)"),
    ((200, 401), None),  # a model answered once: the agent's failure, counted
    ((500,), None),
    ((), None),
])
def test_metered_the_upstream_s_answers_decide(statuses, seen):
    from pytest_swe_arena.spend.meter.cells import upstream_refusal

    found = upstream_refusal(metered(*statuses))
    assert found == seen if seen is None else found is not None and found.startswith(seen)


def test_the_meter_s_own_refusals_are_no_configuration_failure():
    from pytest_swe_arena.spend.meter.cells import upstream_refusal

    assert upstream_refusal(metered(402, outcome="refused")) is None  # a cap the meter held: over_budget
