"""Numbers a researcher can publish (issue 31), end to end on bundled instances with arms of known behaviour.

GOLD, EMPTY and HALF (a real ``command`` arm: a script that applies the gold patch of a fixed half of the
instances, and on one of them only in trials 1-3 of 5, so it is flaky by design) x 5 trials. One instance's
gold patch is replaced by one that changes nothing relevant, so calibration finds it broken. Four of the ten
bundled instances keep the sweep at 60 cells (150 with all ten): every arm still has an instance it always
resolves, one it never does, and the flaky one, which is what the checks below need.

The statistics are recomputed here from the ledger with scipy (exact binomial test) and Holm's rule written
out, independently of ``pytest_swe_arena.results.stats``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from helpers.arena import swe_arena

scipy_stats = pytest.importorskip("scipy.stats")

REPO_ROOT = Path(__file__).resolve().parents[2]
ALWAYS, FLAKY, NEVER, BROKEN = "arena__dateranges-41", "arena__slugkit-112", "arena__calcy-58", "arena__lrukit-19"
TRIALS = 5
#: The trials in which HALF resolves the flaky instance: 3 of 5.
FLAKY_TRIALS = (1, 2, 3)
#: A gold patch that applies everywhere and fixes nothing: the instance cannot calibrate.
NOTHING_PATCH = ("diff --git a/CALIBRATION_NOTE.txt b/CALIBRATION_NOTE.txt\nnew file mode 100644\n"
                 "--- /dev/null\n+++ b/CALIBRATION_NOTE.txt\n@@ -0,0 +1 @@\n+nothing\n")

HALF_SCRIPT = """#!/usr/bin/python3
# The HALF arm: applies the gold patch of the instances in PATCHES; on FLAKY only in FLAKY_TRIALS.
import re
import subprocess
import sys

PATCHES = {patches!r}
FLAKY, FLAKY_TRIALS = {flaky!r}, {flaky_trials!r}
# The cell's private dir is named <instance>.<ARM>.r<trial>-<random>; the run dir is its "run".
found = re.search(r"/([A-Za-z0-9_-]+)\\.HALF\\.r([0-9]+)-[^/]*/run/?$", sys.argv[1])
instance, trial = found.group(1), int(found.group(2))
if instance in PATCHES and (instance != FLAKY or trial in FLAKY_TRIALS):
    subprocess.run(["git", "apply", "-"], input=PATCHES[instance].encode(), check=True)
"""


def summary_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(resources.files("pytest_swe_arena").joinpath("schemas/summary.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def bundled_rows(target: Path) -> dict[str, dict]:
    rows = {row["instance_id"]: row for row in map(json.loads, (REPO_ROOT / "instances/suite.jsonl").read_text()
                                                   .splitlines())}
    chosen = {iid: rows[iid] for iid in (ALWAYS, FLAKY, NEVER, BROKEN)}
    for row in chosen.values():
        bundle = target / row["source"]["bundle"]
        bundle.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / "instances" / row["source"]["bundle"], bundle)
    return chosen


def mcnemar_and_holm(verdicts: dict[str, dict[tuple[str, int], bool]], names: list[str]) -> dict[tuple, dict]:
    """Exact McNemar p (scipy's binomial test) of every pair, and Holm's step-down adjustment, from the ledger."""
    pairs = {}
    for index, first in enumerate(names):
        for second in names[index + 1:]:
            common = verdicts[first].keys() & verdicts[second].keys()
            b = sum(verdicts[first][key] and not verdicts[second][key] for key in common)
            c = sum(verdicts[second][key] and not verdicts[first][key] for key in common)
            p = 1.0 if b + c == 0 else scipy_stats.binomtest(b, b + c, 0.5).pvalue
            pairs[(first, second)] = {"only_first": b, "only_second": c, "p": p,
                                      "delta": (b - c) / len(common)}
    ordered = sorted(pairs, key=lambda pair: pairs[pair]["p"])
    running = 0.0
    for rank, pair in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - rank) * pairs[pair]["p"]))
        pairs[pair]["holm"] = running
    return pairs


def test_controls_flake_rates_groups_and_an_excluded_subset(suite):
    rows = bundled_rows(suite.path / "instances")
    patches = {iid: rows[iid]["patch"] for iid in (ALWAYS, FLAKY)}
    rows[BROKEN]["patch"] = NOTHING_PATCH
    suite.instances(list(rows.values()))
    script = suite.path / "half_agent.py"
    script.write_text(HALF_SCRIPT.format(patches=patches, flaky=FLAKY, flaky_trials=FLAKY_TRIALS))
    script.chmod(0o755)
    suite.arms_toml = f'[tool.swe_arena.arms.HALF]\nkind = "command"\ncommand = [{str(script)!r}, "{{run_dir}}"]\n'

    result = suite.run("--arena-calibrate", "--arena-arms=HALF", f"--arena-repeat={TRIALS}", "-n", "2")
    ledger = suite.ledger()
    assert len(ledger) == 3 * 4 * TRIALS
    names = ["HALF", "GOLD", "EMPTY"]
    verdicts = {name: {(row["instance_id"], row["trial"]): row["status"] == "resolved" for row in ledger
                       if row["arm"] == name and row["status"] in ("resolved", "unresolved", "arm_error")}
                for name in names}
    assert all(len(verdicts[name]) == 4 * TRIALS for name in names), "every cell finished and counts"

    # Controls: the broken instance and its rates; the deselection file lists it.
    calibration = json.loads((suite.path / "arena-out/calibration.json").read_text())
    assert calibration["broken"] == [BROKEN] and calibration["flaky"] == []
    assert calibration["instances"][BROKEN]["gold_resolved"] == [0, TRIALS]
    assert calibration["instances"][ALWAYS]["gold_resolved"] == [TRIALS, TRIALS]
    assert calibration["instances"][ALWAYS]["empty_resolved"] == [0, TRIALS]
    exclude = suite.path / "arena-out/calibration-exclude.txt"
    assert [line.split("#")[0].strip() for line in exclude.read_text().splitlines()
            if line.split("#")[0].strip()] == [BROKEN]
    result.stdout.fnmatch_lines([f"  {BROKEN}: broken: gold resolved 0/{TRIALS}, empty resolved 0/{TRIALS}"])

    summary = suite.summary()
    summary_validator().validate(summary)
    # Provenance: the instance file graded, by digest, and the harness's version and commit.
    instance_file = suite.path / "instances/demo.jsonl"
    digests = summary["sweep"]["instance_files"]
    assert list(digests.values()) == [hashlib.sha256(instance_file.read_bytes()).hexdigest()]
    assert Path(next(iter(digests))).resolve() == instance_file.resolve()
    assert "plugin_commit" in summary["sweep"] and summary["sweep"]["plugin_version"]
    arms = {arm["arm"]: arm for arm in summary["arms"]}
    # The flaky instance, found with its rate; the other arms are deterministic.
    assert arms["HALF"]["flaky_instances"] == {FLAKY: [len(FLAKY_TRIALS), TRIALS]}
    assert arms["GOLD"]["flaky_instances"] == arms["EMPTY"]["flaky_instances"] == {}
    result.stdout.fnmatch_lines([f"  HALF flaky on 1 instance(s): {FLAKY} {len(FLAKY_TRIALS)}/{TRIALS}"])
    # Over trials: HALF resolves ALWAYS in every trial and FLAKY in trials 1-3 of 4 instances.
    per_trial = [(1 + (trial in FLAKY_TRIALS)) / 4 for trial in range(1, TRIALS + 1)]
    assert arms["HALF"]["trial_rates"]["rates"] == per_trial
    assert arms["HALF"]["trial_rates"]["standard_error"] == pytest.approx(
        scipy_stats.sem(per_trial))

    # Every pair: McNemar p and Holm-adjusted p as scipy and Holm's rule give them from the ledger.
    expected = mcnemar_and_holm(verdicts, [name for name in summary["arm_order"]])
    assert len(summary["pairs"]) == 3
    for pair in summary["pairs"]:
        mine = expected[tuple(pair["arms"])]
        assert (pair["only_first"], pair["only_second"]) == (mine["only_first"], mine["only_second"])
        assert pair["mcnemar_p"] == pytest.approx(mine["p"], rel=1e-9)
        assert pair["mcnemar_p_holm"] == pytest.approx(mine["holm"], rel=1e-9)
        assert pair["delta"] == pytest.approx(mine["delta"])
        low, high = pair["delta_ci95"]
        assert low <= pair["delta"] <= high
    # The group: GOLD is best (15/20); HALF (8/20) and EMPTY (0/20) are told apart from it at Holm's 0.05.
    groups = summary["groups"]
    assert groups["best"] == "GOLD"
    assert groups["tied_with_best"] == [
        name for name in summary["arm_order"]
        if name == "GOLD" or expected[tuple(sorted_pair(summary, name))]["holm"] >= 0.05]
    assert groups["tied_with_best"] == ["GOLD"]
    # Discrimination: the broken instance nobody resolves cannot decide anything.
    decided = summary["discrimination"]
    assert decided["none_resolve"] == [BROKEN] and decided["all_resolve"] == []
    assert decided["separating"] == 3 and decided["instances"] == 4
    result.stdout.fnmatch_lines([
        "tied with the best (GOLD; exact McNemar, Holm-adjusted p >= 0.05): GOLD",
        "3 of 4 instances decide the comparison (0 resolved by every arm, 1 by none)",
    ])
    # The viewer shows the summary's pairs (one computation), turned around per baseline.
    viewer = (suite.path / "arena-out/viewer/data/overview.js").read_text()
    data = json.loads(viewer[viewer.index("{"):viewer.rindex("}") + 1])
    against_gold = {entry["arm"]: entry for entry in data["comparisons"]["GOLD"]}
    gold_half = next(pair for pair in summary["pairs"] if set(pair["arms"]) == {"GOLD", "HALF"})
    sign = 1 if gold_half["arms"][0] == "HALF" else -1
    assert against_gold["HALF"]["delta"] == pytest.approx(sign * gold_half["delta"])
    assert against_gold["HALF"]["mcnemar_p_holm"] == gold_half["mcnemar_p_holm"]
    assert data["groups"] == groups
    assert data["pairs"] == summary["pairs"] and data["discrimination"] == decided
    # ... and the calibration's flake rates of this very sweep (calibration.json is written before the viewer).
    assert data["calibration"]["broken"] == [BROKEN] and data["calibration"]["flaky"] == []
    shown = data["calibration"]["instances"]
    assert shown == {iid: {key: found[key] for key in shown[iid]} for iid, found in calibration["instances"].items()}
    assert shown[BROKEN] == {"stability": "broken", "ok": False, "gold_resolved": [0, TRIALS],
                             "empty_resolved": [0, TRIALS]}

    # A second sweep over the declared subset: the excluded instance is not run, and the summary says so.
    result = suite.run(f"--arena-exclude={exclude}", "--arena-arms=GOLD", "--arena-out=second", "-n", "2")
    result.stdout.fnmatch_lines([f"swe-arena: excluded 1 instance(s) listed in {exclude} (sha256 *)"])
    assert sorted(row["instance_id"] for row in suite.ledger("second")) == sorted({ALWAYS, FLAKY, NEVER})
    subset = suite.summary("second")["subset"]
    assert subset["excluded"] == [BROKEN] and subset["exclude_file"] == str(exclude)
    report = swe_arena("report", suite.path / "second")
    assert report.returncode == 0, report.stderr
    assert f"rates over the 3 instance(s) left after excluding 1 listed in {exclude}" in report.stdout


def sorted_pair(summary: dict, name: str) -> list[str]:
    """The pair of ``name`` and GOLD in the summary's order (A before B in ``arm_order``)."""
    order = summary["arm_order"]
    return sorted([name, "GOLD"], key=order.index)

