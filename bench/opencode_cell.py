"""Harness overhead of an opencode (SOLO) cell, against the same opencode run made by hand.

Baseline: ``opencode run`` started directly in a private HOME/XDG tree with a
fresh database, the same config and the scripted model (pytest_swe_arena/mockmodel, `swe-arena mock-model`)
answering one step. Arena: a one-cell sweep with a SOLO arm on the same
endpoint (``-p no:xdist``); the ledger's ``phases.arm`` is the arm's time in
the cell. The two alternate ``--cells`` times, so a change in the machine's
load hits both. The overhead per cell is the median arm time minus the median
baseline (the opencode home install, process-group control and reaping,
following the stream, reading the store); the harness's own steps are also
timed beside the plain operations they wrap. Both sides run on the same
machine in the same run, so the ratio compares across machines.

    python bench/opencode_cell.py --cells 5 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.agents import ASKED, OPENCODE, arm_table, opencode_config  # noqa: E402
from helpers.gitrepos import calc_project, git, write_jsonl  # noqa: E402
from helpers.scripted_model import ScriptedModel  # noqa: E402

from pytest_swe_arena.agents.opencode import read_sessions, read_stream  # noqa: E402
from pytest_swe_arena.arms.agent import agent_version  # noqa: E402
from pytest_swe_arena.arms.opencode_home import OPENCODE_QUIET_ENV  # noqa: E402
from pytest_swe_arena.cell import processes as proc  # noqa: E402


def bare_run(root: Path, repo: Path, config: Path, version: str) -> float:
    """One hand-made opencode run in a fresh private tree; returns its wall seconds."""
    dirs = {name: root / name for name in ("home", "config", "data", "cache", "state", "runtime", "tmp")}
    for directory in dirs.values():
        directory.mkdir(parents=True, mode=0o700)
    seed = dirs["config"] / "opencode"
    (seed / "node_modules").mkdir(parents=True)
    dependencies = {"@opencode-ai/plugin": version}
    (seed / "package.json").write_text(json.dumps({"dependencies": dependencies}))
    (seed / "package-lock.json").write_text(json.dumps(
        {"name": "opencode", "lockfileVersion": 3, "requires": True, "packages": {"": {"dependencies": dependencies}}}))
    workspace = root / "workspace"
    git(repo, "clone", "-q", "--shared", str(repo), str(workspace))
    (root / "prompt.txt").write_text("calc.mul(3, 4) returns 7, expected 12.")
    env = {
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]), "PWD": str(workspace),
        "HOME": str(dirs["home"]), "XDG_CONFIG_HOME": str(dirs["config"]), "XDG_DATA_HOME": str(dirs["data"]),
        "XDG_CACHE_HOME": str(dirs["cache"]), "XDG_STATE_HOME": str(dirs["state"]),
        "XDG_RUNTIME_DIR": str(dirs["runtime"]), "TMPDIR": str(dirs["tmp"]), "OPENCODE_CONFIG": str(config),
        "OPENCODE_DB": str(dirs["data"] / "opencode.db"), **OPENCODE_QUIET_ENV,
    }
    started = time.monotonic()
    with open(root / "prompt.txt", "rb") as prompt, open(root / "events.jsonl", "wb") as events:
        subprocess.run([OPENCODE, "run", "-m", ASKED, "--format", "json", "--title", "bench"], cwd=workspace,
                       env=env, stdin=prompt, stdout=events, stderr=subprocess.DEVNULL, check=True)
    return time.monotonic() - started


def arena_sweep(suite: Path, cache: Path, row: dict[str, object], config: Path) -> tuple[float, float]:
    """A one-cell SOLO sweep; returns (the sweep's wall seconds, the cell's arm phase)."""
    write_jsonl(suite / "instances" / "bench.jsonl", [row])
    (suite / "pyproject.toml").write_text(
        "[tool.pytest.ini_options]\n"
        f'arena_cache = "{cache}"\n'
        'addopts = "-p no:hypothesispytest -p no:benchmark"\n\n'
        "[tool.swe_arena]\n"
        + arm_table("SOLO", "opencode", model=ASKED, executable=OPENCODE, config=str(config))
    )
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                    "--arena-arms=SOLO"], cwd=suite, stdout=subprocess.DEVNULL, check=False)
    wall = time.monotonic() - started
    (ledger_row,) = [json.loads(line) for line in (suite / "arena-out" / "ledger.jsonl").read_text().splitlines()]
    return wall, ledger_row["phases"]["arm"]


def harness_steps(root: Path, repeats: int = 20) -> dict[str, float]:
    """Median seconds of the harness's own per-cell steps, each beside the plain operation it wraps."""
    def median_of(action: object) -> float:
        times = []
        for _ in range(repeats):
            started = time.monotonic()
            action()  # type: ignore[operator]
            times.append(time.monotonic() - started)
        return statistics.median(times)

    log = root / "true.log"
    bare = root / "bare0"
    return {
        "subprocess_run_true_s": median_of(lambda: subprocess.run(["true"], check=True)),
        "proc_run_true_s": median_of(lambda: proc.run(["true"], cwd=root, env=dict(os.environ), stdout=log)),
        "read_stream_and_store_s": median_of(lambda: (read_stream(bare / "events.jsonl"),
                                                      read_sessions(bare / "data" / "opencode.db"))),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if OPENCODE is None:
        print("opencode not found (npm install)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="bench-opencode-"))
    try:
        project = calc_project(root / "repos")
        version = agent_version(OPENCODE)
        with ScriptedModel([]) as model:  # every request gets the fallback: one step, "done"
            config = root / "opencode.json"
            config.write_text(json.dumps(opencode_config(model.base_url)))
            bare, arm, walls = [], [], []
            for n in range(args.cells):  # interleaved, so a change in the machine's load hits both sides
                bare.append(bare_run(root / f"bare{n}", project.repo, config, version))
                wall, seconds = arena_sweep(root / f"suite{n}", root / "cache", project.row(f"bench__calc-{n}"),
                                            config)
                arm.append(seconds)
                walls.append(wall)
        steps = harness_steps(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures = {
        "cells": args.cells,
        "bare_opencode_run_s": round(statistics.median(bare), 3),
        "arena_arm_phase_s": round(statistics.median(arm), 3),
        "overhead_per_cell_s": round(statistics.median(arm) - statistics.median(bare), 3),
        "arm_over_bare_ratio": round(statistics.median(arm) / statistics.median(bare), 3),
        "one_cell_sweep_wall_s": round(statistics.median(walls), 3),
        **{name: round(value, 4) for name, value in steps.items()},
        "bare_runs_s": [round(b, 3) for b in bare],
        "arm_phases_s": [round(a, 3) for a in arm],
    }
    for name, value in figures.items():
        print(f"{name:32} {value}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
