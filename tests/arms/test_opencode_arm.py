"""The ``opencode`` kind (SOLO) for real: opencode CLI, scripted endpoint, real git, with and without xdist."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import uuid

import pytest
from helpers.agents import (
    ASKED,
    DOTENVX,
    OPENCODE,
    REPO_ROOT,
    arm_table,
    assert_sealed,
    default_sandbox,
    edit_calls,
    opencode_config,
    priced,
    prices_table,
    summed,
)
from helpers.arena import XDIST, ledger_validator, processes_with
from helpers.atif import agent_steps, checked_atif, tool_calls
from helpers.scripted_model import ScriptedModel

pytestmark = pytest.mark.skipif(OPENCODE is None, reason="opencode CLI not found (npm install)")

FIXED_MUL = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"


def solo(suite, model, name="SOLO", **settings):
    config = suite.path / f"{name.lower()}-opencode.json"
    config.write_text(json.dumps(opencode_config(model.base_url)))
    return arm_table(name, "opencode", model=ASKED, executable=OPENCODE, config=config.name, **settings)


def fix_turns(marker_usage):
    """A conversation that fixes calc.mul through opencode's edit tool, then says so."""
    first, last = marker_usage
    return [
        {"tool_calls": [{"name": "edit", "arguments": {
            "filePath": "calc/ops.py", "oldString": "def mul(a, b):\n    return a + b",
            "newString": "def mul(a, b):\n    return a * b"}}], "usage": first},
        {"content": "Fixed mul.", "usage": last},
    ]


def bundled_row(suite, instance_id):
    rows = [json.loads(line) for line in (REPO_ROOT / "instances/suite.jsonl").read_text().splitlines()]
    (row,) = [row for row in rows if row["instance_id"] == instance_id]
    bundle = row["source"]["bundle"]
    (suite.path / "instances" / bundle).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_ROOT / "instances" / bundle, suite.path / "instances" / bundle)
    return row


@pytest.mark.parametrize("xdist", XDIST)
def test_two_solo_cells_resolve_with_their_own_spend(suite, calc, xdist):
    """A bundled instance and a calc instance, fixed through opencode's edit tool, each in its own cell."""
    bundled = bundled_row(suite, "arena__dateranges-41")
    calc_row = calc.row(problem_statement="[calc] calc.mul(3, 4) returns 7, expected 12.")
    suite.instances([bundled, calc_row])
    usages = {
        bundled["instance_id"]: [{"prompt_tokens": 2000, "completion_tokens": 60, "reasoning_tokens": 20},
                                 {"prompt_tokens": 2300, "completion_tokens": 15, "cached_tokens": 1900}],
        calc_row["instance_id"]: [{"prompt_tokens": 5000, "completion_tokens": 90},
                                  {"prompt_tokens": 5400, "completion_tokens": 7, "cached_tokens": 4800,
                                   "reasoning_tokens": 3}],
    }
    fixes = {bundled["instance_id"]: edit_calls(bundled["patch"]), calc_row["instance_id"]: edit_calls(calc.patch)}
    markers = {bundled["instance_id"]: bundled["problem_statement"][:40], calc_row["instance_id"]: "[calc]"}
    script = {"by_marker": {
        markers[iid]: [{"tool_calls": fixes[iid], "usage": turns[0]}, {"content": "Fixed.", "usage": turns[1]}]
        for iid, turns in usages.items()
    }}
    with ScriptedModel(script) as model:
        suite.arms_toml = solo(suite, model) + prices_table()
        result = suite.run("--arena-arms=SOLO", *xdist)
        requests = model.chat_requests()
        endpoint = model.base_url
        reported = model.usage_total
    result.assert_outcomes(passed=2)
    assert sorted(r["kind"] for r in requests) == ["turn"] * 4  # --title: no hidden title request
    rows = suite.ledger()
    for row in rows:
        ledger_validator().validate(row)
    # the ledger's tokens are what the endpoint reported
    assert sum(row["usage"]["input_tokens"] + row["usage"]["cache_read_tokens"] for row in rows) \
        == reported["prompt_tokens"]
    assert sum(row["usage"]["output_tokens"] + row["usage"]["reasoning_tokens"] for row in rows) \
        == reported["completion_tokens"]
    ledger = {row["instance_id"]: row for row in rows}
    assert (suite.path / "arena-out" / ledger[bundled["instance_id"]]["patch_file"]).read_text() == bundled["patch"]
    for iid, turns in usages.items():
        row = ledger[iid]
        assert row["status"] == "resolved"
        expected = summed(turns)
        assert {k: row["usage"][k] for k in expected} == expected  # its own spend, not the other cell's
        assert row["usage"]["steps"] == 2
        assert row["usage"]["max_context_tokens"] == max(t["prompt_tokens"] + t["completion_tokens"] for t in turns)
        assert row["usage"]["cost_source"] == "priced"
        assert row["usage"]["cost_usd"] == pytest.approx(priced(expected))
        assert row["models"][ASKED]["cost_usd"] == pytest.approx(priced(expected))
        assert row["asked_model"] == row["served_model"] == ASKED and not row["model_mismatch"]
        assert row["provenance"]["agent"] == "opencode" and row["provenance"]["agent_version"] == "1.18.33"
        assert row["sandbox"] == default_sandbox()
        # Sealed: the endpoint its opencode config's baseURL names is carried in, and it is all the cell reached.
        assert_sealed(row, endpoint)
        assert row["details"]["stream"]["input_tokens"] == expected["input_tokens"]
        (session,) = row["details"]["sessions"]  # a private database: only this cell's session in it
        assert session["model"] == ASKED
        out = suite.path / "arena-out" / row["run_dir"]
        prompt = (out / "prompt.txt").read_text()
        assert prompt.startswith(markers[iid]) and "Work only inside your current working directory" in prompt
        assert '"type":"step_finish"' in (out / "events.jsonl").read_text()
        # Its ATIF trajectory: a step per model call, with the tokens the endpoint served it and the edit calls.
        trajectory = checked_atif(out, row)
        assert [(step["metrics"]["prompt_tokens"], step["metrics"]["completion_tokens"],
                 step["metrics"].get("cached_tokens"))
                for step in agent_steps(trajectory)] == [
            (turn["prompt_tokens"], turn["completion_tokens"], turn.get("cached_tokens", 0)) for turn in turns]
        assert [call["function_name"] for call in tool_calls(trajectory)] == ["edit"] * len(fixes[iid])
        assert agent_steps(trajectory)[-1]["message"] == "Fixed."
    if xdist:
        assert {row["worker"] for row in rows} <= {"gw0", "gw1"}


def test_timeout_leaves_no_process_behind(suite, calc):
    """The endpoint never answers: the cell times out after the arm's timeout and none of its processes survive."""
    mark = uuid.uuid4().hex
    suite.instances([calc.row()])
    with ScriptedModel([{"mode": "hang"}]) as model:
        suite.arms_toml = solo(suite, model, timeout=8, grace=2, env={"ARENA_TEST_MARK": mark})
        result = suite.run("--arena-arms=SOLO")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TIMEOUT*opencode did not finish within 8 s*"])
    (row,) = suite.ledger()
    assert row["status"] == "timeout" and not row["patch_scored"] and row["verify"] is None
    # Stopped at its timeout; the endpoint never answers, so only the timeout could end the cell.
    assert 8 <= row["phases"]["arm"] < 300
    assert processes_with("ARENA_TEST_MARK", mark) == []


def test_a_timed_out_cell_keeps_the_spend_it_made(suite, calc):
    """The first call is answered (a bash tool call), the second hangs: only the timeout ends the cell, and the
    row holds what the endpoint served before it."""
    first = {"prompt_tokens": 3000, "completion_tokens": 40, "cached_tokens": 1000, "reasoning_tokens": 10}
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": "true", "description": "Look"}}],
               "usage": first}, {"mode": "hang"}]
    suite.instances([calc.row()])
    with ScriptedModel(script) as model:
        suite.arms_toml = solo(suite, model, timeout=60, grace=2) + prices_table()
        result = suite.run("--arena-arms=SOLO")
        served = model.tokens_total
        answered = len(model.served)
    result.assert_outcomes(failed=1)
    (row,) = suite.ledger()
    assert row["status"] == "timeout", row["error"]
    assert "did not finish within 60 s" in row["error"]
    assert answered == 1  # the second call never got an answer: the agent could not have ended by itself
    expected = summed([first])
    assert {k: row["usage"][k] for k in expected} == expected == served.to_json()
    assert row["usage"]["steps"] == 1 and row["usage"]["cost_usd"] == pytest.approx(priced(expected))
    assert '"type":"step_finish"' in (suite.path / "arena-out" / row["run_dir"] / "events.jsonl").read_text()


def test_spend_cap_stops_the_agent_mid_run(suite, calc):
    big = {"prompt_tokens": 100_000, "completion_tokens": 1000}
    script = [
        {"tool_calls": [{"name": "write", "arguments": {"filePath": "calc/ops.py", "content": FIXED_MUL}}],
         "usage": big},
        {"tool_calls": [{"name": "read", "arguments": {"filePath": "calc/ops.py"}}], "usage": big},
        {"mode": "hang"},
    ]
    suite.instances([calc.row()])
    # 100k input at $3/M + 1k output at $15/M = $0.315 per step: the second step passes $0.5.
    with ScriptedModel(script) as model:
        # The cap must stop it; the timeout only ends the hang of a cap that failed (a busy machine is slow).
        suite.arms_toml = solo(suite, model, max_usd=0.5, timeout=500) + prices_table()
        result = suite.run("--arena-arms=SOLO")
        turns = len(model.chat_requests())
    result.assert_outcomes(failed=1)
    (row,) = suite.ledger()
    assert row["status"] == "over_budget", row["error"]
    assert "over max_usd $0.5" in row["error"]
    assert turns <= 3
    assert not row["patch_scored"] and row["patch_file"] is None and row["verify"] is None
    assert row["usage"]["cost_usd"] == pytest.approx(2 * (0.3 + 0.015))
    assert (suite.path / "arena-out" / row["run_dir"] / "partial.patch").is_file()


@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_secrets_reach_the_agent_only(suite, calc, tmp_path, sandbox):
    """The API key lives in an env file read by dotenvx; the out dir never holds it, verify never sees it.
    The same with --arena-sandbox=none: the sweep works unsandboxed and says so in its rows."""
    secret = f"sk-{uuid.uuid4().hex}"
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    (secrets / "model.env").write_text(f'ARENA_SECRET_MODEL_KEY="{secret}"\n')
    row = calc.row(verify='test -z "$ARENA_SECRET_MODEL_KEY" && python -m pytest -q -p no:cacheprovider tests')
    suite.instances([row])
    with ScriptedModel(fix_turns([{"prompt_tokens": 900, "completion_tokens": 40}] * 2), api_key=secret) as model:
        config = opencode_config(model.base_url, api_key="{env:ARENA_SECRET_MODEL_KEY}")
        (suite.path / "oc.json").write_text(json.dumps(config))
        suite.arms_toml = arm_table("SOLO", "opencode", model=ASKED, executable=OPENCODE, config="oc.json",
                                    secrets={"dir": str(secrets), "files": ["model.env"], "dotenvx": DOTENVX})
        result = suite.run("--arena-arms=SOLO", "-n", "2", f"--arena-sandbox={sandbox}")
        requests = model.chat_requests()
    result.assert_outcomes(passed=1)
    assert [r["kind"] for r in requests] == ["turn", "turn"]  # authorized: the agent saw the key
    assert requests[0]["messages"][-1]["content"].startswith("calc.mul(3, 4) returns 7")  # stdin passed through
    (ledger_row,) = suite.ledger()
    assert ledger_row["provenance"]["secrets"] == {"dir": str(secrets), "files": ["model.env"]}
    assert ledger_row["sandbox"] == (default_sandbox() if sandbox == "auto" else "none")
    leaks = [path for path in (suite.path / "arena-out").rglob("*")
             if path.is_file() and secret.encode() in path.read_bytes()]
    assert leaks == []
    assert secret not in result.stdout.str() + result.stderr.str()


def test_a_missing_secrets_file_is_a_usage_error(suite, calc, tmp_path):
    suite.instances([calc.row()])
    suite.arms_toml = arm_table("SOLO", "opencode", model=ASKED, executable=OPENCODE,
                                secrets={"dir": str(tmp_path), "files": ["nope.env"], "dotenvx": DOTENVX})
    result = suite.run("--arena-arms=SOLO")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*[[]tool.swe_arena.arms.SOLO[]]: field 'secrets': env file 'nope.env' is not in {tmp_path}*"])


def test_ctrl_c_during_an_opencode_cell_stops_it_without_orphans(suite, calc):
    """The agent leaves a setsid'd grandchild (bash tool), its model hangs, the user hits Ctrl-C."""
    mark = uuid.uuid4().hex
    script = [
        {"tool_calls": [{"name": "bash", "arguments": {
            "command": "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started", "description": "detach"}}],
         "usage": {"prompt_tokens": 2000, "completion_tokens": 40, "cached_tokens": 500}},
        {"mode": "hang"},
    ]
    suite.instances([calc.row()])
    with ScriptedModel(script) as model:
        suite.arms_toml = solo(suite, model, env={"ARENA_TEST_MARK": mark})
        suite.write_config()
        with open(suite.path / "sweep.log", "w") as log:
            sweep = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--arena-arms=SOLO"],
                                     cwd=suite.path, stdout=log, stderr=subprocess.STDOUT)
            try:
                model.wait_for_requests(2, timeout=500)  # the grandchild runs, the model hangs
                assert processes_with("ARENA_TEST_MARK", mark)
                sweep.send_signal(signal.SIGINT)
                returncode = sweep.wait(timeout=300)

            finally:
                if sweep.poll() is None:
                    sweep.kill()
    assert returncode == pytest.ExitCode.INTERRUPTED, (suite.path / "sweep.log").read_text()[-3000:]
    assert processes_with("ARENA_TEST_MARK", mark) == []
    (row,) = suite.ledger()
    assert row["status"] == "interrupted"
    # What the agent spent before the stop is read all the same, and its stream is kept.
    assert (row["usage"]["input_tokens"], row["usage"]["cache_read_tokens"], row["usage"]["output_tokens"]) == (
        1500, 500, 40)
    assert (suite.path / "arena-out" / row["run_dir"] / "events.jsonl").read_text()


def test_the_users_config_and_auth_reach_the_cell(suite, calc, tmp_path, monkeypatch):
    """No ``config`` setting: OPENCODE_CONFIG_CONTENT is used; the API key comes only from the user's auth.json."""
    key = f"sk-{uuid.uuid4().hex}"
    data_home = tmp_path / "user-data"
    (data_home / "opencode").mkdir(parents=True)
    (data_home / "opencode" / "auth.json").write_text(json.dumps({"scripted": {"type": "api", "key": key}}))
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    suite.instances([calc.row()])
    with ScriptedModel(fix_turns([{"prompt_tokens": 700, "completion_tokens": 20}] * 2), api_key=key) as model:
        config = opencode_config(model.base_url)
        del config["provider"]["scripted"]["options"]["apiKey"]
        monkeypatch.setenv("OPENCODE_CONFIG_CONTENT", json.dumps(config))
        suite.arms_toml = arm_table("SOLO", "opencode", model=ASKED, executable=OPENCODE)
        result = suite.run("--arena-arms=SOLO")
        kinds = [r["kind"] for r in model.chat_requests()]
    result.assert_outcomes(passed=1)
    assert kinds == ["turn", "turn"]
    (row,) = suite.ledger()
    assert row["provenance"]["opencode_config"] == "OPENCODE_CONFIG_CONTENT"
    leaks = [p for p in (suite.path / "arena-out").rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert leaks == []
