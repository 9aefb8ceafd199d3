"""Concurrency: cells of an arm that sleeps (an agent waiting on its model) with ``-n 8``, vs the ideal.

    python bench/concurrency.py               # 32 cells x 2 s, -n 8: ideal 8 s
    python bench/concurrency.py --cells 4 --seconds 0.2 --workers 2 --skip-dist   # smoke size

The arm is a real arm kind (``sleep``, registered by the bench suite's
conftest through ``pytest_arena_arm_kinds``); every cell also materializes its
workspace, extracts the patch and runs ``verify``, as any cell does. The ideal
is cells x seconds / workers: perfect packing, no start-up, no harness.

The scheduling part runs the same number of cells with uneven sleeps (a few
long agents among short ones, as real agents are) under each ``--dist`` mode
worth comparing, against the same ideal (the longest worker's share of the
total, packed perfectly).
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime

import benchlib
from benchlib import Figure

#: --dist modes to compare, and whether cells are grouped by repository (xdist_group marks).
DIST_MODES = (("load", False), ("worksteal", False), ("loadgroup", True))
REPOSITORIES = 4


def uneven_seconds(cells: int, mean: float) -> list[float]:
    """Durations with the given mean: one cell in eight takes 4x the rest (long agent runs)."""
    weights = [4.0 if number % 8 == 0 else 1.0 for number in range(cells)]
    scale = mean * cells / sum(weights)
    return [round(weight * scale, 3) for weight in weights]


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--skip-dist", action="store_true", help="only the even sweep, not the --dist comparison")
    args = parser.parse_args()

    arms_toml = f"[tool.swe_arena.arms.SLEEP]\nkind = \"sleep\"\nseconds = {args.seconds}\n"
    with benchlib.scratch(args, "bench-concurrency-") as root:
        repo, base, patch = benchlib.small_repo(root)
        rows = benchlib.instance_rows(args.cells, repo, base, patch)
        suite = benchlib.write_suite(root / "even", rows, arms_toml, arms="SLEEP")
        # Warm the shared mirror as a sweep's first cells would; the timed sweep reuses it.
        benchlib.run_pytest(suite, "-p", "no:xdist", f"--arena-out={root / 'warm'}", "-k", rows[0]["instance_id"])
        ideal = args.cells * args.seconds / args.workers
        launched = time.time()
        seconds, completed = benchlib.run_pytest(suite, "-n", str(args.workers), f"--arena-out={root / 'even-out'}")
        if f"{args.cells} failed" not in completed.stdout:  # the sleep arm changes nothing: unresolved
            raise SystemExit(f"bench: expected {args.cells} unresolved cells:\n{completed.stdout[-3000:]}")
        ledger = [json.loads(line) for line in (root / "even-out/ledger.jsonl").read_text().splitlines()]
        first_start = min(datetime.fromisoformat(row["started_at"]).timestamp() for row in ledger)
        last_end = max(datetime.fromisoformat(row["ended_at"]).timestamp() for row in ledger)
        plain = root / "plain"
        plain.mkdir()
        (plain / "test_sleep.py").write_text(
            "import time\n\nimport pytest\n\n\n"
            f"@pytest.mark.parametrize('number', range({args.cells}))\n"
            f"def test_sleep(number):\n    time.sleep({args.seconds})\n"
        )
        plain_seconds, _ = benchlib.run_pytest(plain, "-n", str(args.workers))
        # What one worker pays before its first cell: a fresh interpreter, pytest, plugins, collection.
        arena_start, _ = benchlib.run_pytest(suite, "-p", "no:xdist", "--collect-only")
        plain_start, _ = benchlib.run_pytest(plain, "-p", "no:xdist", "--collect-only")
        figures = [
            Figure(f"{args.cells} cells x {args.seconds:g} s, -n {args.workers}", seconds, "s",
                   "ideal (cells x seconds / workers)", ideal, "<= 1.3"),
            Figure(f"plain pytest-xdist: {args.cells} tests sleeping {args.seconds:g} s", plain_seconds, "s",
                   "ideal (cells x seconds / workers)", ideal),
            Figure("the arena sweep", seconds, "s", "plain pytest-xdist, same sleeps", plain_seconds),
            Figure("cells only (first start to last end)", last_end - first_start, "s",
                   "ideal (cells x seconds / workers)", ideal),
            Figure("one process: start-up + collection", arena_start, "s", "plain pytest, same count",
                   plain_start),
        ]
        notes = [f"{args.workers} workers on {len(os.sched_getaffinity(0))} CPUs; "
                 "the mirror was warmed by a one-cell sweep first",
                 f"arena sweep timeline: {first_start - launched:.2f} s from launch to the first cell, "
                 f"{last_end - first_start:.2f} s of cells, {launched + seconds - last_end:.2f} s to exit"]

        if not args.skip_dist:
            durations = uneven_seconds(args.cells, args.seconds)
            uneven_rows = []
            per_repo = -(-args.cells // REPOSITORIES)
            for number in range(REPOSITORIES):
                name = f"repo{number}"
                repo_path, repo_base, repo_patch = benchlib.small_repo(root, name)
                uneven_rows += benchlib.instance_rows(per_repo, repo_path, repo_base, repo_patch, name=name)
            uneven_rows = [{**row, "sleep_seconds": duration}
                           for row, duration in zip(uneven_rows[: args.cells], durations, strict=True)]
            uneven = benchlib.write_suite(root / "uneven", uneven_rows, arms_toml, arms="SLEEP")
            benchlib.run_pytest(uneven, "-n", "2", f"--arena-out={root / 'warm2'}", "-k", "00000")
            uneven_ideal = max(sum(durations) / args.workers, max(durations))
            for mode, grouped in DIST_MODES:
                seconds, _ = benchlib.run_pytest(uneven, "-n", str(args.workers), f"--dist={mode}",
                                                 f"--arena-out={root / mode}",
                                                 env={"BENCH_GROUP_BY_REPO": "1"} if grouped else None)
                label = f"uneven cells, --dist {mode}" + (" (grouped by repo)" if grouped else "")
                figures.append(Figure(label, seconds, "s", "ideal", uneven_ideal))
            notes.append(f"uneven: {args.cells} cells of {REPOSITORIES} repositories, one in eight sleeps 4x "
                         f"as long ({sum(durations):.1f} s of sleep in all); ideal = total / workers")
        benchlib.report("concurrency", figures, args, notes)


if __name__ == "__main__":
    main()
