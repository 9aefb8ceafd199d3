"""Ctrl-C in the middle of agents: how long until the sweep has stopped, against plain pytest-xdist.

    python bench/interrupt.py                  # -n 2, agents that would run 60 s, grace 2 s
    python bench/interrupt.py --workers 2 --grace 0.5   # smoke size

Each cell's agent is a real process tree (a ``command`` arm: ``sh`` with a
backgrounded ``sleep`` and a foreground one) under the harness's process
control. Once every worker has a cell running (the controller's ``arena.lock``
says so), the controller gets one SIGINT, as from Ctrl-C in its terminal; the
figure is the time from that signal to the sweep's exit. The baseline is the
same SIGINT sent to plain pytest-xdist whose tests sleep in-process. The target
(DESIGN section 7) is the arm's grace + 5 s; the notes say whether the ledger
parses, the lock is gone and any of the agents' processes survived.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import benchlib
from benchlib import Figure

AGENT_SECONDS = 60


def interrupt_after(command: list[str], cwd: Path, started: object, timeout: float = 120) -> float:
    """Start ``command``; once ``started()`` is true send SIGINT; return the seconds from SIGINT to exit."""
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while not started():  # type: ignore[operator]
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"bench: {' '.join(command)} ended or stalled before its cells started")
        time.sleep(0.05)
    time.sleep(0.5)  # the agents are past their start-up
    clock = time.perf_counter()
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise SystemExit(f"bench: {' '.join(command)} did not stop within {timeout} s of SIGINT") from None
    return time.perf_counter() - clock


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def main() -> None:
    parser = benchlib.parser(__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--grace", type=float, default=2.0)
    args = parser.parse_args()

    # The marker is an argument of the agents' sleeps, so survivors can be found in /proc.
    marker = f"{AGENT_SECONDS}.{uuid.uuid4().int % 10**9:09d}"
    arms_toml = ("[tool.swe_arena.arms.AGENT]\nkind = \"command\"\n"
                 f"command = [\"sh\", \"-c\", \"sleep {marker} & sleep {marker}\"]\n"
                 f"grace = {args.grace}\ntimeout = {AGENT_SECONDS * 2}\n")
    with benchlib.scratch(args, "bench-interrupt-") as root:
        repo, base, patch = benchlib.small_repo(root)
        rows = benchlib.instance_rows(args.workers * 2, repo, base, patch)
        suite = benchlib.write_suite(root / "suite", rows, arms_toml, arms="AGENT")
        out = root / "out"
        benchlib.run_pytest(suite, "-p", "no:xdist", f"--arena-out={root / 'warm'}", "--arena-arms=GOLD",
                            "-k", rows[0]["instance_id"])

        def agents_running() -> bool:
            try:
                progress = json.loads((out / "arena.lock").read_text())["progress"]
            except (OSError, ValueError, KeyError):
                return False
            return (progress.get("running") or 0) >= args.workers and len(processes_with(marker)) >= args.workers

        arena = interrupt_after([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 "-n", str(args.workers), f"--arena-out={out}"], suite, agents_running)
        survivors = processes_with(marker)
        lines = (out / "ledger.jsonl").read_text().splitlines() if (out / "ledger.jsonl").exists() else []
        parsed = sum(1 for line in lines if json.loads(line))
        statuses = sorted({json.loads(line)["status"] for line in lines})

        plain = root / "plain"
        plain.mkdir()
        flags = plain / "started"
        flags.mkdir()
        (plain / "test_sleep.py").write_text(
            "import os, time\n\nimport pytest\n\n\n"
            f"@pytest.mark.parametrize('number', range({args.workers * 2}))\n"
            "def test_sleep(number):\n"
            f"    open(os.path.join({str(flags)!r}, str(number)), 'w').close()\n"
            f"    time.sleep({AGENT_SECONDS})\n"
        )
        baseline = interrupt_after([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                    "-n", str(args.workers)], plain,
                                   lambda: len(list(flags.iterdir())) >= args.workers)
        figures = [
            Figure(f"stop after SIGINT, -n {args.workers}, agents running", arena, "s",
                   "plain pytest-xdist, tests sleeping", baseline, f"< {args.grace + 5:g} s"),
        ]
        notes = [
            f"agents: a shell and two sleeps each, grace {args.grace:g} s; target = grace + 5 s",
            f"after the stop: {parsed} ledger line(s), all parsed, statuses {statuses}; "
            f"arena.lock {'left behind' if (out / 'arena.lock').exists() else 'gone'}; "
            f"{len(survivors)} agent process(es) left",
        ]
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
        benchlib.report("interrupt", figures, args, notes)


if __name__ == "__main__":
    main()
