"""Tests of the scripted OpenAI-compatible endpoint itself (no opencode needed)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from helpers.scripted_model import (  # noqa: E402
    TITLE_MARKER,
    ScriptedModel,
    ScriptedModelProcess,
    classify,
)

AGENT_SYSTEM = "You are opencode, an interactive CLI tool that helps users."


def chat_body(
    user: str = "Fix the bug",
    *,
    stream: bool = True,
    system: str = AGENT_SYSTEM,
    model: str = "scripted-model",
    tools: bool = True,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = [
            {"type": "function", "function": {"name": "write", "parameters": {"type": "object", "properties": {}}}}
        ]
    return body


def post(base_url: str, body: dict[str, Any], timeout: float = 60.0) -> urllib.request.Request:
    req = urllib.request.Request(
        base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer sk-test", "x-session-id": "ses_test"},
        method="POST",
    )
    return urllib.request.urlopen(req, timeout=timeout)


def read_sse(resp: Any) -> list[Any]:
    """Parse an SSE body into a list of JSON chunks (and the "[DONE]" marker)."""
    events: list[Any] = []
    for raw in resp.read().decode().split("\n\n"):
        raw = raw.strip()
        if not raw:
            continue
        assert raw.startswith("data: "), raw
        data = raw[len("data: ") :]
        events.append(data if data == "[DONE]" else json.loads(data))
    return events


EDIT_TURN = {
    "content": "Writing it.",
    "tool_calls": [{"name": "write", "arguments": {"filePath": "/w/a.txt", "content": "hi\n"}}],
    "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "cached_tokens": 300, "reasoning_tokens": 11},
}


def test_streaming_tool_call_and_usage_chunk() -> None:
    with ScriptedModel([EDIT_TURN, "All done."]) as model:
        with post(model.base_url, chat_body()) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"] == "text/event-stream"
            events = read_sse(resp)

    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Writing it."

    # tool call: first delta has id + name, argument fragments follow
    calls = [tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "write" and calls[0]["id"]
    args = "".join(tc["function"].get("arguments", "") for tc in calls)
    assert json.loads(args) == {"filePath": "/w/a.txt", "content": "hi\n"}

    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finish == ["tool_calls"]

    # the OpenAI stream_options usage chunk: last one, with empty choices
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {
        "prompt_tokens": 1200,
        "completion_tokens": 40,
        "total_tokens": 1240,
        "prompt_tokens_details": {"cached_tokens": 300},
        "completion_tokens_details": {"reasoning_tokens": 11},
    }


def test_non_streaming_reply() -> None:
    with ScriptedModel([EDIT_TURN]) as model:
        with post(model.base_url, chat_body(stream=False)) as resp:
            body = json.loads(resp.read())
    assert body["object"] == "chat.completion"
    msg = body["choices"][0]["message"]
    assert msg["content"] == "Writing it."
    assert msg["tool_calls"][0]["function"]["name"] == "write"
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["usage"]["prompt_tokens"] == 1200


def test_models_endpoint() -> None:
    with ScriptedModel({"by_model": {"worker": ["x"]}}) as model:
        with urllib.request.urlopen(model.base_url + "/models", timeout=60) as resp:
            ids = [m["id"] for m in json.loads(resp.read())["data"]]
    assert "worker" in ids and "scripted-model" in ids


def test_records_requests_and_usage_total_and_fallback() -> None:
    script = {"turns": [EDIT_TURN], "title": "Fix bug"}
    with ScriptedModel(script) as model:
        # a title request (as opencode sends it) does not consume the scripted turn
        title_body = chat_body('"Fix the bug"', system=TITLE_MARKER + ". Output ONLY a title.", tools=False)
        events = read_sse(post(model.base_url, title_body))
        title = "".join(c["choices"][0]["delta"].get("content") or "" for c in events[:-1] if c["choices"])
        assert title == "Fix bug"

        read_sse(post(model.base_url, chat_body(model="big-model")))
        # script exhausted: the fallback final text "done"
        events = read_sse(post(model.base_url, chat_body()))
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in events[:-1] if c["choices"])
        assert text == "done"

        reqs = model.chat_requests()
        assert [r["kind"] for r in reqs] == ["title", "turn", "fallback"]
        assert reqs[1]["model"] == "big-model"
        assert reqs[1]["messages"][1] == {"role": "user", "content": "Fix the bug"}
        assert reqs[1]["tool_names"] == ["write"]
        assert reqs[1]["session"] == "ses_test"
        assert reqs[1]["authorization"] is True
        assert "authorization" not in reqs[1]["headers"]  # never record the key
        assert reqs[1]["stream_options"] == {"include_usage": True}
        assert model.remaining() == 0

        total = model.usage_total
        assert total["prompt_tokens"] == 5 + 1200 + 10
        assert total["completion_tokens"] == 3 + 40 + 2
        assert total["prompt_tokens_details"]["cached_tokens"] == 300
        assert total["completion_tokens_details"]["reasoning_tokens"] == 11


def test_routing_by_marker_and_model() -> None:
    script = {
        "turns": ["main-1"],
        "by_marker": {"SUBTASK-7": ["sub-1", "sub-2"]},
        "by_model": {"tiny": ["tiny-1"]},
    }

    def reply(body: dict[str, Any]) -> str:
        events = read_sse(post(model.base_url, body))
        return "".join(c["choices"][0]["delta"].get("content") or "" for c in events[:-1] if c["choices"])

    with ScriptedModel(script) as model:
        assert reply(chat_body("please do SUBTASK-7 now")) == "sub-1"
        assert reply(chat_body("main task")) == "main-1"
        assert reply(chat_body("please do SUBTASK-7 now")) == "sub-2"
        assert reply(chat_body("anything", model="tiny")) == "tiny-1"
        assert [r["queue"] for r in model.chat_requests()] == [
            "marker:SUBTASK-7#0",
            "turns#0",
            "marker:SUBTASK-7#1",
            "model:tiny#0",
        ]


def test_classify() -> None:
    assert classify(chat_body(system=TITLE_MARKER + " ...", tools=False)) == "title"
    assert classify(chat_body(system="You are a context summarization agent. ...", tools=False)) == "summary"
    assert classify(chat_body()) == "turn"
    assert classify(chat_body(tools=False)) == "turn"


def test_hang_mode_client_times_out_and_close_releases_the_handler() -> None:
    model = ScriptedModel([{"mode": "hang"}]).start()
    threads_before = set(threading.enumerate())
    try:
        # The endpoint never answers: only the client's own timeout can end the call.
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            post(model.base_url, chat_body(), timeout=0.5)
        assert [r["mode"] for r in model.wait_for_requests(1, timeout=60)] == ["hang"]
        handlers = [thread for thread in threading.enumerate() if thread not in threads_before]
        assert handlers, "the hung request has a handler thread"
    finally:
        model.close()
    for handler in handlers:  # hung handlers are released on close
        handler.join(timeout=60)
        assert not handler.is_alive(), f"{handler.name} still hangs after close()"


def test_stall_mode_sends_headers_then_nothing() -> None:
    with ScriptedModel([{"mode": "stall"}]) as model:
        connection = http.client.HTTPConnection("127.0.0.1", model.port, timeout=60)
        try:
            connection.request("POST", "/v1/chat/completions", body=json.dumps(chat_body()),
                               headers={"Content-Type": "application/json", "Authorization": "Bearer sk-test"})
            sock = connection.sock  # the response takes it over
            assert sock is not None
            resp = connection.getresponse()
            assert resp.status == 200
            first = resp.readline()
            assert first.startswith(b"data: ")
            # Nothing more is ever sent, so a short wait for it cannot be cut short by a slow machine.
            sock.settimeout(1.0)
            with pytest.raises((TimeoutError, socket.timeout)):
                resp.read()
        finally:
            connection.close()


def test_slow_mode_delays() -> None:
    with ScriptedModel([{"mode": "slow", "delay": 0.4, "content": "late"}]) as model:
        t0 = time.monotonic()
        read_sse(post(model.base_url, chat_body()))
        assert time.monotonic() - t0 >= 0.4


def test_error_mode() -> None:
    with ScriptedModel([{"mode": "error", "status": 503, "retry_after_ms": 20}]) as model:
        with pytest.raises(urllib.error.HTTPError) as info:
            post(model.base_url, chat_body())
        assert info.value.code == 503
        assert info.value.headers["retry-after-ms"] == "20"
        assert json.loads(info.value.read())["error"]["code"] == 503


def test_api_key_is_enforced_when_set() -> None:
    with ScriptedModel(["ok"], api_key="sk-test") as model:
        read_sse(post(model.base_url, chat_body()))  # post() sends "Bearer sk-test"
    assert [r["kind"] for r in model.chat_requests()] == ["turn"]
    with ScriptedModel(["ok"], api_key="sk-other") as model:
        with pytest.raises(urllib.error.HTTPError) as info:
            post(model.base_url, chat_body())
        assert info.value.code == 401
        assert [r["kind"] for r in model.chat_requests()] == ["unauthorized"]
        assert model.remaining() == 1


def test_bad_turn_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown turn mode"):
        ScriptedModel([{"mode": "explode"}])


def test_separate_process(tmp_path: Path) -> None:
    with ScriptedModelProcess({"turns": ["from another process"]}, tmp_path / "srv") as srv:
        events = read_sse(post(srv.base_url, chat_body()))
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in events[:-1] if c["choices"])
        assert text == "from another process"
        state = srv.state()
        assert [r["kind"] for r in state["requests"]] == ["turn"]
        assert state["usage_total"]["prompt_tokens"] == 0
        proc = srv.proc
    assert proc.wait(timeout=60) == 0  # exits cleanly on SIGTERM
    recorded = [json.loads(line) for line in (tmp_path / "srv" / "requests.jsonl").open()]
    assert recorded[0]["model"] == "scripted-model"
