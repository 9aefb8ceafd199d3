"""A hostile agent that reaches for the network besides its model (issue 30), then calls its model.

``reach_out.py ATTACK TARGET RESULT``: ATTACK is ``connect`` (TARGET ``host:port``, a TCP connection),
``http`` (TARGET a URL: a POST as to a model route), ``resolve`` (TARGET a name) or ``proxy`` (TARGET
``host:port,host:port...``: a CONNECT to each through ``$HTTPS_PROXY``, reading what the far end says first);
what happened is written
as JSON to RESULT (the cell's run dir). Then one model call to ``$OPENAI_BASE_URL``, which a sealed cell
must still make, and have metered.
"""

import json
import os
import socket
import sys
import urllib.parse
import urllib.request

attack, target, result = sys.argv[1:4]
body = json.dumps({"model": "scripted-model", "messages": [{"role": "user", "content": "hi"}]}).encode()


def through_proxy(target):
    """The proxy's status line and the far end's first line, or the error."""
    proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
    with socket.create_connection((proxy.hostname, proxy.port), timeout=30) as connection:
        connection.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        reply = connection.makefile("rb")
        status = reply.readline().decode().strip()
        while reply.readline() not in (b"\r\n", b""):
            pass
        first = reply.readline().decode(errors="replace").strip() if " 200 " in status else ""
    return {"target": target, "status": status, "first": first}


try:
    if attack == "proxy":
        outcome = {"through": [through_proxy(one) for one in target.split(",")]}
    elif attack == "connect":
        host, _, port = target.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=30) as connection:
            connection.sendall(b"hello\n")
    elif attack == "http":
        urllib.request.urlopen(urllib.request.Request(target + "/chat/completions", data=body,
                                                      headers={"Content-Type": "application/json"}), timeout=30)
    else:
        socket.getaddrinfo(target, 443)
    if attack != "proxy":
        outcome = {"reached": True}
except OSError as error:
    outcome = {"reached": False, "error": str(error)}
with open(result, "w") as handle:
    json.dump(outcome, handle)
urllib.request.urlopen(urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                              headers={"Content-Type": "application/json"}), timeout=120)
