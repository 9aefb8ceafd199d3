"""The metering proxy on its own: each API's usage read from JSON and SSE replies, caps, refusals, keys, its process."""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from dataclasses import asdict
from typing import Any

import pytest
from helpers.arena import XDIST
from helpers.scripted_model import ScriptedModel

from pytest_swe_arena.spend.budget import BudgetGate, BudgetLimits, Limit, SpendCap
from pytest_swe_arena.spend.meter.accounts import NO_CAP, CellState, MeterError, Upstream, reconcile
from pytest_swe_arena.spend.meter.cells import Metering, SessionMeter
from pytest_swe_arena.spend.meter.process import MeterProcess
from pytest_swe_arena.spend.meter.proxy import MeterProxy
from pytest_swe_arena.spend.usage import Usage

PRICES = {"scripted-model": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}}
USAGE = {"prompt_tokens": 1200, "completion_tokens": 80, "cached_tokens": 500, "cache_write_tokens": 100,
         "reasoning_tokens": 30}
KEY = "sk-never-logged-1234"


def call(url: str, body: dict[str, Any] | None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


#: (api, upstream attribute of ScriptedModel, path under it, body, headers) for a streamed and a whole reply
def model_call(api: str, stream: bool, model: ScriptedModel) -> tuple[str, str, dict[str, Any], dict[str, str]]:
    messages = [{"role": "user", "content": "fix it"}]
    if api == "chat":
        body: dict[str, Any] = {"model": "scripted-model", "messages": messages, "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return model.base_url, "/chat/completions", body, {"Authorization": f"Bearer {KEY}"}
    if api == "responses":
        return model.base_url, "/responses", {"model": "scripted-model", "input": "fix it", "stream": stream}, \
            {"Authorization": f"Bearer {KEY}"}
    if api == "anthropic":
        return model.root_url, "/v1/messages", {"model": "scripted-model", "max_tokens": 100, "messages": messages,
                                                "stream": stream}, {"x-api-key": KEY}
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return model.root_url, f"/v1beta/models/scripted-model:{method}", \
        {"contents": [{"role": "user", "parts": [{"text": "fix it"}]}]}, {"x-goog-api-key": KEY}


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@pytest.mark.parametrize("api", ["chat", "responses", "anthropic", "gemini"])
def test_each_api_is_forwarded_unchanged_and_counted_exactly(api, stream, tmp_path):
    turns = [{"content": "one", "reasoning": "think", "usage": USAGE},
             {"content": "two", "usage": {"prompt_tokens": 1500, "completion_tokens": 20}}]
    log = tmp_path / "calls.jsonl"
    with ScriptedModel(turns) as model, MeterProxy(PRICES, log=log) as proxy:
        upstream_url, path, body, headers = model_call(api, stream, model)
        route = proxy.open_cell("cell-1", "A", [Upstream("up", upstream_url)])
        replies = [call(route.base_url("up") + path, body, headers) for _ in turns]
        state = proxy.close_cell(route)
        served = model.served
        recorded = model.requests
    assert [status for status, _ in replies] == [200, 200]
    # the agent got what the endpoint sent, and the endpoint got the agent's key
    assert b"one" in replies[0][1] and b"two" in replies[1][1]
    assert all(request["authorization"] for request in recorded)
    assert [request["stream"] for request in recorded] == [stream, stream]
    expected = served[0]["tokens"], served[1]["tokens"]
    total = {name: expected[0][name] + expected[1][name] for name in expected[0]}
    usage = state.usage
    assert {name: getattr(usage, name) for name in total} == total
    assert usage.steps == 2 and state.calls_unknown == 0 and state.complete
    assert usage.cost_source == "metered"
    price = PRICES["scripted-model"]
    assert usage.cost_usd == pytest.approx((total["input_tokens"] * price["input"]
                                            + (total["output_tokens"] + total["reasoning_tokens"]) * price["output"]
                                            + total["cache_read_tokens"] * price["cache_read"]
                                            + total["cache_write_tokens"] * price["cache_write"]) / 1e6)
    assert [call["stream"] for call in state.calls] == [stream, stream]
    assert KEY not in log.read_text()  # neither the header nor Gemini's ?key= is ever written


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_an_agent_that_hangs_up_early_still_has_its_call_counted(stream):
    """The agent reads the reply's head and leaves: the upstream still serves (and bills) the call, so the proxy
    reads the rest of the reply for its usage. A streamed reply comes slowly, so the agent is gone before its usage."""
    turn = {"content": "a long answer", "usage": USAGE, **({"mode": "slow", "chunk_delay": 0.2} if stream else {})}
    with ScriptedModel([turn]) as model, MeterProxy(PRICES) as proxy:
        route = proxy.open_cell("c", "A", [Upstream("up", model.base_url)])
        request = urllib.request.Request(route.base_url("up") + "/chat/completions", headers={
            "Content-Type": "application/json"}, data=json.dumps(
                {"model": "scripted-model", "messages": [], "stream": stream}).encode())
        with urllib.request.urlopen(request, timeout=120) as reply:
            assert reply.status == 200
            reply.fp.raw._sock.shutdown(socket.SHUT_RDWR)  # gone after the head: nothing more is read
        state = proxy.close_cell(route)  # waits for the call still in flight to settle
        (served,) = model.served
    assert state.calls_unknown == 0 and state.complete, state.calls
    assert {name: getattr(state.usage, name) for name in served["tokens"]} == served["tokens"]


def test_a_call_the_meter_cannot_read_is_forwarded_and_counted_unknown(tmp_path):
    with ScriptedModel([]) as model, MeterProxy(PRICES) as proxy:
        route = proxy.open_cell("c", "A", [Upstream("up", model.base_url)])
        status, _ = call(route.base_url("up") + "/embeddings/new-api", {"model": "scripted-model", "input": "x"})
        state = proxy.close_cell(route)
        (request,) = model.requests
    assert status == 404 and request["path"] == "/v1/embeddings/new-api"  # the endpoint's own answer
    assert state.calls_unknown == 1 and not state.complete
    assert "no API the meter knows" in state.calls[0]["problem"]
    assert reconcile(Usage(1, 1, 0, 0, 0, cost_usd=0.1), state).status == "incomplete"


def test_a_cell_cap_refuses_the_call_after_the_one_that_passed_it_in_the_apis_own_error_shape():
    big = {"prompt_tokens": 4000, "completion_tokens": 100}
    with ScriptedModel([{"content": "a", "usage": big}] * 3) as model, MeterProxy(PRICES) as proxy:
        route = proxy.open_cell("c", "A", [Upstream("up", model.root_url)], SpendCap(None, 5000, None))
        url = route.base_url("up") + "/v1/messages"
        body = {"model": "scripted-model", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}
        first, second, third = (call(url, body, {"x-api-key": KEY}) for _ in range(3))
        state = proxy.close_cell(route)
        served = len(model.served)
    assert first[0] == 200 and second[0] == 200  # 4,100 tokens, then 8,200: past the cap of 5,000
    assert third[0] == 400 and served == 2  # never sent to the model
    error = json.loads(third[1])
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert "cap" in error["error"]["message"]
    assert state.calls_refused == 1 and state.usage.total_tokens == 8200
    assert state.over_budget_reason and "max_tokens 5,000" in state.over_budget_reason


def test_the_budget_left_to_a_cell_holds_and_a_closed_route_answers_404(tmp_path):
    with ScriptedModel([{"content": "a", "usage": {"prompt_tokens": 1000, "completion_tokens": 0}}] * 3) as model, \
            MeterProxy(PRICES) as proxy:
        route = proxy.open_cell("c", "A", [Upstream("up", model.base_url)], budget=Limit(max_tokens=1000))
        url = route.base_url("up") + "/chat/completions"
        body = {"model": "scripted-model", "messages": []}
        statuses = [call(url, body)[0] for _ in range(2)]
        state = proxy.close_cell(route)
        after = call(url, body)[0]
    assert statuses == [200, 400]  # 1,000 spent reaches what was left
    assert "budget left to this cell" in (state.over_budget_reason or "")
    assert after == 404


def test_an_unreachable_upstream_is_a_502_counted_as_failed():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once closed
    with MeterProxy(PRICES) as proxy:
        route = proxy.open_cell("c", "A", [Upstream("up", f"http://127.0.0.1:{port}/v1")])
        status, body = call(route.base_url("up") + "/chat/completions", {"model": "scripted-model", "messages": []})
        state = proxy.close_cell(route)
    assert status == 502 and b"cannot reach the upstream" in body
    assert state.calls_failed == 1 and state.calls_unknown == 0


def test_reconciliation_names_what_the_agent_left_out():
    with ScriptedModel([{"content": "main", "usage": {"prompt_tokens": 100, "completion_tokens": 10}},
                        {"content": "sub", "usage": {"prompt_tokens": 900, "completion_tokens": 90}}]) as model, \
            MeterProxy(PRICES) as proxy:
        route = proxy.open_cell("c", "A", [Upstream("up", model.base_url)])
        for _ in range(2):
            call(route.base_url("up") + "/chat/completions", {"model": "scripted-model", "messages": []})
        state = proxy.close_cell(route)
    reported = Usage(100, 10, 0, 0, 0, cost_usd=(100 * 3 + 10 * 15) / 1e6, cost_source="reported")
    found = reconcile(reported, state)
    assert found.status == "differ"
    assert found.difference["input_tokens"] == 900 and found.difference["output_tokens"] == 90
    assert found.difference["cost_usd"] == pytest.approx((900 * 3 + 90 * 15) / 1e6)
    assert reconcile(state.usage, state).status == "agree"
    assert reconcile(Usage(), state).status == "unreported"


def test_a_meter_process_listens_where_it_is_told_and_its_routes_name_that_address(tmp_path):
    """--arena-meter-listen: the proxy binds that address alone, and every route it opens names it."""
    process = MeterProcess(tmp_path / "meter", PRICES, listen=("127.0.0.2", 0))
    try:
        client = process.start()
        port = int(client.url.rsplit(":", 1)[1])
        assert client.url == f"http://127.0.0.2:{port}"
        with ScriptedModel([{"content": "a", "usage": USAGE}]) as model:
            route = client.open_cell("c", "A", [Upstream("up", model.base_url)])
            assert route.base_url("up").startswith(f"http://127.0.0.2:{port}/c/")
            status, _ = call(route.base_url("up") + "/chat/completions", {"model": "scripted-model", "messages": []})
            assert status == 200 and client.close_cell(route).usage.steps == 1
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=60):
            pass  # not on 127.0.0.1: only where it was told
    finally:
        process.stop()


def test_the_meter_process_serves_cells_over_its_control_api(tmp_path):
    process = MeterProcess(tmp_path / "meter", PRICES)
    try:
        client = process.start()
        with ScriptedModel([{"content": "a", "usage": USAGE}]) as model:
            route = client.open_cell("c", "A", [Upstream("up", model.base_url)], SpendCap(1.0, None, None))
            status, _ = call(route.base_url("up") + "/chat/completions", {"model": "scripted-model", "messages": []},
                             {"Authorization": f"Bearer {KEY}"})
            live = client.cell_state(route)
            state = client.close_cell(route)
        assert status == 200 and live.usage.steps == 1
        assert isinstance(state, CellState) and state.usage == live.usage and len(state.calls) == 1
        # the control API needs the secret: a cell's agent cannot open or read cells
        assert call(route.base_urls["up"].split("/c/")[0] + "/_meter/totals", None)[0] == 403
        with pytest.raises(MeterError, match="no open cell"):
            client.cell_state(route)
        assert KEY not in process.log.read_text()
    finally:
        process.stop()
    with pytest.raises(MeterError, match="not started"):
        process.check()  # stopped: every later use of it says so


def test_sessions_share_the_sweeps_meter_process_and_its_totals(tmp_path):
    """As under xdist: the controller's session starts the proxy, each worker's opens its cells' routes there."""
    limits = BudgetLimits(Limit(), {"A": Limit(max_tokens=1)})
    with ScriptedModel({"fallback": {"content": "a", "usage": USAGE}}) as model:
        plans = {"A": Metering(None, (Upstream("up", model.base_url),), NO_CAP)}
        controller = SessionMeter(plans, PRICES, limits=limits)
        try:
            address = controller.share()
            workers = [SessionMeter(plans, PRICES, limits=limits, shared=address) for _ in range(2)]
            routes = [worker.open(f"cell-{n}", "A") for n, worker in enumerate(workers)]
            body = {"model": "scripted-model", "messages": []}
            statuses = [call(route.base_url("up") + "/chat/completions", body)[0] for route in routes]
            states = []
            for n, (worker, route) in enumerate(zip(workers, routes, strict=True)):
                (tmp_path / f"run-{n}").mkdir()
                states.append(worker.close(route, tmp_path / f"run-{n}"))
                worker.stop()  # a worker's session end leaves the sweep's proxy running
            assert controller.share() == address
        finally:
            controller.stop()
    assert statuses == [200, 400]  # the arm's total, reached by the first cell, holds for the second
    assert len(model.served) == 1
    assert states[0].usage.steps == 1 and states[1].calls_refused == 1
    assert "arm A's total" in (states[1].over_budget_reason or "")
    failed = SessionMeter(plans, PRICES, shared={"error": "the sweep's metering proxy did not start: no aiohttp"})
    with pytest.raises(MeterError, match="did not start: no aiohttp"):
        failed.open("c", "A")


def test_budget_gate_says_what_is_left_of_the_sweep_and_the_arm(tmp_path):
    path = tmp_path / "budget.json"
    gate = BudgetGate(path)
    limits = BudgetLimits(Limit(max_usd=1.0, max_tokens=10_000), {"A": Limit(max_usd=0.25)})
    assert gate.left("A", limits) == Limit(0.25, 10_000)  # no row yet: the whole budget
    path.write_text(json.dumps({"spent": {"usd": 0.9, "tokens": 4000}, "arms": {"A": {"usd": 0.05, "tokens": 1}}}))
    assert gate.left("A", limits) == Limit(pytest.approx(0.1), 6000)
    assert gate.left("B", limits) == Limit(pytest.approx(0.1), 6000)
    path.write_text(json.dumps({"spent": {"usd": 2.0, "tokens": 20_000}}))
    assert gate.left("B", limits) == Limit(0.0, 0)


def test_a_cap_travels_to_the_process_as_json():
    cap = SpendCap(0.5, 100, {"input": 1.0})
    assert SpendCap(**json.loads(json.dumps(asdict(cap)))) == cap


def block_modules(suite, monkeypatch, *names: str) -> None:
    """The sweep's Python (and its workers') sees ``names`` as not installed: a sitecustomize on PYTHONPATH."""
    site = suite.path / "site-blocker"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in names))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))


@pytest.mark.parametrize("xdist", XDIST)
def test_the_meter_without_aiohttp_is_a_usage_error_naming_the_extra_before_any_cell(suite, calc, monkeypatch, xdist):
    suite.instances([calc.row()])
    block_modules(suite, monkeypatch, "aiohttp")
    result = suite.run("--arena-arms=GOLD", "--arena-meter", *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: option --arena-meter (the metering proxy) needs aiohttp, which is not "
                                 "installed: it comes with the 'meter' extra, "
                                 "pip install 'pytest-swe-arena[[]meter[]]'*"])
    assert result.stderr.str().count("needs aiohttp") == 1
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not (suite.path / "arena-out" / "ledger.jsonl").exists(), "no cell ran"
