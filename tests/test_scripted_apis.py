"""Tests of the scripted endpoint's API encoders: Responses, Anthropic Messages, Gemini (Chat: test_scripted_model.py).

One turn is served through each API, as JSON and as server-sent events; the
reply must carry the turn's text, reasoning and tool calls in that API's
shape, and its usage must read back to the same disjoint token counts.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from helpers.scripted_apis import API_BY_NAME, Tokens, api_for, tokens_from_spec
from helpers.scripted_model import ScriptedModel

TURN = {
    "reasoning": "Think first.",
    "content": "Editing now.",
    "tool_calls": [{"name": "edit_file", "arguments": {"path": "a.txt", "text": "bye"}, "id": "call_1"}],
    "usage": {"prompt_tokens": 1000, "completion_tokens": 80, "cached_tokens": 600, "cache_write_tokens": 100,
              "reasoning_tokens": 30},
}
TOKENS = Tokens(input_tokens=300, cache_read_tokens=600, cache_write_tokens=100, output_tokens=50, reasoning_tokens=30)


def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    return urllib.request.urlopen(request, timeout=10)


def sse(response: Any) -> list[tuple[str | None, Any]]:
    """(event name, data) of each server-sent event."""
    events = []
    for frame in response.read().decode().split("\n\n"):
        if not frame.strip():
            continue
        name, data = None, None
        for line in frame.splitlines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = line[len("data: "):]
        assert data is not None, frame
        events.append((name, data if data == "[DONE]" else json.loads(data)))
    return events


def test_a_usage_spec_splits_into_disjoint_tokens_and_refuses_counts_that_do_not_add_up() -> None:
    assert tokens_from_spec(TURN["usage"]) == TOKENS
    assert TOKENS.prompt_tokens == 1000 and TOKENS.completion_tokens == 80
    assert tokens_from_spec({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 4}}) == Tokens(6, 4)
    with pytest.raises(ValueError, match="must not exceed"):
        tokens_from_spec({"prompt_tokens": 10, "cached_tokens": 8, "cache_write_tokens": 5})
    with pytest.raises(ValueError, match="must not exceed"):
        ScriptedModel([{"usage": {"completion_tokens": 1, "reasoning_tokens": 2}}])


@pytest.mark.parametrize("name", ["chat", "responses", "anthropic", "gemini"])
def test_every_api_reads_its_own_usage_back(name: str) -> None:
    api = API_BY_NAME[name]
    expected = TOKENS if name in ("anthropic", "responses") else Tokens(400, 600, 0, 50, 30)
    # Chat and Gemini have no cache-write field: a cache write is plain input there
    assert api.read_usage(api.usage(TOKENS)) == expected


def test_routes() -> None:
    assert api_for("/v1/chat/completions").name == "chat"  # type: ignore[union-attr]
    assert api_for("/v1/responses").name == "responses"  # type: ignore[union-attr]
    assert api_for("/v1/messages").name == "anthropic"  # type: ignore[union-attr]
    assert api_for("/v1beta/models/gemini-2.5-pro:streamGenerateContent").name == "gemini"  # type: ignore[union-attr]
    assert api_for("/v1/embeddings") is None


# --------------------------------------------------------------------------- Responses


RESPONSES_BODY = {"model": "gpt-5.5", "stream": True, "instructions": "You are Codex.",
                  "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}],
                  "tools": [{"type": "function", "name": "edit_file", "parameters": {}},
                            {"type": "custom", "name": "apply_patch"}]}


def test_responses_stream_has_reasoning_text_function_call_and_usage() -> None:
    with ScriptedModel([TURN]) as model:
        events = sse(post(model.base_url + "/responses", RESPONSES_BODY))
    names = [name for name, _ in events]
    assert names[0] == "response.created" and names[-1] == "response.completed"
    assert all(data["type"] == name for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    done = [data["item"] for name, data in events if name == "response.output_item.done"]
    assert [item["type"] for item in done] == ["reasoning", "message", "function_call"]
    assert done[0]["summary"][0]["text"] == "Think first."
    assert done[1]["content"][0]["text"] == "Editing now."
    assert (done[2]["call_id"], done[2]["name"], json.loads(done[2]["arguments"])) == (
        "call_1", "edit_file", {"path": "a.txt", "text": "bye"})
    deltas = "".join(d["delta"] for n, d in events if n == "response.function_call_arguments.delta")
    assert json.loads(deltas) == {"path": "a.txt", "text": "bye"}
    usage = events[-1][1]["response"]["usage"]
    assert usage == {"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 100},
                     "output_tokens": 80, "output_tokens_details": {"reasoning_tokens": 30}, "total_tokens": 1080}
    assert model.served[0]["tokens"] == TOKENS.to_json()
    request = model.model_requests()[0]
    assert (request["api"], request["model"], request["stream"]) == ("responses", "gpt-5.5", True)
    assert request["tool_names"] == ["edit_file", "apply_patch"]


def test_responses_custom_tool_gets_its_raw_input_and_json_reply_has_no_events() -> None:
    patch = "*** Begin Patch\n*** End Patch\n"
    turn = {"tool_calls": [{"name": "apply_patch", "arguments": patch}], "usage": {"prompt_tokens": 5}}
    with ScriptedModel([turn]) as model:
        body = json.loads(post(model.base_url + "/responses", {**RESPONSES_BODY, "stream": False}).read())
    assert body["object"] == "response" and body["status"] == "completed"
    (item,) = body["output"]
    assert (item["type"], item["name"], item["input"]) == ("custom_tool_call", "apply_patch", patch)


# --------------------------------------------------------------------------- Anthropic Messages


ANTHROPIC_BODY = {"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 100,
                  "system": [{"type": "text", "text": "You are Claude Code."}],
                  "messages": [{"role": "user", "content": [{"type": "text", "text": "fix it"}]}],
                  "tools": [{"name": "edit_file", "input_schema": {}}]}


def test_anthropic_stream_has_thinking_text_tool_use_and_usage_split_between_start_and_delta() -> None:
    with ScriptedModel([TURN], api_key="sk-ant") as model:
        events = sse(post(model.root_url + "/v1/messages?beta=true", ANTHROPIC_BODY, {"x-api-key": "sk-ant"}))
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    starts = [data["content_block"] for name, data in events if name == "content_block_start"]
    assert [block["type"] for block in starts] == ["thinking", "text", "tool_use"]
    assert starts[2]["id"] == "toolu_call_1" and starts[2]["name"] == "edit_file"
    partial = "".join(d["delta"]["partial_json"] for n, d in events
                      if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta")
    assert json.loads(partial) == {"path": "a.txt", "text": "bye"}
    start_usage = events[0][1]["message"]["usage"]
    assert (start_usage["input_tokens"], start_usage["cache_read_input_tokens"],
            start_usage["cache_creation_input_tokens"], start_usage["output_tokens"]) == (300, 600, 100, 1)
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert delta["usage"]["output_tokens"] == 80 and delta["usage"]["output_tokens_details"] == {"thinking_tokens": 30}
    assert API_BY_NAME["anthropic"].read_usage(delta["usage"]) == TOKENS
    assert model.model_requests()[0]["authorization"] is True
    assert "x-api-key" not in model.model_requests()[0]["headers"]  # never record the key


def test_anthropic_json_reply_wrong_key_and_count_tokens() -> None:
    with ScriptedModel([TURN], api_key="sk-ant") as model:
        with pytest.raises(urllib.error.HTTPError) as info:
            post(model.root_url + "/v1/messages", ANTHROPIC_BODY, {"x-api-key": "wrong"})
        assert info.value.code == 401
        assert json.loads(info.value.read())["error"]["type"] == "authentication_error"
        counted = json.loads(post(model.root_url + "/v1/messages/count_tokens", ANTHROPIC_BODY,
                                  {"x-api-key": "sk-ant"}).read())
        assert counted == {"input_tokens": 1000}
        body = json.loads(post(model.root_url + "/v1/messages", {**ANTHROPIC_BODY, "stream": False},
                               {"x-api-key": "sk-ant"}).read())
    assert [block["type"] for block in body["content"]] == ["thinking", "text", "tool_use"]
    assert body["stop_reason"] == "tool_use" and body["content"][2]["input"] == {"path": "a.txt", "text": "bye"}
    assert [r["kind"] for r in model.model_requests()] == ["unauthorized", "count_tokens", "turn"]
    assert len(model.served) == 1


# --------------------------------------------------------------------------- Gemini


GEMINI_BODY = {"systemInstruction": {"parts": [{"text": "You are Gemini CLI."}]},
               "contents": [{"role": "user", "parts": [{"text": "<session_context/>"}, {"text": "fix it"}]}],
               "tools": [{"functionDeclarations": [{"name": "edit_file"}]}]}


def test_gemini_stream_has_thought_text_function_call_and_final_usage() -> None:
    with ScriptedModel([TURN], api_key="g-key") as model:
        url = model.root_url + "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        events = sse(post(url, GEMINI_BODY, {"x-goog-api-key": "g-key"}))
    chunks = [data for _, data in events]
    parts = [part for chunk in chunks for part in chunk["candidates"][0]["content"]["parts"]]
    assert parts == [{"text": "Think first.", "thought": True}, {"text": "Editing now."},
                     {"functionCall": {"name": "edit_file", "args": {"path": "a.txt", "text": "bye"}}}]
    assert [c["candidates"][0].get("finishReason") for c in chunks] == [None, None, "STOP"]
    assert chunks[-1]["usageMetadata"] == {"promptTokenCount": 1000, "candidatesTokenCount": 50,
                                           "totalTokenCount": 1080, "cachedContentTokenCount": 600,
                                           "thoughtsTokenCount": 30}
    request = model.model_requests()[0]
    assert (request["api"], request["model"], request["stream"], request["tool_names"]) == (
        "gemini", "gemini-2.5-pro", True, ["edit_file"])


def test_gemini_json_reply_key_in_query_and_aux_routing_by_system_prompt() -> None:
    script = {"turns": ["main reply"], "aux": {"Task Routing AI": {"content": '{"score": 1}'}}}
    router = {**GEMINI_BODY, "systemInstruction": {"parts": [{"text": "You are a specialized Task Routing AI."}]}}
    with ScriptedModel(script, api_key="g-key") as model:
        url = model.root_url + "/v1beta/models/{}:generateContent?key=g-key"
        for body in (router, GEMINI_BODY, router):
            reply = json.loads(post(url.format("flash"), body).read())
            assert reply["candidates"][0]["finishReason"] == "STOP"
    assert [(r["kind"], r["queue"]) for r in model.model_requests()] == [
        ("aux", "aux:Task Routing AI"), ("turn", "turns#0"), ("aux", "aux:Task Routing AI")]
    assert model.remaining() == 0 and len(model.served) == 3


def test_one_script_serves_every_api_in_turn_order() -> None:
    with ScriptedModel(["one", "two", "three", "four"]) as model:
        post(model.base_url + "/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
        post(model.base_url + "/responses", {**RESPONSES_BODY, "stream": False})
        post(model.root_url + "/v1/messages", {**ANTHROPIC_BODY, "stream": False})
        post(model.root_url + "/v1beta/models/g:generateContent", GEMINI_BODY)
    assert [(s["api"], s["queue"]) for s in model.served] == [
        ("chat", "turns#0"), ("responses", "turns#1"), ("anthropic", "turns#2"), ("gemini", "turns#3")]
    assert model.tokens_total == Tokens()


def test_a_script_can_give_every_reply_of_every_api_the_same_id() -> None:
    """``response_id``: some OpenAI-compatible servers repeat one id on every call; the mock model can too."""
    script = {"response_id": "same-id", "fallback": {"content": "ok"}}
    chat = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "hi"}]}
    with ScriptedModel(script) as model:
        for _ in range(2):
            assert json.loads(post(model.base_url + "/chat/completions", chat).read())["id"] == "same-id"
            assert json.loads(post(model.base_url + "/responses", {**RESPONSES_BODY, "stream": False})
                              .read())["id"] == "same-id"
            assert json.loads(post(model.root_url + "/v1/messages", {**ANTHROPIC_BODY, "stream": False})
                              .read())["id"] == "same-id"
            gemini = model.root_url + "/v1beta/models/gemini-2.5-pro:generateContent"
            assert json.loads(post(gemini, GEMINI_BODY).read())["responseId"] == "same-id"
            streamed = sse(post(model.base_url + "/chat/completions", {**chat, "stream": True}))
            assert {data["id"] for _, data in streamed if isinstance(data, dict)} == {"same-id"}
    with ScriptedModel({"fallback": {"content": "ok"}}) as model:
        ids = {json.loads(post(model.base_url + "/chat/completions", chat).read())["id"] for _ in range(2)}
        assert len(ids) == 2  # by default each reply has its own
