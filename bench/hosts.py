"""Hosts: cells of an arm that sleeps, on H hosts x W workers over ssh (--tx ssh=), vs the ideal.

    sudo python bench/hosts.py                                   # 64 cells x 10 s on 1x16, 2x8, 4x4
    sudo python bench/hosts.py --cells 16 --seconds 5 --shapes 1x4,2x2,4x1   # a smaller machine

The hosts are tests/helpers/hosts.py's: each an sshd in its own network, mount, pid and UTS
namespaces on this machine (root needed), seeing the project and this Python read-only and a
private copy of the bench suite (its own cache inside it). Every shape has the same number of
workers, so the ideal is the same: cells x seconds / workers. What grows with the hosts is the
controller's work: one ssh connection and execnet gateway per worker, each host's cold cache.

Figures per shape: the wall time of the sweep against the ideal (and the same sweep on local
workers, ``-n W``, no ssh, as a reference), and the controller's CPU per cell (the pytest process
and its ssh clients, from their rusage) against the first shape's. On this 2-CPU machine shared
with other work, every worker runs on the same two CPUs: the wall times say what the harness and
ssh add, not what real hosts would give.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import benchlib
from benchlib import Figure

sys.path.insert(0, str(benchlib.BENCH_DIR.parent / "tests"))
from helpers.hosts import HostLab, Share, host_support_problem, python_shares  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(suite: Path, *args: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds of the controller (with its direct children) of one sweep."""
    before = children_cpu()
    seconds, completed = benchlib.run_pytest(suite, *args)
    if " failed" not in completed.stdout:  # the sleep arm changes nothing: unresolved
        raise SystemExit(f"bench: the sweep did not run its cells:\n{completed.stdout[-3000:]}")
    return seconds, children_cpu() - before


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--shapes", default="1x16,2x8,4x4", help="HOSTSxWORKERS, comma-separated")
    args = parser.parse_args()
    problem = host_support_problem()
    if problem:
        raise SystemExit(f"bench: {problem}")
    shapes = [tuple(int(part) for part in shape.split("x")) for shape in args.shapes.split(",")]
    workers = {hosts * per_host for hosts, per_host in shapes}
    if len(workers) != 1:
        raise SystemExit(f"bench: every shape needs the same number of workers (got {sorted(workers)})")
    total_workers = workers.pop()

    arms_toml = f"[tool.swe_arena.arms.SLEEP]\nkind = \"sleep\"\nseconds = {args.seconds}\n"
    with benchlib.scratch(args, "bench-hosts-") as root:
        repo, base, patch = benchlib.small_repo(root)
        rows = benchlib.instance_rows(args.cells, repo, base, patch)
        suite = benchlib.write_suite(root / "suite", rows, arms_toml, arms="SLEEP")
        ideal = args.cells * args.seconds / total_workers
        figures: list[Figure] = []
        lab = HostLab(root / "lab", [Share(benchlib.BENCH_DIR.parent), *python_shares(sys.executable)])
        first: tuple[str, float] | None = None
        try:
            for count, per_host in shapes:
                hosts = lab.start(count, copies=[root])  # each host: the suite and a cache of its own
                try:
                    options = ["--dist", "load"]
                    for host in hosts:
                        options += ["--tx", lab.tx(host, sys.executable, suite, per_host)]
                    seconds, cpu = measured(suite, *options, f"--arena-out={root / f'out-{count}x{per_host}'}")
                finally:
                    for host in hosts:
                        lab.stop(host)
                figures.append(Figure(f"{count} host(s) x {per_host} workers", seconds, "s",
                                      "ideal (cells x seconds / workers)", ideal))
                per_cell = cpu / args.cells * 1000
                first = first or (f"{count}x{per_host}", per_cell)
                figures.append(Figure(f"controller CPU per cell, {count}x{per_host}", per_cell, "ms",
                                      f"the same on {first[0]}", first[1]))
        finally:
            lab.close()
        # Last: every host copied the suite before any sweep filled its cache, so each starts cold.
        local_seconds, local_cpu = measured(suite, "-n", str(total_workers), f"--arena-out={root / 'local-out'}")
        figures.append(Figure(f"{args.cells} cells x {args.seconds:g} s, -n {total_workers} (local, no ssh)",
                              local_seconds, "s", "ideal (cells x seconds / workers)", ideal))
        notes = [f"local controller CPU: {local_cpu / args.cells * 1000:.0f} ms per cell (pytest and its workers)",
                 "remote controller CPU counts the pytest controller and its ssh clients, not the workers"]
        benchlib.report("hosts", figures, args, notes)


if __name__ == "__main__":
    main()
