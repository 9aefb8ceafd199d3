"""Try each action of a JSON plan and write what happened: ``escape.py PLAN RESULTS``.

An action is ``{"name": ..., "op": ..., "arg": ...}``; its result is "ok" (with what was found) or
the name of the error that stopped it (``ENOENT``, ``EROFS``, ``ESRCH``...).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys


def read(path):
    if os.path.isdir(path):
        return sorted(os.listdir(path))
    with open(path, "rb") as handle:
        return handle.read(64).decode(errors="replace")


def write(path):
    with open(path, "a") as handle:
        handle.write('{"forged": true}\n')
    return "written"


def truncate(path):
    os.chmod(path, 0o644)  # packs are read-only files; their owner can change that
    os.truncate(path, 0)
    return "truncated"


def signal_process(pid):
    os.kill(int(pid), 0)
    return "signalled"


def scan_proc(_):
    """Every cwd, command line and environment this process can read through /proc."""
    seen = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        for name in ("cmdline", "environ"):
            try:
                with open(f"/proc/{entry}/{name}", "rb") as handle:
                    seen.append(handle.read().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass
        try:
            seen.append(os.readlink(f"/proc/{entry}/cwd"))
        except OSError:
            pass
    return seen


def hunt_secrets(_):
    """What every process this one can see shows through /proc of env files and dotenvx keys: its cwd (and
    any ``.env.keys`` there), its command line and its environment (ancestors included)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            found.append(f"cwd {cwd}")
            for name in os.listdir(f"/proc/{entry}/cwd"):
                if name.endswith(".env") or name == ".env.keys":
                    with open(f"/proc/{entry}/cwd/{name}", "rb") as handle:
                        found.append(f"{name}: {handle.read(200).decode(errors='replace')}")
        except OSError:
            pass
        for name in ("cmdline", "environ"):
            try:
                with open(f"/proc/{entry}/{name}", "rb") as handle:
                    text = handle.read().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{name} {text}")
            except OSError:
                pass
    return found


def truncate_snapshot(_):
    """Truncate every file of the object stores the workspace borrows (``.git/objects/info/alternates``)."""
    tried = {}
    with open(".git/objects/info/alternates") as alternates:
        stores = [line.strip() for line in alternates if line.strip()]
    for store in stores:
        for folder, _, files in os.walk(store):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    tried[path] = truncate(path)
                except OSError as error:
                    tried[path] = errno.errorcode.get(error.errno or 0, str(error))
    return tried


def connect(address):
    host, port = address
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        return connection.recv(64).decode()


def daemon(marker):
    """Double fork, new session, empty environment: what escapes a process group and a token scan."""
    reader, writer = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(reader)
            os.dup2(writer, 1)
            os.execve(sys.executable, [sys.executable, "-c", DAEMON, marker], {})
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as started:
        return started.readline().strip()  # the daemon says it runs before this returns


DAEMON = """
import os, sys, time
print("daemon", os.getpid(), flush=True)
os.close(1)
while True:
    time.sleep(1)
"""


def git(args):
    completed = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    return f"exit {completed.returncode}"


OPS = {"read": read, "write": write, "truncate": truncate, "signal": signal_process, "scan_proc": scan_proc,
       "connect": connect, "daemon": daemon, "git": git, "hunt_secrets": hunt_secrets,
       "truncate_snapshot": truncate_snapshot}


def main() -> None:
    with open(sys.argv[1]) as plan:
        actions = json.load(plan)
    results = {}
    for action in actions:
        try:
            results[action["name"]] = ["ok", OPS[action["op"]](action.get("arg"))]
        except OSError as error:
            results[action["name"]] = [errno.errorcode.get(error.errno or 0, str(error)), str(error)]
    with open(sys.argv[2], "w") as out:
        json.dump(results, out)


if __name__ == "__main__":
    main()
