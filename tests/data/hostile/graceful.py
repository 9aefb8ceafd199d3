"""An agent that needs its grace: on SIGTERM it takes a moment to write what it has, then exits.

``graceful.py READY FLUSHED``. The moment is what an agent saving its session needs; a harness that
kills it before its grace is over (by killing the sandbox around it) leaves no FLUSHED file.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path


def flush(*_: object) -> None:
    time.sleep(1)
    Path(sys.argv[2]).write_text("flushed on SIGTERM\n")
    sys.exit(0)


signal.signal(signal.SIGTERM, flush)
Path(sys.argv[1]).write_text("ready\n")
while True:
    time.sleep(1)
