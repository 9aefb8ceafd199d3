"""What a cell's limits cost: a sandboxed ``true`` inside a cell's limits against the same sandboxed ``true``.

    python bench/limits.py                          # 2,000-file workspace, 20 runs a round, 3 rounds
    python bench/limits.py --files 40 --runs 2 --rounds 1   # smoke size

One pair, measured in the same round, interleaved, medians of the rounds' means. ``limited`` is everything a cell
pays for its limits once: the groups made and their limits written (cgroup v1 or v2 where the machine offers
it; rlimits otherwise), the join shell before the sandbox, the groups emptied and removed; and, with a disk
limit, the disk watch's first and last look over the cell's trees (a workspace of ``--files`` files), which grows
with the tree. Target: under 50 ms more per cell
(``DESIGN.md`` section 9, the sealed sandbox's budget).
"""

from __future__ import annotations

import shutil
import statistics
import sys
from collections.abc import Callable

import benchlib
from benchlib import Figure

from pytest_swe_arena.cell import processes as proc
from pytest_swe_arena.cell.environment import create_cell_environment
from pytest_swe_arena.cell.limits import CellLimits, LimitGroup, probe_mechanism
from pytest_swe_arena.cell.sandbox import Sandbox, cell_policy, probe_bwrap


def interleaved(rounds: int, runs: int, ways: dict[str, Callable[[], None]]) -> dict[str, float]:
    per_round: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        totals = dict.fromkeys(ways, 0.0)
        for _ in range(runs):
            for name, action in ways.items():
                totals[name] += benchlib.timed(action)
        for name in ways:
            per_round[name].append(totals[name] / runs)
    return {name: statistics.median(samples) for name, samples in per_round.items()}


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=20, help="runs of each way per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    probe = probe_bwrap()
    if not probe.works:
        raise SystemExit(f"bench: bwrap does not work here: {probe.problem}")
    mechanism = probe_mechanism()
    limits = CellLimits(memory=4 << 30, pids=512, disk=10 << 30)
    with benchlib.scratch(args, "bench-limits-") as root:
        source, _ = benchlib.make_repo(root, args.files, 2)
        cell = create_cell_environment(root / "cell")
        workspace = cell.root / "workspace"
        shutil.copytree(source, workspace)
        true = [shutil.which("true") or "/bin/true"]

        def sandboxed() -> None:
            sandbox = Sandbox(cell_policy(cell))
            proc.run(sandbox.wrap(true, workspace), cwd=workspace, env=cell.env(), stdout=cell.run_dir / "a.log")

        def limited(limits: CellLimits) -> None:
            group = LimitGroup.create(limits, mechanism, (cell.root,))
            sandbox = Sandbox(cell_policy(cell), limits=group)
            proc.run(sandbox.wrap(true, workspace), cwd=workspace, env=cell.env(), stdout=cell.run_dir / "b.log")
            assert group.close() is None

        seconds = interleaved(args.rounds, args.runs, {
            "sandboxed": sandboxed, "memory+pids": lambda: limited(CellLimits(memory=4 << 30, pids=512)),
            "memory+pids+disk": lambda: limited(limits)})
    alone = seconds["sandboxed"]
    benchlib.report("cell limits", [
        Figure("memory + pids: cost per cell", seconds["memory+pids"] - alone, "s", "sandbox alone", alone,
               target="< 0.050 s"),
        Figure("memory + pids + disk: cost per cell", seconds["memory+pids+disk"] - alone, "s", "sandbox alone", alone,
               target="< 0.050 s"),
    ], args, notes=[f"mechanism: {mechanism}; workspace of {args.files} files; {args.runs} runs x {args.rounds} "
                    f"rounds; python {sys.version.split()[0]}"])


if __name__ == "__main__":
    main()
