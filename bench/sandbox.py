"""What trustworthy cells cost: the sandbox per process, a fresh grading tree, extraction with the harness's git.

    python bench/sandbox.py                         # 2,000-file repo, 20 runs a round, 3 rounds
    python bench/sandbox.py --files 40 --runs 2 --rounds 1   # smoke size

Three pairs, each measured in the same round, interleaved, medians of the rounds' means:

- ``sandbox cost per cell``: ``true`` run through ``proc.run`` inside a fresh ``cell_policy``
  sandbox (the policy built, the identity files written, bwrap's namespaces and mounts made and
  torn down) minus the same ``true`` unsandboxed: what a cell pays once for its agent. Target:
  under 50 ms, or 5% of the cell, whichever is larger (an agent cell takes minutes, so 50 ms is
  the bound that matters). An agent-like process (``python -c``) is timed both ways too.
- ``fresh grading tree``: a checkout of base from the snapshot into a new directory, the gold
  patch applied, ``verify = "true"`` run in the sandbox, the tree removed, against today's in-place
  verify (``run_verify`` with ``verify_on="patch"``: reset the workspace, clean, apply, run).
- ``extraction``: the harness's git over the workspace (a cold index: every file read; and an index
  seeded before the arm: only changed files read) against today's ``extract_patch`` in the
  workspace's own ``.git``.
"""

from __future__ import annotations

import shutil
import statistics
import sys
from collections.abc import Callable

import benchlib
from benchlib import Figure, git

from pytest_swe_arena.cell import processes as proc
from pytest_swe_arena.cell.environment import create_cell_environment
from pytest_swe_arena.cell.patches import HarnessGit, apply_patch, extract, extract_patch
from pytest_swe_arena.cell.sandbox import Sandbox, cell_policy, probe_bwrap
from pytest_swe_arena.cell.workspace import RepoStore, materialize, reset_to_base
from pytest_swe_arena.grading.tree import build_grading_tree, grade_tree
from pytest_swe_arena.grading.verify import run_verify
from pytest_swe_arena.instances.loading import build_instance


def interleaved(rounds: int, runs: int, ways: dict[str, Callable[[int], None]]) -> dict[str, float]:
    """Seconds per run of each way: the median over rounds of each round's mean, ways alternating run by run."""
    per_round: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        totals = dict.fromkeys(ways, 0.0)
        for run in range(runs):
            for name, action in ways.items():
                totals[name] += benchlib.timed(lambda action=action, run=run: action(run))
        for name in ways:
            per_round[name].append(totals[name] / runs)
    return {name: statistics.median(samples) for name, samples in per_round.items()}


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--runs", type=int, default=20, help="runs of each way per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    probe = probe_bwrap()
    if not probe.works:
        raise SystemExit(f"bench: bwrap does not work here: {probe.problem}")

    with benchlib.scratch(args, "bench-sandbox-") as root:
        source, head = benchlib.make_repo(root, args.files, args.commits)
        base = git(source, "rev-parse", "HEAD~1").strip() if args.commits > 1 else head
        changed = git(source, "diff", "--name-only", base, head).split()[:2]  # a SWE-bench fix touches a few files
        patch = git(source, "diff", base, head, "--", *changed).encode()
        row = {"instance_id": "bench__generated-1", "repo": "bench/generated", "base_commit": base,
               "problem_statement": "-", "source": {"git": str(source)}, "verify": "true"}
        instance = build_instance(root / "bench.jsonl", 1, row, None)
        store = RepoStore(root / "cache")
        cell = create_cell_environment(root / "cell")
        workspace = materialize(instance, store, cell.root / "workspace")
        objects = store.snapshot(*store.ensure_commit(instance.source, instance.repo, base))

        # -- the sandbox around one process -------------------------------------------------
        true = [shutil.which("true") or "/bin/true"]
        agent = [sys.executable, "-c", "import json, os, subprocess"]

        def run_plain(argv: list[str]) -> None:
            proc.run(argv, cwd=workspace.path, env=cell.env(), stdout=cell.run_dir / "plain.log")

        def run_sandboxed(argv: list[str]) -> None:
            # What a cell pays: its policy built (identity files written, program mounts found), bwrap run.
            sandbox = Sandbox(cell_policy(cell, read_only=(objects,), programs=[sys.executable]))
            proc.run(sandbox.wrap(argv, workspace.path), cwd=workspace.path, env=cell.env(),
                     stdout=cell.run_dir / "sandboxed.log")

        process = interleaved(args.rounds, args.runs, {
            "true": lambda run: run_plain(true), "true sandboxed": lambda run: run_sandboxed(true),
            "python": lambda run: run_plain(agent), "python sandboxed": lambda run: run_sandboxed(agent)})

        # -- grading: in place vs a fresh tree ----------------------------------------------
        def in_place(run: int) -> None:
            verdict = run_verify(workspace, instance, patch, verify_on="patch", env=cell.env(),
                                 log=cell.run_dir / "verify.log", timeout=120)
            assert verdict.passed

        def fresh(run: int) -> None:
            grading_root = root / f"grading-{run}"
            tree = build_grading_tree(grading_root / "tree", objects=objects, base_commit=base, patch=patch,
                                      instance=instance)
            grading_cell = create_cell_environment(grading_root / "cell")
            sandbox = Sandbox(cell_policy(grading_cell, read_write=(tree.path,), read_only=(objects,)))
            assert grade_tree(tree, instance, cell=grading_cell, timeout=120, sandbox=sandbox).passed
            shutil.rmtree(grading_root)

        grading = interleaved(args.rounds, max(1, args.runs // 4), {"in_place": in_place, "fresh": fresh})

        # -- extraction ---------------------------------------------------------------------
        seeded = root / "harness" / "seeded.git"
        HarnessGit.create(seeded, workspace.path, objects).seed_index(base)

        def agent_work() -> None:
            reset_to_base(workspace)
            apply_patch(workspace, patch, "the agent's change")

        def today(run: int) -> None:
            assert extract_patch(workspace)

        def cold(run: int) -> None:
            git_dir = root / "harness" / f"cold-{run}.git"
            assert extract(workspace.path, base, objects, git_dir).patch
            shutil.rmtree(git_dir)

        def warm(run: int) -> None:
            assert extract(workspace.path, base, objects, seeded).patch

        agent_work()
        extraction = interleaved(args.rounds, max(1, args.runs // 4), {"today": today, "cold": cold, "warm": warm})

        figures = [
            Figure("sandbox cost per cell", process["true sandboxed"] - process["true"], "s",
                   "`true` unsandboxed", process["true"], "< 0.050 s"),
            Figure("sandboxed python start-up", process["python sandboxed"], "s", "the same, unsandboxed",
                   process["python"]),
            Figure("fresh grading tree, sandboxed verify", grading["fresh"], "s", "in-place verify (today)",
                   grading["in_place"]),
            Figure("extraction, harness git, cold index", extraction["cold"], "s",
                   "extract_patch in the workspace's .git (today)", extraction["today"]),
            Figure("extraction, harness git, seeded index", extraction["warm"], "s",
                   "extract_patch in the workspace's .git (today)", extraction["today"]),
        ]
        notes = [f"{args.files} files, {args.commits} commits; {args.runs} sandbox runs and "
                 f"{max(1, args.runs // 4)} grading/extraction runs a round, median of {args.rounds} rounds; "
                 f"{probe.version}",
                 f"gold patch: {len(patch):,} bytes over {patch.count(b'diff --git')} files"]
        benchlib.report("sandbox and fresh grading", figures, args, notes)


if __name__ == "__main__":
    main()
