"""What the metering proxy reads from each model API: which calls are model calls, and the usage of a reply.

Four APIs, told apart by the request path (a prefix before the route is
accepted, so any base URL works):

==============  ==========================================  ==============================================
API             model call                                  not a model call (forwarded, never counted)
==============  ==========================================  ==============================================
``chat``        ``POST .../chat/completions``
``responses``   ``POST .../responses``
``anthropic``   ``POST .../messages``                       ``POST .../messages/count_tokens``
``gemini``      ``POST .../models/M:generateContent``,      ``POST .../models/M:countTokens``
                ``POST .../models/M:streamGenerateContent``
==============  ==========================================  ==============================================

Any other POST is a call the meter does not understand: forwarded, and
counted as unknown. GET, HEAD and the other methods (model lists, probes)
cost nothing and are only forwarded.

How each API carries usage, and how it is read into ``Usage`` (the
ledger's disjoint split, token fields only: ``input_tokens`` without the cache, ``output_tokens``
without reasoning):

* chat: ``usage`` of the JSON reply, or of the last SSE chunk that has one
  (``stream_options.include_usage``; a stream without it has no usage, and
  the call is unknown). ``prompt_tokens`` includes
  ``prompt_tokens_details.cached_tokens`` (DeepSeek's ``prompt_cache_hit_tokens``
  when that is absent) and ``prompt_tokens_details.cache_write_tokens``;
  ``completion_tokens`` includes ``completion_tokens_details.reasoning_tokens``.
* responses: ``usage`` of the JSON reply, or of the ``response`` of the
  ``response.completed`` (or ``.incomplete`` / ``.failed``) event.
  ``input_tokens`` includes ``input_tokens_details.cached_tokens`` and
  ``cache_write_tokens``; ``output_tokens`` includes
  ``output_tokens_details.reasoning_tokens``.
* anthropic: ``usage`` of the JSON reply; streamed, ``message_start``'s
  ``message.usage`` (the input side) updated field by field by each
  ``message_delta``'s ``usage`` (the final counts). ``input_tokens`` excludes
  ``cache_read_input_tokens`` and ``cache_creation_input_tokens``;
  ``output_tokens`` includes thinking (``output_tokens_details.thinking_tokens``
  when given). A stream without its ``message_delta`` is unknown.
* gemini: ``usageMetadata`` of the reply, or of the last chunk (SSE with
  ``?alt=sse``, else a JSON array). ``promptTokenCount`` includes
  ``cachedContentTokenCount``; ``toolUsePromptTokenCount`` is input too;
  ``candidatesTokenCount`` excludes ``thoughtsTokenCount``.

The served model is the one the reply names (``model``, ``message.model``,
``response.model``, ``modelVersion``), else the request's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..usage import Usage, count_problem

CHAT, RESPONSES, ANTHROPIC, GEMINI = "chat", "responses", "anthropic", "gemini"
API_NAMES = (CHAT, RESPONSES, ANTHROPIC, GEMINI)


class UsageUnreadable(ValueError):
    """A reply's usage is missing or not a set of plausible counts; the message says which field."""


@dataclass(frozen=True)
class Reading:
    """What the meter read from one reply."""

    tokens: Usage | None
    model: str | None
    #: why ``tokens`` is None
    problem: str | None = None


def _count(usage: Mapping[str, Any], *path: str, required: bool = False) -> int:
    value: Any = usage
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    name = ".".join(path)
    if value is None:
        if required:
            raise UsageUnreadable(f"usage has no {name}")
        return 0
    problem = count_problem(value)
    if problem:
        raise UsageUnreadable(f"usage {name}: {problem}")
    return int(value)


def _split(input_with_cache: int, cache_read: int, cache_write: int,
           output_with_reasoning: int, reasoning: int) -> Usage:
    uncached, visible = input_with_cache - cache_read - cache_write, output_with_reasoning - reasoning
    if uncached < 0 or visible < 0:
        raise UsageUnreadable(f"usage does not add up: cached + cache-write tokens above the input "
                              f"({input_with_cache}), or reasoning above the output ({output_with_reasoning})")
    return Usage(uncached, visible, reasoning, cache_read, cache_write)


def _model(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


class ModelApi:
    """One API: its routes, how to read the usage of its JSON replies and of its event streams."""

    name = ""
    #: substrings of an SSE ``data`` that may carry usage or the served model: other events are not parsed
    markers: tuple[bytes, ...] = ()

    def is_model_call(self, path: str) -> bool | None:
        """True for a model call, False for a free request of this API (token counting), None if not its route."""
        raise NotImplementedError

    def request_model(self, path: str, body: Any) -> str | None:
        return _model(_table(body).get("model"))

    def tokens(self, usage: Mapping[str, Any]) -> Usage:
        raise NotImplementedError

    def read_json(self, reply: Any) -> Reading:
        """The usage of a whole JSON reply."""
        raise NotImplementedError

    def stream(self) -> StreamReading:
        """A reader for one event stream of this API."""
        raise NotImplementedError

    def refusal(self, message: str) -> tuple[int, dict[str, Any]]:
        """The status and body this API answers a request with that it will not serve (a budget spent)."""
        return 400, {"error": {"message": message, "type": "invalid_request_error", "param": None,
                               "code": "arena_budget_spent"}}

    def bad_gateway(self, message: str) -> tuple[int, dict[str, Any]]:
        """The status and body for an upstream the proxy could not reach (retryable, like a network error)."""
        return 502, {"error": {"message": message, "type": "server_error", "param": None, "code": None}}

    def _reading(self, usage: Any, model: str | None) -> Reading:
        if not isinstance(usage, dict):
            return Reading(None, model, "the reply carries no usage")
        try:
            return Reading(self.tokens(usage), model)
        except UsageUnreadable as error:
            return Reading(None, model, str(error))


class StreamReading:
    """Follows one server-sent event stream; ``result()`` once it ended."""

    def __init__(self, api: ModelApi):
        self.api = api
        self.model: str | None = None
        self.usage: Any = None
        self.final = False

    def feed(self, event: str | None, data: bytes) -> None:
        raise NotImplementedError

    def result(self) -> Reading:
        if not self.final:
            return Reading(None, self.model, "the stream ended before its usage")
        return self.api._reading(self.usage, self.model)


# --------------------------------------------------------------------------- OpenAI Chat Completions


class ChatCompletions(ModelApi):
    name = CHAT
    markers = (b'"usage"',)

    def is_model_call(self, path: str) -> bool | None:
        return True if path.endswith("/chat/completions") else None

    def tokens(self, usage: Mapping[str, Any]) -> Usage:
        cached = _count(usage, "prompt_tokens_details", "cached_tokens") or _count(usage, "prompt_cache_hit_tokens")
        return _split(_count(usage, "prompt_tokens", required=True), cached,
                      _count(usage, "prompt_tokens_details", "cache_write_tokens"),
                      _count(usage, "completion_tokens", required=True),
                      _count(usage, "completion_tokens_details", "reasoning_tokens"))

    def read_json(self, reply: Any) -> Reading:
        reply = _table(reply)
        return self._reading(reply.get("usage"), _model(reply.get("model")))

    def stream(self) -> StreamReading:
        return _ChatStream(self)


class _ChatStream(StreamReading):
    def feed(self, event: str | None, data: bytes) -> None:
        if self.model is None or b'"usage"' in data:
            chunk = _table(_loads(data))
            self.model = _model(chunk.get("model")) or self.model
            if chunk.get("usage") is not None:
                self.usage, self.final = chunk["usage"], True


# --------------------------------------------------------------------------- OpenAI Responses


class Responses(ModelApi):
    name = RESPONSES
    #: the events whose ``response`` carries the call's final usage
    FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
    markers = tuple(f'"{name}"'.encode() for name in FINAL_EVENTS)

    def is_model_call(self, path: str) -> bool | None:
        return True if path.endswith("/responses") else None

    def tokens(self, usage: Mapping[str, Any]) -> Usage:
        return _split(_count(usage, "input_tokens", required=True),
                      _count(usage, "input_tokens_details", "cached_tokens"),
                      _count(usage, "input_tokens_details", "cache_write_tokens"),
                      _count(usage, "output_tokens", required=True),
                      _count(usage, "output_tokens_details", "reasoning_tokens"))

    def read_json(self, reply: Any) -> Reading:
        reply = _table(reply)
        return self._reading(reply.get("usage"), _model(reply.get("model")))

    def stream(self) -> StreamReading:
        return _ResponsesStream(self)


class _ResponsesStream(StreamReading):
    def feed(self, event: str | None, data: bytes) -> None:
        if event in Responses.FINAL_EVENTS or (event is None and any(m in data for m in Responses.markers)):
            payload = _table(_loads(data))
            if payload.get("type") in Responses.FINAL_EVENTS:
                response = _table(payload.get("response"))
                self.model = _model(response.get("model")) or self.model
                self.usage, self.final = response.get("usage"), True


# --------------------------------------------------------------------------- Anthropic Messages


class AnthropicMessages(ModelApi):
    name = ANTHROPIC
    markers = (b'"message_start"', b'"message_delta"')

    def is_model_call(self, path: str) -> bool | None:
        if path.endswith("/messages/count_tokens"):
            return False
        return True if path.endswith("/messages") else None

    def tokens(self, usage: Mapping[str, Any]) -> Usage:
        cache_read = _count(usage, "cache_read_input_tokens")
        cache_write = _count(usage, "cache_creation_input_tokens")
        uncached = _count(usage, "input_tokens", required=True)
        return _split(uncached + cache_read + cache_write, cache_read, cache_write,
                      _count(usage, "output_tokens", required=True),
                      _count(usage, "output_tokens_details", "thinking_tokens"))

    def read_json(self, reply: Any) -> Reading:
        reply = _table(reply)
        return self._reading(reply.get("usage"), _model(reply.get("model")))

    def stream(self) -> StreamReading:
        return _AnthropicStream(self)

    def refusal(self, message: str) -> tuple[int, dict[str, Any]]:
        return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}

    def bad_gateway(self, message: str) -> tuple[int, dict[str, Any]]:
        return 502, {"type": "error", "error": {"type": "api_error", "message": message}}


class _AnthropicStream(StreamReading):
    def feed(self, event: str | None, data: bytes) -> None:
        if event not in ("message_start", "message_delta") and not (
                event is None and any(m in data for m in AnthropicMessages.markers)):
            return
        payload = _table(_loads(data))
        if payload.get("type") == "message_start":
            message = _table(payload.get("message"))
            self.model = _model(message.get("model")) or self.model
            self.usage = dict(_table(message.get("usage")))
        elif payload.get("type") == "message_delta" and isinstance(payload.get("usage"), dict):
            # the delta's counts are final and override message_start's (whose output_tokens is a placeholder)
            self.usage = {**_table(self.usage), **payload["usage"]}
            self.final = True


# --------------------------------------------------------------------------- Gemini


class Gemini(ModelApi):
    name = GEMINI
    ROUTE = re.compile(r"/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")
    MODEL_METHODS = ("generateContent", "streamGenerateContent")
    markers = (b'"usageMetadata"',)

    def is_model_call(self, path: str) -> bool | None:
        found = self.ROUTE.search(path)
        if found is None:
            return None
        if found["method"] in self.MODEL_METHODS:
            return True
        return False if found["method"] == "countTokens" else None

    def request_model(self, path: str, body: Any) -> str | None:
        found = self.ROUTE.search(path)
        return found["model"] if found else None

    def tokens(self, usage: Mapping[str, Any]) -> Usage:
        thoughts = _count(usage, "thoughtsTokenCount")
        return _split(_count(usage, "promptTokenCount", required=True) + _count(usage, "toolUsePromptTokenCount"),
                      _count(usage, "cachedContentTokenCount"), 0,
                      _count(usage, "candidatesTokenCount") + thoughts, thoughts)

    def read_json(self, reply: Any) -> Reading:
        # streamGenerateContent without ?alt=sse answers a JSON array of chunks: the last has the final usage
        if isinstance(reply, list):
            chunks = [_table(chunk) for chunk in reply]
            with_usage = [chunk for chunk in chunks if "usageMetadata" in chunk]
            last = with_usage[-1] if with_usage else {}
        else:
            last = _table(reply)
        return self._reading(last.get("usageMetadata"), _model(last.get("modelVersion")))

    def stream(self) -> StreamReading:
        return _GeminiStream(self)

    def refusal(self, message: str) -> tuple[int, dict[str, Any]]:
        return 400, {"error": {"code": 400, "message": message, "status": "FAILED_PRECONDITION"}}

    def bad_gateway(self, message: str) -> tuple[int, dict[str, Any]]:
        return 502, {"error": {"code": 502, "message": message, "status": "UNAVAILABLE"}}


class _GeminiStream(StreamReading):
    def feed(self, event: str | None, data: bytes) -> None:
        if b'"usageMetadata"' in data:
            chunk = _table(_loads(data))
            self.model = _model(chunk.get("modelVersion")) or self.model
            if "usageMetadata" in chunk:
                # every chunk carries the usage so far; the stream's end makes the last one final
                self.usage, self.final = chunk["usageMetadata"], True


#: the APIs, matched in this order against a request's path
APIS: tuple[ModelApi, ...] = (ChatCompletions(), Responses(), AnthropicMessages(), Gemini())
API_BY_NAME = {api.name: api for api in APIS}


def api_for(path: str) -> tuple[ModelApi | None, bool]:
    """The API of a request path (without its query) and whether it is a model call.

    ``(None, True)``: a path no API knows, counted as an unknown call when it is a POST.
    """
    for api in APIS:
        is_call = api.is_model_call(path)
        if is_call is not None:
            return api, is_call
    return None, True


class EventSplitter:
    """Cuts a byte stream into server-sent events: (event name or None, data) for each complete one."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[tuple[str | None, bytes]]:
        buffer = self._buffer + chunk
        if b"\r" in buffer:
            # CRLF and lone CR end lines too; a CR at the very end may be half of a CRLF still to come
            keep = b"\r" if buffer.endswith(b"\r") else b""
            buffer = buffer[: len(buffer) - len(keep)].replace(b"\r\n", b"\n").replace(b"\r", b"\n") + keep
        *frames, self._buffer = buffer.split(b"\n\n")
        return [event for event in map(self._event, frames) if event is not None]

    def finish(self) -> list[tuple[str | None, bytes]]:
        """The last event, when the stream ended without a blank line after it."""
        rest, self._buffer = self._buffer, b""
        event = self._event(rest.replace(b"\r", b""))
        return [event] if event is not None else []

    @staticmethod
    def _event(frame: bytes) -> tuple[str | None, bytes] | None:
        name: str | None = None
        data: list[bytes] = []
        for line in frame.split(b"\n"):
            field, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if field == b"data":
                data.append(value)
            elif field == b"event":
                name = value.decode("utf-8", "replace")
        return (name, b"\n".join(data)) if data else None
