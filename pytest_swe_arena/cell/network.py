"""A cell's network, per phase: the agent's and the graded tests'; each sealed or open, and why.

Sealed (the default): the sandbox has a network namespace of its own with only loopback (``bwrap
--unshare-net``), so the agent reaches no port of the machine's loopback (another cell's meter route, the
controller's sockets, the test hosts), no other machine, and resolves no name. Its model endpoints are the
exception: for each loopback endpoint the arm calls (``cell_network``), ``netgate.py`` listens on the same
port of the sandbox's loopback and carries each connection over a Unix socket shown in the sandbox to a
``CellGate`` the harness serves outside it, which connects to the endpoint. The URLs stay as they were.

Open: the sandbox shares the machine's network, as before; the row says so and why (``network_reason``).
A cell is open when its arm calls a model endpoint that is not on this machine's loopback without the
meter (the harness would have to carry names and TLS: not built), since sealing it would cut the agent off
from its model.

Grading (``grading_network``): the graded tests run in a sandbox with a network namespace of their own with
only loopback (a test server they start on 127.0.0.1 works; the machine's loopback, other machines and names
do not), unless the row's environment names what its tests need of the network (a shipped spec's
``network``, ``Instance.network_needs``): then they share the machine's network, as SWE-bench's containers
did. An image's tests run in a container with ``--network none``: sealed too; the workspace's graded run
(``--arena-verify-on=workspace``) is in the cell's sandbox, under the same rule. Without a sandbox
(``--arena-sandbox=none``) they are open.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .netgate import splice

#: The values of a row's ``network`` (the agent phase's policy).
NETWORK_MODES = ("sealed", "open")
#: Hosts that name this machine's loopback.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
#: The program that runs first in a sealed sandbox, and the capabilities it starts with (and drops).
NETGATE = Path(__file__).with_name("netgate.py")
GATE_CAPABILITIES = ("CAP_SETPCAP", "CAP_NET_ADMIN", "CAP_NET_RAW")
#: At most this many distinct refused (host, port) are kept per cell; the rest are counted together.
REFUSED_KEPT = 200
#: How long closing a gate waits for the netgate's last report (its sandbox is already gone by then).
REPORT_WAIT = 10.0


@dataclass(frozen=True)
class Endpoint:
    """A model endpoint on this machine's loopback: the host as the URL names it, and its port."""

    host: str
    port: int


#: What an arm's ``network`` setting accepts.
NETWORK_ACCEPTED = '"sealed" (the default), "open", or a list of hosts such as ["pypi.org", "files.pythonhosted.org"]'
#: The port of a sealed cell's loopback where the allow-list's CONNECT proxy listens (``HTTPS_PROXY``).
PROXY_PORT = 3128
#: The variables that point an agent's programs' https at the proxy (pip, uv, git, curl), and keep the loopback
#: (its model endpoints) off it. Plain http is not proxied: the proxy speaks only CONNECT.
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy")
NO_PROXY = ("NO_PROXY", "no_proxy")
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(:[0-9]{1,5})?$")


def parse_network(value: object, where: str) -> tuple[str, tuple[str, ...]]:
    """An arm's ``network`` setting: ``(mode, allow-list)``; ``ValueError`` naming ``where`` and what is accepted.

    A host alone allows its ports 443 and 80; ``host:port`` that port only.
    """
    if value is None or value == "sealed":
        return "sealed", ()
    if value == "open":
        return "open", ()
    if isinstance(value, list) and value and all(isinstance(host, str) and _HOST.match(host) for host in value):
        return "sealed", tuple(dict.fromkeys(host.lower() for host in value))
    raise ValueError(f"{where}: field 'network': {value!r} is not {NETWORK_ACCEPTED}")


def allowed(allow: Iterable[str], host: str, port: int) -> bool:
    """Whether the allow-list lets a CONNECT to ``host:port`` through."""
    host = host.lower().rstrip(".")
    return any(entry == f"{host}:{port}" or (entry == host and port in (443, 80)) for entry in allow)


@dataclass(frozen=True)
class CellNetwork:
    """The agent phase's network for one cell: ``sealed`` with the ``endpoints`` carried in (and the hosts of
    ``allow`` through the CONNECT proxy), or ``open`` and why."""

    mode: str = "sealed"
    endpoints: tuple[Endpoint, ...] = ()
    reason: str | None = None
    allow: tuple[str, ...] = ()

    @property
    def sealed(self) -> bool:
        return self.mode == "sealed"

    def to_json(self, gate: CellGate | None = None) -> dict[str, Any]:
        """What the row records (its ``details.network``): the policy, and what its ``gate`` saw refused."""
        return {"agent": self.mode, "endpoints": [f"{e.host}:{e.port}" for e in self.endpoints],
                **({"reason": self.reason} if self.reason else {}),
                **({"allow": list(self.allow)} if self.allow else {}),
                **({"refused": gate.refusals()} if gate is not None else {})}


def loopback_endpoint(url: str) -> Endpoint | None:
    """The endpoint of an http(s) URL on this machine's loopback; None for any other URL."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or parts.hostname not in LOOPBACK_HOSTS:
        return None
    return Endpoint(parts.hostname, port or (443 if parts.scheme == "https" else 80))


def cell_network(model_urls: Iterable[str], named_urls: Iterable[str] = (), *, open_reason: str | None = None,
                 allow: tuple[str, ...] = ()) -> CellNetwork:
    """The network of a cell whose agent calls ``model_urls`` (its upstreams, or its meter route's URLs).

    ``named_urls`` are values of the arm's own ``env`` table: a loopback URL there is carried in too (the
    arm's author named it), any other is ignored. ``open_reason`` (an arm's ``network = "open"``, say)
    opens the cell. A model URL off this machine's loopback opens it as well, with that URL as the reason.
    """
    if open_reason is not None:
        return CellNetwork("open", reason=open_reason)
    endpoints: dict[Endpoint, None] = {}
    for url in model_urls:
        endpoint = loopback_endpoint(url)
        if endpoint is None:
            return CellNetwork("open", reason=f"its model endpoint {url} is not on this machine's loopback, and "
                                              "unmetered calls to a remote endpoint are not carried into a sealed cell")
        endpoints[endpoint] = None
    for url in named_urls:
        endpoint = loopback_endpoint(url)
        if endpoint is not None:
            endpoints[endpoint] = None
    if allow and any(endpoint.port == PROXY_PORT for endpoint in endpoints):
        return CellNetwork("open", reason=f"a model endpoint uses port {PROXY_PORT}, the allow-list proxy's")
    return CellNetwork("sealed", tuple(endpoints), allow=allow)


@dataclass
class CellGate:
    """The harness's side of a sealed cell: one Unix socket per endpoint in ``directory``, each carried to its
    endpoint. ``connections`` counts what each endpoint was given. Use as a context manager (``open_gate``)."""

    network: CellNetwork
    directory: Path
    connections: dict[int, int] = field(default_factory=dict)
    #: What the netgate saw the command try besides its endpoints: (host or name asked, port) -> attempts.
    refused: dict[tuple[str, int], int] = field(default_factory=dict)
    #: Attempts beyond ``REFUSED_KEPT`` distinct ones, and whether a report ended before the gate closed
    #: (the netgate stopped while the agent ran: the agent can kill it, losing its model with it).
    refused_uncounted: int = 0
    _listeners: list[socket.socket] = field(default_factory=list)
    _readers: list[threading.Thread] = field(default_factory=list)
    _taker: threading.Thread | None = None
    _closing: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        report = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        report.bind(str(self.directory / "report"))
        report.listen(8)
        self._listeners.append(report)
        self._taker = threading.Thread(target=self._take_reports, args=(report,), daemon=True,
                                       name="arena-gate-report")
        self._taker.start()
        if self.network.allow:
            self._proxy()
        for endpoint in self.network.endpoints:
            if refuses(endpoint):
                continue  # no socket: the netgate leaves the port closed, so the agent is refused as outside
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(self.directory / str(endpoint.port)))
            listener.listen(128)
            self._listeners.append(listener)
            threading.Thread(target=self._serve, args=(listener, endpoint), daemon=True,
                             name=f"arena-gate-{endpoint.port}").start()

    def _proxy(self) -> None:
        """Serve the allow-list's CONNECT proxy on the Unix socket behind the cell's ``PROXY_PORT``."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.directory / str(PROXY_PORT)))
        listener.listen(128)
        self._listeners.append(listener)

        def serve() -> None:
            while True:
                try:
                    client, _ = listener.accept()
                except OSError:
                    return
                threading.Thread(target=self._connect, args=(client,), daemon=True).start()

        threading.Thread(target=serve, daemon=True, name="arena-gate-proxy").start()

    def _connect(self, client: socket.socket) -> None:
        """One CONNECT request: carried to an allowed host, else refused (403) and counted."""
        with client:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 8192:
                data = client.recv(8192)
                if not data:
                    return
                head += data
            words = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            target = words[1] if len(words) == 3 and words[0] == "CONNECT" else ""
            host, _, port = target.rpartition(":")
            host = host.strip("[]")
            if not host or not port.isdigit():
                client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\n\r\n")
                return
            if not allowed(self.network.allow, host, int(port)):
                self._refuse(host.lower(), int(port))
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n")
                return
            try:
                upstream = socket.create_connection((host, int(port)), timeout=30)
            except OSError:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n")
                return
            upstream.settimeout(None)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            splice(client, upstream)

    def _refuse(self, host: str, port: int) -> None:
        key = (host, port)
        with self._lock:
            if key in self.refused or len(self.refused) < REFUSED_KEPT:
                self.refused[key] = self.refused.get(key, 0) + 1
            else:
                self.refused_uncounted += 1

    def close(self) -> None:
        """Stop serving, once the reports of the (ended) sandbox are read to their end.

        The netgate connects its report before the command starts, so by now it waits in the backlog if not
        taken yet: a connection of the harness's own, taken after it, ends the taking.
        """
        self._closing = True
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as last:
            last.connect(str(self.directory / "report"))
            if self._taker is not None:
                self._taker.join(REPORT_WAIT)
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for reader in list(self._readers):
            reader.join(REPORT_WAIT)

    def refusals(self) -> list[dict[str, Any]]:
        """The row's ``details.network.refused``: host (or the name asked), port, attempts; most first."""
        with self._lock:
            found = sorted(self.refused.items(), key=lambda item: (-item[1], item[0]))
        rows = [{"host": host, "port": port, "count": count} for (host, port), count in found]
        if self.refused_uncounted:
            rows.append({"host": "(others)", "port": 0, "count": self.refused_uncounted})
        return rows

    def _take_reports(self, listener: socket.socket) -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            if self._closing:  # the harness's own connection of ``close``: every report before it is taken
                connection.close()
                return
            reader = threading.Thread(target=self._read_report, args=(connection,), daemon=True)
            with self._lock:
                self._readers.append(reader)
            reader.start()

    def _read_report(self, connection: socket.socket) -> None:
        # Written by a process inside the sandbox: lines are checked, and what they may grow is bounded.
        with connection, connection.makefile("rb") as lines:
            for line in lines:
                host, _, port = line.decode("ascii", "replace").strip().rpartition(" ")
                if not host or not port.isdigit() or len(host) > 253 or int(port) > 65535:
                    continue
                self._refuse(host, int(port))

    def _serve(self, listener: socket.socket, endpoint: Endpoint) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections[endpoint.port] = self.connections.get(endpoint.port, 0) + 1
            threading.Thread(target=_carry, args=(client, endpoint), daemon=True).start()


@dataclass(frozen=True)
class GradingNetwork:
    """The grading phase's network for one cell: ``sealed`` (the tests' own loopback and nothing else) or
    ``open`` and why. Recorded in the row beside the agent's (``details.network.grading``)."""

    mode: str = "sealed"
    reason: str | None = None

    @property
    def sealed(self) -> bool:
        return self.mode == "sealed"

    def to_json(self) -> dict[str, Any]:
        """The keys it adds to the row's ``details.network``."""
        return {"grading": self.mode, **({"grading_reason": self.reason} if self.reason else {})}


def grading_network(needs: Iterable[str], *, sandboxed: bool, container: bool) -> GradingNetwork:
    """The graded tests' network: in a container (an image's, ``--network none``) sealed; on this machine without
    a sandbox (``--arena-sandbox=none``) open; in a sandbox (a fresh tree's, or the workspace's with
    ``--arena-verify-on=workspace``) sealed, unless the row's environment ``needs`` the network
    (``Instance.network_needs``)."""
    if container:
        return GradingNetwork("sealed")
    if not sandboxed:
        return GradingNetwork("open", "no sandbox (--arena-sandbox=none)")
    needs = tuple(needs)
    if needs:
        return GradingNetwork("open", f"the environment's tests need the network (field 'network': "
                                      f"{', '.join(needs)})")
    return GradingNetwork("sealed")


@contextlib.contextmanager
def open_gate(network: CellNetwork) -> Iterator[CellGate | None]:
    """The gate of a sealed cell for as long as its agent runs (None for an open cell)."""
    if not network.sealed:
        yield None
        return
    # Outside the cell: the agent sees the sockets (shown read-only) and cannot replace them.
    directory = Path(tempfile.mkdtemp(prefix="arena-gate-"))
    gate = CellGate(network, directory)
    try:
        gate.start()
        yield gate
    finally:
        gate.close()
        shutil.rmtree(directory, ignore_errors=True)


def refuses(endpoint: Endpoint) -> bool:
    """Whether ``endpoint`` refuses a connection now (nothing listens on its port)."""
    try:
        socket.create_connection((endpoint.host, endpoint.port), timeout=REPORT_WAIT).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False  # slow or otherwise failing: carried, and the agent meets what the harness met
    return False


def _carry(client: socket.socket, endpoint: Endpoint) -> None:
    try:
        upstream = socket.create_connection((endpoint.host, endpoint.port))
    except OSError:
        client.close()
        return
    splice(client, upstream)


def gate_command(gate: CellGate | None, argv: list[str], python: str) -> list[str]:
    """``argv`` behind the netgate when the cell is sealed (``python`` runs it, inside the sandbox)."""
    if gate is None:
        return argv
    ports = [str(endpoint.port) for endpoint in gate.network.endpoints]
    if gate.network.allow:
        proxy = f"http://127.0.0.1:{PROXY_PORT}"
        ports.append(str(PROXY_PORT))
        argv = ["/usr/bin/env", *(f"{name}={proxy}" for name in PROXY_VARIABLES),
                *(f"{name}={','.join(LOOPBACK_HOSTS)}" for name in NO_PROXY), *argv]
    return [python, "-I", "-S", str(NETGATE), str(gate.directory), *ports, "--", *argv]


def env_urls(env: Mapping[str, str]) -> list[str]:
    """The values of an arm's ``env`` table that are URLs."""
    return [value for value in env.values() if isinstance(value, str) and "://" in value]




def agent_network(arm: object, route_urls: Iterable[str] | None, sandboxed: bool) -> CellNetwork:
    """The agent phase's network for a cell of ``arm``: its meter route's URLs when metered (``route_urls``),
    else the upstreams its ``metering`` names; the loopback URLs of its ``env`` table as well. Open
    without a sandbox (``--arena-sandbox=none``), and when an arm with a model names none of its endpoints."""
    if not sandboxed:
        return CellNetwork("open", reason="no sandbox (--arena-sandbox=none)")
    mode, allow = getattr(arm, "network", ("sealed", ()))
    if mode == "open":
        return CellNetwork("open", reason="the arm's network = \"open\"")
    metering = getattr(arm, "metering", None)
    upstreams = [upstream.url for upstream in getattr(metering, "upstreams", ())]
    if route_urls is not None:
        # A partial meter sees only some calls (a supervisor's workers): the others go to their upstreams.
        urls = [*route_urls, *(upstreams if getattr(metering, "partial", False) else ())]
    else:
        urls = upstreams
    if not urls and (getattr(arm, "model", None) or getattr(arm, "worker_model", None)):
        # Its model is reached through the user's own setup (secrets, their opencode config): sealing the cell
        # would cut the agent off from it, and a model off this machine would open the cell anyway.
        return CellNetwork("open", reason="the harness does not know where its model calls go (no 'upstream', "
                                          "no base URL in its config or env table): name it in 'upstream' to seal "
                                          "the cell")
    env = getattr(arm, "env", None)
    return cell_network(urls, env_urls(env) if isinstance(env, Mapping) else (), allow=allow)
