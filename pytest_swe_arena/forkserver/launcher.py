"""The process execnet starts for a forked worker: it hands its stdio to the zygote and stands in for the fork.

Run as ``python -S -E launcher.py SOCKET FALLBACK_NOTE -u -c BOOTSTRAP`` (execnet appends ``-u``,
maybe ``-B``, and ``-c BOOTSTRAP`` to the popen spec's ``python=``): standard library only, no site,
so it starts in a few milliseconds. It sends the zygote its stdin, stdout and stderr (SCM_RIGHTS),
its working directory, environment and arguments; the zygote forks a worker that takes them and
runs execnet's bootstrap. The launcher stays the process execnet waits on and kills: it passes
SIGINT, SIGTERM and SIGHUP on to the worker, and exits with the worker's status; when the launcher
dies (SIGKILL included) the zygote sees its socket close and kills the worker; when the zygote dies,
the launcher kills the worker itself.

When the zygote cannot be reached the launcher becomes an ordinary worker (``exec`` of this Python
with execnet's arguments, nothing read yet from stdin) and says so once per sweep: the first
launcher to fall back creates ``FALLBACK_NOTE`` and prints one line.
"""

import json
import os
import signal
import socket
import struct
import sys

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def fall_back(note_path: str, why: str, arguments: list[str]) -> None:
    """Become an ordinary popen worker: this Python, execnet's arguments."""
    try:
        os.close(os.open(note_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError:
        pass  # another launcher has said it
    else:
        sys.stderr.write(f"swe-arena: the worker fork server is gone ({why}): "
                         "workers start as new interpreters from now on\n")
        sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *arguments])


def read_line(connection: socket.socket) -> bytes:
    """One line from the zygote (empty when it closed the connection first)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = connection.recv(1)
        if not chunk:
            return b""
        line += chunk
    return line


def exit_like(status: int) -> None:
    """End as the worker ended: its exit code, or death by its signal."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main() -> None:
    socket_path, note_path, *arguments = sys.argv[1:]
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(socket_path)
    except OSError as error:
        connection.close()
        fall_back(note_path, f"{type(error).__name__}: {error.strerror or error}", arguments)
    request = json.dumps({"arguments": arguments, "cwd": os.getcwd(), "environment": dict(os.environ)}).encode()
    try:
        socket.send_fds(connection, [struct.pack("!I", len(request)) + request], [0, 1, 2])
        pid_line = read_line(connection)
    except OSError:
        pid_line = b""
    if not pid_line:
        connection.close()
        fall_back(note_path, "it closed the connection", arguments)
    worker = int(pid_line)
    # The worker holds execnet's pipes now: the controller sees them close when the worker ends.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(worker, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    status_line = read_line(connection)
    if not status_line:  # the zygote died: the worker must not outlive what execnet waits on
        try:
            os.kill(worker, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os._exit(1)  # xdist says the worker went down; the next launcher says why
    exit_like(int(status_line))


if __name__ == "__main__":
    main()
