"""An agent whose patch writes its own verdict: ``verdict_arm.py FILES`` writes, into its workspace (its cwd),
the files of one attack of ``verdict_writers.py`` (``{path: text}`` as base64 JSON; ``calc.mul`` stays broken
and the code under test tries to make the grading say it passed). Used by ``tests/grading/test_witness_sweeps.py``
as a ``command`` arm. The sandbox shows the arm this file only, so the attack's text comes on the command line.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path


def main() -> None:
    for name, text in json.loads(base64.b64decode(sys.argv[1])).items():
        path = Path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {name}")


if __name__ == "__main__":
    main()
