"""Workspace materialization vs a bare ``git checkout`` (the floor) and a fresh ``git clone`` per cell.

    python bench/workspace.py                 # 2,000 files, 200 commits, 15 cells
    python bench/workspace.py --files 50 --commits 5 --cells 2   # smoke size

The repository is generated; the base commit is 50 commits before the head,
so the history after ``base_commit`` exists, as in a SWE-bench task. Each
measured way runs once per cell, interleaved (cell 1 of every way, then cell
2, ...), so a noisy neighbour slows all of them alike; the best of the cells
is reported (as ``timeit`` does: the minimum is the cost without interference).

- ``materialize``: ``workspace.materialize`` from a warm ``RepoStore`` (the
  mirror is fetched once per repository per sweep: its cost is shown apart),
  for every cell but the first of a base commit; ``materialize (first cell of
  a base)`` also builds the base's snapshot (the objects reachable from it),
  which every other arm and trial of that base then borrows.
- floor: ``git checkout`` of the same commit in a local clone that has no
  work tree yet (the clone itself is made before the clock starts).
- clone: ``git clone --no-local`` of the source then ``git checkout``: what a
  harness that clones per cell pays, from a local source (a remote is slower).

Other ways to give a cell a private checkout are timed too (``--strategies``),
to show why the store uses alternates.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import benchlib
from benchlib import Figure, git

from pytest_swe_arena.cell.workspace import RepoStore, materialize
from pytest_swe_arena.instances.loading import build_instance


def disk_mib(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 2**20


def count_files(tree: Path) -> int:
    return sum(1 for path in tree.rglob("*.py") if ".git" not in path.parts)


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--cells", type=int, default=15)
    parser.add_argument("--strategies", action="store_true", help="also time the other ways to check out a cell")
    args = parser.parse_args()

    with benchlib.scratch(args, "bench-workspace-") as root:
        source, head = benchlib.make_repo(root, args.files, args.commits)
        back = min(50, args.commits - 1)
        base = git(source, "rev-parse", f"HEAD~{back}").strip()
        row = {"instance_id": "bench__generated-1", "repo": "bench/generated", "base_commit": base,
               "problem_statement": "-", "source": {"git": str(source)}, "verify": "true"}
        instance = build_instance(root / "bench.jsonl", 1, row, None)
        store = RepoStore(root / "cache")
        mirror_seconds = benchlib.timed(lambda: store.ensure_commit(instance.source, instance.repo, base))
        mirror = store.mirror_path(instance.source, instance.repo)
        cells = root / "cells"

        def arena(dest: Path) -> float:
            return benchlib.timed(lambda: materialize(instance, store, dest))

        def arena_first(dest: Path) -> float:
            shutil.rmtree(root / "cache" / "snapshots", ignore_errors=True)
            fresh = RepoStore(root / "cache")  # a new session: nothing resolved or snapshotted yet
            return benchlib.timed(lambda: materialize(instance, fresh, dest))

        def floor(dest: Path) -> float:
            git(root, "clone", "-q", "--no-checkout", "--local", str(source), str(dest))
            return benchlib.timed(lambda: git(dest, "checkout", "-q", "-f", "--detach", base))

        clone_transfers: list[float] = []

        def clone(dest: Path) -> float:
            transfer = benchlib.timed(
                lambda: git(root, "clone", "-q", "--no-checkout", "--no-local", str(source), str(dest)))
            clone_transfers.append(transfer)
            return transfer + benchlib.timed(lambda: git(dest, "checkout", "-q", "-f", "--detach", base))

        def worktree(dest: Path) -> float:
            return benchlib.timed(lambda: git(mirror, "worktree", "add", "-q", "--detach", str(dest), base))

        def shared_clone(dest: Path) -> float:
            def run() -> None:
                git(root, "clone", "-q", "--no-checkout", "--shared", str(mirror), str(dest))
                git(dest, "checkout", "-q", "-f", "--detach", base)
            return benchlib.timed(run)

        template = root / "template"
        materialize(instance, store, template)

        def copy_template(dest: Path) -> float:
            return benchlib.timed(lambda: shutil.copytree(template, dest, symlinks=True))

        ways: dict[str, Callable[[Path], float]] = {"materialize": arena, "first": arena_first, "floor": floor,
                                                    "clone": clone}
        if args.strategies:
            ways.update({"git worktree add (mirror)": worktree, "git clone --shared + checkout": shared_clone,
                         "copy a checked-out template": copy_template})
        samples: dict[str, list[float]] = {name: [] for name in ways}
        for cell in range(args.cells):
            for index, (name, way) in enumerate(ways.items()):
                dest = cells / f"{cell}-{index}"
                samples[name].append(way(dest))
                if count_files(dest) != args.files:
                    raise SystemExit(f"bench: {name} checked out {count_files(dest)} files, expected {args.files}")
                shutil.rmtree(dest)
            git(mirror, "worktree", "prune")

        best = {name: min(values) for name, values in samples.items()}
        figures = [
            Figure("materialize (per cell)", best["materialize"], "s", "git checkout (floor)", best["floor"],
                   "<= 1.5"),
            Figure("materialize (first cell of a base)", best["first"], "s", "git checkout (floor)", best["floor"]),
            Figure("git clone per cell", best["clone"], "s", "materialize", best["materialize"], ">= 5"),
        ]
        figures += [Figure(name, best[name], "s", "git checkout (floor)", best["floor"])
                    for name in ways if name not in ("materialize", "first", "floor", "clone")]
        notes = [
            f"{args.files} files, {args.commits} commits, base = HEAD~{back}, best of {args.cells} cells",
            f"the mirror is fetched once per repository per sweep: {mirror_seconds:.3f} s (not per cell)",
            f"a base's snapshot is built once per cache: mirror {disk_mib(mirror):.1f} MiB, "
            f"snapshot {disk_mib(root / 'cache' / 'snapshots'):.1f} MiB on disk",
            f"a clone is its transfer (best {min(clone_transfers):.3f} s) plus the same checkout as the floor: "
            "the larger the history next to the tree, the larger the clone's ratio",
        ]
        benchlib.report("workspace materialization", figures, args, notes)


if __name__ == "__main__":
    main()
