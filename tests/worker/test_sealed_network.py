"""A sealed cell (issue 30): its agent reaches its model, metered, and nothing else; every attempt shows in its row.

Each hostile arm is a real process in the real sandbox of a real sweep (``tests/data/hostile/reach_out.py``):
one attack each, then one model call through ``--arena-meter``. Every target is first shown reachable from
the harness's side, so a refusal is the seal's doing.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.agents import ASKED, arm_table
from helpers.hosts import reachable
from helpers.scripted_model import ScriptedModel

from pytest_swe_arena.cell.environment import create_cell_environment
from pytest_swe_arena.cell.network import cell_network, open_gate
from pytest_swe_arena.cell.sandbox import CellSandbox, probe_bwrap
from pytest_swe_arena.spend.meter.accounts import Upstream
from pytest_swe_arena.spend.meter.process import MeterProcess

REACH_OUT = Path(__file__).parents[1] / "data" / "hostile" / "reach_out.py"
SCRIPT = {"fallback": {"content": "ok", "usage": {"prompt_tokens": 10, "completion_tokens": 2}}}

pytestmark = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")


def test_a_sealed_cell_reaches_its_metered_model_and_nothing_else(suite, calc, make_hosts, tmp_path):
    """The host's loopback, a test host in a network namespace, another cell's meter route and a name: each
    attack is refused and listed in the row's ``details.network.refused``, while the cell's model call is metered."""
    [host] = make_hosts(1)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    loopback_port = listener.getsockname()[1]
    other_meter = MeterProcess(tmp_path / "other-meter", {})
    with ScriptedModel(SCRIPT) as model:
        client = other_meter.start()
        try:
            other = client.open_cell("other-cell", "OTHER", [Upstream("model", model.base_url)])
            other_url = other.base_url("model")
            other_port = int(other_url.split(":")[2].split("/")[0])
            attacks = {"LOOPBACK": ("connect", f"127.0.0.1:{loopback_port}", ("127.0.0.1", loopback_port)),
                       "HOST": ("connect", f"{host.address}:22", (host.address, 22)),
                       "METER": ("http", other_url, ("127.0.0.1", other_port)),
                       "NAME": ("resolve", "pypi.org", ("pypi.org", 53))}
            assert reachable(host.address, 22) and reachable("127.0.0.1", other_port)  # the targets are real
            suite.instances([calc.row()])
            suite.arms_toml = "".join(
                arm_table(name, "command", model=ASKED, upstream=model.base_url, base_url_env=["OPENAI_BASE_URL"],
                          command=[sys.executable, str(REACH_OUT), attack, target, "{run_dir}/reach.json"])
                for name, (attack, target, _) in attacks.items())
            suite.run(f"--arena-arms={','.join(attacks)}", "--arena-meter")
            other_calls = client.cell_state(other).models
        finally:
            other_meter.stop()
        served = len(model.served)
    with pytest.raises(BlockingIOError):
        listener.accept()  # nothing reached the host's loopback
    listener.close()
    assert other_calls == {}  # nor the other cell's route
    assert served == len(attacks)  # each cell's one model call, and nothing else
    rows = {row["arm"]: row for row in suite.ledger()}
    for name, (_, _, refused) in attacks.items():
        row = rows[name]
        network = row["details"]["network"]
        assert network["agent"] == "sealed", network
        reach = json.loads((suite.path / "arena-out" / row["run_dir"] / "reach.json").read_text())
        assert reach["reached"] is False, (name, reach)
        assert {"host": refused[0], "port": refused[1]} in [
            {"host": seen["host"], "port": seen["port"]} for seen in network["refused"]], (name, network)
        assert row["details"]["metered"]["usage"]["input_tokens"] == 10, (name, row["details"])


def test_an_allow_listed_host_is_reached_through_the_proxy_and_the_next_is_refused(suite, calc, make_hosts):
    """``network = ["HOST:22"]``: a CONNECT to the test host's sshd gets its banner; one to the host's loopback is
    refused (403) and listed; the model call is still metered."""
    [host] = make_hosts(1)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    allowed, next_one = f"{host.address}:22", f"127.0.0.1:{port}"
    with ScriptedModel(SCRIPT) as model:
        suite.instances([calc.row()])
        suite.arms_toml = arm_table("ALLOW", "command", model=ASKED, upstream=model.base_url,
                                    base_url_env=["OPENAI_BASE_URL"], network=[allowed],
                                    command=[sys.executable, str(REACH_OUT), "proxy", f"{allowed},{next_one}",
                                             "{run_dir}/reach.json"])
        suite.run("--arena-arms=ALLOW", "--arena-meter")
        served = len(model.served)
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()
    [row] = suite.ledger()
    reach = json.loads((suite.path / "arena-out" / row["run_dir"] / "reach.json").read_text())
    through = {one["target"]: one for one in reach["through"]}
    assert " 200 " in through[allowed]["status"] and through[allowed]["first"].startswith("SSH-2.0-"), reach
    assert " 403 " in through[next_one]["status"], reach
    network = row["details"]["network"]
    assert (network["agent"], network["allow"]) == ("sealed", [allowed])
    assert {"host": "127.0.0.1", "port": port, "count": 1} in network["refused"], network
    assert served == 1 and row["details"]["metered"]["usage"]["input_tokens"] == 10


def test_an_open_cell_says_so_and_reaches_the_host(suite, calc):
    """Without the sandbox the cell is open: its row says so and why, and the same attack reaches its target."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    with ScriptedModel(SCRIPT) as model:
        suite.instances([calc.row()])
        suite.arms_toml = arm_table("LOOPBACK", "command", model=ASKED, upstream=model.base_url,
                                    base_url_env=["OPENAI_BASE_URL"],
                                    command=[sys.executable, str(REACH_OUT), "connect", f"127.0.0.1:{port}",
                                             "{run_dir}/reach.json"])
        result = suite.run("--arena-arms=LOOPBACK", "--arena-sandbox=none")
    listener.settimeout(30)
    listener.accept()[0].close()  # the attack got through
    listener.close()
    [row] = suite.ledger()
    assert row["details"]["network"] == {"agent": "open", "endpoints": [],
                                         "reason": "no sandbox (--arena-sandbox=none)",
                                         "grading": "open", "grading_reason": "no sandbox (--arena-sandbox=none)"}
    [arm] = json.loads((suite.path / "arena-out" / "summary.json").read_text())["arms"]
    assert arm["unsealed"] == 1
    result.stdout.fnmatch_lines(["LOOPBACK * ~ *", "~ not sealed: *"])
    overview = (suite.path / "arena-out" / "viewer" / "data" / "overview.js").read_text()
    assert '"arm":"LOOPBACK"' in overview and '"unsealed":1' in overview  # the viewer's arms table marks it


def test_the_gate_carries_the_model_endpoints_port_and_no_other_address(tmp_path):
    """The gate carries the endpoint's port of the sandbox's 127.0.0.1 to the model, and nothing else: the same
    port at another loopback address is refused and reported (a real sandbox, without a sweep)."""
    with ScriptedModel(SCRIPT) as model:
        port = int(model.base_url.split(":")[2].split("/")[0])
        cell = create_cell_environment(tmp_path / "cell")
        script = ("import socket, sys\n"
                  "for host in ('127.0.0.1', '127.0.0.2'):\n"
                  "    try:\n"
                  f"        socket.create_connection((host, {port}), timeout=30).close()\n"
                  "        print('reached')\n"
                  "    except OSError:\n"
                  "        print('refused')\n")
        with open_gate(cell_network([model.base_url])) as gate:
            argv = CellSandbox(cell, gate=gate).wrap([sys.executable, "-c", script], cell.root, cell.env())
            done = subprocess.run(argv, env=cell.env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.split() == ["reached", "refused"], done.stderr
    assert gate is not None and gate.connections == {port: 1}
    assert gate.refusals() == [{"host": "127.0.0.2", "port": port, "count": 1}]


@pytest.mark.parametrize("value", ["closed", [], ["pypi.org/simple"], [443]])
def test_a_network_setting_that_is_not_a_policy_is_a_usage_error(suite, calc, value):
    suite.instances([calc.row()])
    suite.arms_toml = arm_table("CMD", "command", command=[sys.executable, "-c", "pass"], network=value)
    result = suite.run("--arena-arms=CMD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*arms.CMD]: field 'network': * is not \"sealed\" (the default), \"open\", "
                                 "or a list of hosts such as*"])
