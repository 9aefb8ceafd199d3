"""Peak memory of the controller and of one worker during a sweep, vs plain pytest-xdist with as many tests.

    python bench/memory.py                    # 200 GOLD cells, -n 2
    python bench/memory.py --cells 10         # smoke size

Each process of the sweep writes its peak resident set (``VmHWM`` from
``/proc/self/status``) when it ends (the bench suite's conftest does it). The
baseline is the same conftest under plain pytest-xdist running as many trivial
tests, so the ratio is what the arena adds. A sweep of a tenth of the cells
shows whether memory grows with the number of cells (the controller keeps one
small row per cell; patches and logs go to disk as they arrive).
"""

from __future__ import annotations

import json
from pathlib import Path

import benchlib
from benchlib import Figure


def peaks(folder: Path) -> dict[str, float]:
    """worker id -> peak resident set in MiB."""
    return {data["worker"]: data["peak_kib"] / 1024 for data in
            (json.loads(path.read_text()) for path in folder.glob("*.json"))}


def measure(suite: Path, folder: Path, *args: str) -> dict[str, float]:
    folder.mkdir()
    benchlib.run_pytest(suite, "-n", "2", *args, env={"BENCH_MEMORY_DIR": str(folder)})
    found = peaks(folder)
    if not {"controller", "gw0", "gw1"} <= set(found):
        raise SystemExit(f"bench: expected peaks from the controller, gw0 and gw1 in {folder}, got {sorted(found)}")
    return found


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200)
    args = parser.parse_args()

    with benchlib.scratch(args, "bench-memory-") as root:
        repo, base, patch = benchlib.small_repo(root)
        rows = benchlib.instance_rows(args.cells, repo, base, patch)
        suite = benchlib.write_suite(root / "suite", rows)
        small = benchlib.write_suite(root / "small", rows[: max(1, args.cells // 10)])
        plain = benchlib.write_suite(root / "plain", [])
        (plain / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
        (plain / "test_plain.py").write_text(
            f"import pytest\n\n\n@pytest.mark.parametrize('number', range({args.cells}))\n"
            "def test_plain(number):\n    pass\n"
        )
        sweep = measure(suite, root / "peaks-sweep", f"--arena-out={root / 'out'}")
        sweep_small = measure(small, root / "peaks-small", f"--arena-out={root / 'out-small'}")
        baseline = measure(plain, root / "peaks-plain")
        worker = max(sweep["gw0"], sweep["gw1"])
        plain_worker = max(baseline["gw0"], baseline["gw1"])
        figures = [
            Figure(f"controller peak, {args.cells} cells", sweep["controller"], "MiB",
                   f"plain pytest-xdist controller, {args.cells} tests", baseline["controller"]),
            Figure(f"worker peak, {args.cells} cells", worker, "MiB",
                   f"plain pytest-xdist worker, {args.cells} tests", plain_worker),
            Figure(f"controller peak, {args.cells} cells", sweep["controller"], "MiB",
                   f"controller peak, {len(rows[: max(1, args.cells // 10)])} cells", sweep_small["controller"]),
            Figure(f"worker peak, {args.cells} cells", worker, "MiB",
                   f"worker peak, {len(rows[: max(1, args.cells // 10)])} cells",
                   max(sweep_small["gw0"], sweep_small["gw1"])),
        ]
        notes = ["GOLD arm, verify = true, -n 2; peak = VmHWM of each process; worker = the larger of gw0, gw1"]
        benchlib.report("peak memory", figures, args, notes)


if __name__ == "__main__":
    main()
