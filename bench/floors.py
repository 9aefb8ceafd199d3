"""Time per row against its floor (issue 32): warm GOLD cells vs the tests by hand, first builds vs `uv pip install`.

    python bench/floors.py --json bench/results/floors-1.json
    python bench/floors.py --instances 2 --trials 1 --floor-runs 1     # smoke size

The bundled suite's rows (``instances/suite.jsonl``), each given an environment (this Python,
``requirements = ["pytest"]``: what its verify command runs, so every instance builds its own template),
swept GOLD x (1 + ``--trials``) by the harness as a user runs it (no xdist, the default sandbox,
``--arena-grade-every-cell`` so every cell runs its own grading), and the same work done by hand in the
same run. Two figures per row:

- **warm cell**: the cells after the instance's first (the template is built), from the cell's start
  to its end (the ledger row's ``started_at``/``ended_at``: workspace, the steps' files (a GOLD cell has no
  venv of its own), the GOLD arm, extraction, the fresh grading tree with its venv (the template's packages
  bound read-only) and its copy of base's bytecode, the sandboxed tests: the whole cell), median, against the floor:
  the row's own ``verify`` command run by hand in a checkout of base + gold patch + test patch, with the
  venv the floor built first on PATH (one untimed run first writes the venv's and the checkout's bytecode,
  then the median of ``--floor-runs``; ``PYTHONDONTWRITEBYTECODE`` is unset for the sweep and the hand alike).
  Target 1.1x on the median row.
- **first cell**: the env phase of the instance's first cell (the template: a checkout of base, uv's
  venv and install with its byte-compile, the checkout's byte-compile; a GOLD cell makes no copy of its own)
  against ``uv venv`` +
  ``uv pip install`` of the same requirements into a fresh venv by hand, with the same interpreter
  (median of a build before the sweep and one after). Target 1.2x.

The uv cache is **warm in both**: one scratch uv cache, warmed once (``uv venv --seed`` and an install of
the requirements), is the harness's (its fresh arena cache links ``uv`` to it, as ``environments.py``
does) and the floor's. The first instance's build also resolves the requirements (``uv pip compile``);
later instances' builds reuse that lock offline, as a sweep does. Notes break the gaps down: the cells'
phases (``phases``), the template's build steps from ``env.log``, and by hand ``--seed``, ``compileall``
and ``uv pip install --compile-bytecode`` for comparison.
Needs the network once (uv resolves ``pytest`` from PyPI).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchlib import Figure, git, parser, report, run_pytest, scratch, timed, write_suite

from pytest_swe_arena.cell.venvs import find_interpreter, find_uv

SUITE = Path(__file__).resolve().parents[1] / "instances"


#: The template build's commands as ``env.log`` names them (``$ ...``, then ``# took N.NNs``).
BUILD_STEPS = {"$ uv pip compile": "resolve (uv pip compile)", "$ uv venv": "uv venv",
               "$ uv pip sync": "install (uv pip sync)", "$ python -m compileall": "compileall (site-packages)"}


def build_steps(log: Path) -> dict[str, float]:
    """The seconds of each step of a template build, from the first cell's ``env.log``; {} if there is none."""
    steps: dict[str, float] = {}
    step = None
    for line in (log.read_text(errors="replace").splitlines() if log.is_file() else []):
        if line.startswith("$ "):
            step = next((name for prefix, name in BUILD_STEPS.items() if line.startswith(prefix)), None)
            if line.endswith("(the checkout)"):
                step = "compileall (the checkout)"
        elif line.startswith("# took ") and step is not None:
            steps[step] = steps.get(step, 0.0) + float(line.split()[2].rstrip("s"))
            step = None
        elif "built in " in line and line.startswith("# environment template"):
            steps["template built"] = float(line.rsplit("built in ", 1)[1].rstrip("s"))
    return steps


Ratio = tuple[float, str, float, float]  # (ratio, instance id, the harness's seconds, the floor's seconds)


def median_row(ratios: list[Ratio]) -> Ratio:
    """The row whose ratio is the median (the lower of the two middle ones for an even count)."""
    return sorted(ratios)[(len(ratios) - 1) // 2]


def phase_medians(phases: list[dict[str, float]], digits: int = 3) -> str:
    """Each phase's median seconds over the cells that have it, as ``name N.NNN s, ...``."""
    names = sorted({name for entry in phases for name in entry})
    return ", ".join(f"{name} {statistics.median(entry[name] for entry in phases if name in entry):.{digits}f} s"
                     for name in names)


def seconds_between(started: str, ended: str) -> float:
    return (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()


class Hand:
    """The floors: what a user does by hand with uv, git and the row's verify command."""

    def __init__(self, root: Path, uv_cache: Path, interpreter: Path, requirements: list[str]):
        self.root = root
        self.uv = find_uv() or "uv"
        self.interpreter = interpreter
        self.requirements = requirements
        self.env = {**os.environ, "UV_CACHE_DIR": str(uv_cache), "UV_PYTHON_DOWNLOADS": "never",
                    "UV_LINK_MODE": os.environ.get("UV_LINK_MODE", "hardlink")}
        self.count = 0

    def run(self, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
        completed = subprocess.run(argv, cwd=cwd, env=env or self.env, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise SystemExit(f"bench: {' '.join(argv)} exited {completed.returncode}:\n"
                             f"{completed.stdout[-2000:]}{completed.stderr[-2000:]}")

    def fresh(self, name: str) -> Path:
        self.count += 1
        return self.root / f"{name}-{self.count}"

    def install(self, venv: Path, *venv_options: str) -> None:
        self.run(self.uv, "venv", "--quiet", *venv_options, "--python", str(self.interpreter), str(venv))
        self.run(self.uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), *self.requirements)

    def build(self) -> tuple[float, Path]:
        """The floor of a first cell: ``uv venv`` + ``uv pip install`` into a fresh venv; (seconds, venv)."""
        venv = self.fresh("venv")
        return timed(lambda: self.install(venv)), venv

    def extras(self) -> tuple[float, float, float, float]:
        """What the harness's build adds, by hand: ``--seed`` over a plain venv, then ``compileall`` of the
        seeded venv's site-packages (as the template's) and of the plain one's (the requirements alone); and the
        floor's install with uv's own ``--compile-bytecode``."""
        plain, seeded = self.fresh("plain"), self.fresh("seeded")
        plain_seconds = timed(lambda: self.install(plain))
        seeded_seconds = timed(lambda: self.install(seeded, "--seed"))

        def compiled(venv: Path) -> float:
            sites = [str(path) for path in (venv / "lib").glob("python*/site-packages")]
            return timed(lambda: self.run(str(venv / "bin" / "python"), "-m", "compileall", "-q", "-j", "0", *sites))

        compiling = self.fresh("compiling")  # uv's own byte-compile, as part of the install

        def install_compiled() -> None:
            self.run(self.uv, "venv", "--quiet", "--python", str(self.interpreter), str(compiling))
            self.run(self.uv, "pip", "install", "--quiet", "--compile-bytecode", "--python",
                     str(compiling / "bin" / "python"), *self.requirements)

        return seeded_seconds - plain_seconds, compiled(seeded), compiled(plain), timed(install_compiled)

    def checkout(self, row: dict[str, Any], bundle: Path) -> Path:
        """A checkout of base with the gold patch and the test patch applied."""
        tree = self.fresh("checkout")
        self.run("git", "clone", "-q", str(bundle), str(tree))
        git(tree, "checkout", "-q", row["base_commit"])
        for patch in (row["patch"], row.get("test_patch") or ""):
            if patch.strip():
                git(tree, "apply", input=patch.encode())
        return tree

    def verify(self, row: dict[str, Any], tree: Path, venv: Path) -> float:
        """The floor of a warm cell: the row's verify command in the ready checkout with the ready venv."""
        env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
        clock = time.perf_counter()
        completed = subprocess.run(row["verify"], shell=True, cwd=tree, env=env, capture_output=True, check=False)
        seconds = time.perf_counter() - clock
        if completed.returncode != 0:
            raise SystemExit(f"bench: {row['verify']!r} by hand failed in {tree}:\n{completed.stdout[-2000:]!r}")
        return seconds


def main() -> None:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--instances", type=int, default=10, help="how many of the bundled rows (default: all 10)")
    options.add_argument("--trials", type=int, default=3, help="warm cells per instance, after its first (default 3)")
    options.add_argument("--floor-runs", type=int, default=5, help="verify runs by hand per row (median; default 5)")
    args = options.parse_args()
    # As Python does by default: the floor's ready venv has its bytecode.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    requirements = ["pytest"]
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    rows = [json.loads(line) for line in (SUITE / "suite.jsonl").read_text().splitlines() if line.strip()]
    rows = [{**row, "env": {"python": python, "requirements": requirements}} for row in rows[: args.instances]]
    interpreter, _ = find_interpreter(python)
    with scratch(args, "arena-bench-floors-") as root:
        uv_cache = root / "uv-cache"
        hand = Hand(root / "hand", uv_cache, interpreter, requirements)
        hand.root.mkdir()
        hand.install(hand.fresh("warm-up"), "--seed")  # the uv cache is warm for both from here on
        builds: dict[str, list[float]] = {row["instance_id"]: [] for row in rows}
        venvs: dict[str, Path] = {}
        for row in rows:
            seconds, venvs[row["instance_id"]] = hand.build()
            builds[row["instance_id"]].append(seconds)

        suite = write_suite(root / "suite", rows)
        shutil.copytree(SUITE / "repos", suite / "instances" / "repos")
        cache = root / "cache"
        cache.mkdir()
        (cache / "uv").symlink_to(uv_cache)
        sweep_seconds, completed = run_pytest(
            suite, f"--arena-repeat={1 + args.trials}", "--arena-grade-every-cell", f"--arena-cache={cache}",
            f"--arena-out={root / 'out'}")
        cells = [json.loads(line) for line in (root / "out" / "ledger.jsonl").read_text().splitlines() if line]
        unresolved = [f"{cell['instance_id']} #{cell['trial']}: {cell['status']}" for cell in cells
                      if cell["status"] != "resolved"]
        if unresolved or len(cells) != len(rows) * (1 + args.trials):
            raise SystemExit(f"bench: the sweep did not resolve every cell ({unresolved}):\n{completed.stdout[-4000:]}")
        firsts = {row["instance_id"]: min((cell for cell in cells if cell["instance_id"] == row["instance_id"]),
                                          key=lambda cell: cell["started_at"]) for row in rows}
        steps = [build_steps(root / "out" / "runs" / iid / "GOLD" / f"r{cell['trial']}" / "env.log")
                 for iid, cell in firsts.items()]

        for row in rows:
            builds[row["instance_id"]].append(hand.build()[0])
        seed_extra, compile_seeded, compile_plain, uv_compiled = hand.extras()
        verifies: dict[str, list[float]] = {row["instance_id"]: [] for row in rows}
        trees = {row["instance_id"]: hand.checkout(row, suite / "instances" / row["source"]["bundle"])
                 for row in rows}
        for row in rows:  # ready: the venv's and the checkout's bytecode written once, untimed
            hand.verify(row, trees[row["instance_id"]], venvs[row["instance_id"]])
        for _ in range(args.floor_runs):  # rounds over the rows, so load hits every row alike
            for row in rows:
                verifies[row["instance_id"]].append(hand.verify(row, trees[row["instance_id"]],
                                                                venvs[row["instance_id"]]))
        cold_trees = []  # the same, the checkout's bytecode removed first: as a fresh grading tree starts
        for row in rows:
            for cached in trees[row["instance_id"]].rglob("__pycache__"):
                shutil.rmtree(cached)
            cold_trees.append(hand.verify(row, trees[row["instance_id"]], venvs[row["instance_id"]]))

    warm_ratios, first_ratios, per_row, warm_phases, first_phases, tests = [], [], [], [], [], []
    for row in rows:
        iid = row["instance_id"]
        mine = sorted((cell for cell in cells if cell["instance_id"] == iid), key=lambda cell: cell["started_at"])
        first, warm = mine[0], mine[1:]
        warm_seconds = statistics.median(seconds_between(cell["started_at"], cell["ended_at"]) for cell in warm)
        floor_verify = statistics.median(verifies[iid])
        build = first["phases"].get("env", 0.0)
        floor_build = statistics.median(builds[iid])
        warm_ratios.append((warm_seconds / floor_verify, iid, warm_seconds, floor_verify))
        first_ratios.append((build / floor_build, iid, build, floor_build))
        per_row.append(f"{iid}: warm cell {warm_seconds:.3f} s / by hand {floor_verify:.3f} s = "
                       f"{warm_seconds / floor_verify:.2f}x; first build {build:.3f} s / uv by hand "
                       f"{floor_build:.3f} s = {build / floor_build:.2f}x")
        warm_phases += [cell["phases"] for cell in warm]
        tests += [cell["verify"]["seconds"] for cell in warm]
        first_phases.append(first["phases"])
    warm_median, first_median = median_row(warm_ratios), median_row(first_ratios)
    report("Time per row against its floor (bundled suite, GOLD, warm uv cache in both)", [
        Figure("warm GOLD cell, median row", warm_median[2], "s", "its verify by hand in a ready checkout and venv",
               warm_median[3], target="<= 1.1"),
        Figure("first cell's environment build, median row", first_median[2], "s",
               "uv venv + uv pip install by hand, fresh venv", first_median[3], target="<= 1.2"),
    ], args, notes=[
        f"median rows: warm {warm_median[1]} ({warm_median[0]:.2f}x), first {first_median[1]} "
        f"({first_median[0]:.2f}x); ratios over all rows: warm median "
        f"{statistics.median(r[0] for r in warm_ratios):.2f}x, first median "
        f"{statistics.median(r[0] for r in first_ratios):.2f}x",
        *per_row,
        f"warm cells' phases (median): {phase_medians(warm_phases)}",
        f"warm cells' tests as the harness timed them (verify.seconds, median): {statistics.median(tests):.3f} s; "
        f"the verify phase's rest is the fresh grading tree, its venv copy and the sandbox; by hand, the same "
        f"tests on the checkout with its bytecode removed (as a fresh tree starts): "
        f"{statistics.median(cold_trees):.3f} s (median row) against "
        f"{statistics.median(statistics.median(v) for v in verifies.values()):.3f} s with it",
        f"first cells' phases (median): {phase_medians(first_phases)}",
        f"first cells' template build, from env.log (median over the rows that ran the step): "
        f"{phase_medians([entry for entry in steps if entry]) or 'no env.log'}",
        f"by hand, for comparison: --seed {seed_extra:+.3f} s over uv venv + uv pip install, "
        f"compileall -j 0 of the seeded site-packages {compile_seeded:.3f} s (of the requirements alone, "
        f"unseeded: {compile_plain:.3f} s); uv venv + uv pip install --compile-bytecode (the floor with the "
        f"byte-compile the template does): {uv_compiled:.3f} s",
        f"{len(rows)} rows x {1 + args.trials} GOLD cells, no xdist, --arena-grade-every-cell, default sandbox; "
        f"sweep {sweep_seconds:.1f} s; uv cache warm in both; Python {python} ({interpreter})",
    ])


if __name__ == "__main__":
    main()
