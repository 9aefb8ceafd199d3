"""What a sweep hands a person: summary.json, report.html (in a real Chromium), JUnit properties,
and the ``swe-arena`` command (report, compare, status of a running sweep, export)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from helpers.arena import PRICED_CONFTEST, XDIST, swe_arena
from helpers.browser import Browser

from pytest_swe_arena.ledger.chain import seal, verify_ledger

# A real arm kind (registered through the hook) that does real work in the workspace; only what a
# model would have spent is stated by the arm. ``resolve`` picks the instances it fixes; the ``hold``
# ones finish only once the file named by $ARENA_TEST_RELEASE exists.


PRICED_TOML = """
[tool.swe_arena.arms.SOLO]
kind = "priced"
cost = 0.25
resolve = ["demo__calc-1"]
[tool.swe_arena.arms.SUP4]
kind = "priced"
cost = 1.5
tokens = 4000
resolve = ["demo__calc-1", "demo__calc-2", "demo__calc-3"]
[tool.swe_arena.arms.HELD]
kind = "priced"
cost = 0.5
hold = ["demo__calc-2"]
resolve = ["demo__calc-1", "demo__calc-2"]
"""


def summary_validator():
    import jsonschema

    schema = json.loads(resources.files("pytest_swe_arena").joinpath("schemas/summary.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture
def priced(suite, calc):
    suite.pytester.makeconftest(PRICED_CONFTEST)
    suite.arms_toml = PRICED_TOML
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    return suite


@pytest.mark.parametrize("xdist", XDIST)
def test_sweep_writes_summary_report_and_junit_properties(priced, xdist):
    result = priced.run("--arena-arms=SOLO,SUP4", "--junitxml=junit.xml", *xdist)
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines([
        "*swe-arena results*",
        "3 instances x 2 arms: 6 cells (95% CI: Wilson; n/a: not computable)",
        "",
        "arm * resolved * rate * 95% CI * USD * USD/res * tokens * tok/res * wall p50",
        "SOLO * 1/3 * 33.3% * 6.1-79.2% * 0.7500 * 0.7500 * 3,300 * 3,300 *s",
        "SUP4 * 3/3 * 100.0% * 43.9-100.0% * 4.5000 * 1.5000 * 12,300 * 4,100 *s",
        "",
        "paired (A vs B) * pairs * only A * only B * A-B pp * 95% CI (pp) * p exact * p Holm",
        "SOLO vs SUP4 * 3 * 0 * 2 * -66.7 * [[]-100.0, *[]] * 0.5000 * 0.5000",
        "tied with the best (SUP4; exact McNemar, Holm-adjusted p >= 0.05): SOLO, SUP4",
        "2 of 3 instances decide the comparison (1 resolved by every arm, 0 by none)",
        "",
        "out: */arena-out (run *)",
        "  ledger.jsonl",
        "  predictions/SOLO.jsonl",
        "  predictions/SUP4.jsonl",
        "  summary.json",
        "  report.html",
    ])
    summary = priced.summary()
    summary_validator().validate(summary)
    assert summary["run_id"] == priced.ledger()[0]["run_id"]
    assert [(arm["arm"], arm["resolved"], arm["cost_usd"]) for arm in summary["arms"]] == [
        ("SOLO", 1, 0.75), ("SUP4", 3, 4.5)]
    assert (priced.path / "arena-out/report.html").read_text().startswith("<!DOCTYPE html>")

    properties = junit_properties(priced.path / "junit.xml")
    assert properties["demo__calc-1[SOLO]"] == {
        "arena_status": "resolved", "arena_cost_usd": "0.25", "arena_tokens": "1100",
        "arena_patch": "patches/demo__calc-1.solo.patch"}
    assert properties["demo__calc-2[SOLO]"]["arena_status"] == "unresolved"
    assert len(properties) == 6 and all(len(p) == 4 for p in properties.values()), "each item once, no duplicates"


def junit_properties(path: Path) -> dict[str, dict[str, str]]:
    cases = ET.parse(path).getroot().iter("testcase")
    return {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")} for case in cases}


def test_reused_cells_carry_their_recorded_properties(priced):
    priced.run("--arena-arms=SOLO", "--junitxml=first.xml").assert_outcomes(passed=1, failed=2)
    priced.run("--arena-arms=SOLO", "--arena-resume", "--junitxml=resumed.xml").assert_outcomes(passed=1, failed=2)
    first, resumed = junit_properties(priced.path / "first.xml"), junit_properties(priced.path / "resumed.xml")
    assert resumed == first and len(resumed) == 3
    assert resumed["demo__calc-1[SOLO]"]["arena_patch"] == "patches/demo__calc-1.solo.patch"
    assert {row["reused_from"] is not None for row in priced.ledger()[3:]} == {True}


def test_report_html_of_a_gold_empty_sweep_in_chromium(suite, calc, tmp_path):
    suite.instances([calc.row(f"demo__calc-{n}") for n in (1, 2, 3)])
    suite.run("--arena-arms=GOLD,EMPTY").assert_outcomes(passed=3, failed=3)
    report = suite.path / "arena-out/report.html"
    with Browser(tmp_path / "chromium-profile") as browser:
        browser.open(report)
        page = browser.evaluate("""({
            title: document.title,
            arms: [...document.querySelectorAll('#arms tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
            pairs: [...document.querySelectorAll('#pairs tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
            header: [...document.querySelectorAll('#matrix thead th')].map(c => c.textContent),
            matrix: [...document.querySelectorAll('#matrix tbody tr')].map(r => ({
                instance: r.querySelector('th').textContent,
                marks: [...r.querySelectorAll('td')].map(td => {
                    const mark = td.querySelector('.st');
                    return {status: mark.className, colour: getComputedStyle(mark).backgroundColor,
                            patch: mark.href || null, log: td.querySelector('a.log').href};
                }),
            })),
            points: [...document.querySelectorAll('#rate-vs-cost g.arm-point')].map(g => g.dataset.arm),
            boxes: [...document.querySelectorAll('#cost-distribution g.box, #token-distribution g.box')].length,
            external: [...document.querySelectorAll('[src], link[href], script')].length,
            width: document.documentElement.scrollWidth,
        })""")
        screenshot = browser.screenshot(tmp_path / "report.png")
        errors = browser.errors
    assert errors == [], errors
    assert page["title"].startswith("swe-arena report")
    assert [row[:4] for row in page["arms"]] == [["GOLD", "3 / 3", "100.0%", "43.9-100.0%"],
                                                 ["EMPTY", "0 / 3", "0.0%", "0.0-56.1%"]]
    assert page["pairs"] == [["GOLD vs EMPTY", "3", "100.0%", "0.0%", "0", "3", "0", "0", "0.2500"]]
    assert page["header"] == ["instance", "GOLD", "EMPTY"]
    assert [row["instance"] for row in page["matrix"]] == ["demo__calc-1", "demo__calc-2", "demo__calc-3"]
    for row in page["matrix"]:
        gold, empty = row["marks"]
        assert gold["status"] == "st st-resolved" and empty["status"] == "st st-unresolved"
        assert gold["colour"] != empty["colour"], "statuses are told apart by colour"
        for link in (gold["patch"], empty["patch"], gold["log"], empty["log"]):
            assert Path(unquote(urlparse(link).path)).exists(), link
        assert gold["patch"].endswith(f"/arena-out/patches/{row['instance']}.gold.patch")
        assert Path(unquote(urlparse(gold["patch"]).path)).read_text() == calc.patch
        assert empty["log"].endswith(f"/arena-out/runs/{row['instance']}/EMPTY/")
    assert page["points"] == ["GOLD", "EMPTY"] and page["boxes"] == 4
    assert page["external"] == 0, "self-contained: no scripts, no external assets"
    assert page["width"] <= 1280, "no horizontal scrolling at 1280 px"
    assert screenshot.stat().st_size > 10_000 and screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_swe_arena_report_rebuilds_the_same_summary_and_export_writes_predictions(priced):
    priced.run("--arena-arms=SOLO,SUP4", "--arena-max-usd=100").assert_outcomes(passed=4, failed=2)
    out = priced.path / "arena-out"
    written = priced.summary()
    assert written["budget"]["spent"]["usd"] == 5.25 and written["budget"]["exhausted"] == {}
    (out / "summary.json").unlink()
    (out / "report.html").unlink()
    shutil.rmtree(out / "predictions")

    rebuilt = swe_arena("report", out)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads((out / "summary.json").read_text()) == written, "the plugin and the command share one summary"
    assert (out / "report.html").is_file()
    assert "SUP4 3/3 100.0% 43.9-100.0% 4.5000".split() in [line.split()[:5] for line in rebuilt.stdout.splitlines()]
    assert "budget: $5.2500 of $100 and 15,600 tokens spent" in rebuilt.stdout.splitlines()
    assert rebuilt.stdout.rstrip().splitlines()[-3:] == ["  summary.json", "  report.html", "  viewer/index.html"]

    exported = swe_arena("export", out, "--arm", "SUP4")
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.split() == [str(out / "predictions/SUP4.jsonl")]
    predictions = [json.loads(line) for line in (out / "predictions/SUP4.jsonl").read_text().splitlines()]
    assert [(p["instance_id"], p["model_name_or_path"]) for p in predictions] == [
        (f"demo__calc-{n}", "SUP4") for n in (1, 2, 3)]
    assert predictions[0]["model_patch"] == (out / "patches/demo__calc-1.sup4.patch").read_text()

    # --to DIR: the bundle, every arm's predictions in one file, the rows, the ATIF files (a priced arm leaves no
    # record of an agent: none, and its rows say why).
    bundle = swe_arena("export", out, "--to", priced.path / "bundle")
    assert bundle.returncode == 0, bundle.stderr
    assert bundle.stdout.split() == [str(priced.path / "bundle" / name)
                                     for name in ("predictions.jsonl", "ledger.jsonl")]
    rows = [json.loads(line) for line in (priced.path / "bundle/ledger.jsonl").read_text().splitlines()]
    assert len(rows) == 6
    assert all(row["details"]["atif_missing"].startswith("the run dir holds no record") for row in rows)
    every = [json.loads(line) for line in (priced.path / "bundle/predictions.jsonl").read_text().splitlines()]
    assert [(p["model_name_or_path"], p["instance_id"]) for p in every] == [
        ("SOLO", f"demo__calc-{n}") for n in (1, 2, 3)] + [("SUP4", f"demo__calc-{n}") for n in (1, 2, 3)]

    unknown = swe_arena("export", out, "--arm", "SUP8")
    assert unknown.returncode == 1
    assert f"no rows for arm 'SUP8' in {out / 'ledger.jsonl'}; arms there: SOLO, SUP4" in unknown.stderr
    missing = swe_arena("report", priced.path / "nowhere")
    assert missing.returncode == 1 and "nowhere/ledger.jsonl does not exist" in missing.stderr


def test_swe_arena_compare_two_sweeps(priced):
    priced.run("--arena-arms=SOLO,SUP4", "--arena-out=before").assert_outcomes(passed=4, failed=2)
    priced.arms_toml = PRICED_TOML.replace('cost = 0.25\nresolve = ["demo__calc-1"]',
                                           'cost = 0.5\nresolve = ["demo__calc-2", "demo__calc-3"]')
    priced.run("--arena-arms=SOLO,SUP4", "--arena-out=after").assert_outcomes(passed=5, failed=1)
    result = swe_arena("compare", "before", "after", cwd=priced.path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    rows = [line.split() for line in lines if line.startswith(("SOLO ", "SUP4 "))]
    assert rows == [
        # on common cells: cells, rate A, rate B, delta, USD A, USD B, delta, fixed, broken, McNemar p
        ["SOLO", "3", "33.3%", "66.7%", "+33.3pp", "0.7500", "1.5000", "+0.7500", "2", "1", "1.0000"],
        ["SUP4", "3", "100.0%", "100.0%", "+0.0pp", "4.5000", "4.5000", "+0.0000", "0", "0", "1.0000"],
        # all cells: arm, cells A, rate A, cells B, rate B, delta, USD A, USD B, delta
        ["SOLO", "3", "33.3%", "3", "66.7%", "+33.3pp", "0.7500", "1.5000", "+0.7500"],
        ["SUP4", "3", "100.0%", "3", "100.0%", "+0.0pp", "4.5000", "4.5000", "+0.0000"],
    ]
    assert "warning:" not in result.stdout, "the same cells on both sides: nothing to warn about"
    assert lines[-4:] == ["SOLO: 2 fixed in B (+), 1 broken in B (-)",
                          "  + demo__calc-2", "  + demo__calc-3", "  - demo__calc-1"]


def test_swe_arena_status_follows_a_sweep_running_in_another_process(priced, monkeypatch):
    release = priced.path / "release"
    monkeypatch.setenv("ARENA_TEST_RELEASE", str(release))
    # A fast heartbeat, so that the lock soon says the held cell runs (only the heartbeat rewrites it).
    priced.ini_lines = ["arena_lock_heartbeat = 0.5"]
    priced.write_config()
    log = open(priced.path / "sweep.log", "w")
    sweep = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--arena-arms=HELD"],
                             cwd=priced.path, stdout=log, stderr=subprocess.STDOUT)
    out = priced.path / "arena-out"
    progress = re.compile(r"  cells      (?P<done>\d) done, (?P<running>\d) running, (?P<left>\d) left of 3")
    seen = []
    try:
        # demo__calc-1 is done, demo__calc-2 is held until the test releases it, demo__calc-3 waits.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and sweep.poll() is None:
            status = swe_arena("status", out)
            seen.append(status.stdout)
            cells = progress.search(status.stdout)
            if status.returncode == 0 and cells and cells.groups() == ("1", "1", "1"):
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"never saw the sweep running with one cell done and one running: {seen}")
        lines = status.stdout.splitlines()
        assert lines[0].startswith("sweep ") and lines[0].endswith(f"in {out}: running")
        assert f"  owner      pid {sweep.pid} on " in lines[1] and "(this machine)" in lines[1]
        assert lines[3].startswith("  heartbeat  ") and lines[3].endswith("s ago")
        assert lines[5] == "  spent      $0.5000, 1,100 tokens"
        assert "results so far:" in lines
        assert lines[-1].split()[0] == "HELD"
    finally:
        release.touch()
        assert sweep.wait(timeout=300) == pytest.ExitCode.TESTS_FAILED, (priced.path / "sweep.log").read_text()
        log.close()
    finished = swe_arena("status", out)
    assert finished.returncode == 1
    assert finished.stdout.splitlines()[0].startswith(f"no sweep is running in {out} (no arena.lock); the last run")
    assert "recorded 3 cells" in finished.stdout


def live_lock(out: Path, heartbeat_age: float = 0.0) -> None:
    """A lock as a running sweep on this machine writes it (this test process plays the owner)."""
    import os
    import socket
    from datetime import UTC, datetime, timedelta

    beat = (datetime.now(UTC) - timedelta(seconds=heartbeat_age)).isoformat()
    out.mkdir(parents=True, exist_ok=True)
    (out / "arena.lock").write_text(json.dumps({
        "pid": os.getpid(), "host": socket.gethostname(), "run_id": "r-live", "started_at": beat,
        "heartbeat_at": beat, "heartbeat_seconds": 20, "stale_seconds": 90, "progress": {"total": 3}}))


def test_swe_arena_export_skips_unreadable_rows_and_says_why(priced):
    priced.run("--arena-arms=SOLO,SUP4").assert_outcomes(passed=4, failed=2)
    out = priced.path / "arena-out"
    ledger = out / "ledger.jsonl"
    run_id = json.loads(ledger.read_text().splitlines()[-1])["run_id"]
    (out / "patches/demo__calc-1.sup4.patch").unlink()
    # Sealed into the chain, as the writer seals rows: the row is unreadable, not forged.
    sealed, _ = seal(json.dumps({"run_id": run_id, "instance_id": "demo__calc-9", "status": "resolved",
                                 "patch_file": "patches/demo__calc-9.x.patch"}, sort_keys=True),
                     verify_ledger(ledger).head)
    with open(ledger, "a") as rows:
        rows.write(sealed + "\n")
    exported = swe_arena("export", out)
    assert exported.returncode == 0, exported.stderr
    assert "Traceback" not in exported.stderr
    assert (f"swe-arena: warning: {ledger}: skipping demo__calc-1[SUP4]: cannot read its patch "
            "patches/demo__calc-1.sup4.patch: No such file or directory") in exported.stderr.splitlines()
    assert (f"swe-arena: warning: {ledger}: skipping a row without 'arm' or 'instance_id' "
            "(patch_file 'patches/demo__calc-9.x.patch')") in exported.stderr.splitlines()
    sup4 = (out / "predictions/SUP4.jsonl").read_text().splitlines()
    assert [json.loads(line)["instance_id"] for line in sup4] == ["demo__calc-2", "demo__calc-3"]

    empty = priced.path / "empty"
    empty.mkdir()
    (empty / "ledger.jsonl").write_text("")
    for command in ("export", "report"):
        result = swe_arena(command, empty)
        assert result.returncode == 1 and result.stderr.strip() == f"swe-arena: {empty / 'ledger.jsonl'} has no rows"


def test_swe_arena_report_and_export_refuse_the_out_dir_of_a_live_sweep(priced):
    priced.run("--arena-arms=SOLO").assert_outcomes(passed=1, failed=2)
    out = priced.path / "arena-out"
    live_lock(out)
    for command in ("report", "export"):
        refused = swe_arena(command, out)
        assert refused.returncode == 2, refused.stdout
        assert f"swe-arena {command}: {out} is in use by a running sweep (pid " in refused.stderr
        assert "run r-live" in refused.stderr and "swe-arena status" in refused.stderr
    live_lock(out, heartbeat_age=600)  # its owner's stale limit is 90 s: the sweep is dead
    assert swe_arena("report", out).returncode == 0


def test_swe_arena_status_of_a_ledger_without_a_readable_row(tmp_path):
    (tmp_path / "ledger.jsonl").write_text("{torn\n")
    status = swe_arena("status", tmp_path)
    assert status.returncode == 1
    assert status.stdout.strip() == f"no sweep is running in {tmp_path} (no arena.lock); " \
                                    f"{tmp_path / 'ledger.jsonl'} has no readable row"


def test_swe_arena_status_watch_ends_quietly_on_ctrl_c_and_on_a_closed_pipe(tmp_path):
    import signal

    live_lock(tmp_path)
    command = [sys.executable, "-m", "pytest_swe_arena.cli", "status", str(tmp_path), "--watch", "0.1"]
    watch = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert watch.stdout is not None and watch.stdout.readline().startswith("sweep r-live in ")
    watch.send_signal(signal.SIGINT)
    _, errors = watch.communicate(timeout=120)
    assert watch.returncode == 130 and errors == ""

    piped = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert piped.stdout is not None and piped.stdout.readline().startswith("sweep r-live in ")
    piped.stdout.close()  # `swe-arena status OUT --watch 1 | head -1`
    assert piped.wait(timeout=120) == 0
    assert piped.stderr is not None and piped.stderr.read() == ""
