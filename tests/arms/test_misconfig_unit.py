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


def test_a_misconfigured_arm_s_skipped_cells_have_their_own_status_not_counted_and_run_again_on_resume():
    from pytest_swe_arena.outcome import CellStatus

    status = CellStatus.SKIPPED_CONFIG
    assert status != CellStatus.SKIPPED_BUDGET and status.value == "skipped_config"
    assert not status.counted and not status.final  # out of every rate; --arena-resume runs it again
    assert not CellStatus.CONFIG_ERROR.final


def test_the_supervisor_reads_its_workers_stderr_beside_the_fixed_outputs(tmp_path):
    from pytest_swe_arena.arms.misconfig import ERROR_OUTPUTS
    from pytest_swe_arena.arms.supervisor import SupervisorArm

    for name in ("w1.stderr.log", "w2.stderr.log", "brain.jsonl", "stderr.log"):
        (tmp_path / name).write_text("")
    names = SupervisorArm.config_failures.output_names(tmp_path)
    assert names == [*ERROR_OUTPUTS, "w1.stderr.log", "w2.stderr.log"]
    assert NO_FAILURES.output_names(tmp_path) == list(ERROR_OUTPUTS)


@pytest.mark.parametrize(("provider", "key", "expected"), [
    # An OpenAI-compatible provider whose key is a variable: the chat API at its baseURL, the variable read.
    ({"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://127.0.0.1:9/v1",
                                                      "apiKey": "{env:MY_KEY}"}},
     None, ("chat", "http://127.0.0.1:9/v1", "MY_KEY", "m1", None)),
    # A key written in the config itself is given to the probe, never put on its command line.
    ({"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://h/v1", "apiKey": "sk-literal"}},
     None, ("chat", "http://h/v1", "ARENA_PROBE_KEY", "m1", "sk-literal")),
    # The Anthropic package's baseURL ends in /v1; the probe adds /v1/messages.
    ({"npm": "@ai-sdk/anthropic", "options": {"baseURL": "https://proxy.example/v1", "apiKey": "{env:AK}"}},
     None, ("anthropic", "https://proxy.example", "AK", "m1", None)),
    # A package the probe does not speak, and a provider logged in through auth.json: not probed.
    ({"npm": "@ai-sdk/google", "options": {"baseURL": "http://h"}}, None, None),
    ({"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://h/v1"}}, "auth.json", None),
])
def test_opencode_s_preflight_call_comes_from_its_config(tmp_path, provider, key, expected):
    import json

    from pytest_swe_arena.arms.opencode_home import OpencodeHome

    auth = None
    if key is not None:
        auth = tmp_path / key
        auth.write_text("{}")
    home = OpencodeHome(json.dumps({"provider": {"p": provider}}), "test", auth, tmp_path, "0")
    call = home.probe_call("p/m1")
    got = None if call is None else (call.api, call.default, call.key_variable, call.model, call.key)
    assert got == expected


def test_opencode_s_informational_log_lines_are_not_read_for_a_failure():
    from pytest_swe_arena.arms.opencode_home import CONFIG_FAILURES as OPENCODE

    info = "timestamp=2026-12-06T04:45:48.583Z level=INFO run=a3 message=loading path=/tmp/a_rate_limit_429/x.json"
    error = ('timestamp=2026-12-06T04:46:25.913Z level=ERROR run=a3 message=process error="Incorrect API key '
             'provided."')
    assert OPENCODE.find([info]) is None
    found = OPENCODE.find([error + "\n" + info])
    assert found is not None and found.startswith("credentials"), found
    # Its log quotes OpenAI's 429 message without the status (the supervisor's workers' stderr).
    limited = ('timestamp=2026-12-06T04:54:45.996Z level=ERROR run=0e message=process error="Rate limit reached for '
               'requests" stack="AI_APICallError: Rate limit reached for requests"')
    found = OPENCODE.find([limited])
    assert found is not None and found.startswith("rate limited"), found
