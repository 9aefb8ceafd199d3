"""Corrupt side files of an out dir (calibration.json, arena.lock) and an out dir that is a file.

Each gets a clear warning or usage error that names the file and says what to do;
nothing crashes, and nothing is taken over silently.
"""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from helpers.arena import XDIST

LONG_AGO = 10 * 24 * 3600  # seconds: older than any stale limit


def lock_at(out, content: bytes | str, written_ago: float = 0.0):
    """Write ``arena.lock`` with ``content``, its file last written ``written_ago`` seconds ago."""
    out.mkdir(parents=True, exist_ok=True)
    lock = out / "arena.lock"
    lock.write_bytes(content if isinstance(content, bytes) else content.encode())
    moment = time.time() - written_ago
    os.utime(lock, (moment, moment))
    return lock


def owner(**fields):
    now = datetime.now(UTC).isoformat()
    return {"pid": 1, "host": "elsewhere", "run_id": "r-other", "started_at": now, "heartbeat_at": now,
            "progress": {}, **fields}


# -- calibration.json -----------------------------------------------------------------------


@pytest.mark.parametrize("xdist", XDIST)
def test_a_calibration_that_is_not_utf8_is_a_usage_error_naming_it(suite, calc, xdist):
    suite.instances([calc.row()])
    path = suite.path / "arena-out/calibration.json"
    path.parent.mkdir()
    path.write_bytes(b'\xff{"failed": []}')
    result = suite.run("--arena-arms=GOLD", "--arena-calibrated-only", *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {path}: cannot read calibration: not UTF-8 text (invalid start byte at "
                                 "byte 0); run the sweep with --arena-calibrate to write it again (or delete it)"])
    assert "Traceback" not in result.stderr.str()


def test_a_calibration_that_is_not_utf8_is_replaced_with_a_warning(suite, calc):
    suite.instances([calc.row()])
    path = suite.path / "arena-out/calibration.json"
    path.parent.mkdir()
    path.write_bytes(b"\xff\xfe not a calibration")
    result = suite.run("--arena-calibrate")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"warning: {path}: cannot read calibration: not UTF-8 text*; replaced by this "
                                 "run's verdicts (earlier verdicts are lost)"])
    assert json.loads(path.read_text())["instances"]["demo__calc-1"]["ok"] is True


@pytest.mark.parametrize("failed", ["demo__calc-1", {"demo__calc-1": True}, ["demo__calc-1", 7]])
def test_a_calibration_whose_failed_list_is_not_a_list_of_ids_is_a_usage_error(suite, calc, failed):
    suite.instances([calc.row()])
    path = suite.path / "arena-out/calibration.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"instances": {}, "failed": failed}))
    result = suite.run("--arena-arms=GOLD", "--arena-calibrated-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, "never iterated by character or coerced"
    result.stderr.fnmatch_lines([f"ERROR: {path}: 'failed' must be a list of instance ids, not "
                                 f"{glob.escape(json.dumps(failed))}; run the sweep with --arena-calibrate to write it "
                                 "again*"])


# -- arena.lock -----------------------------------------------------------------------------


@pytest.mark.parametrize("content, defect", [
    (b"{\"pid\": 1, \"host\": ", "is not valid JSON (Expecting value: line 1 column 20 (char 19))"),
    (b"\xff\xfe\x00", "is not UTF-8 text"),
    (b"[1, 2]", "holds a JSON list, not a lock's object"),
])
def test_a_corrupt_lock_is_taken_over_with_a_warning_once_it_is_old(suite, calc, content, defect):
    suite.instances([calc.row()])
    lock = lock_at(suite.path / "arena-out", content, written_ago=LONG_AGO)
    result = suite.run("--arena-arms=GOLD")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"swe-arena: taking over the lock of {lock.parent}: {lock} {defect}, and it was "
                                 "last written * s ago"])
    assert not lock.exists(), "replaced by this sweep's lock, released at its end"


def test_a_corrupt_lock_written_recently_is_refused_with_what_to_do(suite, calc):
    suite.instances([calc.row()])
    suite.ini_lines = ["arena_lock_stale = 3600"]  # "recently": whatever the machine's speed
    lock = lock_at(suite.path / "arena-out", "{not json")
    result = suite.run("--arena-arms=GOLD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: {lock.parent} may be in use by another sweep: {lock} is not valid JSON (*), and {lock} was "
        f"written * s ago. If no sweep is running there, delete {lock}; otherwise wait for it (the lock counts as "
        "stale 3600 s after its last write), stop it, or use another --arena-out"
    ])
    assert lock.read_text() == "{not json", "left alone"


def test_a_lock_whose_pid_is_not_a_number_is_no_internal_error(suite, calc):
    suite.instances([calc.row()])
    out = suite.path / "arena-out"
    content = json.dumps(owner(pid="4x2", host=socket.gethostname()))
    suite.ini_lines = ["arena_lock_stale = 3600"]
    lock_at(out, content)
    refused = suite.run("--arena-arms=GOLD")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stderr.str()
    refused.stderr.fnmatch_lines([f"ERROR: {out} may be in use by another sweep: its pid '4x2' is not a process id, "
                                  f"and {out / 'arena.lock'} was written * s ago. If no sweep is running there, "
                                  f"delete {out / 'arena.lock'}*"])
    assert "INTERNALERROR" not in refused.stdout.str() + refused.stderr.str()

    lock_at(out, content, written_ago=LONG_AGO)
    taken = suite.run("--arena-arms=GOLD")
    taken.assert_outcomes(passed=1)
    taken.stdout.fnmatch_lines(["*taking over the lock of * from run r-other (pid 4x2 on *): its pid '4x2' is not a "
                                "process id, and the lock was last written * s ago"])


def test_a_lock_from_a_host_whose_clock_is_ahead_is_judged_by_the_file_age(suite, calc):
    suite.instances([calc.row()])
    out = suite.path / "arena-out"
    ahead = owner(heartbeat_at=(datetime.now(UTC) + timedelta(days=365)).isoformat())
    # Its owner no longer rewrites it: the file's age says so, whatever its heartbeat claims.
    lock_at(out, json.dumps(ahead), written_ago=LONG_AGO)
    taken = suite.run("--arena-arms=GOLD")
    taken.assert_outcomes(passed=1)
    taken.stdout.fnmatch_lines(["*taking over the lock of * from run r-other (pid 1 on elsewhere): its heartbeat "
                                "lies * s in the future (the clock of elsewhere is ahead of this one), and the lock "
                                "was last written * s ago"])

    # A lock rewritten recently may belong to a live sweep on that host: refused, saying what to do.
    suite.ini_lines = ["arena_lock_stale = 3600"]
    lock_at(out, json.dumps(ahead))
    refused = suite.run("--arena-arms=GOLD")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"ERROR: {out} may be in use by another sweep: its heartbeat lies * s in the "
                                  "future (the clock of elsewhere is ahead of this one), and * was written * s ago. "
                                  "If no sweep is running there, delete *arena.lock; otherwise wait for it*"])


def test_content_doubt_and_the_file_age():
    from pytest_swe_arena.ledger.lock import content_doubt, stale_reason

    now = datetime.now(UTC)
    assert content_doubt(owner()) is None
    assert content_doubt(owner(pid=True)) == "its pid True is not a process id"
    assert content_doubt(owner(heartbeat_at="yesterday")) == "its heartbeat 'yesterday' is not a time"
    ahead = owner(heartbeat_at=(now + timedelta(hours=1)).isoformat())
    assert content_doubt(ahead).startswith("its heartbeat lies 3600 s in the future")  # type: ignore[union-attr]
    assert stale_reason(ahead) is None, "without the file's age a doubtful lock counts as live"
    assert stale_reason(ahead, written_ago=10) is None
    assert stale_reason(ahead, written_ago=100).endswith("and the lock was last written 100 s ago")  # type: ignore
    gone = owner(host=socket.gethostname(), pid=2**22 + 12345, heartbeat_at=(now + timedelta(hours=1)).isoformat())
    assert stale_reason(gone) == f"its pid {2**22 + 12345} is gone", "on this host the pid still decides"


def test_status_names_a_corrupt_lock(tmp_path):
    lock = lock_at(tmp_path / "out", "{torn")
    status = subprocess.run([sys.executable, "-m", "pytest_swe_arena.cli", "status", str(tmp_path / "out")],
                            capture_output=True, text=True, check=False)
    assert f"{lock} is not valid JSON" in status.stdout, status.stdout + status.stderr
    assert "delete it" in status.stdout


# -- --arena-out ----------------------------------------------------------------------------


@pytest.mark.parametrize("xdist", XDIST)
def test_an_out_dir_that_is_a_file_is_a_usage_error(suite, calc, xdist):
    suite.instances([calc.row()])
    (suite.path / "results.txt").write_text("my notes\n")
    result = suite.run("--arena-arms=GOLD", "--arena-out=results.txt", *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: option --arena-out: {suite.path / 'results.txt'} is a file, not a directory; "
                                 "give a directory for the sweep's outputs (it is created if missing)"])
    under = suite.run("--arena-arms=GOLD", "--arena-out=results.txt/out")
    assert under.ret == pytest.ExitCode.USAGE_ERROR
    under.stderr.fnmatch_lines([f"ERROR: option --arena-out: {suite.path / 'results.txt/out'} lies under "
                                f"{suite.path / 'results.txt'}, which is a file, not a directory*"])
    assert (suite.path / "results.txt").read_text() == "my notes\n"


STATUS_AFTER_EACH_CELL = '''
import pathlib
from pytest_swe_arena.cli.status import sweep_status

def pytest_arena_cell_finished(row, config):
    out = pathlib.Path(str(config.rootpath)) / "arena-out"
    lines, live = sweep_status(out)
    with open(pathlib.Path(str(config.rootpath)) / "status.log", "a") as log:
        log.write(f"{row['arm']} live={live}\\n" + "\\n".join(lines) + "\\n=== end\\n")
'''


@pytest.mark.parametrize("xdist", XDIST)
def test_status_counts_each_cell_as_it_finishes_not_at_the_next_heartbeat(suite, calc, xdist):
    """The lock is rewritten after every cell (and once the cells are collected): `swe-arena status` read
    when a cell has just finished counts it, well before the 20 s heartbeat."""
    suite.instances([calc.row(), calc.row("demo__calc-2")])
    suite.pytester.makeconftest(STATUS_AFTER_EACH_CELL)
    suite.run("--arena-arms=GOLD", *xdist)
    assert len(suite.ledger()) == 2
    seen = (suite.path / "status.log").read_text().split("=== end\n")[:-1]
    assert len(seen) == 2, seen
    assert "not collected yet" not in "".join(seen)
    assert "  cells      1 done, " in seen[0], seen[0]
    assert "of 2" in seen[0], seen[0]
    assert "  cells      2 done, 0 running, 0 left of 2" in seen[1], seen[1]


@pytest.mark.parametrize("xdist", XDIST)
def test_a_sweep_into_an_out_dir_of_an_earlier_sweep_says_so_and_removes_its_other_predictions(suite, calc, xdist):
    suite.instances([calc.row()])
    first = suite.run("--arena-arms=GOLD,EMPTY", *xdist)
    assert "holds earlier sweeps" not in first.stdout.str()
    predictions = suite.path / "arena-out/predictions"
    assert sorted(path.name for path in predictions.iterdir()) == ["EMPTY.jsonl", "GOLD.jsonl"]
    second = suite.run("--arena-arms=EMPTY", *xdist)
    out = suite.path / "arena-out"
    second.stdout.fnmatch_lines([f"swe-arena: {out} holds earlier sweeps ({out / 'ledger.jsonl'}): this sweep's rows "
                                 "are added after theirs and its outputs replace theirs; --arena-resume reuses *",
                                 "warning: removed predictions/GOLD.jsonl: an earlier sweep's, of arms or trials not "
                                 "in this one (their rows stay in the ledger, under their run ids)"])
    assert sorted(path.name for path in predictions.iterdir()) == ["EMPTY.jsonl"]
    assert {row["arm"] for row in suite.ledger()} == {"GOLD", "EMPTY"}, "the ledger keeps every run"
    resumed = suite.run("--arena-arms=EMPTY", "--arena-resume", *xdist)
    assert "holds earlier sweeps" not in resumed.stdout.str()
