"""Concurrency: cells of an arm that sleeps (an agent waiting on its model), vs the ideal.

    python bench/concurrency.py               # 32 cells x 2 s at -n 8 (ideal 8 s), 64 x 10 s at -n 32 (ideal 20 s)
    python bench/concurrency.py --cases 4x0.2x2 --skip-dist   # smoke size: CELLSxSECONDSxWORKERS

The arm is a real arm kind (``sleep``, registered by the bench suite's
conftest through ``pytest_arena_arm_kinds``); every cell also materializes its
workspace, extracts the patch and runs ``verify``, as any cell does. The ideal
is cells x seconds / workers: perfect packing, no start-up, no harness. Each
case also runs plain pytest-xdist on the same sleeps, and times launch to the
first cell (every worker's start-up and collection, which xdist waits for
before it hands out any test) against plain pytest-xdist's launch to its first test.

Bytecode is cached as Python does by default (``PYTHONDONTWRITEBYTECODE`` is
unset for the sweeps, and a warm-up run writes the caches, as any first run
would): with it set, every worker compiles every module of every pytest plugin
again, the arena's and the plain baseline's alike.

Local workers are forked from the arena's fork server (``--arena-worker-start=fork``, the default);
each case also runs the same sweep with ``--arena-worker-start=popen`` (every worker a new
interpreter, as plain pytest-xdist starts them) and compares their launch to the first cell.

The figures in bench/README.md come from a virtual environment holding only the package and its
test dependencies (``python3 -m venv V && V/bin/pip install -e '.[test]'``, as on a fresh machine):
every pytest plugin installed beside the arena (hypothesis, pytest-benchmark, ...) is imported by
every xdist worker and the controller, and on 2 CPUs such plugins alone cost more start-up than the
whole harness, for the arena and the plain baseline alike.

The scheduling part runs the first case's number of cells with uneven sleeps (a
few long agents among short ones, as real agents are) under each ``--dist``
mode worth comparing, against the same ideal (the longest worker's share of the
total, packed perfectly).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import datetime
from pathlib import Path

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


def parse_case(text: str) -> tuple[int, float, int]:
    """``CELLSxSECONDSxWORKERS`` (``32x2x8``) -> (32, 2.0, 8)."""
    try:
        cells, seconds, workers = text.split("x")
        return int(cells), float(seconds), int(workers)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected CELLSxSECONDSxWORKERS, e.g. 32x2x8") from None


def first_start(folder: Path) -> float:
    """The earliest start time the plain tests wrote (one file each)."""
    return min(float(path.read_text()) for path in folder.iterdir())


def cell_span(out: Path) -> tuple[float, float]:
    """When the first cell of an out dir's ledger started, and when its last one ended."""
    ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    return (min(datetime.fromisoformat(row["started_at"]).timestamp() for row in ledger),
            max(datetime.fromisoformat(row["ended_at"]).timestamp() for row in ledger))


def sleep_case(root: Path, cells: int, seconds: float, workers: int) -> tuple[list[Figure], list[str]]:
    """One case: the arena sweep and plain pytest-xdist on the same sleeps."""
    name = f"{cells}x{seconds:g}x{workers}"
    arms_toml = f"[tool.swe_arena.arms.SLEEP]\nkind = \"sleep\"\nseconds = {seconds}\n"
    repo, base, patch = benchlib.small_repo(root, f"tiny-{name}")
    rows = benchlib.instance_rows(cells, repo, base, patch)
    suite = benchlib.write_suite(root / f"even-{name}", rows, arms_toml, arms="SLEEP")
    # Warm the shared mirror and the bytecode caches as a sweep's first run would; the timed sweep reuses them.
    benchlib.run_pytest(suite, "-n", "2", f"--arena-out={root / f'warm-{name}'}", "-k", rows[0]["instance_id"])
    ideal = cells * seconds / workers
    launched = time.time()
    wall, completed = benchlib.run_pytest(suite, "-n", str(workers), f"--arena-out={root / f'out-{name}'}")
    if f"{cells} failed" not in completed.stdout:  # the sleep arm changes nothing: unresolved
        raise SystemExit(f"bench: expected {cells} unresolved cells:\n{completed.stdout[-3000:]}")
    first, last = cell_span(root / f"out-{name}")
    popen_launched = time.time()
    benchlib.run_pytest(suite, "-n", str(workers), f"--arena-out={root / f'popen-{name}'}",
                        "--arena-worker-start=popen")
    popen_first, _ = cell_span(root / f"popen-{name}")

    plain = root / f"plain-{name}"
    starts = plain / "starts"
    starts.mkdir(parents=True)
    (plain / "test_sleep.py").write_text(
        "import time\n\nimport pytest\n\n\n"
        f"@pytest.mark.parametrize('number', range({cells}))\n"
        f"def test_sleep(number):\n"
        f"    with open({str(starts)!r} + f'/{{number}}', 'w') as file:\n"
        f"        file.write(repr(time.time()))\n"
        f"    time.sleep({seconds})\n"
    )
    benchlib.run_pytest(plain, "-p", "no:xdist", "--collect-only")  # its bytecode, as for the suite
    plain_launched = time.time()
    plain_wall, _ = benchlib.run_pytest(plain, "-n", str(workers))
    plain_first = first_start(starts) - plain_launched
    label = f"{cells} cells x {seconds:g} s, -n {workers}"
    figures = [
        Figure(label, wall, "s", "ideal (cells x seconds / workers)", ideal, "<= 1.3"),
        Figure(f"plain pytest-xdist: {cells} tests sleeping {seconds:g} s, -n {workers}", plain_wall, "s",
               "ideal (cells x seconds / workers)", ideal),
        Figure(f"the arena sweep, {name}", wall, "s", "plain pytest-xdist, same sleeps", plain_wall),
        Figure(f"launch to the first cell, -n {workers}", first - launched, "s",
               "plain pytest-xdist: launch to its first test", plain_first),
        Figure(f"launch to the first cell, -n {workers}, forked workers", first - launched, "s",
               "the same sweep, workers started as new interpreters", popen_first - popen_launched),
        Figure(f"cells only (first start to last end), {name}", last - first, "s",
               "ideal (cells x seconds / workers)", ideal),
    ]
    notes = [f"{label}: {first - launched:.2f} s from launch to the first cell, {last - first:.2f} s of cells, "
             f"{launched + wall - last:.2f} s to exit"]
    return figures, notes


def installed_plugins() -> list[str]:
    """The pytest11 entry points of this environment (every worker imports them): the venv is part of the figure."""
    from importlib.metadata import entry_points

    return sorted({entry.name for entry in entry_points(group="pytest11")})


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--cases", type=lambda text: [parse_case(part) for part in text.split(",")],
                        default=[(32, 2.0, 8), (64, 10.0, 32)],
                        help="comma-separated CELLSxSECONDSxWORKERS (default 32x2x8,64x10x32)")
    parser.add_argument("--skip-dist", action="store_true", help="only the even sweeps, not the --dist comparison")
    args = parser.parse_args()
    # Python's default, whatever this shell says: see the module's docstring.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

    figures: list[Figure] = []
    notes = [f"{len(os.sched_getaffinity(0))} CPUs; each case's mirror and bytecode caches were warmed by a "
             "one-cell sweep first; PYTHONDONTWRITEBYTECODE unset; local workers forked (--arena-worker-start=fork) "
             f"unless said; pytest plugins installed: {', '.join(installed_plugins())}"]
    with benchlib.scratch(args, "bench-concurrency-") as root:
        for cells, seconds, workers in args.cases:
            case_figures, case_notes = sleep_case(root, cells, seconds, workers)
            figures += case_figures
            notes += case_notes
        cells, seconds, workers = args.cases[0]
        suite = root / f"even-{cells}x{seconds:g}x{workers}"
        plain = root / f"plain-{cells}x{seconds:g}x{workers}"
        # What one worker pays before its first cell: a fresh interpreter, pytest, plugins, collection.
        arena_start, _ = benchlib.run_pytest(suite, "-p", "no:xdist", "--collect-only")
        plain_start, _ = benchlib.run_pytest(plain, "-p", "no:xdist", "--collect-only")
        figures.append(Figure("one process: start-up + collection", arena_start, "s", "plain pytest, same count",
                              plain_start))

        if not args.skip_dist:
            arms_toml = f"[tool.swe_arena.arms.SLEEP]\nkind = \"sleep\"\nseconds = {seconds}\n"
            durations = uneven_seconds(cells, seconds)
            uneven_rows = []
            per_repo = -(-cells // REPOSITORIES)
            for number in range(REPOSITORIES):
                name = f"repo{number}"
                repo_path, repo_base, repo_patch = benchlib.small_repo(root, name)
                uneven_rows += benchlib.instance_rows(per_repo, repo_path, repo_base, repo_patch, name=name)
            uneven_rows = [{**row, "sleep_seconds": duration}
                           for row, duration in zip(uneven_rows[:cells], durations, strict=True)]
            uneven = benchlib.write_suite(root / "uneven", uneven_rows, arms_toml, arms="SLEEP")
            benchlib.run_pytest(uneven, "-n", "2", f"--arena-out={root / 'warm2'}", "-k", "00000")
            uneven_ideal = max(sum(durations) / workers, max(durations))
            for mode, grouped in DIST_MODES:
                wall, _ = benchlib.run_pytest(uneven, "-n", str(workers), f"--dist={mode}",
                                              f"--arena-out={root / mode}",
                                              env={"BENCH_GROUP_BY_REPO": "1"} if grouped else None)
                label = f"uneven cells, --dist {mode}" + (" (grouped by repo)" if grouped else "")
                figures.append(Figure(label, wall, "s", "ideal", uneven_ideal))
            notes.append(f"uneven: {cells} cells of {REPOSITORIES} repositories at -n {workers}, one in eight "
                         f"sleeps 4x as long ({sum(durations):.1f} s of sleep in all); ideal = total / workers")
        benchlib.report("concurrency", figures, args, notes)


if __name__ == "__main__":
    main()
