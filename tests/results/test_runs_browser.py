"""The runs browser (``swe-arena browse``): a folder of three runs listed, two arms compared, a flipped cell's
two patches, in a real Chromium; and its data, computed from the ledgers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.browser import Browser
from test_viewer_data import out_dir, row

from pytest_swe_arena.results.stats import mcnemar_exact_p
from pytest_swe_arena.results.viewer.runs import browser_data, find_out_dirs

#: Which instances each run's SOLO resolves; SUP4 resolves 1-6 in every run.
SOLO_RESOLVES = {"sweep-a": {1, 2, 3}, "sweep-b": {1, 2, 3, 4, 5, 9}, "sweep-c": {2}}


def patch_text(iid: str, arm: str, run: str) -> str:
    """A unified diff that names its cell, so the page can be checked for the right one."""
    return (f"diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n"
            f"-return a * b + 1\n+return a * b  # {run} {arm} {iid}\n")


def sweep_rows(name: str) -> list[dict[str, Any]]:
    rows = []
    for n in range(1, 11):
        iid = f"demo__calc-{n}"
        for arm, resolves, cost in (("SOLO", SOLO_RESOLVES[name], 0.5), ("SUP4", set(range(1, 7)), 2.0)):
            rows.append(row(iid, arm, "resolved" if n in resolves else "unresolved", cost=cost, run_id=name,
                            patch_file=f"runs/{iid}/{arm}/patch.diff", patch_lines=2,
                            started_at=f"2026-12-0{1 + sorted(SOLO_RESOLVES).index(name)}T10:00:00+00:00"))
    return rows


def folder_of_three_runs(tmp_path: Path) -> Path:
    """Three out dirs (ledger, run dirs with patches, summary.json) in one folder."""
    folder = tmp_path / "sweeps"
    folder.mkdir()
    for name in SOLO_RESOLVES:
        rows = sweep_rows(name)
        built, summary = out_dir(tmp_path / "build" / name, rows)
        summary["arm_order"] = ["SOLO", "SUP4"]
        summary["arms"] = [arm for arm in summary["arms"] if arm["arm"] in ("SOLO", "SUP4")]
        for entry in rows:
            (built / entry["patch_file"]).write_text(patch_text(entry["instance_id"], entry["arm"], name))
        (built / "summary.json").write_text(json.dumps(summary))
        shutil.move(built, folder / name)
    (folder / "notes").mkdir()  # not an out dir: passed over
    return folder


def test_the_runs_and_every_pair_of_arms_with_its_flips(tmp_path):
    folder = folder_of_three_runs(tmp_path)
    out_dirs = find_out_dirs([folder])
    assert [path.name for path in out_dirs] == ["sweep-a", "sweep-b", "sweep-c"]
    data = browser_data(out_dirs, tmp_path / "browser")
    assert [(run["label"], run["run_id"], run["instances"], run["rows"]) for run in data["runs"]] == [
        ("sweep-a", "sweep-a", 10, 20), ("sweep-b", "sweep-b", 10, 20), ("sweep-c", "sweep-c", 10, 20)]
    assert data["runs"][0]["spend_usd"] == pytest.approx(25.0) and data["runs"][0]["started"].startswith("2026-12-01")
    assert data["runs"][1]["viewer"] == "../sweeps/sweep-b/viewer/index.html"
    assert [side["key"] for side in data["sides"]] == ["0:SOLO", "0:SUP4", "1:SOLO", "1:SUP4", "2:SOLO", "2:SUP4"]
    assert len(data["pairs"]) == 15, "every unordered pair of the six sides"
    pair = data["pairs"]["0:SOLO|1:SOLO"]
    # Computed independently: a resolves {1,2,3}, b {1,2,3,4,5,9}: b alone resolves 4, 5 and 9, a alone none.
    assert [(flip["instance"], flip["status_a"], flip["status_b"]) for flip in pair["flips"]] == [
        ("demo__calc-4", "unresolved", "resolved"), ("demo__calc-5", "unresolved", "resolved"),
        ("demo__calc-9", "unresolved", "resolved")]
    stats = pair["stats"]
    assert (stats["cells"], stats["only_arm"], stats["only_baseline"], stats["both"]) == (10, 3, 0, 3)
    assert stats["delta"] == pytest.approx(0.3) and stats["mcnemar_p"] == pytest.approx(mcnemar_exact_p(3, 0))
    assert data["pairs"]["0:SUP4|1:SUP4"]["flips"] == [], "the same verdicts: nothing flipped"


def test_a_folder_that_holds_no_out_dir_is_named(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty: holds no out dir"):
        find_out_dirs([tmp_path / "empty"])
    result = subprocess.run([sys.executable, "-m", "pytest_swe_arena.cli", "browse", str(tmp_path / "missing"),
                             "--to", str(tmp_path / "b")], capture_output=True, text=True, check=False)
    assert result.returncode == 1 and "missing: not a directory" in result.stderr


FLIPS = "[...document.querySelectorAll('#flips tbody tr')].map(r => [...r.cells].map(c => c.textContent))"


def choose(browser: Browser, select: str, label: str) -> None:
    browser.evaluate(f"(() => {{ const s = document.getElementById({json.dumps(select)});"
                     f" s.value = [...s.options].find(o => o.textContent === {json.dumps(label)}).value;"
                     " s.dispatchEvent(new Event('change')); })()")


def test_three_runs_listed_two_compared_and_a_flip_shows_both_patches_in_chromium(tmp_path):
    folder = folder_of_three_runs(tmp_path)
    made = subprocess.run([sys.executable, "-m", "pytest_swe_arena.cli", "browse", str(folder),
                           "--to", str(tmp_path / "browser")], capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    page = Path(made.stdout.strip())
    assert page == tmp_path / "browser" / "runs.html" and not (page.parent / "index.html").exists()
    with Browser(tmp_path / "chromium-profile") as browser:
        browser.open(page)
        browser.wait_until("document.body.dataset.ready === '1'")
        runs = browser.evaluate("[...document.querySelectorAll('#runs tbody tr')].map(r => [...r.cells]"
                                ".map(c => c.textContent))")
        assert [run[0] for run in runs] == ["sweep-a", "sweep-b", "sweep-c"]
        assert runs[1][2] == "SOLO 60.0%SUP4 60.0%" and runs[1][5] == "$25"
        # The default pair is the same arm in two runs; its flips are the cells whose verdict differs.
        assert browser.evaluate("document.getElementById('pair').dataset.pair") == "0:SOLO|1:SOLO"
        assert browser.evaluate(FLIPS) == [["demo__calc-4", "1", "unresolved", "resolved"],
                                           ["demo__calc-5", "1", "unresolved", "resolved"],
                                           ["demo__calc-9", "1", "unresolved", "resolved"]]
        stats = browser.evaluate("[...document.querySelectorAll('#pair-stats tbody td')].map(c => c.textContent)")
        assert stats[:5] == ["10", "30.0%", "60.0%", "+30.0pp", stats[4]] and stats[6:8] == ["0", "3"]
        # Read the other way round (B before A): the same pair, mirrored.
        choose(browser, "side-a", "sweep-c · SOLO")
        choose(browser, "side-b", "sweep-a · SOLO")
        assert browser.evaluate("document.getElementById('pair').dataset.pair") == "2:SOLO|0:SOLO"
        assert browser.evaluate(FLIPS) == [["demo__calc-1", "1", "unresolved", "resolved"],
                                           ["demo__calc-3", "1", "unresolved", "resolved"]]
        # A flipped cell: both patches, each its own run's, as rendered diffs.
        browser.evaluate("document.querySelector('#flips tbody tr').click()")
        browser.wait_until("document.getElementById('flip-detail').dataset.loaded === 'demo__calc-1/1'")
        added = browser.evaluate("[...document.querySelectorAll('#flip-detail .patch-side')].map(s =>"
                                 " [...s.querySelectorAll('.d2h-ins .d2h-code-line-ctn')].map(e => e.textContent))")
        assert added == [["return a * b  # sweep-c SOLO demo__calc-1"], ["return a * b  # sweep-a SOLO demo__calc-1"]]
        # The statuses link to each run's own cell page.
        href = browser.evaluate("document.querySelector('#flips tbody tr td:nth-child(4) a').href")
        assert href == (folder / "sweep-a" / "viewer" / "cell.html").as_uri() + "#cells/demo__calc-1/SOLO/1"
        browser.navigate(href)
        browser.wait_until("document.body.dataset.ready === '1'")
        assert "demo__calc-1 · SOLO" in browser.evaluate("document.querySelector('#cell-header h1').textContent")
        assert browser.errors == []
