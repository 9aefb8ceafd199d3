"""An agent that tries to take the machine down, within a bound so a broken limit cannot: ``bombs.py KIND MARKER``.

Run in the workspace; ``MARKER`` is written into its command line so a test finds any process it left.

- ``memory``: allocates (and touches) 16 MiB blocks, up to 1 GiB;
- ``fork``: starts children that wait on a pipe, up to 400, then waits for them;
- ``disk``: writes 1 MiB blocks into the workspace, up to 256 MiB, in 8 MiB files.

Each prints how far it got; it exits 0 only if it reached its bound (a limit that did not hold).
"""

from __future__ import annotations

import os
import sys
import time

MIB = 1024 * 1024


def memory() -> None:
    blocks = []
    for number in range(64):
        block = bytearray(16 * MIB)
        for offset in range(0, len(block), 4096):  # touched: the pages are really used
            block[offset] = 1
        blocks.append(block)
        print(f"memory: {16 * (number + 1)} MiB", flush=True)


def fork() -> None:
    read, write = os.pipe()
    children = []
    for number in range(400):
        try:
            pid = os.fork()
        except OSError as error:
            print(f"fork: refused after {number} children: {error}", flush=True)
            os.close(write)
            raise SystemExit(3) from None
        if pid == 0:
            os.close(write)
            os.read(read, 1)  # until the parent closes its end (or dies)
            os._exit(0)
        children.append(pid)
    print(f"fork: {len(children)} children", flush=True)
    os.close(write)
    for pid in children:
        os.waitpid(pid, 0)


def disk() -> None:
    block = b"x" * MIB
    os.makedirs("filler", exist_ok=True)
    for number in range(256):
        with open(f"filler/{number // 8}.bin", "ab") as file:
            file.write(block)
        print(f"disk: {number + 1} MiB", flush=True)
    time.sleep(0)


if __name__ == "__main__":
    {"memory": memory, "fork": fork, "disk": disk}[sys.argv[1]]()
