"""The integrity record of a cell (issue 30): what a hostile agent tried shows in its row, the summary and the viewer,
and never changes the verdict.

Each attack is a real process (``tests/data/hostile/integrity_probes.py``) in the real sandbox, graded on a fresh
tree; the flags are computed by the harness from the run dir, the patch and what the patch dropped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.agents import arm_table
from helpers.browser import Browser

from pytest_swe_arena.cell.sandbox import probe_bwrap
from pytest_swe_arena.grading.integrity import cell_record, history_probe_flags, only_tests_flag

HOSTILE = Path(__file__).parents[1] / "data" / "hostile"
ATTACKS = {"HISTORY": "history", "TEST_EDIT": "test-edit", "CONFTEST": "conftest"}

needs_bwrap = pytest.mark.skipif(not probe_bwrap().works, reason=f"bwrap does not work here: {probe_bwrap().problem}")


def flags_of(row: dict) -> list[dict]:
    return row["details"].get("integrity") or []


@needs_bwrap
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_history_probe_a_test_edit_and_a_conftest_only_patch_are_flagged_in_row_summary_and_viewer(
        suite, calc, workers, tmp_path):
    suite.instances([calc.row()])
    suite.arms_toml = "".join(arm_table(name, "command", command=[sys.executable, str(HOSTILE / "integrity_probes.py"),
                                                                  attack])
                              for name, attack in ATTACKS.items())
    result = suite.run(f"--arena-arms=GOLD,{','.join(ATTACKS)}", *workers)
    rows = {row["arm"]: row for row in suite.ledger()}
    assert rows["GOLD"]["sandbox"] == "bwrap" and rows["HISTORY"]["sandbox"] == "bwrap"
    assert flags_of(rows["GOLD"]) == []  # a clean cell carries no flag

    history = flags_of(rows["HISTORY"])
    assert rows["HISTORY"]["status"] == "resolved", (rows["HISTORY"]["error"], result.stdout.str()[-2000:])
    seen = {flag["detail"].split("`")[1] for flag in history if flag["kind"] == "git_history_probe"}
    assert seen == {"git log --all --oneline", "git reflog", "git log -Sreturn a * b --oneline",
                    "git show 0123456789abcdef0123456789abcdef01234567"}, history
    assert all(flag["path"] == "stderr.log" for flag in history)

    edit = rows["TEST_EDIT"]
    assert edit["status"] == "resolved"  # the flag never changes the verdict
    assert [(flag["kind"], flag["path"]) for flag in flags_of(edit)] == [("test_edit_dropped", "tests/test_ops.py")]

    conftest = rows["CONFTEST"]
    assert conftest["status"] == "unresolved"  # graded with base's test-run files: the conftest never ran
    assert sorted((flag["kind"], flag["path"]) for flag in flags_of(conftest)) == [
        ("test_edit_dropped", "conftest.py"), ("tests_only_patch", "conftest.py")]

    arms = {arm["arm"]: arm for arm in suite.summary()["arms"]}
    assert arms["GOLD"]["integrity_flagged"] == 0
    assert arms["HISTORY"]["integrity_flags"] == {"git_history_probe": 1}
    assert arms["TEST_EDIT"]["integrity_flagged"] == 1 and arms["TEST_EDIT"]["integrity_flagged_resolved"] == 1
    assert arms["CONFTEST"]["integrity_flags"] == {"test_edit_dropped": 1, "tests_only_patch": 1}

    # The viewer's cell pages (``arenaReceive("cell", PAGE)`` scripts) carry the same flags.
    pages = {}
    for path in (suite.path / "arena-out" / "viewer" / "data" / "cells").rglob("*.js"):
        text = path.read_text()
        page = json.loads(text[text.index(",") + 1:text.rindex(")")])
        pages[page["arm"]] = page
    for arm in ("GOLD", *ATTACKS):
        assert pages[arm]["integrity"] == (flags_of(rows[arm]) or None), arm
    if not workers:  # once, in a real Chromium: the cell page's flag table
        with Browser(tmp_path / "chromium-profile") as browser:
            browser.open(suite.path / "arena-out" / "viewer" / "cell.html", "cells/demo__calc-1/CONFTEST/1")
            browser.wait_until("document.body.dataset.ready === '1' && document.title.includes('CONFTEST')")
            shown = browser.evaluate("[...document.querySelectorAll('#integrity-table tbody tr')]"
                                     ".map(r => [...r.cells].map(c => c.textContent))")
        assert sorted(row[:2] for row in shown) == [["test_edit_dropped", "conftest.py"],
                                                    ["tests_only_patch", "conftest.py"]], shown

def test_history_probes_are_read_from_the_agents_logs_not_the_harnesss_and_known_objects_pass():
    logs = {"stderr.log": "$ git log -5\n$ git show abc1234\n$ git --no-pager log --branches\n",
            "events.jsonl": '{"tool":"bash","command":"git fsck --lost-found"}\n{"command":"git fsck"}\n',
            "prompt.txt": "git reflog", "verify.log": "git fetch origin"}
    flags = history_probe_flags(logs, known=lambda name: name == "abc1234")
    # A command is shown without git's global options.
    assert [(flag.path, flag.detail.split("`")[1]) for flag in flags] == [
        ("events.jsonl", "git fsck --lost-found"), ("stderr.log", "git log --branches")]


def test_a_code_change_beside_a_test_edit_is_not_a_tests_only_patch():
    code = b"diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
    setup = b"diff --git a/setup.cfg b/setup.cfg\n--- a/setup.cfg\n+++ b/setup.cfg\n"
    excluded = [{"path": "tests/test_ops.py", "added": 1, "removed": 0}]
    assert only_tests_flag(code, excluded) == []
    assert [flag.kind for flag in only_tests_flag(setup, excluded)] == ["tests_only_patch"]
    assert only_tests_flag(b"", []) == []  # an empty patch is unresolved, not flagged


def test_refused_connections_from_the_network_policy_become_flags():
    flags = cell_record({}, None, {"network_refused": [{"host": "github.com", "port": 443, "count": 3}]})
    assert [(flag.kind, flag.path) for flag in flags] == [("network_refused", "github.com:443")]
    assert "3 connection(s)" in flags[0].detail
