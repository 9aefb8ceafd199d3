"""The bench scripts still run: each at a tiny size, checked for the figures it must print.

No timing is asserted here (that is what bench/ is for); a script that breaks,
or stops measuring one of its figures, fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.hosts import host_support_problem

from pytest_swe_arena.cell.sandbox import probe_bwrap

BENCH = Path(__file__).resolve().parent.parent / "bench"

SMOKE_RUNS = {
    "workspace.py": (["--files", "40", "--commits", "4", "--cells", "2", "--strategies"],
                     ["materialize (per cell)", "git clone per cell", "git worktree add (mirror)"]),
    "overhead.py": (["--cells", "3", "--rounds", "1"], ["harness overhead per cell", "sweep per cell"]),
    "concurrency.py": (["--cases", "4x0.1x2,2x0.1x1", "--skip-dist"],
                       ["4 cells x 0.1 s, -n 2", "2 cells x 0.1 s, -n 1", "the arena sweep, 4x0.1x2",
                        "launch to the first cell, -n 2", "cells only (first start to last end), 4x0.1x2"]),
    "memory.py": (["--cells", "4"], ["controller peak, 4 cells", "worker peak, 4 cells"]),
    "interrupt.py": (["--workers", "2", "--grace", "0.5"], ["stop after SIGINT, -n 2, agents running"]),
    "report_scale.py": (["--rows", "40", "--repeat", "1"],
                        ["swe-arena report, 40 rows, viewer up to date", "swe-arena report peak RSS, 40 rows",
                         "swe-arena report, 40 rows, first run (builds the viewer's pages)"]),
    "scale.py": (["--cells", "20", "--workers", "2"],
                 ["time per cell, last 10% of cells", "exit phase (last cell's end to exit)",
                  "controller peak, 20 cells", "collection of 20 cells, one process"]),
    "sandbox.py": (["--files", "40", "--commits", "3", "--runs", "2", "--rounds", "1"],
                   ["sandbox cost per cell", "fresh grading tree, sandboxed verify",
                    "extraction, harness git, cold index", "extraction, harness git, seeded index"]),
    "environments.py": (["--tiny", "--trials", "2", "--workers", "1"],
                        ["env phase, later cells of bench__tinyenv (median)"]),
    "meter.py": (["--calls", "5", "--throughput-calls", "20", "--threads", "4", "--streams", "4"],
                 ["JSON call through the meter", "SSE call through the meter",
                  "calls/s through the meter, 4 clients", "meter peak RSS, 4 streams at once"]),
    "hosts.py": (["--cells", "2", "--seconds", "0.1", "--shapes", "1x2,2x1"],
                 ["1 host(s) x 2 workers", "2 host(s) x 1 workers", "controller CPU per cell, 2x1",
                  "2 cells x 0.1 s, -n 2 (local, no ssh)"]),
    "witness.py": (["--cells", "2"], ["graded cell with witnesses", "graded cell with witnesses, CPU",
                                      "graded cell with witnesses, against the start-up rules alone"]),
    "crossing.py": (["--cells", "3"], ["one cell's crossings", "one cell's crossings, CPU"]),
    "floors.py": (["--instances", "2", "--trials", "1", "--floor-runs", "1"],
                  ["warm GOLD cell, median row", "first cell's environment build, median row"]),
    "cache.py": (["--instances", "2"],
                 ["cache, 2 templates, uv hardlinks", "cache after the sweep, budget half its need"]),
    "viewer_scale.py": (["--instances", "25", "--repeat", "1"],
                        ["viewer overview interactive, 100 cells",
                         "swe-arena report + viewer, first build (100 cell pages)",
                         "swe-arena report + viewer, rebuilt, nothing changed",
                         "swe-arena report + viewer, one row more"]),
}


@pytest.mark.parametrize("script", sorted(SMOKE_RUNS))
def test_bench_script_runs_and_reports_its_figures(script: str, tmp_path: Path) -> None:
    if script == "sandbox.py" and not probe_bwrap().works:
        pytest.skip(f"bwrap does not work here: {probe_bwrap().problem}")
    arguments, expected = SMOKE_RUNS[script]
    if script == "hosts.py" and (problem := host_support_problem()):
        pytest.skip(problem)
    output = tmp_path / "figures.json"
    completed = subprocess.run(
        [sys.executable, str(BENCH / script), *arguments, "--json", str(output)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900, check=False,
    )
    assert completed.returncode == 0, completed.stdout
    figures = json.loads(output.read_text())["figures"]
    names = [figure["name"] for figure in figures]
    for name in expected:
        assert name in names, f"{script} no longer reports {name!r}: {names}"
    for figure in figures:
        assert figure["value"] > 0 and figure["baseline"] > 0, figure
        assert f"{figure['ratio']:.2f}x" in completed.stdout


def test_the_results_table_is_the_median_of_the_runs_with_their_loads(tmp_path: Path) -> None:
    def run(value: float, load: str) -> Path:
        path = tmp_path / f"run-{value}.json"
        figure = {"name": "exit phase", "value": value, "unit": "s", "baseline_name": "the sweep",
                  "baseline": 10.0, "target": "< 5 s", "ratio": value / 10.0, "meets_target": value < 5}
        path.write_text(json.dumps({"title": "scale", "figures": [figure],
                                    "notes": [f"load average at the end: {load} on 2 CPUs"]}))
        return path

    runs = [run(1.0, "3.1"), run(9.0, "7.5"), run(2.0, "4.0")]
    completed = subprocess.run([sys.executable, str(BENCH / "table.py"), "--print", *map(str, runs)],
                               capture_output=True, text=True, timeout=120, check=True)
    line = "| scale | exit phase | 2 s | the sweep | 10 s | 0.20x | < 5 s mixed | 3 | 3.1, 7.5, 4.0 |"
    assert line in completed.stdout
