"""The crossing's overhead per graded cell: the harness's reads and writes of one cell's places through
``pytest_swe_arena.crossing`` against the same operations with plain ``open``/``shutil`` (the path before
issue 27), alternating in one run.

    python bench/crossing.py                 # 100 samples of 10 cells
    python bench/crossing.py --cells 10      # smoke size

What one graded cell crosses (the pipeline's calls): ``clear`` of the harness's names in the run dir after the
arm, ``verify.log`` written (1 MiB) and read back to grade it (``read_log``), the JUnit report read, both copied
into the out dir, a usage file read, and an agent transcript followed (``files.LineFollower``). The figure is the
median of the per-cell differences; the target is under 50 ms per cell.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from pathlib import Path

import benchlib
from benchlib import Figure

from pytest_swe_arena import crossing
from pytest_swe_arena.files import LineFollower
from pytest_swe_arena.grading.verify import read_log

NAMES = ("verify.log", "verify-junit.xml", "env.log", "meter-calls.jsonl")
LOG = b"tests/test_calc.py::test_mul PASSED\n" * ((1 << 20) // 36)
JUNIT = b'<testsuite tests="10">' + b'<testcase classname="t" name="x"/>' * 200 + b"</testsuite>"
TRANSCRIPT = b'{"type": "assistant", "message": {"usage": {"input_tokens": 10}}}\n' * 2000
CAP = 64 * 1024 * 1024


def lay(cell: Path) -> None:
    for folder in ("run", "out", "home"):
        (cell / folder).mkdir(parents=True, exist_ok=True)
    (cell / "run" / "verify-junit.xml").write_bytes(JUNIT)
    (cell / "run" / "usage.json").write_bytes(b'{"input_tokens": 10, "output_tokens": 5}')
    (cell / "home" / "session.jsonl").write_bytes(TRANSCRIPT)


def through_the_crossing(cell: Path) -> None:
    run, out = cell / "run", cell / "out"
    crossing.clear(run, NAMES)
    with crossing.writing(run, "verify.log") as handle:
        handle.write(LOG)
    read_log(run / "verify.log", 0)
    crossing.read_capped(run, "verify-junit.xml", CAP)
    crossing.copy(run, "verify.log", out, "verify.log", cap=CAP)
    crossing.copy(run, "verify-junit.xml", out, "verify-junit.xml", cap=CAP)
    crossing.read_text(run / "usage.json", CAP)
    LineFollower().objects([cell / "home" / "session.jsonl"], final=True)


def plain(cell: Path) -> None:
    run, out = cell / "run", cell / "out"
    for name in NAMES:
        os.path.lexists(run / name)
    (run / "verify.log").write_bytes(LOG)
    (run / "verify.log").read_bytes().decode("utf-8", errors="replace")
    (run / "verify-junit.xml").read_bytes()
    shutil.copyfile(run / "verify.log", out / "verify.log")
    shutil.copyfile(run / "verify-junit.xml", out / "verify-junit.xml")
    (run / "usage.json").read_text()
    [json.loads(line) for line in (cell / "home" / "session.jsonl").read_bytes().splitlines() if line.strip()]


#: Cells per sample: one cell's crossings take about a millisecond, below the clocks' use under load.
BATCH = 10


def sample(action, cell: Path) -> tuple[float, float]:
    """(wall, CPU of this process) seconds per cell, over ``BATCH`` cells."""
    clock, cpu = time.perf_counter(), time.process_time()
    for _ in range(BATCH):
        action(cell)
    return (time.perf_counter() - clock) / BATCH, (time.process_time() - cpu) / BATCH


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=100, help="samples (of BATCH cells each)")
    args = parser.parse_args()
    with benchlib.scratch(args, "bench-crossing-") as root:
        lay(root / "a")
        lay(root / "b")
        plain(root / "b"), through_the_crossing(root / "a")  # warm both
        befores, afters = [], []
        for _ in range(args.cells):
            befores.append(sample(plain, root / "b"))
            afters.append(sample(through_the_crossing, root / "a"))
        wall = statistics.median(late[0] - early[0] for early, late in zip(befores, afters, strict=True))
        cpu = statistics.median(late[1] - early[1] for early, late in zip(befores, afters, strict=True))
        figures = [
            Figure("one cell's crossings", statistics.median(late[0] for late in afters), "s",
                   "the same with plain open/shutil", statistics.median(early[0] for early in befores)),
            Figure("one cell's crossings, CPU", statistics.median(late[1] for late in afters), "s",
                   "plain, CPU", statistics.median(early[1] for early in befores)),
        ]
        notes = [f"{args.cells} samples of {BATCH} cells, alternating; a 1 MiB verify.log, a 200-case JUnit file, "
                 "a 2,000-line transcript",
                 f"crossing's cost per cell beyond plain file calls (median of per-cell differences; target < 50 ms):"
                 f" wall {wall * 1000:+.2f} ms, CPU {cpu * 1000:+.2f} ms"]
        benchlib.report("crossing overhead", figures, args, notes)


if __name__ == "__main__":
    main()
