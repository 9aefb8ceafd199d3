"""The fault matrix: one real sweep (3 instances x GOLD, AGENT; ``-n 2``) through each fault.

The AGENT arm runs the stubborn agent of ``faults.py`` (a real process tree
that ignores SIGTERM), so cells are in flight when the fault hits. For every
fault the matrix checks the same things: every cell finished before the fault
is in the ledger exactly once, no line is torn, no agent process is left, the
lock is released (or stale: its owner is gone), and ``--arena-resume`` then
runs exactly the cells without a final row.

Each test also prints its figures (rows kept / rows finished before the fault,
agent processes left when the controller ended, seconds to stop) and, with
``FAULT_MATRIX_FIGURES=FILE``, appends them to FILE as JSON lines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.faults import SECOND_CTRL_C_PAUSE, FaultSweep, cell, fill, ledger_rows, small_disk, wait_for
from helpers.figures import record_figures

ARMS = "--arena-arms=GOLD,AGENT"
WORKERS = 2
CELLS = {(f"demo__calc-{n}", arm) for n in (1, 2, 3) for arm in ("GOLD", "AGENT")}
NOT_FINAL = {"harness_error", "interrupted"}
GRACE = 3  # the agents' grace: they ignore SIGTERM, so a stop waits for it unless hurried


def rows_so_far(out: Path) -> list[dict[str, Any]]:
    """The ledger's rows while the sweep writes it (a line being written is skipped)."""
    rows = []
    for line in (out / "ledger.jsonl").read_text().splitlines() if (out / "ledger.jsonl").exists() else []:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def a_worker_of(controller: int) -> int:
    """One xdist worker of the sweep: a fork of the controller's zygote (``--arena-worker-start=fork``,
    where the controller's other children are the zygote and the launchers), or a new interpreter."""
    children = children_of(controller)
    zygotes = [pid for pid in children if b"forkserver/zygote.py" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    forks = [pid for zygote in zygotes for pid in children_of(zygote)]
    return (forks or children)[0]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def record(figures: dict[str, Any]) -> None:
    record_figures("fault matrix", "FAULT_MATRIX_FIGURES", figures)


class Matrix:
    """One sweep of the matrix, its fault, and the checks every fault must pass."""

    def __init__(self, suite: Any, calc: Any, out: Path | None = None):
        self.suite = suite
        self.sweep = FaultSweep(suite, grace=GRACE)
        suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
        self.out = out or suite.path / "arena-out"
        self.out_option = f"--arena-out={self.out}"

    def start_and_wait_for_agents(self) -> None:
        self.sweep.start(ARMS, "-n", str(WORKERS), self.out_option)
        self.sweep.wait_for_agents(WORKERS)
        self.before = rows_so_far(self.out)

    def stopped(self, sent: float) -> tuple[int, float, list[int]]:
        """Wait for the controller to end: its return code, seconds since ``sent``, agent processes left."""
        returncode = self.sweep.wait()
        return returncode, time.monotonic() - sent, self.sweep.agents()

    def check_the_books(self) -> list[dict[str, Any]]:
        rows = ledger_rows(self.out)  # every line parses: no torn line
        cells = [cell(row) for row in rows]
        assert len(set(cells)) == len(cells), f"a cell recorded twice: {cells}"
        assert {cell(row) for row in self.before} <= set(cells), "a row finished before the fault was lost"
        assert [row for row in rows if cell(row) in {cell(r) for r in self.before}] == self.before
        return rows

    def lock_state(self) -> str:
        from pytest_swe_arena.ledger.lock import lock_written_ago, read_lock, stale_reason

        owner = read_lock(self.out)
        if owner is None:
            return "released"
        reason = stale_reason(owner, written_ago=lock_written_ago(self.out))
        assert reason is not None, f"the lock is left behind by a live owner: {owner}"
        return f"stale ({reason})"

    def resume(self, rows: list[dict[str, Any]]) -> int:
        """Resume with the agents released: it runs exactly the cells without a final row; return how many."""
        self.sweep.release()
        final = {cell(row) for row in rows if row["status"] not in NOT_FINAL}
        resumed = self.suite.run(ARMS, "-n", str(WORKERS), self.out_option, "--arena-resume")
        assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str() + resumed.stderr.str()
        latest = ledger_rows(self.out)
        this_run = [row for row in latest if row["run_id"] == latest[-1]["run_id"]]
        ran = {cell(row) for row in this_run if not row.get("reused_from")}
        assert ran == CELLS - final, f"resume ran {sorted(ran)}, expected {sorted(CELLS - final)}"
        assert {cell(row) for row in this_run if row.get("reused_from")} == final
        assert self.sweep.agents() == [], "no agent process is left after the resume either"
        return len(ran)

    def figures(self, fault: str, rows: list[dict[str, Any]], left: list[int], seconds: float | None,
                lock: str, resumed: int, **extra: Any) -> None:
        kept = sum(1 for row in self.before if row in rows)
        statuses: dict[str, int] = {}
        for row in rows:
            statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        record({"fault": fault, "rows_kept": f"{kept}/{len(self.before)}", "rows_after": statuses,
                "agent_processes_left": len(left), "seconds_to_stop": None if seconds is None else round(seconds, 1),
                "lock": lock, "resume_ran": resumed, **extra})


@pytest.fixture
def matrix(suite, calc):
    made: list[Matrix] = []

    def make(out: Path | None = None) -> Matrix:
        made.append(Matrix(suite, calc, out))
        return made[-1]

    yield make
    for each in made:
        each.sweep.kill_leftovers()


@pytest.mark.parametrize("signum, times", [(signal.SIGINT, 1), (signal.SIGINT, 2), (signal.SIGTERM, 1)],
                         ids=["SIGINT", "SIGINT-twice", "SIGTERM"])
def test_a_signal_stops_the_sweep_and_keeps_the_books(matrix, signum, times):
    run = matrix()
    run.start_and_wait_for_agents()
    sent = run.sweep.signal(signum)
    extra = {}
    if times == 2:
        wait_for(lambda: run.sweep.termed() >= run.sweep.started(), "the agents to get SIGTERM")
        time.sleep(SECOND_CTRL_C_PAUSE)  # a person's second Ctrl-C, a moment later
        again = run.sweep.signal(signum)
    returncode, seconds, left = run.stopped(sent)
    if times == 2:
        extra["seconds_after_the_second"] = round(seconds - (again - sent), 1)
    output = run.sweep.output()
    assert returncode == pytest.ExitCode.INTERRUPTED, output
    assert left == [], f"agent processes outlived the controller: {left}"
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    rows = run.check_the_books()
    interrupted = [row for row in rows if row["status"] == "interrupted"]
    assert len(interrupted) == WORKERS and {row["arm"] for row in interrupted} == {"AGENT"}
    assert json.loads((run.out / "summary.json").read_text())["rows"] == len(rows)
    lock = run.lock_state()
    assert lock == "released"
    resumed = run.resume(rows)
    name = signal.Signals(signum).name + (" twice" if times == 2 else "")
    run.figures(name, rows, left, seconds, lock, resumed, **extra)


def test_sigkill_of_the_controller_loses_only_the_cells_in_flight(matrix):
    run = matrix()
    run.start_and_wait_for_agents()
    assert run.sweep.process is not None
    workers = children_of(run.sweep.process.pid)
    sent = run.sweep.signal(signal.SIGKILL)
    returncode, seconds, left = run.stopped(sent)
    assert returncode == -signal.SIGKILL
    rows = run.check_the_books()
    assert rows == run.before, "nothing is written after the kill, and nothing before is lost"
    lock = run.lock_state()
    assert lock.startswith("stale (its pid"), lock
    # The orphaned workers notice their controller is gone and stop their agents; what they
    # cannot stop, the next sweep's takeover of the stale lock does.
    wait_for(lambda: not any(alive(pid) for pid in workers), "the orphaned workers to end")
    after_workers = run.sweep.agents()
    resumed = run.resume(rows)
    run.figures("SIGKILL of the controller", rows, left, seconds, lock, resumed,
                agent_processes_after_its_workers_ended=len(after_workers))


def test_sigkill_of_a_worker_is_one_harness_error_and_the_sweep_goes_on(matrix):
    run = matrix()
    run.start_and_wait_for_agents()
    assert run.sweep.process is not None
    victim = a_worker_of(run.sweep.process.pid)
    killed = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: any(row["status"] == "harness_error" for row in rows_so_far(run.out)),
             "the crashed cell's row")
    seconds = time.monotonic() - killed
    run.sweep.release()  # the other cells may now finish
    returncode = run.sweep.wait()
    left = run.sweep.agents()
    output = run.sweep.output()
    assert returncode == pytest.ExitCode.TESTS_FAILED, output  # the crashed cell is an error
    assert left == [], f"the killed worker's agent outlived the sweep: {left}"
    rows = run.check_the_books()
    crashed = [row for row in rows if row["status"] == "harness_error"]
    assert len(crashed) == 1 and crashed[0]["arm"] == "AGENT" and "worker crashed" in crashed[0]["error"]
    assert {cell(row) for row in rows} == CELLS, "every other cell ran to its end"
    lock = run.lock_state()
    assert lock == "released"
    resumed = run.resume(rows)
    assert resumed == 1
    run.figures("SIGKILL of a worker", rows, left, seconds, lock, resumed, seconds_meaning="kill to its row")


def test_a_full_disk_stops_the_sweep_with_one_error_and_loses_nothing_recorded(matrix, tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        run = matrix(disk / "out")
        run.start_and_wait_for_agents()
        filler = fill(disk)
        sent = time.monotonic()
        run.sweep.release()  # the agents' cells end now, and meet the full disk
        returncode, seconds, left = run.stopped(sent)
        output = run.sweep.output()
        assert returncode == pytest.ExitCode.INTERRUPTED, output
        assert left == []
        assert "Traceback" not in output and "INTERNALERROR" not in output, output
        assert output.count("error: swe-arena could not write everything to") == 1, output
        rows = run.check_the_books()
        assert "so these cells are not recorded: " in output
        lock = run.lock_state()
        assert lock == "released"
        filler.unlink()
        resumed = run.resume(rows)
        run.figures("disk full", rows, left, seconds, lock, resumed, seconds_meaning="release to exit")


def test_corrupt_side_files_are_named_and_the_sweep_runs(matrix):
    run = matrix()
    out = run.out
    out.mkdir()
    earlier = {"run_id": "earlier", "instance_id": "demo__calc-9", "arm": "GOLD", "status": "resolved"}
    (out / "ledger.jsonl").write_text(json.dumps(earlier) + "\n" + '{"run_id": "earlier", "instance_id": "de')
    (out / "calibration.json").write_bytes(b"\xff\xfe")
    (out / "arena.lock").write_text("{\"pid\": \"not a pid\"")
    long_ago = time.time() - 10 * 24 * 3600
    os.utime(out / "arena.lock", (long_ago, long_ago))
    run.sweep.release()  # nothing to stop here: the sweep must simply run, warning about each file
    started = time.monotonic()
    run.sweep.start(ARMS, "-n", str(WORKERS), run.out_option, "--arena-calibrate")
    returncode = run.sweep.wait()
    seconds = time.monotonic() - started
    output = run.sweep.output()
    assert returncode == pytest.ExitCode.OK, output  # EMPTY fails as calibration expects, the rest resolve: 0
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    assert f"taking over the lock of {out}: {out / 'arena.lock'} is not valid JSON" in output
    assert f"{out / 'calibration.json'}: cannot read calibration: not UTF-8 text" in output
    assert run.sweep.agents() == []
    lines = (out / "ledger.jsonl").read_text().splitlines()
    assert lines[1] == '{"run_id": "earlier", "instance_id": "de', "the torn line stays alone on its line"
    rows = [json.loads(line) for line in lines[2:]]
    assert len({cell(row) for row in rows}) == len(rows) == 9  # GOLD, AGENT and EMPTY (calibration)
    assert json.loads((out / "calibration.json").read_text())["failed"] == []
    lock = run.lock_state()
    assert lock == "released"
    run.before = []
    resumed = run.suite.run(ARMS, "-n", str(WORKERS), run.out_option, "--arena-resume")
    assert resumed.ret == pytest.ExitCode.OK
    resumed.stderr.fnmatch_lines(["*ledger.jsonl:2: skipping a torn or corrupt ledger line*"])
    latest = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()[2:]]
    this_run = [row for row in latest if row["run_id"] == latest[-1]["run_id"]]
    assert all(row.get("reused_from") for row in this_run) and {cell(row) for row in this_run} == CELLS
    run.figures("corrupt side files", rows, [], seconds, lock, 0, seconds_meaning="whole sweep")


#: The large file's size: big enough that reading its patch whole would show in the harness's memory, small
#: enough to write and hash in a few seconds.
LARGE_FILE_BYTES = 128 * 1024 * 1024
#: An agent that leaves one incompressible file of LARGE_FILE_BYTES in its workspace, untracked.
LARGE_FILE_AGENT = f'''
import os
with open("large.bin", "wb") as out:
    for _ in range({LARGE_FILE_BYTES} >> 20):
        out.write(os.urandom(1 << 20))
'''
#: A plugin (``-p arena_peak_memory``): each pytest process of the sweep (the controller, each worker) writes its
#: peak resident memory at its end.
PEAK_MEMORY_PLUGIN = '''
import os
from pathlib import Path


def pytest_unconfigure(config):
    status = Path("/proc/self/status").read_text()
    peak = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    Path(config.rootpath, f"peak-{os.getpid()}.kib").write_text(peak)
'''


def test_a_large_untracked_file_is_an_over_cap_patch_read_no_further_than_the_cap(suite, calc, tmp_path, monkeypatch):
    """A 128 MiB incompressible file left untracked in the workspace: the cell is the arm's failure with today's
    cap message, read no further than the cap (``git diff --binary`` is stopped there), and no pytest process of
    the sweep holds the file's patch in memory (reading it whole took more than the file's size: its base85 text
    is 5/4 of it). ``test_git_quirks`` measures the extraction's own allocations against the cap."""
    import sys  # here, not at the top: rows are appended to this file by more than one branch

    from helpers.agents import arm_table

    # An environment of its own (pytest alone), so GOLD's grading does not import the harness under test.
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    suite.instances([calc.row("demo__calc-1", env={"python": here, "requirements": ["pytest"]})])
    agent = suite.path / "large_file_agent.py"
    agent.write_text(LARGE_FILE_AGENT)
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "arena_peak_memory.py").write_text(PEAK_MEMORY_PLUGIN)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path / "plugins"),
                                                                   os.environ.get("PYTHONPATH")])))
    suite.arms_toml = arm_table("AGENT", "command", command=[sys.executable, str(agent)])
    started = time.monotonic()
    result = suite.run("--arena-arms=GOLD,AGENT", "-n", str(WORKERS), "-p", "arena_peak_memory")
    seconds = time.monotonic() - started
    rows = {row["arm"]: row for row in suite.ledger()}
    assert set(rows) == {"GOLD", "AGENT"}, result.stdout.str()[-3000:]
    assert rows["GOLD"]["status"] == "resolved", rows["GOLD"]["error"]
    error = rows["AGENT"]["error"]
    assert rows["AGENT"]["status"] == "arm_error" and "the patch is over the cap of 4,194,304 bytes" in error, error
    assert "git diff was stopped after 4,194,305 bytes" in error, error
    peaks = [int(path.read_text()) * 1024 for path in suite.path.glob("peak-*.kib")]
    assert len(peaks) == 1 + WORKERS, peaks  # the controller and each worker
    assert max(peaks) < LARGE_FILE_BYTES, f"a pytest process of the sweep peaked at {max(peaks):,} bytes"
    record({"fault": "large untracked file", "rows_kept": f"{len(rows)}/2", "file_bytes": LARGE_FILE_BYTES,
            "harness_peak_bytes": max(peaks), "peak_to_file": round(max(peaks) / LARGE_FILE_BYTES, 3),
            "seconds": round(seconds, 1), "seconds_meaning": "whole sweep",
            "agent_cell_phases": rows["AGENT"].get("phases")})


@pytest.mark.parametrize("fault", ["non-UTF-8 name", "long path"])
def test_a_cell_naming_its_files_badly_takes_nothing_down(matrix, suite, fault):
    """A third arm whose cells leave, in their run dir, a file named with bytes that are not UTF-8 (and an
    escape sequence), and one whose relative path (950 bytes) does not fit under a long out dir (issue 27:
    under ``-n 2`` an xdist INTERNALERROR and 1 row; "File name too long" and 0 rows). Every cell has its
    row, the names are escaped or listed as not kept, and the report reads the out dir."""
    from helpers.agents import arm_table

    planter = Path(__file__).parents[1] / "data" / "hostile" / "link_planter.py"
    out = suite.path.joinpath(*["o" * 200] * 16) if fault == "long path" else None
    run = matrix(out)
    suite.arms_toml += arm_table("NAMES", "command", command=[sys.executable, str(planter), "names", "{run_dir}",
                                                              "950"])
    run.sweep.release()  # the AGENT cells may finish: this fault is the NAMES arm's files
    started = time.monotonic()
    run.sweep.start(ARMS + ",NAMES", "-n", str(WORKERS), run.out_option)
    returncode = run.sweep.wait()
    seconds = time.monotonic() - started
    output = run.sweep.output()
    assert "INTERNALERROR" not in output and "Traceback" not in output, output[-3000:]
    assert "File name too long" not in output and "\x1b" not in output
    assert returncode == pytest.ExitCode.TESTS_FAILED, output[-3000:]  # the NAMES cells are arm errors
    run.before = []
    rows = run.check_the_books()
    assert {cell(row) for row in rows} == CELLS | {(f"demo__calc-{n}", "NAMES") for n in (1, 2, 3)}
    kinds = [entry["kind"] for row in rows if row["arm"] == "NAMES" for entry in row["details"]["run_dir_cut"]]
    assert kinds.count("name_escaped") == 3, kinds
    assert kinds.count("long_name") == (3 if out is not None else 0), kinds
    report = subprocess.run([sys.executable, "-m", "pytest_swe_arena.cli", "report", str(run.out)],
                            capture_output=True, text=True, check=False)
    assert report.returncode == 0, report.stderr[-2000:]
    lock = run.lock_state()
    assert lock == "released"
    run.figures(fault, rows, run.sweep.agents(), seconds, lock, 0, seconds_meaning="whole sweep",
                rows_written=f"{len(rows)}/9", out_dir_bytes=len(os.fsencode(run.out)))


BOMBS = {"MEMORY_BOMB": ("memory", 'memory = "96M"'), "FORK_BOMB": ("fork", "pids = 48"),
         "DISK_FILLER": ("disk", 'disk = "32M"')}


def test_a_memory_bomb_a_fork_bomb_and_a_disk_filler_each_end_their_own_cell_at_its_limit(suite, calc):
    """Issue 30: three bounded bombs, each in its own cell of one ``-n 2`` sweep beside well-behaved cells (GOLD,
    and a FIXER arm under all three limits at once): each bomb's cell is the arm's failure (arm_error) naming its
    limit; the other cells resolve; the controller ends normally; no process of any cell is left."""
    from helpers.agents import arm_table

    from pytest_swe_arena.cell.limits import _groups_for, probe_mechanism

    bombs = Path(__file__).parents[1] / "data" / "hostile" / "bombs.py"
    marker = f"arena-bomb-{os.getpid()}-{time.monotonic_ns()}"
    suite.instances([calc.row()])
    fixed = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
    fixer = f"import pathlib; pathlib.Path('calc/ops.py').write_text({fixed!r})"
    suite.arms_toml = arm_table("FIXER", "command", command=[sys.executable, "-c", fixer], memory="96M", pids=48,
                                disk="32M")
    for name, (kind, limit) in BOMBS.items():
        suite.arms_toml += arm_table(name, "command", command=[sys.executable, str(bombs), kind, marker]) + limit + "\n"
    # The graded tests are held to the same limits: a fix whose import allocates 1 GiB passes them when graded.
    hog = fixed + "\n_HOG = [b'x' * (16 << 20) for _ in range(64)]\n"
    suite.arms_toml += arm_table("GRADED_HOG", "command", memory="96M", command=[
        sys.executable, "-c", f"import pathlib; pathlib.Path('calc/ops.py').write_text({hog!r})"])
    started = time.monotonic()
    result = suite.run(f"--arena-arms=GOLD,FIXER,{','.join(BOMBS)},GRADED_HOG", "-n", str(WORKERS))
    seconds = time.monotonic() - started
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED and "INTERNALERROR" not in output, output[-3000:]
    mechanism = probe_mechanism()
    assert f"arena limits: {mechanism}" in output
    rows = {row["arm"]: row for row in suite.ledger()}
    assert set(rows) == {"GOLD", "FIXER", "GRADED_HOG", *BOMBS}, output[-3000:]
    hog_error = rows["GRADED_HOG"]["error"]
    assert rows["GRADED_HOG"]["status"] == "arm_error", hog_error
    assert hog_error.startswith("verify: the graded tests passed a limit: memory:"), hog_error
    assert rows["GOLD"]["status"] == "resolved" and rows["FIXER"]["status"] == "resolved", rows["FIXER"]["error"]
    assert rows["FIXER"]["details"]["limits"] == {"memory": 96 * 2**20, "pids": 48, "disk": 32 * 2**20,
                                                  "mechanism": mechanism, "passed": None}
    for name, (kind, _) in BOMBS.items():
        row = rows[name]
        limit = {"memory": "memory", "fork": "pids", "disk": "disk"}[kind]
        assert row["status"] == "arm_error", (name, row["status"], row["error"])
        assert row["error"].startswith(f"limit passed: {limit}:"), (name, row["error"])
        assert row["details"]["limits"]["passed"] == limit and row["details"]["limits"]["mechanism"] == mechanism
    left = [pid for pid in (int(entry) for entry in os.listdir("/proc") if entry.isdigit())
            if marker.encode() in _cmdline(pid)]
    assert left == [], f"processes of a bomb outlived its cell: {left}"
    groups = [path for parent in _groups_for(mechanism).values() for path in parent.glob("arena-*")]
    assert groups == [], f"cell groups left behind: {groups}"
    grown = float(rows["DISK_FILLER"]["error"].split("grew by ")[1].split("M")[0])
    statuses = {name: rows[name]["status"] for name in rows}
    record({"fault": "memory bomb, fork bomb, disk filler (one cell each)", "mechanism": mechanism,
            "rows_after": statuses, "limits_named": {name: rows[name]["details"]["limits"]["passed"] for name in BOMBS},
            "disk_filler_grew_mib": grown, "agent_processes_left": len(left), "groups_left": len(groups),
            "controller": "ended normally (exit 1: the bombs' cells failed)",
            "seconds": round(seconds, 1), "seconds_meaning": "whole sweep"})


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
