"""An agent that fills its run dir to break the worker and leak files: ``flood_run_dir.py RUN_DIR PRIVATE_FILE``.

Sixty 8 MiB files (sparse: they cost no disk), 1,500 small ones, a folder 200 levels deep, a link to
a private file and one to a folder outside, a FIFO that blocks whoever opens it, bytes that are not
UTF-8.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

MiB = 1024 * 1024


def main() -> None:
    run_dir, private = Path(sys.argv[1]), Path(sys.argv[2])
    big = run_dir / "big"
    big.mkdir(parents=True)
    for number in range(60):
        with open(big / f"blob{number:02d}.log", "wb") as handle:
            handle.write(b"start of blob\n")
            handle.truncate(8 * MiB)
    small = run_dir / "small"
    small.mkdir()
    for number in range(1500):
        (small / f"note{number:04d}.txt").write_text(f"note {number}\n")
    deep = run_dir
    for level in range(200):
        deep = deep / f"d{level}"
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("at the bottom\n")
    (run_dir / "transcript.jsonl").symlink_to(private)
    (run_dir / "home").symlink_to(private.parent, target_is_directory=True)
    os.mkfifo(run_dir / "usage.json")
    (run_dir / "latin1.log").write_bytes(b"caf\xe9\n")


if __name__ == "__main__":
    main()
