"""The viewer of a 100,000-cell out dir: time to an interactive overview in Chromium, and the build.

Writes a realistic out dir (25,000 instances x 4 arms by default): the ledger rows of
``report_scale.py``, an instance card per instance, and per cell a verify log and, when graded,
a patch. Then, each in a fresh process:

- ``swe-arena report OUT`` with no viewer yet (summary.json, report.html and the whole viewer,
  every cell page's data), then again with nothing changed (the viewer is up to date), then after
  one more row in the ledger (every row looked at, one instance's pages built); baseline:
  ``json.loads`` of every ledger line, as in ``report_scale.py``;
- in a real headless Chromium (``tests/browser.py``), from ``file://``: the overview, from
  navigation start to the page being ready (data parsed, the table and both charts drawn, the
  main thread free), against today's ``report.html`` of the same out dir from navigation start to
  its load event: the baseline, measured in the same browser. Medians of ``--repeat`` loads, the
  cache disabled. Then the time of a filter by arm, a text filter and a sort, and of the instance x
  arm matrix's status and instance-id filters, in the page's clock.

The target (DESIGN section 9): the overview interactive in under 2 s.

    python bench/viewer_scale.py [--instances 25000] [--repeat 3] [--json FILE] [--keep] [--screenshot PNG]
    python bench/viewer_scale.py --loads-only OUT   # only the page loads, of an out dir built before (--keep)

The first build of 100,000 cell pages takes minutes on a loaded machine; ``--loads-only`` measures
the overview against report.html on an out dir a run with ``--keep`` (or an interrupted one, once
its overview data is written) left behind.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import BENCH_DIR, Figure, parser, report, scratch
from report_scale import ARMS, BASELINE, ledger_row

sys.path.insert(0, str(BENCH_DIR.parent / "tests"))
from helpers.browser import Browser  # noqa: E402  (the tests' DevTools driver: one way to drive Chromium)

RUN_ID = "20261130T120000Z-bench0"
VERIFY_LOG = ("============================= test session starts ==============================\n"
              "platform linux -- Python 3.11.7, pytest-8.3.2\ncollected 4 items\n\n"
              "tests/test_module.py ....                                              [100%]\n\n"
              "============================== 4 passed in 2.41s ===============================\n")
PATCH = ("diff --git a/django/db/models/query.py b/django/db/models/query.py\n"
         "--- a/django/db/models/query.py\n+++ b/django/db/models/query.py\n"
         "@@ -120,7 +120,7 @@ class QuerySet:\n     def count(self):\n-        return len(self._result_cache)\n"
         "+        return self.query.get_count(using=self.db)\n \n     def exists(self):\n")


def write_out_dir(out: Path, instances: int) -> int:
    """A ledger of ``instances`` x 4 arms, each instance's card, each cell's verify log and graded patch."""
    rng = random.Random(6)
    cells = 0
    with open(out / "ledger.jsonl", "w", encoding="utf-8") as ledger:
        for number in range(instances):
            for arm in ARMS:
                row = ledger_row(rng, number, arm, RUN_ID)
                row["run_dir"] = f"runs/{row['instance_id']}/{arm}"
                ledger.write(json.dumps(row, sort_keys=True) + "\n")
                run_dir = out / row["run_dir"]
                run_dir.mkdir(parents=True, exist_ok=True)
                (run_dir / "verify.log").write_text(VERIFY_LOG)
                if row["patch_scored"]:
                    (out / row["patch_file"]).parent.mkdir(exist_ok=True)
                    (out / row["patch_file"]).write_text(PATCH)
                cells += 1
            iid = f"django__django-{10000 + number}"
            card = {"instance_id": iid, "repo": f"django/django-{number % 12}", "base_commit": f"{number:040x}",
                    "problem_statement": "QuerySet.count() evaluates the whole query set. " * 30,
                    "FAIL_TO_PASS": ["tests/test_module.py::test_case_0"], "PASS_TO_PASS": []}
            (out / "runs" / iid / "instance.json").write_text(json.dumps(card))
    return cells


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


#: (page, the condition it is ready on, the page-clock milliseconds from navigation start to then)
VIEWER_READY = ("document.body.dataset.ready === '1'", "arenaTimings.charts")
REPORT_LOADED = ("performance.timing.loadEventEnd > 0",
                 "performance.timing.loadEventEnd - performance.timing.navigationStart")


def page_seconds(browser: Browser, url: str, ready: tuple[str, str]) -> float:
    """Seconds from navigation start to the page being ready, in the page's own clock."""
    condition, milliseconds = ready
    browser.navigate(url, timeout=600)
    browser.wait_until(condition, timeout=300)
    return float(browser.evaluate(milliseconds)) / 1000


def page_loads(browser: Browser, out: Path, repeat: int) -> tuple[list[float], list[float], dict[str, Any]]:
    """The overview's and report.html's load times, interleaved, and the timings of a filter and a sort."""
    overview = (out / "viewer" / "index.html").as_uri()
    static = (out / "report.html").as_uri()
    browser.send("Network.setCacheDisabled", cacheDisabled=True)
    viewer_loads, report_loads = [], []
    for _ in range(repeat):  # interleaved, so both see the same load on the machine
        viewer_loads.append(page_seconds(browser, overview, VIEWER_READY))
        report_loads.append(page_seconds(browser, static, REPORT_LOADED))
    page_seconds(browser, overview, VIEWER_READY)
    interactions: dict[str, Any] = browser.evaluate("""(() => {
        const act = (id, value, kind) => { const e = document.getElementById(id); e.value = value;
            const t = performance.now(); e.dispatchEvent(new Event(kind)); return performance.now() - t; };
        const arm = act('filter-arm', '2', 'change');
        const text = act('filter-text', '10042', 'input');
        act('filter-text', '', 'input');
        act('filter-arm', '', 'change');
        const button = document.querySelector('#cells .head button[data-sort=cost]');
        const t = performance.now(); button.click(); const sort = performance.now() - t;
        const matrixStatus = act('matrix-status', '1', 'change');
        const matrixText = act('matrix-text', '1004', 'input');
        act('matrix-text', '', 'input');
        act('matrix-status', '', 'change');
        return {arm, text, sort, matrixStatus, matrixText, shown: arenaOverview.count(),
                instances: arenaOverview.matrix().length};
    })()""")
    return viewer_loads, report_loads, interactions


def load_notes(out: Path, viewer_loads: list[float], report_loads: list[float], interactions: dict[str, Any],
               errors: list[Any]) -> list[str]:
    viewer_bytes = (out / "viewer" / "data" / "overview.js").stat().st_size
    report_bytes = (out / "report.html").stat().st_size
    return [f"overview loads (s): {', '.join(f'{s:.2f}' for s in viewer_loads)}; report.html loads (s): "
            f"{', '.join(f'{s:.2f}' for s in report_loads)}",
            f"data/overview.js: {viewer_bytes / 2**20:.1f} MiB; report.html: {report_bytes / 2**20:.1f} MiB",
            f"after load, in the page: filter by arm {interactions['arm']:.0f} ms, text filter "
            f"{interactions['text']:.0f} ms, sort by USD {interactions['sort']:.0f} ms "
            f"({interactions['shown']:,} rows sorted); instance x arm matrix ({interactions['instances']:,} "
            f"instances): filter by status {interactions['matrixStatus']:.0f} ms, by instance id "
            f"{interactions['matrixText']:.0f} ms",
            f"browser errors: {errors or 'none'}"]


def loads_only(out: Path, args: Any) -> int:
    """The page loads of an out dir built before: no writing, no building."""
    with open(out / "ledger.jsonl", "rb") as ledger:
        cells = sum(1 for line in ledger if line.strip())
    with scratch(args, "viewer-loads-") as root, Browser(root / "chromium-profile", width=1280, height=900) as browser:
        viewer_loads, report_loads, interactions = page_loads(browser, out, args.repeat)
        if args.screenshot:
            browser.screenshot(args.screenshot)
        errors = browser.errors
    figures = [Figure(f"viewer overview interactive, {cells:,} cells", statistics.median(viewer_loads), "s",
                      "report.html of the same out dir (load event)", statistics.median(report_loads),
                      target="< 2 s")]
    report(f"The viewer's overview at {cells:,} cells, page loads only (load average {os.getloadavg()[0]:.1f})",
           figures, args, load_notes(out, viewer_loads, report_loads, interactions, errors))
    return 0


def main() -> int:
    arguments = parser(__doc__.splitlines()[0] if __doc__ else "")
    arguments.add_argument("--instances", type=int, default=25_000, help="instances (x 4 arms = cells)")
    arguments.add_argument("--repeat", type=int, default=3, help="page loads of each page; the median is reported")
    arguments.add_argument("--screenshot", type=Path, help="also save a screenshot of the overview here")
    arguments.add_argument("--loads-only", type=Path, metavar="OUT",
                           help="only measure the page loads of OUT, an out dir built before")
    args = arguments.parse_args()
    if args.loads_only:
        return loads_only(args.loads_only, args)
    with scratch(args, "viewer-scale-") as root:
        out = root / "arena-out"
        out.mkdir()
        started = time.perf_counter()
        cells = write_out_dir(out, args.instances)
        print(f"out dir: {cells:,} cells, {args.instances:,} instances, written in "
              f"{time.perf_counter() - started:.0f} s ({out})")
        command = [sys.executable, "-m", "pytest_swe_arena.cli", "report", str(out)]
        baseline = min(wall([sys.executable, "-c", BASELINE, str(out / "ledger.jsonl")]) for _ in range(args.repeat))
        first_build = wall(command)
        rebuild = statistics.median(wall(command) for _ in range(args.repeat))
        pages = sum(1 for _ in (out / "viewer" / "data" / "cells").rglob("*.js"))
        # One cell more in the run (a resumed sweep's reused row, say): every row is looked at again, only
        # the pages of that cell's instance are built.
        with open(out / "ledger.jsonl", "rb") as ledger:
            last = json.loads(ledger.readlines()[-1])
        with open(out / "ledger.jsonl", "a", encoding="utf-8") as ledger:
            ledger.write(json.dumps({**last, "arm": "EXTRA", "cell_key": "extra"}, sort_keys=True) + "\n")
        one_more = wall(command)
        with Browser(root / "chromium-profile", width=1280, height=900) as browser:
            viewer_loads, report_loads, interactions = page_loads(browser, out, args.repeat)
            if args.screenshot:
                browser.screenshot(args.screenshot)
            errors = browser.errors
        notes = load_notes(out, viewer_loads, report_loads, interactions, errors)

    figures = [
        Figure(f"viewer overview interactive, {cells:,} cells", statistics.median(viewer_loads), "s",
               "report.html of the same out dir (load event)", statistics.median(report_loads), target="< 2 s"),
        Figure(f"swe-arena report + viewer, first build ({pages:,} cell pages)", first_build, "s",
               "json.loads of every ledger line", baseline),
        Figure("swe-arena report + viewer, rebuilt, nothing changed", rebuild, "s",
               "json.loads of every ledger line", baseline),
        Figure("swe-arena report + viewer, one row more", one_more, "s", "json.loads of every ledger line", baseline),
    ]
    report(f"The viewer at {cells:,} cells (load average {os.getloadavg()[0]:.1f})", figures, args, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
