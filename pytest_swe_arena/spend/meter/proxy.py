"""The metering proxy: aiohttp server and client on one event loop, in a thread of the process that starts it.

An agent's base URL points at its cell's route,
``http://127.0.0.1:PORT/c/<cell token>/<upstream name>``, which stands for
that upstream's URL: ``.../c/T/openai/chat/completions`` is forwarded to
``https://api.openai.com/v1/chat/completions`` when the upstream ``openai`` is
``https://api.openai.com/v1``. The request goes on unchanged (method, path,
query, headers, body; only hop-by-hop headers are the proxy's own, and
``Accept-Encoding`` is narrowed to the codings the meter can read: gzip,
deflate), and the reply comes back unchanged, each chunk written to the agent
as it arrives. Only a side copy of the reply is read for its usage
(``apis.py``); the books are ``accounts.Meter``'s.

What the proxy answers itself:

* a counted call (a POST) on a cell whose cap, arm total or sweep total is
  spent: the API's own error, HTTP 400 (not retried by any supported agent),
  with a message naming the cap; the cell is over budget;
* a route that names no open cell (closed, or never opened): the API's
  error, HTTP 404;
* an upstream it cannot reach: the API's error, HTTP 502, counted as a failed call.

Everything else is the upstream's: its errors reach the agent as they were
sent. API keys pass through in their headers (or Gemini's ``?key=``) and are
never written anywhere: the call log holds the path without its query, never
a header, and aiohttp's access log is off.

The control API on the same port (``/_meter/...``, for processes other than
the one that started the proxy, e.g. xdist workers: see ``client.py``) needs
the proxy's control secret in the ``X-Arena-Meter-Secret`` header.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hmac
import json
import threading
import time
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from ..budget import BudgetLimits, Limit, SpendCap
from ..prices import Price
from ..usage import UNKNOWN_MODEL, Usage
from .accounts import (
    NO_BUDGET,
    NO_CAP,
    NO_LIMIT,
    CellRoute,
    CellState,
    Meter,
    MeteredCall,
    MeterError,
    MeterTotals,
    Upstream,
)
from .apis import API_BY_NAME, CHAT, EventSplitter, ModelApi, Reading, api_for
from .client import SECRET_HEADER, proxy_url

#: headers that belong to one hop, never forwarded (RFC 9110 7.6.1), and those aiohttp sets itself
HOP_HEADERS = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                         "te", "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-length",
                         "expect"})
#: content codings whose replies the meter can read (zlib); the agent's Accept-Encoding is narrowed to these
READABLE_CODINGS = ("gzip", "x-gzip", "deflate", "identity")
#: a JSON reply larger than this is forwarded but not read (its call is unknown)
MAX_READ_BYTES = 64 * 1024 * 1024
#: the largest request body the proxy takes (a long conversation with images)
MAX_REQUEST_BYTES = 1024 * 1024 * 1024
STARTUP_SECONDS = 60.0
#: How long the upstream's reply is still read once its agent has gone (its usage is what was spent);
#: less than a cell's close drain, so the call is settled before the cell's spend is read.
AGENT_GONE_READ_SECONDS = 10.0
#: the reply the agent got (or is getting) for a request, once the proxy made one
RESPONSE_KEY = web.RequestKey("arena_response", web.StreamResponse)


def forwarded_request_headers(headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    """The agent's headers as the upstream gets them: all but hop-by-hop ones, Accept-Encoding narrowed."""
    named = {token.strip().lower() for value in headers.getall("Connection", []) for token in value.split(",")}
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        lowered = name.lower()
        if lowered in HOP_HEADERS or lowered in named:
            continue
        if lowered == "accept-encoding":
            codings = [part.strip() for part in value.split(",")]
            kept = [part for part in codings if part.split(";")[0].strip().lower() in READABLE_CODINGS]
            value = ", ".join(kept) or "identity"
        out.add(name, value)
    return out


def forwarded_reply_headers(headers: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    named = {token.strip().lower() for value in headers.getall("Connection", []) for token in value.split(",")}
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        lowered = name.lower()
        if lowered in HOP_HEADERS - {"content-length"} or lowered in named:
            continue
        out.add(name, value)
    return out


class ReplyReader:
    """Reads the usage out of a side copy of one reply, chunk by chunk (SSE) or whole (JSON)."""

    def __init__(self, api: ModelApi, content_type: str, content_encoding: str):
        self.api = api
        self.events = content_type.split(";")[0].strip().lower() == "text/event-stream"
        self.problem: str | None = None
        coding = content_encoding.strip().lower()
        self.decoder = zlib.decompressobj(wbits=47) if coding in ("gzip", "x-gzip", "deflate") else None
        if coding not in ("", *READABLE_CODINGS):
            self.problem = f"the reply's content-encoding {coding!r} cannot be read"
        self.splitter = EventSplitter()
        self.stream = api.stream()
        self.body = bytearray()

    def feed(self, chunk: bytes) -> None:
        if self.problem:
            return
        if self.decoder is not None:
            try:
                chunk = self.decoder.decompress(chunk)
            except zlib.error as error:
                self.problem = f"the reply's compressed body cannot be read: {error}"
                return
        if self.events:
            for event, data in self.splitter.feed(chunk):
                self.stream.feed(event, data)
        elif len(self.body) + len(chunk) > MAX_READ_BYTES:
            self.problem = f"the reply is larger than {MAX_READ_BYTES:,} bytes"
        else:
            self.body += chunk

    def result(self) -> Reading:
        """The usage, once the whole reply went through."""
        if self.problem:
            return Reading(None, None, self.problem)
        if self.events:
            for event, data in self.splitter.finish():
                self.stream.feed(event, data)
            return self.stream.result()
        try:
            reply = json.loads(self.body)
        except ValueError:
            return Reading(None, None, "the reply is not JSON")
        return self.api.read_json(reply)

    def complete_so_far(self) -> Reading | None:
        """The usage if the events seen so far carry all of it (the agent left after the last usage event)."""
        if self.problem or not self.events or not self.stream.final:
            return None
        return self.stream.result()


def _json_response(status: int, body: Mapping[str, Any]) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), content_type="application/json")


class MeterProxy:
    """The proxy of one sweep: ``start()`` binds ``host`` (127.0.0.1) and runs its loop in a thread; ``stop()`` ends it.

    ``open_cell`` / ``cell_state`` / ``close_cell`` / ``totals`` /
    ``count_outside`` are the harness's API (any thread). ``log``, when given,
    gets one JSON line per call (what ``close_cell`` returns in ``calls``).
    ``control_secret`` turns on the control API for other processes.
    """

    def __init__(self, prices: Mapping[str, Price] | None = None, limits: BudgetLimits = NO_BUDGET, *,
                 host: str = "127.0.0.1", port: int = 0, log: Path | None = None,
                 control_secret: str | None = None):
        self.meter = Meter(prices, limits)
        self.host, self.requested_port = host, port
        self.log_path = log
        self.control_secret = control_secret
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._log: TextIO | None = None
        self._failure: str | None = None
        self._stopping = False

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> MeterProxy:
        """Bind and serve; ``MeterError`` when it cannot (the address is taken, the loop failed)."""
        ready: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name="arena-meter", daemon=True)
        self._thread.start()
        try:
            self._port = ready.result(timeout=STARTUP_SECONDS)
        except OSError as error:
            self._thread.join()
            raise MeterError(f"cannot start the metering proxy on {self.host}:{self.requested_port}: "
                             f"{error.strerror or error}") from None
        except concurrent.futures.TimeoutError:
            raise MeterError(f"the metering proxy did not start within {STARTUP_SECONDS:g} s") from None
        return self

    def _serve(self, ready: concurrent.futures.Future[int]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            port = loop.run_until_complete(self._startup())
        except BaseException as error:
            ready.set_exception(error)
            loop.close()
            return
        ready.set_result(port)
        try:
            loop.run_forever()
        except BaseException as error:  # the loop itself broke: every later call says so
            self._failure = f"its event loop stopped: {error!r}"
        finally:
            if not self._stopping and self._failure is None:
                self._failure = "its event loop stopped"
            loop.run_until_complete(self._shutdown())
            loop.close()

    async def _startup(self) -> int:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_route("*", "/{path:.*}", self._handle)
        # No access log: a request line can carry an API key (Gemini's ?key=).
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.requested_port)
        await site.start()
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=60),
            auto_decompress=False,
            # forward the agent's headers, and only those: no User-Agent, Accept or Content-Type of aiohttp's own
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
            # one cell's cookies must never reach another cell's requests
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        if self.log_path is not None:
            self._log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 (closed in _shutdown)
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else self.requested_port

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        """Stop serving: calls in flight are cut, the log is closed. Idempotent."""
        self._stopping = True
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join()

    def __enter__(self) -> MeterProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check(self) -> None:
        """``MeterError`` unless the proxy is serving."""
        if self._failure is not None:
            raise MeterError(f"the metering proxy failed: {self._failure}")
        if self._thread is None or not self._thread.is_alive() or self._port is None:
            raise MeterError("the metering proxy is not running")

    @property
    def port(self) -> int:
        self.check()
        assert self._port is not None
        return self._port

    @property
    def url(self) -> str:
        """``http://HOST:PORT``: every cell route and the control API are under it."""
        return proxy_url(self.host, self.port)

    # -- the harness's API -------------------------------------------------------------------------
    def open_cell(self, cell_key: str, arm: str, upstreams: Iterable[Upstream], cap: SpendCap = NO_CAP,
                  budget: Limit = NO_LIMIT) -> CellRoute:
        """A route for one cell, a base URL per upstream; its calls count against ``cap``, ``budget``, the totals."""
        return self.meter.open_cell(cell_key, arm, upstreams, cap, budget, self.url)

    def cell_state(self, route: CellRoute) -> CellState:
        self.check()
        return self.meter.cell_state(route.token)

    def close_cell(self, route: CellRoute, drain_seconds: float = 30.0) -> CellState:
        """The cell's final metered spend (every call in ``calls``); its route is refused from now on."""
        self.check()
        return self.meter.close_cell(route.token, drain_seconds)

    def totals(self) -> MeterTotals:
        self.check()
        return self.meter.totals()

    def count_outside(self, arm: str, usage: Usage) -> None:
        self.meter.count_outside(arm, usage)

    # -- serving -----------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path, _, query = request.raw_path.partition("?")
        if path.startswith("/_meter/"):
            return await self._control(request, path)
        parts = path.split("/", 4)
        api, is_call = api_for(path)
        shape = api or API_BY_NAME[CHAT]
        if len(parts) < 4 or parts[1] != "c":
            self.meter.admit("")  # counted as unrouted
            return _json_response(404, shape.refusal("arena meter: this URL names no cell; a cell's base URL is "
                                                     f"{self.url}/c/<token>/<upstream>")[1])
        token, name = parts[2], parts[3]
        upstream = self.meter.upstream(token, name)
        if isinstance(upstream, str):
            return _json_response(404, shape.refusal(f"arena meter: {upstream}")[1])
        counted = is_call and request.method == "POST"
        route, refusal = self.meter.admit(token, counted)
        if route is None:
            return _json_response(404, shape.refusal(f"arena meter: {refusal}")[1])
        exchange = Exchange(name, api if counted else None, path, counted)
        if refusal is not None:
            self._settle(token, exchange.call("refused", 400, problem=refusal))
            status, body = shape.refusal(f"arena meter: {refusal}; this call was not sent to the model")
            return _json_response(status, body)
        tail = "/" + parts[4] if len(parts) == 5 else ""
        target = URL(upstream.url + tail + (f"?{query}" if query else ""), encoded=True)
        call = exchange.call("unknown", problem="the proxy failed while relaying the call")
        # Shielded: an agent that hangs up (aiohttp then cancels this handler) does not stop the reading of
        # the reply its call was already spending on.
        relay = asyncio.ensure_future(self._relay(request, target, exchange, shape))
        try:
            await asyncio.shield(relay)
            call = exchange.ended()
        except _AgentLeft:
            call = exchange.agent_left()
        except _UpstreamFailed as failure:
            call = exchange.upstream_failed(failure)
        except asyncio.CancelledError:  # the agent's connection closed while the proxy waited on the upstream
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(relay, AGENT_GONE_READ_SECONDS)  # cancelled after that: unknown
            call = exchange.agent_left()
            raise
        finally:
            if counted:
                self._settle(token, call)
        response = request.get(RESPONSE_KEY)
        return response if response is not None else web.Response(status=499)

    async def _relay(self, request: web.Request, target: URL, exchange: Exchange, shape: ModelApi) -> None:
        """Send the request upstream and its reply back, each chunk as it arrives.

        ``_AgentLeft`` when the agent went away mid-reply; ``_UpstreamFailed``
        when the upstream could not be reached (the agent gets a 502) or broke
        off its reply (the agent's connection is cut the same way).
        """
        assert self._session is not None
        body = await request.read()
        exchange.read_request(body)
        try:
            upstream_reply = await self._session.request(
                request.method, target, headers=forwarded_request_headers(request.headers),
                data=body if body or request.method in ("POST", "PUT", "PATCH") else None, allow_redirects=False)
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            message = f"arena meter: cannot reach the upstream {exchange.upstream} ({type(error).__name__})"
            status, reply_body = shape.bad_gateway(message)
            response = _json_response(status, reply_body)
            request[RESPONSE_KEY] = response
            exchange.status = status
            raise _UpstreamFailed(message, before_reply=True) from None
        async with upstream_reply as reply:
            exchange.replied(reply.status, reply.headers)
            stream = web.StreamResponse(status=reply.status, reason=reply.reason,
                                        headers=forwarded_reply_headers(reply.headers))
            request[RESPONSE_KEY] = stream
            agent_gone = False
            try:
                await stream.prepare(request)
            except ConnectionResetError:  # aiohttp's ClientConnectionResetError is one too
                agent_gone = True
            while True:
                try:
                    chunk = await reply.content.readany()
                except (aiohttp.ClientError, OSError, TimeoutError) as error:
                    if request.transport is not None:
                        request.transport.close()  # the agent sees the reply break off, as it did here
                    raise _UpstreamFailed(f"the upstream's reply broke off ({type(error).__name__})",
                                          before_reply=False) from None
                if not chunk:
                    exchange.read_whole = True
                    break
                exchange.feed(chunk)
                if not agent_gone:
                    try:
                        await stream.write(chunk)
                    except ConnectionResetError:
                        agent_gone = True  # the rest is still read: its usage is what the call spent
            if agent_gone:
                raise _AgentLeft()
            try:
                await stream.write_eof()
            except ConnectionResetError:
                raise _AgentLeft() from None

    def _settle(self, token: str, call: MeteredCall) -> None:
        record = self.meter.settle(token, call)
        if self._log is not None:
            self._log.write(json.dumps(record) + "\n")
            self._log.flush()

    # -- the control API ---------------------------------------------------------------------------
    async def _control(self, request: web.Request, path: str) -> web.StreamResponse:
        sent = request.headers.get(SECRET_HEADER, "")
        if self.control_secret is None or not hmac.compare_digest(sent.encode(), self.control_secret.encode()):
            return _json_response(403, {"error": {"message": "arena meter: the control API needs its secret"}})
        loop = asyncio.get_running_loop()
        try:
            data = await request.json() if request.method == "POST" and request.can_read_body else {}
            parts = path.strip("/").split("/")
            if parts == ["_meter", "cells"] and request.method == "POST":
                upstreams = [Upstream.parse(str(name), str(url), "control request")
                             for name, url in dict(data["upstreams"]).items()]
                route = self.open_cell(str(data["cell_key"]), str(data["arm"]), upstreams,
                                       SpendCap(**data["cap"]), Limit(**data["budget"]))
                return _json_response(200, route.to_json())
            if len(parts) == 3 and parts[1] == "cells" and request.method == "GET":
                return _json_response(200, self.meter.cell_state(parts[2]).to_json())
            if len(parts) == 4 and parts[1] == "cells" and parts[3] == "close" and request.method == "POST":
                drain = float(data.get("drain_seconds", 30.0))
                # closing waits for calls in flight, which settle on this loop: wait elsewhere
                state = await loop.run_in_executor(None, self.meter.close_cell, parts[2], drain)
                return _json_response(200, state.to_json())
            if parts == ["_meter", "totals"] and request.method == "GET":
                return _json_response(200, self.meter.totals().to_json())
            if parts == ["_meter", "outside"] and request.method == "POST":
                self.meter.count_outside(str(data["arm"]), Usage.from_json(data["usage"]))
                return _json_response(200, {"ok": True})
        except MeterError as error:
            return _json_response(404, {"error": {"message": str(error)}})
        except (KeyError, TypeError, ValueError) as error:
            return _json_response(400, {"error": {"message": f"arena meter: bad control request: {error!r}"}})
        return _json_response(404, {"error": {"message": f"arena meter: no control route {request.method} {path}"}})


class _AgentLeft(Exception):
    """The agent closed its connection while its reply was being written."""


class _UpstreamFailed(Exception):
    """The upstream could not be reached (``before_reply``), or its reply broke off."""

    def __init__(self, message: str, *, before_reply: bool):
        super().__init__(message)
        self.before_reply = before_reply


class Exchange:
    """One request on its way through: what the meter learns of it, and the call it becomes.

    ``api`` is None for a request the meter does not read (it costs nothing).
    """

    def __init__(self, upstream: str, api: ModelApi | None, path: str, counted: bool):
        self.upstream = upstream
        self.api = api
        self.path = path
        self.counted = counted
        self.started = time.monotonic()
        self.asked: str | None = None
        self.request_problem: str | None = None
        self.reader: ReplyReader | None = None
        self.status: int | None = None
        self.stream = False
        #: the upstream's whole reply was read (the agent may have gone before it reached it)
        self.read_whole = False

    def read_request(self, body: bytes) -> None:
        if not self.counted:
            return
        if self.api is None:
            self.request_problem = "no API the meter knows has this path"
            return
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            self.request_problem = "the request body is not a JSON object"
        self.asked = self.api.request_model(self.path, parsed)

    def replied(self, status: int, headers: Mapping[str, str]) -> None:
        self.status = status
        content_type = headers.get("Content-Type", "")
        self.stream = content_type.split(";")[0].strip().lower() == "text/event-stream"
        if self.api is not None and self.request_problem is None and 200 <= status < 300:
            self.reader = ReplyReader(self.api, content_type, headers.get("Content-Encoding", ""))

    def feed(self, chunk: bytes) -> None:
        if self.reader is not None:
            self.reader.feed(chunk)

    def call(self, outcome: str, status: int | None = None, *, problem: str | None = None,
             reading: Reading | None = None) -> MeteredCall:
        model = (reading.model if reading else None) or self.asked or UNKNOWN_MODEL
        return MeteredCall(self.upstream, self.api.name if self.api else None, model, self.asked, outcome,
                           status if status is not None else self.status, self.stream,
                           reading.tokens if reading else None, problem, time.monotonic() - self.started)

    def ended(self) -> MeteredCall:
        """The call, once its whole reply reached the agent."""
        if self.request_problem is not None:
            return self.call("unknown", problem=self.request_problem)
        if self.status is None or not 200 <= self.status < 300:
            return self.call("failed", problem=f"the upstream answered HTTP {self.status}")
        assert self.reader is not None
        reading = self.reader.result()
        if reading.tokens is None:
            return self.call("unknown", problem=reading.problem, reading=reading)
        return self.call("counted", reading=reading)

    def agent_left(self) -> MeteredCall:
        """The call, when the agent went away before its reply ended: counted if its usage had gone by
        (the proxy read the whole reply, or the events so far carry all of it)."""
        if self.read_whole:
            return self.ended()
        reading = self.reader.complete_so_far() if self.reader else None
        if reading is not None and reading.tokens is not None:
            return self.call("counted", reading=reading)
        return self.call("unknown", problem="the agent closed the connection before the reply ended")

    def upstream_failed(self, failure: _UpstreamFailed) -> MeteredCall:
        if failure.before_reply and self.request_problem is None:
            return self.call("failed", problem=str(failure))
        return self.call("unknown", problem=self.request_problem or str(failure))
