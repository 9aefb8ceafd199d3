"""Sweeps that survive: budgets, the single-owner lock, interrupts, resume, repeats, timeouts."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import time
from datetime import UTC, datetime, timedelta

import pytest
from helpers.arena import XDIST, marked_processes, start_sweep

from pytest_swe_arena.controller.records import SWEEP_NOT_RUN

# Test arms. They are real arm kinds (registered through the hook) that do real work in the
# workspace and real processes; only what a model would have spent is stated by the arm.
ARMS_CONFTEST = r'''
import os, sys, time
from pytest_swe_arena.cell import processes as proc
from pytest_swe_arena.arms.base import ArmResult
from pytest_swe_arena.spend.usage import Usage


class PricedArm:
    """Applies the gold patch after "spending" a dollar and 1,000 tokens, like a paid agent would."""

    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        from pytest_swe_arena.cell.patches import apply_patch
        time.sleep(float(self.spec.settings.get("seconds", 0.3)))
        apply_patch(request.workspace, request.instance.patch, "gold")
        usage = Usage(900, 100, 0, 0, 0, 1, 900, 1.0, "reported")
        model = self.spec.settings.get("served", "lab/model-a")
        return ArmResult(usage=usage, models={model: usage}, asked_model="lab/model-a", served_model=model)


class TreeArm:
    """Runs a real process tree (including a setsid escapee) for a while, then applies gold."""

    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        script = (
            "import os, subprocess, sys, time\n"
            "subprocess.Popen(['sh', '-c', 'sleep 300 & sleep 300 & wait'])\n"
            "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(300)'])\n"
            "open(os.environ['STARTED_FILE'], 'a').write('started\\n')\n"
            f"time.sleep({float(self.spec.settings.get('seconds', 300))})\n"
        )
        started = request.run_dir / "started"
        env = request.cell.env({"STARTED_FILE": str(os.environ.get("ARENA_TEST_STARTED", started))})
        result = proc.run([sys.executable, "-c", script], cwd=request.workspace.path, env=env,
                          stdout=request.run_dir / "agent.log", timeout=float(self.spec.settings.get("timeout", 600)),
                          grace=2.0)
        if result.timed_out:
            return ArmResult(status="timeout", error="agent timed out", usage=Usage(cost_source="unknown"))
        from pytest_swe_arena.cell.patches import apply_patch
        apply_patch(request.workspace, request.instance.patch, "gold")
        return ArmResult(usage=Usage(cost_source="unknown"))


class CrashArm:
    """Kills the process it runs in: under xdist, its worker dies in the middle of the cell."""

    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        import signal
        os.kill(os.getpid(), signal.SIGKILL)


class RaisingArm:
    """Raises after it may have spent: a harness error whose spend nobody knows."""

    def __init__(self, spec, suite):
        self.spec = spec

    def run(self, request):
        raise RuntimeError("the agent's SDK blew up")


def pytest_arena_arm_kinds():
    return {"priced": PricedArm, "tree": TreeArm, "crash": CrashArm, "raising": RaisingArm}
'''

ARMS_TOML = """
[tool.swe_arena.arms.PAID]
kind = "priced"
[tool.swe_arena.arms.PAID2]
kind = "priced"
[tool.swe_arena.arms.SWAPPED]
kind = "priced"
served = "lab/model-b"
[tool.swe_arena.arms.TREE]
kind = "tree"
[tool.swe_arena.arms.SLOW]
kind = "tree"
seconds = 600
[tool.swe_arena.arms.CRASH]
kind = "crash"
[tool.swe_arena.arms.RAISING]
kind = "raising"
"""


@pytest.fixture
def arena(suite, calc, monkeypatch):
    suite.pytester.makeconftest(ARMS_CONFTEST)
    suite.arms_toml = ARMS_TOML
    # Every process a sweep starts inherits this, so the tests can find any that leak.
    marker = f"arena-test-{os.getpid()}-{time.monotonic_ns()}"
    monkeypatch.setenv("ARENA_TEST_MARK", marker)
    suite.marker = marker
    suite.calc = calc
    yield suite
    for pid in marked_processes(marker):
        os.kill(pid, signal.SIGKILL)


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("xdist", XDIST)
def test_sweep_budget_stops_new_cells_and_skips_the_rest_with_the_reason(arena, xdist):
    arena.instances([arena.calc.row(f"demo__calc-{n}") for n in range(1, 5)])
    result = arena.run("--arena-arms=PAID,PAID2", "--arena-max-usd=3", "-rs", *xdist)
    rows = arena.ledger()
    ran = [row for row in rows if row["status"] == "resolved"]
    skipped = [row for row in rows if row["status"] == "skipped_budget"]
    workers = 2 if xdist else 1
    assert 3 <= len(ran) <= 3 + workers - 1, "at most 3 cells plus those already in flight"
    assert len(ran) + len(skipped) == 8
    # The reason names the spend when the cell was turned away: $3, or more if a cell was in flight.
    assert all(re.fullmatch(r"sweep budget exhausted \(\$[34]\.0000 spent of \$3\)", row["error"]) for row in skipped)
    result.assert_outcomes(passed=len(ran), skipped=len(skipped))
    result.stdout.fnmatch_lines(
        ["SKIPPED_BUDGET * instances/demo.jsonl:*: sweep budget exhausted ($?.0000 spent of $3)"]
    )
    budget = json.loads((arena.path / "arena-out/budget.json").read_text())
    assert budget["spent"]["usd"] == len(ran) and budget["spent"]["tokens"] == 1000 * len(ran)
    assert budget["models"]["lab/model-a"]["usd"] == len(ran)
    assert [a["skipped"] for a in arena.summary()["arms"]] != [0, 0]


def test_arm_budget_only_stops_that_arm(arena):
    arena.arms_toml = ARMS_TOML.replace('[tool.swe_arena.arms.PAID2]\nkind = "priced"',
                                        '[tool.swe_arena.arms.PAID2]\nkind = "priced"\nmax_total_usd = 1')
    arena.instances([arena.calc.row(f"demo__calc-{n}") for n in range(1, 4)])
    arena.run("--arena-arms=PAID,PAID2")
    statuses = [(row["arm"], row["status"]) for row in arena.ledger()]
    assert statuses.count(("PAID", "resolved")) == 3
    assert statuses.count(("PAID2", "resolved")) == 1 and statuses.count(("PAID2", "skipped_budget")) == 2


def test_served_model_tripwire_flags_and_strict_mode_errors(arena):
    arena.instances([arena.calc.row()])
    result = arena.run("--arena-arms=PAID,SWAPPED")
    result.assert_outcomes(passed=2)
    flags = {row["arm"]: row["model_mismatch"] for row in arena.ledger()}
    assert flags == {"PAID": False, "SWAPPED": True}
    result.stdout.fnmatch_lines(["*served model differs from the asked one in 1 cell*SWAPPED*"])

    result = arena.run("--arena-arms=SWAPPED", "--arena-strict-models", "--arena-out=strict")
    result.assert_outcomes(errors=1)
    [row] = arena.ledger("strict")
    assert row["status"] == "harness_error"
    assert row["error"] == "served model 'lab/model-b' is not the asked 'lab/model-a' (--arena-strict-models)"


def test_a_second_sweep_on_the_same_out_dir_is_refused_then_takes_over_a_dead_owner(arena):
    arena.instances([arena.calc.row()])
    first = start_sweep(arena, "--arena-arms=SLOW")
    lock = arena.path / "arena-out/arena.lock"
    try:
        wait_for(lock.exists, 180, "the first sweep's lock")
        owner = json.loads(lock.read_text())
        assert owner["pid"] == first.pid and owner["host"] == socket.gethostname()
        assert oct(lock.stat().st_mode & 0o777) == "0o600"

        second = arena.run("--arena-arms=GOLD")
        assert second.ret == pytest.ExitCode.USAGE_ERROR
        second.stderr.fnmatch_lines([
            f"*arena-out is in use by another sweep (pid {first.pid} on {socket.gethostname()}, "
            f"run {owner['run_id']}, heartbeat * ago)*"
        ])
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # Its pid is gone on this host: the lock is taken over at once, with a warning.
    third = arena.run("--arena-arms=GOLD")
    third.assert_outcomes(passed=1)
    third.stdout.fnmatch_lines([f"*taking over the lock of * from run {owner['run_id']} *its pid {first.pid} is gone*"])
    assert not lock.exists()


def test_a_lock_is_stale_when_its_heartbeat_is_old(arena):
    # The heartbeats are written in the past, far from every limit, so that how long a sweep takes to
    # start on a busy machine cannot move a lock across one: ours is 600 s, the default 90 s.
    arena.instances([arena.calc.row()])
    out = arena.path / "arena-out"
    out.mkdir()
    arena.ini_lines = ["arena_lock_stale = 600"]

    def lock_beaten(seconds_ago: float, **owner_limits: float) -> None:
        beat = (datetime.now(UTC) - timedelta(seconds=seconds_ago)).isoformat()
        (out / "arena.lock").write_text(json.dumps({
            "pid": 1, "host": "elsewhere", "run_id": "r-remote", "started_at": beat, "heartbeat_at": beat,
            "progress": {}, **owner_limits}))

    lock_beaten(0)
    refused = arena.run("--arena-arms=GOLD")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*in use by another sweep (pid 1 on elsewhere, run r-remote*"])

    # 300 s is stale by the default limit: our arena_lock_stale (600 s), not the default, decides.
    lock_beaten(300)
    ours = arena.run("--arena-arms=GOLD")
    assert ours.ret == pytest.ExitCode.USAGE_ERROR
    ours.stderr.fnmatch_lines(["*in use by another sweep (pid 1 on elsewhere, run r-remote*"])

    # The owner beats slowly and said so in its lock: its stale limit, not ours, decides.
    lock_beaten(3000, heartbeat_seconds=600, stale_seconds=7200)
    patient = arena.run("--arena-arms=GOLD")
    assert patient.ret == pytest.ExitCode.USAGE_ERROR
    patient.stderr.fnmatch_lines(["*in use by another sweep (pid 1 on elsewhere, run r-remote*"])

    lock_beaten(3000)
    taken = arena.run("--arena-arms=GOLD")
    taken.assert_outcomes(passed=1)
    taken.stdout.fnmatch_lines(["*taking over the lock*run r-remote*its heartbeat is 3??? s old*"])


def test_stale_reason_uses_the_limit_the_owner_recorded():
    from pytest_swe_arena.ledger.lock import stale_reason

    # The age is taken from the clock when the lock is judged: bound it by the clock around the calls,
    # so that a pause of the machine between two lines cannot change the expected text.
    before = time.time()
    owner = {"pid": 1, "host": "elsewhere", "heartbeat_at": datetime.fromtimestamp(before - 100, UTC).isoformat()}
    reasons = [stale_reason(owner), stale_reason(dict(owner, stale_seconds="soon"), stale_after=30)]
    paused = math.ceil(time.time() - before)
    for reason in reasons:
        age = re.fullmatch(r"its heartbeat is (\d+) s old", reason or "")
        assert age and 100 <= int(age[1]) <= 100 + paused, reason
    assert stale_reason(dict(owner, stale_seconds=600)) is None
    assert stale_reason(dict(owner, stale_seconds=600), stale_after=30) is None, "the owner's limit wins"


def test_the_heartbeat_keeps_beating_after_a_failed_write(tmp_path):
    import shutil

    from pytest_swe_arena.ledger.lock import SweepLock

    out = tmp_path / "out"
    lock = SweepLock(out, "r1", dict, heartbeat=0.05)
    lock.acquire()
    try:
        with pytest.warns(RuntimeWarning, match="cannot refresh .*arena.lock.*; retrying every 0.05 s"):
            shutil.rmtree(out)
            out.write_text("")  # the out dir is a file now: every write fails (NotADirectoryError)
            wait_for(lambda: lock.failures >= 2, 60, "failed heartbeats")
        assert lock._thread is not None and lock._thread.is_alive()
        out.unlink()
        out.mkdir()
        wait_for((out / "arena.lock").exists, 60, "the heartbeat to write the lock again")
    finally:
        lock.release()
    assert not (out / "arena.lock").exists()


def test_a_signal_inside_deferred_is_raised_when_the_block_ends():
    from pytest_swe_arena.interrupts import InterruptSignals

    signals = InterruptSignals()
    signals.install()
    try:
        steps = []
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            with signals.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                wait_for(lambda: signals.pending == signal.SIGTERM, 60, "the handler to take note")
                steps.append("written")
                with signals.deferred():
                    steps.append("nested")
                steps.append("counted")  # the inner block's end does not raise
        assert steps == ["written", "nested", "counted"]
        assert signals.pending is None
    finally:
        signals.uninstall()
    fresh = InterruptSignals()
    fresh.install()
    try:
        with pytest.raises(KeyboardInterrupt):  # outside a deferred block a signal raises at once
            os.kill(os.getpid(), signal.SIGTERM)
            wait_for(lambda: False, 60, "the signal to raise")
    finally:
        fresh.uninstall()


def test_signals_after_the_first_hurry_the_stop_and_never_raise():
    from pytest_swe_arena.interrupts import InterruptSignals

    hurried = []
    signals = InterruptSignals(on_hurry=lambda: hurried.append("killed the agents"), repeat_window=0.0)
    signals.install()
    try:
        # Waits for the handler to have run (not sleeps: a signal's handler may run late on a busy machine).
        with pytest.raises(KeyboardInterrupt, match="SIGINT"):
            os.kill(os.getpid(), signal.SIGINT)
            wait_for(lambda: False, 60, "the first SIGINT to raise KeyboardInterrupt")
        for count, signum in enumerate((signal.SIGINT, signal.SIGTERM), 1):  # raising would skip the bookkeeping
            os.kill(os.getpid(), signum)
            wait_for(lambda count=count: len(hurried) >= count, 60, f"signal {count} after the first to hurry")
        assert hurried == ["killed the agents"] * 2 and signals.hurried.is_set()
    finally:
        signals.uninstall()
    ending = InterruptSignals(on_hurry=lambda: hurried.append("again"))
    ending.install()
    try:
        ending.begin_stop()  # the session's finish has begun: even a first signal only hurries
        os.kill(os.getpid(), signal.SIGTERM)
        wait_for(lambda: hurried[-1] == "again", 60, "the SIGTERM to hurry")
    finally:
        ending.uninstall()


def test_a_usage_error_at_session_start_leaves_no_lock(arena):
    arena.instances([arena.calc.row()])
    typo = arena.run("--arena-arms=GOLD,TYPO")
    assert typo.ret == pytest.ExitCode.USAGE_ERROR
    typo.stderr.fnmatch_lines(["*--arena-arms: unknown arm 'TYPO'*"])
    assert not (arena.path / "arena-out/arena.lock").exists()
    after = arena.run("--arena-arms=GOLD")
    after.assert_outcomes(passed=1)
    assert "taking over the lock" not in after.stdout.str()


def test_a_failure_while_writing_the_results_still_releases_the_lock(arena):
    arena.instances([arena.calc.row()])
    summary = arena.path / "arena-out/summary.json"
    summary.mkdir(parents=True)  # summary.json cannot be replaced
    result = arena.run("--arena-arms=GOLD")
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines([f"error: swe-arena could not write everything to {summary.parent}; *",
                                 f"  not written: {summary} (Is a directory)",
                                 f"  free space (or remove the cause), then *`swe-arena report {summary.parent}`"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert (arena.path / "arena-out/predictions/GOLD.jsonl").is_file(), "the other outputs are written"
    assert [row["status"] for row in arena.ledger()] == ["resolved"]
    assert not (arena.path / "arena-out/arena.lock").exists()


def test_a_cell_whose_worker_dies_is_a_harness_error_row_and_the_others_are_intact(arena):
    arena.instances([arena.calc.row(f"demo__calc-{n}") for n in (1, 2)])
    result = arena.run("--arena-arms=GOLD,CRASH", "-n", "2", "-v")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(["*HARNESS_ERROR instances/demo.jsonl::demo__calc-?[[]CRASH[]]*"])
    rows = {(row["instance_id"], row["arm"]): row for row in arena.ledger()}
    assert len(rows) == 4, "one row per cell: none missing, none twice"
    for n in (1, 2):
        assert rows[(f"demo__calc-{n}", "GOLD")]["status"] == "resolved"
        crashed = rows[(f"demo__calc-{n}", "CRASH")]
        assert crashed["status"] == "harness_error"
        assert re.match(r"worker crashed: worker 'gw\d' crashed while running", crashed["error"]), crashed["error"]
        assert crashed["cell_key"], "identified from the setup report"
        assert crashed["usage"]["cost_usd"] is None, "it may have spent: unknown, not $0"
    crash = next(arm for arm in arena.summary()["arms"] if arm["arm"] == "CRASH")
    assert crash["harness_errors"] == 2 and crash["cost_usd"] is None
    assert not (arena.path / "arena-out/arena.lock").exists()


def test_a_harness_error_after_the_arm_ran_has_unknown_spend(arena):
    arena.instances([arena.calc.row()])
    arena.run("--arena-arms=RAISING,PAID", "--arena-max-usd=100").assert_outcomes(passed=1, errors=1)
    rows = {row["arm"]: row for row in arena.ledger()}
    assert rows["RAISING"]["status"] == "harness_error" and "the agent's SDK blew up" in rows["RAISING"]["error"]
    assert rows["RAISING"]["usage"]["cost_usd"] is None and rows["RAISING"]["usage"]["input_tokens"] is None
    raising = next(arm for arm in arena.summary()["arms"] if arm["arm"] == "RAISING")
    assert raising["cost_usd"] is None and raising["tokens"] is None
    spent = json.loads((arena.path / "arena-out/budget.json").read_text())["spent"]
    assert spent == {"usd": 1.0, "tokens": 1000, "cells": 2, "unknown_usd_cells": 1, "unknown_token_cells": 1}


def test_a_resumed_sweep_counts_the_spend_it_reuses_before_any_cell_starts(arena):
    arena.instances([arena.calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    arena.run("--arena-arms=PAID").assert_outcomes(passed=3)
    first_run = arena.ledger()[0]["run_id"]
    # $3 already spent by the reused cells: a $2 cap is spent before PAID2 runs anything.
    arena.run("--arena-arms=PAID,PAID2", "--arena-resume", "--arena-max-usd=2").assert_outcomes(passed=3, skipped=3)
    rows = arena.ledger()
    second = [row for row in rows if row["run_id"] == rows[-1]["run_id"]]
    assert sorted((row["arm"], row["status"]) for row in second) == [("PAID", "resolved")] * 3 + [
        ("PAID2", "skipped_budget")] * 3
    budget = json.loads((arena.path / "arena-out/budget.json").read_text())
    assert budget["spent"]["usd"] == 3.0 and budget["spent"]["cells"] == 3, "each reused row counted once"
    # Resumed again: a reused row names the run that really ran the cell, not the one that reused it.
    arena.run("--arena-arms=PAID", "--arena-resume").assert_outcomes(passed=3)
    rows = arena.ledger()
    third = [row for row in rows if row["run_id"] == rows[-1]["run_id"]]
    assert [row["reused_from"] for row in third] == [first_run] * 3


def test_tests_that_are_not_cells_never_become_ledger_rows(arena):
    arena.instances([arena.calc.row()])
    started = arena.path / "plain-started"
    arena.pytester.makepyfile(test_plain=f"""
        import pathlib, time, pytest

        @pytest.mark.parametrize("case", ["a"])
        def test_waits(case):
            pathlib.Path({str(started)!r}).write_text("started")
            time.sleep(300)
    """)
    sweep = start_sweep(arena, "--arena-arms=GOLD", "instances", "test_plain.py")
    wait_for(started.exists, 180, "the plain test to start")
    sweep.send_signal(signal.SIGINT)
    assert sweep.wait(timeout=120) == pytest.ExitCode.INTERRUPTED
    assert [(row["arm"], row["status"]) for row in arena.ledger()] == [("GOLD", "resolved")]


def test_the_heartbeat_refreshes_the_lock_with_progress(arena):
    arena.instances([arena.calc.row(f"demo__calc-{n}") for n in (1, 2)])
    arena.ini_lines = ["arena_lock_heartbeat = 0.5"]
    sweep = start_sweep(arena, "--arena-arms=GOLD,SLOW")
    lock = arena.path / "arena-out/arena.lock"
    try:
        def progress() -> dict:
            return json.loads(lock.read_text())["progress"] if lock.exists() else {}

        # Cells run round by round: both GOLD cells are done and a SLOW cell (600 s) is running.
        wait_for(lambda: progress().get("done") == 2 and progress().get("running") == 1, 180, "the GOLD cells")
        first = json.loads(lock.read_text())
        # heartbeat_at has whole seconds: a later one means the thread beat again while no cell finished.
        wait_for(lambda: json.loads(lock.read_text())["heartbeat_at"] > first["heartbeat_at"], 120,
                 "the heartbeat to refresh the lock")
        later = json.loads(lock.read_text())
        assert later["progress"] == {"total": 4, "done": 2, "running": 1, "spent_usd": 0.0, "spent_tokens": 0,
                                     "unknown_usd_cells": 0, "unknown_token_cells": 0}
        assert (later["heartbeat_seconds"], later["stale_seconds"]) == (0.5, 90.0)
        assert lock.stat().st_mode & 0o777 == 0o600
    finally:
        sweep.send_signal(signal.SIGINT)
        sweep.wait(timeout=120)


@pytest.mark.parametrize("xdist", XDIST)
def test_sigint_stops_the_sweep_without_orphans_and_resume_runs_the_rest(arena, xdist):
    arena.instances([arena.calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    started = arena.path / "agents-started"
    os.environ["ARENA_TEST_STARTED"] = str(started)
    try:
        sweep = start_sweep(arena, "--arena-arms=GOLD,TREE", *xdist)
        wait_for(lambda: started.exists() and started.read_text().count("started") >= (2 if xdist else 1), 180,
                 "agents to start")
        assert marked_processes(arena.marker)
        sweep.send_signal(signal.SIGINT)
        # The agents would run 300 s: stopping long before is the arm's cancellation, not their end.
        # How fast the sweep stops is bench/interrupt.py's figure, not an assert on this machine's speed.
        returncode = sweep.wait(timeout=120)
    finally:
        del os.environ["ARENA_TEST_STARTED"]
    assert returncode == pytest.ExitCode.INTERRUPTED
    leftovers = marked_processes(arena.marker)
    assert leftovers == [], f"processes of the sweep survived: {leftovers}"
    assert not (arena.path / "arena-out/arena.lock").exists()
    lines = (arena.path / "arena-out/ledger.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]  # every line parses
    interrupted = [row for row in rows if row["status"] == "interrupted"]
    assert interrupted and all(row["arm"] == "TREE" for row in interrupted)
    # In flight when stopped: what they spent is unknown, not $0.
    assert all(row["usage"]["cost_usd"] is None and row["usage"]["cost_source"] == "unknown" for row in interrupted)
    assert len({(row["instance_id"], row["arm"]) for row in rows}) == len(rows), "no cell recorded twice"
    final = {(r["instance_id"], r["arm"]) for r in rows if r["status"] in ("resolved", "unresolved")}

    # Resume: the final cells are reused, everything else runs (the tree arm now finishes quickly).
    arena.arms_toml = ARMS_TOML.replace('[tool.swe_arena.arms.TREE]\nkind = "tree"',
                                        '[tool.swe_arena.arms.TREE]\nkind = "tree"\nseconds = 0')
    resumed = arena.run("--arena-arms=GOLD", "--arena-resume")
    resumed.assert_outcomes(passed=3)
    rows = arena.ledger()
    last_run = rows[-1]["run_id"]
    this_run = [row for row in rows if row["run_id"] == last_run]
    reused = {(r["instance_id"], r["arm"]) for r in this_run if r.get("reused_from")}
    assert reused == {key for key in final if key[1] == "GOLD"}


def test_kill_9_of_the_controller_loses_only_the_cells_in_flight(arena):
    arena.instances([arena.calc.row(f"demo__calc-{n}") for n in (1, 2)])
    started = arena.path / "agents-started"
    os.environ["ARENA_TEST_STARTED"] = str(started)
    try:
        sweep = start_sweep(arena, "--arena-arms=GOLD,TREE")  # no xdist: the controller runs the agent
        wait_for(lambda: started.exists(), 180, "the agent to start")
        sweep.kill()
        sweep.wait(timeout=120)
    finally:
        del os.environ["ARENA_TEST_STARTED"]
    ledger = arena.path / "arena-out/ledger.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    # Cells run round by round: both GOLD cells, then the first TREE cell, killed in flight.
    assert [(r["instance_id"], r["arm"], r["status"]) for r in rows] == [("demo__calc-1", "GOLD", "resolved"),
                                                                        ("demo__calc-2", "GOLD", "resolved")]
    orphans = marked_processes(arena.marker)
    assert orphans, "the killed controller's agent is still running"
    # What a kill -9 in the middle of a write would leave behind.
    with open(ledger, "a") as torn:
        torn.write('{"run_id": "torn", "instance_id": "demo__ca')

    arena.arms_toml = ARMS_TOML.replace('[tool.swe_arena.arms.TREE]\nkind = "tree"',
                                        '[tool.swe_arena.arms.TREE]\nkind = "tree"\nseconds = 0')
    resumed = arena.run("--arena-arms=GOLD,TREE", "--arena-resume")
    resumed.assert_outcomes(passed=4)
    resumed.stdout.fnmatch_lines(
        [f"*taking over the lock * its pid {sweep.pid} is gone; stopped * process(es) it left running*"]
    )
    resumed.stderr.fnmatch_lines(["*ledger.jsonl:3: skipping a torn or corrupt ledger line*"])
    assert marked_processes(arena.marker) == []
    lines = ledger.read_text().splitlines()
    assert lines[2].endswith('"demo__ca'), "the torn line stays where it was, on a line of its own"
    this_run = [json.loads(line) for line in lines[3:]]
    assert sorted((r["instance_id"], r["arm"], bool(r.get("reused_from"))) for r in this_run) == [
        ("demo__calc-1", "GOLD", True), ("demo__calc-1", "TREE", False),
        ("demo__calc-2", "GOLD", True), ("demo__calc-2", "TREE", False)]


def test_resume_reuses_final_rows_and_reruns_changed_and_unfinished_cells(arena):
    calc = arena.calc
    rows = [calc.row("demo__calc-1"), calc.row("demo__calc-2"),
            calc.row("demo__calc-3", test_patch="diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")]
    arena.instances(rows)
    arena.run("--arena-arms=GOLD,EMPTY").assert_outcomes(passed=2, failed=2, errors=2)

    # Fix the broken instance, change another one: only those and the harness errors run again.
    rows[2] = calc.row("demo__calc-3")
    rows[1] = calc.row("demo__calc-2", problem_statement="reworded")
    arena.instances(rows)
    collect = arena.run("--arena-arms=GOLD,EMPTY", "--arena-resume", "--collect-only", "-q")
    collect.stdout.fnmatch_lines(["swe-arena: 6 cells, 4 to run, 2 reused from earlier runs"])

    result = arena.run("--arena-arms=GOLD,EMPTY", "--arena-resume", "-v")
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines([
        "*demo__calc-1[[]GOLD[]] RESOLVED (reused)*",
        "*demo__calc-2[[]GOLD[]] RESOLVED *",
        "*demo__calc-1[[]EMPTY[]] UNRESOLVED (reused)*",
    ])
    ledger = arena.ledger()
    first_run, second_run = ledger[0]["run_id"], ledger[-1]["run_id"]
    latest = [row for row in ledger if row["run_id"] == second_run]
    assert len(latest) == 6
    assert {r["instance_id"] for r in latest if r.get("reused_from") == first_run} == {"demo__calc-1"}
    assert {(r["instance_id"], r["status"]) for r in latest if r["arm"] == "GOLD"} == {
        ("demo__calc-1", "resolved"), ("demo__calc-2", "resolved"), ("demo__calc-3", "resolved")}
    # The summary of the resumed run covers the whole sweep, reused cells included.
    assert [(a["arm"], a["cells"], a["resolved"]) for a in arena.summary()["arms"]] == [
        ("GOLD", 3, 3), ("EMPTY", 3, 0)]


def test_repeat_gives_a_row_and_patch_per_trial(arena):
    arena.instances([arena.calc.row("demo__calc-1"), arena.calc.row("demo__calc-2")])
    result = arena.run("--arena-arms=GOLD,EMPTY", "--arena-repeat=3", "-n", "2")
    result.assert_outcomes(passed=6, failed=6)
    rows = arena.ledger()
    trials = sorted((r["instance_id"], r["arm"], r["trial"]) for r in rows)
    assert trials == sorted((f"demo__calc-{i}", arm, t) for i in (1, 2) for arm in ("GOLD", "EMPTY") for t in (1, 2, 3))
    assert len({r["cell_key"] for r in rows}) == 12
    out = arena.path / "arena-out"
    assert (out / "patches/demo__calc-1.gold.r3.patch").read_text() == arena.calc.patch
    # Predictions are named as the patches are: every trial with its .rK (trial 1 too).
    assert sorted(path.name for path in (out / "predictions").iterdir()) == [
        f"{arm}.r{trial}.jsonl" for arm in ("EMPTY", "GOLD") for trial in (1, 2, 3)]
    # pass@k from the rows: n = 3 trials, c = resolved trials per instance.
    for arm, expected in (("GOLD", 3), ("EMPTY", 0)):
        for iid in ("demo__calc-1", "demo__calc-2"):
            cell = [r for r in rows if r["arm"] == arm and r["instance_id"] == iid]
            assert sum(r["status"] == "resolved" for r in cell) == expected
    result = arena.run("--collect-only", "-q", "--arena-arms=GOLD", "--arena-repeat=2")
    result.stdout.fnmatch_lines(["*demo__calc-1[[]GOLD-r1[]]", "*demo__calc-1[[]GOLD-r2[]]"])


def test_pytest_timeout_cancels_the_agent_and_records_timeout(arena, monkeypatch):
    arena.instances([arena.calc.row()])
    started = arena.path / "agent-started"
    monkeypatch.setenv("ARENA_TEST_STARTED", str(started))
    sweep = start_sweep(arena, "--arena-arms=SLOW", "--timeout=600", "--timeout-method=signal")
    try:
        wait_for(started.exists, 180, "the agent to start")
        # pytest-timeout's signal method arms a timer that sends SIGALRM when it expires. The test sends
        # it once the agent runs, so that the timeout falls while the arm runs on a machine of any speed.
        sweep.send_signal(signal.SIGALRM)
        returncode = sweep.wait(timeout=120)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    [log] = arena.path.glob("sweep-*.log")
    assert returncode == pytest.ExitCode.TESTS_FAILED, log.read_text()
    assert re.search(r"=+ 1 failed in ", log.read_text()), "a timeout is the arm's failure, not a harness error"
    [row] = arena.ledger()
    assert row["status"] == "timeout" and "pytest-timeout" in row["error"]
    assert row["error"].endswith("Timeout (>600.0s) from pytest-timeout."), row["error"]
    assert row["patch_scored"] is False
    assert marked_processes(arena.marker) == []


@pytest.mark.parametrize("xdist", XDIST)
def test_the_exit_status_tells_a_sweep_that_ran_from_one_that_could_not(arena, xdist):
    arena.instances([arena.calc.row(f"demo__calc-{n}") for n in (1, 2)])
    ran = arena.run("--arena-arms=EMPTY,RAISING", "--arena-repeat=2", "--arena-out=ran", *xdist)
    ran.assert_outcomes(failed=4, errors=4)
    assert ran.ret == pytest.ExitCode.TESTS_FAILED, "half the cells are harness errors: the sweep ran"
    assert "could not run" not in ran.stdout.str()
    broken = arena.run("--arena-arms=RAISING", "--arena-out=broken", *xdist)
    broken.assert_outcomes(errors=2)
    assert broken.ret == SWEEP_NOT_RUN == 6
    broken.stdout.fnmatch_lines(["error: 2 of 2 cells were harness or configuration errors (not counted): the sweep "
                                 "could not run, exit status 6*"])
