"""A mock model with known answers and known usage: OpenAI Chat and Responses, Anthropic Messages, Gemini.

Users run it as ``swe-arena mock-model`` to check an arm's configuration end to end
before spending money (docs/mock-model.md). In the test suite the language model is the
only test double: real opencode,
Claude Code, Codex, Gemini CLI, mini-swe-agent, real git, real dotenvx talk
to this server on 127.0.0.1. It is stdlib only. One server answers every API
at once (the request path says which, see ``pytest_swe_arena/mockmodel/apis.py``), from
one script of turns; each API has its own encoder of the same turn.

In-process use (a background thread, ephemeral port)::

    with ScriptedModel([
        {"tool_calls": [{"name": "write", "arguments": {"filePath": "/x/a.txt",
                                                        "content": "hi\\n"}}],
         "usage": {"prompt_tokens": 1000, "completion_tokens": 50,
                   "cached_tokens": 400, "reasoning_tokens": 7}},
        {"content": "Done.", "usage": {"prompt_tokens": 1100, "completion_tokens": 5}},
    ]) as model:
        model.base_url          # "http://127.0.0.1:PORT/v1" (OpenAI clients: opencode, Codex, litellm)
        model.root_url          # "http://127.0.0.1:PORT"    (ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL)
        ...run the agent...
        model.requests          # every request received (see "Recorded requests")
        model.served            # every reply sent in full, with the usage it carried
        model.tokens_total      # the served usage summed, as Tokens (the ledger's split)
        model.usage_total       # the same, in OpenAI chat usage shape
        model.wait_for_requests(2, kind="turn", timeout=30)

Separate process (for xdist workers / subprocesses), also wrapped by
``ScriptedModelProcess(script, workdir)``::

    swe-arena mock-model --script script.json --port-file port.txt \
        [--record requests.jsonl] [--host 127.0.0.1] [--port 0]

The port file is written atomically once the server listens; ``GET
/_scripted/state`` returns the recorded requests, the served replies and the
usage totals as JSON, ``POST /_scripted/script`` replaces the script (body = a
script), and the process exits on SIGTERM/SIGINT.

Script format
-------------
A script is either a list of turns (the ``main`` conversation) or a dict::

    {
      "turns": [turn, ...],                 # main conversation queue
      "by_model": {"model-id": [turn, ...]},  # a queue per requested model id
      "by_marker": {"TEXT": [turn, ...]},     # a queue per conversation whose
                                              # first user message contains TEXT
      "aux": {"TEXT": turn},                # the reply to every request whose
                                              # system prompt contains TEXT (never
                                              # consumes a turn: an agent's side calls)
      "title": "Short title",               # reply to opencode's title requests
      "fallback": turn,                     # reply when a queue is empty
      "response_id": "ID"                   # every reply carries this id (as some
                                              # OpenAI-compatible servers do), unless
                                              # a turn gives its own
    }

A turn is a dict, the same for every API:

    content        assistant text (str), optional
    reasoning      reasoning text (chat ``delta.reasoning_content``, an Anthropic
                   ``thinking`` block, a Responses reasoning summary, a Gemini
                   ``thought`` part), optional
    tool_calls     [{"name": str, "arguments": dict | str, "id": str?}], optional;
                   for a Responses tool of type "custom" (Codex's freeform
                   apply_patch) "arguments" is the raw input text
    usage          {"prompt_tokens", "completion_tokens", "cached_tokens",
                    "cache_write_tokens", "reasoning_tokens"}: prompt_tokens
                   counts all input (cache reads and writes included),
                   completion_tokens all output (reasoning included); each API
                   carries them in its own fields (pytest_swe_arena/mockmodel/apis.py).
                   cached_tokens / reasoning_tokens may also be given in
                   OpenAI's nested form (prompt_tokens_details.cached_tokens,
                   completion_tokens_details.reasoning_tokens)
    response_id    the id the reply carries (chat ``id``, Responses ``id``, Anthropic
                   message ``id``, Gemini ``responseId``), default a fresh one per reply
    finish_reason  default "tool_calls" when tool_calls else "stop" (mapped per API)
    mode           "normal" (default) | "hang" (read the request, never answer)
                   | "stall" (send headers + first event, then never finish)
                   | "slow" (sleep ``delay`` seconds before answering, and
                   ``chunk_delay`` between events) | "error" (HTTP ``status``,
                   default 500, with the API's own error body; ``retry_after_ms`` adds a
                   ``retry-after-ms`` header, which opencode honours between
                   its retries; ``error_type`` sets the error type, default
                   "server_error" for OpenAI -- note opencode retries ANY status whose
                   body matches its "server_error"/"overloaded"/... patterns,
                   so use e.g. "invalid_request_error" for a non-retryable 4xx)
    delay, chunk_delay, status, error, error_type, retry_after_ms
                   parameters of the modes above

A turn may also be a plain string (= ``{"content": s}``).

Recorded requests
-----------------
``model.requests`` holds one dict per request, in arrival order: ``seq``,
``time``, ``method``, ``path``, ``headers`` (lower-cased, the key headers
Authorization / x-api-key / x-goog-api-key dropped), ``authorization`` (bool:
was a key sent), ``session`` (the agent's session header: opencode's
``x-session-id``, Claude Code's ``x-claude-code-session-id``, Codex's
``session-id``), ``body`` (the parsed JSON), and for model requests ``api``
("chat" | "responses" | "anthropic" | "gemini"), ``kind`` ("turn" |
"fallback" | "aux" | "title" | "summary" | "count_tokens" | "unauthorized"
when ``api_key=`` is set and the request's key differs), ``queue`` (e.g.
"turns#0", "marker:SUBTASK#1", "aux:TEXT"), ``model``, ``stream``,
``tool_names``, ``mode`` (chat requests also ``messages`` and ``stream_options``).
Other requests are recorded with kind "probe" (HEAD), "models" (GET .../models)
or "unknown" (answered 404).

``model.served`` holds one dict per reply sent in full (recorded just before
its last event or its JSON body goes out, so a client holding the whole reply
finds it there; title, summary and aux replies included): ``seq`` (of its
request), ``api``, ``kind``, ``queue``, ``model``, ``stream``, ``usage`` (the
usage object exactly as sent, in the API's shape) and ``tokens`` (that usage
read back as ``Tokens``, the ledger's disjoint split). ``tokens_total`` and
``usage_total`` sum them.

How requests are routed (documented in docs/internals/opencode.md and tests/helpers/AGENT_NOTES.md too)
------------------------------------------------------------------------------------------
1. opencode's title request (a system message containing "You are a title
   generator") -> ``script["title"]`` (default "Scripted session"), never
   consumes a turn; kind "title". Its compaction request ("You are a context
   summarization agent") -> a short summary; kind "summary".
2. ``aux`` entry whose text occurs in the request's system prompt -> that
   turn, every time; kind "aux".
3. ``by_marker`` queue whose marker occurs in the conversation's first user
   message, else the ``by_model`` queue for the requested model, else the main
   ``turns`` queue; kind "turn".
4. when the chosen queue is empty -> ``fallback`` (default: content "done",
   usage 10/2); kind "fallback".
Token counting requests (Anthropic ``count_tokens``, Gemini ``countTokens``)
get a fixed count (kind "count_tokens") and are no model call.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .apis import API_BY_NAME, ScriptedApi, Tokens, api_for, tokens_from_spec

# System-prompt openings of opencode 1.18's auxiliary agents (see docs/internals/opencode.md).
TITLE_MARKER = "You are a title generator"
SUMMARY_MARKER = "You are a context summarization agent"
DEFAULT_FALLBACK: dict[str, Any] = {
    "content": "done",
    "usage": {"prompt_tokens": 10, "completion_tokens": 2},
}
TITLE_USAGE = {"prompt_tokens": 5, "completion_tokens": 3}
MODES = {"normal", "hang", "stall", "slow", "error"}
CHAT = API_BY_NAME["chat"]
#: request headers that carry an API key: never recorded
KEY_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")
SESSION_HEADERS = ("x-session-id", "x-claude-code-session-id", "session-id")


# --------------------------------------------------------------------------- the script


def normalize_usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    """A turn's usage spec as an OpenAI chat ``usage`` object."""
    return CHAT.usage(tokens_from_spec(usage))


def normalize_turn(turn: Any) -> dict[str, Any]:
    if isinstance(turn, str):
        turn = {"content": turn}
    if not isinstance(turn, dict):
        raise TypeError(f"a script turn must be a dict or a str, not {type(turn).__name__}")
    turn = copy.deepcopy(turn)
    mode = turn.setdefault("mode", "normal")
    if mode not in MODES:
        raise ValueError(f"unknown turn mode {mode!r}; expected one of {sorted(MODES)}")
    calls = []
    for i, call in enumerate(turn.get("tool_calls") or []):
        args = call.get("arguments", {})
        if not isinstance(args, str):
            args = json.dumps(args)
        calls.append(
            {"id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}_{i}", "name": call["name"], "arguments": args}
        )
    turn["tool_calls"] = calls
    turn.setdefault("finish_reason", "tool_calls" if calls else "stop")
    turn["tokens"] = tokens_from_spec(turn.get("usage")).to_json()  # also checks that the counts add up
    normalized: dict[str, Any] = turn
    return normalized


def normalize_script(script: Any) -> dict[str, Any]:
    if script is None:
        script = []
    if isinstance(script, list):
        script = {"turns": script}
    if not isinstance(script, dict):
        raise TypeError("a script is a list of turns or a dict")
    fixed_id = script.get("response_id")

    def turn_of(spec: Any) -> dict[str, Any]:
        turn = normalize_turn(spec)
        if fixed_id:
            turn.setdefault("response_id", fixed_id)
        return turn

    return {
        "turns": [turn_of(t) for t in script.get("turns", [])],
        "by_model": {k: [turn_of(t) for t in v] for k, v in (script.get("by_model") or {}).items()},
        "by_marker": {k: [turn_of(t) for t in v] for k, v in (script.get("by_marker") or {}).items()},
        "aux": {k: turn_of(v) for k, v in (script.get("aux") or {}).items()},
        "title": script.get("title", "Scripted session"),
        "fallback": turn_of(script.get("fallback") or DEFAULT_FALLBACK),
    }


def classify(body: dict[str, Any], api: ScriptedApi = CHAT) -> str:
    """Return "title", "summary" or "turn" for a request body (opencode's auxiliary requests)."""
    system = api.system_text(body)
    if TITLE_MARKER in system:
        return "title"
    if SUMMARY_MARKER in system:
        return "summary"
    return "turn"


def first_user_text(body: dict[str, Any]) -> str:
    """The first user message of a chat-completions body."""
    return CHAT.first_user_text(body)


# --------------------------------------------------------------------------- server


class _Server(ThreadingHTTPServer):
    # Many clients connect at once (16 bench threads, 32 streams): socketserver's backlog of 5 resets some.
    request_queue_size = 128


class ScriptedModel:
    """The scripted endpoint. A context manager; thread-safe."""

    def __init__(
        self,
        script: Any = None,
        host: str = "127.0.0.1",
        port: int = 0,
        record_path: str | os.PathLike[str] | None = None,
        api_key: str | None = None,
    ):
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._release = threading.Event()  # set on close: frees hung handlers
        self._script = normalize_script(script)
        self._cursor: dict[str, Any] = {"turns": 0, "by_model": {}, "by_marker": {}}
        self.requests: list[dict[str, Any]] = []
        self.served: list[dict[str, Any]] = []
        self.record_path = os.fspath(record_path) if record_path else None
        # when set, model requests must carry this key (Authorization: Bearer, x-api-key,
        # x-goog-api-key or ?key=), else 401 with the API's error, kind "unauthorized", no turn consumed
        self.api_key = api_key
        self._host, self._port = host, port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> ScriptedModel:
        owner = self

        class Handler(_Handler):
            model = owner

        self._server = _Server((self._host, self._port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-model", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        """The server root, no path: what ANTHROPIC_BASE_URL and GOOGLE_GEMINI_BASE_URL take."""
        return f"http://{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ending in /v1 (opencode's options.baseURL, OPENAI_BASE_URL, litellm's api_base)."""
        return f"{self.root_url}/v1"

    # -- script -------------------------------------------------------------
    def set_script(self, script: Any) -> None:
        with self._lock:
            self._script = normalize_script(script)
            self._cursor = {"turns": 0, "by_model": {}, "by_marker": {}}

    def remaining(self) -> int:
        """Scripted turns not yet consumed (all queues)."""
        with self._lock:
            s, c = self._script, self._cursor
            n: int = len(s["turns"]) - c["turns"]
            n += sum(len(v) - c["by_model"].get(k, 0) for k, v in s["by_model"].items())
            n += sum(len(v) - c["by_marker"].get(k, 0) for k, v in s["by_marker"].items())
            return n

    def _next_turn(self, api: ScriptedApi, body: dict[str, Any], model: str | None
                   ) -> tuple[str, dict[str, Any], str | None]:
        """Pick the reply for *body*; return (kind, turn, queue name)."""
        kind = classify(body, api)
        with self._lock:
            s, c = self._script, self._cursor
            if kind == "title":
                return "title", normalize_turn({"content": s["title"], "usage": TITLE_USAGE}), None
            if kind == "summary":
                return (
                    "summary",
                    normalize_turn({"content": "Summary: scripted conversation.", "usage": TITLE_USAGE}),
                    None,
                )
            system = api.system_text(body)
            for marker, turn in s["aux"].items():
                if marker in system:
                    return "aux", copy.deepcopy(turn), f"aux:{marker}"
            first = api.first_user_text(body)
            # (queue of turns, the cursor dict holding its position, cursor key, name)
            pick: tuple[list[dict[str, Any]], dict[str, int], str, str] | None = None
            for marker, turns in s["by_marker"].items():
                if marker in first:
                    pick = (turns, c["by_marker"], marker, f"marker:{marker}")
                    break
            if pick is None and model in s["by_model"]:
                assert model is not None
                pick = (s["by_model"][model], c["by_model"], model, f"model:{model}")
            if pick is None:
                pick = (s["turns"], c, "turns", "turns")
            queue, cursor, key, name = pick
            i = cursor.get(key, 0)
            if i < len(queue):
                cursor[key] = i + 1
                return "turn", copy.deepcopy(queue[i]), f"{name}#{i}"
            return "fallback", copy.deepcopy(s["fallback"]), name

    # -- recording ----------------------------------------------------------
    def _record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            entry["seq"] = len(self.requests)
            self.requests.append(entry)
            self._changed.notify_all()
            if self.record_path:
                with open(self.record_path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")

    def _add_served(self, entry: dict[str, Any], api: ScriptedApi, usage: dict[str, Any]) -> None:
        with self._lock:
            self.served.append({
                "seq": entry["seq"], "api": api.name, "kind": entry["kind"], "queue": entry["queue"],
                "model": entry["model"], "stream": entry["stream"], "usage": usage,
                "tokens": api.read_usage(usage).to_json(),
            })
            self._changed.notify_all()

    def served_tokens(self, kind: str | None = None) -> Tokens:
        """The usage of the replies sent in full (of one request kind), summed."""
        with self._lock:
            return sum((Tokens(**s["tokens"]) for s in self.served if kind is None or s["kind"] == kind), Tokens())

    @property
    def tokens_total(self) -> Tokens:
        return self.served_tokens()

    @property
    def usage_total(self) -> dict[str, Any]:
        """Everything served, in OpenAI chat usage shape (cache writes count as prompt tokens there)."""
        return CHAT.usage(self.tokens_total)

    def model_requests(self, kind: str | None = None, api: str | None = None) -> list[dict[str, Any]]:
        """Recorded model requests (any API, or one), optionally only of one kind."""
        with self._lock:
            return self._model_requests(kind, api)

    def _model_requests(self, kind: str | None, api: str | None) -> list[dict[str, Any]]:
        return [r for r in self.requests
                if "api" in r and (api is None or r["api"] == api) and (kind is None or r["kind"] == kind)]

    def chat_requests(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Recorded chat-completions requests, optionally only of one kind."""
        return self.model_requests(kind, "chat")

    def wait_for_requests(self, count: int, kind: str | None = None, timeout: float = 120.0,
                          api: str | None = None) -> list[dict[str, Any]]:
        """Block until *count* model requests (of *kind*, of *api*) arrived; return them.

        Raises TimeoutError with what did arrive when *timeout* passes first.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._model_requests(kind, api)) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    got = [(r.get("api"), r["kind"], r.get("queue")) for r in self.requests]
                    raise TimeoutError(f"wanted {count} {kind or 'model'} requests, got {got}")
                self._changed.wait(left)
            return self._model_requests(kind, api)

    def state(self) -> dict[str, Any]:
        with self._lock:
            served = copy.deepcopy(self.served)
            requests = copy.deepcopy(self.requests)
        return {"requests": requests, "served": served, "usage_total": self.usage_total,
                "tokens_total": self.tokens_total.to_json()}


class _Handler(BaseHTTPRequestHandler):
    model: ScriptedModel
    server_version = "ScriptedModel/2"
    protocol_version = "HTTP/1.1"
    # As providers' servers do: a reply's headers and body go out at once, not 40 ms apart
    # (Nagle's algorithm meeting a client's delayed ACK), which a proxy's latency figure would show.
    disable_nagle_algorithm = True

    def log_message(self, fmt: str, *args: Any) -> None:  # keep test output quiet
        if os.environ.get("SCRIPTED_MODEL_LOG"):
            sys.stderr.write("scripted-model: " + (fmt % args) + "\n")

    # -- plumbing -----------------------------------------------------------
    @property
    def route(self) -> str:
        return urlsplit(self.path).path.rstrip("/")

    def _read_body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sent_key(self) -> str | None:
        bearer = self.headers.get("Authorization") or ""
        if bearer.startswith("Bearer "):
            return bearer[len("Bearer "):]
        query = parse_qs(urlsplit(self.path).query).get("key")
        return self.headers.get("x-api-key") or self.headers.get("x-goog-api-key") or (query[0] if query else None)

    def _entry(self, body: Any, raw: bytes) -> dict[str, Any]:
        session = next((self.headers[h] for h in SESSION_HEADERS if self.headers.get(h)), None)
        return {
            "time": time.time(),
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items() if k.lower() not in KEY_HEADERS},
            "authorization": self._sent_key() is not None,
            "session": session,
            "body": body if body is not None else raw.decode("utf-8", "replace"),
        }

    # -- routes -------------------------------------------------------------
    def do_HEAD(self) -> None:  # noqa: N802
        # Claude Code probes its base URL (HEAD /api/hello) before the first request.
        self.model._record({**self._entry(None, b""), "kind": "probe"})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        if self.route.endswith("/models"):
            self.model._record({**self._entry(None, b""), "kind": "models"})
            ids = sorted(set(self.model._script["by_model"]) | {"scripted-model"})
            if "/v1beta/" in self.route:
                self._send_json(200, {"models": [{"name": f"models/{i}", "displayName": i} for i in ids]})
                return
            data = [{"id": i, "object": "model", "type": "model", "display_name": i, "created": 0,
                     "created_at": "2025-01-01T00:00:00Z", "owned_by": "scripted"} for i in ids]
            self._send_json(200, {"object": "list", "data": data, "has_more": False,
                                  "first_id": ids[0], "last_id": ids[-1]})
        elif self.path.startswith("/_scripted/state"):
            self._send_json(200, self.model.state())
        else:
            self.model._record({**self._entry(None, b""), "kind": "unknown"})
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        if self.path.startswith("/_scripted/script"):
            self.model.set_script(body)
            self._send_json(200, {"ok": True})
            return
        api = api_for(self.route)
        if api is None:
            self.model._record({**self._entry(body, raw), "kind": "unknown"})
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        if not isinstance(body, dict):
            self.model._record({**self._entry(body, raw), "api": api.name, "kind": "invalid"})
            self._send_json(400, api.error(400, "body is not a JSON object", "invalid_request_error"))
            return
        model = api.model(self.route, body)
        if self.model.api_key is not None and self._sent_key() != self.model.api_key:
            self.model._record({**self._entry(body, raw), "api": api.name, "kind": "unauthorized", "model": model})
            self._send_json(api.unauthorized_status, api.unauthorized())
            return
        counted = api.auxiliary(self.route)
        if counted is not None:
            self.model._record({**self._entry(body, raw), "api": api.name, "kind": "count_tokens", "model": model})
            self._send_json(200, counted)
            return
        kind, turn, queue = self.model._next_turn(api, body, model)
        entry = self._entry(body, raw)
        entry.update({
            "api": api.name, "kind": kind, "queue": queue, "model": model, "stream": api.stream(self.route, body),
            "tool_names": api.tool_names(body), "mode": turn["mode"],
        })
        if api.name == "chat":
            entry["messages"] = body.get("messages")
            entry["stream_options"] = body.get("stream_options")
        self.model._record(entry)
        self._answer(api, entry, body, turn)

    # -- answering ----------------------------------------------------------
    def _wait_forever(self) -> None:
        # Blocks until the model is closed; the client gives up on its own.
        self.model._release.wait()
        self.close_connection = True

    def _answer(self, api: ScriptedApi, entry: dict[str, Any], body: dict[str, Any], turn: dict[str, Any]) -> None:
        mode = turn["mode"]
        if mode == "hang":
            self._wait_forever()
            return
        if mode == "slow" and turn.get("delay"):
            if self.model._release.wait(float(turn["delay"])):
                return
        if mode == "error":
            status = int(turn.get("status", 500))
            headers = {}
            if turn.get("retry_after_ms") is not None:
                headers["retry-after-ms"] = str(turn["retry_after_ms"])
            self._send_json(status, api.error(status, turn.get("error", "scripted server error"),
                                              turn.get("error_type")), headers)
            return
        tokens = Tokens(**turn["tokens"])
        model_name = entry["model"] or "scripted-model"

        # Recorded just before the last bytes go out, so a client holding the whole reply finds it served.
        def served() -> None:
            self.model._add_served(entry, api, api.usage(tokens))

        if entry["stream"]:
            self._stream(api.events(turn, tokens, model_name, body), turn, served)
        else:
            reply = api.reply(turn, tokens, model_name, body)
            served()
            self._send_json(200, reply)

    def _stream(self, events: list[tuple[str | None, Any]], turn: dict[str, Any],
                before_last: Callable[[], None]) -> None:
        """Send server-sent events, calling ``before_last()`` once all but the last one were sent."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk_delay = float(turn.get("chunk_delay", 0)) if turn["mode"] == "slow" else 0.0
        for index, (name, data) in enumerate(events):
            if index == len(events) - 1:
                before_last()
            text = data if isinstance(data, str) else json.dumps(data)
            frame = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
            try:
                self.wfile.write(frame.encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return
            if index == 0 and turn["mode"] == "stall":
                self._wait_forever()
                return
            if chunk_delay and self.model._release.wait(chunk_delay):
                return



# --------------------------------------------------------------------------- separate process


class ScriptedModelProcess:
    """Run the endpoint as a child process (``python -m pytest_swe_arena.mockmodel ...``).

    For fixtures whose clients live in other processes (xdist workers, a
    session-scoped server shared by subprocesses). ``state()`` fetches the
    recorded requests and the usage total over HTTP.
    """

    def __init__(self, script: Any, workdir: str | os.PathLike[str], startup_timeout: float = 120.0):
        self.workdir = os.fspath(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.script_path = os.path.join(self.workdir, "script.json")
        self.port_file = os.path.join(self.workdir, "port")
        self.record_path = os.path.join(self.workdir, "requests.jsonl")
        with open(self.script_path, "w", encoding="utf-8") as fh:
            json.dump(script, fh)
        self.startup_timeout = startup_timeout
        self.proc: Any = None
        self.port: int | None = None

    def start(self) -> ScriptedModelProcess:
        import subprocess

        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest_swe_arena.mockmodel",
                "--script",
                self.script_path,
                "--port-file",
                self.port_file,
                "--record",
                self.record_path,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.workdir, "stderr.log"), "wb"),
        )
        deadline = time.monotonic() + self.startup_timeout
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None:
                raise RuntimeError(f"scripted model exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("scripted model did not write its port file")
            time.sleep(0.02)
        with open(self.port_file, encoding="utf-8") as fh:
            self.port = int(fh.read().strip())
        return self

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def state(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_scripted/state", timeout=60) as resp:
            state: dict[str, Any] = json.loads(resp.read())
            return state

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except Exception:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> ScriptedModelProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The mock model's options, shared by ``swe-arena mock-model`` and ``python -m pytest_swe_arena.mockmodel``."""
    parser.add_argument("--script", help="JSON file with the script (default: every call answers 'done', usage 10/2)")
    parser.add_argument("--port-file", help="write the port here once listening")
    parser.add_argument("--record", help="append every request as a JSON line to this file")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="the port (default 0: any free one)")
    parser.add_argument("--api-key", help="require this API key (else the API's 401)")


def load_script(path: str | None) -> Any:
    """The script in the JSON file at *path*, checked; SystemExit naming the file and the fault otherwise."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            script = json.load(fh)
        normalize_script(script)
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise SystemExit(f"mock-model: --script {path}: {error} (see `swe-arena mock-model --help` and "
                         "docs/mock-model.md for the format)") from None
    return script


def serve(args: argparse.Namespace) -> int:
    """Listen until SIGTERM or SIGINT, then say what was served."""
    model = ScriptedModel(load_script(args.script), host=args.host, port=args.port, record_path=args.record,
                          api_key=args.api_key)
    model.start()
    if args.port_file:
        tmp = f"{args.port_file}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"{model.port}\n")
        os.replace(tmp, args.port_file)
    print(f"mock model listening on {model.base_url} (OpenAI base URL; Anthropic and Gemini: {model.root_url})",
          flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    model.close()
    tokens = model.tokens_total
    print(f"mock model served {len(model.served)} replies: {tokens.to_json()}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mock-model", description=(__doc__ or "").split("\n\n")[0])
    add_arguments(parser)
    return serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
