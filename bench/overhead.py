"""Harness overhead per cell: a GOLD sweep with a trivial verify, minus its workspace and verify steps done by hand.

    python bench/overhead.py                  # 50 cells, 3 rounds
    python bench/overhead.py --cells 3 --rounds 1   # smoke size

The sweep is a real ``pytest`` process (no xdist) over ``--cells`` instances
of a tiny repository, GOLD arm, ``verify = "true"``. By hand, the same cells
are materialized from the same (warm) store and verified with
``verify.run_verify`` in this process. What is left, divided by the cells, is
the harness: pytest start-up and collection, the cell environment, the GOLD
arm's ``git apply``, patch extraction, the fresh grading tree (checkout, patch,
checks) where the hand verifies in place, the report, the ledger row and files.
Rounds alternate sweep and hand so load on the machine hits both alike.

The sweep runs with ``--arena-sandbox=none``: the design counts the sandbox
apart ("under 50 ms more"), and ``bench/sandbox.py`` measures it. A one-cell
sweep first warms the mirror, the snapshot and the bytecode caches, which are
written as Python does by default (``PYTHONDONTWRITEBYTECODE`` is unset).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics

import benchlib
from benchlib import Figure

from pytest_swe_arena.cell.environment import create_cell_environment
from pytest_swe_arena.cell.workspace import RepoStore, materialize
from pytest_swe_arena.grading.verify import run_verify
from pytest_swe_arena.instances.loading import build_instance


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    with benchlib.scratch(args, "bench-overhead-") as root:
        repo, base, patch = benchlib.small_repo(root)
        rows = benchlib.instance_rows(args.cells, repo, base, patch)
        suite = benchlib.write_suite(root / "suite", rows)
        instances = [build_instance(suite / "instances/bench.jsonl", n + 1, row, None) for n, row in enumerate(rows)]
        store = RepoStore(suite / "cache")

        def by_hand() -> None:
            for instance in instances:
                cell = create_cell_environment(root / "hand" / instance.instance_id)
                workspace = materialize(instance, store, cell.root / "workspace")
                verdict = run_verify(workspace, instance, patch, verify_on="patch", env=cell.env(),
                                     log=cell.run_dir / "verify.log", timeout=60)
                if not verdict.passed:
                    raise SystemExit(f"bench: verify by hand failed for {instance.instance_id}")
                shutil.rmtree(cell.root)

        # Python's default, whatever this shell says; then the warm-up (see the module's docstring).
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        benchlib.run_pytest(suite, "-p", "no:xdist", "--arena-sandbox=none", f"--arena-out={root / 'warm'}",
                            "-k", rows[0]["instance_id"])
        sweeps, hands, sweep_cpus, hand_cpus, phases = [], [], [], [], []
        for round_number in range(args.rounds):
            out = root / f"out-{round_number}"
            cpu = benchlib.cpu_seconds()
            seconds, completed = benchlib.run_pytest(suite, "-p", "no:xdist", "--arena-sandbox=none",
                                                     f"--arena-out={out}")
            sweep_cpus.append(benchlib.cpu_seconds() - cpu)
            if f"{args.cells} passed" not in completed.stdout:
                raise SystemExit(f"bench: the sweep did not pass {args.cells} cells:\n{completed.stdout[-3000:]}")
            sweeps.append(seconds)
            wall, cpu = benchlib.timed_both(by_hand)
            hands.append(wall)
            hand_cpus.append(cpu)
            ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
            phases.append({name: sum(row["phases"].get(name, 0.0) for row in ledger) / len(ledger)
                           for name in ("workspace", "arm", "patch", "verify")})

        sweep, hand = statistics.median(sweeps), statistics.median(hands)
        sweep_cpu, hand_cpu = statistics.median(sweep_cpus), statistics.median(hand_cpus)
        overhead = (sweep - hand) / args.cells
        phase_means = {name: statistics.median(p[name] for p in phases) for name in phases[0]}
        figures = [
            Figure("harness overhead per cell", overhead, "s", "workspace + verify by hand, per cell",
                   hand / args.cells, "< 0.050 s"),
            Figure("sweep per cell", sweep / args.cells, "s", "workspace + verify by hand, per cell",
                   hand / args.cells),
            # CPU seconds (the processes' own and their children's) hardly move with the machine's load.
            Figure("harness overhead per cell, CPU", (sweep_cpu - hand_cpu) / args.cells, "s",
                   "workspace + verify by hand, CPU per cell", hand_cpu / args.cells),
        ]
        notes = [
            f"{args.cells} GOLD cells, verify = true, no xdist, no sandbox; median of {args.rounds} rounds "
            f"(sweep {sweep:.2f} s, by hand {hand:.2f} s)",
            "phases inside the sweep, mean per cell: "
            + ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in phase_means.items()),
        ]
        benchlib.report("harness overhead", figures, args, notes)


if __name__ == "__main__":
    main()
