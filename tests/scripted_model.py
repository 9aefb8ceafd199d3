"""A scripted, OpenAI-compatible chat-completions endpoint for tests.

The language model is the only test double in this project: real opencode,
real git, real dotenvx talk to this server on 127.0.0.1. It is stdlib only.

In-process use (a background thread, ephemeral port)::

    with ScriptedModel([
        {"tool_calls": [{"name": "write", "arguments": {"filePath": "/x/a.txt",
                                                        "content": "hi\\n"}}],
         "usage": {"prompt_tokens": 1000, "completion_tokens": 50,
                   "cached_tokens": 400, "reasoning_tokens": 7}},
        {"content": "Done.", "usage": {"prompt_tokens": 1100, "completion_tokens": 5}},
    ]) as model:
        model.base_url          # "http://127.0.0.1:PORT/v1"
        ...run the agent...
        model.requests          # every request received (see "Recorded requests")
        model.usage_total       # sum of all usage reported
        model.wait_for_requests(2, kind="turn", timeout=30)

Separate process (for xdist workers / subprocesses), also wrapped by
``ScriptedModelProcess(script, workdir)``::

    python tests/scripted_model.py --script script.json --port-file port.txt \
        [--record requests.jsonl] [--host 127.0.0.1] [--port 0]

The port file is written atomically once the server listens; ``GET
/_scripted/state`` returns the recorded requests and usage totals as JSON,
``POST /_scripted/script`` replaces the script (body = a script), and the
process exits on SIGTERM/SIGINT.

Script format
-------------
A script is either a list of turns (the ``main`` conversation) or a dict::

    {
      "turns": [turn, ...],                 # main conversation queue
      "by_model": {"model-id": [turn, ...]},  # a queue per requested model id
      "by_marker": {"TEXT": [turn, ...]},     # a queue per conversation whose
                                              # first user message contains TEXT
      "title": "Short title",               # reply to title requests
      "fallback": turn                      # reply when a queue is empty
    }

A turn is a dict:

    content        assistant text (str), optional
    reasoning      reasoning text, sent as ``delta.reasoning_content``, optional
    tool_calls     [{"name": str, "arguments": dict | str, "id": str?}], optional
    usage          {"prompt_tokens", "completion_tokens", "cached_tokens",
                    "reasoning_tokens"} (the last two may also be given in
                    OpenAI's nested form: prompt_tokens_details.cached_tokens,
                    completion_tokens_details.reasoning_tokens)
    finish_reason  default "tool_calls" when tool_calls else "stop"
    mode           "normal" (default) | "hang" (read the request, never answer)
                   | "stall" (send headers + first chunk, then never finish)
                   | "slow" (sleep ``delay`` seconds before answering, and
                   ``chunk_delay`` between chunks) | "error" (HTTP ``status``,
                   default 500, with an OpenAI-style error body; ``retry_after_ms`` adds a
                   ``retry-after-ms`` header, which opencode honours between
                   its retries; ``error_type`` sets error.type, default
                   "server_error" -- note opencode retries ANY status whose
                   body matches its "server_error"/"overloaded"/... patterns,
                   so use e.g. "invalid_request_error" for a non-retryable 4xx)
    delay, chunk_delay, status, error, error_type, retry_after_ms
                   parameters of the modes above

A turn may also be a plain string (= ``{"content": s}``).

Recorded requests
-----------------
``model.requests`` holds one dict per request, in arrival order: ``seq``,
``time``, ``method``, ``path``, ``headers`` (lower-cased, Authorization
dropped), ``authorization`` (bool: was a key sent), ``session`` (opencode's
``x-session-id`` header), ``body`` (the parsed JSON), and for chat requests
``kind`` ("title" | "summary" | "turn" | "fallback" | "unauthorized" when
``api_key=`` is set and the request's bearer key differs), ``queue`` (e.g.
"turns#0", "marker:SUBTASK#1"), ``model``, ``stream``, ``stream_options``,
``messages``, ``tool_names``, ``mode``. ``usage_total`` sums the usage of
every reply that was sent in full (title replies included: 5/3 tokens).

How requests are routed (documented in tests/OPENCODE_NOTES.md too)
-------------------------------------------------------------------
opencode 1.18 sends, for one ``opencode run``, the agent's requests (system
prompt "You are opencode, ...", ``tools`` present) and, in parallel with the
first one, ONE title request: its system message starts with "You are a title
generator" and it carries no ``tools`` (none is sent with ``opencode run
--title X``; subagent sessions get none). Routing, in order:

1. title request (a system message containing "You are a title generator")
   -> answered with ``script["title"]`` (default "Scripted session"), never
   consumes a turn; kind "title".
2. compaction request (a system message containing "You are a context
   summarization agent") -> a short summary text, never consumes a turn;
   kind "summary".
3. ``by_marker`` queue whose marker occurs in the conversation's first user
   message, else the ``by_model`` queue for ``body["model"]``, else the main
   ``turns`` queue; kind "turn".
4. when the chosen queue is empty -> ``fallback`` (default: content "done",
   usage 10/2); kind "fallback".
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# System-prompt openings of opencode 1.18's auxiliary agents (see OPENCODE_NOTES.md).
TITLE_MARKER = "You are a title generator"
SUMMARY_MARKER = "You are a context summarization agent"
DEFAULT_FALLBACK: dict[str, Any] = {
    "content": "done",
    "usage": {"prompt_tokens": 10, "completion_tokens": 2},
}
TITLE_USAGE = {"prompt_tokens": 5, "completion_tokens": 3}
MODES = {"normal", "hang", "stall", "slow", "error"}


# --------------------------------------------------------------------------- helpers


def _text_of(content: Any) -> str:
    """Flatten an OpenAI message ``content`` (str or list of parts) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                out.append(str(part.get("text", "")))
            else:
                out.append(str(part))
        return "".join(out)
    return str(content)


def normalize_usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Turn a turn's usage spec into an OpenAI ``usage`` object."""
    usage = dict(usage or {})
    prompt = int(usage.get("prompt_tokens", 0))
    completion = int(usage.get("completion_tokens", 0))
    cached = usage.get("cached_tokens")
    if cached is None:
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    reasoning = usage.get("reasoning_tokens")
    if reasoning is None:
        reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": int(usage.get("total_tokens", prompt + completion)),
    }
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": int(cached)}
    if reasoning is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": int(reasoning)}
    return out


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
    return turn


def normalize_script(script: Any) -> dict[str, Any]:
    if script is None:
        script = []
    if isinstance(script, list):
        script = {"turns": script}
    if not isinstance(script, dict):
        raise TypeError("a script is a list of turns or a dict")
    return {
        "turns": [normalize_turn(t) for t in script.get("turns", [])],
        "by_model": {k: [normalize_turn(t) for t in v] for k, v in (script.get("by_model") or {}).items()},
        "by_marker": {k: [normalize_turn(t) for t in v] for k, v in (script.get("by_marker") or {}).items()},
        "title": script.get("title", "Scripted session"),
        "fallback": normalize_turn(script.get("fallback") or DEFAULT_FALLBACK),
    }


def classify(body: dict[str, Any]) -> str:
    """Return "title", "summary" or "turn" for a chat-completions request body."""
    messages = body.get("messages") or []
    system = "\n".join(
        _text_of(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "system"
    )
    if TITLE_MARKER in system:
        return "title"
    if SUMMARY_MARKER in system:
        return "summary"
    return "turn"


def first_user_text(body: dict[str, Any]) -> str:
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "user":
            return _text_of(m.get("content"))
    return ""


# --------------------------------------------------------------------------- server


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
        self.usage_total = normalize_usage({})
        self.usage_total["prompt_tokens_details"] = {"cached_tokens": 0}
        self.usage_total["completion_tokens_details"] = {"reasoning_tokens": 0}
        self.record_path = os.fspath(record_path) if record_path else None
        # when set, chat requests must carry "Authorization: Bearer <api_key>"
        # (else 401, kind "unauthorized", no turn consumed), like a real provider
        self.api_key = api_key
        self._host, self._port = host, port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> ScriptedModel:
        owner = self

        class Handler(_Handler):
            model = owner

        self._server = ThreadingHTTPServer((self._host, self._port), Handler)
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
    def base_url(self) -> str:
        """The OpenAI base URL, ending in /v1 (what opencode's options.baseURL takes)."""
        return f"http://{self._host}:{self.port}/v1"

    # -- script -------------------------------------------------------------
    def set_script(self, script: Any) -> None:
        with self._lock:
            self._script = normalize_script(script)
            self._cursor = {"turns": 0, "by_model": {}, "by_marker": {}}

    def remaining(self) -> int:
        """Scripted turns not yet consumed (all queues)."""
        with self._lock:
            s, c = self._script, self._cursor
            n = len(s["turns"]) - c["turns"]
            n += sum(len(v) - c["by_model"].get(k, 0) for k, v in s["by_model"].items())
            n += sum(len(v) - c["by_marker"].get(k, 0) for k, v in s["by_marker"].items())
            return n

    def _next_turn(self, body: dict[str, Any]) -> tuple[str, dict[str, Any], str | None]:
        """Pick the reply for *body*; return (kind, turn, queue name)."""
        kind = classify(body)
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
            first = first_user_text(body)
            # (queue of turns, the cursor dict holding its position, cursor key, name)
            pick: tuple[list[dict[str, Any]], dict[str, int], str, str] | None = None
            for marker, turns in s["by_marker"].items():
                if marker in first:
                    pick = (turns, c["by_marker"], marker, f"marker:{marker}")
                    break
            if pick is None and body.get("model") in s["by_model"]:
                model = body["model"]
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

    def _add_usage(self, usage: dict[str, Any]) -> None:
        with self._lock:
            t = self.usage_total
            t["prompt_tokens"] += usage.get("prompt_tokens", 0)
            t["completion_tokens"] += usage.get("completion_tokens", 0)
            t["total_tokens"] += usage.get("total_tokens", 0)
            t["prompt_tokens_details"]["cached_tokens"] += (usage.get("prompt_tokens_details") or {}).get(
                "cached_tokens", 0
            )
            t["completion_tokens_details"]["reasoning_tokens"] += (usage.get("completion_tokens_details") or {}).get(
                "reasoning_tokens", 0
            )

    def chat_requests(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Recorded chat-completions requests, optionally only of one kind."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r["path"].endswith("/chat/completions") and (kind is None or r["kind"] == kind)
            ]

    def wait_for_requests(self, count: int, kind: str | None = None, timeout: float = 120.0) -> list[dict[str, Any]]:
        """Block until *count* chat requests (of *kind*) arrived; return them.

        Raises TimeoutError with what did arrive when *timeout* passes first.
        """

        def matching() -> list[dict[str, Any]]:
            return [
                r
                for r in self.requests
                if r["path"].endswith("/chat/completions") and (kind is None or r["kind"] == kind)
            ]

        deadline = time.monotonic() + timeout
        with self._changed:
            while len(matching()) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    got = [(r["kind"], r.get("queue")) for r in self.requests]
                    raise TimeoutError(f"wanted {count} {kind or 'chat'} requests, got {got}")
                self._changed.wait(left)
            return matching()

    def state(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": copy.deepcopy(self.requests), "usage_total": copy.deepcopy(self.usage_total)}


class _Handler(BaseHTTPRequestHandler):
    model: ScriptedModel
    server_version = "ScriptedModel/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:  # keep test output quiet
        if os.environ.get("SCRIPTED_MODEL_LOG"):
            sys.stderr.write("scripted-model: " + (fmt % args) + "\n")

    # -- plumbing -----------------------------------------------------------
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

    def _entry(self, body: Any, raw: bytes) -> dict[str, Any]:
        return {
            "time": time.time(),
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items() if k.lower() not in ("authorization",)},
            "authorization": bool(self.headers.get("Authorization")),
            # opencode sends its session id: one conversation = one session
            "session": self.headers.get("x-session-id"),
            "body": body if body is not None else raw.decode("utf-8", "replace"),
        }

    # -- routes -------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            self.model._record({**self._entry(None, b""), "kind": "models"})
            ids = set(self.model._script["by_model"]) | {"scripted-model"}
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": i, "object": "model", "created": 0, "owned_by": "scripted"} for i in sorted(ids)],
                },
            )
        elif self.path.startswith("/_scripted/state"):
            self._send_json(200, self.model.state())
        else:
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
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.model._record({**self._entry(body, raw), "kind": "unknown"})
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        if not isinstance(body, dict):
            self.model._record({**self._entry(body, raw), "kind": "invalid"})
            self._send_json(400, {"error": {"message": "body is not a JSON object"}})
            return

        if self.model.api_key is not None and (self.headers.get("Authorization") != f"Bearer {self.model.api_key}"):
            self.model._record({**self._entry(body, raw), "kind": "unauthorized", "model": body.get("model")})
            self._send_json(
                401,
                {
                    "error": {
                        "message": "Incorrect API key provided.",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                },
            )
            return
        kind, turn, queue = self.model._next_turn(body)
        entry = self._entry(body, raw)
        entry.update(
            {
                "kind": kind,
                "queue": queue,
                "model": body.get("model"),
                "stream": bool(body.get("stream")),
                "messages": body.get("messages"),
                "tool_names": [t.get("function", {}).get("name") for t in body.get("tools") or []],
                "mode": turn["mode"],
            }
        )
        entry["stream_options"] = body.get("stream_options")
        self.model._record(entry)
        self._answer(body, turn)

    # -- answering ----------------------------------------------------------
    def _wait_forever(self) -> None:
        # Blocks until the model is closed; the client gives up on its own.
        self.model._release.wait()
        self.close_connection = True

    def _answer(self, body: dict[str, Any], turn: dict[str, Any]) -> None:
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
            self._send_json(
                status,
                {
                    "error": {
                        "message": turn.get("error", "scripted server error"),
                        "type": turn.get("error_type", "server_error"),
                        "code": status,
                    }
                },
                headers,
            )
            return
        usage = normalize_usage(turn.get("usage"))
        model_name = body.get("model") or "scripted-model"
        cid = f"chatcmpl-{uuid.uuid4().hex[:16]}"
        created = int(time.time())
        if body.get("stream"):
            self._stream(turn, usage, model_name, cid, created, body)
        else:
            message: dict[str, Any] = {"role": "assistant", "content": turn.get("content")}
            if turn.get("reasoning"):
                message["reasoning_content"] = turn["reasoning"]
            if turn["tool_calls"]:
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in turn["tool_calls"]
                ]
            self._send_json(
                200,
                {
                    "id": cid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model_name,
                    "choices": [{"index": 0, "message": message, "finish_reason": turn["finish_reason"]}],
                    "usage": usage,
                },
            )
            self.model._add_usage(usage)

    def _stream(
        self, turn: dict[str, Any], usage: dict[str, Any], model_name: str, cid: str, created: int, body: dict[str, Any]
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk_delay = float(turn.get("chunk_delay", 0)) if turn["mode"] == "slow" else 0.0

        def chunk(
            delta: dict[str, Any] | None, finish: str | None = None, with_usage: dict[str, Any] | None = None
        ) -> dict[str, Any]:
            obj: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model_name,
            }
            obj["choices"] = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            if with_usage is not None:
                obj["usage"] = with_usage
            return obj

        def send(obj: dict[str, Any] | str) -> bool:
            data = obj if isinstance(obj, str) else json.dumps(obj)
            try:
                self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return False
            if chunk_delay and self.model._release.wait(chunk_delay):
                return False
            return True

        if not send(chunk({"role": "assistant", "content": ""})):
            return
        if turn["mode"] == "stall":
            self._wait_forever()
            return
        if turn.get("reasoning"):
            for piece in _pieces(turn["reasoning"]):
                if not send(chunk({"reasoning_content": piece})):
                    return
        if turn.get("content"):
            for piece in _pieces(turn["content"]):
                if not send(chunk({"content": piece})):
                    return
        for i, call in enumerate(turn["tool_calls"]):
            head = {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": ""},
                    }
                ]
            }
            if not send(chunk(head)):
                return
            for piece in _pieces(call["arguments"], 64):
                if not send(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})):
                    return
        include_usage = (body.get("stream_options") or {}).get("include_usage", True)
        if not send(chunk({}, turn["finish_reason"])):
            return
        if include_usage:
            # OpenAI's stream_options.include_usage chunk: empty choices + usage.
            if not send(chunk(None, with_usage=usage)):
                return
        send("[DONE]")
        self.model._add_usage(usage)


def _pieces(text: str, size: int = 16) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# --------------------------------------------------------------------------- separate process


class ScriptedModelProcess:
    """Run the endpoint as a child process (``python scripted_model.py ...``).

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
                os.path.abspath(__file__),
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
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def state(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_scripted/state", timeout=60) as resp:
            return json.loads(resp.read())

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--script", help="JSON file with the script (default: empty script)")
    ap.add_argument("--port-file", help="write the port here once listening")
    ap.add_argument("--record", help="append every request as a JSON line to this file")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--api-key", help="require this bearer key (else 401)")
    args = ap.parse_args(argv)

    script = None
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            script = json.load(fh)
    model = ScriptedModel(script, host=args.host, port=args.port, record_path=args.record, api_key=args.api_key)
    model.start()
    if args.port_file:
        tmp = f"{args.port_file}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"{model.port}\n")
        os.replace(tmp, args.port_file)
    print(f"scripted model listening on {model.base_url}", flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    model.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
