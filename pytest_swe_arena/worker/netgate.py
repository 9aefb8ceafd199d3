"""The first program of a sealed sandbox: the cell's model endpoints on its own loopback, then the command.

Run inside the sandbox as ``python -I -S netgate.py SOCKETS PORT... -- COMMAND...`` (standard library only:
the sandbox shows the harness's interpreter, and ``-S`` keeps its site-packages out of the start-up). The
sandbox has a network namespace of its own with only loopback (``bwrap --unshare-net``); for each ``PORT``
this listens on the sandbox's ``127.0.0.1:PORT`` (and ``[::1]:PORT`` where the namespace has it), in a process
of its own, and carries each connection to the Unix socket ``SOCKETS/PORT``, which the harness serves from
outside (``network.CellGate``) by connecting to the endpoint. Then it becomes ``COMMAND`` (exec: the same pid,
bwrap's child, so the sandbox ends when it does, and the forwarder with it). The URLs the agent was given keep
working unchanged; every other address, port and name it tries is refused by the kernel.
"""

import os
import socket
import sys
import threading


def _pump(source, target):
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


def _carry(client, path):
    try:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(path)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener, path):
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_carry, args=(client, path), daemon=True).start()


def _listen(family, host, port):
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


def main(argv):
    split = argv.index("--")
    sockets, ports, command = argv[0], [int(port) for port in argv[1:split]], argv[split + 1:]
    listeners = []
    for port in ports:
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            listener = _listen(family, host, port)
            if listener is not None:
                listeners.append((listener, os.path.join(sockets, str(port))))
    if listeners:
        child = os.fork()
        if child == 0:
            if os.fork() != 0:  # the forwarder is the grandchild: bwrap (pid 1) reaps it, not the command
                os._exit(0)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            threads = [threading.Thread(target=_serve, args=pair, daemon=True) for pair in listeners]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            os._exit(0)
        os.waitpid(child, 0)
        for listener, _ in listeners:
            listener.close()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
