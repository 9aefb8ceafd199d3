"""Stops that keep the books: a second Ctrl-C, and a disk that fills up in the middle of a sweep."""

from __future__ import annotations

import errno
import json
import re
import signal
import time

import pytest
from helpers.arena import XDIST
from helpers.faults import SECOND_CTRL_C_PAUSE, FaultSweep, cell, fill, ledger_lines, ledger_rows, small_disk, wait_for

from pytest_swe_arena.ledger.chain import without_seal

CELLS = {(f"demo__calc-{n}", arm) for n in (1, 2, 3) for arm in ("GOLD", "AGENT")}
FAILURE = "error: swe-arena could not write everything to "


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
    # pytest's banner says the sweep was interrupted: xdist's KeyboardInterrupt, or the cell the signal stopped
    banner = r"!{3,} (KeyboardInterrupt: SIGINT|Interrupted: command AGENT was interrupted \(SIGINT\)) !{3,}"
    assert re.search(banner, output), output
    assert "swe-arena results" in output

    # The unfinished cells run again, the finished ones are reused.
    sweep.release()
    resumed = suite.run("--arena-arms=GOLD,AGENT", "--arena-resume", *xdist)
    assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str()
    this_run = latest_run(ledger_rows(out))
    assert {cell(row) for row in this_run if not row.get("reused_from")} == CELLS - finished
    assert {cell(row) for row in this_run if row.get("reused_from")} == finished
    assert sweep.agents() == []


@pytest.mark.parametrize("xdist", XDIST)
def test_a_full_disk_keeps_what_was_recorded_and_ends_with_one_error(suite, calc, tmp_path, xdist):
    sweep = FaultSweep(suite, grace=1)
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    workers = 2 if xdist else 1
    with small_disk(tmp_path / "disk") as disk:
        out = disk / "out"
        try:
            sweep.start("--arena-arms=GOLD,AGENT", f"--arena-out={out}", *xdist)
            sweep.wait_for_agents(workers)
            before = (out / "ledger.jsonl").read_bytes() if (out / "ledger.jsonl").exists() else b""
            filler = fill(disk)
            sweep.release()  # the agents fix the bug: their cells end, and their rows meet a full disk
            returncode = sweep.wait()
            left = sweep.agents()
        finally:
            sweep.kill_leftovers()
        output = sweep.output()
        assert returncode != pytest.ExitCode.OK, output
        assert left == []
        assert "Traceback" not in output and "INTERNALERROR" not in output, output
        assert not (out / "arena.lock").exists()

        ledger = (out / "ledger.jsonl").read_bytes() if (out / "ledger.jsonl").exists() else b""
        assert ledger.startswith(before), "nothing recorded before the disk filled up is lost"
        rows = ledger_rows(out)  # every line parses: none is torn
        recorded = {cell(row) for row in rows}
        assert len(recorded) == len(rows)

        # One error, naming the cells whose rows are not written, and the other files.
        assert output.count(FAILURE) == 1, output
        listed = re.search(r"row\(s\) not written \(No space left on device\), so these cells are not recorded: "
                           r"(.+)\n", output)
        assert listed, output
        missing = {(match[1], match[2]): match[3]
                   for match in re.finditer(r"([\w.-]+)\[(\w+)\] \((\w+)\)", listed[1])}
        assert "resolved" in missing.values(), "the cell that met the full disk is named, with its status"
        assert not set(missing) & recorded, "a row is either in the ledger or named as not written"
        assert sum(arm == "AGENT" for _, arm in recorded | set(missing)) >= workers
        assert f"not written: {out / 'summary.json'} (No space left on device)" in output
        assert "run the sweep again with --arena-resume" in output

        # With space again, resume runs exactly what is not recorded as final.
        filler.unlink()
        final = {cell(row) for row in rows if row["status"] == "resolved"}
        resumed = suite.run("--arena-arms=GOLD,AGENT", f"--arena-out={out}", "--arena-resume", *xdist)
        assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str()
        assert "torn" not in resumed.stderr.str()
        this_run = latest_run(ledger_rows(out))
        assert {cell(row) for row in this_run if not row.get("reused_from")} == CELLS - final
        assert json.loads((out / "summary.json").read_text())["run_id"] == this_run[-1]["run_id"]


def test_a_row_that_does_not_fit_is_absent_not_torn(tmp_path):
    from pytest_swe_arena.ledger.writer import LedgerWriter, RowNotWritten

    with small_disk(tmp_path / "disk", size="1m") as disk:
        writer = LedgerWriter(disk / "out", "r1", 1)
        first = {"instance_id": "demo__calc-1", "arm": "GOLD", "status": "resolved", "pad": "x" * 5000}
        writer.append(first)
        before = writer.path.read_bytes()
        fill(disk)  # the ledger's last block still has room for part of the next row: a short write
        with pytest.raises(RowNotWritten) as failure:
            writer.append({"instance_id": "demo__calc-2", "arm": "GOLD", "status": "resolved", "pad": "y" * 10000})
        assert failure.value.error.errno == errno.ENOSPC
        assert str(failure.value) == f"demo__calc-2[GOLD]: [Errno 28] No space left on device: '{writer.path}'"
        assert writer.path.read_bytes() == before, "cut back to the last whole row"
        assert writer.rows == [first]
        assert [without_seal(json.loads(line)) for line in ledger_lines(writer.out)] == [first]  # whole, sealed


def test_a_file_that_does_not_fit_leaves_no_temp_file_and_names_itself(tmp_path):
    from pytest_swe_arena.ledger.writer import write_atomic

    with small_disk(tmp_path / "disk", size="1m") as disk:
        fill(disk)
        target = disk / "out" / "summary.json"
        with pytest.raises(OSError) as failure:
            write_atomic(target, "z" * 100_000)
        assert failure.value.errno == errno.ENOSPC and failure.value.filename == str(target)
        assert list(target.parent.iterdir()) == [], "no temp file left behind"
