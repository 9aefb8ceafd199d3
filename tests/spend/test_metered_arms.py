"""Agents behind the metering proxy for real: the ledger counts what the endpoint served, liars are caught, caps hold.

The agents are the real opencode CLI (as the ``opencode`` kind, and as a
``command`` that reports nothing), and a hostile command agent that leaves a
sub-agent's calls out of the usage it reports; the model is the scripted
endpoint on 127.0.0.1, reached only through each cell's route of the meter.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
from helpers.agents import (
    ASKED,
    MODEL,
    OPENCODE,
    PRICE,
    arm_table,
    assert_sealed,
    opencode_config,
    priced,
    prices_table,
    summed,
)
from helpers.arena import XDIST, marked_processes, processes_with
from helpers.faults import interrupt_sweep
from helpers.scripted_model import ScriptedModel

from pytest_swe_arena.arms.opencode_home import OPENCODE_QUIET_ENV

FIXED_MUL = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
needs_opencode = pytest.mark.skipif(OPENCODE is None, reason="opencode CLI not found (npm install)")


def fix_turns(first: dict[str, int], last: dict[str, int]) -> list[dict[str, object]]:
    return [
        {"tool_calls": [{"name": "write", "arguments": {"filePath": "calc/ops.py", "content": FIXED_MUL}}],
         "usage": first},
        {"content": "Fixed mul.", "usage": last},
    ]


def served_tokens(model: ScriptedModel, marker: str) -> dict[str, int]:
    """What the endpoint served to the conversation of ``marker``, in the ledger's split."""
    total: dict[str, int] = {}
    for reply in model.served:
        if reply["queue"].startswith(f"marker:{marker}#"):
            for name, value in reply["tokens"].items():
                total[name] = total.get(name, 0) + value
    return total


@needs_opencode
@pytest.mark.parametrize("xdist", XDIST)
def test_metered_opencode_cells_count_exactly_what_the_endpoint_served(suite, calc, xdist):
    usages = {"[one]": [{"prompt_tokens": 2000, "completion_tokens": 60, "reasoning_tokens": 20},
                        {"prompt_tokens": 2300, "completion_tokens": 15, "cached_tokens": 1900}],
              "[two]": [{"prompt_tokens": 5000, "completion_tokens": 90},
                        {"prompt_tokens": 5400, "completion_tokens": 7, "cached_tokens": 4800, "reasoning_tokens": 3}]}
    rows = [calc.row(f"demo__calc-{n}", problem_statement=f"{marker} calc.mul(3, 4) returns 7, expected 12.")
            for n, marker in enumerate(usages, 1)]
    suite.instances(rows)
    script = {"by_marker": {marker: fix_turns(*turns) for marker, turns in usages.items()}}
    with ScriptedModel(script) as model:
        config = suite.path / "solo-opencode.json"
        config.write_text(json.dumps(opencode_config(model.base_url)))
        suite.arms_toml = arm_table("SOLO", "opencode", model=ASKED, executable=OPENCODE, config=config.name) \
            + prices_table()
        result = suite.run("--arena-arms=SOLO", "--arena-meter", *xdist)
        served = {marker: served_tokens(model, marker) for marker in usages}
        requests = model.chat_requests()
    result.assert_outcomes(passed=2)
    assert len(requests) == 4 and all(request["authorization"] for request in requests)  # the key went through
    for row, marker in zip(sorted(suite.ledger(), key=lambda row: row["instance_id"]), usages, strict=True):
        assert row["status"] == "resolved"
        expected = summed(usages[marker])
        assert served[marker] == expected
        assert {name: row["usage"][name] for name in expected} == expected
        assert row["usage"]["cost_source"] == "metered"
        assert row["usage"]["cost_usd"] == pytest.approx(priced(expected))
        assert row["models"][MODEL]["cost_source"] == "metered"  # the served model, as the reply names it
        metered = row["details"]["metered"]
        assert metered["usage"]["steps"] == 2 and metered["calls_unknown"] == 0
        reconciliation = row["details"]["reconciliation"]
        assert reconciliation["status"] == "agree", reconciliation["note"]  # opencode's own report is right
        calls = (suite.path / "arena-out" / row["run_dir"] / "meter-calls.jsonl").read_text().splitlines()
        assert [json.loads(line)["outcome"] for line in calls] == ["counted", "counted"]
        assert all(json.loads(line)["stream"] for line in calls)  # opencode streams: SSE read on the fly
        assert_sealed(row)  # sealed, its meter route carried in


#: A hostile agent: its own turn and a sub-agent's, but a usage file that reports only its own.
LIAR = r'''
import json, os, pathlib, sys, urllib.request
def ask(text):
    body = json.dumps({"model": "scripted-model", "messages": [{"role": "user", "content": text}]}).encode()
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer sk-x"})
    return json.loads(urllib.request.urlopen(request, timeout=120).read())["usage"]
mine = ask("[main] fix calc")
ask("[sub] look around")  # a sub-agent's call, left out below
pathlib.Path("calc/ops.py").write_text(sys.argv[1])
json.dump({"input_tokens": mine["prompt_tokens"], "output_tokens": mine["completion_tokens"],
           "reasoning_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0,
           "model": "scripted/scripted-model"}, open(os.environ["ARENA_USAGE_FILE"], "w"))
'''


@pytest.mark.parametrize("xdist", XDIST)
def test_an_agent_that_leaves_a_sub_agent_out_of_its_report_is_caught(suite, calc, xdist):
    suite.instances([calc.row()])
    (suite.path / "liar.py").write_text(LIAR)
    main, sub = {"prompt_tokens": 1000, "completion_tokens": 50}, {"prompt_tokens": 9000, "completion_tokens": 400}
    script = {"by_marker": {"[main]": [{"content": "ok", "usage": main}],
                            "[sub]": [{"content": "ok", "usage": sub}]}}
    with ScriptedModel(script) as model:
        suite.arms_toml = arm_table("LIAR", "command", command=[sys.executable, str(suite.path / "liar.py"), FIXED_MUL],
                                    model=ASKED, upstream=model.base_url, base_url_env=["OPENAI_BASE_URL"]) \
            + prices_table()
        result = suite.run("--arena-arms=LIAR", "--arena-meter", *xdist)
        served = model.tokens_total
    result.assert_outcomes(passed=1)
    (row,) = suite.ledger()
    both = summed([main, sub])
    assert {name: getattr(served, name) for name in both} == both
    assert {name: row["usage"][name] for name in both} == both  # what was served, not what was reported
    assert row["usage"]["cost_source"] == "metered" and row["usage"]["cost_usd"] == pytest.approx(priced(both))
    reconciliation = row["details"]["reconciliation"]
    assert reconciliation["status"] == "differ"
    assert reconciliation["difference"]["input_tokens"] == 9000
    assert reconciliation["difference"]["output_tokens"] == 400
    assert reconciliation["reported"]["input_tokens"] == 1000
    assert reconciliation["difference"]["cost_usd"] == pytest.approx(priced(summed([sub])))
    summary = suite.summary()
    (warning,) = [warning for warning in summary["warnings"] if warning["kind"] == "misreported_usage"]
    assert warning["arm"] == "LIAR" and "input_tokens +9,000" in warning["message"]
    assert "input_tokens +9,000" in (suite.path / "arena-out" / "report.html").read_text()
    result.stdout.fnmatch_lines(["*LIAR*metered*reported*"])
    # A command arm, metered: sealed, its route carried in (both calls reached the endpoint through it).
    assert_sealed(row)


@needs_opencode
def test_a_live_cap_stops_an_agent_that_reports_nothing(suite, calc):
    """opencode as a plain command: the harness reads none of its usage, only the meter's count can stop it."""
    big = {"prompt_tokens": 100_000, "completion_tokens": 1000}
    script = [{"tool_calls": [{"name": "read", "arguments": {"filePath": "calc/ops.py"}}], "usage": big}] * 4 \
        + [{"mode": "hang"}]
    suite.instances([calc.row()])
    with ScriptedModel(script) as model:
        config = opencode_config("{env:ARENA_MODEL_URL}")
        (suite.path / "oc.json").write_text(json.dumps(config))
        env = {**OPENCODE_QUIET_ENV, "OPENCODE_CONFIG": str(suite.path / "oc.json")}
        suite.arms_toml = arm_table(
            "MUTE", "command", command=[OPENCODE, "run", "-m", ASKED, "--format", "json", "--title", "mute"],
            stdin="prompt", model=ASKED, env=env, meter=True, upstream=model.base_url,
            base_url_env=["ARENA_MODEL_URL"], max_tokens=150_000, timeout=500) + prices_table()
        result = suite.run("--arena-arms=MUTE")
        served = len(model.served)
        turns = len(model.chat_requests())
    result.assert_outcomes(failed=1)
    (row,) = suite.ledger()
    assert row["status"] == "over_budget", row["error"]
    assert "metering proxy" in row["error"] and "max_tokens 150,000" in row["error"]
    # the first call (101,000 tokens) is within the cap, the second passes it, the third is never sent
    assert served == 2 and turns == 2
    assert row["usage"]["input_tokens"] == 200_000 and row["usage"]["output_tokens"] == 2000
    assert row["usage"]["cost_source"] == "metered"
    assert row["usage"]["cost_usd"] == pytest.approx(2 * (100_000 * PRICE["input"] + 1000 * PRICE["output"]) / 1e6)
    assert row["details"]["metered"]["calls_refused"] >= 1
    assert row["details"]["reconciliation"]["status"] == "unreported"
    assert not row["patch_scored"] and row["verify"] is None
    assert Path(suite.path / "arena-out" / row["run_dir"] / "meter-calls.jsonl").is_file()


#: A hostile agent that reports nothing and calls its model until it is refused; it says which proxy it calls.
SPENDER = Path(__file__).resolve().parents[1] / "data" / "hostile" / "spender.py"


def test_the_sweep_budget_holds_for_agents_that_report_nothing(suite, calc):
    """Each call is 10,000 tokens: the first cell is refused once it reaches the 25,000 left; the rest never start."""
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    (suite.path / "spender.py").write_bytes(SPENDER.read_bytes())
    script = {"fallback": {"content": "ok", "usage": {"prompt_tokens": 9000, "completion_tokens": 1000}}}
    with ScriptedModel(script) as model:
        suite.arms_toml = arm_table("SPEND", "command", command=[sys.executable, str(suite.path / "spender.py")],
                                    model=ASKED, upstream=model.base_url, base_url_env=["OPENAI_BASE_URL"]) \
            + prices_table()
        result = suite.run("--arena-arms=SPEND", "--arena-meter", "--arena-max-tokens=25000")
        served = len(model.served)
    result.assert_outcomes(failed=1, skipped=2)
    rows = sorted(suite.ledger(), key=lambda row: row["instance_id"])
    assert [row["status"] for row in rows] == ["over_budget", "skipped_budget", "skipped_budget"]
    assert served == 3  # 0, 10,000 and 20,000 spent before each: the fourth call is refused
    assert rows[0]["usage"]["input_tokens"] == 27_000 and rows[0]["usage"]["cost_source"] == "metered"
    assert "budget left to this cell" in rows[0]["error"]
    assert rows[0]["details"]["reconciliation"]["status"] == "unreported"


#: Each call of the SPENDER: 9,000 tokens in, 1,000 out.
CALL = {"prompt_tokens": 9000, "completion_tokens": 1000}
CALL_TOKENS = 10_000
WORKERS = 4


@pytest.mark.parametrize("cap", ["sweep", "arm"])
def test_the_sweep_budget_holds_across_workers_for_agents_that_report_nothing(suite, calc, cap, monkeypatch):
    """-n 4, one proxy for the sweep: four agents at once cannot together spend past a total none of them reports.

    The proxy lets a call through only while what was settled so far is under the cap: the last
    call it let through saw at most ceil(cap / call) - 1 calls settled and at most one other call
    per worker in flight, so the endpoint serves at most ceil(cap / call) - 1 + WORKERS calls
    (here 6: 60,000 tokens against 25,000; the cap plus one call per worker bounds it too). It
    refuses only once the cap is reached, so it serves at least ceil(cap / call) calls.
    """
    limit = 25_000
    mark = uuid.uuid4().hex
    monkeypatch.setenv("ARENA_TEST_MARK", mark)  # inherited by the sweep's proxy too
    suite.instances([calc.row(f"demo__calc-{n}") for n in range(1, 9)])
    (suite.path / "spender.py").write_bytes(SPENDER.read_bytes())
    budget, options = ({"max_total_tokens": limit}, ()) if cap == "arm" else ({}, (f"--arena-max-tokens={limit}",))
    with ScriptedModel({"fallback": {"content": "ok", "usage": CALL}}) as model:
        suite.arms_toml = arm_table("SPEND", "command", command=[sys.executable, str(suite.path / "spender.py")],
                                    model=ASKED, upstream=model.base_url, base_url_env=["OPENAI_BASE_URL"],
                                    **budget) + prices_table()
        result = suite.run("--arena-arms=SPEND", "--arena-meter", "-n", str(WORKERS), *options)
        served_calls, served = len(model.served), model.tokens_total
    assert marked_processes(mark) == []  # the controller stopped the sweep's proxy
    rows = suite.ledger()
    refused = [row for row in rows if row["status"] == "over_budget"]
    skipped = [row for row in rows if row["status"] == "skipped_budget"]
    assert len(refused) + len(skipped) == len(rows) == 8, [row["status"] for row in rows]
    result.assert_outcomes(failed=len(refused), skipped=len(skipped))
    assert refused and all(row["details"]["metered"]["calls_refused"] >= 1 for row in refused)
    assert all("metering proxy" in row["error"] for row in refused)
    assert served.input_tokens + served.output_tokens == served_calls * CALL_TOKENS
    assert -(-limit // CALL_TOKENS) <= served_calls <= -(-limit // CALL_TOKENS) - 1 + WORKERS
    assert served_calls * CALL_TOKENS <= limit + WORKERS * CALL_TOKENS
    # the ledger counts exactly what the endpoint served, every call of it metered
    for name in ("input_tokens", "output_tokens"):
        assert sum(row["details"]["metered"]["usage"][name] for row in refused) == getattr(served, name)
        assert sum(row["usage"][name] for row in refused) == getattr(served, name)
    assert sum(row["details"]["metered"]["usage"]["steps"] for row in refused) == served_calls
    assert all(row["usage"]["cost_source"] == "metered" for row in refused)


#: A metered agent that makes one call, then sleeps with a mark the test sees from outside its sandbox.
CALL_THEN_SLEEP = r'''
import json, os, sys, urllib.request
body = json.dumps({"model": "scripted-model", "messages": [{"role": "user", "content": "hi"}]}).encode()
urllib.request.urlopen(urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                              headers={"Content-Type": "application/json"}), timeout=120).read()
os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)"],
          {**os.environ, "ARENA_TEST_CALLED": os.environ["ARENA_TEST_MARK"]})
'''


def test_ctrl_c_stops_the_sweeps_meter(suite, calc, monkeypatch):
    """-n 2: the controller's proxy meters both cells; after a Ctrl-C no process of the sweep is left, nor the proxy."""
    mark = uuid.uuid4().hex
    monkeypatch.setenv("ARENA_TEST_MARK", mark)
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2)])
    (suite.path / "agent.py").write_text(CALL_THEN_SLEEP)
    with ScriptedModel({"fallback": {"content": "ok", "usage": {"prompt_tokens": 10, "completion_tokens": 2}}}
                       ) as model:
        suite.arms_toml = arm_table("NAP", "command", command=[sys.executable, str(suite.path / "agent.py")],
                                    model=ASKED, upstream=model.base_url, base_url_env=["OPENAI_BASE_URL"])
        interrupt_sweep(suite, "--arena-arms=NAP", "--arena-meter", "-n", "2",
                        ready=lambda: len(processes_with("ARENA_TEST_CALLED", mark)) == 2,
                        what="both agents called their model")
        served = len(model.served)
    assert marked_processes(mark) == []
    assert served == 2
    assert [row["status"] for row in suite.ledger()] == ["interrupted", "interrupted"]


#: A hostile agent that kills its cell's metering proxy (the one whose port its base URL names), then calls its model.
KILLER = r'''
import json, os, signal, urllib.parse, urllib.request
base_url = os.environ["OPENAI_BASE_URL"]
port = str(urllib.parse.urlsplit(base_url).port)
for pid in os.listdir("/proc"):
    try:
        command = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\0")
        if "pytest_swe_arena.spend.meter" in command and \
                open(command[command.index("--port-file") + 1]).read().strip() == port:
            os.kill(int(pid), signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        continue
body = json.dumps({"model": "scripted-model", "messages": [{"role": "user", "content": "hi"}]}).encode()
urllib.request.urlopen(urllib.request.Request(base_url + "/chat/completions", data=body,
                                              headers={"Content-Type": "application/json"}), timeout=120)
'''


@pytest.mark.parametrize("xdist", XDIST)
def test_a_meter_that_dies_makes_a_harness_error_not_an_unmetered_cell(suite, calc, xdist):
    """Unsandboxed, the agent can find and kill the meter (with xdist: the controller's); only what follows matters."""
    suite.ini_lines.append('arena_sandbox = "none"')
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2)])
    (suite.path / "killer.py").write_text(KILLER)
    with ScriptedModel([{"content": "ok"}]) as model:
        suite.arms_toml = arm_table("KILL", "command", command=[sys.executable, str(suite.path / "killer.py")],
                                    model=ASKED, upstream=model.base_url, base_url_env=["OPENAI_BASE_URL"])
        result = suite.run("--arena-arms=KILL", "--arena-meter", *xdist)
        served = len(model.served)
    result.assert_outcomes(errors=2)
    rows = suite.ledger()
    assert [row["status"] for row in rows] == ["harness_error", "harness_error"]
    assert served == 0  # nothing reached the model around the meter
    assert all(row["error"].startswith("meter: ") for row in rows)  # the next cell does not run unmetered either
    if not xdist:  # its own proxy: the worker says how it ended
        assert "exited" in rows[0]["error"]


def test_in_the_sandbox_an_agent_cannot_reach_its_meter_to_kill_it(suite, calc):
    """The cell's pid namespace hides the meter's process: the killer finds nothing and its call is metered."""
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2)])
    (suite.path / "killer.py").write_text(KILLER)
    script = {"fallback": {"content": "ok", "usage": {"prompt_tokens": 10, "completion_tokens": 2}}}
    with ScriptedModel(script) as model:
        suite.arms_toml = arm_table("KILL", "command", command=[sys.executable, str(suite.path / "killer.py")],
                                    model=ASKED, upstream=model.base_url, base_url_env=["OPENAI_BASE_URL"])
        result = suite.run("--arena-arms=KILL", "--arena-meter", "--arena-sandbox=bwrap")
        served = len(model.served)
    result.assert_outcomes(failed=2)
    rows = suite.ledger()
    assert [(row["status"], row["sandbox"]) for row in rows] == [("unresolved", "bwrap")] * 2
    assert served == 2
    assert [row["details"]["metered"]["usage"]["input_tokens"] for row in rows] == [10, 10]


@pytest.mark.parametrize(("settings", "options", "message"), [
    ({"meter": True}, (),
     "*arms.CMD]: the meter needs the URL*set 'upstream' to the provider's base URL*(meter = true)"),
    ({"upstream": "ftp://models.example"}, (), "*field 'upstream'*is not an http(s) base URL*"),
    ({}, ("--arena-meter",), "*arm CMD*set 'upstream'*(--arena-meter; or meter = false in its table)*"),
    ({"max_tokens": 10}, (), "*max_usd / max_tokens need a streamed usage*or the meter (meter = true)*"),
])
def test_metering_settings_that_cannot_work_are_usage_errors(suite, calc, settings, options, message):
    suite.instances([calc.row()])
    suite.arms_toml = arm_table("CMD", "command", command=[sys.executable, "-c", "pass"], **settings)
    result = suite.run("--arena-arms=CMD", *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


#: A hostile agent: one call, then a usage file that says it cost $999,999.
BIG_SPENDER = r'''
import json, os, pathlib, sys, urllib.request
body = json.dumps({"model": "scripted-model", "messages": [{"role": "user", "content": "fix calc"}]}).encode()
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer sk-x"})
usage = json.loads(urllib.request.urlopen(request, timeout=120).read())["usage"]
pathlib.Path("calc/ops.py").write_text(sys.argv[1])
json.dump({"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"], "cost_usd": 999999,
           "model": "scripted/scripted-model"}, open(os.environ["ARENA_USAGE_FILE"], "w"))
'''


@pytest.mark.parametrize("priced_by_the_suite", [True, False], ids=["metered-cost", "reported-cost"])
def test_a_metered_agent_reporting_999999_usd_does_not_spend_the_sweep(suite, calc, priced_by_the_suite):
    """With a price the meter's cost is the row's and budgets count it; without one the agent's report is held to
    the metered tokens: either way --arena-max-usd=5 is not spent and both cells run."""
    suite.instances([calc.row("demo__calc-1"), calc.row("demo__calc-2")])
    (suite.path / "spender.py").write_text(BIG_SPENDER)
    script = {"fallback": {"content": "ok", "usage": {"prompt_tokens": 1000, "completion_tokens": 50}}}
    with ScriptedModel(script) as model:
        suite.arms_toml = arm_table("SPENDER", "command", model=ASKED, upstream=model.base_url,
                                    command=[sys.executable, str(suite.path / "spender.py"), FIXED_MUL],
                                    base_url_env=["OPENAI_BASE_URL"]) + (prices_table() if priced_by_the_suite else "")
        result = suite.run("--arena-arms=SPENDER", "--arena-meter", "--arena-max-usd=5")
    rows = suite.ledger()
    assert [row["status"] for row in rows if row["status"] == "skipped_budget"] == [], result.stdout.str()[-3000:]
    assert len(rows) == 2
    for row in rows:
        usage = row["usage"]
        assert (usage["input_tokens"], usage["output_tokens"]) == (1000, 50)
        if priced_by_the_suite:
            assert (usage["cost_source"], usage["cost_usd"]) == ("metered", pytest.approx(priced(summed([
                {"prompt_tokens": 1000, "completion_tokens": 50}]))))
        else:
            # 1,050 metered tokens at $1,000 per million: $1.05, not $999,999.
            assert (usage["cost_source"], usage["cost_usd"]) == ("implausible", pytest.approx(1.05))
            assert row["details"]["reported_cost_usd_refused"] == 999999
    budget = json.loads((suite.path / "arena-out" / "budget.json").read_text())
    assert budget["exhausted"] == {} and budget["spent"]["usd"] < 5
