"""The model APIs the scripted endpoint speaks: one class per API, one shared turn format.

``server`` owns the script, the routing and the recording;
this module only translates. Each API class reads what it needs from a
request body (model, stream, system text, first user text, tool names) and
encodes a normalised turn as that API's JSON reply or its server-sent events,
with the turn's usage in that API's own usage shape. ``read_usage`` turns an
API's usage object back into ``Tokens``, the disjoint split the ledger uses,
which is what a test compares an agent's report with.

APIs and the routes they answer (any prefix before the route is accepted):

==============  =====================================================  =========================
API             route                                                  streaming
==============  =====================================================  =========================
``chat``        ``POST .../chat/completions``                          ``"stream": true``
``responses``   ``POST .../responses``                                 ``"stream": true``
``anthropic``   ``POST .../messages`` (``/count_tokens`` too)          ``"stream": true``
``gemini``      ``POST .../models/MODEL:generateContent``              ``:streamGenerateContent``
                (``:countTokens`` too)                                 (``?alt=sse``)
==============  =====================================================  =========================

Usage in a turn (one spec for every API; every field optional, default 0)::

    prompt_tokens       all input tokens, cache reads and cache writes included
    completion_tokens   all output tokens, reasoning included
    cached_tokens       input read from the cache (also prompt_tokens_details.cached_tokens)
    cache_write_tokens  input written to the cache (Anthropic's cache_creation_input_tokens)
    reasoning_tokens    output spent on reasoning (also completion_tokens_details.reasoning_tokens)

How each API carries it (``Tokens`` = input / cache_read / cache_write / output / reasoning):

* chat: ``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``,
  ``completion_tokens_details.reasoning_tokens``. No cache-write field: cache
  writes are plain input there.
* responses: ``input_tokens`` (cache reads and writes included), ``output_tokens``,
  ``input_tokens_details.cached_tokens``, ``output_tokens_details.reasoning_tokens``,
  ``total_tokens``; cache writes, when there are any, as ``input_tokens_details.cache_write_tokens``
  (the field Codex 0.171 reads).
* anthropic: ``input_tokens`` (uncached only), ``cache_read_input_tokens``,
  ``cache_creation_input_tokens`` (+ ``cache_creation.ephemeral_5m_input_tokens``),
  ``output_tokens`` (thinking included; with ``reasoning_tokens`` also
  ``output_tokens_details.thinking_tokens``). Streamed: ``message_start``
  carries the input side and ``output_tokens: 1``; ``message_delta`` carries
  the final counts of all fields, as the API does.
* gemini: ``promptTokenCount`` (cached included), ``cachedContentTokenCount``,
  ``candidatesTokenCount`` (thoughts excluded), ``thoughtsTokenCount``,
  ``totalTokenCount``. No cache-write field. Streamed: every chunk carries the
  usage so far; the last one, with ``finishReason``, the final usage.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

#: one server-sent event: (event name or None, data)
Event = tuple[str | None, Any]


@dataclass(frozen=True)
class Tokens:
    """Disjoint token counts, in the ledger's terms."""

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(*(a + b for a, b in zip(asdict(self).values(), asdict(other).values(), strict=True)))

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def completion_tokens(self) -> int:
        return self.output_tokens + self.reasoning_tokens

    def to_json(self) -> dict[str, int]:
        return asdict(self)


def tokens_from_spec(usage: dict[str, Any] | None) -> Tokens:
    """A turn's ``usage`` spec (see the module docstring) as ``Tokens``; refuses counts that do not add up."""
    usage = dict(usage or {})
    prompt = int(usage.get("prompt_tokens", 0))
    completion = int(usage.get("completion_tokens", 0))
    cached = usage.get("cached_tokens")
    if cached is None:
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    reasoning = usage.get("reasoning_tokens")
    if reasoning is None:
        reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens", 0)
    cache_write = int(usage.get("cache_write_tokens", 0))
    tokens = Tokens(prompt - int(cached) - cache_write, int(cached), cache_write,
                    completion - int(reasoning), int(reasoning))
    if min(asdict(tokens).values()) < 0:
        raise ValueError(f"usage {usage}: cached_tokens + cache_write_tokens must not exceed prompt_tokens, "
                         "and reasoning_tokens must not exceed completion_tokens")
    return tokens


def text_of(content: Any) -> str:
    """Flatten a message ``content`` (a string, or a list of parts with ``text``) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return str(content)


def pieces(text: str, size: int = 16) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def reply_id(turn: dict[str, Any], prefix: str) -> str:
    """The id a reply carries: the turn's ``response_id`` when the script fixes one (servers that repeat an id
    on every call exist), else a fresh one."""
    fixed = turn.get("response_id")
    return str(fixed) if fixed else new_id(prefix)


class ScriptedApi:
    """One model API: how to read its requests and how to encode a turn as its replies."""

    name = ""

    def matches(self, path: str) -> bool:
        raise NotImplementedError

    # -- reading requests ---------------------------------------------------------------
    def model(self, path: str, body: dict[str, Any]) -> str | None:
        value = body.get("model")
        return value if isinstance(value, str) else None

    def stream(self, path: str, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def system_text(self, body: dict[str, Any]) -> str:
        raise NotImplementedError

    def first_user_text(self, body: dict[str, Any]) -> str:
        raise NotImplementedError

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def auxiliary(self, path: str) -> dict[str, Any] | None:
        """The reply to a request that is not a model turn (token counting), else None."""
        return None

    # -- usage ----------------------------------------------------------------------------
    def usage(self, tokens: Tokens) -> dict[str, Any]:
        raise NotImplementedError

    def read_usage(self, usage: dict[str, Any]) -> Tokens:
        raise NotImplementedError

    # -- replies --------------------------------------------------------------------------
    def reply(self, turn: dict[str, Any], tokens: Tokens, model: str, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def events(self, turn: dict[str, Any], tokens: Tokens, model: str, body: dict[str, Any]) -> list[Event]:
        raise NotImplementedError

    def error(self, status: int, message: str, error_type: str | None) -> dict[str, Any]:
        return {"error": {"message": message, "type": error_type or "server_error", "code": status}}

    #: the status a request with a wrong API key gets
    unauthorized_status = 401

    def unauthorized(self) -> dict[str, Any]:
        return {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                          "code": "invalid_api_key"}}


# --------------------------------------------------------------------------- OpenAI Chat Completions


class ChatCompletions(ScriptedApi):
    name = "chat"

    def matches(self, path: str) -> bool:
        return path.endswith("/chat/completions")

    def system_text(self, body: dict[str, Any]) -> str:
        return "\n".join(text_of(m.get("content")) for m in body.get("messages") or []
                         if isinstance(m, dict) and m.get("role") in ("system", "developer"))

    def first_user_text(self, body: dict[str, Any]) -> str:
        for m in body.get("messages") or []:
            if isinstance(m, dict) and m.get("role") == "user":
                return text_of(m.get("content"))
        return ""

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)]

    def usage(self, tokens: Tokens) -> dict[str, Any]:
        return {"prompt_tokens": tokens.prompt_tokens, "completion_tokens": tokens.completion_tokens,
                "total_tokens": tokens.prompt_tokens + tokens.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": tokens.cache_read_tokens},
                "completion_tokens_details": {"reasoning_tokens": tokens.reasoning_tokens}}

    def read_usage(self, usage: dict[str, Any]) -> Tokens:
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens", 0)
        return Tokens(usage["prompt_tokens"] - cached, cached, 0, usage["completion_tokens"] - reasoning, reasoning)

    def reply(self, turn: dict[str, Any], tokens: Tokens, model: str, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.get("content")}
        if turn.get("reasoning"):
            message["reasoning_content"] = turn["reasoning"]
        if turn["tool_calls"]:
            message["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in turn["tool_calls"]
            ]
        return {"id": reply_id(turn, "chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": turn["finish_reason"]}],
                "usage": self.usage(tokens)}

    def events(self, turn: dict[str, Any], tokens: Tokens, model: str, body: dict[str, Any]) -> list[Event]:
        cid, created = reply_id(turn, "chatcmpl-"), int(time.time())

        def chunk(delta: dict[str, Any] | None, finish: str | None = None) -> Event:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            return None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                          "choices": choices}

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"reasoning_content": p}) for p in pieces(turn.get("reasoning") or "") if p]
        events += [chunk({"content": p}) for p in pieces(turn.get("content") or "") if p]
        for i, call in enumerate(turn["tool_calls"]):
            events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                 "function": {"name": call["name"], "arguments": ""}}]}))
            events += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                       for p in pieces(call["arguments"], 64)]
        events.append(chunk({}, turn["finish_reason"]))
        if (body.get("stream_options") or {}).get("include_usage", True):
            # OpenAI's stream_options.include_usage chunk: empty choices + usage.
            last = chunk(None)
            events.append((None, {**last[1], "usage": self.usage(tokens)}))
        events.append((None, "[DONE]"))
        return events


# --------------------------------------------------------------------------- OpenAI Responses


class Responses(ScriptedApi):
    """The Responses API as Codex uses it: function calls, custom (freeform) tool calls, reasoning summaries."""

    name = "responses"

    def matches(self, path: str) -> bool:
        return path.endswith("/responses")

    @staticmethod
    def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
        items = body.get("input")
        if isinstance(items, str):
            return [{"type": "message", "role": "user", "content": items}]
        return [i for i in items or [] if isinstance(i, dict) and i.get("type", "message") == "message"]

    def system_text(self, body: dict[str, Any]) -> str:
        parts = [text_of(body.get("instructions"))]
        parts += [text_of(m.get("content")) for m in self._messages(body) if m.get("role") in ("system", "developer")]
        return "\n".join(p for p in parts if p)

    def first_user_text(self, body: dict[str, Any]) -> str:
        # Codex sends its context (AGENTS.md, environment) as leading user messages: use all of them
        # up to the first non-message item, so a marker in the task is found.
        items = body.get("input")
        texts = []
        for item in items if isinstance(items, list) else self._messages(body):
            if not isinstance(item, dict) or item.get("type", "message") != "message":
                break
            if item.get("role") == "user":
                texts.append(text_of(item.get("content")))
        return "\n".join(texts)

    def _tools(self, body: dict[str, Any]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for tool in body.get("tools") or []:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "namespace":
                for inner in tool.get("tools") or []:
                    found[inner.get("name")] = {**inner, "namespace": tool.get("name")}
            elif tool.get("name"):
                found[tool["name"]] = tool
        return found

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return list(self._tools(body))

    def usage(self, tokens: Tokens) -> dict[str, Any]:
        details = {"cached_tokens": tokens.cache_read_tokens}
        if tokens.cache_write_tokens:
            details["cache_write_tokens"] = tokens.cache_write_tokens
        return {"input_tokens": tokens.prompt_tokens, "input_tokens_details": details,
                "output_tokens": tokens.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": tokens.reasoning_tokens},
                "total_tokens": tokens.prompt_tokens + tokens.completion_tokens}

    def read_usage(self, usage: dict[str, Any]) -> Tokens:
        details = usage.get("input_tokens_details") or {}
        cached, written = details.get("cached_tokens", 0), details.get("cache_write_tokens", 0)
        reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens", 0)
        return Tokens(usage["input_tokens"] - cached - written, cached, written,
                      usage["output_tokens"] - reasoning, reasoning)

    def _items(self, turn: dict[str, Any], body: dict[str, Any]) -> list[dict[str, Any]]:
        """The output items of the turn, complete (status "completed")."""
        items: list[dict[str, Any]] = []
        if turn.get("reasoning"):
            items.append({"id": new_id("rs_"), "type": "reasoning",
                          "summary": [{"type": "summary_text", "text": turn["reasoning"]}]})
        if turn.get("content"):
            items.append({"id": new_id("msg_"), "type": "message", "status": "completed", "role": "assistant",
                          "content": [{"type": "output_text", "text": turn["content"], "annotations": []}]})
        tools = self._tools(body)
        for call in turn["tool_calls"]:
            tool = tools.get(call["name"], {})
            if tool.get("type") == "custom":
                # a freeform tool (Codex's apply_patch): the raw text, not JSON arguments
                raw = call["arguments"]
                try:
                    decoded = json.loads(raw)
                    raw = decoded["input"] if isinstance(decoded, dict) and "input" in decoded else raw
                except ValueError:
                    pass
                items.append({"id": new_id("ctc_"), "type": "custom_tool_call", "status": "completed",
                              "call_id": call["id"], "name": call["name"], "input": raw})
            else:
                item = {"id": new_id("fc_"), "type": "function_call", "status": "completed",
                        "call_id": call["id"], "name": call["name"], "arguments": call["arguments"]}
                if tool.get("namespace"):
                    item["namespace"] = tool["namespace"]
                items.append(item)
        return items

    def _response(self, rid: str, model: str, status: str, output: list[dict[str, Any]],
                  usage: dict[str, Any] | None) -> dict[str, Any]:
        return {"id": rid, "object": "response", "created_at": int(time.time()), "status": status, "model": model,
                "output": output, "usage": usage, "error": None, "incomplete_details": None}

    def reply(self, turn: dict[str, Any], tokens: Tokens, model: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._response(reply_id(turn, "resp_"), model, "completed", self._items(turn, body), self.usage(tokens))

    def events(self, turn: dict[str, Any], tokens: Tokens, model: str, body: dict[str, Any]) -> list[Event]:
        rid = reply_id(turn, "resp_")
        items = self._items(turn, body)
        events: list[Event] = []

        def emit(kind: str, **data: Any) -> None:
            events.append((kind, {"type": kind, "sequence_number": len(events), **data}))

        emit("response.created", response=self._response(rid, model, "in_progress", [], None))
        emit("response.in_progress", response=self._response(rid, model, "in_progress", [], None))
        for index, item in enumerate(items):
            ids = {"item_id": item["id"], "output_index": index}
            if item["type"] == "reasoning":
                emit("response.output_item.added", output_index=index, item={**item, "summary": []})
                text = item["summary"][0]["text"]
                emit("response.reasoning_summary_part.added", **ids, summary_index=0,
                     part={"type": "summary_text", "text": ""})
                for piece in pieces(text):
                    emit("response.reasoning_summary_text.delta", **ids, summary_index=0, delta=piece)
                emit("response.reasoning_summary_text.done", **ids, summary_index=0, text=text)
                emit("response.reasoning_summary_part.done", **ids, summary_index=0,
                     part={"type": "summary_text", "text": text})
            elif item["type"] == "message":
                text = item["content"][0]["text"]
                emit("response.output_item.added", output_index=index,
                     item={**item, "status": "in_progress", "content": []})
                emit("response.content_part.added", **ids, content_index=0,
                     part={"type": "output_text", "text": "", "annotations": []})
                for piece in pieces(text):
                    emit("response.output_text.delta", **ids, content_index=0, delta=piece)
                emit("response.output_text.done", **ids, content_index=0, text=text)
                emit("response.content_part.done", **ids, content_index=0, part=item["content"][0])
            elif item["type"] == "function_call":
                emit("response.output_item.added", output_index=index,
                     item={**item, "status": "in_progress", "arguments": ""})
                for piece in pieces(item["arguments"], 64):
                    emit("response.function_call_arguments.delta", **ids, delta=piece)
                emit("response.function_call_arguments.done", **ids, arguments=item["arguments"])
            else:  # custom_tool_call
                emit("response.output_item.added", output_index=index,
                     item={**item, "status": "in_progress", "input": ""})
                for piece in pieces(item["input"], 64):
                    emit("response.custom_tool_call_input.delta", **ids, delta=piece)
                emit("response.custom_tool_call_input.done", **ids, input=item["input"])
            emit("response.output_item.done", output_index=index, item=item)
        emit("response.completed", response=self._response(rid, model, "completed", items, self.usage(tokens)))
        return events


# --------------------------------------------------------------------------- Anthropic Messages


class AnthropicMessages(ScriptedApi):
    """The Messages API as Claude Code uses it: text, thinking and tool_use blocks, cache usage."""

    name = "anthropic"
    STOP_REASONS = {"tool_calls": "tool_use", "stop": "end_turn", "length": "max_tokens"}

    def matches(self, path: str) -> bool:
        return path.endswith("/messages") or path.endswith("/messages/count_tokens")

    def auxiliary(self, path: str) -> dict[str, Any] | None:
        if path.endswith("/count_tokens"):
            return {"input_tokens": 1000}
        return None

    def system_text(self, body: dict[str, Any]) -> str:
        return text_of(body.get("system"))

    def first_user_text(self, body: dict[str, Any]) -> str:
        for m in body.get("messages") or []:
            if isinstance(m, dict) and m.get("role") == "user":
                return text_of(m.get("content"))
        return ""

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)]

    def usage(self, tokens: Tokens) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "input_tokens": tokens.input_tokens,
            "cache_creation_input_tokens": tokens.cache_write_tokens,
            "cache_read_input_tokens": tokens.cache_read_tokens,
            "cache_creation": {"ephemeral_5m_input_tokens": tokens.cache_write_tokens, "ephemeral_1h_input_tokens": 0},
            "output_tokens": tokens.completion_tokens,
            "service_tier": "standard",
        }
        if tokens.reasoning_tokens:
            usage["output_tokens_details"] = {"thinking_tokens": tokens.reasoning_tokens}
        return usage

    def read_usage(self, usage: dict[str, Any]) -> Tokens:
        thinking = (usage.get("output_tokens_details") or {}).get("thinking_tokens", 0)
        return Tokens(usage["input_tokens"], usage.get("cache_read_input_tokens") or 0,
                      usage.get("cache_creation_input_tokens") or 0, usage["output_tokens"] - thinking, thinking)

    def _blocks(self, turn: dict[str, Any]) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if turn.get("reasoning"):
            blocks.append({"type": "thinking", "thinking": turn["reasoning"], "signature": "scripted-signature"})
        if turn.get("content"):
            blocks.append({"type": "text", "text": turn["content"]})
        for call in turn["tool_calls"]:
            blocks.append({"type": "tool_use", "id": self.tool_id(call["id"]), "name": call["name"],
                           "input": json.loads(call["arguments"] or "{}")})
        return blocks

    @staticmethod
    def tool_id(call_id: str) -> str:
        return call_id if call_id.startswith("toolu_") else "toolu_" + re.sub(r"[^A-Za-z0-9_-]", "", call_id)

    def _message(self, turn: dict[str, Any], model: str, content: list[dict[str, Any]], stop: str | None,
                 usage: dict[str, Any]) -> dict[str, Any]:
        return {"id": reply_id(turn, "msg_"), "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}

    def reply(self, turn: dict[str, Any], tokens: Tokens, model: str, body: dict[str, Any]) -> dict[str, Any]:
        stop = self.STOP_REASONS.get(turn["finish_reason"], turn["finish_reason"])
        return self._message(turn, model, self._blocks(turn), stop, self.usage(tokens))

    def events(self, turn: dict[str, Any], tokens: Tokens, model: str, body: dict[str, Any]) -> list[Event]:
        usage = self.usage(tokens)
        start_usage = {**usage, "output_tokens": 1}
        start_usage.pop("output_tokens_details", None)
        events: list[Event] = [("message_start", {"type": "message_start",
                                                  "message": self._message(turn, model, [], None, start_usage)})]

        def emit(kind: str, **data: Any) -> None:
            events.append((kind, {"type": kind, **data}))

        for index, block in enumerate(self._blocks(turn)):
            if block["type"] == "thinking":
                emit("content_block_start", index=index,
                     content_block={"type": "thinking", "thinking": "", "signature": ""})
                for piece in pieces(block["thinking"]):
                    emit("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": piece})
                emit("content_block_delta", index=index,
                     delta={"type": "signature_delta", "signature": block["signature"]})
            elif block["type"] == "text":
                emit("content_block_start", index=index, content_block={"type": "text", "text": ""})
                for piece in pieces(block["text"]):
                    emit("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
            else:
                emit("content_block_start", index=index,
                     content_block={"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}})
                for piece in pieces(json.dumps(block["input"]), 64):
                    emit("content_block_delta", index=index,
                         delta={"type": "input_json_delta", "partial_json": piece})
            emit("content_block_stop", index=index)
        stop = self.STOP_REASONS.get(turn["finish_reason"], turn["finish_reason"])
        emit("message_delta", delta={"stop_reason": stop, "stop_sequence": None}, usage=usage)
        emit("message_stop")
        return events

    def error(self, status: int, message: str, error_type: str | None) -> dict[str, Any]:
        default = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": error_type or default, "message": message}}

    def unauthorized(self) -> dict[str, Any]:
        return {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}


# --------------------------------------------------------------------------- Gemini


class Gemini(ScriptedApi):
    """generateContent / streamGenerateContent as Gemini CLI uses them: functionCall parts, thoughts."""

    name = "gemini"
    ROUTE = re.compile(r"/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent|countTokens)$")
    FINISH_REASONS = {"tool_calls": "STOP", "stop": "STOP", "length": "MAX_TOKENS"}

    def matches(self, path: str) -> bool:
        return self.ROUTE.search(path) is not None

    def _route(self, path: str) -> re.Match[str]:
        found = self.ROUTE.search(path)
        assert found is not None
        return found

    def model(self, path: str, body: dict[str, Any]) -> str | None:
        return self._route(path)["model"]

    def stream(self, path: str, body: dict[str, Any]) -> bool:
        return self._route(path)["method"] == "streamGenerateContent"

    def auxiliary(self, path: str) -> dict[str, Any] | None:
        if self._route(path)["method"] == "countTokens":
            return {"totalTokens": 1000}
        return None

    def system_text(self, body: dict[str, Any]) -> str:
        instruction = body.get("systemInstruction") or {}
        return text_of(instruction.get("parts") if isinstance(instruction, dict) else instruction)

    def first_user_text(self, body: dict[str, Any]) -> str:
        # Gemini CLI sends its session context and the task as leading user parts: join them.
        texts = []
        for content in body.get("contents") or []:
            if not isinstance(content, dict) or content.get("role", "user") != "user":
                break
            parts = content.get("parts") or []
            if any(isinstance(p, dict) and "functionResponse" in p for p in parts):
                break
            texts.append(text_of(parts))
        return "\n".join(texts)

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return [d.get("name") for t in body.get("tools") or [] if isinstance(t, dict)
                for d in t.get("functionDeclarations") or []]

    def usage(self, tokens: Tokens) -> dict[str, Any]:
        usage = {"promptTokenCount": tokens.prompt_tokens, "candidatesTokenCount": tokens.output_tokens,
                 "totalTokenCount": tokens.prompt_tokens + tokens.completion_tokens}
        if tokens.cache_read_tokens:
            usage["cachedContentTokenCount"] = tokens.cache_read_tokens
        if tokens.reasoning_tokens:
            usage["thoughtsTokenCount"] = tokens.reasoning_tokens
        return usage

    def read_usage(self, usage: dict[str, Any]) -> Tokens:
        cached = usage.get("cachedContentTokenCount", 0)
        return Tokens(usage.get("promptTokenCount", 0) - cached, cached, 0, usage.get("candidatesTokenCount", 0),
                      usage.get("thoughtsTokenCount", 0))

    def _parts(self, turn: dict[str, Any]) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if turn.get("reasoning"):
            parts.append({"text": turn["reasoning"], "thought": True})
        if turn.get("content"):
            parts.append({"text": turn["content"]})
        for call in turn["tool_calls"]:
            parts.append({"functionCall": {"name": call["name"], "args": json.loads(call["arguments"] or "{}")}})
        return parts

    def _chunk(self, parts: list[dict[str, Any]], finish: str | None, usage: dict[str, Any],
               model: str, response_id: str) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": response_id}

    def reply(self, turn: dict[str, Any], tokens: Tokens, model: str, body: dict[str, Any]) -> dict[str, Any]:
        finish = self.FINISH_REASONS.get(turn["finish_reason"], "STOP")
        return self._chunk(self._parts(turn), finish, self.usage(tokens), model, reply_id(turn, ""))

    def events(self, turn: dict[str, Any], tokens: Tokens, model: str, body: dict[str, Any]) -> list[Event]:
        response_id = reply_id(turn, "")
        parts = self._parts(turn)
        first = {"promptTokenCount": tokens.prompt_tokens, "totalTokenCount": tokens.prompt_tokens}
        if tokens.cache_read_tokens:
            first["cachedContentTokenCount"] = tokens.cache_read_tokens
        chunks = [self._chunk([part], None, first, model, response_id) for part in parts[:-1]]
        finish = self.FINISH_REASONS.get(turn["finish_reason"], "STOP")
        chunks.append(self._chunk(parts[-1:] or [{"text": ""}], finish, self.usage(tokens), model, response_id))
        return [(None, chunk) for chunk in chunks]

    def error(self, status: int, message: str, error_type: str | None) -> dict[str, Any]:
        default = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}.get(status, "INTERNAL")
        return {"error": {"code": status, "message": message, "status": error_type or default}}

    unauthorized_status = 400

    def unauthorized(self) -> dict[str, Any]:
        return {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                          "status": "INVALID_ARGUMENT"}}


#: every API the scripted endpoint answers, matched in this order against the request path
APIS: tuple[ScriptedApi, ...] = (ChatCompletions(), Responses(), AnthropicMessages(), Gemini())
API_BY_NAME = {api.name: api for api in APIS}


def api_for(path: str) -> ScriptedApi | None:
    """The API whose route ``path`` (without its query) is."""
    return next((api for api in APIS if api.matches(path)), None)
