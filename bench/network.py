"""What sealing a cell's network costs: the agent's sandbox sealed (issue 30) against today's shared network.

    python bench/network.py                   # 20 runs a round, 3 rounds
    python bench/network.py --runs 2 --rounds 1   # smoke size

Both ways run an agent-like process (``python`` that makes one HTTP call to a local model endpoint) through
``proc.run`` in a fresh ``CellSandbox``, interleaved run by run; the sealed way also opens the cell's gate
(its Unix sockets, the report and proxy threads), runs ``netgate.py`` first (its listeners, the packet
socket, the route, the capabilities dropped) and closes the gate after. ``sealed sandbox cost per cell`` is
the difference: what a sealed cell pays once for its agent, in wall time and in CPU (its processes' and the
gate's; steadier on a busy machine, where wall time is mostly waiting for a CPU). Target (DESIGN section 9):
under 50 ms. Most of it is one more interpreter start (the netgate's ``python -I -S``) and ``ip``.
"""

from __future__ import annotations

import http.server
import statistics
import sys
import threading
from collections.abc import Callable

import benchlib
from benchlib import Figure

from pytest_swe_arena.cell import processes as proc
from pytest_swe_arena.cell.environment import create_cell_environment
from pytest_swe_arena.cell.network import cell_network, open_gate
from pytest_swe_arena.cell.sandbox import CellSandbox, probe_bwrap


class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def interleaved(rounds: int, runs: int, ways: dict[str, Callable[[], None]]) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds per run of each way, CPU with the sandbox's processes: the median over rounds of each
    round's mean, ways alternating run by run."""
    per_round: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(rounds):
        totals = {name: [0.0, 0.0] for name in ways}
        for _ in range(runs):
            for name, action in ways.items():
                wall, cpu = benchlib.timed_both(action)
                totals[name][0] += wall
                totals[name][1] += cpu
        for name in ways:
            per_round[name].append((totals[name][0] / runs, totals[name][1] / runs))
    return {name: (statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples))
            for name, samples in per_round.items()}


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each way per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    probe = probe_bwrap()
    if not probe.works:
        raise SystemExit(f"bench: bwrap does not work here: {probe.problem}")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    agent = [sys.executable, "-c", f"import urllib.request; assert urllib.request.urlopen({url!r}).read() == b'ok'"]
    with benchlib.scratch(args, "bench-network-") as root:
        cell = create_cell_environment(root / "cell")

        def shared() -> None:
            argv = CellSandbox(cell).wrap(agent, cell.root, cell.env())
            assert proc.run(argv, cwd=cell.root, env=cell.env(), stdout=cell.run_dir / "shared.log").returncode == 0

        def sealed() -> None:
            with open_gate(cell_network([url])) as gate:
                argv = CellSandbox(cell, gate=gate).wrap(agent, cell.root, cell.env())
                result = proc.run(argv, cwd=cell.root, env=cell.env(), stdout=cell.run_dir / "sealed.log")
            assert result.returncode == 0 and gate is not None and not gate.refusals()

        seconds = interleaved(args.rounds, args.runs, {"shared": shared, "sealed": sealed})
    server.shutdown()
    (sealed_wall, sealed_cpu), (shared_wall, shared_cpu) = seconds["sealed"], seconds["shared"]
    figures = [
        Figure("sealed sandbox cost per cell", sealed_wall - shared_wall, "s",
               "the agent in today's sandbox (shared network)", shared_wall, "< 0.050 s"),
        Figure("sealed sandbox CPU per cell", sealed_cpu - shared_cpu, "s",
               "CPU of the agent in today's sandbox", shared_cpu, "< 0.050 s"),
        Figure("agent in a sealed sandbox, one model call", sealed_wall, "s",
               "the agent in today's sandbox (shared network)", shared_wall),
    ]
    notes = [f"{args.runs} runs of each way a round, interleaved, median of {args.rounds} rounds; {probe.version}"]
    benchlib.report("sealed network per cell", figures, args, notes)


if __name__ == "__main__":
    main()
