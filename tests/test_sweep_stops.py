"""Stops that keep the books: a second Ctrl-C."""

from __future__ import annotations

import json
import signal
import time

import pytest
from faults import SECOND_CTRL_C_PAUSE, FaultSweep, cell, ledger_rows, wait_for
from test_sweep import XDIST

CELLS = {(f"demo__calc-{n}", arm) for n in (1, 2, 3) for arm in ("GOLD", "AGENT")}


def latest_run(rows):
    return [row for row in rows if row["run_id"] == rows[-1]["run_id"]]


@pytest.mark.parametrize("pause", [0, SECOND_CTRL_C_PAUSE], ids=["at-once", "a-moment-later"])
@pytest.mark.parametrize("xdist", XDIST)
def test_a_second_ctrl_c_hurries_the_stop_and_keeps_the_bookkeeping(suite, calc, xdist, pause):
    sweep = FaultSweep(suite, grace=3600)  # agents that only SIGKILL ends, and an hour of grace
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    workers = 2 if xdist else 1
    try:
        sweep.start("--arena-arms=GOLD,AGENT", *xdist)
        sweep.wait_for_agents(workers)
        sweep.signal(signal.SIGINT)
        # The stop is under way: every agent has had its SIGTERM (and carries on). Now Ctrl-C again,
        # at once or, as a person would, a moment later (the pause is the scenario, not a wait).
        wait_for(lambda: sweep.termed() >= sweep.started(), "the agents to get SIGTERM")
        time.sleep(pause)
        sweep.signal(signal.SIGINT)
        returncode = sweep.wait()
        left = sweep.agents()
    finally:
        sweep.kill_leftovers()
    output = sweep.output()
    assert returncode == pytest.ExitCode.INTERRUPTED, output
    assert left == [], "the second Ctrl-C kills every agent at once; none outlives the controller"
    assert "Traceback" not in output and "INTERNALERROR" not in output, output

    out = suite.path / "arena-out"
    assert not (out / "arena.lock").exists()
    rows = ledger_rows(out)
    assert len({cell(row) for row in rows}) == len(rows), "no cell recorded twice"
    interrupted = [row for row in rows if row["status"] == "interrupted"]
    assert len(interrupted) == workers and {row["arm"] for row in interrupted} == {"AGENT"}, rows
    assert all(row["usage"]["cost_usd"] is None for row in interrupted), "in flight: its spend is unknown"
    finished = {cell(row) for row in rows if row["status"] == "resolved"}
    assert {arm for _, arm in finished} <= {"GOLD"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run_id"] == rows[-1]["run_id"] and summary["rows"] == len(rows)
    assert {arm["arm"]: arm["interrupted"] for arm in summary["arms"]}["AGENT"] == workers
    assert (out / "predictions/GOLD.jsonl").is_file() == bool(finished)
    assert "KeyboardInterrupt" in output and "swe-arena results" in output

    # The unfinished cells run again, the finished ones are reused.
    sweep.release()
    resumed = suite.run("--arena-arms=GOLD,AGENT", "--arena-resume", *xdist)
    assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str()
    this_run = latest_run(ledger_rows(out))
    assert {cell(row) for row in this_run if not row.get("reused_from")} == CELLS - finished
    assert {cell(row) for row in this_run if row.get("reused_from")} == finished
    assert sweep.agents() == []
