"""An agent that solves one instance and breaks what the harness reads on the others: ``saboteur.py PROMPT_FILE``.

It tells the instances apart by their prompts. On ``demo__calc-1`` it fixes calc.mul. On every other
instance it leaves a workspace the harness cannot extract a patch from, each a different way: deleted,
a FIFO in its place (which blocks whoever opens it), a file in its place, or a FIFO for one of its files
(``git add -A`` refuses it). Counted, those cells are the
arm's failures; uncounted, the arm's rate would be 1/1.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"


def main() -> None:
    prompt = Path(sys.argv[1]).read_text()
    instance = next(f"demo__calc-{number}" for number in range(1, 6) if f"demo__calc-{number}:" in prompt)
    workspace = Path.cwd()
    if instance == "demo__calc-1":
        (workspace / "calc" / "ops.py").write_text(FIXED)
        return
    if instance == "demo__calc-5":
        (workspace / "calc" / "ops.py").unlink()
        os.mkfifo(workspace / "calc" / "ops.py")
        return
    os.chdir(workspace.parent)
    shutil.rmtree(workspace)
    if instance == "demo__calc-3":
        os.mkfifo(workspace)
    elif instance == "demo__calc-4":
        workspace.write_text("not a workspace\n")


if __name__ == "__main__":
    main()
