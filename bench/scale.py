"""Scale: a 10,000-cell sweep (generated, trivial verify) at ``-n 4`` stays linear and exits fast.

    python bench/scale.py                       # 5,000 instances x GOLD,EMPTY = 10,000 cells, -n 4
    python bench/scale.py --cells 200 --workers 2   # smoke size

Half the cells fail (EMPTY changes nothing: unresolved), as in a real sweep, so the
terminal's failure summary is part of the exit. Figures, each against a baseline of the
same run:

- time per cell over the last 10% of cells vs the first 10% (from the ledger's times: each tenth
  from the end of the cell before it, the first from the first cell's start, divided by its cells),
  target <= 1.1x;
- the exit phase: from the last cell's end to the process's end, target < 5 s;
- the controller's peak resident set (VmHWM, written by the bench conftest), target < 150 MiB,
  vs plain pytest-xdist running as many trivial tests with as many failures;
- collection in one process (``--collect-only``) vs plain pytest collecting as many
  parametrized tests, target <= 2x.

Both sweeps get a ``--basetemp`` in the scratch dir: without one, pytest's exit removes the
oldest of ``/tmp/pytest-of-<user>``'s numbered dirs, whatever another pytest left there.
"""

from __future__ import annotations

import json
import time
from datetime import datetime

import benchlib
from benchlib import Figure
from memory import peaks


def per_cell_seconds(ends: list[float], start: float, share: float = 0.1) -> tuple[float, float]:
    """Seconds per cell over the first and the last ``share`` of cells, by end time.

    Each share is timed from the end of the cell before it (the first from ``start``, when the first cell
    started), so it spans as many cells as it counts and is never zero however close cells end.
    """
    ends = sorted(ends)
    count = max(1, min(len(ends) - 1, int(len(ends) * share)))
    first = (ends[count - 1] - start) / count
    last = (ends[-1] - ends[-count - 1]) / count
    return first, last


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=10_000, help="cells in all (GOLD and EMPTY of cells/2 instances)")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()

    instances = max(1, args.cells // 2)
    cells = instances * 2
    with benchlib.scratch(args, "bench-scale-") as root:
        repo, base, patch = benchlib.small_repo(root)
        rows = benchlib.instance_rows(instances, repo, base, patch)
        suite = benchlib.write_suite(root / "suite", rows, arms="GOLD,EMPTY")
        plain = root / "plain"
        plain.mkdir()
        (plain / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
        (plain / "conftest.py").write_text(benchlib.SUITE_CONFTEST)
        (plain / "test_plain.py").write_text(
            f"import pytest\n\n\n@pytest.mark.parametrize('number', range({cells}))\n"
            "def test_plain(number):\n    if number % 2:\n        pytest.fail('unresolved', pytrace=False)\n"
        )
        # Warm the shared mirror and snapshot as a sweep's first cell would.
        benchlib.run_pytest(suite, "-p", "no:xdist", f"--arena-out={root / 'warm'}", "-k", rows[0]["instance_id"])

        sweep_peaks, plain_peaks = root / "peaks-sweep", root / "peaks-plain"
        sweep_peaks.mkdir()
        plain_peaks.mkdir()
        launched = time.time()
        seconds, completed = benchlib.run_pytest(suite, "-n", str(args.workers), f"--arena-out={root / 'out'}",
                                                 f"--basetemp={root / 'basetemp-sweep'}",
                                                 env={"BENCH_MEMORY_DIR": str(sweep_peaks)})
        if f"{instances} failed, {instances} passed" not in completed.stdout:
            raise SystemExit(f"bench: expected {instances} resolved and {instances} unresolved cells:\n"
                             f"{completed.stdout[-3000:]}")
        ledger = [json.loads(line) for line in (root / "out/ledger.jsonl").read_text().splitlines()]
        ends = [datetime.fromisoformat(row["ended_at"]).timestamp() for row in ledger]
        first_start = min(datetime.fromisoformat(row["started_at"]).timestamp() for row in ledger)
        first, last = per_cell_seconds(ends, first_start)
        exit_phase = launched + seconds - max(ends)
        plain_seconds, _ = benchlib.run_pytest(plain, "-n", str(args.workers), f"--basetemp={root / 'basetemp-plain'}",
                                               env={"BENCH_MEMORY_DIR": str(plain_peaks)})
        controller = peaks(sweep_peaks)["controller"]
        plain_controller = peaks(plain_peaks)["controller"]
        arena_collect, _ = benchlib.run_pytest(suite, "-p", "no:xdist", "--collect-only")
        plain_collect, _ = benchlib.run_pytest(plain, "-p", "no:xdist", "--collect-only")
        figures = [
            Figure("time per cell, last 10% of cells", last, "s", "time per cell, first 10%", first, "<= 1.1"),
            Figure("exit phase (last cell's end to exit)", exit_phase, "s", "the whole sweep", seconds, "< 5 s"),
            Figure(f"controller peak, {cells} cells", controller, "MiB",
                   f"plain pytest-xdist controller, {cells} tests, half failing", plain_controller, "< 150 MiB"),
            Figure(f"collection of {cells} cells, one process", arena_collect, "s",
                   f"plain pytest collecting {cells} tests", plain_collect, "<= 2"),
            Figure(f"the sweep, {cells} cells, -n {args.workers}", seconds, "s",
                   f"plain pytest-xdist, {cells} trivial tests", plain_seconds),
        ]
        notes = [f"{instances} instances x GOLD,EMPTY, verify = true, -n {args.workers}; "
                 f"{first_start - launched:.2f} s from launch to the first cell, "
                 f"{max(ends) - first_start:.2f} s of cells, {exit_phase:.2f} s to exit"]
        benchlib.report(f"scale: {cells} cells, -n {args.workers}", figures, args, notes)


if __name__ == "__main__":
    main()
