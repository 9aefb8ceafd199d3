"""An agent that needs its grace: on SIGTERM it writes what it has, then exits. ``graceful.py READY FLUSHED``."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path


def flush(*_: object) -> None:
    Path(sys.argv[2]).write_text("flushed on SIGTERM\n")
    sys.exit(0)


signal.signal(signal.SIGTERM, flush)
Path(sys.argv[1]).write_text("ready\n")
while True:
    time.sleep(1)
