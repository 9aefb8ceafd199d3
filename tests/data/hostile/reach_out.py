"""A hostile agent that reaches for the network besides its model (issue 30), then calls its model.

``reach_out.py ATTACK TARGET RESULT``: ATTACK is ``connect`` (TARGET ``host:port``, a TCP connection),
``http`` (TARGET a URL: a POST as to a model route) or ``resolve`` (TARGET a name); what happened is written
as JSON to RESULT (the cell's run dir). Then one model call to ``$OPENAI_BASE_URL``, which a sealed cell
must still make, and have metered.
"""

import json
import os
import socket
import sys
import urllib.request

attack, target, result = sys.argv[1:4]
body = json.dumps({"model": "scripted-model", "messages": [{"role": "user", "content": "hi"}]}).encode()
try:
    if attack == "connect":
        host, _, port = target.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=30) as connection:
            connection.sendall(b"hello\n")
    elif attack == "http":
        urllib.request.urlopen(urllib.request.Request(target + "/chat/completions", data=body,
                                                      headers={"Content-Type": "application/json"}), timeout=30)
    else:
        socket.getaddrinfo(target, 443)
    outcome = {"reached": True}
except OSError as error:
    outcome = {"reached": False, "error": str(error)}
with open(result, "w") as handle:
    json.dump(outcome, handle)
urllib.request.urlopen(urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                              headers={"Content-Type": "application/json"}), timeout=120)
