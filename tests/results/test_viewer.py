"""The viewer (``<out>/viewer/``) of a real sweep with every status, in a real Chromium; ``swe-arena view``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from helpers.agents import ASKED, OPENCODE, arm_table, edit_calls, opencode_config, prices_table
from helpers.arena import XDIST
from helpers.browser import Browser
from helpers.scripted_model import ScriptedModel

from pytest_swe_arena.ledger.chain import seal, verify_ledger, without_seal

ARMS = ["GOLD", "EMPTY", "SOLO", "FAILS", "HANGS", "NOPROG", "PRED"]
#: Statuses only a spent budget or a Ctrl-C gives: added as rows, in the shape the recorder writes.
ADDED = ["CAPPED"]
#: With SWE_ARENA_SCREENSHOTS_TO=docs/img the no-xdist run also writes the docs' screenshots there.
SCREENSHOTS_TO = Path(os.environ["SWE_ARENA_SCREENSHOTS_TO"]).resolve() if os.environ.get("SWE_ARENA_SCREENSHOTS_TO") \
    else None

#: What a hostile agent puts in its output and run dir, hoping the viewer runs it or loads something.
HOSTILE = '<img src="http://127.0.0.1:9/x.png" onerror="window.pwned=1"><script>window.pwned=2</script>'
AGENT = f'''
import os, pathlib, sys, time
prompt = pathlib.Path(sys.argv[1]).read_text()
print("agent read", len(prompt), "characters", flush=True)
if sys.argv[2] == "fail":
    import socket
    try:  # refused by its sealed cell's network, and listed in its row
        socket.create_connection(("127.0.0.1", 9), timeout=30).close()
    except OSError:
        pass
    print({HOSTILE!r}, flush=True)
    pathlib.Path(os.environ["ARENA_USAGE_FILE"]).with_name("notes.html").write_text({HOSTILE!r})
    print("boom", file=sys.stderr)
    sys.exit(3)
time.sleep(300)
'''


def calc_rows(calc) -> list[dict[str, Any]]:
    """Two instances graded per test (FAIL_TO_PASS / PASS_TO_PASS), told apart by a marker for the model."""
    rows = []
    for n, marker in ((1, "[one]"), (2, "[two]")):
        row = calc.row(f"demo__calc-{n}", problem_statement=f"{marker} calc.mul(3, 4) returns 7, expected 12.",
                       FAIL_TO_PASS='["tests/test_ops.py::test_mul"]', PASS_TO_PASS='["tests/test_ops.py::test_add"]')
        del row["verify"]
        rows.append(row)
    return rows


def added_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """over_budget (with integrity flags and a model mismatch), skipped_budget and interrupted cells."""
    solo = next(row for row in rows if row["arm"] == "SOLO" and row["instance_id"] == "demo__calc-1")
    identity = {"name": "CAPPED", "kind": "opencode", "settings": {"model": ASKED, "max_usd": 0.01}}
    common = {"arm_identity": identity, "patch_scored": False, "patch_file": None, "run_dir": None, "verify": None,
              "patch_lines": 0, "reused_from": None}
    over = {**solo, **common, "arm": "CAPPED", "cell_key": "added0over", "status": "over_budget",
            "nodeid": "instances/demo.jsonl::demo__calc-1[CAPPED]", "served_model": "scripted/other-model",
            "model_mismatch": True, "error": "opencode stopped: $0.0123 spent, over max_usd $0.01",
            # details as the trustworthy-cells and metered-cost work write them: integrity flags, the meter's verdict.
            "details": {"integrity": [{"kind": "tests_touched", "path": "tests/test_ops.py",
                                       "detail": "restored from the base commit before grading"}],
                        "reconciliation": {"status": "differ", "note": "metered - reported: input_tokens +500",
                                           "reported": {"input_tokens": 2000, "cost_usd": 0.01},
                                           "metered": {"input_tokens": 2500, "cost_usd": 0.0123},
                                           "difference": {"input_tokens": 500, "cost_usd": 0.0023}},
                        # an open agent, as an arm's network = "open" leaves it: the arm is marked not sealed.
                        "network": {"agent": "open", "endpoints": [], "reason": "the arm's network = \"open\"",
                                    "grading": "sealed"}}}
    skipped = {**over, "instance_id": "demo__calc-2", "cell_key": "added0skip", "status": "skipped_budget",
               "nodeid": "instances/demo.jsonl::demo__calc-2[CAPPED]", "usage": {}, "models": {}, "phases": {},
               "model_mismatch": False, "served_model": None, "details": {},
               "error": "sweep budget exhausted ($0.0200 spent of $0.02)"}
    interrupted = {**skipped, "instance_id": "demo__calc-3", "cell_key": "", "status": "interrupted",
                   "nodeid": "instances/demo.jsonl::demo__calc-3[CAPPED]",
                   "error": "interrupted during setup"}
    return [over, skipped, interrupted]


@pytest.fixture
def every_status(suite, calc, request):
    """A real sweep (GOLD, EMPTY, opencode, failing and hanging commands, a missing program, a replay), rebuilt
    by ``swe-arena report`` after the rows a budget or an interrupt would add."""
    xdist = request.param
    agent = suite.path / "agent.py"
    agent.write_text(AGENT)
    rows = calc_rows(calc)
    suite.instances(rows)
    (suite.path / "preds.jsonl").write_text(json.dumps(
        {"instance_id": "demo__calc-1", "model_name_or_path": "elsewhere", "model_patch": calc.patch}) + "\n")
    usage = {"prompt_tokens": 2000, "completion_tokens": 40}
    script = {"by_marker": {
        "[one]": [{"tool_calls": edit_calls(calc.patch), "usage": usage}, {"content": "Fixed mul.", "usage": usage}],
        "[two]": [{"content": "I could not find the bug.", "usage": usage}],
    }}
    python = sys.executable
    with ScriptedModel(script) as model:
        (suite.path / "solo.json").write_text(json.dumps(opencode_config(model.base_url)))
        suite.arms_toml = (
            arm_table("SOLO", "opencode", model=ASKED, executable=OPENCODE, config="solo.json")
            + arm_table("FAILS", "command", command=[python, str(agent), "{prompt_file}", "fail"])
            + arm_table("HANGS", "command", command=[python, str(agent), "{prompt_file}", "hang"], timeout=2, grace=1)
            + arm_table("NOPROG", "command", command=["{workspace}/no-such-agent", "{prompt_file}"])
            + arm_table("PRED", "replay", predictions="preds.jsonl")
            + prices_table())
        result = suite.run(f"--arena-arms={','.join(ARMS)}", *xdist)
    result.assert_outcomes(passed=4, failed=8, errors=2)
    out = suite.path / "arena-out"
    head = verify_ledger(out / "ledger.jsonl").head
    with open(out / "ledger.jsonl", "a", encoding="utf-8") as ledger:
        for row in added_rows(suite.ledger()):  # sealed onto the chain, as the recorder writes rows
            line, head = seal(json.dumps(without_seal(row), sort_keys=True), head)
            ledger.write(line + "\n")
    rebuilt = subprocess.run([sys.executable, "-m", "pytest_swe_arena.cli", "report", str(out)],
                             capture_output=True, text=True, timeout=300, check=False)
    assert rebuilt.returncode == 0, rebuilt.stderr
    return out, xdist


OVERVIEW = """({
    arms: [...document.querySelectorAll('#arms tbody tr')].map(r => r.cells[0].textContent),
    statuses: [...new Set(arenaOverview.matching().map(c => c.status))].sort(),
    count: document.getElementById('cell-count').textContent,
    command: (document.getElementById('run-command') || {}).textContent,
    facts: Object.fromEntries([...document.querySelectorAll('#run-facts tr')].map(r =>
        [r.cells[0].textContent, r.cells[1].textContent])),
    charts: ['frontier-cell', 'frontier-resolved'].map(id => Chart.getChart(document.getElementById(id))
        .data.datasets.filter(d => d.arenaArm).map(d => [d.arenaArm, d.arenaApart])),
    unplaced: (document.getElementById('frontier-unplaced') || {}).textContent,
    free: (document.getElementById('frontier-free') || {}).textContent,
    run_open: document.getElementById('run-meta').open,
    matrix: arenaOverview.matrix(),
    baseline: document.getElementById('comparison-holder').dataset.baseline,
    width: document.documentElement.scrollWidth,
    resolved_colour: getComputedStyle(document.querySelector('.st-resolved')).backgroundColor,
    external: [...document.querySelectorAll('script[src], link[href]')]
        .map(e => e.src || e.href).filter(u => u !== 'data:,' && !u.startsWith(location.href.replace(/[^/]*$/, ''))),
})"""


def comparison(browser: Browser, baseline: str) -> dict[str, list[str]]:
    browser.evaluate(f"(() => {{ const s = document.getElementById('baseline'); s.value = {json.dumps(baseline)};"
                     " s.dispatchEvent(new Event('change')); })()")
    browser.wait_until(f"document.getElementById('comparison-holder').dataset.baseline === {json.dumps(baseline)}")
    rows = browser.evaluate("[...document.querySelectorAll('#comparison tbody tr')]"
                            ".map(r => [...r.cells].map(c => c.textContent))")
    return {row[0]: row[1:] for row in rows}


def filtered(browser: Browser, **filters: str) -> list[dict[str, Any]]:
    """Set the overview's filters (element id suffix -> value), as a person typing or choosing would."""
    for name, value in filters.items():
        browser.evaluate(f"(() => {{ const e = document.getElementById('filter-{name}'); e.value = {json.dumps(value)};"
                         " e.dispatchEvent(new Event(e.tagName === 'SELECT' ? 'change' : 'input')); })()")
    matching: list[dict[str, Any]] = browser.evaluate("arenaOverview.matching()")
    shown = browser.evaluate("[...document.querySelectorAll('#cells .row:not([hidden])')]"
                             ".map(r => [...r.children].map(c => c.textContent))")
    assert len(shown) == len(matching), "every matching cell of a short list is in the DOM"
    assert [row[0].rstrip("⚑≈") for row in shown] == [cell["instance"] for cell in matching]
    return matching


def option_value(browser: Browser, select: str, text: str) -> str:
    value: str = browser.evaluate(f"[...document.getElementById({json.dumps(select)}).options]"
                                  f".find(o => o.textContent === {json.dumps(text)}).value")
    return value


@pytest.mark.skipif(OPENCODE is None, reason="opencode CLI not found (npm install)")
@pytest.mark.parametrize("every_status", XDIST, indirect=True)
def test_viewer_of_a_sweep_with_every_status_in_chromium(every_status, tmp_path):
    out, xdist = every_status
    viewer = out / "viewer"
    with Browser(tmp_path / "chromium-profile") as browser:
        browser.open(viewer / "index.html")
        browser.wait_until("document.body.dataset.ready === '1'")
        page = browser.evaluate(OVERVIEW)
        if SCREENSHOTS_TO and not xdist:
            browser.screenshot(SCREENSHOTS_TO / "viewer-overview.png")
        assert page["arms"] == [*ARMS, "CAPPED ~not sealed"], "its agent had the machine's network"
        assert page["statuses"] == sorted(["resolved", "unresolved", "arm_error", "timeout", "harness_error",
                                           "over_budget", "skipped_budget", "interrupted"])
        assert page["count"] == "17 of 17 cells"
        assert page["command"].startswith("pytest ") and "--arena-arms=GOLD,EMPTY,SOLO" in page["command"]
        assert page["facts"]["hosts"] and page["facts"]["plugin version"] == "0.1.0"
        # Every arm with a rate and a spend is on both charts; the replay arm (its cost unknown) stands apart;
        # GOLD and EMPTY spent $0: named under the charts, not drawn on the axis.
        free = page["free"].split(": ", 1)[1].split(", ")
        assert {"GOLD", "EMPTY"} <= set(free) and "SOLO" not in free and "PRED" not in free
        for chart in page["charts"]:
            placed = dict(chart)
            assert sorted(placed) == sorted(set(ARMS + ADDED) - {"NOPROG", *free}), chart
            assert placed["PRED"] is True and placed["SOLO"] is False
        assert page["run_open"] is False, "the run's metadata is folded: the first screen is the results"
        assert [(row["instance"], row["arms"][ARMS.index("SOLO")]) for row in page["matrix"]] == [
            ("demo__calc-1", ["resolved"]), ("demo__calc-2", ["unresolved"]), ("demo__calc-3", [])]
        assert "NOPROG" in page["unplaced"], "harness errors only: no rate, and the page says so"
        assert page["baseline"] == "SOLO", "the first arm that is not a reference arm"
        assert page["external"] == []
        assert page["resolved_colour"] == "rgb(209, 244, 217)", "STATUS_TABLE's badge, through statuses.css"
        assert page["facts"]["meter"].endswith("; report against meter: 1 differ")
        assert page["width"] <= 1280, "no horizontal scrolling at 1280 px"

        # Paired comparisons against one baseline at a time, not all pairs.
        against_empty = comparison(browser, "EMPTY")
        assert "EMPTY" not in against_empty and set(against_empty) == set(ARMS + ADDED) - {"EMPTY", "NOPROG"}
        assert against_empty["GOLD"][:4] == ["2", "100.0%", "0.0%", "+100.0pp"]
        low, high = against_empty["GOLD"][4].split(" to ")
        assert low == high == "+100.0pp", "every pair agrees: the bootstrap has no spread"
        against_solo = comparison(browser, "SOLO")
        assert against_solo["EMPTY"][3] == "−50.0pp" and against_solo["GOLD"][3] == "+50.0pp"

        # Filters: by arm, by status, by repository, by text (an error's words), by cost.
        solo = filtered(browser, arm=option_value(browser, "filter-arm", "SOLO"))
        assert [(cell["instance"], cell["status"]) for cell in solo] == [
            ("demo__calc-1", "resolved"), ("demo__calc-2", "unresolved")]
        assert [cell["arm"] for cell in filtered(browser, arm="", text="no recorded patch")] == ["PRED"]
        assert {cell["arm"] for cell in filtered(browser, text="did not finish")} == {"HANGS"}
        assert {cell["instance"] for cell in filtered(browser, text="calc-3")} == {"demo__calc-3"}
        assert len(filtered(browser, text="", repo=option_value(browser, "filter-repo", "demo/calc"))) == 16
        filtered(browser, repo="")
        browser.evaluate("(() => { const e = document.getElementById('filter-cost-unknown'); e.checked = true;"
                         " e.dispatchEvent(new Event('change')); })()")
        assert {cell["arm"] for cell in browser.evaluate("arenaOverview.matching()")} >= {"PRED", "FAILS"}
        browser.evaluate("(() => { const e = document.getElementById('filter-cost-unknown'); e.checked = false;"
                         " e.dispatchEvent(new Event('change')); })()")
        assert {cell["arm"] for cell in filtered(browser, **{"cost-min": "0.001"})} == {"SOLO", "CAPPED"}
        filtered(browser, **{"cost-min": ""})

        # Follow the SOLO cell's link to its page: the diff, the per-test statuses, the transcript.
        filtered(browser, arm=option_value(browser, "filter-arm", "SOLO"), text="calc-1")
        href = browser.evaluate("document.querySelector('#cells .row:not([hidden]) a').href")
        assert href.endswith("/viewer/cell.html#cells/demo__calc-1/SOLO/1")
        browser.navigate(href)
        browser.wait_until("document.body.dataset.ready === '1'")
        cell = browser.evaluate("""({
            title: document.querySelector('#cell-header h1').textContent,
            files: [...document.querySelectorAll('#diff .d2h-file-header .d2h-file-name')]
                .map(e => e.textContent.trim()),
            added: [...document.querySelectorAll('#diff .d2h-ins .d2h-code-line-ctn')].map(e => e.textContent),
            removed: [...document.querySelectorAll('#diff .d2h-del .d2h-code-line-ctn')].map(e => e.textContent),
            tests: [...document.querySelectorAll('#tests-table tbody tr')]
                .map(r => [...r.cells].map(c => c.textContent)),
            statement: document.getElementById('problem-statement').textContent,
            prompt: (document.querySelector('#turns .turn.user pre') || {}).textContent,
            tools: [...document.querySelectorAll('#turns .turn.tool')].map(t => t.dataset.tool),
            said: [...document.querySelectorAll('#turns .turn.assistant pre')].map(p => p.textContent),
            models: [...document.querySelectorAll('#usage-table tbody tr')].map(r => r.cells[0].textContent),
            phases: [...document.querySelectorAll('#phases-table tbody tr')].map(r => r.cells[0].textContent),
            siblings: [...document.querySelectorAll('#siblings a')].map(a => a.dataset.arm),
            logs: [...document.querySelectorAll('#files details')].map(d => d.dataset.file),
            width: document.documentElement.scrollWidth,
        })""")
        if SCREENSHOTS_TO and not xdist:
            browser.screenshot(SCREENSHOTS_TO / "viewer-cell.png")
        assert cell["title"].startswith("demo__calc-1 · SOLO")
        assert cell["files"] == ["calc/ops.py"] and cell["added"] == ["    return a * b"]
        assert cell["removed"] == ["    return a + b"]
        assert cell["tests"] == [["FAIL_TO_PASS", "tests/test_ops.py::test_mul", "failed", "passed"],
                                 ["PASS_TO_PASS", "tests/test_ops.py::test_add", "passed", "passed"]]
        assert cell["statement"] == "[one] calc.mul(3, 4) returns 7, expected 12."
        assert cell["prompt"].startswith("[one] calc.mul(3, 4)")
        assert cell["tools"] == ["edit"] and cell["said"][-1] == "Fixed mul."
        assert cell["models"] == [ASKED, "cell (reported)"]
        assert {"workspace", "arm", "patch", "verify"} <= set(cell["phases"])
        assert cell["siblings"] == ARMS + ADDED
        assert cell["logs"][0] == "verify.log" and "events.jsonl" in cell["logs"]
        assert cell["width"] <= 1280, "no horizontal scrolling at 1280 px"

        # The same instance under another arm, through the sibling links (the page follows its hash).
        href = browser.evaluate("document.querySelector('#siblings a[data-arm=HANGS]').href")
        browser.evaluate("document.querySelector('#siblings a[data-arm=HANGS]').click()")
        browser.wait_until("document.body.dataset.ready === '1' && "
                           "document.querySelector('#cell-header h1').textContent.includes('HANGS')")
        hangs = browser.evaluate("({error: document.querySelector('#error pre').textContent, "
                                 "stdout: document.querySelector('#files details[data-file=\"stdout.log\"] pre')"
                                 ".textContent, tests: (document.getElementById('tests-table') || null) === null})")
        assert "did not finish within 2 s" in hangs["error"]
        assert hangs["stdout"].startswith("agent read ") and hangs["tests"], "not graded: no test table"
        assert href.endswith("#cells/demo__calc-1/HANGS/1")

        # A hostile agent's markup is shown as text: nothing runs, nothing loads.
        browser.navigate((viewer / "cell.html").as_uri() + "#cells/demo__calc-2/FAILS/1")
        browser.wait_until("document.body.dataset.ready === '1' && document.title.includes('FAILS')")
        hostile = browser.evaluate("""({pwned: window.pwned === undefined ? null : window.pwned,
            images: document.querySelectorAll('#app img, #app script').length,
            notes: document.querySelector('#files details[data-file="notes.html"] pre').textContent,
            said: document.querySelector('#turns .turn.assistant pre').textContent})""")
        assert hostile["pwned"] is None and hostile["images"] == 0
        assert hostile["notes"] == HOSTILE and HOSTILE in hostile["said"]
        # Its sealed network: each phase's policy, and the connection it tried, refused.
        network = browser.evaluate("""({facts: Object.fromEntries([...document.querySelectorAll('#network-facts tr')]
                .map(r => [r.cells[0].textContent, r.cells[1].textContent])),
            refused: [...document.querySelectorAll('#network-refused tbody tr')]
                .map(r => [...r.cells].map(c => c.textContent))})""")
        assert network["facts"] == {"agent": "sealed", "model endpoints carried in": "none", "graded tests": "sealed"}
        assert [row[:2] for row in network["refused"]] == [["127.0.0.1", "9"]], network

        # Flags, a model mismatch, and a cell with no run dir nor instance card.
        browser.navigate((viewer / "cell.html").as_uri() + "#cells/demo__calc-1/CAPPED/1")
        browser.wait_until("document.body.dataset.ready === '1' && document.title.includes('CAPPED')")
        capped = browser.evaluate("""({integrity: document.getElementById('integrity').textContent,
            network: Object.fromEntries([...document.querySelectorAll('#network-facts tr')]
                .map(r => [r.cells[0].textContent, r.cells[1].textContent])),
            flags: [...document.querySelectorAll('#integrity-table tbody tr')]
                .map(r => [...r.cells].map(c => c.textContent)),
            meter: document.querySelector('#reconciliation h3').textContent,
            metered: [...document.querySelectorAll('#reconciliation-table tbody tr')]
                .map(r => [...r.cells].map(c => c.textContent))})""")
        assert "scripted/other-model" in capped["integrity"]
        assert capped["network"] == {"agent": "open (not sealed)", "agent open because": "the arm's network = \"open\"",
                                     "model endpoints carried in": "none", "graded tests": "sealed"}
        assert capped["flags"] == [["tests_touched", "tests/test_ops.py",
                                    "restored from the base commit before grading"]]
        assert capped["meter"] == "Reported against metered: differ"
        assert capped["metered"] == [["input_tokens", "2,000", "2,500", "500"],
                                     ["cost_usd", "0.0100", "0.0123", "0.0023"]]
        browser.navigate((viewer / "cell.html").as_uri() + "#cells/demo__calc-3/CAPPED/1")
        browser.wait_until("document.body.dataset.ready === '1' && document.title.includes('calc-3')")
        assert "no problem statement" in browser.evaluate("document.getElementById('problem').textContent")
        browser.navigate((viewer / "cell.html").as_uri() + "#cells/../../ledger")
        browser.wait_until("document.getElementById('missing') !== null")
        assert "is not a cell of this viewer" in browser.evaluate("document.getElementById('missing').textContent")
        requests, errors = browser.requests, browser.errors
    assert errors == [], errors
    # data: URLs are no load from anywhere (Chromium draws a date input's calendar icon from one).
    requests = [url for url in requests if not url.startswith("data:")]
    assert requests and all(url.startswith(viewer.as_uri() + "/") for url in requests), \
        [url for url in requests if not url.startswith(viewer.as_uri())]

    # The runs browser over this real sweep: GOLD against SOLO, and the instance that flipped with both patches.
    made = subprocess.run([sys.executable, "-m", "pytest_swe_arena.cli", "browse", str(out), "--to",
                           str(tmp_path / "browser")], capture_output=True, text=True, timeout=300, check=False)
    assert made.returncode == 0, made.stderr
    with Browser(tmp_path / "chromium-profile-runs") as browser:
        browser.open(Path(made.stdout.strip()))
        browser.wait_until("document.body.dataset.ready === '1'")
        for select, arm in (("side-a", "GOLD"), ("side-b", "SOLO")):
            browser.evaluate(f"(() => {{ const s = document.getElementById('{select}'); s.value = '0:{arm}';"
                             " s.dispatchEvent(new Event('change')); })()")
        flips = browser.evaluate("[...document.querySelectorAll('#flips tbody tr')].map(r => "
                                 "[...r.cells].map(c => c.textContent))")
        assert flips == [["demo__calc-2", "1", "resolved", "unresolved"]]
        browser.evaluate("document.querySelector('#flips tbody tr').click()")
        browser.wait_until("document.getElementById('flip-detail').dataset.loaded === 'demo__calc-2/1'")
        sides = browser.evaluate("[...document.querySelectorAll('#flip-detail .patch-side')].map(s => ({"
                                 "title: s.querySelector('h3').textContent, added: [...s.querySelectorAll("
                                 "'.d2h-ins .d2h-code-line-ctn')].map(e => e.textContent)}))")
        assert sides[0] == {"title": "A (resolved)", "added": ["    return a * b"]}, "GOLD's patch"
        assert sides[1]["title"] == "B (unresolved)"
        if SCREENSHOTS_TO and not xdist:
            browser.screenshot(SCREENSHOTS_TO / "viewer-runs.png")
        assert browser.errors == []


def test_swe_arena_view_builds_a_missing_viewer_and_serves_it_on_loopback(suite, calc, tmp_path):
    suite.instances([calc.row()])
    suite.run("--arena-arms=GOLD,EMPTY").assert_outcomes(passed=1, failed=1)
    out = suite.path / "arena-out"
    shutil.rmtree(out / "viewer")  # an out dir from before the viewer: `view` builds it
    bad = subprocess.run([sys.executable, "-m", "pytest_swe_arena.cli", "view", str(out), "--port", "http"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "'http' is not a port number (0-65535; 0 picks a free port)" in bad.stderr
    server = subprocess.Popen([sys.executable, "-m", "pytest_swe_arena.cli", "view", str(out), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline() if server.stdout else ""
        assert line.startswith(f"swe-arena view: serving {out} at http://127.0.0.1:"), (line, server.stderr)
        url = line.split(" at ")[1].split(" ")[0]
        origin = url.rsplit("/viewer/", 1)[0]
        with Browser(tmp_path / "chromium-profile") as browser:
            browser.navigate(url)
            browser.wait_until("document.body.dataset.ready === '1'")
            arms = browser.evaluate("[...document.querySelectorAll('#arms tbody tr')].map(r => r.cells[0].textContent)")
            href = browser.evaluate("document.querySelector('#cells .row a').href")
            browser.navigate(href)
            browser.wait_until("document.body.dataset.ready === '1'")
            title = browser.evaluate("document.querySelector('#cell-header h1').textContent")
            requests, errors = browser.requests, browser.errors
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    assert server.returncode == 0, "Ctrl-C stops the server cleanly"
    assert errors == [], errors
    assert arms == ["GOLD", "EMPTY"] and title.startswith("demo__calc-1 · GOLD")
    # data: URLs are no load from anywhere (Chromium draws a date input's calendar icon from one).
    assert all(url.startswith(origin + "/viewer/") for url in requests if not url.startswith("data:")), requests


def test_sort_the_status_filter_and_an_out_dir_moved_elsewhere_in_chromium(tmp_path):
    """Built, copied elsewhere and the original deleted: the overview sorts and filters by status, a cell
    page opened from it links to files that are there, and one whose only changes the excludes left out lists them."""
    from test_viewer_data import out_dir, ten_instance_sweep

    from pytest_swe_arena.results.viewer.build import write_viewer

    rows = ten_instance_sweep()
    # What the worker records when an agent changed only what the excludes leave out: no patch is kept.
    rows[0]["details"] = {"patch_excluded": {"files": [{"path": "tests/test_ops.py", "added": 2, "removed": 5},
                                                       {"path": ".loops/blob.bin", "added": None, "removed": None}],
                                             "count": 2, "added": 2, "removed": 5}}
    built, summary = out_dir(tmp_path, rows)
    write_viewer(built, summary)
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(built, moved, symlinks=True)
    shutil.rmtree(built)  # nothing may point back at where it was built
    with Browser(tmp_path / "chromium-profile") as browser:
        browser.open(moved / "viewer" / "index.html")
        browser.wait_until("document.body.dataset.ready === '1'")
        errors = filtered(browser, status=option_value(browser, "filter-status", "arm_error"))
        assert {(cell["instance"], cell["arm"], cell["status"]) for cell in errors} == {
            ("demo__calc-9", "SUP4", "arm_error"), ("demo__calc-10", "SUP4", "arm_error")} and len(errors) == 2
        assert len(filtered(browser, status="")) == 30

        def costs() -> list[str]:
            return browser.evaluate("[...document.querySelectorAll('#cells .row:not([hidden])')]"
                                    ".map(r => r.children[5].textContent)")

        unsorted = costs()
        browser.evaluate("document.querySelector('#cells .head button[data-sort=cost]').click()")
        ascending = costs()
        known = [float(text) for text in ascending if text.replace(".", "", 1).isdigit()]
        assert known == sorted(known) and len(known) == 20, ascending
        assert known[0] < known[-1] and known != [float(t) for t in unsorted if t.replace(".", "", 1).isdigit()]
        assert ascending[len(known):] and not any(text.replace(".", "", 1).isdigit()
                                                  for text in ascending[len(known):]), "unknown cost last"
        browser.evaluate("document.querySelector('#cells .head button[data-sort=cost]').click()")
        descending = [float(text) for text in costs() if text.replace(".", "", 1).isdigit()]
        assert descending == sorted(known, reverse=True)
        assert browser.evaluate("document.querySelector('#cells .head button[data-sort=cost]')"
                                ".getAttribute('aria-sort')") == "descending"

        href = browser.evaluate("document.querySelector('#cells .row:not([hidden]) a').href")
        assert href.startswith((moved / "viewer").as_uri()), href
        browser.navigate(href)
        browser.wait_until("document.body.dataset.ready === '1'")
        links = browser.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)"
                                 ".filter(u => u.startsWith('file:') && !u.includes('/viewer/cell.html'))")
        files = {unquote(urlparse(link).path).rstrip("/") for link in links}
        assert any(path.endswith("/verify.log") for path in files), links
        for path in files:
            assert path.startswith(str(moved)) and Path(path).exists(), path
        assert "verify of demo__calc" in browser.evaluate("document.body.textContent")
        browser.navigate((moved / "viewer" / "cell.html").as_uri() + f"#cells/demo__calc-1/{rows[0]['arm']}/1")
        browser.wait_until("document.body.dataset.ready === '1' && document.getElementById('patch-excluded')")
        excluded = browser.evaluate("({head: document.querySelector('#patch-excluded h3').textContent, rows: "
                                    "[...document.querySelectorAll('#patch-excluded tr')].map(r => r.textContent)})")
        assert "2 files, +2 −5 lines" in excluded["head"]
        assert excluded["rows"] == ["tests/test_ops.py+2 −5", ".loops/blob.binbinary"]
        assert browser.errors == []


MATRIX = "arenaOverview.matrix()"


def matrix_filter(browser: Browser, **filters: str | bool) -> list[dict[str, Any]]:
    """Set the matrix's filters (element id suffix -> value, or checked for a checkbox); the instances shown."""
    for name, value in filters.items():
        prop = "checked" if isinstance(value, bool) else "value"
        browser.evaluate(f"(() => {{ const e = document.getElementById('matrix-{name}');"
                         f" e.{prop} = {json.dumps(value)};"
                         " e.dispatchEvent(new Event(e.tagName === 'SELECT' || e.type === 'checkbox' ? 'change'"
                         " : 'input')); })()")
    matching: list[dict[str, Any]] = browser.evaluate(MATRIX)
    shown = browser.evaluate("[...document.querySelectorAll('#matrix .row:not([hidden])')]"
                             ".map(r => r.children[0].textContent.replace(/[⚑≋✗]/g, ''))")
    assert shown == [entry["instance"] for entry in matching], "every matching instance of a short list is drawn"
    return matching


def test_the_instance_by_arm_matrix_narrows_by_repository_status_flags_and_created_date_in_chromium(tmp_path):
    """The overview's matrix: a row per instance, a column per arm; each filter narrows it; a glyph opens its cell."""
    from test_viewer_data import out_dir, ten_instance_sweep

    from pytest_swe_arena.results.viewer.build import write_viewer

    rows = ten_instance_sweep()
    flagged = next(entry for entry in rows if entry["instance_id"] == "demo__calc-7" and entry["arm"] == "SUP4")
    flagged["details"] = {"integrity": [{"kind": "tests_touched", "path": "tests/test_ops.py", "detail": "restored"}]}
    built, summary = out_dir(tmp_path, rows)
    for n in range(1, 11):  # calc-1..3 in another repository; created one a month, from January
        card = {"instance_id": f"demo__calc-{n}", "repo": "other/lib" if n <= 3 else "demo/calc",
                "created_at": f"2023-{n:02d}-15T08:00:00Z", "problem_statement": "mul is wrong"}
        (built / "runs" / f"demo__calc-{n}" / "instance.json").write_text(json.dumps(card))
    write_viewer(built, summary)
    with Browser(tmp_path / "chromium-profile") as browser:
        browser.open(built / "viewer" / "index.html")
        browser.wait_until("document.body.dataset.ready === '1'")
        everything = matrix_filter(browser)
        assert len(everything) == 10 and everything[0] == {
            "instance": "demo__calc-1", "arms": [["resolved"], ["resolved"], ["resolved"]], "stability": None}
        assert browser.evaluate("document.getElementById('matrix-count').textContent") == "10 of 10 instances"
        other = matrix_filter(browser, repo=option_value(browser, "matrix-repo", "other/lib"))
        assert [entry["instance"] for entry in other] == ["demo__calc-1", "demo__calc-2", "demo__calc-3"]
        matrix_filter(browser, repo="")
        errors = matrix_filter(browser, status=option_value(browser, "matrix-status", "arm_error"))
        assert [entry["instance"] for entry in errors] == ["demo__calc-10", "demo__calc-9"]
        assert errors[0]["arms"] == [["unresolved"], ["arm_error"], ["unresolved"]]
        matrix_filter(browser, status="")
        assert [entry["instance"] for entry in matrix_filter(browser, flagged=True)] == ["demo__calc-7"]
        matrix_filter(browser, flagged=False)
        spring = matrix_filter(browser, **{"created-from": "2023-03-01", "created-to": "2023-05-31"})
        assert [entry["instance"] for entry in spring] == ["demo__calc-3", "demo__calc-4", "demo__calc-5"]
        both = matrix_filter(browser, repo=option_value(browser, "matrix-repo", "demo/calc"))
        assert [entry["instance"] for entry in both] == ["demo__calc-4", "demo__calc-5"]
        href = browser.evaluate("document.querySelector('#matrix .row:not([hidden]) .trials a').href")
        assert href.endswith("/viewer/cell.html#cells/demo__calc-4/SOLO/1")
        assert browser.errors == []


def test_significance_groups_flake_rates_and_non_plain_applies_in_chromium(tmp_path):
    """The summary's pairs (p exact, p Holm, the interval), its group and discrimination; calibration's flake
    rates with the flaky and broken instances marked in the matrix; each non-plain apply flagged with its method."""
    from test_viewer_data import FUZZ_LINE, calibrated_out_dir

    from pytest_swe_arena.results.viewer.build import write_viewer

    out, summary = calibrated_out_dir(tmp_path)
    write_viewer(out, summary)
    with Browser(tmp_path / "chromium-profile") as browser:
        browser.open(out / "viewer" / "index.html")
        browser.wait_until("document.body.dataset.ready === '1'")
        page = browser.evaluate("""({
            pairs: [...document.querySelectorAll('#pairs tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
            groups: document.getElementById('groups').textContent,
            decides: document.querySelector('#discrimination summary').textContent,
            flaky: document.getElementById('calibration-flaky').textContent,
            broken: document.getElementById('calibration-broken').textContent,
            rates: [...document.querySelectorAll('#flake-rates tbody tr')]
                .map(r => [...r.cells].map(c => c.textContent)),
            marks: Object.fromEntries([...document.querySelectorAll('#matrix .row:not([hidden])')]
                .map(r => [r.children[0].firstChild.textContent,
                           (r.children[0].querySelector('.unstable') || {}).title || null])),
            applied: [...document.querySelectorAll('#matrix .apply')].map(e => e.title),
        })""")
        [pair] = [entry for entry in summary["pairs"] if entry["arms"] == ["SOLO", "SUP4"]]
        # The page's own formatting of the summary's numbers (JavaScript rounds as Python's format does not).
        low, high = (browser.evaluate(f"arena.points({bound})") for bound in pair["delta_ci95"])
        assert page["pairs"][0] == ["SOLO vs SUP4", "10", "1", "5", "−40.0pp", f"{low} to {high}",
                                    f"{pair['mcnemar_p']:.4f}", f"{pair['mcnemar_p_holm']:.4f}", "tied"]
        assert len(page["pairs"]) == len(summary["pairs"]) == 10
        groups = summary["groups"]
        assert page["groups"].startswith(f"Tied with the best ({groups['best']}; exact McNemar, Holm-adjusted p ≥ 0.05"
                                         f"): {', '.join(groups['tied_with_best'])}")
        decided = summary["discrimination"]
        assert page["decides"] == (f"{decided['separating']} of {decided['instances']} instances decide the "
                                   f"comparison ({len(decided['all_resolve'])} resolved by every arm, "
                                   f"{len(decided['none_resolve'])} by none)")
        assert (page["flaky"], page["broken"]) == ("flaky (1): demo__calc-2", "broken (1): demo__calc-3")
        assert page["rates"] == [["demo__calc-3", "broken", "0/2", "0/2"], ["demo__calc-2", "flaky", "1/2", "0/2"],
                                 ["demo__calc-1", "stable", "2/2", "0/2"]]
        assert page["marks"]["demo__calc-2"] == "calibration: flaky: gold resolved 1/2, empty resolved 0/2"
        assert page["marks"]["demo__calc-1"] is None and page["marks"]["demo__calc-4"] is None
        assert page["applied"] == [f"fuzz: {FUZZ_LINE}", "3way"]
        unstable = matrix_filter(browser, unstable=True)
        assert [(entry["instance"], entry["stability"]) for entry in unstable] == [
            ("demo__calc-2", "flaky"), ("demo__calc-3", "broken")]
        # The cell list marks the same cells; the cell page says how the patch went in.
        pred = filtered(browser, arm=option_value(browser, "filter-arm", "PRED"))
        assert len(pred) == 10
        marked = browser.evaluate("[...document.querySelectorAll('#cells .row:not([hidden])')]"
                                  ".filter(r => r.querySelector('.apply')).map(r => [r.children[0].textContent,"
                                  " r.querySelector('.apply').title])")
        assert marked == [["demo__calc-1≈", f"recorded patch applied by fuzz: {FUZZ_LINE}"],
                          ["demo__calc-3≈", "recorded patch applied by 3way"]]
        browser.open(out / "viewer" / "cell.html", "cells/demo__calc-1/PRED/1")
        browser.wait_until("document.body.dataset.ready === '1'")
        cell = browser.evaluate("({ title: document.querySelector('#apply h2').textContent,"
                                " text: document.getElementById('apply-flag').textContent,"
                                " mark: document.querySelector('#cell-header .apply').title })")
        assert cell["title"] == "Patch applied by fuzz" and FUZZ_LINE in cell["text"]
        assert 'took "fuzz"' in cell["text"] and cell["mark"] == f"patch applied by fuzz: {FUZZ_LINE}"
        browser.open(out / "viewer" / "cell.html", "cells/demo__calc-5/PRED/1")  # a new fragment: no new document
        browser.wait_until("document.body.dataset.ready === '1' && document.title.startsWith('demo__calc-5 ')")
        assert browser.evaluate("document.getElementById('apply')") is None, "git apply: nothing to flag"
        assert browser.errors == []
