"""An agent that found the out dir and turns its failures into passes: ``forge_ledger.py LEDGER``.

It rewrites every row's status to resolved in place, keeping everything else as it was.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    ledger = Path(sys.argv[1])
    ledger.write_bytes(ledger.read_bytes().replace(b'"status": "unresolved"', b'"status": "resolved"'))


if __name__ == "__main__":
    main()
