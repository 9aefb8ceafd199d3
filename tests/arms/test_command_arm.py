"""The ``command`` kind: an agent CLI from a template, its usage file or stream, its failures and leftovers."""

from __future__ import annotations

import json
import sys
import uuid

import pytest
from helpers.agents import ASKED, OPENCODE, arm_table, assert_sealed, default_sandbox, opencode_config, prices_table
from helpers.arena import XDIST, marked_processes, processes_with
from helpers.faults import interrupt_sweep
from helpers.scripted_model import ScriptedModel

AGENT = '''
import json, os, pathlib, subprocess, sys, time
prompt = pathlib.Path(sys.argv[1]).read_text()
assert "calc.mul(3, 4)" in prompt and "Work only inside your current working directory" in prompt
mode = sys.argv[2]
print("agent", mode, "in", os.getcwd(), flush=True)
if mode == "fix":
    pathlib.Path("calc/ops.py").write_text(
        "def add(a, b):\\n    return a + b\\n\\n\\ndef mul(a, b):\\n    return a * b\\n")
    # a grandchild that escapes the process group and outlives the agent
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    usage = {"input_tokens": 1200, "output_tokens": 300, "reasoning_tokens": 0, "cache_read_tokens": 0,
             "cache_write_tokens": 0, "steps": 4, "model": sys.argv[3]}
    pathlib.Path(os.environ["ARENA_USAGE_FILE"]).write_text(json.dumps(usage))
elif mode == "fail":
    print("boom", file=sys.stderr)
    sys.exit(3)
elif mode == "hang":
    time.sleep(300)
'''


@pytest.mark.parametrize("xdist", XDIST)
def test_command_arms_run_report_and_fail_cleanly(suite, calc, xdist):
    mark = uuid.uuid4().hex
    agent = suite.path / "agent.py"
    agent.write_text(AGENT)
    suite.instances([calc.row()])
    env = {"ARENA_TEST_MARK": mark}
    python = sys.executable
    suite.arms_toml = (
        arm_table("CMD", "command", command=[python, str(agent), "{prompt_file}", "fix", "{model}"],
                  model="acme/coder-1", env=env)
        + arm_table("CMDSH", "command", shell=True, env=env,
                    command=f"{python} {agent} {{prompt_file}} fix shell/model && echo shell-done")
        + arm_table("FAILS", "command", command=[python, str(agent), "{prompt_file}", "fail"], env=env)
        + arm_table("HANGS", "command", command=[python, str(agent), "{prompt_file}", "hang"], timeout=2, grace=1,
                    env=env)
        # a program only the cell can resolve, and it is not there: the setup's fault, not the arm's
        + arm_table("NOPROG", "command", command=["{workspace}/no-such-agent", "{prompt_file}"], env=env)
        + prices_table("acme/coder-1", {"input": 1.0, "output": 2.0})
    )
    result = suite.run("--arena-arms=CMD,CMDSH,FAILS,HANGS,NOPROG", *xdist)
    result.assert_outcomes(passed=2, failed=2, errors=1)
    rows = {row["arm"]: row for row in suite.ledger()}
    out = suite.path / "arena-out"
    # The terminal says why an arm failed (its stderr) and where its logs are, without a traceback.
    result.stdout.fnmatch_lines(["*arm_error: command FAILS exited with status 3*", "*last lines of stderr.log:",
                                 "*  boom", f"*run dir: {out}/runs/{calc.row()['instance_id']}/FAILS"])
    text = result.stdout.str()
    assert "Traceback" not in text and not any(line.startswith(("E   ", "> ")) for line in text.splitlines())

    cmd = rows["CMD"]
    assert cmd["status"] == "resolved"
    assert {row["sandbox"] for row in rows.values()} == {default_sandbox()}
    assert cmd["usage"]["input_tokens"] == 1200 and cmd["usage"]["steps"] == 4
    assert cmd["usage"]["cost_source"] == "priced"
    assert cmd["usage"]["cost_usd"] == pytest.approx((1200 * 1.0 + 300 * 2.0) / 1e6)
    assert cmd["asked_model"] == cmd["served_model"] == "acme/coder-1"
    assert (out / cmd["run_dir"] / "stdout.log").read_text().startswith("agent fix in ")
    assert json.loads((out / cmd["run_dir"] / "usage.json").read_text())["input_tokens"] == 1200

    shell = rows["CMDSH"]
    assert shell["status"] == "resolved"
    assert shell["served_model"] == "shell/model" and shell["asked_model"] is None
    assert shell["usage"]["cost_usd"] is None and shell["usage"]["cost_source"] == "unknown"  # no price: unknown
    assert (out / shell["run_dir"] / "stdout.log").read_text().endswith("shell-done\n")

    fails = rows["FAILS"]
    assert fails["status"] == "arm_error" and "exited with status 3" in fails["error"]
    assert fails["usage"]["cost_usd"] is None and fails["usage"]["input_tokens"] is None  # unknown, not 0
    assert (out / fails["run_dir"] / "stderr.log").read_text() == "boom\n"

    hangs = rows["HANGS"]
    assert hangs["status"] == "timeout" and "did not finish within 2 s" in hangs["error"]
    # Stopped at its timeout, not when the agent would have ended (300 s); how soon is bench/'s business.
    assert 2 <= hangs["phases"]["arm"] < 300

    noprog = rows["NOPROG"]
    assert noprog["status"] == "harness_error"  # not scored; run again on resume
    assert "cannot start command NOPROG: No such file or directory: " in noprog["error"]
    assert "/no-such-agent" in noprog["error"] and "Traceback" not in noprog["error"]

    assert processes_with("ARENA_TEST_MARK", mark) == []  # the escaped grandchildren were reaped too


@pytest.mark.parametrize(("settings", "message"), [
    ({"command": ["agent", "{prompt}"]},
     "field 'command': unknown placeholder {prompt} in '{prompt}'; known: {prompt_file}, *"),
    ({"command": "agent {prompt_file}"}, "field 'command': a string needs shell = true*"),
    ({"command": ["agent", "{}"]}, "field 'command': unknown placeholder {} in '{}'; known: {prompt_file}, *"),
    ({"command": ["agent", "{workspace.name}"]},
     "field 'command': unknown placeholder {workspace.name} in '{workspace.name}'; known: {prompt_file}, *"),
    ({"command": "agent {prompt_file!r}", "shell": True}, "field 'command': unknown placeholder {prompt_file!r}*"),
    ({"command": ["agent", "-m", "{model}"]}, "field 'model' is required: the command uses {model}"),
    ({"command": ["no-such-agent-cli"]}, "field 'command': 'no-such-agent-cli' is not on PATH nor in *"),
    ({"command": ["true"], "usage": "claude"}, "field 'usage': 'claude' is not one of file, opencode"),
    ({"command": ["true"], "max_usd": 1}, "max_usd / max_tokens need a streamed usage*"),
    ({"command": ["true"], "usage": "opencode", "model": "acme/unpriced", "max_usd": 1},
     "field 'max_usd': no price is known for model 'acme/unpriced'*"),
    ({"command": ["true"], "usage": "opencode", "opencode": "/bin/false"}, "*/false --version exited with 1*"),
    ({"command": ["true"], "timeout": -1}, "field 'timeout': -1 is not a positive number"),
    ({"command": ["true"], "env": {"A B": "x"}}, "field 'env': A B = 'x' is not NAME = \"text\""),
    ({"command": ["true"], "colour": "red"}, "field 'colour': unknown setting for kind 'command'*"),
])
def test_bad_command_settings_are_usage_errors(suite, calc, settings, message):
    suite.instances([calc.row()])
    suite.arms_toml = arm_table("CMD", "command", **settings)
    result = suite.run("--arena-arms=CMD", subprocess=False)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*[[]tool.swe_arena.arms.CMD[]]: {message}"])


@pytest.mark.skipif(OPENCODE is None, reason="opencode CLI not found (npm install)")
def test_command_with_the_opencode_stream_parser(suite, calc):
    """opencode driven through a template, the prompt on stdin; usage parsed from its stream and store."""
    usage = {"prompt_tokens": 1500, "completion_tokens": 50}
    fixed = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
    script = [{"tool_calls": [{"name": "write", "arguments": {"filePath": "calc/ops.py", "content": fixed}}],
               "usage": usage}, {"content": "done", "usage": usage}]
    suite.instances([calc.row()])
    with ScriptedModel(script) as model:
        (suite.path / "oc.json").write_text(json.dumps(opencode_config(model.base_url)))
        suite.arms_toml = arm_table(
            "OCCMD", "command", command=[OPENCODE, "run", "-m", "{model}", "--format", "json", "--title", "t"],
            model=ASKED, stdin="prompt", usage="opencode", opencode=OPENCODE, config="oc.json",
        ) + prices_table()
        result = suite.run("--arena-arms=OCCMD")
        endpoint = model.base_url
    result.assert_outcomes(passed=1)
    (row,) = suite.ledger()
    assert row["usage"]["input_tokens"] == 3000 and row["usage"]["output_tokens"] == 100
    assert row["usage"]["steps"] == 2 and row["usage"]["cost_source"] == "priced"
    assert row["served_model"] == ASKED and row["provenance"]["agent_version"] == "1.18.33"
    assert row["sandbox"] == default_sandbox()  # the real opencode, driven by a template, in its sandbox
    assert_sealed(row, endpoint)  # its endpoint named (the opencode config's baseURL), carried in


#: Once its usage file is written, the agent becomes a sleeper whose environment says so: the test sees that
#: from outside the cell's sandbox, which shows the agent nothing of the test's files.
INTERRUPTED_AGENT = """
import json, os, pathlib, sys
usage = {"models": {"lab/big": {"input_tokens": 900, "output_tokens": 90, "cost_usd": 0.02},
                    "lab/small-2025-01-31": {"input_tokens": 300, "output_tokens": 30}}, "model": "lab/big"}
pathlib.Path(os.environ["ARENA_USAGE_FILE"]).write_text(json.dumps(usage))
os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)"],
          {**os.environ, "ARENA_TEST_WROTE_USAGE": os.environ["ARENA_TEST_MARK"]})
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_ctrl_c_keeps_what_the_command_agent_spent(suite, calc, xdist, monkeypatch):
    """The agent wrote its usage file (two models, one priced by its dated name), then the user hits Ctrl-C."""

    mark = uuid.uuid4().hex
    monkeypatch.setenv("ARENA_TEST_MARK", mark)
    agent = suite.path / "agent.py"
    agent.write_text(INTERRUPTED_AGENT)
    suite.instances([calc.row()])
    suite.arms_toml = (arm_table("CMD", "command", command=[sys.executable, str(agent)], model="lab/big")
                       + prices_table("lab/small", {"input": 1.0, "output": 2.0}))
    interrupt_sweep(suite, "--arena-arms=CMD", *xdist, ready=lambda: processes_with("ARENA_TEST_WROTE_USAGE", mark),
                    what="its agent wrote its usage file")
    assert marked_processes(mark) == []
    (row,) = suite.ledger()
    assert row["status"] == "interrupted"
    assert (row["usage"]["input_tokens"], row["usage"]["output_tokens"], row["usage"]["reasoning_tokens"]) == (
        1200, 120, 0)  # absent reasoning and cache fields count 0: the total is known
    assert row["models"]["lab/small-2025-01-31"]["cost_usd"] == pytest.approx((300 * 1.0 + 30 * 2.0) / 1e6)
    assert row["usage"]["cost_usd"] == pytest.approx(0.02 + (300 * 1.0 + 30 * 2.0) / 1e6)
    assert row["served_model"] == "lab/big" and row["model_mismatch"] is False


#: A command agent that asks the endpoint (argv[1]) once, writes what the reply's usage says to its usage file,
#: then asks again; that call hangs, so only the arm's timeout ends it.
CALLING_AGENT = """
import json, os, pathlib, sys, urllib.request
def ask():
    request = urllib.request.Request(sys.argv[1] + "/chat/completions", headers={"Content-Type": "application/json"},
        data=json.dumps({"model": "scripted-model", "messages": [{"role": "user", "content": "fix calc"}]}).encode())
    return json.load(urllib.request.urlopen(request, timeout=600))
usage = ask()["usage"]
cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
reasoning = usage.get("completion_tokens_details", {}).get("reasoning_tokens", 0)
report = {"input_tokens": usage["prompt_tokens"] - cached, "cache_read_tokens": cached,
          "output_tokens": usage["completion_tokens"] - reasoning, "reasoning_tokens": reasoning, "steps": 1}
pathlib.Path(os.environ["ARENA_USAGE_FILE"]).write_text(json.dumps(report))
ask()
"""


def test_a_timed_out_command_agent_keeps_the_spend_it_made(suite, calc):
    """The agent's usage file, written after its first call, is read when the timeout stops it."""
    agent = suite.path / "calling_agent.py"
    agent.write_text(CALLING_AGENT)
    script = [{"content": "Look at calc.", "usage": {"prompt_tokens": 3000, "completion_tokens": 40,
                                                     "cached_tokens": 1000, "reasoning_tokens": 10}},
              {"mode": "hang"}]
    suite.instances([calc.row()])
    with ScriptedModel(script) as model:
        suite.arms_toml = (arm_table("CMD", "command", command=[sys.executable, str(agent), model.base_url],
                                     model=ASKED, timeout=60, grace=2) + prices_table())
        result = suite.run("--arena-arms=CMD")
        served = model.tokens_total
        answered = len(model.served)
    result.assert_outcomes(failed=1)
    (row,) = suite.ledger()
    assert row["status"] == "timeout", row["error"]
    assert "did not finish within 60 s" in row["error"]
    assert answered == 1  # the second call never got an answer: the agent could not have ended by itself
    assert {k: row["usage"][k] for k in served.to_json()} == served.to_json() == {
        "input_tokens": 2000, "cache_read_tokens": 1000, "cache_write_tokens": 0, "output_tokens": 30,
        "reasoning_tokens": 10}
    assert row["usage"]["cost_source"] == "priced" and row["usage"]["cost_usd"] > 0
