"""The first program of a sealed sandbox: the cell's model endpoints on its own loopback, a watch on what else
the command tries, then the command.

Run inside the sandbox as ``python -I -S netgate.py SOCKETS PORT... -- COMMAND...`` (standard library only:
the sandbox shows the harness's interpreter, and ``-S`` keeps its site-packages out of the start-up). The
sandbox has a network namespace of its own with only loopback (``bwrap --unshare-net``); for each ``PORT``
this listens on the sandbox's ``127.0.0.1:PORT`` (and ``[::1]:PORT`` where the namespace has it), in a process
of its own, and carries each connection to the Unix socket ``SOCKETS/PORT``, which the harness serves from
outside (``network.CellGate``) by connecting to the endpoint. A port without that socket (an endpoint that
refused the harness when the cell started) is not listened on: the command's connection is refused there
too, as it would be outside, instead of being accepted and then closed. Then it becomes ``COMMAND`` (exec: the same pid,
bwrap's child, so the sandbox ends when it does, and the forwarder with it). The URLs the agent was given keep
working unchanged; every other address, port and name it tries is refused by the kernel.

The watch: bwrap starts this with three capabilities in the sandbox's own user namespace (``NET_ADMIN``,
``NET_RAW``, ``SETPCAP``; ``Sandbox.wrap``). With them it makes every IPv4 address local to the namespace
(``ip route add local default dev lo table local``), so a connection to any host (a test host's address,
a remote server, the nameserver of ``/etc/resolv.conf``) is refused on the loopback instead of failing as
unreachable, and opens a packet socket on ``lo``. The forwarder process keeps them (so the command, with
none, cannot trace it) and reports each attempt it sees leave (a TCP SYN, a UDP datagram; for DNS the
name asked) as a line ``HOST PORT`` to ``SOCKETS/report``; the command's own process drops all three (the
bounding set, ambient, effective and permitted) before it becomes the command.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading

#: Capabilities this starts with (``Sandbox.wrap``'s ``--cap-add``): CAP_SETPCAP, CAP_NET_ADMIN, CAP_NET_RAW.
CAPABILITIES = (8, 12, 13)
PACKET_OUTGOING = 4
ETH_P_ALL = 0x0003


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end, how in ((target, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                end.shutdown(how)
            except OSError:
                pass


def splice(client: socket.socket, upstream: socket.socket) -> None:
    """Carry bytes both ways between two connected sockets until each side is done, then close both
    (the netgate's relay, and the harness's side of the gate and its CONNECT proxy: ``network.py``)."""
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _carry(client: socket.socket, path: str) -> None:
    try:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(path)
    except OSError:
        client.close()
        return
    splice(client, upstream)


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_carry, args=(client, path), daemon=True).start()


def _listen(family: socket.AddressFamily, host: str, port: int) -> socket.socket | None:
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError:
        listener.close()
        if family == socket.AF_INET6:
            return None  # no IPv6 loopback in this namespace: 127.0.0.1 serves alone
        raise
    listener.listen(128)
    return listener


def _route_everything_local() -> None:
    """Every IPv4 address is this namespace's own: a connection anywhere meets its loopback (and is seen)."""
    ip = shutil.which("ip", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if ip is not None:
        subprocess.run([ip, "route", "add", "local", "default", "dev", "lo", "table", "local"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def _packet_socket() -> socket.socket | None:
    try:
        watch = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        watch.bind(("lo", 0))
        return watch
    except OSError:
        return None


def _dns_name(payload: bytes) -> str | None:
    """The name a DNS query asks for, or None."""
    labels: list[str] = []
    at = 12
    while at < len(payload):
        size = payload[at]
        if size == 0:
            return ".".join(labels) or None
        if size > 63:
            return None
        labels.append(payload[at + 1:at + 1 + size].decode("ascii", "replace"))
        at += 1 + size
    return None


def _attempt(frame: bytes, allowed: set[int]) -> tuple[str, int] | None:
    """(host, port) of a connection attempt in an outgoing loopback frame, None for anything else."""
    kind = struct.unpack_from("!H", frame, 12)[0]
    packet = frame[14:]
    if kind == 0x0800 and len(packet) >= 20:
        header = (packet[0] & 0x0F) * 4
        protocol, host = packet[9], socket.inet_ntop(socket.AF_INET, packet[16:20])
    elif kind == 0x86DD and len(packet) >= 40:
        header, protocol, host = 40, packet[6], socket.inet_ntop(socket.AF_INET6, packet[24:40])
    else:
        return None
    segment = packet[header:]
    if len(segment) < 8:
        return None
    port = struct.unpack_from("!H", segment, 2)[0]
    if protocol == 6 and len(segment) >= 14:
        flags = segment[13]
        if not flags & 0x02 or flags & 0x10:  # a SYN without ACK opens a connection; nothing else does
            return None
        if host in ("127.0.0.1", "::1") and port in allowed:
            return None
        return host, port
    if protocol == 17:
        if port == 53:
            name = _dns_name(segment[8:])
            if name:
                return name, port
        return host, port
    return None


def _report(path: str) -> socket.socket | None:
    """The connection to the harness's report socket, made before the command starts."""
    try:
        report = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        report.connect(path)
        return report
    except OSError:
        return None


def _watch(watch: socket.socket, allowed: set[int], report: socket.socket) -> None:
    while True:
        frame, address = watch.recvfrom(65536)
        if address[2] != PACKET_OUTGOING:
            continue
        seen = _attempt(frame, allowed)
        if seen is not None:
            report.sendall(f"{seen[0]} {seen[1]}\n".encode())


def _drop_capabilities() -> None:
    """None of this process's capabilities survive into the command (root's included)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in CAPABILITIES:
        libc.prctl(24, capability, 0, 0, 0)  # PR_CAPBSET_DROP
    libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = ctypes.create_string_buffer(24)  # effective, permitted, inheritable: none, both words
    if libc.capset(ctypes.c_char_p(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def main(argv: list[str]) -> None:
    split = argv.index("--")
    sockets, ports, command = argv[0], [int(port) for port in argv[1:split]], argv[split + 1:]
    _route_everything_local()
    watch = _packet_socket()
    report = _report(os.path.join(sockets, "report")) if watch is not None else None
    if report is None and watch is not None:
        watch.close()
        watch = None
    listeners = []
    for port in ports:
        if not os.path.exists(os.path.join(sockets, str(port))):
            continue
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            listener = _listen(family, host, port)
            if listener is not None:
                listeners.append((listener, os.path.join(sockets, str(port))))
    if listeners or watch is not None:
        child = os.fork()
        if child == 0:
            if os.fork() != 0:  # the forwarder is the grandchild: bwrap (pid 1) reaps it, not the command
                os._exit(0)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            threads = [threading.Thread(target=_serve, args=pair, daemon=True) for pair in listeners]
            if watch is not None:
                threads.append(threading.Thread(target=_watch, daemon=True,
                                                args=(watch, set(ports), report)))
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            os._exit(0)
        os.waitpid(child, 0)
        for listener, _ in listeners:
            listener.close()
        if watch is not None:
            watch.close()
        if report is not None:
            report.close()
    _drop_capabilities()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
