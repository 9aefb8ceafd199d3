"""Run a metering proxy as its own process: ``python -m pytest_swe_arena.spend.meter --port-file FILE``.

The harness starts one per sweep, or per session of a worker on another host
(``process.MeterProcess``). Cells, each with its upstreams, are opened over
its control API (``MeterClient``) with the secret in the ``ARENA_METER_SECRET``
variable (never on the command line, where ``ps`` shows it). ``--limits``
holds the sweep's and each arm's totals over all its cells. The port is written to ``--port-file`` once it
listens; SIGTERM or SIGINT stops it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from ..budget import BudgetLimits
from .accounts import MeterError
from .client import SECRET_VARIABLE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_swe_arena.spend.meter",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--prices", type=Path, help='JSON file {"MODEL": {"input": USD per million, ...}}')
    parser.add_argument("--limits", type=Path,
                        help='JSON file {"sweep": {"max_usd": X, "max_tokens": N}, "arms": {"ARM": {...}}}')
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path, help="write the port here once listening")
    parser.add_argument("--log", type=Path, help="append one JSON line per call to this file")
    parser.add_argument("--until-stdin-closes", action="store_true",
                        help="stop when stdin reaches its end (the process that started it is gone)")
    args = parser.parse_args(argv)
    secret = os.environ.get(SECRET_VARIABLE)
    if not secret:
        parser.error(f"set {SECRET_VARIABLE}: the control API that opens cells needs it")
    prices = json.loads(args.prices.read_text()) if args.prices else {}
    limits = BudgetLimits.from_json(json.loads(args.limits.read_text())) if args.limits else BudgetLimits()

    from .proxy import MeterProxy  # aiohttp only when a proxy really starts

    proxy = MeterProxy(prices, limits, host=args.host, port=args.port, log=args.log, control_secret=secret)
    try:
        proxy.start()
    except MeterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.port_file:
        temporary = args.port_file.with_name(f"{args.port_file.name}.tmp{os.getpid()}")
        temporary.write_text(f"{proxy.port}\n")
        os.replace(temporary, args.port_file)
    print(f"metering proxy listening on {proxy.url}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.until_stdin_closes:
        def stop_at_end_of_stdin() -> None:
            sys.stdin.buffer.read()
            stop.set()

        threading.Thread(target=stop_at_end_of_stdin, daemon=True).start()
    while not stop.wait(0.5):
        try:
            proxy.check()
        except MeterError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
